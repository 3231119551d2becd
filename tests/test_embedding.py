"""The Embedding layer end to end (netc/ops/embedding.py, kernels/embedding.py, the sparse update of
passes/optimizer.py): its semantics against torch.nn.functional.embedding, its errors (ids of a
floating type, a bad table, ids outside the table at run time and in data files), random ids drawn
inside the table, its cost independent of the vocabulary, its gradient with duplicate ids against
torch.autograd, the sparse update (equal to the dense SGD step, untouched rows unchanged; the dense
fallback and its warning otherwise), and the targets: the interpreter target against the reference
(a forward and two training steps) and `netc compile --target cuda` without a GPU."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from netc.diagnostics import DiagnosticEngine, NetcError
from netc.frontend import load_text
from netc.ir.parser import parse_ir
from netc.ir.printer import print_ir
from netc.ops import lookup
from netc.ops.registry import layer_cost
from netc import pipelines
from netc.pipelines import Options, Training
from netc.runtime.reference import random_input, run_reference
from netc.runtime.train import Dataset, ReferenceTrainer, check_grads
from cli_process import netc_process  # noqa: E402  (tests/: the test modules' directory)
from cli_inprocess import netc_interp  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

NET = """
network emb {
  input ids: %(idt)s[4, 3]
  input label: i32[4]
  e = Embedding(ids) { num_embeddings: %(v)d, dim: 6%(table)s }
  fc = InnerProduct(e) { num_outputs: 5 }
  loss = SoftmaxLoss(fc, label)
}
"""


def net_src(v=50, idt="i32", sparse=None, lr_scale=None) -> str:
    table = ""
    if sparse is not None or lr_scale is not None:
        extra = "".join(f", {k}: {json.dumps(x)}" for k, x in (("sparse_update", sparse), ("lr_scale", lr_scale))
                        if x is not None)
        table = f", params: {{ table: {{ name: words{extra} }} }}"
    return NET % {"idt": idt, "v": v, "table": table}


def inference(src, path="emb.nd"):
    diag = DiagnosticEngine()
    m = load_text(src, path, diag)
    pipelines.inference(m, diag=diag)
    return m, diag


def training(src, path="emb.nd", **optimizer):
    diag = DiagnosticEngine()
    m = load_text(src, path, diag)
    pipelines.training(m, Options(training=Training(optimizer=dict(optimizer))), diag)
    return m, diag


# -- the op --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,idt", [((5,), "i32"), ((2, 3), "i64"), ((2, 1, 4), "i32")], ids=str)
def test_rows_of_the_table(shape, idt):
    """out[s] = table[ids[s]]: shape S + [D], torch's F.embedding; i32 and i64 ids of ranks 1 to 3."""
    src = (f"network t {{\n  input ids: {idt}{list(shape)}\n"
           f"  e = Embedding(ids) {{ num_embeddings: 9, dim: 4 }}\n}}\n")
    m, _ = inference(src)
    net = m.networks()[0]
    (e,) = [op for op in net.regions[0].ops if op.name == "netc.embedding"]
    assert tuple(e.results[0].type.shape) == tuple(shape) + (4,) and e.results[0].type.dtype == "f32"
    ids = torch.randint(0, 9, shape, dtype=torch.int64)
    table = torch.randn(9, 4, dtype=torch.float64)
    out = run_reference(m, {"ids": ids}, {"e.table": table})["e"]
    assert torch.equal(out, F.embedding(ids, table))


def test_located_errors():
    src = """network bad {
  input x: f32[4, 3]
  input ids: i32[4]
  e = Embedding(x) { num_embeddings: 50, dim: 6 }
  f = Embedding(ids) { num_embeddings: 0, dim: 6 }
  g = Embedding(ids) { num_embeddings: 5, dim: -1 }
  h = Embedding(ids) { num_embeddings: 5, dim: 2, params: { table: { name: t, sparse_update: 1 } } }
}
"""
    diag = DiagnosticEngine()
    with pytest.raises(NetcError):
        m = load_text(src, "bad.nd", diag)
        pipelines.inference(m, diag=diag)
    msgs = {(d.loc.line, d.loc.col): d.message for d in diag.diagnostics if d.severity == "error"}
    assert "Embedding reads ids (integers, i32 or i64), got f32 values" in msgs[(4, 17)]
    assert "num_embeddings must be positive, got 0" in msgs[(5, 24)]
    assert "dim must be positive, got -1" in msgs[(6, 43)]
    assert "'sparse_update' is true or false, got 1" in msgs[(7, 79)]


def test_an_id_outside_the_table_is_an_error_at_run_time():
    m, _ = inference(net_src(v=10))
    ids = torch.tensor([[0, 1, 2], [3, 10, 4], [0, 0, 0], [9, 9, 9]])
    with pytest.raises(NetcError, match=r"Embedding 'e': id 10 at \[1, 1\] is outside the table's rows 0 to 9"):
        run_reference(m, {"ids": ids, "label": torch.zeros(4, dtype=torch.int32)})
    with pytest.raises(NetcError, match=r"id -1 at \[0, 1\]"):
        run_reference(m, {"ids": -ids, "label": torch.zeros(4, dtype=torch.int32)})


def test_data_files_are_checked_against_the_table():
    m, _ = training(net_src(v=10))
    net = m.networks()[0]
    ok = {"ids": torch.randint(0, 10, (6, 3)), "label": torch.zeros(6, dtype=torch.int32)}
    assert Dataset(ok).check(net) == 4
    bad = dict(ok, ids=ok["ids"].clone())
    bad["ids"][5, 2] = 10
    with pytest.raises(NetcError, match=r"'ids' holds the id 10 in sample 5; the ids of an embedding over 10 rows "
                                        r"are 0 to 9"):
        Dataset(bad).check(net)


def test_random_ids_are_rows_of_the_table():
    """The reference executor's random ids are in [0, V) (V = 3: every row drawn), the smallest V when
    two embeddings read one input."""
    src = """network t {
  input ids: i64[64, 5]
  a = Embedding(ids) { num_embeddings: 3, dim: 2 }
  b = Embedding(ids) { num_embeddings: 1000, dim: 2 }
}
"""
    m, _ = inference(src)
    net = m.networks()[0]
    x = random_input(net, net.regions[0].ops[0], seed=3)
    assert x.dtype == torch.int64 and set(x.unique().tolist()) == {0, 1, 2}
    m, _ = inference(net_src(v=1000, idt="i32"))
    net = m.networks()[0]
    x = random_input(net, net.regions[0].ops[0], seed=3)
    assert x.dtype == torch.int32 and 0 <= int(x.min()) and int(x.max()) < 1000 and x.unique().numel() > 1


def test_cost_does_not_depend_on_the_vocabulary():
    """FLOPs and bytes of the embedding and of its sparse update are the same at V = 10 and V = 100,000;
    the dense gradient clears its [V, D] result."""
    def costs(v, sparse):
        m, _ = training(net_src(v=v, sparse=sparse))
        ops = m.networks()[0].regions[0].ops
        return {op.name: layer_cost(op) for op in ops if "embedding" in op.name or op.name == "netc.sparse_sgd_update"}
    small, large = costs(10, True), costs(100_000, True)
    assert set(small) == {"netc.embedding", "netc.sparse_sgd_update"} and small == large
    (c, b) = small["netc.embedding"]
    assert (c.flops_fwd, c.flops_bwd_filter, b) == (0, 12 * 6, 4 * (12 + 2 * 12 * 6))
    dense_small, dense_large = costs(10, None), costs(100_000, None)
    assert dense_small["netc.embedding"] == dense_large["netc.embedding"]
    assert dense_large["netc.embedding_grad"][1] - dense_small["netc.embedding_grad"][1] == 4 * (100_000 - 10) * 6


# -- the gradient ----------------------------------------------------------------------------------------

def test_gradient_with_duplicate_ids_against_autograd():
    """Ids that repeat (V = 4, 12 ids), i64, through an inner product and a softmax loss: the table's
    gradient is the sum of its rows' gradients, as torch.autograd computes it."""
    m, _ = training(net_src(v=4, idt="i64"))
    ids = torch.tensor([[0, 0, 1], [3, 3, 3], [1, 0, 2], [0, 0, 0]])
    label = torch.tensor([1, 4, 0, 2], dtype=torch.int32)
    rows = check_grads(m, inputs={"ids": ids, "label": label}, seed=2)
    by = {r["param"]: r for r in rows}
    assert set(by) == {"e.table", "fc.weight", "fc.bias"}
    assert by["e.table"]["rel_error"] < 1e-12 and by["e.table"]["max_abs"] > 0
    # and by hand: autograd over F.embedding
    tr = ReferenceTrainer(m, seed=2)
    named = tr.step({"ids": ids, "label": label}, lr=0.0)
    table = tr.params["e.table"].clone().requires_grad_(True)
    w, b = tr.params["fc.weight"], tr.params["fc.bias"]
    loss = F.cross_entropy(F.embedding(ids, table).reshape(4, -1) @ w + b, label.long())
    (want,) = torch.autograd.grad(loss, [table])
    torch.testing.assert_close(named["e.table.grad"], want, rtol=1e-12, atol=1e-14)
    assert not named["e.table.grad"][3].eq(0).all() and named["e.table.grad"].shape == (4, 6)


# -- the sparse update -----------------------------------------------------------------------------------

def _steps(src, inputs, lrs, **optimizer):
    m, diag = training(src, **optimizer)
    tr = ReferenceTrainer(m, seed=5)
    for i, (feed, lr) in enumerate(zip(inputs, lrs)):
        tr.step(feed, lr=lr, step_seed=i)
    return m, diag, tr.params


def test_sparse_update_equals_the_dense_sgd_step():
    """Two SGD steps with the table declared sparse_update: the same parameters as the dense update,
    rows no id touched bit for bit unchanged; lr_scale applies; the program has no dense gradient."""
    feeds = [{"ids": torch.tensor([[0, 1, 1], [7, 7, 2], [1, 0, 9], [2, 2, 2]]), "label": torch.tensor([0, 1, 2, 3])},
             {"ids": torch.tensor([[9, 9, 9], [0, 0, 0], [3, 1, 7], [1, 1, 1]]), "label": torch.tensor([4, 0, 1, 2])}]
    _, _, dense = _steps(net_src(v=20, sparse=False, lr_scale=0.5), feeds, [0.1, 0.2])
    m, diag, sparse = _steps(net_src(v=20, sparse=True, lr_scale=0.5), feeds, [0.1, 0.2])
    assert not diag.diagnostics
    ops = [op.name for op in m.networks()[0].regions[0].ops]
    assert "netc.sparse_sgd_update" in ops and "netc.embedding_grad" not in ops
    assert "words" not in m.networks()[0].attrs["gradients"]
    start = ReferenceTrainer(training(net_src(v=20, sparse=True))[0], seed=5).params["words"]
    for k in dense:
        torch.testing.assert_close(sparse[k], dense[k], rtol=1e-13, atol=1e-15)
    touched = {0, 1, 2, 3, 7, 9}
    for r in range(20):
        assert torch.equal(sparse["words"][r], start[r]) == (r not in touched), r
    # the update op round-trips through IR text
    text = print_ir(m)
    assert print_ir(parse_ir(text, "t.mlir")) == text


@pytest.mark.parametrize("optimizer,why", [
    ({"name": "momentum"}, "the optimizer is momentum"),
    ({"name": "adam"}, "the optimizer is adam"),
    ({"name": "sgd", "weight_decay": 0.01}, "weight decay changes every row"),
    ({"name": "sgd", "clip_norm": 1.0}, "gradient clipping needs the summed gradient"),
])
def test_sparse_update_falls_back_to_the_dense_one(optimizer, why):
    m, diag = training(net_src(sparse=True), **optimizer)
    (w,) = [d for d in diag.diagnostics if d.severity == "warning"]
    assert w.message.startswith("parameter 'words' has sparse_update, but netc updates it densely: " + why)
    assert (w.loc.line, w.loc.col) == (5, 62)
    ops = [op.name for op in m.networks()[0].regions[0].ops]
    assert "netc.embedding_grad" in ops and "netc.sparse_sgd_update" not in ops


def test_a_shared_table_is_updated_densely():
    src = """network t {
  input a: i32[2, 3]
  input b: i32[2, 3]
  input label: f32[2, 3, 4]
  x = Embedding(a) { num_embeddings: 8, dim: 4, params: { table: { name: words, sparse_update: true } } }
  y = Embedding(b) { num_embeddings: 8, dim: 4, params: { table: words } }
  s = Elementwise(x, y) { operation: sum }
  loss = EuclideanLoss(s, label)
}
"""
    m, diag = training(src)
    (w,) = diag.diagnostics
    assert "its gradient is not one embedding's scatter of rows" in w.message


# -- the targets -----------------------------------------------------------------------------------------

_netc = netc_process   # (tests/cli_process.py)


@pytest.mark.parametrize("sparse", [None, True], ids=["dense", "sparse"])
def test_interpreter_target_against_the_reference(tmp_path, sparse):
    """ids -> Embedding -> InnerProduct -> SoftmaxLoss on the interpreter target: a forward and two
    training steps, each within f32 tolerance of the float64 reference (--compare)."""
    pytest.importorskip("triton")
    f = tmp_path / "emb.nd"
    f.write_text(net_src(sparse=sparse, idt="i64"))
    r = netc_interp("run", f, "--target", "interp", "--compare")
    assert r.returncode == 0, r.stderr
    assert "loss: max relative error" in r.stderr
    r = netc_interp("run", f, "--target", "interp", "--train", "--compare", "--steps", "2")
    assert r.returncode == 0, r.stderr + r.stdout
    assert "compared 2 training steps of network 'emb' (sgd) on the interpreter target: ok" in r.stdout + r.stderr


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_compile_for_cuda_without_a_gpu(tmp_path):
    """`netc compile --target cuda` (and --train, with the sparse update) builds without a GPU; the
    manifest says which inputs are ids (random ids are drawn below their table's rows) and the training
    step updates the table's rows with the sparse kernel."""
    pytest.importorskip("triton.backends.nvidia.compiler")
    from netc.runtime import native as N
    f, s = tmp_path / "emb.nd", tmp_path / "sparse.nd"
    f.write_text(net_src(idt="i64"))
    s.write_text(net_src(sparse=True))
    for src, out, extra in ((f, "emb.so", ()), (s, "train.so", ("--train",))):
        r = _netc("compile", src, "-o", tmp_path / out, "--target", "cuda", *extra)
        assert r.returncode == 0, r.stderr
    m = N.read_manifest(tmp_path / "emb.so")
    assert [(i["name"], i.get("rows"), i.get("classes")) for i in m["inputs"]] == [("ids", 50, None),
                                                                                 ("label", None, 5)]
    assert [e["op"] for e in m["schedule"]][0] == "netc.embedding"
    t = N.read_manifest(tmp_path / "train.so")["training"]
    ops = [e["op"] for e in t["schedule"]]
    assert "netc.sparse_sgd_update" in ops and "netc.embedding_grad" not in ops
    assert t["inputs"][0]["rows"] == 50 and t["frozen"] == []


def test_an_id_outside_the_table_is_located_at_the_layer(tmp_path, capsys):
    """`netc run --inputs` with an id beyond the table: file:line:col of the Embedding, a caret, exit 1
    (the reference executor locates an op's run-time refusal at its layer)."""
    import numpy as np
    from netc.cli import main
    f = tmp_path / "e.nd"
    f.write_text("network n {\n  input ids: i32[4]\n  e = Embedding(ids) { num_embeddings: 10, dim: 3 }\n}\n")
    np.savez(tmp_path / "in.npz", ids=np.array([1, 2, 99, 3], np.int32))
    capsys.readouterr()
    assert main(["run", str(f), "--reference", "--inputs", str(tmp_path / "in.npz")]) == 1
    err = capsys.readouterr().err
    assert "e.nd:3:3: error: Embedding 'e': id 99 at [2] is outside the table's rows 0 to 9" in err and "^" in err
    assert "Traceback" not in err
