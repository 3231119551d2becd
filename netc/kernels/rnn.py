"""Kernels of the simple recurrent layers (netc.recurrent and netc.clockwork, netc/ops/rnn.py) and of
their gradient ops, on the LSTM's recipe (kernels/lstm.py): the input products of all T steps as one
GEMM, then the recurrence as one persistent launch whose recurrent product h[t-1] R^T has the
activation (and the Clockwork's update rule) fused after it.

    input GEMM            gx [T * B, H] = x W^T + bias over all T * B rows (netc's gemm, kernels/gemm.py,
                          its bias in the epilogue; x [T, B, X] seen as [T * B, X], W^T a transposed view)
    rnn_forward_kernel    the recurrence: for t = 0 .. T-1, Ha = gx[t] + h[t-1] R^T, a = act(Ha), and
                          y[t] = a (Recurrent), or, for a Clockwork (CLOCK), y[t] = a where the unit's
                          clock ticks (t = 0, or fmod(t, timing) == 0) and y[t-1] elsewhere; KEEP (the
                          gradient's recomputation) stores Ha and h[t-1] into the steps gradient's blocks
    rnn_backward_kernel   backpropagation through time: for t = T-1 .. 0, the recurrent delta
                          dHa[t+1] R (what step t + 1 sends back to h[t]) as a product over H, then the
                          elementwise chain fused after it: d = dy[t] + that, dHa[t] = act'(Ha[t]) d (0
                          where a Clockwork unit kept its output, which instead passes d on to h[t-1]);
                          one more product gives dh0 at the end
    rnn_grad_data         dx = dHa W over all T * B rows (one GEMM; netc's gemm); dh0 is a block of the
                          steps gradient (kernels/rnn_lowering.py copies it)
    rnn_grad_param        dW = dHa^T x and dR = dHa^T h[t-1] (netc's gemm on transposed views, K = T * B),
                          dbias the column sums of dHa (kernels/lstm.py lstm_column_sums: a fixed order);
                          a Clockwork's timing has no gradient (the op's)

The steps gradient [T, B, 3, H] (netc.ops.rnn.BLOCKS) is the whole state of the backward, as an
LSTM's gates gradient is: the recomputation writes Ha[t] into block 0 (the backward overwrites it
with dHa[t], tile by tile, after reading it) and h[t-1] into block 2 (h[t] is read back from block 2
of step t + 1); the backward writes block 1, what step t sends back to h[t-1] (at t = 0: dh0). For a
Clockwork the elementwise phase of step t first stores there the part a kept unit passes on, d[t]
(1 - tick), and the next iteration adds the recurrent product to it.

The recurrence is one launch that loops over t inside, with the LSTM kernels' reasons (T is the
compiled targets' batch when the sequence is the network's input, a run-time argument): a program
owns BLOCK_M rows of the batch and every column of H, loops over H in BLOCK_N column tiles (the
recurrent product's K in BLOCK_K tiles), and reads back at step t only what it wrote itself at step
t - 1, so no synchronization between programs is needed, only a barrier between steps. The grid is
cdiv(B, BLOCK_M) programs, which does not depend on T.

Memory: gx (T * B * H fp32) is scratch in the caller's workspace (codegen's planned WORKSPACE region);
the forward keeps nothing for the backward (its gradient op recomputes it from x, h0 and dy, as its
reference does). Accumulation and the elementwise math are fp32; tensors may be fp32, fp16 or bf16.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import KernelCall, activate, activation_code, check_float, dummy, finish, mma, pow2_at_least, tf32_mode
from .train_common import activation_derivative, finish_calls

# the steps gradient's blocks (netc.ops.rnn.BLOCKS)
PRE, DH_PREV, H_PREV = 0, 1, 2


@triton.jit
def ticks(t, timing_ptr, offs_n, mask_n):
    """Which of the units offs_n update at step t: all at t = 0, else those with fmod(t, timing) == 0
    (a NaN fmod, from a period of 0 or NaN, keeps the output, as netc.ops.rnn.clock_ticks)."""
    period = tl.load(timing_ptr + offs_n, mask=mask_n, other=1.0).to(tl.float32)
    now = (offs_n * 0 + t).to(tl.float32)
    return ((now % period) == 0.0) | (offs_n * 0 + t == 0)


@triton.jit
def rnn_forward_kernel(gx_ptr, h0_ptr, r_ptr, timing_ptr, out_ptr, T, B, H, s_h0, s_r, s_ot, s_ob, s_og,
                       ACTIVATION: tl.constexpr, HAS_STATE: tl.constexpr, CLOCK: tl.constexpr, KEEP: tl.constexpr,
                       ALLOW_TF32: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """The recurrence over rows [pid * BLOCK_M, +BLOCK_M) of the batch; gx [T * B, H] fp32 (contiguous).
    Not KEEP: out is y [T, B, H] (h[t-1] read from y[t-1]). KEEP: out is the steps gradient [T, B, 3, H]
    (block g at g * s_og): Ha[t] into block 0 of step t, h[t-1] into block 2 (h[t-1] read from there)."""
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    mask_m = rows < B
    h0_rows = h0_ptr + rows * s_h0
    for t in range(0, T):
        first = mask_m & (rows * 0 + t == 0)        # the rows' mask at step 0 only (and below, after it)
        later = mask_m & (rows * 0 + t > 0)
        if KEEP:
            hr_rows = out_ptr + t * s_ot + rows * s_ob + 2 * s_og        # h[t-1]: block 2 of step t
        else:
            hr_rows = out_ptr + (t - 1) * s_ot + rows * s_ob             # h[t-1] = y[t-1]
        for n0 in range(0, H, BLOCK_N):
            offs_n = n0 + tl.arange(0, BLOCK_N)
            mask_n = offs_n < H
            m2 = mask_m[:, None] & mask_n[None, :]
            cols = offs_n[None, :]
            acc = tl.load(gx_ptr + (t * B + rows)[:, None] * H + cols, mask=m2, other=0.0)
            for k0 in range(0, H, BLOCK_K):          # acc += h[t-1] R^T, R^T[k, n] = R[n, k]
                offs_k = k0 + tl.arange(0, BLOCK_K)
                mk = offs_k < H
                a = tl.load(hr_rows[:, None] + offs_k[None, :], mask=later[:, None] & mk[None, :], other=0.0)
                if HAS_STATE:
                    a += tl.load(h0_rows[:, None] + offs_k[None, :], mask=first[:, None] & mk[None, :],
                                 other=0.0).to(a.dtype)
                r = tl.load(r_ptr + offs_n[None, :] * s_r + offs_k[:, None], mask=mk[:, None] & mask_n[None, :],
                            other=0.0)
                acc = mma(a, r, acc, ALLOW_TF32)
            y = activate(acc, ACTIVATION, 0.0)
            if KEEP or CLOCK:      # h[t-1]'s tile: a kept unit's output, and what KEEP stores
                h_prev = tl.load(hr_rows[:, None] + cols, mask=later[:, None] & mask_n[None, :], other=0.0)
                h_prev = h_prev.to(tl.float32)
                if HAS_STATE:
                    h_prev += tl.load(h0_rows[:, None] + cols, mask=first[:, None] & mask_n[None, :],
                                      other=0.0).to(tl.float32)
            if CLOCK:
                y = tl.where(ticks(t, timing_ptr, offs_n, mask_n)[None, :], y, h_prev)
            ty = out_ptr.dtype.element_ty
            if KEEP:
                here = out_ptr + t * s_ot + rows[:, None] * s_ob + cols
                tl.store(here, acc.to(ty), mask=m2)
                tl.store(here + 2 * s_og, h_prev.to(ty), mask=first[:, None] & mask_n[None, :])
                tl.store(here + s_ot + 2 * s_og, y.to(ty), mask=(mask_m & (rows * 0 + t + 1 < T))[:, None] & mask_n[None, :])
            else:
                tl.store(out_ptr + t * s_ot + rows[:, None] * s_ob + cols, y.to(ty), mask=m2)
        tl.debug_barrier()     # step t's h written by all of this program's threads before step t + 1 reads it


@triton.jit
def rnn_backward_kernel(g_ptr, dy_ptr, r_ptr, timing_ptr, T, B, H, s_r, s_gt, s_gb, s_gg, s_dt, s_db,
                        ACTIVATION: tl.constexpr, CLOCK: tl.constexpr, ALLOW_TF32: tl.constexpr,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Backpropagation through time over rows [pid * BLOCK_M, +BLOCK_M) of the batch, in g, the
    [T, B, 3, H] blocks that rnn_forward_kernel (KEEP) filled. Iteration t = T-1 .. -1: block 1 of step
    t + 1 (what it sends back to h[t]) += dHa[t+1] R (set, for a Recurrent; at t = -1 it is dh0), then,
    for t >= 0, d = dy[t] + that, dHa[t] = act'(Ha[t]) d over Ha[t] in block 0 (times the clock's tick)
    and, for a Clockwork, the kept units' d (1 - tick) into block 1 of step t."""
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    mask_m = rows < B
    for k in range(0, T + 1):
        t = T - 1 - k
        nxt = mask_m & (rows * 0 + t + 1 < T)     # the rows' mask where step t + 1 exists
        live = mask_m & (rows * 0 + t >= 0)        # ... where step t does (not at t = -1)
        d_rows = g_ptr + (t + 1) * s_gt + rows * s_gb         # dHa[t+1] (block 0)
        for n0 in range(0, H, BLOCK_N):
            offs_n = n0 + tl.arange(0, BLOCK_N)
            mask_n = offs_n < H
            cols = offs_n[None, :]
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for k0 in range(0, H, BLOCK_K):          # acc = dHa[t+1] R, R[k, n]
                offs_k = k0 + tl.arange(0, BLOCK_K)
                mk = offs_k < H
                a = tl.load(d_rows[:, None] + offs_k[None, :], mask=nxt[:, None] & mk[None, :], other=0.0)
                r = tl.load(r_ptr + offs_k[:, None] * s_r + offs_n[None, :], mask=mk[:, None] & mask_n[None, :],
                            other=0.0)
                acc = mma(a, r, acc, ALLOW_TF32)
            ty = g_ptr.dtype.element_ty
            back = g_ptr + (t + 1) * s_gt + rows[:, None] * s_gb + s_gg + cols      # block 1 of step t + 1
            mn = nxt[:, None] & mask_n[None, :]
            if CLOCK:
                acc += tl.load(back, mask=mn, other=0.0).to(tl.float32)
            tl.store(back, acc.to(ty), mask=mn)
            ml = live[:, None] & mask_n[None, :]
            here = g_ptr + t * s_gt + rows[:, None] * s_gb + cols
            pre = tl.load(here, mask=ml, other=0.0).to(tl.float32)
            d = tl.load(dy_ptr + t * s_dt + rows[:, None] * s_db + cols, mask=ml, other=0.0).to(tl.float32) + acc
            dha = activation_derivative(d, activate(pre, ACTIVATION, 0.0), ACTIVATION, 0.0)
            if CLOCK:
                tick = ticks(t, timing_ptr, offs_n, mask_n)[None, :]
                dha = tl.where(tick, dha, 0.0)
                tl.store(here + s_gg, tl.where(tick, 0.0, d).to(ty), mask=ml)
            tl.store(here, dha.to(ty), mask=ml)
        tl.debug_barrier()     # step t's dHa (and its kept part) written before step t - 1 reads them


# --------------------------------------------------------------------------- launchers

def rnn_blocks(b: int, h: int, block_m=None, block_n=None, block_k=None) -> tuple:
    """(BLOCK_M, BLOCK_N, BLOCK_K) of the recurrence: rows of the batch, columns of H, the recurrent
    product's step over H (tl.dot needs 16 at least). From B and H, never from T (the batch axis of the
    compiled targets)."""
    return (block_m or min(64, pow2_at_least(b)), block_n or min(64, pow2_at_least(h)),
            block_k or min(32, pow2_at_least(h)))


def rnn_workspace(t: int, b: int, h: int) -> int:
    """fp32 scratch of a recurrent layer's forward or its steps gradient: gx, T * B * H."""
    return t * b * h


def _sequence(x: torch.Tensor, what: str = "x") -> torch.Tensor:
    if x.dim() < 3:
        raise ValueError(f"a recurrent layer reads a time-major sequence [T, B, ...], got {what} {list(x.shape)}")
    check_float(x, what)
    t, b = x.shape[:2]
    try:
        return x.view(t, b, -1)
    except RuntimeError:
        raise ValueError(f"{what}'s features must be dense (strides {x.stride()})") from None


def _rows(x3: torch.Tensor, what: str) -> torch.Tensor:
    """[T, B, F] as [T * B, F] (a view: the steps must be evenly spaced)."""
    t, b, f = x3.shape
    try:
        return x3.view(t * b, f)
    except RuntimeError:
        raise ValueError(f"{what}'s steps must be evenly spaced rows (strides {x3.stride()})") from None


def _params(params: dict, h: int, xd: int) -> tuple:
    """(W, R, bias, timing or None) of a Recurrent's / Clockwork's parameters, checked."""
    for role in ("W", "R", "bias"):
        if role not in params:
            raise ValueError(f"a recurrent layer needs the parameter {role}")
    w, r, bias, timing = params["W"], params["R"], params["bias"], params.get("timing")
    for v, role, shape in ((w, "W", (h, xd)), (r, "R", (h, h)), (bias, "bias", (h,)), (timing, "timing", (h,))):
        if v is None:
            continue
        if tuple(v.shape) != shape:
            raise ValueError(f"{role} must be {list(shape)}, got {list(v.shape)}")
        check_float(v, role)
        if h > 1 and v.stride(-1) != 1:
            raise ValueError(f"{role} must have contiguous rows, got strides {v.stride()}")
    return w, r, bias, timing


def _state(h0, b: int, h: int):
    if h0 is not None:
        check_float(h0, "h0")
        if tuple(h0.shape) != (b, h) or (h > 1 and h0.stride(1) != 1):
            raise ValueError(f"h0 must be [{b}, {h}] with contiguous rows, got {list(h0.shape)} strides {h0.stride()}")
    return h0


def _workspace(workspace, need: int, device) -> torch.Tensor:
    if workspace is None:
        workspace = torch.empty(max(need, 1), dtype=torch.float32, device=device)
    if workspace.dtype != torch.float32 or workspace.numel() < need:
        raise ValueError(f"workspace must hold {need} float32 elements")
    return workspace


def _input_call(x3, w, bias, gx, allow_tf32, block_m, block_n, block_k, group_m, num_warps, num_stages):
    """gx [T * B, H] (fp32) = x W^T + bias: netc's gemm over all T * B rows."""
    from .gemm import gemm
    t, b, xd = x3.shape
    h = w.shape[0]
    return gemm(_rows(x3, "x"), w.t(), bias, out=gx[:t * b * h].view(t * b, h), allow_tf32=allow_tf32,
                block_m=block_m, block_n=block_n, block_k=block_k, group_m=group_m, num_warps=num_warps,
                num_stages=num_stages, split=1, launch=False)


def rnn_forward(x, h0, params: dict, activation="tanh", *, out=None, workspace=None, allow_tf32=False,
                block_m=None, block_n=None, block_k=None, group_m=None, num_warps=None, num_stages=None, launch=True):
    """netc.recurrent (netc.clockwork when params has 'timing'): y [T, B, H] from x [T, B, ...], the
    optional initial state h0 [B, H] and the parameters by role (W [H, X], R [H, H], bias [H], timing [H]).
    `workspace`: rnn_workspace(T, B, H) fp32 elements (allocated if absent). The tiles apply to the
    input GEMM and the recurrence alike (a group's pin, kernels/lowering.py). launch=False returns the
    two KernelCalls (the input GEMM, the recurrence)."""
    x3 = _sequence(x)
    t, b, xd = x3.shape
    h = params["bias"].shape[0] if "bias" in params else 0
    w, r, bias, timing = _params(params, h, xd)
    _state(h0, b, h)
    if out is None:
        out = torch.empty((t, b, h), dtype=x.dtype, device=x.device)
    if tuple(out.shape) != (t, b, h) or (h > 1 and out.stride(2) != 1):
        raise ValueError(f"out must be [{t}, {b}, {h}] with contiguous rows, got {list(out.shape)}")
    gx = _workspace(workspace, rnn_workspace(t, b, h), x.device)
    bm, bn, bk = rnn_blocks(b, h, block_m, block_n, block_k)
    z = dummy(x.device)
    first = _input_call(x3, w, bias, gx, allow_tf32, block_m, block_n, block_k, group_m, num_warps, num_stages)
    second = KernelCall(rnn_forward_kernel, (triton.cdiv(b, bm),), (
        gx, h0 if h0 is not None else z, r, timing if timing is not None else z, out, t, b, h,
        h0.stride(0) if h0 is not None else 0, r.stride(0), out.stride(0), out.stride(1), 0), dict(
        ACTIVATION=activation_code(activation), HAS_STATE=h0 is not None, CLOCK=timing is not None, KEEP=False,
        ALLOW_TF32=tf32_mode(allow_tf32), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk), dict(num_warps=num_warps or 4), out)
    return finish_calls([first, second], launch)


def rnn_backward_steps(x, h0, dy, params: dict, activation="tanh", *, out=None, workspace=None, allow_tf32=False,
                       block_m=None, block_n=None, block_k=None, group_m=None, num_warps=None, num_stages=None,
                       launch=True):
    """netc.recurrent_grad_steps (netc.clockwork_grad_steps when params has 'timing'): the steps
    gradient [T, B, 3, H] (netc.ops.rnn.BLOCKS) from x, h0 (or None) and dy [T, B, H]: the input GEMM,
    the forward recomputed into the result's blocks, the recurrence backwards. `workspace`:
    rnn_workspace(T, B, H) fp32 elements. launch=False returns the three KernelCalls."""
    x3 = _sequence(x)
    t, b, xd = x3.shape
    h = params["bias"].shape[0] if "bias" in params else 0
    w, r, bias, timing = _params(params, h, xd)
    _state(h0, b, h)
    check_float(dy, "dy")
    if tuple(dy.shape) != (t, b, h) or (h > 1 and dy.stride(2) != 1):
        raise ValueError(f"dy must be [{t}, {b}, {h}] with contiguous rows, got {list(dy.shape)}")
    if out is None:
        out = torch.empty((t, b, 3, h), dtype=dy.dtype, device=dy.device)
    if tuple(out.shape) != (t, b, 3, h) or (h > 1 and out.stride(3) != 1):
        raise ValueError(f"out must be [{t}, {b}, 3, {h}] with contiguous rows, got {list(out.shape)}")
    gx = _workspace(workspace, rnn_workspace(t, b, h), x.device)
    bm, bn, bk = rnn_blocks(b, h, block_m, block_n, block_k)
    z = dummy(x.device)
    tiles = dict(ALLOW_TF32=tf32_mode(allow_tf32), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    act, clock = activation_code(activation), timing is not None
    tm = timing if clock else z
    so = (out.stride(0), out.stride(1), out.stride(2))
    calls = [_input_call(x3, w, bias, gx, allow_tf32, block_m, block_n, block_k, group_m, num_warps, num_stages),
             KernelCall(rnn_forward_kernel, (triton.cdiv(b, bm),), (
                 gx, h0 if h0 is not None else z, r, tm, out, t, b, h, h0.stride(0) if h0 is not None else 0,
                 r.stride(0), *so), dict(ACTIVATION=act, HAS_STATE=h0 is not None, CLOCK=clock, KEEP=True, **tiles),
                 dict(num_warps=num_warps or 4), out),
             KernelCall(rnn_backward_kernel, (triton.cdiv(b, bm),), (
                 out, dy, r, tm, t, b, h, r.stride(0), *so, dy.stride(0), dy.stride(1)),
                 dict(ACTIVATION=act, CLOCK=clock, **tiles), dict(num_warps=num_warps or 4), out)]
    return finish_calls(calls, launch)


def steps_of(steps) -> tuple:
    """(T, B, H) of a recurrent layer's steps gradient [T, B, 3, H] (contiguous rows), or ValueError."""
    if steps.dim() != 4 or steps.shape[2] != 3 or (steps.shape[3] > 1 and steps.stride(3) != 1):
        raise ValueError(f"expected a recurrent steps gradient [T, B, 3, H] with contiguous rows, got "
                         f"{list(steps.shape)}")
    check_float(steps, "steps")
    return steps.shape[0], steps.shape[1], steps.shape[3]


def _block_rows(steps, block: int):
    """Block `block` of the steps gradient as [T * B, H] rows (a view)."""
    t, b, h = steps_of(steps)
    return _rows(steps[:, :, block], "the steps gradient")


def rnn_grad_x(steps, w, input_shape, *, out=None, allow_tf32=False, block_m=None, block_n=None, block_k=None,
               group_m=None, num_warps=None, num_stages=None, launch=True):
    """netc.rnn_grad_data for x: dx = dHa W over all T * B rows (one GEMM), in x's shape."""
    from .gemm import gemm
    t, b, h = steps_of(steps)
    shape = tuple(input_shape)
    if len(shape) < 3 or shape[:2] != (t, b):
        raise ValueError(f"{list(shape)} is not the x of a recurrent layer with steps gradient {list(steps.shape)}")
    if out is None:
        out = torch.empty(shape, dtype=steps.dtype, device=steps.device)
    if tuple(out.shape) != shape:
        raise ValueError(f"out must be {list(shape)}, got {list(out.shape)}")
    d3 = _sequence(out, "dx")
    if tuple(w.shape) != (h, d3.shape[2]):
        raise ValueError(f"W must be {[h, d3.shape[2]]}, got {list(w.shape)}")
    call = gemm(_block_rows(steps, PRE), w, out=_rows(d3, "dx"), allow_tf32=allow_tf32, block_m=block_m,
                block_n=block_n, block_k=block_k, group_m=group_m, num_warps=num_warps, num_stages=num_stages,
                split=1, launch=False)
    call.out = out          # dx in x's shape, not the GEMM's [T * B, X] view of it
    return finish(call, launch)


def rnn_grad_param(steps, role: str, x=None, *, out=None, allow_tf32=False, block_m=None, block_n=None, block_k=None,
                   group_m=None, num_warps=None, num_stages=None, launch=True):
    """netc.rnn_grad_param: dW = dHa^T x [H, X], dR = dHa^T h[t-1] [H, H] (netc's gemm on transposed
    views, K = T * B) or dbias = the column sums of dHa [H]."""
    t, b, h = steps_of(steps)
    if (x is not None) != (role == "W"):
        raise ValueError(f"the gradient of {role} reads {'x too' if role == 'W' else 'the steps gradient alone'}")
    if role == "bias":
        from .lstm import lstm_column_sums
        kw = {k: v for k, v in (("block_m", block_m), ("block_n", block_n), ("num_warps", num_warps)) if v}
        return lstm_column_sums(steps[:, :, PRE], out=out, launch=launch, **kw)
    if role not in ("W", "R"):
        raise ValueError(f"a recurrent layer's parameters with a gradient are W, R and bias, not {role!r}")
    from .gemm import gemm
    other = _rows(_sequence(x), "x") if role == "W" else _block_rows(steps, H_PREV)
    if other.shape[0] != t * b:
        raise ValueError(f"x {list(x.shape)} is not the input of a recurrent layer with steps gradient "
                         f"{list(steps.shape)}")
    return gemm(_block_rows(steps, PRE).t(), other, out=out, allow_tf32=allow_tf32, block_m=block_m, block_n=block_n,
                block_k=block_k, group_m=group_m, num_warps=num_warps, num_stages=num_stages, split=1, launch=launch)
