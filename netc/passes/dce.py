"""dce: dead-layer elimination. With an `output` statement, layers that no declared output
(nor an op with side effects: an optimizer's update) depends on are removed; without one, every layer nobody consumes is an output and nothing is
dead. Inputs are kept (they are the network's interface). Parameters that only removed layers
used are removed with them."""
from __future__ import annotations

from ..ir.core import SymbolRef
from ..ops import lookup
from .registry import Pass, register_pass


@register_pass
class DeadLayerElimination(Pass):
    name = "dce"
    title = "DeadLayerElimination"
    requires = ("shape-inference",)
    summary = "remove layers no declared output depends on"

    def needed(self, module):
        return True

    def run(self, module, ctx):
        dead_params: set = set()
        for net in module.networks():
            ops = net.regions[0].ops
            outs = [op for op in ops if op.name == "netc.output"]
            if not outs:
                continue
            live = set()
            # the outputs and every op with side effects (an optimizer update writes a parameter)
            stack = [v.owner for o in outs for v in o.operands] + [
                op for op in ops if lookup(op.name) is not None and lookup(op.name).side_effects]
            while stack:
                op = stack.pop()
                if id(op) in live:
                    continue
                live.add(id(op))
                stack.extend(v.owner for v in op.operands)
            keep = [op for op in ops if id(op) in live or op.name in ("netc.output", "netc.input", "netc.layout")]
            kept = {id(op) for op in keep}
            removed = [op for op in ops if id(op) not in kept]
            if removed:
                ctx.notes.setdefault("dce_removed", {})[net.attrs["sym_name"]] = [
                    op.attrs.get("name") for op in removed]
                dead_params.update(_param_refs(removed))
            net.regions[0].block.set_ops(keep)
        if dead_params:
            self._drop_params(module, dead_params)

    @staticmethod
    def _drop_params(module, candidates):
        """Parameters only removed layers used go with them (shared or share_from-owned ones stay)."""
        params = {p.attrs.get("sym_name"): p for p in module.params()}
        used = _param_refs(op for net in module.networks() for op in net.regions[0].ops)
        stack = list(used)
        while stack:  # owners of kept parameters' storage are kept too
            p = params.get(stack.pop())
            owner = p.attrs.get("share_from") if p is not None else None
            if owner is not None and owner.name not in used:
                used.add(owner.name)
                stack.append(owner.name)
        drop = candidates - used
        if drop:
            module.regions[0].block.set_ops(
                [op for op in module.body if not (op.name == "netc.param" and op.attrs.get("sym_name") in drop)])


def _param_refs(ops) -> set:
    return {ref.name for op in ops for ref in (op.attrs.get("params") or {}).values() if isinstance(ref, SymbolRef)}
