"""paddle.layer's sequence and id layers (PaddlePaddle v2's names, arguments, parameter names and shapes),
built from netc.api's layers and netc.api.sequence's recurrent layers:

    embedding(input, size, param_attr)      a table `_<name>.w0` [V, size] (ids, or id sequences)
    table_projection(input, size, param_attr), full_matrix_projection(input, size, param_attr)
                                            projections for mixed(size, input=[...], act, bias_attr) (and
                                            concat): weights `_<mixed>.w<i>` [V or width, size]
    mixed(size, input, act=Linear, bias_attr=False, name)    the sum of its projections
    concat(input)                           layers (or projections) side by side (their last axis)
    lstmemory(input, size, act, gate_act, state_act, bias_attr, param_attr, reverse)
                                            PaddlePaddle's LstmLayer: input [T, B, 4H] (projected in front),
                                            `_<name>.w0` (dims [H, H, 4]) and `_<name>.wbias` [1, 7H]
    grumemory(input, size, act, gate_act, bias_attr, param_attr, reverse)
                                            GatedRecurrentLayer: input [T, B, 3H], `_<name>.w0` [H, 3H],
                                            `_<name>.wbias` [1, 3H]
    pooling(input, pooling_type), last_seq(input), first_seq(input)     reductions over time
    sequence_conv(input, context_len, hidden_size, name, ...)
                                            networks.sequence_conv_pool's context projection and fc, as a
                                            convolution over time
    cos_sim(a, b, scale)                    scale * a.b / (|a| |b|), from netc's LRN

How PaddlePaddle's recurrent layers sit on netc's. netc's Lstm (Brainstorm's cell, the same peepholes
as PaddlePaddle's: i and f read c[t-1], o reads c[t]) and GRU (SINGA's) own input weights; PaddlePaddle's
read the projection in front of them, block by block: the 4H input is [in, ig, fg, og], the 3H input
[update, reset, candidate]. So the netc layer gets fixed input weights that select those blocks (FIXED:
immutable, filled by netc.v2.parameters, not PaddlePaddle parameters: never shown, counted or written),
and PaddlePaddle's parameters are COMPOSITE views of netc's per-gate ones:

* lstmemory w0, PaddlePaddle's W [H, 4H] (gates = x[t] + h[t-1] W + b): netc's Rz, Ri, Rf, Ro are its
  column blocks transposed; wbias = [b_in, b_ig, b_fg, b_og, peephole_ig, peephole_fg, peephole_og]:
  netc's bz, bi, bf, bo, pi, pf, po.
* grumemory w0: H x 2H gate weights (update, reset) then H x H for the candidate (its values in that
  order); wbias = [b_update, b_reset, b_candidate]. PaddlePaddle's h[t] = (1 - u) h[t-1] + u c, netc's
  y[t] = (1 - z) c + z y[t-1]: z = 1 - u, so netc's update gate runs on the negated pre-activation (its
  input selection -1, its z_hh and z_b the negated PaddlePaddle values); the reset acts before the
  recurrent product (netc's linear_before_reset=False), as PaddlePaddle's.

Sources: PaddlePaddle's python/paddle/trainer/config_parser.py (LstmLayer: w0 size*size*4, dims
[size, size, 4], bias size*7; GatedRecurrentLayer: w0 [size, size*3], bias size*3; TableProjection,
FullMatrixProjection dims [input, output]), trainer_config_helpers/layers.py and networks.py
(simple_lstm: a mixed layer 'lstm_transform_<name>' of 4H without bias in front; simple_gru likewise,
'<name>_transform', 3H), gserver's LstmCompute / GruCompute (gate orders, the GRU's output formula).
reverse=True (a recurrence backwards in time, each sequence from its last valid step to its first,
from a zero state, as PaddlePaddle's LstmLayer with `reversed`) is netc.api.sequence's: netc.seq_reverse of
the input, the forward layer, netc.seq_reverse of its steps, with the sequence's lengths (the layer returned
is the second reversal, '<name>.reversed'; the parameters keep their names).
FIXED also holds cos_sim's summing weight."""
from __future__ import annotations

import math

import numpy as np

from ..api import layer as L
from ..api import sequence as S
from ..api.core import Layer, make_layer
from ..api.errors import error, user_loc
from . import activation as A
from . import pooling as P
from .layerbase import act_of, as_layer, bias_fields, bind_params, default_name, init_fields, with_extra

FIXED: dict = {}       # netc parameter name -> its fixed values (netc's shape): a recurrent layer's input selection
COMPOSITE: dict = {}   # PaddlePaddle parameter name -> Composite (its values from netc's per-gate parameters)
_APPLY = {"relu": L.relu, "sigmoid": L.sigmoid, "tanh": L.tanh}


class Composite:
    """A PaddlePaddle parameter made of netc parameters: `parts` [(netc name, netc shape, sign, transposed)]
    -- each part's PaddlePaddle block is sign * its netc values (transposed when said) -- laid out by
    `kind`: "columns" (the blocks side by side, [rows, k * rows]), "gru_w" (two blocks side by side, then
    the third, flat), "flat" (the flat blocks one after another). `dims` are PaddlePaddle's."""

    def __init__(self, dims, kind, rows, parts):
        self.dims, self.kind, self.rows, self.parts = tuple(dims), kind, rows, parts

    def to_paddle(self, get) -> np.ndarray:
        """PaddlePaddle's values, flat, from `get(netc name)` (numpy, netc's shape)."""
        blocks = [sign * (get(n).T if tr else get(n)) for n, _, sign, tr in self.parts]
        return _assemble(self, blocks)

    def from_paddle(self, flat) -> dict:
        """{netc name: values in netc's shape} of PaddlePaddle's values."""
        out = {}
        for (n, shape, sign, tr), block in zip(self.parts, _split(self, np.asarray(flat, np.float64).reshape(-1))):
            v = sign * (block.T if tr else block)
            out[n] = np.ascontiguousarray(v).reshape(shape)
        return out


def _assemble(c: Composite, blocks) -> np.ndarray:
    if c.kind == "columns":           # [H, k*H]: the blocks side by side
        return np.concatenate([np.asarray(b).reshape(c.rows, -1) for b in blocks], axis=1).reshape(-1)
    if c.kind == "gru_w":             # [H, 2H] gate weights, then [H, H]
        gates = np.concatenate([np.asarray(b).reshape(c.rows, -1) for b in blocks[:2]], axis=1)
        return np.concatenate([gates.reshape(-1), np.asarray(blocks[2]).reshape(-1)])
    return np.concatenate([np.asarray(b).reshape(-1) for b in blocks])          # "flat"


def _split(c: Composite, flat) -> list:
    h = c.rows
    if c.kind == "columns":
        w = flat.reshape(h, -1)
        return [w[:, k * h:(k + 1) * h] for k in range(len(c.parts))]
    if c.kind == "gru_w":
        gates = flat[:2 * h * h].reshape(h, 2 * h)
        return [gates[:, :h], gates[:, h:], flat[2 * h * h:].reshape(h, h)]
    sizes = [math.prod(s) for _, s, _, _ in c.parts]
    return [flat[a:a + n] for a, n in zip(np.cumsum([0] + sizes[:-1]), sizes)]


def _composite(name, dims, kind, rows, parts):
    COMPOSITE[name] = Composite(dims, kind, rows, parts)


# -- projections, mixed, embedding, concat -----------------------------------------------------------

class Projection:
    """A projection for mixed / concat: kind "table" (ids -> rows of a table) or "full" (x W)."""

    def __init__(self, kind, input, size, param_attr, loc):  # noqa: A002
        self.kind, self.input, self.size, self.param_attr, self.loc = kind, input, size, param_attr, loc

    def __repr__(self):
        kind = "full_matrix" if self.kind == "full" else self.kind
        return f"paddle.layer.{kind}_projection(input='{self.input.name}', size={self.size})"


def table_projection(input, size=0, param_attr=None):  # noqa: A002
    """Rows of a table [V, size] by the input's ids (integer_value / integer_value_sequence of range V)."""
    loc = user_loc()
    x = as_layer(input, "paddle.layer.table_projection", loc)
    if x.itype is None or not x.itype.is_index:
        raise error(f"paddle.layer.table_projection reads ids (a data layer of integer_value or "
                    f"integer_value_sequence); '{x.name}' is {x.dtype} {x.shape_str()}", loc, [("defined here", x.loc)])
    return Projection("table", x, size, param_attr, loc)


def full_matrix_projection(input, size=0, param_attr=None):  # noqa: A002
    """x W, W [width, size] (no bias: the mixed layer's bias_attr gives one)."""
    loc = user_loc()
    return Projection("full", as_layer(input, "paddle.layer.full_matrix_projection", loc), size, param_attr, loc)


def _width(x: Layer) -> int:
    return x.shape[-1] if x.seq is not None else math.prod(x.shape[1:])


def _project(p: Projection, size, owner, i, bias, bfields, loc, layer_name=None) -> Layer:
    """The netc layer of projection p, the i-th input of layer `owner` (its weight `_<owner>.w<i>`), named
    layer_name (default '<owner>.proj<i>')."""
    layer_name = layer_name or f"{owner}.proj{i}"
    if not size:
        raise error(f"{p!r}: give size (of the projection or of its mixed layer)", p.loc)
    if p.kind == "table":
        v = p.input.itype.dim
        pn, pa = bind_params(owner, {"table": (f"w{i}", init_fields(p.param_attr, [v, size], p.loc), [v, size])})
        return L.embedding(p.input, size, name=layer_name, param_name=pn, param_attr=pa)
    w = _width(p.input)
    roles = {"weight": (f"w{i}", init_fields(p.param_attr, [w, size], p.loc), [w, size])}
    if bias:
        roles["bias"] = ("wbias", dict(bfields), [1, size])
    pn, pa = bind_params(owner, roles)
    return L.fc(p.input, size, bias=bias, name=layer_name, param_name=pn, param_attr=pa)


def _apply(total: Layer, a, name, loc) -> Layer:
    if a is None:
        return total
    if a == "softmax":
        if total.seq is not None:
            raise error("a softmax over a sequence's steps in a mixed layer is not in netc.v2 yet", loc)
        return L.softmax(total, name=f"{name}.prob")
    return _APPLY[a](total, name=name)


def mixed(size=0, input=None, name=None, act=None, bias_attr=False, layer_attr=None):  # noqa: A002
    """The sum of projections (table_projection, full_matrix_projection), act Linear and no bias by
    default (PaddlePaddle's mixed_layer); parameters `_<name>.w<i>`, `_<name>.wbias` [1, size]."""
    loc = user_loc()
    ps = list(input) if isinstance(input, (list, tuple)) else [input]
    if not ps or not all(isinstance(p, Projection) for p in ps):
        raise error("paddle.layer.mixed: input is a projection or a list of them (table_projection, "
                    "full_matrix_projection; other projections and operators are not in netc.v2 yet)", loc)
    size = size or ps[0].size
    for p in ps:
        if p.size and p.size != size:
            raise error(f"paddle.layer.mixed: {p!r} has size {p.size}, the layer {size}", loc)
    a = act_of(act, A.Linear(), "paddle.layer.mixed", loc)
    name = default_name("mixed", name)
    has_bias, bfields = bias_fields(bias_attr, [1, size], loc)
    full = [i for i, p in enumerate(ps) if p.kind == "full"]
    if has_bias and not full:
        raise error("paddle.layer.mixed: a bias needs a full_matrix_projection among the inputs in netc.v2", loc)
    alone = len(ps) == 1 and a is None
    parts = [_project(p, size, name, i, has_bias and i == full[0], bfields, loc, name if alone else None)
             for i, p in enumerate(ps)]
    total = parts[0] if len(parts) == 1 else L.add(*parts, name=name if a is None else f"{name}.sum")
    return with_extra(_apply(total, a, name, loc), layer_attr, name, loc)


def embedding(input, size, name=None, param_attr=None, layer_attr=None):  # noqa: A002
    """Ids (integer_value, integer_value_sequence of range V) -> rows of a table `_<name>.w0` [V, size],
    initial_smart N(0, 1/V) unless param_attr says (share a table by naming it: Param(name='_proj'))."""
    loc = user_loc()
    name = default_name("embedding", name)
    p = table_projection(input, size, param_attr)
    p.loc = loc
    return with_extra(_project(p, size, name, 0, False, None, loc, name), layer_attr, name, loc)


def concat(input, name=None, act=None, layer_attr=None, bias_attr=None):  # noqa: A002
    """Layers (or projections, each then made with its own weight `_<name>.w<i>`) side by side along the
    last axis (PaddlePaddle's concat_layer; sequences with sequences)."""
    loc = user_loc()
    xs = list(input) if isinstance(input, (list, tuple)) else [input]
    if not xs:
        raise error("paddle.layer.concat: input is a list of layers", loc)
    if bias_attr not in (None, False):
        raise error("paddle.layer.concat: bias_attr is not in netc.v2 yet", loc)
    name = default_name("concat", name)
    layers = [_project(x, x.size, name, i, False, None, loc) if isinstance(x, Projection)
              else as_layer(x, "paddle.layer.concat", loc) for i, x in enumerate(xs)]
    if len({x.seq is None for x in layers}) > 1:
        raise error("paddle.layer.concat: sequences and per-sample layers cannot be concatenated", loc)
    a = act_of(act, A.Linear(), "paddle.layer.concat", loc)
    out = L.concat(layers, axis=-1, name=name if a is None else f"{name}.cat")
    return with_extra(_apply(out, a, name, loc), layer_attr, name, loc)


# -- recurrent layers --------------------------------------------------------------------------------

def _recurrent_input(input, blocks, size, what, loc) -> tuple:
    x = S.sequence_input(as_layer(input, what, loc), what, loc)
    width = x.shape[-1]
    h = width // blocks if size is None else size
    if len(x.shape) != 3 or width != blocks * h:
        raise error(f"{what} reads its input projected in front of it, [T, B, {blocks} * size]: '{x.name}' has "
                    f"width {width}" + (f", size {size}" if size is not None else f", not a multiple of {blocks}")
                    + f" (put a mixed layer or fc of {blocks} * size, act Linear, before it)", loc,
                    [("defined here", x.loc)])
    return x, h


def _select(h, blocks, k, sign=1.0) -> np.ndarray:
    """netc's input weight [H, blocks*H] that picks block k of the projected input (times sign)."""
    w = np.zeros((h, blocks * h))
    w[np.arange(h), k * h + np.arange(h)] = sign
    return w


def _seq_act(act, default, what, loc) -> str:
    a = act_of(act, default, what, loc)
    if a == "softmax":
        raise error(f"{what}: act is Tanh, Sigmoid, Relu or Linear", loc)
    return "linear" if a is None else a


def lstmemory(input, name=None, size=None, reverse=False, act=None, gate_act=None, state_act=None,  # noqa: A002
              bias_attr=None, param_attr=None, layer_attr=None):
    """PaddlePaddle's LSTM over a sequence projected to [T, B, 4 * size] (module doc): act the block
    input's activation (Tanh by default), state_act the cell output's (Tanh by default; netc's Lstm
    cell_activation when it differs), gate_act Sigmoid; reverse=True backwards in time. Parameters `_<name>.w0` (dims [H, H, 4]) and `_<name>.wbias` [1, 7H] (no bias: bias_attr=False
    is refused, netc's Lstm has its biases and peepholes)."""
    loc, what = user_loc(), "paddle.layer.lstmemory"
    x, h = _recurrent_input(input, 4, size, what, loc)
    a = _seq_act(act, A.Tanh(), what, loc)
    cell = _seq_act(state_act, A.Tanh(), what, loc)
    if _seq_act(gate_act, A.Sigmoid(), what, loc) != "sigmoid":
        raise error(f"{what}: gate_act is Sigmoid in netc's Lstm", loc)
    if bias_attr is False:
        raise error(f"{what}: bias_attr=False is not in netc.v2 (netc's Lstm has biases and peepholes)", loc)
    name = default_name("lstmemory", name)
    wf, bf = init_fields(param_attr, [h, h, 4], loc), bias_fields(bias_attr, [1, 7 * h], loc)[1]
    wn, bn = wf.pop("name", None) or f"_{name}.w0", bf.pop("name", None) or f"_{name}.wbias"
    roles = {f"W{g}": (f"select_{g}", {"init": "constant", "value": 0.0, "immutable": True}, [h, 4 * h])
             for g in "zifo"}
    roles.update({f"R{g}": ("", {**wf, "name": f"{wn}.R{g}"}, [h, h]) for g in "zifo"})
    roles.update({f"b{g}": ("", {**bf, "name": f"{bn}.b{g}"}, [1, h]) for g in "zifo"})
    roles.update({f"p{g}": ("", {**bf, "name": f"{bn}.p{g}"}, [1, h]) for g in "ifo"})
    pn, pa = bind_params(name, roles)
    for k, g in enumerate("zifo"):
        FIXED[pn[f"W{g}"]] = _select(h, 4, k)
    _composite(wn, (h, h, 4), "columns", h, [(pn[f"R{g}"], (h, h), 1.0, True) for g in "zifo"])
    _composite(bn, (1, 7 * h), "flat", h,
               [(pn[f"b{g}"], (h,), 1.0, False) for g in "zifo"] + [(pn[f"p{g}"], (1, h), 1.0, False) for g in "ifo"])
    out = S.lstm(x, h, act=a, state_act=cell, reverse=reverse, name=name, param_name=pn, param_attr=pa)
    return with_extra(out, layer_attr, name, loc)


def grumemory(input, name=None, size=None, reverse=False, act=None, gate_act=None,  # noqa: A002
              bias_attr=None, param_attr=None, layer_attr=None):
    """PaddlePaddle's GRU over a sequence projected to [T, B, 3 * size] (module doc): act Tanh, gate_act
    Sigmoid (netc's GRU has those only); reverse=True backwards in time. Parameters `_<name>.w0` [H, 3H] and `_<name>.wbias` [1, 3H]."""
    loc, what = user_loc(), "paddle.layer.grumemory"
    x, h = _recurrent_input(input, 3, size, what, loc)
    if _seq_act(act, A.Tanh(), what, loc) != "tanh" or _seq_act(gate_act, A.Sigmoid(), what, loc) != "sigmoid":
        raise error(f"{what}: act is Tanh and gate_act Sigmoid in netc's GRU", loc)
    if bias_attr is False:
        raise error(f"{what}: bias_attr=False is not in netc.v2 yet", loc)
    name = default_name("gru", name)
    wf, bf = init_fields(param_attr, [h, 3 * h], loc), bias_fields(bias_attr, [1, 3 * h], loc)[1]
    wn, bn = wf.pop("name", None) or f"_{name}.w0", bf.pop("name", None) or f"_{name}.wbias"
    gates = (("z", -1.0), ("r", 1.0), ("c", 1.0))
    roles = {f"{g}_hx": (f"select_{g}", {"init": "constant", "value": 0.0, "immutable": True}, [h, 3 * h])
             for g, _ in gates}
    roles.update({f"{g}_hh": ("", {**wf, "name": f"{wn}.{g}_hh"}, [h, h]) for g, _ in gates})
    roles.update({f"{g}_b": ("", {**bf, "name": f"{bn}.{g}_b"}, [h]) for g, _ in gates})
    pn, pa = bind_params(name, roles)
    for k, (g, sign) in enumerate(gates):
        FIXED[pn[f"{g}_hx"]] = _select(h, 3, k, sign)
    _composite(wn, (h, 3 * h), "gru_w", h, [(pn[f"{g}_hh"], (h, h), s, True) for g, s in gates])
    _composite(bn, (1, 3 * h), "flat", h, [(pn[f"{g}_b"], (h,), s, False) for g, s in gates])
    out = S.gru(x, h, linear_before_reset=False, reverse=reverse, name=name, param_name=pn, param_attr=pa)
    return with_extra(out, layer_attr, name, loc)


# -- a convolution over time -------------------------------------------------------------------------

def sequence_conv(input, context_len, hidden_size, name, context_start=None, act=None, param_attr=None,  # noqa: A002
                  bias_attr=None, loc=None) -> Layer:
    """PaddlePaddle's context_projection (each step with its context_len neighbours from context_start,
    zeros past a sequence's ends; no trainable padding) and the fc of hidden_size over it (act Tanh), as
    one netc convolution over time: the sequence's padded steps zeroed (Mask by netc.api.sequence's
    steps_mask), viewed as an image [1, T, B, E], a (context_len x 1) filter with -context_start rows of
    zero padding, back to [T', B, hidden] (T' >= T: rows past every sequence's end, which the pooling after
    it does not read). The fc's weight `_<name>.w0` [context_len * E, hidden] is the filter [L, 1, E, H]
    (the same values in the same order), its bias `_<name>.wbias` [1, hidden]."""
    what = "paddle.networks.sequence_conv_pool"
    x = S.sequence_input(as_layer(input, what, loc), what, loc)
    if len(x.shape) != 3:
        raise error(f"{what}: input is a sequence of vectors [T, B, E], '{x.name}' has shape {x.shape_str()}", loc)
    start = -(context_len - 1) // 2 if context_start is None else context_start   # PaddlePaddle's (Python 2's) floor
    pad = -start
    if pad < 0 or 2 * pad < context_len - 1:
        raise error(f"{what}: context_start {context_start} (windows not reaching back at least half their "
                    f"length) is not in netc.v2 yet: its symmetric padding needs -context_start >= "
                    f"(context_len - 1) / 2", loc)
    a = act_of(act, A.Tanh(), what, loc)
    if a == "softmax":
        raise error(f"{what}: fc_act is Tanh, Sigmoid, Relu or Linear", loc)
    e, extra = x.shape[-1], 2 * pad - context_len + 1
    masked = make_layer("Mask", [x, S.steps_mask(x)], {}, f"{name}.masked", loc=loc)

    def as_image(t, b):
        return {"output_shape": [1, t, b, e]}
    img = make_layer("Reshape", [masked], as_image(x.shape[0], x.shape[1]), f"{name}.image", loc=loc)
    img.seq, img.at_compile = None, as_image
    wf = init_fields(param_attr, [context_len * e, hidden_size], loc)
    has_bias, bf = bias_fields(bias_attr, [1, hidden_size], loc)
    roles = {"weight": ("w0", wf, [context_len * e, hidden_size])}
    if has_bias:
        roles["bias"] = ("wbias", bf, [1, hidden_size])
    pn, pa = bind_params(name, roles)
    conv = L.conv2d(img, (context_len, 1), hidden_size, stride=(1, 1), padding=(pad, 0), act=a, bias=has_bias,
                    name=f"{name}.conv", param_name=pn, param_attr=pa)
    conv.seq = None

    def as_steps(t, b):
        return {"output_shape": [t + extra, b, hidden_size]}
    y = make_layer("Reshape", [conv], as_steps(x.shape[0], x.shape[1]), name, loc=loc)
    y.seq, y.at_compile = x.seq, as_steps
    return y


# -- reductions over time ----------------------------------------------------------------------------

def pooling(input, pooling_type=None, name=None, bias_attr=None, agg_level=None, layer_attr=None):  # noqa: A002
    """Each sequence's maximum (paddle.pooling.Max(), the default) or mean (Avg()) over its steps."""
    loc = user_loc()
    x = as_layer(input, "paddle.layer.pooling", loc)
    p = P.Max() if pooling_type is None else pooling_type() if isinstance(pooling_type, type) else pooling_type
    if not isinstance(p, P.BasePoolingType) or bias_attr not in (None, False) or agg_level is not None:
        raise error(f"paddle.layer.pooling: pooling_type is paddle.pooling.Max() or Avg() (got {pooling_type!r}); "
                    f"bias_attr and agg_level are not in netc.v2 yet", loc)
    name = default_name("seq_pooling", name)
    out = S.pooling(x, S.MaxPooling() if p.name == "max" else S.AvgPooling(), name=name)
    return with_extra(out, layer_attr, name, loc)


def last_seq(input, name=None, agg_level=None, stride=-1, layer_attr=None):  # noqa: A002
    """Each sequence's last step."""
    loc = user_loc()
    if agg_level is not None or stride != -1:
        raise error("paddle.layer.last_seq: agg_level and stride are not in netc.v2 yet", loc)
    return S.last_seq(as_layer(input, "paddle.layer.last_seq", loc), name=default_name("seq_last", name))


def first_seq(input, name=None, agg_level=None, stride=-1, layer_attr=None):  # noqa: A002
    """Each sequence's first step."""
    loc = user_loc()
    if agg_level is not None or stride != -1:
        raise error("paddle.layer.first_seq: agg_level and stride are not in netc.v2 yet", loc)
    return S.first_seq(as_layer(input, "paddle.layer.first_seq", loc), name=default_name("seq_first", name))


def cos_sim(a, b, scale=1, size=1, name=None, layer_attr=None):
    """PaddlePaddle's cos_sim: scale * a.b / (|a| |b|) per sample, [B, 1] (size=1). netc has no square
    root or division op, so each vector is normalized by netc's LRN across its features (a window of
    2D - 1 covering every feature, alpha = that window, beta 1/2, knorm 0: x / sqrt(sum x^2)), the two
    multiplied, and the products summed by an InnerProduct whose weight [D, 1] is fixed at `scale`
    (FIXED: no PaddlePaddle parameter). A zero vector gives NaN, as a division by its norm 0."""
    loc, what = user_loc(), "paddle.layer.cos_sim"
    x, y = as_layer(a, what, loc), as_layer(b, what, loc)
    if size != 1:
        raise error(f"{what}(size={size}): the cosine of a with each of several slices of b is not in netc.v2 yet",
                    loc)
    for v in (x, y):
        if v.seq is not None or len(v.shape) != 2:
            raise error(f"{what}: a and b are per-sample vectors [B, D]; '{v.name}' is {v.shape_str()}", loc,
                        [("defined here", v.loc)])
    if x.shape[1] != y.shape[1]:
        raise error(f"{what}: a has {x.shape[1]} features, b {y.shape[1]}", loc)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise error(f"{what}: scale is a number, got {scale!r}", loc)
    d = x.shape[1]
    name = default_name("cos_sim", name)
    window = 2 * d - 1
    norms = [L.lrn(L.reshape(v, [-1, 1, 1, d], name=f"{name}.{k}.image"), local_size=window, alpha=float(window),
                   beta=0.5, knorm=0.0, name=f"{name}.{k}.unit") for k, v in (("a", x), ("b", y))]
    prod = L.multiply(*norms, name=f"{name}.product")
    pn, pa = bind_params(name, {"weight": ("sum", {"init": "constant", "value": float(scale), "immutable": True},
                                           [d, 1])})
    FIXED[pn["weight"]] = np.full((d, 1), float(scale))
    out = L.fc(prod, 1, bias=False, name=name, param_name=pn, param_attr=pa)
    return with_extra(out, layer_attr, name, loc)


__all__ = ["embedding", "table_projection", "full_matrix_projection", "mixed", "concat", "lstmemory", "grumemory",
           "pooling", "last_seq", "first_seq", "cos_sim", "sequence_conv", "Projection", "Composite", "FIXED",
           "COMPOSITE"]
