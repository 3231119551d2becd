#!/usr/bin/env python3
"""The README's training command, timed (issue 28): `netc run examples/digits.nd --train --data ... --eval ...
--optimizer adam --lr 0.003 --epochs 10` as a user runs it (a process of its own: the interpreter's start and
imports included), on the reference executor (--reference: the oracle, f64 arithmetic) and on what `netc run` runs
without a target (the CPU target), in one run; prints the figures and writes bench/results/cli-train-<date>.json
(machine, date, versions, load average, settings, results).

    python bench/cli_train.py [--rounds 3] [--threads machine,1] [--data-dir DIR] [--out FILE.json]

The digits' .npz files come from examples/digits_data.py (scikit-learn's bundled digits, no download), written to a
temporary folder unless --data-dir holds them. The commands alternate, --rounds times each (load from other
processes on a shared machine falls on all alike); a round's wall time is time.perf_counter around the process.
All of it once per --threads setting: torch's own thread count (the machine's cores), and 1 (OMP_NUM_THREADS=1): on
a loaded machine a parallel region waits for a descheduled thread, which the reference executor's many small ops
pay for and the CPU target's generated step avoids (it runs small ops on one thread).
`startup` times `python -m netc run examples/digits.nd --train --steps 1` (imports, parsing, the passes and one
step) the same way, the part of each command that is no training. Each command's summary and eval lines are
recorded (both train to the same accuracy within a few tenths of a percent). A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import tempfile
import time

import results_file  # noqa: E402  (bench/results_file.py, beside this script)

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
NET = "examples/digits.nd"
TRAIN = ("--optimizer", "adam", "--lr", "0.003", "--epochs", "10")


def digits_data(folder: str) -> tuple:
    """(train, test) .npz paths in folder, written by examples/digits_data.py when missing."""
    train, test = (os.path.join(folder, f"digits_{k}.npz") for k in ("train", "test"))
    if not (os.path.exists(train) and os.path.exists(test)):
        subprocess.run([sys.executable, os.path.join(ROOT, "examples", "digits_data.py"), "-o",
                        os.path.join(folder, "digits")], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return train, test


def timed(cmd: list, env: dict) -> tuple:
    """(seconds, stdout) of one run of cmd in the repository root; a failure stops the benchmark."""
    t = time.perf_counter()
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr}")
    return dt, r.stdout


def summary(stdout: str) -> list:
    return [ln for ln in stdout.splitlines() if ln.startswith(("trained ", "eval on "))]


def git_commit() -> str | None:
    r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return r.stdout.strip() or None


def run_rounds(commands: dict, rounds: int, env: dict, label: str) -> tuple:
    """Each command `rounds` times, in a rotating order (load from other processes on a shared machine falls on all
    alike): ({name: [seconds]}, {name: its last run's summary lines})."""
    times: dict = {k: [] for k in commands}
    lines: dict = {}
    for i in range(rounds):
        names = list(commands)
        for k in names[i % len(names):] + names[:i % len(names)]:
            dt, out = timed(commands[k], env)
            times[k].append(round(dt, 3))
            lines[k] = summary(out)
            print(f"{label} round {i + 1} {k}: {dt:.2f} s", flush=True)
    return times, lines


def figures(times: dict, lines: dict) -> dict:
    res = {k: dict(seconds=v, median_s=round(statistics.median(v), 3), min_s=min(v)) for k, v in times.items()}
    for k in ("reference", "default"):
        res[k]["summary"] = lines[k]
    med = {k: res[k]["median_s"] for k in res}
    res["ratios"] = dict(reference_over_default=round(med["reference"] / med["default"], 2),
                         reference_over_default_min=round(res["reference"]["min_s"] / res["default"]["min_s"], 2),
                         # the training itself: each command less the start (imports, passes, one step)
                         training_reference_over_default=round((med["reference"] - med["startup"])
                                                               / (med["default"] - med["startup"]), 2))
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="machine,1", metavar="T,T",
                    help="torch's thread counts to time under (OMP_NUM_THREADS of the commands; machine: as it is)")
    ap.add_argument("--data-dir", metavar="DIR", help="where digits_train.npz and digits_test.npz are (or go)")
    ap.add_argument("--out", metavar="FILE.json")
    a = ap.parse_args(argv)
    load = [round(x, 2) for x in os.getloadavg()]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        train, test = digits_data(a.data_dir or tmp)
        base = [sys.executable, "-m", "netc", "run", NET, "--train", "--data", train, "--eval", test, *TRAIN]
        commands = {"reference": base + ["--reference"], "default": base,
                    "startup": [sys.executable, "-m", "netc", "run", NET, "--train", "--steps", "1"]}
        for threads in a.threads.split(","):
            env = dict(os.environ)
            env.pop("OMP_NUM_THREADS", None)
            if threads != "machine":
                env["OMP_NUM_THREADS"] = threads
            label = f"threads {threads}"
            res = results[label] = figures(*run_rounds(commands, a.rounds, env, label))
            med, r = {k: res[k]["median_s"] for k in commands}, res["ratios"]
            print(f"{label}: the README's training command, --reference {med['reference']:.2f} s, default (the CPU "
                  f"target) {med['default']:.2f} s (median of {a.rounds}): {r['reference_over_default']:.2f}x; "
                  f"start-up {med['startup']:.2f} s, so the training itself {r['training_reference_over_default']:.2f}x")
            for k in ("reference", "default"):
                print(f"  {k}: " + " | ".join(res[k]["summary"]))
    import numpy
    import torch
    out = a.out or os.path.join(ROOT, "bench", "results", f"cli-train-{datetime.date.today().isoformat()}.json")
    results_file.write(out, dict(
        date=results_file.now(), machine=results_file.machine(torch=torch.__version__, numpy=numpy.__version__,
                                                              torch_threads=torch.get_num_threads()),
        netc_commit=git_commit(), load_average=dict(start=load, end=[round(x, 2) for x in os.getloadavg()]),
        settings=dict(rounds=a.rounds, threads=a.threads, command=f"netc run {NET} --train --data DIGITS_TRAIN "
                                                                  f"--eval DIGITS_TEST " + " ".join(TRAIN)),
        note="wall-clock seconds of the whole command in a process of its own (time.perf_counter), rounds "
             "interleaved; reference: with --reference; default: no --target (the CPU target); startup: "
             "--train --steps 1 without --data; per torch thread count (OMP_NUM_THREADS)",
        results=results), ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
