"""On a CUDA GPU: every example and Paleo corpus network (the repository's and the two generated
from Caffe specs) compiled to a .so in each precision (f32, f32 with TF32 products, bf16, fp16),
run through netc.runtime.load at a small batch and compared with the f64 reference executor
(max |diff| <= tolerance * max |reference|, the tolerance of the precision:
netc.runtime.compare.NETWORK_TOLERANCES), with the very inputs and parameters the .so got (a
loss, an output without a batch axis, against the reference on those b samples). Plus embedded
parameters, parameter files, streams and `netc run NET.so --compare` end to end.

Marked `gpu`; skipped where torch has no CUDA (`pytest -m gpu` on the GPU machine)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.is_available())")]


def _corpus() -> list[Path]:
    for d in (os.environ.get("NETC_CORPUS"), ROOT.parent / "shared" / "corpus", ROOT / "shared" / "corpus"):
        if d and (Path(d) / "paleo").is_dir():
            return sorted((Path(d) / "paleo").glob("*.json")) + sorted((Path(d) / "paleo-generated").glob("*.json"))
    return []


NETS = sorted((ROOT / "examples").glob("*.nd")) + _corpus()
# files that cannot be compiled, and why (netc compile says so: exit 1, no traceback)
NOT_COMPILABLE = {"gan.nd": "exactly one network"}
# extra compile flags a file needs (DenseNet's converter left Caffe's BatchNorm/Accuracy as unknown types)
EXTRA = {"densenet.json": ("--opaque-as-identity",)}
# the precisions every network is checked in: compile flags
PRECISIONS = {"f32": (), "tf32": ("--tf32",), "bf16": ("--dtype", "bf16"), "fp16": ("--dtype", "fp16"),
              "tf32x3": ("--tf32x3",)}
# every network in these; 3xTF32 on a few (test_so_3xtf32_matches_reference)
ALL_NETS_PRECISIONS = ("f32", "tf32", "bf16", "fp16")
SMALL_BATCH = 2
TINY = (ROOT / "tests" / "data" / "tiny_shared_params.nd").read_text()


def _arch() -> str:
    major, minor = torch.cuda.get_device_capability()
    if major == 9:
        return "sm_90"
    if major == 8:
        return "sm_80"
    pytest.skip(f"netc compiles for sm_80 and sm_90; this GPU is sm_{major}{minor}")


def netc(*args, check=True):
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    r = subprocess.run([sys.executable, "-m", "netc", *map(str, args)], capture_output=True, text=True, cwd=ROOT,
                       env=env)
    if check:
        assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    return r


def compile_so(src, out, *extra):
    return netc("compile", src, "-o", out, "--target", "cuda", "--arch", _arch(), *extra, check=False)


def reference_of(src, net, inputs, own_precision=False):
    """The f64 reference executor on `src` (on the GPU) fed `inputs` and the parameters `net` runs
    with: batched outputs cut to the inputs' batch b, a loss over those b samples
    (netc.runtime.native.reference_outputs, what `netc run NET.so --compare` checks against).
    own_precision: the same run in the library's own precision instead (values in f16/bf16 between
    ops, TF32-truncated products: netc.runtime.compare.own_precision), --compare's second reference."""
    from netc.runtime import compare
    from netc.runtime.native import reference_outputs
    rec = net.manifest.get("source") or {}
    kw = dict(phase=rec.get("phase", "test"), load_batch=rec.get("batch"), device="cuda",
              rescaled_batch=rec.get("rescaled_batch"))
    if not own_precision:
        return reference_outputs(net, str(src), inputs, **kw)
    precision = net.manifest.get("precision") or {"dtype": "f32"}
    with compare.own_precision(precision):
        return reference_outputs(net, str(src), inputs, dtype=compare.own_precision_dtype(precision), **kw)


def rel_err(a, r) -> float:
    return float((a.double() - r.double()).abs().max()) / max(float(r.double().abs().max()), 1e-30)


@pytest.mark.parametrize("precision", ALL_NETS_PRECISIONS)
@pytest.mark.parametrize("src", NETS, ids=[p.name for p in NETS])
def test_so_matches_reference(src, precision, tmp_path):
    from netc.runtime import load
    from netc.runtime.compare import allowance, network_tolerance, within
    so = tmp_path / (src.stem + ".so")
    r = compile_so(src, so, *PRECISIONS[precision], *EXTRA.get(src.name, ()))
    if r.returncode == 1 and src.name in NOT_COMPILABLE:
        assert NOT_COMPILABLE[src.name] in r.stderr, r.stderr
        pytest.skip(f"{src.name} does not compile: {r.stderr.strip().splitlines()[0]}")
    assert r.returncode == 0, r.stderr
    with load(so, seed=0) as net:
        # a time-major library's batch is its T steps: compared at its compiled batch (reference_outputs)
        b = net.batch if any(s.steps is not None for s in net.inputs) else min(SMALL_BATCH, net.batch)
        xs = net.random_inputs(seed=0, batch=b)
        outs = net.run(xs)
        torch.cuda.synchronize()
        ref = reference_of(src, net, xs)
        low = reference_of(src, net, xs, own_precision=True)
        tol = network_tolerance(net.manifest.get("precision") or {"dtype": "f32"})
        for s in net.outputs:
            k, v = s.name, outs[s.name]
            assert tuple(v.shape) == ((b,) + s.shape[1:] if s.batched else s.shape), k
            assert not torch.isnan(v).any(), k
            err, err_low = rel_err(v, ref[k]), rel_err(low[k], ref[k])
            print(f"{src.name} {precision} {k}: max relative error {err:.2e}, the {precision} reference's "
                  f"{err_low:.2e} (batch {b} of {net.batch})")
            # --compare's rule (netc.runtime.compare.within): the tolerance plus a multiple of the error
            # the reference itself makes in the library's precision
            assert within(err, err_low, tol), (f"{src.name} ({precision}): output {k} differs from the reference: "
                                               f"{err:.3e} > {allowance(tol, err_low):.3e}")


X3_NETS = [p for p in NETS if p.name in ("lenet.nd", "alexnet.nd", "inception_v3.nd", "resnet50.json")]


@pytest.mark.parametrize("src", X3_NETS, ids=[p.name for p in X3_NETS])
def test_so_3xtf32_matches_reference(src, tmp_path):
    """`--tf32x3` (each f32 product as three TF32 products): within f32's tolerance, its fully connected
    layers as split-K products (kernels/lowering.py)."""
    test_so_matches_reference(src, "tf32x3", tmp_path)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    (d / "tiny.nd").write_text(TINY)
    r = compile_so(d / "tiny.nd", d / "tiny.so")
    assert r.returncode == 0, r.stderr
    r = compile_so(d / "tiny.nd", d / "tiny_emb.so", "--embed-params", "--seed", "5")
    assert r.returncode == 0, r.stderr
    return d


def test_full_batch_streams_and_names(tiny):
    from netc.runtime import load
    with load(tiny / "tiny.so", seed=1) as net:
        xs = net.random_inputs(seed=1)                               # the compiled batch
        a = net(xs["x"], xs["y"])
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        c = net(y=xs["y"], x=xs["x"], stream=side)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        assert set(a) == {"prob", "enc"}
        for k in a:
            assert torch.equal(a[k], c[k]), k
        ref = reference_of(tiny / "tiny.nd", net, xs)
        for k in a:
            assert rel_err(a[k], ref[k]) <= 1e-4, k
        # batch 1 gives the first sample of the full batch's result (rows are independent)
        one = net.run({k: v[:1] for k, v in xs.items()})
        for k in a:
            torch.testing.assert_close(one[k], a[k][:1], rtol=1e-5, atol=1e-6)


def test_embedded_params_and_override(tiny, tmp_path):
    from netc.runtime import load
    from netc.runtime.params import write_params
    with load(tiny / "tiny_emb.so") as emb, load(tiny / "tiny.so", seed=5) as plain:
        assert emb.manifest["params_embedded"] and not plain.manifest["params_embedded"]
        xs = emb.random_inputs(seed=2)
        e, p = emb.run(xs), plain.run(xs)
        for k in e:
            assert torch.equal(e[k], p[k]), k               # embedded = set at run time from the same seed
        emb.set_params(seed=6)                               # run-time parameters override embedded ones
        e6 = emb.run(xs)
        assert not torch.equal(e6["prob"], e["prob"])
        f = tmp_path / "p6.safetensors"
        write_params(f, emb.params())
        plain.set_params(str(f))
        p6 = plain.run(xs)
        for k in e6:
            assert torch.equal(e6[k], p6[k]), k


def test_cli_run_and_compare(tiny, tmp_path):
    r = netc("run", tiny / "tiny.so", "--compare", "--batch", "3", "--seed", "4")
    assert "prob" in r.stdout and "[3, 72]" in r.stdout
    assert "max relative error" in r.stderr
    out = tmp_path / "o.npz"
    netc("run", tiny / "tiny_emb.so", "--compare", "--output", out)
    assert out.exists()
    # the summary lines of the reference executor in f32 on the same inputs and parameters (seed 0)
    so = summary(netc("run", tiny / "tiny.so").stdout)
    ref = summary(netc("run", tiny / "tiny.nd", "--reference", "--dtype", "f32", "--phase", "test").stdout)
    assert set(so) == set(ref) == {"prob", "enc"}
    for k in so:
        assert so[k][:2] == ref[k][:2], k
        assert abs(so[k][2] - ref[k][2]) <= 1e-4 * max(1.0, abs(ref[k][2])), (k, so[k], ref[k])


def test_lenet_loss_on_the_gpu(tmp_path):
    """LeNet's scalar loss (the mean over the call's samples): `netc run --compare` at a batch below
    the compiled one, and the loss at batch b is the loss of those b samples, not of the full batch."""
    from netc.runtime import load
    so = tmp_path / "lenet.so"
    r = compile_so(ROOT / "examples/lenet.nd", so)
    assert r.returncode == 0, r.stderr
    r = netc("run", so, "--compare", "--batch", "3", "--seed", "1")
    assert "loss: max relative error" in r.stderr and "prob: max relative error" in r.stderr
    assert summary(r.stdout)["loss"][0] == "[]"
    with load(so, seed=0) as net:
        xs = net.random_inputs(seed=0)
        full = net.run(xs)
        part = net.run({k: v[:5] for k, v in xs.items()})
        torch.cuda.synchronize()
        assert full["loss"].shape == part["loss"].shape == ()
        torch.testing.assert_close(part["prob"], full["prob"][:5], rtol=1e-5, atol=1e-6)
        ref = reference_of(ROOT / "examples/lenet.nd", net, {k: v[:5] for k, v in xs.items()})
        assert rel_err(part["loss"], ref["loss"]) <= 1e-4
        assert abs(float(part["loss"]) - float(full["loss"])) > 1e-6     # another mean


def summary(text: str) -> dict:
    """netc run's lines: name -> (shape, dtype, mean)."""
    import re
    out = {}
    for ln in text.splitlines():
        m = re.match(r"(\S+)\s+(\[[^\]]*\])\s+(\S+)\s+mean=(\S+)", ln)
        assert m, ln
        out[m.group(1)] = (m.group(2), m.group(3), float(m.group(4)))
    return out


def test_bad_calls_on_the_gpu(tiny):
    from netc.runtime import load
    from netc.runtime.native import NetcInputError
    with load(tiny / "tiny.so", seed=0) as net:
        xs = net.random_inputs()
        with pytest.raises(NetcInputError, match="input 'x' is on cpu"):
            net(xs["x"].cpu(), xs["y"])
        with pytest.raises(NetcInputError, match="batch 5"):
            net(torch.zeros(5, 6, 6, 3, device="cuda"), torch.zeros(5, 16, device="cuda"))
        with pytest.raises(NetcInputError, match="dtype float16"):
            net(xs["x"].half(), xs["y"])
