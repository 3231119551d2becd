"""Running compiled networks without a GPU: parameter files (.npz, .safetensors written and read
by netc itself), packing parameters into the manifest's layout, embedded parameters, and
netc.runtime.load / `netc run NET.so` against a fake CUDA driver (tests/data/fake_libcuda.c with
NETC_FAKE_MEM=1: "device" memory is host memory, so CPU tensors stand for device tensors and the
bytes the launcher uploads can be read back). Kernels do not run there: numerics are
tests/gpu/test_gpu.py's job. The PyTorch eager baseline (runtime/eager.py) is checked against the
reference executor here."""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from netc.diagnostics import NetcError
from netc.runtime import native as N
from netc.runtime import params as P

ROOT = Path(__file__).resolve().parents[1]
needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")

TINY = (Path(__file__).resolve().parent / "data" / "tiny_shared_params.nd").read_text()


def netc_start(*args, env=None) -> subprocess.Popen:
    e = dict(os.environ, **(env or {}))
    e.pop("TRITON_INTERPRET", None)   # set by tests/kernels for this process; compile needs real kernels
    return subprocess.Popen([sys.executable, "-m", "netc", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=e)


def netc_wait(p: subprocess.Popen) -> subprocess.CompletedProcess:
    out, err = p.communicate()
    assert "Traceback" not in err, err
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def netc(*args, env=None):
    return netc_wait(netc_start(*args, env=env))


def module_of(path):
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load
    from netc.pipelines import Options, inference
    diag = DiagnosticEngine()
    mod = load(str(path), diag)
    inference(mod, Options(phase="test"), diag)
    assert not diag.has_errors()
    return mod


# ------------------------------------------------------------------------------------------- files

ALL_DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
              torch.int8, torch.uint8, torch.bool]


def test_safetensors_round_trip(tmp_path):
    g = torch.Generator().manual_seed(0)
    ts = {}
    for i, dt in enumerate(ALL_DTYPES):
        x = torch.randn(3, i + 1, generator=g) * 50
        ts[f"t.{i}"] = x > 0 if dt == torch.bool else x.to(dt)
    ts["scalar"] = torch.tensor(2.5)
    ts["empty"] = torch.zeros(0, 4)
    ts["strided"] = torch.arange(12.0).reshape(3, 4).t()          # written contiguous
    f = tmp_path / "p.safetensors"
    P.write_params(f, ts, metadata={"format": "pt", "seed": 3})
    raw = f.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert (8 + n) % 8 == 0                                         # the data starts 8-aligned
    header = json.loads(raw[8:8 + n])
    assert header["__metadata__"] == {"format": "pt", "seed": "3"}
    assert header["t.3"] == {"dtype": "BF16", "shape": [3, 4], "data_offsets": header["t.3"]["data_offsets"]}
    assert header["t.1"]["dtype"] == "F32" and header["t.9"]["dtype"] == "BOOL"
    back, meta = P.read_safetensors(str(f))
    assert meta == {"format": "pt", "seed": "3"} and set(back) == set(ts)
    for k, v in ts.items():
        assert back[k].dtype == v.dtype and torch.equal(back[k], v), k
    # by content when the name says nothing
    g2 = tmp_path / "weights"
    g2.write_bytes(raw)
    assert torch.equal(P.read_params(str(g2))["t.1"], ts["t.1"])


def test_safetensors_written_by_hand_per_the_spec(tmp_path):
    """A file built from the format's description (not by netc's writer): unaligned header, tensors
    stored out of order."""
    a = np.arange(6, dtype="<f4").reshape(2, 3)
    b = np.array([7, -8], dtype="<i8")
    data = b.tobytes() + a.tobytes()
    header = json.dumps({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [16, 40]},
                         "b": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]}}).encode()
    f = tmp_path / "hand.safetensors"
    f.write_bytes(struct.pack("<Q", len(header)) + header + data)
    got = P.read_params(str(f))
    assert torch.equal(got["a"], torch.from_numpy(a)) and torch.equal(got["b"], torch.from_numpy(b))


def _st(tmp_path, header, data=b"", raw_header=None):
    h = raw_header if raw_header is not None else json.dumps(header).encode()
    f = tmp_path / "bad.safetensors"
    f.write_bytes(struct.pack("<Q", len(h)) + h + data)
    return f


@pytest.mark.parametrize("header,data,raw,expect", [
    (None, b"", b"{not json", "invalid JSON in header"),
    ([1, 2], b"", None, "invalid JSON in header"),
    ({"w": {"dtype": "F32", "shape": [2]}}, b"", None, "missing field `data_offsets`"),
    ({"w": {"dtype": "F99", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4, None, "unknown variant `F99`"),
    ({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 4, None, "integer `-1`"),
    ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 16]}}, b"\0" * 8, None, "offset"),
    ({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, None, "invalid shape, data type"),
    ({"v": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "w": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12, None, "invalid offset for tensor `w`"),
    ({"__metadata__": {"k": 1}}, b"", None, "expected a string"),
])
def test_bad_safetensors(tmp_path, header, data, raw, expect):
    """Malformed files: the safetensors package's reason, as a NetcError located at the file (and at
    the tensor's header entry where the package names it)."""
    f = _st(tmp_path, header, data, raw)
    with pytest.raises(NetcError) as e:
        P.read_params(str(f))
    assert "bad.safetensors' is not a valid .safetensors file" in str(e.value) and expect in str(e.value)
    loc = e.value.diagnostics[0].loc
    assert loc is not None and loc.file == str(f)
    if "tensor `w`" in expect:
        assert loc.path == "$.w"


def test_truncated_and_missing_files(tmp_path):
    f = tmp_path / "short.safetensors"
    f.write_bytes(b"\x05\0\0")
    with pytest.raises(NetcError, match="header too small"):
        P.read_params(str(f))
    f.write_bytes(struct.pack("<Q", 1000) + b"{}")
    with pytest.raises(NetcError, match="invalid header length"):
        P.read_params(str(f))
    with pytest.raises(NetcError, match="no such file"):
        P.read_params(str(tmp_path / "none.safetensors"))
    with pytest.raises(NetcError, match="is a directory"):
        P.read_safetensors(str(tmp_path))
    g = tmp_path / "what"
    g.write_text("hello world")
    with pytest.raises(NetcError, match="neither an .npz archive, a .safetensors file nor a Brainstorm"):
        P.read_params(str(g))


def test_npz_round_trip_and_bf16(tmp_path):
    ts = {"conv.weight": torch.randn(3, 3, 2, 4), "conv.bias": torch.randn(4, dtype=torch.float64)}
    P.write_params(tmp_path / "p.npz", ts)
    back = P.read_params(str(tmp_path / "p.npz"))
    assert all(torch.equal(back[k], v) for k, v in ts.items())
    w = torch.randn(5).to(torch.bfloat16)
    P.write_params(tmp_path / "q.npz", {"w": w})              # numpy has no bf16: written as f32, exactly
    assert torch.equal(P.read_params(str(tmp_path / "q.npz"))["w"].to(torch.bfloat16), w)
    with pytest.raises(NetcError, match=".npz or .safetensors"):
        P.write_params(tmp_path / "q.pt", ts)


# ------------------------------------------------------------------------------------------- the blob

@pytest.fixture(scope="module")
def tiny_src(tmp_path_factory):
    f = tmp_path_factory.mktemp("src") / "tiny.nd"
    f.write_text(TINY)
    return f


@pytest.fixture(scope="module")
def tiny_manifest(tiny_src):
    """The manifest's parameter section as compile_module writes it (plan offsets, roles, shares)."""
    from netc.memory.plan import plan_memory
    from netc.memory.model import CONSTANT
    from netc.runtime.reference import _param_roles
    mod = module_of(tiny_src)
    net = mod.networks()[0]
    plan = plan_memory(mod, net, mode="inference")
    roles = _param_roles(mod)
    params, nbytes = [], plan.arenas[CONSTANT].fixed
    for t in plan.tensors:
        if t.kind == "param":
            off = plan.buffers[t.buffer].offset + t.offset
            params.append(dict(name=t.name[1:], shape=list(t.shape), dtype=t.dtype, offset=off, bytes=t.size,
                               role=roles.get(t.name[1:], "weight"),
                               **({"shares": plan.tensors[t.alias_of].name[1:]} if t.alias == "share" else {})))
            nbytes = max(nbytes, off + t.size)
    return dict(parameters=params, param_bytes=nbytes)


def test_random_params_are_the_reference_executors(tiny_src, tiny_manifest):
    from netc.runtime.reference import module_params
    mod = module_of(tiny_src)
    for seed in (0, 7):
        ref = module_params(mod, seed=seed, dtype=torch.float32)
        mine = P.with_aliases(tiny_manifest, P.random_params(tiny_manifest, seed))
        assert set(mine) == set(ref) == {"w_embed", "w_dec", "conv.weight", "conv.bias", "bn.scale", "bn.shift",
                                         "b_enc", "b_dec"}
        for k in ref:
            assert torch.equal(mine[k], ref[k]), (seed, k)
    # roles matter: a scale is drawn around 1, a bias around 0
    assert abs(float(mine["bn.scale"].mean()) - 1) < 0.2 and abs(float(mine["b_dec"].mean())) < 0.1


def test_pack_follows_the_manifest_offsets(tiny_manifest):
    m = tiny_manifest
    vals = P.random_params(m, 5)
    blob = P.layout(m, vals)
    assert blob.dtype == np.uint8 and blob.size == m["param_bytes"]
    covered = np.zeros(blob.size, dtype=bool)
    for p in m["parameters"]:
        seg = blob[p["offset"]:p["offset"] + p["bytes"]]
        owner = p.get("shares", p["name"])
        assert seg.tobytes() == vals[owner].numpy().tobytes(), p["name"]   # an alias reads its owner's bytes
        covered[p["offset"]:p["offset"] + p["bytes"]] = True
    assert not blob[~covered].any()                                       # padding stays zero
    back = P.unpack(m, blob)
    assert back["w_dec"].shape == (16, 72) and torch.equal(back["w_dec"], vals["w_embed"].reshape(16, 72))
    assert all(torch.equal(back[k], v) for k, v in vals.items())
    assert P.pack(m, vals).tobytes() == blob.tobytes()


def test_parameter_problems_are_all_reported(tiny_manifest):
    m = tiny_manifest
    vals = P.random_params(m, 0)
    given = dict(vals)
    del given["b_dec"]                                    # missing
    given["conv.weigth"] = given.pop("conv.weight")       # misspelt (so conv.weight is missing too)
    given["b_enc"] = torch.zeros(15)                       # misshaped
    given["bn.scale"] = torch.ones(8, dtype=torch.bool)    # not a number type
    given["w_dec"] = torch.zeros(16, 72)                   # an alias that disagrees with its owner
    with pytest.raises(NetcError) as e:
        P.complete(m, given, what=" in 'p.npz'")
    msgs = [d.message for d in e.value.diagnostics]
    assert any("unknown parameter 'conv.weigth' in 'p.npz'; did you mean 'conv.weight'?" in s for s in msgs)
    assert any("missing parameters" in s and "'conv.weight'" in s and "'b_dec'" in s for s in msgs)
    assert any("'b_enc' in 'p.npz' has shape [15], but the network expects [16]" in s for s in msgs)
    assert any("'bn.scale'" in s and "dtype bool" in s for s in msgs)
    assert any("'w_dec'" in s and "alias of 'w_embed'" in s for s in msgs)
    # with a seed the missing ones are random; the rest converted (f64 -> f32), the alias may match
    ok = {"conv.bias": vals["conv.bias"].double(), "w_dec": vals["w_embed"].reshape(16, 72)}
    full = P.complete(m, ok, seed=0)
    assert full["conv.bias"].dtype == torch.float32 and torch.equal(full["w_embed"], vals["w_embed"])


# ------------------------------------------------------------------------------------------- the library

@pytest.fixture(scope="module")
def built(tiny_src, tmp_path_factory):
    """tiny.so (parameters at run time), tiny_emb.so (embedded, random seed 3), tiny_file.so
    (embedded from a .safetensors file holding the seed-9 values), and the result of a compile
    with a bad parameter file (missing and misshaped parameters): the compiles run side by side."""
    from netc.runtime.reference import module_params
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler")
    d = tmp_path_factory.mktemp("so")
    vals = module_params(module_of(tiny_src), seed=9, dtype=torch.float32)
    del vals["w_dec"]                                   # an alias: its owner's storage
    P.write_params(d / "p9.safetensors", vals)
    del vals["b_dec"]
    vals["b_enc"] = torch.zeros(3)
    P.write_params(d / "bad.safetensors", vals)
    runs = [netc_start("compile", tiny_src, "-o", d / "tiny.so"),
            netc_start("compile", tiny_src, "-o", d / "tiny_emb.so", "--embed-params", "--seed", "3"),
            netc_start("compile", tiny_src, "-o", d / "tiny_file.so", "--params", d / "p9.safetensors"),
            netc_start("compile", tiny_src, "-o", d / "bad.so", "--params", d / "bad.safetensors")]
    results = [netc_wait(p) for p in runs]
    for r in results[:3]:
        assert r.returncode == 0, r.stderr
    (d / "bad.rc").write_text(f"{results[3].returncode}\n{results[3].stderr}")
    return d


@pytest.fixture
def fakegpu(fake, tmp_path, monkeypatch):
    """The fake driver with host memory, and torch's CPU standing in for the CUDA device. Returns a
    function giving the log's lines so far."""
    log = tmp_path / "fake.log"
    monkeypatch.setenv("NETC_LIBCUDA", str(fake))
    monkeypatch.setenv("NETC_FAKE_MEM", "1")
    monkeypatch.setenv("NETC_FAKE_LOG", str(log))
    monkeypatch.setattr(N, "_torch_device", lambda device=None: torch.device("cpu"))
    return lambda: log.read_text().splitlines() if log.exists() else []


def _arena(lines):
    alloc = [ln.split() for ln in lines if ln.startswith("alloc")][-1]
    return int(alloc[2]), int(alloc[1])


def _const_region(m):
    return m["memory"]["arena_bytes"] - m["memory"]["batch_bytes_per_sample"] * m["batch"]


def test_manifest_and_specs(built):
    m = N.read_manifest(built / "tiny.so")
    assert m["params_embedded"] is False and m["network"] == "tiny" and m["batch"] == 4
    assert {p["name"]: p.get("role") for p in m["parameters"]}["bn.shift"] == "shift"
    assert m["source"]["path"].endswith("tiny.nd") and m["source"]["phase"] == "test"
    emb = N.read_manifest(built / "tiny_emb.so")
    assert emb["params_embedded"] is True and len(emb["params_sha256"]) == 64
    assert emb["params_sha256"] != N.read_manifest(built / "tiny_file.so")["params_sha256"]


def test_set_params_uploads_the_packed_blob(built, fakegpu, tmp_path):
    with N.load(built / "tiny.so") as net:
        assert [s.name for s in net.inputs] == ["x", "y"] and net.inputs[0].shape == (4, 6, 6, 3)
        assert net.inputs[0].dtype == torch.float32 and {s.name for s in net.outputs} == {"prob", "enc"}
        assert len(net.parameters) == 8 and not net.params_embedded and net.embedded_params() is None
        x, y = torch.randn(2, 6, 6, 3), torch.randn(2, 16)
        with pytest.raises(N.NetcInputError, match="set the parameters first"):
            net(x, y)
        base, size = _arena(fakegpu())
        net.set_params(seed=2)
        expect = P.pack(net.manifest, seed=2).tobytes()
        assert ctypes.string_at(base, len(expect)) == expect
        htod = [ln.split() for ln in fakegpu() if ln.startswith("htod")]
        assert htod[-1] == ["htod", str(base), str(len(expect))]
        # from a file, and from a dict: the same bytes
        vals = P.random_params(net.manifest, 11)
        P.write_params(tmp_path / "p.safetensors", vals)
        net.set_params(str(tmp_path / "p.safetensors"))
        assert ctypes.string_at(base, len(expect)) == P.layout(net.manifest, vals).tobytes()
        P.write_params(tmp_path / "p.npz", vals)
        net.set_params(tmp_path / "p.npz")
        net.set_params({k: v.double() for k, v in vals.items()})
        assert ctypes.string_at(base, len(expect)) == P.layout(net.manifest, vals).tobytes()
        assert torch.equal(net.params()["w_dec"], vals["w_embed"].reshape(16, 72))
        with pytest.raises(N.NetcInputError, match="missing parameters"):
            net.set_params({"b_dec": vals["b_dec"]})
        with pytest.raises(N.NetcInputError, match=r"in '.*bad.npz' has shape \[3\]"):
            np.savez(tmp_path / "bad.npz", b_dec=np.zeros(3, np.float32))
            net.set_params(str(tmp_path / "bad.npz"), seed=0)
        with pytest.raises(N.NetcInputError, match="set_params takes a dict"):
            net.set_params(42)


def test_forward_copies_and_launches(built, fakegpu):
    with N.load(built / "tiny.so", seed=0) as net:
        m = net.manifest
        base, _ = _arena(fakegpu())
        const = _const_region(m)
        for b in (4, 1, 3):
            n0 = len(fakegpu())
            x, y = torch.randn(b, 6, 6, 3), torch.randn(b, 16)
            out = net(x, y=y)
            assert set(out) == {"prob", "enc"} and out["prob"].shape == (b, 72) and out["enc"].shape == (b, 16)
            new = fakegpu()[n0:]
            copies = [ln.split() for ln in new if ln.startswith("dtod") or ln.startswith("copy2d")]
            ins, outs = copies[:2], copies[-2:]
            for spec, t, c in zip(m["inputs"], (x, y), ins):
                dst = base + const + spec["arena_offset_per_sample"] * b + spec["offset_in_sample"]
                assert c == ["dtod", str(dst), str(t.data_ptr()), str(b * spec["bytes_per_sample"])]
                assert ctypes.string_at(dst, t.numel() * 4) == t.numpy().tobytes()   # the bytes arrived
            order = [o["name"] for o in m["outputs"]]
            for spec, c in zip(m["outputs"], outs):
                src = base + const + spec["arena_offset_per_sample"] * b + spec["offset_in_sample"]
                assert c == ["dtod", str(out[spec["name"]].data_ptr()), str(src), str(b * spec["bytes_per_sample"])]
            assert len([ln for ln in new if ln.startswith("launch")]) == len(m["schedule"])
            assert order == [s.name for s in net.outputs]
        assert isinstance(net.forward(x, y), list) and set(net.run({"x": x, "y": y})) == {"prob", "enc"}


def test_bad_inputs_name_the_input(built, fakegpu):
    with N.load(built / "tiny.so", seed=0) as net:
        x, y = torch.randn(3, 6, 6, 3), torch.randn(3, 16)
        cases = [
            ((x.double(), y), {}, "input 'x' has dtype float64; 'tiny' takes float32"),
            ((x, torch.randn(3, 15)), {}, r"input 'y' has shape \[3, 15\]; 'tiny' takes \[b, 16\] with 1 <= b <= 4"),
            ((torch.randn(5, 6, 6, 3), torch.randn(5, 16)), {}, "input 'x' has batch 5; 'tiny' was compiled for "
                                                                "batches of 1 to 4"),
            ((torch.randn(0, 6, 6, 3), torch.randn(0, 16)), {}, "input 'x' has batch 0"),
            ((x, torch.randn(2, 16)), {}, "different batch sizes: x 3, y 2"),
            ((x.transpose(1, 2), y), {}, "input 'x' is not contiguous"),
            ((x, y.to("meta")), {}, "input 'y' is on meta; 'tiny' runs on cpu"),
            ((x.numpy(), y), {}, "input 'x' must be a torch tensor, got ndarray"),
            ((x,), {"z": y}, "has no input 'z'"),
            ((x,), {"x": x}, "input 'x' is given twice"),
            ((x,), {}, "missing input 'y'"),
            ((x, y, y), {}, r"takes 2 inputs \(x, y\), got 3"),
            ((x, y), {"stream": "s"}, "stream must be a torch.cuda.Stream"),
        ]
        for args, kw, msg in cases:
            with pytest.raises(N.NetcInputError, match=msg):
                net(*args, **kw)
        with pytest.raises(N.NetcInputError, match="did you mean 'x'"):
            net(X=x, y=y)
        net.close()
        net.close()                                        # idempotent
        with pytest.raises(N.NetcRuntimeError, match="is closed"):
            net(x, y)


def test_launch_failure_is_the_libraries_message(built, fakegpu, monkeypatch):
    with N.load(built / "tiny.so", seed=0) as net:
        monkeypatch.setenv("NETC_FAKE_FAIL_LAUNCH", "1")
        with pytest.raises(N.NetcRuntimeError, match=r"tiny: forward failed: netc_forward: launching \S+ for layer "
                                                     r"'conv.*' failed: fake error \(CUresult 719\)"):
            net(torch.randn(2, 6, 6, 3), torch.randn(2, 16))


def test_embedded_parameters(built, fakegpu):
    with N.load(built / "tiny_emb.so") as net:
        base, _ = _arena(fakegpu())
        expect = P.pack(net.manifest, seed=3).tobytes()
        assert ctypes.string_at(base, len(expect)) == expect       # netc_create uploaded them
        htod = [ln for ln in fakegpu() if ln.startswith("htod")]
        assert len(htod) == 1
        emb = net.embedded_params()
        ref = P.with_aliases(net.manifest, P.random_params(net.manifest, 3))
        assert set(emb) == set(ref) and all(torch.equal(emb[k], ref[k]) for k in ref)
        assert all(torch.equal(net.params()[k], ref[k]) for k in ref)
        net(torch.randn(1, 6, 6, 3), torch.randn(1, 16))          # no set_params needed
        net.set_params(seed=4)                                     # run-time parameters override
        assert ctypes.string_at(base, len(expect)) == P.pack(net.manifest, seed=4).tobytes()
        assert torch.equal(net.embedded_params()["b_dec"], ref["b_dec"])     # the library's copy is unchanged
    with N.load(built / "tiny_file.so") as net:
        base, _ = _arena(fakegpu())
        assert ctypes.string_at(base, net.manifest["param_bytes"]) == P.pack(net.manifest, seed=9).tobytes()


def test_compile_params_errors(built):
    rc, stderr = (built / "bad.rc").read_text().split("\n", 1)
    assert rc == "1"
    assert "missing parameter: 'b_dec'" in stderr and "'b_enc' has shape [3]" in stderr
    assert not (built / "bad.so").exists()


def test_load_errors(built, fake, tmp_path, monkeypatch):
    monkeypatch.setenv("NETC_LIBCUDA", "/nonexistent/libcuda.so.1")
    with pytest.raises(N.NetcRuntimeError, match=r"cannot create 'tiny.so': cannot load the CUDA driver "
                                                 r"\(/nonexistent/libcuda.so.1\)"):
        N.load(built / "tiny.so")
    monkeypatch.setenv("NETC_LIBCUDA", str(fake))
    monkeypatch.setenv("NETC_FAKE_LOG", str(tmp_path / "log"))
    monkeypatch.setenv("NETC_FAKE_CC", "80")
    with pytest.raises(N.NetcRuntimeError, match="compiled for sm_90 but the device is sm_80"):
        N.load(built / "tiny.so")
    monkeypatch.delenv("NETC_FAKE_CC")
    # torch without CUDA: the library is created, but no tensor can be fed to it
    with N.load(built / "tiny.so", seed=0) as net:
        assert net.device is None
        with pytest.raises(N.NetcInputError, match="torch here has no CUDA device"):
            net(torch.randn(1, 6, 6, 3), torch.randn(1, 16))
    c = tmp_path / "abi.c"
    c.write_text('int netc_abi_version(void) { return 99; }\nconst char* netc_manifest(void) { return "{}"; }\n')
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "abi.so"), str(c)], check=True)
    with pytest.raises(N.NetcRuntimeError, match="implements netc ABI version 99, but this netc reads version 4"):
        N.load(tmp_path / "abi.so")
    c.write_text("int something(void) { return 1; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "other.so"), str(c)], check=True)
    with pytest.raises(N.NetcRuntimeError, match="not a network compiled by netc"):
        N.load(tmp_path / "other.so")
    (tmp_path / "text.so").write_text("not a library")
    with pytest.raises(N.NetcRuntimeError, match="cannot load .* as a shared library"):
        N.load(tmp_path / "text.so")
    with pytest.raises(N.NetcRuntimeError, match="no such file"):
        N.load(tmp_path / "none.so")


# ------------------------------------------------------------------------------------------- netc run NET.so

def run_main(*args):
    from netc.cli import main
    return main([str(a) for a in args])


def test_cli_run_so(built, fakegpu, capsys, tmp_path):
    assert run_main("run", built / "tiny.so") == 0
    out = capsys.readouterr().out.splitlines()
    assert [ln.split()[0] for ln in out] == ["prob", "enc"]          # as the source lists them
    assert "[4, 16]" in out[1] and "float32" in out[1] and "crc32=" in out[1]
    assert run_main("run", built / "tiny.so", "--batch", "2", "--seed", "3") == 0
    assert "[2, 72]" in capsys.readouterr().out
    np.save(tmp_path / "x.npy", np.random.rand(3, 6, 6, 3))            # f64 files are converted, as --reference does
    np.save(tmp_path / "y.npy", np.random.rand(3, 16).astype(np.float32))
    assert run_main("run", built / "tiny.so", "--input", f"x={tmp_path / 'x.npy'}", "--input",
                    f"y={tmp_path / 'y.npy'}", "--output", tmp_path / "o.npz") == 0
    with np.load(tmp_path / "o.npz") as z:
        assert z["prob"].shape == (3, 72) and z["prob"].dtype == np.float32
    P.write_params(tmp_path / "p.safetensors", P.random_params(N.read_manifest(built / "tiny.so"), 1))
    assert run_main("run", built / "tiny_emb.so", "--params", tmp_path / "p.safetensors") == 0
    capsys.readouterr()
    htod = [ln.split() for ln in fakegpu() if ln.startswith("htod")]
    assert len(htod) == 2 and htod[0] == htod[1]          # the embedded parameters, then the file's over them
    # user errors: exit 1, one clear line
    for args, msg in [(("--batch", "9"), "batch 9 is outside 1..4"),
                      (("--input", f"x={tmp_path / 'x.npy'}"), "missing input 'y'"),
                      (("--input", f"z={tmp_path / 'x.npy'}"), "has no input 'z'"),
                      (("--input", f"x={tmp_path / 'x.npy'}", "--input", f"y={tmp_path / 'y.npy'}", "--batch", "2"),
                       "--batch 2 contradicts the inputs' batch 3"),
                      (("--reference",), "--reference applies to network sources"),
                      (("--dtype", "f32"), "--dtype applies to network sources"),
                      (("--source", "x.nd"), "--source names the network source for --compare")]:
        assert run_main("run", built / "tiny.so", *args) == 1, args
        err = capsys.readouterr().err
        assert msg in err and "Traceback" not in err, (args, err)


def test_cli_compare(built, tiny_src, fakegpu, capsys, monkeypatch, tmp_path):
    """--compare runs the reference on the recorded source with the inputs and parameters the .so
    got. The fake driver computes nothing, so the .so's outputs are garbage and the check fails;
    with outputs computed by the reference executor from its own seeded draws (what `netc run
    --reference --seed` uses) it passes: the .so's random inputs and parameters are the same values."""
    assert run_main("run", built / "tiny.so", "--compare") == 1
    err = capsys.readouterr().err
    assert "differs from the f64 reference" in err and "max relative error" in err
    from netc.runtime.reference import run_reference
    mod = module_of(tiny_src)

    def reference_outputs(self, inputs, stream=None):
        b = next(iter(inputs.values())).shape[0]
        ref = run_reference(mod, None, None, seed=5, dtype=torch.float32)    # the reference's own draws
        return {s.name: ref[s.name][:b].contiguous() for s in self.outputs}
    monkeypatch.setattr(N.Net, "run", reference_outputs)
    assert run_main("run", built / "tiny.so", "--compare", "--seed", "5", "--batch", "3") == 0
    err = capsys.readouterr().err
    assert "prob: max relative error" in err and "enc: max relative error" in err
    assert run_main("run", built / "tiny.so", "--compare", "--seed", "6") == 1        # other draws differ
    capsys.readouterr()
    # a changed source is refused unless named with --source
    src = tmp_path / "tiny.nd"
    src.write_text(TINY + "\n# edited\n")
    monkeypatch.setattr(N.Net, "__init__", _with_source(N.Net.__init__, str(src)))
    assert run_main("run", built / "tiny.so", "--compare", "--seed", "5") == 1
    assert "has changed since 'tiny.so' was compiled from it" in capsys.readouterr().err
    assert run_main("run", built / "tiny.so", "--compare", "--seed", "5", "--source", src) == 0
    assert "warning" in capsys.readouterr().err


def _with_source(init, path):
    def patched(self, *a, **k):
        init(self, *a, **k)
        self.manifest = dict(self.manifest, source=dict(self.manifest["source"], path=path))
    return patched


def test_cli_run_so_without_driver(built):
    r = netc("run", built / "tiny.so", env={"NETC_LIBCUDA": "/nonexistent/libcuda.so.1"})
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("netc: error: cannot create 'tiny.so': cannot load the CUDA driver")


# ------------------------------------------------------------------------------------------- outputs without a batch axis

LOSSY = """
network lossy {
  input x: f32[4, 6, 6, 3]
  input label: i32[4]
  input target: f32[4, 10]
  conv = Convolution(x) { filter: [3, 3, 3, 8], padding: SAME, activation: relu }
  fc = InnerProduct(conv) { num_outputs: 10 }
  prob = Softmax(fc)
  loss = SoftmaxLoss(fc, label)
  l2 = EuclideanLoss(prob, target)
  output loss, prob, l2
}
"""


@pytest.fixture(scope="module")
def lossy(tmp_path_factory):
    """lossy.so: two scalar losses (means over the batch: no batch axis) around a batched output."""
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler")
    d = tmp_path_factory.mktemp("lossy")
    (d / "lossy.nd").write_text(LOSSY)
    r = netc("compile", d / "lossy.nd", "-o", d / "lossy.so")
    assert r.returncode == 0, r.stderr
    return d


def _compiled_plan(src):
    """The memory plan netc compile uses (the pipeline, fuse, plan-memory for inference)."""
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load
    from netc.pipelines import Options, Plan, compile
    diag = DiagnosticEngine()
    mod = load(str(src), diag)
    ctx = compile(mod, Options(phase="test"), diag, plan=Plan(mode="inference"))
    return next(iter(ctx.notes["memory_plan"].values()))


def test_manifest_of_outputs_without_batch_axis(lossy):
    from netc.memory.model import CONSTANT
    m = N.read_manifest(lossy / "lossy.so")
    plan = _compiled_plan(lossy / "lossy.nd")
    assert [o["name"] for o in m["outputs"]] == ["loss", "prob", "l2"]
    outs = {o["name"]: o for o in m["outputs"]}
    for name in ("loss", "l2"):
        assert plan.tensor(name).cls == CONSTANT                 # where the plan puts a value without batch axis
        assert outs[name] == dict(name=name, shape=[], dtype="f32", batched=False, region="constant",
                                  offset=plan.address(name), bytes=4)
        # above the parameters (netc_set_params leaves it alone), inside the constant region
        assert m["param_bytes"] <= outs[name]["offset"] and outs[name]["offset"] + 4 <= _const_region(m)
    assert outs["prob"]["batched"] is True and outs["prob"]["region"] == "batch"
    assert outs["prob"]["arena_offset_per_sample"] == plan.address("prob", batch=1)
    ins = {i["name"]: i for i in m["inputs"]}
    assert all(i["batched"] for i in m["inputs"])
    assert ins["label"]["classes"] == 10 and "classes" not in ins["x"] and "classes" not in ins["target"]


def test_forward_copies_outputs_without_batch_axis(lossy, fakegpu):
    """A loss is one copy of its bytes from its constant-region address (the one its kernel writes),
    whatever the batch; the fake driver runs no kernel, so a value put there comes back."""
    from netc.runtime.reference import random_input
    net_op = module_of(lossy / "lossy.nd").networks()[0]
    label_op = next(op for op in net_op.regions[0].ops if op.attrs.get("name") == "label")
    with N.load(lossy / "lossy.so", seed=0) as net:
        m = net.manifest
        assert [(s.name, s.batched, s.shape) for s in net.outputs] == [("loss", False, ()), ("prob", True, (4, 10)),
                                                                        ("l2", False, ())]
        assert "loss: f32[]" in repr(net)
        base, _ = _arena(fakegpu())
        const = _const_region(m)
        outs = {o["name"]: o for o in m["outputs"]}
        entry = {k["kernel"]: k["entry"] for k in m["kernels"]}
        for b in (4, 3, 1):
            for name, v in (("loss", 1.25 + b), ("l2", -0.5 * b)):
                ctypes.memmove(base + outs[name]["offset"], struct.pack("<f", v), 4)
            xs = net.random_inputs(seed=1, batch=b)
            # random labels are the reference executor's: class indices below the manifest's count
            assert xs["label"].dtype == torch.int32 and torch.equal(xs["label"], random_input(net_op, label_op, 1)[:b])
            n0 = len(fakegpu())
            res = net.run(xs)
            assert res["loss"].shape == () and res["l2"].shape == () and res["prob"].shape == (b, 10)
            assert res["loss"].item() == 1.25 + b and res["l2"].item() == -0.5 * b
            new = fakegpu()[n0:]
            copies = [ln.split() for ln in new if ln.startswith(("dtod", "copy2d"))]
            assert len(copies) == len(m["inputs"]) + len(m["outputs"])
            for spec, c in zip(m["outputs"], copies[len(m["inputs"]):]):
                if spec["batched"]:
                    src = base + const + spec["arena_offset_per_sample"] * b + spec["offset_in_sample"]
                    nbytes = b * spec["bytes_per_sample"]
                else:
                    src, nbytes = base + spec["offset"], spec["bytes"]
                assert c == ["dtod", str(res[spec["name"]].data_ptr()), str(src), str(nbytes)], spec["name"]
            # the loss kernels write where the copies read (their third argument, the output pointer)
            launches = {ln.split()[1]: ln.split() for ln in new if ln.startswith("launch")}
            assert int(launches[entry["softmax_loss_kernel"]][9]) == base + outs["loss"]["offset"]
            assert int(launches[entry["euclidean_loss_kernel"]][9]) == base + outs["l2"]["offset"]


def test_cli_run_and_compare_losses(lossy, fakegpu, capsys, monkeypatch, tmp_path):
    so = lossy / "lossy.so"
    assert run_main("run", so, "--batch", "2") == 0
    out = capsys.readouterr().out.splitlines()
    assert [ln.split()[0] for ln in out] == ["loss", "prob", "l2"]
    assert out[0].split()[1] == "[]" and "[2, 10]" in out[1]
    assert run_main("run", so, "--output", tmp_path / "o.npz") == 0
    with np.load(tmp_path / "o.npz") as z:
        assert z["loss"].shape == () and z["l2"].shape == () and z["prob"].shape == (4, 10)
    # the fake driver computes nothing: garbage fails the check
    assert run_main("run", so, "--compare", "--batch", "3") == 1
    assert "output 'loss' of 'lossy.so' differs from the f64 reference" in capsys.readouterr().err
    from netc.runtime.reference import run_reference
    from netc.runtime.scale import scale_inputs

    def reference(pad):
        """Net.run computing with the reference executor: on the b samples given (the source
        scaled to batch b), or at the compiled batch with zero samples after them (pad)."""
        def run(self, inputs, stream=None):
            from netc.diagnostics import DiagnosticEngine
            from netc.frontend import load
            from netc.pipelines import Options, inference
            b = inputs["x"].shape[0]
            mod = load(str(lossy / "lossy.nd"), DiagnosticEngine())
            if not pad:
                scale_inputs(mod, batch=b)
            inference(mod, Options(phase="test"))
            xs = {k: torch.cat([v, v.new_zeros((4 - b,) + tuple(v.shape[1:]))]) if pad else v
                  for k, v in inputs.items()}
            ref = run_reference(mod, xs, self.params(), dtype=torch.float32)
            return {s.name: ref[s.name][:b].contiguous() if s.batched else ref[s.name] for s in self.outputs}
        return run
    monkeypatch.setattr(N.Net, "run", reference(pad=False))
    assert run_main("run", so, "--compare", "--batch", "3", "--seed", "2") == 0
    err = capsys.readouterr().err
    assert all(f"{k}: max relative error" in err for k in ("loss", "prob", "l2")), err
    assert run_main("run", so, "--compare", "--seed", "2") == 0           # at the compiled batch
    capsys.readouterr()
    # a loss over all 4 samples (the last ones zeros) is not the loss over the 3 the call ran
    monkeypatch.setattr(N.Net, "run", reference(pad=True))
    assert run_main("run", so, "--compare", "--batch", "3", "--seed", "2") == 1
    err = capsys.readouterr().err
    assert "output 'loss' of 'lossy.so' differs" in err and "output 'prob'" not in err


def test_reference_reads_safetensors_params(tiny_src, tmp_path, capsys):
    from netc.runtime.reference import module_params
    vals = module_params(module_of(tiny_src), seed=4, dtype=torch.float32)
    vals.pop("w_dec")
    P.write_params(tmp_path / "p.safetensors", vals)
    P.write_params(tmp_path / "p.npz", vals)
    outs = []
    for f in ("p.safetensors", "p.npz"):
        assert run_main("run", tiny_src, "--reference", "--phase", "test", "--dtype", "f32", "--seed", "4",
                        "--params", tmp_path / f) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1]
    assert run_main("run", tiny_src, "--reference", "--phase", "test", "--dtype", "f32", "--seed", "4") == 0
    assert capsys.readouterr().out == outs[0]          # the file held the seed-4 values
    _st(tmp_path, {"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8)
    assert run_main("run", tiny_src, "--reference", "--params", tmp_path / "bad.safetensors") == 1
    err = capsys.readouterr().err
    assert "bad.safetensors: $.w.data_offsets: error: --params: 'bad.safetensors' is not a valid .safetensors " \
           "file: invalid shape, data type, or offset for tensor ('w': [3] F32 needs 12 bytes, data_offsets give 8)" in err


# ------------------------------------------------------------------------------------------- eager baseline

EAGER = """
network eager {
  input x: f32[3, 17, 17, 4]
  c1 = Convolution(x) { filter: [3, 3, 4, 8], strides: [1, 2, 2, 1], padding: SAME, activation: relu }
  c2 = Convolution(c1) { filter: [2, 2, 8, 8], padding: SAME }
  n = LRN(c2) { local_size: 3, alpha: 0.01 }
  b = BatchNorm(n)
  r = ReLU(b) { negative_slope: 0.1 }
  p1 = Pooling(r) { ksize: [1, 3, 3, 1], strides: [1, 2, 2, 1], padding: VALID }
  p2 = AvgPool(r) { ksize: [1, 3, 3, 1], strides: [1, 2, 2, 1], padding: VALID }
  p3 = AvgPool(c1) { ksize: [1, 3, 3, 1], strides: [1, 2, 2, 1], padding: SAME }
  cat = Concatenate(p1, p2) { dim: 3 }
  e = Elementwise(p1, p2) { operation: max }
  cat2 = Concatenate(cat, e) { dim: 3 }
  t = Tanh(cat2)
  d = Dropout(t)
  fc = InnerProduct(d) { num_outputs: 10, activation: sigmoid }
  f2 = InnerProduct(p3) { num_outputs: 10 }
  s = Elementwise(fc, f2) { operation: sum }
  prob = Softmax(s)
}
"""


def test_eager_baseline_matches_the_reference(tmp_path):
    from netc.runtime.eager import EagerNet
    from netc.runtime.reference import module_params, run_reference
    f = tmp_path / "eager.nd"
    f.write_text(EAGER)
    mod = module_of(f)
    ps = module_params(mod, seed=2, dtype=torch.float32)
    net = EagerNet(mod, None, ps)
    assert net.fallbacks == []
    xs = net.example_inputs(seed=2)
    out = net(xs)
    ref = run_reference(mod, {k: v.double() for k, v in xs.items()}, {k: v.double() for k, v in ps.items()})
    assert set(out) == set(ref) == {"prob"}
    err = float((out["prob"].double() - ref["prob"]).abs().max() / ref["prob"].abs().max())
    assert err < 1e-5 and out["prob"].dtype == torch.float32
    # a smaller batch is the first rows
    one = net(net.example_inputs(batch=1, seed=2))
    torch.testing.assert_close(one["prob"], out["prob"][:1])


# ------------------------------------------------------------------------------------------- training libraries

TRAINY = """
network trainy {
  input x: f32[4, 6, 6, 3]
  input label: i32[4]
  conv = Convolution(x) { filter: [3, 3, 3, 8], padding: SAME, activation: relu }
  drop = Dropout(conv) { dropout_keep_prob: 0.5 }
  fc = InnerProduct(drop) { num_outputs: 10 }
  prob = Softmax(fc)
  loss = SoftmaxLoss(fc, label)
}
"""
TRAIN_SYMBOLS = ("netc_train_step", "netc_get_params", "netc_set_params", "netc_forward", "netc_num_train_launches")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """trainy.so: a training library (momentum, conv.bias frozen, dropout: a seed), and lenet.so:
    `netc compile examples/lenet.nd --train -o lenet.so` (adam), compiled side by side, without a GPU."""
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler")
    d = tmp_path_factory.mktemp("train")
    (d / "trainy.nd").write_text(TRAINY)
    runs = [netc_start("compile", d / "trainy.nd", "--train", "--optimizer", "momentum", "--freeze", "conv.bias",
                       "-o", d / "trainy.so"),
            netc_start("compile", ROOT / "examples/lenet.nd", "--train", "--optimizer", "adam", "-o", d / "lenet.so"),
            netc_start("compile", ROOT / "examples/cifar10_phases.nd", "--train", "-o", d / "phases.so")]
    for r in [netc_wait(p) for p in runs]:
        assert r.returncode == 0, r.stderr
    (d / "phases.stderr").write_text(r.stderr)
    return d


def test_training_library_exports_the_training_abi(trained):
    """`netc compile examples/lenet.nd --train -o x.so` builds without a GPU; nm -D lists the ABI."""
    from netc.codegen.launcher import ABI_VERSION
    if shutil.which("nm") is None:
        pytest.skip("needs nm")
    for so in ("lenet.so", "trainy.so"):
        syms = subprocess.run(["nm", "-D", "--defined-only", str(trained / so)], capture_output=True, text=True,
                              check=True).stdout
        for s in TRAIN_SYMBOLS:
            assert f" T {s}\n" in syms, (so, s)
    assert f"#define NETC_ABI_VERSION {ABI_VERSION}" in (trained / "lenet.h").read_text()
    assert "int netc_train_step(void* net, const void* const* inputs, float lr, long long seed" in \
        (trained / "lenet.h").read_text()
    m = N.read_manifest(trained / "lenet.so")
    t = m["training"]
    assert m["abi_version"] == ABI_VERSION == 4 and t["optimizer"]["name"] == "adam"
    assert [i["name"] for i in t["inputs"]] == ["data", "label"] and t["inputs"][1]["classes"] == 10
    assert t["learning_rate"]["dtype"] == "f32" and t["seed"] is None and [x["name"] for x in t["losses"]] == ["loss"]
    # parameters, then the optimizer state, in one region (netc_set_params/netc_get_params: a checkpoint)
    names = [p["name"] for p in m["parameters"]]
    assert names[:2] == ["conv1.weight", "conv1.bias"] and "conv1.weight.adam_m" in names
    state = [p for p in m["parameters"] if "state" in p]
    assert {p["state"] for p in state} == {"adam_m", "adam_v", "adam_step"} and all(p["init"] == 0.0 for p in state)
    assert max(p["offset"] + p["bytes"] for p in m["parameters"]) <= m["param_bytes"]
    ops = {e["op"] for e in t["schedule"]}
    assert {"netc.conv2d_grad_filter", "netc.maxpool_grad", "netc.adam_update", "netc.softmax_loss_grad"} <= ops
    assert len(m["schedule"]) == 10 and m["inputs"][0]["region"] == "forward_batch"   # (two split-K products)


def test_activation_gradients_run_in_the_data_gradients_epilogues(trained):
    """ip1's ReLU gradient is never a launch of its own: ip2's data gradient applies it before its store."""
    t = N.read_manifest(trained / "lenet.so")["training"]
    groups = [set(e["layers"]) for e in t["schedule"]]
    assert {"ip1.grad", "ip1.act_grad"} in groups and {"ip1.act_grad"} not in groups


def test_a_training_library_of_a_file_with_phases(trained):
    """cifar10_phases.nd: the test phase (the library's forward) declares batch 100, the training
    phase 64: the forward is compiled at 64 (a warning says so), and its ip1, whose parameters are
    declared share_from the training ones, reads the training parameters' storage."""
    assert "declares batch 100 but the training step runs at 64" in (trained / "phases.stderr").read_text()
    m = N.read_manifest(trained / "phases.so")
    assert m["inputs"][0]["shape"] == [64, 32, 32, 3] and m["training"]["inputs"][0]["shape"] == [64, 32, 32, 3]
    assert "w4_test" not in {p["name"] for p in m["parameters"]}


def test_frozen_parameters_cost_no_gradient_kernels(trained):
    m = N.read_manifest(trained / "trainy.so")
    t = m["training"]
    assert t["frozen"] == ["conv.bias"] and set(t["gradients"]) == {"conv.weight", "fc.weight", "fc.bias"}
    layers = {n for e in t["schedule"] for n in e["layers"]}
    assert "conv.weight.grad" in layers and not any(n.startswith("conv.bias.") for n in layers)
    assert t["seed"]["dtype"] == "i64" and t["seed"]["bytes"] == 8
    assert {p["state"] for p in m["parameters"] if "state" in p} == {"velocity"}
    assert "conv.bias.velocity" not in {p["name"] for p in m["parameters"]}


def test_train_step_copies_launches_and_returns_the_loss(trained, fakegpu):
    """The fake driver with host memory: train_step copies the inputs to the training program's places,
    writes the learning rate and the seed, runs every launch of the training schedule with pointers
    inside the arena, and returns the loss its kernel writes (put there by hand: nothing computes)."""
    with N.load(trained / "trainy.so", seed=0) as net:
        m, t = net.manifest, net.training
        base, size = _arena(fakegpu())
        assert size == m["regions"]["arena_bytes"]
        # optimizer state starts at its initial value; the parameters are the reference's
        p = net.get_params()
        assert float(p["fc.weight.velocity"].abs().sum()) == 0.0
        assert torch.equal(p["fc.weight"], P.random_params(m, 0)["fc.weight"])
        x, y = torch.randn(4, 6, 6, 3), torch.randint(0, 10, (4,), dtype=torch.int32)
        ctypes.memmove(base + t["losses"][0]["offset"], struct.pack("<f", 0.75), 4)
        n0 = len(fakegpu())
        assert net.train_step({"x": x, "label": y}, lr=0.125, seed=7) == 0.75
        new = [ln.split() for ln in fakegpu()[n0:]]
        batch_region = base + m["regions"]["batch"]
        copies = [c for c in new if c[0] in ("dtod", "copy2d")]
        for spec, tsr, c in zip(t["inputs"], (x, y), copies):
            dst = batch_region + spec["arena_offset_per_sample"] * 4 + spec["offset_in_sample"]
            assert c == ["dtod", str(dst), str(tsr.data_ptr()), str(4 * spec["bytes_per_sample"])]
            assert ctypes.string_at(dst, tsr.numel() * 4) == tsr.numpy().tobytes()
        lr_at, seed_at = base + t["learning_rate"]["offset"], base + t["seed"]["offset"]
        assert ["htod_async", str(lr_at), "4"] in new and ["htod_async", str(seed_at), "8"] in new
        assert struct.unpack("<f", ctypes.string_at(lr_at, 4))[0] == 0.125
        assert struct.unpack("<q", ctypes.string_at(seed_at, 8))[0] == 7
        launches = [c for c in new if c[0] == "launch"]
        assert len(launches) == len(t["schedule"]) == N.ctypes.CDLL(str(trained / "trainy.so")).netc_num_train_launches()
        for ln in launches:       # the first two arguments are pointers into the arena (or NULL: absent)
            for ptr in map(int, ln[7:9]):
                assert ptr == 0 or base <= ptr < base + size, ln
        assert ["dtoh_async", str(base + t["losses"][0]["offset"]), "4"] in new and new[-1] == ["stream_sync"]
        # without waiting: no copy back, no synchronization
        n0 = len(fakegpu())
        assert net.train_step({"x": x, "label": y}, lr=0.1, seed=8, wait=False) is None
        assert not any(ln.startswith(("dtoh", "stream_sync")) for ln in fakegpu()[n0:])
        # the forward reads the same parameters (its own inputs go to the forward's region)
        n0 = len(fakegpu())
        out = net(x, y)
        assert set(out) == {"prob", "loss"}
        fb = base + m["regions"]["forward_batch"]
        first = [ln.split() for ln in fakegpu()[n0:] if ln.startswith("dtod")][0]
        assert first[1] == str(fb + m["inputs"][0]["arena_offset_per_sample"] * 4 + m["inputs"][0]["offset_in_sample"])
        # checkpoints: get_params is what set_params took, optimizer state included
        vals = P.random_params(m, 5)
        vals["fc.weight.velocity"] = torch.full((288, 10), 0.5)
        net.set_params(vals)
        back = net.get_params()
        assert torch.equal(back["fc.weight.velocity"], vals["fc.weight.velocity"])
        assert torch.equal(back["conv.weight"], vals["conv.weight"])
        with pytest.raises(N.NetcInputError, match="a training step runs at the compiled batch 4"):
            net.train_step({"x": x[:2], "label": y[:2]}, lr=0.1)
        with pytest.raises(N.NetcInputError, match="missing input 'label'"):
            net.train_step({"x": x}, lr=0.1)
        with pytest.raises(N.NetcInputError, match="has no input 'lbl'; did you mean 'label'"):
            net.train_step({"x": x, "lbl": y}, lr=0.1)


def test_train_step_errors_come_from_the_library(trained, built, fake, fakegpu, monkeypatch, tmp_path):
    """Without a driver netc_create fails and netc_train_step(NULL) returns an error code; an inference
    library says it cannot train; a driver without the copies cannot train either."""
    lib = ctypes.CDLL(str(trained / "trainy.so"))
    lib.netc_create.restype = ctypes.c_void_p
    lib.netc_last_error.restype = ctypes.c_char_p
    lib.netc_train_step.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_float, ctypes.c_longlong,
                                    ctypes.c_void_p, ctypes.c_void_p]
    monkeypatch.setenv("NETC_LIBCUDA", "/nonexistent/libcuda.so.1")
    assert lib.netc_create() is None
    assert b"cannot load the CUDA driver" in lib.netc_last_error(None)
    assert lib.netc_train_step(None, None, 0.1, 0, None, None) == -1
    monkeypatch.setenv("NETC_LIBCUDA", str(fake))
    with N.load(built / "tiny.so", seed=0) as net:
        assert net.training is None
        with pytest.raises(N.NetcInputError, match="compiled for inference only"):
            net.train_step({"x": torch.zeros(4, 6, 6, 3), "y": torch.zeros(4, 16)}, lr=0.1)
        h = net._handle()
        assert net._lib.netc_train_step(h, None, 0.1, 0, None, None) == -9
        assert b"compiled for inference only" in net._lib.netc_last_error(h)
    nocopy = tmp_path / "libcuda_nocopy.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-DNETC_FAKE_NO_TRAIN_COPIES", "-o", str(nocopy),
                    str(ROOT / "tests/data/fake_libcuda.c")], check=True)
    monkeypatch.setenv("NETC_LIBCUDA", str(nocopy))
    with N.load(trained / "trainy.so", seed=0) as net:
        with pytest.raises(N.NetcRuntimeError, match="the CUDA driver has no cuMemcpyHtoDAsync_v2"):
            net.train_step({"x": torch.zeros(4, 6, 6, 3), "label": torch.zeros(4, dtype=torch.int32)}, lr=0.1)


# ------------------------------------------------------------------------------- netc run NET.so --train

def test_cli_trains_a_library(trained, fakegpu, capsys, tmp_path):
    """`netc run NET.so --train`: --steps steps of netc_train_step with the learning rate and each
    step's seed, printed as the reference's training is; -o writes parameters and optimizer state,
    --history the steps. (The fake driver computes nothing: the losses are its fill pattern.)"""
    so = trained / "trainy.so"
    m = N.read_manifest(so)
    t = m["training"]
    assert m["source"]["training"] == {"backward": {"freeze": ["conv.bias"], "loss": None, "loss_on": None,
                                                    "networks": None},
                                       "optimizer": {"name": "momentum"}, "opaque_as_identity": False}
    n0 = len(fakegpu())
    assert run_main("run", so, "--train", "--steps", "3", "--lr", "0.25", "--seed", "2", "-o", tmp_path / "p.npz",
                    "--history", tmp_path / "h.json") == 0
    out = capsys.readouterr().out.splitlines()
    assert [ln.split()[:2] for ln in out[:3]] == [["step", "1"], ["step", "2"], ["step", "3"]]
    assert out[-1].startswith("trained 3 steps of network 'trainy' (momentum): loss ")
    log = [ln.split() for ln in fakegpu()[n0:]]
    base = _arena(fakegpu())[0]
    lr_at, seed_at = str(base + t["learning_rate"]["offset"]), str(base + t["seed"]["offset"])
    assert sum(1 for c in log if c[:2] == ["htod_async", lr_at]) == 3
    assert sum(1 for c in log if c[:2] == ["htod_async", seed_at]) == 3
    assert struct.unpack("<f", ctypes.string_at(int(lr_at), 4))[0] == 0.25
    assert struct.unpack("<q", ctypes.string_at(int(seed_at), 8))[0] == 2 * 1_000_003 + 2   # as the reference's 3rd
    hist = json.loads((tmp_path / "h.json").read_text())
    assert [h["step"] for h in hist] == [1, 2, 3] and {h["lr"] for h in hist} == {0.25}
    with np.load(tmp_path / "p.npz") as z:
        assert {"conv.weight", "fc.weight", "fc.weight.velocity"} <= set(z.files)
    # --data: batches of the compiled batch, an epoch of 10 samples is 2 steps
    np.savez(tmp_path / "d.npz", x=np.random.rand(10, 6, 6, 3).astype(np.float32),
             label=np.random.randint(0, 10, 10).astype(np.int32))
    assert run_main("run", so, "--train", "--data", tmp_path / "d.npz", "--epochs", "2") == 0
    assert "trained 4 steps" in capsys.readouterr().out


def test_cli_train_library_errors(trained, built, fakegpu, capsys, tmp_path):
    np.savez(tmp_path / "d.npz", x=np.random.rand(10, 5, 5, 3).astype(np.float32),
             label=np.random.randint(0, 10, 10).astype(np.int32))
    so = trained / "trainy.so"
    for lib, args, msg in [
            (so, ("--train", "--optimizer", "adam"), "--optimizer is fixed when a training library is compiled"),
            (so, ("--train", "--freeze", "fc.weight", "--loss", "softmax"), "--freeze, --loss are fixed when"),
            (so, ("--train", "--grads", tmp_path / "g.npz"), "a library does not return its gradients"),
            (so, ("--train", "--batch", "2"), "a training step runs at the compiled batch"),
            (so, ("--train", "--steps", "0"), "--steps takes a positive number, got 0"),
            (so, ("--train", "--epochs", "2"), "--epochs counts passes over --data"),
            (so, ("--train", "--dtype", "f32"), "--dtype applies to network sources"),
            (so, ("--train", "--compare", "--history", tmp_path / "h.json"), "--compare runs --steps N steps"),
            (so, ("--train", "--data", tmp_path / "d.npz"), "samples of 'x' have shape [5, 5, 3], the input takes "
                                                            "[6, 6, 3] per sample"),
            (so, ("--steps", "2"), "--steps applies to training: add --train"),
            (so, ("--check-grads",), "--check-grads checks the generated gradient ops of a network source"),
            (built / "tiny.so", ("--train",), "was compiled for inference only: compile it with `netc compile --train`")]:
        assert run_main("run", lib, *args) == 1, args
        err = capsys.readouterr().err
        assert msg in err, (args, err)
        assert "Traceback" not in err


def test_cli_train_library_compare(trained, fakegpu, capsys, monkeypatch):
    """--compare rebuilds the training program from the recorded source and options and checks each
    step against the f64 reference from the library's own parameters. The fake driver computes
    nothing: the check fails. With train_step replaced by an honest f32 step of the reference on the
    inputs, learning rate and seed the library was given (the parameters and state it updates set back
    into the library), it passes -- and fails again when the seed the library gets is off by one."""
    from netc.runtime.library_train import training_reference
    from netc.runtime.train import ReferenceTrainer
    so = trained / "trainy.so"
    assert run_main("run", so, "--train", "--compare", "--steps", "2") == 1
    cap = capsys.readouterr()
    assert "the compiled training step differs from the reference" in cap.err
    assert "of 'trainy.so'" in cap.out and "-" in cap.out.splitlines()[1].split()   # no gradient column

    def honest(shift):
        def train_step(self, inputs, lr, seed=0, *, stream=None, wait=True):
            module, net = training_reference(self)
            ref = ReferenceTrainer(module, net, None, dtype=torch.float32)
            cur = self.get_params()
            for k, v in ref.params.items():
                v.copy_(cur[k].reshape(v.shape).to(v.dtype))
            named = ref.step(dict(inputs), lr, step_seed=seed + shift)
            self.set_params({**cur, **{k: v.detach().clone() for k, v in ref.params.items()}})
            return float(sum(float(v) for v in ref.losses(named).values()))
        return train_step

    monkeypatch.setattr(N.Net, "train_step", honest(0))
    assert run_main("run", so, "--train", "--compare", "--steps", "2", "--lr", "0.5", "--seed", "3") == 0
    out = capsys.readouterr().out
    assert "compared 2 training steps of network 'trainy' (momentum) of 'trainy.so': ok" in out
    monkeypatch.setattr(N.Net, "train_step", honest(1))     # another dropout mask than the reference's
    assert run_main("run", so, "--train", "--compare", "--lr", "0.5", "--seed", "3") == 1
    assert "differs from the reference" in capsys.readouterr().err


def test_compile_at_another_batch(trained, fakegpu, capsys, monkeypatch, tmp_path):
    """`netc compile --batch B` rescales every input to B (the training step and the forward); the
    manifest records it and --compare rebuilds the reference at B."""
    from netc.runtime.library_train import training_reference
    (tmp_path / "trainy.nd").write_text(TRAINY)
    r = netc("compile", tmp_path / "trainy.nd", "--train", "--batch", "2", "-o", tmp_path / "t2.so")
    assert r.returncode == 0, r.stderr
    m = N.read_manifest(tmp_path / "t2.so")
    assert m["batch"] == m["training"]["batch"] == 2 and m["source"]["rescaled_batch"] == 2
    assert [i["shape"][0] for i in m["training"]["inputs"]] == [2, 2]
    with N.load(tmp_path / "t2.so", seed=0) as net:
        module, irnet = training_reference(net)
        assert [tuple(op.results[0].type.shape)[0] for op in irnet.regions[0].ops if op.name == "netc.input"
                and op.attrs.get("name") in ("x", "label")] == [2, 2]
    assert run_main("run", tmp_path / "t2.so", "--train", "--steps", "2") == 0
    assert "trained 2 steps" in capsys.readouterr().out


def test_cli_train_library_checks_its_inputs(trained, fakegpu, capsys, tmp_path):
    """--data/--inputs for a library's steps are checked as the reference checks them: fractional
    labels are an error, not silently truncated."""
    np.savez(tmp_path / "d.npz", x=np.random.rand(8, 6, 6, 3).astype(np.float32),
             label=np.random.rand(8).astype(np.float32) * 9)
    assert run_main("run", trained / "trainy.so", "--train", "--data", tmp_path / "d.npz") == 1
    assert "input 'label' must hold integers (it is an integer input), got fractional values" in capsys.readouterr().err
    np.savez(tmp_path / "i.npz", x=np.random.rand(4, 6, 6, 3).astype(np.float32), label=np.arange(4.0))
    assert run_main("run", trained / "trainy.so", "--train", "--inputs", tmp_path / "i.npz", "--steps", "2") == 0
    assert "trained 2 steps" in capsys.readouterr().out


def test_a_time_major_library_is_compared_at_its_compiled_batch_only():
    """A time-major library's batch is its sequences' T (its leading axis): a call of b < T runs b steps,
    which the source scaled to batch b (its batch axis 1) is not, so --compare's reference refuses it
    clearly instead of reporting a difference (the GPU run of examples/sequences.nd at batch 2 did)."""
    from types import SimpleNamespace

    from netc.runtime.native import NetcInputError, TensorSpec, reference_outputs
    spec = lambda name, shape, batched: TensorSpec(name, shape, torch.float32, "f32", batched, None, None, 1, None)  # noqa: E731
    net = SimpleNamespace(batch=8, path="sequences.so", network="sequences",
                          inputs=[spec("x", (8, 6, 5), True)], outputs=[spec("loss", (), False)])
    with pytest.raises(NetcInputError, match=r"time-major: its batch is the 8 steps.*at its compiled batch \(8\)"):
        reference_outputs(net, str(ROOT / "examples" / "sequences.nd"), {"x": torch.zeros(2, 6, 5)})
