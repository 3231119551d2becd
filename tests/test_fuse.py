"""The fuse pass: groups printed as `fusion_group` / `fusion_anchor` attributes (netc opt -p fuse)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from cli_inprocess import netc_interp

ROOT = Path(__file__).resolve().parents[1]

RES = """
network res {
  input data: f32[8, 16, 16, 32]
  conv1 = Convolution(data) { filter: [3, 3, 32, 32], padding: SAME }
  bn1 = BatchNorm(conv1)
  add1 = Elementwise(bn1, data) { operation: sum }
  relu1 = ReLU(add1)
  conv2 = Convolution(relu1) { filter: [1, 1, 32, 32], activation: relu }
  bn2 = BatchNorm(conv2)
  r2 = ReLU(bn2)
  s2 = Sigmoid(r2)
  pool = Pooling(s2) { ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1] }
  fc = InnerProduct(pool) { num_outputs: 10 }
  t = Tanh(fc)
  out = Softmax(t)
}
"""

SHARED = """
network shared {
  input data: f32[4, 8, 8, 16]
  conv1 = Convolution(data) { filter: [3, 3, 16, 16] }
  r1 = ReLU(conv1)
  r2 = Sigmoid(conv1)
  sum = Elementwise(r1, r2) { operation: sum }
  late = Convolution(data) { filter: [1, 1, 16, 16] }
  add = Elementwise(late, sum) { operation: sum }
}
"""


def groups(text: str, tmp_path) -> dict:
    f = tmp_path / "net.nd"
    f.write_text(text)
    r = subprocess.run([sys.executable, "-m", "netc", "opt", str(f), "-p", "fuse", "--no-locs"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    out = {}
    for line in r.stdout.splitlines():
        m = re.search(r'\{name = "([^"]+)".*fusion_anchor = "([^"]+)", fusion_group = "(g\d+)"', line)
        if m:
            out[m.group(1)] = (m.group(3), m.group(2))
    return out


def test_conv_epilogue_and_chains(tmp_path):
    g = groups(RES, tmp_path)
    # conv1 + bn + residual add (data is defined before conv1) + relu: one group anchored at conv1
    assert {g[n] for n in ("conv1", "bn1", "add1", "relu1")} == {(g["conv1"][0], "conv1")}
    # conv2 already applies relu: bn2 cannot follow the activation, so bn2 starts a pointwise chain
    assert g["conv2"][1] == "conv2" and g["bn2"][0] != g["conv2"][0]
    assert g["bn2"][0] == g["r2"][0] == g["s2"][0] and g["s2"][1] == "bn2"
    assert g["fc"][0] == g["t"][0] and g["t"][1] == "fc"
    # everything else is its own group
    assert len({g["pool"][0], g["out"][0], g["fc"][0], g["conv1"][0], g["bn2"][0], g["conv2"][0]}) == 6


def test_no_fusion_into_shared_results_or_late_operands(tmp_path):
    g = groups(SHARED, tmp_path)
    assert g["conv1"][0] not in (g["r1"][0], g["r2"][0])      # conv1 has two users
    assert g["r1"][0] != g["r2"][0]
    assert g["r1"][0] == g["sum"][0] and g["sum"][1] == "r1"   # a pointwise chain r1 -> sum (r2 is its operand)
    # `late` + `sum`: the residual operand `sum` is computed after the anchor `late`: not fused
    assert g["late"][0] != g["add"][0]


def test_alexnet_groups_and_roundtrip(tmp_path):
    r = subprocess.run([sys.executable, "-m", "netc", "opt", "examples/alexnet.nd", "-p", "fuse"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert 'name = "conv1", activation = "relu", filter' in r.stdout
    assert r.stdout.count("fusion_group") == 14
    import netc.ops  # noqa: F401  (registers the dialect the parser checks op names against)
    from netc.ir.parser import parse_ir
    from netc.ir.printer import print_ir
    m = parse_ir(r.stdout, "alexnet.mlir")
    assert print_ir(m) == r.stdout


@pytest.mark.parametrize("example", ["inception_v3.nd", "vgg16.nd", "lenet.nd", "nin.nd"])
def test_examples_fuse(example):
    r = subprocess.run([sys.executable, "-m", "netc", "opt", f"examples/{example}", "-p", "fuse", "--no-locs"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "fusion_group" in r.stdout


# ------------------------------------------------------------------ fusion groups in the memory plan

BOTTLENECK = """
network bottleneck {
  input data: f32[2, 6, 6, 8]
  x0 = Convolution(data) { filter: [1, 1, 8, 8], activation: relu }
  a1 = Convolution(x0) { filter: [1, 1, 8, 8], activation: relu }
  c1 = Convolution(a1) { filter: [3, 3, 8, 8], padding: SAME }
  b1 = BatchNorm(c1)
  s1 = Elementwise(b1, x0) { operation: sum }
  x1 = ReLU(s1)
  p = Sigmoid(x1)
  q = Tanh(p)
  y = Elementwise(q, x1) { operation: sum }
  d = Dropout(y)
  c2 = Convolution(y) { filter: [3, 3, 8, 8], padding: SAME }
  s2 = Elementwise(c2, d) { operation: sum }
  out = Convolution(s2) { filter: [1, 1, 8, 4] }
}
"""


def _fused_and_planned(path_or_text, name="net.nd"):
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load, load_text
    from netc.pipelines import Options, Plan, compile
    diag = DiagnosticEngine()
    m = load(str(path_or_text), diag) if isinstance(path_or_text, Path) else load_text(path_or_text, name)
    ctx = compile(m, Options(phase="test"), diag, plan=Plan())     # fuse, then plan-memory
    return m, ctx.notes["memory_plan"]


def _no_group_needs_splitting(m, plans):
    """Every fusion group is one step of its network's plan and check_group (what codegen splits
    on) finds nothing; where every op has a kernel, lowering reports no split."""
    from netc.codegen.lower import CodegenError, check_group, lower_network
    from netc.ir.core import STRUCTURAL_OPS
    multi = 0
    for net in m.networks():
        plan = plans[net.attrs["sym_name"]]
        assert plan.fusion
        groups = {}
        for op in net.regions[0].ops:
            if op.name not in STRUCTURAL_OPS and op.name != "netc.input":
                groups.setdefault(op.attrs["fusion_group"], []).append(op)
        assert sorted(s.layers for s in plan.steps) == sorted([o.attrs["name"] for o in g] for g in groups.values())
        tensors = {t.name: t for t in plan.tensors}
        step_of = {n: s.index for s in plan.steps for n in s.layers}
        for g, members in groups.items():
            assert check_group(members, plan, tensors, step_of, plan.steps) is None, g
            multi += len(members) > 1
        try:
            low = lower_network(m, net, plan)
        except CodegenError as e:
            assert "no CUDA kernel" in str(e)       # a loss: the network cannot be lowered at all
            continue
        assert low.splits == []
        assert all(L.layers == plan.steps[L.step - 1].layers for L in low.launches)
    return multi


@pytest.mark.parametrize("example", sorted(p.name for p in (ROOT / "examples").glob("*.nd")))
def test_lowering_every_example_splits_no_group(example):
    m, plans = _fused_and_planned(ROOT / "examples" / example)
    _no_group_needs_splitting(m, plans)


def test_lowering_fused_residual_nets_splits_no_group():
    for text in (RES, SHARED, BOTTLENECK):
        m, plans = _fused_and_planned(text)
        assert _no_group_needs_splitting(m, plans) >= 1
    resnet = ROOT.parent / "shared" / "corpus" / "paleo-generated" / "resnet50.json"
    if resnet.exists():
        m, plans = _fused_and_planned(resnet)
        assert _no_group_needs_splitting(m, plans) == 16      # every residual add in a conv epilogue


def test_fused_plan_writes_over_the_residual_not_the_window():
    """The bottleneck block's group c1+b1+s1+x1 reads a1 through 3x3 windows and x0 element for
    element: its result goes over x0 (dying there), never over a1; the chain p+q+y goes over x1.
    c2+s2 reads d element for element, but d is y's bytes (dropout) and c2 reads y's windows:
    s2 goes elsewhere. The intermediates c1, b1, s1, p, q, c2 take no bytes."""
    m, plans = _fused_and_planned(BOTTLENECK)
    plan = plans["bottleneck"]
    t = plan.tensor
    assert [s.layers for s in plan.steps] == [["x0"], ["a1"], ["c1", "b1", "s1", "x1"], ["p", "q", "y"], ["d"],
                                              ["c2", "s2"], ["out"]]
    assert all(t(n).fused and t(n).buffer == -1 for n in ("c1", "b1", "s1", "p", "q", "c2"))
    g = plan.steps[2]
    assert g.action == "inplace" and t("x1").buffer == t("x0").buffer and t("x1").buffer != t("a1").buffer
    assert plan.steps[3].action == "inplace" and t("y").buffer == t("x1").buffer
    assert plan.steps[5].action == "kernel" and t("s2").buffer != t("y").buffer == t("d").buffer
    from netc.memory.plan import plan_memory
    unfused = plan_memory(m, fusion="none")
    assert plan.arenas[1].size < unfused.arenas[1].size


def test_fused_plan_runs_on_the_interpreter(tmp_path):
    """The interpreter executes the lowered schedule on a NaN-poisoned arena laid out by the
    fused plan (results written over residuals, no intermediates): it matches the reference."""
    f = tmp_path / "bottleneck.nd"
    f.write_text(BOTTLENECK)
    r = netc_interp("run", f, "--target", "interp", "--compare")
    assert r.returncode == 0, r.stderr
    err = float(r.stderr.split("max relative error")[1].split()[0])
    assert err < 1e-5, r.stderr
    r = netc_interp("compile", f, "--target", "interp", "-o", tmp_path / "m.json")
    assert r.returncode == 0, r.stderr
    import json
    man = json.loads((tmp_path / "m.json").read_text())
    assert man["splits"] == [] and man["memory"]["fusion"] and man["memory"]["fused_tensors"] == 6
    assert [s["layers"] for s in man["schedule"]] == [["x0"], ["a1"], ["c1", "b1", "s1", "x1"], ["p", "q", "y"],
                                                      ["c2", "s2"], ["out"]]


ACT_GRADS = """
network act_grads {
  input data: f32[4, 8, 8, 3]
  input label: i32[4]
  conv1 = Convolution(data) { filter: [3, 3, 3, 8], strides: [1, 2, 2, 1], padding: SAME, activation: relu }
  pool0 = Pooling(conv1) { ksize: [1, 2, 2, 1], strides: [1, 1, 1, 1], padding: SAME }
  conv2 = Convolution(pool0) { filter: [3, 3, 8, 8], padding: SAME, activation: tanh }
  conv3 = Convolution(conv2) { filter: [3, 3, 8, 8], padding: SAME }
  s3 = Sigmoid(conv3)
  pool = Pooling(s3) { ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1] }
  r4 = ReLU(pool) { negative_slope: 0.1 }
  fc1 = InnerProduct(r4) { num_outputs: 12 }
  t1 = Tanh(fc1)
  fc2 = InnerProduct(t1) { num_outputs: 5 }
  loss = SoftmaxLoss(fc2, label)
}
"""


def test_activation_gradients_fold_into_data_gradient_epilogues_and_single_prologues(tmp_path):
    """In a training program an activation gradient joins the data gradient that computes its dy (an
    epilogue: conv and inner-product data gradients, 2-D and 4-D); else, read by one gradient GEMM
    only, that GEMM's prologue (conv1, bias frozen, below a pooling); else (three readers) it is
    stored. The program prints, re-parses, and trains on the interpreter as the reference does."""
    f = tmp_path / "net.nd"
    f.write_text(ACT_GRADS)
    r = subprocess.run([sys.executable, "-m", "netc", "opt", str(f), "--train", "-p", "fuse", "--no-locs",
                        "--freeze", "conv1.bias"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    ops = {}
    for line in r.stdout.splitlines():
        m = re.search(r'= "(netc\.[a-z_0-9]+)"\((.*?)\) \{name = "([^"]+)"', line)
        a = re.search(r'fusion_anchor = "([^"]+)", fusion_group = "(g\d+)"', line)
        if m and a:
            ops[m.group(3)] = (m.group(1), a.group(2), a.group(1))
    groups = {}
    for n, (op, g, anchor) in ops.items():
        groups.setdefault(g, []).append((op, n))
    act = {n for n, v in ops.items() if v[0] == "netc.activation_grad"}
    folded = {n: sorted(groups[ops[n][1]]) for n in act if len(groups[ops[n][1]]) > 1}
    # epilogues: fc1's tanh (2-D), r4's leaky ReLU (fc1's 4-D input), conv2's tanh, and conv1's ReLU
    # would be too, but conv1's data gradient (of pool0) is a max-pool gradient: conv1's ReLU runs in
    # the prologue of its one reader, the filter gradient (its bias is frozen)
    assert folded == {
        "fc1.grad": [("netc.activation_grad", "fc1.grad"), ("netc.inner_product_grad_data", "t1.grad")],
        "pool.grad": [("netc.activation_grad", "pool.grad"), ("netc.inner_product_grad_data", "r4.grad")],
        "conv2.act_grad": [("netc.activation_grad", "conv2.act_grad"), ("netc.conv2d_grad_data", "conv2.grad")],
        "conv1.act_grad": [("netc.activation_grad", "conv1.act_grad"),
                           ("netc.conv2d_grad_filter", "conv1.weight.grad")]}
    assert ops["conv1.act_grad"][2] == "conv1.weight.grad" and ops["t1.grad"][2] == "t1.grad"
    assert act - set(folded) == {"conv3.grad"}      # sigmoid's: dy from the max-pool gradient, three readers
    import netc.ops  # noqa: F401
    from netc.ir.parser import parse_ir
    from netc.ir.printer import print_ir
    assert print_ir(parse_ir(r.stdout, "p.mlir"), with_locs=False) == r.stdout
    r = netc_interp("run", f, "--train", "--target", "interp", "--steps", "2", "--compare", "--optimizer", "adam",
                    "--interp-blocks", "large", "--freeze", "conv1.bias")
    assert r.returncode == 0, r.stderr
    assert "on the interpreter target: ok" in r.stdout
