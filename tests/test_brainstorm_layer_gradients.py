"""Brainstorm's finite-difference layer tests (brainstorm/tests/test_layers.py at 8f1fc88) as netc tests (issue 25).

Brainstorm checks every layer type alone, at four specs (T, B, activation) = (1, 1, tanh), (4, 1, sigmoid),
(2, 3, rel), (1, 3, linear), with the sizes of its test_layers.py (a FullyConnected of 4 over 5 features, an Lstm
of 4 over 3, a Convolution2D over (3, 4, 2), ...), inputs and parameters drawn from N(0, 1) (BinomialCrossEntropy's
input from U(0, 1), binary or class targets, the clockwork timings it sets), the objective the sum of one output
(its output deltas filled with 1), central differences with eps 1e-5, and np.allclose(rtol=1e-3, atol=1e-4) for
the deltas of every input (test_deltas_calculation_of_layer) and the gradient of every parameter
(test_gradients_for_layer), skipping what the layer declares it takes no deltas from or computes none for
(the predictions of SoftmaxCE, SigmoidCE and SquaredError, targets, masks, clockwork timings). Every other
input, the mask too, is N(0, 1) as Brainstorm's set_up_layer draws it.

Here each layer is imported from a Brainstorm architecture (its Input with the test's shapes, the layer, nothing
after it; a feed-forward net folds T into the batch as netc's importer does, a recurrent one runs T steps of B).
netc's gradients come from its backward pass (the output differentiated with a seed of ones, Training(outputs=))
run by the reference executor in float64; the finite differences are of netc's forward (test_gradients'
_forward_loss). A layer input's deltas are read where netc computes them: each differentiable input is fed
through a linear FullyConnected `d_<input>` whose weight is the identity and bias zero (so the layer sees the
input itself), and the gradient netc computes for `d_<input>`'s output is compared with differences of the
network input. Every entry of every array is perturbed, as Brainstorm does (124 cases, about 7 s on one core).
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from netc.frontend import load_text
from netc import pipelines
from netc.pipelines import Options, Training
from netc.runtime.reference import execute
from netc.runtime.train import ReferenceTrainer
from test_gradients import _forward_loss, _no_updates, _value_name

EPS, RTOL, ATOL = 1e-5, 1e-3, 1e-4      # Brainstorm's helpers.py: eps, np.allclose(rtol=1e-3, atol=1e-4)
SPECS = [(1, 1, "tanh"), (4, 1, "sigmoid"), (2, 3, "rel"), (1, 3, "linear")]
RECURRENT = {"Recurrent", "Lstm", "Clockwork", "ClockworkLstm"}


def case(type_, inputs, outputs=("default",), no_deltas=(), special=None, **kwargs):
    """A layer of test_layers.py: its type, input feature shapes, the outputs whose deltas it takes, the inputs
    it computes no deltas for, special inputs (a function of (T, B, rng) -> {input: array}) and its kwargs (a
    callable value takes the activation)."""
    return {"type": type_, "inputs": inputs, "outputs": outputs, "no_deltas": set(no_deltas),
            "special": special, "kwargs": kwargs}


def _binomial_inputs(t, b, rng):
    return {"default": rng.random((t, b, 5)), "targets": rng.integers(0, 2, (t, b, 5)).astype(float)}


def _class_targets(t, b, rng):
    return {"targets": rng.integers(0, 5, (t, b, 2, 3, 1)).astype(float)}


def _binary_targets(t, b, rng):
    return {"targets": rng.integers(0, 2, (t, b, 2, 3, 5)).astype(float)}


ACT = "activation"
CASES = {
    "noop_layer": case("NoOp", {"default": (5,)}),
    "loss_layer": case("Loss", {"default": (5,)}, outputs=("loss",)),
    "fully_connected_layer": case("FullyConnected", {"default": (5,)}, size=4, activation=ACT),
    "fully_connected_layer_2d": case("FullyConnected", {"default": (2, 3)}, size=[3, 3, 1], activation=ACT),
    "highway_layer": case("Highway", {"H": (2, 3), "T": (2, 3), "x": (2, 3)}),
    "binomial_crossentropy_layer": case("BinomialCrossEntropy", {"default": (5,), "targets": (5,)},
                                        no_deltas=("targets",), special=_binomial_inputs),
    "softmax_ce_layer": case("SoftmaxCE", {"default": (2, 3, 5), "targets": (2, 3, 1)}, outputs=("loss",),
                             no_deltas=("targets",), special=_class_targets),
    "sigmoid_ce_layer": case("SigmoidCE", {"default": (2, 3, 5), "targets": (2, 3, 5)}, outputs=("loss",),
                             no_deltas=("targets",), special=_binary_targets),
    "rnn_layer": case("Recurrent", {"default": (3,)}, size=4, activation=ACT),
    "rnn_layer_2d": case("Recurrent", {"default": (2, 1, 2)}, size=3, activation=ACT),
    "squared_difference_layer": case("SquaredDifference", {"inputs_1": (3, 2), "inputs_2": (3, 2)}),
    "squared_error_layer": case("SquaredError", {"default": (3, 2), "targets": (3, 2)},
                                outputs=("loss",), no_deltas=("targets",)),
    "lstm_layer": case("Lstm", {"default": (3,)}, size=4, activation=ACT),
    "lstm_layer_2d": case("Lstm", {"default": (2, 2, 1)}, size=3, activation=ACT),
    "mask_layer": case("Mask", {"default": (3, 2), "mask": (1,)}, no_deltas=("mask",)),
    "convolution_layer_2d_a": case("Convolution2D", {"default": (3, 4, 2)}, num_filters=1, kernel_size=[2, 2],
                                   stride=[1, 1], activation=ACT),
    "convolution_layer_2d_b": case("Convolution2D", {"default": (3, 4, 2)}, num_filters=2, kernel_size=[2, 2],
                                   stride=[1, 1], activation=ACT),
    "convolution_layer_2d_c": case("Convolution2D", {"default": (3, 4, 2)}, num_filters=2, kernel_size=[2, 3],
                                   stride=[1, 1], activation=ACT),
    "convolution_layer_2d": case("Convolution2D", {"default": (4, 4, 1)}, num_filters=1, kernel_size=[2, 2],
                                 stride=[1, 1], activation=ACT),
    "maxpooling_layer_2d": case("Pooling2D", {"default": (4, 4, 1)}, kernel_size=[2, 2], stride=[1, 1], type="max"),
    "avgpooling_layer_2d": case("Pooling2D", {"default": (4, 4, 1)}, kernel_size=[2, 2], stride=[1, 1], type="avg"),
    "batch_norm_layer_fc": case("BatchNorm", {"default": (3,)}),
    "batch_norm_layer_nhwc": case("BatchNorm", {"default": (3, 2, 4)}),
    "elementwise_layer": case("Elementwise", {"default": (3, 2)}, activation=ACT),
    "l1_decay_layer": case("L1Decay", {"default": (3, 2)}, outputs=("loss",)),
    "l2_decay_layer": case("L2Decay", {"default": (3, 2)}, outputs=("loss",)),
    "clockwork_layer": case("Clockwork", {"default": (3,)}, size=7, activation=ACT),
    "clockwork_layer_2d": case("Clockwork", {"default": (2, 1, 2)}, size=7, activation=ACT),
    "clockwork_lstm_layer": case("ClockworkLstm", {"default": (3,)}, size=4, activation=ACT),
    "clockwork_lstm_layer_2d": case("ClockworkLstm", {"default": (1, 2, 2)}, size=3, activation=ACT),
    "merge": case("Merge", {"inputs_1": (3, 2), "inputs_2": (3, 4)}),
}
TIMINGS = {"clockwork_layer": [1, 1, 2, 2, 3, 3, 5], "clockwork_layer_2d": [1, 1, 2, 2, 3, 3, 5],
           "clockwork_lstm_layer": [1, 2, 2, 3], "clockwork_lstm_layer_2d": [1, 2, 3]}


def architecture(c: dict, activation: str) -> dict:
    """Input (every input of the layer, 'T', 'B' + its features) -> [d_<input>: an identity FullyConnected for each
    input that gets deltas] -> L (the layer) with no outgoing connections."""
    out_shapes, conns, arch = {}, {}, {}
    for name, feat in c["inputs"].items():
        out_shapes[name] = ["T", "B", *feat]
        if name in c["no_deltas"]:
            conns[name] = [f"L.{name}"]
        else:
            conns[name] = [f"d_{name}.default"]
            arch[f"d_{name}"] = {"@type": "FullyConnected", "@outgoing_connections": {"default": [f"L.{name}"]},
                                 "size": list(feat), "activation": "linear"}
    arch["Input"] = {"@type": "Input", "@outgoing_connections": conns, "out_shapes": out_shapes}
    kw = {k: (activation if v is ACT else v) for k, v in c["kwargs"].items()}
    arch["L"] = {"@type": c["type"], "@outgoing_connections": {}, **kw}
    return arch


def _output_names(m, c) -> list:
    """netc's names of the layer's checked outputs: `L` for a sole default output, else `L.<output>`."""
    names = [op.attrs.get("name") for op in m.networks()[0].regions[0].ops]
    got = []
    for out in c["outputs"]:
        for n in (f"L.{out}", "L"):
            if n in names:
                got.append(n)
                break
    assert got, (c["outputs"], names)
    return list(dict.fromkeys(got))


def _load(c, t, b, activation):
    """The layer's network: a recurrent layer over T steps of B, any other with T folded into the batch."""
    time_major = c["type"] in RECURRENT
    return load_text(json.dumps(architecture(c, activation), indent=1), "layer.json",
                     batch=b if time_major else t * b, options={"time": t if time_major else 1})


def _program(c, t, b, activation, output: str):
    """The gradients-only training program that differentiates `output` (a seed input of ones, or a loss)."""
    m = _load(c, t, b, activation)
    pipelines.training(m, Options(training=Training(gradients_only=True, outputs=(output,))))
    return m


def _entries(shape) -> list:
    """Every entry, as Brainstorm's approx_fprime perturbs them."""
    return [np.unravel_index(i, shape) for i in range(int(np.prod(shape)))] if shape else [()]


def _central(f, tensor, idx) -> float:
    keep = float(tensor[idx])
    tensor[idx] = keep + EPS
    right = f()
    tensor[idx] = keep - EPS
    left = f()
    tensor[idx] = keep
    return (right - left) / (2 * EPS)


def _feed_from_input(name: str, value: np.ndarray, t: int, b: int, time_major: bool) -> torch.Tensor:
    arr = value if time_major else value.reshape((t * b,) + value.shape[2:])
    return torch.tensor(arr, dtype=torch.float64)


def _delta(net, k: str, named: dict, feed: dict) -> torch.Tensor:
    """The gradient netc computes for the output of `d_<k>` (the layer's input k): what d_<k>'s gradient ops read
    (its bias gradient's operand; a multi-dimensional FullyConnected's reshape gradient's operand). Where the
    layer passes the seed on unchanged (NoOp, a linear Elementwise) that is the seed input itself."""
    ops = [op for op in net.regions[0].ops if op.attrs.get("grad_of") == f"d_{k}"]
    (op,) = [o for o in ops if o.name == "netc.reshape"] or [o for o in ops if o.name == "netc.bias_grad"]
    v = op.operands[0]
    if v.owner.name == "netc.input":
        return feed[v.owner.attrs["name"]]
    return named[_value_name(v)]


def run_case(name: str, spec) -> list:
    """Every (array, entry, netc's gradient, the central difference) that fails Brainstorm's tolerance."""
    t, b, activation = spec
    c = CASES[name]
    time_major = c["type"] in RECURRENT
    probe = _load(c, t, b, activation)
    pipelines.inference(probe)
    outputs = _output_names(probe, c)
    rng = np.random.default_rng(1234)
    values = {k: rng.standard_normal((t, b, *feat)) for k, feat in c["inputs"].items()}
    if c["special"]:
        values.update(c["special"](t, b, rng))
    failures = []
    for out in outputs:
        m = _program(c, t, b, activation, out)
        net = m.networks()[0]
        tr = ReferenceTrainer(m, seed=1)
        feed = tr.feed(None)
        params = {}
        for p, v in tr.params.items():
            if p.startswith("d_"):       # the identity in front of an input
                n = v.shape[0]
                params[p] = (torch.eye(n, dtype=torch.float64).reshape(v.shape) if p.endswith(".weight")
                             else torch.zeros_like(v, dtype=torch.float64))
            else:
                params[p] = torch.tensor(rng.standard_normal(tuple(v.shape)), dtype=torch.float64)
        if name in TIMINGS:
            (tp,) = [p for p in params if p.endswith("timing")]
            params[tp] = torch.tensor(TIMINGS[name], dtype=params[tp].dtype)
        for k, v in values.items():
            feed[f"Input.{k}"] = _feed_from_input(k, v, t, b, time_major).to(feed[f"Input.{k}"].dtype)
        seed_name = f"{out}.grad_seed"
        if seed_name in feed:      # a scalar (a loss) is differentiated as it is
            feed[seed_name] = torch.ones_like(feed[seed_name], dtype=torch.float64)
        named = execute(net, feed, {k: v.clone() for k, v in params.items()}, torch.float64, only=_no_updates)

        def objective():
            return float(_forward_loss(net, feed, params)[1])

        checks = [(p, named[g], params[p]) for p, g in net.attrs["gradients"].items()
                  if not p.startswith("d_") and params[p].is_floating_point() and not p.endswith("timing")]
        checks += [(f"deltas {k}", _delta(net, k, named, feed), feed[f"Input.{k}"]) for k in c["inputs"]
                   if k not in c["no_deltas"]]
        for what, grad, tensor in checks:
            grad = grad.reshape(tensor.shape)
            for idx in _entries(tuple(tensor.shape)):
                fd = _central(objective, tensor, idx)
                got = float(grad[idx])
                if not abs(got - fd) <= ATOL + RTOL * abs(fd):      # np.allclose(got, fd), as Brainstorm asks
                    failures.append((out, what, tuple(int(i) for i in idx), got, fd))
    return failures


IDS = [f"{t}{b}{a}" for t, b, a in SPECS]


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients_of_layer_against_finite_differences(name, spec):
    """Every layer of Brainstorm's test_layers.py imports (a NetcError fails the test) and its gradients and
    deltas pass Brainstorm's check: (output, array, entry, netc's value, the central difference) of each miss."""
    failures = run_case(name, spec)
    assert not failures, failures[:8]


@pytest.mark.parametrize("name, has_params", [("lstm_layer", True), ("convolution_layer_2d_c", True),
                                              ("highway_layer", False)])
def test_the_check_finds_a_gradient_one_percent_off(name, has_params, monkeypatch):
    """The comparison can fail: every gradient value the backward pass computes, made 1% larger, misses."""
    import sys
    this = sys.modules[__name__]
    real = this.execute

    def off(*args, **kwargs):
        named = real(*args, **kwargs)
        if kwargs.get("only") is _no_updates:
            return {n: v * 1.01 if n.endswith(".grad") else v for n, v in named.items()}
        return named

    monkeypatch.setattr(this, "execute", off)
    failures = run_case(name, (2, 3, "rel"))
    assert any(f[1].startswith("deltas") for f in failures), failures[:4]
    assert any(not f[1].startswith("deltas") for f in failures) == has_params, failures[:4]
