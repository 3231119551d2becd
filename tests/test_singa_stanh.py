"""SINGA's scaled tanh (kSTanh, activation STANH: mshadow's stanh, 1.7159047 tanh(0.66666667 x)) runs as
SINGA computes it (netc.stanh), no longer as plain tanh with a warning: values against the formula, the
gradient against torch.autograd, the kernels (the activation code every fused epilogue and gradient shares)
under the interpreter against the reference, a SINGA job with kSTanh layers imported so, and
the export back to kSTanh (v0.1) / STANH (v0.2+), while plain tanh is refused for v0.1 (it has none)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from netc.diagnostics import DiagnosticEngine
from netc.frontend import load
from netc.ops import lookup
from netc.pipelines import Options, inference

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "singa"


def test_values_and_gradient():
    d = lookup("netc.stanh")
    x = torch.linspace(-3, 3, 41, dtype=torch.float64, requires_grad=True)
    y = d.reference({}, [x], {})
    want = 1.7159047 * torch.tanh(0.66666667 * x)
    torch.testing.assert_close(y, want)
    dy = torch.randn(41, dtype=torch.float64)
    (gx,) = torch.autograd.grad(want, x, dy)
    got = lookup("netc.activation_grad").reference({"activation": "stanh", "negative_slope": 0.0}, [y.detach(), dy], {})
    torch.testing.assert_close(got, gx)


def _stanh_job():
    for p in sorted(CORPUS.glob("*.conf")):
        text = p.read_text()
        if "kSTanh" in text or "STANH" in text:
            return p
    pytest.skip("no corpus job with a scaled tanh")


def test_a_singa_job_imports_its_scaled_tanh():
    path = _stanh_job()
    d = DiagnosticEngine()
    m = load(str(path), d)
    inference(m, Options(phase="test"), d)
    ops = [op.name for n in m.networks() for op in n.regions[0].ops]
    assert "netc.stanh" in ops and "netc.tanh" not in ops
    assert not any("STANH" in x.message for x in d.diagnostics)      # no more "runs as tanh" warning


def test_export_writes_singas_layer():
    from netc.export.singa import export_singa  # noqa: F401  (the exporter's module: the rule is the op's)
    d = lookup("netc.stanh")
    assert d.singa_layer({"name": "s"}, [[2, 3]], True, 1, True)[0] == "kSTanh"
    assert d.singa_layer({"name": "s"}, [[2, 3]], False, 1, True)[1] == ["activation_conf { type: STANH }"]
    from netc.ops.singa import SingaInexpressible
    with pytest.raises(SingaInexpressible, match="no plain tanh"):
        lookup("netc.tanh").singa_layer({"name": "t"}, [[2, 3]], True, 1, True)


def test_the_kernels_compute_it(tmp_path):
    """A forward and two training steps of a net with a scaled tanh on the interpreter target against the
    reference (--compare): the elementwise kernel's activation code 5 and its derivative."""
    from cli_process import netc_process
    f = tmp_path / "s.nd"
    f.write_text("network s {\n  input x: f32[4, 7]\n  input label: i32[4]\n  h = InnerProduct(x) { num_outputs: 9 }\n"
                 "  t = STanh(h)\n  y = InnerProduct(t) { num_outputs: 3 }\n  loss = SoftmaxLoss(y, label)\n}\n")
    r = netc_process("run", f, "--target", "interp", "--train", "--compare", "--steps", "2", interp=True)
    assert r.returncode == 0 and "on the interpreter target: ok" in r.stdout + r.stderr, r.stdout + r.stderr


def test_its_gradient_runs_unfused_on_the_interpreter(tmp_path):
    """A scaled tanh straight into the loss: its gradient (netc.activation_grad 'stanh') has no producer's
    epilogue to fuse into, so it runs as the elementwise kernel's one-op chain (kernels/elementwise.py
    activation_grad; its code 5 had no chain op there: an internal KeyError 5, found by bench/randnet.py's
    train check). Two training steps on the interpreter target against the reference."""
    from cli_process import netc_process
    f = tmp_path / "s.nd"
    f.write_text("network s {\n  input x: f32[4, 7]\n  input target: f32[4, 9]\n  h = InnerProduct(x) { num_outputs: 9 }\n"
                 "  t = STanh(h)\n  loss = EuclideanLoss(t, target)\n}\n")
    r = netc_process("run", f, "--target", "interp", "--train", "--compare", "--steps", "2", interp=True)
    assert r.returncode == 0 and "on the interpreter target: ok" in r.stdout + r.stderr, r.stdout + r.stderr
    assert "internal error" not in r.stdout + r.stderr
