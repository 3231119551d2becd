"""Depthwise convolution (MobileNet's): each input channel convolved with its own filters. NHWC.

netc.depthwise_conv2d has filter [kh, kw, C, M] (M filters per channel, the channel multiplier); output
channel c * M + m is input channel c convolved with filter [:, :, c, m] (TensorFlow's depthwise order, and
ONNX's Conv with group = C, whose output channel o belongs to group o // M). Windows, strides and padding
are conv2d's (Paleo's VALID/SAME/explicit rules, netc.ops.geometry). Paleo has no depthwise layer: FLOPs
count 2 per multiply-add over the windows, kh*kw*C*M*OH*OW*N multiply-adds forward, as many for the data
gradient and as many for the filter gradient; parameters kh*kw*C*M (+ C*M bias).
"""
from __future__ import annotations

from .activation import fused_activation_grad
from .geometry import out_size
from .registry import AttrSpec, Cost, OpDef, ShapeError, register

ACTIVATIONS = ("none", "relu", "sigmoid", "tanh")

_GEOMETRY = {
    "filter": AttrSpec("ints", length=4, doc="[kh, kw, channels, multiplier]; channels -1 = infer"),
    "strides": AttrSpec("ints", [1, 1, 1, 1], length=4, doc="[1, sh, sw, 1]"),
    "padding": AttrSpec("padding", "SAME"),
}


def depthwise_geometry(a: dict, x: tuple) -> tuple:
    """(oh, ow, kh, kw, c, m) of a depthwise convolution with attributes `a` on the NHWC input shape x;
    raises ShapeError for an input or filter that does not fit."""
    if len(x) != 4:
        raise ShapeError(f"a depthwise convolution needs a rank-4 NHWC input, got rank {len(x)} {list(x)}", operand=0)
    kh, kw, c, m = a["filter"]
    if min(kh, kw, m) <= 0 or (c <= 0 and c != -1):
        raise ShapeError(f"filter dimensions must be positive (channels may be -1), got {a['filter']}", attr="filter")
    if c == -1:
        c = x[3]
    if c != x[3]:
        raise ShapeError(f"filter expects {c} input channels but the input has {x[3]}", attr="filter",
                         notes=[f"input shape is {list(x)} (NHWC)"])
    sh, sw = a["strides"][1], a["strides"][2]
    if sh <= 0 or sw <= 0:
        raise ShapeError(f"strides must be positive, got {a['strides']}", attr="strides")
    oh, _ = out_size(x[1], kh, sh, a["padding"], 0)
    ow, _ = out_size(x[2], kw, sw, a["padding"], 1)
    if oh <= 0 or ow <= 0:
        raise ShapeError(f"a {kh}x{kw} filter does not fit the {x[1]}x{x[2]} input (output would be {oh}x{ow})",
                         attr="filter")
    return oh, ow, kh, kw, c, m


def _flops(a, x) -> int:
    oh, ow, kh, kw, c, m = depthwise_geometry(a, x)
    return 2 * kh * kw * c * m * oh * ow * x[0]


def _grouped_weight(w):
    """[kh, kw, C, M] -> torch's grouped-convolution weight [C*M, 1, kh, kw] (output channel c*M + m)."""
    kh, kw, c, m = w.shape
    return w.reshape(kh, kw, c * m).permute(2, 0, 1).unsqueeze(1).contiguous()


def _sweep(a, x_shape):
    """((sh, sw), (top, bottom, left, right)) of the zero padding that gives netc's windows."""
    from . import reference as R      # lazy: torch is slow to import
    kh, kw = a["filter"][0], a["filter"][1]
    sh, sw = a["strides"][1], a["strides"][2]
    _, _, t, b, l, r = R.pads(x_shape[1], x_shape[2], kh, kw, sh, sw, a["padding"])
    return (sh, sw), (t, b, l, r)


@register
class DepthwiseConv2D(OpDef):
    name = "depthwise_conv2d"
    types = ("DepthwiseConvolution",)
    arity = (1, 1)
    param_roles = ("weight", "bias")
    attrs = dict(_GEOMETRY, activation=AttrSpec("enum", "none", ACTIVATIONS),
                 bias=AttrSpec("bool", True, doc="false: no bias parameter"))
    doc = ("Depthwise 2-D convolution (MobileNet's), NHWC input, filter [kh, kw, C, M]: output channel c*M + m "
           "is channel c convolved with filter [:, :, c, m]; conv2d's windows and padding, a bias of C*M, a fused "
           "activation.")

    def infer(self, a, ins):
        oh, ow, _, _, c, m = depthwise_geometry(a, ins[0])
        return (ins[0][0], oh, ow, c * m)

    def param_shapes(self, a, ins, out):
        _, _, kh, kw, c, m = depthwise_geometry(a, ins[0])
        shapes = {"weight": (kh, kw, c, m)}
        if a.get("bias", True):
            shapes["bias"] = (c * m,)
        return shapes

    def cost(self, a, ins, out, needs_input_grad=True):
        f = _flops(a, ins[0])
        return Cost(f, f if needs_input_grad else 0, f)

    def reference(self, a, ins, params):
        import torch.nn.functional as F
        from . import reference as R      # lazy: torch is slow to import
        x, w = R.product_operand(ins[0]), R.product_operand(params["weight"])
        s, (t, b, l, r) = _sweep(a, x.shape)
        y = F.conv2d(F.pad(x.permute(0, 3, 1, 2).contiguous(), (l, r, t, b)), _grouped_weight(w), stride=s,
                     groups=w.shape[2])   # (contiguous: torch's grouped conv of a permuted view is ~7x slower)
        return R.epilogue(y.permute(0, 2, 3, 1), params.get("bias"), activation_=a["activation"])

    def eager(self, a, params, x_shape, out_shape, training):
        """torch's grouped convolution (groups = C), on NCHW views of channels_last storage."""
        import torch.nn.functional as F
        from . import eager as E
        w0, b = params["weight"], params.get("bias")
        s, (t, bo, l, r) = _sweep(a, x_shape)
        groups = w0.shape[2]

        def conv(x):
            y = F.conv2d(F.pad(E.nchw(x), (l, r, t, bo)), _grouped_weight(w0), b, s, groups=groups)
            return E.nhwc(E.act(y, a))
        return conv

    def onnx(self, a, w, op):
        """Conv with group = C, the filter [kh, kw, C, M] as [C*M, 1, kh, kw]."""
        kh, kw = a["filter"][0], a["filter"][1]
        nm = a.get("name") or "depthwise"
        c = op.operands[0].type.shape[3]
        x, pads = w.window_pads(op, w.x(op, 0, "nchw"), kh, kw, a["strides"], a["padding"], nm)
        ins = [x, w.param(op, "weight", lambda f: f.reshape(kh, kw, -1).transpose(2, 0, 1)[:, None], ".oihw")]
        if a.get("bias", True):
            ins.append(w.param(op, "bias"))
        y = w.node("Conv", ins, hint=nm, kernel_shape=[kh, kw], strides=list(a["strides"][1:3]), pads=pads, group=c)
        w.result(op, w.activation(y, a.get("activation"), nm + "." + str(a.get("activation"))), "nchw")

    def gradient(self, g, op, dy):
        """The fused activation's gradient, then the data gradient (a grouped transposed convolution), the
        filter gradient and the bias gradient, each only where needed."""
        a = self.attrs_of(op)
        dz = fused_activation_grad(g, op, dy, a["activation"])
        geo = {k: a[k] for k in _GEOMETRY}
        x = op.operands[0]
        dx = dw = db = None
        if g.needs(0):
            dx = g.emit("netc.depthwise_conv2d_grad_data", [dz], dict(geo, input_shape=list(x.type.shape)),
                        params={"weight": g.param("weight")}, tag="grad_data")
        if g.needs_param("weight"):
            dw = g.emit("netc.depthwise_conv2d_grad_filter", [x, dz], geo, tag="grad_filter")
        if g.needs_param("bias"):
            db = g.emit("netc.bias_grad", [dz], tag="grad_bias")
        return [dx], {"weight": dw, "bias": db}


def _check_dz(a, x, dz, operand):
    oh, ow, _, _, c, m = depthwise_geometry(a, x)
    if tuple(dz) != (x[0], oh, ow, c * m):
        raise ShapeError(f"the gradient {list(dz)} is not the depthwise convolution's output for input {list(x)}",
                         operand=operand)


@register
class DepthwiseConv2DGradData(OpDef):
    name = "depthwise_conv2d_grad_data"
    training_only = True
    arity = (1, 1)
    param_roles = ("weight",)
    attrs = dict(_GEOMETRY, input_shape=AttrSpec("shape", doc="the forward input's shape, NHWC"))
    doc = ("The data gradient of depthwise_conv2d: dz (the gradient before bias and activation) -> dx, the grouped "
           "transposed convolution with the layer's weight. FLOPs: the forward's.")

    def infer(self, a, ins):
        x = tuple(a["input_shape"])
        _check_dz(a, x, ins[0], 0)
        return x

    def param_shapes(self, a, ins, out):
        _, _, kh, kw, c, m = depthwise_geometry(a, out)
        return {"weight": (kh, kw, c, m)}

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(_flops(a, out))

    def reference(self, a, ins, params):
        import torch.nn.functional as F
        from . import reference as R      # lazy: torch is slow to import
        dz, w = R.in_compute_dtype(ins[0]), R.in_compute_dtype(params["weight"])
        s, (t, b, l, r) = _sweep(a, a["input_shape"])
        dxp = F.conv_transpose2d(dz.permute(0, 3, 1, 2).contiguous(), _grouped_weight(w), stride=s, groups=w.shape[2])
        return F.pad(dxp, (-l, -r, -t, -b)).permute(0, 2, 3, 1)


@register
class DepthwiseConv2DGradFilter(OpDef):
    name = "depthwise_conv2d_grad_filter"
    training_only = True
    arity = (2, 2)
    unbatched = True
    attrs = dict(_GEOMETRY)
    doc = ("The filter gradient of depthwise_conv2d: the forward input x and dz (the gradient before bias and "
           "activation) -> dW [kh, kw, C, M]. FLOPs: the forward's.")

    def infer(self, a, ins):
        x, dz = ins
        _check_dz(a, x, dz, 1)
        _, _, kh, kw, c, m = depthwise_geometry(a, x)
        return (kh, kw, c, m)

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(_flops(a, ins[0]))

    def reference(self, a, ins, params):
        """dW[i, j, c, m] = sum over n, p, q of xpad[n, p*sh + i, q*sw + j, c] * dz[n, p, q, c*M + m]: a grouped
        correlation of the padded input (the batch as each group's channels) with dz as the filter, the stride
        as its dilation."""
        import torch.nn.functional as F
        from . import reference as R      # lazy: torch is slow to import
        x, dz = R.in_compute_dtype(ins[0]), R.in_compute_dtype(ins[1])
        n, _, _, c = x.shape
        kh, kw = a["filter"][0], a["filter"][1]
        m = dz.shape[3] // c
        s, (t, b, l, r) = _sweep(a, x.shape)
        xp = F.pad(x.permute(0, 3, 1, 2), (l, r, t, b))                      # [N, C, Hp, Wp]
        cols = xp.transpose(0, 1).reshape(1, c * n, xp.shape[2], xp.shape[3])
        dw = F.conv2d(cols, dz.permute(3, 0, 1, 2), dilation=s, groups=c)[0, :, :kh, :kw]   # [C*M, kh, kw]
        return dw.reshape(c, m, kh, kw).permute(2, 3, 0, 1).contiguous()
