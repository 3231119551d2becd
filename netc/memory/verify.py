"""The plan verifier: proves a MemoryPlan safe, recomputing what it relies on from the schedule.

It trusts neither the planner's lifetimes nor its buffer intervals. From the steps' reads and
writes it recomputes when each tensor is written and last read, then checks

* the schedule: every tensor is written once, and before every step that reads it (inputs and
  parameters at step 0); with the network given, the steps are exactly its ops, in an order that
  respects their operands (and, for a plan made with fusion, exactly its fusion groups);
* fused steps, member by member: a fused tensor is written by one member and read only by later
  members of the same step; it is marked fused, has no buffer and is nobody else's business; the
  step's reads and writes are exactly what its members read and write outside it;
* placements: a tensor that owns its buffer sits at offset 0, densely; an alias sits exactly where
  its relation says (identity/in-place: the parent's bytes; view: the parent's bytes, dense;
  concat: its slice of the parent); every tensor lies inside its buffer, every buffer inside its
  arena, and every buffer offset is aligned -- per sample for the batch class, which makes
  offset*B aligned for every batch B (checked for B = 1, 2, 3 and the compiled batch);
* no clobbering: two buffers of one class whose lifetimes intersect have disjoint bytes (per
  sample, and scaled for those batches); inside one buffer, two tensors whose bytes intersect
  and whose lifetimes intersect hold the same value (they are joined by view, identity, concat
  or share relations), or are the input and output of an in-place step and meet only there, the
  input being read at that step in exactly the output's place, and only by output-aligned members
  (OpDef.elementwise, feeding only such members: never a conv's window), or by a one-op step the
  plan's `overwrite` option names for that operand (a target's kernel that reads it otherwise or
  not at all: the CPU target's max-pooling gradient);
* every concatenation is complete: each operand is written into its slice by its producer, or
  copied by the concat step; a step marked "alias" really is a no-op;
* the lower bound (peak of live aligned bytes) is what the plan reports, and no arena is
  smaller than it;
* an external buffer (plan_memory's external_inputs: an input the caller holds) holds one input
  alone, which is no network result: no arena bytes, nothing else in it, nothing written over it;
* training programs: a step's in-place `updates` (optimizer and running-statistics updates)
  overwrite parameter or state tensors only, each symbol (a share_from alias counts as its owner)
  at most once, and after every other step that reads it -- a read after the update would see the
  next step's value; the classes hold up: a batch-sized tensor has the batch as its first
  dimension, and with the network given, results of `unbatched` ops are constant class and the
  updates are exactly what each side_effects op's `params` name.
"""
from __future__ import annotations

import numpy as np

from ..ir.core import STRUCTURAL_OPS, SymbolRef
from ..ops import lookup
from .graph import output_aligned_members
from .model import BATCH, CLASS_NAMES, CONSTANT, Member, MemoryPlan, align_up, is_dense, row_major


class PlanVerificationError(AssertionError):
    pass


def check_plan(plan: MemoryPlan, module=None, network=None):
    problems = verify_plan(plan, module, network)
    if problems:
        raise PlanVerificationError(f"memory plan of '{plan.network}' is unsafe:\n  " + "\n  ".join(problems[:20]))


def verify_plan(plan: MemoryPlan, module=None, network=None, batches=None) -> list[str]:
    """Every problem found (empty: the plan is safe)."""
    P: list[str] = []
    T = plan.tensors
    n = len(T)
    end = plan.end
    # -- the schedule, and lifetimes recomputed from it
    prod = [None] * n
    last = [-1] * n
    for t in T:
        if t.kind in ("input", "param"):
            prod[t.id] = 0
    fused_at: dict[int, int] = {}     # fused tensor -> its step
    for k, st in enumerate(plan.steps):
        s = k + 1
        if st.index != s:
            P.append(f"step {st.layer}: numbered {st.index}, expected {s}")
        for i in st.reads:
            if prod[i] is None or prod[i] >= s:
                P.append(f"step {s} ({st.layer}) reads '{T[i].name}' before it is written")
            elif i in fused_at:
                P.append(f"step {s} ({st.layer}) reads '{T[i].name}' from memory, but it is fused inside step "
                         f"{fused_at[i]}")
            last[i] = max(last[i], s)
        for i in st.writes:
            if prod[i] is not None:
                P.append(f"'{T[i].name}' is written twice (step {prod[i]} and step {s})")
            prod[i] = s
        # inside the step, member by member: fused tensors never leave it
        inner = set(st.fused)
        for i in st.fused:
            if i in fused_at or prod[i] is not None:
                P.append(f"fused '{T[i].name}' (step {s}) is also written elsewhere")
            fused_at[i] = s
            prod[i] = last[i] = s
        made, ext_reads, ext_writes = set(), [], []
        for mb in _members(st):
            for i in mb.reads:
                if i in inner:
                    if i not in made:
                        P.append(f"step {s}: '{mb.layer}' reads the fused '{T[i].name}' before a member computes it")
                else:
                    ext_reads.append(i)
            for i in mb.writes:
                if i in inner:
                    if i in made:
                        P.append(f"step {s}: fused '{T[i].name}' is written twice")
                    made.add(i)
                else:
                    ext_writes.append(i)
        if inner - made:
            P.append(f"step {s}: no member computes the fused "
                     f"{', '.join(repr(T[i].name) for i in sorted(inner - made))}")
        if set(ext_reads) != set(st.reads) or sorted(ext_writes) != sorted(st.writes):
            P.append(f"step {s} ({st.layer}): its reads/writes are not what its members read and write in memory")
    for i in fused_at:
        t = T[i]
        if not t.fused or t.buffer != -1 or t.output or t.kind != "activation":
            P.append(f"'{t.name}' is fused at step {fused_at[i]} but is not a fused intermediate without a "
                     f"buffer (fused={t.fused}, buffer {t.buffer}, output={t.output}, kind {t.kind})")
    for t in T:
        if t.fused and t.id not in fused_at:
            P.append(f"'{t.name}' is marked fused but no step computes it inside")
    for t in T:
        if prod[t.id] is None:
            P.append(f"'{t.name}' is never written")
            prod[t.id] = 0
        if t.output or t.kind == "param":
            last[t.id] = end
        elif last[t.id] < 0:
            last[t.id] = prod[t.id]
        if (t.producer, t.last_use) != (prod[t.id], last[t.id]):
            P.append(f"'{t.name}': plan says live {t.producer}-{t.last_use}, the schedule gives "
                     f"{prod[t.id]}-{last[t.id]}")
    if end != len(plan.steps) + 1:
        P.append(f"end step is {end}, expected {len(plan.steps) + 1}")
    P += _check_updates(plan)
    P += [p for p in (_leading_axes_problem(t, plan) for t in T) if p]
    if network is not None or module is not None:
        P += _check_against_ir(plan, module, network)

    # -- buffers: membership, lifetimes, alignment, bounds
    A = plan.alignment
    bl = {}
    for b in plan.buffers:
        ts = [T[i] for i in b.tensors]
        if any(t.buffer != b.id or t.fused for t in ts) or b.root not in b.tensors:
            P.append(f"buffer {b.id}: its tensor list disagrees with the tensors' buffers")
        lo = min((prod[t.id] for t in ts), default=0)
        hi = max((last[t.id] for t in ts), default=0)
        if not b.reusable:
            lo, hi = 0, end
        elif b.start > lo or b.end < hi:
            P.append(f"buffer {b.id} ({T[b.root].name}): planned live {b.start}-{b.end} but used {lo}-{hi}")
        bl[b.id] = (lo, hi)
        if any(t.cls != b.cls for t in ts):
            P.append(f"buffer {b.id}: holds tensors of another class")
        if b.external:      # the caller's tensor: an input alone in its buffer, no result, never written over
            if [T[i].kind for i in b.tensors] != ["input"] or T[b.root].output or \
                    not (plan.options or {}).get("external_inputs"):
                P.append(f"buffer {b.id} ({T[b.root].name}) is external but not an input alone in it")
            continue
        if b.offset < 0 or b.offset % A:
            P.append(f"buffer {b.id} ({T[b.root].name}): offset {b.offset} is not aligned to {A}")
        arena = plan.arenas[b.cls].size
        if b.offset + align_up(b.size, A) > arena:
            P.append(f"buffer {b.id} ({T[b.root].name}): [{b.offset}, {b.offset + b.size}) exceeds the "
                     f"{CLASS_NAMES[b.cls]} arena of {arena} bytes")
    Bs = sorted({1, 2, 3, max(plan.batch, 1)} if batches is None else set(batches))
    for b in plan.buffers:
        if b.cls != CONSTANT and not b.external:
            for B in Bs:
                if (b.offset * B) % A:
                    P.append(f"buffer {b.id}: offset {b.offset} * batch {B} is not aligned to {A}")
    for t in T:
        if t.id in fused_at:
            continue          # no bytes
        if not 0 <= t.buffer < len(plan.buffers):
            P.append(f"'{t.name}' has no buffer")
            return P
        b = plan.buffers[t.buffer]
        if t.numel:
            lo_b, hi_b = _hull(t)
            if lo_b < 0 or hi_b > b.size:
                P.append(f"'{t.name}' spans bytes [{lo_b}, {hi_b}) of a {b.size}-byte buffer")

    # -- buffers of one class whose lifetimes intersect have disjoint bytes (per sample, scaled)
    for cls in range(3):
        bs = [b for b in plan.buffers if b.cls == cls and not b.external]
        for a, c in _intersecting(bs, lambda b: bl[b.id]):
            if a.size and c.size and a.offset < c.offset + c.size and c.offset < a.offset + a.size:
                P.append(f"buffers {a.id} ({T[a.root].name}) and {c.id} ({T[c.root].name}) are live together "
                         f"(steps {bl[a.id][0]}-{bl[a.id][1]} and {bl[c.id][0]}-{bl[c.id][1]}) and share bytes "
                         f"[{max(a.offset, c.offset)}, {min(a.offset + a.size, c.offset + c.size)})")
            elif cls != CONSTANT and a.size and c.size:
                for B in Bs:
                    if a.offset * B < (c.offset + c.size) * B and c.offset * B < (a.offset + a.size) * B:
                        P.append(f"buffers {a.id} and {c.id} overlap at batch {B}")

    # -- placements follow the alias relations
    for t in T:
        if t.id in fused_at:
            if t.alias is not None:
                P.append(f"fused '{t.name}' aliases '{T[t.alias_of].name}'")
            continue
        b = plan.buffers[t.buffer]
        if t.alias is None:
            if b.root != t.id or t.offset != 0 or t.strides is not None or b.size != t.size:
                P.append(f"'{t.name}' owns no alias relation but is not the dense root of buffer {b.id}")
            continue
        if not 0 <= t.alias_of < n:
            P.append(f"'{t.name}' aliases an unknown tensor")
            continue
        p = T[t.alias_of]
        if p.buffer != t.buffer or p.id in fused_at:
            P.append(f"'{t.name}' ({t.alias} of '{p.name}') is in another buffer than it")
            continue
        want = _expected(t, p)
        if want is None or want != (t.offset, t.strides):
            P.append(f"'{t.name}' ({t.alias} of '{p.name}') is placed at {t.offset} {t.strides}, "
                     f"expected {want}")
    # value groups: tensors joined by relations that keep the value (everything but in-place)
    grp = list(range(n))

    def find(i):
        while grp[i] != i:
            grp[i] = grp[grp[i]]
            i = grp[i]
        return i

    for t in T:
        if t.alias and t.alias != "inplace" and 0 <= t.alias_of < n:
            grp[find(t.id)] = find(t.alias_of)
    inplace_steps = {k + 1: st for k, st in enumerate(plan.steps) if st.action == "inplace"}
    for st in inplace_steps.values():
        P += _inplace_problems(plan, st)
    # -- inside a buffer: intersecting bytes and lifetimes need the same value, or an in-place meeting
    members: dict[int, list] = {}
    for t in T:
        if t.id not in fused_at:
            members.setdefault(t.buffer, []).append(t)
    for ts in members.values():
        if len(ts) < 2:
            continue
        for u, v in _intersecting(ts, lambda t: (prod[t.id], last[t.id])):
            if find(u.id) == find(v.id) or not u.numel or not v.numel:
                continue
            old, new = (u, v) if prod[u.id] <= prod[v.id] else (v, u)
            st = inplace_steps.get(prod[new.id])
            if st is not None and last[old.id] == prod[new.id] and st.writes[0] == new.id:
                continue      # an in-place step: it reads old where it writes new (checked above)
            if _bytes_intersect(u, v):
                P.append(f"'{u.name}' (live {prod[u.id]}-{last[u.id]}) and '{v.name}' (live {prod[v.id]}-"
                         f"{last[v.id]}) share bytes of buffer {u.buffer} while both are live")
    # -- steps: concatenations are complete, aliases are no-ops
    for k, st in enumerate(plan.steps):
        if st.action == "alias" and st.writes and not (lookup(st.op) and lookup(st.op).concat):
            out = T[st.writes[0]]
            if st.copies:
                P.append(f"step {st.layer} is an alias but copies")
            for i in st.reads:
                x = T[i]
                if x.kind == "param":
                    continue
                if (x.buffer, x.offset, x.strides) != (out.buffer, out.offset, out.strides) or find(x.id) != find(out.id):
                    P.append(f"step {st.layer} is a no-op but '{x.name}' is not its output's bytes")
        if st.action in ("alias", "concat-copy") and st.writes:
            out = T[st.writes[0]]
            concat_children = [T[i] for i in st.reads if T[i].alias == "concat" and T[i].alias_of == out.id]
            if st.action == "concat-copy" or concat_children:
                seen = set()
                for i in st.reads:
                    x = T[i]
                    if x.kind == "param":
                        continue
                    ok = (i in st.copies) or (x.alias == "concat" and x.alias_of == out.id and i not in seen)
                    seen.add(i)
                    if not ok:
                        P.append(f"concat step {st.layer}: operand '{x.name}' is neither written into its "
                                 f"slice nor copied")
    return P + _bound_problems(plan, bl, end)


def _bound_problems(plan, bl: dict, end: int) -> list[str]:
    """Each arena's lower bound (the peak of its live aligned buffers, the external ones outside it) is the one the
    plan reports, and no arena is below it."""
    P = []
    for a in plan.arenas:
        items = [(align_up(b.size, plan.alignment), bl[b.id][0], bl[b.id][1]) for b in plan.buffers
                 if b.cls == a.cls and not b.external]
        delta = [0] * (end + 2)
        for s, lo, hi in items:
            delta[lo] += s
            delta[hi + 1] -= s
        peak = cur = 0
        for d in delta:
            cur += d
            peak = max(peak, cur)
        if peak != a.lower_bound:
            P.append(f"{CLASS_NAMES[a.cls]} arena: reported lower bound {a.lower_bound}, recomputed {peak}")
        if a.size < peak:
            P.append(f"{CLASS_NAMES[a.cls]} arena of {a.size} bytes is below the lower bound {peak}")
    return P


def _inplace_problems(plan, st) -> list[str]:
    """An in-place step writes one tensor, over operands it reads in exactly the output's place, each read element for
    element at the output's index by every member reading it -- or by a one-op step the plan's `overwrite` option
    names for that operand (plan_memory's: a target's kernel's word)."""
    T, P = plan.tensors, []
    if len(st.writes) != 1:
        return [f"in-place step {st.layer} writes {len(st.writes)} tensors"]
    given = (plan.options or {}).get("overwrite") or {}
    out = T[st.writes[0]]
    mbs = _members(st)
    aligned = output_aligned_members([lookup(mb.op) for mb in mbs], [mb.reads for mb in mbs], [mb.writes for mb in mbs])
    for i in st.reads:
        x = T[i]
        if x.buffer != out.buffer or x.kind == "param" or not _bytes_intersect(x, out):
            continue
        if (x.offset, x.strides, x.feature_shape) != (out.offset, out.strides, out.feature_shape):
            P.append(f"in-place step {st.layer} reads '{x.name}' where it writes, but not in the same place")
        for mb, ok in zip(mbs, aligned):
            if ok or i not in mb.reads:
                continue
            if len(mbs) == 1 and mb.reads.index(i) in given.get(mb.layer, ()) and mb.reads.count(i) == 1:
                continue
            P.append(f"in-place step {st.layer} writes over '{x.name}', which '{mb.layer}' ({mb.op}) "
                     f"does not read element for element at the output's index")
    return P


def _check_updates(plan) -> list[str]:
    """In-place parameter writes: parameters and state only, one writer per symbol, every other
    reader of the symbol before it."""
    P = []
    T = plan.tensors

    def symbol(i):
        seen = set()
        while T[i].alias == "share" and 0 <= T[i].alias_of < len(T) and i not in seen:
            seen.add(i)
            i = T[i].alias_of
        return i

    written_at: dict[int, int] = {}
    for st in plan.steps:
        for i in st.updates:
            if not 0 <= i < len(T) or T[i].kind != "param":
                P.append(f"step {st.index} ({st.layer}) updates '{T[i].name if 0 <= i < len(T) else i}' in place, "
                         f"which is no parameter or state")
                continue
            k = symbol(i)
            if k in written_at and written_at[k] != st.index:
                P.append(f"'{T[k].name}' is updated in place twice (steps {written_at[k]} and {st.index})")
            written_at.setdefault(k, st.index)
    for st in plan.steps:
        mine = {symbol(i) for i in st.updates if 0 <= i < len(T)}
        for i in dict.fromkeys(st.reads):
            if T[i].kind != "param":
                continue
            k = symbol(i)
            if k not in mine and k in written_at and written_at[k] < st.index:
                P.append(f"step {st.index} ({st.layer}) reads '{T[i].name}' after step {written_at[k]} updated it "
                         f"in place: it would see the next training step's value")
    return P


def _leading_axes_problem(t, plan) -> str | None:
    """A batch-sized tensor leads with the batch N, a time-sized one with (T, N)."""
    if t.cls == CONSTANT or tuple(t.shape[:t.cls]) == ((plan.batch,) if t.cls == BATCH else (plan.time, plan.batch)):
        return None
    want = (f"dimension is not the batch {plan.batch}" if t.cls == BATCH else
            f"dimensions are not (T, B) = ({plan.time}, {plan.batch})")
    return f"'{t.name}' {list(t.shape)} is {CLASS_NAMES[t.cls]}-sized but its first {want}"


def _members(st) -> list:
    """A step's members (a step made without them is its own one member)."""
    return st.members or [Member(st.layer, st.op, list(st.reads), list(st.writes))]


def _check_against_ir(plan, module, network) -> list[str]:
    P = []
    net = network if network is not None else module.network(plan.network)
    ops = [op for op in net.regions[0].ops if op.name not in STRUCTURAL_OPS and op.name != "netc.input"]
    names = [op.attrs.get("name") or op.name for op in ops]
    if sorted(names) != sorted(plan.order):
        P.append("the schedule does not hold exactly the network's layers")
        return P
    where = {}      # layer -> (step position, member position, Member)
    for k, st in enumerate(plan.steps):
        for j, mb in enumerate(_members(st)):
            where[mb.layer] = (k, j, mb)
    by_name = {t.name: t for t in plan.tensors}
    for op, name in zip(ops, names):
        k, j, mb = where[name]
        if mb.op != op.name:
            P.append(f"step {k + 1}: '{name}' is {op.name} in the network, {mb.op} in the plan")
        for q, v in enumerate(op.operands):
            src = v.owner.attrs.get("name") or v.owner.name
            if src in where and where[src][:2] >= (k, j):
                P.append(f"'{name}' is scheduled before its operand '{src}'")
            t = by_name.get(src if len(v.owner.results) == 1 else f"{src}#{v.index}")
            if t is None or q >= len(mb.reads) or mb.reads[q] != t.id:
                P.append(f"step {name}: operand {q} is not '{src}'")
        opdef = lookup(op.name)
        for q, r in enumerate(op.results):
            t = by_name.get(name if len(op.results) == 1 else f"{name}#{q}")
            if t is None or q >= len(mb.writes) or mb.writes[q] != t.id:
                P.append(f"step {name}: result {q} is not its tensor")
            elif opdef is not None and opdef.unbatched and t.cls != CONSTANT:
                P.append(f"'{t.name}' is the result of an unbatched op ({op.name}) but {CLASS_NAMES[t.cls]}-sized")
        st = plan.steps[k]
        if opdef is not None and opdef.side_effects:
            want = {by_name[f"@{ref.name}"].id for ref in (op.attrs.get("params") or {}).values()
                    if isinstance(ref, SymbolRef) and f"@{ref.name}" in by_name}
            if not want <= set(st.updates):
                P.append(f"step {k + 1}: '{name}' ({op.name}) writes "
                         f"{', '.join(sorted(plan.tensors[i].name for i in want - set(st.updates)))} in place, "
                         f"which the step's updates leave out")
    writes_of = {}
    for op, name in zip(ops, names):
        if lookup(op.name) is not None and lookup(op.name).side_effects:
            writes_of[name] = {by_name[f"@{ref.name}"].id for ref in (op.attrs.get("params") or {}).values()
                               if isinstance(ref, SymbolRef) and f"@{ref.name}" in by_name}
    for k, st in enumerate(plan.steps):
        want = set().union(*(writes_of.get(n, set()) for n in st.layers))
        if set(st.updates) - want:
            P.append(f"step {k + 1} ({st.layer}) claims to update "
                     f"{', '.join(sorted(plan.tensors[i].name for i in set(st.updates) - want))}, which none of its "
                     f"ops writes")
    if plan.fusion:
        # one step per fusion group, members in group order: the kernels codegen runs
        groups: dict[str, list] = {}
        for op, name in zip(ops, names):
            groups.setdefault(op.attrs.get("fusion_group") or f"op:{name}", []).append(name)
        for st in plan.steps:
            g = st.group or f"op:{st.layer}"
            if groups.get(g) != st.layers:
                P.append(f"step {st.index} runs {st.layers} as one kernel, but the network's group {g} is "
                         f"{groups.get(g)}")
    return P


def _expected(t, p):
    """(offset, strides) that t's relation to its parent p implies, or None if impossible."""
    if t.alias in ("identity", "inplace"):
        return (p.offset, p.strides) if t.feature_shape == p.feature_shape else None
    if t.alias in ("view", "share"):
        return (p.offset, None) if p.strides is None and t.size == p.size else None
    if t.alias == "concat":
        if t.slice is None:
            return None
        axis, start = t.slice
        pst = p.strides if p.strides is not None else row_major(p.feature_shape)
        if axis >= len(pst):
            return None
        return (p.offset + start * pst[axis] * t.itemsize, None if is_dense(t.feature_shape, pst) else pst)
    return None


def _strides(t):
    return t.strides if t.strides is not None else row_major(t.feature_shape)


def _hull(t):
    st = _strides(t)
    hi = t.offset + t.itemsize * (1 + sum((d - 1) * s for d, s in zip(t.feature_shape, st)))
    return t.offset, hi


def _runs(t):
    """Sorted (starts, ends) of the byte runs one sample of t covers inside its buffer."""
    shape = [d for d in t.feature_shape]
    st = list(_strides(t))
    item = t.itemsize
    # collapse the dense inner part into one run
    run, k = 1, len(shape)
    while k > 0 and (shape[k - 1] == 1 or st[k - 1] == run):
        run *= shape[k - 1]
        k -= 1
    starts = np.array([t.offset], dtype=np.int64)
    for d, s in zip(shape[:k], st[:k]):
        starts = (starts[:, None] + np.arange(d, dtype=np.int64)[None, :] * (s * item)).reshape(-1)
    starts.sort()
    return starts, starts + run * item


def _bytes_intersect(u, v) -> bool:
    a0, a1 = _hull(u)
    b0, b1 = _hull(v)
    if a1 <= b0 or b1 <= a0:
        return False
    if u.strides is None and v.strides is None:
        return True
    us, ue = _runs(u)
    vs, ve = _runs(v)
    idx = np.searchsorted(vs, ue, side="left") - 1
    ok = idx >= 0
    return bool(np.any(ve[idx[ok]] > us[ok]))


def _intersecting(items, interval):
    """Pairs of items whose closed intervals intersect (a sweep over interval starts)."""
    order = sorted(items, key=lambda x: interval(x)[0])
    active: list = []
    for x in order:
        lo, hi = interval(x)
        active = [a for a in active if interval(a)[1] >= lo]
        for a in active:
            yield a, x
        active.append(x)
