"""Fusion groups + memory plan -> launches: one resolved kernel specialization per group.

Each group is lowered by calling the netc.kernels launcher with launch=False on *meta* tensors
that stand for plan placements: every tensor is an as_strided view of one huge meta storage whose
storage offset encodes which placement it is (id << ID_SHIFT, plus any element offset a launcher's
own view adds), with the plan's batch stride and feature strides. So the launchers' own shape
checks, stride arithmetic and block-size choices are reused unchanged, and every pointer argument
of the KernelCall maps back to (arena region, per-sample offset, offset): its address at runtime
batch b is arena_base[region] + coeff * b + const (memory/plan.py: offset*b + sample*size + t.offset).

Integer arguments that depend on the batch (NB, M, NUMEL, ...) are affine in b: each group is
lowered at the compiled batch B and at B + 1 with the constexprs of B pinned, and the difference
gives the coefficient. The grid's first axis is cdiv(rows_per_sample * b, BLOCK) * R; the others
do not depend on the batch.

A group runs at the schedule step of its last op. A plan made with fusion has that step for the
whole group (memory/plan.py), so check_group only guards it (a finding is an internal error); on a
plan made op by op, check_group finds where running a group there would read bytes the plan has
reused, and lower_network splits the group there.
"""
from __future__ import annotations


import torch

from ..diagnostics import NetcError
from ..ir.core import STRUCTURAL_OPS
from ..memory.plan import BATCH, CONSTANT, is_dense, output_aligned_members, row_major
from ..ops import lookup
from ..ops.registry import not_runnable

from .recipes import BATCH_ARENA, CONST_ARENA, NULL, Arg, Launch, Lowered  # noqa: F401
ID_SHIFT = 36
TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
                "i32": torch.int32, "i64": torch.int64, "i8": torch.int8}   # integers: labels
# constexpr -> launcher keyword, to pin a specialization while re-lowering at another batch
PIN_KWARGS = {"BLOCK_M": "block_m", "BLOCK_N": "block_n", "BLOCK_K": "block_k", "GROUP_M": "group_m",
              "FLAT_K": "flat_k", "BLOCK": "block", "BLOCK_P": "block_p", "BLOCK_C": "block_c",
              "BLOCK_R": "block_r"}
# launch options a pin carries too (so a tuned num_warps/num_stages survives re-lowering at batch B+1)
PIN_OPTIONS = ("num_warps", "num_stages")
NO_KERNEL = {"netc.deconv2d": "transposed convolution", "netc.upsample2d": "upsampling",
             "netc.gru": "a recurrent (GRU) cell", "netc.argsort": "SINGA's ArgSort",
             "netc.accuracy": "SINGA's Accuracy",
             "netc.opaque": "an opaque (unknown) layer"}
# tile policies: "cuda", the launchers' own (what the .so runs); "large", large_tiles() (the interpreter)
BLOCK_POLICIES = ("cuda", "large")
# ops that are the identity on their operand's bytes: no kernel when the plan aliases them, else a copy
COPY_OPS = ("netc.dropout", "netc.reshape", "netc.identity")


class CodegenError(NetcError):
    pass


# --------------------------------------------------------------------------- meta placements

class _Placements:
    def __init__(self, plan, batch):
        self.plan, self.batch = plan, batch
        self.base = {}
        self.regions = {0: (NULL, 0, 0)}
        self.by_tensor = {}

    def meta(self, t):
        """The meta tensor standing for plan tensor t (a TensorPlan) at self.batch."""
        if t.id in self.by_tensor:
            return self.by_tensor[t.id]
        dt = TORCH_DTYPES.get(t.dtype)
        if dt is None:
            raise CodegenError(f"tensor '{t.name}' has dtype {t.dtype}; the CUDA target supports f32, f16, bf16 "
                               f"(and i32, i64, i8 for labels)")
        buf = self.plan.buffers[t.buffer]
        fshape = t.feature_shape
        fstr = tuple(t.strides) if t.strides is not None else row_major(fshape)
        if t.cls == BATCH:
            shape = (self.batch,) + tuple(fshape)
            strides = (buf.size // t.itemsize,) + tuple(fstr)
            info = (BATCH_ARENA, buf.offset, t.offset)
        elif t.cls == CONSTANT:
            shape, strides = tuple(fshape), tuple(fstr)
            info = (CONST_ARENA, 0, buf.offset + t.offset)
        else:
            raise CodegenError(f"tensor '{t.name}' is time-sized; the CUDA target has no recurrent ops yet")
        if dt not in self.base:
            self.base[dt] = torch.empty(2 ** 58, dtype=dt, device="meta")
        k = len(self.regions)
        self.regions[k] = info
        m = self.base[dt].as_strided(shape, strides, k << ID_SHIFT)
        self.by_tensor[t.id] = m
        return m

    def decode(self, v: torch.Tensor):
        off = v.storage_offset()
        k, extra = off >> ID_SHIFT, off & ((1 << ID_SHIFT) - 1)
        if k not in self.regions:
            raise AssertionError(f"kernel argument with unknown placement (offset {off})")
        region, coeff, const = self.regions[k]
        if region == NULL:
            if extra or v.numel() > 1:
                raise CodegenError("a launcher made a temporary copy of an operand (an unsupported layout)")
            return region, 0, 0
        return region, coeff, const + extra * v.element_size()


# --------------------------------------------------------------------------- lowering one group

def _slope_act(op):
    if op.name == "netc.relu":
        s = float(op.attrs.get("negative_slope", 0.0) or 0.0)
        return ("leaky_relu", s) if s else ("relu", 0.0)
    return ({"netc.sigmoid": "sigmoid", "netc.tanh": "tanh"}[op.name], 0.0)


def _lower_group(members, plan, tensors, pl: _Placements, pin: dict, tf32: bool = False):
    """(KernelCall, rows_per_sample, block) of a group: the grid's first axis is cdiv(rows_per_sample * b,
    block) * R, block the value of the constexpr so named, a number, or None (1).
    tf32: f32 matrix products may use TF32 (the network's netc.precision, from set-dtype)."""
    K = _kernels()
    first, last = members[0], members[-1]
    T = lambda v: pl.meta(tensors[_vname(v)])                       # noqa: E731
    P = lambda op, role: pl.meta(tensors["@" + op.attrs["params"][role].name])  # noqa: E731
    out = T(last.results[0])
    B = pl.batch
    if first.name in ("netc.conv2d", "netc.inner_product"):
        kw = dict(activation="none", negative_slope=0.0, allow_tf32=tf32)
        if first.attrs.get("activation", "none") not in ("none", None):
            kw["activation"] = first.attrs["activation"]
        prev = first.results[0]
        for m in members[1:]:
            if m.name == "netc.batch_norm":
                kw["scale"], kw["shift"] = P(m, "scale"), P(m, "shift")
            elif m.name == "netc.elementwise":
                other = m.operands[1] if m.operands[0] is prev else m.operands[0]
                kw["residual"] = T(other)
                kw["residual_after_act"] = kw["activation"] != "none"
            else:
                kw["activation"], kw["negative_slope"] = _slope_act(m)
            prev = m.results[0]
        params = first.attrs.get("params") or {}
        bias = P(first, "bias") if "bias" in params else None
        x = T(first.operands[0])
        if first.name == "netc.conv2d":
            call = K.conv2d(x, P(first, "weight"), bias, strides=first.attrs.get("strides", [1, 1, 1, 1]),
                            padding=first.attrs.get("padding", "SAME"), out=out, launch=False, **kw, **pin)
            return call, out.shape[1] * out.shape[2], "BLOCK_M"
        if kw.get("residual") is not None:
            kw["residual"] = kw["residual"].reshape(B, -1)
        call = K.gemm(x.reshape(B, -1), P(first, "weight"), bias, out=out, launch=False, **kw, **pin)
        return call, 1, "BLOCK_M"
    if first.name in ("netc.relu", "netc.sigmoid", "netc.tanh", "netc.batch_norm", "netc.elementwise"):
        ops, prev = [], None
        x = T(first.operands[0])
        for m in members:
            others = [v for v in m.operands if v is not prev] if prev is not None else list(m.operands[1:])
            if m.name == "netc.batch_norm":
                ops.append(("scale_shift", P(m, "scale"), P(m, "shift")))
            elif m.name == "netc.elementwise":
                name = {"sum": "add", "product": "mul", "max": "max"}[m.attrs.get("operation", "sum")]
                ops.extend((name, T(v)) for v in others)
            else:
                a, s = _slope_act(m)
                ops.append(("leaky_relu", s) if a == "leaky_relu" else a)
            prev = m.results[0]
        call = K.elementwise_chain(x, ops, out=out, launch=False, **pin)
        return call, x.numel() // B, "BLOCK"
    op = first
    if len(members) != 1:
        raise AssertionError(f"group of {op.name} has {len(members)} members")
    if op.name in ("netc.maxpool", "netc.avgpool"):
        fn = K.maxpool if op.name == "netc.maxpool" else K.avgpool
        call = fn(T(op.operands[0]), op.attrs["ksize"], op.attrs.get("strides", [1, 1, 1, 1]),
                  op.attrs.get("padding", "VALID"), out=out, launch=False, **pin)
        return call, out.shape[1] * out.shape[2], "BLOCK_P"
    if op.name == "netc.lrn":
        x = T(op.operands[0])
        call = K.lrn(x, op.attrs.get("local_size", 5), op.attrs.get("alpha", 1e-4), op.attrs.get("beta", 0.75),
                     op.attrs.get("knorm", 1.0), out=out, launch=False, **pin)
        return call, x.numel() // B // x.shape[-1], "BLOCK_P"
    if op.name == "netc.softmax":
        call = K.softmax(T(op.operands[0]), out=out, launch=False, **pin)
        return call, 1, None
    if op.name in ("netc.softmax_loss", "netc.euclidean_loss"):
        fn = K.softmax_loss if op.name == "netc.softmax_loss" else K.euclidean_loss
        call = fn(T(op.operands[0]), T(op.operands[1]), out=out, launch=False, **pin)
        return call, 1, K.ONE_PROGRAM      # one program reduces the whole batch
    if op.name in COPY_OPS:
        return _copy_call(T(op.operands[0]), out, pin, pl)
    raise AssertionError(op.name)


def _kernels():
    # the launchers themselves (the package's lazy names are shadowed once a submodule is imported)
    from types import SimpleNamespace
    from ..kernels.conv import conv2d
    from ..kernels.elementwise import elementwise_chain
    from ..kernels.gemm import gemm
    from ..kernels.loss import ONE_PROGRAM, euclidean_loss, softmax_loss
    from ..kernels.lrn import lrn
    from ..kernels.pool import avgpool, maxpool
    from ..kernels.softmax import softmax
    return SimpleNamespace(conv2d=conv2d, elementwise_chain=elementwise_chain, gemm=gemm, lrn=lrn,
                           avgpool=avgpool, maxpool=maxpool, softmax=softmax, softmax_loss=softmax_loss,
                           euclidean_loss=euclidean_loss, ONE_PROGRAM=ONE_PROGRAM)


def _vname(v):
    n = v.owner.attrs.get("name") or v.owner.name
    return n if len(v.owner.results) == 1 else f"{n}#{v.index}"


def _pin_of(call) -> dict:
    pin = {PIN_KWARGS[k]: v for k, v in call.constexprs.items() if k in PIN_KWARGS}
    pin.update({k: v for k, v in call.options.items() if k in PIN_OPTIONS})
    return pin


def _copy_call(src, dst, pin, pl):
    """A copy src -> dst (an elementwise chain of no ops): a concat input into its slice, or a
    dropout/reshape/identity the plan could not alias. Different shapes of the same element count
    (a reshape) are copied as [batch, features] rows, which needs both dense within a sample."""
    K = _kernels()
    if tuple(src.shape) != tuple(dst.shape):
        src, dst = _as_rows(src, pl.batch), _as_rows(dst, pl.batch)
    return K.elementwise_chain(src, [], out=dst, launch=False, **pin), src.numel() // pl.batch, "BLOCK"


def _as_rows(t, batch):
    """A meta placement [batch, ...] dense within each sample, viewed as [batch, features] (same storage
    offset, so it still decodes to its placement)."""
    f = t.numel() // batch if batch else 0
    fshape = tuple(t.shape[1:])
    if not is_dense(fshape, tuple(t.stride()[1:])):
        raise ValueError(f"a copy between different shapes needs dense tensors, got strides {t.stride()}")
    return t.as_strided((batch, f), (t.stride(0) if t.dim() else f, 1), t.storage_offset())


# constexprs that are tiles (what tuning chooses), not part of what a specialization computes
TILE_CONSTEXPRS = {"BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "BLOCK", "BLOCK_P", "BLOCK_C", "BLOCK_R"}


def tuning_key(call) -> str:
    """What decides a specialization's best tiles (tune.py): the kernel, the type and value of
    each scalar argument at the compiled batch (sizes, strides, a slope), the type of each pointer,
    and the constexprs other than the tiles."""
    import hashlib
    import json
    from ..kernels.aot import arg_type
    doc = dict(kernel=call.kernel.__name__,
               args=[[n, arg_type(v), None if torch.is_tensor(v) else v]
                     for n, v in zip(call.kernel.arg_names, call.args)],
               constexprs={k: list(v) if isinstance(v, tuple) else v for k, v in sorted(call.constexprs.items())
                           if k not in TILE_CONSTEXPRS})
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:32]


def lower_once(members, plan, tensors, pl, pin: dict, tf32: bool = False, copy=None):
    """(KernelCall, rows_per_sample, block) of one group (or, with copy=(src, dst, axis, start), one
    concat-copy) on the placements `pl` with the launcher keywords `pin`. The tuner (tune.py) calls
    it with placements on a real arena; lower_launch with meta placements."""
    if copy is not None:
        src, dst, axis, start = copy
        s = pl.meta(src)
        d = pl.meta(dst).narrow(axis, start, s.shape[axis])
        return _copy_call(s, d, pin, pl)
    return _lower_group(members, plan, tensors, pl, pin, tf32)


def lower_launch(name, members, plan, tensors, step, copy=None, tf32: bool = False, blocks: str = "cuda",
                 tuning: dict | None = None) -> Launch:
    """Lower one group (or, with copy=(src, dst, axis, start), one concat-copy) to a Launch.
    blocks: "cuda" (the launchers' own tile sizes, what the .so runs) or "large" (large_tiles()).
    tuning: {tuning key: launcher keywords} (tune.py): a specialization found there is lowered with
    the tuned tiles, warps and stages instead of the launcher's defaults."""
    B = plan.batch
    results = []
    pin: dict = {}
    tuned = False
    if blocks not in BLOCK_POLICIES:
        raise ValueError(f"unknown block policy {blocks!r} (one of {', '.join(BLOCK_POLICIES)})")
    first_decides = blocks == "large" or bool(tuning)
    sizes = (B, B, B + 1) if first_decides else (B, B + 1)
    for i, b in enumerate(sizes):
        pl = _Placements(plan, b)
        try:
            call, ps, blk = lower_once(members, plan, tensors, pl, pin, tf32, copy)
        except (ValueError, TypeError) as e:
            layer = members[0].attrs.get("name")
            why = f"cannot lower layer '{layer}' ({members[0].name}) to a kernel: {e}"
            if tuned:
                why += " (with the tuning file's configuration for it)"
            raise CodegenError(why, members[0].loc) from None
        results.append((call, ps, blk, pl))
        pin = _pin_of(call)
        if first_decides and i == 0:
            if blocks == "large":
                pin.update(large_tiles(call))
            else:
                cfg = tuning.get(tuning_key(call))
                if cfg:
                    pin = dict(cfg)
                    tuned = True
            results.pop()
    (c0, ps, blk, p0), (c1, ps1, _, p1) = results
    if c0.constexprs != c1.constexprs or c0.kernel is not c1.kernel:
        raise AssertionError(f"{name}: the specialization changed with the batch")
    args = []
    from ..kernels.aot import arg_type
    for v0, v1 in zip(c0.args, c1.args):
        if torch.is_tensor(v0):
            r0, r1 = p0.decode(v0), p1.decode(v1)
            if r0 != r1:
                raise AssertionError(f"{name}: a pointer argument moved with the batch")
            args.append(Arg("ptr", *r0))
        elif isinstance(v0, float):
            if v0 != v1:
                raise AssertionError(f"{name}: a float argument changed with the batch")
            args.append(Arg("fp32", fval=v0))
        else:
            coeff = int(v1) - int(v0)
            args.append(Arg(arg_type(v0), coeff=coeff, const=int(v0) - coeff * B))
    q = c0.constexprs[blk] if isinstance(blk, str) else (blk or 1)   # a constexpr's name, or a number
    cd = lambda a, b: -(-a // b)  # noqa: E731
    r = c0.grid[0] // cd(ps * B, q)
    for b, c in ((B, c0), (B + 1, c1)):
        if cd(ps * b, q) * r != c.grid[0] or tuple(c.grid[1:]) != tuple(c0.grid[1:]):
            raise AssertionError(f"{name}: grid {c.grid} at batch {b} is not cdiv({ps}*b, {q})*{r}")
    grid = ((ps, q, r),) + tuple(c0.grid[1:]) + (1,) * (3 - len(c0.grid))
    key = (c0.kernel.__module__, c0.kernel.__name__, tuple((n, a.kind if a.kind != "ptr" else
                                                             _ptr_type(v)) for n, a, v in
                                                            zip(c0.kernel.arg_names, args, c0.args)),
           tuple(sorted((k, _freeze(v)) for k, v in c0.constexprs.items())), tuple(sorted(c0.options.items())))
    launch = Launch(name, [m.attrs.get("name") for m in members], step, c0, args, grid, key)
    launch.tuned = tuned
    launch.source = (members, copy)        # what the tuner re-lowers (tune.py)
    return launch


def _p2(n: int, lo: int, hi: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return max(lo, min(hi, p))


def large_tiles(call) -> dict:
    """Launcher keywords pinning large tiles for `call`'s kernel (the "large" block policy).

    Triton's interpreter pays a fixed Python cost per program and per loop iteration (about a
    millisecond: every op is a NumPy call, every nested @triton.jit call re-patches builtins),
    while the work inside a tile is one vectorized NumPy operation. So under the interpreter,
    tiles as large as the problem (capped to keep a tile in tens of MiB) run a network 10-100x
    faster than the GPU-sized ones. The kernel code is the same; only its block constexprs differ
    (masks still cover the ragged edges), so this is a specialization a GPU could run too, just
    not a fast one."""
    a = dict(zip(call.kernel.arg_names, call.args))
    k = call.constexprs
    name = call.kernel.__name__
    if name == "gemm_kernel":
        return dict(block_m=_p2(a["M"], 16, 256), block_n=_p2(a["N"], 16, 512), block_k=_p2(a["K"], 16, 512))
    if name == "conv2d_kernel":
        m = a["NB"] * a["OH"] * a["OW"]
        kk = k["KH"] * k["KW"] * a["CI"] if k["FLAT_K"] else a["CI"]
        bn = _p2(a["CO"], 16, 512)
        bk = _p2(kk, 16, 512)
        return dict(block_m=_p2(m, 16, max(16, 2 ** 17 // max(bn, bk))), block_n=bn, block_k=bk)
    if name in ("pool2d_kernel", "lrn_kernel"):
        c = a["C"]
        p = a["NB"] * a["OH"] * a["OW"] if name == "pool2d_kernel" else a["P"]
        bc = _p2(c, 1, 1024)
        return dict(block_c=bc, block_p=_p2(p, 1, max(1, 2 ** 16 // bc)))
    if name == "elementwise_kernel":
        return dict(block=_p2(a["NUMEL"], 1, 2 ** 18))
    return {}


def _ptr_type(v):
    from ..kernels.aot import arg_type
    return arg_type(v)


def _freeze(v):
    return tuple(_freeze(x) for x in v) if isinstance(v, (list, tuple)) else v


# --------------------------------------------------------------------------- groups vs the plan

def _footprint(plan, t):
    """(class, buffer, lo, hi): per-sample byte range of t inside its buffer (whole buffer for lo/hi
    comparisons across buffers)."""
    fshape = t.feature_shape
    fstr = t.strides if t.strides is not None else row_major(fshape)
    extent = (sum((n - 1) * s for n, s in zip(fshape, fstr)) + 1) * t.itemsize if all(fshape) else 0
    return t.cls, t.buffer, t.offset, t.offset + extent


def _overlap(plan, a, b) -> bool:
    ca, ba, la, ha = _footprint(plan, a)
    cb, bb, lb, hb = _footprint(plan, b)
    if ca != cb:
        return False
    if ba == bb:
        return la < hb and lb < ha
    A, Bf = plan.buffers[ba], plan.buffers[bb]
    return A.offset < Bf.offset + max(Bf.size, 1) and Bf.offset < A.offset + max(A.size, 1)


def _same_place(a, b) -> bool:
    return (a.buffer, a.offset, a.strides, a.feature_shape) == (b.buffer, b.offset, b.strides, b.feature_shape)


def check_group(members, plan, tensors, step_of, steps) -> str | None:
    """Why running `members` as one kernel at the step of the last one breaks the plan, or None."""
    if len(members) == 1:
        return None
    names = {m.attrs.get("name") for m in members}
    s_last = max(step_of[n] for n in names)
    inside = {id(m.results[0]) for m in members}
    out = tensors[_vname(members[-1].results[0])]
    # members that read at exactly the output's index (the planner's in-place rule, from OpDef
    # flags): any other read -- a conv's window -- must not meet the output's bytes
    aligned = output_aligned_members([lookup(m.name) for m in members], [[id(v) for v in m.operands] for m in members],
                                     [[id(r) for r in m.results] for m in members])
    for m, m_aligned in zip(members, aligned):
        for i, v in enumerate(m.operands):
            if id(v) in inside:
                continue
            t = tensors[_vname(v)]
            r = step_of[m.attrs.get("name")]
            # the bytes must survive every step between the read the plan assumed and the kernel
            for st in steps[r:s_last - 1]:
                if names.intersection(st.layers) or st.action == "alias":
                    continue
                for w in st.writes:
                    if _overlap(plan, plan.tensors[w], t):
                        return f"'{st.layer}' overwrites '{t.name}' before the fused kernel reads it"
            window_read = not m_aligned
            if _overlap(plan, out, t) and (window_read or not _same_place(out, t)):
                return f"the output '{out.name}' overlaps the operand '{t.name}'"
    return None


def opaque_diagnostics(ops) -> list:
    """One error per opaque layer (all of them at once): netc does not know what it computes."""
    from ..diagnostics import Diagnostic
    out = []
    energy = [op for op in ops if op.attrs.get("energy_model")]
    for op in energy:
        name, kind = op.attrs.get("name"), op.attrs.get("type", "?")
        hid = op.attrs.get("hidden")
        hid = ", ".join(f"'{h}'" for h in (hid if isinstance(hid, list) else [hid] if hid else []))
        out.append(Diagnostic("error", f"'{name}' ({kind}) is the visible layer of an energy model (RBM"
                                       + (f", hidden {hid}" if hid else "") + "): compiling energy models to kernels "
                                       "is not supported yet", op.loc, width=len(name or "x")))
        out[-1].note("`netc explain` shows the visible -> hidden direction (shapes, parameters, costs)")
    ops = [op for op in ops if not op.attrs.get("energy_model")]
    if not ops:
        return out
    for op in ops:
        name, kind = op.attrs.get("name"), op.attrs.get("type", "?")
        out.append(Diagnostic("error", f"layer '{name}' has type '{kind}', unknown to netc (an opaque pass-through, "
                                       f"Paleo's Generic layer): netc cannot execute it faithfully", op.loc,
                              width=len(name or "x")))
    out[-1].note(f"--opaque-as-identity runs {'these layers' if len(out) > 1 else 'it'} as the identity (with a "
                 f"warning), if that is what you want")
    return out


def lower_network(module, net, plan, blocks: str = "cuda", tuning: dict | None = None) -> Lowered:
    """Every kernel launch of one planned network, in schedule order. blocks: the tile policy
    ("cuda": the .so's; "large": large_tiles(), for Triton's interpreter). tuning: tuned launcher
    keywords by tuning key (tune.load_tuning), for the "cuda" policy."""
    body = [op for op in net.regions[0].ops if op.name not in STRUCTURAL_OPS and op.name != "netc.input"]
    tensors = {t.name: t for t in plan.tensors}
    step_of = {n: s.index for s in plan.steps for n in s.layers}
    steps = plan.steps
    tf32 = bool((net.attrs.get("netc.precision") or {}).get("tf32", False))
    opaque = [op for op in body if op.name == "netc.opaque"]
    if opaque:
        raise CodegenError(opaque_diagnostics(opaque))
    for op in body:
        if op.name in NO_KERNEL:
            raise CodegenError(f"layer '{op.attrs.get('name')}' ({op.name}, {NO_KERNEL[op.name]}) has no CUDA "
                               f"kernel in netc yet", op.loc)
        if not_runnable(op):
            raise CodegenError(not_runnable(op), op.loc)
    groups: dict[str, list] = {}
    for op in body:
        g = op.attrs.get("fusion_group") or f"op:{op.attrs.get('name')}"
        groups.setdefault(g, []).append(op)
    out = Lowered()
    final = []
    # A plan made with fusion (plan.fusion) runs each group as one step: its operands live until
    # then and its result may overlap only operands read at the output's index, so there is
    # nothing to split; check_group stays as a safety net whose finding is a bug in netc. A plan
    # made op by op (fusion="none") keeps each op's own lifetimes: groups are checked against it
    # and split where running them as one kernel would read bytes the plan has reused.
    todo = [] if plan.fusion else list(groups.items())
    for g, members in (groups.items() if plan.fusion else ()):
        names = [m.attrs.get("name") for m in members]
        st = steps[step_of[names[-1]] - 1]
        if st.layers != names:
            raise AssertionError(f"internal error: fusion group {g} ({', '.join(names)}) is not one step of the "
                                 f"memory plan (step {st.index} runs {', '.join(st.layers)}); plan after fusing")
        why = check_group(members, plan, tensors, step_of, steps)
        if why is not None:
            raise AssertionError(f"internal error: the memory plan breaks fusion group {g}: {why}")
        final.append((g, members))
    while todo:
        g, members = todo.pop(0)
        # the longest prefix that is safe to run as one kernel; the rest becomes a pointwise chain
        for cut in range(len(members), 0, -1):
            why = check_group(members[:cut], plan, tensors, step_of, steps)
            if why is None:
                break
            reason = why
        final.append((g, members[:cut]))
        if cut < len(members):
            out.splits.append(f"group {g} ({', '.join(m.attrs.get('name') for m in members)}) split before "
                              f"'{members[cut].attrs.get('name')}': {reason}")
            todo.insert(0, (g + "'", members[cut:]))
    by_step = {}
    for g, members in final:
        s = max(step_of[m.attrs.get("name")] for m in members)
        by_step[s] = (g, members)
    for st in steps:
        if st.index not in by_step:
            continue
        g, members = by_step[st.index]
        op = members[0]
        if st.action == "alias":
            continue
        if op.name == "netc.concat":
            dst = plan.tensors[st.writes[0]]
            axis = (op.attrs.get("dim", -1) % len(dst.shape))
            start = 0
            for v in op.operands:
                src = tensors[_vname(v)]
                if src.id in st.copies:
                    out.launches.append(lower_launch(f"{g}:{src.name}", members, plan, tensors, st.index, blocks=blocks,
                                                     copy=(src, dst, axis, start), tuning=tuning))
                start += src.shape[axis]
            continue
        out.launches.append(lower_launch(g, members, plan, tensors, st.index, tf32=tf32, blocks=blocks, tuning=tuning))
    return out
