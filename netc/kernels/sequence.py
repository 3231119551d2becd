"""Sequence kernels: netc.one_hot (ids -> rows of the scaled identity), netc.seq_pool (a reduction of a
time-major x [T, B, ...] over its steps, with optional lengths [B]) and its gradient netc.seq_pool_grad.

    one_hot_kernel        out[i, c] = on_value if ids[i] == c else 0        grid (cdiv(M, BLOCK_M), cdiv(V, BLOCK_N))
    seq_pool_kernel       out[b, f] = x[pick, b, f] (last, first), max_t, or sum_t / n (mean) over the
                          valid steps t < n = lengths[b]                     grid (cdiv(B, BLOCK_M), cdiv(F, BLOCK_N))
    seq_pool_grad_kernel  dx[t, b, f] = dy[b, f] at the step the pool read (first, last, the first maximum),
                          dy[b, f] / n on every valid step (mean), 0 elsewhere  grid as seq_pool's

A program owns a tile of samples and features and loops over the steps inside (T is a run-time
argument: the compiled targets' batch when the sequence is the network's input), so the result does
not depend on the tiling and needs no atomics; the gradient writes every step of its tile, padding
included (zeros). The max gradient finds the first maximum again from x (ties go to the earliest
step, as the reference's argmax). Lengths (i32 or i64) are clamped to [1, T] (a kernel cannot raise:
the reference executor and the data checks reject a length outside [1, T], netc/ops/sequence.py); an id
outside [0, V) gives a zero row. Values are read in any float dtype, accumulated in fp32.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import KernelCall, check_float, dummy, finish

MODES = {"last": 0, "first": 1, "max": 2, "mean": 3}
ID_DTYPES = (torch.int32, torch.int64)


@triton.jit
def one_hot_kernel(ids_ptr, out_ptr, M, V, stride_o, on_value, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    m_row = rows < M
    ids = tl.load(ids_ptr + rows, mask=m_row, other=-1).to(tl.int64)
    v = tl.where(ids[:, None] == cols[None, :], on_value, 0.0)
    tl.store(out_ptr + rows[:, None] * stride_o + cols[None, :], v.to(out_ptr.dtype.element_ty),
             mask=m_row[:, None] & (cols < V)[None, :])


@triton.jit
def _steps(len_ptr, b, mask_b, T, HAS_LEN: tl.constexpr):
    """Each sample's valid steps: its length clamped to [1, T] (T without lengths)."""
    if HAS_LEN:
        n = tl.load(len_ptr + b, mask=mask_b, other=1).to(tl.int64)
        n = tl.minimum(tl.maximum(n, 1), T)
    else:
        n = tl.zeros(b.shape, dtype=tl.int64) + T
    return n


@triton.jit
def seq_pool_kernel(x_ptr, len_ptr, out_ptr, T, B, F, stride_xt, stride_xb, stride_o,
                    MODE: tl.constexpr, HAS_LEN: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    b = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    f = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_b = b < B
    m = mask_b[:, None] & (f < F)[None, :]
    n = _steps(len_ptr, b, mask_b, T, HAS_LEN)
    base = x_ptr + b[:, None] * stride_xb + f[None, :]
    if MODE == 0 or MODE == 1:      # last, first: one step per sample
        t = n - 1 if MODE == 0 else n * 0
        y = tl.load(base + t[:, None] * stride_xt, mask=m, other=0.0).to(tl.float32)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        if MODE == 2:
            acc = tl.full((BLOCK_M, BLOCK_N), float("-inf"), dtype=tl.float32)
        for t in range(0, T):
            ok = m & (t < n)[:, None]
            v = tl.load(base + t * stride_xt, mask=ok, other=0.0).to(tl.float32)
            if MODE == 2:
                acc = tl.where(ok, tl.maximum(acc, v), acc)
            else:
                acc += v
        y = acc
        if MODE == 3:
            y = acc / n.to(tl.float32)[:, None]
    tl.store(out_ptr + b[:, None] * stride_o + f[None, :], y.to(out_ptr.dtype.element_ty), mask=m)


@triton.jit
def seq_pool_grad_kernel(x_ptr, len_ptr, dy_ptr, out_ptr, T, B, F, stride_xt, stride_xb, stride_d, stride_ot,
                         stride_ob, MODE: tl.constexpr, HAS_LEN: tl.constexpr, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr):
    b = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    f = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_b = b < B
    m = mask_b[:, None] & (f < F)[None, :]
    n = _steps(len_ptr, b, mask_b, T, HAS_LEN)
    dy = tl.load(dy_ptr + b[:, None] * stride_d + f[None, :], mask=m, other=0.0).to(tl.float32)
    pick = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int64)       # the step that gets dy (first: 0)
    if MODE == 0:
        pick += (n - 1)[:, None]
    if MODE == 2:   # the first maximum over the valid steps
        best = tl.full((BLOCK_M, BLOCK_N), float("-inf"), dtype=tl.float32)
        for t in range(0, T):
            ok = m & (t < n)[:, None]
            v = tl.load(x_ptr + t * stride_xt + b[:, None] * stride_xb + f[None, :], mask=ok,
                        other=0.0).to(tl.float32)
            better = ok & (v > best)
            pick = tl.where(better, t, pick)
            best = tl.where(better, v, best)
    if MODE == 3:
        g = dy / n.to(tl.float32)[:, None]
    out = out_ptr + b[:, None] * stride_ob + f[None, :]
    for t in range(0, T):
        if MODE == 3:
            d = tl.where((t < n)[:, None], g, 0.0)
        else:
            d = tl.where(pick == t, dy, 0.0)
        tl.store(out + t * stride_ot, d.to(out_ptr.dtype.element_ty), mask=m)


# --------------------------------------------------------------------------- launchers

def tiles(b: int, f: int, block_m, block_n) -> tuple:
    """(BLOCK_M, BLOCK_N) of a kernel over b rows of f features: the given ones, else up to 64 x 128 (4096 a tile)."""
    bn = int(block_n) if block_n else min(triton.next_power_of_2(max(f, 1)), 128)
    bm = int(block_m) if block_m else max(1, min(triton.next_power_of_2(max(b, 1)), 64, 4096 // bn))
    return bm, bn


def checked_lengths(lengths, b: int, device=None):
    """Per-sample lengths [B] (int32 / int64, contiguous) as a [B] view; None stays None."""
    if lengths is None:
        return None
    if lengths.dtype not in ID_DTYPES:
        raise TypeError(f"lengths must be int32 or int64, got {lengths.dtype}")
    if lengths.numel() != b or (lengths.dim() and lengths.stride(-1) != 1 and b > 1):
        raise ValueError(f"lengths must be [B] = [{b}] (contiguous), got {list(lengths.shape)}")
    return lengths.reshape(b)


def steps_view(x: torch.Tensor, what: str):
    """x [T, B, ...] as [T, B, F] with contiguous features, (T, B, F, stride_t, stride_b)."""
    if x.dim() < 2:
        raise ValueError(f"{what} must be a time-major sequence [T, B, ...], got {list(x.shape)}")
    t, b = x.shape[0], x.shape[1]
    f = x.numel() // (t * b) if t * b else 0
    try:
        x3 = x.view(t, b, f)
    except RuntimeError:
        raise ValueError(f"{what} {list(x.shape)} with strides {x.stride()} cannot be viewed as [{t}, {b}, {f}]") \
            from None
    if f > 1 and x3.stride(2) != 1:
        raise ValueError(f"{what} needs contiguous features (stride 1), got strides {x.stride()}")
    return x3, t, b, f, (x3.stride(0) if t > 1 else b * f), (x3.stride(1) if b > 1 else f)


def steps_out(x: torch.Tensor, out):
    """The output of an op that keeps x's shape [T, B, ...]: `out` checked (or a new tensor in x's dtype) and its
    steps view, (out, out [T, B, F], stride_t, stride_b)."""
    if out is None:
        out = torch.empty(tuple(x.shape), dtype=x.dtype, device=x.device)
    if tuple(out.shape) != tuple(x.shape):
        raise ValueError(f"out must be {list(x.shape)}, got {list(out.shape)}")
    check_float(out, "out")
    o3, _, _, _, sot, sob = steps_view(out, "out")
    return out, o3, sot, sob


def one_hot(ids: torch.Tensor, depth: int, on_value: float = 1.0, *, out=None, out_dtype=torch.float32,
            block_m=None, block_n=None, num_warps=4, launch=True):
    """netc.one_hot: ids (int32/int64, any shape S, contiguous) -> S + [depth], on_value at each id and 0
    elsewhere (an id outside [0, depth): a zero row). `out` rows may be strided (a channel slice)."""
    if ids.dtype not in ID_DTYPES:
        raise TypeError(f"ids must be int32 or int64, got {ids.dtype}")
    if not ids.is_contiguous():
        raise ValueError(f"ids must be contiguous, got strides {ids.stride()}")
    if int(depth) <= 0:
        raise ValueError(f"depth must be positive, got {depth}")
    shape = tuple(ids.shape) + (int(depth),)
    if out is None:
        out = torch.empty(shape, dtype=out_dtype, device=ids.device)
    if tuple(out.shape) != shape:
        raise ValueError(f"out must be {list(shape)}, got {list(out.shape)}")
    check_float(out, "out")
    m, v = ids.numel(), int(depth)
    if out.dim() > 1 and m > 1:
        o2 = out.reshape(m, v) if out.is_contiguous() else out.view(m, v)
    else:
        o2 = out.reshape(m, v)
    if v > 1 and o2.stride(1) != 1:
        raise ValueError(f"out needs a contiguous last axis, got strides {out.stride()}")
    so = o2.stride(0) if m > 1 else v
    bm, bn = tiles(m, v, block_m, block_n)
    grid = (triton.cdiv(max(m, 1), bm), triton.cdiv(v, bn))
    return finish(KernelCall(one_hot_kernel, grid, (ids.reshape(-1), o2, m, v, so, float(on_value)),
                             dict(BLOCK_M=bm, BLOCK_N=bn), dict(num_warps=num_warps), out), launch)


def seq_pool(x: torch.Tensor, lengths=None, mode: str = "last", *, out=None, block_m=None, block_n=None,
             num_warps=4, launch=True):
    """netc.seq_pool: x [T, B, ...] (any float dtype) and optional lengths [B] -> [B, ...] in x's dtype (or
    `out`'s): the last / first valid step, the maximum or the mean of the valid steps."""
    check_float(x, "x")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    x3, t, b, f, st, sb = steps_view(x, "x")
    if t < 1:
        raise ValueError("seq_pool needs at least one step")
    n = checked_lengths(lengths, b, x.device)
    if out is None:
        out = torch.empty(tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
    if tuple(out.shape) != tuple(x.shape[1:]):
        raise ValueError(f"out must be {list(x.shape[1:])}, got {list(out.shape)}")
    check_float(out, "out")
    o2 = out.reshape(b, f)
    if f > 1 and o2.stride(1) != 1:
        raise ValueError(f"out needs contiguous features, got strides {out.stride()}")
    bm, bn = tiles(b, f, block_m, block_n)
    grid = (triton.cdiv(max(b, 1), bm), triton.cdiv(max(f, 1), bn))
    return finish(KernelCall(seq_pool_kernel, grid, (x3, n if n is not None else dummy(x.device), o2, t, b, f, st, sb,
                                                     o2.stride(0) if b > 1 else f),
                             dict(MODE=MODES[mode], HAS_LEN=n is not None, BLOCK_M=bm, BLOCK_N=bn),
                             dict(num_warps=num_warps), out), launch)


def seq_pool_grad(x: torch.Tensor, lengths, dy: torch.Tensor, mode: str = "last", *, out=None, out_dtype=None,
                  block_m=None, block_n=None, num_warps=4, launch=True):
    """netc.seq_pool_grad: x [T, B, ...], optional lengths [B], dy [B, ...] -> dx [T, B, ...] (dy's dtype, or
    out_dtype / `out`'s): dy at the step the pool read, dy / n on each valid step (mean), 0 elsewhere."""
    check_float(x, "x")
    check_float(dy, "dy")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    x3, t, b, f, st, sb = steps_view(x, "x")
    if tuple(dy.shape) != tuple(x.shape[1:]):
        raise ValueError(f"dy must be the pool's output {list(x.shape[1:])}, got {list(dy.shape)}")
    n = checked_lengths(lengths, b, x.device)
    if out is None:
        out = torch.empty(tuple(x.shape), dtype=out_dtype or dy.dtype, device=x.device)
    if tuple(out.shape) != tuple(x.shape):
        raise ValueError(f"out must be {list(x.shape)}, got {list(out.shape)}")
    check_float(out, "out")
    o3, _, _, _, sot, sob = steps_view(out, "out")
    d2 = dy.reshape(b, f)
    if f > 1 and d2.stride(1) != 1:
        raise ValueError(f"dy needs contiguous features, got strides {dy.stride()}")
    bm, bn = tiles(b, f, block_m, block_n)
    grid = (triton.cdiv(max(b, 1), bm), triton.cdiv(max(f, 1), bn))
    return finish(KernelCall(seq_pool_grad_kernel, grid, (
        x3, n if n is not None else dummy(x.device), d2, o3, t, b, f, st, sb, d2.stride(0) if b > 1 else f, sot, sob),
        dict(MODE=MODES[mode], HAS_LEN=n is not None, BLOCK_M=bm, BLOCK_N=bn), dict(num_warps=num_warps), out), launch)
