"""Every LayerType of SINGA 0.1, 0.2 and 0.3 (issue 24): a minimal job.conf using the type goes through
`netc check` and either passes or is refused with ONE located error that names the type (file:line:col,
the source line and a caret, exit 1, no traceback). The names are SINGA's own enums, copied below as
data; docs/singa.md lists every one with its status in netc."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from netc.cli import main

ROOT = Path(__file__).resolve().parents[1]

# enum LayerType of src/proto/job.proto, as SINGA wrote it (apache/singa), in the enum's order.
# 0.1.0: tag v0.1.0 (commit 958dfebbe85cb5235f9875dcefa4fa91c0f98969)
LAYER_TYPES_0_1 = [
    "kLMDBData", "kPrefetch", "kShardData", "kLabel", "kMnist", "kRGBImage", "kConvolution", "kCConvolution",
    "kCPooling", "kDropout", "kInnerProduct", "kLRN", "kPooling", "kReLU", "kRBMVis", "kRBMHid", "kSigmoid",
    "kSTanh", "kSoftmaxLoss", "kEuclideanLoss", "kBridgeDst", "kBridgeSrc", "kConcate", "kSlice", "kSplit",
    "kUserLayer",
]
# 0.2.0: tag v0.2.0 (commit 1cfdac6c304018fc295a0fe8e0eca740cb62817f)
LAYER_TYPES_0_2 = [
    "kCSVInput", "kImagePreprocess", "kPrefetch", "kRecordInput", "kLMDBData", "kLabel", "kMnist", "kRGBImage",
    "kShardData", "kCharRNN", "kRNNLabel", "kOneHot", "kConvolution", "kCConvolution", "kDropout", "kDummy",
    "kInnerProduct", "kLRN", "kPooling", "kCPooling", "kRBMHid", "kRBMVis", "kReLU", "kSTanh", "kSigmoid",
    "kSoftmax", "kGRU", "kEmbedding", "kCudnnConv", "kCudnnPool", "kCudnnLRN", "kCudnnSoftmax",
    "kCudnnActivation", "kEuclideanLoss", "kSoftmaxLoss", "kCudnnSoftmaxLoss", "kAccuracy", "kArgSort",
    "kCSVOutput", "kRecordOutput", "kCharRNNOutput", "kBridgeDst", "kBridgeSrc", "kConcate", "kSlice", "kSplit",
    "kRNNDummy", "kUserLayer",
]
# 0.3.0: tag v0.3.0-rc3 (commit d547a861068973db7d8fc82f9c733e95307a40f1, the corpus' 0.3.0)
LAYER_TYPES_0_3 = [
    "kCSVInput", "kImagePreprocess", "kRecordInput", "kLMDBData", "kLabel", "kMnist", "kRGBImage", "kShardData",
    "kCharRNN", "kRNNLabel", "kOneHot", "kConvolution", "kCConvolution", "kDropout", "kDummy", "kInnerProduct",
    "kLRN", "kPooling", "kCPooling", "kRBMHid", "kRBMVis", "kReLU", "kSTanh", "kSigmoid", "kSoftmax", "kGRU",
    "kEmbedding", "kActivation", "kBM", "kCudnnConv", "kCudnnPool", "kCudnnLRN", "kCudnnSoftmax",
    "kCudnnActivation", "kCudnnBM", "kEuclideanLoss", "kSoftmaxLoss", "kCudnnSoftmaxLoss", "kAccuracy",
    "kArgSort", "kCSVOutput", "kRecordOutput", "kCharRNNOutput", "kBridgeDst", "kBridgeSrc", "kConcate", "kSlice",
    "kSplit", "kRNNDummy", "kUserLayer",
]
ENUMS = {"0.1": LAYER_TYPES_0_1, "0.2": LAYER_TYPES_0_2, "0.3": LAYER_TYPES_0_3}

# What netc does with each (docs/singa.md has the why): the types it refuses, per version; every other
# type passes `netc check` in its minimal job.
REFUSED = {
    "0.1": {"kPrefetch", "kUserLayer"},
    "0.2": {"kPrefetch", "kUserLayer"},
    "0.3": {"kUserLayer"},
}

HEAD = """name: "t"
train_steps: 1
train_one_batch {{ alg: {alg} }}
updater {{ type: kSGD learning_rate {{ type: kFixed base_lr: 0.01 }} }}
neuralnet {{
{unroll}"""
TAIL = """}
cluster { workspace: "w" }
"""
# the layers every job of a version starts with: an image source {img} [4, 1, 8, 8] (v0.1: [4, 1, 28, 28]),
# its labels {label}, and a vector {vec} [4, 10]
BASE = {
    "0.1": """  layer { name: "data" type: kShardData sharddata_conf { path: "mnist_shard" batchsize: 4 } }
  layer { name: "img" type: kMnist srclayers: "data" mnist_conf { norm_a: 255 norm_b: 0 } }
  layer { name: "label" type: kLabel srclayers: "data" }
  layer { name: "vec" type: kInnerProduct srclayers: "img" innerproduct_conf { num_output: 10 }
          param { name: "wv" } param { name: "bv" } }
""",
    "0.2+": """  layer { name: "data" type: kRecordInput store_conf { backend: "kvfile" path: "d" batchsize: 4 shape: 1 shape: 8
          shape: 8 } }
  layer { name: "vec" type: kInnerProduct srclayers: "data" innerproduct_conf { num_output: 10 }
          param { name: "wv" } param { name: "bv" } }
""",
}
NAMES = {"0.1": {"img": "img", "label": "label", "vec": "vec"}, "0.2+": {"img": "data", "label": "data", "vec": "vec"}}

# a recurrent job (SINGA's char-rnn, 3 steps): kCharRNN characters -> kOneHot, kRNNLabel, a kGRU
RNN = """  layer { name: "data" type: kCharRNN unroll_len: 1 char_rnn_conf { path: "in.txt" vocab_path: "v.txt" batchsize: 4
          unroll_len: 3 } }
  layer { name: "onehot" type: kOneHot srclayers: "data" unroll_conn_type: kUnrollOneToAll onehot_conf { vocab_size: 5 } }
  layer { name: "label" type: kRNNLabel srclayers: "data" unroll_conn_type: kUnrollOneToAll }
"""
GRU = """  layer { name: "%s" type: kGRU srclayers: "%s" gru_conf { dim_hidden: 6 }
          param { name: "z_hx" } param { name: "r_hx" } param { name: "c_hx" } param { name: "z_hh" }
          param { name: "r_hh" } param { name: "c_hh" } }
"""
RNN_TAIL = """  layer { name: "ip" type: kInnerProduct srclayers: "%s" innerproduct_conf { num_output: 5 }
          param { name: "w" } param { name: "b" } }
  layer { name: "loss" type: kSoftmaxLoss srclayers: "ip" srclayers: "label" }
"""
RNN_TYPES = {"kCharRNN", "kOneHot", "kRNNLabel", "kGRU", "kEmbedding", "kCharRNNOutput", "kRNNDummy"}


def shard(name, path="mnist_x", kind="kShardData", conf="sharddata_conf"):
    return f'  layer {{ name: "{name}" type: {kind} {conf} {{ path: "{path}" batchsize: 4 }} }}\n'


MNIST = '  layer { name: "%s" type: kMnist srclayers: "%s" mnist_conf { norm_a: 255 norm_b: 0 } }\n'

# the layer of each type (its name is "x"), with what it needs around it
LAYERS = {
    "kShardData": shard("x") + MNIST % ("xm", "x"),
    "kLMDBData": shard("x", kind="kLMDBData", conf="lmdbdata_conf") + MNIST % ("xm", "x"),
    "kMnist": shard("xs") + MNIST % ("x", "xs"),
    "kRGBImage": shard("xs", "cifar_x") + '  layer { name: "x" type: kRGBImage srclayers: "xs" rgbimage_conf { cropsize: 28 } }\n',
    "kLabel": shard("xs") + '  layer { name: "x" type: kLabel srclayers: "xs" }\n',
    "kPrefetch": ('  layer { name: "x" type: kPrefetch prefetch_conf {\n'
                  '    sublayers { name: "xs" type: kShardData sharddata_conf { path: "mnist_x" batchsize: 4 } }\n'
                  '    sublayers { name: "xm" type: kMnist srclayers: "xs" mnist_conf { norm_a: 255 norm_b: 0 } } } }\n'),
    "kRecordInput": '  layer { name: "x" type: kRecordInput store_conf { backend: "kvfile" path: "x" batchsize: 4 shape: 8 } }\n',
    "kCSVInput": '  layer { name: "x" type: kCSVInput store_conf { backend: "textfile" path: "x.csv" batchsize: 4 shape: 8 } }\n',
    "kImagePreprocess": '  layer { name: "x" type: kImagePreprocess srclayers: "{img}" rgbimage_conf { cropsize: 6 } }\n',
    "kConvolution": '  layer { name: "x" type: kConvolution srclayers: "{img}" convolution_conf { num_filters: 2 kernel: 3 }\n'
                    '          param { name: "w" } param { name: "b" } }\n',
    "kPooling": '  layer { name: "x" type: kPooling srclayers: "{img}" pooling_conf { pool: MAX kernel: 2 stride: 2 } }\n',
    "kLRN": '  layer { name: "x" type: kLRN srclayers: "{img}" lrn_conf { local_size: 3 alpha: 0.0001 beta: 0.75 } }\n',
    "kDropout": '  layer { name: "x" type: kDropout srclayers: "{vec}" dropout_conf { dropout_ratio: 0.5 } }\n',
    "kInnerProduct": '  layer { name: "x" type: kInnerProduct srclayers: "{vec}" innerproduct_conf { num_output: 3 }\n'
                     '          param { name: "w" } param { name: "b" } }\n',
    "kReLU": '  layer { name: "x" type: kReLU srclayers: "{vec}" }\n',
    "kSigmoid": '  layer { name: "x" type: kSigmoid srclayers: "{vec}" }\n',
    "kSTanh": '  layer { name: "x" type: kSTanh srclayers: "{vec}" }\n',
    "kActivation": '  layer { name: "x" type: kActivation srclayers: "{vec}" activation_conf { type: SIGMOID } }\n',
    "kSoftmax": '  layer { name: "x" type: kSoftmax srclayers: "{vec}" }\n',
    "kBM": '  layer { name: "x" type: kBM srclayers: "{img}" param { name: "g" } param { name: "b" } param { name: "m" }\n'
           '          param { name: "v" } }\n',
    "kSoftmaxLoss": '  layer { name: "x" type: kSoftmaxLoss srclayers: "{vec}" srclayers: "{label}" }\n',
    "kEuclideanLoss": ('  layer { name: "v2" type: kSigmoid srclayers: "{vec}" }\n'
                       '  layer { name: "x" type: kEuclideanLoss srclayers: "v2" srclayers: "{vec}" }\n'),
    "kAccuracy": '  layer { name: "x" type: kAccuracy srclayers: "{vec}" srclayers: "{label}" }\n',
    "kArgSort": '  layer { name: "x" type: kArgSort srclayers: "{vec}" argsort_conf { topk: 2 } }\n',
    "kCSVOutput": '  layer { name: "x" type: kCSVOutput srclayers: "{vec}" store_conf { backend: "textfile" path: "o.csv" } }\n',
    "kRecordOutput": '  layer { name: "x" type: kRecordOutput srclayers: "{vec}" store_conf { backend: "kvfile" path: "o.bin" } }\n',
    "kRBMVis": ('  layer { name: "x" type: kRBMVis srclayers: "{img}" srclayers: "h" rbm_conf { hdim: 5 }\n'
                '          param { name: "w" } param { name: "vb" } }\n'
                '  layer { name: "h" type: kRBMHid srclayers: "x" rbm_conf { hdim: 5 } param { name: "w2" share_from: "w" }\n'
                '          param { name: "hb" } }\n'),
    "kDummy": ('  layer { name: "x" type: kDummy dummy_conf { input: true shape: 4 shape: 10 } }\n'
               '  layer { name: "d2" type: kDummy srclayers: "x" dummy_conf { output: true } }\n'),
    "kBridgeSrc": ('  layer { name: "x" type: kBridgeSrc srclayers: "{vec}" }\n'
                   '  layer { name: "d" type: kBridgeDst srclayers: "x" }\n'),
    "kConcate": ('  layer { name: "v2" type: kSigmoid srclayers: "{vec}" }\n'
                 '  layer { name: "x" type: kConcate srclayers: "{vec}" srclayers: "v2" concate_conf { concate_dim: 1 num_concates: 2 } }\n'),
    "kSlice": ('  layer { name: "x" type: kSlice srclayers: "{vec}" slice_conf { slice_dim: 1 num_slices: 2 } }\n'
               '  layer { name: "s1" type: kSigmoid srclayers: "x" }\n'
               '  layer { name: "s2" type: kReLU srclayers: "x" }\n'),
    "kSplit": ('  layer { name: "x" type: kSplit srclayers: "{vec}" split_conf { num_splits: 2 } }\n'
               '  layer { name: "s1" type: kSigmoid srclayers: "x" }\n'
               '  layer { name: "s2" type: kReLU srclayers: "x" }\n'),
    "kUserLayer": '  layer { name: "x" type: kUserLayer user_type: "kMyLayer" srclayers: "{vec}" }\n',
}
SAME_AS = {"kCConvolution": "kConvolution", "kCudnnConv": "kConvolution", "kCPooling": "kPooling",
           "kCudnnPool": "kPooling", "kCudnnLRN": "kLRN", "kCudnnSoftmax": "kSoftmax",
           "kCudnnActivation": "kActivation", "kCudnnBM": "kBM", "kCudnnSoftmaxLoss": "kSoftmaxLoss",
           "kRBMHid": "kRBMVis", "kBridgeDst": "kBridgeSrc"}


def rnn_job(t: str) -> str:
    """The recurrent job with the layer of type t in it."""
    if t in ("kCharRNN", "kOneHot", "kRNNLabel", "kGRU"):
        return RNN + GRU % ("x" if t == "kGRU" else "gru", "onehot") + RNN_TAIL % ("x" if t == "kGRU" else "gru")
    if t == "kEmbedding":
        return (RNN + '  layer { name: "x" type: kEmbedding srclayers: "data" unroll_conn_type: kUnrollOneToAll\n'
                '          embedding_conf { vocab_size: 5 feature_dim: 4 } param { name: "emb" } }\n'
                + GRU % ("gru", "x") + RNN_TAIL % "gru")
    if t == "kCharRNNOutput":
        return (RNN + GRU % ("gru", "onehot") + RNN_TAIL % "gru"
                + '  layer { name: "x" type: kCharRNNOutput srclayers: "ip" }\n')
    if t == "kRNNDummy":   # SINGA's char-rnn sample.conf: random characters in, a softmax out
        return ('  layer { name: "x" type: kRNNDummy rnn_dummy_conf { shape: 4 integer: true low: 0 high: 5 } }\n'
                '  layer { name: "onehot" type: kOneHot srclayers: "x" onehot_conf { vocab_size: 5 } }\n'
                + GRU % ("gru", "onehot") + RNN_TAIL.split("  layer { name: \"loss\"")[0] % "gru"
                + '  layer { name: "out" type: kSoftmax srclayers: "ip" }\n')
    raise KeyError(t)


def job(version: str, t: str) -> str:
    """The minimal job.conf of layer type t in SINGA `version`'s format."""
    if t in RNN_TYPES:
        unroll = "" if t == "kRNNDummy" else "  unroll_len: 3\n"   # sample.conf: one step
        return HEAD.format(alg="kBPTT", unroll=unroll) + rnn_job(t) + TAIL
    if t == "kPrefetch":
        return HEAD.format(alg="kBP", unroll="") + LAYERS[t] + TAIL
    base = "0.1" if version == "0.1" else "0.2+"
    layer = LAYERS[SAME_AS.get(t, t)]
    if t in SAME_AS:
        layer = layer.replace(f"type: {SAME_AS[t]} ", f"type: {t} ", 1) if t not in ("kRBMHid", "kBridgeDst") else layer
    if version != "0.1":   # v0.2+ unrolling names every param '0#<name>' (SINGA's share_from must say so)
        layer = layer.replace('share_from: "w"', 'share_from: "0#w"')
    if version == "0.1":   # v0.1's SliceProto / ConcateProto have only the dimension
        layer = layer.replace(" num_slices: 2", "").replace(" num_concates: 2", "")
    for k, v in NAMES[base].items():
        layer = layer.replace("{" + k + "}", v)
    return HEAD.format(alg="kBP", unroll="") + BASE[base] + layer + TAIL


CASES = [(v, t) for v, names in ENUMS.items() for t in names]


@pytest.mark.parametrize("version,t", CASES, ids=[f"{v}-{t}" for v, t in CASES])
def test_every_layer_type_passes_or_is_refused_located(version, t, tmp_path, capsys):
    conf = tmp_path / f"{t}.conf"
    text = job(version, t)
    assert re.search(rf"\btype: {t}\b", text), "the job uses the type"
    conf.write_text(text)
    rc = main(["check", "--singa-version", version, str(conf)])
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err.lower()
    if t not in REFUSED[version]:
        assert rc == 0 and "error:" not in err, err
        return
    assert rc == 1, err
    lines = err.splitlines()
    heads = [i for i, x in enumerate(lines) if ": error: " in x or x.startswith("error: ") or "netc: error" in x]
    assert len(heads) == 1, err
    m = re.match(rf"^{re.escape(str(conf))}:(\d+):(\d+): error: (.*)$", lines[heads[0]])
    assert m, err
    line, col, msg = int(m.group(1)), int(m.group(2)), m.group(3)
    assert t in msg, msg
    assert lines[heads[0] + 1] == text.splitlines()[line - 1]
    assert re.fullmatch(r" {%d}\^~*" % (col - 1), lines[heads[0] + 2]), lines[heads[0] + 2]


def test_the_docs_list_every_type_with_its_status():
    """docs/singa.md has one row per LayerType: `| kName | versions | status | ... |`."""
    doc = (ROOT / "docs" / "singa.md").read_text()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(k\w+)` \|.*$", doc, re.M)}
    names = {t for ts in ENUMS.values() for t in ts}
    assert names <= set(rows), sorted(names - set(rows))
    for v, ts in ENUMS.items():
        for t in ts:
            assert v in rows[t].split("|")[2], (t, v)
    for v, ts in REFUSED.items():
        for t in ts:
            assert "refused" in rows[t], t


def test_embedding_in_a_rolled_net_is_a_table_lookup(tmp_path):
    """kEmbedding in a char-rnn net: netc.embedding over the [T, B] ids, its table SINGA's param 0
    [vocab_size, feature_dim] (0.2.0 neuron_layer/embedding.cc: row word_idx[i] of the table), trained."""
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load
    from netc import pipelines
    from netc.pipelines import Options
    from netc.runtime.reference import run_reference
    import torch
    conf = tmp_path / "emb.conf"
    conf.write_text(job("0.3", "kEmbedding"))
    diag = DiagnosticEngine()
    m = load(str(conf), diag, 1)
    pipelines.inference(m, Options(phase="train"), diag)
    ops = {op.attrs.get("name"): op for op in m.networks()[0].regions[0].ops}
    x = ops["x"]
    assert x.name == "netc.embedding" and x.operands[0].owner is ops["data"]
    assert list(x.results[0].type.shape) == [3, 4, 4]
    table = {p.attrs["sym_name"]: list(p.attrs["type"].shape) for p in m.params()}
    assert table["emb"] == [5, 4]
    ids = torch.tensor([[0, 4, 2, 1], [3, 3, 0, 4], [1, 2, 3, 0]], dtype=torch.int32)
    emb = torch.arange(20, dtype=torch.float64).reshape(5, 4)
    out = run_reference(m, inputs={"data": ids, "label": ids}, params={"emb": emb}, intermediates=True)
    assert torch.equal(out["x"], emb[ids.long()])


@pytest.mark.parametrize("version,t", CASES, ids=[f"{v}-{t}" for v, t in CASES])
def test_a_bare_layer_of_every_type_is_checked_or_located(version, t, tmp_path, capsys):
    """The type with nothing it needs (no *_conf, no params, one source): every error netc reports is
    located in the file, none is internal."""
    base = "0.1" if version == "0.1" else "0.2+"
    src = NAMES[base]["img"]
    conf = tmp_path / f"bare_{t}.conf"
    conf.write_text(HEAD.format(alg="kBP", unroll="") + BASE[base]
                    + f'  layer {{\n    name: "x"\n    type: {t}\n    srclayers: "{src}"\n  }}\n' + TAIL)
    rc = main(["check", "--singa-version", version, str(conf)])
    err = capsys.readouterr().err
    assert rc in (0, 1) and "Traceback" not in err and "internal error" not in err.lower(), err
    errors = [x for x in err.splitlines() if "error:" in x and "errors generated" not in x]
    assert (rc == 1) == bool(errors), err
    for x in errors:
        assert re.match(rf"^{re.escape(str(conf))}:\d+:\d+: error: ", x), x
