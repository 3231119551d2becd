#!/usr/bin/env python3
"""Compile-time benchmark of `netc compile --target cuda`: cold (empty kernel cache) and warm
(every cubin and the lowering cached) compiles of a network, each in a fresh process as a user would run it;
prints the figures and writes bench/results/compile.json (machine, date, versions).

    python bench/compile.py [FILE.nd ...] [--arch sm_90] [--repeat 2]

Default network: examples/inception_v3.nd. A benchmark, not a test: nothing here asserts.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import results_file  # noqa: E402  (bench/results_file.py, beside this script)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def compile_once(src: str, out: str, arch: str, cache: str) -> dict:
    # Triton keeps its own cache too: point it into the same fresh directory, or "cold" is not cold
    env = dict(os.environ, NETC_CACHE_DIR=cache, TRITON_CACHE_DIR=os.path.join(cache, "triton"))
    env.pop("TRITON_INTERPRET", None)
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "netc", "compile", src, "-o", out, "--target", "cuda", "--arch", arch],
                       capture_output=True, text=True, cwd=ROOT, env=env)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"netc compile {src} failed:\n{r.stderr}")
    m = re.search(r"(\d+) launches, (\d+) kernels \((\d+) from the cache\), ([\d.]+)s", r.stderr)
    return dict(wall_s=round(wall, 2), in_process_s=float(m.group(4)), launches=int(m.group(1)),
                kernels=int(m.group(2)), cached=int(m.group(3)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", default=["examples/inception_v3.nd"])
    ap.add_argument("--arch", default="sm_90", choices=("sm_90", "sm_80"))
    ap.add_argument("--repeat", type=int, default=2, help="warm compiles per file")
    a = ap.parse_args(argv)
    import torch
    import triton
    results = []
    for f in a.files:
        with tempfile.TemporaryDirectory(prefix="netc-bench-") as d:
            cache = os.path.join(d, "cache")
            out = os.path.join(d, "net.so")
            cold = compile_once(f, out, a.arch, cache)
            warm = [compile_once(f, out, a.arch, cache) for _ in range(a.repeat)]
            size = os.path.getsize(out)
        best = min(warm, key=lambda w: w["wall_s"])
        results.append(dict(file=f, arch=a.arch, cold=cold, warm=warm, so_bytes=size))
        print(f"{f} ({a.arch}): {cold['launches']} launches, {cold['kernels']} distinct kernels; "
              f"cold {cold['wall_s']:.1f}s wall ({cold['in_process_s']:.1f}s compiling), "
              f"warm {best['wall_s']:.1f}s wall ({best['in_process_s']:.2f}s compiling, {best['cached']} cached); "
              f".so {size / 1e6:.1f} MB")
    doc = dict(date=results_file.now(), machine=results_file.machine(),
               versions=dict(torch=torch.__version__, triton=triton.__version__),
               note=("wall = a fresh `netc compile` process (imports included); compiling = its own report. "
                     "cold: empty kernel, lowering and Triton caches; warm: the same network again (launches "
                     "from the lowering cache, cubins from the kernel cache: no torch or Triton import)"),
               results=results)
    results_file.write(os.path.join(ROOT, "bench", "results", "compile.json"), doc, ROOT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
