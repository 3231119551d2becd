"""A SINGA conf's parameter `init` is where `netc run` and training start (issue 24): the importer
records each ParamProto's init { } on its netc.param (frontend/singa/to_ir.py singa_init), and the
one initializer (netc/ops/initializers.py) draws it for the reference executor, the compiled targets'
manifest, the K-rank runs and the Python API. Oracles: SINGA's own GRU test (src/test/
test_gru_layer.cc at v0.3: every weight kConstant 0.5 gives 0.204824, then 0.346753 one step later,
its figures), hand computations, the sample statistics of the draws; `--params` overrides."""
from __future__ import annotations

import math
import os
import re

import numpy as np
import pytest
import torch

from netc.cli import main
from netc.diagnostics import DiagnosticEngine, NetcError, render
from netc.frontend import load, load_text
from netc import pipelines
from netc.ops.initializers import init_tensor
from netc.runtime.params import random_params
from netc.runtime.reference import module_params, run_reference

CORPUS = "/work/shared/corpus/singa"
needs_corpus = pytest.mark.skipif(not os.path.isdir(CORPUS), reason="SINGA corpus not available")
ROLES = ("z_hx", "r_hx", "c_hx", "z_hh", "r_hh", "c_hh", "z_b", "r_b", "c_b")

GRU = """
name: "rnn"
train_one_batch { alg: kBPTT }
updater { type: kRMSProp rmsprop_conf { rho: 0.95 } learning_rate { type: kStep base_lr: 0.01
          step_conf { change_freq: 2 gamma: 0.5 } } clip_low: -5 clip_high: 5 }
neuralnet {
  unroll_len: 2
  layer { name: "data" type: kCharRNN unroll_len: 1 char_rnn_conf { batchsize: 2 unroll_len: 2 } }
  layer { name: "onehot" type: kOneHot srclayers: "data" unroll_conn_type: kUnrollOneToAll onehot_conf { vocab_size: 4 } }
  layer { name: "label" type: kRNNLabel srclayers: "data" unroll_conn_type: kUnrollOneToAll }
  layer { name: "gru1" type: kGRU srclayers: "onehot" gru_conf { dim_hidden: 2 } %(gru)s }
  layer { name: "ip1" type: kInnerProduct srclayers: "gru1" innerproduct_conf { num_output: 4 }
          param { name: "w" init { type: kConstant value: 0.5 } } param { name: "b" init { type: kConstant value: 0.25 } } }
  layer { name: "loss" type: kSoftmaxLoss srclayers: "ip1" srclayers: "label" }
}
cluster { workspace: "w" }
"""


def gru_conf(init="init { type: kConstant value: 0.5 }") -> str:
    return GRU % {"gru": " ".join(f'param {{ name: "{r}" {init} }}' for r in ROLES)}


def inferred(text, file="job.conf"):
    m = load_text(text, file, DiagnosticEngine())
    pipelines.inference(m)
    return m


def test_constant_gru_gives_singas_own_figures():
    """SINGA's GRU test: 9 params kConstant 0.5, dim_hidden 2, one-hot inputs: h = 0.204824 after the
    first step and 0.346753 after the second, every unit; the kInnerProduct on top (w 0.5, b 0.25) by
    hand: 0.5 * (h_0 + h_1) + 0.25."""
    m = inferred(gru_conf())
    for seed in (0, 7):        # constants: the seed changes nothing
        out = run_reference(m, seed=seed, intermediates=True)
        h = out["gru1"]
        assert tuple(h.shape) == (2, 2, 2)
        assert torch.allclose(h[0], torch.full((2, 2), 0.204824, dtype=h.dtype), atol=1e-6), h[0]
        assert torch.allclose(h[1], torch.full((2, 2), 0.346753, dtype=h.dtype), atol=1e-6), h[1]
        z = 1 / (1 + math.exp(-1.0))
        assert float(h[0, 0, 0]) == pytest.approx((1 - z) * math.tanh(1.0), rel=1e-12)
        scores = out["ip1"].reshape(2, 2, 4)
        want = 0.5 * h.sum(-1, keepdim=True) + 0.25
        torch.testing.assert_close(scores, want.expand(2, 2, 4), rtol=1e-12, atol=1e-12)


def test_params_override_the_init(tmp_path, capsys):
    """--params (and params= in Python) replace the init: a given z_hx is used as it is, the rest keep
    their constants."""
    m = inferred(gru_conf())
    given = torch.full((2, 4), -0.25, dtype=torch.float64)
    ps = module_params(m, {"z_hx": given})
    assert torch.equal(ps["z_hx"], given) and torch.equal(ps["r_hx"], torch.full((2, 4), 0.5, dtype=torch.float64))
    out = run_reference(m, params={"z_hx": given}, intermediates=True)
    assert not torch.allclose(out["gru1"], run_reference(m, intermediates=True)["gru1"])
    conf = tmp_path / "rnn.conf"
    conf.write_text(gru_conf())
    np.savez(tmp_path / "p.npz", **{r: np.full((2, 4) if "hx" in r else (2, 2) if "hh" in r else (2,), 0.1)
                                     for r in ROLES}, w=np.arange(8.0).reshape(2, 4) * 0.3, b=np.zeros(4))
    assert main(["run", str(conf), "--reference", "--params", str(tmp_path / "p.npz")]) == 0
    out1 = capsys.readouterr().out
    assert main(["run", str(conf), "--reference"]) == 0
    out2 = capsys.readouterr().out
    # the conf's constants: every class scores the same, so the loss is ln 4 per step, 2 ln 4 = 2.77259
    assert f"{2 * math.log(4):+.6g}" in out2, out2
    assert f"{2 * math.log(4):+.6g}" not in out1, out1
    assert out1 != out2


def test_training_starts_from_the_init(tmp_path, capsys):
    """`netc run --train` from the constants: the first loss is the one the forward pass computes from
    them (whatever the seed), and the training moves them (kRMSProp + kStep + value clipping)."""
    conf = tmp_path / "rnn.conf"
    conf.write_text(gru_conf())
    m = load(str(conf), DiagnosticEngine())
    pipelines.inference(m)
    losses = []
    for seed in ("0", "5"):
        assert main(["run", str(conf), "--train", "--reference", "--steps", "2", "--seed", seed,
                     "-o", str(tmp_path / f"w{seed}.npz")]) == 0
        out = capsys.readouterr().out
        losses.append([float(x) for x in re.findall(r"loss (\d+\.\d+)\n", out)])
    # constants: equal scores for every class, so the first loss is 2 ln 4 whatever the seed and labels
    assert [round(x[0], 5) for x in losses] == [round(2 * math.log(4), 5)] * 2, losses
    w = np.load(tmp_path / "w0.npz")
    assert not np.allclose(w["z_hx"], 0.5) and np.abs(w["z_hx"] - 0.5).max() < 0.1
    assert "z_hx.square_avg" in w.files


@needs_corpus
def test_uniform_init_stays_in_its_bounds_and_is_seeded():
    """char-rnn: every GRU param kUniform [-0.08, 0.08]; draws inside, spread over it, reproducible by
    seed, different under another seed; the classifier's weight (kUniform too) likewise."""
    m = inferred(open(f"{CORPUS}/0.3.0_char-rnn_job.conf").read(), "char-rnn.conf")
    ps = module_params(m, seed=0)
    again, other = module_params(m, seed=0), module_params(m, seed=1)
    grus = [n for n in ps if n.split("#")[-1] in ROLES]
    assert len(grus) == 9
    for n in grus:
        t = ps[n]
        assert float(t.min()) >= -0.08 and float(t.max()) <= 0.08, n
        assert float(t.max()) > 0.07 and float(t.min()) < -0.07, n
        assert abs(float(t.mean())) < 0.01, n
        assert torch.equal(t, again[n]) and not torch.equal(t, other[n])


@needs_corpus
def test_gaussian_init_has_its_mean_and_std():
    """cifar10: conv weights kGaussian std 0.0001 / 0.01, biases kConstant 0; the sample mean and std of
    a 25,600-element draw within 3 standard errors / 2%."""
    m = inferred(open(f"{CORPUS}/0.3.0_cifar10_job.conf").read(), "cifar10.conf")
    ps = module_params(m, seed=3)
    w1, w2 = ps["0#w1"], ps["0#w2"]
    assert w2.numel() == 25600
    for t, std in ((w1, 0.0001), (w2, 0.01)):
        n = t.numel()
        assert abs(float(t.mean())) < 3 * std / math.sqrt(n)
        assert float(t.std()) == pytest.approx(std, rel=0.02 if n > 10000 else 0.1)
    assert torch.equal(ps["0#b1"], torch.zeros_like(ps["0#b1"]))


@needs_corpus
def test_fan_in_inits_divide_by_singas_shape():
    """mnist_conv: kUniformSqrtFanIn on every weight, U(-1, 1) / sqrt(shape[1] / 3) with SINGA's shape
    (conv1 [20, 25], ip1 [500, 800]): the bound sqrt(3 / fan_in), which the draws approach."""
    m = inferred(open(f"{CORPUS}/0.3.0_mnist_conv.conf").read(), "mnist_conv.conf")
    params = {p.attrs["sym_name"]: p.attrs for p in m.params()}
    assert (params["0#w1"]["fan_in"], params["0#w1"]["fan_out"]) == (25, 20)
    assert (params["0#w3"]["fan_in"], params["0#w3"]["fan_out"]) == (800, 500)
    ps = module_params(m)
    for n, fan_in in (("0#w1", 25), ("0#w3", 800)):
        bound = math.sqrt(3.0 / fan_in)
        assert float(ps[n].abs().max()) <= bound and float(ps[n].abs().max()) > 0.95 * bound
    # kGaussianSqrtFanIn and kUniformSqrtFanInOut, directly: SINGA divides by sqrt(shape[1]), sqrt(sum)
    g = init_tensor("w", (300, 200), {"init": "gaussian_sqrt_fan_in", "std": 2.0, "fan_in": 400, "fan_out": 7})
    assert float(g.std()) == pytest.approx(2.0 / 20.0, rel=0.03)
    u = init_tensor("w", (300, 200), {"init": "uniform_sqrt_fan_in_out", "low": -3, "high": 3, "fan_in": 5,
                                      "fan_out": 4})
    assert float(u.abs().max()) <= 1.0 and float(u.abs().max()) > 0.99


def test_compiled_targets_draw_the_same_values():
    """The manifest records each param's init, so a compiled library's random parameters
    (runtime/params.random_params) are the reference executor's."""
    from netc.codegen.manifest import parameters_manifest
    from netc.pipelines import Plan
    m = load_text(gru_conf("init { type: kUniform low: -0.3 high: 0.2 }"), "rnn.conf", DiagnosticEngine())
    ctx = pipelines.compile(m, plan=Plan())
    plan = ctx.notes["memory_plan"]["rnn"]
    params, _ = parameters_manifest(m, plan)
    rnd = random_params({"parameters": params}, seed=4)
    ref = module_params(m, seed=4)
    for p in params:
        if "shares" not in p and "state" not in p:
            torch.testing.assert_close(rnd[p["name"]].double(), ref[p["name"]], rtol=0, atol=1e-7)


def test_fan_inits_need_a_2d_param_located():
    bad = GRU % {"gru": " ".join(f'param {{ name: "{r}" init {{ type: kGaussianSqrtFanIn }} }}' for r in ROLES)}
    with pytest.raises(NetcError) as e:
        load_text(bad, "bad.conf")
    out = "".join(render(d) for d in e.value.diagnostics)
    assert re.search(r"bad\.conf:\d+:\d+: error: param '(0#)?z_b' has shape \[2\], but SINGA's kGaussianSqrtFanIn fills "
                     r"2-D params only", out), out


def test_user_init_is_a_warning_and_netcs_draw():
    diag = DiagnosticEngine()
    text = gru_conf().replace('param { name: "z_hx" init { type: kConstant value: 0.5 } }',
                              'param { name: "z_hx" init { user_type: "mine" } }')
    m = load_text(text, "job.conf", diag)
    assert re.search(r"job\.conf:\d+:\d+: warning: param '(0#)?z_hx': user init generator 'mine'", diag.render())
    pipelines.inference(m)
    assert not torch.allclose(module_params(m)["z_hx"], torch.tensor(0.5, dtype=torch.float64))


def test_nd_init_runs_and_a_misspelt_one_is_located(tmp_path, capsys):
    """A .nd binding's init is where `netc run` starts too (the same initializer); a misspelt init is a
    located error at `netc check`, with a did-you-mean."""
    text = """network n {
  input x: f32[2, 3]
  ip = InnerProduct(x) { num_outputs: 2, params: { weight: { name: w, init: constant, value: 0.5 },
                                                    bias: { name: b, init: constant, value: 0.25 } } }
}
"""
    m = inferred(text, "n.nd")
    x = torch.arange(6.0, dtype=torch.float64).reshape(2, 3)
    out = run_reference(m, inputs={"x": x})["ip"]
    torch.testing.assert_close(out, (0.5 * x.sum(1, keepdim=True) + 0.25).expand(2, 2), rtol=0, atol=1e-15)
    bad = tmp_path / "bad.nd"
    bad.write_text(text.replace("init: constant, value: 0.5", "init: constnat, value: 0.5"))
    assert main(["check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert re.search(r"bad\.nd:3:\d+: error: unknown init 'constnat'; did you mean 'constant'\?", err), err
