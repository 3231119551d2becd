"""Elementwise unary ops: ReLU, Sigmoid, Tanh, Dropout.

Paleo has no ReLU/Tanh type (they are fused as `activation` on convolutions); netc costs them
at 1 FLOP per element forward and backward (Sigmoid and Tanh at 4, counting the exponential as
one), which Paleo would report as 0. Dropout follows Paleo: prod(input) forward, same backward.
"""
from __future__ import annotations

from .registry import AttrSpec, Cost, OpDef, TimeTerms, prod, register


class _Unary(OpDef):
    arity = (1, 1)
    elementwise = True
    attrs = {}
    flops_per_element = 1

    def infer(self, a, ins):
        return tuple(ins[0])

    def cost(self, a, ins, out, needs_input_grad=True):
        n = prod(out) * self.flops_per_element
        return Cost(n, n if needs_input_grad else 0, 0)


@register
class ReLU(_Unary):
    name = "relu"
    types = ("ReLU",)
    attrs = {"negative_slope": AttrSpec("number", 0.0)}
    doc = "max(x, 0) (leaky with negative_slope)."

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.relu(ins[0], a["negative_slope"])


@register
class Sigmoid(_Unary):
    name = "sigmoid"
    types = ("Sigmoid",)
    flops_per_element = 4
    doc = "1 / (1 + exp(-x)), elementwise. (Paleo's Sigmoid layer outputs [N, 1]; its importer maps that.)"

    def reference(self, a, ins, params):
        return ins[0].sigmoid()


@register
class Tanh(_Unary):
    name = "tanh"
    types = ("Tanh",)
    flops_per_element = 4
    doc = "tanh(x), elementwise."

    def reference(self, a, ins, params):
        return ins[0].tanh()


@register
class Dropout(_Unary):
    name = "dropout"
    types = ("Dropout",)
    identity_at_inference = True
    attrs = {"dropout_keep_prob": AttrSpec("number", 0.5)}
    doc = "Dropout; identity at inference. Paleo's cost: prod(input) FLOPs forward and backward."

    def reference(self, a, ins, params):
        return ins[0]  # inference; training-mode masks are not part of the oracle (yet)

    def cost(self, a, ins, out, needs_input_grad=True):
        n = prod(ins[0])
        return Cost(n, n, 0)

    def paleo_timing(self, a, ins, out, needs_input_grad=True):
        t = TimeTerms(prod(ins[0]), (prod(ins[0]), prod(out)))     # §10: the data gradient = the forward
        return {"fwd": t, "bwd_data": t}
