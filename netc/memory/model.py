"""The memory plan's data model: tensors, buffers, steps and arenas, and the plan itself (its
addresses, summary and table). The planner that fills it is memory/plan.py; the vocabulary (classes,
per-sample offsets, alignment) is explained there."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.core import DTYPES

CONSTANT, BATCH, TIME = 0, 1, 2
CLASS_NAMES = ("constant", "batch", "time")
DEFAULT_ALIGNMENT = 256


class PlanError(Exception):
    """The network cannot be planned (not shape-inferred, bad options, a fusion group that cannot
    be one kernel). `loc` is the op at fault where there is one; `notes` are (message, loc)."""

    def __init__(self, message: str, loc=None, notes=()):
        super().__init__(message)
        self.loc, self.notes = loc, list(notes)


def align_up(n: int, a: int) -> int:
    return -(-n // a) * a if a > 1 else n


def prod(xs) -> int:
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


def is_rows(shape, strides) -> bool:
    """Whether `strides` address `shape` as rows: the last axis contiguous and the rows (every
    other axis, nested) evenly spaced, as in a channel slice of a contiguous buffer -- what a
    kernel can write (OpDef.writes_rows; kernels/common.py's row_stride checks the same)."""
    if not shape:
        return True
    if shape[-1] > 1 and strides[-1] != 1:
        return False
    expect = None
    for n, s in zip(reversed(shape[:-1]), reversed(strides[:-1])):
        if n == 1:
            continue
        if expect is not None and s != expect:
            return False
        expect = s * n
    return True


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
    context: int = 0              # time class: extra time steps after the T real ones (Brainstorm's
    #                               context_size: the state a recurrent layer starts the next call from)
    flat: bool = False            # batch class: an IR value [T*B, ...] (a sequence's steps flattened, T the
    #                               batch) planned as the [T, B, ...] it is (memory/graph.py); shape says which

    @property
    def itemsize(self) -> int:
        return DTYPES[self.dtype]

    @property
    def feature_shape(self) -> tuple:
        return tuple(self.shape[self.cls:])   # constant: all; batch: after N; time: after T, N

    @property
    def numel(self) -> int:
        """Elements of one sample (batch class), of one time step of one sample (time class) or of the whole
        tensor (constant class)."""
        return prod(self.feature_shape)


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
    external: bool = False  # an input read where the caller holds it (plan_memory external_inputs): no arena bytes


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
    time: int = 1          # T of the time class (planned with time_sized: per time step and sample)
    context: int = 0       # the most context rows of a time-sized tensor: the time arena is (T + context) rows

    def tensor(self, name: str) -> TensorPlan:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    @property
    def order(self) -> list:
        """Layers in schedule order (a fused step's members in their group's order)."""
        return [n for s in self.steps for n in s.layers]

    def arena_bytes(self, batch: int | None = None, steps: int | None = None) -> list:
        """Bytes of each arena at `batch` (default: the compiled batch) and `steps` time steps (default: the
        planned T) plus the context rows."""
        b = self.batch if batch is None else batch
        steps = (self.time if steps is None else steps) + self.context
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
