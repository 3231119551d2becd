"""Every file of the shared corpus (Paleo, SINGA, Brainstorm): what netc makes of it, pinned.

Files with reference data are checked against it elsewhere (test_paleo.py, test_singa*.py,
test_brainstorm.py); this records, for every file, the layers netc builds (name, op, shape,
parameters, forward FLOPs) and the totals, or the first error for files the original tools
reject, so any change in how netc reads the seed formats shows up as a diff. After a deliberate
change: `make golden` (pytest --update-goldens), then review the diff.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from netc.diagnostics import DiagnosticEngine, NetcError
from netc.explain import explain_json
from netc.frontend import load
from netc import pipelines
from netc.pipelines import Options

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
GOLDEN = ROOT / "tests" / "corpus_golden"
FILES = sorted(p for p in CORPUS.rglob("*") if p.suffix in (".json", ".conf")) if CORPUS.is_dir() else []


def summarize(path: Path, phase: str) -> dict:
    diag = DiagnosticEngine()
    try:
        m = load(str(path), diag)
        pipelines.inference(m, Options(phase=phase), diag)
    except NetcError as e:
        d = e.diagnostics[0]
        return {"error": d.message, "line": d.loc.line if d.loc else 0}
    doc = explain_json(m)
    nets = []
    for net in doc.get("networks", [doc]):
        nets.append({"name": net["name"], "totals": {k: round(v) if isinstance(v, float) else v
                                                     for k, v in net["totals"].items()},
                     "layers": [f"{r['name']} {r['op']} {'x'.join(map(str, r['shape'])) or 'scalar'} "
                                f"params={r['params']} fwd={r['flops_fwd']}" for r in net["layers"]]})
    return {"networks": nets, "warnings": sorted({d.message for d in diag.diagnostics if d.severity == "warning"})}


@pytest.mark.skipif(not FILES, reason="the shared corpus is not beside the repository")
@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_corpus_file(path, request):
    phases = ("train", "test") if path.suffix == ".conf" else ("train",)
    got = {ph: summarize(path, ph) for ph in phases}
    golden = GOLDEN / path.parent.name / (path.name + ".golden.json")
    text = json.dumps(got, indent=1, sort_keys=True) + "\n"
    if request.config.getoption("--update-goldens"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
        return
    assert golden.exists(), f"no golden for {path.name}: run `make golden`"
    assert text == golden.read_text(), f"{path.name}: netc's reading changed; if deliberate, run `make golden`"
