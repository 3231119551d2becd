"""The `gru` op (netc/ops/recurrent.py, SINGA's kGRU): shapes, parameters and sharing against the
SINGA graph builder on the char-rnn configs, its cost formula, and its reference semantics against
torch.nn.GRUCell (an independent implementation of the same equations), through an unrolled net."""
from __future__ import annotations

import os

import pytest
import torch

from netc.diagnostics import DiagnosticEngine, NetcError
from netc.frontend import load, load_text
from netc.frontend.singa import build_singa
from netc.frontend.singa.to_ir import nname
from netc.ops import lookup
from netc import pipelines
from netc.pipelines import Options
from netc.runtime.reference import module_params, run_reference

CORPUS = "/work/shared/corpus/singa"
ROLES = ("z_hx", "r_hx", "c_hx", "z_hh", "r_hh", "c_hh", "z_b", "r_b", "c_b")
needs_corpus = pytest.mark.skipif(not os.path.isdir(CORPUS), reason="SINGA corpus not available")


def compiled(path, phase="train"):
    diag = DiagnosticEngine()
    m = load(path, diag)
    pipelines.inference(m, Options(phase=phase), diag)
    assert not diag.has_errors(), [d.message for d in diag.diagnostics]
    return m, diag


def layers(m):
    return {op.attrs["name"]: op for op in m.networks()[0].regions[0].ops}


@needs_corpus
@pytest.mark.parametrize("conf", ["0.3.0_char-rnn_job.conf", "0.2.0_char-rnn_sample.conf"])
def test_gru_matches_singa_builder(conf):
    """Every kGRU node is a netc gru with SINGA's output shape, its params in SINGA's order and
    layout, each unrolled step's params aliasing step 0's, and the recurrent edge as operand 1."""
    path = os.path.join(CORPUS, conf)
    net = build_singa(path, "train")
    m, _ = compiled(path)
    ops = layers(m)
    decl = {p.attrs["sym_name"]: p for p in m.params()}
    grus = [n for n in net.nodes if n.type == "kGRU"]
    assert grus
    for n in grus:
        op = ops[nname(n.name)]
        assert op.name == "netc.gru" and list(op.results[0].type.shape) == n.shape
        refs = op.attrs["params"]
        assert list(refs) == list(ROLES[:len(n.params)])
        for role, p in zip(ROLES, n.params):
            d = decl[refs[role].name]
            assert list(d.attrs["type"].shape) == p.shape, (n.name, role)
            assert refs[role].name == nname(p.name)
            sf = d.attrs.get("share_from")
            assert (sf.name if sf else None) == (nname(p.share_from) if p.share_from else None)
        srcs = [v.owner.attrs["name"] for v in op.operands]
        assert srcs == [nname(s) for s in n.srcs]  # input first, then the previous step (recurrent edge)
        assert len(srcs) == (2 if n.unroll_index > 0 else 1)


@needs_corpus
def test_char_rnn_params_counted_once():
    m, _ = compiled(os.path.join(CORPUS, "0.3.0_char-rnn_job.conf"))
    from netc.explain import explain_json
    doc = explain_json(m)
    h, v = 512, 101
    gru = 3 * h * v + 3 * h * h + 3 * h
    assert doc["totals"]["params"] == gru + (h * v + v)  # 50 unrolled steps share one set
    rows = {r["name"]: r for r in doc["layers"]}
    # every step is one GRU step (x [B, V]); the recurrent products are counted on step 0 too (SINGA computes
    # them against its zero context)
    assert rows["0#gru1:0"]["flops_fwd"] == rows["7#gru1:0"]["flops_fwd"] == \
        6 * 50 * v * h + 6 * 50 * h * h + 50 * h * (20 + 3)


def _torch_cell(ps, bias):
    """torch.nn.GRUCell with SINGA's weights (torch's gate order is r, z, n; no hidden bias)."""
    h, v = ps["z_hx"].shape
    cell = torch.nn.GRUCell(v, h, bias=True, dtype=torch.float64)
    with torch.no_grad():
        cell.weight_ih.copy_(torch.cat([ps["r_hx"], ps["z_hx"], ps["c_hx"]]))
        cell.weight_hh.copy_(torch.cat([ps["r_hh"], ps["z_hh"], ps["c_hh"]]))
        cell.bias_ih.copy_(torch.cat([ps["r_b"], ps["z_b"], ps["c_b"]]) if bias else torch.zeros(3 * h))
        cell.bias_hh.zero_()
    return cell


GRU_NET = """
name: "rnn"
train_one_batch { alg: kBPTT }
neuralnet {
  unroll_len: 4
  layer { name: "data" type: kCharRNN unroll_len: 1 char_rnn_conf { batchsize: 3 unroll_len: 4 } }
  layer { name: "onehot" type: kOneHot srclayers: "data" unroll_conn_type: kUnrollOneToAll
          onehot_conf { vocab_size: 5 } }
  layer { name: "gru" type: kGRU srclayers: "onehot" gru_conf { dim_hidden: 6 }
          %s }
}
cluster { workspace: "w" }
"""


@pytest.mark.parametrize("nparams", [9, 6])
def test_unrolled_gru_reference_is_torch_gru(nparams):
    params = " ".join(f'param {{ name: "{r}" }}' for r in ROLES[:nparams])
    m = load_text(GRU_NET % params, "rnn.conf")
    pipelines.inference(m)
    out = run_reference(m, seed=3, intermediates=True)
    ps = module_params(m, seed=3)
    cell = _torch_cell({r: ps[f"0#{r}"] for r in ROLES[:nparams]}, nparams == 9)
    h = None
    for t in range(4):
        h = cell(out[f"{t}#onehot:0"], h)
        torch.testing.assert_close(out[f"{t}#gru:0"], h, rtol=1e-12, atol=1e-12)
    # the unrolled steps read step 0's storage (share_from), not copies of it
    assert all(torch.equal(ps[f"3#{r}"], ps[f"0#{r}"]) for r in ROLES[:nparams])


def test_gru_shape_errors():
    g = lookup("netc.gru")
    with pytest.raises(Exception, match="initial state"):
        g.infer({"dim_hidden": 4, "bias": True}, [(2, 3), (2, 5)])
    with pytest.raises(Exception, match="time-major"):
        g.infer({"dim_hidden": 4, "bias": True}, [(2,)])
    assert g.infer({"dim_hidden": 4, "bias": True}, [(2, 15)]) == (2, 4)          # one step
    assert g.infer({"dim_hidden": 4, "bias": True}, [(2, 3, 5)]) == (2, 3, 4)     # a sequence of 2 steps
    assert g.param_shapes({"dim_hidden": 4, "bias": False}, [(2, 15)], (2, 4)) == {
        "z_hx": (4, 15), "r_hx": (4, 15), "c_hx": (4, 15), "z_hh": (4, 4), "r_hh": (4, 4), "c_hh": (4, 4)}


def test_gru_in_nd(tmp_path):
    """GRU is an ordinary layer type in .nd: a hand-unrolled two-step cell, parameters shared by name."""
    shared = ", ".join(f"{r}: {{name: \"cell.{r}\"}}" for r in ROLES)
    src = tmp_path / "rnn.nd"
    src.write_text("network rnn {\n  input x0: f32[4, 6]\n  input x1: f32[4, 6]\n"
                   f"  h0 = GRU(x0) {{ dim_hidden: 8, params: {{{shared}}} }}\n"
                   f"  h1 = GRU(x1, h0) {{ dim_hidden: 8, params: {{{shared}}} }}\n}}\n")
    m, _ = compiled(str(src))
    out = run_reference(m, seed=1, intermediates=True)
    ps = module_params(m, seed=1)
    cell = _torch_cell({r: ps[f"cell.{r}"] for r in ROLES}, True)
    torch.testing.assert_close(out["h1"], cell(out["x1"], cell(out["x0"])), rtol=1e-12, atol=1e-12)
    bad = tmp_path / "bad.nd"
    bad.write_text("network n {\n  input x: f32[4, 6]\n  input h: f32[4, 7]\n  g = GRU(x, h) { dim_hidden: 8 }\n}\n")
    with pytest.raises(NetcError) as e:
        compiled(str(bad))
    assert "initial state h0 must be [B, dim_hidden] = [4, 8]" in e.value.diagnostics[0].message
    assert e.value.diagnostics[0].loc.line == 4
