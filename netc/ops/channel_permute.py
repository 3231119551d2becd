"""ChannelPermute (netc.channel_permute): a fixed permutation of the channel (last) axis, ShuffleNet's
channel shuffle among its forms (issue 27).

    y[..., j] = x[..., order[j]]          order a permutation of 0 .. C-1, C = x's last axis
    groups: g                             ShuffleNet's shuffle: order[j] = (j % g) * (C/g) + j // g

(one of the two attributes; `channel_order(a, c)` gives the order either way).

netc holds images NHWC, so the channel axis is the last one; the op reads a value of any rank >= 1.
ShuffleNet's shuffle of g groups (an ONNX Reshape [N, g, C/g, H, W] -> Transpose(0, 2, 1, 3, 4) -> Reshape
[N, C, H, W], which the ONNX import recognizes, netc/frontend/onnx.py) is order[j] = (j % g) * (C/g) + j // g:
`shuffle_order(c, g)`, written `groups: g`. The gradient is the inverse permutation of dy: dx[..., order[j]] =
dy[..., j], i.e. ChannelPermute of dy with `inverse(order)`; a shuffle's inverse is the shuffle of C/g groups.

Kernel: a gather along the last axis through the order as an embedded table (netc/kernels/channel_permute.py).
Cost: 0 FLOPs (a copy of the value). Written to ONNX as a Gather of the channel axis with constant indices.
"""
from __future__ import annotations

from .registry import AttrSpec, Cost, OpDef, ShapeError, register


def shuffle_order(c: int, groups: int) -> list:
    """ShuffleNet's channel shuffle of `groups` groups over c channels as a ChannelPermute order."""
    per = c // groups
    return [(j % groups) * per + j // groups for j in range(c)]


def channel_order(a: dict, c: int) -> list:
    """The order of a ChannelPermute with attributes `a` (checked by its shape rule) over c channels."""
    return shuffle_order(c, a["groups"]) if a.get("groups") else list(a["order"])


def inverse(order) -> list:
    """The permutation undoing `order`."""
    inv = [0] * len(order)
    for j, o in enumerate(order):
        inv[o] = j
    return inv


@register
class ChannelPermute(OpDef):
    name = "channel_permute"
    types = ("ChannelPermute",)
    arity = (1, 1)
    attrs = {"order": AttrSpec("ints", [], doc="y[..., j] = x[..., order[j]]: a permutation of 0 .. C-1 "
                                               "(C the last axis, an NHWC image's channels)"),
             "groups": AttrSpec("int", 0, doc="instead of an order: ShuffleNet's channel shuffle of this many "
                                              "groups, order[j] = (j % groups) * (C / groups) + j // groups")}
    doc = ("A fixed permutation of the last (channel) axis: y[..., j] = x[..., order[j]], `order` a permutation "
           "of 0 .. C-1; or `groups: g`, ShuffleNet's channel shuffle, order[j] = (j % g) * (C/g) + j // g (what "
           "the ONNX import makes of Reshape -> Transpose -> Reshape). Gradient: the inverse permutation of dy "
           "(of a shuffle: the shuffle of C/g groups). "
           "Kernel: a gather (netc/kernels/channel_permute.py). 0 FLOPs (netc/ops/channel_permute.py).")

    def infer(self, a, ins):
        x = ins[0]
        if len(x) < 1:
            raise ShapeError("ChannelPermute permutes the last axis of its input, got a scalar []", operand=0)
        c = x[-1]
        g = a.get("groups", 0)
        if (g != 0) == bool(a.get("order")):
            raise ShapeError("ChannelPermute takes an order or groups (a channel shuffle), one of the two",
                             attr="groups" if g else "order")
        if g:
            if g < 1 or c % g:
                raise ShapeError(f"groups {g} does not divide the {c} channels (the last axis of {list(x)})",
                                 attr="groups")
            return tuple(x)
        order = list(a["order"])
        if len(order) != c:
            raise ShapeError(f"order has {len(order)} entries for {c} channels (the last axis of {list(x)})",
                             attr="order")
        if sorted(order) != list(range(c)):
            bad = sorted(set(range(c)) - set(order))[:4]
            raise ShapeError(f"order is not a permutation of 0 .. {c - 1}"
                             + (f" (missing {', '.join(map(str, bad))})" if bad else " (an entry out of range)"),
                             attr="order")
        return tuple(x)

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(0, 0, 0)

    def reference(self, a, ins, params):
        import torch
        x = ins[0]
        order = channel_order(a, x.shape[-1])
        return x.index_select(x.dim() - 1, torch.tensor(order, dtype=torch.long, device=x.device))

    def eager(self, a, params, x_shape, out_shape, training):
        import torch
        order = channel_order(a, x_shape[-1])

        def permute(x):
            return x.index_select(x.dim() - 1, torch.tensor(order, dtype=torch.long, device=x.device))
        return permute

    def gradient(self, g, op, dy):
        """dx = dy permuted back: ChannelPermute with the inverse order (a shuffle of g groups: of C/g)."""
        if not g.needs(0):
            return [None], {}
        a, c = self.attrs_of(op), op.operands[0].type.shape[-1]
        back = {"groups": c // a["groups"]} if a.get("groups") else {"order": inverse(channel_order(a, c))}
        return [g.emit("netc.channel_permute", [dy], back)], {}

    def onnx(self, a, w, op):
        """A Gather of the channel axis (an NCHW image's axis 1, else the last) with the order as indices."""
        r = len(op.operands[0].type.shape)
        layout = w.layout(op) if r == 4 else "nhwc"
        axis = 1 if layout == "nchw" else r - 1
        name = a.get("name") or "channel_permute"
        order = channel_order(a, op.operands[0].type.shape[-1])
        y = w.node("Gather", [w.x(op, 0, layout), w.const(order, name + ".order")], hint=name, axis=axis)
        w.result(op, y, layout)
