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
               options=dict(sorted(compile_options(call).items())), arch=arch, triton=triton.__version__)
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
    c2 = KernelCall(call.kernel, call.grid, call.args, call.constexprs, compile_options(call))
    k = compile_call(c2, arch)
    if k.global_scratch_size:
        raise RuntimeError(f"{k.name} needs {k.global_scratch_size} bytes of global scratch; the launcher "
                           f"passes none")
    m = dict(name=k.name, num_warps=k.num_warps, shared=k.shared, n_params=k.n_params,
             params=[list(p) for p in k.params], cubin_bytes=len(k.cubin), arch=arch)
    _atomic_write(bin_path, k.cubin)
    _atomic_write(meta_path, json.dumps(m).encode())
    return Cubin(k.name, k.cubin, k.num_warps, k.shared, k.n_params, k.params, False, time.perf_counter() - t0, key)


def _atomic_write(path: str, data: bytes):
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
