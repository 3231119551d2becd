"""The interpreter target: the .so's kernels, schedule and memory plan run on the CPU through
Triton's interpreter (netc/runtime/interp.py), checked against the reference executor on small
networks: conv/relu/pool chains, an inception-like block (zero-copy strided concat slices), a
residual add fused into a conv epilogue, inner product + softmax, LRN, a scaled-down AlexNet."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# the interpreter mode is fixed when netc.kernels is imported: set it at collection, before any test runs
os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

from netc.diagnostics import NetcError  # noqa: E402
from netc.frontend.dsl import parse_nd  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def _interp():
    try:
        from netc.runtime.interp import ensure_interpreter
        ensure_interpreter()
    except NetcError as e:   # netc.kernels already imported compiled in this process
        pytest.skip(str(e))


CHAIN = """network chain {
  input data: f32[2, 14, 14, 3]
  conv1 = Convolution(data) { filter: [3, 3, 3, 8], strides: [1, 1, 1, 1], padding: SAME }
  relu1 = ReLU(conv1)
  pool1 = Pooling(conv1b) { ksize: [1, 3, 3, 1], strides: [1, 2, 2, 1], padding: VALID }
  conv1b = Convolution(relu1) { filter: [3, 3, 8, 8], strides: [1, 1, 1, 1], padding: VALID, activation: relu }
  conv2 = Convolution(pool1) { filter: [3, 3, 8, 12], strides: [1, 1, 1, 1], padding: SAME, activation: relu }
  pool2 = AvgPool(conv2) { ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1], padding: SAME }
}
"""

INCEPTION = """network incep {
  input data: f32[2, 9, 9, 6]
  b0 = Convolution(data) { filter: [1, 1, 6, 4], strides: [1, 1, 1, 1], padding: SAME, activation: relu }
  b1a = Convolution(data) { filter: [1, 1, 6, 5], strides: [1, 1, 1, 1], padding: SAME, activation: relu }
  b1 = Convolution(b1a) { filter: [3, 3, 5, 6], strides: [1, 1, 1, 1], padding: SAME, activation: relu }
  b2 = Pooling(data) { ksize: [1, 3, 3, 1], strides: [1, 1, 1, 1], padding: SAME }
  b3 = Convolution(b2) { filter: [1, 1, 6, 3], strides: [1, 1, 1, 1], padding: SAME }
  cat = Concatenate(b0, b1, b3) { dim: 3 }
  head = Convolution(cat) { filter: [3, 3, 13, 7], strides: [1, 1, 1, 1], padding: VALID, activation: relu }
}
"""

RESIDUAL = """network res {
  input data: f32[2, 8, 8, 16]
  c0 = Convolution(data) { filter: [3, 3, 16, 16], strides: [1, 1, 1, 1], padding: SAME, activation: relu }
  c1 = Convolution(c0) { filter: [3, 3, 16, 16], strides: [1, 1, 1, 1], padding: SAME }
  s = Elementwise(c0, c1) { operation: sum }
  r = ReLU(s)
  out = Convolution(r) { filter: [1, 1, 16, 4], strides: [1, 1, 1, 1], padding: SAME }
  side = Convolution(c0) { filter: [1, 1, 16, 4], strides: [1, 1, 1, 1], padding: SAME }
  output out, side
}
"""

DENSE = """network dense {
  input data: f32[2, 7, 7, 4]
  ip1 = InnerProduct(data) { num_outputs: 16, activation: relu }
  ip2 = InnerProduct(ip1) { num_outputs: 10 }
  prob = Softmax(ip2)
}
"""

LRN = """network lrn {
  input data: f32[1, 10, 10, 3]
  conv1 = Convolution(data) { filter: [3, 3, 3, 12], strides: [1, 1, 1, 1], padding: SAME, activation: relu }
  norm1 = LRN(conv1) { local_size: 5, alpha: 0.05, beta: 0.75, knorm: 2.0 }
  pool1 = Pooling(norm1) { ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1], padding: VALID }
}
"""

# AlexNet (Paleo's alex_v2 layer sequence) scaled down to 32x32 inputs and a few channels
ALEXNET = """network alexnet_small {
  input data: f32[2, 32, 32, 3]
  conv1 = Convolution(data) { filter: [5, 5, 3, 16], strides: [1, 2, 2, 1], padding: VALID, activation: relu }
  norm1 = LRN(conv1) { local_size: 5, alpha: 0.001, beta: 0.75 }
  pool1 = Pooling(norm1) { ksize: [1, 3, 3, 1], strides: [1, 2, 2, 1], padding: VALID }
  conv2 = Convolution(pool1) { filter: [3, 3, 16, 16], strides: [1, 1, 1, 1], padding: SAME, activation: relu }
  pool2 = Pooling(conv2) { ksize: [1, 3, 3, 1], strides: [1, 2, 2, 1], padding: VALID }
  fc6 = Convolution(pool2) { filter: [2, 2, 16, 16], strides: [1, 1, 1, 1], padding: VALID, activation: relu }
  dropout6 = Dropout(fc6) { dropout_keep_prob: 0.5 }
  fc8 = Convolution(dropout6) { filter: [1, 1, 16, 10], strides: [1, 1, 1, 1], padding: SAME }
  softmax = Softmax(fc8) { num_classes: 10 }
}
"""


def _check(src, batch=None, seed=0):
    from netc.runtime.interp import InterpProgram, default_inputs
    from netc.runtime.reference import run_reference
    m = parse_nd(src)
    prog = InterpProgram(m, batch=batch, seed=seed)
    inputs = default_inputs(m, prog.net, seed)
    got = prog.run({k: v[:prog.batch] for k, v in inputs.items()})
    ref = run_reference(m, inputs, seed=seed)
    assert got.keys() == ref.keys()
    for k, r in ref.items():
        g = got[k]
        r = r[:prog.batch]
        assert g.dtype == torch.float32 and tuple(g.shape) == tuple(r.shape), k
        assert not torch.isnan(g).any(), f"{k}: unwritten (poisoned) values in the output"
        scale = max(float(r.abs().max()), 1e-6)
        err = float((g.double() - r).abs().max())
        assert err <= 1e-4 * scale, f"{k}: max abs error {err:.3e}, max |ref| {scale:.3e}"
    return prog


@pytest.mark.parametrize("src", [CHAIN, DENSE, LRN], ids=["conv-relu-pool", "ip-softmax", "lrn"])
def test_matches_reference(src):
    _check(src)


def test_inception_concat_is_zero_copy_and_strided():
    prog = _check(INCEPTION)
    plan = prog.plan
    cat = plan.tensor("cat")
    for n in ("b0", "b1", "b3"):
        t = plan.tensor(n)
        assert t.buffer == cat.buffer and t.alias == "concat" and t.strides is not None
    # the branches write their slices directly: no copy launches
    assert not any(":" in L.group for L in prog.launches)
    assert prog.view(plan.tensor("b1")).stride()[-2] == 13


def test_residual_add_fused_into_the_epilogue():
    prog = _check(RESIDUAL)
    groups = [L.layers for L in prog.launches]
    assert any(len(g) > 1 and "c1" in g and "s" in g for g in groups), groups


def test_alexnet_like():
    prog = _check(ALEXNET)
    assert len(prog.launches) >= 7


def test_smaller_batch_than_planned():
    _check(CHAIN, batch=1, seed=3)


def test_given_params_and_inputs():
    from netc.runtime.interp import prepare, run_interp
    from netc.runtime.reference import run_reference
    m = parse_nd(DENSE)
    prepare(m)
    decl = {p.attrs["sym_name"]: p.attrs["type"].shape for p in m.params() if "type" in p.attrs}
    g = torch.Generator().manual_seed(0)
    name = sorted(decl)[0]
    params = {name: torch.randn(*decl[name], generator=g) * 0.1}
    inputs = {"data": torch.randn(2, 7, 7, 4, generator=g)}
    got = run_interp(m, inputs, params, seed=5)
    ref = run_reference(m, inputs, params, seed=5)
    assert torch.allclose(got["prob"].double(), ref["prob"], atol=1e-6)


@pytest.mark.filterwarnings("ignore:invalid value encountered")
def test_unwritten_output_is_poisoned():
    """Drop the first launch: what reads its output sees the NaN poison, not stale or zero bytes."""
    from netc.runtime.interp import InterpProgram, default_inputs
    m = parse_nd(DENSE)
    prog = InterpProgram(m)
    inputs = default_inputs(m, prog.net)
    assert not torch.isnan(prog.run(inputs)["prob"]).any()
    prog.launches = prog.launches[1:]
    assert torch.isnan(prog.run(inputs)["prob"]).all()


def _cli(*args):
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run([sys.executable, "-m", "netc", *args], capture_output=True, text=True, cwd=ROOT, env=env)


def test_cli_run_and_compile(tmp_path):
    f = tmp_path / "dense.nd"
    f.write_text(DENSE)
    r = _cli("run", str(f), "--target", "interp", "--compare")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("prob") and "float32" in r.stdout
    err = float(r.stderr.split("max relative error")[1].split()[0])
    assert err < 1e-5
    r = _cli("compile", str(f), "--target", "interp", "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    import json
    man = json.loads((tmp_path / "out" / "dense.interp.json").read_text())
    assert man["target"] == "interp" and [s["layers"] for s in man["schedule"]] == [["ip1"], ["ip2"], ["prob"]]
