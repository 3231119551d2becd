"""Brainstorm architecture dictionaries -> netc IR (shared/spec/layout-format.md §6, corpus/brainstorm).

A Brainstorm (IDSIA, HEAD 8f1fc88) network is described by an *architecture*: a dict mapping layer
names to `{"@type": ..., "@outgoing_connections": {output: ["Layer" | "Layer.input", ...]}, kwargs}`.
netc reads it either bare (a JSON object whose values are such layer dicts) or wrapped, as in the
corpus files `corpus/brainstorm/*.layout.json` (`{"architecture": {...}, "layout": {...}, ...}`).

Time dimension. Brainstorm shapes are `(T, B) + feature shape`. An architecture without a
recurrent layer is feed-forward at every step, so the importer fixes **T = 1** and folds the two
leading axes into one batch axis of size `B` (the `batch` argument, `--batch` on the command line,
default 1): a Brainstorm `('T', 'B', 784)` becomes netc `[B, 784]`. An architecture with a recurrent
layer (`Lstm`, `Recurrent`, `Clockwork`) is imported **time-major**, as Brainstorm runs it: every
time-sized input `('T', 'B', ...)` becomes a sequence `[T, B, ...]` (T = the `time` argument, default
1), the recurrent layers read and write whole sequences, and the feed-forward layers apply at every
step (a FullyConnected or SoftmaxCE reshapes [T, B, F] to [T*B, F] and back, Brainstorm's
flatten_time); fan-in concatenates along the first feature axis (axis 2). The recurrent layers start
from a zero state (Brainstorm's context before the first call). Other recurrent types (LstmOpt, ...)
are refused with a "not yet supported" diagnostic.

Mapping (one Brainstorm layer may become several netc ops; a layer with several outputs gets one
op per output, named `Layer.output`; a layer with only `default` keeps its own name):

| Brainstorm | netc |
|---|---|
| `Input(out_shapes={name: shape})` | one `input` per output, named `Input.<name>` (also when there is one) |
| `FullyConnected(size, activation)` | `inner_product` (`num_outputs` = prod(size), `activation`: rel -> relu, linear -> none, tanh, sigmoid; default rel); a `reshape` when `size` has several dims |
| `Dropout(drop_prob)` | `dropout` with `dropout_keep_prob = 1 - drop_prob` |
| `SoftmaxCE` (inputs default, targets; outputs predictions, loss) | `Layer.predictions = Softmax(default)`, `Layer.loss = SoftmaxLoss(default, targets)` |
| `Elementwise(activation)` | `relu` / `tanh` / `sigmoid` (linear: an `identity`) |
| `Merge` (inputs inputs_1, inputs_2, ...) | `concat` along the last feature axis |
| `NoOp` | `identity` |
| `Loss(importance)` | nothing: its input (one loss below, importance 1) becomes a network output (an `output` statement) |
| `Convolution2D(num_filters, kernel_size, stride, padding, activation)` | `conv2d` (NHWC as Brainstorm; explicit padding [p, p]; activation default tanh, the layer's setup's) |
| `Pooling2D(kernel_size, type, stride, padding)` | `maxpool` / `avgpool` (the average over in-bounds pixels, as Brainstorm's) |
| `BatchNorm(decay, epsilon)` | `batch_norm` (momentum = decay; Brainstorm's mu and sigma are netc's running statistics) |
| `Mask` (inputs default, mask) | `mask` (broadcast; no gradient for the mask); a data mask of x's shape: `elementwise` product |
| `SquaredDifference` (inputs inputs_1, inputs_2) | `squared_difference` |
| `DeltasScaling(factor)` | `deltas_scaling` (the identity; its gradient times factor); factor 1: `identity` |
| `SquaredError`, `SigmoidCE` (outputs predictions, loss) | `identity` / `sigmoid` predictions; `euclidean_loss` / `binomial_ce {logits: true}` (SquaredError's loss read per element or time-major: `squared_difference {factor: 0.5}`, a Loss of it `decay_loss {norm: sum}`) |
| `BinomialCrossEntropy` | `binomial_ce {logits: false}` |
| `L1Decay`, `L2Decay` (output loss) | `decay_loss {norm: l1 / l2}` |

A scalar loss output may only feed a `Loss` (netc's losses are
the batch mean a Loss makes of Brainstorm's per-element loss); a Loss of any other value is `decay_loss {norm: sum}`. `@outgoing_connections`
may be a list: the targets of the output `default` (Brainstorm's tests write it so).
| `Lstm(size, activation)` | `lstm` (activation default tanh, Brainstorm's; `size` default: the input's feature size, as Brainstorm) |
| `Recurrent(size, activation)` | `recurrent` (the same defaults) |
| `Clockwork(size, activation)` | `clockwork` (the same defaults; its `timing` is a parameter, as in Brainstorm) |
| `ClockworkLstm(size, activation)` | `clockwork_lstm` (the same defaults; Lstm's parameters and `timing`) |
| `Highway` (inputs H, T, x) | `highway` (operands H, T, x: y = T * (H - x) + x) |

Several connections into one input are Brainstorm's zero-copy fan-in: the sources are concatenated
along the first feature axis (a `concat` op named `Layer.input.concat`), in the order Brainstorm's hub lays
them out (brainstorm_structure.fan_in_orders: alphabetical for an input that reads them alone, the first
contiguous permutation where several inputs share sources); an architecture no order can lay out is refused.

Every output that no layer consumes, and every Loss input, is listed in one `output` statement, so
that nothing Brainstorm computes is dead code in netc. Numbers: a Brainstorm loss is `(T, B, 1)`
per step then reduced to `(1,)` by a Loss layer; netc's SoftmaxLoss is already the scalar batch mean.
"""
from __future__ import annotations

import math

from ..diagnostics import SOURCES, DiagnosticEngine, Loc, NetcError, did_you_mean
from ..ir.core import UNRANKED, Module, Operation, Region
from .brainstorm_structure import LayoutFailure, StructureError, fan_in_orders
from .jsonloc import load_json, path_join
from .paleo import network_name

ACTIVATIONS = {"rel": "relu", "linear": "none", "tanh": "tanh", "sigmoid": "sigmoid"}
RECURRENT = {"LSTM", "LstmOpt", "RNN", "Rnn", "ClockworkRnn", "GRU", "Gru"}
SEQUENCE = {"Lstm": "netc.lstm", "Recurrent": "netc.recurrent", "Clockwork": "netc.clockwork",   # time-major
            "ClockworkLstm": "netc.clockwork_lstm"}
NOT_AN_OP: dict = {}     # @type -> why netc has no op for it (a located error); none left
# @type -> (input names, output names); None = any / given by kwargs
LAYER_IO = {
    "Input": ((), None),
    "FullyConnected": (("default",), ("default",)),
    "Dropout": (("default",), ("default",)),
    "SoftmaxCE": (("default", "targets"), ("predictions", "loss")),
    "SigmoidCE": (("default", "targets"), ("predictions", "loss")),
    "SquaredError": (("default", "targets"), ("predictions", "loss")),
    "BinomialCrossEntropy": (("default", "targets"), ("default",)),
    "Elementwise": (("default",), ("default",)),
    "NoOp": (("default",), ("default",)),
    "Loss": (("default",), ("loss",)),
    "Merge": (None, ("default",)),
    "Convolution2D": (("default",), ("default",)),
    "Pooling2D": (("default",), ("default",)),
    "BatchNorm": (("default",), ("default",)),
    "Mask": (("default", "mask"), ("default",)),
    "DeltasScaling": (("default",), ("default",)),
    "L1Decay": (("default",), ("loss",)),
    "L2Decay": (("default",), ("loss",)),
    "SquaredDifference": (("inputs_1", "inputs_2"), ("default",)),
    "Highway": (("H", "T", "x"), ("default",)),
    **{t: (("default",), ("default",)) for t in SEQUENCE},
}
KWARGS = {"Input": {"out_shapes"}, "FullyConnected": {"size", "activation"}, "Dropout": {"drop_prob"},
          "SoftmaxCE": set(), "SigmoidCE": set(), "SquaredError": set(), "BinomialCrossEntropy": set(),
          "Elementwise": {"activation"}, "NoOp": set(), "Loss": {"importance"}, "Merge": set(),
          "Convolution2D": {"num_filters", "kernel_size", "stride", "padding", "activation"},
          "Pooling2D": {"kernel_size", "type", "stride", "padding", "activation_function"},
          "BatchNorm": {"decay", "epsilon"}, "Mask": set(), "DeltasScaling": {"factor"}, "L1Decay": set(),
          "L2Decay": set(), "SquaredDifference": set(), "Highway": set(), **{t: {"size", "activation"} for t in SEQUENCE}}
# outputs netc computes as a scalar loss (the batch mean, what a Loss layer makes of them): only a Loss may read them
LOSS_OUTPUTS = {("SoftmaxCE", "loss"), ("SigmoidCE", "loss"), ("SquaredError", "loss"),
                ("BinomialCrossEntropy", "default"), ("L1Decay", "loss"), ("L2Decay", "loss")}
# layer types that image a (T, B, H, W, C) value per step with their own 4-D op: feed-forward nets only (T = 1)
IMAGE_LAYERS = {"Convolution2D", "Pooling2D"}


def is_brainstorm(data) -> bool:
    """A JSON document with an "architecture" object, or an object of `@type` layer dicts."""
    if not isinstance(data, dict) or not data:
        return False
    if isinstance(data.get("architecture"), dict):
        return True
    return all(isinstance(v, dict) and "@type" in v for v in data.values()) and data.get("@type") is None


def is_bare_hub_layout(data) -> bool:
    return isinstance(data, dict) and (data.get("@type") == "BufferView" or (
        isinstance(data.get("layout"), dict) and data["layout"].get("@type") == "BufferView"
        and "architecture" not in data))


def _feature_shape(shape):
    """('T', 'B', 28, 28, 1) -> [28, 28, 1]; None if it is not a (T, B) + ints template."""
    if not isinstance(shape, list) or len(shape) < 2 or shape[0] != "T" or shape[1] != "B":
        return None
    feat = shape[2:]
    if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in feat):
        return None
    return list(feat)


class _Importer:
    def __init__(self, file, locs, diag, batch, time=1):
        self.file, self.locs, self.diag, self.batch, self.time = file, locs, diag, batch, time
        self.time_major = False
        self.width: dict = {}    # op name -> its feature width (elements per step and sample), where known
        self.list_form: set = set()   # layers whose @outgoing_connections is a list
        self.feat: dict = {}     # op name -> its feature shape (per step and sample), where known
        self.fan_in: dict = {}   # input path -> its sources' output paths in Brainstorm's order (several only)

    @property
    def lead(self) -> list:
        """The leading axes of a layer's value: [T, B] time-major, else [B]."""
        return [self.time, self.batch] if self.time_major else [self.batch]

    def loc(self, path):
        return self.locs.get(path) or Loc(self.file, 1, 1, path)

    def error(self, msg, path):
        return self.diag.error(msg, self.loc(path))

    def module(self, arch, root, name, title=None):
        layers = {}
        for lname, spec in arch.items():
            p = path_join(root, lname)
            if not isinstance(spec, dict):
                self.error(f"Brainstorm layer '{lname}' must be an object with \"@type\"", p)
                continue
            t = spec.get("@type")
            if not isinstance(t, str):
                self.error(f"Brainstorm layer '{lname}' has no \"@type\" string", p)
                continue
            if t in NOT_AN_OP:
                self.error(NOT_AN_OP[t].format(name=lname), path_join(p, "@type"))
                continue
            if t in RECURRENT:
                d = self.error(f"Brainstorm layer '{lname}' of type {t} is recurrent: this recurrent layer type is not "
                               f"yet supported (netc imports {', '.join(SEQUENCE)})", path_join(p, "@type"))
                hint = did_you_mean(t, list(SEQUENCE))
                if hint:
                    d.note(f"did you mean '{hint}'?")
                continue
            if t not in LAYER_IO:
                d = self.error(f"unknown or unsupported Brainstorm layer type '{t}' for layer '{lname}'",
                               path_join(p, "@type"))
                hint = did_you_mean(t, list(LAYER_IO))
                if hint:
                    d.note(f"did you mean '{hint}'?")
                else:
                    d.note("supported: " + ", ".join(LAYER_IO))
                continue
            for k in spec:
                if not k.startswith("@") and k not in KWARGS[t]:
                    self.diag.warning(f"{t} layer '{lname}' has an argument \"{k}\" netc does not read; ignored",
                                      self.loc(path_join(p, k)))
            layers[lname] = (t, spec, p)
        if diag_errors(self.diag):
            raise NetcError(self.diag.diagnostics[:])
        self.types = {n: v[0] for n, v in layers.items()}
        self.time_major = any(t in SEQUENCE for t in self.types.values())
        # SquaredError layers whose loss is per element (time-major: Brainstorm's Loss divides by B, not T*B)
        self.per_element = {n for n, t in self.types.items() if t == "SquaredError" and self.time_major}
        # outputs of each layer, and connections
        outputs = {}
        for lname, (t, spec, p) in layers.items():
            if t == "Input":
                osh = spec.get("out_shapes")
                if not isinstance(osh, dict) or not osh:
                    self.error(f"Input layer '{lname}' needs \"out_shapes\": {{name: ['T', 'B', ...]}}",
                               path_join(p, "out_shapes") if "out_shapes" in spec else p)
                    outputs[lname] = ()
                else:
                    outputs[lname] = tuple(osh)
            else:
                outputs[lname] = LAYER_IO[t][1]
        sinks: dict[tuple, list] = {}  # (layer, input) -> [(src op name, src path), ...]
        consumed = set()
        for lname, (t, spec, p) in layers.items():
            oc = spec.get("@outgoing_connections", {})
            ocp = path_join(p, "@outgoing_connections")
            if isinstance(oc, list):    # Brainstorm's other form: the targets of the output 'default'
                oc = {"default": oc}
                self.list_form.add(lname)
            if not isinstance(oc, dict):
                self.error(f"\"@outgoing_connections\" of '{lname}' must be an object {{output: [targets]}} or a "
                           f"list of the targets of its output 'default'", ocp)
                continue
            for out, targets in oc.items():
                op_ = ocp if lname in self.list_form else path_join(ocp, out)
                if out not in outputs[lname]:
                    self.error(f"layer '{lname}' ({t}) has no output '{out}' (outputs: "
                               f"{', '.join(outputs[lname]) or 'none'})", op_)
                    continue
                if not isinstance(targets, list) or not all(isinstance(x, str) for x in targets):
                    self.error(f"the connections of '{lname}.{out}' must be a list of 'Layer' or 'Layer.input'", op_)
                    continue
                for i, tgt in enumerate(targets):
                    tp = path_join(op_, i)
                    tl, _, tin = tgt.partition(".")
                    tin = tin or "default"
                    if tl not in layers:
                        d = self.error(f"'{lname}.{out}' connects to unknown layer '{tl}'", tp)
                        hint = did_you_mean(tl, list(layers))
                        if hint:
                            d.note(f"did you mean '{hint}'?")
                        continue
                    tt = layers[tl][0]
                    ins = LAYER_IO[tt][0]
                    if ins is not None and tin not in ins:
                        self.error(f"layer '{tl}' ({tt}) has no input '{tin}' (inputs: {', '.join(ins) or 'none'})", tp)
                        continue
                    if t == "Loss":
                        self.error(f"'{lname}.{out}', the output of Loss '{lname}', is read by {tt} '{tl}': in netc a "
                                   f"loss is the training objective, which no layer reads", tp)
                        continue
                    if (t, out) == ("SquaredError", "loss") and tt != "Loss":
                        self.per_element.add(lname)    # read per element (a Mask, ...): 0.5 (x - t)^2
                    elif (t, out) in LOSS_OUTPUTS and tt != "Loss":
                        self.error(f"'{lname}.{out}' is a loss, which netc computes as the batch mean (what a Loss "
                                   f"layer makes of it); only a Loss layer may read it here, not {tt} '{tl}'", tp)
                        continue
                    sinks.setdefault((tl, tin), []).append((self.ref(lname, out, outputs), f"{lname}.outputs.{out}", tp))
                    consumed.add((lname, out))
        if diag_errors(self.diag):     # a bad connection: the inputs it leaves unconnected would only repeat it
            raise NetcError(self.diag.diagnostics[:])
        try:    # the feature order of each fan-in: Brainstorm's hub order (brainstorm_structure.py)
            self.fan_in = fan_in_orders(arch, root)
        except LayoutFailure as e:
            self.error(e.msg, e.path)
        except StructureError:
            self.fan_in = {}     # what is wrong is reported below, layer by layer
        ops, outs = [], []
        for lname in self.order(layers, sinks):
            t, spec, p = layers[lname]
            ops.extend(self.layer(lname, t, spec, p, sinks, outputs, outs))
        if diag_errors(self.diag):
            raise NetcError(self.diag.diagnostics[:])
        for lname, (t, spec, p) in layers.items():
            if t == "Loss":
                continue
            for out in outputs[lname]:
                if (lname, out) not in consumed:
                    outs.append(self.ref(lname, out, outputs))
        body = list(ops)
        if outs:
            o = Operation("netc.output", attrs={"parents": list(dict.fromkeys(outs))}, loc=self.loc(root))
            o.attr_locs = {}
            body.append(o)
        net = Operation("netc.network", attrs={"sym_name": name}, regions=[Region(body)], loc=self.loc(root))
        if title:
            net.attrs["title"] = title
        m = Module([net], loc=Loc(self.file, 1, 1))
        m.attrs["source"] = self.file
        return m

    def ref(self, lname, out, outputs):
        outs = outputs.get(lname, ())
        return lname if outs == ("default",) and self.types.get(lname) != "Input" else f"{lname}.{out}"

    @staticmethod
    def order(layers, sinks):
        """Topological order, ties by name (Brainstorm's canonical order for these nets)."""
        deps = {n: set() for n in layers}
        for (tl, _), srcs in sinks.items():
            for _, spath, _ in srcs:
                deps[tl].add(spath.split(".outputs.")[0])
        done, order = set(), []
        while len(order) < len(layers):
            ready = sorted(n for n in layers if n not in done and deps[n] <= done)
            if not ready:  # a cycle: keep going, resolve-names reports it
                ready = sorted(n for n in layers if n not in done)
            order.append(ready[0])
            done.add(ready[0])
        return order

    def _inputs(self, lname, t, p, sinks, names, out_ops, required=True):
        res = []
        for inp in names:
            srcs = sinks.get((lname, inp))
            if not srcs:
                if required:
                    self.error(f"input '{inp}' of {t} layer '{lname}' is not connected (Brainstorm requires every "
                               f"input to be connected)", p)
                res.append(None)
                continue
            if len(srcs) == 1:
                res.append(srcs[0][0])
                continue
            order = self.fan_in.get(f"{lname}.inputs.{inp}", [])
            srcs = sorted(srcs, key=lambda s: (order.index(s[1]) if s[1] in order else len(order), s[1]))
            cname = f"{lname}.{inp}.concat"
            self.set_feat(cname, self.joined([s[0] for s in srcs], 0))
            self.width[cname] = self.sum_width(s[0] for s in srcs)
            op = Operation("netc.concat", result_types=[UNRANKED],   # along the first feature axis
                           attrs={"name": cname, "parents": [s[0] for s in srcs], "dim": len(self.lead)},
                           loc=self.loc(p))
            op.attr_locs = {f"parent{i}": self.loc(s[2]) for i, s in enumerate(srcs)}
            out_ops.append(op)
            res.append(cname)
        return res

    def steps_shape(self, name) -> list:
        """[T*B, F] for a [T, B, ...] value: -1 for T*B where its width F is known (so that a run that rescales
        the inputs' first axis keeps it consistent)."""
        w = self.width.get(name)
        return [-1, w] if w else [self.time * self.batch, -1]

    def joined(self, names, axis):
        """The feature shape of values concatenated along a feature axis (0: the first, -1: the last), or None."""
        fs = [self.feat.get(n) for n in names]
        if None in fs or len({len(f) for f in fs}) != 1:
            return None
        rest = {tuple(f[:axis] if axis else f[1:]) for f in fs}
        if len(rest) != 1:
            return None
        total = sum(f[axis] for f in fs)
        return [total] + fs[0][1:] if axis == 0 else fs[0][:-1] + [total]

    def sum_width(self, names):
        ws = [self.width.get(n) for n in names]
        return None if None in ws else sum(ws)

    def _op(self, opname, name, parents, attrs, p, src_locs=None):
        op = Operation(opname, result_types=[UNRANKED], attrs={"name": name, "parents": list(parents), **attrs},
                       loc=self.loc(p))
        op.attr_locs = {"name": self.loc(p), **{f"parent{i}": self.loc(p) for i in range(len(parents))}}
        return op

    def layer(self, lname, t, spec, p, sinks, outputs, outs):
        ops: list = []
        if t == "Input":
            osh = spec.get("out_shapes")
            for out, shape in (osh.items() if isinstance(osh, dict) else ()):  # (else reported in module())
                sp = path_join(path_join(p, "out_shapes"), out)
                feat = _feature_shape(shape)
                if feat is None:
                    self.error(f"output '{out}' of Input '{lname}' needs a shape ['T', 'B', d1, ...] with positive "
                               f"integer feature dims, got {shape!r}", sp)
                    continue
                self.set_feat(f"{lname}.{out}", feat)
                op = Operation("netc.input", result_types=[UNRANKED],
                               attrs={"name": f"{lname}.{out}", "shape": self.lead + feat, "dtype": "f32"},
                               loc=self.loc(sp))
                op.attr_locs = {"name": self.loc(sp), "shape": self.loc(sp)}
                if len(self.lead) == 2:      # time-major (T, B, ...): the samples are axis 1 (--batch, --data)
                    op.attrs["batch_axis"] = 1
                ops.append(op)
            return ops
        if t == "Merge":
            names = sorted((k[1] for k in sinks if k[0] == lname), key=lambda s: (len(s), s))
            ins = self._inputs(lname, t, p, sinks, names, ops)
            if len(ins) < 2:
                self.error(f"Merge layer '{lname}' needs at least two connected inputs", p)
                return ops
            ops.append(self._op("netc.concat", lname, ins, {"dim": -1}, p))
            self.set_feat(lname, self.joined(ins, -1))
            self.width[lname] = self.sum_width(ins)
            return ops
        if t == "Loss" and len(sinks.get((lname, "default"), ())) > 1:   # several losses: no concatenation
            return self.loss(lname, spec, p, sinks, outs)
        ins = self._inputs(lname, t, p, sinks, LAYER_IO[t][0], ops)
        if any(i is None for i in ins):
            return ops
        if t in ("Dropout", "Elementwise", "NoOp"):
            self.set_feat(lname, self.feat.get(ins[0]), ins[0])
        if t in IMAGE_LAYERS and self.time_major:
            self.error(f"{t} '{lname}' in a time-major network (one with a recurrent layer) is not supported yet: "
                       f"netc's {t} reads one image [B, H, W, C], not a sequence of them", path_join(p, "@type"))
            return ops
        if t in ("Convolution2D", "Pooling2D", "BatchNorm", "Mask", "DeltasScaling"):
            return self.image_layer(lname, t, spec, p, ins, ops)
        if t == "Highway":
            return self.highway(lname, p, ins, ops)
        if t == "SquaredDifference":
            f1, f2 = self.feat.get(ins[0]), self.feat.get(ins[1])
            if f1 is not None and f2 is not None and f1 != f2:
                self.error(f"inputs_1 and inputs_2 of SquaredDifference '{lname}' must have the same feature shape "
                           f"(Brainstorm's check), got {tuple(f1)} and {tuple(f2)}", p)
                return ops
            self.set_feat(lname, f1, ins[0])
            ops.append(self._op("netc.squared_difference", lname, ins, {}, p))
            return ops
        if t in ("SigmoidCE", "SquaredError", "BinomialCrossEntropy", "L1Decay", "L2Decay") or \
                (t == "SoftmaxCE" and not self.time_major):
            return self.loss_layer(lname, t, p, ins, ops)
        if t in SEQUENCE:
            return self.sequence_layer(lname, t, spec, p, ins, ops)
        if t == "SoftmaxCE" and self.time_major:
            return self.softmax_over_time(lname, p, ins, ops)
        if t == "FullyConnected":
            size = spec.get("size")
            sp = path_join(p, "size")
            if isinstance(size, int) and not isinstance(size, bool):
                size = [size]
            if not (isinstance(size, list) and size and all(isinstance(d, int) and not isinstance(d, bool) and d > 0
                                                            for d in size)):
                self.error(f"\"size\" of FullyConnected '{lname}' must be a positive int or a list of them",
                           sp if "size" in spec else p)
                return ops
            act = spec.get("activation", "rel")
            if not isinstance(act, str) or act not in ACTIVATIONS:
                self.error(f"activation {act!r} of '{lname}' is not one netc knows ({', '.join(ACTIVATIONS)})",
                           path_join(p, "activation"))
                return ops
            attrs = {"num_outputs": math.prod(size)}
            self.set_feat(lname, size)
            if ACTIVATIONS[act] != "none":
                attrs["activation"] = ACTIVATIONS[act]
            if self.time_major:   # at every step: [T, B, F] -> [T*B, F] -> the product -> [T, B] + size
                ops.append(self._op("netc.reshape", f"{lname}.steps", ins, {"output_shape": self.steps_shape(ins[0])}, p))
                ins = [f"{lname}.steps"]
            if len(size) == 1 and not self.time_major:
                ops.append(self._op("netc.inner_product", lname, ins, attrs, p))
            else:
                ops.append(self._op("netc.inner_product", f"{lname}.flat", ins, attrs, p))
                ops.append(self._op("netc.reshape", lname, [f"{lname}.flat"],
                                    {"output_shape": [-1] + self.lead[1:] + size}, p))
        elif t == "Dropout":
            dp = spec.get("drop_prob", 0.5)
            if not isinstance(dp, (int, float)) or isinstance(dp, bool) or not 0 <= dp < 1:
                self.error(f"\"drop_prob\" of Dropout '{lname}' must be a number in [0, 1)", path_join(p, "drop_prob"))
                return ops
            ops.append(self._op("netc.dropout", lname, ins, {"dropout_keep_prob": round(1 - dp, 12)}, p))
        elif t == "Elementwise":
            act = spec.get("activation", "rel")
            if not isinstance(act, str) or act not in ACTIVATIONS:
                self.error(f"activation {act!r} of '{lname}' is not one netc knows ({', '.join(ACTIVATIONS)})",
                           path_join(p, "activation"))
                return ops
            a = ACTIVATIONS[act]
            ops.append(self._op("netc.identity" if a == "none" else f"netc.{a}", lname, ins, {}, p))
        elif t == "NoOp":
            ops.append(self._op("netc.identity", lname, ins, {}, p))
        elif t == "Loss":
            ops.extend(self.loss(lname, spec, p, sinks, outs))
        return ops

    def loss(self, lname, spec, p, sinks, outs) -> list:
        """Loss(importance): Brainstorm sums its input and divides by the batch. netc's scalar losses are already that,
        so such a loss becomes a network output; any other value (a per-element SquaredError loss, a Mask of it, a
        SquaredDifference, ...) is summed by a DecayLoss { norm: sum } (/ B: axis 0, or 1 time-major). Several values
        (Brainstorm concatenates them and sums the whole) are each made so: netc's training objective is the sum of a
        network's losses, which is that sum. importance other than 1 is refused."""
        imp = spec.get("importance", 1.0)
        if isinstance(imp, bool) or not isinstance(imp, (int, float)) or imp != 1:
            self.error(f"\"importance\" of Loss '{lname}' is {imp!r}: netc has no loss weight yet, only Brainstorm's "
                       f"default 1.0 imports", path_join(p, "importance") if "importance" in spec else p)
            return []
        srcs = sinks[(lname, "default")]
        ops = []
        for i, src in enumerate(srcs):
            layer, _, out = src[1].partition(".outputs.")
            if (self.types.get(layer), out) in LOSS_OUTPUTS and layer not in self.per_element:
                outs.append(src[0])
                continue
            name = f"{lname}.loss" + (f"{i}" if len(srcs) > 1 else "")
            outs.append(name)
            ops.append(self._op("netc.decay_loss", name, [src[0]], {"norm": "sum", "batch_axis": len(self.lead) - 1},
                                p))
        return ops

    def set_feat(self, name, feat, like=None):
        """Record a value's feature shape (per step and sample) where known, and its width."""
        self.feat[name] = list(feat) if feat is not None else None
        self.width[name] = math.prod(feat) if feat is not None else self.width.get(like)

    def pair(self, lname, t, spec, p, key, default=None):
        """A (h, w) argument of a Convolution2D / Pooling2D: a list of two positive ints (Brainstorm's assertion)."""
        v = spec.get(key, default)
        if not (isinstance(v, list) and len(v) == 2 and all(isinstance(d, int) and not isinstance(d, bool) and d > 0
                                                            for d in v)):
            self.error(f"\"{key}\" of {t} '{lname}' must be a list of two positive integers [h, w]" +
                       ("" if key in spec else " (Brainstorm requires it)"), path_join(p, key) if key in spec else p)
            return None
        return v

    def image_layer(self, lname, t, spec, p, ins, ops):
        """Convolution2D, Pooling2D (NHWC images, Brainstorm's own layout: netc's conv2d / maxpool / avgpool with
        the explicit padding [p, p] and floor rounding, Brainstorm's output size), BatchNorm, Mask, DeltasScaling."""
        feat = self.feat.get(ins[0])
        if t in IMAGE_LAYERS:
            pad = spec.get("padding", 0)
            if not isinstance(pad, int) or isinstance(pad, bool) or pad < 0:
                self.error(f"\"padding\" of {t} '{lname}' must be an integer >= 0, got {pad!r}",
                           path_join(p, "padding"))
                return ops
            k = self.pair(lname, t, spec, p, "kernel_size")
            st = self.pair(lname, t, spec, p, "stride", [1, 1])
            if k is None or st is None:
                return ops
            if feat is not None and len(feat) != 3:
                self.error(f"{t} '{lname}' needs an image input (T, B, H, W, C), got the feature shape {tuple(feat)}", p)
                return ops
            geo = {"strides": [1, st[0], st[1], 1], "padding": [pad, pad]}
            if t == "Convolution2D":
                return self.convolution(lname, spec, p, ins, ops, k, geo, feat)
            kind = spec.get("type")
            if kind not in ("max", "avg"):
                self.error(f"\"type\" of Pooling2D '{lname}' must be 'max' or 'avg'" +
                           ("" if "type" in spec else " (Brainstorm requires it)"),
                           path_join(p, "type") if "type" in spec else p)
                return ops
            ops.append(self._op(f"netc.{kind}pool", lname, ins, {"ksize": [1, k[0], k[1], 1], **geo}, p))
            self.set_feat(lname, None if feat is None else self.window(feat, k, st, pad) + [feat[2]])
            return ops
        self.set_feat(lname, feat, ins[0])
        if t == "BatchNorm":
            decay, eps = spec.get("decay", 0.9), spec.get("epsilon", 1.0e-5)
            for key, v, ok in (("decay", decay, lambda v: 0 <= v <= 1), ("epsilon", eps, lambda v: v > 0)):
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not ok(v):
                    self.error(f"\"{key}\" of BatchNorm '{lname}' must be a number " +
                               ("in [0, 1]" if key == "decay" else "> 0") + f", got {v!r}", path_join(p, key))
                    return ops
            ops.append(self._op("netc.batch_norm", lname, ins, {"epsilon": eps, "momentum": decay}, p))
        elif t == "Mask":
            mf = self.feat.get(ins[1])
            if feat is not None and mf is not None and mf not in ([1], feat[:-1] + [1], feat):
                self.error(f"the mask of Mask '{lname}' has the feature shape {tuple(mf)}; Brainstorm needs (1,), "
                           f"{tuple(feat[:-1] + [1])} or the input's {tuple(feat)}", p)
                return ops
            if mf is not None and mf == feat and self.types.get(ins[1].split(".")[0]) == "Input" and \
                    not ins[1].endswith(".concat"):      # a data mask of x's shape: a product (it has kernels)
                ops.append(self._op("netc.elementwise", lname, ins, {"operation": "product"}, p))
            else:      # broadcast, and no gradient for the mask (Brainstorm's computes_no_input_deltas_for)
                ops.append(self._op("netc.mask", lname, ins, {}, p))
        else:   # DeltasScaling: the identity forward; backward, the deltas times factor
            f = spec.get("factor")
            if isinstance(f, bool) or not isinstance(f, (int, float)):
                self.error(f"DeltasScaling '{lname}' needs a number \"factor\" (Brainstorm requires it)",
                           path_join(p, "factor") if "factor" in spec else p)
            elif f == 1:    # the identity both ways (an op with kernels)
                ops.append(self._op("netc.identity", lname, ins, {}, p))
            else:
                ops.append(self._op("netc.deltas_scaling", lname, ins, {"factor": f}, p))
        return ops

    @staticmethod
    def window(feat, k, st, pad):
        return [(feat[i] + 2 * pad - k[i]) // st[i] + 1 for i in (0, 1)]

    def convolution(self, lname, spec, p, ins, ops, k, geo, feat):
        nf = spec.get("num_filters")
        if not isinstance(nf, int) or isinstance(nf, bool) or nf <= 0:
            self.error(f"\"num_filters\" of Convolution2D '{lname}' must be a positive integer" +
                       ("" if "num_filters" in spec else " (Brainstorm requires it)"),
                       path_join(p, "num_filters") if "num_filters" in spec else p)
            return ops
        act = spec.get("activation", "tanh")   # Convolution2D() writes 'rel'; its setup's default is 'tanh'
        if not isinstance(act, str) or act not in ACTIVATIONS:
            self.error(f"activation {act!r} of '{lname}' is not one netc knows ({', '.join(ACTIVATIONS)})",
                       path_join(p, "activation"))
            return ops
        attrs = {"filter": [k[0], k[1], -1, nf], **geo}
        if ACTIVATIONS[act] != "none":
            attrs["activation"] = ACTIVATIONS[act]
        ops.append(self._op("netc.conv2d", lname, ins, attrs, p))
        self.set_feat(lname, None if feat is None else self.window(feat, k, geo["strides"][1:3], geo["padding"][0])
                      + [nf])
        return ops

    def loss_layer(self, lname, t, p, ins, ops):
        """SoftmaxCE (feed-forward: over the last feature axis, at every position), SigmoidCE, SquaredError,
        BinomialCrossEntropy, L1Decay, L2Decay: their predictions, and their loss as the scalar a Loss layer makes
        of it (the sum over steps and features / B: binomial_ce and decay_loss divide by axis 1's B time-major)."""
        axis = {"batch_axis": 1} if self.time_major else {}
        if t in ("L1Decay", "L2Decay"):
            ops.append(self._op("netc.decay_loss", f"{lname}.loss", ins, {"norm": t[:2].lower(), **axis}, p))
            return ops
        feat, tf = self.feat.get(ins[0]), self.feat.get(ins[1])
        want = None if feat is None else (feat[:-1] + [1] if t == "SoftmaxCE" else feat)
        if want is not None and tf is not None and tf != want:
            self.error(f"the targets of {t} '{lname}' have the feature shape {tuple(tf)}; Brainstorm needs "
                       f"{tuple(want)} for the input's {tuple(feat)}", p)
            return ops
        pred = lname if t == "BinomialCrossEntropy" else f"{lname}.predictions"
        if t == "SoftmaxCE":
            return self.softmax_ce(lname, p, ins, ops, feat)
        if t == "SquaredError" and lname in self.per_element:   # Brainstorm's own loss, 0.5 (x - t)^2 per element
            ops.append(self._op("netc.identity", pred, ins[:1], {}, p))
            ops.append(self._op("netc.squared_difference", f"{lname}.loss", ins, {"factor": 0.5}, p))
            self.set_feat(f"{lname}.loss", feat, ins[0])
        elif t == "SquaredError":
            ops.append(self._op("netc.identity", pred, ins[:1], {}, p))
            ops.append(self._op("netc.euclidean_loss", f"{lname}.loss", ins, {}, p))
        elif t == "SigmoidCE":
            ops.append(self._op("netc.sigmoid", pred, ins[:1], {}, p))
            ops.append(self._op("netc.binomial_ce", f"{lname}.loss", ins, {"logits": True, **axis}, p))
        else:
            ops.append(self._op("netc.binomial_ce", lname, ins, {"logits": False, **axis}, p))
        self.set_feat(pred, feat, ins[0])
        return ops

    def softmax_ce(self, lname, p, ins, ops, feat):
        """Over one feature axis: the softmax and the loss on x as is. Over several, (H, W, C) say: the softmax over
        the last axis at every position (x as [B*H*W, C] rows, the predictions back in x's shape), the loss over the
        rows, which netc averages where Brainstorm's Loss sums them per sample (a warning says so)."""
        if feat is None or len(feat) == 1:
            ops.append(self._op("netc.softmax", f"{lname}.predictions", ins[:1], {}, p))
            ops.append(self._op("netc.softmax_loss", f"{lname}.loss", ins, {}, p))
            self.set_feat(f"{lname}.predictions", feat, ins[0])
            return ops
        rows = math.prod(feat[:-1])
        self.diag.warning(f"SoftmaxCE '{lname}' over the feature shape {tuple(feat)}: netc's loss is the mean over "
                          f"the {rows} positions of a sample, Brainstorm's Loss their sum (netc's loss and its "
                          f"gradient are Brainstorm's / {rows}); the predictions are Brainstorm's", self.loc(p))
        ops.append(self._op("netc.reshape", f"{lname}.rows", ins[:1], {"output_shape": [-1, feat[-1]]}, p))
        ops.append(self._op("netc.reshape", f"{lname}.targets.rows", ins[1:], {"output_shape": [-1, 1]}, p))
        ops.append(self._op("netc.softmax", f"{lname}.predictions.rows", [f"{lname}.rows"], {}, p))
        ops.append(self._op("netc.reshape", f"{lname}.predictions", [f"{lname}.predictions.rows"],
                            {"output_shape": [-1] + feat}, p))
        ops.append(self._op("netc.softmax_loss", f"{lname}.loss", [f"{lname}.rows", f"{lname}.targets.rows"], {}, p))
        self.set_feat(f"{lname}.predictions", feat)
        return ops


    def highway(self, lname, p, ins, ops):
        """Highway: netc's highway op of the inputs H, T, x (in this order), which must have one feature shape
        (Brainstorm's check)."""
        fs = [self.feat.get(i) for i in ins]
        known = [f for f in fs if f is not None]
        if any(f != known[0] for f in known):
            self.error(f"the inputs H, T and x of Highway '{lname}' must have one feature shape (Brainstorm's check), "
                       f"got {', '.join(str(tuple(f)) if f is not None else '?' for f in fs)}", p)
            return ops
        self.set_feat(lname, known[0] if known else None, ins[2])
        ops.append(self._op("netc.highway", lname, ins, {}, p))
        return ops

    def sequence_layer(self, lname, t, spec, p, ins, ops):
        """Lstm, Recurrent, Clockwork, ClockworkLstm: one op over the whole sequence, Brainstorm's defaults (size: the
        input's feature size; activation: tanh)."""
        size = spec.get("size", self.width.get(ins[0]))
        if not (isinstance(size, int) and not isinstance(size, bool) and size > 0):
            self.error(f"\"size\" of {t} '{lname}' must be a positive int" if "size" in spec else
                       f"{t} '{lname}' has no \"size\" and netc cannot tell its input's feature size (Brainstorm's "
                       f"default); give \"size\"", path_join(p, "size") if "size" in spec else p)
            return ops
        act = spec.get("activation", "tanh")
        if not isinstance(act, str) or act not in ACTIVATIONS:
            self.error(f"activation {act!r} of '{lname}' is not one netc knows ({', '.join(ACTIVATIONS)})",
                       path_join(p, "activation"))
            return ops
        self.set_feat(lname, [size])
        ops.append(self._op(SEQUENCE[t], lname, ins, {"size": size, "activation": ACTIVATIONS[act]}, p))
        return ops

    def softmax_over_time(self, lname, p, ins, ops):
        """SoftmaxCE at every step of a time-major net: [T, B, C] -> [T*B, C] (targets [T*B, 1]), the softmax
        and the loss there, the predictions back as [T, B, C] (Brainstorm's flatten_time)."""
        ops.append(self._op("netc.reshape", f"{lname}.steps", ins[:1], {"output_shape": self.steps_shape(ins[0])}, p))
        ops.append(self._op("netc.reshape", f"{lname}.targets.steps", ins[1:], {"output_shape": self.steps_shape(ins[1])},
                            p))
        ops.append(self._op("netc.softmax", f"{lname}.predictions.steps", [f"{lname}.steps"], {}, p))
        ops.append(self._op("netc.reshape", f"{lname}.predictions", [f"{lname}.predictions.steps"],
                            {"output_shape": [-1, self.batch] + ([self.width[ins[0]]] if self.width.get(ins[0]) else [-1])},
                            p))
        ops.append(self._op("netc.softmax_loss", f"{lname}.loss", [f"{lname}.steps", f"{lname}.targets.steps"], {}, p))
        return ops


def diag_errors(diag) -> bool:
    return diag.has_errors()


def import_brainstorm(text: str, file: str = "<input>", diag: DiagnosticEngine | None = None, data=None,
                      locs=None, dups=None, batch: int = 1, time: int = 1) -> Module:
    SOURCES.add(file, text)
    own = diag is None
    diag = diag or DiagnosticEngine()
    if data is None:
        data, locs, dups = load_json(text, file)
    if not isinstance(batch, int) or batch < 1:
        raise NetcError(f"the batch size must be a positive integer, got {batch}")
    if not isinstance(time, int) or isinstance(time, bool) or time < 1:
        raise NetcError(f"the sequence length T must be a positive integer, got {time}")
    for path, loc, first in dups or ():
        diag.warning(f"duplicate key {path}: the last one wins", loc).note("first given here", first)
    if isinstance(data, dict) and isinstance(data.get("architecture"), dict):
        arch, root = data["architecture"], "$.architecture"
    elif is_brainstorm(data):
        arch, root = data, "$"
    else:
        raise NetcError("not a Brainstorm architecture: expected an object of layers with \"@type\", or an "
                        "\"architecture\" object", Loc(file, 1, 1, "$"))
    if not any(isinstance(s, dict) and s.get("@type") == "Input" for s in arch.values()):
        raise NetcError("a Brainstorm architecture needs an Input layer (\"@type\": \"Input\")",
                        locs.get(root) or Loc(file, 1, 1, root))
    imp = _Importer(file, locs, diag, batch, time)
    m = imp.module(arch, root, network_name(file.replace(".layout", "").replace(".layouts", "")))
    if own and diag.has_errors():
        raise NetcError(diag.diagnostics)
    return m
