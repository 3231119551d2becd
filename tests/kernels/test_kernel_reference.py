"""The oracle itself: reference.py against naive loops written straight from netc's definitions
(Paleo's output sizes and SAME pads from netc.ops.conv). Needs no Triton."""
import itertools

import pytest
import torch

from netc.ops import reference as R
from netc.ops.geometry import out_size


def naive_pads(h, k, s, padding, axis):
    o, p = out_size(h, k, s, padding, axis)
    return o, p


def naive_window(x, n, oh, ow, kh, kw, sh, sw, ph, pw):
    """The in-bounds elements of one window: list of channel vectors."""
    vals = []
    for i, j in itertools.product(range(kh), range(kw)):
        ih, iw = oh * sh - ph + i, ow * sw - pw + j
        if 0 <= ih < x.shape[1] and 0 <= iw < x.shape[2]:
            vals.append(x[n, ih, iw])
    return vals


def naive_conv(x, w, s, padding):
    x, w = x.double(), w.double()
    kh, kw, ci, co = w.shape
    oh_, ph = naive_pads(x.shape[1], kh, s[0], padding, 0)
    ow_, pw = naive_pads(x.shape[2], kw, s[1], padding, 1)
    y = torch.zeros(x.shape[0], oh_, ow_, co, dtype=torch.float64)
    for n, a, b in itertools.product(range(x.shape[0]), range(oh_), range(ow_)):
        for i, j in itertools.product(range(kh), range(kw)):
            ih, iw = a * s[0] - ph + i, b * s[1] - pw + j
            if 0 <= ih < x.shape[1] and 0 <= iw < x.shape[2]:
                y[n, a, b] += x[n, ih, iw] @ w[i, j]
    return y


CONV_CASES = [((7, 13), (3, 3), (1, 1), "SAME"), ((8, 9), (5, 5), (3, 3), "SAME"), ((8, 8), (1, 1), (3, 3), "SAME"),
              ((7, 6), (2, 2), (1, 1), "SAME"), ((9, 7), (7, 1), (2, 2), [3, 0]), ((7, 13), (3, 5), (2, 3), "VALID")]


@pytest.mark.parametrize("hw,k,s,pad", CONV_CASES, ids=str)
def test_reference_conv_matches_naive(hw, k, s, pad):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, *hw, 3, generator=g)
    w = torch.randn(*k, 3, 4, generator=g)
    torch.testing.assert_close(R.conv2d(x, w, None, [1, *s, 1], pad), naive_conv(x, w, s, pad))


def test_same_padding_is_paleo_asymmetric():
    # 8 rows, 5x5 stride 3: 3 outputs, total pad 3 -> 1 on top, 2 at the bottom
    assert R.pads(8, 8, 5, 5, 3, 3, "SAME") == (3, 3, 1, 2, 1, 2)
    # 8 rows, 1x1 stride 3: Paleo's pad is (6 + 1 - 8) // 2 = -1, a crop
    assert R.pads(8, 8, 1, 1, 3, 3, "SAME")[2] == -1


@pytest.mark.parametrize("k,s,pad", [((3, 3), (2, 2), "SAME"), ((2, 3), (3, 2), [3, 3]), ((3, 3), (1, 1), [1, 1]),
                                     ((1, 1), (3, 3), "SAME")], ids=str)
def test_reference_pools_match_naive(k, s, pad):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 7, 8, 3, generator=g, dtype=torch.float64)
    oh, ph = out_size(7, k[0], s[0], pad, 0)
    ow, pw = out_size(8, k[1], s[1], pad, 1)
    mx = torch.zeros(2, oh, ow, 3, dtype=torch.float64)
    av, av_pad = mx.clone(), mx.clone()
    for n, a, b in itertools.product(range(2), range(oh), range(ow)):
        vals = naive_window(x, n, a, b, *k, *s, ph, pw)
        if vals:
            v = torch.stack(vals)
            mx[n, a, b], av[n, a, b] = v.max(0).values, v.mean(0)
            av_pad[n, a, b] = v.sum(0) / (k[0] * k[1])
    torch.testing.assert_close(R.maxpool(x, [1, *k, 1], [1, *s, 1], pad), mx)
    torch.testing.assert_close(R.avgpool(x, [1, *k, 1], [1, *s, 1], pad), av)
    torch.testing.assert_close(R.avgpool(x, [1, *k, 1], [1, *s, 1], pad, count_include_pad=True), av_pad)


def test_reference_lrn_matches_naive():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 3, 7, generator=g, dtype=torch.float64)
    n, alpha, beta, k = 5, 0.3, 0.75, 2.0
    y = torch.empty_like(x)
    for c in range(7):
        lo, hi = max(0, c - n // 2), min(7, c + n // 2 + 1)
        y[..., c] = x[..., c] / (k + alpha / n * (x[..., lo:hi] ** 2).sum(-1)) ** beta
    torch.testing.assert_close(R.lrn(x, n, alpha, beta, k), y)


def test_reference_epilogue_order():
    y = torch.tensor([[-1.0, 2.0]], dtype=torch.float64)
    b, sc, sh, r = (torch.tensor(v, dtype=torch.float64) for v in ([1.0, -1.0], [2.0, 3.0], [0.5, -4.0], [[-3.0, 1.0]]))
    # ((y + b) * sc + sh + r) -> relu
    torch.testing.assert_close(R.epilogue(y, b, sc, sh, r, "relu"), torch.tensor([[0.0, 0.0]], dtype=torch.float64))
    # relu((y + b) * sc + sh) + r
    torch.testing.assert_close(R.epilogue(y, b, sc, sh, r, "relu", residual_after_act=True),
                               torch.tensor([[-2.5, 1.0]], dtype=torch.float64))


def test_check_catches_poison():
    ref = torch.zeros(3, dtype=torch.float64)
    with pytest.raises(AssertionError, match="NaN"):
        R.check(torch.tensor([0.0, float("nan"), 0.0]), ref)
    with pytest.raises(AssertionError):
        R.check(torch.tensor([0.0, 1e-2, 0.0]), ref)
    R.check(torch.tensor([0.0, 1e-5, 0.0]), ref)
