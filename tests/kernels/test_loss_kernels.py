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


def saturated():
    """Logits of rows whose label is the max by 12-15 (rows 0, 1), or tied with it (rows 2, 3)."""
    gaps = torch.tensor([[0.0, -12.0, -14.0, -15.0, -13.0, -12.5, -14.5],
                         [-13.0, 0.0, -15.0, -14.0, -12.0, -13.5, -14.2],
                         [0.0, -13.0, -14.0, 0.0, -15.0, -12.0, -14.0],   # a tie: r = 1 + small
                         [-12.0, -13.0, 0.0, -14.0, -14.0, -15.0, 0.0]], dtype=torch.float64)
    x64 = gaps + torch.tensor([[3.0], [-20.0], [7.5], [0.0]], dtype=torch.float64)   # shift each row
    return x64.to(torch.float32), torch.tensor([0, 1, 0, 2])


@pytest.mark.parametrize("block_c", [None, 4], ids=["one_chunk", "chunks"])
@pytest.mark.parametrize("targets", ["indices", "one_hot"])
def test_softmax_loss_saturated_keeps_relative_precision(device, block_c, targets):
    """A confident, right net (issue 24: SINGA's MNIST MLP after one kAdam step): each row's loss is
    log(1 + r), r = sum over the other classes of exp(x_c - x_label), far below f32's epsilon next to 1.
    The kernel keeps r apart from the 1 (log1p): the loss within 1e-5 relative of the f64 value, where
    log(1 + r) rounded in f32 is off by up to eps / r (here ~1e-2). Ties with the max (rows 2, 3) are
    counted once. The max gap is 15, so every exp is far above f32's underflow."""
    x, labels = saturated()
    want = torch.nn.functional.cross_entropy(x.to(torch.float64), labels)   # exact for these f32 logits
    if targets == "one_hot":
        labels = torch.nn.functional.one_hot(labels, 7).to(torch.float32)
    got = softmax_loss(x.to(device), labels.to(device), out=poisoned(device), block_r=2, block_c=block_c)
    assert abs(got.item() - want.item()) <= 1e-5 * want.item(), (got.item(), want.item())
    # and the rows one at a time: the saturated rows alone (loss ~1e-6), where the error would show most
    for r in (0, 1):
        want_r = torch.nn.functional.cross_entropy(x[r:r + 1].to(torch.float64), labels[r:r + 1].argmax(-1)
                                                   if targets == "one_hot" else labels[r:r + 1])
        got_r = softmax_loss(x[r:r + 1].to(device), labels[r:r + 1].to(device), block_c=block_c)
        assert abs(got_r.item() - want_r.item()) <= 1e-5 * want_r.item(), (r, got_r.item(), want_r.item())


@pytest.mark.parametrize("block_c", [None, 4], ids=["one_chunk", "chunks"])
@pytest.mark.parametrize("targets", ["indices", "one_hot", "soft"])
def test_softmax_loss_grad_saturated_keeps_relative_precision(device, block_c, targets):
    """The gradient of the saturated rows: at the label, softmax - 1 = -r / (1 + r), tiny; computed as
    p - 1 in f32 it is off by up to eps / r relative. Every element within 1e-5 relative of the f64
    gradient (of these f32 logits), the other classes' tiny probabilities included."""
    from netc.kernels.loss_grad import softmax_loss_grad
    x, labels = saturated()
    x64 = x.to(torch.float64).requires_grad_(True)
    t = torch.nn.functional.one_hot(labels, 7).to(torch.float64)
    if targets == "soft":      # a target mass of 0.75 at the label: sum(t) = 1 stays exact in f32
        t = t * 0.75 + 0.25 * torch.nn.functional.one_hot((labels + 1) % 7, 7).to(torch.float64)
    loss = -(t * torch.log_softmax(x64, dim=1)).sum(1).mean()
    (want,) = torch.autograd.grad(loss, x64)
    arg = labels if targets == "indices" else t.to(torch.float32)
    got = softmax_loss_grad(x.to(device), arg.to(device), block_c=block_c).cpu().to(torch.float64)
    rel = ((got - want).abs() / want.abs()).max().item()
    assert rel <= 1e-5, (rel, got, want)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")], ids=["nan", "inf"])
def test_softmax_loss_and_grad_nan_logit_is_nan(device, bad):
    """A NaN or +inf logit makes its row's loss and gradient NaN (as torch's), never a finite number."""
    from netc.kernels.loss_grad import softmax_loss_grad
    x = torch.tensor([[1.0, bad, 0.5], [0.2, 0.1, 3.0]], device=device)
    labels = torch.tensor([0, 2], device=device)
    for block_c in (None, 2):
        assert torch.isnan(softmax_loss(x, labels, block_c=block_c))
        g = softmax_loss_grad(x, labels, block_c=block_c).cpu()
        assert torch.isnan(g[0]).all() and not torch.isnan(g[1]).any()
