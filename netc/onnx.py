"""netc as an ONNX backend (`onnx.backend.base.Backend`), so that the ONNX project's own backend tests run
against it (tests/test_onnx_backend.py: the node test cases of the `onnx` package for the ops netc reads, the
model tests it ships).

    import netc.onnx as backend
    rep = backend.prepare(model)              # an onnx.ModelProto (or a path)
    outputs = rep.run([x])                    # numpy arrays in, numpy arrays out, in ONNX's layouts

prepare imports the model exactly as `netc import` / `netc run model.onnx` do (frontend/onnx.py: an op netc
does not read is a NetcError naming every such node) and runs the default inference pipeline; run executes it on
the reference executor (runtime/reference.py) in float64 and returns each output in the model's element type.
An NCHW image netc holds as NHWC is transposed on the way in and back on the way out, so a caller sees ONNX's
layouts. Only the CPU is a device here (the compiled targets are `netc compile model.onnx`).
"""
from __future__ import annotations

import os
import tempfile

import numpy as np

from .diagnostics import DiagnosticEngine, NetcError
from .frontend.onnx import need_onnx

onnx = need_onnx()

from onnx.backend.base import Backend, BackendRep  # noqa: E402  (after need_onnx: its message when missing)


class NetcRep(BackendRep):
    """A prepared model: its netc module, the ONNX inputs (in graph order, initializers left out) and outputs
    with their netc names and layouts."""

    def __init__(self, module, model, path: str, tmpdir=None):
        self.module, self.path, self._tmpdir = module, path, tmpdir
        io = module.attrs["onnx_io"]
        inits = {t.name for t in model.graph.initializer}
        self.inputs = [(vi.name, *io["inputs"][vi.name]) for vi in model.graph.input if vi.name not in inits]
        self.outputs = [(o.name, *io["outputs"][o.name], o.type.tensor_type.elem_type) for o in model.graph.output]

    def run(self, inputs, **kwargs):
        import torch

        from .runtime.reference import run_reference
        if isinstance(inputs, dict):
            inputs = [inputs[name] for name, _, _ in self.inputs]
        elif not isinstance(inputs, (list, tuple)):
            inputs = [inputs]
        if len(inputs) != len(self.inputs):
            raise NetcError(f"the model takes {len(self.inputs)} inputs ({', '.join(n for n, _, _ in self.inputs)}), "
                            f"got {len(inputs)}")
        feed = {}
        for (name, netc_name, layout), x in zip(self.inputs, inputs):
            x = np.asarray(x)
            if layout == "nchw":
                x = x.transpose(0, 2, 3, 1)
            elif layout == "drop_axis0":       # an initial state [1, B, H], netc's [B, H]
                x = x.reshape(x.shape[1:])
            feed[netc_name] = torch.from_numpy(np.ascontiguousarray(x))
        got = run_reference(self.module, feed, None)
        from onnx.helper import tensor_dtype_to_np_dtype
        outs = []
        for _, netc_name, layout, elem in self.outputs:
            y = got[netc_name].detach().cpu().numpy()
            if layout == "nchw":
                y = y.transpose(0, 3, 1, 2)
            outs.append(np.ascontiguousarray(y.astype(tensor_dtype_to_np_dtype(elem) if elem else y.dtype)))
        return tuple(outs)

    def __del__(self):
        if self._tmpdir is not None:
            self._tmpdir.cleanup()


class NetcBackend(Backend):
    @classmethod
    def is_compatible(cls, model, device: str = "CPU", **kwargs) -> bool:
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs) -> NetcRep:
        from .frontend.onnx import import_onnx
        from .pipelines import Options, inference
        if not cls.supports_device(device):
            raise NetcError(f"netc's ONNX backend runs on the CPU (its reference executor), not '{device}'")
        tmp = None
        if isinstance(model, (str, os.PathLike)):
            path = os.fspath(model)
            model = onnx.load(path)
        else:
            tmp = tempfile.TemporaryDirectory(prefix="netc-onnx-")
            path = os.path.join(tmp.name, (model.graph.name or "model") .replace(os.sep, "_") + ".onnx")
            onnx.save(model, path)
        diag = DiagnosticEngine()
        module = import_onnx(path, diag)
        inference(module, Options(phase="test"), diag)
        if diag.has_errors():
            raise NetcError(diag.diagnostics[:])
        return NetcRep(module, model, path, tmp)

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return str(device).upper() == "CPU"


prepare = NetcBackend.prepare
run_model = NetcBackend.run_model
supports_device = NetcBackend.supports_device
is_compatible = NetcBackend.is_compatible
