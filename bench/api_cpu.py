#!/usr/bin/env python3
"""The Python API on its two CPU targets (issue 28): examples/python/ programs run as they are, with `--target
reference` (the f64 oracle, the API's default before) and `--target cpu` (the default now), the same data, passes
and seeds, in one process; prints the figures and writes bench/results/api-cpu-<date>.json (machine, date,
versions, settings, results).

    python bench/api_cpu.py [digits ranking gan text_classification char_rnn] [--rounds 3] [--fast]

Default: digits (examples/python/digits.py: 10 passes of Adam over 1,437 digits, batch 32, a held-out test
after every pass). Each round runs every example once per target, the order of the targets alternating from
round to round, so load from other processes on a shared machine falls on both alike; the median over rounds
is the figure. Per run:

  train_s   the time inside netc.train (what the example's handlers do meanwhile included: digits tests the
            held-out set after every pass)
  main_s    the whole program (data, network, training, the final test and infer, printing)
  last      the program's last line (its result: both targets' should agree, up to f32 rounding)

ratio = reference / cpu of the medians. Each run builds its own network, so no compiled program carries over
from one run to the next. A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import io
import os
import statistics
import sys
import time

import results_file  # noqa: E402  (bench/results_file.py, beside this script)

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples", "python"))
EXAMPLES = ("digits", "ranking", "gan", "text_classification", "char_rnn")
TARGETS = ("reference", "cpu")


def run_once(name: str, target: str, fast: bool) -> dict:
    """One run of examples/python/<name>.py on `target`: its times and last line."""
    import netc
    module = importlib.import_module(name)
    inside = [0.0]
    train = netc.train

    def timed(*args, **kw):
        t = time.perf_counter()
        try:
            return train(*args, **kw)
        finally:
            inside[0] += time.perf_counter() - t

    argv = ["--target", target] + (["--fast"] if fast else []) + (["--plot", ""] if name == "gan" else [])
    out = io.StringIO()
    netc.train = timed
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out):
            rc = module.main(argv)
    finally:
        netc.train = train
    main_s = time.perf_counter() - t0
    lines = [ln for ln in out.getvalue().splitlines() if ln.strip()]
    return dict(train_s=round(inside[0], 4), main_s=round(main_s, 4), rc=rc, last=lines[-1] if lines else "")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("examples", nargs="*", default=["digits"], help=f"of {', '.join(EXAMPLES)} (default digits)")
    ap.add_argument("--rounds", type=int, default=3, help="runs per example and target (default 3)")
    ap.add_argument("--fast", action="store_true", help="the examples' --fast smoke sizes")
    ap.add_argument("-o", "--output", help="default bench/results/api-cpu-<date>.json")
    a = ap.parse_args(argv)
    bad = [e for e in a.examples if e not in EXAMPLES]
    if bad:
        ap.error(f"unknown example {bad[0]!r} (examples: {', '.join(EXAMPLES)})")
    import torch
    import netc
    load_before = os.getloadavg()
    results = {}
    for name in a.examples:
        runs = {t: [] for t in TARGETS}
        for r in range(a.rounds):
            for target in (TARGETS if r % 2 == 0 else TARGETS[::-1]):
                got = run_once(name, target, a.fast)
                runs[target].append(got)
                print(f"{name} {target:9s} round {r + 1}: training {got['train_s']:.2f}s, program {got['main_s']:.2f}s"
                      f" -- {got['last']}", flush=True)
        med = {t: {k: statistics.median(x[k] for x in runs[t]) for k in ("train_s", "main_s")} for t in TARGETS}
        ratio = {k: round(med["reference"][k] / med["cpu"][k], 2) for k in ("train_s", "main_s")}
        results[name] = dict(median=med, reference_over_cpu=ratio, runs=runs)
        print(f"{name}: training {med['reference']['train_s']:.2f}s on reference, {med['cpu']['train_s']:.2f}s on "
              f"cpu ({ratio['train_s']:.2f}x); the whole program {ratio['main_s']:.2f}x")
    doc = dict(date=results_file.now(), settings=dict(rounds=a.rounds, fast=a.fast, examples=a.examples,
                                                      threads="the examples' own (threads=1)"),
               machine=results_file.machine(torch=torch.__version__, netc=netc.__version__,
                                            torch_threads=torch.get_num_threads()),
               load_average=dict(before=load_before, after=os.getloadavg()), results=results)
    out = a.output or os.path.join(ROOT, "bench", "results",
                                   f"api-cpu-{datetime.date.today().isoformat()}{'-fast' if a.fast else ''}.json")
    results_file.write(out, doc, ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
