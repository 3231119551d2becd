"""The GPU-side tools that run without a GPU: bench/ptx_report.py (each kernel of a library compiled for sm_90,
its PTX read) and bench/memory_floor.py (the plans' lower bounds beside eager's measured peaks). Each writes what
its results file promises, and its figures are checked against what is known independently of it."""
from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LENET_PARAMS = 431_080           # examples/lenet.nd's header (Caffe's LeNet)


def test_ptx_report_reads_the_kernels_of_a_library(tmp_path):
    """LeNet in bf16: every matrix product uses wgmma; ip1 reads its [64, 800] input 16 bytes at a time (1600-byte
    rows) but its [800, 500] weight's 1000-byte rows only 8-byte aligned: 2-byte loads, which the report flags, as it
    flags the programs (8: split-K's 2 chunks of 4 tiles) that leave most SMs idle."""
    out = tmp_path / "ptx.json"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["NETC_CACHE_DIR"] = str(tmp_path / "cache")
    r = subprocess.run([sys.executable, "bench/ptx_report.py", "examples/lenet.nd", "--precision", "bf16",
                        "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["arch"] == 90 and doc["versions"]["triton"] and doc["machine"]["cpus"]
    (res,) = doc["results"]
    kernels = [(L["layers"][0], L["kernel"]) for L in res["launches"]]
    assert ("ip1", "gemm_kernel") in kernels and ("ip1", "gemm_split_reduce_kernel") in kernels, kernels
    ip1 = res["launches"][kernels.index(("ip1", "gemm_kernel"))]
    assert ip1["mma"] == ["wgmma.mma_async"] and ip1["cp_async"] == {"16": 6} and ip1["ld_global"].get("2"), ip1
    assert ip1["flags"] == ["scalar", "few-ctas"] and ip1["ctas"] == 8 and ip1["tiles"]["SPLIT"] == 2, ip1
    mm = [L for L in res["launches"] if L["kernel"] in ("conv2d_kernel", "gemm_kernel")]
    assert len(mm) == 4 and all(L["mma"] == ["wgmma.mma_async"] for L in mm)
    assert res["flagged"] == sum(1 for L in res["launches"] if L["flags"])
    assert "examples/lenet.nd bf16: 9 launches, 4 flagged" in r.stdout


def test_memory_floor_sets_the_plans_bounds_beside_eagers_peak(tmp_path, monkeypatch):
    """A results file as bench/gpu.py writes it (eager's peak measured on a GPU; invented here): the floor is the
    constant arena's lower bound (LeNet's parameters, aligned) plus the batch arena's times the batch, no more
    than the arena `netc explain --memory` plans, and the ratios are those bytes over eager's."""
    monkeypatch.syspath_prepend(os.path.join(ROOT, "bench"))
    sys.modules.pop("memory_floor", None)
    import memory_floor
    src = tmp_path / "gpu-fake.json"
    eager, netc = 40_000_000, 30_000_000
    src.write_text(json.dumps(dict(results=[dict(network="lenet", precision="f32", file="examples/lenet.nd",
                                                 batch=64, memory=dict(eager_bytes=eager, netc_bytes=netc)),
                                            dict(network="lenet", precision="f32", mode="train", file="x",
                                                 memory=dict(eager_bytes=1, netc_bytes=1))])))
    out = tmp_path / "floor.json"
    assert memory_floor.main([str(src), "--out", str(out)]) == 0
    (row,) = json.loads(out.read_text())["results"]               # the training row is not an inference one
    assert LENET_PARAMS * 4 <= row["params_bytes"] <= LENET_PARAMS * 4 * 1.01
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load
    from netc.memory.model import BATCH
    from netc.pipelines import Options, Plan, compile
    m = load(os.path.join(ROOT, "examples/lenet.nd"), DiagnosticEngine(), 1)
    plan = next(iter(compile(m, Options(phase="test"), plan=Plan(mode="inference")).notes["memory_plan"].values()))
    activations = plan.arenas[BATCH].lower_bound * 64
    assert row["floor_bytes"] == row["params_bytes"] + activations
    assert activations <= plan.arenas[BATCH].size * 64
    assert row["floor_over_eager"] == round(row["floor_bytes"] / eager, 3)
    assert row["netc_over_eager"] == round(netc / eager, 3) and row["goal_reachable"] == (row["floor_over_eager"] <= 0.6)
