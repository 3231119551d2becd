"""SINGA's energy models trained with CD-k (netc/ops/energy.py): the update directions and the
reconstruction error against SINGA's formulas (src/neuralnet/neuron_layer/rbm.cc, src/worker.cc
CDWorker::TrainOneBatch, v0.2) computed here in numpy from the same data, parameters and random
numbers -- a Philox4x32-10 written in this file (Salmon et al. 2011, Random123's constants; Triton's
tl.rand / tl.randn turn its words into floats) -- k from cd_conf, Gaussian hidden units, the optimizer
applying the directions as SINGA's kSGD applies gradients, the error falling on scikit-learn's digits,
and the located refusals."""
from __future__ import annotations

import json
import zlib

import numpy as np
import pytest
import torch

from netc import pipelines
from netc.diagnostics import DiagnosticEngine, NetcError
from netc.frontend.singa.to_ir import import_singa
from netc.pipelines import Options, Training
from netc.runtime.train import ReferenceTrainer

B, V, H = 8, 12, 5


def conf(cd_k=None, gaussian=False, batch=B, vdim=V, hdim=H, lr=0.1, momentum=0.5, wd=0.01):
    """An RBM job of the corpus' form (v0.2+ names: the hidden weight shares '0#w')."""
    cd = f" cd_conf {{ cd_k: {cd_k} }}" if cd_k is not None else ""
    g = " gaussian: true" if gaussian else ""
    return f"""name: "rbm"
train_one_batch {{ alg: kCD{cd} }}
updater {{ type: kSGD momentum: {momentum} weight_decay: {wd} learning_rate {{ base_lr: {lr} type: kFixed }} }}
neuralnet {{
  layer {{ name: "data" type: kRecordInput store_conf {{ batchsize: {batch} shape: {vdim} }} }}
  layer {{ name: "vis" type: kRBMVis srclayers: "data" srclayers: "hid" rbm_conf {{ hdim: {hdim} }}
          param {{ name: "w" init {{ type: kGaussian std: 0.5 }} }}
          param {{ name: "bv" wd_scale: 0 init {{ type: kUniform low: -0.5 high: 0.5 }} }} }}
  layer {{ name: "hid" type: kRBMHid srclayers: "vis" rbm_conf {{ hdim: {hdim}{g} }}
          param {{ name: "w_" share_from: "0#w" }}
          param {{ name: "bh" wd_scale: 0 init {{ type: kUniform low: -0.5 high: 0.5 }} }} }}
}}
"""


def program(text, updates=False):
    diag = DiagnosticEngine()
    m = import_singa(text, "t.conf", diag)
    pipelines.training(m, Options(training=Training(gradients_only=not updates)), diag)
    return m


# -- an independent Philox4x32-10 and Triton's floats --------------------------------------------

M32 = 0xFFFFFFFF


def philox(seed: int, counters):
    """Words 0 and 1 of Philox4x32-10 for counters (lo, hi, 0, 0) of int64 `counters`, key = the seed's
    two 32-bit words."""
    out0, out1 = [], []
    for c in counters:
        c = int(c) % 2 ** 64
        x = [c & M32, c >> 32, 0, 0]
        k = [seed & M32, (seed >> 32) & M32]
        for _ in range(10):
            p0, p1 = 0xD2511F53 * x[0], 0xCD9E8D57 * x[2]
            x = [(p1 >> 32) ^ x[1] ^ k[0], p1 & M32, (p0 >> 32) ^ x[3] ^ k[1], p0 & M32]
            k = [(k[0] + 0x9E3779B9) & M32, (k[1] + 0xBB67AE85) & M32]
        out0.append(x[0])
        out1.append(x[1])
    return np.array(out0, dtype=np.uint64), np.array(out1, dtype=np.uint64)


def uniform(words):
    """Triton's uint_to_uniform_float: the word as int32, negatives mirrored (-x - 1), times 2**-31 in float32."""
    x = words.astype(np.int64)
    x = np.where(x >= 2 ** 31, x - 2 ** 32, x)
    x = np.where(x < 0, -x - 1, x)
    return x.astype(np.float32) * np.float32(4.6566127342e-10)


def counters(name: str, n: int, offset: int):
    return [(zlib.crc32(name.encode()) << 32) + offset + j for j in range(n)]


def draw(seed, name, shape, offset, gaussian):
    n = int(np.prod(shape))
    w0, w1 = philox(seed, counters(name, n, offset))
    if not gaussian:
        return uniform(w0).astype(np.float64).reshape(shape)
    u1 = np.maximum(uniform(w0), np.float32(1e-7)).astype(np.float64)
    return (np.sqrt(-2 * np.log(u1)) * np.cos(2 * np.pi * uniform(w1).astype(np.float64))).reshape(shape)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def singa_cd(x, W, bv, bh, k, seed, gaussian, name="0#vis:0"):
    """SINGA's CD-k on one batch, its weight in SINGA's layout W [hdim, vdim]: the gradients it hands
    its updater (RBMVisLayer / RBMHidLayer::ComputeGradient) and the squared error of the first Gibbs step."""
    b, h = x.shape[0], W.shape[0]

    def hidden(v):
        a = v @ W.T + bh
        return a if gaussian else sigmoid(a)

    h0 = hidden(x)
    hk, vk, err = h0, None, None
    for i in range(max(1, k)):
        r = draw(seed, name, (b, h), i * b * h, gaussian)
        hs = hk + r if gaussian else (r < hk).astype(np.float64)
        vk = sigmoid(hs @ W + bv)
        if i == 0:
            err = ((x - vk) ** 2).sum() / b
        hk = hidden(vk)
    gW = (hk.T @ vk - h0.T @ x) / b
    return {"w": gW, "bv": (vk.sum(0) - x.sum(0)) / b, "bh": (hk.sum(0) - h0.sum(0)) / b, "error": err}


def one_step(m, seed=7, data_seed=0):
    tr = ReferenceTrainer(m, seed=3)
    x = torch.rand(B, V, dtype=torch.float64, generator=torch.Generator().manual_seed(data_seed))
    before = {n: t.clone() for n, t in tr.params.items()}
    named = tr.step({"0#data:0": x}, lr=0.1, step_seed=seed)
    return tr, x.numpy(), {n: t.numpy() for n, t in before.items()}, named


# -- the update against SINGA's formulas ---------------------------------------------------------

@pytest.mark.parametrize("k", [None, 1, 3])
def test_cd_k_directions_and_error_are_singas(k):
    m = program(conf(cd_k=k))
    vis = next(op for op in m.networks()[0].regions[0].ops if op.name == "netc.rbm_visible")
    assert vis.attrs.get("cd_k", 1) == (k or 1)
    samples = [op for op in m.networks()[0].regions[0].ops if op.name == "netc.rbm_sample"]
    assert [op.attrs["offset"] for op in samples] == [i * B * H for i in range(k or 1)]
    tr, x, p, named = one_step(m, seed=11)
    want = singa_cd(x, p["0#w"].T, p["0#bv"], p["0#bh"], k or 1, 11, False)
    got = tr.gradients(named)
    assert np.allclose(got["0#w"].numpy(), want["w"].T, atol=1e-12)      # netc stores W [vdim, hdim]
    assert np.allclose(got["0#bv"].numpy(), want["bv"], atol=1e-12)
    assert np.allclose(got["0#bh"].numpy(), want["bh"], atol=1e-12)
    assert tr.losses(named) == {"0#vis:0.error": pytest.approx(want["error"], rel=1e-12)}
    assert float(np.abs(want["w"]).max()) > 1e-3     # not a vacuous comparison


def test_binary_samples_are_bernoulli_of_the_probabilities():
    tr, x, p, named = one_step(program(conf()), seed=5)
    h0, hs = named["0#vis:0.cd.h0"].numpy(), named["0#vis:0.cd.h0_sample"].numpy()
    assert set(np.unique(hs)) <= {0.0, 1.0}
    assert np.array_equal(hs, (draw(5, "0#vis:0", (B, H), 0, False) < h0).astype(np.float64))
    # over many seeds the mean sample is the probability (SINGA's SampleBinary)
    from netc.ops.energy import rbm_sample
    probs = torch.full((200, 50), 0.3, dtype=torch.float64)
    assert abs(float(rbm_sample(probs, 99, 1234).mean()) - 0.3) < 0.01


def test_gaussian_hidden_units():
    """rbm4's last RBM: hidden units are linear (no sigmoid) and sampled as h + N(0, 1)."""
    m = program(conf(gaussian=True))
    ops = m.networks()[0].regions[0].ops
    vis = next(op for op in ops if op.name == "netc.rbm_visible")
    assert vis.attrs["hidden_gaussian"] is True
    assert all(op.attrs.get("activation", "none") == "none" for op in ops if op.name == "netc.inner_product")
    tr, x, p, named = one_step(m, seed=21)
    want = singa_cd(x, p["0#w"].T, p["0#bv"], p["0#bh"], 1, 21, True)
    got = tr.gradients(named)
    assert np.allclose(got["0#w"].numpy(), want["w"].T, atol=1e-5)
    assert np.allclose(got["0#bh"].numpy(), want["bh"], atol=1e-5)
    assert np.allclose(got["0#bv"].numpy(), want["bv"], atol=1e-5)
    noise = named["0#vis:0.cd.h0_sample"].numpy() - named["0#vis:0.cd.h0"].numpy()
    assert not np.array_equal(noise, np.round(noise))
    from netc.ops.energy import rbm_sample
    n = rbm_sample(torch.zeros(100, 100, dtype=torch.float64), 3, 77, gaussian=True)
    assert abs(float(n.mean())) < 0.03 and abs(float(n.std()) - 1) < 0.03


def test_the_optimizer_descends_on_the_directions_as_singas_sgd():
    """kSGD, first step (no history yet): W -= lr * (dW + weight_decay * W); the biases have wd_scale 0."""
    m = program(conf(), updates=True)
    tr, x, p, named = one_step(m, seed=13)
    want = singa_cd(x, p["0#w"].T, p["0#bv"], p["0#bh"], 1, 13, False)
    assert np.allclose(tr.params["0#w"].numpy(), p["0#w"] - 0.1 * (want["w"].T + 0.01 * p["0#w"]), atol=1e-12)
    assert np.allclose(tr.params["0#bv"].numpy(), p["0#bv"] - 0.1 * want["bv"], atol=1e-12)
    assert np.allclose(tr.params["0#bh"].numpy(), p["0#bh"] - 0.1 * want["bh"], atol=1e-12)


def test_each_step_draws_new_samples():
    m = program(conf())
    tr = ReferenceTrainer(m, seed=0)
    x = torch.rand(B, V, dtype=torch.float64)
    a = tr.step({"0#data:0": x}, lr=0.0)["0#vis:0.cd.h0_sample"].clone()
    b = tr.step({"0#data:0": x}, lr=0.0)["0#vis:0.cd.h0_sample"]
    assert not torch.equal(a, b)


# -- training on digits -------------------------------------------------------------------------

def digits():
    sk = pytest.importorskip("sklearn.datasets")
    d = sk.load_digits()
    return torch.from_numpy((d.images.reshape(len(d.images), 64) / 16.0).astype(np.float64))


def test_reconstruction_error_falls_on_digits():
    x = digits()
    m = program(conf(batch=50, vdim=64, hdim=32, lr=0.1, momentum=0.8, wd=0.0002), updates=True)
    tr = ReferenceTrainer(m, seed=0)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    errs = []
    for s in range(60):
        idx = order[(s * 50) % 1750:(s * 50) % 1750 + 50]
        errs.append(float(tr.step({"0#data:0": x[idx]}, lr=0.1)["0#vis:0.error"]))
    first, last = np.mean(errs[:5]), np.mean(errs[-5:])
    assert last < 0.5 * first, (first, last)


def test_cli_trains_a_conf_on_digits(tmp_path, capsys):
    from netc.cli import main
    x = digits().numpy().astype(np.float32)
    np.savez(tmp_path / "d.npz", **{"0#data:0": x})
    (tmp_path / "rbm.conf").write_text(conf(batch=100, vdim=64, hdim=32, momentum=0.8, wd=0.0002))
    rc = main(["run", str(tmp_path / "rbm.conf"), "--train", "--reference", "--epochs", "2",
               "--data", str(tmp_path / "d.npz"), "--eval", str(tmp_path / "d.npz")])
    out = capsys.readouterr().out
    assert rc == 0, out
    line = next(ln for ln in out.splitlines() if ln.startswith("trained"))
    a, b = (float(t) for t in line.rsplit("loss ", 1)[1].split(" -> "))
    assert b < a
    ev = next(ln for ln in out.splitlines() if ln.startswith("eval on"))
    assert f"eval on {len(x)} samples" in ev and "0#vis:0.error " in ev and "the mean over 1700 samples" in ev, ev
    assert float(ev.split("0#vis:0.error ")[1].split()[0]) < a


def test_the_test_phase_is_singas():
    """--eval of a kCD job runs SINGA's CDWorker::TestOneBatch: the positive phase, the reconstruction from a
    sample of the hidden units and its squared error, per whole batch (batch i drawing from seed i), with
    no update."""
    from netc.runtime.train import Dataset, evaluate_rule_metrics
    m = program(conf(), updates=True)
    tr = ReferenceTrainer(m, seed=3)
    x = torch.rand(2 * B + 3, V, dtype=torch.float64, generator=torch.Generator().manual_seed(8))
    before = {n: t.clone() for n, t in tr.params.items()}
    r = evaluate_rule_metrics(m, tr.params, Dataset({"0#data:0": x}, "--eval"))
    assert all(torch.equal(before[n], t) for n, t in tr.params.items())
    p = {n: t.numpy() for n, t in before.items()}
    want = np.mean([singa_cd(x[i * B:(i + 1) * B].numpy(), p["0#w"].T, p["0#bv"], p["0#bh"], 1, i, False)["error"]
                    for i in range(2)])
    assert r == {"samples": 2 * B, "metrics": {"0#vis:0.error": pytest.approx(want, rel=1e-12)}}


def test_the_stack_pretrains_layer_by_layer(tmp_path, capsys):
    """examples/rbm_digits.py: the corpus' rbm1 -> rbm4 at 64 visible units, each stage from the last
    one's parameters (--params) and its -o for the next; the last archive holds every stage's weights;
    then rbm_autoencoder.conf fine-tunes the unrolled stack from them."""
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    if not (root.parent / "shared" / "corpus" / "singa" / "0.1.0_rbm_rbm4.conf").exists():
        pytest.skip("the shared corpus is not beside the repository")
    digits()
    sys.path.insert(0, str(root / "examples"))
    try:
        import rbm_digits
    finally:
        sys.path.remove(str(root / "examples"))
    assert rbm_digits.main(["-o", str(tmp_path), "--epochs", "2", "--ae-epochs", "2"]) == 0
    out = capsys.readouterr().out
    rows = {ln.split()[0]: [float(t) for t in ln.split()[1:]] for ln in out.splitlines()
            if ln.startswith(("rbm", "ae "))}
    assert list(rows) == ["rbm1", "rbm2", "rbm3", "rbm4", "ae"]
    assert all(r[0] == 28 and r[2] < r[1] for r in rows.values()), rows      # 2 epochs of 14 steps; error falls
    p = np.load(tmp_path / "rbm4.npz")
    shapes = {k: p[k].shape for k in ("w1", "w2", "w3", "w4", "b11", "b42")}
    assert shapes == {"w1": (64, 1000), "w2": (1000, 500), "w3": (500, 250), "w4": (250, 30), "b11": (64,),
                      "b42": (30,)}
    # each stage trained only its own RBM: rbm1's weight is as rbm1 wrote it
    assert np.array_equal(p["w1"], np.load(tmp_path / "rbm1.npz")["w1"])
    # the autoencoder starts from the stack, its decoder the encoder's weights transposed: its first loss
    # (SINGA's Euclidean loss, half the summed squared error per sample) is the unrolled stack's on a batch
    x = np.load(tmp_path / "digits_flat.npz")["0#data:0"].astype(np.float64)
    first = json.load(open(tmp_path / "autoencoder_history.json"))[0]["loss"]
    whole = rbm_digits.error(x, rbm_digits.unrolled(p, x)) / 2      # over every digit; the batch is a draw of 100
    assert abs(first - whole) < 0.1 * whole, (first, whole)
    ae = np.load(tmp_path / "autoencoder.npz")
    assert ae["0#w1"].shape == (64, 1000) and not np.array_equal(ae["0#w1"], p["w1"]) and "0#w8" not in ae.files


# -- what is refused, located -------------------------------------------------------------------

def test_a_visible_layer_without_its_hidden_weight_is_refused_located(tmp_path):
    from netc.frontend import load
    src = tmp_path / "v.nd"
    src.write_text("network v {\n  input data: f32[4, 6]\n  vis = RBMVisible(data)\n  output vis\n}\n")
    m = load(str(src))
    with pytest.raises(NetcError) as e:
        pipelines.training(m, Options(training=Training()))
    d = e.value.diagnostics[0]
    assert "cannot train RBM 'vis' by contrastive divergence" in d.message
    assert d.loc.file == str(src) and d.loc.line == 3


@pytest.mark.parametrize("kw", [dict(), dict(cd_k=3, gaussian=True)], ids=["cd1", "cd3-gaussian"])
def test_the_kernels_train_step_for_step_as_the_reference(kw):
    """Through the kernels on the interpreter (kernels/energy.py: the same Philox draws as the reference's)
    and on the reference executor from the same start, each trainer on its own: three steps of CD-k stay
    equal within f32 (a sample that differed would move the parameters by O(lr))."""
    from netc.runtime.interp import InterpTrainer
    m = program(conf(**kw), updates=True)
    ref = ReferenceTrainer(m, seed=3)
    interp = InterpTrainer(m, seed=3, blocks="large")
    x = torch.rand(B, V, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    for _ in range(3):
        want = ref.step({"0#data:0": x}, lr=0.1)
        got = interp.step({"0#data:0": x}, lr=0.1)
        e0, e1 = float(want["0#vis:0.error"]), float(got["0#vis:0.error"])
        assert abs(e0 - e1) < 1e-5 * e0, (e0, e1)
    assert set(ref.params) == set(interp.params)
    for k, p in ref.params.items():
        q = interp.params[k].double().reshape(p.shape)
        assert float((q - p).abs().max()) < 2e-5 * max(float(p.abs().max()), 1.0), k
    assert not torch.equal(ref.params["0#w"], ReferenceTrainer(m, seed=3).params["0#w"])   # it did learn


def test_cli_compares_the_interpreter_with_the_reference(tmp_path, capsys):
    from netc.cli import main
    (tmp_path / "rbm.conf").write_text(conf(cd_k=2))
    rc = main(["run", str(tmp_path / "rbm.conf"), "--train", "--target", "interp", "--interp-blocks", "large",
               "--compare", "--steps", "2"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "compared 2 training steps of network 'rbm' (momentum) on the interpreter target: ok" in out


def test_export_writes_cd_k_and_gaussian_back(tmp_path):
    from netc.cli import main
    (tmp_path / "rbm.conf").write_text(conf(cd_k=3, gaussian=True))
    assert main(["export", str(tmp_path / "rbm.conf"), "--format", "singa", "-o", str(tmp_path / "out.conf")]) == 0
    text = (tmp_path / "out.conf").read_text()
    assert "cd_conf { cd_k: 3 }" in text and "gaussian: true" in text
    again = import_singa(text, "u.conf", DiagnosticEngine())
    vis = next(op for op in again.networks()[0].regions[0].ops if op.name == "netc.rbm_visible")
    assert vis.attrs["cd_k"] == 3 and vis.attrs["hidden_gaussian"] is True


@pytest.mark.parametrize("flag,message", [
    (["--check-grads"], "--check-grads: '0#vis:0' (RBMVisible) learns by a rule that is no derivative"),
    (["--workers", "2"], "cannot train RBM '0#vis:0' on several workers yet"),
])
def test_what_cd_cannot_do_is_refused_located(tmp_path, capsys, flag, message):
    from netc.cli import main
    (tmp_path / "rbm.conf").write_text(conf())
    rc = main(["run", str(tmp_path / "rbm.conf"), "--train", "--steps", "1", *flag])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err and "internal error" not in err
    assert f"rbm.conf:6:11: error: {message}" in err, err


AE = """name: "ae"
updater { type: kAdaGrad learning_rate { base_lr: 0.01 type: kFixed } }
neuralnet {
  layer { name: "data" type: kRecordInput store_conf { batchsize: 4 shape: 6 } }
  layer { name: "enc" type: kInnerProduct srclayers: "data" innerproduct_conf { num_output: 3 }
          param { name: "w" } param { name: "b" } }
  layer { name: "dec" type: kInnerProduct srclayers: "enc" innerproduct_conf { num_output: 6 transpose: %s }
          param { name: "w2" share_from: "0#w" } param { name: "b2" } }
  layer { name: "loss" type: kEuclideanLoss srclayers: "dec" srclayers: "data" }
}
"""


def test_a_weight_shared_transposed_is_the_owners_transpose():
    """rbm_autoencoder.conf's decoder shares the encoder's weight with `transpose: true`: SINGA uses the same
    [M, K] storage transposed (y = x W where the encoder computes x W^T). netc binds the owner itself with
    transpose_weight; the same orientation stays a share_from alias."""
    from netc.runtime.reference import run_reference
    from netc.runtime.train import check_grads
    diag = DiagnosticEngine()
    m = import_singa(AE % "true", "ae.conf", diag)
    pipelines.inference(m, Options(), diag)
    ops = {op.attrs.get("name"): op for op in m.networks()[0].regions[0].ops}
    dec = ops["0#dec:0"]
    assert dec.attrs["transpose_weight"] is True and dec.attrs["params"]["weight"].name == "0#w"
    assert {p.attrs["sym_name"]: list(p.attrs["type"].shape) for p in m.params()} == {
        "0#w": [6, 3], "0#b": [3], "0#b2": [6]}
    rng = np.random.default_rng(0)
    x, w, b, b2 = rng.random((4, 6)), rng.standard_normal((6, 3)), rng.standard_normal(3), rng.standard_normal(6)
    got = run_reference(m, {"0#data:0": torch.from_numpy(x)}, {k: torch.from_numpy(v) for k, v in
                                                               (("0#w", w), ("0#b", b), ("0#b2", b2))},
                        intermediates=True)
    W = w.T          # SINGA's storage [M=3, K=6]: the encoder x W^T, the decoder (transposed) h W
    h = x @ W.T + b
    assert np.allclose(got["0#dec:0"].numpy(), h @ W + b2, atol=1e-12)
    # the tied weight's gradient (encoder and decoder summed) against autograd
    t = import_singa(AE % "true", "ae.conf", DiagnosticEngine())
    pipelines.training(t, Options(training=Training(gradients_only=True)), DiagnosticEngine())
    rows = check_grads(t, seed=1)
    assert {r["param"] for r in rows} == {"0#w", "0#b", "0#b2"} and max(r["rel_error"] for r in rows) < 1e-10
    same = import_singa(AE % "false", "ae.conf", DiagnosticEngine())
    pipelines.inference(same, Options(), DiagnosticEngine())
    dec = next(op for op in same.networks()[0].regions[0].ops if op.attrs.get("name") == "0#dec:0")
    assert not dec.attrs.get("transpose_weight") and dec.attrs["params"]["weight"].name == "0#w2"


AE_SIGMOID = """name: "ae"
updater { type: kAdaGrad learning_rate { base_lr: 0.05 type: kFixed } }
neuralnet {
  layer { name: "data" type: kRecordInput store_conf { batchsize: 5 shape: 7 } }
  layer { name: "enc" type: kInnerProduct srclayers: "data" innerproduct_conf { num_output: 4 }
          param { name: "w" init { type: kGaussian std: 0.5 } } param { name: "b" } }
  layer { name: "s1" type: kSigmoid srclayers: "enc" }
  layer { name: "dec" type: kInnerProduct srclayers: "s1" innerproduct_conf { num_output: 7 transpose: true }
          param { name: "w2" share_from: "0#w" } param { name: "b2" } }
  layer { name: "s2" type: kSigmoid srclayers: "dec" }
  layer { name: "loss" type: kEuclideanLoss srclayers: "s2" srclayers: "data" }
}
"""


@pytest.mark.parametrize("text", [AE % "true", AE_SIGMOID], ids=["plain", "sigmoids"])
def test_the_kernels_read_a_transposed_weight(tmp_path, capsys, text):
    """The decoder's transposed weight through the kernels: gemm on W's transposed view, and, where the
    sigmoids' gradients fuse into the decoder's data gradient, a copy of W^T in the workspace. The
    interpreter's training steps equal the reference's (netc run --compare: same state each step)."""
    from netc.cli import main
    (tmp_path / "ae.conf").write_text(text)
    rc = main(["run", str(tmp_path / "ae.conf"), "--train", "--target", "interp", "--compare", "--steps", "3"])
    out, err = capsys.readouterr()
    assert rc == 0 and "Traceback" not in err, err
    assert "compared 3 training steps of network 'ae' (adagrad) on the interpreter target: ok" in out
