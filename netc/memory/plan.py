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
  (or every operand is a scalar: a dropout mask drawn from the scalar seed). Optimizer state and
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
from collections import Counter
from dataclasses import dataclass, field

from ..ir.core import DTYPES, STRUCTURAL_OPS, Module, Operation, SymbolRef
from ..ops import lookup
from .exact import DEFAULT_BUDGET, DEFAULT_NODE_LIMIT, exact_offsets

CONSTANT, BATCH, TIME = 0, 1, 2
CLASS_NAMES = ("constant", "batch", "time")
DEFAULT_ALIGNMENT = 256
STRATEGIES = ("greedy-by-size", "greedy-by-breadth", "longest-lifetime-first")
EXACT_MAX_BUFFERS = 64   # reusable buffers per arena up to which the exact search runs (memory/exact.py)
MODES = ("inference", "training")
FUSION = ("auto", "none")

# How ops alias. The registry is the right home for these facts (OpDef.view, .identity_at_inference,
# .inplace, .concat_axis); until it has them, these tables say it, and a registry attribute of the
# same name takes precedence.


class PlanError(Exception):
    """The network cannot be planned (not shape-inferred, bad options, a fusion group that cannot
    be one kernel). `loc` is the op at fault where there is one; `notes` are (message, loc)."""

    def __init__(self, message: str, loc=None, notes=()):
        super().__init__(message)
        self.loc, self.notes = loc, list(notes)


def align_up(n: int, a: int) -> int:
    return -(-n // a) * a if a > 1 else n


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


def row_major(shape) -> tuple:
    """Element strides of a dense row-major array of `shape`."""
    st, acc = [], 1
    for d in reversed(shape):
        st.append(acc)
        acc *= d
    return tuple(reversed(st))


def is_dense(shape, strides) -> bool:
    """Whether `strides` address `shape` densely (dimensions of extent 1 have no stride)."""
    return all(n == 1 or s == r for n, s, r in zip(shape, strides, row_major(shape)))


# --------------------------------------------------------------------------------------------
# The plan


@dataclass
class TensorPlan:
    id: int
    name: str              # layer name; network inputs by their name; parameters as "@sym_name"
    kind: str              # "input" | "param" | "activation"
    shape: tuple           # full shape at the compiled batch
    dtype: str
    cls: int               # CONSTANT | BATCH | TIME
    size: int              # bytes (of one sample for the batch class)
    producer: int = 0      # step that writes it (0: inputs and parameters)
    last_use: int = 0      # last step that reads it (end for network outputs and parameters)
    output: bool = False   # a network result
    buffer: int = -1       # Buffer.id
    offset: int = 0        # bytes from the start of the buffer's (per-sample) block to element 0
    strides: tuple | None = None  # element strides of the feature axes; None = dense row-major
    alias: str | None = None      # "view" | "identity" | "inplace" | "concat" | "share": how it
    alias_of: int = -1            #   is placed relative to tensor alias_of (its parent)
    slice: tuple | None = None    # concat: (feature axis, start index) inside alias_of
    fused: bool = False           # an intermediate of a fusion group: computed and consumed inside
    #                               one kernel (producer == last_use == its step), no buffer (-1)

    @property
    def itemsize(self) -> int:
        return DTYPES[self.dtype]

    @property
    def feature_shape(self) -> tuple:
        return tuple(self.shape[self.cls:])   # constant: all; batch: after N; time: after T, N

    @property
    def numel(self) -> int:
        """Elements of one sample (batch class) or of the whole tensor (constant class)."""
        return _prod(self.feature_shape)


@dataclass
class Buffer:
    id: int
    cls: int
    size: int              # bytes (per sample for the batch class): its root tensor's size
    start: int             # first step that writes into it
    end: int               # last step that reads from it
    root: int              # the tensor that owns it (every other tensor in it aliases into it)
    tensors: list = field(default_factory=list)
    reusable: bool = True  # False: never shares bytes (parameters, training state)
    zero_init: bool = False  # must be zeroed at `start` (accumulated gradients; unused so far)
    offset: int = -1       # bytes from the start of its arena (per sample for the batch class)


@dataclass
class Member:
    """One op of a step, with its own reads (operands, then parameters) and writes; a fused
    step's members read and write its `fused` tensors among themselves."""
    layer: str
    op: str                # IR op name
    reads: list
    writes: list


@dataclass
class Step:
    index: int             # 1-based step number
    layer: str             # the (last) op's layer: the one whose result the step writes
    op: str                # IR op name (of the first member: a fused group's anchor)
    reads: list            # tensor ids read from memory (operands, then parameters)
    writes: list           # tensor ids written to memory
    action: str = "kernel"  # "kernel" | "inplace" (output over a dying input) | "alias" (no-op:
    #                         view, identity, zero-copy concat) | "concat-copy" (copies `copies`)
    copies: list = field(default_factory=list)
    roles: list = field(default_factory=list)   # parameter roles of the parameter reads, in order
    members: list = field(default_factory=list)  # Member per op, in order (one unless fused)
    fused: list = field(default_factory=list)    # tensor ids computed and consumed inside the step
    group: str = ""        # the fusion group ("" when not planned with fusion)
    updates: list = field(default_factory=list)  # parameter/state tensor ids written in place
    #                                              (side_effects ops: optimizer and running-stats updates)

    @property
    def layers(self) -> list:
        return [m.layer for m in self.members] if self.members else [self.layer]


@dataclass
class Arena:
    cls: int
    size: int              # bytes (per sample for the batch class)
    lower_bound: int       # peak of live aligned bytes over the schedule
    fixed: int = 0         # bytes at the bottom held by never-reused buffers (parameters)
    naive: int = 0         # bytes without any reuse (sum of aligned buffer sizes)
    strategy: str = ""     # the heuristic that won, or "exact" when the exact search improved on it
    candidates: dict = field(default_factory=dict)   # strategy -> arena size
    proven_optimal: bool = False   # no placement of these buffers has a smaller arena (meets the
    #                                bound, or the exact search completed)
    # time spent assigning offsets (heuristics and exact search): deliberately not a field, since
    # how long it took is no part of the plan (the lowering cache hashes the plan's fields)
    seconds = 0.0

    @property
    def ratio(self) -> float:
        return self.size / self.lower_bound if self.lower_bound else 1.0


@dataclass
class MemoryPlan:
    network: str
    mode: str
    batch: int             # the compiled (maximum) batch N
    alignment: int
    reuse: bool
    inputs: list           # tensor ids provided at step 0
    steps: list            # Step, in schedule order
    end: int
    tensors: list          # TensorPlan by id
    buffers: list          # Buffer by id
    arenas: list           # Arena per class (CONSTANT, BATCH, TIME)
    schedule: str = "original"
    schedule_candidates: dict = field(default_factory=dict)  # schedule -> (batch, constant) arena
    options: dict = field(default_factory=dict)
    seconds: float = 0.0
    fusion: bool = False   # steps are the module's fusion groups (one kernel each)
    recompute: dict | None = None   # the rematerialize pass's report (the network's
    #                                 `netc.rematerialize` attribute): budget, arenas, extra FLOPs

    def tensor(self, name: str) -> TensorPlan:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    @property
    def order(self) -> list:
        """Layers in schedule order (a fused step's members in their group's order)."""
        return [n for s in self.steps for n in s.layers]

    def arena_bytes(self, batch: int | None = None, steps: int = 1) -> list:
        """Bytes of each arena at `batch` (default: the compiled batch) and `steps` time steps."""
        b = self.batch if batch is None else batch
        return [self.arenas[CONSTANT].size, self.arenas[BATCH].size * b, self.arenas[TIME].size * b * steps]

    def address(self, name: str, batch: int | None = None, sample: int = 0) -> int:
        """Byte address of element 0 of `sample` of a tensor, relative to its class's arena."""
        t = self.tensor(name)
        if t.fused:
            raise PlanError(f"'{name}' is fused: computed inside one kernel, it has no address")
        buf = self.buffers[t.buffer]
        if t.cls == CONSTANT:
            return buf.offset + t.offset
        b = self.batch if batch is None else batch
        return buf.offset * b + sample * buf.size + t.offset

    def batch_stride(self, t: TensorPlan) -> int | None:
        """Bytes from one sample of `t` to the next (its buffer's per-sample size)."""
        return self.buffers[t.buffer].size if t.cls != CONSTANT and not t.fused else None

    def summary(self) -> dict:
        """Plain data for the IR attribute and reports."""
        return {
            "mode": self.mode, "batch": self.batch, "alignment": self.alignment, "reuse": self.reuse,
            "schedule": self.schedule, "steps": len(self.steps), "buffers": len(self.buffers),
            "fusion": self.fusion, "fused_tensors": sum(1 for t in self.tensors if t.fused),
            **({"updates": sum(1 for s in self.steps if s.updates)} if self.mode == "training" else {}),
            "arenas": {CLASS_NAMES[a.cls]: {"bytes": a.size, "lower_bound": a.lower_bound, "naive": a.naive,
                                            "ratio": round(a.ratio, 4), "strategy": a.strategy,
                                            "proven_optimal": a.proven_optimal}
                       for a in self.arenas if a.size or a.cls != TIME},
        }

    def table(self) -> str:
        """The plan as text: one row per buffer, then the arenas (for `netc explain --memory`)."""
        rows = [("buffer", "class", "offset", "bytes", "live", "tensors")]
        for b in sorted(self.buffers, key=lambda b: (b.cls, b.offset, b.start)):
            names = []
            for i in b.tensors:
                t = self.tensors[i]
                tag = f" ({t.alias})" if t.alias else ""
                names.append(t.name + tag)
            rows.append((str(b.id), CLASS_NAMES[b.cls], str(b.offset), str(b.size),
                         f"{b.start}-{b.end}", ", ".join(names)))
        for st in self.steps:     # fused intermediates: no buffer, no bytes, alive inside one step
            if st.fused:
                cls = CLASS_NAMES[self.tensors[st.fused[0]].cls]
                rows.append(("-", cls, "-", "0", f"{st.index}-{st.index}",
                             ", ".join(self.tensors[i].name + " (fused)" for i in st.fused)))
        w = [max(len(r[i]) for r in rows) for i in range(5)]
        fz = ", one step per fusion group" if self.fusion else ""
        out = [f"memory plan for network {self.network} ({self.mode}, batch {self.batch}, "
               f"schedule {self.schedule}{fz}, alignment {self.alignment}; batch-class sizes are per sample)"]
        for r in rows:
            out.append("  ".join(c.rjust(w[i]) if i in (2, 3) else c.ljust(w[i]) for i, c in enumerate(r[:5]))
                       + "  " + r[5])
        for a in self.arenas:
            if a.size == 0 and a.cls == TIME:
                continue
            per = " per sample" if a.cls == BATCH else ""
            if a.cls == CONSTANT and self.mode == "training":
                out.append(f"constant arena: {a.fixed} bytes of parameters and state (fixed), then gradients and "
                           f"other unbatched temporaries planned by lifetime ({self.schedule} schedule; "
                           f"{sum(1 for s in self.steps if s.updates)} in-place updates)")
            out.append(f"{CLASS_NAMES[a.cls]} arena: {a.size} bytes{per}, lower bound {a.lower_bound} "
                       f"(ratio {a.ratio:.3f}), without reuse {a.naive}, strategy {a.strategy}"
                       f"{', proven optimal' if a.proven_optimal else ''}")
        total = sum(self.arena_bytes())
        out.append(f"total: {total} bytes at batch {self.batch}")
        r = self.recompute
        if r:
            verdict = ("within the budget" if r["met"] else
                       "over the budget: the smallest arena recomputation reaches")
            out.append(f"recomputation (budget {r['budget']} bytes): {len(r['recomputed'])} forward op(s) recomputed "
                       f"in the backward pass ({r['ops']} clone(s): {', '.join(r['recomputed']) or 'none'}), "
                       f"+{r['extra_flops']} FLOPs; arena {r['arena_before']} -> {r['arena_after']} bytes, {verdict}")
        return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------
# The planner's view of a network


def _opdef_flag(opdef, attr: str) -> bool:
    """A memory-plan fact the op registry declares (OpDef.view, .concat, ...)."""
    return opdef is not None and bool(getattr(opdef, attr))


class _Graph:
    """Tensors, units, readers and classes of one network; independent of any schedule.

    A *unit* is what one schedule step runs: one op, or a whole fusion group (ops by index into
    self.ops, in group order). reads/writes/roles/readers/producer are per unit and list only what
    goes through memory; a group's intermediates are in `internal` instead.
    """

    def __init__(self, module: Module, net: Operation, mode: str, fusion: str = "auto"):
        self.mode = mode
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
        dims = Counter(op.results[0].type.shape[0] for op in in_ops if op.results and op.results[0].type.shape)
        self.batch = dims.most_common(1)[0][0] if dims else 1

        def new(name, kind, ttype, cls, producer=0):
            # batch-sized tensors are planned per sample (time-sized ones, when recurrent ops
            # produce them, will be planned per sample and time step: nbytes // (T * N))
            nb = ttype.nbytes
            size = nb // self.batch if cls == BATCH else nb
            t = TensorPlan(len(self.tensors), name, kind, tuple(ttype.shape), ttype.dtype, cls, size, producer)
            self.tensors.append(t)
            return t.id

        self.inputs = []
        for op in in_ops:
            for r in op.results:
                s = r.type.shape
                cls = BATCH if len(s) >= 1 and s[0] == self.batch and dims else CONSTANT
                vid[id(r)] = new(_value_name(op, r), "input", r.type, cls)
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
            batched = not _opdef_flag(opdef, "unbatched") and (
                any(self.tensors[i].cls == BATCH for i in operands)
                or bool(operands) and all(not self.tensors[i].shape for i in operands))
            writes = []
            for r in op.results:
                s = r.type.shape
                cls = BATCH if batched and len(s) >= 1 and s[0] == self.batch else CONSTANT
                vid[id(r)] = new(_value_name(op, r), "activation", r.type, cls)
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
                if _opdef_flag(self.opdefs[i], "side_effects"):
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
        return len(mem) == 1 and _opdef_flag(self.opdefs[mem[0]], attr)

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
        ok, elsewhere = [], []
        for x in dict.fromkeys(self.reads[u][:self.n_operands[u]]):
            if all(aligned[k] for k in range(len(mem)) if x in operands[k]):
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
        if not _opdef_flag(opdefs[k], "elementwise"):
            continue
        made = set(writes[k])
        aligned[k] = all(aligned[j] for j in range(k + 1, n) if made & set(operands[j]))
    return aligned


def _value_name(op: Operation, r) -> str:
    n = op.attrs.get("name") or op.name
    return n if len(op.results) == 1 else f"{n}#{r.index}"


# --------------------------------------------------------------------------------------------
# Alias forest: which tensor is placed where, relative to which parent


class _Forest:
    """Parent pointers (the alias forest) plus a union-find over trees with per-tree facts."""

    def __init__(self, g: _Graph):
        n = len(g.tensors)
        self.g = g
        self.parent = [t.alias_of if t.alias else -1 for t in g.tensors]
        self.kind = [t.alias for t in g.tensors]
        self.slice: list = [None] * n
        self.uf = list(range(n))
        self.members = [[i] for i in range(n)]
        self.troot = list(range(n))     # alias-tree root of a union-find representative
        self.has_view = [False] * n
        for i in range(n):
            if self.parent[i] >= 0:
                self._union(i, self.parent[i])

    def copy(self) -> "_Forest":
        f = _Forest.__new__(_Forest)
        f.g = self.g
        f.parent, f.kind, f.slice = list(self.parent), list(self.kind), list(self.slice)
        f.uf, f.troot, f.has_view = list(self.uf), list(self.troot), list(self.has_view)
        f.members = [list(m) for m in self.members]
        return f

    def find(self, i: int) -> int:
        uf = self.uf
        r = i
        while uf[r] != r:
            r = uf[r]
        while uf[i] != r:
            uf[i], i = r, uf[i]
        return r

    def root(self, i: int) -> int:
        return self.troot[self.find(i)]

    def _union(self, child: int, parent: int) -> int:
        a, b = self.find(child), self.find(parent)
        root = self.troot[b]
        if len(self.members[a]) > len(self.members[b]):
            a, b = b, a
        self.uf[a] = b
        self.members[b].extend(self.members[a])
        self.members[a] = []
        self.has_view[b] = self.has_view[a] or self.has_view[b]
        self.troot[b] = root
        return b

    def placement(self, i: int):
        """(root, byte offset, strides or None) of tensor i inside its tree's root."""
        chain = [i]
        while self.parent[chain[-1]] >= 0:
            chain.append(self.parent[chain[-1]])
        pl = (chain[-1], 0, None)
        for u in reversed(chain[:-1]):
            pl = self._compose(pl, self.parent[u], u, self.kind[u], self.slice[u])
            if pl is None:
                raise AssertionError("internal error: alias forest holds an impossible view")
        return pl

    def _compose(self, pl, p: int, u: int, kind: str, sl):
        """Placement of u given its parent p's placement, or None if it cannot be expressed."""
        root, off, strides = pl
        tensors = self.g.tensors
        if kind in ("identity", "inplace"):
            return pl
        if kind in ("view", "share"):
            return (root, off, None) if strides is None else None
        axis, start = sl   # concat
        pshape = tensors[p].feature_shape
        pst = strides if strides is not None else row_major(pshape)
        off += start * pst[axis] * tensors[u].itemsize
        return (root, off, None if is_dense(tensors[u].feature_shape, pst) else pst)

    def try_attach(self, u: int, p: int, kind: str, sl=None, op: int = -1, dense_only: bool = False) -> bool:
        """Place tree-root u (and with it its whole tree) relative to p, if that is safe.

        `op` is the op making the attachment: its own reads of u's tree are fine even if strided.
        """
        g, t = self.g, self.g.tensors
        if self.parent[u] >= 0:
            # u already aliases something; if it has exactly its tree root's bytes, move the root
            r = self.root(u)
            if kind == "concat" or t[u].size != t[r].size or self.placement(u) != (r, 0, None):
                return False
            if t[r].feature_shape != t[p].feature_shape:
                if kind == "inplace":
                    return False
                kind = "view"
            u = r
        tu, tp = t[u], t[p]
        if self.find(u) == self.find(p):
            return False
        if tu.kind != "activation" or tp.kind == "param":
            return False      # inputs and parameters always own their bytes
        if tu.cls != tp.cls or tu.dtype != tp.dtype:
            return False
        if kind in ("identity", "inplace") and tu.feature_shape != tp.feature_shape:
            return False
        if kind == "view" and tu.size != tp.size:
            return False
        pl = self._compose(self.placement(p), p, u, kind, sl)
        if pl is None:
            return False
        rep = self.find(u)
        if pl[2] is not None:
            # A strided placement: nothing in u's tree may be a view (a reshape of a strided
            # array is not an array) or a network result, nor be read by a kernel other than
            # `op` (kernels write strided slices; only aliasing ops read them).
            if dense_only or self.has_view[rep]:
                return False
            members = self.members[rep]
            tree = set(members)
            for w in members:
                if t[w].output:
                    return False
                for r in g.readers[w]:
                    if r == op:
                        continue
                    if not all(o in tree and (self.parent[o] == w or self.parent[w] == o) for o in g.writes[r]):
                        return False
        self.parent[u], self.kind[u], self.slice[u] = p, kind, sl
        b = self._union(u, p)
        if kind == "view":
            self.has_view[b] = True
        return True


def _alias_schedule_free(g: _Graph, f: _Forest, concat: str):
    """Views, identities and zero-copy concats: valid in every topological order.

    Ops are visited consumers first (reverse topological order), so that a Concatenate claims its
    inputs before their producers are looked at, and a chain conv -> dropout -> concat ends with
    the conv writing into the concat's slice.
    """
    for i in reversed(range(len(g.units))):
        if not g.writes[i] or not g.reads[i]:
            continue
        out = g.writes[i][0]
        if g.is_identity(i) or g.is_view(i):
            kind = "view" if g.is_view(i) else "identity"
            x = g.reads[i][0]
            if not f.try_attach(x, out, kind, op=i):
                f.try_attach(out, x, kind, op=i)
        elif g.is_concat(i) and concat != "none":
            ct = g.tensors[out]
            rank = len(ct.shape)
            d = g.ops[g.units[i][0]].attrs.get("dim", -1)
            d = d + rank if d < 0 else d
            axis = d - 1 if ct.cls == BATCH else d
            if axis < 0:
                continue          # concatenation along the batch axis: copied
            start, seen = 0, set()
            for x in g.reads[i][:g.n_operands[i]]:
                tx = g.tensors[x]
                ext = tx.shape[d]
                if x not in seen:
                    f.try_attach(x, out, "concat", (axis, start), op=i, dense_only=concat == "contiguous")
                seen.add(x)
                start += ext


# --------------------------------------------------------------------------------------------
# Schedules


def _eager_updates(g: _Graph, order: list) -> list:
    """`order` with every update (a unit that only writes parameters or state in place) moved up
    to right after the last unit it depends on: its gradient's producer and the parameter's other
    readers (_Graph.after). An update frees its gradient, so it should not wait."""
    upd = {u for u in order if g.updates[u] and not g.writes[u]}
    if not upd:
        return list(order)
    deps = {u: {g.producer[t] for t in g.reads[u] if g.producer[t] >= 0} | g.after[u] for u in upd}
    out, done, pending = [], set(), [u for u in order if u in upd]

    def flush():
        moved = True
        while moved:
            moved = False
            for u in list(pending):
                if deps[u] <= done:
                    pending.remove(u)
                    out.append(u)
                    done.add(u)
                    moved = True

    flush()
    for u in order:
        if u in upd:
            continue
        out.append(u)
        done.add(u)
        flush()
    out += pending           # unreachable for a valid order: every dependency is placed above
    return out


def _tree_sizes(g: _Graph, f: _Forest):
    """Bytes per tree (at the compiled batch) and pending events (writes + reads) per tree."""
    n = len(g.tensors)
    size = [0] * n
    pending = [0] * n
    pinned = [False] * n
    for t in g.tensors:
        if g.is_internal[t.id]:
            continue          # a fused intermediate never takes memory
        r = f.find(t.id)
        if f.troot[r] == t.id:
            size[r] = t.size * (g.batch if t.cls == BATCH else 1)
        if t.output or t.kind == "param":
            pinned[r] = True
        pending[r] += len(g.readers[t.id]) + (1 if g.producer[t.id] >= 0 else 0)
    return size, pending, pinned


def _greedy_order(g: _Graph, f: _Forest, lifo: bool) -> list:
    """Among ready units, run the one that frees the most bytes net of what it allocates."""
    nops = len(g.units)
    size, pending, pinned = _tree_sizes(g, f)
    live = [False] * len(g.tensors)
    for t in g.tensors:
        if g.producer[t.id] < 0:
            live[f.find(t.id)] = True
    deps = [0] * nops
    users: list[list[int]] = [[] for _ in range(nops)]
    for i in range(nops):
        srcs = {g.producer[t] for t in g.reads[i] if g.producer[t] >= 0} | g.after[i]
        deps[i] = len(srcs)
        for s in srcs:
            users[s].append(i)
    # per op: tree -> events it completes
    events = []
    for i in range(nops):
        ev: dict[int, int] = {}
        for t in g.writes[i]:
            r = f.find(t)
            ev[r] = ev.get(r, 0) + 1
        for t in dict.fromkeys(g.reads[i]):
            r = f.find(t)
            ev[r] = ev.get(r, 0) + 1
        events.append(ev)
    ready = [i for i in range(nops) if deps[i] == 0]
    stamp = {i: 0 for i in ready}
    clock = 0
    order = []
    while ready:
        best, best_key = None, None
        for i in ready:
            gain = 0
            for r, k in events[i].items():
                if not live[r]:
                    gain -= size[r]
                if pending[r] == k and not pinned[r]:
                    gain += size[r]
            key = (gain, stamp[i] if lifo else 0, -i)
            if best_key is None or key > best_key:
                best, best_key = i, key
        ready.remove(best)
        order.append(best)
        for r, k in events[best].items():
            live[r] = True
            pending[r] -= k
        clock += 1
        for u in users[best]:
            deps[u] -= 1
            if deps[u] == 0:
                ready.append(u)
                stamp[u] = clock
    if len(order) != nops:
        raise PlanError("the network is not acyclic")
    return order


# --------------------------------------------------------------------------------------------
# Offsets


def _overlaps(bufs: list) -> list:
    """For each buffer (index into bufs), the buffers whose lifetimes intersect it."""
    idx = sorted(range(len(bufs)), key=lambda k: bufs[k][2])
    over: list[list[int]] = [[] for _ in bufs]
    active: list[int] = []
    for k in idx:
        s = bufs[k][2]
        active = [a for a in active if bufs[a][3] >= s]
        for a in active:
            over[a].append(k)
            over[k].append(a)
        active.append(k)
    return over


def _best_fit(k: int, bufs, over, offs, base: int) -> int:
    """Smallest gap (at or above base) among the already placed buffers overlapping k in time."""
    size = bufs[k][1]
    placed = sorted((offs[j], bufs[j][1]) for j in over[k] if offs[j] >= 0)
    prev, best, best_gap = base, None, None
    for o, s in placed:
        gap = o - prev
        if gap >= size and (best_gap is None or gap < best_gap):
            best, best_gap = prev, gap
        prev = max(prev, o + s)
    return prev if best is None else best


def assign_offsets(bufs: list, strategy: str, base: int = 0) -> list:
    """Offsets for bufs = [(id, aligned size, start, end)], packed above `base`.

    Buffers whose lifetimes intersect get disjoint ranges; sizes are already aligned, so every
    offset is base plus a sum of aligned sizes.
    """
    n = len(bufs)
    offs = [-1] * n
    if strategy == "sequential":
        o = base
        for k in sorted(range(n), key=lambda k: (bufs[k][2], bufs[k][0])):
            offs[k] = o
            o += bufs[k][1]
        return offs
    over = _overlaps(bufs)
    if strategy == "greedy-by-size":
        order = sorted(range(n), key=lambda k: (-bufs[k][1], -(bufs[k][3] - bufs[k][2]), bufs[k][2], k))
    elif strategy == "longest-lifetime-first":
        order = sorted(range(n), key=lambda k: (-(bufs[k][3] - bufs[k][2]), -bufs[k][1], bufs[k][2], k))
    elif strategy == "greedy-by-breadth":
        live: dict[int, list[int]] = {}
        breadth: dict[int, int] = {}
        for k, (_, s, a, e) in enumerate(bufs):
            for st in range(a, e + 1):
                live.setdefault(st, []).append(k)
                breadth[st] = breadth.get(st, 0) + s
        order, seen = [], set()
        for st in sorted(live, key=lambda st: (-breadth[st], st)):
            for k in sorted(live[st], key=lambda k: (-bufs[k][1], k)):
                if k not in seen:
                    seen.add(k)
                    order.append(k)
    else:
        raise PlanError(f"unknown offset strategy '{strategy}' (strategies: {', '.join(STRATEGIES)}, sequential)")
    for k in order:
        offs[k] = _best_fit(k, bufs, over, offs, base)
    return offs


def live_peak(bufs: list, end: int, base: int = 0) -> int:
    """Peak over the steps of the aligned bytes of live buffers (the lower bound of any arena)."""
    delta = [0] * (end + 2)
    for _, s, a, e in bufs:
        delta[a] += s
        delta[e + 1] -= s
    peak = cur = 0
    for d in delta:
        cur += d
        peak = max(peak, cur)
    return base + peak


# --------------------------------------------------------------------------------------------
# Putting it together


def plan_memory(module: Module, network: Operation | str | None = None, *, mode: str | None = None,
                alignment: int = DEFAULT_ALIGNMENT, reuse: bool = True, inplace: bool = True,
                concat: str = "all", schedule: str | list = "auto", strategies=STRATEGIES,
                fusion: str = "auto", exact: bool = True, exact_budget: float = DEFAULT_BUDGET,
                exact_nodes: int = DEFAULT_NODE_LIMIT) -> MemoryPlan:
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
    g = _Graph(module, net, mode, fusion)
    base = _Forest(g)
    _alias_schedule_free(g, base, concat)
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
            o = _eager_updates(g, list(range(len(g.units))))
            if o not in orders.values():
                orders["eager-updates"] = o
        if schedule in ("auto", "greedy"):
            for name, lifo in (("greedy", False), ("greedy-lifo", True)):
                o = _greedy_order(g, base, lifo)
                if o not in orders.values():
                    orders[name] = o
    best, cands = None, {}
    opts = dict(mode=mode, alignment=alignment, reuse=reuse, inplace=inplace, concat=concat,
                strategies=list(strategies), fusion=fusion, exact=exact, exact_budget=exact_budget,
                exact_nodes=exact_nodes)
    for name, order in orders.items():
        p = _plan_order(g, base.copy(), order, name, opts)
        key = (p.arenas[BATCH].size * g.batch + p.arenas[CONSTANT].size + p.arenas[TIME].size * g.batch)
        cands[name] = key
        if best is None or key < best[0]:
            best = (key, p)
    plan = best[1]
    plan.schedule_candidates = cands
    rec = net.attrs.get("netc.rematerialize")
    plan.recompute = dict(rec) if isinstance(rec, dict) else None
    plan.seconds = time.perf_counter() - t0
    return plan


def _plan_order(g: _Graph, f: _Forest, order: list, name: str, opts: dict) -> MemoryPlan:
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
                pinned[r] = any(tensors[m].output or tensors[m].kind == "param" for m in f.members[r])
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
            # temporaries are planned by lifetime like activations (see the module docstring)
            b.reusable = root.kind != "param"
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
        bs = [b for b in buffers if b.cls == cls]
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
                      buffers, arenas, name, options=opts, fusion=g.fusion)
