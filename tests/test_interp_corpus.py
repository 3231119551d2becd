"""The interpreter target equals the reference on every example and every Paleo corpus network.

Each network is scaled down the way `netc run --batch B --spatial N` does it (runtime/scale.py):
a small batch and, for image networks, the smallest spatial size for which the network is still
valid (SPATIAL below; test_spatial_sizes_are_the_smallest_valid proves each is the smallest).
Then the whole compiled program -- fusion groups, memory plan, the Triton kernels of the .so --
runs on the CPU through Triton's interpreter (netc/runtime/interp.py) and every output must equal
the float64 reference executor's: fp32, rtol 1e-4, atol 1e-5 * max|reference| (an fp32 result of
a deep network carries absolute rounding error proportional to its scale, not to each element).

Corpus layers of unknown types (DenseNet's BatchNorm and Accuracy: Paleo's Generic pass-throughs)
run as the identity, as `--opaque-as-identity` asks. The kernels use the "large" tile policy
(codegen/lower.py large_tiles: the same kernels with tiles as large as the problem), which makes
the interpreter 10-100x faster than the GPU tiles; tests/test_interp.py covers the GPU tiles.

Files with several networks (gan) run each; SINGA-style phases (cifar10_phases) run each phase.
The corpus lies beside the repository (../shared/corpus); without it those cases skip.
"""
from __future__ import annotations

import os
from pathlib import Path

# the interpreter mode is fixed when netc.kernels is imported: set it at collection
os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

from netc.diagnostics import DiagnosticEngine, NetcError  # noqa: E402
from scaling import narrow  # noqa: E402  (tests/scaling.py)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.nd"))
CORPUS = ROOT.parent / "shared" / "corpus"
PALEO_ALL = sorted(p for d in ("paleo", "paleo-generated") for p in (CORPUS / d).glob("*.json")) if CORPUS.is_dir() else []
# alex_v2_{1,4,8}gpu are alex_v2_2gpu with another split count: in one process the same kernels on the same
# layers (the split copies and their concatenations); their K-rank runs are tests/test_distributed.py's
SPLIT_VARIANTS = {"alex_v2_1gpu.json", "alex_v2_4gpu.json", "alex_v2_8gpu.json"}
PALEO = [p for p in PALEO_ALL if p.name not in SPLIT_VARIANTS]

# the smallest valid spatial size of each image network (None: no 4-D input); files not listed
# (a new example) get theirs from runtime.scale.smallest_spatial, a slower scan
SPATIAL = {
    "alexnet.nd": 195, "alexnet_4gpu.nd": 195, "nin.nd": 195, "vgg16.nd": 224, "inception_v3.nd": 299,
    "lenet.nd": 16, "cifar10_phases.nd": 31,   # its declared classifier weight w4 [576, 10]: 31 or 32
    "gan.nd": None, "brainstorm_fixture.nd": None,
    "alex_v2.json": 195, "alex_v2_1gpu.json": 195, "alex_v2_2gpu.json": 195, "alex_v2_4gpu.json": 195,
    "alex_v2_8gpu.json": 195, "inception_v3.json": 299, "nin.json": 195, "overfeat.json": 231,
    "vgg16.json": 224, "densenet.json": 12, "resnet50.json": 197,
}
# batch 2 where it is cheap (so samples are interleaved in the plan's batch arena), else 1
BATCH = {"lenet.nd": 2, "cifar10_phases.nd": 2, "gan.nd": 2, "brainstorm_fixture.nd": 2, "densenet.json": 2}
PHASES = {"cifar10_phases.nd": ("train", "test")}

RTOL, ATOL_SCALE = 1e-4, 1e-5


@pytest.fixture(scope="module", autouse=True)
def _interp(interp_mode):
    """Every test here runs the kernels under Triton's interpreter (tests/conftest.py)."""


# the biggest networks run with every channel width divisible by 8 divided by 8: the same kernels,
# fusion groups and plan structure at ~1/64 of the interpreter's work (their full-width forward
# takes minutes there); so do AlexNet's split variants (their splits, copies and concatenations are
# what they add: examples/alexnet.nd keeps AlexNet's full widths, as do NiN, ResNet-50 and the rest)
NARROWED = {"vgg16.nd", "vgg16.json", "overfeat.json", "inception_v3.nd", "inception_v3.json",
            "alexnet_4gpu.nd", "alex_v2.json", "alex_v2_2gpu.json"}


def _load(path: Path, phase: str, spatial=None, batch=None, narrowed=False):
    """The file through the default pipeline (+ opaque-as-identity), scaled."""
    from netc.frontend import load
    from netc.pipelines import Options, inference
    from netc.runtime.scale import scale_inputs
    diag = DiagnosticEngine()
    m = load(str(path), diag)
    scale_inputs(m, batch=batch, spatial=spatial)
    if narrowed:
        narrow(m)
    inference(m, Options(phase=phase, opaque_as_identity=True), diag)
    return m, diag


def _cases():
    out = []
    for p in EXAMPLES + PALEO:
        for ph in PHASES.get(p.name, ("train",)):
            tag = "examples" if p.parent.name == "examples" else p.parent.name
            out.append(pytest.param(p, ph, id=f"{tag}/{p.name}" + (f"[{ph}]" if p.name in PHASES else "")))
    return out


def _check_network(m, net_name, phase, params, seed=0):
    """Run one network of `m` on the interpreter and the reference with the same inputs and
    parameters; every output must match. Returns the InterpProgram."""
    from netc.runtime.interp import InterpProgram, default_inputs
    from netc.runtime.reference import run_reference
    prog = InterpProgram(m, net_name, seed=seed, phase=phase, blocks="large", params=params)
    inputs = default_inputs(m, prog.net, seed)
    got = prog.run(inputs)
    ref = run_reference(m, inputs, params, network=prog.net, seed=seed)
    assert got.keys() == ref.keys() and got, (sorted(got), sorted(ref))
    for k, r in ref.items():
        g = got[k]
        assert g.dtype == torch.float32 and tuple(g.shape) == tuple(r.shape), k
        assert not torch.isnan(g).any(), f"{net_name}/{k}: NaN in the output (a value the schedule never wrote?)"
        scale = float(r.abs().max()) if r.numel() else 0.0
        torch.testing.assert_close(g.double(), r.double(), rtol=RTOL, atol=ATOL_SCALE * scale,
                                   msg=lambda s, k=k: f"{net_name}/{k}: {s}")
    return prog


def _spatial(path: Path, phase: str):
    """SPATIAL's size, or for a file not listed there (a new example), the smallest valid one."""
    if path.name in SPATIAL:
        return SPATIAL[path.name]
    from netc.frontend import load
    from netc.runtime.scale import smallest_spatial
    m = load(str(path), DiagnosticEngine())
    if not any(op.name == "netc.input" and len(op.attrs.get("shape") or []) == 4
               for net in m.networks() for op in net.regions[0].ops):
        return None
    return smallest_spatial(lambda: load(str(path), DiagnosticEngine()), phase=phase)


@pytest.mark.parametrize("path,phase", _cases())
def test_interp_equals_reference(path, phase):
    from netc.runtime.reference import module_params
    batch = BATCH.get(path.name, 1)
    m, _ = _load(path, phase, _spatial(path, phase), batch, narrowed=path.name in NARROWED)
    # one set of parameters for both executors, drawn once as run_reference draws them (VGG-16
    # has 1.4e8 of them)
    params = module_params(m, None, 0, torch.float64)
    for net in m.networks():
        prog = _check_network(m, net.attrs["sym_name"], phase, params)
        # a time-major network (inputs [T, B, ...] with batch_axis 1) is compiled with T as its batch
        steps = {op.attrs["shape"][0] for op in net.regions[0].ops
                 if op.name == "netc.input" and op.attrs.get("batch_axis") == 1}
        assert prog.batch == (steps.pop() if len(steps) == 1 else batch) and prog.launches


@pytest.mark.parametrize("name", sorted(n for n, s in SPATIAL.items() if s))
def test_spatial_sizes_are_the_smallest_valid(name):
    path = next((p for p in EXAMPLES + PALEO_ALL if p.name == name), None)
    if path is None:
        pytest.skip(f"{name} is not here (the shared corpus is not beside the repository)")
    n = SPATIAL[name]
    _load(path, "train", n)                       # valid
    with pytest.raises(NetcError):
        _load(path, "train", n - 1)               # one smaller is not

