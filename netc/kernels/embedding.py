"""Embedding kernels: the gather of table rows by id (netc.embedding), and the scatter-add of rows at
their ids (netc.embedding_grad's dense gradient, and netc.sparse_sgd_update's in-place update of the
rows a step touched).

Ids are an i32 or i64 tensor of any shape, read flat ([M] ids); the rows they pick are [M, D], rows
evenly spaced with a contiguous last axis (a channel slice of a wider buffer is fine). An id outside
[0, V) cannot raise in a kernel: the gather writes a zero row for it and the scatter adds nothing
(the reference executor and the data checks raise instead; netc/ops/embedding.py).

    embedding_kernel       out[i, :] = table[ids[i], :]                    grid (cdiv(M, BLOCK_M), cdiv(D, BLOCK_N))
    scatter_rows_kernel    out[ids[i], :] += scale * rows[i, :]             grid (SPLIT, cdiv(D, BLOCK_N))
    fill_kernel            out[:] = 0                                       grid (cdiv(NUMEL, BLOCK),)

The scatter adds with f32 atomics (duplicate ids add up, in an order the hardware picks: a sum of
f32 values whose order varies from run to run in the last bits, well within f32 tolerance). Its grid
does not depend on the batch (SPLIT programs stride over the ids) because its result, a parameter's
gradient or the parameter itself, has no batch axis. scale is 1 for a gradient, -lr * lr_scale for a
sparse SGD step (lr read from the device: the program's learning-rate input).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import KernelCall, channel_slice, dummy, finish, row_stride

ID_DTYPES = (torch.int32, torch.int64)


@triton.jit
def embedding_kernel(ids_ptr, table_ptr, out_ptr, M, D, V, stride_t, stride_o,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    m_row = rows < M
    m_col = cols < D
    ids = tl.load(ids_ptr + rows, mask=m_row, other=0).to(tl.int64)
    ok = m_row & (ids >= 0) & (ids < V)
    vals = tl.load(table_ptr + ids[:, None] * stride_t + cols[None, :], mask=ok[:, None] & m_col[None, :], other=0.0)
    tl.store(out_ptr + rows[:, None] * stride_o + cols[None, :], vals.to(out_ptr.dtype.element_ty),
             mask=m_row[:, None] & m_col[None, :])


@triton.jit
def scatter_rows_kernel(ids_ptr, rows_ptr, out_ptr, lr_ptr, M, D, V, stride_r, stride_o, lr_scale,
                        HAS_LR: tl.constexpr, SPLIT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    m_col = cols < D
    scale = 1.0
    if HAS_LR:
        scale = -tl.load(lr_ptr).to(tl.float32) * lr_scale
    for start in range(tl.program_id(0) * BLOCK_M, M, SPLIT * BLOCK_M):
        rows = start + tl.arange(0, BLOCK_M).to(tl.int64)
        m_row = rows < M
        ids = tl.load(ids_ptr + rows, mask=m_row, other=0).to(tl.int64)
        ok = m_row & (ids >= 0) & (ids < V)
        vals = tl.load(rows_ptr + rows[:, None] * stride_r + cols[None, :], mask=m_row[:, None] & m_col[None, :],
                       other=0.0).to(tl.float32)
        tl.atomic_add(out_ptr + ids[:, None] * stride_o + cols[None, :], vals * scale,
                      mask=ok[:, None] & m_col[None, :])


@triton.jit
def fill_kernel(out_ptr, NUMEL, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros((BLOCK,), dtype=out_ptr.dtype.element_ty), mask=offs < NUMEL)


# --------------------------------------------------------------------------- launchers

def _flat_ids(ids: torch.Tensor) -> torch.Tensor:
    if ids.dtype not in ID_DTYPES:
        raise TypeError(f"ids must be int32 or int64, got {ids.dtype}")
    if not ids.is_contiguous():
        raise ValueError(f"ids must be contiguous, got strides {ids.stride()}")
    return ids.reshape(-1)


def _as_rows(t: torch.Tensor, m: int, what: str):
    """[M, D] rows of t ([..., D], rows evenly spaced, last axis contiguous) and their stride."""
    d = t.shape[-1] if t.dim() else 1
    if t.numel() != m * d:
        raise ValueError(f"{what} {list(t.shape)} does not hold {m} rows")
    s = row_stride(t, what) if t.dim() > 1 else d
    return t.as_strided((m, d), (s, 1), t.storage_offset()), s


def _block_n(d: int, block_n) -> int:
    return int(block_n) if block_n else min(triton.next_power_of_2(max(d, 1)), 128)


def embedding(ids: torch.Tensor, table: torch.Tensor, *, out=None, out_channel_offset=0, block_m=None, block_n=None,
              num_warps=4, launch=True):
    """netc.embedding: table [V, D] rows picked by ids (int32/int64, any shape S) -> S + [D] in the table's
    dtype (or `out`'s: a buffer, or a channel slice of one)."""
    if table.dim() != 2:
        raise ValueError(f"the table must be [V, D], got {list(table.shape)}")
    if table.stride(1) != 1:
        raise ValueError(f"the table needs a contiguous last axis, got strides {table.stride()}")
    flat = _flat_ids(ids)
    m, (v, d) = flat.numel(), table.shape
    o = channel_slice(out, tuple(ids.shape) + (d,), out_channel_offset, table.dtype, table.device)
    o2, so = _as_rows(o, m, "out")
    bn = _block_n(d, block_n)
    bm = int(block_m) if block_m else max(1, min(64, 4096 // bn))
    grid = (triton.cdiv(max(m, 1), bm), triton.cdiv(d, bn))
    return finish(KernelCall(embedding_kernel, grid, (flat, table, o2, m, d, v, table.stride(0), so),
                             dict(BLOCK_M=bm, BLOCK_N=bn), dict(num_warps=num_warps), o), launch)


def _scatter_call(ids, rows, out, lr, lr_scale, split, block_m, block_n, num_warps):
    flat = _flat_ids(ids)
    m = flat.numel()
    v, d = out.shape
    if out.stride(1) != 1:
        raise ValueError(f"the table needs a contiguous last axis, got strides {out.stride()}")
    r2, sr = _as_rows(rows, m, "rows")
    bn = _block_n(d, block_n)
    bm = int(block_m) if block_m else max(1, min(64, 4096 // bn))
    split = int(split) if split else max(1, min(triton.cdiv(max(m, 1), bm), 1024))
    return KernelCall(scatter_rows_kernel, (split, triton.cdiv(d, bn)),
                      (flat, r2, out, lr if lr is not None else dummy(out.device), m, d, v, sr, out.stride(0),
                       float(lr_scale)),
                      dict(HAS_LR=lr is not None, SPLIT=split, BLOCK_M=bm, BLOCK_N=bn), dict(num_warps=num_warps), out)


def fill_zero(out: torch.Tensor, *, block=None, num_warps=4, launch=True):
    """out[:] = 0 (a contiguous tensor)."""
    if not out.is_contiguous():
        raise ValueError(f"fill_zero needs a contiguous tensor, got strides {out.stride()}")
    n = out.numel()
    b = int(block) if block else min(1024, triton.next_power_of_2(max(n, 1)))
    return finish(KernelCall(fill_kernel, (triton.cdiv(max(n, 1), b),), (out.reshape(-1), n), dict(BLOCK=b),
                             dict(num_warps=num_warps), out), launch)


def embedding_grad(ids: torch.Tensor, dy: torch.Tensor, num_embeddings: int, *, out=None, split=None, block_m=None,
                   block_n=None, block=None, num_warps=4, launch=True):
    """netc.embedding_grad: zeros [V, D] (f32 unless `out` says otherwise), then each row of dy (ids' shape + [D])
    added at its id. Two kernels (fill, scatter); launch=False returns both calls."""
    d = dy.shape[-1]
    if out is None:
        out = torch.empty((num_embeddings, d), dtype=torch.float32, device=dy.device)
    if tuple(out.shape) != (num_embeddings, d):
        raise ValueError(f"out {list(out.shape)} is not the [V, D] = [{num_embeddings}, {d}] gradient")
    calls = [fill_zero(out, block=block, num_warps=num_warps, launch=False),
             _scatter_call(ids, dy, out, None, 1.0, split, block_m, block_n, num_warps)]
    if launch:
        for c in calls:
            c.launch()
        return out
    return calls


def sparse_sgd_update(table: torch.Tensor, ids: torch.Tensor, rows: torch.Tensor, lr, *, lr_scale=1.0, split=None,
                      block_m=None, block_n=None, num_warps=4, launch=True):
    """netc.sparse_sgd_update: table[ids[i]] -= lr * lr_scale * rows[i] in place (f32 table), lr a 1-element
    device tensor (or a number)."""
    if table.dtype != torch.float32:
        raise TypeError(f"a sparse update adds rows in place with f32 atomics: the table must be float32, got "
                        f"{table.dtype}")
    if not torch.is_tensor(lr):
        lr = torch.tensor(float(lr), dtype=torch.float32, device=table.device)
    return finish(_scatter_call(ids, rows, table, lr, lr_scale, split, block_m, block_n, num_warps), launch)
