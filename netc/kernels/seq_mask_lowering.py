"""The lowering-table entry of netc.seq_mask (kernels/lowering.py reads SEQ_MASK_LOWERINGS and SEQ_MASK_TILES
into its tables): kernels/seq_mask.py's copy-or-zero over the T * B rows of the sequence, its grid growing
with T (B rows per step) when T is the program's batch, with B (T rows per sample) when B is, else fixed.
The op is its own gradient, so this one entry serves the backward too. Like the table, this module imports
no launcher until an entry runs."""
from __future__ import annotations

from .seq_reverse_lowering import steps_spec, steps_tiles
from .spec import pinned, single_member


def lower_seq_mask(ctx, members):
    from .seq_mask import seq_mask
    op = single_member(members)
    x = ctx.value(op.operands[0])
    return steps_spec(ctx, seq_mask(x, ctx.value(op.operands[1]), out=ctx.out, launch=False, **pinned(seq_mask, ctx)), x)


SEQ_MASK_LOWERINGS = {"netc.seq_mask": lower_seq_mask}

# the interpreter's tiles (kernels/lowering.py INTERPRETER_TILES): as large as the problem
SEQ_MASK_TILES = {"seq_mask_kernel": steps_tiles}
