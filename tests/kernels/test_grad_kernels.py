"""The training kernels (netc/kernels/conv_grad.py, pool_grad.py, norm_grad.py, loss_grad.py,
dropout.py and the gradient ops of elementwise.py) against the float64 references of the gradient
ops (netc.ops.reference, or the OpDef's reference()), through Triton's interpreter: odd shapes,
strides, Paleo paddings (negative SAME pads too), strided and concat-slice operands, outputs
NaN-poisoned, f32 at the forward kernels' tolerance and a 16-bit dtype per family; the
reductions run twice for equal bits. Last, every training kernel compiles ahead of time for sm_90."""
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="Triton is not importable; kernel tests need it")

import torch  # noqa: E402

from netc import ops  # noqa: E402
from netc.kernels import conv_grad as CG  # noqa: E402
from netc.kernels import dropout as D  # noqa: E402
from netc.kernels import elementwise as E  # noqa: E402
from netc.kernels import loss_grad as LG  # noqa: E402
from netc.kernels import norm_grad as NG  # noqa: E402
from netc.kernels import pool_grad as PG  # noqa: E402
from netc.ops import reference as R  # noqa: E402
from netc.ops.geometry import window_geometry  # noqa: E402

NAN = float("nan")
HALF = [torch.bfloat16, torch.float16]
ROOT = Path(__file__).resolve().parents[2]


def randn(gen, *shape, dtype=torch.float32, device="cpu", scale=1.0):
    return (torch.randn(*shape, generator=gen) * scale).to(dtype).to(device)


def poisoned(shape, dtype, device):
    return torch.full(tuple(shape), NAN, dtype=dtype, device=device)


def op_ref(name, attrs, ins, params=None):
    """The OpDef reference of gradient op `name` with its attribute defaults filled in."""
    opdef = ops.lookup(name)
    a = {k: s.default for k, s in opdef.attrs.items()}
    a.update(attrs)
    return opdef.reference(a, ins, params or {})


def same_bits(a, b):
    return torch.equal(a.view(torch.int16 if a.element_size() == 2 else torch.int32),
                       b.view(torch.int16 if b.element_size() == 2 else torch.int32))


def out_hw(h, w, k, s, pad):
    oh, ow, _, _ = window_geometry(h, w, k[0], k[1], s, s, pad)
    return oh, ow


# --------------------------------------------------------------------------- convolution

# (N, H, W, C_in, C_out, KH, KW, stride, padding)
CONV_CASES = [
    (2, 7, 9, 3, 5, 3, 3, 2, "SAME"),       # asymmetric SAME, stride 2: phases with 2 and 1 taps
    (1, 8, 8, 6, 5, 1, 1, 3, "SAME"),       # SAME pad -1 (a crop); 8 of 9 phases have no tap: zeros
    (2, 9, 7, 4, 5, 7, 1, 2, [3, 0]),       # 7x1, explicit padding
    (1, 15, 14, 3, 4, 11, 11, 3, "VALID"),  # 11x11 stride 3: the input's last rows get no gradient
    (2, 6, 7, 17, 33, 3, 3, 1, [1, 1]),     # several channel blocks
    (1, 5, 6, 3, 4, 2, 2, 1, "SAME"),       # even kernel: pad 0 top, 1 bottom
]
CONV_IDS = ["n{}_{}x{}x{}_co{}_k{}x{}_s{}_{}".format(*c).replace(" ", "").replace(",", "-") for c in CONV_CASES]


@pytest.mark.parametrize("case", CONV_CASES, ids=CONV_IDS)
def test_conv2d_grad_data(device, rng, case):
    n, h, w, ci, co, kh, kw, s, pad = case
    oh, ow = out_hw(h, w, (kh, kw), s, pad)
    big = randn(rng, n, oh, ow, co + 3, device=device)
    dz = big[..., 1:co + 1]                         # a channel slice: pixel stride co + 3
    wt = randn(rng, kh, kw, ci, co, device=device)
    attrs = dict(filter=[kh, kw, ci, co], strides=[1, s, s, 1], padding=pad, input_shape=[n, h, w, ci])
    buf = poisoned((n, h, w, ci + 4), torch.float32, device)
    dx = CG.conv2d_grad_data(dz, wt, (n, h, w, ci), [1, s, s, 1], pad, out=buf, out_channel_offset=2,
                             block_m=32, block_n=32, block_k=32)
    R.check(dx, op_ref("netc.conv2d_grad_data", attrs, [dz], {"weight": wt}))
    assert torch.isnan(buf[..., :2]).all() and torch.isnan(buf[..., ci + 2:]).all(), "wrote outside its slice"


@pytest.mark.parametrize("case", CONV_CASES, ids=CONV_IDS)
def test_conv2d_grad_filter_and_bias(device, rng, case):
    """Both row walks, one and three row ranges (the 3-split: two kernels, a workspace), bias fused."""
    n, h, w, ci, co, kh, kw, s, pad = case
    oh, ow = out_hw(h, w, (kh, kw), s, pad)
    x = randn(rng, n, h, w, ci, device=device)
    dz = randn(rng, n, oh, ow, co, device=device)
    attrs = dict(filter=[kh, kw, ci, co], strides=[1, s, s, 1], padding=pad)
    ref = op_ref("netc.conv2d_grad_filter", attrs, [x, dz])
    ref_b = op_ref("netc.bias_grad", {}, [dz])
    for flat, split in ((True, 1), (ci < 4, 3)):       # the per-tap walk, except for 3-channel 11x11 (slow here)
        dw, db = CG.conv2d_grad_filter(x, dz, attrs["filter"], attrs["strides"], pad, bias=True, flat_k=flat,
                                       split=split, out=poisoned((kh, kw, ci, co), torch.float32, device),
                                       block_m=64, block_n=64, block_k=32)
        R.check(dw, ref, what=f"dW flat={flat} split={split}")
        R.check(db, ref_b, what=f"db flat={flat} split={split}")


def test_conv2d_grad_filter_split_is_deterministic(device, rng):
    x = randn(rng, 3, 9, 8, 5, device=device)
    dz = randn(rng, 3, 9, 8, 6, device=device)
    runs = [CG.conv2d_grad_filter(x, dz, [3, 3, 5, 6], padding="SAME", bias=True, split=4, flat_k=True,
                                  block_m=64, block_n=16, block_k=16) for _ in range(2)]
    assert same_bits(runs[0][0], runs[1][0]) and same_bits(runs[0][1], runs[1][1])
    R.check(runs[0][0], R.conv2d_grad_filter(x, dz, (3, 3), [1, 1, 1, 1], "SAME"))


@pytest.mark.parametrize("act,slope", [("relu", 0.0), ("relu", 0.1), ("sigmoid", 0.0), ("tanh", 0.0)])
def test_conv_gradients_with_activation_prologue(device, rng, act, slope):
    """dy and y of a fused activation in, its activation_grad computed on load by the data, filter and
    bias gradients (and the unfused op, the elementwise chain, agrees)."""
    n, h, w, ci, co = 2, 6, 5, 4, 6
    x = randn(rng, n, h, w, ci, device=device)
    wt = randn(rng, 3, 3, ci, co, device=device)
    z = randn(rng, n, 3, 3, co, device=device)
    y = R.activation(z, act if not slope else "leaky_relu", slope).float()
    dy = randn(rng, n, 3, 3, co, device=device)
    dz = R.activation_grad(y, dy, act, slope)
    kw = dict(activation=act, y=y, negative_slope=slope)
    R.check(E.activation_grad(y, dy, act, slope, out=poisoned(dy.shape, torch.float32, device), block=64), dz)
    dx = CG.conv2d_grad_data(dy, wt, (n, h, w, ci), [1, 2, 2, 1], "SAME", **kw,
                             out=poisoned((n, h, w, ci), torch.float32, device), block_m=32, block_n=16, block_k=16)
    R.check(dx, R.conv2d_grad_data(dz, wt, (n, h, w, ci), [1, 2, 2, 1], "SAME"))
    dw, db = CG.conv2d_grad_filter(x, dy, [3, 3, ci, co], [1, 2, 2, 1], "SAME", bias=True, split=2, **kw,
                                   block_m=64, block_n=16, block_k=16)
    R.check(dw, R.conv2d_grad_filter(x, dz, (3, 3), [1, 2, 2, 1], "SAME"))
    R.check(db, R.bias_grad(dz))
    R.check(CG.bias_grad(dy, **kw, out=poisoned((co,), torch.float32, device), split=2, block_r=8), R.bias_grad(dz))


@pytest.mark.parametrize("act,slope", [("relu", 0.0), ("relu", 0.1), ("sigmoid", 0.0), ("tanh", 0.0)])
def test_data_gradients_with_activation_gradient_epilogue(device, rng, act, slope):
    """dx of a convolution (strided, a channel slice of a wider output) and of an inner product, with
    the activation gradient of the layer below applied before the store: activation_grad(y, dx), y
    that activation's output; with a prologue of the layer above at the same time."""
    n, h, w, ci, co = 2, 7, 6, 5, 6
    wt = randn(rng, 3, 3, ci, co, device=device)
    dz = randn(rng, n, 4, 3, co, device=device)
    ybelow = R.activation(randn(rng, n, h, w, ci, device=device), act if not slope else "leaky_relu", slope).float()
    want = R.activation_grad(ybelow, R.conv2d_grad_data(dz, wt, (n, h, w, ci), [1, 2, 2, 1], "SAME"), act, slope)
    wide = poisoned((n, h, w, ci + 3), torch.float32, device)
    dx = CG.conv2d_grad_data(dz, wt, (n, h, w, ci), [1, 2, 2, 1], "SAME", grad_activation=act, grad_y=ybelow,
                             grad_slope=slope, out=wide, out_channel_offset=2, block_m=32, block_n=16, block_k=16)
    R.check(dx, want)
    assert torch.isnan(wide[..., :2]).all() and torch.isnan(wide[..., 2 + ci:]).all()
    # and a prologue too: dz = tanh'(yabove) * dy
    yabove = torch.tanh(randn(rng, n, 4, 3, co, device=device))
    dx = CG.conv2d_grad_data(dz, wt, (n, h, w, ci), [1, 2, 2, 1], "SAME", activation="tanh", y=yabove,
                             grad_activation=act, grad_y=ybelow, grad_slope=slope,
                             out=poisoned((n, h, w, ci), torch.float32, device), block_m=32, block_n=16, block_k=16)
    R.check(dx, R.activation_grad(ybelow, R.conv2d_grad_data(R.activation_grad(yabove, dz, "tanh"), wt,
                                                             (n, h, w, ci), [1, 2, 2, 1], "SAME"), act, slope))
    # the inner product's data gradient, in the input's [N, H, W, C] shape
    wi = randn(rng, 2 * 3 * 7, 9, device=device)
    dzi = randn(rng, 5, 9, device=device)
    yi = R.activation(randn(rng, 5, 2, 3, 7, device=device), act if not slope else "leaky_relu", slope).float()
    dx = CG.inner_product_grad_data(dzi, wi, (5, 2, 3, 7), grad_activation=act, grad_y=yi, grad_slope=slope,
                                    out=poisoned((5, 2, 3, 7), torch.float32, device), block_m=16, block_n=16,
                                    block_k=16)
    R.check(dx, R.activation_grad(yi, R.inner_product_grad_data(dzi, wi, (5, 2, 3, 7)), act, slope))


@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "f16"])
def test_conv_gradients_half_precision(device, rng, dtype):
    n, h, w, ci, co = 2, 7, 6, 5, 6
    x = randn(rng, n, h, w, ci, dtype=dtype, device=device)
    wt = randn(rng, 3, 3, ci, co, dtype=dtype, device=device, scale=0.3)
    dz = randn(rng, n, 4, 3, co, dtype=dtype, device=device)
    dx = CG.conv2d_grad_data(dz, wt, (n, h, w, ci), [1, 2, 2, 1], "SAME",
                             out=poisoned((n, h, w, ci), dtype, device), block_m=32, block_n=16, block_k=16)
    assert dx.dtype == dtype
    R.check(dx, R.conv2d_grad_data(dz, wt, (n, h, w, ci), [1, 2, 2, 1], "SAME"), dtype)
    dw, db = CG.conv2d_grad_filter(x, dz, [3, 3, ci, co], [1, 2, 2, 1], "SAME", bias=True, split=2,
                                   out=poisoned((3, 3, ci, co), dtype, device), block_m=64, block_n=16, block_k=16)
    assert dw.dtype == dtype and db.dtype == dtype
    R.check(dw, R.conv2d_grad_filter(x, dz, (3, 3), [1, 2, 2, 1], "SAME"), dtype)
    R.check(db, R.bias_grad(dz), dtype)
    # the f32 accumulation shows: an f32 filter gradient from 16-bit operands is exact to f32
    dw32 = CG.conv2d_grad_filter(x, dz, [3, 3, ci, co], [1, 2, 2, 1], "SAME", out_dtype=torch.float32, split=1,
                                 block_m=64, block_n=16, block_k=16)
    R.check(dw32, R.conv2d_grad_filter(x, dz, (3, 3), [1, 2, 2, 1], "SAME"))


def test_deconv2d_is_the_data_gradient(device, rng):
    """netc.deconv2d (no kernel of its own) runs as conv2d_grad_data with its activation as epilogue: its
    weight [kh, kw, c_out, c_in] is the HWIO filter of the convolution output_shape -> x."""
    x = randn(rng, 2, 4, 3, 5, device=device)
    wt = randn(rng, 4, 4, 6, 5, device=device)
    attrs = dict(filter=[4, 4, 6, 5], strides=[1, 2, 2, 1], padding="SAME", output_shape=[2, 8, 6, 6],
                 activation="tanh")
    y = CG.deconv2d(x, wt, (2, 8, 6, 6), [1, 2, 2, 1], "SAME", activation="tanh",
                    out=poisoned((2, 8, 6, 6), torch.float32, device), block_m=32, block_n=16, block_k=16)
    R.check(y, op_ref("netc.deconv2d", attrs, [x], {"weight": wt}))


def test_inner_product_gradients(device, rng):
    """dx = dz W^T and dW = x^T dz through gemm on transposed views (no copies); with a bias or an
    activation prologue through the 1x1 convolution gradients."""
    x = randn(rng, 5, 2, 3, 7, device=device)            # flattened to [5, 42]
    wt = randn(rng, 42, 9, device=device)
    dz = randn(rng, 5, 9, device=device)
    blocks = dict(block_m=16, block_n=16, block_k=16)
    dx = CG.inner_product_grad_data(dz, wt, (5, 2, 3, 7), out=poisoned((5, 2, 3, 7), torch.float32, device),
                                    **blocks)
    R.check(dx, op_ref("netc.inner_product_grad_data", dict(input_shape=[5, 2, 3, 7]), [dz], {"weight": wt}))
    call = CG.inner_product_grad_filter(x, dz, launch=False, **blocks)
    assert call.kernel.__name__ == "gemm_kernel" and call.args[0].data_ptr() == x.data_ptr()
    R.check(call.launch(), op_ref("netc.inner_product_grad_filter", {}, [x, dz]))
    y = torch.sigmoid(randn(rng, 5, 9, device=device))
    dzz = R.activation_grad(y, dz, "sigmoid")
    dx = CG.inner_product_grad_data(dz, wt, (5, 2, 3, 7), activation="sigmoid", y=y, **blocks)
    R.check(dx, R.inner_product_grad_data(dzz, wt, (5, 2, 3, 7)))
    dw, db = CG.inner_product_grad_filter(x, dz, bias=True, activation="sigmoid", y=y, split=2,
                                          out=poisoned((42, 9), torch.float32, device), **blocks)
    R.check(dw, R.inner_product_grad_filter(x, dzz))
    R.check(db, R.bias_grad(dzz))
    xb, wb, dzb = x.to(torch.bfloat16), wt.to(torch.bfloat16), dz.to(torch.bfloat16)
    R.check(CG.inner_product_grad_data(dzb, wb, (5, 2, 3, 7), **blocks), R.inner_product_grad_data(dzb, wb, (5, 42)
                                                                                                  ).reshape(5, 2, 3, 7),
            torch.bfloat16)
    R.check(CG.inner_product_grad_filter(xb, dzb, **blocks), R.inner_product_grad_filter(xb, dzb), torch.bfloat16)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_bias_grad_split_and_slices(device, rng, dtype):
    big = randn(rng, 3, 5, 7, 20, dtype=dtype, device=device, scale=3)
    dz = big[..., 4:17]                                  # 13 channels of 20
    ref = op_ref("netc.bias_grad", {}, [dz])
    runs = []
    for split in (1, 5):
        out = poisoned((13,), dtype, device)
        runs.append(CG.bias_grad(dz, out=out, split=split, block_r=8, block_c=8))
        R.check(runs[-1], ref, dtype, what=f"split {split}")
    again = CG.bias_grad(dz, split=5, block_r=8, block_c=8)
    assert same_bits(runs[1], again)


# --------------------------------------------------------------------------- pooling

# (N, H, W, C, k, stride, padding)
POOL_CASES = [
    (2, 9, 8, 6, 3, 2, "SAME"),      # overlapping windows, asymmetric SAME
    (1, 7, 7, 5, 2, 2, "VALID"),     # the last row and column in no window
    (2, 8, 8, 3, 1, 3, "SAME"),      # SAME pad -1: a crop
    (1, 6, 9, 4, 3, 1, [1, 1]),      # stride 1: up to 9 windows per element
    (1, 5, 5, 3, 2, 1, [2, 2]),      # windows with no in-bounds element
    (1, 6, 5, 4, 3, 3, "SAME"),
    (1, 9, 8, 5, 7, 1, "SAME"),      # 7x7 at stride 1 (ResNet-50's last pool is 7x7): 49 windows per element
]


@pytest.mark.parametrize("case", POOL_CASES, ids=lambda c: "n{}_{}x{}x{}_k{}_s{}_{}".format(*c).replace(" ", ""))
def test_pool_gradients(device, rng, case):
    n, h, w, c, k, s, pad = case
    x = torch.round(randn(rng, n, h, w, c, device=device) * 2) / 2     # many ties: the first maximum wins
    oh, ow = out_hw(h, w, (k, k), s, pad)
    dy = randn(rng, n, oh, ow, c, device=device)
    attrs = dict(ksize=[1, k, k, 1], strides=[1, s, s, 1], padding=pad)
    buf = poisoned((n, h, w, c + 3), torch.float32, device)
    dx = PG.maxpool_grad(x, dy, attrs["ksize"], attrs["strides"], pad, out=buf, out_channel_offset=1, block_c=4)
    R.check(dx, op_ref("netc.maxpool_grad", attrs, [x, dy]))
    assert torch.isnan(buf[..., 0]).all() and torch.isnan(buf[..., c + 1:]).all()
    ref = op_ref("netc.avgpool_grad", dict(attrs, input_shape=[n, h, w, c]), [dy])
    R.check(PG.avgpool_grad(dy, (n, h, w, c), attrs["ksize"], attrs["strides"], pad,
                            out=poisoned((n, h, w, c), torch.float32, device)), ref)
    R.check(PG.avgpool_grad(dy, (n, h, w, c), attrs["ksize"], attrs["strides"], pad, count_include_pad=True),
            R.avgpool_grad(dy, (n, h, w, c), attrs["ksize"], attrs["strides"], pad, count_include_pad=True))


@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "f16"])
def test_pool_gradients_half_precision_strided(device, rng, dtype):
    big = randn(rng, 2, 9, 8, 9, dtype=dtype, device=device, scale=3)
    x = big[..., 2:8]                                    # 6 channels of 9
    dy = randn(rng, 2, 5, 4, 6, dtype=dtype, device=device)
    out = PG.maxpool_grad(x, dy, [1, 3, 3, 1], [1, 2, 2, 1], "SAME", out=poisoned((2, 9, 8, 6), dtype, device))
    assert out.dtype == dtype
    R.check(out, R.maxpool_grad(x, dy, [1, 3, 3, 1], [1, 2, 2, 1], "SAME"), dtype)
    R.check(PG.avgpool_grad(dy, (2, 9, 8, 6), [1, 3, 3, 1], [1, 2, 2, 1], "SAME"),
            R.avgpool_grad(dy, (2, 9, 8, 6), [1, 3, 3, 1], [1, 2, 2, 1], "SAME"), dtype)
    up = randn(rng, 2, 6, 9, 5, dtype=dtype, device=device)
    R.check(PG.upsample2d_grad(up, [1, 2, 3, 1], out=poisoned((2, 3, 3, 5), dtype, device)),
            R.upsample2d_grad(up, 2, 3), dtype)


def test_upsample2d_grad(device, rng):
    dy = randn(rng, 2, 6, 9, 5, device=device)[:, :, :, :]
    R.check(PG.upsample2d_grad(dy, [1, 3, 3, 1], out=poisoned((2, 2, 3, 5), torch.float32, device), block_c=4),
            op_ref("netc.upsample2d_grad", dict(ksize=[1, 3, 3, 1]), [dy]))


# --------------------------------------------------------------------------- normalization

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_lrn_grad(device, rng, dtype):
    from netc.kernels.lrn import lrn
    x = randn(rng, 2, 3, 5, 13, dtype=dtype, device=device, scale=2)
    y = lrn(x, 5, 0.1, 0.75, 2.0)
    dy = randn(rng, 2, 3, 5, 13, dtype=dtype, device=device)
    attrs = dict(local_size=5, alpha=0.1, beta=0.75, knorm=2.0)
    dx = NG.lrn_grad(x, y, dy, 5, 0.1, 0.75, 2.0, out=poisoned(x.shape, dtype, device), block_c=8)
    R.check(dx, op_ref("netc.lrn_grad", attrs, [x, y, dy]), dtype)
    R.check(NG.lrn_grad(x, y, dy, 3, 0.1, 0.75, 2.0, block_c=16), R.lrn_grad(x, y, dy, 3, 0.1, 0.75, 2.0), dtype)


def test_batch_norm_training(device, rng):
    """Statistics (offset data: a one-pass sum of squares would cancel), the normalizing forward, the
    data gradient (with the sums computed, and read from the scale/shift gradients), the scale and
    shift gradients in one pass, the running statistics, each reduction split and deterministic."""
    big = randn(rng, 3, 5, 7, 9, device=device) * 0.5 + 300.0
    x = big[..., 1:7]                                   # 6 channels of 9
    ref_mean, ref_var = op_ref("netc.batch_stats", {}, [x])
    runs = []
    for split in (1, 4):
        mean, var = NG.batch_stats(x, mean=poisoned((6,), torch.float32, device),
                                   var=poisoned((6,), torch.float32, device), split=split, block_r=8, block_c=4)
        R.check(mean, ref_mean, what="mean")
        R.check(var, ref_var, what="var")
        runs.append((mean, var))
    again = NG.batch_stats(x, split=4, block_r=8, block_c=4)
    assert same_bits(runs[1][0], again[0]) and same_bits(runs[1][1], again[1])
    mean, var = runs[1]
    scale, shift = randn(rng, 6, device=device), randn(rng, 6, device=device)
    eps = 1e-3
    y = NG.batch_norm_train(x, mean, var, scale, shift, eps, out=poisoned(x.shape, torch.float32, device),
                            block_r=16, block_c=4)
    R.check(y, op_ref("netc.batch_norm", dict(epsilon=eps), [x, mean, var], {"scale": scale, "shift": shift}))
    R.check(NG.batch_norm_train(x, mean, var, scale, shift, eps, activation="relu"),
            torch.relu(R.batch_norm_train(x, mean, var, scale, shift, eps)))
    dy = randn(rng, *x.shape, device=device)
    ins = [x, mean, var, dy]
    ref_dx = op_ref("netc.batch_norm_grad", dict(epsilon=eps), ins, {"scale": scale})
    ref_ds = op_ref("netc.batch_norm_grad_scale", dict(epsilon=eps), ins)
    ds, dsh = NG.batch_norm_grad_scale(x, mean, var, dy, eps, out=poisoned((6,), torch.float32, device),
                                       grad_shift=poisoned((6,), torch.float32, device), split=3, block_r=8)
    R.check(ds, ref_ds, what="dscale")
    R.check(dsh, R.bias_grad(dy), what="dshift")
    for kw in (dict(split=3), dict(split=1), dict(grad_scale=ds, grad_shift=dsh)):
        dx = NG.batch_norm_grad(x, mean, var, dy, scale, eps, out=poisoned(x.shape, torch.float32, device),
                                block_r=8, **kw)
        R.check(dx, ref_dx, what=str(list(kw)))
    R.check(NG.batch_norm_grad(x, mean, var, dy, scale, eps, False),
            op_ref("netc.batch_norm_grad", dict(epsilon=eps, batch_stats=False), ins, {"scale": scale}))
    old_m, old_v = randn(rng, 6, device=device), torch.rand(6, generator=rng).to(device)
    rm, rv = old_m.clone(), old_v.clone()
    NG.running_stats_update(rm, rv, mean, var, count=105, momentum=0.9)
    ref = op_ref("netc.running_stats_update", dict(count=105, momentum=0.9), [mean, var],
                 {"mean": old_m, "var": old_v})
    R.check(rm, ref["mean"])
    R.check(rv, ref["var"])


def test_batch_norm_training_half_precision(device, rng):
    """bf16 activations, f32 per-channel vectors (set-dtype keeps batch norm's f32)."""
    dt = torch.bfloat16
    x = randn(rng, 4, 3, 5, 7, dtype=dt, device=device, scale=2)
    mean, var = NG.batch_stats(x, split=2, block_r=16)
    assert mean.dtype == torch.float32
    rm, rv = R.batch_stats(x)
    R.check(mean, rm)
    R.check(var, rv)
    scale, shift = randn(rng, 7, device=device), randn(rng, 7, device=device)
    y = NG.batch_norm_train(x, mean, var, scale, shift, out=poisoned(x.shape, dt, device))
    R.check(y, R.batch_norm_train(x, mean, var, scale, shift), dt)
    dy = randn(rng, 4, 3, 5, 7, dtype=dt, device=device)
    R.check(NG.batch_norm_grad(x, mean, var, dy, scale, split=2, block_r=16, out=poisoned(x.shape, dt, device)),
            R.batch_norm_grad(x, mean, var, dy, scale), dt)
    R.check(NG.batch_norm_grad_scale(x, mean, var, dy, split=2, block_r=16), R.batch_norm_grad_scale(x, mean, var, dy))


# --------------------------------------------------------------------------- softmax and losses

def test_softmax_grad(device, rng):
    big = randn(rng, 5, 40, device=device)
    y = torch.softmax(big[:, 2:39], dim=1)              # its own rows: stride 37
    dy = big[:, 1:38]                                   # rows of stride 40
    attrs = dict(input_shape=[5, 1, 1, 37])
    R.check(LG.softmax_grad(y, dy, [5, 1, 1, 37], out=poisoned((5, 1, 1, 37), torch.float32, device), block_c=16),
            op_ref("netc.softmax_grad", attrs, [y, dy]))
    yb, dyb = y.to(torch.bfloat16), dy.to(torch.bfloat16)
    R.check(LG.softmax_grad(yb, dyb, block_c=16, out_dtype=torch.float32), R.softmax_grad(yb, dyb, (5, 37)))


@pytest.mark.parametrize("ldt", [torch.int32, torch.int64, torch.int8, torch.float32], ids=str)
def test_softmax_loss_grad_class_indices(device, rng, ldt):
    x = randn(rng, 7, 3, 1, 5, device=device, scale=3)                 # 15 classes
    labels = torch.randint(0, 15, (7,), generator=rng).to(ldt).to(device)
    dloss = torch.tensor(0.7, device=device)
    for d in (None, dloss):
        out = poisoned(x.shape, torch.float32, device)
        ins = [x, labels] + ([d] if d is not None else [])
        R.check(LG.softmax_loss_grad(x, labels, d, out=out, block_c=4), op_ref("netc.softmax_loss_grad", {}, ins))


@pytest.mark.parametrize("soft", [False, True], ids=["one-hot", "soft"])
def test_softmax_loss_grad_targets_and_16bit(device, rng, soft):
    n, c = 6, 11
    x = randn(rng, n, c, dtype=torch.bfloat16, device=device, scale=3)
    if soft:
        t = torch.rand(n, c, generator=rng).to(device)                 # need not sum to one
    else:
        t = torch.nn.functional.one_hot(torch.randint(0, c, (n,), generator=rng), c).to(torch.int32).to(device)
    g = LG.softmax_loss_grad(x, t, out=poisoned((n, c), torch.float32, device), block_c=4)
    assert g.dtype == torch.float32                                   # f32_result
    R.check(g, R.softmax_loss_grad(x, t))


def test_softmax_loss_grad_bad_label_is_nan(device, rng):
    x = randn(rng, 3, 4, device=device)
    g = LG.softmax_loss_grad(x, torch.tensor([0, 4, 1], dtype=torch.int32, device=device))
    assert torch.isnan(g[1]).all() and not torch.isnan(g[0]).any() and not torch.isnan(g[2]).any()


@pytest.mark.parametrize("wrt", [0, 1])
def test_euclidean_loss_grad(device, rng, wrt):
    a = randn(rng, 6, 4, device=device)
    bbig = randn(rng, 6, 2, 3, device=device)
    b = bbig[..., :2]                                                  # [6, 2, 2]: not a view of [6, 4]
    b = b.contiguous()
    d = torch.tensor(1.5, device=device)
    shape = a.shape if wrt == 0 else b.shape
    R.check(LG.euclidean_loss_grad(a, b, d, wrt, out=poisoned(shape, torch.float32, device), block=8),
            op_ref("netc.euclidean_loss_grad", dict(wrt=wrt), [a, b, d]))
    ah, bh = a.to(torch.float16), b.to(torch.float16)
    R.check(LG.euclidean_loss_grad(ah, bh, None, wrt, block=8), R.euclidean_loss_grad(ah, bh, wrt))


# --------------------------------------------------------------------------- dropout

@pytest.mark.parametrize("seed,salt,keep,shape", [
    (0, 0, 0.5, (7, 13)),
    (12345, zlib.crc32(b"fc6.drop"), 0.3, (2, 3, 5, 7)),
    (2 ** 40 + 7, 2 ** 32 - 1, 0.9, (300,)),
    (-5, 17, 0.75, (4, 9)),
], ids=["zero", "crc-salt", "big-seed", "negative-seed"])
def test_dropout_mask_and_seeded_dropout(device, rng, seed, salt, keep, shape):
    """The mask is reference.dropout_mask bit for bit (as f32); x * mask from the seed equals x * that
    mask without storing it (the backward: dy * the same mask), in f32 and bf16."""
    s = torch.tensor(seed, dtype=torch.int64, device=device)
    ref = R.dropout_mask(seed, shape, keep, salt).float()
    mask = D.dropout_mask(s, shape, keep, salt, out=poisoned(shape, torch.float32, device), block=64)
    assert torch.equal(mask.cpu(), ref)
    mask2 = op_ref("netc.dropout_mask", dict(keep_prob=keep, shape=list(shape), salt=salt), [s.cpu()])
    assert torch.equal(mask2.float(), ref)
    x = randn(rng, *shape, device=device)
    assert torch.equal(D.dropout_seeded(x, s, keep, salt, out=poisoned(shape, torch.float32, device),
                                        block=64).cpu(), (x.cpu() * ref))
    assert torch.equal(D.dropout(x, mask, block=64).cpu(), x.cpu() * ref)
    xb = x.to(torch.bfloat16)
    yb = D.dropout_seeded(xb, seed, keep, salt, block=64).cpu()
    assert torch.equal(yb == 0, (xb.cpu() == 0) | (ref == 0))
    R.check(yb, xb.double().cpu() * ref.double(), torch.bfloat16)


def test_dropout_into_channel_slice(device, rng):
    x = randn(rng, 3, 4, 5, device=device)
    buf = poisoned((3, 4, 9), torch.float32, device)
    D.dropout_seeded(x, 99, 0.5, 3, out=buf, out_channel_offset=2, block=16)
    assert torch.equal(buf[..., 2:7].cpu(), x.cpu() * R.dropout_mask(99, (3, 4, 5), 0.5, 3).float())
    assert torch.isnan(buf[..., :2]).all() and torch.isnan(buf[..., 7:]).all()


# --------------------------------------------------------------------------- elementwise gradient ops

@pytest.mark.parametrize("act,slope", [("relu", 0.0), ("relu", 0.2), ("sigmoid", 0.0), ("tanh", 0.0), ("stanh", 0.0)])
def test_activation_grad(device, rng, act, slope):
    z = randn(rng, 3, 5, 7, device=device)
    z[0, 0, :3] = 0.0                                 # y == 0: relu passes nothing, leaky the slope
    y = (1.7159047 * torch.tanh(0.66666667 * z.double())).float() if act == "stanh" else \
        R.activation(z, act if not slope else "leaky_relu", slope).float()          # SINGA's scaled tanh
    big = randn(rng, 3, 5, 10, device=device)
    dy = big[..., 2:9]
    attrs = dict(activation=act, negative_slope=slope)
    R.check(E.activation_grad(y, dy, act, slope, out=poisoned(y.shape, torch.float32, device), block=32),
            op_ref("netc.activation_grad", attrs, [y, dy]))
    yb, dyb = y.to(torch.bfloat16), dy.to(torch.bfloat16)
    R.check(E.activation_grad(yb, dyb, act, slope, block=32), R.activation_grad(yb, dyb, act, slope), torch.bfloat16)


def test_activation_grads_chain(device, rng):
    """Gradient ops in an elementwise chain: through a relu, a gradient sum, a tanh, a leaky relu."""
    y1 = torch.relu(randn(rng, 2, 5, 3, 7, device=device))
    y2 = torch.tanh(randn(rng, 2, 5, 3, 7, device=device))
    other = randn(rng, 2, 5, 3, 7, device=device)
    dy = randn(rng, 2, 5, 3, 7, device=device)
    ops_ = [("relu_grad", y1), ("add", other), ("tanh_grad", y2), ("leaky_relu_grad", y1, 0.3), ("mul", 0.5)]
    got = E.elementwise_chain(dy, ops_, out=poisoned(dy.shape, torch.float32, device), block=64)
    ref = R.activation_grad(y1, dy, "relu") + other
    ref = R.activation_grad(y1, R.activation_grad(y2, ref, "tanh"), "relu", 0.3) * 0.5
    R.check(got, ref)
    with pytest.raises(ValueError, match="takes the activation's output"):
        E.elementwise_chain(dy, [("relu_grad", y1[0])])


def test_gradient_accumulation_is_the_elementwise_sum(device, rng):
    a, b = randn(rng, 2, 3, 5, device=device), randn(rng, 2, 3, 5, device=device)
    R.check(E.elementwise("sum", [a, b], out=poisoned(a.shape, torch.float32, device), block=16),
            op_ref("netc.elementwise", dict(operation="sum"), [a, b]))


def test_narrow_and_pad_dim(device, rng):
    x = randn(rng, 2, 5, 3, 4, device=device)
    for dim, start, length in ((1, 1, 3), (3, 2, 2), (0, 1, 1), (-1, 0, 4)):
        attrs = dict(dim=dim, start=start, length=length)
        shape = list(x.shape)
        shape[dim] = length
        R.check(E.narrow(x, dim, start, length, out=poisoned(shape, torch.float32, device), block=16),
                op_ref("netc.narrow", attrs, [x]))
    xs = x.permute(0, 3, 1, 2)                        # strided input
    R.check(E.narrow(xs, 2, 1, 2, block=16), R.narrow(xs, 2, 1, 2))
    for dim, before, after in ((1, 2, 2), (3, 0, 3), (-1, 1, 0)):
        shape = list(x.shape)
        shape[dim] += before + after
        big = poisoned(shape[:-1] + [shape[-1] + 3], torch.float32, device)
        out = big[..., 1:1 + shape[-1]]               # every element written, zeros too
        R.check(E.pad_dim(x, dim, before, after, out=out, block=16),
                op_ref("netc.pad_dim", dict(dim=dim, before=before, after=after), [x]))
        assert torch.isnan(big[..., 0]).all()
    xb = x.to(torch.bfloat16)
    R.check(E.pad_dim(xb, 2, 1, 1, block=16), R.pad_dim(xb, 2, 1, 1), torch.bfloat16)


@pytest.mark.parametrize("n_inputs", [2, 3, 5])
def test_elementwise_max_grad(device, rng, n_inputs):
    xs = [torch.round(randn(rng, 4, 3, 6, device=device)) for _ in range(n_inputs)]   # ties
    dy = randn(rng, 4, 3, 6, device=device)
    for i in range(n_inputs):
        R.check(E.elementwise_max_grad(xs, dy, i, out=poisoned(dy.shape, torch.float32, device), block=16),
                op_ref("netc.elementwise_max_grad", dict(index=i), xs + [dy]), what=f"operand {i}")
    xb = [t.to(torch.bfloat16) for t in xs]
    R.check(E.elementwise_max_grad(xb, dy.to(torch.bfloat16), 0, block=16),
            R.elementwise_max_grad(xb, dy.to(torch.bfloat16), 0), torch.bfloat16)


# --------------------------------------------------------------------------- launch=False and AOT

def test_launch_false_returns_the_calls(device, rng):
    x = randn(rng, 2, 6, 6, 4, device=device)
    dz = randn(rng, 2, 6, 6, 5, device=device)
    calls = CG.conv2d_grad_filter(x, dz, [3, 3, 4, 5], bias=True, split=3, launch=False, block_m=64, block_n=16,
                                  block_k=16)
    assert [c.kernel.__name__ for c in calls] == ["conv2d_grad_filter_kernel", "sum_partials_kernel"]
    assert calls[0].constexprs["SPLIT"] == 3 and calls[0].grid == (3,)    # one tile, three row ranges
    for c in calls:
        out = c.launch()
    R.check(out[0], R.conv2d_grad_filter(x, dz, (3, 3), [1, 1, 1, 1], "SAME"))
    call = CG.conv2d_grad_data(dz, randn(rng, 3, 3, 4, 5, device=device), (2, 11, 11, 4), [1, 2, 2, 1], "SAME",
                               launch=False)
    assert call.grid[1] == 4                                               # the stride's 2x2 phases


def test_caller_workspaces(device, rng):
    """Codegen places the partial sums as scratch: a caller's (NaN-poisoned) workspace is used, passed whole."""
    x = randn(rng, 2, 6, 6, 4, device=device)
    dz = randn(rng, 2, 6, 6, 5, device=device)
    ws = poisoned((CG.conv2d_grad_filter_workspace((3, 3, 4, 5), 3, bias=True),), torch.float32, device)
    calls = CG.conv2d_grad_filter(x, dz, [3, 3, 4, 5], bias=True, split=3, workspace=ws, launch=False,
                                  block_m=64, block_n=16, block_k=16)
    assert any(a is ws for a in calls[0].args)
    for c in calls:
        dw, db = c.launch()
    R.check(dw, R.conv2d_grad_filter(x, dz, (3, 3), [1, 1, 1, 1], "SAME"))
    R.check(db, R.bias_grad(dz))
    xb, dy = randn(rng, 3, 4, 5, 6, device=device), randn(rng, 3, 4, 5, 6, device=device)
    mean, var = R.batch_stats(xb)
    mean, var, scale = mean.float(), var.float(), randn(rng, 6, device=device)
    for split in (1, 3):
        ws = poisoned(((2 + (2 * split if split > 1 else 0)) * 6,), torch.float32, device)
        calls = NG.batch_norm_grad(xb, mean, var, dy, scale, split=split, workspace=ws, block_r=8, launch=False)
        assert any(a is ws for a in calls[0].args)
        for c in calls:
            dx = c.launch()
        R.check(dx, R.batch_norm_grad(xb, mean, var, dy, scale))


def _aot_names():
    from netc.kernels.aot import training_calls
    return sorted(training_calls())


@pytest.mark.parametrize("half", [0, 1])
def test_training_kernels_compile_for_sm90(tmp_path, nvidia_toolchain, half):
    """Every training kernel specialization of aot.training_calls() compiles to an sm_90 cubin (in a
    subprocess: this session imported the kernels for the interpreter); two halves run in parallel."""
    nvidia_toolchain(90)
    names = _aot_names()[half::2]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")
    env["TRITON_DEFAULT_FP_FUSION"] = env.get("TRITON_DEFAULT_FP_FUSION", "1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    p = subprocess.run([sys.executable, "-m", "netc.kernels.aot", "--json", "--training", "--arch", "90", "--only",
                        *names], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"AOT compilation failed:\n{p.stdout}\n{p.stderr[-4000:]}"
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert set(r["kernels"]) == set(names)
    for name, k in r["kernels"].items():
        assert k["elf"] and k["cubin_bytes"] > 1000, (name, k)
        assert k["ptx_params"] == k["params"] + 2, (name, k)
    for name in names:                         # 16-bit products run on the tensor cores, f32 accumulation
        if ("bf16" in name or "f16" in name) and name.startswith(("conv_grad", "deconv")):
            assert any("wgmma" in i and ".f32." in i for i in r["kernels"][name]["mma"]), (name, r["kernels"][name])
