"""The planner's view of a network: tensors with their classes and lifetimes, units (one op, or one
fusion group) with their reads and writes, and the order constraints between them (memory/plan.py
explains the rules)."""
from __future__ import annotations

from collections import Counter

from ..ir.core import STRUCTURAL_OPS, Module, Operation, SymbolRef
from ..ops import lookup
from .model import BATCH, CONSTANT, TIME, PlanError, TensorPlan


def time_major_values(ops) -> tuple[dict, int, int]:
    """The sequences of a network's time-major ops (OpDef.batch_axis 1: an Lstm's [T, B, ...] operand 0 and
    result): ({id(value): (T, B, context rows)}, T, the most context rows), the context being the op's
    OpDef.context_rows on its result (Brainstorm's context_size: extra steps after the T real ones)."""
    seq: dict = {}
    for op in ops:
        d = lookup(op.name)
        if d is None or d.batch_axis != 1 or not op.results or op.results[0].type.shape is None:
            continue
        if getattr(d, "reduces_time", False):   # a reduction over time (SequencePool): [T, B, ...] -> [B, ...]
            shape = op.operands[0].type.shape if op.operands else None
            if shape is not None and len(shape) >= 3:
                seq.setdefault(id(op.operands[0]), (shape[0], shape[1], 0))
            continue
        t, b = op.results[0].type.shape[:2]
        for v in op.operands[:1]:
            seq.setdefault(id(v), (t, b, 0))
        for r in op.results:
            seq[id(r)] = (t, b, getattr(d, "context_rows", 0))
    if not seq:
        return {}, 1, 0
    t = next(iter(seq.values()))[0]
    return seq, t, max(c for _, _, c in seq.values())


def initial_state_values(ops) -> set:
    """ids of the values a network whose batch is T (the leading axis of its sequences) reads per sample, with
    B leading, and only so: an Lstm's initial state h0, c0 [B, H] (read only as a time-major op's operands
    other than its sequence: OpDef.batch_axis != 0, operand 0 the sequence [T, B, ...]), a sequence's lengths
    [B] (OpDef.lengths_operand, a masked loss gradient's operand 2), and values read only beside what a
    reduction over time gives (per_sample_values: the labels [B] of a classifier over a SequencePool). Their
    axis 0 is the batch B, not the T that leads the sequences: they neither decide the network's batch (the
    leading axis the compiled targets scale) nor are batch-sized; they are fed whole (codegen/manifest.py). A
    GRU's single step (x [B, X], rank 2) has no time axis: its h0 leads with the batch like x."""
    return _fed_whole([(op, [id(v) for v in op.operands], op.operands[0].type.shape if op.operands else None,
                        [id(r) for r in op.results]) for op in ops])


def initial_state_inputs(net) -> set:
    """Names of the layers a time-major network reads per sample only (initial_state_values), the
    network's inputs among them; also before its operands are resolved (by the ops' `parents`)."""
    ops = net.regions[0].ops
    declared = {op.attrs.get("name"): op.attrs.get("shape") for op in ops if op.name == "netc.input"}
    entries = []
    for op in ops:
        if op.operands:
            refs, first = [v.owner.attrs.get("name") for v in op.operands], op.operands[0].type.shape
        else:
            refs = list(op.attrs.get("parents") or [])
            first = declared.get(refs[0]) if refs else None
        entries.append((op, refs, first, [op.attrs.get("name")]))
    return _fed_whole(entries)


def _lengths_index(op) -> int | None:
    """The operand holding a sequence's lengths [B], or None."""
    d = lookup(op.name) if op.name != "netc.input" else None
    k = getattr(d, "lengths_operand", None) if d is not None else None
    if k is None and op.attrs.get("lengths") is True:
        k = 2       # a masked loss's gradient: the loss's operands, lengths third (ops/loss.py)
    return k


def _fed_whole(entries) -> set:
    """Of [(op, operand refs, operand 0's shape or None, result refs)]: the refs read only per sample (see
    initial_state_values)."""
    per_sample = per_sample_values(entries)
    state, other = set(), set()
    for op, refs, first, _ in entries:
        seq = _reads_a_sequence(op, first)
        lk = _lengths_index(op)
        beside = not seq and any(r in per_sample for r in refs)
        for k, r in enumerate(refs):
            (state if seq and k > 0 or k == lk or beside else other).add(r)
    return state - other - per_sample


def per_sample_values(entries) -> set:
    """Result refs of a reduction over time (OpDef.reduces_time: a SequencePool's [B, ...] of a sequence)
    and of the ops computing from them alone (with inputs besides: labels): per sample, not per step."""
    out: set = set()
    # what decides: values computed from others (inputs and operand-less values, a gradient's seed, do not)
    computed = {r for op, refs, _, rs in entries if op.name != "netc.input" and refs for r in rs}
    for op, refs, first, results in entries:
        if op.name == "netc.input":
            continue
        d = lookup(op.name)
        if getattr(d, "reduces_time", False) and _reads_a_sequence(op, first) \
                or refs and any(r in out for r in refs) and all(r in out or r not in computed for r in refs):
            out.update(results)
    return out


def per_sample_value_ids(ops) -> set:
    """ids of the values per_sample_values finds among `ops` (IR operations with resolved operands)."""
    return per_sample_values([(op, [id(v) for v in op.operands], op.operands[0].type.shape if op.operands else None,
                               [id(r) for r in op.results]) for op in ops])


def _reads_a_sequence(op, first_shape) -> bool:
    """Whether `op` is time-major and its operand 0 (of shape first_shape, None if unknown) a sequence."""
    d = lookup(op.name) if op.name != "netc.input" else None
    return d is not None and d.batch_axis != 0 and (first_shape is None or len(first_shape) >= 3)


def opdef_flag(opdef, attr: str) -> bool:
    """A memory-plan fact the op registry declares (OpDef.view, .concat, ...)."""
    return opdef is not None and bool(getattr(opdef, attr))


class PlanGraph:
    """Tensors, units, readers and classes of one network; independent of any schedule.

    A *unit* is what one schedule step runs: one op, or a whole fusion group (ops by index into
    self.ops, in group order). reads/writes/roles/readers/producer are per unit and list only what
    goes through memory; a group's intermediates are in `internal` instead.
    """

    def __init__(self, module: Module, net: Operation, mode: str, fusion: str = "auto", time_sized: bool = False,
                 overwrite: dict | None = None):
        self.mode = mode
        self.overwrite = overwrite or {}   # layer -> operand indices its target's kernel lets the result overwrite
        self.name = net.attrs.get("sym_name", "network")
        body = net.regions[0].ops
        self.tensors: list[TensorPlan] = []
        vid: dict[int, int] = {}
        in_ops = [op for op in body if op.name == "netc.input"]
        self.ops = [op for op in body if op.name not in STRUCTURAL_OPS and op.name != "netc.input"]
        for op in in_ops + self.ops:
            for r in op.results:
                if r.type.shape is None:
                    raise PlanError(f"'{op.attrs.get('name')}' has no inferred shape; run shape-inference first")
        state = initial_state_values(self.ops)
        per_sample = per_sample_value_ids(self.ops)     # [B, ...] after a reduction over time: not batch-sized
        dims = Counter(op.results[0].type.shape[0] for op in in_ops
                       if op.results and op.results[0].type.shape and id(op.results[0]) not in state)
        self.batch = dims.most_common(1)[0][0] if dims else 1
        # time-sized (only when asked: the layout writer's Brainstorm classes): the sequences [T, B, ...] of
        # the time-major ops (OpDef.batch_axis 1), planned per time step and sample; the batch is then B
        seq, self.time, self.context = time_major_values(self.ops) if time_sized else ({}, 1, 0)
        if seq:
            self.batch = next(iter(seq.values()))[1]
            per_sample = set()     # the batch is B here: what a reduction over time gives [B, ...] is batch-sized

        def new(name, kind, ttype, cls, producer=0, context=0, rows=1):
            # batch-sized tensors are planned per sample, time-sized ones per sample and time step; a
            # time-sized [T*B, ...] (a sequence with its steps flattened, Brainstorm's flatten_time) is
            # planned as the [T, B, ...] it is, and so is a batch-sized one (rows = B: T the batch)
            nb, shape = ttype.nbytes, tuple(ttype.shape)
            if cls == TIME and shape[:2] != (self.time, self.batch):
                shape = (self.time, self.batch) + shape[1:]
            if cls == BATCH and rows > 1:
                shape = (self.batch, rows) + shape[1:]
            size = nb // self.batch if cls == BATCH else nb // (self.time * self.batch) if cls == TIME else nb
            t = TensorPlan(len(self.tensors), name, kind, shape, ttype.dtype, cls, size, producer, context=context,
                           flat=cls == BATCH and rows > 1)
            self.tensors.append(t)
            return t.id

        def time_class(r, flat=False) -> bool:
            """A sequence [T, B, ...] (flat: also [T*B, ...], what an op that keeps the steps writes)."""
            s = tuple(r.type.shape)
            return id(r) in seq or (bool(seq) and (len(s) >= 3 and s[:2] == (self.time, self.batch)
                                                   or flat and len(s) >= 1 and s[0] == self.time * self.batch))

        self.inputs = []
        for op in in_ops:
            for r in op.results:
                s = r.type.shape
                timed_input = bool(seq) and op.attrs.get("batch_axis") == 1 and tuple(s[:2]) == (self.time, self.batch)
                cls = (TIME if time_class(r) or timed_input else BATCH if len(s) >= 1 and s[0] == self.batch and dims
                       and (id(r) not in state or bool(seq)) else CONSTANT)
                vid[id(r)] = new(value_name(op, r), "input", r.type, cls)
                self.inputs.append(vid[id(r)])
        # parameters this network uses (and the owners of share_from aliases), in module order
        used = set()
        for op in self.ops:
            for ref in (op.attrs.get("params") or {}).values():
                if isinstance(ref, SymbolRef):
                    used.add(ref.name)
        params = {p.attrs["sym_name"]: p for p in module.params() if "type" in p.attrs}
        for n in list(used):
            sf = params[n].attrs.get("share_from") if n in params else None
            if sf is not None:
                used.add(sf.name)
        self.param_ids: dict[str, int] = {}
        for n, p in params.items():
            if n in used:
                self.param_ids[n] = new("@" + n, "param", p.attrs["type"], CONSTANT)
        for n, i in self.param_ids.items():
            sf = params[n].attrs.get("share_from")
            if sf is not None and sf.name in self.param_ids:
                t = self.tensors[i]
                t.alias, t.alias_of = "share", self.param_ids[sf.name]
        self.opdefs = []
        op_roles: list[list[str]] = []
        op_reads: list[list[int]] = []
        op_writes: list[list[int]] = []
        for op in self.ops:
            opdef = lookup(op.name)
            self.opdefs.append(opdef)
            reads = [vid[id(v)] for v in op.operands]
            roles = []
            for role, ref in (op.attrs.get("params") or {}).items():
                if isinstance(ref, SymbolRef) and ref.name in self.param_ids:
                    reads.append(self.param_ids[ref.name])
                    roles.append(role)
            op_roles.append(roles)
            operands = reads[:len(op.operands)]
            # batch-sized: the batch leads and comes from an operand (or from nothing but scalars:
            # a mask drawn from the seed); never for unbatched ops (parameter gradients, statistics)
            batched = not opdef_flag(opdef, "unbatched") and (
                any(self.tensors[i].cls == BATCH for i in operands)
                or bool(operands) and all(not self.tensors[i].shape for i in operands))
            timed = not opdef_flag(opdef, "unbatched") and any(self.tensors[i].cls == TIME for i in operands)
            writes = []
            for r in op.results:
                s = r.type.shape
                rows = self._flat_rows(s, operands) if batched and id(r) not in per_sample else 1
                cls = (TIME if id(r) in seq or (timed and time_class(r, flat=True)) else
                       BATCH if batched and len(s) >= 1 and (s[0] == self.batch or rows > 1)
                       and id(r) not in per_sample else CONSTANT)
                vid[id(r)] = new(value_name(op, r), "activation", r.type, cls,
                                 context=seq.get(id(r), (0, 0, 0))[2] if cls == TIME else 0, rows=rows)
                writes.append(vid[id(r)])
            op_reads.append(reads)
            op_writes.append(writes)
        self.op_reads, self.op_writes = op_reads, op_writes
        n = len(self.tensors)
        op_readers: list[list[int]] = [[] for _ in range(n)]
        for i in range(len(self.ops)):
            for t in dict.fromkeys(op_reads[i]):
                op_readers[t].append(i)
        outs = [op for op in body if op.name == "netc.output"]
        if outs:
            for o in outs:
                for v in o.operands:
                    self.tensors[vid[id(v)]].output = True
        else:
            for t in self.tensors:
                if t.kind == "activation" and not op_readers[t.id]:
                    t.output = True
        self._make_units(fusion, op_roles, op_readers)
        self._order_parameter_accesses()

    def _order_parameter_accesses(self):
        """`updates` per unit: the parameter/state tensors its side_effects ops overwrite in place;
        `after` per unit: the units that must run before it besides its operands' producers --
        per symbol (a share_from alias counts as its owner), the IR order of writes and reads is
        kept: a writer after every earlier reader and writer, a reader after the last writer."""
        n_units = len(self.units)
        self.updates: list[list[int]] = [[] for _ in range(n_units)]
        for u, mem in enumerate(self.units):
            for i in mem:
                if opdef_flag(self.opdefs[i], "side_effects"):
                    for ref in (self.ops[i].attrs.get("params") or {}).values():
                        if isinstance(ref, SymbolRef) and ref.name in self.param_ids:
                            t = self.param_ids[ref.name]
                            if t not in self.updates[u]:
                                self.updates[u].append(t)
        self.after: list[set] = [set() for _ in range(n_units)]
        last_writer: dict[int, int] = {}
        readers: dict[int, list] = {}
        for u in range(n_units):          # units are in IR order (each where its last op is)
            written = {self.symbol(t) for t in self.updates[u]}
            for k in written:
                self.after[u].update(readers.get(k, ()))
                if k in last_writer:
                    self.after[u].add(last_writer[k])
                last_writer[k], readers[k] = u, []
            for t in dict.fromkeys(self.reads[u]):
                k = self.symbol(t)
                if self.tensors[t].kind == "param" and k not in written:
                    if k in last_writer:
                        self.after[u].add(last_writer[k])
                    readers.setdefault(k, []).append(u)
        for u in range(n_units):
            self.after[u].discard(u)

    def _flat_rows(self, s: tuple, operands: list) -> int:
        """B when a result s = [T*B, ...] flattens the steps of a batch-sized operand [T, B, ...] (T the batch:
        a rolled recurrent net's InnerProduct at every step reads [T*B, H]), planned as [T, B, ...]; else 1."""
        if len(s) < 1 or s[0] == self.batch or not self.batch or s[0] % self.batch:
            return 1
        k = s[0] // self.batch
        for i in operands:
            u = self.tensors[i]
            if u.cls == BATCH and len(u.shape) >= 2 and tuple(u.shape[:2]) == (self.batch, k):
                return k
        return 1

    def symbol(self, t: int) -> int:
        """The tensor owning a parameter's storage (a share_from alias's owner), else t."""
        while self.tensors[t].alias == "share":
            t = self.tensors[t].alias_of
        return t

    def _make_units(self, fusion: str, op_roles, op_readers):
        """Units from the ops' fusion_group attributes (fusion "auto"), or one per op ("none")."""
        groups: dict[str, list[int]] = {}
        units: list[list[int]] = []
        for i, op in enumerate(self.ops):
            g = op.attrs.get("fusion_group") if fusion == "auto" else None
            if g is None:
                units.append([i])
            elif g in groups:
                groups[g].append(i)
            else:
                groups[g] = [i]
                units.append(groups[g])
        # a unit runs where its last op is: in that order every operand is written before
        units.sort(key=lambda mem: mem[-1])
        self.fusion = fusion == "auto" and bool(groups)
        self.units = units
        self.group_of = [""] * len(units)
        if self.fusion:
            for u, mem in enumerate(units):
                self.group_of[u] = self.ops[mem[0]].attrs.get("fusion_group") or ""
        n = len(self.tensors)
        self.reads: list[list[int]] = []
        self.writes: list[list[int]] = []
        self.roles: list[list[str]] = []
        self.n_operands: list[int] = []
        self.internal: list[list[int]] = []
        for u, mem in enumerate(units):
            if len(mem) == 1:
                (i,) = mem
                self.reads.append(list(self.op_reads[i]))
                self.writes.append(list(self.op_writes[i]))
                self.roles.append(list(op_roles[i]))
                self.n_operands.append(len(self.ops[i].operands))
                self.internal.append([])
                continue
            inside = set(mem)
            internal = []
            for i in mem[:-1]:
                for t in self.op_writes[i]:
                    why, notes = None, []
                    if self.tensors[t].output:
                        why = "is a network result"
                    else:
                        out = [r for r in op_readers[t] if r not in inside]
                        if out:
                            why = f"is read by '{self.ops[out[0]].attrs.get('name')}' outside the group"
                            notes.append((f"'{self.ops[out[0]].attrs.get('name')}' reads it here", self.ops[out[0]].loc))
                    if why:
                        raise PlanError(
                            f"fusion group '{self.group_of[u]}' ({', '.join(self.ops[k].attrs.get('name') for k in mem)})"
                            f" cannot run as one kernel: the result of '{self.ops[i].attrs.get('name')}' {why}, but "
                            f"the kernel never stores it; run the fuse pass again", self.ops[i].loc, notes)
                    internal.append(t)
            made = set(internal)
            operands, params, roles = [], [], []
            for i in mem:
                k = len(self.ops[i].operands)
                operands += [t for t in self.op_reads[i][:k] if t not in made]
                for t, role in zip(self.op_reads[i][k:], op_roles[i]):
                    if t not in params:
                        params.append(t)
                        roles.append(f"{self.ops[i].attrs.get('name')}.{role}")
            operands = list(dict.fromkeys(operands))
            self.reads.append(operands + params)
            self.writes.append(list(self.op_writes[mem[-1]]))
            self.roles.append(roles)
            self.n_operands.append(len(operands))
            self.internal.append(internal)
        self.producer = [-1] * n          # unit that writes a tensor (internal ones included)
        self.readers: list[list[int]] = [[] for _ in range(n)]   # units reading it from memory
        for u in range(len(units)):
            for t in self.writes[u] + self.internal[u]:
                self.producer[t] = u
            for t in dict.fromkeys(self.reads[u]):
                self.readers[t].append(u)
        self.is_internal = [False] * n
        for u in range(len(units)):
            for t in self.internal[u]:
                self.is_internal[t] = True

    def unit_name(self, u: int) -> str:
        op = self.ops[self.units[u][-1]]
        return op.attrs.get("name") or op.name

    def _single(self, u, attr: str) -> bool:
        mem = self.units[u]
        return len(mem) == 1 and opdef_flag(self.opdefs[mem[0]], attr)

    def is_view(self, u):
        return self._single(u, "view")

    def is_identity(self, u):
        # a dropout with its mask operand (a training program's) computes, whatever the mode
        return self.mode == "inference" and self._single(u, "identity_at_inference") and self.n_operands[u] == 1

    def is_concat(self, u):
        return self._single(u, "concat")

    def inplace_operands(self, u) -> tuple:
        """(operands the unit's result may be written over, operands read elsewhere): the first
        are read by every member reading them at exactly the index the kernel writes
        (output_aligned_members); the others (a conv's windows) must keep their bytes intact
        until the kernel is done, so no candidate aliasing them qualifies either."""
        mem = self.units[u]
        operands = [self.op_reads[i][:len(self.ops[i].operands)] for i in mem]
        aligned = output_aligned_members([self.opdefs[i] for i in mem], operands, [self.op_writes[i] for i in mem])
        given = set()       # plan_memory's overwrite: what the target's kernel of a one-op unit lets it write over
        if len(mem) == 1:
            given = {operands[0][k] for k in self.overwrite.get(self.ops[mem[0]].attrs.get("name"), ())
                     if k < len(operands[0])}
        ok, elsewhere = [], []
        for x in dict.fromkeys(self.reads[u][:self.n_operands[u]]):
            if x in given and operands[0].count(x) == 1:
                ok.append(x)
            elif all(aligned[k] for k in range(len(mem)) if x in operands[k]):
                ok.append(x)
            else:
                elsewhere.append(x)
        return ok, elsewhere


def output_aligned_members(opdefs: list, operands: list, writes: list) -> list:
    """Per member of a unit (one op or a fusion group, in order): whether every element it reads
    from an operand lands at the same index of the unit's result -- the member is elementwise
    (OpDef.elementwise) and every member consuming its result is output-aligned too. A conv anchor
    reads windows; a pointwise op after it reads the conv's result element for element."""
    n = len(opdefs)
    aligned = [False] * n
    for k in reversed(range(n)):
        if not opdef_flag(opdefs[k], "elementwise"):
            continue
        made = set(writes[k])
        aligned[k] = all(aligned[j] for j in range(k + 1, n) if made & set(operands[j]))
    return aligned


def value_name(op: Operation, r) -> str:
    n = op.attrs.get("name") or op.name
    return n if len(op.results) == 1 else f"{n}#{r.index}"
