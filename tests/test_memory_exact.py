"""The exact offset assignment (netc/memory/exact.py) and its place in the planner: never worse than
the heuristics, never overlapping, optimal where it says so (checked against exhaustive search on
tiny cases), at the bound on a small Inception-style block, and reported in the plan's JSON."""
from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netc.cli import main
from netc.memory import BATCH, plan_memory, verify_plan
from netc.memory.exact import components, exact_offsets, peak
from netc.memory.offsets import STRATEGIES, assign_offsets
from netc.memory.report import plan_json
from test_memory import build, cnn_dags, mlp_dags, plan, simulate

A = 256


def overlapping(bufs, offs) -> list:
    """Pairs of buffers live at one step whose bytes intersect (must be none)."""
    bad = []
    for i, (_, si, ai, ei) in enumerate(bufs):
        for j, (_, sj, aj, ej) in enumerate(bufs[:i]):
            if si and sj and ai <= ej and aj <= ei and offs[i] < offs[j] + sj and offs[j] < offs[i] + si:
                bad.append((j, i))
    return bad


def heuristic_best(bufs, base=0):
    best = None
    for s in STRATEGIES:
        offs = assign_offsets(bufs, s, base)
        size = max([base] + [o + b[1] for o, b in zip(offs, bufs)])
        if best is None or size < best[0]:
            best = (size, offs)
    return best


def brute_force(bufs, unit) -> int:
    """The smallest arena over every placement at multiples of `unit` (exhaustive, tiny cases only)."""
    n = len(bufs)
    size = [b[1] // unit for b in bufs]
    best = [sum(size)]
    offs = [0] * n

    def rec(i, top):
        if top >= best[0]:
            return
        if i == n:
            best[0] = top
            return
        for o in range(0, best[0] - size[i] + 1):
            if all(not (size[j] and size[i] and bufs[j][2] <= bufs[i][3] and bufs[i][2] <= bufs[j][3]
                        and o < offs[j] + size[j] and offs[j] < o + size[i]) for j in range(i)):
                offs[i] = o
                rec(i + 1, max(top, o + size[i]))
    rec(0, 0)
    return best[0] * unit


@st.composite
def intervals(draw, max_buffers=6, max_units=4, horizon=8):
    n = draw(st.integers(1, max_buffers))
    bufs = []
    for k in range(n):
        a = draw(st.integers(0, horizon))
        bufs.append((k, A * draw(st.integers(0 if max_buffers > 6 else 1, max_units)), a,
                     a + draw(st.integers(0, horizon // 2))))
    return bufs


# ---------------------------------------------------------------------------------------------
# the solver on its own


@settings(max_examples=150, deadline=None)
@given(intervals())
def test_proven_optimum_agrees_with_exhaustive_search(bufs):
    ub, seed = heuristic_best(bufs)
    r = exact_offsets(bufs, 0, ub, seed)
    assert overlapping(bufs, r.offsets) == []
    assert r.size == max(o + b[1] for o, b in zip(r.offsets, bufs)) <= ub
    assert all(o % A == 0 for o in r.offsets)
    assert r.lower_bound == peak(bufs) <= r.size
    assert r.proven          # six buffers: the search always completes
    assert r.size == brute_force(bufs, A)


@settings(max_examples=60, deadline=None)
@given(intervals(max_buffers=40, max_units=9, horizon=24), st.sampled_from([0, 512, 4096]))
def test_never_worse_than_the_heuristics_and_never_overlapping(bufs, base):
    ub, seed = heuristic_best(bufs, base)
    r = exact_offsets(bufs, base, ub, seed)
    assert overlapping(bufs, r.offsets) == []
    assert all(o >= base and o % A == 0 for o in r.offsets)
    assert r.lower_bound <= r.size == max([base] + [o + b[1] for o, b in zip(r.offsets, bufs)]) <= ub
    assert r.improved == (r.size < ub)
    if not r.improved:
        assert r.offsets == seed
    if r.size == r.lower_bound:
        assert r.proven


def test_limits_stop_the_search_without_a_proof():
    # many overlapping buffers of awkward sizes: no quick proof
    bufs = [(k, A * (1 + (k * 7) % 9), k % 13, k % 13 + 6 + k % 5) for k in range(48)]
    ub, seed = heuristic_best(bufs)
    full = exact_offsets(bufs, 0, ub, seed)
    r = exact_offsets(bufs, 0, ub, seed, node_limit=20)
    assert not r.complete and r.nodes <= 21 and r.size <= ub
    assert overlapping(bufs, r.offsets) == []
    if not full.proven:
        assert not r.proven
    assert exact_offsets(bufs, 0, ub, seed, budget=0.0).size <= ub


def test_independent_components_are_solved_apart():
    # two groups of buffers that never live at the same step
    left = [(0, 3 * A, 0, 2), (1, 2 * A, 1, 3), (2, 2 * A, 3, 4), (3, A, 0, 4)]
    right = [(4, 4 * A, 10, 12), (5, A, 11, 14), (6, 2 * A, 12, 13)]
    bufs = left + right
    assert [sorted(c) for c in components(bufs)] == [[0, 1, 2, 3], [4, 5, 6]]
    r = exact_offsets(bufs, 0)
    assert overlapping(bufs, r.offsets) == [] and r.proven and r.size == brute_force(bufs, A)


# ---------------------------------------------------------------------------------------------
# in the planner

# A 7-layer Inception-style block at batch 2: the heuristics plan 7,680 bytes per sample against a
# bound of 7,168 (256-byte alignment dominates at these sizes); an aligned placement at the bound exists.
BLOCK = """
network incep7 {
  input data: f32[2, 4, 4, 32]
  b0 = Convolution(data) {filter: [1, 1, 32, 24], padding: SAME}
  b1a = Convolution(data) {filter: [1, 1, 32, 16], padding: SAME}
  b1p = Pooling(b1a) {ksize: [1, 3, 3, 1], padding: SAME}
  b1b = Convolution(b1p) {filter: [1, 1, 16, 24], padding: SAME}
  b2 = Pooling(b1p) {ksize: [1, 3, 3, 1], padding: SAME}
  b1 = Pooling(b1b) {ksize: [1, 3, 3, 1], padding: SAME}
  cat = Concatenate(b0, b2, b1) {dim: 3}
}
"""


def test_inception_style_block_reaches_the_bound():
    m = build(BLOCK)
    heur = plan(m, exact=False)
    h = heur.arenas[BATCH]
    assert (h.size, h.lower_bound) == (7680, 7168) and not h.proven_optimal
    assert h.strategy in STRATEGIES and "exact" not in h.candidates
    p = plan(m)                 # verified, and simulated at batches 1 and 2
    a = p.arenas[BATCH]
    assert a.size == a.lower_bound == 7168
    assert a.proven_optimal and a.strategy == "exact" and a.candidates["exact"] == 7168
    assert a.candidates["exact"] < min(a.candidates[s] for s in STRATEGIES)
    assert all(b.offset % 256 == 0 for b in p.buffers)
    assert "strategy exact, proven optimal" in p.table()
    assert p.summary()["arenas"]["batch"]["proven_optimal"] is True


def test_json_reports_proven_optimal(tmp_path, capsys):
    src = tmp_path / "block.nd"
    src.write_text(BLOCK)
    assert main(["explain", str(src), "--format", "json", "--memory"]) == 0
    mem = json.loads(capsys.readouterr().out)["memory"]
    assert mem["proven_optimal"] is True and mem["ratio"] == 1.0 and mem["plan_seconds"] >= 0
    assert mem["arenas"]["batch"]["proven_optimal"] is True
    assert mem["arenas"]["batch"]["strategy"] == "exact"
    assert mem["arenas"]["batch"]["bytes"] == mem["arenas"]["batch"]["lower_bound"] == 7168
    # without the search: above the bound, nothing proven
    doc = plan_json(plan_memory(build(BLOCK), exact=False))
    assert doc["proven_optimal"] is False and doc["arenas"]["batch"]["proven_optimal"] is False
    assert doc["ratio"] > 1.0


@st.composite
def inception_blocks(draw, layers=7):
    """Random Inception-style blocks: 1x1 and 3x3 convolutions, poolings and ReLUs branching from
    the input and from each other, the loose ends concatenated on channels; batch 2, tiny maps,
    so buffers are a few 256-byte units each and alignment shapes the packing."""
    h = draw(st.sampled_from([2, 3, 4]))
    c0 = draw(st.sampled_from([8, 16, 32, 48]))
    lines, ch = [f"input data: f32[2, {h}, {h}, {c0}]"], {"data": c0}
    used = set()
    for i in range(layers - 1):
        p = draw(st.sampled_from(list(ch)[-3:]))
        used.add(p)
        kind = draw(st.sampled_from(["conv1", "conv1", "conv3", "pool", "relu"]))
        if kind == "pool":
            lines.append(f"l{i} = Pooling({p}) {{ksize: [1, 3, 3, 1], padding: SAME}}")
            ch[f"l{i}"] = ch[p]
        elif kind == "relu":
            lines.append(f"l{i} = ReLU({p})")
            ch[f"l{i}"] = ch[p]
        else:
            k, co = (1 if kind == "conv1" else 3), draw(st.sampled_from([8, 12, 16, 24, 32, 48, 64]))
            lines.append(f"l{i} = Convolution({p}) {{filter: [{k}, {k}, {ch[p]}, {co}], padding: SAME}}")
            ch[f"l{i}"] = co
    ends = [x for x in ch if x not in used and x != "data"]
    if len(ends) > 1:
        lines.append(f"cat = Concatenate({', '.join(ends)}) {{dim: 3}}")
    return "network r {\n  " + "\n  ".join(lines) + "\n}\n"


def _check_exact_in_plan(src, data, fuse=False):
    m = build(src, fuse=fuse)
    opts = dict(alignment=data.draw(st.sampled_from([1, 4, 64, 256])),
                mode=data.draw(st.sampled_from(["inference", "training"])),
                concat=data.draw(st.sampled_from(["all", "none"])),
                # one heuristic alone leaves more to the search than the best of three
                strategies=data.draw(st.sampled_from([STRATEGIES, ("longest-lifetime-first",),
                                                      ("greedy-by-breadth",)])))
    heur = plan_memory(m, exact=False, **opts)
    p = plan_memory(m, schedule=heur.order, **opts)   # the same schedule, with the search
    assert verify_plan(p, m, batches=range(1, p.batch + 1)) == []
    simulate(p, m, data.draw(st.integers(1, p.batch)))
    for a, h in zip(p.arenas, heur.arenas):
        assert a.lower_bound == h.lower_bound <= a.size <= h.size
        assert a.strategy == "exact" if a.size < h.size else a.strategy == h.strategy
        if a.size == a.lower_bound:
            assert a.proven_optimal
        items = [(b.id, -(-b.size // opts["alignment"]) * opts["alignment"], b.start, b.end)
                 for b in p.buffers if b.cls == a.cls and b.reusable]
        if a.proven_optimal and opts["alignment"] == A and len(items) <= 6 and sum(x[1] for x in items) <= 24 * A:
            assert a.size == a.fixed + brute_force(items, A)     # tiny: check the proof exhaustively
        if a.size % max(opts["alignment"], 1):
            raise AssertionError(f"arena {a.size} not aligned to {opts['alignment']}")
    # choosing among schedules with the search on is never worse than without
    best = plan_memory(m, **opts)
    assert sum(a.size * (best.batch if a.cls else 1) for a in best.arenas) <= \
        sum(a.size * (heur.batch if a.cls else 1) for a in heur.arenas)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cnn_dags(), st.data())
def test_random_cnn_dags_exact_never_worse(src, data):
    _check_exact_in_plan(src, data)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mlp_dags(chains=True), st.data())
def test_random_fused_mlp_dags_exact_never_worse(src, data):
    _check_exact_in_plan(src, data, fuse=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inception_blocks(), st.data())
def test_random_inception_blocks_exact_never_worse(src, data):
    _check_exact_in_plan(src, data, fuse=data.draw(st.booleans()))
