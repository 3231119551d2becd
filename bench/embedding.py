#!/usr/bin/env python3
"""Embedding benchmark: the cost of an embedding's forward and backward (with the table's SGD step)
per sample does not grow with the vocabulary V when the table is updated sparsely; prints the
figures and writes bench/results/embedding.json (machine, date, versions).

    python bench/embedding.py [--batch 64] [--ids 8] [--dim 64] [--vocab 1000 100000] [--repeat 7]
                              [--no-interp] [--no-onehot] [--threads K]
    python bench/embedding.py --cuda        # the kernels compiled on a GPU: bench/results/embedding-cuda.json

Same batch (N samples of T ids each, M = N T ids) and width D at every V. Per path and V: the wall
time of a step and per sample, and the bytes the ops touch per sample (their
OpDef.bytes_moved, netc's cost model). Times are the shortest of `--repeat` runs after a warm-up
(the machine may be shared; the median is recorded too). Paths:

  forward        netc.embedding: the rows of the ids (a gather)
  dense          forward + netc.embedding_grad (the [V, D] gradient: cleared, rows added at their ids)
                 + netc.sgd_update of the whole [V, D] table
  sparse         forward + netc.sparse_sgd_update (a table declared `sparse_update: true`: the rows the
                 ids touch, updated in place; no [V, D] gradient)
  one_hot        the Python API's old embedding (netc/api/layer.py): an InnerProduct over one-hot rows
                 [M, V] (the one-hot rows given, not counted), its weight gradient x^T dz [V, D] and the
                 dense SGD step
  program_*      a whole training step of ids -> Embedding -> InnerProduct -> SoftmaxLoss on the reference
                 executor (runtime/train.py ReferenceTrainer), dense and sparse

on two executors: the reference (the ops' reference() in torch float64 on the CPU: the oracle's
cost, which is what `netc run --reference` pays) and the interpreter target's kernels
(kernels/embedding.py, kernels/optim.py and, for the one-hot path, kernels/gemm.py and conv_grad.py
under Triton's CPU interpreter, with the large tiles the interpreter target picks); with --cuda,
the same kernels compiled on the machine's GPU instead. The ratio V_max / V_min of each figure is
printed and recorded: about 1 for forward and sparse, about V_max / V_min for the dense gradient's
bytes. A benchmark, not a test: nothing here asserts.

Recorded (bench/results/): embedding.json (the defaults, on the 16 quiet CPU cores of a lent GPU
machine), embedding-cuda.json (--cuda, the same sizes: launch-bound at 512 ids a step) and
embedding-cuda-large.json (--cuda --batch 1024 --ids 32 --vocab 1000 100000 1000000 --no-onehot).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import results_file  # noqa: E402  (bench/results_file.py, beside this script)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

NET = """
network emb {
  input ids: i64[%(n)d, %(t)d]
  input label: i32[%(n)d]
  e = Embedding(ids) { num_embeddings: %(v)d, dim: %(d)d, params: { table: { name: words, sparse_update: %(sparse)s } } }
  fc = InnerProduct(e) { num_outputs: 10 }
  loss = SoftmaxLoss(fc, label)
}
"""


def timed(fn, repeat: int) -> float:
    """The shortest wall time of fn() over `repeat` runs (after one warm-up run), in seconds: on a shared
    machine the least disturbed run (the median is recorded beside it, MEDIANS)."""
    fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    MEDIANS.append(statistics.median(ts))
    return min(ts)


MEDIANS: list = []


def op_bytes(n: int, t: int, d: int, v: int) -> dict:
    """Bytes per step of each path, from the ops' cost model (OpDef.bytes_moved, f32)."""
    from netc.ops import lookup
    fwd = lookup("netc.embedding").bytes_moved({"num_embeddings": v, "dim": d}, [(n, t)], (n, t, d))
    grad = lookup("netc.embedding_grad").bytes_moved({"num_embeddings": v}, [(n, t), (n, t, d)], (v, d))
    sgd_d = lookup("netc.sgd_update")
    dense_upd = sgd_d.bytes_moved(sgd_d.attrs_of(_Op({})), [(v, d), ()], (v, d))
    sparse = lookup("netc.sparse_sgd_update").bytes_moved({"num_embeddings": v}, [(n, t), (n, t, d), ()], ())
    ip = lookup("netc.inner_product")
    onehot_fwd = ip.bytes_moved({"num_outputs": d}, [(n * t, v)], (n * t, d)) - 4 * d   # (no bias)
    onehot_grad = 4 * (n * t * v + n * t * d + v * d)      # x^T dz: x, dz read, dW written
    return dict(forward=fwd, dense=fwd + grad + dense_upd, sparse=fwd + sparse,
                one_hot=onehot_fwd + onehot_grad + dense_upd)


class _Op:
    def __init__(self, attrs):
        self.attrs = attrs


def reference_paths(n, t, d, v, repeat, onehot: bool, gen) -> dict:
    """Seconds per step of each path with the ops' reference semantics (float64)."""
    import torch
    from netc.ops import lookup
    emb, grad = lookup("netc.embedding"), lookup("netc.embedding_grad")
    sgd, sparse = lookup("netc.sgd_update"), lookup("netc.sparse_sgd_update")
    ids = torch.randint(0, v, (n, t), generator=gen)
    table = torch.randn(v, d, generator=gen, dtype=torch.float64)
    dy = torch.randn(n, t, d, generator=gen, dtype=torch.float64)
    lr = torch.tensor(0.01, dtype=torch.float64)
    a = {"num_embeddings": v, "dim": d, "name": "e"}
    sa = sgd.attrs_of(_Op({}))

    def forward():
        return emb.reference(a, [ids], {"table": table})

    def dense():
        forward()
        g = grad.reference({"num_embeddings": v}, [ids, dy], {})
        return sgd.reference(sa, [g, lr], {"param": table})

    def sparse_step():
        forward()
        return sparse.reference({"num_embeddings": v, "lr_scale": 1.0}, [ids, dy, lr], {"param": table})

    out = dict(forward=timed(forward, repeat), dense=timed(dense, repeat), sparse=timed(sparse_step, repeat))
    if onehot:
        from netc.ops import reference as R
        x = torch.nn.functional.one_hot(ids.reshape(-1), v).to(torch.float64)   # given, as a data layer's rows
        dz = dy.reshape(n * t, d)

        def one_hot():
            R.inner_product(x, table)
            gw = R.inner_product_grad_filter(x, dz)
            return sgd.reference(sa, [gw, lr], {"param": table})
        out["one_hot"] = timed(one_hot, repeat)
        del x
    return out


def kernel_paths(n, t, d, v, repeat, onehot: bool, gen, device: str) -> dict:
    """Seconds per step of each path with the compiled target's kernels (f32): under Triton's
    interpreter on the CPU (device "cpu": tiles as large as the problem, as the interpreter target
    picks them, kernels/lowering.py INTERPRETER_TILES), or compiled on a GPU (device "cuda": the
    launchers' own tiles, what `netc compile` builds; timed after torch.cuda.synchronize)."""
    import torch
    import triton
    from netc.kernels.embedding import embedding, embedding_grad, sparse_sgd_update
    from netc.kernels.optim import sgd_update
    cuda = device == "cuda"
    m = n * t
    ids = torch.randint(0, v, (n, t), generator=gen).to(device)
    table = torch.randn(v, d, generator=gen).to(device)
    dy = torch.randn(n, t, d, generator=gen).to(device)
    lr = torch.tensor(0.01, device=device)
    out = torch.empty(n, t, d, device=device)
    g = torch.empty(v, d, device=device)
    bn = min(triton.next_power_of_2(d), 1024)
    bm = min(triton.next_power_of_2(m), max(1, 2 ** 16 // bn))
    tiles = {} if cuda else dict(block_m=bm, block_n=bn)
    big = {} if cuda else dict(split=1)
    fill = {} if cuda else dict(block=min(2 ** 18, triton.next_power_of_2(v * d)))
    upd = {} if cuda else dict(block=65536)
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def forward():
        embedding(ids, table, out=out, **tiles)
        sync()

    def dense():
        embedding(ids, table, out=out, **tiles)
        embedding_grad(ids, dy, v, out=g, **big, **fill, **tiles)
        sgd_update([table], [g], lr, **upd)
        sync()

    def sparse_step():
        embedding(ids, table, out=out, **tiles)
        sparse_sgd_update(table, ids, dy, lr, **big, **tiles)
        sync()

    res = dict(forward=timed(forward, repeat), dense=timed(dense, repeat), sparse=timed(sparse_step, repeat))
    if onehot:
        from netc.kernels.conv_grad import inner_product_grad_filter
        from netc.kernels.gemm import gemm
        x = torch.nn.functional.one_hot(ids.reshape(-1), v).to(torch.float32)
        dz = dy.reshape(m, d)
        y = torch.empty(m, d, device=device)
        gt = {} if cuda else dict(block_m=min(triton.next_power_of_2(m), 256), block_n=max(16, bn),
                                  block_k=min(triton.next_power_of_2(v), 512))
        gf = {} if cuda else dict(block_m=min(triton.next_power_of_2(v), 256), block_n=max(16, bn),
                                  block_k=min(triton.next_power_of_2(m), 512), split=1)

        def one_hot():
            gemm(x, table, None, out=y, **gt)
            inner_product_grad_filter(x, dz, out=g, **gf)
            sgd_update([table], [g], lr, **upd)
            sync()
        res["one_hot"] = timed(one_hot, repeat if cuda else max(1, repeat // 2))
    return res


def program_steps(n, t, d, v, repeat) -> dict:
    """Seconds per training step of the whole small network on the reference executor, dense and sparse."""
    import torch
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load_text
    from netc.pipelines import Options, Training, training
    from netc.runtime.train import ReferenceTrainer
    out = {}
    for sparse in (False, True):
        diag = DiagnosticEngine()
        m = load_text(NET % dict(n=n, t=t, d=d, v=v, sparse="true" if sparse else "false"), "emb.nd", diag)
        training(m, Options(training=Training()), diag)
        tr = ReferenceTrainer(m, seed=0)
        feed = {"ids": torch.randint(0, v, (n, t)), "label": torch.randint(0, 10, (n,), dtype=torch.int32)}
        out["program_sparse" if sparse else "program_dense"] = timed(lambda: tr.step(feed, lr=0.01), repeat)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=64, help="samples N per step")
    ap.add_argument("--ids", type=int, default=8, help="ids T per sample")
    ap.add_argument("--dim", type=int, default=64, help="the embedding width D")
    ap.add_argument("--vocab", type=int, nargs="+", default=[1000, 100000], help="vocabularies V")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--no-interp", action="store_true", help="skip the interpreter target's kernels")
    ap.add_argument("--no-onehot", action="store_true", help="skip the one-hot matrix products")
    ap.add_argument("--cuda", action="store_true",
                    help="the kernels compiled on this machine's GPU instead of the reference and the interpreter")
    ap.add_argument("--threads", type=int, default=None, help="torch's CPU threads (default: torch's choice)")
    ap.add_argument("--out", default=None, help="default bench/results/embedding.json (embedding-cuda.json with --cuda)")
    a = ap.parse_args(argv)
    # the kernels run under Triton's interpreter on the CPU, or compiled for the GPU: fixed at their import
    os.environ["TRITON_INTERPRET"] = "0" if a.cuda else "1"
    out_path = a.out or os.path.join(ROOT, "bench", "results", "embedding-cuda.json" if a.cuda else "embedding.json")
    import torch
    import triton
    if a.threads:
        torch.set_num_threads(a.threads)
    from netc.version import __version__
    torch.manual_seed(0)
    n, t, d = a.batch, a.ids, a.dim
    rows = []
    for v in a.vocab:
        MEDIANS.clear()
        gen = torch.Generator().manual_seed(v)
        nbytes = op_bytes(n, t, d, v)
        if a.cuda:
            execs = {"cuda": kernel_paths(n, t, d, v, a.repeat, not a.no_onehot, gen, "cuda")}
        else:
            execs = {"reference": {**reference_paths(n, t, d, v, a.repeat, not a.no_onehot, gen),
                                   **program_steps(n, t, d, v, a.repeat)}}
            if not a.no_interp:
                execs["interp"] = kernel_paths(n, t, d, v, a.repeat, not a.no_onehot, gen, "cpu")
        medians = iter(MEDIANS)
        for ex, times in execs.items():
            for path, s in times.items():
                b = nbytes.get(path)
                rows.append(dict(executor=ex, path=path, vocab=v, step_s=s, median_step_s=next(medians),
                                 per_sample_us=1e6 * s / n, bytes_per_sample=(b / n) if b is not None else None))
                print(f"{ex:9s} {path:15s} V={v:>7d}: {1e6 * s / n:12.3f} us/sample"
                      + (f"  {b / n:12,.0f} bytes/sample" if b is not None else ""), flush=True)
    lo, hi = min(a.vocab), max(a.vocab)
    ratios = []
    by = {(r["executor"], r["path"], r["vocab"]): r for r in rows}
    print(f"\nratio V={hi} / V={lo} (same batch {n} x {t} ids, D = {d}):")
    for (ex, path, v), r in by.items():
        if v != lo or (ex, path, hi) not in by:
            continue
        h = by[(ex, path, hi)]
        rt = h["step_s"] / r["step_s"]
        rb = (h["bytes_per_sample"] / r["bytes_per_sample"]) if r["bytes_per_sample"] else None
        ratios.append(dict(executor=ex, path=path, time_ratio=round(rt, 3), bytes_ratio=round(rb, 3) if rb else None))
        print(f"  {ex:9s} {path:15s} time x{rt:8.2f}" + (f"   bytes x{rb:8.2f}" if rb else ""))
    gpu = {"gpu": torch.cuda.get_device_name(0)} if a.cuda else {}
    doc = {"benchmark": "embedding", "date": results_file.now(), "machine": results_file.machine(**gpu),
           "versions": {"netc": __version__, "torch": torch.__version__, "triton": triton.__version__},
           "config": {"batch": n, "ids_per_sample": t, "dim": d, "vocab": a.vocab, "repeat": a.repeat,
                      "executors": ["cuda"] if a.cuda else ["reference"] + ([] if a.no_interp else ["interp"]),
                      "one_hot": not a.no_onehot, "torch_threads": torch.get_num_threads(),
                      "timing": "shortest wall time of `repeat` steps after one warm-up (median_step_s: their "
                                "median), per sample = / batch; "
                                "reference: torch float64 on the CPU; interp: Triton's CPU interpreter, f32; cuda: "
                                "the kernels compiled for the GPU, f32, synchronized after each step",
                      "bytes": "the ops' cost model (OpDef.bytes_moved), f32, per sample; the one-hot rows' bytes "
                               "are the x read by the matrix products"},
           "results": rows, "ratios": ratios}
    results_file.write(out_path, doc, ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
