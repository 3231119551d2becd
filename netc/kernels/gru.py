"""GRU kernels (netc.gru and its gradient ops, netc/ops/recurrent.py), the LSTM's recipe
(kernels/lstm.py, whose input GEMM, dx GEMM, column sums and product helper they share): the input
products of all T steps and three gates as one GEMM (lstm_input_kernel with NG = 3), then the
recurrence as one persistent launch over cdiv(B, BLOCK_M) programs looping over t, its recurrent
products with the gates' math fused after them, and backpropagation through time the same way.

    gru_forward_kernel    for t = 0 .. T-1: z, r from gx + h[t-1] {z,r}_hh^T; then c and
                          y = (1 - z) c + z h[t-1]. With the reset after the product (SINGA's kGRU,
                          linear_before_reset) u = h[t-1] c_hh^T is a third product of the same pass;
                          before it, u = (r * h[t-1]) c_hh^T needs r of every column first: a second
                          pass over the columns after a barrier (r * h[t-1] kept in scratch or, in
                          the gradient's recomputation, in its hc block)
    gru_backward_kernel   for t = T-1 .. -1: dh_prev[t+1] = its partial (dh z, + drh r before the
                          reset) + dz[t+1] z_hh + dr[t+1] r_hh (+ uc[t+1] c_hh after the reset), then
                          step t's chain; before the reset, drh = dc c_hh needs dc of every column:
                          a second pass after a barrier

gru_grad_gates' [T, B, 7, H] result (netc.ops.recurrent.BLOCKS: z, r, c, dh_prev, h_prev, uc, hc)
holds what the backward reads: the recomputed forward writes z, r, c (activations), h[t-1], u (into
uc's block, with the reset after the product) and hc; the backward overwrites z, r, c with the
pre-activation gradients and uc with dc * r (or dc), tile by tile after reading them. Scratch: gx
(T * B * 3 * H fp32; in the forward its rows are 5H apart, the first B rows' tails holding z and
r * h[t-1]: gru_workspace) in the caller's workspace. A rank-2 x [B, X] is one step (T = 1): then the batch is B and the grids grow with it.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import KernelCall, activate, check_float, dummy, tf32_mode
from .lstm import as_sequence, gate_products, gates_input_call, lstm_blocks, sigmoid, weights_of
from .train_common import finish_calls

GATES = ("z", "r", "c")
TANH = tl.constexpr(3)          # common.ACTIVATIONS["tanh"]


@triton.jit
def _hp(out_ptr, h0_ptr, rows, cols, first, later, mask_n, s_ot, s_ob, s_og, s_h0, t,
        HAS_STATE: tl.constexpr, KEEP: tl.constexpr):
    """h[t-1] of a tile (fp32): block 4 of step t (KEEP) or y[t-1]; h0 (or 0) at t = 0."""
    if KEEP:
        p = out_ptr + t * s_ot + rows[:, None] * s_ob + 4 * s_og + cols
    else:
        p = out_ptr + (t - 1) * s_ot + rows[:, None] * s_ob + cols
    hp = tl.load(p, mask=later[:, None] & mask_n[None, :], other=0.0).to(tl.float32)
    if HAS_STATE:
        hp += tl.load(h0_ptr + rows[:, None] * s_h0 + cols, mask=first[:, None] & mask_n[None, :], other=0.0).to(tl.float32)
    return hp


@triton.jit
def gru_forward_kernel(gx_ptr, h0_ptr, rz, rr, rc, out_ptr, s_ptr, T, B, H, s_gm, s_h0, s_ot, s_ob, s_og,
                       HAS_STATE: tl.constexpr, LBR: tl.constexpr, KEEP: tl.constexpr, ALLOW_TF32: tl.constexpr,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """The recurrence over rows [pid * BLOCK_M, +BLOCK_M) of the batch (module docstring); gx's rows s_gm
    apart. Not KEEP: out is y [T, B, H], s_ptr fp32 scratch of 2 * H a row, rows s_gm apart (z, then
    r * h[t-1]: gru() puts them in the tail of gx's first B rows). KEEP: out is the gradient's
    [T, B, 7, H] (block g at g * s_og)."""
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    mask_m = rows < B
    h0_rows = h0_ptr + rows * s_h0
    for t in range(0, T):
        first = mask_m & (rows * 0 + t == 0)
        later = mask_m & (rows * 0 + t > 0)
        if KEEP:
            hr_rows = out_ptr + t * s_ot + rows * s_ob + 4 * s_og
        else:
            hr_rows = out_ptr + (t - 1) * s_ot + rows * s_ob
        for n0 in range(0, H, BLOCK_N):
            offs_n = n0 + tl.arange(0, BLOCK_N)
            mask_n = offs_n < H
            m2 = mask_m[:, None] & mask_n[None, :]
            cols = offs_n[None, :]
            g_ptrs = gx_ptr + (t * B + rows)[:, None] * s_gm + cols
            zero = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            acc0, acc1, u, _ = gate_products(hr_rows, h0_rows, later, first, 1, 0, rz, rr, rc, rc, 1, H, offs_n, mask_n,
                                             H, tl.load(g_ptrs, mask=m2, other=0.0),
                                             tl.load(g_ptrs + H, mask=m2, other=0.0), zero, zero,
                                             False, HAS_STATE, ALLOW_TF32, BLOCK_K, 3 if LBR else 2)
            hp = _hp(out_ptr, h0_ptr, rows, cols, first, later, mask_n, s_ot, s_ob, s_og, s_h0, t, HAS_STATE, KEEP)
            z = sigmoid(acc0)
            r = sigmoid(acc1)
            here = out_ptr + t * s_ot + rows[:, None] * s_ob + cols
            ty = out_ptr.dtype.element_ty
            if KEEP:
                tl.store(here, z.to(ty), mask=m2)
                tl.store(here + s_og, r.to(ty), mask=m2)
                tl.store(here + 4 * s_og, hp.to(ty), mask=first[:, None] & mask_n[None, :])   # h[-1]
            if LBR:
                c = activate(tl.load(g_ptrs + 2 * H, mask=m2, other=0.0) + r * u, TANH, 0.0)
                y = (1.0 - z) * c + z * hp
                if KEEP:
                    tl.store(here + 2 * s_og, c.to(ty), mask=m2)
                    tl.store(here + 5 * s_og, u.to(ty), mask=m2)
                    tl.store(here + 6 * s_og, hp.to(ty), mask=m2)
                    tl.store(here + s_ot + 4 * s_og, y.to(ty), mask=(mask_m & (rows * 0 + t + 1 < T))[:, None] & mask_n[None, :])
                else:
                    tl.store(here, y.to(ty), mask=m2)
            else:    # r * h[t-1] for the second pass
                if KEEP:
                    tl.store(here + 6 * s_og, (r * hp).to(ty), mask=m2)
                else:
                    tl.store(s_ptr + rows[:, None] * s_gm + cols, z, mask=m2)
                    tl.store(s_ptr + H + rows[:, None] * s_gm + cols, r * hp, mask=m2)
        if not LBR:
            tl.debug_barrier()      # r * h[t-1] of every column before its product with c_hh
            if KEEP:
                rh_rows = out_ptr + t * s_ot + rows * s_ob + 6 * s_og
            else:
                rh_rows = s_ptr + H + rows * s_gm
            for n0 in range(0, H, BLOCK_N):
                offs_n = n0 + tl.arange(0, BLOCK_N)
                mask_n = offs_n < H
                m2 = mask_m[:, None] & mask_n[None, :]
                cols = offs_n[None, :]
                zero = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                u, _, _, _ = gate_products(rh_rows, rh_rows, mask_m, mask_m, 1, 0, rc, rc, rc, rc, 1, H, offs_n, mask_n,
                                           H, zero, zero, zero, zero, False, False, ALLOW_TF32, BLOCK_K, 1)
                gc = tl.load(gx_ptr + (t * B + rows)[:, None] * s_gm + 2 * H + cols, mask=m2, other=0.0)
                c = activate(gc + u, TANH, 0.0)
                hp = _hp(out_ptr, h0_ptr, rows, cols, first, later, mask_n, s_ot, s_ob, s_og, s_h0, t, HAS_STATE, KEEP)
                here = out_ptr + t * s_ot + rows[:, None] * s_ob + cols
                ty = out_ptr.dtype.element_ty
                if KEEP:
                    z = tl.load(here, mask=m2, other=0.0).to(tl.float32)
                else:
                    z = tl.load(s_ptr + rows[:, None] * s_gm + cols, mask=m2, other=0.0)
                y = (1.0 - z) * c + z * hp
                if KEEP:
                    tl.store(here + 2 * s_og, c.to(ty), mask=m2)
                    tl.store(here + s_ot + 4 * s_og, y.to(ty), mask=(mask_m & (rows * 0 + t + 1 < T))[:, None] & mask_n[None, :])
                else:
                    tl.store(here, y.to(ty), mask=m2)
        tl.debug_barrier()     # step t's h written by all of this program's threads before step t + 1 reads


@triton.jit
def gru_backward_kernel(g_ptr, dy_ptr, rz, rr, rc, T, B, H, s_gt, s_gb, s_gg, s_dt, s_db,
                        LBR: tl.constexpr, ALLOW_TF32: tl.constexpr,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Backpropagation through time in g, the [T, B, 7, H] blocks gru_forward_kernel (KEEP) filled
    (module docstring); as netc.ops.recurrent.gru_grad_gates."""
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    mask_m = rows < B
    for k in range(0, T + 1):
        t = T - 1 - k
        nxt = mask_m & (rows * 0 + t + 1 < T)
        live = mask_m & (rows * 0 + t >= 0)
        d_rows = g_ptr + (t + 1) * s_gt + rows * s_gb
        ty = g_ptr.dtype.element_ty
        for n0 in range(0, H, BLOCK_N):
            offs_n = n0 + tl.arange(0, BLOCK_N)
            mask_n = offs_n < H
            cols = offs_n[None, :]
            mn = nxt[:, None] & mask_n[None, :]
            ml = live[:, None] & mask_n[None, :]
            nxt_ptrs = g_ptr + (t + 1) * s_gt + rows[:, None] * s_gb + cols
            zero = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            a0, a1, _, _ = gate_products(d_rows, d_rows, nxt, nxt, 1, s_gg, rz, rr, rr, rr, H, 1, offs_n, mask_n, H,
                                         zero, zero, zero, zero, True, False, ALLOW_TF32, BLOCK_K, 2)
            dh_next = a0 + a1 + tl.load(nxt_ptrs + 3 * s_gg, mask=mn, other=0.0).to(tl.float32)
            if LBR:
                uc_rows = d_rows + 5 * s_gg
                a2, _, _, _ = gate_products(uc_rows, uc_rows, nxt, nxt, 1, 0, rc, rc, rc, rc, H, 1, offs_n, mask_n, H,
                                            zero, zero, zero, zero, False, False, ALLOW_TF32, BLOCK_K, 1)
                dh_next += a2
            tl.store(nxt_ptrs + 3 * s_gg, dh_next.to(ty), mask=mn)
            here = g_ptr + t * s_gt + rows[:, None] * s_gb + cols
            z = tl.load(here, mask=ml, other=0.0).to(tl.float32)
            r = tl.load(here + s_gg, mask=ml, other=0.0).to(tl.float32)
            c = tl.load(here + 2 * s_gg, mask=ml, other=0.0).to(tl.float32)
            hp = tl.load(here + 4 * s_gg, mask=ml, other=0.0).to(tl.float32)
            dh = tl.load(dy_ptr + t * s_dt + rows[:, None] * s_db + cols, mask=ml, other=0.0).to(tl.float32) + dh_next
            dc = dh * (1.0 - z) * (1.0 - c * c)
            tl.store(here, (dh * (hp - c) * z * (1.0 - z)).to(ty), mask=ml)
            tl.store(here + 2 * s_gg, dc.to(ty), mask=ml)
            tl.store(here + 3 * s_gg, (dh * z).to(ty), mask=ml)          # dh_prev[t]'s partial
            if LBR:
                u = tl.load(here + 5 * s_gg, mask=ml, other=0.0).to(tl.float32)
                tl.store(here + s_gg, (dc * u * r * (1.0 - r)).to(ty), mask=ml)
                tl.store(here + 5 * s_gg, (dc * r).to(ty), mask=ml)
            else:
                tl.store(here + 5 * s_gg, dc.to(ty), mask=ml)
        if not LBR:
            tl.debug_barrier()      # dc of every column before drh = dc c_hh
            dc_rows = g_ptr + t * s_gt + rows * s_gb + 2 * s_gg
            for n0 in range(0, H, BLOCK_N):
                offs_n = n0 + tl.arange(0, BLOCK_N)
                mask_n = offs_n < H
                cols = offs_n[None, :]
                ml = live[:, None] & mask_n[None, :]
                zero = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                drh, _, _, _ = gate_products(dc_rows, dc_rows, live, live, 1, 0, rc, rc, rc, rc, H, 1, offs_n, mask_n, H,
                                             zero, zero, zero, zero, False, False, ALLOW_TF32, BLOCK_K, 1)
                here = g_ptr + t * s_gt + rows[:, None] * s_gb + cols
                r = tl.load(here + s_gg, mask=ml, other=0.0).to(tl.float32)
                hp = tl.load(here + 4 * s_gg, mask=ml, other=0.0).to(tl.float32)
                part = tl.load(here + 3 * s_gg, mask=ml, other=0.0).to(tl.float32)
                tl.store(here + s_gg, (drh * hp * r * (1.0 - r)).to(ty), mask=ml)
                tl.store(here + 3 * s_gg, (part + drh * r).to(ty), mask=ml)
        tl.debug_barrier()     # step t's blocks written before step t - 1 reads them


# --------------------------------------------------------------------------- launchers

def gru_workspace(t: int, b: int, h: int, forward: bool = True) -> int:
    """fp32 scratch of gru (gx's T * B rows of 3H, each followed by 2H: the first B rows' hold z and
    r * h[t-1], so that no part of the scratch moves with the batch, be it T or, for one step, B) or of
    gru_grad_gates (gx, T * B * 3H)."""
    return t * b * (5 if forward else 3) * h


def _setup(x, h0, params, bias):
    """(x as [T, B, X], T, B, X, H, the recurrent weights, the input weights, the biases or None)."""
    if x.dim() == 2:
        check_float(x, "x")
        x = x.unsqueeze(0)
    x3 = as_sequence(x)
    t, b, xd = x3.shape
    h = params["z_hh"].shape[0]
    if h0 is not None and (tuple(h0.shape) != (b, h) or (h > 1 and h0.stride(1) != 1)):
        raise ValueError(f"h0 must be [{b}, {h}] with contiguous rows, got {list(h0.shape)} strides {h0.stride()}")
    rs = weights_of(params, [f"{g}_hh" for g in GATES], (h, h))
    ws = weights_of(params, [f"{g}_hx" for g in GATES], (h, xd))
    bs = [params[f"{g}_b"] for g in GATES] if bias else None
    for g, v in zip(GATES, bs or []):
        if tuple(v.shape) != (h,):
            raise ValueError(f"{g}_b must be [{h}], got {list(v.shape)}")
    return x3, t, b, xd, h, rs, ws, bs


def _scratch(workspace, need, device):
    if workspace is None:
        workspace = torch.empty(max(need, 1), dtype=torch.float32, device=device)
    if workspace.dtype != torch.float32 or workspace.numel() < need:
        raise ValueError(f"workspace must hold {need} float32 elements")
    return workspace


def gru(x, h0, params: dict, bias: bool = True, linear_before_reset: bool = True, *, out=None, workspace=None,
        allow_tf32=False, block_m=None, block_n=None, block_k=None, num_warps=4, launch=True):
    """netc.gru: y [T, B, H] (or [B, H] for one step x [B, X]) from x [T, B, ...], the optional h0
    [B, H] and the parameters by role (z_hx, r_hx, c_hx [H, X], z_hh, r_hh, c_hh [H, H], z_b, r_b, c_b
    [H] with bias). `workspace`: gru_workspace(T, B, H) fp32 elements. launch=False: the two
    KernelCalls (the input GEMM, the recurrence)."""
    x3, t, b, xd, h, rs, ws, bs = _setup(x, h0, params, bias)
    shape = (b, h) if x.dim() == 2 else (t, b, h)
    if out is None:
        out = torch.empty(shape, dtype=x.dtype, device=x.device)
    if tuple(out.shape) != shape or (h > 1 and out.stride(-1) != 1):
        raise ValueError(f"out must be {list(shape)} with contiguous rows, got {list(out.shape)}")
    o3 = out.unsqueeze(0) if out.dim() == 2 else out
    need = gru_workspace(t, b, h)
    workspace = _scratch(workspace, need, x.device)
    gx, scratch = workspace[:need], workspace[3 * h:need]
    bm, bn, bk = lstm_blocks(b, h, max(xd, h), block_m, block_n, block_k)
    first = gates_input_call(x3, ws, bs, gx, allow_tf32, block_m, bn, bk, num_warps, row_stride=5 * h)
    second = KernelCall(gru_forward_kernel, (triton.cdiv(b, bm),), (
        gx, h0 if h0 is not None else dummy(x.device), *rs, o3, scratch, t, b, h, 5 * h,
        h0.stride(0) if h0 is not None else 0,
        o3.stride(0), o3.stride(1), 0), dict(
        HAS_STATE=h0 is not None, LBR=bool(linear_before_reset), KEEP=False, ALLOW_TF32=tf32_mode(allow_tf32),
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk), dict(num_warps=num_warps), out)
    return finish_calls([first, second], launch)


def gru_grad_gates(x, h0, dy, params: dict, bias: bool = True, linear_before_reset: bool = True, *, out=None,
                   workspace=None, allow_tf32=False, block_m=None, block_n=None, block_k=None, num_warps=4,
                   launch=True):
    """netc.gru_grad_gates: [T, B, 7, H] (netc.ops.recurrent.BLOCKS) from x, h0 (or None) and dy (x's
    shape with H features): the input GEMM, the forward recomputed into the result's blocks, the
    recurrence backwards. `workspace`: gru_workspace(T, B, H, forward=False) fp32 elements."""
    x3, t, b, xd, h, rs, ws, bs = _setup(x, h0, params, bias)
    d3 = dy.unsqueeze(0) if dy.dim() == 2 else dy
    if tuple(d3.shape) != (t, b, h) or (h > 1 and d3.stride(2) != 1):
        raise ValueError(f"dy must be [{t}, {b}, {h}] with contiguous rows, got {list(dy.shape)}")
    if out is None:
        out = torch.empty((t, b, 7, h), dtype=dy.dtype, device=dy.device)
    if tuple(out.shape) != (t, b, 7, h) or (h > 1 and out.stride(3) != 1):
        raise ValueError(f"out must be [{t}, {b}, 7, {h}] with contiguous rows, got {list(out.shape)}")
    need = gru_workspace(t, b, h, forward=False)
    gx = _scratch(workspace, need, x.device)[:need]
    bm, bn, bk = lstm_blocks(b, h, max(xd, h), block_m, block_n, block_k)
    tiles = dict(LBR=bool(linear_before_reset), ALLOW_TF32=tf32_mode(allow_tf32), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    so = (out.stride(0), out.stride(1), out.stride(2))
    z = dummy(x.device)
    calls = [gates_input_call(x3, ws, bs, gx, allow_tf32, block_m, bn, bk, num_warps),
             KernelCall(gru_forward_kernel, (triton.cdiv(b, bm),), (
                 gx, h0 if h0 is not None else z, *rs, out, z, t, b, h, 3 * h, h0.stride(0) if h0 is not None else 0,
                 *so),
                 dict(HAS_STATE=h0 is not None, KEEP=True, **tiles), dict(num_warps=num_warps), out),
             KernelCall(gru_backward_kernel, (triton.cdiv(b, bm),), (
                 out, d3, *rs, t, b, h, *so, d3.stride(0), d3.stride(1)), tiles, dict(num_warps=num_warps), out)]
    return finish_calls(calls, launch)
