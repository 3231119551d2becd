"""Autotuning: each kernel specialization of a network timed over a small space of tile sizes,
warps and pipeline stages on the GPU, the winners kept in a tuning file that `netc compile
--tuning FILE` reads on any machine (a CPU-only one included), so its cubins are the tuned ones.

    netc compile net.nd -o net.so --autotune                 # on a GPU: tune, write net.tuning.json, build
    netc compile net.nd -o net.so --tuning net.tuning.json   # anywhere: build with those winners

The tuning key of a specialization (lower.tuning_key) is what decides its best tiles: the kernel, the
types and values of its scalar arguments at the compiled batch (sizes, strides, the activation's
slope) and its constexprs other than the tiles; not its pointers. Layers of the same shape share
a key, and so do networks. A tuning file is JSON:

    {"format": "netc-tuning", "version": 1, "entries": [
      {"key": "...", "device": "NVIDIA H100 80GB HBM3", "arch": 90, "triton": "3.6.0",
       "kernel": "conv2d_kernel", "layer": "conv1", "sizes": {"NB": 128, ...},
       "config": {"block_m": 128, "block_n": 128, "block_k": 64, "group_m": 8, "num_warps": 8, "num_stages": 3},
       "us": 812.5, "default_us": 904.1, "candidates": 14}, ...]}

`config` holds the launcher keywords (netc/kernels) that lower.py pins. Entries are looked up by
key and arch (a file may hold several devices; the first entry of the compile's arch wins, and a
later tuning run on the same device replaces its entry).

The tuner (tune_network) lowers every distinct specialization onto a real device arena laid out
exactly as the memory plan (the plan's offsets, pitches and channel slices; values random but
finite), launches each candidate through Triton's JIT and times it with CUDA events (median of
`reps` after `warmup`; a split-K candidate's two kernels together); candidates the launcher rejects or the GPU cannot run (too much shared
memory) are skipped. Losses (one program, data-dependent reads) and softmax are not tuned.
"""
from __future__ import annotations

from ..diagnostics import NetcError
from .manifest import const_region
from .tuning_file import TUNED_KERNELS
from ..kernels.gemm import SMS as _SMS
from .lower import TORCH_DTYPES, f32_products, pin_of, lower_calls, lower_network, tuning_key  # noqa: F401 (tuning_key: API)


# (block_m, block_n, block_k, num_warps, num_stages): shapes of Triton's matmul tuning practice,
# K steps by operand width (TF32/IEEE f32 operands take twice the shared memory of 16-bit ones)
_MMA_16 = [(128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 64, 8, 3), (128, 128, 64, 4, 4),
           (128, 64, 64, 4, 4), (64, 128, 64, 4, 4), (64, 256, 64, 4, 4), (128, 32, 64, 4, 4),
           (64, 64, 64, 4, 4), (64, 32, 64, 2, 5), (128, 128, 128, 8, 3), (64, 64, 128, 4, 3)]
_MMA_32 = [(128, 256, 32, 8, 3), (128, 128, 32, 8, 3), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
           (64, 128, 32, 4, 4), (64, 64, 32, 4, 4), (128, 32, 32, 4, 4), (64, 32, 32, 2, 5),
           (128, 128, 16, 4, 4), (64, 64, 16, 2, 4)]


def _p2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


# split-K: worth trying where the output's tiles leave most of the GPU's SMs (132 on an H100: gemm.SMS) idle


def split_ks(m: int, n: int, k: int, bm: int, bn: int, bk: int) -> list:
    """The split-K factors to try for an [m, k] @ [k, n] product in bm x bn x bk tiles: where the
    tiles are fewer than the SMs, 2, 4, 8 and 16 while each chunk keeps at least 4 K steps and the
    programs stay within 4 waves."""
    tiles = -(-m // bm) * -(-n // bn)
    if tiles >= _SMS:
        return []
    return [s for s in (2, 4, 8, 16) if k >= 4 * bk * s and tiles * s <= 4 * _SMS]


def sizes_of(call) -> dict:
    """The integer arguments of a call (its problem sizes and strides), for people reading a file."""
    import torch
    return {n: v for n, v in zip(call.kernel.arg_names, call.args)
            if not torch.is_tensor(v) and isinstance(v, int) and not isinstance(v, bool)}


def candidates(call) -> list:
    """The configurations (launcher keywords) to try for `call`, the launcher's default first."""
    import torch
    name = call.kernel.__name__
    a = dict(zip(call.kernel.arg_names, call.args))
    k = call.constexprs
    default = pin_of(call)
    out = [default]
    if name in ("gemm_kernel", "conv2d_kernel"):
        x = call.args[0]
        wide = torch.is_tensor(x) and x.element_size() == 4
        if name == "gemm_kernel":
            m, n, kk = a["M"], a["N"], a["K"]
        else:
            m, n = a["NB"] * a["OH"] * a["OW"], a["CO"]
            kk = k["KH"] * k["KW"] * a["CI"] if k["FLAT_K"] else a["CI"]
        for bm, bn, bk, w, st in (_MMA_32 if wide else _MMA_16):
            if bm > max(64, _p2(m)) or bn > max(32, _p2(n)) or bk > max(16, _p2(kk)):
                continue            # a tile far past the problem only wastes the tensor cores
            cfg = dict(block_m=bm, block_n=bn, block_k=bk, group_m=default.get("group_m", 8), num_warps=w,
                       num_stages=st)
            if "flat_k" in default:
                cfg["flat_k"] = default["flat_k"]
            out.append(cfg)
            if name == "gemm_kernel":
                out += [dict(cfg, split=s) for s in split_ks(m, n, kk, bm, bn, bk)]
    elif name in ("pool2d_kernel", "lrn_kernel"):
        c = a["C"]
        for bp in (16, 32, 64, 128):
            for bc in sorted({min(_p2(c), x) for x in (16, 32, 64, 128)}):
                for w in (2, 4, 8):
                    if bp * bc <= 8192:
                        out.append(dict(block_p=bp, block_c=bc, num_warps=w))
    elif name == "elementwise_kernel":
        for blk in (512, 1024, 2048, 4096):
            for w in (4, 8):
                out.append(dict(block=blk, num_warps=w))
    else:
        return []
    seen, uniq = set(), []
    for cfg in out:
        t = tuple(sorted(cfg.items()))
        if t not in seen:
            seen.add(t)
            uniq.append(cfg)
    return uniq


# ------------------------------------------------------------------------------------ the tuner

class _ArenaPlacements:
    """Plan tensors as views of one real arena (the .so's layout at the compiled batch): the
    constant region, then the batch region where a buffer of s bytes per sample at per-sample
    offset o takes [o*B, (o+s)*B)."""

    def __init__(self, plan, arena, const_region: int):
        self.plan, self.arena, self.const_region = plan, arena, const_region
        self.batch = plan.batch
        self.by_tensor = {}
        self._workspace = None

    def workspace(self, numel: int):
        """fp32 scratch of a two-stage kernel (split-K) beside the arena, grown as needed."""
        import torch
        numel = max(int(numel), 1)
        if self._workspace is None or self._workspace.numel() < numel:
            self._workspace = torch.empty(numel, dtype=torch.float32, device=self.arena.device)
        return self._workspace[:numel]

    def meta(self, t):
        from ..memory.model import BATCH, CONSTANT, row_major
        if t.id in self.by_tensor:
            return self.by_tensor[t.id]
        dt = TORCH_DTYPES[t.dtype]
        buf = self.plan.buffers[t.buffer]
        fshape = tuple(t.feature_shape)
        fstr = tuple(t.strides) if t.strides is not None else row_major(fshape)
        if t.cls == BATCH:
            off = self.const_region + buf.offset * self.batch + t.offset
            shape, strides = (self.batch,) + fshape, (buf.size // t.itemsize,) + fstr
        elif t.cls == CONSTANT:
            off, shape, strides = buf.offset + t.offset, fshape, fstr
        else:
            raise NetcError(f"tensor '{t.name}' is time-sized; the CUDA target has no recurrent ops yet")
        isz = t.itemsize
        n = (self.arena.numel() - off) // isz
        v = self.arena[off:off + n * isz].view(dt).as_strided(shape, strides, 0)
        self.by_tensor[t.id] = v
        return v


def _event_timer(warmup: int, reps: int):
    import statistics
    import torch

    def run(fn) -> float:
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        evs = []
        for _ in range(reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            evs.append((s, e))
        torch.cuda.synchronize()
        return statistics.median(a.elapsed_time(b) for a, b in evs) * 1e3     # microseconds
    return run


def tune_network(module, net, plan, *, device="cuda", warmup: int = 5, reps: int = 25, timer=None,
                 max_candidates: int | None = None, progress=None) -> list:
    """Tuning-file entries for every distinct tunable specialization of a planned network, timed on
    `device` (the GPU; tests pass the CPU, Triton's interpreter and their own `timer`)."""
    import torch
    import triton
    from ..memory.model import BATCH
    low = lower_network(module, net, plan)
    const = const_region(plan)
    total = const + plan.arenas[BATCH].size * plan.batch
    halves = torch.empty((total + 1) // 2, dtype=torch.int16, device=device)
    arena = halves.view(torch.uint8)

    def fill():
        """Random but moderate values for f32, f16 and bf16 alike (every 16-bit half in [0x3C00,
        0x3F00]: 2^-7..0.5 as f32 and bf16, 1..1.75 as f16), refilled before each candidate so
        that in-place kernels (x = x * scale + shift, x += residual) run again and again on their
        own output do not drift to infinities."""
        halves.random_(0x3C00, 0x3F00)
    pl = _ArenaPlacements(plan, arena, const)
    tensors = {t.name: t for t in plan.tensors}
    tf32 = f32_products(net)
    timer = timer or _event_timer(warmup, reps)
    name = torch.cuda.get_device_name(device) if torch.device(device).type == "cuda" else str(device)
    if torch.device(device).type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        arch = major * 10 + minor
    else:
        arch = 0
    entries, seen = [], set()
    todo = [L for L in low.launches if L.call.kernel.__name__ in TUNED_KERNELS]
    for i, L in enumerate(todo):
        key = tuning_key(L.call)
        if key in seen:
            continue
        seen.add(key)
        members, copy = L.source
        cands = candidates(L.call)[:max_candidates]
        results = []
        for cfg in cands:
            try:
                calls = [c for c, _, _ in lower_calls(members, plan, tensors, pl, dict(cfg), tf32, copy)]
                fill()
                us = timer(lambda: [c.launch() for c in calls])     # every kernel of the group (split-K: two)
            except Exception as e:   # noqa: BLE001 - a launcher's refusal, a compile error, too much shared memory
                results.append((float("inf"), cfg, f"{type(e).__name__}: {str(e)[:200]}"))
                continue
            results.append((us, cfg, None))
        ok = [r for r in results if r[2] is None]
        if progress:
            progress(i + 1, len(todo), L, ok)
        if not ok:
            continue
        best = min(ok, key=lambda r: r[0])
        entries.append(dict(key=key, device=name, arch=arch, triton=triton.__version__, kernel=L.call.kernel.__name__,
                            layer=L.layers[0], sizes=sizes_of(L.call), config=best[1], us=round(best[0], 3),
                            default_us=round(results[0][0], 3) if results[0][2] is None else None,
                            candidates=len(ok), failed=[r[2] for r in results if r[2] is not None][:3]))
    return entries


def autotune(module, plans: dict, arch: int, path: str) -> list:
    """`netc compile --autotune`: time every kernel of the module's (one) network on this machine's GPU
    over tile sizes, warps and stages, merge the winners into the tuning file `path` and say what was
    gained (stderr; a progress line on a terminal). Returns the entries."""
    import sys

    import torch

    from .tuning_file import merge
    if not torch.cuda.is_available():
        raise NetcError("--autotune times kernels on a GPU, and torch sees none here: tune on a GPU machine, "
                        "then compile anywhere with --tuning FILE")
    major, minor = torch.cuda.get_device_capability()
    if major * 10 != arch:
        raise NetcError(f"--autotune: this GPU is sm_{major}{minor}, but the kernels are compiled for sm_{arch}; "
                        f"give --arch sm_{major}0")
    net = module.networks()[0]

    def progress(i, n, launch, ok):
        if sys.stderr.isatty():
            sys.stderr.write(f"\rtuning [{i}/{n}] {launch.layers[0][:40]:40s}")
    entries = tune_network(module, net, plans[net.attrs["sym_name"]], progress=progress)
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    merge(path, entries)
    faster = [e for e in entries if e["default_us"] and e["us"] < e["default_us"]]
    saved = sum(e["default_us"] - e["us"] for e in faster)
    sys.stderr.write(f"tuned {len(entries)} kernel specializations on {entries[0]['device'] if entries else 'the GPU'}: "
                     f"{len(faster)} faster than the default tiles ({saved:.0f} us saved per forward, summed "
                     f"over distinct kernels); wrote {path}\n")
    return entries
