"""Write unresolved IR (what any frontend produces) back as .nd source. `netc import` uses it, so
that a network imported from Paleo JSON (or later SINGA, Brainstorm) becomes an .nd file a user
can edit; parsing the written file gives the same IR again."""
from __future__ import annotations

import re

from ..ir.core import SymbolRef, TensorType
from ..ops import lookup

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*(/[A-Za-z0-9_.]+)*$")
_REF = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*(/[A-Za-z0-9_.]+)*(@(self|all|[0-9]+))?$")
_KEYWORDS = {"network", "input", "block", "parallel", "splits", "output", "layout", "param", "true", "false",
             "null"}
# Attributes that are structure, written by the statement itself rather than inside { }.
_STRUCT = {"name", "parents", "splits", "split_index", "endpoint", "invalid", "sym_name", "type", "title"}


def _str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def name(s: str) -> str:
    return s if _NAME.match(s) and s not in _KEYWORDS else _str(s)


def ref(s: str) -> str:
    return s if _REF.match(s) and s not in _KEYWORDS else _str(s)


def value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, (int, float)):
        r = repr(v)
        return r
    if isinstance(v, str):
        return _str(v)
    if isinstance(v, SymbolRef):
        return _str(v.name)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{name(k) if _NAME.match(k) and '/' not in k else _str(k)}: {value(x)}"
                               for k, x in v.items()) + "}"
    if isinstance(v, TensorType):
        return _str(str(v))
    raise TypeError(f"cannot write {v!r} as .nd")


def _attrs(op) -> str:
    items = [(k, v) for k, v in op.attrs.items() if k not in _STRUCT]
    if op.name == "netc.opaque":
        items.insert(0, ("type", op.attrs.get("type")))
    if not items:
        return ""
    return " { " + ", ".join(f"{k}: {value(v)}" for k, v in items) + " }"


def _stmt(op, indent: int, out: list):
    pad = "  " * indent
    n = op.name
    if n == "netc.input":
        a = op.attrs
        extra = {k: v for k, v in a.items() if k not in ("name", "shape", "dtype")}
        tail = (" { " + ", ".join(f"{k}: {value(v)}" for k, v in extra.items()) + " }") if extra else ""
        out.append(f"{pad}input {name(a['name'])}: {a.get('dtype', 'f32')}[{', '.join(map(str, a['shape']))}]{tail}")
    elif n in ("netc.block", "netc.parallel"):
        a = op.attrs
        parents = ", ".join(ref(p) for p in a.get("parents", []))
        kw = "block" if n == "netc.block" else "parallel"
        splits = f" splits {a['splits']}" if n == "netc.parallel" else ""
        ep = f" -> {name(a['endpoint'])}" if "endpoint" in a else ""
        out.append(f"{pad}{kw} {name(a['name'])}({parents}){splits}{ep} {{")
        for sub in op.regions[0].ops:
            _stmt(sub, indent + 1, out)
        out.append(f"{pad}}}")
    elif n == "netc.output":
        out.append(f"{pad}output " + ", ".join(ref(p) for p in op.attrs.get("parents", [])))
    elif n == "netc.layout":
        out.append(f"{pad}layout {value(op.attrs.get('layout', {}))}")
    else:
        opdef = lookup(n)
        typ = "Opaque" if n == "netc.opaque" else opdef.type_name
        parents = ", ".join(ref(p) for p in op.attrs.get("parents", []))
        out.append(f"{pad}{name(op.attrs['name'])} = {typ}({parents}){_attrs(op)}")


def write_nd(module, header: str | None = None) -> str:
    out = []
    if header:
        out.extend("# " + line if line else "#" for line in header.splitlines())
        out.append("")
    opt = module.attrs.get("optimizer")
    if opt:     # a SINGA job's updater, or an .nd file's optimizer: how the networks train
        rest = {k: v for k, v in opt.items() if k != "name"}
        out.append(f"optimizer {name(opt.get('name', 'sgd'))}" + (f" {value(rest)}" if rest else ""))
        out.append("")
    for op in module.body:
        if op.name == "netc.param":
            a = op.attrs
            t = a.get("type")
            ty = f": {t.dtype}[{', '.join(map(str, t.shape))}]" if isinstance(t, TensorType) and t.shape is not None else ""
            extra = {k: v for k, v in a.items() if k not in ("sym_name", "type")}
            tail = (" { " + ", ".join(f"{k}: {value(v)}" for k, v in extra.items()) + " }") if extra else ""
            out.append(f"param {name(a['sym_name'])}{ty}{tail}")
        elif op.name == "netc.network":
            out.append(f"network {name(op.attrs['sym_name'])} {{")
            for s in op.regions[0].ops:
                _stmt(s, 1, out)
            out.append("}")
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"
