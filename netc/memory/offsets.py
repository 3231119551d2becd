"""Offsets inside one arena (Pisarchyk & Lee 2020): greedy by size, greedy by breadth and
longest-lifetime-first with a best-fit gap, and the live-bytes lower bound."""
from __future__ import annotations

from .model import PlanError

STRATEGIES = ("greedy-by-size", "greedy-by-breadth", "longest-lifetime-first")


def _overlaps(bufs: list) -> list:
    """For each buffer (index into bufs), the buffers whose lifetimes intersect it."""
    idx = sorted(range(len(bufs)), key=lambda k: bufs[k][2])
    over: list[list[int]] = [[] for _ in bufs]
    active: list[int] = []
    for k in idx:
        s = bufs[k][2]
        active = [a for a in active if bufs[a][3] >= s]
        for a in active:
            over[a].append(k)
            over[k].append(a)
        active.append(k)
    return over


def _best_fit(k: int, bufs, over, offs, base: int) -> int:
    """Smallest gap (at or above base) among the already placed buffers overlapping k in time."""
    size = bufs[k][1]
    placed = sorted((offs[j], bufs[j][1]) for j in over[k] if offs[j] >= 0)
    prev, best, best_gap = base, None, None
    for o, s in placed:
        gap = o - prev
        if gap >= size and (best_gap is None or gap < best_gap):
            best, best_gap = prev, gap
        prev = max(prev, o + s)
    return prev if best is None else best


# Above this many buffers the time-overlap matrix (n x n booleans) is not built; sizes and offsets
# must fit int64 with room to add them
_MATRIX_MAX = 4096
_INT_MAX = 1 << 62


def _best_fits(order: list, bufs: list, base: int) -> list:
    """What `_best_fit` gives buffer after buffer in `order`, with numpy: the time-overlap matrix
    once, then per buffer its placed neighbours sorted by (offset, size), the running end before
    each, and the smallest gap that holds it (the first of equal ones). The same offsets."""
    import numpy as np
    n = len(bufs)
    size = np.array([b[1] for b in bufs], dtype=np.int64)
    start = np.array([b[2] for b in bufs], dtype=np.int64)
    end = np.array([b[3] for b in bufs], dtype=np.int64)
    over = (start[:, None] <= end[None, :]) & (start[None, :] <= end[:, None])
    np.fill_diagonal(over, False)
    placed = np.zeros(n, dtype=bool)
    offs = np.full(n, -1, dtype=np.int64)
    for k in order:
        nb = np.flatnonzero(over[k] & placed)
        if nb.size == 0:
            o = base
        else:
            po, ps = offs[nb], size[nb]
            srt = np.lexsort((ps, po))
            po, ps = po[srt], ps[srt]
            ends = po + ps
            prev = np.empty_like(po)
            prev[0] = base
            if po.size > 1:
                np.maximum(np.maximum.accumulate(ends[:-1]), base, out=prev[1:])
            gaps = po - prev
            fits = gaps >= size[k]
            if fits.any():
                o = int(prev[np.flatnonzero(fits)[np.argmin(gaps[fits])]])
            else:
                o = max(base, int(ends.max()))
        offs[k] = o
        placed[k] = True
    return [int(x) for x in offs]


def _breadth_order(bufs: list) -> list:
    """Greedy by breadth's order: steps by falling breadth (live bytes), and at each step its live
    buffers not yet taken, by falling size. A buffer is taken at the first step of that order among
    those it lives in, so the order sorts buffers by (that step's rank, -size, index)."""
    if not bufs:
        return []
    last = max(e for _, _, _, e in bufs)
    delta = [0] * (last + 2)
    for _, s, a, e in bufs:
        delta[a] += s
        delta[e + 1] -= s
    breadth, cur = [0] * (last + 1), 0
    for st in range(last + 1):
        cur += delta[st]
        breadth[st] = cur
    # only steps some buffer lives in are ranked; the others are never inside a lifetime
    live_steps = [False] * (last + 1)
    cover = 0
    starts = [0] * (last + 2)
    for _, _, a, e in bufs:
        if a <= e:
            starts[a] += 1
            starts[e + 1] -= 1
    for st in range(last + 1):
        cover += starts[st]
        live_steps[st] = cover > 0
    steps = sorted((st for st in range(last + 1) if live_steps[st]), key=lambda st: (-breadth[st], st))
    big = len(steps)
    rank = [big] * (last + 1)
    for r, st in enumerate(steps):
        rank[st] = r
    keyed = []
    for k, (_, s, a, e) in enumerate(bufs):
        if a <= e:
            keyed.append((min(rank[a:e + 1]), -s, k))
    keyed.sort()
    return [k for _, _, k in keyed]


def assign_offsets(bufs: list, strategy: str, base: int = 0) -> list:
    """Offsets for bufs = [(id, aligned size, start, end)], packed above `base`.

    Buffers whose lifetimes intersect get disjoint ranges; sizes are already aligned, so every
    offset is base plus a sum of aligned sizes.
    """
    n = len(bufs)
    offs = [-1] * n
    if strategy == "sequential":
        o = base
        for k in sorted(range(n), key=lambda k: (bufs[k][2], bufs[k][0])):
            offs[k] = o
            o += bufs[k][1]
        return offs
    fast = (0 < n <= _MATRIX_MAX and base >= 0 and base + sum(b[1] for b in bufs) < _INT_MAX
            and all(b[1] >= 0 and 0 <= b[2] <= b[3] for b in bufs))
    over = None if fast else _overlaps(bufs)
    if strategy == "greedy-by-size":
        order = sorted(range(n), key=lambda k: (-bufs[k][1], -(bufs[k][3] - bufs[k][2]), bufs[k][2], k))
    elif strategy == "longest-lifetime-first":
        order = sorted(range(n), key=lambda k: (-(bufs[k][3] - bufs[k][2]), -bufs[k][1], bufs[k][2], k))
    elif strategy == "greedy-by-breadth" and fast:
        order = _breadth_order(bufs)
    elif strategy == "greedy-by-breadth":
        live: dict[int, list[int]] = {}
        breadth: dict[int, int] = {}
        for k, (_, s, a, e) in enumerate(bufs):
            for st in range(a, e + 1):
                live.setdefault(st, []).append(k)
                breadth[st] = breadth.get(st, 0) + s
        order, seen = [], set()
        for st in sorted(live, key=lambda st: (-breadth[st], st)):
            for k in sorted(live[st], key=lambda k: (-bufs[k][1], k)):
                if k not in seen:
                    seen.add(k)
                    order.append(k)
    else:
        raise PlanError(f"unknown offset strategy '{strategy}' (strategies: {', '.join(STRATEGIES)}, sequential)")
    if fast:
        return _best_fits(order, bufs, base)
    for k in order:
        offs[k] = _best_fit(k, bufs, over, offs, base)
    return offs


def live_peak(bufs: list, end: int, base: int = 0) -> int:
    """Peak over the steps of the aligned bytes of live buffers (the lower bound of any arena)."""
    delta = [0] * (end + 2)
    for _, s, a, e in bufs:
        delta[a] += s
        delta[e + 1] -= s
    peak = cur = 0
    for d in delta:
        cur += d
        peak = max(peak, cur)
    return base + peak
