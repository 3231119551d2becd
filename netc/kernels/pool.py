"""Max and average pooling over NHWC, with Paleo's VALID/SAME/explicit padding.

Semantics (reference.py agrees): padding never takes part. maxpool is the max over a window's
in-bounds elements; avgpool divides their sum by their count (Paleo/TensorFlow SAME behaviour),
or by KH*KW when COUNT_INCLUDE_PAD. A window with no in-bounds element gives 0.

Each program takes BLOCK_P output pixels x BLOCK_C channels; channels are contiguous, so a pixel's
channels load as one vector. The output may be a channel slice of a concatenation buffer.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import KernelCall, channel_slice, finish, check_float, pair, row_stride, window_geometry


@triton.jit
def pool2d_kernel(x_ptr, out_ptr,
                  NB, H, W, C, OH, OW, PH, PW,
                  stride_xn, stride_xh, stride_xw, stride_om,
                  KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
                  IS_MAX: tl.constexpr, COUNT_INCLUDE_PAD: tl.constexpr,
                  BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    pid_p = tl.program_id(0)
    pid_c = tl.program_id(1)
    P = NB * OH * OW
    offs_p = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)
    offs_c = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_p = offs_p < P
    mask_c = offs_c < C
    ow = offs_p % OW
    t = offs_p // OW
    oh = t % OH
    img = t // OH
    ih0 = oh * SH - PH
    iw0 = ow * SW - PW
    x_img = x_ptr + img.to(tl.int64) * stride_xn

    if IS_MAX:
        acc = tl.full((BLOCK_P, BLOCK_C), float("-inf"), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    count = tl.zeros((BLOCK_P,), dtype=tl.int32)
    for dh in range(KH):
        ih = ih0 + dh
        ok_h = mask_p & (ih >= 0) & (ih < H)
        for dw in range(KW):
            iw = iw0 + dw
            ok = ok_h & (iw >= 0) & (iw < W)
            ptrs = x_img[:, None] + ih[:, None] * stride_xh + iw[:, None] * stride_xw + offs_c[None, :]
            m = ok[:, None] & mask_c[None, :]
            if IS_MAX:
                v = tl.load(ptrs, mask=m, other=float("-inf")).to(tl.float32)
                acc = tl.maximum(acc, v)
            else:
                v = tl.load(ptrs, mask=m, other=0.0).to(tl.float32)
                acc = acc + v
            count += ok.to(tl.int32)

    if IS_MAX:
        y = tl.where(count[:, None] > 0, acc, 0.0)
    elif COUNT_INCLUDE_PAD:
        y = acc / (KH * KW)
    else:
        y = tl.where(count[:, None] > 0, acc / tl.maximum(count, 1).to(tl.float32)[:, None], 0.0)
    o_ptrs = out_ptr + offs_p.to(tl.int64)[:, None] * stride_om + offs_c[None, :]
    tl.store(o_ptrs, y.to(out_ptr.dtype.element_ty), mask=mask_p[:, None] & mask_c[None, :])


def _pool(x, ksize, strides, padding, is_max, count_include_pad, out, out_channel_offset, out_dtype,
          block_p, block_c, num_warps, launch):
    if x.dim() != 4:
        raise ValueError(f"pooling needs an NHWC input, got {list(x.shape)}")
    check_float(x, "x")
    if x.shape[3] > 1 and x.stride(3) != 1:
        raise ValueError(f"x needs contiguous channels, got strides {x.stride()}")
    nb, h, w, c = x.shape
    kh, kw = pair(ksize, "ksize")
    sh, sw = pair(strides, "strides")
    oh, ow, ph, pw = window_geometry(h, w, kh, kw, sh, sw, padding)
    o = channel_slice(out, (nb, oh, ow, c), out_channel_offset, out_dtype or x.dtype, x.device)
    block_c = block_c or min(128, triton.next_power_of_2(c))
    if block_p is None:  # about 2048 outputs per program, fewer for tiny problems
        block_p = min(max(1, 2048 // block_c), triton.next_power_of_2(nb * oh * ow))
    grid = (triton.cdiv(nb * oh * ow, block_p), triton.cdiv(c, block_c))
    return finish(KernelCall(pool2d_kernel, grid, (
        x, o, nb, h, w, c, oh, ow, ph, pw, x.stride(0), x.stride(1), x.stride(2), row_stride(o, "out")), dict(
        KH=kh, KW=kw, SH=sh, SW=sw, IS_MAX=is_max, COUNT_INCLUDE_PAD=bool(count_include_pad),
        BLOCK_P=block_p, BLOCK_C=block_c), dict(num_warps=num_warps), o), launch)


def maxpool(x: torch.Tensor, ksize, strides=(1, 1, 1, 1), padding="VALID", *, out=None,
            out_channel_offset=0, out_dtype=None, block_p=None, block_c=None, num_warps=4, launch=True):
    """netc's maxpool: x NHWC, ksize/strides [1, kh, kw, 1] (or (kh, kw)), padding VALID | SAME | [ph, pw].
    Writes channels [out_channel_offset, +C) of `out` when given; returns the written view."""
    return _pool(x, ksize, strides, padding, True, False, out, out_channel_offset, out_dtype,
                 block_p, block_c, num_warps, launch)


def avgpool(x: torch.Tensor, ksize, strides=(1, 1, 1, 1), padding="VALID", *, count_include_pad=False,
            out=None, out_channel_offset=0, out_dtype=None, block_p=None, block_c=None,
            num_warps=4, launch=True):
    """netc's avgpool (padding excluded from the average unless count_include_pad); as maxpool."""
    return _pool(x, ksize, strides, padding, False, count_include_pad, out, out_channel_offset, out_dtype,
                 block_p, block_c, num_warps, launch)
