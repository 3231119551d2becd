"""lrn (across channels) and softmax (rows of the flattened features) against the float64
reference. Outputs are NaN-poisoned."""
import pytest

pytest.importorskip("triton", reason="Triton is not importable; kernel tests need it")

import torch  # noqa: E402

from netc.ops import reference as R  # noqa: E402
from netc.kernels.lrn import lrn  # noqa: E402
from netc.kernels.softmax import softmax  # noqa: E402

NAN = float("nan")


def randn(gen, *shape, dtype=torch.float32, device="cpu"):
    return torch.randn(*shape, generator=gen).to(dtype).to(device)


@pytest.mark.parametrize("c,local_size", [(5, 1), (5, 3), (5, 7), (13, 5), (1, 5)])
def test_lrn(device, rng, c, local_size):
    x = randn(rng, 3, 7, 13, c, device=device) * 3
    out = torch.full(x.shape, NAN, device=device)
    y = lrn(x, local_size, 0.05, 0.75, 2.0, out=out, block_p=64, block_c=4)
    R.check(y, R.lrn(x, local_size, 0.05, 0.75, 2.0))


def test_lrn_alexnet_defaults_and_default_blocks(device, rng):
    x = randn(rng, 2, 5, 6, 17, device=device) * 10
    R.check(lrn(x, 5, 1e-4, 0.75, 1.0), R.lrn(x, 5, 1e-4, 0.75, 1.0))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_lrn_half_precision(device, rng, dtype):
    x = randn(rng, 2, 3, 5, 11, dtype=dtype, device=device)
    out = torch.full(x.shape, NAN, dtype=dtype, device=device)
    R.check(lrn(x, 5, 0.1, 0.75, 1.0, out=out, block_c=8), R.lrn(x, 5, 0.1, 0.75, 1.0), dtype)


def test_lrn_channel_slices(device, rng):
    big = randn(rng, 2, 3, 4, 12, device=device)
    x = big[..., 4:11]
    buf = torch.full((2, 3, 4, 10), NAN, device=device)
    lrn(x, 3, 0.5, 0.75, 1.0, out=buf, out_channel_offset=2, block_p=8, block_c=4)
    R.check(buf[..., 2:9], R.lrn(x, 3, 0.5, 0.75, 1.0))
    assert torch.isnan(buf[..., :2]).all() and torch.isnan(buf[..., 9:]).all()


def test_lrn_rejects_even_window(device):
    with pytest.raises(ValueError, match="odd"):
        lrn(torch.ones(1, 4, device=device), 4)


@pytest.mark.parametrize("shape,block_n", [((1, 1), 16), ((3, 7), 16), ((5, 1000), 64), ((2, 3, 5, 7), 32)],
                         ids=str)
def test_softmax(device, rng, shape, block_n):
    x = randn(rng, *shape, device=device) * 5
    out = torch.full((shape[0], x[0].numel()), NAN, device=device)
    R.check(softmax(x, out=out, block_n=block_n), R.softmax(x))


def test_softmax_is_stable(device, rng):
    """Huge logits (exp would overflow), -inf entries, and a row whose max comes late."""
    x = randn(rng, 4, 77, device=device) * 1000
    x[1, :70] = float("-inf")
    x[2, 76] = 5e4
    R.check(softmax(x, block_n=16), R.softmax(x))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_softmax_half_precision(device, rng, dtype):
    x = randn(rng, 3, 45, dtype=dtype, device=device)
    out = torch.full((3, 45), NAN, dtype=dtype, device=device)
    R.check(softmax(x, out=out, block_n=16), R.softmax(x), dtype)
    R.check(softmax(x, out_dtype=torch.float32), R.softmax(x))


def test_softmax_default_block(device, rng):
    x = randn(rng, 2, 1000, device=device)
    y = softmax(x)
    R.check(y, R.softmax(x))
    assert torch.allclose(y.double().sum(1), torch.ones(2, dtype=torch.float64, device=device))
