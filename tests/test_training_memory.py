"""Memory plans of whole training steps (forward, backward, update): classes, in-place updates and
their order, gradients reusing bytes, recomputation under a budget (the rematerialize pass), the
planned executor's stale-read test, and `netc explain --train --memory`. Every plan is verified."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netc.cli import main
from netc.diagnostics import DiagnosticEngine
from netc.frontend import load, load_text
from netc.memory import BATCH, CONSTANT, plan_memory, verify_plan
from netc.memory.model import PlanError
from netc import pipelines
from netc.pipelines import Options, Training
from netc.runtime.planned import PlannedProgram, PlannedTrainer
from netc.runtime.scale import scale_inputs
from netc.runtime.train import ReferenceTrainer, check_grads

ROOT = Path(__file__).resolve().parents[1]

UNBATCHED = """
network u {
  input x: f32[8, 8]
  input label: i32[8]
  fc = InnerProduct(x) { num_outputs: 8 }
  d = Dropout(fc)
  fc2 = InnerProduct(d) { num_outputs: 8 }
  loss = SoftmaxLoss(fc2, label)
}
"""

# a concatenation (channel slices: strided) and a residual add
CONCAT_RESIDUAL = """
network cr {
  input data: f32[2, 6, 6, 3]
  input label: i32[2]
  a = Convolution(data) { filter: [1, 1, 3, 4] }
  b = Convolution(data) { filter: [3, 3, 3, 2], padding: SAME }
  cat = Concatenate(a, b) { dim: 3 }
  r = ReLU(cat)
  c = Convolution(r) { filter: [3, 3, 6, 6], padding: SAME }
  res = Elementwise(c, cat) { operation: sum }
  p = Pooling(res) { ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1] }
  fc = InnerProduct(p) { num_outputs: 5 }
  loss = SoftmaxLoss(fc, label)
}
"""

# batch norms and ReLUs between convolutions: cheap ops whose results the backward pass reads
REMAT = """
network remat {
  input data: f32[4, 8, 8, 4]
  input label: i32[4]
  c1 = Convolution(data) { filter: [3, 3, 4, 8], padding: SAME }
  b1 = BatchNorm(c1)
  r1 = ReLU(b1)
  c2 = Convolution(r1) { filter: [3, 3, 8, 8], padding: SAME }
  b2 = BatchNorm(c2)
  r2 = ReLU(b2)
  p2 = Pooling(r2) { ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1] }
  fc = InnerProduct(p2) { num_outputs: 10 }
  loss = SoftmaxLoss(fc, label)
}
"""


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Tiny tensors: torch's intra-op threads only spin (on a loaded 2-core machine, 50x slower)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def training(src, optimizer="sgd", fuse=True, batch=None, budget=None, loss=None, path="t.nd"):
    """The training program of `src` (.nd text, or a file path), after backward + optimizer (+ fuse,
    + rematerialize under `budget`)."""
    diag = DiagnosticEngine()
    m = load(str(src), diag) if isinstance(src, Path) else load_text(src, path)
    if batch is not None:
        scale_inputs(m, batch=batch)
    options = Options(training=Training(loss=loss or None, optimizer={"name": optimizer}))
    if budget is not None:      # rematerialize (after fuse) under `budget`: `netc explain --train --budget`'s program
        pipelines.explain(m, options, diag, fuse=fuse, budget=budget)
    else:
        (pipelines.compile if fuse else pipelines.training)(m, options, diag)
    training.diagnostics = list(diag.diagnostics)
    return m


def planned(m, net=None, **kw):
    net = net or m.networks()[0]
    p = plan_memory(m, net, **kw)
    problems = verify_plan(p, m, net, batches=range(1, p.batch + 1))
    assert problems == [], problems
    return p


def same_training_steps(m, net=None, steps=2, seed=0, lr=0.05):
    """ReferenceTrainer and PlannedTrainer (f32, the same seed): identical losses, gradients and
    updated parameters and state after every step."""
    net = net or m.networks()[0]
    ref = ReferenceTrainer(m, net, seed=seed, dtype=torch.float32)
    pt = PlannedTrainer(m, net, seed=seed)
    for k in range(steps):
        a, b = ref.step(None, lr=lr), pt.step(None, lr=lr)
        for n, v in ref.losses(a).items():
            assert torch.equal(v, pt.losses(b)[n]), (k, n)
            assert torch.isfinite(v).all()
        for n, g in ref.gradients(a).items():
            assert torch.equal(g, pt.gradients(b)[n]), (k, n)
        for n, v in ref.params.items():
            assert torch.equal(v, pt.params[n]), (k, n)
    return pt


# ------------------------------------------------------------------------------------------------
# classes, updates, gradients


def test_unbatched_results_are_constant_even_when_a_dimension_equals_the_batch():
    m = training(UNBATCHED)
    p = planned(m)
    t = {x.name: x for x in p.tensors}
    assert p.mode == "training" and p.batch == 8
    # [8, 8] and [8]: the batch's size, but parameter gradients have no batch axis
    for g in ("fc2.weight.grad", "fc2.bias.grad", "fc.weight.grad", "fc.bias.grad"):
        assert t[g].cls == CONSTANT and t[g].size == t[g].numel * 4, g
    assert t["fc.grad"].cls == BATCH and t["d.mask"].cls == BATCH   # a mask drawn from the scalar seed
    assert t["label"].cls == BATCH and t["lr"].cls == CONSTANT
    # the verifier knows which ops are unbatched
    bad = plan_memory(m)
    g = bad.tensor("fc2.weight.grad")
    g.cls = BATCH
    bad.buffers[g.buffer].cls = BATCH
    assert any("unbatched" in x for x in verify_plan(bad, m, m.networks()[0]))


def test_state_is_fixed_and_gradients_reuse_bytes_after_their_update():
    m = training(Path(ROOT / "examples" / "lenet.nd"), optimizer="adam")
    p = planned(m)
    T = p.tensors
    state = [t for t in T if t.kind == "param" and ".adam_" in t.name]
    assert state and all(t.cls == CONSTANT and not p.buffers[t.buffer].reusable for t in state)
    fixed = sum(-(-p.buffers[t.buffer].size // 256) * 256 for t in T if t.kind == "param" and t.alias is None)
    assert p.arenas[CONSTANT].fixed == fixed
    updates = {st.layer: st for st in p.steps if st.updates}
    assert len(updates) == 8 and all(not st.writes for st in updates.values())
    grads = [t for t in T if t.name.endswith(".weight.grad") or t.name.endswith(".bias.grad")]
    for g in grads:                          # a gradient dies at its update
        st = updates[g.name[:-len(".grad")] + ".update"]
        assert g.last_use == st.index and p.buffers[g.buffer].end == st.index and g.cls == CONSTANT
    # the updates run early (right after their gradient), so gradients share bytes: the constant
    # arena is the state plus much less than every gradient at once
    assert p.schedule in ("eager-updates", "greedy", "greedy-lifo")
    temporaries = p.arenas[CONSTANT].size - p.arenas[CONSTANT].fixed
    assert temporaries < sum(-(-g.size // 256) * 256 for g in grads)
    assert p.arenas[CONSTANT].size <= 1.05 * p.arenas[CONSTANT].lower_bound
    assert p.arenas[BATCH].size <= 1.05 * p.arenas[BATCH].lower_bound


def test_an_update_runs_after_every_reader_of_its_parameter():
    m = training(UNBATCHED)
    net = m.networks()[0]
    p = planned(m, schedule="original")
    order = p.order
    # the update of fc2.weight before the data gradient that reads fc2.weight: refused
    reader = next(s.layer for s in p.steps if "@fc2.weight" in [p.tensors[i].name for i in s.reads]
                  and not s.updates and s.layer != "fc2")
    bad = [n for n in order if n != "fc2.weight.update"]
    bad.insert(bad.index(reader), "fc2.weight.update")
    with pytest.raises(PlanError, match="fc2.weight.update"):
        plan_memory(m, net, schedule=bad)
    # the verifier catches a plan whose reader runs after the update (swap them, renumber)
    q = plan_memory(m, net, schedule="original")
    i = next(k for k, s in enumerate(q.steps) if s.layer == reader)
    j = next(k for k, s in enumerate(q.steps) if s.layer == "fc2.weight.update")
    q.steps[i], q.steps[j] = q.steps[j], q.steps[i]
    for k, s in enumerate(q.steps):
        s.index = k + 1
    assert any("after step" in x and "updated it in place" in x for x in verify_plan(q))


def test_greedy_schedules_keep_the_update_order():
    m = training(Path(ROOT / "examples" / "gan.nd"), optimizer="momentum")
    for net in m.networks():
        for schedule in ("greedy", "original", "auto"):
            p = planned(m, net, schedule=schedule)
            assert p.mode == "training"
        assert any(st.updates for st in p.steps)


@pytest.mark.parametrize("example,optimizer", [("lenet.nd", "adam"), ("gan.nd", "momentum"),
                                               ("digits.nd", "rmsprop"), ("cifar10_phases.nd", "sgd")])
def test_training_plans_of_the_examples_verify_near_the_bound(example, optimizer):
    m = training(Path(ROOT / "examples" / example), optimizer=optimizer)
    for net in m.networks():
        if net.attrs.get("gradients") is None:
            continue
        for fusion in ("auto", "none"):
            p = planned(m, net, fusion=fusion)
            for a in p.arenas:
                assert a.lower_bound <= a.size <= 1.05 * a.lower_bound, (example, a)
            assert sum(p.arena_bytes()) < sum(a.naive * (p.batch if a.cls == BATCH else 1) for a in p.arenas)


# ------------------------------------------------------------------------------------------------
# the stale-read test: the planned executor against the reference


@pytest.mark.parametrize("fuse", [True, False])
def test_planned_lenet_at_batch_2_matches_the_reference(fuse):
    m = training(Path(ROOT / "examples" / "lenet.nd"), optimizer="adam", batch=2, fuse=fuse)
    pt = same_training_steps(m)
    assert pt.plan.mode == "training"
    if fuse:     # ip2's data gradient applies ip1's activation gradient before its store: dy is never stored
        assert [t.name for t in pt.plan.tensors if t.fused] == ["ip1.grad"]
    else:        # unfused, the activation gradient overwrites its dy
        assert any(s.action == "inplace" for s in pt.plan.steps)


def test_planned_concat_and_residual_match_the_reference():
    m = training(CONCAT_RESIDUAL, optimizer="momentum")
    pt = same_training_steps(m)
    kinds = {t.alias for t in pt.plan.tensors}
    assert "concat" in kinds and any(t.strides is not None for t in pt.plan.tensors)  # strided slices


def test_planned_gan_generator_with_batch_norm_training_matches_the_reference():
    m = training(Path(ROOT / "examples" / "gan.nd"), optimizer="adam", batch=4)
    net = m.network("gan_g")
    pt = same_training_steps(m, net)
    assert any(t.name.endswith(".running_mean") for t in pt.plan.tensors if t.kind == "param")


def test_the_planned_executor_catches_a_clobbering_plan():
    m = training(Path(ROOT / "examples" / "lenet.nd"), batch=2)
    net = m.networks()[0]
    p = plan_memory(m, net)
    # move a saved activation onto the bytes of a buffer live at the same time
    pool1 = p.buffers[p.tensor("pool1").buffer]
    other = next(b for b in p.buffers if b.cls == BATCH and b.id != pool1.id and b.start > pool1.start
                 and b.start < pool1.end and b.size >= pool1.size)
    pool1.offset = other.offset
    assert verify_plan(p, m, net)
    ref = ReferenceTrainer(m, net, seed=0, dtype=torch.float32)
    pt = PlannedTrainer(m, net, seed=0, plan=p)
    a, b = ref.step(None, lr=0.1), pt.step(None, lr=0.1)
    assert not all(torch.equal(g, pt.gradients(b)[n]) for n, g in ref.gradients(a).items())


def test_unwritten_bytes_read_as_garbage():
    m = training(UNBATCHED, fuse=False)
    net = m.networks()[0]
    prog = PlannedProgram(m, net, plan_memory(m, net))
    prog.poison()
    v = prog.view(prog.plan.tensor("fc2.weight.grad"))
    assert torch.isnan(v).any() and (v.abs() > 1e38).any()


# ------------------------------------------------------------------------------------------------
# random small nets


@st.composite
def train_nets(draw):
    b = draw(st.integers(2, 3))
    c0 = draw(st.integers(1, 3))
    lines = [f"input data: f32[{b}, 4, 4, {c0}]", f"input label: i32[{b}]"]
    shape = {"data": c0}
    for i in range(draw(st.integers(1, 6))):
        names = list(shape)
        p = draw(st.sampled_from(names[-3:]))
        c = shape[p]
        kind = draw(st.sampled_from(["conv", "conv", "relu", "sigmoid", "drop", "bn", "pool", "add", "cat"]))
        n = f"l{i}"
        if kind == "conv":
            co, k = draw(st.sampled_from([2, 3, 4])), draw(st.sampled_from([1, 3]))
            lines.append(f"{n} = Convolution({p}) {{filter: [{k}, {k}, {c}, {co}], padding: SAME}}")
            c = co
        elif kind in ("relu", "sigmoid", "drop", "bn"):
            lines.append(f"{n} = {dict(relu='ReLU', sigmoid='Sigmoid', drop='Dropout', bn='BatchNorm')[kind]}({p})")
        elif kind == "pool":
            lines.append(f"{n} = Pooling({p}) {{ksize: [1, 3, 3, 1], strides: [1, 1, 1, 1], padding: SAME}}")
        elif kind == "add":
            q = draw(st.sampled_from([x for x in names if shape[x] == c]))
            lines.append(f"{n} = Elementwise({p}, {q}) {{operation: sum}}")
        else:
            q = draw(st.sampled_from(names))
            d = draw(st.sampled_from([1, 3])) if shape[q] == c else 3
            if d == 1:
                lines.append(f"{n} = Concatenate({p}, {q}) {{dim: 1}}")
                lines.append(f"{n}_p = Pooling({n}) {{ksize: [1, 2, 1, 1], strides: [1, 2, 1, 1]}}")
                n = f"{n}_p"      # (the concatenation itself is twice as high: nothing else reads it)
            else:
                lines.append(f"{n} = Concatenate({p}, {q}) {{dim: 3}}")
                c = c + shape[q]
        shape[n] = c
    last = list(shape)[-1]
    lines.append(f"fc = InnerProduct({last}) {{num_outputs: 3}}")
    lines.append("loss = SoftmaxLoss(fc, label)")
    return "network r {\n  " + "\n  ".join(lines) + "\n}\n"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(train_nets(), st.data())
def test_random_training_programs_plan_verify_and_run_as_the_reference(src, data):
    m = training(src, optimizer=data.draw(st.sampled_from(["sgd", "momentum", "adam"])),
                 fuse=data.draw(st.booleans()))
    net = m.networks()[0]
    opts = dict(alignment=data.draw(st.sampled_from([4, 64, 256])),
                concat=data.draw(st.sampled_from(["all", "contiguous", "none"])),
                schedule=data.draw(st.sampled_from(["auto", "original", "greedy"])))
    p = planned(m, net, **opts)
    assert p.mode == "training"
    for a in p.arenas:
        assert a.lower_bound <= a.size <= a.naive
    ref = ReferenceTrainer(m, net, seed=1, dtype=torch.float32)
    pt = PlannedTrainer(m, net, seed=1, plan=p)
    for _ in range(2):
        x, y = ref.step(None, lr=0.05), pt.step(None, lr=0.05)
        for n, g in ref.gradients(x).items():
            assert torch.equal(g, pt.gradients(y)[n]), (src, opts, n)
        for n, v in ref.params.items():
            assert torch.equal(v, pt.params[n]), (src, opts, n)


# ------------------------------------------------------------------------------------------------
# recomputation under a budget


def test_budgeted_recomputation_shrinks_the_arena_and_keeps_the_gradients():
    plain = training(REMAT, optimizer="momentum")
    before = sum(planned(plain).arena_bytes())
    budget = before * 9 // 10
    m = training(REMAT, optimizer="momentum", budget=budget)
    net = m.networks()[0]
    rep = net.attrs["netc.rematerialize"]
    p = planned(m, net)
    assert rep["arena_before"] == before and rep["arena_after"] == sum(p.arena_bytes()) <= budget
    assert rep["met"] and rep["extra_flops"] > 0 and rep["recomputed"] and p.recompute == rep
    clones = [op for op in net.regions[0].ops if "recompute_of" in op.attrs]
    assert len(clones) == rep["ops"] and all(op.attrs["name"].endswith(".recompute") and "grad_of" in op.attrs
                                             for op in clones)
    assert not training.diagnostics
    # the same gradients as the program without recomputation, and autograd agrees
    ra, rb = ReferenceTrainer(plain, seed=2), ReferenceTrainer(m, seed=2)
    ga, gb = ra.gradients(ra.step(None, lr=0.1)), rb.gradients(rb.step(None, lr=0.1))
    assert ga.keys() == gb.keys() and all(torch.equal(ga[k], gb[k]) for k in ga)
    assert all(r["rel_error"] < 1e-6 for r in check_grads(m, seed=2))
    same_training_steps(m)      # and its plan holds up against stale reads


def test_an_unreachable_budget_warns_with_the_smallest_arena():
    m = training(REMAT, budget=1000)
    rep = m.networks()[0].attrs["netc.rematerialize"]
    assert not rep["met"] and rep["arena_after"] < rep["arena_before"]
    (w,) = [d for d in training.diagnostics if d.severity == "warning"]
    assert "does not fit the memory budget of 1,000 bytes" in w.message and f"{rep['arena_after']:,}" in w.message
    planned(m)


def test_convolutions_and_masks_are_never_recomputed():
    m = training(Path(ROOT / "examples" / "lenet.nd"), budget=0, batch=2)
    ops = m.networks()[0].regions[0].ops
    assert all(op.name not in ("netc.conv2d", "netc.inner_product", "netc.dropout_mask")
               for op in ops if "recompute_of" in op.attrs)


# ------------------------------------------------------------------------------------------------
# netc explain --train --memory


def test_explain_train_memory_table_and_json(capsys):
    lenet = str(ROOT / "examples" / "lenet.nd")
    assert main(["explain", lenet, "--brief", "--train", "--optimizer", "adam", "--memory"]) == 0
    out = capsys.readouterr().out
    assert "memory plan for network lenet (training, batch 64" in out
    assert "bytes of parameters and state (fixed), then gradients" in out and "8 in-place updates" in out
    assert "ip1.weight.grad" in out and "@ip1.weight.adam_m" in out
    assert main(["explain", lenet, "--train", "--format", "json", "--memory"]) == 0
    mem = json.loads(capsys.readouterr().out)["memory"]
    assert mem["mode"] == "training" and len(mem["updates"]) == 8
    assert mem["lower_bound_bytes"] <= mem["arena_bytes"] <= 1.05 * mem["lower_bound_bytes"]
    assert {u["writes"][0] for u in mem["updates"]} >= {"@ip1.weight", "@conv1.bias"}
    grad = next(t for t in mem["tensors"] if t["name"] == "ip1.weight.grad")
    assert grad["class"] == "constant" and not grad["per_sample"]


def test_explain_memory_budget(tmp_path, capsys):
    src = tmp_path / "remat.nd"
    src.write_text(REMAT)
    assert main(["explain", str(src), "--train", "--format", "json", "--memory"]) == 0
    before = json.loads(capsys.readouterr().out)["memory"]["arena_bytes"]
    budget = before * 9 // 10
    assert main(["explain", str(src), "--brief", "--train", "--memory", "--memory-budget", str(budget)]) == 0
    out = capsys.readouterr().out
    assert f"recomputation (budget {budget} bytes)" in out and "within the budget" in out and ".recompute" in out
    assert main(["explain", str(src), "--train", "--format", "json", "--memory", "--memory-budget", str(budget)]) == 0
    mem = json.loads(capsys.readouterr().out)["memory"]
    assert mem["recompute"]["met"] and mem["arena_bytes"] <= budget < before
    assert mem["recompute"]["extra_flops"] > 0
