"""plan-memory: the static memory plan of every network (netc/memory/plan.py), verified.

Not in the default pipeline: `netc opt -p plan-memory`, `netc explain --memory` and `netc compile`
ask for it. It runs after `fuse` (a prerequisite): codegen runs each fusion group as one kernel,
so the plan makes each group one step and gives its intermediates no memory (memory/plan.py);
option fusion="none" plans every op as its own step instead (Brainstorm layouts, which have one
array per layer output, ask for that). Where the plan goes:

* ctx.notes["memory_plan"][<network>] holds the MemoryPlan object (schedule, buffers, offsets,
  aliases), for `netc explain --memory` and the code generator in the same run;
* the network op gets a `netc.memory_plan` attribute with the plan's summary as plain data
  (arena bytes per class, lower bounds, ratios, strategy, schedule), so IR dumps and golden tests
  show the outcome. The full plan is not an IR attribute: it is a deterministic function of the
  IR (plan_memory(module, network, **options)), cheap to recompute, and printing thousands of
  offsets into the IR would bury it.

Options come from ctx.options["plan_memory"] (a dict of plan_memory keyword arguments: mode,
alignment, reuse, inplace, concat, schedule, strategies, fusion). The mode follows the program:
"training" for a training program (the backward pass's network, with its `gradients` attribute:
the whole step -- forward, backward, updates -- is planned, gradients reuse bytes once their
update ran, dropout computes), "inference" otherwise; an explicit mode overrides it. After the
rematerialize pass (`--memory-budget`), the plan also reports what it recomputed.
"""
from __future__ import annotations

from ..diagnostics import NetcError
from ..memory.plan import plan_memory
from ..memory.model import PlanError
from ..memory.verify import verify_plan
from .registry import Pass, register_pass


@register_pass
class PlanMemory(Pass):
    name = "plan-memory"
    title = "PlanMemory"
    requires = ("materialize-params", "dce", "fuse")
    summary = "schedule the ops and assign every tensor an offset in a static arena"

    def needed(self, module):
        return True

    def run(self, module, ctx):
        if ctx.diag.has_errors():
            # errors the frontend reported do not stop the pipeline (passes go on to report
            # independent problems), but the layers it marked invalid have no shapes to plan
            raise NetcError(list(ctx.diag.diagnostics))
        opts = dict(ctx.options.get("plan_memory") or {})
        plans = ctx.notes.setdefault("memory_plan", {})
        for net in module.networks():
            try:
                plan = plan_memory(module, net, **opts)
            except PlanError as e:
                err = NetcError(f"cannot plan the memory of network '{net.attrs.get('sym_name')}': {e}", e.loc)
                for msg, loc in e.notes:
                    err.note(msg, loc)
                raise err
            except TypeError as e:
                raise NetcError(f"cannot plan the memory of network '{net.attrs.get('sym_name')}': {e}")
            problems = verify_plan(plan, module, net)
            if problems:
                raise AssertionError("internal error: the memory plan failed verification: " + "; ".join(problems[:5]))
            plans[plan.network] = plan
            net.attrs["netc.memory_plan"] = plan.summary()
