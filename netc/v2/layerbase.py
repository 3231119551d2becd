"""The common part of netc.v2's layer builders (netc.v2.layer, netc.v2.seqlayer): PaddlePaddle's layer
and parameter names (default_name, bind_params), its parameter attributes as netc ParamAttr fields
(init_fields: initial_smart and the explicit initial values; bias_fields: biases start at 0),
activations (act_of), layer_attr's dropout (with_extra), and the tables the other modules read:
PARAM_DIMS (PaddlePaddle's dims of each parameter), PARAM_LAYOUT, PARAM_STATE, COST_SCALE, CLASSIFIERS
(netc.v2.layer's docstring says what each holds)."""
from __future__ import annotations

import itertools
import math

from ..api import layer as L
from ..api.core import Layer, ParamAttr
from ..api.errors import error
from . import activation as A
from .attr import Extra, Param

PARAM_DIMS: dict = {}        # parameter name -> PaddlePaddle's dims (ParameterConfig.dims)
PARAM_LAYOUT: dict = {}      # parameter name -> how its values' order differs from PaddlePaddle's (to_paddle)
PARAM_STATE: dict = {}       # PaddlePaddle's batch norm moving mean/var parameter -> (netc state, its start,
                             # channels, the layer's scale parameter)
COST_SCALE: dict = {}        # cost Layer -> netc loss to PaddlePaddle's mean per-sample cost
CLASSIFIERS: set = set()     # cost Layers with PaddlePaddle's classification_error_evaluator
_COUNTERS: dict = {}



def default_name(kind: str, name):
    if name is not None:
        return name
    n = next(_COUNTERS.setdefault(kind, itertools.count()))
    return f"__{kind}_{n}__"


def as_layer(x, what, loc) -> Layer:
    if not isinstance(x, Layer):
        raise error(f"{what}: input is a paddle.layer (a Layer), got {type(x).__name__}", loc)
    return x


def act_of(act, default, what, loc):
    act = default if act is None else act
    if isinstance(act, type) and issubclass(act, A.BaseActivation):
        act = act()
    if not isinstance(act, A.BaseActivation):
        raise error(f"{what}: act is a paddle.activation object (Linear(), Relu(), Sigmoid(), Tanh(), Softmax()), "
                    f"got {act!r}", loc)
    return act.netc


def init_fields(attr, dims, loc, smart_std=None) -> dict:
    """netc ParamAttr fields for a PaddlePaddle parameter attribute (None: the default, initial_smart)."""
    if attr is not None and not isinstance(attr, Param):
        raise error(f"a parameter attribute is a paddle.attr.Param, got {attr!r}", loc)
    out = {}
    if attr is not None:
        if attr.learning_rate is not None:
            out["lr_scale"] = float(attr.learning_rate)
        if attr.is_static:
            out["immutable"] = True
        if attr.name is not None:
            out["name"] = attr.name
        if attr.no_decay:
            out["wd_scale"] = 0.0
    if attr is None or attr.smart:
        std = smart_std if smart_std is not None else 1.0 / math.sqrt(dims[0])
        return {**out, "init": "gaussian", "mean": 0.0, "std": std}
    if attr.initial_max is not None:
        return {**out, "init": "uniform", "low": float(attr.initial_min), "high": float(attr.initial_max)}
    mean = 0.0 if attr.initial_mean is None else float(attr.initial_mean)
    std = 0.01 if attr.initial_std is None else float(attr.initial_std)   # config_parser's defaults
    if std == 0:
        return {**out, "init": "constant", "value": mean}
    return {**out, "init": "gaussian", "mean": mean, "std": std}


def bias_fields(bias_attr, dims, loc):
    """(has a bias, its netc ParamAttr fields): PaddlePaddle's default bias starts at 0."""
    if bias_attr is False:
        return False, None
    if bias_attr is None or bias_attr is True:
        return True, {"init": "constant", "value": 0.0}
    return True, init_fields(bias_attr, dims, loc)


def bind_params(layer_name, roles: dict) -> tuple:
    """(param_name, param_attr) for netc.api's builders from {role: (PaddlePaddle name suffix, fields, dims)}."""
    names, attrs = {}, {}
    for role, (suffix, fields, dims) in roles.items():
        pname = fields.pop("name", None) or f"_{layer_name}.{suffix}"
        names[role] = pname
        attrs[role] = ParamAttr(**fields)
        PARAM_DIMS[pname] = tuple(dims)
    return names, attrs


def with_extra(x, layer_attr, name, loc):
    if layer_attr is None:
        return x
    if not isinstance(layer_attr, Extra):
        raise error(f"layer_attr is a paddle.attr.Extra, got {layer_attr!r}", loc)
    if layer_attr.drop_rate:
        return L.dropout(x, dropout_rate=layer_attr.drop_rate, name=f"{name}.dropout")
    return x


__all__ = ["PARAM_DIMS", "PARAM_LAYOUT", "PARAM_STATE", "COST_SCALE", "CLASSIFIERS", "default_name", "as_layer",
           "act_of", "init_fields", "bias_fields", "bind_params", "with_extra"]
