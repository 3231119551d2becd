"""Compiled ranks (docs/partitioning.md, "compiled ranks"): a rank's program -- a network of a
split-workers module, forward or training step -- compiles with its schedule cut into segments at its
communication ops, each op a manifest entry with the arena places of its operands and results
(codegen.segment_manifest). `netc run FILE --workers K --target interp` runs every rank's segments
through Triton's interpreter and its communication ops with torch.distributed (gloo) on views of the
rank's arena, and equals the single-process reference run (`--workers 1`, float64, in this process):
forward outputs, one training step's gradients and updated parameters (f32: max |diff| <= 1e-4 of the
largest entry). A rank library (`netc compile --workers K`) exposes the same segments through
netc_run_segment and its arena through netc_arena, checked against the fake CUDA driver
(tests/data/fake_libcuda.c): each segment launches exactly its launches, at the addresses the
in-process lowering gives, and the manifest's places are the addresses those launches read and write.

Small shapes, large interpreter tiles, K = 2 but for the 4-stage pipeline (K = 4)."""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

# the interpreter mode is fixed when netc.kernels is imported: set it at collection
os.environ["TRITON_INTERPRET"] = "1"

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from netc.cli import main  # noqa: E402

from workers import baseline, narrowed_paleo, run_netc, same_npz, split_module  # noqa: E402  (tests/workers.py)

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"
PALEO = ROOT.parent / "shared" / "corpus" / "paleo"
ENV = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo", PYTHONPATH=str(ROOT), NETC_DIST_TIMEOUT="60")
ENV.pop("NETC_FAULT", None)
INTERP = ("--target", "interp", "--interp-blocks", "large")
TOL = 1e-4


def netc(*args, env=None, timeout=300):
    return run_netc(args, dict(ENV, **(env or {})), timeout)


def same(a, b, rtol=TOL) -> int:
    return same_npz(a, b, rtol)


def loss_of(stdout: str) -> float:
    return float(stdout.splitlines()[0].split("loss")[1])


ALEX = ("alex_v2_2gpu", PALEO / "alex_v2_2gpu.json", 2, ["--batch", 2, "--spatial", "min"])
FORWARD = [("batch", EX / "partition_batch.nd", 2, []), ("feature", EX / "partition_feature.nd", 2, []),
           ("location", EX / "partition_location.nd", 4, []), ("hybrid", EX / "partition_hybrid.nd", 2, []), ALEX]


@pytest.mark.parametrize("name,src,K,extra", FORWARD, ids=[f[0] for f in FORWARD])
def test_forward_equals_single_process(name, src, K, extra, tmp_path, capsys):
    if not src.exists():
        pytest.skip("the shared corpus is not beside the repository")
    one, many = tmp_path / "one.npz", tmp_path / "many.npz"
    if name.startswith("alex"):      # AlexNet's towers at 1/8 of their widths (tests/workers.py)
        src = narrowed_paleo(src, tmp_path / src.name)
    baseline(capsys, "run", src, *extra, "-o", one)
    r = netc("run", src, "--workers", K, *INTERP, *extra, "-o", many)
    assert r.returncode == 0, r.stderr
    assert same(many, one) >= 1


# (AlexNet's 2-way model parallelism trains K = 2 against one process in tests/test_distributed.py, on the
# reference; its compiled forward is FORWARD's: the training forms here are the small nets')
TRAIN = [("batch", EX / "partition_batch.nd", 2, []), ("feature", EX / "partition_feature.nd", 2, []),
         ("location", EX / "partition_location.nd", 4, ["--optimizer", "adam"]),
         ("hybrid", EX / "partition_hybrid.nd", 2, ["--optimizer", "momentum"]),
         ("phases", EX / "cifar10_phases.nd", 2, ["--batch", 8])]     # int32 labels gathered from their shards


@pytest.mark.parametrize("name,src,K,extra", TRAIN, ids=[t[0] for t in TRAIN])
def test_training_step_equals_single_process(name, src, K, extra, tmp_path, capsys):
    if not src.exists():
        pytest.skip("the shared corpus is not beside the repository")
    args = ["--train", "--steps", "1", *extra]
    out = baseline(capsys, "run", src, *args, "--dtype", "f64", "--grads", tmp_path / "g1.npz",
                   "-o", tmp_path / "p1.npz")
    r = netc("run", src, "--workers", K, *INTERP, *args, "--grads", tmp_path / "gk.npz", "-o", tmp_path / "pk.npz")
    assert r.returncode == 0, r.stderr
    assert loss_of(r.stdout) == pytest.approx(loss_of(out), rel=TOL)
    assert same(tmp_path / "gk.npz", tmp_path / "g1.npz") >= 2          # every gradient, by logical parameter
    assert same(tmp_path / "pk.npz", tmp_path / "p1.npz") >= 2          # updated parameters (and state)


# ------------------------------------------------------------------------------------------- the segments

def ranks_of(module):
    return sorted((n for n in module.networks() if "rank" in n.attrs), key=lambda n: n.attrs["rank"])


@pytest.mark.parametrize("src,K,train", [(EX / "partition_hybrid.nd", 2, True), (EX / "partition_location.nd", 4, False),
                                         (EX / "partition_batch.nd", 2, True)], ids=["hybrid-train", "location",
                                                                                   "batch-train"])
def test_segments_and_comms_cover_the_schedule_once_in_order(src, K, train, interp_mode):
    """Segments tile the launches; the communication entries are the program's communication ops, each
    once, in the program's order, each at its plan step between the launches before and after it; every
    step of the plan is a launch, a communication op or an alias; and a place is the arena view of its
    plan tensor."""
    from netc.codegen import is_comm
    from netc.ir.query import layers
    from netc.runtime.distributed import CompiledRank
    from netc.runtime.interp import InterpProgram
    module = split_module(src, K, train, "momentum" if train else None)
    for net in ranks_of(module):
        prog = InterpProgram(module, net.attrs["sym_name"], training=train, blocks="large")
        seg, plan = prog.segmented, prog.plan
        assert seg["fixed_batch"] and len(seg["segments"]) == len(seg["comms"]) + 1
        at = 0
        for s in seg["segments"]:
            assert s["first"] == at
            at += s["launches"]
        assert at == len(prog.launches)
        assert [c["name"] for c in seg["comms"]] == [op.attrs["name"] for op in layers(prog.net) if is_comm(op)]
        for k, c in enumerate(seg["comms"]):
            before = [L.step for L in prog.launches[:seg["segments"][k + 1]["first"]]]
            after = [L.step for L in prog.launches[seg["segments"][k + 1]["first"]:]]
            assert max(before, default=0) < c["step"] < min(after, default=len(plan.steps) + 1)
        steps = {L.step for L in prog.launches} | {c["step"] for c in seg["comms"]}
        assert steps | {st.index for st in plan.steps if st.action == "alias"} == {st.index for st in plan.steps}
        assert len({c["step"] for c in seg["comms"]}) == len(seg["comms"])
        rank = CompiledRank(prog, comm=None)
        for c in seg["comms"]:
            for p in c["operands"] + c["results"]:
                v, w = rank.view(p), prog.view(plan.tensor(p["name"]))
                assert (v.data_ptr(), v.shape, v.stride(), v.dtype) == (w.data_ptr(), w.shape, w.stride(), w.dtype)
        for p in seg["outputs"]:
            assert rank.view(p).data_ptr() == prog.view(plan.tensor(p["name"])).data_ptr()


# ------------------------------------------------------------------------------------------- rank libraries

@pytest.fixture(scope="module")
def rank_libs(tmp_path_factory):
    """`netc compile examples/partition_hybrid.nd --workers 2 --train --optimizer momentum -o h.so`: h.rank0.so
    and h.rank1.so (compiled without a GPU; kernels compiled, not interpreted)."""
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler")
    d = tmp_path_factory.mktemp("ranks")
    env = {k: v for k, v in ENV.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-m", "netc", "compile", str(EX / "partition_hybrid.nd"), "--workers", "2",
                        "--train", "--optimizer", "momentum", "-o", str(d / "h.so")], capture_output=True, text=True,
                       cwd=ROOT, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "rank 1 of 2" in r.stderr and (d / "h.rank0.so").exists() and (d / "h.rank1.h").exists()
    return d


class RecordingComm:
    """Comm's place in CompiledRank without torch.distributed: records each op (check(names, operands)
    when it runs) and returns a tensor of the result's shape filled with the op's index + 1."""

    def __init__(self, check):
        self.calls, self.check = [], check

    def run(self, op, xs, dtype, bucket_ops=None):
        ops = bucket_ops or [op]
        self.check([o.attrs["name"] for o in ops], xs)
        self.calls.append([o.attrs["name"] for o in ops])
        ys = [torch.full(o.results[0].type.shape, float(len(self.calls)), dtype=dtype) for o in ops]
        return ys if bucket_ops else ys[0]

    def finish(self):
        pass


def test_rank_library_segments_on_a_fake_driver(rank_libs, fake, tmp_path, monkeypatch, interp_mode):
    from netc.codegen import plan_program
    from netc.codegen.lower import lower_network
    from netc.pipelines import fuse
    from netc.runtime import native as N
    from netc.runtime.distributed import CompiledRank, SegmentLibrary
    log = tmp_path / "fake.log"
    monkeypatch.setenv("NETC_LIBCUDA", str(fake))
    monkeypatch.setenv("NETC_FAKE_MEM", "1")
    monkeypatch.setenv("NETC_FAKE_LOG", str(log))
    monkeypatch.setattr(N, "_torch_device", lambda device=None: torch.device("cpu"))
    lines = lambda: log.read_text().splitlines() if log.exists() else []    # noqa: E731
    # the same program, lowered in this process as compile_rank lowers it
    module = split_module(EX / "partition_hybrid.nd", 2, True, "momentum")
    fuse(module, "train")
    net0 = ranks_of(module)[0]
    low = lower_network(module, net0, plan_program(module, net0, mode="training"), blocks="cuda")
    with N.load(rank_libs / "h.rank0.so", seed=0) as net:
        m, lib, h = net.manifest, net._lib, net._handle()
        seg, regions, B = m["segmented"], m["regions"], m["batch"]
        alloc = [ln.split() for ln in lines() if ln.startswith("alloc")][-1]
        base, size = int(alloc[2]), int(alloc[1])
        assert m["rank"]["rank"] == 0 and m["rank"]["world"] == 2 and m["rank"]["program"] == "training"
        assert lib.netc_num_segments() == len(seg["segments"]) == len(low.comms) + 1 > 2
        assert [(s["first"], s["launches"]) for s in seg["segments"]] == low.segments()
        assert [c["name"] for c in seg["comms"]] == [c.name for c in low.comms]
        for code, name in ((1, "constant"), (2, "batch")):
            assert net.arena_address(code) == base + regions[name]
        arena = net.arena()
        assert arena.data_ptr() == base and arena.numel() == size == regions["arena_bytes"]
        for call in (lambda: net.train_step({}, 0.1), lambda: net(torch.zeros(1))):
            with pytest.raises(N.NetcInputError, match="is rank 0 of 2 of the partitioned network 'hybrid': it runs "
                                                       "in segments"):
                call()
        assert lib.netc_train_step(h, None, 0.1, 0, None, None) == -10
        assert b"runs in segments (netc_run_segment)" in lib.netc_last_error(h)

        region_at = {1: 0, 2: regions["batch"], 5: regions.get("forward_data"), 6: regions.get("workspace")}

        def addr(a):
            return base + region_at[a.region] + a.coeff * B + a.const

        xs = {"data:0": torch.randn(4, 12, 12, 3), "label:0": torch.randint(0, 10, (4,), dtype=torch.int32)}
        names = {e["entry"] for e in m["kernels"]}
        for k, s in enumerate(seg["segments"]):
            n0 = len(lines())
            net.run_segment(k, xs if k == 0 else None, lr=0.25)
            new = [ln.split() for ln in lines()[n0:]]
            launched = [ln for ln in new if ln[0] == "launch"]
            expect = low.launches[s["first"]:s["first"] + s["launches"]]
            assert len(launched) == s["launches"]                          # exactly its launches
            for ln, L, e in zip(launched, expect, m["schedule"][s["first"]:]):
                assert ln[1] == m["kernels"][e["kernel"]]["entry"] and ln[1] in names and e["layers"] == L.layers
                for j in (0, 1):                                           # at the addresses lowering gave
                    if L.args[j].kind == "ptr" and L.args[j].region:
                        assert int(ln[7 + j]) == addr(L.args[j]), (L.group, j)
            if k == 0:                          # the inputs, then the learning rate, then the launches
                for spec, c in zip(m["inputs"], [ln for ln in new if ln[0] == "dtod"]):
                    assert int(c[1]) == base + regions["batch"] + spec["arena_offset_per_sample"] * B \
                        + spec["offset_in_sample"]
                lr_at = base + m["rank"]["learning_rate"]["offset"]
                assert ["htod_async", str(lr_at), "4"] in new
            else:
                assert not [ln for ln in new if ln[0] in ("dtod", "copy2d", "htod_async")]
        with pytest.raises(N.NetcInputError, match="segment 11 is outside 0..10"):
            net.run_segment(len(seg["segments"]))
        # each place is an address the launches use: an operand one written before the op, a result one
        # read after it (a send's result is the message: nothing reads it)
        ptrs = [{addr(a) for a in L.args if a.kind == "ptr" and a.region} for L in low.launches]
        for k, c in enumerate(seg["comms"]):
            cut = seg["segments"][k + 1]["first"]
            for p in c["operands"]:
                assert any(base + regions[p["region"]] + p["offset"] in q for q in ptrs[:cut]), (c["name"], p)
            for p in c["results"] if c["kind"] != "send" else []:
                assert any(base + regions[p["region"]] + p["offset"] in q for q in ptrs[cut:]), (c["name"], p)
        # the distributed runtime's compiled rank over the library: each op reads its operands' bytes in
        # the arena and writes its result there (the kernels of the fake driver compute nothing)
        by_name = {c["name"]: c for c in seg["comms"]}
        checked = []

        def written(i, names_):               # op i's results are in the arena (until the plan reuses them)
            for n in names_:
                c = by_name[n]
                if c["kind"] != "send":
                    assert torch.all(rank.view(c["results"][0]) == i + 1), n

        def check(names_, operands):          # what an op reads is the arena's bytes at its operands' places
            if comm.calls:
                written(len(comm.calls) - 1, comm.calls[-1])
            places = [p for n in names_ for p in by_name[n]["operands"]]
            assert len(places) == len(operands)
            for p, x in zip(places, operands):
                st = [0] * len(p["shape"])
                for d in range(len(p["shape"]) - 1, -1, -1):
                    st[d] = 1 if d == len(p["shape"]) - 1 else st[d + 1] * p["shape"][d + 1]
                if list(p["strides"]) == st:      # dense: its bytes in one piece
                    raw = ctypes.string_at(base + regions[p["region"]] + p["offset"], x.numel() * x.element_size())
                    assert raw == x.contiguous().numpy().tobytes(), p["name"]
                    checked.append(p["name"])

        pattern = torch.arange(size // 4, dtype=torch.int32).view(torch.uint8)
        comm = RecordingComm(check)
        prog = SegmentLibrary(net)
        rank = CompiledRank(prog, comm)
        prog.arena[:size // 4 * 4].copy_(pattern)
        feed = {**xs, "lr": torch.tensor(0.5)}
        n0 = len(lines())
        named = rank.run(feed)
        assert len([ln for ln in lines()[n0:] if ln.startswith("launch")]) == len(low.launches)
        assert [n for names_ in comm.calls for n in names_] == [c["name"] for c in seg["comms"]]
        assert len(checked) >= 5
        written(len(comm.calls) - 1, comm.calls[-1])
        for i, names_ in enumerate(comm.calls):
            for n in names_:
                assert torch.all(named[n] == i + 1)
        assert set(named) >= {p["name"] for p in seg["outputs"]}


def test_target_cuda_needs_a_gpu(capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert main(["run", str(EX / "partition_batch.nd"), "--workers", "2", "--target", "cuda"]) == 1
    assert "--target cuda runs each rank's program compiled on a GPU, and torch sees none here" in capsys.readouterr().err
    assert main(["run", str(EX / "partition_batch.nd"), "--target", "cuda"]) == 1
    assert "--target cuda runs the ranks of --workers K" in capsys.readouterr().err
