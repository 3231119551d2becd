"""IR verifier: structural invariants every pass must preserve. Violations are netc's bugs
(the pass manager turns them into internal errors), never user errors."""
from __future__ import annotations

from .core import STRUCTURAL_OPS, Module, SymbolRef, registered_op


def verify_module(module: Module) -> list[str]:
    return [m for m, _ in verify_ops(module, check_names=False)]


def verify_ops(module: Module, check_names: bool = True) -> list[tuple]:
    """(message, op) for every violated invariant (op may be None). Unique layer names are the
    user's concern in the pipeline (resolve-names reports duplicates), so the pass manager does
    not check them; loading hand-written IR does."""
    problems: list = []
    params = {p.attrs.get("sym_name") for p in module.params()}
    for op in module.body:
        if op.name not in ("netc.network", "netc.param"):
            problems.append((f"unexpected top-level op {op.name}", op))
    for net in module.networks():
        defined = set()
        names = set()
        resolved = check_names and not any("parents" in op.attrs for op in net.regions[0].ops)
        for op in net.regions[0].ops:
            if op.name not in STRUCTURAL_OPS and registered_op(op.name) is None:
                problems.append((f"unknown op {op.name}", op))
            for v in op.operands:
                if id(v.owner) not in defined:
                    problems.append((f"'{op.attrs.get('name')}' uses a value not defined before it in its network", op))
            if op.operands and "parents" in op.attrs:
                problems.append((f"'{op.attrs.get('name')}' has both operands and unresolved parents", op))
            n = op.attrs.get("name")
            if n is not None and resolved and op.name not in ("netc.block", "netc.parallel"):
                if n in names:
                    problems.append((f"duplicate layer name '{n}'", op))
                names.add(n)
            for role, ref in (op.attrs.get("params") or {}).items():
                if isinstance(ref, SymbolRef) and ref.name not in params:
                    problems.append((f"'{n}' refers to undefined parameter @{ref.name}", op))
            defined.add(id(op))
            if len(problems) > 20:
                return problems
    return problems
