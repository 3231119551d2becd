"""`netc explain`: per-layer report (shapes, parameters, FLOPs, activation bytes) from the final IR.

Everything here is read off the IR and the op registry; nothing is re-derived from the source.
Costs follow Paleo's model (shared/spec/paleo-format.md §7-§9): a multiply-add is 2 FLOPs, the
activation total counts every layer's output once (inputs included), and the data gradient of
a layer fed directly by a network input is 0 (nothing upstream needs it).
"""
from __future__ import annotations

import json
import sys

from .diagnostics import NetcError
from .ir.core import DTYPES, Module, STRUCTURAL_OPS
from .ops import layer_cost, lookup, prod
from .ops.comm import COMM_OPS


def phase(op) -> str:
    """Where an op of a (training) program belongs: "forward", "backward" (the backward pass's
    gradient ops) or "update" (the optimizer's)."""
    if "grad_of" in op.attrs:
        return "backward"
    d = lookup(op.name)
    if d is not None and (d.side_effects or (d.training_only and d.unbatched and not op.operands[:1] == [])
                          and op.name == "netc.global_norm"):
        return "update"
    return "forward"


_NO_RESULT = None


def layer_rows(module: Module, network=None) -> list[dict]:
    net = network or module.networks()[0]
    params = {p.attrs["sym_name"]: p for p in module.params()}
    rows = []
    for op in net.regions[0].ops:
        if op.name in STRUCTURAL_OPS:
            continue
        opdef = lookup(op.name)
        out = op.results[0].type if op.results else _NO_RESULT
        c, nbytes = layer_cost(op)
        nparams = 0
        for ref in ((op.attrs.get("params") or {}).values() if phase(op) == "forward" else ()):
            p = params.get(ref.name)
            if p is not None and "type" in p.attrs:
                nparams += p.attrs["type"].numel
        rows.append({
            "name": op.attrs.get("name"),
            "op": opdef.name,
            "type": op.attrs.get("type") if op.name == "netc.opaque" else opdef.type_name,
            "phase": phase(op),
            "parents": [v.owner.attrs.get("name") for v in op.operands],
            "shape": list(out.shape) if out is not None else None,
            "dtype": out.dtype if out is not None else None,
            "params": nparams,
            "param_names": [r.name for r in (op.attrs.get("params") or {}).values()],
            "flops_fwd": c.flops_fwd,
            "flops_bwd_data": c.flops_bwd_data,
            "flops_bwd_filter": c.flops_bwd_filter,
            "activation_bytes": out.nbytes if out is not None else 0,
            "bytes": nbytes,
        })
    return rows


def totals(module: Module, rows: list[dict], network=None) -> dict:
    """Sums over a network's rows. Forward FLOPs and the backward columns (the cost model's) count
    the forward ops; a training program's gradient and update ops are summed apart
    (flops_gradients: their FLOPs, which equal the backward columns of the layers they
    differentiate, except a data gradient the program does not need)."""
    net = network or module.networks()[0]
    owned = _storage(module, [net])
    fwd = [r for r in rows if r["phase"] == "forward"]
    t = {
        "layers": len(fwd),
        "params": sum(p.attrs["type"].numel for p in owned if not p.attrs.get("state")),
        "param_bytes": sum(p.attrs["type"].nbytes for p in owned if not p.attrs.get("state")),
        "activation_bytes": sum(r["activation_bytes"] for r in fwd),
        "flops_fwd": sum(r["flops_fwd"] for r in fwd),
        "flops_bwd_data": sum(r["flops_bwd_data"] for r in fwd),
        "flops_bwd_filter": sum(r["flops_bwd_filter"] for r in fwd),
        "bytes": sum(r["bytes"] for r in fwd),
    }
    if len(fwd) < len(rows):
        grads = [r for r in rows if r["phase"] == "backward"]
        upd = [r for r in rows if r["phase"] == "update"]
        state = [p for p in owned if p.attrs.get("state")]
        t.update(gradient_ops=len(grads), update_ops=len(upd),
                 flops_gradients=sum(r["flops_fwd"] for r in grads), flops_update=sum(r["flops_fwd"] for r in upd),
                 gradient_bytes=sum(r["activation_bytes"] for r in grads),
                 state_params=sum(p.attrs["type"].numel for p in state),
                 state_bytes=sum(p.attrs["type"].nbytes for p in state))
    return t


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


def layer_costs(module: Module, network=None) -> list:
    """What Paleo's timing model needs of every layer (costmodel.LayerCost), in layer_rows' order:
    parents with the elements read from each, the op's timing terms, element size, and the
    parameters whose storage the layer owns (a parameter shared by several layers counts once)."""
    from .costmodel import LayerCost
    net = network or module.networks()[0]
    params = {p.attrs["sym_name"]: p for p in module.params()}
    counted: set = set()
    costs = []
    for op in net.regions[0].ops:
        if op.name in STRUCTURAL_OPS or phase(op) != "forward":
            continue
        opdef = lookup(op.name)
        out = op.results[0].type
        ins = [v.type.shape for v in op.operands]
        needs_grad = not any(v.owner.name == "netc.input" for v in op.operands)
        n = nbytes = 0
        for ref in (op.attrs.get("params") or {}).values():
            p = params.get(ref.name)
            if p is not None and "share_from" in p.attrs:
                p = params.get(p.attrs["share_from"].name, p)
            if p is None or "type" not in p.attrs or p.attrs["sym_name"] in counted:
                continue
            counted.add(p.attrs["sym_name"])
            n, nbytes = n + p.attrs["type"].numel, nbytes + p.attrs["type"].nbytes
        costs.append(LayerCost(op.attrs.get("name"), [(v.owner.attrs.get("name"), prod(v.type.shape))
                                                      for v in op.operands],
                               opdef.paleo_timing(opdef.attrs_of(op), ins, out.shape, needs_grad),
                               DTYPES.get(out.dtype, 4), n, nbytes))
    return costs


def paleo_nesting(costs: list):
    """Paleo's nested walk of the network (chains and parallel towers, §5.3) from its first input,
    or None where the walk cannot be replayed or Paleo itself would fail on it."""
    from types import SimpleNamespace
    from .frontend.paleo import paleo_walk
    names = {c.name for c in costs}
    graph = [SimpleNamespace(name=c.name, parents=[p for p, _ in c.parents if p in names]) for c in costs]
    starts = [g.name for g in graph if not g.parents]
    if not starts:
        return None
    w = paleo_walk(graph, starts[0])
    return None if w is None or w.failure else w


def annotate_times(rows: list, costs: list, timing) -> dict:
    """Paleo's times (§10) into explain rows: forward, backward-data and backward-filter ms
    (time_bwd_ms their sum) and the cross-device fetch (time_fetch_ms, which Paleo adds to the
    forward and to the backward pass). Returns the totals, with the weight update and, where the
    walk has parallel towers, Paleo's lower/upper bounds over them."""
    from .costmodel import layer_times, tower_bounds, weight_update_ms
    dev = timing.device
    times = layer_times(costs, dev, timing.ppp_comp, timing.ppp_comm)
    if timing.calibration:
        times = calibrated(rows, times, timing.calibration["factors"])
    for r, t in zip(rows, times):
        r.update(time_fwd_ms=t.fwd, time_bwd_data_ms=t.bwd_data, time_bwd_filter_ms=t.bwd_filter,
                 time_bwd_ms=t.bwd, time_fetch_ms=t.fetch)
    tot = {"device": dev.name, "ppp_comp": timing.ppp_comp, "ppp_comm": timing.ppp_comm,
           "time_fwd_ms": sum(t.fwd for t in times), "time_bwd_data_ms": sum(t.bwd_data for t in times),
           "time_bwd_filter_ms": sum(t.bwd_filter for t in times), "time_bwd_ms": sum(t.bwd for t in times),
           "time_fetch_ms": sum(t.fetch for t in times),
           "time_update_ms": weight_update_ms(dev, sum(c.params for c in costs), sum(c.param_bytes for c in costs))}
    walk = paleo_nesting(costs)
    if walk is not None and any(isinstance(b, tuple) for b in walk.nested):
        fwd = tower_bounds(walk.nested, {t.name: t.fwd + t.fetch for t in times})
        bwd = tower_bounds(walk.nested, {t.name: t.bwd + t.fetch for t in times})
        tot["parallel_towers"] = {"fwd_lower_ms": fwd[0], "fwd_upper_ms": fwd[1],
                                  "bwd_lower_ms": bwd[0], "bwd_upper_ms": bwd[1]}
    return tot


def calibrated(rows: list, times: list, factors: dict) -> list:
    """`explain --profile`: the measured efficiency of each row's op type (costmodel.calibrate) on
    its times; every row records the factor it got (`efficiency`, 1.0 for an uncalibrated type)."""
    from .costmodel import calibrate
    for r in rows:
        r["efficiency"] = factors.get(r["op"], 1.0)
    return calibrate(times, [r["op"] for r in rows], factors)


def calibration_summary(module: Module, timing) -> dict | None:
    """The calibration explain applied: the profile's file, device and factors, and which op types
    of the network's layers had a factor (calibrated) or kept 1.0 (uncalibrated)."""
    cal = timing.calibration if timing is not None else None
    if not cal:
        return None
    types = sorted({lookup(op.name).name for net in module.networks() for op in net.regions[0].ops
                    if op.name not in STRUCTURAL_OPS and op.name != "netc.input"})
    return dict(cal, calibrated=[t for t in types if t in cal["factors"]],
                uncalibrated=[t for t in types if t not in cal["factors"]])


def simulate(module: Module, timing, *, workers=None, scaling: str = "weak", network=None, hybrid=None,
             at_batch=None) -> dict:
    """Paleo's simulations of the (single) network: the data-parallel scaling table over `workers`
    and/or the hybrid split over `hybrid` workers, on `network` (costmodel.Network). at_batch(b)
    returns the module re-inferred at batch b per worker (strong scaling needs it)."""
    from .costmodel import hybrid_table, layer_times, scaling_table
    from .diagnostics import NetcError
    from .ir.query import one_network
    net = one_network(module, "Paleo's simulations take a file with")
    costs = layer_costs(module, net)
    inputs = [op for op in net.regions[0].ops if op.name == "netc.input"]
    batch = inputs[0].results[0].type.shape[0] if inputs and inputs[0].results[0].type.shape else 1
    dev = timing.device
    doc = {"network": net.attrs["sym_name"], "device": dev.name, "batch": batch, "ppp_comp": timing.ppp_comp,
           "ppp_comm": timing.ppp_comm, "interconnect": network.name, "gbits": network.gbits}

    def times_at(b):
        cs = costs if b == batch else layer_costs(at_batch(b), None)
        return layer_times(cs, dev, timing.ppp_comp, timing.ppp_comm), sum(c.params for c in cs)

    if workers:
        doc["scaling"] = {"mode": scaling, "rows": scaling_table(times_at, batch, workers, scaling, dev, network,
                                                                 timing.ppp_comm)}
    if hybrid:
        walk = paleo_nesting(costs)
        order = walk.order if walk else [c.name for c in costs]
        nested = walk.nested if walk else [c.name for c in costs]
        doc["hybrid"] = hybrid_table(costs, order, nested, hybrid, batch, dev, network, timing.ppp_comp,
                                     timing.ppp_comm)
    return doc


def simulation_text(sim: dict) -> str:
    from .costmodel import SCHEMES
    head = (f"on {sim['device']} over {sim['interconnect']} ({sim['gbits']:g} Gbit/s), ppp_comp {sim['ppp_comp']:g}, "
            f"ppp_comm {sim['ppp_comm']:g}; milliseconds per iteration")
    out = []
    if "scaling" in sim:
        sc = sim["scaling"]
        out.append(f"data-parallel {sc['mode']} scaling of {sim['network']} (batch {sim['batch']} "
                   f"{'per worker' if sc['mode'] == 'weak' else 'in all'}) {head}:")
        cols = ("workers", "batch", "per worker", "fwd", "bwd", "apply", "compute") + SCHEMES
        rows = [(str(r["workers"]), str(r["batch"]), str(r["batch_per_worker"]), f"{r['fwd_ms']:.4f}",
                 f"{r['bwd_ms']:.4f}", f"{r['apply_ms']:.4f}", f"{r['comp_ms']:.4f}",
                 *(f"{r['allreduce_ms'][k]:.4f}" for k in SCHEMES)) for r in sc["rows"]]
        w = [max(len(x[i]) for x in [cols] + rows) for i in range(len(cols))]
        out.append("  ".join(c.rjust(w[i]) for i, c in enumerate(cols)))
        out.extend("  ".join(c.rjust(w[i]) for i, c in enumerate(r)) for r in rows)
        out.append(f"(compute = fwd + bwd + apply; the last {len(SCHEMES)} columns: all-reduce of "
                   f"{_bytes(sc['rows'][0]['param_bytes'])} of parameters per scheme)")
    if "hybrid" in sim:
        out.append(f"hybrid parallelism of {sim['network']} (\"one weird trick\", {sim['hybrid'][0]['workers']} "
                   f"workers, batch {sim['hybrid'][0]['batch']} in all) {head}:")
        for r in sim["hybrid"]:
            out.append(f"  {r['part']:14s} {r['layers']:4d} layers  fwd {r['fwd_ms']:.4f}  bwd {r['bwd_ms']:.4f}  "
                       f"apply {r['apply_ms']:.4f}  sync (tree) {r['sync_ms']:.4f}"
                       + (f"  (pipelined fetch {r['fetch_ms']:.4f})" if r.get("fetch_ms") else ""))
    return "\n".join(out) + "\n"


def plot_scaling(sim: dict, path: str) -> None:
    """Time per iteration (compute + all-reduce) against workers, one line per all-reduce scheme
    (and compute alone), to PNG, SVG or PDF by the extension. matplotlib: the `plot` extra."""
    from matplotlib.figure import Figure   # lazy: an optional, heavy dependency
    from .costmodel import SCHEMES
    rows = sim["scaling"]["rows"]
    xs = [r["workers"] for r in rows]
    fig = Figure(figsize=(8, 5), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    for k in SCHEMES:
        ax.plot(xs, [r["comp_ms"] + r["allreduce_ms"][k] for r in rows], marker="o", label=k)
    ax.plot(xs, [r["comp_ms"] for r in rows], linestyle="--", color="#888888", label="compute only")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")          # OneToAll grows linearly with the workers; the others by log2
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.set_xlabel("workers")
    ax.set_ylabel("time per iteration (ms, log scale)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"{sim['network']}: {sim['scaling']['mode']} scaling on {sim['device']} over {sim['interconnect']} "
                 f"({sim['gbits']:g} Gbit/s), batch {sim['batch']}, ppp_comp {sim['ppp_comp']:g}, "
                 f"ppp_comm {sim['ppp_comm']:g}", fontsize=9)
    fig.savefig(path)


def explain_json(module: Module, timing=None) -> dict:
    """timing: a costmodel.Timing (device, ppp) for Paleo's per-layer times, or None."""
    nets = []
    for net in module.networks():
        rows = layer_rows(module, net)
        t = totals(module, rows, net)
        if timing is not None:
            t.update(annotate_times(rows, layer_costs(module, net), timing))
        nets.append({"name": net.attrs["sym_name"], "layers": rows, "totals": t})
    cal = calibration_summary(module, timing)
    if len(nets) == 1:
        return dict(nets[0], calibration=cal) if cal else nets[0]
    owned = _storage(module, module.networks())
    return {"name": module.attrs.get("source"), "networks": nets, **({"calibration": cal} if cal else {}),
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


def explain_table(module: Module, timing=None) -> str:
    out = []
    for net in module.networks():
        rows = layer_rows(module, net)
        t = totals(module, rows, net)
        head = ("layer", "op", "output shape", "params", "fwd FLOPs", "activations")
        body = [(r["name"], r["type"], ("-" if r["shape"] is None else "x".join(map(str, r["shape"])) or "scalar"),
                 _num(r["params"]), _num(r["flops_fwd"]), _bytes(r["activation_bytes"])) for r in rows]
        if timing is not None:
            t.update(annotate_times([r for r in rows if r["phase"] == "forward"], layer_costs(module, net), timing))
            head += ("fwd ms", "bwd-data ms", "bwd-filter ms")
            body = [b + ((f"{r['time_fwd_ms']:.4f}", f"{r['time_bwd_data_ms']:.4f}", f"{r['time_bwd_filter_ms']:.4f}")
                         if "time_fwd_ms" in r else ("-", "-", "-")) for b, r in zip(body, rows)]
            if t["time_fetch_ms"]:
                head += ("fetch ms",)
                body = [b + ((f"{r['time_fetch_ms']:.4f}",) if "time_fwd_ms" in r else ("-",)) for b, r in zip(body, rows)]
            if timing.calibration:
                head += ("efficiency",)
                body = [b + ((f"{r['efficiency']:.4g}",) if "efficiency" in r else ("-",)) for b, r in zip(body, rows)]
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
        if "gradient_ops" in t:
            out.append(f"training step: {t['gradient_ops']} gradient ops, {_num(t['flops_gradients'])} FLOPs "
                       f"(the backward above, less the data gradients nothing needs), {t['update_ops']} update ops, "
                       f"{_num(t['flops_update'])} FLOPs; gradients {_bytes(t['gradient_bytes'])}, optimizer and "
                       f"other state {_num(t['state_params'])} values ({_bytes(t['state_bytes'])})")
        if timing is not None:
            out.append(f"estimated on {t['device']} (Paleo's model, ppp_comp {t['ppp_comp']:g}): forward "
                       f"{t['time_fwd_ms']:.4f} ms, backward {t['time_bwd_ms']:.4f} ms (data "
                       f"{t['time_bwd_data_ms']:.4f}, filter {t['time_bwd_filter_ms']:.4f}), weight update "
                       f"{t['time_update_ms']:.4f} ms (ppp 1)")
            if t["time_fetch_ms"]:
                out.append(f"cross-device fetch (ppp_comm {t['ppp_comm']:g}): {t['time_fetch_ms']:.4f} ms in each "
                           f"pass (Paleo adds it to the forward and to the backward)")
            if "parallel_towers" in t:
                pt = t["parallel_towers"]
                out.append(f"parallel towers (Paleo's model-parallel bounds, fetch included): forward "
                           f"{pt['fwd_lower_ms']:.4f} to {pt['fwd_upper_ms']:.4f} ms, backward {pt['bwd_lower_ms']:.4f} "
                           f"to {pt['bwd_upper_ms']:.4f} ms")
        out.append("")
    cal = calibration_summary(module, timing)
    if cal:
        got = ", ".join(f"{k} {cal['factors'][k]:.4g}" for k in cal["calibrated"]) or "none of this network's"
        where = f", measured on {cal['device_name']}" if cal.get("device_name") else ""
        out.append(f"calibrated with {cal['file']} (predicted for {cal['device']}{where}): times divided by the "
                   f"measured efficiency of their op type: {got}"
                   + (f"; uncalibrated (1.0): {', '.join(cal['uncalibrated'])}" if cal["uncalibrated"] else ""))
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


# ------------------------------------------------------------------------------------------------
# `netc explain FILE --workers K`: the programs of K workers (split-workers) and their communication

def rank_networks(module: Module) -> list:
    return sorted([n for n in module.networks() if "rank" in n.attrs], key=lambda n: n.attrs["rank"])


def _itemsize(op) -> int:
    return DTYPES[op.results[0].type.dtype] if op.results else 4


def comm_groups(module: Module):
    """(point-to-point messages [(src, dst, send op, recv op)], collectives [[member op per rank]]),
    matched as the runtime matches them: the k-th send from i to j with the k-th recv on j from i, the
    k-th collective over a group of ranks on each of its ranks."""
    nets = rank_networks(module)
    sends, recvs, colls = {}, {}, {}
    for net in nets:
        r = net.attrs["rank"]
        for op in net.regions[0].ops:
            if op.name == "netc.send":
                sends.setdefault((r, op.attrs["peer"]), []).append(op)
            elif op.name == "netc.recv":
                recvs.setdefault((op.attrs["peer"], r), []).append(op)
            elif op.name in COMM_OPS:
                colls.setdefault((tuple(op.attrs["ranks"]), r), []).append(op)
    p2p = []
    for (i, j), ss in sorted(sends.items()):
        for s, rv in zip(ss, recvs.get((i, j), [])):
            p2p.append((i, j, s, rv))
    groups = []
    for ranks in sorted({k[0] for k in colls}):
        seqs = [colls.get((ranks, r), []) for r in ranks]
        for members in zip(*seqs):
            groups.append(list(members))
    return p2p, groups


def workers_report(module: Module, timing=None, network=None) -> dict:
    """Per worker: its compute ops, their FLOPs, the bytes of the values it makes (activations, the
    values it receives included), the bytes of the parameters it holds, the bytes it sends (ring
    algorithms); per pair of workers the point-to-point messages, per collective its logical tensor
    and every member's wire bytes; each with its predicted time on `network` (alpha-beta ring model
    and Paleo's bandwidth model), and the totals."""
    from .costmodel import alpha_beta_s, get_network, paleo_comm_ms
    net_model = network or get_network("ethernet")
    ppp = timing.ppp_comm if timing is not None else 1.0
    nets = rank_networks(module)
    params = {p.attrs["sym_name"]: p for p in module.params()}
    ranks = []
    for net in nets:
        ops = [op for op in net.regions[0].ops if op.name not in STRUCTURAL_OPS and op.name != "netc.input"]
        compute = [op for op in ops if op.name not in COMM_OPS]
        used = {ref.name for op in ops for ref in (op.attrs.get("params") or {}).values()
                if hasattr(ref, "name") and ref.name in params and not params[ref.name].attrs.get("state")}
        row = {"rank": net.attrs["rank"], "network": net.attrs["sym_name"], "ops": len(compute),
               "comm_ops": len(ops) - len(compute),
               "flops": sum(layer_cost(op)[0].flops_fwd for op in compute),
               "activation_bytes": sum(r.type.nbytes for op in ops for r in op.results),
               "param_bytes": sum(params[n].attrs["type"].nbytes for n in used),
               "params": sum(params[n].attrs["type"].numel for n in used),
               "sent_bytes": sum(_wire(op) for op in ops if op.name in COMM_OPS)}
        if timing is not None:
            rows = [r for r in layer_rows(module, net) if r["phase"] == "forward"]
            row["time_fwd_ms"] = annotate_times(rows, layer_costs(module, net), timing)["time_fwd_ms"]
        ranks.append(row)
    p2p, groups = comm_groups(module)
    edges: dict = {}
    for i, j, s, _ in p2p:
        m = s.results[0].type.nbytes
        e = edges.setdefault((i, j), {"from": i, "to": j, "messages": 0, "bytes": 0, "alpha_beta_ms": 0.0,
                                      "paleo_ms": 0.0, "names": []})
        e["messages"] += 1
        e["bytes"] += m
        e["alpha_beta_ms"] += alpha_beta_s("send", 2, m, net_model, ppp) * 1e3
        e["paleo_ms"] += paleo_comm_ms("send", 2, m, net_model, ppp)
        e["names"].append(s.attrs.get("name"))
    colls = []
    for members in groups:
        op = members[0]
        d = lookup(op.name)
        a = d.attrs_of(op)
        n = len(members)
        m = d.message_bytes(a, [v.type.shape for v in op.operands], op.results[0].type.shape, _itemsize(op))
        kind = op.name[5:]
        colls.append({"kind": kind, "name": op.attrs.get("name"), "ranks": list(op.attrs["ranks"]), "bytes": m,
                      "wire_bytes": [_wire(x) for x in members],
                      "alpha_beta_ms": alpha_beta_s(kind, n, m, net_model, ppp) * 1e3,
                      "paleo_ms": paleo_comm_ms(kind, n, m, net_model, ppp)})
    ev = list(edges.values())
    total = {"messages": sum(e["messages"] for e in ev), "collectives": len(colls),
             "bytes": sum(e["bytes"] for e in ev) + sum(c["bytes"] for c in colls),
             "wire_bytes": sum(r["sent_bytes"] for r in ranks),
             "alpha_beta_ms": sum(e["alpha_beta_ms"] for e in ev) + sum(c["alpha_beta_ms"] for c in colls),
             "paleo_ms": sum(e["paleo_ms"] for e in ev) + sum(c["paleo_ms"] for c in colls)}
    from .costmodel import LATENCY_S
    return {"workers": len(nets), "network": net_model.name, "gbits": net_model.gbits,
            "latency_us": LATENCY_S.get(net_model.name, 50e-6) * 1e6, "ppp_comm": ppp,
            "ranks": ranks, "edges": ev, "collectives": colls, "total": total}


def _wire(op) -> int:
    d = lookup(op.name)
    return d.comm_bytes(d.attrs_of(op), [v.type.shape for v in op.operands], op.results[0].type.shape, _itemsize(op))


def workers_text(rep: dict) -> str:
    timed = any("time_fwd_ms" in r for r in rep["ranks"])
    head = ("rank", "ops", "FLOPs", "activations", "parameters", "comm ops", "sent (ring)") + (("fwd ms",) if timed else ())
    body = [(str(r["rank"]), str(r["ops"]), _num(r["flops"]), _bytes(r["activation_bytes"]), _bytes(r["param_bytes"]),
             str(r["comm_ops"]), _bytes(r["sent_bytes"])) + ((f"{r['time_fwd_ms']:.4f}",) if timed else ())
            for r in rep["ranks"]]
    out = [f"{rep['workers']} workers, one program per rank (split-workers):"]
    out += _table(head, body)
    out.append(f"communication over {rep['network']} ({rep['gbits']:g} Gbit/s, latency {rep['latency_us']:g} us, "
               f"ppp_comm {rep['ppp_comm']:g}); times: alpha-beta ring model | Paleo's bandwidth model")
    if rep["edges"]:
        body = [(f"{e['from']} -> {e['to']}", str(e["messages"]), _bytes(e["bytes"]), f"{e['alpha_beta_ms']:.4f}",
                 f"{e['paleo_ms']:.4f}") for e in rep["edges"]]
        out += _table(("send/recv", "messages", "bytes", "alpha-beta ms", "Paleo ms"), body)
    if rep["collectives"]:
        body = [(c["kind"], c["name"], ",".join(map(str, c["ranks"])), _bytes(c["bytes"]),
                 _bytes(max(c["wire_bytes"])), f"{c['alpha_beta_ms']:.4f}", f"{c['paleo_ms']:.4f}")
                for c in rep["collectives"]]
        out += _table(("collective", "name (rank 0's)", "ranks", "bytes", "wire/rank", "alpha-beta ms", "Paleo ms"), body)
    t = rep["total"]
    out.append(f"total: {t['messages']} point-to-point messages and {t['collectives']} collectives, "
               f"{_bytes(t['bytes'])} logical ({_num(t['bytes'])} bytes), {_bytes(t['wire_bytes'])} sent by all ranks "
               f"({_num(t['wire_bytes'])} bytes); {t['alpha_beta_ms']:.4f} ms (alpha-beta), {t['paleo_ms']:.4f} ms "
               f"(Paleo), without overlap")
    return "\n".join(out) + "\n"


def _table(head, body) -> list:
    w = [max(len(str(x[i])) for x in [head] + body) for i in range(len(head))]

    def fmt(cells):
        return "  ".join((str(c).rjust(w[i]) if i else str(c).ljust(w[i])) for i, c in enumerate(cells))
    return [fmt(head), "  ".join("-" * x for x in w)] + [fmt(b) for b in body]


def workers_dot(module: Module) -> str:
    """The per-rank programs in Graphviz DOT: one cluster per worker, its ops and data edges inside,
    communication between the clusters: send -> recv (bold, red, with the bytes) and each collective's
    members joined (dashed, blue, with the kind and bytes)."""
    lines = ["digraph netc {", "  rankdir=TB;", '  graph [fontname="Helvetica"];',
             '  node [shape=box, fontname="Helvetica", fontsize=10];']
    nets = rank_networks(module)
    nid = {}
    for net in nets:
        r = net.attrs["rank"]
        lines.append(f'  subgraph "cluster_rank{r}" {{ label="worker {r}"; style=rounded; color="#4e79a7";')
        for op in net.regions[0].ops:
            if op.name in STRUCTURAL_OPS:
                continue
            nid[id(op)] = f"{r}:{op.attrs.get('name')}"
            shape = "x".join(map(str, op.results[0].type.shape or ())) if op.results else ""
            label = f'{op.attrs.get("name")}\\n{lookup(op.name).type_name} {shape or "scalar" if op.results else ""}'
            style = ', style=filled, fillcolor="#fde9e7"' if op.name in COMM_OPS else \
                ', style=filled, fillcolor="#e8f0fe"' if op.name == "netc.input" else ""
            lines.append(f'    "{_esc(nid[id(op)])}" [label="{_esc(label)}"{style}];')
        for op in net.regions[0].ops:
            if id(op) in nid:
                for v in op.operands:
                    lines.append(f'    "{_esc(nid[id(v.owner)])}" -> "{_esc(nid[id(op)])}";')
        lines.append("  }")
    p2p, groups = comm_groups(module)
    for i, j, s, rv in p2p:
        lines.append(f'  "{_esc(nid[id(s)])}" -> "{_esc(nid[id(rv)])}" [color="#e15759", penwidth=2, '
                     f'label="{_bytes(s.results[0].type.nbytes)}", fontsize=9];')
    for members in groups:
        kind = members[0].name[5:]
        for a, b in zip(members, members[1:]):
            lines.append(f'  "{_esc(nid[id(a)])}" -> "{_esc(nid[id(b)])}" [dir=none, style=dashed, color="#4e79a7", '
                         f'label="{kind} {_bytes(members[0].results[0].type.nbytes)}", fontsize=9];')
    lines.append("}")
    return "\n".join(lines) + "\n"


# -- `netc explain`'s command: flags -> timing, the report, plan files ------------------------------

def timing_of(args):
    """costmodel.Timing from --device/--ppp-comp/--ppp-comm, or None; the simulation flags checked."""
    import math
    from .costmodel import Timing, get_device, get_network
    for flag, v in (("--ppp-comp", args.ppp_comp), ("--ppp-comm", args.ppp_comm)):
        if v is not None and not (v > 0 and math.isfinite(v)):
            raise NetcError(f"{flag} must be a positive number (Paleo's fraction of peak, e.g. 0.49), got {v}")
    needs = [f for f, v in (("--ppp-comp", args.ppp_comp), ("--ppp-comm", args.ppp_comm), ("--workers", args.workers),
                            ("--hybrid", args.hybrid), ("--network", args.network)) if v is not None]
    if needs and not args.device:
        raise NetcError(f"{', '.join(needs)} need{'s' if len(needs) == 1 else ''} --device (Paleo's model times the "
                        f"layers on a device: --device titanx, h100, ...)")
    if args.hybrid is not None and args.hybrid < 1:
        raise NetcError(f"--hybrid takes the number of workers (at least 1), got {args.hybrid}")
    if args.workers is not None:
        try:
            args.worker_counts = [int(w) for w in args.workers.split(",")]
        except ValueError:
            args.worker_counts = None
        if not args.worker_counts or min(args.worker_counts) < 1:
            raise NetcError(f"--workers takes positive worker counts separated by commas (e.g. 1,2,4,8), got "
                            f"'{args.workers}'")
    if args.network is not None:
        get_network(args.network)
    if not args.device:
        return None
    return Timing(get_device(args.device), args.ppp_comp or 1.0, args.ppp_comm or 1.0)



def calibrated_timing(timing, args, diag):
    """explain --profile PROF.json: the timing with the profile's efficiency per op type."""
    if not args.profile:
        return timing
    if timing is None:
        raise NetcError("--profile calibrates the cost model's times, which need --device (e.g. --device h100, the "
                        "device the profile was measured on)")
    if args.workers or args.hybrid:
        raise NetcError("--profile calibrates the per-layer table; Paleo's simulations (--workers, --hybrid) are not "
                        "calibrated: drop one of them")
    import dataclasses

    from .diagnostics import Loc
    from .profile import read_profile
    cal = read_profile(args.profile)
    if cal["device"].lower() != args.device.lower():
        diag.warning(f"the profile was predicted with the cost model's device '{cal['device']}', but --device is "
                     f"'{args.device}': its efficiency factors may not carry over", Loc(args.profile))
    return dataclasses.replace(timing, calibration=cal)



def verify_plans(module, plans) -> None:
    """explain --verify: every network's plan verified at every batch 1..its compiled one."""
    from .memory.verify import verify_plan
    for net in module.networks():
        plan = plans[net.attrs["sym_name"]]
        problems = verify_plan(plan, module, net, batches=range(1, plan.batch + 1))
        if problems:
            raise AssertionError("the memory plan failed verification: " + "; ".join(problems[:5]))
        sys.stderr.write(f"memory plan of '{plan.network}' verified for every batch 1..{plan.batch}: no two "
                         f"live buffers overlap, offsets aligned, every read written before\n")


def write_dot(module, path: str, workers: bool = False) -> None:
    """explain --dot: the graph (workers as clusters) in Graphviz DOT to `path` ('-': stdout), and an SVG
    beside it when Graphviz's `dot` is installed."""
    import os
    import shutil
    import subprocess
    dot = workers_dot(module) if workers else to_dot(module)
    if path == "-":
        sys.stdout.write(dot)
        return
    with open(path, "w") as f:
        f.write(dot)
    if shutil.which("dot"):
        svg = os.path.splitext(path)[0] + ".svg"
        r = subprocess.run(["dot", "-Tsvg", path, "-o", svg], capture_output=True, text=True)
        if r.returncode != 0:
            raise NetcError(f"Graphviz `dot` could not draw '{path}': {r.stderr.strip()[:500]}")
        print(f"wrote {path} and {svg}")
    else:
        print(f"wrote {path} (install Graphviz, e.g. the apt package `graphviz`, to also get an SVG)")


def write_report(args, module, timing, plans, at_batch):
    """explain's report (text or JSON, --memory, the simulations, --workers K's per-worker report) on
    stdout; with --nchw 4-D shapes in NCHW order. at_batch(b): the module at batch b (strong scaling)."""
    global layer_rows
    if not args.nchw:
        return _write_report(args, module, timing, plans, at_batch)
    from .frontend.singa.to_ir import nchw
    rows_nhwc = layer_rows

    def rows_nchw(module, network=None):
        rows = rows_nhwc(module, network)
        for r in rows:
            r["shape"] = nchw(r["shape"])
        return rows
    layer_rows = rows_nchw
    try:
        return _write_report(args, module, timing, plans, at_batch)
    finally:
        layer_rows = rows_nhwc


def _write_report(args, module, timing, plans, at_batch):
    from .runtime.run import plot_to
    sim = None
    if timing is not None and (args.workers or args.hybrid):
        from .costmodel import get_network
        sim = simulate(module, timing, workers=getattr(args, "worker_counts", None), scaling=args.scaling,
                       network=get_network(args.network or "ethernet"), hybrid=args.hybrid,
                       at_batch=at_batch)
    report = None
    if args.partition_workers:   # explain --workers K: the per-worker report (workers_report)
        from .costmodel import get_network
        report = workers_report(module, timing, get_network(args.comm_network or "ethernet"))
    if args.format == "json":
        doc = explain_json(module, timing)
        if args.memory:
            from .memory.report import plan_json
            for net in doc.get("networks", [doc]):
                net["memory"] = plan_json(plans[net["name"]])
        if sim is not None:
            doc["simulation"] = sim
        if report is not None:
            doc["workers"] = report
        sys.stdout.write(dumps(doc) + "\n")
    else:
        sys.stdout.write(explain_table(module, timing))
        if args.memory:
            for plan in plans.values():
                sys.stdout.write(plan.table())
        if sim is not None:
            sys.stdout.write(simulation_text(sim))
        if report is not None:
            sys.stdout.write(workers_text(report))
    if args.plot and args.workers:
        plot_to(args.plot, lambda path: plot_scaling(sim, path))
    return 0



def write_plan_files(args, plans):
    import json

    from .export.layout import LayoutError, write_layout
    from .memory.report import plot_plan
    from .runtime.run import plot_to
    if len(plans) != 1 and (args.layout or args.plot):
        raise NetcError("--layout and --plot need a file with exactly one network")
    plan = next(iter(plans.values()))
    if args.layout:
        try:
            doc = write_layout(plan)
        except LayoutError as e:
            raise NetcError(f"cannot write the plan as a layout: {e}")
        with open(args.layout, "w") as f:
            json.dump(doc, f, indent=1)
        sys.stderr.write(f"wrote {args.layout}\n")
    if args.plot:
        plot_to(args.plot, lambda path: plot_plan(plan, path))
