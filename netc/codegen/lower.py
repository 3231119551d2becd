"""Fusion groups + memory plan -> launches: one resolved kernel specialization (or a few) per group.

Which kernel a group becomes is the lowering table's business (netc/kernels/lowering.py, keyed by
IR op name): this module asks the table for the entry of the group's first op (its anchor) and
never looks at op names itself. What it adds is the placement of every tensor, the batch, and the
launch recipes the C launcher (launcher.py) and the interpreter (runtime/interp.py) replay.

How a group is lowered without a GPU, without memory and without running anything (the meta-tensor
trick). The table's entry calls an ordinary launcher of netc/kernels (say conv2d(x, w, bias, out=y,
launch=False)) exactly as a user would with real CUDA tensors, and the launcher does its usual
checks, stride arithmetic and block-size choices and returns a KernelCall: the kernel, its grid,
its argument values and constexprs. The tensors it is given are *meta tensors* (torch's
device="meta": shape, strides and dtype, no storage), one per plan placement, and each is an
as_strided view of one huge meta storage whose storage offset says which placement it stands for
(placement id << ID_SHIFT). A view the launcher takes itself (a channel slice, a transpose, a
reshape) keeps that offset plus its own element offset. So every tensor argument of the
resulting KernelCall decodes back to (arena region, bytes per sample, constant bytes): its address
at run time is base[region] + coeff * b + const at batch b (memory/plan.py: a batch buffer at
offset * b, sample s at offset * b + s * size, plus the tensor's offset). Integer arguments that
depend on the batch (NB, M, NUMEL, ...) are affine in b: each group is lowered at the compiled
batch B and at B + 1 with the first lowering's tiles pinned (PIN_KWARGS), and the difference gives
the coefficient. The grid's first axis is cdiv(rows_per_sample * b, block) * R (the entry says
rows_per_sample and which constexpr is the block, or FIXED_GRID for a grid that does not depend on
the batch); the other axes are constants. A scratch tensor the launcher allocated itself has no
placement and is refused, so entries hand launchers the workspace (ctx.workspace) and embedded
tables (ctx.constant) instead, which decode to the WORKSPACE and DATA regions.

A group runs at the schedule step of its last op. A plan made with fusion has that step for the
whole group (memory/plan.py), so check_group only guards it (a finding is an internal error); on a
plan made op by op, check_group finds where running a group there would read bytes the plan has
reused, and lower_network splits the group there.
"""
from __future__ import annotations

import dataclasses

import torch

from ..diagnostics import NetcError
from ..ir.core import DTYPES, STRUCTURAL_OPS
from ..kernels.lowering import (FIXED_GRID, INTERPRETER_TILES, PIN_KWARGS, PIN_OPTIONS, TILE_CONSTEXPRS,  # noqa: F401
                               LowerContext, copy_spec, lowering_of, no_kernel)
from ..memory.graph import output_aligned_members
from ..memory.model import BATCH, CONSTANT, row_major
from ..ops import lookup
from ..ops.registry import not_runnable

from .recipes import (BATCH_ARENA, CONST_ARENA, DATA, NULL, WORKSPACE, Arg, ArenaLayout,  # noqa: F401
                      CommPoint, Launch, Lowered, Place, is_comm, is_rank_program)
ID_SHIFT = 36
TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
                "i32": torch.int32, "i64": torch.int64, "i8": torch.int8}   # integers: labels
# tile policies: "cuda", the launchers' own (what the .so runs); "large", large_tiles() (the interpreter)
BLOCK_POLICIES = ("cuda", "large")


class CodegenError(NetcError):
    pass


# --------------------------------------------------------------------------- meta placements

class _Shared:
    """What the lowerings of one network add to their program besides launches: the bytes of the
    DATA region (deduplicated: the same table at batch B and B + 1 is one placement) and the size
    of the WORKSPACE region."""

    def __init__(self):
        self.data = bytearray()
        self.offsets: dict = {}
        self.workspace = 0

    def place(self, raw: bytes) -> int:
        if raw not in self.offsets:
            self.data.extend(b"\0" * (-len(self.data) % 16))
            self.offsets[raw] = len(self.data)
            self.data.extend(raw)
        return self.offsets[raw]


class _Placements:
    def __init__(self, plan, batch, layout: ArenaLayout | None = None, shared: _Shared | None = None):
        self.plan, self.batch = plan, batch
        self.layout = layout or ArenaLayout()
        self.params = self.layout.param_offsets()
        self.private = dict(self.layout.private)
        self.shared = shared if shared is not None else _Shared()
        self.base = {}
        self.regions = {0: (NULL, 0, 0)}
        self.by_tensor = {}

    def _view(self, dt, shape, strides, info):
        if dt not in self.base:
            self.base[dt] = torch.empty(2 ** 58, dtype=dt, device="meta")
        k = len(self.regions)
        self.regions[k] = info
        return self.base[dt].as_strided(shape, strides, k << ID_SHIFT)

    def at(self, region: int, offset: int, shape, dtype: str):
        """A dense tensor of `shape` and IR dtype at `offset` bytes into `region` (constant class)."""
        shape = tuple(shape)
        return self._view(TORCH_DTYPES[dtype], shape, row_major(shape), (region, 0, offset))

    def workspace(self, numel: int, dtype=torch.float32):
        """fp32 scratch at the start of the WORKSPACE region (shared by every group)."""
        numel = max(int(numel), 1)
        self.shared.workspace = max(self.shared.workspace, numel * torch.empty((), dtype=dtype).element_size())
        return self._view(dtype, (numel,), (1,), (WORKSPACE, 0, 0))

    def constant(self, t: torch.Tensor):
        """A placement in the DATA region holding the bytes of the (CPU) tensor t."""
        t = t.detach().cpu().contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes()
        off = self.shared.place(raw)
        return self._view(t.dtype, tuple(t.shape), tuple(t.stride()), (DATA, 0, off))

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
        lay = self.layout
        if t.cls == BATCH:
            shape = (self.batch,) + tuple(fshape)
            strides = (buf.size // t.itemsize,) + tuple(fstr)
            info = (lay.batch_region, buf.offset, t.offset)
        elif t.cls == CONSTANT:
            shape, strides = tuple(fshape), tuple(fstr)
            if t.kind == "param" and t.name[1:] in self.private:
                info = (lay.const_region, 0, self.private[t.name[1:]])
            elif self.params is not None and t.kind == "param":
                if t.name[1:] not in self.params:
                    raise CodegenError(f"parameter '{t.name[1:]}' of the forward program is not in the training "
                                       f"program (a layer of another phase?): the library cannot share it")
                info = (CONST_ARENA, 0, self.params[t.name[1:]])
            else:
                info = (lay.const_region, 0, buf.offset + t.offset - lay.const_shift)
        else:
            raise CodegenError(f"tensor '{t.name}' is time-sized; the CUDA target has no recurrent ops yet")
        m = self._view(dt, shape, strides, info)
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

def flat_rows(m: torch.Tensor, name: str) -> torch.Tensor:
    """A view [b, B, ...] of a TensorPlan with `flat` as the IR's [b*B, ...] rows (evenly spaced: its buffer's
    per-sample pitch is its own B rows, memory/plan.py: one buffer per alias tree)."""
    try:
        return m.view((m.shape[0] * m.shape[1],) + tuple(m.shape[2:]))
    except RuntimeError:
        raise CodegenError(f"'{name}' (a sequence's steps flattened, [T*B, ...]) is not placed as evenly spaced "
                           f"rows (strides {m.stride()})") from None


class _GroupContext(LowerContext):
    """What a lowering-table entry sees of a group (kernels/lowering.py LowerContext): IR values and
    parameters as the tensors standing for their placements in `pl`."""

    def __init__(self, members, tensors, pl, pin: dict, tf32: bool, prologue=None):
        self.tensors, self.pl, self.pin, self.tf32 = tensors, pl, pin, tf32
        self.batch = pl.batch
        self.prologue, self.instead = {}, {}
        if prologue is not None:
            entry, op = prologue
            kw, v = entry.prologue(self, op)
            self.prologue = kw
            self.instead[id(op.results[0])] = v
        last = members[-1]
        self.out = self.value(last.results[0]) if last.results else None

    def value(self, v):
        v = self.instead.get(id(v), v)      # a prologue's result: the anchor reads its input instead
        t = self.tensors[_vname(v)]
        m = self.pl.meta(t)
        if t.flat:      # a sequence's steps flattened, [T*B, ...], planned as [T, B, ...] (memory/graph.py)
            return flat_rows(m, t.name)
        return m

    def param(self, op, role):
        return self.pl.meta(self.tensors["@" + op.attrs["params"][role].name])

    def workspace(self, numel: int):
        return self.pl.workspace(numel)

    def constant(self, t):
        return self.pl.constant(t)

    def is_scratch(self, t) -> bool:
        return (t.storage_offset() >> ID_SHIFT) == 0 and t.numel() > 1


def _lower_group(members, plan, tensors, pl: _Placements, pin: dict, tf32: bool = False) -> list:
    """[(KernelCall, rows_per_sample, block)] of a group, by its anchor's entry in the lowering
    table (one per kernel, in launch order): the grid's first axis is cdiv(rows_per_sample * b,
    block) * R, block the value of the constexpr so named, a number, None (1) or FIXED_GRID (a
    grid that does not depend on the batch). tf32: how f32 matrix products are computed (f32_products:
    False, True for TF32 or "tf32x3"; the network's netc.precision, from set-dtype)."""
    prologue = None
    first = lowering_of(members[0].name)
    if len(members) > 1 and first is not None and first.prologue is not None:
        prologue, members = (first, members[0]), members[1:]     # the fuse pass's prologue group
    entry = lowering_of(members[0].name)
    if entry is None or entry.lower is None:
        raise AssertionError(f"{members[0].name}: no lowering (checked by lower_network)")
    out = entry.lower(_GroupContext(members, tensors, pl, pin, tf32, prologue), members)
    return [tuple(s) for s in out] if isinstance(out, list) else [tuple(out)]


def _vname(v):
    n = v.owner.attrs.get("name") or v.owner.name
    return n if len(v.owner.results) == 1 else f"{n}#{v.index}"


def pin_of(call, *more) -> dict:
    """Launcher keywords that reproduce `call`'s tiles (and those of the group's later kernels,
    where the first does not set them)."""
    pin = {}
    for c in (call,) + more:
        for k, v in c.constexprs.items():
            if k in PIN_KWARGS:
                pin.setdefault(PIN_KWARGS[k], v)
        if c is call:
            pin.update({k: v for k, v in c.options.items() if k in PIN_OPTIONS})
    return pin


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


def lower_calls(members, plan, tensors, pl, pin: dict, tf32: bool = False, copy=None) -> list:
    """[(KernelCall, rows_per_sample, block)] of one group (or, with copy=(src, dst, axis, start),
    one concat-copy; with copy a callable (placements, pin) -> KernelSpecs: a prologue's kernels)
    on the placements `pl` with the launcher keywords `pin`."""
    if callable(copy):
        return [tuple(k) for k in copy(pl, pin)]
    if copy is not None:
        src, dst, axis, start = copy
        s = pl.meta(src)
        d = pl.meta(dst).narrow(axis, start, s.shape[axis])
        return [tuple(copy_spec(_CopyContext(pl, pin), s, d))]
    return _lower_group(members, plan, tensors, pl, pin, tf32)


def main_call(specs) -> object:
    """The KernelCall of a group's kernels (KernelSpecs) whose tiles, tuning key and pin are the
    group's: the first that is not a setup kernel (KernelCall.setup: a filter's K-major copy)."""
    return next((s[0] for s in specs if not getattr(s[0], "setup", False)), specs[0][0])


def fold_context(derive, op, mine: dict, need: dict, trained: dict):
    """A prologue's fn(placements, pin) for lower_launch: `derive` (a lowering-table entry's) on the
    op's own parameters (`mine`: role -> name, the program's plan tensors) and the training program's
    tensors it derives them from (`need`: key -> name; `trained`: name -> (offset in the constant
    arena, shape, dtype))."""
    def fn(pl, pin):
        ctx = _CopyContext(pl, pin)
        tensors = {t.name: t for t in pl.plan.tensors}
        own = {role: pl.meta(tensors["@" + n]) for role, n in mine.items()}
        src = {k: pl.at(CONST_ARENA, *trained[n]) for k, n in need.items()}
        return derive(ctx, op, own, src)
    return fn


class _CopyContext(LowerContext):
    """The context of a copy or a prologue: no group, the placements' workspace and data."""

    def __init__(self, pl, pin):
        self.batch, self.pin, self.tf32, self.out = pl.batch, pin, False, None
        self.pl = pl

    def workspace(self, numel: int):
        return self.pl.workspace(numel)

    def constant(self, t):
        return self.pl.constant(t)


def lower_launch(name, members, plan, tensors, step, copy=None, tf32: bool = False, blocks: str = "cuda",
                 tuning: dict | None = None, layout: ArenaLayout | None = None,
                 shared: _Shared | None = None, fixed: bool = False) -> list:
    """Lower one group (or, with copy=(src, dst, axis, start), one concat-copy) to its Launches (one
    per kernel: a group may take several, e.g. a two-stage reduction). blocks: "cuda" (the
    launchers' own tile sizes, what the .so runs) or "large" (large_tiles()). tuning: {tuning key:
    launcher keywords} (tune.py): a specialization found there is lowered with the tuned tiles,
    warps and stages instead of the launcher's defaults. shared: where the group's constant data
    and workspace go (one per program). fixed: the launch runs at the compiled batch only (a rank's
    program: its shapes are the partition's, some batch-sized, some not), so it is lowered at that
    batch alone and its integers carry no per-sample coefficient."""
    B = plan.batch
    results = []
    pin: dict = {}
    tuned = False
    shared = shared if shared is not None else _Shared()
    if blocks not in BLOCK_POLICIES:
        raise ValueError(f"unknown block policy {blocks!r} (one of {', '.join(BLOCK_POLICIES)})")
    first_decides = blocks == "large" or bool(tuning)
    last = B if fixed else B + 1
    sizes = (B, B, last) if first_decides else (B, last)

    def lower_at(b, pin):
        pl = _Placements(plan, b, layout, shared)
        try:
            return lower_calls(members, plan, tensors, pl, pin, tf32, copy), pl
        except (ValueError, TypeError) as e:
            layer = members[0].attrs.get("name")
            why = f"cannot lower layer '{layer}' ({members[0].name}) to a kernel: {e}"
            if tuned:
                why += " (with the tuning file's configuration for it)"
            raise CodegenError(why, members[0].loc) from None

    for i, b in enumerate(sizes):
        used = pin
        specs, pl = lower_at(b, pin)
        results.append((specs, pl))
        main = main_call(specs)
        pin = pin_of(main, *[c for c, _, _ in specs if c is not main])
        if first_decides and i == 0:
            if blocks == "large":
                pin.update(large_tiles(main))
            else:
                cfg = tuning.get(tuning_key(main))
                if cfg:
                    pin = dict(cfg)
                    tuned = True
            results.pop()
    if not first_decides and _respecialized(results[0][0], results[1][0]):
        # The pin holds one value per launcher keyword, the first kernel's that sets it, so where a
        # launcher's kernels default one keyword to different values (batch_norm_grad: its column
        # sums' BLOCK_R and its rows kernel's) the pin does not reproduce the unpinned lowering.
        # The specialization is the pinned one: lower at B again with the pin B + 1 was lowered with.
        results[0] = lower_at(B, used)
    (s0, p0), (s1, p1) = results
    if len(s0) != len(s1):
        raise AssertionError(f"{name}: the number of kernels changed with the batch")
    # a group writing only unbatched tensors (the sum of a shared parameter's gradients, a batch
    # norm's statistics): its grid is the same at every batch, whatever rows per sample the entry
    # reckoned from the compiled batch (numel // batch: 0 for a vector shorter than the batch)
    if copy is None:
        written = [tensors.get(_vname(r)) for r in members[-1].results]
    elif callable(copy):
        written = [None]
    else:
        written = [copy[1]]
    unbatched = bool(written) and all(t is not None and t.cls == CONSTANT for t in written)
    out = []
    # the main kernel is part 0 (it carries the group's cost and name); the others count on from 1
    main = [c for c, _, _ in s0].index(main_call(s0))
    for i, ((c0, ps, blk), (c1, _, _)) in enumerate(zip(s0, s1)):
        part = 0 if i == main else i + (i < main)
        if fixed or unbatched:     # the grid as it is at the compiled batch: cdiv(1 * B, FIXED_GRID) * grid[0]
            ps, blk = 1, FIXED_GRID
        out.append(_launch(name if part == 0 else f"{name}+{part}", members, step, c0, c1, ps, blk, p0, p1, B))
        out[-1].part = part
        out[-1].tuned = tuned
        out[-1].source = (members, copy)        # what the tuner re-lowers (tune.py)
    return out


def _respecialized(s0, s1) -> bool:
    """Whether two lowerings of one group (lists of KernelSpecs) differ in a kernel or its constexprs."""
    return len(s0) != len(s1) or any(a[0].kernel is not b[0].kernel or a[0].constexprs != b[0].constexprs
                                     for a, b in zip(s0, s1))


def _launch(name, members, step, c0, c1, ps, blk, p0, p1, B) -> Launch:
    """One kernel's Launch from its calls at batch B (c0, placements p0) and B + 1 (c1, p1): pointer
    arguments decoded to their placements, integers affine in the batch, the grid's first axis
    cdiv(ps * b, block) * R."""
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
    c0 = dataclasses.replace(c0, aligned=tuple(i for i, a in enumerate(args) if multiple_of_16(a)),
                             divisible=vector_divisible(c0, args))
    key = (c0.kernel.__module__, c0.kernel.__name__, tuple((n, a.kind if a.kind != "ptr" else
                                                             _ptr_type(v)) for n, a, v in
                                                            zip(c0.kernel.arg_names, args, c0.args)),
           tuple(sorted((k, _freeze(v)) for k, v in c0.constexprs.items())), tuple(sorted(c0.options.items())),
           c0.aligned, c0.divisible)
    return Launch(name, [m.attrs.get("name") for m in members], step, c0, args, grid, key)


def multiple_of_16(a: Arg) -> bool:
    """Whether a lowered argument is a multiple of 16 at every batch b (coeff * b + const): an integer,
    or a pointer's byte address, every region's base being 16-byte aligned (launcher.generate_c checks
    the offsets; the arena itself comes from cuMemAlloc). Such arguments are compiled with Triton's
    divisibility hint (KernelCall.aligned), as its JIT would from the values."""
    return divisor_of(a) == 16


def vector_divisible(call, args) -> tuple:
    """KernelCall.divisible: (position, d) for the integer arguments that are multiples of d = 16 bytes over
    the kernel's narrowest float element (8 for bf16, 4 for f32) at every batch but not of 16: a row stride
    or a column count so is what lets Triton load 16 bytes at a time. No other divisors: each would be one
    more specialization (VGG-16's 56, 28 and 14-pixel layers would compile apart) for nothing."""
    sizes = [v.element_size() for v in call.args if torch.is_tensor(v) and v.is_floating_point()]
    if not sizes or 16 // min(sizes) not in (2, 4, 8):
        return ()
    d = 16 // min(sizes)
    return tuple((i, d) for i, a in enumerate(args) if a.kind in ("i32", "i64") and d <= divisor_of(a) < 16)


def divisor_of(a: Arg) -> int:
    """The largest of 1, 2, 4, 8 and 16 that divides a lowered integer or pointer argument at every batch b
    (both coeff and const; for a pointer, its byte address: regions are 16-byte aligned); 1 for the rest."""
    if a.kind not in ("ptr", "i32", "i64"):
        return 1
    d = 16
    while d > 1 and (a.coeff % d or a.const % d):
        d //= 2
    return d


def large_tiles(call) -> dict:
    """Launcher keywords pinning large tiles for `call`'s kernel (the "large" block policy; each
    kernel's rule is its INTERPRETER_TILES entry in kernels/lowering.py).

    Triton's interpreter pays a fixed Python cost per program and per loop iteration (about a
    millisecond: every op is a NumPy call, every nested @triton.jit call re-patches builtins),
    while the work inside a tile is one vectorized NumPy operation. So under the interpreter,
    tiles as large as the problem (capped to keep a tile in tens of MiB) run a network 10-100x
    faster than the GPU-sized ones. The kernel code is the same; only its block constexprs differ
    (masks still cover the ragged edges), so this is a specialization a GPU could run too, just
    not a fast one."""
    rule = INTERPRETER_TILES.get(call.kernel.__name__)
    return rule(call) if rule is not None else {}


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
    for op in ops:
        name, kind = op.attrs.get("name"), op.attrs.get("type", "?")
        out.append(Diagnostic("error", f"layer '{name}' has type '{kind}', unknown to netc (an opaque pass-through, "
                                       f"Paleo's Generic layer): netc cannot execute it faithfully", op.loc,
                              width=len(name or "x")))
    out[-1].note(f"--opaque-as-identity runs {'these layers' if len(out) > 1 else 'it'} as the identity (with a "
                 f"warning), if that is what you want")
    return out


def kernel_diagnostics(body, aliased=frozenset()) -> list:
    """One error per op that cannot run as a kernel (all of them at once): ops whose lowering-table
    entry says they have none (kernels/lowering.py no_kernel), unless the plan aliases them (a view,
    an identity: no kernel runs), and layers whose shape is only a bookkeeping number. A gradient op
    names the layer it differentiates; every op keeps its layer's source location."""
    from ..diagnostics import Diagnostic
    out = []
    for op in body:
        why = not_runnable(op)
        if why:
            out.append(Diagnostic("error", why, op.loc))
            continue
        name = op.attrs.get("name")
        if name in aliased:
            continue
        what = no_kernel(op)
        if what is None:
            continue
        of = op.attrs.get("grad_of")
        entry = lowering_of(op.name)
        if entry is not None and entry.missing:
            msg = f"layer '{name}' ({op.name}, {what}) has no CUDA kernel in netc yet"
        else:
            role = (f", the gradient of layer '{of}'" if of else
                    ", a training op" if getattr(lookup(op.name), "training_only", False) else "")
            msg = f"layer '{name}' ({op.name}{role}) has no CUDA kernel in netc yet: {what}"
        # the location is the layer's (a gradient op's: the layer it differentiates)
        under = of or (name if not getattr(lookup(op.name), "training_only", False) else None)
        out.append(Diagnostic("error", msg, op.loc, width=len(under) if under else 1))
    return out


def f32_products(net):
    """The kernels' allow_tf32 for a network's f32 matrix products, from its netc.precision (set-dtype):
    False (IEEE), True (TF32) or "tf32x3" (three TF32 products each)."""
    prec = net.attrs.get("netc.precision") or {}
    return "tf32x3" if prec.get("tf32x3") else bool(prec.get("tf32", False))


def lower_network(module, net, plan, blocks: str = "cuda", tuning: dict | None = None,
                  layout: ArenaLayout | None = None, prologue=()) -> Lowered:
    """Every kernel launch of one planned network, in schedule order. blocks: the tile policy
    ("cuda": the .so's; "large": large_tiles(), for Triton's interpreter). tuning: tuned launcher
    keywords by tuning key (tune.load_tuning), for the "cuda" policy. layout: the regions its
    tensors are addressed from (recipes.ArenaLayout; default: the plan's own arenas). prologue:
    kernels that run before the schedule, [(name, layer op, fn(placements, pin) -> KernelSpecs)]
    (a training library's forward: its batch norms folded from the running statistics).

    A rank's program (split-workers) is lowered at its compiled batch only (fixed_batch), and its
    communication ops get no kernel: each is a CommPoint between the launches before and after it
    (the segments, Lowered.segments()), with the places of its operands and results, and the
    network's outputs get their places too (Lowered.outputs): what the runtime reads and writes
    between segments. The plan must keep the program's order of communication ops
    (codegen.check_comm_order; codegen.plan_program plans so)."""
    every = [op for op in net.regions[0].ops if op.name not in STRUCTURAL_OPS and op.name != "netc.input"]
    comms = [op for op in every if is_comm(op)]
    body = [op for op in every if not is_comm(op)]
    fixed = is_rank_program(net)
    tensors = {t.name: t for t in plan.tensors}
    step_of = {n: s.index for s in plan.steps for n in s.layers}
    steps = plan.steps
    tf32 = f32_products(net)
    opaque = [op for op in body if getattr(lowering_of(op.name), "opaque", False)]
    if opaque:
        raise CodegenError(opaque_diagnostics(opaque))
    missing = kernel_diagnostics(body, {n for st in steps if st.action == "alias" for n in st.layers})
    if missing:
        raise CodegenError(missing)
    groups: dict[str, list] = {}
    for op in body:
        g = op.attrs.get("fusion_group") or f"op:{op.attrs.get('name')}"
        groups.setdefault(g, []).append(op)
    out = Lowered()
    shared = _Shared()
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
    out.fixed_batch = fixed
    for name, op, fn in prologue:
        for L in lower_launch(name, [op], plan, tensors, 0, copy=fn, blocks=blocks, layout=layout, shared=shared,
                              fixed=fixed):
            L.part = L.part + 1        # not the layer's own kernel: no cost of its own (codegen.manifest.launch_costs)
            out.launches.append(L)
    by_step = {}
    for g, members in final:
        s = max(step_of[m.attrs.get("name")] for m in members)
        by_step[s] = (g, members)
    comm_at = {step_of[op.attrs.get("name")]: op for op in comms}
    places = _Placements(plan, plan.batch, layout, shared) if comms or fixed else None
    for st in steps:
        if st.index in comm_at:
            out.comms.append(_comm_point(comm_at[st.index], st.index, len(out.launches), places, tensors))
            continue
        if st.index not in by_step:
            continue
        g, members = by_step[st.index]
        op = members[0]
        if st.action == "alias":
            continue
        if lowering_of(op.name).copies:      # a concatenation: the operands not written in place
            dst = plan.tensors[st.writes[0]]
            axis = (op.attrs.get("dim", -1) % len(dst.shape))
            if axis == 0 and comms and not fixed:
                raise CodegenError(f"concatenation '{op.attrs.get('name')}' joins parts of the batch (axis 0), which a "
                                   f"compiled network scaling its batch cannot place (a program split by samples in one "
                                   f"process: SINGA's partition_dim 0); run it on the reference executor, or on "
                                   f"K workers (netc run --workers K)", op.loc)
            start = 0
            for v in op.operands:
                src = tensors[_vname(v)]
                if src.id in st.copies:
                    out.launches.extend(lower_launch(f"{g}:{src.name}", members, plan, tensors, st.index, blocks=blocks,
                                                     copy=(src, dst, axis, start), tuning=tuning, layout=layout,
                                                     shared=shared, fixed=fixed))
                start += src.shape[axis]
            continue
        out.launches.extend(lower_launch(g, members, plan, tensors, st.index, tf32=tf32, blocks=blocks, tuning=tuning,
                                         layout=layout, shared=shared, fixed=fixed))
    if fixed:
        out.outputs = [_place(places, tensors[t.name]) for t in plan.tensors if t.output]
    out.data, out.workspace_bytes = bytes(shared.data), shared.workspace
    return out


def _place(pl: _Placements, t) -> Place:
    """The Place of plan tensor t (at pl's batch)."""
    m = pl.meta(t)
    region, coeff, const = pl.decode(m)
    return Place(t.name, region, coeff, const, tuple(m.shape), tuple(m.stride()), t.dtype)


def _comm_point(op, step: int, at: int, pl: _Placements, tensors) -> CommPoint:
    """A communication op of a rank's program as the runtime needs it: its attributes (what the
    registry declares, JSON values), the places of its operands and results, its bytes."""
    d = lookup(op.name)
    a = d.attrs_of(op)
    keep = {k: a[k] for k in ("peer", "ranks", "root", "dim", "index", "op", "bucket") if k in a and a[k] is not None}
    if "ranks" in keep:
        keep["ranks"] = [int(r) for r in keep["ranks"]]
    ins = [tuple(v.type.shape) for v in op.operands]
    out = tuple(op.results[0].type.shape)
    item = DTYPES[op.results[0].type.dtype]
    return CommPoint(at, step, op.name, op.attrs.get("name") or op.name, keep,
                     [_place(pl, tensors[_vname(v)]) for v in op.operands],
                     [_place(pl, tensors[_vname(r)]) for r in op.results],
                     int(d.comm_bytes(a, ins, out, item)), int(d.message_bytes(a, ins, out, item)))

