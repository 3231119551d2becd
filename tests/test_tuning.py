"""Tuning files: `netc compile --tuning FILE` builds the kernels a file names with its tiles, warps
and stages, on a machine without a GPU, and leaves every other kernel alone; bad files are
located errors; --autotune needs a GPU. (The tuner itself: tests/kernels/test_tuner.py.)"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LENET = ROOT / "examples" / "lenet.nd"


def netc(*args, cache):
    env = dict(os.environ, NETC_CACHE_DIR=str(cache))
    env.pop("TRITON_INTERPRET", None)
    r = subprocess.run([sys.executable, "-m", "netc", *map(str, args)], capture_output=True, text=True, cwd=ROOT,
                       env=env)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def lenet_launches():
    """LeNet lowered as `netc compile` lowers it (meta placements, default tiles)."""
    from netc.codegen.lower import lower_network
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load
    from netc.pipelines import Options, Plan, compile
    diag = DiagnosticEngine()
    m = load(str(LENET), diag)
    ctx = compile(m, Options(phase="test"), diag, plan=Plan(mode="inference"))
    net = m.networks()[0]
    return lower_network(m, net, ctx.notes["memory_plan"][net.attrs["sym_name"]]).launches


def test_a_tuning_file_sets_exactly_its_kernels(tmp_path, nvidia_toolchain):
    nvidia_toolchain(90, cc=True)
    from netc.codegen.lower import tuning_key
    from netc.runtime.native import read_manifest
    launches = lenet_launches()
    convs = [L for L in launches if L.call.kernel.__name__ == "conv2d_kernel"]
    assert len(convs) == 2
    entries = []
    for L in convs:
        cfg = dict(block_m=32, block_n=32, block_k=16, group_m=4, num_warps=2, num_stages=2,
                   flat_k=bool(L.call.constexprs["FLAT_K"]))
        entries.append(dict(key=tuning_key(L.call), device="test", arch=90, config=cfg))
    # an entry for another arch is not used on sm_90
    gemm = next(L for L in launches if L.call.kernel.__name__ == "gemm_kernel")
    entries.append(dict(key=tuning_key(gemm.call), device="test", arch=80, config=dict(block_m=16, num_warps=1)))
    f = tmp_path / "lenet.tuning.json"
    f.write_text(json.dumps(dict(format="netc-tuning", version=1, entries=entries)))
    cache = tmp_path / "cache"
    r = netc("compile", LENET, "-o", tmp_path / "t.so", "--tuning", f, cache=cache)
    assert r.returncode == 0 and re.search(r"; [1-9] of \d+ kernels tuned", r.stderr), r.stderr
    r = netc("compile", LENET, "-o", tmp_path / "d.so", cache=cache)
    assert r.returncode == 0 and "tuned" not in r.stderr
    tuned, plain = read_manifest(tmp_path / "t.so"), read_manifest(tmp_path / "d.so")
    # launch by launch (equal configurations share a cubin, so compare through the schedule)
    assert len(tuned["schedule"]) == len(plain["schedule"])
    for st, sp in zip(tuned["schedule"], plain["schedule"]):
        t, p = tuned["kernels"][st["kernel"]], plain["kernels"][sp["kernel"]]
        assert st["layers"] == sp["layers"] and t["kernel"] == p["kernel"]
        if t["kernel"] == "conv2d_kernel":
            assert t["tuned"] and t["num_warps"] == 2 and t["constexprs"]["BLOCK_M"] == 32
            assert t["constexprs"]["BLOCK_K"] == 16 and t["constexprs"]["GROUP_M"] == 4
            assert (t["constexprs"]["BLOCK_M"], t["num_warps"]) != (p["constexprs"]["BLOCK_M"], p["num_warps"])
        else:
            assert not t["tuned"] and t["constexprs"] == p["constexprs"] and t["num_warps"] == p["num_warps"]
    # the lowering cache keys on the tuning: another configuration is another build
    entries[0]["config"]["num_warps"] = 8
    f.write_text(json.dumps(dict(format="netc-tuning", version=1, entries=entries)))
    r = netc("compile", LENET, "-o", tmp_path / "t8.so", "--tuning", f, cache=cache)
    assert r.returncode == 0, r.stderr
    warps = sorted(k["num_warps"] for k in read_manifest(tmp_path / "t8.so")["kernels"] if k["tuned"])
    assert warps == [2, 8]


@pytest.mark.parametrize("text,msg", [
    ('{"format": "netc-tuning",\n "version": 1, "entries": [}', "t.json:2:28: error: --tuning: not valid JSON"),
    ('{"entries": []}', "is not a netc tuning file"),
    ('{"format": "netc-tuning", "version": 7, "entries": []}', "tuning file version 7"),
    ('{"format": "netc-tuning", "version": 1, "entries": [{"key": "k", "arch": 90, "config": {"blockm": 64}}]}',
     "unknown configuration key 'blockm'"),
    ('{"format": "netc-tuning", "version": 1, "entries": [{"key": "k", "arch": 90, "config": {"block_m": 48}}]}',
     "'block_m' must be a power of two"),
    ('{"format": "netc-tuning", "version": 1, "entries": [{"key": "k", "arch": 90, "config": {"num_warps": 0}}]}',
     "'num_warps' must be an integer in [1, 32]"),
    ('{"format": "netc-tuning", "version": 1, "entries": [{"key": "k", "config": {}}]}', "needs an integer \"arch\""),
])
def test_bad_tuning_files(tmp_path, text, msg):
    f = tmp_path / "t.json"
    f.write_text(text)
    r = netc("compile", LENET, "-o", tmp_path / "x.so", "--tuning", f, cache=tmp_path / "c")
    assert r.returncode == 1 and msg in r.stderr, r.stderr


def test_autotune_and_interp_misuse(tmp_path):
    import torch
    if not torch.cuda.is_available():
        r = netc("compile", LENET, "-o", tmp_path / "x.so", "--autotune", cache=tmp_path / "c")
        assert r.returncode == 1 and "--autotune times kernels on a GPU" in r.stderr
    r = netc("compile", LENET, "-o", tmp_path / "x", "--target", "interp", "--tuning", tmp_path / "none.json",
             cache=tmp_path / "c")
    assert r.returncode == 1 and "--target cuda" in r.stderr
    r = netc("compile", LENET, "-o", tmp_path / "x.so", "--tuning", tmp_path / "none.json", cache=tmp_path / "c")
    assert r.returncode == 1 and "no such file" in r.stderr
