"""Issue 24: a corpus job's parameter total in netc equals SINGA's, for every conf and phase the
SINGA oracle holds (/work/shared/reference/singa: per-node param shapes computed by a re-implementation
of SINGA's own Setup code, see /work/shared/reference/README.md).

SINGA's total is read from the oracle alone: every param shape of every node, less the params that
`share_from` another (SINGA's Param::ShareFrom keeps one copy of the values: the sharer's shape is
recorded but its data is the owner's). Which params share is read from the conf with a small reading of
its own (the generic protobuf-text parser, not the SINGA front end): a node `<layer>@00` (0.1) or
`0#<layer>@0` (0.2/0.3) has the layer's `param { }` entries in order, and the i-th recorded shape is the
i-th entry. netc's total is the module's parameters that are not shared (`share_from` unset).
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from netc import pipelines
from netc.diagnostics import DiagnosticEngine
from netc.frontend import prototext as pt
from netc.frontend.singa.to_ir import import_singa
from netc.pipelines import Options

SHARED = Path(__file__).resolve().parents[2] / "shared"
CORPUS = SHARED / "corpus" / "singa"
REF = SHARED / "reference" / "singa"
REFS = sorted(p.name for p in REF.glob("*.jsonl")) if REF.is_dir() else []
PHASE = {"kTrain": "train", "kTest": "test", "kVal": "val"}
pytestmark = pytest.mark.skipif(not CORPUS.is_dir() or not REFS, reason="/work/shared corpus and oracle not here")


def layer_params(conf_text: str) -> dict[str, list[str | None]]:
    """{layer name: [share_from of each `param { }` entry, in order (None: owns its values)]}, read
    with the prototext parser only (no schema, no SINGA front end)."""
    out = {}

    def walk(msg):
        for f in msg:
            if not f.is_message:
                continue
            if f.name == "layer" and f.value.first("name") is not None:
                params = []
                for p in f.value.all("param"):
                    share = p.value.first("share_from") if p.is_message else None
                    params.append(share.value.value if share is not None else None)
                out[f.value.first("name").value.value] = params
            walk(f.value)

    walk(pt.parse_text(conf_text, "conf"))
    return out


def layer_of(node: str) -> str:
    """SINGA's node name back to the conf's layer name: 'Inner1@00' (0.1), '0#conv1@0' (0.2/0.3)."""
    return re.sub(r"^\d+#", "", node.rsplit("@", 1)[0])


def singa_total(ref: str, conf_text: str) -> tuple[int, int]:
    """(SINGA's total, how many shared params it leaves out) from the oracle's nodes and the conf."""
    nodes = [json.loads(line) for line in (REF / ref).read_text().splitlines() if line.strip()]
    shares = layer_params(conf_text)
    total = dropped = 0
    for n in nodes:
        entries = shares.get(layer_of(n["node"]), [])
        for i, shape in enumerate(n.get("params", [])):
            if i < len(entries) and entries[i] is not None:
                dropped += 1
                continue
            total += math.prod(shape)
    return total, dropped


def netc_total(path: Path, phase: str) -> int:
    diag = DiagnosticEngine()
    m = import_singa(path.read_text(), str(path), diag)
    pipelines.inference(m, Options(phase=phase), diag)
    return sum(math.prod(p.attrs["type"].shape) for p in m.params() if p.attrs.get("share_from") is None)


@pytest.mark.parametrize("ref", REFS)
def test_parameter_total_is_singas(ref):
    conf, phase = ref.split(".conf.")[0] + ".conf", ref.split(".conf.")[1].split(".")[0]
    path = CORPUS / conf
    singa, _ = singa_total(ref, path.read_text())
    assert netc_total(path, PHASE[phase]) == singa


def test_every_oracle_file_is_covered():
    """The 22 files of the oracle (11 confs x kTrain/kTest), and the shared params the reading finds."""
    assert len(REFS) == 22
    dropped = {r: singa_total(r, (CORPUS / (r.split(".conf.")[0] + ".conf")).read_text())[1] for r in REFS}
    # rbm1-4: RBMHid's weight is RBMVis'; the autoencoder's four decoder weights are the encoder's
    assert {r.split(".conf.")[0]: d for r, d in dropped.items() if d} == {
        "0.1.0_rbm_rbm1": 1, "0.1.0_rbm_rbm2": 1, "0.1.0_rbm_rbm3": 1, "0.1.0_rbm_rbm4": 1,
        "0.1.0_rbm_autoencoder": 4}


@pytest.mark.parametrize("conf,total", [
    # hand sums of the oracle's shapes, so the reading above is itself checked
    ("0.1.0_rbm_autoencoder.conf", 784 * 1000 + 1000 + 1000 * 500 + 500 + 500 * 250 + 250 + 250 * 30 + 30
     + 250 + 500 + 1000 + 784),
    ("0.3.0_mnist_job.conf", 784 * 2500 + 2500 + 2500 * 2000 + 2000 + 2000 * 1500 + 1500 + 1500 * 1000 + 1000
     + 1000 * 500 + 500 + 500 * 10 + 10),
])
def test_singa_total_by_hand(conf, total):
    assert singa_total(conf + ".kTrain.K1.jsonl", (CORPUS / conf).read_text())[0] == total
