"""The Python API (netc.api, docs/python.md): layers as expressions give the IR .nd gives, parameters
shared by name are one tensor, immutable parameters stay, events come in order, errors name the
caller's line, readers compose, parameters round-trip through files, NetBuilder runs ranges of its
schedule, and the examples run (in their fast mode)."""
from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import netc
from netc.api import to_ir, to_nd
from netc.frontend import load as load_file
from netc.frontend import load_text
from netc.ir.printer import print_ir
from netc import pipelines

ROOT = Path(__file__).resolve().parents[1]
L = netc.layer


def nd_ir(path) -> str:
    m = load_file(str(path))
    pipelines.inference(m)
    return _plain(print_ir(m, with_locs=False))


def _plain(ir: str) -> str:
    return re.sub(r' \{source = "[^"]*"\}', "", ir)   # (the module's source file is a location too)


def here() -> int:
    """The line of the caller (to check that an error names it)."""
    return inspect.currentframe().f_back.f_lineno


# -- the example networks, written with the builder ------------------------------------------------

def lenet():
    data = L.data("data", [28, 28, 1], batch_size=64)
    label = L.data("label", [], "i32", batch_size=64)
    h = L.conv2d(data, 5, 20, stride=1, padding="VALID", name="conv1")
    h = L.max_pool(h, 2, stride=2, padding="VALID", name="pool1")
    h = L.conv2d(h, 5, 50, stride=1, padding="VALID", name="conv2")
    h = L.max_pool(h, 2, stride=2, padding="VALID", name="pool2")
    h = L.fc(h, 500, act="relu", name="ip1")
    ip2 = L.fc(h, 10, name="ip2")
    return [netc.Topology([L.softmax(ip2, name="prob"), L.softmax_loss(ip2, label, name="loss")], name="lenet")]


def alexnet():
    x = L.data("data", [224, 224, 3], batch_size=128)
    x = L.conv2d(x, 11, 64, stride=4, padding="VALID", act="relu", name="conv1")
    x = L.max_pool(x, 3, stride=2, padding="VALID", name="pool1")
    x = L.conv2d(x, 5, 192, stride=1, padding="SAME", act="relu", name="conv2")
    x = L.max_pool(x, 3, stride=2, padding="VALID", name="pool2")
    x = L.conv2d(x, 3, 384, stride=1, padding="SAME", act="relu", name="conv3")
    x = L.conv2d(x, 3, 384, stride=1, padding="SAME", act="relu", name="conv4")
    x = L.conv2d(x, 3, 256, stride=1, padding="SAME", act="relu", name="conv5")
    x = L.max_pool(x, 3, stride=2, padding="VALID", name="pool5")
    x = L.conv2d(x, 5, 4096, stride=1, padding="VALID", act="relu", name="fc6")
    x = L.dropout(x, keep_prob=0.5, name="dropout6")
    x = L.conv2d(x, 1, 4096, stride=1, padding="SAME", act="relu", name="fc7")
    x = L.dropout(x, keep_prob=0.5, name="dropout7")
    x = L.Convolution(x, filter=[1, 1, 4096, 1000], strides=[1, 1, 1, 1], padding="SAME", name="fc8")  # generated
    return [netc.Topology(L.softmax(x, num_classes=1000, name="softmax"), name="alexnet", declare_outputs=False)]


def digits():
    data = L.data("data", [8, 8, 1], batch_size=32)
    label = L.data("label", [], "i32", batch_size=32)
    h = L.conv2d(data, 3, 16, padding="SAME", act="relu", name="conv1")
    h = L.pool(h, 2, stride=2, name="pool1")
    h = L.conv2d(h, 3, 32, padding="SAME", act="relu", name="conv2")
    h = L.pool(h, 2, stride=2, name="pool2")
    h = L.fc(h, 64, act="relu", name="fc1")
    fc2 = L.fc(h, 10, name="fc2")
    return [netc.Topology([L.softmax(fc2, name="prob"), L.softmax_loss(fc2, label, name="loss")], name="digits")]


def gan():
    def discriminator(x):
        h = L.fc(x, 10, act="relu", name="dis_hidden", param_name={"weight": "d_fc1_w", "bias": "d_fc1_b"})
        h = L.fc(h, 10, name="dis_hidden2", param_name={"weight": "d_fc2_w", "bias": "d_fc2_b"})
        h = L.batch_norm(h, name="dis_hidden_bn", param_name={"scale": "d_bn_scale", "shift": "d_bn_shift"})
        h = L.relu(h, name="dis_hidden_relu")
        logit = L.fc(h, 2, name="dis_logit", param_name={"weight": "d_fc3_w", "bias": "d_fc3_b"})
        return logit, L.softmax(logit, name="dis_prob")

    def g_names(layer, roles=("weight", "bias")):
        # the API never prefixes parameter names; gan.nd's generator parameters are unbound there, so .nd
        # names them '<network>.<layer>.<role>' (a file of several networks): named so here
        return {r: f"gan_g.{layer}.{r}" for r in roles}

    noise = L.data("noise", [10], batch_size=128)
    label = L.data("label", [1], "i32", batch_size=128)
    g = L.fc(noise, 10, act="relu", name="gen_hidden", param_name=g_names("gen_hidden"))
    g = L.fc(g, 10, name="gen_hidden2", param_name=g_names("gen_hidden2"))
    g = L.batch_norm(g, name="gen_hidden_bn", param_name=g_names("gen_hidden_bn", ("scale", "shift")))
    g = L.relu(g, name="gen_hidden_relu")
    sample = L.fc(g, 2, name="gen_sample", param_name=g_names("gen_sample"))
    logit, prob = discriminator(sample)
    gan_g = netc.Topology([L.softmax_loss(logit, label, name="cost"), prob, sample], name="gan_g")
    sample = L.data("sample", [2], batch_size=128)
    label = L.data("label", [1], "i32", batch_size=128)
    logit, prob = discriminator(sample)
    return [gan_g, netc.Topology([L.softmax_loss(logit, label, name="cost"), prob], name="gan_d")]


@pytest.mark.parametrize("name, build", [("lenet", lenet), ("alexnet", alexnet), ("digits", digits), ("gan", gan)])
def test_builder_and_nd_give_the_same_ir(name, build):
    tops = build()
    expected = nd_ir(ROOT / "examples" / f"{name}.nd")
    assert _plain(to_ir(tops, locations=False)) == expected
    # .nd written from the builder reads back to the same IR, and so does a loaded file
    m = load_text(to_nd(tops), f"{name}_built.nd")
    pipelines.inference(m)
    assert _plain(print_ir(m, with_locs=False)) == expected
    loaded = netc.load(str(ROOT / "examples" / f"{name}.nd"))
    loaded = [loaded] if isinstance(loaded, netc.Topology) else list(loaded)
    assert _plain(to_ir(loaded, locations=False)) == expected


def test_to_nd_reads_back(tmp_path):
    x = L.data("x", [4, 4, 3], batch_size=2)
    h = L.conv2d(x, 3, 8, act="tanh", name="c", param_attr={"weight": netc.ParamAttr(name="w", init="xavier"),
                                                             "bias": {"init": "constant", "value": 0.5}})
    e = L.fc(h, 6, name="enc", param_name={"weight": "w_embed"}, param_attr={"weight": {"immutable": True}})
    d = L.fc(e, 128, name="dec", param_attr={"weight": netc.ParamAttr(name="w_dec", share_from="w_embed")})
    top = netc.Topology([d, L.dropout(d, dropout_rate=0.25)], name="tied")
    path = tmp_path / "tied.nd"
    path.write_text(top.to_nd())
    back = netc.load(str(path))
    assert _plain(back.to_ir(locations=False)) == _plain(top.to_ir(locations=False))
    assert "share_from = @w_embed" in top.to_ir() and "immutable = true" in top.to_ir()
    params = netc.parameters.create(top)
    assert params.aliases == {"w_dec": "w_embed"} and params["w_dec"].shape == (6, 128)
    assert torch.all(params["c.bias"] == 0.5)


def test_every_registry_op_has_a_generated_builder():
    from netc.ops import all_ops
    for d in all_ops():
        if d.types and not d.training_only and d.name != "input":
            for t in d.types:
                f = getattr(L, t)
                assert f.__name__ == t and d.ir_name in f.__doc__
                assert set(d.attrs) <= set(inspect.signature(f).parameters)
    x = L.data("x", [5, 6])
    y = L.Slice(x, dim=2, num_slices=2, index=1)       # an op no friendly builder covers
    assert y.shape == (1, 5, 3) and y.type == "Slice"


def test_import_netc_stays_light():
    code = ("import sys, netc; assert 'torch' not in sys.modules and 'netc.api' not in sys.modules; "
            "netc.layer; assert 'netc.api' in sys.modules; print(sorted(set(netc._LAZY) - set(dir(netc))))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


# -- errors name the caller's file and line ---------------------------------------------------------

def test_errors_carry_the_callers_file_and_line():
    x = L.data("x", [8, 8, 3])
    line = here() + 2
    with pytest.raises(netc.api.Error) as e:
        L.conv2d(x, 3, 16, padding="same")
    text = str(e.value)
    assert f"test_api.py:{line}:" in text and "did you mean 'SAME'?" in text
    assert 'L.conv2d(x, 3, 16, padding="same")' in text       # the line is quoted, as for .nd files
    line = here() + 2
    with pytest.raises(netc.api.Error) as e:
        L.Convolution(x, filter=[3, 3, 4, 16])
    assert f"test_api.py:{line}:" in str(e.value) and "filter expects 4 input channels" in str(e.value)
    a = L.fc(x, 10, param_name="shared"); first = here()       # noqa: E702
    b = L.fc(L.data("z", [5]), 10, param_name="shared"); second = here()   # noqa: E702
    with pytest.raises(netc.api.Error) as e:
        netc.parameters.create([netc.Topology(a, name="A"), netc.Topology(b, name="B")])
    assert f"test_api.py:{second}:" in str(e.value) and f"test_api.py:{first}:" in str(e.value)
    assert "shared with a different shape" in str(e.value)


def test_the_cuda_target_says_what_to_use():
    x, y = L.data("x", [3]), L.data("y", [], "i32")
    cost = L.softmax_loss(L.fc(x, 2), y)
    params = netc.parameters.create(cost)
    with pytest.raises(netc.api.Error, match="not wired into the Python API yet"):
        netc.train(cost, params, lambda: iter([]), target="cuda")
    with pytest.raises(netc.api.Error, match="unknown target 'gpu'"):
        netc.test(cost, params, lambda: iter([]), target="gpu")


INTERP_TARGET = r"""
import os, sys
os.environ["TRITON_INTERPRET"] = "1"
import numpy as np, torch
import netc
from netc import layer as L

def samples(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 6)).astype(np.float32)
    return list(zip(x, (x[:, 0] + x[:, 1] > 0).astype(np.int32)))

def model():
    x, y = L.data("x", [6]), L.data("y", [], "i32")
    out = L.fc(L.fc(x, 8, act="relu", name="h", param_name={"weight": "shared.w"}), 2, act="softmax", name="out")
    return out, L.classification_cost(out, y)

out, cost = model()
runs = {}
for target in ("reference", "interp"):
    params = netc.parameters.create(cost, seed=0)
    shared = params["shared.w"]
    r = netc.train(cost, params, lambda: iter(samples(64, 1)), netc.optimizer.Momentum(0.1, momentum=0.9),
                   num_passes=2, batch_size=16, target=target)
    assert params["shared.w"] is shared          # updated in place: one tensor, shared by name
    res = netc.test(cost, params, lambda: iter(samples(40, 2)), batch_size=20, target=target)
    probs = netc.infer(out, params, [s[0] for s in samples(40, 2)], batch_size=16, target=target)
    runs[target] = (r, {k: params[k].clone() for k in params.names()}, res, probs,
                    {k: v.clone() for k, v in params.state.items()})
(r0, p0, t0, i0, s0), (r1, p1, t1, i1, s1) = runs["reference"], runs["interp"]
assert r0["iterations"] == r1["iterations"] == 8
for k in p0:
    err = float((p0[k] - p1[k]).abs().max() / p0[k].abs().max())
    assert err < 1e-4, (k, err)
assert set(s0) == set(s1) and s1, (sorted(s0), sorted(s1))   # the optimizer state: the velocities
for k in s0:
    assert float((s0[k] - s1[k]).abs().max()) <= 1e-4 * float(s0[k].abs().max()) + 1e-12, k
assert abs(t0.cost - t1.cost) < 1e-4 * abs(t0.cost) and t0.metrics == t1.metrics, (t0, t1)
assert np.abs(i0 - i1).max() < 1e-5
print("ok", r0["cost"], r1["cost"])
"""


def test_interp_target_trains_tests_and_infers_as_the_reference():
    """target="interp": the compiled kernels on the CPU (a fresh process: the interpreter mode is fixed
    when netc.kernels is imported). Two passes of momentum training, a shared parameter updated in
    place, the optimizer state kept in the set; then test and infer: all equal the reference target's
    to f32 rounding."""
    pytest.importorskip("triton")
    r = subprocess.run([sys.executable, "-c", INTERP_TARGET], capture_output=True, text=True, timeout=600,
                       cwd=Path(__file__).resolve().parents[1])
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert r.stdout.startswith("ok")


# -- parameters ---------------------------------------------------------------------------------------

def _samples(n, seed=0, dim=3):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return list(zip(x, (x[:, 0] > 0).astype(np.int32)))


def test_shared_parameters_are_one_tensor():
    def branch(name):
        x = L.data(f"{name}_x", [3])
        y = L.data(f"{name}_y", [], "i32")
        h = L.fc(x, 4, act="tanh", name=f"{name}.h", param_name={"weight": "shared.w", "bias": "shared.b"})
        out = L.fc(h, 2, name=f"{name}.out")
        return L.softmax_loss(out, y), h
    cost_a, _ = branch("a")
    cost_b, h_b = branch("b")
    params = netc.parameters.create([cost_a, cost_b], seed=3)
    assert sorted(params) == ["a.out.bias", "a.out.weight", "b.out.bias", "b.out.weight", "shared.b", "shared.w"]
    w = params["shared.w"]
    probe = [s[0] for s in _samples(5, seed=1)]
    before = netc.infer(h_b, params, probe)
    netc.train(cost_a, params, lambda: iter(_samples(32)), netc.optimizer.SGD(0.5), batch_size=8)
    assert params["shared.w"] is w                      # updated in place: the same tensor
    after = netc.infer(h_b, params, probe)              # b's sub-network sees a's training
    assert not np.allclose(before, after)
    x = torch.tensor(np.stack(probe))
    assert np.allclose(after, torch.tanh(x @ w + params["shared.b"]).numpy(), atol=1e-6)


def test_immutable_parameters_do_not_change():
    x, y = L.data("x", [3]), L.data("y", [], "i32")
    h = L.fc(x, 4, name="frozen.h")
    h2 = L.fc(h, 4, name="fixed", param_attr={"weight": {"immutable": True}})
    cost = L.softmax_loss(L.fc(h2, 2, name="head"), y)
    params = netc.parameters.create(cost)
    before = {n: t.clone() for n, t in params.items()}
    netc.train(cost, params, lambda: iter(_samples(32)), netc.optimizer.Adam(0.1), batch_size=8, num_passes=2,
               immutable_parameters={"frozen.*"})
    unchanged = {n for n in params if torch.equal(params[n], before[n])}
    assert unchanged == {"frozen.h.weight", "frozen.h.bias", "fixed.weight"}
    assert not any(n.startswith(("frozen", "fixed.weight")) for n in params.state)   # no optimizer state either


def test_save_and_load_round_trip(tmp_path):
    x, y = L.data("x", [3]), L.data("y", [], "i32")
    cost = L.softmax_loss(L.batch_norm(L.fc(x, 4, name="fc"), name="bn"), y)
    params = netc.parameters.create(cost, seed=5)
    netc.train(cost, params, lambda: iter(_samples(16)), netc.optimizer.Adam(0.01), batch_size=8)
    assert {"bn.running_mean", "fc.weight.adam_m"} <= set(params.state)
    for ext in ("npz", "safetensors"):
        path = str(tmp_path / f"p.{ext}")
        params.save(path)
        other = netc.parameters.create(cost, seed=6)
        assert not torch.equal(other["fc.weight"], params["fc.weight"])
        t = other["fc.weight"]
        other.load(path)
        assert other["fc.weight"] is t and all(torch.equal(other[n], params[n]) for n in params)
        assert torch.equal(other.state["bn.running_var"], params.state["bn.running_var"])
        fresh = netc.parameters.load(path)
        assert all(torch.equal(fresh[n], params[n]) for n in params)
        if ext == "safetensors":
            assert set(fresh.state) == set(params.state)
    # without state: the parameters alone, what `netc run --reference --params` takes
    params.save(str(tmp_path / "w.npz"), state=False)
    assert set(netc.parameters.load(str(tmp_path / "w.npz"))) == set(params)


def test_inits_by_name():
    x = L.data("x", [100])
    inits = {"constant": {"value": 0.25}, "gaussian": {"mean": 1.0, "std": 0.01}, "uniform": {"low": 2, "high": 3},
             "xavier": {}, "msra": {}}
    layers = [L.fc(x, 50, name=k, param_attr={"weight": {"init": k, **a}}) for k, a in inits.items()]
    p = netc.parameters.create(netc.Topology(layers), seed=1)
    assert torch.all(p["constant.weight"] == 0.25)
    assert abs(float(p["gaussian.weight"].mean()) - 1.0) < 0.01
    assert 2 <= float(p["uniform.weight"].min()) and float(p["uniform.weight"].max()) <= 3
    assert float(p["xavier.weight"].abs().max()) <= (6 / 150) ** 0.5
    assert abs(float(p["msra.weight"].std()) - (2 / 100) ** 0.5) < 0.02
    again = netc.parameters.create(netc.Topology(layers), seed=1)
    assert all(torch.equal(p[n], again[n]) for n in p)          # seeded
    with pytest.raises(netc.api.Error, match="unknown init 'gausian'; did you mean 'gaussian'"):
        netc.parameters.create(L.fc(x, 2, param_attr={"init": "gausian"}))


# -- training: events, readers, metrics ---------------------------------------------------------------

def test_events_arrive_in_the_documented_order():
    x, y = L.data("x", [3]), L.data("y", [], "i32")
    cost = L.softmax_loss(L.fc(x, 2), y)
    params = netc.parameters.create(cost)
    seen = []
    netc.train(cost, params, lambda: iter(_samples(6)), event_handler=seen.append, num_passes=2, batch_size=2)
    names = [type(e).__name__ for e in seen]
    one_pass = ["BeginPass"] + ["BeginIteration", "EndIteration"] * 3 + ["EndPass"]
    assert names == ["BeginTraining"] + one_pass * 2 + ["EndTraining"]
    ends = [e for e in seen if isinstance(e, netc.event.EndIteration)]
    assert [(e.pass_id, e.batch_id) for e in ends] == [(p, b) for p in range(2) for b in range(3)]
    assert all(0 <= e.metrics["accuracy"] <= 1 and e.cost > 0 and e.batch_size == 2 for e in ends)
    assert seen[-1] == netc.event.EndTraining(passes=2, iterations=6)

    def stop(e):                      # stopped mid-pass: that pass gets no EndPass
        seen.append(e)
        if isinstance(e, netc.event.EndIteration) and e.batch_id == 1:
            raise netc.event.StopTraining
    seen = []
    netc.train(cost, params, lambda: iter(_samples(6)), event_handler=stop, num_passes=2, batch_size=2)
    names = [type(e).__name__ for e in seen]
    assert "EndPass" not in names and names[-1] == "EndTraining" and names.count("EndIteration") == 2


def test_readers_compose():
    R = netc.reader
    nums = lambda: iter(range(10))                       # noqa: E731
    assert list(R.batch(nums, 4)()) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert list(R.batch(nums, 4, drop_last=True)()) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    s = R.shuffle(nums, 4, seed=0)
    first, second = list(s()), list(s())
    assert sorted(first) == list(range(10)) and first != second      # a new order each pass, seeded
    assert list(R.shuffle(nums, 4, seed=0)()) == first
    assert list(R.map(lambda a, b: a * b, nums, nums)()) == [i * i for i in range(10)]
    assert list(R.chain(R.firstn(nums, 2), R.firstn(nums, 3))()) == [0, 1, 0, 1, 2]
    letters = lambda: iter([("a", "b"), ("c", "d")])      # noqa: E731
    assert list(R.compose(R.firstn(nums, 2), letters)()) == [(0, "a", "b"), (1, "c", "d")]
    with pytest.raises(R.ComposeNotAligned):
        list(R.compose(nums, letters)())
    assert list(R.compose(nums, letters, check_alignment=False)()) == [(0, "a", "b"), (1, "c", "d")]
    assert list(R.buffered(nums, 3)()) == list(range(10)) and list(R.cache(nums)()) == list(range(10))
    assert list(R.from_arrays(a=[1, 2], b=[3, 4])()) == [{"a": 1, "b": 3}, {"a": 2, "b": 4}]
    assert list(R.one_hot(2, 4)) == [0, 0, 1, 0]

    # composed readers feed several data layers: tuples in the order the data layers were made, dicts by name
    label = L.data("label", [], "i32")                    # made first: field 0 of a tuple
    x = L.data("x", [3])
    cost = L.softmax_loss(L.fc(x, 2, name="fc"), label)
    assert [d.name for d in netc.Topology(cost).data_layers()] == ["label", "x"]
    params = netc.parameters.create(cost)
    xs = np.random.default_rng(0).standard_normal((8, 3)).astype(np.float32)
    ys = (xs[:, 0] > 0).astype(np.int32)
    by_tuple = netc.test(cost, params, R.compose(R.from_arrays(ys), R.from_arrays(xs)), batch_size=4)
    by_dict = netc.test(cost, params, R.from_arrays(x=xs, label=ys), batch_size=4)
    by_feeding = netc.test(cost, params, R.from_arrays(xs, ys), batch_size=4, feeding={"x": 0, "label": 1})
    assert by_tuple.cost == pytest.approx(by_dict.cost) == pytest.approx(by_feeding.cost)
    with pytest.raises(netc.api.Error, match="in the order they were made"):
        netc.test(cost, params, R.from_arrays(xs, ys, ys), batch_size=4)


def test_rank_cost_is_paddles_pairwise_cross_entropy():
    left, right = L.data("left", [1]), L.data("right", [1])
    label = L.data("label", [], "i32")                       # 1: left ranks higher
    cost = L.rank_cost(left, right, label)
    rng = np.random.default_rng(0)
    l, r = rng.standard_normal((2, 16, 1)).astype(np.float32)
    t = rng.integers(0, 2, 16)
    got = netc.infer(cost, netc.parameters.create(cost), {"left": l, "right": r, "label": t})
    p = 1 / (1 + np.exp(-(l - r)[:, 0]))
    assert float(got) == pytest.approx(np.mean(-t * np.log(p) - (1 - t) * np.log(1 - p)), rel=1e-5)


def test_train_learns_and_test_infer_agree():
    x, y = L.data("x", [3]), L.data("y", [], "i32")
    out = L.fc(L.fc(x, 8, act="relu"), 2, act="softmax", name="out")    # act="softmax": out.prob after the logits
    cost = L.classification_cost(out, y)                                  # trains on the logits
    assert out.name == "out.prob" and cost.inputs[0].name == "out"
    params = netc.parameters.create(cost, seed=0)
    data = _samples(256)
    r = netc.train(cost, params, netc.reader.shuffle(lambda: iter(data), 256, seed=0), netc.optimizer.Adam(0.05),
                   num_passes=4, batch_size=32, threads=1)
    result = netc.test(cost, params, lambda: iter(_samples(200, seed=9)), batch_size=50)
    assert result.metrics["accuracy"] > 0.9 and r["iterations"] == 32
    probs = netc.infer(out, params, [s[0] for s in _samples(200, seed=9)], batch_size=64)   # chunks: 64, ..., 8
    labels = np.array([s[1] for s in _samples(200, seed=9)])
    assert probs.shape == (200, 2) and (probs.argmax(1) == labels).mean() == pytest.approx(result.metrics["accuracy"])


def test_cost_plot(tmp_path):
    pytest.importorskip("matplotlib")
    x, y = L.data("x", [3]), L.data("y", [], "i32")
    cost = L.softmax_loss(L.fc(x, 2), y)
    path = tmp_path / "cost.png"
    netc.train(cost, netc.parameters.create(cost), lambda: iter(_samples(8)), batch_size=2,
               event_handler=netc.plot.CostPlot(str(path)))
    assert path.read_bytes()[:4] == b"\x89PNG"


# -- NetBuilder ---------------------------------------------------------------------------------------

def test_netbuilder_runs_ranges_of_its_schedule():
    net = netc.NetBuilder("mlp", batch_size=8)
    x = net.add_input("x", [3])
    net.add_input("label", [], "i32")
    h = net.add_op("InnerProduct", [x], num_outputs=4, activation="relu", name="h")
    assert h.shape == (8, 4)                               # inferred as it is added
    line = here() + 2
    with pytest.raises(netc.api.Error) as e:
        net.add_op("Elementwise", [h, x])
    assert f"test_api.py:{line}:" in str(e.value) and "identical shapes" in str(e.value)
    y = net.add_op("InnerProduct", [h], num_outputs=2, name="y")
    cost = net.add_op("SoftmaxLoss", [y, "label"], name="cost")
    samples = _samples(8)
    feed = {"x": np.stack([s[0] for s in samples]), "label": np.array([s[1] for s in samples])}
    assert net.schedule() == ["x", "label", "h", "y", "cost"]
    forward = net.run(feed)
    net.backward_from(cost)
    net.add_optimization(0.5, "sgd")
    sched = net.schedule()
    assert sched[:6] == ["x", "label", "lr", "h", "y", "cost"] and sched[-1].endswith(".update")
    only_forward = net.run(feed, end="cost")
    assert set(only_forward) == {"x", "label", "lr", "h", "y", "cost"} and "cost.grad" not in net.values
    assert float(only_forward["cost"]) == pytest.approx(float(forward["cost"]))
    w = net.parameters["y.weight"].clone()
    grads = net.run(begin=sched.index("cost") + 1, end="h.weight.grad")    # a segment, from the workspace
    assert "y.weight.grad" in grads and torch.equal(net.parameters["y.weight"], w)
    net.run(begin=sched.index("h.weight.grad") + 1)                       # the rest: updates
    assert not torch.equal(net.parameters["y.weight"], w) and net.optimizer.steps == 1
    costs = [float(net.run(feed)["cost"]) for _ in range(20)]           # whole steps
    assert costs[-1] < costs[0]


# -- the examples, in their fast mode -----------------------------------------------------------------

@pytest.mark.parametrize("script", ["digits.py", "ranking.py", "gan.py", "text_classification.py"])
def test_examples_run(script, tmp_path):
    pytest.importorskip("sklearn")
    args = [sys.executable, str(ROOT / "examples" / "python" / script), "--fast"]
    if script == "gan.py":
        args += ["--plot", str(tmp_path / "gan.png") if _has("matplotlib") else ""]
    env = dict(os.environ, NETC_EXAMPLES_FAST="1")
    r = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert {"digits.py": "held-out accuracy", "ranking.py": "held-out ranking accuracy",
            "gan.py": "generator loss", "text_classification.py": "held-out accuracy"}[script] in r.stdout


def _has(module) -> bool:
    try:
        __import__(module)
        return True
    except ImportError:
        return False


def test_the_python_page_runs(tmp_path, monkeypatch):
    """Every ```python block of docs/python.md, in order, as one program (locations: the page's lines)."""
    pytest.importorskip("sklearn")
    pytest.importorskip("matplotlib")
    page = ROOT / "docs" / "python.md"
    for d in ("docs", "examples"):
        (tmp_path / d).symlink_to(ROOT / d)
    (tmp_path / "build").mkdir()
    monkeypatch.chdir(tmp_path)
    lines = page.read_text().split("\n")
    scope: dict = {"__name__": "python_md"}
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            j = lines.index("```", i + 1)
            code = "\n" * (i + 1) + "\n".join(lines[i + 1:j])      # keeps the page's line numbers
            exec(compile(code, "docs/python.md", "exec"), scope)
            i = j
        i += 1
    assert scope["result"].metrics["accuracy"] > 0.85
    listing = page.read_text().split("```nd\n", 1)[1].split("```", 1)[0]     # the page's .nd is to_nd()'s
    assert scope["net"].to_nd(batch=32) == listing


def test_a_loaded_file_trains_with_its_own_optimizer():
    conf = ROOT.parent / "shared" / "corpus" / "singa" / "0.1.0_mnist_conv.conf"
    if not conf.exists():
        pytest.skip("SINGA corpus not available")
    top = netc.load(str(conf))                         # SINGA's updater: momentum 0.9, an inverse schedule
    assert top.module_attrs["optimizer"]["name"] == "momentum"
    params = netc.parameters.create(top)
    rng = np.random.default_rng(0)
    batch = list(zip(rng.random((2, 28, 28, 1), dtype=np.float32), [1, 2]))
    netc.train(top, params, lambda: iter([batch]), threads=1)
    assert any(n.endswith(".velocity") for n in params.state)


def test_plot_without_matplotlib_says_how(monkeypatch):
    for m in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, m)
    monkeypatch.setitem(sys.modules, "matplotlib", None)        # `import matplotlib` raises ImportError
    line = here() + 2
    with pytest.raises(netc.api.Error) as e:
        netc.plot.CostPlot("cost.png")
    assert "pip install 'netc[plot]'" in str(e.value) and f"test_api.py:{line}:" in str(e.value)


@pytest.mark.parametrize("opt,state", [(lambda: netc.optimizer.AdaDelta(), ("square_avg", "acc_delta")),
                                       (lambda: netc.optimizer.by_name("adamax", 0.01), ("adamax_m", "adamax_u"))])
def test_adadelta_and_adamax_train_through_the_api(opt, state):
    """The two updaters SINGA added last (kAdaDelta, kAdamMax) from the API: their update ops (checked
    against torch.optim in test_singa_updaters.py) run in netc.train, keep their state in the ParameterSet,
    and the loss falls."""
    x, y = L.data("x", [3]), L.data("y", [], "i32")
    cost = L.softmax_loss(L.fc(L.fc(x, 6, act="relu"), 2), y)
    params = netc.parameters.create(cost)
    costs = []
    netc.train(cost, params, lambda: iter(_samples(64)), opt(), batch_size=16, num_passes=6,
               event_handler=lambda e: costs.append(e.cost) if isinstance(e, netc.event.EndIteration) else None)
    assert costs[-1] < costs[0], costs
    assert any(k.endswith("." + state[0]) for k in params.state) and any(k.endswith("." + state[1]) for k in params.state)
