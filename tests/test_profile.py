"""Prediction beside measurement, without a GPU: netc_profile (CUDA events around every copy and
launch) against the fake driver (tests/data/fake_libcuda.c: its event times come from a fake clock
that every copy and launch advances, so each interval says what ran inside it), Net.profile,
`netc run NET.so --profile` end to end, the per-launch costs in the manifest against explain's
per-layer numbers (also when the launches come from the lowering cache), and `netc explain
--device D --profile PROF.json` with a hand-written profile. Timing on a real GPU:
tests/gpu/test_profile_gpu.py."""
from __future__ import annotations

import ctypes
import json
import re
import shutil
import subprocess

import pytest
import torch

from netc.runtime import native as N
from test_native import ROOT, fakegpu, module_of, netc, run_main  # noqa: F401  (fixtures; `fake`: conftest.py)

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")

# a fused group (conv + batch norm + relu), a concat that copies a network input into its slice,
# pooling, an inner product, an elementwise sum with a second input, two outputs
PROF = """
network prof {
  input data: f32[4, 8, 8, 3]
  input extra: f32[4, 10]
  c1 = Convolution(data) { filter: [1, 1, 3, 4], padding: SAME, activation: relu }
  c2 = Convolution(data) { filter: [3, 3, 3, 4], padding: SAME }
  bn = BatchNorm(c2)
  r2 = ReLU(bn)
  cat = Concatenate(c1, r2, data) { dim: 3 }
  pool = Pooling(cat) { ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1] }
  ip = InnerProduct(pool) { num_outputs: 10 }
  s = Elementwise(ip, extra) { operation: sum }
  prob = Softmax(s)
  output prob, ip
}
"""


@pytest.fixture(scope="module")
def prof(tmp_path_factory):
    d = tmp_path_factory.mktemp("prof")
    (d / "prof.nd").write_text(PROF)
    r = netc("compile", d / "prof.nd", "-o", d / "prof.so")
    assert r.returncode == 0, r.stderr
    return d


@pytest.fixture(scope="module")
def fake_noevents(tmp_path_factory):
    f = tmp_path_factory.mktemp("fake_noev") / "libcuda_noevents.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-DNETC_FAKE_NO_EVENTS", "-o", str(f),
                    str(ROOT / "tests/data/fake_libcuda.c")], check=True)
    return f


def _cost(line: str) -> float:
    """The fake clock's advance (ms) for one logged copy or launch (fake_libcuda.c)."""
    w = line.split()
    if w[0] == "dtod":
        return 0.001 + int(w[3]) * 1e-6
    if w[0] == "copy2d":
        return 0.001 + int(w[5]) * int(w[6]) * 1e-6
    if w[0] == "launch":
        return 0.002 + 0.001 * int(w[2]) * int(w[3]) * int(w[4])
    return 0.0


def _intervals(lines: list) -> list:
    """Per pair of consecutive event records in `lines` (one run): the fake clock's advance, and the
    operations between them."""
    marks = [i for i, ln in enumerate(lines) if ln.startswith("record ")]
    return [(sum(_cost(ln) for ln in lines[a + 1:b]), [ln.split()[0] for ln in lines[a + 1:b]])
            for a, b in zip(marks, marks[1:])]


def _ops(lines):
    return [ln for ln in lines if ln.startswith(("dtod", "copy2d", "launch"))]


# ------------------------------------------------------------------------------------------- the C ABI

def test_header_and_symbols(prof):
    h = (prof / "prof.h").read_text()
    assert ("int netc_profile(void* net, const void* const* inputs, void* const* outputs, int batch, void* stream, "
            "float* ms);") in h
    assert "int netc_num_launches(void);" in h
    lib = ctypes.CDLL(str(prof / "prof.so"))
    assert lib.netc_num_launches() == len(N.read_manifest(prof / "prof.so")["schedule"]) == 7


def test_netc_profile_times_each_part_in_order(prof, fakegpu):
    """netc_profile writes NETC_NLAUNCHES + 2 floats: the input copies, every launch in schedule
    order, the output copies; each is the fake clock's advance over exactly those operations."""
    with N.load(prof / "prof.so", seed=0) as net:
        lib, h = net._lib, net._handle()
        n = lib.netc_num_launches()
        xs = net.random_inputs(1, batch=3)
        outs = [torch.empty((3, 10)) for _ in net.outputs]
        ins_c = (ctypes.c_void_p * 2)(*[xs[s.name].data_ptr() for s in net.inputs])
        outs_c = (ctypes.c_void_p * 2)(*[t.data_ptr() for t in outs])
        ms = (ctypes.c_float * (n + 3))(*([-7.0] * (n + 3)))           # one float more, as a sentinel
        before = len(fakegpu())
        assert lib.netc_profile(h, ins_c, outs_c, 3, None, ms) == 0, lib.netc_last_error(h)
        assert ms[n + 2] == -7.0                                        # exactly n + 2 written
        new = fakegpu()[before:]
        # the events are created on the first call, n + 3 of them, recorded in order, the last waited for
        ids = [int(ln.split()[1]) for ln in new if ln.startswith("event_create")]
        assert len(ids) == n + 3
        assert [int(ln.split()[1]) for ln in new if ln.startswith("record")] == ids
        assert new[-1] == f"event_sync {ids[-1]}"
        parts = _intervals(new)
        assert len(parts) == n + 2
        assert parts[0][1] == ["dtod", "dtod"] and parts[-1][1] == ["dtod", "dtod"]
        assert all(kinds == ["launch"] for _, kinds in parts[1:-1])
        entries = [k["entry"] for k in net.manifest["kernels"]]
        launched = [ln.split()[1] for ln in new if ln.startswith("launch")]
        assert launched == [entries[e["kernel"]] for e in net.manifest["schedule"]]      # schedule order
        for i, (t, _) in enumerate(parts):
            assert ms[i] == pytest.approx(t, rel=1e-5), i
        # a second call creates no events; closing destroys them all
        assert lib.netc_profile(h, ins_c, outs_c, 3, None, ms) == 0
        assert not [ln for ln in fakegpu()[before + len(new):] if ln.startswith("event_create")]
        before = len(fakegpu())
    assert sorted(int(ln.split()[1]) for ln in fakegpu()[before:] if ln.startswith("event_destroy")) == sorted(ids)


def test_forward_and_profile_launch_the_same(prof, fakegpu):
    """One launcher body serves both: the same copies and launches with the same arguments."""
    with N.load(prof / "prof.so", seed=0) as net:
        xs = net.random_inputs(2, batch=2)
        n0 = len(fakegpu())
        net.run(xs)
        n1 = len(fakegpu())
        net.profile(xs, repeat=1, warmup=0)
        n2 = len(fakegpu())
        fwd, pro = fakegpu()[n0:n1], fakegpu()[n1:n2]
        strip = re.compile(r"^dtod (\d+) (\d+)")   # output buffers are new tensors: compare the sources

        def key(ln):
            return strip.sub(lambda m: "dtod (out) " + m.group(2), ln) if ln.startswith("dtod") else ln
        out_srcs = 2                                     # the two output copies write into fresh tensors
        a, b = _ops(fwd), _ops(pro)
        assert len(a) == len(b) == 2 + 7 + 2
        assert a[:-out_srcs] == b[:-out_srcs] and [key(x) for x in a[-out_srcs:]] == [key(x) for x in b[-out_srcs:]]
        assert not [ln for ln in fwd if ln.startswith(("record", "event"))]   # forward records no event


def test_driver_without_event_functions(prof, fakegpu, fake_noevents, monkeypatch):
    """The library still loads and runs; profiling says why it cannot."""
    monkeypatch.setenv("NETC_LIBCUDA", str(fake_noevents))
    with N.load(prof / "prof.so", seed=0) as net:
        xs = net.random_inputs(0)
        net.run(xs)
        with pytest.raises(N.NetcRuntimeError, match=r"prof: profiling failed: netc_profile: the CUDA driver has no "
                                                     r"cuEventCreate: cannot time the launches with CUDA events"):
            net.profile(xs)


def test_event_creation_failure(prof, fake, fakegpu, monkeypatch):
    with N.load(prof / "prof.so", seed=0) as net:
        xs = net.random_inputs(0)
        monkeypatch.setenv("NETC_FAKE_FAIL_EVENT", "1")
        with pytest.raises(N.NetcRuntimeError, match=r"prof: profiling failed: netc_profile: cuEventCreate failed: "
                                                     r"fake error \(CUresult 2\)"):
            net.profile(xs)
        monkeypatch.delenv("NETC_FAKE_FAIL_EVENT")
        assert len(net.profile(xs, repeat=1, warmup=0)) == 9                # the events come on the next call
        monkeypatch.setenv("NETC_FAKE_FAIL_LAUNCH", "1")
        with pytest.raises(N.NetcRuntimeError, match=r"profiling failed: netc_profile: launching \S+ for layer 'c1' "
                                                     r"failed"):
            net.profile(xs)


# ------------------------------------------------------------------------------------------- Net.profile

def test_net_profile(prof, fakegpu):
    with N.load(prof / "prof.so", seed=0) as net:
        m = net.manifest
        xs = net.random_inputs(0, batch=3)
        n0 = len(fakegpu())
        rows = net.profile(xs, repeat=4, warmup=2)
        log = fakegpu()[n0:]
        runs = [i for i, ln in enumerate(log) if ln.startswith("event_sync")]
        assert len(runs) == 6                                             # warm-up and timed runs
        assert [r["kind"] for r in rows] == ["input copy"] + ["launch"] * 7 + ["output copy"]
        entries = {i: k["entry"] for i, k in enumerate(m["kernels"])}
        for r, e in zip(rows[1:-1], m["schedule"]):
            assert (r["step"], r["layers"], r["op"], r["flops"], r["bytes"], r["group"]) == \
                (e["step"], e["layers"], e["op"], e["flops"], e["bytes"], e["group"])
            assert r["kernel"] == entries[e["kernel"]]
        assert rows[1]["op"] == "netc.conv2d" and rows[2]["layers"] == ["c2", "bn", "r2"]
        assert rows[0]["layers"] == ["data", "extra"] and rows[-1]["layers"] == ["prob", "ip"]
        assert rows[0]["bytes"] == 2 * 4 * (768 + 40) and rows[0]["flops"] == 0        # at the compiled batch
        # the fake clock is deterministic: every run takes the same times, those of its log
        last = log[runs[-2] + 1:runs[-1] + 1]
        for r, (t, _) in zip(rows, _intervals(last)):
            assert r["median_ms"] == pytest.approx(t, rel=1e-5) and r["min_ms"] == pytest.approx(t, rel=1e-5)
        for bad, msg in [(dict(repeat=0), "repeat must be an integer >= 1, got 0"),
                         (dict(repeat=2.5), "repeat must be an integer >= 1"),
                         (dict(warmup=-1), "warmup must be an integer >= 0")]:
            with pytest.raises(N.NetcInputError, match=msg):
                net.profile(xs, **bad)
        with pytest.raises(N.NetcInputError, match="missing input 'extra'"):
            net.profile({"data": xs["data"]})
        with pytest.raises(N.NetcInputError, match="takes the inputs as a dict"):
            net.profile([xs["data"], xs["extra"]])


def test_library_without_netc_profile(prof, fakegpu):
    """A library built before netc_profile: Net.profile asks for a recompile."""
    with N.load(prof / "prof.so", seed=0) as net:
        real = net._lib

        class Old:
            def __getattr__(self, name):
                if name in ("netc_profile", "netc_num_launches"):
                    raise AttributeError(name)
                return getattr(real, name)
        net._lib = Old()
        try:
            with pytest.raises(N.NetcRuntimeError, match=r"'prof.so' was built by an older netc without netc_profile "
                                                         r".*recompile it with this netc"):
                net.profile(net.random_inputs(0))
            net.run(net.random_inputs(0))                                  # forward still works
        finally:
            net._lib = real


# ------------------------------------------------------------------------------------------- costs in the manifest

def _compiled(src):
    """The module and memory plan `netc compile` builds (the pipeline, fuse, plan-memory)."""
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load
    from netc.pipelines import Options, Plan, compile
    diag = DiagnosticEngine()
    mod = load(str(src), diag)
    ctx = compile(mod, Options(phase="test"), diag, plan=Plan(mode="inference"))
    return mod, next(iter(ctx.notes["memory_plan"].values()))


def test_manifest_costs_are_explains(prof):
    from netc.explain import layer_rows
    m = N.read_manifest(prof / "prof.so")
    rows = {r["name"]: r for r in layer_rows(module_of(prof / "prof.nd"))}
    sched = m["schedule"]
    for e in sched:
        if e["op"] == "netc.concat":
            continue
        assert e["flops"] == sum(rows[n]["flops_fwd"] for n in e["layers"]), e
        assert e["bytes"] == sum(rows[n]["bytes"] for n in e["layers"]), e
        assert e["op"] == "netc." + rows[e["layers"][0]]["op"]
    # every layer with arithmetic runs in exactly one launch: the sums agree
    assert sum(e["flops"] for e in sched) == sum(r["flops_fwd"] for r in rows.values()) == 84224
    # the concat copies the network input `data` into its slice: read and written, no FLOPs
    (cat,) = [e for e in sched if e["op"] == "netc.concat"]
    assert cat["group"].endswith(":data") and cat["flops"] == 0 and cat["bytes"] == 2 * 4 * 8 * 8 * 3 * 4
    assert [e["op"] for e in sched] == ["netc.conv2d", "netc.conv2d", "netc.concat", "netc.maxpool",
                                        "netc.inner_product", "netc.elementwise", "netc.softmax"]


def test_costs_from_the_lowering_cache(prof):
    """A warm compile takes its launches from the lowering cache (no IR ops in them): the costs come
    from the IR by layer name, the same as a cold compile's."""
    from netc.codegen import launch_costs, lowering_cache
    mod, plan = _compiled(prof / "prof.nd")
    net = mod.networks()[0]
    low = lowering_cache.load(lowering_cache.key(net, plan, 90))
    assert low is not None and not hasattr(low.launches[0], "call")      # the compile stored it
    sched = N.read_manifest(prof / "prof.so")["schedule"]
    assert launch_costs(net, plan, low.launches) == [dict(op=e["op"], flops=e["flops"], bytes=e["bytes"])
                                                      for e in sched]
    r = netc("compile", prof / "prof.nd", "-o", prof / "warm.so")
    assert r.returncode == 0, r.stderr
    assert N.read_manifest(prof / "warm.so")["schedule"] == sched


# ------------------------------------------------------------------------------------------- netc run NET.so --profile

def test_cli_run_profile(prof, fakegpu, capsys, tmp_path):
    from netc.costmodel import get_device, layer_time
    out_json = tmp_path / "p.json"
    assert run_main("run", prof / "prof.so", "--profile", "--device", "h100", "--repeat", "3",
                    "--profile-out", out_json) == 0
    cap = capsys.readouterr()
    text = cap.out
    assert "wrote " + str(out_json) in cap.err
    assert "profile of prof (prof.so) at batch 4" in text and "H100-SXM5 (h100)" in text
    assert "scaled by b/B" not in text
    lines = text.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("step"))
    for col in ("kernel", "layers", "measured us", "predicted us", "meas/pred", "TFLOP/s", "GB/s"):
        assert col in lines[head]
    body = lines[head + 2:head + 2 + 9]
    assert "(input copy)" in body[0] and "(output copy)" in body[-1]
    assert body[2].split()[:3] == ["2", "conv2d_kernel", "c2,bn,r2"]
    assert "launches: 7, measured" in text and "copies: inputs" in text
    assert "efficiency per op type" in text
    doc = json.loads(out_json.read_text())
    assert doc["costmodel_device"] == "h100" and doc["device_name"] is None and doc["batch"] == 4
    assert doc["compiled_batch"] == 4 and doc["repeat"] == 3 and doc["netc"] and doc["date"]
    assert len(doc["rows"]) == 9
    dev = get_device("h100")
    by_type: dict = {}
    for r in doc["rows"]:
        assert r["predicted_ms"] == pytest.approx(layer_time(dev, r["flops"], r["bytes"]) * 1e3)
        assert r["ratio"] == pytest.approx(r["median_ms"] / r["predicted_ms"])
        if r["kind"] == "launch":
            m, p = by_type.get(r["op_type"], (0.0, 0.0))
            by_type[r["op_type"]] = (m + r["median_ms"], p + r["predicted_ms"])
            assert f"{r['tflops']:.3f}" in text or r["tflops"] is None
    assert set(doc["factors"]) == {"conv2d", "concat", "maxpool", "inner_product", "elementwise", "softmax"}
    for k, (m, p) in by_type.items():
        assert doc["factors"][k] == pytest.approx(p / m) and doc["op_types"][k]["factor"] == pytest.approx(p / m)
    assert doc["op_types"]["conv2d"]["launches"] == 2
    t = doc["totals"]
    assert t["launches_ms"] == pytest.approx(sum(r["median_ms"] for r in doc["rows"] if r["kind"] == "launch"))
    assert t["total_ms"] == pytest.approx(t["launches_ms"] + t["input_copy_ms"] + t["output_copy_ms"])


def test_cli_run_profile_at_a_smaller_batch(prof, fakegpu, capsys, tmp_path):
    out_json = tmp_path / "p.json"
    assert run_main("run", prof / "prof.so", "--profile", "--device", "a100", "--batch", "1", "--repeat", "1",
                    "--profile-out", out_json) == 0
    text = capsys.readouterr().out
    assert "at batch 1 of 4" in text and "scaled by b/B = 1/4" in text
    doc = json.loads(out_json.read_text())
    man = {tuple(e["layers"]): e for e in N.read_manifest(prof / "prof.so")["schedule"]}
    for r in doc["rows"]:
        if r["kind"] == "launch":
            e = man[tuple(r["layers"])]
            assert r["flops"] == e["flops"] / 4 and r["bytes"] == e["bytes"] / 4
    assert doc["scale"] == 0.25 and doc["costmodel_device"] == "a100"


@pytest.mark.parametrize("name,key", [("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200", "h200"),
                                      ("NVIDIA A100-SXM4-40GB", "a100")])
def test_cli_profile_device_from_torch(prof, fakegpu, capsys, tmp_path, monkeypatch, name, key):
    monkeypatch.setattr(N, "device_name", lambda device=None: name)
    assert run_main("run", prof / "prof.so", "--profile", "--repeat", "1", "--profile-out", tmp_path / "p.json") == 0
    capsys.readouterr()
    assert json.loads((tmp_path / "p.json").read_text())["costmodel_device"] == key


def test_cli_profile_errors(prof, fakegpu, capsys, monkeypatch, tmp_path):
    so = prof / "prof.so"
    cases = [((so, "--profile"), "torch sees no CUDA device to name it: give --device"),
             ((prof / "prof.nd", "--profile", "--device", "h100"), "compile it first (netc compile"),
             ((so, "--profile", "--device", "h100", "--compare"), "--profile times the network and --compare checks"),
             ((so, "--profile", "--device", "h100", "-o", tmp_path / "o.npz"), "-o/--output has nothing to write"),
             ((so, "--profile", "--device", "h100", "--repeat", "0"), "--repeat takes the number of timed runs (at "
                                                                      "least 1), got 0"),
             ((so, "--repeat", "3"), "--repeat applies to --profile"),
             ((so, "--profile-out", tmp_path / "p.json"), "--profile-out applies to --profile"),
             ((so, "--device", "h100", "--repeat", "2"), "--repeat, --device apply to --profile"),
             ((so, "--profile", "--device", "h999"), "unknown device 'h999'"),
             ((so, "--profile", "--device", "h100", "--profile-out", tmp_path / "no" / "p.json"), "no directory"),
             ((so, "--profile", "--device", "h100", "--reference"), "--reference applies to network sources")]
    for args, msg in cases:
        assert run_main("run", *args) == 1, args
        err = capsys.readouterr().err
        assert msg in err and "Traceback" not in err, (args, err)
    monkeypatch.setattr(N, "device_name", lambda device=None: "Tesla V100-SXM2-16GB")
    assert run_main("run", so, "--profile") == 1
    assert "the cost model has no device for 'Tesla V100-SXM2-16GB': give --device" in capsys.readouterr().err


def test_cli_profile_without_driver_is_exit_1(prof):
    r = netc("run", prof / "prof.so", "--profile", "--device", "h100",
             env={"NETC_LIBCUDA": "/nonexistent/libcuda.so.1"})
    assert r.returncode == 1 and "cannot load the CUDA driver" in r.stderr


# ------------------------------------------------------------------------------------------- explain --profile

def _explain_json(capsys, *args):
    assert run_main("explain", *args, "--format", "json") == 0
    return json.loads(capsys.readouterr().out)


def test_explain_profile_applies_the_factors(prof, capsys, tmp_path):
    p = tmp_path / "hand.json"
    p.write_text(json.dumps({"costmodel_device": "h100", "device_name": "NVIDIA H100 80GB HBM3",
                             "factors": {"conv2d": 0.5, "inner_product": 0.25, "lstm": 2.0}}))
    src = prof / "prof.nd"
    plain = _explain_json(capsys, src, "--device", "h100")
    cal = _explain_json(capsys, src, "--device", "h100", "--profile", p)
    factors = {"conv2d": 0.5, "inner_product": 0.25}
    for a, b in zip(plain["layers"], cal["layers"]):
        f = factors.get(a["op"], 1.0)
        assert b["efficiency"] == f and "efficiency" not in a
        for k in ("time_fwd_ms", "time_bwd_data_ms", "time_bwd_filter_ms"):
            assert b[k] == a[k] / f, (a["name"], k)
        assert b["time_fetch_ms"] == a["time_fetch_ms"]
    assert cal["totals"]["time_fwd_ms"] == pytest.approx(sum(r["time_fwd_ms"] for r in cal["layers"]))
    assert cal["totals"]["time_fwd_ms"] > plain["totals"]["time_fwd_ms"]
    c = cal["calibration"]
    assert c["file"] == str(p) and c["device"] == "h100" and c["device_name"] == "NVIDIA H100 80GB HBM3"
    assert c["factors"] == {"conv2d": 0.5, "inner_product": 0.25, "lstm": 2.0}
    assert c["calibrated"] == ["conv2d", "inner_product"]
    assert "input" not in c["uncalibrated"] and {"maxpool", "softmax", "concat"} <= set(c["uncalibrated"])
    assert "calibration" not in plain
    # the text report: an efficiency column and which types were calibrated
    assert run_main("explain", src, "--brief", "--device", "h100", "--profile", p) == 0
    cap = capsys.readouterr()
    assert "warning" not in cap.err
    lines = cap.out.splitlines()
    head = next(ln for ln in lines if ln.startswith("layer"))
    assert head.split()[-1] == "efficiency"
    assert next(ln for ln in lines if ln.startswith("c2 ")).split()[-1] == "0.5"
    assert next(ln for ln in lines if ln.startswith("pool ")).split()[-1] == "1"
    note = next(ln for ln in lines if ln.startswith("calibrated with"))
    assert "conv2d 0.5, inner_product 0.25" in note and "uncalibrated (1.0): " in note and "maxpool" in note


def test_explain_profile_written_by_run(prof, fakegpu, capsys, tmp_path):
    """The file `netc run --profile-out` writes is what explain --profile reads."""
    p = tmp_path / "p.json"
    assert run_main("run", prof / "prof.so", "--profile", "--device", "h100", "--repeat", "1",
                    "--profile-out", p) == 0
    capsys.readouterr()
    doc = json.loads(p.read_text())
    cal = _explain_json(capsys, prof / "prof.nd", "--device", "h100", "--profile", p)
    rows = {r["name"]: r for r in cal["layers"]}
    assert rows["c1"]["efficiency"] == doc["factors"]["conv2d"]
    assert rows["ip"]["efficiency"] == doc["factors"]["inner_product"]


def test_explain_profile_device_mismatch_warns(prof, capsys, tmp_path):
    p = tmp_path / "p.json"
    p.write_text(json.dumps({"costmodel_device": "h100", "factors": {"conv2d": 0.5}}))
    assert run_main("explain", prof / "prof.nd", "--brief", "--device", "a100", "--profile", p) == 0
    err = capsys.readouterr().err
    assert f"{p}: warning: the profile was predicted with the cost model's device 'h100', but --device is " \
           f"'a100'" in err


def test_explain_profile_errors(prof, capsys, tmp_path):
    src = prof / "prof.nd"
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"costmodel_device": "h100", "factors": {"conv2d": 0.5}}))
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{\n  "costmodel_device": "h100",\n  "factors": {"conv2d": 0.5,}\n}\n')
    cases = [
        (("--profile", good), "--profile calibrates the cost model's times, which need --device"),
        (("--device", "h100", "--profile", tmp_path / "none.json"),
         f"cannot read the profile '{tmp_path / 'none.json'}': No such file or directory"),
        (("--device", "h100", "--profile", tmp_path), "cannot read the profile"),
        (("--device", "h100", "--profile", bad_json),
         f"{bad_json}:3:29: error: invalid JSON in the profile: Expecting property name enclosed in double quotes"),
        (("--device", "h100", "--profile", _w(tmp_path, "list.json", "[1, 2]")), "is not a netc profile: it has no "
                                                                                  "\"factors\" object"),
        (("--device", "h100", "--profile", _w(tmp_path, "nodev.json", '{"factors": {}}')),
         "has no \"costmodel_device\""),
        (("--device", "h100", "--profile", _w(tmp_path, "neg.json", '{"costmodel_device": "h100", "factors": '
                                                                     '{"conv2d": -1, "relu": "x", "pool": true}}')),
         "an efficiency factor must be a positive number; got 'conv2d': -1, 'relu': \"x\", 'pool': true"),
        (("--device", "h100", "--profile", _w(tmp_path, "bin.json", b"\xff\xfe\x00"),), "not UTF-8 text"),
        (("--device", "h100", "--profile", good, "--workers", "1,2"), "Paleo's simulations (--workers, --hybrid) are "
                                                                      "not calibrated"),
    ]
    for args, msg in cases:
        assert run_main("explain", src, "--brief", *args) == 1, args
        err = capsys.readouterr().err
        assert msg in err and "Traceback" not in err, (args, err)
    # the JSON error quotes the line with a caret under the column
    assert run_main("explain", src, "--brief", "--device", "h100", "--profile", bad_json) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[1] == '  "factors": {"conv2d": 0.5,}' and err[2] == " " * 28 + "^"


def _w(d, name, content):
    f = d / name
    (f.write_bytes if isinstance(content, bytes) else f.write_text)(content)
    return f

