"""On a CUDA GPU: what came after the first GPU session (issue 29). The recurrent, embedding and sequence
kernels (kernels/lstm.py, gru.py, rnn.py, embedding.py, sequence.py) in a .so, inference and training
against the float64 reference (`netc run NET.so --compare`, `--train --compare`), at the CPU tests' tiny
sizes and at sizes of several tiles (a batch past one block of rows, hidden sizes that are not powers of
two); SINGA's char-rnn job as it was written; and every optimizer's update kernels (kernels/optim.py) in
LeNet's training library.

Marked `gpu`; skipped where torch has no CUDA (`pytest -m gpu` on the GPU machine)."""
from __future__ import annotations

import pytest
import torch

from test_gpu import ROOT, _corpus, compile_so, netc

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.is_available())")]

OPTIMIZERS = ["sgd", "momentum", "nesterov", "adam", "rmsprop", "adagrad", "adadelta", "adamax"]


def _net(name, body):
    return f"network {name} {{\n{body}}}\n"


NETS = {
    "lstm-state": _net("seq", "  input x: f32[4, 3, 2, 3]\n  input h0: f32[3, 5]\n  input c0: f32[3, 5]\n"
                              "  input label: f32[4, 3, 5]\n  y = Lstm(x, h0, c0) { size: 5 }\n"
                              "  loss = EuclideanLoss(y, label)\n"),
    "lstm-large": _net("seq", "  input x: f32[12, 160, 48]\n  input h0: f32[160, 100]\n  input c0: f32[160, 100]\n"
                              "  input label: f32[12, 160, 100]\n  y = Lstm(x, h0, c0) { size: 100 }\n"
                              "  loss = EuclideanLoss(y, label)\n"),
    "gru-state": _net("seq", "  input x: f32[4, 3, 2, 3]\n  input h0: f32[3, 5]\n  input label: f32[4, 3, 5]\n"
                             "  y = GRU(x, h0) { dim_hidden: 5 }\n  loss = EuclideanLoss(y, label)\n"),
    "gru-large": _net("seq", "  input x: f32[10, 150, 40]\n  input label: f32[10, 150, 72]\n"
                             "  y = GRU(x) { dim_hidden: 72, linear_before_reset: false }\n"
                             "  loss = EuclideanLoss(y, label)\n"),
    "recurrent-large": _net("seq", "  input x: f32[9, 140, 30]\n  input h0: f32[140, 90]\n  input label: f32[9, 140, 90]\n"
                                   "  y = Recurrent(x, h0) { size: 90, activation: relu }\n"
                                   "  loss = EuclideanLoss(y, label)\n"),
    "clockwork-stacked": _net("seq", "  input x: f32[5, 3, 2, 3]\n  input label: f32[5, 3, 4]\n"
                                     "  z = Recurrent(x) { size: 7, activation: relu }\n  y = Clockwork(z) { size: 4 }\n"
                                     "  loss = EuclideanLoss(y, label)\n"),
    "embedding": _net("emb", "  input ids: i64[64, 7]\n  input label: i32[64]\n"
                             "  e = Embedding(ids) { num_embeddings: 300, dim: 24 }\n"
                             "  c = InnerProduct(e) { num_outputs: 5 }\n  loss = SoftmaxLoss(c, label)\n"),
    "sequence-pools": _net("tb", "  input x: f32[6, 70, 8]\n  input n: i32[70]\n  input t: i32[6, 70]\n"
                                 "  input label: i32[70]\n  s = Lstm(x) { size: 12 }\n  masked = SoftmaxLoss(s, t, n)\n"
                                 "  top = SequencePool(s, n) { mode: max }\n  last = SequencePool(s, n) { mode: last }\n"
                                 "  mean = SequencePool(s, n) { mode: mean }\n"
                                 "  both = Concatenate(top, last, mean) { dim: 1 }\n"
                                 "  c = InnerProduct(both) { num_outputs: 12 }\n  cls = SoftmaxLoss(c, label)\n"),
}


def _sources(tmp_path):
    out = {}
    for name, text in NETS.items():
        p = tmp_path / f"{name}.nd"
        p.write_text(text)
        out[name] = p
    return out


@pytest.mark.parametrize("name", list(NETS))
def test_sequence_library_matches_the_reference(name, tmp_path):
    """A forward of the .so (--compare), then two steps of its training library (--train --compare)."""
    src = _sources(tmp_path)[name]
    so = tmp_path / f"{name}.so"
    r = compile_so(src, so)
    assert r.returncode == 0, r.stderr
    r = netc("run", so, "--compare", check=False)
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stdout + r.stderr
    tso = tmp_path / f"{name}_train.so"
    r = compile_so(src, tso, "--train")
    assert r.returncode == 0, r.stderr
    r = netc("run", tso, "--train", "--compare", "--steps", "2", "--seed", "1", check=False)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "compared 2 training steps" in r.stdout and r.stdout.rstrip().endswith(": ok")


@pytest.mark.parametrize("precision", [("--dtype", "bf16"), ("--tf32",)], ids=["bf16", "tf32"])
def test_lstm_in_lower_precision(precision, tmp_path):
    src = _sources(tmp_path)["lstm-large"]
    so = tmp_path / "lstm.so"
    r = compile_so(src, so, *precision)
    assert r.returncode == 0, r.stderr
    r = netc("run", so, "--compare", check=False)
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stdout + r.stderr


def test_singa_char_rnn_job_trains_against_the_reference(tmp_path):
    """SINGA's char-rnn job (its rolled GRU stack, as written) compiled to a training library."""
    corpus = _corpus()
    if not corpus:
        pytest.skip("the shared corpus is not here (NETC_CORPUS)")
    conf = corpus[0].parent.parent / "singa" / "0.2.0_char-rnn_job.conf"
    if not conf.exists():
        pytest.skip(f"{conf} is not in the corpus")
    so = tmp_path / "char_rnn.so"
    r = compile_so(conf, so, "--train")
    assert r.returncode == 0, r.stderr
    r = netc("run", so, "--train", "--compare", "--steps", "2", "--seed", "1", check=False)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.rstrip().endswith(": ok")


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_every_optimizer_library_matches_the_reference(optimizer, tmp_path):
    """LeNet's training library with each optimizer: three steps, the parameters and the optimizer's state
    after each update against the float64 reference's."""
    so = tmp_path / f"lenet_{optimizer}.so"
    r = compile_so(ROOT / "examples" / "lenet.nd", so, "--train", "--batch", "8", "--optimizer", optimizer)
    assert r.returncode == 0, r.stderr
    r = netc("run", so, "--train", "--compare", "--steps", "3", "--seed", "2", "--lr", "0.01", check=False)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "compared 3 training steps" in r.stdout and r.stdout.rstrip().endswith(": ok")
