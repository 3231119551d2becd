"""float64 torch references of netc's ops, with exactly netc's semantics (the oracle: each OpDef's
reference() computes with these, and every kernel in netc/kernels is tested against them): NHWC activations, HWIO
filters, Paleo's VALID/SAME/explicit padding (SAME may pad asymmetrically, more at the bottom/right,
or even crop: a negative pad), the epilogue order of common.py, and these pooling rules:

  maxpool  the max over the in-bounds elements of each window (padding never wins);
  avgpool  the sum over the in-bounds elements divided by their count (padding excluded, as Paleo
           and TensorFlow do for SAME); count_include_pad=True divides by KH*KW instead.
  A window with no in-bounds element (only possible with explicit padding >= the window) gives 0.

Every function takes tensors of any float dtype and returns float64.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .geometry import pair, window_geometry  # noqa: F401  (pair: for the launchers' tests)


def _f64(t):
    return None if t is None else t.to(torch.float64)


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
    y = _f64(y)
    if bias is not None:
        y = y + _f64(bias)
    if scale is not None:
        y = y * _f64(scale) + _f64(shift)
    if residual is not None and not residual_after_act:
        y = y + _f64(residual)
    y = activation(y, activation_, negative_slope)
    if residual is not None and residual_after_act:
        y = y + _f64(residual)
    return y


def conv2d(x, w, bias=None, strides=(1, 1, 1, 1), padding="SAME", activation="none", scale=None,
           shift=None, residual=None, residual_after_act=False, negative_slope=0.0):
    """netc's conv2d: x NHWC, w HWIO [kh, kw, c_in, c_out], Paleo padding, then the epilogue."""
    x, w = _f64(x), _f64(w)
    kh, kw = w.shape[0], w.shape[1]
    sh, sw = pair(strides, "strides")
    oh, ow, t, b, l, r = pads(x.shape[1], x.shape[2], kh, kw, sh, sw, padding)
    xp = _pad_nchw(x.permute(0, 3, 1, 2), t, b, l, r)
    y = F.conv2d(xp, w.permute(3, 2, 0, 1), stride=(sh, sw)).permute(0, 2, 3, 1)
    assert y.shape[1:3] == (oh, ow), (y.shape, oh, ow)
    return epilogue(y, bias, scale, shift, residual, activation, residual_after_act, negative_slope)


def gemm(a, b, bias=None, activation="none", scale=None, shift=None, residual=None,
         residual_after_act=False, negative_slope=0.0):
    return epilogue(_f64(a) @ _f64(b), bias, scale, shift, residual, activation, residual_after_act,
                    negative_slope)


def inner_product(x, w, bias=None, **epi):
    """y = x.reshape(N, K) @ w[K, M] + bias."""
    return gemm(x.reshape(x.shape[0], -1), w, bias, **epi)


def _pool(x, ksize, strides, padding):
    kh, kw = pair(ksize, "ksize")
    sh, sw = pair(strides, "strides")
    x = _f64(x).permute(0, 3, 1, 2)
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
    x = _f64(x)
    half = local_size // 2
    sq = F.pad(x * x, (half, half))
    s = sum(sq[..., d:d + x.shape[-1]] for d in range(local_size))
    return x / (knorm + alpha / local_size * s) ** beta


def softmax(x):
    """Softmax over the flattened features: [N, ...] -> [N, prod(...)]."""
    return torch.softmax(_f64(x).reshape(x.shape[0], -1), dim=1)


def softmax_loss(x, labels):
    """Mean over the batch of the cross-entropy of softmax(x) (x flattened to [N, C]) against class
    indices [N] / [N, 1] (integers, or floats holding integers) or one-hot / soft targets [N, C]."""
    logp = torch.log_softmax(_f64(x).reshape(x.shape[0], -1), dim=1)
    n, c = logp.shape
    if labels.numel() == n and c != 1:
        return -logp.gather(1, labels.reshape(-1, 1).long()).mean()
    return -(_f64(labels).reshape(logp.shape) * logp).sum(1).mean()


def euclidean_loss(x, y):
    """0.5 * sum((x - y)^2) / N, y reshaped to x's shape (same element count)."""
    x = _f64(x)
    return 0.5 * ((x - _f64(y).reshape(x.shape)) ** 2).sum() / x.shape[0]


def elementwise(operation, inputs):
    """netc's elementwise op over same-shaped inputs: 'sum', 'product' or 'max'."""
    xs = [_f64(t) for t in inputs]
    y = xs[0]
    for t in xs[1:]:
        y = {"sum": torch.add, "product": torch.mul, "max": torch.maximum}[operation](y, t)
    return y


def relu(x, negative_slope=0.0):
    return activation(_f64(x), "leaky_relu" if negative_slope else "relu", negative_slope)


def sigmoid(x):
    return torch.sigmoid(_f64(x))


def tanh(x):
    return torch.tanh(_f64(x))


def batch_norm(x, scale, shift):
    """Inference batch norm, folded: x * scale[c] + shift[c] over the last (channel) axis."""
    return _f64(x) * _f64(scale) + _f64(shift)


def elementwise_chain(x, ops):
    """The reference of kernels.elementwise.elementwise_chain: apply `ops` (see there) in order."""
    y = _f64(x)
    for op in ops:
        name, args = (op, ()) if isinstance(op, str) else (op[0], tuple(op[1:]))
        if name in ("relu", "sigmoid", "tanh"):
            y = activation(y, name)
        elif name == "leaky_relu":
            y = activation(y, name, args[0])
        elif name in ("add", "mul", "max"):
            o = args[0]
            o = _f64(o) if torch.is_tensor(o) else o
            y = {"add": torch.add, "mul": torch.mul, "max": torch.maximum}[name](
                y, o if torch.is_tensor(o) else torch.tensor(o, dtype=torch.float64))
        elif name == "scale_shift":
            sc, sh = (_f64(a) if torch.is_tensor(a) else a for a in args)
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
