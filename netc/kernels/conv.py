"""conv2d as an implicit GEMM over NHWC: rows M = N*OH*OW output pixels, columns = C_out, reduction
K = KH*KW*C_in in the HWIO filter's own order (kh, kw, c_in), so the filter is read as a [K, C_out]
matrix in place. Input pixels outside the image (padding) are masked to zero.

Two ways to walk K, picked by the FLAT_K constexpr:
  FLAT_K=False  one loop over (tap, C_in block) pairs, C_in in BLOCK_K steps inside each of the KH*KW
                taps: channel loads are contiguous and the bounds test is per tap. Best when
                C_in >= BLOCK_K. (One loop, not two nested ones: Triton pipelines the innermost loop.)
  FLAT_K=True   walk the flattened K in BLOCK_K steps, decoding (kh, kw, c) per element: no lanes
                wasted when C_in is small (the 3-channel first layer of an image network).

The output is written as rows of `stride_om` elements (the pixel stride) with contiguous channels,
so a producer can write straight into its channel slice of a concatenation buffer.
The fused epilogue (bias, folded batch norm, residual, activation) is gemm's: see common.py.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import (KernelCall, activation_code, finish, channel_slice, check_float, dummy, epilogue, grouped_tile, mma, pair,
                     pow2_at_least, row_stride, window_geometry, tf32_mode)


@triton.jit
def conv2d_kernel(x_ptr, w_ptr, out_ptr, bias_ptr, scale_ptr, shift_ptr, res_ptr,
                  NB, H, W, CI, OH, OW, CO, PH, PW,
                  stride_xn, stride_xh, stride_xw, stride_wk, stride_om, stride_rm,
                  slope,
                  KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
                  HAS_BIAS: tl.constexpr, HAS_AFFINE: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                  RESIDUAL_AFTER_ACT: tl.constexpr, ACTIVATION: tl.constexpr, ALLOW_TF32: tl.constexpr,
                  FLAT_K: tl.constexpr, W_KMAJOR: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    M = NB * OH * OW
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(CO, BLOCK_N)
    pid_m, pid_n = grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M)

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    mask_n = offs_n < CO
    # output pixel -> (image, row, column) and the top-left input corner of its window
    ow = offs_m % OW
    t = offs_m // OW
    oh = t % OH
    img = t // OH
    ih0 = oh * SH - PH
    iw0 = ow * SW - PW
    x_img = x_ptr + img.to(tl.int64) * stride_xn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if FLAT_K:
        K = KH * KW * CI
        for k0 in range(0, K, BLOCK_K):
            kk = k0 + offs_k
            c = kk % CI
            tap = kk // CI
            dw = tap % KW
            dh = tap // KW
            ih = ih0[:, None] + dh[None, :]
            iw = iw0[:, None] + dw[None, :]
            ok = (mask_m[:, None] & (kk < K)[None, :] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W))
            a = tl.load(x_img[:, None] + ih * stride_xh + iw * stride_xw + c[None, :], mask=ok, other=0.0)
            if W_KMAJOR:
                b = tl.load(w_ptr + offs_n.to(tl.int64)[None, :] * stride_wk + kk[:, None],
                            mask=(kk < K)[:, None] & mask_n[None, :], other=0.0)
            else:
                b = tl.load(w_ptr + kk[:, None] * stride_wk + offs_n[None, :],
                            mask=(kk < K)[:, None] & mask_n[None, :], other=0.0)
            acc = mma(a, b, acc, ALLOW_TF32)
    else:
        # one loop over (tap, channel block): Triton software-pipelines a kernel's innermost loop
        # only, and C_in is often one or a few BLOCK_K steps, so nested tap/channel loops left the
        # loads of the next step unprefetched at every tap
        ncb = tl.cdiv(CI, BLOCK_K)
        for step in range(0, KH * KW * ncb):
            tap = step // ncb
            c = (step - tap * ncb) * BLOCK_K + offs_k
            dh = tap // KW
            dw = tap - dh * KW
            ih = ih0 + dh
            iw = iw0 + dw
            ok = mask_m & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            ok_c = c < CI
            a = tl.load((x_img + ih * stride_xh + iw * stride_xw)[:, None] + c[None, :],
                        mask=ok[:, None] & ok_c[None, :], other=0.0)
            if W_KMAJOR:
                b = tl.load(w_ptr + offs_n.to(tl.int64)[None, :] * stride_wk + (tap * CI + c)[:, None],
                            mask=ok_c[:, None] & mask_n[None, :], other=0.0)
            else:
                b = tl.load(w_ptr + (tap * CI + c).to(tl.int64)[:, None] * stride_wk + offs_n[None, :],
                            mask=ok_c[:, None] & mask_n[None, :], other=0.0)
            acc = mma(a, b, acc, ALLOW_TF32)

    rows = offs_m.to(tl.int64)
    acc = epilogue(acc, rows, offs_n, mask_m, mask_n, bias_ptr, scale_ptr, shift_ptr, res_ptr,
                   stride_rm, 1, slope,
                   HAS_BIAS, HAS_AFFINE, HAS_RESIDUAL, RESIDUAL_AFTER_ACT, ACTIVATION)
    o_ptrs = out_ptr + rows[:, None] * stride_om + offs_n[None, :]
    tl.store(o_ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_n[None, :])


@triton.jit
def filter_kmajor_kernel(w_ptr, out_ptr, K, CO, stride_ok,
                         BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr):
    """out[n, k] = w[k, n]: the [K, C_out] filter matrix as rows of K (row stride stride_ok)."""
    offs_k = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_k < K)[:, None] & (offs_n < CO)[None, :]
    v = tl.load(w_ptr + offs_k.to(tl.int64)[:, None] * CO + offs_n[None, :], mask=mask)
    tl.store(out_ptr + offs_n.to(tl.int64)[None, :] * stride_ok + offs_k[:, None], v, mask=mask)


def kmajor_row(k: int) -> int:
    """The row stride (elements) of a K-major filter copy: K rounded up to 16 elements, so that every
    row starts 64-byte aligned and the conv kernel's loads of it are wide and asynchronous."""
    return -(-k // 16) * 16


def filter_kmajor(w: torch.Tensor, *, out: torch.Tensor | None = None, block_k=64, block_n=64, num_warps=4,
                  launch=True):
    """The HWIO filter w [KH, KW, C_in, C_out] as a K-major matrix [C_out, kmajor_row(K)] (K = KH*KW*C_in;
    the padding columns are not written): what conv2d reads as `w_kmajor`. Hopper's TF32 tensor-core
    instruction takes its B operand K-major only; the HWIO filter is C_out-contiguous."""
    kh, kw, ci, co = w.shape
    k = kh * kw * ci
    w2 = w.reshape(k, co)
    if w2.stride(1) != 1 or w2.stride(0) != co:
        w2 = w2.contiguous()
    kp = kmajor_row(k)
    if out is None:
        out = torch.empty((co, kp), dtype=w.dtype, device=w.device)
    elif tuple(out.shape) != (co, kp) or out.stride(1) != 1 or out.dtype != w.dtype:
        raise ValueError(f"a K-major filter copy is [{co}, {kp}] {w.dtype} with unit stride, got "
                         f"{list(out.shape)} {out.dtype} strides {out.stride()}")
    grid = (triton.cdiv(k, block_k), triton.cdiv(co, block_n))
    return finish(KernelCall(filter_kmajor_kernel, grid, (w2, out, k, co, out.stride(0)),
                             dict(BLOCK_K=block_k, BLOCK_N=block_n), dict(num_warps=num_warps), out), launch)


def default_conv_blocks(dtype) -> dict:
    """H100-sized defaults, as for gemm: 128x128 tiles, K step 32 (fp32) or 64 (fp16/bf16)."""
    bk = 32 if dtype == torch.float32 else 64
    return dict(block_m=128, block_n=128, block_k=bk, group_m=8, num_warps=8, num_stages=3)


def conv2d_geometry(x_shape, w_shape, strides, padding):
    """(oh, ow, pad_top, pad_left, sh, sw) of netc's conv2d (Paleo's rules, see common.py)."""
    kh, kw = w_shape[0], w_shape[1]
    sh, sw = pair(strides, "strides")
    oh, ow, ph, pw = window_geometry(x_shape[1], x_shape[2], kh, kw, sh, sw, padding)
    return oh, ow, ph, pw, sh, sw


def _rows_view(t: torch.Tensor, row: int):
    """t [N, H, W, C] as [N*H*W, C] rows `row` elements apart (a view), or None where its pixels are not so
    spaced. Every axis is checked whatever its length, so the view is the same form at every batch."""
    n, h, w, c = t.shape
    if (c > 1 and t.stride(3) != 1) or t.stride(2) != row or t.stride(1) != w * row or t.stride(0) != h * w * row:
        return None
    return t.as_strided((n * h * w, c), (row, 1))


def conv2d_matrix_views(x: torch.Tensor, w: torch.Tensor, strides, padding, out: torch.Tensor,
                        residual: torch.Tensor | None = None):
    """Where a convolution is a matrix product over views of its operands, (a [M, K], b [K, C_out],
    out [M, C_out], residual [M, C_out] or None); else None. Two such forms:

      whole window  the filter covers the whole unpadded input (a fully connected layer written as a
                    convolution: Paleo's fc6 is 5x5 over AlexNet's 5x5 pool5): one row per image,
                    K = H*W*C_in, where each image's pixels are contiguous;
      pointwise     a 1x1 filter at stride 1, unpadded: one row per pixel, K = C_in, where the pixels are
                    evenly spaced (a channel slice of a concatenation buffer is).

    The HWIO filter is the [K, C_out] matrix as it lies. A matrix product has no window to walk and can
    split K (gemm's split-K) where its rows are few."""
    kh, kw, ci, co = w.shape
    nb, h, wd, _ = x.shape
    oh, ow, ph, pw, sh, sw = conv2d_geometry(x.shape, w.shape, strides, padding)
    if ph or pw or tuple(out.shape) != (nb, oh, ow, co) or (co > 1 and out.stride(3) != 1):
        return None
    if kh == h and kw == wd and oh == ow == 1:
        if (ci > 1 and x.stride(3) != 1) or x.stride(2) != ci or x.stride(1) != wd * ci:
            return None
        a = x.as_strided((nb, h * wd * ci), (x.stride(0), 1))
        o = out.as_strided((nb, co), (out.stride(0), 1))
        r = None if residual is None else residual.as_strided((nb, co), (residual.stride(0), 1))
        if residual is not None and (co > 1 and residual.stride(3) != 1):
            return None
    elif kh == kw == sh == sw == 1:
        a = _rows_view(x, x.stride(2))
        o = _rows_view(out, out.stride(2))
        r = None if residual is None else _rows_view(residual, residual.stride(2))
        if a is None or o is None or (residual is not None and r is None):
            return None
    else:
        return None
    b = w.reshape(kh * kw * ci, co)
    if co > 1 and b.stride(1) != 1:
        return None
    return a, b, o, r


def conv2d(x: torch.Tensor, w: torch.Tensor, bias=None, *, strides=(1, 1, 1, 1), padding="SAME",
           activation="none", scale=None, shift=None, residual=None, residual_after_act=False,
           negative_slope=0.0, out=None, out_channel_offset=0, out_dtype=None, allow_tf32=False,
           flat_k=None, w_kmajor=None, block_m=None, block_n=None, block_k=None, group_m=None, num_warps=None,
           num_stages=None, launch=True):
    """netc's conv2d: x [N, H, W, C_in] (NHWC), w [KH, KW, C_in, C_out] (HWIO), strides [1, sh, sw, 1]
    (or (sh, sw)), padding "VALID" | "SAME" | [ph, pw]; bias/scale/shift [C_out]; residual
    [N, OH, OW, C_out] (channels contiguous, pixels evenly spaced: a channel slice is fine).

    Writes channels [out_channel_offset, +C_out) of `out` [N, OH, OW, C_total] when given (zero-copy
    concatenation), else a new tensor of `out_dtype` (default x's dtype). Returns the written view.
    flat_k=None picks FLAT_K when C_in < BLOCK_K. w_kmajor: the same filter as filter_kmajor made it
    ([C_out, >= K], unit stride along K), read instead of w (TF32 on Hopper: see filter_kmajor).
    launch=False returns the resolved KernelCall."""
    if x.dim() != 4 or w.dim() != 4:
        raise ValueError(f"conv2d needs NHWC input and HWIO filter, got {list(x.shape)} and {list(w.shape)}")
    check_float(x, "x")
    check_float(w, "w")
    nb, h, wd, ci = x.shape
    kh, kw, wci, co = w.shape
    if wci != ci:
        raise ValueError(f"filter expects {wci} input channels but the input has {ci}")
    if ci > 1 and x.stride(3) != 1:
        raise ValueError(f"x needs contiguous channels, got strides {x.stride()}")
    oh, ow, ph, pw, sh, sw = conv2d_geometry(x.shape, w.shape, strides, padding)
    shape = (nb, oh, ow, co)
    o = channel_slice(out, shape, out_channel_offset, out_dtype or x.dtype, x.device)
    stride_om = row_stride(o, "out")
    for v, what in ((bias, "bias"), (scale, "scale"), (shift, "shift")):
        if v is not None and tuple(v.shape) != (co,):
            raise ValueError(f"{what} must be [{co}], got {list(v.shape)}")
    if (scale is None) != (shift is None):
        raise ValueError("scale and shift come together (a folded batch norm); pass both")
    if residual is not None:
        if tuple(residual.shape) != shape:
            raise ValueError(f"residual must be {list(shape)}, got {list(residual.shape)}")
        stride_rm = row_stride(residual, "residual")
    else:
        stride_rm = 0
    w2 = w.reshape(kh * kw * ci, co)
    if co > 1 and w2.stride(1) != 1:
        w2 = w2.contiguous()
    if w_kmajor is not None:
        if w_kmajor.dim() != 2 or w_kmajor.shape[0] != co or w_kmajor.shape[1] < kh * kw * ci or w_kmajor.stride(1) != 1:
            raise ValueError(f"w_kmajor must be [{co}, >={kh * kw * ci}] with unit stride along K, got "
                             f"{list(w_kmajor.shape)} strides {w_kmajor.stride()}")
        w2 = w_kmajor

    d = default_conv_blocks(x.dtype)
    block_m = block_m or min(d["block_m"], pow2_at_least(nb * oh * ow))
    block_n = block_n or min(d["block_n"], pow2_at_least(co))
    if flat_k is None:
        flat_k = ci < (block_k or d["block_k"])
    block_k = block_k or min(d["block_k"], pow2_at_least(kh * kw * ci if flat_k else ci))
    group_m = group_m or d["group_m"]
    z = dummy(x.device)
    grid = (triton.cdiv(nb * oh * ow, block_m) * triton.cdiv(co, block_n),)
    return finish(KernelCall(conv2d_kernel, grid, (
        x, w2, o, bias if bias is not None else z, scale if scale is not None else z,
        shift if shift is not None else z, residual if residual is not None else z,
        nb, h, wd, ci, oh, ow, co, ph, pw,
        x.stride(0), x.stride(1), x.stride(2), w2.stride(0), stride_om, stride_rm,
        float(negative_slope)), dict(
        KH=kh, KW=kw, SH=sh, SW=sw,
        HAS_BIAS=bias is not None, HAS_AFFINE=scale is not None, HAS_RESIDUAL=residual is not None,
        RESIDUAL_AFTER_ACT=bool(residual_after_act), ACTIVATION=activation_code(activation),
        ALLOW_TF32=tf32_mode(allow_tf32), FLAT_K=bool(flat_k), W_KMAJOR=w_kmajor is not None,
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m),
        dict(num_warps=num_warps or d["num_warps"], num_stages=num_stages or d["num_stages"]), o), launch)
