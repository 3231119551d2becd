"""fuse: group ops that codegen runs as one kernel, recorded as attributes on every op.

Groups (each op gets `fusion_group = "g<k>"` and `fusion_anchor = "<layer>"`, the group's anchor: its first op but
in a prologue group, below):

* anchor conv2d / inner_product, then its pointwise consumers folded into the GEMM epilogue, in
  the epilogue's fixed order (netc/kernels/common.py): batch_norm (scale/shift) -> residual add ->
  activation -> residual add. An elementwise `sum` of two operands is a residual add when its
  other operand is defined before the anchor. A conv with its own `activation` attribute has
  already applied it, so only a residual add (after the activation) can follow.
* a chain of pointwise ops (relu, sigmoid, tanh, batch_norm, elementwise) -> one elementwise
  kernel, within that kernel's limits (4 tensor operands, 4 per-channel vectors = 2 batch norms);
* in a training program, an activation gradient (netc.activation_grad: dz = act'(y) * dy):
  - into the epilogue of the data gradient that computes its dy (conv2d_grad_data,
    inner_product_grad_data, when dy has no other reader): the kernel multiplies by act'(y) before
    it stores, so dy is never stored (cuDNN's dgrad + drelu);
  - else, when dz has one reader and it is a gradient GEMM reading it as its dz
    (conv2d_grad_data/_filter, inner_product_grad_data/_filter, bias_grad), into that GEMM's
    prologue: the kernel reads dy and y and computes dz as it loads (netc/kernels/conv_grad.py).
    The group's first op is then the prologue, its anchor (`fusion_anchor`) the GEMM after it.
    Not where dz has several readers (a layer's data, filter and bias gradients): each would
    recompute it, keeping y and dy alive until the last one, where the stored dz replaces dy in
    place -- measured on the corpus's training plans, up to 7.6% larger arenas for one launch less;
* every other op (pools, lrn, softmax, concat, views, dropout, ...) its own group.

A consumer joins only when the producer's result has no other user (and is not a network
output), so no intermediate tensor of a group is ever needed in memory. The pass decides on IR
facts only. plan-memory runs after it and makes each group ONE step: operands live until the
group runs, intermediates get no bytes, and the result overlaps only operands every member reads
at the output's index (netc/memory/plan.py); so codegen (netc/codegen/lower.py) runs every group
as planned and splits none.

Which op plays which part is the op's own declaration (netc/ops/, OpDef's fusion facts):
`gemm_epilogue` (the anchors), `pointwise` ("activation", "affine", "elementwise", with
chains() / residual_add() for the forms a kernel takes), `prologue_operand` (the gradient GEMMs
and their dz), `fusion_prologue` (the activation gradient), `grad_epilogue` (the data gradients).
"""
from __future__ import annotations

from ..ir.core import STRUCTURAL_OPS
from ..ops import OpDef, lookup
from .registry import Pass, register_pass

_NONE = OpDef()   # structural ops' facts: none
MAX_CHAIN_TENSORS = 4   # elementwise_kernel's tensor operand slots
MAX_CHAIN_BNS = 2       # its 4 per-channel vector slots hold 2 scale/shift pairs

# epilogue stages of a GEMM anchor (what has been applied so far)
_BIAS, _AFFINE, _RES, _ACT, _DONE = 0, 1, 2, 3, 4


def _users(body) -> dict:
    users: dict[int, list] = {}
    for op in body:
        for v in op.operands:
            users.setdefault(id(v), []).append(op)
    return users


def _def(op) -> OpDef:
    return lookup(op.name) or _NONE


def _outputs(body) -> set:
    return {id(v) for op in body if op.name == "netc.output" for v in op.operands}


@register_pass
class Fuse(Pass):
    name = "fuse"
    title = "Fuse"
    requires = ("shape-inference", "materialize-params")
    summary = "group convolutions and inner products with their pointwise consumers, and pointwise chains"

    def needed(self, module):
        return any(op.name not in STRUCTURAL_OPS and op.name != "netc.input" and "fusion_group" not in op.attrs
                   for net in module.networks() for op in net.regions[0].ops)

    def run(self, module, ctx):
        for net in module.networks():
            fuse_network(net)


def fuse_network(net):
    body = net.regions[0].ops
    users = _users(body)
    outs = _outputs(body)
    pos = {id(op): i for i, op in enumerate(body)}
    for op in body:
        op.attrs.pop("fusion_group", None)
        op.attrs.pop("fusion_anchor", None)
    grouped: set = set()
    k = 0

    def sole_user(op):
        """The one consumer of op's only result, when fusing into it keeps the result internal."""
        if len(op.results) != 1 or id(op.results[0]) in outs:
            return None
        us = users.get(id(op.results[0]), [])
        if len(us) != 1 or id(us[0]) in grouped:
            return None
        u = us[0]
        if sum(1 for v in u.operands if v is op.results[0]) != 1:
            return None   # e.g. x + x: the value is read twice
        return u

    for op in body:
        if op.name in STRUCTURAL_OPS or op.name == "netc.input" or id(op) in grouped or op.attrs.get("invalid"):
            continue
        members = [op]
        anchor = op
        d = _def(op)
        if d.fusion_prologue and _prologue_reader(op, users, outs) is not None:
            anchor = _prologue_reader(op, users, outs)
            members.append(anchor)
        if _def(anchor).grad_epilogue:
            u = sole_user(anchor)
            if u is not None and _def(u).fusion_prologue and u.operands[1] is anchor.results[0]:
                members.append(u)
        elif d.gemm_epilogue:
            stage = _ACT if op.attrs.get("activation", "none") not in ("none", None) else _BIAS
            cur = op
            while stage < _DONE:
                u = sole_user(cur)
                if u is None:
                    break
                nxt = _epilogue_stage(u, cur, stage, pos, pos[id(op)])
                if nxt is None:
                    break
                stage = nxt
                members.append(u)
                cur = u
        elif d.pointwise and d.chains(op):
            tensors = len(op.operands) - 1
            bns = d.pointwise == "affine"
            kinds, most = d.chain_followers(op)
            cur = op
            while most is None or len(members) <= most:
                u = sole_user(cur)
                if u is None or not _def(u).pointwise or not _def(u).chains(u) or _def(u).pointwise not in kinds:
                    break
                t = tensors + len(u.operands) - 1
                b = bns + (_def(u).pointwise == "affine")
                if t > MAX_CHAIN_TENSORS or b > MAX_CHAIN_BNS:
                    break
                tensors, bns = t, b
                members.append(u)
                cur = u
        k += 1
        for m in members:
            grouped.add(id(m))
            m.attrs["fusion_group"] = f"g{k}"
            m.attrs["fusion_anchor"] = anchor.attrs.get("name", anchor.name)


def _prologue_reader(op, users, outs):
    """The one gradient GEMM that reads op's result as its dz (op then runs as its prologue), or None."""
    if len(op.results) != 1 or id(op.results[0]) in outs:
        return None
    us = users.get(id(op.results[0]), [])
    if len(us) != 1 or _def(us[0]).prologue_operand is None:
        return None
    u = us[0]
    k = _def(u).prologue_operand
    if [i for i, v in enumerate(u.operands) if v is op.results[0]] != [k]:
        return None
    return u


def _epilogue_stage(u, prev, stage, pos, anchor_pos):
    """The epilogue stage after folding consumer u into a GEMM anchor, or None if it cannot fold."""
    d = _def(u)
    if d.pointwise == "affine":
        return _AFFINE if stage < _AFFINE else None
    if d.pointwise == "activation":
        return _ACT if stage < _ACT else None
    if d.residual_add(u):
        other = u.operands[1] if u.operands[0] is prev.results[0] else u.operands[0]
        if other.type.shape != prev.results[0].type.shape or other.type.dtype != prev.results[0].type.dtype:
            return None
        # "available": computed before the anchor (network inputs are defined at the top)
        if pos.get(id(other.owner), anchor_pos) >= anchor_pos:
            return None
        if stage < _RES:
            return _RES
        if stage == _ACT:
            return _DONE   # residual added after the activation
        return None
    return None
