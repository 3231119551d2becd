"""Print IR in MLIR's generic operation form, parseable back by netc.ir.parser:

    %conv1 = "netc.conv2d"(%data) {name = "conv1", filter = [11, 11, 3, 64], ...}
        : (tensor<128x224x224x3xf32>) -> tensor<128x54x54x64xf32> loc("alexnet.nd":7:3)

Attribute dictionaries print `name` first, then the other keys sorted (MLIR sorts them);
nested dictionaries keep their order. SSA names are derived from layer names, made valid MLIR
identifiers ('/' -> '.', '@' -> '$') and unique.
"""
from __future__ import annotations

import re

from .core import Module, Operation, SymbolRef, TensorType

_BARE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_SSA_BAD = re.compile(r"[^A-Za-z0-9_$.\-]")


def quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


def format_attr(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        r = repr(v)
        if r in ("inf", "-inf", "nan"):
            return quote(r)  # not expected in practice; kept readable
        return r if ("." in r or "e" in r) else r + ".0"
    if isinstance(v, str):
        return quote(v)
    if v is None:
        return "none"
    if isinstance(v, list) or isinstance(v, tuple):
        return "[" + ", ".join(format_attr(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{format_key(k)} = {format_attr(x)}" for k, x in v.items()) + "}"
    if isinstance(v, TensorType):
        return str(v)
    if isinstance(v, SymbolRef):
        return "@" + (v.name if _BARE_KEY.fullmatch(v.name) else quote(v.name))
    raise TypeError(f"cannot print attribute {v!r}")


def format_key(k: str) -> str:
    return k if _BARE_KEY.fullmatch(k) else quote(k)


def format_attr_dict(attrs: dict) -> str:
    keys = sorted(attrs)
    for first in ("sym_name", "name"):
        if first in attrs:
            keys.remove(first)
            keys.insert(0, first)
    return "{" + ", ".join(f"{format_key(k)} = {format_attr(attrs[k])}" for k in keys) + "}"


def format_loc(loc) -> str:
    if loc is None or loc.file == "<unknown>":
        return "loc(unknown)"
    if not loc.line:
        return f"loc({quote(loc.file)})"
    return f"loc({quote(loc.file)}:{loc.line}:{loc.col})"


class Printer:
    def __init__(self, with_locs: bool = True):
        self.with_locs = with_locs
        self.names: dict = {}
        self.used: set = set()
        self.next_suffix: dict = {}  # base name -> next suffix to try (keeps naming linear)

    def value_name(self, v) -> str:
        n = self.names.get(v)
        if n is None:
            base = v.owner.attrs.get("name") or v.owner.name.split(".")[-1]
            base = _SSA_BAD.sub("_", base.replace("/", ".").replace("@", "$"))
            if not base or base[0].isdigit() or base[0] in "-$.":
                base = "_" + base
            if len(v.owner.results) > 1:
                base = f"{base}#{v.index}"
            n, i = base, self.next_suffix.get(base, 1)
            while n in self.used:
                n = f"{base}_{i}"
                i += 1
            self.next_suffix[base] = i
            self.used.add(n)
            self.names[v] = n
        return "%" + n

    def print_op(self, op: Operation, indent: int, out: list):
        pad = "  " * indent
        head = ""
        if op.results:
            head = ", ".join(self.value_name(r) for r in op.results) + " = "
        s = f'{pad}{head}{quote(op.name)}({", ".join(self.value_name(v) for v in op.operands)})'
        if op.regions:
            out.append(s + " ({")
            for i, r in enumerate(op.regions):
                if i:
                    out.append(pad + "}, {")
                for inner in r.ops:
                    self.print_op(inner, indent + 1, out)
            s = pad + "})"
        if op.attrs:
            s += " " + format_attr_dict(op.attrs)
        ins = ", ".join(str(v.type) for v in op.operands)
        outs = ", ".join(str(v.type) for v in op.results)
        if len(op.results) != 1:
            outs = f"({outs})"
        s += f" : ({ins}) -> {outs}"
        if self.with_locs:
            s += " " + format_loc(op.loc)
        out.append(s)


def print_ir(op: Operation, with_locs: bool = True) -> str:
    out: list[str] = []
    Printer(with_locs).print_op(op, 0, out)
    return "\n".join(out) + "\n"


def print_module(m: Module, with_locs: bool = True) -> str:
    return print_ir(m, with_locs)
