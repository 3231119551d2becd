"""The lowering-table entry of netc.channel_permute (kernels/lowering.py reads CHANNEL_PERMUTE_LOWERINGS and
CHANNEL_PERMUTE_TILES into its tables): kernels/channel_permute.py's gather over the rows of the value (its
pixels and samples), the order embedded in the library as an int32 table (ctx.constant), the grid growing
with the batch (rows per sample over the block), fixed for a value without one. The op's gradient is the
op again (the inverse order), so this one entry serves the backward too. Like the table, this module
imports no launcher until an entry runs."""
from __future__ import annotations

from ..ops.channel_permute import channel_order
from .spec import FIXED_GRID, KernelSpec, call_args, op_attrs, pinned, pow2_between, single_member


def lower_channel_permute(ctx, members) -> KernelSpec:
    import torch

    from .channel_permute import channel_permute
    op = single_member(members)
    x = ctx.value(op.operands[0])
    order = ctx.constant(torch.tensor(channel_order(op_attrs(op), x.shape[-1]), dtype=torch.int32))
    call = channel_permute(x, order, out=ctx.out, launch=False, **pinned(channel_permute, ctx))
    rows = x.numel() // max(x.shape[-1], 1)
    if x.dim() >= 2 and ctx.batch in tuple(x.shape[:2]) and rows % ctx.batch == 0:
        return KernelSpec(call, rows // ctx.batch, "BLOCK_M")
    return KernelSpec(call, 1, FIXED_GRID)


CHANNEL_PERMUTE_LOWERINGS = {"netc.channel_permute": lower_channel_permute}


def _tiles(call):
    a = call_args(call)
    bn = pow2_between(a["C"], 1, 1024)
    return dict(block_n=bn, block_m=pow2_between(a["M"], 1, max(1, 2 ** 16 // bn)))


# the interpreter's tiles (kernels/lowering.py INTERPRETER_TILES): as large as the problem
CHANNEL_PERMUTE_TILES = {"channel_permute_kernel": _tiles}
