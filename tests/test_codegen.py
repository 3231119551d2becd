"""netc compile --target cuda without a GPU: the .so and header, the ABI symbols, the manifest
against the memory plan, creation without a driver, a fake driver exercising the launcher, the
kernel cache (warm compiles) and deduplication of identical specializations."""
from __future__ import annotations

import ast
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_inprocess import netc_interp

ROOT = Path(__file__).resolve().parents[1]
ABI = ["netc_abi_version", "netc_create", "netc_destroy", "netc_set_params", "netc_set_params_file",
       "netc_forward", "netc_last_error", "netc_last_create_error", "netc_manifest", "netc_embedded_params",
       "netc_profile", "netc_num_launches", "netc_train_step", "netc_get_params", "netc_num_train_launches",
       "netc_num_segments", "netc_run_segment", "netc_arena"]

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")


def compile_cli(src, out, *extra, env=None):
    env = dict(env or os.environ)
    env.pop("TRITON_INTERPRET", None)   # set by tests/kernels for this process; irrelevant to compile
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "netc", "compile", src, "-o", str(out), "--target", "cuda", *extra],
                       capture_output=True, text=True, cwd=ROOT, env=env)
    return r, time.perf_counter() - t


@pytest.fixture(scope="module")
def alexnet(tmp_path_factory):
    d = tmp_path_factory.mktemp("alexnet")
    r, secs = compile_cli("examples/alexnet.nd", d / "alexnet.so", "--emit", "triton", str(d / "triton"))
    assert r.returncode == 0, r.stderr
    print(f"\nalexnet compile (cache as found): {secs:.1f}s; {r.stderr.strip()}")
    return d


def load(path):
    lib = ctypes.CDLL(str(path))
    lib.netc_create.restype = ctypes.c_void_p
    lib.netc_last_error.restype = ctypes.c_char_p
    lib.netc_last_error.argtypes = [ctypes.c_void_p]
    lib.netc_manifest.restype = ctypes.c_char_p
    lib.netc_set_params.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    lib.netc_forward.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p),
                                 ctypes.c_int, ctypes.c_void_p]
    lib.netc_destroy.argtypes = [ctypes.c_void_p]
    return lib


def test_artifacts_and_symbols(alexnet):
    so, h = alexnet / "alexnet.so", alexnet / "alexnet.h"
    assert so.exists() and h.exists()
    header = h.read_text()
    for s in ABI:
        assert s + "(" in header
    if shutil.which("nm"):
        syms = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True).stdout
        exported = {line.split()[-1] for line in syms.splitlines() if line.strip()}
        assert set(ABI) <= exported
        assert not [s for s in exported if s.startswith("netc_") and s not in ABI]
    emitted = {p.name for p in (alexnet / "triton").iterdir()}
    assert {"conv.py", "pool.py", "softmax.py", "common.py", "specializations.json"} <= emitted


def test_manifest_matches_plan(alexnet):
    from netc.codegen.launcher import ABI_VERSION
    lib = load(alexnet / "alexnet.so")
    assert lib.netc_abi_version() == ABI_VERSION == 4      # 2: outputs without a batch axis; 3: training; 4: segments
    m = json.loads(lib.netc_manifest())
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load as load_nd
    from netc.pipelines import Options, Plan, compile
    diag = DiagnosticEngine()
    mod = load_nd(str(ROOT / "examples/alexnet.nd"), diag)
    ctx = compile(mod, Options(phase="test"), diag, plan=Plan())
    plan = ctx.notes["memory_plan"]["alexnet"]
    assert m["batch"] == plan.batch == 128 and m["arch"] == "sm_90"
    assert [i["name"] for i in m["inputs"]] == ["data"] and m["inputs"][0]["shape"] == [128, 224, 224, 3]
    assert [o["name"] for o in m["outputs"]] == ["softmax"] and m["outputs"][0]["shape"] == [128, 1000]
    assert m["outputs"][0]["batched"] is True and m["outputs"][0]["pitch"] == 4000
    params = {p["name"]: p for p in m["parameters"]}
    assert len(params) == 16 and params["conv1.weight"]["shape"] == [11, 11, 3, 64]
    assert params["conv1.bias"]["role"] == "bias" and params["conv1.weight"]["role"] == "weight"
    assert m["params_embedded"] is False and "params_sha256" not in m
    assert m["source"]["path"] == str(ROOT / "examples/alexnet.nd") and len(m["source"]["sha256"]) == 64
    for t in plan.tensors:
        if t.kind == "param":
            assert params[t.name[1:]]["offset"] == plan.buffers[t.buffer].offset + t.offset
    assert sum(p["bytes"] for p in params.values()) == 50_303_912 * 4
    assert m["param_bytes"] >= 50_303_912 * 4
    assert m["memory"]["batch_bytes_per_sample"] == plan.arenas[1].size
    # 8 convs (fused with relu) + 3 pools + softmax; dropout is an alias; fc6-fc8 are matrix products over few
    # tiles at batch 128, each split-K's two kernels (gemm.default_split); fewer distinct kernels
    assert len(m["schedule"]) == 15 and len(m["kernels"]) < 15
    assert [e["layers"] for e in m["schedule"]].count(["fc8"]) == 2
    assert all(k["shared"] >= 0 and k["cubin_bytes"] > 0 for k in m["kernels"])


def test_create_without_driver(alexnet, monkeypatch):
    monkeypatch.setenv("NETC_LIBCUDA", "/nonexistent/libcuda.so.1")
    lib = load(alexnet / "alexnet.so")
    assert lib.netc_create() is None
    msg = lib.netc_last_error(None).decode()
    assert "cannot load the CUDA driver" in msg and "/nonexistent/libcuda.so.1" in msg
    lib.netc_last_create_error.restype = ctypes.c_char_p
    assert lib.netc_last_create_error().decode() == msg
    lib.netc_destroy(None)   # harmless


def test_fake_driver_runs_the_schedule(alexnet, tmp_path, monkeypatch):
    """The launcher against a stub libcuda: create, parameter checks, forward at batch 128 and 3."""
    fake = tmp_path / "libcuda_fake.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(fake), str(ROOT / "tests/data/fake_libcuda.c")], check=True)
    log = tmp_path / "log.txt"
    monkeypatch.setenv("NETC_LIBCUDA", str(fake))
    monkeypatch.setenv("NETC_FAKE_LOG", str(log))
    lib = load(alexnet / "alexnet.so")
    m = json.loads(lib.netc_manifest())
    net = lib.netc_create()
    assert net, lib.netc_last_error(None)
    ptrs = (ctypes.c_void_p * 1)(0x7000000000)
    outs = (ctypes.c_void_p * 1)(0x7100000000)
    assert lib.netc_forward(net, ptrs, outs, 4, None) != 0
    assert b"netc_set_params first" in lib.netc_last_error(net)
    assert lib.netc_set_params(net, None, 12) != 0 and b"expected" in lib.netc_last_error(net)
    blob = ctypes.create_string_buffer(m["param_bytes"])
    assert lib.netc_set_params(net, blob, m["param_bytes"]) == 0
    assert lib.netc_forward(net, ptrs, outs, 129, None) != 0 and b"outside 1..128" in lib.netc_last_error(net)
    for batch in (128, 3):
        assert lib.netc_forward(net, ptrs, outs, batch, None) == 0, lib.netc_last_error(net)
    lib.netc_destroy(net)
    lines = log.read_text().splitlines()
    alloc = int(lines[0].split()[1])
    assert alloc >= m["param_bytes"] + m["memory"]["batch_bytes_per_sample"] * 128
    launches = [ln.split() for ln in lines if ln.startswith("launch")]
    n = len(m["schedule"])
    assert len(launches) == 2 * n
    base = 0x100000000
    for ln in launches:
        assert ln[1] in {k["entry"] for k in m["kernels"]}
        p0, p1 = int(ln[7]), int(ln[8])
        assert base <= p0 < base + alloc and base <= p1 < base + alloc
    grids128 = [int(ln[2]) for ln in launches[:n]]
    grids3 = [int(ln[2]) for ln in launches[n:]]
    assert all(g3 <= g for g, g3 in zip(grids128, grids3)) and sum(grids3) < sum(grids128)
    # softmax: one program per row
    assert grids128[-1] == 128 and grids3[-1] == 3
    copies = [ln for ln in lines if ln.startswith("dtod")]
    assert copies[0].split()[2] == str(0x7000000000) and int(copies[0].split()[3]) == 128 * 224 * 224 * 3 * 4
    assert copies[-1].split()[1] == str(0x7100000000) and int(copies[-1].split()[3]) == 3 * 1000 * 4


def _fake_driver(tmp_path, monkeypatch):
    fake = tmp_path / "libcuda_fake.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(fake), str(ROOT / "tests/data/fake_libcuda.c")], check=True)
    log = tmp_path / "log.txt"
    monkeypatch.setenv("NETC_LIBCUDA", str(fake))
    monkeypatch.setenv("NETC_FAKE_LOG", str(log))
    return log


def test_lenet_loss_comes_from_the_constant_region(tmp_path, monkeypatch):
    """LeNet's outputs: prob [b, 10] and loss, a scalar (SoftmaxLoss: the mean over the batch) that
    the plan keeps in the constant arena. The manifest says where; netc_forward copies its 4 bytes
    from there at every batch, in one device-to-device copy, to the caller's scalar."""
    from netc.memory.model import CONSTANT
    r, _ = compile_cli("examples/lenet.nd", tmp_path / "lenet.so")
    assert r.returncode == 0, r.stderr
    lib = load(tmp_path / "lenet.so")
    m = json.loads(lib.netc_manifest())
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load as load_nd
    from netc.pipelines import Options, Plan, compile
    diag = DiagnosticEngine()
    mod = load_nd(str(ROOT / "examples/lenet.nd"), diag)
    ctx = compile(mod, Options(phase="test"), diag, plan=Plan())
    plan = ctx.notes["memory_plan"]["lenet"]
    assert plan.tensor("loss").cls == CONSTANT
    prob, loss = m["outputs"]
    assert loss == dict(name="loss", shape=[], dtype="f32", batched=False, region="constant",
                        offset=plan.address("loss"), bytes=4)
    assert prob["name"] == "prob" and prob["shape"] == [64, 10] and prob["batched"] is True
    assert [(i["name"], i["dtype"], i.get("classes")) for i in m["inputs"]] == [("data", "f32", None),
                                                                              ("label", "i32", 10)]
    assert m["param_bytes"] <= loss["offset"] < m["memory"]["constant_bytes"]
    assert '"batched": false' in (tmp_path / "lenet.h").read_text()         # the header says how such outputs come
    log = _fake_driver(tmp_path, monkeypatch)
    net = lib.netc_create()
    assert net, lib.netc_last_error(None)
    blob = ctypes.create_string_buffer(m["param_bytes"])
    assert lib.netc_set_params(net, blob, m["param_bytes"]) == 0
    ins = (ctypes.c_void_p * 2)(0x7000000000, 0x7100000000)
    outs = (ctypes.c_void_p * 2)(0x7200000000, 0x7300000000)
    base = 0x100000000
    const = m["memory"]["arena_bytes"] - m["memory"]["batch_bytes_per_sample"] * m["batch"]
    for b in (64, 3):
        n0 = len(log.read_text().splitlines())
        assert lib.netc_forward(net, ins, outs, b, None) == 0, lib.netc_last_error(net)
        new = log.read_text().splitlines()[n0:]
        copies = [ln.split() for ln in new if ln.startswith(("dtod", "copy2d"))]
        assert copies[-2] == ["dtod", str(0x7200000000), str(base + const + prob["arena_offset_per_sample"] * b
                                                              + prob["offset_in_sample"]), str(40 * b)]
        assert copies[-1] == ["dtod", str(0x7300000000), str(base + loss["offset"]), "4"]
        # the loss kernel (logits, labels, out, ...) writes there
        entry = {k["kernel"]: k["entry"] for k in m["kernels"]}["softmax_loss_kernel"]
        (launch,) = [ln.split() for ln in new if ln.startswith("launch " + entry + " ")]
        assert int(launch[9]) == base + loss["offset"] and launch[2:5] == ["1", "1", "1"]
    lib.netc_destroy(net)


def test_input_without_batch_axis_is_a_clear_error(tmp_path):
    f = tmp_path / "nb.nd"
    f.write_text("network nb {\n  input x: f32[4, 8]\n  input s: f32[2, 8]\n"
                 "  a = ReLU(x)\n  c = ReLU(s)\n  output a, c\n}\n")
    r, _ = compile_cli(str(f), tmp_path / "nb.so")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"{f}:3:9: error: input 's' has shape [2, 8], without the batch axis" in r.stderr, r.stderr
    assert "  input s: f32[2, 8]" in r.stderr and "^" in r.stderr
    assert not (tmp_path / "nb.so").exists()


def test_warm_compile_uses_the_cache(alexnet, tmp_path):
    r, secs = compile_cli("examples/alexnet.nd", tmp_path / "again.so")
    assert r.returncode == 0, r.stderr
    made = re.search(r"(\d+) kernels \((\d+) from the cache\)", r.stderr)
    assert made and made.group(1) == made.group(2) and int(made.group(1)) >= 8, r.stderr
    print(f"\nwarm alexnet compile: {secs:.1f}s wall (process start included); {r.stderr.strip()}")


def test_warm_compile_needs_neither_torch_nor_triton(alexnet, tmp_path):
    """A warm compile takes the launches from the lowering cache and the cubins from the kernel
    cache: the same .so byte for byte, without importing torch or Triton (lowering_cache.py)."""
    first = tmp_path / "first.so"
    r, _ = compile_cli("examples/alexnet.nd", first)        # fills the lowering cache if need be
    assert r.returncode == 0, r.stderr
    second = tmp_path / "second.so"
    code = ("import sys; from netc.cli import main; rc = main(['compile', 'examples/alexnet.nd', '-o', %r]); "
            "print(rc, 'torch' in sys.modules, 'triton' in sys.modules)" % str(second))
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    assert p.stdout.split() == ["0", "False", "False"], p.stdout + p.stderr
    assert first.read_bytes() == second.read_bytes()


def test_lowering_cache_misses_on_change_and_survives_eviction(tmp_path):
    """Another arch is another key; a cubin gone from the kernel cache makes the
    lowering entry a miss, and the compile lowers again instead of failing."""
    cache = tmp_path / "cache"
    env = dict(os.environ, NETC_CACHE_DIR=str(cache))
    src = tmp_path / "tiny.nd"
    src.write_text("network tiny {\n  input data: f32[4, 6, 6, 3]\n"
                   "  c = Convolution(data) { filter: [3, 3, 3, 5], padding: SAME, activation: relu }\n"
                   "  p = Pooling(c) { ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1] }\n}\n")
    a, b = tmp_path / "a.so", tmp_path / "b.so"
    r, _ = compile_cli(str(src), a, env=env)
    assert r.returncode == 0, r.stderr
    entries = list((cache / "lowerings").glob("*.json"))
    assert len(entries) == 1
    r, _ = compile_cli(str(src), b, "--arch", "sm_80", env=env)
    assert r.returncode == 0, r.stderr
    assert len(list((cache / "lowerings").glob("*.json"))) == 2
    for c in cache.glob("*.cubin"):
        c.unlink()
    r, _ = compile_cli(str(src), b, env=env)
    assert r.returncode == 0, r.stderr
    assert "0 from the cache" in r.stderr
    assert a.read_bytes() == b.read_bytes()
    assert len(list((cache / "lowerings").glob("*.json"))) == 2   # the same key, written again


def test_dedup_vgg_specializations():
    """VGG-16's 13 convolutions share a handful of specializations (no AOT compile needed)."""
    from netc.codegen.lower import lower_network
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load as load_nd
    from netc.pipelines import Options, Plan, compile
    diag = DiagnosticEngine()
    mod = load_nd(str(ROOT / "examples/vgg16.nd"), diag)
    ctx = compile(mod, Options(phase="test"), diag, plan=Plan())
    low = lower_network(mod, mod.networks()[0], ctx.notes["memory_plan"]["vgg16"])
    convs = [L for L in low.launches if L.call.kernel.__name__ == "conv2d_kernel"]
    assert len(convs) == 13   # fc6-fc8, written as convolutions, are matrix products (conv2d_matrix_views)
    assert len({L.spec_key for L in convs}) < len(convs) // 2
    gemms = [L for L in low.launches if L.call.kernel.__name__ == "gemm_kernel"]
    assert [L.layers[0] for L in gemms] == ["fc6", "fc7", "fc8"]
    assert len({L.spec_key for L in low.launches}) < len(low.launches)


ALIGNMENT_CHECK = """
import sys
from netc.codegen.lower import lower_network
from netc.diagnostics import DiagnosticEngine
from netc.frontend import load as load_nd
from netc.kernels.aot import compile_call
from netc.pipelines import Options, Plan, Precision, compile
diag = DiagnosticEngine()
mod = load_nd(sys.argv[1], diag)
ctx = compile(mod, Options(phase="test", precision=Precision(dtype="bf16")), diag, plan=Plan())
plan = ctx.notes["memory_plan"]["vgg16"]
low = lower_network(mod, mod.networks()[0], plan)
for L in low.launches:
    for i, a in enumerate(L.args):
        every = a.kind in ("ptr", "i32", "i64") and all((a.coeff * b + a.const) % 16 == 0 for b in range(1, plan.batch + 2))
        assert (i in L.call.aligned) == every, (L.group, i, a)
conv = next(L for L in low.launches if L.call.kernel.__name__ == "conv2d_kernel" and L.layers[0] == "conv2-1")
names = conv.call.kernel.arg_names
print(sorted(names[i] for i in conv.call.aligned))
ptx = compile_call(conv.call, 90).ptx
print("cp.async" in ptx, "wgmma.mma_async" in ptx)
"""


def test_lowered_arguments_carry_their_alignment_and_the_convolutions_pipeline():
    """Every lowered argument that is a multiple of 16 at every batch (a pointer into a 256-aligned
    buffer, a row stride of 64 channels) is marked so (KernelCall.aligned) and compiled with Triton's
    divisibility hint, as the JIT does from values: without it every load was a scalar, synchronous
    one. With it VGG-16's convolutions load through cp.async (software-pipelined); no argument that
    is not a multiple of 16 at some batch is marked. (In a process of its own: an xdist worker may
    have imported the kernels for the interpreter.)"""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", ALIGNMENT_CHECK, str(ROOT / "examples/vgg16.nd")], capture_output=True,
                       text=True, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr
    aligned, pipelined = r.stdout.strip().splitlines()
    assert {"x_ptr", "w_ptr", "out_ptr", "stride_xh", "stride_om"} <= set(ast.literal_eval(aligned))
    assert pipelined == "True True", r.stdout


FC_CHECK = """
import collections, re, sys
from netc.codegen.lower import lower_network
from netc.diagnostics import DiagnosticEngine
from netc.frontend import load as load_nd
from netc.kernels.aot import compile_call
from netc.pipelines import Options, Plan, Precision, compile
diag = DiagnosticEngine()
mod = load_nd(sys.argv[1], diag)
ctx = compile(mod, Options(phase="test", precision=Precision(dtype="bf16")), diag, plan=Plan())
low = lower_network(mod, mod.networks()[0], next(iter(ctx.notes["memory_plan"].values())))
for L in low.launches:
    if L.layers[0] in ("fc6", "fc8"):
        ptx = compile_call(L.call, 90).ptx
        cp = collections.Counter(int(v, 0) for v in re.findall(r"cp\\.async\\.c[ag]\\.shared\\.global(?:\\.L2::\\w+)?\\s*\\[[^\\]]*\\],\\s*\\[[^\\]]*\\],\\s*(\\w+)", ptx))
        ld = len(re.findall(r"ld\\.global(?:\\.\\w+)*?\\.[bufs](8|16)\\b", ptx))
        st = len(re.findall(r"st\\.global(?:\\.\\w+)*?\\.[bufs](8|16)\\b", ptx))
        print(L.layers[0], L.call.kernel.__name__, L.call.constexprs.get("SPLIT"), sorted(cp), ld, st)
"""


def test_fully_connected_convolutions_are_split_k_products_with_wide_loads():
    """AlexNet's fc6-fc8 are convolutions, as in Paleo's file (fc6 5x5 over the 5x5 pool5, fc7 and fc8 1x1):
    lowered as matrix products (conv2d_matrix_views), split-K where batch 128 gives few tiles (fc8's 8
    tiles of 128 x 128: 16 chunks, 128 programs), and every load and store of their bf16 operands 16 bytes
    wide, fc8's 1000 columns included (a multiple of 8: KernelCall.divisible; gemm's unit strides known at
    compile time: its UNIT_* constexprs). Before, fc8 was one conv2d program per tile (8 programs for 132
    SMs) loading its filter 2 bytes at a time (a process of its own, as above)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", FC_CHECK, str(ROOT / "examples/alexnet.nd")], capture_output=True,
                       text=True, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr
    rows = [ln.split(" ", 3) for ln in r.stdout.strip().splitlines()]
    kernels = [(name, kernel, split) for name, kernel, split, _ in rows]
    assert [k for _, k, _ in kernels] == ["gemm_kernel", "gemm_split_reduce_kernel"] * 2, r.stdout
    assert int(kernels[0][2]) > 1 and int(kernels[2][2]) > 1, r.stdout
    gemm_rows = [rest for name, kernel, _, rest in rows if kernel == "gemm_kernel"]
    assert all(rest == "[16] 0 0" for rest in gemm_rows), r.stdout


KMAJOR_CHECK = """
import collections, dataclasses, re, torch
from netc.kernels.aot import compile_call
from netc.kernels.conv import conv2d, kmajor_row
x, w = torch.empty((64, 56, 56, 256), device="meta"), torch.empty((3, 3, 256, 256), device="meta")
for km in (None, torch.empty((256, kmajor_row(9 * 256)), device="meta")):
    c = conv2d(x, w, allow_tf32=True, w_kmajor=km, launch=False)
    c = dataclasses.replace(c, aligned=tuple(i for i, a in enumerate(c.args) if torch.is_tensor(a)
                                             or (type(a) is int and a % 16 == 0)))
    ptx = compile_call(c, 90).ptx
    sizes = re.findall(r"cp\\.async\\.c[ag]\\.shared\\.global(?:\\.L2::\\w+)?\\s*\\[[^\\]]*\\],\\s*\\[[^\\]]*\\],\\s*(\\w+)", ptx)
    print(sorted(collections.Counter(int(v, 0) for v in sizes)), "tf32" in " ".join(re.findall(r"wgmma[\\w.]*", ptx)))
"""


def test_tf32_convolutions_fill_shared_memory_with_16_byte_copies():
    """Hopper's TF32 wgmma reads B K-major only: from the HWIO filter (C_out contiguous) Triton copies
    B into shared memory transposed, 4 bytes at a time; from the K-major copy (filter_kmajor) every
    asynchronous copy is 16 bytes, as in bf16 (a process of its own, as above)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", KMAJOR_CHECK], capture_output=True, text=True, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr
    hwio, kmajor = r.stdout.strip().splitlines()
    assert hwio.startswith("[4, 16]") and hwio.endswith("True"), hwio
    assert kmajor == "[16] True", kmajor


def test_op_without_kernel_is_a_clear_error(tmp_path):
    f = tmp_path / "up.nd"
    f.write_text("network up {\n  input data: f32[2, 4, 4, 8]\n"
                 "  up = UpSampling2D(data) { ksize: [1, 2, 2, 1] }\n}\n")
    r, _ = compile_cli(str(f), tmp_path / "up.so")
    assert r.returncode == 1, r.stderr
    assert "'up'" in r.stderr and "no CUDA kernel" in r.stderr and "Traceback" not in r.stderr


def test_interp_target_reports_layers_without_kernels(tmp_path):
    # the interpreter target is implemented (tests/test_interp.py); an opaque layer has no kernel
    f = tmp_path / "op.nd"
    f.write_text("network op {\n  input data: f32[2, 4, 4, 8]\n"
                 "  bn = Opaque(data) { type: \"BatchNorm\" }\n  out = ReLU(bn)\n}\n")
    r = netc_interp("compile", f, "-o", tmp_path / "op.so", "--target", "interp")
    assert r.returncode == 1 and "'bn'" in r.stderr and "Traceback" not in r.stderr
    assert "--opaque-as-identity" in r.stderr


def test_group_split_where_the_plan_reuses_bytes(tmp_path):
    """s = c0 + conv(c0) planned op by op (fusion="none"), s in place over c0: the conv cannot write
    s while other programs still read c0's windows, so the group is split after the conv (add +
    relu: a chain). Planned with fusion (the default after fuse), the group is one step, r is kept
    off c0's bytes (the conv reads windows of c0) and nothing is split."""
    from netc.codegen.lower import lower_network
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load as load_nd
    from netc.pipelines import Options, Plan, compile
    f = tmp_path / "hz.nd"
    f.write_text("""network hz {
  input data: f32[4, 8, 8, 16]
  c0 = Convolution(data) { filter: [3, 3, 16, 16], activation: relu }
  c1 = Convolution(c0) { filter: [3, 3, 16, 16] }
  s = Elementwise(c0, c1) { operation: sum }
  r = ReLU(s)
  out = Softmax(r)
}
""")
    diag = DiagnosticEngine()
    mod = load_nd(str(f), diag)
    ctx = compile(mod, Options(phase="test"), diag, plan=Plan(fusion="none"))
    plan = ctx.notes["memory_plan"]["hz"]
    assert plan.tensor("s").buffer == plan.tensor("c0").buffer      # the plan made s in place over c0
    low = lower_network(mod, mod.networks()[0], plan)
    assert [L.layers for L in low.launches] == [["c0"], ["c1"], ["s", "r"], ["out"]]
    assert len(low.splits) == 1 and "'s'" in low.splits[0]
    from netc.memory.plan import plan_memory
    fused = plan_memory(mod, mod.networks()[0])
    assert fused.fusion and fused.tensor("s").fused and fused.tensor("r").buffer != fused.tensor("c0").buffer
    low = lower_network(mod, mod.networks()[0], fused)
    assert [L.layers for L in low.launches] == [["c0"], ["c1", "s", "r"], ["out"]] and low.splits == []


def test_kernels_compile_in_parallel_as_in_one_process(tmp_path):
    """The cache misses compile in forked processes (NETC_COMPILE_JOBS, default the CPUs): the same
    cubins, the same library, as one process compiling them in turn."""
    libs = {}
    for jobs in ("2", "1"):
        env = dict(os.environ, NETC_CACHE_DIR=str(tmp_path / f"cache{jobs}"), NETC_COMPILE_JOBS=jobs)
        r, _ = compile_cli("examples/lenet.nd", tmp_path / f"l{jobs}.so", "--train", env=env)
        assert r.returncode == 0, r.stderr
        assert "(0 from the cache)" in r.stderr
        libs[jobs] = {p.name: p.read_bytes() for p in (tmp_path / f"cache{jobs}").glob("*.cubin")}
    assert libs["1"] == libs["2"] and len(libs["1"]) == 29
    env = dict(os.environ, NETC_COMPILE_JOBS="many")
    r, _ = compile_cli("examples/lenet.nd", tmp_path / "x.so", env=env)
    assert r.returncode == 1 and "NETC_COMPILE_JOBS must be a whole number" in r.stderr
