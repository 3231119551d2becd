"""The sequence kernels (netc/kernels/sequence.py: one_hot, seq_pool, seq_pool_grad) and the masked /
per-step forms of the loss kernels (kernels/loss.py, loss_grad.py with lengths) against the ops' float64
references (netc/ops/embedding.py, ops/sequence.py, ops/loss.py) under Triton's interpreter, on odd
shapes: T = 1, B = 1, F off the tiles, tiles smaller than the problem (several programs and steps),
lengths of 1 and T, i32 and i64 ids and lengths, ties in max, a column slice of a wider output, 16-bit
inputs. Outputs are NaN-poisoned, so every element a kernel must write is checked."""
import pytest

pytest.importorskip("triton", reason="Triton is not importable; kernel tests need it")

import torch  # noqa: E402

from netc.kernels.loss import euclidean_loss, softmax_loss  # noqa: E402
from netc.kernels.loss_grad import euclidean_loss_grad, softmax_loss_grad  # noqa: E402
from netc.kernels.sequence import one_hot, seq_pool, seq_pool_grad  # noqa: E402
from netc.ops import lookup  # noqa: E402
from netc.ops import reference as R  # noqa: E402

NAN = float("nan")
MODES = ("last", "first", "max", "mean")


def _ref(name, attrs, ins):
    return lookup(name).reference(attrs, [t.cpu() if t is not None else None for t in ins], {})


def _lengths(gen, t, b, dtype, device):
    n = torch.randint(1, t + 1, (b,), generator=gen)
    n[0] = t                        # one full-length sequence, and (B > 1) one of length 1
    if b > 1:
        n[-1] = 1
    return n.to(dtype).to(device)


@pytest.mark.parametrize("shape,ids_dtype,on_value,blocks", [
    ((1,), torch.int32, 1.0, (None, None)), ((3, 2), torch.int64, 3.0, (2, 4)), ((2, 3, 4), torch.int32, -0.5, (4, 2)),
], ids=str)
@pytest.mark.parametrize("depth", [1, 7, 130])
def test_one_hot(device, rng, shape, ids_dtype, on_value, blocks, depth):
    ids = torch.randint(0, depth, shape, generator=rng).to(ids_dtype).to(device)
    out = torch.full(shape + (depth,), NAN, device=device)
    got = one_hot(ids, depth, on_value, out=out, block_m=blocks[0], block_n=blocks[1])
    R.check(got, _ref("netc.one_hot", {"depth": depth, "on_value": on_value, "name": "o"}, [ids]))


def test_one_hot_slice_and_bad_ids(device):
    """A column slice of a wider buffer; an id outside [0, depth) reads a zero row (kernels cannot raise)."""
    ids = torch.tensor([0, 4, -1, 2], dtype=torch.int32, device=device)
    wide = torch.full((4, 9), NAN, device=device)
    one_hot(ids, 4, 2.0, out=wide[:, 3:7])
    want = torch.tensor([[2, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 2, 0]], dtype=torch.float32)
    assert torch.equal(wide[:, 3:7].cpu(), want)
    assert torch.isnan(wide[:, :3]).all() and torch.isnan(wide[:, 7:]).all()
    with pytest.raises(TypeError):
        one_hot(ids.float(), 4)
    with pytest.raises(ValueError):
        one_hot(ids, 0)


@pytest.mark.parametrize("t,b,feat,blocks", [
    (1, 1, (1,), (None, None)), (5, 3, (7,), (2, 4)), (4, 1, (2, 3), (1, 2)), (3, 6, (130,), (None, None)),
], ids=str)
@pytest.mark.parametrize("with_lengths", [False, True], ids=["all", "lengths"])
@pytest.mark.parametrize("mode", MODES)
def test_seq_pool_and_grad(device, rng, t, b, feat, blocks, with_lengths, mode):
    x = torch.randn((t, b) + feat, generator=rng)
    x.reshape(t, b, -1)[-1] = x.reshape(t, b, -1)[0]     # a tie between the first and the last step (max)
    x = x.to(device)
    n = _lengths(rng, t, b, torch.int32 if t % 2 else torch.int64, device) if with_lengths else None
    dy = torch.randn((b,) + feat, generator=rng).to(device)
    ins = [x] + ([n] if n is not None else [])
    out = torch.full((b,) + feat, NAN, device=device)
    R.check(seq_pool(x, n, mode, out=out, block_m=blocks[0], block_n=blocks[1]),
            _ref("netc.seq_pool", {"mode": mode, "name": "p"}, ins))
    dx = torch.full(tuple(x.shape), NAN, device=device)
    R.check(seq_pool_grad(x, n, dy, mode, out=dx, block_m=blocks[0], block_n=blocks[1]),
            _ref("netc.seq_pool_grad", {"mode": mode}, ins + [dy]))


def test_seq_pool_bf16_and_bad_arguments(device, rng):
    x = torch.randn(4, 3, 5, generator=rng).to(torch.bfloat16).to(device)
    n = torch.tensor([4, 2, 1], dtype=torch.int32, device=device)
    got = seq_pool(x, n, "mean")
    assert got.dtype == torch.bfloat16
    R.check(got, _ref("netc.seq_pool", {"mode": "mean", "name": "p"}, [x, n]))
    with pytest.raises(ValueError, match="mode"):
        seq_pool(x, n, "median")
    with pytest.raises(ValueError, match="lengths"):
        seq_pool(x, n[:2], "last")
    with pytest.raises(TypeError, match="lengths"):
        seq_pool(x, n.float(), "last")
    with pytest.raises(ValueError, match="dy"):
        seq_pool_grad(x, n, torch.zeros(3, 4, device=device), "max")


@pytest.mark.parametrize("t,b,c,blocks", [(1, 1, 1, (None, None)), (5, 3, 6, (2, 4)), (3, 7, 37, (4, 8))], ids=str)
@pytest.mark.parametrize("labels", ["ids", "ids1", "soft"])
def test_masked_softmax_loss_and_grad(device, rng, t, b, c, blocks, labels):
    if c == 1 and labels == "soft":
        pytest.skip("one class: [T, B, 1] labels are class indices")
    x = (torch.randn(t, b, c, generator=rng) * 3).to(device)
    n = _lengths(rng, t, b, torch.int64, device)
    if labels == "soft":
        y = ry = torch.softmax(torch.randn(t, b, c, generator=rng), -1).to(device)
    else:
        ry = torch.randint(0, c, (t, b) + ((1,) if labels == "ids1" else ()), generator=rng, dtype=torch.int32)
        y = ry.clone()
        if t > 1 and b > 1:     # step T-1 of the last sample (length 1) is padding: the kernels never read its label
            y.reshape(t, b)[t - 1, b - 1] = c + 5
        ry, y = ry.to(device), y.to(device)
    seed = torch.tensor(1.5, device=device)
    R.check(softmax_loss(x, y, n, out=torch.full((), NAN, device=device), block_r=blocks[0], block_c=blocks[1]),
            _ref("netc.softmax_loss", {"name": "l"}, [x, ry, n]))
    for s in (None, seed):
        out = torch.full(tuple(x.shape), NAN, device=device)
        R.check(softmax_loss_grad(x, y, s, n, out=out, block_c=blocks[1], block_l=2),
                _ref("netc.softmax_loss_grad", {"lengths": True, "name": "l"}, [x, ry, n] + ([s] if s is not None else [])))


def test_per_step_softmax_loss_is_the_per_sample_kernel_over_steps(device, rng):
    """Without lengths, a per-step loss (labels [T, B]) is the per-sample kernels on [T*B, C] rows (views)."""
    x, y = torch.randn(4, 3, 5, generator=rng).to(device), torch.randint(0, 5, (4, 3), generator=rng).to(device)
    R.check(softmax_loss(x.reshape(12, 5), y.reshape(12)), _ref("netc.softmax_loss", {"name": "l"}, [x, y]))
    R.check(softmax_loss_grad(x.reshape(12, 5), y.reshape(12)).reshape(4, 3, 5),
            _ref("netc.softmax_loss_grad", {"name": "l"}, [x, y]))


@pytest.mark.parametrize("t,b,feat", [(1, 1, (1,)), (5, 3, (7,)), (3, 4, (2, 3))], ids=str)
def test_masked_euclidean_loss_and_grad(device, rng, t, b, feat):
    x = torch.randn((t, b) + feat, generator=rng).to(device)
    y = torch.randn((t, b) + feat, generator=rng).to(device)
    n = _lengths(rng, t, b, torch.int32, device)
    R.check(euclidean_loss(x, y, n, out=torch.full((), NAN, device=device), block_r=2, block_c=2),
            _ref("netc.euclidean_loss", {"name": "l"}, [x, y, n]))
    seed = torch.tensor(-0.5, device=device)
    for wrt in (0, 1):
        for s in (None, seed):
            out = torch.full(tuple(x.shape), NAN, device=device)
            R.check(euclidean_loss_grad(x, y, s, wrt, n, out=out, block=4, block_l=2),
                    _ref("netc.euclidean_loss_grad", {"lengths": True, "wrt": wrt, "name": "l"},
                         [x, y, n] + ([s] if s is not None else [])))


def test_masked_loss_bad_arguments(device):
    x, y = torch.zeros(3, 2, 4, device=device), torch.zeros(3, 2, dtype=torch.int32, device=device)
    with pytest.raises(ValueError, match="lengths"):
        softmax_loss(x, y, torch.ones(3, dtype=torch.int32, device=device))
    with pytest.raises(TypeError, match="lengths"):
        softmax_loss(x, y, torch.ones(2, device=device))
    with pytest.raises(ValueError, match="time-major"):
        euclidean_loss(x, torch.zeros(2, 3, 4, device=device), torch.ones(2, dtype=torch.int32, device=device))
