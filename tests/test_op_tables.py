"""Op facts live on the op (OpDef traits) or in tables keyed by op, not in if-chains over op names
spread over the passes and runtimes (docs/architecture.md): the tables agree with the registry, and
the op-name comparisons left outside ops/, kernels/, frontend/ and ir/ are listed here, each with why."""
from __future__ import annotations

import re
from pathlib import Path

from netc.ops import lookup
from netc.ops.comm import COLLECTIVE_OPS, COMM_OPS

ROOT = Path(__file__).resolve().parents[1]

# Structural ops (the IR's skeleton, not layers) may be named anywhere.
STRUCTURAL = ("input", "output", "param", "network", "layout", "block", "parallel")

# file -> (how many comparisons with a layer op's name it may hold, why). The counts may only shrink:
# a new op fact goes on the OpDef (ops/registry.py) or in a table keyed by op.
ALLOWED = {
    "netc/runtime/distributed.py": (4, "send/recv in a message's wording; a bucket of all-reduces runs as one"),
    "netc/runtime/run.py": (1, "the warning for layers of unknown type (netc.opaque)"),
    "netc/export/paleo.py": (1, "an unknown layer (netc.opaque) is written back under its own type"),
    "netc/export/singa.py": (8, "SINGA layers the SINGA front end expands into several ops (kSoftmaxLoss, "
                                "kRBMVis/kRBMHid, unrolled GRU, kSlice, kBM's four parameters), recovered"),
    "netc/explain.py": (4, "unknown layers' types; the global norm of clipping is an update; sends matched "
                           "with recvs"),
    "netc/passes/opaque_as_identity.py": (2, "the pass rewrites netc.opaque"),
    "netc/passes/split_workers.py": (6, "the ops the pass itself inserts (scale, recv, broadcast, its gradient sums)"),
    "netc/passes/backward.py": (3, "unknown layers in its errors; --loss softmax replaces a softmax by the loss"),
}

_CMP = re.compile(r"\.name ?(?:==|!=) ?\"netc\.([a-z_0-9]+)\"|\.name (?:not )?in \(([^)]*)\)")


def _comparisons(text: str) -> int:
    n = 0
    for m in _CMP.finditer(text):
        names = [m.group(1)] if m.group(1) else re.findall(r"\"netc\.([a-z_0-9]+)\"", m.group(2))
        n += sum(1 for x in names if x not in STRUCTURAL)
    return n


def test_op_name_comparisons_stay_where_they_are_listed():
    found = {}
    for f in sorted((ROOT / "netc").rglob("*.py")):
        rel = f.relative_to(ROOT).as_posix()
        if rel.startswith(("netc/ops/", "netc/kernels/", "netc/frontend/", "netc/ir/")):
            continue
        n = _comparisons(f.read_text())
        if n:
            found[rel] = n
    over = {f: n for f, n in found.items() if n > ALLOWED.get(f, (0, ""))[0]}
    assert not over, (f"comparisons with op names beyond the allow-list: {over}; put the fact on the OpDef "
                      f"(ops/registry.py) or in a table keyed by op")
    stale = {f: (ALLOWED[f][0], found.get(f, 0)) for f in ALLOWED if found.get(f, 0) < ALLOWED[f][0]}
    assert not stale, f"fewer comparisons than allowed (lower the counts in ALLOWED): {stale}"


def test_the_checker_sees_a_new_comparison():
    assert _comparisons('if op.name == "netc.softmax_loss":\n') == 1
    assert _comparisons('if op.name in ("netc.relu", "netc.output"):\n') == 1
    assert _comparisons('if op.name == "netc.input":\n') == 0


def test_the_distributed_runtime_runs_every_communication_op():
    from netc.runtime.distributed import Comm
    assert set(Comm.RUNS) == set(COMM_OPS)
    assert set(COLLECTIVE_OPS) <= set(COMM_OPS)
    for name in COMM_OPS:
        assert lookup(name) is not None, name


def test_classifier_losses_name_their_labels():
    from netc.ops import all_ops
    classifiers = [d for d in all_ops() if d.classifier]
    assert [d.name for d in classifiers] == ["softmax_loss"]
    assert all(d.is_loss and d.label_operand is not None for d in classifiers)


def test_batch_norm_folds_its_running_statistics_for_inference():
    import torch
    d = lookup("netc.batch_norm")
    sc, sh = torch.tensor([2.0, 3.0], dtype=torch.float64), torch.tensor([0.5, -1.0], dtype=torch.float64)
    mean, var = torch.tensor([1.0, -2.0], dtype=torch.float64), torch.tensor([3.0, 0.25], dtype=torch.float64)
    out = d.inference_params({"epsilon": 1e-5, "momentum": 0.9}, {"scale": sc, "shift": sh},
                             {"running_mean": mean, "running_var": var})
    x = torch.tensor([[0.3, 0.7]], dtype=torch.float64)
    want = (x - mean) / torch.sqrt(var + 1e-5) * sc + sh
    assert torch.allclose(x * out["scale"] + out["shift"], want, rtol=0, atol=1e-12)
    assert d.inference_params({"epsilon": 1e-5}, {"scale": sc, "shift": sh}, {}) == {}
    assert lookup("netc.conv2d").inference_params({}, {}, {}) == {}
