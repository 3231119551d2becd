"""Brainstorm: the corpus architectures import with Brainstorm's shapes and parameter counts; the
@-key hub layouts are read and checked; bad inputs give located diagnostics, exit 1."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from netc.cli import main
from netc.explain import explain_json
from netc.frontend import load, load_text
from netc.frontend.hub_layout import read_hub_layout
from netc.frontend.layout import LayoutError
from netc import pipelines

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "brainstorm"
NETS = {"simple_softmax_net": 10, "docs_internals_architecture": 79_510, "mnist_pi": 2_395_210}


def explain(path, batch=1):
    m = load(str(path), batch=batch)
    pipelines.inference(m)
    return explain_json(m)


def _netc_shape(template, batch):
    assert template[:2] == ["T", "B"], template
    return [batch] + template[2:]  # T = 1 folded into the batch axis


@pytest.mark.parametrize("net", sorted(NETS))
@pytest.mark.parametrize("batch", [1, 3])
def test_corpus_architecture_shapes_and_params(net, batch):
    doc = json.loads((CORPUS / f"{net}.layout.json").read_text())
    got = explain(CORPUS / f"{net}.layout.json", batch)
    rows = {r["name"]: r for r in got["layers"]}
    want_params = 0
    for lname, ls in doc["layer_shapes"].items():
        want_params += sum(math.prod(s) for s in ls["parameters"].values())
        t = doc["architecture"][lname]["@type"]
        if t == "Loss":  # becomes an output statement; its input is the scalar loss
            continue
        outs = ls["out"]
        for oname, shape in outs.items():
            rname = lname if list(outs) == ["default"] and t != "Input" else f"{lname}.{oname}"
            r = rows[rname]
            if oname == "loss":  # netc's SoftmaxLoss is already the batch mean
                assert r["shape"] == [] and shape[2:] == [1]
            else:
                assert r["shape"] == _netc_shape(shape, batch), rname
        if ls["parameters"]:
            r = rows[lname]
            assert r["params"] == sum(math.prod(s) for s in ls["parameters"].values())
    assert got["totals"]["params"] == want_params == NETS[net]


@pytest.mark.parametrize("net", sorted(NETS))
def test_check_validates_hub_layout(net, capsys):
    path = CORPUS / f"{net}.layout.json"
    assert main(["check", str(path)]) == 0
    assert "valid Brainstorm hub layout" in capsys.readouterr().out
    doc = json.loads(path.read_text())
    lay = read_hub_layout(doc)
    assert len(lay.hub_sizes) == len(doc["hubs"])
    for key, v in doc["buffer_sizes"].items():
        T, B = (int(x.split("=")[1]) for x in key.split(","))
        assert lay.total(T, B, doc["hubs"]) == v["total"]
    read_hub_layout(doc["layout"])  # a bare tree is accepted too


def test_import_writes_nd_that_reads_back(tmp_path, capsys):
    src = CORPUS / "mnist_pi.layout.json"
    out = tmp_path / "mnist_pi.nd"
    assert main(["import", str(src), "-o", str(out)]) == 0
    text = out.read_text()
    assert "input Input.default: f32[1, 28, 28, 1]" in text and "output " in text
    m = load(str(out))
    pipelines.inference(m)
    assert explain_json(m)["totals"]["params"] == NETS["mnist_pi"]


def test_bare_architecture_with_fan_in_and_merge():
    arch = {
        "In": {"@type": "Input", "out_shapes": {"default": ["T", "B", 3]},
               "@outgoing_connections": {"default": ["A", "B", "D"]}},
        "A": {"@type": "FullyConnected", "size": 4, "activation": "tanh", "@outgoing_connections": {"default": ["C"]}},
        "B": {"@type": "FullyConnected", "size": 6, "@outgoing_connections": {"default": ["C", "M.inputs_1"]}},
        "D": {"@type": "FullyConnected", "size": [2, 3], "@outgoing_connections": {}},
        "C": {"@type": "FullyConnected", "size": 5, "activation": "sigmoid",
              "@outgoing_connections": {"default": ["M.inputs_2"]}},
        "M": {"@type": "Merge", "@outgoing_connections": {}},
    }
    m = load_text(json.dumps(arch), "fan_in.json", batch=2)
    pipelines.inference(m)
    rows = {r["name"]: r for r in explain_json(m)["layers"]}
    assert rows["C.default.concat"]["shape"] == [2, 10]  # A (4) ++ B (6): Brainstorm's fan-in
    assert rows["D"]["shape"] == [2, 2, 3]  # a multi-dimensional size: inner product + reshape
    assert rows["D.flat"]["params"] == 3 * 6 + 6
    assert rows["M"]["shape"] == [2, 11]  # Merge: B (6) ++ C (5) along the last axis
    assert rows["A"]["type"] == "InnerProduct"


BAD_ARCH = {
    "In": {"@type": "Input", "out_shapes": {"default": ["T", "B", 3]}, "@outgoing_connections": {"default": ["H"]}},
    "H": {"@type": "FullyConected", "size": 4, "@outgoing_connections": {}},
}


def _run(argv, capsys):
    rc = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err
    return rc, err


def test_bad_inputs_are_located(tmp_path, capsys):
    good = (CORPUS / "simple_softmax_net.layout.json").read_text()
    trunc = tmp_path / "trunc.json"
    trunc.write_text(good[:2000])
    rc, err = _run(["check", str(trunc)], capsys)
    assert rc == 1 and "trunc.json:" in err and "invalid JSON" in err
    rc, err = _run(["explain", str(trunc)], capsys)
    assert rc == 1 and "invalid JSON" in err

    bad = tmp_path / "bad_type.json"
    bad.write_text(json.dumps(BAD_ARCH, indent=1))
    rc, err = _run(["explain", str(bad)], capsys)
    assert rc == 1 and "bad_type.json:18:12" in err and "FullyConected" in err and "did you mean 'FullyConnected'" in err

    rec = dict(BAD_ARCH, H={"@type": "LSTM", "size": 4, "@outgoing_connections": {}})
    bad.write_text(json.dumps(rec, indent=1))
    rc, err = _run(["explain", str(bad)], capsys)
    assert rc == 1 and "'H' of type LSTM is recurrent" in err and "not yet supported" in err

    doc = json.loads(good)
    doc["layout"]["Hid"]["outputs"]["default"]["@slice"] = [0, 3]
    sl = tmp_path / "slice.json"
    sl.write_text(json.dumps(doc, indent=1))
    rc, err = _run(["check", str(sl)], capsys)
    assert rc == 1 and "exceeds hub 3's size 2" in err and '($.layout.Hid.outputs.default["@slice"])' in err
    assert "slice.json:" in err

    doc = json.loads(good)
    doc["layout"]["Hid"]["parameters"]["bias"]["@index"] = 0
    doc["layout"]["Hid"]["parameters"]["bias"]["@slice"] = [7, 9]
    sl.write_text(json.dumps(doc, indent=1))
    rc, err = _run(["check", str(sl)], capsys)
    assert rc == 1 and "also the @index of sibling 'W'" in err and "overlaps 'Hid.parameters.W'" in err


def test_layout_errors_are_collected():
    doc = json.loads((CORPUS / "simple_softmax_net.layout.json").read_text())
    doc["layout"]["Input"]["outputs"]["default"]["@hub"] = 99
    doc["layout"]["Input"]["outputs"]["default"]["@shape"] = ["T", "B", 5]
    with pytest.raises(LayoutError) as e:
        read_hub_layout(doc)
    msgs = " | ".join(m for _, m in e.value.problems)
    assert "hub 99 does not exist" in msgs and "5 feature elements" in msgs
