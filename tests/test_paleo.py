"""Paleo importer: every corpus net imports with Paleo's own numbers; bad inputs give located errors."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from netc.cli import main
from netc.diagnostics import DiagnosticEngine, NetcError
from netc.explain import explain_json
from netc.frontend import load, load_text
from netc.frontend.nd_writer import write_nd
from netc.passes.manager import DEFAULT_PIPELINE, PassContext, PassManager

SHARED = Path(__file__).resolve().parents[2] / "shared"
PALEO = SHARED / "corpus" / "paleo"
GENERATED = SHARED / "corpus" / "paleo-generated"
REFERENCE = SHARED / "reference" / "paleo"

pytestmark = pytest.mark.skipif(not PALEO.is_dir(), reason=f"the shared corpus is not at {SHARED}")


def explain(path):
    m = load(str(path))
    PassManager(DEFAULT_PIPELINE).run(m, PassContext())
    return explain_json(m)


@pytest.mark.parametrize("net", ["alex_v2", "vgg16", "nin"])
def test_per_layer_numbers_equal_paleo_reference(net):
    ref = json.loads((REFERENCE / f"{net}.json").read_text())
    got = explain(PALEO / f"{net}.json")
    rows = {r["name"]: r for r in got["layers"]}
    assert len(rows) == ref["totals"]["num_layers"] == len(ref["layers"])
    for want in ref["layers"]:
        r = rows[want["name"]]
        assert r["shape"] == want["output_shape"], want["name"]
        assert r["params"] == want["num_params"], want["name"]
        assert r["flops_fwd"] == want["fwd_flops"], want["name"]
        assert math.isclose(r["flops_bwd_data"], want["bwd_data_flops"], rel_tol=1e-9, abs_tol=1e-6), want["name"]
        assert math.isclose(r["flops_bwd_filter"], want["bwd_filter_flops"], rel_tol=1e-9, abs_tol=1e-6), want["name"]
        assert r["parents"] == want["parents"], want["name"]
    t = got["totals"]
    assert t["params"] == ref["totals"]["params"]
    assert t["param_bytes"] == ref["totals"]["weights_in_bytes"]
    assert t["activation_bytes"] == ref["totals"]["activation_bytes"]
    assert t["flops_fwd"] == ref["totals"]["fwd_flops"]
    assert math.isclose(t["flops_bwd_data"], ref["totals"]["bwd_data_flops"], rel_tol=1e-9)
    assert math.isclose(t["flops_bwd_filter"], ref["totals"]["bwd_filter_flops"], rel_tol=1e-9)


# Paleo's totals for the nets without per-layer reference data (shared/spec/paleo-format.md §4.6, §14,
# corpus/paleo-generated/PROVENANCE.md): (file, layers, params, forward FLOPs, activation bytes or None)
TOTALS = [
    (PALEO / "inception_v3.json", 126, 23_734_312, 724_738_519_040, None),
    (PALEO / "overfeat.json", 15, 145_704_424, 677_762_695_168, None),
    (PALEO / "alex_v2_1gpu.json", 15, 49_566_504, None, None),
    (PALEO / "alex_v2_2gpu.json", 22, 49_566_504, None, None),
    (PALEO / "alex_v2_4gpu.json", 32, 49_566_504, None, None),
    (PALEO / "alex_v2_8gpu.json", 52, 49_566_504, None, None),
    (GENERATED / "resnet50.json", 74, 25_530_472, 7_672_347_776, 64_852_544),
    (GENERATED / "densenet.json", 159, 1_159_338, 531_148_288, 21_609_592),
]


@pytest.mark.parametrize("path,layers,params,fwd,act", TOTALS, ids=[p[0].stem for p in TOTALS])
def test_corpus_totals_equal_paleo(path, layers, params, fwd, act):
    t = explain(path)["totals"]
    assert t["layers"] == layers
    assert t["params"] == params
    if fwd is not None:
        assert t["flops_fwd"] == fwd
    if act is not None:
        assert t["activation_bytes"] == act


def test_model_parallel_names_and_split_channels():
    rows = {r["name"]: r for r in explain(PALEO / "alex_v2_2gpu.json")["layers"]}
    # §4.6 worked example: fc6 split in two, each concat6@s a full 4096-channel copy
    assert rows["parallel_fc67/fc6@1"]["shape"] == [128, 1, 1, 2048]
    assert rows["parallel_fc67/concat6@0"]["parents"] == ["parallel_fc67/dropout6@0", "parallel_fc67/dropout6@1"]
    assert rows["parallel_fc67/concat6@1"]["shape"] == [128, 1, 1, 4096]
    assert rows["parallel_fc67/fc7@0"]["parents"] == ["parallel_fc67/concat6@0"]
    assert rows["concat7"]["parents"] == ["parallel_fc67/dropout7@0", "parallel_fc67/dropout7@1"]


def test_resnet_backward_geometry_with_odd_padding_adjustment():
    # the 7x7 stride-2 SAME conv hits Paleo's |pb - pa| == 1 adjustment (spec §14); the filter
    # gradient equals the forward cost in exact arithmetic
    rows = explain(GENERATED / "resnet50.json")["layers"]
    conv1 = next(r for r in rows if r["type"] == "Convolution")
    assert math.isclose(conv1["flops_bwd_filter"], conv1["flops_fwd"], rel_tol=1e-9)


@pytest.mark.parametrize("path", sorted(PALEO.glob("*.json")) + sorted(GENERATED.glob("*.json")),
                         ids=lambda p: p.stem)
def test_import_writes_nd_that_gives_the_same_numbers(path, tmp_path):
    direct = explain(path)
    out = tmp_path / (path.stem + ".nd")
    assert main(["import", str(path), "-o", str(out)]) == 0
    again = explain(out)
    strip = lambda d: [{k: v for k, v in r.items()} for r in d["layers"]]  # noqa: E731
    assert strip(again) == strip(direct)
    assert again["totals"] == direct["totals"]
    # and writing the re-imported IR again is a fixed point
    m = load(str(out))
    header, _, body = out.read_text().partition("\nnetwork ")
    assert write_nd(m) == "network " + body


def test_generic_layers_warn_once_per_type(capsys):
    assert main(["check", str(GENERATED / "densenet.json")]) == 0
    err = capsys.readouterr().err
    assert err.count("layer type 'BatchNorm' is unknown to Paleo") == 1
    assert "layer type 'Accuracy' is unknown to Paleo" in err


def _err(text, capsys, name="bad.json"):
    with pytest.raises(NetcError) as e:
        m = load_text(text, name, None)
        PassManager(DEFAULT_PIPELINE).run(m, PassContext(diag=DiagnosticEngine()))
    return e.value.diagnostics


NET = '''{
  "layers": {
    "data": {"parents": [], "type": "Input", "tensor": [2, 8, 8, 3]},
    "conv": {"parents": ["data"], "type": "Convolution", "filter": [3, 3, 3, 4],
             "strides": [1, 1, 1, 1], "padding": "SAME"},
    %s
  }
}'''


@pytest.mark.parametrize("snippet,message,line", [
    ('"p": {"parents": ["cnv"], "type": "Pooling", "ksize": [1,2,2,1], "strides": [1,2,2,1], "padding": "VALID"}',
     "unknown parent 'cnv'", 6),
    ('"p": {"type": "Pooling", "ksize": [1,2,2,1], "strides": [1,2,2,1], "padding": "VALID"}',
     "has no \"parents\"", 6),
    ('"p": {"parents": ["conv"], "ksize": [1,2,2,1]}', "has no \"type\"", 6),
    ('"p": {"parents": ["conv"], "type": "Pooling", "ksize": [1,2,2,1], "strides": [1,2,2,1], "padding": "same"}',
     "expected \"VALID\", \"SAME\"", 6),
    ('"p": {"parents": ["conv"], "type": "Pooling", "strides": [1,2,2,1], "padding": "VALID"}',
     "needs \"ksize\"", 6),
    ('"p": {"parents": ["conv@self"], "type": "Dropout", "dropout_keep_prob": 0.5}',
     "'@self' is only meaningful inside a parallel block", 6),
    ('"c2": {"parents": ["data"], "type": "Convolution", "filter": [3, 3, 4, 4], "strides": [1,1,1,1], '
     '"padding": "VALID"}', "filter expects 4 input channels but the input has 3", 6),
    ('"cat": {"parents": ["conv", "data"], "type": "Concatenate", "dim": 1}', "cannot concatenate", 6),
])
def test_bad_paleo_inputs_are_located(snippet, message, line, capsys):
    diags = _err(NET % snippet, capsys)
    errs = [d for d in diags if d.severity == "error"]
    assert errs and message in errs[0].message, [d.message for d in diags]
    assert errs[0].loc.line == line


def test_truncated_json_gives_line_and_column():
    text = (PALEO / "alex_v2.json").read_text()
    for cut in (10, len(text) // 2, len(text) - 3):
        with pytest.raises(NetcError) as e:
            load_text(text[:cut], "alex_v2.json")
        d = e.value.diagnostics[0]
        assert d.message.startswith("invalid JSON") and d.loc.line >= 1 and d.loc.col >= 1


def test_missing_data_layer_and_duplicate_keys(capsys):
    with pytest.raises(NetcError) as e:
        load_text('{"layers": {"input": {"parents": [], "type": "Input", "tensor": [1, 2]}}}', "x.json")
    assert "named 'data'" in e.value.diagnostics[0].message
    text = NET % '"conv": {"parents": ["data"], "type": "Dropout", "dropout_keep_prob": 0.5}'
    diag = DiagnosticEngine()
    load_text(text, "dup.json", diag)
    assert any("duplicate key $.layers.conv" in d.message for d in diag.diagnostics)


def test_cli_exit_codes(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"layers": {"data": {"parents": [], "type": "Input", "tensor": [1, 4, 4, 1]},')
    assert main(["check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "bad.json:1:" in err and "error: invalid JSON" in err and "^" in err
