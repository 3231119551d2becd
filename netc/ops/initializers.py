"""Where training starts: a parameter's initial value from its `init` attributes (the one place the
reference executor, the compiled targets' random parameters (their manifest records the
attributes), the K-rank runs and the Python API draw them).

A `netc.param` may carry `init` and its numbers (a .nd binding, the API's ParamAttr, a SINGA
ParamProto's `init { }`, which the SINGA importer records: frontend/singa/to_ir.py). Each tensor is
drawn from its own generator seeded by (seed, name), in float64, so a value does not depend on what
else is initialized and the same seed gives the same values everywhere:

    init                    value                                          SINGA (param.cc, v0.1-v0.3)
    constant                value (default 1)                              kConstant    ParamGenerator::Fill
    gaussian, normal        N(mean, std^2) * value (0, 1, 1)               kGaussian    GaussianGen::Fill
    uniform                 U(low, high) * value (-1, 1, 1)                kUniform     UniformGen::Fill
    gaussian_sqrt_fan_in    N(mean, std^2) * value / sqrt(fan_in)          kGaussianSqrtFanIn
    uniform_sqrt_fan_in     U(low, high) * value / sqrt(fan_in / 3)        kUniformSqrtFanIn
    uniform_sqrt_fan_in_out U(low, high) * value / sqrt(fan_in + fan_out)  kUniformSqrtFanInOut
    xavier                  U(-a, a), a = sqrt(6 / (fan_in + fan_out))     (Glorot and Bengio)
    msra                    N(0, 2 / fan_in)                               (He et al.)

fan_in / fan_out: the parameter's `fan_in` / `fan_out` attributes when it has them (the SINGA
importer records SINGA's own: its blob's shape[1] and shape[0], which is what param.cc divides by),
else from netc's layout: fan_in the product of all but the last axis ([K, M] inner products, HWIO
filters), fan_out the last axis times the window (kh * kw). A parameter without `init` gets the
reference executor's draw (reference.random_param: weights N(0, 1/fan_in), ...); init_tensor then
returns None.
"""
from __future__ import annotations

import math
import zlib

INITS = ("constant", "gaussian", "normal", "uniform", "gaussian_sqrt_fan_in", "uniform_sqrt_fan_in",
         "uniform_sqrt_fan_in_out", "xavier", "msra")
# SINGA's InitMethod -> netc's init (every built-in one of v0.1-v0.3's job.proto)
SINGA_INITS = {"kConstant": "constant", "kGaussian": "gaussian", "kUniform": "uniform",
               "kGaussianSqrtFanIn": "gaussian_sqrt_fan_in", "kUniformSqrtFanIn": "uniform_sqrt_fan_in",
               "kUniformSqrtFanInOut": "uniform_sqrt_fan_in_out"}
FAN_INITS = ("gaussian_sqrt_fan_in", "uniform_sqrt_fan_in", "uniform_sqrt_fan_in_out", "xavier", "msra")
INIT_KEYS = ("init", "value", "mean", "std", "low", "high", "fan_in", "fan_out")


def init_generator(seed: int, name: str):
    """The generator (a torch.Generator) of parameter `name`'s initial draw under `seed`."""
    import torch      # lazy: torch is slow to import
    return torch.Generator().manual_seed((seed * 1_000_003 + zlib.crc32(("init@" + name).encode())) % (2 ** 63))


def layout_fans(shape) -> tuple:
    """(fan_in, fan_out) of a netc parameter layout (the module doc)."""
    n = math.prod(shape)
    if len(shape) < 2:
        return max(n, 1), max(n, 1)
    window = math.prod(shape[:-2]) if len(shape) > 2 else 1
    return max(math.prod(shape[:-1]), 1), max(shape[-1] * window, 1)


def init_problem(attrs: dict) -> str | None:
    """What is wrong with a parameter's init attributes, or None."""
    init = attrs.get("init")
    if init is None:
        return None
    if init not in INITS:
        return f"unknown init '{init}' (inits: {', '.join(INITS)})"
    for k in INIT_KEYS[1:]:
        v = attrs.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
            return f"init attribute '{k}' must be a finite number, got {v!r}"
    for k in ("fan_in", "fan_out"):
        if k in attrs and attrs[k] <= 0:
            return f"init attribute '{k}' must be positive, got {attrs[k]}"
    return None


def init_tensor(name: str, shape, attrs: dict | None, seed: int = 0, dtype=None):
    """The initial tensor (`dtype`, default float64) of parameter `name` from its init attributes (the
    module doc), or None when it has no `init`. ValueError for bad attributes (init_problem)."""
    import torch      # lazy: torch is slow to import
    a = attrs or {}
    init = a.get("init")
    if init is None:
        return None
    problem = init_problem(a)
    if problem:
        raise ValueError(f"parameter '{name}': {problem}")
    shape = tuple(shape)
    g = init_generator(seed, name)
    value = float(a.get("value", 1.0))
    mean, std = float(a.get("mean", 0.0)), float(a.get("std", 1.0))
    low, high = float(a.get("low", -1.0)), float(a.get("high", 1.0))
    fan_in, fan_out = layout_fans(shape)
    fan_in, fan_out = float(a.get("fan_in", fan_in)), float(a.get("fan_out", fan_out))

    def gauss(m, s):
        return torch.randn(shape, generator=g, dtype=torch.float64) * s + m

    def unif(lo, hi):
        return torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo

    if init == "constant":
        t = torch.full(shape, value, dtype=torch.float64)
    elif init in ("gaussian", "normal"):
        t = gauss(mean, std) * value
    elif init == "uniform":
        t = unif(low, high) * value
    elif init == "gaussian_sqrt_fan_in":
        t = gauss(mean, std) * value / math.sqrt(fan_in)
    elif init == "uniform_sqrt_fan_in":
        t = unif(low, high) * value / math.sqrt(fan_in / 3.0)
    elif init == "uniform_sqrt_fan_in_out":
        t = unif(low, high) * value / math.sqrt(fan_in + fan_out)
    elif init == "xavier":
        b = math.sqrt(6.0 / (fan_in + fan_out))
        t = unif(-b, b)
    else:   # msra
        t = gauss(0.0, math.sqrt(2.0 / fan_in))
    return t.to(dtype or torch.float64)


def init_attrs(attrs: dict) -> dict:
    """The init attributes of a parameter's attributes (what a manifest records for it)."""
    return {k: attrs[k] for k in INIT_KEYS if k in attrs} if "init" in attrs else {}
