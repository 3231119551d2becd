"""The .nd frontend: grammar/netc.lark parsed by Lark's LALR parser with an inline transformer.

No parse tree is built: each grammar rule's callback builds IR directly, so parsing is linear
and cheap enough for 100k-layer files. The result is the *unresolved* IR: layers carry their
parents as names (attribute `parents`), blocks and model-parallel blocks are nested regions,
result types are unranked. Passes resolve all of that (netc/passes).

Everything the frontend can check locally (layer types, attribute schemas, phases, parameter
bindings) it checks here, collecting every error with its location.
"""
from __future__ import annotations

import os
from functools import lru_cache

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from ..diagnostics import SOURCES, DiagnosticEngine, Loc, NetcError, did_you_mean
from ..ir.core import DTYPES, UNRANKED, Module, Operation, Region, TensorType
from ..ops import by_type, layer_types, lookup
from ..ops.registry import PHASES

GRAMMAR_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                            "grammar", "netc.lark")

# How terminals are named in "expected ..." messages.
_FRIENDLY = {
    "NAME": "a name", "STRING": "a string", "INT": "an integer",
    "FLOAT": "a number", "ARROW": "'->'",
    "LBRACE": "'{'", "RBRACE": "'}'", "LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'",
    "COLON": "':'", "COMMA": "','", "EQUAL": "'='", "$END": "end of file",
}

_COMMON_KEYS = ("include", "exclude", "partition_dim", "location", "params")
_PARAM_KEYS = ("name", "share_from", "init", "std", "mean", "low", "high", "value", "lr_scale", "wd_scale")


def _loc(file, tok) -> Loc:
    return Loc(file, tok.line, tok.column)


class _Dict(dict):
    """An attribute dictionary that remembers where each key was written."""

    __slots__ = ("locs", "loc")


class _Stmt:
    """A statement's built op plus its kind (so containers can dispatch)."""


class _Builder(Transformer):
    def __init__(self, file: str, diag: DiagnosticEngine):
        super().__init__(visit_tokens=False)
        self.file = file
        self.diag = diag
        self._types = set(layer_types())

    # -- values ----------------------------------------------------------------------------
    def int_value(self, c):
        return int(c[0])

    def float_value(self, c):
        return float(c[0])

    def string_value(self, c):
        return _unquote(c[0])

    def name_value(self, c):
        return str(c[0])

    def true_value(self, c):
        return True

    def false_value(self, c):
        return False

    def null_value(self, c):
        return None

    def list_value(self, c):
        return [v for v in c if v is not None or True]

    def key(self, c):
        t = c[0]
        return Token(t.type, _unquote(t) if t.type == "STRING" else str(t), t.start_pos, t.line, t.column)

    def entry(self, c):
        return c[0], c[1]

    def entries(self, c):
        d = _Dict()
        d.locs = {}
        for item in c:
            if item is None:
                continue
            k, v = item
            loc = _loc(self.file, k)
            if k in d:
                self.diag.error(f"duplicate attribute '{k}'", loc, width=len(k)).note(
                    "first given here", d.locs[str(k)])
                continue
            d[str(k)] = v
            d.locs[str(k)] = loc
        return d

    def attr_dict(self, c):
        return c[0]

    def int_list(self, c):
        return [int(t) for t in c if t is not None]

    def tensor_type(self, c):
        loc = _loc(self.file, c[0])
        dtype = str(c[0])
        if dtype not in DTYPES:
            hint = did_you_mean(dtype, DTYPES)
            d = self.diag.error(f"unknown element type '{dtype}'", loc, width=len(dtype))
            d.note(f"did you mean '{hint}'?" if hint else "element types: " + ", ".join(DTYPES))
            dtype = "f32"
        return dtype, (c[1] if len(c) > 1 and c[1] is not None else []), loc

    def ref(self, c):
        return c[0]

    def string_ref(self, c):
        t = c[0]
        return Token("NAME", _unquote(t), t.start_pos, t.line, t.column)

    def refs(self, c):
        return [t for t in c if t is not None]

    def name(self, c):
        return c[0]

    def string_name(self, c):
        t = c[0]
        return Token("NAME", _unquote(t), t.start_pos, t.line, t.column)

    # -- statements ------------------------------------------------------------------------
    def input_stmt(self, c):
        name, (dtype, dims, tloc), attrs = c[0], c[1], c[2]
        loc = _loc(self.file, name)
        a = {"name": str(name), "shape": list(dims), "dtype": str(dtype)}
        locs = {"name": loc, "shape": tloc, "dtype": tloc}
        op = Operation("netc.input", result_types=[UNRANKED], attrs=a, loc=loc)
        if attrs:
            self._common(op, attrs, lookup("netc.input"), locs, allowed=("include", "exclude", "partition_dim", "location"))
            for k in attrs:
                if k not in _COMMON_KEYS:
                    self.diag.error(f"unknown attribute '{k}' for an input", attrs.locs[k], width=len(k)).note(
                        "inputs accept include, exclude, partition_dim and location")
        self._check_name(name, loc)
        op.attr_locs = locs
        return op

    def layer_stmt(self, c):
        name, typ, parents, attrs = c[0], c[1], c[2] or [], c[3]
        loc = _loc(self.file, name)
        tloc = _loc(self.file, typ)
        self._check_name(name, loc)
        opdef = by_type(str(typ))
        a = {"name": str(name), "parents": [str(p) for p in parents]}
        locs = {"name": loc, "type": tloc}
        for i, p in enumerate(parents):
            locs[f"parent{i}"] = _loc(self.file, p)
        if opdef is None:
            d = self.diag.error(f"unknown layer type '{typ}'", tloc, width=len(typ))
            hint = did_you_mean(str(typ), self._types)
            if hint:
                d.note(f"did you mean '{hint}'?")
            op = Operation("netc.opaque", result_types=[UNRANKED], attrs=dict(a, type=str(typ)), loc=loc)
            op.attrs["invalid"] = True
            op.attr_locs = locs
            return op
        if opdef.name == "input":
            self.diag.error("inputs are declared with `input NAME: f32[...]`, not as a layer", tloc, width=len(typ))
        op = Operation(opdef.ir_name, result_types=[UNRANKED], attrs=a, loc=loc)
        op.attr_locs = locs
        if attrs:
            self._common(op, attrs, opdef, locs)
            for k, v in attrs.items():
                if k in _COMMON_KEYS:
                    continue
                op.attrs[k] = v
                locs[k] = attrs.locs[k]
        # arity is checked against the parents list here when it is syntactically evident: too
        # many parents only, since one name may stand for several inputs (a parallel block's
        # endpoint, X@all); too few is left to shape-inference, which sees the expanded list
        lo, hi = opdef.arity
        n = len(parents)
        invalid = False
        if n and hi is not None and n > hi and not any("@" in str(p) for p in parents):
            want = f"{lo}" if lo == hi else f"{lo} to {hi}"
            self.diag.error(f"{opdef.type_name} takes {want} input{'s' if want != '1' else ''}, got {n}", tloc,
                            width=len(typ))
            invalid = True
        for key, msg, hint in opdef.check_attrs(op.attrs):
            d = self.diag.error(msg, locs.get(key, tloc) if key else tloc, width=len(key) if key else len(typ))
            if hint:
                d.note(hint)
            invalid = True
        if invalid:  # set after check_attrs, which would report 'invalid' as an unknown attribute
            op.attrs["invalid"] = True
        return op

    def block_stmt(self, c):
        name, parents, arrow, endpoint, body = c[0], c[1] or [], c[2], c[3], c[4:]
        return self._container("netc.block", name, parents, endpoint, body, {})

    def parallel_stmt(self, c):
        name, parents, splits, arrow, endpoint, body = c[0], c[1] or [], c[2], c[3], c[4], c[5:]
        n = int(splits)
        if n < 1:
            self.diag.error(f"splits must be at least 1, got {n}", _loc(self.file, splits))
            n = 1
        return self._container("netc.parallel", name, parents, endpoint, body, {"splits": n})

    def _container(self, opname, name, parents, endpoint, body, extra):
        loc = _loc(self.file, name)
        self._check_name(name, loc)
        a = {"name": str(name), "parents": [str(p) for p in parents], **extra}
        if endpoint is not None:
            a["endpoint"] = str(endpoint)
        op = Operation(opname, attrs=a, regions=[Region([s for s in body if s is not None])], loc=loc)
        op.attr_locs = {"name": loc, **{f"parent{i}": _loc(self.file, p) for i, p in enumerate(parents)}}
        if endpoint is not None:
            op.attr_locs["endpoint"] = _loc(self.file, endpoint)
        return op

    def output_stmt(self, c):
        refs = c[0]
        loc = _loc(self.file, refs[0])
        op = Operation("netc.output", attrs={"parents": [str(r) for r in refs]}, loc=loc)
        op.attr_locs = {f"parent{i}": _loc(self.file, p) for i, p in enumerate(refs)}
        return op

    def layout_stmt(self, c):
        d = c[0]
        first = next(iter(d.locs.values()), None)
        op = Operation("netc.layout", attrs={"layout": dict(d)}, loc=first or Loc(self.file))
        op.attr_locs = dict(d.locs)
        return op

    def network(self, c):
        name, body = c[0], [s for s in c[1:] if s is not None]
        loc = _loc(self.file, name)
        return Operation("netc.network", attrs={"sym_name": str(name)}, regions=[Region(body)], loc=loc)

    def param_decl(self, c):
        name, tt, attrs = c[0], c[1], c[2]
        loc = _loc(self.file, name)
        a = {"sym_name": str(name)}
        if tt is not None:
            a["type"] = TensorType(tt[1], str(tt[0]))
        op = Operation("netc.param", attrs=a, loc=loc)
        op.attr_locs = {"sym_name": loc}
        if attrs:
            for k, v in attrs.items():
                if k not in _PARAM_KEYS or k == "name":
                    hint = did_you_mean(k, _PARAM_KEYS[1:])
                    d = self.diag.error(f"unknown parameter attribute '{k}'", attrs.locs[k], width=len(k))
                    d.note(f"did you mean '{hint}'?" if hint else "valid: " + ", ".join(_PARAM_KEYS[1:]))
                    continue
                op.attrs[k] = v
                op.attr_locs[k] = attrs.locs[k]
        return op

    def start(self, c):
        return Module([op for op in c if op is not None], loc=Loc(self.file, 1, 1))

    # -- helpers ---------------------------------------------------------------------------
    def _check_name(self, tok, loc):
        if "@" in str(tok):
            self.diag.error(f"layer names cannot contain '@' (it marks a split index): '{tok}'", loc, width=len(tok))

    def _common(self, op, attrs, opdef, locs, allowed=_COMMON_KEYS):
        """Validate and move the layer attributes every op accepts (phases, partitioning, params)."""
        inc = attrs.get("include")
        exc = attrs.get("exclude")
        for key in ("include", "exclude"):
            if key not in attrs:
                continue
            v = attrs[key]
            vals = v if isinstance(v, list) else [v]
            good = []
            for p in vals:
                if p not in PHASES:
                    hint = did_you_mean(str(p), PHASES)
                    d = self.diag.error(f"'{key}' expects a phase ({', '.join(PHASES)}), got {_show(p)}",
                                        attrs.locs[key], width=len(key))
                    if hint:
                        d.note(f"did you mean '{hint}'?")
                else:
                    good.append(p)
            op.attrs[key] = good
            locs[key] = attrs.locs[key]
        if inc is not None and exc is not None:
            self.diag.error("a layer cannot use both 'include' and 'exclude'", attrs.locs["exclude"], width=7).note(
                "'include' given here", attrs.locs["include"])
        if "partition_dim" in attrs:
            v = attrs["partition_dim"]
            if v not in (-1, 0, 1) or isinstance(v, bool):
                self.diag.error(f"'partition_dim' must be -1, 0 or 1, got {_show(v)}", attrs.locs["partition_dim"],
                                width=13)
            else:
                op.attrs["partition_dim"] = v
                locs["partition_dim"] = attrs.locs["partition_dim"]
        if "location" in attrs:
            v = attrs["location"]
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                self.diag.error(f"'location' must be a worker index >= 0, got {_show(v)}", attrs.locs["location"],
                                width=8)
            else:
                op.attrs["location"] = v
                locs["location"] = attrs.locs["location"]
        if "params" in attrs and "params" in allowed:
            self._params(op, attrs["params"], opdef, attrs.locs["params"], locs)

    def _params(self, op, v, opdef, loc, locs):
        if not isinstance(v, dict):
            self.diag.error("'params' must be a dictionary {role: name, ...}", loc, width=6)
            return
        roles = opdef.param_roles
        if not roles:
            self.diag.error(f"{opdef.type_name} has no parameters to bind", loc, width=6)
            return
        out = {}
        for role, spec in v.items():
            rloc = v.locs[role] if isinstance(v, _Dict) else loc
            if role not in roles:
                hint = did_you_mean(role, roles)
                self.diag.error(f"{opdef.type_name} has no parameter '{role}'", rloc, width=len(role)).note(
                    f"did you mean '{hint}'?" if hint else "its parameters are: " + ", ".join(roles))
                continue
            if isinstance(spec, str):
                out[role] = {"name": spec}
            elif isinstance(spec, dict):
                bad = [k for k in spec if k not in _PARAM_KEYS]
                for k in bad:
                    kloc = spec.locs[k] if isinstance(spec, _Dict) else rloc
                    hint = did_you_mean(k, _PARAM_KEYS)
                    self.diag.error(f"unknown parameter attribute '{k}'", kloc, width=len(k)).note(
                        f"did you mean '{hint}'?" if hint else "valid: " + ", ".join(_PARAM_KEYS))
                if "name" not in spec or not isinstance(spec["name"], str):
                    self.diag.error(f"parameter '{role}' needs a 'name'", rloc, width=len(role))
                    continue
                if "share_from" in spec and not isinstance(spec["share_from"], str):
                    self.diag.error("'share_from' must name a parameter", rloc, width=len(role))
                    continue
                out[role] = {k: spec[k] for k in spec if k in _PARAM_KEYS}
            else:
                self.diag.error(f"parameter '{role}' must be a name or {{name: ..., share_from: ...}}", rloc,
                                width=len(role))
                continue
            locs[f"param.{role}"] = rloc
        op.attrs["params"] = out
        locs["params"] = loc


def _show(v):
    return f"'{v}'" if isinstance(v, str) else str(v)


def _unquote(tok) -> str:
    s = str(tok)[1:-1]
    if "\\" not in s:
        return s
    return bytes(s, "utf-8").decode("unicode_escape")


@lru_cache(maxsize=None)
def _grammar_text() -> str:
    with open(GRAMMAR_PATH) as f:
        return f.read()


@lru_cache(maxsize=None)
def _parser():
    """One LALR parser per process; its inline transformer is re-pointed at each file."""
    builder = _Builder("<input>", DiagnosticEngine())
    parser = Lark(_grammar_text(), parser="lalr", lexer="basic", transformer=builder,
                  maybe_placeholders=True, cache=_cache_path())
    return parser, builder


def parse_nd(text: str, file: str = "<input>", diag: DiagnosticEngine | None = None) -> Module:
    """Parse .nd source into unresolved IR. Syntax errors raise NetcError; other problems are
    collected into `diag` (raise at the end if any)."""
    SOURCES.add(file, text)
    own = diag is None
    diag = diag or DiagnosticEngine()
    parser, builder = _parser()
    builder.file, builder.diag = file, diag
    try:
        module = parser.parse(text)
    except UnexpectedInput as e:
        raise NetcError([_syntax_diag(e, file, text)])
    except VisitError as e:  # a callback failed: that is netc's bug, not the user's
        raise e.orig_exc
    module.attrs["source"] = file
    if own and diag.has_errors():
        raise NetcError(diag.diagnostics)
    return module


def _cache_path():
    d = os.environ.get("NETC_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "netc")
    try:
        os.makedirs(d, exist_ok=True)
        return os.path.join(d, "grammar-lalr.cache")
    except OSError:
        return False


def _syntax_diag(e: UnexpectedInput, file: str, text: str):
    from ..diagnostics import Diagnostic
    if isinstance(e, UnexpectedCharacters):
        ch = text[e.pos_in_stream] if e.pos_in_stream < len(text) else ""
        msg = f"unexpected character {ch!r}"
        return Diagnostic("error", msg, Loc(file, e.line, e.column))
    if isinstance(e, UnexpectedEOF) or (isinstance(e, UnexpectedToken) and e.token.type == "$END"):
        lines = text.split("\n")
        line = len(lines)
        while line > 1 and not lines[line - 1].strip():
            line -= 1
        col = len(lines[line - 1]) + 1 if lines else 1
        exp = _expected(getattr(e, "expected", None) or getattr(e, "accepts", None) or set())
        return Diagnostic("error", f"unexpected end of file{', expected ' + exp if exp else ''}", Loc(file, line, col))
    tok = e.token
    exp = _expected(e.accepts or e.expected)
    shown = str(tok) if tok.type != "$END" else "end of file"
    d = Diagnostic("error", f"unexpected {_FRIENDLY.get(tok.type, repr(shown)) if tok.type in ('$END',) else repr(shown)}"
                   f"{', expected ' + exp if exp else ''}", Loc(file, tok.line, tok.column), width=max(1, len(shown)))
    if tok.type == "NAME" and str(tok) in ("layer", "net", "neuralnet"):
        d.note("layers are written `name = Type(parents) { key: value }`")
    return d


def _expected(names) -> str:
    names = sorted(set(names))
    shown = []
    for n in names:
        if n in _FRIENDLY:
            shown.append(_FRIENDLY[n])
        elif n.startswith("__ANON") or n.isupper() and len(n) > 1 and n not in _FRIENDLY:
            shown.append(f"'{n.lower()}'")
        else:
            shown.append(n)
    shown = sorted(set(shown))
    if len(shown) > 6:
        shown = shown[:6] + ["..."]
    return " or ".join(shown)
