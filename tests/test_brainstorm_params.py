"""Brainstorm's parameter files (Network.save_as_hdf5: `description` and the flat `parameters` buffer) read as
netc's parameters (frontend/brainstorm_params.py, `--params net.h5`; issue 25). The files are written here in
Brainstorm's format with h5py; the oracles are Brainstorm's own: its forward pass recorded by its NumpyHandler
(tests/data/brainstorm_ops_runs.json), its layouts (tests/data/brainstorm_layouts.json), and its formulas
(convolution, batch normalization's inference) written here in torch."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

h5py = pytest.importorskip("h5py")

from netc.diagnostics import NetcError  # noqa: E402
from netc.frontend import load_text  # noqa: E402
from netc.pipelines import inference  # noqa: E402
from netc.runtime import module_params  # noqa: E402
from netc.runtime.params import read_params  # noqa: E402
from netc.runtime.reference import run_reference  # noqa: E402

DATA = Path(__file__).parent / "data"
NETS = json.loads((DATA / "brainstorm_layouts.json").read_text())["nets"]
FORWARD = json.loads((DATA / "brainstorm_ops_runs.json").read_text())["forward"]


def save_as_hdf5(path, arch, flat):
    """What Brainstorm's Network.save_as_hdf5 writes: its description (JSON, the architecture inside) and the
    flat parameter buffer."""
    with h5py.File(path, "w") as f:
        f["description"] = json.dumps({"@type": "Network", "architecture": arch, "output_name": None}).encode()
        f["parameters"] = np.asarray(flat, dtype=np.float64)
    return path


def flat_of(net, seed=0):
    n = NETS[net]["layout"]["parameters"]["@shape"][0]
    return np.random.default_rng(seed).uniform(-0.8, 0.8, n)


def views(net, flat):
    """Brainstorm's parameter views of `net` (its recorded layout: @slice, @shape), by layer."""
    lay = NETS[net]["layout"]
    return {lname: {k: flat[v["@slice"][0]:v["@slice"][1]].reshape(v["@shape"])
                    for k, v in lay[lname]["parameters"].items() if isinstance(v, dict) and "@slice" in v}
            for lname in NETS[net]["architecture"]}


@pytest.mark.parametrize("net", sorted(FORWARD))
def test_a_file_brainstorm_wrote_gives_brainstorms_forward_pass(net, tmp_path):
    """Brainstorm's recorded forward pass (NumpyHandler, float64) from netc's reference run with the parameters
    read from the file: Highway, Merge, FullyConnected, the ClockworkLstm, Recurrent and what reads them."""
    fw, arch = FORWARD[net], NETS[net]["architecture"]
    params = read_params(save_as_hdf5(tmp_path / "net.h5", arch, fw["parameters"]))
    time_major = any(s["@type"] in ("ClockworkLstm", "Recurrent", "Lstm", "Clockwork") for s in arch.values())
    t, b = fw["T"], fw["B"]
    m = load_text(json.dumps(arch), f"{net}.json", batch=b if time_major else t * b,
                  options={"time": t if time_major else 1})
    inference(m)
    names = set(module_params(m))
    assert {n for n in names if not n.startswith("BN.")} <= set(params), sorted(names - set(params))
    feed = {f"Input.{k}": torch.tensor(v, dtype=torch.float64) for k, v in fw["inputs"].items()}
    if not time_major:
        feed = {k: v.reshape((t * b,) + tuple(v.shape[2:])) for k, v in feed.items()}
    got = run_reference(m, feed, {**module_params(m), **{k: v for k, v in params.items() if k in names}},
                        intermediates=True)
    checked = 0
    for path, want in fw["outputs"].items():
        lname, out = path.split(".")
        if arch[lname]["@type"] in ("Input", "Loss", "BatchNorm", "L1Decay", "L2Decay") or out == "loss":
            continue
        want = torch.tensor(want, dtype=torch.float64)[:t]
        g = got[lname if out == "default" else path].reshape(want.shape)
        torch.testing.assert_close(g, want, rtol=1e-9, atol=1e-12)
        checked += 1
    assert checked >= 3


@pytest.mark.parametrize("net", ["image", "softmax_images", "cifar10_cnn", "cfs_regression_conv"])
def test_convolutions_and_products_compute_brainstorms_formulas(net, tmp_path):
    """Each Convolution2D's output from the file's parameters equals Brainstorm's formula (out[b, y, x, f] = sum
    W[f, i, j, c] in[b, y s + i - p, x s + j - p, c] + bias[f], torch's conv2d here) on netc's own input to it, and
    each FullyConnected's W (out, in) is netc's weight transposed."""
    arch, flat = NETS[net]["architecture"], flat_of(net, 1)
    params = read_params(save_as_hdf5(tmp_path / "net.h5", arch, flat))
    bs = views(net, flat)
    m = load_text(json.dumps(arch), f"{net}.json", batch=2)
    inference(m)
    got = run_reference(m, None, {**module_params(m), **{k: v for k, v in params.items() if k in module_params(m)}},
                        intermediates=True)      # random inputs (class targets below the classes)
    ops = {op.attrs.get("name"): op for op in m.networks()[0].regions[0].ops}
    convs = 0
    for lname, spec in arch.items():
        if spec["@type"] == "Convolution2D":
            x = got[ops[lname].operands[0].owner.attrs["name"]]
            w, bias = torch.tensor(bs[lname]["W"]), torch.tensor(bs[lname]["bias"])
            s, p = spec.get("stride", [1, 1]), spec.get("padding", 0)
            want = torch.nn.functional.conv2d(x.permute(0, 3, 1, 2), w.permute(0, 3, 1, 2), bias, stride=s, padding=p)
            act = spec.get("activation", "rel")
            want = {"rel": torch.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "linear": lambda v: v}[act](want)
            torch.testing.assert_close(got[lname], want.permute(0, 2, 3, 1), rtol=1e-9, atol=1e-12)
            convs += 1
        elif spec["@type"] == "FullyConnected":
            name = f"{lname}.weight" if f"{lname}.weight" in params else f"{lname}.flat.weight"
            assert torch.equal(params[name], torch.tensor(bs[lname]["W"]).T)
    assert convs >= 1


def test_batch_norm_reads_brainstorms_running_statistics(tmp_path):
    """Brainstorm keeps the negated running mean (mu) and the running sqrt(var + epsilon) (sigma) and, at
    inference, computes (x + mu) / sigma * gamma + beta; netc's running statistics give the same."""
    net = "cfs_regression_conv"
    arch = NETS[net]["architecture"]
    flat = flat_of(net, 2)
    bs = views(net, flat)["BatchNorm"]
    bs_sigma = np.abs(bs["sigma"]) + 0.5
    sl = NETS[net]["layout"]["BatchNorm"]["parameters"]["sigma"]["@slice"]
    flat[sl[0]:sl[1]] = bs_sigma
    params = read_params(save_as_hdf5(tmp_path / "net.h5", arch, flat))
    eps = arch["BatchNorm"].get("epsilon", 1e-5)
    x = torch.randn(5, 4, dtype=torch.float64)
    mean, var = params["BatchNorm.running_mean"], params["BatchNorm.running_var"]
    netc = (x - mean) / torch.sqrt(var + eps) * params["BatchNorm.scale"] + params["BatchNorm.shift"]
    brainstorm = (x + torch.tensor(bs["mu"])) / torch.tensor(bs_sigma) * torch.tensor(bs["gamma"]) + torch.tensor(bs["beta"])
    torch.testing.assert_close(netc, brainstorm, rtol=1e-12, atol=1e-12)


def test_netc_run_takes_a_brainstorm_parameter_file(tmp_path, capsys):
    from netc.cli import main
    arch = NETS["xor"]["architecture"]
    arch_file = tmp_path / "xor.json"
    arch_file.write_text(json.dumps(arch))
    h5 = save_as_hdf5(tmp_path / "xor.h5", arch, flat_of("xor"))
    x = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=np.float32)
    t = np.array([[0], [1], [1], [0]], dtype=np.float32)
    np.savez(tmp_path / "in.npz", **{"Input.default": x, "Input.targets": t})
    assert main(["run", str(arch_file), "--reference", "--params", str(h5), "--batch", "4", "--inputs",
                 str(tmp_path / "in.npz"), "-o", str(tmp_path / "out.npz")]) == 0
    # the file's values are the ones used: Brainstorm's XOR net by hand (sigmoid layers, W (out, in), the
    # binomial cross-entropy summed and divided by the batch)
    v = views("xor", flat_of("xor"))
    sig = lambda a: 1 / (1 + np.exp(-a))   # noqa: E731
    h = sig(x @ v["FullyConnected"]["W"].T + v["FullyConnected"]["bias"])
    y = sig(h @ v["OutLayer"]["W"].T + v["OutLayer"]["bias"])
    want = -(t * np.log(y) + (1 - t) * np.log(1 - y)).sum() / 4
    out = np.load(tmp_path / "out.npz")
    (loss,) = [out[k] for k in out.files if "oss" in k or "Cross" in k][:1]
    assert abs(float(loss) - want) < 1e-5 * abs(want), (out.files, float(loss), want)


def test_bad_files_are_clear_errors(tmp_path, monkeypatch):
    arch = NETS["xor"]["architecture"]
    short = save_as_hdf5(tmp_path / "short.h5", arch, flat_of("xor")[:-1])
    with pytest.raises(NetcError, match=r"holds 8 parameter values; its architecture's layout has 9"):
        read_params(short)
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f["weights"] = np.zeros(3)
    with pytest.raises(NetcError, match="without description and parameters"):
        read_params(tmp_path / "other.h5")
    monkeypatch.setitem(sys.modules, "h5py", None)
    with pytest.raises(NetcError, match=r"needs the h5py package: pip install 'netc\[brainstorm\]'"):
        read_params(short)
