"""Numerically stable softmax over rows: netc's softmax over the flattened features of [N, ...].

One program per row. The row is read in BLOCK_N chunks twice: an online pass keeps, per lane, the
running max and the sum of exp(x - max) rescaled whenever the max grows (so rows of any length work
in registers of one chunk), then a second pass writes exp(x - max) / sum.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import KernelCall, check_float, finish


@triton.jit
def softmax_kernel(x_ptr, out_ptr, N, stride_xm, stride_om, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_xm
    o_row = out_ptr + row * stride_om
    offs = tl.arange(0, BLOCK_N)
    m_i = tl.full((BLOCK_N,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for n0 in range(0, N, BLOCK_N):
        x = tl.load(x_row + n0 + offs, mask=n0 + offs < N, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m_i, x)
        # a lane that has seen only -inf subtracts 0 instead (-inf - -inf would be nan); its l stays 0
        m_ref = tl.where(m_new > float("-inf"), m_new, 0.0)
        l_i = l_i * tl.exp(m_i - m_ref) + tl.exp(x - m_ref)
        m_i = m_new
    m = tl.max(m_i, axis=0)
    l = tl.sum(l_i * tl.exp(m_i - m), axis=0)
    inv = 1.0 / l
    for n0 in range(0, N, BLOCK_N):
        mask = n0 + offs < N
        x = tl.load(x_row + n0 + offs, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(o_row + n0 + offs, (tl.exp(x - m) * inv).to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor, *, out=None, out_dtype=None, block_n=None, num_warps=4, launch=True):
    """netc's softmax: x [N, ...] -> [N, prod(...)]; `out` may be any [N, F] view with unit column stride."""
    check_float(x, "x")
    if x.dim() < 2:
        raise ValueError(f"softmax needs an input of rank >= 2, got {list(x.shape)}")
    x2 = x.reshape(x.shape[0], -1)
    if x2.shape[1] > 1 and x2.stride(1) != 1:
        x2 = x2.contiguous()
    m, n = x2.shape
    if out is None:
        out = torch.empty((m, n), dtype=out_dtype or x.dtype, device=x.device)
    elif tuple(out.shape) != (m, n) or (n > 1 and out.stride(1) != 1):
        raise ValueError(f"out must be [{m}, {n}] with contiguous rows, got {list(out.shape)} {out.stride()}")
    block_n = block_n or min(4096, triton.next_power_of_2(n))
    return finish(KernelCall(softmax_kernel, (m,), (x2, out, n, x2.stride(0), out.stride(0)),
                             dict(BLOCK_N=block_n), dict(num_warps=num_warps), out), launch)
