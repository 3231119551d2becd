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
from a zero state (Brainstorm's context before the first call). Other recurrent types (ClockworkLstm,
...) are refused with a "not yet supported" diagnostic; `Highway` is no recurrent layer but netc has
no op for it either, and says so.

Mapping (one Brainstorm layer may become several netc ops; a layer with several outputs gets one
op per output, named `Layer.output`; a layer with only `default` keeps its own name):

| Brainstorm | netc |
|---|---|
| `Input(out_shapes={name: shape})` | one `input` per output, named `Input.<name>` (also when there is one) |
| `FullyConnected(size, activation)` | `inner_product` (`num_outputs` = prod(size), `activation`: rel -> relu, linear -> none, tanh, sigmoid; default rel); a `reshape` when `size` has several dims |
| `Dropout(drop_prob)` | `dropout` with `dropout_keep_prob = 1 - drop_prob` |
| `SoftmaxCE` (inputs default, targets; outputs predictions, loss) | `Layer.predictions = Softmax(default)`, `Layer.loss = SoftmaxLoss(default, targets)` |
| `Elementwise(activation)` | `relu` / `tanh` / `sigmoid` (linear: a NoOp pass-through) |
| `Merge` (inputs inputs_1, inputs_2, ...) | `concat` along the last feature axis |
| `NoOp` | an `Opaque { type: "NoOp" }` pass-through |
| `Loss(importance)` | nothing: its input becomes a network output (an `output` statement) |
| `Lstm(size, activation)` | `lstm` (activation default tanh, Brainstorm's; `size` default: the input's feature size, as Brainstorm) |
| `Recurrent(size, activation)` | `recurrent` (the same defaults) |
| `Clockwork(size, activation)` | `clockwork` (the same defaults; its `timing` is a parameter, as in Brainstorm) |

Several connections into one input are Brainstorm's zero-copy fan-in: the sources are concatenated
along the first feature axis (a `concat` op named `Layer.input.concat`), in alphabetical order of
their output paths (Brainstorm's first contiguous permutation for a single sink).

Every output that no layer consumes, and every Loss input, is listed in one `output` statement, so
that nothing Brainstorm computes is dead code in netc. Numbers: a Brainstorm loss is `(T, B, 1)`
per step then reduced to `(1,)` by a Loss layer; netc's SoftmaxLoss is already the scalar batch mean.
"""
from __future__ import annotations

import math

from ..diagnostics import SOURCES, DiagnosticEngine, Loc, NetcError, did_you_mean
from ..ir.core import UNRANKED, Module, Operation, Region
from .jsonloc import load_json, path_join
from .paleo import network_name

ACTIVATIONS = {"rel": "relu", "linear": "none", "tanh": "tanh", "sigmoid": "sigmoid"}
RECURRENT = {"LSTM", "LstmOpt", "RNN", "Rnn", "ClockworkLstm", "ClockworkRnn", "GRU", "Gru"}
SEQUENCE = {"Lstm": "netc.lstm", "Recurrent": "netc.recurrent", "Clockwork": "netc.clockwork"}   # time-major
NOT_AN_OP = {"Highway": ("Highway layer '{name}' is not recurrent: it is Brainstorm's highway gate, y = T * H + "
                         "(1 - T) * x of three same-shaped inputs H, T and x at every step; netc has no such op yet")}
# @type -> (input names, output names); None = any / given by kwargs
LAYER_IO = {
    "Input": ((), None),
    "FullyConnected": (("default",), ("default",)),
    "Dropout": (("default",), ("default",)),
    "SoftmaxCE": (("default", "targets"), ("predictions", "loss")),
    "Elementwise": (("default",), ("default",)),
    "NoOp": (("default",), ("default",)),
    "Loss": (("default",), ("loss",)),
    "Merge": (None, ("default",)),
    **{t: (("default",), ("default",)) for t in SEQUENCE},
}
KWARGS = {"Input": {"out_shapes"}, "FullyConnected": {"size", "activation"}, "Dropout": {"drop_prob"},
          "SoftmaxCE": set(), "Elementwise": {"activation"}, "NoOp": set(), "Loss": {"importance"},
          "Merge": set(), **{t: {"size", "activation"} for t in SEQUENCE}}


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
            if not isinstance(oc, dict):
                self.error(f"\"@outgoing_connections\" of '{lname}' must be an object {{output: [targets]}}", ocp)
                continue
            for out, targets in oc.items():
                op_ = path_join(ocp, out)
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
                    sinks.setdefault((tl, tin), []).append((self.ref(lname, out, outputs), f"{lname}.outputs.{out}", tp))
                    consumed.add((lname, out))
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
            srcs = sorted(srcs, key=lambda s: s[1])
            cname = f"{lname}.{inp}.concat"
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
                self.width[f"{lname}.{out}"] = math.prod(feat)
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
            self.width[lname] = self.sum_width(ins)
            return ops
        ins = self._inputs(lname, t, p, sinks, LAYER_IO[t][0], ops)
        if any(i is None for i in ins):
            return ops
        if t in ("Dropout", "Elementwise", "NoOp"):
            self.width[lname] = self.width.get(ins[0])
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
            self.width[lname] = math.prod(size)
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
        elif t == "SoftmaxCE":
            ops.append(self._op("netc.softmax", f"{lname}.predictions", ins[:1], {}, p))
            ops.append(self._op("netc.softmax_loss", f"{lname}.loss", ins, {}, p))
        elif t == "Elementwise":
            act = spec.get("activation", "rel")
            if not isinstance(act, str) or act not in ACTIVATIONS:
                self.error(f"activation {act!r} of '{lname}' is not one netc knows ({', '.join(ACTIVATIONS)})",
                           path_join(p, "activation"))
                return ops
            a = ACTIVATIONS[act]
            if a == "none":
                ops.append(self._op("netc.opaque", lname, ins, {"type": "NoOp"}, p))
            else:
                ops.append(self._op(f"netc.{a}", lname, ins, {}, p))
        elif t == "NoOp":
            ops.append(self._op("netc.opaque", lname, ins, {"type": "NoOp"}, p))
        elif t == "Loss":
            outs.extend(ins)
        return ops


    def sequence_layer(self, lname, t, spec, p, ins, ops):
        """Lstm, Recurrent, Clockwork: one op over the whole sequence, Brainstorm's defaults (size: the
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
        self.width[lname] = size
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
