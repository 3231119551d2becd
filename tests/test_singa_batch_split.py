"""SINGA's batch rule where the batch does not divide among the partitions (issue 24): a data layer on
partition_dim 0 gives each of the K partitions batchsize / K samples, rounded down (SINGA v0.1.0
src/neuralnet/input_layer.cc:66,169; v0.2.0 src/neuralnet/input_layer/store.cc:38-39; v0.3.0-rc3
input_layer/store.cc:44-46), so a job.conf follows it with a warning at the batchsize field; netc's own
.nd files keep the error (docs/singa.md). Shapes, FLOPs and the K-worker program follow the rule, and the
K-worker run equals the single process on the samples it reads."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from netc.cli import main
from netc.diagnostics import DiagnosticEngine, NetcError
from netc.frontend import load
from netc import pipelines
from netc.pipelines import Options

SINGA = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "singa"
needs_corpus = pytest.mark.skipif(not SINGA.is_dir(), reason="the shared corpus is not beside the repository")

WARNING = ("warning: batchsize 64 does not divide among the 3 partitions: as SINGA does, each takes 64 / 3 = 21 "
           "(rounded down), so 1 sample of every batch is dropped (63 of 64 used per step)")

MLP = """name: "mlp"
train_steps: 10
train_one_batch { alg: kBP }
updater { type: kSGD learning_rate { type: kFixed base_lr: 0.01 } }
neuralnet {
  layer {
    name: "data"
    type: kRecordInput
    store_conf { backend: "kvfile" path: "train.bin" batchsize: %d shape: 8 }
    include: kTrain
  }
  layer {
    name: "fc1"
    type: kInnerProduct
    srclayers: "data"
    innerproduct_conf { num_output: 6 }
    param { name: "w1" }
    param { name: "b1" }
  }
  layer { name: "loss" type: kSoftmaxLoss srclayers: "fc1" srclayers: "data" }
}
cluster { nworkers_per_group: %d workspace: "w" }
"""


def on_workers(src: Path, K: int, tmp_path: Path) -> Path:
    """A corpus job with cluster.nworkers_per_group K."""
    text = src.read_text()
    assert "nworkers_per_group" not in text or "nworkers_per_group: 1\n" in text
    text = (text.replace("nworkers_per_group: 1\n", f"nworkers_per_group: {K}\n") if "nworkers_per_group" in text
            else text.replace("cluster {", f"cluster {{\n  nworkers_per_group: {K}", 1))
    out = tmp_path / src.name
    out.write_text(text)
    return out


def partitioned(path, workers=None):
    diag = DiagnosticEngine()
    m = load(str(path), diag, 1)
    pipelines.inference(m, Options(phase="train", workers=workers), diag)
    ops = {op.attrs.get("name"): op for op in m.networks()[0].regions[0].ops if op.attrs.get("name")}
    return ops, [d for d in diag.diagnostics if d.severity == "warning" and "does not divide" in d.message]


def where(text: str, needle: str) -> tuple[int, int]:
    """(line, column) of the value after `needle` in text, 1-based (the batchsize field's value)."""
    for i, line in enumerate(text.splitlines(), 1):
        if needle in line and not line.lstrip().startswith("#"):
            return i, line.index(needle) + len(needle) + 1
    raise AssertionError(needle)


@needs_corpus
def test_corpus_job_on_3_workers_warns_at_the_batchsize(tmp_path, capsys):
    """0.2.0 mnist (batchsize 64) over 3 workers: `netc check` passes with one warning, located at the
    kTrain data layer's batchsize value (file:line:col, the line, a caret under 64)."""
    conf = on_workers(SINGA / "0.2.0_mnist_job.conf", 3, tmp_path)
    assert main(["check", str(conf)]) == 0
    err = capsys.readouterr().err
    line, col = where(conf.read_text(), "batchsize: ")
    assert err.count("does not divide among") == 1 and "error" not in err
    assert f"{conf}:{line}:{col}: {WARNING}" in err
    lines = err.splitlines()
    i = next(k for k, x in enumerate(lines) if WARNING in x)
    assert lines[i + 1].strip() == "batchsize: 64"
    assert lines[i + 2] == " " * (col - 1) + "^~"
    assert "Traceback" not in err


@needs_corpus
def test_partition_shapes_are_21_per_worker(tmp_path):
    conf = on_workers(SINGA / "0.2.0_mnist_job.conf", 3, tmp_path)
    ops, warnings = partitioned(conf)
    assert len(warnings) == 1
    for i in range(3):
        assert list(ops[f"0#data:{i}"].results[0].type.shape) == [21, 784]
        assert list(ops[f"0#data:{i}.label"].results[0].type.shape) == [21]
        assert ops[f"0#data:{i}"].attrs["worker"] == i
        assert ops[f"0#data:{i}"].attrs["partition"] == {"of": "0#data:0", "dim": 0, "index": i, "count": 3}
    assert not any(f"0#data:{i}" in ops for i in (3, 4))
    # the same job on 4 workers divides evenly: no warning
    ops, warnings = partitioned(conf, workers=4)
    assert not warnings and list(ops["0#data:3"].results[0].type.shape) == [16, 784]


@needs_corpus
def test_v01_shard_data_warns_once_for_its_parsers(tmp_path):
    """v0.1 cifar10 (kShardData batchsize 64, read by kRGBImage and kLabel) over 3 workers: one warning,
    every parser's partition 21 samples (v0.1.0 input_layer.cc:66, ShardDataLayer)."""
    conf = on_workers(SINGA / "0.1.0_cifar10_job.conf", 3, tmp_path)
    ops, warnings = partitioned(conf)
    assert len(warnings) == 1 and WARNING.split(": ", 1)[1] == warnings[0].message
    assert (warnings[0].loc.line, warnings[0].loc.col) == where(conf.read_text(), "batchsize: ")
    for i in range(3):
        assert list(ops[f"rgb:0{i}"].results[0].type.shape) == [21, 32, 32, 3]
        assert list(ops[f"label:0{i}"].results[0].type.shape) == [21]


@needs_corpus
def test_explain_exits_0_and_flops_follow_the_share(tmp_path, capsys):
    """`netc explain` of the 3-worker job: each worker's layers at 21 samples, and the forward FLOPs are
    3 x the single process's at batch 21 (data parallelism: the same work on 21 samples per worker)."""
    conf = on_workers(SINGA / "0.2.0_mnist_job.conf", 3, tmp_path)
    assert main(["explain", str(conf), "--brief"]) == 0
    out, err = capsys.readouterr()
    assert "0#data:2        Input         21x784" in out and err.count("does not divide among") == 1
    assert main(["explain", str(conf), "--brief", "--format", "json"]) == 0
    three = json.loads(capsys.readouterr().out)
    assert main(["explain", str(conf), "--brief", "--format", "json", "--workers", "1", "--batch", "21"]) == 0
    one = json.loads(capsys.readouterr().out)

    def fwd(doc):
        nets = doc["networks"] if "networks" in doc else [doc]
        return sum(layer["flops_fwd"] for n in nets for layer in n["layers"])
    assert fwd(one) > 0 and fwd(three) == 3 * fwd(one)


def test_nd_keeps_the_error(tmp_path, capsys):
    """netc's own .nd (here `netc import` of the same job) keeps B9's error: only a job.conf follows SINGA."""
    conf = tmp_path / "mlp.conf"
    conf.write_text(MLP % (64, 3))
    nd = tmp_path / "mlp.nd"
    assert main(["import", str(conf), "-o", str(nd)]) == 0
    capsys.readouterr()
    assert main(["check", str(nd)]) == 1
    err = capsys.readouterr().err
    assert "error: batchsize 64 is not divisible by the 3 partitions" in err and f"{nd}:" in err
    assert main(["check", str(conf)]) == 0
    assert "64 / 3 = 21" in capsys.readouterr().err


def test_batch_smaller_than_k_is_a_located_error(tmp_path, capsys):
    conf = tmp_path / "mlp.conf"
    conf.write_text(MLP % (2, 3))
    assert main(["check", str(conf)]) == 1
    err = capsys.readouterr().err
    line, col = where(conf.read_text(), "batchsize: ")
    assert f"{conf}:{line}:{col}: error: the batch 2 leaves the 3 partitions without a sample" in err
    assert "Traceback" not in err


def test_a_batch_from_the_command_line_is_not_blamed_on_the_field(tmp_path, capsys):
    """`--batch 10` on the 3-worker job: the warning names the batch and points at the data layer, not at
    `batchsize: 64` (which no longer says what runs); 3 per worker."""
    conf = tmp_path / "mlp.conf"
    conf.write_text(MLP % (64, 3))
    assert main(["explain", str(conf), "--batch", "10", "--brief"]) == 0
    out, err = capsys.readouterr()
    line = next(i for i, x in enumerate(conf.read_text().splitlines(), 1) if 'name: "data"' in x)
    assert f"{conf}:{line}:5: warning: the batch 10 does not divide among the 3 partitions" in err
    assert "each takes 10 / 3 = 3 (rounded down), so 1 sample of every batch is dropped (9 of 10" in err
    assert "batchsize: 64" not in err and "0#data:2        Input         3x8" in out


def test_three_workers_equal_one_process_on_the_63_samples(tmp_path, capsys):
    """The 3-worker run (3 processes) reads 63 of the 64 samples: its outputs and two SGD steps equal the
    single process's at batch 63 on the same samples (f64 reference executor)."""
    conf = tmp_path / "mlp.conf"
    conf.write_text(MLP % (64, 3))
    rng = np.random.default_rng(7)
    data = tmp_path / "in.npz"
    np.savez(data, **{"0#data:0": rng.standard_normal((63, 8)), "0#data:0.label": rng.integers(0, 6, 63).astype(np.int32)})
    runs = {}
    for tag, flags in (("3", ["--workers", "3"]), ("1", ["--workers", "1", "--batch", "63"])):
        for mode, extra in (("fwd", []), ("train", ["--train", "--steps", "2"])):
            out = tmp_path / f"{mode}{tag}.npz"
            assert main(["run", str(conf), *flags, "--inputs", str(data), "-o", str(out), *extra]) == 0
            runs[mode, tag] = dict(np.load(out))
    capsys.readouterr()
    for mode in ("fwd", "train"):
        a, b = runs[mode, "3"], runs[mode, "1"]
        assert sorted(a) == sorted(b) and a
        for k in a:
            assert a[k].shape == b[k].shape
            np.testing.assert_allclose(a[k], b[k], rtol=1e-6, atol=1e-7)
    assert runs["fwd", "3"]["0#loss:0"].shape == (63, 6)
