"""Elementwise chains: one kernel applies a short, compile-time sequence of unary and binary ops to
a tensor, so codegen can fuse e.g. `add residual -> batch norm -> relu` into one pass over memory.

The sequence is two constexpr tuples of equal length: OPS (op codes, below) and ARGS (what each op
reads: a tensor slot 0-3, a per-channel vector slot 0-3, a float constant, or unused). Tensors are
seen as [rows, C] with C the last axis: every tensor operand has the shape of x, may have its own
pixel (row) stride (a channel slice of a concatenation buffer), and has contiguous channels;
per-channel vectors are [C]. Everything is computed in fp32 and stored in out's dtype.

    code  op                          ARGS[i]
    1     relu                        -
    2     sigmoid                     -
    3     tanh                        -
    4     leaky relu                  the negative slope (float)
    5/6/7 add / mul / max a tensor    tensor slot
    8/9/10 add / mul / max a [C] vector   vector slot
    11/12/13 add / mul / max a constant   the constant (float)
    14/15/16 relu / sigmoid / tanh gradient: v = activation_grad(y, v), y = the activation's output
                                      tensor slot of y
    20+s  leaky relu gradient, y in tensor slot s   the negative slope (float)
    24    SINGA's scaled tanh, A tanh(B x)          -
    25    its gradient from its output y            tensor slot of y

The gradient ops take the running value as dy, so a chain can start from a gradient and apply the
activation gradients of several fused layers in a row (netc.activation_grad: activation_grad()).

Also here, for the training program: copies with an offset along one axis (netc.narrow and
netc.pad_dim, any strides, rank <= 6) and netc.elementwise_max_grad.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import KernelCall, activate, channel_slice, finish, check_float, dummy, row_stride
from .train_common import activation_derivative, grad_activation_code

RELU, SIGMOID, TANH, LEAKY_RELU = 1, 2, 3, 4
_BINARY = {"add": 0, "mul": 1, "max": 2}
TENSOR_OP, VECTOR_OP, CONST_OP = 5, 8, 11  # + _BINARY[name]
GRAD_OP = 13               # + the activation's code (relu 1, sigmoid 2, tanh 3): ARGS = y's tensor slot
LEAKY_GRAD_OP = 20         # + y's tensor slot: ARGS = the negative slope
STANH_OP, STANH_GRAD_OP = 24, 25   # SINGA's scaled tanh (activation code 5); its gradient: ARGS = y's tensor slot
_GRADS = {"relu_grad": 1, "sigmoid_grad": 2, "tanh_grad": 3}
MAX_TENSORS = 4
MAX_VECTORS = 4


@triton.jit
def _combine(v, o, KIND: tl.constexpr):
    if KIND == 0:
        v = v + o
    elif KIND == 1:
        v = v * o
    else:
        v = tl.maximum(v, o)
    return v


@triton.jit
def _tensor(slot: tl.constexpr, t0, t1, t2, t3, s0, s1, s2, s3, row, col, mask):
    if slot == 0:
        p = t0 + row * s0 + col
    elif slot == 1:
        p = t1 + row * s1 + col
    elif slot == 2:
        p = t2 + row * s2 + col
    else:
        p = t3 + row * s3 + col
    return tl.load(p, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def _vector(slot: tl.constexpr, v0, v1, v2, v3, col, mask):
    if slot == 0:
        p = v0 + col
    elif slot == 1:
        p = v1 + col
    elif slot == 2:
        p = v2 + col
    else:
        p = v3 + col
    return tl.load(p, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def elementwise_kernel(x_ptr, out_ptr, t0, t1, t2, t3, v0, v1, v2, v3,
                       NUMEL, C, stride_x, stride_o, s0, s1, s2, s3,
                       OPS: tl.constexpr, ARGS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < NUMEL
    row = offs // C
    col = offs % C
    v = tl.load(x_ptr + row * stride_x + col, mask=mask, other=0.0).to(tl.float32)
    for i in tl.static_range(len(OPS)):
        if OPS[i] <= 3:
            v = activate(v, OPS[i], 0.0)
        elif OPS[i] == 4:
            v = activate(v, 4, ARGS[i])
        elif OPS[i] < 8:
            v = _combine(v, _tensor(ARGS[i], t0, t1, t2, t3, s0, s1, s2, s3, row, col, mask), OPS[i] - 5)
        elif OPS[i] < 11:
            v = _combine(v, _vector(ARGS[i], v0, v1, v2, v3, col, mask), OPS[i] - 8)
        elif OPS[i] < 14:
            v = _combine(v, ARGS[i], OPS[i] - 11)
        elif OPS[i] < 20:
            v = activation_derivative(v, _tensor(ARGS[i], t0, t1, t2, t3, s0, s1, s2, s3, row, col, mask),
                                      OPS[i] - 13, 0.0)
        elif OPS[i] < 24:
            v = activation_derivative(v, _tensor(OPS[i] - 20, t0, t1, t2, t3, s0, s1, s2, s3, row, col, mask),
                                      4, ARGS[i])
        elif OPS[i] == 24:
            v = activate(v, 5, 0.0)
        else:
            v = activation_derivative(v, _tensor(ARGS[i], t0, t1, t2, t3, s0, s1, s2, s3, row, col, mask),
                                      5, 0.0)
    tl.store(out_ptr + row * stride_o + col, v.to(out_ptr.dtype.element_ty), mask=mask)


def encode_chain(x: torch.Tensor, ops):
    """Turn a readable op list into (OPS, ARGS, tensors, vectors) for elementwise_kernel.

    Each item is a name ("relu", "sigmoid", "tanh", "stanh": SINGA's scaled tanh) or a tuple:
      ("leaky_relu", slope)
      ("add" | "mul" | "max", operand)  operand: a tensor shaped like x, a [C] per-channel vector,
                                        or a number
      ("scale_shift", scale, shift)     x * scale + shift (each a [C] vector or a number): an
                                        inference batch norm
      ("relu_grad" | "sigmoid_grad" | "tanh_grad", y)   the gradient through that activation, of
                                        the running value as dy, from its output y (x's shape)
      ("relu_grad", y, slope), ("leaky_relu_grad", y, slope)   leaky ReLU's
      ("stanh_grad", y)                 SINGA's scaled tanh's
    """
    c = x.shape[-1] if x.dim() else 1
    codes, args, tensors, vectors = [], [], [], []

    def slot(lst, t, limit, what):
        for i, u in enumerate(lst):
            if u is t:
                return i
        if len(lst) == limit:
            raise ValueError(f"an elementwise chain reads at most {limit} {what}")
        lst.append(t)
        return len(lst) - 1

    def binary(name, o):
        k = _BINARY[name]
        if not torch.is_tensor(o):
            codes.append(CONST_OP + k)
            args.append(float(o))
        elif tuple(o.shape) == tuple(x.shape):
            codes.append(TENSOR_OP + k)
            args.append(slot(tensors, o, MAX_TENSORS, "tensors"))
        elif o.dim() == 1 and o.shape[0] == c:
            codes.append(VECTOR_OP + k)
            args.append(slot(vectors, o, MAX_VECTORS, "per-channel vectors"))
        else:
            raise ValueError(f"operand of {name!r} must have x's shape {list(x.shape)}, be a [{c}] "
                             f"per-channel vector or a number; got {list(o.shape)}")

    for op in ops:
        name, a = (op, ()) if isinstance(op, str) else (op[0], tuple(op[1:]))
        if name in ("relu", "sigmoid", "tanh") and not a:
            codes.append({"relu": RELU, "sigmoid": SIGMOID, "tanh": TANH}[name])
            args.append(0)
        elif name == "leaky_relu" and len(a) == 1:
            codes.append(LEAKY_RELU)
            args.append(float(a[0]))
        elif name == "stanh" and not a:
            codes.append(STANH_OP)
            args.append(0)
        elif name == "stanh_grad" and len(a) == 1 and torch.is_tensor(a[0]) and tuple(a[0].shape) == tuple(x.shape):
            codes.append(STANH_GRAD_OP)
            args.append(slot(tensors, a[0], MAX_TENSORS, "tensors"))
        elif name in _BINARY and len(a) == 1:
            binary(name, a[0])
        elif name == "scale_shift" and len(a) == 2:
            binary("mul", a[0])
            binary("add", a[1])
        elif name in _GRADS or name == "leaky_relu_grad":
            if not a or not torch.is_tensor(a[0]) or tuple(a[0].shape) != tuple(x.shape) or len(a) > 2:
                raise ValueError(f"{name} takes the activation's output (x's shape {list(x.shape)}) and, for a "
                                 f"leaky ReLU, the slope; got {op!r}")
            s = slot(tensors, a[0], MAX_TENSORS, "tensors")
            slope = float(a[1]) if len(a) == 2 else 0.0
            if name == "leaky_relu_grad" or (name == "relu_grad" and slope):
                codes.append(LEAKY_GRAD_OP + s)
                args.append(slope)
            elif len(a) == 2 and name != "relu_grad":
                raise ValueError(f"{name} takes no slope")
            else:
                codes.append(GRAD_OP + _GRADS[name])
                args.append(s)
        else:
            raise ValueError(f"bad elementwise op {op!r}")
    return tuple(codes), tuple(args), tensors, vectors


def elementwise_chain(x: torch.Tensor, ops, *, out=None, out_channel_offset=0, out_dtype=None, block=1024,
                      num_warps=4, launch=True):
    """Apply `ops` (see encode_chain) to x in one pass. Writes channels [out_channel_offset, +C) of
    `out` when given (zero-copy concatenation; `out` may also be x itself: in place), else a new
    tensor of `out_dtype` (default x's dtype). Returns the written view."""
    check_float(x, "x")
    if x.dim() == 0:
        x = x.reshape(1)
    codes, args, tensors, vectors = encode_chain(x, ops)
    for t in tensors + vectors:
        check_float(t, "operand")
    c = x.shape[-1]
    if out is not None and out.data_ptr() == x.data_ptr() and out.shape == x.shape and not out_channel_offset:
        o = out
    else:
        o = channel_slice(out, tuple(x.shape), out_channel_offset, out_dtype or x.dtype, x.device)
    z = dummy(x.device)
    ts = tensors + [z] * (MAX_TENSORS - len(tensors))
    vs = vectors + [z] * (MAX_VECTORS - len(vectors))
    ss = [row_stride(t, "operand") for t in tensors] + [0] * (MAX_TENSORS - len(tensors))
    numel = x.numel()
    block = min(block, triton.next_power_of_2(numel))
    return finish(KernelCall(elementwise_kernel, (triton.cdiv(numel, block),), (
        x, o, *ts, *vs, numel, c, row_stride(x, "x"), row_stride(o, "out"), *ss),
        dict(OPS=codes, ARGS=args, BLOCK=block), dict(num_warps=num_warps), o), launch)


def elementwise(operation: str, inputs, **kw) -> torch.Tensor:
    """netc's elementwise op: 'sum', 'product' or 'max' of same-shaped inputs (at most 5 per pass)."""
    name = {"sum": "add", "product": "mul", "max": "max"}[operation]
    return elementwise_chain(inputs[0], [(name, t) for t in inputs[1:]], **kw)


def relu(x, negative_slope=0.0, **kw):
    return elementwise_chain(x, [("leaky_relu", negative_slope)] if negative_slope else ["relu"], **kw)


def sigmoid(x, **kw):
    return elementwise_chain(x, ["sigmoid"], **kw)


def tanh(x, **kw):
    return elementwise_chain(x, ["tanh"], **kw)


def batch_norm(x, scale, shift, **kw):
    """Inference batch norm, folded to a per-channel x * scale + shift (last axis)."""
    return elementwise_chain(x, [("scale_shift", scale, shift)], **kw)


def activation_grad(y, dy, activation="relu", negative_slope=0.0, **kw):
    """netc.activation_grad: the gradient before an activation from its output y and dy (relu, leaky:
    relu with negative_slope, sigmoid, tanh, stanh): a one-op chain over dy."""
    code = grad_activation_code(activation, negative_slope)
    if code == 0:
        return elementwise_chain(dy, [], **kw)
    name = {1: "relu_grad", 2: "sigmoid_grad", 3: "tanh_grad", 4: "leaky_relu_grad", 5: "stanh_grad"}[code]
    return elementwise_chain(dy, [(name, y, negative_slope)] if code == 4 else [(name, y)], **kw)


# --------------------------------------------------------------------------- copies with an offset

MAX_RANK = 6


@triton.jit
def shifted_copy_kernel(x_ptr, out_ptr, NUMEL, D0, D1, D2, D3, D4, D5,
                        XS0, XS1, XS2, XS3, XS4, XS5, OS0, OS1, OS2, OS3, OS4, OS5, LO, HI, SHIFT,
                        DIM: tl.constexpr, BLOCK: tl.constexpr):
    """out[i] = x[i with i_DIM -> i_DIM + SHIFT] where LO <= i_DIM < HI, else 0, over every element of
    out (shape D0..D5, row-major order; both tensors with their own strides)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < NUMEL
    i5 = offs % D5
    t = offs // D5
    i4 = t % D4
    t = t // D4
    i3 = t % D3
    t = t // D3
    i2 = t % D2
    t = t // D2
    i1 = t % D1
    i0 = t // D1
    if DIM == 0:
        d = i0
        xs = XS0
    elif DIM == 1:
        d = i1
        xs = XS1
    elif DIM == 2:
        d = i2
        xs = XS2
    elif DIM == 3:
        d = i3
        xs = XS3
    elif DIM == 4:
        d = i4
        xs = XS4
    else:
        d = i5
        xs = XS5
    inside = (d >= LO) & (d < HI)
    src = i0 * XS0 + i1 * XS1 + i2 * XS2 + i3 * XS3 + i4 * XS4 + i5 * XS5 + SHIFT * xs
    v = tl.load(x_ptr + src, mask=mask & inside, other=0.0)
    dst = i0 * OS0 + i1 * OS1 + i2 * OS2 + i3 * OS3 + i4 * OS4 + i5 * OS5
    tl.store(out_ptr + dst, v.to(out_ptr.dtype.element_ty), mask=mask)


# copies move bytes of any dtype a network holds: floats, and integer class labels (a partitioned
# training program gathers its label shards like any other tensor)
COPY_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64)


def _shifted_copy(x, out_shape, dim, lo, hi, shift, out, out_dtype, block, num_warps, launch):
    if x.dtype not in COPY_DTYPES:
        raise TypeError(f"x must be float32, float16, bfloat16, int32 or int64, got {x.dtype}")
    if (out_dtype or (out.dtype if out is not None else x.dtype)).is_floating_point != x.dtype.is_floating_point:
        raise TypeError(f"a copy does not convert between integers and floats ({x.dtype} into "
                        f"{out_dtype or out.dtype})")
    r = len(out_shape)
    if r > MAX_RANK or r == 0:
        raise ValueError(f"copies support ranks 1 to {MAX_RANK}, got {r}")
    if out is None:
        out = torch.empty(tuple(out_shape), dtype=out_dtype or x.dtype, device=x.device)
    elif tuple(out.shape) != tuple(out_shape):
        raise ValueError(f"out must be {list(out_shape)}, got {list(out.shape)}")
    pad = MAX_RANK - r
    shape = (1,) * pad + tuple(int(s) for s in out_shape)
    xs = (0,) * pad + tuple(x.stride())
    os_ = (0,) * pad + tuple(out.stride())
    numel = out.numel()
    block = min(block, triton.next_power_of_2(max(numel, 1)))
    return finish(KernelCall(shifted_copy_kernel, (triton.cdiv(numel, block),), (
        x, out, numel, *shape, *xs, *os_, lo, hi, shift), dict(DIM=dim + pad, BLOCK=block),
        dict(num_warps=num_warps), out), launch)


def narrow(x, dim, start, length, *, out=None, out_dtype=None, block=1024, num_warps=4, launch=True):
    """netc.narrow: x[..., start:start + length, ...] along `dim` into a new tensor or `out` (any strides)."""
    d = dim % x.dim()
    if start < 0 or length < 0 or start + length > x.shape[d]:
        raise ValueError(f"[{start}, {start + length}) is not within dimension {d} of {list(x.shape)}")
    shape = list(x.shape)
    shape[d] = length
    return _shifted_copy(x, shape, d, 0, length, start, out, out_dtype, block, num_warps, launch)


def pad_dim(x, dim, before=0, after=0, *, out=None, out_dtype=None, block=1024, num_warps=4, launch=True):
    """netc.pad_dim: x with `before` zeros in front and `after` zeros behind along `dim`; every element
    of the result is written (the zeros too)."""
    d = dim % x.dim()
    if before < 0 or after < 0:
        raise ValueError(f"pads must not be negative, got {before} and {after}")
    shape = list(x.shape)
    shape[d] += before + after
    return _shifted_copy(x, shape, d, before, before + x.shape[d], -before, out, out_dtype, block, num_warps, launch)


# --------------------------------------------------------------------------- elementwise max gradient

MAX_MAX_OPERANDS = 8


@triton.jit
def _operand(j: tl.constexpr, x0, x1, x2, x3, x4, x5, x6, x7, s0, s1, s2, s3, s4, s5, s6, s7, row, col, mask):
    if j == 0:
        p = x0 + row * s0
    elif j == 1:
        p = x1 + row * s1
    elif j == 2:
        p = x2 + row * s2
    elif j == 3:
        p = x3 + row * s3
    elif j == 4:
        p = x4 + row * s4
    elif j == 5:
        p = x5 + row * s5
    elif j == 6:
        p = x6 + row * s6
    else:
        p = x7 + row * s7
    return tl.load(p + col, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def max_grad_kernel(dy_ptr, out_ptr, x0, x1, x2, x3, x4, x5, x6, x7, NUMEL, C, stride_dy, stride_o,
                    s0, s1, s2, s3, s4, s5, s6, s7,
                    N: tl.constexpr, INDEX: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < NUMEL
    row = offs // C
    col = offs % C
    mine = _operand(INDEX, x0, x1, x2, x3, x4, x5, x6, x7, s0, s1, s2, s3, s4, s5, s6, s7, row, col, mask)
    y = mine
    for j in tl.static_range(N):
        if j != INDEX:
            y = tl.maximum(y, _operand(j, x0, x1, x2, x3, x4, x5, x6, x7, s0, s1, s2, s3, s4, s5, s6, s7, row, col,
                                       mask))
    first = mine == y
    for j in tl.static_range(INDEX):    # an earlier operand equal to the maximum takes the gradient
        first = first & (_operand(j, x0, x1, x2, x3, x4, x5, x6, x7, s0, s1, s2, s3, s4, s5, s6, s7, row, col,
                                  mask) != y)
    dy = tl.load(dy_ptr + row * stride_dy + col, mask=mask & first, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_o + col, dy.to(out_ptr.dtype.element_ty), mask=mask)


def elementwise_max_grad(inputs, dy, index: int, *, out=None, out_channel_offset=0, out_dtype=None, block=1024,
                         num_warps=4, launch=True):
    """netc.elementwise_max_grad: the max's operands (2 to 8, dy's shape) and dy -> dy where operand
    `index` is the first maximum, else 0. Tensors [..., C]: channels contiguous, rows evenly spaced."""
    xs = list(inputs)
    if not 1 <= len(xs) <= MAX_MAX_OPERANDS or not 0 <= index < len(xs):
        raise ValueError(f"elementwise_max_grad takes 1 to {MAX_MAX_OPERANDS} operands and an index among them, "
                         f"got {len(xs)} and {index}")
    check_float(dy, "dy")
    for t in xs:
        check_float(t, "operand")
        if tuple(t.shape) != tuple(dy.shape):
            raise ValueError(f"operand {list(t.shape)} must have dy's shape {list(dy.shape)}")
    if dy.dim() == 0:
        dy, xs = dy.reshape(1), [t.reshape(1) for t in xs]
    o = channel_slice(out, tuple(dy.shape), out_channel_offset, out_dtype or dy.dtype, dy.device)
    z = dummy(dy.device)
    ss = [row_stride(t, "operand") for t in xs] + [0] * (MAX_MAX_OPERANDS - len(xs))
    numel = dy.numel()
    block = min(block, triton.next_power_of_2(max(numel, 1)))
    return finish(KernelCall(max_grad_kernel, (triton.cdiv(numel, block),), (
        dy, o, *(xs + [z] * (MAX_MAX_OPERANDS - len(xs))), numel, dy.shape[-1], row_stride(dy, "dy"),
        row_stride(o, "out"), *ss), dict(N=len(xs), INDEX=int(index), BLOCK=block), dict(num_warps=num_warps), o),
        launch)
