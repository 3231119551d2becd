"""Outputs of a compiled network (the interpreter target, or a .so) against the reference
executor's: one max relative error per output, and the tolerance of the network's precision."""
from __future__ import annotations

import sys

from ..diagnostics import Diagnostic

# Max relative error (max |out - ref| over max |ref|, per output) of a whole network against the
# float64 reference, by the precision it was compiled in. Looser than one kernel's tolerance
# (netc.ops.reference.TOLERANCES): inputs, parameters and every layer's output are rounded to
# the dtype and the errors compound through the layers. About five ulps at 1.0 (relative spacing
# 2^-10 for f16, 2^-7 for bf16); TF32 ten of its 2^-10, as the tensor cores truncate operands.
# Measured on the interpreter tests' networks (3 seeds): f16 <= 1.1e-3, bf16 <= 1.4e-2,
# TF32 <= 3.0e-3, f32 <= 1e-6.
NETWORK_TOLERANCES = {"f32": 1e-4, "tf32": 1e-2, "f16": 5e-3, "bf16": 4e-2}


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


def check_outputs(got: dict, ref: dict, precision: dict, prefix: str = "", subject: str = "") -> list:
    """Print each output's max relative error against `ref` (the f64 reference) on stderr; return
    an error Diagnostic per output beyond the precision's tolerance. `subject` names what was
    compiled in messages (e.g. "of 'net.so'"); `prefix` goes before output names."""
    tol = network_tolerance(precision)
    what = precision["dtype"] + (" (TF32 products)" if precision.get("tf32") else "")
    failed = []
    for k, v in got.items():
        err = relative_error(v, ref[k])
        sys.stderr.write(f"{prefix}{k}: max relative error {err:.3e} against the f64 reference ({what}: "
                         f"tolerance {tol:.0e})\n")
        if err > tol:
            failed.append(Diagnostic("error", f"output '{prefix}{k}' {subject or f'of the {what} network'} differs "
                                              f"from the f64 reference: max relative error {err:.3e} > {tol:.0e}"))
    return failed


def grad_errors(got: dict, ref: dict) -> tuple:
    """(worst relative error, its parameter) of gradients by parameter: max |g - r| over the larger of
    max |r| and 1% of the network's largest gradient entry (a gradient that is zero in exact
    arithmetic -- a bias before a batch norm -- is rounding noise on both sides)."""
    big = max((float(r.double().abs().max()) for r in ref.values() if r.numel()), default=0.0)
    worst, at = 0.0, None
    for p, r in ref.items():
        if not r.numel():
            continue
        scale = max(float(r.double().abs().max()), 1e-2 * big, 1e-30)
        e = float((got[p].double().to(r.device) - r.double()).abs().max()) / scale
        e = float("inf") if e != e else e
        if e >= worst:
            worst, at = e, p
    return worst, at


def param_errors(got: dict, ref: dict, kinds: dict | None = None) -> tuple:
    """(worst relative error, its tensor) of parameters and state after an update: max |p - r| over
    max |r|; a state tensor (kinds: name -> its `state`, e.g. velocity) over at least 1% of the
    largest entry of its kind (the velocity of a bias before a batch norm is the rounding noise of a
    gradient that is zero in exact arithmetic)."""
    kinds = kinds or {}
    big: dict = {}
    for n, r in ref.items():
        k = kinds.get(n)
        if k is not None and r.numel():
            big[k] = max(big.get(k, 0.0), float(r.double().abs().max()))
    worst, at = 0.0, None
    for n, r in ref.items():
        if not r.numel():
            continue
        scale = max(float(r.double().abs().max()), 1e-2 * big.get(kinds.get(n), 0.0), 1e-30)
        e = float((got[n].double().to(r.device) - r.double()).abs().max()) / scale
        e = float("inf") if e != e else e
        if e >= worst:
            worst, at = e, n
    return worst, at


def state_kinds(module) -> dict:
    """Each optimizer-state parameter's kind (velocity, adam_m, ...) by name."""
    return {p.attrs["sym_name"]: p.attrs["state"] for p in module.params() if "state" in p.attrs}
