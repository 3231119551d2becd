"""bench/cpu.py runs (a benchmark, not a test of speed: no time is asserted) and writes what its results file
promises: per network and mode the three timings, the peak memory of each and the roofline beside the issue's goal."""
from __future__ import annotations

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_bench_cpu_writes_its_figures(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "bench"))
    monkeypatch.setenv("NETC_CACHE_DIR", str(tmp_path))
    sys.modules.pop("cpu", None)
    import cpu as bench_cpu          # bench/cpu.py
    out = tmp_path / "cpu.json"
    assert bench_cpu.main(["examples/digits.nd", "--iters", "2", "--warmup", "1", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["gemm_peak_gflops"] > 0 and doc["machine"]["torch"]
    (row,) = doc["results"]
    # the digits network's multiply-adds by hand (batch 32): conv1 8x8x16 from 3x3x1, conv2 4x4x32 from 3x3x16,
    # fc1 128 -> 64, fc2 64 -> 10; the cost model adds the bias, ReLU, pooling and softmax FLOPs on top
    gemm = 2 * 32 * (8 * 8 * 16 * 9 + 4 * 4 * 32 * 144 + 128 * 64 + 64 * 10)
    f = row["infer"]["roofline"]
    assert gemm <= f["flops"] <= 1.1 * gemm
    assert abs(f["floor_ms"] - f["flops"] / (doc["gemm_peak_gflops"] * 1e9) * 1e3) <= 0.01 * f["floor_ms"]
    assert f["goal"] == 0.7 and row["train"]["roofline"]["goal"] == 0.8
    assert f["goal_ms_fastest"] == round(0.7 * row["infer"]["eager"]["min_ms"], 4)
    assert f["goal_below_floor"] == (0.7 * row["infer"]["eager"]["min_ms"] < f["floor_ms"])
    # a training step: the forward's FLOPs and the gradients' (about twice as many again) and the update's
    assert 2.5 * gemm < row["train"]["roofline"]["flops"] < 3.5 * gemm
    for mode in ("train", "infer"):
        r = row[mode]
        assert r["netc_cpu"]["median_ms"] > 0 and r["eager"]["median_ms"] > 0
        assert set(r["peak_bytes"]) == {"netc_cpu", "eager"} and min(r["peak_bytes"].values()) > 0
        assert r["netc_cpu_over_eager"] == round(r["netc_cpu"]["median_ms"] / r["eager"]["median_ms"], 3)
    assert "GFLOP/s" in capsys.readouterr().out
