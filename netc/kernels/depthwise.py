"""Depthwise convolution over NHWC (netc.depthwise_conv2d, ops/depthwise.py) and its two gradients.

Filter [kh, kw, C, M] seen flat as [kh*kw, C*M]: output channel oc = c*M + m reads input channel oc // M.
Windows and padding are netc's (Paleo's VALID/SAME/explicit rules, kernels/common.py window_geometry):
out-of-bounds pixels read as zero.

* forward: each program takes BLOCK_P output pixels x BLOCK_C output channels and sums its kh*kw taps
  (channels contiguous: a pixel's channels load as one vector), then the bias and the fused activation
  (kernels/common.py activate); the output may be a channel slice of a concatenation buffer.
* data gradient: BLOCK_P input pixels x BLOCK_C input channels; each tap whose output pixel exists
  (the stride divides the offset) adds its M output channels' dz times the tap's weight.
* filter gradient: one program per tap and BLOCK_C output channels, summing x * dz over every output
  pixel of the batch in BLOCK_P rows at a time (a grid that does not depend on the batch).

Everything accumulates in fp32 and stores in the output's dtype.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import (KernelCall, activate, activation_code, channel_slice, check_float, dummy, finish, pair,
                     row_stride, window_geometry)


@triton.jit
def depthwise_kernel(x_ptr, w_ptr, b_ptr, out_ptr,
                     NB, H, W, CO, OH, OW, PH, PW,
                     stride_xn, stride_xh, stride_xw, stride_om, slope,
                     KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, M: tl.constexpr,
                     HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr,
                     BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    pid_p = tl.program_id(0)
    pid_c = tl.program_id(1)
    offs_p = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)
    offs_c = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_p = offs_p < NB * OH * OW
    mask_c = offs_c < CO
    ic = offs_c // M
    ow = offs_p % OW
    t = offs_p // OW
    oh = t % OH
    img = t // OH
    ih0 = oh * SH - PH
    iw0 = ow * SW - PW
    x_img = x_ptr + img.to(tl.int64) * stride_xn
    acc = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    for dh in range(KH):
        ih = ih0 + dh
        ok_h = mask_p & (ih >= 0) & (ih < H)
        for dw in range(KW):
            iw = iw0 + dw
            ok = ok_h & (iw >= 0) & (iw < W)
            ptrs = x_img[:, None] + ih[:, None] * stride_xh + iw[:, None] * stride_xw + ic[None, :]
            xv = tl.load(ptrs, mask=ok[:, None] & mask_c[None, :], other=0.0).to(tl.float32)
            wv = tl.load(w_ptr + (dh * KW + dw) * CO + offs_c, mask=mask_c, other=0.0).to(tl.float32)
            acc += xv * wv[None, :]
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_c, mask=mask_c, other=0.0).to(tl.float32)[None, :]
    acc = activate(acc, ACTIVATION, slope)
    o_ptrs = out_ptr + offs_p.to(tl.int64)[:, None] * stride_om + offs_c[None, :]
    tl.store(o_ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask_p[:, None] & mask_c[None, :])


@triton.jit
def depthwise_grad_data_kernel(dz_ptr, w_ptr, dx_ptr,
                               NB, H, W, C, OH, OW, PH, PW,
                               stride_zn, stride_zh, stride_zw, stride_dm,
                               KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
                               M: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    pid_p = tl.program_id(0)
    pid_c = tl.program_id(1)
    offs_p = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)
    offs_c = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_p = offs_p < NB * H * W
    mask_c = offs_c < C
    iw = offs_p % W
    t = offs_p // W
    ih = t % H
    img = t // H
    z_img = dz_ptr + img.to(tl.int64) * stride_zn
    acc = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    for dh in range(KH):
        th = ih + PH - dh                      # oh * SH when output row oh reads this pixel at tap dh
        th_ = tl.where(th >= 0, th, 0)
        oh = th_ // SH
        ok_h = mask_p & (th >= 0) & (th_ % SH == 0) & (oh < OH)
        for dw in range(KW):
            tw = iw + PW - dw
            tw_ = tl.where(tw >= 0, tw, 0)
            ow = tw_ // SW
            ok = ok_h & (tw >= 0) & (tw_ % SW == 0) & (ow < OW)
            m2 = ok[:, None] & mask_c[None, :]
            for m in range(M):
                oc = offs_c * M + m
                zv = tl.load(z_img[:, None] + oh[:, None] * stride_zh + ow[:, None] * stride_zw + oc[None, :],
                             mask=m2, other=0.0).to(tl.float32)
                wv = tl.load(w_ptr + (dh * KW + dw) * C * M + oc, mask=mask_c, other=0.0).to(tl.float32)
                acc += zv * wv[None, :]
    d_ptrs = dx_ptr + offs_p.to(tl.int64)[:, None] * stride_dm + offs_c[None, :]
    tl.store(d_ptrs, acc.to(dx_ptr.dtype.element_ty), mask=mask_p[:, None] & mask_c[None, :])


@triton.jit
def depthwise_grad_filter_kernel(x_ptr, dz_ptr, dw_ptr,
                                 NB, H, W, CO, OH, OW, PH, PW,
                                 stride_xn, stride_xh, stride_xw, stride_zm,
                                 KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, M: tl.constexpr,
                                 BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    tap = tl.program_id(0)
    pid_c = tl.program_id(1)
    dh = tap // KW
    dw = tap % KW
    offs_c = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_c = offs_c < CO
    ic = offs_c // M
    acc = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    P = NB * OH * OW
    for p0 in range(0, P, BLOCK_P):
        offs_p = p0 + tl.arange(0, BLOCK_P)
        mask_p = offs_p < P
        ow = offs_p % OW
        t = offs_p // OW
        oh = t % OH
        img = t // OH
        ih = oh * SH - PH + dh
        iw = ow * SW - PW + dw
        ok = mask_p & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        m2 = ok[:, None] & mask_c[None, :]
        xv = tl.load(x_ptr + img.to(tl.int64)[:, None] * stride_xn + ih[:, None] * stride_xh + iw[:, None] * stride_xw
                     + ic[None, :], mask=m2, other=0.0).to(tl.float32)
        zv = tl.load(dz_ptr + offs_p.to(tl.int64)[:, None] * stride_zm + offs_c[None, :], mask=m2,
                     other=0.0).to(tl.float32)
        acc += xv * zv
    tl.store(dw_ptr + tap * CO + offs_c, tl.sum(acc, axis=0).to(dw_ptr.dtype.element_ty), mask=mask_c)


def _geometry(x_shape, w, strides, padding):
    if len(x_shape) != 4 or w.dim() != 4 or w.shape[2] != x_shape[3]:
        raise ValueError(f"a depthwise convolution needs an NHWC input and a [kh, kw, C, M] filter, got "
                         f"{list(x_shape)} and {list(w.shape)}")
    kh, kw, c, m = w.shape
    sh, sw = pair(strides, "strides")
    oh, ow, ph, pw = window_geometry(x_shape[1], x_shape[2], kh, kw, sh, sw, padding)
    return kh, kw, c, m, sh, sw, oh, ow, ph, pw


def _tiles(rows, c, block_p, block_c):
    block_c = block_c or min(128, triton.next_power_of_2(c))
    if block_p is None:  # about 2048 elements per program, fewer for tiny problems
        block_p = min(max(1, 2048 // block_c), triton.next_power_of_2(max(rows, 1)))
    return block_p, block_c


def depthwise_conv2d(x: torch.Tensor, w: torch.Tensor, bias=None, *, strides=(1, 1, 1, 1), padding="SAME",
                     activation="none", negative_slope=0.0, out=None, out_channel_offset=0, out_dtype=None,
                     block_p=None, block_c=None, num_warps=4, launch=True):
    """netc.depthwise_conv2d: x NHWC (contiguous channels, evenly spaced pixels), w [kh, kw, C, M] contiguous,
    bias [C*M] or None, the fused activation. Writes channels [out_channel_offset, +C*M) of `out` when given."""
    check_float(x, "x")
    row_stride(x, "x")
    kh, kw, c, m, sh, sw, oh, ow, ph, pw = _geometry(x.shape, w, strides, padding)
    nb, h, wd = x.shape[0], x.shape[1], x.shape[2]
    co = c * m
    o = channel_slice(out, (nb, oh, ow, co), out_channel_offset, out_dtype or x.dtype, x.device)
    block_p, block_c = _tiles(nb * oh * ow, co, block_p, block_c)
    grid = (triton.cdiv(nb * oh * ow, block_p), triton.cdiv(co, block_c))
    return finish(KernelCall(depthwise_kernel, grid, (
        x, w, bias if bias is not None else dummy(x.device), o, nb, h, wd, co, oh, ow, ph, pw,
        x.stride(0), x.stride(1), x.stride(2), row_stride(o, "out"), float(negative_slope)), dict(
        KH=kh, KW=kw, SH=sh, SW=sw, M=m, HAS_BIAS=bias is not None, ACTIVATION=activation_code(activation),
        BLOCK_P=block_p, BLOCK_C=block_c), dict(num_warps=num_warps), o), launch)


def depthwise_conv2d_grad_data(dz: torch.Tensor, w: torch.Tensor, input_shape, strides=(1, 1, 1, 1), padding="SAME",
                               *, out=None, block_p=None, block_c=None, num_warps=4, launch=True):
    """netc.depthwise_conv2d_grad_data: dz [N, OH, OW, C*M] -> dx of input_shape [N, H, W, C] (`out`: contiguous
    channels, evenly spaced pixels)."""
    check_float(dz, "dz")
    row_stride(dz, "dz")
    kh, kw, c, m, sh, sw, oh, ow, ph, pw = _geometry(tuple(input_shape), w, strides, padding)
    nb, h, wd = input_shape[0], input_shape[1], input_shape[2]
    if tuple(dz.shape) != (nb, oh, ow, c * m):
        raise ValueError(f"dz {list(dz.shape)} is not the output of a depthwise convolution of {list(input_shape)}")
    dx = channel_slice(out, tuple(input_shape), 0, dz.dtype, dz.device)
    block_p, block_c = _tiles(nb * h * wd, c, block_p, block_c)
    grid = (triton.cdiv(nb * h * wd, block_p), triton.cdiv(c, block_c))
    return finish(KernelCall(depthwise_grad_data_kernel, grid, (
        dz, w, dx, nb, h, wd, c, oh, ow, ph, pw, dz.stride(0), dz.stride(1), dz.stride(2),
        row_stride(dx, "dx")), dict(
        KH=kh, KW=kw, SH=sh, SW=sw, M=m, BLOCK_P=block_p, BLOCK_C=block_c), dict(num_warps=num_warps), dx), launch)


def depthwise_conv2d_grad_filter(x: torch.Tensor, dz: torch.Tensor, filter_hw, strides=(1, 1, 1, 1),
                                 padding="SAME", *, out=None, block_p=None, block_c=None, num_warps=4, launch=True):
    """netc.depthwise_conv2d_grad_filter: x NHWC and dz [N, OH, OW, C*M] -> dW [kh, kw, C, M] (contiguous)."""
    check_float(x, "x")
    row_stride(x, "x")
    kh, kw = filter_hw
    nb, h, wd, c = x.shape
    m = dz.shape[3] // c if dz.dim() == 4 and c else 0
    sh, sw = pair(strides, "strides")
    oh, ow, ph, pw = window_geometry(h, wd, kh, kw, sh, sw, padding)
    if m < 1 or tuple(dz.shape) != (nb, oh, ow, c * m):
        raise ValueError(f"dz {list(dz.shape)} is not the output of a depthwise convolution of {list(x.shape)}")
    dw = torch.empty((kh, kw, c, m), dtype=x.dtype, device=x.device) if out is None else out
    co = c * m
    block_p, block_c = _tiles(nb * oh * ow, co, block_p, block_c)
    grid = (kh * kw, triton.cdiv(co, block_c))
    return finish(KernelCall(depthwise_grad_filter_kernel, grid, (
        x, dz, dw, nb, h, wd, co, oh, ow, ph, pw, x.stride(0), x.stride(1), x.stride(2), row_stride(dz, "dz")), dict(
        KW=kw, SH=sh, SW=sw, M=m, BLOCK_P=block_p, BLOCK_C=block_c), dict(num_warps=num_warps), dw), launch)
