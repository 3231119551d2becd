"""Optimizer updates as one multi-tensor kernel per optimizer: a single grid over every parameter,
driven by a table of chunks, and the global gradient norm for clipping.

The table (int64 [chunks, 8], one row per chunk of at most CHUNK elements of one parameter):

    0 param offset   1 grad offset   2 state0 offset   3 state1 offset      (elements from each base)
    4 elements       5 step offset (Adam's adam_step)  6 lr_scale   7 wd_scale   (6, 7: float64 bits)

Each role (param, grad, state0, state1, step) is one base pointer plus these offsets: the tensors
of a role live in one arena (the plan's constant arena for parameters and state, the batch arena
for gradients), so one launch updates them all. A program takes one chunk; per-parameter values
(lr_scale, wd_scale: the netc.param's) ride in its row, the rest are the update op's attributes,
shared by the launch. Chunks of one parameter never overlap, so the update needs no atomics.

What every update does (netc/ops/optim.py, in this order): SINGA's value clipping (clip_low <
clip_high), clipping by the global norm (clip_norm > 0: g *= min(1, clip_norm / (norm + 1e-6)),
norm a device scalar from global_norm()), weight decay g += weight_decay * wd_scale * w, then
the rule of the optimizer and convention:

    sgd      torch: w -= lr g; momentum: buf = mu buf + g, w -= lr buf (nesterov: lr (g + mu buf))
             singa: v = mu v - lr g, w += v; nesterov: h = mu v + lr g, w -= (1 + mu) h - mu v, v = h
    adam     torch: m += (1 - b1)(g - m), v = b2 v + (1 - b2) g^2,
                    w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps), t = step + 1
             singa: no bias correction, w -= lr m / sqrt(v + eps)
    rmsprop  a = alpha a + (1 - alpha) g^2; w -= lr g / (sqrt(a) + eps)   (singa: sqrt(a + eps))
    adagrad  s += g^2; w -= lr g / (sqrt(s) + eps)                         (singa: sqrt(s + eps))
    adadelta a = rho a + (1 - rho) g^2; d = g sqrt(u + eps) / sqrt(a + eps); u = rho u + (1 - rho) d^2;
             w -= lr d                                                     (both conventions)
    adamax   torch: m += (1 - b1)(g - m), u = max(b2 u, |g| + eps), w -= lr / (1 - b1^t) * m / u
             singa: m = b1 m + (1 - b1) g, u = max(b2 u, |g|) + eps, w -= lr m / u

lr = the `lr` device scalar (the program's learning-rate input) * lr_scale. All arithmetic is f32
(1 - b^t as -expm1(t ln b), accurate where b^t is close to 1); each tensor keeps its dtype. Adam's
step counter is read by the update (t = step + 1) and incremented afterwards by a second, tiny
kernel, so no chunk ever sees another's write.

Roles with different dtypes cannot share a base pointer: the list launchers group parameters by
their dtypes (an f32 network: one group; a 16-bit one also has f32 batch-norm vectors) and launch
the update once per group.
"""
from __future__ import annotations

import math
import struct

import torch
import triton
import triton.language as tl

from .common import KernelCall, check_float, dummy
from .train_common import finish_calls

SGD, ADAM, RMSPROP, ADAGRAD, ADADELTA, ADAMAX = 0, 1, 2, 3, 4, 5
KINDS = {"sgd": SGD, "adam": ADAM, "rmsprop": RMSPROP, "adagrad": ADAGRAD, "adadelta": ADADELTA, "adamax": ADAMAX}
# each optimizer's state roles in the order the kernel reads them (state0, state1), and its step counter
STATE_ORDER = {"sgd": ["velocity"], "adam": ["adam_m", "adam_v"], "rmsprop": ["square_avg"], "adagrad": ["sum_sq"],
               "adadelta": ["square_avg", "acc_delta"], "adamax": ["adamax_m", "adamax_u"]}
STEP_ROLE = {"adam": "adam_step", "adamax": "adamax_step"}
CONVENTIONS = ("torch", "singa")
NORM_EPS = 1e-6
TABLE_COLUMNS = 8
DEFAULT_CHUNK = 65536


@triton.jit
def one_minus_pow(ln_b, t):
    """1 - b^t = -expm1(t ln b) in fp32, a series where t ln b is small (no cancellation)."""
    x = t * ln_b
    series = -x * (1.0 + x * (0.5 + x * (1.0 / 6.0 + x * (1.0 / 24.0 + x * (1.0 / 120.0 + x * (1.0 / 720.0))))))
    return tl.where(tl.abs(x) < 0.1, series, 1.0 - tl.exp(x))


@triton.jit
def multi_tensor_update_kernel(table_ptr, p_ptr, g_ptr, s0_ptr, s1_ptr, step_ptr, lr_ptr, norm_ptr,
                               weight_decay, clip_norm, clip_low, clip_high, h0, h1, eps, ln_b1, ln_b2,
                               KIND: tl.constexpr, SINGA: tl.constexpr, NESTEROV: tl.constexpr,
                               HAS_STATE: tl.constexpr, CLIP_NORM: tl.constexpr, CLIP_VALUE: tl.constexpr,
                               HAS_WD: tl.constexpr, BLOCK: tl.constexpr):
    """h0, h1: momentum (sgd), beta1 and beta2 (adam, adamax), alpha (rmsprop), rho (adadelta); ln_b1, ln_b2:
    ln beta1, ln beta2."""
    row = table_ptr + tl.program_id(0).to(tl.int64) * 8
    p_off = tl.load(row)
    g_off = tl.load(row + 1)
    s0_off = tl.load(row + 2)
    s1_off = tl.load(row + 3)
    n = tl.load(row + 4).to(tl.int32)
    lr = tl.load(lr_ptr).to(tl.float32) * tl.load(row + 6).to(tl.float64, bitcast=True).to(tl.float32)
    wd = weight_decay * tl.load(row + 7).to(tl.float64, bitcast=True).to(tl.float32)
    if CLIP_NORM:
        factor = tl.minimum(clip_norm / (tl.load(norm_ptr).to(tl.float32) + 1e-6), 1.0)
    if KIND == 1 or KIND == 5:
        if not SINGA:
            t = tl.load(step_ptr + tl.load(row + 5)).to(tl.float32) + 1.0
            step_size = lr / one_minus_pow(ln_b1, t)
            if KIND == 1:
                bc2_sqrt = tl.sqrt(one_minus_pow(ln_b2, t))
    offs = tl.arange(0, BLOCK)
    for i0 in range(0, n, BLOCK):
        i = i0 + offs
        m = i < n
        g = tl.load(g_ptr + g_off + i, mask=m, other=0.0).to(tl.float32)
        w = tl.load(p_ptr + p_off + i, mask=m, other=0.0).to(tl.float32)
        if CLIP_VALUE:
            g = tl.minimum(tl.maximum(g, clip_low), clip_high)
        if CLIP_NORM:
            g = g * factor
        if HAS_WD:
            g = g + wd * w
        if KIND == 0:
            if HAS_STATE:
                v = tl.load(s0_ptr + s0_off + i, mask=m, other=0.0).to(tl.float32)
                if SINGA:
                    if NESTEROV:
                        h = h0 * v + lr * g
                        w = w - ((1.0 + h0) * h - h0 * v)
                        v = h
                    else:
                        v = h0 * v - lr * g
                        w = w + v
                else:
                    v = h0 * v + g
                    if NESTEROV:
                        w = w - lr * (g + h0 * v)
                    else:
                        w = w - lr * v
                tl.store(s0_ptr + s0_off + i, v.to(s0_ptr.dtype.element_ty), mask=m)
            else:
                w = w - lr * g
        elif KIND == 1:
            mo = tl.load(s0_ptr + s0_off + i, mask=m, other=0.0).to(tl.float32)
            ve = tl.load(s1_ptr + s1_off + i, mask=m, other=0.0).to(tl.float32)
            ve = h1 * ve + (1.0 - h1) * (g * g)
            if SINGA:
                mo = h0 * mo + (1.0 - h0) * g
                w = w - lr * mo / tl.sqrt(ve + eps)
            else:
                mo = mo + (1.0 - h0) * (g - mo)
                w = w - step_size * (mo / (tl.sqrt(ve) / bc2_sqrt + eps))
            tl.store(s0_ptr + s0_off + i, mo.to(s0_ptr.dtype.element_ty), mask=m)
            tl.store(s1_ptr + s1_off + i, ve.to(s1_ptr.dtype.element_ty), mask=m)
        elif KIND == 4:
            a = tl.load(s0_ptr + s0_off + i, mask=m, other=0.0).to(tl.float32)
            u = tl.load(s1_ptr + s1_off + i, mask=m, other=0.0).to(tl.float32)
            a = h0 * a + (1.0 - h0) * (g * g)
            d = tl.sqrt(u + eps) / tl.sqrt(a + eps) * g
            u = h0 * u + (1.0 - h0) * (d * d)
            w = w - lr * d
            tl.store(s0_ptr + s0_off + i, a.to(s0_ptr.dtype.element_ty), mask=m)
            tl.store(s1_ptr + s1_off + i, u.to(s1_ptr.dtype.element_ty), mask=m)
        elif KIND == 5:
            mo = tl.load(s0_ptr + s0_off + i, mask=m, other=0.0).to(tl.float32)
            u = tl.load(s1_ptr + s1_off + i, mask=m, other=0.0).to(tl.float32)
            if SINGA:
                mo = h0 * mo + (1.0 - h0) * g
                u = tl.maximum(h1 * u, tl.abs(g)) + eps
                w = w - lr * mo / u
            else:
                mo = mo + (1.0 - h0) * (g - mo)
                u = tl.maximum(h1 * u, tl.abs(g) + eps)
                w = w - step_size * (mo / u)
            tl.store(s0_ptr + s0_off + i, mo.to(s0_ptr.dtype.element_ty), mask=m)
            tl.store(s1_ptr + s1_off + i, u.to(s1_ptr.dtype.element_ty), mask=m)
        else:
            a = tl.load(s0_ptr + s0_off + i, mask=m, other=0.0).to(tl.float32)
            if KIND == 2:
                a = h0 * a + (1.0 - h0) * (g * g)
            else:
                a = a + g * g
            if SINGA:
                denom = tl.sqrt(a + eps)
            else:
                denom = tl.sqrt(a) + eps
            w = w - lr * (g / denom)
            tl.store(s0_ptr + s0_off + i, a.to(s0_ptr.dtype.element_ty), mask=m)
        tl.store(p_ptr + p_off + i, w.to(p_ptr.dtype.element_ty), mask=m)


@triton.jit
def increment_steps_kernel(step_ptr, offsets_ptr, N, BLOCK: tl.constexpr):
    """step[offsets[i]] += 1 for i < N (Adam's step counters, after the update read them)."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    off = tl.load(offsets_ptr + i, mask=m, other=0)
    s = tl.load(step_ptr + off, mask=m, other=0.0).to(tl.float32)
    tl.store(step_ptr + off, (s + 1.0).to(step_ptr.dtype.element_ty), mask=m)


@triton.jit
def sum_squares_kernel(table_ptr, g_ptr, ws_ptr, first, BLOCK: tl.constexpr):
    """ws[first + chunk] = sum of g^2 over the chunk (table columns 1 and 4)."""
    pid = tl.program_id(0)
    row = table_ptr + pid.to(tl.int64) * 8
    g_off = tl.load(row + 1)
    n = tl.load(row + 4).to(tl.int32)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i0 in range(0, n, BLOCK):
        i = i0 + offs
        g = tl.load(g_ptr + g_off + i, mask=i < n, other=0.0).to(tl.float32)
        acc += g * g
    tl.store(ws_ptr + first + pid, tl.sum(acc, axis=0))


@triton.jit
def norm_finish_kernel(ws_ptr, out_ptr, N, BLOCK: tl.constexpr):
    """out = sqrt(sum of the N partials), in index order (one program: deterministic)."""
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i0 in range(0, N, BLOCK):
        acc += tl.load(ws_ptr + i0 + offs, mask=i0 + offs < N, other=0.0)
    tl.store(out_ptr, tl.sqrt(tl.sum(acc, axis=0)).to(out_ptr.dtype.element_ty))


# --------------------------------------------------------------------------- tables

def _f64_bits(v: float) -> int:
    return struct.unpack("<q", struct.pack("<d", float(v)))[0]


def chunk_table(entries, chunk: int = DEFAULT_CHUNK, device="cpu") -> torch.Tensor:
    """The int64 table of multi_tensor_update_kernel from one entry per parameter:
    (param_off, grad_off, state0_off, state1_off, numel, step_off, lr_scale, wd_scale), offsets in
    elements from each role's base (0 for an absent role). Each parameter is cut into chunks of at
    most `chunk` elements. codegen builds it from the plan's offsets and embeds it as constant data."""
    rows = []
    for p, g, s0, s1, n, st, lrs, wds in entries:
        for start in range(0, max(int(n), 1), chunk):
            k = min(chunk, int(n) - start)
            if k <= 0:
                break
            s0_ = s0 + start if s0 is not None else 0
            s1_ = s1 + start if s1 is not None else 0
            rows.append([p + start, g + start, s0_, s1_, k, st if st is not None else 0,
                         _f64_bits(lrs), _f64_bits(wds)])
    return torch.tensor(rows or [[0] * TABLE_COLUMNS], dtype=torch.int64, device=device).reshape(-1, TABLE_COLUMNS)


def _scalar(v, device, what):
    if torch.is_tensor(v):
        if v.numel() != 1:
            raise ValueError(f"{what} must hold one element, got {list(v.shape)}")
        return v
    return torch.tensor(float(v), dtype=torch.float32, device=device)


def multi_tensor_update(optimizer: str, table: torch.Tensor, param: torch.Tensor, grad: torch.Tensor, lr, *,
                        state0=None, state1=None, step=None, step_offsets=None, norm=None, momentum=0.0,
                        nesterov=False, beta1=0.9, beta2=0.999, alpha=0.99, rho=0.9, eps=1e-8, weight_decay=0.0,
                        clip_norm=0.0, clip_low=0.0, clip_high=0.0, convention="torch", block=None, num_warps=4,
                        launch=True):
    """The calls of one multi-tensor update over the chunks of `table` (chunk_table): param, grad,
    state0 (velocity | adam_m | square_avg | sum_sq | adamax_m), state1 (adam_v | acc_delta | adamax_u),
    step (adam_step | adamax_step) are the role bases; lr and norm device scalars (or numbers). Adam and
    Adamax also take step_offsets (int64 [params]: each parameter's step counter offset, incremented
    after the update). Returns the list of KernelCalls
    (launch=False) or runs them."""
    kind = KINDS[optimizer]
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown convention {convention!r}; expected one of {CONVENTIONS}")
    singa = convention == "singa"
    has_state = state0 is not None
    if kind != SGD and not has_state:
        raise ValueError(f"{optimizer} needs its state")
    if kind in (ADAM, ADAMAX) and (state1 is None or (not singa and step is None)):
        raise ValueError(f"{optimizer} needs its second moment (state1) and, in torch's convention, its step")
    if kind == ADADELTA and state1 is None:
        raise ValueError("adadelta needs acc_delta (state1)")
    if clip_norm > 0 and norm is None:
        raise ValueError("clip_norm needs the global norm (global_norm())")
    dev = param.device
    z = dummy(dev)
    h0 = {SGD: momentum, ADAM: beta1, RMSPROP: alpha, ADAGRAD: 0.0, ADADELTA: rho, ADAMAX: beta1}[kind]
    n_chunks = table.shape[0]
    block = block or 1024
    call = KernelCall(multi_tensor_update_kernel, (n_chunks,), (
        table, param, grad, state0 if has_state else z, state1 if state1 is not None else z,
        step if step is not None else z, _scalar(lr, dev, "lr"), _scalar(norm, dev, "norm") if norm is not None else z,
        float(weight_decay), float(clip_norm), float(clip_low), float(clip_high), float(h0), float(beta2), float(eps),
        math.log(beta1) if kind in (ADAM, ADAMAX) and 0 < beta1 else 0.0,
        math.log(beta2) if kind == ADAM and 0 < beta2 else 0.0),
        dict(KIND=kind, SINGA=singa, NESTEROV=bool(nesterov), HAS_STATE=has_state, CLIP_NORM=clip_norm > 0,
             CLIP_VALUE=clip_low < clip_high, HAS_WD=weight_decay != 0, BLOCK=block), dict(num_warps=num_warps), param)
    calls = [call]
    if kind in (ADAM, ADAMAX) and step is not None and step_offsets is not None and step_offsets.numel():
        nb = min(1024, triton.next_power_of_2(step_offsets.numel()))
        calls.append(KernelCall(increment_steps_kernel, (triton.cdiv(step_offsets.numel(), nb),),
                                (step, step_offsets, step_offsets.numel()), dict(BLOCK=nb), dict(num_warps=4), step))
    return finish_calls(calls, launch)


# --------------------------------------------------------------------------- launchers over tensor lists

def _offsets(ts, what):
    """(base tensor, element offsets) of same-dtype tensors on one device: the lowest address is the base."""
    for t in ts:
        if not t.is_contiguous():
            raise ValueError(f"every {what} tensor must be dense (contiguous), got strides {t.stride()}")
    base = min(ts, key=lambda t: t.data_ptr())
    size = base.element_size()
    offs = []
    for t in ts:
        d = t.data_ptr() - base.data_ptr()
        if d % size:
            raise ValueError(f"{what} tensors are not aligned to their element size")
        offs.append(d // size)
    return base, offs


def _listify(v, n, what):
    if isinstance(v, (list, tuple)):
        if len(v) != n:
            raise ValueError(f"{what} has {len(v)} entries for {n} parameters")
        return [float(x) for x in v]
    return [float(v)] * n


def _update(optimizer, params, grads, lr, states: dict, *, lr_scale=1.0, wd_scale=1.0, chunk=None, block=None,
            num_warps=4, launch=True, **attrs):
    params, grads = list(params), list(grads)
    n = len(params)
    if len(grads) != n:
        raise ValueError(f"{n} parameters but {len(grads)} gradients")
    roles = [r for r in states if states[r] is not None]
    for r in roles:
        states[r] = list(states[r])
        if len(states[r]) != n:
            raise ValueError(f"{n} parameters but {len(states[r])} {r} tensors")
    for i, (p, g) in enumerate(zip(params, grads)):
        check_float(p, "param")
        check_float(g, "grad")
        if g.numel() != p.numel():
            raise ValueError(f"gradient {i} {list(g.shape)} does not match parameter {list(p.shape)}")
        for r in roles:
            want = 1 if r.endswith("_step") else p.numel()
            if states[r][i].numel() != want:
                raise ValueError(f"{r} {i} {list(states[r][i].shape)} does not match parameter {list(p.shape)}")
    lrs, wds = _listify(lr_scale, n, "lr_scale"), _listify(wd_scale, n, "wd_scale")
    groups = {}
    for i in range(n):
        key = (params[i].dtype, grads[i].dtype) + tuple(states[r][i].dtype for r in roles)
        groups.setdefault(key, []).append(i)
    order, step_role = STATE_ORDER[optimizer], STEP_ROLE.get(optimizer, "")
    calls = []
    for idx in groups.values():
        pb, po = _offsets([params[i] for i in idx], "param")
        gb, go = _offsets([grads[i] for i in idx], "grad")
        bases, offs = {}, {}
        for r in roles:
            bases[r], offs[r] = _offsets([states[r][i] for i in idx], r)
        s0r = order[0] if order[0] in roles else None
        s1r = order[1] if len(order) > 1 and order[1] in roles else None
        entries = [(po[j], go[j], offs[s0r][j] if s0r else None, offs[s1r][j] if s1r else None,
                    params[i].numel(), offs[step_role][j] if step_role in roles else None, lrs[i], wds[i])
                   for j, i in enumerate(idx)]
        table = chunk_table(entries, chunk or DEFAULT_CHUNK, pb.device)
        step_offs = (torch.tensor(offs[step_role], dtype=torch.int64, device=pb.device)
                     if step_role in roles else None)
        calls += multi_tensor_update(optimizer, table, pb, gb, lr, state0=bases.get(s0r), state1=bases.get(s1r),
                                     step=bases.get(step_role), step_offsets=step_offs, block=block,
                                     num_warps=num_warps, launch=False, **attrs)
    finish_calls(calls, launch)
    return params if launch else calls


def sgd_update(params, grads, lr, *, velocity=None, norm=None, momentum=0.0, nesterov=False, weight_decay=0.0,
               lr_scale=1.0, wd_scale=1.0, clip_norm=0.0, clip_low=0.0, clip_high=0.0, convention="torch",
               chunk=None, block=None, num_warps=4, launch=True):
    """netc.sgd_update over every parameter at once: params, grads (and `velocity` when momentum != 0, or
    SINGA's Nesterov) are lists of dense tensors, each role's in one arena (any addresses on one device
    work: offsets are taken from the lowest). lr (and norm, with clip_norm) device scalars or numbers;
    lr_scale/wd_scale a number or one per parameter. The other keywords are the op's attributes.
    Updates in place; returns params (launch=False: the list of KernelCalls)."""
    if (momentum != 0 or (nesterov and convention == "singa")) and velocity is None:
        raise ValueError("momentum needs the velocity state")
    return _update("sgd", params, grads, lr, {"velocity": velocity if momentum != 0 or (nesterov and convention ==
                                                                                        "singa") else None},
                   norm=norm, momentum=momentum, nesterov=nesterov, weight_decay=weight_decay, lr_scale=lr_scale,
                   wd_scale=wd_scale, clip_norm=clip_norm, clip_low=clip_low, clip_high=clip_high,
                   convention=convention, chunk=chunk, block=block, num_warps=num_warps, launch=launch)


def adam_update(params, grads, lr, *, adam_m, adam_v, adam_step, norm=None, beta1=0.9, beta2=0.999, eps=1e-8,
                weight_decay=0.0, lr_scale=1.0, wd_scale=1.0, clip_norm=0.0, clip_low=0.0, clip_high=0.0,
                convention="torch", chunk=None, block=None, num_warps=4, launch=True):
    """netc.adam_update over every parameter (as sgd_update); adam_step: one 1-element counter per parameter,
    read by the update and incremented after it."""
    return _update("adam", params, grads, lr, {"adam_m": adam_m, "adam_v": adam_v, "adam_step": adam_step},
                   norm=norm, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay, lr_scale=lr_scale,
                   wd_scale=wd_scale, clip_norm=clip_norm, clip_low=clip_low, clip_high=clip_high,
                   convention=convention, chunk=chunk, block=block, num_warps=num_warps, launch=launch)


def rmsprop_update(params, grads, lr, *, square_avg, norm=None, alpha=0.99, eps=1e-8, weight_decay=0.0,
                   lr_scale=1.0, wd_scale=1.0, clip_norm=0.0, clip_low=0.0, clip_high=0.0, convention="torch",
                   chunk=None, block=None, num_warps=4, launch=True):
    """netc.rmsprop_update over every parameter (as sgd_update)."""
    return _update("rmsprop", params, grads, lr, {"square_avg": square_avg}, norm=norm, alpha=alpha, eps=eps,
                   weight_decay=weight_decay, lr_scale=lr_scale, wd_scale=wd_scale, clip_norm=clip_norm,
                   clip_low=clip_low, clip_high=clip_high, convention=convention, chunk=chunk, block=block,
                   num_warps=num_warps, launch=launch)


def adagrad_update(params, grads, lr, *, sum_sq, norm=None, eps=1e-10, weight_decay=0.0, lr_scale=1.0,
                   wd_scale=1.0, clip_norm=0.0, clip_low=0.0, clip_high=0.0, convention="torch", chunk=None,
                   block=None, num_warps=4, launch=True):
    """netc.adagrad_update over every parameter (as sgd_update)."""
    return _update("adagrad", params, grads, lr, {"sum_sq": sum_sq}, norm=norm, eps=eps, weight_decay=weight_decay,
                   lr_scale=lr_scale, wd_scale=wd_scale, clip_norm=clip_norm, clip_low=clip_low,
                   clip_high=clip_high, convention=convention, chunk=chunk, block=block, num_warps=num_warps,
                   launch=launch)


def adadelta_update(params, grads, lr, *, square_avg, acc_delta, norm=None, rho=0.9, eps=1e-6, weight_decay=0.0,
                    lr_scale=1.0, wd_scale=1.0, clip_norm=0.0, clip_low=0.0, clip_high=0.0, convention="torch",
                    chunk=None, block=None, num_warps=4, launch=True):
    """netc.adadelta_update over every parameter (as sgd_update; both conventions are one formula)."""
    return _update("adadelta", params, grads, lr, {"square_avg": square_avg, "acc_delta": acc_delta}, norm=norm,
                   rho=rho, eps=eps, weight_decay=weight_decay, lr_scale=lr_scale, wd_scale=wd_scale,
                   clip_norm=clip_norm, clip_low=clip_low, clip_high=clip_high, convention=convention, chunk=chunk,
                   block=block, num_warps=num_warps, launch=launch)


def adamax_update(params, grads, lr, *, adamax_m, adamax_u, adamax_step, norm=None, beta1=0.9, beta2=0.999,
                  eps=1e-8, weight_decay=0.0, lr_scale=1.0, wd_scale=1.0, clip_norm=0.0, clip_low=0.0,
                  clip_high=0.0, convention="torch", chunk=None, block=None, num_warps=4, launch=True):
    """netc.adamax_update over every parameter (as adam_update: adamax_step a 1-element counter per parameter)."""
    return _update("adamax", params, grads, lr, {"adamax_m": adamax_m, "adamax_u": adamax_u,
                                                 "adamax_step": adamax_step},
                   norm=norm, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay, lr_scale=lr_scale,
                   wd_scale=wd_scale, clip_norm=clip_norm, clip_low=clip_low, clip_high=clip_high,
                   convention=convention, chunk=chunk, block=block, num_warps=num_warps, launch=launch)


def global_norm(grads, *, out=None, workspace=None, chunk=None, block=None, num_warps=4, launch=True):
    """netc.global_norm: sqrt(sum over every gradient of sum(g^2)) -> a 0-d f32 tensor (or `out`, 1 element).
    Stage 1, one launch per dtype group: each chunk's sum of squares into an fp32 workspace (one
    element per chunk); stage 2, one program: their sum in index order, and the square root.
    Deterministic. Returns out (launch=False: the list of KernelCalls)."""
    grads = list(grads)
    if not grads:
        raise ValueError("global_norm needs at least one gradient")
    for g in grads:
        check_float(g, "grad")
    dev = grads[0].device
    if out is None:
        out = torch.empty((), dtype=torch.float32, device=dev)
    elif out.numel() != 1:
        raise ValueError(f"out must hold one element, got {list(out.shape)}")
    chunk = chunk or DEFAULT_CHUNK
    groups = {}
    for i, g in enumerate(grads):
        groups.setdefault(g.dtype, []).append(i)
    tables = []
    for idx in groups.values():
        gb, go = _offsets([grads[i] for i in idx], "grad")
        tables.append((gb, chunk_table([(0, o, None, None, grads[i].numel(), None, 1.0, 1.0)
                                        for o, i in zip(go, idx)], chunk, dev)))
    total = sum(t.shape[0] for _, t in tables)
    if workspace is None:
        workspace = torch.empty(total, dtype=torch.float32, device=dev)
    elif workspace.dtype != torch.float32 or workspace.numel() < total:
        raise ValueError(f"workspace must be float32 with at least {total} elements")
    block = block or 1024
    calls, first = [], 0
    for gb, table in tables:
        calls.append(KernelCall(sum_squares_kernel, (table.shape[0],), (table, gb, workspace, first),
                                dict(BLOCK=block), dict(num_warps=num_warps), workspace))
        first += table.shape[0]
    fb = min(1024, triton.next_power_of_2(max(total, 1)))
    calls.append(KernelCall(norm_finish_kernel, (1,), (workspace, out, total), dict(BLOCK=fb),
                            dict(num_warps=num_warps), out))
    return finish_calls(calls, launch)
