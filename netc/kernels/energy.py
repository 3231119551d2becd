"""Contrastive divergence's kernels (netc/ops/energy.py: SINGA's CD-k for RBMs): the hidden units'
sample, the visible units' reconstruction, the update statistics and the reconstruction error.

* rbm_sample: element j (row-major over h [B, H]) of the sample draws from Triton's counter-based
  Philox at counter base + j, base = salt * 2**32 + offset as the dropout mask's (kernels/dropout.py
  philox_base): binary 1 where tl.rand < h, else 0; Gaussian h + tl.randn. These are the numbers the
  reference draws (ops/energy.py rbm_sample), so the interpreter's samples are the reference's.
* rbm_reconstruct: sigmoid(hs W^T + bv), gemm (kernels/gemm.py) on W's transposed view.
* rbm_statistics: the weight's (vk^T hk - v0^T h0) / B as one GEMM-shaped kernel whose reduction runs
  over the batch and accumulates both products; the biases' column sums of (neg - pos) / B.
* rbm_error: sum((v0 - v1)^2) / B, one program adding the batch's elements in a fixed order.

Rows are [B, features] with contiguous features (v0 of any rank is viewed [B, V] without a copy).
Accumulation is fp32; inputs fp32, fp16 or bf16.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import KernelCall, check_float, finish, mma, pow2_at_least, row_stride, tf32_mode
from .dropout import philox_base
from .gemm import gemm


@triton.jit
def rbm_sample_kernel(h_ptr, seed_ptr, out_ptr, NUMEL, C, stride_h, stride_o, base,
                      GAUSSIAN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < NUMEL
    seed = tl.load(seed_ptr)
    row = offs // C
    col = offs % C
    h = tl.load(h_ptr + row * stride_h + col, mask=mask, other=0.0).to(tl.float32)
    if GAUSSIAN:
        s = h + tl.randn(seed, base.to(tl.int64) + offs)
    else:
        s = tl.where(tl.rand(seed, base.to(tl.int64) + offs) < h, 1.0, 0.0)
    tl.store(out_ptr + row * stride_o + col, s.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rbm_weight_stats_kernel(v0_ptr, h0_ptr, vk_ptr, hk_ptr, out_ptr, B, V, H,
                            stride_v0, stride_h0, stride_vk, stride_hk, stride_o,
                            ALLOW_TF32: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            BLOCK_K: tl.constexpr):
    """out [V, H] = (vk^T hk - v0^T h0) / B: tile (pid_m, pid_n), the batch the reduction."""
    pid = tl.program_id(0)
    num_n = tl.cdiv(H, BLOCK_N)
    offs_m = ((pid // num_n) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_n = (pid % num_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_m = offs_m < V
    mask_n = offs_n < H
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, B, BLOCK_K):
        kk = (k0 + tl.arange(0, BLOCK_K)).to(tl.int64)
        mk = kk < B
        ma = mask_m[:, None] & mk[None, :]
        mb = mk[:, None] & mask_n[None, :]
        a = tl.load(vk_ptr + kk[None, :] * stride_vk + offs_m[:, None], mask=ma, other=0.0)
        b = tl.load(hk_ptr + kk[:, None] * stride_hk + offs_n[None, :], mask=mb, other=0.0)
        acc = mma(a, b, acc, ALLOW_TF32)
        a = tl.load(v0_ptr + kk[None, :] * stride_v0 + offs_m[:, None], mask=ma, other=0.0)
        b = tl.load(h0_ptr + kk[:, None] * stride_h0 + offs_n[None, :], mask=mb, other=0.0)
        acc = mma(-a, b, acc, ALLOW_TF32)
    tl.store(out_ptr + offs_m[:, None] * stride_o + offs_n[None, :], (acc / B.to(tl.float32)).to(out_ptr.dtype.element_ty),
             mask=mask_m[:, None] & mask_n[None, :])


@triton.jit
def rbm_bias_stats_kernel(pos_ptr, neg_ptr, out_ptr, B, C, stride_p, stride_n,
                          BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """out [C] = sum over the B rows of (neg - pos), over B; rows added in order."""
    offs_c = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_c = offs_c < C
    acc = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
    for r0 in range(0, B, BLOCK_R):
        rows = (r0 + tl.arange(0, BLOCK_R)).to(tl.int64)
        m = (rows < B)[:, None] & mask_c[None, :]
        p = tl.load(pos_ptr + rows[:, None] * stride_p + offs_c[None, :], mask=m, other=0.0).to(tl.float32)
        n = tl.load(neg_ptr + rows[:, None] * stride_n + offs_c[None, :], mask=m, other=0.0).to(tl.float32)
        acc += n - p
    tl.store(out_ptr + offs_c, (tl.sum(acc, axis=0) / B.to(tl.float32)).to(out_ptr.dtype.element_ty), mask=mask_c)


@triton.jit
def rbm_error_kernel(v0_ptr, v1_ptr, out_ptr, NUMEL, C, stride_0, stride_1, B, BLOCK: tl.constexpr):
    """out (a scalar) = sum((v0 - v1)^2) / B over [B, C] rows: one program, blocks in order."""
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(0, NUMEL, BLOCK):
        offs = (s + tl.arange(0, BLOCK)).to(tl.int64)
        mask = offs < NUMEL
        row = offs // C
        col = offs % C
        a = tl.load(v0_ptr + row * stride_0 + col, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(v1_ptr + row * stride_1 + col, mask=mask, other=0.0).to(tl.float32)
        acc += (a - b) * (a - b)
    tl.store(out_ptr, (tl.sum(acc, axis=0) / B.to(tl.float32)).to(out_ptr.dtype.element_ty))


# --------------------------------------------------------------------------- launchers

def batch_rows(t: torch.Tensor, what: str) -> torch.Tensor:
    """t [B, ...] viewed as [B, features] rows (no copy) with contiguous features."""
    check_float(t, what)
    if t.dim() < 1:
        raise ValueError(f"{what} needs a batch axis, got a scalar")
    n = t.shape[0]
    try:
        r = t.view(n, t.numel() // n if n else 0)
    except RuntimeError:
        raise ValueError(f"{what} {list(t.shape)} with strides {t.stride()} cannot be viewed as [B, features] "
                         f"rows without a copy") from None
    row_stride(r, what)     # contiguous features, evenly spaced rows
    return r


def _out(out, shape, dtype, device):
    if out is None:
        return torch.empty(shape, dtype=dtype, device=device)
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"out must be {list(shape)}, got {list(out.shape)}")
    return out


def _seed(seed, device):
    if torch.is_tensor(seed):
        if seed.numel() != 1 or seed.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"the seed must be a 1-element int64 (or int32) tensor, got {seed.dtype} "
                             f"{list(seed.shape)}")
        return seed
    return torch.tensor(int(seed), dtype=torch.int64, device=device)


def rbm_sample(h: torch.Tensor, seed, salt: int = 0, offset: int = 0, gaussian: bool = False, *, out=None,
               out_dtype=None, block=1024, num_warps=4, launch=True):
    """netc.rbm_sample: h [B, H] (probabilities; Gaussian units' means) and the seed (a 1-element int64
    tensor on h's device, or an int) -> the sample [B, H]: u < h ? 1 : 0 for u = tl.rand at counter
    salt * 2**32 + offset + j, or h + tl.randn at it (gaussian)."""
    hr = batch_rows(h, "h")
    n = hr.numel()
    if n + int(offset) > 2 ** 32:
        raise ValueError(f"a sample of {n} elements at offset {offset} exceeds the 2**32 counters of one salt")
    o = _out(out, tuple(h.shape), out_dtype or h.dtype, h.device)
    orows = batch_rows(o, "out")
    c = max(hr.shape[1], 1)
    block = min(block, triton.next_power_of_2(max(n, 1)))
    return finish(KernelCall(rbm_sample_kernel, (triton.cdiv(n, block),), (
        hr, _seed(seed, h.device), orows, n, c, row_stride(hr, "h"), row_stride(orows, "out"),
        philox_base(salt) + int(offset)), dict(GAUSSIAN=bool(gaussian), BLOCK=block), dict(num_warps=num_warps), o),
        launch)


def rbm_reconstruct(hs: torch.Tensor, w: torch.Tensor, bias: torch.Tensor, **kw):
    """netc.rbm_reconstruct: sigmoid(hs [B, H] @ w[V, H]^T + bias [V]) -> [B, V] (gemm, w's transposed view)."""
    if w.dim() != 2 or hs.dim() != 2 or w.shape[1] != hs.shape[1]:
        raise ValueError(f"hidden samples {list(hs.shape)} do not fit the weight {list(w.shape)} ([V, H])")
    return gemm(hs, w.t(), bias, activation="sigmoid", **kw)


def rbm_statistics(v0: torch.Tensor, h0: torch.Tensor, vk: torch.Tensor, hk: torch.Tensor, role: str = "weight", *,
                   out=None, out_dtype=None, allow_tf32=False, block_m=None, block_n=None, block_k=None,
                   block_r=None, block_c=None, num_warps=4, launch=True):
    """netc.rbm_statistics: the CD update direction of `role` from v0 [B, ...] (viewed [B, V]), h0 [B, H],
    vk [B, V], hk [B, H]: weight (vk^T hk - v0^T h0) / B [V, H]; hidden_bias sum_rows(hk - h0) / B [H];
    bias sum_rows(vk - v0) / B [V]."""
    v0r, h0r, vkr, hkr = (batch_rows(t, w) for t, w in ((v0, "v0"), (h0, "h0"), (vk, "vk"), (hk, "hk")))
    b, v = v0r.shape
    hd = h0r.shape[1]
    if tuple(vkr.shape) != (b, v) or tuple(hkr.shape) != (b, hd) or h0r.shape[0] != b:
        raise ValueError(f"CD statistics need v0 [B, V], h0 [B, H], vk [B, V], hk [B, H]; got "
                         f"{[list(t.shape) for t in (v0, h0, vk, hk)]}")
    dtype = out_dtype or v0.dtype
    if role == "weight":
        o = _out(out, (v, hd), dtype, v0.device)
        if hd > 1 and o.stride(1) != 1:
            raise ValueError(f"out needs contiguous columns, got strides {o.stride()}")
        bm = block_m or min(64, pow2_at_least(v))
        bn = block_n or min(64, pow2_at_least(hd))
        bk = block_k or min(32, pow2_at_least(b))
        grid = (triton.cdiv(v, bm) * triton.cdiv(hd, bn),)
        return finish(KernelCall(rbm_weight_stats_kernel, grid, (
            v0r, h0r, vkr, hkr, o, b, v, hd, row_stride(v0r, "v0"), row_stride(h0r, "h0"), row_stride(vkr, "vk"),
            row_stride(hkr, "hk"), o.stride(0)), dict(
            ALLOW_TF32=tf32_mode(allow_tf32), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk), dict(num_warps=num_warps), o), launch)
    if role not in ("hidden_bias", "bias"):
        raise ValueError(f"role must be weight, hidden_bias or bias, got {role!r}")
    pos, neg = (h0r, hkr) if role == "hidden_bias" else (v0r, vkr)
    c = pos.shape[1]
    o = _out(out, (c,), dtype, v0.device)
    bc = block_c or min(128, triton.next_power_of_2(max(c, 1)))
    br = block_r or max(1, min(triton.next_power_of_2(max(b, 1)), 4096 // bc))
    return finish(KernelCall(rbm_bias_stats_kernel, (triton.cdiv(c, bc),), (
        pos, neg, o, b, c, row_stride(pos, "pos"), row_stride(neg, "neg")), dict(BLOCK_R=br, BLOCK_C=bc),
        dict(num_warps=num_warps), o), launch)


def rbm_error(v0: torch.Tensor, v1: torch.Tensor, *, out=None, out_dtype=None, block=None, num_warps=4, launch=True):
    """netc.rbm_error: sum((v0 - v1)^2) / B for the data v0 [B, ...] (viewed [B, V]) and the reconstruction
    v1 [B, V]; a scalar (0-dim `out`)."""
    a, r = batch_rows(v0, "v0"), batch_rows(v1, "v1")
    if tuple(a.shape) != tuple(r.shape):
        raise ValueError(f"the reconstruction {list(v1.shape)} does not fit the data {list(v0.shape)}")
    b, c = a.shape
    o = _out(out, (), out_dtype or v0.dtype, v0.device)
    n = a.numel()
    block = block or min(4096, triton.next_power_of_2(max(n, 1)))
    return finish(KernelCall(rbm_error_kernel, (1,), (
        a, r, o, n, max(c, 1), row_stride(a, "v0"), row_stride(r, "v1"), b), dict(BLOCK=block),
        dict(num_warps=num_warps), o), launch)
