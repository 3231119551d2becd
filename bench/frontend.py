#!/usr/bin/env python3
"""Frontend benchmark: parse + passes time for generated networks of 1k, 10k and 100k layers.

The generated net is a residual CNN: repeated units of Convolution (3x3 SAME) -> ReLU ->
Convolution -> Elementwise add with the unit's input, with a block (3 parallel 1x1 convolutions
concatenated) every 10th unit, so every pass has real work. Prints a table and writes
bench/results/frontend.json (machine, date, versions). A benchmark, not a test: nothing here
asserts on time.

    python bench/frontend.py [--sizes 1000,10000,100000] [--repeat N]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import results_file  # noqa: E402  (bench/results_file.py, beside this script)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def generate(n_layers: int) -> str:
    lines = [f"# generated: {n_layers} layers", "network big {", "  input data: f32[8, 16, 16, 16]"]
    count, prev, unit = 1, "data", 0
    while count < n_layers:
        u = f"u{unit}"
        if unit % 10 == 9 and count + 5 <= n_layers:
            lines.append(f"  block {u}({prev}) -> cat {{")
            lines.append("    a = Convolution() { filter: [1, 1, 16, 8], activation: relu }")
            lines.append("    b = Convolution() { filter: [1, 1, 16, 4] }")
            lines.append("    c = Convolution() { filter: [1, 1, 16, 4] }")
            lines.append("    cat = Concatenate(a, b, c) { dim: 3 }")
            lines.append("  }")
            prev, count = u, count + 4
        elif count + 4 <= n_layers:
            lines.append(f"  {u}_c1 = Convolution({prev}) {{ filter: [3, 3, 16, 16], padding: SAME }}")
            lines.append(f"  {u}_r = ReLU({u}_c1)")
            lines.append(f"  {u}_c2 = Convolution({u}_r) {{ filter: [3, 3, 16, 16], padding: SAME }}")
            lines.append(f"  {u}_add = Elementwise({u}_c2, {prev})")
            prev, count = f"{u}_add", count + 4
        else:
            lines.append(f"  {u}_r = ReLU({prev})")
            prev, count = f"{u}_r", count + 1
        unit += 1
    lines.append("}")
    return "\n".join(lines) + "\n"


def run(n: int):
    from netc.frontend.dsl import parse_nd
    from netc import pipelines
    text = generate(n)
    t0 = time.perf_counter()
    module = parse_nd(text, f"gen{n}.nd")
    t1 = time.perf_counter()
    ctx = pipelines.inference(module, pipelines.Options(), verify=False)
    t2 = time.perf_counter()
    layers = sum(1 for op in module.networks()[0].regions[0].ops if op.name != "netc.output")
    return {"layers": layers, "source_bytes": len(text), "parse_s": t1 - t0, "passes_s": t2 - t1,
            "total_s": t2 - t0, "per_pass_s": {k: round(v, 4) for k, v in ctx.notes["pass_times"]}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=0, help="best of N runs per size (default 3 up to 10k, else 1)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                  "frontend.json"))
    args = ap.parse_args()
    from netc.frontend.dsl import parse_nd
    parse_nd("network warm { input x: f32[1] }", "warm.nd")  # build the parser tables once
    results = []
    print(f"{'layers':>8} {'parse s':>9} {'passes s':>9} {'total s':>9} {'us/layer':>9}")
    for n in [int(s) for s in args.sizes.split(",")]:
        reps = args.repeat if args.repeat else (3 if n <= 10000 else 1)
        best = min((run(n) for _ in range(reps)), key=lambda r: r["total_s"])
        results.append(best)
        print(f"{best['layers']:>8} {best['parse_s']:>9.3f} {best['passes_s']:>9.3f} {best['total_s']:>9.3f} "
              f"{1e6 * best['total_s'] / best['layers']:>9.1f}", flush=True)
    growth = []
    for a, b in zip(results, results[1:]):
        g = (b["total_s"] / a["total_s"]) / (b["layers"] / a["layers"])
        growth.append({"from": a["layers"], "to": b["layers"], "per_layer_ratio": round(g, 3)})
        print(f"time per layer from {a['layers']} to {b['layers']} layers: x{g:.2f} (1.00 = linear)")
    import lark
    meta = {"benchmark": "frontend", "date": results_file.now(), "machine": results_file.machine(),
            "versions": {"lark": lark.__version__}, "results": results, "growth": growth}
    results_file.write(args.out, meta)


if __name__ == "__main__":
    main()
