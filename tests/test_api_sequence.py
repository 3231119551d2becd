"""Sequences in the Python API (netc.api.sequence): id-sequence data, embedding, lstm / gru / recurrent,
last_seq / first_seq / pooling, fc at every step, per-step costs masked by the lengths the feeding
computes. A text classifier and a tagger train; the API's numbers equal the same network written as .nd
(netc.pipelines and the CLI, f64); padding never changes a result or a gradient; bad input is located."""
from __future__ import annotations

import inspect
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import netc
from netc.api import data_type as dt
from netc.pipelines import Options, Training, program
from netc.runtime.train import ReferenceTrainer

L = netc.layer
V, K = 13, 3          # vocabulary, tag classes
NETC = os.path.join(os.path.dirname(sys.executable), "netc")


def here() -> int:
    return inspect.currentframe().f_back.f_lineno


def _corpus(n, seed=0, lo=2, hi=9):
    """(ids, tags, label) samples of variable length: label 1 when id 3 occurs; the tag of a step is the
    previous id mod K (0 at the first step), which only a recurrent layer can know."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        ids = rng.integers(1, V, int(rng.integers(lo, hi)))
        if rng.random() < 0.5:
            ids[rng.integers(len(ids))] = 3
        tags = np.concatenate([[0], ids[:-1] % K])
        out.append((ids.tolist(), tags.tolist(), int((ids == 3).any())))
    return out


def _record(costs):
    return lambda ev: costs.append(ev.cost) if isinstance(ev, netc.event.EndPass) else None


def test_data_types_make_time_major_layers():
    w = L.data("w", dt.integer_value_sequence(V))
    v = L.data("v", type=dt.dense_vector_sequence(4))
    y = L.data("y", dt.integer_value(2))
    x = L.data("x", type=dt.dense_vector(5))
    assert (w.shape, w.dtype, w.seq is w) == ((1, 1), "i32", True) and w.shape_str() == "[T, ?]"
    assert (v.shape, v.dtype, v.seq is v) == ((1, 1, 4), "f32", True)
    assert (y.shape, y.dtype, y.seq) == ((1,), "i32", None) and (x.shape, x.dtype) == ((1, 5), "f32")
    e = L.embedding(w, 6)                            # the vocabulary: the id type's range, as PaddlePaddle's
    assert e.seq is w and e.shape_str() == "[T, ?, 6]" and e.param_shapes == {"table": (V, 6)}
    assert L.embedding(w, 6, num_embeddings=V + 2).param_shapes == {"table": (V + 2, 6)}
    with pytest.raises(netc.api.Error) as err:
        line = here() + 1
        L.embedding(w, 6, num_embeddings=V - 1)
    assert "num_embeddings 12 is less than the range of the ids of 'w' (integer_value_sequence(13))" in \
        _located(err.value, line)
    for h, roles in ((L.lstm(e, 7), 15), (L.gru(e, 7), 9), (L.recurrent(e, 7, act="relu"), 3)):
        assert h.seq is w and h.shape[2] == 7 and len(h.param_shapes) == roles
    pooled = L.last_seq(L.tanh(L.lstm(v, 3)))
    assert pooled.seq is None and pooled.shape == (1, 3)
    top = netc.Topology(L.classification_cost(L.fc(pooled, 2), y))
    assert [x.name for x in top.data_layers()] == ["v", "y"]      # the lengths input is no sample field
    assert "input v.lengths: i32[4]" in top.to_nd(batch=4, steps=6) and "input v: f32[6, 4, 4] { batch_axis: 1 }" in top.to_nd(4, steps=6)


def _classifier(pool="last"):
    w = L.data("words", dt.integer_value_sequence(V))
    y = L.data("label", dt.integer_value(2))
    h = L.lstm(L.embedding(w, 8, num_embeddings=V, name="emb"), 12, name="lstm")
    pooled = L.last_seq(h, name="last") if pool == "last" else L.pooling(h, L.MaxPooling(), name="max")
    out = L.fc(pooled, 2, name="out")
    return L.classification_cost(out, y, name="cost"), h, out


@pytest.mark.parametrize("pool", ["last", "max"])
def test_text_classifier_trains(pool):
    cost, h, out = _classifier(pool)
    params = netc.parameters.create(cost, seed=0)
    data = [(ids, label) for ids, _, label in _corpus(192)]
    costs = []
    netc.train(cost, params, lambda: iter(data), netc.optimizer.Adam(0.02), batch_size=32, num_passes=8,
               event_handler=_record(costs), threads=1)
    assert costs[-1] < 0.5 * costs[0], costs
    held = [(ids, label) for ids, _, label in _corpus(96, seed=1)]
    assert netc.test(cost, params, lambda: iter(held), batch_size=48).metrics["accuracy"] > 0.85
    # infer: a sequence output is each sample's valid steps
    seqs = [held[i][0] for i in range(3)]
    r = netc.infer([h, out], params, seqs)
    assert [a.shape for a in r["lstm"]] == [(len(s), 12) for s in seqs] and r["out"].shape == (3, 2)
    by_name = netc.infer(out, params, {"words": seqs}, batch_size=2)        # {data layer: samples}, in 2 batches
    np.testing.assert_allclose(by_name, r["out"], rtol=1e-6, atol=1e-7)


def _tagger():
    w = L.data("words", dt.integer_value_sequence(V))
    tags = L.data("tags", dt.integer_value_sequence(K))
    g = L.gru(L.embedding(w, 8, num_embeddings=V, name="emb"), 12, name="gru")
    scores = L.fc(g, K, act="softmax", name="tagger")
    return L.classification_cost(scores, tags, name="tag_cost"), scores


def test_tagger_trains_on_the_valid_steps():
    cost, scores = _tagger()
    assert scores.name == "tagger.prob" and cost.inputs[0].name == "tagger" and cost.inputs[2].name == "words.lengths"
    params = netc.parameters.create(cost, seed=0)
    assert sorted(params)[-2:] == ["tagger.bias", "tagger.weight"]     # a plain fc's names
    data = [(ids, tags) for ids, tags, _ in _corpus(192)]
    costs = []
    netc.train(cost, params, lambda: iter(data), netc.optimizer.Adam(0.03), batch_size=32, num_passes=8,
               event_handler=_record(costs), threads=1)
    assert costs[-1] < 0.5 * costs[0], costs
    held = [(ids, tags) for ids, tags, _ in _corpus(64, seed=2)]
    probs = netc.infer(scores, params, [ids for ids, _ in held])
    right = sum(int((p.argmax(1) == np.array(t)).sum()) for p, (_, t) in zip(probs, held))
    assert right / sum(len(t) for _, t in held) > 0.8
    np.testing.assert_allclose([p.sum(1) for p in probs][0], 1.0, rtol=1e-6)


# -- the same network as .nd, f64 ------------------------------------------------------------------

def _joint():
    """A classifier and a tagger over one embedding: every sequence builder the API has."""
    w = L.data("words", dt.integer_value_sequence(V))
    tags = L.data("tags", dt.integer_value_sequence(K))
    y = L.data("label", dt.integer_value(2))
    e = L.embedding(w, 5, num_embeddings=V, name="emb")
    h = L.lstm(e, 6, name="lstm")
    r = L.recurrent(e, 3, act="sigmoid", name="rnn")
    pooled = L.concat([L.last_seq(h, name="last"), L.pooling(h, L.AvgPooling(), name="mean"),
                       L.first_seq(r, name="first"), L.pooling(r, name="max")], axis=1, name="both")
    cls = L.classification_cost(L.fc(pooled, 2, name="cls"), y, name="cls_cost")
    scores = L.fc(L.gru(e, 4, name="gru"), K, act="softmax", name="tagger")
    return netc.Topology([cls, L.classification_cost(scores, tags, name="tag_cost")], name="joint")


ND = """
network joint {{
  input words: i32[{T}, {B}]
  input lengths: i32[{B}]
  input tags: i32[{T}, {B}]
  input label: i32[{B}]
  emb = Embedding(words) {{ num_embeddings: {V}, dim: 5 }}
  lstm = Lstm(emb) {{ size: 6 }}
  rnn = Recurrent(emb) {{ size: 3, activation: sigmoid }}
  last = SequencePool(lstm, lengths) {{ mode: last }}
  mean = SequencePool(lstm, lengths) {{ mode: mean }}
  first = SequencePool(rnn, lengths) {{ mode: first }}
  max = SequencePool(rnn, lengths) {{ mode: max }}
  both = Concatenate(last, mean, first, max) {{ dim: 1 }}
  cls = InnerProduct(both) {{ num_outputs: 2 }}
  cls_cost = SoftmaxLoss(cls, label)
  gru = GRU(emb) {{ dim_hidden: 4 }}
  rows = Reshape(gru) {{ output_shape: [{TB}, 4] }}
  scores = InnerProduct(rows) {{ num_outputs: {K} }}
  per_step = Reshape(scores) {{ output_shape: [{T}, {B}, {K}] }}
  tag_cost = SoftmaxLoss(per_step, tags, lengths)
  output cls_cost, tag_cost
}}
"""
def _cli_run(nd, tmp_path):
    """netc run NET --reference in f64 on tmp_path's in.npz and p.npz, writing out.npz."""
    r = subprocess.run([NETC, "run", str(nd), "--reference", "--dtype", "f64", "--inputs", str(tmp_path / "in.npz"),
                        "--params", str(tmp_path / "p.npz"), "-o", str(tmp_path / "out.npz")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


RENAMED = {"tagger.weight": "scores.weight", "tagger.bias": "scores.bias"}


def _padded(batch, pad=0):
    """The .nd network's inputs, padded by hand (pad: the value of the padding steps)."""
    t = max(len(ids) for ids, _, _ in batch)
    words = np.full((t, len(batch)), pad, np.int32)
    tags = np.full((t, len(batch)), pad % K, np.int32)
    for b, (ids, tg, _) in enumerate(batch):
        words[:len(ids), b], tags[:len(tg), b] = ids, tg
    return {"words": words, "lengths": np.array([len(s[0]) for s in batch], np.int32), "tags": tags,
            "label": np.array([s[2] for s in batch], np.int32)}


def test_the_api_equals_the_network_written_as_nd_in_f64(tmp_path):
    top = _joint()
    params = netc.parameters.create(top, seed=3, dtype=torch.float64)
    batch = _corpus(6, seed=4)
    feed = _padded(batch)
    t, b = feed["words"].shape
    nd = tmp_path / "joint.nd"
    nd.write_text(ND.format(T=t, B=b, TB=t * b, V=V, K=K))
    nd_params = {RENAMED.get(k, k): v.clone() for k, v in params.items()}
    before = {k: v.clone() for k, v in params.items()}

    # the CLI's forward pass on the .nd, the API's on the topology
    np.savez(tmp_path / "in.npz", **feed)
    np.savez(tmp_path / "p.npz", **{k: v.numpy() for k, v in nd_params.items()})
    _cli_run(nd, tmp_path)
    cli = np.load(tmp_path / "out.npz")
    api = netc.infer(top, params, batch, target="reference")
    for k in ("cls_cost", "tag_cost"):
        assert abs(float(cli[k]) - float(api[k])) < 1e-12, (k, float(cli[k]), float(api[k]))

    # one SGD step: netc.pipelines' training program of the .nd against netc.train
    from netc.frontend import load
    module = load(str(nd))
    program(module, Options(training=Training(optimizer=netc.optimizer.SGD(0.5).options)))
    tr = ReferenceTrainer(module, None, nd_params, dtype=torch.float64)
    named = tr.step({k: torch.as_tensor(v) for k, v in feed.items()}, lr=0.5)
    costs = []
    netc.train(top, params, lambda: iter(batch), netc.optimizer.SGD(0.5), batch_size=len(batch), target="reference",
               event_handler=lambda ev: costs.append(ev.cost) if isinstance(ev, netc.event.EndIteration) else None)
    assert abs(costs[0] - float(named["cls_cost"]) - float(named["tag_cost"])) < 1e-12
    assert len(params) == len(nd_params) == 32     # emb 1, lstm 15, rnn 3, gru 9, cls 2, tagger 2
    for k, v in params.items():
        torch.testing.assert_close(v, tr.params[RENAMED.get(k, k)], rtol=0, atol=1e-12, msg=k)
        assert not torch.equal(v, before[k]), f"{k} did not move"


# -- padding -------------------------------------------------------------------------------------------

def _step_values(top, feed, params, t, b):
    """Every value of one gradient step (losses, gradients) of `top` on `feed`, f64."""
    module = top.module(b, Training(gradients_only=True), steps=t)
    tr = ReferenceTrainer(module, None, {k: v.clone() for k, v in params.items()}, dtype=torch.float64)
    return tr.step(feed, lr=0.1)


def test_padding_changes_no_output_and_no_gradient():
    top = _joint()
    params = netc.parameters.create(top, seed=5, dtype=torch.float64)
    batch = _corpus(5, seed=6, lo=1, hi=7)
    feeder = netc.api.trainer.Feeder(top)
    feed = feeder(batch)
    t, b = feeder.steps, len(batch)
    lengths = feed["words.lengths"].numpy()
    assert t == max(len(s[0]) for s in batch) and lengths.tolist() == [len(s[0]) for s in batch] and lengths.min() < t
    pad = torch.as_tensor(np.arange(t)[:, None] >= lengths[None, :])
    other = dict(feed)
    other["words"] = feed["words"].masked_fill(pad, V - 1)
    other["tags"] = feed["tags"].masked_fill(pad, K - 1)
    assert not torch.equal(other["words"], feed["words"])
    a, z = _step_values(top, feed, params, t, b), _step_values(top, other, params, t, b)
    grads = [k for k in a if k.endswith(".grad") and k[:-5] in params]
    assert len(grads) == len(params)
    for k in ["cls_cost", "tag_cost"] + grads:
        torch.testing.assert_close(a[k], z[k], rtol=0, atol=1e-13, msg=k)
    # the lengths matter: every sample read as T steps long gives other losses
    full = dict(feed, **{"words.lengths": torch.full((b,), t)})
    assert abs(float(_step_values(top, full, params, t, b)["tag_cost"]) - float(a["tag_cost"])) > 1e-6
    # and a batch padded further (a longer neighbour) leaves a sample's results alone
    outs = [top.layer("last"), top.layer("tagger")]
    lone = netc.infer(outs, params, [batch[0][0]], target="reference")
    long = netc.infer(outs, params, [batch[0][0], list(range(1, 12))], target="reference")
    assert len(long["tagger"][1]) == 11 and len(long["tagger"][0]) == len(batch[0][0])
    np.testing.assert_allclose(long["last"][0], lone["last"][0], rtol=0, atol=1e-13)
    np.testing.assert_allclose(long["tagger"][0], lone["tagger"][0], rtol=0, atol=1e-13)


# -- bad input, located ----------------------------------------------------------------------------

def _located(e, line):
    text = str(e)
    assert f"test_api_sequence.py:{line}:" in text and "^" in text, text
    return text


def test_a_sequence_longer_than_max_len_is_located():
    w = L.data("words", dt.integer_value_sequence(V, max_len=4)); line_w = here()
    y = L.data("label", dt.integer_value(2))
    cost = L.classification_cost(L.fc(L.last_seq(L.lstm(L.embedding(w, 3, num_embeddings=V), 4)), 2), y)
    params = netc.parameters.create(cost)
    data = [([1, 2], 0), ([1, 2, 3, 4, 5], 1)]
    with pytest.raises(netc.api.Error) as e:
        line = here() + 1
        netc.train(cost, params, lambda: iter(data), batch_size=2)
    text = _located(e.value, line)
    assert "sample 1 for the sequence data layer 'words' (integer_value_sequence(13, max_len=4)) has 5 steps, more " \
           "than its max_len 4" in text and f":{line_w}:" in text


def test_ids_out_of_range_are_located():
    cost, _, _ = _classifier()
    params = netc.parameters.create(cost)
    with pytest.raises(netc.api.Error) as e:
        line = here() + 1
        netc.train(cost, params, lambda: iter([([1, 2, 13], 0), ([4], 1)]), batch_size=2)
    assert ("'words' (integer_value_sequence(13)): id 13 at sample 0, step 2 is outside 0 to 12"
            in _located(e.value, line))
    with pytest.raises(netc.api.Error) as e:
        line = here() + 1
        netc.train(cost, params, lambda: iter([([1, 2], 0), ([4], 2)]), batch_size=2)
    assert "'label' (integer_value(2)): id 2 at sample 1 is outside 0 to 1" in _located(e.value, line)
    with pytest.raises(netc.api.Error) as e:
        line = here() + 1
        netc.train(cost, params, lambda: iter([([1, 2.5], 0), ([4], 1)]), batch_size=2)
    assert "must hold integers" in _located(e.value, line)
    with pytest.raises(netc.api.Error) as e:
        line = here() + 1
        netc.train(cost, params, lambda: iter([([], 0), ([4], 1)]), batch_size=2)
    assert ("sample 0 for the sequence data layer 'words' (integer_value_sequence(13)) is empty"
            in _located(e.value, line))


def test_builders_refuse_what_is_not_a_sequence_located():
    v = L.data("frames", dt.dense_vector_sequence(4))
    with pytest.raises(netc.api.Error) as e:
        line = here() + 1
        L.embedding(v, 8, num_embeddings=V)
    assert "embedding of a sequence looks up integer ids" in _located(e.value, line)
    x = L.data("x", dt.dense_vector(4))
    with pytest.raises(netc.api.Error) as e:
        line = here() + 1
        L.lstm(x, 3)
    assert "lstm runs over a sequence" in _located(e.value, line)
    with pytest.raises(netc.api.Error) as e:
        line = here() + 1
        L.classification_cost(L.fc(L.gru(v, 3), K), L.data("y", dt.integer_value(K)))
    assert "its label is a sequence too" in _located(e.value, line)
    with pytest.raises(netc.api.Error) as e:
        line = here() + 1
        L.pooling(L.lstm(v, 3), L.AvgPooling("sum"))
    assert "'average' strategy only" in _located(e.value, line)
    with pytest.raises(netc.api.Error) as e:
        line = here() + 1
        L.data("w", dt.integer_value_sequence(V), batch_size=4)
    assert "takes its batch from the feeding" in _located(e.value, line)


def test_steps_read_together_must_have_equal_lengths():
    cost, _ = _tagger()
    params = netc.parameters.create(cost)
    with pytest.raises(netc.api.Error) as e:
        line = here() + 1
        netc.train(cost, params, lambda: iter([([1, 2, 3], [0, 1, 2]), ([4, 5], [1])]), batch_size=2)
    assert "sample 1: sequence 'words' has 2 steps and 'tags' 1" in _located(e.value, line)


def test_to_nd_writes_a_network_netc_runs(tmp_path):
    """to_nd at a given T and B: the CLI runs the file and its losses are the API's (f64)."""
    top = _joint()
    params = netc.parameters.create(top, seed=1, dtype=torch.float64)
    batch = [(ids, tags, label) for ids, tags, label in _corpus(3, seed=7) if len(ids) < 5]
    batch.append((list(range(1, 6)), [0, 1, 2, 0, 1], 1))           # T = 5
    path = tmp_path / "j.nd"
    path.write_text(top.to_nd(batch=len(batch), steps=5))
    feed = netc.api.trainer.Feeder(top)(batch)
    np.savez(tmp_path / "in.npz", **{k: v.numpy() for k, v in feed.items()})
    np.savez(tmp_path / "p.npz", **{k: v.numpy() for k, v in params.items()})
    _cli_run(path, tmp_path)
    cli, api = np.load(tmp_path / "out.npz"), netc.infer(top, params, batch, target="reference")
    assert set(api) == {"cls_cost", "tag_cost"}
    for k in api:
        assert abs(float(cli[k]) - float(api[k])) < 1e-12


def test_a_per_step_square_error_cost_reads_the_valid_steps_only():
    """square_error_cost of a sequence against a vector sequence: 0.5 * the squares summed over the valid
    steps / their count (the mean over steps of PaddlePaddle's per-step cost), computed here from infer's
    per-sample outputs; a pass of SGD lowers it."""
    frames = L.data("frames", dt.dense_vector_sequence(3))
    target = L.data("target", dt.dense_vector_sequence(2))
    pred = L.fc(L.recurrent(frames, 5, name="rnn"), 2, name="pred")
    cost = L.square_error_cost(pred, target, name="mse")
    assert cost.inputs[2].name == "frames.lengths"
    params = netc.parameters.create(cost, seed=0, dtype=torch.float64)
    rng = np.random.default_rng(0)
    data = []
    for n in (3, 1, 5, 2):
        x = rng.normal(size=(n, 3))
        data.append((x, np.cumsum(x[:, :2], 0) * 0.3))
    preds = netc.infer(pred, params, [x for x, _ in data], target="reference")
    want = 0.5 * sum(((p - y) ** 2).sum() for p, (_, y) in zip(preds, data)) / sum(len(y) for _, y in data)
    got = float(netc.infer(cost, params, data, target="reference"))
    assert abs(got - want) < 1e-12
    netc.train(cost, params, lambda: iter(data), netc.optimizer.SGD(0.05), batch_size=4, num_passes=20)
    assert float(netc.infer(cost, params, data)) < 0.8 * got
