"""--dtype f32|bf16|fp16 and --tf32: the set-dtype pass (what stays f32, integer tensors untouched,
the memory plan sized by the new types), the interpreter target in f16/bf16/TF32 against the
float64 reference with the dtype's tolerance, `netc run`/`compile` flags and their errors, and a
bf16 network compiled to sm_90 / an fp16 one to sm_80 cubins without a GPU."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# the interpreter mode is fixed when netc.kernels is imported: set it at collection
os.environ["TRITON_INTERPRET"] = "1"

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from netc.diagnostics import NetcError  # noqa: E402
from netc.frontend.dsl import parse_nd  # noqa: E402
from netc import pipelines  # noqa: E402
from netc.pipelines import Options, Precision  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# conv + folded batch norm + relu, an inception-style zero-copy concat, pools, LRN, an inner
# product and softmax: every kernel family, small enough for the interpreter
NET = """network small {
  input data: f32[2, 10, 10, 3]
  conv1 = Convolution(data) { filter: [3, 3, 3, 8], padding: SAME }
  bn1 = BatchNorm(conv1)
  relu1 = ReLU(bn1)
  pool1 = Pooling(relu1) { ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1] }
  a = Convolution(pool1) { filter: [1, 1, 8, 4], padding: SAME, activation: relu }
  b = Convolution(pool1) { filter: [3, 3, 8, 4], padding: SAME, activation: relu }
  c = AvgPool(pool1) { ksize: [1, 3, 3, 1], strides: [1, 1, 1, 1], padding: SAME }
  cat = Concatenate(a, b, c) { dim: 3 }
  norm = LRN(cat) { local_size: 5, alpha: 0.01, beta: 0.75, knorm: 2.0 }
  s = Elementwise(norm, cat) { operation: sum }
  ip = InnerProduct(s) { num_outputs: 10 }
  prob = Softmax(ip)
  output prob, s
}
"""


@pytest.fixture(scope="module", autouse=True)
def _interp(interp_mode):
    """Every test here runs the kernels under Triton's interpreter (tests/conftest.py)."""


def _set_dtype(src, dtype, tf32=False):
    m = parse_nd(src)
    pipelines.inference(m, Options(precision=Precision(dtype, tf32)))
    return m


def _types(m):
    net = m.networks()[0]
    vals = {op.attrs["name"]: op.results[0].type.dtype for op in net.regions[0].ops if "name" in op.attrs}
    params = {p.attrs["sym_name"]: p.attrs["type"].dtype for p in m.params()}
    return vals, params, net


# --------------------------------------------------------------------------- the pass

def test_pass_policy():
    src = NET.replace("  output prob, s\n", "  input label: i32[2]\n  loss = SoftmaxLoss(ip, label)\n"
                                             "  top = ArgSort(prob) { topk: 3 }\n  output prob, s, loss, top\n")
    vals, params, net = _types(_set_dtype(src, "fp16"))
    assert vals["data"] == vals["conv1"] == vals["cat"] == vals["s"] == vals["ip"] == "f16"
    assert vals["prob"] == vals["loss"] == vals["top"] == "f32"       # probabilities, losses, indices
    assert vals["label"] == "i32"                                      # integer tensors untouched
    assert params["bn1.scale"] == params["bn1.shift"] == "f32"
    assert params["conv1.weight"] == params["conv1.bias"] == params["ip.weight"] == "f16"
    assert net.attrs["netc.precision"] == {"dtype": "f16", "accumulate": "f32", "tf32": False}
    assert next(op for op in net.regions[0].ops if op.attrs.get("name") == "data").attrs["dtype"] == "f16"


def test_pass_shared_parameters_take_one_dtype():
    """A parameter bound as a batch-norm scale stays f32, and the inner product sharing its storage
    (share_from) reads the same f32 bytes."""
    src = """network n {
  input x: f32[2, 4, 4, 8]
  bn = BatchNorm(x) { params: { scale: { name: g } } }
  ip = InnerProduct(bn) { num_outputs: 1, params: { bias: { name: g2, share_from: g } } }
}"""
    src = src.replace("num_outputs: 1", "num_outputs: 8")
    _, params, _ = _types(_set_dtype(src, "bf16"))
    assert params["g"] == params["g2"] == "f32" and params["ip.weight"] == "bf16"


def test_pass_memory_plan_halves():
    from netc.memory.plan import plan_memory
    from netc.memory.model import BATCH, CONSTANT
    sizes = {}
    for dt in ("f32", "bf16"):
        m = _set_dtype(NET, dt)
        plan = plan_memory(m, m.networks()[0], mode="inference")
        sizes[dt] = ({t.name: t.size for t in plan.tensors}, plan.arenas[BATCH].size, plan.arenas[CONSTANT].size)
    t32, t16 = sizes["f32"][0], sizes["bf16"][0]
    assert t16["conv1"] * 2 == t32["conv1"] and t16["@conv1.weight"] * 2 == t32["@conv1.weight"]
    assert t16["prob"] == t32["prob"] and t16["@bn1.scale"] == t32["@bn1.scale"]
    assert sizes["bf16"][1] < 0.6 * sizes["f32"][1]


def test_pass_needs_options_and_checks_them():
    m = parse_nd(NET)
    with pytest.raises(NetcError, match="needs a dtype"):
        pipelines.inference(m, Options(precision=Precision()))
    with pytest.raises(NetcError, match="unknown --dtype 'bf61'.*did you mean 'bf16'"):
        _set_dtype(NET, "bf61")
    with pytest.raises(NetcError, match="--tf32 applies to f32"):
        _set_dtype(NET, "bf16", tf32=True)
    with pytest.raises(NetcError, match="--tf32x3 applies to f32"):
        pipelines.inference(parse_nd(NET), Options(precision=Precision("bf16", tf32x3=True)))
    with pytest.raises(NetcError, match="two ways to compute f32 products"):
        pipelines.inference(parse_nd(NET), Options(precision=Precision(None, True, True)))
    # the names the benchmarks and reports use
    assert Precision.named("tf32x3") == Precision(tf32x3=True) and Precision.named("f32") is None
    assert Precision.named("bf16") == Precision("bf16")
    with pytest.raises(ValueError, match="unknown precision 'tf64'"):
        Precision.named("tf64")


# --------------------------------------------------------------------------- the interpreter target

def _interp_vs_reference(dtype, tf32=False, seed=0):
    from netc.passes.set_dtype import precision_of
    from netc.runtime.compare import network_tolerance
    from netc.runtime.interp import InterpProgram, default_inputs
    from netc.runtime.reference import run_reference
    m = parse_nd(NET)
    prog = InterpProgram(m, seed=seed, dtype=dtype, tf32=tf32)
    inputs = default_inputs(m, prog.net, seed)
    got = prog.run(inputs)
    ref = run_reference(m, inputs, seed=seed)
    tol = network_tolerance(precision_of(prog.net))
    errs = {}
    for k, r in ref.items():
        g = got[k]
        assert not torch.isnan(g).any(), f"{k}: unwritten (poisoned) values"
        errs[k] = float((g.double() - r).abs().max()) / float(r.abs().max())
        assert errs[k] <= tol, f"{k}: max relative error {errs[k]:.3e} > {tol:.0e} ({dtype}, tf32={tf32})"
    return prog, got, errs


@pytest.mark.parametrize("dtype,floor", [("f16", 5e-5), ("bf16", 5e-4)])
def test_interp_16bit_network_matches_f64_reference(dtype, floor):
    prog, got, errs = _interp_vs_reference(dtype)
    want = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    assert got["s"].dtype == want and got["prob"].dtype == torch.float32
    # it really ran in 16 bits: the rounding shows (an f32 run is ~1e-7 off)
    assert errs["s"] > floor, errs
    assert {prog.plan.tensor("conv1").dtype, prog.plan.tensor("@conv1.weight").dtype} == {dtype}
    assert prog.manifest()["precision"] == {"dtype": dtype, "accumulate": "f32", "tf32": False}
    assert all(L.call.constexprs.get("ALLOW_TF32", False) is False for L in prog.launches)


def test_interp_tf32_network():
    prog, _, errs = _interp_vs_reference("f32", tf32=True)
    anchors = [L for L in prog.launches if "ALLOW_TF32" in L.call.constexprs]
    assert anchors and all(L.call.constexprs["ALLOW_TF32"] for L in anchors)
    assert errs["s"] > 1e-5, errs           # TF32 products: ~1e-3, not f32's ~1e-7
    # every TF32 convolution reads a K-major copy of its filter, made just before it in the workspace
    names = [L.call.kernel.__name__ for L in prog.launches]
    convs = [i for i, n in enumerate(names) if n == "conv2d_kernel"]
    assert convs and all(prog.launches[i].call.constexprs["W_KMAJOR"] for i in convs)
    assert all(names[i - 1] == "filter_kmajor_kernel" and prog.launches[i - 1].call.setup for i in convs)
    assert all(prog.launches[i].part == 0 and prog.launches[i - 1].part == 1 for i in convs)


def test_interp_3xtf32_network_is_about_as_accurate_as_f32():
    """--tf32x3: every f32 matrix product as three TF32 products (ALLOW_TF32 = 3 in every conv, gemm and
    gradient kernel; TF32's K-major filter copies too); against the f64 reference the network is within
    f32's tolerance and more than ten times closer than with one TF32 product."""
    prog, _, errs = _interp_vs_reference("f32", tf32="tf32x3")
    _, _, errs_tf32 = _interp_vs_reference("f32", tf32=True)
    anchors = [L for L in prog.launches if "ALLOW_TF32" in L.call.constexprs]
    assert anchors and all(L.call.constexprs["ALLOW_TF32"] == 3 for L in anchors)
    assert prog.manifest()["precision"] == {"dtype": "f32", "accumulate": "f32", "tf32": False, "tf32x3": True}
    assert errs["s"] < 1e-5 and errs_tf32["s"] > 10 * errs["s"], (errs, errs_tf32)


def test_training_program_takes_3xtf32():
    """`netc compile --train --tf32x3`: the training step's products (forward, data and filter gradients)
    are 3xTF32 too; --dtype stays refused with --train."""
    from netc.codegen.lower import lower_network
    from netc.pipelines import Plan, Training, compile
    m = parse_nd(NET)
    ctx = compile(m, Options(phase="train", training=Training(loss="softmax", loss_on="ip"), precision=Precision(tf32x3=True)),
                  plan=Plan(mode="training"))
    net = m.networks()[0]
    low = lower_network(m, net, next(iter(ctx.notes["memory_plan"].values())))
    kernels = {L.call.kernel.__name__: L.call.constexprs["ALLOW_TF32"] for L in low.launches
               if "ALLOW_TF32" in L.call.constexprs}
    assert {"conv2d_kernel", "conv2d_grad_data_kernel", "conv2d_grad_filter_kernel", "gemm_kernel"} <= set(kernels)
    assert set(kernels.values()) == {3}, kernels


def test_interp_f32_convolutions_read_the_filter_in_place():
    prog, _, _ = _interp_vs_reference("f32")
    convs = [L for L in prog.launches if L.call.kernel.__name__ == "conv2d_kernel"]
    assert convs and not any(L.call.constexprs["W_KMAJOR"] for L in convs)
    assert not any(L.call.kernel.__name__ == "filter_kmajor_kernel" for L in prog.launches)


# --------------------------------------------------------------------------- the CLI

def _cli(*args, cwd=ROOT, **env_extra):
    """`python -m netc ...` in a fresh process (compiling for CUDA needs kernels imported compiled)."""
    env = dict(os.environ, **env_extra)
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run([sys.executable, "-m", "netc", *args], capture_output=True, text=True, cwd=cwd, env=env)


class Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def netc_main(capsys, monkeypatch):
    """The CLI in this process (its kernels already run under the interpreter): no start-up cost."""
    from netc.cli import main

    def run(*args, cwd=ROOT):
        monkeypatch.chdir(cwd)
        monkeypatch.delenv("NETC_DEBUG", raising=False)
        capsys.readouterr()
        rc = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return Result(rc, out, err)
    return run


@pytest.fixture(scope="module")
def netfile(tmp_path_factory):
    f = tmp_path_factory.mktemp("dtype") / "small.nd"
    f.write_text(NET)
    return f


def test_cli_run_interp_bf16_compare(netc_main, netfile, tmp_path):
    r = netc_main("run", str(netfile), "--target", "interp", "--dtype", "bf16", "--compare", "--output",
             str(tmp_path / "o.npz"))
    assert r.returncode == 0, r.stderr
    assert "prob: max relative error" in r.stderr and "f64 reference (bf16: tolerance 4e-02; the bf16 reference's own error" in r.stderr
    with np.load(tmp_path / "o.npz") as z:             # bf16 outputs are saved as f32 (exact)
        assert z["s"].dtype == np.float32 and z["prob"].dtype == np.float32
    r = netc_main("run", str(netfile), "--target", "interp", "--dtype", "fp16")
    assert r.returncode == 0, r.stderr
    lines = dict(line.split(None, 1) for line in r.stdout.splitlines())
    assert "float16" in lines["s"] and "float32" in lines["prob"]


def test_cli_compare_knows_what_the_dtype_can_hold(netc_main, tmp_path):
    """x + y with x = 1000 + small and y = -1000: bf16 keeps none of `small` (the input itself rounds
    to 1000), so the relative error is ~1 in any bf16 implementation -- the bf16 reference's too, and
    --compare passes, saying so; a result 20% off where the bf16 reference is close fails (exit 1)."""
    f = tmp_path / "cancel.nd"
    f.write_text("network cancel {\n  input x: f32[2, 8]\n  input y: f32[2, 8]\n"
                 "  s = Elementwise(x, y) { operation: sum }\n}\n")
    small = np.linspace(0.01, 0.5, 16, dtype=np.float32).reshape(2, 8)
    np.savez(tmp_path / "in.npz", x=1000 + small, y=np.full((2, 8), -1000, dtype=np.float32))
    args = ("run", str(f), "--target", "interp", "--compare", "--inputs", str(tmp_path / "in.npz"))
    r = netc_main(*args, "--dtype", "bf16")
    assert r.returncode == 0, r.stderr
    assert "s: max relative error 1.000e+00" in r.stderr and "the bf16 reference's own error 1.000e+00" in r.stderr
    r = netc_main(*args, "--dtype", "f32")
    assert r.returncode == 0, r.stderr


def test_cli_compare_fails_beyond_the_dtype_tolerance(netc_main, netfile, monkeypatch):
    """Kernels 20% off in bf16 (the outputs scaled) fail --compare where the bf16 reference is close."""
    from netc.runtime.interp import InterpProgram
    run = InterpProgram.run
    monkeypatch.setattr(InterpProgram, "run", lambda self, ins: {k: v * 1.2 for k, v in run(self, ins).items()})
    r = netc_main("run", str(netfile), "--target", "interp", "--dtype", "bf16", "--compare")
    assert r.returncode == 1, r.stderr
    assert "error: output 'prob' of the bf16 network differs from the f64 reference" in r.stderr
    assert r.stdout.startswith("prob "), "the outputs are printed before the verdict"


@pytest.mark.parametrize("args,message", [
    (["run", "--target", "interp", "--dtype", "fp8"], "unknown --dtype 'fp8' (supported: f32, bf16, fp16)"),
    (["run", "--target", "interp", "--dtype", "f64"], "f64 is the reference executor's"),
    (["run", "--reference", "--dtype", "bf16"], "--dtype bf16 is a compiled dtype: use it with --target interp"),
    (["run", "--reference", "--dtype", "f66"], "unknown --dtype 'f66'"),
    (["run", "--reference", "--tf32"], "--tf32 needs --target interp"),
    (["run", "--reference", "--tf32x3"], "--tf32x3 needs --target interp"),
    (["run", "--target", "interp", "--train", "--tf32x3"], "training on the interpreter target runs f32 kernels"),
    (["run", "--target", "interp", "--dtype", "fp16", "--tf32"], "--tf32 applies to f32 matrix products"),
    (["compile", "-o", "x.so", "--dtype", "bf61"], "did you mean 'bf16'?"),
    (["compile", "-o", "x.so", "--dtype", "bf16", "--tf32"], "--tf32 applies to f32 matrix products"),
    (["compile", "-o", "x.so", "--dtype", "bf16", "--tf32x3"], "--tf32x3 applies to f32 matrix products"),
    (["compile", "-o", "x.so", "--tf32", "--tf32x3"], "two ways to compute f32 products"),
    (["compile", "-o", "x.so", "--train", "--dtype", "bf16"], "a training library computes in f32"),
    (["opt", "--dtype", "half"], "unknown --dtype 'half'"),
])
def test_cli_bad_dtype(netc_main, netfile, tmp_path, args, message):
    cmd, rest = args[0], args[1:]
    r = netc_main(cmd, str(netfile), *rest, cwd=tmp_path)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "error:" in r.stderr and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "x.so").exists()


def test_cli_compile_interp_manifest(netc_main, netfile, tmp_path):
    r = netc_main("compile", str(netfile), "--target", "interp", "--dtype", "fp16", "-o", str(tmp_path / "m.json"))
    assert r.returncode == 0, r.stderr
    man = json.loads((tmp_path / "m.json").read_text())
    assert man["precision"] == {"dtype": "f16", "accumulate": "f32", "tf32": False}
    assert man["inputs"] == {"data": "f16"} and man["outputs"] == {"prob": "f32", "s": "f16"}


@pytest.mark.parametrize("dtype,arch", [("bf16", "sm_90"), ("fp16", "sm_80")])
def test_cli_compile_16bit_network_to_cubins(netfile, tmp_path, dtype, arch, nvidia_toolchain):
    """AOT: the 16-bit network's kernels compile to cubins and the .so's manifest records the dtypes;
    netc_set_params takes the parameter bytes in them (16-bit weights, f32 batch-norm vectors)."""
    import ctypes
    nvidia_toolchain(int(arch[3:]), cc=True)
    r = _cli("compile", str(netfile), "-o", str(tmp_path / "net.so"), "--dtype", dtype, "--arch", arch,
             NETC_CACHE_DIR=str(tmp_path / "cache"))   # a fresh cache: really compile
    assert r.returncode == 0, r.stderr
    lib = ctypes.CDLL(str(tmp_path / "net.so"))
    lib.netc_manifest.restype = ctypes.c_char_p
    man = json.loads(lib.netc_manifest())
    ir = {"bf16": "bf16", "fp16": "f16"}[dtype]
    assert man["arch"] == arch and man["precision"] == {"dtype": ir, "accumulate": "f32", "tf32": False}
    assert man["dtypes"] == sorted({ir, "f32"})
    assert man["inputs"][0]["dtype"] == ir and {o["name"]: o["dtype"] for o in man["outputs"]} == {"prob": "f32",
                                                                                                   "s": ir}
    p = {q["name"]: q for q in man["parameters"]}
    assert p["conv1.weight"]["dtype"] == ir and p["conv1.weight"]["bytes"] == 3 * 3 * 3 * 8 * 2
    assert p["bn1.scale"]["dtype"] == "f32" and p["bn1.scale"]["bytes"] == 8 * 4
    assert man["kernels"] and all(k["cubin_bytes"] > 1000 for k in man["kernels"])


def test_tf32_reference_rounds_the_forward_products_operands():
    """The second reference of a --tf32 network (runtime.compare.own_precision) truncates the operands of
    its forward convolutions and inner products to TF32 (10 mantissa bits), as tensor cores read f32
    registers and the kernels do under the interpreter; outside tf32_products nothing changes."""
    from netc.ops import reference as R
    x = torch.tensor([1.0 + 2 ** -12, 1.0 + 2 ** -10 + 2 ** -11, -3.0000002, 1e-30, 0.0], dtype=torch.float32)
    assert torch.equal(R.product_operand(x), x.double())
    with R.computing_in(torch.float32), R.tf32_products():
        r = R.product_operand(x)
        assert r.dtype == torch.float32
        assert not (r.view(torch.int32) & 0x1FFF).any()
        assert r[0] == 1.0 and r[1] == 1.0 + 2 ** -10 and r[2] == -3.0 and r[4] == 0.0   # toward zero
        assert float(((r - x).abs() / x.abs().clamp(min=1e-38)).max()) <= 2 ** -10
        w = torch.randn(5, 3)
        y = R.gemm(x.reshape(1, 5), w)
        assert torch.equal(y, (r.reshape(1, 5) @ R.product_operand(w)))


def test_cli_tf32_compare_names_the_tf32_reference(netc_main, netfile):
    r = netc_main("run", str(netfile), "--target", "interp", "--tf32", "--compare")
    assert r.returncode == 0, r.stderr
    assert "(f32 (TF32 products): tolerance 1e-02; the tf32 reference's own error" in r.stderr
