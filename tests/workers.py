"""Helpers of the tests that run K workers (test_distributed.py, test_distributed_compiled.py)."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_netc(args, env: dict, timeout: float, cmd=None):
    """`python -m netc ARGS` (or `cmd`) in the repository with `env`; the result carries .seconds."""
    t0 = time.monotonic()
    r = subprocess.run(cmd or [sys.executable, "-m", "netc", *map(str, args)], capture_output=True, text=True,
                       cwd=ROOT, env=env, timeout=timeout)
    r.seconds = time.monotonic() - t0
    return r


def baseline(capsys, *args):
    """The single-process run (--workers 1) in this process: its stdout."""
    from netc.cli import main
    capsys.readouterr()
    rc = main([*map(str, args), "--workers", "1"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return out.out
