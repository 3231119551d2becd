"""paddle.networks: PaddlePaddle v2's composed networks, from netc.v2.layer's layers.

img_conv_group: convolutions (each with a batch norm and dropout when asked) and a pooling.

simple_lstm, simple_gru: a mixed layer projecting to 4H / 3H, then lstmemory / grumemory.
sequence_conv_pool: a context projection and fc as one convolution over time, then a pooling.

simple_img_conv_pool: img_conv then img_pool, named `<name>_conv` and `<name>_pool` (name defaults to
`__conv_pool_<n>__`, PaddlePaddle's), so the parameters are `_<name>_conv.w0` and `_<name>_conv.wbias`."""
from __future__ import annotations

from . import activation as A
from . import layer as v2layer
from .attr import Extra
from .names import missing_names
from .seqlayer import sequence_conv


def simple_img_conv_pool(input, filter_size, num_filters, pool_size, name=None, pool_type=None, act=None,  # noqa: A002
                         groups=1, conv_stride=1, conv_padding=0, bias_attr=None, num_channel=None, param_attr=None,
                         shared_bias=True, conv_layer_attr=None, pool_stride=1, pool_padding=0,
                         pool_layer_attr=None):
    """A convolution (act Relu by default) and a pooling (Max by default) of its output."""
    name = v2layer.default_name("conv_pool", name)
    conv = v2layer.img_conv(input, filter_size, num_filters, name=f"{name}_conv", num_channels=num_channel, act=act,
                            groups=groups, stride=conv_stride, padding=conv_padding, bias_attr=bias_attr,
                            param_attr=param_attr, shared_biases=shared_bias, layer_attr=conv_layer_attr)
    return v2layer.img_pool(conv, pool_size, name=f"{name}_pool", pool_type=pool_type, stride=pool_stride,
                            padding=pool_padding, layer_attr=pool_layer_attr)


def _per_conv(v, n, what):
    """A value per convolution of img_conv_group (one value: the same for all)."""
    vs = list(v) if isinstance(v, (list, tuple)) else [v] * n
    if len(vs) != n:
        from ..api.errors import error, user_loc
        raise error(f"paddle.networks.img_conv_group: {len(vs)} values of {what} for {n} convolutions", user_loc())
    return vs


def img_conv_group(input, conv_num_filter, pool_size, num_channels=None, conv_padding=1,  # noqa: A002
                   conv_filter_size=3, conv_act=None, conv_with_batchnorm=False, conv_batchnorm_drop_rate=0,
                   pool_stride=1, pool_type=None, param_attr=None):
    """Convolutions of conv_num_filter filters each (3x3, padding 1 by default), each followed by a batch
    norm (with conv_with_batchnorm: the convolution linear, the batch norm with conv_act and a dropout of
    conv_batchnorm_drop_rate), then one pooling -- PaddlePaddle's img_conv_group, layers named by their
    kinds' counters."""
    n = len(conv_num_filter)
    paddings = _per_conv(conv_padding, n, "conv_padding")
    sizes = _per_conv(conv_filter_size, n, "conv_filter_size")
    acts = _per_conv(conv_act, n, "conv_act")
    with_bn = _per_conv(conv_with_batchnorm, n, "conv_with_batchnorm")
    drops = _per_conv(conv_batchnorm_drop_rate, n, "conv_batchnorm_drop_rate")
    attrs = _per_conv(param_attr, n, "param_attr")
    tmp = input
    for i in range(n):
        tmp = v2layer.img_conv(tmp, sizes[i], conv_num_filter[i], num_channels=num_channels if i == 0 else None,
                               padding=paddings[i], param_attr=attrs[i],
                               act=A.Linear() if with_bn[i] else acts[i])
        if with_bn[i]:
            tmp = v2layer.batch_norm(tmp, act=acts[i],
                                     layer_attr=Extra(drop_rate=drops[i]) if drops[i] else None)
    return v2layer.img_pool(tmp, pool_size, stride=pool_stride, pool_type=pool_type)


def simple_lstm(input, size, name=None, reverse=False, mat_param_attr=None, bias_param_attr=None,  # noqa: A002
                inner_param_attr=None, act=None, gate_act=None, state_act=None, mixed_layer_attr=None,
                lstm_cell_attr=None):
    """PaddlePaddle's simple_lstm: a mixed layer 'lstm_transform_<name>' (a full_matrix_projection to
    4 * size, no bias, `_lstm_transform_<name>.w0`) and lstmemory '<name>' over it."""
    name = v2layer.default_name("lstm", name)
    m = v2layer.mixed(size * 4, [v2layer.full_matrix_projection(input, size * 4, mat_param_attr)],
                      name=f"lstm_transform_{name}", act=A.Linear(), bias_attr=False, layer_attr=mixed_layer_attr)
    return v2layer.lstmemory(m, name=name, size=size, reverse=reverse, act=act, gate_act=gate_act,
                             state_act=state_act, bias_attr=bias_param_attr, param_attr=inner_param_attr,
                             layer_attr=lstm_cell_attr)


def simple_gru(input, size, name=None, reverse=False, mixed_param_attr=None, mixed_bias_param_attr=None,  # noqa: A002
               mixed_layer_attr=None, gru_bias_attr=None, gru_param_attr=None, act=None, gate_act=None,
               gru_layer_attr=None, naive=False):
    """PaddlePaddle's simple_gru: a mixed layer '<name>_transform' (full_matrix_projection to 3 * size,
    `_<name>_transform.w0`, no bias unless mixed_bias_param_attr) and grumemory '<name>_gru'... named as
    PaddlePaddle's gru_group / grumemory: the recurrent layer is '<name>'."""
    name = v2layer.default_name("simple_gru", name)
    m = v2layer.mixed(size * 3, [v2layer.full_matrix_projection(input, size * 3, mixed_param_attr)],
                      name=f"{name}_transform", act=A.Linear(), bias_attr=mixed_bias_param_attr or False,
                      layer_attr=mixed_layer_attr)
    return v2layer.grumemory(m, name=name, size=size, reverse=reverse, act=act, gate_act=gate_act,
                             bias_attr=gru_bias_attr, param_attr=gru_param_attr, layer_attr=gru_layer_attr)


def sequence_conv_pool(input, context_len, hidden_size, name=None, context_start=None, pool_type=None,  # noqa: A002
                       context_proj_layer_name=None, context_proj_param_attr=False, fc_layer_name=None,
                       fc_param_attr=None, fc_bias_attr=None, fc_act=None, pool_bias_attr=None, fc_attr=None,
                       context_attr=None, pool_attr=None):
    """PaddlePaddle's sequence_conv_pool: a context projection of context_len steps (zero padding), an fc of
    hidden_size (act Tanh) named '<name>_conv_fc' (parameters `_<name>_conv_fc.w0` [context_len * E,
    hidden_size], `_<name>_conv_fc.wbias`), and a pooling over time '<name>' (Max by default) -- as a netc
    convolution over time (netc.v2.seqlayer.sequence_conv). A trainable context padding, extra layer
    attributes and a pooling bias are not in netc.v2 yet."""
    from ..api.errors import error, user_loc
    loc = user_loc()
    if context_proj_param_attr not in (False, None) or pool_bias_attr not in (None, False) or \
            any(v is not None for v in (fc_attr, context_attr, pool_attr, context_proj_layer_name)):
        raise error("paddle.networks.sequence_conv_pool: a trainable context padding (context_proj_param_attr), "
                    "pool_bias_attr, the layer attributes and context_proj_layer_name are not in netc.v2 yet", loc)
    name = v2layer.default_name("sequence_conv_pooling", name)
    fc = sequence_conv(input, context_len, hidden_size, fc_layer_name or f"{name}_conv_fc",
                       context_start=context_start, act=fc_act, param_attr=fc_param_attr, bias_attr=fc_bias_attr,
                       loc=loc)
    return v2layer.pooling(fc, pooling_type=pool_type, name=name)


__all__ = ["simple_img_conv_pool", "img_conv_group", "simple_lstm", "simple_gru", "sequence_conv_pool"]
__getattr__ = missing_names(__name__, __all__)
