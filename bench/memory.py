#!/usr/bin/env python3
"""Memory-plan benchmark: for every Paleo corpus net (and every SINGA config netc can import,
and the examples), at inference with the batch as written, after the fuse pass, print the
planned arena with fusion-aware planning (one step per fusion group, intermediates in no
memory: what `netc compile` uses) and op by op (fusion="none": every layer its own step), the
lower bound (peak of live bytes) of each, the arena / bound ratio, the bytes without reuse,
Brainstorm-style bytes (one slot per buffer, no reuse, no zero-copy) and the planning time;
whether the plan is proven optimal (every arena meets its bound, or the exact search of
netc/memory/exact.py completed) and what the heuristics alone plan (exact=False), to show what
the exact search gains; write bench/results/memory.json.

    python bench/memory.py [--shared ../shared]

Arena and bound include the constant (parameter) arena and the batch arena at the compiled
batch; `batch_arena_*` are the batch arena alone (where fusion makes its difference). A
benchmark, not a test: nothing here asserts.

Training (`"training"` in the results; --no-training skips it): every network again as a whole
training step -- the backward and optimizer passes (the module's own optimizer, else SGD; a
network without a loss gets a softmax loss on its output as `netc --loss softmax` does) and the
fuse pass -- at the corpus batch (plans are cheap at full size), planned as plan-memory plans it
(mode "training": gradients are constant-class buffers planned by lifetime, dying at their
update), verified. Per network:

* arena / lower bound (the goal: <= 1.05; the worst is printed);
* `no_reuse_bytes`: the same plan's buffers without any lifetime reuse (views, zero-copy
  concatenations, in-place and fused intermediates kept: what reuse alone saves);
* `brainstorm_bytes`: Brainstorm's layout of a training step, which keeps every kind of buffer
  apart and reuses nothing: the network inputs, every forward result (Brainstorm's layer
  `outputs`, and its `internals` -- here the training forms' masks and batch statistics), one
  delta of the same size for every floating forward result (Brainstorm's `output_deltas` /
  `internal_deltas`: allocated for every layer, needed or not), the parameters, one gradient per
  parameter (Brainstorm's `gradients` mirror `parameters`, trainable or not), and the optimizer
  state netc keeps (both need it; counted once). Each buffer is aligned as netc aligns its own
  (256 bytes, per sample for batch-sized ones; `brainstorm_bytes_packed`: no alignment at all, as
  Brainstorm packs its arrays). It is computed from the training plan's tensors, not from a
  Brainstorm run. Brainstorm accumulates the gradient of a shared parameter in place in its one
  gradient buffer; netc's backward pass sums the contributions with one n-ary `sum` op, so they
  are all live at once -- nets with many uses of one parameter (char-rnn's 50 unrolled steps,
  SINGA's replicated partitions) plan above Brainstorm's layout until the backward pass
  accumulates (a chain of binary sums, which the planner already runs in place);
* with a budget of 70 % of the arena: the rematerialize pass's arena (the smallest it reaches when
  it cannot meet the budget), whether it met it, the recomputed layers and the extra FLOPs, also
  as a share of the training step's FLOPs (every op of the program: forward, gradients, updates).

Networks that cannot be trained yet (no gradient rule for a layer type, no single output to put a
loss on, not importable) are listed under `"training_skipped"` with the reason.
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
import time

import results_file  # noqa: E402  (bench/results_file.py, beside this script)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)


def plan_file(path: str, phase: str = "train"):
    from netc.diagnostics import DiagnosticEngine, NetcError
    from netc.frontend import load
    from netc.memory.plan import plan_memory
    from netc.memory.model import BATCH
    from netc.memory.report import plan_json
    from netc.memory.verify import verify_plan
    from netc.pipelines import Options, compile
    diag = DiagnosticEngine()
    try:
        m = load(path, diag)
        compile(m, Options(phase=phase), diag)        # the default pipeline + fuse, as codegen plans it
    except NetcError as e:
        return {"file": os.path.relpath(path, ROOT), "error": e.diagnostics[0].message}
    out = []
    for net in m.networks():
        t0 = time.perf_counter()
        plan = plan_memory(m, net)
        dt = time.perf_counter() - t0
        problems = verify_plan(plan, m, net)
        t0 = time.perf_counter()
        heur = plan_memory(m, net, exact=False)
        dt_heur = time.perf_counter() - t0
        problems += verify_plan(heur, m, net)
        per_op = plan_memory(m, net, fusion="none")
        problems += verify_plan(per_op, m, net)
        reuse_free = plan_memory(m, net, reuse=False, inplace=False, concat="none", fusion="none")
        j, u, h = plan_json(plan), plan_json(per_op), plan_json(heur)
        slots = sum(a.naive * (plan.batch if a.cls == BATCH else 1) for a in reuse_free.arenas)
        out.append({"file": os.path.relpath(path, ROOT), "network": plan.network, "batch": plan.batch,
                    "arena_bytes": j["arena_bytes"], "lower_bound_bytes": j["lower_bound_bytes"],
                    "ratio": j["ratio"], "arena_bytes_unfused": u["arena_bytes"],
                    "lower_bound_bytes_unfused": u["lower_bound_bytes"], "ratio_unfused": u["ratio"],
                    "batch_arena_bytes": plan.arenas[BATCH].size * plan.batch,
                    "batch_arena_bytes_unfused": per_op.arenas[BATCH].size * plan.batch,
                    "steps": len(plan.steps), "steps_unfused": len(per_op.steps),
                    "fused_tensors": j["fused_tensors"], "fused_bytes": j["fused_bytes"],
                    "no_reuse_bytes": j["no_reuse_bytes"], "brainstorm_bytes": slots,
                    "plan_seconds": round(dt, 4), "verified": not problems,
                    "proven_optimal": j["proven_optimal"], "proven_optimal_unfused": u["proven_optimal"],
                    "strategies": {k: a["strategy"] for k, a in j["arenas"].items()},
                    "arena_bytes_heuristic": h["arena_bytes"], "ratio_heuristic": h["ratio"],
                    "plan_seconds_heuristic": round(dt_heur, 4)})
    return out


def _build_training(path: str, budget=None):
    """(module, diagnostics) of the training program of `path` (+ rematerialize under `budget`)."""
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load
    from netc.pipelines import Options, Training, explain
    diag = DiagnosticEngine()
    m = load(path, diag)
    # the training program (+ a softmax loss), fused, + rematerialize under `budget`
    explain(m, Options(phase="train", training=Training(loss="softmax")), diag, fuse=True, budget=budget)
    return m


def brainstorm_training_bytes(plan, net, module) -> tuple:
    """Brainstorm's layout of a training step (see the module docstring), from the training plan's
    tensors: inputs, forward results and a delta per floating forward result, parameters and a
    gradient per parameter, state. (bytes with netc's alignment -- each buffer aligned, per sample
    for batch-sized ones -- , bytes packed without any alignment, as Brainstorm lays them out)."""
    from netc.ir.core import STRUCTURAL_OPS
    from netc.memory.model import BATCH, align_up
    from netc.ops import lookup
    forward = set()         # plan tensor names of forward results (the i-th of several: 'name#i')
    for op in net.regions[0].ops:
        d = lookup(op.name)
        if op.name in STRUCTURAL_OPS or "grad_of" in op.attrs or (d is not None and d.side_effects):
            continue
        n = op.attrs.get("name") or op.name
        forward.update(n if len(op.results) == 1 else f"{n}#{r.index}" for r in op.results)
    state = {p.attrs.get("sym_name") for p in module.params() if p.attrs.get("state")}
    aligned = packed = 0
    for t in plan.tensors:
        if t.kind == "param":
            if t.alias == "share":
                continue                      # the owner's storage
            copies = 1 if t.name[1:] in state else 2
        elif t.kind == "input":
            copies = 1
        elif t.name in forward:
            copies = 2 if t.dtype.startswith(("f", "bf")) else 1
        else:
            continue                          # netc's backward tensors: Brainstorm's deltas above
        k = plan.batch if t.cls == BATCH else 1
        aligned += copies * align_up(t.size, plan.alignment) * k
        packed += copies * t.size * k
    return aligned, packed


def train_file(path: str, budget_share: float = 0.7):
    from netc.diagnostics import NetcError
    from netc.memory.plan import plan_memory
    from netc.memory.model import BATCH, CONSTANT
    from netc.memory.report import plan_json
    from netc.memory.verify import verify_plan
    from netc.ops import layer_cost
    rel = os.path.relpath(path, ROOT)
    try:
        m = _build_training(path)
    except NetcError as e:
        return {"file": rel, "reason": e.diagnostics[0].message}
    except Exception as e:           # a bug in a gradient rule still being written: say so, go on
        return {"file": rel, "reason": f"internal error: {type(e).__name__}: {e}"}
    out = []
    for net in m.networks():
        name = net.attrs["sym_name"]
        if net.attrs.get("gradients") is None:
            out.append({"file": rel, "network": name, "reason": "not differentiated (no loss in this network)"})
            continue
        t0 = time.perf_counter()
        plan = plan_memory(m, net)
        dt = time.perf_counter() - t0
        problems = verify_plan(plan, m, net)
        j = plan_json(plan)
        bs, bs_packed = brainstorm_training_bytes(plan, net, m)
        ops = [op for op in net.regions[0].ops if op.name not in ("netc.input", "netc.output")]
        step_flops = sum(layer_cost(op)[0].flops_fwd for op in ops if op.results or op.operands)
        row = {"file": rel, "network": name, "batch": plan.batch, "steps": len(plan.steps),
               "schedule": plan.schedule, "arena_bytes": j["arena_bytes"],
               "lower_bound_bytes": j["lower_bound_bytes"], "ratio": j["ratio"],
               "constant_arena_bytes": plan.arenas[CONSTANT].size, "fixed_bytes": plan.arenas[CONSTANT].fixed,
               "batch_arena_bytes": plan.arenas[BATCH].size * plan.batch,
               "no_reuse_bytes": j["no_reuse_bytes"], "brainstorm_bytes": bs, "brainstorm_bytes_packed": bs_packed,
               "updates": sum(1 for s in plan.steps if s.updates), "proven_optimal": j["proven_optimal"],
               "plan_seconds": round(dt, 4), "verified": not problems, "step_flops": int(step_flops)}
        budget = int(j["arena_bytes"] * budget_share)
        t0 = time.perf_counter()
        try:
            rm = _build_training(path, budget)
        except NetcError as e:
            row["budget"] = {"bytes": budget, "error": e.diagnostics[0].message}
            out.append(row)
            continue
        rnet = rm.network(name)
        rplan = plan_memory(rm, rnet)
        rproblems = verify_plan(rplan, rm, rnet)
        rep = rnet.attrs.get("netc.rematerialize") or {}
        row["budget"] = {"bytes": budget, "share": budget_share, "arena_bytes": sum(rplan.arena_bytes()),
                         "met": bool(rep.get("met")), "recomputed": rep.get("recomputed", []),
                         "extra_flops": rep.get("extra_flops", 0),
                         "extra_flops_share": round(rep.get("extra_flops", 0) / step_flops, 5) if step_flops else 0.0,
                         "ratio": plan_json(rplan)["ratio"], "verified": not rproblems,
                         "seconds": round(time.perf_counter() - t0, 2)}
        out.append(row)
    return out


def training(files: list) -> tuple:
    rows, skipped = [], []
    mib = 2 ** 20
    print(f"\ntraining steps (backward + optimizer), arena / lower bound; budget = 70% of the arena")
    print(f"{'network':34} {'batch':>5} {'steps':>5} {'arena MiB':>10} {'bound MiB':>10} {'ratio':>6} "
          f"{'no-reuse MiB':>12} {'brainstorm MiB':>14} {'budgeted MiB':>12} {'met':>4} {'recomp.':>7} "
          f"{'+FLOPs':>7} {'plan s':>7}")
    for f in files:
        r = train_file(f)
        if isinstance(r, dict):
            skipped.append(r)
            print(f"{os.path.basename(f)[:34]:34} skipped: {r['reason'][:110]}", flush=True)
            continue
        for x in r:
            if "reason" in x:
                skipped.append(x)
                continue
            rows.append(x)
            name = os.path.basename(x["file"]) + ("" if x["network"] in x["file"] else f":{x['network']}")
            b = x["budget"]
            print(f"{name[:34]:34} {x['batch']:>5} {x['steps']:>5} {x['arena_bytes'] / mib:>10.2f} "
                  f"{x['lower_bound_bytes'] / mib:>10.2f} {x['ratio']:>6.3f} {x['no_reuse_bytes'] / mib:>12.2f} "
                  f"{x['brainstorm_bytes'] / mib:>14.2f} {b.get('arena_bytes', 0) / mib:>12.2f} "
                  f"{'yes' if b.get('met') else 'no':>4} {len(b.get('recomputed', [])):>7} "
                  f"{100 * b.get('extra_flops_share', 0):>6.2f}% {x['plan_seconds']:>7.3f}"
                  f"{'' if x['verified'] and b.get('verified', True) else '  VERIFY FAILED'}", flush=True)
    if rows:
        worst = max(rows, key=lambda x: x["ratio"])
        ratios = sorted(x["ratio"] for x in rows)
        saved = [1 - x["arena_bytes"] / x["brainstorm_bytes"] for x in rows if x["brainstorm_bytes"]]
        shrunk = sorted((1 - x["budget"]["arena_bytes"] / x["arena_bytes"], x["network"]) for x in rows
                        if x["budget"].get("recomputed"))
        above = [x["network"] for x in rows if x["arena_bytes"] > x["brainstorm_bytes"]]
        print(f"{len(rows)} training plans, arena / lower bound worst {worst['ratio']:.3f} ({worst['network']}), "
              f"median {ratios[len(ratios) // 2]:.3f}; all verified: "
              f"{all(x['verified'] and x['budget'].get('verified', True) for x in rows)}; arena vs Brainstorm's "
              f"layout: median {100 * sorted(saved)[len(saved) // 2]:.1f}% smaller, above it: "
              f"{', '.join(above) or 'none'}; {len(skipped)} skipped")
        if shrunk:
            print(f"under a 70% budget: {sum(1 for x in rows if x['budget'].get('met'))} met; recomputation shrank "
                  f"{len(shrunk)} arenas, median {100 * shrunk[len(shrunk) // 2][0]:.1f}%, most "
                  f"{100 * shrunk[-1][0]:.1f}% ({shrunk[-1][1]}), for at most "
                  f"{100 * max(x['budget']['extra_flops_share'] for x in rows):.2f}% more FLOPs")
    return rows, skipped


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "memory.json"))
    ap.add_argument("--no-training", action="store_true", help="skip the training-step plans")
    ap.add_argument("--only", nargs="*", default=None, help="only files whose path contains one of these")
    args = ap.parse_args()
    files = sorted(glob.glob(os.path.join(args.shared, "corpus", "paleo", "*.json")))
    files += sorted(glob.glob(os.path.join(args.shared, "corpus", "paleo-generated", "*.json")))
    files += sorted(glob.glob(os.path.join(args.shared, "corpus", "singa", "*.conf")))
    files += sorted(glob.glob(os.path.join(ROOT, "examples", "*.nd")))
    if args.only:
        files = [f for f in files if any(o in f for o in args.only)]
    rows, skipped = [], []
    mib = 2 ** 20
    print(f"{'network':34} {'batch':>5} {'steps':>9} {'batch arena MiB':>16} {'saved':>6} {'arena MiB':>10} "
          f"{'bound MiB':>10} {'ratio':>6} {'proven':>6} {'heur.':>6} {'no-reuse MiB':>12} {'brainstorm MiB':>14} "
          f"{'plan s':>7}")
    print(f"{'':34} {'':5} {'fused/op':>9} {'fused/op by op':>16} {'':6} {'':10} {'':10} {'':6} {'':6} "
          f"{'ratio':>6}")
    for f in files:
        r = plan_file(f)
        if isinstance(r, dict):
            skipped.append(r)
            continue
        for x in r:
            rows.append(x)
            name = os.path.basename(x["file"]) + ("" if x["network"] in x["file"] else f":{x['network']}")
            fb, ub = x["batch_arena_bytes"], x["batch_arena_bytes_unfused"]
            saved = f"{100 * (ub - fb) / ub:5.1f}%" if ub else "  -  "
            print(f"{name[:34]:34} {x['batch']:>5} {str(x['steps']) + '/' + str(x['steps_unfused']):>9} "
                  f"{f'{fb / mib:.2f}/{ub / mib:.2f}':>16} {saved:>6} {x['arena_bytes'] / mib:>10.2f} "
                  f"{x['lower_bound_bytes'] / mib:>10.2f} {x['ratio']:>6.3f} "
                  f"{'yes' if x['proven_optimal'] else 'no':>6} {x['ratio_heuristic']:>6.3f} "
                  f"{x['no_reuse_bytes'] / mib:>12.2f} "
                  f"{x['brainstorm_bytes'] / mib:>14.2f} {x['plan_seconds']:>7.3f}"
                  f"{'' if x['verified'] else '  VERIFY FAILED'}", flush=True)
    worst = max((x["ratio"] for x in rows), default=1.0)
    smaller = sum(1 for x in rows if x["arena_bytes"] < x["arena_bytes_unfused"])
    larger = sum(1 for x in rows if x["arena_bytes"] > x["arena_bytes_unfused"])
    print(f"{len(rows)} plans, worst arena / lower bound {worst:.3f}; fusion-aware planning: {smaller} smaller, "
          f"{larger} larger than op by op; {len(skipped)} files not importable (see 'skipped' in the results)")
    proven = sum(1 for x in rows if x["proven_optimal"])
    improved = [x for x in rows if x["arena_bytes"] < x["arena_bytes_heuristic"]]
    gains = ", ".join(f"{x['network']} {x['ratio_heuristic']:.3f} -> {x['ratio']:.3f}" for x in improved) or "none"
    slowest = max(rows, key=lambda x: x["plan_seconds"], default=None)
    print(f"proven optimal: {proven} of {len(rows)}; the exact search improved {len(improved)}: {gains}")
    if slowest:
        print(f"slowest plan: {slowest['network']} {slowest['plan_seconds']:.3f} s")
    train_rows, train_skipped = ([], []) if args.no_training else training(files)
    import torch
    meta = {"benchmark": "memory", "date": results_file.now(), "machine": results_file.machine(),
            "versions": {"torch": torch.__version__}, "mode": "inference", "fuse": True,
            "results": rows, "skipped": skipped}
    if not args.no_training:
        meta["training"] = train_rows
        meta["training_skipped"] = train_skipped
    results_file.write(args.out, meta)


if __name__ == "__main__":
    main()
