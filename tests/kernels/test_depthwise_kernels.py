"""The depthwise convolution's kernels (kernels/depthwise.py) against netc.depthwise_conv2d's float64 reference
and its gradient ops': channel multipliers 1-3, strides 1-3, VALID, SAME (asymmetric, and a crop), explicit
padding, bias and the fused activations, a concat-slice output, 16-bit inputs. Outputs are NaN-poisoned."""
import pytest

pytest.importorskip("triton", reason="Triton is not importable; kernel tests need it")

import torch  # noqa: E402

from netc.kernels.depthwise import (depthwise_conv2d, depthwise_conv2d_grad_data,  # noqa: E402
                                    depthwise_conv2d_grad_filter)
from netc.ops import lookup  # noqa: E402
from netc.ops import reference as R  # noqa: E402

NAN = float("nan")
BLOCKS = dict(block_p=16, block_c=4)
# (filter h, w, multiplier, strides, padding) on a 2x7x9x5 input
CASES = [
    (3, 3, 1, (1, 1), "SAME"),
    (3, 3, 2, (2, 2), "SAME"),
    (2, 2, 1, (2, 2), "SAME"),      # asymmetric: the bottom/right pad larger
    (1, 1, 3, (3, 3), "SAME"),      # a negative pad: a crop
    (3, 2, 2, (1, 2), "VALID"),
    (5, 3, 1, (3, 1), [2, 1]),
    (3, 3, 3, (2, 3), [1, 0]),
]


def attrs(kh, kw, c, m, s, pad, act="none"):
    return {"filter": [kh, kw, c, m], "strides": [1, *s, 1], "padding": pad, "activation": act, "bias": True}


def data(kh, kw, m, seed, device, c=5):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 7, 9, c, generator=g)
    w = torch.randn(kh, kw, c, m, generator=g)
    b = torch.randn(c * m, generator=g)
    return x.to(device), w.to(device), b.to(device)


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("act", ["none", "relu", "tanh"])
def test_forward(case, act, device):
    kh, kw, m, s, pad = case
    x, w, b = data(kh, kw, m, 1, device)
    a = attrs(kh, kw, 5, m, s, pad, act)
    want = lookup("netc.depthwise_conv2d").reference(a, [x], {"weight": w, "bias": b})
    out = torch.full(tuple(want.shape), NAN, device=device)
    y = depthwise_conv2d(x, w, b, strides=a["strides"], padding=pad, activation=act, out=out, **BLOCKS)
    R.check(y, want, torch.float32)


def test_forward_into_a_channel_slice_and_in_16_bits(device):
    x, w, b = data(3, 3, 2, 2, device)
    want = lookup("netc.depthwise_conv2d").reference(attrs(3, 3, 5, 2, (2, 1), "SAME"), [x], {"weight": w, "bias": b})
    buf = torch.full((2, want.shape[1], want.shape[2], 14), NAN, device=device)
    y = depthwise_conv2d(x, w, b, strides=[1, 2, 1, 1], padding="SAME", out=buf, out_channel_offset=3, **BLOCKS)
    R.check(y, want, torch.float32)
    assert torch.isnan(buf[..., :3]).all() and torch.isnan(buf[..., 13:]).all()
    for dt in (torch.float16, torch.bfloat16):
        h = depthwise_conv2d(x.to(dt), w.to(dt), b.to(dt), strides=[1, 2, 1, 1], padding="SAME", **BLOCKS)
        R.check(h, want, dt)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_gradients(case, device):
    kh, kw, m, s, pad = case
    x, w, _ = data(kh, kw, m, 3, device)
    a = attrs(kh, kw, 5, m, s, pad)
    y_shape = lookup("netc.depthwise_conv2d").infer(a, [tuple(x.shape)])
    dz = torch.randn(*y_shape, generator=torch.Generator().manual_seed(4)).to(device)
    want_dx = lookup("netc.depthwise_conv2d_grad_data").reference(dict(a, input_shape=list(x.shape)), [dz],
                                                                  {"weight": w})
    want_dw = lookup("netc.depthwise_conv2d_grad_filter").reference(a, [x, dz], {})
    dx = depthwise_conv2d_grad_data(dz, w, tuple(x.shape), a["strides"], pad,
                                    out=torch.full(tuple(x.shape), NAN, device=device), **BLOCKS)
    R.check(dx, want_dx, torch.float32)
    dw = depthwise_conv2d_grad_filter(x, dz, (kh, kw), a["strides"], pad,
                                      out=torch.full(tuple(w.shape), NAN, device=device), **BLOCKS)
    R.check(dw, want_dw, torch.float32)


NET = """
network dw {
  input data: f32[2, 9, 8, 6]
  c = Convolution(data) { filter: [1, 1, 6, 8], activation: relu }
  d = DepthwiseConvolution(c) { filter: [3, 3, 8, 2], strides: [1, 2, 2, 1], padding: SAME, activation: relu }
  e = DepthwiseConvolution(d) { filter: [3, 2, -1, 1], padding: [1, 0], bias: false }
  p = AvgPool(e) { ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1] }
  f = InnerProduct(p) { num_outputs: 5 }
}
"""


def test_a_training_step_on_the_interpreter_target(tmp_path):
    """The lowering rows (kernels/depthwise_lowering.py): the forward (a multiplier, no bias, a fused ReLU) and a
    training step's gradients on the interpreter target equal the reference executor's (netc run --compare)."""
    import subprocess
    import sys
    path = tmp_path / "dw.nd"
    path.write_text(NET)
    r = subprocess.run([sys.executable, "-m", "netc", "run", str(path), "--target", "interp", "--train", "--steps", "1",
                        "--loss", "softmax", "--compare"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "on the interpreter target: ok" in r.stdout
