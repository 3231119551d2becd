"""Helpers of the tests that export torch models with torch.onnx and import them into netc
(test_import_onnx.py, test_onnx_torchvision.py)."""
from __future__ import annotations

import warnings

import numpy as np
import torch

from netc.diagnostics import DiagnosticEngine
from netc.frontend import load
from netc.pipelines import Options, inference


def randomize_batch_norms(model):
    """model's batch norms given random running statistics and affines (not the identity), from torch's
    current random state; returns model."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    return model


def exported_unfolded(tmp_path, model, x, name):
    """torch.onnx's export keeping each batch norm a BatchNormalization (TrainingMode.PRESERVE of a model in eval
    mode: the exporter's eval-mode pass would fold them into the convolutions, and the ONNX model would hold
    fewer parameters than torch's), into tmp_path/name (".onnx" added where missing)."""
    path = tmp_path / (name if name.endswith(".onnx") else f"{name}.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), str(path), dynamo=False, opset_version=17, input_names=["x"],
                          output_names=["prob"], training=torch.onnx.TrainingMode.PRESERVE)
    return path


def inferred(path):
    """The imported model through the inference pipeline, without errors."""
    d = DiagnosticEngine()
    m = load(str(path), d)
    inference(m, Options(phase="test"), d)
    assert not d.has_errors(), d.diagnostics
    return m


def rel(a, b) -> float:
    """max |a - b| over max |b|."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))
