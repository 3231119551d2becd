"""Paleo network JSON -> netc IR (shared/spec/paleo-format.md).

The file becomes the same unresolved IR the .nd frontend produces (layers with parent names,
`netc.block` and `netc.parallel` regions), so blocks, model-parallel expansion, shapes and costs
go through the very passes and op definitions .nd files use; only Paleo's vocabulary and its
quirks are handled here. Diagnostics point at file:line:col and carry the JSON path.

Quirks that define Paleo's numbers are reproduced; where Paleo is silently wrong or lenient,
netc follows its numbers and says so in a warning (unknown types are pass-throughs, nested blocks
are ignored, order-dependent block shortcuts, duplicate keys, the layers its graph walk leaves out,
counts twice or fails on: paleo_walk replays it, and Reshape/Softmax shapes Paleo never checks:
the importer marks those layers `paleo_unchecked`, see netc/ops/tensor.py).
"""
from __future__ import annotations

import os
import re
from collections import Counter

from ..diagnostics import SOURCES, DiagnosticEngine, Loc, NetcError
from ..ir.core import UNRANKED, Module, Operation, Region
from ..ir.query import MAX_SPLITS, split_ref_problem
from ..ops import lookup
from .jsonloc import load_json, path_join

# Paleo's layer types (§3.1) -> netc op, and the keys each one reads (Paleo key -> netc attribute).
PALEO_TYPES = {
    "Convolution": ("netc.conv2d", {"filter": "filter", "strides": "strides", "padding": "padding",
                                    "splits": "splits", "activation_fn": "activation",
                                    "normalizer_fn": "normalizer"}),
    "Deconvolution": ("netc.deconv2d", {"filter": "filter", "strides": "strides", "padding": "padding",
                                        "output_shape": "output_shape", "activation_fn": "activation"}),
    "Pooling": ("netc.maxpool", {"ksize": "ksize", "strides": "strides", "padding": "padding"}),
    "AvgPool": ("netc.avgpool", {"ksize": "ksize", "strides": "strides", "padding": "padding"}),
    "UpSampling2D": ("netc.upsample2d", {"ksize": "ksize"}),
    "Dropout": ("netc.dropout", {"dropout_keep_prob": "dropout_keep_prob"}),
    "Concatenate": ("netc.concat", {"dim": "dim"}),
    "Elementwise": ("netc.elementwise", {}),
    "Reshape": ("netc.reshape", {"output_shape": "output_shape"}),
    "Softmax": ("netc.softmax", {"num_classes": "num_classes"}),
    "Sigmoid": ("netc.sigmoid", {}),
    "InnerProduct": ("netc.inner_product", {"num_outputs": "num_outputs"}),
}
# Keys Paleo reads for no op, or ignores, and that real files carry: accepted silently.
_IGNORED = {"type", "parents", "activation_fn", "normalizer_fn", "bias", "device", "name", "splits"}
_REQUIRED = {"Convolution": ("filter", "strides", "padding"), "Deconvolution": ("filter", "strides", "padding",
                                                                                "output_shape"),
             "Pooling": ("ksize", "strides", "padding"), "AvgPool": ("ksize", "strides", "padding"),
             "UpSampling2D": ("ksize",), "Dropout": ("dropout_keep_prob",), "Concatenate": ("dim",),
             "Reshape": ("output_shape",), "InnerProduct": ("num_outputs",)}


def is_paleo(data) -> bool:
    return isinstance(data, dict) and isinstance(data.get("layers"), dict)


def network_name(path: str) -> str:
    stem = os.path.splitext(os.path.basename(path))[0] or "net"
    s = re.sub(r"[^A-Za-z0-9_]", "_", stem)
    return s if s[0].isalpha() or s[0] == "_" else "net_" + s


class _Importer:
    def __init__(self, file: str, locs: dict, diag: DiagnosticEngine):
        self.file, self.locs, self.diag = file, locs, diag

    def loc(self, path: str) -> Loc:
        return self.locs.get(path) or Loc(self.file, 1, 1, path)

    def error(self, msg, path):
        return self.diag.error(msg, self.loc(path))

    def warn(self, msg, path, once=None):
        return self.diag.warning(msg, self.loc(path), once_key=once)

    def module(self, data, name: str) -> Module:
        if not isinstance(data, dict):
            raise NetcError("a Paleo network file is a JSON object with a \"layers\" object", self.loc("$"))
        if "layers" not in data:
            raise NetcError("a Paleo network file needs a \"layers\" object", self.loc("$"))
        if not isinstance(data["layers"], dict):
            raise NetcError("\"layers\" must be an object mapping layer names to layer specs",
                            self.loc("$.layers"))
        layers = data["layers"]
        if "data" not in layers:
            self.error("Paleo needs the root input layer to be named 'data' (its graph walk starts there)",
                       "$.layers")
        ops = []
        errors_before = self.diag.error_count
        block_names = [n for n, s in layers.items() if isinstance(s, dict) and s.get("type") in ("Block",
                                                                                                  "ModelParallel")]
        seen_blocks = set()
        for lname, spec in layers.items():
            path = path_join("$.layers", lname)
            op = self.layer(lname, spec, path, top=True)
            if op is None:
                continue
            if isinstance(spec, dict) and spec.get("type") in ("Block", "ModelParallel"):
                seen_blocks.add(lname)
            for p in (spec.get("parents") or []) if isinstance(spec, dict) else []:
                if isinstance(p, str) and p in block_names and p not in seen_blocks:
                    self.warn(f"'{lname}' names block '{p}' before the block appears in the file; netc resolves "
                              f"it to the block's endpoint, but Paleo's expansion is order-sensitive and would "
                              f"fail", path_join(path, "parents"))
            ops.append(op)
        if self.diag.error_count == errors_before:  # (a broken file's problems are reported as such)
            ops = self.omissions(layers, ops)
        net = Operation("netc.network", attrs={"sym_name": name}, regions=[Region(ops)], loc=self.loc("$"))
        if isinstance(data.get("name"), str):
            net.attrs["title"] = data["name"]
        m = Module([net], loc=Loc(self.file, 1, 1))
        m.attrs["source"] = self.file
        return m

    def _parents(self, name, spec, path):
        if "parents" not in spec:
            self.error(f"layer '{name}' has no \"parents\" (Paleo requires the key, even if empty)", path)
            return None
        ps = spec["parents"]
        ppath = path_join(path, "parents")
        if not isinstance(ps, list) or not all(isinstance(p, str) for p in ps):
            self.error(f"\"parents\" of '{name}' must be a list of layer names", ppath)
            return None
        return ps  # a parent listed twice: whether Paleo's walk drops the layer is up to omissions()

    def layer(self, name, spec, path, top=False, in_block=False):
        if not isinstance(spec, dict):
            self.error(f"layer '{name}' must be an object", path)
            return None
        if "type" not in spec:
            self.error(f"layer '{name}' has no \"type\"", path)
            return None
        t = spec["type"]
        tpath = path_join(path, "type")
        if not isinstance(t, str):
            self.error(f"\"type\" of '{name}' must be a string", tpath)
            return None
        if "@" in name:
            self.error(f"layer name '{name}' contains '@', which Paleo reserves for split indices", path)
        parents = self._parents(name, spec, path)
        if parents is None:
            return None
        loc = self.loc(path)
        attr_locs = {"name": loc, "type": self.loc(tpath)}
        # a split suffix is checked where it is written ('fc6@x' would reach int() in
        # expand-model-parallel); a malformed reference is left out and its layer marked invalid
        kept, bad = [], False
        for i, p in enumerate(parents):
            ploc = self.loc(path_join(path_join(path, "parents"), i))
            problem = split_ref_problem(p) if t != "Input" else None  # (an Input's parents are ignored)
            if problem:
                self.diag.error(problem, ploc, width=len(p) + 2)
                bad = True
                continue
            attr_locs[f"parent{len(kept)}"] = ploc
            kept.append(p)
        parents = kept
        base = {"name": name, "parents": list(parents)}
        if t in ("Block", "ModelParallel") and top:
            return self.block(name, spec, path, t, base, attr_locs)
        if t in ("Block", "ModelParallel"):
            self.warn(f"Paleo does not expand a {t} nested in a block: '{name}' becomes a pass-through and its "
                      f"layers are ignored, as in Paleo", tpath)
            return self._opaque(t, base, attr_locs, loc)
        if t == "Input":
            tensor = spec.get("tensor")
            if not (isinstance(tensor, list) and tensor and all(isinstance(d, int) and not isinstance(d, bool)
                                                               for d in tensor)):
                self.error(f"Input '{name}' needs \"tensor\": a list of integers (its shape)",
                           path_join(path, "tensor") if "tensor" in spec else path)
                return None
            if parents:
                self.warn(f"Input '{name}' ignores its parents (as Paleo does)", path_join(path, "parents"))
            op = Operation("netc.input", result_types=[UNRANKED],
                           attrs={"name": name, "shape": list(tensor), "dtype": "f32"}, loc=loc)
            op.attr_locs = {"name": loc, "shape": self.loc(path_join(path, "tensor"))}
            return op
        if t not in PALEO_TYPES:
            self.warn(f"layer type '{t}' is unknown to Paleo: it is a pass-through with no parameters and 0 FLOPs "
                      f"(Paleo's Generic layer)", tpath, once=("paleo-generic", t))
            return self._opaque(t, base, attr_locs, loc)
        opname, keys = PALEO_TYPES[t]
        attrs = dict(base)
        invalid = bad  # set after check_attrs, which would report 'invalid' as an unknown attribute
        for k in _REQUIRED.get(t, ()):
            if k not in spec:
                self.error(f"{t} '{name}' needs \"{k}\"", path)
                invalid = True
        for k, v in spec.items():
            kpath = path_join(path, k)
            if k in keys:
                a = keys[k]
                if k in ("activation_fn", "normalizer_fn"):
                    if v is None:
                        continue
                    opdef = lookup(opname)
                    choices = opdef.attrs[a].choices
                    if v not in choices:
                        self.warn(f"{k} {v!r} of '{name}' is not one netc knows ({', '.join(choices[1:])}); "
                                  f"ignored, as Paleo ignores it for costs", kpath)
                        continue
                if k == "num_classes" and v is None:
                    continue
                if k == "splits" and not top:
                    continue  # inside a ModelParallel block the block's splits apply
                attrs[a] = v
                attr_locs[a] = self.loc(kpath)
            elif k not in _IGNORED and k not in ("tensor", "layers", "endpoint"):
                self.warn(f"key \"{k}\" is not read by Paleo for {t} layers; ignored", kpath,
                          once=("paleo-key", t, k))
        op = Operation(opname, result_types=[UNRANKED], attrs=attrs, loc=loc)
        op.attr_locs = attr_locs
        opdef = lookup(opname)
        for key, msg, hint in opdef.check_attrs(op.attrs):
            d = self.diag.error(msg, attr_locs.get(key, loc) if key else loc)
            if hint:
                d.note(hint)
            op.attrs["invalid"] = True
        if invalid:
            op.attrs["invalid"] = True
        nc = attrs.get("num_classes")
        if t == "Softmax" and isinstance(nc, int) and not isinstance(nc, bool) and nc <= 0:
            self.error(f"\"num_classes\" of '{name}' must be a positive integer", path_join(path, "num_classes"))
            op.attrs["invalid"] = True
        if t in ("Reshape", "Softmax"):
            # Paleo's shape rules for these check nothing (§6.9, §6.10): reproduce them; shape inference
            # warns where the number is not a real tensor shape, and executors refuse such a layer
            op.attrs["paleo_unchecked"] = True
        if t == "Sigmoid":
            self.warn(f"Paleo's Sigmoid outputs [N, 1] whatever its input; netc's Sigmoid is elementwise "
                      f"(the same for [N, 1] inputs)", tpath, once=("paleo-sigmoid",))
        return op

    def omissions(self, layers: dict, ops: list) -> list:
        """Warn about every layer Paleo's graph walk silently leaves out or counts twice (spec §5.5),
        or the layer Paleo's walk fails at, and return the network's top-level ops without the ones
        netc leaves out as well.

        Paleo emits only what its walk from 'data' reaches with all in-edges passed. netc builds every
        layer connected to 'data' (with a warning that Paleo's totals do not count the ones Paleo
        omits); layers with no connection to 'data' at all (a second input and its layers, a layer
        without parents) are left out, as in Paleo."""
        graph = paleo_expand(layers)
        if graph is None:
            return ops  # Paleo would reject the file; the passes report why
        walk = paleo_walk(graph)
        if walk is None:
            self.warn("netc cannot replay Paleo's graph walk on this network (its branches nest too deeply), "
                      "so it cannot say which layers Paleo would omit", "$.layers")
            return ops
        if walk.depth > _PALEO_MAX_DEPTH:
            self.warn(f"Paleo compatibility: Paleo's graph walk recurses {walk.depth} calls deep on this network "
                      f"(one per step of a chain), past Python's default recursion limit of 1000, so Paleo itself "
                      f"fails ('maximum recursion depth exceeded'); netc builds it", "$.layers")
        levels = walk.levels
        dropped = [g for g in graph if g.name not in levels]
        if not dropped and walk.failure is None and len(walk.order) == len(graph):
            return ops  # Paleo emits every layer once (every corpus network)
        by_name = {g.name: g for g in graph}
        children: dict[str, list] = {g.name: [] for g in graph}
        for g in graph:
            for p in g.parents:
                children[p].append(g.name)
        linked = _closure(["data"], lambda n: children[n] + by_name[n].parents)  # connected to 'data'
        if walk.failure is not None:
            name, why = walk.failure
            self.warn(f"Paleo compatibility: Paleo fails on this network: {why}; netc builds it", by_name[name].path)
        else:
            for name, k in Counter(walk.order).items():
                if k > 1:
                    self.warn(f"Paleo compatibility: Paleo's graph walk emits layer '{name}' {k} times, so Paleo's "
                              f"totals count it {k} times; netc counts it once", by_name[name].path)
        reach = _closure(["data"], lambda n: children[n])
        gone = {g.name for g in dropped}
        index = {g.name: i for i, g in enumerate(graph)}
        for g in dropped:
            if any(p in gone for p in g.parents):
                continue  # omitted because a parent is: listed under that parent's warning
            if walk.failure is not None and g.name in linked:
                continue  # Paleo computes nothing at all
            deps = sorted((n for n in _closure([g.name], lambda n: children[n]) if n != g.name), key=index.get)
            path = g.path
            if g.name not in linked:
                d = self.warn(f"Paleo compatibility: layer '{g.name}' is not connected to 'data', so Paleo's graph "
                              f"walk never reaches it and leaves it out; netc leaves it out too", path)
                if deps:
                    d.note(f"with it, both leave out the {_count(deps, 'layer')} that depend{_s(deps)} on it: "
                           f"{', '.join(deps)}")
                continue
            if g.name not in reach:
                why = "it is not reachable from 'data'"
            elif len(set(g.parents)) != len(g.parents):
                dup = next(p for p in g.parents if g.parents.count(p) > 1)
                why = (f"it lists parent '{dup}' twice, which makes it a joint of the walk, and the walk never "
                       f"releases it")
            else:
                lv = ", ".join(f"'{p}' at level {levels[p]}" for p in dict.fromkeys(g.parents))
                why = (f"its in-edges are passed at different nesting levels of the walk (parents {lv}), so "
                       f"'walk until joints' never comes back to it")
            d = self.warn(f"Paleo compatibility: Paleo's graph walk omits layer '{g.name}': {why}; netc builds "
                          f"it, but Paleo's totals do not count it", path)
            if deps:
                d.note(f"Paleo also omits the {_count(deps, 'layer')} that depend{_s(deps)} on it (netc builds "
                       f"{'it' if len(deps) == 1 else 'them'}): {', '.join(deps)}")
        return self._without(ops, {g.name for g in dropped if g.name not in linked}, graph)

    @staticmethod
    def _without(ops, removed: set, graph) -> list:
        """`ops` less the layers whose every expanded copy is in `removed` (blocks lose such
        sublayers, and go when none is left)."""
        if not removed:
            return ops
        copies: dict[tuple, list] = {}
        for g in graph:
            copies.setdefault(g.source, []).append(g.name)
        gone = {k for k, names in copies.items() if all(n in removed for n in names)}
        kept = []
        for op in ops:
            top = op.attrs.get("name")
            if op.name not in ("netc.block", "netc.parallel"):
                if (top, None) not in gone:
                    kept.append(op)
                continue
            subs = [sub for sub in op.regions[0].ops if (top, sub.attrs.get("name")) not in gone]
            if not subs:
                continue
            if len(subs) != len(op.regions[0].ops):
                op.regions[0].block.set_ops(subs)
                if op.attrs.get("endpoint") not in {sub.attrs.get("name") for sub in subs}:
                    op.attrs.pop("endpoint", None)  # no kept layer can name it: it was not connected
            kept.append(op)
        return kept

    def _opaque(self, t, base, attr_locs, loc):
        op = Operation("netc.opaque", result_types=[UNRANKED], attrs=dict(base, type=t), loc=loc)
        op.attr_locs = attr_locs
        return op

    def block(self, name, spec, path, t, base, attr_locs):
        layers = spec.get("layers")
        lpath = path_join(path, "layers")
        if not isinstance(layers, dict):
            self.error(f"{t} '{name}' needs \"layers\": an object of sublayers", lpath if "layers" in spec else path)
            return None
        attrs = dict(base)
        if t == "ModelParallel":
            splits = spec.get("splits", 1)
            if not isinstance(splits, int) or isinstance(splits, bool) or not 1 <= splits <= MAX_SPLITS:
                # (each split is a copy of the block's layers)
                self.error(f"\"splits\" of '{name}' must be an integer from 1 to {MAX_SPLITS}",
                           path_join(path, "splits"))
                splits = 1
            attrs["splits"] = splits
        if "endpoint" in spec:
            ep = spec["endpoint"]
            if not isinstance(ep, str):
                self.error(f"\"endpoint\" of '{name}' must be a sublayer name", path_join(path, "endpoint"))
            else:
                attrs["endpoint"] = ep
                attr_locs["endpoint"] = self.loc(path_join(path, "endpoint"))
        subs = []
        for sname, sspec in layers.items():
            op = self.layer(sname, sspec, path_join(lpath, sname), top=False, in_block=True)
            if op is not None:
                if op.name == "netc.input":
                    self.error(f"an Input inside block '{name}' is never expanded by Paleo", path_join(lpath, sname))
                    continue
                subs.append(op)
        op = Operation("netc.block" if t == "Block" else "netc.parallel", attrs=attrs, regions=[Region(subs)],
                       loc=self.loc(path))
        op.attr_locs = attr_locs
        return op


# ------------------------------------------------------------------------- Paleo's layer order

class PaleoLayer:
    """One layer of Paleo's expanded network (§4): its full name (`B/x@s`), resolved parents and
    `source`, (top-level key, sublayer key or None): what netc's IR op is made from (`path`: its
    JSON path)."""
    __slots__ = ("name", "parents", "source")

    def __init__(self, name, parents, source):
        self.name, self.parents, self.source = name, parents, source

    @property
    def path(self) -> str:
        top, sub = self.source
        path = path_join("$.layers", top)
        return path if sub is None else path_join(path_join(path, "layers"), sub)

    def __repr__(self):
        return f"PaleoLayer({self.name!r}, {self.parents!r})"


class _Rejected(Exception):
    """Paleo itself would fail on the file (netc's importer and passes report the problem)."""


def paleo_expand(layers: dict) -> list[PaleoLayer] | None:
    """Paleo's Block/ModelParallel expansion and name resolution (§4) over the "layers" object, in
    the order Paleo registers the layers (JSON order, blocks expanded in place, splits outermost).
    None when Paleo would reject the network (unknown or duplicate names, misused @self/@all, a
    cycle). One difference, already warned about: the block-name shortcut resolves whatever the
    order of the blocks in the file."""
    blocks = ("Block", "ModelParallel")
    try:
        specs = [(n, s) for n, s in layers.items()]
        if not all(isinstance(s, dict) and isinstance(s.get("parents"), list) for _, s in specs):
            return None
        splits_of, endpoint_of = {}, {}
        for b, spec in specs:
            if spec.get("type") in blocks:
                if spec.get("type") == "ModelParallel":
                    for sub in spec["layers"]:
                        splits_of[f"{b}/{sub}"] = spec.get("splits", 1)
                if isinstance(spec.get("endpoint"), str):
                    endpoint_of[b] = f"{b}/{spec['endpoint']}"

        def resolve(names, split=None):
            out = []
            for p in names:
                if "@all" in p:
                    x = p.replace("@all", "")
                    if x not in splits_of:
                        raise _Rejected
                    out += [f"{endpoint_of.get(x, x)}@{i}" for i in range(splits_of[x])]
                elif "@self" in p:
                    x = p.replace("@self", "")
                    if x not in splits_of or split is None:
                        raise _Rejected
                    out.append(f"{endpoint_of.get(x, x)}@{split}")
                else:
                    out.append(endpoint_of.get(p, p))
            return out

        graph = []
        for name, spec in specs:
            if spec.get("type") not in blocks:
                graph.append(PaleoLayer(name, resolve(spec["parents"]), (name, None)))
                continue
            parallel = spec["type"] == "ModelParallel"
            outside = resolve(spec["parents"])
            for split in range(spec.get("splits", 1) if parallel else 1):
                for sub, sspec in spec["layers"].items():
                    full = f"{name}/{sub}" + (f"@{split}" if parallel else "")
                    ps = sspec["parents"]
                    parents = list(outside) if not ps else resolve([f"{name}/{q}" for q in ps], split)
                    graph.append(PaleoLayer(full, parents, (name, sub)))
    except (_Rejected, AttributeError, KeyError, TypeError):
        return None
    names = {g.name for g in graph}
    if "data" not in names or len(names) != len(graph) or any(p not in names for g in graph for p in g.parents):
        return None
    # a cycle is an error netc reports (with the cycle); Paleo would loop on nothing but omit it
    indeg = {g.name: len(g.parents) for g in graph}
    children: dict[str, list] = {g.name: [] for g in graph}
    for g in graph:
        for p in g.parents:
            children[p].append(g.name)
    ready = [n for n, d in indeg.items() if d == 0]
    seen = 0
    while ready:
        n = ready.pop()
        seen += 1
        for c in children[n]:
            indeg[c] -= 1
            if indeg[c] == 0:
                ready.append(c)
    return graph if seen == len(graph) else None


class PaleoWalk:
    """What Paleo's walk does with a network: `nested` (lists are chains, tuples parallel branches),
    `order` (the flattened emission order; a layer can appear twice, see paleo_walk), `levels` (the
    nesting level at which each emitted layer was first emitted) and `failure`: None, or (layer,
    why) where Paleo itself fails (an assertion in the walk, or a layer emitted before a parent,
    which Paleo cannot build). `depth`: how deep Paleo's recursive walk nests its calls (one per
    chain step, continuation and branch); Python's default limit is 1000."""
    __slots__ = ("nested", "order", "levels", "failure", "depth")

    def __init__(self, nested, order, levels, failure, depth):
        self.nested, self.order, self.levels, self.failure, self.depth = nested, order, levels, failure, depth


class _WalkFailed(Exception):
    pass


# Python's default recursion limit (1000) less the frames of Paleo's command line below the walk
_PALEO_MAX_DEPTH = 1000 - 20


def paleo_walk(graph: list[PaleoLayer], start: str = "data") -> PaleoWalk | None:
    """Paleo's layer order: its depth-first "walk until joints" from `start` (§5.3), replayed.

    A joint is a layer with more than one in-edge; walking a layer passes its out-edges. A chain
    is followed while the frontier is one layer; a frontier of several is explored branch by branch
    (one nesting level deeper), each branch stopping at joints, and the joints whose in-edges are
    all passed by then stop being joints and become the next frontier. Layers that are not part of
    a frontier at the right moment are never emitted (§5.5). Faithfully too: a joint released in
    a deeper branch and met again in a frontier of its caller is walked a second time (emitted
    twice, its out-edges passed twice), which can make Paleo fail. Out-edges are in the order
    Paleo adds them (the order of `graph`); released joints are taken in that order as well
    (Python 2's set order may differ in contrived graphs; every corpus network is a chain or has
    the same layers emitted either way).

    None if the branches nest too deeply to replay."""
    out_edges: dict[str, list] = {g.name: [] for g in graph}
    parents = {g.name: g.parents for g in graph}
    indeg = {g.name: 0 for g in graph}
    for g in graph:
        for p in g.parents:
            out_edges[p].append(g.name)
            indeg[g.name] += 1
    joints = {n for n, d in indeg.items() if d > 1}
    order: list[str] = []
    levels: dict[str, int] = {}
    deepest = [0]

    def walk(frontier, level, depth):
        history = []
        while True:  # each round is one (tail-)recursive call in Paleo, one frame deeper
            depth += 1
            deepest[0] = max(deepest[0], depth)
            if not frontier:
                return history, []
            if all(n in joints for n in frontier):
                return history, frontier  # stop at joints; the caller decides whether they are released
            if len(frontier) == 1:  # a chain: emit it, pass its out-edges
                x = frontier[0]
                history.append(x)
                order.append(x)
                levels.setdefault(x, level)
                for y in out_edges[x]:
                    if indeg[y] == 0:  # Paleo: assert self.indegrees[x] > 0
                        raise _WalkFailed(x, f"its graph walk emits '{x}' a second time and passes its edge to "
                                             f"'{y}' again (an assertion in the walk fails)")
                    indeg[y] -= 1
                frontier = out_edges[x]
                continue
            group, released = [], {}
            for x in frontier:  # several: each branch alone, one level deeper, until joints
                sub, stopped = walk([x], level + 1, depth)
                if sub:
                    group.append(sub)
                for j in stopped:
                    if indeg[j] == 0:
                        released[j] = True
            if group:
                history.append(tuple(group))
            joints.difference_update(released)
            frontier = list(released)

    failure = None
    try:
        nested, _ = walk([start], 0, 0)
    except RecursionError:
        return None
    except _WalkFailed as e:
        nested, failure = None, e.args
    if failure is None:  # Paleo builds the layers in this order; a parent must come first
        built: set = set()
        for x in order:
            late = next((p for p in parents[x] if p not in built), None)
            if late is not None:
                failure = (x, f"its graph walk emits '{x}' before its parent '{late}', so building '{x}' fails "
                              f"(KeyError)")
                break
            built.add(x)
    return PaleoWalk(nested, order, levels, failure, deepest[0])


def _closure(start, step) -> list:
    """`start` and everything reachable by `step`, in discovery order."""
    seen = dict.fromkeys(start)
    todo = list(seen)
    while todo:
        for m in step(todo.pop()):
            if m not in seen:
                seen[m] = None
                todo.append(m)
    return list(seen)


def _count(items, word) -> str:
    return f"{len(items)} {word}{'s' if len(items) != 1 else ''}"


def _s(items) -> str:
    """The verb's -s for a subject of len(items) things ("1 layer that depends")."""
    return "s" if len(items) == 1 else ""


def import_paleo(text: str, file: str = "<input>", diag: DiagnosticEngine | None = None, data=None,
                 locs=None, dups=None) -> Module:
    SOURCES.add(file, text)
    own = diag is None
    diag = diag or DiagnosticEngine()
    if data is None:
        data, locs, dups = load_json(text, file)
    imp = _Importer(file, locs, diag)
    for path, loc, first in dups or ():
        diag.warning(f"duplicate key {path}: the last one wins (as in Paleo)", loc).note("first given here", first)
    m = imp.module(data, network_name(file))
    if own and diag.has_errors():
        raise NetcError(diag.diagnostics)
    return m
