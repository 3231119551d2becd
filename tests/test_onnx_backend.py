"""netc as an ONNX backend (netc/onnx.py) against the ONNX project's own backend tests (issue 27):

* the node test cases the `onnx` package generates (onnx.backend.test.case.node: each a one-op model, its inputs
  and the outputs ONNX's reference computed), for every case whose ops netc reads (frontend/onnx.py SUPPORTED):
  each passes within the case's own tolerances or is refused with netc's located error, never a wrong answer or
  an internal one. The refusals are the skip list, in one visible place: tests/data/onnx_node_refusals.json (the
  case and netc's message; `make golden` rewrites it);
* onnx.backend.test.BackendTest on the model tests the package ships (its `light` models: AlexNet, VGG-19,
  ZFNet-512, ResNet-50, ... with constant weights, against its stored outputs), the ones netc reads."""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from netc.diagnostics import NetcError  # noqa: E402
from netc.frontend.onnx import SUPPORTED  # noqa: E402

REFUSALS = Path(__file__).parent / "data" / "onnx_node_refusals.json"


def node_cases():
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases()
    return [c for c in cases if {n.op_type for n in c.model.graph.node} <= set(SUPPORTED)]


def test_node_cases_of_the_ops_netc_reads(update_goldens):
    import netc.onnx as backend
    refused, passed, wrong = {}, [], []
    for c in node_cases():
        try:
            rep = backend.prepare(c.model)
        except NetcError as e:
            refused[c.name] = str(e).splitlines()[0][:200]
            continue
        for inputs, outputs in c.data_sets:
            got = rep.run(list(inputs))
            for g, want in zip(got, outputs):
                want = np.asarray(want)
                if g.shape != want.shape or not np.allclose(g, want, rtol=c.rtol, atol=c.atol, equal_nan=True):
                    wrong.append(c.name)
        passed.append(c.name)
    assert not wrong, f"wrong results: {sorted(set(wrong))}"
    assert len(passed) >= 50, passed
    if update_goldens:
        REFUSALS.write_text(json.dumps(dict(sorted(refused.items())), indent=1) + "\n")
    want = json.loads(REFUSALS.read_text())
    assert refused == want, {"newly refused": sorted(set(refused) - set(want)),
                             "no longer refused (update the list: make golden)": sorted(set(want) - set(refused)),
                             "other message": sorted(k for k in set(refused) & set(want) if refused[k] != want[k])}


# the package's light models: those netc reads run against the stored outputs, the others must be refused with
# netc's located error (none is now). AlexNet's two-tower (group 2) convolutions import as two each; Inception v1's
# average pool padded at the bottom and right only is a pool's [top, left, bottom, right] padding; ShuffleNet's
# channel shuffles (Reshape to [N, g, C/g, H, W], Transpose, Reshape back) are ChannelPermutes and its group-4
# convolutions four each. VGG-19 and Inception v2 pass too, but take 7 and 5 s on the f64 reference executor:
# NETC_ONNX_ALL_MODELS=1 adds them. NETC_ONNX_MODELS=a,b runs only those.
LIGHT = ("bvlc_alexnet", "zfnet512", "resnet50", "squeezenet", "inception_v1", "densenet121", "shufflenet") + \
    (("vgg19", "inception_v2") if os.environ.get("NETC_ONNX_ALL_MODELS") else ())
LIGHT = tuple(os.environ["NETC_ONNX_MODELS"].split(",")) if os.environ.get("NETC_ONNX_MODELS") else LIGHT
REFUSED_MODELS: set = set()


def test_backend_test_suite_on_the_shipped_models(tmp_path, monkeypatch):
    """onnx.backend.test.BackendTest, the ONNX project's runner, on its `light` models (constant weights,
    inputs it generates, outputs it stores)."""
    import unittest

    import netc.onnx as backend
    from onnx.backend.test import BackendTest
    monkeypatch.setenv("ONNX_HOME", str(tmp_path))      # the runner writes its inputs under $ONNX_HOME
    bt = BackendTest(backend, __name__)
    bt.include(r"^test_(" + "|".join(LIGHT) + r")_cpu$")
    suite = unittest.TestSuite()
    for case in bt.test_cases.values():
        suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(case))
    result = unittest.TextTestRunner(stream=open(os.devnull, "w"), verbosity=0).run(suite)
    errors = {t.id().rsplit(".", 1)[-1]: tb.strip().splitlines()[-1] for t, tb in result.errors + result.failures}
    ran = result.testsRun - len(result.skipped)          # the runner skips what no include pattern names
    assert ran == len(LIGHT), (ran, [t.id() for t, _ in result.errors + result.failures])
    refused = {k[len("test_"):-len("_cpu")] for k, v in errors.items() if "NetcError" in v}
    assert refused == REFUSED_MODELS, errors
    assert ran - len(errors) == len(LIGHT) - len(REFUSED_MODELS), errors
