"""`netc explain --memory/--layout/--plot`, `netc check` on layouts, and layout sections in .nd."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from netc.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.nd"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_memory_plan_of_every_example_is_near_the_lower_bound(path, capsys):
    assert main(["explain", str(path), "--format", "json", "--memory"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for net in doc.get("networks", [doc]):
        m = net["memory"]
        assert {"arena_bytes", "lower_bound_bytes", "no_reuse_bytes", "buffers"} <= set(m)
        assert m["lower_bound_bytes"] <= m["arena_bytes"] <= 1.05 * m["lower_bound_bytes"]
        assert m["arena_bytes"] <= m["no_reuse_bytes"]
        assert all({"class", "offset", "bytes", "lifetime", "tensors"} <= set(b) for b in m["buffers"])


def test_memory_table(capsys):
    assert main(["explain", str(ROOT / "examples" / "lenet.nd"), "--brief", "--memory"]) == 0
    out = capsys.readouterr().out
    assert "memory plan for network lenet" in out and "batch arena:" in out and "lower bound" in out


def test_layout_round_trip_and_plot(tmp_path, capsys):
    lay, svg = tmp_path / "plan.json", tmp_path / "plan.svg"
    assert main(["explain", str(ROOT / "examples" / "inception_v3.nd"), "--brief", "--layout", str(lay),
                 "--plot", str(svg)]) == 0
    doc = json.loads(lay.read_text())
    assert len(doc["sizes"]) == 3 and doc["netc"]["reuse"] is True
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    capsys.readouterr()
    assert main(["explain", str(ROOT / "examples" / "inception_v3.nd"), "--format", "json", "--memory"]) == 0
    arena = json.loads(capsys.readouterr().out)["memory"]["arena_bytes"]
    assert f"{arena:,} bytes" in text        # the picture's title states the JSON's arena, to the byte
    capsys.readouterr()
    assert main(["check", str(lay)]) == 0
    assert "a valid layout" in capsys.readouterr().out
    # break one slice: the reader names the JSON path and the line
    node = next(iter(doc["layout"]["layout"].values()))["layout"]["outputs"]["layout"]
    arr = next(iter(node.values()))
    arr["slice"][2] = arr["slice"][2] + 10**9
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc, indent=1))
    assert main(["check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "out of range" in err and "$.layout.layout." in err and "bad.json:" in err and "^" in err


def test_layout_section_in_nd_is_checked(tmp_path, capsys):
    src = (ROOT / "examples" / "brainstorm_fixture.nd").read_text()
    assert "slice: [2, 2, 5]" in src
    bad = tmp_path / "bf.nd"
    bad.write_text(src.replace("slice: [2, 2, 5]", "slice: [2, 2, 99]"))
    assert main(["check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "out of range for buffer type 2" in err and "bf.nd:" in err


def test_no_reuse_plan_equals_naive(capsys):
    assert main(["explain", str(ROOT / "examples" / "alexnet.nd"), "--format", "json", "--memory",
                 "--no-reuse"]) == 0
    m = json.loads(capsys.readouterr().out)["memory"]
    assert m["arena_bytes"] == m["no_reuse_bytes"]


def test_verify_flag_checks_every_batch(capsys):
    assert main(["explain", str(ROOT / "examples" / "lenet.nd"), "--brief", "--verify"]) == 0
    assert "verified for every batch 1..64" in capsys.readouterr().err


SHARED = ROOT.parent / "shared" / "corpus"
CORPUS = (sorted((SHARED / "paleo").glob("*.json")) + sorted((SHARED / "paleo-generated").glob("*.json"))
          + sorted((SHARED / "singa").glob("*.conf")))


@pytest.mark.skipif(not CORPUS, reason="the shared corpus is not beside the repository")
def test_every_importable_corpus_net_plans_within_5_percent_of_the_bound():
    """Issue: arena <= 1.05 x lower bound for every Paleo net and every SINGA config netc can
    import (inference, batch as written), and the verifier passes on all of them."""
    from netc.diagnostics import DiagnosticEngine, NetcError
    from netc.frontend import load
    from netc.memory.plan import plan_memory
    from netc.memory.verify import verify_plan
    from netc.pipelines import Options, inference
    planned = 0
    for path in CORPUS:
        diag = DiagnosticEngine()
        try:
            m = load(str(path), diag)
            inference(m, Options(), diag)
        except NetcError:
            assert path.suffix == ".conf", f"{path.name} should import"  # SINGA rejects some configs
            continue
        for net in m.networks():
            plan = plan_memory(m, net)
            assert not verify_plan(plan, m, net), path.name
            for a in plan.arenas:
                assert a.size <= 1.05 * a.lower_bound + 256, (path.name, a)
            planned += 1
    assert planned >= 45  # 11 Paleo nets + the SINGA configs SINGA itself accepts


@pytest.mark.skipif(not CORPUS, reason="the shared corpus is not beside the repository")
def test_brainstorms_own_march_2015_layouts_check(capsys):
    assert main(["check", str(SHARED / "brainstorm" / "old_format_e0f35f3.layouts.json")]) == 0
    out = capsys.readouterr().out
    assert "conftest_fixture): a valid layout: sizes [230, 0, 54]" in out
    assert "two_named_inputs_mlp): a valid layout: sizes [85, 0, 64]" in out


def test_plot_png_pdf_and_bad_names(tmp_path, capsys):
    png, pdf = tmp_path / "plan.png", tmp_path / "plan.pdf"
    assert main(["explain", str(ROOT / "examples" / "alexnet.nd"), "--brief", "--plot", str(png)]) == 0
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and b"IDAT" in data and data.endswith(b"IEND\xaeB`\x82")
    width, height = struct.unpack(">II", data[16:24])
    assert width > 800 and height > 500
    assert main(["explain", str(ROOT / "examples" / "alexnet.nd"), "--brief", "--plot", str(pdf)]) == 0
    assert pdf.read_bytes().startswith(b"%PDF")
    capsys.readouterr()
    assert main(["explain", str(ROOT / "examples" / "alexnet.nd"), "--brief", "--plot", str(tmp_path / "x.gif")]) == 1
    assert "--plot writes PNG, SVG or PDF" in capsys.readouterr().err
    assert main(["explain", str(ROOT / "examples" / "alexnet.nd"), "--brief", "--plot",
                 str(tmp_path / "no" / "such" / "dir.png")]) == 1
    assert "cannot write" in capsys.readouterr().err


def test_plot_without_matplotlib(tmp_path, capsys, monkeypatch):
    """matplotlib is the optional `plot` extra: without it, --plot says how to install it (exit 1)."""
    import sys
    for m in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, m)
    monkeypatch.setitem(sys.modules, "matplotlib", None)     # `import matplotlib...` raises ImportError
    assert main(["explain", str(ROOT / "examples" / "lenet.nd"), "--brief", "--plot", str(tmp_path / "p.png")]) == 1
    assert "pip install 'netc[plot]'" in capsys.readouterr().err


RESIDUAL = """network res {
  input data: f32[4, 8, 8, 16]
  x0 = Convolution(data) { filter: [1, 1, 16, 16], activation: relu }
  a1 = Convolution(x0) { filter: [1, 1, 16, 16], activation: relu }
  c1 = Convolution(a1) { filter: [3, 3, 16, 16] }
  b1 = BatchNorm(c1)
  s1 = Add(b1, x0)
  x1 = ReLU(s1)
  out = InnerProduct(x1) { num_outputs: 10 }
}
"""


def test_explain_memory_plans_fusion_groups_as_steps(tmp_path, capsys):
    """`netc explain --memory` plans after fuse: c1+b1+s1+x1 is one step, c1, b1, s1 are fused
    (no bytes), in the table and in the JSON; --layout still writes (and checks) a per-layer plan."""
    f = tmp_path / "res.nd"
    f.write_text(RESIDUAL)
    assert main(["explain", str(f), "--brief", "--memory"]) == 0
    out = capsys.readouterr().out
    assert "one step per fusion group" in out
    assert "c1 (fused), b1 (fused), s1 (fused)" in out
    assert main(["explain", str(f), "--format", "json", "--memory"]) == 0
    m = json.loads(capsys.readouterr().out)["memory"]
    recs = {t["name"]: t for t in m["tensors"]}
    assert m["fusion"] and m["fused_tensors"] == 3 and m["fused_bytes"] == 3 * 4 * 8 * 8 * 16 * 4
    assert recs["c1"]["fused"] and recs["c1"]["buffer"] is None and not recs["x1"]["fused"]
    assert all(n not in b["tensors"] for b in m["buffers"] for n in ("c1", "b1", "s1"))
    assert [s["layers"] for s in m["steps"]] == [["x0"], ["a1"], ["c1", "b1", "s1", "x1"], ["out"]]
    assert m["lower_bound_bytes"] <= m["arena_bytes"] <= 1.05 * m["lower_bound_bytes"]
    assert main(["explain", str(f), "--brief", "--verify"]) == 0
    assert "verified for every batch 1..4" in capsys.readouterr().err
    lay = tmp_path / "res.json"
    assert main(["explain", str(f), "--brief", "--layout", str(lay)]) == 0
    capsys.readouterr()
    doc = json.loads(lay.read_text())
    assert "c1" in doc["netc"]["tensors"]          # a layout has every layer's output: planned op by op
    assert main(["check", str(lay)]) == 0
    assert "a valid layout" in capsys.readouterr().out


def test_plan_memory_refuses_a_group_that_cannot_be_one_kernel(tmp_path, capsys):
    """IR whose fusion attributes put an op in a group while another group reads its result:
    a located error (exit 1), not a plan that codegen would run wrongly."""
    import re
    f = tmp_path / "res.nd"
    f.write_text(RESIDUAL)
    assert main(["opt", str(f), "-p", "fuse"]) == 0
    ir = capsys.readouterr().out
    g_out = re.search(r'name = "out".*?fusion_group = "(g\d+)"', ir).group(1)
    bad = re.sub(r'(name = "c1".*?fusion_group = )"g\d+"', rf'\1"{g_out}"', ir)
    assert bad != ir
    (tmp_path / "bad.mlir").write_text(bad)
    assert main(["opt", str(tmp_path / "bad.mlir"), "-p", "plan-memory"]) == 1
    err = capsys.readouterr().err
    assert "res.nd:5:3: error:" in err and "the result of 'c1' is read by 'b1' outside the group" in err
    assert "res.nd:6:3: note:" in err and "Traceback" not in err
