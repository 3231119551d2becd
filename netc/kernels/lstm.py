"""LSTM kernels (netc.lstm and its gradient ops, netc/ops/lstm.py), cuDNN's recipe: the input
products of all T steps as one GEMM, then the recurrence, whose recurrent product h[t-1] R^T has the
gate nonlinearities, peepholes and the state update fused into its epilogue.

    lstm_input_kernel      gx[m, g, :] = x[m] W_g^T + b_g, the four gates at once, m = t * B + b over
                           all T * B rows (one GEMM [T*B, X] x [X, 4H] whose four column blocks are
                           the four weights: they are four parameters, not one matrix, so the kernel
                           reads each from its own pointer instead of netc's gemm over a copy)
    lstm_forward_kernel    the recurrence: for t = 0 .. T-1, acc_g = gx[t] + h[t-1] R_g^T, then the
                           epilogue (sigmoids, activations, peepholes, c and h); KEEP (the gradient's
                           recomputation) also stores the pre-activations and the states the
                           backward reads in lstm_grad_gates' blocks
    lstm_backward_kernel   backpropagation through time: for t = T-1 .. 0, dh_next = sum_g dA_g[t+1] R_g
                           (the recurrent delta GEMM), then the elementwise chain of the gates'
                           derivatives fused after it; one more product gives dh0 at the end
    lstm_grad_x_kernel     dx = sum_g dA_g W_g over all T * B rows: one GEMM whose K runs over the
                           four gates' blocks
    lstm_column_sums_kernel  sum over the T * B rows of dA_g (db) or of dA_g * state (dp)

The recurrence is one launch that loops over t inside (a persistent kernel), not one launch per
step: the steps are the rows of the compiled targets' batch axis when the sequence is the
network's input (T may be any run-time value up to the planned one, so it is a run-time argument,
and a fixed count of per-step launches could not follow it). This needs no synchronization between
programs, because the recurrence never mixes batch rows: a program owns BLOCK_M rows of the batch
and every column of H, loops over H in BLOCK_N column tiles (the recurrent product's K in BLOCK_K
tiles), and reads back at step t only what it wrote itself at step t - 1; a barrier between steps
makes those global-memory writes visible to all its threads. The grid is cdiv(B, BLOCK_M) programs,
which does not depend on T.

Performance (not measured on a GPU yet). With B <= BLOCK_M the whole recurrence is one program, one
SM, at every step re-reading R (4H^2) from L2: right for the small H and B of the tests and
Brainstorm's examples, slow for a large H. cuDNN's persistent kernels spread H over the SMs and
synchronize them with a grid-wide barrier between steps; a barrier that spins on the other programs
cannot run under Triton's interpreter (it runs the programs one after another), so it could not be
tested here: the next step, behind a constexpr the interpreter leaves off.

Memory. gx (T * B * 4 * H fp32) and, in the forward, the cell state c (B * H fp32, before gx so its
place does not move with T) are scratch in the caller's workspace (codegen's planned WORKSPACE
region). The forward keeps nothing for the backward: lstm_grad_gates' operands are x, h0, c0 and dy
(as its reference, it recomputes the forward), and its own [T, B, 9, H] result holds what the
backward needs: the recomputation writes the pre-activations of z, i, f, o into blocks 0-3 (the
backward overwrites them with their gradients, tile by tile, after reading them) and c[t-1], c[t],
h[t-1] into blocks 6-8; the backward writes blocks 4 (dc_prev) and 5 (dh_prev). So the gradient needs
no buffer besides its result and gx.

Accumulation and the elementwise math are fp32; tensors may be fp32, fp16 or bf16 (the stored
pre-activations are in the result's dtype).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import KernelCall, activate, activation_code, check_float, dummy, finish, mma, pow2_at_least, tf32_mode
from .train_common import activation_derivative, finish_calls

GATES = ("z", "i", "f", "o")


@triton.jit
def sigmoid(v):
    return 1.0 / (1.0 + tl.exp(-v))


@triton.jit
def gate_products(a_ptrs, a0_ptrs, mask_a, mask_a0, s_ak, s_ag, r0, r1, r2, r3, s_rk, s_rn, offs_n, mask_n,
                  K, acc0, acc1, acc2, acc3,
                  A_PER_GATE: tl.constexpr, HAS_A0: tl.constexpr, ALLOW_TF32: tl.constexpr, BLOCK_K: tl.constexpr,
                  NG: tl.constexpr = 4):
    """acc_g += A_g[rows, :K] @ B_g[:K, cols], B_g[k, n] at r_g + k * s_rk + n * s_rn. a_ptrs are the
    rows' pointers, mask_a their rows' mask; A_g = A (+ g * s_ag when A_PER_GATE); where HAS_A0, a0_ptrs'
    rows (mask_a0) are added (the forward's h0 at t = 0 and h[t-1] later: one of the two masks is off).
    NG: the products (4: an LSTM's gates; 1 to 3 for a GRU's, kernels/gru.py: the later r and acc unused)."""
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        mk = offs_k < K
        ma = mask_a[:, None] & mk[None, :]
        pa = a_ptrs[:, None] + offs_k[None, :] * s_ak
        a = tl.load(pa, mask=ma, other=0.0)
        if HAS_A0:
            a += tl.load(a0_ptrs[:, None] + offs_k[None, :], mask=mask_a0[:, None] & mk[None, :], other=0.0).to(a.dtype)
        pb = offs_k[:, None] * s_rk + offs_n[None, :] * s_rn
        mb = mk[:, None] & mask_n[None, :]
        acc0 = mma(a, tl.load(r0 + pb, mask=mb, other=0.0), acc0, ALLOW_TF32)
        if NG >= 2:
            if A_PER_GATE:
                a = tl.load(pa + s_ag, mask=ma, other=0.0)
            acc1 = mma(a, tl.load(r1 + pb, mask=mb, other=0.0), acc1, ALLOW_TF32)
        if NG >= 3:
            if A_PER_GATE:
                a = tl.load(pa + 2 * s_ag, mask=ma, other=0.0)
            acc2 = mma(a, tl.load(r2 + pb, mask=mb, other=0.0), acc2, ALLOW_TF32)
        if NG == 4:
            if A_PER_GATE:
                a = tl.load(pa + 3 * s_ag, mask=ma, other=0.0)
            acc3 = mma(a, tl.load(r3 + pb, mask=mb, other=0.0), acc3, ALLOW_TF32)
    return acc0, acc1, acc2, acc3


@triton.jit
def lstm_input_kernel(x_ptr, wz, wi, wf, wo, bz, bi, bf, bo, gx_ptr, M, B, X, H, s_xt, s_xb, s_xk, s_w, s_gm,
                      ALLOW_TF32: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      NG: tl.constexpr = 4, HAS_BIAS: tl.constexpr = True):
    """gx [M, NG, H] (fp32, rows s_gm apart) = x[m] W_g^T (+ b_g); row m of x is (t, b) = (m // B, m % B).
    NG = 3: a GRU's three gates (kernels/gru.py; wo, bo unused)."""
    offs_m = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_m = offs_m < M
    mask_n = offs_n < H
    a_ptrs = x_ptr + (offs_m // B) * s_xt + (offs_m % B) * s_xb
    z = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc0, acc1, acc2, acc3 = gate_products(a_ptrs, a_ptrs, mask_m, mask_m, s_xk, 0, wz, wi, wf, wo, 1, s_w,
                                           offs_n, mask_n, X, z, z, z, z, False, False, ALLOW_TF32, BLOCK_K, NG)
    m2 = mask_m[:, None] & mask_n[None, :]
    out = gx_ptr + offs_m[:, None] * s_gm + offs_n[None, :]
    if HAS_BIAS:
        acc0 += tl.load(bz + offs_n, mask=mask_n, other=0.0).to(tl.float32)[None, :]
        acc1 += tl.load(bi + offs_n, mask=mask_n, other=0.0).to(tl.float32)[None, :]
        acc2 += tl.load(bf + offs_n, mask=mask_n, other=0.0).to(tl.float32)[None, :]
        if NG == 4:
            acc3 += tl.load(bo + offs_n, mask=mask_n, other=0.0).to(tl.float32)[None, :]
    tl.store(out, acc0, mask=m2)
    tl.store(out + H, acc1, mask=m2)
    tl.store(out + 2 * H, acc2, mask=m2)
    if NG == 4:
        tl.store(out + 3 * H, acc3, mask=m2)


@triton.jit
def lstm_forward_kernel(gx_ptr, h0_ptr, c0_ptr, rz, ri, rf, ro, pi_ptr, pf_ptr, po_ptr, out_ptr, c_ptr,
                        T, B, H, s_h0, s_c0, s_ot, s_ob, s_og,
                        ACTIVATION: tl.constexpr, HAS_STATE: tl.constexpr, KEEP: tl.constexpr,
                        ALLOW_TF32: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        CELL_ACTIVATION: tl.constexpr):
    """The recurrence over rows [pid * BLOCK_M, +BLOCK_M) of the batch. ACTIVATION is the block input's,
    CELL_ACTIVATION the cell output's (netc.lstm's cell_activation; codes of common.ACTIVATIONS). Not
    KEEP: out is y [T, B, H] (h[t-1] read from y[t-1]), c_ptr the cell state [B, H] (fp32, updated in
    place). KEEP: out is the gradient's [T, B, 9, H] (block g at g * s_og): pre-activations into blocks
    0-3, c[t-1], c[t] into blocks 6, 7, h[t-1] into block 8 (h[t] read back from block 8 of step t + 1)."""
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    mask_m = rows < B
    h0_rows = h0_ptr + rows * s_h0
    for t in range(0, T):
        first = mask_m & (rows * 0 + t == 0)        # the rows' mask at step 0 only (and below, after it)
        later = mask_m & (rows * 0 + t > 0)
        if KEEP:
            hr_rows = out_ptr + t * s_ot + rows * s_ob + 8 * s_og          # h[t-1]: block 8 of step t
        else:
            hr_rows = out_ptr + (t - 1) * s_ot + rows * s_ob               # h[t-1] = y[t-1]
        for n0 in range(0, H, BLOCK_N):
            offs_n = n0 + tl.arange(0, BLOCK_N)
            mask_n = offs_n < H
            m2 = mask_m[:, None] & mask_n[None, :]
            g_ptrs = gx_ptr + (t * B + rows)[:, None] * (4 * H) + offs_n[None, :]
            acc0 = tl.load(g_ptrs, mask=m2, other=0.0)
            acc1 = tl.load(g_ptrs + H, mask=m2, other=0.0)
            acc2 = tl.load(g_ptrs + 2 * H, mask=m2, other=0.0)
            acc3 = tl.load(g_ptrs + 3 * H, mask=m2, other=0.0)
            acc0, acc1, acc2, acc3 = gate_products(hr_rows, h0_rows, later, first, 1, 0, rz, ri, rf, ro,
                                                    1, H, offs_n, mask_n, H, acc0, acc1, acc2, acc3,
                                                    False, HAS_STATE, ALLOW_TF32, BLOCK_K)
            cols = offs_n[None, :]
            if KEEP:
                c_prev = tl.load(out_ptr + (t - 1) * s_ot + rows[:, None] * s_ob + 7 * s_og + cols,
                                 mask=later[:, None] & mask_n[None, :], other=0.0).to(tl.float32)
            else:
                c_prev = tl.load(c_ptr + rows[:, None] * H + cols, mask=later[:, None] & mask_n[None, :], other=0.0)
            if HAS_STATE:
                c_prev += tl.load(c0_ptr + rows[:, None] * s_c0 + cols, mask=first[:, None] & mask_n[None, :],
                                  other=0.0).to(tl.float32)
            pi = tl.load(pi_ptr + offs_n, mask=mask_n, other=0.0).to(tl.float32)[None, :]
            pf = tl.load(pf_ptr + offs_n, mask=mask_n, other=0.0).to(tl.float32)[None, :]
            po = tl.load(po_ptr + offs_n, mask=mask_n, other=0.0).to(tl.float32)[None, :]
            ia = acc1 + pi * c_prev
            fa = acc2 + pf * c_prev
            c = sigmoid(ia) * activate(acc0, ACTIVATION, 0.0) + sigmoid(fa) * c_prev
            oa = acc3 + po * c
            h = sigmoid(oa) * activate(c, CELL_ACTIVATION, 0.0)
            if KEEP:
                here = out_ptr + t * s_ot + rows[:, None] * s_ob + cols
                ty = out_ptr.dtype.element_ty
                tl.store(here, acc0.to(ty), mask=m2)
                tl.store(here + s_og, ia.to(ty), mask=m2)
                tl.store(here + 2 * s_og, fa.to(ty), mask=m2)
                tl.store(here + 3 * s_og, oa.to(ty), mask=m2)
                tl.store(here + 6 * s_og, c_prev.to(ty), mask=m2)
                tl.store(here + 7 * s_og, c.to(ty), mask=m2)
                if HAS_STATE:    # h[-1] = h0 into block 8 of step 0 (zeros without a state)
                    h_first = tl.load(h0_rows[:, None] + cols, mask=first[:, None] & mask_n[None, :], other=0.0)
                else:
                    h_first = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                tl.store(here + 8 * s_og, h_first.to(ty), mask=first[:, None] & mask_n[None, :])
                tl.store(here + s_ot + 8 * s_og, h.to(ty), mask=(mask_m & (rows * 0 + t + 1 < T))[:, None] & mask_n[None, :])
            else:
                tl.store(c_ptr + rows[:, None] * H + cols, c, mask=m2)
                tl.store(out_ptr + t * s_ot + rows[:, None] * s_ob + cols, h.to(out_ptr.dtype.element_ty), mask=m2)
        tl.debug_barrier()     # step t's h (and c) written by all of this program's threads before step t + 1 reads


@triton.jit
def lstm_backward_kernel(g_ptr, dy_ptr, rz, ri, rf, ro, pi_ptr, pf_ptr, po_ptr, T, B, H, s_gt, s_gb, s_gg, s_dt, s_db,
                         ACTIVATION: tl.constexpr, ALLOW_TF32: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         CELL_ACTIVATION: tl.constexpr):
    """Backpropagation through time over rows [pid * BLOCK_M, +BLOCK_M) of the batch, in g, the
    [T, B, 9, H] blocks that lstm_forward_kernel (KEEP) filled. Iteration t = T-1 .. -1: the
    recurrent delta dh_prev[t+1] = sum_g dA_g[t+1] R_g (stored in block 5 of step t + 1; at t = -1
    it is dh0), then, for t >= 0, the chain of netc.ops.lstm.lstm_grad_gates with dh = dy[t] +
    dh_prev[t+1] and dc_next = dc_prev[t+1] (block 4), storing dA_z..dA_o over the pre-activations
    (blocks 0-3) and dc_prev[t] (block 4). ACTIVATION: the block input's, CELL_ACTIVATION the cell
    output's, each differentiated where it was applied."""
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    mask_m = rows < B
    for k in range(0, T + 1):
        t = T - 1 - k
        nxt = mask_m & (rows * 0 + t + 1 < T)     # the rows' mask where step t + 1 exists
        live = mask_m & (rows * 0 + t >= 0)        # ... where step t does (not at t = -1)
        d_rows = g_ptr + (t + 1) * s_gt + rows * s_gb         # dA_z[t+1] (block 0), the others s_gg apart
        for n0 in range(0, H, BLOCK_N):
            offs_n = n0 + tl.arange(0, BLOCK_N)
            mask_n = offs_n < H
            m2 = mask_m[:, None] & mask_n[None, :]
            cols = offs_n[None, :]
            z = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            a0, a1, a2, a3 = gate_products(d_rows, d_rows, nxt, nxt, 1, s_gg, rz, ri, rf, ro, H, 1,
                                            offs_n, mask_n, H, z, z, z, z, True, False, ALLOW_TF32, BLOCK_K)
            dh_next = a0 + a1 + a2 + a3
            ty = g_ptr.dtype.element_ty
            nxt_ptrs = g_ptr + (t + 1) * s_gt + rows[:, None] * s_gb + cols
            mn = nxt[:, None] & mask_n[None, :]
            tl.store(nxt_ptrs + 5 * s_gg, dh_next.to(ty), mask=mn)
            dc_next = tl.load(nxt_ptrs + 4 * s_gg, mask=mn, other=0.0).to(tl.float32)
            ml = live[:, None] & mask_n[None, :]
            here = g_ptr + t * s_gt + rows[:, None] * s_gb + cols
            za = tl.load(here, mask=ml, other=0.0).to(tl.float32)
            i = sigmoid(tl.load(here + s_gg, mask=ml, other=0.0).to(tl.float32))
            f = sigmoid(tl.load(here + 2 * s_gg, mask=ml, other=0.0).to(tl.float32))
            o = sigmoid(tl.load(here + 3 * s_gg, mask=ml, other=0.0).to(tl.float32))
            c_prev = tl.load(here + 6 * s_gg, mask=ml, other=0.0).to(tl.float32)
            c = tl.load(here + 7 * s_gg, mask=ml, other=0.0).to(tl.float32)
            zv = activate(za, ACTIVATION, 0.0)
            cb = activate(c, CELL_ACTIVATION, 0.0)
            pi = tl.load(pi_ptr + offs_n, mask=mask_n, other=0.0).to(tl.float32)[None, :]
            pf = tl.load(pf_ptr + offs_n, mask=mask_n, other=0.0).to(tl.float32)[None, :]
            po = tl.load(po_ptr + offs_n, mask=mask_n, other=0.0).to(tl.float32)[None, :]
            dh = tl.load(dy_ptr + t * s_dt + rows[:, None] * s_db + cols, mask=ml, other=0.0).to(tl.float32) + dh_next
            do = dh * cb * o * (1.0 - o)
            dc = activation_derivative(dh * o, cb, CELL_ACTIVATION, 0.0) + dc_next + do * po
            df = dc * c_prev * f * (1.0 - f)
            di = dc * zv * i * (1.0 - i)
            dz = activation_derivative(dc * i, zv, ACTIVATION, 0.0)
            tl.store(here, dz.to(ty), mask=ml)
            tl.store(here + s_gg, di.to(ty), mask=ml)
            tl.store(here + 2 * s_gg, df.to(ty), mask=ml)
            tl.store(here + 3 * s_gg, do.to(ty), mask=ml)
            tl.store(here + 4 * s_gg, (dc * f + di * pi + df * pf).to(ty), mask=ml)
        tl.debug_barrier()     # step t's dA and dc_prev written before step t - 1 reads them


@triton.jit
def lstm_grad_x_kernel(g_ptr, wz, wi, wf, wo, dx_ptr, M, B, X, H, s_gt, s_gb, s_gg, s_w, s_dt, s_db, s_dk,
                       ALLOW_TF32: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       NG: tl.constexpr = 4):
    """dx[m, :] = sum_g dA_g[m, :] W_g over rows m = t * B + b, W_g [H, X], g < NG (blocks 0..NG-1)."""
    offs_m = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_m = offs_m < M
    mask_n = offs_n < X
    t, b = offs_m // B, offs_m % B
    a_ptrs = g_ptr + t * s_gt + b * s_gb
    z = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    a0, a1, a2, a3 = gate_products(a_ptrs, a_ptrs, mask_m, mask_m, 1, s_gg, wz, wi, wf, wo, s_w, 1,
                                   offs_n, mask_n, H, z, z, z, z, True, False, ALLOW_TF32, BLOCK_K, NG)
    tl.store(dx_ptr + (t * s_dt + b * s_db)[:, None] + offs_n[None, :] * s_dk,
             (a0 + a1 + a2 + a3).to(dx_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_n[None, :])


@triton.jit
def lstm_column_sums_kernel(a_ptr, s_ptr, out_ptr, M, B, N, s_at, s_ab, s_st, s_sb,
                            HAS_S: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """out[n] = sum over rows m = t * B + b of a[m, n] (* s[m, n] where HAS_S), in a fixed order."""
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_n = offs_n < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for m0 in range(0, M, BLOCK_M):
        offs_m = (m0 + tl.arange(0, BLOCK_M)).to(tl.int64)
        t, b = offs_m // B, offs_m % B
        m2 = (offs_m < M)[:, None] & mask_n[None, :]
        v = tl.load(a_ptr + (t * s_at + b * s_ab)[:, None] + offs_n[None, :], mask=m2, other=0.0).to(tl.float32)
        if HAS_S:
            v *= tl.load(s_ptr + (t * s_st + b * s_sb)[:, None] + offs_n[None, :], mask=m2, other=0.0).to(tl.float32)
        acc += v
    tl.store(out_ptr + offs_n, tl.sum(acc, 0).to(out_ptr.dtype.element_ty), mask=mask_n)


# --------------------------------------------------------------------------- launchers

def lstm_blocks(b: int, h: int, k: int, block_m=None, block_n=None, block_k=None) -> tuple:
    """(BLOCK_M, BLOCK_N, BLOCK_K): rows of the batch, columns of H, the reduction's step (tl.dot needs
    16 at least). From B, H and X, never from T (the batch axis of the compiled targets)."""
    return (block_m or min(64, pow2_at_least(b)), block_n or min(64, pow2_at_least(h)),
            block_k or min(32, pow2_at_least(k)))


def lstm_workspace(t: int, b: int, h: int, forward: bool = True) -> int:
    """fp32 scratch of lstm (the cell state B * H, then gx T * B * 4H) or of lstm_grad_gates (gx)."""
    return (b * h if forward else 0) + t * b * 4 * h


def as_sequence(x: torch.Tensor) -> torch.Tensor:
    """x [T, B, ...] as [T, B, X] (a view: the features must be dense)."""
    if x.dim() < 3:
        raise ValueError(f"an LSTM reads a time-major sequence [T, B, ...], got {list(x.shape)}")
    check_float(x, "x")
    t, b = x.shape[:2]
    try:
        return x.view(t, b, -1)
    except RuntimeError:
        raise ValueError(f"x's features must be dense (strides {x.stride()})") from None


def _weights(params: dict, kind: str, shape: tuple) -> list:
    return weights_of(params, [f"{kind}{g}" for g in GATES], shape)


def weights_of(params: dict, roles, shape: tuple) -> list:
    """The parameters `roles` of `shape`, with contiguous rows of one stride (the kernels read them so)."""
    ws = [params[r] for r in roles]
    for r, w in zip(roles, ws):
        if tuple(w.shape) != shape:
            raise ValueError(f"{r} must be {list(shape)}, got {list(w.shape)}")
        check_float(w, r)
        if w.dim() == 2 and (w.stride(1) != 1 and w.shape[1] > 1 or w.stride(0) != ws[0].stride(0)):
            raise ValueError(f"{r} must have contiguous rows with the same stride as {roles[0]}")
    return ws


def _peepholes(params: dict, h: int) -> list:
    ps = [params[f"p{g}"] for g in "ifo"]
    for g, p in zip("ifo", ps):
        if p.numel() != h or (h > 1 and p.reshape(-1).stride(0) != 1):
            raise ValueError(f"p{g} must be [1, {h}] contiguous, got {list(p.shape)}")
    return [p.reshape(-1) for p in ps]


def _state(v, b, h, what):
    if tuple(v.shape) != (b, h) or (h > 1 and v.stride(1) != 1):
        raise ValueError(f"{what} must be [{b}, {h}] with contiguous rows, got {list(v.shape)} strides {v.stride()}")
    return v


def _input_call(x3, params, gx, allow_tf32, bm, bn, bk, num_warps):
    h = params["bz"].shape[0]
    return gates_input_call(x3, _weights(params, "W", (h, x3.shape[2])), [params[f"b{g}"] for g in GATES], gx,
                            allow_tf32, bm, bn, bk, num_warps)


def gates_input_call(x3, weights: list, biases, gx, allow_tf32, bm, bn, bk, num_warps, row_stride=None) -> KernelCall:
    """lstm_input_kernel's call: gx [T * B, NG, H] = x W_g^T (+ b_g) for the NG = len(weights) gates
    (3 or 4; biases a list of as many [H], or None), rows `row_stride` apart (default NG * H)."""
    t, b, xd = x3.shape
    h = weights[0].shape[0]
    ng = len(weights)
    m = t * b
    bm_in = bm if bm else min(64, pow2_at_least(m))
    ws = list(weights) + [weights[0]] * (4 - ng)
    bs = list(biases) + [biases[0]] * (4 - ng) if biases else [dummy(x3.device)] * 4
    return KernelCall(lstm_input_kernel, (triton.cdiv(m, bm_in), triton.cdiv(h, bn)), (
        x3, *ws, *bs, gx, m, b, xd, h, x3.stride(0), x3.stride(1), x3.stride(2), ws[0].stride(0), row_stride or ng * h),
        dict(ALLOW_TF32=tf32_mode(allow_tf32), BLOCK_M=bm_in, BLOCK_N=bn, BLOCK_K=bk, NG=ng, HAS_BIAS=bool(biases)),
        dict(num_warps=num_warps), gx)


def lstm(x, h0, c0, params: dict, activation="tanh", *, cell_activation=None, out=None, workspace=None,
         allow_tf32=False, block_m=None, block_n=None, block_k=None, num_warps=4, launch=True):
    """netc.lstm: y [T, B, H] from x [T, B, ...], the optional initial state h0, c0 [B, H] (both or
    neither) and the parameters by role (Wz..Wo [H, X], pi, pf, po [1, H], Rz..Ro [H, H], bz..bo [H]).
    activation: the block input's; cell_activation: the cell output's (None: activation).
    `workspace`: lstm_workspace(T, B, H) fp32 elements (allocated if absent). launch=False returns the
    two KernelCalls (the input GEMM, the recurrence)."""
    x3 = as_sequence(x)
    t, b, xd = x3.shape
    h = params["bz"].shape[0]
    if (h0 is None) != (c0 is None):
        raise ValueError("h0 and c0 come together (Brainstorm's context holds both)")
    if h0 is not None:
        _state(h0, b, h, "h0"), _state(c0, b, h, "c0")
    rs = _weights(params, "R", (h, h))
    ps = _peepholes(params, h)
    if out is None:
        out = torch.empty((t, b, h), dtype=x.dtype, device=x.device)
    if tuple(out.shape) != (t, b, h) or (h > 1 and out.stride(2) != 1):
        raise ValueError(f"out must be [{t}, {b}, {h}] with contiguous rows, got {list(out.shape)}")
    need = lstm_workspace(t, b, h)
    if workspace is None:
        workspace = torch.empty(max(need, 1), dtype=torch.float32, device=x.device)
    if workspace.dtype != torch.float32 or workspace.numel() < need:
        raise ValueError(f"workspace must hold {need} float32 elements")
    c_state, gx = workspace[:b * h], workspace[b * h:need]
    bm, bn, bk = lstm_blocks(b, h, max(xd, h), block_m, block_n, block_k)
    z = dummy(x.device)
    first = _input_call(x3, params, gx, allow_tf32, block_m, bn, bk, num_warps)
    second = KernelCall(lstm_forward_kernel, (triton.cdiv(b, bm),), (
        gx, h0 if h0 is not None else z, c0 if c0 is not None else z, *rs, *ps, out, c_state, t, b, h,
        h0.stride(0) if h0 is not None else 0, c0.stride(0) if c0 is not None else 0,
        out.stride(0), out.stride(1), 0), dict(
        ACTIVATION=activation_code(activation), HAS_STATE=h0 is not None, KEEP=False, ALLOW_TF32=tf32_mode(allow_tf32),
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, CELL_ACTIVATION=activation_code(cell_activation or activation)),
        dict(num_warps=num_warps), out)
    return finish_calls([first, second], launch)


def lstm_grad_gates(x, h0, c0, dy, params: dict, activation="tanh", *, cell_activation=None, out=None,
                    workspace=None, allow_tf32=False, block_m=None, block_n=None, block_k=None, num_warps=4,
                    launch=True):
    """netc.lstm_grad_gates: [T, B, 9, H] (netc.ops.lstm.BLOCKS) from x, h0, c0 (or None) and dy
    [T, B, H]: the input GEMM, the forward recomputed into the result's blocks, the recurrence
    backwards. `workspace`: lstm_workspace(T, B, H, forward=False) fp32 elements."""
    x3 = as_sequence(x)
    t, b, xd = x3.shape
    h = params["bz"].shape[0]
    if h0 is not None:
        _state(h0, b, h, "h0"), _state(c0, b, h, "c0")
    if tuple(dy.shape) != (t, b, h) or (h > 1 and dy.stride(2) != 1):
        raise ValueError(f"dy must be [{t}, {b}, {h}] with contiguous rows, got {list(dy.shape)}")
    rs = _weights(params, "R", (h, h))
    ps = _peepholes(params, h)
    if out is None:
        out = torch.empty((t, b, 9, h), dtype=dy.dtype, device=dy.device)
    if tuple(out.shape) != (t, b, 9, h) or (h > 1 and out.stride(3) != 1):
        raise ValueError(f"out must be [{t}, {b}, 9, {h}] with contiguous rows, got {list(out.shape)}")
    need = lstm_workspace(t, b, h, forward=False)
    if workspace is None:
        workspace = torch.empty(max(need, 1), dtype=torch.float32, device=x.device)
    if workspace.dtype != torch.float32 or workspace.numel() < need:
        raise ValueError(f"workspace must hold {need} float32 elements")
    gx = workspace[:need]
    bm, bn, bk = lstm_blocks(b, h, max(xd, h), block_m, block_n, block_k)
    z = dummy(x.device)
    tiles = dict(ALLOW_TF32=tf32_mode(allow_tf32), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    act = dict(ACTIVATION=activation_code(activation), CELL_ACTIVATION=activation_code(cell_activation or activation))
    so = (out.stride(0), out.stride(1), out.stride(2))
    calls = [_input_call(x3, params, gx, allow_tf32, block_m, bn, bk, num_warps),
             KernelCall(lstm_forward_kernel, (triton.cdiv(b, bm),), (
                 gx, h0 if h0 is not None else z, c0 if c0 is not None else z, *rs, *ps, out, z, t, b, h,
                 h0.stride(0) if h0 is not None else 0, c0.stride(0) if c0 is not None else 0, *so),
                 dict(**act, HAS_STATE=h0 is not None, KEEP=True, **tiles), dict(num_warps=num_warps), out),
             KernelCall(lstm_backward_kernel, (triton.cdiv(b, bm),), (
                 out, dy, *rs, *ps, t, b, h, *so, dy.stride(0), dy.stride(1)),
                 dict(**act, **tiles), dict(num_warps=num_warps), out)]
    return finish_calls(calls, launch)


def gates_of(gates, blocks: int = 9, what: str = "an LSTM"):
    """(T, B, H) of a recurrent layer's gates gradient [T, B, blocks, H] (contiguous rows), or ValueError."""
    if gates.dim() != 4 or gates.shape[2] != blocks or (gates.shape[3] > 1 and gates.stride(3) != 1):
        raise ValueError(f"expected {what} gates gradient [T, B, {blocks}, H] with contiguous rows, "
                         f"got {list(gates.shape)}")
    check_float(gates, "gates")
    return gates.shape[0], gates.shape[1], gates.shape[3]


def lstm_grad_x(gates, params: dict, input_shape, *, out=None, allow_tf32=False, block_m=None, block_n=None,
                block_k=None, num_warps=4, launch=True):
    """netc.lstm_grad_data for x: dx = sum_g dA_g W_g over all T * B rows, in x's shape."""
    gates_of(gates)
    return gates_grad_x(gates, params, [f"W{g}" for g in GATES], input_shape, out=out, allow_tf32=allow_tf32,
                        block_m=block_m, block_n=block_n, block_k=block_k, num_warps=num_warps, launch=launch)


def gates_grad_x(gates, params: dict, roles, input_shape, *, out=None, allow_tf32=False, block_m=None, block_n=None,
                 block_k=None, num_warps=4, launch=True):
    """dx = sum_g dA_g W_g (g over `roles`, 3 or 4, the gradient's blocks 0..) over all T * B rows, in x's
    shape (input_shape; a rank-2 [B, X] is one step)."""
    t, b, h = gates.shape[0], gates.shape[1], gates.shape[3]
    shape = tuple(input_shape)
    if not ((len(shape) >= 3 and shape[:2] == (t, b)) or (len(shape) == 2 and t == 1 and shape[0] == b)):
        raise ValueError(f"{list(shape)} is not the x of a recurrent layer with gates {list(gates.shape)}")
    if out is None:
        out = torch.empty(shape, dtype=gates.dtype, device=gates.device)
    d3 = as_sequence(out if out.dim() >= 3 else out.unsqueeze(0))
    xd = d3.shape[2]
    ws = weights_of(params, list(roles), (h, xd))
    ng = len(ws)
    ws = ws + [ws[0]] * (4 - ng)
    m = t * b
    bm = block_m or min(64, pow2_at_least(m))
    bn = block_n or min(64, pow2_at_least(xd))
    bk = block_k or min(32, pow2_at_least(h))
    return finish(KernelCall(lstm_grad_x_kernel, (triton.cdiv(m, bm), triton.cdiv(xd, bn)), (
        gates, *ws, d3, m, b, xd, h, gates.stride(0), gates.stride(1), gates.stride(2), ws[0].stride(0),
        d3.stride(0), d3.stride(1), d3.stride(2)),
        dict(ALLOW_TF32=tf32_mode(allow_tf32), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, NG=ng), dict(num_warps=num_warps),
        out), launch)


def lstm_column_sums(a, s=None, *, out=None, block_m=None, block_n=None, num_warps=4, launch=True):
    """sum over T and B of a [T, B, H] (a view of a gates block), times s [T, B, H] where given: an LSTM's
    db (a alone) or dp (s the cell state); out [H] or [1, H]."""
    t, b, h = a.shape
    if s is not None and tuple(s.shape) != (t, b, h):
        raise ValueError(f"s {list(s.shape)} must be a's shape {list(a.shape)}")
    for v in (a, s):
        if v is not None and h > 1 and v.stride(2) != 1:
            raise ValueError("a and s need contiguous rows")
    if out is None:
        out = torch.empty(h, dtype=a.dtype, device=a.device)
    if out.numel() != h:
        raise ValueError(f"out must hold {h} elements, got {list(out.shape)}")
    bn = block_n or min(128, pow2_at_least(h, 1))
    bm = block_m or min(64, pow2_at_least(t * b, 1))
    z = s if s is not None else a
    return finish(KernelCall(lstm_column_sums_kernel, (triton.cdiv(h, bn),), (
        a, z, out, t * b, b, h, a.stride(0), a.stride(1), z.stride(0), z.stride(1)),
        dict(HAS_S=s is not None, BLOCK_M=bm, BLOCK_N=bn), dict(num_warps=num_warps), out), launch)
