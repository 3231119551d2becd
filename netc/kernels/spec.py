"""What a lowering-table entry returns (KernelSpec, FIXED_GRID), the pin it passes to its launcher
(pinned) and the helpers every entry uses (op_attrs, single_member, grows_with_steps, and the interpreter
tiles' call_args, pow2_between): the table's vocabulary, in a module of its own so that entries kept
beside their kernels (kernels/recurrent_lowering.py, rnn_lowering.py, sequence_lowering.py) share it
with kernels/lowering.py, which re-exports it."""
from __future__ import annotations

from typing import NamedTuple

# a grid's first axis that does not depend on the batch: cdiv(1 * b, FIXED_GRID) = 1 for any batch
# b < 2^30, times R programs (the losses' ONE_PROGRAM)
FIXED_GRID = 1 << 30


class KernelSpec(NamedTuple):
    call: object            # KernelCall (launch=False)
    rows_per_sample: int
    block: object           # constexpr name, a number, None (1) or FIXED_GRID


def pinned(fn, ctx) -> dict:
    """The pinned launcher keywords `fn` takes (a group's pin holds its first kernel's tiles, and a
    launcher of several kernels may not take every one of them)."""
    import inspect
    params = inspect.signature(fn).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return dict(ctx.pin)
    return {k: v for k, v in ctx.pin.items() if k in params}


def row_factor(t, ctx) -> int:
    """Rows of t's axis 0 per sample of the batch: B for a sequence's steps flattened, [T*B, ...] with T the
    batch (memory/graph.py), else 1."""
    n = t.shape[0] if t.dim() else 0
    return n // ctx.batch if ctx.batch and n > ctx.batch and n % ctx.batch == 0 else 1


def op_attrs(op) -> dict:
    """An IR op's attributes with its OpDef's defaults."""
    from ..ops import lookup
    return lookup(op.name).attrs_of(op)


def single_member(members):
    """The one op of a group whose entry takes no fused members."""
    if len(members) != 1:
        raise AssertionError(f"group of {members[0].name} has {len(members)} members")
    return members[0]


def grows_with_steps(ctx, seq, call) -> KernelSpec:
    """The spec of a kernel over the T * B rows of sequence `seq`: its grid grows with T (B rows per
    step) when T is the program's batch, else it is fixed."""
    if seq.shape[0] == ctx.batch:
        return KernelSpec(call, seq.shape[1], "BLOCK_M")
    return KernelSpec(call, 1, FIXED_GRID)


def pow2_between(n: int, lo: int, hi: int) -> int:
    """The smallest power of two >= n, clamped to [lo, hi] (an interpreter tile)."""
    p = 1
    while p < n:
        p *= 2
    return max(lo, min(hi, p))


def call_args(call) -> dict:
    """A KernelCall's runtime arguments by name."""
    return dict(zip(call.kernel.arg_names, call.args))
