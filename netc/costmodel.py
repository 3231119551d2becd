"""Paleo's device model: estimated time per layer from FLOPs and bytes (paleo-format.md §10).

    comp = max(1 clock, flops / (peak * ppp))          comm = max(1 clock, bytes / (bandwidth * ppp))
    time = comp + comm

per pass (forward; backward = data + filter gradients, whose traffic is taken as twice the
forward's). `ppp` is Paleo's "percent of peak" (1.0 = the device's peak). Devices are Paleo's
(TITAN_X, K20, K40, ...) plus current ones; `custom:PEAK,BANDWIDTH` takes FLOP/s and byte/s, with
optional SI suffixes (`custom:67T,3.35T`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .diagnostics import NetcError


@dataclass(frozen=True)
class Device:
    name: str
    peak_flops: float      # FLOP/s
    bandwidth: float       # byte/s
    clock_hz: float = 1e9
    note: str = ""


_G = 1e9
DEVICES = {
    # Paleo's own table (GFLOPS, GB/s with GB = 2^30 bytes as Paleo divides by 2^30, MHz)
    "titanx": Device("TITAN_X", 6144 * _G, 336.5 * 2**30, 1000e6, "Paleo"),
    "k20": Device("K20", 3520 * _G, 208 * 2**30, 1000e6, "Paleo"),
    "k20x": Device("K20X", 3935 * _G, 250 * 2**30, 1000e6, "Paleo"),
    "k40": Device("K40", 4290 * _G, 288 * 2**30, 745e6, "Paleo"),
    "k80": Device("K80", 5600 * _G, 480 * 2**30, 560e6, "Paleo"),
    "gtx780ti": Device("GEFORCE_780_TI", 5040 * _G, 336 * 2**30, 875e6, "Paleo"),
    "gtx750m": Device("GEFORCE_750_M", 722.7 * _G, 80 * 2**30, 941e6, "Paleo"),
    "cpu_i7": Device("CPU_I7", 289 * _G, 68 * 2**30, 1000e6, "Paleo"),
    # current devices: dense FP32 (non-tensor-core) peak, HBM bandwidth, boost clock (vendor data sheets)
    "a100": Device("A100-SXM4-80GB", 19.5e12, 2.039e12, 1410e6, "FP32 CUDA cores"),
    "h100": Device("H100-SXM5", 66.9e12, 3.35e12, 1980e6, "FP32 CUDA cores"),
    "h200": Device("H200-SXM", 66.9e12, 4.8e12, 1980e6, "FP32 CUDA cores"),
}

_SI = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}


def _number(s: str) -> float:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKMGTP]?)\s*", s)
    if not m:
        raise ValueError(s)
    return float(m.group(1)) * _SI[m.group(2)]


def get_device(spec: str) -> Device:
    if spec.startswith("custom:"):
        parts = spec[len("custom:"):].split(",")
        try:
            if len(parts) != 2:
                raise ValueError
            peak, bw = (_number(p) for p in parts)
            if peak <= 0 or bw <= 0:
                raise ValueError
        except ValueError:
            raise NetcError(f"--device {spec}: expected custom:PEAK_FLOPS,BANDWIDTH in FLOP/s and byte/s, "
                            f"e.g. custom:67T,3.35T")
        return Device("custom", peak, bw)
    d = DEVICES.get(spec.lower())
    if d is None:
        raise NetcError(f"unknown device '{spec}' (known: {', '.join(DEVICES)}, or custom:PEAK,BANDWIDTH)")
    return d


def layer_time(dev: Device, flops: float, nbytes: float, ppp: float = 1.0) -> float:
    """Seconds for one pass of one layer: compute plus memory traffic, each at least a clock."""
    clock = 1.0 / dev.clock_hz
    comp = max(clock, flops / (dev.peak_flops * ppp)) if flops else 0.0
    comm = max(clock, nbytes / (dev.bandwidth * ppp)) if nbytes else 0.0
    return comp + comm


def annotate(rows: list[dict], dev: Device, ppp: float = 1.0) -> dict:
    """Add time_fwd_ms / time_bwd_ms to explain rows; return the totals."""
    tf = tb = 0.0
    for r in rows:
        f = layer_time(dev, r["flops_fwd"], r["bytes"], ppp)
        b = layer_time(dev, r["flops_bwd_data"] + r["flops_bwd_filter"], 2 * r["bytes"], ppp) \
            if (r["flops_bwd_data"] or r["flops_bwd_filter"]) else 0.0
        r["time_fwd_ms"], r["time_bwd_ms"] = f * 1e3, b * 1e3
        tf, tb = tf + f, tb + b
    return {"device": dev.name, "time_fwd_ms": tf * 1e3, "time_bwd_ms": tb * 1e3}
