"""paddle.attr: PaddlePaddle v2's parameter and layer attributes.

`Param` (alias ParamAttr, ParameterAttribute) names a parameter (shared by name), says how it starts
and trains: initial_mean / initial_std (normal), initial_min / initial_max (uniform), learning_rate
(the parameter's rate multiplier), is_static (never updated). With none of the four initial values
given, PaddlePaddle's "smart" initialization applies (netc.v2.layer: normal, mean 0, std
1/sqrt(dims[0]); a convolution's filter sqrt(2 / (filter_size^2 * channels))). `Extra` (alias
ExtraAttr, ExtraLayerAttribute) is accepted with drop_rate only (a Dropout layer after the layer).
Regularization per parameter: l2_rate=0 (and l1_rate=0) exempt the parameter from the optimizer's
regularization (netc's wd_scale 0); other rates are not in netc.v2 yet. sparse_update=True is accepted
and updates the parameter densely: the same values for SGD without momentum and for AdaGrad/Adam rows
with no gradient... but PaddlePaddle's sparse momentum leaves untouched rows still, netc's dense one
moves them (docs/v2.md). initializer= is refused, located."""
from __future__ import annotations

from ..api.errors import error, user_loc
from .names import missing_names


class Param:
    """A parameter's attributes (PaddlePaddle's ParameterAttribute)."""

    def __init__(self, name=None, is_static=False, initial_std=None, initial_mean=None, initial_max=None,
                 initial_min=None, l1_rate=None, l2_rate=None, learning_rate=None, momentum=None,
                 gradient_clipping_threshold=None, sparse_update=False, update_hooks=None, initializer=None):
        loc = user_loc()
        unsupported = {"l1_rate": l1_rate or None, "l2_rate": l2_rate or None, "momentum": momentum,
                       "initializer": initializer, "gradient_clipping_threshold": gradient_clipping_threshold,
                       "update_hooks": update_hooks}
        bad = [k for k, v in unsupported.items() if v is not None]
        if bad:
            raise error(f"paddle.attr.Param({bad[0]}=...) is not in netc.v2 yet (it takes name, is_static, "
                        f"initial_std, initial_mean, initial_max, initial_min, learning_rate, sparse_update, "
                        f"l2_rate=0; regularization: the optimizer's regularization=)", loc)
        if (initial_max is None) != (initial_min is None):
            raise error("paddle.attr.Param: give initial_min and initial_max together (a uniform range)", loc)
        self.name, self.is_static, self.learning_rate = name, bool(is_static), learning_rate
        self.initial_std, self.initial_mean = initial_std, initial_mean
        self.initial_max, self.initial_min = initial_max, initial_min
        self.no_decay = l2_rate is not None        # l2_rate=0: no regularization for this parameter
        self.sparse_update = bool(sparse_update)
        self.loc = loc

    @property
    def smart(self) -> bool:
        """PaddlePaddle's initial_smart: no initial value given."""
        return self.initial_std is None and self.initial_mean is None and self.initial_max is None

    def __repr__(self):
        keys = ("name", "initial_mean", "initial_std", "initial_min", "initial_max", "learning_rate")
        return "paddle.attr.Param(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in keys
                                                if getattr(self, k) is not None) + ")"


ParamAttr = ParameterAttribute = Param


class Extra:
    """A layer's extra attributes (PaddlePaddle's ExtraLayerAttribute): drop_rate (a Dropout after the
    layer); error_clipping_threshold and device are refused (not in netc.v2 yet)."""

    def __init__(self, error_clipping_threshold=None, drop_rate=None, device=None):
        loc = user_loc()
        if error_clipping_threshold is not None or device is not None:
            raise error("paddle.attr.Extra takes drop_rate in netc.v2 (error_clipping_threshold and device are "
                        "not in netc.v2 yet)", loc)
        self.drop_rate, self.loc = drop_rate, loc


ExtraAttr = ExtraLayerAttribute = Extra

__all__ = ["Param", "ParamAttr", "ParameterAttribute", "Extra", "ExtraAttr", "ExtraLayerAttribute"]
__getattr__ = missing_names(__name__, __all__)
