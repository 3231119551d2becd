"""Gradients of softmax and the losses. One program per row for the softmax ones (a row's
reductions stay in one program: deterministic, no atomics), an elementwise pass for the euclidean.

    softmax_grad         dx = y * (dy - sum(dy * y)), y the softmax output [N, C]: two passes over the
                         row in BLOCK_C chunks (the dot product, then the write)
    softmax_loss_grad    dx = (softmax(x) - t) / N * dloss, t the one-hot of the class index; soft or
                         one-hot targets [N, C]: softmax(x) * sum(t) - t. Pass 1: online max and sum
                         (as softmax.py; the sum kept without the max's own 1, r), pass 2: the write,
                         where the max's softmax is 1 - r / (1 + r) (a saturated row's p - 1 keeps its
                         relative precision). A label outside [0, C) gives a NaN row.
    euclidean_loss_grad  (x - y) / N * dloss for wrt=0, its negation (in y's shape) for wrt=1

With lengths [B] (MASKED; kernels/loss.py: the T*B steps as rows), N is the valid steps (the sum of the
lengths, clamped to [1, T]) and a padding step's gradient is 0 (its label is not read).

Rows are read with their own strides (features contiguous), in any float dtype; dloss is an
optional 1-element tensor (the loss's incoming gradient, a scalar seed). netc keeps both loss
gradients f32 (their ops are f32_result): the default out_dtype.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import KernelCall, check_float, dummy, finish
from .loss import as_feature_rows, label_rows, rows_counted, step_valid, steps_as_rows


@triton.jit
def softmax_grad_kernel(y_ptr, dy_ptr, out_ptr, C, stride_y, stride_d, stride_o, BLOCK_C: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_C)
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for c0 in range(0, C, BLOCK_C):
        m = c0 + offs < C
        y = tl.load(y_ptr + row * stride_y + c0 + offs, mask=m, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * stride_d + c0 + offs, mask=m, other=0.0).to(tl.float32)
        acc += y * dy
    dot = tl.sum(acc, axis=0)
    for c0 in range(0, C, BLOCK_C):
        m = c0 + offs < C
        y = tl.load(y_ptr + row * stride_y + c0 + offs, mask=m, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * stride_d + c0 + offs, mask=m, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * stride_o + c0 + offs, (y * (dy - dot)).to(out_ptr.dtype.element_ty), mask=m)


@triton.jit
def softmax_loss_grad_kernel(x_ptr, t_ptr, dloss_ptr, out_ptr, NB, C, stride_x, stride_t, stride_o, len_ptr, NSEQ,
                             ONE_HOT: tl.constexpr, HAS_DLOSS: tl.constexpr, MASKED: tl.constexpr,
                             BLOCK_C: tl.constexpr, BLOCK_L: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_C)
    x_row = x_ptr + row * stride_x
    m_i = tl.full((BLOCK_C,), float("-inf"), dtype=tl.float32)
    r_i = tl.zeros((BLOCK_C,), dtype=tl.float32)    # each lane's sum of exp(x - its max) less the max's 1
    st = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for c0 in range(0, C, BLOCK_C):
        m = c0 + offs < C
        x = tl.load(x_row + c0 + offs, mask=m, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m_i, x)
        m_ref = tl.where(m_new > float("-inf"), m_new, 0.0)
        alpha = tl.exp(m_i - m_ref)
        r_i = tl.where(x > m_i, alpha + alpha * r_i, r_i + tl.exp(x - m_ref))
        m_i = m_new
        if ONE_HOT:
            st += tl.load(t_ptr + row * stride_t + c0 + offs, mask=m, other=0).to(tl.float32)
    mx = tl.max(m_i, axis=0)
    # r: the row's sum of exp(x - mx) less one 1, kept apart from the 1 (the lanes holding the max give
    # their 1 + r_lane: the 1s counted exactly), so p - 1 = -r / (1 + r) at the max keeps its precision
    e = tl.exp(m_i - mx)
    at_max = m_i == mx
    r = tl.sum(tl.where(at_max, 0.0, e) + r_i * e, axis=0) + (tl.sum(tl.where(at_max, 1.0, 0.0), axis=0) - 1.0)
    inv = 1.0 / (1.0 + r)
    g = 1.0 / rows_counted(len_ptr, NB, NSEQ, MASKED, BLOCK_L)
    if MASKED:      # a padding step: 0
        g = tl.where(step_valid(len_ptr, row, row < NB, NB, NSEQ), g, 0.0)
    if HAS_DLOSS:
        g = g * tl.load(dloss_ptr).to(tl.float32)
    if ONE_HOT:
        s_t = tl.sum(st, axis=0)
        inv_t = inv * s_t                        # soft targets need not sum to one
    else:
        label = tl.load(t_ptr + row * stride_t).to(tl.float32)
        ok = (label >= 0.0) & (label < C) & (label == tl.floor(label))
        lab = tl.where(ok, label, -1.0).to(tl.int32)
        g = tl.where(ok | (g == 0.0), g, float("nan"))   # a padding step's label is not read
    for c0 in range(0, C, BLOCK_C):
        cols = c0 + offs
        m = cols < C
        x = tl.load(x_row + cols, mask=m, other=float("-inf")).to(tl.float32)
        # at the max, softmax = 1 - r / (1 + r): p * s - t = (s - t) - r * inv * s, without p - 1's cancellation
        if ONE_HOT:
            t = tl.load(t_ptr + row * stride_t + cols, mask=m, other=0).to(tl.float32)
            d = tl.where(x == mx, (s_t - t) - r * inv_t, tl.exp(x - mx) * inv_t - t)
        else:
            t = tl.where(cols == lab, 1.0, 0.0)
            d = tl.where(x == mx, (1.0 - t) - r * inv, tl.exp(x - mx) * inv - t)
        tl.store(out_ptr + row * stride_o + cols, (d * g).to(out_ptr.dtype.element_ty), mask=m)


@triton.jit
def euclidean_loss_grad_kernel(x_ptr, y_ptr, dloss_ptr, out_ptr, NB, F, stride_x, stride_y, stride_o, len_ptr, NSEQ,
                               HAS_DLOSS: tl.constexpr, MASKED: tl.constexpr, BLOCK: tl.constexpr,
                               BLOCK_L: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < NB * F
    r = offs // F
    c = offs % F
    x = tl.load(x_ptr + r * stride_x + c, mask=mask, other=0.0).to(tl.float32)
    y = tl.load(y_ptr + r * stride_y + c, mask=mask, other=0.0).to(tl.float32)
    # the batch is a runtime argument (codegen: affine in it), not a baked-in scale
    g = 1.0 / rows_counted(len_ptr, NB, NSEQ, MASKED, BLOCK_L)
    if HAS_DLOSS:
        g = g * tl.load(dloss_ptr).to(tl.float32)
    d = (x - y) * g
    if MASKED:      # padding steps: 0
        d = tl.where(step_valid(len_ptr, r, mask, NB, NSEQ), d, 0.0)
    tl.store(out_ptr + r * stride_o + c, d.to(out_ptr.dtype.element_ty), mask=mask)


def _row_stride(t2):
    return t2.stride(0) if t2.shape[0] > 1 else t2.shape[1]


def _out_rows(out, shape, dtype, device):
    if out is None:
        out = torch.empty(tuple(shape), dtype=dtype, device=device)
    elif tuple(out.shape) != tuple(shape):
        raise ValueError(f"out must be {list(shape)}, got {list(out.shape)}")
    check_float(out, "out")
    return out, as_feature_rows(out, "out")


def _dloss(dloss):
    if dloss is not None and dloss.numel() != 1:
        raise ValueError(f"dloss must hold one element, got {list(dloss.shape)}")
    return dloss


def softmax_grad(y: torch.Tensor, dy: torch.Tensor, input_shape=None, *, out=None, out_dtype=None, block_c=None,
                 num_warps=4, launch=True):
    """netc.softmax_grad: the softmax output y [N, C] and dy [N, C] -> dx in input_shape (default [N, C];
    `out` must be viewable as [N, C] rows with contiguous features)."""
    check_float(y, "y")
    check_float(dy, "dy")
    if y.dim() != 2 or tuple(dy.shape) != tuple(y.shape):
        raise ValueError(f"softmax_grad needs y [N, C] and dy of its shape, got {list(y.shape)}, {list(dy.shape)}")
    n, c = y.shape
    shape = tuple(input_shape) if input_shape is not None else (n, c)
    out, o2 = _out_rows(out, shape, out_dtype or dy.dtype, y.device)
    if o2.shape != (n, c):
        raise ValueError(f"input_shape {list(shape)} does not flatten to [{n}, {c}]")
    y2, d2 = as_feature_rows(y, "y"), as_feature_rows(dy, "dy")
    block_c = block_c or min(4096, triton.next_power_of_2(max(c, 1)))
    return finish(KernelCall(softmax_grad_kernel, (n,), (y2, d2, o2, c, _row_stride(y2), _row_stride(d2),
                                                         _row_stride(o2)),
                             dict(BLOCK_C=block_c), dict(num_warps=num_warps), out), launch)


def _masked_out(out, shape, dtype, device, rows: int, lengths):
    """The gradient's destination in its operand's `shape`, and its [rows, F] view (a masked loss: the
    T*B steps as rows)."""
    out, o2 = _out_rows(out, shape, dtype, device)
    if lengths is not None:
        o2 = as_feature_rows(out.reshape((rows,) + tuple(shape[2:])) if len(shape) > 2 else out.reshape(rows, 1),
                             "out")
    return out, o2


def softmax_loss_grad(x: torch.Tensor, labels: torch.Tensor, dloss=None, lengths=None, *, out=None,
                      out_dtype=torch.float32, block_c=None, block_l=None, num_warps=4, launch=True):
    """netc.softmax_loss_grad: logits x [N, ...] (flattened to [N, C]), labels as softmax_loss's (class
    indices [N] / [N, 1] of any integer dtype or integral floats, or one-hot / soft targets [N, C]),
    optional dloss (1 element) -> the gradient in x's shape (f32 by default). With lengths [B]: x [T, B, ...]
    and labels per step, w * (softmax - target) with w = 1 / the valid steps on a valid step and 0 on padding."""
    check_float(x, "x")
    shape = tuple(x.shape)
    nseq = x.shape[1] if lengths is not None and x.dim() > 1 else 1
    x, labels, lengths = steps_as_rows(x, labels, lengths, "softmax_loss_grad")
    if x.dim() < 2:
        raise ValueError(f"softmax_loss_grad needs logits of rank >= 2, got {list(x.shape)}")
    n = x.shape[0]
    x2 = as_feature_rows(x, "x")
    c = x2.shape[1]
    t2, one_hot, stride_t = label_rows(labels, n, c)
    out, o2 = _masked_out(out, shape, out_dtype or x.dtype, x.device, n, lengths)
    dloss = _dloss(dloss)
    block_c = block_c or min(4096, triton.next_power_of_2(max(c, 1)))
    block_l = block_l or min(1024, triton.next_power_of_2(max(nseq, 1)))
    return finish(KernelCall(softmax_loss_grad_kernel, (n,), (
        x2, t2, dloss if dloss is not None else dummy(x.device), o2, n, c, _row_stride(x2), stride_t, _row_stride(o2),
        lengths if lengths is not None else dummy(x.device), nseq),
        dict(ONE_HOT=bool(one_hot), HAS_DLOSS=dloss is not None, MASKED=lengths is not None, BLOCK_C=block_c,
             BLOCK_L=block_l), dict(num_warps=num_warps), out), launch)


def euclidean_loss_grad(x: torch.Tensor, y: torch.Tensor, dloss=None, wrt: int = 0, lengths=None, *, out=None,
                        out_dtype=torch.float32, block=1024, block_l=None, num_warps=4, launch=True):
    """netc.euclidean_loss_grad: d(0.5 * sum((x - y)^2) / N) / d(operand `wrt`) = +-(x - y) / N (* dloss),
    in that operand's shape (f32 by default). x and y: N rows of the same element count. With lengths [B]:
    x, y time-major [T, B, ...], +-(x - y) / the valid steps on a valid step, 0 on padding."""
    check_float(x, "x")
    check_float(y, "y")
    if wrt not in (0, 1):
        raise ValueError(f"wrt must be 0 or 1, got {wrt}")
    shape = tuple((x, y)[wrt].shape)
    nseq = x.shape[1] if lengths is not None and x.dim() > 1 else 1
    x, y, lengths = steps_as_rows(x, y, lengths, "euclidean_loss_grad")
    if x.dim() < 1 or y.dim() < 1 or x.shape[0] != y.shape[0] or x.numel() != y.numel():
        raise ValueError(f"euclidean_loss_grad needs inputs of the same batch and size, got {list(x.shape)} and "
                         f"{list(y.shape)}")
    n = x.shape[0]
    a, b = (x, y) if wrt == 0 else (y, x)          # d/dy = (y - x) / N
    out, o2 = _masked_out(out, shape, out_dtype or a.dtype, x.device, n, lengths)
    a2, b2 = as_feature_rows(a, "x" if wrt == 0 else "y"), as_feature_rows(b, "y" if wrt == 0 else "x")
    f = a2.shape[1]
    if o2.shape[1] != f:
        o2 = as_feature_rows(out.reshape(n, f), "out")
    numel = n * f
    dloss = _dloss(dloss)
    block = min(block, triton.next_power_of_2(max(numel, 1)))
    block_l = block_l or min(1024, triton.next_power_of_2(max(nseq, 1)))
    return finish(KernelCall(euclidean_loss_grad_kernel, (triton.cdiv(numel, block),), (
        a2, b2, dloss if dloss is not None else dummy(x.device), o2, n, max(f, 1), _row_stride(a2),
        _row_stride(b2), _row_stride(o2), lengths if lengths is not None else dummy(x.device), nseq),
        dict(HAS_DLOSS=dloss is not None, MASKED=lengths is not None, BLOCK=block, BLOCK_L=block_l),
        dict(num_warps=num_warps), out), launch)
