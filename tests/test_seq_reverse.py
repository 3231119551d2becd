"""SequenceReverse (netc/ops/seq_reverse.py) and the reverse recurrences built from it: the op by hand
(lengths, padding, no lengths), its own inverse and gradient, bad operands located; the interpreter
target against the reference; the Python API's lstm / gru / recurrent(reverse=True) equal to the forward
layer run on each sequence reversed by hand, and padding changing no output and no gradient."""
from __future__ import annotations

import inspect


import numpy as np
import pytest
import torch

import netc
from netc.api import data_type as dt
from netc.diagnostics import NetcError
from netc.cli import main
from netc.frontend import load_text
from netc import pipelines
from netc.pipelines import Options, Training
from netc.ops import lookup
from netc.runtime.train import ReferenceTrainer
from cli_inprocess import netc_interp  # noqa: E402  (tests/: the test modules' directory)

L = netc.layer
REV = lookup("netc.seq_reverse")


def here() -> int:
    return inspect.currentframe().f_back.f_lineno


# -- the op ------------------------------------------------------------------------------------------

def test_the_valid_steps_backwards_and_padding_in_place():
    x = torch.arange(15, dtype=torch.float64).reshape(5, 3, 1)     # x[t, b] = 3t + b
    n = torch.tensor([5, 2, 1], dtype=torch.int32)
    y = REV.reference({"name": "r"}, [x, n], {})[:, :, 0]
    assert y[:, 0].tolist() == [12, 9, 6, 3, 0]                    # all 5 steps, last first
    assert y[:, 1].tolist() == [4, 1, 7, 10, 13]                   # 2 valid steps reversed, padding where it was
    assert y[:, 2].tolist() == [2, 5, 8, 11, 14]                   # one step: nothing moves
    assert torch.equal(REV.reference({}, [x], {}), x.flip(0))      # without lengths: a flip of time
    assert torch.equal(REV.reference({}, [REV.reference({}, [x, n], {}), n], {}), x)   # its own inverse


def test_gradient_is_the_same_reversal_against_autograd():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, 2, generator=g, dtype=torch.float64, requires_grad=True)
    n = torch.tensor([3, 4, 1])
    dy = torch.randn(4, 3, 2, generator=g, dtype=torch.float64)
    (REV.reference({}, [x, n], {}) * dy).sum().backward()
    assert torch.equal(x.grad, REV.reference({}, [dy, n], {}))


NET = """network rev {
  input x: f32[4, 3, 2] { batch_axis: 1 }
  input n: i32[3]
  input label: f32[4, 3, 5]
  xr = SequenceReverse(x, n)
  h = Lstm(xr) { size: 5 }
  y = SequenceReverse(h, n)
  loss = EuclideanLoss(y, label, n)
}
"""


@pytest.mark.parametrize("bad,words", [
    ("SequenceReverse(x, label)", "lengths must be [B] = [3]"),
    ("SequenceReverse(n)", "rank >= 2"),
])
def test_bad_operands_are_located(bad, words, tmp_path, capsys):
    path = tmp_path / "rev.nd"
    path.write_text(NET.replace("SequenceReverse(x, n)", bad))
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert "rev.nd:5:" in err and words in err and "^" in err, err


def test_float_lengths_and_lengths_out_of_range_are_refused(tmp_path):
    with pytest.raises(NetcError, match="integers"):
        pipelines.inference(load_text(NET.replace("input n: i32[3]", "input n: f32[3]"), "rev.nd"), Options())
    with pytest.raises(NetcError, match="sample 1 has length 5"):
        REV.reference({"name": "xr"}, [torch.zeros(4, 3), torch.tensor([1, 5, 2])], {})


def test_interpreter_target_runs_and_trains_against_the_reference(tmp_path):
    """The gather kernel (kernels/seq_reverse.py), forward and as its own gradient, inside a reversed LSTM:
    a forward and two training steps within f32 tolerance of the float64 reference."""
    pytest.importorskip("triton")
    path = tmp_path / "rev.nd"
    path.write_text(NET)
    r = netc_interp("run", path, "--target", "interp", "--compare")
    assert r.returncode == 0, r.stderr
    assert "loss: max relative error" in r.stderr + r.stdout
    r = netc_interp("run", path, "--target", "interp", "--train", "--compare", "--steps", "2")
    assert r.returncode == 0, r.stderr + r.stdout
    assert "compared 2 training steps of network 'rev' (sgd) on the interpreter target: ok" in r.stdout + r.stderr


# -- the Python API ----------------------------------------------------------------------------------

def _seqs(seed, n=5, lo=1, hi=7, dim=3):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((int(rng.integers(lo, hi)), dim)).tolist() for _ in range(n)]


def _layer(kind, x, reverse):
    if kind == "lstm":
        return L.lstm(x, 4, act="relu", reverse=reverse, name="r")
    if kind == "gru":
        return L.gru(x, 4, reverse=reverse, name="r")
    return L.recurrent(x, 4, act="sigmoid", reverse=reverse, name="r")


@pytest.mark.parametrize("kind", ["lstm", "gru", "recurrent"])
def test_reverse_equals_the_forward_layer_on_each_sequence_reversed_by_hand(kind):
    back = _layer(kind, L.data("x", dt.dense_vector_sequence(3)), True)
    assert back.name == "r.reversed" and back.inputs[0].name == "r" and back.inputs[1].name == "x.lengths"
    fwd = _layer(kind, L.data("x", dt.dense_vector_sequence(3)), False)
    params = netc.parameters.create(back, seed=1, dtype=torch.float64)
    assert sorted(params) == sorted(netc.parameters.create(fwd, seed=1, dtype=torch.float64))  # the same names
    seqs = _seqs(2)
    got = netc.infer(back, params, seqs)
    by_hand = netc.infer(fwd, params, [s[::-1] for s in seqs])
    for g, h, s in zip(got, by_hand, seqs):
        assert g.shape == (len(s), 4)
        np.testing.assert_allclose(g, h[::-1], rtol=0, atol=1e-12)
    # not the forward layer: the first step of a reversed sequence has seen the whole sequence
    ahead = netc.infer(fwd, params, seqs)
    assert max(abs(float(a[0, 0]) - float(g[0, 0])) for a, g in zip(ahead, got) if len(a) > 1) > 1e-6


def test_padding_changes_no_output_and_no_gradient():
    x = L.data("x", dt.dense_vector_sequence(3))
    y = L.data("y", dt.dense_vector_sequence(4))
    h = L.lstm(x, 4, reverse=True, name="bw")
    g = L.gru(h, 4, reverse=True, name="g")
    cost = L.square_error_cost(g, y, name="cost")
    params = netc.parameters.create(cost, seed=3, dtype=torch.float64)
    xs = _seqs(4, n=4, lo=1, hi=6)
    rng = np.random.default_rng(5)
    batch = [(s, rng.standard_normal((len(s), 4)).tolist()) for s in xs]
    feeder = netc.api.trainer.Feeder(netc.Topology(cost))
    feed = feeder(batch)
    t, b = feeder.steps, len(batch)
    lengths = feed["x.lengths"].numpy()
    assert lengths.min() < t
    pad = torch.as_tensor(np.arange(t)[:, None] >= lengths[None, :])[:, :, None]
    other = dict(feed, x=feed["x"].masked_fill(pad, 7.0), y=feed["y"].masked_fill(pad, -3.0))

    def step(f):
        module = netc.Topology(cost).module(b, Training(gradients_only=True), steps=t)
        tr = ReferenceTrainer(module, None, {k: v.clone() for k, v in params.items()}, dtype=torch.float64)
        return tr.step(f, lr=0.1)
    a, z = step(feed), step(other)
    grads = [k for k in a if k.endswith(".grad") and k[:-5] in params]
    assert len(grads) == len(params)
    for k in ["cost"] + grads:
        torch.testing.assert_close(a[k], z[k], rtol=0, atol=1e-13, msg=k)
    # a sample alone equals the same sample padded in a batch with a longer one
    lone = netc.infer(g, params, [xs[0]])
    long = netc.infer(g, params, [xs[0], _seqs(6, n=1, lo=9, hi=10)[0]])
    np.testing.assert_allclose(long[0], lone[0], rtol=0, atol=1e-13)


def test_seq_reverse_of_what_is_not_a_sequence_is_located():
    line = here() + 2
    with pytest.raises(netc.api.Error) as e:
        L.seq_reverse(L.data("v", dt.dense_vector(3)))
    assert f"test_seq_reverse.py:{line}:" in str(e.value) and "runs over a sequence" in str(e.value)
    r = L.seq_reverse(L.data("w", dt.dense_vector_sequence(2)))
    assert r.type == "SequenceReverse" and r.inputs[1].name == "w.lengths" and r.seq is not None


