"""The SequenceMask kernel (netc/kernels/seq_mask.py) against the op's float64 reference (netc/ops/seq_mask.py)
under Triton's interpreter: T = 1, B = 1, features off the tiles and none, tiles smaller than the problem,
lengths of 1 and T in i32 and i64, a strided output (a slice of a wider buffer along the samples), in place,
16-bit values; outputs NaN-poisoned so every element is checked."""
import pytest

pytest.importorskip("triton", reason="Triton is not importable; kernel tests need it")

import torch  # noqa: E402

from netc.kernels.seq_mask import seq_mask  # noqa: E402
from netc.ops import lookup  # noqa: E402

NAN = float("nan")


def _ref(ins):
    return lookup("netc.seq_mask").reference({"name": "m"}, [t.cpu() for t in ins], {})


def _lengths(rng, t, b, dtype, device):
    n = torch.randint(1, t + 1, (b,), generator=rng)
    n[0] = t
    if b > 1:
        n[-1] = 1
    return n.to(dtype).to(device)


@pytest.mark.parametrize("t,b,feat,blocks", [
    (1, 1, (1,), (None, None)), (5, 3, (7,), (2, 4)), (4, 1, (2, 3), (1, 2)), (3, 6, (130,), (None, None)),
    (6, 2, (), (4, 1)),
], ids=str)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=["i32", "i64"])
def test_seq_mask(device, rng, t, b, feat, blocks, dtype):
    x = torch.randn((t, b) + feat, generator=rng).to(device)
    n = _lengths(rng, t, b, dtype, device)
    out = torch.full(tuple(x.shape), NAN, device=device)
    got = seq_mask(x, n, out=out, block_m=blocks[0], block_n=blocks[1])
    want = _ref([x, n])
    assert torch.equal(got.cpu(), want.to(got.dtype))       # a copy or a zero: exact
    for bb in range(b):
        assert not got[int(n[bb]):, bb].any() and torch.equal(got[:int(n[bb]), bb], x[:int(n[bb]), bb])


def test_strided_out_in_place_half_and_bad_arguments(device, rng):
    x = torch.randn(4, 3, 5, generator=rng).to(device)
    n = torch.tensor([2, 4, 1], dtype=torch.int32, device=device)
    wide = torch.full((4, 6, 5), NAN, device=device)
    seq_mask(x, n, out=wide[:, 1:4])
    assert torch.equal(wide[:, 1:4].cpu(), _ref([x, n]))
    assert torch.isnan(wide[:, 0]).all() and torch.isnan(wide[:, 4:]).all()
    y = x.clone()
    assert seq_mask(y, n, out=y) is y and torch.equal(y.cpu(), _ref([x, n]))
    h = x.to(torch.float16)
    assert torch.equal(seq_mask(h, n).cpu(), _ref([h.float(), n]).to(torch.float16))
    with pytest.raises(TypeError):
        seq_mask(x, n.float())
    with pytest.raises(ValueError):
        seq_mask(x, n[:2])
    with pytest.raises(ValueError):
        seq_mask(x[0, 0], n)
