#!/usr/bin/env python3
"""CPU benchmark (issue 28): netc's CPU target (`--target cpu`, runtime/cpu.py) against its reference executor
and PyTorch eager on the same network, parameters, inputs and thread count, in one run; prints the figures and
writes bench/results/cpu-<date>.json (machine, date, versions, settings, results).

    python bench/cpu.py [NET.nd ...] [--threads 2] [--iters 30] [--warmup 3] [--torch-compile]

NET: default examples/digits.nd, examples/lenet.nd, alexnet-narrow and char-rnn (ALEXNET_NARROW, CHAR_RNN below); a softmax loss is
appended where a network has none, as `--loss softmax` does. Per network:

  train   one training step (forward, backward, the optimizer's update: the file's optimizer, else SGD with
          momentum 0): netc cpu (CpuTrainer.step), netc reference (ReferenceTrainer, f32 storage and f64
          arithmetic: the oracle), eager (runtime/eager.py EagerTrainer: the same network as functional torch,
          torch.autograd, torch.optim), and with --torch-compile torch.compile of eager's forward and loss
  infer   one forward: netc cpu (run_cpu), eager (EagerNet under no_grad)

netc cpu, eager and torch.compile are interleaved: after --warmup untimed calls of each, every one of --iters rounds
calls each once (in a rotating order), timed with time.perf_counter, so load from other processes on a shared
machine falls on all of them alike; the median is the figure and the ratios (netc cpu / eager, / torch.compile)
are of medians from the same rounds; netc_cpu_over_eager_min is the ratio of the fastest calls (on a machine shared
with other work, what a call costs when nothing else takes the cores). The reference executor (slow, the oracle) is timed alone, fewer times.
`cpu_step` records the generated step's planned arena bytes and the ops that took no out= lowering. `peak_bytes`:
what lives between calls (netc: the arenas and the step's scratch tensors; eager: parameters, gradients, optimizer
state) plus the most a call holds beyond it (transient_peak: torch.profiler's allocations, at op resolution). A
benchmark, not a test.
"""
from __future__ import annotations

import argparse
import datetime
import os
import re
import statistics
import sys
import time

import results_file  # noqa: E402  (bench/results_file.py, beside this script)

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, ROOT)
DEFAULT = ["examples/digits.nd", "examples/lenet.nd", "alexnet-narrow", "char-rnn"]
# AlexNet's layer sequence (examples/alexnet.nd: five convolutions, overlapping 3x3/2 max pools, three fully
# connected layers with dropout) narrowed to run on a laptop: 65x65 images, 16-48 channels, 256-wide fc layers,
# 10 classes, batch 32 (the sizes chosen so that every pooling window lies inside its input)
ALEXNET_NARROW = """
network alexnet_narrow {
  input data: f32[32, 65, 65, 3]
  conv1 = Convolution(data) { filter: [5, 5, 3, 16], strides: [1, 2, 2, 1], padding: VALID, activation: relu }
  pool1 = Pooling(conv1) { ksize: [1, 3, 3, 1], strides: [1, 2, 2, 1], padding: VALID }
  conv2 = Convolution(pool1) { filter: [5, 5, 16, 32], padding: SAME, activation: relu }
  pool2 = Pooling(conv2) { ksize: [1, 3, 3, 1], strides: [1, 2, 2, 1], padding: VALID }
  conv3 = Convolution(pool2) { filter: [3, 3, 32, 48], padding: SAME, activation: relu }
  conv4 = Convolution(conv3) { filter: [3, 3, 48, 48], padding: SAME, activation: relu }
  conv5 = Convolution(conv4) { filter: [3, 3, 48, 32], padding: SAME, activation: relu }
  pool5 = Pooling(conv5) { ksize: [1, 3, 3, 1], strides: [1, 2, 2, 1], padding: VALID }
  fc6 = InnerProduct(pool5) { num_outputs: 256, activation: relu }
  drop6 = Dropout(fc6) { dropout_keep_prob: 0.5 }
  fc7 = InnerProduct(drop6) { num_outputs: 256, activation: relu }
  drop7 = Dropout(fc7) { dropout_keep_prob: 0.5 }
  fc8 = InnerProduct(drop7) { num_outputs: 10 }
  prob = Softmax(fc8)
}
"""
# SINGA's char-rnn (corpus/singa/0.2.0_char-rnn_job.conf: one-hot characters -> GRU -> fc at every step -> softmax
# cost at every step, 101 characters, windows of T = 50) with a 128-wide GRU and 32 windows a batch, the labels class
# indices (the job's one-hot targets scaled by 50 are its summed objective; the mean here)
CHAR_RNN = """
network char_rnn {
  input data: i32[50, 32] { batch_axis: 1 }
  input label: i32[50, 32] { batch_axis: 1 }
  onehot = OneHot(data) { depth: 101 }
  gru1 = GRU(onehot) { dim_hidden: 128 }
  ip1.in = Reshape(gru1) { output_shape: [-1, 128] }
  ip1 = InnerProduct(ip1.in) { num_outputs: 101 }
  labels = Reshape(label) { output_shape: [-1] }
  loss = SoftmaxLoss(ip1, labels)
}
"""
NAMED = {"alexnet-narrow": ALEXNET_NARROW, "char-rnn": CHAR_RNN}


def interleaved(fns: dict, warmup: int, iters: int) -> dict:
    """{name: {median_ms, min_ms}}: `iters` rounds, each calling every fn once, the order rotating by round."""
    names = list(fns)
    for n in names:
        for _ in range(warmup):
            fns[n]()
    ts = {n: [] for n in names}
    for r in range(iters):
        for n in names[r % len(names):] + names[:r % len(names)]:
            t = time.perf_counter()
            fns[n]()
            ts[n].append((time.perf_counter() - t) * 1e3)
    return {n: dict(median_ms=round(statistics.median(v), 4), min_ms=round(min(v), 4)) for n, v in ts.items()}


def timed(fn, warmup: int, iters: int) -> dict:
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1e3)
    return dict(median_ms=round(statistics.median(ts), 4), min_ms=round(min(ts), 4))


def training_module(path: str):
    """(training program module, its network, inference module with the loss) of `path`."""
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load
    from netc.ir.query import layers
    from netc.ops import lookup
    from netc.passes.backward import append_loss
    from netc.pipelines import Options, Training, inference, program, reinfer_shapes
    diag = DiagnosticEngine()
    has_loss = any(lookup(op.name) is not None and lookup(op.name).is_loss
                   for n in load(path, DiagnosticEngine()).networks() for op in n.regions[0].ops)
    train = load(path, diag)
    program(train, Options(phase="train", training=Training(loss=None if has_loss else "softmax")), diag)
    net = [n for n in train.networks() if "gradients" in n.attrs][0]
    inf = load(path, diag)
    ctx = inference(inf, Options(phase="train"), diag)
    if not has_loss:
        for n in inf.networks():
            append_loss(n, "softmax", diag)
        reinfer_shapes(inf, ctx)
    return train, net, inf


def transient_peak(fn) -> int:
    """The most bytes one call holds at once beyond what lives between calls: torch.profiler's allocations and frees
    (profile_memory) summed in time order over the top-level ops, the peak of the running sum (the resolution is an
    op: an allocation freed inside one op does not count)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as p:
        fn()
    live = peak = 0
    for e in sorted((e for e in p.events() if e.cpu_parent is None), key=lambda e: e.time_range.start):
        live += e.cpu_memory_usage
        peak = max(peak, live)
    return peak


def gemm_peak(threads: int) -> float:
    """FLOP/s of torch's float32 GEMM (MKL) on 2048x2048 matrices at this thread count, the best of 5 runs: the
    fastest rate these kernels reach on this machine, measured in this run."""
    import torch
    n = 2048
    a, b, c = torch.randn(n, n), torch.randn(n, n), torch.empty(n, n)
    torch.mm(a, b, out=c)
    best = min(_seconds(lambda: torch.mm(a, b, out=c)) for _ in range(5))
    return 2 * n ** 3 / best


def _seconds(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def step_flops(module, net) -> float:
    """The FLOPs of one call of `net`: its forward ops' (the cost model's), and in a training program its gradient and
    update ops' (netc explain's totals)."""
    from netc.explain import layer_rows, totals
    t = totals(module, layer_rows(module, net), net)
    return t["flops_fwd"] + t.get("flops_gradients", 0) + t.get("flops_update", 0)


def roofline(flops: float, peak: float, eager: dict, goal: float) -> dict:
    """What the issue's goal asks (goal x eager's time) beside the least time the step's FLOPs take at the GEMM's peak
    rate (every op as fast as a large GEMM, memory traffic free: no program of these kernels is faster). The floor is a
    best case (the GEMM's best run), so `goal_below_floor` sets it against eager's fastest call, which load from other
    processes does not inflate; the median's goal is beside it."""
    floor = flops / peak * 1e3
    return dict(flops=int(flops), floor_ms=round(floor, 4), goal=goal, goal_ms=round(goal * eager["median_ms"], 4),
                goal_ms_fastest=round(goal * eager["min_ms"], 4), goal_below_floor=goal * eager["min_ms"] < floor,
                eager_fraction_of_peak=round(floor / eager["min_ms"], 3))


def held_bytes(tensors) -> int:
    """Bytes of the distinct storages of `tensors` (what lives between calls)."""
    seen = {}
    for t in tensors:
        st = t.untyped_storage()
        seen[st.data_ptr()] = st.nbytes()
    return sum(seen.values())


def netc_tensors(prog) -> list:
    """The generated step's storage: its arenas and what its namespace holds (argmax indices, packed weights)."""
    import torch
    return [v for v in prog.fn.__globals__.values() if torch.is_tensor(v)] + list(prog.arenas.arenas)


def eager_tensors(trainer) -> list:
    """Eager's storage between steps: parameters, their gradients, the optimizer's state."""
    import torch
    ts = list(trainer.params.values()) + [p.grad for p in trainer.params.values() if p.grad is not None]
    for st in trainer.optimizer.state.values():
        ts += [v for v in st.values() if torch.is_tensor(v)]
    return ts


def named_file(name: str) -> str:
    """A network NAMED here as a .nd file (in a fresh temporary folder)."""
    import tempfile
    path = os.path.join(tempfile.mkdtemp(prefix="netc-bench-"), name.replace("-", "_") + ".nd")
    with open(path, "w") as f:
        f.write(NAMED[name])
    return path


def bench(path: str, a) -> dict:
    import torch
    from netc.runtime.cpu import CpuNet, CpuTrainer
    from netc.runtime.eager import EagerNet, EagerTrainer
    from netc.runtime.reference import module_params
    from netc.runtime.train import ReferenceTrainer
    train, net, inf = training_module(path)
    lr = 0.01
    row = dict(network=net.attrs["sym_name"], file=os.path.relpath(os.path.abspath(path), ROOT),
               optimizer=(net.attrs.get("optimizer") or {}).get("name", "sgd"))
    cpu = CpuTrainer(train, net, None, seed=a.seed)
    feed = cpu.feed(None, lr)             # the random inputs (and the program's lr/seed inputs) of step 0
    data = {k: v for k, v in feed.items() if k in {op.attrs.get("name") for op in inf.networks()[0].regions[0].ops
                                                   if op.name == "netc.input"}}
    start = {k: v.detach().clone() for k, v in cpu.params.items()}
    ref = ReferenceTrainer(train, net, start, seed=a.seed, dtype=torch.float32)
    eager = EagerTrainer(inf, None, {k: v for k, v in start.items() if k in module_params(inf)},
                         net.attrs.get("optimizer"), dtype=torch.float32)
    train_fns = dict(netc_cpu=lambda: cpu.step(data, lr), eager=lambda: eager.step(data, lr))
    compile_note = None
    if a.torch_compile:
        compiled = EagerTrainer(inf, None, {k: v for k, v in start.items() if k in module_params(inf)},
                                net.attrs.get("optimizer"), dtype=torch.float32)
        compiled.loss = torch.compile(compiled.loss, dynamic=False)
        try:
            t = time.perf_counter()
            compiled.step(data, lr)
            compile_note = dict(first_call_s=round(time.perf_counter() - t, 2))
            train_fns["torch_compile"] = lambda: compiled.step(data, lr)
        except Exception as e:        # report, do not hide (torch.compile's CPU backend needs a C++ compiler)
            compile_note = dict(error=f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
    row["train"] = interleaved(train_fns, a.warmup, a.iters)
    row["train"]["netc_reference"] = timed(lambda: ref.step(data, lr), a.warmup, max(5, a.iters // 3))
    if compile_note is not None:
        row["train"].setdefault("torch_compile", {}).update(compile_note)
    # copies, not views of the trainer's arena: what eager holds is its parameters, not a training arena they lie in
    params = {k: v.detach().clone() for k, v in cpu.params.items() if k in module_params(inf)}
    cnet = CpuNet(inf, None, params)
    enet = EagerNet(inf, None, params, "cpu", torch.float32)
    with torch.no_grad():
        row["infer"] = interleaved(dict(netc_cpu=lambda: cnet(data), eager=lambda: enet(data)), a.warmup, a.iters)
    prog = cpu.program
    row["train"]["peak_bytes"] = dict(netc_cpu=held_bytes(netc_tensors(cpu.program)) + transient_peak(lambda: cpu.step(data, lr)),
                                      eager=held_bytes(eager_tensors(eager)) + transient_peak(lambda: eager.step(data, lr)))
    with torch.no_grad():
        row["infer"]["peak_bytes"] = dict(netc_cpu=held_bytes(netc_tensors(cnet.program)) + transient_peak(lambda: cnet(data)),
                                          eager=held_bytes(list(enet.param_tensors.values())) + transient_peak(lambda: enet(data)))
    row["cpu_step"] = dict(arena_bytes=sum(prog.plan.arena_bytes()[:2]) if prog else None,
                           without_out_lowering=list(prog.slow) if prog else None,
                           inference_without_out_lowering=list(cnet.program.slow),
                           # the convolution forms runtime/cpu_tune.py chose, in schedule order
                           train_forms=re.findall(r"# (\w+) \(runtime/cpu_tune.py\)", prog.source) if prog else None,
                           inference_forms=re.findall(r"# (\w+) \(runtime/cpu_tune.py\)", cnet.program.source))
    for mode, module, n, goal in (("train", train, net, 0.8), ("infer", inf, inf.networks()[0], 0.7)):
        row[mode]["roofline"] = roofline(step_flops(module, n), a.peak, row[mode]["eager"], goal)
    for mode in ("train", "infer"):
        r = row[mode]
        r["netc_cpu_over_eager"] = round(r["netc_cpu"]["median_ms"] / r["eager"]["median_ms"], 3)
        # the fastest call of each: what a call costs when no other process takes the cores (a shared machine)
        r["netc_cpu_over_eager_min"] = round(r["netc_cpu"]["min_ms"] / r["eager"]["min_ms"], 3)
        if "median_ms" in r.get("torch_compile", {}):
            r["netc_cpu_over_torch_compile"] = round(r["netc_cpu"]["median_ms"] / r["torch_compile"]["median_ms"], 3)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("nets", nargs="*", default=DEFAULT)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--torch-compile", action="store_true", help="also torch.compile (its first call takes a while)")
    ap.add_argument("--out", metavar="FILE.json")
    a = ap.parse_args(argv)
    import tempfile
    import torch
    torch.set_num_threads(a.threads)
    # the CPU target's choices of convolution forms (runtime/cpu_tune.py) measured in this run, not read from a cache
    # another run (another load, thread count) wrote
    os.environ["NETC_CACHE_DIR"] = tempfile.mkdtemp(prefix="netc-bench-cache-")
    rows = []
    load = [round(x, 2) for x in os.getloadavg()]
    a.peak = gemm_peak(a.threads)
    print(f"float32 GEMM (2048^3, {a.threads} threads): {a.peak / 1e9:.1f} GFLOP/s")
    for name in a.nets:
        r = bench(named_file(name) if name in NAMED else os.path.join(ROOT, name), a)
        if name in NAMED:
            r["file"] = f"bench/cpu.py {name}"
        rows.append(r)
        t, i = r["train"], r["infer"]
        print(f"{r['network']}: train step netc cpu {t['netc_cpu']['median_ms']:.3f} ms, reference "
              f"{t['netc_reference']['median_ms']:.3f}, eager {t['eager']['median_ms']:.3f} "
              f"(netc cpu / eager {t['netc_cpu_over_eager']:.2f}, of the fastest calls {t['netc_cpu_over_eager_min']:.2f})"
              + (f", torch.compile {t['torch_compile']['median_ms']:.3f}" if "median_ms" in t.get("torch_compile", {})
                 else f", torch.compile: {t['torch_compile']['error']}" if "torch_compile" in t else "")
              + f"; inference netc cpu {i['netc_cpu']['median_ms']:.3f} ms, eager {i['eager']['median_ms']:.3f} "
              f"({i['netc_cpu_over_eager']:.2f}, {i['netc_cpu_over_eager_min']:.2f}); peak MB train netc "
              f"{t['peak_bytes']['netc_cpu'] / 2 ** 20:.2f} eager {t['peak_bytes']['eager'] / 2 ** 20:.2f}, inference "
              f"netc {i['peak_bytes']['netc_cpu'] / 2 ** 20:.2f} eager {i['peak_bytes']['eager'] / 2 ** 20:.2f}")
        for mode, what in (("train", "train step"), ("infer", "inference")):
            f = r[mode]["roofline"]
            print(f"    {what}: {f['flops'] / 1e6:.1f} MFLOP, at the GEMM's peak {f['floor_ms']:.3f} ms; the goal "
                  f"{f['goal']} x eager's fastest call = {f['goal_ms_fastest']:.3f} ms" + (
                      " is BELOW that floor (no schedule of these kernels reaches it)" if f["goal_below_floor"] else "")
                  + f" (of its median {f['goal_ms']:.3f} ms); eager's fastest call runs at "
                  f"{100 * f['eager_fraction_of_peak']:.0f}% of the peak")
    out = a.out or os.path.join(ROOT, "bench", "results", f"cpu-{datetime.date.today().isoformat()}.json")
    results_file.write(out, dict(settings=dict(threads=a.threads, iters=a.iters, warmup=a.warmup, seed=a.seed,
                                               torch_compile=a.torch_compile),
                                 gemm_peak_gflops=round(a.peak / 1e9, 1),
                                 machine=results_file.machine(torch=torch.__version__),
                                 load_average=dict(start=load, end=[round(x, 2) for x in os.getloadavg()]),
                                 note="median wall-clock ms per call (time.perf_counter), same process, inputs and "
                                      "parameters; netc cpu = runtime/cpu.py; eager = runtime/eager.py",
                                 results=rows))
    return 0


if __name__ == "__main__":
    from netc.diagnostics import NetcError, render
    try:
        sys.exit(main())
    except NetcError as e:         # a network file that is missing or wrong: its diagnostics, not a traceback
        sys.stderr.write("".join(render(d) for d in e.diagnostics) if e.diagnostics else f"bench/cpu.py: {e}\n")
        sys.exit(1)
