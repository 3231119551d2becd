"""Reports of a memory plan: JSON for `netc explain --format json --memory`, and a picture of
offset against schedule step (one rectangle per buffer) drawn with matplotlib (the `plot` extra).

A training program's plan (mode "training") also lists its in-place `updates` (per step, the
parameters and state it overwrites), and, after the rematerialize pass, `recompute`: the budget,
the arena before and after, the extra FLOPs and the recomputed layers."""
from __future__ import annotations

from .model import BATCH, CLASS_NAMES, MemoryPlan


def _scale(plan: MemoryPlan, cls: int) -> int:
    return plan.batch if cls == BATCH else 1


def plan_json(plan: MemoryPlan) -> dict:
    """Totals at the compiled batch (batch-class arenas are planned per sample and scaled).

    proven_optimal: every arena is proven optimal for its buffers (it meets its lower bound, or the
    exact search completed), so no offset assignment of this schedule and these aliases does better;
    per arena under "arenas", with the strategy that won ("exact" where the search improved on the
    heuristics). plan_seconds: the whole planning time; per arena, the offset assignment's."""
    arena = sum(a.size * _scale(plan, a.cls) for a in plan.arenas)
    lower = sum(a.lower_bound * _scale(plan, a.cls) for a in plan.arenas)
    naive = sum(a.naive * _scale(plan, a.cls) for a in plan.arenas)
    buffers = []
    for b in plan.buffers:
        buffers.append({
            "id": b.id, "class": CLASS_NAMES[b.cls], "offset": b.offset, "bytes": b.size,
            "per_sample": b.cls == BATCH, "lifetime": [b.start, b.end],
            "tensors": [plan.tensors[i].name for i in b.tensors],
        })
    tensors = []
    for t in plan.tensors:
        rec = {"name": t.name, "kind": t.kind, "class": CLASS_NAMES[t.cls], "bytes": t.size,
               "per_sample": t.cls == BATCH, "lifetime": [t.producer, t.last_use], "fused": t.fused,
               "buffer": None if t.fused else t.buffer, "offset": None if t.fused else t.offset}
        if t.alias:
            rec["alias"] = [t.alias, plan.tensors[t.alias_of].name]
        tensors.append(rec)
    steps = [{"step": st.index, "layers": st.layers, "action": st.action,
              **({"group": st.group} if st.group else {}),
              **({"updates": [plan.tensors[i].name for i in st.updates]} if st.updates else {}),
              **({"fused": [plan.tensors[i].name for i in st.fused]} if st.fused else {})} for st in plan.steps]
    fused = [t for t in plan.tensors if t.fused]
    arenas = plan.summary()["arenas"]
    for a in plan.arenas:
        if CLASS_NAMES[a.cls] in arenas:
            arenas[CLASS_NAMES[a.cls]]["seconds"] = round(a.seconds, 4)
    extra = {}
    if plan.mode == "training":
        # the training step: which steps update parameters/state in place, and recomputation
        extra["updates"] = [{"step": st.index, "layer": st.layer,
                             "writes": [plan.tensors[i].name for i in st.updates]} for st in plan.steps if st.updates]
    if plan.recompute:
        extra["recompute"] = dict(plan.recompute)
    return {"arena_bytes": arena, "lower_bound_bytes": lower, "no_reuse_bytes": naive, "mode": plan.mode, **extra,
            "ratio": round(arena / lower, 4) if lower else 1.0, "batch": plan.batch,
            "alignment": plan.alignment, "schedule": plan.schedule,
            "proven_optimal": all(a.proven_optimal for a in plan.arenas),
            "plan_seconds": round(plan.seconds, 4),
            # fusion: one step per fusion group; its intermediates (fused: true) take no bytes
            "fusion": plan.fusion, "fused_tensors": len(fused),
            "fused_bytes": sum(t.size * _scale(plan, t.cls) for t in fused),
            "arenas": arenas, "buffers": buffers, "steps": steps, "tensors": tensors}


CLASS_COLORS = {"constant": "#4e79a7", "batch": "#f28e2b", "time": "#59a14f"}


def plot_plan(plan: MemoryPlan, path: str, labels: int = 8) -> None:
    """Draw the plan as the device sees it at the compiled batch and write it to `path` (PNG, SVG or
    PDF by the extension): x the schedule step, y the offset in MiB; the constant region at the
    bottom, then the batch region (a batch buffer of s bytes per sample at per-sample offset o takes
    [o*N, (o+s)*N) there, N the batch: the launcher's addressing), then the time region. One colour
    per buffer class, the `labels` largest buffers named, the lower bound drawn as a line, and a
    title with the network, batch, arena, bound and ratio (plan_json's figures, to the byte).

    matplotlib is an optional dependency (the `plot` extra): without it this raises ImportError."""
    from matplotlib.collections import PatchCollection   # lazy: an optional, heavy dependency
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch, Rectangle

    doc = plan_json(plan)
    mib = float(2 ** 20)
    base, at = {}, 0
    for a in sorted(plan.arenas, key=lambda a: a.cls):
        base[a.cls] = at
        at += a.size * _scale(plan, a.cls)
    steps = max([b.end for b in plan.buffers] + [plan.end, 1]) + 1
    fig = Figure(figsize=(11, 6.5), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    boxes = {name: [] for name in CLASS_NAMES}
    placed = []
    for b in plan.buffers:
        k = _scale(plan, b.cls)
        y0, h = (base[b.cls] + b.offset * k) / mib, b.size * k / mib
        boxes[CLASS_NAMES[b.cls]].append(Rectangle((b.start, y0), b.end + 1 - b.start, h))
        placed.append((b.size * k, b, y0, h))
    for name, rects in boxes.items():
        if rects:
            ax.add_collection(PatchCollection(rects, facecolor=CLASS_COLORS[name], alpha=0.8,
                                              edgecolor="#333333" if name != "constant" else "#c6d4e6",
                                              linewidth=0.3 if name != "constant" else 0.15))
    for size, b, y0, h in sorted(placed, key=lambda p: -p[0])[:labels]:
        if not size:
            continue
        names = [plan.tensors[t].name for t in b.tensors]
        text = names[0] + (f" +{len(names) - 1}" if len(names) > 1 else "")
        ax.annotate(f"{text} ({_human(size)})", ((b.start + b.end + 1) / 2, y0 + h / 2), fontsize=7,
                    ha="center", va="center", color="black",
                    bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.7))
    bound = doc["lower_bound_bytes"] / mib
    ax.axhline(bound, color="#e15759", linestyle="--", linewidth=1.2)
    for cls, y in base.items():
        if cls and y:
            ax.axhline(y / mib, color="#888888", linewidth=0.6, linestyle=":")
    ax.set_xlim(0, steps)
    ax.set_ylim(0, max(doc["arena_bytes"], doc["lower_bound_bytes"], 1) / mib * 1.04)
    ax.set_xlabel("schedule step")
    ax.set_ylabel("offset in the arena (MiB)")
    handles = [Patch(facecolor=CLASS_COLORS[n], edgecolor="#333333", label=f"{n} buffers")
               for n in CLASS_NAMES if boxes[n]]
    handles.append(ax.lines[0])
    ax.lines[0].set_label(f"lower bound ({_human(doc['lower_bound_bytes'])})")
    ax.legend(handles=handles, loc="upper right", fontsize=8)
    ax.set_title(f"memory plan of {plan.network}: batch {plan.batch}, arena {_human(doc['arena_bytes'])} "
                 f"({doc['arena_bytes']:,} bytes), lower bound {_human(doc['lower_bound_bytes'])}, "
                 f"ratio {doc['ratio']:.3f}", fontsize=10)
    fig.savefig(path)


def _human(n: int) -> str:
    for unit, k in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= k:
            return f"{n / k:.1f} {unit}"
    return f"{n} B"
