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
        # Triton 3.6's interpreter on NumPy >= 2.4 included: netc.kernels.common makes its loop bounds work
        return "cpu", None
    if torch.cuda.is_available():
        return "cuda", None
    return None, ("netc.kernels was imported without TRITON_INTERPRET=1 (compiled for a GPU) "
                  "and there is no CUDA device")


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
