"""Time-sized buffers in netc's Brainstorm layouts (`netc explain --layout`) for recurrent nets, against what
Brainstorm's own create_layout computes for the same architectures.

The facts were obtained by running Brainstorm's pure-Python structure code (IDSIA/brainstorm @ 8f1fc88:
instantiate_layers_from_architecture, then create_layout) on the three architectures of
tests/test_brainstorm_recurrent.py. Counted over its forward hubs (not is_backward_only), per category of
the hubs' sources, elements per buffer type [0, 1, 2] and context elements (width * context_size, type 2):

  lstm_classifier  parameters [273, 0, 0]; outputs [1, 0, 19] with 5 context (L.outputs.default (T, B, 5),
                   context 1; Loss.outputs.loss (1,) is type 0; S.outputs.loss (T, B, 1) is one of the 19);
                   internals [0, 0, 50] with 50 context (L's Za, Zb, Ia, Ib, Fa, Fb, Oa, Ob, Ca, Cb, 5 each,
                   context 1); forward elements at (T, B) = (0, 0), (1, 1), (5, 3): 274, 398, 1474
  stacked_fan_in   parameters [150, 0, 0]; outputs [0, 0, 13] with 9 context (one hub C.outputs ‖ R.outputs,
                   4 + 3, context 1, feeding L.inputs.default in that order; L.outputs 2, context 1; Input 4);
                   internals [0, 0, 27] with 27 context (C.Ha 4, R.Ha 3, L's ten 2 each); 150, 226, 858
  default_sizes    parameters [213, 0, 0]; outputs [0, 0, 14] with 11 context; internals [0, 0, 47] with 47
                   context; 213, 332, 1302

netc's layout holds the same, except that a SoftmaxCE's per-step loss (T, B, 1) is no array of netc's
(its SoftmaxLoss is one scalar, type 0, like Brainstorm's Loss output): lstm_classifier's outputs are 18.
"""
from __future__ import annotations

import json

import pytest

from netc import pipelines
from netc.cli import main
from netc.export.layout import brainstorm_elements, write_layout
from netc.frontend import load_text
from netc.frontend.layout import read_layout
from netc.memory.verify import verify_plan
from test_brainstorm_recurrent import DEFAULT_SIZES, LSTM_CLASSIFIER, STACKED_FAN_IN

BRAINSTORM = {   # forward hubs of create_layout: (totals, context elements, elements at (0, 0), (1, 1), (5, 3))
    "lstm_classifier": (LSTM_CLASSIFIER, {"parameters": [273, 0, 0], "inputs_outputs": [1, 0, 19],
                                          "internals": [0, 0, 50]}, {"inputs_outputs": 5, "internals": 50},
                        (274, 398, 1474)),
    "stacked_fan_in": (STACKED_FAN_IN, {"parameters": [150, 0, 0], "inputs_outputs": [0, 0, 13],
                                        "internals": [0, 0, 27]}, {"inputs_outputs": 9, "internals": 27},
                       (150, 226, 858)),
    "default_sizes": (DEFAULT_SIZES, {"parameters": [213, 0, 0], "inputs_outputs": [0, 0, 14],
                                      "internals": [0, 0, 47]}, {"inputs_outputs": 11, "internals": 47},
                      (213, 332, 1302)),
}
PER_STEP_LOSS = {"lstm_classifier": 1}     # S.outputs.loss (T, B, 1): netc's loss is one scalar
INTERNALS = {"Lstm": ["Za", "Zb", "Ia", "Ib", "Fa", "Fb", "Oa", "Ob", "Ca", "Cb"], "Recurrent": ["Ha"],
             "Clockwork": ["Ha"]}     # Brainstorm's forward internals, in its order


def layout_of(arch, time, batch):
    m = load_text(json.dumps(arch), "net.json", batch=batch, options={"time": time})
    plan = next(iter(pipelines.layout(m, None).notes["memory_plan"].values()))
    assert verify_plan(plan, m) == []
    doc = json.loads(json.dumps(write_layout(plan)))
    return doc, read_layout(doc)


@pytest.mark.parametrize("name", sorted(BRAINSTORM))
@pytest.mark.parametrize("time,batch", [(5, 3), (1, 1), (2, 4)])
def test_totals_equal_brainstorms_create_layout(name, time, batch):
    arch, want, context, elements = BRAINSTORM[name]
    doc, _ = layout_of(arch, time, batch)
    got = doc["netc"]["totals"]
    loss = PER_STEP_LOSS.get(name, 0)
    assert got["parameters"] == want["parameters"]
    assert got["internals"] == want["internals"]
    assert got["inputs_outputs"] == [want["inputs_outputs"][0], 0, want["inputs_outputs"][2] - loss]
    assert {k: got["context"][k] for k in context} == context
    for (t, b), n in zip([(0, 0), (1, 1), (5, 3)], elements):
        assert brainstorm_elements(got, t, b) == n - loss * t * b
    assert doc["netc"]["time"] == time and doc["netc"]["context"] == 1
    assert doc["netc"]["parameter_elements"] >= want["parameters"][0]


@pytest.mark.parametrize("name", sorted(BRAINSTORM))
def test_time_sized_arrays_are_brainstorms(name):
    """Every recurrent layer's output and internals are type 2 with Brainstorm's feature shape and one
    context row (the (T + 1)-th, after the T real ones); Brainstorm's internals, in its order."""
    arch = BRAINSTORM[name][0]
    doc, lay = layout_of(arch, 5, 3)
    meta = doc["netc"]
    for lname, spec in arch.items():
        t = spec["@type"]
        if t not in INTERNALS:
            continue
        node = doc["layout"]["layout"][lname]["layout"]
        out = node["outputs"]["layout"]["default"]
        assert out["slice"][0] == 2 and out["shape"] == [spec.get("size") or out["shape"][0]]
        held = meta["tensors"][meta["arrays"][f"{lname}.outputs.default"]]
        assert held["context"] == 1 and held["class"] == 2
        internals = node["internals"]["layout"]
        assert sorted(internals, key=lambda k: internals[k]["index"]) == INTERNALS[t]
        for k, a in internals.items():
            e = meta["tensors"][meta["arrays"][f"{lname}.internals.{k}"]]
            assert a["slice"][0] == 2 and a["shape"] == out["shape"] and e["context"] == 1
    # the inputs: time-sized, no context (Brainstorm's Input outputs have none)
    x = meta["tensors"][meta["arrays"]["Input_default.outputs.default"]]
    assert x["class"] == 2 and "context" not in x


def test_fan_in_is_brainstorms_hub():
    """L reads C's and R's outputs as one range, C first (Brainstorm's hub C.outputs ‖ R.outputs): zero-copy."""
    doc, lay = layout_of(STACKED_FAN_IN, 5, 3)
    c, r = lay.arrays["C.outputs.default"], lay.arrays["R.outputs.default"]
    sink = lay.arrays["L.inputs.default"]
    assert (c.type, r.type, sink.type) == (2, 2, 2)
    assert c.stop == r.start and (sink.start, sink.stop) == (c.start, r.stop)


@pytest.mark.parametrize("name", sorted(BRAINSTORM))
def test_context_rows_are_never_shared(name):
    """A time-sized array with context rows keeps its elements for itself (its last row carries the state into
    the next call; shared/spec/layout-format.md 7.3), also in a reuse layout."""
    doc, _ = layout_of(BRAINSTORM[name][0], 5, 3)
    tens = doc["netc"]["tensors"]
    assert doc["netc"]["reuse"] is True
    held = [(n, e) for n, e in tens.items() if e["class"] == 2 and e.get("context")]
    assert held
    for n, e in held:
        s = e["slice"]
        for m, f in tens.items():
            if m == n or f["slice"][0] != 2 or f.get("alias", [None, None])[1] == n or e.get("alias", [None, None])[1] == m:
                continue
            if "alias" in e and "alias" in f and e["alias"][1] == f["alias"][1]:
                continue       # two slices of one concatenation
            assert f["slice"][2] <= s[1] or s[2] <= f["slice"][1], (n, m)


ND = """network seq {
  input x: f32[5, 3, 3]
  R = Recurrent(x) { size: 3, activation: sigmoid }
  C = Clockwork(R) { size: 4 }
  L = Lstm(C) { size: 4 }
}
"""


def test_explain_layout_writes_them(tmp_path, capsys):
    """`netc explain --layout` on the .nd form of default_sizes: the file checks, its totals are Brainstorm's."""
    src, out = tmp_path / "seq.nd", tmp_path / "seq.layout.json"
    src.write_text(ND)
    assert main(["explain", str(src), "--layout", str(out), "--brief"]) == 0
    assert main(["check", str(out)]) == 0
    assert "a valid layout" in capsys.readouterr().out
    got = json.loads(out.read_text())["netc"]["totals"]
    _, want, context, elements = BRAINSTORM["default_sizes"]
    assert {k: got[k] for k in want} == want and {k: got["context"][k] for k in context} == context
    assert brainstorm_elements(got, 5, 3) == elements[2]


def test_feed_forward_layouts_have_no_time_class():
    m = load_text(json.dumps({k: v for k, v in LSTM_CLASSIFIER.items() if k != "L"} | {
        "Input": dict(LSTM_CLASSIFIER["Input"], **{"@outgoing_connections": {"default": ["F"], "targets": ["S.targets"]}})}),
        "ff.json", batch=3)
    plan = next(iter(pipelines.layout(m, None).notes["memory_plan"].values()))
    doc = write_layout(plan)
    assert doc["sizes"][2] == 0 and "time" not in doc["netc"]
    assert doc["netc"]["totals"]["inputs_outputs"][2] == 0


def test_a_reduction_over_time_is_batch_sized_in_the_layout():
    """examples/sequences.nd: a SequencePool's [B, H] is per sample (type 1), not a sequence (the plan failed
    verification, 'mean_h spans bytes [0, 48) of a 6-byte buffer'); per-step labels [T, B] with batch_axis 1
    are time-sized (type 2)."""
    from pathlib import Path

    from netc.frontend import load
    from netc.memory.graph import PlanGraph
    from netc.pipelines import Options
    from netc.memory.model import BATCH, TIME
    m = load(str(Path(__file__).resolve().parents[1] / "examples" / "sequences.nd"))
    pipelines.inference(m, Options())
    g = PlanGraph(m, m.networks()[0], "inference", time_sized=True)
    cls = {t.name: (t.cls, t.size) for t in g.tensors}
    assert cls["mean_h"] == (BATCH, 48) and cls["last_h"] == (BATCH, 48) and cls["both"] == (BATCH, 96)
    assert cls["h"] == (TIME, 48) and cls["tags"] == (TIME, 4) and cls["lengths"] == (BATCH, 4)
    assert main(["export", str(Path(__file__).resolve().parents[1] / "examples" / "sequences.nd"),
                 "--format", "layout", "-o", "/dev/null"]) == 0
