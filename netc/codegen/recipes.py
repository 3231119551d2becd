"""What lowering produces (lower.py) and codegen consumes: launch recipes, in plain data (no torch),
so the lowering cache (lowering_cache.py) can rebuild them without importing torch or Triton."""
from __future__ import annotations

from dataclasses import dataclass, field

NULL, CONST_ARENA, BATCH_ARENA = 0, 1, 2


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


@dataclass
class Lowered:
    launches: list = field(default_factory=list)
    splits: list = field(default_factory=list)   # groups split to respect the plan: text notes
