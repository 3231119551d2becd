"""Paleo's device model and simulations (shared/spec/paleo-format.md §10, normative).

Per layer and pass (forward, backward-data, backward-filter), in milliseconds:

    comp(f) = 0 if f == 0 else max(1 clock, f / peak / ppp_comp)
    comm(b) = max(1 clock, b / bandwidth / ppp_comp)          one term per tensor read or written
    time    = comp(flops) + sum of comm over the pass's tensors

with the FLOPs and tensors each op declares (OpDef.paleo_timing). On top: the weight update,
the cross-device fetch of model-parallel layers, and Paleo's simulations: the data-parallel
scaling table with its four all-reduce schemes, lower/upper bounds over parallel towers, and the
"one weird trick" hybrid split. `ppp` is Paleo's "percent of peak" (1.0 = the device's peak).
Devices are Paleo's (TITAN_X, K20, K40, ...) plus current ones; `custom:PEAK,BANDWIDTH` takes
FLOP/s and byte/s, with optional SI suffixes (`custom:67T,3.35T`).

layer_time() is the plain roofline sum (compute plus all traffic, each floored at a clock) used to
predict a compiled kernel's time beside its measurement.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

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


# ------------------------------------------------------------------------ Paleo's timing model (§10)
# Networks of Paleo's simulations, Gbit/s.
NETWORKS = {"aws": 2, "ethernet": 10, "ethernet20": 20, "infiniband": 70, "pcie2": 64, "pcie3": 128}
SCHEMES = ("OneToAll", "TreeAllReduce", "ButterflyAllReduce", "ButterflyMixing")
PASSES = ("fwd", "bwd_data", "bwd_filter")


@dataclass(frozen=True)
class Network:
    name: str
    gbits: float           # Gbit/s

    @property
    def bytes_per_s(self) -> float:
        """What Paleo's all-reduce schemes use: G/8 * 10^9 bytes/s."""
        return self.gbits / 8 * 1e9

    @property
    def fetch_bandwidth(self) -> float:
        """What Paleo's cross-device fetch uses in its hybrid simulation: G/8 "GB/s", divided
        like the device's bandwidth, by 2^30."""
        return self.gbits / 8 * 2 ** 30


def get_network(name: str) -> Network:
    g = NETWORKS.get(name.lower())
    if g is None:
        raise NetcError(f"unknown network '{name}' (known: {', '.join(NETWORKS)})")
    return Network(name.lower(), g)


@dataclass(frozen=True)
class Timing:
    """How explain times layers: the device and Paleo's percent of peak for on-device work
    (ppp_comp) and for communication (ppp_comm). calibration (`explain --profile`): the measured
    efficiency per op type, {"file", "device", "device_name", "factors": {op type: factor}}."""
    device: Device
    ppp_comp: float = 1.0
    ppp_comm: float = 1.0
    calibration: dict | None = field(default=None, compare=False)


@dataclass
class LayerCost:
    """What Paleo's model needs of one layer: its name (its device is the split index after '@'),
    its parents with the elements it reads from each, its timing terms per pass (OpDef.paleo_timing),
    the size of an element, and its parameters."""
    name: str
    parents: list                 # [(parent name, elements of that input)]
    timing: dict                  # pass -> ops.registry.TimeTerms
    itemsize: int = 4
    params: int = 0
    param_bytes: int = 0


@dataclass
class LayerTime:
    name: str
    fwd: float = 0.0              # ms, each pass without the cross-device fetch
    bwd_data: float = 0.0
    bwd_filter: float = 0.0
    fetch: float = 0.0            # ms, Paleo adds it to the forward and to the backward pass
    param_bytes: int = 0

    @property
    def bwd(self) -> float:
        return self.bwd_data + self.bwd_filter


def clock_ms(dev: Device) -> float:
    return 1e3 / dev.clock_hz


def comp_ms(dev: Device, flops: float, ppp: float = 1.0) -> float:
    """comp(f) = 0 for no FLOPs, else max(one clock, f / peak / ppp)."""
    if not flops:
        return 0.0
    return max(clock_ms(dev), flops / dev.peak_flops * 1e3 / ppp)


def comm_ms(dev: Device, nbytes: float, ppp: float = 1.0, bandwidth: float | None = None) -> float:
    """comm(b) = max(one clock, b / bandwidth / ppp): one tensor's traffic, floored on its own."""
    return max(clock_ms(dev), nbytes / (bandwidth or dev.bandwidth) * 1e3 / ppp)


def pass_ms(dev: Device, terms, itemsize: int, ppp_comp: float = 1.0) -> float:
    """A pass of a layer: comp(flops) + the sum of comm(bytes) over its tensors (0 without terms)."""
    if terms is None:
        return 0.0
    return comp_ms(dev, terms.flops, ppp_comp) + sum(comm_ms(dev, n * itemsize, ppp_comp) for n in terms.tensors)


def weight_update_ms(dev: Device, params: int, param_bytes: int) -> float:
    """w -= lr * dw: 2 FLOPs per parameter, and reading w, reading dw, writing w; always at ppp 1."""
    return comp_ms(dev, 2 * params) + 3 * comm_ms(dev, param_bytes)


def device_id(name: str) -> int:
    """The device of a layer in Paleo's simulations: the split index after '@' (0 without one)."""
    _, at, suffix = (name or "").rpartition("@")
    return int(suffix) if at and suffix.isdigit() else 0


def fetch_ms(dev: Device, layer: LayerCost, ppp_comm: float = 1.0, bandwidth: float | None = None) -> float:
    """Cross-device fetch: each input whose parent sits on another device crosses at `bandwidth`
    (default: the device's memory bandwidth, as Paleo's data- and model-parallel simulations pass
    none) with ppp_comm. With several parents, the bandwidth halves, cumulatively, for each one
    in another group of four devices (Paleo's rule; with one parent it never does)."""
    cur = device_id(layer.name)
    if len(layer.parents) == 1:
        p, n = layer.parents[0]
        return comm_ms(dev, n * layer.itemsize, ppp_comm, bandwidth) if device_id(p) != cur else 0.0
    bw, t = bandwidth or dev.bandwidth, 0.0
    for p, n in layer.parents:
        d = device_id(p)
        if d != cur:
            if cur // 4 != d // 4:
                bw /= 2
            t += comm_ms(dev, n * layer.itemsize, ppp_comm, bw)
    return t


def calibrate(times: list, op_types: list, factors: dict) -> list:
    """Measured efficiency on the model's times (`netc explain --profile`): every LayerTime's
    forward and backward times divided by the factor of its layer's op type (sum of predicted over
    sum of measured times of that type's launches, from `netc run NET.so --profile`; 1.0 for a type
    the profile lacks). The cross-device fetch is communication, not the op's kernel: unchanged."""
    out = []
    for t, op in zip(times, op_types):
        f = factors.get(op, 1.0)
        out.append(replace(t, fwd=t.fwd / f, bwd_data=t.bwd_data / f, bwd_filter=t.bwd_filter / f))
    return out


def layer_times(costs: list, dev: Device, ppp_comp: float = 1.0, ppp_comm: float = 1.0,
                fetch_bandwidth: float | None = None) -> list:
    """LayerTime of every LayerCost."""
    out = []
    for c in costs:
        t = {k: pass_ms(dev, c.timing.get(k), c.itemsize, ppp_comp) for k in PASSES}
        out.append(LayerTime(c.name, t["fwd"], t["bwd_data"], t["bwd_filter"],
                             fetch_ms(dev, c, ppp_comm, fetch_bandwidth), c.param_bytes))
    return out


def allreduce_ms(scheme: str, workers: int, nbytes: float, network: Network, ppp_comm: float = 1.0) -> float:
    """Paleo's all-reduce of `nbytes` over `workers` (comm.py): link(b) = b / (G/8 * 10^9) / ppp,
    h = ceil(log2 n); OneToAll 2 link(P (n-1)), TreeAllReduce 2 h link(P), ButterflyAllReduce
    h link(P), ButterflyMixing link(P)."""
    def link(b):
        return b / network.bytes_per_s * 1e3 / ppp_comm
    h = math.ceil(math.log(workers) / math.log(2))     # Paleo's expression, float rounding included
    if scheme == "OneToAll":
        return 2 * link(nbytes * (workers - 1))
    if scheme == "TreeAllReduce":
        return 2 * h * link(nbytes)
    if scheme == "ButterflyAllReduce":
        return h * link(nbytes)
    if scheme == "ButterflyMixing":
        return link(nbytes)
    raise ValueError(scheme)


def scaling_table(times_at, batch: int, workers: list, scaling: str, dev: Device, network: Network,
                  ppp_comm: float = 1.0, params_at=None) -> list:
    """Paleo's data-parallel simulation (simulate_scaling). times_at(b) -> (LayerTimes, params) of
    the network at batch b per worker. Weak scaling: every worker keeps `batch` (the effective batch
    grows); strong: the batch is split, ceil(batch / n) per worker. Per worker count: forward and
    backward (cross-device fetch included in both, as Paleo sums them), the weight update, their
    sum, and the all-reduce time of the parameter bytes under each scheme."""
    rows = []
    cache = {}
    for n in workers:
        b = batch if scaling == "weak" else math.ceil(batch / n)
        if b not in cache:
            cache[b] = times_at(b)
        times, params = cache[b]
        pbytes = sum(t.param_bytes for t in times)
        fwd = sum(t.fwd + t.fetch for t in times)
        bwd = sum(t.bwd + t.fetch for t in times)
        apply = weight_update_ms(dev, params, pbytes)
        rows.append(dict(workers=n, batch=batch * n if scaling == "weak" else batch, batch_per_worker=b,
                         iterations=1, fwd_ms=fwd, bwd_ms=bwd, apply_ms=apply, comp_ms=fwd + bwd + apply,
                         param_bytes=pbytes,
                         allreduce_ms={s: allreduce_ms(s, n, pbytes, network, ppp_comm) for s in SCHEMES}))
    return rows


def tower_bounds(nested, ms: dict) -> tuple:
    """(lower, upper) of a sum over Paleo's nested walk (lists are chains, tuples parallel towers):
    parallel towers add the max of their sums to the lower bound and their total to the upper
    bound (Paleo's _sum_with_parallel; a tower holding towers itself is summed the same way)."""
    lo = up = 0.0
    for block in nested:
        if isinstance(block, tuple):
            parts = [tower_bounds(seq, ms) for seq in block]
            lo += max((p[0] for p in parts), default=0.0)
            up += sum(p[1] for p in parts)
        elif isinstance(block, list):
            a, b = tower_bounds(block, ms)
            lo, up = lo + a, up + b
        else:
            lo, up = lo + ms.get(block, 0.0), up + ms.get(block, 0.0)
    return lo, up


def hybrid_table(costs: list, order: list, nested, hybrid_workers: int, batch: int, dev: Device,
                 network: Network, ppp_comp: float = 1.0, ppp_comm: float = 1.0) -> list:
    """Paleo's "one weird trick" simulation (simulate_hybrid_parallel): layers without '@' run data
    parallel over `hybrid_workers` (TreeAllReduce of their parameters), layers with '@' model
    parallel (their forward and backward as lower bounds over the parallel towers), cross-device
    fetches at the network's bandwidth. The first model-parallel layer's first parent's output is
    fetched by K - 1 workers, once thanks to pipelining: Paleo counts that transfer in elements,
    not bytes, and netc reproduces it. `order`: layer names in Paleo's walk order."""
    times = {t.name: t for t in layer_times(costs, dev, ppp_comp, ppp_comm, network.fetch_bandwidth)}
    by_name = {c.name: c for c in costs}
    names = [n for n in order if n in by_name]
    dp = [n for n in names if "@" not in n]
    mp = [n for n in names if "@" in n]
    k = hybrid_workers

    def apply(ns):
        return weight_update_ms(dev, sum(by_name[n].params for n in ns), sum(by_name[n].param_bytes for n in ns))

    d_fwd = sum(times[n].fwd + times[n].fetch for n in dp)
    d_bwd = sum(times[n].bwd + times[n].fetch for n in dp)
    d_sync = allreduce_ms("TreeAllReduce", k, sum(by_name[n].param_bytes for n in dp), network, ppp_comm)
    m_fwd = tower_bounds(nested, {n: times[n].fwd + times[n].fetch for n in mp})[0] if mp else 0.0
    m_bwd = tower_bounds(nested, {n: times[n].bwd + times[n].fetch for n in mp})[0] if mp else 0.0
    fetch = 0.0
    if mp and by_name[mp[0]].parents:
        elems = by_name[mp[0]].parents[0][1]            # Paleo: np.prod(outputs), elements
        fetch = elems / network.fetch_bandwidth * 1e3 * (k - 1)
        m_fwd = (m_fwd - fetch) * k + fetch
        m_bwd = (m_bwd - fetch) * k + fetch
    return [dict(part="data parallel", layers=len(dp), workers=k, batch=batch * k, fwd_ms=d_fwd, bwd_ms=d_bwd,
                 apply_ms=apply(dp), sync_ms=d_sync),
            dict(part="model parallel", layers=len(mp), workers=k, batch=batch * k, fwd_ms=m_fwd, bwd_ms=m_bwd,
                 apply_ms=apply(mp), sync_ms=0.0, fetch_ms=fetch)]


# ------------------------------------------------------------------------ communication between workers
# Latency (alpha) of one message on Paleo's networks, for the alpha-beta model of the per-worker report
# (netc explain FILE --workers K). Paleo models bandwidth only; these are typical one-way latencies
# (assumptions, documented in docs/partitioning.md): a cloud network, 10/20 Gbit Ethernet, InfiniBand,
# PCIe between devices of one machine.
LATENCY_S = {"aws": 100e-6, "ethernet": 50e-6, "ethernet20": 50e-6, "infiniband": 2e-6, "pcie2": 5e-6, "pcie3": 5e-6}


def alpha_beta_s(kind: str, workers: int, nbytes: float, network: Network, ppp_comm: float = 1.0) -> float:
    """Seconds for one communication of a logical tensor of `nbytes` among `workers` ranks under the
    alpha-beta model with ring algorithms: a step costs the latency alpha, a byte 1/beta (beta the
    network's bandwidth times ppp_comm). send/recv: alpha + m/beta; all-gather and reduce-scatter:
    (n-1) steps moving (n-1)/n of the tensor; all-reduce: both, 2(n-1) steps, 2(n-1)/n; broadcast
    (pipelined along a ring): (n-1) steps, the tensor once."""
    a = LATENCY_S.get(network.name, 50e-6)
    beta = network.bytes_per_s * ppp_comm
    n = max(workers, 1)
    if kind in ("send", "recv"):
        return a + nbytes / beta
    if n == 1:
        return 0.0
    if kind in ("all_gather", "reduce_scatter"):
        return (n - 1) * a + (n - 1) / n * nbytes / beta
    if kind == "all_reduce":
        return 2 * (n - 1) * a + 2 * (n - 1) / n * nbytes / beta
    if kind == "broadcast":
        return (n - 1) * a + nbytes / beta
    raise ValueError(kind)


def paleo_comm_ms(kind: str, workers: int, nbytes: float, network: Network, ppp_comm: float = 1.0) -> float:
    """The same in Paleo's terms, bandwidth only: link(b) = b / (G/8 * 10^9) / ppp_comm; send/recv
    link(m); all-reduce Paleo's TreeAllReduce, 2 ceil(log2 n) link(m); all-gather and reduce-scatter
    link((n-1)/n m) (Paleo has no model of them: the ring's bytes); broadcast ceil(log2 n) link(m)."""
    def link(b):
        return b / network.bytes_per_s * 1e3 / ppp_comm
    n = max(workers, 1)
    if kind in ("send", "recv"):
        return link(nbytes)
    if n == 1:
        return 0.0
    if kind == "all_reduce":
        return allreduce_ms("TreeAllReduce", n, nbytes, network, ppp_comm)
    if kind in ("all_gather", "reduce_scatter"):
        return link((n - 1) / n * nbytes)
    if kind == "broadcast":
        return math.ceil(math.log2(n)) * link(nbytes)
    raise ValueError(kind)
