"""Brainstorm's buffer structure of an architecture, and the hub layout its `create_layout` writes for it
(IDSIA/brainstorm at 8f1fc88; shared/spec/layout-format.md §6, docs/formats.md "Brainstorm layouts").

Each Brainstorm layer type declares, from its keyword arguments and its inputs' structures, its outputs,
parameters and internals: a *structure* is a shape template -- `('T', 'B', ...)` time-sized (buffer type 2),
`('B', ...)` batch-sized (1) or constant (0) -- with a context size (extra time steps a recurrent layer
keeps after the T real ones) and a backward-only flag (a delta that only the backward pass uses).
Several connections into one input are concatenated along the last feature axis. The facts per layer
type are Brainstorm's (its layers/*.py `setup`), so a layer's arrays are Brainstorm's arrays, including
those netc's own plan does not have (a SoftmaxCE's per-step loss `('T', 'B', 1)`, where netc keeps the
scalar mean; the deltas and internals of the backward pass).

`hub_layout(architecture)` lays these arrays out as Brainstorm does:

* a tree: `parameters` and `gradients` (the flat vectors), then one view per layer in Brainstorm's
  canonical order (repeatedly the layers all of whose successors are placed, in reverse name order; the
  whole list reversed), each with the seven categories inputs (sorted by name), outputs, parameters,
  internals, input_deltas, output_deltas, gradients;
* connections: every output -> input (and its delta backwards), every parameter -> `parameters`, every
  gradient -> `gradients`; a layer's parameters (and its gradients) stay together in declared order;
* hubs: walking the arrays in tree order, each array no connection ends at starts a hub that takes every
  source reachable through shared sinks; inside a hub the sources go in the first order (sorted paths,
  permuted lexicographically) in which every sink reads one contiguous run; hubs are sorted stably by
  (backward-only, buffer type) and each array gets its hub and its `[start, stop)` there.

A wrong architecture (a missing input, shapes a layer cannot take, a hub no order can lay out) raises
StructureError with the JSON path of the layer at fault.
"""
from __future__ import annotations

import math
from typing import NamedTuple

from .jsonloc import path_join as _join


def path_join(path: str, *keys) -> str:
    for k in keys:
        path = _join(path, k)
    return path

CATEGORIES = ("inputs", "outputs", "parameters", "internals", "input_deltas", "output_deltas", "gradients")
BACKWARD = {"parameters": "gradients", "inputs": "input_deltas", "outputs": "output_deltas"}
RECURRENT_INTERNALS = {"Recurrent": ("Ha",), "Clockwork": ("Ha",),
                       "Lstm": ("Za", "Zb", "Ia", "Ib", "Fa", "Fb", "Oa", "Ob", "Ca", "Cb")}
RECURRENT_INTERNALS["ClockworkLstm"] = RECURRENT_INTERNALS["Lstm"]
LSTM_PARAMS = ("Wz", "Wi", "Wf", "Wo", "pi", "pf", "po", "Rz", "Ri", "Rf", "Ro", "bz", "bi", "bf", "bo")


class StructureError(Exception):
    """A problem with an architecture's structure, at a JSON path of the architecture."""

    def __init__(self, path: str, msg: str):
        super().__init__(msg)
        self.path, self.msg = path, msg


class LayoutFailure(StructureError):
    """No order of a hub's sources gives every sink one contiguous range: Brainstorm refuses the architecture."""


class Struct(NamedTuple):
    """A Brainstorm buffer structure: the shape template, context size, backward-only flag."""
    shape: tuple
    context: int = 0
    backward: bool = False

    @property
    def btype(self) -> int:
        return 2 if self.shape[:2] == ("T", "B") else 1 if self.shape[:1] == ("B",) else 0

    @property
    def feature(self) -> tuple:
        return self.shape[self.btype:]

    @property
    def size(self) -> int:
        return math.prod(self.feature)

    def json(self, index: int) -> dict:
        d = {"@type": "array", "@index": index, "@shape": list(self.shape)}
        if self.context:
            d["@context_size"] = self.context
        if self.backward:
            d["@is_backward_only"] = True
        return d


def _positive(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _template(v, what, where) -> Struct:
    """An Input's shape template: 'T', 'B' (optional) then positive integers."""
    if isinstance(v, list):
        lead = 2 if v[:2] == ["T", "B"] else 1 if v[:1] == ["B"] else 0
        if v[lead:] and all(_positive(d) for d in v[lead:]):
            return Struct(tuple(v))
    raise StructureError(where, f"{what} must be a shape template: 'T', 'B' then positive integers, e.g. "
                                f"['T', 'B', 784]; got {v!r}")


def _size(v, what, where) -> tuple:
    """A layer's size: a positive integer or a list of them."""
    dims = [v] if not isinstance(v, (list, tuple)) else list(v)
    if not dims or not all(_positive(d) for d in dims):
        raise StructureError(where, f"{what} must be a positive integer or a list of them, got {v!r}")
    return tuple(dims)


def seq(*feature, context=0, backward=False) -> Struct:
    return Struct(("T", "B") + tuple(feature), context, backward)


class Layer(NamedTuple):
    name: str
    type: str
    ins: dict          # input name -> Struct, sorted by name
    outs: dict         # output name -> Struct, in the layer's order
    params: dict
    internals: dict


# ------------------------------------------------------------------------------------------ layer types

def _ints(v, n, what, where):
    if not (isinstance(v, (list, tuple)) and len(v) == n and all(isinstance(x, int) and x >= 0 for x in v)):
        raise StructureError(where, f"{what} must be a list of {n} non-negative integers, got {v!r}")
    return tuple(v)


def _image(name, t, kw, ins, where):
    """Convolution2D / Pooling2D: (out, params, internals) over an (H, W, C) input."""
    x = ins["default"].feature
    if len(x) != 3:
        raise StructureError(where, f"{t} layer '{name}' needs an (H, W, C) input per step, got {list(x)}")
    k = _ints(kw.get("kernel_size"), 2, f"{t} '{name}': kernel_size", path_join(where, "kernel_size"))
    s = _ints(kw.get("stride", (1, 1)), 2, f"{t} '{name}': stride", path_join(where, "stride"))
    pad = kw.get("padding", 0)
    if not isinstance(pad, int) or isinstance(pad, bool) or pad < 0 or 0 in s:
        raise StructureError(where, f"{t} '{name}': padding must be a non-negative integer and strides positive")
    h, w = ((x[i] + 2 * pad - k[i]) // s[i] + 1 for i in (0, 1))
    if h <= 0 or w <= 0:
        raise StructureError(where, f"{t} '{name}': a {k[0]}x{k[1]} window does not fit the {x[0]}x{x[1]} input")
    if t == "Pooling2D":
        if kw.get("type") not in ("max", "avg"):
            raise StructureError(path_join(where, "type"), f"Pooling2D '{name}': type must be 'max' or 'avg'")
        out = seq(h, w, x[2])
        return {"default": out}, {}, ({"argmax": out} if kw["type"] == "max" else {})
    f = kw.get("num_filters")
    if not isinstance(f, int) or f <= 0:
        raise StructureError(where, f"Convolution2D '{name}' needs a positive integer num_filters")
    return {"default": seq(h, w, f)}, {"W": Struct((f, k[0], k[1], x[2])), "bias": Struct((f,))}, {}


def _same(name, t, ins, a, b, where):
    fa, fb = ins[a].feature, ins[b].feature
    if fa != fb:
        raise StructureError(where, f"{t} layer '{name}': inputs '{a}' {list(fa)} and '{b}' {list(fb)} must have "
                                    f"one feature shape")
    return fa


def _recurrent(name, t, kw, ins, where):
    n_in = ins["default"].size
    h = _size(kw.get("size", n_in), f"{t} '{name}': size", where)
    if len(h) != 1:
        raise StructureError(where, f"{t} '{name}': size must be one positive integer, got {list(h)}")
    h = h[0]
    d = {k: seq(h, context=1) for k in RECURRENT_INTERNALS[t]}
    internals = {**d, **{"d" + k: seq(h, context=1, backward=True) for k in d}}
    if t in ("Recurrent", "Clockwork"):
        params = {"W": Struct((h, n_in)), "R": Struct((h, h)), "bias": Struct((h,))}
        internals["dHb"] = seq(h, context=1, backward=True)
    else:
        params = {p: Struct((h, n_in) if p[0] == "W" else (1, h) if p[0] == "p" else (h, h) if p[0] == "R" else (h,))
                  for p in LSTM_PARAMS}
    if t.startswith("Clockwork"):
        params["timing"] = Struct((h,))
    return {"default": seq(h, context=1)}, params, internals


def _losses(name, t, ins, where):
    x = ins["default"]
    if t == "SoftmaxCE":
        y = ins["targets"].feature
        if len(y) != len(x.feature) or y[:-1] != x.feature[:-1] or y[-1] != 1:
            raise StructureError(where, f"SoftmaxCE '{name}': targets {list(y)} must be the input's "
                                        f"{list(x.feature)} with a last axis of 1")
        return {"predictions": seq(*x.feature), "loss": seq(*y)}, {}, {"t_bin": seq(*x.feature, backward=True)}
    f = _same(name, t, ins, "default", "targets", where)
    if t == "SigmoidCE":
        return {"predictions": seq(*f), "loss": seq(*f)}, {}, {"dcee": seq(*f, backward=True)}
    if t == "SquaredError":
        return {"predictions": seq(*f), "loss": seq(*f)}, {}, {"diff": seq(*f)}
    return {"default": seq(1)}, {}, {"cee": seq(*f), "ceed": seq(*f, backward=True)}     # BinomialCrossEntropy


def setup(name: str, t: str, kw: dict, ins: dict, where: str):
    """Brainstorm's setup of one layer: (outputs, parameters, internals), each {name: Struct} in its order."""
    x = ins.get("default")
    if t == "Input":
        shapes = kw.get("out_shapes")
        if not isinstance(shapes, dict) or not shapes:
            raise StructureError(where, f"Input layer '{name}' needs \"out_shapes\": {{name: ['T', 'B', ...]}}")
        return {k: _template(v, f"'{name}.{k}'", path_join(where, "out_shapes", k)) for k, v in shapes.items()}, {}, {}
    if t in ("NoOp", "Elementwise", "DeltasScaling"):
        return {"default": x}, {}, {}
    if t == "Dropout":
        return {"default": x}, {}, {"mask": x}
    if t == "FullyConnected":
        size = _size(kw.get("size", list(x.feature)), f"FullyConnected '{name}': size",
                     path_join(where, "size") if "size" in kw else where)
        n = math.prod(size)
        return {"default": seq(*size)}, {"W": Struct((n, x.size)), "bias": Struct((n,))}, {}
    if t in ("Convolution2D", "Pooling2D"):
        return _image(name, t, kw, ins, where)
    if t == "BatchNorm":
        c = Struct(x.feature[-1:])
        return {"default": x}, {"gamma": c, "beta": c, "mu": c, "sigma": c}, {"sigma_b": c, "centered": x, "x_hat": x}
    if t in RECURRENT_INTERNALS:
        return _recurrent(name, t, kw, ins, path_join(where, "size") if "size" in kw else where)
    if t in ("SoftmaxCE", "SigmoidCE", "SquaredError", "BinomialCrossEntropy"):
        return _losses(name, t, ins, where)
    if t == "Loss":
        return {"loss": Struct((1,))}, {}, {}
    if t == "L1Decay":
        return {"loss": seq(1)}, {}, {"tmp": x}
    if t == "L2Decay":
        return {"loss": seq(1)}, {}, {"tmp": x, "dsq_activations": Struct(x.shape, backward=True)}
    if t == "Mask":
        m, f = ins["mask"].feature, x.feature
        if m not in ((1,), f[:-1] + (1,), f):
            raise StructureError(where, f"Mask '{name}': a mask {list(m)} fits no input {list(f)} (it must be [1], "
                                        f"{list(f[:-1] + (1,))} or {list(f)})")
        return {"default": x}, {}, {}
    if t == "SquaredDifference":
        f = _same(name, t, ins, "inputs_1", "inputs_2", where)
        return {"default": seq(*f)}, {}, {"diff": seq(*f)}
    if t == "Highway":
        if not ins["H"] == ins["T"] == ins["x"]:
            raise StructureError(where, f"Highway '{name}': its inputs H, T and x must have one shape")
        return {"default": seq(*ins["x"].feature)}, {}, {}
    if t == "Merge":
        a, b = ins["inputs_1"].shape, ins["inputs_2"].shape
        if a[:-1] != b[:-1]:
            raise StructureError(where, f"Merge '{name}': inputs {list(a)} and {list(b)} differ before the last axis")
        return {"default": Struct(a[:-1] + (a[-1] + b[-1],))}, {}, {}
    raise StructureError(path_join(where, "@type"), f"unknown Brainstorm layer type '{t}' for layer '{name}'")


INPUTS = {"Input": (), "SoftmaxCE": ("default", "targets"), "SigmoidCE": ("default", "targets"),
          "SquaredError": ("default", "targets"), "BinomialCrossEntropy": ("default", "targets"),
          "Mask": ("default", "mask"), "SquaredDifference": ("inputs_1", "inputs_2"), "Highway": ("H", "T", "x"),
          "Merge": ("inputs_1", "inputs_2")}


# ------------------------------------------------------------------------------------------ the network

def connections(arch: dict, root: str = "$") -> list:
    """Every connection (start layer, output, end layer, input), sorted, as Brainstorm collects them."""
    out = set()
    for name, spec in arch.items():
        oc = spec.get("@outgoing_connections", {}) if isinstance(spec, dict) else {}
        oc = {"default": oc} if isinstance(oc, list) else oc
        if not isinstance(oc, dict):
            raise StructureError(path_join(root, name, "@outgoing_connections"),
                                 f"\"@outgoing_connections\" of '{name}' must be an object or a list")
        for o, targets in oc.items():
            if not isinstance(targets, list) or not all(isinstance(x, str) for x in targets):
                raise StructureError(path_join(root, name, "@outgoing_connections", o),
                                     f"the connections of '{name}.{o}' must be a list of 'Layer' or 'Layer.input'")
            for i, tgt in enumerate(targets):
                end, _, inp = tgt.partition(".")
                if end not in arch:
                    raise StructureError(path_join(root, name, "@outgoing_connections", o, i),
                                         f"'{name}.{o}' connects to unknown layer '{end}'")
                out.add((name, o, end, inp or "default"))
    return sorted(out)


def canonical_order(arch: dict, cons: list) -> list:
    """Brainstorm's layer order: repeatedly every layer whose successors are all placed, in reverse name order;
    then the whole list reversed."""
    succ = {n: {c[2] for c in cons if c[0] == n} for n in arch}
    order: list = []
    while len(order) < len(arch):
        placed = set(order)
        new = [n for n in arch if n not in placed and succ[n] <= placed]
        if not new:
            raise StructureError("$", f"the architecture has a cycle through {sorted(set(arch) - placed)}")
        order += sorted(new, reverse=True)
    return order[::-1]


def build_layers(arch: dict, root: str = "$") -> dict:
    """The layers in canonical order, each with Brainstorm's structures; StructureError where one is wrong."""
    if not isinstance(arch, dict) or not all(isinstance(v, dict) and isinstance(v.get("@type"), str)
                                             for v in arch.values()):
        raise StructureError(root, "an architecture maps layer names to objects with an \"@type\" string")
    for name in arch:
        if not (name.isascii() and name.isidentifier()):
            raise StructureError(path_join(root, name), f"'{name}' is no Brainstorm layer name (a Python identifier)")
    if arch.get("Input", {}).get("@type") != "Input":
        raise StructureError(root, "a Brainstorm architecture needs exactly one Input layer, named 'Input'")
    cons = connections(arch, root)
    layers: dict = {}
    for name in canonical_order(arch, cons):
        spec, where = arch[name], path_join(root, name)
        t = spec["@type"]
        ins: dict = {}
        for c in cons:
            if c[2] == name:
                if c[0] not in layers or c[1] not in layers[c[0]].outs:
                    raise StructureError(path_join(root, c[0], "@outgoing_connections"),
                                         f"'{c[0]}' has no output '{c[1]}'")
                ins.setdefault(c[3], []).append(layers[c[0]].outs[c[1]])
        ins = {k: _combine(name, k, v, where) for k, v in sorted(ins.items())}
        want = INPUTS.get(t, ("default",))
        if set(ins) != set(want):
            raise StructureError(where, f"{t} layer '{name}' takes the inputs {list(want) or 'none'}, "
                                        f"got {sorted(ins) or 'none'}")
        kw = {k: v for k, v in spec.items() if not k.startswith("@")}
        outs, params, internals = setup(name, t, kw, ins, where)
        layers[name] = Layer(name, t, ins, outs, params, internals)
    return layers


def _combine(name, inp, structs, where) -> Struct:
    """Several sources into one input: concatenated along the last feature axis (no context of its own)."""
    a = structs[0]
    for s in structs[1:]:
        if s.btype != a.btype or s.feature[:-1] != a.feature[:-1] or len(s.shape) != len(a.shape):
            raise StructureError(where, f"the sources of '{name}.{inp}' ({list(a.shape)}, {list(s.shape)}) cannot "
                                        f"be concatenated along their last axis")
    return Struct(a.shape[:-1] + (sum(s.shape[-1] for s in structs),))


# ------------------------------------------------------------------------------------------ the layout

def _stub(layers: dict) -> dict:
    """The tree without slices: root vectors, then each layer's seven categories."""
    root = {"@type": "BufferView", "parameters": {"@type": "array", "@index": 0},
            "gradients": {"@type": "array", "@index": 1, "@is_backward_only": True}}
    for i, (name, L) in enumerate(layers.items(), start=2):
        node = {"@type": "BufferView", "@index": i}
        for ci, (cat, entries) in enumerate(zip(CATEGORIES, (L.ins, L.outs, L.params, L.internals, L.ins, L.outs,
                                                               L.params))):
            view = {"@type": "BufferView", "@index": ci}
            for k, (n, s) in enumerate(entries.items()):
                view[n] = (s._replace(backward=True) if ci >= 4 else s).json(k)
            node[cat] = view
        root[name] = node
    return root


def _arrays(node: dict, prefix: str = ""):
    """Paths of the array nodes in tree order (children by @index)."""
    kids = sorted(((k, v) for k, v in node.items() if not k.startswith("@")), key=lambda kv: kv[1].get("@index", -1))
    for k, v in kids:
        if v["@type"] == "array":
            yield prefix + k
        else:
            yield from _arrays(v, prefix + k + ".")


def _get(tree: dict, path: str) -> dict:
    for k in path.split("."):
        tree = tree[k]
    return tree


def _closure(node, cons) -> tuple:
    """The sources and sinks one hub takes, from `node`: Brainstorm's forward closure over shared sinks."""
    sources = {node}
    sinks = {e for s, e in cons if s in sources}
    while True:
        new_sources = {s for s, e in cons if e in sinks}
        new_sinks = {e for s, e in cons if s in sources}
        if len(new_sources) <= len(sources) and len(new_sinks) <= len(sinks):
            return sources, sinks
        sources, sinks = new_sources, new_sinks


def _first_contiguous(groups: list, table: list, names: list, where: str) -> list:
    """The first permutation of the source groups, in lexicographic order of their positions, in which every
    column (a sink) has its ones in one run: Brainstorm's order, found depth first (a column whose run has
    ended may not start again), not by trying every permutation."""
    ncol = len(table[0]) if table else 0

    def place(prefix, state):
        if len(prefix) == len(groups):
            return prefix
        for g in range(len(groups)):
            if g in prefix:
                continue
            st = list(state)        # per column: 0 nothing yet, 1 in its run, 2 run ended
            ok = True
            for row in groups[g]:
                for c in range(ncol):
                    one = table[row][c]
                    if one and st[c] == 2:
                        ok = False
                        break
                    st[c] = 1 if one else (2 if st[c] else 0)
                if not ok:
                    break
            if ok:
                found = place(prefix + [g], st)
                if found is not None:
                    return found
        return None

    found = place([], [0] * ncol)
    if found is None:
        raise LayoutFailure(where, "Brainstorm cannot lay out these buffers: no order of the sources "
                                    f"{', '.join(names)} gives every input one contiguous range "
                                    "(its 'Failed to lay out buffers. Please change connectivity.')")
    return [r for g in found for r in groups[g]]


def hub_layout(arch: dict, root: str = "$") -> dict:
    """Brainstorm's create_layout for the architecture: {"layer_order", "hubs", "layout"} (the hubs in Brainstorm's
    order, each with btype, context_size, size, is_backward_only, its sources in their final order and its sinks;
    the @-key tree)."""
    layers = build_layers(arch, root)
    tree = _stub(layers)
    cons = set()
    for (a, o, b, i) in connections(arch, root):
        cons.add((f"{a}.outputs.{o}", f"{b}.inputs.{i}"))
        cons.add((f"{a}.output_deltas.{o}", f"{b}.input_deltas.{i}"))
    orders = [tuple(f"{n}.{cat}.{p}" for p in L.params) for cat in ("parameters", "gradients")
              for n, L in layers.items() if L.params]
    for n, L in layers.items():
        for p in L.params:
            cons |= {(f"{n}.parameters.{p}", "parameters"), (f"{n}.gradients.{p}", "gradients")}
    cons = sorted(cons)
    group = {p: fo for fo in orders for p in fo}
    merged = [(group.get(s, s), group.get(e, e)) for s, e in cons]
    sinks_all = {e for _, e in cons}
    remaining: list = []
    for path in _arrays(tree):
        if path in sinks_all or path in ("parameters", "gradients"):
            continue
        item = group.get(path, path)
        if item not in remaining:
            remaining.append(item)
    hubs = []
    while remaining:
        sources, sinks = _closure(remaining[0], merged)
        remaining = [s for s in remaining if s not in sources]
        hubs.append(_hub(sorted(sources), sorted(sinks), cons, tree, root))
    hubs.sort(key=lambda h: (h["is_backward_only"], h["btype"]))
    for k, h in enumerate(hubs):
        h["hub"] = k
        for path, sl in h.pop("slices"):
            node = _get(tree, path)
            node["@slice"], node["@hub"] = sl, k
    width = tree["parameters"].setdefault("@slice", [0, 0])
    tree["parameters"].setdefault("@hub", 0)
    tree["gradients"].setdefault("@slice", [0, 0])
    tree["gradients"].setdefault("@hub", 0)
    tree["parameters"]["@shape"] = tree["gradients"]["@shape"] = [width[1] - width[0]]
    return {"layer_order": list(layers), "hubs": [{k: h[k] for k in ("hub", "btype", "context_size", "size",
                                                                      "is_backward_only", "sources", "sinks")}
                                                  for h in hubs], "layout": tree}


def _hub(sources: list, sinks: list, cons: list, tree: dict, root: str) -> dict:
    """One hub: its sources (forced-order groups kept together) in Brainstorm's order, and every array's slice."""
    groups, flat = [], []
    for s in sources:
        members = list(s) if isinstance(s, tuple) else [s]
        groups.append(list(range(len(flat), len(flat) + len(members))))
        flat += members
    structs = [Struct(tuple(_get(tree, p)["@shape"]), _get(tree, p).get("@context_size", 0),
                      bool(_get(tree, p).get("@is_backward_only"))) for p in flat]
    kinds = {(s.btype, s.backward) for s in structs}
    if len(kinds) > 1:
        raise StructureError(path_join(root, flat[0].split(".")[0]),
                             f"one hub mixes buffer types or backward-only arrays: {', '.join(flat)}")
    col = {e: c for c, e in enumerate(sinks)}
    row = {p: r for r, p in enumerate(flat)}
    table = [[0] * len(sinks) for _ in flat]
    for s, e in cons:
        if s in row and e in col:
            table[row[s]][col[e]] = 1
    perm = _first_contiguous(groups, table, flat, path_join(root, flat[0].split(".")[0]))
    order = [flat[r] for r in perm]
    sizes = [structs[r].size for r in perm]
    starts = [sum(sizes[:k]) for k in range(len(sizes) + 1)]
    slices = [(p, [starts[k], starts[k + 1]]) for k, p in enumerate(order)]
    for c, e in enumerate(sinks):
        rows = [k for k, r in enumerate(perm) if table[r][c]]
        slices.append((e, [starts[rows[0]], starts[rows[-1] + 1]]))
    return {"btype": structs[0].btype, "context_size": max(s.context for s in structs), "size": starts[-1],
            "is_backward_only": structs[0].backward, "sources": order, "sinks": sinks, "slices": slices}


def fan_in_orders(arch: dict, root: str = "$") -> dict:
    """{input path: [output paths]} for every input fed by several outputs: the sources in the order Brainstorm's
    hub lays them out, the feature order the layer reads (alphabetical where one input reads them alone; another
    order where several inputs share a hub)."""
    doc = hub_layout(arch, root)
    res = {}
    for h in doc["hubs"]:
        if h["is_backward_only"] or len(h["sources"]) < 2:
            continue
        ranges = [(p, _get(doc["layout"], p)["@slice"]) for p in h["sources"]]
        for sink in h["sinks"]:
            a, b = _get(doc["layout"], sink)["@slice"]
            inside = [p for p, (x, y) in ranges if a <= x and y <= b and x < y]
            if len(inside) > 1:
                res[sink] = inside
    return res


# ------------------------------------------------------------------------------------------ checking a layout

KEYS = ("@index", "@shape", "@hub", "@slice", "@context_size", "@is_backward_only")
MAX_PROBLEMS = 12


def contradictions(doc: dict) -> list:
    """[(JSON path, message)] where a hub layout wrapped with its architecture ({"architecture", "layout",
    "hubs"}) differs from Brainstorm's create_layout of that architecture: a missing or extra array, another
    index, shape, hub, slice, context size or backward-only flag, another hub table (at most MAX_PROBLEMS)."""
    try:
        want = hub_layout(doc["architecture"], "$.architecture")
    except StructureError as e:
        return [(e.path, e.msg)]
    got, P = doc["layout"], []

    def walk(w: dict, g, jp: str, name: str):
        if not isinstance(g, dict):
            P.append((jp, f"'{name}' is missing: Brainstorm's layout of the architecture has it"))
            return
        if w["@type"] == "array":
            for k in KEYS:
                a, b = w.get(k), g.get(k)
                if k == "@is_backward_only":
                    a, b = bool(a), bool(b)
                elif k == "@context_size":
                    a, b = a or 0, b or 0
                if a != b:
                    P.append((path_join(jp, k) if k in g else jp,
                              f"'{name}': {k} {b!r} contradicts the architecture, whose layout (Brainstorm's "
                              f"create_layout) has {a!r}"))
            return
        for k, v in w.items():
            if not k.startswith("@"):
                walk(v, g.get(k), path_join(jp, k), f"{name}.{k}" if name else k)
        for k in g:
            if not k.startswith("@") and k not in w:
                P.append((path_join(jp, k), f"'{name + '.' if name else ''}{k}' is no array or view of Brainstorm's "
                                            f"layout of the architecture"))

    walk(want["layout"], got, "$.layout", "")
    hubs = doc.get("hubs")
    if isinstance(hubs, list):
        if len(hubs) != len(want["hubs"]):
            P.append(("$.hubs", f"{len(hubs)} hubs, but the architecture's layout has {len(want['hubs'])}"))
        for i, (h, w) in enumerate(zip(hubs, want["hubs"])):
            for k in ("btype", "context_size", "size", "is_backward_only", "sources", "sinks"):
                if k in h and h[k] != w[k]:
                    P.append((path_join(path_join("$.hubs", i), k),
                              f"hub {i}: {k} {h[k]!r} contradicts the architecture's layout ({w[k]!r})"))
    if len(P) > MAX_PROBLEMS:
        P = P[:MAX_PROBLEMS] + [(P[MAX_PROBLEMS][0], f"and {len(P) - MAX_PROBLEMS} more contradictions")]
    return P
