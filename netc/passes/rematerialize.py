"""rematerialize: recompute cheap forward ops in the backward pass to fit a memory budget.

A training program keeps every forward result a backward op reads alive from the forward pass to
that reader: at the turn from forward to backward nearly every activation is live at once, and
that peak is the arena. Under `budget` bytes (ctx.options["rematerialize"] = {"budget": BYTES};
`netc explain --train --memory --memory-budget BYTES`) this pass trades FLOPs for bytes: it clones
a forward op right before its first backward reader and lets the backward readers read the clone,
so the original result dies with its last forward reader.

What may be recomputed (AOTAutograd's min-cut partitioner's rule of thumb): cheap ops only --
pointwise ops (OpDef.elementwise: activations, batch norm with its statistics, dropout given its
mask, elementwise sums), pooling and upsampling, normalization (LRN, softmax) and views; never a
convolution, a matrix product, a recurrent layer, a loss, nor anything random (a dropout mask is
drawn once and kept: recomputing it from the same seed would do, but is not worth the risk) or
training-only (statistics, gradients). A candidate is a forward fusion group (one op, or a
pointwise chain the fuse pass grouped) whose every member is cheap, with a single result that a
forward op and a backward op read and that is not a network result. Its operands must be alive at
the clone: an operand already dead by then is recomputed too when its producer is cheap (the cheap
chain, a few ops deep), else kept alive longer -- which the measurement below charges.

The search is greedy and measured: candidates are ranked by the bytes they should free at the
plan's peak (their result is live across it, between the last forward and the first backward
reader) per FLOP recomputed; the best few are each applied, the program re-planned
(memory/plan.py, as the plan-memory pass will plan it, without the exact search), and undone; the
one that saves the most bytes per FLOP is kept. This repeats until the arena fits the budget or no
cheap candidate shrinks it any more -- then a warning says the smallest arena reached.

Clones are ordinary ops of the program: named '<layer>.recompute', marked `recompute_of = <layer>`
and `grad_of` = the backward reader's `grad_of` (so every executor, the explain report and the
memory plan count them as backward work: they run in the backward pass, and torch.autograd, the
gradient oracle, differentiates the forward ops without them); a cloned fusion group gets a new
group of its own. The network gets the attribute `netc.rematerialize` = {budget, arena_before,
arena_after (bytes: constant + batch arenas at the compiled batch, as plan-memory plans them),
met, extra_flops, recomputed (the original layers), ops (clones)}, which the memory plan reports.
It runs after `fuse` (a prerequisite), before `plan-memory`; without a budget it does nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..diagnostics import NetcError
from ..ir.core import Operation
from ..memory.plan import plan_memory
from ..memory.model import BATCH, PlanError, align_up
from ..ops import layer_cost, lookup
from .registry import Pass, register_pass

TRIALS_PER_ROUND = 4      # candidates measured (re-planned) per round before the best is kept
MAX_TRIALS = 12           # per round, when none of the first ones shrinks the arena
MAX_CHAIN = 4             # ops recomputed for one candidate (itself and the cheap chain it needs)
MAX_ROUNDS = 200


def recomputable(op: Operation) -> bool:
    """A cheap forward op, deterministic, with one result."""
    d = lookup(op.name)
    if d is None or is_backward(op) or d.training_only or d.is_loss or len(op.results) != 1:
        return False
    return d.elementwise or d.view or d.cheap_to_recompute


def is_backward(op: Operation) -> bool:
    """Gradient ops, earlier clones and updates: everything after the forward pass."""
    d = lookup(op.name)
    return "grad_of" in op.attrs or (d is not None and d.side_effects)


def arena_total(plan) -> int:
    """Bytes of every arena at the compiled batch (what the budget bounds)."""
    return sum(plan.arena_bytes())


@dataclass
class Candidate:
    layer: str            # the forward layer whose result the backward readers will read recomputed
    value: object         # that result (a Value)
    chain: list           # ops to clone, in IR order (the unit's members and the cheap chain)
    readers: list         # the backward ops reading `value`
    at: Operation         # the first of them in IR order: the clones go right before it
    flops: float
    estimate: float       # bytes it should free at the peak
    score: float = 0.0
    clones: list = field(default_factory=list)


@register_pass
class Rematerialize(Pass):
    name = "rematerialize"
    title = "Rematerialize"
    requires = ("fuse",)
    summary = "recompute cheap forward ops (pointwise, pooling, normalization) in the backward pass to fit a budget"

    def run(self, module, ctx):
        opts = ctx.options.get("rematerialize") or {}
        budget = opts.get("budget")
        if budget is None:
            return
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
            raise NetcError(f"the memory budget must be a number of bytes (a non-negative integer), got {budget!r}")
        plan_opts = dict(ctx.options.get("plan_memory") or {})
        nets = [n for n in module.networks() if n.attrs.get("gradients") is not None]
        if not nets:
            ctx.diag.warning("--memory-budget: nothing to recompute: recomputation applies to a training program "
                             "(add --train)", module.loc, once_key="rematerialize-no-training")
            return
        for net in nets:
            try:
                report = rematerialize_network(module, net, budget, plan_opts)
            except PlanError as e:
                raise NetcError(f"cannot plan the memory of network '{net.attrs.get('sym_name')}': {e}", e.loc)
            net.attrs["netc.rematerialize"] = report
            if not report["met"]:
                ctx.diag.warning(
                    f"network '{net.attrs.get('sym_name')}' does not fit the memory budget of {budget:,} bytes: "
                    f"recomputing {len(report['recomputed'])} cheap forward op(s) (+{report['extra_flops']:,} FLOPs) "
                    f"brings its arena from {report['arena_before']:,} to {report['arena_after']:,} bytes, the "
                    f"smallest this pass reaches (convolutions and matrix products are never recomputed)",
                    net.loc, width=len(net.attrs.get("sym_name") or "x"))


def rematerialize_network(module, net: Operation, budget: int, plan_opts: dict) -> dict:
    """Recompute greedily until the plan fits `budget` bytes or nothing cheap helps; the report."""
    before = arena_total(plan_memory(module, net, **plan_opts))
    search = {**plan_opts, "exact": False}
    plan = plan_memory(module, net, **search)
    current = arena_total(plan)
    recomputed, clones, flops = [], 0, 0
    for _ in range(MAX_ROUNDS):
        if min(current, before) <= budget:
            break
        best = None
        for k, c in enumerate(_candidates(net, plan)):
            if k >= MAX_TRIALS or (best is not None and k >= TRIALS_PER_ROUND):
                break
            undo = _apply(net, c)
            p = plan_memory(module, net, **search)
            _undo(net, undo)
            saved = current - arena_total(p)
            if saved > 0:
                c.score = saved / max(c.flops, 1)
                if best is None or c.score > best[0].score:
                    best = (c, p)
        if best is None:
            break
        c, plan = best
        _apply(net, c)
        current = arena_total(plan)
        recomputed.append(c.layer)
        clones += len(c.chain)
        flops += c.flops
    after = arena_total(plan_memory(module, net, **plan_opts)) if recomputed else before
    return {"budget": int(budget), "arena_before": int(before), "arena_after": int(after),
            "met": after <= budget, "extra_flops": int(flops), "recomputed": recomputed, "ops": clones}


# ------------------------------------------------------------------------------------------------
# candidates

def _name(op) -> str:
    return op.attrs.get("name") or op.name


def _candidates(net: Operation, plan) -> list:
    """Recomputation candidates of the network under `plan`, best estimate per FLOP first."""
    body = net.regions[0].ops
    users: dict = {}
    for op in body:
        for v in op.operands:
            users.setdefault(id(v), []).append(op)
    outputs = {id(v) for op in body if op.name == "netc.output" for v in op.operands}
    groups: dict = {}
    for op in body:
        g = op.attrs.get("fusion_group")
        if g is not None:
            groups.setdefault(g, []).append(op)
    step = {}
    for st in plan.steps:
        for layer in st.layers:
            step[layer] = st.index
    tensors = {t.name: t for t in plan.tensors}
    # the peak of the batch arena: the steps where its live bytes are largest
    delta = [0] * (plan.end + 2)
    for b in plan.buffers:
        if b.cls == BATCH:
            delta[b.start] += align_up(b.size, plan.alignment)
            delta[b.end + 1] -= align_up(b.size, plan.alignment)
    live, cur = [], 0
    for d in delta:
        cur += d
        live.append(cur)
    top = max(live) if live else 0
    peaks = [s for s, x in enumerate(live) if x == top and top > 0]
    if not peaks:
        return []

    def unit(op):
        """The members of op's fusion group when op's result is the group's (its last op), else None."""
        g = op.attrs.get("fusion_group")
        mem = groups.get(g, [op]) if g is not None else [op]
        return mem if mem[-1] is op else None

    pos = {id(op): i for i, op in enumerate(body)}
    out = []
    for op in body:
        if not recomputable(op) or lookup(op.name).view or id(op.results[0]) in outputs:
            continue
        mem = unit(op)
        if mem is None or not all(recomputable(m) for m in mem):
            continue
        v = op.results[0]
        readers = users.get(id(v), [])
        bwd = [r for r in readers if is_backward(r)]
        fwd = [r for r in readers if not is_backward(r)]
        t = tensors.get(_name(op))
        if not bwd or not fwd or t is None or t.fused or any(_name(r) not in step for r in readers):
            continue
        last_fwd = max(step[_name(r)] for r in fwd)
        first_bwd = min(step[_name(r)] for r in bwd)
        covered = sum(1 for s in peaks if last_fwd < s < first_bwd)
        if not covered:
            continue
        chain = _chain(mem, first_bwd, tensors, unit)
        if chain is None:
            continue
        flops = sum(layer_cost(m)[0].flops_fwd for m in chain)
        nbytes = t.size * (plan.batch if t.cls == BATCH else 1)
        est = nbytes * covered / len(peaks)
        at = min(bwd, key=lambda r: pos[id(r)])
        out.append(Candidate(_name(op), v, chain, bwd, at, flops, est))
    out.sort(key=lambda c: (-c.estimate / max(c.flops, 1), -c.estimate, c.layer))
    return out


def _chain(mem: list, first_bwd: int, tensors: dict, unit) -> list | None:
    """The ops to clone: the unit's members, and before them the cheap units producing operands
    that are dead by `first_bwd` (alive, or expensive, operands are read where they are)."""
    chain = list(mem)
    todo = list(mem)
    while todo:
        op = todo.pop()
        inside = {id(m) for m in chain}
        for v in op.operands:
            p = v.owner
            if id(p) in inside or p.name == "netc.input":
                continue
            t = tensors.get(_name(p) if len(p.results) == 1 else f"{_name(p)}#{v.index}")
            if t is None or t.fused or t.last_use >= first_bwd:
                continue              # alive there anyway (or a fused intermediate of the group)
            pm = unit(p) if recomputable(p) else None
            if pm is None or not all(recomputable(m) for m in pm) or len(chain) + len(pm) > MAX_CHAIN:
                continue              # kept alive until the clone runs instead
            chain = pm + chain
            todo.extend(pm)
    order = {id(op): i for i, op in enumerate(mem[0].parent.ops)} if mem[0].parent is not None else {}
    return sorted(chain, key=lambda op: order.get(id(op), 0))


# ------------------------------------------------------------------------------------------------
# applying and undoing

def _apply(net: Operation, c: Candidate):
    body = list(net.regions[0].ops)
    names = {op.attrs.get("name") for op in body}
    group_names = {op.attrs.get("fusion_group") for op in body}

    def unique(n, taken):
        m, i = n, 1
        while m in taken:
            m = f"{n}_{i}"
            i += 1
        taken.add(m)
        return m

    new_value: dict = {}
    new_group: dict = {}
    clone_name: dict = {}
    clones = []
    grad_of = c.at.attrs.get("grad_of") or _name(c.at)
    for op in c.chain:
        layer = _name(op)
        attrs = dict(op.attrs)
        if isinstance(attrs.get("params"), dict):
            attrs["params"] = dict(attrs["params"])
        attrs["name"] = clone_name[layer] = unique(f"{layer}.recompute", names)
        attrs["recompute_of"] = op.attrs.get("recompute_of", layer)
        attrs["grad_of"] = grad_of
        g = op.attrs.get("fusion_group")
        if g is not None:
            if g not in new_group:
                new_group[g] = unique(f"{g}.recompute", group_names)
            attrs["fusion_group"] = new_group[g]
        clone = Operation(op.name, [new_value.get(id(v), v) for v in op.operands],
                          result_types=[r.type for r in op.results], attrs=attrs, loc=op.loc)
        for r, nr in zip(op.results, clone.results):
            new_value[id(r)] = nr
        clones.append(clone)
    for clone in clones:
        a = clone.attrs.get("fusion_anchor")
        if a is not None:
            clone.attrs["fusion_anchor"] = clone_name.get(a, a)
    i = body.index(c.at)
    net.regions[0].block.set_ops(body[:i] + clones + body[i:])
    rewired = []
    nv = new_value[id(c.value)]
    for r in c.readers:
        for k, v in enumerate(r.operands):
            if v is c.value:
                r.operands[k] = nv
                rewired.append((r, k))
    c.clones = clones
    return body, rewired, c.value


def _undo(net: Operation, undo) -> None:
    body, rewired, value = undo
    net.regions[0].block.set_ops(body)
    for r, k in rewired:
        r.operands[k] = value
