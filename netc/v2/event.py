"""paddle.event: the events trainer.SGD.train sends its event_handler, PaddlePaddle v2's.

    BeginPass(pass_id)
      BeginIteration(pass_id, batch_id)
      EndIteration(pass_id, batch_id, cost, metrics)     cost: the batch's mean per-sample cost
    EndPass(pass_id, metrics, cost)                       metrics and cost: means over the pass

`metrics` holds PaddlePaddle's evaluator results: `classification_error_evaluator` (the fraction of
samples whose argmax is not the label) for a classification_cost. EndPass's `cost` is netc's
addition (PaddlePaddle's EndPass carries metrics only). TestResult(cost, metrics) is trainer.test's
answer. WithMetric is the base of the events with metrics."""
from __future__ import annotations

from .names import missing_names


class WithMetric:
    def __init__(self, metrics=None):
        self.metrics = dict(metrics or {})


class BeginPass:
    def __init__(self, pass_id):
        self.pass_id = pass_id


class EndPass(WithMetric):
    def __init__(self, pass_id, metrics=None, cost=None):
        super().__init__(metrics)
        self.pass_id, self.cost = pass_id, cost


class BeginIteration:
    def __init__(self, pass_id, batch_id):
        self.pass_id, self.batch_id = pass_id, batch_id


class EndIteration(WithMetric):
    def __init__(self, pass_id, batch_id, cost, metrics=None):
        super().__init__(metrics)
        self.pass_id, self.batch_id, self.cost = pass_id, batch_id, cost


class TestResult(WithMetric):
    __test__ = False      # (not a pytest test class)

    def __init__(self, cost, metrics=None):
        super().__init__(metrics)
        self.cost = cost

    def __repr__(self):
        return f"<TestResult cost {self.cost:.6f} {self.metrics}>"


__all__ = ["WithMetric", "BeginPass", "EndPass", "BeginIteration", "EndIteration", "TestResult"]
__getattr__ = missing_names(__name__, __all__)
