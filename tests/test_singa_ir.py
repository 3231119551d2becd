"""SINGA job.conf -> netc IR (netc/frontend/singa/to_ir.py): per-node shapes against SINGA's oracle,
partitioned (K = 2) nets (SINGA's graph is the partition pass's: tests/test_partition.py), unrolled
RNNs, RBM energy models, `netc import` round trips, errors."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

from netc.diagnostics import DiagnosticEngine
from netc.frontend import load
from netc.frontend.singa.to_ir import _NO_OP, nhwc, nname
from netc import pipelines
from netc.pipelines import Options

from cli_inprocess import netc_inprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = "/work/shared/corpus/singa"
REFS = sorted(glob.glob("/work/shared/reference/singa/*.jsonl"))
PHASE = {"kTrain": "train", "kTest": "test", "kVal": "val"}
pytestmark = pytest.mark.skipif(not os.path.isdir(CORPUS), reason="SINGA corpus not available")


def netc(*args):
    """The command in this process (tests/cli_inprocess.py): these commands read, check and explain."""
    return netc_inprocess(*args)


def netc_process(*args):
    """The command in a process of its own: a compile needs Triton's compiled mode, whatever this worker's."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = ROOT
    return subprocess.run([sys.executable, "-m", "netc", *args], capture_output=True, text=True, cwd=ROOT, env=env)


def compiled(path, phase="train"):
    diag = DiagnosticEngine()
    m = load(path, diag)
    pipelines.inference(m, Options(phase=phase), diag)
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


def test_char_rnn_explains_rolled():
    """char-rnn (unroll_len 50) is imported rolled: one GRU layer over [T, B, 512] with SINGA's parameter count."""
    r = netc("explain", "--brief", os.path.join(CORPUS, "0.3.0_char-rnn_job.conf"))
    assert r.returncode == 0, r.stderr
    rows = {line.split()[0]: line.split() for line in r.stdout.splitlines()[3:] if line and not line.startswith("-")}
    grus = [k for k, v in rows.items() if len(v) > 1 and v[1] == "GRU"]
    assert grus == ["gru1"] and rows["gru1"][2:4] == ["50x50x512", "943,104"]
    assert "total: 994,917 parameters" in r.stdout
    assert "energy" not in r.stderr and "warning" not in r.stderr


def test_rbm_energy_model_explains():
    r = netc("explain", "--brief", os.path.join(CORPUS, "0.1.0_rbm_rbm2.conf"))
    assert r.returncode == 0, r.stderr
    assert "energy model" in r.stderr and "kRBMVis" in r.stderr
    assert "RBMVis:00    RBMVisible" in r.stdout   # its own op (it binds the visible bias), no longer opaque
    assert "RBMHid:00" in r.stdout


def test_rbm_compiles(tmp_path):
    """An energy model compiles: its forward is the visible -> hidden direction (the visible layer the
    identity, aliased), and no opaque-layer or "not yet" error stops it (its CD-k training step runs on
    the interpreter: tests/test_singa_rbm.py)."""
    conf = os.path.join(CORPUS, "0.1.0_rbm_rbm1.conf")
    r = netc_process("compile", conf, "-o", str(tmp_path / "rbm.so"))
    assert r.returncode == 0, r.stderr
    assert "error" not in r.stderr and "Traceback" not in r.stderr
    assert (tmp_path / "rbm.so").exists()


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


@pytest.mark.parametrize("conf", ["0.2.0_char-rnn_sample.conf", "0.3.0_char-rnn_sample.conf"])
def test_zero_sized_blobs_warn_and_build(conf):
    """Spec B14: `onehot` has no onehot_conf, so vocab_size is 0: SINGA builds a [1, 0] blob and a
    [512, 0] GRU input weight without a word. netc warns at the layers and builds the same net."""
    path = os.path.join(CORPUS, conf)
    r = netc("check", path)
    assert r.returncode == 0, r.stderr
    warn = [line for line in r.stderr.splitlines() if "warning:" in line]
    assert warn == [f"{path}:23:5: warning: layer 'onehot' gets a zero-sized tensor [1, 0] (a size left at its "
                    f"default 0?); SINGA accepts it silently",
                    f"{path}:29:5: warning: layer 'gru1' gets a zero-sized tensor [512, 0] (a size left at its "
                    f"default 0?); SINGA accepts it silently"]
    for phase in ("train", "test"):
        diag = DiagnosticEngine()
        m = load(path, diag)
        pipelines.inference(m, Options(phase=phase), diag)
        ops = {op.attrs["name"]: op for op in m.networks()[0].regions[0].ops}
        assert list(ops["0#onehot:0"].results[0].type.shape) == [1, 0]
        params = {p.attrs["sym_name"]: list(p.attrs["type"].shape) for p in m.params()}
        assert params["0#z_hx"] == [512, 0] and params["0#z_hx2"] == [512, 512] and "0#z_b2" not in params
    r = netc("run", "--reference", path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("0#sampling:0  [1, 1]")


def test_negative_input_dims_are_still_errors(tmp_path):
    bad = tmp_path / "neg.nd"
    bad.write_text("network n {\n  input a: f32[-2, 3]\n  r = ReLU(a)\n}\n")
    r = netc("check", str(bad))
    assert r.returncode == 1 and f"{bad}:2:" in r.stderr and "must not be negative" in r.stderr
