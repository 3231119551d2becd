"""resolve-names: parent names become SSA operands; the network is put in topological order.

Reports duplicate layer names, unknown parents (with "did you mean" and, when the name exists
only in another phase, which one), and cycles in feed-forward networks (with the cycle).
The order is stable: among layers that are ready, the one written first comes first.
"""
from __future__ import annotations

import heapq

from ..diagnostics import did_you_mean
from ..ir.core import STRUCTURAL_OPS
from .registry import Pass, register_pass


@register_pass
class ResolveNames(Pass):
    name = "resolve-names"
    title = "ResolveNames"
    requires = ("flatten-blocks",)
    summary = "turn parent names into SSA operands, check names, order the graph topologically"

    def needed(self, module):
        return any("parents" in op.attrs for op in module.walk())

    def run(self, module, ctx):
        for net in module.networks():
            self._network(net, ctx)

    def _network(self, net, ctx):
        diag = ctx.diag
        errors_before = diag.error_count
        body = net.regions[0].block
        ops = body.ops
        defs: dict[str, object] = {}
        for op in ops:
            if op.name in STRUCTURAL_OPS:
                continue
            n = op.attrs.get("name")
            if n is None:
                continue
            prev = defs.get(n)
            if prev is not None:
                diag.error(f"duplicate layer name '{n}'", op.loc, width=len(n)).note(
                    "previous definition is here", prev.loc)
                continue
            defs[n] = op
        dropped = ctx.notes.get("dropped_by_phase", {})
        netname = net.attrs.get("sym_name")
        ok = True
        for op in ops:
            parents = op.attrs.get("parents")
            if parents is None:
                continue
            operands = []
            for i, p in enumerate(parents):
                src = defs.get(p)
                if src is None:
                    ok = False
                    loc = op.attr_loc(f"parent{i}")
                    d = diag.error(f"unknown parent '{p}' of layer '{op.attrs.get('name', '')}'" if op.name !=
                                   "netc.output" else f"unknown layer '{p}' in output", loc, width=len(p))
                    gone = dropped.get((netname, p))
                    if gone:
                        inc, exc, gloc = gone[0]
                        which = (f"only in phase{'s' if len(inc) > 1 else ''} {', '.join(inc)}" if inc is not None
                                 else f"in every phase but {', '.join(exc)}")
                        d.note(f"'{p}' exists {which}, and this is the {ctx.phase} phase", gloc)
                    else:
                        hint = did_you_mean(p, defs)
                        if hint:
                            d.note(f"did you mean '{hint}'?", defs[hint].loc)
                    continue
                if src is op:
                    ok = False
                    diag.error(f"layer '{p}' lists itself as a parent", op.attr_loc(f"parent{i}"), width=len(p))
                    continue
                operands.append(src)
            op.attrs["_srcs"] = operands
        if not ok or diag.error_count > errors_before:  # earlier (frontend) errors do not stop it
            for op in ops:
                op.attrs.pop("_srcs", None)
            return
        order = self._toposort(ops, diag)
        if order is None:
            for op in ops:
                op.attrs.pop("_srcs", None)
            return
        for op in order:
            srcs = op.attrs.pop("_srcs", None)
            if srcs is not None:
                op.operands = [s.results[0] for s in srcs]
                del op.attrs["parents"]
                if op.attr_locs:
                    # keep operand locations under their new meaning: operand i
                    pass
        body.set_ops(order)

    def _toposort(self, ops, diag):
        index = {id(op): i for i, op in enumerate(ops)}
        indeg = [0] * len(ops)
        users: list[list[int]] = [[] for _ in ops]
        for i, op in enumerate(ops):
            for s in op.attrs.get("_srcs", ()):
                j = index[id(s)]
                users[j].append(i)
                indeg[i] += 1
        ready = [i for i in range(len(ops)) if indeg[i] == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            i = heapq.heappop(ready)
            order.append(ops[i])
            for u in users[i]:
                indeg[u] -= 1
                if indeg[u] == 0:
                    heapq.heappush(ready, u)
        if len(order) == len(ops):
            return order
        cycle = self._find_cycle(ops, indeg, index)
        names = [ops[i].attrs.get("name", "?") for i in cycle]
        first = ops[cycle[0]]
        d = diag.error("cycle in a feed-forward network: " + " -> ".join(names + [names[0]]), first.loc,
                       width=len(names[0]))
        for i in cycle[1:]:
            d.note(f"'{ops[i].attrs.get('name')}' is defined here", ops[i].loc)
        d.note("only energy models (RBM configs) may contain cycles")
        return None

    @staticmethod
    def _find_cycle(ops, indeg, index):
        # Walk parents among the unsorted ops until a node repeats.
        start = next(i for i in range(len(ops)) if indeg[i] > 0)
        seen = {}
        path = []
        i = start
        while i not in seen:
            seen[i] = len(path)
            path.append(i)
            i = next(index[id(s)] for s in ops[i].attrs["_srcs"] if indeg[index[id(s)]] > 0)
        cyc = path[seen[i]:]
        cyc.reverse()  # producer -> consumer order
        k = cyc.index(min(cyc))  # start at the layer written first
        return cyc[k:] + cyc[:k]
