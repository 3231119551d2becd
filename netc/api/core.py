"""The core of the layer builders: `Layer` (one layer of a topology), `ParamAttr` (how a parameter is
named, initialized and trained) and `make_layer`, which checks a layer against its op's schema and shape
rule on the spot and records where the user made it. netc.api.layer's builders (and
netc.api.sequence's) are made of these; netc.api.layer re-exports them.
"""
from __future__ import annotations

import functools
import itertools
import warnings
from collections import defaultdict
from dataclasses import dataclass, fields

from ..diagnostics import Loc, did_you_mean, render
from ..ops import all_ops, by_type
from ..ops.registry import COMMON_ATTRS, PHASES, ShapeError, result_dtype
from .errors import Error, error, user_loc

_ORDER = itertools.count()                  # creation order: topological by construction
AUTO = defaultdict(lambda: itertools.count(1))
COMMON = ("include", "exclude", "partition_dim", "location", "num_partitions")
_SPLIT = ("splits", "split_index")       # a loaded model-parallel block's copies keep them (their shape rule)


@dataclass
class ParamAttr:
    """How one parameter is named, initialized and trained (the keys of a .nd parameter binding).

    name        share by name: every binding of one name is one parameter (default `<layer>.<role>`)
    init        "gaussian" (or "normal": mean, std), "uniform" (low, high), "constant" (value),
                "xavier", "msra", SINGA's "gaussian_sqrt_fan_in", "uniform_sqrt_fan_in",
                "uniform_sqrt_fan_in_out" (see netc.api.parameters); none: the reference's draw
    lr_scale, wd_scale   the parameter's learning-rate and weight-decay multipliers
    immutable   never trained (no gradient, no update)
    share_from  SINGA's alias: this parameter is a view of OWNER's storage in its own shape
    """
    name: str | None = None
    init: str | None = None
    std: float | None = None
    mean: float | None = None
    low: float | None = None
    high: float | None = None
    value: float | None = None
    lr_scale: float | None = None
    wd_scale: float | None = None
    immutable: bool | None = None
    share_from: str | None = None

    def binding(self, default_name: str) -> dict:
        out = {"name": self.name or default_name}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name != "name" and v is not None:
                out[f.name] = v
        return out


class Layer:
    """One layer of a topology: an op of the registry (or a data layer), its inputs (Layers), its
    attributes as .nd writes them, its parameter bindings, and its inferred result type.

    Sequences (netc.api.sequence): `seq` is the sequence data layer whose time axis a time-major layer
    [T, B, ...] has (itself for that data layer; None for a layer with the batch first); `itype` the
    netc.api.data_type.InputType a data layer was made from; `lengths` a sequence data layer's lengths
    input [B] (a data layer the feeding fills), whose `lengths_of` is that sequence data layer;
    `mask_of`: the sequence data layer whose steps mask [T, B, 1] this data layer is (the feeding fills it:
    netc.api.sequence.steps_mask). `at_compile(T, B)` the attributes that depend on the compiled steps and
    batch (a reshape back to [T, B, ...])."""

    __slots__ = ("name", "opdef", "inputs", "attrs", "params", "shape", "dtype", "batch", "loc", "order",
                 "param_shapes", "sample_shape", "seq", "itype", "lengths", "lengths_of", "at_compile", "mask_of")

    def __init__(self, name, opdef, inputs, attrs, params, shape, dtype, batch, loc, param_shapes=None,
                 sample_shape=None):
        self.name, self.opdef, self.inputs, self.attrs, self.params = name, opdef, list(inputs), attrs, params
        self.shape, self.dtype, self.batch, self.loc = tuple(shape), dtype, batch, loc
        self.param_shapes = param_shapes or {}
        self.sample_shape = sample_shape
        self.seq = self.itype = self.lengths = self.lengths_of = self.at_compile = self.mask_of = None
        self.order = next(_ORDER)

    @property
    def is_data(self) -> bool:
        return self.opdef is None

    @property
    def type(self) -> str:
        return "data" if self.opdef is None else self.opdef.type_name

    @property
    def size(self) -> int:
        """The features per sample (PaddlePaddle's layer.size): the last dimension."""
        return self.shape[-1] if self.shape else 1

    def param_names(self) -> dict:
        """{role: parameter name} of this layer (its bindings, else `<layer>.<role>`)."""
        return {role: (self.params[role].name if role in self.params and self.params[role].name
                       else f"{self.name}.{role}") for role in self.param_shapes}

    def shape_str(self) -> str:
        """The shape with a free batch shown as '?' (a sequence's steps as 'T': fixed per batch)."""
        if self.seq is not None:
            return "[" + ", ".join(["T", "?" if self.batch is None else str(self.shape[1])]
                                   + [str(d) for d in self.shape[2:]]) + "]"
        return "[" + ", ".join("?" if i == 0 and self.batch is None else str(d) for i, d in enumerate(self.shape)) + "]"

    def __repr__(self):
        return f"<Layer {self.name}: {self.type} {self.shape_str()} {self.dtype}>"


# -- making layers ---------------------------------------------------------------------------------

def plain(v):
    if isinstance(v, tuple):
        return [plain(x) for x in v]
    if isinstance(v, list):
        return [plain(x) for x in v]
    if hasattr(v, "item") and getattr(v, "shape", None) == ():   # numpy / torch scalars
        return v.item()
    return v


def check_name(name, loc):
    if not isinstance(name, str) or not name:
        raise error(f"a layer name is a non-empty string, got {name!r}", loc)
    if "@" in name:
        raise error(f"layer names cannot contain '@' (it marks a split index): '{name}'", loc)


def check_common(attrs: dict, loc) -> None:
    """The layer attributes every op accepts, checked as the .nd frontend checks them."""
    for key in ("include", "exclude"):
        if key in attrs:
            v = attrs[key] if isinstance(attrs[key], list) else [attrs[key]]
            bad = [p for p in v if p not in PHASES]
            if bad:
                raise error(f"'{key}' expects phases ({', '.join(PHASES)}), got {bad[0]!r}", loc)
            attrs[key] = v
    if "include" in attrs and "exclude" in attrs:
        raise error("a layer cannot use both 'include' and 'exclude'", loc)
    v = attrs.get("partition_dim")
    if v is not None and (isinstance(v, bool) or v not in (-1, 0, 1)):
        raise error(f"'partition_dim' must be -1, 0 or 1, got {v!r}", loc)
    v = attrs.get("location")
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
        raise error(f"'location' must be a worker index >= 0, got {v!r}", loc)


def as_layers(inputs, what, loc) -> list:
    out = []
    for i, x in enumerate(inputs):
        if isinstance(x, (list, tuple)):
            out.extend(as_layers(x, what, loc))
        elif isinstance(x, Layer):
            out.append(x)
        else:
            raise error(f"input {i} of {what} is a {type(x).__name__}, not a layer (make inputs with "
                        f"netc.layer.data(...))", loc)
    return out


def param_bindings(opdef, layer_name, param_name, param_attr, loc) -> dict:
    """{role: ParamAttr} from param_name= and param_attr= (a single one means the first role)."""
    roles = opdef.param_roles
    out: dict = {}
    if param_name is None and param_attr is None:
        return out
    if not roles:
        raise error(f"{opdef.type_name} has no parameters to name (param_name / param_attr)", loc)

    def role_of(r):
        if r not in roles:
            hint = did_you_mean(str(r), roles)
            raise error(f"{opdef.type_name} has no parameter '{r}'" + (f"; did you mean '{hint}'?" if hint else "")
                        + f" (its parameters: {', '.join(roles)})", loc)
        return r

    def attr_of(v, r):
        if isinstance(v, ParamAttr):
            return v
        if isinstance(v, str):
            return ParamAttr(name=v)
        if isinstance(v, dict):
            known = {f.name for f in fields(ParamAttr)}
            bad = [k for k in v if k not in known]
            if bad:
                hint = did_you_mean(bad[0], known)
                raise error(f"unknown parameter attribute '{bad[0]}' for '{r}'" + (f"; did you mean '{hint}'?"
                                                                                  if hint else ""), loc)
            return ParamAttr(**v)
        raise error(f"parameter '{r}': expected a name, a ParamAttr or a dict, got {type(v).__name__}", loc)

    if param_attr is not None:
        if isinstance(param_attr, dict) and param_attr and all(k in roles for k in param_attr):
            for r, v in param_attr.items():
                out[role_of(r)] = attr_of(v, r)
        else:
            out[roles[0]] = attr_of(param_attr, roles[0])
    if param_name is not None:
        names = param_name if isinstance(param_name, dict) else {roles[0]: param_name}
        for r, n in names.items():
            r = role_of(r)
            if not isinstance(n, str) or not n:
                raise error(f"param_name of '{r}' must be a non-empty string, got {n!r}", loc)
            a = out.get(r) or ParamAttr()
            if a.name is not None and a.name != n:
                raise error(f"parameter '{r}' is named twice: param_name '{n}', param_attr name '{a.name}'", loc)
            a.name = n
            out[r] = a
    for r, a in out.items():
        if a.immutable is not None and not isinstance(a.immutable, bool):
            raise error(f"'immutable' of parameter '{r}' is True or False, got {a.immutable!r}", loc)
        if a.share_from is not None and not isinstance(a.share_from, str):
            raise error(f"'share_from' of parameter '{r}' names a parameter, got {a.share_from!r}", loc)
    return out


def make_layer(opdef, inputs, attrs: dict, name=None, param_name=None, param_attr=None, loc: Loc | None = None,
               kind: str | None = None, _loaded: bool = False) -> Layer:
    """A checked, shape-inferred Layer of `opdef` (an OpDef or a .nd type name). `_loaded`: a layer of a
    file (netc.load), which keeps what its frontend recorded beyond the schema (split copies' `splits`,
    a SINGA RBM's `hidden`, ...)."""
    loc = loc or user_loc()
    if isinstance(opdef, str):
        d = by_type(opdef)
        if d is None or d.name == "input":
            hint = did_you_mean(opdef, [t for t in layer_types()])
            raise error(f"unknown layer type '{opdef}'" + (f"; did you mean '{hint}'?" if hint else ""), loc)
        opdef = d
    what = f"{opdef.type_name}"
    if name is None:
        name = f"{kind or opdef.name}_{next(AUTO[kind or opdef.name])}"
    check_name(name, loc)
    inputs = as_layers(inputs, f"{what} '{name}'", loc)
    attrs = {k: plain(v) for k, v in attrs.items() if v is not None}
    check_common(attrs, loc)
    problems = []
    for k in list(attrs):
        if k in COMMON_ATTRS and k not in COMMON and k not in opdef.attrs and not (_loaded and k in _SPLIT):
            problems.append((f"'{k}' is set by netc and cannot be given to a layer", None))
    for key, msg, hint in opdef.check_attrs(attrs):
        if not (_loaded and key is not None and key not in opdef.attrs):
            problems.append((msg, hint))
    if problems:
        diags = error(problems[0][0], loc, [problems[0][1]] if problems[0][1] else ()).diagnostics
        for msg, hint in problems[1:]:
            diags += error(msg, loc, [hint] if hint else ()).diagnostics
        raise Error(diags)
    lo, hi = opdef.arity
    n = len(inputs)
    if n < lo or (hi is not None and n > hi):
        want = f"{lo}" if lo == hi else (f"at least {lo}" if hi is None else f"{lo} to {hi}")
        raise error(f"{what} '{name}' takes {want} input{'s' if want != '1' else ''}, got {n}", loc)
    full = {k: s.default for k, s in opdef.attrs.items() if not s.required}
    full.update(attrs)
    batches = {i.batch for i in inputs if i.batch is not None}
    batch = next(iter(batches)) if len(batches) == 1 else None
    ins = [tuple(i.shape) if batch is None or i.batch is not None or not i.shape else
           (i.shape[0], batch) + tuple(i.shape[2:]) if i.seq is not None else (batch,) + tuple(i.shape[1:])
           for i in inputs]
    try:
        out = tuple(opdef.infer(full, ins))
    except ShapeError as e:
        notes = list(e.notes)
        for i, x in enumerate(inputs):
            notes.append((f"input {i}, '{x.name}', has shape {x.shape_str()}"
                          + (" (NHWC)" if len(x.shape) == 4 else ""), x.loc))
        if any(x.batch is None for x in inputs) and batches:
            notes.append("data layers without batch_size are inferred at batch 1 here")
        raise error(f"in {what} '{name}': {e}", loc, notes) from None
    problem = opdef.real_shape_problem(full, ins, out)
    if problem:     # as shape-inference does: counted with, never run
        warnings.warn(render(error(f"in {what} '{name}': {problem}, so it is not a real tensor shape; netc counts "
                                   f"with it but will not run this layer", loc).diagnostics[0]), stacklevel=3)
    dtype = result_dtype(opdef, full, [i.dtype for i in inputs])
    params = param_bindings(opdef, name, param_name, param_attr, loc)
    pshapes = {r: tuple(s) for r, s in opdef.param_shapes(full, ins, out).items()} if opdef.param_roles else {}
    if batch is None and batches:      # several declared batches: the shape rule accepted them
        batch = max(batches)
    layer = Layer(name, opdef, inputs, attrs, params, out, dtype, batch, loc, pshapes)
    layer.seq = time_major_source(opdef, inputs, ins, out)
    return layer


def time_major_source(opdef, inputs, ins, out):
    """The sequence data layer whose time axis a new layer keeps: an input's, when the layer's result
    starts with that input's [T, B] (an activation, an elementwise op, a concatenation of features);
    None for a loss, a reduction over time (SequencePool) or a result of another shape."""
    if opdef.is_loss or opdef.name == "seq_pool":
        return None
    for x, shape in zip(inputs, ins):
        if x.seq is not None and len(out) >= 2 and tuple(out[:2]) == tuple(shape[:2]):
            return x.seq
    return None


def one_layer(input, what, loc):
    """The one input layer of a builder that takes one (a layer, or a list holding one)."""
    xs = as_layers([input], what, loc)
    if len(xs) != 1:
        raise error(f"{what} takes one input layer, got {len(xs)}", loc)
    return xs[0]


@functools.lru_cache(maxsize=None)
def layer_types() -> dict:
    """{.nd layer type: OpDef} of every type a layer can be built of (aliases included)."""
    out = {}
    for d in all_ops():
        # netc.input is the data layer (netc.api.layer.data); training-only ops are made by the passes
        if d.training_only or not d.types or d.name == "input":
            continue
        for t in d.types:
            out[t] = d
    return out
