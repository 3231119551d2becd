"""select-phase: keep the layers of one phase (train, val or test), SINGA's include/exclude."""
from __future__ import annotations

from .registry import Pass, register_pass


@register_pass
class SelectPhase(Pass):
    name = "select-phase"
    title = "SelectPhase"
    summary = "drop layers whose include/exclude rules leave them out of the chosen phase"

    def needed(self, module):
        return any("include" in op.attrs or "exclude" in op.attrs for op in module.walk())

    def run(self, module, ctx):
        dropped = ctx.notes.setdefault("dropped_by_phase", {})
        for net in module.networks():
            self._filter(net.regions[0].block, ctx.phase, dropped, net.attrs["sym_name"])

    def _filter(self, block, phase, dropped, net):
        keep = []
        for op in block.ops:
            inc, exc = op.attrs.pop("include", None), op.attrs.pop("exclude", None)
            if (inc is not None and phase not in inc) or (exc is not None and phase in exc):
                name = op.attrs.get("name")
                if name is not None:
                    dropped.setdefault((net, name), []).append((inc, exc, op.loc))
                continue
            for r in op.regions:
                self._filter(r.block, phase, dropped, net)
            keep.append(op)
        block.set_ops(keep)
