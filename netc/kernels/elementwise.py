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
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import KernelCall, activate, channel_slice, finish, check_float, dummy, row_stride

RELU, SIGMOID, TANH, LEAKY_RELU = 1, 2, 3, 4
_BINARY = {"add": 0, "mul": 1, "max": 2}
TENSOR_OP, VECTOR_OP, CONST_OP = 5, 8, 11  # + _BINARY[name]
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
        else:
            v = _combine(v, ARGS[i], OPS[i] - 11)
    tl.store(out_ptr + row * stride_o + col, v.to(out_ptr.dtype.element_ty), mask=mask)


def encode_chain(x: torch.Tensor, ops):
    """Turn a readable op list into (OPS, ARGS, tensors, vectors) for elementwise_kernel.

    Each item is a name ("relu", "sigmoid", "tanh") or a tuple:
      ("leaky_relu", slope)
      ("add" | "mul" | "max", operand)  operand: a tensor shaped like x, a [C] per-channel vector,
                                        or a number
      ("scale_shift", scale, shift)     x * scale + shift (each a [C] vector or a number): an
                                        inference batch norm
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
        elif name in _BINARY and len(a) == 1:
            binary(name, a[0])
        elif name == "scale_shift" and len(a) == 2:
            binary("mul", a[0])
            binary("add", a[1])
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
