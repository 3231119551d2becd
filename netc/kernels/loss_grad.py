"""Gradients of softmax and the losses. One program per row for the softmax ones (a row's
reductions stay in one program: deterministic, no atomics), an elementwise pass for the euclidean.

    softmax_grad         dx = y * (dy - sum(dy * y)), y the softmax output [N, C]: two passes over the
                         row in BLOCK_C chunks (the dot product, then the write)
    softmax_loss_grad    dx = (softmax(x) - t) / N * dloss, t the one-hot of the class index; soft or
                         one-hot targets [N, C]: softmax(x) * sum(t) - t. Pass 1: online max and sum
                         (as softmax.py), pass 2: the write. A label outside [0, C) gives a NaN row.
    euclidean_loss_grad  (x - y) / N * dloss for wrt=0, its negation (in y's shape) for wrt=1

Rows are read with their own strides (features contiguous), in any float dtype; dloss is an
optional 1-element tensor (the loss's incoming gradient, a scalar seed). netc keeps both loss
gradients f32 (their ops are f32_result): the default out_dtype.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import KernelCall, check_float, dummy, finish
from .loss import as_feature_rows, label_rows


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
def softmax_loss_grad_kernel(x_ptr, t_ptr, dloss_ptr, out_ptr, NB, C, stride_x, stride_t, stride_o,
                             ONE_HOT: tl.constexpr, HAS_DLOSS: tl.constexpr, BLOCK_C: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_C)
    x_row = x_ptr + row * stride_x
    m_i = tl.full((BLOCK_C,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_C,), dtype=tl.float32)
    st = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for c0 in range(0, C, BLOCK_C):
        m = c0 + offs < C
        x = tl.load(x_row + c0 + offs, mask=m, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m_i, x)
        m_ref = tl.where(m_new > float("-inf"), m_new, 0.0)
        l_i = l_i * tl.exp(m_i - m_ref) + tl.exp(x - m_ref)
        m_i = m_new
        if ONE_HOT:
            st += tl.load(t_ptr + row * stride_t + c0 + offs, mask=m, other=0).to(tl.float32)
    mx = tl.max(m_i, axis=0)
    inv = 1.0 / tl.sum(l_i * tl.exp(m_i - mx), axis=0)
    g = 1.0 / NB
    if HAS_DLOSS:
        g = g * tl.load(dloss_ptr).to(tl.float32)
    if ONE_HOT:
        inv_t = inv * tl.sum(st, axis=0)         # soft targets need not sum to one
    else:
        label = tl.load(t_ptr + row * stride_t).to(tl.float32)
        ok = (label >= 0.0) & (label < C) & (label == tl.floor(label))
        lab = tl.where(ok, label, -1.0).to(tl.int32)
        g = tl.where(ok, g, float("nan"))
    for c0 in range(0, C, BLOCK_C):
        cols = c0 + offs
        m = cols < C
        x = tl.load(x_row + cols, mask=m, other=float("-inf")).to(tl.float32)
        if ONE_HOT:
            t = tl.load(t_ptr + row * stride_t + cols, mask=m, other=0).to(tl.float32)
            d = tl.exp(x - mx) * inv_t - t
        else:
            d = tl.exp(x - mx) * inv - tl.where(cols == lab, 1.0, 0.0)
        tl.store(out_ptr + row * stride_o + cols, (d * g).to(out_ptr.dtype.element_ty), mask=m)


@triton.jit
def euclidean_loss_grad_kernel(x_ptr, y_ptr, dloss_ptr, out_ptr, NB, F, stride_x, stride_y, stride_o,
                               HAS_DLOSS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < NB * F
    r = offs // F
    c = offs % F
    x = tl.load(x_ptr + r * stride_x + c, mask=mask, other=0.0).to(tl.float32)
    y = tl.load(y_ptr + r * stride_y + c, mask=mask, other=0.0).to(tl.float32)
    g = 1.0 / NB       # the batch is a runtime argument (codegen: affine in it), not a baked-in scale
    if HAS_DLOSS:
        g = g * tl.load(dloss_ptr).to(tl.float32)
    tl.store(out_ptr + r * stride_o + c, ((x - y) * g).to(out_ptr.dtype.element_ty), mask=mask)


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


def softmax_loss_grad(x: torch.Tensor, labels: torch.Tensor, dloss=None, *, out=None, out_dtype=torch.float32,
                      block_c=None, num_warps=4, launch=True):
    """netc.softmax_loss_grad: logits x [N, ...] (flattened to [N, C]), labels as softmax_loss's (class
    indices [N] / [N, 1] of any integer dtype or integral floats, or one-hot / soft targets [N, C]),
    optional dloss (1 element) -> the gradient in x's shape (f32 by default)."""
    check_float(x, "x")
    if x.dim() < 2:
        raise ValueError(f"softmax_loss_grad needs logits of rank >= 2, got {list(x.shape)}")
    n = x.shape[0]
    x2 = as_feature_rows(x, "x")
    c = x2.shape[1]
    t2, one_hot, stride_t = label_rows(labels, n, c)
    out, o2 = _out_rows(out, x.shape, out_dtype or x.dtype, x.device)
    dloss = _dloss(dloss)
    block_c = block_c or min(4096, triton.next_power_of_2(max(c, 1)))
    return finish(KernelCall(softmax_loss_grad_kernel, (n,), (
        x2, t2, dloss if dloss is not None else dummy(x.device), o2, n, c, _row_stride(x2), stride_t, _row_stride(o2)),
        dict(ONE_HOT=bool(one_hot), HAS_DLOSS=dloss is not None, BLOCK_C=block_c), dict(num_warps=num_warps), out),
        launch)


def euclidean_loss_grad(x: torch.Tensor, y: torch.Tensor, dloss=None, wrt: int = 0, *, out=None,
                        out_dtype=torch.float32, block=1024, num_warps=4, launch=True):
    """netc.euclidean_loss_grad: d(0.5 * sum((x - y)^2) / N) / d(operand `wrt`) = +-(x - y) / N (* dloss),
    in that operand's shape (f32 by default). x and y: N rows of the same element count."""
    check_float(x, "x")
    check_float(y, "y")
    if wrt not in (0, 1):
        raise ValueError(f"wrt must be 0 or 1, got {wrt}")
    if x.dim() < 1 or y.dim() < 1 or x.shape[0] != y.shape[0] or x.numel() != y.numel():
        raise ValueError(f"euclidean_loss_grad needs inputs of the same batch and size, got {list(x.shape)} and "
                         f"{list(y.shape)}")
    n = x.shape[0]
    a, b = (x, y) if wrt == 0 else (y, x)          # d/dy = (y - x) / N
    out, o2 = _out_rows(out, a.shape, out_dtype or a.dtype, x.device)
    a2, b2 = as_feature_rows(a, "x" if wrt == 0 else "y"), as_feature_rows(b, "y" if wrt == 0 else "x")
    f = a2.shape[1]
    numel = n * f
    dloss = _dloss(dloss)
    block = min(block, triton.next_power_of_2(max(numel, 1)))
    return finish(KernelCall(euclidean_loss_grad_kernel, (triton.cdiv(numel, block),), (
        a2, b2, dloss if dloss is not None else dummy(x.device), o2, n, max(f, 1), _row_stride(a2),
        _row_stride(b2), _row_stride(o2)), dict(HAS_DLOSS=dloss is not None, BLOCK=block),
        dict(num_warps=num_warps), out), launch)
