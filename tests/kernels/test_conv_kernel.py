"""conv2d (implicit GEMM over NHWC) against the float64 reference: odd shapes, strides 1/2/3, VALID,
SAME (incl. asymmetric and negative pads), explicit padding, both K walks, the fused epilogue, the
16-bit dtypes and zero-copy concat-slice output. Outputs are NaN-poisoned before every run."""
import pytest

pytest.importorskip("triton", reason="Triton is not importable; kernel tests need it")

import torch  # noqa: E402

from netc.ops import reference as R  # noqa: E402
from netc.kernels.conv import conv2d, conv2d_geometry, filter_kmajor, kmajor_row  # noqa: E402

BLOCKS = dict(block_m=32, block_n=16, block_k=16)
NAN = float("nan")


def randn(gen, *shape, dtype=torch.float32, device="cpu"):
    return torch.randn(*shape, generator=gen).to(dtype).to(device)


def poisoned(shape, dtype, device):
    return torch.full(shape, NAN, dtype=dtype, device=device)


# (N, H, W, C_in, C_out, KH, KW, stride, padding, flat_k)
CASES = [
    (1, 7, 13, 3, 5, 3, 3, 1, "SAME", None),        # the odd image, C_in 3 -> flat K picked
    (3, 8, 13, 3, 5, 3, 3, 2, "SAME", False),       # asymmetric SAME rows (top 0, bottom 1), per-tap
    (2, 8, 9, 5, 7, 5, 5, 3, "SAME", True),         # asymmetric SAME (1 / 2), stride 3
    (1, 9, 7, 20, 6, 1, 7, 1, "SAME", False),       # 1x7, C_in 20 spans two K blocks per tap
    (2, 9, 7, 4, 5, 7, 1, 2, [3, 0], None),         # 7x1, explicit padding
    (1, 15, 14, 3, 4, 11, 11, 3, "VALID", None),    # 11x11 stride 3
    (3, 8, 8, 6, 5, 1, 1, 3, "SAME", False),        # 1x1 stride 3: SAME pad -1 (a crop)
    (2, 6, 7, 17, 33, 3, 3, 1, [1, 1], False),      # several row and column blocks
    (1, 5, 5, 3, 5, 2, 2, 1, "SAME", True),         # even kernel: pad 0 top, 1 bottom
    (3, 7, 13, 5, 5, 5, 5, 2, "VALID", False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "n{}_{}x{}x{}_co{}_k{}x{}_s{}_{}".format(*c[:9]).replace(
    " ", "").replace(",", "-"))
def test_conv2d_shapes(device, rng, case):
    n, h, w, ci, co, kh, kw, s, pad, flat = case
    x = randn(rng, n, h, w, ci, device=device)
    wt = randn(rng, kh, kw, ci, co, device=device)
    b = randn(rng, co, device=device)
    oh, ow, *_ = conv2d_geometry(x.shape, wt.shape, [1, s, s, 1], pad)
    out = poisoned((n, oh, ow, co), torch.float32, device)
    y = conv2d(x, wt, b, strides=[1, s, s, 1], padding=pad, out=out, flat_k=flat, **BLOCKS)
    assert y.data_ptr() == out.data_ptr()
    R.check(y, R.conv2d(x, wt, b, [1, s, s, 1], pad))


def test_conv2d_both_k_walks_agree(device, rng):
    x = randn(rng, 2, 7, 9, 6, device=device)
    wt = randn(rng, 3, 5, 6, 7, device=device)
    ref = R.conv2d(x, wt, None, [1, 2, 1, 1], "SAME")
    for flat in (True, False):
        out = poisoned(tuple(ref.shape), torch.float32, device)
        R.check(conv2d(x, wt, strides=(2, 1), padding="SAME", out=out, flat_k=flat, **BLOCKS), ref,
                what=f"flat_k={flat}")


EPILOGUES = [
    dict(),
    dict(bias=True, activation="relu"),
    dict(affine=True, activation="sigmoid"),
    dict(bias=True, residual=True, activation="relu"),
    dict(residual=True, residual_after_act=True, activation="tanh"),
    dict(bias=True, affine=True, residual=True, activation="leaky_relu", negative_slope=0.1),
]


@pytest.mark.parametrize("epi", EPILOGUES, ids=lambda e: "-".join(f"{k}={v}" for k, v in e.items()) or "plain")
def test_conv2d_epilogues(device, rng, epi):
    n, h, w, ci, co = 2, 5, 7, 4, 6
    x = randn(rng, n, h, w, ci, device=device)
    wt = randn(rng, 3, 3, ci, co, device=device)
    bias = randn(rng, co, device=device) if epi.get("bias") else None
    scale = randn(rng, co, device=device) if epi.get("affine") else None
    shift = randn(rng, co, device=device) if epi.get("affine") else None
    res = randn(rng, n, h, w, co, device=device) if epi.get("residual") else None
    kw = dict(activation=epi.get("activation", "none"), scale=scale, shift=shift, residual=res,
              residual_after_act=epi.get("residual_after_act", False), negative_slope=epi.get("negative_slope", 0.0))
    out = poisoned((n, h, w, co), torch.float32, device)
    y = conv2d(x, wt, bias, padding="SAME", out=out, **kw, **BLOCKS)
    R.check(y, R.conv2d(x, wt, bias, [1, 1, 1, 1], "SAME", **kw))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("flat", [True, False])
def test_conv2d_half_precision(device, rng, dtype, flat):
    x = randn(rng, 2, 7, 6, 5, dtype=dtype, device=device)
    wt = randn(rng, 3, 3, 5, 6, dtype=dtype, device=device)
    b = randn(rng, 6, dtype=dtype, device=device)
    res = randn(rng, 2, 4, 3, 6, dtype=dtype, device=device)
    out = poisoned((2, 4, 3, 6), dtype, device)
    y = conv2d(x, wt, b, strides=[1, 2, 2, 1], padding="SAME", residual=res, activation="relu", out=out,
               flat_k=flat, **BLOCKS)
    assert y.dtype == dtype
    R.check(y, R.conv2d(x, wt, b, [1, 2, 2, 1], "SAME", residual=res, activation="relu"), dtype)


def test_conv2d_fp32_output_from_fp16(device, rng):
    x = randn(rng, 1, 5, 6, 3, dtype=torch.float16, device=device)
    wt = randn(rng, 3, 3, 3, 4, dtype=torch.float16, device=device)
    out = poisoned((1, 5, 6, 4), torch.float32, device)
    y = conv2d(x, wt, padding="SAME", out=out, **BLOCKS)
    R.check(y, R.conv2d(x, wt, None, [1, 1, 1, 1], "SAME"))  # fp32 accumulate, fp32 store


def test_conv2d_tf32_switch(device, rng):
    """ALLOW_TF32 changes only the precision of fp32 products (the interpreter computes them in fp32)."""
    x = randn(rng, 1, 6, 5, 8, device=device)
    wt = randn(rng, 3, 3, 8, 5, device=device)
    out = poisoned((1, 6, 5, 5), torch.float32, device)
    y = conv2d(x, wt, padding="SAME", out=out, allow_tf32=True, **BLOCKS)
    R.check(y, R.conv2d(x, wt, None, [1, 1, 1, 1], "SAME"), rtol=5e-3)


@pytest.mark.parametrize("case", CASES[:6], ids=lambda c: "n{}_{}x{}x{}_co{}_k{}x{}_s{}_{}".format(*c[:9]).replace(
    " ", "").replace(",", "-"))
@pytest.mark.parametrize("tf32", [False, True])
def test_conv2d_reads_a_k_major_filter_copy(device, rng, case, tf32):
    """filter_kmajor's [C_out, K rounded up to 16] copy is the HWIO filter transposed (its padding
    columns untouched), and conv2d reading it (w_kmajor, as TF32 convolutions do) computes the same."""
    n, h, w, ci, co, kh, kw, s, pad, flat = case
    x = randn(rng, n, h, w, ci, device=device)
    wt = randn(rng, kh, kw, ci, co, device=device)
    k = kh * kw * ci
    km = poisoned((co, kmajor_row(k)), torch.float32, device)
    filter_kmajor(wt, out=km, block_k=16, block_n=16)
    assert torch.equal(km[:, :k], wt.reshape(k, co).t())
    assert torch.isnan(km[:, k:]).all() and km.shape[1] % 16 == 0
    oh, ow, *_ = conv2d_geometry(x.shape, wt.shape, [1, s, s, 1], pad)
    out = poisoned((n, oh, ow, co), torch.float32, device)
    y = conv2d(x, wt, strides=[1, s, s, 1], padding=pad, out=out, flat_k=flat, w_kmajor=km, allow_tf32=tf32, **BLOCKS)
    R.check(y, R.conv2d(x, wt, None, [1, s, s, 1], pad), **(dict(rtol=5e-3) if tf32 else {}))


def test_conv2d_refuses_a_misshapen_k_major_filter(device, rng):
    x = randn(rng, 1, 5, 5, 4, device=device)
    wt = randn(rng, 3, 3, 4, 6, device=device)
    with pytest.raises(ValueError, match=r"w_kmajor must be \[6, >=36\]"):
        conv2d(x, wt, w_kmajor=torch.zeros(6, 20, device=device))
    with pytest.raises(ValueError, match="K-major filter copy is"):
        filter_kmajor(wt, out=torch.zeros(6, 36, device=device))


def test_conv2d_concat_slices(device, rng):
    """Two convolutions write straight into their channel slices of one concatenation buffer; the
    residual of the second is itself a channel slice of another buffer; nothing else is touched."""
    n, h, w = 2, 7, 5
    x = randn(rng, n, h, w, 3, device=device)
    w1 = randn(rng, 1, 1, 3, 5, device=device)
    w2 = randn(rng, 3, 3, 3, 6, device=device)
    big = randn(rng, n, h, w, 10, device=device)
    res = big[..., 2:8]
    buf = poisoned((n, h, w, 2 + 5 + 6 + 3), torch.float32, device)
    y1 = conv2d(x, w1, out=buf, out_channel_offset=2, **BLOCKS)
    y2 = conv2d(x, w2, residual=res, activation="relu", out=buf, out_channel_offset=7, **BLOCKS)
    assert y1.shape == (n, h, w, 5) and y2.shape == (n, h, w, 6)
    R.check(buf[..., 2:7], R.conv2d(x, w1, None, [1, 1, 1, 1], "SAME"), what="slice 1")
    R.check(buf[..., 7:13], R.conv2d(x, w2, None, [1, 1, 1, 1], "SAME", residual=res, activation="relu"),
            what="slice 2")
    assert torch.isnan(buf[..., :2]).all() and torch.isnan(buf[..., 13:]).all(), "wrote outside its slice"


def test_conv2d_input_channel_slice(device, rng):
    """The input may itself be a channel slice (pixels evenly spaced, channels contiguous)."""
    big = randn(rng, 2, 6, 7, 9, device=device)
    x = big[..., 3:7]
    wt = randn(rng, 3, 3, 4, 5, device=device)
    out = poisoned((2, 3, 4, 5), torch.float32, device)
    R.check(conv2d(x, wt, strides=[1, 2, 2, 1], padding="SAME", out=out, **BLOCKS),
            R.conv2d(x, wt, None, [1, 2, 2, 1], "SAME"))


def test_conv2d_default_blocks_and_allocation(device, rng):
    """No block sizes given: the H100 defaults shrink to the problem; a fresh output is allocated."""
    x = randn(rng, 1, 5, 4, 3, device=device)
    wt = randn(rng, 3, 3, 3, 2, device=device)
    y = conv2d(x, wt, padding="VALID")
    R.check(y, R.conv2d(x, wt, None, [1, 1, 1, 1], "VALID"))


def test_conv2d_rejects_bad_arguments(device, rng):
    x = randn(rng, 1, 5, 5, 3, device=device)
    with pytest.raises(ValueError, match="input channels"):
        conv2d(x, randn(rng, 3, 3, 4, 2, device=device))
    with pytest.raises(ValueError, match="does not fit"):
        conv2d(x, randn(rng, 7, 7, 3, 2, device=device), padding="VALID")
    with pytest.raises(ValueError, match="fit the out buffer"):
        conv2d(x, randn(rng, 3, 3, 3, 2, device=device), out=torch.empty(1, 5, 5, 3, device=device),
               out_channel_offset=2)
    with pytest.raises(ValueError, match="scale and shift"):
        conv2d(x, randn(rng, 3, 3, 3, 2, device=device), scale=torch.ones(2, device=device))


def test_conv2d_launch_false_describes_the_call(device, rng):
    x = randn(rng, 1, 7, 13, 3, device=device)
    wt = randn(rng, 3, 3, 3, 5, device=device)
    call = conv2d(x, wt, strides=[1, 2, 2, 1], padding="SAME", launch=False, **BLOCKS)
    assert call.constexprs["SH"] == 2 and call.constexprs["FLAT_K"] is True
    assert call.out.shape == (1, 4, 7, 5)
    call.out.fill_(NAN)
    R.check(call.launch(), R.conv2d(x, wt, None, [1, 2, 2, 1], "SAME"))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_conv2d_gpu_default_blocks(device, rng, dtype):
    """Realistic sizes with the default (H100) blocks; TF32 allowed for fp32."""
    x = randn(rng, 4, 56, 56, 64, dtype=dtype, device=device)
    wt = randn(rng, 3, 3, 64, 96, dtype=dtype, device=device) * 0.05
    b = randn(rng, 96, dtype=dtype, device=device)
    y = conv2d(x, wt, b, padding="SAME", activation="relu", allow_tf32=True)
    R.check(y, R.conv2d(x, wt, b, [1, 1, 1, 1], "SAME", activation="relu"), dtype,
            rtol=5e-3 if dtype == torch.float32 else None)


# (N, H, W, C_in, C_out, KH, KW, stride, padding): convolutions that are matrix products, and some that are not
MATRIX_CASES = [
    ((3, 5, 5, 6, 20, 5, 5, 1, "VALID"), True),     # the whole window (Paleo's fc6): a row per image
    ((3, 5, 5, 6, 20, 5, 5, 2, "VALID"), True),     #   whatever the stride
    ((2, 4, 3, 16, 9, 1, 1, 1, "SAME"), True),      # pointwise: a row per pixel
    ((2, 4, 3, 16, 9, 1, 1, 1, "VALID"), True),
    ((2, 5, 5, 6, 20, 5, 5, 1, "SAME"), False),     # the whole window, padded: a 5x5 output
    ((2, 4, 4, 16, 9, 1, 1, 2, "SAME"), False),     # 1x1 at stride 2 skips pixels
    ((2, 4, 3, 16, 9, 1, 1, 1, [1, 0]), False),     # 1x1 padded
    ((2, 6, 6, 4, 9, 3, 3, 1, "VALID"), False),     # a window that slides
]


@pytest.mark.parametrize("case,is_matrix", MATRIX_CASES, ids=lambda c: str(c).replace(" ", ""))
def test_conv2d_matrix_views_compute_the_convolution(device, rng, case, is_matrix):
    """conv2d_matrix_views (how codegen lowers a fully connected layer written as a convolution, and a 1x1
    convolution: kernels/lowering.py) against the float64 reference, through gemm with split-K, into a
    channel slice of a wider output with a residual: the views are exact or absent."""
    from netc.kernels.conv import conv2d_matrix_views
    from netc.kernels.gemm import gemm
    n, h, w, ci, co, kh, kw, s, pad = case
    x = randn(rng, n, h, w, ci, device=device)
    wt = randn(rng, kh, kw, ci, co, device=device)
    b = randn(rng, co, device=device)
    oh, ow, *_ = conv2d_geometry(x.shape, wt.shape, [1, s, s, 1], pad)
    wide = poisoned((n, oh, ow, co + 7), torch.float32, device)
    out = wide[..., 3:3 + co]
    res = randn(rng, n, oh, ow, co + 2, device=device)[..., 1:1 + co]
    mat = conv2d_matrix_views(x, wt, [1, s, s, 1], pad, out, res)
    assert (mat is not None) == is_matrix
    if mat is None:
        return
    a, bm, o, r = mat
    gemm(a, bm, b, out=o, residual=r, activation="relu", split=2, block_m=16, block_n=16, block_k=16)
    ref = torch.relu(R.conv2d(x, wt, b, [1, s, s, 1], pad).double() + res.double())
    R.check(out, ref)
    assert torch.isnan(wide[..., :3]).all() and torch.isnan(wide[..., 3 + co:]).all()   # nothing outside the slice


def test_conv2d_matrix_views_refuse_pixels_not_evenly_spaced(device, rng):
    """A pointwise convolution over a tensor whose pixels are not evenly spaced (a crop of a wider image)
    is no matrix over a view: None, and conv2d computes it."""
    from netc.kernels.conv import conv2d_matrix_views
    x = randn(rng, 2, 6, 8, 16, device=device)[:, :, 1:6]
    wt = randn(rng, 1, 1, 16, 4, device=device)
    out = poisoned((2, 6, 5, 4), torch.float32, device)
    assert conv2d_matrix_views(x, wt, [1, 1, 1, 1], "VALID", out) is None
