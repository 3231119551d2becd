"""paddle.layer: PaddlePaddle v2's layers with its argument names and semantics, built from netc.api's
layers (the same Layer objects, topologies, passes and executors).

    data(name, type)                    netc.api.layer.data with a netc.data_type type
    fc(input, size, act, param_attr, bias_attr, name, layer_attr)
                                        input one layer or a list (one weight each, summed, one bias);
                                        act defaults to Tanh (PaddlePaddle's default)
    img_conv(input, filter_size, num_filters, num_channels, act, stride, padding, ...)
                                        act defaults to Relu; a dense_vector input of width C*H*W with
                                        H = W is read as the image (CHW, PaddlePaddle's order)
    img_pool(input, pool_size, pool_type, stride, padding, ...)   Max by default, stride 1
    classification_cost(input, label)   input a Softmax fc: cross-entropy per sample
    cross_entropy_cost(input, label)    the same, without the classification error metric
    square_error_cost(input, label)     (alias mse_cost): sum over the features of (input - label)^2

Sequences and ids (netc.v2.seqlayer, re-exported here): embedding, table_projection,
full_matrix_projection, mixed, concat, lstmemory, grumemory, pooling, last_seq, first_seq, cos_sim. The shared helpers and tables live in netc.v2.layerbase.

PaddlePaddle's names and initial values: a layer is named `__<kind>_<n>__` (fc: __fc_layer_0__), its
parameters `_<layer>.w<i>` (the i-th input's weight) and `_<layer>.wbias`; weights start N(0, std^2)
with std = 1/sqrt(dims[0]) (fc: 1/sqrt(input width)), a convolution's filter sqrt(2 / (filter_size^2 *
channels)), biases 0 -- PaddlePaddle's initial_smart and default bias attribute
(python/paddle/trainer/config_parser.py Parameter, trainer_config_helpers img_conv_layer,
default_decorators). PARAM_DIMS keeps each parameter's PaddlePaddle dims (its tar files' shapes),
PARAM_LAYOUT where netc's order of its values differs from PaddlePaddle's (to_paddle / from_paddle:
a convolution's filter, an fc weight reading an image).

Costs: netc's losses are means over the batch; PaddlePaddle's cost layers give one cost per sample
and train on their sum. COST_SCALE[cost layer] is the factor from netc's loss to PaddlePaddle's mean
per-sample cost (1 for cross-entropy, 2 for the square error, times coeff); netc.v2.trainer
multiplies the reported cost by it and scales the optimizer by it times the batch size, so the
updates are PaddlePaddle's (netc.v2.optimizer)."""
from __future__ import annotations

import math

import numpy as np

from ..api import layer as L
from ..api.core import Layer
from ..api.data_type import InputType
from ..api.errors import error, user_loc
from . import activation as A
from . import pooling as P
from .attr import Param
from .layerbase import (CLASSIFIERS, COST_SCALE, PARAM_DIMS, PARAM_LAYOUT, PARAM_STATE, act_of, as_layer,  # noqa: F401
                        bias_fields, bind_params, default_name, init_fields, with_extra)
from .names import missing_names
from .seqlayer import (concat, cos_sim, embedding, first_seq, full_matrix_projection, grumemory,  # noqa: F401
                       last_seq, lstmemory, mixed, pooling, table_projection)

_IMAGES: dict = {}            # (vector layer, channels) -> its NHWC image layer (made once)



def to_paddle(name: str, values: np.ndarray) -> np.ndarray:
    """A parameter's values (netc's shape and order) in PaddlePaddle's order, flat: a convolution's filter
    HWIO -> PaddlePaddle's [num_filters, channels, fh, fw] (ExpandConvLayer's filterShape), an fc weight
    reading an image: rows HWC -> CHW (PaddlePaddle's images are C planes)."""
    kind, shape = PARAM_LAYOUT.get(name, (None, None))
    if kind == "filter":
        values = values.reshape(shape).transpose(3, 2, 0, 1)
    elif kind == "image_rows":
        h, w, c = shape
        values = values.reshape(h, w, c, -1).transpose(2, 0, 1, 3)
    return np.ascontiguousarray(values).reshape(-1)


def from_paddle(name: str, values: np.ndarray, netc_shape) -> np.ndarray:
    """The inverse of to_paddle: PaddlePaddle's values of a parameter in netc's shape and order."""
    kind, shape = PARAM_LAYOUT.get(name, (None, None))
    if kind == "filter":
        fh, fw, c, nf = shape
        values = values.reshape(nf, c, fh, fw).transpose(2, 3, 1, 0)
    elif kind == "image_rows":
        h, w, c = shape
        values = values.reshape(c, h, w, -1).transpose(1, 2, 0, 3)
    return np.ascontiguousarray(values).reshape(tuple(netc_shape))


def data(name, type, height=None, width=None, layer_attr=None):  # noqa: A002 (PaddlePaddle's argument name)
    """A data layer of a netc.v2.data_type type (dense_vector(13), integer_value(10), ...)."""
    loc = user_loc()
    if not isinstance(type, InputType):
        raise error(f"paddle.layer.data('{name}'): type is a paddle.data_type (dense_vector, integer_value, ...), "
                    f"got {type!r}", loc)
    if height is not None or width is not None:
        raise error(f"paddle.layer.data('{name}'): height and width are not in netc.v2 yet (img_conv reads a "
                    f"square image from the vector's width)", loc)
    return L.data(name, type=type)


def fc(input, size, act=None, name=None, param_attr=None, bias_attr=None, layer_attr=None):  # noqa: A002
    """A fully connected layer: act(sum_i input_i W_i + b); one weight per input `_<name>.w<i>`
    [width_i, size], one bias `_<name>.wbias` [1, size]. act defaults to Tanh."""
    loc = user_loc()
    xs = list(input) if isinstance(input, (list, tuple)) else [input]
    if not xs:
        raise error("paddle.layer.fc: input is a layer or a non-empty list of layers", loc)
    xs = [as_layer(x, "paddle.layer.fc", loc) for x in xs]
    if len({x.seq is None for x in xs}) > 1:
        raise error("paddle.layer.fc: its inputs are all sequences or all per-sample layers (a sequence's fc runs "
                    "at every step; reduce it over time first: pooling, last_seq)", loc)
    attrs = list(param_attr) if isinstance(param_attr, (list, tuple)) else [param_attr] * len(xs)
    if len(attrs) != len(xs):
        raise error(f"paddle.layer.fc: {len(attrs)} param_attr for {len(xs)} inputs", loc)
    a = act_of(act, A.Tanh(), "paddle.layer.fc", loc)
    name = default_name("fc_layer", name)
    has_bias, bfields = bias_fields(bias_attr, [1, size], loc)
    parts = []
    for i, (x, pa) in enumerate(zip(xs, attrs)):
        width = x.shape[-1] if x.seq is not None else math.prod(x.shape[1:])   # a sequence: per step
        roles = {"weight": (f"w{i}", init_fields(pa, [width, size], loc), [width, size])}
        if has_bias and i == 0:
            roles["bias"] = ("wbias", dict(bfields), [1, size])
        pn, pa2 = bind_params(name, roles)
        if len(x.shape) == 4:                         # an image: PaddlePaddle's rows are CHW, netc's HWC
            PARAM_LAYOUT[pn["weight"]] = ("image_rows", tuple(x.shape[1:]))
        one = len(xs) == 1
        parts.append(L.fc(x, size, act=a if one else None, bias=has_bias and i == 0,
                          name=name if one else f"{name}.in{i}", param_name=pn, param_attr=pa2))
    if len(parts) == 1:
        return with_extra(parts[0], layer_attr, name, loc)
    total = L.add(*parts, name=name if a is None else f"{name}.sum")
    out = {None: lambda t: t, "relu": L.relu, "sigmoid": L.sigmoid, "tanh": L.tanh,
           "softmax": L.softmax}[a]
    return with_extra(out(total) if a is None else out(total, name=name if a != "softmax" else f"{name}.prob"),
                  layer_attr, name, loc)


def _image(x, num_channels, what, loc) -> tuple:
    """(the NHWC layer, channels) of an image input: a conv/pool layer [N, H, W, C], or a dense vector of
    width C*H*W, H = W, read as PaddlePaddle reads it: C planes of H x W (CHW), made netc's HWC by slicing
    the planes and concatenating them as channels (the layers '<x>.planes', '<x>.plane<c>',
    '<x>.channel<c>', '<x>.image'; one reshape when C = 1). An image input is made once per data layer."""
    if len(x.shape) == 4:
        if num_channels is not None and num_channels != x.shape[-1]:
            raise error(f"{what}: num_channels {num_channels} but '{x.name}' has {x.shape[-1]} channels", loc,
                        [("defined here", x.loc)])
        return x, x.shape[-1]
    if len(x.shape) != 2:
        raise error(f"{what}: input is an image (a conv or pool layer) or a dense vector, '{x.name}' has shape "
                    f"{x.shape_str()}", loc)
    if num_channels is None:
        raise error(f"{what}: '{x.name}' is a vector; give num_channels (PaddlePaddle's rule: the image is "
                    f"num_channels x H x H)", loc)
    side = math.isqrt(x.shape[1] // num_channels) if x.shape[1] % num_channels == 0 else 0
    if side * side * num_channels != x.shape[1]:
        raise error(f"{what}: a vector of width {x.shape[1]} is no square image of {num_channels} channels", loc)
    if (x, num_channels) in _IMAGES:
        return _IMAGES[x, num_channels], num_channels
    if num_channels == 1:
        _IMAGES[x, 1] = L.reshape(x, [-1, side, side, 1], name=f"{x.name}.image")
        return _IMAGES[x, 1], 1
    # PaddlePaddle's vector is C planes of H x W (CHW); netc's images are HWC: each plane a channel
    planes = L.reshape(x, [-1, num_channels, side * side], name=f"{x.name}.planes")
    chans = [L.reshape(L.Slice(planes, dim=1, num_slices=num_channels, index=c, name=f"{x.name}.plane{c}"),
                       [-1, side, side, 1], name=f"{x.name}.channel{c}") for c in range(num_channels)]
    _IMAGES[x, num_channels] = L.concat(chans, axis=-1, name=f"{x.name}.image")
    return _IMAGES[x, num_channels], num_channels


def img_conv(input, filter_size, num_filters, name=None, num_channels=None, act=None, groups=1, stride=1,  # noqa: A002
             padding=0, bias_attr=None, param_attr=None, shared_biases=True, layer_attr=None, filter_size_y=None,
             stride_y=None, padding_y=None, trans=False, layer_type=None):
    """A 2-D convolution (PaddlePaddle's img_conv_layer): padding 0 and stride 1 by default, act Relu;
    parameters `_<name>.w0` (num_filters * channels * filter_size^2 values) and `_<name>.wbias`
    [num_filters, 1] (shared biases)."""
    loc = user_loc()
    what = "paddle.layer.img_conv"
    x = as_layer(input, what, loc)
    if groups != 1 or trans or not shared_biases or layer_type is not None:
        raise error(f"{what}: groups, trans, shared_biases=False and layer_type are not in netc.v2 yet", loc)
    fy = filter_size if filter_size_y is None else filter_size_y
    sy = stride if stride_y is None else stride_y
    py = padding if padding_y is None else padding_y
    a = act_of(act, A.Relu(), what, loc)
    if a == "softmax":
        raise error(f"{what}: act is Relu, Sigmoid, Tanh or Linear", loc)
    name = default_name("conv", name)
    img, c = _image(x, num_channels, what, loc)
    size = num_filters * c * filter_size * fy
    std = math.sqrt(2.0 / (filter_size ** 2 * c))        # PaddlePaddle's conv initial_smart
    roles = {"weight": ("w0", init_fields(param_attr, [1, size], loc, smart_std=std), [1, size])}
    has_bias, bfields = bias_fields(bias_attr, [num_filters, 1], loc)
    if has_bias:
        roles["bias"] = ("wbias", bfields, [num_filters, 1])
    pn, pa = bind_params(name, roles)
    PARAM_LAYOUT[pn["weight"]] = ("filter", (fy, filter_size, c, num_filters))
    out = L.conv2d(img, (fy, filter_size), num_filters, stride=(sy, stride), padding=(py, padding), act=a,
                   bias=has_bias, name=name, param_name=pn, param_attr=pa)
    return with_extra(out, layer_attr, name, loc)


def img_pool(input, pool_size, name=None, num_channels=None, pool_type=None, stride=1, padding=0,  # noqa: A002
             layer_attr=None, pool_size_y=None, stride_y=None, padding_y=None, ceil_mode=True, exclude_mode=None):
    """Max (default) or average pooling of an image (PaddlePaddle's img_pool_layer): stride 1, padding 0 by
    default. PaddlePaddle rounds the output size up (ceil_mode); netc's windows round down, so a size where
    the two differ is refused."""
    loc = user_loc()
    what = "paddle.layer.img_pool"
    x = as_layer(input, what, loc)
    pool_type = P.Max() if pool_type is None else pool_type
    if isinstance(pool_type, type) and issubclass(pool_type, P.BasePoolingType):
        pool_type = pool_type()
    if not isinstance(pool_type, P.BasePoolingType):
        raise error(f"{what}: pool_type is paddle.pooling.Max() or Avg(), got {pool_type!r}", loc)
    ky = pool_size if pool_size_y is None else pool_size_y
    sy = stride if stride_y is None else stride_y
    py = padding if padding_y is None else padding_y
    img, _ = _image(x, num_channels, what, loc)
    if pool_type.name == "avg" and (padding or py):
        raise error(f"{what}: average pooling with padding is not in netc.v2 yet", loc)
    for side, k, s, p in ((img.shape[1], ky, sy, py), (img.shape[2], pool_size, stride, padding)):
        if ceil_mode and (side + 2 * p - k) % s:
            raise error(f"{what}: PaddlePaddle's ceil_mode gives {side} -> {1 + -(-(side + 2 * p - k) // s)}, netc's "
                        f"pooling {1 + (side + 2 * p - k) // s}; choose sizes that divide (or ceil_mode=False)", loc)
    name = default_name("pool", name)
    out = L.pool(img, (ky, pool_size), stride=(sy, stride), padding=(py, padding), pool_type=pool_type.name,
                 name=name)
    return with_extra(out, layer_attr, name, loc)


def batch_norm(input, act=None, name=None, num_channels=None, bias_attr=None, param_attr=None,  # noqa: A002
               layer_attr=None, batch_norm_type=None, moving_average_fraction=0.9, use_global_stats=None,
               epsilon=1e-5, img3D=False, mean_var_names=None):  # noqa: N803 (PaddlePaddle's argument name)
    """Batch normalization per channel (an image's) or per feature (a vector's), act Relu by default:
    parameters `_<name>.w0` the scale (starting at 1), `_<name>.wbias` the shift (0), and PaddlePaddle's
    moving mean and variance `_<name>.w1`, `_<name>.w2` -- netc's running statistics (state
    `<name>.running_mean` / `running_var`, new = fraction * old + (1 - fraction) * batch)."""
    loc = user_loc()
    what = "paddle.layer.batch_norm"
    x = as_layer(input, what, loc)
    if use_global_stats or img3D or mean_var_names is not None or batch_norm_type not in (None, "batch_norm",
                                                                                          "cudnn_batch_norm"):
        raise error(f"{what}: use_global_stats, img3D, mean_var_names and batch_norm_type are not in netc.v2 yet", loc)
    if bias_attr is False:
        raise error(f"{what}: bias_attr=False is not in netc.v2 yet (netc's BatchNorm has its shift)", loc)
    a = act_of(act, A.Relu(), what, loc)
    if a == "softmax":
        raise error(f"{what}: act is Relu, Sigmoid, Tanh or Linear", loc)
    if len(x.shape) not in (2, 4):
        raise error(f"{what}: input is a vector or an image, '{x.name}' has shape {x.shape_str()}", loc)
    c = x.shape[-1]
    if num_channels is not None and len(x.shape) == 4 and num_channels != c:
        raise error(f"{what}: num_channels {num_channels} but '{x.name}' has {c} channels", loc)
    name = default_name("batch_norm", name)
    scale_attr = param_attr if param_attr is not None else Param(initial_mean=1.0, initial_std=0.0)
    _, bfields = bias_fields(bias_attr, [1, c], loc)
    pn, pa = bind_params(name, {"scale": ("w0", init_fields(scale_attr, [1, c], loc), [1, c]),
                          "shift": ("wbias", bfields, [1, c])})
    for suffix, state, start in (("w1", "running_mean", 0.0), ("w2", "running_var", 1.0)):
        PARAM_STATE[f"_{name}.{suffix}"] = (f"{name}.{state}", start, c, pn["scale"])
        PARAM_DIMS[f"_{name}.{suffix}"] = (1, c)
    out = L.batch_norm(x, act=a, epsilon=epsilon, momentum=moving_average_fraction, name=name, param_name=pn,
                       param_attr=pa)
    return with_extra(out, layer_attr, name, loc)


def dropout(input, dropout_rate, name=None):  # noqa: A002
    """PaddlePaddle's dropout layer: values dropped with probability dropout_rate in training. netc's Dropout
    scales the kept values by 1 / (1 - rate) in training and is the identity in inference; PaddlePaddle
    scales by (1 - rate) in inference instead (docs/v2.md)."""
    loc = user_loc()
    x = as_layer(input, "paddle.layer.dropout", loc)
    return L.dropout(x, dropout_rate=dropout_rate, name=default_name("dropout", name))


def addto(input, act=None, name=None, bias_attr=False, layer_attr=None):  # noqa: A002
    """The sum of same-shaped layers, act Linear by default (PaddlePaddle's addto_layer, no bias)."""
    loc = user_loc()
    xs = [as_layer(x, "paddle.layer.addto", loc) for x in (input if isinstance(input, (list, tuple)) else [input])]
    if bias_attr not in (False, None):
        raise error("paddle.layer.addto: bias_attr is not in netc.v2 yet", loc)
    a = act_of(act, A.Linear(), "paddle.layer.addto", loc)
    if a == "softmax":
        raise error("paddle.layer.addto: act is Relu, Sigmoid, Tanh or Linear", loc)
    name = default_name("addto", name)
    total = xs[0] if len(xs) == 1 else L.add(*xs, name=name if a is None else f"{name}.sum")
    out = total if a is None else {"relu": L.relu, "sigmoid": L.sigmoid, "tanh": L.tanh}[a](total, name=name)
    return with_extra(out, layer_attr, name, loc)


def _cost(kind, netc_loss, input, label, name, coeff, weight, loc, scale):  # noqa: A002
    x = as_layer(input, f"paddle.layer.{kind}", loc)
    as_layer(label, f"paddle.layer.{kind}", loc)
    if weight is not None:
        raise error(f"paddle.layer.{kind}: weight= is not in netc.v2 yet", loc)
    if isinstance(coeff, bool) or not isinstance(coeff, (int, float)) or coeff <= 0:
        raise error(f"paddle.layer.{kind}: coeff is a positive number, got {coeff!r}", loc)
    c = netc_loss(x, label, name=default_name(kind if kind != "classification_cost" else "cost", name))
    COST_SCALE[c] = scale * float(coeff)
    return c


def _softmax_input(x, kind, loc):
    if not (isinstance(x, Layer) and x.opdef is not None and x.opdef.name == "softmax"):
        raise error(f"paddle.layer.{kind} reads probabilities: give it a layer made with act=paddle.activation."
                    f"Softmax() ('{getattr(x, 'name', x)}' is not a softmax)", loc,
                    [("defined here", x.loc)] if isinstance(x, Layer) else ())


def classification_cost(input, label, weight=None, name=None, evaluator=None, layer_attr=None, coeff=1.0):  # noqa: A002
    """-log p[label] per sample of a Softmax layer's probabilities (netc trains on its logits), with
    PaddlePaddle's classification_error_evaluator metric."""
    loc = user_loc()
    _softmax_input(input, "classification_cost", loc)
    c = _cost("classification_cost", L.softmax_loss, input, label, name, coeff, weight, loc, 1.0)
    CLASSIFIERS.add(c)
    return c


def cross_entropy_cost(input, label, name=None, coeff=1.0, weight=None, layer_attr=None):  # noqa: A002
    """-log p[label] per sample of a Softmax layer's probabilities."""
    loc = user_loc()
    _softmax_input(input, "cross_entropy_cost", loc)
    return _cost("cross_entropy_cost", L.softmax_loss, input, label, name, coeff, weight, loc, 1.0)


def square_error_cost(input, label, weight=None, name=None, coeff=1.0, layer_attr=None):  # noqa: A002
    """sum over the features of (input - label)^2 per sample (netc's EuclideanLoss is half its batch mean)."""
    loc = user_loc()
    return _cost("square_error_cost", L.euclidean, input, label, name, coeff, weight, loc, 2.0)


mse_cost = regression_cost = square_error_cost

__all__ = ["embedding", "table_projection", "full_matrix_projection", "mixed", "concat", "lstmemory", "grumemory",
           "pooling", "last_seq", "first_seq", "cos_sim", "data", "fc", "img_conv", "img_pool", "batch_norm", "dropout",
           "addto", "classification_cost",
           "cross_entropy_cost", "square_error_cost", "mse_cost", "regression_cost", "default_name", "to_paddle",
           "from_paddle", "PARAM_DIMS", "PARAM_LAYOUT", "PARAM_STATE", "COST_SCALE", "CLASSIFIERS"]
__getattr__ = missing_names(__name__, [n for n in __all__ if not n.isupper()
                                       and n not in ("default_name", "to_paddle", "from_paddle")])
