"""flatten-blocks: Paleo's Block (shared/spec/paleo-format.md §4.4), nestable in .nd.

`block B(parents) -> endpoint { L = T(q) }` becomes layers `B/L` whose parents `q` name siblings
(`B/q`); sublayers with no parents inherit the block's parents. After flattening, a reference to
`B` itself means its endpoint `B/endpoint`, wherever the block appears in the file.
"""
from __future__ import annotations

from ..diagnostics import did_you_mean
from ..ir.core import is_layer
from .registry import Pass, register_pass
from .util import rewrite_parents


@register_pass
class FlattenBlocks(Pass):
    name = "flatten-blocks"
    title = "FlattenBlocks"
    requires = ("expand-model-parallel",)
    summary = "inline blocks as Block/name layers; resolve inherited parents and endpoints"

    def needed(self, module):
        return any(op.name == "netc.block" for op in module.walk())

    def run(self, module, ctx):
        for net in module.networks():
            self._network(net, ctx.diag)

    def _network(self, net, diag):
        body = net.regions[0].block
        endpoint_of: dict[str, str] = {}
        blocks: dict[str, object] = {}
        out = []
        for op in body.ops:
            if op.name == "netc.block":
                out.extend(self._flatten(op, op.attrs["name"], op.attrs.get("parents", []),
                                         [op.attr_loc(f"parent{i}") for i in range(len(op.attrs.get("parents", [])))],
                                         endpoint_of, blocks, diag))
            else:
                out.append(op)
        names = {o.attrs.get("name") for o in out}
        for b, blk in blocks.items():
            if b in names:
                layer = next(o for o in out if o.attrs.get("name") == b)
                diag.error(f"'{b}' names both a block and a layer", layer.loc,
                           width=len(b.rsplit("/", 1)[-1])).note("the block is declared here", blk.loc)

        def shortcut(p, loc):
            if p in endpoint_of:
                return [endpoint_of[p]]
            if p in blocks and p not in names:
                diag.error(f"block '{p}' is used as a parent but declares no endpoint", loc, width=len(p)).note(
                    f"name one of its layers ('{p}/...') or declare `block {p}(...) -> layer {{...}}`",
                    blocks[p].loc)
                return None
            return [p]

        for op in out:
            rewrite_parents(op, shortcut)
        body.set_ops(out)

    def _flatten(self, block, full, parents, parent_locs, endpoint_of, blocks, diag):
        if full in blocks:
            diag.error(f"duplicate block name '{full}'", block.loc, width=len(block.attrs["name"])).note(
                "previous definition is here", blocks[full].loc)
        else:
            blocks[full] = block
        subs = block.regions[0].ops
        siblings = {s.attrs.get("name") for s in subs}
        out = []
        for sub in subs:
            if sub.name == "netc.block":
                sp = sub.attrs.get("parents") or []
                if sp:
                    self._siblings(sub, full, siblings, diag)
                    locs = [sub.attr_loc(f"parent{i}") for i in range(len(sp))]
                    sp = [f"{full}/{q}" for q in sp]
                else:
                    sp, locs = parents, parent_locs
                out.extend(self._flatten(sub, f"{full}/{sub.attrs['name']}", sp, locs, endpoint_of, blocks, diag))
                continue
            if not is_layer(sub) or sub.name == "netc.input":
                what = {"netc.input": "inputs", "netc.output": "output statements",
                        "netc.layout": "layout sections"}.get(sub.name, "this statement")
                diag.error(f"{what} cannot appear inside a block; declare it at network level", sub.loc)
                continue
            sub.attrs["name"] = f"{full}/{sub.attrs['name']}"
            if sub.attrs.get("parents"):
                self._siblings(sub, full, siblings, diag)
                sub.attrs["parents"] = [f"{full}/{q}" for q in sub.attrs["parents"]]
            else:
                sub.attrs["parents"] = list(parents)
                for i, l in enumerate(parent_locs):
                    sub.attr_locs[f"parent{i}"] = l
            out.append(sub)
        ep = block.attrs.get("endpoint")
        if ep is not None:
            if ep not in siblings:
                d = diag.error(f"endpoint '{ep}' is not a layer of block '{full}'", block.attr_loc("endpoint"),
                               width=len(ep))
                layers = [n[len(full) + 1:] if n.startswith(full + "/") else n  # sublayers are renamed by now
                          for n in (s.attrs.get("name") for s in subs) if n]
                hint = did_you_mean(ep, layers)
                d.note(f"did you mean '{hint}'?" if hint else
                       f"its layers are: {', '.join(layers)}" if layers else "the block has no layers")
            endpoint_of[full] = f"{full}/{ep}"
            # a nested block used as a sibling resolves to its endpoint
            sub_eps = {f"{full}/{s.attrs['name']}": None for s in subs if s.name == "netc.block"}
            if f"{full}/{ep}" in sub_eps and f"{full}/{ep}" in endpoint_of:
                endpoint_of[full] = endpoint_of[f"{full}/{ep}"]
        return out

    def _siblings(self, sub, full, siblings, diag):
        for i, q in enumerate(sub.attrs.get("parents", [])):
            if q not in siblings:
                loc = sub.attr_loc(f"parent{i}")
                d = diag.error(f"unknown layer '{q}' in block '{full}'", loc, width=len(q))
                hint = did_you_mean(q, [s for s in siblings if s])
                d.note(f"did you mean '{hint}'?" if hint else
                       f"parents inside a block name its own layers; inputs from outside come through the "
                       f"block's parents: block {full.rsplit('/', 1)[-1]}(...)")
