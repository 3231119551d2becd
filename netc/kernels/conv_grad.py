"""The convolution and inner-product gradients: data gradient (a transposed implicit GEMM), filter
gradient (an implicit GEMM over the batch and output pixels, split deterministically), the bias
gradient, and the inner product's through gemm.py.

Data gradient, NHWC, any stride, Paleo padding (negative SAME pads too):

    dx[n, ih, iw, ci] = sum over taps (kh, kw) with oh = (ih + PH - kh) / SH, ow = (iw + PW - kw) / SW
                        integral and inside the output, and over co:  dz[n, oh, ow, co] * w[kh, kw, ci, co]

A stride-SH convolution's taps split into SH phases by kh mod SH, and only input rows with
(ih + PH) = kh (mod SH) meet the taps of phase kh mod SH. So the grid's second axis is the SH*SW
phases: a program takes BLOCK_M input pixels of one phase (ih = ih0 + SH * jh, jh < cdiv(H, SH))
x BLOCK_N input channels and walks only that phase's taps (cdiv(KH - ph, SH) of them, none when
the stride is larger than the filter: those pixels get 0) and C_out in BLOCK_K steps. No
product is masked away for the stride, every input element is written (zero where no window
reaches it), and no two programs write the same element.

Filter gradient: dW[(kh, kw, ci), co] = sum over m = (n, oh, ow) of x[n, oh*SH - PH + kh, ow*SW - PW + kw, ci]
* dz[m, co]: rows K = KH*KW*C_in, the forward's K (FLAT_K: decoded per row, for few input
channels; else one tap and a C_in block per program, contiguous loads), columns C_out, reduction over M = N*OH*OW in BLOCK_K steps. With
SPLIT > 1 the reduction is cut into SPLIT row ranges (grid axis: split-major), each written to an
fp32 workspace [SPLIT, K (+1), C_out] and added in order by train_common.sum_partials_kernel:
deterministic. The bias gradient (sum_m dz[m, co]) is fused: the first row block sums the dz
tiles it loads anyway, as an extra workspace row.

Prologue (both): `activation` + `y`: the kernel reads dy, the gradient after a fused activation,
and y, that activation's output, and uses dz = activation_grad(y, dy) (rounded to dy's dtype, as
the unfused op would store it), so the fuse pass can fold a netc.activation_grad into its
consumers. Products accumulate in fp32 (mma: TF32 only when allow_tf32).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import (KernelCall, activate, activation_code, channel_slice, check_float, dummy, finish, grouped_tile, mma,
                     pair, pow2_at_least, row_stride, window_geometry, tf32_mode)
from .gemm import gemm
from .train_common import (activation_derivative, check_prologue, column_sums, default_split,
                           finish_calls, sum_partials_call, workspace_for)


@triton.jit
def conv2d_grad_data_kernel(dz_ptr, w_ptr, out_ptr, y_ptr, yo_ptr,
                            NB, H, W, CI, OH, OW, CO, PH, PW, HJ, WJ, OFF_H, OFF_W,
                            stride_zn, stride_zh, stride_zw, stride_yn, stride_yh, stride_yw,
                            stride_won, stride_woh, stride_wow,
                            stride_wk, stride_on, stride_oh, stride_ow, slope, out_slope, grad_slope,
                            KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
                            PROLOGUE: tl.constexpr, ACTIVATION: tl.constexpr, EPILOGUE_GRAD: tl.constexpr,
                            ALLOW_TF32: tl.constexpr,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                            GROUP_M: tl.constexpr):
    MJ = NB * HJ * WJ
    pid = tl.program_id(0)
    phase = tl.program_id(1)
    ph = phase // SW                   # this program's taps: kh = ph (mod SH), kw = pw (mod SW)
    pw = phase % SW
    num_pid_m = tl.cdiv(MJ, BLOCK_M)
    num_pid_n = tl.cdiv(CI, BLOCK_N)
    pid_m, pid_n = grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M)

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mask_n = offs_n < CI
    jw = offs_m % WJ
    t = offs_m // WJ
    jh = t % HJ
    img = t // HJ
    # the first input row of the phase: (ih0 + PH) = ph (mod SH); OFF_H (a multiple of SH) keeps it >= 0
    ih0 = (ph - PH + OFF_H) % SH
    iw0 = (pw - PW + OFF_W) % SW
    ih = ih0 + jh * SH
    iw = iw0 + jw * SW
    mask_m = (offs_m < MJ) & (ih < H) & (iw < W)
    base_h = (ih0 + PH - ph) // SH      # exact division: oh = base_h + jh - th for tap kh = ph + th * SH
    base_w = (iw0 + PW - pw) // SW
    z_img = dz_ptr + img.to(tl.int64) * stride_zn
    y_img = y_ptr + img.to(tl.int64) * stride_yn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # one loop over (tap of this phase, C_out block), as conv2d's: Triton pipelines the innermost loop
    ntw = (KW - pw + SW - 1) // SW
    ncb = tl.cdiv(CO, BLOCK_K)
    for step in range(0, ((KH - ph + SH - 1) // SH) * ntw * ncb):
        tap = step // ncb
        co = (step - tap * ncb) * BLOCK_K + offs_k
        th = tap // ntw
        tw = tap - th * ntw
        kh = ph + th * SH
        kw = pw + tw * SW
        oh = base_h + jh - th
        ow = base_w + jw - tw
        ok = mask_m & (oh >= 0) & (oh < OH) & (ow >= 0) & (ow < OW)
        ok_c = co < CO
        m = ok[:, None] & ok_c[None, :]
        a = tl.load((z_img + oh * stride_zh + ow * stride_zw)[:, None] + co[None, :], mask=m, other=0.0)
        if PROLOGUE != 0:
            yv = tl.load((y_img + oh * stride_yh + ow * stride_yw)[:, None] + co[None, :], mask=m,
                         other=0.0).to(tl.float32)
            a = activation_derivative(a.to(tl.float32), yv, PROLOGUE, slope).to(dz_ptr.dtype.element_ty)
        # w^T tile: [co, ci] of the HWIO filter read as [K, C_out]
        w_tap = w_ptr + ((kh * KW + kw) * CI).to(tl.int64) * stride_wk
        b = tl.load(w_tap + offs_n[None, :] * stride_wk + co[:, None],
                    mask=ok_c[:, None] & mask_n[None, :], other=0.0)
        acc = mma(a, b, acc, ALLOW_TF32)

    acc = activate(acc, ACTIVATION, out_slope)
    if EPILOGUE_GRAD != 0:
        # dx is the gradient at the output of an activation below: store dx * act'(y) instead
        # (rounded to dx's dtype first, as the unfused activation gradient would read it)
        acc = acc.to(out_ptr.dtype.element_ty).to(tl.float32)
        yo = tl.load(yo_ptr + img.to(tl.int64)[:, None] * stride_won + ih[:, None] * stride_woh
                     + iw[:, None] * stride_wow + offs_n[None, :], mask=mask_m[:, None] & mask_n[None, :],
                     other=0.0).to(tl.float32)
        acc = activation_derivative(acc, yo, EPILOGUE_GRAD, grad_slope)
    o_ptrs = (out_ptr + img.to(tl.int64)[:, None] * stride_on + ih[:, None] * stride_oh + iw[:, None] * stride_ow
              + offs_n[None, :])
    tl.store(o_ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_n[None, :])


@triton.jit
def conv2d_grad_filter_kernel(x_ptr, dz_ptr, y_ptr, out_ptr, bias_ptr, ws_ptr,
                              NB, H, W, CI, OH, OW, CO, PH, PW,
                              stride_xn, stride_xh, stride_xw, stride_zn, stride_zh, stride_zw,
                              stride_yn, stride_yh, stride_yw, stride_ok, slope,
                              KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
                              PROLOGUE: tl.constexpr, HAS_BIAS: tl.constexpr, FLAT_K: tl.constexpr,
                              SPLIT: tl.constexpr, ALLOW_TF32: tl.constexpr,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                              GROUP_M: tl.constexpr):
    M = NB * OH * OW
    KK = KH * KW * CI
    if FLAT_K:
        num_pid_m = tl.cdiv(KK, BLOCK_M)
    else:
        num_pid_m = KH * KW * tl.cdiv(CI, BLOCK_M)
    num_pid_n = tl.cdiv(CO, BLOCK_N)
    pid = tl.program_id(0)
    tiles = num_pid_m * num_pid_n
    pid_s = pid // tiles               # split-major: the programs of one row range run together
    pid_t = pid % tiles
    pid_m, pid_n = grouped_tile(pid_t, num_pid_m, num_pid_n, GROUP_M)

    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_n = offs_n < CO
    if FLAT_K:
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)       # flattened (kh, kw, ci)
        mask_r = rows < KK
        c = rows % CI
        tap = rows // CI
        dh = tap // KW
        dw = tap % KW
    else:
        nci = tl.cdiv(CI, BLOCK_M)
        tap = pid_m // nci
        c = (pid_m % nci) * BLOCK_M + tl.arange(0, BLOCK_M)
        mask_r = c < CI
        dh = tap // KW
        dw = tap % KW
        rows = tap * CI + c
    offs_k = tl.arange(0, BLOCK_K)
    chunk = tl.cdiv(tl.cdiv(M, SPLIT), BLOCK_K) * BLOCK_K
    lo = pid_s * chunk
    hi = tl.minimum(lo + chunk, M)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    bacc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for m0 in range(lo, hi, BLOCK_K):
        offs = m0 + offs_k
        mm = offs < hi
        ow = offs % OW
        t = offs // OW
        oh = t % OH
        img = t // OH
        img64 = img.to(tl.int64)
        if FLAT_K:
            ih = (oh * SH - PH)[:, None] + dh[None, :]
            iw = (ow * SW - PW)[:, None] + dw[None, :]
            ok = mm[:, None] & mask_r[None, :] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            a = tl.load(x_ptr + img64[:, None] * stride_xn + ih * stride_xh + iw * stride_xw + c[None, :],
                        mask=ok, other=0.0)
        else:
            ih = oh * SH - PH + dh
            iw = ow * SW - PW + dw
            ok = mm & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            a = tl.load((x_ptr + img64 * stride_xn + ih * stride_xh + iw * stride_xw)[:, None] + c[None, :],
                        mask=ok[:, None] & mask_r[None, :], other=0.0)
        mz = mm[:, None] & mask_n[None, :]
        z = tl.load((dz_ptr + img64 * stride_zn + oh * stride_zh + ow * stride_zw)[:, None] + offs_n[None, :],
                    mask=mz, other=0.0)
        if PROLOGUE != 0:
            yv = tl.load((y_ptr + img64 * stride_yn + oh * stride_yh + ow * stride_yw)[:, None] + offs_n[None, :],
                         mask=mz, other=0.0).to(tl.float32)
            z = activation_derivative(z.to(tl.float32), yv, PROLOGUE, slope).to(dz_ptr.dtype.element_ty)
        if HAS_BIAS:
            bacc += tl.sum(z.to(tl.float32), axis=0)
        acc = mma(tl.trans(a), z, acc, ALLOW_TF32)

    bmask = mask_n & ((tl.zeros((BLOCK_N,), dtype=tl.int32) + pid_m) == 0)   # the first row block writes db
    rows64 = rows.to(tl.int64)
    if SPLIT == 1:
        tl.store(out_ptr + rows64[:, None] * stride_ok + offs_n[None, :], acc.to(out_ptr.dtype.element_ty),
                 mask=mask_r[:, None] & mask_n[None, :])
        if HAS_BIAS:
            tl.store(bias_ptr + offs_n, bacc.to(bias_ptr.dtype.element_ty), mask=bmask)
    else:
        if HAS_BIAS:
            ws = ws_ptr + pid_s.to(tl.int64) * (KK + 1) * CO
        else:
            ws = ws_ptr + pid_s.to(tl.int64) * KK * CO
        tl.store(ws + rows64[:, None] * CO + offs_n[None, :], acc, mask=mask_r[:, None] & mask_n[None, :])
        if HAS_BIAS:
            tl.store(ws + KK * CO + offs_n, bacc, mask=bmask)


def default_grad_blocks(dtype) -> dict:
    """H100-sized defaults, as the forward convolution's: 128x128 tiles, K step 32 (fp32) or 64 (16-bit)."""
    bk = 32 if dtype == torch.float32 else 64
    return dict(block_m=128, block_n=128, block_k=bk, group_m=8, num_warps=8, num_stages=3)


def _filter_hw(filter, w=None):
    if filter is not None:
        if len(filter) == 4:
            return int(filter[0]), int(filter[1])
        return pair(filter, "filter")
    return int(w.shape[0]), int(w.shape[1])


def _nhwc(t, what):
    if t.dim() != 4:
        raise ValueError(f"{what} must be NHWC (rank 4), got {list(t.shape)}")
    check_float(t, what)
    if t.shape[3] > 1 and t.stride(3) != 1:
        raise ValueError(f"{what} needs contiguous channels, got strides {t.stride()}")


def _y_strides(y, code):
    if not code:
        return 0, 0, 0
    if y.dim() != 4 or (y.shape[3] > 1 and y.stride(3) != 1):
        raise ValueError(f"y must be NHWC with contiguous channels, got {list(y.shape)} strides {y.stride()}")
    return y.stride(0), y.stride(1), y.stride(2)


def conv2d_grad_data(dz: torch.Tensor, w: torch.Tensor, input_shape, strides=(1, 1, 1, 1), padding="SAME", *,
                     activation="none", y=None, negative_slope=0.0, epilogue_activation="none",
                     epilogue_slope=0.0, grad_activation="none", grad_y=None, grad_slope=0.0,
                     out=None, out_channel_offset=0, out_dtype=None, allow_tf32=False,
                     block_m=None, block_n=None, block_k=None, group_m=None, num_warps=None, num_stages=None,
                     launch=True):
    """netc.conv2d_grad_data: dz [N, OH, OW, C_out] (any strides, channels contiguous), w HWIO
    [KH, KW, C_in, C_out] -> dx of input_shape [N, H, W, C_in]. strides/padding are the forward
    conv2d's (filter comes from w). Prologue: activation (+ negative_slope) and y, the fused
    activation's output: dz is then the gradient after that activation (see the module doc).
    epilogue_activation: act(dx) (a deconv2d's fused activation: deconv2d is this op).
    grad_activation (+ grad_slope) and grad_y [N, H, W, C_in] (any strides, channels contiguous): the
    epilogue of an activation gradient below: stores activation_grad(grad_y, dx), dx rounded to the
    output's dtype first (the fuse pass folds that netc.activation_grad into this op's group).

    Writes every element of channels [out_channel_offset, +C_in) of `out` [N, H, W, C_total] when
    given (any pixel strides), else of a new tensor of `out_dtype` (default dz's). Returns that view."""
    _nhwc(dz, "dz")
    check_float(w, "w")
    if w.dim() != 4:
        raise ValueError(f"w must be HWIO [kh, kw, c_in, c_out], got {list(w.shape)}")
    nb, h, wd, ci = (int(v) for v in input_shape)
    kh, kw, wci, co = w.shape
    if wci != ci or co != dz.shape[3]:
        raise ValueError(f"filter {list(w.shape)} does not fit input channels {ci} and gradient channels {dz.shape[3]}")
    sh, sw = pair(strides, "strides")
    oh, ow, ph, pw = window_geometry(h, wd, kh, kw, sh, sw, padding)
    if tuple(dz.shape) != (nb, oh, ow, co):
        raise ValueError(f"dz {list(dz.shape)} is not conv2d's output [{nb}, {oh}, {ow}, {co}] for input "
                         f"{[nb, h, wd, ci]}")
    code = check_prologue(activation, y, dz, negative_slope)
    syn, syh, syw = _y_strides(y, code)
    o = channel_slice(out, (nb, h, wd, ci), out_channel_offset, out_dtype or dz.dtype, dz.device)
    gcode = check_prologue(grad_activation, grad_y, o, grad_slope)
    gyn, gyh, gyw = _y_strides(grad_y, gcode)
    if ci > 1 and o.stride(3) != 1:
        raise ValueError(f"out needs contiguous channels, got strides {o.stride()}")
    w2 = w.reshape(kh * kw * ci, co)
    if co > 1 and w2.stride(1) != 1:
        raise ValueError(f"w needs contiguous output channels, got strides {w.stride()}")
    hj, wj = triton.cdiv(h, sh), triton.cdiv(wd, sw)
    off_h = sh * triton.cdiv(max(ph, 0), sh)
    off_w = sw * triton.cdiv(max(pw, 0), sw)

    d = default_grad_blocks(dz.dtype)
    block_m = block_m or min(d["block_m"], pow2_at_least(nb * hj * wj))
    block_n = block_n or min(d["block_n"], pow2_at_least(ci))
    block_k = block_k or min(d["block_k"], pow2_at_least(co))
    group_m = group_m or d["group_m"]
    z = dummy(dz.device)
    grid = (triton.cdiv(nb * hj * wj, block_m) * triton.cdiv(ci, block_n), sh * sw)
    return finish(KernelCall(conv2d_grad_data_kernel, grid, (
        dz, w2, o, y if code else z, grad_y if gcode else z,
        nb, h, wd, ci, oh, ow, co, ph, pw, hj, wj, off_h, off_w,
        dz.stride(0), dz.stride(1), dz.stride(2), syn, syh, syw, gyn, gyh, gyw,
        w2.stride(0), o.stride(0), o.stride(1), o.stride(2), float(negative_slope), float(epilogue_slope),
        float(grad_slope)), dict(
        KH=kh, KW=kw, SH=sh, SW=sw, PROLOGUE=code, ACTIVATION=activation_code(epilogue_activation),
        EPILOGUE_GRAD=gcode,
        ALLOW_TF32=tf32_mode(allow_tf32), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m),
        dict(num_warps=num_warps or d["num_warps"], num_stages=num_stages or d["num_stages"]), o), launch)


def conv2d_grad_filter_workspace(filter, split: int, bias: bool = False) -> int:
    """fp32 elements of conv2d_grad_filter's workspace: split * (KH*KW*C_in + bias) * C_out (0 when split == 1)."""
    kh, kw, ci, co = filter
    return 0 if split <= 1 else split * (kh * kw * ci + bool(bias)) * co


def conv2d_grad_filter(x: torch.Tensor, dz: torch.Tensor, filter=None, strides=(1, 1, 1, 1), padding="SAME", *,
                       bias=False, activation="none", y=None, negative_slope=0.0, out=None, out_dtype=None,
                       workspace=None, split=None, flat_k=None, allow_tf32=False, block_m=None, block_n=None,
                       block_k=None, group_m=None, num_warps=None, num_stages=None, launch=True):
    """netc.conv2d_grad_filter: x [N, H, W, C_in], dz [N, OH, OW, C_out] (any strides, channels
    contiguous) -> dW [KH, KW, C_in, C_out] (`filter` the op's attribute, [kh, kw, c_in, c_out] or
    (kh, kw)). bias=True (or a [C_out] tensor to write) also computes netc.bias_grad of dz, fused.
    Prologue as conv2d_grad_data's (dz is then dy of the fused activation, y its output).

    `out`: any [KH, KW, C_in, C_out] or [KH*KW*C_in, C_out] tensor with contiguous output channels
    and evenly spaced rows (a parameter gradient). split: row ranges of the reduction over
    N*OH*OW (default: enough programs for an H100, see train_common.default_split); split > 1
    needs an fp32 `workspace` of conv2d_grad_filter_workspace(...) elements (allocated if absent)
    and a second kernel. Returns dW, or (dW, db) with bias; launch=False the list of KernelCalls."""
    _nhwc(x, "x")
    _nhwc(dz, "dz")
    nb, h, wd, ci = x.shape
    co = dz.shape[3]
    kh, kw = _filter_hw(filter)
    if filter is not None and len(filter) == 4 and (filter[2] not in (ci, -1) or filter[3] != co):
        raise ValueError(f"filter {list(filter)} does not fit x channels {ci} and dz channels {co}")
    sh, sw = pair(strides, "strides")
    oh, ow, ph, pw = window_geometry(h, wd, kh, kw, sh, sw, padding)
    if tuple(dz.shape) != (nb, oh, ow, co):
        raise ValueError(f"dz {list(dz.shape)} is not conv2d's output [{nb}, {oh}, {ow}, {co}] for x {list(x.shape)}")
    code = check_prologue(activation, y, dz, negative_slope)
    syn, syh, syw = _y_strides(y, code)
    kk = kh * kw * ci
    if out is None:
        out = torch.empty((kh, kw, ci, co), dtype=out_dtype or x.dtype, device=x.device)
    elif out.numel() != kk * co or out.shape[-1] != co:
        raise ValueError(f"out must hold the filter [{kh}, {kw}, {ci}, {co}], got {list(out.shape)}")
    stride_ok = row_stride(out, "out")
    if bias is True:
        bias = torch.empty((co,), dtype=out.dtype, device=x.device)
    elif bias is False or bias is None:
        bias = None
    elif bias.numel() != co:
        raise ValueError(f"the bias gradient must be [{co}], got {list(bias.shape)}")

    d = default_grad_blocks(x.dtype)
    if flat_k is None:
        flat_k = ci < (block_m or d["block_m"])
    block_m = block_m or min(d["block_m"], pow2_at_least(kk if flat_k else ci))
    block_n = block_n or min(d["block_n"], pow2_at_least(co))
    block_k = block_k or min(d["block_k"], pow2_at_least(nb * oh * ow))
    group_m = group_m or d["group_m"]
    num_m = triton.cdiv(kk, block_m) if flat_k else kh * kw * triton.cdiv(ci, block_m)
    tiles = num_m * triton.cdiv(co, block_n)
    if split is None:
        split = default_split(nb * oh * ow, tiles, block_k)
    split = int(split)
    z = dummy(x.device)
    ws = workspace_for(workspace, conv2d_grad_filter_workspace((kh, kw, ci, co), split, bias is not None),
                       x.device) if split > 1 else z
    result = out if bias is None else (out, bias)
    first = KernelCall(conv2d_grad_filter_kernel, (tiles * split,), (
        x, dz, y if code else z, out, bias if bias is not None else z, ws,
        nb, h, wd, ci, oh, ow, co, ph, pw,
        x.stride(0), x.stride(1), x.stride(2), dz.stride(0), dz.stride(1), dz.stride(2), syn, syh, syw,
        stride_ok, float(negative_slope)), dict(
        KH=kh, KW=kw, SH=sh, SW=sw, PROLOGUE=code, HAS_BIAS=bias is not None, FLAT_K=bool(flat_k), SPLIT=split,
        ALLOW_TF32=tf32_mode(allow_tf32), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m),
        dict(num_warps=num_warps or d["num_warps"], num_stages=num_stages or d["num_stages"]), result)
    calls = [first]
    if split > 1:
        calls.append(sum_partials_call(ws, split, kk, co, out, stride_ok, bias))
    return finish_calls(calls, launch)


def bias_grad(dz: torch.Tensor, *, activation="none", y=None, negative_slope=0.0, out=None, out_dtype=None,
              workspace=None, split=None, block_r=None, block_c=None, num_warps=4, launch=True):
    """netc.bias_grad: dz [..., C] (channels contiguous, rows evenly spaced: a channel slice is fine)
    summed over every axis but the last -> [C]. Prologue as the other gradients' (dz = dy of the
    fused activation, y its output). Two-stage and deterministic (train_common); split > 1 needs an
    fp32 workspace of split * C elements. Returns [C]; launch=False the list of KernelCalls."""
    check_float(dz, "dz")
    code = check_prologue(activation, y, dz, negative_slope)
    c = dz.shape[-1] if dz.dim() else 1
    if out is None:
        out = torch.empty((c,), dtype=out_dtype or dz.dtype, device=dz.device)
    return finish_calls(column_sums(dz, y=y, activation=code, negative_slope=negative_slope, out0=out,
                                    workspace=workspace, split=split, block_r=block_r, block_c=block_c,
                                    num_warps=num_warps), launch)


# --------------------------------------------------------------------------- inner product

def _rows_view(t: torch.Tensor, what: str) -> torch.Tensor:
    n = t.shape[0]
    try:
        return t.view(n, t.numel() // n if n else 0)
    except RuntimeError:
        raise ValueError(f"{what} {list(t.shape)} with strides {t.stride()} cannot be viewed as [N, features] "
                         f"rows without a copy") from None


def inner_product_grad_data(dz: torch.Tensor, w: torch.Tensor, input_shape, *, activation="none", y=None,
                            negative_slope=0.0, grad_activation="none", grad_y=None, grad_slope=0.0, out=None,
                            out_dtype=None, allow_tf32=False, launch=True, **blocks):
    """netc.inner_product_grad_data: dx = dz [N, M] @ w[K, M]^T in input_shape [N, ...] (K = prod(...)),
    gemm with w's transposed view (no copy). With an activation prologue (dz = activation_grad(y, dy),
    dz given as dy) or epilogue (grad_activation, grad_y in input_shape: activation_grad(grad_y, dx)
    stored) it runs conv2d_grad_data on the 1x1 views instead. `out` must be viewable as [N, K]."""
    n = int(input_shape[0])
    k = 1
    for s in input_shape[1:]:
        k *= int(s)
    if dz.dim() != 2 or w.dim() != 2 or dz.shape[0] != n or w.shape != (k, dz.shape[1]):
        raise ValueError(f"dz {list(dz.shape)} and w {list(w.shape)} do not fit an inner product of input "
                         f"{list(input_shape)}")
    if out is None:
        out = torch.empty(tuple(int(s) for s in input_shape), dtype=out_dtype or dz.dtype, device=dz.device)
    elif tuple(out.shape) != tuple(int(s) for s in input_shape):
        raise ValueError(f"out must be {list(input_shape)}, got {list(out.shape)}")
    o2 = _rows_view(out, "out")
    m = dz.shape[1]
    epilogue = grad_prologue(grad_activation, grad_slope)
    if grad_prologue(activation, negative_slope) or epilogue:
        if m > 1 and dz.stride(1) != 1:
            raise ValueError(f"dz needs contiguous features for the prologue path, got strides {dz.stride()}")
        gy = None
        if epilogue and grad_y is not None:
            if tuple(grad_y.shape) != tuple(out.shape):
                raise ValueError(f"grad_y {list(grad_y.shape)} must have the input's shape {list(out.shape)}")
            gy = _rows_view(grad_y, "grad_y").view(n, 1, 1, k)
        call = conv2d_grad_data(dz.view(n, 1, 1, m), w.view(1, 1, k, m), (n, 1, 1, k), padding="VALID",
                                activation=activation, y=y.view(n, 1, 1, m) if y is not None else None,
                                negative_slope=negative_slope, grad_activation=grad_activation, grad_y=gy,
                                grad_slope=grad_slope, out=o2.view(n, 1, 1, k), allow_tf32=allow_tf32, launch=False,
                                **blocks)
    else:
        call = gemm(dz, w.t(), out=o2, allow_tf32=allow_tf32, launch=False, **blocks)
    call.out = out
    return finish(call, launch)


def inner_product_grad_filter(x: torch.Tensor, dz: torch.Tensor, *, bias=False, activation="none", y=None,
                              negative_slope=0.0, out=None, out_dtype=None, allow_tf32=False, workspace=None,
                              split=None, launch=True, **blocks):
    """netc.inner_product_grad_filter: dW = x^T dz, x [N, ...] flattened to [N, K] (a view), dz [N, M]
    -> [K, M]: gemm with x's transposed view. With bias (netc.bias_grad of dz fused) or an activation
    prologue it runs conv2d_grad_filter on the 1x1 views (split over the batch, deterministic).
    Returns dW, or (dW, db); launch=False a KernelCall (gemm) or a list of them."""
    n = x.shape[0]
    x2 = _rows_view(x, "x")
    k = x2.shape[1]
    if dz.dim() != 2 or dz.shape[0] != n:
        raise ValueError(f"dz {list(dz.shape)} does not fit an inner product of input {list(x.shape)}")
    m = dz.shape[1]
    if out is None:
        out = torch.empty((k, m), dtype=out_dtype or x.dtype, device=x.device)
    if (bias is not False and bias is not None) or grad_prologue(activation, negative_slope):
        if (k > 1 and x2.stride(1) != 1) or (m > 1 and dz.stride(1) != 1):
            raise ValueError("x and dz need contiguous features for the fused bias/prologue path")
        return conv2d_grad_filter(x2.view(n, 1, 1, k), dz.view(n, 1, 1, m), (1, 1, k, m), padding="VALID",
                                  bias=bias, activation=activation, negative_slope=negative_slope,
                                  y=y.view(n, 1, 1, m) if y is not None else None, out=out,
                                  allow_tf32=allow_tf32, workspace=workspace, split=split, launch=launch, **blocks)
    return gemm(x2.t(), dz, out=out, allow_tf32=allow_tf32, launch=launch, **blocks)


def grad_prologue(activation, negative_slope=0.0) -> bool:
    return activation not in (None, "none", 0)


# --------------------------------------------------------------------------- deconvolution

def deconv2d(x: torch.Tensor, w: torch.Tensor, output_shape, strides=(1, 1, 1, 1), padding="SAME", *,
             activation="none", **kw):
    """netc.deconv2d (the adjoint of the convolution output_shape -> x with filter w [kh, kw, c_out, c_in],
    HWIO of that convolution): conv2d_grad_data of x with the fused activation as its epilogue. The
    bias is not applied (netc's semantics)."""
    return conv2d_grad_data(x, w, output_shape, strides, padding, epilogue_activation=activation, **kw)
