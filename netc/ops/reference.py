"""float64 torch references of netc's ops, with exactly netc's semantics (the oracle: each OpDef's
reference() computes with these, and every kernel in netc/kernels is tested against them): NHWC activations, HWIO
filters, Paleo's VALID/SAME/explicit padding (SAME may pad asymmetrically, more at the bottom/right,
or even crop: a negative pad), the epilogue order of common.py, and these pooling rules:

  maxpool  the max over the in-bounds elements of each window (padding never wins);
  avgpool  the sum over the in-bounds elements divided by their count (padding excluded, as Paleo
           and TensorFlow do for SAME); count_include_pad=True divides by KH*KW instead.
  A window with no in-bounds element (only possible with explicit padding >= the window) gives 0.

Every function takes tensors of any float dtype and returns float64; inside computing_in(dtype)
they compute and return `dtype` instead (--compare's f32 reference: the arithmetic of a plain f32
implementation, eager PyTorch's, whose error against the f64 oracle says what f32 can hold).
"""
from __future__ import annotations

import contextlib
import contextvars

import numpy as np
import torch
import torch.nn.functional as F

from .geometry import pair, window_geometry  # noqa: F401  (pair: for the launchers' tests)

_COMPUTE = contextvars.ContextVar("netc_reference_compute", default=torch.float64)


@contextlib.contextmanager
def _setting(var: contextvars.ContextVar, value):
    """`var` holds `value` while this is active."""
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


def computing_in(dtype):
    """The references compute in `dtype` (not float64) while this is active."""
    return _setting(_COMPUTE, dtype)


def compute_dtype():
    """The references' compute dtype: float64, or computing_in's."""
    return _COMPUTE.get()


def in_compute_dtype(t):
    """t in the references' compute dtype: float64, or computing_in's."""
    return None if t is None else t.to(_COMPUTE.get())


_TF32 = contextvars.ContextVar("netc_reference_tf32", default=False)


def tf32_products():
    """While active, the forward matrix products (convolutions, inner products) truncate their operands
    to TF32 -- 10 mantissa bits -- as tensor cores read f32 registers for a network compiled with --tf32
    (and as netc's kernels do under Triton's interpreter, docs/precision.md); the products and sums stay
    in the compute dtype. The gradients' products are not truncated."""
    return _setting(_TF32, True)


def product_operand(t):
    """A forward matrix product's operand: in_compute_dtype, truncated to TF32 inside tf32_products."""
    t = in_compute_dtype(t)
    if t is None or not _TF32.get():
        return t
    bits = t.to(torch.float32).contiguous().view(torch.int32) & ~0x1FFF     # the 13 low mantissa bits dropped
    return bits.view(torch.float32).to(t.dtype)


def pads(h: int, w: int, kh: int, kw: int, sh: int, sw: int, padding):
    """(oh, ow, top, bottom, left, right): the zero padding that makes a VALID window sweep give
    exactly netc's output size. Negative values crop."""
    oh, ow, ph, pw = window_geometry(h, w, kh, kw, sh, sw, padding)
    return oh, ow, ph, (oh - 1) * sh + kh - h - ph, pw, (ow - 1) * sw + kw - w - pw


def _pad_nchw(x, top, bottom, left, right, value=0.0):
    return F.pad(x, (left, right, top, bottom), value=value)


def activation(y, act="none", negative_slope=0.0):
    if act in (None, "none", 0):
        return y
    if act in ("relu", 1):
        return torch.relu(y)
    if act in ("sigmoid", 2):
        return torch.sigmoid(y)
    if act in ("tanh", 3):
        return torch.tanh(y)
    if act in ("leaky_relu", 4):
        return torch.where(y < 0, y * negative_slope, y)
    raise ValueError(f"unknown activation {act!r}")


def epilogue(y, bias=None, scale=None, shift=None, residual=None, activation_="none",
             residual_after_act=False, negative_slope=0.0):
    """act(((y + bias) * scale + shift) [+ residual]) [+ residual]; per-channel vectors on the last axis."""
    y = in_compute_dtype(y)
    if bias is not None:
        y = y + in_compute_dtype(bias)
    if scale is not None:
        y = y * in_compute_dtype(scale) + in_compute_dtype(shift)
    if residual is not None and not residual_after_act:
        y = y + in_compute_dtype(residual)
    y = activation(y, activation_, negative_slope)
    if residual is not None and residual_after_act:
        y = y + in_compute_dtype(residual)
    return y


def conv2d(x, w, bias=None, strides=(1, 1, 1, 1), padding="SAME", activation="none", scale=None,
           shift=None, residual=None, residual_after_act=False, negative_slope=0.0):
    """netc's conv2d: x NHWC, w HWIO [kh, kw, c_in, c_out], Paleo padding, then the epilogue."""
    x, w = product_operand(x), product_operand(w)
    kh, kw = w.shape[0], w.shape[1]
    sh, sw = pair(strides, "strides")
    oh, ow, t, b, l, r = pads(x.shape[1], x.shape[2], kh, kw, sh, sw, padding)
    xp = _pad_nchw(x.permute(0, 3, 1, 2), t, b, l, r)
    # a contiguous weight: torch's CPU conv2d backward (autograd, the oracle) refuses a permuted weight
    # together with a permuted input ("slow_conv2d: grad_weight must be contiguous")
    y = F.conv2d(xp, w.permute(3, 2, 0, 1).contiguous(), stride=(sh, sw)).permute(0, 2, 3, 1)
    assert y.shape[1:3] == (oh, ow), (y.shape, oh, ow)
    return epilogue(y, bias, scale, shift, residual, activation, residual_after_act, negative_slope)


def gemm(a, b, bias=None, activation="none", scale=None, shift=None, residual=None,
         residual_after_act=False, negative_slope=0.0):
    return epilogue(product_operand(a) @ product_operand(b), bias, scale, shift, residual, activation, residual_after_act,
                    negative_slope)


def inner_product(x, w, bias=None, **epi):
    """y = x.reshape(N, K) @ w[K, M] + bias."""
    return gemm(x.reshape(x.shape[0], -1), w, bias, **epi)


def _pool(x, ksize, strides, padding):
    kh, kw = pair(ksize, "ksize")
    sh, sw = pair(strides, "strides")
    x = in_compute_dtype(x).permute(0, 3, 1, 2)
    oh, ow, t, b, l, r = pads(x.shape[2], x.shape[3], kh, kw, sh, sw, padding)
    return x, (kh, kw), (sh, sw), (t, b, l, r), (oh, ow)


def maxpool(x, ksize, strides=(1, 1, 1, 1), padding="VALID"):
    x, k, s, p, (oh, ow) = _pool(x, ksize, strides, padding)
    y = F.max_pool2d(_pad_nchw(x, *p, value=float("-inf")), k, s)
    y = torch.where(_count(x, k, s, p) > 0, y, 0.0)
    assert y.shape[2:] == (oh, ow)
    return y.permute(0, 2, 3, 1)


def _count(x, k, s, p):
    """The number of in-bounds elements in each window, [1, 1, OH, OW]."""
    ones = torch.ones_like(x[:1, :1])
    return F.avg_pool2d(_pad_nchw(ones, *p), k, s) * (k[0] * k[1])


def avgpool(x, ksize, strides=(1, 1, 1, 1), padding="VALID", count_include_pad=False):
    x, k, s, p, (oh, ow) = _pool(x, ksize, strides, padding)
    total = F.avg_pool2d(_pad_nchw(x, *p), k, s) * (k[0] * k[1])
    if count_include_pad:
        y = total / (k[0] * k[1])
    else:
        count = _count(x, k, s, p)
        y = torch.where(count > 0, total / count.clamp(min=1), 0.0)
    assert y.shape[2:] == (oh, ow)
    return y.permute(0, 2, 3, 1)


def lrn(x, local_size=5, alpha=1e-4, beta=0.75, knorm=1.0):
    """Across channels (the last axis): x / (knorm + alpha/local_size * sum_{|d|<=n//2} x[c+d]^2)^beta,
    the window clipped at the first and last channel."""
    x = in_compute_dtype(x)
    half = local_size // 2
    sq = F.pad(x * x, (half, half))
    s = sum(sq[..., d:d + x.shape[-1]] for d in range(local_size))
    return x / (knorm + alpha / local_size * s) ** beta


def softmax(x):
    """Softmax over the flattened features: [N, ...] -> [N, prod(...)]."""
    return torch.softmax(in_compute_dtype(x).reshape(x.shape[0], -1), dim=1)


def softmax_loss(x, labels):
    """Mean over the batch of the cross-entropy of softmax(x) (x flattened to [N, C]) against class
    indices [N] / [N, 1] (integers, or floats holding integers) or one-hot / soft targets [N, C]."""
    logp = torch.log_softmax(in_compute_dtype(x).reshape(x.shape[0], -1), dim=1)
    n, c = logp.shape
    if labels.numel() == n and c != 1:
        return -logp.gather(1, labels.reshape(-1, 1).long()).mean()
    return -(in_compute_dtype(labels).reshape(logp.shape) * logp).sum(1).mean()


def euclidean_loss(x, y):
    """0.5 * sum((x - y)^2) / N, y reshaped to x's shape (same element count)."""
    x = in_compute_dtype(x)
    return 0.5 * ((x - in_compute_dtype(y).reshape(x.shape)) ** 2).sum() / x.shape[0]


def elementwise(operation, inputs):
    """netc's elementwise op over same-shaped inputs: 'sum', 'product' or 'max'."""
    xs = [in_compute_dtype(t) for t in inputs]
    y = xs[0]
    for t in xs[1:]:
        y = {"sum": torch.add, "product": torch.mul, "max": torch.maximum}[operation](y, t)
    return y


def relu(x, negative_slope=0.0):
    return activation(in_compute_dtype(x), "leaky_relu" if negative_slope else "relu", negative_slope)


def sigmoid(x):
    return torch.sigmoid(in_compute_dtype(x))


def tanh(x):
    return torch.tanh(in_compute_dtype(x))


def batch_norm(x, scale, shift):
    """Inference batch norm, folded: x * scale[c] + shift[c] over the last (channel) axis."""
    return in_compute_dtype(x) * in_compute_dtype(scale) + in_compute_dtype(shift)


def elementwise_chain(x, ops):
    """The reference of kernels.elementwise.elementwise_chain: apply `ops` (see there) in order."""
    y = in_compute_dtype(x)
    for op in ops:
        name, args = (op, ()) if isinstance(op, str) else (op[0], tuple(op[1:]))
        if name in ("relu", "sigmoid", "tanh"):
            y = activation(y, name)
        elif name == "leaky_relu":
            y = activation(y, name, args[0])
        elif name in ("add", "mul", "max"):
            o = args[0]
            o = in_compute_dtype(o) if torch.is_tensor(o) else o
            y = {"add": torch.add, "mul": torch.mul, "max": torch.maximum}[name](
                y, o if torch.is_tensor(o) else torch.tensor(o, dtype=torch.float64))
        elif name == "scale_shift":
            sc, sh = (in_compute_dtype(a) if torch.is_tensor(a) else a for a in args)
            y = y * sc + sh
        else:
            raise ValueError(f"unknown elementwise op {name!r}")
    return y


# --------------------------------------------------------------------------- checking kernels against these

TOLERANCES = {torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 1.6e-2, torch.float64: 1e-10}


def check(actual, expected, dtype=None, rtol=None, atol=None, what="output"):
    """Assert a kernel's output matches a float64 reference: first that no element was left unwritten
    (tests poison outputs with NaN; the references have none), then closeness with the dtype's
    tolerance (of `dtype`, default actual's): rtol, and atol = rtol * max(1, max|expected|)."""
    a = actual.detach().to("cpu", torch.float64)
    e = expected.detach().to("cpu", torch.float64)
    assert a.shape == e.shape, f"{what}: shape {list(a.shape)} != reference {list(e.shape)}"
    unwritten = torch.isnan(a) & ~torch.isnan(e)
    assert not unwritten.any(), (f"{what}: {int(unwritten.sum())} of {a.numel()} elements are NaN "
                                 f"(unwritten?), first at {tuple(unwritten.nonzero()[0].tolist())}")
    tol = TOLERANCES[dtype or actual.dtype]
    rtol = tol if rtol is None else rtol
    atol = rtol * max(1.0, float(e.abs().max()) if e.numel() else 1.0) if atol is None else atol
    torch.testing.assert_close(a, e, rtol=rtol, atol=atol, msg=lambda m: f"{what}: {m}")


# --------------------------------------------------------------------------- gradients
# Hand-written adjoints of the functions above (float64). They never call torch.autograd: autograd
# over the forward functions is the independent oracle they are checked against
# (tests/test_gradients.py, `netc run --train --check-grads`).

# SINGA's scaled tanh (kSTanh, activation STANH): A tanh(B x), mshadow's stanh (include/mshadow/cxxnet_op.h:79 in
# SINGA 0.1-0.3, LeCun's constants); netc.stanh (ops/activation.py); the kernels' activation code 5 spells them out
STANH_A, STANH_B = 1.7159047, 0.66666667


def activation_grad(y, dy, act="none", negative_slope=0.0):
    """d act(z) / dz * dy, from the activation's output y (every netc activation's derivative is a
    function of its output)."""
    y, dy = in_compute_dtype(y), in_compute_dtype(dy)
    if act in (None, "none"):
        return dy
    if act == "relu":
        return torch.where(y > 0, dy, dy * negative_slope if negative_slope else torch.zeros_like(dy))
    if act == "sigmoid":
        return dy * y * (1 - y)
    if act == "tanh":
        return dy * (1 - y * y)
    if act == "stanh":      # SINGA's scaled tanh A tanh(B z): B (A - y^2 / A)
        return dy * STANH_B * (STANH_A - y * y / STANH_A)
    raise ValueError(f"unknown activation {act!r}")


def bias_grad(dz):
    """The gradient of a per-channel bias: dz summed over every axis but the last."""
    dz = in_compute_dtype(dz)
    return dz.reshape(-1, dz.shape[-1]).sum(0)


def conv2d_grad_data(dz, w, input_shape, strides=(1, 1, 1, 1), padding="SAME"):
    """The adjoint of conv2d's x -> y (before bias and activation): dz [N, OH, OW, CO], w HWIO ->
    dx [N, H, W, CI]. A transposed convolution over the padded input, then the padding undone (a
    pad that cropped the input in the forward gives those rows no gradient)."""
    dz, w = in_compute_dtype(dz), in_compute_dtype(w)
    _, h, wd, _ = input_shape
    kh, kw = w.shape[0], w.shape[1]
    sh, sw = pair(strides, "strides")
    _, _, t, b, l, r = pads(h, wd, kh, kw, sh, sw, padding)
    dxp = F.conv_transpose2d(dz.permute(0, 3, 1, 2), w.permute(3, 2, 0, 1), stride=(sh, sw))
    return F.pad(dxp, (-l, -r, -t, -b)).permute(0, 2, 3, 1)


def conv2d_grad_filter(x, dz, filter_hw, strides=(1, 1, 1, 1), padding="SAME"):
    """The gradient of conv2d's filter: x NHWC, dz [N, OH, OW, CO] -> dW [KH, KW, CI, CO]:
    dW[i, j, c, k] = sum over n, p, q of xpad[n, p*sh + i, q*sw + j, c] * dz[n, p, q, k], computed as a
    correlation of the padded input with dz as the filter (the batch as the channel axis, the
    stride as the filter's dilation), cut to the window."""
    x, dz = in_compute_dtype(x), in_compute_dtype(dz)
    kh, kw = filter_hw
    sh, sw = pair(strides, "strides")
    n, h, wd, ci = x.shape
    _, _, t, b, l, r = pads(h, wd, kh, kw, sh, sw, padding)
    xp = _pad_nchw(x.permute(0, 3, 1, 2), t, b, l, r).transpose(0, 1)        # [CI, N, Hp, Wp]
    f = dz.permute(3, 0, 1, 2)                                               # [CO, N, OH, OW]
    dw = F.conv2d(xp, f, dilation=(sh, sw))[:, :, :kh, :kw]                  # [CI, CO, >=KH, >=KW]
    return dw.permute(2, 3, 0, 1).contiguous()


def inner_product_grad_data(dz, w, input_shape):
    """dx = dz W^T, reshaped to the (unflattened) input's shape."""
    return (in_compute_dtype(dz) @ in_compute_dtype(w).T).reshape(tuple(input_shape))


def inner_product_grad_filter(x, dz):
    """dW = x^T dz with x flattened to [N, K]."""
    x = in_compute_dtype(x)
    return x.reshape(x.shape[0], -1).T @ in_compute_dtype(dz)


def softmax_loss_grad(x, labels, dloss=None):
    """d softmax_loss / d logits: (softmax(x) - target) / N, in x's shape; times dloss if given."""
    x = in_compute_dtype(x)
    n = x.shape[0]
    p = torch.softmax(x.reshape(n, -1), dim=1)
    if labels.numel() == n and p.shape[1] != 1:
        target = torch.zeros_like(p)
        target[torch.arange(n, device=target.device), labels.reshape(-1).long().to(target.device)] = 1.0
    else:
        target = in_compute_dtype(labels).reshape(p.shape)
        # soft targets need not sum to one: d/dx of -(t . log_softmax(x)) = p * sum(t) - t
        p = p * target.sum(1, keepdim=True)
    g = (p - target) / n
    if dloss is not None:
        g = g * in_compute_dtype(dloss)
    return g.reshape(x.shape)


def euclidean_loss_grad(x, y, wrt=0, dloss=None):
    """d euclidean_loss / d x = (x - y) / N (in x's shape), d / d y = -(x - y) / N (in y's shape)."""
    x = in_compute_dtype(x)
    d = (x - in_compute_dtype(y).reshape(x.shape)) / x.shape[0]
    if dloss is not None:
        d = d * in_compute_dtype(dloss)
    return d if wrt == 0 else (-d).reshape(y.shape)


def _windows(x, k, s, p, fill):
    """Every pooling window of x (NCHW, padded with `fill`): [N, C, KH*KW, L]."""
    n, c = x.shape[:2]
    cols = F.unfold(_pad_nchw(x, *p, value=fill), k, stride=s)            # [N, C*KH*KW, L]
    return cols.reshape(n, c, k[0] * k[1], -1)


def _fold_back(cols, x_shape, k, s, p):
    """The adjoint of _windows: [N, C, KH*KW, L] summed back onto the (unpadded) NCHW input."""
    n, c, h, w = x_shape
    t, b, l, r = p
    hp, wp = h + t + b, w + l + r
    full = F.fold(cols.reshape(n, c * k[0] * k[1], -1), (hp, wp), k, stride=s)
    return F.pad(full, (-l, -r, -t, -b))


def maxpool_grad(x, dy, ksize, strides=(1, 1, 1, 1), padding="VALID"):
    """d maxpool / d x: each window's gradient goes to its maximum (the first, in row-major window
    order, where several are equal); windows without an in-bounds element pass none."""
    xn, k, s, p, (oh, ow) = _pool(x, ksize, strides, padding)
    cols = _windows(xn, k, s, p, float("-inf"))
    arg = cols.argmax(dim=2, keepdim=True)
    valid = torch.isfinite(cols.amax(dim=2, keepdim=True))
    g = in_compute_dtype(dy).permute(0, 3, 1, 2).reshape(xn.shape[0], xn.shape[1], 1, -1)
    routed = torch.zeros_like(cols).scatter_(2, arg, torch.where(valid, g, 0.0))
    return _fold_back(routed, xn.shape, k, s, p).permute(0, 2, 3, 1)


def avgpool_grad(dy, input_shape, ksize, strides=(1, 1, 1, 1), padding="VALID", count_include_pad=False):
    """d avgpool / d x: each window's gradient divided by its count, spread over its in-bounds elements."""
    n, h, w, c = input_shape
    shape_nchw = (n, c, h, w)
    kh, kw = pair(ksize, "ksize")
    sh, sw = pair(strides, "strides")
    oh, ow, t, b, l, r = pads(h, w, kh, kw, sh, sw, padding)
    k, s, p = (kh, kw), (sh, sw), (t, b, l, r)
    g = in_compute_dtype(dy).permute(0, 3, 1, 2)
    if count_include_pad:
        g = g / (kh * kw)
    else:
        count = _count(torch.zeros(shape_nchw, dtype=torch.float64, device=dy.device), k, s, p)
        g = torch.where(count > 0, g / count.clamp(min=1), 0.0)
    cols = g.reshape(n, c, 1, -1).expand(n, c, kh * kw, oh * ow)
    return _fold_back(cols, shape_nchw, k, s, p).permute(0, 2, 3, 1)


def lrn_grad(x, y, dy, local_size=5, alpha=1e-4, beta=0.75, knorm=1.0):
    """d lrn / d x. With s_c = knorm + alpha/n * sum_{|d|<=n//2} x[c+d]^2 (clipped at the ends) and
    y_c = x_c * s_c^-beta: dx_j = dy_j * s_j^-beta - 2*beta*alpha/n * x_j * sum_{c: |c-j|<=n//2} dy_c * y_c / s_c
    (the window relation is symmetric, so the last sum is the same clipped window sum)."""
    x, y, dy = in_compute_dtype(x), in_compute_dtype(y), in_compute_dtype(dy)
    half, c = local_size // 2, x.shape[-1]

    def window_sum(t):
        p = F.pad(t, (half, half))
        return sum(p[..., d:d + c] for d in range(local_size))

    s = knorm + alpha / local_size * window_sum(x * x)
    return dy * s ** -beta - (2 * beta * alpha / local_size) * x * window_sum(dy * y / s)


# Training forms (batch statistics and running statistics, dropout masks) with their gradients. The
# dropout masks' random bits are Triton's Philox (below), so the reference draws a kernel's masks.

def _channels(x):
    """x as [M, C]: every axis but the last (the channels) flattened."""
    x = in_compute_dtype(x)
    return x.reshape(-1, x.shape[-1])


def batch_stats(x):
    """(mean, biased variance) per channel (the last axis) over every other axis."""
    xm = _channels(x)
    mean = xm.sum(0) / xm.shape[0]
    return mean, ((xm - mean) ** 2).sum(0) / xm.shape[0]


def batch_norm_train(x, mean, var, scale, shift, epsilon=1e-5):
    """Batch norm with given statistics: (x - mean) / sqrt(var + epsilon) * scale + shift, per channel."""
    return (in_compute_dtype(x) - in_compute_dtype(mean)) / torch.sqrt(in_compute_dtype(var) + epsilon) * in_compute_dtype(scale) + in_compute_dtype(shift)


def running_stats_update(old_mean, old_var, mean, var, count, momentum=0.9):
    """The running statistics after one training step: new = momentum * old + (1 - momentum) * batch,
    the batch variance made unbiased (times count / (count - 1), count the elements per channel; a
    count of 1 keeps the biased one, 0). torch's `momentum` is 1 - this one."""
    unbiased = in_compute_dtype(var) * (count / (count - 1) if count > 1 else 1.0)
    return (momentum * in_compute_dtype(old_mean) + (1 - momentum) * in_compute_dtype(mean),
            momentum * in_compute_dtype(old_var) + (1 - momentum) * unbiased)


def batch_norm_grad(x, mean, var, dy, scale, epsilon=1e-5, batch_stats=True, sums=None, count=0):
    """d batch_norm_train / d x. With the batch's statistics (mean and var computed from x, M elements
    per channel, xhat = (x - mean) * rstd): dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),
    dxhat = dy * scale. With constant (given) statistics: dx = dy * scale * rstd. With `sums` (the
    sums of dy and of dy * xhat over a whole batch of `count` elements per channel, x one shard of it):
    the means are those sums' (times scale) over count."""
    shape = x.shape
    xm, dym = _channels(x), _channels(dy)
    rstd = 1.0 / torch.sqrt(in_compute_dtype(var) + epsilon)
    dxhat = dym * in_compute_dtype(scale)
    if not batch_stats:
        return (dxhat * rstd).reshape(shape)
    xhat = (xm - in_compute_dtype(mean)) * rstd
    if sums is not None:
        sc = in_compute_dtype(scale)
        s1, s2 = (in_compute_dtype(s) for s in sums)
        dx = rstd * (dxhat - sc * s1 / count - xhat * sc * s2 / count)
        return dx.reshape(shape)
    m = xm.shape[0]
    dx = rstd * (dxhat - dxhat.sum(0) / m - xhat * (dxhat * xhat).sum(0) / m)
    return dx.reshape(shape)


def batch_norm_grad_scale(x, mean, var, dy, epsilon=1e-5):
    """d batch_norm_train / d scale: sum(dy * xhat) per channel (d shift is bias_grad(dy))."""
    xhat = (_channels(x) - in_compute_dtype(mean)) / torch.sqrt(in_compute_dtype(var) + epsilon)
    return (_channels(dy) * xhat).sum(0)


# Philox4x32-10 as Triton's tl.randint / tl.rand compute it (triton/language/random.py), so that the
# reference's dropout masks are the ones a kernel draws: for a scalar seed and a block of offsets,
# counter (offset_lo, offset_hi, 0, 0), key (seed_lo, seed_hi) of the seed as uint64, ten rounds, the
# first word; tl.rand turns it into a float32 in [0, 1): x as int32, ~x where negative, times
# 4.6566127342e-10 (both in float32).
_PHILOX_ROUND_A, _PHILOX_ROUND_B = 0xD2511F53, 0xCD9E8D57
_PHILOX_KEY_A, _PHILOX_KEY_B = 0x9E3779B9, 0xBB67AE85


def philox4x32(seed: int, c0, c1, c2, c3, rounds: int = 10):
    """Philox4x32 (Salmon et al., 2011) on uint32 numpy arrays, key = the uint64 seed's (low, high) words."""
    u64, mask = np.uint64, np.uint64(0xFFFFFFFF)
    seed %= 2 ** 64
    k0 = np.full(np.shape(c0), seed & 0xFFFFFFFF, dtype=u64)
    k1 = np.full(np.shape(c0), seed >> 32, dtype=u64)
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint32).astype(u64) for c in (c0, c1, c2, c3))
    for _ in range(rounds):
        p0, p2 = u64(_PHILOX_ROUND_A) * c0, u64(_PHILOX_ROUND_B) * c2      # exact: < 2**64
        c0, c1, c2, c3 = (p2 >> u64(32)) ^ c1 ^ k0, p2 & mask, (p0 >> u64(32)) ^ c3 ^ k1, p0 & mask
        k0, k1 = (k0 + u64(_PHILOX_KEY_A)) & mask, (k1 + u64(_PHILOX_KEY_B)) & mask
    return tuple(c.astype(np.uint32) for c in (c0, c1, c2, c3))


def tl_randint(seed: int, offsets):
    """Triton's tl.randint(seed, offsets) for int64 offsets (a numpy array): uint32 bits."""
    off = np.asarray(offsets).astype(np.int64).view(np.uint64)
    lo = (off & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    hi = (off >> np.uint64(32)).astype(np.uint32)
    zero = np.zeros_like(lo)
    return philox4x32(seed, lo, hi, zero, zero)[0]


def tl_rand(seed: int, offsets):
    """Triton's tl.rand(seed, offsets) for int64 offsets: float32 in [0, 1), bit for bit."""
    x = tl_randint(seed, offsets).view(np.int32)
    x = np.where(x < 0, ~x, x)
    return x.astype(np.float32) * np.float32(4.6566127342e-10)


def dropout_offsets(salt: int, n: int, offset: int = 0):
    """The Philox offsets of a dropout mask's n elements: salt * 2**32 + the row-major element index,
    as int64 (the counter's high word is the salt, its low word the index; n <= 2**32)."""
    if n + offset > 2 ** 32:
        raise ValueError(f"a dropout mask of {n} elements exceeds the 2**32 counters of one salt")
    base = ((int(salt) % 2 ** 32) << 32) + int(offset)
    return (np.uint64(base) + np.arange(n, dtype=np.uint64)).view(np.int64)


def dropout_mask(seed: int, shape, keep_prob: float, salt: int, offset: int = 0):
    """The dropout mask a kernel draws with u = tl.rand(seed, dropout_offsets(salt, n)): 1/keep_prob
    where u < keep_prob (compared in float32), else 0, in `shape` (float64)."""
    n = 1
    for d in shape:
        n *= int(d)
    u = tl_rand(int(seed), dropout_offsets(salt, n, offset))
    keep = torch.from_numpy(u < np.float32(keep_prob))
    return (keep.to(torch.float64) / float(keep_prob)).reshape(tuple(shape))


def softmax_grad(y, dy, input_shape):
    """d softmax / d x from the output y [N, C] and dy [N, C]: y * (dy - sum(dy * y)), in the input's shape."""
    y, dy = in_compute_dtype(y), in_compute_dtype(dy)
    return (y * (dy - (dy * y).sum(1, keepdim=True))).reshape(tuple(input_shape))


def narrow(x, dim, start, length):
    """x[..., start:start + length, ...] along `dim` (the gradient of a concat for one operand)."""
    return in_compute_dtype(x).narrow(dim, start, length)


def pad_dim(x, dim, before, after):
    """x with `before` zeros in front and `after` behind along `dim` (the adjoint of narrow)."""
    x = in_compute_dtype(x)
    dim = dim % x.dim()
    sb, sa = list(x.shape), list(x.shape)
    sb[dim], sa[dim] = before, after
    return torch.cat([x.new_zeros(sb), x, x.new_zeros(sa)], dim=dim)


def elementwise_max_grad(inputs, dy, index):
    """d max(x_0, ..., x_k) / d x_index * dy: dy where x_index is the first maximum, else 0."""
    xs = [in_compute_dtype(t) for t in inputs]
    y = xs[0]
    for t in xs[1:]:
        y = torch.maximum(y, t)
    first = torch.ones_like(y, dtype=torch.bool)
    for t in xs[:index]:
        first &= t != y          # an earlier operand attains the maximum: it gets the gradient
    return torch.where(first & (xs[index] == y), in_compute_dtype(dy), 0.0)


def upsample2d_grad(dy, fh, fw):
    """d upsample2d / d x: dy [N, H*fh, W*fw, C] summed over each fh x fw block."""
    dy = in_compute_dtype(dy)
    n, h, w, c = dy.shape
    return dy.reshape(n, h // fh, fh, w // fw, fw, c).sum((2, 4))


def deconv2d_grad_data(dz, w, strides=(1, 1, 1, 1), padding="SAME"):
    """d deconv2d / d x: a deconvolution is the adjoint of the convolution output_shape -> input with
    the same filter, so its data gradient is that convolution of dz (no bias)."""
    return conv2d(dz, w, None, strides, padding)
