"""The Recurrent and Clockwork ops (netc/ops/rnn.py): Brainstorm's simple RNN and clockwork RNN over a
whole time-major sequence.

* shapes, parameter shapes (Brainstorm's names and order), costs and located shape errors;
* the reference against the steps written out here by hand (numpy, Brainstorm's forward_pass);
* the gradient ops (<type>_grad_steps, rnn_grad_data, rnn_grad_param) against central finite differences
  (float64, every entry of x, h0 and every parameter, with and without h0, T = 1 among them) and
  torch.autograd; the t = 0 terms with a nonzero context are checked directly, not taken from Brainstorm;
* carried state: 4 steps in one call equal 2 + 2 (the Clockwork with periods 1, so that the clock's
  restart at t = 0 of the second call is no difference);
* a small .nd network runs and trains 2 steps with `netc run --reference`; on the interpreter target
  (netc's kernels, netc/kernels/rnn.py) its forward and two training steps equal the reference's
  (--compare), also stacked (a Clockwork over a Recurrent: the lower one's dx), and
  `netc compile --target cuda --train` builds a Clockwork net's .so without a GPU.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from netc import pipelines
from netc.cli import main
from netc.diagnostics import NetcError
from netc.frontend import load_text
from netc.ops import ShapeError, lookup
from netc.pipelines import Options, Training
from cli_inprocess import netc_interp  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REC, CLK = lookup("netc.recurrent"), lookup("netc.clockwork")
ACTS = ("tanh", "sigmoid", "relu", "none")
OPS = {"recurrent": REC, "clockwork": CLK}


def attrs(**given):
    a = {"activation": "tanh"}
    a.update(given)
    return a


def rand(*shape, seed=1):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def params(op, x_dim, h, seed=0, scale=0.5, timing=None):
    g = torch.Generator().manual_seed(seed)
    shapes = op.param_shapes(attrs(size=h), [(1, 1, x_dim)], None)
    p = {r: scale * torch.randn(s, generator=g, dtype=torch.float64) for r, s in shapes.items()}
    if "timing" in p:
        p["timing"] = torch.tensor(timing if timing is not None else [1.0, 2.0, 3.0, 4.0, 5.0][:h] + [2.0] * (h - 5),
                                   dtype=torch.float64)
    return p


# -- shapes ------------------------------------------------------------------------------------------

def test_shapes_and_parameters():
    assert REC.infer(attrs(size=5), [(7, 3, 2, 4)]) == (7, 3, 5)
    assert CLK.infer(attrs(size=5), [(7, 3, 8), (3, 5)]) == (7, 3, 5)
    assert REC.param_shapes(attrs(size=5), [(7, 3, 2, 4)], None) == {"W": (5, 8), "R": (5, 5), "bias": (5,)}
    ps = CLK.param_shapes(attrs(size=5), [(7, 3, 2, 4)], None)
    assert list(ps) == ["W", "R", "bias", "timing"]       # Brainstorm's order
    assert ps["timing"] == (5,) and ps["W"] == (5, 8)
    assert REC.batch_axis == CLK.batch_axis == 1


@pytest.mark.parametrize("op", [REC, CLK], ids=lambda o: o.name)
@pytest.mark.parametrize("a,ins,where,words", [
    (attrs(size=0), [(2, 3, 4)], ("attr", "size"), "positive"),
    (attrs(size=4), [(3, 4)], ("operand", 0), "time-major"),
    (attrs(size=4), [(2, 3, 4), (2, 4)], ("operand", 1), "initial h"),
    (attrs(size=4), [(2, 3, 4), (3, 5)], ("operand", 1), r"\[B, size\] = \[3, 4\]"),
])
def test_shape_errors(op, a, ins, where, words):
    with pytest.raises(ShapeError, match=words) as e:
        op.infer(a, ins)
    assert getattr(e.value, where[0]) == where[1]


def test_costs():
    t, b, x, h = 7, 3, 4, 5
    c = REC.cost(attrs(size=h), [(t, b, x)], (t, b, h))
    assert c.flops_fwd == 2 * t * b * x * h + 2 * t * b * h * h + 6 * t * b * h
    assert c.flops_bwd_data == 2 * t * b * x * h + 2 * t * b * h * h + 4 * t * b * h
    assert c.flops_bwd_filter == 2 * t * b * x * h + 2 * t * b * h * h + t * b * h
    assert REC.cost(attrs(size=h), [(t, b, x)], (t, b, h), False).flops_bwd_data == 2 * t * b * h * h + 4 * t * b * h
    c = CLK.cost(attrs(size=h), [(t, b, x)], (t, b, h))
    assert c.flops_fwd == 2 * t * b * x * h + 2 * t * b * h * h + 7 * t * b * h


# -- the reference -----------------------------------------------------------------------------------

def _act(name, v):
    return {"tanh": np.tanh, "sigmoid": lambda u: 1 / (1 + np.exp(-u)), "relu": lambda u: np.maximum(u, 0),
            "none": lambda u: u}[name](v)


def _steps_by_hand(x, h0, p, act, clock):
    """Brainstorm's forward_pass written out in numpy: Ha = x W^T + bias, then per step Ha[t] += h[t-1] R^T,
    y[t] = act(Ha[t]); the clockwork copies y[t-1] back where fmod(t, timing) != 0, from t = 1 on."""
    p = {k: v.numpy() for k, v in p.items()}
    x = x.numpy().reshape(x.shape[0], x.shape[1], -1)
    h = np.zeros((x.shape[1], p["bias"].shape[0])) if h0 is None else h0.numpy()
    ys = []
    for t in range(x.shape[0]):
        y = _act(act, x[t] @ p["W"].T + p["bias"] + h @ p["R"].T)
        if clock and t > 0:
            keep = np.fmod(float(t), p["timing"]) != 0
            y[:, keep] = h[:, keep]
        ys.append(y)
        h = y
    return np.stack(ys)


@pytest.mark.parametrize("name", ["recurrent", "clockwork"])
@pytest.mark.parametrize("act", ACTS)
def test_reference_equals_the_steps_written_out(name, act):
    op = OPS[name]
    x, h0 = rand(5, 2, 2, 2, seed=1), rand(2, 4, seed=2)
    p = params(op, 4, 4, timing=[1.0, 2.0, 3.0, 2.5])
    for state in ([h0], []):
        y = op.reference(attrs(size=4, activation=act), [x, *state], p)
        want = _steps_by_hand(x, state[0] if state else None, p, act, name == "clockwork")
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-12, atol=1e-12)


def test_the_clock():
    """Unit j with period 2 updates at t = 0, 2, 4; with period 2.5 at t = 0 only (fmod(5, 2.5) = 0: t = 5);
    with period 1 always; and at t = 0 every unit updates, also with a context."""
    x = rand(6, 1, 3, seed=3)
    p = params(CLK, 3, 3, timing=[1.0, 2.0, 2.5])
    y = CLK.reference(attrs(size=3), [x, rand(1, 3, seed=4)], p)
    assert not torch.equal(y[0], rand(1, 3, seed=4))
    for t in range(1, 6):
        assert (y[t, 0, 1] == y[t - 1, 0, 1]) == (t % 2 == 1), t
        assert (y[t, 0, 2] == y[t - 1, 0, 2]) == (t != 5), t
        assert y[t, 0, 0] != y[t - 1, 0, 0]


@pytest.mark.parametrize("name", ["recurrent", "clockwork"])
@pytest.mark.parametrize("act", ACTS)
def test_carried_state_four_steps_are_two_plus_two(name, act):
    op = OPS[name]
    x, h0 = rand(4, 3, 2, seed=4), rand(3, 5, seed=5)
    p = params(op, 2, 5, seed=7, timing=[1.0] * 5)
    a = attrs(size=5, activation=act)
    whole = op.reference(a, [x, h0], p)
    first = op.reference(a, [x[:2], h0], p)
    second = op.reference(a, [x[2:], first[-1]], p)
    torch.testing.assert_close(torch.cat([first, second]), whole, rtol=1e-13, atol=1e-13)


# -- the gradient ------------------------------------------------------------------------------------

def _grads(name, a, x, state, dy, p):
    """Every gradient by the gradient ops' references: {'x', 'h0', role: ...} (timing: none)."""
    steps_op = lookup(f"netc.{name}_grad_steps")
    steps = steps_op.reference(a, [x, *state, dy], p)
    assert tuple(steps.shape) == steps_op.infer(a, [tuple(v.shape) for v in (x, *state, dy)])
    assert steps_op.param_shapes(a, [tuple(v.shape) for v in (x, *state, dy)], None) == \
        {r: tuple(v.shape) for r, v in p.items()}
    data, par = lookup("netc.rnn_grad_data"), lookup("netc.rnn_grad_param")
    out = {}
    for wrt, s in (("x", tuple(x.shape)), ("h0", (x.shape[1], a["size"]))):
        out[wrt] = data.reference({"wrt": wrt, "input_shape": list(s)}, [steps], p)
        assert tuple(out[wrt].shape) == data.infer({"wrt": wrt, "input_shape": list(s)}, [tuple(steps.shape)]) == s
    for r in ("W", "R", "bias"):
        ins = [steps] + ([x] if r == "W" else [])
        out[r] = par.reference({"role": r}, ins, {})
        assert tuple(out[r].shape) == tuple(p[r].shape) == par.infer({"role": r}, [tuple(v.shape) for v in ins])
    if "timing" in p:
        out["timing"] = torch.zeros_like(p["timing"])   # no gradient (Brainstorm's computes_no_gradients_for)
    return out


def _loss(op, a, x, state, p, w):
    return (op.reference(a, [x, *state], p) * w).sum()


@pytest.mark.parametrize("name", ["recurrent", "clockwork"])
@pytest.mark.parametrize("act", ["tanh", "sigmoid", "none"])
@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("t_len", [1, 4])
def test_gradient_against_finite_differences(name, act, with_state, t_len):
    """Central differences in float64 on every entry of x, h0 and every parameter. The clockwork's periods
    1, 2, 3 tick at different steps (its units keep their outputs in between); its timing is checked at
    periods 1.5, 2.5, 3.5, away from the steps where fmod jumps: no gradient there either."""
    op = OPS[name]
    a = attrs(size=3, activation=act)
    x = rand(t_len, 2, 2, seed=8)
    state = [rand(2, 3, seed=9)] if with_state else []
    w = rand(t_len, 2, 3, seed=12)          # loss = sum(w * y): dy = w
    for timing in ([1.0, 2.0, 3.0], [1.5, 2.5, 3.5]):
        p = params(op, 2, 3, seed=11, timing=timing)
        got = _grads(name, a, x, state, w, p)
        named = {"x": x, **({"h0": state[0]} if with_state else {}), **p}
        if timing[0] != 1.0:
            named = {"timing": p["timing"]} if "timing" in p else {}
        eps = 1e-6
        for k, v in named.items():
            if k == "timing" and timing[0] == 1.0:
                continue                     # integer periods: fmod jumps at them
            fd = torch.zeros_like(v)
            for idx in np.ndindex(*v.shape):
                keep = float(v[idx])
                v[idx] = keep + eps
                up = float(_loss(op, a, x, state, p, w))
                v[idx] = keep - eps
                down = float(_loss(op, a, x, state, p, w))
                v[idx] = keep
                fd[idx] = (up - down) / (2 * eps)
            torch.testing.assert_close(got[k], fd, rtol=1e-6, atol=1e-8, msg=lambda m: f"{k}: {m}")


@pytest.mark.parametrize("name", ["recurrent", "clockwork"])
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("with_state", [False, True])
def test_gradient_against_autograd(name, act, with_state):
    op = OPS[name]
    a = attrs(size=4, activation=act)
    x = rand(5, 3, 2, 2, seed=13).requires_grad_()
    state = [rand(3, 4, seed=14).requires_grad_()] if with_state else []
    p = params(op, 4, 4, seed=16, timing=[1.0, 2.0, 3.0, 4.0])
    leaves = {"x": x, **({"h0": state[0]} if with_state else {})}
    leaves.update({r: v.requires_grad_() for r, v in p.items() if r != "timing"})
    dy = rand(5, 3, 4, seed=17)
    with torch.enable_grad():
        y = op.reference(a, [x, *state], p)
        refs = torch.autograd.grad(y, list(leaves.values()), dy)
    with torch.no_grad():
        got = _grads(name, a, x.detach(), [s.detach() for s in state], dy, {k: v.detach() for k, v in p.items()})
    for n, ref in zip(leaves, refs):
        torch.testing.assert_close(got[n], ref, rtol=1e-10, atol=1e-12, msg=lambda m: f"{n}: {m}")


# -- a network ---------------------------------------------------------------------------------------

NET = """network seq {
  input x: f32[4, 3, 2, 3]
  input h0: f32[3, 5]
  input label: f32[4, 3, 5]
  y = TYPE(x, h0) { size: 5 }
  loss = EuclideanLoss(y, label)
}
"""

NET_NO_STATE = """network seq {
  input x: f32[4, 3, 6]
  input label: f32[4, 3, 5]
  y = TYPE(x) { size: 5, activation: sigmoid }
  loss = EuclideanLoss(y, label)
}
"""


@pytest.mark.parametrize("kind", ["Recurrent", "Clockwork"])
@pytest.mark.parametrize("src", [NET, NET_NO_STATE], ids=["state", "no_state"])
def test_network_runs_and_trains_on_the_reference(kind, src, tmp_path, capsys):
    path = tmp_path / "seq.nd"
    path.write_text(src.replace("TYPE", kind))
    assert main(["run", str(path), "--reference"]) == 0
    assert "loss" in capsys.readouterr().out
    assert main(["run", str(path), "--train", "--steps", "2", "--reference"]) == 0
    assert "trained 2 steps" in capsys.readouterr().out


@pytest.mark.parametrize("kind", ["Recurrent", "Clockwork"])
def test_the_gradient_ops_in_a_training_program(kind):
    m = load_text(NET.replace("TYPE", kind), "seq.nd")
    pipelines.training(m, Options(training=Training()))
    ops = m.networks()[0].regions[0].ops
    names = [op.name for op in ops]
    assert f"netc.{kind.lower()}_grad_steps" in names
    roles = sorted(op.attrs["role"] for op in ops if op.name == "netc.rnn_grad_param")
    assert roles == ["R", "W", "bias"]                 # no gradient for the clockwork's timing
    assert "netc.rnn_grad_data" not in names           # x and h0 are inputs: no gradient wanted


def _netc(*args):
    return netc_interp(*args)   # in this process where it can run here (tests/cli_inprocess.py)


# a Clockwork over a Recurrent: the Recurrent's output needs its gradient (rnn_grad_data's dx kernel)
NET_STACKED = """network seq {
  input x: f32[5, 3, 2, 3]
  input label: f32[5, 3, 4]
  z = Recurrent(x) { size: 7, activation: relu }
  y = Clockwork(z) { size: 4 }
  loss = EuclideanLoss(y, label)
}
"""


@pytest.mark.parametrize("src,first", [(NET.replace("TYPE", "Recurrent"), True), (NET.replace("TYPE", "Clockwork"), False),
                                       (NET_STACKED, False)],
                         ids=["recurrent-state", "clockwork-state", "stacked"])   # stacked: a Clockwork without h0
def test_interpreter_target_runs_and_trains_against_the_reference(src, first, tmp_path):
    """netc's kernels (kernels/rnn.py) under Triton's interpreter: a forward and two training steps, each
    within f32 tolerance of the float64 reference (--compare); with an initial state, fed whole."""
    pytest.importorskip("triton")
    path = tmp_path / "seq.nd"
    path.write_text(src)
    if first:   # the forward alone once (the training comparison runs the forward too)
        r = _netc("run", path, "--target", "interp", "--compare")
        assert r.returncode == 0, r.stderr
        assert "loss: max relative error" in r.stderr
    r = _netc("run", path, "--target", "interp", "--train", "--compare", "--steps", "2")
    assert r.returncode == 0, r.stderr + r.stdout
    assert "compared 2 training steps of network 'seq' (sgd) on the interpreter target: ok" in r.stdout + r.stderr


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_compile_with_a_training_step_without_a_gpu(tmp_path):
    """`netc compile --target cuda --train` builds a Clockwork net's .so (cubins compiled on the CPU): its
    forward runs the input GEMM and the recurrence, its training step the gradient's kernels; T is the
    batch, h0 is fed whole."""
    pytest.importorskip("triton.backends.nvidia.compiler")
    from netc.runtime import native as N
    path = tmp_path / "seq.nd"
    path.write_text(NET.replace("TYPE", "Clockwork"))
    r = subprocess.run([sys.executable, "-m", "netc", "compile", str(path), "-o", str(tmp_path / "seq.so"),
                        "--target", "cuda", "--train"], capture_output=True, text=True, cwd=ROOT, timeout=900,
                       env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr
    m = N.read_manifest(tmp_path / "seq.so")
    assert m["batch"] == 4
    assert [(i["name"], i["batched"], i["shape"]) for i in m["inputs"]] == [
        ("x", True, [4, 3, 2, 3]), ("h0", False, [3, 5]), ("label", True, [4, 3, 5])]
    assert [e["op"] for e in m["schedule"]][:2] == ["netc.clockwork", "netc.clockwork"]   # the input GEMM, the recurrence
    ops = [e["op"] for e in m["training"]["schedule"]]
    assert ops.count("netc.clockwork_grad_steps") == 3 and ops.count("netc.rnn_grad_param") == 3   # W, R, bias
    assert "netc.rnn_grad_data" not in ops          # x and h0 are inputs: no gradient for them


@pytest.mark.parametrize("kind", ["Recurrent", "Clockwork"])
def test_bad_operands_are_located(kind, tmp_path, capsys):
    path = tmp_path / "bad.nd"
    path.write_text(NET.replace("TYPE", kind).replace("f32[3, 5]", "f32[3, 4]"))
    assert main(["run", str(path), "--reference"]) == 1
    err = capsys.readouterr().err
    assert "bad.nd:5:" in err and "the initial h must be [B, size] = [3, 5], got [3, 4]" in err
    with pytest.raises(NetcError, match="initial h"):
        pipelines.inference(load_text(NET.replace("TYPE", kind).replace("f32[3, 5]", "f32[3, 4]"), "bad.nd"),
                            Options())


def test_a_split_along_axis_0_is_refused(tmp_path, capsys):
    path = tmp_path / "seq.nd"
    path.write_text(NET_NO_STATE.replace("TYPE", "Recurrent").replace("activation: sigmoid }",
                                                                     "activation: sigmoid, partition_dim: 0 }"))
    assert main(["run", str(path), "--reference", "--workers", "2"]) == 1
    assert "cannot be split along axis 0 (partition_dim 0): its batch is axis 1" in capsys.readouterr().err


def test_random_periods():
    """netc's random value for a Clockwork's timing: the periods 1, 2, 4, ... (so its units tick at different
    rates; a Gaussian draw would stop every unit after t = 0)."""
    from netc.runtime.reference import random_param
    assert random_param("y.timing", (4,), "timing").tolist() == [1.0, 2.0, 4.0, 8.0]


@pytest.mark.parametrize("name", ["Recurrent", "Clockwork"])
def test_the_executor_carries_h_four_steps_are_two_plus_two(name):
    """Through the user-facing path (ReferenceExecutor(carry_state=True)): the final h of a call is the next
    call's h0; a Clockwork with periods 1 (its clock restarts in every call)."""
    from netc import pipelines
    from netc.frontend import load_text
    from netc.pipelines import Options
    from netc.runtime.reference import ReferenceExecutor

    def module(steps):
        m = load_text(f"network seq {{\n  input x: f32[{steps}, 3, 2]\n  input h0: f32[3, 5]\n"
                      f"  y = {name}(x, h0) {{ size: 5 }}\n}}\n", "seq.nd")
        pipelines.inference(m, Options())
        return m
    whole = ReferenceExecutor(module(4), carry_state=True)
    halves = ReferenceExecutor(module(2), carry_state=True)
    params = whole.get_params()
    if name == "Clockwork":
        params["y.timing"] = torch.ones_like(params["y.timing"])
        whole.set_params(params)
    halves.set_params(params)
    x = rand(4, 3, 2, seed=30)
    y4 = whole.run({"x": x})["y"]
    y2 = torch.cat([halves.run({"x": x[:2]})["y"], halves.run({"x": x[2:]})["y"]])
    torch.testing.assert_close(y2, y4, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(halves.state["h0"], y4[-1], rtol=1e-13, atol=1e-13)
