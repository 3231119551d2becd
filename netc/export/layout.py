"""Writing a memory plan as a Brainstorm layout (the format netc/frontend/layout.py reads and checks;
its description is at the top of that module)."""
from __future__ import annotations

import keyword
import re
from typing import NamedTuple

from ..frontend.layout import CATEGORIES, FORMAT_VERSION, LayoutError  # noqa: F401  (LayoutError: raised here)
from ..memory.model import TIME, MemoryPlan
from ..ops import lookup


def _identifier(name: str, used: set) -> str:
    base = re.sub(r"\W", "_", name) or "_"
    if base[0].isdigit() or keyword.iskeyword(base):
        base = "_" + base
    key, k = base, 2
    while key in used:
        key, k = f"{base}_{k}", k + 1
    used.add(key)
    return key


class Internal(NamedTuple):
    """A layer's internal array in a layout (no plan tensor): its name in the metadata and feature shape."""
    name: str
    feature_shape: tuple


def write_layout(plan: MemoryPlan) -> dict:
    """The plan as a March-2015 layout document (plain JSON data) with netc metadata."""
    T = plan.tensors
    items = {t.itemsize for t in T}
    if len(items) > 1:
        raise LayoutError([("$", "the plan mixes element sizes "
                            f"({', '.join(sorted({t.dtype for t in T}))}); a Brainstorm layout counts one element size")])
    E = items.pop() if items else 4
    strided = [t.name for t in T if t.strides is not None]
    if strided:
        raise LayoutError([("$", f"'{strided[0]}' is a strided slice (a channel concatenation), which the "
                            f"March-2015 format cannot express; plan with concat='contiguous'")])
    fused = [t.name for t in T if t.fused]
    if fused:
        raise LayoutError([("$", f"'{fused[0]}' is fused (computed inside one kernel, no bytes), which a layout "
                            f"of one array per layer output cannot express; plan with fusion='none'")])

    def slc(t):
        b = plan.buffers[t.buffer]
        start = b.offset + t.offset
        if start % E:
            raise LayoutError([("$", f"'{t.name}' starts at byte {start}, not a multiple of {E}")])
        return [t.cls, start // E, start // E + t.numel]

    used: set = set()
    names: dict[str, str] = {}
    layers: list[tuple[str, dict]] = []
    arrays: dict[str, str] = {}

    def array(t, index, path):
        arrays[path] = t.name
        s = extra[t.name]["slice"] if t.name in extra else slc(t)
        return {"index": index, "slice": s, "shape": list(t.feature_shape)}

    top = [plan.arenas[TIME].size // E]      # the internals' elements: above the planned time arena
    extra: dict = {}

    def internals(st) -> list:
        """The forward internals Brainstorm's layer keeps (OpDef.layout_internals), time-sized like its result:
        each its own elements above the planned time arena, live within its step (netc's ops keep them in
        registers or recompute them: no plan tensor holds them)."""
        res = T[st.writes[0]] if len(st.writes) == 1 else None
        if res is None or res.cls != TIME:
            return []
        out = []
        for n in getattr(lookup(st.op), "layout_internals", ()):
            t = Internal(f"{st.layer}.internals.{n}", res.feature_shape)
            extra[t.name] = {"slice": [TIME, top[0], top[0] + res.numel], "live": [st.index, st.index], "class": TIME,
                             "dtype": res.dtype, "internal": True, **({"context": res.context} if res.context else {})}
            top[0] += res.numel
            out.append((n, t))
        return out

    def layer(name, ins, outs, params, internals=()):
        key = _identifier(name, used)
        if key != name:
            names[key] = name
        cats = {}
        for ci, (cat, entries) in enumerate(zip(CATEGORIES, (ins, outs, params, internals))):
            cats[cat] = {"index": ci, "layout": {n: array(t, k, f"{key}.{cat}.{n}")
                                                 for k, (n, t) in enumerate(entries)}}
        layers.append((key, {"index": len(layers), "layout": cats}))

    for i in plan.inputs:
        layer(T[i].name, [], [("default", T[i])], [])
    for st in plan.steps:
        n_ops = len(st.reads) - len(st.roles)
        ops = st.reads[:n_ops]
        ins = [("default" if len(ops) == 1 else f"in{k}", T[i]) for k, i in enumerate(ops)]
        outs = [("default" if len(st.writes) == 1 else f"out{k}", T[i]) for k, i in enumerate(st.writes)]
        params = [(_identifier(r, set()), T[i]) for r, i in zip(st.roles, st.reads[n_ops:])]
        layer(st.layer, ins, outs, params, internals(st))
    params = [t for t in T if t.kind == "param"]
    param_end = max((slc(t)[2] for t in params), default=0)
    tensors = {}
    joins = {w for st in plan.steps if getattr(lookup(st.op), "concat", False) for w in st.writes}
    for t in T:
        e = {"slice": slc(t), "live": [t.producer, t.last_use], "class": t.cls, "dtype": t.dtype}
        if t.alias:
            e["alias"] = [t.alias, T[t.alias_of].name]
        if t.context:
            e["context"] = t.context
        if t.id in joins:
            e["joins"] = True      # a concatenation's result: Brainstorm's fan-in sink, a view of its sources
        tensors[t.name] = e
    tensors.update(extra)
    meta = {
        "version": FORMAT_VERSION,
        "network": plan.network,
        "mode": plan.mode,
        "reuse": plan.reuse,
        "order": [k for k, _ in layers],
        "end": plan.end,
        "batch": plan.batch,
        "batch_layout": "blocked",
        "dtype": max(sorted({t.dtype for t in T}), key=[t.dtype for t in T].count) if T else "f32",
        "element_bytes": E,
        "alignment": plan.alignment,
        "parameter_elements": param_end,
        "schedule": plan.schedule,
        "strategy": [a.strategy for a in plan.arenas],
        "lower_bound": [a.lower_bound // E for a in plan.arenas],
        "names": names,
        "tensors": tensors,
        "arrays": arrays,
    }
    if any(t.cls == TIME for t in T):   # Brainstorm's type 2: (T + context, B, sizes[2]), the context rows last
        meta.update(time=plan.time, context=plan.context)
    sizes = [a.size // E for a in plan.arenas]
    sizes[TIME] = max(sizes[TIME], top[0])
    doc = {"sizes": sizes, "layout": {"layout": dict(layers)}, "netc": meta}
    meta["totals"] = layout_totals(doc)
    return doc


def layout_totals(doc: dict) -> dict:
    """What a layout holds, counted as Brainstorm's create_layout counts its hubs: per category (parameters,
    inputs_outputs: the layers' output arrays, internals) the elements per buffer type [type 0, 1, 2] of
    its distinct source arrays (an alias -- a view, an identity, a shared parameter -- and a concatenation's
    result, Brainstorm's fan-in sink, hold no elements of their own), and for type 2 the context elements
    (width * context rows). One (T, B) takes type0 + B * type1 + (T * type2 + context) * B elements
    (brainstorm_elements)."""
    meta = doc["netc"]
    tens, arrays = meta["tensors"], meta["arrays"]
    totals = {c: [0, 0, 0] for c in ("parameters", "inputs_outputs", "internals")}
    context = {c: 0 for c in totals}
    rows: dict = {}       # the context rows of the bytes a value and its views or identities hold together
    for name, e in tens.items():
        root = name
        while (tens[root].get("alias") or [None])[0] in ("view", "identity"):
            root = tens[root]["alias"][1]
        rows[root] = max(rows.get(root, 0), e.get("context", 0))
    seen = set()
    for lname, node in doc["layout"]["layout"].items():
        for cat, key in (("outputs", "inputs_outputs"), ("parameters", "parameters"), ("internals", "internals")):
            for n, arr in node["layout"][cat]["layout"].items():
                name = arrays[f"{lname}.{cat}.{n}"]
                e = tens[name]
                if name in seen or e.get("joins") or (e.get("alias") or [None])[0] in ("view", "identity", "share"):
                    continue
                seen.add(name)
                t, a, b = arr["slice"]
                totals[key][t] += b - a
                context[key] += rows.get(name, e.get("context", 0)) * (b - a) if t == TIME else 0
    totals["context"] = context
    return totals


def brainstorm_elements(totals: dict, time: int, batch: int) -> int:
    """Elements of every array layout_totals counts at (T, B): Brainstorm's allocation for its forward hubs."""
    n = 0
    for c in ("parameters", "inputs_outputs", "internals"):
        w0, w1, w2 = totals[c]
        n += w0 + batch * w1 + (time * w2 + totals["context"][c]) * batch
    return n


# --------------------------------------------------------------------------------------------
# Reading
