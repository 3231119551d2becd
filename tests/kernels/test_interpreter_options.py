"""netc's kernels under Triton's interpreter run without its integer-overflow checks (a debug feature
the compiled kernels only have with debug=True, a third of the interpreter's time), unless
NETC_INTERPRETER_CHECKS=1 (netc/kernels/common.py)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = ("import os; os.environ['TRITON_INTERPRET'] = '1'; import netc.kernels.common; "
         "from triton.runtime import interpreter as I; print(I.interpreter_builder.options.sanitize_overflow)")


def _probe(**env):
    e = {k: v for k, v in os.environ.items() if k != "NETC_INTERPRETER_CHECKS"}
    e.update(env)
    r = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=e, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_the_interpreter_skips_overflow_checks_unless_asked():
    assert _probe() == "False"
    assert _probe(NETC_INTERPRETER_CHECKS="1") == "True"
