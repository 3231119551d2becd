"""Optimizers for netc.train: objects that map onto the optimizer pass's options (passes/optimizer.py,
ops/optim.py) and the learning-rate schedule (netc.ops.optim.learning_rate).

    netc.optimizer.SGD(lr=0.01, momentum=0.0, nesterov=False)
    netc.optimizer.Momentum(lr=0.01, momentum=0.9)           # "momentum" (torch's SGD with momentum)
    netc.optimizer.Adam(lr=0.001, beta1=0.9, beta2=0.999, eps=1e-8)
    netc.optimizer.RMSProp(lr=0.01, alpha=0.99, eps=1e-8)     # alpha is SINGA's / Paddle's rho
    netc.optimizer.AdaGrad(lr=0.01, eps=1e-10)
    netc.optimizer.AdaDelta(lr=1.0, rho=0.9, eps=1e-6)       # torch.optim.Adadelta, SINGA's kAdaDelta
    netc.optimizer.AdaMax(lr=0.002, beta1=0.9, beta2=0.999, eps=1e-8)   # torch.optim.Adamax

Every one also takes weight_decay (L2, torch's form), clip_norm (clip the gradients to this global
norm), clip_low/clip_high (SINGA's value clipping), convention ("torch" or "singa") and, instead of
a fixed lr, schedule= a SINGA-style schedule dictionary ({"type": "step", "base_lr": 0.1,
"gamma": 0.5, "change_freq": 100}; types: fixed, step, linear, exponential, inverse, inverse_t,
fixed_step). `learning_rate=` is accepted for lr (PaddlePaddle's spelling).

A loaded topology whose file records an optimizer (a SINGA job's updater) trains with it when
train() is given none (`Recorded`). An optimizer object counts the steps it has taken (`steps`): the schedule reads it, and successive
train() calls with the same optimizer go on along the schedule (a GAN's alternating calls). Its
state (moments, velocities) lives in the ParameterSet, named '<parameter>.<role>'.
"""
from __future__ import annotations

from ..diagnostics import NetcError
from ..ops.optim import learning_rate as _learning_rate
from ..passes.optimizer import resolve_optimizer
from .errors import error, user_loc


class Optimizer:
    name = "sgd"
    _own: tuple = ()

    def __init__(self, lr=None, *, learning_rate=None, schedule=None, weight_decay=0.0, clip_norm=0.0,
                 clip_low=0.0, clip_high=0.0, convention="torch", **own):
        loc = user_loc()
        if lr is not None and learning_rate is not None:
            raise error("give lr or learning_rate, not both", loc)
        lr = lr if lr is not None else learning_rate
        if lr is not None and schedule is not None:
            raise error("give the optimizer either lr or schedule, not both", loc)
        bad = [k for k in own if k not in self._own]
        if bad:
            raise error(f"{type(self).__name__} has no option '{bad[0]}' (its options: "
                        f"{', '.join(self._own + ('lr', 'schedule', 'weight_decay', 'clip_norm'))})", loc)
        self.options = {"name": self.name, **{k: v for k, v in own.items() if v is not None},
                        "weight_decay": weight_decay, "clip_norm": clip_norm, "clip_low": clip_low,
                        "clip_high": clip_high, "convention": convention}
        if schedule is not None:
            self.options["schedule"] = dict(schedule)
        else:
            self.options["lr"] = self._default_lr if lr is None else lr
        try:
            self.spec = resolve_optimizer(None, self.options)   # checks every option now, at the user's line
        except NetcError as e:
            raise error(str(e), loc) from None
        self.schedule = self.spec["schedule"]
        self.steps = 0

    _default_lr = 0.01

    def learning_rate(self, step: int | None = None) -> float:
        """The learning rate of step `step` (default: the next one)."""
        return _learning_rate(self.schedule, self.steps if step is None else step)

    def batch_options(self, batch: int) -> dict:
        """The optimizer pass's options for the training program of a batch of `batch` samples (netc.train
        compiles one per batch size): netc's optimizers take the same for every batch; netc.v2's
        PaddlePaddle optimizers scale the weight decay by the batch (docs/v2.md)."""
        return self.options

    def batch_learning_rate(self, batch: int) -> float:
        """The learning rate netc.train feeds the next step on a batch of `batch` samples (netc's: the
        schedule's; netc.v2's: scaled by the batch, PaddlePaddle's gradient summed over the batch)."""
        return self.learning_rate()

    def __repr__(self):
        own = ", ".join(f"{k}={self.spec[k]!r}" for k in self._own if k in self.spec)
        return f"{type(self).__name__}(schedule={self.schedule}{', ' + own if own else ''})"


class SGD(Optimizer):
    name = "sgd"
    _own = ("momentum", "nesterov")

    def __init__(self, lr=None, momentum: float = 0.0, nesterov: bool = False, **kw):
        super().__init__(lr, momentum=momentum, nesterov=nesterov, **kw)


class Momentum(Optimizer):
    name = "momentum"
    _own = ("momentum",)

    def __init__(self, lr=None, momentum: float = 0.9, **kw):
        super().__init__(lr, momentum=momentum, **kw)


class Adam(Optimizer):
    name = "adam"
    _own = ("beta1", "beta2", "eps")
    _default_lr = 0.001

    def __init__(self, lr=None, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8, **kw):
        super().__init__(lr, beta1=beta1, beta2=beta2, eps=eps, **kw)


class RMSProp(Optimizer):
    name = "rmsprop"
    _own = ("alpha", "eps")

    def __init__(self, lr=None, alpha: float = 0.99, eps: float = 1e-8, rho=None, **kw):
        super().__init__(lr, alpha=rho if rho is not None else alpha, eps=eps, **kw)


class AdaGrad(Optimizer):
    name = "adagrad"
    _own = ("eps",)

    def __init__(self, lr=None, eps: float = 1e-10, **kw):
        super().__init__(lr, eps=eps, **kw)


class AdaDelta(Optimizer):
    name = "adadelta"
    _own = ("rho", "eps")
    _default_lr = 1.0          # torch.optim.Adadelta's (the step is scaled by the running update size)

    def __init__(self, lr=None, rho: float = 0.9, eps: float = 1e-6, **kw):
        super().__init__(lr, rho=rho, eps=eps, **kw)


class AdaMax(Optimizer):
    name = "adamax"
    _own = ("beta1", "beta2", "eps")
    _default_lr = 0.002        # torch.optim.Adamax's

    def __init__(self, lr=None, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8, **kw):
        super().__init__(lr, beta1=beta1, beta2=beta2, eps=eps, **kw)


class Recorded(Optimizer):
    """The optimizer a file records (a SINGA job's updater and schedule, on the module): the optimizer
    pass takes it as it is. netc.train uses it when given no optimizer for a loaded topology."""

    def __init__(self, recorded: dict):
        try:
            self.spec = resolve_optimizer(recorded, {})
        except NetcError as e:
            raise error(str(e), user_loc()) from None
        self.name, self.options, self.schedule, self.steps = self.spec["name"], {}, self.spec["schedule"], 0

    def __repr__(self):
        return f"Recorded({self.spec})"


def by_name(name: str, lr=None, **kw) -> Optimizer:
    """An optimizer from its name as the CLI spells it: sgd, momentum, nesterov, adam, rmsprop, adagrad,
    adadelta, adamax."""
    table = {"sgd": SGD, "momentum": Momentum, "adam": Adam, "rmsprop": RMSProp, "adagrad": AdaGrad,
             "adadelta": AdaDelta, "adamax": AdaMax}
    if name == "nesterov":
        return SGD(lr, momentum=kw.pop("momentum", 0.9), nesterov=True, **kw)
    if name not in table:
        from ..diagnostics import did_you_mean
        hint = did_you_mean(str(name), list(table) + ["nesterov"])
        raise error(f"unknown optimizer '{name}'" + (f"; did you mean '{hint}'?" if hint else "")
                    + " (optimizers: sgd, momentum, nesterov, adam, rmsprop, adagrad, adadelta, adamax)", user_loc())
    return table[name](lr, **kw)


__all__ = ["Optimizer", "SGD", "Momentum", "Adam", "RMSProp", "AdaGrad", "AdaDelta", "AdaMax", "Recorded", "by_name"]
