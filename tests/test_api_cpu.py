"""The Python API on the CPU target (issue 28), its default: train / test / infer on target="cpu" equal the
f64 reference target within f32 rounding -- batches of two sizes (two programs on one set), optimizer state
and batch norm's running statistics kept in the set, parameters shared by name between topologies trained in
turn, immutable parameters, a concatenation's logits (an alias step the generated step does not capture
itself), an observer's values, a sequence network -- and the programs it keeps across calls start a new
ParameterSet from the program's initial state, not from the last set's."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

import netc
from netc import layer as L
from netc.api import targets


def _close(a, b, what, rel=2e-5, floor=1e-6):
    a, b = torch.as_tensor(a).double(), torch.as_tensor(b).double()
    err = float((a - b).abs().max())
    assert err <= rel * float(a.abs().max()) + floor, (what, err)


def _run(target, build, data, optimizer, passes=2, batch_size=8, **kw):
    """Train `build()`'s cost on `data`, then test and infer: (per-iteration costs and metrics, parameters
    and state, TestResult, infer's output)."""
    cost, out = build()
    params = netc.parameters.create(cost, seed=0)
    seen = []
    netc.train(cost, params, lambda: iter(data), optimizer(), num_passes=passes, batch_size=batch_size,
               target=target, event_handler=lambda e: seen.append((e.cost, e.metrics))
               if isinstance(e, netc.event.EndIteration) else None, **kw)
    result = netc.test(cost, params, lambda: iter(data), batch_size=6, target=target)
    probs = netc.infer(out, params, [s[0] for s in data[:7]], target=target)
    values = {**{k: params[k].clone() for k in params.names()}, **{k: v.clone() for k, v in params.state.items()}}
    return seen, values, result, probs


def _compare(ref, cpu):
    (c0, p0, t0, i0), (c1, p1, t1, i1) = ref, cpu
    assert len(c0) == len(c1) > 0
    for (a, ma), (b, mb) in zip(c0, c1):
        assert abs(a - b) <= 2e-5 * abs(a) + 1e-6, (a, b)
        assert ma.keys() == mb.keys() and all(abs(ma[k] - mb[k]) < 1e-9 for k in ma), (ma, mb)
    assert p0.keys() == p1.keys()
    for k in p0:
        _close(p0[k], p1[k], k)
    assert abs(t0.cost - t1.cost) <= 2e-5 * abs(t0.cost) and t0.metrics == t1.metrics, (t0, t1)
    _close(i0, i1, "infer")


def _images(n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 6, 6, 2)).astype(np.float32)
    return list(zip(x, (x[:, :3].sum((1, 2, 3)) > x[:, 3:].sum((1, 2, 3))).astype(np.int32) + (x[:, 0, 0, 0] > 1)))


def _convnet():
    x, y = L.data("x", [6, 6, 2]), L.data("y", [], "i32")
    h = L.batch_norm(L.conv2d(x, 3, 4, bias=False, name="conv"), act="relu", name="bn")    # running statistics
    h = L.fc(L.max_pool(h, 2, stride=2, name="pool"), 8, act="tanh", name="fc1")
    h = L.dropout(h, keep_prob=0.75, name="drop")
    logits = L.fc(h, 3, name="fc2")
    return L.softmax_loss(logits, y, name="cost"), L.softmax(logits, name="prob")


def test_cpu_is_the_default_target_and_reference_stays_selectable():
    for f in (netc.train, netc.test, netc.infer):
        assert inspect.signature(f).parameters["target"].default == "cpu"
    assert targets.DEFAULT_TARGET == "cpu" and {"cpu", "reference", "interp"} <= set(netc.api.trainer.TARGETS)


def test_training_testing_and_inference_equal_the_reference():
    """Momentum with weight decay, 20 samples in batches of 8, 8 and 4 over two passes (two programs, one
    velocity per parameter in the set), dropout, batch norm: every cost, accuracy, parameter, velocity and
    running statistic, then test and infer, within f32 rounding of the f64 reference."""
    data = _images(20)
    opt = lambda: netc.optimizer.Momentum(0.05, momentum=0.9, weight_decay=0.01)     # noqa: E731
    ref = _run("reference", _convnet, data, opt)
    cpu = _run("cpu", _convnet, data, opt)
    _compare(ref, cpu)
    assert {"fc1.weight.velocity", "bn.running_mean", "bn.running_var"} <= set(cpu[1])


def test_a_new_parameter_set_starts_from_the_initial_state():
    """The CPU target keeps its programs across calls; a second ParameterSet trained on the same topology
    starts with Adam's zero moments (not the first set's), as on the reference target."""
    data = _images(16, seed=1)
    cost, _ = _convnet()
    for_ref = netc.parameters.create(cost, seed=4)
    netc.train(cost, for_ref, lambda: iter(data), netc.optimizer.Adam(0.01), batch_size=8, target="reference")
    first = netc.parameters.create(cost, seed=0)
    netc.train(cost, first, lambda: iter(data), netc.optimizer.Adam(0.01), batch_size=8, num_passes=2)
    second = netc.parameters.create(cost, seed=4)
    assert not second.state
    netc.train(cost, second, lambda: iter(data), netc.optimizer.Adam(0.01), batch_size=8)
    assert second.state.keys() == for_ref.state.keys()
    for k in ("fc2.weight", "fc2.weight.adam_m", "fc2.weight.adam_step", "bn.running_var"):
        _close(for_ref.tensors([k])[k], second.tensors([k])[k], k)


def test_shared_parameters_trained_in_turn_and_immutable_ones():
    """Two topologies sharing 'D.w' by name, trained one step each in turn (a GAN's pattern: one train call
    per step, the second with D immutable); the set's tensors are updated in place on either target."""
    rng = np.random.default_rng(2)
    xs, ys = rng.standard_normal((8, 4)).astype(np.float32), rng.standard_normal((8, 2)).astype(np.float32)

    def nets():
        a, b = L.data("a", [4]), L.data("b", [4])
        t1, t2 = L.data("t1", [2]), L.data("t2", [2])
        g = L.fc(b, 4, act="tanh", name="G")
        d1 = L.fc(a, 2, name="D1", param_name={"weight": "D.w", "bias": "D.b"})
        d2 = L.fc(g, 2, name="D2", param_name={"weight": "D.w", "bias": "D.b"})
        return L.euclidean(d1, t1, name="c1"), L.euclidean(d2, t2, name="c2")

    got = {}
    for target in ("reference", "cpu"):
        c1, c2 = nets()
        params = netc.parameters.create([c1, c2], seed=1)
        w = params["D.w"]
        sgd = netc.optimizer.SGD(0.1)
        for i in range(4):
            netc.train(c1, params, lambda: iter([[(xs[j], ys[j]) for j in range(4)]]), sgd, target=target)
            netc.train(c2, params, lambda: iter([[(xs[j], ys[j]) for j in range(4, 8)]]), sgd, target=target,
                       immutable_parameters=["D.*"])
        assert params["D.w"] is w
        got[target] = {k: params[k].clone() for k in params.names()}
    for k in got["reference"]:
        _close(got["reference"][k], got["cpu"][k], k)


def test_rank_cost_accuracy_reads_a_concatenation_the_step_does_not_run():
    """rank_cost's logits are a Concatenate written in place by its operands (an alias step): the CPU
    target computes them after the step from the captured operands, and the accuracy is the reference's."""
    rng = np.random.default_rng(3)
    data = [(a, b, int(a.sum() > b.sum())) for a, b in rng.standard_normal((24, 2, 5)).astype(np.float32)]

    def build():
        left, right, label = L.data("left", [5]), L.data("right", [5]), L.data("label", [], "i32")
        score = dict(size=1, param_name={"weight": "s.w", "bias": "s.b"})
        sl, sr = L.fc(left, name="sl", **score), L.fc(right, name="sr", **score)
        return L.rank_cost(sl, sr, label, name="rank"), sl

    runs = {}
    for target in ("reference", "cpu"):
        cost, _ = build()
        params = netc.parameters.create(cost, seed=0)
        accs = []
        netc.train(cost, params, lambda: iter(data), netc.optimizer.SGD(0.2), batch_size=8, target=target,
                   event_handler=lambda e: accs.append(e.metrics["accuracy"])
                   if isinstance(e, netc.event.EndIteration) else None)
        runs[target] = accs, netc.test(cost, params, lambda: iter(data), batch_size=12, target=target)
    assert runs["reference"][0] == runs["cpu"][0] and len(runs["cpu"][0]) == 3
    assert runs["reference"][1].metrics == runs["cpu"][1].metrics


def test_an_observer_sees_the_layers_the_reference_gives():
    data = _images(8, seed=5)
    seen = {}
    for target in ("reference", "cpu"):
        cost, _ = _convnet()
        params = netc.parameters.create(cost, seed=0)
        got = []
        netc.train(cost, params, lambda: iter(data), netc.optimizer.SGD(0.1), batch_size=8, target=target,
                   observe=lambda values, n: got.append({k: v.clone() for k, v in values.items()}))
        seen[target] = got[0]
    for k in ("x", "y", "conv", "bn", "pool", "fc1", "drop", "fc2", "cost"):
        _close(seen["reference"][k], seen["cpu"][k], k)


def test_a_sequence_network_trains_as_on_the_reference():
    """Word ids -> embedding -> LSTM -> last step and max over steps, and a GRU tagger at every step;
    batches padded to their longest sentence (each T its own program)."""
    dt = netc.data_type
    sentences = [([1, 5, 2], [0, 1, 2], 1), ([4, 4, 9, 9, 3], [1, 1, 0, 0, 0], 0), ([7], [2], 1)] * 4

    def build():
        words, tags, mood = (L.data("words", dt.integer_value_sequence(12)),
                             L.data("tags", dt.integer_value_sequence(3)), L.data("mood", dt.integer_value(2)))
        emb = L.embedding(words, 8, name="emb")
        h = L.lstm(emb, 6, name="h")
        sentence = L.concat([L.last_seq(h, name="last"), L.pooling(h, L.MaxPooling(), name="hmax")], axis=1)
        mood_cost = L.classification_cost(L.fc(sentence, 2, name="mood_fc"), mood, name="mood_cost")
        tag_fc = L.fc(L.gru(emb, 5, name="g"), 3, name="tag_fc")
        return [mood_cost, L.classification_cost(tag_fc, tags, name="tag_cost")], tag_fc

    runs = {}
    for target in ("reference", "cpu"):
        costs, tag_fc = build()
        params = netc.parameters.create(costs, seed=0)
        got = []
        netc.train(costs, params, lambda: iter(sentences), netc.optimizer.Adam(0.02), batch_size=4, num_passes=2,
                   target=target, event_handler=lambda e: got.append(e.cost)
                   if isinstance(e, netc.event.EndIteration) else None)
        runs[target] = got, netc.infer(tag_fc, params, [[1, 5, 2], [7]], target=target)
    assert len(runs["cpu"][0]) == 6
    _close(runs["reference"][0], runs["cpu"][0], "costs")
    for a, b in zip(runs["reference"][1], runs["cpu"][1]):
        _close(a, b, "tags")


def test_an_unknown_target_is_located():
    x, y = L.data("x", [3]), L.data("y", [], "i32")
    cost = L.softmax_loss(L.fc(x, 2), y)
    params = netc.parameters.create(cost)
    line = inspect.currentframe().f_lineno + 2
    with pytest.raises(netc.api.Error) as e:
        netc.infer(cost, params, [(np.zeros(3), 0)], target="gpu")
    assert f"test_api_cpu.py:{line}:9: error: unknown target 'gpu' (targets: cpu, reference, interp, cuda)" in str(e.value)


def test_programs_are_kept_across_calls_and_the_least_recently_used_go(monkeypatch):
    data = _images(8, seed=6)
    cost, _ = _convnet()
    params = netc.parameters.create(cost, seed=0)
    netc.train(cost, params, lambda: iter(data), netc.optimizer.SGD(0.1), batch_size=8)
    kept = dict(targets.KEPT)
    netc.train(cost, params, lambda: iter(data), netc.optimizer.SGD(0.1), batch_size=8)
    assert targets.KEPT == kept          # the same programs, none made again
    monkeypatch.setattr(targets, "KEPT_PROGRAMS", 1)
    other, _ = _convnet()
    netc.train(other, netc.parameters.create(other, seed=0), lambda: iter(data), netc.optimizer.SGD(0.1), batch_size=8)
    assert len(targets.KEPT) == 1 and not set(targets.KEPT) & set(kept)


def test_a_program_without_an_arena_runs_op_by_op(monkeypatch):
    """Where the generated step takes no arena (NoArena: a time-sized one, a plan it cannot make) the CPU target
    runs the ops one by one with its lowerings, in f32: training, test and infer still equal the reference."""
    from netc.runtime import cpu_step

    def no_arena(self, *a, **kw):
        raise cpu_step.NoArena("no arena (this test)")

    data = _images(12, seed=7)
    opt = lambda: netc.optimizer.Adam(0.01)     # noqa: E731
    ref = _run("reference", _convnet, data, opt, passes=1)
    monkeypatch.setattr(cpu_step.CpuProgram, "__init__", no_arena)
    targets.KEPT.clear()
    _compare(ref, _run("cpu", _convnet, data, opt, passes=1))
    kinds = [type(p).__name__ for _, p in targets.KEPT.values()]
    assert "CpuTraining" in kinds and "CpuForward" in kinds
    for _, p in targets.KEPT.values():       # each runs op by op
        assert (p.trainer.program if isinstance(p, targets.CpuTraining) else p.cpu_net) is None
