"""Every SINGA v0.1-v0.3 updater type in a job.conf (issue 24): each passes `netc check`, trains 2
steps on the reference executor from the command line, and records the optimizer SINGA's
updater.cc computes (the formulas themselves are checked in tests/test_optimizer.py against a
transcription of updater.cc and against torch.optim); bad updater confs give located errors."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from netc.cli import main
from netc.diagnostics import DiagnosticEngine, NetcError, render
from netc.frontend import load_text

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT.parent / "shared" / "corpus" / "singa" / "0.3.0_mnist_job.conf"
needs_corpus = pytest.mark.skipif(not JOB.is_file(), reason="the shared corpus is not beside the repository")

UPDATERS = {
    "kSGD": ("momentum: 0.9", {"name": "momentum", "momentum": 0.9}),
    "kNesterov": ("momentum: 0.8", {"name": "nesterov", "momentum": 0.8}),
    "kAdaGrad": ("delta: 1e-6", {"name": "adagrad", "eps": 1e-6}),
    "kRMSProp": ("rmsprop_conf { rho: 0.9 }", {"name": "rmsprop", "alpha": 0.9, "eps": 1e-8}),
    "kAdaDelta": ("adadelta_conf { rho: 0.95 } delta: 1e-6", {"name": "adadelta", "rho": 0.95, "eps": 1e-6}),
    "kAdam": ("adam_conf { beta1: 0.8 beta2: 0.99 }", {"name": "adam", "beta1": 0.8, "beta2": 0.99, "eps": 1e-8}),
    "kAdamMax": ("adammax_conf { beta1: 0.8 beta2: 0.99 }",
                 {"name": "adamax", "beta1": 0.8, "beta2": 0.99, "eps": 1e-8}),
}


def job(updater: str, extra: str = "", batch: int = 8) -> str:
    """The v0.3 MLP job with `updater` (its type line replaced; extra fields after it), batch 8."""
    text = JOB.read_text().replace("type: kSGD", f"type: {updater}\n  {extra}", 1)
    return re.sub(r"batchsize: \d+", f"batchsize: {batch}", text)


def _close(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))


@needs_corpus
@pytest.mark.parametrize("updater", list(UPDATERS))
def test_every_updater_imports_checks_and_trains(updater, tmp_path, capsys):
    extra, want = UPDATERS[updater]
    text = job(updater, extra)
    m = load_text(text, "job.conf", DiagnosticEngine())
    opt = m.attrs["optimizer"]
    assert opt["convention"] == "singa"
    assert all(_close(opt[k], v) if isinstance(v, float) else opt[k] == v for k, v in want.items()), opt
    assert opt["schedule"] == {"type": "step", "base_lr": 0.001, "gamma": 0.997, "change_freq": 60}
    path = tmp_path / "job.conf"
    path.write_text(text)
    assert main(["check", str(path)]) == 0
    capsys.readouterr()
    assert main(["run", str(path), "--train", "--reference", "--steps", "2", "-o", str(tmp_path / "w.npz")]) == 0
    out = capsys.readouterr().out
    losses = [float(x) for x in re.findall(r"loss (\d+\.\d+)\n", out)]
    assert len(losses) == 2, out
    import numpy as np
    saved = np.load(tmp_path / "w.npz")
    state = {"adadelta": ("acc_delta", "square_avg"), "adamax": ("adamax_m", "adamax_u", "adamax_step"),
             "adam": ("adam_m", "adam_v"), "rmsprop": ("square_avg",), "adagrad": ("sum_sq",),
             "momentum": ("velocity",), "nesterov": ("velocity",)}[want["name"]]
    for role in state:      # the optimizer's state is written beside the parameters, and it moved
        arr = saved[f"0#w1.{role}"]
        assert np.abs(arr).max() > 0, role


@needs_corpus
@pytest.mark.parametrize("updater", ["kAdaDelta", "kAdamMax", "kAdam"])
def test_updaters_that_do_not_clip_say_so(updater):
    diag = DiagnosticEngine()
    m = load_text(job(updater, UPDATERS[updater][0] + " clip_low: -1 clip_high: 1"), "job.conf", diag)
    assert "clip_low" not in m.attrs["optimizer"]
    out = diag.render()
    assert re.search(rf"job\.conf:\d+:\d+: warning: SINGA's {updater} does not clip gradients", out), out


def _error(text: str) -> str:
    from netc import pipelines
    from netc.pipelines import Options, Training
    diag = DiagnosticEngine()
    with pytest.raises(NetcError) as e:
        m = load_text(text, "bad.conf", diag)
        pipelines.training(m, Options(training=Training()), diag)
        if diag.has_errors():
            raise NetcError(diag.diagnostics)
    return "".join(render(d) for d in e.value.diagnostics if d.severity == "error")   # not the job's warnings


@needs_corpus
@pytest.mark.parametrize("updater,extra,msg,at", [
    ("kAdaDelta", "adadelta_conf { rho: 1.5 }", r"option 'rho' of optimizer 'adadelta' must be in \[0, 1\)", "rho"),
    ("kAdamMax", "adammax_conf { beta1: 1.0 beta2: 0.9 }", r"option 'beta1' of optimizer 'adamax' must be in \[0, 1\)",
     "beta1"),
    ("kAdamMax", "adammax_conf { beta1: 0.9 }", r"missing required field 'beta2' in 'adammax_conf'", "adammax_conf"),
    ("kAdamMax", "delta: 0", r"option 'eps' of optimizer 'adamax' must be positive", "delta"),
    ("kAdaDelta", "delta: -1", r"option 'eps' of optimizer 'adadelta' must not be negative", "delta"),
    ("kRMSProp", "rmsprop_conf { rho: -0.5 }", r"option 'alpha' of optimizer 'rmsprop' must not be negative", "rho"),
    ("kAdamMax", "adammax_conf { gamma: 1 }", r"gamma", "gamma"),
    ("kAdaDelta", "adadelta_conf { rho: \"x\" }", r"rho", "\"x\""),
])
def test_bad_updater_confs_are_located(updater, extra, msg, at):
    """At the field: file:line:col, the source line, the caret under the field."""
    out = _error(job(updater, extra))
    m = re.search(r"bad\.conf:(\d+):(\d+): error: .*" + msg, out)
    assert m, out
    src, caret = out.splitlines()[1:3]
    col = caret.index("^")
    assert src[col:].startswith(at), out


@needs_corpus
def test_v01_krmsprop_says_singa_v01_cannot_run_it():
    text = (JOB.parent / "0.1.0_mnist_job.conf").read_text()
    text = re.sub(r"type: *kSGD", "type: kRMSProp rmsprop_conf { rho: 0.9 }", text, count=1)
    diag = DiagnosticEngine()
    m = load_text(text, "v01.conf", diag)
    assert m.attrs["optimizer"]["name"] == "rmsprop"
    assert re.search(r"v01\.conf:\d+:\d+: warning: SINGA v0\.1\.0 registers no kRMSProp updater", diag.render())


def test_singas_adadelta_is_torchs():
    """kAdaDelta's formula is torch.optim.Adadelta's: five steps of the imported optimizer (SINGA's
    convention) equal torch.optim fed the same gradients, to 1e-12 (tests/test_optimizer.py's harness)."""
    import torch
    import test_optimizer as T
    opts = {"name": "adadelta", "rho": 0.95, "eps": 1e-6, "weight_decay": 0.01, "convention": "singa"}
    init, grads, tr = T.train(T.program(opts))
    want, _ = T.torch_run(init, grads, lambda g: torch.optim.Adadelta(g, lr=0.1, rho=0.95, eps=1e-6,
                                                                       weight_decay=0.01))
    for n, w in want.items():
        T._close(tr.params[n], w, f"adadelta (singa): {n}")


@needs_corpus
def test_new_updaters_compile_to_a_training_library(tmp_path):
    """kAdaDelta and kAdamMax lower to the multi-tensor update kernel: `netc compile --target cuda
    --train` builds the library (cubins, no GPU needed)."""
    from cli_process import netc_process
    pytest.importorskip("triton.backends.nvidia.compiler")
    # in a process of its own: this xdist worker may have imported the kernels for the interpreter (a test
    # module setting TRITON_INTERPRET=1 at collection), and the interpreter's kernels do not compile
    for updater in ("kAdaDelta", "kAdamMax"):
        conf = tmp_path / f"{updater}.conf"
        conf.write_text(job(updater, UPDATERS[updater][0], batch=4))
        r = netc_process("compile", conf, "--target", "cuda", "--train", "-o", tmp_path / f"{updater}.so")
        assert r.returncode == 0, r.stderr


@needs_corpus
@pytest.mark.parametrize("updater", list(UPDATERS))
def test_every_updater_exports_back(updater, tmp_path, capsys):
    """netc export --format singa writes the updater back; the written job reads as the same optimizer."""
    src, out = tmp_path / "in.conf", tmp_path / "out.conf"
    src.write_text(job(updater, UPDATERS[updater][0]))
    assert main(["export", str(src), "--format", "singa", "-o", str(out)]) == 0
    assert f"type: {updater}" in out.read_text()
    a = load_text(src.read_text(), "in.conf", DiagnosticEngine()).attrs["optimizer"]
    b = load_text(out.read_text(), "out.conf", DiagnosticEngine()).attrs["optimizer"]
    assert a == b
