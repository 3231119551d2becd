"""The ChannelPermute kernel (netc/kernels/channel_permute.py) against the op's float64 reference
(netc/ops/channel_permute.py) under Triton's interpreter: one channel, ShuffleNet's shuffles, random orders,
channels off the tiles, tiles smaller than the problem, a rank-1 value, a strided output (a channel slice of a
wider NHWC buffer), 16-bit values; outputs NaN-poisoned so every element is checked."""
import random

import pytest

pytest.importorskip("triton", reason="Triton is not importable; kernel tests need it")

import torch  # noqa: E402

from netc.kernels.channel_permute import channel_permute  # noqa: E402
from netc.ops import lookup  # noqa: E402
from netc.ops.channel_permute import inverse, shuffle_order  # noqa: E402

NAN = float("nan")


def _ref(x, order):
    return lookup("netc.channel_permute").reference({"order": order}, [x.cpu().double()], {})


def _order(kind, c):
    if kind == "shuffle":
        return shuffle_order(c, 3 if c % 3 == 0 else 1)
    order = list(range(c))
    random.Random(c).shuffle(order)
    return order


@pytest.mark.parametrize("shape,blocks", [
    ((1,), (None, None)), ((2, 3, 3, 1), (None, None)), ((2, 4, 5, 12), (4, 8)), ((3, 130), (2, 64)),
    ((1, 7, 7, 240), (None, None)), ((5, 6), (1, 1)), ((9,), (None, 4)),
], ids=str)
@pytest.mark.parametrize("kind", ["shuffle", "random"])
def test_channel_permute(device, rng, shape, blocks, kind):
    x = torch.randn(shape, generator=rng).to(device)
    order = _order(kind, shape[-1])
    out = torch.full(shape, NAN, device=device)
    got = channel_permute(x, order, out=out, block_m=blocks[0], block_n=blocks[1])
    assert torch.equal(got.cpu().double(), _ref(x, order))       # a gather: exact
    assert torch.equal(channel_permute(got, inverse(order)).cpu(), x.cpu())     # the gradient's order undoes it


def test_shuffle_order_is_onnx_reshape_transpose_reshape():
    """shuffle_order(c, g) is what torch computes for ShuffleNet's channel_shuffle (NCHW): view [N, g, C/g, H, W],
    transpose(1, 2), flatten back."""
    x = torch.randn(2, 12, 3, 3)
    for g in (1, 2, 3, 4, 6, 12):
        want = x.view(2, g, 12 // g, 3, 3).transpose(1, 2).reshape(2, 12, 3, 3)
        assert torch.equal(x[:, shuffle_order(12, g)], want)


def test_strided_out_half_and_bad_arguments(device, rng):
    x = torch.randn(2, 3, 3, 6, generator=rng).to(device)
    order = shuffle_order(6, 2)
    wide = torch.full((2, 3, 3, 10), NAN, device=device)
    channel_permute(x, order, out=wide[..., 2:8])
    assert torch.equal(wide[..., 2:8].cpu().double(), _ref(x, order))
    assert torch.isnan(wide[..., :2]).all() and torch.isnan(wide[..., 8:]).all()
    h = x.to(torch.float16)
    assert torch.equal(channel_permute(h, order).cpu(), _ref(h.float(), order).to(torch.float16))
    with pytest.raises(ValueError):
        channel_permute(x, [0, 1, 2, 3, 4, 4])
    with pytest.raises(ValueError):
        channel_permute(x, [0, 1, 2])
    with pytest.raises(ValueError):
        channel_permute(x, torch.arange(6, dtype=torch.int64, device=device))
    with pytest.raises(ValueError):
        channel_permute(x.transpose(2, 3), list(range(3)))
    with pytest.raises(ValueError):
        channel_permute(x, order, out=torch.empty(2, 3, 3, 5, device=device))


def test_a_training_step_through_the_kernels_matches_the_reference(device):
    """A convolution, a shuffle (groups: its gradient the shuffle of C/g groups), a permutation (order: its gradient
    the inverse order), a convolution and a loss compiled for training: the forward and the gradients run as kernels
    on the interpreter, one SGD step within f32 tolerance of the f64 reference."""
    if device != "cpu":
        pytest.skip("the interpreter target runs on the CPU")
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend.dsl import parse_nd
    from netc.pipelines import Options, Training, compile
    from netc.runtime.interp import InterpTrainer, compare_step
    from netc.runtime.train import ReferenceTrainer
    src = f"""network cp {{
  input x: f32[2, 4, 4, 6]
  input label: f32[2, 4, 4, 6]
  c = Convolution(x) {{ filter: [3, 3, 6, 6], strides: [1, 1, 1, 1], padding: "SAME" }}
  s = ChannelPermute(c) {{ groups: 2 }}
  t = ChannelPermute(s) {{ order: [5, 0, 4, 1, 3, 2] }}
  d = Convolution(t) {{ filter: [1, 1, 6, 6], strides: [1, 1, 1, 1], padding: "SAME" }}
  loss = EuclideanLoss(d, label)
}}
"""
    diag = DiagnosticEngine()
    m = parse_nd(src, "cp.nd", diag)
    compile(m, Options(phase="train", training=Training(optimizer={"name": "sgd"})), diag)
    assert not diag.has_errors(), diag.diagnostics
    net = next(n.attrs["sym_name"] for n in m.networks() if "gradients" in n.attrs)
    r = compare_step(InterpTrainer(m, net, seed=0, blocks="large"),
                     ReferenceTrainer(m, net, seed=0, dtype=torch.float64), None, 0.01, 1e-4)
    assert r["loss_err"] < 1e-6 and r["grad_err"] < 1e-5 and r["param_err"] < 1e-6, r


@pytest.mark.parametrize("body,message", [
    ("order: [0, 2, 4, 1, 3, 3]", "order is not a permutation of 0 .. 5 (missing 5)"),
    ("order: [0, 2, 1]", "order has 3 entries for 6 channels (the last axis of [2, 4, 4, 6])"),
    ("groups: 4", "groups 4 does not divide the 6 channels"),
    ("groups: 2, order: [0, 1, 2, 3, 4, 5]", "takes an order or groups (a channel shuffle), one of the two"),
    ("", "takes an order or groups (a channel shuffle), one of the two"),
])
def test_the_shape_rule_refuses_what_is_no_permutation(body, message):
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend.dsl import parse_nd
    from netc.pipelines import Options, inference
    src = ("network cp {\n  input x: f32[2, 4, 4, 6]\n"
           f"  s = ChannelPermute(x){' { ' + body + ' }' if body else ''}\n  output s\n}}\n")
    from netc.diagnostics import NetcError
    diag = DiagnosticEngine()
    with pytest.raises(NetcError) as e:
        inference(parse_nd(src, "cp.nd", diag), Options(phase="test"), diag)
    errors = [d for d in e.value.diagnostics if d.severity == "error"]
    assert len(errors) == 1 and message in errors[0].message and errors[0].loc.line == 3, e.value.diagnostics
