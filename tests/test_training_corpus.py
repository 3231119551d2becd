"""One training step of every example and every Paleo and SINGA corpus network, scaled down,
against torch.autograd (issue 11: `netc run --train --check-grads` for all of them).

Each file is scaled the way `netc run --batch B --spatial N` does (tests/test_interp_corpus.py has
the smallest valid spatial sizes), and the big image networks also get every channel width
divisible by 8 divided by 8 (convolution outputs, inner-product outputs, class counts; the
convolutions infer their input channels), which keeps every shape rule valid and the work ~64x
smaller, so the whole corpus runs in CI; `netc run FILE --check-grads` does any of them at full
width. Networks without a loss (every Paleo file) get a softmax loss on
their output, as `--loss softmax` does; layers of unknown type (Paleo's Generic BatchNorm and
Accuracy in DenseNet, SINGA's bridges and preprocessing pass-throughs) run as the identity, as
`--opaque-as-identity` asks. Every generated parameter gradient must equal autograd's over the
forward reference to 1e-8 (relative to its largest entry), in float64.

SINGA's energy models (RBMs) learn by contrastive divergence, not a derivative (the registry's
learning_rule hook): they have no loss and are skipped here. The shared corpus lies beside the
repository (../shared/corpus); without it those cases skip.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from netc.diagnostics import DiagnosticEngine, NetcError

from scaling import narrow  # noqa: E402  (tests/scaling.py)

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
EXAMPLES = sorted((ROOT / "examples").glob("*.nd"))
PALEO = sorted(p for d in ("paleo", "paleo-generated") for p in (CORPUS / d).glob("*.json")) if CORPUS.is_dir() else []
SINGA = sorted((CORPUS / "singa").glob("*.conf")) if CORPUS.is_dir() else []

# the smallest valid spatial sizes (tests/test_interp_corpus.py proves them), None: no image input
SPATIAL = {
    "alexnet.nd": 195, "alexnet_4gpu.nd": 195, "nin.nd": 195, "vgg16.nd": 224, "inception_v3.nd": 299,
    "lenet.nd": 16, "cifar10_phases.nd": 31, "digits.nd": None, "gan.nd": None, "brainstorm_fixture.nd": None,
    "alex_v2.json": 195, "alex_v2_1gpu.json": 195, "alex_v2_2gpu.json": 195, "alex_v2_4gpu.json": 195,
    "alex_v2_8gpu.json": 195, "inception_v3.json": 299, "nin.json": 195, "overfeat.json": 231,
    "vgg16.json": 224, "densenet.json": 12, "resnet50.json": 197,
}
BATCH = {"lenet.nd": 2, "cifar10_phases.nd": 2, "gan.nd": 4, "digits.nd": 2, "brainstorm_fixture.nd": 2,
         "densenet.json": 2}
TOLERANCE = 1e-8
LOSS_ON = {"densenet.json": "SoftmaxWithLoss1"}   # two outputs (Generic Accuracy and SoftmaxWithLoss)


NARROW = 8   # the width divisor of the image networks (those with a spatial size in SPATIAL)


def _load(path: Path, batch, spatial, loss=None, phase="train", narrowed=True):
    from netc.frontend import load
    from netc.pipelines import Options, Training, training
    from netc.runtime.scale import scale_inputs
    wide = not ((spatial and spatial > 16 and path.name != "cifar10_phases.nd") or path.suffix == ".conf")
    if narrowed and not wide:
        try:
            return _load(path, batch, spatial, loss, phase, narrowed=None)
        except NetcError:   # declared parameter shapes (a SINGA autoencoder's tied weights): full width
            return _load(path, batch, spatial, loss, phase, narrowed=False)
    diag = DiagnosticEngine()
    m = load(str(path), diag)
    scale_inputs(m, batch=batch, spatial=spatial)
    if narrowed is None:
        narrow(m, NARROW)
    backward = Training(loss=loss, loss_on=LOSS_ON.get(path.name) if loss else None, gradients_only=True)
    training(m, Options(phase=phase, opaque_as_identity=True, training=backward), diag)
    return m


def _check(m, label):
    from netc.runtime.train import check_grads
    nets = [n for n in m.networks() if "gradients" in n.attrs]
    assert nets, f"{label}: nothing was differentiated"
    for net in nets:
        rows = check_grads(m, net, seed=0)
        bad = [r for r in rows if r["rel_error"] > TOLERANCE]
        assert rows and not bad, f"{label}/{net.attrs['sym_name']}: {bad}"


def _has_loss(path, phase="train"):
    from netc.frontend import load
    from netc.ops import lookup
    from netc.pipelines import Options, inference
    m = load(str(path), DiagnosticEngine())
    inference(m, Options(phase=phase))
    return any(lookup(op.name) is not None and lookup(op.name).is_loss
               for net in m.networks() for op in net.regions[0].ops)


@pytest.mark.parametrize("path", EXAMPLES + PALEO,
                         ids=lambda p: ("examples/" if p.parent.name == "examples" else p.parent.name + "/") + p.name)
def test_one_training_step_equals_autograd(path):
    name = path.name
    loss = None if path.suffix == ".nd" and _has_loss(path) else "softmax"
    m = _load(path, BATCH.get(name, 1), SPATIAL.get(name), loss)
    _check(m, name)


def _singa_cases():
    out = []
    for p in SINGA:
        out.append(pytest.param(p, id=f"singa/{p.name}"))
    return out


@pytest.mark.parametrize("path", _singa_cases())
def test_singa_training_step_equals_autograd(path):
    from netc.frontend import load
    try:
        m = load(str(path), DiagnosticEngine())
    except NetcError:
        pytest.skip("SINGA itself rejects this config (tests/test_singa.py pins the error)")
    if any(op.attrs.get("energy_model") for net in m.networks() for op in net.regions[0].ops):
        pytest.skip("an energy model (RBM): it learns by contrastive divergence, the learning_rule hook")
    try:
        has = _has_loss(path)
    except NetcError:
        pytest.skip("no train-phase network netc builds (tests/test_singa.py pins why)")
    if not has:
        pytest.skip("no loss in the training phase")
    # the batch is the network's, which the partition pass splits over the job's workers (4 in mnist_2x2)
    m = _load(path, 4 if path.name == "dev.20160313_mnist_2x2.conf" else 2, None)
    _check(m, path.name)
