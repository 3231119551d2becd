"""Training, part 1: the backward and optimizer passes on the reference executor.

* generated gradients against torch.autograd (float64) and against central finite differences of
  the forward reference (independent of both netc's rules and autograd);
* the gradient ops' FLOPs are the forward layers' backward columns, layer by layer;
* training programs print and re-parse; frozen and immutable parameters do not change; a
  share_from alias follows its owner;
* `netc run --train`: the loss goes down, -o/--grads/--history write files, bad flags are errors;
* the digits example (scikit-learn's bundled 8x8 digits) reaches >= 95% held-out accuracy with SGD
  and with Adam.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from netc.cli import main
from netc.explain import layer_rows
from netc.frontend import load, load_text
from netc.ir.parser import parse_ir
from netc.ir.printer import print_ir
from netc.ops import layer_cost, lookup
from netc import pipelines
from netc.pipelines import Options, Training
from netc.runtime.reference import run_reference
from netc.runtime.scale import scale_inputs
from netc.runtime.train import ReferenceTrainer, check_grads


ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def training_module(src, batch=None, update=False, backward=None, optimizer=None):
    """The training program of `src`: its gradients (the backward pass's options `backward`), and with
    `update` the parameters' updates too (the optimizer pass's options `optimizer`)."""
    m = load(str(src)) if isinstance(src, Path) else load_text(src, "t.nd")
    if batch:
        scale_inputs(m, batch=batch)
    training = Training.from_record({"backward": backward or {}, "optimizer": optimizer or {}})
    pipelines.training(m, Options(training=replace(training, gradients_only=not update)))
    return m


def inference_module(src, batch=None):
    m = load(str(src)) if isinstance(src, Path) else load_text(src, "t.nd")
    if batch:
        scale_inputs(m, batch=batch)
    pipelines.inference(m)
    return m


SMALL = """
network small {
  input data: f32[3, 7, 6, 2]
  input label: i32[3]
  c1 = Convolution(data) { filter: [3, 2, 2, 4], strides: [1, 2, 1, 1], padding: SAME, activation: relu }
  p1 = Pooling(c1) { ksize: [1, 2, 2, 1], strides: [1, 1, 2, 1], padding: SAME }
  c2 = Convolution(p1) { filter: [2, 2, 4, 3], padding: [1, 1], activation: sigmoid }
  a2 = AvgPool(c2) { ksize: [1, 3, 3, 1], strides: [1, 2, 2, 1], padding: SAME }
  fc = InnerProduct(a2) { num_outputs: 5, activation: tanh }
  out = InnerProduct(fc) { num_outputs: 4 }
  loss = SoftmaxLoss(out, label)
}
"""


# -- gradients against two independent oracles ----------------------------------------------------

@pytest.mark.parametrize("src", [SMALL, EXAMPLES / "lenet.nd", EXAMPLES / "digits.nd"], ids=["small", "lenet", "digits"])
def test_generated_gradients_equal_autograd(src):
    m = training_module(src, batch=2 if isinstance(src, Path) else None)
    rows = check_grads(m, seed=3)
    assert rows and all(r["rel_error"] <= 1e-10 for r in rows), rows
    assert all(r["max_abs"] > 0 for r in rows)   # every gradient matters in the comparison


def _loss_at(module, params, feed):
    out = run_reference(module, feed, params, intermediates=True)
    return float(out["loss"])


@pytest.mark.parametrize("src", [SMALL, EXAMPLES / "lenet.nd"], ids=["small", "lenet"])
def test_gradients_equal_finite_differences(src):
    """--grads against central differences of the forward reference (float64), a few entries of
    every parameter."""
    batch = 2 if isinstance(src, Path) else None
    m = training_module(src, batch)
    inf = inference_module(src, batch)
    tr = ReferenceTrainer(m, seed=1)
    feed = {k: v for k, v in tr.feed(None, lr=0.0).items() if k in ("data", "label")}
    params = {k: v.clone() for k, v in tr.params.items()}
    grads = tr.gradients(tr.step(feed, lr=0.0))
    check_finite_differences(grads, params, lambda p: _loss_at(inf, p, feed), per_param=3)


def check_finite_differences(grads: dict, params: dict, loss_at, per_param: int, h: float = 1e-6):
    """`per_param` random entries of each gradient against the central difference (step h) of
    loss_at(parameters) around `params`, to 1e-6 of max(1, |difference|)."""
    rng = np.random.default_rng(0)
    for name, g in grads.items():
        for _ in range(per_param):
            idx = tuple(int(rng.integers(0, s)) for s in g.shape)
            plus = {k: v.clone() for k, v in params.items()}
            minus = {k: v.clone() for k, v in params.items()}
            plus[name][idx] += h
            minus[name][idx] -= h
            fd = (loss_at(plus) - loss_at(minus)) / (2 * h)
            assert abs(fd - float(g[idx])) <= 1e-6 * max(1.0, abs(fd)), (name, idx, fd, float(g[idx]))


def test_gradient_flops_are_the_backward_columns():
    """Per forward layer: its gradient ops' FLOPs = its backward-filter FLOPs, plus its
    backward-data FLOPs where the program computes a data gradient."""
    m = training_module(SMALL)
    net = m.networks()[0]
    ops = net.regions[0].ops
    by_layer = {}
    for op in ops:
        if "grad_of" in op.attrs and lookup(op.name) is not None:
            by_layer.setdefault(op.attrs["grad_of"], []).append(op)
    checked = 0
    for op in ops:
        if op.name in ("netc.input", "netc.output") or "grad_of" in op.attrs:
            continue
        layer = op.attrs["name"]
        c, _ = layer_cost(op)
        grads = by_layer.get(layer, [])
        data = any(g.attrs["name"].endswith(("grad_data",)) or g.name in ("netc.maxpool_grad", "netc.avgpool_grad",
                                                                             "netc.conv2d_grad_data",
                                                                             "netc.inner_product_grad_data")
                   for g in grads)
        want = c.flops_bwd_filter + (c.flops_bwd_data if data else 0)
        got = sum(layer_cost(g)[0].flops_fwd for g in grads)
        if op.name == "netc.softmax_loss":
            want = c.flops_bwd_data
        assert got == pytest.approx(want, rel=1e-12), (layer, got, want)
        checked += 1
    assert checked >= 7
    rows = layer_rows(m, net)
    assert {r["phase"] for r in rows} == {"forward", "backward"}


def test_training_programs_print_and_reparse():
    for src in (SMALL, EXAMPLES / "lenet.nd"):
        m = training_module(src, update=True, optimizer={"name": "adam", "clip_norm": 1.0})
        text = print_ir(m)
        assert print_ir(parse_ir(text, "t.mlir")) == text
        assert '"netc.adam_update"' in text and "%conv" in text or "%c1" in text


def test_gradient_names_and_locations():
    m = training_module(EXAMPLES / "lenet.nd")
    net = m.networks()[0]
    by = {op.attrs.get("name"): op for op in net.regions[0].ops}
    assert net.attrs["gradients"]["conv1.weight"] == "conv1.weight.grad"
    g = by["conv1.weight.grad"]
    assert g.name == "netc.conv2d_grad_filter" and g.loc == by["conv1"].loc and g.attrs["grad_of"] == "conv1"
    assert by["pool1.grad"].name == "netc.conv2d_grad_data"      # the gradient reaching pool1, from conv2
    assert "data.grad" not in by                                  # inputs get none


# -- freezing, immutability, sharing ---------------------------------------------------------------

def test_frozen_and_immutable_parameters_do_not_change():
    src = SMALL.replace("fc = InnerProduct(a2) { num_outputs: 5, activation: tanh }",
                        "fc = InnerProduct(a2) { num_outputs: 5, activation: tanh, "
                        "params: { weight: { name: fcw, immutable: true } } }")
    m = training_module(src, update=True, backward={"freeze": ["c1"]},
                        optimizer={"name": "momentum"})
    net = m.networks()[0]
    assert set(net.attrs["gradients"]) == {"c2.weight", "c2.bias", "fc.bias", "out.weight", "out.bias"}
    assert not any(op.attrs.get("name", "").startswith(("c1.", "p1.")) for op in net.regions[0].ops
                   if "grad_of" in op.attrs)          # nothing before the frozen layer is differentiated
    tr = ReferenceTrainer(m, seed=0)
    before = {k: v.clone() for k, v in tr.params.items()}
    for _ in range(3):
        tr.step(lr=0.1)
    for k in ("c1.weight", "c1.bias", "fcw"):
        assert torch.equal(before[k], tr.params[k]), k
    for k in ("c2.weight", "out.bias"):
        assert not torch.equal(before[k], tr.params[k]), k


def test_share_from_alias_follows_its_owner():
    src = """
    network tied {
      input x: f32[4, 6]
      input y: f32[4, 6]
      enc = InnerProduct(x) { num_outputs: 3, params: { weight: w, bias: b1 } }
      dec = InnerProduct(enc) { num_outputs: 6, params: { weight: { name: wt, share_from: w }, bias: b2 } }
      loss = EuclideanLoss(dec, y)
    }"""
    m = training_module(src, update=True)
    assert set(m.networks()[0].attrs["gradients"]) == {"w", "b1", "b2"}   # the alias's goes to its owner
    assert all(r["rel_error"] < 1e-10 for r in check_grads(training_module(src)))
    tr = ReferenceTrainer(m, seed=0)
    tr.step(lr=0.5)
    assert torch.equal(tr.params["wt"], tr.params["w"].reshape(3, 6))


def test_losses_go_down_on_fixed_inputs():
    m = training_module(SMALL, update=True, optimizer={"name": "adam"})
    tr = ReferenceTrainer(m, seed=0)
    losses = [float(tr.losses(tr.step(lr=0.02))["loss"]) for _ in range(40)]
    assert losses[-1] < 0.5 * losses[0]


# -- the command line --------------------------------------------------------------------------------

def run_cli(argv, capsys):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_run_train_writes_parameters_gradients_and_history(tmp_path, capsys):
    p, g, h = tmp_path / "p.npz", tmp_path / "g.npz", tmp_path / "h.json"
    rc, out, err = run_cli(["run", str(EXAMPLES / "lenet.nd"), "--train", "--batch", "4", "--steps", "5",
                            "--optimizer", "momentum", "--lr", "0.005", "-o", str(p), "--grads", str(g),
                            "--history", str(h)], capsys)
    assert rc == 0, err
    assert out.count("loss") >= 5 and "trained 5 steps" in out
    hist = json.loads(h.read_text())
    assert [r["step"] for r in hist] == [1, 2, 3, 4, 5] and hist[-1]["loss"] < hist[0]["loss"]
    params, grads = np.load(p), np.load(g)
    assert "conv1.weight" in params.files and "conv1.weight.velocity" in params.files
    assert sorted(grads.files) == sorted(["conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "ip1.weight",
                                          "ip1.bias", "ip2.weight", "ip2.bias"])
    # training again from the written parameters continues where it stopped
    rc, out2, err = run_cli(["run", str(EXAMPLES / "lenet.nd"), "--train", "--batch", "4", "--steps", "1",
                             "--optimizer", "momentum", "--lr", "0.05", "--params", str(p)], capsys)
    assert rc == 0, err


def test_run_check_grads(capsys):
    rc, out, err = run_cli(["run", str(EXAMPLES / "lenet.nd"), "--check-grads", "--batch", "2"], capsys)
    assert rc == 0, err
    assert "conv1.weight" in out and "worst relative error" in out and "(ok" in out


@pytest.mark.parametrize("argv, message", [
    (["--steps", "3"], "add --train"),
    (["--train", "--epochs", "2"], "--epochs counts passes over --data"),
    (["--train", "--steps", "0"], "positive"),
    (["--train", "--compare", "--reference"], "needs --target interp"),
    (["--train", "--freeze", "nothing_like_this"], "names no parameter or layer"),
    (["--train", "--plot", "x.txt"], "PNG, SVG or PDF"),
])
def test_run_train_bad_flags(argv, message, capsys):
    rc, out, err = run_cli(["run", str(EXAMPLES / "lenet.nd"), "--batch", "2", *argv], capsys)
    assert rc == 1 and message in err, err


def test_data_that_does_not_fit_is_an_error(tmp_path, capsys):
    bad = tmp_path / "bad.npz"
    np.savez(bad, data=np.zeros((10, 5, 5, 1), np.float32), label=np.zeros(10, np.int32))
    rc, out, err = run_cli(["run", str(EXAMPLES / "digits.nd"), "--train", "--data", str(bad)], capsys)
    assert rc == 1 and "samples of 'data' have shape [5, 5, 1]" in err


# -- real data: scikit-learn's digits -------------------------------------------------------------------

@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    pytest.importorskip("sklearn", reason="the digits example needs scikit-learn (pip install 'netc[data]')")
    import importlib.util
    spec = importlib.util.spec_from_file_location("digits_data", EXAMPLES / "digits_data.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    d = tmp_path_factory.mktemp("digits")
    assert mod.main(["-o", str(d / "digits")]) == 0
    return d / "digits_train.npz", d / "digits_test.npz"


@pytest.mark.slow
@pytest.mark.parametrize("optimizer, lr, epochs", [("sgd", "0.2", "15"), ("adam", "0.003", "10")])
def test_digits_reach_95_percent(digits, optimizer, lr, epochs, tmp_path, capsys):
    train, test = digits
    rc, out, err = run_cli(["run", str(EXAMPLES / "digits.nd"), "--train", "--data", str(train), "--eval", str(test),
                            "--optimizer", optimizer, "--lr", lr, "--epochs", epochs,
                            "--history", str(tmp_path / "h.json")], capsys)
    assert rc == 0, err
    acc = float(out.split("accuracy ")[1].split("%")[0])
    assert acc >= 95.0, out
    hist = json.loads((tmp_path / "h.json").read_text())
    assert hist[-1]["loss"] < 0.3 * hist[0]["loss"]


def test_docs_show_the_current_lenet_training_program(capsys, update_goldens):
    """docs/training.md prints LeNet's training program; it must be what netc prints now
    (`make golden` rewrites it after a deliberate change)."""
    doc_path = ROOT / "docs" / "training.md"
    doc = doc_path.read_text()
    import os
    cwd = os.getcwd()
    os.chdir(ROOT)   # (the printed source path is relative to the repository)
    try:
        rc, out, err = run_cli(["opt", "examples/lenet.nd", "--train", "--optimizer", "momentum", "--no-locs"], capsys)
    finally:
        os.chdir(cwd)
    assert rc == 0, err
    a = doc.index("<!-- lenet-training-program -->")
    b = doc.index("<!-- end -->", a)
    want = "<!-- lenet-training-program -->\n```mlir\n" + out + "```\n"
    if update_goldens:
        doc_path.write_text(doc[:a] + want + doc[b:])
        return
    assert doc[a:b] == want, "docs/training.md shows an outdated training program: run `make golden`"


def test_gan_trains_alternately_with_shared_discriminator(tmp_path, capsys):
    """examples/gan.nd: the generator network trains with the discriminator's parameters frozen,
    then the discriminator network alone from what that wrote; parameters shared by name are one
    tensor, and each round carries the other network's parameters and state along."""
    g, d = tmp_path / "g.npz", tmp_path / "d.npz"
    gan = str(EXAMPLES / "gan.nd")
    rc, out, err = run_cli(["run", gan, "--train", "--network", "gan_g", "--freeze", "d_*", "--steps", "3",
                            "--optimizer", "adam", "--lr", "0.01", "-o", str(g)], capsys)
    assert rc == 0, err
    rc, out, err = run_cli(["run", gan, "--train", "--network", "gan_d", "--steps", "3", "--optimizer", "adam",
                            "--lr", "0.01", "--params", str(g), "-o", str(d)], capsys)
    assert rc == 0, err
    assert "not in this training program" in err          # the generator's Adam state, carried along
    G, D = np.load(g), np.load(d)
    init = ReferenceTrainer(training_module(EXAMPLES / "gan.nd", backward={"networks": ["gan_g"]}), "gan_g").params
    assert np.array_equal(G["d_fc1_w"], init["d_fc1_w"].float().numpy())        # frozen in round one
    assert not np.array_equal(G["gan_g.gen_hidden.weight"], init["gan_g.gen_hidden.weight"].float().numpy())
    assert np.array_equal(D["gan_g.gen_hidden.weight"], G["gan_g.gen_hidden.weight"])  # untouched in round two
    assert not np.array_equal(D["d_fc1_w"], G["d_fc1_w"])
    assert set(G.files) <= set(D.files)                    # nothing of round one is lost


def test_training_output_named_safetensors_is_safetensors(tmp_path, capsys):
    """`--train -o p.safetensors` wrote an .npz archive under that name, which netc (and the
    safetensors package) then refused; the extension picks the format, as --params reads it."""
    from safetensors.numpy import load_file
    p, g = tmp_path / "p.safetensors", tmp_path / "g.safetensors"
    rc, out, err = run_cli(["run", str(EXAMPLES / "gan.nd"), "--train", "--network", "gan_g", "--steps", "2",
                            "--optimizer", "adam", "-o", str(p), "--grads", str(g)], capsys)
    assert rc == 0, err
    assert not p.read_bytes().startswith(b"PK")            # not a zip archive
    trained, grads = load_file(str(p)), load_file(str(g))
    assert "gan_g.gen_hidden.weight" in trained and "gan_g.gen_hidden.weight" in grads
    rc, out, err = run_cli(["run", str(EXAMPLES / "gan.nd"), "--reference", "--params", str(p), "--network", "gan_g"],
                           capsys)
    assert rc == 0, err
    rc, out, err = run_cli(["run", str(EXAMPLES / "gan.nd"), "--train", "--network", "gan_g", "--steps", "1",
                            "--params", str(p), "-o", str(tmp_path / "q.npz")], capsys)
    assert rc == 0, err
    assert set(np.load(tmp_path / "q.npz").files) >= set(trained)


def test_trained_parameters_run_inference(tmp_path, capsys):
    """What `--train -o` writes runs the inference program: optimizer state and running statistics
    are left out with a warning, batch norms folded with their running statistics."""
    p = tmp_path / "p.npz"
    rc, out, err = run_cli(["run", str(EXAMPLES / "gan.nd"), "--train", "--network", "gan_g", "--steps", "2",
                            "--optimizer", "adam", "-o", str(p)], capsys)
    assert rc == 0, err
    rc, out, err = run_cli(["run", str(EXAMPLES / "gan.nd"), "--reference", "--params", str(p), "--network", "gan_g"],
                           capsys)
    assert rc == 0, err
    assert "holds training state, left out for inference" in err and "gen_sample" in out
    from netc.runtime.train import inference_params
    inf = inference_module(EXAMPLES / "gan.nd")
    z = {k: torch.from_numpy(v) for k, v in np.load(p).items()}
    folded = inference_params(inf, z)
    s, m, v = z["gan_g.gen_hidden_bn.scale"], z["gen_hidden_bn.running_mean"], z["gen_hidden_bn.running_var"]
    torch.testing.assert_close(folded["gan_g.gen_hidden_bn.scale"], s / torch.sqrt(v + 1e-5))
    torch.testing.assert_close(folded["gan_g.gen_hidden_bn.shift"], z["gan_g.gen_hidden_bn.shift"] - m * s / torch.sqrt(v + 1e-5))


@pytest.mark.parametrize("opt", [{"name": "momentum"}, {"name": "adam"}, {"name": "nesterov", "weight_decay": 0.01},
                                 {"name": "rmsprop"}, {"name": "sgd", "clip_norm": 0.5}], ids=lambda o: o["name"])
def test_eager_training_baseline_equals_the_reference(opt):
    """bench/gpu.py's PyTorch baseline (runtime/eager.py EagerTrainer: autograd + torch.optim) and
    netc's training program on the reference executor take the same three steps (float64)."""
    from netc.runtime.eager import EagerTrainer
    m = training_module(EXAMPLES / "lenet.nd", batch=3, update=True, optimizer=opt)
    tr = ReferenceTrainer(m, seed=0)
    params = {k: v for k, v in tr.params.items() if k in {p.attrs["sym_name"] for p in m.params()
                                                             if not p.attrs.get("state")}}
    et = EagerTrainer(inference_module(EXAMPLES / "lenet.nd", batch=3), None, params,
                      m.networks()[0].attrs["optimizer"], dtype=torch.float64)
    feed = {k: v for k, v in tr.feed(None, 0.0).items() if k in ("data", "label")}
    for _ in range(3):
        ref = float(tr.losses(tr.step(feed, lr=1e-3))["loss"])
        got = float(et.step(feed, 1e-3))
        assert got == pytest.approx(ref, rel=1e-10)
    for k, t in et.params.items():
        torch.testing.assert_close(t.detach(), tr.params[k], rtol=1e-9, atol=1e-12)


def test_a_printed_training_program_checks_and_trains_as_its_source(tmp_path, capsys):
    """`netc opt --train -o prog.mlir` gives IR text that `netc check` accepts and `netc run
    --train` runs as it is (no second backward or optimizer pass), with the same losses."""
    prog = tmp_path / "lenet_train.mlir"
    rc, out, err = run_cli(["opt", str(EXAMPLES / "lenet.nd"), "--train", "--optimizer", "adam", "-o", str(prog)],
                           capsys)
    assert rc == 0, err
    rc, out, err = run_cli(["check", str(prog)], capsys)
    assert rc == 0 and not err, err
    losses = []
    for src in (str(EXAMPLES / "lenet.nd"), str(prog)):
        rc, out, err = run_cli(["run", src, "--train", "--optimizer", "adam", "--lr", "0.001", "--steps", "3"]
                               if src.endswith(".nd") else ["run", src, "--train", "--lr", "0.001", "--steps", "3"],
                               capsys)
        assert rc == 0, err
        losses.append([ln.split("loss ")[1] for ln in out.splitlines() if ln.startswith("step ")])
    assert losses[0] == losses[1] and len(losses[0]) == 3


def test_alexnet_gradients_equal_finite_differences():
    """AlexNet (examples/alexnet.nd at batch 2, 195x195, widths / 8, a softmax loss appended):
    --grads against central differences of the loss, a few entries of every parameter. The loss
    is the training program's own forward at learning rate 0 with the step's dropout seed fixed, so
    both sides see the same masks; the gradients come from the generated gradient ops."""
    from scaling import narrow
    m = load(str(EXAMPLES / "alexnet.nd"))
    scale_inputs(m, batch=2, spatial=195)
    narrow(m, 8)
    pipelines.training(m, Options(training=Training(loss="softmax", gradients_only=True)))
    tr = ReferenceTrainer(m, seed=1)
    feed = {k: v for k, v in tr.feed(None, lr=0.0).items() if k in ("data", "label")}
    # inputs drawn here (seed 5): at the seed-1 inputs of `netc run` the loss has a kink (a max-pool
    # near-tie or a ReLU at zero): conv1's and conv2's central differences there differ from the
    # gradient -- which equals autograd's to 1e-15 -- by up to 2.4% at every h from 1e-5 to 1e-7,
    # the signature of a difference quotient straddling two one-sided slopes
    feed["data"] = torch.randn(feed["data"].shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    base = {k: v.clone() for k, v in tr.params.items()}
    grads = tr.gradients(tr.step(feed, lr=0.0, step_seed=7))
    assert any(op.name == "netc.dropout" for op in m.networks()[0].regions[0].ops)

    def loss_at(params):
        tr.params = params
        return float(sum(tr.losses(tr.step(feed, lr=0.0, step_seed=7)).values()))

    assert len(grads) == 16
    check_finite_differences(grads, base, loss_at, per_param=2)
