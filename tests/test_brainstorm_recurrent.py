"""Brainstorm architectures with recurrent layers (Lstm, Recurrent, Clockwork) import time-major.

The architectures are what Brainstorm (IDSIA/brainstorm @ 8f1fc88) itself makes: the first two are
generate_architecture() of nets built with its layer constructors (Input >> Lstm(5) >> FullyConnected(3,
'linear') >> SoftmaxCE >> Loss; Input >> Recurrent(3, 'rel') and Clockwork(4), both into one Lstm(2));
the third is a dict without sizes (Brainstorm's default: the input's feature size). The expected
shapes are Brainstorm's own (its layers' setup, run through instantiate_layers_from_architecture): per
layer the parameter shapes in its order and the output templates.
"""
from __future__ import annotations

import json

import pytest
import torch

from netc import pipelines
from netc.cli import main
from netc.diagnostics import NetcError
from netc.explain import explain_json
from netc.frontend import load_text
from netc.ops import lookup
from netc.runtime.reference import module_params, run_reference

LSTM_CLASSIFIER = {
    "Input": {"@type": "Input", "@outgoing_connections": {"default": ["L.default"], "targets": ["S.targets"]},
              "out_shapes": {"default": ["T", "B", 6], "targets": ["T", "B", 1]}},
    "L": {"@type": "Lstm", "@outgoing_connections": {"default": ["F.default"]}, "size": 5, "activation": "tanh"},
    "F": {"@type": "FullyConnected", "@outgoing_connections": {"default": ["S.default"]}, "size": 3,
          "activation": "linear"},
    "S": {"@type": "SoftmaxCE", "@outgoing_connections": {"loss": ["Loss.default"]}},
    "Loss": {"@type": "Loss", "@outgoing_connections": {}, "importance": 1.0},
}
STACKED_FAN_IN = {
    "Input": {"@type": "Input", "@outgoing_connections": {"default": ["C.default", "R.default"]},
              "out_shapes": {"default": ["T", "B", 4]}},
    "R": {"@type": "Recurrent", "@outgoing_connections": {"default": ["L.default"]}, "size": 3, "activation": "rel"},
    "C": {"@type": "Clockwork", "@outgoing_connections": {"default": ["L.default"]}, "size": 4, "activation": "tanh"},
    "L": {"@type": "Lstm", "@outgoing_connections": {}, "size": 2, "activation": "tanh"},
}
DEFAULT_SIZES = {
    "Input": {"@type": "Input", "out_shapes": {"default": ["T", "B", 3]}, "@outgoing_connections": {"default": ["R"]}},
    "R": {"@type": "Recurrent", "activation": "sigmoid", "@outgoing_connections": {"default": ["C"]}},
    "C": {"@type": "Clockwork", "size": 4, "@outgoing_connections": {"default": ["L"]}},
    "L": {"@type": "Lstm", "@outgoing_connections": {}},
}

_LSTM_PARAMS = ("Wz", "Wi", "Wf", "Wo", "pi", "pf", "po", "Rz", "Ri", "Rf", "Ro", "bz", "bi", "bf", "bo")


def _lstm(h, x):
    return {r: [h, x] if r[0] == "W" else [1, h] if r[0] == "p" else [h, h] if r[0] == "R" else [h] for r in _LSTM_PARAMS}


# Brainstorm's setup: per layer, parameter shapes (in its order) and output templates
BRAINSTORM = {
    "lstm_classifier": (LSTM_CLASSIFIER, {
        "L": (_lstm(5, 6), {"default": ["T", "B", 5]}),
        "F": ({"W": [3, 5], "bias": [3]}, {"default": ["T", "B", 3]}),
        "S": ({}, {"predictions": ["T", "B", 3], "loss": ["T", "B", 1]}),
    }),
    "stacked_fan_in": (STACKED_FAN_IN, {
        "R": ({"W": [3, 4], "R": [3, 3], "bias": [3]}, {"default": ["T", "B", 3]}),
        "C": ({"W": [4, 4], "R": [4, 4], "bias": [4], "timing": [4]}, {"default": ["T", "B", 4]}),
        "L": (_lstm(2, 7), {"default": ["T", "B", 2]}),
    }),
    "default_sizes": (DEFAULT_SIZES, {
        "R": ({"W": [3, 3], "R": [3, 3], "bias": [3]}, {"default": ["T", "B", 3]}),
        "C": ({"W": [4, 3], "R": [4, 4], "bias": [4], "timing": [4]}, {"default": ["T", "B", 4]}),
        "L": (_lstm(4, 4), {"default": ["T", "B", 4]}),
    }),
}


def _load(arch, name="net.json", batch=3, time=5):
    m = load_text(json.dumps(arch, indent=1), name, batch=batch, options={"time": time})
    pipelines.inference(m)
    return m


@pytest.mark.parametrize("name", sorted(BRAINSTORM))
def test_shapes_and_parameters_are_brainstorms(name):
    arch, layers = BRAINSTORM[name]
    t, b = 5, 3
    m = _load(arch, batch=b, time=t)
    rows = {r["name"]: r for r in explain_json(m)["layers"]}
    declared = {p.attrs["sym_name"]: list(p.attrs["type"].shape) for p in m.params()}
    for lname, (params, outs) in layers.items():
        got = [n.split(".", 1)[1] for n in declared if n.split(".")[0] == lname and not n.startswith(f"{lname}.flat")]
        if lname == "F":     # a FullyConnected at every step: its product is the op F.flat
            got = [n.split(".", 2)[2] for n in declared if n.startswith("F.flat.")]
            assert {k: declared[f"F.flat.{k}"] for k in got} == {"weight": [5, 3], "bias": [3]}   # netc's [in, out]
            assert sum(map(lambda s: s[0] * (s[1] if len(s) > 1 else 1), params.values())) == rows["F.flat"]["params"]
        else:
            assert got == list(params), lname                                 # Brainstorm's names and order
            assert {k: declared[f"{lname}.{k}"] for k in got} == params, lname   # ... and shapes
        for out, template in outs.items():
            row = rows[lname if list(outs) == ["default"] else f"{lname}.{out}"]
            if out == "loss":        # netc's SoftmaxLoss is the mean over steps and samples
                assert row["shape"] == []
            else:
                assert row["shape"] == [t, b] + template[2:], (lname, out)


def test_defaults_are_brainstorms():
    m = _load(DEFAULT_SIZES)
    ops = {op.attrs["name"]: op for op in m.networks()[0].regions[0].ops if "name" in op.attrs}
    assert (ops["R"].name, ops["R"].attrs["size"], ops["R"].attrs["activation"]) == ("netc.recurrent", 3, "sigmoid")
    assert (ops["C"].name, ops["C"].attrs["size"], lookup("netc.clockwork").attrs_of(ops["C"])["activation"]) == \
        ("netc.clockwork", 4, "tanh")
    assert (ops["L"].name, ops["L"].attrs["size"], ops["L"].attrs["activation"]) == ("netc.lstm", 4, "tanh")
    assert lookup("netc.recurrent").attrs_of(ops["R"])["activation"] == "sigmoid"
    rel = _load(STACKED_FAN_IN)
    r = next(op for op in rel.networks()[0].regions[0].ops if op.attrs.get("name") == "R")
    assert r.attrs["activation"] == "relu"                        # Brainstorm's 'rel'


def test_the_sequences_compute_brainstorms_layers():
    """stacked_fan_in at T = 4, B = 2: L reads C's and R's outputs side by side (C first: the sources' order),
    every layer over the whole sequence from a zero state."""
    m = _load(STACKED_FAN_IN, batch=2, time=4)
    x = torch.randn(4, 2, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    p = module_params(m, seed=5)
    p["C.timing"] = torch.tensor([1.0, 2.0, 3.0, 2.0], dtype=torch.float64)
    out = run_reference(m, {"Input.default": x}, p)
    roles = lambda lname, op: {r: p[f"{lname}.{r}"] for r in lookup(op).param_roles}   # noqa: E731
    c = lookup("netc.clockwork").reference({"size": 4, "activation": "tanh"}, [x], roles("C", "netc.clockwork"))
    r = lookup("netc.recurrent").reference({"size": 3, "activation": "relu"}, [x], roles("R", "netc.recurrent"))
    want = lookup("netc.lstm").reference({"size": 2, "activation": "tanh"}, [torch.cat([c, r], 2)],
                                         roles("L", "netc.lstm"))
    torch.testing.assert_close(out["L"], want, rtol=1e-12, atol=1e-12)


def test_runs_and_trains_on_the_reference(tmp_path, capsys):
    path = tmp_path / "lstm_classifier.json"
    path.write_text(json.dumps(LSTM_CLASSIFIER, indent=1))
    assert main(["run", str(path), "--reference"]) == 0
    assert "S.loss" in capsys.readouterr().out
    assert main(["run", str(path), "--reference", "--train", "--steps", "2"]) == 0
    assert "trained 2 steps" in capsys.readouterr().out


def test_feed_forward_nets_keep_t_1_folded():
    """Without a recurrent layer nothing changes: ('T', 'B', F) is [B, F]."""
    arch = {k: v for k, v in LSTM_CLASSIFIER.items() if k != "L"}
    arch["Input"] = dict(arch["Input"], **{"@outgoing_connections": {"default": ["F"], "targets": ["S.targets"]}})
    m = _load(arch, batch=3, time=5)
    rows = {r["name"]: r for r in explain_json(m)["layers"]}
    assert rows["Input.default"]["shape"] == [3, 6] and rows["F"]["shape"] == [3, 3]


def _err(arch, tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(arch, indent=1))
    rc = main(["explain", str(path)])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err
    return err


def test_highway_imports_and_a_bad_one_is_located(tmp_path, capsys):
    """Highway is netc's highway op of H, T, x (tests/test_brainstorm_ops.py); inputs of different feature shapes
    are a located error (Brainstorm's check)."""
    arch = {"Input": {"@type": "Input", "out_shapes": {"default": ["T", "B", 3], "other": ["T", "B", 2]},
                      "@outgoing_connections": {"default": ["H.x", "H.H"], "other": ["H.T"]}},
            "H": {"@type": "Highway", "@outgoing_connections": {}}}
    err = _err(arch, tmp_path, capsys)
    assert "bad.json:" in err and "($.H): error: the inputs H, T and x of Highway 'H' must have one feature shape" in err
    arch["Input"]["@outgoing_connections"] = {"default": ["H.x", "H.H", "H.T"], "other": []}
    m = load_text(json.dumps(arch), "hw.json")
    assert [op.attrs["parents"] for op in m.walk() if op.name == "netc.highway"] == [["Input.default"] * 3]


def test_bad_recurrent_layers_are_located(tmp_path, capsys):
    arch = json.loads(json.dumps(DEFAULT_SIZES))
    arch["L"]["activation"] = "el"
    err = _err(arch, tmp_path, capsys)
    assert "bad.json:" in err and "activation 'el' of 'L' is not one netc knows" in err
    arch["L"] = {"@type": "LstmOpt", "size": 2, "@outgoing_connections": {}}   # (ClockworkLstm imports now)
    err = _err(arch, tmp_path, capsys)
    assert "'L' of type LstmOpt is recurrent: this recurrent layer type is not yet supported" in err
    arch["L"] = {"@type": "Lstm", "size": 0, "@outgoing_connections": {}}
    err = _err(arch, tmp_path, capsys)
    assert "\"size\" of Lstm 'L' must be a positive int" in err
    with pytest.raises(NetcError, match="sequence length T"):
        load_text(json.dumps(DEFAULT_SIZES), "x.json", options={"time": 0})
