"""`netc` in a process of its own, for the tests that run the interpreter target or build cubins: Triton's
interpreter mode (TRITON_INTERPRET) is read when netc.kernels is first imported, so a test that needs the
other mode than its xdist worker's runs netc in a subprocess, with the variable set (interp) or removed."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def netc_process(*args, interp: bool = False, timeout: float = 900) -> subprocess.CompletedProcess:
    """`python -m netc ARGS` from the repository root; the interpreter's kernels with interp, else compiled ones."""
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    if interp:
        env["TRITON_INTERPRET"] = "1"
    return subprocess.run([sys.executable, "-m", "netc", *map(str, args)], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=timeout)
