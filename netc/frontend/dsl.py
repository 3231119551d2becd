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
import re
from functools import lru_cache

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from ..diagnostics import SOURCES, Diagnostic, DiagnosticEngine, Loc, NetcError, did_you_mean, gc_paused
from ..ir.core import DTYPES, UNRANKED, Module, Operation, Region, TensorType, copy_attr
from ..ir.query import MAX_SPLITS, split_ref_problem  # noqa: F401  (MAX_SPLITS: each split copies the block)
from ..ir.verifier import param_number_problem
from ..ops import by_type, layer_types, lookup
from ..ops.registry import PHASES

# package data (pyproject.toml), so an installed netc has it; grammar/netc.lark at the repository's
# root is a link to it
GRAMMAR_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "grammar", "netc.lark")

_BAD_DIM = object()   # a shape's unknown size (reported where it is written)

# How terminals are named in "expected ..." messages.
_FRIENDLY = {
    "NAME": "a name", "STRING": "a string", "INT": "an integer",
    "FLOAT": "a number", "ARROW": "'->'", "SIZE": "'size'",
    "LBRACE": "'{'", "RBRACE": "'}'", "LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'",
    "COLON": "':'", "COMMA": "','", "EQUAL": "'='", "$END": "end of file",
}

# Attribute keys a layer statement may not set: the statement's own syntax (or netc) does,
# unless the op declares the key itself (Opaque's `type`).
_RESERVED_KEYS = {
    "name": "a layer's name is written before '=', not as an attribute",
    "parents": "a layer's parents are written in parentheses after its type, not as an attribute",
    "split_index": "'split_index' is set by netc (parallel blocks) and cannot be given as an attribute",
    "type": "'type' is set by netc and cannot be given as an attribute; the layer type comes after '='",
    "invalid": "'invalid' is set by netc and cannot be given as an attribute",
}
_COMMON_KEYS = ("include", "exclude", "partition_dim", "location", "params")
# Blocks, lists and dictionaries nest at most this deep: passes and printers walk nested regions
# and values recursively, and a real network nests a few levels (Inception: 3), so deeper is a
# mistake (or a generated file gone wrong), reported rather than overflowing Python's stack.
MAX_NESTING = 100
_PARAM_KEYS = ("name", "share_from", "init", "std", "mean", "low", "high", "value", "fan_in", "fan_out", "lr_scale",
               "wd_scale",
               "immutable", "sparse_update")
_PARAM_FLAGS = ("immutable", "sparse_update")   # true or false


def _loc(file, tok) -> Loc:
    return Loc(file, tok.line, tok.column)


class _Dict(dict):
    """An attribute dictionary that remembers where each key was written."""

    __slots__ = ("locs", "loc")


class _Refs(list):
    """A statement's parent references; `dropped` when a malformed one was reported and left out."""

    dropped = False


class _Stmt:
    """A statement's built op plus its kind (so containers can dispatch)."""


class _OptimizerDecl:
    """An `optimizer` item: its spec (None when it had errors) and where it was written."""

    def __init__(self, loc):
        self.loc, self.spec = loc, None


class _Builder(Transformer):
    def __init__(self, file: str, diag: DiagnosticEngine):
        super().__init__(visit_tokens=False)
        self.file = file
        self.diag = diag
        self.depth: dict[int, tuple] = {}  # id -> (block or value, its nesting depth), when nested
        self._types = set(layer_types())
        self.reset_sizes({})

    def reset_sizes(self, overrides: dict) -> None:
        """Before a file: no sizes declared yet; `overrides` ({name: N}, --size) replace declared ones."""
        self.sizes: dict[str, int] = {}
        self.size_locs: dict[str, Loc] = {}
        self.sizes_used: set[str] = set()
        self.size_overrides = dict(overrides)

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
        return self._nest(list(c), c)

    def key(self, c):
        t = c[0]
        return Token(t.type, _unquote(t) if t.type == "STRING" else str(t), t.start_pos, t.line, t.column)

    def entry(self, c):
        if self._depth_of(c[1]) > MAX_NESTING:
            raise NetcError(f"the value of '{c[0]}' is nested more than {MAX_NESTING} levels deep",
                            _loc(self.file, c[0]))
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
        return self._nest(d, d.values())

    def attr_dict(self, c):
        return c[0]

    def dim_list(self, c):
        return [t if isinstance(t, int) or t is _BAD_DIM else int(t) for t in c if t is not None]

    def size_ref(self, c):
        """A named size in a shape: its value (declared above with `size NAME = N`, or --size NAME=N)."""
        t = c[0]
        if str(t) in self.sizes:
            self.sizes_used.add(str(t))
            return self.sizes[str(t)]
        hint = did_you_mean(str(t), list(self.sizes))
        d = self.diag.error(f"unknown size '{t}' (a shape holds integers and sizes declared before it with "
                            f"`size {t} = N`)", _loc(self.file, t), width=len(str(t)))
        if hint:
            d.note(f"did you mean '{hint}'?")
        return _BAD_DIM

    def size_decl(self, c):
        """`size NAME = N`: a named size; --size NAME=N (the overrides) replaces N."""
        kw, name, value = c
        loc = _loc(self.file, name)
        n = int(value)
        if str(name) in self.size_locs:
            self.diag.error(f"size '{name}' is declared twice", loc, width=len(str(name))).note(
                "first declared here", self.size_locs[str(name)])
            return None
        self.size_locs[str(name)] = loc
        if str(name) in self.size_overrides:
            n = self.size_overrides[str(name)]
        elif n < 1:
            self.diag.error(f"size '{name}' must be a positive integer, got {n}", _loc(self.file, value),
                            width=len(str(value)))
            n = 1
        self.sizes[str(name)] = n
        return None

    def keyword_name(self, c):
        t = c[0]
        return Token("NAME", str(t), t.start_pos, t.line, t.column)

    keyword_ref = keyword_name

    def tensor_type(self, c):
        loc = _loc(self.file, c[0])
        dtype = str(c[0])
        if dtype not in DTYPES:
            hint = did_you_mean(dtype, DTYPES)
            d = self.diag.error(f"unknown element type '{dtype}'", loc, width=len(dtype))
            d.note(f"did you mean '{hint}'?" if hint else "element types: " + ", ".join(DTYPES))
            dtype = "f32"
        dims = c[1] if len(c) > 1 and c[1] is not None else []
        return dtype, [1 if d is _BAD_DIM else d for d in dims], loc, _BAD_DIM in dims

    def ref(self, c):
        return c[0]

    def string_ref(self, c):
        t = c[0]
        return Token("NAME", _unquote(t), t.start_pos, t.line, t.column)

    def refs(self, c):
        # names are well-formed by the grammar; a quoted reference may carry any '@' suffix, so it
        # is checked here, where it is written, and left out (the statement is then marked invalid)
        out = _Refs()
        for t in c:
            if t is None:
                continue
            problem = split_ref_problem(str(t))
            if problem:
                self.diag.error(problem, _loc(self.file, t), width=len(str(t)) + 2)
                out.dropped = True
                continue
            out.append(t)
        return out

    def name(self, c):
        return c[0]

    def string_name(self, c):
        t = c[0]
        return Token("NAME", _unquote(t), t.start_pos, t.line, t.column)

    # -- statements ------------------------------------------------------------------------
    def input_stmt(self, c):
        name, (dtype, dims, tloc, bad), attrs = c[0], c[1], c[2]
        loc = _loc(self.file, name)
        a = {"name": str(name), "shape": list(dims), "dtype": str(dtype)}
        locs = {"name": loc, "shape": tloc, "dtype": tloc}
        op = Operation("netc.input", result_types=[UNRANKED], attrs=a, loc=loc)
        if bad:   # an unknown size, reported: the layers reading it are not checked against a made-up shape
            op.attrs["invalid"] = True
        if attrs:
            self._common(op, attrs, lookup("netc.input"), locs, allowed=("include", "exclude", "partition_dim", "location"))
            for k in attrs:
                if k == "batch_axis":   # the samples' axis: 1 for a time-major sequence (ops/tensor.py Input)
                    if attrs[k] in (0, 1) and not isinstance(attrs[k], bool):
                        op.attrs[k] = attrs[k]
                        locs[k] = attrs.locs[k]
                    else:
                        self.diag.error(f"'batch_axis' must be 0 or 1 (a time-major sequence), got {_show(attrs[k])}",
                                        attrs.locs[k], width=len(k))
                elif k == "whole":   # kept whole on every partition (a SINGA kDummy input: ops/tensor.py Input)
                    if isinstance(attrs[k], bool):
                        op.attrs[k] = attrs[k]
                        locs[k] = attrs.locs[k]
                    else:
                        self.diag.error(f"'whole' must be true or false, got {_show(attrs[k])}", attrs.locs[k],
                                        width=len(k))
                elif k not in _COMMON_KEYS or k == "params":
                    self.diag.error(f"unknown attribute '{k}' for an input", attrs.locs[k], width=len(k)).note(
                        "inputs accept include, exclude, partition_dim, location, whole and batch_axis")
        self._check_name(name, loc)
        op.attr_locs = locs
        return op

    def layer_stmt(self, c):
        name, typ, parents, attrs = c[0], c[1], (c[2] if c[2] is not None else []), c[3]
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
        invalid = getattr(parents, "dropped", False)  # a malformed parent, reported by refs()
        if attrs:
            self._common(op, attrs, opdef, locs)
            for k, v in attrs.items():
                if k in _COMMON_KEYS:
                    continue
                if (k in _RESERVED_KEYS and k not in opdef.attrs) or (k == "splits" and (type(v) is not int or v < 1)):
                    # these would silently overwrite what the statement itself says (or netc's own)
                    self.diag.error(_RESERVED_KEYS.get(k, f"'splits' must be a positive integer, got {_show(v)}"),
                                    attrs.locs[k], width=len(k))
                    invalid = True
                    continue
                op.attrs[k] = v
                locs[k] = attrs.locs[k]
        # arity is checked against the parents list here when it is syntactically evident: too
        # many parents only, since one name may stand for several inputs (a parallel block's
        # endpoint, X@all); too few is left to shape-inference, which sees the expanded list
        lo, hi = opdef.arity
        n = len(parents)
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
        if not 1 <= n <= MAX_SPLITS:  # each split is a copy of the block's layers
            self.diag.error(f"splits must be between 1 and {MAX_SPLITS}, got {n}", _loc(self.file, splits),
                            width=len(splits))
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
        return self._nest(op, op.regions[0].ops)

    def output_stmt(self, c):
        refs = c[0]
        loc = _loc(self.file, refs[0])
        op = Operation("netc.output", attrs={"parents": [str(r) for r in refs]}, loc=loc)
        op.attr_locs = {f"parent{i}": _loc(self.file, p) for i, p in enumerate(refs)}
        return op

    def layout_stmt(self, c):
        d = c[1]
        loc = _loc(self.file, c[0])  # the keyword: where the section starts, even an empty one
        op = Operation("netc.layout", attrs={"layout": dict(d)}, loc=loc)
        op.attr_locs = dict(d.locs)
        # check the section is a well-formed Brainstorm layout (W1-W4 of the layout spec)
        from .layout import LayoutError, read_layout
        try:
            read_layout(copy_attr(d))
        except LayoutError as e:
            for path, msg in e.problems:
                where = _dict_loc(d, path) or loc
                self.diag.error(f"layout {path}: {msg}", where)
        return op

    def network(self, c):
        name, body = c[0], [s for s in c[1:] if s is not None]
        loc = _loc(self.file, name)
        for s in body:
            if self._depth_of(s) > MAX_NESTING:  # stop here: the passes would recurse that deep
                raise NetcError(Diagnostic("error", f"blocks are nested {self._depth_of(s)} levels deep here; "
                                           f"netc allows at most {MAX_NESTING}", s.loc,
                                           width=len(s.attrs.get("name", "x"))))
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
                if k == "share_from" and not isinstance(v, str):
                    self.diag.error(f"'share_from' must name a parameter, got {_show(v)}", attrs.locs[k], width=len(k))
                    continue
                if k in _PARAM_FLAGS and not isinstance(v, bool):
                    self.diag.error(f"'{k}' is true or false, got {_show(v)}", attrs.locs[k], width=len(k))
                    continue
                if _bad_param_number(k, v):
                    self.diag.error(_bad_param_number(k, v), attrs.locs[k], width=len(k))
                    continue
                op.attrs[k] = v
                op.attr_locs[k] = attrs.locs[k]
        return op

    def optimizer_decl(self, c):
        """`optimizer NAME { options }`: the module's optimizer (what a SINGA job's updater records),
        checked as the optimizer pass resolves it (ops/optim.py), an error located at the option at
        fault; an 'lr' becomes a fixed schedule."""
        from ..ops.optim import OptimizerError, resolve_optimizer
        kw, name, attrs = c[0], c[1], c[2] or _Dict()
        locs = getattr(attrs, "locs", {})
        decl = _OptimizerDecl(_loc(self.file, kw))
        spec = {"name": str(name), **{k: (dict(v) if isinstance(v, dict) else v) for k, v in attrs.items()
                                      if v is not None}}
        try:
            resolve_optimizer(None, spec)
        except OptimizerError as e:
            at = e.key if e.key in locs else None
            self.diag.error(e.diagnostics[0].message, locs[at] if at else _loc(self.file, name),
                            width=len(at or name))
            return decl
        if "lr" in spec:
            spec["schedule"] = {"type": "fixed", "base_lr": float(spec.pop("lr"))}
        decl.spec = {k: float(v) if isinstance(v, int) and not isinstance(v, bool) else v for k, v in spec.items()}
        return decl

    def start(self, c):
        ops, seen = [], {}
        optimizer = None
        for op in c:
            if op is None:
                continue
            if isinstance(op, _OptimizerDecl):
                if optimizer is not None:
                    self.diag.error("the optimizer is declared twice (one per file: it trains every network of "
                                    "it)", op.loc, width=len("optimizer")).note("first declared here", optimizer.loc)
                else:
                    optimizer = op
                continue
            key = (op.name, op.attrs.get("sym_name"))
            if key in seen:  # reported and dropped: a second one would only cause later confusion
                what = "network" if op.name == "netc.network" else "parameter"
                self.diag.error(f"{what} '{key[1]}' is declared twice", op.loc, width=max(1, len(key[1]))).note(
                    "first declared here", seen[key].loc)
                continue
            seen[key] = op
            ops.append(op)
        m = Module(ops, loc=Loc(self.file, 1, 1))
        if optimizer is not None and optimizer.spec is not None:
            m.attrs["optimizer"] = optimizer.spec
            m.attr_locs = {"optimizer": optimizer.loc}
        return m

    # -- helpers ---------------------------------------------------------------------------
    def _depth_of(self, v) -> int:
        """Nesting depth: 0 for scalars and layers, 1 for flat lists and dictionaries."""
        if isinstance(v, (list, dict, Operation)):
            return self.depth.get(id(v), (None, 0 if isinstance(v, Operation) else 1))[1]
        return 0

    def _nest(self, v, children):
        """Record the depth of a block, or of a list or dictionary holding nested ones."""
        d = 1 + max((self._depth_of(x) for x in children), default=0)
        if d > 1 or isinstance(v, Operation):
            self.depth[id(v)] = (v, d)  # keeps v alive, so its id is not reused during the parse
        return v

    def _check_name(self, tok, loc):
        if not str(tok):
            self.diag.error("names cannot be empty", loc, width=2)
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
                flag = next((k for k in _PARAM_FLAGS if k in spec and not isinstance(spec[k], bool)), None)
                if flag is not None:
                    kloc = spec.locs[flag] if isinstance(spec, _Dict) else rloc
                    self.diag.error(f"'{flag}' is true or false, got {_show(spec[flag])}", kloc, width=len(flag))
                    continue
                numbers = [k for k in spec if _bad_param_number(k, spec[k])]
                for k in numbers:
                    kloc = spec.locs[k] if isinstance(spec, _Dict) else rloc
                    self.diag.error(_bad_param_number(k, spec[k]), kloc, width=len(k))
                if numbers:
                    continue
                out[role] = {k: spec[k] for k in spec if k in _PARAM_KEYS}
                if "share_from" in spec and isinstance(spec, _Dict):
                    locs[f"param.{role}.share_from"] = spec.locs["share_from"]
            else:
                self.diag.error(f"parameter '{role}' must be a name or {{name: ..., share_from: ...}}", rloc,
                                width=len(role))
                continue
            locs[f"param.{role}"] = rloc
        op.attrs["params"] = out
        locs["params"] = loc


def _bad_param_number(k, v) -> str | None:
    """The error for a parameter attribute that must be a finite number (or, `init`, one of the
    initializers of ops/initializers.py), or None."""
    if k == "init":
        from ..ops.initializers import INITS
        if v in INITS:
            return None
        hint = did_you_mean(str(v), INITS)
        return (f"unknown init {_show(v)}" + (f"; did you mean '{hint}'?" if hint else "")
                + f" (inits: {', '.join(INITS)})")
    return param_number_problem(k, v)


def _dict_loc(d, path: str):
    """The source location of the deepest key of a JSON path ($.a.b[0]) inside a layout section."""
    import re
    loc = None
    for key in re.findall(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[\"([^\"]*)\"\]|\[(\d+)\]", path):
        k = key[0] or key[1]
        if key[2] or not isinstance(d, dict) or k not in d:
            break
        loc = getattr(d, "locs", {}).get(k, loc)
        d = d[k]
    return loc


def _show(v):
    return f"'{v}'" if isinstance(v, str) else str(v)


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "0": "\0"}
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)")


def _unquote(tok) -> str:
    """The text of a string literal: JSON's escapes (and \\0); any other escaped character
    stands for itself (so a malformed escape is not a crash, and non-ASCII text is kept)."""
    s = str(tok)[1:-1]
    if "\\" not in s:
        return s
    return _ESCAPE.sub(lambda m: chr(int(m.group(1)[1:], 16)) if len(m.group(1)) == 5
                       else _ESCAPES.get(m.group(1), m.group(1)), s)


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


def parse_nd(text: str, file: str = "<input>", diag: DiagnosticEngine | None = None,
             sizes: dict | None = None) -> Module:
    """Parse .nd source into unresolved IR. Syntax errors raise NetcError; other problems are
    collected into `diag` (raise at the end if any). `sizes` ({name: N}, the CLI's --size) replaces
    the values of the file's `size NAME = N` declarations; a name the file does not declare is an error."""
    if text.startswith("\ufeff"):  # a UTF-8 byte order mark (some Windows editors write one)
        text = text[1:]
    SOURCES.add(file, text)
    own = diag is None
    diag = diag or DiagnosticEngine()
    parser, builder = _parser()
    builder.file, builder.diag, builder.depth = file, diag, {}
    builder.reset_sizes(sizes or {})
    try:
        with gc_paused():
            module = parser.parse(text)
        for name in sorted(set(sizes or {}) - set(builder.sizes)):
            declared = ", ".join(sorted(builder.sizes)) or "none"
            diag.error(f"--size {name}={sizes[name]}: {file} declares no size '{name}' (its sizes: {declared})",
                       Loc(file))
    except UnexpectedInput as e:
        raise NetcError([_syntax_diag(e, file, text)])
    except VisitError as e:  # a callback failed: that is netc's bug, not the user's
        raise e.orig_exc
    finally:
        builder.depth = {}  # it holds this file's blocks and values alive
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
        if ch == '"' and not re.match(r'"([^"\\\n]|\\.)*"', text[e.pos_in_stream:]):
            return Diagnostic("error", "unterminated string (a string must close on the line it starts)",
                              Loc(file, e.line, e.column))
        d = Diagnostic("error", f"unexpected character {ch!r}", Loc(file, e.line, e.column))
        if ch == ";":
            d.note("statements need no ';' between them")
        elif not ch.isascii() and ch.isalnum():
            d.note("names are ASCII letters, digits, '_', '.' and '/'; write other names in quotes: \"name\"")
        return d
    if isinstance(e, UnexpectedEOF) or (isinstance(e, UnexpectedToken) and e.token.type == "$END"):
        lines = text.split("\n")
        line = len(lines)
        while line > 1 and not lines[line - 1].strip():
            line -= 1
        col = len(lines[line - 1]) + 1 if lines else 1
        exp = _expected(getattr(e, "expected", None) or getattr(e, "accepts", None) or set())
        d = Diagnostic("error", f"unexpected end of file{', expected ' + exp if exp else ''}", Loc(file, line, col))
        _note_unclosed(d, file, text)
        return d
    tok = e.token
    exp = _expected(e.accepts or e.expected)
    shown = str(tok) if tok.type != "$END" else "end of file"
    d = Diagnostic("error", f"unexpected {_FRIENDLY.get(tok.type, repr(shown)) if tok.type in ('$END',) else repr(shown)}"
                   f"{', expected ' + exp if exp else ''}", Loc(file, tok.line, tok.column), width=max(1, len(shown)))
    before = text[:tok.start_pos].rsplit("\n", 1)[-1].split() if tok.start_pos is not None else []
    if (tok.type == "NAME" and str(tok) in ("layer", "layers", "net", "neuralnet")) or (
            before and before[-1] in ("layer", "layers", "net", "neuralnet")):
        d.note("layers are written `name = Type(parents) { key: value }`")
    elif tok.type in _NAME_LIKE_KEYWORDS and "NAME" in (e.accepts or e.expected or ()):
        d.note(f"'{tok}' is a keyword; to use it as a name, write it in quotes: \"{tok}\"")
    return d


_STATEMENT_KEYWORDS = {"INPUT", "BLOCK", "PARALLEL", "OUTPUT", "LAYOUT"}
_NAME_LIKE_KEYWORDS = {"NETWORK", "INPUT", "BLOCK", "PARALLEL", "SPLITS", "OUTPUT", "LAYOUT", "PARAM", "OPTIMIZER",
                       "TRUE", "FALSE", "NULL", "SIZE"}


def _expected(names) -> str:
    names = set(names)
    lead = []
    if _STATEMENT_KEYWORDS <= names:
        # the start of a statement: say so instead of listing every keyword
        names -= _STATEMENT_KEYWORDS | {"NAME", "STRING", "SIZE"}
        lead.append("a statement")
    elif {"INT", "FLOAT", "STRING", "NAME", "LSQB"} <= names:
        names -= {"INT", "FLOAT", "STRING", "NAME", "LSQB", "LBRACE", "TRUE", "FALSE", "NULL", "SIZE"}
        lead.append("a value")
    elif "NAME" in names:
        names -= _NAME_LIKE_KEYWORDS  # where a name fits, keywords are just names (attribute keys)
    shown = []
    for n in sorted(names):
        if n in _FRIENDLY:
            shown.append(_FRIENDLY[n])
        elif n.startswith("__ANON") or n.isupper() and len(n) > 1 and n not in _FRIENDLY:
            shown.append(f"'{n.lower()}'")
        else:
            shown.append(n)
    shown = lead + sorted(set(shown) - set(lead))
    if len(shown) > 6:
        shown = shown[:6] + ["..."]
    return " or ".join(shown)


def _note_unclosed(d, file: str, text: str):
    """At an unexpected end of file, point at the '{', '[' or '(' left open. Counting finds the
    outermost one still open; a closing bracket indented unlike its opener's line usually marks
    where the real omission is, so that opener is preferred."""
    pairs, stack = [], []
    line, col, i, n = 1, 1, 0, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line, col, i = line + 1, 1, i + 1
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] not in '"\n':
                j += 2 if text[j] == "\\" else 1
            col, i = col + (j - i + 1), j + 1
            continue
        if c == "#" or text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            col, i = col + (j - i), j
            continue
        if c in "{[(":
            stack.append((c, line, col))
        elif c in "}])" and stack:
            pairs.append((stack.pop(), (line, col)))
        col, i = col + 1, i + 1
    if not stack:
        return
    lines = text.split("\n")

    def indent(ln):
        s = lines[ln - 1]
        return len(s) - len(s.lstrip())

    for (c, ol, oc), (cl, cc) in sorted(pairs, key=lambda p: (p[0][1], p[0][2])):
        if c == "{" and cl != ol and lines[cl - 1].lstrip().startswith("}") and indent(cl) < indent(ol):
            d.note(f"this '{{' is probably the one never closed: the '}}' on line {cl} that matches it by "
                   f"count is indented less", Loc(file, ol, oc))
            return
    c, ol, oc = stack[-1]
    d.note(f"'{c}' opened here is never closed", Loc(file, ol, oc))
