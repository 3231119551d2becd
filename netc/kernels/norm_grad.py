"""Normalization in training: the LRN gradient and batch norm's training form (batch statistics,
the normalizing forward, its data and scale gradients, the running-statistics update).

Tensors are [..., C] with C the channel (last) axis, seen as [M, C] rows: channels contiguous,
rows evenly spaced (a channel slice of a concatenation buffer is fine). Per-channel vectors [C]
are contiguous (f32 in 16-bit networks: set-dtype keeps batch-norm vectors f32). Everything is
computed in fp32.

    lrn_grad          dx_j = dy_j s_j^-beta - 2 beta alpha/n x_j sum_{|c-j| <= n/2} dy_c y_c / s_c,
                      s_c = knorm + alpha/n sum_{|d| <= n/2} x_{c+d}^2 (clipped windows; reference.lrn_grad).
                      Each program recomputes s_c for the LOCAL_SIZE neighbours of its channels
                      (LOCAL_SIZE^2 shifted loads that hit in L1/L2: no scratch tensor).
    batch_stats       mean and biased variance per channel, one pass: each program reduces its row
                      range tile by tile (exact two-pass mean/M2 inside a tile) and merges tiles with
                      Chan et al.'s pairwise formula; a split writes (count, mean, M2) partials that a
                      second kernel merges in index order. Deterministic, no catastrophic cancellation.
    batch_norm_train  (x - mean) * rsqrt(var + eps) * scale + shift, then an optional activation.
    batch_norm_grad_scale / bias_grad of dy: sum dy * xhat and sum dy per channel (train_common's
                      column sums, one pass for both).
    batch_norm_grad   dx = rstd * scale * (dy - sum(dy)/M - xhat * sum(dy * xhat)/M) (batch statistics),
                      or dy * scale * rstd (given statistics); the two sums are those of
                      batch_norm_grad_scale and the shift's bias_grad: pass them (grad_scale=,
                      grad_shift=) when the program computes them anyway, else they are computed first.
    running_stats_update  new = momentum * old + (1 - momentum) * batch (variance made unbiased), in place.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import ACTIVATIONS, KernelCall, activate, channel_slice, check_float, dummy, finish, row_stride
from .train_common import as_rows, column_sums, column_sums_tiles, default_split, finish_calls, workspace_for


# --------------------------------------------------------------------------- LRN

@triton.jit
def lrn_grad_kernel(x_ptr, y_ptr, dy_ptr, out_ptr, P, C, stride_xp, stride_yp, stride_dp, stride_op,
                    alpha_over_n, beta, knorm,
                    LOCAL_SIZE: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    pid_p = tl.program_id(0)
    pid_c = tl.program_id(1)
    offs_p = (pid_p * BLOCK_P + tl.arange(0, BLOCK_P)).to(tl.int64)
    offs_c = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_p = offs_p < P
    mask_c = offs_c < C
    x_rows = x_ptr + offs_p[:, None] * stride_xp
    y_rows = y_ptr + offs_p[:, None] * stride_yp
    d_rows = dy_ptr + offs_p[:, None] * stride_dp
    HALF: tl.constexpr = LOCAL_SIZE // 2
    own = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)   # s_j
    acc = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)   # sum over the window of dy_c y_c / s_c
    for d in tl.static_range(LOCAL_SIZE):
        c = offs_c + (d - HALF)
        okc = mask_p[:, None] & ((c >= 0) & (c < C))[None, :]
        sq = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
        for e in tl.static_range(LOCAL_SIZE):
            ce = c + (e - HALF)
            v = tl.load(x_rows + ce[None, :], mask=okc & ((ce >= 0) & (ce < C))[None, :], other=0.0).to(tl.float32)
            sq += v * v
        s = knorm + alpha_over_n * sq
        if d == HALF:
            own = s
        dyc = tl.load(d_rows + c[None, :], mask=okc, other=0.0).to(tl.float32)
        yc = tl.load(y_rows + c[None, :], mask=okc, other=0.0).to(tl.float32)
        acc += dyc * yc / s
    m = mask_p[:, None] & mask_c[None, :]
    x = tl.load(x_rows + offs_c[None, :], mask=m, other=0.0).to(tl.float32)
    dy = tl.load(d_rows + offs_c[None, :], mask=m, other=0.0).to(tl.float32)
    dx = dy * tl.exp2(-beta * tl.log2(own)) - 2.0 * beta * alpha_over_n * x * acc
    tl.store(out_ptr + offs_p[:, None] * stride_op + offs_c[None, :], dx.to(out_ptr.dtype.element_ty), mask=m)


def lrn_grad(x: torch.Tensor, y: torch.Tensor, dy: torch.Tensor, local_size: int = 5, alpha: float = 1e-4,
             beta: float = 0.75, knorm: float = 1.0, *, out=None, out_channel_offset=0, out_dtype=None,
             block_p=None, block_c=None, num_warps=4, launch=True):
    """netc.lrn_grad: the forward input x, output y and dy (same shape [..., C]) -> dx. Writes channels
    [out_channel_offset, +C) of `out` when given; returns the written view."""
    for t, what in ((x, "x"), (y, "y"), (dy, "dy")):
        check_float(t, what)
        if tuple(t.shape) != tuple(x.shape):
            raise ValueError(f"{what} {list(t.shape)} must have x's shape {list(x.shape)}")
    if local_size <= 0 or local_size % 2 == 0:
        raise ValueError(f"local_size must be a positive odd number, got {local_size}")
    p, c, sx = as_rows(x, "x")
    o = channel_slice(out, tuple(x.shape), out_channel_offset, out_dtype or dy.dtype, x.device)
    block_c = block_c or min(128, triton.next_power_of_2(c))
    if block_p is None:
        block_p = min(max(1, 1024 // block_c), triton.next_power_of_2(max(p, 1)))
    grid = (triton.cdiv(p, block_p), triton.cdiv(c, block_c))
    return finish(KernelCall(lrn_grad_kernel, grid, (
        x, y, dy, o, p, c, sx, as_rows(y, "y")[2], as_rows(dy, "dy")[2], row_stride(o, "out"),
        float(alpha) / local_size, float(beta), float(knorm)),
        dict(LOCAL_SIZE=int(local_size), BLOCK_P=block_p, BLOCK_C=block_c), dict(num_warps=num_warps), o), launch)


# --------------------------------------------------------------------------- batch statistics

@triton.jit
def batch_stats_kernel(x_ptr, mean_ptr, var_ptr, ws_ptr, M, C, stride_x,
                       SPLIT: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    pid_s = tl.program_id(0)
    pid_c = tl.program_id(1)
    offs_c = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_c = offs_c < C
    chunk = tl.cdiv(tl.cdiv(M, SPLIT), BLOCK_R) * BLOCK_R
    lo = pid_s * chunk
    hi = tl.minimum(lo + chunk, M)
    n = tl.zeros((BLOCK_C,), dtype=tl.float32)
    mean = tl.zeros((BLOCK_C,), dtype=tl.float32)
    m2 = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for r0 in range(lo, hi, BLOCK_R):
        rows = (r0 + tl.arange(0, BLOCK_R)).to(tl.int64)
        valid = rows < hi
        m = valid[:, None] & mask_c[None, :]
        x = tl.load(x_ptr + rows[:, None] * stride_x + offs_c[None, :], mask=m, other=0.0).to(tl.float32)
        nt = tl.sum(valid.to(tl.float32), axis=0)
        tmean = tl.sum(x, axis=0) / nt
        d = tl.where(m, x - tmean[None, :], 0.0)
        tm2 = tl.sum(d * d, axis=0)
        tot = n + nt
        delta = tmean - mean
        mean += delta * (nt / tot)
        m2 += tm2 + delta * delta * (n * (nt / tot))
        n = tot
    if SPLIT == 1:
        tl.store(mean_ptr + offs_c, mean.to(mean_ptr.dtype.element_ty), mask=mask_c)
        tl.store(var_ptr + offs_c, (m2 / tl.maximum(n, 1.0)).to(var_ptr.dtype.element_ty), mask=mask_c)
    else:
        base = ws_ptr + pid_s.to(tl.int64) * 3 * C
        tl.store(base + offs_c, n, mask=mask_c)
        tl.store(base + C + offs_c, mean, mask=mask_c)
        tl.store(base + 2 * C + offs_c, m2, mask=mask_c)


@triton.jit
def merge_stats_kernel(ws_ptr, mean_ptr, var_ptr, S, C, BLOCK_C: tl.constexpr):
    """Merge the SPLIT (count, mean, M2) partials in index order (Chan et al.)."""
    offs_c = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_c = offs_c < C
    n = tl.zeros((BLOCK_C,), dtype=tl.float32)
    mean = tl.zeros((BLOCK_C,), dtype=tl.float32)
    m2 = tl.zeros((BLOCK_C,), dtype=tl.float32)
    p = ws_ptr + offs_c
    for s in range(S):
        ns = tl.load(p, mask=mask_c, other=0.0)
        ms = tl.load(p + C, mask=mask_c, other=0.0)
        m2s = tl.load(p + 2 * C, mask=mask_c, other=0.0)
        tot = n + ns
        w = ns / tl.maximum(tot, 1.0)           # an empty range (ns = 0) changes nothing
        delta = ms - mean
        mean += delta * w
        m2 += m2s + delta * delta * (n * w)
        n = tot
        p += 3 * C
    tl.store(mean_ptr + offs_c, mean.to(mean_ptr.dtype.element_ty), mask=mask_c)
    tl.store(var_ptr + offs_c, (m2 / tl.maximum(n, 1.0)).to(var_ptr.dtype.element_ty), mask=mask_c)


def _vector_out(out, c, dtype, device, what):
    if out is None:
        return torch.empty((c,), dtype=dtype, device=device)
    if out.numel() != c or (c > 1 and out.stride(-1) != 1):
        raise ValueError(f"{what} must be a contiguous [{c}] vector, got {list(out.shape)}")
    return out


def batch_stats(x: torch.Tensor, *, mean=None, var=None, out_dtype=torch.float32, workspace=None, split=None,
                block_r=None, block_c=None, num_warps=4, launch=True):
    """netc.batch_stats: x [..., C] -> (mean, biased variance) per channel over every other axis, written
    to `mean`/`var` (new [C] tensors of out_dtype when absent). split > 1 needs an fp32 workspace of
    3 * split * C elements. Returns (mean, var); launch=False the list of KernelCalls."""
    check_float(x, "x")
    m, c, sx = as_rows(x, "x")
    mean = _vector_out(mean, c, out_dtype, x.device, "mean")
    var = _vector_out(var, c, out_dtype, x.device, "var")
    block_c = block_c or min(64, triton.next_power_of_2(max(c, 1)))
    block_r = block_r or max(1, min(triton.next_power_of_2(max(m, 1)), 4096 // block_c))
    if split is None:
        split = default_split(m, triton.cdiv(c, block_c), block_r)
    split = int(split)
    z = dummy(x.device)
    ws = workspace_for(workspace, 3 * split * c, x.device) if split > 1 else z
    calls = [KernelCall(batch_stats_kernel, (split, triton.cdiv(c, block_c)), (x, mean, var, ws, m, c, sx),
                        dict(SPLIT=split, BLOCK_R=block_r, BLOCK_C=block_c), dict(num_warps=num_warps), (mean, var))]
    if split > 1:
        bc = min(1024, triton.next_power_of_2(max(c, 1)))
        calls.append(KernelCall(merge_stats_kernel, (triton.cdiv(c, bc),), (ws, mean, var, split, c),
                                dict(BLOCK_C=bc), dict(num_warps=num_warps), (mean, var)))
    return finish_calls(calls, launch)


# --------------------------------------------------------------------------- normalize, and its gradient

@triton.jit
def batch_norm_rows_kernel(x_ptr, dy_ptr, out_ptr, mean_ptr, var_ptr, scale_ptr, shift_ptr, s1_ptr, s2_ptr,
                           M, C, stride_x, stride_dy, stride_o, eps, slope,
                           BACKWARD: tl.constexpr, BATCH_STATS: tl.constexpr, ACTIVATION: tl.constexpr,
                           BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """Forward: out = act((x - mean) * rstd * scale + shift). Backward: out = dx (module doc), s1 = sum dy,
    s2 = sum dy * xhat per channel."""
    rows = (tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_c = offs_c < C
    m = (rows < M)[:, None] & mask_c[None, :]
    var = tl.load(var_ptr + offs_c, mask=mask_c, other=1.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(var + eps)
    scale = tl.load(scale_ptr + offs_c, mask=mask_c, other=0.0).to(tl.float32)
    if BACKWARD:
        dy = tl.load(dy_ptr + rows[:, None] * stride_dy + offs_c[None, :], mask=m, other=0.0).to(tl.float32)
        g = (scale * rstd)[None, :]
        if BATCH_STATS:
            mean = tl.load(mean_ptr + offs_c, mask=mask_c, other=0.0).to(tl.float32)
            x = tl.load(x_ptr + rows[:, None] * stride_x + offs_c[None, :], mask=m, other=0.0).to(tl.float32)
            xhat = (x - mean[None, :]) * rstd[None, :]
            s1 = tl.load(s1_ptr + offs_c, mask=mask_c, other=0.0).to(tl.float32) / M
            s2 = tl.load(s2_ptr + offs_c, mask=mask_c, other=0.0).to(tl.float32) / M
            y = g * (dy - s1[None, :] - xhat * s2[None, :])
        else:
            y = g * dy
    else:
        mean = tl.load(mean_ptr + offs_c, mask=mask_c, other=0.0).to(tl.float32)
        shift = tl.load(shift_ptr + offs_c, mask=mask_c, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + rows[:, None] * stride_x + offs_c[None, :], mask=m, other=0.0).to(tl.float32)
        y = (x - mean[None, :]) * (rstd * scale)[None, :] + shift[None, :]
        y = activate(y, ACTIVATION, slope)
    tl.store(out_ptr + rows[:, None] * stride_o + offs_c[None, :], y.to(out_ptr.dtype.element_ty), mask=m)


def _vectors(c, **vs):
    for what, v in vs.items():
        if v is None:
            raise ValueError(f"{what} is required")
        check_float(v, what)
        if v.numel() != c or (c > 1 and v.stride(-1) != 1):
            raise ValueError(f"{what} must be a contiguous [{c}] vector, got {list(v.shape)}")


def _row_tiles(m, c, block_r, block_c):
    block_c = block_c or min(128, triton.next_power_of_2(max(c, 1)))
    block_r = block_r or max(1, min(triton.next_power_of_2(max(m, 1)), 2048 // block_c))
    return block_r, block_c


def batch_norm_train(x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, scale: torch.Tensor,
                     shift: torch.Tensor, epsilon: float = 1e-5, *, activation="none", negative_slope=0.0,
                     out=None, out_channel_offset=0, out_dtype=None, block_r=None, block_c=None, num_warps=4,
                     launch=True):
    """netc.batch_norm with 3 operands (training form): (x - mean) / sqrt(var + epsilon) * scale + shift
    over the last axis, then `activation` (what a fuse pass may fold in). Returns the written view."""
    check_float(x, "x")
    m, c, sx = as_rows(x, "x")
    _vectors(c, mean=mean, var=var, scale=scale, shift=shift)
    o = channel_slice(out, tuple(x.shape), out_channel_offset, out_dtype or x.dtype, x.device)
    block_r, block_c = _row_tiles(m, c, block_r, block_c)
    z = dummy(x.device)
    code = ACTIVATIONS[activation or "none"] if not isinstance(activation, int) else activation
    return finish(KernelCall(batch_norm_rows_kernel, (triton.cdiv(m, block_r), triton.cdiv(c, block_c)), (
        x, z, o, mean, var, scale, shift, z, z, m, c, sx, 0, row_stride(o, "out"), float(epsilon),
        float(negative_slope)), dict(BACKWARD=False, BATCH_STATS=True, ACTIVATION=code, BLOCK_R=block_r,
                                     BLOCK_C=block_c), dict(num_warps=num_warps), o), launch)


def batch_norm_grad_scale(x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, dy: torch.Tensor,
                          epsilon: float = 1e-5, *, out=None, out_dtype=torch.float32, grad_shift=None,
                          workspace=None, split=None, block_r=None, block_c=None, num_warps=4, launch=True):
    """netc.batch_norm_grad_scale: sum(dy * xhat) per channel -> `out` [C]. grad_shift: a [C] tensor that
    also receives sum(dy) (the shift's netc.bias_grad of dy) in the same pass. split > 1 needs an fp32
    workspace of split * (1 + bool(grad_shift)) * C elements. Returns out (or (out, grad_shift))."""
    check_float(x, "x")
    check_float(dy, "dy")
    m, c, _ = as_rows(x, "x")
    _vectors(c, mean=mean, var=var)
    out = _vector_out(out, c, out_dtype, x.device, "out")
    return finish_calls(column_sums(x, b=dy, mean=mean, var=var, epsilon=epsilon, out0=out, out1=grad_shift,
                                    workspace=workspace, split=split, block_r=block_r, block_c=block_c,
                                    num_warps=num_warps), launch)


def batch_norm_grad(x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, dy: torch.Tensor, scale: torch.Tensor,
                    epsilon: float = 1e-5, batch_stats: bool = True, *, grad_scale=None, grad_shift=None, out=None,
                    out_channel_offset=0, out_dtype=None, workspace=None, split=None, block_r=None, block_c=None,
                    num_warps=4, launch=True):
    """netc.batch_norm_grad: x, mean, var, dy [..., C] and the scale [C] -> dx (module doc).
    batch_stats: grad_scale = sum(dy * xhat) and grad_shift = sum(dy) per channel (netc.batch_norm_grad_scale's
    and the shift's netc.bias_grad results) are read when given; otherwise they are computed first
    into an fp32 workspace of (2 + 2 * split) * C elements (split > 1) or 2 * C, passed whole to the
    first kernel (launch=False: a list of 2 or 3 calls)."""
    check_float(x, "x")
    check_float(dy, "dy")
    if tuple(dy.shape) != tuple(x.shape):
        raise ValueError(f"dy {list(dy.shape)} must have x's shape {list(x.shape)}")
    m, c, sx = as_rows(x, "x")
    _vectors(c, var=var, scale=scale)
    calls = []
    if batch_stats:
        _vectors(c, mean=mean)
        if (grad_scale is None) != (grad_shift is None):
            raise ValueError("pass both grad_scale and grad_shift (or neither: they are computed)")
        if grad_scale is None:
            # one fp32 scratch: the split's partials [split, 2, C] (split > 1) first, then the two sums,
            # passed whole to the first kernel (so its size shows among the arguments)
            sp = column_sums_tiles(m, c, split, block_r, block_c)[0]
            first = 2 * sp * c if sp > 1 else 0
            ws = workspace_for(workspace, first + 2 * c, x.device)
            grad_scale, grad_shift = ws[first:first + c], ws[first + c:first + 2 * c]
            calls += column_sums(x, b=dy, mean=mean, var=var, epsilon=epsilon, out0=grad_scale, out1=grad_shift,
                                 workspace=ws, split=sp, block_r=block_r, block_c=block_c, num_warps=num_warps)
        else:
            _vectors(c, grad_scale=grad_scale, grad_shift=grad_shift)
    o = channel_slice(out, tuple(x.shape), out_channel_offset, out_dtype or dy.dtype, x.device)
    block_r, block_c = _row_tiles(m, c, block_r, block_c)
    z = dummy(x.device)
    calls.append(KernelCall(batch_norm_rows_kernel, (triton.cdiv(m, block_r), triton.cdiv(c, block_c)), (
        x, dy, o, mean if batch_stats else z, var, scale, z, grad_shift if batch_stats else z,
        grad_scale if batch_stats else z, m, c, sx, as_rows(dy, "dy")[2], row_stride(o, "out"), float(epsilon), 0.0),
        dict(BACKWARD=True, BATCH_STATS=bool(batch_stats), ACTIVATION=0, BLOCK_R=block_r, BLOCK_C=block_c),
        dict(num_warps=num_warps), o))
    return finish_calls(calls, launch)


# --------------------------------------------------------------------------- running statistics

@triton.jit
def running_stats_kernel(rmean_ptr, rvar_ptr, mean_ptr, var_ptr, C, momentum, unbias, BLOCK_C: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = offs < C
    rm = tl.load(rmean_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    rv = tl.load(rvar_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    bm = tl.load(mean_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    bv = tl.load(var_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(rmean_ptr + offs, (momentum * rm + (1.0 - momentum) * bm).to(rmean_ptr.dtype.element_ty), mask=mask)
    tl.store(rvar_ptr + offs, (momentum * rv + (1.0 - momentum) * (bv * unbias)).to(rvar_ptr.dtype.element_ty),
             mask=mask)


def running_stats_update(running_mean: torch.Tensor, running_var: torch.Tensor, mean: torch.Tensor,
                         var: torch.Tensor, count: int, momentum: float = 0.9, *, block_c=None, num_warps=4,
                         launch=True):
    """netc.running_stats_update: writes its `mean`/`var` state (running_mean, running_var) in place from the
    batch's mean and biased variance (count: elements per channel; the variance is made unbiased by
    count / (count - 1), unless count <= 1). Returns (running_mean, running_var)."""
    c = mean.numel()
    _vectors(c, running_mean=running_mean, running_var=running_var, mean=mean, var=var)
    unbias = count / (count - 1) if count > 1 else 1.0
    block_c = block_c or min(1024, triton.next_power_of_2(max(c, 1)))
    return finish(KernelCall(running_stats_kernel, (triton.cdiv(c, block_c),), (
        running_mean, running_var, mean, var, c, float(momentum), float(unbias)),
        dict(BLOCK_C=block_c), dict(num_warps=num_warps), (running_mean, running_var)), launch)
