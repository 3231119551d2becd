"""The GRU op (netc/ops/recurrent.py): SINGA's kGRU over a whole time-major sequence.

* shapes, parameter shapes (SINGA's roles and order) and located shape errors;
* the reference against one step written out here by hand (numpy, SINGA's equations from
  src/neuralnet/neuron_layer/gru.cc: the reset after the recurrent product, h' = (1 - z) c + z h),
  and the other convention (linear_before_reset: false) against torch.nn.GRU;
* its gradient ops (gru_grad_gates, gru_grad_data, gru_grad_param) against central finite
  differences (float64) on every entry of x, h0 and every parameter, both conventions, with and
  without h0 and bias, T = 1 among them, and against torch.autograd;
* carried state: 4 steps in one call equal 2 + 2, the second starting from the first's y[-1];
* a small .nd network runs with `netc run --reference` and trains 2 steps; on the interpreter target
  (netc's GRU kernels) its forward and two training steps equal the reference's (--compare), and
  `netc compile --target cuda --train` builds its .so without a GPU; a single step runs there, its
  gradient is refused, located.
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
from netc.ops.recurrent import BLOCKS, ROLES, gru_states
from netc import pipelines
from netc.pipelines import Options, Training
from cli_process import netc_process  # noqa: E402  (tests/: the test modules' directory)
from cli_inprocess import netc_interp  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GRU = lookup("netc.gru")


def attrs(**given):
    a = {"bias": True, "linear_before_reset": True}
    a.update(given)
    return a


def params(x_dim, h, seed=0, scale=0.5, bias=True):
    g = torch.Generator().manual_seed(seed)
    shapes = GRU.param_shapes(attrs(dim_hidden=h, bias=bias), [(1, 1, x_dim)], None)
    return {r: scale * torch.randn(s, generator=g, dtype=torch.float64) for r, s in shapes.items()}


def rand(*shape, seed=1):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# -- shapes ------------------------------------------------------------------------------------------

def test_shapes_and_parameters():
    assert GRU.infer(attrs(dim_hidden=5), [(7, 3, 2, 4)]) == (7, 3, 5)
    assert GRU.infer(attrs(dim_hidden=5), [(7, 3, 8), (3, 5)]) == (7, 3, 5)
    assert GRU.infer(attrs(dim_hidden=5), [(3, 8), (3, 5)]) == (3, 5)      # one step, SINGA's unrolled form
    ps = GRU.param_shapes(attrs(dim_hidden=5), [(7, 3, 2, 4)], None)
    assert list(ps) == list(ROLES)   # SINGA's order
    assert ps["z_hx"] == (5, 8) and ps["c_hh"] == (5, 5) and ps["r_b"] == (5,)
    assert list(GRU.param_shapes(attrs(dim_hidden=5, bias=False), [(7, 3, 8)], None)) == list(ROLES[:6])


def test_char_rnn_parameter_count():
    ps = GRU.param_shapes(attrs(dim_hidden=512), [(50, 50, 101)], None)
    assert sum(int(np.prod(s)) for s in ps.values()) + 512 * 101 + 101 == 994917


@pytest.mark.parametrize("a,ins,where,words", [
    (attrs(dim_hidden=0), [(2, 3, 4)], ("attr", "dim_hidden"), "positive"),
    (attrs(dim_hidden=4), [(3,)], ("operand", 0), "time-major"),
    (attrs(dim_hidden=4), [(2, 3, 4), (2, 4)], ("operand", 1), r"h0 must be \[B, dim_hidden\] = \[3, 4\]"),
    (attrs(dim_hidden=4), [(2, 3, 4), (3, 5)], ("operand", 1), "initial state"),
])
def test_shape_errors(a, ins, where, words):
    with pytest.raises(ShapeError, match=words) as e:
        GRU.infer(a, ins)
    assert getattr(e.value, where[0]) == where[1]


def test_costs():
    t, b, x, h = 7, 3, 4, 5
    c = GRU.cost(attrs(dim_hidden=h), [(t, b, x), (b, h)], (t, b, h))     # with h0: every step reads a state
    assert c.flops_fwd == 6 * t * b * x * h + 6 * t * b * h * h + 23 * t * b * h
    assert c.flops_bwd_data == 6 * t * b * x * h + 6 * t * b * h * h + 23 * t * b * h
    assert c.flops_bwd_filter == 6 * t * b * x * h + 6 * t * b * h * h + 3 * t * b * h
    # without h0 step 0's recurrent products vanish (the zero state): T - 1 steps of them, and its
    # elementwise work is (1 - z) * c alone (6 fewer per element)
    c0 = GRU.cost(attrs(dim_hidden=h), [(t, b, x)], (t, b, h))
    assert c0.flops_fwd == 6 * t * b * x * h + 6 * (t - 1) * b * h * h + 23 * t * b * h - 6 * b * h
    assert GRU.cost(attrs(dim_hidden=h, bias=False), [(t, b, x), (b, h)], (t, b, h)).flops_fwd == \
        6 * t * b * x * h + 6 * t * b * h * h + 20 * t * b * h
    assert GRU.cost(attrs(dim_hidden=h), [(t, b, x), (b, h)], (t, b, h), False).flops_bwd_data == \
        6 * t * b * h * h + 23 * t * b * h
    # one step is the unrolled form's: 6BXH + 6BH^2 + 23BH with a state, 6BXH + 17BH without
    assert GRU.cost(attrs(dim_hidden=h), [(b, x), (b, h)], (b, h)).flops_fwd == \
        6 * b * x * h + 6 * b * h * h + 23 * b * h
    assert GRU.cost(attrs(dim_hidden=h), [(b, x)], (b, h)).flops_fwd == 6 * b * x * h + 17 * b * h


# -- the reference -----------------------------------------------------------------------------------

def _sig(v):
    return 1.0 / (1.0 + np.exp(-v))


def _one_step(x, h, p, lbr=True):
    """One step of SINGA's GRULayer::ComputeFeature, written out in numpy (lbr False: Cho et al.'s reset)."""
    p = {k: v.numpy() for k, v in p.items()}
    b = {g: p.get(f"{g}_b", 0.0) for g in "zrc"}
    z = _sig(x @ p["z_hx"].T + b["z"] + h @ p["z_hh"].T)
    r = _sig(x @ p["r_hx"].T + b["r"] + h @ p["r_hh"].T)
    if lbr:
        c = np.tanh(x @ p["c_hx"].T + b["c"] + r * (h @ p["c_hh"].T))
    else:
        c = np.tanh(x @ p["c_hx"].T + b["c"] + (r * h) @ p["c_hh"].T)
    return (1 - z) * c + z * h


@pytest.mark.parametrize("lbr", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_reference_equals_the_steps_written_out(lbr, bias):
    x, h0 = rand(3, 2, 4, seed=1), rand(2, 5, seed=2)
    p = params(4, 5, bias=bias)
    a = attrs(dim_hidden=5, bias=bias, linear_before_reset=lbr)
    y = GRU.reference(a, [x, h0], p)
    h = h0.numpy()
    for t in range(3):
        h = _one_step(x[t].numpy(), h, p, lbr)
        np.testing.assert_allclose(y[t].numpy(), h, rtol=1e-12, atol=1e-12)
    # without h0: h[-1] = 0 (SINGA's zero context); trailing feature axes are flattened
    y0 = GRU.reference(a, [x.reshape(3, 2, 2, 2)], p)
    np.testing.assert_allclose(y0[0].numpy(), _one_step(x[0].numpy(), np.zeros((2, 5)), p, lbr), rtol=1e-12,
                               atol=1e-12)
    # one step without a time axis (SINGA's unrolled form) is the sequence's first step
    torch.testing.assert_close(GRU.reference(a, [x[0], h0], p), y[0], rtol=0, atol=0)


def test_singa_convention_is_torch_gru():
    """torch.nn.GRU applies r after the recurrent product, r * (h W_hn^T + b_hn), as SINGA does: with
    b_hn = 0 (SINGA has no recurrent bias) and the roles mapped (torch's gate order r, z, n) it is the
    default form; linear_before_reset: false (checked by hand above) differs from it."""
    x, h0 = rand(4, 3, 6, seed=3), rand(3, 5, seed=4)
    p = params(6, 5, seed=5)
    rnn = torch.nn.GRU(6, 5, dtype=torch.float64)
    with torch.no_grad():
        rnn.weight_ih_l0.copy_(torch.cat([p["r_hx"], p["z_hx"], p["c_hx"]]))
        rnn.weight_hh_l0.copy_(torch.cat([p["r_hh"], p["z_hh"], p["c_hh"]]))
        rnn.bias_ih_l0.copy_(torch.cat([p["r_b"], p["z_b"], p["c_b"]]))
        rnn.bias_hh_l0.zero_()
        ref, _ = rnn(x, h0[None])
    torch.testing.assert_close(GRU.reference(attrs(dim_hidden=5), [x, h0], p), ref, rtol=1e-12, atol=1e-12)
    other = GRU.reference(attrs(dim_hidden=5, linear_before_reset=False), [x, h0], p)
    assert (other - ref).abs().max() > 1e-3     # the two conventions differ


@pytest.mark.parametrize("lbr", [True, False])
def test_carried_state_four_steps_are_two_plus_two(lbr):
    x, h0 = rand(4, 3, 2, seed=4), rand(3, 5, seed=5)
    p = params(2, 5, seed=7)
    a = attrs(dim_hidden=5, linear_before_reset=lbr)
    whole = GRU.reference(a, [x, h0], p)
    first = GRU.reference(a, [x[:2], h0], p)
    second = GRU.reference(a, [x[2:], first[-1]], p)
    torch.testing.assert_close(torch.cat([first, second]), whole, rtol=1e-13, atol=1e-13)
    assert (whole[2:] - GRU.reference(a, [x[2:]], p)).abs().max() > 1e-3   # the state matters
    torch.testing.assert_close(gru_states(x, h0, p, lbr)["h_last"], whole[-1])


# -- the gradient ------------------------------------------------------------------------------------

def _grads(a, x, h0, dy, p):
    """Every gradient by the gradient ops' references: {'x', 'h0', role: ...}."""
    state = [h0] if h0 is not None else []
    gates = lookup("netc.gru_grad_gates").reference(a, [x, *state, dy], p)
    assert tuple(gates.shape) == lookup("netc.gru_grad_gates").infer(a, [tuple(v.shape) for v in (x, *state, dy)])
    data, par = lookup("netc.gru_grad_data"), lookup("netc.gru_grad_param")
    b = x.shape[1] if x.dim() > 2 else x.shape[0]
    out = {wrt: data.reference({"wrt": wrt, "input_shape": list(s)}, [gates], p)
           for wrt, s in (("x", x.shape), ("h0", (b, a["dim_hidden"])))}
    for r in p:
        pa = {"role": r}
        ins = [gates] + ([x] if r.endswith("_hx") else [])
        out[r] = par.reference(pa, ins, {})
        assert tuple(out[r].shape) == tuple(p[r].shape) == par.infer(pa, [tuple(v.shape) for v in ins])
    return out


def _loss(a, x, h0, p, w):
    return (GRU.reference(a, [x] + ([h0] if h0 is not None else []), p) * w).sum()


@pytest.mark.parametrize("lbr", [True, False])
@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("steps", [1, 3, 0], ids=["T1", "T3", "one_step"])
@pytest.mark.parametrize("bias", [True, False])
def test_gradient_against_finite_differences(lbr, with_state, steps, bias):
    """Central differences in float64 on every entry of x, h0 and every parameter (steps 0: a single
    step [B, X] without a time axis)."""
    a = attrs(dim_hidden=3, linear_before_reset=lbr, bias=bias)
    x = rand(*((steps,) if steps else ()), 2, 2, seed=8)
    h0 = rand(2, 3, seed=9) if with_state else None
    p = params(2, 3, seed=11, scale=0.8, bias=bias)
    w = rand(*((steps,) if steps else ()), 2, 3, seed=12)      # loss = sum(w * y): dy = w
    got = _grads(a, x, h0, w, p)
    named = {"x": x, **({"h0": h0} if with_state else {}), **p}
    eps = 1e-6
    for k, v in named.items():
        fd = torch.zeros_like(v)
        for idx in np.ndindex(*v.shape):
            keep = float(v[idx])
            v[idx] = keep + eps
            up = float(_loss(a, x, h0, p, w))
            v[idx] = keep - eps
            down = float(_loss(a, x, h0, p, w))
            v[idx] = keep
            fd[idx] = (up - down) / (2 * eps)
        torch.testing.assert_close(got[k], fd, rtol=1e-6, atol=1e-8, msg=lambda m: f"{k}: {m}")
    if not with_state:   # dh0 is still the derivative at h0 = 0
        z = torch.zeros(2, 3, dtype=torch.float64)
        torch.testing.assert_close(got["h0"], _grads(a, x, z, w, p)["h0"])


@pytest.mark.parametrize("lbr", [True, False])
@pytest.mark.parametrize("with_state", [False, True])
def test_gradient_against_autograd(lbr, with_state):
    a = attrs(dim_hidden=4, linear_before_reset=lbr)
    x = rand(5, 3, 2, 2, seed=13).requires_grad_()
    h0 = rand(3, 4, seed=14).requires_grad_() if with_state else None
    p = {k: v.requires_grad_() for k, v in params(4, 4, seed=16).items()}
    dy = rand(5, 3, 4, seed=17)
    with torch.enable_grad():
        y = GRU.reference(a, [x] + ([h0] if with_state else []), p)
        leaves = [x] + ([h0] if with_state else []) + list(p.values())
        refs = torch.autograd.grad(y, leaves, dy)
    names = ["x"] + (["h0"] if with_state else []) + list(p)
    with torch.no_grad():
        got = _grads(a, x.detach(), h0.detach() if with_state else None, dy, {k: v.detach() for k, v in p.items()})
    for n, ref in zip(names, refs):
        torch.testing.assert_close(got[n], ref, rtol=1e-10, atol=1e-12, msg=lambda m: f"{n}: {m}")


def test_gates_blocks_hold_the_forward_states():
    a = attrs(dim_hidden=3)
    x, h0 = rand(2, 2, 3, seed=18), rand(2, 3, seed=19)
    p = params(3, 3, seed=21)
    gates = lookup("netc.gru_grad_gates").reference(a, [x, h0, rand(2, 2, 3, seed=22)], p)
    s = gru_states(x, h0, p)
    torch.testing.assert_close(gates[0, :, BLOCKS["h_prev"]], h0)
    torch.testing.assert_close(gates[1, :, BLOCKS["h_prev"]], s["y"][0])


def test_gradient_op_shape_errors():
    gates = (3, 2, len(BLOCKS), 4)
    with pytest.raises(ShapeError, match="not the GRU's output"):
        lookup("netc.gru_grad_gates").infer(attrs(dim_hidden=4), [(3, 2, 5), (3, 2, 5)])
    with pytest.raises(ShapeError, match="not the x of a GRU"):
        lookup("netc.gru_grad_data").infer({"wrt": "x", "input_shape": [3, 5, 6]}, [gates])
    with pytest.raises(ShapeError, match="reads x too"):
        lookup("netc.gru_grad_param").infer({"role": "z_hx"}, [gates])
    with pytest.raises(ShapeError, match="gates gradient"):
        lookup("netc.gru_grad_param").infer({"role": "z_b"}, [(3, 2, 5, 4)])
    assert lookup("netc.gru_grad_param").infer({"role": "c_hx"}, [gates, (3, 2, 7)]) == (4, 7)


# -- a network ---------------------------------------------------------------------------------------

NET = """network seq {
  input x: f32[4, 3, 2, 3]
  input h0: f32[3, 5]
  input label: f32[4, 3, 5]
  y = GRU(x, h0) { dim_hidden: 5 }
  loss = EuclideanLoss(y, label)
}
"""

NET_NO_STATE = """network seq {
  input x: f32[4, 3, 6]
  input label: f32[4, 3, 5]
  y = GRU(x) { dim_hidden: 5, linear_before_reset: false, bias: false }
  loss = EuclideanLoss(y, label)
}
"""


@pytest.mark.parametrize("src", [NET, NET_NO_STATE], ids=["state", "no_state"])
def test_network_runs_and_trains_on_the_reference(src, tmp_path, capsys):
    path = tmp_path / "seq.nd"
    path.write_text(src)
    assert main(["run", str(path), "--reference"]) == 0
    assert "loss" in capsys.readouterr().out
    assert main(["run", str(path), "--train", "--steps", "2", "--reference"]) == 0
    assert "trained 2 steps" in capsys.readouterr().out


def test_the_gradient_ops_in_a_training_program():
    m = load_text(NET, "seq.nd")
    pipelines.training(m, Options(training=Training()))
    ops = m.networks()[0].regions[0].ops
    names = {op.name for op in ops}
    assert {"netc.gru_grad_gates", "netc.gru_grad_param"} <= names   # x and h0 are inputs: no data gradient
    roles = {op.attrs["role"] for op in ops if op.name == "netc.gru_grad_param"}
    assert roles == set(ROLES)


_netc = netc_process   # (tests/cli_process.py)


def _netc_interp(*args, interp=True):
    """An interpreter-target command, in this process where it can run here (tests/cli_inprocess.py)."""
    return netc_interp(*args)


@pytest.mark.parametrize("src,first", [(NET, True), (NET_NO_STATE, False)], ids=["state", "no_state"])
def test_interpreter_target_runs_and_trains_against_the_reference(src, first, tmp_path):
    """netc's GRU kernels (kernels/gru.py) under Triton's interpreter: a forward and two training steps,
    each within f32 tolerance of the float64 reference (--compare); both conventions, with and without h0
    (fed whole: it has no batch axis) and biases."""
    pytest.importorskip("triton")
    path = tmp_path / "seq.nd"
    path.write_text(src)
    if first:   # the forward alone once (the training comparison runs the forward too)
        r = _netc_interp("run", path, "--target", "interp", "--compare")
        assert r.returncode == 0, r.stderr
        assert "loss: max relative error" in r.stderr
    r = _netc_interp("run", path, "--target", "interp", "--train", "--compare", "--steps", "2")
    assert r.returncode == 0, r.stderr + r.stdout
    assert "compared 2 training steps of network 'seq' (sgd) on the interpreter target: ok" in r.stdout + r.stderr


STEP = """network step {
  input x: f32[3, 4]
  input h0: f32[3, 5]
  input label: f32[3, 5]
  y = GRU(x, h0) { dim_hidden: 5, linear_before_reset: false }
  loss = EuclideanLoss(y, label)
}
"""


def test_a_single_step_runs_on_the_interpreter_and_its_gradient_is_refused(tmp_path):
    """One step x [B, X] (SINGA's unrolled form) runs on the interpreter target at the compiled batch and
    below it (the batch is B, h0 batch-sized); its gradient has no kernels: a located error."""
    pytest.importorskip("triton")
    path = tmp_path / "step.nd"
    path.write_text(STEP)
    for extra in ((), ("--batch", "2")):
        r = _netc_interp("run", path, "--target", "interp", "--compare", *extra)
        assert r.returncode == 0, r.stderr
        assert "loss: max relative error" in r.stderr
    r = _netc_interp("run", path, "--target", "interp", "--train", "--steps", "1")
    assert r.returncode == 1
    assert ("step.nd:5:3: error: layer 'y.grad_gates' (netc.gru_grad_gates, the gradient of layer 'y') has no CUDA "
            "kernel in netc yet: the gradient of a GRU's single step") in r.stderr


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_compile_with_a_training_step_without_a_gpu(tmp_path):
    """`netc compile --target cuda --train` builds the .so (cubins compiled on the CPU), h0 an input without
    a batch axis."""
    pytest.importorskip("triton.backends.nvidia.compiler")
    from netc.runtime import native as N
    path = tmp_path / "seq.nd"
    path.write_text(NET)
    r = _netc("compile", path, "-o", tmp_path / "seq.so", "--target", "cuda", "--train")
    assert r.returncode == 0, r.stderr
    m = N.read_manifest(tmp_path / "seq.so")
    assert [(i["name"], i["batched"]) for i in m["inputs"]] == [("x", True), ("h0", False), ("label", True)]
    assert [e["op"] for e in m["schedule"]][:2] == ["netc.gru", "netc.gru"]       # the input GEMM, the recurrence
    ops = [e["op"] for e in m["training"]["schedule"]]
    assert ops.count("netc.gru_grad_gates") == 3 and ops.count("netc.gru_grad_param") == 9


def test_bad_operands_are_located():
    src = NET.replace("input h0: f32[3, 5]", "input h0: f32[3, 6]")
    with pytest.raises(NetcError) as e:
        pipelines.inference(load_text(src, "bad.nd"), Options())
    d = e.value.diagnostics[0]
    assert "initial state h0 must be [B, dim_hidden] = [3, 5], got [3, 6]" in d.message and d.loc.line == 5


def test_a_split_along_axis_0_is_refused(tmp_path, capsys):
    """partition_dim 0 splits axis 0, which is a GRU's time: refused, located (its batch is axis 1)."""
    path = tmp_path / "seq.nd"
    path.write_text(NET_NO_STATE.replace("bias: false }", "bias: false, partition_dim: 0 }"))
    assert main(["run", str(path), "--reference", "--workers", "2"]) == 1
    assert "cannot be split along axis 0 (partition_dim 0): its batch is axis 1" in capsys.readouterr().err
