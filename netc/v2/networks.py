"""paddle.networks: PaddlePaddle v2's composed networks, from netc.v2.layer's layers.

simple_img_conv_pool: img_conv then img_pool, named `<name>_conv` and `<name>_pool` (name defaults to
`__conv_pool_<n>__`, PaddlePaddle's), so the parameters are `_<name>_conv.w0` and `_<name>_conv.wbias`."""
from __future__ import annotations

from . import layer as v2layer
from .names import missing_names


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


__all__ = ["simple_img_conv_pool"]
__getattr__ = missing_names(__name__, __all__)
