"""Static memory planning: schedule, buffer lifetimes and classes, offsets, aliasing, verification.
(Brainstorm's layout format, shared/spec/layout-format.md: read by netc/frontend/layout.py,
written by netc/export/layout.py.)"""
from .plan import (BATCH, CLASS_NAMES, CONSTANT, DEFAULT_ALIGNMENT, TIME, Arena, Buffer,  # noqa: F401
                   MemoryPlan, PlanError, Step, TensorPlan, plan_memory)
from .verify import check_plan, verify_plan  # noqa: F401
