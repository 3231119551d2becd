"""Shared pytest setup: the `--update-goldens` option (used by `make golden`), the interpreter
mode for tests that run netc's kernels on the CPU, and the AOT toolchain check."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

# One thread per test process: `make test` runs one xdist worker per core, and torch's own thread
# pool on top of that oversubscribes the cores (its tiny ops then slow down 10x and more).
os.environ.setdefault("OMP_NUM_THREADS", "1")
# The CPU target's forms without timing (runtime/cpu_tune.py: the first that allocates nothing): a test's result does
# not hang on which form a loaded machine timed fastest, and no test pays for the timing runs. tests/test_cpu_target.py
# forces every form against the reference; tests/test_cpu_tune.py times.
os.environ.setdefault("NETC_CPU_TUNE", "0")


def pytest_configure(config):
    import torch
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


# What depends on Triton's version, marked `triton_version`: the kernels under Triton's interpreter and
# compiled to cubins (tests/kernels/: every kernel, its training and 16-bit forms, through kernels/aot.py,
# the one place netc calls Triton's compiler), and 16-bit networks compiled whole. CI runs these again
# on the oldest Triton netc supports (.ci/triton_floor.sh: pytest -m triton_version); the rest of the suite uses Triton only through them. test_codegen.py,
# test_tuning.py and test_interp.py (the lowering cache, parallel compilation, tuning files, the
# interpreter target's programs) test netc's machinery around those kernels, the same on every Triton:
# they run once, on the newest (CI is CPU-bound).
TESTS = Path(__file__).resolve().parent
TRITON_VERSION_TESTS = ("kernels/", "test_dtype.py")


def pytest_collection_modifyitems(config, items):
    for item in items:
        try:
            rel = Path(str(item.fspath)).resolve().relative_to(TESTS).as_posix()
        except ValueError:
            continue
        if rel.startswith(TRITON_VERSION_TESTS):
            item.add_marker(pytest.mark.triton_version)
        if "sm80" in item.name or "sm_80" in item.name or "[80]" in item.name:
            item.add_marker(pytest.mark.sm80)


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite the expected outputs under tests/golden/ instead of comparing")


@pytest.fixture
def update_goldens(request) -> bool:
    return request.config.getoption("--update-goldens")


@pytest.fixture(scope="module")
def interp_mode():
    """netc.kernels under Triton's interpreter for this module (skipped when this process already
    imported them compiled; the module must set TRITON_INTERPRET=1 at collection)."""
    from netc.diagnostics import NetcError
    try:
        from netc.runtime.interp import ensure_interpreter
        ensure_interpreter()
    except NetcError as e:
        pytest.skip(str(e))


@pytest.fixture
def nvidia_toolchain():
    """A check(arch) that skips the test unless Triton's NVIDIA backend and an executable ptxas
    for sm_<arch> are there (and, with cc=True, a C compiler); returns ptxas' path."""
    def check(arch: int = 90, cc: bool = False) -> str:
        if cc and shutil.which("cc") is None:
            pytest.skip("needs a C compiler")
        try:
            import triton.backends.nvidia.compiler  # noqa: F401
            from netc.kernels.aot import ptxas_path
        except Exception as e:
            pytest.skip(f"Triton's NVIDIA backend is unavailable ({type(e).__name__}: {e})")
        path = ptxas_path(arch)
        if not path or not os.access(path, os.X_OK):
            pytest.skip(f"no executable ptxas for sm_{arch} (Triton looked for {path!r})")
        return path
    return check


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    """tests/data/fake_libcuda.c built: a CUDA driver that records what a library asks of it
    (NETC_LIBCUDA points a library at it)."""
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler")
    f = tmp_path_factory.mktemp("fake") / "libcuda_fake.so"
    src = Path(__file__).resolve().parent / "data" / "fake_libcuda.c"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(f), str(src)], check=True)
    return f
