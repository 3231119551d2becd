"""The CPU target's choice among equivalent forms of one op (issue 28), measured once per shape: what cuDNN's benchmark
mode does for a GPU, for the convolutions of the generated step (runtime/cpu_emit.py).

torch's CPU convolutions run as oneDNN's on channels_last or on contiguous NCHW tensors, or as im2col and a GEMM
(torch's "slow" convolution), and which is fastest depends on the shape, the thread count and the machine: on 2 cores
of one machine LeNet's second convolution ran in 1.2 ms as im2col against 1.4 ms on oneDNN, and its first
convolution's filter gradient in 0.42 ms on NCHW copies against 0.77 ms on channels_last views. Every form computes
the same function (tests/test_cpu_target.py checks each against the reference); only the time differs.

    choice = fastest(key, {"cl": fn, "nchw": fn, ...}, env)

times each candidate (a function running the op's lines on the build-time arena views) -- five times, interleaved,
after a warm-up call, the best of each -- and returns the fastest candidate's name. Where some candidates allocate
nothing (oneDNN writing into the arena, a pooling as maxima of strided views), the choice is among those that run on
the shape: the step runs in its planned arena, and a result allocated beside it is memory on top of the plan (on this
machine's benchmark networks the in-place forms were within 10% of the fastest, bench/cpu.py). Choices are remembered per
process and on disk ($NETC_CACHE_DIR/cpu-tuning.json, else ~/.cache/netc/cpu-tuning.json), keyed by the op's shapes,
strides, torch's version, the thread count and the processor, so a network is tuned once per machine.

NETC_CPU_TUNE=0 turns tuning off (the first candidate that allocates nothing, else the first: channels_last oneDNN); NETC_CPU_TUNE=<name> forces a
candidate wherever it is one (the tests run every form this way). A form that raises on a shape (torch's slow
convolution refuses channels_last operands) is no candidate there: the next one runs.
"""
from __future__ import annotations

import json
import os
import platform
import time

import torch

_MEMO: dict = {}
ROUNDS = 5          # timed runs of each candidate (after its warm-up run), interleaved
# the forms runtime/cpu_emit.py offers (a convolution's gradient: the first two; an inference max pooling: "copy" and
# "pairwise")
FORMS = ("cl", "nchw", "im2col", "into", "copy", "pairwise")


def _path() -> str:
    d = os.environ.get("NETC_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "netc")
    return os.path.join(d, "cpu-tuning.json")


def _disk() -> dict:
    try:
        with open(_path()) as f:
            got = json.load(f)
        return got if isinstance(got, dict) else {}
    except (OSError, ValueError):
        return {}


def _save(key: str, name: str) -> None:
    """The choice into the disk cache (read, update, written atomically; a cache that cannot be written is skipped)."""
    path = _path()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = _disk()
        data[key] = name
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(data, f, indent=0, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        pass


# the rule that makes a choice (which candidates compete, how they are timed): a cached choice made by another rule
# is made again
RULE = 2


def machine_key() -> str:
    return (f"rule {RULE}, torch {torch.__version__}, {torch.get_num_threads()} threads, {platform.machine()} "
            f"{_processor()}")


def _processor() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _runs(fn, last: bool) -> bool:
    """Whether a form runs on this shape (torch's slow convolution, where oneDNN does not take a shape, refuses
    channels_last operands, for one): the last one left is run without that guard, so its error is the op's."""
    if last:
        fn()
        return True
    try:
        fn()
    except RuntimeError:
        return False
    return True


def _time(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def fastest(key: str, candidates: dict, allocation_free=()) -> str:
    """The name of the fastest of `candidates` ({name: a function of no arguments}), the first one first; see the
    module docstring for NETC_CPU_TUNE and the caches. `allocation_free`: the candidates that allocate nothing (they
    write into the arena): where one of them runs on this shape, the choice is among them."""
    names = list(candidates)
    free = [n for n in names if n in allocation_free]
    mode = os.environ.get("NETC_CPU_TUNE", "1")
    if mode not in ("0", "1") + FORMS:
        from ..diagnostics import NetcError
        raise NetcError(f"NETC_CPU_TUNE={mode!r}: expected 0 (no tuning), 1 (tuning, the default) or a form to force "
                        f"({', '.join(FORMS)})")
    if mode == "0" or len(names) == 1 or mode in candidates:
        # the forced form (NETC_CPU_TUNE=<name>) or the first, where it runs on this shape: the next that does else
        order = [mode] + [n for n in names if n != mode] if mode in candidates else \
            free + [n for n in names if n not in free]
        return next(n for n in order if _runs(candidates[n], n == order[-1]))
    full = f"{key} | {' '.join(names)} | {machine_key()}"
    if full in _MEMO:
        return _MEMO[full]
    known = _disk().get(full)
    if known in candidates:
        _MEMO[full] = known
        return known
    best: dict = {}
    for n in free:
        if _runs(candidates[n], False):     # warm-up: oneDNN builds its primitive
            best[n] = float("inf")
    for n in ([] if best else names):
        if _runs(candidates[n], n == names[-1] and not best):
            best[n] = float("inf")
    names = list(best)
    for _ in range(ROUNDS):                      # interleaved, the best of each: a moment's load falls on one run
        for n in names:
            best[n] = min(best[n], _time(candidates[n]))
    choice = min(names, key=lambda n: (best[n], names.index(n)))
    _MEMO[full] = choice
    _save(full, choice)
    return choice
