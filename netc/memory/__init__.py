"""Static memory planning: schedule, buffer lifetimes and classes, offsets, aliasing, verification,
and Brainstorm's March-2015 layout format (shared/spec/layout-format.md)."""
from .plan import (BATCH, CLASS_NAMES, CONSTANT, DEFAULT_ALIGNMENT, TIME, Arena, Buffer,  # noqa: F401
                   MemoryPlan, PlanError, Step, TensorPlan, plan_memory)
from .verify import check_plan, verify_plan  # noqa: F401
from .layout import LayoutError, check_layout_mode, read_layout, write_layout  # noqa: F401
