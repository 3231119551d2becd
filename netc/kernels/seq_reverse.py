"""The kernel of netc.seq_reverse (netc/ops/seq_reverse.py): each sequence of a time-major x [T, B, ...]
backwards over its valid steps, padding copied through; a gather, also the op's gradient.

    seq_reverse_kernel   out[t, b, f] = x[n_b - 1 - t, b, f] if t < n_b else x[t, b, f]
                         (n_b = lengths[b] clamped to [1, T]; T without lengths)
                         grid (cdiv(T * B, BLOCK_M), cdiv(F, BLOCK_N)): rows r = t * B + b

A program owns a tile of rows (steps x samples) and features, so the grid's first axis grows with T
(the compiled targets' batch when the sequence is a network input) with B rows per step. Lengths are
i32 or i64, clamped to [1, T] (a kernel cannot raise: the reference executor and the data checks
reject a length outside [1, T]). Values of any float dtype are moved (converted to out's dtype). The
output must not overlap x (a gather reads steps another program writes).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import KernelCall, check_float, dummy, finish
from .sequence import checked_lengths, steps_out, steps_view, tiles



@triton.jit
def seq_reverse_kernel(x_ptr, len_ptr, out_ptr, M, T, B, F, stride_xt, stride_xb, stride_ot, stride_ob,
                       HAS_LEN: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    r = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    f = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    m_r = r < M
    t = r // B
    b = r % B
    if HAS_LEN:
        n = tl.load(len_ptr + b, mask=m_r, other=1).to(tl.int64)
        n = tl.minimum(tl.maximum(n, 1), T)
    else:
        n = tl.zeros(r.shape, dtype=tl.int64) + T
    src = tl.where(t < n, n - 1 - t, t)
    m = m_r[:, None] & (f < F)[None, :]
    v = tl.load(x_ptr + (src * stride_xt + b * stride_xb)[:, None] + f[None, :], mask=m)
    tl.store(out_ptr + (t * stride_ot + b * stride_ob)[:, None] + f[None, :], v.to(out_ptr.dtype.element_ty), mask=m)


def seq_reverse(x: torch.Tensor, lengths=None, *, out=None, block_m=None, block_n=None, num_warps=4, launch=True):
    """netc.seq_reverse: x [T, B, ...] (any float dtype, contiguous features) and optional lengths [B] (int32 /
    int64) -> [T, B, ...] in x's dtype or `out`'s (`out`, not overlapping x, may have strided steps and samples)."""
    check_float(x, "x")
    x3, t, b, f, st, sb = steps_view(x, "x")
    if t < 1:
        raise ValueError("seq_reverse needs at least one step")
    lengths = checked_lengths(lengths, b)
    out, o3, sot, sob = steps_out(x, out)
    bm, bn = tiles(t * b, f, block_m, block_n)
    grid = (triton.cdiv(t * b, bm), triton.cdiv(max(f, 1), bn))
    return finish(KernelCall(seq_reverse_kernel, grid, (
        x3, lengths if lengths is not None else dummy(x.device), o3, t * b, t, b, f, st, sb, sot, sob),
        dict(HAS_LEN=lengths is not None, BLOCK_M=bm, BLOCK_N=bn), dict(num_warps=num_warps), out), launch)
