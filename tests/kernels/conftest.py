"""Kernel tests run through Triton's CPU interpreter unless told otherwise.

TRITON_INTERPRET is read when a kernel is decorated, i.e. when netc.kernels' modules are first
imported, so it is set here, before any test module in this folder imports them. Set
TRITON_INTERPRET=0 on a machine with CUDA to run the same tests on the GPU, compiled.
"""
import os

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")


def _kernel_device():
    try:
        import triton  # noqa: F401
    except Exception as e:  # pragma: no cover - depends on the environment
        return None, f"triton cannot be imported ({type(e).__name__}: {e})"
    import torch

    from netc.kernels.common import INTERPRETING
    if INTERPRETING:
        return _interpreter_works()
    if torch.cuda.is_available():
        return "cuda", None
    return None, ("netc.kernels was imported without TRITON_INTERPRET=1 (compiled for a GPU) "
                  "and there is no CUDA device")


_PROBE = []


def _interpreter_works():
    """Run a one-loop kernel: triton 3.6's interpreter fails on NumPy >= 2.4 (it calls int() on
    1-element arrays for runtime loop bounds), which would fail every kernel test the same way."""
    if not _PROBE:
        import numpy
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def probe(x_ptr, n, BLOCK: tl.constexpr):
            acc = tl.zeros((BLOCK,), dtype=tl.float32)
            for i in range(0, n, 1):
                acc += 1.0
            tl.store(x_ptr + tl.arange(0, BLOCK), acc)

        x = torch.zeros(4)
        try:
            probe[(1,)](x, 3, BLOCK=4)
            ok = bool((x == 3).all())
            why = None if ok else "Triton's interpreter computed a wrong loop in a probe kernel"
        except Exception as e:
            why = (f"Triton {triton.__version__}'s interpreter does not run on NumPy {numpy.__version__} "
                   f"({type(e).__name__}: {str(e)[:120]}); use a newer Triton or an older NumPy")
        _PROBE.append(("cpu", None) if why is None else (None, why))
    return _PROBE[0]


@pytest.fixture(scope="session")
def device():
    """Where kernel tests put their tensors: 'cpu' under the interpreter, 'cuda' when compiled."""
    dev, why = _kernel_device()
    if dev is None:
        pytest.skip(why)
    return dev


@pytest.fixture(autouse=True)
def _gpu_only(request):
    """Tests marked @pytest.mark.gpu run only with real compiled kernels on a CUDA device."""
    if request.node.get_closest_marker("gpu"):
        dev, why = _kernel_device()
        if dev != "cuda":
            pytest.skip(why or "needs a CUDA GPU and compiled kernels (TRITON_INTERPRET=0)")


@pytest.fixture
def rng():
    import torch
    return torch.Generator().manual_seed(1234)
