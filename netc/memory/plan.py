"""The static memory planner: one network -> a schedule and a byte offset for every tensor.

Vocabulary (Brainstorm's, shared/spec/layout-format.md §1, §7):

* A *tensor* is an SSA value of the network (a layer's output, a network input) or a parameter.
* A *buffer* is one allocation in an arena. Several tensors may live in one buffer when they
  alias: a Reshape output is a *view* of its input, a Dropout output at inference is its input
  (*identity*), an elementwise op may write its output over an input that dies there (*inplace*),
  and the inputs of a Concatenate may be *concat* slices of its output (producers write straight
  into their slice: Brainstorm's hubs, zero-copy). Aliases form a forest; a buffer is one tree and
  its root tensor is the largest (every alias lies inside it).
* Every buffer has a *class*: constant (0: parameters; later gradients and optimizer state, and
  activations without a batch axis such as a scalar loss), batch-sized (1: activations, planned
  per sample) or time-sized (2: reserved for recurrent nets; nothing produces them yet). One arena
  per class; the class numbers are Brainstorm's buffer types.
* Steps: 0 = network inputs provided (and parameters set); the i-th op of the schedule runs at
  step i (1-based); `end` = len(schedule) + 1 = results read by the user. A tensor lives from the
  step that writes it to the last step that reads it (network outputs until `end`, parameters
  from 0 to `end`); a buffer lives over the union of its tensors' lifetimes.

Per-sample planning of the batch-sized class (how one plan serves every batch B <= the compiled
batch N): each batch-sized buffer gets a per-sample size `size` (bytes of one sample) and a
per-sample offset `offset`. At batch B the buffer occupies bytes [offset*B, offset*B + size*B)
of the batch arena, sample b of it starting at offset*B + b*size; the arena is arena.size*B
bytes. A tensor inside a buffer sits at `tensor.offset` bytes into every sample block, with the
buffer's `size` as its batch stride and `strides` (elements, feature axes only; None = dense
row-major) for its feature axes. Scaling by B maps disjoint per-sample intervals to disjoint
intervals ([o1, o1+s1) and [o2, o2+s2) disjoint with o1+s1 <= o2 implies o1*B+s1*B <= o2*B), so a
reuse decision made per sample holds for every B.

Alignment (default 256 bytes): every buffer offset is a multiple of the alignment A, per sample
for the batch class, and every buffer is given align_up(size, A) bytes. Then offset*B is a
multiple of A for every integer B >= 1 -- B = 1 makes this also necessary, so "align the
per-sample offsets" is the only rule that works for every batch, and aligning after scaling is
never needed. (Sample blocks inside a buffer start at offset*B + b*size and are not aligned; nor
are concat slices inside a buffer: kernels get base pointers aligned to A, plus strides.)

The schedule: the original (source, topological) order, for a training program the same order
with every update moved up to right after its gradient (and its parameter's last reader:
"eager-updates"), and a greedy order that, among the ready ops, runs the one that frees the most
bytes net of what it allocates (ties: original order; a second variant breaks ties
last-ready-first, finishing a branch before starting another). Every candidate is planned in
full and the one with the smallest arena wins; the original order is kept unless another is
strictly better.

Offsets (Pisarchyk & Lee 2020, "Efficient Memory Management for Deep Neural Net Inference"):
greedy by size (largest buffer first, best-fit gap among the buffers it overlaps in time),
greedy by breadth (steps by decreasing live bytes, each step's buffers largest first) and
longest-lifetime-first; the smallest arena wins. The lower bound is the peak, over the steps,
of the aligned bytes of live buffers; plans report arena / lower bound. Where the winner is above
the bound and the arena is small (EXACT_MAX_BUFFERS), a branch and bound over canonical placements
(memory/exact.py, after MiniMalloc) seeded with it looks for a strictly smaller arena within a node
limit; each arena records whether it is proven optimal (it meets the bound, or the search completed).

Fusion (the `fuse` pass's groups, `fusion_group` attributes): codegen runs a group -- a conv or
inner product with its pointwise epilogue, or a pointwise chain -- as ONE kernel, so when the
module has been fused each group is ONE step. Operands any member reads from outside the group
are live until that step; the group's intermediates (results read only inside the group) never
reach memory: they are `fused` tensors with no buffer, alive only within the step; the group's
result is born at the step. In place is decided per step from the members' OpDef flags: the
result may be written over an operand only if every member reading that operand is
*output-aligned* -- elementwise, and feeding only output-aligned members -- so the operand is read
at exactly the index the kernel writes (a conv anchor reads windows of its input: never in place;
an epilogue's residual add or a pointwise chain reads element for element: may be). Schedules,
lifetimes and the lower bound all count these steps, so arena / bound compares like with like.
`fusion="none"` plans every op as its own step (Brainstorm layouts, comparisons).

Training (the backward and optimizer passes' program: a network with a `gradients` attribute,
planned in mode "training" automatically): the planner plans the whole step -- forward, backward,
update -- as one schedule, and the program's ops are just more steps.

* Saved activations: a forward result read by a backward op simply lives until that (last)
  reader; in-place needs no special rule (an input read later does not die there).
* Classes: the results of ops flagged `unbatched` (OpDef.unbatched: parameter gradients, batch
  statistics, global norms) are constant class whatever their operands and shapes -- a weight
  gradient whose first dimension happens to equal the batch is no batch-sized tensor. Other
  results are batch-sized when their first dimension is the batch and an operand is batch-sized
  (or every operand is a scalar: a dropout mask drawn from the scalar seed), or when they flatten
  the steps of a batch-sized [T, B, ...] into [T*B, ...] (planned as [T, B, ...], TensorPlan.flat),
  but for what a reduction over time gives (memory/graph.py per_sample_values). Optimizer state and
  running statistics (`netc.param` with `state`) are parameters to the planner: constant class,
  fixed bytes at the bottom of the constant arena, live the whole step.
* Gradients stay in the constant class but are planned like activations: each gradient (and
  every other constant-class temporary: losses, batch statistics, norms) is one reusable buffer
  that lives from the step that computes it to its last reader -- its update, after which its
  bytes are free. Per-sample planning does not apply (they have no batch axis): the constant
  arena is the fixed parameters and state, then these buffers packed by lifetime above them.
  Gradients are summed by explicit ops (the backward pass's `sum`), so no buffer accumulates
  and none needs zeroing (`zero_init` stays False).
* Updates: ops with `side_effects` (optimizer updates, running-statistics updates) have no
  results; their step writes nothing in the arenas' reusable part and records in `updates` the
  parameter/state tensors it overwrites in place. The IR order of the accesses to one symbol is
  the program's meaning, so every schedule keeps it: an update runs after every op the IR runs
  before it that reads its symbol (and a reader after it stays after it). The greedy schedule
  runs each update as soon as that allows -- right after the last reader of its parameter and
  its gradient -- which is what frees gradients early.
* Dropout is no identity in training: with its mask operand it computes x * mask (a kernel,
  possibly in place). In inference only a one-operand dropout is an identity.
"""
from __future__ import annotations

import time

from ..ir.core import Module, Operation
from .aliasing import AliasForest, alias_schedule_free
from .exact import DEFAULT_BUDGET, DEFAULT_NODE_LIMIT, exact_offsets
from .graph import PlanGraph
from .model import (BATCH, CONSTANT, DEFAULT_ALIGNMENT, TIME, Arena, Buffer, Member, MemoryPlan, PlanError, Step,
                    TensorPlan, align_up)
from .offsets import STRATEGIES, assign_offsets, live_peak
from .ordering import eager_updates, greedy_order

EXACT_MAX_BUFFERS = 64   # reusable buffers per arena up to which the exact search runs (memory/exact.py)
MODES = ("inference", "training")
FUSION = ("auto", "none")


def plan_memory(module: Module, network: Operation | str | None = None, *, mode: str | None = None,
                alignment: int = DEFAULT_ALIGNMENT, reuse: bool = True, inplace: bool = True,
                concat: str = "all", schedule: str | list = "auto", strategies=STRATEGIES,
                fusion: str = "auto", exact: bool = True, exact_budget: float = DEFAULT_BUDGET,
                exact_nodes: int = DEFAULT_NODE_LIMIT, time_sized: bool = False,
                overwrite: dict | None = None, external_inputs: bool = False) -> MemoryPlan:
    """Plan the memory of one network of a resolved, shape-inferred module.

    mode       "inference" (a one-operand Dropout is an identity) or "training" (it computes); None:
               "training" for a training program (a network with a `gradients` attribute, made by
               the backward pass), else "inference"
    alignment  byte alignment of every buffer offset (per sample for the batch class)
    reuse      False: Brainstorm's no-reuse layout (every buffer its own bytes, no in-place)
    inplace    let elementwise ops write their output over an input that dies there
    concat     "all": zero-copy for every concatenation axis but the batch (channel slices are
               strided); "contiguous": only slices dense within a sample (expressible in
               Brainstorm's layout format); "none": concatenation copies
    schedule   "auto" (best of the original, eager-updates and greedy orders), "original", "greedy",
               or a list of layer names
    strategies offset-assignment strategies to try (the smallest arena wins)
    exact      then, where the winner is above the lower bound and the arena has at most
               EXACT_MAX_BUFFERS reusable buffers, search for a smaller arena by branch and bound
               (memory/exact.py), at most `exact_nodes` search nodes and `exact_budget` seconds per
               arena; the node limit binds first on an ordinary machine, so plans are reproducible
    fusion     "auto": when the module has been fused (fusion_group attributes), every fusion
               group is one step and its intermediates take no memory; "none": every op is its
               own step, fused or not
    time_sized the sequences [T, B, ...] of time-major ops (an Lstm's) and what keeps their (T, B) are
               the time class, planned per time step and sample, the batch B (Brainstorm's buffer
               type 2; what a layout writes). The executors and codegen address the batch class only:
               they plan without it
    overwrite  {layer name: [operand index, ...]}: operands a target's kernel for that layer lets its
               result be written over although the op's definition reads them other than element for
               element (the CPU target's max-pooling gradient routes by the indices its forward kept and
               reads its input's shape only); recorded in the plan's options, which the verifier reads
    external_inputs  the network's inputs stay where the caller holds them: an input whose buffer holds
               it alone (no view, identity or concatenation joins it) and that is no network result
               gets an `external` buffer outside the arenas, and no step writes over it (in place)
    """
    t0 = time.perf_counter()
    if mode is not None and mode not in MODES:
        raise PlanError(f"unknown planning mode '{mode}' (modes: {', '.join(MODES)})")
    if concat not in ("all", "contiguous", "none"):
        raise PlanError(f"unknown concat policy '{concat}' (all, contiguous, none)")
    if alignment < 1:
        raise PlanError("alignment must be positive")
    if fusion not in FUSION:
        raise PlanError(f"unknown fusion policy '{fusion}' ({', '.join(FUSION)})")
    if isinstance(network, Operation):
        net = network
    else:
        try:
            net = module.network(network)
        except (KeyError, IndexError):
            raise PlanError(f"no network '{network}' in the module" if network else "the module has no network")
    if mode is None:
        mode = "training" if net.attrs.get("gradients") is not None else "inference"
    g = PlanGraph(module, net, mode, fusion, time_sized, overwrite)
    base = AliasForest(g)
    alias_schedule_free(g, base, concat)
    orders: dict[str, list] = {}
    if isinstance(schedule, list):
        pos = {op.attrs.get("name"): i for i, op in enumerate(g.ops)}
        try:
            idx = [pos[n] for n in schedule]
        except KeyError as e:
            raise PlanError(f"schedule names unknown layer {e}")
        if sorted(idx) != list(range(len(g.ops))):
            raise PlanError("the schedule must list every layer once")
        at = {i: k for k, i in enumerate(idx)}
        # a fusion group runs where the schedule lists the last of its layers
        orders["given"] = sorted(range(len(g.units)), key=lambda u: max(at[i] for i in g.units[u]))
        done = set()
        for u in orders["given"]:
            for x in g.reads[u]:
                if g.producer[x] >= 0 and g.producer[x] not in done:
                    op = next(g.ops[i] for i in g.units[u] if x in g.op_reads[i])
                    raise PlanError(f"the schedule runs '{op.attrs.get('name')}' before its operand "
                                    f"'{g.tensors[x].name}'")
            for v in g.after[u]:
                if v not in done:
                    raise PlanError(f"the schedule runs '{g.unit_name(u)}' before '{g.unit_name(v)}', which "
                                    f"the network runs first and which reads or writes a parameter it writes "
                                    f"or reads")
            done.add(u)
    else:
        if schedule not in ("auto", "original", "greedy"):
            raise PlanError(f"unknown schedule '{schedule}' (auto, original, greedy)")
        if schedule in ("auto", "original"):
            orders["original"] = list(range(len(g.units)))
        if schedule == "auto":
            o = eager_updates(g, list(range(len(g.units))))
            if o not in orders.values():
                orders["eager-updates"] = o
        if schedule in ("auto", "greedy"):
            for name, lifo in (("greedy", False), ("greedy-lifo", True)):
                o = greedy_order(g, base, lifo)
                if o not in orders.values():
                    orders[name] = o
    best, cands = None, {}
    opts = dict(mode=mode, alignment=alignment, reuse=reuse, inplace=inplace, concat=concat,
                strategies=list(strategies), fusion=fusion, exact=exact, exact_budget=exact_budget,
                exact_nodes=exact_nodes, **({"time_sized": True} if time_sized else {}),
                **({"external_inputs": True} if external_inputs else {}),
                **({"overwrite": {k: sorted(v) for k, v in overwrite.items()}} if overwrite else {}))
    for name, order in orders.items():
        p = _plan_order(g, base.copy(), order, name, opts)
        key = (p.arenas[BATCH].size * g.batch + p.arenas[CONSTANT].size
               + p.arenas[TIME].size * g.batch * (g.time + g.context))
        cands[name] = key
        if best is None or key < best[0]:
            best = (key, p)
    plan = best[1]
    plan.schedule_candidates = cands
    rec = net.attrs.get("netc.rematerialize")
    plan.recompute = dict(rec) if isinstance(rec, dict) else None
    plan.seconds = time.perf_counter() - t0
    return plan


def _plan_order(g: PlanGraph, f: AliasForest, order: list, name: str, opts: dict) -> MemoryPlan:
    tensors = [TensorPlan(**{k: getattr(t, k) for k in t.__dataclass_fields__}) for t in g.tensors]
    nops = len(order)
    end = nops + 1
    step_of = [0] * nops
    for s, i in enumerate(order):
        step_of[i] = s + 1
    for t in tensors:
        p = g.producer[t.id]
        t.producer = step_of[p] if p >= 0 else 0
        rs = g.readers[t.id]
        t.last_use = max((step_of[r] for r in rs), default=t.producer)
        if t.output or t.kind == "param":
            t.last_use = end
        t.fused = g.is_internal[t.id]      # lives inside its group's step only (last_use == producer)
    # in-place: an elementwise op writes its output over an operand whose whole tree dies there
    inplace_of: dict[int, int] = {}
    if opts["inplace"] and opts["reuse"]:
        n = len(tensors)
        tmax = [0] * n          # per tree (union-find representative): last step it is read
        pinned = [False] * n    # holds a network result or a parameter (or state)
        for r in range(n):
            if f.members[r]:
                tmax[r] = max(tensors[m].last_use for m in f.members[r])
                pinned[r] = any(tensors[m].output or tensors[m].kind == "param"
                                or (tensors[m].kind == "input" and opts.get("external_inputs"))
                                for m in f.members[r])
        for i in order:
            if len(g.writes[i]) != 1:
                continue
            out, s = g.writes[i][0], step_of[i]
            candidates, elsewhere = g.inplace_operands(i)
            for x in candidates:
                rx, ro = f.find(x), f.find(out)
                if rx == ro or tmax[rx] > s or pinned[rx] or any(f.find(y) == rx for y in elsewhere):
                    continue
                # the operand's tree moves to the output's place, or the output takes the operand's
                if f.try_attach(x, out, "inplace", op=i) or f.try_attach(out, x, "inplace", op=i):
                    nr = f.find(out)
                    tmax[nr] = max(tmax[rx], tmax[ro])
                    pinned[nr] = pinned[rx] or pinned[ro]
                    inplace_of[i] = x
                    break
    # buffers: one per tree
    buffers: list[Buffer] = []
    buf_of_rep: dict[int, int] = {}
    for t in tensors:
        if t.fused:
            continue
        r = f.find(t.id)
        if r not in buf_of_rep:
            root = tensors[f.troot[r]]
            ms = f.members[r]
            b = Buffer(len(buffers), root.cls, root.size, min(tensors[m].producer for m in ms),
                       max(tensors[m].last_use for m in ms), root.id, sorted(ms))
            # parameters and state never share bytes; gradients and other constant-class
            # temporaries are planned by lifetime like activations (see the module docstring); nor
            # do time-sized values with context rows (their last rows carry a recurrent layer's state
            # into its next call: shared/spec/layout-format.md 7.3)
            b.reusable = root.kind != "param" and not any(tensors[m].context for m in ms)
            b.external = bool(opts.get("external_inputs")) and root.kind == "input" and ms == [root.id] \
                and not root.output
            buf_of_rep[r] = b.id
            buffers.append(b)
    # placements (memoized top-down)
    place: dict[int, tuple] = {}
    for t in tensors:
        if t.fused:
            continue
        chain = [t.id]
        while chain[-1] not in place and f.parent[chain[-1]] >= 0:
            chain.append(f.parent[chain[-1]])
        if chain[-1] not in place:
            place[chain[-1]] = (chain[-1], 0, None)
        for u in reversed(chain[:-1]):
            place[u] = f._compose(place[f.parent[u]], f.parent[u], u, f.kind[u], f.slice[u])
    for t in tensors:
        if t.fused:
            continue
        root, off, strides = place[t.id]
        t.buffer = buf_of_rep[f.find(t.id)]
        t.offset, t.strides = off, strides
        t.alias, t.alias_of, t.slice = f.kind[t.id], f.parent[t.id], f.slice[t.id]
    # offsets per class
    A = opts["alignment"]
    arenas = []
    for cls in (CONSTANT, BATCH, TIME):
        bs = [b for b in buffers if b.cls == cls and not b.external]
        fixed = [b for b in bs if not b.reusable]
        o = 0
        for b in sorted(fixed, key=lambda b: (tensors[b.root].kind != "param", b.root)):
            b.offset = o
            o += align_up(b.size, A)
        rest = [b for b in bs if b.reusable]
        items = [(b.id, align_up(b.size, A), b.start, b.end) for b in rest]
        lb = live_peak(items, end, o)
        naive = o + sum(x[1] for x in items)
        strategies = opts["strategies"] if opts["reuse"] else ["sequential"]
        t0 = time.perf_counter()
        best = None
        cands = {}
        for strat in strategies:
            offs = assign_offsets(items, strat, o)
            size = max([o] + [offs[k] + items[k][1] for k in range(len(items))])
            cands[strat] = size
            if best is None or size < best[0]:
                best = (size, strat, offs)
        size, strat, offs = best if best else (o, "", [])
        proven = size == lb
        # the heuristics' best seeds the exact search, which keeps it unless strictly smaller
        if not proven and rest and opts["reuse"] and opts["exact"] and len(items) <= EXACT_MAX_BUFFERS:
            r = exact_offsets(items, o, size, offs, budget=opts["exact_budget"], node_limit=opts["exact_nodes"])
            cands["exact"] = r.size
            if r.improved:
                size, strat, offs = r.size, "exact", r.offsets
            proven = r.proven
        for k, b in enumerate(rest):
            b.offset = offs[k]
        arenas.append(Arena(cls, size, lb, o, naive, strat if rest else ("fixed" if fixed else ""), cands,
                            proven))
        arenas[-1].seconds = time.perf_counter() - t0
    steps = []
    for s, i in enumerate(order):
        mem = g.units[i]
        members = [Member(g.ops[k].attrs.get("name") or g.ops[k].name, g.ops[k].name, list(g.op_reads[k]),
                          list(g.op_writes[k])) for k in mem]
        st = Step(s + 1, g.unit_name(i), g.ops[mem[0]].name, list(g.reads[i]), list(g.writes[i]),
                  roles=list(g.roles[i]), members=members, fused=list(g.internal[i]), group=g.group_of[i],
                  updates=list(g.updates[i]))
        out = g.writes[i][0] if g.writes[i] else -1
        ops_in = g.reads[i][:g.n_operands[i]]
        if i in inplace_of:
            st.action = "inplace"
        elif out >= 0 and (g.is_view(i) or g.is_identity(i)) and ops_in and place[ops_in[0]] == place[out]:
            st.action = "alias"
        elif out >= 0 and g.is_concat(i):
            st.copies = [x for k, x in enumerate(ops_in)
                         if not (f.parent[x] == out and f.kind[x] == "concat" and x not in ops_in[:k])]
            st.action = "concat-copy" if st.copies else "alias"
        steps.append(st)
    return MemoryPlan(g.name, opts["mode"], g.batch, A, opts["reuse"], list(g.inputs), steps, end, tensors,
                      buffers, arenas, name, options=opts, fusion=g.fusion, time=g.time, context=g.context)
