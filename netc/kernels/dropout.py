"""Dropout in training: netc.dropout_mask's Philox mask, x * mask, and x * mask recomputed from the
seed without the mask tensor.

The mask's element i (row-major over the mask's logical shape) keeps where u < keep_prob, with
u = tl.rand(seed, salt * 2**32 + i): Triton's Philox4x32-10 at counter (i, salt) keyed by the
64-bit seed, exactly what netc.ops.reference.dropout_mask draws (tests/test_gradients.py checks
the bits). The kept value is 1/keep_prob rounded to f32 once on the host, as the reference's f32
mask holds it. The seed is read from device memory (the training program's scalar i64 `seed`
input, a new value each step), so one compiled kernel serves every step.

Because the draw is a pure function of (seed, salt, i), the backward never needs the stored mask:
dropout_seeded(dy, seed, keep_prob, salt) is netc.dropout(dy, mask) with the same mask. A program
that recomputes it everywhere needs no mask tensor at all.

Tensors are [rows, C] (C the last axis, contiguous; rows evenly spaced: channel slices are fine).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import KernelCall, channel_slice, check_float, dummy, finish, row_stride
from .elementwise import elementwise_chain


@triton.jit
def dropout_kernel(x_ptr, seed_ptr, out_ptr, NUMEL, C, stride_x, stride_o, base, keep_prob, kept,
                   HAS_X: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < NUMEL
    seed = tl.load(seed_ptr)
    u = tl.rand(seed, base.to(tl.int64) + offs)
    m = tl.where(u < keep_prob, kept, 0.0)
    row = offs // C
    col = offs % C
    if HAS_X:
        m = m * tl.load(x_ptr + row * stride_x + col, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_o + col, m.to(out_ptr.dtype.element_ty), mask=mask)


def philox_base(salt: int) -> int:
    """The first Philox offset of a mask: salt * 2**32 as a signed int64 (reference.dropout_offsets)."""
    base = (int(salt) % 2 ** 32) << 32
    return base - 2 ** 64 if base >= 2 ** 63 else base


def _seed_tensor(seed, device):
    if torch.is_tensor(seed):
        if seed.numel() != 1 or seed.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"the seed must be a 1-element int64 (or int32) tensor, got {seed.dtype} "
                             f"{list(seed.shape)}")
        return seed
    return torch.tensor(int(seed), dtype=torch.int64, device=device)


def _dropout(x, seed, shape, keep_prob, salt, out, out_channel_offset, out_dtype, device, block, num_warps, launch,
             offset=0):
    if not 0 < keep_prob <= 1:
        raise ValueError(f"keep_prob must be in (0, 1], got {keep_prob}")
    shape = tuple(int(s) for s in shape)
    n = 1
    for s in shape:
        n *= s
    if n + offset > 2 ** 32:
        raise ValueError(f"a dropout mask of {n} elements exceeds the 2**32 counters of one salt")
    s = _seed_tensor(seed, device)
    if not shape:
        shape = (1,)
        if out is not None:
            out = out.reshape(1)
    o = channel_slice(out, shape, out_channel_offset, out_dtype, device)
    c = shape[-1]
    block = min(block, triton.next_power_of_2(max(n, 1)))
    sx = row_stride(x, "x") if x is not None else 0
    return finish(KernelCall(dropout_kernel, (triton.cdiv(n, block),), (
        x if x is not None else dummy(device), s, o, n, max(c, 1), sx, row_stride(o, "out"), philox_base(salt) + int(offset),
        float(keep_prob), float(1.0 / keep_prob)), dict(HAS_X=x is not None, BLOCK=block),
        dict(num_warps=num_warps), o), launch)


def dropout_mask(seed, shape, keep_prob: float, salt: int = 0, *, out=None, out_channel_offset=0,
                 out_dtype=torch.float32, device=None, block=1024, num_warps=4, launch=True, offset: int = 0):
    """netc.dropout_mask: the mask of `shape` (0 or 1/keep_prob) from `seed` (a 1-element int64 tensor
    on the kernel's device, or an int) and the op's salt. f32 by default (the op's result dtype)."""
    dev = device or (seed.device if torch.is_tensor(seed) else (out.device if out is not None else "cpu"))
    return _dropout(None, seed, shape, keep_prob, salt, out, out_channel_offset, out_dtype, dev, block, num_warps,
                    launch, offset)


def dropout(x: torch.Tensor, mask: torch.Tensor, **kw):
    """netc.dropout with its mask operand (training form, and its gradient: the same op on dy): x * mask,
    an elementwise chain (mask f32, x any float dtype)."""
    return elementwise_chain(x, [("mul", mask)], **kw)


def dropout_seeded(x: torch.Tensor, seed, keep_prob: float, salt: int = 0, *, out=None, out_channel_offset=0,
                   out_dtype=None, block=1024, num_warps=4, launch=True):
    """x * dropout_mask(seed, x.shape, keep_prob, salt) in one pass, the mask never stored: netc.dropout's
    training form and its gradient (dy * the same mask), from the seed and the mask op's attributes."""
    check_float(x, "x")
    return _dropout(x, seed, x.shape, keep_prob, salt, out, out_channel_offset, out_dtype or x.dtype, x.device,
                    block, num_warps, launch)
