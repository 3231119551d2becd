"""SINGA job.conf -> netc IR (netc/frontend/singa_ir.py): per-node shapes against SINGA's oracle,
partitioned (K = 2) nets, unrolled RNNs, RBM energy models, `netc import` round trips, errors."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

from netc.diagnostics import DiagnosticEngine
from netc.frontend import load
from netc.frontend.singa import build_singa
from netc.frontend.singa_ir import _NO_OP, nhwc, nname
from netc.passes.manager import DEFAULT_PIPELINE, PassContext, PassManager

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = "/work/shared/corpus/singa"
REFS = sorted(glob.glob("/work/shared/reference/singa/*.jsonl"))
PHASE = {"kTrain": "train", "kTest": "test", "kVal": "val"}
pytestmark = pytest.mark.skipif(not os.path.isdir(CORPUS), reason="SINGA corpus not available")


def netc(*args):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "netc", *args], capture_output=True, text=True, cwd=ROOT, env=env)


def compiled(path, phase="train"):
    diag = DiagnosticEngine()
    m = load(path, diag)
    PassManager(DEFAULT_PIPELINE).run(m, PassContext(diag=diag, phase=phase))
    net = m.networks()[0]
    return {op.attrs.get("name"): list(op.results[0].type.shape) for op in net.regions[0].ops if op.results}


def alias_shape(nodes, shapes, name):
    """Shape of the netc layer standing for SINGA node `name` (splits are their source)."""
    n = nodes[name]
    while n["type"] == "kSplit":
        n = nodes[n["src"][0]]
    return shapes.get(nname(n["node"]))


@pytest.mark.parametrize("ref", REFS, ids=os.path.basename)
def test_oracle_shapes(ref):
    base = os.path.basename(ref)
    conf, rest = base.split(".conf.")
    phase = PHASE[rest.split(".")[0]]
    nodes = [json.loads(line) for line in open(ref)]
    shapes = compiled(os.path.join(CORPUS, conf + ".conf"), phase)
    for n in nodes:
        if n["type"] in _NO_OP:
            continue
        assert alias_shape({x["node"]: x for x in nodes}, shapes, n["node"]) == nhwc(n["shape"]), n["node"]


@pytest.mark.parametrize("conf", ["0.3.0_cifar10_hybrid.conf", "0.2.0_cifar10_cudnn_hybrid.conf",
                                  "dev.20160313_mnist_2x2.conf"])
def test_partitioned_nets_match_singa(conf):
    path = os.path.join(CORPUS, conf)
    net = build_singa(path, "train")
    shapes = compiled(path, "train")
    nodes = {n.name: {"node": n.name, "type": n.type, "src": n.srcs} for n in net.nodes}
    for n in net.nodes:
        if n.type in _NO_OP:
            continue
        assert alias_shape(nodes, shapes, n.name) == nhwc(n.shape), n.name


def test_k2_hybrid_explains():
    r = netc("explain", "--brief", "--format", "json", os.path.join(CORPUS, "0.3.0_cifar10_hybrid.conf"))
    assert r.returncode == 0, r.stderr
    rows = {x["name"]: x for x in json.loads(r.stdout)["layers"]}
    assert rows["concate(split(0#pool3)):0"]["shape"] == [100, 3, 3, 64]
    assert rows["0#ip1:1"]["shape"] == [100, 5]
    assert rows["concate(slice(0#ip1)):1"]["shape"] == [50, 10]
    r = netc("explain", "--brief", "--nchw", "--format", "json", os.path.join(CORPUS, "0.3.0_cifar10_hybrid.conf"))
    rows = {x["name"]: x for x in json.loads(r.stdout)["layers"]}
    assert rows["0#conv1:0"]["shape"] == [50, 32, 32, 32] and rows["0#pool3:1"]["shape"] == [50, 64, 3, 3]


def test_phases_select_singa_nets():
    path = os.path.join(CORPUS, "0.1.0_cifar10_job.conf")
    train, test = compiled(path, "train"), compiled(path, "test")
    assert train["rgb:00"] == [64, 32, 32, 3] and test["rgb:00"] == [100, 32, 32, 3]


def test_char_rnn_unrolled_explains():
    r = netc("explain", "--brief", os.path.join(CORPUS, "0.3.0_char-rnn_job.conf"))
    assert r.returncode == 0, r.stderr
    assert "0#gru1:0" in r.stdout and "1#gru1:0.h" in r.stdout and "energy" not in r.stderr


def test_rbm_energy_model_explains():
    r = netc("explain", "--brief", os.path.join(CORPUS, "0.1.0_rbm_rbm2.conf"))
    assert r.returncode == 0, r.stderr
    assert "energy model" in r.stderr and "kRBMVis" in r.stdout
    assert "RBMHid:00" in r.stdout


@pytest.mark.parametrize("conf", ["0.1.0_cifar10_job.conf", "0.3.0_cifar10_hybrid.conf", "0.1.0_rbm_rbm2.conf",
                                  "0.3.0_alexnet_job.conf"])
@pytest.mark.parametrize("phase", ["train", "test"])
def test_import_round_trip(conf, phase, tmp_path):
    out = tmp_path / "x.nd"
    r = netc("import", os.path.join(CORPUS, conf), "-o", str(out))
    assert r.returncode == 0, r.stderr
    a = netc("explain", "--brief", "--format", "json", "--phase", phase, os.path.join(CORPUS, conf))
    b = netc("explain", "--brief", "--format", "json", "--phase", phase, str(out))
    assert a.returncode == 0 and b.returncode == 0, b.stderr
    da, db = json.loads(a.stdout), json.loads(b.stdout)
    assert da["layers"] == db["layers"] and da["totals"] == db["totals"]


def test_bad_config_located_error(tmp_path):
    bad = tmp_path / "bad.conf"
    bad.write_text('name: "x"\nneuralnet {\n  layer { name: "a" type: kNoSuchLayer }\n}\n')
    r = netc("check", str(bad))
    assert r.returncode == 1
    assert f"{bad}:3:" in r.stderr and "^" in r.stderr


def test_user_layer_without_plugin():
    r = netc("check", os.path.join(CORPUS, "0.3.0_rnnlm_job.conf"))
    assert r.returncode == 1 and "user layer" in r.stderr and "0.3.0_rnnlm_job.conf:" in r.stderr


def test_singa_version_option():
    r = netc("check", "--singa-version", "0.3", os.path.join(CORPUS, "0.3.0_cifar10_job.conf"))
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("conf", sorted(os.listdir(CORPUS)) if os.path.isdir(CORPUS) else [])
def test_corpus_sweep(conf):
    if conf.endswith(".tsv"):
        pytest.skip("manifest")
    r = netc("explain", "--brief", os.path.join(CORPUS, conf))
    assert r.returncode in (0, 1), r.stderr
    if r.returncode == 1:
        assert "error:" in r.stderr and CORPUS in r.stderr
