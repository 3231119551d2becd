"""netc.v2's paddle.evaluator (docs/v2.md): classification_error (top-k, weighted), auc, precision_recall
and sum, reported in trainer.test's metrics and in the training events under PaddlePaddle's names, each
checked against the same statistic computed here by hand (numpy) from what paddle.infer gives for the
same samples: the error rate, AUC as the probability that a positive scores above a negative, the
per-class counts of precision and recall, the per-sample sum. EndIteration's values are the batch's
(from the parameters before its update), EndPass's the pass's."""
from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

import netc.v2 as paddle
from netc.api.errors import Error


def classifier(tag, classes=3):
    x = paddle.layer.data(name=f"{tag}_x", type=paddle.data_type.dense_vector(4))
    lbl = paddle.layer.data(name=f"{tag}_y", type=paddle.data_type.integer_value(classes))
    w = paddle.layer.data(name=f"{tag}_w", type=paddle.data_type.dense_vector(1))
    prob = paddle.layer.fc(input=x, size=classes, act=paddle.activation.Softmax(), name=f"{tag}_fc")
    cost = paddle.layer.classification_cost(input=prob, label=lbl)
    return x, lbl, w, prob, cost


def samples(n, classes=3, seed=0):
    rng = np.random.RandomState(seed)
    return [(rng.randn(4), int(rng.randint(classes)), [float(rng.uniform(0.5, 2))]) for _ in range(n)]


def hand_error(prob, labels, weights=None, k=1):
    top = np.argsort(-prob, axis=1)[:, :k]
    wrong = ~(top == np.asarray(labels)[:, None]).any(axis=1)
    w = np.ones(len(labels)) if weights is None else np.asarray(weights)
    return float((wrong * w).sum() / w.sum())


def test_classification_error_top_k_and_weights_in_test_metrics():
    x, lbl, w, prob, cost = classifier("ce")
    e1 = paddle.evaluator.classification_error(input=prob, label=lbl)
    e2 = paddle.evaluator.classification_error(input=prob, label=lbl, top_k=2, name="top2")
    e3 = paddle.evaluator.classification_error(input=prob, label=lbl, weight=w, name="weighted")
    params = paddle.parameters.create(cost)
    alone = paddle.trainer.SGD(cost=cost, parameters=params, update_equation=paddle.optimizer.Momentum())
    assert alone.evaluators == [e1, e2]         # the weight is no layer of its topology (PaddlePaddle's rule)
    trainer = paddle.trainer.SGD(cost=cost, parameters=params, update_equation=paddle.optimizer.Momentum(),
                                 extra_layers=[w])
    data = samples(23)
    feeding = {"ce_x": 0, "ce_y": 1, "ce_w": 2}
    result = trainer.test(paddle.batch(lambda: iter(data), 5), feeding=feeding)
    p = paddle.infer(output_layer=prob, parameters=params, input=[(s[0],) for s in data], feeding={"ce_x": 0})
    labels, weights = [s[1] for s in data], [s[2][0] for s in data]
    assert re.fullmatch(r"__classification_error_evaluator_\d+__", e1.name)
    assert (e2.name, e3.name) == ("top2", "weighted")
    assert result.metrics[e1.name] == pytest.approx(hand_error(p, labels), abs=1e-12)
    assert result.metrics["top2"] == pytest.approx(hand_error(p, labels, k=2), abs=1e-12)
    # the weights are fed as float32
    assert result.metrics["weighted"] == pytest.approx(hand_error(p, labels, weights), rel=1e-6)
    assert result.metrics["classification_error_evaluator"] == pytest.approx(hand_error(p, labels), abs=1e-9)
    assert result.metrics["top2"] < result.metrics[e1.name]


def test_training_events_report_the_batch_and_the_pass():
    """EndIteration: the error of the batch's samples under the parameters before the update (inferred
    at BeginIteration); EndPass: over every sample of the pass."""
    x, lbl, w, prob, cost = classifier("ev")
    ev = paddle.evaluator.classification_error(input=prob, label=lbl, name="err")
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost=cost, parameters=params,
                                 update_equation=paddle.optimizer.Momentum(learning_rate=0.5))
    data = samples(12, seed=1)
    chunks = [data[:5], data[5:10], data[10:]]
    want, got, wrong = [], [], []

    def on_event(e):
        if isinstance(e, paddle.event.BeginIteration):
            chunk = chunks[e.batch_id]
            p = paddle.infer(output_layer=prob, parameters=params, input=[(s[0],) for s in chunk],
                             feeding={"ev_x": 0})
            want.append(hand_error(p, [s[1] for s in chunk]))
            wrong.append(want[-1] * len(chunk))
        if isinstance(e, paddle.event.EndIteration):
            got.append(e.metrics["err"])
        if isinstance(e, paddle.event.EndPass):
            assert e.metrics["err"] == pytest.approx(sum(wrong) / len(data), abs=1e-12)
    trainer.train(lambda: iter(chunks), event_handler=on_event, feeding={"ev_x": 0, "ev_y": 1})
    assert ev.name == "err" and got == pytest.approx(want, abs=1e-12) and len(got) == 3


def hand_auc(score, labels):
    pos, neg = score[labels != 0], score[labels == 0]
    return float(((pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])).mean())


def test_auc_precision_recall_and_sum():
    x, lbl, w, prob, cost = classifier("ap", classes=2)
    a = paddle.evaluator.auc(input=prob, label=lbl, name="auc")
    pr = paddle.evaluator.precision_recall(input=prob, label=lbl, name="pr")
    pr1 = paddle.evaluator.precision_recall(input=prob, label=lbl, positive_label=1, name="pr1")
    s = paddle.evaluator.sum(input=prob, weight=w, name="sum")
    params = paddle.parameters.create(cost)
    params["_ap_fc.w0"] = np.random.RandomState(3).randn(4, 2)
    trainer = paddle.trainer.SGD(cost=cost, parameters=params, update_equation=paddle.optimizer.Momentum(),
                                 extra_layers=[w])
    data = samples(40, classes=2, seed=2)
    m = trainer.test(paddle.batch(lambda: iter(data), 7), feeding={"ap_x": 0, "ap_y": 1, "ap_w": 2}).metrics
    p = paddle.infer(output_layer=prob, parameters=params, input=[(d[0],) for d in data], feeding={"ap_x": 0})
    labels, weights = np.array([d[1] for d in data]), np.array([d[2][0] for d in data])
    assert m["auc"] == pytest.approx(hand_auc(p[:, 1], labels), abs=1e-6)
    guess = p.argmax(1)
    tp = np.array([((guess == k) & (labels == k)).sum() for k in range(2)])
    fp = np.array([((guess == k) & (labels != k)).sum() for k in range(2)])
    fn = np.array([((guess != k) & (labels == k)).sum() for k in range(2)])
    prec, rec = tp / (tp + fp), tp / (tp + fn)
    assert m["pr1.precision"] == pytest.approx(prec[1]) and m["pr1.recal"] == pytest.approx(rec[1])
    assert m["pr1.F1-score"] == pytest.approx(2 * prec[1] * rec[1] / (prec[1] + rec[1]))
    mp, mr = prec.mean(), rec.mean()
    assert m["pr.macro-average-precision"] == pytest.approx(mp) and m["pr.macro-average-recall"] == pytest.approx(mr)
    assert m["pr.macro-average-F1-score"] == pytest.approx(2 * mp * mr / (mp + mr))
    assert m["pr.micro-average-precision"] == pytest.approx(tp.sum() / (tp.sum() + fp.sum()))
    assert m["sum"] == pytest.approx(weights.sum() / weights.sum(), rel=1e-6)       # softmax rows sum to 1
    assert a.name == "auc" and s.name == "sum" and pr.name == "pr"


def test_sum_of_a_layer_and_default_names():
    x = paddle.layer.data(name="sm_x", type=paddle.data_type.dense_vector(3))
    t = paddle.layer.data(name="sm_t", type=paddle.data_type.dense_vector(2))
    y = paddle.layer.fc(input=x, size=2, act=paddle.activation.Linear(), name="sm_fc")
    cost = paddle.layer.square_error_cost(input=y, label=t)
    e = paddle.evaluator.sum(input=y)
    assert re.fullmatch(r"__sum_evaluator_\d+__", e.name)
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost=cost, parameters=params, update_equation=paddle.optimizer.Momentum())
    rng = np.random.RandomState(5)
    data = [(rng.randn(3), rng.randn(2)) for _ in range(9)]
    m = trainer.test(paddle.batch(lambda: iter(data), 4)).metrics
    out = paddle.infer(output_layer=y, parameters=params, input=[(d[0],) for d in data], feeding={"sm_x": 0})
    assert m[e.name] == pytest.approx(out.sum() / len(data), rel=1e-6)


def test_evaluator_refusals_are_located(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text("import netc.v2 as paddle\n"
                    "x = paddle.layer.data(name='x', type=paddle.data_type.dense_vector(3))\n"
                    "p = paddle.layer.fc(input=x, size=2, act=paddle.activation.Softmax())\n"
                    "e = paddle.evaluator.auc(input=p, label=x)\n")
    r = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode != 0 and re.search(r"prog\.py:4:5: error: .*no integer_value data layer", r.stderr), r.stderr
    seq = paddle.layer.embedding(input=paddle.layer.data(name="rf_s", type=paddle.data_type.integer_value_sequence(5)),
                                 size=2)
    with pytest.raises(Error, match="is a sequence"):
        paddle.evaluator.sum(input=seq)
    with pytest.raises(Error, match="weight 'rf_w' is one value per sample"):
        paddle.evaluator.sum(input=paddle.layer.data(name="rf_v", type=paddle.data_type.dense_vector(2)),
                             weight=paddle.layer.data(name="rf_w", type=paddle.data_type.dense_vector(2)))
    with pytest.raises(Error, match="chunk"):
        paddle.evaluator.chunk  # noqa: B018
    with pytest.raises(Error, match="top_k is a positive integer"):
        paddle.evaluator.classification_error(
            input=paddle.layer.data(name="rf_x", type=paddle.data_type.dense_vector(2)),
            label=paddle.layer.data(name="rf_y", type=paddle.data_type.integer_value(2)), top_k=0)


def test_auc_counts_a_tie_as_half():
    """Scores in one of PaddlePaddle's bins count half a pair (the trapezoid): positives {0.2, 0.9},
    negatives {0.2, 0.7}: (0.5 + 0 + 1 + 1) / 4; weights weigh the pairs; a score above 1 is refused."""
    import torch
    s = paddle.layer.data(name="tie_s", type=paddle.data_type.dense_vector(1))
    y = paddle.layer.data(name="tie_y", type=paddle.data_type.integer_value(2))
    a = paddle.evaluator.auc(input=s, label=y)
    stats = a.start()
    a.add(stats, {"tie_s": torch.tensor([[0.2], [0.2], [0.7], [0.9]]), "tie_y": torch.tensor([0, 1, 0, 1])}, 4)
    assert a.metrics(stats)[a.name] == pytest.approx(2.5 / 4)
    with pytest.raises(Error, match="outside \\[0, 1\\]"):
        a.add(stats, {"tie_s": torch.tensor([[1.5]]), "tie_y": torch.tensor([1])}, 1)
