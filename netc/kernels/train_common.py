"""Pieces shared by the training kernels: the activation derivative (a prologue of the gradient
GEMMs, an op of the elementwise chain), deterministic two-stage per-channel reductions, and the
launch of several calls in a row.

Deterministic reductions. Every sum over a long axis (the batch and the pixels) is split into
SPLIT fixed row ranges: program s reduces rows [s * chunk, (s + 1) * chunk) in a fixed order into
an fp32 partial, and a second kernel (sum_partials_kernel) adds the SPLIT partials in index order.
No atomics, so the same inputs give the same bits on every run. chunk = cdiv(cdiv(M, SPLIT),
BLOCK) * BLOCK is computed inside the kernel from the runtime row count M, so the grid (SPLIT x
column blocks) does not depend on the batch; SPLIT is a constexpr (codegen pins it like a tile).
With SPLIT = 1 the first kernel writes the result directly and there is no second launch.

Launchers that need two kernels return, with launch=False, a list of KernelCalls to run in order
(a `workspace` tensor, fp32, carries the partials between them: codegen places it as scratch).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import ACTIVATIONS, KernelCall, check_float, dummy, row_stride

# SMs to fill when choosing a split (H100: 132); the reductions aim at about two programs per SM
TARGET_PROGRAMS = 264


@triton.jit
def activation_derivative(dy, y, ACTIVATION: tl.constexpr, slope):
    """dy * act'(z) from the activation's output y = act(z) (fp32 blocks), as
    netc.ops.reference.activation_grad: relu where(y > 0, dy, 0), leaky where(y > 0, dy, slope * dy),
    sigmoid dy * y * (1 - y), tanh dy * (1 - y^2). ACTIVATION uses the codes of common.ACTIVATIONS."""
    if ACTIVATION == 1:
        dy = tl.where(y > 0.0, dy, 0.0)
    elif ACTIVATION == 2:
        dy = dy * y * (1.0 - y)
    elif ACTIVATION == 3:
        dy = dy * (1.0 - y * y)
    elif ACTIVATION == 4:
        dy = tl.where(y > 0.0, dy, dy * slope)
    elif ACTIVATION == 5:      # SINGA's scaled tanh: B (A - y^2 / A)
        dy = dy * 0.66666667 * (1.7159047 - y * y / 1.7159047)
    return dy


def grad_activation_code(activation, negative_slope=0.0) -> int:
    """The derivative's code for an activation_grad's attributes: "relu" with a negative_slope is leaky."""
    if isinstance(activation, int):
        return activation
    a = activation or "none"
    if a not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; expected one of {sorted(ACTIVATIONS)}")
    if a == "relu" and negative_slope:
        return ACTIVATIONS["leaky_relu"]
    return ACTIVATIONS[a]


def check_prologue(activation, y, dy, negative_slope=0.0) -> int:
    """The prologue code of a gradient kernel that reads dy and computes dz = activation_grad(y, dy)."""
    code = grad_activation_code(activation, negative_slope)
    if code and y is None:
        raise ValueError(f"an activation-gradient prologue ({activation}) needs the activation's output y")
    if code and tuple(y.shape) != tuple(dy.shape):
        raise ValueError(f"y {list(y.shape)} must have the gradient's shape {list(dy.shape)}")
    if code:
        check_float(y, "y")
    return code


def default_split(rows: int, other_programs: int, block: int, target: int = TARGET_PROGRAMS,
                  max_split: int = 64) -> int:
    """How many row ranges to reduce `rows` rows in: enough programs to fill the GPU
    (other_programs per range), but each range at least 4 blocks long."""
    want = triton.cdiv(target, max(other_programs, 1))
    most = max(1, rows // (4 * block))
    return int(max(1, min(want, most, max_split)))


def finish_calls(calls, launch: bool):
    """Run `calls` in order and return the last one's output, or (launch=False) return the list."""
    if not launch:
        return calls
    out = None
    for c in calls:
        out = c.launch()
    return out


def workspace_for(workspace, numel: int, device) -> torch.Tensor:
    """The fp32 scratch of a two-stage reduction: the caller's (at least `numel` elements, contiguous) or new."""
    if workspace is None:
        return torch.empty(max(numel, 1), dtype=torch.float32, device=device)
    if workspace.dtype != torch.float32 or not workspace.is_contiguous() or workspace.numel() < numel:
        raise ValueError(f"workspace must be a contiguous float32 tensor of at least {numel} elements, got "
                         f"{workspace.dtype} {list(workspace.shape)}")
    return workspace


# --------------------------------------------------------------------------- column sums over [M, C]

@triton.jit
def column_sums_kernel(a_ptr, b_ptr, y_ptr, mean_ptr, var_ptr, out0_ptr, out1_ptr, ws_ptr,
                       M, C, stride_a, stride_b, stride_y, eps, slope,
                       MODE: tl.constexpr, ACTIVATION: tl.constexpr, HAS_OUT1: tl.constexpr,
                       SPLIT: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """Per-channel sums of rows [M, C] (rows evenly spaced, channels contiguous).
    MODE 0: out0 = sum_m a                      (a bias gradient; ACTIVATION: a = activation_grad(y, a))
    MODE 1: out0 = sum_m b * (a - mean) * rstd,  out1 = sum_m b   (batch norm: a = x, b = dy; dscale, dshift)
    SPLIT > 1: the partials go to ws [SPLIT, 1 + HAS_OUT1, C] instead (sum_partials_kernel finishes)."""
    pid_s = tl.program_id(0)
    pid_c = tl.program_id(1)
    offs_c = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_c = offs_c < C
    chunk = tl.cdiv(tl.cdiv(M, SPLIT), BLOCK_R) * BLOCK_R
    lo = pid_s * chunk
    hi = tl.minimum(lo + chunk, M)
    acc0 = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
    acc1 = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
    if MODE == 1:
        mean = tl.load(mean_ptr + offs_c, mask=mask_c, other=0.0).to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.load(var_ptr + offs_c, mask=mask_c, other=1.0).to(tl.float32) + eps)
    for r0 in range(lo, hi, BLOCK_R):
        rows = (r0 + tl.arange(0, BLOCK_R)).to(tl.int64)
        m = (rows < hi)[:, None] & mask_c[None, :]
        a = tl.load(a_ptr + rows[:, None] * stride_a + offs_c[None, :], mask=m, other=0.0).to(tl.float32)
        if MODE == 0:
            if ACTIVATION != 0:
                y = tl.load(y_ptr + rows[:, None] * stride_y + offs_c[None, :], mask=m, other=0.0).to(tl.float32)
                a = activation_derivative(a, y, ACTIVATION, slope)
            acc0 += a
        else:
            dy = tl.load(b_ptr + rows[:, None] * stride_b + offs_c[None, :], mask=m, other=0.0).to(tl.float32)
            acc0 += dy * ((a - mean[None, :]) * rstd[None, :])
            acc1 += dy
    s0 = tl.sum(acc0, axis=0)
    s1 = tl.sum(acc1, axis=0)
    if SPLIT == 1:
        tl.store(out0_ptr + offs_c, s0.to(out0_ptr.dtype.element_ty), mask=mask_c)
        if HAS_OUT1:
            tl.store(out1_ptr + offs_c, s1.to(out1_ptr.dtype.element_ty), mask=mask_c)
    elif HAS_OUT1:
        base = ws_ptr + pid_s.to(tl.int64) * 2 * C
        tl.store(base + offs_c, s0, mask=mask_c)
        tl.store(base + C + offs_c, s1, mask=mask_c)
    else:
        tl.store(ws_ptr + pid_s.to(tl.int64) * C + offs_c, s0, mask=mask_c)


@triton.jit
def sum_partials_kernel(ws_ptr, out_ptr, extra_ptr, S, R, C, stride_o,
                        HAS_EXTRA: tl.constexpr, BLOCK: tl.constexpr):
    """out[r, c] = sum_{s < S} ws[s, r, c] for r < R (out's rows `stride_o` apart, channels contiguous)
    and, HAS_EXTRA, extra[c] = sum_s ws[s, R, c] (ws is [S, R + HAS_EXTRA, C] fp32). Index order: deterministic."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    if HAS_EXTRA:
        total = (R + 1) * C
    else:
        total = R * C
    mask = offs < total
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    p = ws_ptr + offs
    for s in range(S):
        acc += tl.load(p, mask=mask, other=0.0)
        p += total
    r = offs // C
    c = offs % C
    tl.store(out_ptr + r * stride_o + c, acc.to(out_ptr.dtype.element_ty), mask=mask & (r < R))
    if HAS_EXTRA:
        tl.store(extra_ptr + c, acc.to(extra_ptr.dtype.element_ty), mask=mask & (r == R))


def sum_partials_call(ws, S: int, R: int, C: int, out, stride_o: int, extra=None, block=None, num_warps=4):
    rt = R + (extra is not None)
    block = block or min(1024, triton.next_power_of_2(max(rt * C, 1)))
    return KernelCall(sum_partials_kernel, (triton.cdiv(rt * C, block),),
                      (ws, out, extra if extra is not None else dummy(ws.device), S, R, C, stride_o),
                      dict(HAS_EXTRA=extra is not None, BLOCK=block), dict(num_warps=num_warps),
                      out if extra is None else (out, extra))


def as_rows(t: torch.Tensor, what: str):
    """(M, C, row stride) of t seen as [M, C] rows: C the last axis (contiguous), rows evenly spaced."""
    c = t.shape[-1] if t.dim() else 1
    m = t.numel() // c if c else 0
    return m, c, (row_stride(t, what) if t.dim() else 1)


def column_sums_tiles(m: int, c: int, split=None, block_r=None, block_c=None):
    """(split, block_r, block_c) of column_sums over [m, c]: the caller's, else defaults."""
    block_c = block_c or min(128, triton.next_power_of_2(max(c, 1)))
    block_r = block_r or max(1, min(triton.next_power_of_2(max(m, 1)), 4096 // block_c))
    if split is None:
        split = default_split(m, triton.cdiv(c, block_c), block_r)
    return int(split), block_r, block_c


def column_sums(a, *, b=None, mean=None, var=None, epsilon=1e-5, y=None, activation=0, negative_slope=0.0,
                out0, out1=None, workspace=None, split=None, block_r=None, block_c=None, num_warps=4):
    """The calls that write the per-channel sums of column_sums_kernel (MODE 1 when b is given) into
    out0 (and out1): one call, or two with a split (see the module doc)."""
    m, c, sa = as_rows(a, "a")
    mode = 1 if b is not None else 0
    if mode == 1:
        if tuple(b.shape) != tuple(a.shape):
            raise ValueError(f"dy {list(b.shape)} must have x's shape {list(a.shape)}")
        sb = as_rows(b, "dy")[2]
    else:
        sb = 0
    sy = as_rows(y, "y")[2] if activation else 0
    for v, what in ((out0, "out"), (out1, "out1"), (mean, "mean"), (var, "var")):
        if v is not None and v.numel() != c:
            raise ValueError(f"{what} must have one entry per channel ({c}), got {list(v.shape)}")
    split, block_r, block_c = column_sums_tiles(m, c, split, block_r, block_c)
    nout = 2 if out1 is not None else 1
    z = dummy(a.device)
    # the caller's workspace is passed whole even when unused (split 1), so it shows among the arguments
    ws = workspace_for(workspace, split * nout * c if split > 1 else 0, a.device) \
        if split > 1 or workspace is not None else z
    first = KernelCall(column_sums_kernel, (split, triton.cdiv(c, block_c)), (
        a, b if b is not None else z, y if activation else z, mean if mean is not None else z,
        var if var is not None else z, out0, out1 if out1 is not None else z, ws,
        m, c, sa, sb, sy, float(epsilon), float(negative_slope)), dict(
        MODE=mode, ACTIVATION=int(activation), HAS_OUT1=out1 is not None, SPLIT=int(split),
        BLOCK_R=block_r, BLOCK_C=block_c), dict(num_warps=num_warps), out0 if out1 is None else (out0, out1))
    if split == 1:
        return [first]
    return [first, sum_partials_call(ws, split, 1, c, out0, c, out1)]
