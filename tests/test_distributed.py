"""K workers on torch.distributed (netc/runtime/distributed.py, launch.py): `netc run FILE --workers K`
starts K processes (gloo on localhost) that each run their rank's program; every scheme's forward outputs,
and one training step's gradients and updated parameters, equal the single-process run of the
unpartitioned network (`--workers 1`, run in this process) in float64. Also: the bytes each rank sends
against the partition pass's prediction, and a worker that dies or hangs (with and without torchrun)
making the others exit with a message naming the rank and the op, within the timeout.

Small shapes, fixed seeds; ranks are forked by the launcher (one import of torch per test), torchrun
is run once. OMP_NUM_THREADS=1, GLOO_SOCKET_IFNAME=lo, TORCH_DISTRIBUTED_DEBUG=DETAIL."""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from netc.cli import main

from workers import baseline, narrowed_paleo, run_netc  # noqa: E402  (tests/workers.py)

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"
SINGA = ROOT.parent / "shared" / "corpus" / "singa"
PALEO = ROOT.parent / "shared" / "corpus" / "paleo"
ENV = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo", TORCH_DISTRIBUTED_DEBUG="DETAIL",
           PYTHONPATH=str(ROOT), NETC_DIST_TIMEOUT="30")
ENV.pop("NETC_FAULT", None)
corpus = pytest.mark.skipif(not SINGA.is_dir(), reason="the shared corpus is not beside the repository")


def netc(*args, env=None, timeout=120, cmd=None):
    return run_netc(args, dict(ENV, **(env or {})), timeout, cmd)


def same(a, b, rtol=1e-10):
    a, b = np.load(a), np.load(b)
    assert sorted(a.files) == sorted(b.files)
    for k in a.files:
        x, y = a[k], b[k]
        assert x.shape == y.shape, k
        scale = max(float(np.abs(y).max()), 1e-300) if y.size else 1.0
        assert float(np.abs(x - y).max(initial=0.0)) <= rtol * scale, (k, float(np.abs(x - y).max()))
    return len(a.files)


FORWARD = [("batch", EX / "partition_batch.nd", 2, []), ("feature", EX / "partition_feature.nd", 4, []),
           ("hybrid", EX / "partition_hybrid.nd", 2, []), ("location", EX / "partition_location.nd", 4, []),
           ("singa_hybrid", SINGA / "0.3.0_cifar10_hybrid.conf", 2, ["--batch", 4, "--spatial", "min"]),
           ("alex_v2_2gpu", PALEO / "alex_v2_2gpu.json", 2, ["--batch", 2, "--spatial", "min"]),
           ("alex_v2_4gpu", PALEO / "alex_v2_4gpu.json", 4, ["--batch", 2, "--spatial", "min"])]


@pytest.mark.parametrize("name,src,K,extra", FORWARD, ids=[f[0] for f in FORWARD])
def test_forward_equals_single_process(name, src, K, extra, tmp_path, capsys):
    if not src.exists():
        pytest.skip("the shared corpus is not beside the repository")
    one, many = tmp_path / "one.npz", tmp_path / "many.npz"
    if name.startswith("alex"):      # AlexNet's towers at 1/8 of their widths (narrowed_paleo)
        src = narrowed_paleo(src, tmp_path / src.name)
    baseline(capsys, "run", src, *extra, "-o", one)
    r = netc("run", src, "--workers", K, *extra, "-o", many)
    assert r.returncode == 0, r.stderr
    assert same(many, one, rtol=1e-12) >= 1
    if name == "singa_hybrid":      # the printed outputs too: the names and statistics of the single-process run
        r = netc("run", src, "--workers", K, *extra)
        printed = [line.split()[:2] for line in r.stdout.splitlines()]
        assert printed == [["0#loss:0", "[4,"], ["0#loss:0.loss", "[]"]]


TRAIN = [("batch", EX / "partition_batch.nd", 4, []), ("feature", EX / "partition_feature.nd", 2, []),
         ("hybrid", EX / "partition_hybrid.nd", 2, ["--optimizer", "momentum"]),
         ("location", EX / "partition_location.nd", 4, ["--optimizer", "adam"]),
         ("singa_hybrid", SINGA / "0.3.0_cifar10_hybrid.conf", 2, ["--batch", 4, "--spatial", "min"])]


@pytest.mark.parametrize("name,src,K,extra", TRAIN, ids=[t[0] for t in TRAIN])
def test_training_step_equals_single_process(name, src, K, extra, tmp_path, capsys):
    if not src.exists():
        pytest.skip("the shared corpus is not beside the repository")
    args = ["--train", "--steps", "1", "--dtype", "f64", *extra]
    out = baseline(capsys, "run", src, *args, "--grads", tmp_path / "g1.npz", "-o", tmp_path / "p1.npz")
    r = netc("run", src, "--workers", K, *args, "--grads", tmp_path / "gk.npz", "-o", tmp_path / "pk.npz")
    assert r.returncode == 0, r.stderr
    assert same(tmp_path / "gk.npz", tmp_path / "g1.npz") >= 2          # every gradient, by logical parameter
    assert same(tmp_path / "pk.npz", tmp_path / "p1.npz") >= 2          # updated parameters (and state)
    assert out.splitlines()[0] == r.stdout.splitlines()[0]              # "step 1 ... loss L", the same line


@corpus
def test_paleo_alexnet_training(tmp_path, capsys):
    """Two steps of the 2-GPU AlexNet (its splits on 2 workers, a softmax loss appended; narrowed): the second
    step's loss, computed with the updated parameters, equals the single-process run's."""
    src = narrowed_paleo(PALEO / "alex_v2_2gpu.json", tmp_path / "alex_v2_2gpu.json")
    args = ["--batch", "1", "--spatial", "min", "--train", "--steps", "2", "--dtype", "f64", "--loss", "softmax",
            "--lr", "0.001"]
    baseline(capsys, "run", src, *args, "--history", tmp_path / "h1.json")
    r = netc("run", src, "--workers", 2, *args, "--history", tmp_path / "h2.json")
    assert r.returncode == 0, r.stderr
    h1, h2 = (json.loads((tmp_path / f).read_text()) for f in ("h1.json", "h2.json"))
    assert [x["loss"] for x in h2] == pytest.approx([x["loss"] for x in h1], rel=1e-10)
    assert h1[0]["loss"] != pytest.approx(h1[1]["loss"], rel=1e-6)     # the step did change the parameters


def test_bytes_sent_equal_the_prediction(tmp_path, capsys):
    """What each rank hands the transport (send: the tensor; collectives: their ring algorithm's bytes for
    the tensors actually passed) equals the pass's prediction and `netc explain --workers K`'s report."""
    log = tmp_path / "comm.json"
    r = netc("run", EX / "partition_hybrid.nd", "--workers", 2, "--train", "--steps", 1, "--comm-log", log)
    assert r.returncode == 0, r.stderr
    stats = json.loads(log.read_text())
    assert [s["rank"] for s in stats] == [0, 1]
    for s in stats:
        assert s["sent_bytes"] == s["predicted_bytes"] > 0
    capsys.readouterr()
    assert main(["explain", str(EX / "partition_hybrid.nd"), "--workers", "2", "--train", "--brief", "--format",
                 "json"]) == 0
    rep = json.loads(capsys.readouterr().out)["workers"]
    assert [r_["sent_bytes"] for r_ in rep["ranks"]] == [s["sent_bytes"] for s in stats]


def test_a_worker_that_dies(tmp_path):
    r = netc("run", EX / "partition_hybrid.nd", "--workers", 2, "--timeout", 20, env={"NETC_FAULT": "1:0:exit"})
    assert r.returncode == 1 and r.seconds < 30
    assert "rank 1: NETC_FAULT: exiting before 'conv2.all_gather:1'" in r.stderr
    assert "netc: rank 0: all_gather 'conv2.all_gather:0' over ranks [0, 1] failed" in r.stderr
    assert "2 of 2 workers failed: rank 0 (exit status 1), rank 1 (exit status 17)" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_worker_that_hangs(tmp_path):
    r = netc("run", EX / "partition_location.nd", "--workers", 4, "--timeout", 3, env={"NETC_FAULT": "1:0:hang"})
    assert r.returncode == 1 and r.seconds < 25, r.stderr
    # rank 2 waits for conv2 from the hung rank 1: it names itself, the op and the peer
    assert "netc: rank 2: recv 'conv2.recv(1->2)' from rank 1 failed" in r.stderr
    assert "netc: rank 0: send 'pool1.send(0->1)' to rank 1 failed" in r.stderr
    assert "rank 1 (killed)" in r.stderr and "Traceback" not in r.stderr
    # a rank hung between communications: the monitored barrier at the step boundary names it
    r = netc("run", EX / "partition_batch.nd", "--workers", 2, "--timeout", 3, env={"NETC_FAULT": "1:b1:hang"})
    assert r.returncode == 1 and r.seconds < 25, r.stderr
    assert "netc: rank 0: barrier after the forward pass failed: [Rank 0]: Rank 1 failed to pass monitoredBarrier" \
        in r.stderr


@pytest.mark.skipif(not shutil.which("torchrun", path=os.path.dirname(sys.executable)), reason="no torchrun")
def test_torchrun(tmp_path):
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    out = tmp_path / "k.npz"
    r = netc(cmd=[torchrun, "--nproc-per-node", "2", "-m", "netc", "run", str(EX / "partition_batch.nd"),
                  "--workers", "2", "-o", str(out)])
    assert r.returncode == 0, r.stderr
    assert np.load(out)["loss"].shape == ()
    r = netc(cmd=[torchrun, "--nproc-per-node", "2", "-m", "netc", "run", str(EX / "partition_hybrid.nd"),
                  "--workers", "2", "--timeout", "20"], env={"NETC_FAULT": "0:1:exit"})
    assert r.returncode != 0 and r.seconds < 40
    assert "netc: rank 0: NETC_FAULT: exiting before 'fc2:0'" in r.stderr
    # rank 1 either finds the collective failed and says so, or torchrun's agent stops it first once rank 0
    # has exited (a race: under load the agent won, CI 2026-11-27); netc's own message for the surviving
    # rank is pinned by the --workers test above
    assert ("netc: rank 1: reduce_scatter 'fc2:1' over ranks [0, 1] failed" in r.stderr
            or "ChildFailedError" in r.stderr or "elastic/errors.html" in r.stderr), r.stderr


def test_workers_flags():
    r = netc("run", EX / "partition_batch.nd", "--workers", 2, "--target", "interp", "--dtype", "f64")
    assert r.returncode == 1 and "runs each rank's program compiled in f32" in r.stderr
    r = netc("run", EX / "partition_batch.nd", "--workers", 2, "--interp-blocks", "large")
    assert r.returncode == 1 and "--interp-blocks needs --target interp" in r.stderr
    r = netc("run", EX / "partition_batch.nd", "--workers", 2, "--train", "--steps", 0)
    assert r.returncode == 1 and "--steps takes a positive number, got 0" in r.stderr


def test_a_file_without_a_network(tmp_path, capsys):
    """A file cut before its first network is an error at line 1, on one worker or several (found
    before any worker starts: in this process)."""
    def run(*args):
        capsys.readouterr()
        rc = main([str(a) for a in args])
        return rc, capsys.readouterr().err
    f = tmp_path / "cut.nd"
    f.write_text("# only a comment\n")
    for extra in (["--reference"], ["--workers", 2], ["--workers", 2, "--target", "interp"], ["--train", "--reference"]):
        rc, err = run("run", f, *extra)
        assert rc == 1 and "cut.nd:1:1: error: " in err and "defines no network to run" in err
    rc, err = run("run", EX / "partition_batch.nd", "--timeout", 3, "--reference")
    assert rc == 1 and "--timeout applies to a run on several workers" in err
    rc, err = run("run", EX / "partition_location.nd", "--workers", 2)
    assert rc == 1 and "location 3 of 'label' needs at least 4 workers" in err


def test_training_over_a_dataset(tmp_path, capsys):
    """--data --epochs on 2 workers: every rank draws the same shuffled batches and cuts its shards;
    each step's loss (and epoch) equals the single process's, and the dataset is checked against the
    logical inputs before any rank starts."""
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "d.npz", data=rng.standard_normal((20, 12, 12, 3)), label=rng.integers(0, 10, 20).astype(np.int32))
    args = ["--train", "--data", tmp_path / "d.npz", "--epochs", "2", "--lr", "0.05", "--dtype", "f64"]
    baseline(capsys, "run", EX / "partition_batch.nd", *args, "--history", tmp_path / "h1.json")
    r = netc("run", EX / "partition_batch.nd", "--workers", 2, *args, "--history", tmp_path / "h2.json")
    assert r.returncode == 0, r.stderr
    h1, h2 = (json.loads((tmp_path / f).read_text()) for f in ("h1.json", "h2.json"))
    assert len(h2) == 4 and [x["epoch"] for x in h2] == [1, 1, 2, 2]           # 20 samples: 2 batches of 8
    assert [x["loss"] for x in h2] == pytest.approx([x["loss"] for x in h1], rel=1e-10)
    np.savez(tmp_path / "bad.npz", data=rng.standard_normal((20, 11, 12, 3)), label=np.zeros(20, np.int32))
    r = netc("run", EX / "partition_batch.nd", "--workers", 2, "--train", "--data", tmp_path / "bad.npz")
    assert r.returncode == 1 and "samples of 'data' have shape [11, 12, 3], the input takes [12, 12, 3]" in r.stderr
    assert "rank" not in r.stderr                                               # before any rank started
    r = netc("run", EX / "partition_batch.nd", "--workers", 2, "--train", "--epochs", "2")
    assert r.returncode == 1 and "--epochs counts passes over --data" in r.stderr
    r = netc("run", EX / "partition_batch.nd", "--workers", 2, "--train", "--eval", tmp_path / "d.npz")
    assert r.returncode == 1 and "--eval with --workers K is not supported yet" in r.stderr
