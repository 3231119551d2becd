"""Helpers shared by the name-level passes (parents are still strings there)."""
from __future__ import annotations

from ..ir.core import Operation, copy_attr


def parent_loc(op: Operation, i: int):
    return op.attr_loc(f"parent{i}")


def rewrite_parents(op: Operation, fn):
    """Replace each parent name p of op by the list fn(p, loc) returns (None = error, drop it)."""
    old = op.attrs.get("parents")
    if not old:
        return
    new, locs = [], []
    for i, p in enumerate(old):
        loc = parent_loc(op, i)
        r = fn(p, loc)
        if r is None:
            continue
        new.extend(r)
        locs.extend([loc] * len(r))
    op.attrs["parents"] = new
    if op.attr_locs is None:
        op.attr_locs = {}
    for k in [k for k in op.attr_locs if k.startswith("parent")]:
        del op.attr_locs[k]
    for i, loc in enumerate(locs):
        op.attr_locs[f"parent{i}"] = loc


def clone_layer(op: Operation) -> Operation:
    c = Operation(op.name, result_types=[r.type for r in op.results], attrs=copy_attr(op.attrs), loc=op.loc)
    c.attr_locs = dict(op.attr_locs) if op.attr_locs is not None else {}
    return c

