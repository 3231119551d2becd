"""netc's kernels run on every supported Triton's interpreter: Triton 3.6's turns a runtime scalar
into a loop bound with int() of a 1-element 1-D array, which NumPy >= 2.4 refuses; netc.kernels.common
makes it squeeze first (as later Triton does). These tests pin that on whatever Triton is installed."""
import operator

import numpy as np
import pytest

pytest.importorskip("triton")
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from netc.kernels import common  # noqa: E402


@triton.jit
def _count(x_ptr, n, step, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(0, n * 2, step):   # a bound computed from runtime arguments
        acc += 1.0
    tl.store(x_ptr + tl.arange(0, BLOCK), acc)


def test_runtime_loop_bounds(device):
    x = torch.zeros(8, device=device)
    _count[(1,)](x, 5, 3, BLOCK=8)
    assert (x.cpu() == 4.0).all()   # range(0, 10, 3): 0, 3, 6, 9


def test_scalar_index_of_a_one_element_array(device):
    if not bool(common.INTERPRETING):
        pytest.skip("compiled kernels: no interpreter to patch")
    from triton.runtime import interpreter
    assert getattr(interpreter._patch_lang_tensor, "netc_squeezes_index", False)
    scope = interpreter._LangPatchScope()
    before = getattr(tl.tensor, "__index__", None)
    interpreter._patch_lang_tensor(tl.tensor, scope)
    try:
        t = tl.tensor(interpreter.TensorHandle(np.array([7], dtype=np.int32), tl.int32), tl.int32)
        assert operator.index(t) == 7
        assert list(range(t)) == list(range(7))
    finally:
        scope.restore()
    assert getattr(tl.tensor, "__index__", None) is before   # the launch's patches are all undone
