"""Paleo's timing model (shared/spec/paleo-format.md §10, normative) and its simulations, against
an oracle written here from the spec alone (it shares no code with netc/costmodel.py or the ops):
the spec's worked check, every VGG-16 layer on TITAN X at batch 64, hand-computed values for each
timed layer type, the weight update, cross-device fetches, the all-reduce schemes, parallel-tower
bounds, the scaling table and the hybrid split, and the CLI's flags and their mistakes."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from netc.cli import main

ROOT = Path(__file__).resolve().parents[1]
PALEO = ROOT.parent / "shared" / "corpus" / "paleo"
needs_corpus = pytest.mark.skipif(not PALEO.is_dir(), reason="needs the shared corpus")

# TITAN_X as Paleo has it: 6144 GFLOPS, 336.5 GB/s (GB = 2^30 bytes), 1000 MHz
PEAK, BW, CLOCK_MS = 6144e9, 336.5 * 2 ** 30, 1e-6      # one clock at 1000 MHz: 1 ns


def comp(f, ppp=1.0):
    return 0.0 if not f else max(CLOCK_MS, f / PEAK * 1e3 / ppp)


def comm(b, ppp=1.0, bw=BW):
    return max(CLOCK_MS, b / bw * 1e3 / ppp)


def gemm_conv(x, f, o, holes=0.0, ppp=1.0):
    """Paleo's GEMM estimate of a convolution: input x (already padded), filter f [kh, kw, ci, co],
    output o, in fp32."""
    flops = 2 * f[0] * f[1] * f[2] * o[1] * o[2] * f[3] * x[0] * (1.0 - holes)
    return comp(flops, ppp) + comm(math.prod(x) * 4, ppp) + comm(math.prod(f) * (1.0 - holes) * 4, ppp) \
        + comm(math.prod(o) * 4, ppp)


def oracle_conv(x, filt, stride, padding, backprop=True, ppp=1.0):
    """(fwd, bwd_data, bwd_filter) ms of a Paleo convolution, straight from §6.2, §9.1 and §10."""
    N, H, W, C = x
    kh, kw, _, K = filt
    if padding == "VALID":
        oh, ow, ph, pw = -(-(H - kh + 1) // stride), -(-(W - kw + 1) // stride), 0, 0
    else:
        oh, ow = -(-H // stride), -(-W // stride)
        ph, pw = ((oh - 1) * stride + kh - H) // 2, ((ow - 1) * stride + kw - W) // 2
    fwd = gemm_conv([N, H + 2 * ph, W + 2 * pw, C], [kh, kw, C, K], [N, oh, ow, K], 0.0, ppp)

    def axis(h, k, o, p):
        e = (o - 1) * stride + 1
        pb = k - 1 - p
        pa = (h + k - 1) - e - pb
        if abs(pb - pa) == 1:
            e += 1
        return e, min(pb, pa)
    eh, qh = axis(H, kh, oh, ph)
    ew, qw = axis(W, kw, ow, pw)
    rho = (eh * ew - oh * ow) / (eh * ew)
    data = gemm_conv([N, eh + 2 * qh, ew + 2 * qw, K], [kh, kw, K, C], [N, H, W, C], rho, ppp) if backprop else 0.0
    if padding == "VALID":
        fx, fo = [C, H, W, N], [C, H - eh + 1, W - ew + 1, K]
    else:
        fx, fo = [C, H + 2 * qh, W + 2 * qw, N], [C, H + 2 * qh - eh + 1, W + 2 * qw - ew + 1, K]
    filt_ms = gemm_conv(fx, [eh, ew, N, K], fo, rho, ppp)
    return fwd, data, filt_ms


def explain(*args) -> dict:
    import io
    from contextlib import redirect_stdout
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["explain", *map(str, args), "--format", "json"]) == 0
    return json.loads(buf.getvalue())


def rows_by_name(doc):
    return {r["name"]: r for r in doc["layers"]}


def close(a, b, rel=1e-6):
    return abs(a - b) <= rel * max(abs(b), 1e-12)


@needs_corpus
def test_the_specs_worked_check():
    r = rows_by_name(explain(PALEO / "vgg16.json", "--device", "titanx"))["conv2-1"]
    assert abs(r["time_fwd_ms"] - 20.99534) < 5e-6 and abs(r["time_bwd_data_ms"] - 21.01584) < 5e-6
    assert close(r["time_bwd_ms"], r["time_bwd_data_ms"] + r["time_bwd_filter_ms"], 1e-12)


@needs_corpus
def test_every_vgg16_layer_on_titanx_at_batch_64():
    """Every layer's forward, backward-data and backward-filter time equals the spec's model to 1e-6."""
    doc = explain(PALEO / "vgg16.json", "--device", "titanx")
    rows = rows_by_name(doc)
    spec = json.loads((PALEO / "vgg16.json").read_text())["layers"]
    shapes = {"data": spec["data"]["tensor"]}
    want_f = want_d = want_w = 0.0
    for name, L in spec.items():
        if name == "data":
            continue
        x = shapes[L["parents"][0]]
        t = L["type"]
        if t == "Convolution":
            f, d, w = oracle_conv(x, L["filter"], L["strides"][1], L["padding"], backprop=L["parents"] != ["data"])
        elif t == "Pooling":
            kh, s = L["ksize"][1], L["strides"][1]
            o = [x[0], -(-(x[1] - kh + 1) // s), -(-(x[2] - kh + 1) // s), x[3]]
            f = comp(2 * kh * kh * x[3] * o[1] * o[2] * x[0]) + comm(math.prod(x) * 4) + comm(math.prod(o) * 4)
            d, w = f, 0.0
        elif t == "Dropout":
            f = comp(math.prod(x)) + 2 * comm(math.prod(x) * 4)
            d, w = f, 0.0
        else:                    # Softmax: "unimplemented" in Paleo
            f = d = w = 0.0
        r = rows[name]
        shapes[name] = r["shape"]
        for got, want, what in ((r["time_fwd_ms"], f, "fwd"), (r["time_bwd_data_ms"], d, "bwd data"),
                                (r["time_bwd_filter_ms"], w, "bwd filter")):
            assert close(got, want), (name, what, got, want)
        want_f, want_d, want_w = want_f + f, want_d + d, want_w + w
    t = doc["totals"]
    assert close(t["time_fwd_ms"], want_f) and close(t["time_bwd_data_ms"], want_d)
    assert close(t["time_bwd_filter_ms"], want_w) and close(t["time_bwd_ms"], want_d + want_w)
    # the weight update: 2 FLOPs per parameter, read w, read dw, write w, at ppp 1
    assert close(t["time_update_ms"], comp(2 * t["params"]) + 3 * comm(t["param_bytes"]))
    assert rows["conv1-1"]["time_bwd_data_ms"] == 0.0          # fed by data: no data gradient


SMALL = """network small {
  input data: f32[8, 17, 17, 5]
  c1 = Convolution(data) { filter: [3, 3, 5, 16], strides: [1, 2, 2, 1], padding: VALID }
  c2 = Convolution(c1) { filter: [3, 3, 16, 12], strides: [1, 2, 2, 1], padding: SAME }
  p = Pooling(c2) { ksize: [1, 3, 3, 1], strides: [1, 2, 2, 1], padding: VALID }
  d = Dropout(p)
  ip = InnerProduct(d) { num_outputs: 10 }
  prob = Softmax(ip)
}
"""


def test_each_layer_type_by_hand(tmp_path):
    src = tmp_path / "small.nd"
    src.write_text(SMALL)
    r = rows_by_name(explain(src, "--device", "titanx", "--ppp-comp", "0.5"))
    # strided convolutions have holes in their backward geometry (rho > 0)
    f, d, w = oracle_conv([8, 17, 17, 5], [3, 3, 5, 16], 2, "VALID", backprop=False, ppp=0.5)
    assert (close(r["c1"]["time_fwd_ms"], f) and r["c1"]["time_bwd_data_ms"] == 0.0
            and close(r["c1"]["time_bwd_filter_ms"], w))
    f, d, w = oracle_conv([8, 8, 8, 16], [3, 3, 16, 12], 2, "SAME", ppp=0.5)
    assert close(r["c2"]["time_fwd_ms"], f) and close(r["c2"]["time_bwd_data_ms"], d)
    assert close(r["c2"]["time_bwd_filter_ms"], w)
    # pooling 4x4x12 -> 1x1x12: its backward is its forward
    pool = comp(2 * 9 * 12 * 1 * 1 * 8, 0.5) + comm(8 * 4 * 4 * 12 * 4, 0.5) + comm(8 * 12 * 4, 0.5)
    assert close(r["p"]["time_fwd_ms"], pool) and close(r["p"]["time_bwd_data_ms"], pool)
    assert r["p"]["time_bwd_filter_ms"] == 0.0
    drop = comp(8 * 12, 0.5) + 2 * comm(8 * 12 * 4, 0.5)
    assert close(r["d"]["time_fwd_ms"], drop) and close(r["d"]["time_bwd_data_ms"], drop)
    # the inner product X[8, 12] W[12, 10] Y[8, 10], and its two gradients, the same products
    ip = comp(2 * 8 * 12 * 10, 0.5) + comm(8 * 12 * 4, 0.5) + comm(12 * 10 * 4, 0.5) + comm(8 * 10 * 4, 0.5)
    for k in ("time_fwd_ms", "time_bwd_data_ms", "time_bwd_filter_ms"):
        assert close(r["ip"][k], ip), k
    for k in ("time_fwd_ms", "time_bwd_data_ms", "time_bwd_filter_ms"):
        assert r["prob"][k] == 0.0 and r["data"][k] == 0.0


def test_costmodel_pieces_by_hand():
    from netc.costmodel import (LayerCost, Network, allreduce_ms, fetch_ms, get_device, tower_bounds,
                                weight_update_ms)
    dev = get_device("titanx")
    # all-reduce of 1e9 bytes over 20 Gbit/s: a link takes 400 ms at ppp 1, 800 at 0.5
    net = Network("ethernet20", 20)
    assert close(allreduce_ms("ButterflyMixing", 8, 1e9, net), 400.0)
    assert close(allreduce_ms("ButterflyAllReduce", 8, 1e9, net), 3 * 400.0)
    assert close(allreduce_ms("TreeAllReduce", 5, 1e9, net, 0.5), 2 * 3 * 800.0)
    assert close(allreduce_ms("OneToAll", 4, 1e9, net), 2 * 3 * 400.0)
    assert allreduce_ms("TreeAllReduce", 1, 1e9, net) == 0.0
    assert close(weight_update_ms(dev, 1000, 4000), max(CLOCK_MS, 2000 / PEAK * 1e3) + 3 * comm(4000))
    # fetch: one parent on another device; several, the bandwidth halving per one in another group of four
    one = LayerCost("b@1", [("a@0", 1000)], {})
    assert close(fetch_ms(dev, one, 0.5), comm(4000, 0.5))
    assert fetch_ms(dev, LayerCost("b@1", [("a@1", 1000)], {})) == 0.0
    many = LayerCost("c@0", [("a@1", 1000), ("a@5", 2000), ("a@6", 3000), ("a@0", 7)], {})
    want = comm(4000) + comm(8000, bw=BW / 2) + comm(12000, bw=BW / 4)
    assert close(fetch_ms(dev, many), want)
    # towers: a -> (b, c | d) -> e
    lo, up = tower_bounds(["a", (["b", "c"], ["d"]), "e"], {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5})
    assert (lo, up) == (1 + 5 + 5, 1 + 9 + 5)


@needs_corpus
def test_scaling_table_vgg16_done_when(tmp_path, capsys):
    """The issue's check: VGG-16, batch 32, ethernet20, ppp_comp 0.49, ppp_comm 0.72, weak scaling,
    1 to 128 workers, four schemes; the figures from the per-layer times and Paleo's formulas."""
    args = [PALEO / "vgg16.json", "--device", "titanx", "--batch", "32", "--network", "ethernet20", "--ppp-comp",
            "0.49", "--ppp-comm", "0.72", "--workers", "1,2,4,8,16,32,64,128", "--scaling", "weak"]
    doc = explain(*args)
    sim, t = doc["simulation"], doc["totals"]
    assert doc["layers"][0]["shape"][0] == 32
    assert [r["workers"] for r in sim["scaling"]["rows"]] == [1, 2, 4, 8, 16, 32, 64, 128]
    P = t["param_bytes"]
    for r in sim["scaling"]["rows"]:
        n = r["workers"]
        assert r["batch"] == 32 * n and r["batch_per_worker"] == 32
        assert close(r["fwd_ms"], t["time_fwd_ms"]) and close(r["bwd_ms"], t["time_bwd_ms"])
        assert close(r["apply_ms"], t["time_update_ms"])
        link = P / (20 / 8 * 1e9) * 1e3 / 0.72
        h = math.ceil(math.log(n) / math.log(2))
        want = {"OneToAll": 2 * link * (n - 1), "TreeAllReduce": 2 * h * link, "ButterflyAllReduce": h * link,
                "ButterflyMixing": link}
        for k, v in want.items():
            assert close(r["allreduce_ms"][k], v) if v else r["allreduce_ms"][k] == 0.0
    capsys.readouterr()
    assert main(["explain", *map(str, args), "--brief", "--plot", str(tmp_path / "s.png")]) == 0
    out = capsys.readouterr().out
    assert "data-parallel weak scaling of vgg16 (batch 32 per worker)" in out and "ButterflyMixing" in out
    assert (tmp_path / "s.png").read_bytes().startswith(b"\x89PNG")


@needs_corpus
def test_strong_scaling_re_infers_the_batch():
    doc = explain(PALEO / "alex_v2.json", "--device", "titanx", "--workers", "1,3", "--scaling", "strong")
    rows = doc["simulation"]["scaling"]["rows"]
    assert [(r["batch"], r["batch_per_worker"]) for r in rows] == [(128, 128), (128, 43)]
    at43 = explain(PALEO / "alex_v2.json", "--device", "titanx", "--batch", "43")["totals"]
    assert close(rows[1]["fwd_ms"], at43["time_fwd_ms"]) and close(rows[1]["bwd_ms"], at43["time_bwd_ms"])


@needs_corpus
def test_model_parallel_fetch_towers_and_hybrid():
    doc = explain(PALEO / "alex_v2_2gpu.json", "--device", "titanx", "--hybrid", "4", "--network", "ethernet20")
    r = rows_by_name(doc)
    # concat6@0 reads dropout6@0 (same device) and dropout6@1 (device 1, same group of four)
    assert close(r["parallel_fc67/concat6@0"]["time_fetch_ms"], comm(128 * 2048 * 4))
    assert r["parallel_fc67/fc6@0"]["time_fetch_ms"] == 0.0 and close(r["parallel_fc67/fc6@1"]["time_fetch_ms"],
                                                                      comm(128 * 5 * 5 * 256 * 4))
    towers = doc["totals"]["parallel_towers"]
    assert towers["fwd_lower_ms"] < towers["fwd_upper_ms"]
    serial = sum(x["time_fwd_ms"] + x["time_fetch_ms"] for x in doc["layers"])
    assert close(towers["fwd_upper_ms"], serial)
    dp, mp = doc["simulation"]["hybrid"]
    assert dp["layers"] + mp["layers"] == len(doc["layers"]) and mp["layers"] == 10 and dp["batch"] == 512
    # the data-parallel layers sync their parameters with a tree all-reduce over 4 workers
    p_dp = sum(x["params"] * 4 for x in doc["layers"] if "@" not in x["name"])
    assert close(dp["sync_ms"], 2 * 2 * p_dp / (20 / 8 * 1e9) * 1e3)
    # the pipelined fetch: pool5's output, counted in elements as Paleo does, by K - 1 workers
    assert close(mp["fetch_ms"], 128 * 5 * 5 * 256 / (20 / 8 * 2 ** 30) * 1e3 * 3)


@pytest.mark.parametrize("flags,msg", [
    (["--workers", "2"], "--workers needs --device"),
    (["--device", "titanx", "--workers", "2,x"], "--workers takes positive worker counts"),
    (["--device", "titanx", "--workers", "0"], "--workers takes positive worker counts"),
    (["--device", "titanx", "--ppp-comp", "-1"], "--ppp-comp must be a positive number"),
    (["--device", "titanx", "--ppp-comm", "inf"], "--ppp-comm must be a positive number"),
    (["--device", "titanx", "--hybrid", "0"], "--hybrid takes the number of workers"),
    (["--device", "titanx", "--workers", "2", "--network", "carrier-pigeon"], "unknown network 'carrier-pigeon'"),
    (["--device", "titanx", "--workers", "2", "--plot", "x.gif"], "--plot writes PNG, SVG or PDF"),
])
def test_bad_flags(flags, msg, capsys, tmp_path):
    src = tmp_path / "small.nd"
    src.write_text(SMALL)
    assert main(["explain", str(src), "--brief", *flags]) == 1
    err = capsys.readouterr().err
    assert msg in err and "Traceback" not in err
