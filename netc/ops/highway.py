"""Highway: Brainstorm's highway gate (brainstorm/layers/highway_layer.py) of three same-shaped inputs, and
its gradient.

Brainstorm's Highway layer has no parameters: it reads three values of one shape, H (the transform), T (the
gate) and x (the carried input), in that order (its expected_inputs), and writes, elementwise,

    y = T * (H - x) + x        (= T * H + (1 - T) * x, Brainstorm's forward_pass)

It applies no sigmoid to T: the layer that computes T does (a FullyConnected with activation sigmoid in
Brainstorm's examples). The gradient, as Brainstorm's backward_pass computes it, one highway_grad op per
input that needs one: dH = T * dy, dT = (H - x) * dy, dx = (1 - T) * dy.

Cost: 3 FLOPs per element forward (subtract, multiply, add); backward 1 (dH), 2 (dT), 2 (dx).
No kernel (kernels/lowering.py has no row): the reference and Python targets run it; a compiled target
refuses it with a located error.
"""
from __future__ import annotations

from .registry import AttrSpec, Cost, OpDef, ShapeError, prod, register

INPUTS = ("H", "T", "x")   # Brainstorm's input names, in the operands' order


def _same_shape(ins):
    for k in (1, 2):
        if tuple(ins[k]) != tuple(ins[0]):
            raise ShapeError(f"Highway's inputs H, T and x must have one shape (Brainstorm's check): H is "
                             f"{list(ins[0])}, {INPUTS[k]} is {list(ins[k])}", operand=k)
    return tuple(ins[0])


@register
class Highway(OpDef):
    name = "highway"
    types = ("Highway",)
    arity = (3, 3)
    elementwise = True
    attrs = {}
    doc = ("Brainstorm's Highway: y = T * (H - x) + x elementwise of three same-shaped inputs H, T, x (in this "
           "order; T is used as given, its sigmoid is the layer before's). No parameters. Gradients dH = T dy, "
           "dT = (H - x) dy, dx = (1 - T) dy (highway_grad). 3 FLOPs per element forward, 5 backward.")

    def infer(self, a, ins):
        return _same_shape(ins)

    def reference(self, a, ins, params):
        from .reference import in_compute_dtype
        h, t, x = (in_compute_dtype(v) for v in ins)
        return t * (h - x) + x

    def cost(self, a, ins, out, needs_input_grad=True):
        n = prod(ins[0])
        return Cost(3 * n, 5 * n, 0)

    def gradient(self, g, op, dy):
        """One highway_grad per input that needs a gradient."""
        need = [k for k in range(3) if g.needs(k)]
        out = [None, None, None]
        for k in need:
            out[k] = g.emit("netc.highway_grad", list(op.operands) + [dy], {"wrt": INPUTS[k]},
                            tag=f"grad_{INPUTS[k]}" if len(need) > 1 else "grad")
        return out, {}


@register
class HighwayGrad(OpDef):
    name = "highway_grad"
    training_only = True
    arity = (4, 4)
    attrs = {"wrt": AttrSpec("enum", choices=INPUTS, doc="whose gradient: H, T or x")}
    doc = ("The gradient of a Highway's input `wrt` from H, T, x and dy: T dy (H), (H - x) dy (T), (1 - T) dy (x); "
           "1 or 2 FLOPs per element.")

    def infer(self, a, ins):
        s = _same_shape(ins[:3])
        if tuple(ins[3]) != s:
            raise ShapeError(f"the gradient must have the inputs' shape {list(s)}, got {list(ins[3])}", operand=3)
        return s

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost((1 if a["wrt"] == "H" else 2) * prod(ins[0]))

    def reference(self, a, ins, params):
        from .reference import in_compute_dtype
        h, t, x, dy = (in_compute_dtype(v) for v in ins)
        if a["wrt"] == "H":
            return t * dy
        if a["wrt"] == "T":
            return (h - x) * dy
        return (1 - t) * dy
