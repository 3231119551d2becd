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
from netc import pipelines
from netc.pipelines import Options

SHARED = Path(__file__).resolve().parents[2] / "shared"
PALEO = SHARED / "corpus" / "paleo"
GENERATED = SHARED / "corpus" / "paleo-generated"
REFERENCE = SHARED / "reference" / "paleo"

pytestmark = pytest.mark.skipif(not PALEO.is_dir(), reason=f"the shared corpus is not at {SHARED}")


def explain(path):
    m = load(str(path))
    pipelines.inference(m)
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
        pipelines.inference(m, Options(), DiagnosticEngine())
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


# -- what Paleo silently gets wrong: netc follows its numbers and says so (spec §5.5, §6.9, §6.10) ----------

DATA = Path(__file__).resolve().parent / "data"


def _check(path, capsys):
    """Run the default pipeline on `path`: (explain rows by name, totals, warnings by message)."""
    diag = DiagnosticEngine()
    m = load(str(path), diag)
    pipelines.inference(m, Options(), diag)
    assert not diag.has_errors(), [d.message for d in diag.diagnostics]
    doc = explain_json(m)
    warnings = [d for d in diag.diagnostics if d.severity == "warning"]
    return {r["name"]: r for r in doc["layers"]}, doc["totals"], warnings


def _where(d):
    return d.loc.line, d.loc.col


def test_walk_replays_paleo_on_the_spec_minimal_example():
    from netc.frontend.paleo import paleo_expand, paleo_walk
    layers = {"data": {"type": "Input", "parents": []}, "a": {"parents": ["data"]}, "b": {"parents": ["data"]},
              "c": {"parents": ["a", "b"]}, "d": {"parents": ["c", "a"]}, "e": {"parents": ["d"]}}
    w = paleo_walk(paleo_expand(layers))
    assert w.nested == ["data", (["a"], ["b"]), "c"]  # §5.5: "data, (a | b), c", d and e dropped
    assert w.levels == {"data": 0, "a": 1, "b": 1, "c": 0} and w.failure is None
    # a parent listed twice is not always dropped: inside a branch the joint is released
    layers = {"data": {"parents": []}, "a": {"parents": ["data"]}, "b": {"parents": ["data"]},
              "x": {"parents": ["a", "a"]}, "y": {"parents": ["x"]}}
    assert paleo_walk(paleo_expand(layers)).order == ["data", "a", "b", "x", "y"]
    layers = {"data": {"parents": []}, "a": {"parents": ["data"]}, "x": {"parents": ["a", "a"]}}
    assert paleo_walk(paleo_expand(layers)).order == ["data", "a"]
    # a joint released inside a branch and met again in the caller's frontier is walked twice
    layers = {"data": {"parents": []}, "a": {"parents": ["data"]}, "j": {"parents": ["data", "a"]},
              "b": {"parents": ["a"]}}
    w = paleo_walk(paleo_expand(layers))
    assert w.nested == ["data", (["a", (["b"],), "j"], ["j"])] and w.failure is None
    layers["k"] = {"parents": ["j"]}  # ... passing its out-edges twice: Paleo's assertion fails
    assert paleo_walk(paleo_expand(layers)).failure == (
        "j", "its graph walk emits 'j' a second time and passes its edge to 'k' again (an assertion in the walk "
             "fails)")
    # Paleo's expansion names: ModelParallel copies, @self/@all, block parents, the endpoint shortcut
    layers = {"data": {"parents": []},
              "mp": {"type": "ModelParallel", "splits": 2, "parents": ["data"], "endpoint": "cat",
                     "layers": {"fc": {"parents": []}, "cat": {"parents": ["fc@all"]}}},
              "out": {"parents": ["mp/cat@all"]},
              "blk": {"type": "Block", "parents": ["out"], "endpoint": "y",
                      "layers": {"x": {"parents": []}, "y": {"parents": ["x"]}}},
              "end": {"parents": ["blk"]}}
    g = {x.name: x.parents for x in paleo_expand(layers)}
    assert g == {"data": [], "mp/fc@0": ["data"], "mp/cat@0": ["mp/fc@0", "mp/fc@1"], "mp/fc@1": ["data"],
                 "mp/cat@1": ["mp/fc@0", "mp/fc@1"], "out": ["mp/cat@0", "mp/cat@1"], "blk/x": ["out"],
                 "blk/y": ["blk/x"], "end": ["blk/y"]}
    layers["end"]["parents"] = ["mp"]  # a ModelParallel endpoint names no layer ("mp/cat" has splits): Paleo fails
    assert paleo_expand(layers) is None
    assert paleo_expand({"data": {"parents": []}, "x": {"parents": ["nope"]}}) is None  # Paleo fails


@pytest.mark.parametrize("path", sorted(PALEO.glob("*.json")) + sorted(GENERATED.glob("*.json")),
                         ids=lambda p: p.stem)
def test_walk_emits_every_corpus_layer_and_nothing_is_warned(path, capsys):
    from netc.frontend.paleo import paleo_expand, paleo_walk
    rows, _, warnings = _check(path, capsys)
    w = paleo_walk(paleo_expand(json.loads(path.read_text())["layers"]))
    assert w.failure is None and sorted(w.order) == sorted(rows)  # Paleo emits each layer netc builds, once
    ref = REFERENCE / path.name
    if ref.exists():  # chains: Paleo's order is the reference's
        assert w.order == [r["name"] for r in json.loads(ref.read_text())["layers"]]
    assert all("Paleo compatibility" not in d.message and "real tensor shape" not in d.message for d in warnings)


def test_walk_order_is_topological_and_keeps_single_parent_children():
    from hypothesis import given, settings, strategies as st
    from netc.frontend.paleo import paleo_expand, paleo_walk

    @settings(max_examples=150, deadline=None)
    @given(st.lists(st.lists(st.integers(0, 30), max_size=3), min_size=1, max_size=12))
    def check(parent_picks):
        layers = {"data": {"parents": []}}
        names = ["data"]
        for i, picks in enumerate(parent_picks):
            layers[f"l{i}"] = {"parents": [names[p % len(names)] for p in picks]}
            names.append(f"l{i}")
        graph = paleo_expand(layers)
        w = paleo_walk(graph)
        assert w.order[0] == "data"
        if w.failure is not None:
            return
        pos = {}
        for i, n in enumerate(w.order):
            pos.setdefault(n, i)
        for g in graph:
            if g.name in pos:  # emitted after all its parents
                assert all(p in pos and pos[p] < pos[g.name] for p in g.parents)
            elif len(g.parents) == 1 and g.parents[0] in pos:
                raise AssertionError(f"{g.name}: a single-parent child of an emitted layer is always emitted")
    check()


def test_layers_the_walk_drops_are_built_and_warned_about(capsys):
    rows, totals, warnings = _check(DATA / "paleo_walk_dropped.json", capsys)
    assert list(rows) == ["data", "a", "b", "c", "d", "pool", "twice"]  # netc builds them all (spec §5.5)
    assert totals["layers"] == 7 and rows["twice"]["shape"] == [2, 4, 4, 8]
    (w,) = warnings
    assert _where(w) == (10, 10) and w.loc.path == "$.layers.d"
    assert w.message == ("Paleo compatibility: Paleo's graph walk omits layer 'd': its in-edges are passed at "
                         "different nesting levels of the walk (parents 'c' at level 0, 'a' at level 1), so 'walk "
                         "until joints' never comes back to it; netc builds it, but Paleo's totals do not count it")
    assert [n.message for n in w.notes] == [
        "Paleo also omits the 2 layers that depend on it (netc builds them): pool, twice"]


def test_unreachable_layers_are_left_out_and_dropped_joints_warned(capsys):
    rows, totals, warnings = _check(DATA / "paleo_unreachable.json", capsys)
    # not connected to 'data': left out, as Paleo does; connected but never emitted: built, warned
    assert list(rows) == ["data", "conv", "extra", "join", "sum", "fc"]
    assert totals["params"] == 3 * 3 * 3 * 4 + 4 + 256 * 10 + 10
    got = [(d.loc.path, _where(d), d.message, [n.message for n in d.notes]) for d in warnings]
    assert got == [
        ("$.layers.labels", (7, 15), "Paleo compatibility: layer 'labels' is not connected to 'data', so Paleo's "
         "graph walk never reaches it and leaves it out; netc leaves it out too",
         ["with it, both leave out the 1 layer that depends on it: onehot"]),
        ("$.layers.stray", (9, 14), "Paleo compatibility: layer 'stray' is not connected to 'data', so Paleo's "
         "graph walk never reaches it and leaves it out; netc leaves it out too", []),
        ("$.layers.extra", (10, 14), "Paleo compatibility: Paleo's graph walk omits layer 'extra': it is not "
         "reachable from 'data'; netc builds it, but Paleo's totals do not count it",
         ["Paleo also omits the 1 layer that depends on it (netc builds it): join"]),
        ("$.layers.sum", (12, 12), "Paleo compatibility: Paleo's graph walk omits layer 'sum': it lists parent "
         "'conv' twice, which makes it a joint of the walk, and the walk never releases it; netc builds it, but "
         "Paleo's totals do not count it", ["Paleo also omits the 1 layer that depends on it (netc builds it): fc"]),
    ]


def test_dropped_block_sublayers_are_located_and_islands_removed(tmp_path, capsys):
    f = tmp_path / "blocks.json"
    f.write_text('''{"layers": {
  "data": {"parents": [], "type": "Input", "tensor": [1, 4, 4, 2]},
  "B": {"type": "Block", "parents": ["data"], "endpoint": "s", "layers": {
    "p": {"parents": [], "type": "Dropout", "dropout_keep_prob": 0.5},
    "q": {"parents": [], "type": "Dropout", "dropout_keep_prob": 0.5},
    "r": {"parents": ["p", "q"], "type": "Elementwise"},
    "s": {"parents": ["r", "p"], "type": "Elementwise"}}},
  "island": {"type": "Block", "parents": [], "layers": {
    "x": {"parents": [], "type": "Dropout", "dropout_keep_prob": 0.5}}},
  "after": {"parents": ["B"], "type": "Dropout", "dropout_keep_prob": 0.5}
}}''')
    rows, _, warnings = _check(f, capsys)
    assert list(rows) == ["data", "B/p", "B/q", "B/r", "B/s", "after"]
    assert [(d.loc.path, _where(d)) for d in warnings] == [("$.layers.B.layers.s", (7, 10)),
                                                           ("$.layers.island.layers.x", (9, 10))]
    assert "omits layer 'B/s'" in warnings[0].message and warnings[0].notes[0].message.endswith(": after")
    assert "layer 'island/x' is not connected to 'data'" in warnings[1].message
    assert main(["import", str(f), "-o", str(tmp_path / "b.nd")]) == 0
    assert "island" not in (tmp_path / "b.nd").read_text()


def test_layers_paleo_walks_twice_are_warned_about(tmp_path, capsys):
    f = tmp_path / "twice.json"
    text = '''{"layers": {
  "data": {"parents": [], "type": "Input", "tensor": [1, 4, 4, 2]},
  "a": {"parents": ["data"], "type": "Convolution", "filter": [1, 1, 2, 2], "strides": [1, 1, 1, 1],
        "padding": "SAME"},
  "skip": {"parents": ["data", "a"], "type": "Concatenate", "dim": 3},
  "b": {"parents": ["a"], "type": "Dropout", "dropout_keep_prob": 0.5}%s
}}'''
    f.write_text(text % "")
    rows, _, (w,) = _check(f, capsys)
    assert list(rows) == ["data", "a", "skip", "b"] and w.loc.path == "$.layers.skip" and _where(w) == (5, 11)
    assert w.message == ("Paleo compatibility: Paleo's graph walk emits layer 'skip' 2 times, so Paleo's totals "
                         "count it 2 times; netc counts it once")
    f.write_text(text % ',\n  "k": {"parents": ["skip"], "type": "Dropout", "dropout_keep_prob": 0.5}')
    rows, _, (w,) = _check(f, capsys)
    assert list(rows) == ["data", "a", "skip", "b", "k"] and w.loc.path == "$.layers.skip"
    assert w.message == ("Paleo compatibility: Paleo fails on this network: its graph walk emits 'skip' a second "
                         "time and passes its edge to 'k' again (an assertion in the walk fails); netc builds it")


def test_walks_too_deep_for_paleos_recursion_are_warned_about(tmp_path, capsys):
    from netc.frontend.paleo import paleo_expand, paleo_walk
    layers = {"data": {"parents": [], "type": "Input", "tensor": [1, 4]}}
    for i in range(1000):  # one recursive call per chain step in Paleo
        layers[f"d{i}"] = {"parents": [f"d{i - 1}" if i else "data"], "type": "Dropout", "dropout_keep_prob": 0.5}
    assert paleo_walk(paleo_expand(layers)).depth == 1002  # 1001 layers, and the call that finds no frontier
    f = tmp_path / "long.json"
    f.write_text(json.dumps({"layers": layers}))
    rows, _, (w,) = _check(f, capsys)
    assert len(rows) == 1001 and w.loc.path == "$.layers"
    assert w.message.startswith("Paleo compatibility: Paleo's graph walk recurses 1002 calls deep on this network")
    for i in range(960, 1000):
        del layers[f"d{i}"]
    f.write_text(json.dumps({"layers": layers}))
    assert _check(f, capsys)[2] == []  # 962 calls: within the limit, less ~20 frames of Paleo's command line


def test_paleo_unchecked_reshape_and_softmax_follow_paleo_and_warn(capsys):
    rows, totals, warnings = _check(DATA / "paleo_unchecked.json", capsys)
    # Paleo's numbers (§6.9, §6.10), and what follows from them downstream
    assert rows["flat"]["shape"] == [2, 100]
    assert rows["fc"]["params"] == 100 * 10 + 10 and rows["fc"]["flops_fwd"] == 2 * 2 * 100 * 10
    assert rows["prob"]["shape"] == [2, 7]
    assert rows["fc2"]["params"] == 7 * 5 + 5 and rows["fc2"]["flops_fwd"] == 2 * 2 * 7 * 5
    assert rows["spatial"]["shape"] == [2, 6]  # [N, last dimension], not [N, 4*4*6]
    assert rows["fc3"]["params"] == 6 * 4 + 4
    assert totals["params"] == 1010 + 40 + 168 + 28
    assert [(d.loc.path, _where(d)) for d in warnings] == [
        ("$.layers.flat", (5, 13)), ("$.layers.prob", (7, 13)), ("$.layers.spatial", (11, 16))]
    tail = ", so it is not a real tensor shape; netc counts with it (and so do the layers after it) but will not " \
           "run this layer"
    assert warnings[0].message == ("in Reshape 'flat': Paleo's Reshape gives [2, 100] without checking it against "
                                   "the input: the input [2, 8, 8, 3] has 384 elements, [2, 100] has 200" + tail)
    assert warnings[1].message == ("in Softmax 'prob': Paleo's Softmax gives [2, 7] ([N, num_classes]) without "
                                   "checking it against the input [2, 10], which has 10 features" + tail)
    assert warnings[2].message == ("in Softmax 'spatial': Paleo's Softmax gives [2, 6] ([N, last dimension]) "
                                   "without checking it against the input [2, 4, 4, 6], which has 96 features" + tail)


def test_layers_with_paleo_only_shapes_refuse_to_run(tmp_path, capsys, monkeypatch):
    f = str(DATA / "paleo_unchecked.json")
    assert main(["run", f, "--reference"]) == 1
    err = capsys.readouterr().err
    assert ("paleo_unchecked.json:5:13 ($.layers.flat): error: cannot run Reshape 'flat': Paleo's Reshape gives "
            "[2, 100] without checking it against the input") in err
    assert "Traceback" not in err
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # (compile drops it; restored after the test)
    assert main(["compile", f, "-o", str(tmp_path / "net.so")]) == 1
    err = capsys.readouterr().err
    assert "paleo_unchecked.json:5:13 ($.layers.flat): error: cannot run Reshape 'flat'" in err
    assert not (tmp_path / "net.so").exists()


def test_paleo_shapes_that_are_real_run_without_warnings(capsys):
    rows, _, warnings = _check(DATA / "paleo_checked_ok.json", capsys)
    assert not warnings
    assert rows["back"]["shape"] == [2, 1, 1, 10] and rows["prob"]["shape"] == [2, 10]
    assert main(["run", str(DATA / "paleo_checked_ok.json"), "--reference"]) == 0
    assert capsys.readouterr().out.startswith("prob  [2, 10]")


def test_paleo_unchecked_round_trips_and_hand_written_nd_is_checked(tmp_path, capsys):
    src = DATA / "paleo_unchecked.json"
    nd = tmp_path / "paleo_unchecked.nd"
    assert main(["import", str(src), "-o", str(nd)]) == 0
    text = nd.read_text()
    assert "flat = Reshape(data) { output_shape: [-1, 100], paleo_unchecked: true }" in text
    assert "prob = Softmax(fc) { num_classes: 7, paleo_unchecked: true }" in text
    capsys.readouterr()
    # the .nd gives the same numbers and the same warnings, at its own lines
    assert explain(nd) == explain(src)
    assert main(["check", str(nd)]) == 0
    err = capsys.readouterr().err
    assert "paleo_unchecked.nd:6:3: warning: in Reshape 'flat': Paleo's Reshape gives [2, 100]" in err
    assert err.count("not a real tensor shape") == 3
    # back to Paleo: no netc-only key; importing that again gives the same IR
    out = tmp_path / "paleo_unchecked.json"
    assert main(["export", str(nd), "--format", "paleo", "-o", str(out)]) == 0
    assert "paleo_unchecked" not in out.read_text()
    assert explain(out) == explain(src)
    # written by hand without the attribute, the same layers are errors, as before
    bare = tmp_path / "bare.nd"
    bare.write_text(text.replace(", paleo_unchecked: true", "").replace(" { paleo_unchecked: true }", ""))
    capsys.readouterr()
    assert main(["check", str(bare)]) == 1
    err = capsys.readouterr().err
    assert "bare.nd:6:26: error: in Reshape 'flat': cannot reshape [2, 8, 8, 3] (384 elements) to [-1, 100]" in err
    assert err.count("error:") == 1  # (netc's own Softmax of [2, 4, 4, 6] is [2, 96]: a real shape)
    assert "not a real tensor shape" not in err


@pytest.mark.parametrize("snippet,message,path", [
    ('"r": {"parents": ["conv"], "type": "Reshape", "output_shape": [3, -1, 4]}',
     "Paleo's Reshape rule gives [3, -1, 4] for output_shape [3, -1, 4] on [2, 8, 8, 4] (it resolves only a "
     "leading or else a trailing -1): not a shape netc can count with", "$.layers.r.output_shape"),
    ('"r": {"parents": ["conv"], "type": "Reshape", "output_shape": [0, -1]}',
     "Paleo's Reshape divides by output_shape[0], which is 0 in [0, -1]", "$.layers.r.output_shape"),
    ('"s": {"parents": ["conv"], "type": "Softmax", "num_classes": 0}',
     "\"num_classes\" of 's' must be a positive integer", "$.layers.s.num_classes"),
])
def test_paleo_numbers_netc_cannot_count_with_are_errors(snippet, message, path, capsys):
    diags = _err(NET % snippet, capsys)
    errs = [d for d in diags if d.severity == "error"]
    assert errs and message in errs[0].message, [d.message for d in diags]
    assert errs[0].loc.path == path and errs[0].loc.line == 6
