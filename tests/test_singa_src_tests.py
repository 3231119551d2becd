"""SINGA's own unit tests of the net graph (src/test/ of apache/singa at v0.3.0-rc3; v0.2.0 has the same
cases), ported as job.confs with SINGA's expected shapes and values (issue 24). Where each case is:

| SINGA case | netc test |
| --- | --- |
| test_neuralnet.cc AddModelSplitLayers, DirectConnection, SliceConcate (K = 2) | tests/test_singa_fixes.py |
| test_neuralnet.cc RegisterLayers; v0.1's ParamShareFrom | no assertion in SINGA (empty bodies) |
| test_connection_layers.cc DummyTest | tests/test_singa_fixes.py::test_dummy_is_an_identity_op |
| test_connection_layers.cc DataSliceTest, ModelSliceTest (forward) | tests/test_singa_fixes.py |
| test_connection_layers.cc DataSliceTest, ModelSliceTest (gradient) | here |
| test_connection_layers.cc BridgeTest, DataConcateTest, ModelConcateTest, SplitTest | here |
| test_unrolling.cc GRULanguageModelTrain | here (GRULanguageModelTest is commented out in SINGA) |
| test_gru_layer.cc Setup, ComputeFeature (0.204824, 0.346753) | tests/test_singa_init.py |
| test_gru_layer.cc ComputeGradient | no assertion in SINGA (and commented out) |
| test_record_input_layer.cc, test_csv_input_layer.cc Setup | here (shapes); their ComputeFeature reads SINGA's kvfile / CSV stores, which netc does not read (the data is an input) |
| test_paramslicer.cc, test_msg.cc, test_cluster.cc, test_store.cc, ... | not the net graph |

SINGA checks each connection layer's gradient after ComputeGradient; here the gradient is torch's autograd
through netc's reference executor (the values netc's gradient ops are checked against elsewhere: test_gradients).
N, M, K are SINGA's (10, 20, 5).
"""
from __future__ import annotations

import pytest
import torch

from netc import pipelines
from netc.diagnostics import DiagnosticEngine
from netc.frontend.singa import build_singa
from netc.frontend.singa.to_ir import import_singa
from netc.pipelines import Options
from netc.runtime.reference import run_reference

N, M, K = 10, 20, 5


def compiled(text):
    diag = DiagnosticEngine()
    m = import_singa(text, "t.conf", diag)
    pipelines.inference(m, Options(phase="train"), diag)
    return m


def shapes_of(m):
    return {op.attrs["name"]: list(op.results[0].type.shape)
            for op in m.networks()[0].regions[0].ops if op.attrs.get("name") and op.results}


def job(*layers):
    return 'name: "t"\nneuralnet {\n' + "".join(f"  layer {{ {x} }}\n" for x in layers) + "}\n"


def dummy_in(name, *shape, pid=None):
    p = f" partition_id: {pid}" if pid is not None else ""
    return f'name: "{name}" type: kDummy{p} dummy_conf {{ input: true {" ".join(f"shape: {s}" for s in shape)} }}'


def dummy_out(name, src, pid=None):
    p = f" partition_id: {pid}" if pid is not None else ""
    return f'name: "{name}" type: kDummy srclayers: "{src}"{p} dummy_conf {{ output: true }}'


def run_with_grads(m, inputs: dict, outs: list[str]):
    """Forward values of `outs`, and each input's gradient for a random gradient at every output."""
    xs = {k: v.clone().requires_grad_(True) for k, v in inputs.items()}
    got = run_reference(m, xs)
    gys = {o: torch.rand_like(got[o]) for o in outs}
    grads = torch.autograd.grad([got[o] for o in outs], list(xs.values()), [gys[o] for o in outs])
    return got, gys, dict(zip(xs, grads))


# ------------------------------------------------------------------------------------------------
# test_connection_layers.cc

def test_bridge():
    """BridgeTest: src and dst are [N, M]; the output is the input, its gradient the output's. A
    hand-written bridge pair is opaque in netc (the reference passes it through; SINGA pairs it by name)."""
    m = compiled(job(dummy_in("dummy_input", N, M), 'name: "bridge_src" type: kBridgeSrc srclayers: "dummy_input"',
                     'name: "bridge_dst" type: kBridgeDst srclayers: "bridge_src"',
                     dummy_out("dummy_output", "bridge_dst")))
    s = shapes_of(m)
    assert s["0#bridge_src:0"] == s["0#bridge_dst:0"] == [N, M]
    x = torch.rand(N, M, dtype=torch.float64)
    got, gy, gx = run_with_grads(m, {"0#dummy_input:0": x}, ["0#dummy_output:0"])
    assert torch.equal(got["0#dummy_output:0"], x)
    assert torch.equal(gx["0#dummy_input:0"], gy["0#dummy_output:0"])


def slice_job(dim):
    return job(dummy_in("dummy_input", N, M),
               f'name: "slice" type: kSlice srclayers: "dummy_input" slice_conf {{ slice_dim: {dim} num_slices: {K} }}',
               *[dummy_out(f"dummy_output_{i}", "slice", pid=i) for i in range(K)])


@pytest.mark.parametrize("dim", [0, 1], ids=["DataSliceTest", "ModelSliceTest"])
def test_slice_gradient(dim):
    """The gradient halves of DataSliceTest / ModelSliceTest: in.grad[i] is out[k].grad at SINGA's index."""
    m = compiled(slice_job(dim))
    x = torch.rand(N, M, dtype=torch.float64)
    outs = [f"0#dummy_output_{i}:0" for i in range(K)]
    got, gy, gx = run_with_grads(m, {"0#dummy_input:0": x}, outs)
    gin = gx["0#dummy_input:0"].reshape(-1)
    if dim == 0:
        step = N * M // K
        for i in range(N * M):
            assert gin[i] == gy[outs[i // step]].reshape(-1)[i % step]
    else:
        step, offset = M // K, 0
        for i in range(N * M):
            if i and i % M == 0:
                offset += step
            assert gin[i] == gy[outs[(i // step) % K]].reshape(-1)[offset + i % step]


def concate_job(dim):
    shape = (N // K, M) if dim == 0 else (N, M // K)
    return job(*[dummy_in(f"dummy_input_{i}", *shape, pid=i) for i in range(K)],
               'name: "concate" type: kConcate ' + " ".join(f'srclayers: "dummy_input_{i}"' for i in range(K))
               + f" concate_conf {{ concate_dim: {dim} num_concates: {K} }}",
               dummy_out("dummy_output", "concate"))


@pytest.mark.parametrize("dim", [0, 1], ids=["DataConcateTest", "ModelConcateTest"])
def test_concate(dim):
    """K inputs [N/K, M] (dim 0) or [N, M/K] (dim 1) concatenated to [N, M]: out[i] is in[k][j] at SINGA's
    index, and in[k].grad the matching part of out.grad."""
    m = compiled(concate_job(dim))
    assert shapes_of(m)["0#concate:0"] == [N, M]
    shape = (N // K, M) if dim == 0 else (N, M // K)
    xs = {f"0#dummy_input_{i}:0": torch.rand(*shape, dtype=torch.float64) for i in range(K)}
    got, gy, gx = run_with_grads(m, xs, ["0#dummy_output:0"])
    out, gout = got["0#dummy_output:0"].reshape(-1), gy["0#dummy_output:0"].reshape(-1)
    ins = [xs[f"0#dummy_input_{i}:0"].reshape(-1) for i in range(K)]
    gins = [gx[f"0#dummy_input_{i}:0"].reshape(-1) for i in range(K)]
    if dim == 0:
        step = N * M // K
        for i in range(N * M):
            assert ins[i // step][i % step] == out[i] and gins[i // step][i % step] == gout[i]
    else:
        step, offset = M // K, 0
        for i in range(N * M):
            if i and i % M == 0:
                offset += step
            k = (i // step) % K
            assert ins[k][offset + i % step] == out[i] and gins[k][offset + i % step] == gout[i]


def test_split():
    """SplitTest: every reader of a kSplit gets the whole input [N, M]; the input's gradient is the sum
    of the readers'. netc's readers read the source itself (a value may have several users)."""
    m = compiled(job(dummy_in("dummy_input", N, M), f'name: "split" type: kSplit srclayers: "dummy_input" '
                     f'split_conf {{ num_splits: {K} }}', *[dummy_out(f"dummy_output_{i}", "split", pid=i)
                                                             for i in range(K)]))
    outs = [f"0#dummy_output_{i}:0" for i in range(K)]
    assert all(shapes_of(m)[o] == [N, M] for o in outs)
    x = torch.rand(N, M, dtype=torch.float64)
    got, gy, gx = run_with_grads(m, {"0#dummy_input:0": x}, outs)
    assert all(torch.equal(got[o], x) for o in outs)
    assert torch.allclose(gx["0#dummy_input:0"], sum(gy[o] for o in outs), rtol=0, atol=1e-15)


# ------------------------------------------------------------------------------------------------
# test_unrolling.cc

UNROLLING = job(
    'name: "data" type: kRecordInput store_conf { batchsize: 4 shape: 8 }',
    'name: "embedding" type: kDummy srclayers: "data" unroll_len: 3 unroll_conn_type: kUnrollOneToAll',
    'name: "gru" type: kGRU srclayers: "embedding" gru_conf { dim_hidden: 20 } '
    + " ".join(f'param {{ name: "w_{g}_h{s}" }}' for s in "xh" for g in "zrc")
    + " unroll_len: 3 unroll_conn_type: kUnrollOneToOne",
    'name: "out" type: kInnerProduct srclayers: "gru" innerproduct_conf { num_output: 100 } '
    'param { name: "w" } param { name: "b" } unroll_len: 3 unroll_conn_type: kUnrollOneToOne',
    'name: "loss" type: kSoftmaxLoss srclayers: "out" srclayers: "data" unroll_len: 3 '
    'unroll_conn_type: kUnrollOneToOne unroll_conn_type: kUnrollOneToAll')


def test_unrolling_gru_language_model_train():
    """GRULanguageModelTrain: SINGA's unrolled net, layer by layer: names, sources in order, param names
    and share_from (the record input gives the store_conf SINGA's test leaves out)."""
    GRU_P = [f"w_{g}_h{s}" for s in "xh" for g in "zrc"]
    want = [("0#data", [], []), *[(f"{t}#embedding", ["0#data"], []) for t in range(3)],
            ("0#gru", ["0#embedding"], [(f"0#{p}", None) for p in GRU_P]),
            *[(f"{t}#gru", [f"{t}#embedding", f"{t - 1}#gru"], [(f"{t}#{p}", f"0#{p}") for p in GRU_P])
              for t in (1, 2)],
            ("0#out", ["0#gru"], [("0#w", None), ("0#b", None)]),
            *[(f"{t}#out", [f"{t}#gru"], [(f"{t}#w", "0#w"), (f"{t}#b", "0#b")]) for t in (1, 2)],
            *[(f"{t}#loss", [f"{t}#out", "0#data"], []) for t in range(3)]]
    net = build_singa(UNROLLING, file="t.conf")
    got = [(n.name.removesuffix("@0"), [s.removesuffix("@0") for s in n.srcs],
            [(p.name, p.share_from) for p in n.params]) for n in net.nodes]
    assert got == want
    # and the IR: one parameter per shared group, every step's GRU on it
    m = compiled(UNROLLING)
    assert sorted(p.attrs["sym_name"] for p in m.params() if p.attrs.get("share_from") is None) == sorted(
        ["0#w", "0#b"] + [f"0#{p}" for p in GRU_P])
    s = shapes_of(m)
    assert [s[f"{t}#gru:0"] for t in range(3)] == [[4, 20]] * 3 and s["2#out:0"] == [4, 100]


# ------------------------------------------------------------------------------------------------
# test_record_input_layer.cc, test_csv_input_layer.cc

@pytest.mark.parametrize("kind", ["kRecordInput", "kCSVInput"])
def test_input_layer_setup(kind):
    """Setup: batchsize 2 of records of shape 3: the data blob holds 6 values, and 2 labels (aux_data)."""
    conf = 'store_conf { backend: "kvfile" path: "src/test/test.bin" batchsize: 2 shape: 3 }'
    if kind == "kCSVInput":
        conf = 'store_conf { backend: "textfile" path: "src/test/test.csv" batchsize: 2 shape: 3 }'
    m = compiled(job(f'name: "data" type: {kind} {conf}',
                     'name: "ip" type: kInnerProduct srclayers: "data" innerproduct_conf { num_output: 4 } '
                     'param { name: "w" } param { name: "b" }',
                     'name: "loss" type: kSoftmaxLoss srclayers: "ip" srclayers: "data"'))
    s = shapes_of(m)
    assert s["0#data:0"] == [2, 3] and s["0#data:0.label"] == [2]
