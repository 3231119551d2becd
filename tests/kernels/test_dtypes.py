"""Every kernel in f16 and bf16 (what `--dtype fp16|bf16` compiles): inputs loaded in their dtype,
computed and accumulated in f32, stored in the output's dtype; checked against the float64
reference with the dtype's tolerance (netc.ops.reference.TOLERANCES). Also the mixed dtypes the
set-dtype pass produces (f32 batch-norm scale/shift in a 16-bit epilogue or chain, 16-bit logits ->
f32 softmax), proofs that intermediate values are f32 (they would overflow f16's 65504), and TF32.

bf16 works under Triton's CPU interpreter except tl.dot, which multiplies the raw uint16 bit
patterns (netc/kernels/common.py explains; mma() widens bf16 operands there), so nothing skips.
"""
import pytest

pytest.importorskip("triton", reason="Triton is not importable; kernel tests need it")

import torch  # noqa: E402

from netc.ops import reference as R  # noqa: E402
from netc.kernels.conv import conv2d  # noqa: E402
from netc.kernels.elementwise import elementwise_chain  # noqa: E402
from netc.kernels.gemm import gemm  # noqa: E402
from netc.kernels.lrn import lrn  # noqa: E402
from netc.kernels.pool import avgpool, maxpool  # noqa: E402
from netc.kernels.softmax import softmax  # noqa: E402

HALF = [torch.float16, torch.bfloat16]
IDS = ["f16", "bf16"]
BLOCKS = dict(block_m=16, block_n=16, block_k=16, group_m=2)
NAN = float("nan")
F16_MAX = 65504.0


def randn(gen, *shape, dtype=torch.float32, device="cpu", scale=1.0):
    return (torch.randn(*shape, generator=gen) * scale).to(dtype).to(device)


def poisoned(shape, dtype, device):
    return torch.full(shape, NAN, dtype=dtype, device=device)


# --------------------------------------------------------------------------- each kernel, 16-bit

@pytest.mark.parametrize("dtype", HALF, ids=IDS)
def test_gemm_with_f32_batch_norm_epilogue(device, rng, dtype):
    """inner product + folded batch norm + residual + relu as --dtype compiles it: 16-bit
    activations, weights, bias and residual; f32 scale/shift; 16-bit output."""
    m, n, k = 21, 19, 70                       # K spans several BLOCK_K steps, with a ragged tail
    a, b = randn(rng, m, k, dtype=dtype, device=device), randn(rng, k, n, dtype=dtype, device=device, scale=0.2)
    bias, res = randn(rng, n, dtype=dtype, device=device), randn(rng, m, n, dtype=dtype, device=device)
    scale, shift = 1 + randn(rng, n, device=device, scale=0.1), randn(rng, n, device=device, scale=0.1)
    kw = dict(scale=scale, shift=shift, residual=res, activation="relu")
    y = gemm(a, b, bias, out=poisoned((m, n), dtype, device), **kw, **BLOCKS)
    assert y.dtype == dtype
    R.check(y, R.gemm(a, b, bias, **kw), dtype)


@pytest.mark.parametrize("dtype", HALF, ids=IDS)
@pytest.mark.parametrize("flat", [True, False], ids=["flat-k", "taps"])
def test_conv_with_f32_batch_norm_into_concat_slice(device, rng, dtype, flat):
    x = randn(rng, 2, 6, 7, 5, dtype=dtype, device=device)
    w = randn(rng, 3, 3, 5, 6, dtype=dtype, device=device, scale=0.3)
    bias = randn(rng, 6, dtype=dtype, device=device)
    scale, shift = 1 + randn(rng, 6, device=device, scale=0.1), randn(rng, 6, device=device, scale=0.1)
    buf = poisoned((2, 6, 7, 10), dtype, device)
    y = conv2d(x, w, bias, padding="SAME", scale=scale, shift=shift, activation="tanh", out=buf,
               out_channel_offset=3, flat_k=flat, **BLOCKS)
    assert y.dtype == dtype
    R.check(y, R.conv2d(x, w, bias, [1, 1, 1, 1], "SAME", scale=scale, shift=shift, activation="tanh"), dtype)
    assert torch.isnan(buf[..., :3]).all() and torch.isnan(buf[..., 9:]).all(), "wrote outside its slice"


@pytest.mark.parametrize("dtype", HALF, ids=IDS)
def test_pools(device, rng, dtype):
    x = randn(rng, 2, 9, 8, 6, dtype=dtype, device=device, scale=3)
    for fn, ref in ((maxpool, R.maxpool), (avgpool, R.avgpool)):
        y = fn(x, [1, 3, 3, 1], [1, 2, 2, 1], "SAME", out=poisoned((2, 5, 4, 6), dtype, device))
        assert y.dtype == dtype
        R.check(y, ref(x, [1, 3, 3, 1], [1, 2, 2, 1], "SAME"), dtype, what=fn.__name__)


@pytest.mark.parametrize("dtype", HALF, ids=IDS)
def test_lrn(device, rng, dtype):
    x = randn(rng, 2, 3, 4, 13, dtype=dtype, device=device, scale=2)
    y = lrn(x, 5, 0.1, 0.75, 2.0, out=poisoned(x.shape, dtype, device), block_c=8)
    assert y.dtype == dtype
    R.check(y, R.lrn(x, 5, 0.1, 0.75, 2.0), dtype)


@pytest.mark.parametrize("dtype", HALF, ids=IDS)
def test_softmax_16bit_logits_to_f32_probabilities(device, rng, dtype):
    """set-dtype keeps softmax results f32: the kernel reads 16-bit logits and writes f32, so only the
    logits' rounding remains (f32 tolerance on the rounded logits); a 16-bit output also works."""
    x = randn(rng, 3, 37, dtype=dtype, device=device, scale=4)
    y = softmax(x, out=poisoned((3, 37), torch.float32, device), block_n=16)
    assert y.dtype == torch.float32
    R.check(y, R.softmax(x))
    y16 = softmax(x, out_dtype=dtype, block_n=16)
    assert y16.dtype == dtype
    R.check(y16, R.softmax(x), dtype)


@pytest.mark.parametrize("dtype", HALF, ids=IDS)
def test_elementwise_chain_with_f32_vectors(device, rng, dtype):
    x, r = randn(rng, 2, 5, 3, 7, dtype=dtype, device=device), randn(rng, 2, 5, 3, 7, dtype=dtype, device=device)
    sc, sh = 1 + randn(rng, 7, device=device, scale=0.1), randn(rng, 7, device=device, scale=0.1)
    ops = [("scale_shift", sc, sh), ("add", r), ("leaky_relu", 0.1), ("mul", 0.5)]
    y = elementwise_chain(x, ops, out=poisoned(x.shape, dtype, device), block=64)
    assert y.dtype == dtype
    R.check(y, R.elementwise_chain(x, ops), dtype)


# --------------------------------------------------------------------------- intermediates are f32

@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
def test_gemm_accumulates_in_f32(device):
    """128 products of 30 * 30 sum to 115200, past f16's 65504: an f16 accumulator (or epilogue)
    would hold inf. The bias brings the f32 result back into range before the f16 store."""
    a = torch.full((16, 128), 30.0, dtype=torch.float16, device=device)
    b = torch.full((128, 16), 30.0, dtype=torch.float16, device=device)
    bias = torch.full((16,), -115000.0, device=device)           # f32, like a kept parameter
    y = gemm(a, b, bias, out=poisoned((16, 16), torch.float16, device), **BLOCKS)
    assert torch.equal(y.float().cpu(), torch.full((16, 16), 200.0))


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")   # the tile's masked rows: shift alone
def test_conv_accumulates_in_f32(device):
    x = torch.full((1, 4, 4, 32), 30.0, dtype=torch.float16, device=device)
    w = torch.full((3, 3, 32, 16), 30.0, dtype=torch.float16, device=device)
    shift = torch.full((16,), -259000.0, device=device)         # 9 * 32 * 900 = 259200 at the centre
    scale = torch.ones(16, device=device)
    y = conv2d(x, w, padding="VALID", scale=scale, shift=shift, out=poisoned((1, 2, 2, 16), torch.float16, device),
               **BLOCKS)
    assert torch.equal(y.float().cpu(), torch.full((1, 2, 2, 16), 200.0))


def test_avgpool_sums_in_f32(device):
    x = torch.full((1, 11, 11, 4), 1000.0, dtype=torch.float16, device=device)   # window sum 121000
    y = avgpool(x, [1, 11, 11, 1], [1, 1, 1, 1], "VALID")
    assert torch.equal(y.float().cpu(), torch.full((1, 1, 1, 4), 1000.0))


def test_lrn_sums_squares_in_f32(device):
    x = torch.full((1, 1, 1, 5), 300.0, dtype=torch.float16, device=device)   # 5 * 300^2 = 450000
    y = lrn(x, 5, 1.0, 0.5, 1.0)
    R.check(y, R.lrn(x, 5, 1.0, 0.5, 1.0), torch.float16)
    assert float(y.float().abs().max()) > 1.0, "the squares' sum overflowed"


def test_elementwise_chain_intermediates_are_f32(device):
    x = torch.full((4, 8), 100.0, dtype=torch.float16, device=device)
    y = elementwise_chain(x, [("mul", 1000.0), ("add", 1.0), ("mul", 1e-3)])   # 1e5 in between
    R.check(y, R.elementwise_chain(x, [("mul", 1000.0), ("add", 1.0), ("mul", 1e-3)]), torch.float16)


def test_softmax_f16_large_logits(device):
    x = torch.tensor([[60000.0, 59990.0, -60000.0]], dtype=torch.float16, device=device)
    y = softmax(x, out_dtype=torch.float32)
    R.check(y, R.softmax(x))


# --------------------------------------------------------------------------- TF32

def test_tf32_products_round_operands_to_tf32(device, rng):
    """allow_tf32: f32 operands are multiplied as TF32 (10 explicit mantissa bits). Under the
    interpreter the operands are truncated as a tensor core reads fp32 registers, so the result is
    the exact product of the truncated operands, visibly different from IEEE f32."""
    from netc.kernels.common import INTERPRETING
    a, b = randn(rng, 24, 40, device=device), randn(rng, 40, 20, device=device)
    ieee = gemm(a, b, **BLOCKS)
    tf32 = gemm(a, b, allow_tf32=True, **BLOCKS)
    exact = R.gemm(a, b)
    scale = float(exact.abs().max())
    R.check(ieee, exact)
    R.check(tf32, exact, rtol=5e-3)
    if INTERPRETING:
        trunc = lambda t: (t.cpu().view(torch.int32) & -8192).view(torch.float32)   # noqa: E731
        R.check(tf32, R.gemm(trunc(a), trunc(b)), rtol=1e-5)
        assert float((tf32.double().cpu() - exact.cpu()).abs().max()) > 1e-4 * scale, "TF32 had no effect"
        c = conv2d(a.reshape(1, 4, 6, 40), b.reshape(1, 1, 40, 20), allow_tf32=True, **BLOCKS)
        R.check(c.reshape(24, 20), R.gemm(trunc(a), trunc(b)), rtol=1e-5)


@pytest.mark.parametrize("dtype", HALF, ids=IDS)
def test_tf32_flag_is_ignored_by_16bit_products(device, rng, dtype):
    a, b = randn(rng, 17, 33, dtype=dtype, device=device), randn(rng, 33, 18, dtype=dtype, device=device)
    y = gemm(a, b, allow_tf32=True, out_dtype=torch.float32, **BLOCKS)
    R.check(y, R.gemm(a, b))                                   # exact products, f32 accumulation


def test_lrn_sums_squares_in_f32_bf16(device):
    """bf16 has f32's range, so overflow cannot show it: a sum of squares rounded to bf16 at every
    step would lose the small terms (1 + 4 * 2^-9 stays 1 in bf16)."""
    x = torch.tensor([[1.0, 2 ** -4.5, 2 ** -4.5, 2 ** -4.5, 2 ** -4.5]], dtype=torch.bfloat16, device=device)
    y = lrn(x, 5, 5.0, 1.0, 1e-6, out_dtype=torch.float32)   # about x / sum(x^2) over the window
    R.check(y, R.lrn(x, 5, 5.0, 1.0, 1e-6))


# --------------------------------------------------------------------------- AOT: 16-bit cubins

SIXTEEN_BIT = ["gemm_f16_bn_res_sigmoid", "gemm_bf16_tanh", "conv_f16_11x11_flat", "conv_bf16_1x1_bn_res_concat",
               "maxpool_bf16", "avgpool_f16_same", "lrn_f16", "lrn_bf16", "softmax_f16", "softmax_bf16_to_f32",
               "elementwise_chain_bf16_bn_f32", "elementwise_chain_f16", "gemm_f32_tf32_relu"]


# sm_90 compiles every representative call in tests/kernels/test_aot_compile.py; here only two
# (with their instructions checked), to keep the time down
ARCH_KERNELS = {80: SIXTEEN_BIT, 90: ["gemm_bf16_tanh", "conv_f16_11x11_flat"]}


@pytest.mark.parametrize("arch", [80, 90])
def test_16bit_and_tf32_kernels_compile_to_cubins(tmp_path, arch, nvidia_toolchain):
    """The f16/bf16 (and TF32) specializations compile for sm_80 and sm_90 without a GPU, and their
    tensor-core instructions multiply 16-bit (or TF32) operands into an f32 accumulator."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    nvidia_toolchain(arch)
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    env["PYTHONPATH"] = os.pathsep.join([str(root)] + [p for p in [env.get("PYTHONPATH")] if p])
    p = subprocess.run([sys.executable, "-m", "netc.kernels.aot", "--json", "--arch", str(arch), "--only",
                        *ARCH_KERNELS[arch]], cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"AOT compilation failed:\n{p.stdout}\n{p.stderr[-4000:]}"
    ks = json.loads(p.stdout.strip().splitlines()[-1])["kernels"]
    assert set(ks) == set(ARCH_KERNELS[arch])
    for name, k in ks.items():
        assert k["elf"] and k["cubin_bytes"] > 1000 and k["ptx_params"] == k["params"] + 2, (name, k)
    mma = {n: " ".join(k["mma"]) for n, k in ks.items()}
    # sm_80: mma.sync....f32.bf16.bf16.f32 (D, A, B, C); sm_90: wgmma....f32.bf16.bf16 (D, A, B)
    for name, ab in (("gemm_bf16_tanh", "bf16"), ("conv_bf16_1x1_bn_res_concat", "bf16"),
                     ("gemm_f16_bn_res_sigmoid", "f16"), ("conv_f16_11x11_flat", "f16"),
                     ("gemm_f32_tf32_relu", "tf32")):
        if name in mma:
            assert f".f32.{ab}.{ab}" in mma[name], (name, mma[name])
    assert not any(mma[n] for n in ks if not n.startswith(("gemm", "conv"))), mma
