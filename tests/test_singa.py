"""SINGA importer, front half: the protobuf text reader (netc/frontend/prototext.py) and SINGA's
graph construction (netc/frontend/singa.py), checked against the reference oracle
(/work/shared/reference/singa), the corpus (/work/shared/corpus/singa) and the spec
(/work/shared/spec/singa-format.md)."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from netc.diagnostics import NetcError, render
from netc.frontend import prototext as pt
from netc.frontend.singa import (RNNLM_PLUGIN, UserLayerRule, build_all, build_singa, detect_version,
                                 load_extension_proto, load_schema, read_job)

SHARED = Path(__file__).resolve().parents[2] / "shared"
CORPUS = SHARED / "corpus" / "singa"
REF = SHARED / "reference" / "singa"
needs_shared = pytest.mark.skipif(not CORPUS.is_dir() or not REF.is_dir(),
                                  reason="/work/shared corpus and reference not available")


def errors_of(fn, *a, **kw) -> list:
    with pytest.raises(NetcError) as ei:
        fn(*a, **kw)
    for d in ei.value.diagnostics:  # every diagnostic renders (no crash in rendering)
        render(d)
    return ei.value.diagnostics


def where(d):
    return (d.loc.line, d.loc.col)


# ------------------------------------------------------------------------------------------
# prototext

def test_prototext_syntax_features():
    text = (
        '# comment\n'
        'name: "a\\tb" \'c\' "\\x41\\101\\n"   # adjacent literals concatenate\n'
        'train_steps : 10 test_steps:5\n'
        'updater { momentum: -0.9 weight_decay: 5e-05 delta: .5 } \n'
        'cluster: { workspace: "w" }\n'
        'layer <name: "x"; shape: 3, shape: 32 shape:32 > \n'
        '[ext.name] { v: -inf flag: True }\n'
        'list: [1, 2, 3] msgs: [{a: 1}, {a: 2}] empty: []\n'
        '\tt: t\tf: 0x1F o: 017\n')
    m = pt.parse_text(text, "p.txt")
    names = [f.name for f in m.fields]
    assert names == ["name", "train_steps", "test_steps", "updater", "cluster", "layer", "ext.name", "list", "list",
                     "list", "msgs", "msgs", "t", "f", "o"]
    assert m.fields[0].value.value == "a\tbcAA\n" and m.fields[0].value.kind == "string"
    up = m.first("updater").value
    assert [(f.name, f.value.kind, f.value.value) for f in up] == [
        ("momentum", "float", -0.9), ("weight_decay", "float", 5e-05), ("delta", "float", 0.5)]
    assert m.first("cluster").colon and m.first("cluster").is_message
    layer = m.first("layer").value
    assert [f.value.value for f in layer.all("shape")] == [3, 32, 32]
    ext = m.fields[6]
    assert ext.ext and ext.value.first("v").value.negative and ext.value.first("v").value.text == "-inf"
    assert [f.value.value for f in m.all("list")] == [1, 2, 3]
    assert [f.value.first("a").value.value for f in m.all("msgs")] == [1, 2]
    assert m.first("f").value.value == 31 and m.first("o").value.value == 15
    # every field and value keeps its location
    assert (m.first("train_steps").loc.line, m.first("train_steps").loc.col) == (3, 1)
    assert (m.first("test_steps").value.loc.line, m.first("test_steps").value.loc.col) == (3, 29)
    assert (up.first("momentum").value.loc.line, up.first("momentum").value.loc.col) == (4, 21)
    t = m.first("t")
    assert (t.loc.line, t.loc.col, t.value.loc.col) == (9, 2, 5)  # a tab is one column


@pytest.mark.parametrize("text,line,col,msg", [
    ('a { b: 1', 1, 9, "not closed"),
    ('a { b: 1 }}', 1, 11, "no message is open"),
    ('a: "abc\nb: 1', 1, 4, "unterminated string"),
    ('a 1', 1, 3, "expected ':'"),
    ('a: }', 1, 4, "expected a value"),
    ('a: 5abc', 1, 4, "invalid number"),
    ('a: 1e', 1, 4, "invalid number"),
    ('a: "\\q"', 1, 5, "invalid escape"),
    ('a { b: 1 >', 1, 10, "expected '}'"),
    ('[a.b { }', 1, 6, "expected ']'"),
    ('a: -x1 b: -', 1, 12, "expected a number after '-'"),
    ('a: [1, 2', 1, 9, "expected ',' or ']'"),
    ('a: $', 1, 4, "unexpected character"),
    ('\n\n  layer {\n name: "x"\n', 5, 1, "not closed"),
])
def test_prototext_errors(text, line, col, msg):
    (d,) = errors_of(pt.parse_text, text, "e.conf")
    assert msg in d.message and where(d) == (line, col), (d.message, where(d))


def test_prototext_deep_nesting_and_garbage_raise_only_netcerror():
    m = pt.parse_text("a {" * 20000 + "}" * 20000)
    assert len(m.fields) == 1
    errors_of(pt.parse_text, "a: [{" * 3000 + "}]" * 3000)
    for text in ["a {" * 5000, "\x00", "a: '", "[", "a: [{b: 1},", "a: \"\\u12\"", "a: \"\\xZZ\"", "{", ":", "a: -"]:
        errors_of(pt.parse_text, text)


@needs_shared
def test_truncated_and_mutated_corpus_files_raise_only_netcerror():
    rnd = random.Random(1234)
    files = sorted(CORPUS.glob("*.conf"))
    for path in rnd.sample(files, 12):
        text = path.read_text()
        cuts = rnd.sample(range(len(text)), 25)
        variants = [text[:c] for c in cuts]
        for _ in range(10):
            t = list(text)
            for _ in range(3):
                i = rnd.randrange(len(t))
                t[i:i + rnd.randint(0, 2)] = rnd.choice(['{', '}', ':', '"', '#', '-', '\n', 'x', '0', '[', ''])
            variants.append("".join(t))
        for v in variants:
            for phase in ("train", "test"):
                try:
                    build_singa(v, phase=phase, file=path.name, plugins=RNNLM_PLUGIN)
                except NetcError as e:
                    assert e.diagnostics and all(d.message for d in e.diagnostics)


# ------------------------------------------------------------------------------------------
# (a) the reference oracle, exactly

REF_FILES = sorted(p.name for p in REF.glob("*.jsonl")) if REF.is_dir() else []


@needs_shared
@pytest.mark.parametrize("ref", REF_FILES)
def test_reference_oracle(ref):
    conf, phase, k = ref.rsplit(".", 3)[0], ref.rsplit(".", 3)[1], ref.rsplit(".", 3)[2]
    assert k == "K1"
    expected = [json.loads(line) for line in (REF / ref).read_text().splitlines() if line.strip()]
    net = build_singa(CORPUS / conf, phase=phase, K=1)
    got = net.to_reference()
    assert [g["node"] for g in got] == [e["node"] for e in expected]  # names and SINGA's order
    assert got == expected  # types, srcs, pids, shapes, params, v0.1 batch/record shapes


@needs_shared
def test_reference_oracle_is_complete():
    assert len(REF_FILES) == 22


# ------------------------------------------------------------------------------------------
# (b) every corpus file: builds (every phase the job builds) or is rejected, and why

# file: (version mode, {phase: node count}) or (version mode, (line, col, message fragment)). The counts
# are the logical nets' (the frontend builds one partition); SINGA's partitioned graphs of the jobs with
# nworkers_per_group > 1 are the partition pass's, checked in tests/test_partition.py.
CORPUS_OUTCOMES = {
    "0.1.0_cifar10_job.conf": ("0.1", {"kTrain": 16, "kTest": 16}),
    "0.1.0_mnist_conv.conf": ("0.1", {"kTrain": 11, "kTest": 11}),
    "0.1.0_mnist_job.conf": ("0.1", {"kTrain": 15, "kTest": 15}),
    "0.1.0_mnist_rbm_job.conf": ("0.1", (9, 1, "unknown field 'model' in JobProto (the `model { }` wrapper is the "
                                               "July-2015 pre-0.1 JobProto")),
    "0.1.0_rbm_autoencoder.conf": ("0.1", {"kTrain": 19, "kTest": 19}),
    "0.1.0_rbm_rbm1.conf": ("0.1", {"kTrain": 4, "kTest": 4}),
    "0.1.0_rbm_rbm2.conf": ("0.1", {"kTrain": 6, "kTest": 6}),
    "0.1.0_rbm_rbm3.conf": ("0.1", {"kTrain": 8, "kTest": 8}),
    "0.1.0_rbm_rbm4.conf": ("0.1", {"kTrain": 10, "kTest": 10}),
    "0.1.0_rnnlm_job.conf": ("0.1", {"kTrain": 5, "kVal": 5}),  # user layers: with RNNLM_PLUGIN
    "0.2.0_alexnet_cudnn.conf": ("0.2", {"kTrain": 25, "kTest": 26}),
    "0.2.0_alexnet_job.conf": ("0.2", {"kTrain": 25, "kTest": 25}),
    "0.2.0_char-rnn_job.conf": ("0.2", {"kTrain": 251}),
    "0.2.0_char-rnn_sample.conf": ("0.2", {"kTrain": 8, "kTest": 8}),
    "0.2.0_cifar10_cudnn.conf": ("0.2", {"kTrain": 14, "kTest": 15}),
    "0.2.0_cifar10_cudnn_hybrid.conf": ("0.2", {"kTrain": 14}),  # K = 2: 44 nodes after partition
    "0.2.0_cifar10_hybrid.conf": ("0.2", {"kTrain": 14}),  # K = 2: 44 nodes after partition
    "0.2.0_cifar10_job.conf": ("0.2", {"kTrain": 14, "kTest": 14}),
    "0.2.0_mnist_conv.conf": ("0.2", {"kTrain": 9, "kTest": 9}),
    "0.2.0_mnist_job.conf": ("0.2", {"kTrain": 13, "kTest": 13}),
    "0.2.0_mnist_rbm_job.conf": ("0.2", (9, 1, "unknown field 'model' in JobProto")),
    "0.2.0_rbm_autoencoder.conf": ("0.2", (138, 19, "share_from \"w4\" of param 'w5' in layer 'Inner5' names no param: "
                                                   "SINGA v0.2's unrolling renames every param")),
    "0.2.0_rbm_rbm1.conf": ("0.2", (82, 17, "share_from \"w1\" of param 'w1_' in layer 'RBMHid' names no param")),
    "0.2.0_rbm_rbm2.conf": ("0.2", (104, 17, "owner is now '0#w2'")),
    "0.2.0_rbm_rbm3.conf": ("0.2", (128, 17, "owner is now '0#w3'")),
    "0.2.0_rbm_rbm4.conf": ("0.2", (149, 17, "owner is now '0#w4'")),
    # located in 0.2.0_rnnlm_rnnlm.proto (see test_rnnlm_v02_extension_numbers)
    "0.2.0_rnnlm_job.conf": ("0.2", (42, 27, "extension 'embedding_conf' = 101 is outside the extension range of "
                                             "singa.LayerProto in SINGA v0.2 (extensions 1001 to 1100)")),
    "0.3.0_alexnet_cudnn.conf": ("0.3", {"kTrain": 25, "kTest": 26}),
    "0.3.0_alexnet_job.conf": ("0.3", {"kTrain": 25, "kTest": 25}),
    "0.3.0_char-rnn_job.conf": ("0.3", {"kTrain": 251}),
    "0.3.0_char-rnn_sample.conf": ("0.3", {"kTrain": 8, "kTest": 8}),
    "0.3.0_cifar10_cudnn.conf": ("0.3", {"kTrain": 14, "kTest": 15}),
    "0.3.0_cifar10_cudnn_bm.conf": ("0.3", {"kTrain": 16, "kTest": 17}),
    "0.3.0_cifar10_cudnn_hybrid.conf": ("0.3", {"kTrain": 14}),  # K = 2: 44 nodes after partition
    "0.3.0_cifar10_hybrid.conf": ("0.3", {"kTrain": 14}),  # K = 2: 44 nodes after partition
    "0.3.0_cifar10_job.conf": ("0.3", {"kTrain": 14, "kTest": 14}),
    "0.3.0_mnist_conv.conf": ("0.3", {"kTrain": 9, "kTest": 9}),
    "0.3.0_mnist_job.conf": ("0.3", {"kTrain": 13, "kTest": 13}),
    "0.3.0_mnist_rbm_job.conf": ("0.3", (9, 1, "unknown field 'model' in JobProto")),
    "0.3.0_rbm_autoencoder.conf": ("0.3", (138, 19, "SINGA v0.3's unrolling renames every param")),
    "0.3.0_rbm_rbm1.conf": ("0.3", (82, 17, "owner is now '0#w1'")),
    "0.3.0_rbm_rbm2.conf": ("0.3", (104, 17, "owner is now '0#w2'")),
    "0.3.0_rbm_rbm3.conf": ("0.3", (128, 17, "owner is now '0#w3'")),
    "0.3.0_rbm_rbm4.conf": ("0.3", (149, 17, "owner is now '0#w4'")),
    "0.3.0_rnnlm_job.conf": ("0.3", {"kTrain": 4, "kVal": 4}),  # with RNNLM_PLUGIN
    "dev.20160224_cifar10_cudnn_hybrid.conf": ("dev", {"kTrain": 14}),  # K = 2: 44 nodes after partition
    "dev.20160224_cifar10_gpu.conf": ("dev", {"kTrain": 14, "kTest": 14}),
    "dev.20160224_cifar10_hybrid.conf": ("dev", {"kTrain": 14}),  # K = 2: 44 nodes after partition
    "dev.20160224_cifar10_job.conf": ("dev", {"kTrain": 14, "kTest": 14}),
    "dev.20160224_mnist_gpu.conf": ("dev", {"kTrain": 13, "kTest": 13}),
    "dev.20160224_mnist_hybrid.conf": ("dev", {"kTrain": 13}),  # K = 2: 26 nodes after partition
    "dev.20160224_mnist_hybrid_gpu.conf": ("dev", {"kTrain": 13}),  # K = 2: 26 nodes after partition
    "dev.20160224_mnist_hybrid_gpux2.conf": ("dev", {"kTrain": 13}),  # K = 2: 26 nodes after partition
    "dev.20160224_mnist_job.conf": ("dev", {"kTrain": 13, "kTest": 13}),
    "dev.20160313_mnist_2x2.conf": ("dev", {"kTrain": 13}),  # K = 4 (52 nodes after partition), store_conf.ratio
    "pre0.1.20150503_cifar10_model.conf": ("pre0.1", (9, 3, "pre-0.1 SINGA dialect, the May-June 2015 ModelProto")),
    "pre0.1.20150503_mnist_conv.conf": ("pre0.1", (8, 3, "the May-June 2015 ModelProto")),
    "pre0.1.20150503_mnist_mlp.conf": ("pre0.1", (8, 3, "the May-June 2015 ModelProto")),
    "pre0.1.20150522_NUH_mlp.conf": ("pre0.1", (7, 3, "the May-June 2015 ModelProto")),
    "pre0.1.20150522_cifar10_model-lmdb.conf": ("pre0.1", (9, 3, "the May-June 2015 ModelProto")),
    "pre0.1.20150522_cifar10_model-prefetch.conf": ("pre0.1", (9, 3, "the May-June 2015 ModelProto")),
    "pre0.1.20150522_cifar10_model.conf": ("pre0.1", (9, 3, "the May-June 2015 ModelProto")),
    "pre0.1.20150615_cifar10_model.conf": ("pre0.1", (9, 3, "the May-June 2015 ModelProto")),
    "pre0.1.20150627_cifar10_model.conf": ("pre0.1", (4, 1, "the June-July 2015 ModelProto")),
    "pre0.1.20150627_dbm_model.conf": ("pre0.1", (3, 1, "the June-July 2015 ModelProto")),
    "pre0.1.20150627_mnist_model.conf": ("pre0.1", (4, 1, "the June-July 2015 ModelProto")),
    "pre0.1.20150719_cifar10_model.conf": ("pre0.1", (4, 1, "the June-July 2015 ModelProto")),
    "pre0.1.20150719_mnist_model.conf": ("pre0.1", (4, 1, "the June-July 2015 ModelProto")),
    "pre0.1.20150722_cifar10_job.conf": ("pre0.1", (6, 1, "the July-2015 JobProto with a `model { }` wrapper")),
    "pre0.1.20150722_mnist_conv.conf": ("pre0.1", (18, 3, "'base_learning_rate' belongs to the May-June 2015 (pre-0.1) "
                                                          "ModelProto, but this file uses the July-2015 JobProto")),
    "pre0.1.20150722_mnist_job.conf": ("pre0.1", (5, 1, "the July-2015 JobProto with a `model { }` wrapper")),
}


@needs_shared
def test_corpus_table_covers_every_config():
    assert sorted(CORPUS_OUTCOMES) == sorted(p.name for p in CORPUS.glob("*.conf"))
    assert len(CORPUS_OUTCOMES) == 71


@needs_shared
@pytest.mark.parametrize("name", sorted(CORPUS_OUTCOMES))
def test_corpus_outcome(name):
    version, expected = CORPUS_OUTCOMES[name]
    if isinstance(expected, dict):
        nets = build_all(CORPUS / name, version=version, plugins=RNNLM_PLUGIN)
        assert {ph: len(n.nodes) for ph, n in nets.items()} == expected
        for net in nets.values():
            assert all(n.shape is not None for n in net.nodes)
            assert net.version == version
    else:
        line, col, msg = expected
        diags = errors_of(build_all, CORPUS / name, version=version, plugins=RNNLM_PLUGIN)
        assert msg in diags[0].message and where(diags[0]) == (line, col), (diags[0].message, where(diags[0]))


@needs_shared
@pytest.mark.parametrize("name,expected", [
    ("0.1.0_cifar10_job.conf", "0.1"), ("0.1.0_rnnlm_job.conf", "0.1"), ("0.1.0_rbm_rbm2.conf", "0.1"),
    ("0.1.0_mnist_rbm_job.conf", "pre0.1"),  # the `model { }` wrapper
    ("0.2.0_cifar10_job.conf", "0.3"), ("0.3.0_char-rnn_job.conf", "0.3"), ("0.3.0_rnnlm_job.conf", "0.3"),
    ("0.3.0_cifar10_cudnn_bm.conf", "0.3"), ("dev.20160313_mnist_2x2.conf", "dev"),
    ("dev.20160224_mnist_job.conf", "0.3"), ("pre0.1.20150503_mnist_mlp.conf", "pre0.1"),
    ("pre0.1.20150719_mnist_model.conf", "pre0.1"), ("pre0.1.20150722_mnist_job.conf", "pre0.1"),
])
def test_version_detection(name, expected):
    assert detect_version(pt.parse_file(CORPUS / name))[0] == expected


@needs_shared
def test_every_buildable_corpus_file_builds_with_detected_version():
    """Auto-detection picks a mode that builds every file that builds in its own mode (v0.2 files
    are read as v0.3, a superset for them)."""
    for name, (version, expected) in CORPUS_OUTCOMES.items():
        if isinstance(expected, dict) and version != "dev":
            nets = build_all(CORPUS / name, plugins=RNNLM_PLUGIN)
            assert {ph: len(n.nodes) for ph, n in nets.items()} == expected, name


@needs_shared
def test_rnnlm_needs_a_plugin():
    diags = errors_of(build_singa, CORPUS / "0.3.0_rnnlm_job.conf")
    assert {d.message.split("\"")[1] for d in diags} == {"kData", "kEmbedding", "kHidden", "kLoss"}
    assert "user layer (user_type \"kData\")" in diags[0].message and where(diags[0]) == (34, 3)
    net = build_singa(CORPUS / "0.3.0_rnnlm_job.conf", plugins=RNNLM_PLUGIN)
    assert [(n.name, n.type, n.shape, [p.shape for p in n.params]) for n in net.nodes] == [
        ("0#data@0", "user:kData", [11, 4], []),
        ("0#embedding@0", "user:kEmbedding", [11, 15], [[3720, 15]]),
        ("0#hidden@0", "user:kHidden", [11, 15], [[15, 15]]),
        ("0#loss@0", "user:kLoss", [], [[3720, 15], [100, 15]])]
    assert net.nodes[0].layer_conf["[data_conf]"]["max_window"] == 10
    val = build_singa(CORPUS / "0.3.0_rnnlm_job.conf", phase="val", plugins=RNNLM_PLUGIN)
    assert val.nodes[0].layer_conf["[data_conf]"]["path"] == "examples/rnnlm/valid_data.bin"


@needs_shared
def test_rnnlm_v02_extension_numbers():
    (d,) = errors_of(build_singa, CORPUS / "0.2.0_rnnlm_job.conf", version="0.2", plugins=RNNLM_PLUGIN)
    assert d.loc.file.endswith("0.2.0_rnnlm_rnnlm.proto") and where(d) == (42, 27)
    assert d.notes and d.notes[-1].loc.file.endswith("0.2.0_rnnlm_job.conf") and where(d.notes[-1]) == (35, 3)
    # with the v0.3.0 rnnlm.proto (as the MANIFEST suggests) the v0.2 job parses and builds
    net = build_singa(CORPUS / "0.2.0_rnnlm_job.conf", version="0.2", plugins=RNNLM_PLUGIN,
                      extension_protos=[CORPUS / "0.3.0_rnnlm_rnnlm.proto"])
    assert len(net.nodes) == 4


@needs_shared
def test_unloaded_extension():
    text = (CORPUS / "0.3.0_rnnlm_job.conf").read_text()
    (d, *_) = errors_of(read_job, text, file="job.conf")
    assert "unknown extension '[data_conf]'" in d.message and where(d) == (35, 3)


# ------------------------------------------------------------------------------------------
# (d) char-rnn unrolling

@needs_shared
def test_char_rnn_unrolling():
    net = build_singa(CORPUS / "0.3.0_char-rnn_job.conf")
    assert len(net.nodes) == 251 and net.K == 1
    nd = {n.name: n for n in net.nodes}
    assert nd["0#data@0"].type == "kCharRNN" and nd["0#data@0"].shape == []
    assert sum(n.type == t for n in net.nodes for t in ("kOneHot",)) == 50
    for j in (0, 1, 17, 49):
        assert nd[f"{j}#onehot@0"].srcs == ["0#data@0"] and nd[f"{j}#onehot@0"].shape == [50, 101]
        assert nd[f"{j}#label@0"].srcs == ["0#data@0"] and nd[f"{j}#label@0"].shape == []
        gru = nd[f"{j}#gru1@0"]
        assert gru.srcs == [f"{j}#onehot@0"] + ([f"{j - 1}#gru1@0"] if j else [])  # the recurrent edge
        assert gru.shape == [50, 512]
        assert [p.shape for p in gru.params] == [[512, 101]] * 3 + [[512, 512]] * 3 + [[512]] * 3
        assert [p.name for p in gru.params][:2] == [f"{j}#z_hx", f"{j}#r_hx"]
        assert gru.params[0].share_from == (f"0#z_hx" if j else None)
        assert nd[f"{j}#ip1@0"].srcs == [f"{j}#gru1@0"] and [p.shape for p in nd[f"{j}#ip1@0"].params] == [[101, 512],
                                                                                                           [101]]
        assert nd[f"{j}#loss@0"].srcs == [f"{j}#ip1@0", f"{j}#label@0"] and nd[f"{j}#loss@0"].shape == [50, 101]
    assert nd["49#gru1@0"].dsts == ["49#ip1@0"] and nd["3#gru1@0"].dsts == ["4#gru1@0", "3#ip1@0"]
    assert not any(n.type == "kSplit" for n in net.nodes)  # kCharRNN and kGRU fan out without splits
    order = [n.name for n in net.nodes]
    assert order.index("0#gru1@0") < order.index("1#gru1@0") < order.index("49#gru1@0")


@needs_shared
def test_char_rnn_sample_zero_sized_warning():
    net = build_singa(CORPUS / "0.3.0_char-rnn_sample.conf")
    assert [(n.name, n.shape) for n in net.nodes][:3] == [("0#data@0", [1]), ("0#onehot@0", [1, 0]),
                                                          ("0#gru1@0", [1, 512])]
    assert [p.shape for p in net.node("0#gru2@0").params] == [[512, 512]] * 6  # 6 params: no bias
    assert any("zero-sized" in d.message and d.severity == "warning" for d in net.diagnostics)  # B14


@needs_shared
def test_cudnn_bm_dead_end():
    net = build_singa(CORPUS / "0.3.0_cifar10_cudnn_bm.conf")
    assert net.node("split(0#relu2)@0").srcs == ["0#relu2@0"]
    assert [p.shape for p in net.node("0#ip1@0").params] == [[10, 3136], [10]]
    assert [p.shape for p in net.node("0#bm1@0").params] == [[1, 32, 1, 1]] * 4
    (w,) = [d for d in net.diagnostics if "unused" in d.message]  # B15
    assert "'pool2'" in w.message and w.severity == "warning"


@needs_shared
def test_conf_values_for_the_ir_mapper():
    net = build_singa(CORPUS / "0.3.0_cifar10_job.conf")
    c = net.node("0#conv1@0")
    assert c.conf == {"num_filters": 32, "kernel": [5, 5], "pad": [2, 2], "stride": [1, 1], "bias": True}
    assert c.layer_conf["convolution_conf"]["num_filters"] == 32 and c.loc.line == 75
    assert net.node("0#pool2@0").conf == {"pool": "AVG", "kernel": [3, 3], "pad": [0, 0], "stride": [2, 2]}
    assert net.node("0#norm1@0").conf == {"local_size": 3, "alpha": 5e-05, "beta": 0.75, "knorm": 1.0}
    assert net.node("0#ip1@0").conf == {"num_output": 10, "transpose": False, "bias": True}
    assert net.node("0#data@0").conf["mean_file"] == "examples/cifar10/image_mean.bin"
    w = net.node("0#conv1@0").params[0]
    assert w.name == "0#w1" and w.conf["init"]["type"] == "kGaussian" and w.conf["init"]["std"] == pytest.approx(1e-4)
    v1 = build_singa(CORPUS / "0.1.0_rbm_rbm2.conf")
    hid = v1.node("RBMHid@00")
    assert [(p.name, p.share_from) for p in hid.params] == [("w2_", "w2"), ("b22", None)]
    assert hid.params[0].conf["init"]["std"] == pytest.approx(0.1)  # share_from copies the owner's config


# ------------------------------------------------------------------------------------------
# (e) bad inputs, with line:col

V3 = """name: "t"
neuralnet {
  layer { name: "data" type: kRecordInput store_conf { batchsize: 64 shape: 784 } }
%s
}
cluster { nworkers_per_group: %d }
"""


def v3(body: str, K: int = 1) -> str:
    return V3 % (body, K)


def ip(name, src, out=10, extra=""):
    return (f'  layer {{ name: "{name}" type: kInnerProduct srclayers: "{src}" '
            f'innerproduct_conf {{ num_output: {out} }}'
            f' param {{ name: "w_{name}" }} param {{ name: "b_{name}" }} {extra}}}')


def test_valid_small_net():
    net = build_singa(v3(ip("fc", "data") + '\n  layer { name: "loss" type: kSoftmaxLoss srclayers: "fc" '
                                           'srclayers: "data" }'), file="t.conf")
    assert net.version == "0.3" and [(n.name, n.shape) for n in net.nodes] == [
        ("0#data@0", [64, 784]), ("0#fc@0", [64, 10]), ("0#loss@0", [64, 10])]
    assert net.nodes[1].loc.file == "t.conf" and (net.nodes[1].loc.line, net.nodes[1].loc.col) == (4, 11)


def test_bad_truncated_file():
    text = v3(ip("fc", "data"))
    (d,) = errors_of(build_singa, text[:text.index("innerproduct_conf")], file="t.conf")
    assert "expected" in d.message or "not closed" in d.message
    (d,) = errors_of(build_singa, text[:text.index("param")], file="t.conf")
    assert "not closed" in d.message and where(d) == (4, 97)
    assert d.notes[0].message == "'{' opened here" and where(d.notes[0]) == (4, 9)


def test_bad_unknown_field():
    (d,) = errors_of(build_singa, v3(ip("fc", "data", extra="kernal: 3 ")), file="t.conf")
    assert d.message == "unknown field 'kernal' in LayerProto" and where(d) == (4, 143)


def test_bad_srclayer_net_location():
    (d,) = errors_of(build_singa, v3('  layer { name: "fc" type: kReLU srclayer: "data" }'))
    assert "unknown field 'srclayer' in LayerProto; did you mean 'srclayers'?" in d.message and where(d) == (4, 34)
    (d,) = errors_of(build_singa, 'net {\n  layer { name: "data" type: kReLU }\n}')
    assert "unknown field 'net' in JobProto; did you mean 'neuralnet'?" in d.message and where(d) == (1, 1)
    (d,) = errors_of(build_singa, v3('  layer { name: "fc" type: kReLU srclayers: "data" location: 1 }'))
    assert "unknown field 'location' in LayerProto (documented in SINGA's docs but not present in any SINGA " \
           "release)" in d.message and where(d) == (4, 52)


def test_bad_enum_value():
    (d,) = errors_of(build_singa, v3('  layer { name: "fc" type: kReLu srclayers: "data" }'))
    assert d.message == "unknown LayerType value 'kReLu' for field 'type'; did you mean 'kReLU'?"
    assert where(d) == (4, 28)
    (d,) = errors_of(build_singa, v3('  layer { name: "fc" type: kHidLayer srclayers: "data" }'))
    assert "did you mean 'kRBMHid'?" in d.message
    (d,) = errors_of(build_singa, v3('  layer { name: "fc" type: kData }'))
    assert "'kData' is not a LayerType" in d.message
    (d,) = errors_of(build_singa, v3('  layer { name: "fc" type: kActivation srclayers: "data" }'), version="0.2")
    assert "unknown LayerType value 'kActivation'" in d.message and "SINGA v0.3" in d.notes[0].message


def test_bad_unknown_srclayer():
    (d,) = errors_of(build_singa, v3(ip("fc", "dta")))
    assert d.message == "unknown source layer 'dta' of layer 'fc' (in phase kTrain)" and where(d) == (4, 53)
    assert d.notes[0].message == "did you mean 'data'?"
    # a source that exists only in another phase (B7)
    text = v3('  layer { name: "aux" type: kReLU srclayers: "data" include: kTest }\n'
              '  layer { name: "r" type: kReLU srclayers: "aux" }')
    (d,) = errors_of(build_singa, text)
    assert "unknown source layer 'aux' of layer 'r' (in phase kTrain)" in d.message and where(d) == (5, 44)
    assert "not part of phase kTrain" in d.notes[0].message
    assert len(build_singa(text, phase="test").nodes) == 3


def test_bad_duplicate_names():
    (d,) = errors_of(build_singa, v3(ip("fc", "data") + "\n" + ip("fc", "data")))
    assert "layer name 'fc' is used twice in phase kTrain" in d.message and where(d) == (5, 11)
    assert where(d.notes[0]) == (4, 11)
    # the same name in different phases is normal
    ok = v3('  layer { name: "x" type: kReLU srclayers: "data" include: kTrain }\n'
            '  layer { name: "x" type: kSigmoid srclayers: "data" include: kTest }')
    assert build_singa(ok).nodes[1].type == "kReLU" and build_singa(ok, "test").nodes[1].type == "kSigmoid"


def test_bad_share_from_to_nothing():
    text = v3(ip("fc", "data") + '\n  layer { name: "fc2" type: kInnerProduct srclayers: "fc" innerproduct_conf { '
              'num_output: 10 } param { name: "w2" share_from: "wx" } param { name: "b2" } }')
    (d,) = errors_of(build_singa, text)
    assert "share_from \"wx\" of param 'w2' in layer 'fc2' names no param" in d.message and where(d) == (5, 127)
    v1 = ('name: "j" train_steps: 1 train_one_batch { alg: kBP } updater { } cluster { workspace: "w" }\n'
          'neuralnet {\n layer { name: "data" type: kShardData sharddata_conf { path: "mnist" batchsize: 8 } }\n'
          ' layer { name: "m" type: kMnist srclayers: "data" mnist_conf { norm_a: 1 norm_b: 0 } }\n'
          ' layer { name: "h" type: kInnerProduct srclayers: "m" innerproduct_conf { num_output: 3 }\n'
          '   param { name: "w" share_from: "w0" } param { name: "b" } }\n}')
    (d,) = errors_of(build_singa, v1)
    assert "can't find param w0" in d.message and where(d) == (6, 34)


def test_bad_singular_twice_and_missing_required():
    (d,) = errors_of(build_singa, v3('  layer { name: "fc" name: "fc2" type: kReLU srclayers: "data" }'))
    assert "field 'name' of LayerProto is given twice" in d.message and where(d) == (4, 22)
    assert where(d.notes[0]) == (4, 11)
    (d,) = errors_of(build_singa, v3('  layer { name: "fc" type: kInnerProduct srclayers: "data" '
                                     'innerproduct_conf { } }'))
    assert d.message == "missing required field 'num_output' in 'innerproduct_conf' (InnerProductProto)"
    assert where(d) == (4, 60)
    diags = errors_of(build_singa, 'neuralnet { layer { name: "x" type: kReLU } }', version="0.1")
    assert {d.message.split("'")[1] for d in diags} == {"name", "train_one_batch", "updater", "cluster", "train_steps"}


def test_bad_values():
    diags = errors_of(build_singa, v3('  layer { name: "c" type: kConvolution srclayers: "data" convolution_conf { '
                                      'num_filters: 3.5 kernel: "5" pad: true } }'))
    assert [(d.message.split(",")[0], where(d)) for d in diags] == [
        ("expected an integer for field 'num_filters' (optional int32)", (4, 90)),
        ("expected an integer for field 'kernel' (optional int32)", (4, 102)),
        ("expected an integer for field 'pad' (optional int32)", (4, 111))]
    (d,) = errors_of(build_singa, 'neuralnet { layer { name: "x" type: "kConvolution" } }', version="0.1")
    assert "found the string \"kConvolution\"" in d.message and "pre-0.1" in d.notes[0].message
    (d,) = errors_of(build_singa, v3('  layer { name: "r" type: kReLU srclayers: "data" share_src_blobs: 2 }'))
    assert "expected true or false" in d.message


def test_booleans_and_ints_in_float_fields():
    for b in ("true", "True", "t", "1"):
        job = read_job(v3(f'  layer {{ name: "r" type: kReLU srclayers: "data" share_src_blobs: {b} }}'))
        assert job.job.get("neuralnet").get("layer")[1].get("share_src_blobs") is True
    job = read_job(v3('  layer { name: "r" type: kReLU srclayers: "data" relu_conf { negative_slope: 2 } }'))
    assert job.job.get("neuralnet").get("layer")[1].get("relu_conf").get("negative_slope") == 2.0


def test_pre01_and_model_wrapper():
    (d,) = errors_of(build_singa, 'model { neuralnet { layer { name: "x" type: "kReLU" } } }')
    assert "pre-0.1" in d.message
    (d,) = errors_of(build_singa, 'model { neuralnet { } }', version="0.3")
    assert "unknown field 'model' in JobProto (the `model { }` wrapper" in d.message


# ------------------------------------------------------------------------------------------
# Section 11 conditions

def test_b1_share_from_renamed_by_unrolling_and_fixup():
    body = ip("fc", "data", 784) + ('\n  layer { name: "fc2" type: kInnerProduct srclayers: "fc" innerproduct_conf { '
                                    'num_output: 784 } param { name: "w2" share_from: "w_fc" } param { name: "b2" } }')
    (d,) = errors_of(build_singa, v3(body))
    assert "owner is now '0#w_fc'" in d.message and where(d) == (5, 128)
    net = build_singa(v3(body), fix_share_from=True)
    assert net.node("0#fc2@0").params[0].share_from == "0#w_fc" and net.non_singa
    # naming the unrolled owner explicitly is what SINGA accepts
    assert build_singa(v3(body.replace('share_from: "w_fc"', 'share_from: "0#w_fc"'))).non_singa == []


V1 = ('name: "j" train_steps: 1 train_one_batch { alg: kBP } updater { } cluster { workspace: "w" '
      'nworkers_per_group: %d }\nneuralnet {\n'
      ' layer { name: "data" type: kShardData sharddata_conf { path: "d" batchsize: 64 } }\n'
      ' layer { name: "mnist" type: kMnist srclayers: "data" mnist_conf { norm_a: 1 norm_b: 0 } }\n%s\n}')


def test_b17_b4_b13_v01():
    """(B3, v0.1's missing bridges with K = 2, is the partition pass's: tests/test_partition.py.)"""
    pool = ' layer { name: "p" type: kPooling srclayers: "mnist" pooling_conf { kernel: 2 %s} partition_dim: -1 }'
    (d,) = errors_of(build_singa, V1 % (1, pool % ""))
    assert "a concate layer needs at least 2 sources" in d.message and where(d) == (5, 10)  # B17
    net = build_singa(V1 % (2, pool.replace("partition_dim: -1", "") % "stride: 2 pad: 1 "))
    assert [n.name for n in net.nodes] == ["data@00", "mnist@00", "p@00"] and net.workers == 2
    assert net.node("data@00").batchsize == 64 and net.node("p@00").shape == [64, 1, 14, 14]
    assert any("ignores pad" in d.message for d in net.diagnostics)  # B13
    fan = (' layer { name: "a" type: kReLU srclayers: "mnist" }\n layer { name: "b" type: kSigmoid srclayers: "a" }\n'
           ' layer { name: "c" type: kSigmoid srclayers: "a" }\n'
           ' layer { name: "l" type: kEuclideanLoss srclayers: "b" srclayers: "c" }')
    net = build_singa(V1 % (1, fan))
    assert [n.name for n in net.nodes] == ["data@00", "mnist@00", "a@00", "a@00+", "b@00", "c@00", "l@00"]
    assert net.node("b@00").srcs == ["a@00+"] and net.node("a@00+").type == "kSplit"
    assert any("SINGA v0.1 cannot run this net" in d.message for d in net.diagnostics)  # B4


def test_b5_unroll_overflow():
    text = ('neuralnet { unroll_len: 3\n layer { name: "data" type: kRecordInput unroll_len: 1 store_conf { '
            'batchsize: 4 shape: 5 } }\n layer { name: "r" type: kReLU srclayers: "data" } }')
    (d,) = errors_of(build_singa, text)
    assert "copy 1 of layer 'r' reads copy 1 of source 'data'" in d.message and where(d) == (3, 43)
    assert "kUnrollOneToAll" in d.notes[0].message
    net = build_singa(text.replace('srclayers: "data"', 'srclayers: "data" unroll_conn_type: kUnrollOneToAll'))
    assert [n.name for n in net.nodes] == ["0#data@0", "0#r@0", "1#r@0", "2#r@0"]
    shifted = text.replace('unroll_len: 1', 'unroll_len: 3').replace(
        'type: kReLU srclayers: "data"', 'type: kDummy srclayers: "data" shift: 1 dummy_conf { input: true shape: 4 }')
    net = build_singa(shifted)
    assert net.node("2#r@0").srcs == ["1#data@0"] and net.node("0#r@0").srcs == []
    (d,) = errors_of(build_singa, shifted.replace("kDummy", "kReLU"))  # copy 0 gets no source at all
    assert "kReLU needs exactly 1 source layer, got 0" in d.message


def test_b8_cycles():
    body = ('  layer { name: "a" type: kReLU srclayers: "data" srclayers: "c" }\n'
            '  layer { name: "b" type: kReLU srclayers: "a" }\n  layer { name: "c" type: kReLU srclayers: "b" }')
    (d,) = errors_of(build_singa, v3(body))
    assert "the net has a cycle (b -> c -> a -> b)" in d.message


def test_b10_missing_params():
    (d,) = errors_of(build_singa, v3('  layer { name: "fc" type: kInnerProduct srclayers: "data" innerproduct_conf { '
                                     'num_output: 10 } param { name: "w" } }'))
    assert "needs 2 param entries (`param { ... }`), found 1" in d.message and where(d) == (4, 11)


def test_b11_unnamed_params():
    (d,) = errors_of(build_singa, v3('  layer { name: "fc" type: kInnerProduct srclayers: "data" innerproduct_conf { '
                                     'num_output: 10 } param { } param { } }'))
    assert "SINGA names every unnamed param '0#'" in d.message


def test_b12_include_and_exclude():
    (d,) = errors_of(build_singa, 'neuralnet { layer { name: "d" type: kRecordInput include: kTrain '
                                  'store_conf{shape:3}}'
                                  '\n layer { name: "r" type: kReLU srclayers: "d" exclude: kTest } }')
    assert "uses both 'include' and 'exclude'" in d.message and where(d) == (2, 47)


def test_names_with_reserved_characters():
    (d,) = errors_of(build_singa, v3(ip("f@c", "data")))
    assert "contains '@'" in d.message


def test_dev_branch_fields():
    text = v3('  layer { name: "d2" type: kRecordInput store_conf { ratio: 5 } include: kTest }')
    (d,) = errors_of(build_singa, text, version="0.3")
    assert "unknown field 'ratio' in StoreProto" in d.message and "version='dev'" in d.notes[0].message
    assert build_singa(text).version == "dev"


def test_user_plugin_and_explicit_extension_proto():
    proto = ('message FooProto { optional int32 width = 1; }\n'
             'extend singa.LayerProto { optional FooProto foo_conf = 1001; }')
    schema = load_schema("0.3").copy()
    assert load_extension_proto(proto, schema, file="foo.proto") == ["foo_conf"]
    rule = UserLayerRule(lambda conf, srcs, K: ([srcs[0][0], conf.extensions()["foo_conf"].get("width")], []))
    body = '  layer { name: "x" user_type: "kFoo" srclayers: "data" [foo_conf] { width: 7 } }'
    net = build_singa(v3(body), extension_protos=[proto], plugins={"kFoo": rule})
    assert net.node("0#x@0").shape == [64, 7] and net.node("0#x@0").type == "user:kFoo"
    (d,) = errors_of(load_extension_proto, proto.replace("1001", "101"), load_schema("0.3").copy(), file="foo.proto")
    assert "outside the extension range" in d.message and where(d) == (2, 45)
    assert load_extension_proto(proto.replace("1001", "101"), load_schema("0.1").copy(), file="f.proto")
