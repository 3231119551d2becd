"""Brainstorm's feed-forward layer types and both architecture forms (issue 25).

The architectures and their shapes are Brainstorm's own: tests/data/brainstorm_layers.json was written by
Brainstorm's code at 8f1fc88 (its construction syntax, generate_architecture, instantiate_layers_from_architecture;
see its "generated_by"). netc imports each with Brainstorm's output shapes and parameter counts (T = 1 folded into
the batch); the numbers each layer computes are checked against Brainstorm's forward passes transcribed here (its
layers/*.py: the clipped binomial cross-entropies, SquaredError + Loss, Mask, BatchNorm's batch statistics, the
NHWC convolution with W (F, kh, kw, C), pooling that counts only the in-bounds pixels); the new losses run and train
2 steps from the CLI; what netc cannot express is a located error, one per cause.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

os.environ["TRITON_INTERPRET"] = "1"    # the interpreter target's kernels under Triton's interpreter (interp_mode)

from netc.cli import main  # noqa: E402
from netc.diagnostics import NetcError
from netc.explain import explain_json
from netc.frontend import load_text
from netc.ops import lookup
from netc.runtime.reference import execute, module_params, run_reference
from netc.runtime.train import ReferenceTrainer, is_forward
from netc import pipelines
from netc.pipelines import Options, Training

DATA = json.loads((Path(__file__).parent / "data" / "brainstorm_layers.json").read_text())["nets"]
IMPORTED = sorted(DATA)
LOSS_OUTPUTS = {("SoftmaxCE", "loss"), ("SigmoidCE", "loss"), ("SquaredError", "loss"),
                ("BinomialCrossEntropy", "default"), ("L1Decay", "loss"), ("L2Decay", "loss")}
B = 3


T = 4    # a time-major net's (one with a recurrent layer) sequence length


def _time_major(arch) -> bool:
    return any(v["@type"] in ("Lstm", "Recurrent", "Clockwork") for v in arch.values())


def _load(arch, name="net.json", batch=B):
    m = load_text(json.dumps(arch, indent=1), name, batch=batch, options={"time": T if _time_major(arch) else 1})
    pipelines.inference(m)
    return m


def _row_name(lname, t, outs, out):
    return lname if list(outs) == ["default"] and t != "Input" else f"{lname}.{out}"


@pytest.mark.parametrize("net", IMPORTED)
def test_shapes_and_parameters_are_brainstorms(net):
    arch, layers = DATA[net]["architecture"], DATA[net]["layers"]
    m = _load(arch)
    rows = {r["name"]: r for r in explain_json(m)["layers"]}
    declared = {p.attrs["sym_name"]: list(p.attrs["type"].shape) for p in m.params()}
    lead = [T, B] if _time_major(arch) else [B]     # T = 1 folded into the batch, or the sequence [T, B, ...]
    for lname, facts in layers.items():
        t = arch[lname]["@type"]
        if t == "Loss":          # an output statement: its input is the scalar loss
            continue
        for out, template in facts["out"].items():
            row = rows[_row_name(lname, t, facts["out"], out)]
            oc = arch[lname].get("@outgoing_connections", {})
            oc = {"default": oc} if isinstance(oc, list) else oc           # the list form: 'default's targets
            readers = [arch[c.split(".")[0]]["@type"] for c in oc.get(out, [])]
            per_element = t == "SquaredError" and (len(lead) == 2 or set(readers) - {"Loss"})
            if (t, out) in LOSS_OUTPUTS and not per_element:
                assert row["shape"] == [], (lname, out)        # the batch mean, what the Loss layer makes of it
            else:
                assert row["shape"] == lead + template[2:], (lname, out)
        bs = facts["params"]
        mine = {n.split(".", 1)[1]: s for n, s in declared.items() if n.split(".")[0] == lname}
        if t == "FullyConnected" and len(lead) == 2:   # at every step: the product is the op '<layer>.flat'
            mine = {k.split(".", 1)[1]: v for k, v in mine.items()}
        if t == "BatchNorm":     # Brainstorm's mu and sigma are netc's running statistics (state)
            assert list(bs) == ["gamma", "beta", "mu", "sigma"]
            assert mine == {"scale": bs["gamma"], "shift": bs["beta"]}
        elif t == "Convolution2D":   # W (F, kh, kw, C) is netc's HWIO weight
            f, kh, kw, c = bs["W"]
            assert list(bs) == ["W", "bias"] and mine == {"weight": [kh, kw, c, f], "bias": bs["bias"]}
        elif t == "FullyConnected":  # W (out, in) is netc's [in, out]
            assert list(bs) == ["W", "bias"] and mine == {"weight": bs["W"][::-1], "bias": bs["bias"]}
        elif t in ("Lstm", "Recurrent", "Clockwork"):  # Brainstorm's names, order and shapes
            assert list(mine) == list(bs) and mine == bs, lname
        else:
            assert bs == {} and mine == {}, lname


def _brainstorm_params(net):
    return sum(math.prod(s) for f in DATA[net]["layers"].values() for s in f["params"].values())


def test_cifar10_cnn_and_xor_parameter_totals():
    """examples/cifar10_cnn.py and tests/test_integration/test_xor.py: Brainstorm's totals, 116,906 and 9."""
    assert _brainstorm_params("cifar10_cnn") == 116_906 and _brainstorm_params("xor") == 9
    for net, want in (("cifar10_cnn", 116_906), ("xor", 9)):
        assert explain_json(_load(DATA[net]["architecture"]))["totals"]["params"] == want
    rows = {r["name"]: r for r in explain_json(_load(DATA["cifar10_cnn"]["architecture"]))["layers"]}
    assert rows["Pooling2D_3"]["shape"] == [B, 3, 3, 64] and rows["FC"]["params"] == 576 * 64 + 64
    # the image net: BatchNorm's mu and sigma (2 x 4) are running statistics in netc, not parameters
    assert explain_json(_load(DATA["image"]["architecture"]))["totals"]["params"] == _brainstorm_params("image") - 8


def test_list_form_of_outgoing_connections():
    """Brainstorm's test fixture (tests/conftest.py): "@outgoing_connections" as a list, the targets of 'default';
    C reads A ++ B (fan-in), D reads B ++ C."""
    m = _load(DATA["conftest_list_form"]["architecture"])
    rows = {r["name"]: r for r in explain_json(m)["layers"]}
    assert rows["C.default.concat"]["shape"] == [B, 8] and rows["D.default.concat"]["shape"] == [B, 12]
    assert explain_json(m)["totals"]["params"] == _brainstorm_params("conftest_list_form") == 230


def _feed(m, seed=0, probs=False):
    g = torch.Generator().manual_seed(seed)
    feed = {}
    for op in m.networks()[0].regions[0].ops:
        if op.name == "netc.input":
            shape = op.results[0].type.shape
            x = torch.rand(shape, generator=g, dtype=torch.float64) if probs else \
                torch.randn(shape, generator=g, dtype=torch.float64)
            feed[op.attrs["name"]] = x
    return feed


def _bce(p, t):   # Brainstorm's BinomialCrossEntropy / SigmoidCE forward, per element
    return -(t * torch.log(p.clamp(1e-6, 1.0)) + (1 - t) * torch.log((1 - p).clamp(1e-6, 1.0)))


def test_losses_compute_brainstorms_loss_layers():
    """Each loss followed by Brainstorm's Loss (sum / B): SquaredError 0.5 (x - t)^2, SigmoidCE and
    BinomialCrossEntropy clipped at 1e-6, SoftmaxCE over (H, W, C) (a warning: netc averages the positions)."""
    for net, lname, kind in (("spec_regression", "Output", "se"), ("spec_multi-label", "Output", "sig"),
                             ("xor", "BinomialCrossEntropy", "bce")):
        m = _load(DATA[net]["architecture"])
        p = module_params(m, seed=2)
        feed = _feed(m, probs=kind != "se")
        out = run_reference(m, feed, p, intermediates=True)
        t = feed["Input.targets"]
        if kind == "bce":
            y = out["OutLayer"]
            want = _bce(y, t).sum() / B
            got = out[lname]
        else:
            x = out["Output_projection"]
            want = (0.5 * (x - t) ** 2).sum() / B if kind == "se" else _bce(torch.sigmoid(x), t).sum() / B
            got = out[f"{lname}.loss"]
            pred = x if kind == "se" else torch.sigmoid(x)
            torch.testing.assert_close(out[f"{lname}.predictions"], pred, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    # a probability outside [1e-6, 1 - 1e-6] is clipped as Brainstorm clips it
    bce = lookup("netc.binomial_ce")
    y, t = torch.tensor([[0.0, 1.0, 1.5]], dtype=torch.float64), torch.tensor([[1.0, 0.0, 0.5]], dtype=torch.float64)
    want = torch.tensor(-2.5 * math.log(1e-6), dtype=torch.float64)    # ln 1e-6 twice, 0.5 ln 1e-6 for 1 - 1.5
    got = bce.reference({"logits": False, "clip": 1e-6, "batch_axis": 0}, [y, t], {})
    torch.testing.assert_close(got, want, rtol=1e-12, atol=0)


def test_time_major_sigmoid_ce_and_decay_divide_by_b():
    """tools.create_net_from_spec('multi-label', 4, 3, 'L5 D0.2 F6') at T = 4: the SigmoidCE loss summed over the
    steps and features / B (Brainstorm's Loss: batch_index 1), not / (T*B); an L2Decay on the Lstm likewise."""
    arch = json.loads(json.dumps(DATA["cfs_multi-label_lstm"]["architecture"]))
    arch["Lstm"]["@outgoing_connections"]["default"].append("D2")
    arch["D2"] = {"@type": "L2Decay", "@outgoing_connections": {"loss": ["L2"]}}
    arch["L2"] = {"@type": "Loss", "@outgoing_connections": {}}
    m = _load(arch)
    feed = _feed(m, probs=True)
    o = run_reference(m, feed, module_params(m, seed=6), intermediates=True)
    x, t = o["Output_projection"], feed["Input.targets"]
    assert tuple(x.shape) == (T, B, 3) == tuple(t.shape)
    torch.testing.assert_close(o["Output.loss"], _bce(torch.sigmoid(x), t).sum() / B, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(o["D2.loss"], 0.5 * (o["Lstm"] ** 2).sum() / B, rtol=1e-12, atol=1e-12)


def test_softmax_ce_over_images_warns_and_keeps_the_predictions(capsys):
    arch = DATA["softmax_images"]["architecture"]
    from netc.diagnostics import DiagnosticEngine
    diag = DiagnosticEngine()
    m = load_text(json.dumps(arch, indent=1), "img.json", batch=B, diag=diag)
    pipelines.inference(m)
    warn = [str(d) for d in diag.diagnostics]
    assert any("netc's loss is the mean over the 30 positions of a sample, Brainstorm's Loss their sum" in w
               for w in warn), warn
    p = module_params(m, seed=1)
    feed = _feed(m)
    feed["Input.targets"] = torch.randint(0, 4, (B, 6, 5, 1), generator=torch.Generator().manual_seed(1))
    out = run_reference(m, feed, p, intermediates=True)
    x = out["Output_projection"]
    probs = torch.softmax(x, -1)
    torch.testing.assert_close(out["Output.predictions"], probs, rtol=1e-12, atol=1e-12)
    bs_loss = -torch.log(probs.gather(-1, feed["Input.targets"]).clamp(1e-6, 1.0)).sum() / B
    torch.testing.assert_close(out["Output.loss"], bs_loss / 30, rtol=1e-12, atol=1e-12)


def test_image_layers_compute_brainstorms_forward_passes():
    """Convolution2D (NHWC, W (F, kh, kw, C), zero padding, 'rel'), max pooling, BatchNorm's training pass
    (batch statistics over every axis but the last, biased variance, epsilon), avg pooling counting the in-bounds
    pixels only, Elementwise tanh, NoOp, DeltasScaling(1) and Mask."""
    m = _load(DATA["image"]["architecture"])
    p = module_params(m, seed=4)
    p["N.scale"] = torch.rand(4, dtype=torch.float64) + 0.5
    p["N.shift"] = torch.randn(4, dtype=torch.float64)
    feed = _feed(m)
    feed["Input.targets"] = torch.randint(0, 5, (B, 1), generator=torch.Generator().manual_seed(2))
    m_train = load_text(json.dumps(DATA["image"]["architecture"]), "net.json", batch=B)
    x = feed["Input.default"]
    w_bs = p["C.weight"].permute(3, 0, 1, 2)          # netc HWIO -> Brainstorm (F, kh, kw, C)
    conv = torch.relu(F.conv2d(x.permute(0, 3, 1, 2), w_bs.permute(0, 3, 1, 2), p["C.bias"], stride=(2, 1),
                               padding=1))
    pool = F.max_pool2d(conv, 2, 2)
    out = run_reference(m, feed, p, intermediates=True)
    torch.testing.assert_close(out["C"], conv.permute(0, 2, 3, 1), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out["P"], pool.permute(0, 2, 3, 1), rtol=1e-12, atol=1e-12)
    # BatchNorm's training pass, transcribed from batch_normalization_layer.py
    h = pool.permute(0, 2, 3, 1).reshape(-1, 4)
    centered = h - h.mean(0)
    sigma_b = torch.sqrt((centered ** 2).mean(0) + 1e-5)
    bn = (centered / sigma_b * p["N.scale"] + p["N.shift"]).reshape(B, 2, 4, 4)
    avg = F.avg_pool2d(bn.permute(0, 3, 1, 2), 3, 1, 1, count_include_pad=False)
    pipelines.training(m_train, Options(training=Training(gradients_only=True)))
    tr = ReferenceTrainer(m_train, seed=4)
    params = dict(tr.params, **{k: v for k, v in p.items() if k in tr.params})
    named = execute(m_train.networks()[0], dict(tr.feed(None, lr=0.0), **feed), params, torch.float64,
                    only=is_forward)
    torch.testing.assert_close(named["N"], bn, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(named["A"], avg.permute(0, 2, 3, 1), rtol=1e-10, atol=1e-10)
    # Mask: the input times the mask
    mm = _load(DATA["mask_squared_error"]["architecture"])
    pm = module_params(mm, seed=0)
    fm = _feed(mm)
    o = run_reference(mm, fm, pm, intermediates=True)
    torch.testing.assert_close(o["M"], o["F"] * fm["Input.mask"], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(o["SE.loss"], (0.5 * (o["M"] - fm["Input.targets"]) ** 2).sum() / B)


@pytest.mark.parametrize("logits", [False, True])
def test_binomial_ce_gradient_against_finite_differences(logits):
    """binomial_ce_grad (f64) equals central differences of binomial_ce's reference, also where the clip is
    active (a probability above 1: no gradient), with a seed."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(3, 4, generator=g, dtype=torch.float64) * (2.0 if logits else 0.3) + (0 if logits else 0.5)
    if not logits:
        x[0, 0] = 1.2
    t = torch.rand(3, 4, generator=g, dtype=torch.float64)
    a = {"logits": logits, "clip": 1e-6, "batch_axis": 0}
    f = lambda v: lookup("netc.binomial_ce").reference(a, [v, t], {})   # noqa: E731
    seed = torch.tensor(0.7, dtype=torch.float64)
    got = lookup("netc.binomial_ce_grad").reference(a, [x, t, seed], {})
    eps = 1e-6
    for i in range(3):
        for j in range(4):
            d = torch.zeros_like(x)
            d[i, j] = eps
            fd = 0.7 * (f(x + d) - f(x - d)) / (2 * eps)
            assert abs(float(got[i, j] - fd)) <= 1e-7 * max(1.0, abs(float(fd))), (i, j, float(got[i, j]), float(fd))
    if not logits:
        assert float(got[0, 0]) == 0.0


@pytest.mark.parametrize("net", ["xor", "spec_multi-label", "spec_regression", "mask_squared_error", "image", "decay",
                                 "mask_broadcast", "spec_regression_masked", "cfs_multi-label_lstm",
                                 "cfs_regression_conv", "cfs_multi-label_conv",
                                 "softmax_images"])
def test_new_losses_run_and_train_two_steps(net, tmp_path, capsys):
    path = tmp_path / f"{net}.json"
    path.write_text(json.dumps(DATA[net]["architecture"], indent=1))
    assert main(["run", str(path), "--reference"]) == 0
    capsys.readouterr()
    assert main(["run", str(path), "--reference", "--train", "--steps", "2"]) == 0
    assert "trained 2 steps" in capsys.readouterr().out


def _err(arch, tmp_path, capsys, n_errors=1):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(arch, indent=1))
    rc = main(["explain", str(path)])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err and "internal error" not in err
    assert err.count(": error: ") == n_errors, err
    assert "bad.json:" in err and "^" in err
    return err


def test_what_netc_cannot_express_is_refused_where_it_is(tmp_path, capsys):
    # a Mask on a classifier's loss: netc's SoftmaxLoss is already the batch mean
    arch = json.loads(json.dumps(DATA["xor"]["architecture"]))
    arch["BinomialCrossEntropy"]["@outgoing_connections"] = {"default": ["M"]}
    arch["M"] = {"@type": "Mask", "@outgoing_connections": {"default": ["Loss"]}}
    arch["Input"]["@outgoing_connections"]["default"].append("M.mask")
    err = _err(arch, tmp_path, capsys)
    assert "'BinomialCrossEntropy.default' is a loss, which netc computes as the batch mean" in err
    assert "not Mask 'M'" in err
    arch = json.loads(json.dumps(DATA["mask_broadcast"]["architecture"]))
    arch["Input"]["out_shapes"]["mask"] = ["T", "B", 3]
    err = _err(arch, tmp_path, capsys)
    assert "the mask of Mask 'M1' has the feature shape (3,); Brainstorm needs (1,), (4, 3, 1) or the input's" in err


def test_mask_broadcasts_and_squared_difference():
    """Mask with a mask per sample (1,) and per position (H, W, 1), the latter computed (a Sigmoid): x times the
    mask broadcast over the rest (Brainstorm's flatten_buffer and mult_mv), and no gradient reaches the mask;
    SquaredDifference (inputs_1 - inputs_2)^2."""
    m = _load(DATA["mask_broadcast"]["architecture"])
    kinds = {op.attrs.get("name"): op.name for op in m.networks()[0].regions[0].ops}
    assert kinds["M1"] == kinds["M2"] == "netc.mask"
    feed = _feed(m)
    o = run_reference(m, feed, module_params(m, seed=1), intermediates=True)
    x, m1 = feed["Input.default"], feed["Input.mask"]
    torch.testing.assert_close(o["M1"], x * m1.reshape(B, 1, 1, 1), rtol=0, atol=0)
    torch.testing.assert_close(o["M2"], o["M1"] * torch.sigmoid(feed["Input.pmask"]), rtol=1e-15, atol=0)
    s = _load(DATA["squared_difference"]["architecture"])
    assert {op.attrs.get("name"): op.name for op in s.networks()[0].regions[0].ops}["Q"] == "netc.squared_difference"
    f = _feed(s)
    q = run_reference(s, f, module_params(s), intermediates=True)["Q"]
    torch.testing.assert_close(q, (f["Input.default"] - f["Input.other"]) ** 2, rtol=0, atol=0)
    # the mask gets no gradient: a mask computed from a parameter would show it
    mask_op = lookup("netc.mask")
    xg = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    mg = torch.rand(2, 1, dtype=torch.float64, requires_grad=True)
    (mask_op.reference({}, [xg, mg], {}) ** 2).sum().backward()
    assert mg.grad is None
    torch.testing.assert_close(xg.grad, 2 * xg.detach() * mg.detach() ** 2, rtol=1e-14, atol=0)


def test_decay_losses_and_deltas_scaling():
    """L1Decay (sum |x| / B), L2Decay (0.5 sum x^2 / B), each with its Loss; DeltasScaling(-2) passes F on unchanged
    and multiplies the gradient coming back through it by -2: F's parameters get the L1 term's gradient plus -2 times
    the L2 term's via G, G's its own (torch.autograd over the formulas, the factor applied by hand)."""
    m = load_text(json.dumps(DATA["decay"]["architecture"]), "decay.json", batch=B)
    pipelines.training(m, Options(training=Training(gradients_only=True)))
    tr = ReferenceTrainer(m, seed=3, dtype=torch.float64)
    x = torch.randn(B, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    feed = tr.feed({"Input.default": x}, lr=0.0)
    for k in ("F.bias", "G.bias"):      # every ReLU alive: the gradient through Z reaches F
        tr.params[k].fill_(2.0)
    before = {k: v.clone() for k, v in tr.params.items()}
    named = execute(tr.net, feed, tr.params, torch.float64)    # gradients only: no update
    got = tr.gradients(named)
    w = {k: v.clone().requires_grad_(True) for k, v in before.items()}
    f = torch.relu(x @ w["F.weight"] + w["F.bias"])
    scaled = -2.0 * f + 3.0 * f.detach()            # the value f, the gradient times -2
    g = torch.relu(scaled @ w["G.weight"] + w["G.bias"])
    l1, l2, l3 = f.abs().sum() / B, 0.5 * (x ** 2).sum() / B, 0.5 * (g ** 2).sum() / B
    for name, want in (("L1.loss", l1), ("L2.loss", l2), ("L3.loss", l3)):
        torch.testing.assert_close(named[name], want, rtol=1e-12, atol=1e-12)
    ref = dict(zip(w, torch.autograd.grad(l1 + l2 + l3, list(w.values()), retain_graph=True)))
    assert set(got) == set(ref) == {"F.weight", "F.bias", "G.weight", "G.bias"}
    for k in ref:
        torch.testing.assert_close(got[k], ref[k], rtol=1e-10, atol=1e-12)
    via_z = torch.autograd.grad(l3, w["F.weight"])[0]     # (-2 times) what the L2 term sends back through Z
    assert float(via_z.abs().max()) > 1e-2


def test_bad_arguments_are_located(tmp_path, capsys):
    base = DATA["image"]["architecture"]

    def bad(**changes):
        arch = json.loads(json.dumps(base))
        for lname, kv in changes.items():
            arch[lname].update(kv)
            for k in [k for k, v in kv.items() if v is None]:
                del arch[lname][k]
        return _err(arch, tmp_path, capsys)

    assert "\"kernel_size\" of Convolution2D 'C' must be a list of two positive integers" in bad(C={"kernel_size": 3})
    assert "\"padding\" of Pooling2D 'P' must be an integer >= 0" in bad(P={"padding": -1})
    assert "\"type\" of Pooling2D 'P' must be 'max' or 'avg' (Brainstorm requires it)" in bad(P={"type": None})
    assert "\"num_filters\" of Convolution2D 'C' must be a positive integer" in bad(C={"num_filters": 0})
    assert "\"decay\" of BatchNorm 'N' must be a number in [0, 1]" in bad(N={"decay": 1.5})
    assert "activation 'el' of 'C' is not one netc knows" in bad(C={"activation": "el"})
    assert "\"importance\" of Loss 'L' is 2.0: netc has no loss weight yet" in bad(L={"importance": 2.0})
    # a Loss of two values (Brainstorm sums their concatenation): each a loss of the network, no error
    arch = json.loads(json.dumps(base))
    arch["F"]["@outgoing_connections"] = {"default": ["S", "L.default"]}
    m = load_text(json.dumps(arch), "two.json")
    decay = [op for op in m.walk() if op.name == "netc.decay_loss"]
    assert len(decay) == 1 and decay[0].attrs["name"].startswith("L.loss") and decay[0].attrs["parents"] == ["F"]
    err = bad(L={"@outgoing_connections": {"loss": ["O"]}})
    assert "'L.loss', the output of Loss 'L', is read by NoOp 'O'" in err
    # the list form on a layer without 'default': one error, located at the list, no cascade
    err = bad(S={"@outgoing_connections": ["L"]})
    assert "layer 'S' (SoftmaxCE) has no output 'default'" in err


def test_defaults_are_brainstorms():
    """Convolution2D without "activation" is tanh (its setup's default; Convolution2D() itself writes 'rel'),
    stride (1, 1), padding 0; BatchNorm decay 0.9, epsilon 1e-5."""
    arch = json.loads(json.dumps(DATA["image"]["architecture"]))
    for k in ("activation", "stride", "padding"):
        del arch["C"][k]
    for k in ("decay", "epsilon"):
        del arch["N"][k]
    arch["P"]["kernel_size"] = [1, 1]
    ops = {op.attrs.get("name"): op for op in _load(arch).networks()[0].regions[0].ops}
    c = lookup("netc.conv2d").attrs_of(ops["C"])
    assert (c["activation"], c["strides"], c["padding"]) == ("tanh", [1, 1, 1, 1], [0, 0])
    n = lookup("netc.batch_norm").attrs_of(ops["N"])
    assert (n["momentum"], n["epsilon"]) == (0.9, 1e-5)


def test_time_major_nets_refuse_what_they_cannot_do_yet(tmp_path, capsys):
    arch = json.loads(json.dumps(DATA["cfs_regression_conv"]["architecture"]))
    arch["FullyConnected"] = {"@type": "Lstm", "size": 5,
                              "@outgoing_connections": arch["FullyConnected"]["@outgoing_connections"]}
    err = _err(arch, tmp_path, capsys, n_errors=2)
    assert "Pooling2D 'Pooling2D' in a time-major network" in err
    assert "Convolution2D 'Convolution2D' in a time-major network (one with a recurrent layer) is not supported" in err
    with pytest.raises(NetcError):
        load_text(json.dumps(arch), "x.json")


def test_squared_error_per_element_masked_and_time_major():
    """Where SquaredError's loss is read per element (a Mask: tools.get_in_out_layers(..., mask_name=...)) or the net
    is time-major (an Lstm), it is Brainstorm's 0.5 (x - t)^2 and the Loss sums it / B (DecayLoss { norm: sum });
    a Loss of any value is that sum."""
    m = _load(DATA["spec_regression_masked"]["architecture"])
    feed = _feed(m)
    o = run_reference(m, feed, module_params(m, seed=2), intermediates=True)
    x, t, mask = o["Output_projection"], feed["Input.targets"], feed["Input.mask"]
    torch.testing.assert_close(o["Output.loss"], 0.5 * (x - t) ** 2, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(o["Loss.loss"], (mask * 0.5 * (x - t) ** 2).sum() / B, rtol=1e-12, atol=1e-12)
    arch = json.loads(json.dumps(DATA["spec_regression"]["architecture"]))
    arch["H"] = {"@type": "Lstm", "size": 5, "@outgoing_connections": arch["H"]["@outgoing_connections"]}
    arch["H"]["@outgoing_connections"]["default"].append("LH")
    arch["LH"] = {"@type": "Loss", "@outgoing_connections": {}}      # Brainstorm's Loss of a plain value
    m = _load(arch)
    feed = _feed(m)
    o = run_reference(m, feed, module_params(m, seed=2), intermediates=True)
    x, t = o["Output_projection"], feed["Input.targets"]
    assert tuple(x.shape) == (T, B, 3)
    torch.testing.assert_close(o["Loss.loss"], 0.5 * ((x - t) ** 2).sum() / B, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(o["LH.loss"], o["H"].sum() / B, rtol=1e-12, atol=1e-12)
