"""The SequenceReverse kernel (netc/kernels/seq_reverse.py) against the op's float64 reference
(netc/ops/seq_reverse.py) under Triton's interpreter: T = 1, B = 1, features off the tiles and none,
tiles smaller than the problem, lengths of 1 and T in i32 and i64, no lengths, a strided output (a slice
of a wider buffer along the samples), 16-bit values; outputs NaN-poisoned so every element is checked."""
import pytest

pytest.importorskip("triton", reason="Triton is not importable; kernel tests need it")

import torch  # noqa: E402

from netc.kernels.seq_reverse import seq_reverse  # noqa: E402
from netc.ops import lookup  # noqa: E402
from netc.ops import reference as R  # noqa: E402

NAN = float("nan")


def _ref(ins):
    return lookup("netc.seq_reverse").reference({"name": "r"}, [t.cpu() for t in ins], {})


@pytest.mark.parametrize("t,b,feat,blocks", [
    (1, 1, (1,), (None, None)), (5, 3, (7,), (2, 4)), (4, 1, (2, 3), (1, 2)), (3, 6, (130,), (None, None)),
    (6, 2, (), (4, 1)),
], ids=str)
@pytest.mark.parametrize("lengths", ["none", "i32", "i64"])
def test_seq_reverse(device, rng, t, b, feat, blocks, lengths):
    x = torch.randn((t, b) + feat, generator=rng).to(device)
    ins = [x]
    n = None
    if lengths != "none":
        n = torch.randint(1, t + 1, (b,), generator=rng)
        n[0] = t
        if b > 1:
            n[-1] = 1
        n = n.to(torch.int32 if lengths == "i32" else torch.int64).to(device)
        ins.append(n)
    out = torch.full(tuple(x.shape), NAN, device=device)
    got = seq_reverse(x, n, out=out, block_m=blocks[0], block_n=blocks[1])
    want = _ref(ins)
    assert torch.equal(got.cpu(), want.to(got.dtype))       # a gather: exact
    # its own inverse
    assert torch.equal(seq_reverse(got, n).cpu(), x.cpu())


def test_strided_out_half_and_bad_arguments(device, rng):
    x = torch.randn(4, 3, 5, generator=rng).to(device)
    n = torch.tensor([2, 4, 1], dtype=torch.int32, device=device)
    wide = torch.full((4, 6, 5), NAN, device=device)
    seq_reverse(x, n, out=wide[:, 1:4])
    R.check(wide[:, 1:4], _ref([x, n]))
    assert torch.isnan(wide[:, 0]).all() and torch.isnan(wide[:, 4:]).all()
    h = x.to(torch.float16)
    assert torch.equal(seq_reverse(h, n).cpu(), _ref([h.float(), n]).to(torch.float16))
    with pytest.raises(TypeError):
        seq_reverse(x, n.float())
    with pytest.raises(ValueError):
        seq_reverse(x, n[:2])
    with pytest.raises(ValueError):
        seq_reverse(x[0, 0])
    with pytest.raises(ValueError):
        seq_reverse(x, n, out=torch.empty(4, 3, 4, device=device))
