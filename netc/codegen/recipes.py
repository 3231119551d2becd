"""What lowering produces (lower.py) and codegen consumes: launch recipes, in plain data (no torch),
so the lowering cache (lowering_cache.py) can rebuild them without importing torch or Triton."""
from __future__ import annotations

from dataclasses import dataclass, field

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


@dataclass
class Lowered:
    launches: list = field(default_factory=list)
    splits: list = field(default_factory=list)   # groups split to respect the plan: text notes
    data: bytes = b""                            # the DATA region's bytes
    workspace_bytes: int = 0                     # the WORKSPACE region's size
