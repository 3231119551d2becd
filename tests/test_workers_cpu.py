"""K workers on the CPU target (`netc run FILE --workers K --target cpu`, issue 28): each rank's program --
a network of a split-workers module, forward or training step -- runs as the CPU target's step generated once
over its memory plan's arenas (runtime/cpu_step.py CpuRank), yielding at each communication op, which the
distributed runtime runs on the arena's views of its operands and result (distributed.CompiledRank, as for
the interpreter target).

In this process: the segments tile the plan's steps around the communication ops in the program's order, a
place is the arena view of its plan tensor, and with a deterministic stand-in for torch.distributed a rank's
step gives every communication op the operands, and returns the outputs and gradients, that the reference
executor's rank loop (execute_rank, f32) gives it. In K processes (gloo): forward outputs, two training steps'
losses, first-step gradients and final parameters equal the single-process float64 reference run
(`--workers 1`) to 1e-4 of each array's largest entry (f32). And the flags a CPU rank does not take are refused
before any rank starts."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from netc.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workers import baseline, run_netc, same_npz, split_module  # noqa: E402  (tests/workers.py)

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"
ENV = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo", PYTHONPATH=str(ROOT), NETC_DIST_TIMEOUT="60")
ENV.pop("NETC_FAULT", None)
TOL = 1e-4


def netc(*args):
    return run_netc(args, ENV, 300)


def same(a, b, rtol=TOL) -> int:
    return same_npz(a, b, rtol)


def rank_networks(src, K, train=False, optimizer=None):
    """The ranks' networks of the split-workers module (tests/workers.py split_module), by rank, and the module."""
    module = split_module(src, K, train, optimizer)
    return sorted((n for n in module.networks() if "rank" in n.attrs), key=lambda n: n.attrs["rank"]), module


class StandIn:
    """torch.distributed's place in a rank: records each communication op's operands and answers with a tensor of
    its result's shape made from them (a fixed function), so two executors of one rank program can be compared."""

    def __init__(self):
        self.calls = []

    def run(self, op, xs, dtype, bucket_ops=None):
        ops = bucket_ops or [op]
        operands = xs if bucket_ops else xs[:1]
        ys = []
        for k, o in enumerate(ops):
            x = operands[k].detach().double().reshape(-1) if k < len(operands) and operands[k].numel() else None
            self.calls.append((o.attrs["name"], None if x is None else x.clone()))
            shape = tuple(o.results[0].type.shape)
            n = int(np.prod(shape)) if shape else 1
            y = (torch.arange(n, dtype=torch.float64) % 7 - 3) / 5 if x is None else x.repeat(n // x.numel() + 1)[:n]
            y = y.reshape(shape)
            ys.append((y.abs() * 3).long() % 2 if o.results[0].type.dtype.startswith("i") else 0.75 * y)
        return ys if bucket_ops else ys[0]

    def finish(self):
        pass


def feed_of(net):
    from netc.ir.query import layer_name, network_inputs
    from netc.runtime import distributed as D
    feed = D.rank_inputs(net, 0, torch.float64)
    for op in network_inputs(net):
        role = op.attrs.get("role")
        if role == "learning_rate":
            feed[layer_name(op)] = torch.tensor(0.05, dtype=torch.float64)
        elif role == "seed":
            feed[layer_name(op)] = torch.tensor(3, dtype=torch.int64)
    return feed


RANKS = [("hybrid-train", EX / "partition_hybrid.nd", 2, "momentum"), ("location", EX / "partition_location.nd", 4, None),
         ("location-train", EX / "partition_location.nd", 4, "adam"), ("phases-train", EX / "cifar10_phases.nd", 2, "sgd")]


@pytest.mark.parametrize("name,src,K,optimizer", RANKS, ids=[r[0] for r in RANKS])
def test_rank_step_gives_each_communication_op_what_the_reference_gives_it(name, src, K, optimizer):
    """One step of every rank's program: CpuRank's segments (through CompiledRank) against execute_rank in f32,
    with the same stand-in communication: each communication op's operands, the outputs and the gradients."""
    from netc.ir.core import SymbolRef
    from netc.ir.query import layer_name, layers, network_outputs
    from netc.runtime import distributed as D
    from netc.runtime.cpu import CPU_LOWERINGS
    from netc.runtime.cpu_step import CpuRank
    nets, module = rank_networks(src, K, optimizer is not None, optimizer)
    checked = compared = 0
    for net in nets:
        used = {r.name for op in layers(net) for r in (op.attrs.get("params") or {}).values() if isinstance(r, SymbolRef)}
        params = D.rank_params(module, used, 0, torch.float64)
        feed = feed_of(net)
        ref_comm, cpu_comm = StandIn(), StandIn()
        ref = D.execute_rank(net, feed, {k: v.float() for k, v in params.items()}, ref_comm, torch.float32)
        rank = CpuRank(module, net, params, CPU_LOWERINGS)
        grads = sorted((net.attrs.get("gradients") or {}).values())
        got = D.CompiledRank(rank, cpu_comm).run(feed, capture=grads)
        assert [c[0] for c in cpu_comm.calls] == [c[0] for c in ref_comm.calls]
        for (n, x), (_, y) in zip(cpu_comm.calls, ref_comm.calls):
            assert (x is None) == (y is None), n
            if x is not None:
                assert float((x - y).abs().max()) <= TOL * max(float(y.abs().max()), 1e-30), n
                checked += 1
        outs = [layer_name(op) for op in network_outputs(net)]
        for n in grads + [o for o in outs if o in got and "send(" not in o]:     # (a send's result: the message)
            x, y = got[n].double(), ref[n].double()
            assert x.shape == y.shape and float((x - y).abs().max()) <= TOL * max(float(y.abs().max()), 1e-30), n
            compared += 1
    assert checked >= K - 1 and compared >= 1


def test_segments_and_places_of_a_rank_program():
    """The segments tile the plan's non-alias steps between the communication ops, which are the program's, in its
    order, once each; the generated step yields once per communication op; a place is its plan tensor's view."""
    from netc.codegen import is_comm
    from netc.ir.core import SymbolRef
    from netc.ir.query import layers
    from netc.runtime import distributed as D
    from netc.runtime.cpu_step import CpuRank
    nets, module = rank_networks(EX / "partition_hybrid.nd", 2, True, "momentum")
    for net in nets:
        used = {r.name for op in layers(net) for r in (op.attrs.get("params") or {}).values() if isinstance(r, SymbolRef)}
        rank = CpuRank(module, net, D.rank_params(module, used, 0, torch.float64))
        assert isinstance(rank, D.SegmentProgram)
        seg, plan = rank.segmented, rank.plan
        assert len(seg["segments"]) == len(seg["comms"]) + 1 and seg["comms"]
        assert [c["name"] for c in seg["comms"]] == [op.attrs["name"] for op in layers(net) if is_comm(op)]
        assert rank.program.source.count("\n    yield ") == len(seg["comms"])
        runs = [st for st in plan.steps if st.action != "alias" and st.index not in {c["step"] for c in seg["comms"]}]
        assert sum(s["launches"] for s in seg["segments"]) == len(runs)
        for s, t in zip(seg["segments"], seg["segments"][1:]):
            assert t["first"] == s["first"] + s["launches"]
        view = D.CompiledRank(rank, comm=None).view
        for c in seg["comms"]:
            for p in c["operands"] + c["results"]:
                v, w = view(p), rank.program.arenas.view(plan.tensor(p["name"]))
                assert (v.data_ptr(), v.shape, v.stride(), v.dtype) == (w.data_ptr(), w.shape, w.stride(), w.dtype)


# ------------------------------------------------------------------------------------------- K processes

def test_forward_equals_single_process(tmp_path, capsys):
    """A model-parallel forward (feature: column- then row-parallel, a reduce-scatter)."""
    src = EX / "partition_feature.nd"
    baseline(capsys, "run", src, "-o", tmp_path / "one.npz")
    r = netc("run", src, "--workers", 2, "--target", "cpu", "-o", tmp_path / "many.npz")
    assert r.returncode == 0, r.stderr
    assert same(tmp_path / "many.npz", tmp_path / "one.npz") >= 1


TRAIN = [("batch", EX / "partition_batch.nd", ["--optimizer", "momentum"]),
         ("hybrid", EX / "partition_hybrid.nd", ["--optimizer", "adam"])]


@pytest.mark.parametrize("name,src,extra", TRAIN, ids=[t[0] for t in TRAIN])
def test_training_steps_equal_single_process(name, src, extra, tmp_path, capsys):
    """Two steps: data parallelism (a bucket of gradient all-reduces) and data + model parallelism (an all-gather,
    a row-parallel layer, their gradients sent pairwise): losses, step 1's gradients, final parameters and state."""
    args = ["--train", "--steps", "2", *extra]
    baseline(capsys, "run", src, *args, "--dtype", "f64", "--grads", tmp_path / "g1.npz", "-o", tmp_path / "p1.npz",
             "--history", tmp_path / "h1.json")
    r = netc("run", src, "--workers", 2, "--target", "cpu", *args, "--grads", tmp_path / "gk.npz",
             "-o", tmp_path / "pk.npz", "--history", tmp_path / "hk.json")
    assert r.returncode == 0, r.stderr
    assert "on 2 workers" in r.stdout
    one, many = (json.loads((tmp_path / f).read_text()) for f in ("h1.json", "hk.json"))
    assert len(many) == len(one) == 2
    for a, b in zip(many, one):
        assert a["loss"] == pytest.approx(b["loss"], rel=TOL)
    assert one[1]["loss"] != pytest.approx(one[0]["loss"], rel=1e-3)      # the second step saw the update
    assert same(tmp_path / "gk.npz", tmp_path / "g1.npz") >= 2
    assert same(tmp_path / "pk.npz", tmp_path / "p1.npz") >= 4


@pytest.mark.parametrize("flags,says", [(["--dtype", "f64"], "in f32: drop --dtype"),
                                        (["--tf32"], "in f32: drop --dtype/--tf32"),
                                        (["--interp-blocks", "large"], "--interp-blocks needs --target interp"),
                                        (["--compare"], "--compare does not apply to --workers K")])
def test_flags_a_cpu_rank_does_not_take(flags, says, capsys):
    rc = main(["run", str(EX / "partition_batch.nd"), "--workers", "2", "--target", "cpu", "--train", *flags])
    err = capsys.readouterr().err
    assert rc != 0 and says in err and "Traceback" not in err
