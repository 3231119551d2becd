"""The lowering-table entries of netc.clip and netc.clip_grad (kernels/lowering.py reads CLIP_LOWERINGS and
CLIP_TILES into its tables): the forward as an elementwise chain of max/mul steps, the gradient as
kernels/clip.py's kernel; both grids grow with the batch (elements per sample over the block). Like the
table, this module imports no launcher until an entry runs."""
from __future__ import annotations

from .spec import KernelSpec, call_args, op_attrs, pinned, pow2_between, single_member


def lower_clip(ctx, members) -> KernelSpec:
    from .clip import clip
    from .elementwise import elementwise_chain
    op = single_member(members)
    a = op_attrs(op)
    x = ctx.value(op.operands[0])
    call = clip(x, a["min"], a["max"], out=ctx.out, launch=False, **pinned(elementwise_chain, ctx))
    return KernelSpec(call, x.numel() // ctx.batch, "BLOCK")


def lower_clip_grad(ctx, members) -> KernelSpec:
    from .clip import clip_grad
    op = single_member(members)
    a = op_attrs(op)
    dy = ctx.value(op.operands[1])
    call = clip_grad(ctx.value(op.operands[0]), dy, a["min"], a["max"], out=ctx.out, launch=False,
                     **pinned(clip_grad, ctx))
    return KernelSpec(call, dy.numel() // ctx.batch, "BLOCK")


CLIP_LOWERINGS = {"netc.clip": lower_clip, "netc.clip_grad": lower_clip_grad}

# the interpreter's tiles (kernels/lowering.py INTERPRETER_TILES): as large as the problem
CLIP_TILES = {"clip_grad_kernel": lambda call: dict(block=pow2_between(call_args(call)["NUMEL"], 1, 2 ** 18))}
