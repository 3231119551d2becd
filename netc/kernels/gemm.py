"""GEMM with a fused epilogue: C = epilogue(A @ B), for inner_product (y = x.reshape(N, K) @ W + b)
and anything else codegen lowers to a matrix product.

A [M, K], B [K, N], C [M, N] and the residual [M, N] may have any strides (C may be a column slice
of a wider buffer: zero-copy concatenation). Accumulation is fp32; inputs fp32, fp16 or bf16.

Split-K (split > 1, chosen by tuning, or split="auto": default_split): where the output has few tiles and K is long (a fully
connected layer at a small batch: VGG's fc6 is [B, 25088] @ [25088, 4096]), one program per tile
leaves most of the GPU idle. Then the K range is cut into `split` chunks: gemm_kernel computes each
(tile, chunk) into an fp32 workspace [split, M, N], and gemm_split_reduce_kernel adds a tile's
chunks in order (deterministic: no atomics) and applies the epilogue.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import (KernelCall, activation_code, check_float, dummy, epilogue, finish, grouped_tile, mma, pow2_at_least,
                     tf32_mode)


@triton.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, scale_ptr, shift_ptr, res_ptr,
                M, N, K,
                stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, stride_rm, stride_rn,
                slope,
                HAS_BIAS: tl.constexpr, HAS_AFFINE: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                RESIDUAL_AFTER_ACT: tl.constexpr, ACTIVATION: tl.constexpr, ALLOW_TF32: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                SPLIT: tl.constexpr, UNIT_AK: tl.constexpr = False, UNIT_BN: tl.constexpr = False,
                UNIT_BK: tl.constexpr = False, UNIT_CN: tl.constexpr = False, UNIT_RN: tl.constexpr = False):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    if SPLIT > 1:   # split-major: program pid_s * tiles + t computes chunk pid_s of tile t
        tiles = num_pid_m * num_pid_n
        pid_s = pid // tiles
        pid = pid % tiles
    pid_m, pid_n = grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M)

    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    mask_n = offs_n < N
    # a unit stride known at compile time (UNIT_*): Triton then sees the contiguous axis, as its JIT
    # does from a stride of 1, and loads 16-byte vectors asynchronously; a stride it only receives at
    # run time could be anything, and every element is a scalar, synchronous load
    if UNIT_AK:
        a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
        a_step = BLOCK_K
    else:
        a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
        a_step = BLOCK_K * stride_ak
    if UNIT_BN:
        b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :]
        b_step = BLOCK_K * stride_bk
    elif UNIT_BK:
        b_ptrs = b_ptr + offs_k[:, None] + offs_n[None, :] * stride_bn
        b_step = BLOCK_K
    else:
        b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
        b_step = BLOCK_K * stride_bk

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    k_lo = 0
    k_hi = K
    if SPLIT > 1:   # chunk pid_s of K (whole BLOCK_K steps)
        chunk = tl.cdiv(tl.cdiv(K, SPLIT), BLOCK_K) * BLOCK_K
        k_lo = pid_s * chunk
        k_hi = tl.minimum(K, k_lo + chunk)
        a_ptrs += (k_lo // BLOCK_K) * a_step
        b_ptrs += (k_lo // BLOCK_K) * b_step
    for k0 in range(k_lo, k_hi, BLOCK_K):
        mask_k = offs_k < k_hi - k0
        a = tl.load(a_ptrs, mask=mask_m[:, None] & mask_k[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=mask_k[:, None] & mask_n[None, :], other=0.0)
        acc = mma(a, b, acc, ALLOW_TF32)
        a_ptrs += a_step
        b_ptrs += b_step

    if SPLIT > 1:   # the raw sum into row block pid_s of the [SPLIT * M, N] workspace
        w_ptrs = c_ptr + (pid_s * M + offs_m)[:, None] * stride_cm + offs_n[None, :] * stride_cn
        tl.store(w_ptrs, acc, mask=mask_m[:, None] & mask_n[None, :])
    else:
        epilogue_store(acc, offs_m, offs_n, mask_m, mask_n, c_ptr, bias_ptr, scale_ptr, shift_ptr, res_ptr,
                       stride_cm, stride_cn, stride_rm, stride_rn, slope, HAS_BIAS, HAS_AFFINE, HAS_RESIDUAL,
                       RESIDUAL_AFTER_ACT, ACTIVATION, UNIT_CN, UNIT_RN)


@triton.jit
def epilogue_store(acc, offs_m, offs_n, mask_m, mask_n, c_ptr, bias_ptr, scale_ptr, shift_ptr, res_ptr,
                   stride_cm, stride_cn, stride_rm, stride_rn, slope,
                   HAS_BIAS: tl.constexpr, HAS_AFFINE: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                   RESIDUAL_AFTER_ACT: tl.constexpr, ACTIVATION: tl.constexpr, UNIT_CN: tl.constexpr,
                   UNIT_RN: tl.constexpr):
    """C = epilogue(acc), stored: the fused epilogue (common.py), then the tile into C. A column stride
    known to be 1 (UNIT_CN, UNIT_RN: gemm_kernel's reason) is the constant 1 here, so the residual's
    loads and C's stores are 16-byte vectors."""
    if UNIT_RN:
        rn = 1
    else:
        rn = stride_rn
    if UNIT_CN:
        cn = 1
    else:
        cn = stride_cn
    acc = epilogue(acc, offs_m, offs_n, mask_m, mask_n, bias_ptr, scale_ptr, shift_ptr, res_ptr,
                   stride_rm, rn, slope,
                   HAS_BIAS, HAS_AFFINE, HAS_RESIDUAL, RESIDUAL_AFTER_ACT, ACTIVATION)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * cn, acc.to(c_ptr.dtype.element_ty),
             mask=mask_m[:, None] & mask_n[None, :])


@triton.jit
def gemm_split_reduce_kernel(w_ptr, c_ptr, bias_ptr, scale_ptr, shift_ptr, res_ptr,
                             M, N, stride_cm, stride_cn, stride_rm, stride_rn, slope,
                             HAS_BIAS: tl.constexpr, HAS_AFFINE: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                             RESIDUAL_AFTER_ACT: tl.constexpr, ACTIVATION: tl.constexpr,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT: tl.constexpr,
                             UNIT_CN: tl.constexpr = False, UNIT_RN: tl.constexpr = False):
    """Split-K's second stage: C = epilogue(sum over s of W[s]), W the [SPLIT * M, N] fp32 workspace
    (row-major), the chunks added in order."""
    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    offs_m = ((pid // num_pid_n) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_n = (pid % num_pid_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_m = offs_m < M
    mask_n = offs_n < N
    mask = mask_m[:, None] & mask_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for s in tl.static_range(SPLIT):
        acc += tl.load(w_ptr + (s * M + offs_m)[:, None] * N + offs_n[None, :], mask=mask, other=0.0)
    epilogue_store(acc, offs_m, offs_n, mask_m, mask_n, c_ptr, bias_ptr, scale_ptr, shift_ptr, res_ptr,
                   stride_cm, stride_cn, stride_rm, stride_rn, slope, HAS_BIAS, HAS_AFFINE, HAS_RESIDUAL,
                   RESIDUAL_AFTER_ACT, ACTIVATION, UNIT_CN, UNIT_RN)


def gemm_workspace(M: int, N: int, split: int) -> int:
    """fp32 elements of split-K's workspace: split * M * N (0 when split == 1)."""
    return 0 if split <= 1 else split * M * N


# the SMs of the GPUs netc's libraries are built for (H100 SXM and H200: 132): split-K's default aims at one wave
SMS = 132


def default_split(m: int, n: int, k: int, block_m: int, block_n: int, block_k: int) -> int:
    """split="auto": where an [m, k] @ [k, n] product's tiles leave more than half of the SMs idle (a fully
    connected layer at a small batch: AlexNet's fc8 at batch 128 is 8 tiles of 128 x 128), the largest of 2,
    4, 8 and 16 that keeps the programs within one wave and every chunk at least 4 K steps long (the
    pipeline's depth); else 1. Tuning (`netc compile --autotune`) measures the others."""
    tiles = triton.cdiv(m, block_m) * triton.cdiv(n, block_n)
    best = 1
    if 2 * tiles <= SMS:
        for s in (2, 4, 8, 16):
            if tiles * s <= SMS and k >= 4 * block_k * s:
                best = s
    return best


def unit_strides(a: torch.Tensor, b: torch.Tensor) -> dict:
    """gemm_kernel's UNIT_* constexprs: which of A's K axis and B's N or K axis has stride 1 (part of the
    specialization, as Triton's JIT makes an argument equal to 1 part of its own)."""
    return dict(UNIT_AK=a.stride(1) == 1, UNIT_BN=b.stride(1) == 1, UNIT_BK=b.stride(1) != 1 and b.stride(0) == 1)


def unit_out_strides(out: torch.Tensor, residual) -> dict:
    """The UNIT_CN and UNIT_RN constexprs: whether the output's and the residual's columns are contiguous."""
    return dict(UNIT_CN=out.stride(1) == 1, UNIT_RN=residual is not None and residual.stride(1) == 1)


def default_gemm_blocks(dtype) -> dict:
    """H100-sized defaults: 128x128 tiles, K step 32 for fp32 (TF32/IEEE) and 64 for 16-bit."""
    bk = 32 if dtype == torch.float32 else 64
    return dict(block_m=128, block_n=128, block_k=bk, group_m=8, num_warps=8, num_stages=3)


def gemm(a: torch.Tensor, b: torch.Tensor, bias=None, *, activation="none", scale=None, shift=None,
         residual=None, residual_after_act=False, negative_slope=0.0, out=None, out_dtype=None,
         allow_tf32=False, block_m=None, block_n=None, block_k=None, group_m=None, num_warps=None,
         num_stages=None, split=None, workspace=None, launch=True):
    """C = epilogue(a @ b): a [M, K], b [K, N], bias/scale/shift [N], residual [M, N].

    `out` (any strides, e.g. a column slice of a concatenation buffer) receives the result; else a
    new [M, N] tensor of `out_dtype` (default a's dtype) is returned. Block sizes default to
    default_gemm_blocks(a.dtype) and shrink to the problem (never below 16, tl.dot's minimum).
    split > 1: split-K in two kernels (module docstring), with an fp32 `workspace` of
    gemm_workspace(M, N, split) elements (allocated if absent); default 1; "auto": default_split's choice.
    launch=False returns the resolved KernelCall instead of running it (for AOT compilation); with
    split > 1, the list of both."""
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"gemm needs a [M, K] and b [K, N], got {list(a.shape)} and {list(b.shape)}")
    check_float(a, "a")
    check_float(b, "b")
    M, K = a.shape
    N = b.shape[1]
    if out is None:
        out = torch.empty((M, N), dtype=out_dtype or a.dtype, device=a.device)
    elif tuple(out.shape) != (M, N):
        raise ValueError(f"out must be [{M}, {N}], got {list(out.shape)}")
    for v, what in ((bias, "bias"), (scale, "scale"), (shift, "shift")):
        if v is not None and tuple(v.shape) != (N,):
            raise ValueError(f"{what} must be [{N}], got {list(v.shape)}")
    if (scale is None) != (shift is None):
        raise ValueError("scale and shift come together (a folded batch norm); pass both")
    if residual is not None and tuple(residual.shape) != (M, N):
        raise ValueError(f"residual must be [{M}, {N}], got {list(residual.shape)}")

    d = default_gemm_blocks(a.dtype)
    block_m = block_m or min(d["block_m"], pow2_at_least(M))
    block_n = block_n or min(d["block_n"], pow2_at_least(N))
    block_k = block_k or min(d["block_k"], pow2_at_least(K))
    group_m = group_m or d["group_m"]
    split = 1 if split is None else default_split(M, N, K, block_m, block_n, block_k) if split == "auto" else int(split)
    if split < 1:
        raise ValueError(f"split must be at least 1, got {split}")
    z = dummy(a.device)
    res = residual if residual is not None else z
    units = unit_strides(a, b)
    grid = (triton.cdiv(M, block_m) * triton.cdiv(N, block_n),)
    options = dict(num_warps=num_warps or d["num_warps"], num_stages=num_stages or d["num_stages"])
    if split > 1:
        from .train_common import finish_calls, workspace_for
        ws = workspace_for(workspace, gemm_workspace(M, N, split), a.device)[:gemm_workspace(M, N, split)]
        ws = ws.view(split * M, N)
        first = KernelCall(gemm_kernel, (grid[0] * split,), (
            a, b, ws, z, z, z, z, M, N, K,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), ws.stride(0), ws.stride(1), 0, 0, 0.0), dict(
            HAS_BIAS=False, HAS_AFFINE=False, HAS_RESIDUAL=False, RESIDUAL_AFTER_ACT=False, ACTIVATION=0,
            ALLOW_TF32=tf32_mode(allow_tf32), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m,
            SPLIT=split, **units, **unit_out_strides(ws, None)), options, ws)
        rm, rn = 32, min(128, pow2_at_least(N))     # not from M: the specialization must not change with the batch
        second = KernelCall(gemm_split_reduce_kernel, (triton.cdiv(M, rm) * triton.cdiv(N, rn),), (
            ws, out, bias if bias is not None else z, scale if scale is not None else z,
            shift if shift is not None else z, res, M, N, out.stride(0), out.stride(1),
            res.stride(0) if residual is not None else 0, res.stride(1) if residual is not None else 0,
            float(negative_slope)), dict(
            HAS_BIAS=bias is not None, HAS_AFFINE=scale is not None, HAS_RESIDUAL=residual is not None,
            RESIDUAL_AFTER_ACT=bool(residual_after_act), ACTIVATION=activation_code(activation),
            BLOCK_M=rm, BLOCK_N=rn, SPLIT=split, **unit_out_strides(out, residual)), dict(num_warps=4), out)
        return finish_calls([first, second], launch)
    return finish(KernelCall(gemm_kernel, grid, (
        a, b, out, bias if bias is not None else z, scale if scale is not None else z,
        shift if shift is not None else z, res,
        M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
        res.stride(0) if residual is not None else 0, res.stride(1) if residual is not None else 0,
        float(negative_slope)), dict(
        HAS_BIAS=bias is not None, HAS_AFFINE=scale is not None, HAS_RESIDUAL=residual is not None,
        RESIDUAL_AFTER_ACT=bool(residual_after_act), ACTIVATION=activation_code(activation),
        ALLOW_TF32=tf32_mode(allow_tf32),
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m, SPLIT=1, **units,
        **unit_out_strides(out, residual)), options, out), launch)


def inner_product(x: torch.Tensor, w: torch.Tensor, bias=None, **kw) -> torch.Tensor:
    """netc's inner_product: y = x.reshape(N, K) @ w[K, M] + bias, with gemm's fused epilogue."""
    return gemm(x.reshape(x.shape[0], -1), w, bias, **kw)
