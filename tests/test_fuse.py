"""The fuse pass: groups printed as `fusion_group` / `fusion_anchor` attributes (netc opt -p fuse)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

RES = """
network res {
  input data: f32[8, 16, 16, 32]
  conv1 = Convolution(data) { filter: [3, 3, 32, 32], padding: SAME }
  bn1 = BatchNorm(conv1)
  add1 = Elementwise(bn1, data) { operation: sum }
  relu1 = ReLU(add1)
  conv2 = Convolution(relu1) { filter: [1, 1, 32, 32], activation: relu }
  bn2 = BatchNorm(conv2)
  r2 = ReLU(bn2)
  s2 = Sigmoid(r2)
  pool = Pooling(s2) { ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1] }
  fc = InnerProduct(pool) { num_outputs: 10 }
  t = Tanh(fc)
  out = Softmax(t)
}
"""

SHARED = """
network shared {
  input data: f32[4, 8, 8, 16]
  conv1 = Convolution(data) { filter: [3, 3, 16, 16] }
  r1 = ReLU(conv1)
  r2 = Sigmoid(conv1)
  sum = Elementwise(r1, r2) { operation: sum }
  late = Convolution(data) { filter: [1, 1, 16, 16] }
  add = Elementwise(late, sum) { operation: sum }
}
"""


def groups(text: str, tmp_path) -> dict:
    f = tmp_path / "net.nd"
    f.write_text(text)
    r = subprocess.run([sys.executable, "-m", "netc", "opt", str(f), "-p", "fuse", "--no-locs"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    out = {}
    for line in r.stdout.splitlines():
        m = re.search(r'\{name = "([^"]+)".*fusion_anchor = "([^"]+)", fusion_group = "(g\d+)"', line)
        if m:
            out[m.group(1)] = (m.group(3), m.group(2))
    return out


def test_conv_epilogue_and_chains(tmp_path):
    g = groups(RES, tmp_path)
    # conv1 + bn + residual add (data is defined before conv1) + relu: one group anchored at conv1
    assert {g[n] for n in ("conv1", "bn1", "add1", "relu1")} == {(g["conv1"][0], "conv1")}
    # conv2 already applies relu: bn2 cannot follow the activation, so bn2 starts a pointwise chain
    assert g["conv2"][1] == "conv2" and g["bn2"][0] != g["conv2"][0]
    assert g["bn2"][0] == g["r2"][0] == g["s2"][0] and g["s2"][1] == "bn2"
    assert g["fc"][0] == g["t"][0] and g["t"][1] == "fc"
    # everything else is its own group
    assert len({g["pool"][0], g["out"][0], g["fc"][0], g["conv1"][0], g["bn2"][0], g["conv2"][0]}) == 6


def test_no_fusion_into_shared_results_or_late_operands(tmp_path):
    g = groups(SHARED, tmp_path)
    assert g["conv1"][0] not in (g["r1"][0], g["r2"][0])      # conv1 has two users
    assert g["r1"][0] != g["r2"][0]
    assert g["r1"][0] == g["sum"][0] and g["sum"][1] == "r1"   # a pointwise chain r1 -> sum (r2 is its operand)
    # `late` + `sum`: the residual operand `sum` is computed after the anchor `late`: not fused
    assert g["late"][0] != g["add"][0]


def test_alexnet_groups_and_roundtrip(tmp_path):
    r = subprocess.run([sys.executable, "-m", "netc", "opt", "examples/alexnet.nd", "-p", "fuse"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert 'name = "conv1", activation = "relu", filter' in r.stdout
    assert r.stdout.count("fusion_group") == 14
    from netc.ir.parser import parse_ir
    from netc.ir.printer import print_ir
    m = parse_ir(r.stdout, "alexnet.mlir")
    assert print_ir(m) == r.stdout


@pytest.mark.parametrize("example", ["inception_v3.nd", "vgg16.nd", "lenet.nd", "nin.nd"])
def test_examples_fuse(example):
    r = subprocess.run([sys.executable, "-m", "netc", "opt", f"examples/{example}", "-p", "fuse", "--no-locs"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "fusion_group" in r.stdout
