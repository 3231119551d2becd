"""Schedules: the training program's eager updates and the greedy orders that free the most bytes
first (memory/plan.py plans each candidate and keeps the smallest)."""
from __future__ import annotations

from .aliasing import AliasForest
from .graph import PlanGraph
from .model import BATCH, PlanError


def eager_updates(g: PlanGraph, order: list) -> list:
    """`order` with every update (a unit that only writes parameters or state in place) moved up
    to right after the last unit it depends on: its gradient's producer and the parameter's other
    readers (PlanGraph.after). An update frees its gradient, so it should not wait."""
    upd = {u for u in order if g.updates[u] and not g.writes[u]}
    if not upd:
        return list(order)
    deps = {u: {g.producer[t] for t in g.reads[u] if g.producer[t] >= 0} | g.after[u] for u in upd}
    out, done, pending = [], set(), [u for u in order if u in upd]

    def flush():
        moved = True
        while moved:
            moved = False
            for u in list(pending):
                if deps[u] <= done:
                    pending.remove(u)
                    out.append(u)
                    done.add(u)
                    moved = True

    flush()
    for u in order:
        if u in upd:
            continue
        out.append(u)
        done.add(u)
        flush()
    out += pending           # unreachable for a valid order: every dependency is placed above
    return out


def tree_sizes(g: PlanGraph, f: AliasForest):
    """Bytes per tree (at the compiled batch) and pending events (writes + reads) per tree."""
    n = len(g.tensors)
    size = [0] * n
    pending = [0] * n
    pinned = [False] * n
    for t in g.tensors:
        if g.is_internal[t.id]:
            continue          # a fused intermediate never takes memory
        r = f.find(t.id)
        if f.troot[r] == t.id:
            size[r] = t.size * (g.batch if t.cls == BATCH else 1)
        if t.output or t.kind == "param":
            pinned[r] = True
        pending[r] += len(g.readers[t.id]) + (1 if g.producer[t.id] >= 0 else 0)
    return size, pending, pinned


def greedy_order(g: PlanGraph, f: AliasForest, lifo: bool) -> list:
    """Among ready units, run the one that frees the most bytes net of what it allocates."""
    nops = len(g.units)
    size, pending, pinned = tree_sizes(g, f)
    live = [False] * len(g.tensors)
    for t in g.tensors:
        if g.producer[t.id] < 0:
            live[f.find(t.id)] = True
    deps = [0] * nops
    users: list[list[int]] = [[] for _ in range(nops)]
    for i in range(nops):
        srcs = {g.producer[t] for t in g.reads[i] if g.producer[t] >= 0} | g.after[i]
        deps[i] = len(srcs)
        for s in srcs:
            users[s].append(i)
    # per op: tree -> events it completes
    events = []
    for i in range(nops):
        ev: dict[int, int] = {}
        for t in g.writes[i]:
            r = f.find(t)
            ev[r] = ev.get(r, 0) + 1
        for t in dict.fromkeys(g.reads[i]):
            r = f.find(t)
            ev[r] = ev.get(r, 0) + 1
        events.append(ev)
    ready = [i for i in range(nops) if deps[i] == 0]
    stamp = {i: 0 for i in ready}
    clock = 0
    order = []
    while ready:
        best, best_key = None, None
        for i in ready:
            gain = 0
            for r, k in events[i].items():
                if not live[r]:
                    gain -= size[r]
                if pending[r] == k and not pinned[r]:
                    gain += size[r]
            key = (gain, stamp[i] if lifo else 0, -i)
            if best_key is None or key > best_key:
                best, best_key = i, key
        ready.remove(best)
        order.append(best)
        for r, k in events[best].items():
            live[r] = True
            pending[r] -= k
        clock += 1
        for u in users[best]:
            deps[u] -= 1
            if deps[u] == 0:
                ready.append(u)
                stamp[u] = clock
    if len(order) != nops:
        raise PlanError("the network is not acyclic")
    return order
