"""The optimizer pass and the update ops (netc/ops/optim.py, netc/passes/optimizer.py).

torch.optim is the oracle: a small network's training program runs 5 steps on the reference
executor (netc.runtime.train.ReferenceTrainer: forward, the generated gradient ops, the update
ops), and a torch.optim optimizer fed the same gradients (the trainer's own step values) must end
with the same parameters, in float64, to 1e-12. SINGA's convention is checked against a
transcription of SINGA's updater.cc; the learning-rate schedules against hand computations of
SINGA's LRGenerator formulas; the SINGA corpus's updaters against what each file says.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch

from netc.diagnostics import DiagnosticEngine, NetcError, render
from netc.frontend import load, load_text
from netc.ir.parser import parse_ir
from netc.ir.printer import print_ir
from netc.ops import lookup
from netc.ops.optim import learning_rate, schedule_problem
from netc import pipelines
from netc.pipelines import Options, Training
from netc.runtime.train import ReferenceTrainer

ROOT = Path(__file__).resolve().parents[1]
SINGA = ROOT.parent / "shared" / "corpus" / "singa"
STEPS = 5
TOL = 1e-12

NET = """
network small {
  input data: f32[4, 6, 6, 2]
  input label: i32[4]
  conv1 = Convolution(data) { filter: [3, 3, 2, 3], padding: VALID, activation: relu,
                              params: { weight: { name: conv1.weight, lr_scale: 2.0, wd_scale: 0.5 },
                                        bias: { name: conv1.bias, lr_scale: 0.5, wd_scale: 0.0 } } }
  ip1 = InnerProduct(conv1) { num_outputs: 5, activation: tanh }
  ip2 = InnerProduct(ip1) { num_outputs: 3 }
  loss = SoftmaxLoss(ip2, label)
}
"""
SCALES = {"conv1.weight": (2.0, 0.5), "conv1.bias": (0.5, 0.0)}
# the learning rate changes during the 5 steps: 0.1, 0.1, 0.05, 0.05, 0.025
SCHEDULE = {"type": "step", "base_lr": 0.1, "gamma": 0.5, "change_freq": 2}


def program(options: dict, freeze=(), text: str = NET):
    diag = DiagnosticEngine()
    m = load_text(text, "small.nd", diag)
    pipelines.training(m, Options(training=Training(freeze=tuple(freeze), optimizer=options)), diag)
    assert not diag.has_errors(), diag.render()
    return m


def feeds(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return [{"data": torch.randn(4, 6, 6, 2, generator=g, dtype=torch.float64),
             "label": torch.randint(0, 3, (4,), generator=g)} for _ in range(STEPS)]


def train(m):
    """5 steps; (initial parameters, the gradients of each step, the trainer)."""
    tr = ReferenceTrainer(m, seed=3)
    init = {k: v.clone() for k, v in tr.params.items()}
    grads = []
    for k, feed in enumerate(feeds()):
        named = tr.step(feed, lr=learning_rate(SCHEDULE, k))
        grads.append({p: g.detach().clone() for p, g in tr.gradients(named).items()})
    return init, grads, tr


def torch_run(init, grads, make, clip=None):
    """torch.optim fed netc's gradients: one parameter group per parameter (lr_scale, wd_scale)."""
    names = list(grads[0])
    ps = {n: init[n].clone().requires_grad_(True) for n in names}
    groups = [{"params": [ps[n]], "scale": SCALES.get(n, (1.0, 1.0))} for n in names]
    opt = make(groups)
    wd = [g["weight_decay"] for g in opt.param_groups]
    for k, gs in enumerate(grads):
        for group, w in zip(opt.param_groups, wd):
            group["lr"] = learning_rate(SCHEDULE, k) * group["scale"][0]
            group["weight_decay"] = w * group["scale"][1]
        for n in names:
            ps[n].grad = gs[n].clone()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_([ps[n] for n in names], clip)
        opt.step()
    return {n: p.detach() for n, p in ps.items()}, {n: opt.state[p] for n, p in ps.items()}


CASES = {
    "sgd": ({"name": "sgd"}, lambda g: torch.optim.SGD(g, lr=0.1)),
    "sgd_wd": ({"name": "sgd", "weight_decay": 0.01}, lambda g: torch.optim.SGD(g, lr=0.1, weight_decay=0.01)),
    "momentum": ({"name": "momentum", "momentum": 0.9, "weight_decay": 0.01},
                 lambda g: torch.optim.SGD(g, lr=0.1, momentum=0.9, weight_decay=0.01)),
    "nesterov": ({"name": "nesterov", "momentum": 0.8, "weight_decay": 0.02},
                 lambda g: torch.optim.SGD(g, lr=0.1, momentum=0.8, nesterov=True, weight_decay=0.02)),
    "sgd_nesterov": ({"name": "sgd", "momentum": 0.7, "nesterov": True},
                     lambda g: torch.optim.SGD(g, lr=0.1, momentum=0.7, nesterov=True)),
    "adam": ({"name": "adam", "weight_decay": 0.01},
             lambda g: torch.optim.Adam(g, lr=0.1, weight_decay=0.01)),
    "adam_betas": ({"name": "adam", "beta1": 0.8, "beta2": 0.99, "eps": 1e-6},
                   lambda g: torch.optim.Adam(g, lr=0.1, betas=(0.8, 0.99), eps=1e-6)),
    "rmsprop": ({"name": "rmsprop", "alpha": 0.9, "weight_decay": 0.01},
                lambda g: torch.optim.RMSprop(g, lr=0.1, alpha=0.9, weight_decay=0.01)),
    "adagrad": ({"name": "adagrad", "weight_decay": 0.01},
                lambda g: torch.optim.Adagrad(g, lr=0.1, weight_decay=0.01)),
    "adadelta": ({"name": "adadelta", "rho": 0.8, "weight_decay": 0.01},
                 lambda g: torch.optim.Adadelta(g, lr=0.1, rho=0.8, weight_decay=0.01)),
    "adamax": ({"name": "adamax", "beta1": 0.8, "beta2": 0.99, "eps": 1e-6, "weight_decay": 0.01},
               lambda g: torch.optim.Adamax(g, lr=0.1, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.01)),
}


def _close(got, want, what):
    err = float((got.to(torch.float64) - want).abs().max())
    assert err <= TOL * max(1.0, float(want.abs().max())), f"{what}: max |netc - torch.optim| = {err:.3e}"


@pytest.mark.parametrize("case", list(CASES))
def test_updates_equal_torch_optim(case):
    options, make = CASES[case]
    init, grads, tr = train(program(options))
    want, states = torch_run(init, grads, make)
    assert set(want) == {"conv1.weight", "conv1.bias", "ip1.weight", "ip1.bias", "ip2.weight", "ip2.bias"}
    for n, w in want.items():
        assert not torch.equal(tr.params[n], init[n]), f"{n} did not move"
        _close(tr.params[n], w, f"{case}: {n} after {STEPS} steps")
    # the optimizer state too (torch's names for netc's state symbols)
    state_names = {"velocity": "momentum_buffer", "adam_m": "exp_avg", "adam_v": "exp_avg_sq",
                   "square_avg": "square_avg", "sum_sq": "sum", "adam_step": "step", "acc_delta": "acc_delta",
                   "adamax_m": "exp_avg", "adamax_u": "exp_inf", "adamax_step": "step"}
    for n, st in states.items():
        for role, tname in state_names.items():
            sym = f"{n}.{role}"
            if sym in tr.params and tname in st:
                _close(tr.params[sym], torch.as_tensor(st[tname], dtype=torch.float64), f"{case}: {sym}")


@pytest.mark.parametrize("case", ["momentum", "adam", "rmsprop"])
def test_clipping_by_global_norm_equals_clip_grad_norm(case):
    options, make = CASES[case]
    init, grads, tr = train(program(dict(options, clip_norm=0.5)))
    norms = [math.sqrt(sum(float((g ** 2).sum()) for g in gs.values())) for gs in grads]
    assert max(norms) > 0.5, "the test needs gradients that get clipped"
    want, _ = torch_run(init, grads, make, clip=0.5)
    for n, w in want.items():
        _close(tr.params[n], w, f"{case} clipped: {n}")


def test_frozen_parameters_unchanged():
    m = program({"name": "momentum", "weight_decay": 0.1}, freeze=["conv1"])
    net = m.networks()[0]
    updates = [op for op in net.regions[0].ops if op.name == "netc.sgd_update"]
    assert {op.attrs["params"]["param"].name for op in updates} == {"ip1.weight", "ip1.bias", "ip2.weight", "ip2.bias"}
    assert not any(p.attrs["sym_name"].startswith("conv1.") and "state" in p.attrs for p in m.params())
    init, grads, tr = train(m)
    for n in ("conv1.weight", "conv1.bias"):
        assert torch.equal(tr.params[n], init[n])
    assert not torch.equal(tr.params["ip1.weight"], init["ip1.weight"])


def test_program_structure():
    m = program({"name": "adam", "clip_norm": 1.0})
    net = m.networks()[0]
    body = net.regions[0].ops
    lr = [op for op in body if op.name == "netc.input" and op.attrs.get("role") == "learning_rate"]
    assert len(lr) == 1 and lr[0].attrs["name"] == "lr" and lr[0].results[0].type.shape == ()
    names = [op.attrs.get("name") for op in body]
    updates = [op for op in body if op.name == "netc.adam_update"]
    assert [op.attrs["name"] for op in updates] == [f"{p}.update" for p in net.attrs["gradients"]]
    last_grad = max(i for i, op in enumerate(body) if "grad_of" in op.attrs)
    assert all(names.index(op.attrs["name"]) > last_grad for op in updates)   # after every gradient op
    norm = next(op for op in body if op.name == "netc.global_norm")
    assert all(op.operands[2] is norm.results[0] for op in updates)
    out = next(op for op in body if op.name == "netc.output")
    assert [v.owner.attrs["name"] for v in out.operands] == ["loss"]        # gradients removed
    w = next(op for op in updates if op.attrs["params"]["param"].name == "conv1.weight")
    assert (w.attrs["lr_scale"], w.attrs["wd_scale"]) == (2.0, 0.5)
    assert set(w.attrs["params"]) == {"param", "adam_m", "adam_v", "adam_step"}
    state = {p.attrs["sym_name"]: p for p in m.params() if "state" in p.attrs}
    assert state["conv1.weight.adam_m"].attrs["state"] == "adam_m"
    assert state["conv1.weight.adam_step"].attrs["type"].shape == ()
    assert net.attrs["optimizer"]["name"] == "adam" and net.attrs["optimizer"]["clip_norm"] == 1.0
    # the IR prints, parses back and loads as hand-written IR (schemas and verifier)
    text = print_ir(m)
    assert print_ir(parse_ir(text, "t.mlir")) == text
    load_text(text, "t.mlir")


def test_costs_per_element():
    n = 3 * 4
    cases = [("netc.sgd_update", {"momentum": 0.0}, 2), ("netc.sgd_update", {"momentum": 0.9}, 4),
             ("netc.sgd_update", {"momentum": 0.9, "nesterov": True, "weight_decay": 0.1}, 8),
             ("netc.adam_update", {}, 13), ("netc.adam_update", {"clip_norm": 1.0}, 14),
             ("netc.rmsprop_update", {}, 9), ("netc.adagrad_update", {}, 7), ("netc.adadelta_update", {}, 16),
             ("netc.adadelta_update", {"weight_decay": 0.1}, 18), ("netc.adamax_update", {}, 10)]
    for name, attrs, per in cases:
        d = lookup(name)
        a = {k: s.default for k, s in d.attrs.items()}
        a.update(attrs)
        assert d.cost(a, [(3, 4), ()], None).flops_fwd == per * n, (name, attrs)
    assert lookup("netc.global_norm").cost({}, [(3, 4), (5,)], ()).flops_fwd == 2 * 17 + 1


# -- SINGA's convention ---------------------------------------------------------------------------

def singa_updater(kind, w, grads, lrs, mu=0.0, wd=0.0, delta=1e-8, rho=0.9, b1=0.9, b2=0.999, lo=0.0, hi=0.0):
    """SINGA v0.3's src/utils/updater.cc, transcribed (float64): clip, weight decay, update."""
    w, hist, upd = w.clone(), torch.zeros_like(w), torch.zeros_like(w)
    for g, lr in zip(grads, lrs):
        g = g.clone()
        if hi > lo:
            g = g.clamp(lo, hi)
        if wd > 0:
            g = g + w * wd
        if kind == "sgd":
            if mu > 0:
                hist = hist * mu - lr * g
                w = w + hist
            else:
                w = w - lr * g
        elif kind == "nesterov":
            tmp = hist.clone()
            hist = hist * mu + lr * g
            w = w - (hist * (1 + mu) - tmp * mu)
        elif kind == "adagrad":
            hist = hist + g * g
            w = w - lr * g / torch.sqrt(hist + delta)
        elif kind == "rmsprop":
            hist = hist * rho + (1 - rho) * g * g
            w = w - lr * g / torch.sqrt(hist + delta)
        elif kind == "adam":
            hist = hist * b1 + (1 - b1) * g
            upd = upd * b2 + (1 - b2) * g * g
            w = w - lr * hist / torch.sqrt(upd + delta)
        elif kind == "adadelta":
            hist = hist * rho + (1 - rho) * g * g
            tmp = g * torch.sqrt(upd + delta) / torch.sqrt(hist + delta)
            upd = rho * upd + (1 - rho) * tmp * tmp
            w = w - lr * tmp
        elif kind == "adamax":
            hist = hist * b1 + (1 - b1) * g
            upd = upd * b2
            upd = torch.maximum(upd, g.abs()) + delta
            w = w - lr * hist / upd
    return w


SINGA_CASES = {
    "sgd": ({"name": "momentum", "momentum": 0.9, "weight_decay": 0.004}, {"mu": 0.9, "wd": 0.004}),
    "nesterov": ({"name": "nesterov", "momentum": 0.8}, {"mu": 0.8}),
    "adagrad": ({"name": "adagrad", "eps": 1e-8, "weight_decay": 0.01}, {"wd": 0.01}),
    "rmsprop": ({"name": "rmsprop", "alpha": 0.95, "eps": 1e-8, "clip_low": -0.05, "clip_high": 0.05},
                {"rho": 0.95, "lo": -0.05, "hi": 0.05}),
    "adam": ({"name": "adam", "eps": 1e-8}, {}),
    "adadelta": ({"name": "adadelta", "rho": 0.95, "eps": 1e-6, "weight_decay": 0.01},
                 {"rho": 0.95, "delta": 1e-6, "wd": 0.01}),
    "adamax": ({"name": "adamax", "beta1": 0.8, "beta2": 0.99, "eps": 1e-3}, {"b1": 0.8, "b2": 0.99, "delta": 1e-3}),
}


@pytest.mark.parametrize("kind", list(SINGA_CASES))
def test_singa_convention_equals_singas_updater(kind):
    options, kw = SINGA_CASES[kind]
    init, grads, tr = train(program(dict(options, convention="singa")))
    for n in grads[0]:
        lr_scale, wd_scale = SCALES.get(n, (1.0, 1.0))
        lrs = [learning_rate(SCHEDULE, k) * lr_scale for k in range(STEPS)]
        k = dict(kw, wd=kw.get("wd", 0.0) * wd_scale)
        want = singa_updater(kind, init[n], [g[n] for g in grads], lrs, **k)
        _close(tr.params[n], want, f"SINGA {kind}: {n}")


@pytest.mark.parametrize("name", ["momentum", "nesterov"])
def test_singa_momentum_is_torchs_under_a_constant_learning_rate(name):
    """SINGA keeps the learning rate inside its history; with a fixed rate that is torch's momentum."""
    global SCHEDULE
    saved, SCHEDULE = SCHEDULE, {"type": "fixed", "base_lr": 0.05}
    try:
        opts = {"name": name, "momentum": 0.9, "weight_decay": 0.001}
        _, _, singa = train(program(dict(opts, convention="singa")))
        _, _, torch_ = train(program(opts))
    finally:
        SCHEDULE = saved
    for n in ("conv1.weight", "ip1.weight", "ip2.bias"):
        _close(singa.params[n], torch_.params[n], f"{name}: {n}")


# -- learning-rate schedules: SINGA's formulas by hand ------------------------------------------

@pytest.mark.parametrize("schedule,step,want", [
    ({"type": "fixed", "base_lr": 0.01}, 12345, 0.01),
    # kStep (0.x mnist_job.conf): base_lr * gamma ^ (step / change_freq), integer division
    ({"type": "step", "base_lr": 0.001, "gamma": 0.997, "change_freq": 60}, 0, 0.001),
    ({"type": "step", "base_lr": 0.001, "gamma": 0.997, "change_freq": 60}, 59, 0.001),
    ({"type": "step", "base_lr": 0.001, "gamma": 0.997, "change_freq": 60}, 60, 0.000997),
    ({"type": "step", "base_lr": 0.001, "gamma": 0.997, "change_freq": 60}, 125, 0.000994009),
    ({"type": "step", "base_lr": 0.01, "gamma": 0.1, "change_freq": 100000}, 250000, 0.0001),
    # kFixedStep (cifar10 job.conf): the last step_lr whose step has been reached
    ({"type": "fixed_step", "steps": [0, 60000, 65000], "lrs": [0.001, 0.0001, 0.00001]}, 0, 0.001),
    ({"type": "fixed_step", "steps": [0, 60000, 65000], "lrs": [0.001, 0.0001, 0.00001]}, 59999, 0.001),
    ({"type": "fixed_step", "steps": [0, 60000, 65000], "lrs": [0.001, 0.0001, 0.00001]}, 60000, 0.0001),
    ({"type": "fixed_step", "steps": [0, 60000, 65000], "lrs": [0.001, 0.0001, 0.00001]}, 64999, 0.0001),
    ({"type": "fixed_step", "steps": [0, 60000, 65000], "lrs": [0.001, 0.0001, 0.00001]}, 10 ** 6, 0.00001),
    ({"type": "fixed_step", "steps": [100, 200], "lrs": [0.5, 0.25]}, 3, 0.5),   # before the first: lrs[0]
    # kInverse (mnist_conv.conf): base_lr * (1 + gamma * step) ^ -pow; 1 + 0.0001 * 10000 = 2
    ({"type": "inverse", "base_lr": 0.01, "gamma": 0.0001, "pow": 0.75}, 0, 0.01),
    ({"type": "inverse", "base_lr": 0.01, "gamma": 0.0001, "pow": 0.75}, 10000, 0.005946035575013605),
    # kExponential: base_lr / 2 ^ (step / change_freq), a float division
    ({"type": "exponential", "base_lr": 0.1, "change_freq": 10}, 10, 0.05),
    ({"type": "exponential", "base_lr": 0.1, "change_freq": 10}, 5, 0.07071067811865475),
    # kLinear: (1 - r) base_lr + r final_lr, r = step / change_freq, not clamped
    ({"type": "linear", "base_lr": 0.1, "final_lr": 0.01, "change_freq": 100}, 50, 0.055),
    ({"type": "linear", "base_lr": 0.1, "final_lr": 0.01, "change_freq": 100}, 100, 0.01),
    ({"type": "linear", "base_lr": 0.1, "final_lr": 0.01, "change_freq": 100}, 200, -0.08),
    # kInverseT: base_lr / (1 + step / final_lr)
    ({"type": "inverse_t", "base_lr": 0.02, "final_lr": 0.01}, 0, 0.02),
    ({"type": "inverse_t", "base_lr": 0.02, "final_lr": 0.01}, 1, 0.02 / 101),
])
def test_schedules_equal_hand_computations(schedule, step, want):
    assert schedule_problem(schedule) is None
    assert learning_rate(schedule, step) == pytest.approx(want, rel=1e-12, abs=1e-15)


def test_bad_schedules():
    assert "increase" in schedule_problem({"type": "fixed_step", "steps": [0, 5, 5], "lrs": [1, 2, 3]})
    assert "one learning rate per step" in schedule_problem({"type": "fixed_step", "steps": [0, 5], "lrs": [1]})
    assert "positive integer" in schedule_problem({"type": "step", "base_lr": 1, "gamma": 0.5, "change_freq": 0})
    assert "unknown" in schedule_problem({"type": "cosine"})


# -- SINGA job.confs ------------------------------------------------------------------------------

FIXED_STEP_CIFAR = {"type": "fixed_step", "steps": [0, 60000, 65000], "lrs": [0.001, 0.0001, 1e-05]}
STEP_MNIST = {"type": "step", "base_lr": 0.001, "gamma": 0.997, "change_freq": 60}
INVERSE = {"type": "inverse", "base_lr": 0.01, "gamma": 0.0001, "pow": 0.75}
STEP_ALEXNET = {"type": "step", "base_lr": 0.01, "gamma": 0.1, "change_freq": 100000}
STEP_CHAR_RNN = {"type": "step", "base_lr": 0.002, "gamma": 0.97, "change_freq": 2000}
SGD_WD = {"name": "sgd", "weight_decay": 0.004, "convention": "singa", "schedule": FIXED_STEP_CIFAR}
CIFAR = {"name": "momentum", "momentum": 0.9, "weight_decay": 0.004, "convention": "singa",
         "schedule": FIXED_STEP_CIFAR}
MNIST = {"name": "sgd", "convention": "singa", "schedule": STEP_MNIST}
CONV = {"name": "momentum", "momentum": 0.9, "weight_decay": 0.0005, "convention": "singa", "schedule": INVERSE}
ALEX = {"name": "momentum", "momentum": 0.9, "weight_decay": 0.0005, "convention": "singa", "schedule": STEP_ALEXNET}
RBM = {"name": "momentum", "momentum": 0.8, "weight_decay": 0.0002, "convention": "singa",
       "schedule": {"type": "fixed", "base_lr": 0.1}}
RBM4 = dict(RBM, schedule={"type": "fixed", "base_lr": 0.001})
AUTOENC = {"name": "adagrad", "eps": 1e-8, "convention": "singa", "schedule": {"type": "fixed", "base_lr": 0.01}}
CHAR_RNN = {"name": "rmsprop", "alpha": 0.95, "eps": 1e-8, "clip_low": -5.0, "clip_high": 5.0, "convention": "singa",
            "schedule": STEP_CHAR_RNN}
RNNLM = {"name": "sgd", "convention": "singa",
         "schedule": {"type": "fixed_step", "steps": [0, 48810, 56945, 65080, 73215],
                      "lrs": [0.1, 0.05, 0.025, 0.0125, 0.00625]}}
EXPECTED = {
    "0.1.0_cifar10_job.conf": SGD_WD, "0.1.0_mnist_conv.conf": CONV, "0.1.0_mnist_job.conf": MNIST,
    "0.1.0_rbm_autoencoder.conf": AUTOENC, "0.1.0_rbm_rbm1.conf": RBM, "0.1.0_rbm_rbm2.conf": RBM,
    "0.1.0_rbm_rbm3.conf": RBM, "0.1.0_rbm_rbm4.conf": RBM4, "0.1.0_rnnlm_job.conf": RNNLM,
    "0.2.0_alexnet_cudnn.conf": ALEX, "0.2.0_alexnet_job.conf": ALEX, "0.2.0_char-rnn_job.conf": CHAR_RNN,
    "0.2.0_cifar10_cudnn.conf": CIFAR, "0.2.0_cifar10_cudnn_hybrid.conf": CIFAR, "0.2.0_cifar10_hybrid.conf": CIFAR,
    "0.2.0_cifar10_job.conf": CIFAR, "0.2.0_mnist_conv.conf": CONV, "0.2.0_mnist_job.conf": MNIST,
    "0.2.0_rbm_autoencoder.conf": AUTOENC, "0.2.0_rbm_rbm1.conf": RBM, "0.2.0_rbm_rbm2.conf": RBM,
    "0.2.0_rbm_rbm3.conf": RBM, "0.2.0_rbm_rbm4.conf": RBM4, "0.2.0_rnnlm_job.conf": RNNLM,
    "0.3.0_alexnet_cudnn.conf": ALEX, "0.3.0_alexnet_job.conf": ALEX, "0.3.0_char-rnn_job.conf": CHAR_RNN,
    "0.3.0_cifar10_cudnn.conf": CIFAR, "0.3.0_cifar10_cudnn_bm.conf": CIFAR, "0.3.0_cifar10_cudnn_hybrid.conf": CIFAR,
    "0.3.0_cifar10_hybrid.conf": CIFAR, "0.3.0_cifar10_job.conf": CIFAR, "0.3.0_mnist_conv.conf": CONV,
    "0.3.0_mnist_job.conf": MNIST, "0.3.0_rbm_autoencoder.conf": AUTOENC, "0.3.0_rbm_rbm1.conf": RBM,
    "0.3.0_rbm_rbm2.conf": RBM, "0.3.0_rbm_rbm3.conf": RBM, "0.3.0_rbm_rbm4.conf": RBM4,
    "0.3.0_rnnlm_job.conf": RNNLM,
    **{f"dev.20160224_{n}.conf": CIFAR for n in ("cifar10_cudnn_hybrid", "cifar10_gpu", "cifar10_hybrid",
                                                 "cifar10_job")},
    **{f"dev.20160224_{n}.conf": MNIST for n in ("mnist_gpu", "mnist_hybrid", "mnist_hybrid_gpu",
                                                 "mnist_hybrid_gpux2", "mnist_job")},
    "dev.20160313_mnist_2x2.conf": MNIST,
}
needs_corpus = pytest.mark.skipif(not SINGA.is_dir(), reason="the shared corpus is not beside the repository")


@needs_corpus
def test_every_corpus_updater_is_listed():
    """Every release-era job.conf with a top-level updater is in EXPECTED (the mnist_rbm_job.confs
    wrap theirs in a pre-0.1 `model { }` and are rejected before; pre0.1.* files likewise)."""
    have = {p.name for p in SINGA.glob("*.conf") if not p.name.startswith("pre0.1")
            and re.search(r"^updater\s*\{", p.read_text(), re.M)}
    assert have == set(EXPECTED)


@needs_corpus
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_updaters_map_onto_the_optimizer(name):
    from netc.frontend.singa import read_job
    from netc.frontend.singa.to_ir import singa_optimizer
    diag = DiagnosticEngine()
    try:
        job = read_job(str(SINGA / name))
    except NetcError:
        pytest.skip("the job does not read (its other problems are tested elsewhere)")
    assert singa_optimizer(job, diag) == EXPECTED[name]
    assert not diag.diagnostics, diag.render()


@needs_corpus
@pytest.mark.parametrize("name", ["0.2.0_cifar10_job.conf", "0.3.0_char-rnn_job.conf", "0.1.0_mnist_conv.conf"])
def test_corpus_jobs_import_with_their_optimizer(name):
    """The module records the updater; the optimizer pass uses it (SINGA's convention, the
    parameters' lr_scale / wd_scale on their updates) and records the schedule."""
    diag = DiagnosticEngine()
    m = load(str(SINGA / name), diag)
    assert m.attrs["optimizer"] == EXPECTED[name]
    training = Training(loss="softmax" if "char-rnn" in name else None)
    try:
        pipelines.training(m, Options(training=training), diag)
    except NetcError as e:   # a layer without a gradient rule yet (char-rnn's GRU, ...): not this test's concern
        pytest.skip(str(e))
    if diag.has_errors():
        pytest.skip(diag.render())
    net = m.networks()[0]
    opt = dict(net.attrs["optimizer"])
    want = EXPECTED[name]
    assert {k: opt[k] for k in want} == want
    updates = [op for op in net.regions[0].ops if lookup(op.name) is not None and lookup(op.name).side_effects]
    assert len(updates) == len(net.attrs["gradients"])
    assert all(op.attrs.get("convention") == "singa" for op in updates)
    if name == "0.2.0_cifar10_job.conf":
        scales = {op.attrs["params"]["param"].name: (op.attrs.get("lr_scale", 1.0), op.attrs.get("wd_scale", 1.0))
                  for op in updates}
        # cifar10: biases have lr_scale 2; the classifier's weight wd_scale 250, its bias wd_scale 0
        assert scales["0#b1"] == (2.0, 1.0) and scales["0#w1"] == (1.0, 1.0)
        assert sorted(scales.values()).count((1.0, 250.0)) == 1 and sorted(scales.values()).count((2.0, 0.0)) == 1


# -- errors ---------------------------------------------------------------------------------------

def test_unknown_optimizer_is_a_clear_error():
    with pytest.raises(NetcError, match=r"unknown optimizer 'adamw'; did you mean 'adam'\?"):
        program({"name": "adamw"})
    with pytest.raises(NetcError, match="option 'momentum' does not apply to optimizer 'adam'"):
        program({"name": "adam", "momentum": 0.9})
    with pytest.raises(NetcError, match="'beta2' of optimizer 'adam' must be in"):
        program({"name": "adam", "beta2": 1.5})
    with pytest.raises(NetcError, match="nesterov needs a positive momentum"):
        program({"name": "sgd", "nesterov": True})
    with pytest.raises(NetcError, match="convention"):
        program({"name": "sgd", "convention": "caffe"})


def _singa_error(old: str, new: str, base: str = "0.2.0_mnist_job.conf") -> str:
    text = (SINGA / base).read_text()
    assert old in text
    with pytest.raises(NetcError) as e:
        load_text(text.replace(old, new, 1), "bad_job.conf")
    return "".join(render(d) for d in e.value.diagnostics if d.severity == "error")   # not the job's warnings


@needs_corpus
def test_unknown_singa_updater_is_located():
    out = _singa_error("type: kSGD", "type: kUserUpdater")
    line = next(i for i, t in enumerate((SINGA / "0.2.0_mnist_job.conf").read_text().splitlines(), 1)
                if "type: kSGD" in t)
    m = re.search(r"bad_job\.conf:(\d+):(\d+): error: updater type kUserUpdater is not supported", out)
    assert m and int(m.group(1)) == line, out
    src, caret = out.splitlines()[1:3]
    col = int(m.group(2))
    assert src[col - 1:].startswith("kUserUpdater") and caret == " " * (col - 1) + "^" + "~" * 11


@needs_corpus
def test_unknown_singa_learning_rate_settings_are_located():
    out = _singa_error("type : kStep", "type : kUserChange")
    assert re.search(r"bad_job\.conf:\d+:\d+: error: learning-rate change method kUserChange is not supported", out)
    out = _singa_error("step_lr:0.00001", "", "0.2.0_cifar10_job.conf")
    assert re.search(r"bad_job\.conf:\d+:\d+: error: kFixedStep: fixed_step needs one learning rate per step", out)
    out = _singa_error("change_freq: 60", "change_freq: 0")
    assert re.search(r"bad_job\.conf:\d+:\d+: error: kStep: 'change_freq' .* must be a positive integer", out)
    assert "change_freq" in out.splitlines()[1]


# -- the .nd language's `optimizer` --------------------------------------------------------------

ND_OPT = """
optimizer momentum { momentum: 0.95, weight_decay: 0.0005, clip_norm: 1.0,
                     schedule: { type: step, base_lr: 0.05, gamma: 0.5, change_freq: 2 } }
""" + NET


def test_nd_optimizer_trains_as_the_command_line_says():
    """`optimizer NAME { ... }` in a .nd file is the module's optimizer: the pass uses it (and the
    command line's options still override it key by key), exactly as --optimizer/--momentum/... do."""
    def trained(text, options):
        diag = DiagnosticEngine()
        m = load_text(text, "opt.nd", diag)
        pipelines.training(m, Options(training=Training(optimizer=options)), diag)
        tr = ReferenceTrainer(m, seed=3)
        for k in range(4):
            tr.step(None, learning_rate(m.networks()[0].attrs["optimizer"]["schedule"], k))
        return m, tr.params
    m, from_file = trained(ND_OPT, {})
    assert m.attrs["optimizer"] == {"name": "momentum", "momentum": 0.95, "weight_decay": 0.0005, "clip_norm": 1.0,
                                    "schedule": {"type": "step", "base_lr": 0.05, "gamma": 0.5, "change_freq": 2}}
    _, from_flags = trained(NET, {"name": "momentum", "momentum": 0.95, "weight_decay": 0.0005, "clip_norm": 1.0,
                                  "schedule": {"type": "step", "base_lr": 0.05, "gamma": 0.5, "change_freq": 2}})
    for k, v in from_file.items():
        assert torch.equal(v, from_flags[k]), k
    m, _ = trained(ND_OPT, {"momentum": 0.5})                      # an option overrides the file's
    ups = [op for op in m.networks()[0].regions[0].ops if op.name == "netc.sgd_update"]
    assert ups and all(op.attrs["momentum"] == 0.5 and op.attrs["weight_decay"] == 0.0005 for op in ups)
    m = load_text("optimizer adam { lr: 0.003 }\n" + NET, "opt.nd", DiagnosticEngine())
    assert m.attrs["optimizer"] == {"name": "adam", "schedule": {"type": "fixed", "base_lr": 0.003}}


@pytest.mark.parametrize("text,msg,col", [
    ("optimizer momentm { }", "unknown optimizer 'momentm'", 11),
    ("optimizer adam { momentum: 0.9 }", "option 'momentum' does not apply to optimizer 'adam'", 18),
    ("optimizer sgd { lr: 0.1, schedule: { type: fixed, base_lr: 0.1 } }", "either 'lr' or 'schedule', not both", 17),
    ("optimizer sgd { lr: -1 }", "learning rates must not be negative, got -1", 17),
    ("optimizer adam { beta1: 1.5 }", "option 'beta1' of optimizer 'adam' must be in [0, 1), got 1.5", 18),
    ("optimizer sgd { schedule: { type: step, base_lr: 0.1 } }", "missing gamma, change_freq", 17),
    ("optimizer sgd { nesterov: 3 }", "'nesterov' must be true or false, got 3", 17),
    ("optimizer sgd { convention: keras }", "convention must be 'torch' or 'singa', got 'keras'", 17),
    ("optimizer sgd { weight_decay: -1 }", "'weight_decay' of optimizer 'sgd' must not be negative, got -1", 17),
    ("optimizer sgd\noptimizer adam", "the optimizer is declared twice", 1),
])
def test_nd_optimizer_errors_are_located(text, msg, col):
    diag = DiagnosticEngine()
    load_text(text + "\n" + NET, "bad.nd", diag)      # collected (the caller raises), with the rest of the file's
    errs = [d for d in diag.diagnostics if d.severity == "error"]
    assert len(errs) == 1, diag.render()
    d = errs[0]
    assert msg in d.message and d.loc.col == col and d.loc.line in (1, 2), render(d)


def test_optimizer_is_a_keyword_only_where_an_item_starts():
    """A layer may not be called `optimizer` unquoted (the note says how); a quoted one, an attribute
    key and a value may."""
    bad = NET.replace("ip1 = InnerProduct(conv1)", "optimizer = InnerProduct(conv1)")
    with pytest.raises(NetcError) as e:
        load_text(bad, "kw.nd", DiagnosticEngine())
    assert "'optimizer' is a keyword; to use it as a name, write it in quotes" in render(e.value.diagnostics[0])
    ok = NET.replace("ip1 = InnerProduct(conv1) {", '"optimizer" = InnerProduct(conv1) { optimizer: 1,')
    ok = ok.replace("(ip1", '("optimizer"').replace("ip1,", '"optimizer",')
    m = load_text(ok, "kw.nd", DiagnosticEngine())
    assert "optimizer" in {op.attrs.get("name") for op in m.networks()[0].regions[0].ops}


@needs_corpus
def test_singa_updater_survives_import_to_nd(tmp_path):
    """`netc import job.conf` writes the updater as the .nd file's optimizer: the .nd trains as the
    job does (it was lost before)."""
    from netc.frontend.nd_writer import write_nd
    src = SINGA / "0.2.0_cifar10_job.conf"
    job = load(str(src), DiagnosticEngine())
    text = write_nd(job)
    assert text.splitlines()[0].startswith("optimizer momentum {")
    again = load_text(text, "cifar10.nd", DiagnosticEngine())
    assert again.attrs["optimizer"] == job.attrs["optimizer"] == EXPECTED["0.2.0_cifar10_job.conf"]


def test_nd_optimizer_exports_to_a_singa_updater(tmp_path):
    """An .nd optimizer in SINGA's convention becomes the job's updater and reads back the same; one
    SINGA cannot compute (torch's momentum formula) is exported with SINGA's default updater and a
    warning at the optimizer, not silently."""
    from netc.export import export
    body = ("\nnetwork n {\n  input x: f32[2, 3]\n  input label: i32[2]\n  fc = InnerProduct(x) { num_outputs: 2 }\n"
            "  loss = SoftmaxLoss(fc, label)\n}\n")
    singa = ("optimizer momentum { convention: singa, momentum: 0.9, weight_decay: 0.0005,\n"
             "  schedule: { type: step, base_lr: 0.05, gamma: 0.5, change_freq: 2 } }")
    f = tmp_path / "s.nd"
    f.write_text(singa + body)
    diag = DiagnosticEngine()
    job = tmp_path / "s.conf"
    job.write_text(export(str(f), "singa", diag))
    assert not diag.diagnostics, diag.render()
    back = load(str(job), DiagnosticEngine())
    assert back.attrs["optimizer"] == load(str(f), DiagnosticEngine()).attrs["optimizer"]
    f.write_text("optimizer momentum { momentum: 0.9 }" + body)
    diag = DiagnosticEngine()
    text = export(str(f), "singa", diag)
    assert "updater { type: kSGD learning_rate { type: kFixed base_lr: 0.01 } }" in text
    (w,) = diag.diagnostics
    assert w.severity == "warning" and "follows torch's update formulas" in w.message
    assert (w.loc.line, w.loc.col) == (1, 1)
    f.write_text("optimizer sgd { lr: 0.1 }" + body)             # plain SGD: the same arithmetic either way
    diag = DiagnosticEngine()
    assert "learning_rate { type: kFixed base_lr: 0.1 }" in export(str(f), "singa", diag) and not diag.diagnostics


@needs_corpus
def test_the_singa_example_says_what_the_job_says():
    """examples/cifar10_phases.nd's optimizer is SINGA's CIFAR-10 job's updater, as netc reads it."""
    mine = load(str(ROOT / "examples" / "cifar10_phases.nd"), DiagnosticEngine()).attrs["optimizer"]
    assert mine == load(str(SINGA / "0.3.0_cifar10_job.conf"), DiagnosticEngine()).attrs["optimizer"]


@needs_corpus
@pytest.mark.parametrize("fmt,what", [("paleo", "Paleo's network JSON"), ("layout", "a Brainstorm layout")])
def test_formats_without_an_optimizer_say_they_drop_it(fmt, what, tmp_path):
    from netc.export import export
    for src, line, word in [(SINGA / "0.2.0_cifar10_job.conf", 12, "updater"),
                            (ROOT / "examples" / "cifar10_phases.nd", None, "optimizer")]:
        diag = DiagnosticEngine()
        try:
            export(str(src), fmt, diag)
        except NetcError:
            pass          # a network the format cannot hold: its own error, after the warning
        w = [d for d in diag.diagnostics if "optimizer" in d.message and d.severity == "warning"]
        assert len(w) == 1 and what in w[0].message, diag.render()
        assert line is None or w[0].loc.line == line
        assert w[0].width == len(word)
