"""The kernel of netc.channel_permute (netc/ops/channel_permute.py): a fixed permutation of the last
(channel) axis, a gather through the order held as a table; also the op's gradient (the inverse order).

    channel_permute_kernel   out[m, j] = x[m, order[j]]     x viewed [M, C] (M the rows: pixels, samples)
                             grid (cdiv(M, BLOCK_M), cdiv(C, BLOCK_N))

The order is an int32 tensor [C] (codegen embeds it in the library: ctx.constant). Values of any float
dtype are moved (converted to out's dtype). `out` may be a slice of a wider buffer whose rows are evenly
spaced (a channel slice of an NHWC buffer); it must not overlap x (a program reads channels another
writes).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import KernelCall, check_float, finish


@triton.jit
def channel_permute_kernel(x_ptr, order_ptr, out_ptr, M, C, stride_xm, stride_om,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    m = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    j = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    m_j = j < C
    src = tl.load(order_ptr + j, mask=m_j, other=0).to(tl.int64)
    mask = (m < M)[:, None] & m_j[None, :]
    v = tl.load(x_ptr + (m * stride_xm)[:, None] + src[None, :], mask=mask)
    tl.store(out_ptr + (m * stride_om)[:, None] + j[None, :], v.to(out_ptr.dtype.element_ty), mask=mask)


def rows_view(x: torch.Tensor, what: str):
    """x [..., C] as (M, C, row stride) with a contiguous last axis and evenly spaced rows."""
    if x.dim() < 1:
        raise ValueError(f"{what} must have a channel axis, got a scalar")
    c = x.shape[-1]
    m = x.numel() // c if c else 0
    if c > 1 and x.stride(-1) != 1:
        raise ValueError(f"{what} needs a contiguous last axis, got strides {x.stride()}")
    try:
        x2 = x.view(m, c)
    except RuntimeError:
        raise ValueError(f"{what} {list(x.shape)} with strides {x.stride()} has rows that are not evenly "
                         f"spaced") from None
    return m, c, (x2.stride(0) if m > 1 else c)


def order_tensor(order, device) -> torch.Tensor:
    """The order as the kernel's int32 table on `device`."""
    return torch.tensor([int(o) for o in order], dtype=torch.int32, device=device)


def channel_permute(x: torch.Tensor, order, *, out=None, block_m=None, block_n=None, num_warps=4, launch=True):
    """netc.channel_permute: x [..., C] (any float dtype) and `order` (a permutation of 0 .. C-1: a list, or an
    int32 tensor [C] on x's device) -> out[..., j] = x[..., order[j]] in x's dtype or `out`'s."""
    check_float(x, "x")
    m, c, sx = rows_view(x, "x")
    if not isinstance(order, torch.Tensor):
        if sorted(int(o) for o in order) != list(range(c)):
            raise ValueError(f"order must be a permutation of 0 .. {c - 1}, got {list(order)[:8]}")
        order = order_tensor(order, x.device)
    if order.dtype != torch.int32 or order.numel() != c:
        raise ValueError(f"order must be int32 [{c}], got {order.dtype} {list(order.shape)}")
    if out is None:
        out = torch.empty(tuple(x.shape), dtype=x.dtype, device=x.device)
    if tuple(out.shape) != tuple(x.shape):
        raise ValueError(f"out must be {list(x.shape)}, got {list(out.shape)}")
    check_float(out, "out")
    _, _, so = rows_view(out, "out")
    bn = int(block_n) if block_n else min(triton.next_power_of_2(max(c, 1)), 128)
    bm = int(block_m) if block_m else max(1, min(triton.next_power_of_2(max(m, 1)), 64, 4096 // bn))
    grid = (triton.cdiv(max(m, 1), bm), triton.cdiv(max(c, 1), bn))
    return finish(KernelCall(channel_permute_kernel, grid, (x, order, out, m, c, sx, so),
                             dict(BLOCK_M=bm, BLOCK_N=bn), dict(num_warps=num_warps), out), launch)
