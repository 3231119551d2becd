"""Brainstorm's March-2015 layout format: the reader that checks such files (netc/export/layout.py
writes a MemoryPlan in it; what follows describes both).

Format: shared/spec/layout-format.md §2 (tree of view-nodes and array-nodes, `sizes`), with the
`netc` metadata object of §7.4 beside the tree. How netc maps onto it:

* one layer view-node per network input (first, with no inputs) and per scheduled op, `index` =
  position in the plan's schedule (inputs at step 0 first), with exactly the four categories
  `inputs` (operands: `default`, or `in0`, `in1`, ... when there are several), `outputs`
  (`default`), `parameters` (by role: `weight`, `bias`, ...) and `internals` (empty but for the
  recurrent layers, which list Brainstorm's forward internals, OpDef.layout_internals: an Lstm's
  Za ... Cb, a Recurrent's or Clockwork's Ha, each time-sized like the layer's output and given its
  own elements above the planned type-2 range; netc's ops keep no such buffers); layer names are
  made Python identifiers ('/' and '.' become '_'), `netc.names` maps them back;
* buffer types are the plan's classes: parameters type 0 first (the flat parameter vector,
  `netc.parameter_elements` long), batch-sized activations type 1 (feature offsets per sample),
  constant-size activations (a scalar loss) type 0 above the parameters, and type 2 for the
  sequences [T, B, ...] of a net with time-major (recurrent) layers (a layout plans with
  time_sized: feature offsets per time step and sample, B the batch; a [T*B, F] that keeps the
  steps is planned as [T, B, F]). `netc.time` is T and `netc.context` the context rows: the type-2
  buffer is (T + context, B, sizes[2]), the context rows last, as Brainstorm's hubs with a
  context_size; a tensor with context rows (`context` in its metadata: a recurrent layer's
  output) shares its elements with nothing. `netc.totals` counts what the layout holds as
  Brainstorm's create_layout counts its forward hubs (export/layout.py layout_totals).
  Slices count elements of one itemsize (`netc.element_bytes`): a plan mixing itemsizes cannot be
  written in this format;
* zero-copy concat slices are feature ranges of the concat's range (E1), which is only possible
  for slices dense within a sample: plans made with concat="all" that hold strided (channel)
  slices are refused -- plan with concat="contiguous" to write a layout;
* the netc metadata records what the tree cannot say (§7.4): mode, reuse, schedule (`order`),
  compiled batch, alignment, and per tensor its slice, lifetime [first, last step] and alias
  relation, plus which tensor every array-node holds. `batch_layout: "blocked"` says how netc
  itself instantiates type 1: a block of width w at feature offset o takes elements
  [o*B, (o+w)*B) of the type-1 buffer, sample-major; Brainstorm's (B, s1) interleaving of the
  same feature offsets is equally valid, since reuse decisions only compare feature ranges.

The reader checks W1-W4 (§2.5) and the overlap rule of §7.2 and reports every problem with the
JSON path of the node at fault: `$.layout.layout.conv1.layout.outputs.layout.default.slice`.
"""
from __future__ import annotations

import json
import keyword
import re
from dataclasses import dataclass, field


CATEGORIES = ("inputs", "outputs", "parameters", "internals")
FORMAT_VERSION = 1


class LayoutError(Exception):
    """Problems of a layout, each `(json path, message)`; str() gives one per line."""

    def __init__(self, problems):
        if isinstance(problems, str):
            problems = [("$", problems)]
        self.problems = list(problems)
        super().__init__("\n".join(f"{p}: {m}" for p, m in self.problems))


def jpath(*keys) -> str:
    s = "$"
    for k in keys:
        if isinstance(k, int):
            s += f"[{k}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            s += "." + k
        else:
            s += "[" + json.dumps(k) + "]"
    return s


# --------------------------------------------------------------------------------------------
# Writing


@dataclass
class LayoutArray:
    path: str              # "<layer>.<category>.<name>"
    type: int
    start: int
    stop: int
    shape: tuple


@dataclass
class Layout:
    sizes: list
    layers: list                                  # layer names in index order
    arrays: dict = field(default_factory=dict)    # path -> LayoutArray
    meta: dict | None = None


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _ident_ok(name) -> bool:
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)


def read_layout(doc) -> Layout:
    """Parse and check a layout (dict or JSON text); raises LayoutError listing every problem."""
    if isinstance(doc, (str, bytes)):
        try:
            doc = json.loads(doc)
        except json.JSONDecodeError as e:
            raise LayoutError([("$", f"not JSON: {e}")])
    P: list[tuple[str, str]] = []
    if not isinstance(doc, dict):
        raise LayoutError([("$", "a layout is an object with 'sizes' and 'layout'")])
    sizes = doc.get("sizes")
    if not (isinstance(sizes, list) and len(sizes) == 3 and all(_is_int(s) and s >= 0 for s in sizes)):
        P.append((jpath("sizes"), f"expected three non-negative integers [type0, type1, type2], got {sizes!r}"))
        sizes = None
    meta = doc.get("netc")
    if meta is not None and not isinstance(meta, dict):
        P.append((jpath("netc"), "the netc metadata must be an object"))
        meta = None
    out = Layout(sizes or [0, 0, 0], [], {}, meta)
    root = doc.get("layout")
    if not isinstance(root, dict) or not isinstance(root.get("layout"), dict):
        P.append((jpath("layout"), "the root must be a view-node {\"layout\": {<layer>: ...}}"))
        raise LayoutError(P)
    if "index" in root:
        P.append((jpath("layout", "index"), "the root view-node has no index"))
    _check_indexes(root["layout"], ("layout", "layout"), P)
    layer_idx = []
    for lname, node in root["layout"].items():
        lp = ("layout", "layout", lname)
        if not _ident_ok(lname):
            P.append((jpath(*lp), f"layer name {lname!r} is not a Python identifier"))
            continue  # (its arrays' paths "<layer>.<category>.<name>" would not split back)
        if not isinstance(node, dict) or not isinstance(node.get("layout"), dict):
            P.append((jpath(*lp), "a layer must be a view-node with 'index' and 'layout'"))
            continue
        if _is_int(node.get("index")):
            layer_idx.append((node["index"], lname))
        cats = node["layout"]
        for k in cats:
            if k not in CATEGORIES:
                P.append((jpath(*lp, "layout", k), f"unknown category '{k}' (a layer has exactly "
                                                    f"{', '.join(CATEGORIES)})"))
        for ci, cat in enumerate(CATEGORIES):
            cp = lp + ("layout", cat)
            c = cats.get(cat)
            if c is None:
                P.append((jpath(*lp, "layout"), f"missing category '{cat}'"))
                continue
            if not isinstance(c, dict) or not isinstance(c.get("layout"), dict):
                P.append((jpath(*cp), "a category must be a view-node with 'index' and 'layout'"))
                continue
            if c.get("index") != ci:
                P.append((jpath(*cp, "index"), f"'{cat}' has index {c.get('index')!r}, expected {ci}"))
            _check_indexes(c["layout"], cp + ("layout",), P)
            for aname, a in c["layout"].items():
                ap = cp + ("layout", aname)
                if not _ident_ok(aname):
                    P.append((jpath(*ap), f"name {aname!r} is not a Python identifier"))
                    continue
                arr = _read_array(a, ap, out.sizes if sizes else None, P)
                if arr is None:
                    continue
                arr.path = f"{lname}.{cat}.{aname}"
                out.arrays[arr.path] = arr
                # W4: parameters are constant-size; activations are batch- or time-sized (netc
                # layouts may hold constant-size activations, e.g. a scalar loss, above them)
                if cat == "parameters" and arr.type != 0:
                    P.append((jpath(*ap, "slice", 0), f"a parameter must be of buffer type 0, not {arr.type}"))
                if cat != "parameters" and arr.type == 0 and meta is None:
                    P.append((jpath(*ap, "slice", 0), f"{cat} must be of buffer type 1 or 2, not 0"))
            if "slice" in c:
                _check_view_slice(c, cp, [x for x in out.arrays.values()
                                          if x.path.startswith(f"{lname}.{cat}.")], out.sizes, P)
        if "slice" in node:
            _check_view_slice(node, lp, [x for x in out.arrays.values() if x.path.startswith(f"{lname}.")],
                              out.sizes, P)
    out.layers = [n for _, n in sorted(layer_idx)]
    if meta is not None:
        _check_against_meta(out, meta, P)
    else:
        _check_no_overlap(out, P)
    if P:
        raise LayoutError(P)
    return out


def _check_indexes(children: dict, path: tuple, P):
    """W1: every child has an integer index, distinct among its siblings."""
    seen: dict[int, str] = {}
    for name, node in children.items():
        if not isinstance(node, dict):
            continue
        idx = node.get("index")
        if not _is_int(idx):
            P.append((jpath(*path, name, "index"), f"missing or non-integer index {idx!r}"))
            continue
        if idx in seen:
            P.append((jpath(*path, name, "index"), f"duplicate sibling index {idx} (also {jpath(*path, seen[idx])})"))
        else:
            seen[idx] = name


def _read_array(a, ap, sizes, P) -> LayoutArray | None:
    if not isinstance(a, dict):
        P.append((jpath(*ap), "an array-node must be an object with 'index' and 'slice'"))
        return None
    if "layout" in a:
        P.append((jpath(*ap, "layout"), "an entry of a category is an array-node (no 'layout')"))
        return None
    s = a.get("slice")
    if not (isinstance(s, list) and len(s) == 3 and all(_is_int(x) for x in s)):
        P.append((jpath(*ap, "slice"), f"expected [buffer_type, start, stop], got {s!r}"))
        return None
    t, start, stop = s
    if t not in (0, 1, 2):
        P.append((jpath(*ap, "slice", 0), f"buffer type {t} is not 0, 1 or 2"))
        return None
    if sizes is not None and not 0 <= start <= stop <= sizes[t]:
        P.append((jpath(*ap, "slice"), f"slice [{start}, {stop}) is out of range for buffer type {t} "
                                       f"(sizes[{t}] = {sizes[t]})"))
    shape = a.get("shape", [stop - start])
    if not (isinstance(shape, list) and all(_is_int(d) and d >= 0 for d in shape)):
        P.append((jpath(*ap, "shape"), f"expected a list of non-negative integers, got {shape!r}"))
        return None
    n = 1
    for d in shape:
        n *= d
    if n != stop - start:
        P.append((jpath(*ap, "shape"), f"shape {shape} holds {n} elements but the slice [{start}, {stop}) "
                                       f"holds {stop - start}"))
    return LayoutArray("", t, start, stop, tuple(shape))


def _check_view_slice(node, path, below, sizes, P):
    """W3: a view's optional slice covers exactly its arrays, contiguously, of one type."""
    s = node["slice"]
    if not (isinstance(s, list) and len(s) == 3 and all(_is_int(x) for x in s)):
        P.append((jpath(*path, "slice"), f"expected [buffer_type, start, stop], got {s!r}"))
        return
    t, start, stop = s
    if any(x.type != t for x in below):
        P.append((jpath(*path, "slice"), f"a view slice of type {t} covers arrays of another type"))
        return
    pos = start
    for x in sorted(below, key=lambda x: x.start):
        if x.start != pos:
            P.append((jpath(*path, "slice"), f"arrays below do not cover [{start}, {stop}) contiguously"))
            return
        pos = x.stop
    if pos != stop:
        P.append((jpath(*path, "slice"), f"arrays below do not cover [{start}, {stop}) contiguously"))


def _array_jpath(path: str, *tail) -> str:
    layer, cat, name = path.split(".")
    return jpath("layout", "layout", layer, "layout", cat, "layout", name, *tail)


def _check_no_overlap(lay: Layout, P):
    """E3 for layouts without netc metadata: source arrays never share elements."""
    srcs = [a for a in lay.arrays.values() if a.path.split(".")[1] != "inputs" and a.stop > a.start]
    for t in range(3):
        xs = sorted((a for a in srcs if a.type == t), key=lambda a: a.start)
        active: list = []
        for a in xs:
            active = [b for b in active if b.stop > a.start]
            for b in active:
                P.append((_array_jpath(a.path, "slice"), f"[{a.start}, {a.stop}) overlaps "
                          f"{_array_jpath(b.path, 'slice')} [{b.start}, {b.stop}) in buffer type {t} "
                          f"(a layout without netc reuse metadata may not share elements)"))
            active.append(a)


def _check_against_meta(lay: Layout, meta: dict, P):
    """Arrays hold the tensors the metadata says; overlapping tensors are aliases or never live
    together (§7.2), and share elements at all only in a reuse layout."""
    tens = meta.get("tensors")
    arrs = meta.get("arrays")
    if not isinstance(tens, dict) or not isinstance(arrs, dict):
        P.append((jpath("netc"), "netc metadata needs 'tensors' and 'arrays' objects"))
        return
    for key in ("mode", "reuse", "end"):
        if key not in meta:
            P.append((jpath("netc"), f"netc metadata lacks '{key}'"))
    end = meta.get("end", 0)
    if not _is_int(end):
        P.append((jpath("netc", "end"), f"expected the last schedule step (an integer), got {end!r}"))
        end = 0
    info = {}
    for name, e in tens.items():
        tp = ("netc", "tensors", name)
        s, live = (e.get("slice"), e.get("live")) if isinstance(e, dict) else (None, None)
        if not (isinstance(s, list) and len(s) == 3 and all(_is_int(x) for x in s) and s[0] in (0, 1, 2)):
            P.append((jpath(*tp, "slice"), f"expected [buffer_type, start, stop], got {s!r}"))
            continue
        if not 0 <= s[1] <= s[2] <= lay.sizes[s[0]]:
            P.append((jpath(*tp, "slice"), f"slice [{s[1]}, {s[2]}) is out of range for buffer type {s[0]} "
                                           f"(sizes[{s[0]}] = {lay.sizes[s[0]]})"))
        if not (isinstance(live, list) and len(live) == 2 and all(_is_int(x) for x in live)
                and 0 <= live[0] <= live[1] <= end):
            P.append((jpath(*tp, "live"), f"expected [first step, last step] within 0..{end}, got {live!r}"))
            continue
        alias = e.get("alias")
        if alias is not None and not (isinstance(alias, list) and len(alias) == 2 and isinstance(alias[0], str)
                                      and isinstance(alias[1], str) and alias[1] in tens):
            P.append((jpath(*tp, "alias"), f"expected [kind, tensor], got {alias!r}"))
            alias = None
        info[name] = (tuple(s), tuple(live), alias)
    # every array holds the tensor the metadata names, at that tensor's slice (E1 for sinks)
    for path, a in lay.arrays.items():
        name = arrs.get(path)
        if not isinstance(name, str) or name not in info:
            P.append((_array_jpath(path), f"netc.arrays names no tensor for this array"))
            continue
        s = info[name][0]
        if (a.type, a.start, a.stop) != s:
            P.append((_array_jpath(path, "slice"), f"[{a.type}, {a.start}, {a.stop}] differs from "
                      f"{jpath('netc', 'tensors', name, 'slice')} {list(s)} of the tensor it holds"))
    first_path = {}
    for path, name in arrs.items():
        if isinstance(name, str):
            first_path.setdefault(name, path)

    def where(name):
        p = first_path.get(name)
        return _array_jpath(p, "slice") if p and p in lay.arrays else jpath("netc", "tensors", name, "slice")

    # alias groups: "value" (same value: everything but in-place) and "tree" (any alias)
    val, tree = {n: n for n in info}, {n: n for n in info}

    def find(u, n):
        while u[n] != n:
            u[n] = u[u[n]]
            n = u[n]
        return n

    for name, (_, _, alias) in info.items():
        if alias and alias[1] in info:  # (a tensor whose own entry is malformed is reported above)
            tree[find(tree, name)] = find(tree, alias[1])
            if alias[0] != "inplace":
                val[find(val, name)] = find(val, alias[1])
    reuse = bool(meta.get("reuse"))
    for t in range(3):
        xs = sorted(((n, v) for n, v in info.items() if v[0][0] == t and v[0][2] > v[0][1]),
                    key=lambda x: x[1][0][1])
        active: list = []
        for n, (s, live, _) in xs:
            active = [x for x in active if x[1][0][2] > s[1]]
            for m, (s2, live2, _) in active:
                if find(val, n) == find(val, m):
                    continue
                lo, hi = max(live[0], live2[0]), min(live[1], live2[1])
                if lo > hi:
                    if not reuse:
                        P.append((where(n), f"[{s[1]}, {s[2]}) overlaps {where(m)} [{s2[1]}, {s2[2]}) in buffer "
                                            f"type {t}, but netc.reuse is false"))
                    continue
                (_, old), (_, new) = sorted([(live[0], live), (live2[0], live2)])
                if reuse and find(tree, n) == find(tree, m) and old[1] == new[0] and old[0] < new[0]:
                    continue   # an in-place step: the input dies where the output is written
                P.append((where(n), f"[{s[1]}, {s[2]}) overlaps {where(m)} [{s2[1]}, {s2[2]}) in buffer type {t} "
                                    f"while both are live (steps {live[0]}-{live[1]} and {live2[0]}-{live2[1]})"))
            active.append((n, (s, live, None)))


def check_layout_mode(layout: Layout, mode: str):
    """Refuse a reuse layout in a mode it was not planned for (§7.4)."""
    meta = layout.meta
    if meta is None or not meta.get("reuse"):
        return
    if meta.get("mode") != mode:
        raise LayoutError([(jpath("netc", "mode"), f"this layout reuses memory for {meta.get('mode')} and "
                            f"cannot be used for {mode}; plan it again for {mode} (or without reuse)")])
