"""The lowering-table entry of netc.seq_mask (kernels/lowering.py reads SEQ_MASK_LOWERINGS and SEQ_MASK_TILES
into its tables): kernels/seq_mask.py's copy-or-zero over the T * B rows of the sequence, its grid growing
with T (B rows per step) when T is the program's batch, with B (T rows per sample) when B is, else fixed.
The op is its own gradient, so this one entry serves the backward too. Like the table, this module imports
no launcher until an entry runs."""
from __future__ import annotations

from .spec import FIXED_GRID, KernelSpec, call_args, pinned, pow2_between, single_member


def lower_seq_mask(ctx, members) -> KernelSpec:
    from .seq_mask import seq_mask
    op = single_member(members)
    x = ctx.value(op.operands[0])
    call = seq_mask(x, ctx.value(op.operands[1]), out=ctx.out, launch=False, **pinned(seq_mask, ctx))
    t, b = x.shape[0], x.shape[1]
    if t == ctx.batch:
        return KernelSpec(call, b, "BLOCK_M")
    if b == ctx.batch:
        return KernelSpec(call, t, "BLOCK_M")
    return KernelSpec(call, 1, FIXED_GRID)


SEQ_MASK_LOWERINGS = {"netc.seq_mask": lower_seq_mask}


def _tiles(call):
    a = call_args(call)
    bn = pow2_between(a["F"], 1, 1024)
    return dict(block_n=bn, block_m=pow2_between(a["M"], 1, max(1, 2 ** 16 // bn)))


# the interpreter's tiles (kernels/lowering.py INTERPRETER_TILES): as large as the problem
SEQ_MASK_TILES = {"seq_mask_kernel": _tiles}
