"""netc's Brainstorm hub layouts (`netc export --format hub-layout`) against Brainstorm's own `create_layout`
(issue 25).

tests/data/brainstorm_layouts.json was written by Brainstorm's code (IDSIA/brainstorm at the commit it records:
instantiate_layers_from_architecture, then create_layout; see its "generated_by") for 27 architectures: the nets
of tests/data/brainstorm_layers.json, the recurrent ones of tests/test_brainstorm_recurrent.py, the three of
shared/corpus/brainstorm and seven more (a hub whose sources need a permutation, Merge and Highway, ClockworkLstm
with BatchNorm, a recurrent output read twice, a net without parameters, the March-2015 fan-in fixture); and one
architecture Brainstorm refuses ("Failed to lay out buffers"). For each: netc writes the same tree (every layer's
seven categories, each array's index, shape template, hub, slice, context size, backward-only flag), the same
hubs in the same order (buffer type, context, size, sources in order, sinks) and the same layer order; the file
passes `netc check`; a layout that contradicts its architecture is a located error; netc's importer reads a
fan-in in the feature order of Brainstorm's hub, and computes what Brainstorm's own forward pass computed (the
data's "forward": two nets with fan-ins, run by Brainstorm's NumpyHandler at given parameters and inputs).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from netc.cli import main
from netc.frontend import load_text
from netc.frontend.brainstorm_structure import StructureError, hub_layout

DOC = json.loads((Path(__file__).parent / "data" / "brainstorm_layouts.json").read_text())
NETS = DOC["nets"]
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "brainstorm"   # ../shared beside the checkout
NOT_IMPORTED: dict = {}   # architectures netc cannot import (Highway and ClockworkLstm now do: tests/test_brainstorm_ops.py)


def first_difference(got, want, path="$"):
    """The first place two JSON values differ, as a readable line (None if equal)."""
    if isinstance(want, dict) and isinstance(got, dict):
        for k in list(want) + [k for k in got if k not in want]:
            if k not in got or k not in want:
                return f"{path}.{k}: {'missing in netc' if k not in got else 'only in netc'}"
            d = first_difference(got[k], want[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        for i, (a, b) in enumerate(zip(got, want)):
            d = first_difference(a, b, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if got == want else f"{path}: netc {got!r}, Brainstorm {want!r}"


def test_the_data_is_brainstorms():
    assert DOC["brainstorm_commit"] == "8f1fc886faf268b25085fa5c95bf106b1805d766"
    assert len(NETS) == 27 and "create_layout" in DOC["generated_by"]


@pytest.mark.parametrize("net", sorted(NETS))
def test_layout_equals_brainstorms(net, tmp_path, capsys):
    """`netc export --format hub-layout` writes Brainstorm's layout of the architecture, key for key."""
    want = NETS[net]
    src, out = tmp_path / f"{net}.json", tmp_path / f"{net}.hub.json"
    src.write_text(json.dumps(want["architecture"], indent=1))
    assert main(["export", str(src), "--format", "hub-layout", "-o", str(out)]) == 0
    got = json.loads(out.read_text())
    assert got["architecture"] == want["architecture"]
    for key in ("layer_order", "hubs", "layout"):
        diff = first_difference(got[key], want[key], f"$.{key}")
        assert diff is None, f"{net}: {diff}"
    capsys.readouterr()
    if net not in NOT_IMPORTED:     # the written file checks, against its own architecture too
        assert main(["check", str(out)]) == 0
        assert "a valid Brainstorm hub layout" in capsys.readouterr().out


@pytest.mark.parametrize("net", sorted(NETS))
def test_brainstorms_own_layouts_pass_the_check(net):
    """Brainstorm's layout, wrapped with its architecture and hub table as the corpus files are, checks: its
    tree and hubs are sound and equal what its architecture gives."""
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend.layout_files import check_layout_file
    want = NETS[net]
    text = json.dumps({"architecture": want["architecture"], "hubs": want["hubs"], "layout": want["layout"]}, indent=1)
    report, wrapped = check_layout_file(f"{net}.layout.json", text, DiagnosticEngine())
    assert wrapped and f"{len(want['hubs'])} hubs" in report


def _check(tmp_path, capsys, doc, name="bad.layout.json"):
    f = tmp_path / name
    f.write_text(json.dumps(doc, indent=1))
    rc = main(["check", str(f)])
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err
    return rc, err


def test_a_layout_contradicting_its_architecture_is_located(tmp_path, capsys):
    """A structurally sound layout whose architecture says otherwise: the first contradictions, each at its
    file:line:col with the JSON path."""
    good = json.loads((CORPUS / "simple_softmax_net.layout.json").read_text())
    doc = json.loads(json.dumps(good))
    doc["architecture"]["Hid"]["size"] = 3         # the architecture's Hid is wider than the layout's
    rc, err = _check(tmp_path, capsys, doc)
    assert rc == 1
    assert "bad.layout.json:" in err and '($.layout.Hid.outputs.default["@shape"])' in err
    assert "@shape ['T', 'B', 2] contradicts the architecture, whose layout (Brainstorm's create_layout) has " \
           "['T', 'B', 3]" in err
    assert "'Hid.parameters.W': @shape [2, 4]" in err

    # hubs 3 and 4 swapped everywhere: every slice still fits its hub, but it is not Brainstorm's hub order
    doc = json.loads(json.dumps(good))
    def swap(node):
        for v in node.values():
            if isinstance(v, dict):
                if v.get("@hub") in (3, 4):
                    v["@hub"] = 7 - v["@hub"]
                swap(v)
    swap(doc["layout"])
    doc["hubs"][3], doc["hubs"][4] = dict(doc["hubs"][4], hub=3), dict(doc["hubs"][3], hub=4)
    rc, err = _check(tmp_path, capsys, doc)
    assert rc == 1 and '($.layout.Hid.outputs.default["@hub"])' in err and "@hub 4 contradicts" in err
    assert "$.hubs[3].sources" in err

    # netc's scalar loss written in place of Brainstorm's per-step loss: refused, the layout must say (T, B, 1)
    doc = json.loads(json.dumps(good))
    doc["layout"]["Output"]["outputs"]["loss"]["@shape"] = [1]
    doc["hubs"][doc["layout"]["Output"]["outputs"]["loss"]["@hub"]]["btype"] = 0
    rc, err = _check(tmp_path, capsys, doc)
    assert rc == 1 and "'Output.outputs.loss': @shape [1] contradicts" in err

    # an array the architecture has no place for
    doc = json.loads(json.dumps(good))
    doc["layout"]["Hid"]["internals"]["Ha"] = dict(doc["layout"]["Hid"]["outputs"]["default"], **{"@index": 0})
    rc, err = _check(tmp_path, capsys, doc)
    assert rc == 1 and "'Hid.internals.Ha' is no array or view of Brainstorm's layout" in err


def test_an_architecture_brainstorm_cannot_lay_out_is_refused(tmp_path, capsys):
    """A -> {C, D}, B -> {C, E}, C -> {D, E}: no order of A, B, C gives C, D and E contiguous inputs. Brainstorm
    raises; netc's export and import say so at the layer."""
    ref = DOC["refused"]["impossible_hub"]
    assert "Failed to lay out buffers" in ref["error"]
    with pytest.raises(StructureError) as e:
        hub_layout(ref["architecture"])
    assert e.value.path == "$.A" and "Failed to lay out buffers" in e.value.msg
    src = tmp_path / "imp.json"
    src.write_text(json.dumps(ref["architecture"], indent=1))
    for argv in (["export", str(src), "--format", "hub-layout"], ["import", str(src)]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert "imp.json:18:7 ($.A): error: Brainstorm cannot lay out these buffers" in err and "Traceback" not in err


def test_hub_layout_needs_a_brainstorm_architecture(tmp_path, capsys):
    nd = tmp_path / "n.nd"
    nd.write_text("network n {\n  input x: f32[2, 3]\n  y = Relu(x)\n}\n")
    assert main(["export", str(nd), "--format", "hub-layout"]) == 1
    assert "not one (for netc's own memory plan, use --format layout)" in capsys.readouterr().err
    bad = json.loads(json.dumps(NETS["xor"]["architecture"]))
    bad["OutLayer"]["@outgoing_connections"] = {"default": ["BinomialCrossEntropy.targets"]}   # default unfed
    src = tmp_path / "x.json"
    src.write_text(json.dumps(bad, indent=1))
    assert main(["export", str(src), "--format", "hub-layout"]) == 1
    err = capsys.readouterr().err
    assert "x.json:" in err and "BinomialCrossEntropy layer 'BinomialCrossEntropy' takes the inputs" in err


@pytest.mark.parametrize("net", sorted(n for n in NETS if n not in NOT_IMPORTED))
def test_imported_fan_in_reads_brainstorms_feature_order(net):
    """Every concatenation netc's importer makes for a fan-in lists its sources in the order of Brainstorm's hub
    (from Brainstorm's slices in the data, not from netc's code): the feature order a Brainstorm parameter file's
    weights expect. permuted_hub's Y reads M before A (alphabetical order would give A, M)."""
    want = NETS[net]
    lay = want["layout"]
    m = load_text(json.dumps(want["architecture"]), f"{net}.json", batch=2)
    concats = {op.attrs["name"]: op.attrs["parents"] for op in m.walk() if op.name == "netc.concat"
               and op.attrs.get("name", "").endswith(".concat")}
    for name, parents in concats.items():
        lname, inp, _ = name.rsplit(".", 2)
        sink = lay[lname]["inputs"][inp]
        hub = [s for h in want["hubs"] for s in h["sources"] if h["hub"] == sink["@hub"]]
        inside = [p for p in hub if sink["@slice"][0] <= lay[p.split(".")[0]]["outputs"][p.split(".")[2]]["@slice"][0]
                  < sink["@slice"][1]]
        refs = [p.split(".outputs.")[0] if p.endswith(".default") else p.replace(".outputs.", ".") for p in inside]
        assert parents == refs, (net, name)
    if net == "permuted_hub":
        assert concats["Y.default.concat"] == ["M", "A"] and concats["X.default.concat"] == ["A", "Z"]


def test_softmax_ce_loss_is_per_step_in_the_layout_and_scalar_in_netc():
    """The one known difference, decided Brainstorm's way in the layout: SoftmaxCE's loss is a (T, B, 1) array of
    a time-sized hub there, netc's SoftmaxLoss one scalar (the batch mean a Loss layer makes of it)."""
    want = NETS["lstm_classifier"]
    loss = hub_layout(want["architecture"])["layout"]["S"]["outputs"]["loss"]
    assert loss["@shape"] == ["T", "B", 1] == want["layout"]["S"]["outputs"]["loss"]["@shape"]
    m = load_text(json.dumps(want["architecture"]), "c.json", batch=2, options={"time": 3})
    from netc.pipelines import inference
    inference(m)
    op = next(o for o in m.walk() if o.attrs.get("name") == "S.loss")
    assert list(op.results[0].type.shape) == []


BAD = [   # (net, mutation, the JSON path and words of the located error)
    ("xor", lambda a: a["Input"]["out_shapes"].__setitem__("default", ["T", "B", 0]), "$.Input.out_shapes.default",
     "must be a shape template"),
    ("xor", lambda a: a["FullyConnected"].__setitem__("size", "two"), "$.FullyConnected.size",
     "size must be a positive integer or a list of them"),
    ("xor", lambda a: a["FullyConnected"].__setitem__("@outgoing_connections", {"default": [3]}),
     '$.FullyConnected["@outgoing_connections"].default', "must be a list of 'Layer' or 'Layer.input'"),
    ("xor", lambda a: a["FullyConnected"].__setitem__("@outgoing_connections", {"nope": ["OutLayer"]}),
     '$.FullyConnected["@outgoing_connections"]', "'FullyConnected' has no output 'nope'"),
    ("xor", lambda a: a.__setitem__("a.b", a.pop("OutLayer")), '$["a.b"]', "no Brainstorm layer name"),
    ("cifar10_cnn", lambda a: a["Conv1"].__setitem__("kernel_size", 3), "$.Conv1.kernel_size",
     "kernel_size must be a list of 2"),
    ("cifar10_cnn", lambda a: a["Input"]["out_shapes"].__setitem__("default", ["T", "B", 32, 3]), "$.Conv1",
     "needs an (H, W, C) input per step, got [32, 3]"),
    ("lstm_classifier", lambda a: a["L"].__setitem__("size", 0), "$.L.size", "size must be a positive integer"),
    ("merge_highway", lambda a: a["H"].__setitem__("size", 4), "$.Hw", "its inputs H, T and x must have one shape"),
]


@pytest.mark.parametrize("case", range(len(BAD)))
def test_bad_architectures_are_located(case, tmp_path, capsys):
    net, mutate, path, words = BAD[case]
    arch = json.loads(json.dumps(NETS[net]["architecture"]))
    mutate(arch)
    src = tmp_path / "bad.json"
    src.write_text(json.dumps(arch, indent=1))
    assert main(["export", str(src), "--format", "hub-layout"]) == 1
    err = capsys.readouterr().err
    assert f"({path}): error:" in err and words in err and "bad.json:" in err and "Traceback" not in err


def test_hub_checker_context_rules():
    """An input reading a recurrent output has no context of its own inside a hub with context 1 (Brainstorm
    writes it so, and it checks); an array with more context than its hub, or a hub whose context no array has,
    does not."""
    from netc.frontend.hub_layout import read_hub_layout
    from netc.frontend.layout import LayoutError
    net = NETS["lstm_classifier"]
    doc = {"hubs": net["hubs"], "layout": json.loads(json.dumps(net["layout"]))}
    sink = doc["layout"]["F"]["inputs"]["default"]
    hub = net["hubs"][sink["@hub"]]
    assert hub["context_size"] == 1 and "@context_size" not in sink
    read_hub_layout(doc)
    sink["@context_size"] = 2
    with pytest.raises(LayoutError) as e:
        read_hub_layout(doc)
    assert "'F.inputs.default': @context_size 2 exceeds hub" in str(e.value.problems)
    del sink["@context_size"]
    doc["hubs"] = json.loads(json.dumps(net["hubs"]))
    doc["hubs"][sink["@hub"]]["context_size"] = 3
    with pytest.raises(LayoutError) as e:
        read_hub_layout(doc)
    assert f"hub {sink['@hub']}'s context_size 3 is no array's @context_size" in str(e.value.problems)


@pytest.mark.parametrize("name", ["simple_softmax_net", "docs_internals_architecture", "mnist_pi"])
def test_elements_equal_brainstorms_buffer_sizes(name):
    """The hubs netc lays out take, at each (T, B), the elements Brainstorm's buffer manager allocated for the
    corpus file's architecture (its buffer_sizes, written by Brainstorm): the numbers docs/brainstorm.md sets
    beside netc's plan."""
    from netc.frontend.hub_layout import HubLayout
    corpus = json.loads((CORPUS / f"{name}.layout.json").read_text())
    hubs = hub_layout(corpus["architecture"])["hubs"]
    for key, sizes in corpus["buffer_sizes"].items():
        t, b = (int(v.split("=")[1]) for v in key.split(","))
        assert HubLayout().total(t, b, hubs) == sizes["total"], key


@pytest.mark.parametrize("net", sorted(DOC["forward"]))
def test_fan_in_computes_brainstorms_forward_pass(net):
    """Brainstorm's own forward pass (its NumpyHandler, float64, written into the data) at given parameters: netc's
    reference run of the imported net, with the parameters read from Brainstorm's flat vector through the layout,
    gives every layer's output. In permuted_hub, Y reads M ‖ A: with the alphabetical A ‖ M of before, Y and the
    softmax after it differ."""
    import torch
    from netc.pipelines import inference
    from netc.runtime.reference import run_reference
    fw, arch, lay = DOC["forward"][net], NETS[net]["architecture"], NETS[net]["layout"]
    flat = torch.tensor(fw["parameters"], dtype=torch.float64)
    params = {}
    for lname, spec in arch.items():
        if spec["@type"] != "FullyConnected":
            continue
        for bs, mine in (("W", "weight"), ("bias", "bias")):
            node = lay[lname]["parameters"][bs]
            assert node["@hub"] == lay["parameters"]["@hub"]
            v = flat[node["@slice"][0]:node["@slice"][1]].reshape(node["@shape"])
            params[f"{lname}.{mine}"] = v.T.contiguous() if bs == "W" else v    # W (out, in) is netc's [in, out]
    m = load_text(json.dumps(arch), f"{net}.json", batch=fw["B"])
    inference(m)
    feed = {f"Input.{k}": torch.tensor(v, dtype=torch.float64)[0] for k, v in fw["inputs"].items()}
    got = run_reference(m, feed, params, intermediates=True)
    checked = 0
    for path, want in fw["outputs"].items():
        lname, out = path.split(".")
        if arch[lname]["@type"] in ("Input", "Loss") or out == "loss":
            continue           # losses: netc's is the batch mean (tests/test_brainstorm_layers.py)
        name = lname if out == "default" else path
        torch.testing.assert_close(got[name], torch.tensor(want, dtype=torch.float64)[0], rtol=1e-9, atol=1e-12,
                                   msg=lambda m, p=path: f"{net} {p}: {m}")
        checked += 1
    assert checked >= 4
