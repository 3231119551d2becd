"""What a lowering-table entry returns (KernelSpec, FIXED_GRID) and the pin it passes to its
launcher (pinned): the table's vocabulary, in a module of its own so that entries kept beside their
kernels (kernels/recurrent_lowering.py) share it with kernels/lowering.py, which re-exports it."""
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
