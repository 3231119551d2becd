"""Outputs of a compiled network (the interpreter target, or a .so) against the reference
executor's: one max relative error per output, and the tolerance of the network's precision."""
from __future__ import annotations

import sys

from ..diagnostics import Diagnostic, NetcError

# Max relative error (max |out - ref| over max |ref|, per output) of a whole network against the
# float64 reference, by the precision it was compiled in. Looser than one kernel's tolerance
# (netc.ops.reference.TOLERANCES): inputs, parameters and every layer's output are rounded to
# the dtype and the errors compound through the layers. About five ulps at 1.0 (relative spacing
# 2^-10 for f16, 2^-7 for bf16); TF32 ten of its 2^-10, as the tensor cores truncate operands.
# Measured on the interpreter tests' networks (3 seeds): f16 <= 1.1e-3, bf16 <= 1.4e-2,
# TF32 <= 3.0e-3, f32 <= 1e-6.
NETWORK_TOLERANCES = {"f32": 1e-4, "tf32": 1e-2, "f16": 5e-3, "bf16": 4e-2}

# The rule that knows f32. Some results f32 cannot hold to any fixed relative tolerance: a softmax
# driven into saturation makes a loss of ~1e-6 (and a bias gradient of that size) out of numbers
# near 1, where one f32 ulp is ~10% of it, in any f32 implementation. So every --compare computes
# the same thing a second time with the reference executor in f32 (same inputs, parameters, state,
# learning rate and seeds, rounded to f32 as the compiled network gets them) and measures that
# result's error against the f64 reference the same way. A compiled result passes when
#
#     error <= tolerance + F32_MULTIPLE * (error of the f32 reference)
#
# tolerance: the precision's NETWORK_TOLERANCES (the floor, f32 1e-4: what was the whole rule
# before, so nothing that passed it fails now); F32_MULTIPLE: the compiled kernels round in other
# places and orders than torch's f32 ops (tiled sums, split reductions, fused epilogues), so their
# error may be a few times the f32 reference's but not orders of magnitude more. Where f32 holds a
# result well (its own error ~1e-7) the rule is the old fixed tolerance, and a kernel a few percent
# off still fails. TorchInductor's accuracy check does the same against its fp64 reference (a
# compiled result's RMS error within a multiple of eager f32's plus an absolute floor); netc keeps
# its max-relative measure (relative_error, grad_errors, param_errors) for both sides. A NaN in the
# compiled result fails whatever the f32 reference did.
#
# A network compiled in f16 or bf16 stores every layer's output in that dtype and computes in f32,
# so its second reference does the same (own_precision_reference: values rounded to f16/bf16
# between ops, arithmetic in f32): a sum that cancels (an inner product to one output whose terms
# nearly cancel) is as far off in any f16 implementation, and the rule then knows f16 as it knows f32.
# A network compiled with TF32 products gets a second reference whose forward products truncate their
# operands to TF32 as tensor cores do (own_precision).
F32_MULTIPLE = 8.0


def own_precision_dtype(precision: dict):
    """The dtype the second reference stores values in for a network of `precision`: f16 or bf16
    for such networks (computing in f32, as the kernels do), f32 otherwise."""
    import torch
    return {"f16": torch.float16, "bf16": torch.bfloat16}.get(precision.get("dtype"), torch.float32)


def own_precision_name(precision: dict) -> str:
    """How messages name the second reference: 'f16', 'bf16', 'tf32' or 'f32'."""
    if precision.get("dtype") in ("f16", "bf16"):
        return precision["dtype"]
    return "tf32" if precision.get("tf32") else "f32"


def own_precision(precision: dict):
    """The context the second reference runs in: f32 arithmetic (ops.reference.computing_in), and for a
    network compiled with TF32 products its forward products' operands truncated to TF32
    (ops.reference.tf32_products). Its values' dtype is own_precision_dtype's."""
    import contextlib
    import torch
    from ..ops.reference import computing_in, tf32_products
    stack = contextlib.ExitStack()
    stack.enter_context(computing_in(torch.float32))
    if precision.get("tf32") and precision.get("dtype") in (None, "f32"):
        stack.enter_context(tf32_products())
    return stack


def allowance(tol: float, err32: float | None) -> float:
    """What a compiled result's error may be: tol + F32_MULTIPLE * the f32 reference's error (tol alone
    without one)."""
    return tol + F32_MULTIPLE * (err32 or 0.0)


def within(err: float, err32: float | None, tol: float) -> bool:
    """Whether a compiled result with error `err` passes, the f32 reference's being `err32` (module doc)."""
    return err == err and err != float("inf") and err <= allowance(tol, err32)


def rule_text(tol: float, low: str = "f32") -> str:
    """The rule in words, for --compare's output (low: own_precision_name)."""
    return f"{tol:.0e} + {F32_MULTIPLE:g} x the {low} reference's own error"


def network_tolerance(precision: dict) -> float:
    """NETWORK_TOLERANCES for a network's precision (passes.set_dtype.precision_of)."""
    d = precision["dtype"]
    if d in ("f32", "f64"):
        return NETWORK_TOLERANCES["tf32" if precision.get("tf32") else "f32"]
    return NETWORK_TOLERANCES[d]


def training_tolerance(precision: dict) -> float:
    """The tolerance of a compiled training step against the float64 reference (netc run --train
    --target interp --compare), for the loss, the gradients and the parameters and optimizer state
    after the update alike: the network tolerance of its precision (f32: 1e-4). Gradients are
    measured against the larger of their own largest entry and 1% of the network's largest
    (grad_errors)."""
    return network_tolerance(precision)


def relative_error(got, ref) -> float:
    """max |got - ref| / max |ref| (inf for NaN; 0 for empty tensors)."""
    if not ref.numel():
        return 0.0
    err = float((got.double().to(ref.device) - ref.double()).abs().max()) / max(float(ref.double().abs().max()), 1e-30)
    return float("inf") if err != err else err


def check_outputs(got: dict, ref: dict, precision: dict, prefix: str = "", subject: str = "",
                  ref32: dict | None = None) -> list:
    """Print each output's max relative error against `ref` (the f64 reference) on stderr, beside
    that of `ref32` (the reference executor's result of the same run in the network's own precision,
    own_precision_dtype, when given); return an
    error Diagnostic per output beyond what the rule allows (allowance: the precision's tolerance
    plus F32_MULTIPLE times the f32 reference's error). `subject` names what was compiled in
    messages (e.g. "of 'net.so'"); `prefix` goes before output names."""
    tol = network_tolerance(precision)
    what = precision["dtype"] + (" (TF32 products)" if precision.get("tf32") else
                                 " (3xTF32 products)" if precision.get("tf32x3") else "")
    low = own_precision_name(precision)
    failed = []
    for k, v in got.items():
        err = relative_error(v, ref[k])
        err32 = relative_error(ref32[k], ref[k]) if ref32 is not None and k in ref32 else None
        rule = f"tolerance {tol:.0e}"
        if err32 is not None:
            rule += (f"; the {low} reference's own error {err32:.3e}, so allowed {tol:.0e} + {F32_MULTIPLE:g} x "
                     f"{err32:.3e} = {allowance(tol, err32):.3e}")
        sys.stderr.write(f"{prefix}{k}: max relative error {err:.3e} against the f64 reference ({what}: {rule})\n")
        if not within(err, err32, tol):
            limit = f"{tol:.0e}" if err32 is None else f"{allowance(tol, err32):.3e} ({rule_text(tol, low)}, {err32:.3e})"
            failed.append(Diagnostic("error", f"output '{prefix}{k}' {subject or f'of the {what} network'} differs "
                                              f"from the f64 reference: max relative error {err:.3e} > {limit}"))
    return failed


def tensor_errors(got: dict, ref: dict, scales: dict) -> dict:
    """max |got - ref| / scale per tensor of `ref` (inf for NaN; empty tensors left out)."""
    out = {}
    for n, r in ref.items():
        if not r.numel():
            continue
        e = float((got[n].double().to(r.device) - r.double()).abs().max()) / scales[n]
        out[n] = float("inf") if e != e else e
    return out


def grad_scales(ref: dict) -> dict:
    """What each gradient's error is measured against (grad_errors)."""
    big = max((float(r.double().abs().max()) for r in ref.values() if r.numel()), default=0.0)
    return {p: max(float(r.double().abs().max()), 1e-2 * big, 1e-30) for p, r in ref.items() if r.numel()}


def param_scales(ref: dict, kinds: dict | None = None) -> dict:
    """What each parameter's or state tensor's error is measured against (param_errors)."""
    kinds = kinds or {}
    big: dict = {}
    for n, r in ref.items():
        k = kinds.get(n)
        if k is not None and r.numel():
            big[k] = max(big.get(k, 0.0), float(r.double().abs().max()))
    return {n: max(float(r.double().abs().max()), 1e-2 * big.get(kinds.get(n), 0.0), 1e-30)
            for n, r in ref.items() if r.numel()}


def judged(errs: dict, errs32: dict | None, tol: float) -> tuple:
    """(error, the f32 reference's error, name) of the tensor nearest to failing or furthest beyond:
    the largest error over its allowance (without errs32: the largest error); (0.0, None, None)
    when there is none."""
    worst, at = -1.0, None
    for n, e in errs.items():
        e32 = errs32.get(n) if errs32 is not None else None
        m = float("inf") if e != e or e == float("inf") else e / allowance(tol, e32)
        if m >= worst:
            worst, at = m, n
    if at is None:
        return 0.0, None, None
    return errs[at], (errs32.get(at) if errs32 is not None else None), at


def grad_errors(got: dict, ref: dict) -> tuple:
    """(worst relative error, its parameter) of gradients by parameter: max |g - r| over the larger of
    max |r| and 1% of the network's largest gradient entry (a gradient that is zero in exact
    arithmetic -- a bias before a batch norm -- is rounding noise on both sides)."""
    e, _, at = judged(tensor_errors(got, ref, grad_scales(ref)), None, 1.0)
    return e, at


def param_errors(got: dict, ref: dict, kinds: dict | None = None) -> tuple:
    """(worst relative error, its tensor) of parameters and state after an update: max |p - r| over
    max |r|; a state tensor (kinds: name -> its `state`, e.g. velocity) over at least 1% of the
    largest entry of its kind (the velocity of a bias before a batch norm is the rounding noise of a
    gradient that is zero in exact arithmetic)."""
    e, _, at = judged(tensor_errors(got, ref, param_scales(ref, kinds)), None, 1.0)
    return e, at


def state_kinds(module) -> dict:
    """Each optimizer-state parameter's kind (velocity, adam_m, ...) by name."""
    return {p.attrs["sym_name"]: p.attrs["state"] for p in module.params() if "state" in p.attrs}


def compare_training(trainer, ref, net, inputs, schedule, where, steps: int, output: str | None, step,
                     precision: dict | None = None):
    """`netc run --train --compare`: every step of a compiled training program (InterpTrainer on the
    interpreter target, or a training library's LibraryTrainer on the GPU) beside the float64
    reference executor's step `ref` from the same parameters and state, inputs, learning rate and
    dropout seed (runtime/interp.py compare_step): per step the max relative error of the loss, of
    the gradients (where the trainer returns them: not a library's) and of the parameters and state
    after the update; exit 1 beyond the precision's tolerance. Where the gradients or parameters are
    beyond it but the reference's gradient and update ops run on the compiled step's own forward
    values agree, the difference is rounding of the forward crossing a discontinuity (a max-pool
    argmax, a ReLU at 0) or Adam's eps amplifying a gradient's rounding: a warning, not a failure.
    `step` is runtime/interp.py's compare_step (passed in: interp imports this module); `output`: -o, named
    in the failure (not written); `precision`: the compiled step's (a library's manifest records it; default
    net's, precision_of)."""
    from ..ops.optim import learning_rate
    from ..passes.set_dtype import precision_of
    tol = training_tolerance(precision or precision_of(net))
    print(f"{'step':>4s}  {'loss':>12s}  {'loss err (f32)':>20s}  {'grad err (f32)':>20s}  {'param err (f32)':>20s}  "
          f"(max relative errors against the f64 reference; in parentheses the reference executor's own in f32 on "
          f"the same step; each may be {rule_text(tol)})")
    failed, notes = [], []

    def pair(e, e32):
        return f"{'-':>9s}  {'-':>9s}" if e is None else f"{e:9.2e} ({e32:8.2e})"

    for k in range(steps):
        row = step(trainer, ref, inputs, learning_rate(schedule, k), tol)
        flag = ""
        bad = row["beyond"]
        if bad:
            local_ok = "local_grad" in row and row["local_grad"] <= tol and row["local_param"] <= tol and "loss" not in bad
            flag = "  rounding (see below)" if local_ok else "  FAILED"
            loss = f"loss {row['loss_err']:.3e} (f32 reference {row['loss_err32']:.3e}), " if "loss" in bad else ""
            grad = (f"gradient of '{row['grad_at']}' {row['grad_err']:.3e} (f32 reference {row['grad_err32']:.3e}), "
                    if row["grad_err"] is not None else "")
            msg = (f"step {row['step']}: {', '.join(bad)} beyond {rule_text(tol)} ({loss}{grad}'{row['param_at']}' "
                   f"{row['param_err']:.3e} (f32 reference {row['param_err32']:.3e}) after the update)")
            if local_ok:
                notes.append(msg + f"; the reference's gradient ops on the compiled forward's own values and its "
                                   f"update ops on the compiled gradients agree ({row['local_grad']:.1e}, "
                                   f"{row['local_param']:.1e}): f32 rounding of the "
                                   f"forward crossed a discontinuity (a max-pool argmax or a ReLU at 0), or Adam's eps "
                                   f"amplified a gradient's rounding")
            else:
                failed.append(msg)
        print(f"{row['step']:4d}  {row['loss']:12.6f}  {pair(row['loss_err'], row['loss_err32']):>20s}  "
              f"{pair(row['grad_err'], row['grad_err32']):>20s}  {pair(row['param_err'], row['param_err32']):>20s}"
              f"{flag}", flush=True)
    for n in notes:
        sys.stderr.write(f"netc: warning: {n}\n")
    print(f"compared {steps} training step{'s' if steps != 1 else ''} of network '{net.attrs['sym_name']}' "
          f"({net.attrs.get('optimizer', {}).get('name', 'sgd')}) {where}: "
          + ("ok" if not failed else f"{len(failed)} beyond the tolerance"))
    if failed:
        raise NetcError("the compiled training step differs from the reference: " + "; ".join(failed)
                        + (f" ({output} not written)" if output else ""))
    return 0
