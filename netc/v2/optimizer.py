"""paddle.optimizer: PaddlePaddle v2's update equations, as netc optimizers that make PaddlePaddle's
updates.

PaddlePaddle trains on the gradient of the SUM of the per-sample costs over a batch of n samples;
netc's losses are batch means (netc.v2.layer: a cost layer's netc loss times its scale k is
PaddlePaddle's mean per-sample cost, so PaddlePaddle's gradient is k * n times netc's). Rather than a
second engine, each optimizer here is netc's, told per batch (netc.api.optimizer.Optimizer's
batch_options / batch_learning_rate hooks) how to make the update PaddlePaddle makes from k * n times
the gradient:

    Momentum   PaddlePaddle's  v = mu v - lr (g_sum + decay w);  w += v   (momentum 0 allowed): netc's
               SGD in SINGA's convention (the same formula) with lr * k * n and weight decay decay / (k * n)
               -- equal step by step, also when batches differ in size;
    Adam, AdaMax  scale-free but for epsilon: netc's (torch's) with epsilon / (k * n) and weight decay
               decay / (k * n) -- equal to PaddlePaddle's for a constant batch size (its epsilon is not
               bias-corrected, torch's is: a difference of order epsilon);
    AdaGrad    s += g^2, w -= lr g / sqrt(s + eps) (SINGA's convention, eps inside the root): eps / (k n)^2.

regularization=L2Regularization(rate) is PaddlePaddle's decay_rate for every parameter (biases too);
gradient_clipping_threshold clips the summed gradient's values to [-t, t] (netc's clip_low/high of
t / (k n)). model_average=ModelAverage(average_window, max_average_window) keeps PaddlePaddle's average of
the parameters' recent values (netc.v2.average), which trainer.save_parameter_to_tar writes.
learning_rate defaults to 1e-3 (PaddlePaddle's settings()); learning_rate_schedule is
PaddlePaddle's (constant, poly, caffe_poly, exp, discexp, linear, manual, pass_manual, with
learning_rate_decay_a / _b and learning_rate_args): a function of the samples processed, the current
batch counted (its SgdLocalUpdater.startBatch), or of the passes finished. RMSProp (PaddlePaddle's is
centred), AdaDelta, DecayedAdaGrad and L1 regularization are not in netc.v2 yet."""
from __future__ import annotations

import math

from ..api import optimizer as api_opt
from ..api.errors import error, user_loc
from .average import ModelAverage
from .names import missing_names


SCHEDULES = ("constant", "poly", "caffe_poly", "exp", "discexp", "linear", "manual", "pass_manual")


def _segments(args, what, loc) -> list:
    """[(segment end, rate)] of learning_rate_args 'seg0:rate0,seg1:rate1,...'."""
    try:
        out = [(int(p.split(":")[0]), float(p.split(":")[1])) for p in str(args).split(",") if p.strip()]
    except (ValueError, IndexError):
        out = []
    if not out:
        raise error(f"{what}: a manual schedule takes learning_rate_args='seg0:rate0,seg1:rate1,...', got {args!r}",
                    loc)
    return out


class L2Regularization:
    """PaddlePaddle's L2 regularization: decay_rate `rate` (decay * w added to the summed gradient)."""

    def __init__(self, rate):
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate < 0:
            raise error(f"paddle.optimizer.L2Regularization: rate is a non-negative number, got {rate!r}", user_loc())
        self.rate = float(rate)


class Optimizer:
    """An update equation: trainer.SGD turns it into a netc optimizer for its cost (netc_optimizer)."""
    netc_name = "sgd"

    def __init__(self, learning_rate=1e-3, regularization=None, learning_rate_schedule="constant",
                 learning_rate_decay_a=0.0, learning_rate_decay_b=0.0, learning_rate_args="",
                 gradient_clipping_threshold=None, model_average=None, batch_size=None, **unknown):
        loc = user_loc()
        what = f"paddle.optimizer.{type(self).__name__}"
        if unknown:
            raise error(f"{what} has no option '{next(iter(unknown))}' in netc.v2 (it takes learning_rate, "
                        f"regularization, gradient_clipping_threshold and its own options; docs/v2.md)", loc)
        if learning_rate_schedule not in SCHEDULES:
            raise error(f"{what}: learning_rate_schedule '{learning_rate_schedule}' is not PaddlePaddle's (schedules: "
                        f"{', '.join(SCHEDULES)})", loc)
        self.schedule = learning_rate_schedule
        self.a, self.b = float(learning_rate_decay_a), float(learning_rate_decay_b)
        self.segments = _segments(learning_rate_args, what, loc) if learning_rate_schedule.endswith("manual") else []
        if model_average is not None and not isinstance(model_average, ModelAverage):
            raise error(f"{what}: model_average is paddle.optimizer.ModelAverage(average_window=...), got "
                        f"{model_average!r}", loc)
        self.model_average = model_average
        if regularization is not None and not isinstance(regularization, L2Regularization):
            raise error(f"{what}: regularization is paddle.optimizer.L2Regularization(rate) (L1 is not in netc.v2 "
                        f"yet), got {regularization!r}", loc)
        if isinstance(learning_rate, bool) or not isinstance(learning_rate, (int, float)) or learning_rate <= 0:
            raise error(f"{what}: learning_rate is a positive number, got {learning_rate!r}", loc)
        self.learning_rate = float(learning_rate)
        self.decay = regularization.rate if regularization is not None else 0.0
        self.clip = float(gradient_clipping_threshold or 0.0)
        self.own, self.loc = {}, loc

    def rate(self, samples: int, passes: int) -> float:
        """PaddlePaddle's learning rate after `samples` samples (the current batch counted) in pass
        `passes` (paddle/parameter/LearningRateScheduler.cpp)."""
        lr, a, b, kind = self.learning_rate, self.a, self.b, self.schedule
        if kind == "poly":
            return lr * (1.0 + a * samples) ** -b
        if kind == "caffe_poly":
            return 0.0 if samples > a else lr * (1.0 - samples / a) ** b
        if kind == "exp":
            return lr * a ** (samples / b)
        if kind == "discexp":
            return lr * a ** math.floor(samples / b)
        if kind == "linear":
            return max(lr - a * samples, b)
        if kind in ("manual", "pass_manual"):
            n = samples if kind == "manual" else passes
            return lr * next((r for seg, r in self.segments if n <= seg), self.segments[-1][1])
        return lr

    def netc_optimizer(self, scale: float) -> api_opt.Optimizer:
        """The netc optimizer making this equation's updates for a cost whose netc loss is 1/scale of
        PaddlePaddle's mean per-sample cost."""
        return _PADDLE[self.netc_name](self, scale)


class Momentum(Optimizer):
    """v = momentum v - lr (g + decay w); w += v (PaddlePaddle's sgdUpdate); momentum defaults to 0."""
    netc_name = "sgd"

    def __init__(self, momentum=None, sparse=False, **kw):
        super().__init__(**kw)
        if sparse:
            raise error("paddle.optimizer.Momentum(sparse=True) is not in netc.v2 yet", self.loc)
        m = 0.0 if momentum is None else momentum
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not 0 <= m < 1:
            raise error(f"paddle.optimizer.Momentum: momentum is a number in [0, 1), got {momentum!r}", self.loc)
        self.own = {"momentum": float(m)}


class Adam(Optimizer):
    netc_name = "adam"

    def __init__(self, beta1=0.9, beta2=0.999, epsilon=1e-8, **kw):
        super().__init__(**kw)
        self.own = {"beta1": beta1, "beta2": beta2, "eps": epsilon}


class Adamax(Optimizer):
    netc_name = "adamax"

    def __init__(self, beta1=0.9, beta2=0.999, **kw):
        super().__init__(**kw)
        self.own = {"beta1": beta1, "beta2": beta2, "eps": 1e-8}


class AdaGrad(Optimizer):
    netc_name = "adagrad"

    def __init__(self, epsilon=1e-6, **kw):
        super().__init__(**kw)
        self.own = {"eps": epsilon}


def _scaled(base):
    """A netc optimizer class making PaddlePaddle's updates from netc's mean gradient (module doc)."""

    class Scaled(base):
        linear_lr = base is api_opt.SGD             # SGD's step is linear in the gradient: scale lr
        eps_power = 2 if base is api_opt.AdaGrad else 1

        def __init__(self, v2, scale):
            self.v2, self.scale = v2, float(scale)
            conv = "singa" if base in (api_opt.SGD, api_opt.AdaGrad) else "torch"
            super().__init__(v2.learning_rate, convention=conv, **v2.own)

        def batch_options(self, batch):
            f = self.scale * batch
            o = dict(self.options, weight_decay=self.v2.decay / f)
            if self.v2.clip:
                o["clip_low"], o["clip_high"] = -self.v2.clip / f, self.v2.clip / f
            if "eps" in o:
                o["eps"] = self.v2.own["eps"] / f ** self.eps_power
            return o

        samples = passes = 0         # PaddlePaddle's numSamplesProcessed and finished passes (the trainer's)

        def batch_learning_rate(self, batch):
            self.samples += batch
            return self.v2.rate(self.samples, self.passes) * (self.scale * batch if self.linear_lr else 1.0)

    Scaled.__name__ = Scaled.__qualname__ = f"Paddle{base.__name__}"
    return Scaled


_PADDLE = {"sgd": _scaled(api_opt.SGD), "adam": _scaled(api_opt.Adam), "adamax": _scaled(api_opt.AdaMax),
           "adagrad": _scaled(api_opt.AdaGrad)}

__all__ = ["Optimizer", "Momentum", "Adam", "Adamax", "AdaGrad", "L2Regularization", "ModelAverage"]
__getattr__ = missing_names(__name__, __all__)
