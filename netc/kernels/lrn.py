"""Local response normalization across channels (the last NHWC axis):

    y[p, c] = x[p, c] / (knorm + alpha / local_size * sum_{c' = c - n//2 .. c + n//2} x[p, c']^2) ^ beta

with the window clipped at the first and last channel. Each program takes BLOCK_P pixels x BLOCK_C
channels and reads the LOCAL_SIZE shifted channel windows (they hit in L1/L2). The power is
exp2(-beta * log2(base)), so base must be positive (knorm > 0, as in every network that uses LRN).
Input and output may be channel slices of wider buffers (evenly spaced pixels, contiguous channels).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import KernelCall, channel_slice, finish, check_float, row_stride


@triton.jit
def lrn_kernel(x_ptr, out_ptr, P, C, stride_xp, stride_op, alpha_over_n, beta, knorm,
               LOCAL_SIZE: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    pid_p = tl.program_id(0)
    pid_c = tl.program_id(1)
    offs_p = (pid_p * BLOCK_P + tl.arange(0, BLOCK_P)).to(tl.int64)
    offs_c = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_p = offs_p < P
    mask_c = offs_c < C
    rows = x_ptr + offs_p[:, None] * stride_xp
    sq = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    for d in range(LOCAL_SIZE):
        c = offs_c + (d - LOCAL_SIZE // 2)
        v = tl.load(rows + c[None, :], mask=mask_p[:, None] & ((c >= 0) & (c < C))[None, :], other=0.0)
        v = v.to(tl.float32)
        sq += v * v
    m = mask_p[:, None] & mask_c[None, :]
    x = tl.load(rows + offs_c[None, :], mask=m, other=0.0).to(tl.float32)
    base = knorm + alpha_over_n * sq
    y = x * tl.exp2(-beta * tl.log2(base))
    tl.store(out_ptr + offs_p[:, None] * stride_op + offs_c[None, :], y.to(out_ptr.dtype.element_ty), mask=m)


def lrn(x: torch.Tensor, local_size: int = 5, alpha: float = 1e-4, beta: float = 0.75, knorm: float = 1.0, *,
        out=None, out_channel_offset=0, out_dtype=None, block_p=None, block_c=None, num_warps=4, launch=True):
    """netc's lrn over the last axis of x (any rank >= 1). Writes channels [out_channel_offset, +C)
    of `out` when given (zero-copy concatenation); returns the written view."""
    check_float(x, "x")
    if local_size <= 0 or local_size % 2 == 0:
        raise ValueError(f"local_size must be a positive odd number, got {local_size}")
    c = x.shape[-1]
    p = x.numel() // c
    stride_xp = row_stride(x, "x")
    o = channel_slice(out, tuple(x.shape), out_channel_offset, out_dtype or x.dtype, x.device)
    block_c = block_c or min(128, triton.next_power_of_2(c))
    if block_p is None:
        block_p = min(max(1, 2048 // block_c), triton.next_power_of_2(p))
    grid = (triton.cdiv(p, block_p), triton.cdiv(c, block_c))
    return finish(KernelCall(lrn_kernel, grid, (
        x, o, p, c, stride_xp, row_stride(o, "out"), float(alpha) / local_size, float(beta), float(knorm)),
        dict(LOCAL_SIZE=local_size, BLOCK_P=block_p, BLOCK_C=block_c), dict(num_warps=num_warps), o), launch)
