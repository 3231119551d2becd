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


NESTED = """
import os, sys
os.environ['TRITON_INTERPRET'] = '1'
import torch, triton, triton.language as tl
from triton.runtime import interpreter as I
calls = []
real = I._patch_lang
def counting(fn):                                     # Triton's own patching, counted ...
    calls.append(fn.__name__)
    return real(fn)
I._patch_lang = counting
import netc.kernels.common                            # ... under netc's wrapper
assert I._patch_lang is not counting

@triton.jit
def twice(x):
    return x * 2

@triton.jit
def kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    for s in range(0, tl.cdiv(n, BLOCK)):            # tl.cdiv: Triton's own helper (its globals hold tl.core)
        offs = s * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        tl.store(y_ptr + offs, twice(twice(v)) + tl.sum(v, 0) * 0, mask=offs < n)

x = torch.arange(37, dtype=torch.float32)
y = torch.zeros_like(x)
for _ in range(3):
    kernel[(1,)](x, y, 37, BLOCK=8)
assert torch.equal(y, 4 * x), y
print(len(calls), sorted(set(calls)))
"""


def test_a_launch_patches_triton_language_once_not_per_nested_call():
    """Triton's interpreter re-patches triton.language on every nested @triton.jit call; netc's wrapper
    (common._patch_once_per_launch) patches once per launch and once more for Triton's own helpers (whose
    globals hold tl.core): 3 launches with 3 * (2 * 5 + 5 + 5) nested calls patch 3 * (1 + 1) times, and the
    results are right."""
    e = {k: v for k, v in os.environ.items()}
    r = subprocess.run([sys.executable, "-c", NESTED], cwd=ROOT, env=e, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    count, names = r.stdout.strip().split(" ", 1)
    assert int(count) <= 6, r.stdout
    assert "kernel" in names
