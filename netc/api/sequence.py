"""Sequences in the Python API: sequence data layers, recurrent layers over time, reductions over time,
a fully connected layer at every step, and per-step costs masked by the sequences' lengths.

A sequence data layer (`data(name, integer_value_sequence(V))`, `dense_vector_sequence(d)`) is time-major,
[T, B] ids or [T, B, d] floats, as netc's sequence ops read them (docs/language.md, "Sequences"). It has
a companion data layer `<name>.lengths`, i32 [B], that no sample fills: the feeding (netc.api.trainer's
Feeder) pads each batch's sequences to T, the batch's longest, and computes it. Every layer whose result
keeps a sequence's [T, B] axes remembers that sequence (Layer.seq), so the builders here give the ops that
must not read the padding their `lengths` operand themselves: SequencePool (last_seq, first_seq,
pooling) and the per-step forms of SoftmaxLoss and EuclideanLoss (classification_cost, square_error_cost
of a sequence). Recurrent layers run over the padding (their outputs there are never read).

T is the batch's longest sequence, so a topology is compiled once per (batch size, T) it meets; compiling
costs milliseconds (docs/python.md, "Sequences"). Layers are shape-inferred at T = the declared max_len,
else 1, and show their steps as 'T'.

PaddlePaddle v2's names: lstm (its lstmemory), gru (gru_memory), recurrent (recurrent_layer), last_seq,
first_seq, pooling with MaxPooling() / AvgPooling(); how netc's recurrent layers differ from
PaddlePaddle's (which expect an input projected outside the layer) is in each builder's docstring.
"""
from __future__ import annotations

import dataclasses
import math

from .core import AUTO, Layer, ParamAttr, check_name, make_layer, one_layer
from .data_type import InputType
from .errors import error, user_loc


# -- data ------------------------------------------------------------------------------------------

def sequence_data(name: str, itype: InputType, attrs: dict, loc) -> Layer:
    """A time-major sequence data layer of `itype` ([T, B] i32 ids or [T, B, dim] f32) and its lengths
    data layer `<name>.lengths` (i32 [B], filled by the feeding)."""
    sample = () if itype.is_index else (itype.dim,)
    steps = itype.max_len or 1
    x = Layer(name, None, [], attrs, {}, (steps, 1) + sample, "i32" if itype.is_index else "f32", None, loc,
              sample_shape=sample)
    x.seq, x.itype = x, itype
    n = Layer(f"{name}.lengths", None, [], {}, {}, (1,), "i32", None, loc, sample_shape=())
    n.lengths_of, x.lengths = x, n
    return x


def sequence_input(input, what: str, loc) -> Layer:
    """The one input of a builder over time: a layer that is a time-major sequence, else an Error."""
    x = one_layer(input, what, loc)
    if x.seq is None:
        raise error(f"{what} runs over a sequence (time-major [T, B, ...], from a sequence data layer: "
                    f"data_type.integer_value_sequence / dense_vector_sequence); '{x.name}' is {x.dtype} "
                    f"{x.shape_str()}, one value per sample", loc, [("defined here", x.loc)])
    return x


# -- recurrent layers ------------------------------------------------------------------------------

_ACT = {None: "tanh", "tanh": "tanh", "sigmoid": "sigmoid", "relu": "relu", "linear": "none", "none": "none",
        "identity": "none"}


def _activation(act, what, loc, allowed=tuple(_ACT)) -> str:
    key = act.lower() if isinstance(act, str) else act
    if key not in allowed:
        raise error(f"{what}: activation {act!r} is not one netc's layer has (it takes "
                    f"{', '.join(str(a) for a in allowed if a is not None)})", loc)
    return _ACT[key]


def seq_reverse(input, name=None, **attrs) -> Layer:
    """Each sequence backwards over its valid steps, padding left at the end (netc.seq_reverse with the
    sequence's lengths): [T, B, ...] -> [T, B, ...]."""
    loc = user_loc()
    x = sequence_input(input, "seq_reverse", loc)
    return make_layer("SequenceReverse", [x, x.seq.lengths], dict(attrs), name, loc=loc, kind="seq_reverse")


def _recurrence(kind, x, attrs, name, param_name, param_attr, reverse, loc) -> Layer:
    """The recurrent layer `kind` over x; reverse=True runs it backwards in time as three layers:
    SequenceReverse of x (named '<name>.reversed_input'), the forward recurrence (named `name`, its
    parameters named as without reverse) and SequenceReverse of its steps ('<name>.reversed', returned),
    both reversals with x's lengths: each sequence runs from its last valid step to its first, from a zero
    state, its outputs at their own steps (PaddlePaddle's reverse=True; docs/sequences.md)."""
    what = {"Lstm": "lstm", "GRU": "gru", "Recurrent": "recurrent"}[kind]
    if not reverse:
        return make_layer(kind, [x], attrs, name, param_name, param_attr, loc, what)
    if name is None:
        name = f"{what}_{next(AUTO[what])}"
    check_name(name, loc)
    xr = make_layer("SequenceReverse", [x, x.seq.lengths], {}, f"{name}.reversed_input", loc=loc)
    y = make_layer(kind, [xr], attrs, name, param_name, param_attr, loc, what)
    return make_layer("SequenceReverse", [y, x.seq.lengths], {}, f"{name}.reversed", loc=loc)


def _fixed(value, want, what, loc):
    if value is not None and (not isinstance(value, str) or value.lower() != want):
        raise error(f"{what} is {want} in netc's layer, got {value!r}", loc)


def lstm(input, size: int, act="tanh", gate_act=None, state_act=None, reverse: bool = False, name=None,
         param_name=None, param_attr=None, **attrs) -> Layer:
    """An LSTM over a sequence [T, B, X] -> [T, B, size] (netc.lstm: Brainstorm's Lstm, peepholes
    included). `act` is the block input's and the cell output's activation (tanh by default; sigmoid,
    relu, linear), `state_act` the cell output's alone when it differs (PaddlePaddle's; the Lstm's
    cell_activation); the gates are sigmoids. reverse=True runs it backwards in time (_recurrence). Parameters Wz, Wi, Wf, Wo [size, X], pi, pf, po [1, size],
    Rz..Ro [size, size], bz..bo [size].

    PaddlePaddle's lstmemory computes the same cell (peepholes W_ci c[t-1], W_cf c[t-1], W_co c[t]) but
    reads an input projected OUTSIDE the layer, [T, B, 4 * size] (a mixed_layer / fc of 4 * size before
    it), and has no input weights. This layer owns its input weights W* instead, so it reads the
    sequence itself: `lstm(emb, 32)` is PaddlePaddle's `lstmemory(fc(emb, 4 * 32))`."""
    loc = user_loc()
    x = sequence_input(input, "lstm", loc)
    _fixed(gate_act, "sigmoid", "lstm's gate_act", loc)
    a = _activation(act, "lstm", loc)
    cell = a if state_act is None else _activation(state_act, "lstm's state_act", loc)
    attrs = dict(size=size, activation=a, **({"cell_activation": cell} if cell != a else {}), **attrs)
    return _recurrence("Lstm", x, attrs, name, param_name, param_attr, reverse, loc)


def gru(input, size: int, act=None, gate_act=None, reverse: bool = False, bias: bool = True,
        linear_before_reset: bool | None = None, name=None, param_name=None, param_attr=None, **attrs) -> Layer:
    """A GRU over a sequence [T, B, X] -> [T, B, size] (netc.gru: SINGA's kGRU): z, r sigmoid gates, the
    candidate tanh(x c_hx^T + r * (h c_hh^T) + c_b), y[t] = (1 - z) * c + z * y[t-1]; weights z_hx, r_hx,
    c_hx [size, X], z_hh, r_hh, c_hh [size, size], biases z_b, r_b, c_b [size] (bias=False: none), no
    recurrent bias. linear_before_reset=False applies the reset before the recurrent product (Cho et al.).

    PaddlePaddle's gru_memory reads an input projected outside the layer, [T, B, 3 * size], with no
    input weights; this layer projects the sequence itself. Its only activations are tanh and sigmoid
    gates (`act`, `gate_act` may say so)."""
    loc = user_loc()
    x = sequence_input(input, "gru", loc)
    _fixed(act, "tanh", "gru's act", loc)
    _fixed(gate_act, "sigmoid", "gru's gate_act", loc)
    return _recurrence("GRU", x, dict(dim_hidden=size, bias=None if bias else False,
                                      linear_before_reset=linear_before_reset, **attrs),
                       name, param_name, param_attr, reverse, loc)


def recurrent(input, size: int, act="tanh", reverse: bool = False, name=None, param_name=None, param_attr=None,
              **attrs) -> Layer:
    """A simple (Elman) recurrent layer over a sequence [T, B, X] -> [T, B, size] (netc.recurrent:
    Brainstorm's Recurrent): y[t] = act(x[t] W^T + y[t-1] R^T + bias), act tanh by default (sigmoid, relu,
    linear). Parameters W [size, X], R [size, size], bias [size].

    PaddlePaddle's recurrent_layer is y[t] = act(x[t] + y[t-1] W + b): its input is already of the
    layer's size (projected outside) and it has no input weights; this one has W."""
    loc = user_loc()
    x = sequence_input(input, "recurrent", loc)
    return _recurrence("Recurrent", x, dict(size=size, activation=_activation(act, "recurrent", loc), **attrs),
                       name, param_name, param_attr, reverse, loc)


# -- the steps mask -----------------------------------------------------------------------------------

def steps_mask(input, name=None) -> Layer:
    """The steps mask of a sequence, f32 [T, B, 1]: 1 at each sample's steps, 0 at the padding after them
    (a data layer '<data>.mask' that the feeding fills, one per sequence data layer), for the Mask op:
    `Mask(x, steps_mask(x))` zeroes a sequence's padded steps (which otherwise hold, say, the embedding of
    id 0)."""
    loc = user_loc()
    x = sequence_input(input, "steps_mask", loc).seq
    owner, m = _MASKS.get(id(x), (None, None))
    if owner is not x:
        m = Layer(name or f"{x.name}.mask", None, [], {}, {}, (x.shape[0], 1, 1), "f32", None, loc, sample_shape=(1,))
        m.mask_of = x
        _MASKS[id(x)] = (x, m)
    return m


_MASKS: dict = {}      # id(sequence data layer) -> (it, its mask data layer): one mask per data layer


# -- reductions over time --------------------------------------------------------------------------

class MaxPooling:
    """pooling()'s maximum over each sequence's steps (PaddlePaddle's MaxPooling)."""
    mode = "max"


class AvgPooling:
    """pooling()'s mean over each sequence's steps (PaddlePaddle's AvgPooling; netc has its 'average'
    strategy, the sum divided by the sequence's length)."""
    mode = "mean"

    def __init__(self, strategy: str = "average"):
        self.strategy = strategy


def _pool(input, mode, what, name, attrs, loc) -> Layer:
    x = sequence_input(input, what, loc)
    return make_layer("SequencePool", [x, x.seq.lengths], dict(mode=mode, **attrs), name, loc=loc, kind=what)


def last_seq(input, name=None, **attrs) -> Layer:
    """Each sequence's last valid step: [T, B, ...] -> [B, ...] (SequencePool mode last)."""
    return _pool(input, "last", "last_seq", name, attrs, user_loc())


def first_seq(input, name=None, **attrs) -> Layer:
    """Each sequence's first step: [T, B, ...] -> [B, ...] (SequencePool mode first)."""
    return _pool(input, "first", "first_seq", name, attrs, user_loc())


def pooling(input, pooling_type=None, name=None, **attrs) -> Layer:
    """A reduction over each sequence's valid steps, [T, B, ...] -> [B, ...]: pooling_type MaxPooling()
    (the default, as PaddlePaddle's) or AvgPooling() (the mean)."""
    loc = user_loc()
    p = MaxPooling() if pooling_type is None else pooling_type
    if isinstance(p, type):
        p = p()
    if not isinstance(p, (MaxPooling, AvgPooling)):
        raise error(f"pooling_type is MaxPooling() or AvgPooling(), got {pooling_type!r} (netc's SequencePool has "
                    f"no sum or sqrt-n pooling)", loc)
    if isinstance(p, AvgPooling) and p.strategy != "average":
        raise error(f"AvgPooling(strategy={p.strategy!r}): netc's SequencePool has the 'average' strategy only "
                    f"(the sum of the valid steps divided by the sequence's length)", loc)
    return _pool(input, p.mode, "pooling", name, attrs, loc)


# -- a fully connected layer at every step -----------------------------------------------------------

def fc_steps(x: Layer, size: int, act, bias: bool, name, param_name, param_attr, attrs: dict, loc) -> Layer:
    """fc of a sequence: the same InnerProduct at every step, [T, B, F] -> [T, B, size], as views
    [T*B, F] -> '<name>.fc' -> [T, B, size] (the layer `name`); parameters `<name>.weight`, `<name>.bias`
    as a plain fc's (unless bound otherwise). act "softmax": a per-step softmax '<name>.prob' after it."""
    name = name or f"fc_{next(AUTO['fc'])}"
    check_name(name, loc)
    feat = math.prod(x.shape[2:])
    rows = make_layer("Reshape", [x], {"output_shape": [-1, feat]}, f"{name}.rows", loc=loc)
    ip = make_layer("InnerProduct", [rows], dict(num_outputs=size, activation=act if act != "softmax" else None,
                                                 bias=None if bias else False, **attrs),
                    f"{name}.fc", param_name, param_attr, loc)
    rows.seq = ip.seq = None        # [T*B, ...]: rows, whatever T and B were at inference
    for role in ip.param_shapes:
        pa = ip.params.get(role) or ParamAttr()
        if pa.name is None:
            ip.params[role] = dataclasses.replace(pa, name=f"{name}.{role}")
    out = back_to_steps(ip, x, name, loc)
    if act != "softmax":
        return out
    prob = make_layer("Softmax", [make_layer("Reshape", [out], {"output_shape": [-1, size]}, f"{name}.logits",
                                             loc=loc)], {}, f"{name}.softmax", loc=loc)
    return back_to_steps(prob, x, f"{name}.prob", loc)


def back_to_steps(rows: Layer, like: Layer, name: str, loc) -> Layer:
    """rows [T*B, F] as the time-major [T, B, F] of `like`'s sequence (its reshape reads T and B when the
    topology is compiled)."""
    feat = list(rows.shape[1:])

    def at_compile(t, b):
        return {"output_shape": [t, b] + feat}
    y = make_layer("Reshape", [rows], at_compile(like.shape[0], like.shape[1]), name, loc=loc)
    y.seq, y.at_compile = like.seq, at_compile
    return y


# -- per-step costs --------------------------------------------------------------------------------

def step_logits(x: Layer) -> Layer:
    """The logits under fc_steps' per-step softmax ('<name>.prob' -> '<name>.softmax' -> '<name>.logits'
    -> '<name>'); any other layer is its own."""
    try:
        sm = x.inputs[0]
        if x.at_compile is not None and sm.opdef.name == "softmax" and sm.inputs[0].opdef.name == "reshape":
            return sm.inputs[0].inputs[0]
    except (IndexError, AttributeError):
        pass
    return x


def step_cost(kind: str, x: Layer, label, name, attrs: dict, loc) -> Layer:
    """A SoftmaxLoss / EuclideanLoss at every valid step of the sequence x [T, B, ...] against per-step
    labels (a sequence of the same lengths), averaged over the valid steps: the loss's lengths form."""
    if kind == "SoftmaxLoss":
        x = step_logits(x)
    y = one_layer(label, "a cost", loc)
    if y.seq is None:
        raise error(f"a cost of the sequence '{x.name}' ({x.shape_str()}) compares every step, so its label is a "
                    f"sequence too (data_type.integer_value_sequence for classes, dense_vector_sequence for "
                    f"values); '{y.name}' is {y.dtype} {y.shape_str()}, one per sample", loc,
                    [("the label is made here", y.loc), "to classify whole sequences, reduce x over time first "
                     "(last_seq, pooling)"])
    return make_layer(kind, [x, y, x.seq.lengths], attrs, name, loc=loc, kind="cost")


# -- feeding ---------------------------------------------------------------------------------------

def _what(x: Layer) -> str:
    return f"data layer '{x.name}' ({x.itype!r})" if x.itype is not None else f"data layer '{x.name}'"


def sample_steps(x: Layer, col, loc) -> list:
    """The samples of the sequence data layer x as arrays [steps, ...] (ids as int64), checked: each a
    list of steps of x's step shape, 1 to max_len steps, ids in range, integers where x holds ids."""
    import numpy as np
    out = []
    want = tuple(x.sample_shape)
    for i, s in enumerate(col):
        if hasattr(s, "detach"):
            s = s.detach().cpu().numpy()
        if isinstance(s, (int, float, str, bytes)) or not hasattr(s, "__len__"):
            raise error(f"sample {i} for the sequence {_what(x)} is the {type(s).__name__} {s!r}, not a list of "
                        f"steps", loc,
                        [("the data layer is made here", x.loc)])
        try:
            a = np.asarray(s)
        except ValueError as e:
            raise error(f"sample {i} for the sequence {_what(x)}: its steps do not form an array ({e})", loc,
                        [("the data layer is made here", x.loc)]) from None
        if a.ndim == 1 and a.size == 0 and want:
            a = a.reshape((0,) + want)
        if a.ndim < 1 or tuple(a.shape[1:]) != want or a.dtype.kind not in "fiub":
            raise error(f"sample {i} for the sequence {_what(x)} has shape {list(a.shape)} ({a.dtype}); it takes "
                        f"[steps{''.join(f', {d}' for d in want)}] numbers", loc,
                        [("the data layer is made here", x.loc)])
        if x.itype.is_index and a.dtype.kind == "f" and not np.array_equal(a, np.round(a)):
            raise error(f"sample {i} for the sequence {_what(x)} holds ids: its steps must hold integers, got "
                        f"fractional values", loc, [("the data layer is made here", x.loc)])
        if len(a) < 1:
            raise error(f"sample {i} for the sequence {_what(x)} is empty; a sequence has at least one step", loc,
                        [("the data layer is made here", x.loc)])
        if x.itype.max_len is not None and len(a) > x.itype.max_len:
            raise error(f"sample {i} for the sequence {_what(x)} has {len(a)} steps, more than its max_len "
                        f"{x.itype.max_len}", loc, [("the data layer is made here", x.loc)])
        out.append(a)
    return out


def check_ids(x: Layer, arr, loc, steps: bool = False) -> None:
    """An Error unless the ids `arr` ([B] or [T, B] padded) of an integer_value data layer are integers
    in 0 .. dim-1."""
    import numpy as np
    if arr.dtype.kind == "f" and not np.array_equal(arr, np.round(arr)):
        raise error(f"{_what(x)} holds integer ids: its samples must hold integers, got fractional values", loc,
                    [("the data layer is made here", x.loc)])
    bad = np.argwhere((arr < 0) | (arr >= x.itype.dim))
    if len(bad):
        where = tuple(int(i) for i in bad[0])
        at = f"sample {where[1]}, step {where[0]}" if steps else f"sample {where[0]}"
        raise error(f"{_what(x)}: id {arr[where]:g} at {at} is outside 0 to {x.itype.dim - 1}", loc,
                    [("the data layer is made here", x.loc)])


def padded(x: Layer, seqs: list, t: int):
    """[T, B, ...] of the samples' steps, zeros after each one's end (ids as int64)."""
    import numpy as np
    arr = np.zeros((t, len(seqs)) + tuple(x.sample_shape), np.int64 if x.itype.is_index else np.float64)
    for b, a in enumerate(seqs):
        arr[:len(a), b] = a
    return arr


def aligned_sequences(layers) -> list:
    """Pairs of sequence data layers one layer reads together (a per-step cost of one against the labels of
    the other): their samples must have equal lengths."""
    out = []
    for x in layers:
        srcs = []
        for i in x.inputs:
            if i.seq is not None and all(i.seq is not s for s in srcs):
                srcs.append(i.seq)
        out.extend((srcs[0], s, x) for s in srcs[1:])
    return out


def unpad(y, lengths) -> list:
    """A time-major [T, B, ...] result as a list of each sample's valid steps [lengths[b], ...]."""
    return [y[:int(n), b] for b, n in enumerate(lengths)]


__all__ = ["lstm", "gru", "recurrent", "last_seq", "first_seq", "pooling", "MaxPooling", "AvgPooling", "steps_mask",
           "sequence_data", "sequence_input", "fc_steps", "back_to_steps", "step_logits", "step_cost", "sample_steps",
           "check_ids", "padded", "aligned_sequences", "unpad"]
