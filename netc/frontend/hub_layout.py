"""Reader and checker for Brainstorm's later `@`-key hub layout format (shared/spec/layout-format.md §6).

A hub layout is a tree of `{"@type": "BufferView", "@index": i, <child>: ...}` view-nodes and
`{"@type": "array", "@index": i, "@hub": h, "@slice": [start, stop], "@shape": [...]}` array-nodes;
`@slice` is a range of hub `h`'s feature axis, and `@shape` is the full shape template (`'T'`,
`'B'` then feature dims; the leading symbols give the buffer type: T,B -> 2, B -> 1, none -> 0).
The corpus files (`corpus/brainstorm/*.layout.json`) wrap the tree as `{"layout": tree, "hubs":
[...], "architecture": ..., ...}`; a bare tree is accepted too.

Checks (each problem is reported with the JSON path of the node at fault):

* structure: `@type` is BufferView or array; every non-root node has an int `@index`; sibling
  `@index` values are distinct; array-nodes have no children;
* `@hub` a non-negative int, `@slice` two ints `0 <= start <= stop`, `@shape` a template whose
  feature part is positive ints with `prod == stop - start`; `@context_size` a non-negative int;
* hubs: with a hub table (`hubs`), every `@hub` exists, every slice lies within the hub's `size`,
  and the array's buffer type and backward-only flag agree with the table, its context size is at most the
  hub's (an input reading a recurrent output has none of its own) and some array's is the hub's;
  without one, all arrays of a hub must agree on buffer type (sizes are the high-water marks);
* overlap: inside a hub, two arrays either have the same range (views of the same buffer: a
  source and the sinks it feeds), or one range is exactly tiled by the smallest ranges (a
  concatenating sink, or the root `parameters`/`gradients` vectors); any other overlap is an error.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .jsonloc import nearest_loc, path_join  # noqa: F401  (nearest_loc: for the readers' callers)
from .layout import LayoutError

CATEGORIES7 = ("inputs", "outputs", "parameters", "internals", "input_deltas", "output_deltas", "gradients")


@dataclass
class HubArray:
    path: str          # dotted name, e.g. "Hid.parameters.W"
    jpath: str         # JSON path of the node
    hub: int
    start: int
    stop: int
    shape: list
    btype: int
    context: int = 0
    backward_only: bool = False


@dataclass
class HubLayout:
    arrays: list = field(default_factory=list)
    hub_sizes: dict = field(default_factory=dict)  # hub -> width

    def total(self, T: int, B: int, hubs: list | None = None) -> int:
        """Elements for (T, B) given the hub table (btype, context_size, size per hub)."""
        n = 0
        for h in hubs or []:
            w, bt, ctx = h["size"], h["btype"], h.get("context_size", 0)
            n += w * ((T + ctx) * B if bt == 2 else B if bt == 1 else 1)
        return n


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_hub_document(doc) -> bool:
    """A hub-format tree, bare or wrapped as {"layout": tree, ...}."""
    if not isinstance(doc, dict):
        return False
    if doc.get("@type") == "BufferView":
        return True
    lay = doc.get("layout")
    return isinstance(lay, dict) and lay.get("@type") == "BufferView"


def _btype(shape) -> int:
    if len(shape) >= 2 and shape[0] == "T" and shape[1] == "B":
        return 2
    if shape and shape[0] == "B":
        return 1
    return 0


def read_hub_layout(doc) -> HubLayout:
    """Check a hub layout document; return its arrays, or raise LayoutError with every problem."""
    P: list = []
    if not isinstance(doc, dict):
        raise LayoutError([("$", "a hub layout is a JSON object")])
    if doc.get("@type") == "BufferView":
        root, rpath, hubs, hpath = doc, "$", None, None
    else:
        root, rpath = doc.get("layout"), "$.layout"
        hubs, hpath = doc.get("hubs"), "$.hubs"
        if not isinstance(root, dict) or root.get("@type") != "BufferView":
            raise LayoutError([(rpath, "the layout tree's root must be {\"@type\": \"BufferView\", ...}")])
    table = None
    if hubs is not None:
        if not isinstance(hubs, list):
            P.append((hpath, "\"hubs\" must be a list of hub descriptions"))
        else:
            table = {}
            for i, h in enumerate(hubs):
                hp = path_join(hpath, i)
                if not isinstance(h, dict) or not all(_is_int(h.get(k)) for k in ("hub", "btype", "size")):
                    P.append((hp, "a hub entry needs integer \"hub\", \"btype\" and \"size\""))
                    continue
                if h["hub"] in table:
                    P.append((path_join(hp, "hub"), f"hub {h['hub']} is described twice"))
                if h["size"] < 0 or h["btype"] not in (0, 1, 2):
                    P.append((hp, f"hub {h['hub']}: size must be >= 0 and btype 0, 1 or 2"))
                table[h["hub"]] = (h, hp)
    lay = HubLayout()
    _walk(root, rpath, "", True, lay, P)
    by_hub: dict[int, list] = {}
    for a in lay.arrays:
        by_hub.setdefault(a.hub, []).append(a)
    for h, arrs in sorted(by_hub.items()):
        if table is not None:
            if h not in table:
                P.append((path_join(arrs[0].jpath, "@hub"), f"hub {h} does not exist (the hub table lists "
                                                           f"{len(table)} hubs)"))
                continue
            ent, hp = table[h]
            size = ent["size"]
            for a in arrs:
                if a.path in ("parameters", "gradients") and a.start == a.stop == 0:
                    continue      # a net without parameters: Brainstorm puts the empty vectors in hub 0
                if a.stop > size:
                    P.append((path_join(a.jpath, "@slice"), f"'{a.path}': @slice [{a.start}, {a.stop}] exceeds "
                                                            f"hub {h}'s size {size}"))
                if a.btype != ent["btype"]:
                    P.append((path_join(a.jpath, "@shape"), f"'{a.path}' has buffer type {a.btype} (from its "
                                                            f"@shape) but hub {h} has btype {ent['btype']}"))
                if a.context > ent.get("context_size", 0):     # a sink of a recurrent output has none of its own
                    P.append((a.jpath, f"'{a.path}': @context_size {a.context} exceeds hub {h}'s "
                                       f"context_size {ent.get('context_size', 0)}"))
                if "is_backward_only" in ent and a.backward_only != bool(ent["is_backward_only"]):
                    P.append((a.jpath, f"'{a.path}' is{'' if a.backward_only else ' not'} backward-only but "
                                       f"hub {h} is{'' if ent['is_backward_only'] else ' not'}"))
            if ent.get("context_size", 0) > max(a.context for a in arrs):
                P.append((path_join(hp, "context_size"), f"hub {h}'s context_size {ent['context_size']} is no array's "
                                                         f"@context_size (the hub's is its sources' largest)"))
            lay.hub_sizes[h] = size
        else:
            types = {a.btype for a in arrs}
            if len(types) > 1:
                P.append((path_join(arrs[0].jpath, "@shape"), f"hub {h} mixes buffer types {sorted(types)}"))
            lay.hub_sizes[h] = max(a.stop for a in arrs)
        _check_overlaps(h, arrs, P)
    if P:
        raise LayoutError(P)
    return lay


def _walk(node, jp, name, is_root, lay, P):
    if not isinstance(node, dict):
        P.append((jp, "a layout node must be an object with \"@type\""))
        return
    t = node.get("@type")
    if t not in ("BufferView", "array"):
        P.append((path_join(jp, "@type") if "@type" in node else jp,
                  f"\"@type\" must be \"BufferView\" or \"array\", got {t!r}"))
        return
    if not is_root and not _is_int(node.get("@index")):
        P.append((path_join(jp, "@index") if "@index" in node else jp, f"'{name}' needs an integer \"@index\""))
    children = {k: v for k, v in node.items() if not k.startswith("@")}
    if t == "array":
        if children:
            P.append((path_join(jp, next(iter(children))), f"array '{name}' cannot have children"))
        _array(node, jp, name, lay, P)
        return
    seen: dict = {}
    for k, child in children.items():
        cp = path_join(jp, k)
        idx = child.get("@index") if isinstance(child, dict) else None
        if _is_int(idx):
            if idx in seen:
                P.append((path_join(cp, "@index"), f"@index {idx} of '{k}' is also the @index of sibling "
                                                   f"'{seen[idx]}'"))
            else:
                seen[idx] = k
        _walk(child, cp, f"{name}.{k}" if name else k, False, lay, P)


def _array(node, jp, name, lay, P):
    ok = True
    hub = node.get("@hub")
    if not _is_int(hub) or hub < 0:
        P.append((path_join(jp, "@hub") if "@hub" in node else jp, f"array '{name}' needs \"@hub\": a hub number"))
        ok = False
    sl = node.get("@slice")
    sp = path_join(jp, "@slice") if "@slice" in node else jp
    if not (isinstance(sl, list) and len(sl) == 2 and all(_is_int(x) for x in sl)):
        P.append((sp, f"array '{name}' needs \"@slice\": [start, stop] in its hub"))
        ok = False
    elif not 0 <= sl[0] <= sl[1]:
        P.append((sp, f"'{name}': @slice {sl} is not a range (need 0 <= start <= stop)"))
        ok = False
    shape = node.get("@shape")
    shp = path_join(jp, "@shape") if "@shape" in node else jp
    if not isinstance(shape, list):
        P.append((shp, f"array '{name}' needs \"@shape\": e.g. [\"T\", \"B\", 100] or [100, 784]"))
        return
    bt = _btype(shape)
    feat = shape[{2: 2, 1: 1, 0: 0}[bt]:]
    if not all(_is_int(d) and d >= 0 for d in feat):
        P.append((shp, f"'{name}': @shape {shape} must be 'T', 'B' (optional) then non-negative integers"))
        return
    ctx = node.get("@context_size", 0)
    if not _is_int(ctx) or ctx < 0:
        P.append((path_join(jp, "@context_size"), f"'{name}': @context_size must be a non-negative integer"))
        ctx = 0
    if not ok:
        return
    if math.prod(feat) != sl[1] - sl[0]:
        P.append((shp, f"'{name}': @shape {shape} has {math.prod(feat)} feature elements but @slice {sl} is "
                       f"{sl[1] - sl[0]} wide"))
    lay.arrays.append(HubArray(name, jp, hub, sl[0], sl[1], shape, bt, ctx, bool(node.get("@is_backward_only"))))


def _check_overlaps(h, arrs, P):
    ranges: dict = {}
    for a in arrs:
        if a.start < a.stop:
            ranges.setdefault((a.start, a.stop), []).append(a)
    keys = sorted(ranges)
    atoms = [r for r in keys if not any(o != r and r[0] <= o[0] and o[1] <= r[1] for o in keys)]
    for x, y in zip(atoms, atoms[1:]):
        if y[0] < x[1]:
            a, b = ranges[x][0], ranges[y][0]
            P.append((path_join(b.jpath, "@slice"), f"'{b.path}' [{y[0]}, {y[1]}) overlaps '{a.path}' "
                                                    f"[{x[0]}, {x[1]}) in hub {h} without being a view of the "
                                                    f"same buffer"))
    atomset = set(atoms)
    for r in keys:
        if r in atomset:
            continue
        pos = r[0]
        for a0, a1 in atoms:
            if a0 == pos and a1 <= r[1]:
                pos = a1
        if pos != r[1]:
            b = ranges[r][0]
            P.append((path_join(b.jpath, "@slice"), f"'{b.path}' [{r[0]}, {r[1]}) in hub {h} partly overlaps other "
                                                    f"arrays instead of exactly covering adjacent ones"))
