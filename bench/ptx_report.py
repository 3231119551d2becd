#!/usr/bin/env python3
"""What the compiler made of each kernel of a network, read off its PTX on a machine without a GPU.

    python bench/ptx_report.py [NET ...] [--precision bf16,tf32] [--arch 90] [--out FILE]
    python bench/ptx_report.py --train [NET ...] [--precision f32,tf32x3]   # the training step's kernels

NET as for bench/gpu.py (alex_v2, vgg16, inception_v3, resnet50, densenet, or a path), at its file's
batch. Each distinct kernel specialization of the network's inference library (`netc compile`'s
lowering, `--target cuda`) is compiled for sm_<arch> (Triton compiles without a GPU) and its PTX
read for what decides a Hopper kernel's speed before any measurement can:

  cp.async   asynchronous global->shared copies by width in bytes (16: full vectors; 2 or 4: an
             operand Triton could not prove aligned or contiguous)
  ld.global  synchronous global loads by width (scalar ones in a matrix product's loop are not
             software-pipelined: each K step waits for memory)
  mma        the tensor-core instruction (wgmma on sm_90)
  ctas       programs at the compiled batch, against the device's 132 SMs (fewer: most SMs idle)

  st.global  global stores by width

Flags, on matrix-product kernels: `scalar` (global loads or stores of 2 bytes or fewer: one bf16 element
at a time; a load so is synchronous, not software-pipelined), `narrow-async` (asynchronous copies under
16 bytes), `few-ctas` (programs for at most half of the SMs). Writes
bench/results/ptx-<arch>-<date>.json (machine, date, versions). Not a benchmark: the speed these
predict is measured on a GPU (bench/gpu.py); this says which kernels to look at, and a test
(tests/test_codegen.py) pins the facts that matter.
"""
from __future__ import annotations

import argparse
import collections
import datetime
import os
import re
import sys

import results_file  # noqa: E402  (bench/results_file.py)

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.pop("TRITON_INTERPRET", None)

SMS = 132
MATMUL_KERNELS = ("gemm_kernel", "conv2d_kernel", "conv2d_grad_data_kernel", "conv2d_grad_filter_kernel")
CP_ASYNC = re.compile(r"cp\.async\.c[ag]\.shared\.global(?:\.L2::\w+)?\s*\[[^\]]*\],\s*\[[^\]]*\],\s*(\w+)")
LD_GLOBAL = re.compile(r"ld\.global(?:\.\w+)*?\.(v[248]\.)?[bufs](8|16|32|64)\b")
ST_GLOBAL = re.compile(r"st\.global(?:\.\w+)*?\.(v[248]\.)?[bufs](8|16|32|64)\b")


def ptx_facts(ptx: str) -> dict:
    """Counts of the PTX's asynchronous copies and synchronous global loads by width, its tensor-core op."""
    cp = collections.Counter(int(v, 0) for v in CP_ASYNC.findall(ptx))
    ld, st = collections.Counter(), collections.Counter()
    for pattern, counts in ((LD_GLOBAL, ld), (ST_GLOBAL, st)):
        for vec, bits in pattern.findall(ptx):
            counts[(int(vec[1]) if vec else 1) * int(bits) // 8] += 1
    mma = sorted(set(re.findall(r"\b(wgmma\.mma_async|mma\.sync)", ptx)))
    return dict(cp_async={str(k): v for k, v in sorted(cp.items())}, ld_global={str(k): v for k, v in sorted(ld.items())},
                st_global={str(k): v for k, v in sorted(st.items())}, mma=mma)


def network_report(path: str, precision: str, arch: int, train: bool = False) -> list:
    from netc.codegen.lower import lower_network
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load
    from netc.kernels.aot import compile_call
    from netc.pipelines import Options, Plan, Precision, Training, compile
    diag = DiagnosticEngine()
    module = load(path, diag, 1)
    prec = Precision.named(precision)
    if train:    # the training step of `netc compile --train --loss softmax --optimizer momentum [--tf32x3 | --tf32]`
        opts = Options(phase="train", opaque_as_identity=True, precision=prec,
                       training=Training(loss="softmax", optimizer=dict(name="momentum")))
        ctx = compile(module, opts, diag, plan=Plan(mode="training"))
    else:
        ctx = compile(module, Options(phase="test", opaque_as_identity=True, precision=prec), diag,
                      plan=Plan(mode="inference"))
    if diag.has_errors():
        raise SystemExit(diag.render() if hasattr(diag, "render") else "errors in " + path)
    net = module.networks()[0]
    plan = next(iter(ctx.notes["memory_plan"].values()))
    low = lower_network(module, net, plan)
    rows, seen = [], {}
    for L in low.launches:
        name = L.call.kernel.__name__
        if L.spec_key not in seen:
            seen[L.spec_key] = ptx_facts(compile_call(L.call, arch).ptx)
        f = seen[L.spec_key]
        ctas = 1
        for g in L.call.grid:
            ctas *= int(g)
        flags = []
        if name in MATMUL_KERNELS:
            if any(int(w) <= 2 for w in f["ld_global"]) or any(int(w) <= 2 for w in f["st_global"]):
                flags.append("scalar")
            if any(int(w) < 16 for w in f["cp_async"]):
                flags.append("narrow-async")
            if 2 * ctas <= SMS:
                flags.append("few-ctas")
        rows.append(dict(step=L.step, layers=L.layers, kernel=name, ctas=ctas, **f,
                         tiles={k: v for k, v in L.call.constexprs.items() if k.startswith(("BLOCK", "SPLIT"))},
                         flags=flags))
    return rows


def main(argv=None) -> int:
    import gpu   # bench/gpu.py: the named networks
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("nets", nargs="*", default=["alex_v2", "vgg16", "inception_v3", "resnet50", "densenet"])
    ap.add_argument("--precision", default=None, help="bf16, tf32, tf32x3, fp16, f32 (default bf16,tf32; with "
                                                             "--train f32: a training library's tensors are f32)")
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--out", default=None)
    ap.add_argument("--train", action="store_true", help="the training step's kernels instead of inference's")
    args = ap.parse_args(argv)
    results = []
    for n in args.nets:
        src = gpu.source_of(n)
        for prec in (args.precision or ("f32" if args.train else "bf16,tf32")).split(","):
            rows = network_report(src, prec, args.arch, args.train)
            flagged = [r for r in rows if r["flags"]]
            print(f"{n} {'train ' if args.train else ''}{prec}: {len(rows)} launches, {len(flagged)} flagged")
            for r in flagged:
                print(f"  step {r['step']:3d} {r['kernel']:26s} {','.join(r['layers'])[:28]:28s} ctas={r['ctas']:6d} "
                      f"cp.async={r['cp_async']} ld={r['ld_global']} st={r['st_global']} {' '.join(r['flags'])}")
            results.append(dict(network=n, precision=prec, mode="train" if args.train else "inference",
                                file=os.path.relpath(src, ROOT), launches=rows, flagged=len(flagged)))
    import torch
    import triton
    out = args.out or os.path.join(ROOT, "bench", "results", f"ptx-sm{args.arch}-{datetime.date.today()}.json")
    results_file.write(out, dict(date=results_file.now(), machine=results_file.machine(), arch=args.arch, sms=SMS,
                                 versions=dict(torch=torch.__version__, triton=triton.__version__),
                                 results=results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
