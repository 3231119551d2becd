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
            gone: dict = {}
            self._filter(net.regions[0].block, ctx.phase, dropped, net.attrs["sym_name"], gone)
            if gone:  # IR with resolved operands: a kept layer may read one left out (names are resolve-names')
                for op in net.walk():
                    for v in op.operands:
                        src = gone.get(id(v.owner))
                        if src is not None:
                            ctx.diag.error(f"'{op.attrs.get('name', op.name)}' reads '{src.attrs.get('name')}', "
                                           f"which is not in phase {ctx.phase} (its include/exclude)", op.loc).note(
                                "left out here", src.loc)
                            break

    def _filter(self, block, phase, dropped, net, gone):
        keep = []
        for op in block.ops:
            inc, exc = op.attrs.pop("include", None), op.attrs.pop("exclude", None)
            if (inc is not None and phase not in inc) or (exc is not None and phase in exc):
                name = op.attrs.get("name")
                if name is not None:
                    dropped.setdefault((net, name), []).append((inc, exc, op.loc))
                for o in op.walk():
                    gone[id(o)] = o
                continue
            for r in op.regions:
                self._filter(r.block, phase, dropped, net, gone)
            keep.append(op)
        block.set_ops(keep)
