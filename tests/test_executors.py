"""Every executor declares the one interface of netc/runtime/executor.py (Executor: set_params,
get_params, run; TrainingExecutor: set_params, get_params, train_step), and code written against it
works with any of them: the same network through the reference executor, the planned arenas and the
interpreter target gives the same outputs for the same parameters; the reference, planned and
interpreter trainers take the same steps; parameters go in and come out by name alike."""
from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"   # fixed when netc.kernels is imported: set at collection

import pytest  # noqa: E402
import torch  # noqa: E402

from netc.diagnostics import NetcError  # noqa: E402
from netc.frontend.dsl import parse_nd  # noqa: E402
from netc.pipelines import Options, Training, inference, training  # noqa: E402
from netc.runtime.executor import Executor, TrainingExecutor, compare_executors  # noqa: E402

NET = """network small {
  input data: f32[2, 8, 8, 3]
  conv1 = Convolution(data) { filter: [3, 3, 3, 4], padding: SAME, activation: relu }
  pool1 = Pooling(conv1) { ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1] }
  ip1 = InnerProduct(pool1) { num_outputs: 5 }
  prob = Softmax(ip1)
  input label: i32[2]
  loss = SoftmaxLoss(ip1, label)
  output prob, loss
}
"""


@pytest.fixture(scope="module", autouse=True)
def _interp(interp_mode):
    """The interpreter executors run the kernels under Triton's interpreter (tests/conftest.py)."""


def _inference_module():
    m = parse_nd(NET, "small.nd")
    inference(m, Options(phase="test"))
    return m


def _training_module():
    m = parse_nd(NET, "small.nd")
    training(m, Options(training=Training(optimizer={"name": "momentum"})))
    return m


def _inputs(seed=3):
    g = torch.Generator().manual_seed(seed)
    return {"data": torch.randn(2, 8, 8, 3, generator=g), "label": torch.tensor([1, 4], dtype=torch.int32)}


def _inference_executors():
    from netc.runtime.interp import InterpProgram
    from netc.runtime.planned import PlannedProgram
    from netc.runtime.reference import ReferenceExecutor
    from netc.memory import plan_memory
    ref = ReferenceExecutor(_inference_module(), seed=1)
    m = _inference_module()
    net = m.networks()[0]
    planned = PlannedProgram(m, net, plan_memory(m, net, mode="inference"), torch.float64)
    interp = InterpProgram(_inference_module(), blocks="large")
    return ref, planned, interp


def test_inference_executors_declare_the_interface_and_agree():
    ref, planned, interp = _inference_executors()
    for e in (ref, planned, interp):
        assert isinstance(e, Executor), type(e).__name__
    params = ref.get_params()
    assert set(params) == {"conv1.weight", "conv1.bias", "ip1.weight", "ip1.bias"}
    # the same parameters through set_params, the same inputs: the same outputs
    for other, tol in ((planned, 1e-6), (interp, 1e-4)):     # (both store f32 tensors in their arenas)
        errs = compare_executors(ref, other, _inputs(), params)
        assert set(errs) == {"prob", "loss"} and max(errs.values()) < tol, (type(other).__name__, errs)
    # get_params returns what set_params put, by name, as copies
    got = interp.get_params()
    assert all(torch.allclose(got[k].double(), params[k], atol=1e-6) for k in params)
    got["ip1.bias"] += 1
    assert torch.allclose(interp.get_params()["ip1.bias"].double(), params["ip1.bias"], atol=1e-6)


def test_a_wrong_parameter_or_a_wrong_executor_is_caught():
    ref, planned, interp = _inference_executors()
    with pytest.raises(NetcError, match="no parameter 'ip2.weight'"):
        ref.set_params({"ip2.weight": torch.zeros(1)})
    # the comparison is no formality: other parameters give other outputs
    other = {k: v + 0.5 for k, v in ref.get_params().items()}
    planned.set_params(other)
    errs = compare_executors(ref, planned, _inputs())
    assert max(errs.values()) > 1e-3


def test_trainers_declare_the_interface_and_take_the_same_steps():
    from netc.runtime.interp import InterpTrainer
    from netc.runtime.planned import PlannedTrainer
    from netc.runtime.train import ReferenceTrainer
    ref = ReferenceTrainer(_training_module(), seed=2, dtype=torch.float64)
    planned = PlannedTrainer(_training_module(), seed=2, dtype=torch.float64)
    interp = InterpTrainer(_training_module(), seed=2, blocks="large")
    start = {k: v * 0.5 for k, v in ref.get_params().items()}    # not what they drew: set_params must take
    for t in (ref, planned, interp):
        assert isinstance(t, TrainingExecutor), type(t).__name__
        t.set_params(start)
        now = t.get_params()
        assert max(float((now[k].double() - start[k]).abs().max()) for k in start) < 1e-6, type(t).__name__
    losses = {type(t).__name__: [t.train_step(_inputs(s), 0.1, seed=s) for s in range(3)] for t in (ref, planned, interp)}
    r = losses["ReferenceTrainer"]
    assert r[2] < r[0]
    assert all(abs(a - b) < 1e-5 * max(1.0, abs(b)) for a, b in zip(losses["PlannedTrainer"], r)), losses
    assert all(abs(a - b) < 1e-4 * max(1.0, abs(b)) for a, b in zip(losses["InterpTrainer"], r)), losses
    end = ref.get_params()
    for t in (planned, interp):
        got = t.get_params()
        assert set(got) == set(end)     # parameters and the momentum state, by name
        worst = max(float((got[k].double() - end[k]).abs().max()) for k in end)
        assert worst < 1e-4, (type(t).__name__, worst)
