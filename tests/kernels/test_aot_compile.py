"""Ahead-of-time compilation to sm_90 (and sm_80) cubins on a machine without a GPU.

Triton's compiler runs on the CPU and its wheel ships ptxas, so `python -m netc.kernels.aot`
compiles one specialization of every kernel. It runs in a subprocess: this test session imports
the kernels under TRITON_INTERPRET=1, and compilation needs real @triton.jit functions.
Skips cleanly when Triton's NVIDIA backend or its ptxas is missing.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

triton = pytest.importorskip("triton", reason="Triton is not importable")

import torch  # noqa: E402

from netc.kernels import aot  # noqa: E402
from netc.kernels.conv import conv2d  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _compile_in_subprocess(tmp_path, *args):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")   # a fresh cache: really run ptxas
    env["TRITON_DEFAULT_FP_FUSION"] = env.get("TRITON_DEFAULT_FP_FUSION", "1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    p = subprocess.run([sys.executable, "-m", "netc.kernels.aot", "--json", *args], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"AOT compilation failed:\n{p.stdout}\n{p.stderr[-4000:]}"
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_every_kernel_compiles_to_an_sm90_cubin(tmp_path, nvidia_toolchain):
    nvidia_toolchain(90)
    r = _compile_in_subprocess(tmp_path, "--arch", "90")
    expected = set(aot.representative_calls())
    assert set(r["kernels"]) == expected
    for name, k in r["kernels"].items():
        assert k["elf"] and k["cubin_bytes"] > 1000, (name, k)
        # the entry takes the kernel's runtime parameters plus Triton's two scratch pointers
        assert k["ptx_params"] == k["params"] + 2, (name, k)


def test_conv_compiles_for_sm80(tmp_path, nvidia_toolchain):
    nvidia_toolchain(80)
    r = _compile_in_subprocess(tmp_path, "--arch", "80", "--only", "conv_f32_3x3_taps")
    assert r["kernels"]["conv_f32_3x3_taps"]["elf"]


def test_signature_of_a_resolved_call():
    m = lambda *s, dt=torch.float16: torch.empty(*s, dtype=dt, device="meta")  # noqa: E731
    call = conv2d(m(2, 9, 9, 16), m(3, 3, 16, 8), m(8, dt=torch.float32), strides=[1, 2, 2, 1], launch=False)
    sig = aot.signature_of(call)
    assert list(sig) == list(call.kernel.arg_names)
    assert sig["x_ptr"] == "*fp16" and sig["bias_ptr"] == "*fp32" and sig["NB"] == "i32"
    assert sig["slope"] == "fp32" and sig["KH"] == "constexpr" and sig["BLOCK_M"] == "constexpr"
    assert call.grid == (1,) and call.constexprs["SH"] == 2


def test_compile_call_refuses_interpreted_kernels():
    from netc.kernels.common import INTERPRETING
    if not INTERPRETING:
        pytest.skip("kernels are compiled in this session")
    call = conv2d(torch.empty(1, 5, 5, 3), torch.empty(3, 3, 3, 4), launch=False)
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        aot.compile_call(call)
