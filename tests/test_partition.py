"""The partition and split-workers passes (netc/passes/partition/, split_workers.py): SINGA's partitioned
graphs now made by the pass (spec 5.6-5.8 and its section 11 conditions B2, B3, B6, B9, B16), the four
schemes and Paleo's splits as one program over K workers that computes what the unpartitioned network
computes (run in one process here; on K processes in test_distributed.py), and the per-worker report of
`netc explain FILE --workers K` against hand counts."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from netc.cli import main
from netc.diagnostics import DiagnosticEngine, NetcError
from netc.frontend import load
from netc.ir.query import layer_name, layers, network_outputs
from netc import pipelines
from netc.pipelines import Options, Training
from netc.runtime.distributed import assemble, rank_inputs, rank_params
from netc.runtime.reference import run_reference

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"
SINGA = ROOT.parent / "shared" / "corpus" / "singa"
PALEO = ROOT.parent / "shared" / "corpus" / "paleo"
needs_corpus = pytest.mark.skipif(not SINGA.is_dir(), reason="the shared corpus is not beside the repository")


def compiled(src=None, workers=None, phase="train", text=None, batch=None, spatial=None, notes=None):
    diag = DiagnosticEngine()
    if text is not None:
        from netc.frontend.singa.to_ir import import_singa
        m = import_singa(text, "t.conf", diag)
    else:
        m = load(str(src), diag, 1)
    if batch or spatial:
        from netc.runtime.scale import scale_inputs
        scale_inputs(m, batch=batch, spatial=spatial)
    ctx = pipelines.inference(m, Options(phase=phase, workers=workers), diag)
    if notes is not None:
        notes.update(ctx.notes)
    return m


def errors(**kw):
    with pytest.raises(NetcError) as ei:
        compiled(**kw)
    return [d for d in ei.value.diagnostics if d.severity == "error"]


def ops_of(m):
    return {op.attrs.get("name"): op for op in m.networks()[0].regions[0].ops if op.attrs.get("name")}


# ------------------------------------------------------------------------------------------------
# SINGA's partitioned graphs, from the pass (spec 10.4)

HYBRID_ORDER = [f"0#{layer}@{i}" for layer in ("data", "conv1", "pool1", "relu1", "norm1", "conv2", "relu2", "pool2",
                                               "norm2", "conv3", "relu3", "pool3") for i in (0, 1)] + [
    "split(0#pool3)@0", "split(0#pool3)@1",
    "bridge_src(split(0#pool3)@0->concate(split(0#pool3))@1)",
    "bridge_src(split(0#pool3)@1->concate(split(0#pool3))@0)",
    "bridge_dst(split(0#pool3)@0->concate(split(0#pool3))@1)",
    "bridge_dst(split(0#pool3)@1->concate(split(0#pool3))@0)",
    "concate(split(0#pool3))@1", "concate(split(0#pool3))@0",
    "0#ip1@1", "0#ip1@0",
    "slice(0#ip1)@1", "slice(0#ip1)@0",
    "bridge_src(slice(0#ip1)@1->concate(slice(0#ip1))@0)", "bridge_src(slice(0#ip1)@0->concate(slice(0#ip1))@1)",
    "bridge_dst(slice(0#ip1)@1->concate(slice(0#ip1))@0)",
    "concate(slice(0#ip1))@0",
    "bridge_dst(slice(0#ip1)@0->concate(slice(0#ip1))@1)",
    "0#loss@0", "concate(slice(0#ip1))@1", "0#loss@1"]


@needs_corpus
@pytest.mark.parametrize("name", ["0.3.0_cifar10_hybrid.conf", "0.2.0_cifar10_hybrid.conf"])
def test_singa_hybrid_graph_from_the_pass(name):
    notes = {}
    m = compiled(SINGA / name, notes=notes)
    graph = next(iter(notes["singa_graph"].values()))
    assert [n["node"] for n in graph] == HYBRID_ORDER            # SINGA's nodes, in Graph::Sort's order
    nd = {n["node"]: n for n in graph}
    assert nd["concate(split(0#pool3))@0"]["src"] == ["split(0#pool3)@0",
                                                      "bridge_dst(split(0#pool3)@1->concate(split(0#pool3))@0)"]
    assert nd["concate(split(0#pool3))@1"]["src"] == ["bridge_dst(split(0#pool3)@0->concate(split(0#pool3))@1)",
                                                      "split(0#pool3)@1"]
    assert nd["bridge_src(split(0#pool3)@1->concate(split(0#pool3))@0)"]["pid"] == 1
    assert nd["bridge_dst(split(0#pool3)@1->concate(split(0#pool3))@0)"]["pid"] == 0
    assert nd["0#loss@1"]["src"] == ["concate(slice(0#ip1))@1", "0#data@1"]
    ops = ops_of(m)
    shape = {n: list(op.results[0].type.shape) for n, op in ops.items()}
    assert shape["0#data:0"] == shape["0#data:1"] == [50, 32, 32, 3]
    assert shape["0#pool3:0"] == [50, 3, 3, 64] and shape["concate(split(0#pool3)):1"] == [100, 3, 3, 64]
    for i in (0, 1):
        assert shape[f"0#ip1:{i}"] == [100, 5] and ops[f"0#ip1:{i}"].attrs["worker"] == i
        assert shape[f"slice(0#ip1):{i}"] == [50, 5] and shape[f"concate(slice(0#ip1)):{i}"] == [50, 10]
    # the bridges are typed communication: a send on the source's worker, a recv on the destination's
    b = ops["bridge_src(split(0#pool3):1->concate(split(0#pool3)):0)"]
    assert b.name == "netc.send" and b.attrs["worker"] == 1 and b.attrs["peer"] == 0
    b = ops["bridge_dst(split(0#pool3):1->concate(split(0#pool3)):0)"]
    assert b.name == "netc.recv" and b.attrs["worker"] == 0 and b.attrs["peer"] == 1
    # partition_dim 1 slices the parameters (SINGA's Figure 4), partition_dim 0 replicates them
    params = {p.attrs["sym_name"]: p for p in m.params()}
    assert list(params["0#w4:0"].attrs["type"].shape) == [576, 5] and "0#w4" not in params
    assert params["0#w4:1"].attrs["slice_of"] == {"name": "0#w4", "dim": 1, "start": 5, "length": 5, "shape": [576, 10]}
    assert ops["0#conv1:0"].attrs["params"]["weight"].name == ops["0#conv1:1"].attrs["params"]["weight"].name == "0#w1"
    # a slice's blob j goes to the consumer on worker j (SINGA's first-request order would mix samples)
    cc = ops["concate(slice(0#ip1)):0"]
    assert [v.owner.attrs["name"] for v in cc.operands] == ["slice(0#ip1):0",
                                                            "bridge_dst(slice(0#ip1):1->concate(slice(0#ip1)):0)"]
    assert ops["slice(0#ip1):0"].attrs["index"] == 0 and ops["slice(0#ip1):0.1"].attrs["index"] == 1


@needs_corpus
@pytest.mark.parametrize("name,count", [("0.3.0_cifar10_cudnn_hybrid.conf", 44), ("dev.20160224_cifar10_hybrid.conf", 44),
                                        ("dev.20160224_mnist_hybrid.conf", 26), ("dev.20160313_mnist_2x2.conf", 52)])
def test_singa_partitioned_node_counts(name, count):
    notes = {}
    compiled(SINGA / name, notes=notes)
    assert len(next(iter(notes["singa_graph"].values()))) == count


@needs_corpus
def test_singa_workers_option_overrides_the_job():
    """--workers 1 runs the unpartitioned net (the K-worker baseline), --workers 4 repartitions."""
    m = compiled(SINGA / "0.3.0_cifar10_hybrid.conf", workers=1)
    assert list(ops_of(m)["0#data:0"].results[0].type.shape) == [100, 32, 32, 3]
    assert not any("worker" in op.attrs for op in m.networks()[0].regions[0].ops)
    m = compiled(SINGA / "0.3.0_cifar10_job.conf", workers=4)          # a K = 1 job, data parallel on 4
    assert list(ops_of(m)["0#data:3"].results[0].type.shape) == [25, 32, 32, 3]
    with pytest.raises(NetcError, match="num_output 10 is not divisible by the 4 partitions"):   # B9
        compiled(SINGA / "0.3.0_cifar10_hybrid.conf", workers=4)


V3 = """name: "t"
neuralnet {
  layer { name: "data" type: kRecordInput store_conf { batchsize: 64 shape: 784 } }
%s
}
cluster { nworkers_per_group: %d }
"""


def v3(body, K=1):
    return V3 % (body, K)


def ip(name, src, out=10, extra=""):
    return (f'  layer {{ name: "{name}" type: kInnerProduct srclayers: "{src}" innerproduct_conf {{ num_output: {out} }}'
            f' param {{ name: "w_{name}" }} param {{ name: "b_{name}" }} {extra}}}')


def test_b2_duplicate_connection_layer_names():
    body = ('  layer { name: "r" type: kReLU srclayers: "data" }\n' + ip("f1", "r", extra="partition_dim: 1 ") + "\n"
            + ip("f2", "r", extra="partition_dim: 1 ") + '\n  layer { name: "l" type: kEuclideanLoss srclayers: "f1" '
            'srclayers: "f2" partition_dim: 1 }')
    (d,) = errors(text=v3(body, K=2))
    assert "'split(split(0#r))' is needed for '0#f2' and for '0#f1'" in d.message and (d.loc.line, d.loc.col) == (6, 11)
    compiled(text=v3(body, K=1))   # fine without partitioning


def test_b3_v01_never_bridges():
    v1 = ('name: "j" train_steps: 1 train_one_batch { alg: kBP } updater { } cluster { workspace: "w" '
          'nworkers_per_group: %d }\nneuralnet {\n'
          ' layer { name: "data" type: kShardData sharddata_conf { path: "d" batchsize: 64 } }\n'
          ' layer { name: "mnist" type: kMnist srclayers: "data" mnist_conf { norm_a: 1 norm_b: 0 } }\n%s\n}')
    pool = ' layer { name: "p" type: kPooling srclayers: "mnist" pooling_conf { kernel: 2 %s} partition_dim: -1 }'
    (d,) = errors(text=v1 % (2, pool % ""))
    assert "crosses workers" in d.message and "never inserts the bridge layers" in d.message
    m = compiled(text=v1 % (2, pool.replace("partition_dim: -1", "") % "stride: 2 pad: 1 "))
    ops = ops_of(m)
    assert [n for n in ops] == ["mnist:00", "mnist:01", "p:00", "p:01"]
    assert list(ops["p:01"].results[0].type.shape) == [32, 14, 14, 1] and ops["p:01"].attrs["worker"] == 1


def test_b6_partition_dim_minus_one_with_k2():
    (d,) = errors(text=v3(ip("fc", "data", extra="partition_dim: -1 "), K=2))
    assert "partition_dim -1 is unsupported by SINGA v0.2/v0.3 with K > 1" in d.message
    compiled(text=v3(ip("fc", "data", extra="partition_dim: -1 "), K=1))


def test_b9_non_divisible_partitioning():
    # a job.conf's batchsize follows SINGA's rule instead (batchsize / K, with a warning):
    # tests/test_singa_batch_split.py; num_output / num_filters stay errors
    (d,) = errors(text=v3(ip("fc", "data", extra="partition_dim: 1 ").replace("num_output: 10", "num_output: 9"), K=2))
    assert "num_output 9 is not divisible by the 2 partitions" in d.message and (d.loc.line, d.loc.col) == (4, 11)


def test_b16_share_from_on_partitioned_layer():
    body = (ip("fc", "data", 784, extra="partition_dim: 1 ") + '\n  layer { name: "fc2" type: kInnerProduct srclayers: '
            '"fc" partition_dim: 1 innerproduct_conf { num_output: 784 } param { name: "w2" share_from: "0#w_fc" } '
            'param { name: "b2" } }')
    (d,) = errors(text=v3(body, K=2))
    assert "resolves to an arbitrary partition" in d.message


def test_v03_repeated_batchsize():
    """One batch size per partition (v0.3): the logical batch is their sum, partition i gets its own."""
    m = compiled(text=v3('  layer { name: "r" type: kReLU srclayers: "data" }').replace(
        "batchsize: 64", "batchsize: 48 batchsize: 16").replace(
        "nworkers_per_group: 1", "nworkers_per_group: 2"))
    ops = ops_of(m)
    assert [list(ops[n].results[0].type.shape) for n in ("0#data:0", "0#data:1")] == [[48, 784], [16, 784]]
    assert ops["0#data:1"].attrs["partition"]["sizes"] == [48, 16]


# ------------------------------------------------------------------------------------------------
# every scheme, in one process: the partitioned program computes the unpartitioned network

def emulate(src, K, seed=3, **kw):
    """Outputs of the logical network, and of the K-worker program run in one process (communication
    by its reference semantics), assembled by logical name."""
    want = run_reference(compiled(src, 1, **kw), seed=seed)
    m = compiled(src, K, **kw)
    net = m.networks()[0]
    used = {r.name for op in layers(net) for r in (op.attrs.get("params") or {}).values()}
    named = run_reference(m, rank_inputs(net, seed, torch.float64), rank_params(m, used, seed, torch.float64),
                          intermediates=True)
    got = assemble([(layer_name(op), named[layer_name(op)], op.attrs.get("partition")) for op in network_outputs(net)])
    return want, got, m


CASES = [(EX / "partition_batch.nd", 2, {}), (EX / "partition_batch.nd", 4, {}), (EX / "partition_feature.nd", 2, {}),
         (EX / "partition_feature.nd", 4, {}), (EX / "partition_hybrid.nd", 2, {}), (EX / "partition_hybrid.nd", 4, {}),
         (EX / "partition_location.nd", 4, {}),
         (SINGA / "0.3.0_cifar10_hybrid.conf", 2, {"batch": 4, "spatial": "15"}),
         (SINGA / "0.3.0_cifar10_job.conf", 4, {"batch": 8, "spatial": "15"}),
         (SINGA / "dev.20160313_mnist_2x2.conf", 4, {"batch": 8})]


@pytest.mark.parametrize("src,K,kw", CASES, ids=lambda x: x.name if isinstance(x, Path) else str(x))
def test_partitioned_program_computes_the_network(src, K, kw):
    if not src.exists():
        pytest.skip("the shared corpus is not beside the repository")
    want, got, m = emulate(src, K, **kw)
    assert sorted(got) == sorted(want)
    for k, v in want.items():
        assert got[k].shape == v.shape and torch.allclose(got[k], v, rtol=1e-12, atol=1e-14), k
    assert {op.attrs["worker"] for op in m.networks()[0].regions[0].ops if "worker" in op.attrs} == set(range(K))


def test_schemes_choose_their_communication():
    kinds = lambda m: sorted({op.name[5:] for op in m.networks()[0].regions[0].ops    # noqa: E731
                              if op.name in ("netc.send", "netc.recv", "netc.all_gather", "netc.reduce_scatter",
                                             "netc.all_reduce", "netc.broadcast")})
    assert kinds(compiled(EX / "partition_batch.nd", 2)) == []                     # data parallel: none forward
    assert kinds(compiled(EX / "partition_feature.nd", 2)) == ["reduce_scatter"]   # column, then row-parallel
    assert kinds(compiled(EX / "partition_hybrid.nd", 2)) == ["all_gather", "reduce_scatter"]
    assert kinds(compiled(EX / "partition_location.nd", 4)) == ["recv", "send"]    # a pipeline
    fc2 = ops_of(compiled(EX / "partition_feature.nd", 2))
    assert fc2["fc2.partial:1"].attrs["params"]["weight"].name == "fc2.weight:1" and fc2["fc2.partial:1"].attrs["bias"] is False


def test_paleo_splits_are_locations():
    m = compiled(PALEO / "alex_v2_4gpu.json", 4)
    ops = ops_of(m)
    assert ops["parallel_fc67/fc6@3"].attrs["worker"] == 3 and ops["conv1"].attrs["worker"] == 0
    assert ops["parallel_fc67/concat6@2"].name == "netc.all_gather"                # concat of @all: all-gather
    assert ops["pool5.broadcast:1"].name == "netc.broadcast"                       # read by every split
    m = compiled(PALEO / "alex_v2_4gpu.json", 2)                                   # 4 splits on 2 workers: i mod 2
    assert ops_of(m)["parallel_fc67/fc6@3"].attrs["worker"] == 1


def test_partition_errors():
    with pytest.raises(NetcError, match="location 3 of 'label' needs at least 4 workers; there are 2"):
        compiled(EX / "partition_location.nd", 2)
    with pytest.raises(NetcError, match="cannot be split 3 ways along the batch"):
        compiled(EX / "partition_batch.nd", 3)


def test_workers_one_changes_nothing():
    m = compiled(EX / "partition_hybrid.nd", 1)
    assert not any("worker" in op.attrs for op in m.networks()[0].regions[0].ops)


def test_split_workers_programs():
    diag = DiagnosticEngine()
    m = load(str(EX / "partition_hybrid.nd"), diag, 1)
    pipelines.workers(m, Options(workers=2, training=Training()), diag)
    nets = m.networks()
    assert [n.attrs["sym_name"] for n in nets] == ["hybrid.rank0", "hybrid.rank1"]
    for r, net in enumerate(nets):
        ops = [op for op in net.regions[0].ops if op.attrs.get("name")]
        assert all(op.attrs.get("worker", r) == r for op in ops)
        ag = next(op for op in ops if op.name == "netc.all_gather")
        assert len(ag.operands) == 1                                   # its own shard only
        assert all(not op.operands for op in ops if op.name == "netc.recv")
        # replicated parameters: an all-reduce of the gradient, an update on every holder
        ar = [op for op in ops if op.name == "netc.all_reduce"]
        assert sorted(op.attrs["grad_of"] for op in ar) == ["conv1.bias", "conv1.weight", "conv2.bias", "conv2.weight"]
        assert {op.attrs["bucket"] for op in ar} == {0}
        assert sorted(net.attrs["gradients"])[:2] == ["conv1.bias", "conv1.weight"]
        scale = [op for op in ops if op.name == "netc.scale"]
        assert [op.attrs["factor"] for op in scale] == [0.5]          # the loss is the mean of 2 partitions


# ------------------------------------------------------------------------------------------------
# explain --workers K: per-worker work and communication against hand counts

def report(capsys, src, K, *extra):
    capsys.readouterr()
    assert main(["explain", str(src), "--workers", str(K), "--brief", "--format", "json", *extra]) == 0
    return json.loads(capsys.readouterr().out)["workers"]


def test_explain_batch_parallel(capsys):
    w = report(capsys, EX / "partition_batch.nd", 2)
    params = (3 * 3 * 3 * 8 + 8 + 6 * 6 * 8 * 10 + 10) * 4
    conv, pool, fc, loss = 2 * 4 * 12 * 12 * 8 * 27, 2 * 4 * 6 * 6 * 8 * 4, 2 * 4 * 288 * 10, 5 * 4 * 10
    for r in w["ranks"]:
        assert (r["ops"], r["param_bytes"], r["sent_bytes"], r["comm_ops"]) == (4, params, 0, 0)
        assert r["flops"] == conv + pool + fc + loss
        assert r["activation_bytes"] == 4 * (4 * 12 * 12 * 8 + 4 * 6 * 6 * 8 + 4 * 10 + 1)
    assert w["total"]["bytes"] == 0 and not w["edges"] and not w["collectives"]


def test_explain_feature_parallel(capsys):
    w = report(capsys, EX / "partition_feature.nd", 2, "--network", "infiniband")
    (c,) = w["collectives"]
    assert (c["kind"], c["ranks"], c["bytes"], c["wire_bytes"]) == ("reduce_scatter", [0, 1], 8 * 16 * 4, [256, 256])
    r0, r1 = w["ranks"]
    assert r0["param_bytes"] == (32 * 64 + 64 + 64 * 16 + 16) * 4 and r1["param_bytes"] == (32 * 64 + 64 + 64 * 16) * 4
    # alpha-beta: (n - 1) alpha + (n - 1) / n * m / beta, alpha 2 us, beta 70 Gbit/s
    assert c["alpha_beta_ms"] == pytest.approx((2e-6 + 0.5 * 512 / (70e9 / 8)) * 1e3)


def test_explain_hybrid(capsys):
    w = report(capsys, EX / "partition_hybrid.nd", 2)
    kinds = {c["kind"]: c for c in w["collectives"]}
    assert kinds["all_gather"]["bytes"] == 8 * 6 * 6 * 8 * 4 and kinds["all_gather"]["wire_bytes"] == [4608, 4608]
    assert kinds["reduce_scatter"]["bytes"] == 8 * 10 * 4 and kinds["reduce_scatter"]["wire_bytes"] == [160, 160]
    assert [r["sent_bytes"] for r in w["ranks"]] == [4768, 4768] and w["total"]["wire_bytes"] == 2 * 4768


def test_explain_location(capsys):
    w = report(capsys, EX / "partition_location.nd", 4, "--device", "titanx")
    assert [(e["from"], e["to"], e["bytes"]) for e in w["edges"]] == [(0, 1, 8 * 6 * 6 * 8 * 4),
                                                                       (1, 2, 8 * 6 * 6 * 8 * 4), (2, 3, 8 * 32 * 4)]
    assert [r["ops"] for r in w["ranks"]] == [2, 1, 1, 2] and all("time_fwd_ms" in r for r in w["ranks"])
    # Paleo: link(b) = b / (G/8 * 10^9), ethernet 10 Gbit/s
    assert w["edges"][2]["paleo_ms"] == pytest.approx(1024 / (10 / 8 * 1e9) * 1e3)


@needs_corpus
def test_explain_singa_hybrid_and_paleo(capsys):
    w = report(capsys, SINGA / "0.3.0_cifar10_hybrid.conf", 2)
    assert [(e["from"], e["to"], e["messages"], e["bytes"]) for e in w["edges"]] == [
        (0, 1, 2, 50 * 3 * 3 * 64 * 4 + 50 * 5 * 4), (1, 0, 2, 50 * 3 * 3 * 64 * 4 + 50 * 5 * 4)]
    w = report(capsys, PALEO / "alex_v2_2gpu.json", 2)
    assert [(e["from"], e["to"], e["bytes"]) for e in w["edges"]] == [(0, 1, 128 * 5 * 5 * 256 * 4),
                                                                       (1, 0, 128 * 2048 * 4)]
    (c,) = w["collectives"]
    assert (c["kind"], c["name"], c["bytes"]) == ("all_gather", "parallel_fc67/concat6@0", 128 * 4096 * 4)


def test_explain_workers_list_is_still_paleos_table(capsys):
    assert main(["explain", str(PALEO / "alex_v2.json"), "--brief", "--device", "titanx", "--workers", "1,2"]) == 0
    assert "workers, one program per rank" not in capsys.readouterr().out


def test_explain_dot_draws_workers(tmp_path, capsys):
    out = tmp_path / "w.dot"
    assert main(["explain", str(EX / "partition_hybrid.nd"), "--workers", "2", "--dot", str(out)]) == 0
    dot = out.read_text()
    assert 'subgraph "cluster_rank0"' in dot and 'subgraph "cluster_rank1"' in dot
    assert "all_gather" in dot and "style=dashed" in dot


def test_memory_plan_per_rank(capsys):
    assert main(["explain", str(EX / "partition_hybrid.nd"), "--workers", "2", "--brief", "--memory",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [n["name"] for n in doc["networks"]] == ["hybrid.rank0", "hybrid.rank1"]
    assert all(n["memory"]["arena_bytes"] > 0 for n in doc["networks"])


def test_opt_workers_round_trips(tmp_path, capsys):
    """The partitioned IR and the per-rank programs print and parse back."""
    from netc.ir.parser import parse_ir
    from netc.ir.printer import print_ir
    for passes in ("partition", "split-workers"):
        capsys.readouterr()
        assert main(["opt", str(EX / "partition_hybrid.nd"), "--workers", "2", "-p", passes, "--train"]) == 0
        text = capsys.readouterr().out
        assert print_ir(parse_ir(text, "x.mlir")) == text
