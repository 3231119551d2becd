"""Gradient rules (OpDef.gradient) and training forms (OpDef.training_form), against the oracle.

* every op with a gradient rule (the registry decides: a new rule without a case here fails), in tiny
  random networks built around it in .nd (odd sizes, strides, VALID/SAME/explicit padding, Paleo's
  cropping SAME, fused activations, several seeds): after the backward pass, every parameter's
  gradient and the gradient reaching each of the op's inputs equal torch.autograd over the forward
  reference in float64 (netc.runtime.train); the FLOPs of each layer's gradient ops equal its backward
  columns;
* central finite differences of the forward reference on a few entries, for a handful of ops;
* training forms: dropout masks (reproducible per seed, distinct per layer and step, bit for bit what
  Triton's tl.rand draws: a kernel under TRITON_INTERPRET), batch statistics and running statistics
  against torch.nn.functional.batch_norm(training=True);
* sharing: a value read by several layers (SINGA's kSplit), GRU steps unrolled with share_from;
* a layer netc does not know on the gradient path is a located error.
"""
from __future__ import annotations

import json
import math
import os
import random
import zlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from netc.diagnostics import NetcError
from netc.frontend import load_text
from netc.ir.parser import parse_ir
from netc.ir.printer import print_ir
from netc.ops import ShapeError, all_ops, lookup, prod
from netc.ops import reference as R
from netc.ops.registry import layer_cost
from netc import pipelines
from netc.pipelines import Options, Training
from netc.runtime.reference import execute
from netc.runtime.train import ReferenceTrainer, check_grads, is_forward

TOL = 1e-8


# -- building and checking training programs ------------------------------------------------------

def train_program(src: str, path: str = "t.nd", **backward_options):
    m = load_text(src, path)
    pipelines.training(m, Options(training=Training(gradients_only=True, **backward_options)))
    return m


def _value_name(v) -> str:
    n = v.owner.attrs["name"]
    return n if len(v.owner.results) == 1 else f"{n}#{v.index}"


def _no_updates(op) -> bool:
    d = lookup(op.name)
    return not (d is not None and d.side_effects)


def _forward_loss(net, feed, params):
    named = execute(net, feed, params, torch.float64, only=is_forward)
    return named, sum(named[n].sum() for n in net.attrs["losses"])


def check_program(m, wrt=(), seed=0):
    """Every parameter gradient (check_grads) and the gradient reaching each layer in `wrt` (each a
    Reshape, whose gradient rule reads exactly that gradient) against torch.autograd, in float64."""
    rows = check_grads(m, seed=seed)
    assert rows
    for r in rows:   # (an exactly-0 gradient, a bias before a batch norm, is compared absolutely)
        assert r["rel_error"] * r["max_abs"] <= TOL * max(r["max_abs"], 1e-6), r
    if not wrt:
        return rows
    net = m.networks()[0]
    tr = ReferenceTrainer(m, seed=seed)
    feed = tr.feed(None, lr=0.0)
    named = execute(net, feed, {k: v.clone() for k, v in tr.params.items()}, torch.float64, only=_no_updates)
    body = net.regions[0].ops
    with torch.enable_grad():
        params = {k: v.clone().requires_grad_(v.is_floating_point()) for k, v in tr.params.items()}
        fwd, total = _forward_loss(net, feed, params)
        refs = torch.autograd.grad(total, [fwd[w] for w in wrt])
    for w, ref in zip(wrt, refs):
        (back,) = [op for op in body if op.attrs.get("grad_of") == w and op.name == "netc.reshape"]
        got = named[_value_name(back.operands[0])]
        err = float((got - ref).abs().max()) / max(float(ref.abs().max()), 1e-6)
        assert err <= TOL, (w, err)
    return rows


def check_costs(m):
    """Per forward layer: the FLOPs of its gradient ops (grad_of == layer) = its backward-filter FLOPs,
    plus its backward-data FLOPs when a data gradient is computed (a batch-sized gradient op that does
    work; a fused activation's gradient is free in Paleo's count and alone is none)."""
    net = m.networks()[0]
    body = net.regions[0].ops
    checked = 0
    for op in body:
        d = lookup(op.name)
        if d is None or "grad_of" in op.attrs or d.training_only or not op.results or op.name == "netc.input":
            continue
        grads = [g for g in body if g.attrs.get("grad_of") == op.attrs.get("name")]
        if not grads or (op.name == "netc.euclidean_loss" and len(grads) == 2):
            continue   # (a Euclidean loss between two computed values: its bwd_data column counts one input)
        try:
            c, _ = layer_cost(op)
        except ShapeError:     # Paleo's backward geometry does not close: no Paleo figure to match
            continue
        got = 0
        data = False
        for g in grads:
            gd = lookup(g.name)
            gc = gd.cost(gd.attrs_of(g), [v.type.shape for v in g.operands],
                         g.results[0].type.shape if len(g.results) == 1 else None).flops_fwd
            got += gc
            data = data or (not gd.unbatched and gc > 0)
        want = c.flops_bwd_filter + (c.flops_bwd_data if data else 0)
        assert math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-9), (op.attrs["name"], got, want)
        checked += 1
    return checked


# -- the networks around an op ---------------------------------------------------------------------

def _nd(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_nd(x) for x in v) + "]"
    return repr(v)


def around(op_type: str, shapes: list, attrs: dict, *, extra_inputs: str = "", extra_operands=(),
           name: str = "y"):
    """A network: for each float input shape s_i a trainable pre-layer x_i = Reshape(InnerProduct(d_i))
    of that shape, then `name = op_type(x_0, ..., extra operands) {attrs}`, then a Euclidean loss against a
    `label` input (with_loss; a loss op closes the network itself). Returns (the open source, the x_i)."""
    lines, xs = [], []
    n = shapes[0][0]
    for i, s in enumerate(shapes):
        lines += [f"  input d{i}: f32[{n}, 3]",
                  f"  p{i} = InnerProduct(d{i}) {{ num_outputs: {prod(s[1:])} }}",
                  f"  x{i} = Reshape(p{i}) {{ output_shape: {_nd(list(s))} }}"]
        xs.append(f"x{i}")
    body = ", ".join(f"{k}: {_nd(v)}" for k, v in attrs.items())
    operands = ", ".join(xs + list(extra_operands))
    lines.append(f"  {name} = {op_type}({operands})" + (f" {{ {body} }}" if body else ""))
    return "network t {\n" + extra_inputs + "\n".join(lines) + "\n", xs


def with_loss(src: str, out_shape, name: str = "y") -> str:
    return src + f"  input label: f32{_nd(list(out_shape))}\n  loss = EuclideanLoss({name}, label)\n}}\n"


def _rank(rng, lo=2, hi=4, n=None):
    n = n or rng.randint(1, 3)
    return (n,) + tuple(rng.randint(1, 5) for _ in range(rng.randint(lo, hi) - 1))


def _image(rng):
    return (rng.randint(1, 3), rng.randint(1, 8), rng.randint(1, 8), rng.randint(1, 4))


def _padding(rng):
    return rng.choice(["VALID", "SAME", [rng.randint(0, 2), rng.randint(0, 2)]])


def _infer(op: str, attrs: dict, shapes):
    d = lookup("netc." + op)
    a = {k: s.default for k, s in d.attrs.items() if not s.required}
    a.update(attrs)
    return d.infer(a, [tuple(s) for s in shapes])


# Each case: (rng, k) -> (.nd source, names of the layers whose incoming gradient is checked), k the
# case's number (cases cycle through the variants that must be covered). A ShapeError means "draw again".

def case_unary(t, attrs=lambda rng: {}):
    def make(rng, k):
        x = _rank(rng)
        src, xs = around(t, [x], attrs(rng))
        return with_loss(src, x), xs
    return make


def _act_k(rng, k):
    """Every other case without a fused activation, the others with one."""
    return "none" if k % 2 else rng.choice(["relu", "sigmoid", "tanh"])


def _geometry(rng, k, kmax=4):
    """(kh, kw, strides, padding), every third case Paleo's SAME with a stride above the window: a negative
    pad (a crop)."""
    if k % 3 == 0:
        return rng.randint(1, 2), 1, [1, rng.randint(2, 3), rng.randint(2, 3), 1], "SAME"
    pad = "VALID" if k % 3 == 1 and rng.random() < 0.5 else _padding(rng)
    return rng.randint(1, kmax), rng.randint(1, kmax), [1, rng.randint(1, 3), rng.randint(1, 3), 1], pad


def case_conv2d(rng, k):
    x = _image(rng)
    kh, kw, s, pad = _geometry(rng, k)
    a = {"filter": [kh, kw, rng.choice([x[3], -1]), rng.randint(1, 4)], "strides": s, "padding": pad,
         "activation": _act_k(rng, k)}
    out = _infer("conv2d", a, [x])
    src, xs = around("Convolution", [x], a)
    return with_loss(src, out), xs


def case_depthwise_conv2d(rng, k):
    """Channel multipliers 1 to 3, with and without a bias; conv2d's geometries (crops among them)."""
    x = _image(rng)
    kh, kw, s, pad = _geometry(rng, k)
    a = {"filter": [kh, kw, rng.choice([x[3], -1]), 1 + k % 3], "strides": s, "padding": pad,
         "activation": _act_k(rng, k), "bias": k % 4 != 3}
    out = _infer("depthwise_conv2d", a, [x])
    src, xs = around("DepthwiseConvolution", [x], a)
    return with_loss(src, out), xs


def case_deconv2d(rng, k):
    out = _image(rng)
    kh, kw, s, pad = _geometry(rng, k)
    f = [kh, kw, out[3], rng.randint(1, 4)]
    x = _infer("conv2d", {"filter": f, "strides": s, "padding": pad}, [out])
    a = {"filter": f, "strides": s, "padding": pad, "output_shape": list(out), "activation": _act_k(rng, k)}
    _infer("deconv2d", a, [x])
    src, xs = around("Deconvolution", [x], a)
    return with_loss(src, out), xs


def case_inner_product(rng, k):
    x = _rank(rng)
    a = {"num_outputs": rng.randint(1, 5), "activation": _act_k(rng, k)}
    src, xs = around("InnerProduct", [x], a)
    return with_loss(src, (x[0], a["num_outputs"])), xs


def case_pool(t):
    def make(rng, k):
        x = _image(rng)
        kh, kw, s, pad = _geometry(rng, k, 3)
        if k % 3 == 2:     # [top, left, bottom, right] (ONNX's pads, its ceil_mode)
            pad = [rng.randint(0, 2) for _ in range(4)]
        a = {"ksize": [1, kh, kw, 1], "strides": s, "padding": pad}
        out = _infer("maxpool", a, [x])
        src, xs = around(t, [x], a)
        return with_loss(src, out), xs
    return make


def case_upsample2d(rng, k):
    x = _image(rng)
    a = {"ksize": [1, rng.randint(1, 3), rng.randint(1, 3), 1]}
    src, xs = around("UpSampling2D", [x], a)
    return with_loss(src, _infer("upsample2d", a, [x])), xs


def case_lrn(rng, k):
    x = _image(rng)
    a = {"local_size": rng.choice([1, 3, 5]), "alpha": rng.uniform(0.1, 2.0), "beta": rng.uniform(0.3, 1.0),
         "knorm": rng.uniform(0.5, 2.0)}
    src, xs = around("LRN", [x], a)
    return with_loss(src, x), xs


def case_batch_norm(rng, k):
    x = _rank(rng, 2, 4, n=rng.randint(2, 3))
    a = {"epsilon": rng.choice([1e-5, 0.1]), "momentum": rng.uniform(0.5, 0.99)}
    src, xs = around("BatchNorm", [x], a)
    return with_loss(src, x), xs


def case_dropout(rng, k):
    x = _rank(rng)
    src, xs = around("Dropout", [x], {"dropout_keep_prob": rng.choice([0.3, 0.5, 0.8, 1.0])})
    return with_loss(src, x), xs


def case_softmax(rng, k):
    x = _rank(rng)
    src, xs = around("Softmax", [x], {})
    return with_loss(src, (x[0], prod(x[1:]))), xs


def case_reshape(rng, k):
    x = _rank(rng, 2, 4)
    n, rest = x[0], prod(x[1:])
    shape = rng.choice([[-1, -1], [n, -1], [-1, rest], [n * rest]])
    a = {"output_shape": shape}
    src, xs = around("Reshape", [x], a)
    return with_loss(src, _infer("reshape", a, [x])), xs


def case_concat(rng, k):
    base = _rank(rng)
    d = rng.randrange(len(base))
    shapes = [tuple(rng.randint(1, 3) if j == d else s for j, s in enumerate(base)) for _ in range(rng.randint(2, 3))]
    if d == 0:
        shapes = [base] * len(shapes)      # the pre-layers share the batch: concatenate another axis
        d = len(base) - 1
    a = {"dim": rng.choice([d, d - len(base)])}
    src, xs = around("Concatenate", shapes, a)
    return with_loss(src, _infer("concat", a, shapes)), xs


def case_slice(rng, k):
    base = _rank(rng)
    d, k = rng.randrange(1, len(base)), rng.randint(1, 3)
    x = tuple(s * k if j == d else s for j, s in enumerate(base))
    a = {"dim": rng.choice([d, d - len(x)]), "num_slices": k, "index": rng.randrange(k)}
    src, xs = around("Slice", [x], a)
    return with_loss(src, _infer("slice", a, [x])), xs


def case_elementwise(rng, k):
    x = _rank(rng)
    a = {"operation": ("sum", "product", "max")[k % 3]}
    src, xs = around("Elementwise", [x] * rng.randint(2, 3), a)
    return with_loss(src, x), xs


def case_gru(rng, k):
    """A time-major sequence [T, B, ...] (T = 1 among them; k % 4 == 3: one step [B, X] without a time axis,
    SINGA's unrolled form), with and without the initial state h0, both reset conventions, with and
    without bias."""
    t, b, h = (1, 2, 3)[k % 3], rng.randint(1, 3), rng.randint(1, 4)
    x = ((t,) if k % 4 != 3 else ()) + (b,) + tuple(rng.randint(1, 3) for _ in range(1 if k % 4 == 3 else rng.randint(1, 2)))
    a = f"dim_hidden: {h}, bias: {'true' if k % 2 == 0 else 'false'}, linear_before_reset: {'true' if k % 5 else 'false'}"
    shapes = [x, (b, h)] if k % 2 else [x]
    lines, xs = [], []
    for i, s in enumerate(shapes):   # (pre-layers with their own leading axis: T for x, B for h0)
        lines += [f"  input d{i}: f32[{s[0]}, 3]", f"  p{i} = InnerProduct(d{i}) {{ num_outputs: {prod(s[1:])} }}",
                  f"  x{i} = Reshape(p{i}) {{ output_shape: {_nd(list(s))} }}"]
        xs.append(f"x{i}")
    lines.append(f"  y = GRU({', '.join(xs)}) {{ {a} }}")
    return with_loss("network t {\n" + "\n".join(lines) + "\n", (t, b, h) if k % 4 != 3 else (b, h)), xs


def case_softmax_loss(rng, k):
    if k % 3 == 2:   # per step of a sequence [T, B, C]: labels [T, B] or one-hot [T, B, C], lengths [B] or none
        t, b, c = rng.randint(1, 4), rng.randint(2, 3), rng.randint(2, 4)
        masked = k % 2 == 0
        label = f"i32[{t}, {b}, {c}]" if masked and rng.random() < 0.5 else f"i32[{t}, {b}]"
        src, xs = around("SoftmaxLoss", [(t, b, c)], {}, extra_operands=["label"] + (["n"] if masked else []),
                         name="loss", extra_inputs=f"  input label: {label}\n  input n: i32[{b}]\n")
        return src + "}\n", xs
    x = _rank(rng, 2, 3)
    c = prod(x[1:])
    label = rng.choice([f"i32[{x[0]}]", f"i32[{x[0]}, 1]", f"i32[{x[0]}, {c}]"])
    src, xs = around("SoftmaxLoss", [x], {}, extra_operands=["label"], name="loss",
                     extra_inputs=f"  input label: {label}\n")
    return src + "}\n", xs


def case_binomial_ce(rng, k):
    """Brainstorm's SigmoidCE (logits) and BinomialCrossEntropy (probabilities; random values also outside
    [0, 1], where the clip passes no gradient) against targets of the input's shape."""
    x = _rank(rng)
    src, xs = around("BinomialCE", [x], {"logits": k % 2 == 0, "batch_axis": k % 3 // 2}, extra_operands=["label"],
                     name="loss",
                     extra_inputs=f"  input label: f32{_nd(list(x))}\n")
    return src + "}\n", xs


def case_decay_loss(rng, k):
    """Brainstorm's L1Decay and L2Decay on a computed value."""
    src, xs = around("DecayLoss", [_rank(rng)], {"norm": ("l1", "l2", "sum")[k % 3], "batch_axis": k % 2}, name="loss")
    return src + "}\n", xs


def case_mask(rng, k):
    """Brainstorm's Mask: a computed mask (which gets no gradient: the reference detaches it) of x's shape or of
    its first axes and a 1."""
    x = _rank(rng)
    j = rng.randint(1, len(x) - 1)
    m = x if k % 2 else tuple(x[:j]) + (1,)
    src, xs = around("Mask", [x, m], {})
    return with_loss(src, x), xs[:1]


def case_squared_difference(rng, k):
    x = _rank(rng)
    src, xs = around("SquaredDifference", [x, x], {"factor": (1.0, 0.5, -3.0)[k % 3]})
    return with_loss(src, x), xs


def case_euclidean_loss(rng, k):
    x = _rank(rng)
    if k % 3 == 2:   # with lengths: x time-major [T, B, ...]
        src, xs = around("EuclideanLoss", [x, x], {}, extra_operands=["n"], name="loss",
                         extra_inputs=f"  input n: i32[{x[1]}]\n")
        return src + "}\n", xs
    if rng.random() < 0.5:
        src, xs = around("EuclideanLoss", [x, x], {}, name="loss")
    else:
        src, xs = around("EuclideanLoss", [x], {}, extra_operands=["label"], name="loss",
                         extra_inputs=f"  input label: f32{_nd(list(x))}\n")
    return src + "}\n", xs


def case_embedding(rng, k):
    """ids of rank 1 to 3 (i32 and i64) into a small table, so ids repeat (their rows' gradients add up);
    V = 1 and D = 1 among them."""
    ids = (rng.randint(1, 3),) + tuple(rng.randint(1, 4) for _ in range(k % 3))
    a = {"num_embeddings": (1, 2, 3, 7)[k % 4], "dim": rng.randint(1, 5)}
    src = ("network t {\n"
           f"  input ids: {('i32', 'i64')[k % 2]}{_nd(list(ids))}\n"
           f"  y = Embedding(ids) {{ num_embeddings: {a['num_embeddings']}, dim: {a['dim']} }}\n")
    return with_loss(src, ids + (a["dim"],)), []


def case_lstm(rng, k):
    """A time-major sequence [T, B, ...] (T = 1 among them), with and without the initial state h0, c0,
    every activation."""
    t, b, h = (1, 2, 3)[k % 3], rng.randint(1, 3), rng.randint(1, 4)
    x = (t, b) + tuple(rng.randint(1, 3) for _ in range(rng.randint(1, 2)))
    a = {"size": h, "activation": ("tanh", "sigmoid", "relu", "none")[k % 4]}
    shapes = [x, (b, h), (b, h)] if k % 2 else [x]
    lines, xs = [], []
    for i, s in enumerate(shapes):   # (around's pre-layers, each with its own leading axis: T for x, B for h0, c0)
        lines += [f"  input d{i}: f32[{s[0]}, 3]", f"  p{i} = InnerProduct(d{i}) {{ num_outputs: {prod(s[1:])} }}",
                  f"  x{i} = Reshape(p{i}) {{ output_shape: {_nd(list(s))} }}"]
        xs.append(f"x{i}")
    cell = ", cell_activation: tanh" if a["activation"] != "tanh" and rng.random() < 0.5 else ""   # PaddlePaddle's
    lines.append(f"  y = Lstm({', '.join(xs)}) {{ size: {h}, activation: {a['activation']}{cell} }}")
    return with_loss("network t {\n" + "\n".join(lines) + "\n", (t, b, h)), xs


def case_highway(rng, k):
    """Brainstorm's Highway of three same-shaped inputs (each from its own pre-layer: all three get gradients)."""
    x = _rank(rng)
    src, xs = around("Highway", [x, x, x], {})
    return with_loss(src, x), xs


def case_clockwork_lstm(rng, k):
    """Brainstorm's ClockworkLstm: case_lstm's sequences (T up to 4, so units with periods 1, 2, 4 keep their state
    at some steps), with and without h0, c0, every activation."""
    t, b, h = (2, 3, 4)[k % 3], rng.randint(1, 3), rng.randint(2, 4)
    x = (t, b) + tuple(rng.randint(1, 3) for _ in range(rng.randint(1, 2)))
    act = ("tanh", "sigmoid", "relu", "none")[k % 4]
    shapes = [x, (b, h), (b, h)] if k % 2 else [x]
    lines, xs = [], []
    for i, s in enumerate(shapes):
        lines += [f"  input d{i}: f32[{s[0]}, 3]", f"  p{i} = InnerProduct(d{i}) {{ num_outputs: {prod(s[1:])} }}",
                  f"  x{i} = Reshape(p{i}) {{ output_shape: {_nd(list(s))} }}"]
        xs.append(f"x{i}")
    lines.append(f"  y = ClockworkLstm({', '.join(xs)}) {{ size: {h}, activation: {act} }}")
    return with_loss("network t {\n" + "\n".join(lines) + "\n", (t, b, h)), xs


def case_seq_pool(rng, k):
    """Every mode over a time-major [T, B, ...] (T = 1 among them), with lengths [B] and without."""
    t, b = (1, 2, 4)[k % 3], rng.randint(1, 3)
    x = (t, b) + tuple(rng.randint(1, 3) for _ in range(rng.randint(0, 2)))
    mode = ("last", "first", "max", "mean")[k % 4]
    lengths = k % 5 != 4
    src, xs = around("SequencePool", [x], {"mode": mode}, extra_inputs=f"  input n: i32[{b}]\n" if lengths else "",
                     extra_operands=["n"] if lengths else [])
    return with_loss(src, x[1:]), xs


def case_seq_reverse(rng, k):
    """Each sequence of a time-major [T, B, ...] backwards (T = 1 among them), with lengths [B] and without."""
    t, b = (1, 3, 4)[k % 3], rng.randint(1, 3)
    x = (t, b) + tuple(rng.randint(1, 3) for _ in range(rng.randint(0, 2)))
    lengths = k % 4 != 3
    src, xs = around("SequenceReverse", [x], {}, extra_inputs=f"  input n: i32[{b}]\n" if lengths else "",
                     extra_operands=["n"] if lengths else [])
    return with_loss(src, x), xs


def case_channel_permute(rng, k):
    """A random permutation of the last axis (an NHWC image's channels, a [N, C] value's features), and ShuffleNet's
    shuffle of 2 or 3 groups (`groups`: its gradient the shuffle of C/g groups)."""
    x = _image(rng) if k % 2 else _rank(rng, 2, 3)
    c = x[-1] * (1 + k % 3) if k % 3 else x[-1] + 2
    x = x[:-1] + (c,)
    if k % 3:
        a = {"groups": 1 + k % 3}
    else:
        order = list(range(c))
        while [order[o] for o in order] == list(range(c)):     # not its own inverse (the rule's inverse shows)
            rng.shuffle(order)
        a = {"order": order}
    src, xs = around("ChannelPermute", [x], a)
    return with_loss(src, x), xs


def case_seq_mask(rng, k):
    """The padding of a time-major [T, B, ...] set to zero (T = 1 among them), with the required lengths [B]."""
    t, b = (1, 3, 4)[k % 3], rng.randint(1, 3)
    x = (t, b) + tuple(rng.randint(1, 3) for _ in range(rng.randint(0, 2)))
    src, xs = around("SequenceMask", [x], {}, extra_inputs=f"  input n: i32[{b}]\n", extra_operands=["n"])
    return with_loss(src, x), xs


def case_rnn(kind):
    def case(rng, k):
        """A time-major sequence [T, B, ...] (T = 1 among them), with and without the initial state h0, every
        activation (the Clockwork's timing: netc's random periods)."""
        t, b, h = (1, 2, 3)[k % 3], rng.randint(1, 3), rng.randint(1, 4)
        x = (t, b) + tuple(rng.randint(1, 3) for _ in range(rng.randint(1, 2)))
        act = ("tanh", "sigmoid", "relu", "none")[k % 4]
        shapes = [x, (b, h)] if k % 2 else [x]
        lines, xs = [], []
        for i, s in enumerate(shapes):   # (pre-layers with their own leading axis: T for x, B for h0)
            lines += [f"  input d{i}: f32[{s[0]}, 3]", f"  p{i} = InnerProduct(d{i}) {{ num_outputs: {prod(s[1:])} }}",
                      f"  x{i} = Reshape(p{i}) {{ output_shape: {_nd(list(s))} }}"]
            xs.append(f"x{i}")
        lines.append(f"  y = {kind}({', '.join(xs)}) {{ size: {h}, activation: {act} }}")
        return with_loss("network t {\n" + "\n".join(lines) + "\n", (t, b, h)), xs
    return case


CASES = {
    "relu": case_unary("ReLU", lambda rng: {"negative_slope": rng.choice([0.0, 0.1])}),
    "sigmoid": case_unary("Sigmoid"),
    "tanh": case_unary("Tanh"),
    "stanh": case_unary("STanh"),
    "clip": case_unary("Clip", lambda rng: {"min": rng.choice([-0.5, 0.0]), "max": rng.choice([0.25, 6.0])}),
    "identity": case_unary("Identity"),
    "deltas_scaling": case_unary("DeltasScaling", lambda rng: {"factor": rng.choice([-1.0, 0.5, 3.0])}),
    "dummy": case_unary("Dummy", lambda rng: {"output": rng.choice([False, True])}),
    "dropout": case_dropout,
    "conv2d": case_conv2d,
    "deconv2d": case_deconv2d,
    "depthwise_conv2d": case_depthwise_conv2d,
    "inner_product": case_inner_product,
    "maxpool": case_pool("MaxPool"),
    "avgpool": case_pool("AvgPool"),
    "upsample2d": case_upsample2d,
    "lrn": case_lrn,
    "batch_norm": case_batch_norm,
    "softmax": case_softmax,
    "reshape": case_reshape,
    "concat": case_concat,
    "slice": case_slice,
    "elementwise": case_elementwise,
    "gru": case_gru,
    "softmax_loss": case_softmax_loss,
    "euclidean_loss": case_euclidean_loss,
    "binomial_ce": case_binomial_ce,
    "decay_loss": case_decay_loss,
    "mask": case_mask,
    "squared_difference": case_squared_difference,
    "embedding": case_embedding,
    "lstm": case_lstm,
    "clockwork_lstm": case_clockwork_lstm,
    "highway": case_highway,
    "seq_pool": case_seq_pool,
    "seq_reverse": case_seq_reverse,
    "seq_mask": case_seq_mask,
    "channel_permute": case_channel_permute,
    "recurrent": case_rnn("Recurrent"),
    "clockwork": case_rnn("Clockwork"),
}

def _differentiable_ops():
    # (communication ops have no layer type to build a case from: their gradients are checked by a
    # K-worker training step against the single-process one, tests/test_distributed.py)
    return [d for d in all_ops() if d.gradient is not None and not getattr(d, "comm", False)]


def test_rules_and_cases_match():
    """Every op with a gradient rule has a case here, and no case outlives its rule."""
    ruled = {d.name for d in _differentiable_ops()}
    assert ruled == set(CASES), (sorted(ruled - set(CASES)), sorted(set(CASES) - ruled))


def test_what_has_no_rule():
    """Gradient ops are training_only without layer types; unknown layers stay without a rule; metrics are
    not differentiable."""
    for d in all_ops():
        if d.training_only:
            assert not d.types and d.gradient is None and d.training_form is None, d.name
    assert lookup("netc.opaque").gradient is None
    assert not lookup("netc.argsort").differentiable and not lookup("netc.accuracy").differentiable


@pytest.mark.parametrize("opdef", _differentiable_ops(), ids=lambda d: d.name)
def test_gradient_rule_against_autograd(opdef):
    make = CASES.get(opdef.name)
    assert make is not None, f"op {opdef.ir_name} has a gradient rule but no case in tests/test_gradients.py"
    rng = random.Random(zlib.crc32(opdef.name.encode()))
    done = tries = 0
    while done < 6:
        tries += 1
        assert tries < 200, f"{opdef.name}: too few valid random cases"
        try:
            src, wrt = make(rng, done)
        except ShapeError:
            continue
        m = train_program(src)
        assert any(lookup(op.name) is opdef for op in m.networks()[0].regions[0].ops)
        check_program(m, wrt, seed=done)
        assert check_costs(m) >= 1
        done += 1


EXAMPLES = sorted(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", f)
                  for f in ("alexnet.nd", "inception_v3.nd", "nin.nd", "gan.nd"))


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_example_gradient_costs(path):
    """Whole networks (LRN, dropout, concat, pools, shared parameters...): every layer's gradient ops cost
    its backward columns (shapes and FLOPs only: no numbers are computed)."""
    with open(path) as f:
        m = train_program(f.read(), path, loss="softmax")
    assert check_costs(m) >= 5


# -- finite differences ----------------------------------------------------------------------------

FD_NETS = {
    "channel_shuffle": """
network t {
  input data: f32[2, 3, 4, 3]
  input label: f32[2, 3, 4, 2]
  a = Convolution(data) { filter: [1, 1, 3, 6], strides: [1, 1, 1, 1], padding: SAME, activation: tanh }
  s = ChannelPermute(a) { groups: 3 }
  d = DepthwiseConvolution(s) { filter: [3, 3, 6, 1], strides: [1, 1, 1, 1], padding: SAME }
  p = ChannelPermute(d) { order: [4, 0, 5, 2, 1, 3] }
  b = Convolution(p) { filter: [1, 1, 6, 2], strides: [1, 1, 1, 1], padding: SAME }
  loss = EuclideanLoss(b, label)
}
""",
    "conv_lrn_bn_pool": """
network t {
  input data: f32[2, 7, 6, 3]
  input label: f32[2, 5, 3, 4]
  c = Convolution(data) { filter: [3, 2, 3, 4], strides: [1, 2, 1, 1], padding: SAME, activation: tanh }
  n = LRN(c) { local_size: 3, alpha: 1.5, beta: 0.75, knorm: 1.0 }
  b = BatchNorm(n) { epsilon: 0.01 }
  p = AvgPool(b) { ksize: [1, 2, 2, 1], strides: [1, 1, 2, 1], padding: [1, 0] }
  loss = EuclideanLoss(p, label)
}
""",
    "depthwise": """
network t {
  input data: f32[2, 7, 6, 3]
  input label: f32[2, 4, 2, 6]
  d = DepthwiseConvolution(data) { filter: [3, 2, 3, 2], strides: [1, 2, 3, 1], padding: SAME, activation: tanh }
  loss = EuclideanLoss(d, label)
}
""",
    "deconv_softmax": """
network t {
  input data: f32[2, 3, 2, 2]
  input label: i32[2]
  d = Deconvolution(data) { filter: [3, 3, 3, 2], strides: [1, 2, 2, 1], padding: VALID,
                            output_shape: [2, 7, 5, 3], activation: sigmoid }
  m = MaxPool(d) { ksize: [1, 3, 2, 1], strides: [1, 2, 2, 1], padding: SAME }
  loss = SoftmaxLoss(m, label)
}
""",
    "gru": """
network t {
  input x0: f32[3, 4]
  input x1: f32[3, 4]
  input label: f32[3, 5]
  g0 = GRU(x0) { dim_hidden: 5, params: { %(shared)s } }
  g1 = GRU(x1, g0) { dim_hidden: 5, params: { %(shared)s } }
  s = Softmax(g1)
  loss = EuclideanLoss(s, label)
}
""" % {"shared": ", ".join(f"{r}: w.{r}" for g in "zrc" for r in (f"{g}_hx", f"{g}_hh", f"{g}_b"))},
}


@pytest.mark.parametrize("name", sorted(FD_NETS))
def test_finite_differences(name):
    """Central differences of the forward reference (float64) on a few entries of every parameter."""
    m = train_program(FD_NETS[name])
    net = m.networks()[0]
    tr = ReferenceTrainer(m, seed=1)
    feed = tr.feed(None, lr=0.0)
    named = execute(net, feed, {k: v.clone() for k, v in tr.params.items()}, torch.float64, only=_no_updates)
    grads = tr.gradients(named)
    rng = random.Random(7)
    eps = 1e-6
    for p, g in grads.items():
        base = tr.params[p]
        for _ in range(3):
            idx = tuple(rng.randrange(s) for s in base.shape)
            vals = []
            for sign in (1, -1):
                ps = {k: v.clone() for k, v in tr.params.items()}
                ps[p][idx] += sign * eps
                vals.append(float(_forward_loss(net, feed, ps)[1]))
            fd = (vals[0] - vals[1]) / (2 * eps)
            scale = max(float(g.abs().max()), 1e-3)
            assert abs(fd - float(g[idx])) <= 1e-6 * scale, (p, idx, fd, float(g[idx]))


# -- training forms: dropout -----------------------------------------------------------------------

DROPOUT_NET = """
network t {
  input data: f32[8, 40]
  input label: f32[8, 40]
  a = InnerProduct(data) { num_outputs: 40 }
  d1 = Dropout(a) { dropout_keep_prob: 0.6 }
  d2 = Dropout(a) { dropout_keep_prob: 0.6 }
  s = Elementwise(d1, d2)
  loss = EuclideanLoss(s, label)
}
"""


def test_dropout_masks():
    m = train_program(DROPOUT_NET)
    body = m.networks()[0].regions[0].ops
    masks = {op.attrs["name"]: op for op in body if op.name == "netc.dropout_mask"}
    assert set(masks) == {"d1.mask", "d2.mask"}
    seed_in = [op for op in body if op.name == "netc.input" and op.attrs.get("role") == "seed"]
    assert len(seed_in) == 1 and masks["d1.mask"].operands[0] is seed_in[0].results[0]
    tr = ReferenceTrainer(m, seed=3)
    s1, s2, again = tr.step(lr=0.0), tr.step(lr=0.0), tr.step(lr=0.0, step_seed=3 * 1_000_003)
    m1, m2 = s1["d1.mask"], s1["d2.mask"]
    assert set(torch.unique(m1).tolist()) <= {0.0, 1 / 0.6}
    assert not torch.equal(m1, m2)                          # each layer draws its own mask
    assert not torch.equal(m1, s2["d1.mask"])               # each step a new one
    assert torch.equal(m1, again["d1.mask"]) and torch.equal(m2, again["d2.mask"])   # reproducible
    keep = float((m1 > 0).double().mean())
    assert abs(keep - 0.6) < 5 * math.sqrt(0.6 * 0.4 / m1.numel())
    assert torch.equal(s1["d1"], s1["a"] * m1)
    assert torch.equal(m1, R.dropout_mask(3 * 1_000_003, [8, 40], 0.6, zlib.crc32(b"d1")))
    check_program(m)


TRITON_DRAW = r"""
import sys
import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def draw(u_ptr, bits_ptr, mask_ptr, seed, base, keep_prob, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    off = base + i.to(tl.int64)
    u = tl.rand(seed, off)
    inb = i < n
    tl.store(u_ptr + i, u, mask=inb)
    tl.store(bits_ptr + i, tl.randint(seed, off), mask=inb)
    tl.store(mask_ptr + i, tl.where(u < keep_prob, 1.0 / keep_prob, 0.0), mask=inb)


out = {}
n = int(sys.argv[2])
for k, (seed, base, kp) in enumerate(eval(sys.argv[3])):
    u = torch.full((n,), float("nan"), dtype=torch.float32)
    bits = torch.zeros(n, dtype=torch.int32)
    mask = torch.full((n,), float("nan"), dtype=torch.float32)
    draw[(triton.cdiv(n, 128),)](u, bits, mask, seed, base, kp, n, BLOCK=128)
    out[f"u{k}"], out[f"bits{k}"], out[f"mask{k}"] = u.numpy(), bits.numpy(), mask.numpy()
np.savez(sys.argv[1], **out)
"""


def test_dropout_mask_is_triton_rand(tmp_path):
    """The reference's Philox4x32-10 and dropout mask are what a Triton kernel computing
    tl.rand(seed, salt * 2**32 + i) draws, bit for bit. The kernel runs under Triton's interpreter in a
    fresh process (TRITON_INTERPRET is read when triton.language's own jit functions are decorated, at
    import, which this process may have done already)."""
    pytest.importorskip("triton")
    import subprocess
    import sys
    n = 300
    draws = [(0, 0, 0.5), (12345, zlib.crc32(b"fc6.drop"), 0.3), (2 ** 40 + 7, 2 ** 32 - 1, 0.9), (-5, 17, 0.75)]
    offs = [R.dropout_offsets(salt, n) for _, salt, _ in draws]
    args = [(seed, int(off[0]), kp) for (seed, _, kp), off in zip(draws, offs)]
    out = tmp_path / "draws.npz"
    env = dict(os.environ, TRITON_INTERPRET="1")
    r = subprocess.run([sys.executable, "-c", TRITON_DRAW, str(out), str(n), repr(args)], env=env,
                       capture_output=True, text=True, timeout=300)
    if r.returncode and "interpret" in r.stderr.lower() and "numpy" in r.stderr.lower():
        pytest.skip(f"Triton's interpreter does not run here: {r.stderr[-300:]}")
    assert r.returncode == 0, r.stderr[-2000:]
    got = np.load(out)
    for k, ((seed, salt, kp), off) in enumerate(zip(draws, offs)):
        assert np.array_equal(got[f"bits{k}"].view(np.uint32), R.tl_randint(seed, off))
        assert np.array_equal(got[f"u{k}"].view(np.uint32), R.tl_rand(seed, off).view(np.uint32))
        ref = R.dropout_mask(seed, [n], kp, salt)
        mask = torch.from_numpy(got[f"mask{k}"]).double()
        assert torch.equal(mask > 0, ref > 0)
        torch.testing.assert_close(mask, ref, rtol=1e-7, atol=0)


def test_philox_known_answer():
    """Philox4x32-10 against Random123's known-answer vectors (kat_vectors, philox4x32 10 rounds: counter,
    key (k0, k1) -> output); netc's key is the seed's (low, high) words."""
    ff = 0xFFFFFFFF
    for ctr, key, want in [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
                           ((ff, ff, ff, ff), (ff, ff), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
                           ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
                            (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]:
        got = R.philox4x32(key[0] | key[1] << 32, *([c] for c in ctr))
        assert tuple(int(v[0]) for v in got) == want


# -- training forms: batch norm --------------------------------------------------------------------

BN_NET = """
network t {
  input data: f32[%s]
  input label: f32[%s]
  p = InnerProduct(data) { num_outputs: %d }
  x = Reshape(p) { output_shape: %s }
  b = BatchNorm(x) { epsilon: 0.001, momentum: 0.8 }
  loss = EuclideanLoss(b, label)
}
"""


@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 2, 4)])
def test_batch_norm_statistics_and_running_stats(shape):
    c = shape[-1]
    m = train_program(BN_NET % (f"{shape[0]}, 3", ", ".join(map(str, shape)), prod(shape[1:]), list(shape)))
    body = m.networks()[0].regions[0].ops
    (bn,) = [op for op in body if op.name == "netc.batch_norm"]
    assert len(bn.operands) == 3 and bn.operands[1].owner.name == "netc.batch_stats"
    assert "grad_of" not in bn.operands[1].owner.attrs      # a forward op of the training program
    states = {p.attrs["sym_name"]: p for p in m.params() if p.attrs.get("state")}
    assert set(states) == {"b.running_mean", "b.running_var"}
    tr = ReferenceTrainer(m, seed=2)
    run_mean, run_var = torch.zeros(c, dtype=torch.float64), torch.ones(c, dtype=torch.float64)
    for step in range(2):
        data = torch.randn(shape[0], 3, generator=torch.Generator().manual_seed(step), dtype=torch.float64)
        out = tr.step({"data": data, "label": torch.zeros(shape, dtype=torch.float64)}, lr=0.0)
        x = out["x"].reshape(-1, c)
        want = F.batch_norm(x, run_mean, run_var, tr.params["b.scale"], tr.params["b.shift"], training=True,
                            momentum=1 - 0.8, eps=0.001)    # updates run_mean / run_var in place
        torch.testing.assert_close(out["b"].reshape(-1, c), want, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(tr.params["b.running_mean"], run_mean, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(tr.params["b.running_var"], run_var, rtol=1e-12, atol=1e-12)
    check_program(m, ["x"])


def test_batch_norm_keeps_inference_and_given_statistics():
    """One operand: the folded inference affine (unchanged); three: normalize with the given statistics,
    constants for the gradient (the data gradient through them, not through batch statistics)."""
    d = lookup("netc.batch_norm")
    x = torch.randn(4, 3, dtype=torch.float64)
    sc, sh = torch.rand(3, dtype=torch.float64) + 0.5, torch.randn(3, dtype=torch.float64)
    torch.testing.assert_close(d.reference(d.attrs_of(_Fake()), [x], {"scale": sc, "shift": sh}), x * sc + sh)
    with pytest.raises(ShapeError, match="not 2"):
        d.infer({}, [(4, 3), (3,)])
    src = """
network t {
  input data: f32[4, 3]
  input mean: f32[3]
  input var: f32[3]
  input label: f32[4, 3]
  p = InnerProduct(data) { num_outputs: 3 }
  x = Reshape(p) { output_shape: [4, 3] }
  b = BatchNorm(x, mean, var) { epsilon: 0.5 }
  loss = EuclideanLoss(b, label)
}
"""
    m = train_program(src)
    body = m.networks()[0].regions[0].ops
    assert not any(op.name == "netc.batch_stats" for op in body)
    (g,) = [op for op in body if op.name == "netc.batch_norm_grad"]
    assert g.attrs["batch_stats"] is False
    tr = ReferenceTrainer(m, seed=0)
    feed = tr.feed(None, lr=0.0)
    feed["var"] = feed["var"].abs()
    rows = check_grads(m, inputs={k: v for k, v in feed.items() if k in ("data", "mean", "var", "label")})
    assert all(r["rel_error"] <= TOL for r in rows), rows


class _Fake:
    attrs: dict = {}


# -- sharing ---------------------------------------------------------------------------------------

def test_value_read_by_several_layers():
    """A value with several readers (what SINGA's kSplit becomes: no op, the readers read its source)
    gets the sum of their gradients."""
    src = """
network t {
  input data: f32[3, 4, 4, 2]
  input label: f32[3, 5]
  c = Convolution(data) { filter: [3, 3, 2, 3], padding: SAME, activation: relu }
  x = Reshape(c) { output_shape: [3, 4, 4, 3] }
  a = Convolution(x) { filter: [1, 1, 3, 2], padding: VALID }
  b = MaxPool(x) { ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1] }
  f = InnerProduct(a) { num_outputs: 5 }
  g = InnerProduct(b) { num_outputs: 5 }
  h = InnerProduct(x) { num_outputs: 5 }
  s = Elementwise(f, g, h)
  loss = EuclideanLoss(s, label)
}
"""
    m = train_program(src)
    body = m.networks()[0].regions[0].ops
    # a running sum: the first two contributions, then the third added to it
    (total,) = [op for op in body if op.attrs.get("name") == "x.grad"]
    (partial,) = [op for op in body if op.attrs.get("name") == "x.grad_acc"]
    assert total.name == partial.name == "netc.elementwise" and len(total.operands) == len(partial.operands) == 2
    assert total.operands[0] is partial.results[0]
    check_program(m, ["x"])
    check_costs(m)


SINGA_SPLIT = """name: "split"
neuralnet {
  layer { name: "data" type: kRecordInput store_conf { batchsize: 4 shape: 6 } }
  layer { name: "fc1" type: kInnerProduct srclayers: "data" innerproduct_conf { num_output: 5 }
          param { name: "w1" } param { name: "b1" } }
  layer { name: "act" type: kSTanh srclayers: "fc1" }
  layer { name: "fc2" type: kInnerProduct srclayers: "act" innerproduct_conf { num_output: 3 }
          param { name: "w2" } param { name: "b2" } }
  layer { name: "fc3" type: kInnerProduct srclayers: "act" innerproduct_conf { num_output: 3 }
          param { name: "w3" } param { name: "b3" } }
  layer { name: "cat" type: kConcate srclayers: "fc2" srclayers: "fc3" concate_conf { concate_dim: 1 num_concates: 2 } }
  layer { name: "loss" type: kSoftmaxLoss srclayers: "cat" srclayers: "data" }
}
cluster { nworkers_per_group: 1 }
"""


def test_singa_split_trains():
    """SINGA inserts a kSplit where a layer has two destinations; in netc the readers share the value,
    and its gradient is the sum of theirs."""
    from netc.frontend.singa import build_singa
    assert any(n.type == "kSplit" for n in build_singa(SINGA_SPLIT, file="split.conf").nodes)
    m = train_program(SINGA_SPLIT, "split.conf")
    body = m.networks()[0].regions[0].ops
    (act,) = [op for op in body if op.attrs.get("name") == "0#act:0"]
    assert sum(act.results[0] in op.operands for op in body if "grad_of" not in op.attrs) == 2
    (total,) = [op for op in body if op.attrs.get("name") == "0#act:0.grad"]
    assert total.name == "netc.elementwise" and len(total.operands) == 2
    check_program(m)


SINGA_GRU = """
name: "rnn"
train_one_batch { alg: kBPTT }
neuralnet {
  unroll_len: 4
  layer { name: "data" type: kCharRNN unroll_len: 1 char_rnn_conf { batchsize: 3 unroll_len: 4 } }
  layer { name: "onehot" type: kOneHot srclayers: "data" unroll_conn_type: kUnrollOneToAll
          onehot_conf { vocab_size: 5 } }
  layer { name: "gru" type: kGRU srclayers: "onehot" gru_conf { dim_hidden: 6 } %s }
}
cluster { workspace: "w" }
"""
ROLES = ("z_hx", "r_hx", "c_hx", "z_hh", "r_hh", "c_hh", "z_b", "r_b", "c_b")


@pytest.mark.parametrize("nparams", [9, 6])
def test_rolled_gru_gradients(nparams):
    """SINGA's GRU unrolled over 4 steps, imported rolled (one netc.gru over [4, B, V]): its parameters'
    gradients against autograd through all four steps."""
    params = " ".join(f'param {{ name: "{r}" }}' for r in ROLES[:nparams])
    m = train_program(SINGA_GRU % params, "rnn.conf", outputs=["gru"])
    grads = m.networks()[0].attrs["gradients"]
    assert set(grads) == set(ROLES[:nparams])
    check_program(m)
    check_costs(m)


# -- errors, printing ------------------------------------------------------------------------------

def test_opaque_layer_on_gradient_path_is_a_located_error():
    src = """network t {
  input data: f32[2, 4]
  input label: f32[2, 3]
  fc = InnerProduct(data) { num_outputs: 3 }
  odd = Opaque(fc) { type: "Mystery" }
  loss = EuclideanLoss(odd, label)
}
"""
    with pytest.raises(NetcError) as e:
        train_program(src)
    (d,) = [d for d in e.value.diagnostics if d.severity == "error"]
    assert "cannot differentiate 'odd'" in d.message and "'Mystery'" in d.message
    assert (d.loc.file, d.loc.line) == ("t.nd", 5)
    # frozen below it, nothing needs a gradient through it
    m = train_program(src.replace("loss = EuclideanLoss(odd, label)", "top = InnerProduct(odd) { num_outputs: 3 }\n"
                                  "  loss = EuclideanLoss(top, label)"), freeze=["fc"])
    check_program(m)


def test_training_program_round_trips():
    """Multi-result (batch_stats), result-less (running_stats_update) and gradient ops print and parse back."""
    m = train_program(FD_NETS["conv_lrn_bn_pool"].replace("b = BatchNorm", "q = Dropout(n)\n  b = BatchNorm")
                      .replace("BatchNorm(n)", "BatchNorm(q)"))
    text = print_ir(m)
    assert '"netc.running_stats_update"' in text and "%b.stats#1" in text
    assert print_ir(parse_ir(text)) == text
