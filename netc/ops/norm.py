"""Normalization: BatchNorm and LRN (across channels, the last NHWC axis)."""
from __future__ import annotations

from .registry import AttrSpec, Cost, OpDef, ShapeError, prod, register


@register
class BatchNorm(OpDef):
    name = "batch_norm"
    types = ("BatchNorm",)
    param_roles = ("scale", "shift")
    f32_params = ("scale", "shift")   # cuDNN/apex-style: batch-norm parameters stay f32 in 16-bit nets
    attrs = {"epsilon": AttrSpec("number", 1e-5), "momentum": AttrSpec("number", 0.9)}
    doc = ("Batch normalization over the last (channel) axis: a per-channel scale and shift "
           "(running statistics are state, not parameters). 2 FLOPs/element forward (folded), 4 backward.")
    elementwise = True

    def infer(self, a, ins):
        if not ins[0]:
            raise ShapeError("BatchNorm needs an input with a channel axis, got a scalar []", operand=0)
        return tuple(ins[0])

    def reference(self, a, ins, params):
        # inference, folded: the running statistics (and epsilon) live in scale and shift
        from . import reference as R      # lazy: torch is slow to import
        return R.batch_norm(ins[0], params["scale"], params["shift"])

    def param_shapes(self, a, ins, out):
        c = ins[0][-1]
        return {"scale": (c,), "shift": (c,)}

    def cost(self, a, ins, out, needs_input_grad=True):
        n = prod(out)
        return Cost(2 * n, 4 * n if needs_input_grad else 0, 2 * n)


@register
class LRN(OpDef):
    name = "lrn"
    types = ("LRN",)
    attrs = {
        "local_size": AttrSpec("int", 5),
        "alpha": AttrSpec("number", 1e-4),
        "beta": AttrSpec("number", 0.75),
        "knorm": AttrSpec("number", 1.0),
    }
    doc = ("Local response normalization across channels: x / (knorm + alpha/n * sum x^2)^beta. "
           "FLOPs: (2*local_size + 3) per element forward, twice that backward.")

    def infer(self, a, ins):
        (x,) = ins
        if a["local_size"] <= 0 or a["local_size"] % 2 == 0:
            raise ShapeError(f"local_size must be a positive odd number, got {a['local_size']}", attr="local_size")
        return tuple(x)

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.lrn(ins[0], a["local_size"], a["alpha"], a["beta"], a["knorm"])

    def cost(self, a, ins, out, needs_input_grad=True):
        n = prod(out) * (2 * a["local_size"] + 3)
        return Cost(n, 2 * n if needs_input_grad else 0, 0)
