"""Brainstorm's construction syntax written as .nd: one statement per Brainstorm layer, one to one.

    network mnist_pi {
      Input = Input() { out_shapes: { default: [T, B, 784], targets: [T, B, 1] } }
      Hid = FullyConnected(Input) { size: 1000, activation: rel }
      Out = SoftmaxCE(Hid, Input.targets)
      Loss = Loss(Out.loss)
    }

is Brainstorm's

    inp = Input(out_shapes={'default': ('T', 'B', 784), 'targets': ('T', 'B', 1)})
    inp >> FullyConnected(1000, activation='rel', name='Hid') >> SoftmaxCE(name='Out') >> Loss(name='Loss')
    inp - 'targets' >> 'targets' - Out

A statement is a layer: its name, its `@type` and its keyword arguments, as Brainstorm spells them. Each
parent is a connection from a layer's output (`Input.targets`; a bare `Hid` is its `default` output) into
the layer's inputs in Brainstorm's order (frontend/brainstorm.py LAYER_IO: SoftmaxCE takes default, then
targets; a Merge inputs_1, inputs_2, ...). A file is in this form when a network's statement makes an
`Input` layer (plain .nd declares inputs with `input NAME: f32[...]`, where `X = Input()` is an error). It
is read as the architecture JSON it stands for, by the same importer (frontend/brainstorm.py: Brainstorm's
shapes, time-major values, parameter names), with every location pointing into the .nd file; T and B
are the sizes the JSON form has (`--size T=N`, `--batch B`).
"""
from __future__ import annotations

import re
from functools import lru_cache

from ..diagnostics import DiagnosticEngine, Loc, NetcError

_INPUT_STMT = re.compile(r'^[ \t]*(?:"[^"\n]*"|[A-Za-z_][\w./]*)[ \t]*=[ \t]*Input[ \t]*\(', re.M)


def is_brainstorm_form(text: str) -> bool:
    """Whether .nd source makes a Brainstorm `Input` layer as a statement (`X = Input(...)`)."""
    return bool(_INPUT_STMT.search(text))


@lru_cache(maxsize=None)
def _parser():
    from lark import Lark

    from .dsl import GRAMMAR_PATH
    with open(GRAMMAR_PATH) as f:
        return Lark(f.read(), parser="lalr", lexer="basic", maybe_placeholders=True)


def _tok_loc(file, tok) -> Loc:
    return Loc(file, tok.line, tok.column)


def _name(tree) -> str:
    tok = tree.children[0]
    return tok[1:-1] if tok.type == "STRING" else str(tok)


class _Reader:
    """The parse tree of one network in this form -> (Brainstorm architecture, {JSON path: Loc})."""

    def __init__(self, file, diag):
        self.file, self.diag = file, diag

    def value(self, t):
        """A .nd value as the JSON value it stands for (names are strings: T, B, rel, ...)."""
        from lark import Token
        if isinstance(t, Token):
            return t[1:-1] if t.type == "STRING" else str(t)
        d = t.data
        if d == "int_value":
            return int(t.children[0])
        if d == "float_value":
            return float(t.children[0])
        if d == "string_value":
            return str(t.children[0])[1:-1]
        if d == "name_value":
            return str(t.children[0])
        if d in ("true_value", "false_value", "null_value"):
            return {"true_value": True, "false_value": False, "null_value": None}[d]
        if d == "list_value":
            return [self.value(c) for c in t.children if c is not None]
        if d == "attr_dict":
            return self.entries(t.children[0], None, {})[0]
        raise NetcError(f"unexpected value {d}")

    def entries(self, t, path, locs) -> tuple:
        from .jsonloc import path_join
        out = {}
        for e in t.children:
            if e is None:
                continue
            k, v = e.children
            k = k.children[0] if hasattr(k, "children") else k      # the `key` rule keeps its token
            key = str(k)[1:-1] if k.type == "STRING" else str(k)
            out[key] = self.value(v)
            if path is not None:
                locs[path_join(path, key)] = _tok_loc(self.file, k)
                if getattr(v, "data", None) == "attr_dict":     # out_shapes: each output's shape
                    for e2 in v.children[0].children:
                        if e2 is not None:
                            k2 = e2.children[0]
                            k2 = k2.children[0] if hasattr(k2, "children") else k2
                            locs[path_join(path_join(path, key), str(k2))] = _tok_loc(self.file, k2)
        return out, locs

    def named_inputs(self, attrs, lname, named, positional) -> list:
        """The `inputs` attribute: [(input name, a token standing for the source, located at the key)]."""
        from lark import Token
        entry = next(e for e in attrs.children[0].children if e is not None and
                     str(getattr(e.children[0], "children", [e.children[0]])[0]).strip('"') == "inputs")
        key = getattr(entry.children[0], "children", [entry.children[0]])[0]
        if positional or not isinstance(named, dict) or not all(
                isinstance(v, list) and all(isinstance(s, str) for s in v) for v in named.values()):
            self.diag.error(f"'inputs' of '{lname}' maps each input to its sources ({{ default: [A, B], targets: "
                            f"[Input.targets] }}), instead of parents", _tok_loc(self.file, key), width=6)
            return []
        return [(inp, Token("NAME", src, line=key.line, column=key.column))
                for inp, srcs in named.items() for src in srcs]

    def network(self, net) -> tuple:
        from .brainstorm import LAYER_IO
        from .jsonloc import path_join
        arch, locs, stmts = {}, {"$": _tok_loc(self.file, net.children[0].children[0])}, []
        for s in net.children[1:]:
            if s is None:
                continue
            if s.data != "layer_stmt":
                kw = {"input_stmt": "input", "block_stmt": "block", "parallel_stmt": "parallel",
                      "output_stmt": "output", "layout_stmt": "layout"}.get(s.data, s.data)
                first = next(s.scan_values(lambda v: hasattr(v, "line")), None)
                self.diag.error(f"'{kw}' statements are netc's own: a network written in Brainstorm's form (it makes "
                                f"an Input layer) holds Brainstorm layers only, `Name = Type(parents) {{ kwargs }}`",
                                _tok_loc(self.file, first) if first is not None else Loc(self.file))
                continue
            name_t, typ, refs, attrs = s.children
            lname = _name(name_t)
            p = path_join("$", lname)
            if lname in arch:
                self.diag.error(f"layer '{lname}' is made twice", _tok_loc(self.file, name_t.children[0]))
                continue
            locs[p] = _tok_loc(self.file, name_t.children[0])
            locs[path_join(p, "@type")] = _tok_loc(self.file, typ)
            spec = {"@type": str(typ)}
            if attrs is not None:
                kw, _ = self.entries(attrs.children[0], p, locs)
                spec.update(kw)
            spec["@outgoing_connections"] = {}
            arch[lname] = spec
            parents = [(None, r.children[0]) for r in (refs.children if refs is not None else []) if r is not None]
            named = spec.pop("inputs", None)
            if named is not None:     # inputs: { default: [A, B], targets: [Input.targets] }: a fan-in by name
                parents += self.named_inputs(attrs, lname, named, bool(parents))
            stmts.append((lname, str(typ), parents))
        for lname, typ, refs in stmts:
            ins = LAYER_IO.get(typ, (("default",), None))[0]
            for k, (given, tok) in enumerate(refs):
                src = tok[1:-1] if getattr(tok, "type", None) == "STRING" else str(tok)
                layer, out = src, "default"
                if src not in arch and "." in src and src.rsplit(".", 1)[0] in arch:
                    layer, out = src.rsplit(".", 1)
                if layer not in arch:
                    self.diag.error(f"'{src}' is no layer of this network (a parent is `Layer` or `Layer.output`)",
                                    _tok_loc(self.file, tok), width=len(src))
                    continue
                if given is not None:
                    inp = given
                elif ins is None:
                    inp = f"inputs_{k + 1}"
                elif len(ins) == 1:          # every parent into the one input: Brainstorm's fan-in, in order
                    inp = ins[0]
                elif k < len(ins):
                    inp = ins[k]
                else:
                    self.diag.error(f"{typ} '{lname}' takes {len(ins)} input{'s' * (len(ins) != 1)} "
                                    f"({', '.join(ins) or 'none'}); this is parent {k + 1}",
                                    _tok_loc(self.file, tok), width=len(src))
                    continue
                conns = arch[layer]["@outgoing_connections"].setdefault(out, [])
                ocp = path_join(path_join(path_join("$", layer), "@outgoing_connections"), out)
                locs.setdefault(ocp, _tok_loc(self.file, tok))
                locs[path_join(ocp, len(conns))] = _tok_loc(self.file, tok)
                conns.append(lname if inp == "default" else f"{lname}.{inp}")
        return arch, locs


def import_nd(text: str, file: str = "<input>", diag: DiagnosticEngine | None = None, batch: int = 1,
              time: int = 1):
    """The module of a .nd file written in Brainstorm's form (one network)."""
    from lark.exceptions import UnexpectedInput

    from ..ir.core import Module
    from .brainstorm import import_brainstorm
    from .dsl import parse_nd
    own = diag is None
    diag = diag or DiagnosticEngine()
    try:
        tree = _parser().parse(text)
    except UnexpectedInput:
        return parse_nd(text, file, diag)          # its own syntax error, located as for any .nd file
    nets = [c for c in tree.children if getattr(c, "data", None) == "network"]
    others = [c for c in tree.children if getattr(c, "data", None) != "network"]
    if others or len(nets) != 1:
        first = next((v for c in (others or nets[1:]) for v in c.scan_values(lambda v: hasattr(v, "line"))), None)
        raise NetcError("a file in Brainstorm's form holds one network and nothing else (no param, optimizer or "
                        "size declarations: T and B are --size T=N and --batch B)",
                        _tok_loc(file, first) if first is not None else Loc(file, 1, 1))
    reader = _Reader(file, diag)
    arch, locs = reader.network(nets[0])
    if diag.has_errors():
        raise NetcError(diag.diagnostics[:])
    m = import_brainstorm(text, file, diag, data=arch, locs=locs, dups=(), batch=batch, time=time)
    name = _name(nets[0].children[0])
    if isinstance(m, Module):
        for n in m.networks():
            n.attrs["sym_name"] = name
    if own and diag.has_errors():
        raise NetcError(diag.diagnostics)
    return m
