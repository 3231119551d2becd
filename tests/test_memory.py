"""The static memory planner (netc/memory): schedules, lifetimes, classes, offsets, aliasing, the
verifier, and Brainstorm's March-2015 layout format. Every plan made here is verified."""
from __future__ import annotations

import copy
import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netc.frontend import load_text
from netc.export.layout import write_layout
from netc.frontend.layout import LayoutError, check_layout_mode, read_layout
from netc.memory import BATCH, CONSTANT, plan_memory, verify_plan
from netc.memory.model import PlanError, row_major
from netc import pipelines
from netc.pipelines import Plan


def build(src: str, fuse: bool = False):
    m = load_text(src, "test.nd")
    (pipelines.compile if fuse else pipelines.inference)(m)
    return m


def plan(src_or_module, sim=True, **kw):
    m = build(src_or_module) if isinstance(src_or_module, str) else src_or_module
    p = plan_memory(m, **kw)
    problems = verify_plan(p, m)
    assert problems == [], problems
    if sim:
        for B in sorted({1, min(2, p.batch)}):
            simulate(p, m, B)
    return p


def simulate(p, m, B):
    """Run the plan on an arena at batch B, independently of the verifier.

    Every kernel writes fresh tokens into every byte of its output; views, identities and
    concatenations derive their values from their inputs (written by nobody when zero-copy). Every
    read checks that the bytes of the tensor hold exactly the values it should: a clobbered, an
    unwritten or a misplaced byte fails; so does a kernel writing over its own operands (unless
    in place, element for element). Memory cells are elements when every size and offset allows,
    bytes otherwise.
    """
    net = m.network(p.network)
    ops = {op.attrs.get("name"): op for op in net.regions[0].ops}
    T = p.tensors
    sizes = {t.itemsize for t in T}
    unit = sizes.pop() if len(sizes) == 1 else 1
    if any(x % unit for b in p.buffers for x in (b.offset, b.size)) or any(t.offset % unit for t in T) \
            or any(n % unit for n in p.arena_bytes(B)):
        unit = 1
    mem = [np.full(max(n // unit, 1), -1, np.int64) for n in p.arena_bytes(B)]
    val: dict[int, np.ndarray] = {}
    fresh_at = [0]

    def lead(t):
        return (B,) if t.cls == BATCH else ()

    def fresh(t):
        shape = lead(t) + t.feature_shape
        n = int(np.prod(shape, dtype=np.int64))
        v = np.arange(fresh_at[0], fresh_at[0] + n, dtype=np.int64).reshape(shape)
        fresh_at[0] += n
        return v

    def addr(t):
        """Cell index of the first cell of every element, shaped like the tensor's values."""
        assert not t.fused, f"'{t.name}' is fused (never in memory) but something reads or writes it there"
        buf = p.buffers[t.buffer]
        fs = t.feature_shape
        st_ = t.strides if t.strides is not None else row_major(fs)
        a = np.full(fs, t.offset, np.int64)
        for k, (d, s) in enumerate(zip(fs, st_)):
            shp = [1] * len(fs)
            shp[k] = d
            a = a + (np.arange(d, dtype=np.int64) * s * t.itemsize).reshape(shp)
        if t.cls == BATCH:
            a = buf.offset * B + np.arange(B, dtype=np.int64).reshape((B,) + (1,) * len(fs)) * buf.size + a
        else:
            a = buf.offset + a
        return a // unit

    def cells(t, a):
        return (a[..., None] + np.arange(t.itemsize // unit)).reshape(-1)

    def write(t, v, where=None):
        a = addr(t) if where is None else where
        assert a.size == 0 or 0 <= a.min() and a.max() + t.itemsize // unit <= len(mem[t.cls]), \
            f"'{t.name}' outside its arena"
        for j in range(t.itemsize // unit):
            mem[t.cls][a + j] = v

    def check(t, when):
        a = addr(t)
        for j in range(t.itemsize // unit):
            assert np.array_equal(mem[t.cls][a + j], val[t.id]), f"{when}: '{t.name}' does not hold its values"

    for t in T:                                     # step 0: inputs and parameters
        if t.kind in ("input", "param") and t.alias is None:
            val[t.id] = fresh(t)
            write(t, val[t.id])
    for t in T:
        if t.kind == "param" and t.alias:
            val[t.id] = val[t.alias_of].reshape(t.feature_shape)
    for s in p.steps:
        for i in s.reads:
            check(T[i], f"step {s.index} ({s.layer})")
        # the step's ops (a fused group's members): fused results pass from member to member in
        # registers, never through memory
        mbs = s.members
        assert [mb.layer for mb in mbs] == s.layers and mbs, s
        for mb in mbs:
            op = ops[mb.layer]
            out = T[mb.writes[0]]
            ins = [val[i] for i in mb.reads[:len(op.operands)]]
            kind = op.name.split(".")[1]
            if len(mbs) == 1 and (kind == "reshape" or kind == "dropout" and p.mode == "inference"):
                val[out.id] = ins[0].reshape(lead(out) + out.feature_shape)
            elif len(mbs) == 1 and kind == "concat":
                d = op.attrs.get("dim", -1)
                d = d + len(out.shape) if d < 0 else d
                val[out.id] = np.concatenate(ins, axis=d - (1 if out.cls != BATCH else 0))
            else:
                val[out.id] = fresh(out)
        out = T[s.writes[0]]
        if s.action in ("kernel", "inplace"):
            # a kernel must not write over what it reads, except in place, element for element:
            # the operand at the output's own cells, read only by members that read each element
            # at the index they (and every member after them) write
            aligned = _reads_at_output_index(mbs, ops)
            oa = addr(out)
            mark = np.zeros(len(mem[out.cls]), bool)
            mark[cells(out, oa)] = True
            for i in s.reads:
                x = T[i]
                if x.cls == out.cls and mark[cells(x, addr(x))].any():
                    assert s.action == "inplace" and np.array_equal(addr(x), oa), \
                        f"step {s.index} ({s.layer}) writes '{out.name}' over its operand '{x.name}'"
                    assert all(a for mb, a in zip(mbs, aligned) if i in mb.reads), \
                        f"step {s.index} ({s.layer}) writes '{out.name}' over '{x.name}', which it reads elsewhere"
            write(out, val[out.id])
        elif s.action == "concat-copy":
            a = addr(out)
            ax = d - (1 if out.cls != BATCH else 0)
            start = 0
            for k, i in enumerate(s.reads[:len(op.operands)]):
                ext = T[i].shape[d]
                if i in s.copies and (T[i].alias != "concat" or T[i].alias_of != out.id or i in s.reads[:k]):
                    sl = [slice(None)] * a.ndim
                    sl[ax] = slice(start, start + ext)
                    write(T[i], ins[k], a[tuple(sl)])
                start += ext
    for t in T:
        if t.output:
            check(t, "end")


def _reads_at_output_index(mbs, ops):
    """Per member of a step: does it read its operands element for element at the index the
    step's kernel writes? Only an elementwise op (registry) whose result feeds such members."""
    from netc.ops import lookup
    res = [False] * len(mbs)
    for k in reversed(range(len(mbs))):
        d = lookup(ops[mbs[k].layer].name)
        feeds = [j for j in range(k + 1, len(mbs)) if set(mbs[k].writes) & set(mbs[j].reads)]
        res[k] = bool(d is not None and d.elementwise) and all(res[j] for j in feeds)
    return res


def step(p, layer):
    return next(s for s in p.steps if layer in s.layers)


def overlapping_buffers_at(p, batch):
    """Pairs of buffers live together whose scaled byte ranges intersect (must be none)."""
    bad = []
    for a in p.buffers:
        for b in p.buffers:
            if a.id < b.id and a.cls == b.cls and a.start <= b.end and b.start <= a.end:
                scale = batch if a.cls == BATCH else 1
                lo_a, hi_a = a.offset * scale, (a.offset + a.size) * scale
                lo_b, hi_b = b.offset * scale, (b.offset + b.size) * scale
                if a.size and b.size and lo_a < hi_b and lo_b < hi_a:
                    bad.append((a.id, b.id))
    return bad


CHAIN = """
network chain {
  input data: f32[8, 32, 32, 3]
  c1 = Convolution(data) {filter: [3, 3, 3, 16]}
  r1 = ReLU(c1)
  p1 = Pooling(r1) {ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1]}
  c2 = Convolution(p1) {filter: [3, 3, 16, 32]}
  r2 = ReLU(c2)
  p2 = Pooling(r2) {ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1]}
  c3 = Convolution(p2) {filter: [3, 3, 32, 64]}
  r3 = ReLU(c3)
  p3 = Pooling(r3) {ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1]}
  fc = InnerProduct(p3) {num_outputs: 10}
}
"""

INCEPTION = """
network incep {
  input data: f32[8, 14, 14, 32]
  stem = Convolution(data) {filter: [3, 3, 32, 64]}
  block M1(stem) -> cat {
    b0 = Convolution() {filter: [1, 1, 64, 16]}
    b1a = Convolution() {filter: [1, 1, 64, 24]}
    b1 = Convolution(b1a) {filter: [3, 3, 24, 32]}
    b2a = Convolution() {filter: [1, 1, 64, 8]}
    b2b = Convolution(b2a) {filter: [3, 3, 8, 16]}
    b2 = Convolution(b2b) {filter: [3, 3, 16, 16]}
    b3a = Pooling() {ksize: [1, 3, 3, 1], padding: SAME}
    b3 = Convolution(b3a) {filter: [1, 1, 64, 16]}
    cat = Concatenate(b0, b1, b2, b3) {dim: 3}
  }
  block M2(M1) -> cat {
    b0 = Convolution() {filter: [1, 1, 80, 32]}
    b1a = Convolution() {filter: [1, 1, 80, 16]}
    b1r = ReLU(b1a)
    b1 = Convolution(b1r) {filter: [3, 3, 16, 32]}
    b3a = Pooling() {ksize: [1, 3, 3, 1], padding: SAME}
    b3 = Convolution(b3a) {filter: [1, 1, 80, 16]}
    b3r = ReLU(b3)
    cat = Concatenate(b0, b1, b3r) {dim: 3}
  }
  pool = Pooling(M2) {ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1]}
  flat = Reshape(pool)
  drop = Dropout(flat)
  fc = InnerProduct(drop) {num_outputs: 10}
}
"""


# ---------------------------------------------------------------------------------------------
# hand-made nets


def test_chain_lifetimes_classes_and_inplace():
    p = plan(CHAIN)
    t = {x.name: x for x in p.tensors}
    assert p.batch == 8 and p.end == len(p.steps) + 1 == 11
    assert t["data"].producer == 0 and t["data"].cls == BATCH and t["data"].size == 32 * 32 * 3 * 4
    assert t["fc"].output and t["fc"].last_use == p.end
    assert t["@c1.weight"].cls == CONSTANT and t["@c1.weight"].last_use == p.end
    assert t["c2"].producer == step(p, "c2").index and t["c2"].last_use == step(p, "r2").index
    # ReLU overwrites the convolution output that dies there
    assert step(p, "r1").action == "inplace" and t["c1"].buffer == t["r1"].buffer
    assert all(b.offset % 256 == 0 for b in p.buffers)
    a = p.arenas[BATCH]
    assert a.size <= 1.05 * a.lower_bound
    assert p.arenas[CONSTANT].size == p.arenas[CONSTANT].lower_bound  # parameters are packed, never shared
    assert p.schedule == "original"   # a chain leaves no choice; the original order is kept


def test_branches_and_residual_add():
    p = plan("""
    network res {
      input data: f32[4, 16, 16, 8]
      c0 = Convolution(data) {filter: [3, 3, 8, 8]}
      r0 = ReLU(c0)
      c1 = Convolution(r0) {filter: [3, 3, 8, 8]}
      r1 = ReLU(c1)
      c2 = Convolution(r1) {filter: [3, 3, 8, 8]}
      sum = Add(c2, r0)
      out = ReLU(sum)
      left = Convolution(out) {filter: [1, 1, 8, 4]}
      right = Convolution(out) {filter: [1, 1, 8, 4]}
      both = Add(left, right)
    }""")
    t = {x.name: x for x in p.tensors}
    # r0 is read by c1 and by the residual add: it lives until the add
    assert t["r0"].last_use == step(p, "sum").index
    assert step(p, "sum").action == "inplace"
    assert step(p, "out").action == "inplace"
    assert t["out"].last_use == max(step(p, "left").index, step(p, "right").index)
    assert p.arenas[BATCH].size == p.arenas[BATCH].lower_bound


def test_inception_block_concat_is_zero_copy_and_strided():
    p = plan(INCEPTION)
    t = {x.name: x for x in p.tensors}
    cat = step(p, "M1/cat")
    assert cat.action == "alias" and cat.copies == []
    # each branch writes its channel slice of the concatenation: (offset in the buffer, channels)
    c = t["M1/cat"]
    assert c.shape == (8, 14, 14, 80)
    for name, ch in [("M1/b0", 0), ("M1/b1", 16), ("M1/b2", 48), ("M1/b3", 64)]:
        x = t[name]
        assert x.buffer == c.buffer and x.alias == "concat" and x.alias_of == c.id
        assert x.slice == (2, ch)
        assert x.offset == c.offset + ch * 4
        assert x.strides == (14 * 80, 80, 1)
        assert p.batch_stride(x) == p.buffers[c.buffer].size == 14 * 14 * 80 * 4
    # a ReLU feeding the concat runs in place inside the slice: the conv writes there directly
    assert step(p, "M2/b3r").action == "inplace"
    assert t["M2/b3"].buffer == t["M2/cat"].buffer and t["M2/b3"].offset == t["M2/b3r"].offset
    # the flatten is a view of the pooling output, the dropout an identity
    assert step(p, "flat").action == "alias" and step(p, "drop").action == "alias"
    assert t["flat"].buffer == t["pool"].buffer == t["drop"].buffer
    a = p.arenas[BATCH]
    assert a.lower_bound <= a.size <= 1.05 * a.lower_bound


def test_concat_on_the_outermost_feature_axis_is_dense():
    p = plan("""
    network m {
      input x: f32[32, 100]
      a = InnerProduct(x) {num_outputs: 30}
      b = InnerProduct(x) {num_outputs: 50}
      c = Concatenate(a, b) {dim: 1}
      y = InnerProduct(c) {num_outputs: 10}
    }""")
    t = {x.name: x for x in p.tensors}
    assert t["a"].strides is None and t["b"].strides is None
    assert t["a"].offset == t["c"].offset and t["b"].offset == t["c"].offset + 30 * 4
    assert step(p, "c").action == "alias"
    # per-sample addresses: sample s of b is at buffer*B + s*(c's per-sample size) + 120
    buf = p.buffers[t["c"].buffer]
    for B in (1, 7, 32):
        assert p.address("b", B, sample=3) == buf.offset * B + 3 * 80 * 4 + 120


def test_concat_policies_and_partial_copies():
    src = """
    network m {
      input x: f32[8, 6, 6, 4]
      a = Convolution(x) {filter: [1, 1, 4, 4]}
      b = Convolution(x) {filter: [1, 1, 4, 4]}
      c1 = Concatenate(a, b, a) {dim: 3}
      c2 = Concatenate(b, x, b) {dim: 3}
      s = Concatenate(c1, c2) {dim: 1}
    }"""
    p = plan(src)
    # s concatenates along H: a slice of it is no channel slice of a contiguous buffer (its samples
    # are not evenly spaced), which no kernel writes, so c1 and c2 are copied into it (a zero-copy
    # slice there failed to lower: "out must have evenly spaced pixels")
    assert step(p, "s").action == "concat-copy"
    assert [p.tensors[i].name for i in step(p, "s").copies] == ["c1", "c2"]
    assert p.tensor("c1").alias is None and p.tensor("c2").alias is None
    # x is a network input (never a slice); a sits in one slice only; b is read by two
    # concatenations, so a strided slice of either would be read by a kernel (the other's copy)
    st1, st2 = step(p, "c1"), step(p, "c2")
    assert st1.action == st2.action == "concat-copy"
    assert [p.tensors[i].name for i in st2.copies] == ["b", "x", "b"]
    assert [p.tensors[i].name for i in st1.copies] == ["b", "a"]
    assert p.tensor("a").alias_of == p.tensor("c1").id and p.tensor("a").slice == (2, 0)
    assert p.tensor("b").alias is None
    # along the channels, slices nest: c1 and c2 sit in s, a in c1's slice of s
    pc = plan(src.replace("s = Concatenate(c1, c2) {dim: 1}", "s = Concatenate(c1, c2) {dim: 3}"))
    assert step(pc, "s").action == "alias"
    assert pc.tensor("c2").alias_of == pc.tensor("s").id and pc.tensor("c2").slice == (2, 12)
    assert pc.tensor("a").alias_of == pc.tensor("c1").id and pc.tensor("a").strides == (144, 24, 1)
    p2 = plan(src, concat="contiguous")
    assert all(t.strides is None for t in p2.tensors)
    p3 = plan(src, concat="none")
    assert all(t.alias != "concat" for t in p3.tensors)


def test_reshape_is_a_view_and_dropout_an_identity():
    p = plan("""
    network v {
      input data: f32[4, 8, 8, 2]
      flat = Reshape(data)
      d = Dropout(flat)
      fc = InnerProduct(d) {num_outputs: 5}
      r = Reshape(fc) {output_shape: [4, 5, 1]}
    }""")
    t = {x.name: x for x in p.tensors}
    assert step(p, "flat").action == "alias" and t["flat"].buffer == t["data"].buffer
    assert t["data"].alias is None and p.buffers[t["data"].buffer].root == t["data"].id  # inputs own theirs
    assert t["flat"].offset == t["d"].offset == 0 and t["d"].alias == "view" and t["d"].alias_of == t["data"].id
    assert step(p, "d").action == "alias" and t["d"].buffer == t["data"].buffer
    assert t["r"].buffer == t["fc"].buffer and t["r"].output
    pt = plan(build("""
    network v {
      input data: f32[4, 10]
      d = Dropout(data)
      fc = InnerProduct(d) {num_outputs: 5}
    }"""), mode="training")
    assert step(pt, "d").action != "alias"      # dropout is a kernel when training (here in place)


def test_greedy_schedule_beats_a_breadth_first_order():
    # written breadth-first: every wide layer before any narrow one; the greedy finishes a branch
    src = "network w {\n  input data: f32[8, 16, 16, 4]\n"
    for i in range(4):
        src += f"  wide{i} = Convolution(data) {{filter: [1, 1, 4, 64]}}\n"
    for i in range(4):
        src += f"  narrow{i} = Convolution(wide{i}) {{filter: [1, 1, 64, 2]}}\n"
    src += "  cat = Concatenate(narrow0, narrow1, narrow2, narrow3) {dim: 3}\n}\n"
    m = build(src)
    orig = plan(m, schedule="original")
    auto = plan(m)
    assert auto.schedule.startswith("greedy")
    assert auto.arenas[BATCH].size < orig.arenas[BATCH].size
    order = auto.order
    assert order.index("narrow0") < order.index("wide1")
    assert auto.arenas[BATCH].size <= 1.05 * auto.arenas[BATCH].lower_bound
    mine = [n for i in (3, 2, 1, 0) for n in (f"wide{i}", f"narrow{i}")] + ["cat"]
    given_order = plan(m, schedule=mine)
    assert given_order.schedule == "given" and given_order.order == mine
    with pytest.raises(PlanError, match="every layer"):
        plan_memory(m, schedule=["cat"])
    with pytest.raises(PlanError, match="before its operand"):
        plan_memory(m, schedule=list(reversed(mine[:-1])) + ["cat"])


def test_per_sample_plan_serves_every_batch_and_stays_aligned():
    # odd per-sample sizes: 10, 3 and 7 floats
    p = plan("""
    network odd {
      input x: f32[5, 10]
      a = InnerProduct(x) {num_outputs: 3}
      b = InnerProduct(x) {num_outputs: 7}
      c = Concatenate(a, b) {dim: 1}
      d = InnerProduct(c) {num_outputs: 10}
      e = ReLU(d)
      f = InnerProduct(e) {num_outputs: 3}
    }""")
    assert p.batch == 5
    for B in range(1, p.batch + 1):
        assert overlapping_buffers_at(p, B) == []
        for b in p.buffers:
            if b.cls == BATCH:
                assert (b.offset * B) % 256 == 0
                assert (b.offset + b.size) * B <= p.arena_bytes(B)[BATCH]
        assert p.arena_bytes(B)[BATCH] == p.arenas[BATCH].size * B
    assert verify_plan(p, batches=range(1, 6)) == []
    for align in (1, 16, 64, 512):
        q = plan_memory(build("network n { input x: f32[3, 10]  a = InnerProduct(x) {num_outputs: 3} }"),
                        alignment=align)
        assert verify_plan(q) == [] and all(b.offset % align == 0 for b in q.buffers)
        assert q.arenas[BATCH].size % align == 0 if align > 1 else True


def test_brainstorm_fixture_mlp_ratio():
    """The §7.5 idea on the §5 fixture written in netc: reuse lowers the activation width."""
    src = """
    network fixture {
      input x: f32[3, 2]
      A = InnerProduct(x) {num_outputs: 3}
      B = InnerProduct(x) {num_outputs: 5}
      Cin = Concatenate(A, B) {dim: 1}
      C = InnerProduct(Cin) {num_outputs: 7}
      Din = Concatenate(B, C) {dim: 1}
      D = InnerProduct(Din) {num_outputs: 11}
    }"""
    m = build(src)
    # alignment 4 = one f32 element, the unit of Brainstorm layouts
    reuse = plan(m, alignment=4)
    flat = plan(m, alignment=4, reuse=False)
    r, f = reuse.arenas[BATCH], flat.arenas[BATCH]
    # elements: x 2 [0-2], {A | B copy} 8 [1-4], {B | C} 12 [2-6], D 11 [6-7]; peak 12 + 11 at D
    assert r.lower_bound == 23 * 4 and r.size == r.lower_bound
    assert f.size == f.naive == (2 + 8 + 12 + 11) * 4
    assert r.size / f.size == pytest.approx(23 / 33)        # Brainstorm's own fixture: 37 / 54
    assert overlapping_buffers_at(flat, 1) == []
    assert not any(s.action == "inplace" for s in flat.steps)
    doc = write_layout(reuse)
    assert doc["sizes"] == [reuse.arenas[CONSTANT].size // 4, 23, 0]
    lay = read_layout(json.loads(json.dumps(doc)))
    din = lay.arrays["Din.inputs.in0"], lay.arrays["Din.inputs.in1"], lay.arrays["Din.outputs.default"]
    assert din[0].stop == din[1].start and (din[2].start, din[2].stop) == (din[0].start, din[1].stop)  # E1


def test_loss_scalar_is_constant_class_and_lives_to_the_end():
    src = """
    network train {
      input x: f32[8, 20]
      input labels: i32[8]
      fc = InnerProduct(x) {num_outputs: 4}
      loss = SoftmaxLoss(fc, labels)
    }"""
    m = build(src)
    p = plan(m)
    t = {x.name: x for x in p.tensors}
    assert t["loss"].cls == CONSTANT and t["loss"].size == 4 and t["loss"].output
    assert t["labels"].cls == BATCH and t["labels"].size == 4
    pt = plan(m, mode="training")
    # constant-class temporaries are planned by lifetime in training too (gradients reuse bytes
    # once their update ran); the loss, a network result, is live until the end
    lb = pt.buffers[pt.tensor("loss").buffer]
    assert lb.reusable and lb.end == pt.end and pt.tensor("loss").cls == CONSTANT
    # in a layout the loss is a type-0 array above the flat parameter vector
    doc = json.loads(json.dumps(write_layout(p)))
    lay = read_layout(doc)
    loss = lay.arrays["loss.outputs.default"]
    assert loss.type == 0 and loss.start >= doc["netc"]["parameter_elements"] and loss.shape == ()
    assert doc["netc"]["tensors"]["labels"]["dtype"] == "i32" and doc["netc"]["dtype"] == "f32"
    with pytest.raises(PlanError):
        plan_memory(m, mode="backward")


def test_shared_parameters_and_share_from():
    p = plan("""
    network s {
      input x: f32[2, 6]
      a = InnerProduct(x) {num_outputs: 6, params: {weight: {name: w}, bias: {name: bias_a}}}
      b = InnerProduct(a) {num_outputs: 6, params: {weight: {name: w}, bias: {name: bias_b, share_from: bias_a}}}
    }""")
    t = {x.name: x for x in p.tensors}
    assert [x.name for x in p.tensors if x.kind == "param"].count("@w") == 1
    assert t["@bias_b"].alias == "share" and t["@bias_b"].buffer == t["@bias_a"].buffer
    assert step(p, "b").roles == ["weight", "bias"]


def test_verifier_catches_broken_plans():
    m = build(CHAIN)
    good = plan_memory(m)
    # two live buffers put on the same bytes
    p = copy.deepcopy(good)
    b1, b2 = sorted([b for b in p.buffers if b.cls == BATCH and b.start <= 1 <= b.end][:2], key=lambda b: b.offset)
    b2.offset = b1.offset
    assert any("share bytes" in x for x in verify_plan(p))
    with pytest.raises(AssertionError, match="writes 'c1' over its operand 'data'"):
        simulate(p, m, 1)          # the oracle agrees
    # a misaligned offset
    p = copy.deepcopy(good)
    next(b for b in p.buffers if b.cls == BATCH).offset += 4
    assert any("not aligned" in x for x in verify_plan(p))
    # a read before the write
    p = copy.deepcopy(good)
    p.steps[0], p.steps[1] = p.steps[1], p.steps[0]
    assert any("before it is written" in x for x in verify_plan(p))
    # a buffer beyond its arena
    p = copy.deepcopy(good)
    p.arenas[BATCH].size -= 256
    assert any("exceeds" in x for x in verify_plan(p))
    # a concat slice moved into its sibling
    mi = build(INCEPTION)
    p = copy.deepcopy(plan_memory(mi))
    x = p.tensor("M1/b1")
    x.offset = p.tensor("M1/b0").offset
    assert any("M1/b1" in y for y in verify_plan(p))
    with pytest.raises(AssertionError, match="does not hold its values"):
        simulate(p, mi, 1)
    # an in-place step whose input is still read later
    p = copy.deepcopy(good)
    r1, c1, p1 = p.tensor("r1"), p.tensor("c1"), p.tensor("p1")
    p.steps[p1.producer - 1].reads.append(c1.id)          # the pooling now also reads c1
    c1.last_use = p1.producer
    p.buffers[c1.buffer].end = max(p.buffers[c1.buffer].end, p1.producer)
    assert any("'c1'" in y and "'r1'" in y for y in verify_plan(p))


# ---------------------------------------------------------------------------------------------
# fused modules: one step per fusion group


RESBLOCK = """
network res {
  input data: f32[4, 8, 8, 16]
  c0 = Convolution(data) {filter: [3, 3, 16, 16], activation: relu}
  c1 = Convolution(c0) {filter: [3, 3, 16, 16]}
  bn = BatchNorm(c1)
  s = Add(bn, c0)
  r = ReLU(s)
  side = Convolution(data) {filter: [1, 1, 16, 16], activation: relu}
  a = Sigmoid(side)
  b = Tanh(a)
  t = Add(b, r)
  out = Convolution(t) {filter: [1, 1, 16, 4]}
}
"""


def test_fused_group_is_one_step_and_its_intermediates_take_no_bytes():
    m = build(RESBLOCK, fuse=True)
    p = plan(m)
    unfused = plan(m, fusion="none")
    t = {x.name: x for x in p.tensors}
    assert p.fusion and not unfused.fusion
    # groups: c0 | c1+bn+s+r | side | a+b+t | out
    assert [s.layers for s in p.steps] == [["c0"], ["c1", "bn", "s", "r"], ["side"], ["a", "b", "t"], ["out"]]
    assert len(unfused.steps) == 10
    g = step(p, "c1")
    assert [p.tensors[i].name for i in g.fused] == ["c1", "bn", "s"] and g.writes == [t["r"].id]
    # operands of any member live until the group's step; intermediates nowhere else
    assert t["c0"].last_use == g.index and t["@bn.scale"].id in g.reads
    for n in ("c1", "bn", "s", "a", "b"):
        x = t[n]
        assert x.fused and x.buffer == -1 and x.producer == x.last_use == step(p, n).index
        assert all(x.id not in b.tensors for b in p.buffers)
    fused_bytes = sum(t[n].size for n in ("c1", "bn", "s", "a", "b"))
    assert fused_bytes == 5 * 8 * 8 * 16 * 4
    # the conv anchor reads windows of c0: r is never placed over c0, though the residual add
    # reads c0 element for element
    assert g.action == "kernel" and t["r"].buffer != t["c0"].buffer
    # a pointwise chain reads everything at the output's index: t overwrites an operand that dies there
    chain = step(p, "t")
    assert chain.action == "inplace" and t["t"].buffer in (t["r"].buffer, t["side"].buffer)
    # the lower bound counts the same steps; fusion never needs more than the op-by-op plan
    a, u = p.arenas[BATCH], unfused.arenas[BATCH]
    assert a.lower_bound <= a.size <= u.size and a.lower_bound <= u.lower_bound
    assert "c1 (fused), bn (fused), s (fused)" in p.table() and "one step per fusion group" in p.table()
    from netc.memory.report import plan_json
    j = plan_json(p)
    recs = {r["name"]: r for r in j["tensors"]}
    assert j["fusion"] and j["fused_tensors"] == 5 and j["fused_bytes"] == fused_bytes * p.batch
    assert recs["bn"]["fused"] and recs["bn"]["buffer"] is None and not recs["r"]["fused"]
    assert {"step": g.index, "layers": ["c1", "bn", "s", "r"], "action": "kernel", "group": g.group,
            "fused": ["c1", "bn", "s"]} in j["steps"]
    with pytest.raises(PlanError, match="fused"):
        p.address("bn")
    with pytest.raises(LayoutError, match="fusion='none'"):
        write_layout(p)


def test_fusion_saves_the_epilogue_intermediates():
    """Residual blocks (x -> conv+relu -> conv -> batch norm -> add x -> relu): op by op, the second
    conv's result is a third buffer beside its input and the residual; fused, the block's result
    is written over the residual (read element for element) and the conv result never stored."""
    src = "network r {\n  input data: f32[2, 8, 8, 32]\n  x0 = Convolution(data) {filter: [1, 1, 32, 32], activation: relu}\n"
    for i in range(1, 6):
        src += (f"  a{i} = Convolution(x{i-1}) {{filter: [1, 1, 32, 32], activation: relu}}\n"
                f"  c{i} = Convolution(a{i}) {{filter: [3, 3, 32, 32]}}\n  b{i} = BatchNorm(c{i})\n"
                f"  s{i} = Add(b{i}, x{i-1})\n  x{i} = ReLU(s{i})\n")
    m = build(src + "}\n", fuse=True)
    p, u = plan(m), plan(m, fusion="none")
    assert len(p.steps) == 11 and len(u.steps) == 26
    assert p.arenas[BATCH].lower_bound == 2 * 8 * 8 * 32 * 4 < u.arenas[BATCH].lower_bound == 3 * 8 * 8 * 32 * 4
    assert p.arenas[BATCH].size == p.arenas[BATCH].lower_bound
    assert all(step(p, f"s{i}").action == "inplace" for i in range(1, 6))


def test_fused_result_never_goes_over_an_alias_of_a_window_read():
    """d = Dropout(y) is y's bytes at inference: the residual add reads d element for element, but
    the conv reads windows of y, so the group's result must not be written over d."""
    m = build("""
    network h {
      input data: f32[2, 6, 6, 8]
      y = Convolution(data) {filter: [1, 1, 8, 8], activation: relu}
      d = Dropout(y)
      c2 = Convolution(y) {filter: [3, 3, 8, 8], padding: SAME}
      s2 = Add(c2, d)
      out = Convolution(s2) {filter: [1, 1, 8, 4]}
    }""", fuse=True)
    p = plan(m)
    assert step(p, "d").action == "alias" and p.tensor("d").buffer == p.tensor("y").buffer
    assert step(p, "s2").layers == ["c2", "s2"] and step(p, "s2").action == "kernel"
    assert p.tensor("s2").buffer != p.tensor("y").buffer


def test_given_schedule_places_a_group_at_its_last_layer():
    m = build(RESBLOCK, fuse=True)
    with pytest.raises(PlanError, match="runs 't' before its operand 'r'"):
        # group a+b+t runs where t is listed: before r
        plan_memory(m, schedule=["side", "a", "b", "t", "c0", "c1", "bn", "s", "r", "out"])
    p = plan(m, schedule=["side", "a", "b", "c0", "c1", "bn", "s", "r", "t", "out"])
    assert p.schedule == "given" and p.order == ["side", "c0", "c1", "bn", "s", "r", "a", "b", "t", "out"]


def test_a_group_whose_intermediate_escapes_is_refused():
    m = build(RESBLOCK, fuse=True)
    ops = {op.attrs.get("name"): op for op in m.network("res").regions[0].ops}
    ops["c1"].attrs["fusion_group"] = ops["out"].attrs["fusion_group"]   # c1 would feed bn from inside 'out'
    with pytest.raises(PlanError, match="the result of 'c1' is read by 'bn' outside the group") as e:
        plan_memory(m)
    assert e.value.loc is ops["c1"].loc and e.value.notes[0][1] is ops["bn"].loc
    plan(m, fusion="none")                   # op by op it plans as ever


def test_verifier_catches_broken_fused_plans():
    m = build(RESBLOCK, fuse=True)
    good = plan_memory(m)
    assert verify_plan(good, m) == []
    t = good.tensor
    # a fused tensor given bytes
    p = copy.deepcopy(good)
    p.tensor("bn").buffer = p.tensor("r").buffer
    assert any("'bn' is fused" in x for x in verify_plan(p, m))
    # a fused tensor read by another step
    p = copy.deepcopy(good)
    st = step(p, "out")
    st.reads.append(t("bn").id)
    st.members[0].reads.append(t("bn").id)
    assert any("reads 'bn' from memory, but it is fused" in x for x in verify_plan(p))
    with pytest.raises(AssertionError, match="'bn' is fused"):
        simulate(p, m, 1)
    # a member reading a fused tensor its step never computed
    p = copy.deepcopy(good)
    g = step(p, "c1")
    g.fused.remove(t("s").id)
    assert any("'s'" in x for x in verify_plan(p, m))
    # the step's reads drop an operand a member reads
    p = copy.deepcopy(good)
    g = step(p, "c1")
    g.reads.remove(t("c0").id)
    assert any("not what its members read" in x for x in verify_plan(p))
    # in place over a window-read operand: r over c0 (the conv reads windows of c0)
    p = copy.deepcopy(good)
    g = step(p, "c1")
    r, c0 = p.tensor("r"), p.tensor("c0")
    r.buffer, r.alias, r.alias_of = c0.buffer, "inplace", c0.id
    p.buffers[c0.buffer].tensors.append(r.id)
    p.buffers[c0.buffer].end = max(p.buffers[c0.buffer].end, r.last_use)
    g.action = "inplace"
    probs = verify_plan(p, m)
    assert any("'c1' (netc.conv2d) does not read element for element" in x for x in probs), probs
    with pytest.raises(AssertionError, match="writes 'r' over 'c0', which it reads elsewhere"):
        simulate(p, m, 1)
    # the plan's steps must be the network's fusion groups
    p = copy.deepcopy(good)
    ops = {op.attrs.get("name"): op for op in m.network("res").regions[0].ops}
    ops["r"].attrs["fusion_group"] = "g99"
    assert any("group" in x for x in verify_plan(p, m))


# ---------------------------------------------------------------------------------------------
# random DAGs


def _parent(draw, names, chains):
    """A random earlier layer; with chains, mostly the latest (long pointwise chains to fuse)."""
    if chains and draw(st.integers(0, 2)):
        return names[-1]
    return draw(st.sampled_from(names))


@st.composite
def mlp_dags(draw, max_layers=14, chains=False):
    """A random DAG of rank-2 layers: dense, activations, views, residual adds, concatenations."""
    n0 = draw(st.sampled_from([4, 8, 12]))
    batch = draw(st.sampled_from([1, 3, 8]))
    lines = [f"input x: f32[{batch}, {n0}]"]
    width = {"x": n0}
    kinds = ["fc", "fc", "relu", "drop", "flat", "add", "cat", "bn"] + (["sig", "add", "bn"] if chains else [])
    for i in range(draw(st.integers(1, max_layers))):
        names = list(width)
        p = _parent(draw, names, chains)
        kind = draw(st.sampled_from(kinds))
        name = f"l{i}"
        if kind == "fc":
            w = draw(st.sampled_from([4, 8, 12, 20]))
            lines.append(f"{name} = InnerProduct({p}) {{num_outputs: {w}}}")
        elif kind in ("relu", "drop", "flat", "bn", "sig"):
            op = {"relu": "ReLU", "drop": "Dropout", "flat": "Reshape", "bn": "BatchNorm", "sig": "Sigmoid"}[kind]
            lines.append(f"{name} = {op}({p})")
            w = width[p]
        elif kind == "add":
            same = [q for q in names if width[q] == width[p]]
            q = draw(st.sampled_from(same))
            lines.append(f"{name} = Add({p}, {q})")
            w = width[p]
        else:
            k = draw(st.integers(2, 3))
            ps = [draw(st.sampled_from(names)) for _ in range(k)]
            lines.append(f"{name} = Concatenate({', '.join(ps)}) {{dim: 1}}")
            w = sum(width[q] for q in ps)
        width[name] = w
    if draw(st.booleans()):
        outs = draw(st.lists(st.sampled_from([n for n in width if n != "x"] or ["x"]), min_size=1, max_size=3,
                             unique=True))
        if outs != ["x"]:
            lines.append("output " + ", ".join(outs))
    return "network r {\n  " + "\n  ".join(lines) + "\n}\n"


@st.composite
def cnn_dags(draw, max_layers=12, chains=False):
    """A random DAG of NHWC layers with channel, height and width concatenations."""
    batch = draw(st.sampled_from([1, 2, 5]))
    c0 = draw(st.sampled_from([2, 4]))
    lines = [f"input x: f32[{batch}, 4, 4, {c0}]"]
    shape = {"x": (4, 4, c0)}
    kinds = ["conv", "conv", "relu", "drop", "pool", "add", "cat", "cat"] + (["relu", "add", "add"] if chains else [])
    for i in range(draw(st.integers(1, max_layers))):
        names = list(shape)
        p = _parent(draw, names, chains)
        h, w, c = shape[p]
        kind = draw(st.sampled_from(kinds))
        name = f"l{i}"
        if kind == "conv":
            co = draw(st.sampled_from([1, 3, 4, 8]))
            lines.append(f"{name} = Convolution({p}) {{filter: [1, 1, {c}, {co}]}}")
            s = (h, w, co)
        elif kind in ("relu", "drop"):
            lines.append(f"{name} = {'ReLU' if kind == 'relu' else 'Dropout'}({p})")
            s = (h, w, c)
        elif kind == "pool":
            lines.append(f"{name} = Pooling({p}) {{ksize: [1, 1, 1, 1]}}")
            s = (h, w, c)
        elif kind == "add":
            q = draw(st.sampled_from([q for q in names if shape[q] == shape[p]]))
            lines.append(f"{name} = Add({p}, {q})")
            s = (h, w, c)
        else:
            d = draw(st.sampled_from([1, 2, 3]))
            same = [q for q in names if all(shape[q][j] == shape[p][j] for j in range(3) if j != d - 1)]
            ps = [p] + [draw(st.sampled_from(same)) for _ in range(draw(st.integers(1, 2)))]
            lines.append(f"{name} = Concatenate({', '.join(ps)}) {{dim: {d}}}")
            s = list(shape[p])
            s[d - 1] = sum(shape[q][d - 1] for q in ps)
            s = tuple(s)
        shape[name] = s
    if draw(st.booleans()):
        last = list(shape)[-1]
        lines.append(f"flat = Reshape({last})")
        lines.append("fc = InnerProduct(flat) {num_outputs: 3}")
    return "network r {\n  " + "\n  ".join(lines) + "\n}\n"


def _check_random(src, data, fuse=False):
    m = build(src, fuse=fuse)
    opts = dict(alignment=data.draw(st.sampled_from([1, 4, 64, 256])),
                concat=data.draw(st.sampled_from(["all", "all", "contiguous", "none"])),
                mode=data.draw(st.sampled_from(["inference", "inference", "training"])),
                reuse=data.draw(st.sampled_from([True, True, False])),
                strategies=data.draw(st.sampled_from([("greedy-by-size",), ("greedy-by-breadth",),
                                                      ("longest-lifetime-first",),
                                                      ("greedy-by-size", "greedy-by-breadth")])))
    p = plan_memory(m, **opts)
    problems = verify_plan(p, m, batches=range(1, p.batch + 1))
    assert problems == [], (src, opts, problems)
    simulate(p, m, data.draw(st.integers(1, p.batch)))
    for a in p.arenas:
        assert a.lower_bound <= a.size <= a.naive
        assert a.size % opts["alignment"] == 0 if opts["alignment"] > 1 else True
    if fuse:
        # one step per fusion group; every group's intermediates fused, nothing else
        groups = {}
        for op in m.network("r").regions[0].ops:
            if "fusion_group" in op.attrs:
                groups.setdefault(op.attrs["fusion_group"], []).append(op.attrs["name"])
        assert p.fusion and sorted(s.layers for s in p.steps) == sorted(groups.values())
        assert sum(len(s.layers) - 1 for s in p.steps) == sum(1 for t in p.tensors if t.fused)
        unfused = plan_memory(m, **opts, fusion="none")
        assert verify_plan(unfused, m) == []
        if any(t.fused for t in p.tensors):
            with pytest.raises(LayoutError):
                write_layout(p)
            return
    if opts["concat"] != "all" and len({t.itemsize for t in p.tensors}) == 1:
        lay = read_layout(json.dumps(write_layout(p)))
        for t in p.tensors:
            path = next(k for k, v in lay.meta["arrays"].items() if v == t.name) \
                if t.name in lay.meta["arrays"].values() else None
            if path:
                a = lay.arrays[path]
                b = p.buffers[t.buffer]
                assert a.start * 4 == b.offset + t.offset and a.type == t.cls


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mlp_dags(), st.data())
def test_random_mlp_dags_plan_and_verify(src, data):
    _check_random(src, data)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cnn_dags(), st.data())
def test_random_cnn_dags_plan_and_verify(src, data):
    _check_random(src, data)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mlp_dags(chains=True), st.data())
def test_random_fused_mlp_dags_plan_and_verify(src, data):
    _check_random(src, data, fuse=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cnn_dags(chains=True), st.data())
def test_random_fused_cnn_dags_plan_and_verify(src, data):
    _check_random(src, data, fuse=True)


# ---------------------------------------------------------------------------------------------
# Brainstorm layouts


def test_layout_round_trip():
    m = build(INCEPTION)
    with pytest.raises(LayoutError, match="concat='contiguous'"):
        write_layout(plan(m))        # channel slices are strided: not expressible
    p = plan(m, concat="contiguous")
    doc = json.loads(json.dumps(write_layout(p)))
    lay = read_layout(doc)
    assert doc["sizes"] == [a.size // 4 for a in p.arenas]
    assert lay.layers[0] == "data" and lay.layers[1:] == [k for k in doc["netc"]["order"][1:]]
    names = doc["netc"]["names"]
    assert names["M1_cat"] == "M1/cat" and all(k.isidentifier() for k in doc["layout"]["layout"])
    for path, name in doc["netc"]["arrays"].items():
        t = p.tensor(name)
        a = lay.arrays[path]
        assert (a.type, a.start * 4, a.stop - a.start) == (t.cls, p.buffers[t.buffer].offset + t.offset, t.numel)
        assert a.shape == t.feature_shape
    # parameters form the flat vector at the bottom of type 0, in module order
    w = lay.arrays["stem.parameters.weight"]
    assert (w.type, w.start) == (0, 0)
    assert doc["netc"]["reuse"] is True and doc["netc"]["mode"] == "inference"
    check_layout_mode(lay, "inference")
    with pytest.raises(LayoutError, match=r"\$\.netc\.mode"):
        check_layout_mode(lay, "training")
    assert verify_plan(p, m) == []


def _layout(src=CHAIN, **kw):
    return json.loads(json.dumps(write_layout(plan(src, concat="contiguous", **kw))))


def _errors(doc):
    with pytest.raises(LayoutError) as e:
        read_layout(doc)
    return e.value.problems


def test_layout_error_slice_out_of_range():
    doc = _layout()
    doc["layout"]["layout"]["c2"]["layout"]["outputs"]["layout"]["default"]["slice"][2] = doc["sizes"][1] + 1
    errs = _errors(doc)
    assert ("$.layout.layout.c2.layout.outputs.layout.default.slice",) in [(p,) for p, _ in errs]
    assert any("out of range" in msg for _, msg in errs)


def test_layout_error_duplicate_sibling_index():
    doc = _layout()
    doc["layout"]["layout"]["c1"]["layout"]["parameters"]["layout"]["bias"]["index"] = 0
    errs = _errors(doc)
    assert any(p == "$.layout.layout.c1.layout.parameters.layout.bias.index" and "duplicate sibling index" in m
               for p, m in errs)
    doc = _layout()
    doc["layout"]["layout"]["r2"]["index"] = doc["layout"]["layout"]["c2"]["index"]
    assert any(p == "$.layout.layout.r2.index" for p, _ in _errors(doc))


def test_layout_error_shape_does_not_match_slice():
    doc = _layout()
    doc["layout"]["layout"]["fc"]["layout"]["parameters"]["layout"]["weight"]["shape"] = [3, 3]
    errs = _errors(doc)
    assert any(p == "$.layout.layout.fc.layout.parameters.layout.weight.shape" and "holds 9 elements" in m
               for p, m in errs)


def test_layout_error_overlapping_arrays():
    # without netc metadata (a plain Brainstorm layout) sources never share elements (E3)
    doc = {"sizes": [0, 0, 10], "layout": {"layout": {
        "InputLayer": {"index": 0, "layout": {
            "inputs": {"index": 0, "layout": {}},
            "outputs": {"index": 1, "layout": {"default": {"index": 0, "slice": [2, 0, 4], "shape": [4]}}},
            "parameters": {"index": 2, "layout": {}}, "internals": {"index": 3, "layout": {}}}},
        "A": {"index": 1, "layout": {
            "inputs": {"index": 0, "layout": {"default": {"index": 0, "slice": [2, 0, 4], "shape": [4]}}},
            "outputs": {"index": 1, "layout": {"default": {"index": 0, "slice": [2, 2, 8], "shape": [6]}}},
            "parameters": {"index": 2, "layout": {}}, "internals": {"index": 3, "layout": {}}}}}}}
    errs = _errors(doc)
    assert any(p == "$.layout.layout.A.layout.outputs.layout.default.slice"
               and "$.layout.layout.InputLayer.layout.outputs.layout.default.slice" in m for p, m in errs)
    doc["layout"]["layout"]["A"]["layout"]["outputs"]["layout"]["default"]["slice"] = [2, 4, 10]
    read_layout(doc)
    # with netc metadata: moving a tensor onto one that is live at the same time
    doc = _layout()
    meta = doc["netc"]
    c2, p1 = meta["tensors"]["c2"], meta["tensors"]["p1"]   # p1 is read by c2: live together
    assert c2["live"][0] <= p1["live"][1]
    width = c2["slice"][2] - c2["slice"][1]
    c2["slice"] = [1, p1["slice"][1], p1["slice"][1] + width]
    for path, name in meta["arrays"].items():
        if name in ("c2", "r2"):
            layer, cat, n = path.split(".")
            doc["layout"]["layout"][layer]["layout"][cat]["layout"][n]["slice"] = list(c2["slice"])
    meta["tensors"]["r2"]["slice"] = list(c2["slice"])
    errs = _errors(doc)
    assert any(p == "$.layout.layout.c2.layout.outputs.layout.default.slice" and "while both are live" in m
               for p, m in errs), errs
    # and a reuse layout claiming no reuse
    doc = _layout()
    doc["netc"]["reuse"] = False
    assert any("netc.reuse is false" in m for _, m in _errors(doc))


def test_layout_error_structure_and_types():
    doc = _layout()
    del doc["layout"]["layout"]["c1"]["layout"]["internals"]
    doc["layout"]["layout"]["r1"]["layout"]["outputs"]["index"] = 5
    doc["layout"]["layout"]["fc"]["layout"]["parameters"]["layout"]["bias"]["slice"][0] = 1
    doc["sizes"] = [1, 2]
    errs = dict(_errors(doc))
    assert "missing category 'internals'" in errs["$.layout.layout.c1.layout"]
    assert "expected 1" in errs["$.layout.layout.r1.layout.outputs.index"]
    assert "buffer type 0" in errs["$.layout.layout.fc.layout.parameters.layout.bias.slice[0]"]
    assert "$.sizes" in errs
    with pytest.raises(LayoutError, match=r"^\$: not JSON"):
        read_layout("{")


def test_read_brainstorm_corpus_layout():
    path = "/work/shared/corpus/brainstorm/old_format_e0f35f3.layouts.json"
    if not os.path.exists(path):
        pytest.skip("Brainstorm corpus not available")
    with open(path) as f:
        corpus = json.load(f)
    for name, run in corpus["results"].items():
        lay = read_layout({"sizes": run["sizes"], "layout": run["layout"]})
        assert lay.layers[0] == "InputLayer"
    fixture = corpus["results"]["conftest_fixture"]
    lay = read_layout({"sizes": fixture["sizes"], "layout": fixture["layout"]})
    assert lay.sizes == [230, 0, 54]
    c_in = lay.arrays["C.inputs.default"]
    assert (c_in.start, c_in.stop) == (2, 10)


# ---------------------------------------------------------------------------------------------
# the pass, and size


def test_plan_memory_pass_attaches_the_plan():
    import netc.passes.plan_memory  # noqa: F401  (registers the pass)
    from netc.ir.printer import print_ir
    m = load_text(CHAIN, "test.nd")
    ctx = pipelines.compile(m, plan=Plan())      # the default pipeline, fuse, plan-memory
    p = ctx.notes["memory_plan"]["chain"]
    net = m.network("chain")
    s = net.attrs["netc.memory_plan"]
    assert s["arenas"]["batch"]["bytes"] == p.arenas[BATCH].size and s["batch"] == 8
    assert "netc.memory_plan = {" in print_ir(m)
    assert "batch arena" in p.table()


def test_thousand_layer_net_plans():
    lines = ["network big {", "  input data: f32[16, 8, 8, 32]", "  l0 = Convolution(data) {filter: [1, 1, 32, 32]}"]
    for i in range(1, 1000):
        if i % 10 == 5:      # a small two-way fork joined by a channel concat now and then
            lines.append(f"  a{i} = Convolution(l{i-1}) {{filter: [1, 1, 32, 16]}}")
            lines.append(f"  b{i} = Convolution(l{i-1}) {{filter: [1, 1, 32, 16]}}")
            lines.append(f"  l{i} = Concatenate(a{i}, b{i}) {{dim: 3}}")
        else:
            t = ["ReLU", "Convolution", "Dropout", "BatchNorm"][i % 4]
            a = " {filter: [1, 1, 32, 32]}" if t == "Convolution" else ""
            lines.append(f"  l{i} = {t}(l{i-1}){a}")
    m = build("\n".join(lines + ["}"]))
    p = plan(m, sim=False)
    assert len(p.steps) >= 1000   # (how long it takes is bench/memory.py's business: no wall time in tests)
    a = p.arenas[BATCH]
    assert a.size <= 1.05 * a.lower_bound
