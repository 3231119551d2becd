"""AOT compilation of kernel specializations with an on-disk cache.

Key: sha256 of (kernel source hash, i.e. Triton's JITFunction.cache_key, which covers the helper
@jit functions it calls; signature; constexprs; options; arch; triton version). Entries live in
$NETC_CACHE_DIR or ~/.cache/netc/kernels as <key>.cubin + <key>.json, written atomically.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass


@dataclass
class Cubin:
    name: str          # entry point
    cubin: bytes
    num_warps: int
    shared: int
    n_params: int      # PTX entry parameters (runtime parameters + Triton's 2 scratch pointers)
    params: list       # [(name, type)]
    cached: bool
    seconds: float
    key: str = ""      # its cache_key()


def cache_dir() -> str:
    d = os.environ.get("NETC_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "netc", "kernels")
    os.makedirs(d, exist_ok=True)
    return d


def cache_key(call, arch: int) -> str:
    import triton
    from ..kernels.aot import signature_of
    doc = dict(src=call.kernel.cache_key, fn=call.kernel.__name__, sig=signature_of(call),
               constexprs={k: list(v) if isinstance(v, tuple) else v for k, v in sorted(call.constexprs.items())},
               options=dict(sorted(compile_options(call).items())), arch=arch, triton=triton.__version__,
               aligned=sorted(set(call.aligned)))
    if call.divisible:
        doc["divisible"] = sorted(set(call.divisible))
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32]


def compile_options(call) -> dict:
    # explicit, so the cache key says it and Triton 3.9 does not warn about the changing default
    return {"enable_fp_fusion": True, **call.options}


def load_cached(key: str) -> Cubin | None:
    """The cached cubin of a cache_key(), or None."""
    d = cache_dir()
    t0 = time.perf_counter()
    try:
        with open(os.path.join(d, key + ".json")) as f:
            m = json.load(f)
        with open(os.path.join(d, key + ".cubin"), "rb") as f:
            blob = f.read()
        if len(blob) == m["cubin_bytes"]:
            return Cubin(m["name"], blob, m["num_warps"], m["shared"], m["n_params"],
                         [tuple(p) for p in m["params"]], True, time.perf_counter() - t0, key)
    except (OSError, ValueError, KeyError):
        pass
    return None


def compile_cached(call, arch: int) -> Cubin:
    import triton
    if not isinstance(call.kernel, triton.runtime.JITFunction):
        raise RuntimeError(f"{call.kernel.__name__} is not a compilable @triton.jit function (netc.kernels was "
                           f"imported with TRITON_INTERPRET=1 in this process)")
    key = cache_key(call, arch)
    d = cache_dir()
    meta_path, bin_path = os.path.join(d, key + ".json"), os.path.join(d, key + ".cubin")
    t0 = time.perf_counter()
    hit = load_cached(key)
    if hit is not None:
        return hit
    from ..kernels.aot import compile_call
    from ..kernels.common import KernelCall
    c2 = KernelCall(call.kernel, call.grid, call.args, call.constexprs, compile_options(call), aligned=call.aligned,
                    divisible=call.divisible)
    k = compile_call(c2, arch)
    if k.global_scratch_size:
        raise RuntimeError(f"{k.name} needs {k.global_scratch_size} bytes of global scratch; the launcher "
                           f"passes none")
    m = dict(name=k.name, num_warps=k.num_warps, shared=k.shared, n_params=k.n_params,
             params=[list(p) for p in k.params], cubin_bytes=len(k.cubin), arch=arch)
    atomic_write(bin_path, k.cubin)
    atomic_write(meta_path, json.dumps(m).encode())
    return Cubin(k.name, k.cubin, k.num_warps, k.shared, k.n_params, k.params, False, time.perf_counter() - t0, key)


_BATCH: list = []     # the calls of compile_many, inherited by its forked workers


def _compile_index(args) -> Cubin:
    i, arch = args
    return compile_cached(_BATCH[i], arch)


def compile_jobs() -> int:
    """How many processes compile kernels at once: $NETC_COMPILE_JOBS, else the CPUs this process
    may use (1: in this process)."""
    v = os.environ.get("NETC_COMPILE_JOBS")
    if v:
        try:
            return max(1, int(v))
        except ValueError:
            from ..diagnostics import NetcError
            raise NetcError(f"NETC_COMPILE_JOBS must be a whole number (processes compiling kernels), got {v!r}") \
                from None
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def compile_many(calls: list, arch: int, progress=None, labels=None) -> list:
    """compile_cached of every call, the cache misses in parallel (compile_jobs() forked processes,
    each compiling one specialization at a time; Triton's compiler holds the GIL for most of its
    work, so threads would not help). Returns the Cubins in the calls' order."""
    out: list = [None] * len(calls)
    todo = []
    for i, c in enumerate(calls):
        hit = load_cached(cache_key(c, arch))
        if hit is not None:
            out[i] = hit
            if progress:
                progress.step(labels[i] if labels else c.kernel.__name__)
        else:
            todo.append(i)
    jobs = min(compile_jobs(), len(todo))
    if jobs > 1 and hasattr(os, "fork"):
        import multiprocessing
        global _BATCH
        _BATCH = calls
        try:
            with multiprocessing.get_context("fork").Pool(jobs) as pool:
                for i, cub in zip(todo, pool.imap(_compile_index, [(i, arch) for i in todo])):
                    out[i] = cub
                    if progress:
                        progress.step(labels[i] if labels else calls[i].kernel.__name__)
        finally:
            _BATCH = []
        return out
    for i in todo:
        if progress:
            progress.step(labels[i] if labels else calls[i].kernel.__name__)
        out[i] = compile_cached(calls[i], arch)
    return out


def atomic_write(path: str, data: bytes):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


class Progress:
    """A one-line progress bar on stderr, only when stderr is a terminal."""

    def __init__(self, total: int, what: str, stream=None):
        self.total, self.what, self.n = total, what, 0
        self.stream = stream or sys.stderr
        self.on = total > 0 and getattr(self.stream, "isatty", lambda: False)()

    def step(self, label: str):
        self.n += 1
        if self.on:
            w = 30
            done = w * self.n // self.total
            self.stream.write(f"\r{self.what} [{'#' * done}{'.' * (w - done)}] {self.n}/{self.total} {label[:40]:40s}")
            self.stream.flush()

    def close(self):
        if self.on:
            self.stream.write("\n")
            self.stream.flush()
