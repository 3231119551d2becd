"""The reference executor (netc.runtime.reference) and every op's reference():

* each op's reference output has exactly its shape rule's shape, on random shapes and attributes;
* numerics against hand-computed values, plain torch, and netc.ops.reference;
* networks: a residual add, a concat, share_from aliasing, seeded random inputs and parameters;
* every examples/*.nd runs (LeNet and the GAN as they are; the big ones with batch 1 and channel
  widths divided by 8, which keeps every shape rule valid);
* `netc run --reference`, including its user errors.
"""
from __future__ import annotations

import random
import re
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from netc.cli import main
from netc.diagnostics import NetcError
from netc.frontend import load_text
from netc.ops import reference as R
from netc.ops import ShapeError, all_ops, lookup
from netc import pipelines
from netc.pipelines import Options
from netc.runtime import module_params, run_module, run_reference

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.nd"))


def build(src: str, phase: str = "train"):
    m = load_text(src, "test.nd")
    pipelines.inference(m, Options(phase=phase))
    return m


def attrs(name: str, **given) -> dict:
    d = lookup("netc." + name)
    a = {k: s.default for k, s in d.attrs.items() if not s.required}
    a.update(given)
    return a


def ref(name: str, a: dict, ins: list, params=None):
    return lookup("netc." + name).reference(a, ins, params or {})


# -- shape rule == reference shape, for every op --------------------------------------------------

def _case(op: str, rng: random.Random):
    """(attrs, input shapes) for a random instance of `op`."""
    n = rng.randint(1, 3)
    img = (n, rng.randint(1, 9), rng.randint(1, 9), rng.randint(1, 4))
    pad = rng.choice(["VALID", "SAME", [rng.randint(0, 2), rng.randint(0, 2)]])
    act = rng.choice(["none", "relu", "sigmoid", "tanh"])
    any_shape = tuple(rng.randint(1, 4) for _ in range(rng.randint(2, 4)))
    if op == "conv2d":
        f = [rng.randint(1, 4), rng.randint(1, 4), rng.choice([img[3], -1]), rng.randint(1, 5)]
        return attrs(op, filter=f, strides=[1, rng.randint(1, 3), rng.randint(1, 3), 1], padding=pad,
                     activation=act, normalizer=rng.choice(["none", "batch_norm"])), [img]
    if op == "depthwise_conv2d":
        f = [rng.randint(1, 4), rng.randint(1, 4), rng.choice([img[3], -1]), rng.randint(1, 3)]
        return attrs(op, filter=f, strides=[1, rng.randint(1, 3), rng.randint(1, 3), 1], padding=pad,
                     activation=act, bias=rng.choice([True, False])), [img]
    if op == "deconv2d":
        out = (n, rng.randint(2, 9), rng.randint(2, 9), rng.randint(1, 4))
        f = [rng.randint(1, 4), rng.randint(1, 4), out[3], rng.randint(1, 4)]
        s = [1, rng.randint(1, 3), rng.randint(1, 3), 1]
        x = lookup("netc.conv2d").infer({"filter": f, "strides": s, "padding": pad}, [out])
        return attrs(op, filter=f, strides=s, padding=pad, output_shape=list(out), activation=act), [x]
    if op in ("maxpool", "avgpool"):
        pad = rng.choice([pad, [rng.randint(0, 2) for _ in range(4)]])     # (a pool's [top, left, bottom, right] too)
        return attrs(op, ksize=[1, rng.randint(1, 4), rng.randint(1, 4), 1],
                     strides=[1, rng.randint(1, 3), rng.randint(1, 3), 1], padding=pad), [img]
    if op == "upsample2d":
        return attrs(op, ksize=[1, rng.randint(1, 3), rng.randint(1, 3), 1]), [img]
    if op == "inner_product":
        return attrs(op, num_outputs=rng.randint(1, 6), activation=act), [any_shape]
    if op == "relu":
        return attrs(op, negative_slope=rng.choice([0.0, 0.1])), [any_shape]
    if op == "clip":
        return attrs(op, **rng.choice([{}, {"min": -0.5, "max": 0.25}])), [any_shape]
    if op in ("sigmoid", "tanh", "stanh", "dropout", "batch_norm", "softmax", "opaque", "identity", "dummy", "rbm_visible"):
        return attrs(op, **({"type": "Mystery"} if op == "opaque" else {})), [any_shape]
    if op == "lrn":
        return attrs(op, local_size=rng.choice([1, 3, 5])), [img]
    if op == "concat":
        d = rng.randrange(len(any_shape))
        shapes = [tuple(rng.randint(1, 4) if j == d else s for j, s in enumerate(any_shape))
                  for _ in range(rng.randint(2, 4))]
        return attrs(op, dim=rng.choice([d, d - len(any_shape)])), shapes
    if op == "elementwise":
        return attrs(op, operation=rng.choice(["sum", "product", "max"])), [any_shape] * rng.randint(2, 3)
    if op in ("argsort", "accuracy"):
        x = (n, rng.randint(1, 6), rng.randint(1, 3))
        ins = [x] if op == "argsort" else [x, rng.choice([(n,), (n, 1)])]
        return attrs(op, topk=rng.randint(1, 3)), ins
    if op == "slice":
        d, k = rng.randrange(len(any_shape)), rng.randint(1, 3)
        x = tuple(s * k if j == d else s for j, s in enumerate(any_shape))
        return attrs(op, dim=rng.choice([d, d - len(x)]), num_slices=k, index=rng.randrange(k)), [x]
    if op == "reshape":
        x = (n, 2, 3, rng.randint(1, 4))
        return attrs(op, output_shape=rng.choice([[-1, -1], [n, -1], [-1, 6, x[3]], [n * 6 * x[3]]])), [x]
    if op == "softmax_loss":
        c = rng.randint(1, 5)
        if rng.random() < 0.4:   # per step of a sequence [T, B, C]: labels [T, B] (or one-hot), with lengths or not
            t, b = rng.randint(1, 4), rng.randint(1, 3)
            if rng.random() < 0.5:
                return attrs(op), [(t, b, c), rng.choice([(t, b), (t, b, c)]), (b,)]
            return attrs(op), [(t, b, c), (t, b)]
        return attrs(op), [(n, c), rng.choice([(n,), (n, 1), (n, c)])]
    if op == "euclidean_loss":
        if rng.random() < 0.4:   # with lengths: time-major [T, B, ...]
            return attrs(op), [any_shape, any_shape, (any_shape[1],)]
        return attrs(op), [any_shape, (any_shape[0], -1)]
    if op == "binomial_ce":    # Brainstorm's BinomialCrossEntropy (probabilities) / SigmoidCE (logits)
        return attrs(op, logits=rng.choice([True, False]), batch_axis=rng.choice([0, 1])), \
            [any_shape, rng.choice([any_shape, any_shape[::-1]])]
    if op == "mask":           # Brainstorm's Mask: the input's shape, or its first k axes and a 1
        k = rng.randint(1, len(any_shape))
        return attrs(op), [any_shape, rng.choice([any_shape, tuple(any_shape[:k]) + (1,)])]
    if op == "squared_difference":
        return attrs(op, factor=rng.choice([1.0, 0.5, -2.0])), [any_shape, rng.choice([any_shape, any_shape[::-1]])]
    if op == "deltas_scaling":
        return attrs(op, factor=rng.choice([1.0, -1.0, 2.5])), [any_shape]
    if op == "decay_loss":     # Brainstorm's L1Decay / L2Decay
        return attrs(op, norm=rng.choice(["l1", "l2", "sum"]), batch_axis=rng.choice([0, 1, 4])), [rng.choice([any_shape, ()])]
    if op == "seq_pool":
        t, b = rng.randint(1, 4), rng.randint(1, 3)
        x = (t, b) + tuple(rng.randint(1, 3) for _ in range(rng.randint(0, 2)))
        return attrs(op, mode=rng.choice(["last", "first", "max", "mean"])), [x] + rng.choice([[], [(b,)]])
    if op == "seq_reverse":
        t, b = rng.randint(1, 4), rng.randint(1, 3)
        x = (t, b) + tuple(rng.randint(1, 3) for _ in range(rng.randint(0, 2)))
        return attrs(op), [x] + rng.choice([[], [(b,)]])
    if op == "channel_permute":   # a permutation of the last axis (a shuffle of 1 .. 3 groups among them)
        c = rng.randint(1, 7)
        order = list(range(c))
        rng.shuffle(order)
        a = attrs(op, groups=rng.choice([g for g in (1, 2, 3) if c % g == 0])) if rng.random() < 0.4 else \
            attrs(op, order=order)
        return a, [rng.choice([any_shape[:-1] + (c,), (n, c), (c,)])]
    if op == "seq_mask":     # the lengths are required
        t, b = rng.randint(1, 4), rng.randint(1, 3)
        return attrs(op), [(t, b) + tuple(rng.randint(1, 3) for _ in range(rng.randint(0, 2))), (b,)]
    if op == "gru":
        t, b, h = rng.randint(1, 4), rng.randint(1, 3), rng.randint(1, 5)
        x = rng.choice([(t,), ()]) + (b,) + tuple(rng.randint(1, 3) for _ in range(rng.randint(1, 2)))  # or one step
        state = rng.choice([[], [(b, h)]])   # the zero context, or an initial h0
        return attrs(op, dim_hidden=h, bias=rng.choice([True, False]),
                     linear_before_reset=rng.choice([True, False])), [x] + state
    if op == "highway":        # Brainstorm's Highway: H, T and x of one shape
        return attrs(op), [any_shape] * 3
    if op in ("lstm", "clockwork_lstm"):
        t, b = rng.randint(1, 4), rng.randint(1, 3)
        x = (t, b) + tuple(rng.randint(1, 3) for _ in range(rng.randint(1, 2)))
        h = rng.randint(1, 4)
        state = rng.choice([[], [(b, h), (b, h)]])   # the zero context, or an initial h0 and c0
        cell = {"cell_activation": rng.choice(["tanh", "sigmoid"])} if op == "lstm" and rng.random() < 0.3 else {}
        return attrs(op, size=h, activation=rng.choice(["tanh", "sigmoid", "relu", "none"]), **cell), [x] + state
    if op in ("recurrent", "clockwork"):
        t, b = rng.randint(1, 4), rng.randint(1, 3)
        x = (t, b) + tuple(rng.randint(1, 3) for _ in range(rng.randint(1, 2)))
        h = rng.randint(1, 4)
        state = rng.choice([[], [(b, h)]])   # the zero context, or an initial h0
        return attrs(op, size=h, activation=rng.choice(["tanh", "sigmoid", "relu", "none"])), [x] + state
    if op == "embedding":
        return attrs(op, num_embeddings=rng.randint(1, 9), dim=rng.randint(1, 5)), [rng.choice([(n,), any_shape])]
    if op == "one_hot":
        return attrs(op, depth=rng.randint(1, 9)), [rng.choice([(n,), any_shape])]
    raise AssertionError(f"no random case for op '{op}': add one (and a reference) in this test")


def _random_input(shape, op, i, ins, a=None):
    if op == "one_hot":
        return torch.randint(0, a["depth"], shape, dtype=torch.int64 if len(shape) % 2 else torch.int32)
    if op == "embedding":
        return torch.randint(0, a["num_embeddings"], shape, dtype=torch.int64 if len(shape) % 2 else torch.int32)
    if op == "accuracy" and i == 1:
        return torch.randint(0, max(1, ins[0][1] * ins[0][2]), shape, dtype=torch.int32)
    if op in ("seq_pool", "seq_reverse", "seq_mask", "softmax_loss", "euclidean_loss") and i == (2 if "loss" in op else 1):  # lengths
        return torch.randint(1, ins[0][0] + 1, shape, dtype=torch.int32)
    if op == "softmax_loss" and i == 1 and (len(ins) == 3 or len(ins[0]) == 3):   # per step
        c = ins[0][2]
        if len(shape) == 3 and c > 1:
            return F.one_hot(torch.randint(0, c, shape[:2]), c).to(torch.int32)
        return torch.randint(0, c, shape, dtype=torch.int32)
    if op == "softmax_loss" and i == 1:
        c = ins[0][1]
        if len(shape) == 2 and shape[1] == c and c > 1:
            return F.one_hot(torch.randint(0, c, (shape[0],)), c).to(torch.int32)
        return torch.randint(0, c, shape, dtype=torch.int32)
    return torch.randn(shape, dtype=torch.float64)


@pytest.mark.parametrize("opdef", [o for o in all_ops() if o.name != "input" and not o.training_only
                                   and not getattr(o, "comm", False)],   # communication: tests/test_partition.py
                         ids=lambda o: o.name)
def test_reference_shape_equals_shape_rule(opdef):
    rng = random.Random(zlib.crc32(opdef.name.encode()))
    checked = 0
    for _ in range(40):
        try:
            a, ins = _case(opdef.name, rng)
            if opdef.name == "euclidean_loss":
                ins = [ins[0], (ins[0][0],) + tuple(ins[0][1:])[::-1]]  # same count, other shape
            out = opdef.infer(a, ins)
        except ShapeError:
            continue
        xs = [_random_input(s, opdef.name, i, ins, a) for i, s in enumerate(ins)]
        ps = {k: torch.randn(s, dtype=torch.float64) for k, s in opdef.param_shapes(a, ins, out).items()}
        y = opdef.reference(a, xs, ps)
        assert tuple(y.shape) == tuple(out), (opdef.name, a, ins)
        assert torch.isfinite(y).all()
        checked += 1
    assert checked >= 10, f"{opdef.name}: only {checked} valid random cases"


def test_input_has_no_reference_but_says_why():
    with pytest.raises(NotImplementedError, match="fed by the caller"):
        lookup("netc.input").reference({}, [], {})


# -- numerics ---------------------------------------------------------------------------------------

def test_conv2d_matches_torch_and_applies_the_fused_activation():
    x, w, b = torch.randn(2, 7, 7, 3, dtype=torch.float64), torch.randn(3, 3, 3, 4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    y = ref("conv2d", attrs("conv2d", filter=[3, 3, 3, 4], padding=[1, 1], strides=[1, 2, 2, 1], activation="relu"),
            [x], {"weight": w, "bias": b})
    want = torch.relu(F.conv2d(x.permute(0, 3, 1, 2), w.permute(3, 2, 0, 1), b, stride=2, padding=1)).permute(0, 2, 3, 1)
    torch.testing.assert_close(y, want)
    # SAME with a negative (cropping) pad: kernel 1, stride 2 on 8 -> pad ((4-1)*2 + 1 - 8)//2 = -1
    x = torch.randn(1, 8, 8, 2, dtype=torch.float64)
    w = torch.randn(1, 1, 2, 3, dtype=torch.float64)
    y = ref("conv2d", attrs("conv2d", filter=[1, 1, 2, 3], strides=[1, 2, 2, 1], activation="tanh",
                            normalizer="batch_norm"), [x], {"weight": w})
    torch.testing.assert_close(y, torch.tanh(x[:, 1::2, 1::2, :] @ w[0, 0]))
    torch.testing.assert_close(y, R.conv2d(x, w, strides=[1, 2, 2, 1], padding="SAME", activation="tanh"))


@pytest.mark.parametrize("pad,h,k,s", [("SAME", 8, 1, 2), ("SAME", 7, 3, 2), ("VALID", 9, 3, 2), ([1, 1], 6, 3, 1),
                                       ("SAME", 5, 4, 3)])
def test_deconv2d_is_the_adjoint_of_the_forward_convolution(pad, h, k, s):
    out = [2, h, h + 1, 3]
    f = [k, k, 3, 5]
    a = attrs("deconv2d", filter=f, strides=[1, s, s, 1], padding=pad, output_shape=out)
    xs = lookup("netc.deconv2d")._forward_conv(a)  # the equivalent forward conv
    fwd = lambda t, w: R.conv2d(t, w, strides=xs["strides"], padding=xs["padding"])  # noqa: E731
    w = torch.randn(*f, dtype=torch.float64)
    x = torch.randn(*lookup("netc.conv2d").infer(xs, [tuple(out)]), dtype=torch.float64)
    y = ref("deconv2d", a, [x], {"weight": w, "bias": torch.randn(5, dtype=torch.float64)})
    t = torch.zeros(out, dtype=torch.float64, requires_grad=True)
    (vjp,) = torch.autograd.grad(fwd(t, w), t, x)
    torch.testing.assert_close(y, vjp)


@pytest.mark.parametrize("pad,s,m", [("SAME", 2, 1), ("VALID", 1, 3), ([1, 2], 2, 2), ("SAME", 3, 2)])
def test_depthwise_conv2d_is_a_conv2d_with_a_block_diagonal_filter(pad, s, m):
    """Output channel c*M + k is channel c convolved with filter [:, :, c, k]: conv2d's value with a filter that
    is zero between other channels (Paleo's SAME crops too), bias and activation after it."""
    g = torch.Generator().manual_seed(s * 10 + m)
    x = torch.randn(2, 7, 6, 4, dtype=torch.float64, generator=g)
    w = torch.randn(3, 2, 4, m, dtype=torch.float64, generator=g)
    b = torch.randn(4 * m, dtype=torch.float64, generator=g)
    dense = torch.zeros(3, 2, 4, 4 * m, dtype=torch.float64)
    for c in range(4):
        dense[:, :, c, c * m:(c + 1) * m] = w[:, :, c, :]
    a = attrs("depthwise_conv2d", filter=[3, 2, 4, m], strides=[1, s, s, 1], padding=pad, activation="tanh")
    y = ref("depthwise_conv2d", a, [x], {"weight": w, "bias": b})
    torch.testing.assert_close(y, R.conv2d(x, dense, b, [1, s, s, 1], pad, activation="tanh"))


@pytest.mark.parametrize("pad", [[0, 0, 1, 2], [1, 2, 0, 1], [2, 1, 2, 2]])
def test_a_pools_four_pads_are_each_sides_as_given(pad):
    """[top, left, bottom, right]: torch's pooling of the input padded so (-inf for max; average over the
    in-bounds elements only, as netc's pools count), the output size rounded down; a window wholly in the
    padding gives 0 (netc's rule)."""
    x = torch.randn(2, 7, 8, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(sum(pad)))
    t, l, b, r = pad
    nchw = x.permute(0, 3, 1, 2)
    want_max = F.max_pool2d(F.pad(nchw, (l, r, t, b), value=float("-inf")), (3, 2), (2, 3)).permute(0, 2, 3, 1)
    total = F.avg_pool2d(F.pad(nchw, (l, r, t, b)), (3, 2), (2, 3), divisor_override=1)
    count = F.avg_pool2d(F.pad(torch.ones_like(nchw[:1, :1]), (l, r, t, b)), (3, 2), (2, 3), divisor_override=1)
    a = attrs("maxpool", ksize=[1, 3, 2, 1], strides=[1, 2, 3, 1], padding=pad)
    assert lookup("netc.maxpool").infer(a, [tuple(x.shape)]) == tuple(want_max.shape)
    torch.testing.assert_close(ref("maxpool", a, [x]), torch.where(want_max.isinf(), 0.0, want_max))
    torch.testing.assert_close(ref("avgpool", a, [x]), torch.where(count > 0, total / count, 0.0).permute(0, 2, 3, 1))


def test_pooling_counts_only_in_bounds_elements():
    x = torch.arange(1.0, 10.0, dtype=torch.float64).reshape(1, 3, 3, 1)
    a = dict(ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")   # pads only at the bottom/right
    assert ref("avgpool", attrs("avgpool", **a), [x]).flatten().tolist() == [3.0, 4.5, 7.5, 9.0]
    assert ref("maxpool", attrs("maxpool", **a), [-x]).flatten().tolist() == [-1.0, -3.0, -7.0, -9.0]
    x = torch.randn(2, 9, 8, 3, dtype=torch.float64)
    a = dict(ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="VALID")
    torch.testing.assert_close(ref("maxpool", attrs("maxpool", **a), [x]),
                               F.max_pool2d(x.permute(0, 3, 1, 2), 3, 2).permute(0, 2, 3, 1))
    torch.testing.assert_close(ref("avgpool", attrs("avgpool", **a), [x]), R.avgpool(x, **a))


def test_inner_product_flattens_nhwc_and_applies_the_activation():
    x, w, b = torch.randn(2, 2, 3, 4, dtype=torch.float64), torch.randn(24, 5, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    y = ref("inner_product", attrs("inner_product", num_outputs=5, activation="sigmoid"), [x], {"weight": w, "bias": b})
    torch.testing.assert_close(y, torch.sigmoid(x.reshape(2, 24) @ w + b))


def test_lrn_softmax_losses_and_elementwise_by_hand():
    x = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64)
    y = ref("lrn", attrs("lrn", local_size=3, alpha=0.3, beta=0.5, knorm=2.0), [x])
    sums = torch.tensor([5.0, 14.0, 13.0], dtype=torch.float64)
    torch.testing.assert_close(y[0], x[0] / (2.0 + 0.1 * sums) ** 0.5)
    z = torch.randn(4, 2, 3, dtype=torch.float64)
    torch.testing.assert_close(ref("softmax", attrs("softmax"), [z]), torch.softmax(z.reshape(4, 6), 1))
    labels = torch.tensor([0, 5, 2, 3], dtype=torch.int32)
    ce = F.cross_entropy(z.reshape(4, 6), labels.long())
    for lab in (labels, labels.reshape(4, 1), F.one_hot(labels.long(), 6).to(torch.int32)):
        torch.testing.assert_close(ref("softmax_loss", attrs("softmax_loss"), [z, lab]), ce)
    p, q = torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 2, 2, dtype=torch.float64)
    torch.testing.assert_close(ref("euclidean_loss", {}, [p, q]), 0.5 * ((p - q.reshape(3, 4)) ** 2).sum() / 3)
    u, v = torch.randn(5, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    for op, want in (("sum", u + v), ("product", u * v), ("max", torch.maximum(u, v))):
        torch.testing.assert_close(ref("elementwise", attrs("elementwise", operation=op), [u, v]), want)
    torch.testing.assert_close(ref("relu", attrs("relu", negative_slope=0.2), [u]), torch.where(u < 0, 0.2 * u, u))
    sc, sh = torch.randn(5, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    torch.testing.assert_close(ref("batch_norm", attrs("batch_norm"), [u.reshape(1, 5)], {"scale": sc, "shift": sh})[0],
                               u * sc + sh)
    img = torch.arange(4.0).reshape(1, 2, 2, 1)
    up = ref("upsample2d", attrs("upsample2d", ksize=[1, 2, 3, 1]), [img])
    assert up[0, :, :, 0].tolist() == [[0, 0, 0, 1, 1, 1]] * 2 + [[2, 2, 2, 3, 3, 3]] * 2


# -- networks -----------------------------------------------------------------------------------

RESIDUAL = """
network res {
  input x: f32[2, 6, 6, 4]
  a = Convolution(x) { filter: [3, 3, 4, 4], padding: SAME, activation: relu }
  b = Convolution(a) { filter: [3, 3, 4, 4], padding: SAME }
  sum = Add(x, b)
  out = ReLU(sum)
  side = Pooling(a) { ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1] }
}
"""


def test_residual_add_and_outputs_are_the_unread_layers():
    m = build(RESIDUAL)
    out = run_reference(m)
    assert list(out) == ["out", "side"]
    p = module_params(m)
    vals = run_reference(m, intermediates=True)
    x = vals["x"]
    a = R.conv2d(x, p["a.weight"], p["a.bias"], padding="SAME", activation="relu")
    b = R.conv2d(a, p["b.weight"], p["b.bias"], padding="SAME")
    torch.testing.assert_close(out["out"], torch.relu(x + b))
    assert list(vals) == ["x", "a", "b", "sum", "out", "side"]


def test_slice_takes_a_contiguous_block():
    x = torch.arange(24, dtype=torch.float64).reshape(2, 6, 2)
    y = lookup("netc.slice").reference({"dim": 1, "num_slices": 3, "index": 1}, [x], {})
    assert torch.equal(y, x[:, 2:4, :])


def test_concat_of_branches():
    m = build("""
network inc {
  input x: f32[1, 5, 5, 3]
  b1 = Convolution(x) { filter: [1, 1, 3, 2] }
  b2 = Convolution(x) { filter: [3, 3, 3, 4], padding: SAME }
  b3 = AvgPool(x) { ksize: [1, 3, 3, 1], strides: [1, 1, 1, 1], padding: SAME }
  cat = Concatenate(b1, b2, b3) { dim: 3 }
  output cat
}
""")
    v = run_reference(m, intermediates=True)
    assert v["cat"].shape == (1, 5, 5, 9)
    torch.testing.assert_close(v["cat"], torch.cat([v["b1"], v["b2"], v["b3"]], dim=3))
    torch.testing.assert_close(v["b3"], R.avgpool(v["x"], [1, 3, 3, 1], [1, 1, 1, 1], "SAME"))


SHARE = """
network net {
  input x: f32[4, 6]
  enc = InnerProduct(x) { num_outputs: 3, params: { weight: { name: w_enc, init: gaussian, std: 0.01 } } }
  dec = InnerProduct(enc) { num_outputs: 6, params: { weight: { name: w_dec, share_from: w_enc } } }
}
"""


def test_share_from_uses_the_owners_tensor():
    m = build(SHARE)
    p = module_params(m)
    assert p["w_dec"].shape == (3, 6) and torch.equal(p["w_dec"], p["w_enc"].reshape(3, 6))
    v = run_reference(m, intermediates=True)
    torch.testing.assert_close(v["dec"], v["enc"] @ p["w_enc"].reshape(3, 6) + p["dec.bias"])
    w = torch.ones(6, 3, dtype=torch.float64)
    v2 = run_reference(m, {"x": v["x"]}, {"w_enc": w}, intermediates=True)
    torch.testing.assert_close(v2["dec"], v2["enc"] @ torch.ones(3, 6, dtype=torch.float64) + p["dec.bias"])
    run_reference(m, None, {"w_enc": w, "w_dec": w.reshape(3, 6)})  # the alias, consistently: fine
    with pytest.raises(NetcError, match="alias of 'w_enc'"):
        run_reference(m, None, {"w_enc": w, "w_dec": torch.zeros(3, 6)})


def test_random_values_are_seeded_and_labels_are_valid_classes():
    m = build((ROOT / "examples" / "lenet.nd").read_text())
    a, b, c = (run_reference(m, seed=s, intermediates=True) for s in (0, 0, 1))
    for k in a:
        assert torch.equal(a[k], b[k])
    assert not torch.equal(a["data"], c["data"])
    assert a["label"].dtype == torch.int32 and 0 <= int(a["label"].min()) and int(a["label"].max()) < 10
    assert len(set(a["label"].tolist())) > 3
    # one-hot labels get one-hot rows
    m = build("network n {\n input z: f32[5, 4]\n input y: f32[5, 4]\n loss = SoftmaxLoss(z, y)\n}")
    y = run_reference(m, intermediates=True)["y"]
    assert torch.equal(y.sum(1), torch.ones(5, dtype=torch.float64)) and set(y.flatten().tolist()) <= {0.0, 1.0}


def test_given_inputs_params_dtype_and_user_errors():
    m = build(RESIDUAL)
    x = torch.randn(2, 6, 6, 4)
    o64 = run_reference(m, {"x": x})
    o32 = run_reference(m, {"x": x.numpy()}, dtype=torch.float32)
    assert o32["out"].dtype == torch.float32
    torch.testing.assert_close(o32["out"].double(), o64["out"], rtol=1e-5, atol=1e-5)
    with pytest.raises(NetcError, match=r"has shape \[2, 6, 6\], but the network expects \[2, 6, 6, 4\]"):
        run_reference(m, {"x": x[..., 0]})
    with pytest.raises(NetcError, match="has no input 'y'"):
        run_reference(m, {"x": x, "y": x})
    with pytest.raises(NetcError, match="missing input 'x'"):
        run_reference(m, {})
    with pytest.raises(NetcError, match="unknown parameter 'a.weigth'; did you mean 'a.weight'"):
        run_reference(m, params={"a.weigth": torch.zeros(1)})
    with pytest.raises(NetcError, match="parameter 'a.bias' has shape"):
        run_reference(m, params={"a.bias": torch.zeros(5)})
    lenet = build((ROOT / "examples" / "lenet.nd").read_text())
    with pytest.raises(NetcError, match="must hold integers"):
        run_reference(lenet, {"data": torch.zeros(64, 28, 28, 1), "label": torch.full((64,), 0.5)})


# -- the examples -------------------------------------------------------------------------------

def shrink(text: str, div: int = 8) -> str:
    """Batch 1 and every channel width divisible by `div` divided by it (filters, num_outputs,
    num_classes): all shape rules stay valid, the work drops ~div^2. (div=1: batch only.)"""
    def ch(c):
        return str(int(c) // div) if int(c) % div == 0 else c

    text = re.sub(r"(input \w+: \w+)\[(\d+)", lambda mo: f"{mo.group(1)}[1", text)
    text = re.sub(r"filter: \[(\d+), (\d+), (-?\d+), (\d+)\]",
                  lambda mo: f"filter: [{mo.group(1)}, {mo.group(2)}, {ch(mo.group(3))}, {ch(mo.group(4))}]", text)
    return re.sub(r"(num_outputs|num_classes): (\d+)", lambda mo: f"{mo.group(1)}: {ch(mo.group(2))}", text)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_runs(path):
    text = path.read_text()
    as_is = path.stem in ("lenet", "gan", "brainstorm_fixture", "sequences")   # (sequences: time-major, [T, B, ...])
    # cifar10_phases declares w4's shape: its channels stay
    m = build(text if as_is else shrink(text, {"cifar10_phases": 1, "vgg16": 16, "inception_v3": 16}.get(path.stem, 8)))
    outs = run_module(m)
    assert outs
    for net in m.networks():
        vals = run_reference(m, network=net, intermediates=True)
        for op in net.regions[0].ops:
            name = op.attrs.get("name")
            if name in vals:  # every value has its shape rule's shape
                assert tuple(vals[name].shape) == op.results[0].type.shape, name
    for k, v in outs.items():
        assert torch.isfinite(v).all(), k


def test_cifar10_test_phase_and_multi_network_inputs():
    m = build(shrink((ROOT / "examples" / "cifar10_phases.nd").read_text(), 1), phase="test")
    assert run_reference(m)["prob"].shape == (1, 10)
    gan = build((ROOT / "examples" / "gan.nd").read_text())
    both = run_module(gan)
    lab = torch.ones(128, 1, dtype=torch.int32)
    ins = {"noise": torch.randn(128, 10), "sample": torch.randn(128, 2), "label": lab}
    fed = run_module(gan, ins)
    assert set(fed) == set(both)
    with pytest.raises(NetcError, match="no network has an input 'nois'"):
        run_module(gan, {**ins, "nois": lab})
    one = run_module(gan, {"noise": ins["noise"], "label": lab}, network="gan_g")
    torch.testing.assert_close(one["cost"], fed["gan_g.cost"])
    # the discriminator's parameters are shared by name: the same prediction for the same sample
    g = run_reference(gan, {"noise": ins["noise"], "label": lab}, network="gan_g", intermediates=True)
    d = run_reference(gan, {"sample": g["gen_sample"], "label": lab}, network="gan_d")
    torch.testing.assert_close(d["dis_prob"], g["dis_prob"])


# -- netc run -------------------------------------------------------------------------------------

def cli(capsys, *argv):
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_run_prints_a_summary(capsys):
    rc, out, err = cli(capsys, "run", ROOT / "examples" / "lenet.nd", "--reference", "--seed", "3")
    assert rc == 0, err
    lines = out.splitlines()
    assert [ln.split()[0] for ln in lines] == ["prob", "loss"]
    assert "[64, 10]" in lines[0] and "float64" in lines[0] and "mean=+0.1 " in lines[0]
    assert all(re.search(r"std=\S+ min=\S+ max=\S+ crc32=[0-9a-f]{8}$", ln) for ln in lines)
    assert cli(capsys, "run", ROOT / "examples" / "lenet.nd", "--reference", "--seed", "3")[1] == out


def test_cli_run_files_roundtrip(capsys, tmp_path):
    m = build(RESIDUAL)
    v = run_reference(m, intermediates=True)
    np.save(tmp_path / "x.npy", v["x"].numpy())
    np.savez(tmp_path / "p.npz", **{k: t.numpy() for k, t in module_params(m).items()})
    (tmp_path / "res.nd").write_text(RESIDUAL)
    rc, _, err = cli(capsys, "run", tmp_path / "res.nd", "--reference", "--input", f"x={tmp_path / 'x.npy'}",
                     "--params", tmp_path / "p.npz", "--seed", "7", "--output", tmp_path / "o.npz")
    assert rc == 0, err
    with np.load(tmp_path / "o.npz") as z:
        assert sorted(z.files) == ["out", "side"]
        np.testing.assert_allclose(z["out"], v["out"].numpy())
    np.savez(tmp_path / "in.npz", x=v["x"].numpy().astype(np.float32))
    rc, out, err = cli(capsys, "run", tmp_path / "res.nd", "--reference", "--inputs", tmp_path / "in.npz",
                       "--dtype", "f32")
    assert rc == 0, err and "float32" in out


@pytest.mark.parametrize("args,message", [
    (["--reference", "--input", "x"], "--input expects NAME=PATH.npy, got 'x'"),
    (["--reference", "--input", "x=missing.npy"], "input 'x': no such file: 'missing.npy'"),
    (["--reference", "--input", "x=bad.npy"], "cannot read 'bad.npy' as a .npy array"),
    (["--reference", "--input", "x=small.npy"], "input 'x' has shape [2, 6], but the network expects [2, 6, 6, 4]"),
    (["--reference", "--input", "y=small.npy"], "network 'res' has no input 'y' (inputs: x)"),
    (["--reference", "--inputs", "small.npy"], "is a single .npy array, not an .npz archive"),
    (["--reference", "--params", "p.npz"], "unknown parameter 'c.weight'"),
    (["--reference", "--network", "ress"], "no network 'ress'; did you mean 'res'?"),
])
def test_cli_run_errors(capsys, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "res.nd").write_text(RESIDUAL)
    (tmp_path / "bad.npy").write_bytes(b"not an array")
    np.save(tmp_path / "small.npy", np.zeros((2, 6)))
    np.savez(tmp_path / "p.npz", **{"c.weight": np.zeros(3)})
    rc, out, err = cli(capsys, "run", "res.nd", *args)
    assert rc == 1 and out == ""
    assert message in err and "Traceback" not in err


def test_cli_run_missing_input(capsys, tmp_path):
    np.save(tmp_path / "d.npy", np.zeros((64, 28, 28, 1), np.float32))
    rc, _, err = cli(capsys, "run", ROOT / "examples" / "lenet.nd", "--reference", "--input", f"data={tmp_path / 'd.npy'}")
    assert rc == 1 and "missing input 'label' of network 'lenet'" in err


def test_reference_says_it_passes_unknown_layers_through(tmp_path, capsys):
    """An opaque layer (a type netc does not know) runs as its shape rule says, a pass-through, and
    the run says so, located, once per type."""
    from netc.cli import main
    f = tmp_path / "op.nd"
    f.write_text('network n {\n  input x: f32[2, 4]\n  a = Opaque(x) { type: "Mystery" }\n  b = ReLU(a)\n}\n')
    assert main(["run", str(f), "--reference"]) == 0
    err = capsys.readouterr().err
    assert (f"{f}:3:3: warning: the reference executor passes 1 layer of unknown type 'Mystery' through "
            f"unchanged") in err


def test_inner_product_without_bias_has_no_bias_parameter():
    """`bias: false` drops the bias: no parameter (it used to be declared, drawn at random, added and
    trained), 32 parameters for [2, 8] -> 4, and the output is x @ W alone."""
    from netc import pipelines
    from netc.frontend import load_text
    from netc.runtime.reference import module_params, run_reference
    text = "network nb {\n  input x: f32[2, 8]\n  fc = InnerProduct(x) { num_outputs: 4, bias: false }\n}\n"
    m = load_text(text, "nb.nd")
    pipelines.inference(m)
    params = module_params(m, None, 0, torch.float64)
    assert {k: tuple(v.shape) for k, v in params.items()} == {"fc.weight": (8, 4)}
    x = torch.randn(2, 8, dtype=torch.float64)
    y = run_reference(m, {"x": x}, params)["fc"]
    assert torch.allclose(y, x @ params["fc.weight"], rtol=0, atol=1e-12)


def test_convolution_without_bias_has_no_bias_parameter():
    """The same for Convolution: `bias: false` in .nd means no bias (Paleo's JSON `bias` key is ignored
    on import, as Paleo counts one whatever it says)."""
    from netc import pipelines
    from netc.frontend import load_text
    from netc.runtime.reference import module_params
    text = ("network nb {\n  input y: f32[2, 4, 4, 3]\n"
            "  cv = Convolution(y) { filter: [3, 3, 3, 5], bias: false }\n}\n")
    m = load_text(text, "nb.nd")
    pipelines.inference(m)
    assert {k: tuple(v.shape) for k, v in module_params(m, None, 0, torch.float64).items()} == \
        {"cv.weight": (3, 3, 3, 5)}
