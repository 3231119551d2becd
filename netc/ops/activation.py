"""Elementwise unary ops: ReLU, Sigmoid, Tanh, SINGA's scaled tanh (STanh), Clip (ReLU6), Dropout.

Paleo has no ReLU/Tanh type (they are fused as `activation` on convolutions); netc costs them
at 1 FLOP per element forward and backward (Sigmoid and Tanh at 4, counting the exponential as
one), which Paleo would report as 0. Dropout follows Paleo: prod(input) forward, same backward.
"""
from __future__ import annotations

import zlib

from .registry import AttrSpec, Cost, OpDef, ShapeError, TimeTerms, prod, register


class _Unary(OpDef):
    arity = (1, 1)
    elementwise = True
    attrs = {}
    flops_per_element = 1
    onnx_type = ""     # the ONNX op of the same name and meaning, if any

    def onnx(self, a, w, op):
        """The same elementwise op, on the operand's layout as it stands."""
        if not self.onnx_type:
            raise NotImplementedError(f"netc.{self.name} has no ONNX form")
        extra = {"alpha": float(a["negative_slope"])} if a.get("negative_slope") else {}
        y = w.node("LeakyRelu" if extra else self.onnx_type, [w.x(op, 0)], hint=a.get("name") or self.name, **extra)
        w.result(op, y, w.layout(op))

    def writes_onnx(self) -> bool:
        return bool(self.onnx_type)

    def infer(self, a, ins):
        return tuple(ins[0])

    def cost(self, a, ins, out, needs_input_grad=True):
        n = prod(out) * self.flops_per_element
        return Cost(n, n if needs_input_grad else 0, 0)

    def gradient(self, g, op, dy):
        """ReLU, Sigmoid, Tanh: an activation_grad op from the output (Dropout overrides this)."""
        act, slope = _act_of(op)
        attrs = {"activation": act}
        if slope:
            attrs["negative_slope"] = slope
        return [g.emit("netc.activation_grad", [op.results[0], dy], attrs)], {}


@register
class ReLU(_Unary):
    name = "relu"
    onnx_type = "Relu"
    pointwise = "activation"
    channelwise = True
    types = ("ReLU",)
    attrs = {"negative_slope": AttrSpec("number", 0.0)}
    doc = "max(x, 0) (leaky with negative_slope)."

    def singa_layer(self, a, ins, v1, scale, plain):
        from .singa import fmt
        ns = a.get("negative_slope", 0.0)
        return "kReLU", ([f"relu_conf {{ negative_slope: {fmt(ns)} }}"] if ns else []), []

    def eager(self, a, params, x_shape, out_shape, training):
        import torch
        import torch.nn.functional as F
        s = float(a.get("negative_slope", 0.0) or 0.0)
        return (lambda x: F.leaky_relu(x, s)) if s else torch.relu

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.relu(ins[0], a["negative_slope"])


@register
class Sigmoid(_Unary):
    name = "sigmoid"
    onnx_type = "Sigmoid"
    pointwise = "activation"
    channelwise = True
    types = ("Sigmoid",)
    flops_per_element = 4
    doc = "1 / (1 + exp(-x)), elementwise. (Paleo's Sigmoid layer outputs [N, 1]; its importer maps that.)"

    def singa_layer(self, a, ins, v1, scale, plain):
        return "kSigmoid", [], []

    def eager(self, a, params, x_shape, out_shape, training):
        import torch
        return torch.sigmoid

    def reference(self, a, ins, params):
        return ins[0].sigmoid()


@register
class Tanh(_Unary):
    name = "tanh"
    onnx_type = "Tanh"
    pointwise = "activation"
    channelwise = True
    types = ("Tanh",)
    flops_per_element = 4
    doc = "tanh(x), elementwise."

    def singa_layer(self, a, ins, v1, scale, plain):
        if v1:     # v0.1's only tanh layer is kSTanh, SINGA's scaled tanh (netc.stanh): another function
            from .singa import SingaInexpressible
            raise SingaInexpressible(f"'{a.get('name')}': SINGA v0.1 has no plain tanh (its kSTanh is "
                                     f"1.7159047 tanh(0.66666667 x)); write v0.2+")
        return "kActivation", ["activation_conf { type: TANH }"], []

    def eager(self, a, params, x_shape, out_shape, training):
        import torch
        return torch.tanh

    def reference(self, a, ins, params):
        return ins[0].tanh()


@register
class STanh(_Unary):
    name = "stanh"
    types = ("STanh",)
    flops_per_element = 4
    doc = "SINGA's scaled tanh (kSTanh): 1.7159047 * tanh(0.66666667 x), elementwise."

    def singa_layer(self, a, ins, v1, scale, plain):
        if v1:
            return "kSTanh", [], []
        return "kActivation", ["activation_conf { type: STANH }"], []

    def eager(self, a, params, x_shape, out_shape, training):
        import torch
        from .reference import STANH_A, STANH_B
        return lambda x: STANH_A * torch.tanh(STANH_B * x)

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.STANH_A * R.tanh(R.STANH_B * ins[0])



@register
class Clip(_Unary):
    name = "clip"
    onnx_type = "Clip"
    channelwise = True
    types = ("Clip", "ReLU6")
    flops_per_element = 2
    attrs = {"min": AttrSpec("number", 0.0, doc="the lower bound"),
             "max": AttrSpec("number", 6.0, doc="the upper bound (ReLU6: the defaults)")}
    doc = ("min(max(x, min), max), elementwise (ONNX's Clip; torch's ReLU6 and hardtanh). 2 FLOPs per element "
           "forward, 2 backward; its gradient passes where min <= x <= max (torch.clamp's).")

    def infer(self, a, ins):
        if not a["min"] <= a["max"]:
            raise ShapeError(f"min {a['min']} is above max {a['max']}", attr="max")
        return tuple(ins[0])

    def onnx(self, a, w, op):
        """Clip with its bounds as float32 constant inputs (opset 11 and later)."""
        import numpy as np
        nm = a.get("name") or self.name
        y = w.node("Clip", [w.x(op, 0), w.const(float(a["min"]), nm + ".min", np.float32),
                            w.const(float(a["max"]), nm + ".max", np.float32)], hint=nm)
        w.result(op, y, w.layout(op))

    def eager(self, a, params, x_shape, out_shape, training):
        import torch
        lo, hi = float(a["min"]), float(a["max"])
        return lambda x: torch.clamp(x, lo, hi)

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.in_compute_dtype(ins[0]).clamp(float(a["min"]), float(a["max"]))

    def gradient(self, g, op, dy):
        """dy where the input lay within the bounds (netc.clip_grad, from the input)."""
        a = self.attrs_of(op)
        return [g.emit("netc.clip_grad", [op.operands[0], dy], {"min": a["min"], "max": a["max"]})], {}


@register
class Dropout(_Unary):
    name = "dropout"
    onnx_type = "Identity"   # inference: the identity
    channelwise = True
    types = ("Dropout",)
    arity = (1, 2)
    identity_at_inference = True
    attrs = {"dropout_keep_prob": AttrSpec("number", 0.5)}
    doc = ("Dropout: identity at inference (one input); x * mask with a mask input (its training form: the "
           "mask, 0 or 1/keep_prob per element, drawn by netc.dropout_mask). Paleo's cost: prod(input) FLOPs "
           "forward and backward.")

    def singa_layer(self, a, ins, v1, scale, plain):
        from .singa import fmt
        ratio = fmt(round(1 - a.get('dropout_keep_prob', 0.5), 12))
        return "kDropout", [f"dropout_conf {{ dropout_ratio: {ratio} }}"], []

    def eager(self, a, params, x_shape, out_shape, training):
        """Training: torch's own masks (its RNG, not netc's Philox); inference: the identity."""
        if not training:
            return lambda x: x
        import torch.nn.functional as F
        p = 1.0 - float(a["dropout_keep_prob"])
        return lambda x: F.dropout(x, p, training=True)

    def infer(self, a, ins):
        p = a["dropout_keep_prob"]
        if not 0 < p <= 1:   # (the training form's mask draws with it: checked here, where every command sees it)
            raise ShapeError(f"dropout_keep_prob must be in (0, 1], got {p}", attr="dropout_keep_prob")
        if len(ins) == 2 and tuple(ins[1]) != tuple(ins[0]):
            raise ShapeError(f"the dropout mask {list(ins[1])} must have the input's shape {list(ins[0])}", operand=1)
        return tuple(ins[0])

    def reference(self, a, ins, params):
        if len(ins) == 2:
            return ins[0] * ins[1]
        return ins[0]  # inference

    def cost(self, a, ins, out, needs_input_grad=True):
        n = prod(ins[0])
        return Cost(n, n, 0)

    def paleo_timing(self, a, ins, out, needs_input_grad=True):
        t = TimeTerms(prod(ins[0]), (prod(ins[0]), prod(out)))     # §10: the data gradient = the forward
        return {"fwd": t, "bwd_data": t}

    def training_form(self, g, op):
        """Multiply by a mask drawn from the training program's `seed` input, salted by the layer's name
        (each dropout layer draws its own mask; each step, with a new seed, a new one)."""
        if len(op.operands) != 1:
            return
        x = op.operands[0]
        a = self.attrs_of(op)
        layer = op.attrs.get("name") or op.name
        extra = {}
        part = op.attrs.get("partition") or {}
        if part.get("dim") == 0 and x.type.shape:
            # a shard's copy of a batch split (the partition pass's): its part of the logical layer's
            # mask -- the logical name's salt, counters from where its shard starts in the batch
            n = x.type.shape[0]
            sizes = part.get("sizes")
            start = sum(sizes[:part["index"]]) if sizes else part["index"] * n
            layer = part.get("of", layer)
            extra["offset"] = start * prod(x.type.shape[1:])
        mask = g.emit("netc.dropout_mask", [g.input("seed", (), "i64")],
                      {"keep_prob": a["dropout_keep_prob"], "shape": list(x.type.shape),
                       "salt": zlib.crc32(layer.encode()), **extra}, tag="mask")
        op.operands.append(mask)

    def gradient(self, g, op, dy):
        """dy times the same mask: the op itself."""
        if len(op.operands) == 1:   # no mask: the identity
            return [dy], {}
        a = self.attrs_of(op)
        return [g.emit("netc.dropout", [dy, op.operands[1]], {"dropout_keep_prob": a["dropout_keep_prob"]}),
                None], {}


@register
class DropoutMask(OpDef):
    name = "dropout_mask"
    training_only = True
    arity = (1, 1)
    attrs = {"keep_prob": AttrSpec("number", doc="the probability of keeping an element"),
             "shape": AttrSpec("shape", doc="the mask's (the dropout input's) shape"),
             "salt": AttrSpec("int", 0, doc="crc32 of the dropout layer's name: the Philox counter's high word"),
             "offset": AttrSpec("int", 0, doc="the first element's counter (a shard of a batch split: where it "
                                              "starts in the whole batch's mask)")}
    doc = ("A dropout mask from the scalar integer seed: element i (row-major) is 1/keep_prob where "
           "u = tl.rand(seed, salt * 2**32 + i) < keep_prob (float32), else 0. u is Triton's Philox4x32-10 "
           "(counter (i, salt, 0, 0), key the seed's two 32-bit words), so a kernel computing tl.rand at those "
           "offsets draws this mask bit for bit (netc.ops.reference.dropout_mask). f32; 0 FLOPs.")

    def result_dtype(self, a, operand_dtypes):
        return "f32"

    def infer(self, a, ins):
        (seed,) = ins
        if tuple(seed) != ():
            raise ShapeError(f"the seed must be a scalar, got {list(seed)}", operand=0)
        if not 0 < a["keep_prob"] <= 1:
            raise ShapeError(f"keep_prob must be in (0, 1], got {a['keep_prob']}", attr="keep_prob")
        if any(d < 0 for d in a["shape"]):
            raise ShapeError(f"invalid shape {a['shape']}", attr="shape")
        return tuple(a["shape"])

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        mask = R.dropout_mask(int(ins[0]), a["shape"], a["keep_prob"], a["salt"], a.get("offset", 0))
        return mask.to(ins[0].device) if hasattr(ins[0], "device") else mask   # drawn on the host, used where the seed is


# --------------------------------------------------------------------------- gradients

@register
class ClipGrad(OpDef):
    name = "clip_grad"
    training_only = True
    arity = (2, 2)
    elementwise = True
    attrs = dict(Clip.attrs)
    doc = "The gradient of clip, from its input x and the output's gradient dy: dy where min <= x <= max, else 0."

    def infer(self, a, ins):
        x, dy = ins
        if tuple(x) != tuple(dy):
            raise ShapeError(f"clip input {list(x)} and its gradient {list(dy)} differ", operand=1)
        return tuple(dy)

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(prod(out) * Clip.flops_per_element)

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        x, dy = R.in_compute_dtype(ins[0]), R.in_compute_dtype(ins[1])
        return dy * ((x >= float(a["min"])) & (x <= float(a["max"]))).to(dy.dtype)


def _act_of(op) -> tuple:
    """(activation, negative_slope) of a standalone activation op."""
    if op.name == "netc.relu":
        return "relu", op.attrs.get("negative_slope", 0.0) or 0.0
    return op.name.split(".")[-1], 0.0


def fused_activation_grad(g, op, dy, activation: str, negative_slope=0.0):
    """The gradient before a layer's fused `activation` (conv2d, inner product): dy itself without
    one, else an activation_grad op marked `fused` (free in Paleo's count, like the forward's)."""
    if activation in (None, "none"):
        return dy
    attrs = {"activation": activation, "fused": True}
    if negative_slope:
        attrs["negative_slope"] = negative_slope
    return g.emit("netc.activation_grad", [op.results[0], dy], attrs, tag="act_grad")


@register
class ActivationGrad(OpDef):
    name = "activation_grad"
    fusion_prologue = True
    training_only = True
    arity = (2, 2)
    elementwise = True
    attrs = {"activation": AttrSpec("enum", choices=("relu", "sigmoid", "tanh", "stanh")),
             "negative_slope": AttrSpec("number", 0.0),
             "fused": AttrSpec("bool", False, doc="the forward op fused the activation (Paleo counts it free)")}
    doc = ("The gradient through an activation, from its output y and the output's gradient dy: "
           "relu dy*(y>0) (leaky: negative_slope where y<=0), sigmoid dy*y*(1-y), tanh dy*(1-y^2), SINGA's scaled tanh "
           "dy*B*(A-y^2/A).")

    def infer(self, a, ins):
        y, dy = ins
        if tuple(y) != tuple(dy):
            raise ShapeError(f"activation output {list(y)} and its gradient {list(dy)} differ", operand=1)
        return tuple(dy)

    def cost(self, a, ins, out, needs_input_grad=True):
        if a["fused"]:
            return Cost()
        return Cost(prod(out) * (1 if a["activation"] == "relu" else 4))

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.activation_grad(ins[0], ins[1], a["activation"], a["negative_slope"])
