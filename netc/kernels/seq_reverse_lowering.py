"""The lowering-table entry of netc.seq_reverse (kernels/lowering.py reads SEQ_REVERSE_LOWERINGS and
SEQ_REVERSE_TILES into its tables): kernels/seq_reverse.py's gather over the T * B rows of the sequence,
its grid growing with T (B rows per step) when T is the program's batch, with B (T rows per sample)
when B is, else fixed. The op is its own gradient, so this one entry serves the backward too. Like
the table, this module imports no launcher until an entry runs."""
from __future__ import annotations

from .spec import FIXED_GRID, KernelSpec, call_args, pinned, pow2_between, single_member


def lower_seq_reverse(ctx, members) -> KernelSpec:
    from .seq_reverse import seq_reverse
    op = single_member(members)
    x = ctx.value(op.operands[0])
    n = ctx.value(op.operands[1]) if len(op.operands) > 1 else None
    return steps_spec(ctx, seq_reverse(x, n, out=ctx.out, launch=False, **pinned(seq_reverse, ctx)), x)


def steps_spec(ctx, call, x) -> KernelSpec:
    """The spec of a kernel over the T * B rows of a sequence x [T, B, ...] (seq_reverse's, seq_mask's): its grid
    grows with T (B rows a step) when T is the program's batch, with B (T rows a sample) when B is, else fixed."""
    t, b = x.shape[0], x.shape[1]
    if t == ctx.batch:
        return KernelSpec(call, b, "BLOCK_M")
    if b == ctx.batch:
        return KernelSpec(call, t, "BLOCK_M")
    return KernelSpec(call, 1, FIXED_GRID)


SEQ_REVERSE_LOWERINGS = {"netc.seq_reverse": lower_seq_reverse}


def steps_tiles(call):
    """The interpreter's tiles of such a kernel: as large as the problem."""
    a = call_args(call)
    bn = pow2_between(a["F"], 1, 1024)
    return dict(block_n=bn, block_m=pow2_between(a["M"], 1, max(1, 2 ** 16 // bn)))


# the interpreter's tiles (kernels/lowering.py INTERPRETER_TILES): as large as the problem
SEQ_REVERSE_TILES = {"seq_reverse_kernel": steps_tiles}
