#!/usr/bin/env python3
"""GPU benchmark: the compiled .so against PyTorch eager and torch.compile, same network, same
inputs and parameters, same process; prints the figures and writes
bench/results/gpu-<device>-<date>.json (machine, date, versions, settings, results).

    python bench/gpu.py [NET ...] [--iters 50] [--warmup 10] [--tf32] [--no-torch-compile]

NET: alex_v2, vgg16, inception_v3 (default: all three) or a path to any .nd / Paleo .json.
The named ones are Paleo's corpus files (../shared/corpus/paleo, or $NETC_CORPUS/paleo) when
present, else their line-for-line transcriptions in examples/ (alexnet.nd, vgg16.nd,
inception_v3.nd); each runs at its corpus batch size (128, 64, 64).

Per network: `netc compile` (a fresh process, for the compile time), netc.runtime.load with the
reference executor's random parameters (seed 0), and its random inputs at the full batch. Then:

  netc     the .so's forward on torch's current stream
  eager    netc.runtime.eager.EagerNet: the same IR as a plain functional torch program in f32
           (cuDNN convolutions on channels_last tensors, F.max_pool2d, F.linear, torch.cat)
  compile  torch.compile of that same function (default mode; its compile time is reported apart)

each timed with CUDA events around every forward after `--warmup` untimed ones; the median of
`--iters` is the figure. Outputs are checked against eager (max |diff| / max |eager|). TF32 is off
everywhere (the .so computes in IEEE f32) unless --tf32, which turns it on for torch and compiles
the .so with --tf32. Without a CUDA GPU it says so and exits 0. A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import datetime
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import results_file  # noqa: E402  (bench/results_file.py, beside this script)

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, ROOT)
NAMED = {"alex_v2": "alexnet.nd", "vgg16": "vgg16.nd", "inception_v3": "inception_v3.nd"}


def source_of(name: str) -> str:
    if name not in NAMED:
        if not os.path.exists(name):
            raise SystemExit(f"bench/gpu.py: no network '{name}' (named: {', '.join(NAMED)}; or a file path)")
        return os.path.abspath(name)
    for d in (os.environ.get("NETC_CORPUS"), os.path.join(ROOT, "..", "shared", "corpus"),
              os.path.join(ROOT, "shared", "corpus")):
        if d and os.path.exists(os.path.join(d, "paleo", name + ".json")):
            return os.path.abspath(os.path.join(d, "paleo", name + ".json"))
    return os.path.join(ROOT, "examples", NAMED[name])


def compile_so(src: str, out: str, arch: str, tf32: bool) -> dict:
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "netc", "compile", src, "-o", out, "--target", "cuda", "--arch", arch,
                        *(["--tf32"] if tf32 else [])], capture_output=True, text=True, cwd=ROOT, env=env)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"netc compile {src} failed:\n{r.stderr}")
    m = re.search(r"(\d+) launches, (\d+) kernels \((\d+) from the cache\)", r.stderr)
    return dict(wall_s=round(wall, 2), launches=int(m.group(1)) if m else None,
                kernels=int(m.group(2)) if m else None, cached=int(m.group(3)) if m else None)


def time_cuda(fn, warmup: int, iters: int) -> dict:
    """CUDA events around each call on the current stream, after `warmup` untimed calls."""
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        events.append((s, e))
    torch.cuda.synchronize()
    ms = [s.elapsed_time(e) for s, e in events]
    return dict(median_ms=round(statistics.median(ms), 4), min_ms=round(min(ms), 4),
                mean_ms=round(statistics.fmean(ms), 4), iters=iters, warmup=warmup)


def rel_err(a: dict, r: dict) -> float:
    worst = 0.0
    for k, v in r.items():
        d = float((a[k].double() - v.double()).abs().max()) / max(float(v.double().abs().max()), 1e-30)
        worst = max(worst, d if d == d else float("inf"))
    return worst


def bench_one(name: str, a, arch: str) -> dict:
    import torch
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load as load_source
    from netc.passes.manager import DEFAULT_PIPELINE, PassContext, PassManager
    from netc.runtime import load
    from netc.runtime.eager import EagerNet
    src = source_of(name)
    with tempfile.TemporaryDirectory(prefix="netc-gpu-bench-") as d:
        so = os.path.join(d, "net.so")
        comp = compile_so(src, so, arch, a.tf32)
        net = load(so, seed=a.seed)
    with net:
        b = net.batch
        xs = net.random_inputs(seed=a.seed)                      # the corpus batch
        diag = DiagnosticEngine()
        module = load_source(src, diag)
        PassManager(DEFAULT_PIPELINE).run(module, PassContext(diag=diag, phase="test"))
        owners = {p["name"] for p in net.manifest["parameters"] if "shares" not in p}
        eager = EagerNet(module, net.network, {k: v for k, v in net.params().items() if k in owners}, "cuda",
                         torch.float32)
        with torch.no_grad():
            so_out = net.run(xs)
            ref = eager(xs)
            torch.cuda.synchronize()
            row = dict(network=net.network, file=os.path.relpath(src, ROOT), batch=b,
                       params=sum(math.prod(p["shape"]) for p in net.manifest["parameters"] if "shares" not in p),
                       netc_compile=comp, eager_fallback_layers=eager.fallbacks,
                       netc=time_cuda(lambda: net.forward(**xs), a.warmup, a.iters),
                       eager=time_cuda(lambda: eager(xs), a.warmup, a.iters),
                       agree=dict(netc_vs_eager=rel_err(so_out, ref)))
            if not a.no_torch_compile:
                compiled = torch.compile(eager.__call__)
                t = time.perf_counter()
                c_out = compiled(xs)
                torch.cuda.synchronize()
                row["torch_compile"] = dict(first_call_s=round(time.perf_counter() - t, 2),
                                            **time_cuda(lambda: compiled(xs), a.warmup, a.iters))
                row["agree"]["compile_vs_eager"] = rel_err(c_out, ref)
        for k in ("eager", "torch_compile"):
            if k in row:
                row[f"speedup_vs_{k}"] = round(row[k]["median_ms"] / row["netc"]["median_ms"], 3)
        row["images_per_s"] = {k: round(b / (row[k]["median_ms"] / 1e3), 1)
                               for k in ("netc", "eager", "torch_compile") if k in row}
    del eager, xs, so_out, ref
    torch.cuda.empty_cache()
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("nets", nargs="*", default=list(NAMED), help="alex_v2, vgg16, inception_v3, or files")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tf32", action="store_true", help="TF32 for torch's f32 convolutions/matmuls and the .so")
    ap.add_argument("--no-torch-compile", action="store_true", help="skip torch.compile (its compile takes minutes)")
    ap.add_argument("--out", metavar="FILE.json", help="default: bench/results/gpu-<device>-<date>.json")
    a = ap.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("bench/gpu.py: no CUDA GPU here (torch.cuda.is_available() is False); nothing to time. "
              "Run it on a machine with an NVIDIA GPU (sm_80 or sm_90).", file=sys.stderr)
        return 0
    import triton
    from netc import __version__
    major, minor = torch.cuda.get_device_capability()
    if major not in (8, 9):
        print(f"bench/gpu.py: netc compiles for sm_80 and sm_90; this GPU is sm_{major}{minor}", file=sys.stderr)
        return 0
    arch = f"sm_{major}0"
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.backends.cudnn.allow_tf32 = a.tf32
    torch.backends.cudnn.benchmark = True
    gpu = torch.cuda.get_device_name()
    results = []
    for name in a.nets:
        row = bench_one(name, a, arch)
        results.append(row)
        tc = row.get("torch_compile")
        print(f"{name} (batch {row['batch']}, {row['file']}): netc {row['netc']['median_ms']:.2f} ms, "
              f"eager {row['eager']['median_ms']:.2f} ms"
              + (f", torch.compile {tc['median_ms']:.2f} ms" if tc else "")
              + f"; netc is {row['speedup_vs_eager']:.2f}x eager"
              + (f", {row['speedup_vs_torch_compile']:.2f}x torch.compile" if tc else "")
              + f"; outputs agree to {max(row['agree'].values()):.1e}", flush=True)
    now = datetime.datetime.now()
    doc = dict(date=results_file.now(),
               machine=results_file.machine(gpu=gpu, capability=f"sm_{major}{minor}",
                                            gpu_memory_gib=round(torch.cuda.get_device_properties(0).total_memory
                                                                 / 2 ** 30, 1)),
               versions=dict(netc=__version__, torch=torch.__version__, triton=triton.__version__,
                             cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version()),
               settings=dict(iters=a.iters, warmup=a.warmup, seed=a.seed, tf32=a.tf32, dtype="f32", arch=arch,
                             cudnn_benchmark=True),
               note="median of CUDA-event times per forward (inputs already on the GPU, outputs allocated by "
                    "each call); eager = netc.runtime.eager (the IR as functional torch, channels_last); "
                    "agree = max |diff| / max |eager output|",
               results=results)
    slug = re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-")
    path = a.out or os.path.join(ROOT, "bench", "results", f"gpu-{slug}-{now:%Y%m%d}.json")
    results_file.write(path, doc, ROOT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
