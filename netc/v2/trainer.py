"""paddle.trainer: PaddlePaddle v2's SGD trainer on netc.train / netc.test.

    trainer = paddle.trainer.SGD(cost, parameters, update_equation, extra_layers=None)
    trainer.train(reader, num_passes=1, event_handler=None, feeding=None)
    trainer.test(reader, feeding=None)        -> event.TestResult(cost, metrics)
    trainer.save_parameter_to_tar(f)       (with model_average=: the averaged values, netc.v2.average)

The topology is the cost(s) and extra_layers. The update equation becomes a netc optimizer that makes
PaddlePaddle's updates (netc.v2.optimizer), made once per trainer, so successive train() calls go on
from its state. Events are netc.api's, told PaddlePaddle's way (netc.v2.event): the cost is the mean
per-sample cost PaddlePaddle reports (netc's losses times netc.v2.layer's COST_SCALE), metrics have
`classification_error_evaluator` (1 - netc's accuracy) for a classification_cost. `feeding` names
may include data layers the topology does not read (PaddlePaddle ignores them; so does this)."""
from __future__ import annotations

import numpy as np

from ..api import event as api_event
from ..api import trainer as api_trainer
from ..api.core import Layer
from ..api.errors import error, user_loc
from ..api.topology import as_topology
from . import event as v2event
from .average import Averager
from .evaluator import Stats, joining
from .layer import CLASSIFIERS, COST_SCALE
from .names import missing_names
from .optimizer import Optimizer
from .parameters import Parameters


SETTINGS = {"threads": 1, "use_gpu": False}     # paddle.init's: trainer_count is torch's threads


def feeding_for(top, feeding):
    """PaddlePaddle's feeding restricted to the topology's data layers (None stays None)."""
    if isinstance(feeding, dict):
        names = {x.name for x in top.data_layers()}
        return {k: v for k, v in feeding.items() if k in names}
    return feeding


def batched(reader, what, loc):
    """The reader, checked to yield batches (lists of samples: paddle.batch), as PaddlePaddle's trainer
    reads them."""
    if not callable(reader):
        raise error(f"{what}: reader is a callable returning an iterator of batches (paddle.batch(...)), got "
                    f"{type(reader).__name__}", loc)

    def read():
        for b in reader():
            if not isinstance(b, list) or (b and not isinstance(b[0], (list, tuple, dict, np.ndarray))):
                raise error(f"{what}: the reader yields single samples ({type(b).__name__}); it reads batches: "
                            f"give paddle.batch(reader, batch_size)", loc)
            yield b
    return read


class SGD:
    """PaddlePaddle v2's trainer: a topology (costs and extra layers), its parameters, an update equation."""

    def __init__(self, cost, parameters, update_equation, extra_layers=None, is_local=True, pserver_spec=None,
                 use_etcd=True):
        loc = user_loc()
        costs = list(cost) if isinstance(cost, (list, tuple)) else [cost]
        extras = [] if extra_layers is None else list(extra_layers) if isinstance(extra_layers, (list, tuple)) \
            else [extra_layers]
        for c in costs + extras:
            if not isinstance(c, Layer):
                raise error(f"paddle.trainer.SGD: cost and extra_layers are paddle.layer layers, got {c!r}", loc)
        unknown = [c for c in costs if c not in COST_SCALE]
        if unknown:
            raise error(f"paddle.trainer.SGD: '{unknown[0].name}' is not a cost layer of paddle.layer "
                        f"(classification_cost, cross_entropy_cost, square_error_cost)", loc,
                        [("defined here", unknown[0].loc)])
        scales = {COST_SCALE[c] for c in costs}
        if len(scales) > 1:
            raise error("paddle.trainer.SGD: costs of different kinds (scales "
                        f"{', '.join(f'{c.name}: {COST_SCALE[c]:g}' for c in costs)}) are not in netc.v2 yet: one "
                        f"netc optimizer cannot scale their gradients apart", loc)
        if not isinstance(parameters, Parameters):
            raise error(f"paddle.trainer.SGD: parameters come from paddle.parameters.create, got "
                        f"{type(parameters).__name__}", loc)
        if not isinstance(update_equation, Optimizer):
            raise error(f"paddle.trainer.SGD: update_equation is a paddle.optimizer object (Momentum, Adam, ...), "
                        f"got {type(update_equation).__name__}", loc)
        if not is_local:
            raise error("paddle.trainer.SGD(is_local=False): parameter servers are not in netc.v2", loc)
        self.costs, self.parameters = costs, parameters
        self.topology = as_topology(costs + extras if len(costs + extras) > 1 else costs[0])
        evaluators, more = joining(self.topology.layers)
        if more:            # an evaluator's input outside the cost's graph (a softmax's probabilities)
            self.topology = as_topology(costs + extras + more)
        self.evaluators = evaluators
        self.scale = scales.pop()
        self.optimizer = update_equation.netc_optimizer(self.scale)
        self.static = [n for n, i in parameters.bind(self.topology).infos.items() if i.attrs.get("immutable")]
        average = update_equation.model_average
        self.averager = Averager(average) if average is not None else None

    def _trained(self, pset) -> dict:
        """{netc name: tensor} of the parameters training updates (the model average's)."""
        return {n: pset[n] for n in pset.names() if n not in self.static}

    def _cost(self, cost, metrics) -> float:
        if len(self.costs) == 1:
            return cost * self.scale
        return sum(metrics.get(f"cost:{c.name}", 0.0) * COST_SCALE[c] for c in self.costs)

    def _metrics(self, metrics, stats=None) -> dict:
        out = {} if stats is None else stats.metrics()
        classifiers = [c for c in self.costs if c in CLASSIFIERS]
        if len(classifiers) == 1 and "accuracy" in metrics:
            out["classification_error_evaluator"] = 1.0 - metrics["accuracy"]
        for c in classifiers:
            if f"accuracy:{c.name}" in metrics:
                out[f"{c.name}.classification_error_evaluator"] = 1.0 - metrics[f"accuracy:{c.name}"]
        return out

    def train(self, reader, num_passes=1, event_handler=None, feeding=None):
        """Train on the batches of `reader` (a reader of lists of samples: paddle.batch) for num_passes."""
        loc = user_loc()
        if event_handler is not None and not callable(event_handler):
            raise error(f"event_handler is a callable taking an event, got {type(event_handler).__name__}", loc)
        handler = event_handler or (lambda e: None)
        batch, whole = Stats(self.evaluators), Stats(self.evaluators)

        def observe(values, n):
            batch.start()
            batch.add(values, n)
            whole.add(values, n)

        observe.layers = batch.layers       # the values the evaluators read (a compiled target captures those)

        def relay(e):
            if isinstance(e, api_event.BeginPass):
                whole.start()
                handler(v2event.BeginPass(e.pass_id))
            elif isinstance(e, api_event.BeginIteration):
                handler(v2event.BeginIteration(e.pass_id, e.batch_id))
            elif isinstance(e, api_event.EndIteration):
                if self.averager is not None:
                    self.averager.update(self._trained(pset))
                handler(v2event.EndIteration(e.pass_id, e.batch_id, self._cost(e.cost, e.metrics),
                                             self._metrics(e.metrics, batch)))
            elif isinstance(e, api_event.EndPass):
                self.optimizer.passes += 1          # pass_manual's count
                if self.averager is not None:
                    self.averager.finish_pass()
                handler(v2event.EndPass(e.pass_id, self._metrics(e.metrics, whole), self._cost(e.cost, e.metrics)))

        pset = self.parameters.bind(self.topology)
        api_trainer.train(self.topology, pset, batched(reader, "paddle.trainer.SGD.train", loc), self.optimizer,
                          event_handler=relay,
                          immutable_parameters=self.static, num_passes=num_passes,
                          feeding=feeding_for(self.topology, feeding), threads=SETTINGS["threads"],
                          observe=observe if self.evaluators else None)

    def test(self, reader, feeding=None) -> v2event.TestResult:
        """The mean per-sample cost and the metrics over every sample of `reader`."""
        pset = self.parameters.bind(self.topology)
        stats = Stats(self.evaluators)
        r = api_trainer.test(self.topology, pset, batched(reader, "paddle.trainer.SGD.test", user_loc()),
                             feeding=feeding_for(self.topology, feeding),
                             threads=SETTINGS["threads"], observe=stats if self.evaluators else None)
        return v2event.TestResult(self._cost(r.cost, r.metrics), self._metrics(r.metrics, stats))

    test.__test__ = False

    def save_parameter_to_tar(self, f):
        """The parameters' tar file; with a model average, of the averaged values (PaddlePaddle's apply,
        write, restore: training goes on from the raw ones)."""
        if self.averager is None:
            self.parameters.to_tar(f)
            return
        trained = self._trained(self.parameters.bind(self.topology))
        self.averager.apply(trained)
        try:
            self.parameters.to_tar(f)
        finally:
            self.averager.restore(trained)


__all__ = ["SGD"]
__getattr__ = missing_names(__name__, __all__)
