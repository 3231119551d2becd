"""IR verifier: structural invariants every pass must preserve. Violations are netc's bugs
(the pass manager turns them into internal errors), never user errors."""
from __future__ import annotations

import math

from .core import STRUCTURAL_OPS, Module, SymbolRef, registered_op
from .query import MAX_SPLITS, split_ref_problem


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
    if check_names:  # what the passes read of hand-written IR without asking
        problems += _structure_problems(module)
        if problems:
            return problems
    for net in module.networks():
        defined = set()
        names = set()
        resolved = check_names and not any("parents" in op.attrs for op in net.regions[0].ops)
        for op in net.regions[0].ops:
            # ops nested in blocks too: flatten-blocks moves them up to the network
            for o in op.walk():
                if o.name not in STRUCTURAL_OPS and registered_op(o.name) is None:
                    problems.append((f"unknown op {o.name}", o))
            for v in op.operands:
                if id(v.owner) not in defined:
                    problems.append((f"'{op.attrs.get('name')}' uses a value not defined before it in its network", op))
            if op.operands and "parents" in op.attrs:
                problems.append((f"'{op.attrs.get('name')}' has both operands and unresolved parents", op))
            if check_names:
                problems += _parent_problems(op)
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


def _parent_problems(op) -> list[tuple]:
    """Unresolved parents of hand-written IR (an op and the sublayers of its blocks): a list of
    names, each with a well-formed split suffix (expand-model-parallel parses it)."""
    out = []
    for o in op.walk():
        parents = o.attrs.get("parents")
        if parents is None:
            continue
        if not isinstance(parents, list) or not all(isinstance(p, str) for p in parents):
            out.append((f"'parents' of '{o.attrs.get('name')}' must be a list of layer names", o))
            continue
        out += [(problem, o) for problem in map(split_ref_problem, parents) if problem]
    return out


def _structure_problems(module: Module) -> list[tuple]:
    """Attributes and regions every pass takes for granted: a network has a name and one region,
    a parameter a name and a tensor type, a layer or block a name, a block one region."""
    from .core import TensorType
    out = []
    for op in module.body:
        if op.name in STRUCTURAL_OPS and op.results:
            out.append((f"{op.name} defines no value: write it without '%... =' and with '-> ()'", op))
        if op.name == "netc.network":
            if not isinstance(op.attrs.get("sym_name"), str):
                out.append(("a network needs a name: sym_name = \"...\"", op))
            if len(op.regions) != 1:
                out.append((f"a network has one region (its body), this one has {len(op.regions)}", op))
                continue
            for o in op.regions[0].ops:
                out += _layer_structure(o)
        elif op.name == "netc.param":
            if not isinstance(op.attrs.get("sym_name"), str):
                out.append(("a parameter needs a name: sym_name = \"...\"", op))
            t = op.attrs.get("type")
            if not isinstance(t, TensorType) or t.shape is None:
                out.append((f"parameter '{op.attrs.get('sym_name')}' needs a ranked tensor type: type = tensor<...>",
                            op))
            for k in PARAM_NUMBERS:
                msg = param_number_problem(k, op.attrs.get(k, 0))
                if msg:
                    out.append((f"parameter '{op.attrs.get('sym_name')}': {msg}", op))
    return out


# a parameter's attributes that are numbers: its initializer's arguments, its learning-rate and
# weight-decay multipliers (.nd parameter bindings and `param` statements, IR text's netc.param)
PARAM_NUMBERS = ("std", "mean", "low", "high", "value", "fan_in", "fan_out", "lr_scale", "wd_scale")


def param_number_problem(k: str, v) -> str | None:
    """What is wrong with a parameter attribute that must be a finite number, or None."""
    if k not in PARAM_NUMBERS:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return f"parameter attribute '{k}' must be a finite number, got {_show(v)}"
    return None


def _show(v) -> str:
    return f"'{v}'" if isinstance(v, str) else str(v)


def _layer_structure(op) -> list[tuple]:
    out = []
    if op.name in ("netc.network", "netc.param", "builtin.module"):  # the passes take every other op for a layer
        return [(f"{op.name} belongs at the top level of the module, not among a network's layers", op)]
    if op.name in STRUCTURAL_OPS and op.results:  # only layers define values
        out.append((f"{op.name} defines no value: write it without '%... =' and with '-> ()'", op))
    if op.name in ("netc.block", "netc.parallel") or (op.name not in STRUCTURAL_OPS and registered_op(op.name)):
        if not isinstance(op.attrs.get("name"), str):
            out.append((f"{op.name} needs a name: name = \"...\"", op))
    if "params" in op.attrs and op.name not in STRUCTURAL_OPS:
        out += _params_problems(op)
    want = getattr(registered_op(op.name), "num_results", 1) if op.name not in STRUCTURAL_OPS else None
    if op.name not in STRUCTURAL_OPS and registered_op(op.name) and len(op.results) != want:
        what = {0: "no value (an update: '\"netc.x\"(...) ... -> ()')", 1: "one value ('%x = \"netc.x\"(...) ... -> tensor<...>')"}
        out.append((f"{op.name} defines {what.get(want, f'{want} values')}, this one defines {len(op.results)}", op))
    if op.name in ("netc.block", "netc.parallel"):
        if len(op.regions) != 1:
            out.append((f"{op.name} has one region (its layers), this one has {len(op.regions)}", op))
            return out
        if op.name == "netc.parallel":
            n = op.attrs.get("splits")
            if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_SPLITS:
                out.append((f"'splits' of parallel block '{op.attrs.get('name')}' must be an integer from 1 to "
                            f"{MAX_SPLITS}, got {n!r}", op))
        for o in op.regions[0].ops:
            out += _layer_structure(o)
    return out


def _params_problems(op) -> list[tuple]:
    """A layer's `params`: its parameters by role, either all bound to module parameters
    ({weight = @w, bias = @b}, what materialize-params writes) or all still specs
    ({weight = {name = "w", init = "gaussian"}}, what the frontends write)."""
    ps, name = op.attrs["params"], op.attrs.get("name")
    shape = "{role = @param, ...} or {role = {name = \"...\", ...}, ...}"
    if not isinstance(ps, dict):
        return [(f"'params' of '{name}' must be a dictionary {shape}, got {type(ps).__name__}", op)]
    bound = [isinstance(v, SymbolRef) for v in ps.values()]
    if any(bound) and not all(bound):
        return [(f"'params' of '{name}' mixes bound parameters (@...) and specs ({{...}}): bind all or none", op)]
    d = registered_op(op.name)
    roles = getattr(d, "param_roles", None)
    if d is not None:
        try:   # (state an update writes depends on its attributes; malformed ones are reported elsewhere)
            roles = d.bindable_roles(d.attrs_of(op))
        except (TypeError, ValueError, KeyError):
            pass
    if roles is not None and ps and not roles:  # (an unknown op is reported as such)
        return [(f"'{name}' ({op.name}) has no parameters to bind, but its 'params' names {', '.join(ps)}", op)]
    out = []
    for role, v in ps.items():
        if roles is not None and role not in roles:
            out.append((f"'{name}' ({op.name}) has no parameter '{role}'; its parameters are: {', '.join(roles)}", op))
            continue
        if isinstance(v, SymbolRef):
            continue
        if not isinstance(v, dict):
            out.append((f"parameter '{role}' of '{name}' must be @param or a dictionary {{name = \"...\", ...}}, "
                        f"got {type(v).__name__}", op))
            continue
        for key in ("name", "share_from"):
            if key in v and not isinstance(v[key], str):
                out.append((f"'{key}' of parameter '{role}' of '{name}' must be a string", op))
    return out
