"""expand-model-parallel: Paleo's ModelParallel blocks (shared/spec/paleo-format.md §4).

`parallel B(parents) splits n { L = ... }` becomes n copies `B/L@s` of every sublayer. A
sublayer's parents name siblings: `X@self` (or just `X`) is the
same split of sibling X, `X@all` all splits in order, `X@i` one split. Sublayers with no parents
inherit the block's. Convolutions read `splits` and divide their output channels (floor); every
other op is replicated, as in Paleo. Outside the block, `B/X@all` and `B/X@i` name the splits.

Each copy keeps `split_index`: the Paleo side of the `partition` pass (netc/passes/partition/collectives.py)
places split i on worker i mod K (`--workers K`), the rest on worker 0 (Paleo's device ids), and
makes a concat of every split on each split an all-gather.
"""
from __future__ import annotations

from ..diagnostics import did_you_mean
from ..ir.core import is_layer
from ..ir.query import split_ref_problem
from .registry import Pass, register_pass
from .util import clone_layer, rewrite_parents


@register_pass
class ExpandModelParallel(Pass):
    name = "expand-model-parallel"
    title = "ExpandModelParallel"
    requires = ("select-phase",)
    summary = "expand parallel blocks into one layer per split and resolve @self/@all/@i"

    def needed(self, module):
        # `B/X@2` stays a parent name after expansion (it is the layer's name); only parallel
        # blocks and @self / @all references are left to expand
        return any(op.name == "netc.parallel" or any(p.endswith(("@self", "@all")) for p in op.attrs.get("parents", ()))
                   for op in module.walk())

    def run(self, module, ctx):
        for net in module.networks():
            self._network(net, ctx.diag)

    def _network(self, net, diag):
        body = net.regions[0].block
        splits_of: dict[str, int] = {}
        endpoint_of: dict[str, str] = {}
        for op in body.ops:
            if op.name == "netc.parallel":
                b = op.attrs["name"]
                for sub in op.regions[0].ops:
                    if "name" in sub.attrs:
                        splits_of[f"{b}/{sub.attrs['name']}"] = op.attrs["splits"]
                if "endpoint" in op.attrs:
                    endpoint_of[b] = f"{b}/{op.attrs['endpoint']}"

        def resolve(p, loc, s=None, inside=None):
            problem = split_ref_problem(p)
            if problem:  # the readers report these where they are written; IR built in Python may not
                diag.error(problem, loc, width=len(p))
                return None
            base, _, suffix = p.partition("@")
            if not suffix:
                if p in endpoint_of:
                    e = endpoint_of[p]
                    return [f"{e}@{i}" for i in range(splits_of.get(e, 1))]
                if p in splits_of:  # outside its block, a split layer is named with its splits
                    n = splits_of[p]
                    diag.error(f"'{p}' is a layer of a parallel block ({n} split{'s' if n != 1 else ''}); "
                               f"name which splits", loc, width=len(p)).note(
                        f"write '{p}@all' for all of them, or one of '{p}@0' to '{p}@{n - 1}'" if n > 1 else
                        f"write '{p}@0' (or '{p}@all')")
                    return None
                return [p]
            if suffix == "self":
                if s is None:
                    diag.error(f"'{p}': '@self' is only meaningful inside a parallel block", loc, width=len(p)).note(
                        f"write '{_short(base, inside)}' to use the layer itself")
                    return None
                if base not in splits_of:
                    diag.error(f"parent '{_short(base, inside)}' is not split", loc, width=len(p))
                    return None
                return [f"{base}@{s}"]
            if base not in splits_of:
                d = diag.error(f"'{_short(base, inside)}@{suffix}' names splits, but '{_short(base, inside)}' is not "
                               f"a layer of a parallel block", loc, width=len(p))
                cand = [k for k in splits_of if k.endswith("/" + base)]
                if cand:
                    d.note(f"did you mean '{cand[0]}@{suffix}'?")
                elif inside is None:
                    hint = did_you_mean(base, splits_of)
                    if hint:
                        d.note(f"did you mean '{hint}@{suffix}'?")
                return None
            n = splits_of[base]
            if suffix == "all":
                return [f"{base}@{i}" for i in range(n)]
            i = int(suffix)
            if not 0 <= i < n:
                diag.error(f"split index {i} is out of range: '{base}' has {n} split{'s' if n != 1 else ''}"
                           f" ({'@0' if n == 1 else f'@0 to @{n - 1}'})", loc, width=len(p))
                return None
            return [f"{base}@{i}"]

        new_ops = []
        for op in body.ops:
            if op.name != "netc.parallel":
                rewrite_parents(op, resolve)
                for inner in op.walk():
                    if inner is not op and inner.name == "netc.parallel":
                        diag.error("parallel blocks cannot be nested inside other blocks", inner.loc,
                                   width=len(inner.attrs["name"]))
                    elif inner is not op:
                        # sublayers of ordinary blocks: '@' references are meaningless there
                        for i, p in enumerate(inner.attrs.get("parents", ())):
                            if "@" in p:
                                resolve(f"{op.attrs['name']}/{p}", inner.attr_loc(f"parent{i}"), None,
                                        inside=op.attrs["name"])
                new_ops.append(op)
                continue
            b, n = op.attrs["name"], op.attrs["splits"]
            rewrite_parents(op, resolve)
            block_parents = op.attrs.get("parents", [])
            block_locs = [op.attr_loc(f"parent{i}") for i in range(len(block_parents))]
            subs = op.regions[0].ops
            for sub in subs:
                if not is_layer(sub) or sub.name == "netc.input":
                    what = {"netc.input": "inputs", "netc.output": "output statements",
                            "netc.layout": "layout sections"}.get(sub.name, "blocks")
                    diag.error(f"{what} cannot appear inside a parallel block", sub.loc)
            subs = [s for s in subs if is_layer(s) and s.name != "netc.input"]
            if "endpoint" in op.attrs and op.attrs["endpoint"] not in {s.attrs["name"] for s in subs}:
                d = diag.error(f"endpoint '{op.attrs['endpoint']}' is not a layer of parallel block '{b}'",
                               op.attr_loc("endpoint"), width=len(op.attrs["endpoint"]))
                sub_names = [s.attrs["name"] for s in subs]
                hint = did_you_mean(op.attrs["endpoint"], sub_names)
                d.note(f"did you mean '{hint}'?" if hint else
                       f"its layers are: {', '.join(sub_names)}" if sub_names else "the block has no layers")
            siblings = {s.attrs["name"] for s in subs}
            for s in range(n):
                for sub in subs:
                    c = clone_layer(sub)
                    c.attrs["name"] = f"{b}/{sub.attrs['name']}@{s}"
                    c.attrs["splits"] = n
                    c.attrs["split_index"] = s
                    if not sub.attrs.get("parents"):
                        c.attrs["parents"] = list(block_parents)
                        for i, l in enumerate(block_locs):
                            c.attr_locs[f"parent{i}"] = l
                    else:
                        def in_block(p, loc, s=s):
                            base = p.partition("@")[0]
                            if base not in siblings:
                                if s == 0:
                                    d = diag.error(f"unknown layer '{base}' in parallel block '{b}'", loc,
                                                   width=len(p))
                                    hint = did_you_mean(base, siblings)
                                    d.note(f"did you mean '{hint}'?" if hint else
                                           f"parents inside a parallel block name its own layers; inputs from "
                                           f"outside come through the block's parents: parallel {b}(...)")
                                return None
                            # a bare sibling name means the same split (X@self)
                            return resolve(f"{b}/{p if '@' in p else p + '@self'}", loc, s, inside=b)
                        rewrite_parents(c, in_block)
                    new_ops.append(c)
        body.set_ops(new_ops)


def _short(name, inside):
    if inside and name.startswith(inside + "/"):
        return name[len(inside) + 1:]
    return name
