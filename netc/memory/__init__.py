"""Static memory planning: schedule, buffer lifetimes and classes, offsets, aliasing, verification.
model.py is the plan's data model, graph.py the planner's view of a network, aliasing.py the alias
forest, ordering.py the schedules, offsets.py the placement inside an arena, plan.py puts them
together (plan_memory), exact.py is the branch-and-bound search, verify.py the checker, report.py
the reports. (Brainstorm's layout format, shared/spec/layout-format.md: read by
netc/frontend/layout.py, written by netc/export/layout.py.)"""
from .model import (BATCH, CLASS_NAMES, CONSTANT, DEFAULT_ALIGNMENT, TIME, Arena, Buffer,  # noqa: F401
                    MemoryPlan, PlanError, Step, TensorPlan)
from .plan import plan_memory  # noqa: F401
from .verify import check_plan, verify_plan  # noqa: F401
