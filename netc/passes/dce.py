"""dce: dead-layer elimination. With an `output` statement, layers that no declared output
depends on are removed; without one, every layer nobody consumes is an output and nothing is
dead. Inputs are kept (they are the network's interface)."""
from __future__ import annotations

from .manager import Pass, register_pass


@register_pass
class DeadLayerElimination(Pass):
    name = "dce"
    title = "DeadLayerElimination"
    requires = ("shape-inference",)
    summary = "remove layers no declared output depends on"

    def needed(self, module):
        return True

    def run(self, module, ctx):
        for net in module.networks():
            ops = net.regions[0].ops
            outs = [op for op in ops if op.name == "netc.output"]
            if not outs:
                continue
            live = set()
            stack = [v.owner for o in outs for v in o.operands]
            while stack:
                op = stack.pop()
                if id(op) in live:
                    continue
                live.add(id(op))
                stack.extend(v.owner for v in op.operands)
            keep = [op for op in ops if id(op) in live or op.name in ("netc.output", "netc.input", "netc.layout")]
            removed = len(ops) - len(keep)
            if removed:
                ctx.notes.setdefault("dce_removed", {})[net.attrs["sym_name"]] = [
                    op.attrs.get("name") for op in ops if op not in keep]
            net.regions[0].block.set_ops(keep)
