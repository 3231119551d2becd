"""What lowering produces (lower.py) and codegen consumes: launch recipes, in plain data (no torch),
so the lowering cache (lowering_cache.py) can rebuild them without importing torch or Triton; and
a rank program's communication ops between its segments (CommPoint, Place), with the registry's
two facts that decide them (is_comm, is_rank_program)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ops import lookup

# argument regions: where a pointer argument's address starts (the launcher's base[region])
#   CONST_ARENA  the constant arena: parameters (and optimizer state) at its bottom, then constant-class
#                temporaries (losses; in a training step gradients, batch statistics)
#   BATCH_ARENA  the batch arena after it (per sample: coeff * b)
#   FWD_CONST, FWD_BATCH  a training library's forward (inference) program: its own constant
#                temporaries and batch arena, above the training step's constant region (its
#                parameters are the training step's, in CONST_ARENA)
#   DATA         constant data a lowering embeds (a multi-tensor update's chunk table), per program,
#                uploaded by netc_create
#   WORKSPACE    fp32 scratch that carries partial sums between the kernels of one group (two-stage
#                reductions), shared by every group: they run one after the other
NULL, CONST_ARENA, BATCH_ARENA, FWD_CONST, FWD_BATCH, DATA, WORKSPACE = 0, 1, 2, 3, 4, 5, 6


@dataclass
class Arg:
    kind: str            # "ptr" | "i32" | "i64" | "fp32"
    region: int = NULL   # for ptr
    coeff: int = 0       # ptr: bytes per batch sample of the buffer offset; ints: value per sample
    const: int = 0
    fval: float = 0.0


@dataclass
class Launch:
    group: str
    layers: list
    step: int
    call: object              # KernelCall at the compiled batch (meta tensors)
    args: list                # Arg per runtime parameter
    grid: tuple               # (rows_per_sample, block, R) for axis 0, then axes 1, 2 (constants)
    spec_key: tuple = ()      # the specialization: identical keys share one cubin
    kernel_index: int = -1
    part: int = 0             # the group's k-th kernel (a group may take several: two-stage reductions)


@dataclass(frozen=True)
class ArenaLayout:
    """Which regions a program's plan tensors are addressed from. The default is a library of one
    program (its constant and batch arenas). A training library's forward program uses FWD_CONST and
    FWD_BATCH for its own tensors and finds each parameter at `params[name]` (bytes into CONST_ARENA:
    the training step's offsets), so both programs share one copy of the parameters; its constant
    temporaries sit `const_shift` bytes lower than its plan says (the plan's parameters are not
    stored there)."""
    const_region: int = CONST_ARENA
    batch_region: int = BATCH_ARENA
    params: tuple | None = None      # ((name, offset), ...) or None: the plan's own offsets
    const_shift: int = 0
    private: tuple = ()              # ((name, offset in const_region), ...): parameters of this program's
    #                                  own (a folded batch norm's inference scale and shift)

    def param_offsets(self) -> dict | None:
        return dict(self.params) if self.params is not None else None


# the manifest's names of the argument regions (its `regions` gives each one's byte offset in the arena)
# (a plan tensor lies in one of these: never in the DATA or WORKSPACE regions)
REGION_NAMES = {CONST_ARENA: "constant", BATCH_ARENA: "batch", FWD_CONST: "forward_constant",
                FWD_BATCH: "forward_batch"}


@dataclass
class Place:
    """Where a plan tensor lies, as a pointer argument does (region, coeff bytes per sample, const
    bytes), with its shape and element strides at the compiled batch and its IR dtype."""
    name: str
    region: int
    coeff: int
    const: int
    shape: tuple
    strides: tuple
    dtype: str


@dataclass
class CommPoint:
    """A communication op of a rank's program (split-workers): no kernel, a cut of the schedule. It
    runs after the launches before it (`at` of them: segment k is launches [comms[k-1].at, comms[k].at))
    on the operands' and results' places in the arena, with torch.distributed (runtime/distributed.py)."""
    at: int                   # launches before it
    step: int                 # its memory-plan step
    op: str                   # IR op name (netc.send, netc.all_gather, ...)
    name: str                 # its layer name
    attrs: dict               # peer | ranks, root, dim, index, op, bucket (JSON values)
    operands: list            # Place per operand (a rank's own contribution; none for a recv)
    results: list             # Place per result (a send's: the message, which nothing reads)
    bytes: int = 0            # what this member puts on the wire (OpDef.comm_bytes)
    message_bytes: int = 0    # the logical tensor (OpDef.message_bytes)


@dataclass
class Lowered:
    launches: list = field(default_factory=list)
    splits: list = field(default_factory=list)   # groups split to respect the plan: text notes
    data: bytes = b""                            # the DATA region's bytes
    workspace_bytes: int = 0                     # the WORKSPACE region's size
    comms: list = field(default_factory=list)    # CommPoint per communication op, in schedule order
    fixed_batch: bool = False                    # lowered for the compiled batch only (a rank's program)
    outputs: list = field(default_factory=list)  # Place per network output (a rank program's)

    def segments(self) -> list:
        """[(first launch, count)] of each segment: the launches between consecutive communication ops
        (one segment, the whole schedule, without any)."""
        cuts = [0] + [c.at for c in self.comms] + [len(self.launches)]
        return [(a, b - a) for a, b in zip(cuts, cuts[1:])]


def is_comm(op) -> bool:
    """Whether the registry says `op` is a communication op (run by the distributed runtime: no kernel,
    a cut between segments)."""
    return bool(getattr(lookup(op.name), "comm", False))


def is_rank_program(net) -> bool:
    """A network of a split-workers module (one rank's program): it runs at its compiled batch only,
    in segments."""
    return "rank" in net.attrs
