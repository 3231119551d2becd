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
    over = _overlaps(bufs)
    if strategy == "greedy-by-size":
        order = sorted(range(n), key=lambda k: (-bufs[k][1], -(bufs[k][3] - bufs[k][2]), bufs[k][2], k))
    elif strategy == "longest-lifetime-first":
        order = sorted(range(n), key=lambda k: (-(bufs[k][3] - bufs[k][2]), -bufs[k][1], bufs[k][2], k))
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
