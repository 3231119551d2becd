"""torchvision's classic CNNs (issue 27): AlexNet, VGG-16, ResNet-50, SqueezeNet 1.0, GoogLeNet, DenseNet-121 and
MobileNet-V2, torchvision's own model code (weights=None, seeded, eval mode, each batch norm given random
running statistics and affine), exported with torch.onnx (batch norms kept: TrainingMode.PRESERVE) at about the
smallest input each accepts, imported by netc: its reference executor gives torch's outputs (f32 tolerance), its
parameter count is torch's, and the kernels on the interpreter give the reference's. Also the importer's reading
of what these exports need (DenseNet's one-input Concat, GoogLeNet's transform_input: one channel of the input
image, unsqueezed, scaled and shifted, concatenated).

AlexNet and VGG-16 take 224x224 (their adaptive pools' 6x6 and 7x7 export only where they divide the feature
map) and hold 61M and 138M parameters; they, and the kernels on the interpreter (9-25 s a model), run with
NETC_ONNX_ALL_MODELS=1 (docs/formats.md has the figures). Skipped, with how to install it, without torchvision
(tests/torchvision_models.py)."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch
import torch.nn as nn

onnx = pytest.importorskip("onnx")

from netc.diagnostics import DiagnosticEngine, NetcError  # noqa: E402
from netc.explain import layer_rows  # noqa: E402
from netc.frontend import load  # noqa: E402
from netc.runtime.reference import run_reference  # noqa: E402

from cli_inprocess import netc_interp  # noqa: E402
from onnx_models import exported_unfolded, inferred, randomize_batch_norms, rel  # noqa: E402
from torchvision_models import load_torchvision  # noqa: E402

ALL = bool(os.environ.get("NETC_ONNX_ALL_MODELS"))
# name -> (input size, batch, heavy: only with NETC_ONNX_ALL_MODELS=1)
MODELS = {"mobilenet_v2": (32, 2, False), "squeezenet1_0": (32, 2, False), "googlenet": (32, 2, False),
          "resnet50": (32, 1, False), "densenet121": (32, 1, False), "alexnet": (224, 1, True), "vgg16": (224, 1, True)}
INTERP = ("mobilenet_v2", "squeezenet1_0", "googlenet", "resnet50", "densenet121", "alexnet", "vgg16")


def torchvision():
    tv, why = load_torchvision()
    if tv is None:
        pytest.skip(why)
    return tv


def model_of(name, seed=0, **kw):
    """torchvision's model `name`, untrained, in eval mode, its batch norms' statistics and affines random."""
    tv = torchvision()
    torch.manual_seed(seed)
    if name == "googlenet":        # its auxiliary classifiers run only in training (their parameters unexported)
        kw = {"aux_logits": False, "init_weights": True, **kw}
    return randomize_batch_norms(getattr(tv.models, name)(weights=None, **kw).eval())


def check_against_torch(tmp_path, name, model, x):
    """The imported model's reference outputs against torch's (f32 tolerance); returns it and its path."""
    path = exported_unfolded(tmp_path, model, x, name)
    mod = inferred(path)
    out = run_reference(mod, {"x": x.permute(0, 2, 3, 1).double()}, None)["prob"]
    with torch.no_grad():
        want = model(x).numpy()
    assert np.abs(want).max() > 1e-3          # not a vanishing output that any result would be close to
    assert rel(out, want) < 1e-5, rel(out, want)
    return mod, path


def params(mod) -> int:
    return sum(r["params"] for r in layer_rows(mod))


@pytest.mark.parametrize("name", [n for n, (_, _, heavy) in MODELS.items() if ALL or not heavy])
def test_a_torchvision_model_gives_torchs_outputs(tmp_path, name):
    size, batch, _ = MODELS[name]
    model = model_of(name)
    torch.manual_seed(1)
    mod, _ = check_against_torch(tmp_path, name, model, torch.randn(batch, 3, size, size))
    assert params(mod) == sum(p.numel() for p in model.parameters())


@pytest.mark.skipif(not ALL, reason="9-25 s a model on the interpreter: NETC_ONNX_ALL_MODELS=1 runs it")
@pytest.mark.parametrize("name", INTERP)
def test_the_kernels_on_the_interpreter_give_the_references_outputs(tmp_path, name):
    size, _, _ = MODELS[name]
    model = model_of(name)
    torch.manual_seed(1)
    path = exported_unfolded(tmp_path, model, torch.randn(1, 3, size, size), name)
    r = netc_interp("run", path, "--target", "interp", "--compare", "--interp-blocks", "large")
    assert r.returncode == 0 and "prob: max relative error" in r.stderr, r.stderr


def test_googlenets_transform_input(tmp_path):
    """transform_input (the weights' ImageNet normalization redone for GoogLeNet's own): x[:, c] (a Gather on the
    channel axis, netc's Slice of the channels), unsqueezed back to [N, 1, H, W] (the same value in NHWC),
    x * a + b (two folded affines each), the three concatenated. The six affines' scale and shift are netc's
    parameters (one value each) where torch's are Python floats: 12 more than torch counts."""
    model = model_of("googlenet", 3, transform_input=True)
    torch.manual_seed(4)
    mod, _ = check_against_torch(tmp_path, "googlenet_t", model, torch.randn(2, 3, 32, 32))
    ops = [op for n in mod.networks() for op in n.regions[0].ops]
    slices = [op for op in ops if op.name == "netc.slice"]
    assert sorted(op.attrs["index"] for op in slices) == [0, 1, 2]
    assert params(mod) == sum(p.numel() for p in model.parameters()) + 12


class Channels(nn.Module):
    """One channel of the image kept 4-d (x[:, [1]]: a Gather of [1] on axis 1) and one taken without its axis
    (x[:, 2]: a Gather of the scalar 2) and unsqueezed, beside a convolution's channels."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return torch.cat([torch.relu(self.c(x)), x[:, [1]] * 2.0, torch.unsqueeze(x[:, 2], 1) - 0.5], 1)


def test_channels_of_an_image(tmp_path):
    torch.manual_seed(5)
    model, x = Channels().eval(), torch.randn(2, 3, 5, 6)
    path = exported_unfolded(tmp_path, model, x, "channels")
    assert [n.op_type for n in onnx.load(str(path)).graph.node].count("Gather") == 2
    out = run_reference(inferred(path), {"x": x.permute(0, 2, 3, 1).double()}, None)["prob"]
    with torch.no_grad():
        assert rel(np.asarray(out).transpose(0, 3, 1, 2), model(x).numpy()) < 1e-6


def test_a_concat_of_one_input_is_the_identity(tmp_path):
    """DenseNet's torch.cat of a one-tensor list (each block's first layer) exports as a Concat of one input."""
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4, 5])
    g = helper.make_graph([helper.make_node("Concat", ["x"], ["c"], axis=1, name="cat"),
                           helper.make_node("Relu", ["c"], ["y"], name="relu")], "g", [x], [y])
    path = tmp_path / "cat1.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    v = np.random.default_rng(7).standard_normal((2, 3, 4, 5))
    out = run_reference(inferred(path), {"x": torch.from_numpy(v.transpose(0, 2, 3, 1).copy())}, None)["y"]
    assert np.array_equal(np.asarray(out).transpose(0, 3, 1, 2), np.maximum(v, 0))


class ChannelMisread(nn.Module):
    def forward(self, x):
        return torch.relu(x[:, 0]).flatten(1)


def test_one_channel_read_without_its_axis_is_a_located_error(tmp_path):
    torch.manual_seed(6)
    path = exported_unfolded(tmp_path, ChannelMisread().eval(), torch.randn(1, 3, 4, 4), "misread")
    with pytest.raises(NetcError, match=r"one channel of an NCHW image taken without its axis: netc reads it only "
                                        r"unsqueezed back to \[N, 1, H, W\]"):
        load(str(path), DiagnosticEngine())
