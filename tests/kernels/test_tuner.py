"""The tuner (netc/codegen/tune.py) through Triton's interpreter: every tunable specialization of a
small network is re-lowered onto a real arena laid out as the memory plan, every candidate runs,
the winners become tuning-file entries that round-trip and that lowering then applies. (Times
under the interpreter mean nothing; on a GPU the same code times with CUDA events.)"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


def planned(text):
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend.dsl import parse_nd
    from netc.pipelines import Options, Plan, compile
    diag = DiagnosticEngine()
    m = parse_nd(text, "tiny.nd", diag)
    ctx = compile(m, Options(phase="test"), diag, plan=Plan(mode="inference"))
    net = m.networks()[0]
    return m, net, ctx.notes["memory_plan"][net.attrs["sym_name"]]


def test_tuner_runs_every_candidate_and_its_winners_apply(device, tmp_path):
    if device != "cpu":
        pytest.skip("the interpreter's variant; on a GPU `netc compile --autotune` is the test")
    from netc.codegen.lower import lower_network, tuning_key
    from netc.codegen.tune import candidates, tune_network
    from netc.codegen.tuning_file import TUNED_KERNELS, load_tuning, merge
    m, net, plan = planned((ROOT / "tests" / "data" / "tiny_shared_params.nd").read_text())
    ran = []

    def timer(fn):                       # runs the candidate (a wrong one raises), a made-up time
        fn()
        ran.append(fn)
        return float(len(ran))

    entries = tune_network(m, net, plan, device="cpu", timer=timer, max_candidates=3)
    low = lower_network(m, net, plan)
    keys = {tuning_key(L.call) for L in low.launches if L.call.kernel.__name__ in TUNED_KERNELS}
    assert {e["key"] for e in entries} == keys and len(entries) == len(keys)
    assert len(ran) == sum(e["candidates"] for e in entries) and all(e["candidates"] >= 1 for e in entries)
    for e in entries:
        L = next(L for L in low.launches if tuning_key(L.call) == e["key"])
        assert e["config"] == candidates(L.call)[0]     # the first candidate (the default) took the least "time"
        assert e["us"] <= e["default_us"] and e["kernel"] == L.call.kernel.__name__
    # the file round-trips and lowering applies its configurations
    f = tmp_path / "t.json"
    for e in entries:
        if e["kernel"] == "conv2d_kernel":
            e["config"] = dict(e["config"], num_warps=2, block_m=16)
    merge(str(f), entries)
    merge(str(f), entries[:1])                      # a second run replaces its entries, keeps the rest
    tuning = load_tuning(str(f), 0)
    assert len(tuning) == len(entries)
    tuned = lower_network(m, net, plan, tuning=tuning)
    conv = [L for L in tuned.launches if L.call.kernel.__name__ == "conv2d_kernel"]
    assert conv and all(L.tuned and L.call.options["num_warps"] == 2 and L.call.constexprs["BLOCK_M"] == 16
                        for L in conv)


def test_candidates_fit_the_problem():
    from netc.codegen.tune import candidates
    from netc.kernels.conv import conv2d
    from netc.kernels.gemm import gemm

    def meta(*shape, dt=torch.float32):
        return torch.empty(*shape, dtype=dt, device="meta")
    big = candidates(gemm(meta(512, 4096, dt=torch.bfloat16), meta(4096, 4096, dt=torch.bfloat16), launch=False))
    assert len(big) >= 10 and any(c["block_n"] == 256 and c["block_k"] == 64 for c in big)
    small = candidates(conv2d(meta(2, 6, 6, 3), meta(3, 3, 3, 8), launch=False))
    assert all(c["block_n"] <= 32 and c.get("flat_k") for c in small[1:])       # 8 output channels, 27-long K
    assert all(c["block_k"] == 32 or c["block_k"] == 16 for c in small[1:])      # f32 operands: short K steps


FC = """
network fc {
  input x: f32[3, 4, 4, 20]
  fc1 = InnerProduct(x) { num_outputs: 24, activation: relu }
  fc2 = InnerProduct(fc1) { num_outputs: 10 }
  prob = Softmax(fc2)
}
"""


def test_split_k_candidates_where_the_tiles_are_few():
    from netc.codegen.tune import candidates, split_ks
    from netc.kernels.gemm import gemm

    def meta(*shape):
        return torch.empty(*shape, dtype=torch.bfloat16, device="meta")
    fc6 = candidates(gemm(meta(16, 25088), meta(25088, 4096), launch=False))     # VGG's fc6 at batch 16
    splits = {c.get("split", 1) for c in fc6}
    assert {2, 4, 8, 16} <= splits
    assert all(c["split"] * -(-16 // c["block_m"]) * -(-4096 // c["block_n"]) <= 4 * 132 for c in fc6 if "split" in c
               and c["split"] > 1)
    square = candidates(gemm(meta(4096, 4096), meta(4096, 4096), launch=False))  # 1,024 tiles and more
    assert {c.get("split", 1) for c in square} == {1}
    assert split_ks(16, 64, 64, 16, 64, 64) == []                                 # K too short to cut


def test_tuned_split_k_runs_on_the_interpreter(device):
    """A tuning file's split-K configuration for an inner product: two kernels (the chunks into the
    workspace, their sum with the epilogue), the workspace sized for them, the same outputs as the
    reference -- on the interpreter target, what the .so runs on the GPU."""
    if device != "cpu":
        pytest.skip("the interpreter's variant")
    from netc.codegen.lower import lower_network, tuning_key
    from netc.frontend.dsl import parse_nd
    from netc.diagnostics import DiagnosticEngine
    from netc.runtime.interp import InterpProgram, default_inputs
    from netc.runtime.reference import run_reference
    m, net, plan = planned(FC)
    plain = lower_network(m, net, plan)
    fc1 = next(L for L in plain.launches if L.layers[0] == "fc1")
    tuning = {tuning_key(fc1.call): dict(block_m=16, block_n=16, block_k=16, group_m=1, split=4, num_warps=2,
                                         num_stages=2)}
    tuned = lower_network(m, net, plan, tuning=tuning)
    mine = [L for L in tuned.launches if L.layers[0] == "fc1"]
    assert [L.call.kernel.__name__ for L in mine] == ["gemm_kernel", "gemm_split_reduce_kernel"]
    assert all(L.tuned for L in mine) and mine[0].call.constexprs["SPLIT"] == 4
    assert tuned.workspace_bytes >= 4 * 4 * 24 * 4 > plain.workspace_bytes      # [split, B + 1, 24] fp32
    # untuned, gemm.default_split cuts fc1's K = 320 in 2 (one tile of its 3 x 24 output; K steps of 32 for f32)
    assert [L.call.constexprs["SPLIT"] for L in plain.launches if L.layers[0] == "fc1"] == [2, 2]
    assert len(tuned.launches) == len(plain.launches)
    m2 = parse_nd(FC, "fc.nd", DiagnosticEngine())
    want = None
    for batch in (3, 2):        # the compiled batch, and a smaller one (the grids and M scale with it)
        prog = InterpProgram(m2, batch=batch, tuning=tuning)
        xs = default_inputs(m2, prog.net, 0)
        want = want if want is not None else run_reference(m2, xs, None)["prob"]
        got = prog.run({k: v[:batch] for k, v in xs.items()})["prob"]
        err = float((got.double() - want[:batch]).abs().max())
        assert err < 1e-5, (batch, err)


def test_cli_runs_a_tuning_on_the_interpreter(device, tmp_path, capsys):
    """`netc run FILE --target interp --tuning T.json --compare`: the tuned configurations (split-K
    here) on the CPU against the reference; the flag's misuses are one clear line each."""
    if device != "cpu":
        pytest.skip("the interpreter's variant")
    from netc.cli import main
    from netc.codegen.lower import lower_network, tuning_key
    from netc.codegen.tuning_file import merge
    m, net, plan = planned(FC)
    fc1 = next(L for L in lower_network(m, net, plan).launches if L.layers[0] == "fc1")
    t = tmp_path / "t.json"
    merge(str(t), [dict(key=tuning_key(fc1.call), device="test", arch=90, triton="x", kernel="gemm_kernel",
                        layer="fc1", sizes={}, config=dict(block_m=16, block_n=16, block_k=16, group_m=1, split=3,
                                                           num_warps=2, num_stages=2), us=1.0)])
    src = tmp_path / "fc.nd"
    src.write_text(FC)
    assert main(["run", str(src), "--target", "interp", "--tuning", str(t), "--compare"]) == 0
    err = capsys.readouterr().err
    assert "fc: 2 of 4 launches tuned by" in err and "prob: max relative error" in err
    for args, msg in [(["--reference", "--tuning", str(t)], "--tuning runs the kernels with a tuning file's"),
                      (["--target", "interp", "--tuning", str(t), "--interp-blocks", "large"], "give one"),
                      (["--target", "interp", "--tuning", str(t), "--train"], "training steps and ranks run with"),
                      (["--target", "interp", "--tuning", str(tmp_path / "no.json")], "no such file")]:
        assert main(["run", str(src), *args]) == 1, args
        assert msg in capsys.readouterr().err, args
