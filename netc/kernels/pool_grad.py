"""Pooling gradients over NHWC, gather-style: a program takes BLOCK_P *input* pixels x BLOCK_C
channels and sums what every window containing them sends back, so overlapping windows need no
atomics and every input element is written exactly once (zero where no window reaches it).

The windows containing input row ih are oh in [floor((ih + PH - KH) / SH) + 1, floor((ih + PH) / SH)]
within [0, OH): at most cdiv(KH, SH) of them, walked from the last one down (likewise columns).

    maxpool_grad   each window's gradient goes to its maximum, recomputed from the forward input x:
                   the first in row-major window order among equal values (strictly greater wins),
                   over in-bounds elements only (padding never wins), as reference.maxpool_grad.
    avgpool_grad   each window's gradient divided by its count of in-bounds elements (KH*KW with
                   count_include_pad), as reference.avgpool_grad.
    upsample2d_grad  dy summed over each fh x fw block.

Inputs and outputs are NHWC with contiguous channels and any pixel strides (channel slices of
concatenation buffers); everything is computed in fp32 and stored in the output's dtype.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import KernelCall, channel_slice, check_float, finish, pair, window_geometry


@triton.jit
def pool_grad_kernel(x_ptr, dy_ptr, out_ptr,
                     NB, H, W, C, OH, OW, PH, PW, OFF_H, OFF_W,
                     stride_xn, stride_xh, stride_xw, stride_yn, stride_yh, stride_yw,
                     stride_on, stride_oh, stride_ow,
                     KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
                     IS_MAX: tl.constexpr, COUNT_INCLUDE_PAD: tl.constexpr,
                     BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    pid_p = tl.program_id(0)
    pid_c = tl.program_id(1)
    P = NB * H * W
    offs_p = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)
    offs_c = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_p = offs_p < P
    mask_c = offs_c < C
    iw = offs_p % W
    t = offs_p // W
    ih = t % H
    img = t // H
    img64 = img.to(tl.int64)
    # the last window containing ih: floor((ih + PH) / SH); OFF_H (a multiple of SH, >= -PH) keeps it exact
    oh_last = (ih + PH + OFF_H) // SH - OFF_H // SH
    ow_last = (iw + PW + OFF_W) // SW - OFF_W // SW

    acc = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    # loops, not unrolled (tl.static_range): a 7x7 max pool at stride 1 would unroll 49 windows x 49
    # recomputed loads -- minutes of Triton compile for ResNet-50's last pool, 0.6 s as loops
    for a in range((KH + SH - 1) // SH):
        oh = oh_last - a
        top = oh * SH - PH                        # the window's first row
        ok_h = mask_p & (oh >= 0) & (oh < OH) & (ih - top < KH)
        for b in range((KW + SW - 1) // SW):
            ow = ow_last - b
            left = ow * SW - PW
            ok = ok_h & (ow >= 0) & (ow < OW) & (iw - left < KW)
            m = ok[:, None] & mask_c[None, :]
            if IS_MAX:
                # the window's first maximum, recomputed: is it this element?
                best = tl.full((BLOCK_P, BLOCK_C), float("-inf"), dtype=tl.float32)
                arg = tl.full((BLOCK_P, BLOCK_C), -1, dtype=tl.int32)
                for dh in range(KH):
                    hh = top + dh
                    ok_hh = ok & (hh >= 0) & (hh < H)
                    for dw in range(KW):
                        ww = left + dw
                        inb = ok_hh & (ww >= 0) & (ww < W)
                        v = tl.load((x_ptr + img64 * stride_xn + hh * stride_xh + ww * stride_xw)[:, None]
                                    + offs_c[None, :], mask=inb[:, None] & mask_c[None, :],
                                    other=float("-inf")).to(tl.float32)
                        better = v > best
                        best = tl.where(better, v, best)
                        arg = tl.where(better, dh * KW + dw, arg)
                mine = arg == ((ih - top) * KW + (iw - left))[:, None]
                g = tl.load((dy_ptr + img64 * stride_yn + oh * stride_yh + ow * stride_yw)[:, None]
                            + offs_c[None, :], mask=m & mine, other=0.0).to(tl.float32)
                acc += g
            else:
                g = tl.load((dy_ptr + img64 * stride_yn + oh * stride_yh + ow * stride_yw)[:, None]
                            + offs_c[None, :], mask=m, other=0.0).to(tl.float32)
                if COUNT_INCLUDE_PAD:
                    acc += g / (KH * KW)
                else:
                    rows = tl.minimum(top + KH, H) - tl.maximum(top, 0)
                    cols = tl.minimum(left + KW, W) - tl.maximum(left, 0)
                    cnt = tl.maximum(rows * cols, 1).to(tl.float32)
                    acc += g / cnt[:, None]

    o_ptrs = (out_ptr + img64[:, None] * stride_on + ih[:, None] * stride_oh + iw[:, None] * stride_ow
              + offs_c[None, :])
    tl.store(o_ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask_p[:, None] & mask_c[None, :])


@triton.jit
def upsample2d_grad_kernel(dy_ptr, out_ptr, NB, H, W, C,
                           stride_yn, stride_yh, stride_yw, stride_on, stride_oh, stride_ow,
                           FH: tl.constexpr, FW: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    pid_p = tl.program_id(0)
    pid_c = tl.program_id(1)
    offs_p = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)
    offs_c = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_p = offs_p < NB * H * W
    mask_c = offs_c < C
    m = mask_p[:, None] & mask_c[None, :]
    j = offs_p % W
    t = offs_p // W
    i = t % H
    img64 = (t // H).to(tl.int64)
    acc = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    for a in tl.static_range(FH):
        for b in tl.static_range(FW):
            p = dy_ptr + img64 * stride_yn + (i * FH + a) * stride_yh + (j * FW + b) * stride_yw
            acc += tl.load(p[:, None] + offs_c[None, :], mask=m, other=0.0).to(tl.float32)
    o = out_ptr + img64 * stride_on + i * stride_oh + j * stride_ow
    tl.store(o[:, None] + offs_c[None, :], acc.to(out_ptr.dtype.element_ty), mask=m)


def _nhwc(t, what):
    if t.dim() != 4:
        raise ValueError(f"{what} must be NHWC (rank 4), got {list(t.shape)}")
    check_float(t, what)
    if t.shape[3] > 1 and t.stride(3) != 1:
        raise ValueError(f"{what} needs contiguous channels, got strides {t.stride()}")


def _tiles(p, c, block_p, block_c):
    block_c = block_c or min(128, triton.next_power_of_2(max(c, 1)))
    if block_p is None:  # about 2048 outputs per program, fewer for tiny problems
        block_p = min(max(1, 2048 // block_c), triton.next_power_of_2(max(p, 1)))
    return block_p, block_c


def _pool_grad(x, dy, input_shape, ksize, strides, padding, is_max, count_include_pad, out, out_channel_offset,
               out_dtype, block_p, block_c, num_warps, launch):
    _nhwc(dy, "dy")
    nb, h, w, c = (int(v) for v in input_shape)
    kh, kw = pair(ksize, "ksize")
    sh, sw = pair(strides, "strides")
    oh, ow, ph, pw = window_geometry(h, w, kh, kw, sh, sw, padding)
    if tuple(dy.shape) != (nb, oh, ow, c):
        raise ValueError(f"dy {list(dy.shape)} is not the pooling output [{nb}, {oh}, {ow}, {c}] of input "
                         f"{[nb, h, w, c]}")
    o = channel_slice(out, (nb, h, w, c), out_channel_offset, out_dtype or dy.dtype, dy.device)
    if c > 1 and o.stride(3) != 1:
        raise ValueError(f"out needs contiguous channels, got strides {o.stride()}")
    xs = (x.stride(0), x.stride(1), x.stride(2)) if x is not None else (0, 0, 0)
    off_h = sh * triton.cdiv(max(-ph, 0), sh)
    off_w = sw * triton.cdiv(max(-pw, 0), sw)
    block_p, block_c = _tiles(nb * h * w, c, block_p, block_c)
    grid = (triton.cdiv(nb * h * w, block_p), triton.cdiv(c, block_c))
    return finish(KernelCall(pool_grad_kernel, grid, (
        x if x is not None else dy, dy, o, nb, h, w, c, oh, ow, ph, pw, off_h, off_w, *xs,
        dy.stride(0), dy.stride(1), dy.stride(2), o.stride(0), o.stride(1), o.stride(2)), dict(
        KH=kh, KW=kw, SH=sh, SW=sw, IS_MAX=bool(is_max), COUNT_INCLUDE_PAD=bool(count_include_pad),
        BLOCK_P=block_p, BLOCK_C=block_c), dict(num_warps=num_warps), o), launch)


def maxpool_grad(x: torch.Tensor, dy: torch.Tensor, ksize, strides=(1, 1, 1, 1), padding="VALID", *, out=None,
                 out_channel_offset=0, out_dtype=None, block_p=None, block_c=None, num_warps=4, launch=True):
    """netc.maxpool_grad: the forward input x [N, H, W, C] and dy [N, OH, OW, C] -> dx of x's shape
    (ksize/strides [1, kh, kw, 1] or (kh, kw), padding VALID | SAME | [ph, pw], the forward's).
    Writes channels [out_channel_offset, +C) of `out` when given, else a new tensor (default dy's
    dtype); returns the written view."""
    _nhwc(x, "x")
    return _pool_grad(x, dy, x.shape, ksize, strides, padding, True, False, out, out_channel_offset, out_dtype,
                      block_p, block_c, num_warps, launch)


def avgpool_grad(dy: torch.Tensor, input_shape, ksize, strides=(1, 1, 1, 1), padding="VALID", *,
                 count_include_pad=False, out=None, out_channel_offset=0, out_dtype=None, block_p=None,
                 block_c=None, num_warps=4, launch=True):
    """netc.avgpool_grad: dy [N, OH, OW, C] -> dx of input_shape [N, H, W, C] (padding excluded from the
    counts unless count_include_pad); otherwise as maxpool_grad."""
    return _pool_grad(None, dy, input_shape, ksize, strides, padding, False, count_include_pad, out,
                      out_channel_offset, out_dtype, block_p, block_c, num_warps, launch)


def upsample2d_grad(dy: torch.Tensor, ksize, *, out=None, out_channel_offset=0, out_dtype=None, block_p=None,
                    block_c=None, num_warps=4, launch=True):
    """netc.upsample2d_grad: dy [N, H*fh, W*fw, C] summed over each fh x fw block -> [N, H, W, C]
    (ksize [1, fh, fw, 1] or (fh, fw)); `out` as maxpool_grad's."""
    _nhwc(dy, "dy")
    fh, fw = pair(ksize, "ksize")
    nb, hh, ww, c = dy.shape
    if fh <= 0 or fw <= 0 or hh % fh or ww % fw:
        raise ValueError(f"dy {list(dy.shape)} is not an upsampling output by {fh}x{fw}")
    h, w = hh // fh, ww // fw
    o = channel_slice(out, (nb, h, w, c), out_channel_offset, out_dtype or dy.dtype, dy.device)
    if c > 1 and o.stride(3) != 1:
        raise ValueError(f"out needs contiguous channels, got strides {o.stride()}")
    block_p, block_c = _tiles(nb * h * w, c, block_p, block_c)
    grid = (triton.cdiv(nb * h * w, block_p), triton.cdiv(c, block_c))
    return finish(KernelCall(upsample2d_grad_kernel, grid, (
        dy, o, nb, h, w, c, dy.stride(0), dy.stride(1), dy.stride(2), o.stride(0), o.stride(1), o.stride(2)),
        dict(FH=fh, FW=fw, BLOCK_P=block_p, BLOCK_C=block_c), dict(num_warps=num_warps), o), launch)
