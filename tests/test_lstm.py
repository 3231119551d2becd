"""The Lstm op (netc/ops/lstm.py): Brainstorm's LSTM over a whole time-major sequence.

* shapes, parameter shapes and located shape errors;
* the reference against one step computed here by hand (numpy, Brainstorm's equations written out);
* its gradient ops (lstm_grad_gates, lstm_grad_data, lstm_grad_param) against central finite
  differences (float64) and torch.autograd, with and without an initial state h0, c0 (Brainstorm's
  context, whose t = 0 gradient is checked directly, not taken from Brainstorm);
* carried state: 4 steps in one call equal 2 + 2, the second call starting from the first's final
  h (y[-1]) and c;
* a small .nd network runs with `netc run --reference` and trains 2 steps; on the interpreter target
  (netc's LSTM kernels) its forward and two training steps equal the reference's (--compare), and
  `netc compile --target cuda --train` builds its .so without a GPU.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from netc.cli import main
from netc.diagnostics import NetcError
from netc.frontend import load_text
from netc.ops import ShapeError, lookup
from netc.ops.lstm import BLOCKS, ROLES, lstm_states
from netc import pipelines
from netc.pipelines import Options, Training
from cli_process import netc_process  # noqa: E402  (tests/: the test modules' directory)
from cli_inprocess import netc_inprocess, netc_interp  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LSTM = lookup("netc.lstm")
ACTS = ("tanh", "sigmoid", "relu", "none")


def attrs(**given):
    a = {"activation": "tanh"}
    a.update(given)
    return a


def acts(act: str) -> dict:
    """'relu/tanh': a block input activation and another for the cell output (cell_activation)."""
    block, _, cell = act.partition("/")
    return {"activation": block, **({"cell_activation": cell} if cell else {})}


def params(x_dim, h, seed=0, scale=0.5):
    g = torch.Generator().manual_seed(seed)
    shapes = LSTM.param_shapes(attrs(size=h), [(1, 1, x_dim)], None)
    return {r: scale * torch.randn(s, generator=g, dtype=torch.float64) for r, s in shapes.items()}


def rand(*shape, seed=1):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# -- shapes ------------------------------------------------------------------------------------------

def test_shapes_and_parameters():
    assert LSTM.infer(attrs(size=5), [(7, 3, 2, 4)]) == (7, 3, 5)
    assert LSTM.infer(attrs(size=5), [(7, 3, 8), (3, 5), (3, 5)]) == (7, 3, 5)
    ps = LSTM.param_shapes(attrs(size=5), [(7, 3, 2, 4)], None)
    assert list(ps) == list(ROLES)   # Brainstorm's order
    assert ps["Wz"] == (5, 8) and ps["Ri"] == (5, 5) and ps["bf"] == (5,) and ps["po"] == (1, 5)


@pytest.mark.parametrize("a,ins,where,words", [
    (attrs(size=0), [(2, 3, 4)], ("attr", "size"), "positive"),
    (attrs(size=4), [(3, 4)], ("operand", 0), "time-major"),
    (attrs(size=4), [(2, 3, 4), (3, 4)], ("operand", 1), "c0 too"),
    (attrs(size=4), [(2, 3, 4), (2, 4), (3, 4)], ("operand", 1), "initial h"),
    (attrs(size=4), [(2, 3, 4), (3, 4), (3, 5)], ("operand", 2), "initial c"),
])
def test_shape_errors(a, ins, where, words):
    with pytest.raises(ShapeError, match=words) as e:
        LSTM.infer(a, ins)
    assert getattr(e.value, where[0]) == where[1]


def test_costs():
    c = LSTM.cost(attrs(size=5), [(7, 3, 4)], (7, 3, 5))
    t, b, x, h = 7, 3, 4, 5
    assert c.flops_fwd == 8 * t * b * x * h + 8 * t * b * h * h + 38 * t * b * h
    assert c.flops_bwd_data == 8 * t * b * x * h + 8 * t * b * h * h + 30 * t * b * h
    assert c.flops_bwd_filter == 8 * t * b * x * h + 8 * t * b * h * h + 10 * t * b * h
    assert LSTM.cost(attrs(size=5), [(7, 3, 4)], (7, 3, 5), False).flops_bwd_data == 8 * t * b * h * h + 30 * t * b * h


# -- the reference -----------------------------------------------------------------------------------

def _sig(v):
    return 1.0 / (1.0 + np.exp(-v))


def _one_step(x, h, c, p):
    """One step of Brainstorm's forward_pass, written out in numpy (tanh activation)."""
    p = {k: v.numpy() for k, v in p.items()}
    za = x @ p["Wz"].T + h @ p["Rz"].T + p["bz"]
    ia = x @ p["Wi"].T + h @ p["Ri"].T + c * p["pi"] + p["bi"]
    fa = x @ p["Wf"].T + h @ p["Rf"].T + c * p["pf"] + p["bf"]
    c_new = _sig(ia) * np.tanh(za) + _sig(fa) * c
    oa = x @ p["Wo"].T + h @ p["Ro"].T + c_new * p["po"] + p["bo"]
    return _sig(oa) * np.tanh(c_new), c_new


def test_reference_equals_the_steps_written_out():
    x, h0, c0 = rand(3, 2, 4, seed=1), rand(2, 5, seed=2), rand(2, 5, seed=3)
    p = params(4, 5)
    y = LSTM.reference(attrs(size=5), [x, h0, c0], p)
    h, c = h0.numpy(), c0.numpy()
    for t in range(3):
        h, c = _one_step(x[t].numpy(), h, c, p)
        np.testing.assert_allclose(y[t].numpy(), h, rtol=1e-12, atol=1e-12)
    # without a context: h0 = c0 = 0; trailing feature axes are flattened
    y0 = LSTM.reference(attrs(size=5), [x.reshape(3, 2, 2, 2)], p)
    h1, _ = _one_step(x[0].numpy(), np.zeros((2, 5)), np.zeros((2, 5)), p)
    np.testing.assert_allclose(y0[0].numpy(), h1, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("act", ACTS)
def test_carried_state_four_steps_are_two_plus_two(act):
    x, h0, c0 = rand(4, 3, 2, seed=4), rand(3, 5, seed=5), rand(3, 5, seed=6)
    p = params(2, 5, seed=7)
    a = attrs(size=5, activation=act)
    whole = LSTM.reference(a, [x, h0, c0], p)
    first = LSTM.reference(a, [x[:2], h0, c0], p)
    c_mid = lstm_states(x[:2], h0, c0, p, act)["c_last"]   # the final c (not a result of the op yet)
    second = LSTM.reference(a, [x[2:], first[-1], c_mid], p)
    torch.testing.assert_close(torch.cat([first, second]), whole, rtol=1e-13, atol=1e-13)


# -- the gradient ------------------------------------------------------------------------------------

def _grads(a, x, state, dy, p):
    """Every gradient by the gradient ops' references: {'x', 'h0', 'c0', role: ...}."""
    gates = lookup("netc.lstm_grad_gates").reference(a, [x, *state, dy], p)
    assert tuple(gates.shape) == lookup("netc.lstm_grad_gates").infer(
        a, [tuple(v.shape) for v in (x, *state, dy)])
    data, par = lookup("netc.lstm_grad_data"), lookup("netc.lstm_grad_param")
    out = {wrt: data.reference({"wrt": wrt, "input_shape": list(s)}, [gates], p)
           for wrt, s in (("x", x.shape), ("h0", (x.shape[1], a["size"])), ("c0", (x.shape[1], a["size"])))}
    for r in ROLES:
        out[r] = par.reference({"role": r}, [gates] + ([x] if r[0] == "W" else []), {})
        assert tuple(out[r].shape) == tuple(p[r].shape)
    return out


def _loss(a, x, state, p, w):
    return (LSTM.reference(a, [x, *state], p) * w).sum()


@pytest.mark.parametrize("act", ["tanh", "sigmoid", "none", "relu/tanh", "tanh/sigmoid"])
@pytest.mark.parametrize("with_state", [False, True])
def test_gradient_against_finite_differences(act, with_state):
    """Central differences in float64 on every entry of x, h0, c0 and every parameter (relu/tanh: a relu block
    input and a tanh cell output, PaddlePaddle's book's lstmemory)."""
    a = attrs(size=3, **acts(act))
    x = rand(3, 2, 2, seed=8)
    state = [rand(2, 3, seed=9), rand(2, 3, seed=10)] if with_state else []
    p = params(2, 3, seed=11)
    w = rand(3, 2, 3, seed=12)             # loss = sum(w * y): dy = w
    got = _grads(a, x, state, w, p)
    named = {"x": x, **({"h0": state[0], "c0": state[1]} if with_state else {}), **p}
    eps = 1e-6
    for k, v in named.items():
        fd = torch.zeros_like(v)
        for idx in np.ndindex(*v.shape):
            keep = float(v[idx])
            v[idx] = keep + eps
            up = float(_loss(a, x, state, p, w))
            v[idx] = keep - eps
            down = float(_loss(a, x, state, p, w))
            v[idx] = keep
            fd[idx] = (up - down) / (2 * eps)
        torch.testing.assert_close(got[k], fd, rtol=1e-6, atol=1e-8, msg=lambda m: f"{k}: {m}")


@pytest.mark.parametrize("act", ACTS + ("relu/tanh", "none/sigmoid"))
@pytest.mark.parametrize("with_state", [False, True])
def test_gradient_against_autograd(act, with_state):
    a = attrs(size=4, **acts(act))
    x = rand(5, 3, 2, 2, seed=13).requires_grad_()
    state = [rand(3, 4, seed=14).requires_grad_(), rand(3, 4, seed=15).requires_grad_()] if with_state else []
    p = {k: v.requires_grad_() for k, v in params(4, 4, seed=16).items()}
    dy = rand(5, 3, 4, seed=17)
    with torch.enable_grad():
        y = LSTM.reference(a, [x, *state], p)
        leaves = [x, *state, *p.values()]
        refs = torch.autograd.grad(y, leaves, dy)
    names = ["x"] + (["h0", "c0"] if with_state else []) + list(p)
    with torch.no_grad():
        got = _grads(a, x.detach(), [s.detach() for s in state], dy, {k: v.detach() for k, v in p.items()})
    for n, ref in zip(names, refs):
        torch.testing.assert_close(got[n], ref, rtol=1e-10, atol=1e-12, msg=lambda m: f"{n}: {m}")


def test_gates_blocks_hold_the_forward_states():
    a = attrs(size=3)
    x, h0, c0 = rand(2, 2, 3, seed=18), rand(2, 3, seed=19), rand(2, 3, seed=20)
    p = params(3, 3, seed=21)
    gates = lookup("netc.lstm_grad_gates").reference(a, [x, h0, c0, rand(2, 2, 3, seed=22)], p)
    s = lstm_states(x, h0, c0, p)
    torch.testing.assert_close(gates[:, :, BLOCKS["c"]], s["c"])
    torch.testing.assert_close(gates[0, :, BLOCKS["c_prev"]], c0)
    torch.testing.assert_close(gates[1, :, BLOCKS["h_prev"]], s["y"][0])


# -- a network ---------------------------------------------------------------------------------------

NET = """network seq {
  input x: f32[4, 3, 2, 3]
  input h0: f32[3, 5]
  input c0: f32[3, 5]
  input label: f32[4, 3, 5]
  y = Lstm(x, h0, c0) { size: 5 }
  loss = EuclideanLoss(y, label)
}
"""

NET_NO_STATE = """network seq {
  input x: f32[4, 3, 6]
  input label: f32[4, 3, 5]
  y = Lstm(x) { size: 5, activation: sigmoid }
  loss = EuclideanLoss(y, label)
}
"""


@pytest.mark.parametrize("src", [NET, NET_NO_STATE], ids=["state", "no_state"])
def test_network_runs_and_trains_on_the_reference(src, tmp_path, capsys):
    path = tmp_path / "seq.nd"
    path.write_text(src)
    assert main(["run", str(path), "--reference"]) == 0
    out = capsys.readouterr().out
    assert "loss" in out
    assert main(["run", str(path), "--train", "--steps", "2", "--reference"]) == 0
    out = capsys.readouterr().out
    assert "trained 2 steps" in out


def test_the_gradient_ops_in_a_training_program():
    m = load_text(NET, "seq.nd")
    pipelines.training(m, Options(training=Training()))
    names = {op.name for op in m.networks()[0].regions[0].ops}
    assert {"netc.lstm_grad_gates", "netc.lstm_grad_param"} <= names


_netc = netc_process   # (tests/cli_process.py)


# the initial state declared first, T == B (3): the state is neither the batch's vote nor batch-sized
NET_STATE_FIRST = """network seq {
  input h0: f32[3, 4]
  input c0: f32[3, 4]
  input x: f32[3, 3, 5]
  input label: f32[3, 3, 4]
  y = Lstm(x, h0, c0) { size: 4, activation: relu }
  loss = EuclideanLoss(y, label)
}
"""


@pytest.mark.parametrize("src,t", [(NET, 4), (NET_STATE_FIRST, 3), (NET_STATE_FIRST.replace("[3, 3, ", "[2, 3, "), 2)],
                         ids=["state", "t_equals_b", "state_first"])
def test_the_sequence_leads_and_the_initial_state_is_fed_whole(src, t):
    """The compiled targets scale the leading axis of batch-sized tensors: for a time-major network that
    is T (the sequence's), while h0, c0 [B, H] have no batch axis (memory/graph.py initial_state_values:
    they do not vote for the batch -- a tie 2:2 would have made B the batch -- and are constant-sized,
    fed whole), also when T == B; in the training program too (lstm_grad_gates reads them)."""
    from netc.codegen import network_io, training_io
    from netc.memory import BATCH, CONSTANT
    from netc.memory.plan import plan_memory
    for mode in ("inference", "training"):
        m = load_text(src, "seq.nd")
        if mode == "training":
            pipelines.training(m, Options(training=Training()))
        else:
            pipelines.inference(m, Options())
        plan = plan_memory(m, m.networks()[0], mode=mode)
        cls = {n: plan.tensor(n).cls for n in ("x", "h0", "c0", "label", "y")}
        assert plan.batch == t
        assert cls == {"x": BATCH, "h0": CONSTANT, "c0": CONSTANT, "label": BATCH, "y": BATCH}
        ins = (training_io if mode == "training" else network_io)(m.networks()[0], plan)[0]
        assert sorted(i.name for i in ins) == ["c0", "h0", "label", "x"]       # none refused


def test_a_single_step_keeps_its_state_batch_sized():
    """A GRU's single step (x [B, X], rank 2: SINGA's unrolled form) has no time axis: its h0 leads with the
    batch like x (only a sequence's initial state is fed whole)."""
    from netc.memory import BATCH
    from netc.memory.plan import plan_memory
    m = load_text("network g {\n  input x: f32[3, 4]\n  input h0: f32[3, 5]\n  y = GRU(x, h0) { dim_hidden: 5 }\n}\n",
                  "g.nd")
    pipelines.inference(m, Options())
    plan = plan_memory(m, m.networks()[0])
    assert plan.batch == 3 and plan.tensor("x").cls == BATCH and plan.tensor("h0").cls == BATCH


@pytest.mark.parametrize("src,first", [(NET_NO_STATE, False), (NET, True), (NET_STATE_FIRST, False)],
                         ids=["no_state", "state", "t_equals_b"])
def test_interpreter_target_runs_and_trains_against_the_reference(src, first, tmp_path):
    """netc's LSTM kernels (kernels/lstm.py) under Triton's interpreter: a forward and two training
    steps, each within f32 tolerance of the float64 reference (--compare); with an initial state, fed
    whole (it has no batch axis)."""
    pytest.importorskip("triton")
    path = tmp_path / "seq.nd"
    path.write_text(src)
    if first:   # the forward alone once (the training comparison runs the forward too)
        r = netc_interp("run", path, "--target", "interp", "--compare")
        assert r.returncode == 0, r.stderr
        assert "loss: max relative error" in r.stderr
    r = netc_interp("run", path, "--target", "interp", "--train", "--compare", "--steps", "2")
    assert r.returncode == 0, r.stderr + r.stdout
    assert "compared 2 training steps of network 'seq' (sgd) on the interpreter target: ok" in r.stdout + r.stderr


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_compile_with_a_training_step_without_a_gpu(tmp_path):
    """`netc compile --target cuda --train` builds the .so (cubins compiled on the CPU): its forward runs
    the input GEMM and the recurrence, its training step the gradient's kernels."""
    pytest.importorskip("triton.backends.nvidia.compiler")
    from netc.runtime import native as N
    path = tmp_path / "seq.nd"
    path.write_text(NET)
    r = _netc("compile", path, "-o", tmp_path / "seq.so", "--target", "cuda", "--train")
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr          # the forward's batch is the training step's: T = 4, h0 untouched
    m = N.read_manifest(tmp_path / "seq.so")
    assert m["batch"] == 4
    assert [(i["name"], i["batched"], i["shape"]) for i in m["inputs"]] == [
        ("x", True, [4, 3, 2, 3]), ("h0", False, [3, 5]), ("c0", False, [3, 5]), ("label", True, [4, 3, 5])]
    assert [i["batched"] for i in m["training"]["inputs"]] == [True, False, False, True]
    assert [e["op"] for e in m["schedule"]][:2] == ["netc.lstm", "netc.lstm"]      # the input GEMM, the recurrence
    ops = [e["op"] for e in m["training"]["schedule"]]
    assert ops.count("netc.lstm_grad_gates") == 3 and ops.count("netc.lstm_grad_param") == 15
    assert "netc.lstm_grad_data" not in ops          # x, h0, c0 are inputs: no gradient for them


def test_the_so_feeds_the_initial_state_whole():
    """runtime/native.py's side of an input without a batch axis, checked without a GPU on a Net made by
    hand from a manifest's inputs: random inputs cut to a batch keep h0, c0 whole, and the batch of a
    call is the batch-sized inputs'."""
    import torch as T
    from netc.runtime import native as N
    net = object.__new__(N.Net)
    net.batch, net.device, net.network = 4, None, "seq"
    net.inputs = [N.TensorSpec("x", (4, 3, 6), T.float32, "f32"), N.TensorSpec("h0", (3, 5), T.float32, "f32", False),
                  N.TensorSpec("c0", (3, 5), T.float32, "f32", False)]
    ins = net.random_inputs(0, 2)
    assert {k: tuple(v.shape) for k, v in ins.items()} == {"x": (2, 3, 6), "h0": (3, 5), "c0": (3, 5)}
    whole = net.random_inputs(0)
    assert T.equal(ins["h0"], whole["h0"]) and T.equal(ins["x"], whole["x"][:2])
    assert N.batch_of(net, ins) == 2 and N.batch_of(net, {"h0": ins["h0"]}) == 1


def test_bad_operands_are_located(tmp_path):
    src = NET.replace("Lstm(x, h0, c0)", "Lstm(x, h0)")
    with pytest.raises(NetcError, match="c0 too"):
        m = load_text(src, "bad.nd")
        pipelines.inference(m, Options())


def test_a_split_along_axis_0_is_refused(tmp_path, capsys):
    """partition_dim 0 splits axis 0, which is an Lstm's time: refused, located (its batch is axis 1)."""
    path = tmp_path / "seq.nd"
    path.write_text(NET_NO_STATE.replace("activation: sigmoid }", "activation: sigmoid, partition_dim: 0 }"))
    assert main(["run", str(path), "--reference", "--workers", "2"]) == 1
    err = capsys.readouterr().err
    assert "seq.nd:4:47: error: 'y' (Lstm) cannot be split along axis 0 (partition_dim 0): its batch is axis 1" in err


def test_a_cell_activation_of_its_own_runs_and_trains_on_the_interpreter_target(tmp_path):
    """PaddlePaddle's lstmemory(act=Relu, state_act=Tanh): the reference runs it (cell_activation), and the
    kernels (the block input's activation and the cell output's, each a constexpr of its own) run its
    forward and two training steps within f32 tolerance of the reference."""
    pytest.importorskip("triton")
    path = tmp_path / "seq.nd"
    path.write_text(NET_NO_STATE.replace("activation: sigmoid }", "activation: relu, cell_activation: tanh }"))
    r = netc_inprocess("run", path, "--reference")
    assert r.returncode == 0, r.stderr
    r = netc_interp("run", path, "--target", "interp", "--train", "--compare", "--steps", "2")
    assert r.returncode == 0, r.stderr + r.stdout
    assert "compared 2 training steps of network 'seq' (sgd) on the interpreter target: ok" in r.stdout + r.stderr
