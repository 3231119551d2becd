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
    from netc.memory.plan import BATCH, plan_memory
    from netc.memory.report import plan_json
    from netc.memory.verify import verify_plan
    from netc.passes.manager import DEFAULT_PIPELINE, PassContext, PassManager
    diag = DiagnosticEngine()
    try:
        m = load(path, diag)
        PassManager(DEFAULT_PIPELINE + ["fuse"]).run(m, PassContext(diag=diag, phase=phase))
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "memory.json"))
    args = ap.parse_args()
    files = sorted(glob.glob(os.path.join(args.shared, "corpus", "paleo", "*.json")))
    files += sorted(glob.glob(os.path.join(args.shared, "corpus", "paleo-generated", "*.json")))
    files += sorted(glob.glob(os.path.join(args.shared, "corpus", "singa", "*.conf")))
    files += sorted(glob.glob(os.path.join(ROOT, "examples", "*.nd")))
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
    import torch
    meta = {"benchmark": "memory", "date": results_file.now(), "machine": results_file.machine(),
            "versions": {"torch": torch.__version__}, "mode": "inference", "fuse": True,
            "results": rows, "skipped": skipped}
    results_file.write(args.out, meta)


if __name__ == "__main__":
    main()
