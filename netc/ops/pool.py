"""Pooling: max and average pooling (Paleo's Pooling / AvgPool) and UpSampling2D. NHWC."""
from __future__ import annotations

from .geometry import out_size
from .registry import AttrSpec, Cost, OpDef, ShapeError, TimeTerms, prod, register


class _Pool(OpDef):
    arity = (1, 1)
    attrs = {
        "ksize": AttrSpec("ints", length=4, doc="[1, kh, kw, 1]"),
        "strides": AttrSpec("ints", [1, 1, 1, 1], length=4, doc="[1, sh, sw, 1]"),
        "padding": AttrSpec("pool_padding", "VALID",
                            doc='"VALID" or "SAME" (Paleo), or explicit [pad_h, pad_w] or [top, left, bottom, right] '
                                'with floor rounding (the last: ONNX\'s pads; its ceil_mode as a larger bottom/right)'),
    }

    singa_pool = ""   # SINGA's pooling_conf.pool

    def singa_layer(self, a, ins, v1, scale, plain):
        from .singa import SingaInexpressible as No, geometry
        nm = a.get("name")
        _, kh, kw, _ = a["ksize"]
        pad = a.get("padding", "VALID")
        if v1 and pad not in ([0, 0], "VALID"):
            raise No(f"pooling '{nm}' pads its input; SINGA v0.1 pooling ignores pad")
        geo = geometry(nm, "pooling", ins[0], (kh, kw), a.get("strides", [1, 1, 1, 1])[1:3], pad, v1)
        return ("kPooling" if v1 else "kCPooling"), [f"pooling_conf {{ pool: {self.singa_pool} {geo} }}"], []

    def onnx(self, a, w, op):
        """MaxPool / AveragePool (in-bounds elements counted, as netc's) on NCHW, Paleo's padding as
        explicit pads (a crop first where netc drops overhanging rows)."""
        kh, kw = a["ksize"][1], a["ksize"][2]
        nm = a.get("name") or "pool"
        x, pads = w.window_pads(op, w.x(op, 0, "nchw"), kh, kw, a["strides"], a["padding"], nm)
        extra = {} if self.singa_pool == "MAX" else {"count_include_pad": 0}
        y = w.node("MaxPool" if self.singa_pool == "MAX" else "AveragePool", [x], hint=nm, kernel_shape=[kh, kw],
                   strides=list(a["strides"][1:3]), pads=pads, **extra)
        w.result(op, y, "nchw")

    def _eager_window(self, a, x_shape):
        """(kernel, stride, padding) of torch's pooling for netc's windows, or None where torch's
        symmetric padding (at most half the kernel) cannot give them."""
        from . import eager as E
        kh, kw = a["ksize"][1], a["ksize"][2]
        pad = E.torch_padding(x_shape, kh, kw, a)
        if pad is not None and pad[0] <= kh // 2 and pad[1] <= kw // 2:   # torch's limit on pool padding
            return (kh, kw), (a["strides"][1], a["strides"][2]), pad
        return None

    def infer(self, a, ins):
        (x,) = ins
        if len(x) != 4:
            raise ShapeError(f"{self.type_name} needs a rank-4 NHWC input, got rank {len(x)} {list(x)}", operand=0)
        kh, kw = a["ksize"][1], a["ksize"][2]
        sh, sw = a["strides"][1], a["strides"][2]
        if kh <= 0 or kw <= 0:
            raise ShapeError(f"ksize must be positive, got {a['ksize']}", attr="ksize")
        if sh <= 0 or sw <= 0:
            raise ShapeError(f"strides must be positive, got {a['strides']}", attr="strides")
        oh, _ = out_size(x[1], kh, sh, a["padding"], 0)
        ow, _ = out_size(x[2], kw, sw, a["padding"], 1)
        if oh <= 0 or ow <= 0:
            raise ShapeError(f"a {kh}x{kw} window does not fit the {x[1]}x{x[2]} input", attr="ksize")
        return (x[0], oh, ow, x[3])

    def cost(self, a, ins, out, needs_input_grad=True):
        kh, kw = a["ksize"][1], a["ksize"][2]
        n, oh, ow, c = out
        fwd = 2 * kh * kw * c * oh * ow * n
        return Cost(fwd, fwd, 0)

    def _grad_attrs(self, a):
        return {"ksize": a["ksize"], "strides": a["strides"], "padding": a["padding"]}

    def paleo_timing(self, a, ins, out, needs_input_grad=True):
        """Forward: the window FLOPs, the input and the output (§10); the data gradient is timed as
        the forward (Paleo does so even for a pool fed by a network input); no filter gradient."""
        t = TimeTerms(self.cost(a, ins, out).flops_fwd, (prod(ins[0]), prod(out)))
        return {"fwd": t, "bwd_data": t}


@register
class MaxPool(_Pool):
    name = "maxpool"
    cheap_to_recompute = True
    singa_pool = "MAX"
    channelwise = True
    types = ("Pooling", "MaxPool")
    doc = "Max pooling (Paleo's Pooling); the max over each window's in-bounds elements."

    def eager(self, a, params, x_shape, out_shape, training):
        import torch.nn.functional as F
        from . import eager as E
        win = self._eager_window(a, x_shape)
        if win is None:
            return None
        k, s, pad = win   # -inf padding: it never wins, as in netc
        return lambda x: E.nhwc(F.max_pool2d(E.nchw(x), k, s, pad))

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.maxpool(ins[0], a["ksize"], a["strides"], a["padding"])

    def gradient(self, g, op, dy):
        """Each window's gradient to its maximum, found again in the forward input."""
        return [g.emit("netc.maxpool_grad", [op.operands[0], dy], self._grad_attrs(self.attrs_of(op)))], {}


@register
class AvgPool(_Pool):
    name = "avgpool"
    cheap_to_recompute = True
    singa_pool = "AVG"
    channelwise = True
    types = ("AvgPool",)
    doc = ("Average pooling over each window's in-bounds elements (padding excluded from the count); "
           "Paleo costs it exactly like max pooling.")

    def eager(self, a, params, x_shape, out_shape, training):
        import torch.nn.functional as F
        from . import eager as E
        win = self._eager_window(a, x_shape)
        if win is None:
            return None
        k, s, pad = win
        return lambda x: E.nhwc(F.avg_pool2d(E.nchw(x), k, s, pad, count_include_pad=False))

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.avgpool(ins[0], a["ksize"], a["strides"], a["padding"])

    def gradient(self, g, op, dy):
        """Each window's gradient spread evenly over its in-bounds elements."""
        a = self._grad_attrs(self.attrs_of(op))
        a["input_shape"] = list(op.operands[0].type.shape)
        return [g.emit("netc.avgpool_grad", [dy], a)], {}


@register
class UpSampling2D(OpDef):
    name = "upsample2d"
    cheap_to_recompute = True
    types = ("UpSampling2D",)
    attrs = {"ksize": AttrSpec("ints", length=4, doc="[1, fh, fw, 1]")}
    doc = "Nearest-neighbour upsampling by integer factors (Paleo: shape only, 0 FLOPs)."

    def infer(self, a, ins):
        (x,) = ins
        if len(x) != 4:
            raise ShapeError(f"UpSampling2D needs a rank-4 NHWC input, got {list(x)}", operand=0)
        fh, fw = a["ksize"][1], a["ksize"][2]
        if fh <= 0 or fw <= 0:
            raise ShapeError(f"ksize factors must be positive, got {a['ksize']}", attr="ksize")
        return (x[0], x[1] * fh, x[2] * fw, x[3])

    def reference(self, a, ins, params):
        return ins[0].repeat_interleave(a["ksize"][1], dim=1).repeat_interleave(a["ksize"][2], dim=2)

    def gradient(self, g, op, dy):
        """dy summed over each block (netc.upsample2d_grad)."""
        return [g.emit("netc.upsample2d_grad", [dy], {"ksize": self.attrs_of(op)["ksize"]})], {}


# --------------------------------------------------------------------------- gradients

@register
class MaxPoolGrad(OpDef):
    name = "maxpool_grad"
    training_only = True
    arity = (2, 2)
    attrs = dict(_Pool.attrs)
    doc = ("The gradient of max pooling: the forward input x and dy -> dx, each window's gradient routed to "
           "its maximum (the first in row-major window order among equals). FLOPs: the forward's.")

    def infer(self, a, ins):
        x, dy = ins
        if _Pool.infer(self, a, [x]) != tuple(dy):
            raise ShapeError(f"the gradient {list(dy)} is not the pooling output for input {list(x)}", operand=1)
        return tuple(x)

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(_Pool.cost(self, a, [ins[0]], ins[1]).flops_fwd)

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.maxpool_grad(ins[0], ins[1], a["ksize"], a["strides"], a["padding"])


@register
class AvgPoolGrad(OpDef):
    name = "avgpool_grad"
    training_only = True
    arity = (1, 1)
    attrs = dict(_Pool.attrs, input_shape=AttrSpec("shape", doc="the forward input's shape, NHWC"))
    doc = ("The gradient of average pooling: dy -> dx, each window's gradient divided by its in-bounds count "
           "and spread over those elements. FLOPs: the forward's.")

    def infer(self, a, ins):
        (dy,) = ins
        x = tuple(a["input_shape"])
        if _Pool.infer(self, a, [x]) != tuple(dy):
            raise ShapeError(f"the gradient {list(dy)} is not the pooling output for input {list(x)}", operand=0)
        return x

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(_Pool.cost(self, a, [out], ins[0]).flops_fwd)

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.avgpool_grad(ins[0], a["input_shape"], a["ksize"], a["strides"], a["padding"])


@register
class UpSampling2DGrad(OpDef):
    name = "upsample2d_grad"
    training_only = True
    arity = (1, 1)
    attrs = dict(UpSampling2D.attrs)
    doc = "The gradient of UpSampling2D: dy summed over each fh x fw block. 0 FLOPs, as the upsampling (Paleo)."

    def infer(self, a, ins):
        (dy,) = ins
        fh, fw = a["ksize"][1], a["ksize"][2]
        if len(dy) != 4 or fh <= 0 or fw <= 0 or dy[1] % fh or dy[2] % fw:
            raise ShapeError(f"the gradient {list(dy)} is not an upsampling output by {fh}x{fw}", operand=0)
        return (dy[0], dy[1] // fh, dy[2] // fw, dy[3])

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.upsample2d_grad(ins[0], a["ksize"][1], a["ksize"][2])
