"""materialize-params: give every parameter a module-level `netc.param` symbol, and share.

Each layer's parameters (its op's `param_roles`) get shapes from the op's rule. A parameter is
named by the layer's `params` binding or, by default, `<layer>.<role>` (prefixed with the
network's name when the file holds several networks). Two bindings of one name are one
parameter: shapes must agree (PaddlePaddle's sharing by name, across networks too).
`share_from` (SINGA) makes a distinct parameter that aliases its owner's storage: the owner must
exist and hold as many elements. Declared `param` statements must agree with their uses.
"""
from __future__ import annotations

from ..diagnostics import did_you_mean
from ..ir.core import Operation, SymbolRef, TensorType
from ..ops import lookup
from .registry import Pass, register_pass

_INIT_KEYS = ("init", "std", "mean", "low", "high", "value", "fan_in", "fan_out", "lr_scale", "wd_scale", "immutable",
              "sparse_update")


@register_pass
class MaterializeParams(Pass):
    name = "materialize-params"
    title = "MaterializeParams"
    requires = ("shape-inference",)
    summary = "create module-level parameters, resolve sharing by name and share_from"

    def needed(self, module):
        for net in module.networks():
            for op in net.regions[0].ops:
                d = lookup(op.name)
                if d and d.param_roles and not _bound(op):
                    return True
        return False

    def run(self, module, ctx):
        diag = ctx.diag
        declared = {p.attrs["sym_name"]: p for p in module.params()}
        params: dict[str, Operation] = dict(declared)
        used_by: dict[str, tuple] = {}
        multi = len(module.networks()) > 1
        for net in module.networks():
            prefix = net.attrs["sym_name"] + "." if multi else ""
            for op in net.regions[0].ops:
                opdef = lookup(op.name)
                if not opdef or not opdef.param_roles or op.attrs.get("invalid"):
                    continue
                if _bound(op):
                    # IR text: a layer's parameters are declared (netc.param); they must fit it.
                    # (What the training passes made, gradients and updates, reads them as they are.)
                    if not opdef.training_only and op.results and op.results[0].type.shape is not None:
                        _check_bound(op, opdef, params, diag)
                    continue
                if op.results[0].type.shape is None:
                    continue
                shapes = opdef.param_shapes(opdef.attrs_of(op), [v.type.shape for v in op.operands],
                                            op.results[0].type.shape)
                binding = op.attrs.get("params", {})
                refs = {}
                for role, shape in shapes.items():
                    spec = binding.get(role, {})
                    pname = spec.get("name") or f"{prefix}{op.attrs['name']}.{role}"
                    ttype = TensorType(shape, op.results[0].type.dtype)
                    loc = op.attr_loc(f"param.{role}")
                    p = params.get(pname)
                    if p is None:
                        p = Operation("netc.param", attrs={"sym_name": pname, "type": ttype}, loc=loc)
                        params[pname] = p
                    elif "type" not in p.attrs:
                        p.attrs["type"] = ttype
                    elif p.attrs["type"].shape != ttype.shape:
                        first = used_by.get(pname)
                        d = diag.error(f"parameter '{pname}' is shared with a different shape: "
                                       f"{list(shape)} here, {list(p.attrs['type'].shape)} "
                                       f"{'in ' + repr(first[0]) if first else 'as declared'}", loc,
                                       width=len(op.attrs["name"]) if loc is op.loc else len(role))
                        d.note("declared or first used here", first[1] if first else p.loc)
                        continue
                    for k in _INIT_KEYS:
                        if k in spec:
                            p.attrs[k] = spec[k]
                    if "share_from" in spec:
                        sloc = (op.attr_locs or {}).get(f"param.{role}.share_from", loc)
                        if p.attrs.get("share_from", SymbolRef(spec["share_from"])).name != spec["share_from"]:
                            diag.error(f"parameter '{pname}' is given two different share_from owners", sloc,
                                       width=10)
                        p.attrs["share_from"] = SymbolRef(spec["share_from"])
                        p.attr_locs = {"share_from": sloc}
                    used_by.setdefault(pname, (op.attrs["name"], loc))
                    refs[role] = SymbolRef(pname)
                op.attrs["params"] = refs
        for name, p in params.items():
            owner = p.attrs.get("share_from")
            if owner is None:
                continue
            o = params.get(owner.name)
            loc = (p.attr_locs or {}).get("share_from", p.loc)
            width = 10 if loc is not p.loc else len(name)
            if owner.name == name:
                diag.error(f"parameter '{name}' cannot share from itself", loc, width=width)
                continue
            if o is None:
                d = diag.error(f"parameter '{name}' shares from '{owner.name}', which does not exist", loc, width=width)
                hint = did_you_mean(owner.name, params)
                if hint:
                    d.note(f"did you mean '{hint}'?")
                continue
            if o.attrs.get("share_from") is not None:
                diag.error(f"parameter '{name}' shares from '{owner.name}', which itself shares from "
                           f"'{o.attrs['share_from'].name}'; share from the owner", loc, width=width)
                continue
            if "type" in o.attrs and "type" in p.attrs and o.attrs["type"].numel != p.attrs["type"].numel:
                diag.error(f"parameter '{name}' ({list(p.attrs['type'].shape)}) cannot share the storage of "
                           f"'{owner.name}' ({list(o.attrs['type'].shape)}): element counts differ", loc,
                           width=width).note(f"'{owner.name}' is defined here", o.loc)
        bound = {ref.name for net in module.networks() for op in net.regions[0].ops
                 for ref in (op.attrs.get("params") or {}).values() if isinstance(ref, SymbolRef)}
        for name, p in declared.items():
            if name not in used_by and name not in bound and not any(q.attrs.get("share_from") == SymbolRef(name) for q in params.values()):
                diag.warning(f"parameter '{name}' is declared but no layer uses it", p.loc, width=len(name))
            elif "type" not in p.attrs:
                pass
        # params first, in first-use order, then the networks
        others = [op for op in module.body if op.name != "netc.param"]
        module.regions[0].block.set_ops(list(params.values()) + others)


def _check_bound(op, opdef, params: dict, diag):
    """A bound layer's declared parameters have the shapes its rule gives (an IR file whose layer
    attributes or input shapes were changed, but not its `netc.param` types)."""
    shapes = opdef.param_shapes(opdef.attrs_of(op), [v.type.shape for v in op.operands], op.results[0].type.shape)
    for role, shape in shapes.items():
        ref = op.attrs["params"].get(role)
        p = params.get(ref.name) if isinstance(ref, SymbolRef) else None
        have = p.attrs.get("type") if p is not None else None
        if have is None or have.shape is None or tuple(have.shape) == tuple(shape):
            continue
        name = op.attrs.get("name") or op.name
        d = diag.error(f"parameter '{ref.name}' of '{name}' is declared {list(have.shape)}, but the layer "
                       f"needs {list(shape)} for its {role}", op.loc, width=len(name))
        d.note("declared here", p.loc)


def _bound(op) -> bool:
    ps = op.attrs.get("params")
    return bool(ps) and all(isinstance(v, SymbolRef) for v in ps.values())
