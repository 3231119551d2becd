"""`netc export --format singa` of a SINGA v0.1 net (issue 24): every LayerType of v0.1's enum may be
written (src/proto/job.proto at tag v0.1.0 declares kSlice = 12, kSplit = 13, kBridgeSrc = 15 and
kBridgeDst = 16 beside the neuron and loss layers), and the written job rebuilds the same net.

An earlier exporter refused kSlice and kBridgeSrc as types "SINGA v0.1 does not have".
"""
from __future__ import annotations

import re

import pytest

from netc.cli import main
from netc.export.singa import _V01_TYPES
from netc.frontend import load
from netc.ir.printer import print_module
from netc import pipelines
from netc.pipelines import Options

from test_singa_layer_types import LAYER_TYPES_0_1

HEAD = """name: "v01"
train_steps: 10
train_one_batch { alg: kBP }
updater { type: kSGD }
neuralnet {
  layer { name: "data" type: kShardData sharddata_conf { path: "mnist/train_shard" batchsize: 16 } }
  layer { name: "mnist" type: kMnist srclayers: "data" }
  layer { name: "label" type: kLabel srclayers: "data" }
  layer { name: "ip" type: kInnerProduct srclayers: "mnist" innerproduct_conf { num_output: 10 }
          param { name: "w" init { type: kGaussian std: 0.01 } } param { name: "b" init { type: kConstant value: 0 } } }
"""
TAIL = """  layer { name: "a" type: kReLU srclayers: "%s" }
  layer { name: "b" type: kSigmoid srclayers: "%s" }
  layer { name: "cat" type: kConcate srclayers: "b" srclayers: "a" concate_conf { concate_dim: 1 } }
  layer { name: "loss" type: kSoftmaxLoss srclayers: "cat" srclayers: "label" }
}
cluster { workspace: "w" }
"""
JOBS = {
    # v0.1's SliceProto has only slice_dim: the number of slices is the number of readers
    "kSlice": '  layer { name: "sl" type: kSlice srclayers: "ip" slice_conf { slice_dim: 1 } }\n' + TAIL % ("sl", "sl"),
    "kBridgeSrc": ('  layer { name: "br" type: kBridgeSrc srclayers: "ip" }\n'
                   '  layer { name: "bd" type: kBridgeDst srclayers: "br" }\n' + TAIL % ("bd", "bd")),
}


def test_v01_types_are_v01s_enum():
    assert _V01_TYPES == set(LAYER_TYPES_0_1) - {"kUserLayer"}


def ir_of(path):
    m = load(str(path))
    pipelines.inference(m, Options(phase="train"))
    text = re.sub(r'source = "[^"]*"', "source", print_module(m, with_locs=False))
    return re.sub(r'title = "SINGA (\S+) job[^"]*"', 'title = "SINGA job"', text)


@pytest.mark.parametrize("t", sorted(JOBS))
def test_v01_export_writes_the_type(t, tmp_path, capsys):
    src, out = tmp_path / "in" / "v01.conf", tmp_path / "out" / "v01.conf"
    src.parent.mkdir()
    out.parent.mkdir()
    src.write_text(HEAD + JOBS[t])
    assert main(["export", str(src), "--format", "singa", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "does not have" not in err, err
    text = out.read_text()
    assert f"type: {t} " in text
    if t == "kSlice":
        assert re.search(r"slice_conf \{ slice_dim: 1 \}", text)   # no num_slices: v0.1 has none
    else:
        assert 'type: kBridgeDst srclayers: "br"' in text
    # the written job is a v0.1 job of the same net
    assert main(["check", str(out)]) == 0
    capsys.readouterr()
    assert ir_of(out) == ir_of(src)
