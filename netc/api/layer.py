"""Layers as Python expressions: `fc(conv2d(data("x", [8, 8, 1]), 3, 16), 10)`.

Every call makes a `Layer`: an op of the registry (netc.ops) with its inputs, attributes and
parameter bindings, checked and shape-inferred on the spot by the op's own schema and shape rule
(OpDef.check_attrs, OpDef.infer), so a mistake raises at the line that made the layer (an
`Error` located there, errors.py). A Topology (topology.py) turns the layers into the same
unresolved IR the .nd frontend builds, so every pass, plan, kernel and report is shared.

Two kinds of builder functions:

* the friendly ones below (PaddlePaddle v2's vocabulary where it fits): data, fc, conv2d, pool,
  max_pool, avg_pool, lrn, batch_norm, dropout, concat, embedding, relu, sigmoid, tanh, softmax,
  identity, add, multiply, maximum, reshape, flatten, softmax_loss (cross_entropy,
  classification_cost), euclidean (square_error_cost), rank_cost;
* one function per layer type of the registry, GENERATED from its OpDef (attribute schema, arity,
  parameter roles): `Convolution(x, filter=[3, 3, -1, 16], padding="SAME")`, `InnerProduct`,
  `GRU`, ... -- the .nd spellings, aliases included. A new op needs no second definition here.

Common keywords of every layer: `name=` (default: `<kind>_<n>`, unique in the process),
`param_name=` (a name for the first parameter role, or {role: name}), `param_attr=` (a ParamAttr
for the first role, or {role: ParamAttr}), and the .nd layer attributes include, exclude,
partition_dim, location. A parameter's name is its binding's, else `<layer>.<role>`; two bindings of
one name are one parameter (sharing by name, across topologies too).

Shapes: a data layer declares its per-sample shape; the batch is its `batch_size`, or free. Layers
made only from free-batch data are inferred at batch 1 (shown as `?`); the batch is fixed when a
topology is compiled (its declared batch, or the batch train/test/infer run with).
"""
from __future__ import annotations

import inspect
import itertools
import warnings
from collections import defaultdict
from dataclasses import dataclass, fields

from ..diagnostics import Loc, did_you_mean, render
from ..ir.core import DTYPES
from ..ops import all_ops, by_type
from ..ops.registry import COMMON_ATTRS, PHASES, REQUIRED, ShapeError, result_dtype
from .errors import Error, error, user_loc

_ORDER = itertools.count()                  # creation order: topological by construction
_AUTO = defaultdict(lambda: itertools.count(1))
_COMMON = ("include", "exclude", "partition_dim", "location", "num_partitions")
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
    attributes as .nd writes them, its parameter bindings, and its inferred result type."""

    __slots__ = ("name", "opdef", "inputs", "attrs", "params", "shape", "dtype", "batch", "loc", "order",
                 "param_shapes", "sample_shape")

    def __init__(self, name, opdef, inputs, attrs, params, shape, dtype, batch, loc, param_shapes=None,
                 sample_shape=None):
        self.name, self.opdef, self.inputs, self.attrs, self.params = name, opdef, list(inputs), attrs, params
        self.shape, self.dtype, self.batch, self.loc = tuple(shape), dtype, batch, loc
        self.param_shapes = param_shapes or {}
        self.sample_shape = sample_shape
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
        """The shape with a free batch shown as '?'."""
        return "[" + ", ".join("?" if i == 0 and self.batch is None else str(d) for i, d in enumerate(self.shape)) + "]"

    def __repr__(self):
        return f"<Layer {self.name}: {self.type} {self.shape_str()} {self.dtype}>"


# -- making layers ---------------------------------------------------------------------------------

def _plain(v):
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if hasattr(v, "item") and getattr(v, "shape", None) == ():   # numpy / torch scalars
        return v.item()
    return v


def check_name(name, loc):
    if not isinstance(name, str) or not name:
        raise error(f"a layer name is a non-empty string, got {name!r}", loc)
    if "@" in name:
        raise error(f"layer names cannot contain '@' (it marks a split index): '{name}'", loc)


def _check_common(attrs: dict, loc) -> None:
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


def _param_bindings(opdef, layer_name, param_name, param_attr, loc) -> dict:
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
            hint = did_you_mean(opdef, [t for t in _TYPES])
            raise error(f"unknown layer type '{opdef}'" + (f"; did you mean '{hint}'?" if hint else ""), loc)
        opdef = d
    what = f"{opdef.type_name}"
    if name is None:
        name = f"{kind or opdef.name}_{next(_AUTO[kind or opdef.name])}"
    check_name(name, loc)
    inputs = as_layers(inputs, f"{what} '{name}'", loc)
    attrs = {k: _plain(v) for k, v in attrs.items() if v is not None}
    _check_common(attrs, loc)
    problems = []
    for k in list(attrs):
        if k in COMMON_ATTRS and k not in _COMMON and k not in opdef.attrs and not (_loaded and k in _SPLIT):
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
    ins = [((batch,) + tuple(i.shape[1:])) if (batch is not None and i.batch is None and i.shape) else tuple(i.shape)
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
    params = _param_bindings(opdef, name, param_name, param_attr, loc)
    pshapes = {r: tuple(s) for r, s in opdef.param_shapes(full, ins, out).items()} if opdef.param_roles else {}
    if batch is None and batches:      # several declared batches: the shape rule accepted them
        batch = max(batches)
    return Layer(name, opdef, inputs, attrs, params, out, dtype, batch, loc, pshapes)


# -- the friendly builders -------------------------------------------------------------------------

def data(name: str, shape, dtype: str = "f32", batch_size: int | None = None, **attrs) -> Layer:
    """A data layer (a network input): `shape` per sample (an int for a vector), `dtype` one of
    f32, f16, bf16, f64, i8, i32, i64 (i32 for class labels), `batch_size` the batch, or None to
    fix it when the topology runs. Samples feed data layers by name (dict samples) or in the order
    the data layers were made (tuple samples)."""
    loc = user_loc()
    check_name(name, loc)
    given = shape
    if isinstance(shape, int):
        shape = [shape]
    elif isinstance(shape, (str, bytes, dict)) or not hasattr(shape, "__iter__"):   # (a float, None, ...)
        shape = None
    else:
        shape = _plain(list(shape))
    if shape is None or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape):
        raise error(f"data layer '{name}': shape is the per-sample shape, a list of positive integers, got {given!r}",
                    loc)
    if not isinstance(dtype, str) or dtype not in DTYPES:
        hint = did_you_mean(str(dtype), DTYPES)
        raise error(f"data layer '{name}': unknown element type {dtype!r}"
                    + (f"; did you mean '{hint}'?" if hint else "") + f" (types: {', '.join(DTYPES)})", loc)
    if batch_size is not None and (not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1):
        raise error(f"data layer '{name}': batch_size is a positive integer, got {batch_size!r}", loc)
    bad = [k for k in attrs if k not in _COMMON]
    if bad:
        raise error(f"data layer '{name}': unknown attribute '{bad[0]}' (data layers take include, exclude, "
                    f"partition_dim, location)", loc)
    full = [batch_size or 1] + shape
    attrs = {k: _plain(v) for k, v in attrs.items() if v is not None}
    _check_common(attrs, loc)
    return Layer(name, None, [], attrs, {}, full, dtype,
                 batch_size, loc, sample_shape=tuple(shape))


def _one_layer(input, what, loc):
    """The one input layer of a builder that takes one (a layer, or a list holding one)."""
    xs = as_layers([input], what, loc)
    if len(xs) != 1:
        raise error(f"{what} takes one input layer, got {len(xs)}", loc)
    return xs[0]


def _pair(v, what, loc, required: bool = False):
    if v is None and not required:
        return None
    v = _plain(v)
    if isinstance(v, int) and not isinstance(v, bool):
        return [v, v]
    if isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) for x in v):
        return v
    raise error(f"{what} is an integer or (height, width), got {v!r}", loc)


def _padding(v, loc):
    if v is None or isinstance(v, str):
        return v
    return _pair(v, "padding", loc)


_ACTS = ("relu", "sigmoid", "tanh")


def _act(act, loc):
    if act in (None, "linear", "none", "identity"):
        return None
    if not isinstance(act, str) or act.lower() not in _ACTS + ("softmax",):
        raise error(f"activation {act!r}: netc fuses relu, sigmoid and tanh into a layer (or None); "
                    f"'softmax' adds a Softmax layer", loc)
    return act.lower()


def _with_act(layer, act, loc, name):
    """The softmax of `act="softmax"`: a Softmax layer '<name>.prob' after the layer."""
    if act != "softmax":
        return layer
    return make_layer("Softmax", [layer], {}, f"{name or layer.name}.prob", loc=loc)


def fc(input, size: int, act=None, bias: bool = True, name=None, param_name=None, param_attr=None, **attrs) -> Layer:
    """A fully connected layer (InnerProduct): y = act(x W + b), x flattened to [N, K], W [K, size].
    act: None, "relu", "sigmoid", "tanh" (fused), or "softmax" (a Softmax layer '<name>.prob' after it:
    softmax_loss of that layer trains on the logits)."""
    loc = user_loc()
    a = _act(act, loc)
    layer = make_layer("InnerProduct", [input], dict(num_outputs=size, activation=a if a in _ACTS else None,
                                                      bias=None if bias else False, **attrs),
                       name, param_name, param_attr, loc, "fc")
    return _with_act(layer, a, loc, name)


def conv2d(input, filter_size, num_filters: int, stride=None, padding=None, act=None, bias: bool = True, name=None,
           param_name=None, param_attr=None, **attrs) -> Layer:
    """A 2-D convolution (Convolution) of an NHWC input: filter [fh, fw, C_in, num_filters], stride an int
    or (sh, sw), padding "VALID", "SAME" (the default), an int or (ph, pw); act relu/sigmoid/tanh fused."""
    loc = user_loc()
    x = _one_layer(input, "conv2d", loc)
    if len(x.shape) != 4:
        raise error(f"conv2d takes an NHWC input [N, H, W, C]; '{x.name}' has shape {x.shape_str()}", loc,
                    [("defined here", x.loc)])
    fh, fw = _pair(filter_size, "filter_size", loc, required=True)
    s = _pair(stride, "stride", loc)
    a = _act(act, loc)
    layer = make_layer("Convolution", [x], dict(filter=[fh, fw, x.shape[-1], num_filters],
                                                strides=[1, s[0], s[1], 1] if s else None,
                                                padding=_padding(padding, loc), activation=a if a in _ACTS else None,
                                                bias=None if bias else False, **attrs),
                       name, param_name, param_attr, loc, "conv")
    return _with_act(layer, a, loc, name)


def pool(input, pool_size, stride=None, padding=None, pool_type: str = "max", name=None, **attrs) -> Layer:
    """Max or average pooling (Pooling / AvgPool) over (ph, pw) windows; padding "VALID" (the default),
    "SAME", an int or (ph, pw)."""
    loc = user_loc()
    if pool_type not in ("max", "avg", "average"):
        raise error(f"pool_type is 'max' or 'avg', got {pool_type!r}", loc)
    k = _pair(pool_size, "pool_size", loc, required=True)
    s = _pair(stride, "stride", loc)
    return make_layer("Pooling" if pool_type == "max" else "AvgPool", [input],
                      dict(ksize=[1, k[0], k[1], 1], strides=[1, s[0], s[1], 1] if s else None,
                           padding=_padding(padding, loc), **attrs), name, loc=loc, kind="pool")


def max_pool(input, pool_size, stride=None, padding=None, name=None, **attrs) -> Layer:
    return pool(input, pool_size, stride, padding, "max", name, **attrs)


def avg_pool(input, pool_size, stride=None, padding=None, name=None, **attrs) -> Layer:
    return pool(input, pool_size, stride, padding, "avg", name, **attrs)


def lrn(input, local_size=None, alpha=None, beta=None, knorm=None, name=None, **attrs) -> Layer:
    """Local response normalization across channels (LRN)."""
    return make_layer("LRN", [input], dict(local_size=local_size, alpha=alpha, beta=beta, knorm=knorm, **attrs),
                      name, loc=user_loc(), kind="lrn")


def batch_norm(input, act=None, epsilon=None, momentum=None, name=None, param_name=None, param_attr=None,
               **attrs) -> Layer:
    """Batch normalization over the channels (BatchNorm: parameters scale and shift; running statistics
    are training state); act: a ReLU/Sigmoid/Tanh layer '<name>.<act>' after it."""
    loc = user_loc()
    a = _act(act, loc)
    if a == "softmax":
        raise error("batch_norm(act=...) takes relu, sigmoid or tanh", loc)
    layer = make_layer("BatchNorm", [input], dict(epsilon=epsilon, momentum=momentum, **attrs), name, param_name,
                       param_attr, loc, "batch_norm")
    if a is None:
        return layer
    return make_layer({"relu": "ReLU", "sigmoid": "Sigmoid", "tanh": "Tanh"}[a], [layer], {}, f"{layer.name}.{a}",
                      loc=loc)


def dropout(input, keep_prob=None, dropout_rate=None, name=None, **attrs) -> Layer:
    """Dropout: keeps each value with probability keep_prob (or 1 - dropout_rate) in training, scaled by
    1 / keep_prob; the identity at inference."""
    loc = user_loc()
    if keep_prob is not None and dropout_rate is not None:
        raise error("give keep_prob or dropout_rate, not both", loc)
    if dropout_rate is not None:
        if isinstance(dropout_rate, bool) or not isinstance(dropout_rate, (int, float)):
            raise error(f"dropout_rate is a number (the probability of dropping a value), got {dropout_rate!r}", loc)
        keep_prob = 1.0 - dropout_rate
    return make_layer("Dropout", [input], dict(dropout_keep_prob=keep_prob, **attrs), name, loc=loc, kind="dropout")


def concat(input, axis=None, name=None, **attrs) -> Layer:
    """Concatenation of a list of layers along `axis` (default -1, the channels)."""
    loc = user_loc()
    return make_layer("Concatenate", list(input) if isinstance(input, (list, tuple)) else [input],
                      dict(dim=axis, **attrs), name, loc=loc, kind="concat")


def embedding(input, size: int, name=None, param_name=None, param_attr=None, num_embeddings=None,
              **attrs) -> Layer:
    """A lookup table of `size`-wide rows, by the input's type:

    * integer ids (i32 or i64 of any shape [N, ...], `data(name, shape, dtype="i32")`): an Embedding
      layer, table [num_embeddings, size] (parameter role `table`), result [N, ..., size];
      `num_embeddings`, the vocabulary, is required;
    * one-hot (or multi-hot) float rows [N, vocabulary] (netc.reader.one_hot makes them): an
      InnerProduct, whose weight [vocabulary, size] is the table (the same values give
      the same rows and updates as the Embedding of their ids)."""
    loc = user_loc()
    x = _one_layer(input, "embedding", loc)
    if x.dtype in ("i32", "i64"):
        if num_embeddings is None:
            raise error(f"embedding of integer ids ('{x.name}', {x.dtype} {x.shape_str()}) needs num_embeddings=, "
                        f"the vocabulary size (the table's rows; ids are 0 to num_embeddings - 1)", loc)
        return make_layer("Embedding", [x], dict(num_embeddings=num_embeddings, dim=size, **attrs), name,
                          param_name, param_attr, loc, "embedding")
    if len(x.shape) != 2 or not x.dtype.startswith(("f", "b")):
        raise error(f"embedding takes integer ids (i32 or i64) or one-hot rows, a float input [N, vocabulary]; "
                    f"'{x.name}' is {x.dtype} {x.shape_str()}", loc,
                    ["give the data layer dtype \"i32\" (ids of any shape) and embedding(..., num_embeddings="
                     "vocabulary), or shape [vocabulary], dtype f32, fed netc.reader.one_hot(index, vocabulary)"])
    if num_embeddings is not None and num_embeddings != x.shape[1]:
        raise error(f"embedding of one-hot rows: num_embeddings {num_embeddings!r} is not the rows' width "
                    f"{x.shape[1]} ('{x.name}' is {x.dtype} {x.shape_str()})", loc)
    return make_layer("InnerProduct", [x], dict(num_outputs=size, bias=False, **attrs), name, param_name, param_attr,
                      loc, "embedding")


def relu(input, negative_slope=None, name=None, **attrs) -> Layer:
    return make_layer("ReLU", [input], dict(negative_slope=negative_slope, **attrs), name, loc=user_loc(), kind="relu")


def sigmoid(input, name=None, **attrs) -> Layer:
    return make_layer("Sigmoid", [input], attrs, name, loc=user_loc(), kind="sigmoid")


def tanh(input, name=None, **attrs) -> Layer:
    return make_layer("Tanh", [input], attrs, name, loc=user_loc(), kind="tanh")


def softmax(input, num_classes=None, name=None, **attrs) -> Layer:
    """Softmax over the flattened features: [N, ...] -> [N, prod(...)]."""
    return make_layer("Softmax", [input], dict(num_classes=num_classes, **attrs), name, loc=user_loc(),
                      kind="softmax")


def identity(input, name=None, **attrs) -> Layer:
    return make_layer("Identity", [input], attrs, name, loc=user_loc(), kind="identity")


def _elementwise(op, inputs, name, attrs, loc):
    xs = inputs[0] if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)) else inputs
    return make_layer("Elementwise", list(xs), dict(operation=None if op == "sum" else op, **attrs), name, loc=loc,
                      kind={"sum": "add", "product": "multiply", "max": "maximum"}[op])


def add(*inputs, name=None, **attrs) -> Layer:
    """Elementwise sum of same-shaped layers (PaddlePaddle's addto)."""
    return _elementwise("sum", inputs, name, attrs, user_loc())


addto = add


def multiply(*inputs, name=None, **attrs) -> Layer:
    """Elementwise product of same-shaped layers."""
    return _elementwise("product", inputs, name, attrs, user_loc())


def maximum(*inputs, name=None, **attrs) -> Layer:
    """Elementwise maximum of same-shaped layers."""
    return _elementwise("max", inputs, name, attrs, user_loc())


def reshape(input, shape, name=None, **attrs) -> Layer:
    """A view with a new shape, batch included (one -1 is inferred; a leading -1 is the batch)."""
    loc = user_loc()
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise error(f"reshape's shape is a list of integers, got {shape!r}", loc)
    return make_layer("Reshape", [input], dict(output_shape=_plain(list(shape)), **attrs), name, loc=loc,
                      kind="reshape")


def flatten(input, name=None, **attrs) -> Layer:
    """[N, ...] -> [N, prod(...)]."""
    return make_layer("Reshape", [input], attrs, name, loc=user_loc(), kind="flatten")


def _logits(x: Layer) -> Layer:
    # a Softmax layer's input: a softmax loss applies its own softmax (PaddlePaddle's
    # fc(act=Softmax) + classification_cost idiom trains on the logits)
    return x.inputs[0] if isinstance(x, Layer) and x.opdef is not None and x.opdef.name == "softmax" else x


def softmax_loss(input, label, name=None, **attrs) -> Layer:
    """The mean cross-entropy of softmax(input) against `label`: class indices i32 [N] / [N, 1], or one-hot
    / soft targets [N, C]. `input` is the logits (a Softmax layer's input is taken when given one)."""
    loc = user_loc()
    x = _one_layer(input, "softmax_loss", loc)
    return make_layer("SoftmaxLoss", [_logits(x), label], attrs, name, loc=loc, kind="cost")


cross_entropy = classification_cost = softmax_loss


def euclidean(input, label, name=None, **attrs) -> Layer:
    """0.5 * mean over the batch of ||input - label||^2 (EuclideanLoss)."""
    return make_layer("EuclideanLoss", [input, label], attrs, name, loc=user_loc(), kind="cost")


square_error_cost = mse_cost = euclidean


def rank_cost(left, right, label, name=None, **attrs) -> Layer:
    """PaddlePaddle's rank_cost, the pairwise cross-entropy of two scores (RankNet): with
    o = left - right and P = sigmoid(o), C = -T log P - (1 - T) log(1 - P), T the target probability that
    `left` ranks higher. Composed from registry ops: Concatenate([right, left]) [N, 2] and a SoftmaxLoss,
    since softmax([r, l])[1] = sigmoid(l - r). `label`: i32 [N] / [N, 1] (1: left ranks higher, 0: right)
    or f32 [N, 2] soft targets [1 - T, T] (ties: [0.5, 0.5]). The layers are '<name>.pair' and `name`.
    (The registry has no subtraction or scaling op, so a [N, 1] float T cannot be turned into [1 - T, T]
    inside the network: the reader gives it.)"""
    loc = user_loc()
    l, r = _one_layer(left, "rank_cost", loc), _one_layer(right, "rank_cost", loc)
    name = name or f"rank_cost_{next(_AUTO['rank_cost'])}"
    for x in (l, r):
        if len(x.shape) != 2 or x.shape[1] != 1:
            raise error(f"rank_cost compares one score per sample, [N, 1]; '{x.name}' has shape {x.shape_str()}",
                        loc, [("defined here", x.loc)])
    pair = make_layer("Concatenate", [r, l], {"dim": -1}, f"{name}.pair", loc=loc)
    return make_layer("SoftmaxLoss", [pair, label], attrs, name, loc=loc)


# -- the generated builders: one per layer type of the registry -------------------------------------

def _generated(opdef, type_name):
    def build(*inputs, name=None, param_name=None, param_attr=None, **attrs):
        return make_layer(opdef, list(inputs), attrs, name, param_name, param_attr, user_loc(), opdef.name)

    build.__name__ = build.__qualname__ = type_name
    lo, hi = opdef.arity
    arity = f"{lo}" if lo == hi else (f"{lo} or more" if hi is None else f"{lo} to {hi}")
    lines = [f"{type_name}: the .nd layer type `{type_name}` ({opdef.ir_name}), generated from its OpDef.", "",
             opdef.doc or "", "", f"Inputs: {arity} layer{'s' if hi != 1 else ''}."]
    if opdef.attrs:
        lines.append("Attributes:")
        for k, s in opdef.attrs.items():
            dflt = "required" if s.required else f"default {s.default!r}"
            lines.append(f"  {k}: {s.describe()}, {dflt}" + (f" -- {s.doc}" if s.doc else ""))
    if opdef.param_roles:
        lines.append(f"Parameters (param_name= / param_attr= roles): {', '.join(opdef.param_roles)}.")
    build.__doc__ = "\n".join(lines)
    params = [inspect.Parameter("inputs", inspect.Parameter.VAR_POSITIONAL)]
    for k, s in opdef.attrs.items():
        params.append(inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY,
                                        default=inspect.Parameter.empty if s.default is REQUIRED else s.default))
    for k in ("name", "param_name", "param_attr") + _COMMON:
        if k not in opdef.attrs:
            params.append(inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=None))
    build.__signature__ = inspect.Signature(params)
    return build


def _layer_types() -> dict:
    out = {}
    for d in all_ops():
        # netc.input is the data layer (data() above); training-only ops are made by the passes
        if d.training_only or not d.types or d.name == "input":
            continue
        for t in d.types:
            out[t] = d
    return out


_TYPES = _layer_types()
for _t, _d in _TYPES.items():
    globals()[_t] = _generated(_d, _t)
del _t, _d


def types() -> list[str]:
    """Every layer type a generated builder exists for (the .nd spellings, aliases included)."""
    return list(_TYPES)


__all__ = ["ParamAttr", "Layer", "make_layer", "data", "fc", "conv2d", "pool", "max_pool", "avg_pool", "lrn",
           "batch_norm", "dropout", "concat", "embedding", "relu", "sigmoid", "tanh", "softmax", "identity", "add",
           "addto", "multiply", "maximum", "reshape", "flatten", "softmax_loss", "cross_entropy",
           "classification_cost", "euclidean", "square_error_cost", "mse_cost", "rank_cost", "types"] + list(_TYPES)


def __dir__():
    return sorted(__all__)
