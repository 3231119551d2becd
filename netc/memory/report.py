"""Reports of a memory plan: JSON for `netc explain --format json --memory`, and a picture of
offset against schedule step (one rectangle per buffer) as SVG, drawn directly (no plotting
dependency)."""
from __future__ import annotations

from .plan import BATCH, CLASS_NAMES, MemoryPlan


def _scale(plan: MemoryPlan, cls: int) -> int:
    return plan.batch if cls == BATCH else 1


def plan_json(plan: MemoryPlan) -> dict:
    """Totals at the compiled batch (batch-class arenas are planned per sample and scaled)."""
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
              **({"fused": [plan.tensors[i].name for i in st.fused]} if st.fused else {})} for st in plan.steps]
    fused = [t for t in plan.tensors if t.fused]
    return {"arena_bytes": arena, "lower_bound_bytes": lower, "no_reuse_bytes": naive,
            "ratio": round(arena / lower, 4) if lower else 1.0, "batch": plan.batch,
            "alignment": plan.alignment, "schedule": plan.schedule,
            # fusion: one step per fusion group; its intermediates (fused: true) take no bytes
            "fusion": plan.fusion, "fused_tensors": len(fused),
            "fused_bytes": sum(t.size * _scale(plan, t.cls) for t in fused),
            "arenas": plan.summary()["arenas"], "buffers": buffers, "steps": steps, "tensors": tensors}


def plan_svg(plan: MemoryPlan, cls: int = BATCH, width: int = 900, height: int = 520) -> str:
    """Offset (y) against schedule step (x), one rectangle per buffer of one class."""
    bufs = [b for b in plan.buffers if b.cls == cls]
    arena = max([b.offset + b.size for b in bufs] + [1])
    steps = max([b.end for b in bufs] + [plan.end, 1])
    ml, mr, mt, mb = 70, 20, 40, 40
    W, H = width - ml - mr, height - mt - mb
    x = lambda s: ml + W * s / (steps + 1)  # noqa: E731
    y = lambda o: mt + H * (1 - o / arena)  # noqa: E731
    colors = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
              "#9c755f", "#bab0ac"]
    per = " per sample" if cls == BATCH else ""
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           f'font-size="11">',
           f'<text x="{ml}" y="20" font-size="13">{_esc(plan.network)}: {CLASS_NAMES[cls]} arena {arena} bytes{per}, '
           f'lower bound {plan.arenas[cls].lower_bound}</text>',
           f'<rect x="{ml}" y="{mt}" width="{W}" height="{H}" fill="none" stroke="#888"/>']
    for i, b in enumerate(bufs):
        x0, x1 = x(b.start), x(b.end + 1)
        y0, y1 = y(b.offset + b.size), y(b.offset)
        names = ", ".join(plan.tensors[t].name for t in b.tensors)
        out.append(f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{max(x1 - x0, 1):.1f}" height="{max(y1 - y0, 0.5):.1f}" '
                   f'fill="{colors[i % len(colors)]}" fill-opacity="0.75" stroke="#333" stroke-width="0.5">'
                   f'<title>{_esc(names)}: offset {b.offset}, {b.size} bytes, steps {b.start}-{b.end}</title></rect>')
    out.append(f'<text x="{ml + W / 2}" y="{height - 10}" text-anchor="middle">schedule step</text>')
    out.append(f'<text x="15" y="{mt + H / 2}" transform="rotate(-90 15 {mt + H / 2})" text-anchor="middle">'
               f'offset (bytes{per})</text>')
    out.append(f'<text x="{ml - 5}" y="{mt + 4}" text-anchor="end">{arena}</text>')
    out.append(f'<text x="{ml - 5}" y="{mt + H}" text-anchor="end">0</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def plan_png(plan: MemoryPlan, cls: int = BATCH, width: int = 900, height: int = 520) -> bytes:
    """The same picture as plan_svg as a PNG (rectangles only, no text), rasterized here so no
    plotting library is needed: offset up, schedule step to the right, one box per buffer."""
    import struct
    import zlib
    bufs = [b for b in plan.buffers if b.cls == cls]
    arena = max([b.offset + b.size for b in bufs] + [1])
    steps = max([b.end for b in bufs] + [plan.end, 1])
    m = 10
    W, H = width - 2 * m, height - 2 * m
    px = bytearray(b"\xff" * (width * height * 3))
    colors = [(0x4e, 0x79, 0xa7), (0xf2, 0x8e, 0x2b), (0xe1, 0x57, 0x59), (0x76, 0xb7, 0xb2),
              (0x59, 0xa1, 0x4f), (0xed, 0xc9, 0x48), (0xb0, 0x7a, 0xa1), (0xff, 0x9d, 0xa7)]

    def box(x0, y0, x1, y1, rgb, fill=True):
        x0, x1 = max(0, min(x0, x1)), min(width - 1, max(x0, x1))
        y0, y1 = max(0, min(y0, y1)), min(height - 1, max(y0, y1))
        for y in range(y0, y1 + 1):
            row = y * width * 3
            if fill or y in (y0, y1):
                px[row + 3 * x0: row + 3 * (x1 + 1)] = bytes(rgb) * (x1 - x0 + 1)
            else:
                px[row + 3 * x0: row + 3 * x0 + 3] = bytes(rgb)
                px[row + 3 * x1: row + 3 * x1 + 3] = bytes(rgb)

    box(m, m, m + W, m + H, (0x88, 0x88, 0x88), fill=False)
    for i, b in enumerate(bufs):
        x0 = m + int(W * b.start / (steps + 1))
        x1 = m + max(int(W * (b.end + 1) / (steps + 1)) - 1, x0)
        y1 = m + H - int(H * b.offset / arena)
        y0 = m + H - int(H * (b.offset + b.size) / arena)
        box(x0, y0, x1, max(y1 - 1, y0), colors[i % len(colors)])
        box(x0, y0, x1, max(y1 - 1, y0), (0x33, 0x33, 0x33), fill=False)
    raw = b"".join(b"\x00" + bytes(px[y * width * 3:(y + 1) * width * 3]) for y in range(height))

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xffffffff)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))
