"""Elementwise chains (one pass, constexpr op sequence) against the float64 reference: every op
kind, netc's elementwise sum/product/max, the unary wrappers, batch norm, in-place, slices and dtypes.
Outputs are NaN-poisoned."""
import pytest

pytest.importorskip("triton", reason="Triton is not importable; kernel tests need it")

import torch  # noqa: E402

from netc.kernels import elementwise as E  # noqa: E402
from netc.ops import reference as R  # noqa: E402

NAN = float("nan")


def randn(gen, *shape, dtype=torch.float32, device="cpu"):
    return torch.randn(*shape, generator=gen).to(dtype).to(device)


def poisoned_like(x, dtype=None):
    return torch.full(x.shape, NAN, dtype=dtype or x.dtype, device=x.device)


def test_chain_every_op(device, rng):
    x = randn(rng, 3, 7, 13, 5, device=device)
    r, q = randn(rng, 3, 7, 13, 5, device=device), randn(rng, 3, 7, 13, 5, device=device)
    sc, sh, v = randn(rng, 5, device=device), randn(rng, 5, device=device), randn(rng, 5, device=device)
    ops = [("add", r), ("scale_shift", sc, sh), "relu", ("mul", q), ("max", r), ("add", 0.5), ("mul", -2.0),
           ("max", -1.0), "tanh", ("leaky_relu", 0.1), ("mul", v), ("max", v), ("add", v), "sigmoid",
           ("scale_shift", 3.0, -1.0)]
    y = E.elementwise_chain(x, ops, out=poisoned_like(x), block=256)
    R.check(y, R.elementwise_chain(x, ops))


@pytest.mark.parametrize("operation", ["sum", "product", "max"])
def test_netc_elementwise(device, rng, operation):
    xs = [randn(rng, 1, 7, 13, 3, device=device) for _ in range(3)]
    y = E.elementwise(operation, xs, out=poisoned_like(xs[0]), block=64)
    R.check(y, R.elementwise(operation, xs))


def test_unary_wrappers_odd_sizes(device, rng):
    for shape in [(1,), (7,), (3, 5, 7, 1), (2, 13)]:
        x = randn(rng, *shape, device=device) * 4
        R.check(E.relu(x, out=poisoned_like(x), block=32), R.relu(x))
        R.check(E.relu(x, 0.3, out=poisoned_like(x), block=32), R.relu(x, 0.3))
        R.check(E.sigmoid(x, out=poisoned_like(x), block=32), R.sigmoid(x))
        R.check(E.tanh(x, out=poisoned_like(x), block=32), R.tanh(x))


def test_batch_norm(device, rng):
    x = randn(rng, 2, 3, 5, 7, device=device)
    sc, sh = randn(rng, 7, device=device), randn(rng, 7, device=device)
    R.check(E.batch_norm(x, sc, sh, out=poisoned_like(x), block=64), R.batch_norm(x, sc, sh))


def test_in_place(device, rng):
    x = randn(rng, 4, 9, device=device)
    r = randn(rng, 4, 9, device=device)
    ref = R.elementwise_chain(x, [("add", r), "relu"])
    y = E.elementwise_chain(x, [("add", r), "relu"], out=x, block=16)
    assert y.data_ptr() == x.data_ptr()
    R.check(x, ref)


def test_slices(device, rng):
    """Operands and output as channel slices of wider buffers (zero-copy concat)."""
    a = randn(rng, 2, 3, 4, 10, device=device)
    b = randn(rng, 2, 3, 4, 6, device=device)
    x, r = a[..., 1:6], b[..., :5]
    buf = torch.full((2, 3, 4, 8), NAN, device=device)
    E.elementwise_chain(x, [("add", r), "relu"], out=buf, out_channel_offset=3, block=32)
    R.check(buf[..., 3:8], R.elementwise_chain(x, [("add", r), "relu"]))
    assert torch.isnan(buf[..., :3]).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision(device, rng, dtype):
    x, r = randn(rng, 3, 7, 5, dtype=dtype, device=device), randn(rng, 3, 7, 5, dtype=dtype, device=device)
    sc, sh = randn(rng, 5, device=device), randn(rng, 5, device=device)   # fp32 BN vectors
    ops = [("add", r), ("scale_shift", sc, sh), "sigmoid"]
    R.check(E.elementwise_chain(x, ops, out=poisoned_like(x), block=64), R.elementwise_chain(x, ops), dtype)
    R.check(E.elementwise_chain(x, ops, out=poisoned_like(x, torch.float32), block=64), R.elementwise_chain(x, ops))


def test_encoding_and_limits(device, rng):
    x = randn(rng, 2, 3, device=device)
    ts = [randn(rng, 2, 3, device=device) for _ in range(5)]
    codes, args, tensors, vectors = E.encode_chain(x, [("add", ts[0]), ("mul", ts[0]), "relu", ("max", 2.0)])
    assert codes == (E.TENSOR_OP, E.TENSOR_OP + 1, E.RELU, E.CONST_OP + 2)
    assert args == (0, 0, 0, 2.0) and len(tensors) == 1 and not vectors   # same tensor -> same slot
    with pytest.raises(ValueError, match="at most 4"):
        E.encode_chain(x, [("add", t) for t in ts])
    with pytest.raises(ValueError, match="operand"):
        E.encode_chain(x, [("add", randn(rng, 4, device=device))])
    with pytest.raises(ValueError, match="bad elementwise op"):
        E.encode_chain(x, ["gelu"])
    # an empty chain is a copy
    R.check(E.elementwise_chain(x, [], out=poisoned_like(x)), x.double())


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_integer_copies_are_exact(device, dtype):
    """Integer tensors (class labels a partitioned program gathers) are copied bit for bit, also past
    2^24 where a float32 round trip would round; into a strided slice, and never converted to floats."""
    from netc.kernels.lowering import copy_spec

    class Ctx:
        batch, pin = 4, {}
    big = 2 ** 30 + 1 if dtype == torch.int32 else 2 ** 53 + 1
    src = torch.tensor([[big, -7, 3], [0, big - 2, 1], [5, 6, 7], [8, 9, -big]], dtype=dtype, device=device)
    buf = torch.full((4, 5), -1, dtype=dtype, device=device)
    spec = copy_spec(Ctx(), src, buf[:, 1:4])
    spec.call.launch()
    assert torch.equal(buf[:, 1:4], src) and (buf[:, 0] == -1).all() and (buf[:, 4] == -1).all()
    with pytest.raises(TypeError, match="does not convert between integers and floats"):
        E.narrow(src, 0, 0, 4, out=torch.zeros(4, 3, device=device))
