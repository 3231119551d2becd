"""Optimizer updates: one side-effect op per trainable parameter (the `optimizer` pass emits them),
the global gradient norm for clipping, and the learning-rate schedules.

Update ops (no results; `side_effects`: the executor writes what reference() returns, {role: new
tensor}, into the bound symbols in place). Operands: the parameter's gradient, the learning rate
(a scalar program input) and, with `clip_norm`, the global gradient norm (netc.global_norm).
`params` binds `param` and the optimizer's state roles, module-level `netc.param` symbols marked
`state`, named '<param>.<role>' and initialized to 0:

    op                    state roles                        torch.optim oracle
    netc.sgd_update       velocity (when momentum > 0)       SGD(momentum, dampening=0, nesterov)
    netc.adam_update      adam_m, adam_v, adam_step          Adam (bias-corrected; amsgrad off)
    netc.rmsprop_update   square_avg                         RMSprop(alpha, eps; no momentum, not centered)
    netc.adagrad_update   sum_sq                             Adagrad(eps; lr_decay 0, initial accumulator 0)
    netc.adadelta_update  square_avg, acc_delta              Adadelta(rho, eps) (SINGA's kAdaDelta is the same)
    netc.adamax_update    adamax_m, adamax_u, adamax_step    Adamax(betas, eps)
    netc.sparse_sgd_update (none: plain SGD on the rows an embedding's ids touched; a table declared
                          `sparse_update: true`, passes/optimizer.py)

What every update does to the gradient g of parameter w first, in this order:
  1. SINGA's value clipping (clip_low < clip_high): g = clamp(g, clip_low, clip_high);
  2. clipping by global norm (clip_norm > 0), torch.nn.utils.clip_grad_norm_'s rule:
     g *= min(1, clip_norm / (norm + 1e-6)), norm = sqrt(sum over every gradient of |g_i|^2);
  3. weight decay, torch's (and SINGA's) L2 form: g += weight_decay * wd_scale * w.
The learning rate is the `lr` operand times lr_scale. lr_scale / wd_scale are the parameter's
(`lr_scale`, `wd_scale` on its netc.param: .nd parameter bindings, SINGA's ParamProto), which is
what per-parameter groups {"lr": lr * lr_scale, "weight_decay": wd * wd_scale} give torch.optim.

Two conventions (`convention`):
  "torch"  torch.optim's formulas (above); the default, and what tests/test_optimizer.py checks.
  "singa"  Apache SINGA v0.1-v0.3's updaters (src/utils/updater.cc), which a SINGA job's updater maps
           onto (frontend/singa/to_ir.py):
           SGD       v = mu v - lr g; w += v. The velocity holds the learning rate: it equals
                     -lr * torch's buffer while lr is constant, so both agree exactly until a
                     schedule changes lr (SINGA's older steps keep their old rate).
           Nesterov  h' = mu h + lr g; w -= (1 + mu) h' - mu h. With h = lr * torch's buffer this
                     is torch's w -= lr (g + mu buf'): again equal under a constant lr.
           AdaGrad   s += g^2; w -= lr g / sqrt(s + eps)       (torch: / (sqrt(s) + eps))
           RMSProp   a = rho a + (1 - rho) g^2; w -= lr g / sqrt(a + eps)  (torch: / (sqrt(a) + eps))
           Adam      m, v as torch's, but no bias correction and w -= lr m / sqrt(v + eps)
           AdaDelta  a = rho a + (1 - rho) g^2; d = g sqrt(u + eps) / sqrt(a + eps);
                     u = rho u + (1 - rho) d^2; w -= lr d          (torch's Adadelta exactly)
           AdamMax   m = b1 m + (1 - b1) g; u = max(b2 u, |g|) + eps; w -= lr m / u
                     (torch: u = max(b2 u, |g| + eps), w -= lr / (1 - b1^t) m / u)
           (eps is SINGA's `delta`, default 1e-8). SINGA multiplies the gradient by grad_scale
           (1 for one worker group) before weight decay; netc has no grad_scale.

Costs count FLOPs per element of the parameter (FLOPS_PER_ELEMENT below; each multiply, add,
divide, square root or comparison one FLOP): the update itself, +2 for weight decay, +1 for
clipping by norm, +2 for value clipping. Bytes: the gradient read, the parameter and every state
tensor read and written.

Learning-rate schedules: `learning_rate(schedule, step)` with step counted from 0 (SINGA's step),
a pure function the passes and the runtime share. SINGA's LRGenerators (v0.1-v0.3, in float32
there; here in double):
    fixed        base_lr
    step         base_lr * gamma ^ floor(step / change_freq)         (integer division, as SINGA)
    linear       (1 - r) base_lr + r final_lr, r = step / change_freq (not clamped: SINGA's)
    exponential  base_lr / 2 ^ (step / change_freq)
    inverse      base_lr * (1 + gamma step) ^ -pow
    inverse_t    base_lr / (1 + step / final_lr)
    fixed_step   lrs[i] for the last i with step >= steps[i] (lrs[0] before steps[0]); SINGA's
                 FixedStepLRGen advances one index per call, which is this when it is asked every
                 step in order, as its workers do
"""
from __future__ import annotations

import math

from ..diagnostics import NetcError, did_you_mean
from .registry import AttrSpec, Cost, OpDef, ShapeError, prod, register

CONVENTIONS = ("torch", "singa")
NORM_EPS = 1e-6   # torch.nn.utils.clip_grad_norm_: max_norm / (total_norm + 1e-6)

# optimizer name -> (update op, its own options with their defaults); every optimizer also takes
# COMMON_OPTIONS. The `optimizer` pass and the frontends read this table.
OPTIMIZERS = {
    "sgd": ("netc.sgd_update", {"momentum": 0.0, "nesterov": False}),
    "momentum": ("netc.sgd_update", {"momentum": 0.9}),
    "nesterov": ("netc.sgd_update", {"momentum": 0.9}),
    "adam": ("netc.adam_update", {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8}),
    "rmsprop": ("netc.rmsprop_update", {"alpha": 0.99, "eps": 1e-8}),
    "adagrad": ("netc.adagrad_update", {"eps": 1e-10}),
    "adadelta": ("netc.adadelta_update", {"rho": 0.9, "eps": 1e-6}),
    "adamax": ("netc.adamax_update", {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8}),
}
COMMON_OPTIONS = {"weight_decay": 0.0, "clip_norm": 0.0, "clip_low": 0.0, "clip_high": 0.0, "convention": "torch"}


# --------------------------------------------------------------------------- schedules

SCHEDULES = {
    "fixed": ("base_lr",),
    "step": ("base_lr", "gamma", "change_freq"),
    "linear": ("base_lr", "final_lr", "change_freq"),
    "exponential": ("base_lr", "change_freq"),
    "inverse": ("base_lr", "gamma", "pow"),
    "inverse_t": ("base_lr", "final_lr"),
    "fixed_step": ("steps", "lrs"),
}


def schedule_problem(schedule) -> str | None:
    """What is wrong with a schedule dictionary, or None (learning_rate() can evaluate it)."""
    if not isinstance(schedule, dict):
        return f"a learning-rate schedule is a dictionary with a 'type', got {schedule!r}"
    t = schedule.get("type")
    if t not in SCHEDULES:
        return f"unknown learning-rate schedule type {t!r} (types: {', '.join(SCHEDULES)})"
    need = SCHEDULES[t]
    missing = [k for k in need if k not in schedule]
    if missing:
        return f"the '{t}' schedule needs {', '.join(need)}; missing {', '.join(missing)}"
    extra = [k for k in schedule if k not in need and k != "type"]
    if extra:
        return f"the '{t}' schedule takes {', '.join(need)}, not {', '.join(extra)}"
    for k in need:
        v = schedule[k]
        if k == "steps":
            if not isinstance(v, list) or not v or not all(isinstance(s, int) and not isinstance(s, bool) for s in v):
                return "fixed_step 'steps' must be a non-empty list of integers"
            if any(b <= a for a, b in zip(v, v[1:])):
                return f"fixed_step 'steps' must increase, got {v}"
        elif k == "lrs":
            if not isinstance(v, list) or not all(_is_number(x) for x in v):
                return "fixed_step 'lrs' must be a list of numbers"
            if len(v) != len(schedule["steps"]):
                return (f"fixed_step needs one learning rate per step: {len(schedule['steps'])} steps, "
                        f"{len(v)} learning rates")
        elif k == "change_freq":
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                return f"'change_freq' of the '{t}' schedule must be a positive integer, got {v!r}"
        elif not _is_number(v):
            return f"'{k}' of the '{t}' schedule must be a number, got {v!r}"
    rates = [schedule[k] for k in ("base_lr", "final_lr") if k in need] + (list(schedule["lrs"]) if t == "fixed_step"
                                                                          else [])
    if any(r < 0 for r in rates):
        return f"the '{t}' schedule's learning rates must not be negative, got {min(rates):g}"
    if t == "inverse_t" and schedule["final_lr"] == 0:
        return "'final_lr' of the 'inverse_t' schedule must not be 0 (SINGA divides by it)"
    return None


def learning_rate(schedule: dict, step: int) -> float:
    """The learning rate of training step `step` (0-based) under `schedule` (see the module doc)."""
    t = schedule["type"]
    if t == "fixed":
        return float(schedule["base_lr"])
    if t == "step":
        return schedule["base_lr"] * float(schedule["gamma"]) ** (step // schedule["change_freq"])
    if t == "linear":
        r = step / schedule["change_freq"]
        return (1.0 - r) * schedule["base_lr"] + r * schedule["final_lr"]
    if t == "exponential":
        return schedule["base_lr"] / 2.0 ** (step / schedule["change_freq"])
    if t == "inverse":
        return schedule["base_lr"] * (1.0 + schedule["gamma"] * step) ** (-schedule["pow"])
    if t == "inverse_t":
        return schedule["base_lr"] / (1.0 + step / schedule["final_lr"])
    if t == "fixed_step":
        lr = schedule["lrs"][0]
        for s, v in zip(schedule["steps"], schedule["lrs"]):
            if step >= s:
                lr = v
        return float(lr)
    raise ValueError(schedule_problem(schedule) or f"unknown schedule {t!r}")


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# --------------------------------------------------------------------------- update ops

_COMMON_ATTRS = {
    "weight_decay": AttrSpec("number", 0.0, doc="L2 weight decay: g += weight_decay * wd_scale * w"),
    "lr_scale": AttrSpec("number", 1.0, doc="the parameter's learning-rate multiplier"),
    "wd_scale": AttrSpec("number", 1.0, doc="the parameter's weight-decay multiplier"),
    "clip_norm": AttrSpec("number", 0.0, doc="> 0: scale g by min(1, clip_norm / (norm + 1e-6)); the norm "
                                             "is operand 2"),
    "clip_low": AttrSpec("number", 0.0, doc="SINGA's value clipping, on when clip_low < clip_high"),
    "clip_high": AttrSpec("number", 0.0),
    "convention": AttrSpec("enum", "torch", CONVENTIONS, doc="torch.optim's formulas or SINGA's (module doc)"),
}


class _Update(OpDef):
    """What every update op shares: operands, checks, the gradient's preparation, costs."""
    training_only = True
    side_effects = True
    num_results = 0
    arity = (2, 3)
    param_roles = ("param",)
    flops_per_element = 2

    def state_roles(self, a) -> tuple:
        return ()

    def bindable_roles(self, a) -> tuple:
        return tuple(self.param_roles) + tuple(self.state_roles(a))

    def state_shapes(self, a, shape) -> dict:
        return {role: tuple(shape) for role in self.state_roles(a)}

    def infer(self, a, ins):
        g = tuple(ins[0])
        if tuple(ins[1]) != ():
            raise ShapeError(f"the learning rate must be a scalar, got {list(ins[1])}", operand=1)
        if a["clip_norm"] > 0:
            if len(ins) != 3 or tuple(ins[2]) != ():
                raise ShapeError("with clip_norm, operand 2 is the global gradient norm (a scalar)", attr="clip_norm")
        elif len(ins) == 3:
            raise ShapeError("a global norm operand without clip_norm", operand=2)
        return g   # no result: the shape every bound symbol has (the gradient's)

    def param_shapes(self, a, ins, out):
        return {"param": tuple(ins[0]), **self.state_shapes(a, ins[0])}

    def cost(self, a, ins, out, needs_input_grad=True):
        per = self.flops_per_element + self._extra_flops(a)
        return Cost(per * prod(ins[0]))

    def _extra_flops(self, a) -> int:
        return ((2 if a["weight_decay"] * a["wd_scale"] != 0 else 0) + (1 if a["clip_norm"] > 0 else 0)
                + (2 if a["clip_low"] < a["clip_high"] else 0))

    def bytes_moved(self, a, ins, out, itemsize=4):
        shapes = self.param_shapes(a, ins, out)
        return itemsize * (prod(ins[0]) + 2 * sum(prod(s) for s in shapes.values()) + len(ins) - 1)

    def reference(self, a, ins, params):
        from .reference import compute_dtype      # lazy: torch is slow to import
        dt = compute_dtype()                       # float64, or computing_in's (the CPU target: f32)
        w = params["param"].to(dt)
        g = ins[0].to(dt)
        lr = float(ins[1]) * a["lr_scale"]
        if a["clip_low"] < a["clip_high"]:
            g = g.clamp(a["clip_low"], a["clip_high"])
        if a["clip_norm"] > 0:
            g = g * min(1.0, a["clip_norm"] / (float(ins[2]) + NORM_EPS))
        wd = a["weight_decay"] * a["wd_scale"]
        if wd != 0:
            g = g + wd * w
        state = {role: params[role].to(dt) for role in self.state_roles(a)}
        return self.update(a, w, g, lr, state)

    def update(self, a, w, g, lr, state) -> dict:
        raise NotImplementedError


@register
class SGDUpdate(_Update):
    name = "sgd_update"
    attrs = {"momentum": AttrSpec("number", 0.0), "nesterov": AttrSpec("bool", False), **_COMMON_ATTRS}
    doc = ("SGD: w -= lr * g; with momentum (torch, dampening 0) buf = mu buf + g, w -= lr buf (Nesterov: "
           "w -= lr (g + mu buf)); SINGA's convention keeps lr inside the velocity (module doc). FLOPs per "
           "element: 2, +2 with momentum, +2 Nesterov.")

    def state_roles(self, a):
        return ("velocity",) if a["momentum"] != 0 or (a["nesterov"] and a["convention"] == "singa") else ()

    def _extra_flops(self, a):
        return super()._extra_flops(a) + (2 if a["momentum"] != 0 else 0) + (2 if a["nesterov"] else 0)

    def update(self, a, w, g, lr, state):
        mu = a["momentum"]
        if "velocity" not in state:
            return {"param": w - lr * g}
        v = state["velocity"]
        if a["convention"] == "singa":
            if a["nesterov"]:
                h = mu * v + lr * g
                return {"param": w - ((1 + mu) * h - mu * v), "velocity": h}
            v = mu * v - lr * g
            return {"param": w + v, "velocity": v}
        buf = mu * v + g
        d = g + mu * buf if a["nesterov"] else buf
        return {"param": w + (-lr) * d, "velocity": buf}


@register
class AdamUpdate(_Update):
    name = "adam_update"
    attrs = {"beta1": AttrSpec("number", 0.9), "beta2": AttrSpec("number", 0.999), "eps": AttrSpec("number", 1e-8),
             **_COMMON_ATTRS}
    flops_per_element = 13
    doc = ("Adam (torch): t += 1; m = lerp(m, g, 1 - beta1); v = beta2 v + (1 - beta2) g^2; w -= lr / (1 - beta1^t) "
           "* m / (sqrt(v) / sqrt(1 - beta2^t) + eps). SINGA: no bias correction, w -= lr m / sqrt(v + eps). "
           "FLOPs per element: 13 (m 3, v 4, the step 6).")

    def state_roles(self, a):
        return ("adam_m", "adam_v", "adam_step")

    def state_shapes(self, a, shape):
        return {"adam_m": tuple(shape), "adam_v": tuple(shape), "adam_step": ()}

    def update(self, a, w, g, lr, state):
        import torch      # lazy: torch is slow to import
        b1, b2, eps = a["beta1"], a["beta2"], a["eps"]
        m, v, t = state["adam_m"], state["adam_v"], state["adam_step"] + 1
        if a["convention"] == "singa":
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            return {"param": w - lr * m / torch.sqrt(v + eps), "adam_m": m, "adam_v": v, "adam_step": t}
        m = torch.lerp(m, g, 1 - b1)
        v = v * b2 + (1 - b2) * (g * g)
        step = float(t)
        bc1, bc2 = 1 - b1 ** step, 1 - b2 ** step
        denom = v.sqrt() / bc2 ** 0.5 + eps
        return {"param": w + (-(lr / bc1)) * (m / denom), "adam_m": m, "adam_v": v, "adam_step": t}


@register
class RMSPropUpdate(_Update):
    name = "rmsprop_update"
    attrs = {"alpha": AttrSpec("number", 0.99), "eps": AttrSpec("number", 1e-8), **_COMMON_ATTRS}
    flops_per_element = 9
    doc = ("RMSProp (torch): a = alpha a + (1 - alpha) g^2; w -= lr g / (sqrt(a) + eps); SINGA (alpha is its rho): "
           "w -= lr g / sqrt(a + eps). FLOPs per element: 9.")

    def state_roles(self, a):
        return ("square_avg",)

    def update(self, a, w, g, lr, state):
        import torch      # lazy: torch is slow to import
        sq = state["square_avg"] * a["alpha"] + (1 - a["alpha"]) * (g * g)
        denom = torch.sqrt(sq + a["eps"]) if a["convention"] == "singa" else sq.sqrt() + a["eps"]
        return {"param": w + (-lr) * (g / denom), "square_avg": sq}


@register
class AdaGradUpdate(_Update):
    name = "adagrad_update"
    attrs = {"eps": AttrSpec("number", 1e-10), **_COMMON_ATTRS}
    flops_per_element = 7
    doc = ("AdaGrad (torch): s += g^2; w -= lr g / (sqrt(s) + eps); SINGA: w -= lr g / sqrt(s + eps). "
           "FLOPs per element: 7.")

    def state_roles(self, a):
        return ("sum_sq",)

    def update(self, a, w, g, lr, state):
        import torch      # lazy: torch is slow to import
        s = state["sum_sq"] + g * g
        denom = torch.sqrt(s + a["eps"]) if a["convention"] == "singa" else s.sqrt() + a["eps"]
        return {"param": w + (-lr) * (g / denom), "sum_sq": s}


@register
class AdaDeltaUpdate(_Update):
    name = "adadelta_update"
    attrs = {"rho": AttrSpec("number", 0.9), "eps": AttrSpec("number", 1e-6), **_COMMON_ATTRS}
    flops_per_element = 16
    doc = ("AdaDelta (torch.optim.Adadelta and SINGA v0.3's kAdaDelta, the same formula): a = rho a + (1 - rho) g^2; "
           "d = g sqrt(u + eps) / sqrt(a + eps); u = rho u + (1 - rho) d^2; w -= lr d. FLOPs per element: 16 (a 4, "
           "d 6, u 4, the step 2).")

    def state_roles(self, a):
        return ("square_avg", "acc_delta")

    def update(self, a, w, g, lr, state):
        import torch      # lazy: torch is slow to import
        rho, eps = a["rho"], a["eps"]
        sq = state["square_avg"] * rho + (1 - rho) * (g * g)
        d = torch.sqrt(state["acc_delta"] + eps) / torch.sqrt(sq + eps) * g
        acc = state["acc_delta"] * rho + (1 - rho) * (d * d)
        return {"param": w + (-lr) * d, "square_avg": sq, "acc_delta": acc}


@register
class AdamaxUpdate(_Update):
    name = "adamax_update"
    attrs = {"beta1": AttrSpec("number", 0.9), "beta2": AttrSpec("number", 0.999), "eps": AttrSpec("number", 1e-8),
             **_COMMON_ATTRS}
    flops_per_element = 10
    doc = ("Adamax (torch): t += 1; m = lerp(m, g, 1 - beta1); u = max(beta2 u, |g| + eps); w -= lr / (1 - beta1^t) "
           "* m / u. SINGA's kAdamMax: m = beta1 m + (1 - beta1) g; u = max(beta2 u, |g|) + eps; w -= lr m / u (no "
           "bias correction; eps added after the max, so it accumulates in u). FLOPs per element: 10 (m 3, u 4, the step 3).")

    def state_roles(self, a):
        return ("adamax_m", "adamax_u", "adamax_step")

    def state_shapes(self, a, shape):
        return {"adamax_m": tuple(shape), "adamax_u": tuple(shape), "adamax_step": ()}

    def update(self, a, w, g, lr, state):
        import torch      # lazy: torch is slow to import
        b1, b2, eps = a["beta1"], a["beta2"], a["eps"]
        m, u, t = state["adamax_m"], state["adamax_u"], state["adamax_step"] + 1
        if a["convention"] == "singa":
            m = b1 * m + (1 - b1) * g
            u = torch.maximum(b2 * u, g.abs()) + eps
            return {"param": w - lr * m / u, "adamax_m": m, "adamax_u": u, "adamax_step": t}
        m = torch.lerp(m, g, 1 - b1)
        u = torch.maximum(u * b2, g.abs() + eps)
        return {"param": w + (-(lr / (1 - b1 ** float(t)))) * (m / u), "adamax_m": m, "adamax_u": u,
                "adamax_step": t}


@register
class GlobalNorm(OpDef):
    name = "global_norm"
    training_only = True
    unbatched = True
    differentiable = False
    arity = (1, None)
    attrs = {}
    doc = ("The global L2 norm of several gradients, sqrt(sum_i |g_i|^2) (torch.nn.utils.clip_grad_norm_'s "
           "total_norm): a scalar. FLOPs: 2 per element, +1.")

    def infer(self, a, ins):
        return ()

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(2 * sum(prod(s) for s in ins) + 1)

    def reference(self, a, ins, params):
        import torch      # lazy: torch is slow to import
        norms = torch.stack([torch.linalg.vector_norm(g.to(torch.float64), 2) for g in ins])
        return torch.linalg.vector_norm(norms, 2)


@register
class SparseSGDUpdate(OpDef):
    name = "sparse_sgd_update"
    training_only = True
    side_effects = True
    num_results = 0
    arity = (3, 3)
    param_roles = ("param",)
    index_operand = 0
    index_bound = "num_embeddings"
    attrs = {"num_embeddings": AttrSpec("int", doc="the table's rows V"),
             "lr_scale": _COMMON_ATTRS["lr_scale"]}
    doc = ("PaddlePaddle's sparse update of an embedding table (a parameter declared `sparse_update: true`): plain "
           "SGD on the rows a step touched, in place: param[ids[i]] -= lr * lr_scale * rows[i] for every id (operands: "
           "the ids, the output gradient's rows, ids' shape + [D], and the learning rate). The same as the dense "
           "update of the embedding's gradient (duplicate ids add up); rows no id touched are not read or written. "
           "FLOPs: 2 per element of the rows; bytes: the ids and rows read, the touched rows read and written.")

    def infer(self, a, ins):
        ids, rows, lr = (tuple(s) for s in ins)
        if lr != ():
            raise ShapeError(f"the learning rate must be a scalar, got {list(lr)}", operand=2)
        if len(rows) != len(ids) + 1 or rows[:-1] != ids:
            raise ShapeError(f"the rows {list(rows)} do not fit the ids {list(ids)} (ids' shape + [D])", operand=1)
        if a["num_embeddings"] <= 0:
            raise ShapeError(f"num_embeddings must be positive, got {a['num_embeddings']}", attr="num_embeddings")
        return (a["num_embeddings"], rows[-1])   # no result: the shape of the bound table

    def param_shapes(self, a, ins, out):
        return {"param": (a["num_embeddings"], tuple(ins[1])[-1])}

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(2 * prod(ins[1]))

    def bytes_moved(self, a, ins, out, itemsize=4):
        n, r = prod(ins[0]), prod(ins[1])
        return 4 * (n + 3 * r + 1)     # (an f32 table: `itemsize` is the ids')

    def reference(self, a, ins, params):
        """The touched rows only: a float64 table (the executors') is updated in place and returned (the
        executor's copy into it is then no copy), so the step costs the same whatever the vocabulary."""
        import torch      # lazy: torch is slow to import
        from .embedding import check_ids
        ids, rows, lr = ins
        w = params["param"].to(torch.float64)
        idx = check_ids(ids, a["num_embeddings"], a.get("name"))
        step = rows.to(torch.float64).reshape(-1, w.shape[1]) * (-(float(lr) * a["lr_scale"]))
        return {"param": w.index_add_(0, idx.reshape(-1), step)}


UPDATE_OPS = {"netc.sgd_update", "netc.adam_update", "netc.rmsprop_update", "netc.adagrad_update",
              "netc.adadelta_update", "netc.adamax_update", "netc.sparse_sgd_update"}


# --------------------------------------------------------------------------- resolving an optimizer
# (here, beside the tables it checks against: the optimizer pass resolves the module's optimizer and
# its options with it, and the .nd frontend checks an `optimizer` item with it, locating the key)

DEFAULT_SCHEDULE = {"type": "fixed", "base_lr": 0.01}
_KEEP_ACROSS = ("schedule", "weight_decay")   # what a module's optimizer lends one named differently


class OptimizerError(NetcError):
    """A bad optimizer name or option; `key` is the option at fault ('name' for the name), or None."""

    def __init__(self, message: str, key: str | None = None):
        super().__init__(message)
        self.key = key


def resolve_optimizer(base, options: dict) -> dict:
    """The complete optimizer spec (name, its options, the common ones, schedule) from a module's
    recorded optimizer (or None) and the pass options; NetcError for an unknown name or option or
    a bad value."""
    if not isinstance(options, dict):
        raise OptimizerError(f"optimizer options must be a dictionary, got {options!r}")
    base = dict(base or {"name": "sgd"})
    if "name" in options and options["name"] != base.get("name"):
        base = {k: base[k] for k in _KEEP_ACROSS if k in base}
    spec = {**base, **{k: v for k, v in options.items() if v is not None}}
    name = spec.pop("name", "sgd")
    if name not in OPTIMIZERS:
        hint = did_you_mean(str(name), OPTIMIZERS)
        raise OptimizerError(f"unknown optimizer '{name}'" + (f"; did you mean '{hint}'?" if hint else "")
                             + f" (optimizers: {', '.join(OPTIMIZERS)})", "name")
    _, own = OPTIMIZERS[name]
    allowed = {**own, **COMMON_OPTIONS}
    if "lr" in spec:
        if "schedule" in options:
            raise OptimizerError("give the optimizer either 'lr' or 'schedule', not both", "lr")
        spec.pop("schedule", None)      # an explicit lr replaces the module's schedule
        lr = spec.pop("lr")
        _number("lr", lr, name)
        spec["schedule"] = {"type": "fixed", "base_lr": float(lr)}
    schedule = spec.pop("schedule", None) or dict(DEFAULT_SCHEDULE)
    problem = schedule_problem(schedule)
    if problem:
        raise OptimizerError(f"optimizer '{name}': {problem}", "lr" if "lr" in options else "schedule")
    for k in spec:
        if k not in allowed:
            hint = did_you_mean(k, list(allowed) + ["lr", "schedule"])
            raise OptimizerError(f"option '{k}' does not apply to optimizer '{name}'"
                                 + (f"; did you mean '{hint}'?" if hint else "")
                                 + f" (its options: {', '.join(list(allowed) + ['lr', 'schedule'])})", k)
    out = {"name": name}
    for k, default in allowed.items():
        v = spec.get(k, default)
        if k == "convention":
            if v not in CONVENTIONS:
                raise OptimizerError(f"optimizer convention must be {' or '.join(map(repr, CONVENTIONS))}, got {v!r}",
                                     k)
        elif k == "nesterov":
            if not isinstance(v, bool):
                raise OptimizerError(f"optimizer option 'nesterov' must be true or false, got {v!r}", k)
        else:
            v = float(_number(k, v, name))
        out[k] = v
    _check_ranges(out)
    out["schedule"] = dict(schedule)
    return out


def _number(key, v, name):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")):
        raise OptimizerError(f"option '{key}' of optimizer '{name}' must be a finite number, got {v!r}", key)
    return v


def _check_ranges(o):
    name = o["name"]

    def bad(k, why):
        raise OptimizerError(f"option '{k}' of optimizer '{name}' {why}, got {o[k]:g}", k)

    for k in ("momentum", "weight_decay", "eps", "alpha", "clip_norm"):
        if k in o and o[k] < 0:
            bad(k, "must not be negative")
    if "rho" in o and not 0 <= o["rho"] < 1:
        bad("rho", "must be in [0, 1)")
    if name == "adamax" and o["eps"] == 0:
        bad("eps", "must be positive (u starts at 0: the first step would divide 0 by 0)")
    for k in ("beta1", "beta2"):
        if k in o and not 0 <= o[k] < 1:
            bad(k, "must be in [0, 1)")
    if o["clip_high"] < o["clip_low"]:
        raise OptimizerError(f"optimizer '{name}': clip_low ({o['clip_low']:g}) is above clip_high "
                             f"({o['clip_high']:g})", "clip_low")
    if name in ("momentum", "nesterov") and o["momentum"] == 0 and o["convention"] == "torch":
        bad("momentum", "must be positive (use 'sgd' for plain SGD)")
    if name == "sgd" and o.get("nesterov") and o["momentum"] == 0:
        raise OptimizerError("optimizer 'sgd': nesterov needs a positive momentum (torch.optim's rule)", "nesterov")
