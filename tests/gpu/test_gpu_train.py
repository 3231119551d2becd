"""On a CUDA GPU: the training libraries (`netc compile --train`) of every example with a loss and
every Paleo corpus network (a softmax loss appended, as `--loss softmax` does), compiled at a small
batch and run for a few steps by `netc run NET.so --train --compare`: each step of the library from
its own parameters and optimizer state against the float64 reference executor's step on the same
inputs, learning rate and dropout seed (the loss, and the parameters and state after the update,
within the f32 training tolerance: netc.runtime.compare.training_tolerance). Plus the Python API's
train_step and a checkpoint round trip.

Marked `gpu`; skipped where torch has no CUDA (`pytest -m gpu` on the GPU machine)."""
from __future__ import annotations

import pytest
import torch

from test_gpu import NOT_COMPILABLE, ROOT, _corpus, compile_so, netc

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.is_available())")]

TRAIN_BATCH = 4
STEPS = 2
# the layer the softmax loss goes on where a network has several outputs; compile flags a file needs
LOSS_ON = {"densenet.json": "SoftmaxWithLoss1"}
EXTRA = {"densenet.json": ("--opaque-as-identity",)}
# run flags a file needs: DenseNet with its unknown layers as identities and no normalization starts at a
# loss of 3,450 and diverges to NaN in one step of the default rate, on the reference too (H200, 2026-11-27)
RUN_EXTRA = {"densenet.json": ("--lr", "1e-8")}


def _nets():
    out = []
    for p in sorted((ROOT / "examples").glob("*.nd")):
        if "Loss(" in p.read_text():
            out.append(pytest.param(p, (), id=p.name))
    for p in _corpus():
        flags = ("--loss", "softmax") + (("--loss-on", LOSS_ON[p.name]) if p.name in LOSS_ON else ())
        out.append(pytest.param(p, flags + EXTRA.get(p.name, ()), id=f"{p.parent.name}/{p.name}"))
    return out


@pytest.mark.parametrize("src,flags", _nets())
def test_training_library_matches_the_reference(src, flags, tmp_path):
    so = tmp_path / (src.stem + "_train.so")
    r = compile_so(src, so, "--train", "--batch", TRAIN_BATCH, *flags)
    if r.returncode == 1 and src.name in NOT_COMPILABLE:
        assert NOT_COMPILABLE[src.name] in r.stderr, r.stderr
        pytest.skip(f"{src.name} does not compile: {r.stderr.strip().splitlines()[0]}")
    assert r.returncode == 0, r.stderr
    r = netc("run", so, "--train", "--compare", "--steps", STEPS, "--seed", 1, *RUN_EXTRA.get(src.name, ()),
             check=False)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"compared {STEPS} training steps" in r.stdout and r.stdout.rstrip().endswith(": ok")


@pytest.mark.parametrize("flag", ["--tf32x3", "--tf32"])
@pytest.mark.parametrize("name", ["lenet.nd", "alexnet.nd"])
def test_training_library_with_tensor_core_f32_products(name, flag, tmp_path):
    """`netc compile --train --tf32x3` (three TF32 products per f32 product: about f32's accuracy, judged
    by f32's training tolerance) and `--tf32` (TF32's): the library's steps against the f64 reference."""
    src = ROOT / "examples" / name
    so = tmp_path / (src.stem + "_train.so")
    loss = () if "Loss(" in src.read_text() else ("--loss", "softmax")
    r = compile_so(src, so, "--train", "--batch", TRAIN_BATCH, flag, *loss)
    assert r.returncode == 0, r.stderr
    r = netc("run", so, "--train", "--compare", "--steps", STEPS, "--seed", 1, check=False)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"compared {STEPS} training steps" in r.stdout and r.stdout.rstrip().endswith(": ok")


def test_train_step_api_and_checkpoints(tmp_path):
    """Net.train_step on CUDA tensors: the loss falls over steps on fixed inputs; get_params after a
    step, set back, gives the same next step (a checkpoint restores the optimizer state too)."""
    from netc.runtime import load
    so = tmp_path / "lenet_train.so"
    r = compile_so(ROOT / "examples/lenet.nd", so, "--train", "--optimizer", "momentum")
    assert r.returncode == 0, r.stderr
    with load(so, seed=0) as net:
        g = torch.Generator().manual_seed(0)
        xs = {}
        for s in net.train_inputs:
            xs[s.name] = (torch.randint(0, s.classes, s.shape, generator=g).to(s.dtype) if s.classes is not None
                          else torch.randn(s.shape, generator=g).to(s.dtype)).cuda()
        losses = [net.train_step(xs, 0.01, seed=k) for k in range(20)]   # 0.05 diverges (the reference too)
        assert all(v == v for v in losses) and losses[-1] < 0.5 * losses[0], losses
        ckpt = net.get_params()
        assert any(k.endswith(".velocity") for k in ckpt)
        a = net.train_step(xs, 0.01, seed=99)
        after_a = net.get_params()
        net.set_params(ckpt)
        b = net.train_step(xs, 0.01, seed=99)
        assert a == b
        for k, v in net.get_params().items():
            assert torch.equal(v, after_a[k]), k
