"""The interpreter target: the .so's kernels, schedule and memory plan run on the CPU through
Triton's interpreter (netc/runtime/interp.py), checked against the reference executor on small
networks: conv/relu/pool chains, an inception-like block (zero-copy strided concat slices), a
residual add fused into a conv epilogue, inner product + softmax, LRN, a scaled-down AlexNet,
losses on integer labels, copies where the plan does not alias, opaque layers (refused, or run as
the identity), the large-tile policy; and `netc run`'s --batch/--spatial scaling, several networks
per file, --opaque-as-identity. Every example and Paleo corpus net: tests/test_interp_corpus.py."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# the interpreter mode is fixed when netc.kernels is imported: set it at collection, before any test runs
os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

from netc.diagnostics import NetcError  # noqa: E402
from netc.frontend.dsl import parse_nd  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def _interp(interp_mode):
    """Every test here runs the kernels under Triton's interpreter (tests/conftest.py)."""


CHAIN = """network chain {
  input data: f32[2, 14, 14, 3]
  conv1 = Convolution(data) { filter: [3, 3, 3, 8], strides: [1, 1, 1, 1], padding: SAME }
  relu1 = ReLU(conv1)
  pool1 = Pooling(conv1b) { ksize: [1, 3, 3, 1], strides: [1, 2, 2, 1], padding: VALID }
  conv1b = Convolution(relu1) { filter: [3, 3, 8, 8], strides: [1, 1, 1, 1], padding: VALID, activation: relu }
  conv2 = Convolution(pool1) { filter: [3, 3, 8, 12], strides: [1, 1, 1, 1], padding: SAME, activation: relu }
  pool2 = AvgPool(conv2) { ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1], padding: SAME }
}
"""

INCEPTION = """network incep {
  input data: f32[2, 9, 9, 6]
  b0 = Convolution(data) { filter: [1, 1, 6, 4], strides: [1, 1, 1, 1], padding: SAME, activation: relu }
  b1a = Convolution(data) { filter: [1, 1, 6, 5], strides: [1, 1, 1, 1], padding: SAME, activation: relu }
  b1 = Convolution(b1a) { filter: [3, 3, 5, 6], strides: [1, 1, 1, 1], padding: SAME, activation: relu }
  b2 = Pooling(data) { ksize: [1, 3, 3, 1], strides: [1, 1, 1, 1], padding: SAME }
  b3 = Convolution(b2) { filter: [1, 1, 6, 3], strides: [1, 1, 1, 1], padding: SAME }
  cat = Concatenate(b0, b1, b3) { dim: 3 }
  head = Convolution(cat) { filter: [3, 3, 13, 7], strides: [1, 1, 1, 1], padding: VALID, activation: relu }
}
"""

RESIDUAL = """network res {
  input data: f32[2, 8, 8, 16]
  c0 = Convolution(data) { filter: [3, 3, 16, 16], strides: [1, 1, 1, 1], padding: SAME, activation: relu }
  c1 = Convolution(c0) { filter: [3, 3, 16, 16], strides: [1, 1, 1, 1], padding: SAME }
  s = Elementwise(c0, c1) { operation: sum }
  r = ReLU(s)
  out = Convolution(r) { filter: [1, 1, 16, 4], strides: [1, 1, 1, 1], padding: SAME }
  side = Convolution(c0) { filter: [1, 1, 16, 4], strides: [1, 1, 1, 1], padding: SAME }
  output out, side
}
"""

DENSE = """network dense {
  input data: f32[2, 7, 7, 4]
  ip1 = InnerProduct(data) { num_outputs: 16, activation: relu }
  ip2 = InnerProduct(ip1) { num_outputs: 10 }
  prob = Softmax(ip2)
}
"""

LRN = """network lrn {
  input data: f32[1, 10, 10, 3]
  conv1 = Convolution(data) { filter: [3, 3, 3, 12], strides: [1, 1, 1, 1], padding: SAME, activation: relu }
  norm1 = LRN(conv1) { local_size: 5, alpha: 0.05, beta: 0.75, knorm: 2.0 }
  pool1 = Pooling(norm1) { ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1], padding: VALID }
}
"""

# AlexNet (Paleo's alex_v2 layer sequence) scaled down to 32x32 inputs and a few channels
ALEXNET = """network alexnet_small {
  input data: f32[2, 32, 32, 3]
  conv1 = Convolution(data) { filter: [5, 5, 3, 16], strides: [1, 2, 2, 1], padding: VALID, activation: relu }
  norm1 = LRN(conv1) { local_size: 5, alpha: 0.001, beta: 0.75 }
  pool1 = Pooling(norm1) { ksize: [1, 3, 3, 1], strides: [1, 2, 2, 1], padding: VALID }
  conv2 = Convolution(pool1) { filter: [3, 3, 16, 16], strides: [1, 1, 1, 1], padding: SAME, activation: relu }
  pool2 = Pooling(conv2) { ksize: [1, 3, 3, 1], strides: [1, 2, 2, 1], padding: VALID }
  fc6 = Convolution(pool2) { filter: [2, 2, 16, 16], strides: [1, 1, 1, 1], padding: VALID, activation: relu }
  dropout6 = Dropout(fc6) { dropout_keep_prob: 0.5 }
  fc8 = Convolution(dropout6) { filter: [1, 1, 16, 10], strides: [1, 1, 1, 1], padding: SAME }
  softmax = Softmax(fc8) { num_classes: 10 }
}
"""


def _check(src, batch=None, seed=0):
    from netc.runtime.interp import InterpProgram, default_inputs
    from netc.runtime.reference import run_reference
    m = parse_nd(src) if isinstance(src, str) else src
    prog = InterpProgram(m, batch=batch, seed=seed)
    inputs = default_inputs(m, prog.net, seed)
    got = prog.run({k: v[:prog.batch] for k, v in inputs.items()})
    ref = run_reference(m, inputs, seed=seed)
    assert got.keys() == ref.keys()
    for k, r in ref.items():
        g = got[k]
        r = r[:prog.batch] if r.dim() else r
        assert g.dtype == torch.float32 and tuple(g.shape) == tuple(r.shape), k
        assert not torch.isnan(g).any(), f"{k}: unwritten (poisoned) values in the output"
        scale = max(float(r.abs().max()), 1e-6)
        err = float((g.double() - r).abs().max())
        assert err <= 1e-4 * scale, f"{k}: max abs error {err:.3e}, max |ref| {scale:.3e}"
    return prog


@pytest.mark.parametrize("src", [CHAIN, DENSE, LRN], ids=["conv-relu-pool", "ip-softmax", "lrn"])
def test_matches_reference(src):
    _check(src)


def test_inception_concat_is_zero_copy_and_strided():
    prog = _check(INCEPTION)
    plan = prog.plan
    cat = plan.tensor("cat")
    for n in ("b0", "b1", "b3"):
        t = plan.tensor(n)
        assert t.buffer == cat.buffer and t.alias == "concat" and t.strides is not None
    # the branches write their slices directly: no copy launches
    assert not any(":" in L.group for L in prog.launches)
    assert prog.view(plan.tensor("b1")).stride()[-2] == 13


def test_residual_add_fused_into_the_epilogue():
    prog = _check(RESIDUAL)
    groups = [L.layers for L in prog.launches]
    assert any(len(g) > 1 and "c1" in g and "s" in g for g in groups), groups


def test_alexnet_like():
    prog = _check(ALEXNET)
    assert len(prog.launches) >= 7


def test_smaller_batch_than_planned():
    _check(CHAIN, batch=1, seed=3)


def test_given_params_and_inputs():
    from netc.runtime.interp import prepare, run_interp
    from netc.runtime.reference import run_reference
    m = parse_nd(DENSE)
    prepare(m)
    decl = {p.attrs["sym_name"]: p.attrs["type"].shape for p in m.params() if "type" in p.attrs}
    g = torch.Generator().manual_seed(0)
    name = sorted(decl)[0]
    params = {name: torch.randn(*decl[name], generator=g) * 0.1}
    inputs = {"data": torch.randn(2, 7, 7, 4, generator=g)}
    got = run_interp(m, inputs, params, seed=5)
    ref = run_reference(m, inputs, params, seed=5)
    assert torch.allclose(got["prob"].double(), ref["prob"], atol=1e-6)


@pytest.mark.filterwarnings("ignore:invalid value encountered")
def test_unwritten_output_is_poisoned():
    """Drop the first launch: what reads its output sees the NaN poison, not stale or zero bytes."""
    from netc.runtime.interp import InterpProgram, default_inputs
    m = parse_nd(DENSE)
    prog = InterpProgram(m)
    inputs = default_inputs(m, prog.net)
    assert not torch.isnan(prog.run(inputs)["prob"]).any()
    prog.launches = prog.launches[1:]
    assert torch.isnan(prog.run(inputs)["prob"]).all()


def _cli(*args):
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run([sys.executable, "-m", "netc", *args], capture_output=True, text=True, cwd=ROOT, env=env)


def test_cli_run_and_compile(tmp_path):
    f = tmp_path / "dense.nd"
    f.write_text(DENSE)
    r = _cli("run", str(f), "--target", "interp", "--compare")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("prob") and "float32" in r.stdout
    err = float(r.stderr.split("max relative error")[1].split()[0])
    assert err < 1e-5
    r = _cli("compile", str(f), "--target", "interp", "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    import json
    man = json.loads((tmp_path / "out" / "dense.interp.json").read_text())
    assert man["target"] == "interp" and [s["layers"] for s in man["schedule"]] == [["ip1"], ["ip2"], ["prob"]]


def test_triton_imported_without_its_interpreter_is_a_clear_error(tmp_path):
    """A process that imported triton before TRITON_INTERPRET was set (its standard library's @jit functions
    decorated for the compiler) gets netc's error, not an internal error from inside a kernel."""
    f = tmp_path / "dense.nd"
    f.write_text(DENSE)
    code = f"import sys, triton, netc.cli; sys.exit(netc.cli.main(['run', {str(f)!r}, '--target', 'interp']))"
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "the interpreter target needs Triton imported with TRITON_INTERPRET=1" in r.stderr


# ------------------------------------------------------------------------------ losses, labels, copies

LOSSES = """network losses {
  input data: f32[3, 6, 6, 2]
  input label: i32[3]
  input onehot: i64[3, 5]
  input target: f32[3, 5]
  conv = Convolution(data) { filter: [3, 3, 2, 4], strides: [1, 2, 2, 1], padding: SAME, activation: relu }
  logits = InnerProduct(conv) { num_outputs: 5 }
  prob = Softmax(logits)
  xent = SoftmaxLoss(logits, label)
  xent1 = SoftmaxLoss(logits, onehot)
  l2 = EuclideanLoss(logits, target)
  output prob, xent, xent1, l2
}
"""


def test_losses_and_integer_labels():
    """SoftmaxLoss on i32 class indices and i64 one-hot rows, EuclideanLoss: scalars without a batch
    axis, planned in the constant region above the parameters (poisoned there too)."""
    prog = _check(LOSSES)
    for name in ("xent", "xent1", "l2"):
        t = prog.plan.tensor(name)
        assert t.shape == () and t.cls == 0, (name, t.cls)
    assert prog.view(prog.plan.tensor("label")).dtype == torch.int32
    assert {L.call.kernel.__name__ for L in prog.launches} >= {"softmax_loss_kernel", "euclidean_loss_kernel"}
    from netc.runtime.interp import default_inputs
    inputs = default_inputs(prog.module, prog.net)
    prog.launches = [L for L in prog.launches if L.layers != ["xent"]]
    out = prog.run(inputs)
    assert torch.isnan(out["xent"]) and not torch.isnan(out["l2"])


def test_given_labels_outside_the_classes_are_located(tmp_path):
    """Class labels outside 0..C-1 fed to the kernels (which cannot raise: the loss would be NaN) are an error
    at the input, for a run and for training from --inputs and from --data; one-hot rows are not indices."""
    import numpy as np
    from cli_inprocess import netc_interp
    f = tmp_path / "losses.nd"
    f.write_text(LOSSES)
    good = dict(data=np.zeros((3, 6, 6, 2), np.float32), label=np.array([0, 4, 2], np.int32),
                onehot=np.eye(5, dtype=np.int64)[[1, 2, 3]], target=np.zeros((3, 5), np.float32))
    np.savez(tmp_path / "good.npz", **good)
    np.savez(tmp_path / "bad.npz", **{**good, "label": np.array([0, 5, 2], np.int32)})
    np.savez(tmp_path / "data.npz", **{k: np.concatenate([v, v]) for k, v in good.items()} | {
        "label": np.array([0, 1, 2, 3, 4, -1], np.int32)})
    r = netc_interp("run", f, "--target", "interp", "--inputs", tmp_path / "good.npz")
    assert r.returncode == 0, r.stderr
    for args in (("--inputs", tmp_path / "bad.npz"), ("--train", "--steps", "1", "--inputs", tmp_path / "bad.npz"),
                 ("--train", "--epochs", "1", "--data", tmp_path / "data.npz")):
        r = netc_interp("run", f, "--target", "interp", *args)
        want = (f"{args[-1]}: error: --data: 'label' holds the label -1; the labels" if "--data" in args else  # Dataset.check
                f"{args[-1]}: error: 'label' holds 5 at [1]: class labels must be 0 to 4 (input 'label' of {f}:3:9)")
        assert r.returncode == 1 and want in r.stderr, r.stderr


def test_loss_at_a_smaller_batch_than_planned():
    """The loss averages over the run's batch: its row count is an argument affine in the batch."""
    from netc.ops import reference as R
    from netc.runtime.interp import InterpProgram, default_inputs
    from netc.runtime.reference import run_reference
    m = parse_nd(LOSSES)
    prog = InterpProgram(m, batch=2)
    inputs = default_inputs(m, prog.net)
    got = prog.run({k: v[:2] for k, v in inputs.items()})
    ref = run_reference(m, inputs, intermediates=True)
    R.check(got["xent"], R.softmax_loss(ref["logits"][:2], inputs["label"][:2]), torch.float32)
    R.check(got["l2"], R.euclidean_loss(ref["logits"][:2], inputs["target"][:2]), torch.float32)


COPIES = """network copies {
  input data: f32[2, 5, 5, 3]
  conv = Convolution(data) { filter: [3, 3, 3, 4], strides: [1, 1, 1, 1], padding: VALID }
  drop = Dropout(conv)
  flat = Reshape(drop) { output_shape: [-1, 36] }
  ip = InnerProduct(flat) { num_outputs: 3 }
  output ip, drop
}
"""


def test_copy_where_the_plan_does_not_alias(monkeypatch):
    """Dropout and Reshape are zero-copy in the memory plan; where a plan does not alias them (here:
    told so through their OpDef flags, which the planner reads), codegen copies instead."""
    from netc.ops import lookup
    prog = _check(COPIES)
    assert [L.layers for L in prog.launches] == [["conv"], ["ip"]]
    monkeypatch.setattr(lookup("netc.dropout"), "identity_at_inference", False)
    monkeypatch.setattr(lookup("netc.reshape"), "view", False)
    prog = _check(COPIES)
    assert [L.layers for L in prog.launches] == [["conv"], ["drop"], ["flat"], ["ip"]]
    assert all(L.call.kernel.__name__ == "elementwise_kernel" for L in prog.launches[1:3])


OPAQUE = """network op {
  input data: f32[2, 6, 6, 3]
  conv = Convolution(data) { filter: [3, 3, 3, 4], strides: [1, 1, 1, 1], padding: SAME }
  bn = Opaque(conv) { type: "BatchNorm" }
  relu = ReLU(bn)
  acc = Opaque(relu) { type: "Accuracy" }
}
"""


def test_opaque_layers_refused_unless_run_as_identity():
    from netc.diagnostics import DiagnosticEngine
    from netc.pipelines import Options, inference
    from netc.runtime.interp import InterpProgram
    with pytest.raises(NetcError) as e:
        InterpProgram(parse_nd(OPAQUE))
    msgs = [d.message for d in e.value.diagnostics]
    assert len(msgs) == 2 and "'bn'" in msgs[0] and "'acc'" in msgs[1] and "cannot execute" in msgs[0]
    assert "--opaque-as-identity" in e.value.diagnostics[-1].notes[0].message
    m = parse_nd(OPAQUE)
    diag = DiagnosticEngine()
    inference(m, Options(opaque_as_identity=True), diag)
    warns = [d.message for d in diag.diagnostics if d.severity == "warning"]
    assert any("'BatchNorm'" in w and "bn" in w for w in warns) and any("acc" in w for w in warns)
    ops = {op.attrs["name"]: op for op in m.networks()[0].regions[0].ops if "name" in op.attrs}
    assert ops["bn"].name == "netc.identity" and ops["bn"].attrs["type"] == "BatchNorm"
    prog = _check(m)
    # zero-copy: the identities are aliases in the plan, no launches
    assert [L.layers for L in prog.launches] == [["conv"], ["relu"]]
    assert prog.plan.tensor("acc").buffer == prog.plan.tensor("relu").buffer


def test_opaque_with_several_inputs_cannot_be_an_identity(capsys, tmp_path):
    f = tmp_path / "op2.nd"
    f.write_text(OPAQUE.replace('acc = Opaque(relu)', 'acc = Opaque(relu, conv)'))
    r = _main(capsys, "run", str(f), "--target", "interp", "--opaque-as-identity")
    assert r.returncode == 1 and "Traceback" not in r.stderr and "'acc'" in r.stderr, r.stderr


def test_large_tiles_run_the_same_kernels():
    from netc.runtime.interp import InterpProgram, default_inputs
    from netc.runtime.reference import run_reference
    m = parse_nd(INCEPTION)
    small, large = InterpProgram(m), InterpProgram(m, blocks="large")
    assert [L.call.kernel for L in small.launches] == [L.call.kernel for L in large.launches]
    bm = [(a.call.constexprs["BLOCK_M"], b.call.constexprs["BLOCK_M"]) for a, b in zip(small.launches, large.launches)
          if "BLOCK_M" in a.call.constexprs]
    assert all(y >= x for x, y in bm) and any(y > x for x, y in bm)
    inputs = default_inputs(m, large.net)
    ref = run_reference(m, inputs)["head"]
    for prog in (small, large):
        torch.testing.assert_close(prog.run(inputs)["head"].double(), ref, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------------------ the CLI

def _main(capsys, *args):
    """`netc ARGS` in this process (the interpreter is already on): (exit status, stdout, stderr)."""
    from netc.cli import main
    capsys.readouterr()
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, rc, out, err)


def test_cli_scaled_run(capsys):
    r = _main(capsys, "run", "examples/lenet.nd", "--target", "interp", "--compare", "--batch", "3", "--spatial", "20",
             "--interp-blocks", "large")
    assert r.returncode == 0, r.stderr
    assert "input 'data': [64, 28, 28, 1] -> [3, 20, 20, 1]" in r.stderr
    assert "input 'label': [64] -> [3]" in r.stderr
    assert "prob  [3, 10]" in r.stdout and "loss  []" in r.stdout
    errs = [float(line.split("max relative error")[1].split()[0]) for line in r.stderr.splitlines()
            if "max relative error" in line]
    assert len(errs) == 2 and max(errs) < 1e-5


def test_cli_smallest_spatial_size(capsys):
    r = _main(capsys, "run", "examples/lenet.nd", "--reference", "--spatial", "min", "--batch", "1")
    assert r.returncode == 0, r.stderr
    assert "--spatial min: 16 is the smallest valid spatial size" in r.stderr and "[1, 16, 16, 1]" in r.stderr


def test_inputs_for_several_networks():
    from netc.runtime.interp import split_inputs
    m = parse_nd(open(ROOT / "examples/gan.nd").read())
    x = torch.zeros(128, 1, dtype=torch.int32)
    per = split_inputs(m, ["gan_g", "gan_d"], {"label": x, "gan_d.sample": torch.zeros(128, 2)})
    assert set(per["gan_g"]) == {"label"} and set(per["gan_d"]) == {"label", "sample"}
    assert split_inputs(m, ["gan_g"], None) == {"gan_g": None}
    with pytest.raises(NetcError, match="no network has an input 'noise2'"):
        split_inputs(m, ["gan_g", "gan_d"], {"noise2": x})


@pytest.mark.parametrize("args,msg", [(("--spatial", "12"), "does not fit"), (("--spatial", "0"), "positive"),
                                      (("--spatial", "8x"), "N or HxW"), (("--batch", "0"), "positive")])
def test_cli_bad_scaling(capsys, args, msg):
    r = _main(capsys, "run", "examples/lenet.nd", "--target", "interp", *args)
    assert r.returncode == 1 and msg in r.stderr and "Traceback" not in r.stderr, r.stderr
    if args[1] == "12":
        assert "note: the inputs were scaled (--spatial 12) before shape inference" in r.stderr


def test_cli_spatial_needs_an_image_input(capsys):
    r = _main(capsys, "run", "examples/gan.nd", "--reference", "--spatial", "8")
    assert r.returncode == 1 and "4-D" in r.stderr, r.stderr


def test_cli_runs_every_network(capsys):
    r = _main(capsys, "run", "examples/gan.nd", "--target", "interp", "--compare", "--batch", "4")
    assert r.returncode == 0, r.stderr
    names = [line.split()[0] for line in r.stdout.splitlines()]
    assert names == ["gan_g.cost", "gan_g.dis_prob", "gan_g.gen_sample", "gan_d.cost", "gan_d.dis_prob"]
    assert r.stderr.count("max relative error") == 5
    r = _main(capsys, "run", "examples/gan.nd", "--target", "interp", "--network", "gan_d", "--batch", "4")
    assert r.returncode == 0 and r.stdout.split()[0] == "cost", r.stderr


def test_cli_opaque_as_identity(capsys, tmp_path):
    f = tmp_path / "op.nd"
    f.write_text(OPAQUE)
    r = _main(capsys, "run", str(f), "--target", "interp")
    assert r.returncode == 1 and "--opaque-as-identity" in r.stderr and "'bn'" in r.stderr, r.stderr
    r = _main(capsys, "run", str(f), "--target", "interp", "--opaque-as-identity", "--compare")
    assert r.returncode == 0, r.stderr
    assert "unknown type 'BatchNorm' runs as the identity" in r.stderr and "bn" in r.stderr
    r = _main(capsys, "compile", str(f), "--target", "interp", "--opaque-as-identity", "-o", str(tmp_path / "m.json"))
    assert r.returncode == 0 and "warning" in r.stderr, r.stderr


def test_input_without_batch_axis_is_a_clear_error(tmp_path, capsys):
    """The interpreter target accepts what the .so accepts: batch-sized inputs (else a located
    error, not an internal one from lowering)."""
    from netc.cli import main
    f = tmp_path / "nb.nd"
    f.write_text("network nb {\n  input x: f32[4, 8]\n  input s: f32[2, 8]\n  a = ReLU(x)\n  b = ReLU(s)\n}\n")
    assert main(["run", str(f), "--target", "interp"]) == 1
    err = capsys.readouterr().err
    assert f"{f}:3:9: error: input 's' has shape [2, 8], without the batch axis" in err and "Traceback" not in err
