"""The bundled examples (examples/*.nd) and the language reference (docs/language.md).

* every example passes `netc check` without a diagnostic (in every phase it uses);
* AlexNet v2, VGG-16 and NiN reproduce Paleo's own per-layer numbers (shared/reference/paleo):
  names, parents, shapes, parameters, forward FLOPs exactly, backward FLOPs to rel 1e-9;
* the Paleo transcriptions carry exactly the corpus files' layer types and attributes;
* Inception v3 and the 4-GPU model-parallel AlexNet, for which no per-layer reference exists,
  are compared with a small independent model of Paleo's rules (paleo-format.md §4, §6-§8),
  which is itself first checked against the three reference files; plus Paleo's totals;
* the SINGA-style CIFAR-10 net selects the right layers and batch sizes per phase and matches
  the SINGA oracle's shapes (shared/reference/singa);
* the GAN shares its discriminator's parameters by name (stored and counted once, shapes agree);
* the Brainstorm fixture carries Brainstorm's layout verbatim and agrees with it;
* every ```nd snippet of docs/language.md passes `netc check`; the error example prints what the
  page says; the layer-type table lists every registered op.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from netc.cli import main
from netc.explain import explain_json
from netc.frontend import load
from netc.ir.core import STRUCTURAL_OPS
from netc.ops import all_ops, lookup
from netc import pipelines
from netc.pipelines import Options

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DOC = ROOT / "docs" / "language.md"
SHARED = Path(__file__).resolve().parents[2] / "shared"
CORPUS = SHARED / "corpus"
REFERENCE = SHARED / "reference"

needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared data not found at {SHARED}")


# -- helpers ---------------------------------------------------------------------------------

def compile_module(path, phase="train"):
    module = load(str(path))
    pipelines.inference(module, Options(phase=phase))
    return module


def explain(path, phase="train") -> dict:
    return explain_json(compile_module(path, phase))


def rows_by_name(report: dict) -> dict:
    rows = {r["name"]: r for r in report["layers"]}
    assert len(rows) == len(report["layers"]), "duplicate layer names in the report"
    return rows


def cli(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def load_json(path: Path):
    with open(path) as f:
        return json.load(f)


def close(a, b) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)


# -- every example checks --------------------------------------------------------------------

ALL_EXAMPLES = sorted(p.name for p in EXAMPLES.glob("*.nd"))


def test_examples_present():
    assert set(ALL_EXAMPLES) >= {
        "lenet.nd", "alexnet.nd", "vgg16.nd", "nin.nd", "inception_v3.nd", "alexnet_4gpu.nd",
        "gan.nd", "cifar10_phases.nd", "brainstorm_fixture.nd"}


@pytest.mark.parametrize("name", ALL_EXAMPLES)
@pytest.mark.parametrize("phase", ["train", "test"])
def test_example_checks_cleanly(name, phase, capsys):
    rc, out, err = cli(capsys, "check", EXAMPLES / name, "--phase", phase)
    assert rc == 0, err
    assert out == "" and err == "", f"diagnostics for {name}:\n{err}"


@pytest.mark.parametrize("name", ALL_EXAMPLES)
def test_example_has_a_header_comment(name):
    first = (EXAMPLES / name).read_text().lstrip().splitlines()[0]
    assert first.startswith(("#", "//")), f"{name} should start with a comment saying what it is"


@pytest.mark.parametrize("name", ["alexnet.nd", "lenet.nd"])
def test_explain_brief_and_json_run(name, capsys):
    rc, out, err = cli(capsys, "explain", EXAMPLES / name, "--brief")
    assert rc == 0 and "total:" in out, err
    rc, out, err = cli(capsys, "explain", EXAMPLES / name, "--format", "json")
    assert rc == 0, err
    assert json.loads(out)["layers"]


def test_lenet():
    rep = explain(EXAMPLES / "lenet.nd")
    rows = rows_by_name(rep)
    assert rows["data"]["shape"] == [64, 28, 28, 1]
    assert rows["conv1"]["shape"] == [64, 24, 24, 20]
    assert rows["pool2"]["shape"] == [64, 4, 4, 50]
    assert rows["ip1"]["shape"] == [64, 500]
    assert rows["prob"]["shape"] == [64, 10]
    assert rep["totals"]["params"] == 431_080  # Caffe's LeNet: 520 + 25,050 + 400,500 + 5,010


# -- an independent model of Paleo's rules (paleo-format.md §4, §6-§8) -----------------------

def paleo_expand(layers: dict) -> dict:
    """Paleo's Block/ModelParallel expansion: {full name: (spec, resolved parents)}."""
    splits_of, endpoint_of, out = {}, {}, {}
    for b, spec in layers.items():
        if spec["type"] == "ModelParallel":
            for sub in spec["layers"]:
                splits_of[f"{b}/{sub}"] = spec.get("splits", 1)

    def ep(x):
        return endpoint_of.get(x, x)

    def resolve(names, s=None):
        res = []
        for p in names:
            if "@all" in p:
                x = p.replace("@all", "")
                res += [f"{ep(x)}@{i}" for i in range(splits_of[x])]
            elif "@self" in p:
                x = p.replace("@self", "")
                assert x in splits_of and s is not None
                res.append(f"{ep(x)}@{s}")
            else:
                res.append(ep(p))
        return res

    for name, spec in layers.items():
        kind = spec["type"]
        if kind not in ("Block", "ModelParallel"):
            assert name not in out
            out[name] = (spec, resolve(spec["parents"]))
            continue
        block_parents = resolve(spec["parents"])
        n = spec.get("splits", 1) if kind == "ModelParallel" else 1
        for s in range(n):
            for sub_name, sub in spec["layers"].items():
                full = f"{name}/{sub_name}" + (f"@{s}" if kind == "ModelParallel" else "")
                sub = dict(sub)
                if kind == "ModelParallel":
                    sub["splits"] = n
                parents = (resolve([f"{name}/{q}" for q in sub["parents"]], s) if sub["parents"]
                           else list(block_parents))
                assert full not in out
                out[full] = (sub, parents)
        if "endpoint" in spec:
            endpoint_of[name] = f"{name}/{spec['endpoint']}"
    return out


def _size(h, k, s, padding, axis):
    if padding == "VALID":
        return -(-(h - k + 1) // s)
    if padding == "SAME":
        return -(-h // s)
    return (h + 2 * padding[axis] - k) // s + 1


def paleo_layer(spec, ins):
    """(output shape, parameters, forward FLOPs) of one layer, Paleo's GEMM path."""
    t = spec["type"]
    if t == "Input":
        return list(spec["tensor"]), 0, 0
    x = ins[0] if len(ins) == 1 else ins
    if t == "Convolution":
        n, h, w, c = x
        kh, kw, ci, co = spec["filter"]
        ci = c if ci == -1 else ci
        co = co // spec["splits"] if spec.get("splits") else co
        assert ci == c
        oh = _size(h, kh, spec["strides"][1], spec["padding"], 0)
        ow = _size(w, kw, spec["strides"][2], spec["padding"], 1)
        return [n, oh, ow, co], kh * kw * ci * co + co, 2 * kh * kw * ci * oh * ow * co * n
    if t in ("Pooling", "AvgPool"):
        n, h, w, c = x
        kh, kw = spec["ksize"][1], spec["ksize"][2]
        oh = _size(h, kh, spec["strides"][1], spec["padding"], 0)
        ow = _size(w, kw, spec["strides"][2], spec["padding"], 1)
        return [n, oh, ow, c], 0, 2 * kh * kw * c * oh * ow * n
    if t == "Dropout":
        return list(x), 0, math.prod(x)
    if t == "Concatenate":
        d = spec["dim"]
        out = list(x[0])
        out[d] = sum(s[d] for s in x)
        return out, 0, 0
    if t == "Softmax":
        return [x[0], spec.get("num_classes") or x[-1]], 0, 0
    raise AssertionError(f"the test's Paleo model does not know {t}")


def paleo_model(corpus_file: Path) -> dict:
    """{name: {type, parents, shape, params, flops_fwd}} for a Paleo network file."""
    expanded = paleo_expand(load_json(corpus_file)["layers"])
    done: dict = {}

    def build(name):
        if name not in done:
            spec, parents = expanded[name]
            shape, params, fwd = paleo_layer(spec, [build(p)["shape"] for p in parents])
            done[name] = {"type": spec["type"], "parents": parents, "shape": shape, "params": params,
                          "flops_fwd": fwd}
        return done[name]

    for name in expanded:
        build(name)
    return done


# -- Paleo: AlexNet v2, VGG-16, NiN against Paleo's own numbers ------------------------------

PALEO_REFERENCED = [("alexnet.nd", "alex_v2.json", "alexnet"),
                    ("vgg16.nd", "vgg16.json", "vgg16"),
                    ("nin.nd", "nin.json", "nin")]


@needs_shared
@pytest.mark.parametrize("example,ref,netname", PALEO_REFERENCED)
def test_paleo_reference_per_layer(example, ref, netname):
    rep = explain(EXAMPLES / example)
    reference = load_json(REFERENCE / "paleo" / ref)
    assert rep["name"] == netname
    rows = rows_by_name(rep)
    assert set(rows) == {r["name"] for r in reference["layers"]}
    for want in reference["layers"]:
        got = rows[want["name"]]
        where = f"{example}: {want['name']}"
        assert got["type"] == want["type"], where
        assert got["parents"] == want["parents"], where
        assert got["shape"] == want["output_shape"], where
        assert got["params"] == want["num_params"], where
        assert got["flops_fwd"] == want["fwd_flops"], where
        assert close(got["flops_bwd_data"], want["bwd_data_flops"]), \
            f"{where}: bwd data {got['flops_bwd_data']} vs Paleo {want['bwd_data_flops']}"
        assert close(got["flops_bwd_filter"], want["bwd_filter_flops"]), \
            f"{where}: bwd filter {got['flops_bwd_filter']} vs Paleo {want['bwd_filter_flops']}"
    t, w = rep["totals"], reference["totals"]
    assert t["layers"] == w["num_layers"]
    assert t["params"] == w["params"]
    assert t["param_bytes"] == w["weights_in_bytes"]
    assert t["activation_bytes"] == w["activation_bytes"]
    assert t["flops_fwd"] == w["fwd_flops"]
    assert close(t["flops_bwd_data"], w["bwd_data_flops"])
    assert close(t["flops_bwd_filter"], w["bwd_filter_flops"])


@needs_shared
def test_vgg16_sanity_anchors():
    t = explain(EXAMPLES / "vgg16.nd")["totals"]
    assert t["params"] == 138_357_544
    assert t["flops_fwd"] == 1_980_977_905_664  # 30.95 GFLOP per image x 64


@needs_shared
@pytest.mark.parametrize("example,ref,netname", PALEO_REFERENCED)
def test_paleo_model_of_this_test_matches_reference(example, ref, netname):
    """The oracle used for Inception v3 and the 4-GPU AlexNet reproduces Paleo's own numbers."""
    model = paleo_model(CORPUS / "paleo" / ref)
    reference = load_json(REFERENCE / "paleo" / ref)
    assert set(model) == {r["name"] for r in reference["layers"]}
    for want in reference["layers"]:
        got = model[want["name"]]
        assert (got["parents"], got["shape"], got["params"], got["flops_fwd"]) == (
            want["parents"], want["output_shape"], want["num_params"], want["fwd_flops"]), want["name"]


PALEO_TRANSCRIBED = PALEO_REFERENCED + [("inception_v3.nd", "inception_v3.json", "inception_v3"),
                                        ("alexnet_4gpu.nd", "alex_v2_4gpu.json", "alexnet_4gpu")]
_STRUCTURE_KEYS = {"type", "parents", "activation_fn", "normalizer_fn", "tensor", "splits"}


@needs_shared
@pytest.mark.parametrize("example,ref,netname", PALEO_TRANSCRIBED)
def test_paleo_transcription_is_exact(example, ref, netname):
    """Same layer names, types and attributes as the corpus file (activation_fn -> activation)."""
    module = compile_module(EXAMPLES / example)
    net = module.network(netname)
    ops = {op.attrs["name"]: op for op in net.regions[0].ops if op.name not in STRUCTURAL_OPS}
    expanded = paleo_expand(load_json(CORPUS / "paleo" / ref)["layers"])
    assert set(ops) == set(expanded)
    assert "data" in ops and ops["data"].name == "netc.input"
    for name, (spec, _) in expanded.items():
        op = ops[name]
        assert lookup(op.name).type_name == spec["type"], name
        if spec["type"] == "Input":
            assert op.attrs["shape"] == spec["tensor"], name
            continue
        for key, value in spec.items():
            if key not in _STRUCTURE_KEYS:
                assert op.attrs.get(key) == value, f"{name}: {key}"
        assert op.attrs.get("activation", "none") == (spec.get("activation_fn") or "none"), name
        assert op.attrs.get("normalizer", "none") == (spec.get("normalizer_fn") or "none"), name


@needs_shared
@pytest.mark.parametrize("example,ref,netname", PALEO_TRANSCRIBED)
def test_paleo_transcription_equals_imported_corpus_file(example, ref, netname):
    """The hand-kept .nd and netc's import of the corpus JSON compile to the same layers."""
    ours = explain(EXAMPLES / example)
    imported = explain(CORPUS / "paleo" / ref)
    keys = ("type", "parents", "shape", "params", "flops_fwd", "flops_bwd_data", "flops_bwd_filter")
    a, b = rows_by_name(ours), rows_by_name(imported)
    assert set(a) == set(b)
    for name in a:
        assert {k: a[name][k] for k in keys} == {k: b[name][k] for k in keys}, name
    assert ours["totals"] == imported["totals"]


# -- Inception v3 ---------------------------------------------------------------------------

@needs_shared
def test_inception_v3_every_layer():
    rep = explain(EXAMPLES / "inception_v3.nd")
    rows = rows_by_name(rep)
    model = paleo_model(CORPUS / "paleo" / "inception_v3.json")
    assert set(rows) == set(model)
    for name, want in model.items():
        got = rows[name]
        assert got["shape"], f"{name} has no shape"
        assert (got["type"], got["parents"], got["shape"], got["params"], got["flops_fwd"]) == (
            want["type"], want["parents"], want["shape"], want["params"], want["flops_fwd"]), name


def test_inception_v3_totals_and_endpoints():
    rep = explain(EXAMPLES / "inception_v3.nd")
    t = rep["totals"]
    assert t["layers"] == 126
    assert t["params"] == 23_734_312
    assert t["flops_fwd"] == 724_738_519_040
    rows = rows_by_name(rep)
    assert all(r["shape"] for r in rows.values())
    for name, shape in [("Conv2d_4a_3x3", [64, 71, 71, 192]), ("MaxPool_5a_3x3", [64, 35, 35, 192]),
                        ("Mixed_5b/concat", [64, 35, 35, 256]), ("Mixed_5d/concat", [64, 35, 35, 288]),
                        ("Mixed_6a/concat", [64, 17, 17, 768]), ("Mixed_6e/concat", [64, 17, 17, 768]),
                        ("Mixed_7a/concat", [64, 8, 8, 1280]), ("Mixed_7c/concat", [64, 8, 8, 2048]),
                        ("Logits/AvgPool_1a_8x8", [64, 1, 1, 2048]),
                        ("Logits/Conv2d_1c_1x1", [64, 1, 1, 1000]), ("softmax", [64, 1000])]:
        assert rows[name]["shape"] == shape, name
    # block-name shortcut and inherited parents resolve as Paleo's explicit names do
    assert rows["Mixed_5c/Branch_0/Conv2d_0a_1x1"]["parents"] == ["Mixed_5b/concat"]
    assert rows["Mixed_5b/Branch_3/AvgPool_0a_3x3"]["parents"] == ["MaxPool_5a_3x3"]
    assert rows["softmax"]["parents"] == ["Logits/Conv2d_1c_1x1"]


def test_inception_v3_backward_worked_check():
    """paleo-format.md §9.1's worked example (stride-2 VALID, holes in the gradient)."""
    row = rows_by_name(explain(EXAMPLES / "inception_v3.nd"))["Mixed_6a/Branch_0/Conv2d_1a_3x3"]
    assert row["shape"] == [64, 17, 17, 384]
    assert close(row["flops_bwd_data"], 156_081_635_328)
    assert close(row["flops_bwd_filter"], 36_819_173_376)
    assert row["flops_fwd"] == 36_819_173_376


# -- model-parallel AlexNet -----------------------------------------------------------------

def test_alexnet_4gpu_expansion(capsys):
    rc, out, err = cli(capsys, "explain", EXAMPLES / "alexnet_4gpu.nd", "--format", "json")
    assert rc == 0, err
    rep = json.loads(out)
    rows = rows_by_name(rep)
    assert rep["totals"]["layers"] == 32
    assert rep["totals"]["params"] == 49_566_504
    for s in range(4):
        assert rows[f"parallel_fc67/fc6@{s}"]["shape"] == [128, 1, 1, 1024]  # 4096 // 4
        assert rows[f"parallel_fc67/fc6@{s}"]["parents"] == ["pool5"]          # inherited
        assert rows[f"parallel_fc67/dropout6@{s}"]["parents"] == [f"parallel_fc67/fc6@{s}"]
        assert rows[f"parallel_fc67/concat6@{s}"]["parents"] == [f"parallel_fc67/dropout6@{i}" for i in range(4)]
        assert rows[f"parallel_fc67/concat6@{s}"]["shape"] == [128, 1, 1, 4096]  # replicated, not split
        assert rows[f"parallel_fc67/fc7@{s}"]["params"] == 4096 * 1024 + 1024
    assert rows["concat7"]["parents"] == [f"parallel_fc67/dropout7@{i}" for i in range(4)]
    assert rows["concat7"]["shape"] == [128, 1, 1, 4096]
    assert '"parallel_fc67/fc6@2"' in out


@needs_shared
def test_alexnet_4gpu_every_layer():
    rows = rows_by_name(explain(EXAMPLES / "alexnet_4gpu.nd"))
    model = paleo_model(CORPUS / "paleo" / "alex_v2_4gpu.json")
    assert set(rows) == set(model)
    for name, want in model.items():
        got = rows[name]
        assert (got["type"], got["parents"], got["shape"], got["params"], got["flops_fwd"]) == (
            want["type"], want["parents"], want["shape"], want["params"], want["flops_fwd"]), name


# -- SINGA-style phases ---------------------------------------------------------------------

CIFAR = EXAMPLES / "cifar10_phases.nd"


@pytest.mark.parametrize("phase,batch", [("train", 64), ("test", 100)])
def test_cifar10_phase_selection(phase, batch, capsys):
    rc, out, err = cli(capsys, "explain", CIFAR, "--format", "json", "--phase", phase)
    assert rc == 0, err
    rows = rows_by_name(json.loads(out))
    common = ["data", "conv1", "pool1", "relu1", "norm1", "conv2", "relu2", "pool2", "norm2", "conv3",
              "relu3", "pool3", "ip1"]
    train_only, test_only = {"label", "loss"}, {"prob"}
    assert set(rows) == set(common) | (train_only if phase == "train" else test_only)
    assert rows["data"]["shape"] == [batch, 32, 32, 3]
    assert rows["conv1"]["shape"] == [batch, 32, 32, 32]
    assert rows["pool3"]["shape"] == [batch, 3, 3, 64]
    assert rows["ip1"]["shape"] == [batch, 10]
    if phase == "train":
        assert rows["label"]["shape"] == [64]
        assert rows["loss"]["parents"] == ["ip1", "label"] and rows["loss"]["shape"] == []
        assert rows["ip1"]["param_names"] == ["w4", "b4"]
    else:
        assert rows["prob"]["shape"] == [100, 10]
        assert rows["ip1"]["param_names"] == ["w4_test", "b4_test"]
    assert rows["conv1"]["param_names"] == ["w1", "b1"]


def test_cifar10_params_and_partitioning():
    module = compile_module(CIFAR, "test")
    params = {p.attrs["sym_name"]: p for p in module.params()}
    assert params["w4_test"].attrs["share_from"].name == "w4"
    assert params["b4_test"].attrs["share_from"].name == "b4"
    assert list(params["w4"].attrs["type"].shape) == [576, 10]
    assert list(params["w1"].attrs["type"].shape) == [5, 5, 3, 32]
    assert params["w1"].attrs.get("std") == 0.0001
    assert params["b1"].attrs.get("lr_scale") == 2.0
    ops = {op.attrs.get("name"): op for op in module.network().regions[0].ops}
    assert ops["ip1"].attrs["partition_dim"] == 1
    assert ops["data"].attrs["partition_dim"] == 0


def test_cifar10_train_parameter_total():
    # conv1 2,432 + conv2 25,632 + conv3 51,264 + ip1 5,770
    assert explain(CIFAR, "train")["totals"]["params"] == 85_098


def test_cifar10_test_parameter_total_counts_aliased_storage():
    assert explain(CIFAR, "test")["totals"]["params"] == 85_098


@needs_shared
def test_cifar10_matches_singa_oracle_shapes():
    """SINGA's kTest net of 0.3.0_cifar10_job.conf (batch 100), NCHW -> NHWC."""
    rows = rows_by_name(explain(CIFAR, "test"))
    oracle = [json.loads(line) for line in
              (REFERENCE / "singa" / "0.3.0_cifar10_job.conf.kTest.K1.jsonl").read_text().splitlines() if line]
    seen = 0
    for node in oracle:
        name = re.match(r"\d+#(.*)@\d+$", node["node"]).group(1)
        if name == "loss":
            continue  # SINGA keeps its loss in the test net; this example uses a Softmax there
        shape = node["shape"]
        nhwc = [shape[0], shape[2], shape[3], shape[1]] if len(shape) == 4 else shape
        assert rows[name]["shape"] == nhwc, name
        if "params" in node:
            assert rows[name]["params"] == sum(math.prod(s) for s in node["params"]), name
        seen += 1
    assert seen == 13


# -- GAN: parameters shared by name across two networks -------------------------------------

GAN = EXAMPLES / "gan.nd"
SHARED_D = ["d_fc1_w", "d_fc1_b", "d_fc2_w", "d_fc2_b", "d_bn_scale", "d_bn_shift", "d_fc3_w", "d_fc3_b"]


def test_gan_shares_discriminator_parameters():
    rep = explain(GAN)
    nets = {n["name"]: n for n in rep["networks"]}
    assert set(nets) == {"gan_g", "gan_d"}
    params = rep["params"]
    names = [p["name"] for p in params]
    assert len(names) == len(set(names)), "a parameter is listed twice"
    shapes = {p["name"]: p["shape"] for p in params}
    assert set(SHARED_D) <= set(shapes)
    # generator parameters keep per-network default names
    assert "gan_g.gen_hidden.weight" in shapes
    assert not any(n.startswith("gan_d.") for n in names)
    # both networks' discriminator layers bind the same names, with the shapes their inputs imply
    for net in nets.values():
        rows = rows_by_name(net)
        assert rows["dis_hidden"]["param_names"] == ["d_fc1_w", "d_fc1_b"]
        assert rows["dis_hidden_bn"]["param_names"] == ["d_bn_scale", "d_bn_shift"]
        assert rows["dis_logit"]["param_names"] == ["d_fc3_w", "d_fc3_b"]
        k = math.prod(rows[rows["dis_hidden"]["parents"][0]]["shape"][1:])
        assert shapes["d_fc1_w"] == [k, 10]
        assert rows["dis_hidden"]["params"] == k * 10 + 10
    # counted once: the unique parameters are fewer than the two networks' sums
    unique = sum(math.prod(s) for s in shapes.values())
    generator = 110 + 110 + 20 + 22
    discriminator = 30 + 110 + 20 + 22
    assert nets["gan_d"]["totals"]["params"] == discriminator
    assert nets["gan_g"]["totals"]["params"] == generator + discriminator
    assert unique == generator + discriminator


def test_gan_shared_shapes_must_agree(tmp_path, capsys):
    bad = tmp_path / "gan_bad.nd"
    bad.write_text(GAN.read_text().replace("input sample: f32[128, 2]", "input sample: f32[128, 3]"))
    rc, _, err = cli(capsys, "check", bad)
    assert rc == 1
    assert "parameter 'd_fc1_w' is shared with a different shape" in err


# -- Brainstorm layout ----------------------------------------------------------------------

def _plain(v):
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def _layout_of(module):
    (op,) = [op for op in module.network().regions[0].ops if op.name == "netc.layout"]
    return _plain(op.attrs["layout"])


@needs_shared
def test_brainstorm_fixture_layout_is_brainstorms():
    module = compile_module(EXAMPLES / "brainstorm_fixture.nd")
    want = load_json(CORPUS / "brainstorm" / "old_format_e0f35f3.layouts.json")["results"]["conftest_fixture"]
    assert _layout_of(module) == {"sizes": want["sizes"], "layout": want["layout"]}


def test_brainstorm_fixture_agrees_with_its_layout():
    module = compile_module(EXAMPLES / "brainstorm_fixture.nd")
    layout = _layout_of(module)
    assert layout["sizes"] == [230, 0, 54]
    views = layout["layout"]["layout"]
    assert sorted(views, key=lambda k: views[k]["index"]) == ["InputLayer", "A", "B", "C", "D"]
    params = {p.attrs["sym_name"]: list(p.attrs["type"].shape) for p in module.params()}
    for layer in "ABCD":
        for role in ("W", "b"):
            node = views[layer]["layout"]["parameters"]["layout"][role]
            assert params[f"{layer}.{role}"] == node["shape"], (layer, role)
            t, start, stop = node["slice"]
            assert t == 0 and stop - start == math.prod(node["shape"])
    assert sum(math.prod(s) for s in params.values()) == layout["sizes"][0]
    rows = rows_by_name(explain_json(module))
    for layer in ["InputLayer", "A", "B", "C", "D"]:
        assert rows[layer]["shape"][1:] == views[layer]["layout"]["outputs"]["layout"]["default"]["shape"]
    # Brainstorm's implicit fan-in concatenations are the explicit C_in / D_in
    assert rows["C_in"]["parents"] == ["A", "B"]
    assert rows["C_in"]["shape"][1:] == views["C"]["layout"]["inputs"]["layout"]["default"]["shape"]
    assert rows["D_in"]["parents"] == ["B", "C"]
    assert rows["D_in"]["shape"][1:] == views["D"]["layout"]["inputs"]["layout"]["default"]["shape"]


# -- docs/language.md -----------------------------------------------------------------------

def _doc_blocks():
    text = DOC.read_text()
    return re.findall(r"^```([^\n]*)\n(.*?)^```", text, re.S | re.M)


def _nd_snippets():
    return [(i, info.split(), body) for i, (info, body) in enumerate(_doc_blocks()) if info.split()[:1] == ["nd"]]


def test_doc_has_snippets():
    assert len(_nd_snippets()) >= 10


@pytest.mark.parametrize("index,words,body", [s for s in _nd_snippets() if "error" not in s[1]],
                         ids=lambda v: str(v) if isinstance(v, int) else "")
@pytest.mark.parametrize("phase", ["train", "val", "test"])
def test_doc_snippet_checks(index, words, body, phase, tmp_path, capsys):
    path = tmp_path / f"snippet{index}.nd"
    path.write_text(body)
    rc, _, err = cli(capsys, "check", path, "--phase", phase, *words[1:])
    assert rc == 0, f"docs/language.md snippet #{index} ({phase}):\n{body}\n{err}"
    assert err == ""


def test_doc_error_example_prints_what_the_doc_says(tmp_path, capsys, monkeypatch):
    blocks = _doc_blocks()
    (i,) = [i for i, (info, _) in enumerate(blocks) if info.split()[:2] == ["nd", "error"]]
    info, body = blocks[i]
    expected = next(b for inf, b in blocks[i + 1:] if inf.strip() == "text")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "demo.nd").write_text(body)
    rc, _, err = cli(capsys, "check", "demo.nd", *info.split()[2:])
    assert rc == 1
    assert err == expected


def test_doc_lists_every_layer_type():
    text = DOC.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    for op in all_ops():
        if not op.types or op.name == "input":
            continue
        row = next((r for r in rows if r.startswith(f"| `{op.types[0]}`")), None)
        assert row is not None, f"docs/language.md's layer table lacks {op.types[0]}"
        for t in op.types[1:]:
            assert f"`{t}`" in row, f"alias {t} missing"
        for attr in op.attrs:
            assert f"`{attr}`" in row, f"{op.types[0]}: attribute {attr} missing"
        for role in op.param_roles:
            assert f"`{role}`" in row, f"{op.types[0]}: parameter {role} missing"
