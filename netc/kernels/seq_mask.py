"""The kernel of netc.seq_mask (netc/ops/seq_mask.py): the padding of a time-major x [T, B, ...] set to zero,
the valid steps copied; also the op's gradient.

    seq_mask_kernel   out[t, b, f] = x[t, b, f] if t < n_b else 0     (n_b = lengths[b])
                      grid (cdiv(T * B, BLOCK_M), cdiv(F, BLOCK_N)): rows r = t * B + b

A program owns a tile of rows (steps x samples) and features, so the grid's first axis grows with T
(the compiled targets' batch when the sequence is a network input) with B rows per step. Lengths are
i32 or i64 (the reference executor and the data checks reject a length outside [1, T]; here a larger one
keeps every step). Values of any float dtype (converted to out's dtype); out may be x itself (each element
is read and written by one program).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import KernelCall, check_float, finish
from .sequence import checked_lengths, steps_out, steps_view, tiles


@triton.jit
def seq_mask_kernel(x_ptr, len_ptr, out_ptr, M, B, F, stride_xt, stride_xb, stride_ot, stride_ob,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    r = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    f = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    m_r = r < M
    t = r // B
    b = r % B
    n = tl.load(len_ptr + b, mask=m_r, other=0).to(tl.int64)
    m = m_r[:, None] & (f < F)[None, :]
    v = tl.load(x_ptr + (t * stride_xt + b * stride_xb)[:, None] + f[None, :], mask=m & (t < n)[:, None], other=0.0)
    tl.store(out_ptr + (t * stride_ot + b * stride_ob)[:, None] + f[None, :], v.to(out_ptr.dtype.element_ty), mask=m)


def seq_mask(x: torch.Tensor, lengths: torch.Tensor, *, out=None, block_m=None, block_n=None, num_warps=4,
             launch=True):
    """netc.seq_mask: x [T, B, ...] (any float dtype, contiguous features) and lengths [B] (int32 / int64) ->
    [T, B, ...] in x's dtype or `out`'s (`out` may have strided steps and samples, and may be x)."""
    check_float(x, "x")
    x3, t, b, f, st, sb = steps_view(x, "x")
    if t < 1:
        raise ValueError("seq_mask needs at least one step")
    if lengths is None:
        raise TypeError("lengths must be int32 or int64, got None")
    lengths = checked_lengths(lengths, b)
    out, o3, sot, sob = steps_out(x, out)
    bm, bn = tiles(t * b, f, block_m, block_n)
    grid = (triton.cdiv(t * b, bm), triton.cdiv(max(f, 1), bn))
    return finish(KernelCall(seq_mask_kernel, grid, (x3, lengths, o3, t * b, b, f, st, sb, sot, sob),
                             dict(BLOCK_M=bm, BLOCK_N=bn), dict(num_warps=num_warps), out), launch)
