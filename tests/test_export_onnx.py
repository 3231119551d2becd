"""`netc export --format onnx` (issue 27): the model onnx.checker accepts, run in onnxruntime (an oracle that
shares no code with netc) on the reference executor's random inputs, equals the reference executor's
outputs (float64) with the same parameters, within f32. The layout bookkeeping (netc's NHWC, ONNX's NCHW
image ops) is checked by networks that mix the two: a concatenation of NCHW images, an inner product
reading one (its weight rows permuted), a 4-d output, Paleo's asymmetric SAME padding, a window sweep
that drops the last row and one that starts inside the image (a crop)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from netc.diagnostics import DiagnosticEngine, NetcError  # noqa: E402
from netc.export.onnx import export_onnx  # noqa: E402
from netc.frontend import load, load_text  # noqa: E402
from netc.pipelines import Options, inference  # noqa: E402
from netc.runtime.reference import random_float_input, run_reference  # noqa: E402

from cli_inprocess import netc_inprocess  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# every rule at once: stride-2 SAME convolutions (Paleo pads the bottom/right more), a VALID pool that drops
# an overhanging row (a crop), an average pool with padding (in-bounds elements counted), LRN, a channel
# concatenation of NCHW images, a residual sum, a fused sigmoid and tanh, dropout, a 4-d output, an inner
# product on an NCHW image and a softmax
MIXED = """network mixed {
  input x: f32[3, 13, 13, 5]
  a = Convolution(x) { filter: [3, 3, 5, 8], strides: [1, 2, 2, 1], padding: SAME, activation: relu }
  b = Convolution(x) { filter: [1, 1, 5, 4], strides: [1, 2, 2, 1], padding: SAME, activation: sigmoid }
  c = Concatenate(a, b) { dim: 3 }
  n = LRN(c) { local_size: 3, alpha: 0.001, beta: 0.75, knorm: 2.0 }
  p = Pooling(n) { ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1], padding: VALID }   # drops row 6
  q = AvgPool(n) { ksize: [1, 3, 3, 1], strides: [1, 3, 3, 1], padding: SAME }
  s = Elementwise(p, q) { operation: sum }
  d = Dropout(s) { dropout_keep_prob: 0.5 }
  t = Convolution(d) { filter: [2, 2, 12, 6], strides: [1, 1, 1, 1], padding: VALID, activation: tanh, bias: false }
  r = Reshape(t) { output_shape: [-1, 12] }
  f = InnerProduct(t) { num_outputs: 7 }
  prob = Softmax(f)
  output prob, s, r
}
"""


def compare(module, seed=0, params=None):
    data = export_onnx(module, params=params, seed=seed)
    model = onnx.load_from_string(data)
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    feeds = {i.name: random_float_input(i.name, tuple(i.shape), seed).numpy().astype(np.float32)
             for i in sess.get_inputs()}
    ref = run_reference(module, None, params, seed=seed)
    errs = {}
    for o, v in zip(sess.get_outputs(), sess.run(None, feeds)):
        r = ref[o.name].numpy()
        assert v.shape == r.shape, o.name
        errs[o.name] = float(np.abs(v - r).max() / max(np.abs(r).max(), 1e-30))
    return errs, model


def inferred(text=None, path=None):
    d = DiagnosticEngine()
    m = load_text(text, "net.nd") if text is not None else load(str(path), d)
    inference(m, Options(phase="test"), d)
    assert not d.has_errors(), d.diagnostics
    return m


def test_every_rule_against_the_reference():
    errs, model = compare(inferred(MIXED))
    assert set(errs) == {"prob", "s", "r"} and max(errs.values()) < 1e-5, errs
    ops = [n.op_type for n in model.graph.node]
    # one transpose after the input; the concat, LRN, pools and sum stay NCHW; the 4-d output 's' and the
    # tanh convolution's input need none (the inner product reads NCHW): one more for 's' alone
    assert ops.count("Transpose") == 3, ops      # and one for the reshape of t (netc's element order)
    assert {"Conv", "Concat", "LRN", "MaxPool", "AveragePool", "Sum", "Gemm", "Softmax"} <= set(ops), ops
    assert "Slice" not in ops      # the VALID pool's dropped row: ONNX's rounding drops it too

    assert [i.name for i in model.graph.input] == ["x"] and [o.name for o in model.graph.output] == ["prob", "s", "r"]
    assert [d.dim_value for d in model.graph.output[1].type.tensor_type.shape.dim] == [3, 3, 3, 12]   # NHWC


def test_a_window_netc_starts_inside_the_image_is_cropped():
    """A 1x1 stride-2 SAME convolution of an even size: Paleo's SAME pads the top by -1 (the windows start at
    row 1), which ONNX's pads cannot say: a Slice crops first."""
    errs, model = compare(inferred("network c {\n  input x: f32[2, 8, 6, 3]\n"
                                   "  y = Convolution(x) { filter: [1, 1, 3, 4], strides: [1, 2, 2, 1], padding: SAME }\n}\n"))
    assert max(errs.values()) < 1e-5, errs
    assert "Slice" in [n.op_type for n in model.graph.node]

MOBILE = """network mobile {
  input x: f32[2, 9, 8, 4]
  d = DepthwiseConvolution(x) { filter: [3, 3, 4, 2], strides: [1, 2, 2, 1], padding: SAME, activation: relu }
  r = ReLU6(d)
  e = DepthwiseConvolution(r) { filter: [3, 2, 8, 1], padding: [1, 0], bias: false }
  c = Clip(e) { min: -0.5, max: 0.75 }
  m = MaxPool(c) { ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1], padding: [0, 0, 1, 1] }
  a = AvgPool(c) { ksize: [1, 3, 2, 1], strides: [1, 2, 3, 1], padding: [1, 0, 2, 1] }
  output m, a
}
"""


def test_depthwise_clip_and_four_sided_pool_padding():
    """A depthwise convolution is a Conv of group C (its filter [kh, kw, C, M] as [C*M, 1, kh, kw]), ReLU6 and Clip
    are Clip with constant bounds, a pool's [top, left, bottom, right] padding ONNX's pads."""
    errs, model = compare(inferred(MOBILE), seed=4)
    assert max(errs.values()) < 1e-5, errs
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    assert [next(a.i for a in n.attribute if a.name == "group") for n in convs] == [4, 8]
    assert [n.op_type for n in model.graph.node].count("Clip") == 2
    pools = {n.op_type: list(next(a.ints for a in n.attribute if a.name == "pads")) for n in model.graph.node
             if n.op_type in ("MaxPool", "AveragePool")}
    # (the padding the windows reach: [1, 0, 2, 1]'s last row and column are past the last window, as in netc)
    assert pools == {"MaxPool": [0, 0, 1, 1], "AveragePool": [1, 0, 1, 0]}


@pytest.mark.parametrize("name", ["lenet", "digits", "cifar10_phases"])   # (nin: 33 s of f64 reference)
def test_examples_run_in_onnxruntime_as_on_the_reference(name):
    errs, model = compare(inferred(path=ROOT / "examples" / f"{name}.nd"), seed=3)
    assert errs and max(errs.values()) < 1e-5, errs
    names = {i.name for i in model.graph.initializer}
    assert any(n.startswith("conv") or n.startswith("fc") or "." in n for n in names)


def test_given_parameters_are_the_ones_written():
    m = inferred(MIXED)
    from netc.runtime.reference import module_params
    params = {k: v * 0.5 for k, v in module_params(m, None, seed=9).items()}
    errs, _ = compare(m, seed=1, params=params)
    assert max(errs.values()) < 1e-5, errs


def test_a_layer_without_an_onnx_form_is_named(tmp_path):
    m = inferred("network r {\n  input x: f32[4, 3, 6]\n  y = Lstm(x) { size: 5 }\n  z = Lstm(y) { size: 2 }\n}\n")
    with pytest.raises(NetcError, match=r"no ONNX form for 2 layers: 'y' \(netc.lstm\), 'z' \(netc.lstm\)"):
        export_onnx(m)


def test_cli_writes_the_model_and_says_what_it_left_out(tmp_path):
    out = tmp_path / "lenet.onnx"
    r = netc_inprocess("export", ROOT / "examples/lenet.nd", "--format", "onnx", "-o", out)
    assert r.returncode == 0, r.stderr
    assert "left out of the ONNX model (losses are not inference): loss; input 'label'" in r.stderr
    onnx.checker.check_model(onnx.load(str(out)))
    r = netc_inprocess("export", ROOT / "examples/sequences.nd", "--format", "onnx", "-o", tmp_path / "s.onnx")
    assert r.returncode == 1 and "Traceback" not in r.stderr and "netc.lstm" in r.stderr, r.stderr
    r = netc_inprocess("export", ROOT / "examples/lenet.nd", "--format", "paleo", "--params", tmp_path / "p.npz")
    assert r.returncode == 1 and "--params goes with --format onnx" in r.stderr


def test_an_embedding_of_integer_ids_is_a_gather_and_reads_back(tmp_path):
    """Embedding -> ONNX Gather of the table's rows, its i64 ids an INT64 model input; onnxruntime on the same
    ids gives the reference's outputs, and the model imports back to an Embedding (frontend/onnx.py)."""
    m = inferred("network ng {\n  input w: i64[3, 4]\n  e = Embedding(w) { num_embeddings: 20, dim: 6 }\n"
                 "  f = InnerProduct(e) { num_outputs: 5 }\n  prob = Softmax(f)\n}\n")
    data = export_onnx(m, seed=2)
    model = onnx.load_from_string(data)
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT64
    assert "Gather" in [n.op_type for n in model.graph.node]
    ids = torch.randint(0, 20, (3, 4), generator=torch.Generator().manual_seed(1))
    got = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"w": ids.numpy()})[0]
    ref = run_reference(m, {"w": ids}, None, seed=2)["prob"].numpy()
    assert np.abs(got - ref).max() / np.abs(ref).max() < 1e-6
    (tmp_path / "ng.onnx").write_bytes(data)
    back = inferred(path=tmp_path / "ng.onnx")
    assert "netc.embedding" in {op.name for n in back.networks() for op in n.regions[0].ops}
    again = run_reference(back, {"w": ids}, None)["prob"].numpy()
    assert np.abs(again - ref).max() / np.abs(ref).max() < 1e-6
