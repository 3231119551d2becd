"""Issue 24: a corpus job's parameter total in netc equals SINGA's, for every conf and phase the
SINGA oracle holds (/work/shared/reference/singa: per-node param shapes computed by a re-implementation
of SINGA's own Setup code, see /work/shared/reference/README.md), and for SINGA's released examples it
does not hold (summed by hand from SINGA's Setup code, at the end).

SINGA's total is read from the oracle alone: every param shape of every node, less the params that
`share_from` another (SINGA's Param::ShareFrom keeps one copy of the values: the sharer's shape is
recorded but its data is the owner's). Which params share is read from the conf with a small reading of
its own (the generic protobuf-text parser, not the SINGA front end): a node `<layer>@00` (0.1) or
`0#<layer>@0` (0.2/0.3) has the layer's `param { }` entries in order, and the i-th recorded shape is the
i-th entry. netc's total is the module's parameters that are not shared (`share_from` unset).
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from netc import pipelines
from netc.diagnostics import DiagnosticEngine
from netc.frontend import prototext as pt
from netc.frontend.singa.to_ir import import_singa
from netc.pipelines import Options

SHARED = Path(__file__).resolve().parents[2] / "shared"
CORPUS = SHARED / "corpus" / "singa"
REF = SHARED / "reference" / "singa"
REFS = sorted(p.name for p in REF.glob("*.jsonl")) if REF.is_dir() else []
PHASE = {"kTrain": "train", "kTest": "test", "kVal": "val"}
pytestmark = pytest.mark.skipif(not CORPUS.is_dir() or not REFS, reason="/work/shared corpus and oracle not here")


def layer_params(conf_text: str) -> dict[str, list[str | None]]:
    """{layer name: [share_from of each `param { }` entry, in order (None: owns its values)]}, read
    with the prototext parser only (no schema, no SINGA front end)."""
    out = {}

    def walk(msg):
        for f in msg:
            if not f.is_message:
                continue
            if f.name == "layer" and f.value.first("name") is not None:
                params = []
                for p in f.value.all("param"):
                    share = p.value.first("share_from") if p.is_message else None
                    params.append(share.value.value if share is not None else None)
                out[f.value.first("name").value.value] = params
            walk(f.value)

    walk(pt.parse_text(conf_text, "conf"))
    return out


def layer_of(node: str) -> str:
    """SINGA's node name back to the conf's layer name: 'Inner1@00' (0.1), '0#conv1@0' (0.2/0.3)."""
    return re.sub(r"^\d+#", "", node.rsplit("@", 1)[0])


def singa_total(ref: str, conf_text: str) -> tuple[int, int]:
    """(SINGA's total, how many shared params it leaves out) from the oracle's nodes and the conf."""
    nodes = [json.loads(line) for line in (REF / ref).read_text().splitlines() if line.strip()]
    shares = layer_params(conf_text)
    total = dropped = 0
    for n in nodes:
        entries = shares.get(layer_of(n["node"]), [])
        for i, shape in enumerate(n.get("params", [])):
            if i < len(entries) and entries[i] is not None:
                dropped += 1
                continue
            total += math.prod(shape)
    return total, dropped


def netc_total(path: Path, phase: str) -> int:
    diag = DiagnosticEngine()
    m = import_singa(path.read_text(), str(path), diag)
    pipelines.inference(m, Options(phase=phase), diag)
    return sum(math.prod(p.attrs["type"].shape) for p in m.params() if p.attrs.get("share_from") is None)


@pytest.mark.parametrize("ref", REFS)
def test_parameter_total_is_singas(ref):
    conf, phase = ref.split(".conf.")[0] + ".conf", ref.split(".conf.")[1].split(".")[0]
    path = CORPUS / conf
    singa, _ = singa_total(ref, path.read_text())
    assert netc_total(path, PHASE[phase]) == singa


def test_every_oracle_file_is_covered():
    """The 22 files of the oracle (11 confs x kTrain/kTest), and the shared params the reading finds."""
    assert len(REFS) == 22
    dropped = {r: singa_total(r, (CORPUS / (r.split(".conf.")[0] + ".conf")).read_text())[1] for r in REFS}
    # rbm1-4: RBMHid's weight is RBMVis'; the autoencoder's four decoder weights are the encoder's
    assert {r.split(".conf.")[0]: d for r, d in dropped.items() if d} == {
        "0.1.0_rbm_rbm1": 1, "0.1.0_rbm_rbm2": 1, "0.1.0_rbm_rbm3": 1, "0.1.0_rbm_rbm4": 1,
        "0.1.0_rbm_autoencoder": 4}


@pytest.mark.parametrize("conf,total", [
    # hand sums of the oracle's shapes, so the reading above is itself checked
    ("0.1.0_rbm_autoencoder.conf", 784 * 1000 + 1000 + 1000 * 500 + 500 + 500 * 250 + 250 + 250 * 30 + 30
     + 250 + 500 + 1000 + 784),
    ("0.3.0_mnist_job.conf", 784 * 2500 + 2500 + 2500 * 2000 + 2000 + 2000 * 1500 + 1500 + 1500 * 1000 + 1000
     + 1000 * 500 + 500 + 500 * 10 + 10),
])
def test_singa_total_by_hand(conf, total):
    assert singa_total(conf + ".kTrain.K1.jsonl", (CORPUS / conf).read_text())[0] == total


# SINGA's released examples the oracle does not hold, summed by hand from SINGA v0.3.0-rc3's Setup code:
# ConvolutionLayer::Setup (convolution.cc:88-91) weight [num_filters, channels * k * k] and bias
# [num_filters]; InnerProductLayer::Setup (inner_product.cc:52-55) [hdim, vdim] and [hdim]; GRULayer::Setup
# (gru.cc:84-95) three [hdim, vdim], three [hdim, hdim], three [hdim]; BMLayer::Setup (bm.cc:43-53) four
# [1, C, 1, 1]; spatial sizes by PoolingLayer's floor((h + 2 pad - k) / s) + 1 and the convolution's.
def conv(c_in, nf, k):
    return nf * c_in * k * k + nf


def ip(v, h):
    return h * v + h


ALEXNET = (conv(3, 96, 11)            # 227 -> 55, pool 27
           + conv(96, 256, 5)          # 27, pool 13
           + conv(256, 384, 3) + conv(384, 384, 3) + conv(384, 256, 3)   # 13, pool5 6
           + ip(256 * 6 * 6, 4096) + ip(4096, 4096) + ip(4096, 1000))
CHAR_RNN = 3 * 512 * 101 + 3 * 512 * 512 + 3 * 512 + ip(512, 101)   # one GRU (the second is commented out)
CIFAR10 = conv(3, 32, 5) + conv(32, 32, 5) + conv(32, 64, 5) + ip(64 * 3 * 3, 10)   # 32, pool 15, 7, 3
# cudnn_bm: conv3 reads relu2 (pool2 is unused), so pool3 gives 7 x 7; 3 BM layers of 32, 32, 64 channels
CIFAR10_BM = conv(3, 32, 5) + conv(32, 32, 5) + conv(32, 64, 5) + ip(64 * 7 * 7, 10)
BM_CHANNELS = 32 + 32 + 64


@pytest.mark.parametrize("conf,singa,netc_less", [
    ("0.2.0_alexnet_job.conf", ALEXNET, 0), ("0.3.0_alexnet_job.conf", ALEXNET, 0),
    ("0.3.0_alexnet_cudnn.conf", ALEXNET, 0),
    ("0.2.0_char-rnn_job.conf", CHAR_RNN, 0), ("0.3.0_char-rnn_job.conf", CHAR_RNN, 0),
    ("0.2.0_cifar10_job.conf", CIFAR10, 0), ("0.2.0_cifar10_cudnn.conf", CIFAR10, 0),
    ("0.3.0_cifar10_cudnn.conf", CIFAR10, 0), ("0.3.0_cifar10_hybrid.conf", CIFAR10, 0),
    ("0.3.0_cifar10_cudnn_hybrid.conf", CIFAR10, 0), ("0.2.0_cifar10_hybrid.conf", CIFAR10, 0),
    ("0.2.0_cifar10_cudnn_hybrid.conf", CIFAR10, 0),
    # SINGA's BM registers its running mean and inverse variance as params 2 and 3; netc keeps them as
    # running statistics (state): 2C fewer per layer (docs/singa.md)
    ("0.3.0_cifar10_cudnn_bm.conf", CIFAR10_BM + 4 * BM_CHANNELS, 2 * BM_CHANNELS),
])
def test_released_examples_without_an_oracle(conf, singa, netc_less):
    assert netc_total(CORPUS / conf, "train") == singa - netc_less


@pytest.mark.parametrize("conf", ["0.2.0_mnist_job.conf", "0.2.0_mnist_conv.conf"])
def test_v02_mnist_jobs_are_the_oracles_v03_ones(conf):
    """0.2.0's MNIST jobs are 0.3.0's, byte for byte: the oracle's 0.3.0 total is theirs."""
    v03 = conf.replace("0.2.0", "0.3.0")
    assert (CORPUS / conf).read_bytes() == (CORPUS / v03).read_bytes()
    for phase in ("kTrain", "kTest"):
        assert netc_total(CORPUS / conf, PHASE[phase]) == singa_total(f"{v03}.{phase}.K1.jsonl",
                                                                      (CORPUS / v03).read_text())[0]
