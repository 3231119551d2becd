"""One CLI convention: every command that writes a file takes -o/--output; `explain --dot` draws
fusion groups as clusters (and an SVG where Graphviz is installed)."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from netc.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
LENET = str(ROOT / "examples" / "lenet.nd")
RES = """network res {
  input data: f32[4, 8, 8, 16]
  c1 = Convolution(data) { filter: [3, 3, 16, 16], padding: SAME }
  b1 = BatchNorm(c1)
  r1 = ReLU(b1)
  c2 = Convolution(r1) { filter: [3, 3, 16, 16], padding: SAME }
  b2 = BatchNorm(c2)
  s = Elementwise(b2, data) { operation: sum }
  r2 = ReLU(s)
  p = Pooling(r2) { ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1] }
}
"""


def test_every_writing_command_takes_dash_o():
    sub = next(a for a in build_parser()._actions if a.dest == "cmd")
    for cmd in ("opt", "explain", "import", "export", "run", "compile"):
        flags = {s for a in sub.choices[cmd]._actions for s in a.option_strings}
        assert {"-o", "--output"} <= flags, cmd


def test_opt_and_explain_write_to_dash_o(tmp_path, capsys):
    ir, js = tmp_path / "l.mlir", tmp_path / "l.json"
    assert main(["opt", LENET, "-p", "shape-inference", "-o", str(ir)]) == 0
    assert main(["explain", LENET, "--brief", "--format", "json", "--output", str(js)]) == 0
    assert capsys.readouterr().out == ""                       # nothing on stdout: it went to the files
    assert ir.read_text().startswith('"builtin.module"()')
    assert main(["opt", str(ir), "-o", str(tmp_path / "again.mlir")]) == 0   # the IR text reads back
    assert json.loads(js.read_text())["name"] == "lenet"
    assert main(["explain", LENET, "-o", str(tmp_path / "no" / "dir" / "x.txt")]) == 1
    assert "cannot write" in capsys.readouterr().err


def test_run_dash_o_writes_npz(tmp_path, capsys):
    out = tmp_path / "o.npz"
    assert main(["run", LENET, "--reference", "-o", str(out)]) == 0
    with np.load(out) as z:
        assert set(z.files) == {"prob", "loss"}


def test_dot_draws_fusion_groups_as_clusters(tmp_path, capsys):
    src = tmp_path / "res.nd"
    src.write_text(RES)
    assert main(["explain", str(src), "--dot"]) == 0
    dot = capsys.readouterr().out
    clusters = re.findall(r'subgraph "cluster_res_(g\d+)" \{ label="fused \1: ([^"]*)"', dot)
    assert [c[1] for c in clusters] == ["Convolution+BatchNorm+ReLU (one kernel)",
                                        "Convolution+BatchNorm+Elementwise+ReLU (one kernel)"]
    # the members sit inside their cluster; the pooling (a group of one) outside any
    body = dot.split('subgraph "cluster_res_g1"')[1].split("}")[0]
    assert '"c1"' in body and '"b1"' in body and '"r1"' in body and '"c2"' not in body
    assert dot.count('"p" [label=') == 1 and '"data" -> "s";' in dot


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` is not installed")
def test_dot_svg_with_graphviz(tmp_path, capsys):
    src = tmp_path / "res.nd"
    src.write_text(RES)
    assert main(["explain", str(src), "--dot", str(tmp_path / "g.dot")]) == 0
    svg = (tmp_path / "g.svg").read_text()
    assert "<svg" in svg and "fused g2" in svg
