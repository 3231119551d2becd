"""Brainstorm's Highway and ClockworkLstm layers as netc ops (netc/ops/highway.py, netc/ops/clockwork_lstm.py), and
the Brainstorm architectures that use them, with Merge (issue 25).

* shapes, parameter shapes (Brainstorm's names and order) and located shape errors;
* the gradient ops against central finite differences in float64 and torch.autograd (ClockworkLstm: with and
  without the initial state h0, c0, periods that keep units at some steps, every activation);
* ClockworkLstm with every period 1 is the Lstm; a unit keeps c and y between its clock's ticks;
* tests/data/brainstorm_layouts.json's merge_highway and clockwork_lstm import, check, run and train on the
  reference executor, with Brainstorm's parameter shapes;
* their forward pass equals Brainstorm's own (tests/data/brainstorm_ops_runs.json: its NumpyHandler in float64
  at given parameters and inputs), parameters read from Brainstorm's flat vector through its layout; the
  ClockworkLstm's gradient equals Brainstorm's backward_pass (no context);
* a compiled target refuses the ops with a located error (they have no kernel);
* `netc explain --layout` on any Brainstorm architecture of tests/data/brainstorm_layouts.json writes the layout
  Brainstorm's create_layout wrote for it; `--layout-kind plan` writes netc's memory plan as before.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from netc.cli import main
from netc.frontend import load_text
from netc.ops import ShapeError, lookup
from netc.ops.clockwork_lstm import CLOCK_ROLES, clockwork_lstm_states
from netc.ops.lstm import ROLES

DATA = Path(__file__).parent / "data"
NETS = json.loads((DATA / "brainstorm_layouts.json").read_text())["nets"]
FORWARD = json.loads((DATA / "brainstorm_ops_runs.json").read_text())
HW, CWL, LSTM = lookup("netc.highway"), lookup("netc.clockwork_lstm"), lookup("netc.lstm")
ACTS = ("tanh", "sigmoid", "relu", "none")


def rand(*shape, seed=1):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def fd_check(f, named, got, eps=1e-6, rtol=1e-6, atol=1e-8):
    """Central differences in float64 of the scalar f() on every entry of each tensor in `named`."""
    for k, v in named.items():
        fd = torch.zeros_like(v)
        for idx in np.ndindex(*v.shape):
            keep = float(v[idx])
            v[idx] = keep + eps
            up = float(f())
            v[idx] = keep - eps
            down = float(f())
            v[idx] = keep
            fd[idx] = (up - down) / (2 * eps)
        torch.testing.assert_close(got[k], fd, rtol=rtol, atol=atol, msg=lambda m: f"{k}: {m}")


# -- Highway -----------------------------------------------------------------------------------------

def test_highway_shapes_and_errors():
    assert HW.infer({}, [(3, 2, 4)] * 3) == (3, 2, 4)
    assert HW.param_shapes({}, [(3, 2, 4)] * 3, (3, 2, 4)) == {}
    with pytest.raises(ShapeError) as e:
        HW.infer({}, [(3, 2, 4), (3, 2, 4), (3, 2, 5)])
    assert e.value.operand == 2 and "H, T and x must have one shape" in str(e.value)
    with pytest.raises(ShapeError) as e:
        lookup("netc.highway_grad").infer({"wrt": "x"}, [(2, 3)] * 3 + [(3, 2)])
    assert e.value.operand == 3


def test_highway_reference_is_brainstorms_formula():
    h, t, x = rand(2, 3, 4, seed=1), torch.sigmoid(rand(2, 3, 4, seed=2)), rand(2, 3, 4, seed=3)
    y = HW.reference({}, [h, t, x], {})
    torch.testing.assert_close(y, t * h + (1 - t) * x, rtol=1e-14, atol=1e-14)


def test_highway_gradient_against_finite_differences():
    h, t, x, w = (rand(3, 2, 2, seed=s) for s in (4, 5, 6, 7))
    g = lookup("netc.highway_grad")
    got = {k: g.reference({"wrt": k}, [h, t, x, w], {}) for k in ("H", "T", "x")}
    fd_check(lambda: (HW.reference({}, [h, t, x], {}) * w).sum(), {"H": h, "T": t, "x": x}, got)


# -- ClockworkLstm -----------------------------------------------------------------------------------

def cw_params(x_dim, h, seed=0, scale=0.5, timing=None):
    g = torch.Generator().manual_seed(seed)
    shapes = CWL.param_shapes({"size": h, "activation": "tanh"}, [(1, 1, x_dim)], None)
    p = {r: scale * torch.randn(s, generator=g, dtype=torch.float64) for r, s in shapes.items()}
    p["timing"] = torch.tensor(timing if timing is not None else [float(k + 1) for k in range(h)], dtype=torch.float64)
    return p


def test_clockwork_lstm_shapes_and_parameters():
    a = {"size": 5, "activation": "tanh"}
    assert CWL.infer(a, [(7, 3, 2, 4)]) == (7, 3, 5)
    assert CWL.infer(a, [(7, 3, 8), (3, 5), (3, 5)]) == (7, 3, 5)
    ps = CWL.param_shapes(a, [(7, 3, 8)], None)
    assert list(ps) == list(CLOCK_ROLES) and ps["timing"] == (5,)      # Brainstorm's order: timing last
    want = {k: tuple(v["@shape"]) for k, v in NETS["clockwork_lstm"]["layout"]["CL"]["parameters"].items()
            if isinstance(v, dict) and "@shape" in v}
    assert dict(CWL.param_shapes({"size": 4, "activation": "tanh"}, [(2, 2, 3)], None)) == want
    for ins, op, words in (([(7, 8)], 0, "rank >= 3"), ([(7, 3, 8), (3, 5)], 1, "give c0 too"),
                           ([(7, 3, 8), (3, 5), (2, 5)], 2, "the initial c must be [B, size]")):
        with pytest.raises(ShapeError) as e:
            CWL.infer(a, ins)
        assert e.value.operand == op and words in str(e.value)
    c = CWL.cost(a, [(7, 3, 8)], (7, 3, 5))
    lc = LSTM.cost(a, [(7, 3, 8)], (7, 3, 5))
    assert c.flops_fwd == lc.flops_fwd + 2 * 7 * 3 * 5 and c.flops_bwd_filter == lc.flops_bwd_filter


@pytest.mark.parametrize("act", ACTS)
def test_periods_of_one_are_the_lstm(act):
    a = {"size": 3, "activation": act}
    x, h0, c0 = rand(4, 2, 3, seed=1), rand(2, 3, seed=2), rand(2, 3, seed=3)
    p = cw_params(3, 3, seed=4, timing=[1.0, 1.0, 1.0])
    lstm_p = {r: p[r] for r in ROLES}
    torch.testing.assert_close(CWL.reference(a, [x, h0, c0], p), LSTM.reference(a, [x, h0, c0], lstm_p),
                               rtol=1e-14, atol=1e-14)


def test_units_keep_their_state_between_ticks():
    """Periods 1, 2, 3, 0.5: unit 1 updates at t = 0, 2, 4; unit 2 at 0, 3; unit 3 (fmod(t, 0.5) = 0) always."""
    a = {"size": 4, "activation": "tanh"}
    x = rand(5, 2, 3, seed=5)
    p = cw_params(3, 4, seed=6, timing=[1.0, 2.0, 3.0, 0.5])
    s = clockwork_lstm_states(x, None, None, p)
    y, c = s["y"], s["c"]
    for t in range(1, 5):
        for unit, period in ((0, 1.0), (1, 2.0), (2, 3.0), (3, 0.5)):
            ticks = (t % period) == 0
            same_y = torch.equal(y[t, :, unit], y[t - 1, :, unit])
            same_c = torch.equal(c[t, :, unit], c[t - 1, :, unit])
            assert same_y == same_c == (not ticks), (t, unit)


def _cw_grads(a, x, state, dy, p):
    gates = lookup("netc.clockwork_lstm_grad_gates").reference(a, [x, *state, dy], p)
    assert tuple(gates.shape) == lookup("netc.clockwork_lstm_grad_gates").infer(
        a, [tuple(v.shape) for v in (x, *state, dy)])
    data, par = lookup("netc.lstm_grad_data"), lookup("netc.lstm_grad_param")
    out = {wrt: data.reference({"wrt": wrt, "input_shape": list(s)}, [gates], p)
           for wrt, s in (("x", x.shape), ("h0", (x.shape[1], a["size"])), ("c0", (x.shape[1], a["size"])))}
    for r in ROLES:
        out[r] = par.reference({"role": r}, [gates] + ([x] if r[0] == "W" else []), {})
        assert tuple(out[r].shape) == tuple(p[r].shape)
    return out


@pytest.mark.parametrize("act", ["tanh", "sigmoid", "relu", "none"])
@pytest.mark.parametrize("with_state", [False, True])
def test_clockwork_lstm_gradient_against_finite_differences(act, with_state):
    """Every entry of x, h0, c0 and every parameter but timing (piecewise constant: no gradient), periods 1, 2, 3
    over 4 steps (units kept at t = 1, 2, 3)."""
    a = {"size": 3, "activation": act}
    x = rand(4, 2, 2, seed=8)
    state = [rand(2, 3, seed=9), rand(2, 3, seed=10)] if with_state else []
    p = cw_params(2, 3, seed=11)
    w = rand(4, 2, 3, seed=12)
    got = _cw_grads(a, x, state, w, p)
    named = {"x": x, **({"h0": state[0], "c0": state[1]} if with_state else {}), **{r: p[r] for r in ROLES}}
    fd_check(lambda: (CWL.reference(a, [x, *state], p) * w).sum(), named, got)


@pytest.mark.parametrize("act", ACTS)
def test_clockwork_lstm_gradient_against_autograd(act):
    a = {"size": 4, "activation": act}
    x = rand(6, 3, 2, 2, seed=13).requires_grad_()
    state = [rand(3, 4, seed=14).requires_grad_(), rand(3, 4, seed=15).requires_grad_()]
    p = cw_params(4, 4, seed=16, timing=[1.0, 2.0, 4.0, 3.0])
    leaves = {"x": x, "h0": state[0], "c0": state[1], **{r: p[r].requires_grad_() for r in ROLES}}
    dy = rand(6, 3, 4, seed=17)
    with torch.enable_grad():
        refs = torch.autograd.grad(CWL.reference(a, [x, *state], p), list(leaves.values()), dy)
    with torch.no_grad():
        got = _cw_grads(a, x.detach(), [s.detach() for s in state], dy, {k: v.detach() for k, v in p.items()})
    for n, ref in zip(leaves, refs):
        torch.testing.assert_close(got[n], ref, rtol=1e-10, atol=1e-12, msg=lambda m: f"{n}: {m}")


def test_clockwork_lstm_gradient_equals_brainstorms_backward_pass():
    """Brainstorm's own backward_pass of a ClockworkLstm (NumpyHandler, float64, periods 1, 2, 3, 4 over 6 steps, no
    context; tests/data/brainstorm_ops_runs.json): at the deltas that reached its output, netc's gradient ops give
    its input deltas and every parameter's gradient (timing: none, as Brainstorm's computes_no_gradients_for)."""
    d = FORWARD["backward"]["clockwork_lstm_alone"]
    t = d["T"]

    def f64(v):
        return torch.tensor(v, dtype=torch.float64)
    p = {k: f64(v) for k, v in d["parameters"].items()}
    x, dy = f64(d["x"]), f64(d["output_deltas"])
    assert float(dy[t].abs().max()) == 0         # the context row gets no delta: dy is its first T rows
    a = {"size": d["architecture"]["CL"]["size"], "activation": d["architecture"]["CL"]["activation"]}
    torch.testing.assert_close(CWL.reference(a, [x], p), f64(d["output"])[:t], rtol=1e-12, atol=1e-14)
    got = _cw_grads(a, x, [], dy[:t], p)
    torch.testing.assert_close(got["x"], f64(d["input_deltas"]), rtol=1e-10, atol=1e-14)
    for r in ROLES:
        torch.testing.assert_close(got[r], f64(d["gradients"][r]), rtol=1e-10, atol=1e-14, msg=lambda m, r=r: f"{r}: {m}")
    assert float(f64(d["gradients"]["timing"]).abs().max()) == 0


def test_final_state_carries_h_and_c():
    a = {"size": 3, "activation": "tanh"}
    x = rand(3, 2, 2, seed=18)
    p = cw_params(2, 3, seed=19, timing=[1.0, 1.0, 1.0])
    y = CWL.reference(a, [x], p)
    h, c = CWL.final_state(a, [x], p, y)
    first = CWL.reference(a, [x[:2]], p)
    h1, c1 = CWL.final_state(a, [x[:2]], p, first)
    torch.testing.assert_close(CWL.reference(a, [x[2:], h1, c1], p)[-1], h, rtol=1e-13, atol=1e-13)


# -- Brainstorm's architectures ----------------------------------------------------------------------

def _write(tmp_path, net):
    src = tmp_path / f"{net}.json"
    src.write_text(json.dumps(NETS[net]["architecture"], indent=1))
    return src


@pytest.mark.parametrize("net", ["merge_highway", "clockwork_lstm"])
def test_brainstorm_nets_check_run_and_train(net, tmp_path, capsys):
    src = str(_write(tmp_path, net))
    size = ["--size", "T=4", "--batch", "2"]
    assert main(["check", src, *size]) == 0
    assert main(["run", src, "--reference", *size]) == 0
    out = capsys.readouterr().out
    assert "L2.loss" in out
    assert main(["run", src, "--reference", "--train", "--steps", "2", *size]) == 0
    assert "trained 2 steps" in capsys.readouterr().out


def test_imported_ops_and_parameter_shapes_are_brainstorms():
    """Highway reads H, T, x in Brainstorm's order; the ClockworkLstm's parameters have Brainstorm's shapes."""
    m = load_text(json.dumps(NETS["merge_highway"]["architecture"]), "mh.json", batch=2)
    hw = next(op for op in m.walk() if op.name == "netc.highway")
    assert hw.attrs["parents"] == ["H", "G", "Input.default"]
    from netc.pipelines import inference
    from netc.runtime import module_params
    m = load_text(json.dumps(NETS["clockwork_lstm"]["architecture"]), "cl.json", batch=2, options={"time": 3})
    inference(m)
    got = {k[3:]: tuple(v.shape) for k, v in module_params(m).items() if k.startswith("CL.")}
    want = {k: tuple(v["@shape"]) for k, v in NETS["clockwork_lstm"]["layout"]["CL"]["parameters"].items()
            if isinstance(v, dict) and "@shape" in v}
    assert got == want


def _params_from_flat(net, fw, names):
    """netc's parameters (of `names`) from Brainstorm's flat vector, through Brainstorm's layout (@slice, @shape)."""
    arch, lay = NETS[net]["architecture"], NETS[net]["layout"]
    flat = torch.tensor(fw["parameters"], dtype=torch.float64)
    params = {}
    for lname, spec in arch.items():
        for role, node in lay[lname]["parameters"].items():
            if not isinstance(node, dict) or "@slice" not in node:
                continue
            v = flat[node["@slice"][0]:node["@slice"][1]].reshape(node["@shape"])
            if spec["@type"] == "FullyConnected":     # W (out, in) is netc's [in, out]
                name = f"{lname}.flat." if f"{lname}.flat.weight" in names else f"{lname}."   # time-major: per step
                params[name + {"W": "weight", "bias": "bias"}[role]] = v.T.contiguous() if role == "W" else v
            elif spec["@type"] in ("ClockworkLstm", "Recurrent"):
                params[f"{lname}.{role}"] = v
    return params


@pytest.mark.parametrize("net", sorted(FORWARD["forward"]))
def test_forward_pass_equals_brainstorms(net):
    """Brainstorm's own forward pass (NumpyHandler, float64; the recurrent outputs without their context row)
    equals netc's reference run of the imported net at Brainstorm's parameters and inputs: Highway, Merge, the
    ClockworkLstm (periods 1, 2, 3, 4 over 5 steps) and what reads them."""
    from netc.pipelines import inference
    from netc.runtime import module_params
    from netc.runtime.reference import run_reference
    fw = FORWARD["forward"][net]
    arch = NETS[net]["architecture"]
    # a net without a recurrent layer is imported with T = 1 and T * B samples (netc/frontend/brainstorm.py)
    time_major = any(s["@type"] in ("ClockworkLstm", "Recurrent", "Lstm", "Clockwork") for s in arch.values())
    t, b = fw["T"], fw["B"]
    m = load_text(json.dumps(arch), f"{net}.json", batch=b if time_major else t * b, options={"time": t if time_major else 1})
    inference(m)
    names = set(module_params(m))
    params = {k: v for k, v in _params_from_flat(net, fw, names).items() if k in names}
    assert {n for n in names if not n.startswith("BN.")} <= set(params), sorted(names - set(params))
    feed = {f"Input.{k}": torch.tensor(v, dtype=torch.float64) for k, v in fw["inputs"].items()}
    if not time_major:
        feed = {k: v.reshape((t * b,) + tuple(v.shape[2:])) for k, v in feed.items()}
    got = run_reference(m, feed, {**module_params(m), **params}, intermediates=True)
    checked = []
    for path, want in fw["outputs"].items():
        lname, out = path.split(".")
        if arch[lname]["@type"] in ("Input", "Loss", "BatchNorm", "L1Decay", "L2Decay") or out == "loss":
            continue
        want = torch.tensor(want, dtype=torch.float64)[:fw["T"]]        # without the context row
        name = lname if out == "default" else path
        g = got[name].reshape(want.shape)
        torch.testing.assert_close(g, want, rtol=1e-9, atol=1e-12, msg=lambda m, p=path: f"{net} {p}: {m}")
        checked.append(arch[lname]["@type"])
    want_types = {"merge_highway": {"Highway", "Merge", "Dropout"}, "clockwork_lstm": {"ClockworkLstm", "Recurrent",
                                                                                      "FullyConnected", "SigmoidCE"}}
    assert want_types[net] <= set(checked)


def test_a_loss_of_several_values_is_their_sum(tmp_path):
    """Brainstorm's Loss concatenates its inputs and sums: netc makes each a loss of the network (the training
    objective is their sum)."""
    m = load_text(json.dumps(NETS["merge_highway"]["architecture"]), "mh.json", batch=2)
    out = next(op for op in m.walk() if op.name == "netc.output")
    assert {"L1.loss", "L2.loss"} <= set(out.attrs["parents"])


ND = """network cw {
  input x: f32[4, 2, 3]
  input label: f32[4, 2, 5]
  y = ClockworkLstm(x) { size: 5 }
  loss = EuclideanLoss(y, label)
}
"""


@pytest.mark.parametrize("layer", ["ClockworkLstm(x) { size: 3 }", "Highway(x, x, x)"])
def test_a_compiled_target_refuses_them_located(layer, tmp_path, capsys):
    path = tmp_path / "cw.nd"
    path.write_text(ND.replace("ClockworkLstm(x) { size: 5 }", layer).replace("f32[4, 2, 5]", "f32[4, 2, 3]"))
    assert main(["run", str(path), "--reference"]) == 0
    capsys.readouterr()
    assert main(["run", str(path), "--target", "interp"]) == 1
    err = capsys.readouterr().err
    assert "cw.nd:4:" in err and "error:" in err and "Traceback" not in err


def test_bad_highway_in_an_architecture_is_located(tmp_path, capsys):
    arch = json.loads(json.dumps(NETS["merge_highway"]["architecture"]))
    arch["H"]["size"] = 4
    src = tmp_path / "bad.json"
    src.write_text(json.dumps(arch, indent=1))
    assert main(["check", str(src)]) == 1
    err = capsys.readouterr().err
    assert "bad.json:" in err and "($.Hw)" in err and "H, T and x" in err and "Traceback" not in err


# -- netc explain --layout on a Brainstorm architecture ------------------------------------------------

@pytest.mark.parametrize("net", sorted(NETS))
def test_explain_layout_writes_brainstorms_layout(net, tmp_path, capsys):
    """`netc explain --layout` on a Brainstorm architecture writes what Brainstorm's create_layout wrote for it
    (tests/data/brainstorm_layouts.json: layer order, hubs, the @-key tree), which `netc check` accepts."""
    src, out = _write(tmp_path, net), tmp_path / "out.json"
    assert main(["explain", str(src), "--brief", "--layout", str(out)]) == 0
    assert f"wrote {out} (Brainstorm's layout" in capsys.readouterr().err
    got, want = json.loads(out.read_text()), NETS[net]
    for key in ("architecture", "layer_order", "hubs", "layout"):
        assert got[key] == want[key], (net, key)
    assert "explain --layout" in got["generated_by"]
    assert main(["check", str(out)]) == 0
    assert "a valid Brainstorm hub layout" in capsys.readouterr().out


def test_explain_layout_of_a_corpus_file_is_its_own(tmp_path, capsys):
    """A corpus file (architecture and the layout Brainstorm wrote beside it): explain --layout gives that layout."""
    corpus = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "brainstorm" / "mnist_pi.layout.json"
    out = tmp_path / "bs.json"
    assert main(["explain", str(corpus), "--brief", "--layout", str(out)]) == 0
    got, want = json.loads(out.read_text()), json.loads(corpus.read_text())
    assert got["layout"] == want["layout"] and got["architecture"] == want["architecture"]


def test_layout_kind_plan_keeps_netcs_plan(tmp_path, capsys):
    """--layout-kind plan: netc's memory plan of the imported net (March-2015 format, time-sized at T), as before."""
    src, out = _write(tmp_path, "clockwork_lstm"), tmp_path / "plan.json"
    assert main(["explain", str(src), "--brief", "--layout", str(out), "--layout-kind", "plan", "--size", "T=3"]) == 0
    doc = json.loads(out.read_text())
    assert "netc" in doc and "hubs" not in doc and doc["sizes"][2] > 0      # the time-sized class
    capsys.readouterr()
    assert main(["check", str(out)]) == 0
    assert "a valid layout" in capsys.readouterr().out


def test_layout_kind_errors(tmp_path, capsys):
    nd = tmp_path / "cw.nd"
    nd.write_text(ND)
    out = tmp_path / "x.json"
    assert main(["explain", str(nd), "--brief", "--layout", str(out), "--layout-kind", "hub"]) == 1
    err = capsys.readouterr().err
    assert "cw.nd:1:1: error: --layout-kind hub writes Brainstorm's layout of a Brainstorm architecture" in err
    assert not out.exists()
    assert main(["explain", str(nd), "--brief", "--layout-kind", "plan"]) == 1
    assert "give --layout OUT.json too" in capsys.readouterr().err
    assert main(["explain", str(nd), "--brief", "--layout", str(out)]) == 0     # a .nd: netc's plan
    assert "netc" in json.loads(out.read_text())
