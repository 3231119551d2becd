"""Writing a memory plan as a Brainstorm layout (the format netc/frontend/layout.py reads and checks;
its description is at the top of that module)."""
from __future__ import annotations

import keyword
import re

from ..frontend.layout import CATEGORIES, FORMAT_VERSION, LayoutError  # noqa: F401  (LayoutError: raised here)
from ..memory.model import MemoryPlan


def _identifier(name: str, used: set) -> str:
    base = re.sub(r"\W", "_", name) or "_"
    if base[0].isdigit() or keyword.iskeyword(base):
        base = "_" + base
    key, k = base, 2
    while key in used:
        key, k = f"{base}_{k}", k + 1
    used.add(key)
    return key


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
        return {"index": index, "slice": slc(t), "shape": list(t.feature_shape)}

    def layer(name, ins, outs, params):
        key = _identifier(name, used)
        if key != name:
            names[key] = name
        cats = {}
        for ci, (cat, entries) in enumerate(zip(CATEGORIES, (ins, outs, params, []))):
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
        layer(st.layer, ins, outs, params)
    params = [t for t in T if t.kind == "param"]
    param_end = max((slc(t)[2] for t in params), default=0)
    tensors = {}
    for t in T:
        e = {"slice": slc(t), "live": [t.producer, t.last_use], "class": t.cls, "dtype": t.dtype}
        if t.alias:
            e["alias"] = [t.alias, T[t.alias_of].name]
        tensors[t.name] = e
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
    return {"sizes": [a.size // E for a in plan.arenas], "layout": {"layout": dict(layers)}, "netc": meta}


# --------------------------------------------------------------------------------------------
# Reading
