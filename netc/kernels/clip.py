"""netc.clip and its gradient (ops/activation.py Clip, ClipGrad) over any tensor whose channels (last axis)
are contiguous and whose rows are evenly spaced (a channel slice of a concatenation buffer).

The forward is an elementwise chain (kernels/elementwise.py) of steps that chain already has:
max(x, min), then min(., max) as -max(-., -max) -- negation is exact, so the result is exactly
min(max(x, min), max). The gradient is a kernel of its own: dy where min <= x <= max, else 0
(torch.clamp's convention), computed in fp32 and stored in dx's dtype.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import KernelCall, channel_slice, check_float, finish, row_stride
from .elementwise import elementwise_chain


def clip_steps(lo: float, hi: float) -> list:
    """The elementwise chain's steps computing min(max(x, lo), hi)."""
    return [("max", float(lo)), ("mul", -1.0), ("max", -float(hi)), ("mul", -1.0)]


def clip(x: torch.Tensor, lo: float, hi: float, **kw):
    """min(max(x, lo), hi), elementwise (elementwise_chain's keywords: out, out_channel_offset, block, launch)."""
    return elementwise_chain(x, clip_steps(lo, hi), **kw)


@triton.jit
def clip_grad_kernel(x_ptr, dy_ptr, dx_ptr, NUMEL, C, stride_x, stride_dy, stride_dx, lo, hi,
                     BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < NUMEL
    row = (offs // C).to(tl.int64)
    col = offs % C
    x = tl.load(x_ptr + row * stride_x + col, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * stride_dy + col, mask=mask, other=0.0).to(tl.float32)
    dx = tl.where((x >= lo) & (x <= hi), dy, 0.0)
    tl.store(dx_ptr + row * stride_dx + col, dx.to(dx_ptr.dtype.element_ty), mask=mask)


def clip_grad(x: torch.Tensor, dy: torch.Tensor, lo: float, hi: float, *, out=None, block=1024, num_warps=4,
              launch=True):
    """netc.clip_grad: dy where lo <= x <= hi, else 0; x and dy of one shape."""
    check_float(x, "x")
    check_float(dy, "dy")
    if tuple(x.shape) != tuple(dy.shape):
        raise ValueError(f"x {list(x.shape)} and dy {list(dy.shape)} differ")
    if x.dim() == 0:
        x, dy, out = x.reshape(1), dy.reshape(1), (out.reshape(1) if out is not None else None)
    o = channel_slice(out, tuple(x.shape), 0, dy.dtype, dy.device)
    numel = x.numel()
    block = min(block, triton.next_power_of_2(max(numel, 1)))
    return finish(KernelCall(clip_grad_kernel, (triton.cdiv(numel, block),), (
        x, dy, o, numel, x.shape[-1], row_stride(x, "x"), row_stride(dy, "dy"), row_stride(o, "dx"), float(lo),
        float(hi)), dict(BLOCK=block), dict(num_warps=num_warps), o), launch)
