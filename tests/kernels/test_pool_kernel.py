"""maxpool / avgpool over NHWC against the float64 reference: odd images, strides 1/2/3, VALID,
SAME (asymmetric), explicit padding (incl. windows that lie wholly in the padding), count_include_pad,
16-bit inputs and concat-slice output. Outputs are NaN-poisoned."""
import pytest

pytest.importorskip("triton", reason="Triton is not importable; kernel tests need it")

import torch  # noqa: E402

from netc.ops import reference as R  # noqa: E402
from netc.ops.geometry import window_geometry  # noqa: E402
from netc.kernels.pool import avgpool, maxpool  # noqa: E402

BLOCKS = dict(block_p=32, block_c=4)
NAN = float("nan")


def randn(gen, *shape, dtype=torch.float32, device="cpu"):
    return torch.randn(*shape, generator=gen).to(dtype).to(device)


def run(fn, ref, x, k, s, pad, device, dtype=torch.float32, **kw):
    oh, ow, *_ = window_geometry(x.shape[1], x.shape[2], k[0], k[1], s[0], s[1], pad)
    out = torch.full((x.shape[0], oh, ow, x.shape[3]), NAN, dtype=dtype, device=device)
    y = fn(x, [1, *k, 1], [1, *s, 1], pad, out=out, **kw, **BLOCKS)
    R.check(y, ref(x, [1, *k, 1], [1, *s, 1], pad, **kw), dtype)


# (ksize, strides, padding) on a 3x7x13x5 input
CASES = [
    ((3, 3), (2, 2), "VALID"),
    ((3, 3), (2, 2), "SAME"),       # 7 rows: pad 1/1; 13 cols: 1/1
    ((2, 2), (2, 2), "SAME"),       # 7 rows: pad 0 top, 1 bottom (asymmetric)
    ((3, 3), (1, 1), "SAME"),
    ((5, 3), (3, 3), "SAME"),       # 7 rows stride 3: pad 1 top, 2 bottom
    ((1, 1), (3, 3), "SAME"),       # 13 cols stride 3: pad -1 (a crop)
    ((3, 3), (1, 2), [1, 1]),
    ((2, 3), (3, 2), [3, 3]),       # some windows hold only padding -> 0
    ((7, 13), (1, 1), "VALID"),     # global pooling
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"k{c[0][0]}x{c[0][1]}_s{c[1][0]}x{c[1][1]}_{c[2]}".replace(
    " ", ""))
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool_shapes(device, rng, case, kind):
    x = randn(rng, 3, 7, 13, 5, device=device)
    fn, ref = (maxpool, R.maxpool) if kind == "max" else (avgpool, R.avgpool)
    run(fn, ref, x, *case, device)


def test_avgpool_count_include_pad(device, rng):
    x = randn(rng, 2, 7, 6, 3, device=device)
    run(avgpool, R.avgpool, x, (3, 3), (2, 2), "SAME", device, count_include_pad=True)
    run(avgpool, R.avgpool, x, (3, 3), (1, 1), [1, 2], device, count_include_pad=True)


def test_avgpool_excludes_padding_by_hand(device):
    """A 3x3 SAME average at a corner divides by the 4 in-bounds elements."""
    x = torch.arange(1.0, 10.0, device=device).reshape(1, 3, 3, 1)
    y = avgpool(x, [1, 3, 3, 1], [1, 1, 1, 1], "SAME")
    assert y[0, 0, 0, 0].item() == pytest.approx((1 + 2 + 4 + 5) / 4)
    assert y[0, 1, 1, 0].item() == pytest.approx(5.0)


def test_maxpool_negative_inputs_ignore_padding(device, rng):
    """Padding must never win a max: all inputs negative."""
    x = -torch.rand(1, 5, 4, 3, generator=rng).to(device) - 1.0
    run(maxpool, R.maxpool, x, (3, 3), (2, 2), "SAME", device)
    run(maxpool, R.maxpool, x, (3, 3), (1, 1), [1, 1], device)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_pool_half_precision(device, rng, dtype):
    x = randn(rng, 2, 7, 9, 6, dtype=dtype, device=device)
    run(maxpool, R.maxpool, x, (3, 3), (2, 2), "SAME", device, dtype)
    run(avgpool, R.avgpool, x, (3, 3), (2, 2), "SAME", device, dtype)


def test_pool_concat_slice_and_input_slice(device, rng):
    big = randn(rng, 2, 7, 5, 8, device=device)
    x = big[..., 2:7]                                              # a channel-slice input
    buf = torch.full((2, 4, 3, 9), NAN, device=device)
    maxpool(x, [1, 3, 3, 1], [1, 2, 2, 1], "SAME", out=buf, out_channel_offset=1, **BLOCKS)
    avgpool(x[..., :3], [1, 3, 3, 1], [1, 2, 2, 1], "SAME", out=buf, out_channel_offset=6, **BLOCKS)
    R.check(buf[..., 1:6], R.maxpool(x, [1, 3, 3, 1], [1, 2, 2, 1], "SAME"), what="max slice")
    R.check(buf[..., 6:9], R.avgpool(x[..., :3], [1, 3, 3, 1], [1, 2, 2, 1], "SAME"), what="avg slice")
    assert torch.isnan(buf[..., 0]).all(), "wrote outside its slice"


def test_pool_default_blocks(device, rng):
    x = randn(rng, 1, 9, 11, 7, device=device)
    R.check(maxpool(x, [1, 3, 3, 1], [1, 2, 2, 1], "VALID"), R.maxpool(x, [1, 3, 3, 1], [1, 2, 2, 1], "VALID"))
    R.check(avgpool(x, (2, 2), (2, 2), "SAME"), R.avgpool(x, (2, 2), (2, 2), "SAME"))


@pytest.mark.gpu
def test_pool_gpu_large(device, rng):
    x = randn(rng, 8, 55, 55, 96, device=device)
    R.check(maxpool(x, [1, 3, 3, 1], [1, 2, 2, 1], "VALID"), R.maxpool(x, [1, 3, 3, 1], [1, 2, 2, 1], "VALID"))
    R.check(avgpool(x, [1, 3, 3, 1], [1, 1, 1, 1], "SAME"), R.avgpool(x, [1, 3, 3, 1], [1, 1, 1, 1], "SAME"))
