"""The differential harness of random networks (bench/randnet.py): every layer op of the registry is
drawn by some check or skipped with a reason; drawn networks are valid; a fixed-seed sample of each
check (inference and training on the interpreter target against the f64 reference, generated
gradients against torch.autograd, 2 workers against one process) passes; and the harness does
report a planted bug -- a wrong reference, a wrong gradient op, a wrong update -- and minimizes the
network while the failure holds, so it cannot silently pass. The campaign's figures:
bench/results/randnet.json."""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"   # before anything imports netc.kernels

import pytest  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import randnet  # noqa: E402

# seeds whose networks pass today (the sample keeps passing; a regression shows here)
SAMPLE = {"infer": [0, 1, 4, 7], "train": [0, 1, 2, 6], "grad": [0, 1, 2, 3, 6], "part": [0, 4, 7], "cpu": [0, 1, 3, 5]}


@pytest.fixture(scope="module", autouse=True)
def _interp(interp_mode):
    """The interpreter target's kernels run under Triton's interpreter (tests/conftest.py)."""


def test_every_layer_op_is_drawn_or_skipped():
    rows = randnet.coverage()
    assert not [n for n, r in rows.items() if "uncovered" in r], "ops without a generator in bench/randnet.py OPS"
    from netc.ops import all_ops
    for d in all_ops():
        if d.types and not d.training_only:
            r = rows[d.ir_name]
            assert r["checks"] or r.get("skipped"), d.ir_name
    # every drawn op reaches the reference-based checks; the interpreter's checks draw the kernels
    assert set(randnet.ops_for("grad")) == set(randnet.OPS)
    assert {"netc.conv2d", "netc.batch_norm", "netc.lrn", "netc.concat"} <= set(randnet.ops_for("train"))


@pytest.mark.parametrize("check", randnet.CHECKS)
def test_drawn_networks_are_valid(check):
    """Shape inference accepts every drawn network in its phase (the generator checks each layer with
    its op's shape rule), with the variety the harness promises."""
    from netc.frontend import load_text
    from netc.pipelines import Options, inference
    seen_ops, batch1, shared, phases = set(), False, False, False
    for seed in range(25):
        net, cfg = randnet.generate(seed, check)
        text = net.text()
        m = load_text(text, f"{check}-{seed}.nd")
        ctx = inference(m, Options(phase=cfg["phase"]))     # partition: K = 1, skipped
        assert not ctx.diag.has_errors(), (text, [d.message for d in ctx.diag.diagnostics])
        seen_ops |= set(cfg["ops"])
        batch1 |= "[1," in text
        shared |= "params: {" in text
        phases |= "include:" in text
    assert len(seen_ops) >= 8 and shared and phases, (check, seen_ops)
    if check != "part":
        assert batch1


@pytest.mark.parametrize("check", randnet.CHECKS)
def test_fixed_seed_sample(check, tmp_path):
    for seed in SAMPLE[check]:
        net, cfg = randnet.generate(seed, check)
        path = tmp_path / f"{check}-{seed}.nd"
        path.write_text(net.text())
        o = randnet.run_check(net.text(), cfg, str(path))
        assert o.status in ("ok", "known"), (seed, o.as_dict(), net.text())


# -- the harness finds planted bugs ----------------------------------------------------------------

RELU_NET = """network planted {
  input x: f32[2, 5, 5, 3]
  c = Convolution(x) { filter: [3, 3, 3, 4], padding: SAME }
  r = ReLU(c)
  p = MaxPool(r) { ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1] }
  t = Tanh(c)
  f = InnerProduct(p) { num_outputs: 3 }
  input label: i32[2]
  loss = SoftmaxLoss(f, label)
}
"""


def _planted(monkeypatch, ir_name, scale):
    from netc.ops import lookup
    d = lookup(ir_name)
    orig = d.reference

    def wrong(a, ins, params):
        y = orig(a, ins, params)
        if isinstance(y, dict):
            return {k: v * scale for k, v in y.items()}
        return y * scale
    monkeypatch.setattr(d, "reference", wrong)


def test_planted_reference_bug_is_a_mismatch(monkeypatch, tmp_path):
    cfg = {"check": "infer", "seed": 0, "phase": "test", "dtype": "f32", "blocks": "large"}
    assert randnet.run_check(RELU_NET, cfg, str(tmp_path / "a.nd")).status == "ok"
    _planted(monkeypatch, "netc.relu", 1.001)
    o = randnet.run_check(RELU_NET, cfg, str(tmp_path / "a.nd"))
    assert o.status == "mismatch" and o.signature == "infer:mismatch:f32", o.as_dict()
    # minimized while the signature holds: the unrelated branch (t) goes, the ReLU stays
    small = randnet.minimize(_as_net(RELU_NET), cfg, o.signature, timeout=60, budget_s=120)
    text = small.text()
    assert "ReLU" in text and "Tanh" not in text and len(small.stmts) < 8, text


def _as_net(text):
    """The planted network as the harness's statements (what minimize edits)."""
    import re
    stmts = []
    for line in text.splitlines()[1:-1]:
        line = line.strip()
        m = re.match(r"input (\w+): (\w+)\[([^\]]*)\]", line)
        if m:
            stmts.append(randnet.Stmt(m[1], None, dtype=m[2], shape=tuple(int(x) for x in m[3].split(","))))
            continue
        m = re.match(r"(\w+) = (\w+)\(([^)]*)\)\s*(\{.*\})?", line)
        attrs = {}
        if m[4]:
            for kv in re.findall(r"(\w+): (\[[^\]]*\]|\w+)", m[4]):
                k, v = kv
                attrs[k] = [int(x) for x in v[1:-1].split(",")] if v.startswith("[") else (int(v) if v.isdigit() else v)
        stmts.append(randnet.Stmt(m[1], m[2], [p.strip() for p in m[3].split(",")], attrs))
    return randnet.Net(stmts, name="planted")


def test_planted_gradient_bug_is_a_mismatch(monkeypatch, tmp_path):
    cfg = {"check": "grad", "seed": 0, "phase": "train"}
    assert randnet.run_check(RELU_NET, cfg, str(tmp_path / "g.nd")).status == "ok"
    _planted(monkeypatch, "netc.inner_product_grad_filter", 1.0 + 1e-6)
    o = randnet.run_check(RELU_NET, cfg, str(tmp_path / "g.nd"))
    assert o.status == "mismatch" and o.signature == "grad:mismatch" and "f.weight" in o.message, o.as_dict()


def test_planted_update_bug_is_a_mismatch(monkeypatch, tmp_path):
    cfg = {"check": "train", "seed": 0, "phase": "train", "blocks": "large"}
    assert randnet.run_check(RELU_NET, cfg, str(tmp_path / "t.nd")).status == "ok"
    _planted(monkeypatch, "netc.sgd_update", 1.01)
    o = randnet.run_check(RELU_NET, cfg, str(tmp_path / "t.nd"))
    assert o.status == "mismatch" and o.signature.startswith("train:mismatch:param"), o.as_dict()


def test_internal_errors_are_caught_with_a_signature(monkeypatch, tmp_path):
    from netc.ops import lookup

    def broken(a, ins, params):
        raise IndexError("planted")
    monkeypatch.setattr(lookup("netc.tanh"), "reference", broken)
    cfg = {"check": "infer", "seed": 0, "phase": "test", "dtype": "f32", "blocks": "large"}
    o = randnet.run_check(RELU_NET, cfg, str(tmp_path / "i.nd"))
    assert o.status == "internal" and o.signature.startswith("infer:internal:IndexError:"), o.as_dict()


def test_known_bugs_are_recognized(monkeypatch):
    # no known bug is open now (the last, bn-specialization, is fixed): the mechanism with one
    monkeypatch.setattr(randnet, "KNOWN", [("some-bug", None, r"the specialization changed with the batch")])
    o = randnet._known(randnet.Outcome("internal", "train:internal:AssertionError:lower.py:x:y",
                                       "AssertionError: ... the specialization changed with the batch"), "train")
    assert o.status == "known" and o.signature == "known:some-bug"
    monkeypatch.setattr(randnet, "KNOWN", [])
    o = randnet._known(randnet.Outcome("internal", "train:internal:AssertionError:lower.py:x:y",
                                       "AssertionError: ... the specialization changed with the batch"), "train")
    assert o.status == "internal"


def test_update_noise_bounds_what_adam_makes_of_rounding(tmp_path):
    """randnet part check, seed 1070: Adam moved a conv bias whose gradient is 0 up to rounding (1e-16
    on 2 workers, 0 in one process) by 1.7e-11 (lr / eps = 1e5 times the gradient): 3e-10 relative,
    beyond 1e-10. _update_noise allows what the update makes of the gradients' difference, no more."""
    import numpy as np
    text = "optimizer adam { lr: 0.001 }\n\nnetwork rn {\n}\n"
    np.savez(tmp_path / "g1.npz", b=np.array([0.0]), w=np.array([0.3, 0.2]))
    np.savez(tmp_path / "g2.npz", b=np.array([-1.1e-16]), w=np.array([0.3, 0.2]))
    noise = randnet._update_noise(text, str(tmp_path / "g2.npz"), str(tmp_path / "g1.npz"))
    assert noise["w"] == 0.0 and abs(noise["b"] - 2 * randnet.TRAIN_STEPS * 1e-3 / 1e-8 * 1.1e-16) < 1e-20
    np.savez(tmp_path / "p1.npz", b=np.array([0.0553358]), w=np.array([0.5, 0.1]))
    np.savez(tmp_path / "p2.npz", b=np.array([0.0553358 + 1.7e-11]), w=np.array([0.5, 0.1]))
    a, b = str(tmp_path / "p2.npz"), str(tmp_path / "p1.npz")
    assert randnet._npz_err(a, b)[0] > randnet.PART_TOL            # the old rule: a mismatch
    assert randnet._npz_err(a, b, noise)[0] <= randnet.PART_TOL     # explained by the update
    np.savez(tmp_path / "p2.npz", b=np.array([0.0553358 + 1e-9]), w=np.array([0.5, 0.1]))
    assert randnet._npz_err(a, b, noise)[0] > randnet.PART_TOL      # more than rounding: still one
    sgd = randnet._update_noise("optimizer sgd { lr: 0.01 }\n", str(tmp_path / "g2.npz"), str(tmp_path / "g1.npz"))
    assert sgd["b"] < 1e-16                                          # SGD amplifies nothing
