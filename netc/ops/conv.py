"""Convolutions: conv2d (Paleo's Convolution) and deconv2d (Deconvolution). NHWC, filters HWIO.

Shapes and costs follow Paleo exactly (shared/spec/paleo-format.md §6.2, §6.4, §8, §9), including
its stored SAME padding (which may be negative) and the hole-fraction arithmetic of its
backward-pass geometry, done in double precision as Paleo does.
"""
from __future__ import annotations

from .activation import fused_activation_grad
from .geometry import ceil_div, out_size  # noqa: F401  (out_size: the op's geometry, also for importers)
from .registry import AttrSpec, Cost, OpDef, ShapeError, TimeTerms, prod, register

ACTIVATIONS = ("none", "relu", "sigmoid", "tanh")
NORMALIZERS = ("none", "batch_norm")




def conv_geometry(a: dict, x: tuple):
    """(oh, ow, ph, pw, kh, kw, ci, co) for a conv2d with attributes `a` on input x."""
    kh, kw, ci, co = a["filter"]
    if ci == -1:
        ci = x[3]
    splits = a.get("splits")
    if splits:
        co = co // splits
    sh, sw = a["strides"][1], a["strides"][2]
    oh, ph = out_size(x[1], kh, sh, a["padding"], 0)
    ow, pw = out_size(x[2], kw, sw, a["padding"], 1)
    return oh, ow, ph, pw, kh, kw, ci, co


def _bwd_axis(H, kh, sh, oh, ph):
    """Paleo's backward geometry along one axis: (eh, q)."""
    eh = (oh - 1) * sh + 1
    pb = kh - 1 - ph
    pa = (H + kh - 1) - eh - pb
    if abs(pb - pa) == 1:
        eh += 1
    return eh, min(pb, pa)


def conv_backward_flops(x, filt, strides, padding, out, needs_input_grad=True):
    """(bwd_data, bwd_filter) FLOPs as Paleo computes them (§9.1). Raises ShapeError when
    Paleo's gradient geometry does not close (its assertions)."""
    N, H, W, C = x
    kh, kw, _, K = filt
    _, oh, ow, _ = out
    sh, sw = strides
    ph, pw = padding
    eh, qh = _bwd_axis(H, kh, sh, oh, ph)
    ew, qw = _bwd_axis(W, kw, sw, ow, pw)
    rho = (eh * ew - oh * ow) / (eh * ew)
    if needs_input_grad:
        Hp, Wp = eh + 2 * qh - kh + 1, ew + 2 * qw - kw + 1
        if (Hp, Wp) != (H, W):
            raise ShapeError(f"Paleo's data-gradient geometry gives {Hp}x{Wp}, not the input's {H}x{W}")
        bwd_data = 2 * kh * kw * K * Hp * Wp * C * N
        if rho > 0:
            bwd_data += 2 * N * eh * ew * K * (1.0 - rho)
    else:
        bwd_data = 0
    if padding_is_valid(padding):
        khp, kwp = H - eh + 1, W - ew + 1
    else:
        khp, kwp = H + 2 * qh - eh + 1, W + 2 * qw - ew + 1
    bwd_filter = 2 * eh * ew * N * khp * kwp * K * C * (1.0 - rho)
    return bwd_data, bwd_filter


class _Valid(tuple):
    """A (0, 0) padding that remembers it came from "VALID" (Paleo treats it differently)."""


def padding_is_valid(p) -> bool:
    return isinstance(p, _Valid)


@register
class Conv2D(OpDef):
    name = "conv2d"
    gemm_epilogue = True
    feature_params = {"weight": -1, "bias": 0}   # HWIO filter: its output channels last
    feature_attr, feature_noun, singa_feature_field = ("filter", 3), "output channels", "num_filters"
    singa_one_to_all = ("v0.1", "v0.2+")
    types = ("Convolution",)
    arity = (1, 1)
    param_roles = ("weight", "bias")
    attrs = {
        "filter": AttrSpec("ints", length=4, doc="[kh, kw, c_in, c_out]; c_in -1 = infer"),
        "strides": AttrSpec("ints", [1, 1, 1, 1], length=4, doc="[1, sh, sw, 1]"),
        "padding": AttrSpec("padding", "SAME"),
        "activation": AttrSpec("enum", "none", ACTIVATIONS),
        "normalizer": AttrSpec("enum", "none", NORMALIZERS),
        "bias": AttrSpec("bool", True, doc="false: no bias parameter (Paleo's JSON `bias` key is ignored on "
                                           "import: Paleo always counts one)"),
    }
    doc = "2-D convolution, NHWC input, HWIO filter, Paleo's VALID/SAME rules."

    def singa_layer(self, a, ins, v1, scale, plain):
        from .singa import SingaInexpressible as No, geometry
        nm = a.get("name")
        kh, kw, _, co = a["filter"]
        if a.get("splits"):
            raise No(f"'{nm}' splits its filters (model parallelism): write the unexpanded net")
        if a.get("normalizer", "none") != "none":
            raise No(f"'{nm}' has a fused {a['normalizer']}, which SINGA convolutions cannot express")
        geo = geometry(nm, "convolution", ins[0], (kh, kw), a.get("strides", [1, 1, 1, 1])[1:3],
                       a.get("padding", "SAME"), v1)
        conf = f"convolution_conf {{ num_filters: {co * scale} {geo} }}"
        bias = a.get("bias", True)
        if v1 and not bias:
            raise No(f"convolution '{nm}' has no bias; SINGA v0.1 convolutions always have one")
        return ("kConvolution" if v1 else "kCConvolution"), [conf], (["weight", "bias"] if bias else ["weight"])

    def onnx(self, a, w, op):
        """Conv on NCHW with the HWIO filter as OIHW, Paleo's padding as explicit pads (a crop first
        where netc drops overhanging rows), the fused activation after it."""
        if a.get("splits"):
            raise NotImplementedError(f"'{a.get('name')}' splits its filters (model parallelism)")
        kh, kw = a["filter"][0], a["filter"][1]
        nm = a.get("name") or "conv"
        x, pads = w.window_pads(op, w.x(op, 0, "nchw"), kh, kw, a["strides"], a["padding"], nm)
        ins = [x, w.param(op, "weight", lambda f: f.transpose(3, 2, 0, 1), ".oihw")]
        if a.get("bias", True):
            ins.append(w.param(op, "bias"))
        y = w.node("Conv", ins, hint=nm, kernel_shape=[kh, kw], strides=list(a["strides"][1:3]), pads=pads)
        w.result(op, w.activation(y, a.get("activation"), nm + "." + str(a.get("activation"))), "nchw")

    def eager(self, a, params, x_shape, out_shape, training):
        """cuDNN's convolution (NCHW views of channels_last storage); an asymmetric SAME padding pads
        (or crops) first, as Paleo does. Training rearranges the weight inside the step, where
        autograd sees it and an update is seen; inference once, here."""
        import torch
        import torch.nn.functional as F
        from . import eager as E
        kh, kw = params["weight"].shape[0], params["weight"].shape[1]
        w0 = params["weight"]
        oihw = lambda: w0.permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)  # noqa: E731
        w = None if training else oihw()
        b = params.get("bias")
        stride = (a["strides"][1], a["strides"][2])
        pad = E.torch_padding(x_shape, kh, kw, a)
        explicit = E.explicit_pads(x_shape, kh, kw, a) if pad is None else None

        def conv(x):
            x = E.nchw(x)
            if explicit is not None:   # asymmetric SAME: pad (or crop) first, as Paleo does
                x = F.pad(x, explicit)
            return E.nhwc(E.act(F.conv2d(x, w if w is not None else oihw(), b, stride, pad or 0), a))
        return conv

    def infer(self, a, ins):
        (x,) = ins
        if len(x) != 4:
            raise ShapeError(f"Convolution needs a rank-4 NHWC input, got rank {len(x)} {list(x)}", operand=0)
        kh, kw, ci, co = a["filter"]
        if min(kh, kw) <= 0 or co <= 0 or (ci <= 0 and ci != -1):
            raise ShapeError(f"filter dimensions must be positive (c_in may be -1), got {a['filter']}", attr="filter")
        if a["strides"][1] <= 0 or a["strides"][2] <= 0:
            raise ShapeError(f"strides must be positive, got {a['strides']}", attr="strides")
        oh, ow, ph, pw, kh, kw, ci, co = conv_geometry(a, x)
        if ci != x[3]:
            raise ShapeError(f"filter expects {ci} input channels but the input has {x[3]}", attr="filter",
                             notes=[f"input shape is {list(x)} (NHWC)"])
        if oh <= 0 or ow <= 0:
            raise ShapeError(f"a {kh}x{kw} filter does not fit the {x[1]}x{x[2]} input (output would be {oh}x{ow})",
                             attr="filter")
        if co <= 0:
            raise ShapeError(f"{a['filter'][3]} output channels split {a.get('splits')} ways leaves none", attr="filter")
        return (x[0], oh, ow, co)

    def param_shapes(self, a, ins, out):
        x = ins[0]
        kh, kw, ci, _ = a["filter"]
        ci = x[3] if ci == -1 else ci
        shapes = {"weight": (kh, kw, ci, out[3])}
        if a.get("bias", True):          # `bias: false`: no bias parameter, none added, none trained
            shapes["bias"] = (out[3],)
        return shapes

    def cost(self, a, ins, out, needs_input_grad=True):
        x = ins[0]
        oh, ow, ph, pw, kh, kw, ci, co = conv_geometry(a, x)
        fwd = 2 * kh * kw * ci * oh * ow * co * x[0]
        pad = _Valid((0, 0)) if a["padding"] == "VALID" else (ph, pw)
        bd, bf = conv_backward_flops(x, (kh, kw, ci, co), (a["strides"][1], a["strides"][2]), pad, out,
                                     needs_input_grad)
        return Cost(fwd, bd, bf)

    def paleo_timing(self, a, ins, out, needs_input_grad=True):
        """Paleo's GEMM estimates (§10): forward on the padded input; the data gradient a stride-1
        convolution of the (hole-expanded) output gradient, none when the layer reads a network
        input; the filter gradient a convolution of the input with the output gradient as filter;
        the backward passes' FLOPs and filter bytes scaled by the fraction without holes."""
        N, H, W, C = ins[0]
        oh, ow, ph, pw, kh, kw, _, K = conv_geometry(a, ins[0])
        eh, qh = _bwd_axis(H, kh, a["strides"][1], oh, ph)
        ew, qw = _bwd_axis(W, kw, a["strides"][2], ow, pw)
        keep = 1.0 - (eh * ew - oh * ow) / (eh * ew)
        t = {"fwd": TimeTerms(2 * kh * kw * C * oh * ow * K * N,
                              (N * (H + 2 * ph) * (W + 2 * pw) * C, kh * kw * C * K, N * oh * ow * K))}
        if needs_input_grad:
            hp, wp = eh + 2 * qh - kh + 1, ew + 2 * qw - kw + 1
            t["bwd_data"] = TimeTerms(2 * kh * kw * K * hp * wp * C * N * keep,
                                      (N * (eh + 2 * qh) * (ew + 2 * qw) * K, kh * kw * K * C * keep, N * hp * wp * C))
        if a["padding"] == "VALID":
            khp, kwp, x_elems = H - eh + 1, W - ew + 1, C * H * W * N
        else:
            khp, kwp, x_elems = H + 2 * qh - eh + 1, W + 2 * qw - ew + 1, C * (H + 2 * qh) * (W + 2 * qw) * N
        t["bwd_filter"] = TimeTerms(2 * eh * ew * N * khp * kwp * K * C * keep,
                                    (x_elems, eh * ew * N * K * keep, C * khp * kwp * K))
        return t

    def reference(self, a, ins, params):
        # `normalizer: batch_norm` is bookkeeping only (Paleo's flag, no parameters): ignored here.
        from . import reference as R      # lazy: torch is slow to import
        return R.conv2d(ins[0], params["weight"], params.get("bias"), a["strides"], a["padding"],
                        activation=a["activation"])

    def gradient(self, g, op, dy):
        """The fused activation's gradient, then the data gradient (a transposed convolution), the
        filter gradient and the bias gradient, each only where needed."""
        a = self.attrs_of(op)
        dz = fused_activation_grad(g, op, dy, a["activation"])
        geo = {k: a[k] for k in ("filter", "strides", "padding") if k in a}
        if a.get("splits"):
            geo["splits"] = a["splits"]
        x = op.operands[0]
        dx = dw = db = None
        if g.needs(0):
            dx = g.emit("netc.conv2d_grad_data", [dz], dict(geo, input_shape=list(x.type.shape)),
                        params={"weight": g.param("weight")}, tag="grad_data")
        if g.needs_param("weight"):
            dw = g.emit("netc.conv2d_grad_filter", [x, dz], geo, tag="grad_filter")
        if g.needs_param("bias"):
            db = g.emit("netc.bias_grad", [dz], tag="grad_bias")
        return [dx], {"weight": dw, "bias": db}

    def bytes_moved(self, a, ins, out, itemsize=4):
        # Paleo's GEMM traffic: the padded input, the filter (+ bias) and the output
        x = ins[0]
        oh, ow, ph, pw, kh, kw, ci, co = conv_geometry(a, x)
        padded = x[0] * (x[1] + 2 * ph) * (x[2] + 2 * pw) * x[3]
        return itemsize * (padded + kh * kw * ci * co + co + x[0] * oh * ow * co)


@register
class Deconv2D(OpDef):
    name = "deconv2d"
    types = ("Deconvolution",)
    arity = (1, 1)
    param_roles = ("weight", "bias")
    attrs = {
        "filter": AttrSpec("ints", length=4, doc="[kh, kw, c_out, c_in]"),
        "strides": AttrSpec("ints", [1, 1, 1, 1], length=4),
        "padding": AttrSpec("padding", "SAME"),
        "output_shape": AttrSpec("shape", doc="[N, H, W, C]"),
        "activation": AttrSpec("enum", "none", ACTIVATIONS),
    }
    doc = ("Transposed convolution (Paleo's Deconvolution): the adjoint of the forward convolution "
           "output_shape -> input. FLOPs Paleo-compatible, unverified by corpus. Its bias has c_in entries "
           "(Paleo's count) and is not applied.")

    def _forward_conv(self, a):
        kh, kw, co, ci = a["filter"]
        return {"filter": [kh, kw, co, ci], "strides": a["strides"], "padding": a["padding"]}

    def infer(self, a, ins):
        (x,) = ins
        out = tuple(a["output_shape"])
        if len(out) != 4 or len(x) != 4:
            raise ShapeError("Deconvolution needs rank-4 NHWC input and output_shape", attr="output_shape")
        c = self._forward_conv(a)
        if c["filter"][2] != out[3]:
            raise ShapeError(f"filter[2] ({c['filter'][2]}) must equal the output channels ({out[3]})", attr="filter")
        back = Conv2D().infer(c, [out])
        if back != tuple(x):
            raise ShapeError(f"the equivalent forward convolution of output_shape {list(out)} gives {list(back)}, "
                             f"not the input {list(x)}", attr="output_shape")
        return out

    def param_shapes(self, a, ins, out):
        f = a["filter"]
        return {"weight": tuple(f), "bias": (f[3],)}

    def reference(self, a, ins, params):
        # The adjoint of the forward convolution output_shape -> input: a full transposed
        # convolution, then undo that convolution's (Paleo) padding - crop, or zero-fill where
        # its SAME pad was negative (a crop of the forward input).
        import torch.nn.functional as F
        from . import reference as R      # lazy: torch is slow to import
        x, w = R.in_compute_dtype(ins[0]), R.in_compute_dtype(params["weight"])      # w: [kh, kw, c_out, c_in]
        n, h, wd, co = a["output_shape"]
        kh, kw = w.shape[0], w.shape[1]
        sh, sw = a["strides"][1], a["strides"][2]
        _, _, t, b, l, r = R.pads(h, wd, kh, kw, sh, sw, a["padding"])
        y = F.conv_transpose2d(x.permute(0, 3, 1, 2), w.permute(3, 2, 0, 1).contiguous(), stride=(sh, sw))
        y = F.pad(y, (-l, -r, -t, -b)).permute(0, 2, 3, 1)
        # Paleo's bias has filter[3] = c_in entries (kept for its parameter counts), which cannot
        # bias the c_out output channels: it is not applied.
        return R.epilogue(y, activation_=a["activation"])

    def cost(self, a, ins, out, needs_input_grad=True):
        c = self._forward_conv(a)
        oh, ow, ph, pw, kh, kw, ci, co = conv_geometry(c, out)
        fwd_conv = 2 * kh * kw * ci * oh * ow * co * out[0]
        pad = _Valid((0, 0)) if a["padding"] == "VALID" else (ph, pw)
        conv_out = (out[0], oh, ow, co)
        bd, bf = conv_backward_flops(out, (kh, kw, ci, co), (a["strides"][1], a["strides"][2]), pad, conv_out,
                                     True)
        return Cost(bd if needs_input_grad else 0, fwd_conv, bf)

    def gradient(self, g, op, dy):
        """The fused activation's gradient, then the data gradient (the forward convolution of dz with the
        same filter: netc.deconv2d_grad_data) and the filter gradient (conv2d's, with the roles of input
        and gradient swapped: netc.conv2d_grad_filter of dz and x). The bias is not applied, so it gets
        no gradient."""
        a = self.attrs_of(op)
        dz = fused_activation_grad(g, op, dy, a["activation"])
        geo = {k: a[k] for k in ("filter", "strides", "padding")}
        dx = dw = None
        if g.needs(0):
            dx = g.emit("netc.deconv2d_grad_data", [dz], geo, params={"weight": g.param("weight")},
                        tag="grad_data")
        if g.needs_param("weight"):
            dw = g.emit("netc.conv2d_grad_filter", [dz, op.operands[0]], geo, tag="grad_filter")
        return [dx], {"weight": dw}


# --------------------------------------------------------------------------- gradients

_GEOMETRY = {k: Conv2D.attrs[k] for k in ("filter", "strides", "padding")}


def _conv_attrs(a) -> dict:
    return {"filter": a["filter"], "strides": a["strides"], "padding": a["padding"], "splits": a.get("splits")}


@register
class Conv2DGradData(OpDef):
    name = "conv2d_grad_data"
    prologue_operand = 0
    grad_epilogue = True
    training_only = True
    arity = (1, 1)
    param_roles = ("weight",)
    attrs = dict(_GEOMETRY, input_shape=AttrSpec("shape", doc="the forward input's shape, NHWC"))
    doc = ("The data gradient of conv2d: dz (the gradient before bias and activation) -> dx, a transposed "
           "convolution with the layer's weight. FLOPs: conv2d's backward-data FLOPs (Paleo's).")

    def infer(self, a, ins):
        (dz,) = ins
        x = tuple(a["input_shape"])
        if Conv2D().infer(_conv_attrs(a), [x]) != tuple(dz):
            raise ShapeError(f"the gradient {list(dz)} is not conv2d's output for input {list(x)}", operand=0)
        return x

    def param_shapes(self, a, ins, out):
        return {"weight": Conv2D().param_shapes(_conv_attrs(a), [out], ins[0])["weight"]}

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(Conv2D().cost(_conv_attrs(a), [out], ins[0]).flops_bwd_data)

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.conv2d_grad_data(ins[0], params["weight"], a["input_shape"], a["strides"], a["padding"])


@register
class Conv2DGradFilter(OpDef):
    name = "conv2d_grad_filter"
    prologue_operand = 1
    training_only = True
    arity = (2, 2)
    unbatched = True
    attrs = dict(_GEOMETRY)
    doc = ("The filter gradient of conv2d: the forward input x and dz (the gradient before bias and "
           "activation) -> dW [kh, kw, c_in, c_out]. FLOPs: conv2d's backward-filter FLOPs (Paleo's).")

    def infer(self, a, ins):
        x, dz = ins
        if Conv2D().infer(_conv_attrs(a), [x]) != tuple(dz):
            raise ShapeError(f"the gradient {list(dz)} is not conv2d's output for input {list(x)}", operand=1)
        return Conv2D().param_shapes(_conv_attrs(a), [x], dz)["weight"]

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(Conv2D().cost(_conv_attrs(a), [ins[0]], ins[1]).flops_bwd_filter)

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.conv2d_grad_filter(ins[0], ins[1], a["filter"][:2], a["strides"], a["padding"])


@register
class BiasGrad(OpDef):
    name = "bias_grad"
    prologue_operand = 0
    training_only = True
    arity = (1, 1)
    unbatched = True
    attrs = {}
    doc = ("The gradient of a per-channel bias (conv2d, inner product): dz summed over every axis but the "
           "last. 0 FLOPs in Paleo's count (the forward's bias add is free there too).")

    def infer(self, a, ins):
        if not ins[0]:
            raise ShapeError("a bias gradient needs a channel axis", operand=0)
        return (ins[0][-1],)

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.bias_grad(ins[0])


@register
class Deconv2DGradData(OpDef):
    name = "deconv2d_grad_data"
    training_only = True
    arity = (1, 1)
    param_roles = ("weight",)
    attrs = dict(_GEOMETRY)
    doc = ("The data gradient of deconv2d: dz (the gradient before the activation) -> dx, the forward "
           "convolution output_shape -> input that the deconvolution is the adjoint of, with its weight "
           "[kh, kw, c_out, c_in] and no bias. FLOPs: deconv2d's backward-data FLOPs (that convolution's).")

    def infer(self, a, ins):
        (dz,) = ins
        if len(dz) != 4 or a["filter"][2] != dz[3]:
            raise ShapeError(f"the gradient {list(dz)} does not fit a deconvolution with filter {a['filter']}",
                             operand=0)
        return Conv2D().infer(_conv_attrs(a), [tuple(dz)])

    def param_shapes(self, a, ins, out):
        return {"weight": tuple(a["filter"])}

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(Deconv2D().cost(dict(_conv_attrs(a), output_shape=list(ins[0])), [out], ins[0]).flops_bwd_data)

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.deconv2d_grad_data(ins[0], params["weight"], a["strides"], a["padding"])
