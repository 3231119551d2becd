"""netc.v2's optimizer.ModelAverage (docs/v2.md): PaddlePaddle's AverageOptimizer window rule checked
against windows worked out by hand from paddle/parameter/AverageOptimizer.{h,cpp} -- the tar file that
save_parameter_to_tar writes holds the mean of the raw values after the updates of the current and the
previous window, while training and test go on with the raw values, exactly as without the average."""
from __future__ import annotations

import io

import numpy as np
import pytest

import netc.v2 as paddle
from netc.api.errors import Error


def linear_net(tag):
    x = paddle.layer.data(name=f"{tag}_x", type=paddle.data_type.dense_vector(3))
    t = paddle.layer.data(name=f"{tag}_t", type=paddle.data_type.dense_vector(2))
    y = paddle.layer.fc(input=x, size=2, act=paddle.activation.Linear(), bias_attr=False, name=f"{tag}_fc")
    return paddle.layer.square_error_cost(input=y, label=t)


def batches(n, seed=0):
    rng = np.random.RandomState(seed)
    return [[(rng.randn(3), rng.randn(2)) for _ in range(4)] for _ in range(n)]


def run(tag, data, passes, average=None):
    """Train `passes` passes over `data`; after every update, the raw weight and the tar file's weight."""
    cost = linear_net(tag)
    params = paddle.parameters.create(cost)
    params[f"_{tag}_fc.w0"] = np.arange(6.0).reshape(3, 2) / 10
    opt = paddle.optimizer.Momentum(momentum=0, learning_rate=0.05, model_average=average)
    trainer = paddle.trainer.SGD(cost=cost, parameters=params, update_equation=opt)
    raw, saved = [], []

    def on_event(e):
        if isinstance(e, paddle.event.EndIteration):
            raw.append(params[f"_{tag}_fc.w0"].astype(np.float64))
            f = io.BytesIO()
            trainer.save_parameter_to_tar(f)
            f.seek(0)
            saved.append(paddle.parameters.Parameters.from_tar(f)[f"_{tag}_fc.w0"])
            np.testing.assert_array_equal(params[f"_{tag}_fc.w0"], raw[-1])      # restored after writing
    trainer.train(lambda: iter(data), num_passes=passes, event_handler=on_event,
                  feeding={f"{tag}_x": 0, f"{tag}_t": 1})
    test = trainer.test(lambda: iter(data), feeding={f"{tag}_x": 0, f"{tag}_t": 1})
    return raw, saved, test.cost


def mean_of(raw, first, last):
    """The mean of the raw values after updates first..last (1-based, inclusive)."""
    return np.mean(raw[first - 1:last], axis=0)


def test_model_average_windows_without_a_maximum():
    """average_window 0.5, passes of 3 updates. Pass 1: min window 10000, so no window ends: updates 1..k.
    At its end max window = 3 (the pass's updates), min window = 3. Update 4: 4 accumulated >= 3 and >=
    min(3, 4 * 0.5) -> a new window starts (the old one 1..4): 5 is 1..5, 6 is 1..6. Update 7: 3
    accumulated (5..7) >= min(3, 3.5) -> the old window 5..7, the new empty: 7 is 5..7; 8 is 5..8."""
    raw, saved, _ = run("ma1", batches(3), 3, paddle.optimizer.ModelAverage(average_window=0.5))
    want = [(1, 1), (1, 2), (1, 3), (1, 4), (1, 5), (1, 6), (5, 7), (5, 8), (5, 9)]
    assert len(saved) == len(want)
    for k, (a, b) in enumerate(want):
        np.testing.assert_allclose(saved[k], mean_of(raw, a, b), rtol=1e-6, atol=1e-7, err_msg=f"update {k + 1}")
    assert not np.allclose(saved[-1], raw[-1])


def test_model_average_windows_with_a_maximum():
    """max_average_window 2: min window min(10000, 2) = 2, max 2. Update 2: 2 >= 2 and >= min(2, 1) -> the old
    window 1..2; 3 is 1..3; update 4 ends the window 3..4; 5 is 3..5; 6 ends 5..6."""
    raw, saved, _ = run("ma2", batches(6), 1, paddle.optimizer.ModelAverage(average_window=0.5, max_average_window=2))
    want = [(1, 1), (1, 2), (1, 3), (3, 4), (3, 5), (5, 6)]
    for k, (a, b) in enumerate(want):
        np.testing.assert_allclose(saved[k], mean_of(raw, a, b), rtol=1e-6, atol=1e-7, err_msg=f"update {k + 1}")


def test_training_and_test_use_the_raw_values():
    """The same run without the average: the same raw values after every update, the same test cost
    (PaddlePaddle's v2 trainer tests with the raw values; only save_parameter_to_tar applies the average);
    the tar file without an average holds the raw values."""
    data = batches(3, seed=1)
    raw_a, _, cost_a = run("ma3", data, 2, paddle.optimizer.ModelAverage(average_window=0.5))
    raw_b, saved_b, cost_b = run("ma4", data, 2)
    np.testing.assert_allclose(np.array(raw_a), np.array(raw_b), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.array(saved_b), np.array(raw_b), rtol=1e-6)
    assert cost_a == pytest.approx(cost_b, rel=1e-6)


@pytest.mark.parametrize("kw,says", [({"average_window": 0}, "average_window is a positive number"),
                                     ({"average_window": 0.5, "max_average_window": 0}, "max_average_window")])
def test_bad_model_average_is_refused(kw, says):
    with pytest.raises(Error, match=says):
        paddle.optimizer.ModelAverage(**kw)
    with pytest.raises(Error, match="model_average is paddle.optimizer.ModelAverage"):
        paddle.optimizer.Momentum(model_average=0.5)
