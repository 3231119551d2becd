"""softmax_loss (class indices of several integer dtypes, one-hot and soft targets) and
euclidean_loss against the float64 reference: odd batch and class counts, tiles smaller than the
problem (several row tiles and feature chunks), strided rows, 16-bit logits. The output scalar is
NaN-poisoned."""
import pytest

pytest.importorskip("triton", reason="Triton is not importable; kernel tests need it")

import torch  # noqa: E402

from netc.ops import reference as R  # noqa: E402
from netc.kernels.loss import euclidean_loss, softmax_loss  # noqa: E402

NAN = float("nan")


def randn(gen, *shape, dtype=torch.float32, device="cpu"):
    return torch.randn(*shape, generator=gen).to(dtype).to(device)


def poisoned(device, dtype=torch.float32):
    return torch.full((), NAN, dtype=dtype, device=device)


@pytest.mark.parametrize("n,c,block_r,block_c", [(1, 1, None, None), (1, 10, 1, 4), (7, 10, 2, 4),
                                                 (13, 37, 4, 8), (5, 1000, None, None)], ids=str)
@pytest.mark.parametrize("ldt", [torch.int32, torch.int64, torch.int8], ids=str)
def test_softmax_loss_class_indices(device, rng, n, c, block_r, block_c, ldt):
    x = randn(rng, n, c, device=device) * 4
    labels = torch.randint(0, min(c, 127), (n,), generator=rng).to(ldt).to(device)
    out = poisoned(device)
    R.check(softmax_loss(x, labels, out=out, block_r=block_r, block_c=block_c), R.softmax_loss(x, labels))


def test_softmax_loss_labels_n1_and_nhwc_logits(device, rng):
    """[N, 1] labels and [N, H, W, C] logits flattened to rows, as SoftmaxLoss after a conv."""
    x = randn(rng, 3, 2, 3, 5, device=device)
    labels = torch.randint(0, 30, (3, 1), generator=rng, dtype=torch.int32).to(device)
    R.check(softmax_loss(x, labels, out=poisoned(device), block_c=8), R.softmax_loss(x, labels))


@pytest.mark.parametrize("soft", [False, True])
def test_softmax_loss_targets(device, rng, soft):
    n, c = 6, 11
    x = randn(rng, n, c, device=device) * 3
    if soft:
        y = torch.softmax(randn(rng, n, c), dim=1).to(device)
    else:
        y = torch.nn.functional.one_hot(torch.randint(0, c, (n,), generator=rng), c).to(torch.int32).to(device)
    R.check(softmax_loss(x, y, out=poisoned(device), block_r=4, block_c=4), R.softmax_loss(x, y))


def test_softmax_loss_float_labels_and_strided_rows(device, rng):
    """SINGA feeds labels as floats; the logits are every other row of a wider buffer."""
    big = randn(rng, 9, 16, device=device) * 2
    x = big[:, 3:13]                      # rows of 10 features, row stride 16
    labels = torch.tensor([0, 9, 3, 3, 7, 1, 2, 8, 5], dtype=torch.float32, device=device)
    R.check(softmax_loss(x, labels, out=poisoned(device), block_r=2, block_c=4), R.softmax_loss(x, labels))


def test_softmax_loss_is_stable(device, rng):
    x = randn(rng, 4, 50, device=device) * 1000
    x[1, 7] = 8e4
    labels = torch.tensor([0, 7, 49, 3], device=device)
    R.check(softmax_loss(x, labels, block_c=16), R.softmax_loss(x, labels))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_softmax_loss_half_precision_logits(device, rng, dtype):
    x = randn(rng, 5, 21, dtype=dtype, device=device)
    labels = torch.randint(0, 21, (5,), generator=rng).to(device)
    y = softmax_loss(x, labels, out=poisoned(device), block_c=8)
    assert y.dtype == torch.float32
    R.check(y, R.softmax_loss(x, labels), dtype)


def test_softmax_loss_bad_label_is_nan(device, rng):
    """A class index outside [0, C) is not read past the row: the loss says NaN."""
    x = randn(rng, 3, 4, device=device)
    y = softmax_loss(x, torch.tensor([1, 4, 0], device=device))
    assert torch.isnan(y)


def test_softmax_loss_rejects_bad_shapes(device):
    with pytest.raises(ValueError, match="batch"):
        softmax_loss(torch.ones(3, 4, device=device), torch.zeros(2, dtype=torch.int32, device=device))
    with pytest.raises(ValueError, match="class indices"):
        softmax_loss(torch.ones(3, 4, device=device), torch.zeros(3, 2, dtype=torch.int32, device=device))


@pytest.mark.parametrize("xs,ys,block_r,block_c", [((1, 1), (1, 1), None, None), ((5, 7), (5, 7), 2, 4),
                                                   ((3, 2, 2, 5), (3, 20), 2, 8), ((17, 300), (17, 300), None, None)],
                         ids=str)
def test_euclidean_loss(device, rng, xs, ys, block_r, block_c):
    x, y = randn(rng, *xs, device=device), randn(rng, *ys, device=device)
    R.check(euclidean_loss(x, y, out=poisoned(device), block_r=block_r, block_c=block_c), R.euclidean_loss(x, y))


def test_euclidean_loss_half_precision(device, rng):
    x = randn(rng, 4, 33, dtype=torch.float16, device=device)
    y = randn(rng, 4, 33, dtype=torch.float16, device=device)
    R.check(euclidean_loss(x, y, out=poisoned(device), block_c=16), R.euclidean_loss(x, y), torch.float16)


def test_euclidean_loss_rejects_mismatch(device):
    with pytest.raises(ValueError, match="same batch"):
        euclidean_loss(torch.ones(3, 4, device=device), torch.ones(3, 5, device=device))
