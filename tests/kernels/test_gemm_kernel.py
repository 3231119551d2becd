"""gemm / inner_product with the fused epilogue against the float64 reference: odd sizes, strided
operands, column-slice output, every epilogue combination family, fp16/bf16. Outputs are poisoned."""
import pytest

pytest.importorskip("triton", reason="Triton is not importable; kernel tests need it")

import torch  # noqa: E402

from netc.ops import reference as R  # noqa: E402
from netc.kernels.gemm import gemm, inner_product  # noqa: E402

BLOCKS = dict(block_m=16, block_n=16, block_k=16, group_m=2)
NAN = float("nan")


def randn(gen, *shape, dtype=torch.float32, device="cpu"):
    return torch.randn(*shape, generator=gen).to(dtype).to(device)


def poisoned(shape, dtype, device):
    return torch.full(shape, NAN, dtype=dtype, device=device)


@pytest.mark.parametrize("mnk", [(1, 1, 1), (1, 5, 17), (33, 21, 29), (50, 37, 48)], ids=str)
def test_gemm_shapes(device, rng, mnk):
    m, n, k = mnk
    a, b, bias = randn(rng, m, k, device=device), randn(rng, k, n, device=device), randn(rng, n, device=device)
    out = poisoned((m, n), torch.float32, device)
    R.check(gemm(a, b, bias, out=out, **BLOCKS), R.gemm(a, b, bias))


def test_gemm_strided_operands_and_column_slice(device, rng):
    """A transposed A, B with a row stride wider than N, C a column slice of a wider buffer."""
    a = randn(rng, 23, 19, device=device).t()                  # [19, 23], strides (1, 19)
    b = randn(rng, 23, 40, device=device)[:, 3:20]             # [23, 17], row stride 40
    buf = poisoned((19, 30), torch.float32, device)
    y = gemm(a, b, out=buf[:, 5:22], activation="relu", **BLOCKS)
    R.check(y, R.gemm(a, b, activation="relu"))
    assert torch.isnan(buf[:, :5]).all() and torch.isnan(buf[:, 22:]).all(), "wrote outside its slice"


EPILOGUES = [
    dict(),
    dict(bias=True, activation="relu"),
    dict(bias=True, activation="sigmoid"),
    dict(affine=True, activation="tanh"),
    dict(bias=True, affine=True, residual=True, activation="relu"),
    dict(residual=True, residual_after_act=True, activation="sigmoid"),
    dict(bias=True, residual=True, activation="leaky_relu", negative_slope=0.2),
]


@pytest.mark.parametrize("epi", EPILOGUES, ids=lambda e: "-".join(f"{k}={v}" for k, v in e.items()) or "plain")
def test_gemm_epilogues(device, rng, epi):
    m, n, k = 19, 21, 24
    a, b = randn(rng, m, k, device=device), randn(rng, k, n, device=device)
    bias = randn(rng, n, device=device) if epi.get("bias") else None
    scale = randn(rng, n, device=device) if epi.get("affine") else None
    shift = randn(rng, n, device=device) if epi.get("affine") else None
    # the residual is a transposed view: arbitrary strides are fine for gemm
    res = randn(rng, n, m, device=device).t() if epi.get("residual") else None
    kw = dict(activation=epi.get("activation", "none"), scale=scale, shift=shift, residual=res,
              residual_after_act=epi.get("residual_after_act", False), negative_slope=epi.get("negative_slope", 0.0))
    out = poisoned((m, n), torch.float32, device)
    R.check(gemm(a, b, bias, out=out, **kw, **BLOCKS), R.gemm(a, b, bias, **kw))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gemm_half_precision(device, rng, dtype):
    m, n, k = 37, 18, 45
    a, b = randn(rng, m, k, dtype=dtype, device=device), randn(rng, k, n, dtype=dtype, device=device)
    bias, res = randn(rng, n, dtype=dtype, device=device), randn(rng, m, n, dtype=dtype, device=device)
    out = poisoned((m, n), dtype, device)
    y = gemm(a, b, bias, residual=res, activation="tanh", out=out, **BLOCKS)
    R.check(y, R.gemm(a, b, bias, residual=res, activation="tanh"), dtype)
    # fp32 output of the same 16-bit product: only accumulation error remains
    out32 = poisoned((m, n), torch.float32, device)
    R.check(gemm(a, b, bias, out=out32, **BLOCKS), R.gemm(a, b, bias))


def test_gemm_mixed_operand_dtypes(device, rng):
    """fp16 activations times fp32 weights: B is cast to A's dtype inside the kernel."""
    a = randn(rng, 9, 20, dtype=torch.float16, device=device)
    b = randn(rng, 20, 7, dtype=torch.float16, device=device).float()
    out = poisoned((9, 7), torch.float32, device)
    R.check(gemm(a, b, out=out, **BLOCKS), R.gemm(a, b))


def test_inner_product_flattens(device, rng):
    x = randn(rng, 3, 4, 5, 2, device=device)      # NHWC feature map, K = 40
    w = randn(rng, 40, 11, device=device)
    b = randn(rng, 11, device=device)
    out = poisoned((3, 11), torch.float32, device)
    R.check(inner_product(x, w, b, activation="relu", out=out, **BLOCKS), R.inner_product(x, w, b, activation="relu"))


def test_gemm_default_blocks_and_tf32(device, rng):
    a, b = randn(rng, 7, 33, device=device), randn(rng, 33, 9, device=device)
    R.check(gemm(a, b), R.gemm(a, b))
    R.check(gemm(a, b, allow_tf32=True), R.gemm(a, b), rtol=5e-3)


def test_gemm_rejects_bad_arguments(device, rng):
    a, b = randn(rng, 4, 5, device=device), randn(rng, 6, 3, device=device)
    with pytest.raises(ValueError, match="gemm needs"):
        gemm(a, b)
    with pytest.raises(ValueError, match="activation"):
        gemm(a, randn(rng, 5, 3, device=device), activation="gelu")
    with pytest.raises(TypeError, match="float32"):
        gemm(a.double(), randn(rng, 5, 3, device=device).double())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_gemm_gpu_default_blocks(device, rng, dtype):
    a = randn(rng, 300, 1000, dtype=dtype, device=device) * 0.1
    b = randn(rng, 1000, 517, dtype=dtype, device=device) * 0.1
    bias = randn(rng, 517, device=device)
    y = gemm(a, b, bias, activation="relu", allow_tf32=dtype == torch.float32)
    R.check(y, R.gemm(a, b, bias, activation="relu"), dtype, rtol=5e-3 if dtype == torch.float32 else None)


@pytest.mark.parametrize("split", [2, 3, 5])
@pytest.mark.parametrize("mnk", [(1, 5, 97), (7, 33, 200), (40, 19, 64)], ids=str)
def test_split_k(device, rng, mnk, split):
    """Split-K: chunks of K (ragged, and more chunks than BLOCK_K steps leave some empty) into the
    fp32 workspace, added in order with the epilogue (bias, folded affine, residual, activation) after
    the sum; the output a column slice. Two kernels, the same result as one."""
    m, n, k = mnk
    a, b = randn(rng, m, k, device=device), randn(rng, k, n, device=device)
    bias, scale, shift = (randn(rng, n, device=device) for _ in range(3))
    res = randn(rng, m, n, device=device)
    buf = poisoned((m, n + 6), torch.float32, device)
    kw = dict(activation="relu", scale=scale, shift=shift, residual=res, **BLOCKS)
    calls = gemm(a, b, bias, out=buf[:, 2:2 + n], split=split, launch=False, **kw)
    assert [c.kernel.__name__ for c in calls] == ["gemm_kernel", "gemm_split_reduce_kernel"]
    assert calls[0].constexprs["SPLIT"] == split and calls[0].args[2].numel() == split * m * n
    for c in calls:
        c.launch()
    R.check(buf[:, 2:2 + n], R.gemm(a, b, bias, activation="relu", scale=scale, shift=shift, residual=res))
    assert torch.isnan(buf[:, :2]).all() and torch.isnan(buf[:, 2 + n:]).all(), "wrote outside its slice"
    one = gemm(a, b, bias, **kw)
    torch.testing.assert_close(buf[:, 2:2 + n], one, rtol=1e-5, atol=1e-5)


def test_split_k_workspace(device, rng):
    a, b = randn(rng, 4, 64, device=device), randn(rng, 64, 8, device=device)
    ws = torch.full((3 * 4 * 8 + 5,), NAN, device=device)
    R.check(gemm(a, b, split=3, workspace=ws, **BLOCKS), R.gemm(a, b))
    with pytest.raises(ValueError, match="workspace must be a contiguous float32 tensor of at least 96"):
        gemm(a, b, split=3, workspace=torch.zeros(95, device=device), **BLOCKS)
    with pytest.raises(ValueError, match="split must be at least 1"):
        gemm(a, b, split=0, **BLOCKS)


def test_gemm_unit_strides_and_auto_split(device, rng):
    """gemm's UNIT_* constexprs follow the operands' strides (A K-contiguous or not, B N- or K-contiguous,
    the output's and residual's columns), each form computing the same product; split="auto" cuts K where
    the tiles are few (gemm.default_split) and stays 1 where they are many or K is short."""
    from netc.kernels.gemm import default_split, gemm
    from netc.ops import reference as R
    a = torch.randn(9, 70, generator=rng).to(device)
    b = torch.randn(70, 12, generator=rng).to(device)
    ref = a.double() @ b.double()
    for aa in (a, a.t().contiguous().t()):
        for bb in (b, b.t().contiguous().t()):
            out = torch.full((12, 9), float("nan"), device=device).t()       # columns not contiguous
            call = gemm(aa, bb, out=out, launch=False, block_m=16, block_n=16, block_k=16)
            k = call.constexprs
            assert (k["UNIT_AK"], k["UNIT_BN"], k["UNIT_BK"], k["UNIT_CN"]) == (
                aa.stride(1) == 1, bb.stride(1) == 1, bb.stride(1) != 1, False)
            call.launch()
            R.check(out, ref)
    assert default_split(128, 1000, 4096, 128, 128, 64) == 16      # AlexNet's fc8 at batch 128: 8 tiles
    assert default_split(128, 4096, 6400, 128, 128, 64) == 4       # fc6: 32 tiles
    assert default_split(4096, 4096, 4096, 128, 128, 64) == 1      # 1,024 tiles
    assert default_split(16, 64, 64, 16, 64, 64) == 1              # K too short to cut
    one = gemm(a, b, split="auto", launch=False, block_m=16, block_n=16, block_k=16)   # K = 70: 5 steps
    assert one.constexprs["SPLIT"] == 1
    a2, b2 = torch.randn(9, 300, generator=rng).to(device), torch.randn(300, 12, generator=rng).to(device)
    calls = gemm(a2, b2, split="auto", launch=False, block_m=16, block_n=16, block_k=16)  # one tile, 19 steps
    assert [c.constexprs["SPLIT"] for c in calls] == [4, 4]
    for c in calls:
        c.launch()
    R.check(calls[-1].out, a2.double() @ b2.double())


def test_gemm_3xtf32_is_about_as_accurate_as_f32(device, rng):
    """allow_tf32="tf32x3": each fp32 operand as a TF32 value plus the TF32 value of its remainder, three
    products (the interpreter's emulation, Triton's tf32x3 compiled). Against the f64 product its error is
    within a few f32 roundings of IEEE fp32's, where one TF32 product's is about 2^-11 of the values'; a
    bad mode is an error."""
    from netc.kernels.gemm import gemm
    a = torch.randn(48, 200, generator=rng).to(device)
    b = torch.randn(200, 40, generator=rng).to(device)
    ref = a.double() @ b.double()
    scale = ref.abs().max().item()
    err = {m: (gemm(a, b, allow_tf32=m, block_m=16, block_n=16, block_k=32).double() - ref).abs().max().item() / scale
           for m in (False, True, "tf32x3")}
    assert err[False] < 1e-6 and err["tf32x3"] < 4e-6, err
    assert err[True] > 30 * err["tf32x3"], err
    with pytest.raises(ValueError, match="tf32x3"):
        gemm(a, b, allow_tf32="x3")
