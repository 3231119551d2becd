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
  classification_cost), euclidean (square_error_cost), rank_cost; and over sequences (netc.api.sequence,
  re-exported here) lstm, gru, recurrent, last_seq, first_seq, pooling (MaxPooling, AvgPooling);
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
topology is compiled (its declared batch, or the batch train/test/infer run with). Sequence layers
are time-major, [T, B, ...], T fixed per batch too (shown as `T`). Layer, ParamAttr and make_layer
live in netc.api.core.
"""
from __future__ import annotations

import inspect

from ..diagnostics import did_you_mean
from ..ir.core import DTYPES
from ..ops.registry import REQUIRED
from .data_type import InputType
from .core import (AUTO, COMMON, Layer, ParamAttr, as_layers, check_common, check_name, layer_types,  # noqa: F401
                   make_layer, one_layer, plain)
from .errors import error, user_loc
from .sequence import (AvgPooling, MaxPooling, first_seq, fc_steps, gru, last_seq, lstm, pooling, seq_reverse,  # noqa: F401,E501
                       recurrent, sequence_data, step_cost)

# -- the friendly builders -------------------------------------------------------------------------

def data(name: str, shape=None, dtype: str = "f32", batch_size: int | None = None, type=None,  # noqa: A002
         **attrs) -> Layer:
    """A data layer (a network input): `shape` per sample (an int for a vector), `dtype` one of
    f32, f16, bf16, f64, i8, i32, i64 (i32 for class labels), `batch_size` the batch, or None to
    fix it when the topology runs. Samples feed data layers by name (dict samples) or in the order
    the data layers were made (tuple samples).

    Or PaddlePaddle's form, `data(name, type=netc.data_type.integer_value_sequence(V))` (the type may
    also be the second argument): integer_value(n) is i32 [B], dense_vector(d) f32 [B, d], and the
    sequence types are time-major, [T, B] and [T, B, d], padded per batch (netc.api.sequence)."""
    loc = user_loc()
    check_name(name, loc)
    if isinstance(shape, InputType) or type is not None:
        return _typed_data(name, type if type is not None else shape, shape if type is not None else None,
                           batch_size, attrs, loc)
    given = shape
    if isinstance(shape, int):
        shape = [shape]
    elif isinstance(shape, (str, bytes, dict)) or not hasattr(shape, "__iter__"):   # (a float, None, ...)
        shape = None
    else:
        shape = plain(list(shape))
    if shape is None or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape):
        raise error(f"data layer '{name}': shape is the per-sample shape, a list of positive integers, got {given!r}",
                    loc)
    if not isinstance(dtype, str) or dtype not in DTYPES:
        hint = did_you_mean(str(dtype), DTYPES)
        raise error(f"data layer '{name}': unknown element type {dtype!r}"
                    + (f"; did you mean '{hint}'?" if hint else "") + f" (types: {', '.join(DTYPES)})", loc)
    if batch_size is not None and (not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1):
        raise error(f"data layer '{name}': batch_size is a positive integer, got {batch_size!r}", loc)
    bad = [k for k in attrs if k not in COMMON]
    if bad:
        raise error(f"data layer '{name}': unknown attribute '{bad[0]}' (data layers take include, exclude, "
                    f"partition_dim, location)", loc)
    full = [batch_size or 1] + shape
    attrs = {k: plain(v) for k, v in attrs.items() if v is not None}
    check_common(attrs, loc)
    return Layer(name, None, [], attrs, {}, full, dtype,
                 batch_size, loc, sample_shape=tuple(shape))


def _typed_data(name, itype, shape, batch_size, attrs, loc) -> Layer:
    if not isinstance(itype, InputType):
        raise error(f"data layer '{name}': type is a netc.data_type (integer_value, integer_value_sequence, "
                    f"dense_vector, dense_vector_sequence), got {itype!r}", loc)
    if shape is not None:
        raise error(f"data layer '{name}': give a shape or a type, not both", loc)
    problem = itype.problem()
    if problem:
        raise error(f"data layer '{name}': {problem}", loc)
    if itype.is_sparse and itype.is_sequence:
        raise error(f"data layer '{name}': a sequence of sparse vectors is not in netc yet", loc)
    if not itype.is_sequence:
        x = data(name, [] if itype.is_index else [itype.dim], "i32" if itype.is_index else "f32", batch_size,
                 **attrs)
        x.loc, x.itype = loc, itype
        return x
    if batch_size is not None:
        raise error(f"data layer '{name}': a sequence ({itype!r}) takes its batch from the feeding; give "
                    f"batch_size to train/test/infer instead", loc)
    bad = [k for k in attrs if k not in ("include", "exclude")]
    if bad:
        raise error(f"data layer '{name}': a sequence data layer takes include and exclude, not '{bad[0]}'", loc)
    attrs = {k: plain(v) for k, v in attrs.items() if v is not None}
    check_common(attrs, loc)
    return sequence_data(name, itype, attrs, loc)



def _pair(v, what, loc, required: bool = False):
    if v is None and not required:
        return None
    v = plain(v)
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
    softmax_loss of that layer trains on the logits). Of a sequence [T, B, F]: the same layer at every
    step, [T, B, size] (netc.api.sequence.fc_steps)."""
    loc = user_loc()
    a = _act(act, loc)
    xs = as_layers([input], "fc", loc)
    if len(xs) == 1 and xs[0].seq is not None:
        return fc_steps(xs[0], size, a, bias, name, param_name, param_attr, attrs, loc)
    layer = make_layer("InnerProduct", [input], dict(num_outputs=size, activation=a if a in _ACTS else None,
                                                      bias=None if bias else False, **attrs),
                       name, param_name, param_attr, loc, "fc")
    return _with_act(layer, a, loc, name)


def conv2d(input, filter_size, num_filters: int, stride=None, padding=None, act=None, bias: bool = True, name=None,
           param_name=None, param_attr=None, **attrs) -> Layer:
    """A 2-D convolution (Convolution) of an NHWC input: filter [fh, fw, C_in, num_filters], stride an int
    or (sh, sw), padding "VALID", "SAME" (the default), an int or (ph, pw); act relu/sigmoid/tanh fused."""
    loc = user_loc()
    x = one_layer(input, "conv2d", loc)
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
      `num_embeddings`, the vocabulary, is required, except for a data layer of type integer_value(V) /
      integer_value_sequence(V) (a sequence [T, B] gives [T, B, size]), whose V it defaults to;
    * one-hot (or multi-hot) float rows [N, vocabulary] (netc.reader.one_hot makes them): an
      InnerProduct, whose weight [vocabulary, size] is the table (the same values give
      the same rows and updates as the Embedding of their ids)."""
    loc = user_loc()
    x = one_layer(input, "embedding", loc)
    if x.dtype in ("i32", "i64"):
        typed = x.itype.dim if x.itype is not None and x.itype.is_index else None
        if num_embeddings is None:       # PaddlePaddle's: the id type's range is the vocabulary
            num_embeddings = typed
        elif typed is not None and isinstance(num_embeddings, int) and num_embeddings < typed:
            raise error(f"embedding: num_embeddings {num_embeddings} is less than the range of the ids of "
                        f"'{x.name}' ({x.itype!r}): ids up to {typed - 1} would have no row", loc,
                        [("the data layer is made here", x.loc)])
        if num_embeddings is None:
            raise error(f"embedding of integer ids ('{x.name}', {x.dtype} {x.shape_str()}) needs num_embeddings=, "
                        f"the vocabulary size (the table's rows; ids are 0 to num_embeddings - 1)", loc)
        return make_layer("Embedding", [x], dict(num_embeddings=num_embeddings, dim=size, **attrs), name,
                          param_name, param_attr, loc, "embedding")
    if x.seq is not None:
        raise error(f"embedding of a sequence looks up integer ids (data_type.integer_value_sequence); '{x.name}' "
                    f"is {x.dtype} {x.shape_str()}, a sequence of vectors already", loc,
                    [("defined here", x.loc), "give its vectors a new width with fc(x, size), which runs at every "
                     "step"])
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
    return make_layer("Reshape", [input], dict(output_shape=plain(list(shape)), **attrs), name, loc=loc,
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
    / soft targets [N, C]. `input` is the logits (a Softmax layer's input is taken when given one). Of a
    sequence [T, B, C]: a class per step from a label sequence ([T, B]), the mean over the valid steps."""
    loc = user_loc()
    x = one_layer(input, "softmax_loss", loc)
    if x.seq is not None:
        return step_cost("SoftmaxLoss", x, label, name, attrs, loc)
    return make_layer("SoftmaxLoss", [_logits(x), label], attrs, name, loc=loc, kind="cost")


cross_entropy = classification_cost = softmax_loss


def euclidean(input, label, name=None, **attrs) -> Layer:
    """0.5 * mean over the batch of ||input - label||^2 (EuclideanLoss). Of a sequence: at every valid step
    against a label sequence, 0.5 * the sum of squares over the valid steps / their count."""
    loc = user_loc()
    x = one_layer(input, "euclidean", loc)
    if x.seq is not None:
        return step_cost("EuclideanLoss", x, label, name, attrs, loc)
    return make_layer("EuclideanLoss", [x, label], attrs, name, loc=loc, kind="cost")


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
    l, r = one_layer(left, "rank_cost", loc), one_layer(right, "rank_cost", loc)
    name = name or f"rank_cost_{next(AUTO['rank_cost'])}"
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
    for k in ("name", "param_name", "param_attr") + COMMON:
        if k not in opdef.attrs:
            params.append(inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=None))
    build.__signature__ = inspect.Signature(params)
    return build


_TYPES = layer_types()
for _t, _d in _TYPES.items():
    globals()[_t] = _generated(_d, _t)
del _t, _d


def types() -> list[str]:
    """Every layer type a generated builder exists for (the .nd spellings, aliases included)."""
    return list(_TYPES)


__all__ = ["ParamAttr", "Layer", "make_layer", "data", "fc", "conv2d", "pool", "max_pool", "avg_pool", "lrn",
           "batch_norm", "dropout", "concat", "embedding", "relu", "sigmoid", "tanh", "softmax", "identity", "add",
           "addto", "multiply", "maximum", "reshape", "flatten", "softmax_loss", "cross_entropy",
           "classification_cost", "euclidean", "square_error_cost", "mse_cost", "rank_cost", "types", "lstm", "gru",
           "recurrent", "last_seq", "first_seq", "pooling", "MaxPooling", "AvgPooling"] + list(_TYPES)


def __dir__():
    return sorted(__all__)
