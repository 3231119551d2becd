#!/usr/bin/env python3
"""How far below eager PyTorch's peak memory a netc library can go, computed on the CPU.

    python bench/memory_floor.py [RESULTS.json ...] [--out FILE]

For each (network, precision) of the GPU results files given (bench/gpu.py's, default: every
bench/results/gpu-*.json that is not a training run), the network is planned again here, as `netc compile`
plans it, and the floor is set beside the figures measured there:

  params       the parameters' bytes (constant arena's lower bound: parameters and derived constants)
  floor        the constant arena's lower bound + the batch arena's lower bound (the peak, over the
               schedule, of the live buffers' bytes: no placement of netc's buffers is smaller) x the batch:
               a program of the same ops (the same fusion, each op's operands and results live while it
               runs), its input read where the caller holds it and its outputs handed over, not copied
  eager        eager's peak (torch.cuda.max_memory_allocated over a forward, its parameters and inputs
               included), measured
  netc         the .so's arena + inputs + outputs, measured

and the ratios params / eager, floor / eager, netc / eager. Where params / eager or floor / eager is
above a goal (issue 29's 0.6), no netc library of that network reaches it: the ratio says by how much
the goal is out of reach, not how close netc is. Writes bench/results/memory-floor-<date>.json.
"""
from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import sys

import results_file  # noqa: E402  (bench/results_file.py)

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))



def floor_of(path: str, precision: str, batch: int | None) -> dict:
    """Bytes of the plan's bounds for one network file at `batch` (None: its own)."""
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load
    from netc.memory.model import BATCH, CONSTANT
    from netc.pipelines import Options, Plan, Precision, compile
    diag = DiagnosticEngine()
    module = load(path, diag, batch or 1)
    ctx = compile(module, Options(phase="test", opaque_as_identity=True, precision=Precision.named(precision)),
                  diag, plan=Plan(mode="inference"))
    plan = next(iter(ctx.notes["memory_plan"].values()))
    if batch is not None and plan.batch != batch:
        raise SystemExit(f"{path}: planned at batch {plan.batch}, measured at {batch}")
    const = plan.arenas[CONSTANT].lower_bound
    return dict(batch=plan.batch, params=const, floor=const + plan.arenas[BATCH].lower_bound * plan.batch)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="*")
    ap.add_argument("--goal", type=float, default=0.6)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    files = a.results or sorted(f for f in glob.glob(os.path.join(ROOT, "bench", "results", "gpu-*.json"))
                                if not os.path.basename(f).startswith("gpu-train"))
    rows, seen = [], set()
    for f in files:
        doc = json.load(open(f))
        for r in doc.get("results", []):
            if r.get("mode") == "train" or "memory" not in r or (r["network"], r["precision"]) in seen:
                continue
            seen.add((r["network"], r["precision"]))
            src = os.path.join(ROOT, r["file"]) if not os.path.isabs(r["file"]) else r["file"]
            if not os.path.exists(src):
                src = os.path.join(ROOT, "..", r["file"])
            fl = floor_of(src, r["precision"], r.get("batch"))
            eager = r["memory"]["eager_bytes"]
            row = dict(network=r["network"], precision=r["precision"], batch=fl["batch"], measured_in=os.path.basename(f),
                       params_bytes=fl["params"], floor_bytes=fl["floor"], eager_bytes=eager,
                       netc_bytes=r["memory"]["netc_bytes"], params_over_eager=round(fl["params"] / eager, 3),
                       floor_over_eager=round(fl["floor"] / eager, 3),
                       netc_over_eager=round(r["memory"]["netc_bytes"] / eager, 3))
            row["goal_reachable"] = row["floor_over_eager"] <= a.goal
            rows.append(row)
            print(f"{row['network']:13s} {row['precision']:5s} b={row['batch']:<4d} params/eager {row['params_over_eager']:.2f}  "
                  f"floor/eager {row['floor_over_eager']:.2f}  netc/eager {row['netc_over_eager']:.2f}"
                  f"{'' if row['goal_reachable'] else f'  (goal {a.goal} out of reach)'}")
    out = a.out or os.path.join(ROOT, "bench", "results", f"memory-floor-{datetime.date.today()}.json")
    results_file.write(out, dict(date=results_file.now(), machine=results_file.machine(), goal=a.goal,
                                 sources=[os.path.relpath(f, ROOT) for f in files], results=rows), ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
