"""Brainstorm's examples and its XOR integration test train in netc (issue 25).

XOR: Brainstorm's test (brainstorm/tests/test_integration/test_xor.py at 8f1fc88) trains FullyConnected(2, sigmoid)
>> FullyConnected(1, sigmoid) >> BinomialCrossEntropy >> Loss on the four XOR points with SgdStepper(4.0) for 300
epochs (one full batch each) from Gaussian(1.0) at seed 42, and demands that the rounded outputs equal the targets
and that the smallest logged loss is below 0.5. tests/data/brainstorm_xor.json holds what Brainstorm's own code did
(its initial parameters, its 300 logged losses, its final parameters and outputs); netc starts from the same
parameters and must follow the same curve (Brainstorm computes in float32, netc here in float64) and pass the same
check, from the Python API and from the command line.

mnist_pi and cifar10_cnn: examples/brainstorm_data.py writes Brainstorm's architectures (equal to those Brainstorm's
code generated, tests/data/brainstorm_layouts.json), their initial parameters and digits made into 28x28x1 and
32x32x3 images; a few steps on a tiny set must lower the loss (MomentumStepper(lr, 0.9) is torch's momentum with
lr (1 - 0.9): Brainstorm scales the learning rate).
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import netc
from netc.cli import main

ROOT = Path(__file__).resolve().parents[1]
XOR_RUN = json.loads((ROOT / "tests" / "data" / "brainstorm_xor.json").read_text())
LAYOUT_NETS = json.loads((ROOT / "tests" / "data" / "brainstorm_layouts.json").read_text())["nets"]


def _example():
    spec = importlib.util.spec_from_file_location("brainstorm_data", ROOT / "examples" / "brainstorm_data.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


BD = _example()


def _xor_init() -> dict:
    """Brainstorm's initial XOR parameters by netc's names (a FullyConnected's W (size, in) -> weight [in, size])."""
    out = {}
    for layer, ps in XOR_RUN["init"].items():
        out[f"{layer}.weight"] = np.array(ps["W"], dtype=np.float64).T
        out[f"{layer}.bias"] = np.array(ps["bias"], dtype=np.float64)
    return out


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _xor_outputs(p: dict) -> np.ndarray:
    h = _sigmoid(BD.XOR_X.astype(np.float64) @ p["FullyConnected.weight"] + p["FullyConnected.bias"])
    return _sigmoid(h @ p["OutLayer.weight"] + p["OutLayer.bias"]).ravel()


def _brainstorms_check(out, losses):
    """test_xor.py's success criterion."""
    assert np.all(np.round(out) == np.array(XOR_RUN["targets"])), out
    assert min(losses) < 0.5


@pytest.mark.parametrize("net, key", [("mnist_pi", "corpus_mnist_pi"), ("cifar10_cnn", "cifar10_cnn"), ("xor", "xor")])
def test_example_architectures_are_brainstorms(net, key):
    assert getattr(BD, net)() == LAYOUT_NETS[key]["architecture"]


def test_xor_trains_as_brainstorm_does_from_the_api(tmp_path):
    path = tmp_path / "xor.json"
    path.write_text(json.dumps(BD.xor()))
    top = netc.load(str(path))
    params = netc.parameters.create(top, seed=0, dtype=torch.float64)
    for name, value in _xor_init().items():
        params[name] = value
    losses = []

    def on_event(e):
        if isinstance(e, netc.event.EndIteration):
            losses.append(e.cost)

    reader = netc.reader.from_arrays(**{"Input.default": BD.XOR_X, "Input.targets": BD.XOR_T})
    netc.train(top, params, reader, netc.optimizer.SGD(XOR_RUN["learning_rate"]), num_passes=XOR_RUN["epochs"],
               batch_size=4, event_handler=on_event, threads=1)
    assert len(losses) == len(XOR_RUN["loss"]) == 300
    # the same curve as Brainstorm's float32 run, step for step
    np.testing.assert_allclose(losses, XOR_RUN["loss"], rtol=1e-5, atol=1e-6)
    final = {n: params.numpy(n) for n in params.names()}
    for layer, ps in XOR_RUN["final"].items():
        np.testing.assert_allclose(final[f"{layer}.weight"], np.array(ps["W"]).T, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(final[f"{layer}.bias"], ps["bias"], rtol=1e-4, atol=1e-4)
    out = _xor_outputs(final)
    _brainstorms_check(out, losses)
    assert losses[-1] < 0.03 and abs(losses[-1] - XOR_RUN["loss"][-1]) < 1e-6


def test_xor_trains_as_brainstorm_does_from_the_cli(tmp_path, capsys):
    arch, data, init = tmp_path / "xor.json", tmp_path / "xor.npz", tmp_path / "init.npz"
    arch.write_text(json.dumps(BD.xor(), indent=1))
    np.savez(data, **{"Input.default": BD.XOR_X, "Input.targets": BD.XOR_T})
    np.savez(init, **_xor_init())
    hist, trained = tmp_path / "hist.json", tmp_path / "trained.npz"
    rc = main(["run", str(arch), "--train", "--batch", "4", "--data", str(data), "--params", str(init),
               "--optimizer", "sgd", "--lr", "4", "--epochs", "300", "--history", str(hist), "-o", str(trained)])
    assert rc == 0, capsys.readouterr().err
    losses = [r["loss"] for r in json.loads(hist.read_text())]
    np.testing.assert_allclose(losses, XOR_RUN["loss"], rtol=1e-5, atol=1e-6)
    with np.load(trained) as z:
        final = {n: z[n].astype(np.float64) for n in _xor_init()}
    _brainstorms_check(_xor_outputs(final), losses)


def test_the_examples_xor_start_is_brainstorms():
    assert BD.XOR_INIT_BRAINSTORM == XOR_RUN["init"]
    for n, v in BD.xor_init().items():
        np.testing.assert_allclose(v, _xor_init()[n], rtol=1e-7)


def test_xor_without_brainstorms_start_fails_the_check_where_it_should():
    """The check can fail: from all-zero parameters the two hidden units stay equal (a symmetric start) and the
    net cannot represent XOR: every rounded output is the same."""
    p = {n: np.zeros_like(v) for n, v in _xor_init().items()}
    out = _xor_outputs(p)
    with pytest.raises(AssertionError):
        _brainstorms_check(out, [0.7])


@pytest.fixture(scope="module")
def tiny_mnist(tmp_path_factory):
    d = tmp_path_factory.mktemp("bs_mnist")
    train, test = BD.datasets("mnist_pi", seed=0, copies=1, limit=200)
    np.savez(d / "train.npz", **train)
    np.savez(d / "test.npz", **test)
    np.savez(d / "init.npz", **BD.initial_params("mnist_pi", 0))
    (d / "mnist_pi.json").write_text(json.dumps(BD.mnist_pi()))
    return d, train, test


def test_generated_digits_have_brainstorms_shapes(tiny_mnist):
    _, train, test = tiny_mnist
    assert train["Input.default"].shape[1:] == (28, 28, 1) and train["Input.targets"].shape[1:] == (1,)
    assert set(np.unique(train["Input.targets"])) == set(range(10))
    assert len(test["Input.targets"]) == sum(np.sum(test["Input.targets"] == c) for c in range(10))
    tr, te = BD.datasets("cifar10_cnn", seed=0, copies=1, limit=200)
    assert tr["Input.default"].shape[1:] == (32, 32, 3)
    np.testing.assert_allclose(tr["Input.default"].mean(axis=(0, 1, 2), dtype=np.float64), 0, atol=1e-3)
    np.testing.assert_allclose(tr["Input.default"].std(axis=(0, 1, 2), dtype=np.float64), 1, atol=1e-3)


def test_mnist_pi_loss_falls_from_the_cli(tiny_mnist, capsys):
    d, _, _ = tiny_mnist
    hist = d / "hist.json"
    rc = main(["run", str(d / "mnist_pi.json"), "--train", "--batch", "20", "--dtype", "f32",
               "--data", str(d / "train.npz"), "--eval", str(d / "test.npz"), "--params", str(d / "init.npz"),
               "--optimizer", "momentum", "--momentum", "0.9", "--lr", "0.05", "--epochs", "5",
               "--history", str(hist)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    losses = [r["loss"] for r in json.loads(hist.read_text())]
    assert len(losses) == 40                                      # 163 samples: 8 batches of 20, 5 epochs
    assert abs(losses[0] - np.log(10)) < 0.01                     # Gaussian(0.01): a uniform start
    assert np.mean(losses[-8:]) < np.mean(losses[:8]) - 0.2, losses       # the last epoch's against the first's
    held_out = [ln for ln in (out + err).splitlines() if ln.startswith("eval on 37 samples")]
    assert held_out and float(held_out[0].split("loss ")[1].split(",")[0]) < 2.1, out + err


def test_mnist_pi_and_cifar10_cnn_train_from_the_api(tiny_mnist):
    d, train, test = tiny_mnist
    top = netc.load(str(d / "mnist_pi.json"))
    params = netc.parameters.create(top, seed=0)
    for n, v in BD.initial_params("mnist_pi", 0).items():
        params[n] = v
    before = netc.test(top, params, netc.reader.from_arrays(**test), batch_size=40, threads=1).cost
    costs = []

    def on_event(e):
        if isinstance(e, netc.event.EndIteration):
            costs.append(e.cost)

    netc.train(top, params, netc.reader.from_arrays(**train), netc.optimizer.Momentum(0.05, momentum=0.9),
               num_passes=5, batch_size=20, event_handler=on_event, threads=1)
    after = netc.test(top, params, netc.reader.from_arrays(**test), batch_size=40, threads=1)
    assert len(costs) == 45 and np.mean(costs[-9:]) < np.mean(costs[:9]) - 0.2, costs     # 9 batches a pass
    assert abs(before - np.log(10)) < 0.01
    assert after.cost < before - 0.4 and after.metrics["accuracy"] > 0.25, (before, after)      # chance: 0.1

    cifar = d / "cifar10_cnn.json"
    cifar.write_text(json.dumps(BD.cifar10_cnn()))
    top = netc.load(str(cifar))
    params = netc.parameters.create(top, seed=0)
    for n, v in BD.initial_params("cifar10_cnn", 0).items():
        params[n] = v
    tr, _ = BD.datasets("cifar10_cnn", seed=0, copies=1, limit=40)
    costs.clear()
    netc.train(top, params, netc.reader.from_arrays(**tr), netc.optimizer.Momentum(0.01, momentum=0.9),
               num_passes=1, batch_size=8, event_handler=on_event, threads=1)
    assert len(costs) == -(-len(tr["Input.targets"]) // 8), costs            # every batch of 8, the last partial
    assert all(np.isfinite(costs)) and abs(costs[0] - np.log(10)) < 0.05, costs


def test_the_plot_script_draws_the_curves(tmp_path):
    """examples/brainstorm_plot.py (the picture in docs/brainstorm.md) draws netc's histories beside Brainstorm's."""
    pytest.importorskip("matplotlib")
    spec = importlib.util.spec_from_file_location("brainstorm_plot", ROOT / "examples" / "brainstorm_plot.py")
    plot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plot)
    hist = tmp_path / "h.json"
    rows = [{"step": i + 1, "epoch": i // 2 + 1, "loss": v} for i, v in enumerate(XOR_RUN["loss"])]
    hist.write_text(json.dumps(rows))
    out = tmp_path / "loss.png"
    assert plot.main(["--xor", str(hist), "--mnist-pi", str(hist), "--cifar10-cnn", str(hist), "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
