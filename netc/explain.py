"""`netc explain`: per-layer report (shapes, parameters, FLOPs, activation bytes) from the final IR.

Everything here is read off the IR and the op registry; nothing is re-derived from the source.
Costs follow Paleo's model (shared/spec/paleo-format.md §7-§9): a multiply-add is 2 FLOPs, the
activation total counts every layer's output once (inputs included), and the data gradient of
a layer fed directly by a network input is 0 (nothing upstream needs it).
"""
from __future__ import annotations

import json

from .ir.core import DTYPES, Module, STRUCTURAL_OPS
from .ops import lookup, prod


def layer_rows(module: Module, network=None) -> list[dict]:
    net = network or module.networks()[0]
    params = {p.attrs["sym_name"]: p for p in module.params()}
    rows = []
    for op in net.regions[0].ops:
        if op.name in STRUCTURAL_OPS:
            continue
        opdef = lookup(op.name)
        out = op.results[0].type
        ins = [v.type.shape for v in op.operands]
        a = opdef.attrs_of(op)
        needs_grad = not any(v.owner.name == "netc.input" for v in op.operands)
        c = opdef.cost(a, ins, out.shape, needs_grad)
        nparams = 0
        for ref in (op.attrs.get("params") or {}).values():
            p = params.get(ref.name)
            if p is not None and "type" in p.attrs:
                nparams += p.attrs["type"].numel
        rows.append({
            "name": op.attrs.get("name"),
            "op": opdef.name,
            "type": op.attrs.get("type") if op.name == "netc.opaque" else opdef.type_name,
            "parents": [v.owner.attrs.get("name") for v in op.operands],
            "shape": list(out.shape),
            "dtype": out.dtype,
            "params": nparams,
            "param_names": [r.name for r in (op.attrs.get("params") or {}).values()],
            "flops_fwd": c.flops_fwd,
            "flops_bwd_data": c.flops_bwd_data,
            "flops_bwd_filter": c.flops_bwd_filter,
            "activation_bytes": out.nbytes,
            "bytes": opdef.bytes_moved(a, ins, out.shape, DTYPES[out.dtype]),
        })
    return rows


def totals(module: Module, rows: list[dict], network=None) -> dict:
    net = network or module.networks()[0]
    owned = _storage(module, [net])
    return {
        "layers": len(rows),
        "params": sum(p.attrs["type"].numel for p in owned),
        "param_bytes": sum(p.attrs["type"].nbytes for p in owned),
        "activation_bytes": sum(r["activation_bytes"] for r in rows),
        "flops_fwd": sum(r["flops_fwd"] for r in rows),
        "flops_bwd_data": sum(r["flops_bwd_data"] for r in rows),
        "flops_bwd_filter": sum(r["flops_bwd_filter"] for r in rows),
        "bytes": sum(r["bytes"] for r in rows),
    }


def _storage(module: Module, nets) -> list:
    """The parameters that hold storage for `nets`: a name shared by several layers or networks
    counts once, and a share_from alias counts as its owner (it holds no storage of its own)."""
    by_name = {p.attrs["sym_name"]: p for p in module.params()}
    owners = {}
    for net in nets:
        for op in net.regions[0].ops:
            for ref in (op.attrs.get("params") or {}).values():
                p = by_name.get(ref.name)
                if p is None:
                    continue
                if "share_from" in p.attrs:
                    p = by_name.get(p.attrs["share_from"].name, p)
                if "type" in p.attrs:
                    owners[p.attrs["sym_name"]] = p
    return list(owners.values())


def explain_json(module: Module, device=None) -> dict:
    nets = []
    for net in module.networks():
        rows = layer_rows(module, net)
        t = totals(module, rows, net)
        if device is not None:
            from .costmodel import annotate
            t.update(annotate(rows, device))
        nets.append({"name": net.attrs["sym_name"], "layers": rows, "totals": t})
    if len(nets) == 1:
        return nets[0]
    owned = _storage(module, module.networks())
    return {"name": module.attrs.get("source"), "networks": nets,
            "totals": {"networks": len(nets), "params": sum(p.attrs["type"].numel for p in owned),
                       "param_bytes": sum(p.attrs["type"].nbytes for p in owned)},
            "params": [{"name": p.attrs["sym_name"], "shape": list(p.attrs["type"].shape),
                        **({"share_from": p.attrs["share_from"].name} if "share_from" in p.attrs else {})}
                       for p in module.params() if "type" in p.attrs]}


def _num(n) -> str:
    if isinstance(n, float):
        n = round(n)
    return f"{n:,}"


def _bytes(n) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def explain_table(module: Module, device=None) -> str:
    out = []
    for net in module.networks():
        rows = layer_rows(module, net)
        t = totals(module, rows, net)
        head = ("layer", "op", "output shape", "params", "fwd FLOPs", "activations")
        body = [(r["name"], r["type"], "x".join(map(str, r["shape"])) or "scalar", _num(r["params"]),
                 _num(r["flops_fwd"]), _bytes(r["activation_bytes"])) for r in rows]
        if device is not None:
            from .costmodel import annotate
            t.update(annotate(rows, device))
            head += ("fwd ms", "bwd ms")
            body = [b + (f"{r['time_fwd_ms']:.4f}", f"{r['time_bwd_ms']:.4f}") for b, r in zip(body, rows)]
        w = [max(len(str(x[i])) for x in [head] + body) for i in range(len(head))]
        w[0] = min(w[0], 60)
        right = set(range(3, len(head)))

        def fmt(cells):
            return "  ".join((str(c).rjust(w[i]) if i in right else str(c).ljust(w[i])) for i, c in enumerate(cells))

        out.append(f"network {net.attrs['sym_name']}: {t['layers']} layers")
        out.append(fmt(head))
        out.append("  ".join("-" * x for x in w))
        out.extend(fmt(b) for b in body)
        out.append("  ".join("-" * x for x in w))
        out.append(f"total: {_num(t['params'])} parameters ({_bytes(t['param_bytes'])}), "
                   f"activations {_bytes(t['activation_bytes'])}, forward {_num(t['flops_fwd'])} FLOPs, "
                   f"backward {_num(t['flops_bwd_data'] + t['flops_bwd_filter'])} FLOPs "
                   f"(data {_num(t['flops_bwd_data'])}, filter {_num(t['flops_bwd_filter'])})")
        if device is not None:
            out.append(f"estimated on {t['device']} (Paleo's model, 100% of peak): forward {t['time_fwd_ms']:.3f} ms, "
                       f"backward {t['time_bwd_ms']:.3f} ms")
        out.append("")
    return "\n".join(out)


def to_dot(module: Module) -> str:
    """The graph in Graphviz DOT: one box per layer (name, type, output shape), networks as
    clusters when a file has several, and the ops of each fusion group (the fuse pass's
    `fusion_group`, one kernel each) inside a cluster of their own."""
    lines = ["digraph netc {", "  rankdir=TB;", '  graph [fontname="Helvetica"];', '  node [shape=box, fontname="Helvetica", fontsize=10];']
    multi = len(module.networks()) > 1
    for net in module.networks():
        nid, groups = {}, {}
        sym = net.attrs["sym_name"]
        if multi:
            lines.append(f'  subgraph "cluster_{_esc(sym)}" {{ label="{_esc(sym)}";')
        for op in net.regions[0].ops:
            if op.name in STRUCTURAL_OPS:
                continue
            nid[id(op)] = f'{sym}:{op.attrs.get("name")}' if multi else op.attrs.get("name")
            groups.setdefault(op.attrs.get("fusion_group") or f"op:{id(op)}", []).append(op)
        for g, ops in groups.items():
            fused = len(ops) > 1
            if fused:
                kinds = "+".join(lookup(o.name).type_name for o in ops)
                lines.append(f'  subgraph "cluster_{_esc(sym)}_{_esc(g)}" {{ label="fused {_esc(g)}: {_esc(kinds)} '
                             f'(one kernel)"; style="rounded,filled"; fillcolor="#fff4e0"; color="#f28e2b"; '
                             f'fontsize=9;')
            for op in ops:
                shape = "x".join(map(str, op.results[0].type.shape or ())) or "scalar"
                label = f'{op.attrs.get("name")}\\n{lookup(op.name).type_name} {shape}'
                style = ', style=filled, fillcolor="#e8f0fe"' if op.name == "netc.input" else \
                    ', style=filled, fillcolor="white"' if fused else ""
                lines.append(f'  "{_esc(nid[id(op)])}" [label="{_esc(label)}"{style}];')
            if fused:
                lines.append("  }")
        for op in net.regions[0].ops:
            if id(op) not in nid:
                continue
            for v in op.operands:
                lines.append(f'  "{_esc(nid[id(v.owner)])}" -> "{_esc(nid[id(op)])}";')
        if multi:
            lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _esc(s: str) -> str:
    return s.replace('"', '\\"')


def dumps(obj) -> str:
    return json.dumps(obj, indent=1)
