"""Losses: netc.softmax_loss and netc.euclidean_loss, each a batch mean reduced to one scalar.

    softmax_loss    mean over rows of  logsumexp(x[r, :]) - x[r, label[r]]       (labels: class indices)
                    or                 sum_c y[r, c] * (logsumexp(x[r, :]) - x[r, c])   (one-hot / soft targets)
    euclidean_loss  0.5 * sum((x - y)^2) / N

One program does the whole reduction, so the result does not depend on how rows are split among
programs and needs no atomics (a loss reads [N, C] logits: small next to the layers before it).
It walks BLOCK_R rows at a time; for each tile of rows, the features in BLOCK_C chunks with an
online log-sum-exp (as softmax.py: a running max per row, the running sum rescaled when it grows),
the sum kept without the max's own exp(0) = 1, so logsumexp - max = log1p(that sum) keeps a saturated
row's small loss to f32's relative precision.
Rows and features are read with their own strides (features contiguous), in any float dtype,
accumulated in fp32. Labels are any integer dtype (or float holding integers: SINGA-style); a label
outside [0, C) makes the loss NaN rather than reading past the row. The scalar result is written in
out's dtype.

Sequences (netc/ops/loss.py): a per-step loss, logits [T, B, C] with labels [T, B], is these kernels over
the T*B steps as rows (views). With lengths [B] (MASKED: x, y time-major [T, B, ...] as [T*B, ...] rows,
row r step r // B of sample r % B), a row counts only on a valid step, r // B < lengths[r % B], and the sum
is divided by the valid steps, the sum of the lengths; lengths are clamped to [1, T] (a kernel cannot raise:
the reference and the data checks reject others), and a padding step's label is never read.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import KernelCall, check_float, dummy, finish

# a grid of one program at any batch b <= the compiled one: cdiv(1 * b, ONE_PROGRAM) = 1
ONE_PROGRAM = 1 << 30


@triton.jit
def step_valid(len_ptr, rows, mask_r, NB, NSEQ):
    """Whether row r of a masked loss's [T*B, ...] rows (step r // B of sample r % B, B = NSEQ) is a valid
    step: r // B < the sample's length, clamped to [1, T]."""
    b = rows % NSEQ
    n = tl.load(len_ptr + b, mask=mask_r, other=1).to(tl.int64)
    n = tl.minimum(tl.maximum(n, 1), NB // NSEQ)
    return rows // NSEQ < n


@triton.jit
def rows_counted(len_ptr, NB, NSEQ, MASKED: tl.constexpr, BLOCK: tl.constexpr):
    """The divisor of a loss's mean: NB rows, or (MASKED) the valid steps, the sum of the clamped lengths."""
    if MASKED:
        offs = tl.arange(0, BLOCK)
        acc = tl.zeros((BLOCK,), dtype=tl.int64)
        for b0 in range(0, NSEQ, BLOCK):
            m = b0 + offs < NSEQ
            n = tl.load(len_ptr + b0 + offs, mask=m, other=1).to(tl.int64)
            acc += tl.where(m, tl.minimum(tl.maximum(n, 1), NB // NSEQ), 0)
        return tl.sum(acc, axis=0).to(tl.float32)
    else:
        return NB * 1.0


@triton.jit
def log1p(r):
    """log(1 + r) for r >= 0 to f32's relative precision: log(u) * r / (u - 1), u = 1 + r rounded (the
    rounding error of u cancels; Goldberg, "What every computer scientist should know...", thm. 4);
    r itself where u rounds to 1."""
    u = 1.0 + r
    d = u - 1.0
    return tl.where(d == 0.0, r, tl.log(u) * (r / tl.where(d == 0.0, 1.0, d)))


@triton.jit
def softmax_loss_kernel(x_ptr, y_ptr, out_ptr, NB, C, stride_xm, stride_ym, len_ptr, NSEQ,
                        ONE_HOT: tl.constexpr, MASKED: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    offs_r = tl.arange(0, BLOCK_R)
    offs_c = tl.arange(0, BLOCK_C)
    total = tl.zeros((BLOCK_R,), dtype=tl.float32)
    for r0 in range(0, NB, BLOCK_R):
        rows = r0 + offs_r
        mask_r = rows < NB
        x_rows = x_ptr + rows.to(tl.int64) * stride_xm
        m_i = tl.full((BLOCK_R,), float("-inf"), dtype=tl.float32)
        r_i = tl.zeros((BLOCK_R,), dtype=tl.float32)    # sum of exp(x - max) less the max's own 1
        sy = tl.zeros((BLOCK_R,), dtype=tl.float32)     # one-hot: sum of the targets
        syx = tl.zeros((BLOCK_R,), dtype=tl.float32)    # one-hot: sum of target * logit
        for c0 in range(0, C, BLOCK_C):
            cols = c0 + offs_c
            m = mask_r[:, None] & (cols < C)[None, :]
            x = tl.load(x_rows[:, None] + cols[None, :], mask=m, other=float("-inf")).to(tl.float32)
            m_new = tl.maximum(m_i, tl.max(x, axis=1))
            # rows that have seen only -inf (masked rows) subtract 0 instead: -inf - -inf is nan
            m_ref = tl.where(m_new > float("-inf"), m_new, 0.0)
            # (a NaN logit is neither below nor a tie: its exp makes the row NaN, as it must)
            below = tl.sum(tl.where(x == m_new[:, None], 0.0, tl.exp(x - m_ref[:, None])), axis=1)
            ties = tl.sum(tl.where(x == m_new[:, None], 1.0, 0.0), axis=1)
            # a chunk that raises the max brings the new max's 1 (kept out of r) and rescales the old
            # 1 + r: alpha + alpha r, never 1 + r rounded
            alpha = tl.exp(m_i - m_ref)
            r_i = tl.where(m_new > m_i, alpha + alpha * r_i + below + (ties - 1.0), r_i + below + ties)
            m_i = m_new
            if ONE_HOT:
                y = tl.load(y_ptr + rows.to(tl.int64)[:, None] * stride_ym + cols[None, :], mask=m,
                            other=0).to(tl.float32)
                sy += tl.sum(y, axis=1)
                syx += tl.sum(y * tl.where(m, x, 0.0), axis=1)   # masked lanes: y = 0, x = -inf
        # the loss is (max - the label's logit) + log1p(r): adding the log term last keeps a saturated
        # row's small loss, which max + log(sum) would round away against the max, and log1p of r
        # keeps its relative precision, which log(1 + r) rounded in f32 loses (eps / r)
        mx = tl.where(mask_r, m_i, 0.0)
        lg = log1p(tl.where(mask_r, r_i, 0.0))
        lg = tl.where(mx < float("inf"), lg, float("nan"))   # a +inf logit: NaN (torch's), not inf
        if ONE_HOT:
            row_loss = (mx * sy - syx) + lg * sy
        else:
            label = tl.load(y_ptr + rows.to(tl.int64) * stride_ym, mask=mask_r, other=0)
            label_f = label.to(tl.float32)
            ok = (label_f >= 0.0) & (label_f < C) & (label_f == tl.floor(label_f))
            lab = tl.where(ok, label_f, 0.0).to(tl.int64)
            x_lab = tl.load(x_rows + lab, mask=mask_r & ok, other=0.0).to(tl.float32)
            row_loss = tl.where(ok, (mx - x_lab) + lg, float("nan"))
        if MASKED:
            mask_r = mask_r & step_valid(len_ptr, rows, mask_r, NB, NSEQ)
        total += tl.where(mask_r, row_loss, 0.0)
    loss = tl.sum(total, axis=0) / rows_counted(len_ptr, NB, NSEQ, MASKED, BLOCK_R)
    tl.store(out_ptr, loss.to(out_ptr.dtype.element_ty))


@triton.jit
def euclidean_loss_kernel(x_ptr, y_ptr, out_ptr, NB, F, stride_xm, stride_ym, len_ptr, NSEQ,
                          MASKED: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    offs_r = tl.arange(0, BLOCK_R)
    offs_c = tl.arange(0, BLOCK_C)
    acc = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
    for r0 in range(0, NB, BLOCK_R):
        rows = (r0 + offs_r).to(tl.int64)
        mask_r = rows < NB
        if MASKED:
            mask_r = mask_r & step_valid(len_ptr, rows, mask_r, NB, NSEQ)
        for c0 in range(0, F, BLOCK_C):
            cols = c0 + offs_c
            m = mask_r[:, None] & (cols < F)[None, :]
            x = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :], mask=m, other=0.0).to(tl.float32)
            y = tl.load(y_ptr + rows[:, None] * stride_ym + cols[None, :], mask=m, other=0.0).to(tl.float32)
            d = x - y
            acc += d * d
    loss = 0.5 * tl.sum(tl.sum(acc, axis=1), axis=0) / rows_counted(len_ptr, NB, NSEQ, MASKED, BLOCK_R)
    tl.store(out_ptr, loss.to(out_ptr.dtype.element_ty))


def as_feature_rows(t: torch.Tensor, what: str) -> torch.Tensor:
    """t as [N, F] rows with contiguous features (a view; raises for layouts that would need a copy)."""
    n = t.shape[0]
    f = t.numel() // n if n else 0
    try:
        t2 = t.view(n, f)
    except RuntimeError:
        raise ValueError(f"{what} {list(t.shape)} with strides {t.stride()} cannot be viewed as [{n}, {f}] rows") \
            from None
    if f > 1 and t2.stride(1) != 1:
        raise ValueError(f"{what} needs contiguous features (stride 1), got strides {t2.stride()}")
    return t2


def label_rows(labels: torch.Tensor, n: int, c: int) -> tuple:
    """The labels of n rows of c logits, checked, as (rows, one_hot, row stride): class indices [N] /
    [N, 1] (any integer dtype, or floats holding integers) or one-hot / soft targets [N, C]; the loss
    kernel and its gradient read them alike."""
    if labels.dim() == 0 or labels.shape[0] != n:
        raise ValueError(f"labels {list(labels.shape)} must have the logits' batch {n}")
    if labels.dtype == torch.bool or labels.is_complex():
        raise TypeError(f"labels must be integers or floats, got {labels.dtype}")
    per = labels.numel() // n if n else 0
    one_hot = per == c and c != 1
    if not one_hot and per != 1:
        raise ValueError(f"labels {list(labels.shape)} must be class indices [N] / [N, 1] or one-hot [N, {c}]")
    rows = as_feature_rows(labels, "labels") if labels.dim() >= 2 else labels
    return rows, one_hot, (rows.stride(0) if n > 1 else per)


def _tiles(nb: int, f: int, block_r, block_c):
    block_c = block_c or min(1024, triton.next_power_of_2(max(f, 1)))
    block_r = block_r or max(1, min(triton.next_power_of_2(max(nb, 1)), 4096 // block_c))
    return block_r, block_c


def _loss_out(out, out_dtype, device) -> torch.Tensor:
    """The loss's destination: a new 0-d tensor, or the caller's (any 1-element float tensor)."""
    if out is None:
        out = torch.empty((), dtype=out_dtype, device=device)
    elif out.numel() != 1:
        raise ValueError(f"out must hold one element (the loss), got {list(out.shape)}")
    check_float(out, "out")
    return out


def steps_as_rows(x: torch.Tensor, y: torch.Tensor, lengths, what: str) -> tuple:
    """A masked loss's operands as rows: x [T, B, ...] -> [T*B, ...] and y likewise (views), lengths [B]
    checked (int32/int64, contiguous). Without lengths, x and y as they are."""
    if lengths is None:
        return x, y, None
    if x.dim() < 2:
        raise ValueError(f"{what} with lengths reads time-major inputs [T, B, ...], got {list(x.shape)}")
    t, b = x.shape[0], x.shape[1]
    if lengths.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"lengths must be int32 or int64, got {lengths.dtype}")
    if lengths.numel() != b or (b > 1 and lengths.reshape(-1).stride(0) != 1):
        raise ValueError(f"lengths must be [B] = [{b}] (contiguous), got {list(lengths.shape)}")
    if y.dim() < 2 or tuple(y.shape[:2]) != (t, b):
        raise ValueError(f"{what}'s second input must be time-major [{t}, {b}, ...] like the first, got {list(y.shape)}")
    rows = lambda v: v.reshape((t * b,) + tuple(v.shape[2:])) if v.dim() > 2 else v.reshape(t * b)  # noqa: E731
    return rows(x), rows(y), lengths.reshape(b)


def softmax_loss(x: torch.Tensor, labels: torch.Tensor, lengths=None, *, out=None, out_dtype=torch.float32,
                 block_r=None, block_c=None, num_warps=4, launch=True):
    """netc's softmax_loss: logits x [N, ...] (flattened to [N, C]), labels [N] / [N, 1] class indices
    (any integer dtype, or floats holding integers) or [N, C] one-hot / soft targets. Returns the
    mean loss as a 0-d tensor (or writes `out`, any 1-element tensor). With lengths [B] (int32/int64):
    x [T, B, ...] and labels [T, B] / [T, B, 1] / [T, B, C] per step, the mean over the valid steps
    (t < lengths[b], lengths clamped to [1, T]); a per-step loss without lengths is this on [T*B, C] rows."""
    check_float(x, "x")
    b = x.shape[1] if lengths is not None and x.dim() > 1 else 1
    x, labels, lengths = steps_as_rows(x, labels, lengths, "softmax_loss")
    if x.dim() < 2:
        raise ValueError(f"softmax_loss needs logits of rank >= 2, got {list(x.shape)}")
    n = x.shape[0]
    x2 = as_feature_rows(x, "x")
    c = x2.shape[1]
    y2, one_hot, stride_ym = label_rows(labels, n, c)
    out = _loss_out(out, out_dtype, x.device)
    block_r, block_c = _tiles(n, c, block_r, block_c)
    return finish(KernelCall(softmax_loss_kernel, (1,), (x2, y2, out, n, c, x2.stride(0) if n > 1 else c, stride_ym,
                                                         lengths if lengths is not None else dummy(x.device), b),
                             dict(ONE_HOT=bool(one_hot), MASKED=lengths is not None, BLOCK_R=block_r, BLOCK_C=block_c),
                             dict(num_warps=num_warps), out), launch)


def euclidean_loss(x: torch.Tensor, y: torch.Tensor, lengths=None, *, out=None, out_dtype=torch.float32, block_r=None,
                   block_c=None, num_warps=4, launch=True):
    """netc's euclidean_loss: 0.5 * sum((x - y)^2) / N for x and y with N rows of the same element
    count. Returns a 0-d tensor (or writes `out`, any 1-element tensor). With lengths [B] (int32/int64):
    x and y time-major [T, B, ...], the sum over the valid steps (t < lengths[b], clamped to [1, T]) / their
    count."""
    check_float(x, "x")
    check_float(y, "y")
    b = x.shape[1] if lengths is not None and x.dim() > 1 else 1
    x, y, lengths = steps_as_rows(x, y, lengths, "euclidean_loss")
    if x.dim() < 1 or y.dim() < 1 or x.shape[0] != y.shape[0] or x.numel() != y.numel():
        raise ValueError(f"euclidean_loss needs inputs of the same batch and size, got {list(x.shape)} and "
                         f"{list(y.shape)}")
    n = x.shape[0]
    x2, y2 = as_feature_rows(x, "x"), as_feature_rows(y, "y")
    f = x2.shape[1]
    out = _loss_out(out, out_dtype, x.device)
    block_r, block_c = _tiles(n, f, block_r, block_c)
    return finish(KernelCall(euclidean_loss_kernel, (1,), (x2, y2, out, n, f, x2.stride(0) if n > 1 else f,
                                                           y2.stride(0) if n > 1 else f,
                                                           lengths if lengths is not None else dummy(x.device), b),
                             dict(MASKED=lengths is not None, BLOCK_R=block_r, BLOCK_C=block_c),
                             dict(num_warps=num_warps), out), launch)
