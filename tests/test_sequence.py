"""Variable-length sequences (netc/ops/sequence.py, the per-step losses of netc/ops/loss.py) and state
carried between calls (OpDef.state_operands, the reference executor's carry_state, netc run --state-in /
--state-out).

* SequencePool (last, first, max, mean) over x [T, B, ...] with lengths [B]: against plain torch on each
  sample's unpadded steps; padding never matters; its gradient against torch.autograd on the unpadded
  steps and central finite differences (f64); shapes, costs, located errors;
* SoftmaxLoss / EuclideanLoss per step, with and without lengths: values and gradients against plain
  torch on the unpadded sequences (F.cross_entropy, a sum of squares) and finite differences; the
  per-sample readings unchanged;
* a network with lengths, a reduction and a masked loss runs and trains with --reference; bad lengths
  are located errors;
* carried state: 4 steps == 2 + 2 through the executor API and the CLI, for h and c, and the training
  gradients of the second call still right.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from netc.cli import main
from netc.diagnostics import NetcError
from netc.ops import ShapeError, lookup

POOL, POOL_GRAD = lookup("netc.seq_pool"), lookup("netc.seq_pool_grad")
SOFTMAX, SOFTMAX_GRAD = lookup("netc.softmax_loss"), lookup("netc.softmax_loss_grad")
EUCLID, EUCLID_GRAD = lookup("netc.euclidean_loss"), lookup("netc.euclidean_loss_grad")
MODES = ("last", "first", "max", "mean")


def rand(*shape, seed=1):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def padded(x, lengths, fill=1e3):
    """x with every padding step (t >= lengths[b]) set to `fill`: results must not change."""
    y = x.clone()
    for b, n in enumerate(lengths.tolist()):
        y[n:, b] = fill
    return y


def fd(f, v, eps=1e-6):
    """Central differences of the scalar f() in every entry of v (changed in place and restored)."""
    out = torch.zeros_like(v)
    for idx in np.ndindex(*v.shape):
        keep = float(v[idx])
        v[idx] = keep + eps
        up = float(f())
        v[idx] = keep - eps
        down = float(f())
        v[idx] = keep
        out[idx] = (up - down) / (2 * eps)
    return out


# -- SequencePool ------------------------------------------------------------------------------------

def plain_pool(mode, x, lengths):
    """The reduction per sample on its unpadded steps x[:n, b], in plain torch."""
    rows = []
    for b, n in enumerate(lengths.tolist()):
        s = x[:n, b]
        rows.append({"last": s[-1], "first": s[0], "max": s.max(0).values if n else None, "mean": s.mean(0)}[mode])
    return torch.stack(rows)


def test_pool_shapes_and_costs():
    assert POOL.infer({"mode": "last"}, [(7, 3, 2, 4), (3,)]) == (3, 2, 4)
    assert POOL.infer({"mode": "mean"}, [(7, 3)]) == (3,)
    t, b, f = 7, 3, 8
    ins, out = [(t, b, 2, 4), (b,)], (b, 2, 4)
    assert POOL.cost({"mode": "last"}, ins, out).flops_fwd == 0
    assert POOL.cost({"mode": "max"}, ins, out).flops_fwd == t * b * f
    c = POOL.cost({"mode": "mean"}, ins, out)
    assert (c.flops_fwd, c.flops_bwd_data) == (t * b * f + b * f, t * b * f)
    assert POOL_GRAD.infer({"mode": "max"}, [(7, 3, 2), (3,), (3, 2)]) == (7, 3, 2)


@pytest.mark.parametrize("ins,operand,words", [
    ([(4,)], 0, "rank >= 2"),
    ([(0, 3, 2)], 0, "at least one step"),
    ([(4, 3, 2), (4,)], 1, r"lengths must be \[B\] = \[3\]"),
    ([(4, 3, 2), (3, 1)], 1, "lengths must be"),
])
def test_pool_shape_errors(ins, operand, words):
    with pytest.raises(ShapeError, match=words) as e:
        POOL.infer({"mode": "last"}, ins)
    assert e.value.operand == operand


def test_pool_lengths_must_be_integers():
    with pytest.raises(ShapeError, match="integers") as e:
        POOL.check_dtypes({"mode": "last"}, ["f32", "f32"])
    assert e.value.operand == 1
    POOL.check_dtypes({"mode": "last"}, ["f32", "i32"])


@pytest.mark.parametrize("mode", MODES)
def test_pool_equals_plain_torch_on_the_unpadded_steps(mode):
    x = rand(6, 4, 2, 3, seed=2)
    lengths = torch.tensor([6, 1, 3, 4], dtype=torch.int32)
    want = plain_pool(mode, x, lengths)
    got = POOL.reference({"mode": mode}, [x, lengths], {})
    torch.testing.assert_close(got, want, rtol=1e-14, atol=1e-14)
    # padding holding anything (large values, which max would pick) changes nothing
    torch.testing.assert_close(POOL.reference({"mode": mode}, [padded(x, lengths), lengths], {}), want,
                               rtol=1e-14, atol=1e-14)
    # without lengths every sample is T steps
    full = torch.full((4,), 6, dtype=torch.int64)
    torch.testing.assert_close(POOL.reference({"mode": mode}, [x], {}), plain_pool(mode, x, full))


@pytest.mark.parametrize("mode", MODES)
def test_pool_gradient_against_autograd_on_the_unpadded_steps(mode):
    x = rand(5, 3, 4, seed=3)
    lengths = torch.tensor([2, 5, 1])
    dy = rand(3, 4, seed=4)
    xl = x.clone().requires_grad_()
    with torch.enable_grad():
        (want,) = torch.autograd.grad(plain_pool(mode, xl, lengths), xl, dy)
    got = POOL_GRAD.reference({"mode": mode}, [padded(x, lengths), lengths, dy], {})
    torch.testing.assert_close(got, want, rtol=1e-14, atol=1e-14)   # padding steps get exactly 0


@pytest.mark.parametrize("mode", MODES)
def test_pool_gradient_against_finite_differences(mode):
    x = rand(4, 3, 2, seed=5)
    lengths = torch.tensor([4, 2, 3])
    w = rand(3, 2, seed=6)
    got = POOL_GRAD.reference({"mode": mode}, [x, lengths, w], {})
    want = fd(lambda: (POOL.reference({"mode": mode}, [x, lengths], {}) * w).sum(), x)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("bad,words", [([0, 2], "sample 0 has length 0"), ([2, 5], "sample 1 has length 5")])
def test_pool_refuses_lengths_outside_1_to_t(bad, words):
    with pytest.raises(NetcError, match=words + r"; lengths must be 1 to T = 4"):
        POOL.reference({"mode": "mean", "name": "p"}, [rand(4, 2, 3), torch.tensor(bad)], {})


# -- per-step losses ---------------------------------------------------------------------------------

def plain_softmax_loss(x, labels, lengths):
    """F.cross_entropy over the valid steps of every sample, concatenated (one-hot labels by their argmax)."""
    steps = [(x[t, b], labels[t, b]) for b, n in enumerate(lengths.tolist()) for t in range(n)]
    logits = torch.stack([s[0].reshape(-1) for s in steps])
    ys = torch.stack([s[1].reshape(-1).argmax() if s[1].numel() > 1 else s[1].reshape(()) for s in steps])
    return F.cross_entropy(logits, ys.long())


def plain_euclidean_loss(x, y, lengths):
    diffs = [(x[t, b] - y[t, b]).reshape(-1) for b, n in enumerate(lengths.tolist()) for t in range(n)]
    return 0.5 * sum((d * d).sum() for d in diffs) / len(diffs)


def _softmax_case(one_hot, seed=7):
    x = rand(5, 3, 4, seed=seed)
    ids = torch.randint(0, 4, (5, 3), generator=torch.Generator().manual_seed(seed))
    lengths = torch.tensor([3, 5, 1], dtype=torch.int32)
    return x, (F.one_hot(ids, 4).to(torch.int32) if one_hot else ids.to(torch.int32)), lengths


@pytest.mark.parametrize("one_hot", [False, True], ids=["ids", "one_hot"])
def test_masked_softmax_loss_equals_cross_entropy_on_the_unpadded_steps(one_hot):
    x, labels, lengths = _softmax_case(one_hot)
    assert SOFTMAX.infer({}, [tuple(x.shape), tuple(labels.shape), (3,)]) == ()
    want = plain_softmax_loss(x, labels, lengths)
    torch.testing.assert_close(SOFTMAX.reference({}, [padded(x, lengths), labels, lengths], {}), want)
    xl = x.clone().requires_grad_()
    with torch.enable_grad():
        (dx,) = torch.autograd.grad(plain_softmax_loss(xl, labels, lengths), xl)
    for seed in (None, torch.tensor(2.5, dtype=torch.float64)):
        ins = [padded(x, lengths), labels, lengths] + ([seed] if seed is not None else [])
        got = SOFTMAX_GRAD.reference({"lengths": True}, ins, {})
        torch.testing.assert_close(got, dx * (1 if seed is None else 2.5), rtol=1e-13, atol=1e-15)
    torch.testing.assert_close(SOFTMAX_GRAD.reference({"lengths": True}, [x, labels, lengths], {}),
                               fd(lambda: SOFTMAX.reference({}, [x, labels, lengths], {}), x),
                               rtol=1e-6, atol=1e-9)


def test_per_step_softmax_loss_without_lengths_is_the_mean_over_every_step():
    """labels [T, B] of class indices (which the per-sample reading refuses for B, C > 1): every step counts."""
    x, labels, _ = _softmax_case(False, seed=8)
    want = F.cross_entropy(x.reshape(15, 4), labels.reshape(-1).long())
    torch.testing.assert_close(SOFTMAX.reference({}, [x, labels], {}), want)
    torch.testing.assert_close(SOFTMAX_GRAD.reference({}, [x, labels], {}),
                               fd(lambda: SOFTMAX.reference({}, [x, labels], {}), x), rtol=1e-6, atol=1e-9)
    assert SOFTMAX.label_classes({}, [(5, 3, 4), (5, 3)]) == (4, True)


def test_rank_3_per_sample_readings_are_unchanged():
    """Labels that the per-sample reading takes keep it: logits [N, a, b] flattened to [N, a*b]."""
    x = rand(4, 2, 3, seed=9)
    onehot = F.one_hot(torch.randint(0, 6, (4,), generator=torch.Generator().manual_seed(1)), 6)
    want = F.cross_entropy(x.reshape(4, 6), onehot.argmax(1))
    torch.testing.assert_close(SOFTMAX.reference({}, [x, onehot.reshape(4, 2, 3)], {}), want)
    ids = torch.tensor([0, 5, 2, 3])
    torch.testing.assert_close(SOFTMAX.reference({}, [x, ids], {}), F.cross_entropy(x.reshape(4, 6), ids))
    assert SOFTMAX.label_classes({}, [(4, 2, 3), (4,)]) == (6, True)
    y = rand(4, 2, 3, seed=10)
    torch.testing.assert_close(EUCLID.reference({}, [x, y], {}), 0.5 * ((x - y) ** 2).sum() / 4)


def test_masked_euclidean_loss_equals_the_mean_over_the_unpadded_steps():
    x, y = rand(4, 3, 2, 2, seed=11), rand(4, 3, 4, seed=12)
    lengths = torch.tensor([4, 1, 2])
    yy = y.reshape(x.shape)
    want = plain_euclidean_loss(x, yy, lengths)
    torch.testing.assert_close(EUCLID.reference({}, [padded(x, lengths), y, lengths], {}), want)
    xl, yl = x.clone().requires_grad_(), y.clone().requires_grad_()
    with torch.enable_grad():
        dx, dy = torch.autograd.grad(plain_euclidean_loss(xl, yl.reshape(x.shape), lengths), [xl, yl])
    for wrt, want_g in ((0, dx), (1, dy)):
        got = EUCLID_GRAD.reference({"wrt": wrt, "lengths": True}, [padded(x, lengths), y, lengths], {})
        torch.testing.assert_close(got, want_g, rtol=1e-13, atol=1e-15)
        v = (x, y)[wrt]
        torch.testing.assert_close(EUCLID_GRAD.reference({"wrt": wrt, "lengths": True}, [x, y, lengths], {}),
                                   fd(lambda: EUCLID.reference({}, [x, y, lengths], {}), v), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("op,ins,operand,words", [
    (SOFTMAX, [(5, 3), (5, 3), (3,)], 0, "rank >= 3"),
    (SOFTMAX, [(5, 3, 4), (5, 2), (3,)], 1, "per-step labels"),
    (SOFTMAX, [(5, 3, 4), (5, 3, 3), (3,)], 1, "one-hot"),
    (SOFTMAX, [(5, 3, 4), (5, 3), (5,)], 2, "lengths must be"),
    (EUCLID, [(5, 3, 4), (5, 3, 5), (3,)], 1, "same shape"),
    (EUCLID, [(5, 3, 4), (5, 3, 4), (3, 1)], 2, "lengths must be"),
])
def test_loss_shape_errors(op, ins, operand, words):
    with pytest.raises(ShapeError, match=words) as e:
        op.infer({}, ins)
    assert e.value.operand == operand


def test_masked_softmax_loss_refuses_labels_outside_the_classes():
    x, labels, lengths = _softmax_case(False)
    labels[0, 1] = 4
    with pytest.raises(NetcError, match="the label 4 at step 0 of sample 1 is not a class 0 to 3"):
        SOFTMAX.reference({"name": "loss"}, [x, labels, lengths], {})


def test_softmax_loss_refuses_labels_outside_the_classes_per_sample(tmp_path):
    """Class indices [N] outside 0..C-1 (or fractional) are the user's data error, at the loss's line, not an
    index error from inside torch (an internal error before)."""
    import numpy as np
    from cli_inprocess import netc_inprocess
    x = torch.randn(3, 4, dtype=torch.float64)
    with pytest.raises(NetcError, match="the label 7 of sample 2 is not a class 0 to 3"):
        SOFTMAX.reference({"name": "loss"}, [x, torch.tensor([0, 3, 7])], {})
    with pytest.raises(NetcError, match="its labels must be class indices, got fractional values"):
        SOFTMAX.reference({"name": "loss"}, [x, torch.tensor([0.0, 1.5, 2.0])], {})
    f = tmp_path / "net.nd"
    f.write_text("network n {\n  input x: f32[2, 6]\n  input label: i32[2]\n  y = InnerProduct(x) { num_outputs: 4 }\n"
                 "  loss = SoftmaxLoss(y, label)\n}\n")
    np.savez(tmp_path / "in.npz", x=np.ones((2, 6), np.float32), label=np.array([1, -1], np.int32))
    r = netc_inprocess("run", f, "--reference", "--inputs", tmp_path / "in.npz")
    assert r.returncode == 1 and "internal error" not in r.stderr, r.stderr
    assert f"{f}:5:3: error: SoftmaxLoss 'loss': the label -1 of sample 1 is not a class 0 to 3" in r.stderr
    r = netc_inprocess("run", f, "--reference", "--inputs", tmp_path / "in.npz", "--train", "--steps", "1")
    assert r.returncode == 1 and "internal error" not in r.stderr, r.stderr     # training checks its inputs first
    assert f"in.npz: error: 'label' holds -1 at [1]: class labels must be 0 to 3 (input 'label' of {f}:3:9)" in r.stderr


# -- a network ---------------------------------------------------------------------------------------

NET = """network tagger {
  input x: f32[5, 3, 4]
  input lengths: i32[3]
  input tags: i32[5, 3]
  input label: i32[3]
  h = Lstm(x) { size: 6 }
  tag_loss = SoftmaxLoss(h, tags, lengths)
  pooled = SequencePool(h, lengths) { mode: max }
  loss = SoftmaxLoss(pooled, label)
}
"""


def test_a_network_with_lengths_runs_and_trains(tmp_path, capsys):
    path = tmp_path / "tagger.nd"
    path.write_text(NET)
    assert main(["run", str(path), "--reference"]) == 0
    assert "tag_loss" in capsys.readouterr().out
    assert main(["run", str(path), "--reference", "--train", "--steps", "3", "--lr", "0.5"]) == 0
    out = capsys.readouterr().out
    first, last = (float(v) for v in re.search(r"loss ([\d.]+) -> ([\d.]+)", out).groups())
    assert last < first


def test_random_lengths_are_1_to_t():
    from netc import pipelines
    from netc.frontend import load_text
    from netc.pipelines import Options
    from netc.runtime import run_reference
    m = load_text(NET.replace("[5, 3, 4]", "[5, 64, 4]").replace("i32[3]", "i32[64]").replace("[5, 3]", "[5, 64]"),
                  "t.nd")
    pipelines.inference(m, Options())
    n = run_reference(m, intermediates=True)["lengths"]
    assert int(n.min()) == 1 and int(n.max()) == 5


@pytest.mark.parametrize("bad,words", [
    ([0, 2, 3], "SequencePool 'pooled': sample 0 has length 0"),
    ([1, 2, 6], "SoftmaxLoss 'tag_loss': sample 2 has length 6"),
])
def test_bad_lengths_are_located_at_the_layer(tmp_path, capsys, bad, words):
    path = tmp_path / "tagger.nd"
    path.write_text(NET.replace("  tag_loss = SoftmaxLoss(h, tags, lengths)\n", "") if "Pool" in words else NET)
    assert main(["run", str(path), "--reference", "--inputs", str(_npz(tmp_path, bad))]) == 1
    err = capsys.readouterr().err
    line = 7   # the layer that reads them first
    assert f"tagger.nd:{line}:3: error: {words}" in err


def _npz(tmp_path, lengths):
    p = tmp_path / "in.npz"
    np.savez(p, x=np.zeros((5, 3, 4), np.float32), lengths=np.array(lengths, np.int32),
             tags=np.zeros((5, 3), np.int32), label=np.zeros(3, np.int32))
    return p


def test_lengths_must_be_integer_inputs(tmp_path, capsys):
    path = tmp_path / "tagger.nd"
    path.write_text(NET.replace("input lengths: i32[3]", "input lengths: f32[3]"))
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert "reads lengths as integers (i32 or i64), got f32 values" in err


# -- carried state -----------------------------------------------------------------------------------

CARRY = """network seq {
  input x: f32[T, 3, 2]
  input h0: f32[3, 5]
  input c0: f32[3, 5]
  input label: f32[T, 3, 5]
  y = Lstm(x, h0, c0) { size: 5 }
  loss = EuclideanLoss(y, label)
}
"""


def _module(steps, training=False):
    from netc import pipelines
    from netc.frontend import load_text
    from netc.pipelines import Options, Training
    m = load_text(CARRY.replace("T,", f"{steps},"), "seq.nd")
    if training:
        pipelines.training(m, Options(training=Training()))
    else:
        pipelines.inference(m, Options())
    return m


def test_executor_carries_h_and_c_four_steps_are_two_plus_two():
    from netc.ops.lstm import lstm_states
    from netc.runtime.reference import ReferenceExecutor
    x, label = rand(4, 3, 2, seed=20), rand(4, 3, 5, seed=21)
    whole = ReferenceExecutor(_module(4), carry_state=True)
    halves = ReferenceExecutor(_module(2), carry_state=True)
    halves.set_params(whole.get_params())
    y4 = whole.run({"x": x, "label": label})["loss"]
    assert set(whole.state) == {"h0", "c0"}
    # the first call starts from zeros (no h0, c0 given): the state after 4 steps is lstm_states' by hand
    p = {r: whole.params[f"y.{r}"] for r in lookup("netc.lstm").param_roles}
    s = lstm_states(x, None, None, p)
    torch.testing.assert_close(whole.state["h0"], s["h_last"], rtol=0, atol=0)
    torch.testing.assert_close(whole.state["c0"], s["c_last"], rtol=0, atol=0)
    first = halves.run({"x": x[:2], "label": label[:2]})["loss"]
    second = halves.run({"x": x[2:], "label": label[2:]})["loss"]
    for k in ("h0", "c0"):
        torch.testing.assert_close(halves.state[k], whole.state[k], rtol=1e-14, atol=1e-14)
    torch.testing.assert_close((first + second) / 2, y4, rtol=1e-13, atol=1e-14)   # the losses are per-call means
    # a state input given explicitly wins; reset_state() starts from zeros again
    halves.run({"x": x[:2], "label": label[:2], "h0": torch.zeros(3, 5), "c0": torch.zeros(3, 5)})
    torch.testing.assert_close(halves.state["c0"], lstm_states(x[:2], None, None, p)["c_last"])
    halves.reset_state()
    assert halves.state == {}


def test_carry_state_needs_a_state_input():
    from netc import pipelines
    from netc.frontend import load_text
    from netc.pipelines import Options
    from netc.runtime.reference import ReferenceExecutor
    m = load_text(NET, "t.nd")
    pipelines.inference(m, Options())
    with pytest.raises(NetcError, match="no state to carry"):
        ReferenceExecutor(m, carry_state=True)


def test_cli_four_steps_are_two_plus_two(tmp_path, capsys):
    x = rand(4, 3, 2, seed=22).numpy()
    for t in (2, 4):
        (tmp_path / f"s{t}.nd").write_text(CARRY.replace("T,", f"{t},").replace(
            "  input label: f32[T, 3, 5]\n", "").replace("  loss = EuclideanLoss(y, label)\n", "").replace("T,", f"{t},"))
    np.savez(tmp_path / "x4.npz", x=x)
    np.savez(tmp_path / "a.npz", x=x[:2])
    np.savez(tmp_path / "b.npz", x=x[2:])

    def run(net, inputs, out, *state):
        assert main(["run", str(tmp_path / net), "--reference", "--inputs", str(tmp_path / inputs),
                     "-o", str(tmp_path / out), *state]) == 0
        return np.load(tmp_path / out)["y"]

    y4 = run("s4.nd", "x4.npz", "y4.npz", "--state-out", str(tmp_path / "st4.npz"))
    ya = run("s2.nd", "a.npz", "ya.npz", "--state-out", str(tmp_path / "sta.npz"))
    yb = run("s2.nd", "b.npz", "yb.npz", "--state-in", str(tmp_path / "sta.npz"), "--state-out", str(tmp_path / "stb.npz"))
    np.testing.assert_allclose(np.concatenate([ya, yb]), y4, rtol=1e-13, atol=1e-14)
    st4, stb = np.load(tmp_path / "st4.npz"), np.load(tmp_path / "stb.npz")
    assert sorted(st4) == ["c0", "h0"]
    for k in ("h0", "c0"):
        np.testing.assert_allclose(stb[k], st4[k], rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(st4["h0"], y4[-1], rtol=0, atol=0)
    capsys.readouterr()
    # the state file's names are checked; the flags belong to the reference executor
    np.savez(tmp_path / "bad.npz", h1=np.zeros((3, 5)))
    assert main(["run", str(tmp_path / "s2.nd"), "--reference", "--state-in", str(tmp_path / "bad.npz")]) == 1
    assert "holds 'h1', which is no state input of network 'seq' (its state inputs: h0, c0)" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "s2.nd"), "--target", "interp", "--state-out", str(tmp_path / "o.npz")]) == 1
    assert "not of --target interp" in capsys.readouterr().err


def test_trainer_carries_state_and_its_gradients_are_right():
    """Two training steps of 2 steps each with carry_state: the second starts from the first's final h, c
    (taken before the first's update), and its update is -lr * the autograd gradient of its loss at that state."""
    from netc.runtime.train import ReferenceTrainer
    from netc.ops.lstm import lstm_states
    m = _module(2, training=True)
    tr = ReferenceTrainer(m, carry_state=True)
    x, label = rand(4, 3, 2, seed=23), rand(4, 3, 5, seed=24)
    roles = lookup("netc.lstm").param_roles
    before = {r: tr.params[f"y.{r}"].clone() for r in roles}
    tr.step({"x": x[:2], "label": label[:2]}, lr=0.1)
    s = lstm_states(x[:2], None, None, before)
    torch.testing.assert_close(tr.state["h0"], s["h_last"], rtol=0, atol=0)
    torch.testing.assert_close(tr.state["c0"], s["c_last"], rtol=0, atol=0)
    h, c = tr.state["h0"], tr.state["c0"]
    p = {r: tr.params[f"y.{r}"].clone().requires_grad_() for r in roles}
    with torch.enable_grad():
        y = lookup("netc.lstm").reference({"size": 5, "activation": "tanh"}, [x[2:], h, c], p)
        loss = 0.5 * ((y - label[2:]) ** 2).sum() / 2
        grads = torch.autograd.grad(loss, list(p.values()))
    tr.step({"x": x[2:], "label": label[2:]}, lr=0.1)
    for r, g in zip(roles, grads):
        torch.testing.assert_close((p[r].detach() - tr.params[f"y.{r}"]) / 0.1, g, rtol=1e-9, atol=1e-12,
                                   msg=lambda msg: f"{r}: {msg}")



def test_compiled_targets_run_the_sequence_forms(tmp_path):
    """T = B, so nothing but the ops tells steps from samples: the masked and per-step losses and SequencePool run
    on the interpreter target within f32 of the reference (they were refused before they had kernels; a kernel
    that ignored the lengths would be silently wrong). tests/test_sequence_targets.py trains them."""
    import os
    import subprocess
    import sys
    pytest.importorskip("triton")
    src = """network tb {
  input x: f32[3, 3, 4]
  input n: i32[3]
  input t: i32[3, 3]
  s = Tanh(x)
  masked = SoftmaxLoss(s, t, n)
  per_step = SoftmaxLoss(s, t)
  l2 = EuclideanLoss(s, x, n)
  top = SequencePool(s, n) { mode: max }
}
"""
    path = tmp_path / "tb.nd"
    path.write_text(src)
    env = dict(os.environ, TRITON_INTERPRET="1")
    r = subprocess.run([sys.executable, "-m", "netc", "run", str(path), "--target", "interp", "--compare"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    for name in ("masked", "per_step", "l2", "top"):
        assert f"{name}: max relative error" in r.stderr, r.stderr


def test_distributed_ranks_draw_lengths_and_per_step_labels_like_the_reference():
    """The ranks' random inputs (runtime/distributed.py) are the reference executor's: lengths in 1..T, per-step
    class ids [T, B] in 0..C-1 (netc run --workers K compares against the single-process run)."""
    from netc import pipelines
    from netc.frontend import load_text
    from netc.ir.query import layer_name, network_inputs
    from netc.pipelines import Options
    from netc.runtime.distributed import logical_input
    from netc.runtime.reference import random_input
    m = load_text(NET, "t.nd")
    pipelines.inference(m, Options())
    net = m.networks()[0]
    for op in network_inputs(net):
        got = logical_input(net, op, 3, torch.float64, None)
        torch.testing.assert_close(got, random_input(net, op, 3), rtol=0, atol=0)
        if layer_name(op) == "lengths":
            assert 1 <= int(got.min()) and int(got.max()) <= 5
        if layer_name(op) == "tags":
            assert got.shape == (5, 3) and 0 <= int(got.min()) and int(got.max()) < 6
