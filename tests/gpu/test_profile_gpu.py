"""On a CUDA GPU: netc_profile's per-launch times (Net.profile) of AlexNet against a plain forward
timed with CUDA events, and `netc run NET.so --profile` end to end.

Marked `gpu`; skipped where torch has no CUDA (`pytest -m gpu` on the GPU machine)."""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.is_available())")]


def _arch() -> str:
    major, minor = torch.cuda.get_device_capability()
    if major in (8, 9):
        return f"sm_{major}0"
    pytest.skip(f"netc compiles for sm_80 and sm_90; this GPU is sm_{major}{minor}")


def netc(*args):
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    r = subprocess.run([sys.executable, "-m", "netc", *map(str, args)], capture_output=True, text=True, cwd=ROOT,
                       env=env)
    assert "Traceback" not in r.stderr, r.stderr
    return r


@pytest.fixture(scope="module")
def alexnet(tmp_path_factory):
    d = tmp_path_factory.mktemp("alexnet_prof")
    r = netc("compile", ROOT / "examples" / "alexnet.nd", "-o", d / "alexnet.so", "--arch", _arch())
    assert r.returncode == 0, r.stderr
    return d / "alexnet.so"


def test_launch_times_add_up_to_a_forward(alexnet):
    import netc.runtime
    with netc.runtime.load(alexnet, seed=0) as net:
        xs = net.random_inputs(0)
        rows = net.profile(xs, repeat=20, warmup=3)
        assert len(rows) == len(net.manifest["schedule"]) + 2
        launches = [r for r in rows if r["kind"] == "launch"]
        assert all(r["median_ms"] > 0 and r["min_ms"] > 0 for r in launches), \
            [(r["layers"], r["median_ms"]) for r in launches if r["median_ms"] <= 0]
        profiled = sum(r["median_ms"] for r in rows)
        # a plain forward, timed with CUDA events around it
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(3):
            net.run(xs)
        times = []
        for _ in range(20):
            start.record()
            net.run(xs)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        plain = statistics.median(times)
        assert abs(profiled - plain) <= 0.25 * plain, (profiled, plain)


def test_cli_run_profile_on_the_gpu(alexnet, tmp_path):
    out = tmp_path / "p.json"
    name = torch.cuda.get_device_name()
    known = any(k in name.upper() for k in ("H100", "H200", "A100"))
    device = () if known else ("--device", "h100")
    r = netc("run", alexnet, "--profile", "--repeat", "5", "--profile-out", out, *device)
    assert r.returncode == 0, r.stderr
    assert "efficiency per op type" in r.stdout
    doc = json.loads(out.read_text())
    assert doc["device_name"] == name and doc["factors"]["conv2d"] > 0
    assert all(row["median_ms"] > 0 for row in doc["rows"] if row["kind"] == "launch")
    # explain reads the factors back
    r = netc("explain", ROOT / "examples" / "alexnet.nd", "--brief", "--device", doc["costmodel_device"],
             "--profile", out)
    assert r.returncode == 0, r.stderr
    assert "calibrated with" in r.stdout and "conv2d" in r.stdout
