#!/usr/bin/env python3
"""GPU benchmark: the compiled .so against PyTorch eager and torch.compile, same network, same
inputs and parameters, same process; prints the figures and writes
bench/results/gpu-<device>-<date>.json (machine, date, versions, settings, results).

    python bench/gpu.py [NET ...] [--precision bf16,tf32] [--iters 50] [--warmup 10]
                        [--compile-mode max-autotune] [--tuning FILE] [--no-torch-compile]
    python bench/gpu.py --train [NET ...] [--optimizer momentum] [--lr 1e-4] ...

NET: alex_v2, vgg16, inception_v3, resnet50, densenet (default: all five) or a path to any .nd /
Paleo .json. The named ones are Paleo's corpus files (../shared/corpus/paleo and paleo-generated,
or under $NETC_CORPUS) when present, else (the first three) their transcriptions in examples/;
each runs at its corpus batch size (128, 64, 64, 1, 1). DenseNet's Caffe BatchNorm layers, which
Paleo's converter left as unknown types, run as the identity (--opaque-as-identity) in all three.

Per network and precision (bf16: bf16 tensors and weights, f32 accumulation; tf32: f32 tensors,
TF32 tensor-core products; also f32 and fp16): `netc compile` (a fresh process, for the compile
time; --tuning FILE passes netc's autotuning results), netc.runtime.load with the reference
executor's random parameters (seed 0), and its random inputs at the full batch. Then:

  netc        the .so's forward on torch's current stream (input copy in, output copy out)
  netc_graph  the same forward captured once in a CUDA graph and replayed (what a serving loop does)
  eager       netc.runtime.eager.EagerNet: the same IR as a plain functional torch program in the
              precision's dtype (cuDNN convolutions on channels_last tensors, F.max_pool2d, ...)
  compile     torch.compile(mode=--compile-mode, default max-autotune) of that same function

each timed with CUDA events around every call after `--warmup` untimed ones; the median of
`--iters` is the figure. Outputs are checked against eager (max |diff| / max |eager|).
Also: the achieved FLOP/s of each (Paleo's forward FLOPs of the network / median time) against
the device's dense tensor-core peak (data sheet; and an 8192^3 matrix product measured in the same
run), the FLOP/s of the convolution kernels alone from netc's per-launch profile
(Net.profile: CUDA events around each launch) with Paleo's predicted time of every launch beside it
(netc.costmodel, as `netc run NET.so --profile`), and peak memory: netc's (its one arena plus the
inputs and outputs) against eager's and torch.compile's torch.cuda.max_memory_allocated over a
forward (their parameters and inputs included). Without a CUDA GPU it says so and exits 0.
A benchmark, not a test.

--train: a training step instead of a forward -- forward, backward and the optimizer's update
(--optimizer, default momentum; --lr, default 1e-4: the steps timed keep training) -- on f32 tensors (a
training library's), its products in IEEE f32 (--precision f32, the default), TF32 (tf32: eager and
torch.compile with TF32 on too) or 3xTF32 (tf32x3: about f32's accuracy on the tensor cores; eager and
torch.compile in IEEE f32, the same accuracy class), a softmax loss appended where the network has none (as
`--loss softmax` does). netc: `netc compile --train` and Net.train_step (not waiting for the loss);
eager: netc.runtime.eager.EagerTrainer (the same network as functional torch, torch.autograd and
torch.optim from the same parameters); compile: EagerTrainer with its forward and loss under
torch.compile (backward through AOTAutograd, the torch.optim step eager). Before timing, one step of
each from the same parameters and inputs: the losses and the updated parameters are compared
(max |diff| / max |eager|). FLOP/s count the forward and both backward passes (Paleo's
backward-data and backward-filter FLOPs); memory: netc's training arena plus the inputs against
the peak allocated over an eager (and compiled) step, parameters, gradients and optimizer state
included. Results go to bench/results/gpu-train-<device>-<date>.json.
"""
from __future__ import annotations

import argparse
import datetime
import json
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
# name -> (corpus folder, transcription in examples/ or None)
NAMED = {"alex_v2": ("paleo", "alexnet.nd"), "vgg16": ("paleo", "vgg16.nd"),
         "inception_v3": ("paleo", "inception_v3.nd"), "resnet50": ("paleo-generated", None),
         "densenet": ("paleo-generated", None)}
OPAQUE_AS_IDENTITY = {"densenet"}
# --train: the layer the softmax loss goes on where a network has several outputs (DenseNet's Caffe
# Accuracy and SoftmaxWithLoss layers, identities here: the classifier's output)
LOSS_ON = {"densenet": "SoftmaxWithLoss1"}
# precision -> (netc compile flags, torch dtype name, TF32 in torch)
PRECISIONS = {"bf16": (("--dtype", "bf16"), "bfloat16", False), "fp16": (("--dtype", "fp16"), "float16", False),
              "tf32": (("--tf32",), "float32", True), "f32": ((), "float32", False),
              # 3xTF32 (about f32's accuracy): eager and torch.compile in IEEE f32, the same accuracy class
              "tf32x3": (("--tf32x3",), "float32", False)}
TRAIN_PRECISIONS = ("f32", "tf32", "tf32x3")     # a training library's (its tensors are f32)
# dense tensor-core peaks (FLOP/s) from NVIDIA's data sheets (SXM parts, without sparsity)
PEAKS = {"H100": {"bf16": 989.4e12, "fp16": 989.4e12, "tf32": 494.7e12, "f32": 66.9e12,
                  "tf32x3": 494.7e12 / 3},
         "H200": {"bf16": 989.4e12, "fp16": 989.4e12, "tf32": 494.7e12, "f32": 66.9e12,
                  "tf32x3": 494.7e12 / 3},
         "A100": {"bf16": 312e12, "fp16": 312e12, "tf32": 156e12, "f32": 19.5e12, "tf32x3": 156e12 / 3}}


def source_of(name: str) -> str:
    if name not in NAMED:
        if not os.path.exists(name):
            raise SystemExit(f"bench/gpu.py: no network '{name}' (named: {', '.join(NAMED)}; or a file path)")
        return os.path.abspath(name)
    folder, example = NAMED[name]
    for d in (os.environ.get("NETC_CORPUS"), os.path.join(ROOT, "..", "shared", "corpus"),
              os.path.join(ROOT, "shared", "corpus")):
        if d and os.path.exists(os.path.join(d, folder, name + ".json")):
            return os.path.abspath(os.path.join(d, folder, name + ".json"))
    if example is None:
        raise SystemExit(f"bench/gpu.py: {name} needs the shared corpus ({folder}/{name}.json); set NETC_CORPUS")
    return os.path.join(ROOT, "examples", example)


def compile_so(src: str, out: str, arch: str, flags: list) -> dict:
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "netc", "compile", src, "-o", out, "--target", "cuda", "--arch", arch,
                        *flags], capture_output=True, text=True, cwd=ROOT, env=env)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"netc compile {src} {' '.join(flags)} failed:\n{r.stderr}")
    m = re.search(r"(\d+) launches, (\d+) kernels \((\d+) from the cache\)", r.stderr)
    tuned = re.search(r"(\d+) of (\d+) kernels tuned", r.stderr)
    return dict(wall_s=round(wall, 2), flags=flags, launches=int(m.group(1)) if m else None,
                kernels=int(m.group(2)) if m else None, cached=int(m.group(3)) if m else None,
                tuned=f"{tuned.group(1)}/{tuned.group(2)}" if tuned else None)


PREBUILT: list = []     # --prebuilt DIR: libraries compiled ahead (--prebuild), looked up by prebuilt_name


def prebuilt_name(src: str, arch: str, flags: list) -> str:
    """The file name of a library compiled ahead for (source, arch, flags): the source's stem and a hash."""
    import hashlib
    key = json.dumps([os.path.basename(src), arch, list(flags)])
    return f"{os.path.splitext(os.path.basename(src))[0]}-{hashlib.sha1(key.encode()).hexdigest()[:10]}.so"


def compile_and_load(src: str, arch: str, flags: list, seed: int):
    """`netc compile` (a fresh process: its time is the compile time) and netc.runtime.load of the
    library with random parameters (seed), from a temporary directory; or the library --prebuilt holds
    (compiled ahead on any machine: Triton compiles cubins without a GPU)."""
    from netc.runtime import load
    for d in PREBUILT:
        so = os.path.join(d, prebuilt_name(src, arch, flags))
        if os.path.exists(so):
            return dict(prebuilt=os.path.basename(so), flags=flags), load(so, seed=seed)
    with tempfile.TemporaryDirectory(prefix="netc-gpu-bench-") as d:
        so = os.path.join(d, "net.so")
        comp = compile_so(src, so, arch, flags)
        return comp, load(so, seed=seed)


def prebuild(a) -> int:
    """--prebuild DIR: compile here (no GPU needed) every library the run with the same arguments would
    compile, named for --prebuilt; a lease then spends its minutes measuring, not compiling."""
    os.makedirs(a.prebuild, exist_ok=True)
    arch = a.arch
    jobs = []
    for name in a.nets:
        src = source_of(name)
        opaque = name in OPAQUE_AS_IDENTITY or a.opaque_as_identity
        if a.train:
            for p in precisions_of(a):
                jobs.append((src, train_flags(name, a, p)))
        else:
            for p in precisions_of(a):
                jobs.append((src, list(PRECISIONS[p][0]) + (["--opaque-as-identity"] if opaque else [])
                             + (["--tuning", a.tuning] if a.tuning else [])))
    for src, flags in jobs:
        out = os.path.join(a.prebuild, prebuilt_name(src, arch, flags))
        comp = compile_so(src, out, arch, flags)
        print(f"{os.path.relpath(out, ROOT)}: {os.path.basename(src)} {' '.join(flags)}: {comp['wall_s']} s, "
              f"{os.path.getsize(out) / 2 ** 20:.1f} MiB", flush=True)
    return 0


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
    ms = sorted(s.elapsed_time(e) for s, e in events)
    return dict(median_ms=round(statistics.median(ms), 4), min_ms=round(ms[0], 4),
                p90_ms=round(ms[int(0.9 * (len(ms) - 1))], 4), mean_ms=round(statistics.fmean(ms), 4),
                iters=iters, warmup=warmup)


def rel_err(a: dict, r: dict) -> float:
    worst = 0.0
    for k, v in r.items():
        d = float((a[k].double() - v.double()).abs().max()) / max(float(v.double().abs().max()), 1e-30)
        worst = max(worst, d if d == d else float("inf"))
    return worst


def peak_memory(fn, resident_bytes: int) -> int:
    """Bytes at the peak of one call of fn: what the caching allocator held above its level before
    the call, plus `resident_bytes` (the caller's parameters and inputs, already allocated)."""
    import torch
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    del out
    return peak - before + resident_bytes


def nbytes(ts) -> int:
    return sum(t.numel() * t.element_size() for t in ts)


def graph_of(net, xs):
    """net.forward(**xs) captured in a CUDA graph (the .so launches on the capturing stream)."""
    import torch
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            net.forward(**xs)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        outs = net.forward(**xs)
    return g, outs


def measured_matmul_peak(dtype_name: str, tf32: bool) -> float:
    """FLOP/s of an 8192^3 torch matrix product on random data (the library's practical ceiling)."""
    import torch
    dt = getattr(torch, dtype_name)
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randn(8192, 8192, device="cuda", dtype=dt)
    b = torch.randn(8192, 8192, device="cuda", dtype=dt)
    t = time_cuda(lambda: a @ b, 3, 10)
    del a, b
    return 2 * 8192 ** 3 / (t["median_ms"] / 1e3)


def profile_convs(net, xs, repeat: int) -> dict | None:
    """Per-launch CUDA-event times (Net.profile): the share of convolution and inner-product
    kernels, and their FLOP/s; beside each, Paleo's prediction for its FLOPs and bytes on this
    device (netc.costmodel.layer_time, as `netc run NET.so --profile` prints it): predicted_ms, and
    per op the factor predicted / measured (1: as fast as the model says)."""
    if not hasattr(net, "profile"):
        return None
    try:
        rows = net.profile(xs, repeat=repeat)
    except Exception as e:   # an old library without netc_profile: say so, keep benchmarking
        return dict(error=f"{type(e).__name__}: {e}")
    import torch
    from netc.costmodel import get_device, layer_time
    from netc.profile import DEVICE_PATTERNS
    gpu = torch.cuda.get_device_name().upper()
    key = next((k for pattern, k in DEVICE_PATTERNS if pattern in gpu), None)
    dev = get_device(key) if key else None

    def predicted(r) -> float | None:
        return layer_time(dev, r.get("flops") or 0, r.get("bytes") or 0) * 1e3 if dev is not None else None

    launches = [r for r in rows if r.get("kind", "launch") == "launch" and r.get("op")]
    out = dict(launches_ms=round(sum(r["median_ms"] for r in launches), 4), costmodel_device=key)
    if dev is not None:
        out["predicted_ms"] = round(sum(predicted(r) for r in launches), 4)
    for op in ("netc.conv2d", "netc.inner_product"):
        sel = [r for r in rows if r.get("op") == op]
        if sel:
            ms = sum(r["median_ms"] for r in sel)
            fl = sum(r.get("flops") or 0 for r in sel)
            out[op.split(".")[1]] = dict(launches=len(sel), ms=round(ms, 4), flops=fl,
                                         tflops=round(fl / (ms / 1e3) / 1e12, 1) if ms else None)
            if dev is not None:
                pred = sum(predicted(r) for r in sel)
                out[op.split(".")[1]].update(predicted_ms=round(pred, 4), factor=round(pred / ms, 3) if ms else None)
    top = sorted(launches, key=lambda r: -r["median_ms"])[:8]
    out["slowest"] = [dict(step=r.get("step"), kernel=r.get("kernel"), layers=r.get("layers"),
                           ms=round(r["median_ms"], 4),
                           tflops=round((r.get("flops") or 0) / (r["median_ms"] / 1e3) / 1e12, 1)
                           if r["median_ms"] else None,
                           **({"predicted_ms": round(predicted(r), 4)} if dev is not None else {}))
                      for r in top]
    out["launches"] = [dict(step=r.get("step"), kernel=r.get("kernel_name") or r.get("kernel"), layers=r.get("layers"),
                            ms=round(r["median_ms"], 4),
                            **({"predicted_ms": round(predicted(r), 4)} if dev is not None else {}))
                       for r in launches]
    return out


def bench_one(name: str, precision: str, a, arch: str) -> dict:
    import torch
    from netc.diagnostics import DiagnosticEngine
    from netc.explain import layer_rows
    from netc.frontend import load as load_source
    from netc.pipelines import Options, inference
    from netc.runtime.eager import EagerNet
    flags, dtype_name, tf32 = PRECISIONS[precision]
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    dtype = getattr(torch, dtype_name)
    src = source_of(name)
    opaque = name in OPAQUE_AS_IDENTITY or a.opaque_as_identity
    flags = list(flags) + (["--opaque-as-identity"] if opaque else []) + (["--tuning", a.tuning] if a.tuning else [])
    comp, net = compile_and_load(src, arch, flags, a.seed)
    with net:
        b = net.batch
        xs = net.random_inputs(seed=a.seed)                      # the corpus batch
        diag = DiagnosticEngine()
        module = load_source(src, diag)
        inference(module, Options(phase="test", opaque_as_identity=opaque), diag)
        rows = layer_rows(module)
        flops = sum(r["flops_fwd"] for r in rows)
        owners = {p["name"] for p in net.manifest["parameters"] if "shares" not in p}
        eager = EagerNet(module, net.network, {k: v for k, v in net.params().items() if k in owners}, "cuda", dtype)
        exs = {k: v.to(dtype) if v.is_floating_point() else v for k, v in xs.items()}
        row = dict(network=net.network, precision=precision, file=os.path.relpath(src, ROOT), batch=b,
                   params=sum(math.prod(p["shape"]) for p in net.manifest["parameters"] if "shares" not in p),
                   flops_fwd=flops, netc_compile=comp, eager_fallback_layers=eager.fallbacks)
        with torch.no_grad():
            so_out = net.run(xs)
            ref = eager(exs)
            torch.cuda.synchronize()
            row["agree"] = dict(netc_vs_eager=rel_err(so_out, ref))
            row["netc"] = time_cuda(lambda: net.forward(**xs), a.warmup, a.iters)
            try:
                g, g_out = graph_of(net, xs)
                g.replay()
                torch.cuda.synchronize()
                row["agree"]["netc_graph_vs_eager"] = rel_err(dict(zip([s.name for s in net.outputs], g_out)), ref)
                row["netc_graph"] = time_cuda(g.replay, a.warmup, a.iters)
                del g, g_out
            except Exception as e:     # report, do not hide: capture is a feature users rely on
                row["netc_graph"] = dict(error=f"{type(e).__name__}: {e}")
            row["eager"] = time_cuda(lambda: eager(exs), a.warmup, a.iters)
            io_bytes = nbytes(xs.values()) + nbytes(so_out.values())
            eager_params = eager.param_bytes
            row["memory"] = dict(netc_arena_bytes=net.manifest["memory"]["arena_bytes"],
                                 netc_bytes=net.manifest["memory"]["arena_bytes"] + io_bytes,
                                 eager_bytes=peak_memory(lambda: eager(exs), eager_params + nbytes(exs.values())))
            row["profile"] = profile_convs(net, xs, max(5, a.iters // 5))
            if not a.no_torch_compile:
                torch._dynamo.reset()
                compiled = torch.compile(eager.__call__, mode=a.compile_mode)
                t = time.perf_counter()
                c_out = compiled(exs)
                torch.cuda.synchronize()
                first = time.perf_counter() - t
                c_out = {k: v.clone() for k, v in compiled(exs).items()}
                row["agree"]["compile_vs_eager"] = rel_err(c_out, ref)
                row["torch_compile"] = dict(mode=a.compile_mode, first_call_s=round(first, 2),
                                            **time_cuda(lambda: compiled(exs), a.warmup, a.iters))
                row["memory"]["torch_compile_bytes"] = peak_memory(lambda: compiled(exs),
                                                                   eager_params + nbytes(exs.values()))
                del compiled, c_out
        m = row["memory"]
        m["netc_over_eager"] = round(m["netc_bytes"] / m["eager_bytes"], 3)
        for k in ("netc", "netc_graph", "eager", "torch_compile"):
            if k in row and "median_ms" in row[k]:
                row[k]["tflops"] = round(flops / (row[k]["median_ms"] / 1e3) / 1e12, 2)
        best = min((row[k]["median_ms"], k) for k in ("netc", "netc_graph") if "median_ms" in row.get(k, {}))
        row["netc_best"] = best[1]
        for k in ("eager", "torch_compile"):
            if k in row:
                row[f"netc_over_{k}"] = round(best[0] / row[k]["median_ms"], 3)
        row["images_per_s"] = {k: round(b / (row[k]["median_ms"] / 1e3), 1)
                               for k in ("netc", "netc_graph", "eager", "torch_compile") if "median_ms" in row.get(k, {})}
    del eager, xs, exs, so_out, ref
    torch.cuda.empty_cache()
    return row


def training_inputs(net, seed: int) -> dict:
    """The training step's inputs at the compiled batch (data as the reference draws it, class labels)."""
    import torch
    from netc.runtime.reference import random_float_input, random_labels
    out = {}
    for s in net.train_inputs:
        if s.classes is not None:
            x = random_labels(s.name, s.shape, s.classes, seed, s.dtype)
        else:
            x = random_float_input(s.name, s.shape, seed, torch.float64).to(s.dtype)
        out[s.name] = x.to(net.device)
    return out


def kept_bytes(trainer) -> int:
    """What an eager trainer holds between steps: its parameters and the optimizer's state (the
    gradients are freed by zero_grad(set_to_none=True) and counted in the step's peak)."""
    import torch
    state = [v for st in trainer.optimizer.state.values() for v in st.values() if torch.is_tensor(v)]
    return nbytes(trainer.params.values()) + nbytes(state)


def eager_training_module(src: str, opaque: bool, loss_on: str | None = None):
    """The network as an inference module with the loss `netc compile --train --loss softmax` trains."""
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load as load_source
    from netc.passes.backward import append_loss
    from netc.pipelines import Options, inference, reinfer_shapes
    diag = DiagnosticEngine()
    module = load_source(src, diag)
    ctx = inference(module, Options(phase="train", opaque_as_identity=opaque), diag)
    for net in module.networks():
        append_loss(net, "softmax", diag, on=loss_on)
    reinfer_shapes(module, ctx)
    return module


def precisions_of(a) -> list:
    """--precision's list (default: bf16,tf32 for inference, f32 for --train)."""
    return [p.strip() for p in (a.precision or ("f32" if a.train else "bf16,tf32")).split(",") if p.strip()]


def train_flags(name: str, a, precision: str) -> list:
    """`netc compile` flags of the training library bench_train times."""
    opaque = name in OPAQUE_AS_IDENTITY or a.opaque_as_identity
    loss_on = LOSS_ON.get(name)
    return (["--train", "--loss", "softmax", "--optimizer", a.optimizer] + list(PRECISIONS[precision][0])
            + (["--opaque-as-identity"] if opaque else []) + (["--loss-on", loss_on] if loss_on else []))


def bench_train(name: str, a, arch: str, precision: str = "f32") -> dict:
    import torch
    from netc.explain import layer_rows
    from netc.runtime.eager import EagerTrainer
    tf32 = PRECISIONS[precision][2]        # eager's TF32 where netc's library takes TF32 products
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    src = source_of(name)
    opaque = name in OPAQUE_AS_IDENTITY or a.opaque_as_identity
    loss_on = LOSS_ON.get(name)
    flags = train_flags(name, a, precision)
    comp, net = compile_and_load(src, arch, flags, a.seed)
    with net:
        b = net.batch
        module = eager_training_module(src, opaque, loss_on)
        rows = layer_rows(module)
        flops = sum(r["flops_fwd"] + r["flops_bwd_data"] + r["flops_bwd_filter"] for r in rows)
        t = net.manifest["training"]
        state = set(t.get("state") or []) | {p["name"] for p in net.manifest["parameters"] if "state" in p}
        start = {k: v for k, v in net.get_params().items() if k not in state}
        xs = training_inputs(net, a.seed)
        row = dict(network=net.network, precision=precision, mode="train", optimizer=t["optimizer"], lr=a.lr,
                   file=os.path.relpath(src, ROOT), batch=b, flops_step=flops, netc_compile=comp)

        def trainer():
            return EagerTrainer(module, net.network, {k: v.to("cuda") for k, v in start.items()}, t["optimizer"],
                                device="cuda", dtype=torch.float32, frozen=t.get("frozen") or ())

        eager = trainer()
        row["eager_fallback_layers"] = eager.net.fallbacks
        # one step each from the same parameters and inputs: the losses and the updated parameters
        loss_netc = net.train_step(xs, a.lr, seed=a.seed)
        loss_eager = float(eager.step(xs, a.lr))
        after = net.get_params()
        row["agree"] = dict(loss=abs(loss_netc - loss_eager) / max(abs(loss_eager), 1e-30),
                            params=rel_err({k: after[k].to("cuda") for k in eager.params},
                                           {k: v.detach() for k, v in eager.params.items()}))
        row["netc"] = time_cuda(lambda: net.train_step(xs, a.lr, seed=a.seed, wait=False), a.warmup, a.iters)
        row["eager"] = time_cuda(lambda: eager.step(xs, a.lr), a.warmup, a.iters)
        resident = nbytes(xs.values())
        row["memory"] = dict(netc_arena_bytes=t["memory"]["arena_bytes"],
                             netc_bytes=t["memory"]["arena_bytes"] + resident,
                             eager_bytes=peak_memory(lambda: eager.step(xs, a.lr), resident + kept_bytes(eager)))
        del eager
        if not a.no_torch_compile:
            torch._dynamo.reset()
            comp_tr = trainer()
            comp_tr.loss = torch.compile(comp_tr.loss, mode=a.compile_mode)
            t0 = time.perf_counter()
            loss_c = float(comp_tr.step(xs, a.lr))
            torch.cuda.synchronize()
            first = time.perf_counter() - t0
            row["agree"]["compile_loss"] = abs(loss_c - loss_eager) / max(abs(loss_eager), 1e-30)
            row["torch_compile"] = dict(mode=a.compile_mode, first_call_s=round(first, 2),
                                        **time_cuda(lambda: comp_tr.step(xs, a.lr), a.warmup, a.iters))
            row["memory"]["torch_compile_bytes"] = peak_memory(lambda: comp_tr.step(xs, a.lr),
                                                               resident + kept_bytes(comp_tr))
            del comp_tr
        m = row["memory"]
        m["netc_over_eager"] = round(m["netc_bytes"] / m["eager_bytes"], 3)
        for k in ("netc", "eager", "torch_compile"):
            if "median_ms" in row.get(k, {}):
                row[k]["tflops"] = round(flops / (row[k]["median_ms"] / 1e3) / 1e12, 2)
        for k in ("eager", "torch_compile"):
            if k in row:
                row[f"netc_over_{k}"] = round(row["netc"]["median_ms"] / row[k]["median_ms"], 3)
        row["images_per_s"] = {k: round(b / (row[k]["median_ms"] / 1e3), 1)
                               for k in ("netc", "eager", "torch_compile") if "median_ms" in row.get(k, {})}
    torch.cuda.empty_cache()
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("nets", nargs="*", default=list(NAMED), help=", ".join(NAMED) + ", or files")
    ap.add_argument("--precision", default=None,
                    help="comma-separated: bf16, tf32, tf32x3, fp16, f32 (default bf16,tf32); with --train f32, tf32, "
                         "tf32x3 (default f32)")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compile-mode", default="max-autotune", help="torch.compile mode (default max-autotune)")
    ap.add_argument("--no-torch-compile", action="store_true", help="skip torch.compile (its compile takes minutes)")
    ap.add_argument("--tuning", metavar="FILE", help="netc autotuning results for `netc compile --tuning`")
    ap.add_argument("--opaque-as-identity", action="store_true", help="for files given by path")
    ap.add_argument("--out", metavar="FILE.json", help="default: bench/results/gpu-<device>-<date>.json")
    ap.add_argument("--train", action="store_true", help="time a training step (f32 tensors) instead of a forward")
    ap.add_argument("--optimizer", default="momentum", help="with --train: sgd, momentum, nesterov, adam, rmsprop")
    ap.add_argument("--lr", type=float, default=1e-4, help="with --train: the learning rate of every step")
    ap.add_argument("--prebuilt", metavar="DIR", action="append", default=[],
                    help="take the libraries from DIR where --prebuild compiled them (else compile here)")
    ap.add_argument("--prebuild", metavar="DIR", help="only compile the libraries into DIR (no GPU needed)")
    ap.add_argument("--arch", default="sm_90", help="with --prebuild: the architecture (default sm_90)")
    a = ap.parse_args(argv)
    if a.prebuild:
        return prebuild(a)
    PREBUILT[:] = a.prebuilt
    precisions = precisions_of(a)
    known = TRAIN_PRECISIONS if a.train else tuple(PRECISIONS)
    bad = [p for p in precisions if p not in known]
    if bad or a.iters < 50:
        raise SystemExit(f"bench/gpu.py: unknown precision {bad} (known{' with --train' if a.train else ''}: "
                         f"{', '.join(known)})" if bad else "bench/gpu.py: --iters must be at least 50 (the figure is a median)")
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
    torch.backends.cudnn.benchmark = True
    gpu = torch.cuda.get_device_name()
    peaks = next((v for k, v in PEAKS.items() if k in gpu), None)
    # (3xTF32 has no torch matmul of its own: no measured peak)
    measured = {p: measured_matmul_peak(PRECISIONS[p][1], PRECISIONS[p][2]) for p in precisions if p != "tf32x3"}
    results = []
    slug = re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-")
    kind = "gpu-train" if a.train else "gpu"
    path = a.out or os.path.join(ROOT, "bench", "results", f"{kind}-{slug}-{datetime.datetime.now():%Y%m%d-%H%M}.json")

    def save():
        # after every network: a run cut off by its time limit keeps what it measured
        doc = dict(date=results_file.now(),
                   machine=results_file.machine(gpu=gpu, capability=f"sm_{major}{minor}",
                                                gpu_memory_gib=round(torch.cuda.get_device_properties(0).total_memory
                                                                     / 2 ** 30, 1)),
                   versions=dict(netc=__version__, torch=torch.__version__, triton=triton.__version__,
                                 cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version()),
                   settings=dict(iters=a.iters, warmup=a.warmup, seed=a.seed, precisions=precisions, arch=arch,
                                 train=a.train, optimizer=a.optimizer if a.train else None, lr=a.lr if a.train else None,
                                 compile_mode=None if a.no_torch_compile else a.compile_mode, tuning=a.tuning,
                                 cudnn_benchmark=True),
                   peaks_flops=dict(datasheet=peaks, measured_matmul_8192=measured),
                   note=("median of CUDA-event times per training step (forward, backward, update; inputs on the GPU; "
                         "netc does not wait for its loss); eager = netc.runtime.eager.EagerTrainer (autograd, torch.optim), "
                         "torch_compile = its forward and loss compiled; netc_over_X = netc's median / X's; tflops = "
                         "Paleo's forward + backward FLOPs / median time; memory: netc = training arena + inputs, "
                         "eager/torch_compile = peak allocated over a step plus parameters and optimizer state; agree = "
                         "after one step from the same parameters: loss and parameters, max |diff| / max |eager|")
                        if a.train else
                        "median of CUDA-event times per forward (inputs already on the GPU, outputs allocated by "
                        "each call); netc_graph: the .so's forward captured in a CUDA graph; eager = "
                        "netc.runtime.eager (the IR as functional torch, channels_last) in the precision's dtype; "
                        "netc_over_X = netc's best (plain or graph) median / X's median (below 1: netc is faster); "
                        "tflops = Paleo's forward FLOPs / median time; memory: netc = arena + inputs + outputs, "
                        "eager/torch_compile = peak allocated over a forward, parameters and inputs included; "
                        "agree = max |diff| / max |eager output|",
                   results=results)
        results_file.write(path, doc, ROOT)

    for precision in precisions:
        for name in a.nets:
            try:
                row = bench_train(name, a, arch, precision) if a.train else bench_one(name, precision, a, arch)
            except Exception as e:      # one network's failure leaves the others' figures
                import traceback
                traceback.print_exc()
                print(f"{name} {precision}: FAILED: {type(e).__name__}: {e}", flush=True)
                results.append(dict(network=name, precision=precision, error=f"{type(e).__name__}: {e}"))
                save()
                continue
            if a.train:
                tc = row.get("torch_compile")
                print(f"{name} {precision} train step (batch {row['batch']}, {a.optimizer}): netc {row['netc']['median_ms']:.3f} ms"
                      f", eager {row['eager']['median_ms']:.3f}"
                      + (f", torch.compile {tc['median_ms']:.3f}" if tc else "")
                      + (f"; netc/torch.compile {row['netc_over_torch_compile']:.2f}" if tc else "")
                      + f"; netc/eager {row['netc_over_eager']:.2f}"
                      + f"; memory netc/eager {row['memory']['netc_over_eager']:.2f}"
                      + f"; agree loss {row['agree']['loss']:.1e} params {row['agree']['params']:.1e}", flush=True)
                if peaks:
                    for k in ("netc", "eager", "torch_compile"):
                        if "tflops" in row.get(k, {}):
                            row[k]["of_peak"] = round(row[k]["tflops"] * 1e12 / peaks[precision], 4)
                results.append(row)
                save()
                continue
            if peaks:
                for k in ("netc", "netc_graph", "eager", "torch_compile"):
                    if "tflops" in row.get(k, {}):
                        row[k]["of_peak"] = round(row[k]["tflops"] * 1e12 / peaks[precision], 4)
                conv = (row.get("profile") or {}).get("conv2d")
                if conv and conv.get("tflops"):
                    conv["of_peak"] = round(conv["tflops"] * 1e12 / peaks[precision], 4)
            results.append(row)
            save()
            tc = row.get("torch_compile")
            gr = row.get("netc_graph", {})
            conv = (row.get("profile") or {}).get("conv2d") or {}
            print(f"{name} {precision} (batch {row['batch']}): netc {row['netc']['median_ms']:.3f} ms"
                  + (f", graph {gr['median_ms']:.3f}" if "median_ms" in gr else "")
                  + f", eager {row['eager']['median_ms']:.3f}"
                  + (f", torch.compile {tc['median_ms']:.3f}" if tc else "")
                  + (f"; netc/torch.compile {row['netc_over_torch_compile']:.2f}" if tc else "")
                  + f"; netc/eager {row['netc_over_eager']:.2f}"
                  + (f"; convs {conv['tflops']} TFLOP/s" if conv.get("tflops") else "")
                  + f"; memory netc/eager {row['memory']['netc_over_eager']:.2f}"
                  + f"; agree {max(row['agree'].values()):.1e}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
