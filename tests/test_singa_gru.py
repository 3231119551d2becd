"""SINGA's recurrent nets in netc: char-rnn (kGRU, unroll_len 50) imported ROLLED (one netc.gru over the
time-major sequence, frontend/singa/rolled.py) with SINGA's parameters and count; the rolled net equal
to the unrolled one SINGA builds (the loss the sum of the per-step losses, the gradients the sums of the
shared steps'); the data fed as windows of ids (--data); the export written back as kGRU with
unroll_len; nets rolled.py does not roll (unroll_len 1, a step chain read first-to-last) kept one op per
step; the .nd GRU's located errors."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import netc.frontend.singa.to_ir as to_ir
from netc.cli import main
from netc.diagnostics import DiagnosticEngine, NetcError
from netc.frontend import load, load_text
from netc.frontend.singa import build_singa
from netc.frontend.singa.to_ir import nname
from netc.ops import lookup
from netc import pipelines
from netc.pipelines import Options, Training
from netc.runtime.reference import module_params, run_reference
from netc.runtime.train import ReferenceTrainer

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
@pytest.mark.parametrize("conf", ["0.2.0_char-rnn_job.conf", "0.3.0_char-rnn_job.conf"])
def test_char_rnn_is_imported_rolled(conf):
    """One netc.gru over [50, 50, 101] -> [50, 50, 512] bound to the configured parameters in SINGA's order
    and shapes (those of SINGA's step-0 node); the ids and labels [T, B] time-major; 994,917 parameters."""
    path = os.path.join(CORPUS, conf)
    node = build_singa(path, "train").node("0#gru1@0")
    m, _ = compiled(path)
    ops = layers(m)
    grus = [op for op in ops.values() if op.name == "netc.gru"]
    assert [op.attrs["name"] for op in grus] == ["gru1"]
    gru = grus[0]
    assert list(gru.operands[0].type.shape) == [50, 50, 101] and list(gru.results[0].type.shape) == [50, 50, 512]
    assert gru.operands[0].owner.name == "netc.one_hot" and gru.operands[0].owner.operands[0].owner is ops["data"]
    decl = {p.attrs["sym_name"]: p for p in m.params()}
    refs = gru.attrs["params"]
    assert list(refs) == list(ROLES)
    for role, p in zip(ROLES, node.params):
        assert refs[role].name == role and list(decl[role].attrs["type"].shape) == p.shape
    for name in ("data", "label"):
        a = ops[name].attrs
        assert a["shape"] == [50, 50] and a["dtype"] == "i32" and a["batch_axis"] == 1
    from netc.explain import explain_json
    doc = explain_json(m)
    assert doc["totals"]["params"] == 994917
    assert not any("#" in r["name"] for r in doc["layers"])
    assert m.attrs["optimizer"] == {"name": "rmsprop", "eps": 1e-8, "alpha": 0.95, "clip_low": -5.0, "clip_high": 5.0,
                                    "convention": "singa", "schedule": {"type": "step", "base_lr": 0.002,
                                                                        "gamma": 0.97, "change_freq": 2000}}


@needs_corpus
def test_sample_conf_stays_one_step():
    """The sampling net (no unroll_len) is SINGA's one step: gru1, gru2 read [1, V] / [1, 512], one step each."""
    path = os.path.join(CORPUS, "0.3.0_char-rnn_sample.conf")
    net = build_singa(path, "train")
    m, _ = compiled(path)
    ops = layers(m)
    for n in (n for n in net.nodes if n.type == "kGRU"):
        op = ops[nname(n.name)]
        assert op.name == "netc.gru" and list(op.results[0].type.shape) == n.shape
        assert [op.attrs["params"][r].name for r in ROLES[:len(n.params)]] == [nname(p.name) for p in n.params]


SMALL = """
name: "rnn"
train_one_batch { alg: kBPTT }
updater { type: kRMSProp rmsprop_conf { rho: 0.95 } learning_rate { type: kFixed base_lr: 0.01 } clip_low: -5 clip_high: 5 }
neuralnet {
  unroll_len: 4
  layer { name: "data" type: kCharRNN unroll_len: 1 char_rnn_conf { batchsize: 3 unroll_len: 4 } }
  layer { name: "onehot" type: kOneHot srclayers: "data" unroll_conn_type: kUnrollOneToAll onehot_conf { vocab_size: 5 } }
  layer { name: "label" type: kRNNLabel srclayers: "data" unroll_conn_type: kUnrollOneToAll }
  layer { name: "gru1" type: kGRU srclayers: "onehot" gru_conf { dim_hidden: 6 } %(params)s }
  layer { name: "ip1" type: kInnerProduct srclayers: "gru1" innerproduct_conf { num_output: 5 }
          param { name: "w" } param { name: "b" } }
  layer { name: "loss" type: kSoftmaxLoss srclayers: "ip1" srclayers: "label" %(loss)s }
}
cluster { workspace: "w" }
"""


def small(nparams=9, scale=None):
    return SMALL % {"params": " ".join(f'param {{ name: "{r}" }}' for r in ROLES[:nparams]),
                    "loss": f"softmaxloss_conf {{ scale: {scale} }}" if scale else ""}


def _program(text, monkeypatch=None):
    if monkeypatch is not None:           # SINGA's unrolled form: one op per step
        monkeypatch.setattr(to_ir, "roll_steps", lambda net: None)
    m = load_text(text, "rnn.conf")
    pipelines.training(m, Options(training=Training(gradients_only=True)))
    return m


def _step(m, feed, params):
    net = m.networks()[0]
    out = ReferenceTrainer(m, params=params).step(feed)
    loss = sum(float(out[n]) for n in net.attrs["losses"])
    return loss, {p: out[v] for p, v in net.attrs["gradients"].items()}


@pytest.mark.parametrize("nparams,scale", [(9, None), (6, 0.5)])
def test_rolled_equals_the_unrolled_net(nparams, scale, monkeypatch):
    """The rolled net's loss is the sum of SINGA's 4 per-step losses (each a batch mean, times softmaxloss_conf's
    scale), and its parameter gradients the unrolled steps' summed into the shared storage, in f64."""
    text = small(nparams, scale)
    rolled = _program(text)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 5, (4, 3), generator=g, dtype=torch.int32)
    lab = torch.randint(0, 5, (4, 3), generator=g, dtype=torch.int32)
    names = list(ROLES[:nparams]) + ["w", "b"]
    params = module_params(rolled, seed=4)
    params = {k: params[k] for k in names}
    loss_r, grads_r = _step(rolled, {"data": ids, "label": lab}, params)
    unrolled = _program(text, monkeypatch)
    feed = {}
    for t in range(4):
        feed[f"{t}#onehot:0"] = torch.nn.functional.one_hot(ids[t].long(), 5).double()
        feed[f"{t}#label:0"] = lab[t]
    loss_u, grads_u = _step(unrolled, feed, {f"0#{k}": v for k, v in params.items()})
    assert len(unrolled.networks()[0].attrs["losses"]) == 4
    s = scale or 1.0     # (the unrolled import leaves softmaxloss_conf.scale out: its losses are unscaled)
    assert abs(loss_r - s * loss_u) <= 1e-12 * abs(loss_u)
    assert set(grads_r) == set(names) and set(grads_u) == {f"0#{k}" for k in names}
    for k in names:
        torch.testing.assert_close(grads_r[k], s * grads_u[f"0#{k}"], rtol=1e-10, atol=1e-12)


def test_rolled_gru_is_torch_gru():
    """The rolled GRU over the one-hot ids equals torch.nn.GRU (SINGA's weights, gate order r, z, n; no
    recurrent bias) over the whole sequence from the zero state."""
    m = load_text(small(), "rnn.conf")
    pipelines.inference(m)
    out = run_reference(m, seed=3, intermediates=True)
    ps = module_params(m, seed=3)
    rnn = torch.nn.GRU(5, 6, dtype=torch.float64)
    with torch.no_grad():
        rnn.weight_ih_l0.copy_(torch.cat([ps["r_hx"], ps["z_hx"], ps["c_hx"]]))
        rnn.weight_hh_l0.copy_(torch.cat([ps["r_hh"], ps["z_hh"], ps["c_hh"]]))
        rnn.bias_ih_l0.copy_(torch.cat([ps["r_b"], ps["z_b"], ps["c_b"]]))
        rnn.bias_hh_l0.zero_()
        want, _ = rnn(out["onehot"])
    torch.testing.assert_close(out["gru1"], want, rtol=1e-12, atol=1e-12)
    assert torch.equal(out["onehot"].argmax(-1), out["data"].long())


def test_trains_on_windows_of_ids(tmp_path, capsys):
    """--data holds one window a sample: data [S, T] ids and label [S, T] (the next ids), fed as [T, B]."""
    conf = tmp_path / "rnn.conf"
    conf.write_text(small())
    text = np.random.RandomState(0).randint(0, 5, size=81)
    windows = np.stack([text[i * 4:i * 4 + 5] for i in range(20)]).astype(np.int32)
    np.savez(tmp_path / "d.npz", data=windows[:, :4], label=windows[:, 1:])
    assert main(["run", str(conf), "--train", "--reference", "--data", str(tmp_path / "d.npz"), "--steps", "3"]) == 0
    assert "trained 3 steps" in capsys.readouterr().out
    np.savez(tmp_path / "bad.npz", data=windows, label=windows)    # windows of 5, not 4
    assert main(["run", str(conf), "--train", "--reference", "--data", str(tmp_path / "bad.npz")]) == 1
    err = capsys.readouterr().err
    assert "samples of 'data' have shape [5], the input takes [4] per sample ([4, 3] per batch, samples along axis 1)" \
        in err
    np.savez(tmp_path / "ids.npz", data=windows[:, :4] + 5, label=windows[:, 1:])   # ids past the vocabulary
    assert main(["run", str(conf), "--train", "--reference", "--data", str(tmp_path / "ids.npz")]) == 1
    assert "'data' holds the id" in capsys.readouterr().err


@pytest.mark.parametrize("scale", [None, 0.5])
def test_export_writes_kgru_with_unroll_len(scale, tmp_path, capsys):
    """The rolled net goes back to SINGA as one kGRU (and its kCharRNN, kOneHot, kRNNLabel, kInnerProduct,
    kSoftmaxLoss) under the neuralnet's unroll_len, and reads back as the same IR."""
    conf = tmp_path / "rnn.conf"
    conf.write_text(small(9, scale))
    assert main(["export", str(conf), "--format", "singa", "-o", str(tmp_path / "out.conf")]) == 0
    text = (tmp_path / "out.conf").read_text()
    assert "neuralnet { unroll_len: 4" in text and text.count("type: kGRU") == 1
    assert 'name: "data" type: kCharRNN unroll_len: 1' in text and "batchsize: 3 unroll_len: 4" in text
    assert ("softmaxloss_conf { topk: 1 scale: 0.5 }" in text) == bool(scale)
    a, b = compiled(str(conf))[0], compiled(str(tmp_path / "out.conf"))[0]
    sig = [[(op.name, op.attrs.get("name"), tuple(op.results[0].type.shape),
             tuple((r, v.name) for r, v in (op.attrs.get("params") or {}).items()))
            for op in m.networks()[0].regions[0].ops] for m in (a, b)]
    assert sig[0] == sig[1]


UNROLLED = """
name: "rnn"
train_one_batch { alg: kBPTT }
neuralnet {
  unroll_len: 3
  layer { name: "data" type: kCharRNN unroll_len: 1 char_rnn_conf { batchsize: 2 unroll_len: 3 } }
  layer { name: "onehot" type: kOneHot srclayers: "data" unroll_conn_type: kUnrollOneToAll onehot_conf { vocab_size: 4 } }
  layer { name: "gru" type: kGRU srclayers: "onehot" gru_conf { dim_hidden: 5 } %s }
  layer { name: "last" type: kInnerProduct srclayers: "gru" unroll_len: 1 unroll_conn_type: kUnrollFirstToLast
          innerproduct_conf { num_output: 2 } param { name: "w" } param { name: "b" } }
}
cluster { workspace: "w" }
""" % " ".join(f'param {{ name: "{r}" }}' for r in ROLES)


def test_a_net_read_first_to_last_stays_unrolled():
    """A layer reading only the last step (kUnrollFirstToLast) is no rolled pattern: one netc.gru per step,
    one step [B, X] each, the previous step as h0, every step's parameters shared from step 0's."""
    m = load_text(UNROLLED, "rnn.conf")
    pipelines.inference(m)
    ops = layers(m)
    steps = [ops[f"{t}#gru:0"] for t in range(3)]
    assert all(op.name == "netc.gru" and list(op.results[0].type.shape) == [2, 5] for op in steps)
    assert [len(op.operands) for op in steps] == [1, 2, 2] and steps[2].operands[1].owner is steps[1]
    out = run_reference(m, seed=2, intermediates=True)
    ps = module_params(m, seed=2)
    p = {r: ps[f"0#{r}"] for r in ROLES}
    seq = torch.stack([out[f"{t}#onehot:0"] for t in range(3)])
    torch.testing.assert_close(out["2#gru:0"], lookup("netc.gru").reference(
        {"dim_hidden": 5, "bias": True, "linear_before_reset": True}, [seq], p)[-1], rtol=1e-12, atol=1e-12)


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
    """GRU is an ordinary layer type in .nd: over a sequence, and hand-unrolled steps sharing parameters by name."""
    shared = ", ".join(f"{r}: {{name: \"cell.{r}\"}}" for r in ROLES)
    src = tmp_path / "rnn.nd"
    src.write_text("network rnn {\n  input xs: f32[2, 4, 6]\n  input x0: f32[4, 6]\n  input x1: f32[4, 6]\n"
                   f"  seq = GRU(xs) {{ dim_hidden: 8, params: {{{shared}}} }}\n"
                   f"  h0 = GRU(x0) {{ dim_hidden: 8, params: {{{shared}}} }}\n"
                   f"  h1 = GRU(x1, h0) {{ dim_hidden: 8, params: {{{shared}}} }}\n}}\n")
    m, _ = compiled(str(src))
    out = run_reference(m, seed=1, inputs=None, intermediates=True)
    ps = module_params(m, seed=1)
    p = {r: ps[f"cell.{r}"] for r in ROLES}
    a = {"dim_hidden": 8, "bias": True, "linear_before_reset": True}
    torch.testing.assert_close(out["h1"], lookup("netc.gru").reference(a, [torch.stack([out["x0"], out["x1"]])], p)[-1],
                               rtol=1e-12, atol=1e-12)
    bad = tmp_path / "bad.nd"
    bad.write_text("network n {\n  input x: f32[4, 6]\n  input h: f32[4, 7]\n  g = GRU(x, h) { dim_hidden: 8 }\n}\n")
    with pytest.raises(NetcError) as e:
        compiled(str(bad))
    assert "initial state h0 must be [B, dim_hidden] = [4, 8]" in e.value.diagnostics[0].message
    assert e.value.diagnostics[0].loc.line == 4
