"""Exact offset assignment by branch and bound, in the spirit of MiniMalloc (Moffitt, ASPLOS 2023).

The problem (what plan.py's heuristics solve approximately): buffers (id, size, start, end), sizes
already aligned; two buffers whose lifetimes [start, end] intersect must get disjoint byte ranges;
minimise the arena max(offset + size). Offsets come out as `base` plus a sum of buffer sizes, so
with aligned sizes and an aligned base every offset is aligned, as plan.py requires.

Why the search below finds an optimum (when it completes):

* Canonical solutions. Any placement can be pushed down until every buffer rests on the base or on
  the top of a buffer it overlaps in time, without growing the arena. Take such a placement and
  place its buffers in order of non-decreasing offset: each one lands exactly at
  max(last offset placed, the tops of the placed buffers it overlaps in time) -- the "skyline"
  (per-section floor) under it. So it suffices to branch on WHICH buffer goes next, each placed at
  that candidate offset, with offsets never decreasing along a branch.
* Sections. Time is cut at the distinct start steps; two buffers overlap in time iff they share a
  section, and each section keeps a floor: the top of what was placed there.
* Bounds. Nothing goes below the last offset placed, so every section needs at least
  max(floor, last offset) + the sizes of its unplaced buffers: a branch whose bound reaches the
  best arena found is cut. The root bound is the peak of live bytes: reaching it proves optimality.
* Dominance. Two partial solutions with the same unplaced set and the same effective floors where
  unplaced buffers remain have the same completions: the one with the larger arena so far is cut
  (this also removes orders that differ only by swapping buffers placed at one offset).
* Forced buffers. A buffer whose time-neighbours are all placed interacts with nothing left: it
  goes straight onto its skyline, out of the branching.
* Decomposition. Steps where no buffer is live across cut the problem into independent
  components; the arena is the largest component's, so only components above the others are
  searched, and the arena is proven optimal when the component that sets it is.

The search starts from the heuristics' best (`upper`, `offsets`) and only accepts strict
improvements, so it can never do worse. It stops at `node_limit` nodes (deterministic: the same
problem gives the same plan on every machine) or after `budget` seconds (a safety net for slow
machines), whichever comes first, and says whether the result is proven optimal.
"""
from __future__ import annotations

import time
from bisect import bisect_right
from dataclasses import dataclass, field

DEFAULT_BUDGET = 0.2          # seconds per arena
DEFAULT_NODE_LIMIT = 10000    # search nodes per arena (about 0.1 s at 64 buffers)


@dataclass
class ExactResult:
    size: int                  # arena: base + the highest top
    offsets: list              # per buffer, in the order given
    proven: bool               # the arena is optimal: the search completed, or it meets the bound
    lower_bound: int           # base + peak of live bytes
    improved: bool = False     # strictly smaller than the `upper` it was seeded with
    nodes: int = 0
    complete: bool = True      # no limit was hit
    seconds: float = 0.0
    components: list = field(default_factory=list)   # (buffers, arena, peak, proven) per component searched


class _Stop(Exception):
    """A limit was hit (or the target reached): unwind the search."""


def _first_fit(bufs, base):
    """A quick seed when the caller has none: largest first, lowest gap among time-overlapping."""
    offs = [-1] * len(bufs)
    for k in sorted(range(len(bufs)), key=lambda k: (-bufs[k][1], bufs[k][2], k)):
        _, size, a, e = bufs[k]
        placed = sorted((offs[j], bufs[j][1]) for j in range(len(bufs))
                        if offs[j] >= 0 and bufs[j][2] <= e and a <= bufs[j][3])
        o = base
        for po, ps in placed:
            if po - o >= size:
                break
            o = max(o, po + ps)
        offs[k] = o
    return offs


def components(bufs) -> list:
    """Groups of buffer indices connected through time overlaps (steps nothing lives across cut them)."""
    order = sorted(range(len(bufs)), key=lambda k: (bufs[k][2], bufs[k][3], k))
    out, cur, reach = [], [], None
    for k in order:
        if cur and bufs[k][2] > reach:
            out.append(cur)
            cur = []
        reach = bufs[k][3] if not cur else max(reach, bufs[k][3])
        cur.append(k)
    if cur:
        out.append(cur)
    return out


def peak(bufs) -> int:
    """Peak over time of the bytes of live buffers."""
    ev = sorted([(a, 0, s) for _, s, a, _ in bufs] + [(e + 1, -1, -s) for _, s, _, e in bufs])
    cur = best = 0
    for _, _, d in ev:
        cur += d
        best = max(best, cur)
    return best


def exact_offsets(bufs: list, base: int = 0, upper: int | None = None, offsets: list | None = None, *,
                  budget: float = DEFAULT_BUDGET, node_limit: int = DEFAULT_NODE_LIMIT) -> ExactResult:
    """The best placement of bufs = [(id, size, start, end)] above `base` the search finds.

    upper, offsets: a known feasible placement (the heuristics' best) and its arena; the search
    only looks for strictly smaller arenas and returns this one when it finds none."""
    t0 = time.perf_counter()
    deadline = t0 + budget
    if offsets is None:
        offsets = _first_fit(bufs, base)
    if upper is None:
        upper = max([base] + [o + b[1] for o, b in zip(offsets, bufs)])
    seed = max([base] + [o + b[1] for o, b in zip(offsets, bufs)])
    if seed > upper:
        raise ValueError("the seed placement is larger than its stated arena")
    live = [k for k in range(len(bufs)) if bufs[k][1] > 0]
    lb = base + peak([bufs[k] for k in live])
    res = ExactResult(upper, list(offsets), upper == lb, lb)
    if res.proven:
        res.seconds = time.perf_counter() - t0
        return res
    comps = []
    for comp in components([bufs[k] for k in live]):
        ks = [live[i] for i in comp]
        sub = [bufs[k] for k in ks]
        ub = max(offsets[k] - base + bufs[k][1] for k in ks)
        comps.append((ub, ks, sub, peak(sub)))
    comps.sort(key=lambda c: (-c[0], c[1][0]))
    budget_nodes = [node_limit]
    needed = 0                 # the arena (above base) of the components placed so far
    searched = []              # (arena, proven optimal for its component) per component searched
    new = list(offsets)
    for ub, ks, sub, pk in comps:
        if ub <= needed:
            continue           # below another component: it does not set the arena
        search = _Search(sub, ub, [offsets[k] - base for k in ks], max(needed, pk), deadline, budget_nodes)
        search.run()
        res.nodes += search.nodes
        res.complete = res.complete and not search.limited
        if search.best < ub:
            for k, o in zip(ks, search.best_offs):
                new[k] = base + o
        # stopping early at another component's arena proves nothing about this one
        proven = search.exhausted or search.best == pk
        searched.append((search.best, proven))
        res.components.append((len(ks), base + search.best, base + pk, proven))
        needed = max(needed, search.best)
    if base + needed < upper:
        for k in range(len(bufs)):
            if bufs[k][1] <= 0:
                new[k] = base      # empty buffers anywhere; not above the smaller arena
        res.size, res.offsets, res.improved = base + needed, new, True
    # the arena is the largest component's: optimal when that component's is
    res.proven = res.size == lb or any(v == needed and p for v, p in searched)
    res.seconds = time.perf_counter() - t0
    return res


class _Search:
    """Branch and bound over canonical placements of one component (offsets relative to 0)."""

    def __init__(self, bufs, upper, offsets, stop_at, deadline, nodes_left):
        n = len(bufs)
        starts = sorted({b[2] for b in bufs})
        self.size = [b[1] for b in bufs]
        self.lo = [starts.index(b[2]) for b in bufs]
        self.hi = [bisect_right(starts, b[3]) - 1 for b in bufs]
        S = len(starts)
        self.rem = [0] * S
        for k in range(n):
            for s in range(self.lo[k], self.hi[k] + 1):
                self.rem[s] += self.size[k]
        self.nbr = [0] * n
        for k in range(n):
            for j in range(n):
                if j != k and self.lo[j] <= self.hi[k] and self.lo[k] <= self.hi[j]:
                    self.nbr[k] |= 1 << j
        self.floor = [0] * S
        self.offs = [-1] * n
        self.best, self.best_offs = upper, list(offsets)
        self.stop_at, self.deadline, self.nodes_left = stop_at, deadline, nodes_left
        self.nodes = 0
        self.exhausted = False     # the whole tree was searched: best is optimal
        self.limited = False       # the node limit or the time budget stopped it
        self.memo: dict = {}
        self.n, self.S = n, S

    def run(self):
        if self.best <= self.stop_at:
            return
        try:
            self._dfs((1 << self.n) - 1, 0, 0)
            self.exhausted = True
        except _Stop:
            pass

    def _record(self, cur_max):
        self.best, self.best_offs = cur_max, list(self.offs)
        if cur_max <= self.stop_at:
            raise _Stop

    def _dfs(self, unplaced, x_prev, cur_max):
        self.nodes += 1
        self.nodes_left[0] -= 1
        if self.nodes_left[0] < 0 or (self.nodes & 127 == 0 and time.perf_counter() > self.deadline):
            self.limited = True
            raise _Stop
        size, lo, hi, floor, rem, offs = self.size, self.lo, self.hi, self.floor, self.rem, self.offs
        # forced buffers: every time-neighbour placed, nothing left to interact with
        forced = []
        m = unplaced
        while m:
            k = (m & -m).bit_length() - 1
            m &= m - 1
            if not self.nbr[k] & unplaced:
                forced.append(k)
        if forced:
            for k in forced:
                offs[k] = max(floor[lo[k]:hi[k] + 1])
                cur_max = max(cur_max, offs[k] + size[k])
                unplaced &= ~(1 << k)
                for s in range(lo[k], hi[k] + 1):
                    rem[s] -= size[k]
            try:
                if cur_max < self.best:
                    self._branch(unplaced, x_prev, cur_max)
            finally:
                for k in forced:
                    for s in range(lo[k], hi[k] + 1):
                        rem[s] += size[k]
                    offs[k] = -1
            return
        self._branch(unplaced, x_prev, cur_max)

    def _branch(self, unplaced, x_prev, cur_max):
        if not unplaced:
            if cur_max < self.best:
                self._record(cur_max)
            return
        size, lo, hi, floor, rem, offs = self.size, self.lo, self.hi, self.floor, self.rem, self.offs
        bound, key = cur_max, [unplaced]
        for s in range(self.S):
            r = rem[s]
            if r:
                f = floor[s] if floor[s] > x_prev else x_prev
                key.append(f)
                if f + r > bound:
                    bound = f + r
            else:
                key.append(-1)
        if bound >= self.best:
            return
        key = tuple(key)
        seen = self.memo.get(key)
        if seen is not None and seen <= cur_max:
            return
        self.memo[key] = cur_max
        kids = []
        m = unplaced
        while m:
            k = (m & -m).bit_length() - 1
            m &= m - 1
            x = max(floor[lo[k]:hi[k] + 1])
            if x < x_prev:
                x = x_prev
            if x + size[k] < self.best:
                kids.append((x, -size[k], lo[k] - hi[k], k))
        kids.sort()
        for x, _, _, k in kids:
            if x + size[k] >= self.best:
                continue           # the best improved while searching a sibling
            a, b = lo[k], hi[k] + 1
            saved = floor[a:b]
            top = x + size[k]
            floor[a:b] = [top] * (b - a)
            for s in range(a, b):
                rem[s] -= size[k]
            offs[k] = x
            try:
                self._dfs(unplaced & ~(1 << k), x, cur_max if cur_max > top else top)
            finally:
                floor[a:b] = saved
                for s in range(a, b):
                    rem[s] += size[k]
                offs[k] = -1
