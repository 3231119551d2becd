"""ONNX models in (issue 27, frontend/onnx.py): models exported from torch (torch.onnx, the TorchScript
exporter) import, and netc's reference executor and its kernels on the interpreter give torch's outputs on
the same inputs, the NCHW model read as netc's NHWC; parameter counts equal torch's. Constant shape
subgraphs fold, older opsets convert, unsupported ops are listed at once, `netc import` writes the .nd and
its parameters, and a model netc exported (export/onnx.py) imports back to the same outputs."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn

onnx = pytest.importorskip("onnx")

from netc.diagnostics import DiagnosticEngine, NetcError  # noqa: E402
from netc.frontend import load  # noqa: E402
from netc.pipelines import Options, inference  # noqa: E402
from netc.runtime.reference import run_reference  # noqa: E402

from cli_inprocess import netc_inprocess, netc_interp  # noqa: E402
from onnx_models import exported_unfolded, inferred, randomize_batch_norms, rel  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


class Small(nn.Module):
    """Every op the importer reads from a torch CNN (torch writes LRN as a decomposition: netc's own
    export's LRN is read below): a strided padded convolution, an unfolded batch norm, max and average
    pooling, a channel concatenation, leaky ReLU, sigmoid, a residual sum, a flatten written as
    x.view(x.size(0), -1) (a Shape -> Gather -> Concat -> Reshape subgraph), dropout, a ReLU between the
    flatten and the linear layer that reads it, a global average pool, two linear layers and a softmax."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 6, 3, padding=1)
        self.c3 = nn.Conv2d(8, 4, 1, bias=False)
        self.c4 = nn.Conv2d(10, 10, 3, padding=1)
        self.fc1 = nn.Linear(10 * 4 * 4, 12)
        self.fc2 = nn.Linear(12, 5)
        self.drop = nn.Dropout(0.3)

    def forward(self, x):
        y = torch.relu(self.bn(self.c1(x)))
        y = nn.functional.max_pool2d(y, 2)
        y = torch.cat([nn.functional.leaky_relu(self.c2(y), 0.1), torch.sigmoid(self.c3(y))], 1)
        y = nn.functional.avg_pool2d(self.c4(y), 3, 1, 1, count_include_pad=False) + y
        y = torch.relu(self.drop(y.view(y.size(0), -1)))
        return torch.softmax(self.fc2(torch.tanh(self.fc1(y))), 1)


class Gap(nn.Module):
    """A global average pool, then a flatten of its [N, C, 1, 1] (no reordering needed) into a product."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 7, 3)
        self.fc = nn.Linear(7, 4)

    def forward(self, x):
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(torch.relu(self.c(x)), 1), 1))


def exported(tmp_path, model, x, opset=17, name="m.onnx", fold=False, inputs=("x",), outputs=("prob",)):
    """torch.onnx's TorchScript export of model on x (a tensor, or a tuple of them) into tmp_path/name."""
    path = tmp_path / name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, x if isinstance(x, tuple) else (x,), str(path), dynamo=False, opset_version=opset,
                          input_names=list(inputs), output_names=list(outputs), do_constant_folding=fold)
    return path


def small(seed=0):
    torch.manual_seed(seed)
    m = Small().eval()
    with torch.no_grad():
        m.bn.running_mean.uniform_(-1, 1)
        m.bn.running_var.uniform_(0.5, 2)
        m.bn.weight.uniform_(0.5, 1.5)
    return m, torch.randn(2, 3, 16, 16)


def reference(path, x):
    d = DiagnosticEngine()
    m = load(str(path), d)
    inference(m, Options(phase="test"), d)
    assert not d.has_errors(), d.diagnostics
    return m, run_reference(m, {"x": x.permute(0, 2, 3, 1).double()}, None)


@pytest.mark.parametrize("opset", [17, 11])
def test_a_torch_model_gives_torchs_outputs(tmp_path, opset):
    model, x = small()
    path = exported(tmp_path, model, x, opset=opset)
    mod, out = reference(path, x)
    with torch.no_grad():
        want = model(x).numpy()
    assert rel(out["prob"], want) < 1e-5
    # parameters: torch's trainable ones (the batch norm's scale and shift become netc's folded affine)
    from netc.explain import layer_rows
    assert sum(r["params"] for r in layer_rows(mod)) == sum(p.numel() for p in model.parameters())
    ops = {op.name for n in mod.networks() for op in n.regions[0].ops}
    assert {"netc.conv2d", "netc.batch_norm", "netc.concat", "netc.avgpool", "netc.elementwise", "netc.inner_product"} <= ops


def test_a_global_pool_into_a_product(tmp_path):
    torch.manual_seed(3)
    model, x = Gap().eval(), torch.randn(3, 3, 9, 9)
    m = inferred(exported(tmp_path, model, x, name="gap.onnx", outputs=("y",)))
    out = run_reference(m, {"x": x.permute(0, 2, 3, 1).double()}, None)
    with torch.no_grad():
        assert rel(out["y"], model(x).numpy()) < 1e-5


class Arithmetic(nn.Module):
    """Arithmetic with constant operands, as models write normalization and scaling: a per-channel
    parameter added to an image ([1, C, 1, 1]), a scalar product, a subtraction and a division by a
    per-channel constant on both sides of an image, c - x on features ([F]), a scalar on a flattened
    image; they import as netc's folded affine (BatchNorm: x * scale + shift on the channel axis)."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Parameter(torch.randn(1, 8, 1, 1))
        self.register_buffer("d", torch.rand(8, 1, 1) + 0.5)
        self.register_buffer("f", torch.randn(5))
        self.fc = nn.Linear(8 * 6 * 6, 5)

    def forward(self, x):
        y = (torch.relu(self.c(x) + self.b) * 0.5 - 1.0) / self.d
        y = torch.flatten(y, 1) * 2.0
        return self.f - self.fc(y)


def test_arithmetic_with_constants_reads_as_an_affine(tmp_path):
    torch.manual_seed(4)
    model, x = Arithmetic().eval(), torch.randn(2, 3, 6, 6)
    # the input is named 'input', a keyword of the .nd language
    m = inferred(exported(tmp_path, model, x, name="arith.onnx", inputs=("input",), outputs=("y",)))
    out = run_reference(m, {"input_": x.permute(0, 2, 3, 1).double()}, None)
    with torch.no_grad():
        assert rel(out["y"], model(x).numpy()) < 1e-5
    ops = [op.name for n in m.networks() for op in n.regions[0].ops]
    assert ops.count("netc.batch_norm") == 6, ops


@pytest.mark.parametrize("body,why", [
    ("self.c(x) / torch.sigmoid(self.c(x))", "Div of two computed values"),
    ("torch.full((8, 1, 1), 2.0) / self.c(x)", "a constant divided by a value"),
    ("self.c(x) + torch.ones(1, 8, 6, 1)", r"a constant of shape \[1, 8, 6, 1\] against \[1, 8, 6, 6\]"),
    ("self.c(x) - self.c(x)", "Sub of two computed values"),
])
def test_arithmetic_that_is_no_affine_is_a_located_error(tmp_path, body, why):
    ns = {}
    exec(f"def forward(self, x):\n    return {body}\n", {"torch": torch}, ns)
    model = type("M", (nn.Module,), {"forward": ns["forward"]})()
    model.c = nn.Conv2d(3, 8, 1)
    path = exported(tmp_path, model.eval(), torch.randn(1, 3, 6, 6), name="bad.onnx")
    with pytest.raises(NetcError, match=why):
        load(str(path), DiagnosticEngine())


class NGram(nn.Module):
    """PaddlePaddle book's word2vec shape: the embeddings of 4 words (int64 ids, one table), concatenated by
    a view, a hidden layer, a softmax over the vocabulary."""

    def __init__(self):
        super().__init__()
        self.e = nn.Embedding(50, 8)
        self.fc = nn.Linear(32, 16)
        self.out = nn.Linear(16, 50)

    def forward(self, w):
        return torch.softmax(self.out(torch.sigmoid(self.fc(self.e(w).view(w.shape[0], -1)))), 1)


def test_a_gather_from_a_table_is_an_embedding_of_integer_ids(tmp_path):
    torch.manual_seed(5)
    model, w = NGram().eval(), torch.randint(0, 50, (3, 4))
    path = exported(tmp_path, model, w, name="ngram.onnx", inputs=("words",))
    m = inferred(path)
    out = run_reference(m, {"words": w}, None)
    with torch.no_grad():
        assert rel(out["prob"], model(w).numpy()) < 1e-6
    from netc.explain import layer_rows
    assert sum(r["params"] for r in layer_rows(m)) == sum(p.numel() for p in model.parameters())
    ops = {op.name for n in m.networks() for op in n.regions[0].ops}
    assert "netc.embedding" in ops
    # the kernels on the interpreter, on random ids below the table's rows
    r = netc_interp("run", path, "--target", "interp", "--compare")
    assert r.returncode == 0 and "prob: max relative error" in r.stderr, r.stderr


def test_integer_inputs_are_read_only_as_ids(tmp_path):
    class Bad(nn.Module):
        def forward(self, w):
            return w + w
    path = exported(tmp_path, Bad(), torch.randint(0, 5, (2, 3)), name="bad.onnx", inputs=("w",))
    with pytest.raises(NetcError, match=r"input 'w' is not float32 .*only as the ids of a Gather"):
        load(str(path), DiagnosticEngine())


class Grouped(nn.Module):
    """Grouped convolutions (AlexNet's two towers, ShuffleNet's groups), with and without bias."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(4, 6, 3, padding=1, groups=2)
        self.b = nn.Conv2d(6, 8, 1, groups=2, bias=False)
        self.c = nn.Conv2d(8, 8, 3, stride=2, groups=4)

    def forward(self, x):
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))


def test_a_grouped_convolution_is_one_convolution_per_group(tmp_path):
    torch.manual_seed(6)
    model, x = Grouped().eval(), torch.randn(2, 4, 9, 9)
    path = exported(tmp_path, model, x, name="grouped.onnx")
    mod, out = reference(path, x)
    with torch.no_grad():
        assert rel(np.asarray(out["prob"]).transpose(0, 3, 1, 2), model(x).numpy()) < 1e-6
    from netc.explain import layer_rows
    assert sum(r["params"] for r in layer_rows(mod)) == sum(p.numel() for p in model.parameters())
    ops = [op.name for n in mod.networks() for op in n.regions[0].ops]
    assert ops.count("netc.conv2d") == 2 + 2 + 4 and ops.count("netc.slice") == 8
    # the kernels on the interpreter: the channel slices (strided narrows) feed each group's convolution
    r = netc_interp("run", path, "--target", "interp", "--compare")
    assert r.returncode == 0 and "prob: max relative error" in r.stderr, r.stderr


class Recurrent(nn.Module):
    """torch's LSTM or GRU over a time-major sequence, then its last step (y[-1]: a Gather of one index) into a
    linear layer; with `state`, the LSTM's initial h0, c0 are model inputs."""

    def __init__(self, kind, state=False):
        super().__init__()
        self.r, self.fc, self.state = getattr(nn, kind)(5, 7), nn.Linear(7, 3), state

    def forward(self, x, h0=None, c0=None):
        y, _ = self.r(x, (h0, c0)) if self.state else self.r(x)
        return self.fc(y[-1])


@pytest.mark.parametrize("kind,state", [("LSTM", False), ("LSTM", True), ("GRU", False)])
def test_lstm_and_gru_give_torchs_outputs(tmp_path, kind, state):
    """ONNX's LSTM (gates i, o, f, c, two biases, no peepholes) as netc's Lstm, its GRU (linear_before_reset 1,
    torch's) as netc's GRU, against torch; the kernels on the interpreter against the reference."""
    torch.manual_seed(7)
    model, x = Recurrent(kind, state).eval(), torch.randn(6, 4, 5)
    if kind == "GRU":      # netc's GRU (SINGA's) has no recurrent bias on the new memory: torch's b_hn zero
        with torch.no_grad():
            model.r.bias_hh_l0[14:].zero_()
    args = (x, torch.randn(1, 4, 7), torch.randn(1, 4, 7)) if state else (x,)
    path = exported(tmp_path, model, args, name="rnn.onnx", inputs=["x", "h0", "c0"][:len(args)], outputs=("y",))
    m = inferred(path)
    feed = dict(zip(["x", "h0", "c0"], (a.double() for a in args)))
    if state:                  # ONNX's [1, B, H] initial states: netc's Lstm takes [B, H]
        feed = {k: v[0] if k != "x" else v for k, v in feed.items()}
    out = run_reference(m, feed, None)
    with torch.no_grad():
        assert rel(out["y"], model(*args).numpy()) < 1e-6
    ops = {op.name for n in m.networks() for op in n.regions[0].ops}
    assert ("netc.lstm" if kind == "LSTM" else "netc.gru") in ops
    r = netc_interp("run", path, "--target", "interp", "--compare")
    assert r.returncode == 0 and "y: max relative error" in r.stderr, r.stderr


class Bidirectional(nn.Module):
    """torch's bidirectional LSTM or GRU (exported as one node of direction "bidirectional", its Y transposed to
    [T, B, 2, H] and reshaped to [T, B, 2H]), its first and last steps into a linear layer, and its final hidden
    states h [2, B, H] as a second output; with `state`, the initial states [2, B, H] are model inputs."""

    def __init__(self, kind, state=False):
        super().__init__()
        self.r, self.fc, self.kind, self.state = getattr(nn, kind)(5, 7, bidirectional=True), nn.Linear(14, 3), kind, state
        if kind == "GRU":   # netc's GRU (SINGA's) has no recurrent bias on the new memory: torch's b_hn zero
            with torch.no_grad():
                self.r.bias_hh_l0[14:].zero_()
                self.r.bias_hh_l0_reverse[14:].zero_()

    def forward(self, x, h0=None, c0=None):
        y, h = (self.r(x, (h0, c0)) if self.kind == "LSTM" else self.r(x, h0)) if self.state else self.r(x)
        return self.fc(y[-1]) + self.fc(y[0]), h[0] if self.kind == "LSTM" else h


@pytest.mark.parametrize("kind,state", [("LSTM", False), ("GRU", False), ("LSTM", True), ("GRU", True)])
def test_bidirectional_lstm_and_gru_give_torchs_outputs(tmp_path, kind, state):
    """direction "bidirectional": the forward Lstm/GRU and one between two SequenceReverse, their outputs
    concatenated (y) and their last steps stacked (h), against torch; without initial states also the kernels on
    the interpreter against the reference (an initial state [2, B, H] is no batch-sized input: the compiled
    targets refuse it, located)."""
    torch.manual_seed(9)
    model, x = Bidirectional(kind, state).eval(), torch.randn(5, 3, 5)
    args = ((x, torch.randn(2, 3, 7)) + ((torch.randn(2, 3, 7),) if kind == "LSTM" else ())) if state else (x,)
    names = ["x", "h0", "c0"][:len(args)]
    path = exported(tmp_path, model, args, name="birnn.onnx", inputs=names, outputs=("y", "h"))
    m = inferred(path)
    out = run_reference(m, dict(zip(names, (a.double() for a in args))), None)
    with torch.no_grad():
        want = model(*args)
    assert rel(out["y"], want[0].numpy()) < 1e-6 and rel(out["h"], want[1].numpy()) < 1e-6
    ops = [op.name for n in m.networks() for op in n.regions[0].ops]
    assert ops.count("netc.lstm" if kind == "LSTM" else "netc.gru") == 2 and ops.count("netc.seq_reverse") == 2
    if not state:
        r = netc_interp("run", path, "--target", "interp", "--compare")
        assert r.returncode == 0 and "y: max relative error" in r.stderr and "h: max relative error" in r.stderr, \
            r.stderr


@pytest.mark.parametrize("op,lbr", [("LSTM", 0), ("GRU", 0), ("GRU", 1)])
def test_a_reverse_recurrence_gives_onnx_references_outputs(tmp_path, op, lbr):
    """direction "reverse" (torch never exports it): a one-node model with random weights, peepholes for the LSTM,
    against onnx.reference's evaluator (an oracle that shares no code with netc): Y and Y_h."""
    from onnx import TensorProto, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator
    rng = np.random.default_rng(5 + lbr)
    t, b, n, h = 4, 3, 5, 6
    g = 4 if op == "LSTM" else 3
    w = {"W": rng.normal(0, 0.5, (1, g * h, n)), "R": rng.normal(0, 0.5, (1, g * h, h)),
         "B": rng.normal(0, 0.5, (1, 2 * g * h))}
    if op == "GRU" and lbr:
        w["B"][0, g * h + 2 * h:] = 0        # (no recurrent bias on the new memory: netc's GRU has none)
    if op == "LSTM":
        w["P"] = rng.normal(0, 0.5, (1, 3 * h))
    inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in w.items()]
    ins = ["x", "W", "R", "B"] + (["", "", "", "P"] if op == "LSTM" else [])
    attrs = {"hidden_size": h, "direction": "reverse"} | ({"linear_before_reset": lbr} if op == "GRU" else {})
    node = helper.make_node(op, ins, ["Y", "Y_h"], name="rnn", **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [t, b, n])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [t, 1, b, h]),
                               helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [1, b, h])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "reverse.onnx"
    onnx.save(model, str(path))
    x = rng.normal(0, 1, (t, b, n)).astype(np.float32)
    want = ReferenceEvaluator(model).run(None, {"x": x})
    out = run_reference(inferred(path), {"x": torch.from_numpy(x).double()}, None)
    assert rel(out["Y"], want[0]) < 1e-5 and rel(out["Y_h"], want[1]) < 1e-5


@pytest.mark.parametrize("direction,acts", [("forward", ["Sigmoid", "Relu", "Tanh"]),
                                             ("bidirectional", ["Sigmoid", "Tanh", "Sigmoid", "Sigmoid", "Relu", "Relu"])])
def test_lstm_activations_give_onnxruntimes_outputs(tmp_path, direction, acts):
    """An LSTM's activations [f, g, h] per direction (g the block input's, h the cell output's) as netc's Lstm's
    activation and cell_activation, against onnxruntime (onnx.reference ignores them); other ones are refused."""
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(21)
    t, b, n, h, nd = 4, 2, 3, 5, 2 if direction == "bidirectional" else 1
    w = {"W": rng.normal(0, 0.5, (nd, 4 * h, n)), "R": rng.normal(0, 0.5, (nd, 4 * h, h)),
         "B": rng.normal(0, 0.5, (nd, 8 * h))}
    inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in w.items()]

    def model(activations):
        node = helper.make_node("LSTM", ["x", "W", "R", "B"], ["Y", "Y_h"], name="lstm", hidden_size=h,
                                direction=direction, activations=activations)
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [t, b, n])],
                                  [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [t, nd, b, h]),
                                   helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [nd, b, h])], inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "acts.onnx"
    onnx.save(model(acts), str(path))
    x = rng.normal(0, 1, (t, b, n)).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    out = run_reference(inferred(path), {"x": torch.from_numpy(x).double()}, None)
    assert rel(out["Y"], want[0]) < 1e-5 and rel(out["Y_h"], want[1]) < 1e-5
    onnx.save(model(["Sigmoid", "HardSigmoid", "Tanh"] * nd), str(path))
    with pytest.raises(NetcError, match=r"not read yet: activations \['Sigmoid', 'HardSigmoid', 'Tanh'\]"):
        load(str(path), DiagnosticEngine())


def _padded_recurrence(op, direction, t, b, n, h, lens, seed):
    """A one-node LSTM/GRU model with random weights (peepholes for the LSTM) reading sequence_lens: a model
    input 'sl' (int32 [B]) where lens is None, else a constant of those values."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    nd, g = 2 if direction == "bidirectional" else 1, 4 if op == "LSTM" else 3
    w = {"W": rng.normal(0, 0.5, (nd, g * h, n)), "R": rng.normal(0, 0.5, (nd, g * h, h)),
         "B": rng.normal(0, 0.5, (nd, 2 * g * h))}
    if op == "LSTM":
        w["P"] = rng.normal(0, 0.5, (nd, 3 * h))
    inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in w.items()]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [t, b, n])]
    if lens is None:
        inputs.append(helper.make_tensor_value_info("sl", TensorProto.INT32, [b]))
    else:
        inits.append(numpy_helper.from_array(np.asarray(lens, np.int32), "sl"))
    ins = ["x", "W", "R", "B", "sl"] + (["", "", "P"] if op == "LSTM" else [])
    node = helper.make_node(op, ins, ["Y", "Y_h"], name="rnn", hidden_size=h, direction=direction)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [t, nd, b, h]),
                                                    helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [nd, b, h])],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_sequence_lens_give_onnxruntimes_outputs(tmp_path, op, direction):
    """sequence_lens on a padded batch of different lengths (T, 1 and one between) against onnxruntime: Y zero
    past each length (netc's SequenceMask), Y_h each sequence's last valid step, the reverse direction starting
    at each sequence's last valid step (SequenceReverse and SequencePool 'last' over the lengths)."""
    ort = pytest.importorskip("onnxruntime")
    t, b, n, h = 5, 3, 3, 4
    lens = np.array([5, 1, 3], np.int32)
    path = tmp_path / "padded.onnx"
    onnx.save(_padded_recurrence(op, direction, t, b, n, h, None, 31), str(path))
    x = np.random.default_rng(32).normal(0, 1, (t, b, n)).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x, "sl": lens})
    assert not want[0][3:, :, 2].any() and want[0][3:, :, 0].all()        # the oracle pads with zeros
    out = run_reference(inferred(path), {"x": torch.from_numpy(x).double(), "sl": torch.from_numpy(lens)}, None)
    assert rel(out["Y"], want[0]) < 1e-5 and rel(out["Y_h"], want[1]) < 1e-5
    assert not out["Y"][1:, :, 1].any()
    # the lengths matter: the same batch read as T steps each differs from the oracle's padded answer
    every = torch.full((b,), t, dtype=torch.int32)
    full = run_reference(inferred(path), {"x": torch.from_numpy(x).double(), "sl": every}, None)
    assert rel(full["Y_h"], want[1]) > 1e-3


def test_sequence_lens_on_the_interpreter_and_as_constants(tmp_path):
    """A bidirectional LSTM with sequence_lens through netc's kernels on the interpreter (random lengths 1 to T)
    against the reference; a constant sequence_lens of T everywhere is none (the model without it), another
    constant is refused, located."""
    path = tmp_path / "padded.onnx"
    onnx.save(_padded_recurrence("LSTM", "bidirectional", 4, 3, 2, 5, None, 33), str(path))
    r = netc_interp("run", path, "--target", "interp", "--compare")
    assert r.returncode == 0 and "Y: max relative error" in r.stderr and "Y_h: max relative error" in r.stderr, \
        r.stderr + r.stdout
    onnx.save(_padded_recurrence("GRU", "reverse", 4, 3, 2, 5, [4, 4, 4], 34), str(path))
    m = inferred(path)
    ops = [op.name for n in m.networks() for op in n.regions[0].ops]
    assert "netc.seq_mask" not in ops and "netc.seq_pool" not in ops and "netc.gru" in ops
    onnx.save(_padded_recurrence("GRU", "reverse", 4, 3, 2, 5, [4, 2, 4], 34), str(path))
    r = netc_inprocess("check", path)
    assert r.returncode == 1 and f"{path}: error: node 'rnn' (GRU): a constant sequence_lens [4, 2, 4] other than " \
        "T = 4 for every sequence: feed it as a model input" in r.stderr, r.stderr


def test_a_gru_with_a_recurrent_bias_on_the_new_memory_is_refused(tmp_path):
    torch.manual_seed(8)
    path = exported(tmp_path, Recurrent("GRU").eval(), torch.randn(3, 2, 5), name="rnn.onnx", outputs=("y",))
    with pytest.raises(NetcError, match=r"linear_before_reset 1 with a recurrent bias of the new memory"):
        load(str(path), DiagnosticEngine())


def test_the_kernels_on_the_interpreter_agree(tmp_path):
    model, x = small(1)
    path = exported(tmp_path, model, x)
    r = netc_interp("run", path, "--target", "interp", "--compare")
    assert r.returncode == 0 and "prob: max relative error" in r.stderr, r.stderr


def test_netc_import_writes_the_nd_and_its_parameters(tmp_path):
    model, x = small(2)
    path = exported(tmp_path, model, x, fold=True)
    nd = tmp_path / "m.nd"
    r = netc_inprocess("import", path, "-o", nd)
    assert r.returncode == 0, r.stderr
    assert f"wrote {nd} and its" in r.stderr and (tmp_path / "m.npz").exists()
    assert "input x: f32[2, 16, 16, 3]" in nd.read_text()          # NCHW read as NHWC
    from netc.runtime.params import read_params
    d = DiagnosticEngine()
    m = load(str(nd), d)
    inference(m, Options(phase="test"), d)
    out = run_reference(m, {"x": x.permute(0, 2, 3, 1).double()}, read_params(str(tmp_path / "m.npz")))
    with torch.no_grad():
        assert rel(out["prob"], model(x).numpy()) < 1e-5


def test_unsupported_ops_are_listed_at_once(tmp_path):
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    g = helper.make_graph([helper.make_node("Erf", ["x"], ["a"], name="first"),
                           helper.make_node("Relu", ["a"], ["b"], name="ok"),
                           helper.make_node("Softsign", ["b"], ["y"], name="second")], "g", [x], [y])
    path = tmp_path / "bad.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    with pytest.raises(NetcError, match=r"2 nodes of op types netc does not read yet: 'first' \(Erf\), 'second' \(Softsign\)"):
        load(str(path), DiagnosticEngine())
    r = netc_inprocess("check", path)
    assert r.returncode == 1 and "Traceback" not in r.stderr and str(path) in r.stderr, r.stderr
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    r = netc_inprocess("check", tmp_path / "junk.onnx")
    assert r.returncode == 1 and "Traceback" not in r.stderr and "not an ONNX model" in r.stderr, r.stderr
    (tmp_path / "cut.onnx").write_bytes(path.read_bytes()[:40])          # a truncated model
    for f, why in ((tmp_path / "cut.onnx", "not an ONNX model"), (tmp_path / "none.onnx", "no such file")):
        r = netc_inprocess("run", f, "--reference")
        assert r.returncode == 1 and "Traceback" not in r.stderr and why in r.stderr, r.stderr


def test_netcs_own_export_imports_back(tmp_path):
    r = netc_inprocess("export", ROOT / "examples/cifar10_phases.nd", "--format", "onnx", "-o", tmp_path / "c.onnx",
                       "--seed", "4")
    assert r.returncode == 0, r.stderr
    d = DiagnosticEngine()
    orig = load(str(ROOT / "examples/cifar10_phases.nd"), d)
    inference(orig, Options(phase="test"), d)
    want = run_reference(orig, None, None, seed=4)
    # the exported model takes netc's NHWC input as it is, transposed once into NCHW: read back in netc's layout
    back = load(str(tmp_path / "c.onnx"), DiagnosticEngine())
    inference(back, Options(phase="test"), DiagnosticEngine())
    ops = [op.name for n in back.networks() for op in n.regions[0].ops]
    assert "netc.transpose" not in ops and ops.count("netc.conv2d") == 3
    got = run_reference(back, {"data": want_inputs(orig)}, None)
    assert rel(got["prob"], want["prob"]) < 1e-5


def want_inputs(module):
    from netc.runtime.reference import random_float_input
    (x,) = [op for n in module.networks() for op in n.regions[0].ops if op.name == "netc.input" and
            op.results[0].type.dtype == "f32"]
    return random_float_input("data", x.results[0].type.shape, 4)



# -- MobileNet-V2 and GoogLeNet (torchvision's architectures, defined here: torchvision's wheel needs CUDA torch) ----

def _divisible(v, d=8):
    """torchvision's _make_divisible: v rounded to a multiple of d, never below 90% of v."""
    n = max(d, int(v + d / 2) // d * d)
    return n + d if n < 0.9 * v else n


def conv_bn_relu6(cin, cout, k=3, stride=1, groups=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU6(inplace=True))


class InvertedResidual(nn.Module):
    """torchvision's MobileNet-V2 block: a 1x1 expansion (ReLU6), a depthwise 3x3 (ReLU6), a linear 1x1
    projection, the residual where the shape allows."""

    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = int(round(cin * expand))
        self.res = stride == 1 and cin == cout
        layers = [conv_bn_relu6(cin, hidden, 1)] if expand != 1 else []
        layers += [conv_bn_relu6(hidden, hidden, stride=stride, groups=hidden),
                   nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.res else self.conv(x)


class MobileNetV2(nn.Module):
    """torchvision's MobileNet-V2 (its inverted-residual settings, width multiplier, classifier), with the last
    1x1 convolution's width a parameter (torchvision: 1280) to keep the test small."""
    SETTINGS = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2], [6, 96, 3, 1], [6, 160, 3, 2], [6, 320, 1, 1]]

    def __init__(self, width=0.25, last=1280, classes=10):
        super().__init__()
        cin = _divisible(32 * width)
        layers = [conv_bn_relu6(3, cin, stride=2)]
        for t, c, n, s in self.SETTINGS:
            cout = _divisible(c * width)
            for i in range(n):
                layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        layers.append(conv_bn_relu6(cin, last, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))


class BasicConv(nn.Module):
    """torchvision GoogLeNet's BasicConv2d: a convolution without bias, batch norm (eps 0.001), ReLU."""

    def __init__(self, cin, cout, k, stride=1, padding=0):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride, padding, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=0.001)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class Inception(nn.Module):
    """torchvision's Inception block: 1x1; 1x1 -> 3x3; 1x1 -> 3x3 (torchvision's 3x3 where the paper has 5x5);
    a 3x3 stride-1 max pool (ceil_mode) -> 1x1; concatenated along the channels."""

    def __init__(self, cin, c1, c3r, c3, c5r, c5, pp):
        super().__init__()
        self.b1 = BasicConv(cin, c1, 1)
        self.b2 = nn.Sequential(BasicConv(cin, c3r, 1), BasicConv(c3r, c3, 3, padding=1))
        self.b3 = nn.Sequential(BasicConv(cin, c5r, 1), BasicConv(c5r, c5, 3, padding=1))
        self.b4 = nn.Sequential(nn.MaxPool2d(3, 1, 1, ceil_mode=True), BasicConv(cin, pp, 1))

    def forward(self, x):
        return torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], 1)


class GoogLeNetish(nn.Module):
    """torchvision's GoogLeNet stem and pools (7x7/2, 3x3/2 max pools with ceil_mode, 1x1, 3x3), two inception
    blocks, a 2x2/2 ceil_mode max pool between and a 2x2/2 ceil_mode average pool after them (at sizes where the
    rounding up adds a window that overhangs the input), global average pool, dropout, linear; small widths."""

    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = BasicConv(3, 8, 7, stride=2, padding=3)
        self.pool1 = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.conv2 = BasicConv(8, 8, 1)
        self.conv3 = BasicConv(8, 16, 3, padding=1)
        self.pool2 = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.a = Inception(16, 8, 8, 12, 4, 4, 4)
        self.pool3 = nn.MaxPool2d(2, 2, ceil_mode=True)
        self.b = Inception(28, 12, 8, 16, 4, 6, 6)
        self.pool4 = nn.AvgPool2d(2, 2, ceil_mode=True)
        self.fc = nn.Linear(40, classes)
        self.drop = nn.Dropout(0.2)

    def forward(self, x):
        x = self.pool2(self.conv3(self.conv2(self.pool1(self.conv1(x)))))
        x = self.pool4(self.b(self.pool3(self.a(x))))
        return self.fc(self.drop(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)))


def _with_statistics(model, seed):
    """model in eval mode, its batch norms given random running statistics and affines (not the identity)."""
    torch.manual_seed(seed)
    return randomize_batch_norms(model.eval())


def _matches_torch_on_both_targets(tmp_path, model, x, name):
    """The reference executor against torch (f32 tolerance), parameter counts equal, and the kernels on the
    interpreter against the reference (netc run --compare); returns the imported module's op names."""
    path = exported_unfolded(tmp_path, model, x, name)
    mod, out = reference(path, x)
    with torch.no_grad():
        assert rel(out["prob"], model(x).numpy()) < 1e-5
    from netc.explain import layer_rows
    assert sum(r["params"] for r in layer_rows(mod)) == sum(p.numel() for p in model.parameters())
    r = netc_interp("run", path, "--target", "interp", "--compare")
    assert r.returncode == 0 and "prob: max relative error" in r.stderr, r.stderr
    return [op for n in mod.networks() for op in n.regions[0].ops]


def test_mobilenet_v2_gives_torchs_outputs(tmp_path):
    """torchvision's MobileNet-V2 (width 0.25, its last convolution 64 wide, 32x32 inputs): 17 depthwise
    convolutions (8 to 240 channels, strides 1 and 2) become netc's DepthwiseConvolution, one op each, its 35
    ReLU6 (torch's Clip 0..6) netc's Clip, the residual adds Elementwise sums."""
    model = _with_statistics(MobileNetV2(0.25, 64), 11)
    ops = _matches_torch_on_both_targets(tmp_path, model, torch.randn(1, 3, 32, 32), "mobilenet_v2.onnx")
    depthwise = [op for op in ops if op.name == "netc.depthwise_conv2d"]
    assert len(depthwise) == 17 and not any(op.name == "netc.slice" for op in ops)
    assert {op.attrs["filter"][2] for op in depthwise} == {8, 48, 96, 144, 240}
    clips = [op for op in ops if op.name == "netc.clip"]
    assert len(clips) == 35 and all((op.attrs["min"], op.attrs["max"]) == (0.0, 6.0) for op in clips)


def test_a_googlenet_with_ceil_mode_pools_gives_torchs_outputs(tmp_path):
    """torchvision's GoogLeNet stem and inception blocks, small: its ceil_mode pools at sizes where rounding up
    adds a window overhanging the input (max and average, torch's count_include_pad among them) become
    pools padded [0, 0, 1, 1]; the inception blocks' padded stride-1 pools stay [1, 1]."""
    model = _with_statistics(GoogLeNetish(), 12)
    ops = _matches_torch_on_both_targets(tmp_path, model, torch.randn(2, 3, 40, 40), "googlenet.onnx")
    pads = [op.attrs["padding"] for op in ops if op.name in ("netc.maxpool", "netc.avgpool")]
    assert pads.count([0, 0, 1, 1]) == 4 and pads.count([1, 1]) == 2


class DepthwiseClips(nn.Module):
    """A depthwise convolution with a channel multiplier (groups = C_in, C_out = 2 C_in) and a bias, torch's
    hardtanh (Clip -1..1), a clamp with a lower bound only (Clip(min): ReLU when 0), and a 96-group depthwise."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 6, 3, stride=2, padding=1, groups=3)
        self.b = nn.Conv2d(6, 96, 1)
        self.c = nn.Conv2d(96, 96, (3, 2), padding=(1, 0), groups=96, bias=False)

    def forward(self, x):
        y = torch.clamp(self.b(nn.functional.hardtanh(self.a(x))), min=0.0)
        return torch.clamp(self.c(y), min=-0.25)


def test_a_depthwise_multiplier_and_clips(tmp_path):
    torch.manual_seed(13)
    model, x = DepthwiseClips().eval(), torch.randn(2, 3, 9, 8)
    path = exported(tmp_path, model, x, name="dw.onnx")
    mod, out = reference(path, x)
    with torch.no_grad():
        assert rel(np.asarray(out["prob"]).transpose(0, 3, 1, 2), model(x).numpy()) < 1e-6
    from netc.explain import layer_rows
    assert sum(r["params"] for r in layer_rows(mod)) == sum(p.numel() for p in model.parameters())
    ops = [op for n in mod.networks() for op in n.regions[0].ops]
    assert [op.attrs["filter"] for op in ops if op.name == "netc.depthwise_conv2d"] == [[3, 3, 3, 2], [3, 2, 96, 1]]
    assert [(op.attrs["min"], op.attrs["max"]) for op in ops if op.name == "netc.clip"] == [
        (-1.0, 1.0), (-0.25, float(np.finfo(np.float32).max))]
    assert sum(op.name == "netc.relu" for op in ops) == 1


def test_a_clip_with_computed_bounds_and_large_groups_are_refused(tmp_path):
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 5])
    lo = helper.make_tensor_value_info("lo", TensorProto.FLOAT, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 5, 5])
    g = helper.make_graph([helper.make_node("Clip", ["x", "lo"], ["y"], name="clip")], "g", [x, lo], [y])
    path = tmp_path / "clip.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    with pytest.raises(NetcError, match=r"input 'lo' is a bound of Clip 'clip': netc's Clip takes constant bounds"):
        load(str(path), DiagnosticEngine())
    torch.manual_seed(14)     # 66 groups of two channels each: neither depthwise nor few enough groups
    path = exported(tmp_path, nn.Conv2d(132, 132, 1, groups=66).eval(), torch.randn(1, 132, 3, 3), name="g.onnx")
    with pytest.raises(NetcError, match=r"group 66: netc writes a grouped convolution as one convolution per group"):
        load(str(path), DiagnosticEngine())


# -- a channel shuffle (ShuffleNet) ----------------------------------------------------------------------------------

def channel_shuffle(x, groups: int):
    """torchvision's ShuffleNetV2 channel_shuffle (torchvision/models/shufflenetv2.py), as it is written there."""
    batchsize, num_channels, height, width = x.size()
    channels_per_group = num_channels // groups
    x = x.view(batchsize, groups, channels_per_group, height, width)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(batchsize, -1, height, width)


class Shuffled(nn.Module):
    """A 1x1 convolution to 12 channels, a shuffle of 3 groups, a depthwise 3x3, a shuffle of 2 groups (the image is
    an output too: a wrong permutation shows there), a 1x1 convolution, a global pool and a linear layer."""

    def __init__(self):
        super().__init__()
        self.a, self.dw = nn.Conv2d(4, 12, 1), nn.Conv2d(12, 12, 3, padding=1, groups=12)
        self.b, self.fc = nn.Conv2d(12, 6, 1), nn.Linear(6, 5)

    def forward(self, x):
        y = channel_shuffle(self.dw(channel_shuffle(torch.relu(self.a(x)), 3)), 2)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(torch.relu(self.b(y)), 1), 1)), y


def test_a_channel_shuffle_is_a_channel_permute(tmp_path):
    """torchvision's channel_shuffle exported by torch.onnx (Reshape -> Transpose -> Reshape, the shapes computed by
    Shape -> Gather -> Concat subgraphs) imports as ChannelPermutes and gives torch's outputs on the reference and the
    interpreter's kernels; netc's export writes it as a Gather that onnxruntime runs to the reference's results and
    that imports back as the same ChannelPermutes; reshapes and transposes of images that are no channel permutation
    stay located refusals."""
    from onnx import TensorProto, helper
    ort = pytest.importorskip("onnxruntime")
    torch.manual_seed(15)
    model, x = Shuffled().eval(), torch.randn(2, 4, 6, 5)
    path = exported(tmp_path, model, x, name="shuffle.onnx", outputs=("prob", "feat"))
    mod, out = reference(path, x)
    with torch.no_grad():
        want, feat = model(x)
    assert rel(out["prob"], want.numpy()) < 1e-6
    assert rel(np.asarray(out["feat"]).transpose(0, 3, 1, 2), feat.numpy()) < 1e-6
    ops = [op for n in mod.networks() for op in n.regions[0].ops]
    assert [op.attrs["groups"] for op in ops if op.name == "netc.channel_permute"] == [3, 2]
    assert not any(op.name in ("netc.reshape", "netc.transpose") and len(op.results[0].type.shape) != 2 for op in ops)
    r = netc_interp("run", path, "--target", "interp", "--compare")
    assert r.returncode == 0 and "feat: max relative error" in r.stderr and "prob: max relative error" in r.stderr, \
        r.stderr
    # written back: the permutation as a Gather of the channel axis, onnxruntime against the reference
    from netc.export.onnx import export_onnx
    data = export_onnx(mod)
    assert sum(n.op_type == "Gather" for n in onnx.load_from_string(data).graph.node) == 2
    feed = np.ascontiguousarray(x.permute(0, 2, 3, 1).numpy())
    got = dict(zip(["prob", "feat"], ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(
        ["prob", "feat"], {"x": feed})))
    ref = run_reference(mod, {"x": torch.from_numpy(feed).double()}, None)
    assert rel(got["prob"], ref["prob"].numpy()) < 1e-5 and rel(got["feat"], ref["feat"].numpy()) < 1e-5
    # ... and read back: a Gather permuting the channels is a ChannelPermute again
    (tmp_path / "back.onnx").write_bytes(data)
    back = inferred(tmp_path / "back.onnx")
    assert [op.attrs["groups"] for n in back.networks() for op in n.regions[0].ops
            if op.name == "netc.channel_permute"] == [3, 2]
    again = run_reference(back, {"x": torch.from_numpy(feed).double()}, None)
    io = back.attrs["onnx_io"]["outputs"]           # (the model's outputs by their netc names)
    assert all(rel(again[io[k][0]], ref[k].numpy()) < 1e-6 for k in ("prob", "feat"))

    def triple(perm, back, name, split=(1, 2, 3, 4, 5)):
        s5 = helper.make_tensor("s5", TensorProto.INT64, [len(split)], list(split))
        c = int(np.prod(split[1:-2]))
        s4 = helper.make_tensor("s4", TensorProto.INT64, [4], back)
        g = helper.make_graph([helper.make_node("Reshape", ["x", "s5"], ["r"], name="split"),
                               helper.make_node("Transpose", ["r"], ["t"], name="swap", perm=perm),
                               helper.make_node("Reshape", ["t", "s4"], ["y"], name="merge")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 4, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, back)], [s5, s4])
        p = tmp_path / name
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(p))
        return p
    for shape, perm in (([1, 2, 3, 4, 5], [0, 2, 1, 3, 4]), ([1, 2, 2, 3, 4, 5], [0, 3, 2, 1, 4, 5])):
        # by hand, against numpy's: a shuffle of 2 groups (groups: 2), and 3 factors reversed (an order)
        c = int(np.prod(shape[1:-2]))
        xs = np.random.default_rng(15).standard_normal((1, c, 4, 5))
        m = inferred(triple(perm, [1, c, 4, 5], "ok.onnx", shape))
        got = run_reference(m, {"x": torch.from_numpy(xs.transpose(0, 2, 3, 1).copy())}, None)["y"]
        assert np.array_equal(np.asarray(got).transpose(0, 3, 1, 2), xs.reshape(shape).transpose(perm)
                              .reshape(1, c, 4, 5))
        (cp,) = [op for n in m.networks() for op in n.regions[0].ops if op.name == "netc.channel_permute"]
        assert set(cp.attrs) & {"groups", "order"} == {"groups" if len(shape) == 5 else "order"}
    for perm, back, name in (([0, 1, 2, 4, 3], [1, 6, 5, 4], "rows.onnx"), ([0, 3, 1, 2, 4], [1, 6, 4, 5], "mixed.onnx"),
                             ([0, 2, 1, 3, 4], [1, 3, 8, 5], "other.onnx")):
        with pytest.raises(NetcError, match=r"node 'split' \(Reshape\): a reshape of an NCHW image to \[1, 2, 3, 4, 5\]"
                                            ) as e:
            load(str(triple(perm, back, name)), DiagnosticEngine())
        assert e.value.diagnostics[0].loc.file.endswith(name)
    # a Gather of the channels that is no permutation (a channel twice) stays refused
    idx = helper.make_tensor("idx", TensorProto.INT64, [6], [0, 1, 1, 3, 4, 5])
    g = helper.make_graph([helper.make_node("Gather", ["x", "idx"], ["y"], name="pick", axis=1)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6, 4, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 4, 5])], [idx])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "pick.onnx"))
    with pytest.raises(NetcError, match=r"node 'pick' \(Gather\): a Gather of a computed value is read for one"):
        load(str(tmp_path / "pick.onnx"), DiagnosticEngine())


def test_netc_compile_builds_a_library_from_an_onnx_file_without_a_gpu(tmp_path, nvidia_toolchain):
    """`netc compile model.onnx -o model.so` on a machine without a GPU (Triton compiles the cubins on the CPU):
    the library's manifest holds the model's input and output, in netc's NHWC layout, and every parameter of the
    import."""
    nvidia_toolchain(90, cc=True)
    import math
    from cli_process import netc_process
    from netc.runtime.native import read_manifest
    model, x = small(2)
    path = exported(tmp_path, model, x, fold=True)
    r = netc_process("compile", path, "-o", tmp_path / "m.so")
    assert r.returncode == 0, r.stderr
    man = read_manifest(tmp_path / "m.so")
    assert [(i["name"], i["shape"]) for i in man["inputs"]] == [("x", [2, 16, 16, 3])]
    assert [o["name"] for o in man["outputs"]] == ["prob"]
    imported = {p.attrs["sym_name"]: math.prod(p.attrs["type"].shape) for p in inferred(path).params()}
    assert {p["name"]: math.prod(p["shape"]) for p in man["parameters"]} == imported
