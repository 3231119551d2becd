"""Helpers of the tests that run K workers (test_distributed.py, test_distributed_compiled.py)."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_netc(args, env: dict, timeout: float, cmd=None):
    """`python -m netc ARGS` (or `cmd`) in the repository with `env`; the result carries .seconds."""
    t0 = time.monotonic()
    r = subprocess.run(cmd or [sys.executable, "-m", "netc", *map(str, args)], capture_output=True, text=True,
                       cwd=ROOT, env=env, timeout=timeout)
    r.seconds = time.monotonic() - t0
    return r


def baseline(capsys, *args):
    """The single-process run (--workers 1) in this process: its stdout."""
    from netc.cli import main
    capsys.readouterr()
    rc = main([*map(str, args), "--workers", "1"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return out.out


def narrowed_paleo(path: Path, out: Path, div: int = 8) -> Path:
    """A copy of a Paleo network whose convolutions (its fully connected layers are convolutions too) have
    1/div of the input and output channels, and 1/div of the classes: the same layers, splits and shapes of
    communication at a fraction of the f64 work (AlexNet's fc6 alone is 38M parameters)."""
    def walk(layers):
        for layer in layers.values():
            f = layer.get("filter")
            if f:
                layer["filter"] = [f[0], f[1], f[2] if f[2] == 3 else f[2] // div, f[3] // div]
            if "num_classes" in layer:
                layer["num_classes"] //= div
            walk(layer.get("layers", {}))
    net = json.loads(path.read_text())
    walk(net["layers"])
    out.write_text(json.dumps(net))
    return out


def split_module(src, K, train=False, optimizer=None):
    """The split-workers module `netc run/compile FILE --workers K [--train]` makes (its ranks' networks carry
    attrs["rank"])."""
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load
    from netc.pipelines import Options, Training, workers
    diag = DiagnosticEngine()
    module = load(str(src), diag, 1)
    training = Training(optimizer={"name": optimizer} if optimizer else {}) if train else None
    workers(module, Options(phase="train" if train else "test", workers=K, training=training), diag)
    assert not diag.has_errors()
    return module


def same_npz(a, b, rtol) -> int:
    """Every array of .npz `a` equals `b`'s to rtol of its largest entry (in f64); returns how many there are."""
    import numpy as np
    a, b = np.load(a), np.load(b)
    assert sorted(a.files) == sorted(b.files)
    for k in a.files:
        x, y = a[k].astype(np.float64), b[k].astype(np.float64)
        assert x.shape == y.shape, k
        scale = max(float(np.abs(y).max()), 1e-30) if y.size else 1.0
        assert float(np.abs(x - y).max(initial=0.0)) <= rtol * scale, (k, float(np.abs(x - y).max()) / scale)
    return len(a.files)
