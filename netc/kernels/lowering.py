"""The lowering table: how each IR op becomes a kernel launch, keyed by IR op name.

Codegen (netc/codegen/lower.py) lowers one fusion group (netc/passes/fuse.py) at a time and never
looks at an op's name: it asks this table. The group's first op, its *anchor*, has an entry whose
`lower` builds the group's KernelCall by calling one launcher of this package with launch=False;
the group's other members are folded in by their own entries: `epilogue` folds a member into a
GEMM anchor's fused epilogue (a folded batch norm, a residual add, an activation), `chain` turns
a member into steps of an elementwise chain (and, after a data gradient, an activation gradient of
the layer below into that kernel's store). A group may also start with a *prologue*: a member
before the anchor whose entry has `prologue` (an activation gradient before a gradient GEMM, the
fuse pass's prologue groups): its result is never stored, the anchor reads the prologue's input
in its place (ctx.value of the prologue's result gives that input's tensor) and passes
ctx.prologue, the prologue's launcher keywords, to its launcher. So adding a kernel-backed op is its OpDef
(netc/ops/), its kernel and launcher (here, in netc/kernels/) and one entry below.

An entry's functions see the group through a LowerContext (codegen implements it):

    ctx.value(v)        the tensor standing for IR value v, where the memory plan puts it
    ctx.param(op, role) the tensor of the parameter (or optimizer state) `op` binds to `role`
    ctx.out             the group's result (the last member's first result; None for an update)
    ctx.batch           the batch the group is lowered at
    ctx.pin             launcher keywords that pin a specialization (tiles, warps, stages): pass
                        them through to the launcher as **ctx.pin
    ctx.tf32            how f32 matrix products are computed: False (IEEE), True (TF32) or "tf32x3" (the
                        network's precision; the launchers' allow_tf32)
    ctx.workspace(n)    n fp32 elements of scratch (the partial sums of a two-stage reduction)
    ctx.constant(t)     the tensor standing for a copy of CPU tensor t embedded in the library
                        (a multi-tensor update's chunk table)
    ctx.is_scratch(t)   whether t is a tensor the launcher allocated itself (no placement)
    ctx.prologue        launcher keywords of the group's prologue ({} without one): an anchor
                        entry that takes a prologue passes them on (**ctx.prologue)

and returns a KernelSpec (or a list of them, one per kernel, launched in order): the KernelCall,
and how its grid's first axis grows with the batch b, cdiv(rows_per_sample * b, block) * R, `block` the name of the constexpr holding the block size, a
number, or FIXED_GRID for a grid that does not depend on the batch (a loss reduced by one
program, a weight gradient or an update: R programs at every batch). The tensors are codegen's
(meta tensors standing for plan placements, or views of a real arena when tuning): an entry must
pass the context's tensors (or views of them: reshape, transpose, narrow) to its launcher, never
copies, so that every pointer argument can be traced back to its placement.

Other facts codegen reads here: `copies` (a concatenation: one copy kernel per operand the memory
plan did not place in its slice), `labels` (the operand read as class labels: random inputs for it
are class indices), `missing` (what an op without a kernel is, for the error), `opaque` (what the
op computes is unknown), `unsupported(op)` (why one form of an op has no kernel yet), and, per
kernel, INTERPRETER_TILES (large tiles for Triton's interpreter) and PIN_KWARGS (which constexpr
each launcher keyword sets).

The launchers are imported when an entry runs, not when this table is read: a warm `netc compile`
(codegen/lowering_cache.py) reads the table's facts without importing torch or Triton.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .energy_lowering import ENERGY_LOWERINGS, contiguous_weight, weight_as_read
from .recurrent_lowering import RECURRENT_LOWERINGS
from .rnn_lowering import RNN_LOWERINGS
from .sequence_lowering import SEQUENCE_LOWERINGS
from .clip_lowering import CLIP_LOWERINGS
from .depthwise_lowering import DEPTHWISE_LOWERINGS
from .seq_mask_lowering import SEQ_MASK_LOWERINGS
from .seq_reverse_lowering import SEQ_REVERSE_LOWERINGS
from .channel_permute_lowering import CHANNEL_PERMUTE_LOWERINGS
from .interpreter_tiles import INTERPRETER_TILES  # noqa: F401  (re-exported: codegen/lower.py)
from .spec import (FIXED_GRID, KernelSpec, call_args, op_attrs, pinned, pow2_between,  # noqa: F401  (the table's
                   row_factor, single_member)                                            # vocabulary: spec.py)

# constexpr -> the launcher keyword that sets it: codegen pins a specialization with these when it
# lowers a group again at another batch (and tuning files hold these keywords)
PIN_KWARGS = {"BLOCK_M": "block_m", "BLOCK_N": "block_n", "BLOCK_K": "block_k", "GROUP_M": "group_m",
              "FLAT_K": "flat_k", "BLOCK": "block", "BLOCK_P": "block_p", "BLOCK_C": "block_c",
              "BLOCK_R": "block_r", "SPLIT": "split", "FLAT": "flat"}
# launch options a pin carries too (so a tuned num_warps/num_stages survives re-lowering at batch B+1)
PIN_OPTIONS = ("num_warps", "num_stages")
# constexprs that are tiles (what tuning chooses), not part of what a specialization computes
TILE_CONSTEXPRS = {"BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "BLOCK", "BLOCK_P", "BLOCK_C", "BLOCK_R", "SPLIT"}


@dataclass(frozen=True)
class Lowering:
    lower: Callable | None = None        # (ctx, members) -> KernelSpec: a group anchored by this op
    epilogue: Callable | None = None     # (ctx, op, prev, kw): fold op into a GEMM anchor's epilogue keywords
    chain: Callable | None = None        # (ctx, op, others) -> [chain ops]: op as steps of an elementwise chain
    prologue: Callable | None = None     # (ctx, op) -> (launcher keywords, IR value): op as the prologue of the
    #                                      group's anchor, which reads the value where it read op's result
    copies: bool = False                 # a concatenation: copies of the operands not written in place
    labels: int | None = None            # operand index read as class labels
    missing: str = ""                    # no kernel: what the op is (for the error)
    opaque: bool = False                 # what the op computes is unknown (reported as such)
    unsupported: Callable | None = None  # op -> why this form of the op has no kernel yet, or None
    # In a training library's forward (the inference program beside the training step), parameters
    # that are not the training program's but derived from them: trained(op) -> ({role: its own
    # parameter}, {key: training program symbol}) and derive(ctx, op, own {role: tensor}, trained
    # {key: tensor}) -> KernelSpecs run before the forward (batch norm: folded running statistics)
    trained: Callable | None = None
    derive: Callable | None = None


class LowerContext:
    """What an entry sees of a group (codegen/lower.py subclasses it; see the module docstring)."""
    batch: int
    pin: dict
    tf32: bool | str
    out: object
    prologue: dict = {}

    def value(self, v):
        raise NotImplementedError

    def param(self, op, role):
        raise NotImplementedError

    def workspace(self, numel: int):
        raise NotImplementedError

    def constant(self, t):
        raise NotImplementedError

    def is_scratch(self, t) -> bool:
        raise NotImplementedError


# --------------------------------------------------------------------------- shared pieces

def _calls(out) -> list:
    return list(out) if isinstance(out, (list, tuple)) else [out]


def with_workspace(ctx, fn, *args, **kw) -> list:
    """The KernelCalls of launcher `fn` (launch=False), with its scratch in the context's workspace:
    called once to learn how much scratch it allocates for itself (its split decides), then again
    with that much of the workspace and the same split."""
    kw = {**pinned(fn, ctx), **kw}
    calls = _calls(fn(*args, launch=False, **kw))
    need = max((a.numel() for c in calls for a in c.args if _is_tensor(a) and ctx.is_scratch(a)), default=0)
    if not need:
        return calls
    split = calls[0].constexprs.get("SPLIT")
    if split is not None:
        kw["split"] = split
    return _calls(fn(*args, launch=False, workspace=ctx.workspace(need), **kw))


def _is_tensor(a) -> bool:
    import torch
    return torch.is_tensor(a)


def _fixed(calls) -> list:
    """KernelSpecs of calls whose grids do not depend on the batch."""
    return [KernelSpec(c, 1, FIXED_GRID) for c in calls]


def _rows(t, batch) -> int:
    """Rows of [.., C] per sample: t's elements over its channels and the batch."""
    c = t.shape[-1] if t.dim() else 1
    return t.numel() // max(c, 1) // batch


def activation_of(op) -> tuple:
    """(activation name, negative slope) of a relu/sigmoid/tanh op (a relu with a slope is leaky)."""
    kind = ACTIVATION_OPS[op.name]
    if kind == "relu":
        s = float(op.attrs.get("negative_slope", 0.0) or 0.0)
        return ("leaky_relu", s) if s else ("relu", 0.0)
    return kind, 0.0


def as_rows(t, batch):
    """A placement [batch, ...] dense within each sample, viewed as [batch, features] (a view: same
    storage, so it still stands for its placement)."""
    from ..memory.model import is_dense
    f = t.numel() // batch if batch else 0
    fshape = tuple(t.shape[1:])
    if not is_dense(fshape, tuple(t.stride()[1:])):
        raise ValueError(f"a copy between different shapes needs dense tensors, got strides {t.stride()}")
    return t.as_strided((batch, f), (t.stride(0) if t.dim() else f, 1), t.storage_offset())


def copy_spec(ctx, src, dst) -> KernelSpec:
    """A copy src -> dst (an elementwise chain of no ops): a concat operand into its slice, or a
    view/identity/dropout the plan could not alias. Different shapes of the same element count (a
    reshape) are copied as [batch, features] rows, which needs both dense within a sample. A slice
    along an axis other than the last (a concatenation along H or W) is no rows layout the chain can
    write: it is copied element by element with any strides (narrow's kernel)."""
    from ..memory.model import is_rows
    from .elementwise import elementwise_chain
    if tuple(src.shape) != tuple(dst.shape):
        # rows of the common leading dimension (the batch, in a rank's program maybe another)
        n = src.shape[0] if src.dim() and dst.dim() and src.shape[0] == dst.shape[0] else ctx.batch
        src, dst = as_rows(src, n), as_rows(dst, n)
    # the choice holds at every batch (memory/aliasing.py decides the same way): a leading axis of 1
    # may be the batch at batch 1, and at batch 2 a slice along H or W is no longer rows
    strided = src.dim() > 0 and not all(is_rows(s, tuple(t.stride())) for t in (src, dst)
                                        for s in {tuple(t.shape), (max(t.shape[0], 2),) + tuple(t.shape[1:])})
    if not src.dtype.is_floating_point or strided:
        # integers (class labels a partitioned program gathers) are copied as they are, not through
        # the chain's f32 arithmetic
        from .elementwise import narrow
        pin = {k: v for k, v in ctx.pin.items() if k in ("block", "num_warps")}
        return KernelSpec(narrow(src, 0, 0, src.shape[0], out=dst, launch=False, **pin), src.numel() // ctx.batch,
                          "BLOCK")
    return KernelSpec(elementwise_chain(src, [], out=dst, launch=False, **ctx.pin), src.numel() // ctx.batch, "BLOCK")


# --------------------------------------------------------------------------- GEMM anchors

def _gemm_epilogue(ctx, members) -> dict:
    """The launcher keywords of a conv/inner-product anchor's fused epilogue: its own activation,
    then what each following member's `epilogue` adds."""
    first = members[0]
    kw = dict(activation="none", negative_slope=0.0, allow_tf32=ctx.tf32)
    if first.attrs.get("activation", "none") not in ("none", None):
        kw["activation"] = first.attrs["activation"]
    return _fold_epilogue(ctx, members, kw)


def _fold_epilogue(ctx, members, kw: dict) -> dict:
    """kw with what each member after the anchor (members[0]) adds by its entry's `epilogue`."""
    prev = members[0].results[0]
    for m in members[1:]:
        entry = LOWERINGS.get(m.name)
        if entry is None or entry.epilogue is None:
            raise ValueError(f"{m.name} cannot be fused into the epilogue of {members[0].name}")
        entry.epilogue(ctx, m, prev, kw)
        prev = m.results[0]
    return kw


def _bias(ctx, op):
    return ctx.param(op, "bias") if "bias" in (op.attrs.get("params") or {}) else None


def _lower_conv2d(ctx, members) -> list:
    import torch

    from .conv import conv2d, conv2d_matrix_views, filter_kmajor, kmajor_row
    first, out = members[0], ctx.out
    kw = _gemm_epilogue(ctx, members)
    x, w = ctx.value(first.operands[0]), ctx.param(first, "weight")
    strides, padding = first.attrs.get("strides", [1, 1, 1, 1]), first.attrs.get("padding", "SAME")
    mat = conv2d_matrix_views(x, w, strides, padding, out, kw.get("residual"))
    if mat is not None:
        return _lower_conv2d_as_gemm(ctx, first, w, mat, kw)
    setup = []
    if ctx.tf32 and x.dtype == w.dtype == torch.float32:
        # Hopper's TF32 tensor-core instruction reads B K-major only: a copy of the HWIO filter with
        # K contiguous (made in the workspace before each run of the layer) is filled by 16-byte
        # asynchronous copies, where the filter itself took 4-byte ones (docs/performance.md)
        kh, kw_, ci, co = w.shape
        ws = ctx.workspace(co * kmajor_row(kh * kw_ * ci)).view(co, kmajor_row(kh * kw_ * ci))
        prep = filter_kmajor(w, out=ws, launch=False)
        prep.setup = True
        setup, kw["w_kmajor"] = [KernelSpec(prep, 1, FIXED_GRID)], ws
    call = conv2d(x, w, _bias(ctx, first), strides=strides, padding=padding, out=out, launch=False, **kw, **ctx.pin)
    return setup + [KernelSpec(call, out.shape[1] * out.shape[2], "BLOCK_M")]


def _lower_conv2d_as_gemm(ctx, first, w, mat, kw) -> list:
    """A convolution that is a matrix product (conv2d_matrix_views: a fully connected layer written as
    one, a 1x1 convolution) as gemm over views of its operands, split-K where its tiles are few
    (split="auto" unless a pin or tuning says otherwise). In TF32 gemm reads a K-major copy of the
    filter (_lower_conv2d's reason); that copy and split-K's partial sums share the workspace."""
    import torch

    from .conv import filter_kmajor, kmajor_row
    from .gemm import gemm, gemm_workspace
    a, b, o, r = mat
    kw = dict(kw, residual=r) if "residual" in kw else kw
    pin = pinned(gemm, ctx)
    split = pin.pop("split", "auto")
    probe = _calls(gemm(a, b, _bias(ctx, first), out=o, split=split, launch=False, **kw, **pin))
    split = probe[0].constexprs["SPLIT"]
    need = gemm_workspace(a.shape[0], b.shape[1], split)
    k, co = b.shape
    kn = co * kmajor_row(k) if ctx.tf32 and a.dtype == b.dtype == torch.float32 else 0
    setup, ws = [], ctx.workspace(kn + need) if kn or need else None
    if kn:
        wk = ws[:kn].view(co, kmajor_row(k))
        prep = filter_kmajor(w, out=wk, launch=False)
        prep.setup = True
        setup, b = [KernelSpec(prep, 1, FIXED_GRID)], wk[:, :k].t()
    calls = _calls(gemm(a, b, _bias(ctx, first), out=o, split=split, workspace=ws[kn:] if need else None,
                        launch=False, **kw, **pin))
    rows = ctx.out.shape[1] * ctx.out.shape[2]
    return setup + [KernelSpec(c, rows, "BLOCK_M") for c in calls]


def _lower_inner_product(ctx, members) -> KernelSpec:
    from .gemm import gemm
    first = members[0]
    x = ctx.value(first.operands[0])
    B = x.shape[0] if x.dim() else ctx.batch      # the batch (a rank's program may gather several shards)
    kw = _gemm_epilogue(ctx, members)
    if kw.get("residual") is not None:
        kw["residual"] = kw["residual"].reshape(B, -1)
    calls = with_workspace(ctx, gemm, x.reshape(B, -1), weight_as_read(ctx, first), _bias(ctx, first),
                           out=ctx.out, split=ctx.pin.get("split", "auto"), **kw)
    # split-K (gemm.default_split's where the tiles are few, or a pin's or tuning's): the chunks into the
    # workspace, then their sum with the epilogue; both grids are row blocks of the batch's rows times a
    # fixed factor
    return [KernelSpec(c, row_factor(x, ctx), "BLOCK_M") for c in calls]


def _epilogue_batch_norm(ctx, op, prev, kw):
    kw["scale"], kw["shift"] = ctx.param(op, "scale"), ctx.param(op, "shift")


def _epilogue_residual(ctx, op, prev, kw):
    other = op.operands[1] if op.operands[0] is prev else op.operands[0]
    kw["residual"] = ctx.value(other)
    kw["residual_after_act"] = kw["activation"] != "none"


def _epilogue_activation(ctx, op, prev, kw):
    kw["activation"], kw["negative_slope"] = activation_of(op)


# --------------------------------------------------------------------------- elementwise chains

def _lower_chain(ctx, members) -> KernelSpec:
    """A pointwise chain (relu, sigmoid, tanh, batch_norm, elementwise) as one elementwise kernel:
    each member's `chain` gives its steps; `others` are its operands besides the running value."""
    from .elementwise import elementwise_chain
    ops, prev = [], None
    x = ctx.value(members[0].operands[0])
    for m in members:
        others = [v for v in m.operands if v is not prev] if prev is not None else list(m.operands[1:])
        entry = LOWERINGS.get(m.name)
        if entry is None or entry.chain is None:
            raise ValueError(f"{m.name} cannot be a step of an elementwise chain")
        ops.extend(entry.chain(ctx, m, others))
        prev = m.results[0]
    call = elementwise_chain(x, ops, out=ctx.out, launch=False, **ctx.pin)
    return KernelSpec(call, x.numel() // ctx.batch, "BLOCK")


def _chain_activation(ctx, op, others):
    a, s = activation_of(op)
    return [("leaky_relu", s) if a == "leaky_relu" else a]


def _chain_batch_norm(ctx, op, others):
    return [("scale_shift", ctx.param(op, "scale"), ctx.param(op, "shift"))]


ELEMENTWISE_CHAIN_OPS = {"sum": "add", "product": "mul", "max": "max"}


def _chain_elementwise(ctx, op, others):
    name = ELEMENTWISE_CHAIN_OPS[op.attrs.get("operation", "sum")]
    return [(name, ctx.value(v)) for v in others]


def _chain_scale(ctx, op, others):
    """x * factor (split-workers' 1/K of a partitioned loss's gradient)."""
    return [("mul", float(op_attrs(op)["factor"]))]


# --------------------------------------------------------------------------- single-op groups

def _pool(fn_name):
    def lower(ctx, members) -> KernelSpec:
        from . import pool
        op, out = single_member(members), ctx.out
        call = getattr(pool, fn_name)(ctx.value(op.operands[0]), op.attrs["ksize"], op.attrs.get("strides", [1, 1, 1, 1]),
                                      op.attrs.get("padding", "VALID"), out=out, launch=False, **ctx.pin)
        return KernelSpec(call, out.shape[1] * out.shape[2], "BLOCK_P")
    return lower


def _lower_lrn(ctx, members) -> KernelSpec:
    from .lrn import lrn
    op = single_member(members)
    x = ctx.value(op.operands[0])
    call = lrn(x, op.attrs.get("local_size", 5), op.attrs.get("alpha", 1e-4), op.attrs.get("beta", 0.75),
               op.attrs.get("knorm", 1.0), out=ctx.out, launch=False, **ctx.pin)
    return KernelSpec(call, x.numel() // ctx.batch // x.shape[-1], "BLOCK_P")


def _lower_softmax(ctx, members) -> KernelSpec:
    from .softmax import softmax
    op = single_member(members)
    x = ctx.value(op.operands[0])
    return KernelSpec(softmax(x, out=ctx.out, launch=False, **ctx.pin), row_factor(x, ctx), None)


def _lower_copy(ctx, members) -> KernelSpec:
    op = single_member(members)
    return copy_spec(ctx, ctx.value(op.operands[0]), ctx.out)


def _lower_dropout(ctx, members) -> KernelSpec:
    """One operand: the inference identity (a copy where the plan could not alias it); with its
    mask (the training form): x * mask, an elementwise chain of one product."""
    op = single_member(members)
    if len(op.operands) == 1:
        return copy_spec(ctx, ctx.value(op.operands[0]), ctx.out)
    from .elementwise import elementwise_chain
    x = ctx.value(op.operands[0])
    call = elementwise_chain(x, [("mul", ctx.value(op.operands[1]))], out=ctx.out, launch=False, **ctx.pin)
    return KernelSpec(call, x.numel() // ctx.batch, "BLOCK")


# --------------------------------------------------------------------------- training: gradients

def _grad_epilogue(ctx, members) -> dict:
    """The launcher keywords of a data-gradient anchor's epilogue (an activation gradient of the
    layer below: grad_activation, grad_y, grad_slope)."""
    return _fold_epilogue(ctx, members, {})


def _epilogue_activation_grad(ctx, op, prev, kw):
    """An activation gradient whose dy (operand 1) is a data gradient's result: applied before the store."""
    if op.operands[1] is not prev or op.operands[0] is prev:
        raise ValueError(f"{op.attrs.get('name')}: only the gradient it differentiates can come from the anchor")
    a = op_attrs(op)
    kw.update(grad_activation=a["activation"], grad_slope=float(a["negative_slope"] or 0.0),
              grad_y=ctx.value(op.operands[0]))


def _lower_conv2d_grad_data(ctx, members) -> KernelSpec:
    from .conv_grad import conv2d_grad_data
    op = members[0]
    call = conv2d_grad_data(ctx.value(op.operands[0]), ctx.param(op, "weight"), tuple(ctx.out.shape),
                            op.attrs.get("strides", [1, 1, 1, 1]), op.attrs.get("padding", "SAME"), out=ctx.out,
                            allow_tf32=ctx.tf32, launch=False, **ctx.prologue, **_grad_epilogue(ctx, members),
                            **pinned(conv2d_grad_data, ctx))
    a = dict(zip(call.kernel.arg_names, call.args))
    return KernelSpec(call, a["HJ"] * a["WJ"], "BLOCK_M")


def _lower_conv2d_grad_filter(ctx, members) -> list:
    from .conv_grad import conv2d_grad_filter
    op = single_member(members)
    calls = with_workspace(ctx, conv2d_grad_filter, ctx.value(op.operands[0]), ctx.value(op.operands[1]),
                           tuple(op.attrs["filter"][:2]),      # (kh, kw): channels come from x and dz
                           op.attrs.get("strides", [1, 1, 1, 1]), op.attrs.get("padding", "SAME"),
                           out=ctx.out, allow_tf32=ctx.tf32, **ctx.prologue)
    return _fixed(calls)


def _lower_bias_grad(ctx, members) -> list:
    from .conv_grad import bias_grad
    op = single_member(members)
    return _fixed(with_workspace(ctx, bias_grad, ctx.value(op.operands[0]), out=ctx.out, **ctx.prologue))


def _lower_inner_product_grad_data(ctx, members) -> KernelSpec:
    """dx = dy @ W^T: dy [b, N], W [K, N] read transposed (a view), dx [b, K] in x's shape (a transposed
    weight: energy_lowering.py)."""
    from .conv_grad import inner_product_grad_data
    op = members[0]
    epi = _grad_epilogue(ctx, members)
    setup, w = contiguous_weight(ctx, op) if ctx.prologue or epi else ([], weight_as_read(ctx, op))
    pin = {k: v for k, v in pinned(inner_product_grad_data, ctx).items() if k != "block"}   # the setup copy's
    call = inner_product_grad_data(ctx.value(op.operands[0]), w, tuple(ctx.out.shape),
                                   out=ctx.out, allow_tf32=ctx.tf32, launch=False, **ctx.prologue, **epi, **pin)
    if ctx.prologue or epi:     # through conv2d_grad_data on 1x1 views: its grid's rows are the batch's
        a = dict(zip(call.kernel.arg_names, call.args))
        return setup + [KernelSpec(call, a["HJ"] * a["WJ"] * row_factor(ctx.out, ctx), "BLOCK_M")]
    return KernelSpec(call, row_factor(ctx.out, ctx), "BLOCK_M")


def _lower_inner_product_grad_filter(ctx, members) -> list:
    """dW = x^T @ dy: x [b, K] read transposed (the batch is the reduction), dy [b, N], dW [K, N]."""
    from .conv_grad import inner_product_grad_filter
    op = single_member(members)
    return _fixed(with_workspace(ctx, inner_product_grad_filter, ctx.value(op.operands[0]),
                                 ctx.value(op.operands[1]), out=ctx.out, allow_tf32=ctx.tf32, **ctx.prologue))


def _lower_activation_grad(ctx, members) -> KernelSpec:
    from .elementwise import activation_grad
    op = single_member(members)
    a = op_attrs(op)
    dy = ctx.value(op.operands[1])
    call = activation_grad(ctx.value(op.operands[0]), dy, a["activation"], float(a["negative_slope"] or 0.0),
                           out=ctx.out, launch=False, **pinned(activation_grad, ctx))
    return KernelSpec(call, dy.numel() // ctx.batch, "BLOCK")


def _prologue_activation_grad(ctx, op):
    """An activation gradient as a gradient GEMM's prologue: the kernel reads dy (operand 1) and y
    (operand 0, the activation's output) and computes dz = activation_grad(y, dy) itself."""
    a = op_attrs(op)
    return (dict(activation=a["activation"], negative_slope=float(a["negative_slope"] or 0.0),
                 y=ctx.value(op.operands[0])), op.operands[1])


def _pool_grad(is_max):
    def lower(ctx, members) -> KernelSpec:
        from . import pool_grad
        op = single_member(members)
        a = op_attrs(op)
        if is_max:
            fn = pool_grad.maxpool_grad
            call = fn(ctx.value(op.operands[0]), ctx.value(op.operands[1]), a["ksize"], a["strides"], a["padding"],
                      out=ctx.out, launch=False, **pinned(fn, ctx))
        else:
            fn = pool_grad.avgpool_grad
            call = fn(ctx.value(op.operands[0]), tuple(ctx.out.shape), a["ksize"], a["strides"], a["padding"],
                      count_include_pad=bool(op.attrs.get("count_include_pad", False)), out=ctx.out, launch=False,
                      **pinned(fn, ctx))
        return KernelSpec(call, ctx.out.shape[1] * ctx.out.shape[2], "BLOCK_P")
    return lower


def _lower_upsample2d_grad(ctx, members) -> KernelSpec:
    from .pool_grad import upsample2d_grad
    op = single_member(members)
    call = upsample2d_grad(ctx.value(op.operands[0]), op_attrs(op)["ksize"], out=ctx.out, launch=False,
                           **pinned(upsample2d_grad, ctx))
    return KernelSpec(call, ctx.out.shape[1] * ctx.out.shape[2], "BLOCK_P")


def _lower_softmax_grad(ctx, members) -> KernelSpec:
    from .loss_grad import softmax_grad
    op = single_member(members)
    call = softmax_grad(ctx.value(op.operands[0]), ctx.value(op.operands[1]), tuple(ctx.out.shape), out=ctx.out,
                        launch=False, **pinned(softmax_grad, ctx))
    return KernelSpec(call, row_factor(ctx.out, ctx), None)          # one program per row


def _lower_lrn_grad(ctx, members) -> KernelSpec:
    from .norm_grad import lrn_grad
    op = single_member(members)
    a = op_attrs(op)
    x = ctx.value(op.operands[0])
    call = lrn_grad(x, ctx.value(op.operands[1]), ctx.value(op.operands[2]), a["local_size"], a["alpha"], a["beta"],
                    a["knorm"], out=ctx.out, launch=False, **pinned(lrn_grad, ctx))
    return KernelSpec(call, _rows(x, ctx.batch), "BLOCK_P")


def _lower_elementwise_max_grad(ctx, members) -> KernelSpec:
    from .elementwise import elementwise_max_grad
    op = single_member(members)
    dy = ctx.value(op.operands[-1])
    call = elementwise_max_grad([ctx.value(v) for v in op.operands[:-1]], dy, int(op.attrs["index"]), out=ctx.out,
                                launch=False, **pinned(elementwise_max_grad, ctx))
    return KernelSpec(call, dy.numel() // ctx.batch, "BLOCK")


def _lower_narrow(ctx, members) -> KernelSpec:
    from .elementwise import narrow
    op = single_member(members)
    a = op_attrs(op)
    call = narrow(ctx.value(op.operands[0]), a["dim"], a["start"], a["length"], out=ctx.out, launch=False,
                  **pinned(narrow, ctx))
    return KernelSpec(call, ctx.out.numel() // ctx.batch, "BLOCK")


def _lower_slice(ctx, members) -> KernelSpec:
    """Part `index` of `num_slices` along `dim` (SINGA's kSlice; ONNX's grouped convolutions and single steps): a
    narrow of the operand (where the memory plan does not make it a view)."""
    from .elementwise import narrow
    op = single_member(members)
    a = op_attrs(op)
    x = ctx.value(op.operands[0])
    dim = a["dim"] % x.dim()
    size = x.shape[dim] // a["num_slices"]
    call = narrow(x, dim, a.get("index", 0) * size, size, out=ctx.out, launch=False, **pinned(narrow, ctx))
    return KernelSpec(call, ctx.out.numel() // ctx.batch, "BLOCK")


def _lower_pad_dim(ctx, members) -> KernelSpec:
    from .elementwise import pad_dim
    op = single_member(members)
    a = op_attrs(op)
    call = pad_dim(ctx.value(op.operands[0]), a["dim"], a["before"], a["after"], out=ctx.out, launch=False,
                   **pinned(pad_dim, ctx))
    return KernelSpec(call, ctx.out.numel() // ctx.batch, "BLOCK")


# --------------------------------------------------------------------------- training forms

def _lower_dropout_mask(ctx, members) -> KernelSpec:
    """The mask from the step's seed (a scalar input) and the op's salt: Philox, as the reference."""
    from .dropout import dropout_mask
    op = single_member(members)
    a = op_attrs(op)
    out = ctx.out
    call = dropout_mask(ctx.value(op.operands[0]), tuple(out.shape), float(a["keep_prob"]), int(a["salt"]), out=out,
                        out_dtype=out.dtype, device=out.device, launch=False, offset=int(a.get("offset", 0)),
                        **pinned(dropout_mask, ctx))
    return KernelSpec(call, out.numel() // ctx.batch, "BLOCK")


def _lower_batch_stats(ctx, members) -> list:
    from .norm_grad import batch_stats
    op = single_member(members)
    return _fixed(with_workspace(ctx, batch_stats, ctx.value(op.operands[0]), mean=ctx.value(op.results[0]),
                                 var=ctx.value(op.results[1]), out_dtype=ctx.out.dtype))


def _lower_batch_norm(ctx, members):
    """Inference form (one operand): a pointwise chain (or, after a GEMM anchor, its epilogue).
    Training form (x, mean, var): the normalizing kernel, with an activation that follows it."""
    first = members[0]
    if len(first.operands) == 1:
        return _lower_chain(ctx, members)
    from .norm_grad import batch_norm_train
    act, slope = "none", 0.0
    for m in members[1:]:
        if m.name not in ACTIVATION_OPS or act != "none":
            raise ValueError(f"batch norm's training form takes one fused activation, not {m.name}")
        act, slope = activation_of(m)
    x = ctx.value(first.operands[0])
    call = batch_norm_train(x, ctx.value(first.operands[1]), ctx.value(first.operands[2]), ctx.param(first, "scale"),
                            ctx.param(first, "shift"), float(op_attrs(first)["epsilon"]), activation=act,
                            negative_slope=slope, out=ctx.out, launch=False, **pinned(batch_norm_train, ctx))
    return KernelSpec(call, _rows(x, ctx.batch), "BLOCK_R")


def _bn_chain_step(ctx, op, others):
    if len(op.operands) > 1:
        raise ValueError("batch norm's training form cannot be a step of an elementwise chain")
    return _chain_batch_norm(ctx, op, others)


def _lower_batch_norm_grad(ctx, members) -> list:
    from .norm_grad import batch_norm_grad
    op = single_member(members)
    a = op_attrs(op)
    x, mean, var, dy = (ctx.value(v) for v in op.operands)
    calls = with_workspace(ctx, batch_norm_grad, x, mean, var, dy, ctx.param(op, "scale"), float(a["epsilon"]),
                           bool(a["batch_stats"]), out=ctx.out)
    rows = _rows(x, ctx.batch)
    # the per-channel sums first (a fixed grid), then the rows kernel (the last)
    return _fixed(calls[:-1]) + [KernelSpec(calls[-1], rows, "BLOCK_R")]


def _synchronized_batch_norm_grad(op) -> str | None:
    """A data-parallel batch norm's gradient (6 operands: the all-reduced sums of dy and dy * xhat)."""
    if len(op.operands) > 4:
        return ("the synchronized form of a batch norm split along the batch (its all-reduced sums) has "
                "reference semantics only so far: run the ranks on the reference executor (--target reference)")
    return None


def _lower_batch_norm_grad_scale(ctx, members) -> list:
    from .norm_grad import batch_norm_grad_scale
    op = single_member(members)
    x, mean, var, dy = (ctx.value(v) for v in op.operands)
    return _fixed(with_workspace(ctx, batch_norm_grad_scale, x, mean, var, dy, float(op_attrs(op)["epsilon"]),
                                 out=ctx.out, out_dtype=ctx.out.dtype))


def _lower_running_stats_update(ctx, members) -> list:
    from .norm_grad import running_stats_update
    op = single_member(members)
    a = op_attrs(op)
    calls = running_stats_update(ctx.param(op, "mean"), ctx.param(op, "var"), ctx.value(op.operands[0]),
                                 ctx.value(op.operands[1]), int(a["count"]), float(a["momentum"]), launch=False,
                                 **pinned(running_stats_update, ctx))
    return _fixed(_calls(calls))


def _bn_trained(op):
    """A batch norm's inference scale and shift, from the training program's scale, shift and
    running statistics of the same layer (netc/ops/norm.py: its training form's state)."""
    refs = op.attrs.get("params") or {}
    if len(op.operands) != 1 or "scale" not in refs or "shift" not in refs:
        return {}, {}
    layer = op.attrs.get("name")
    return ({"scale": refs["scale"].name, "shift": refs["shift"].name},
            {"gamma": refs["scale"].name, "beta": refs["shift"].name, "mean": f"{layer}.running_mean",
             "var": f"{layer}.running_var"})


def _bn_derive(ctx, op, own, trained) -> list:
    return fold_batch_norm(ctx, own["scale"], own["shift"], trained["gamma"], trained["beta"], trained["mean"],
                           trained["var"], float(op_attrs(op)["epsilon"]))


def fold_batch_norm(ctx, scale_out, shift_out, gamma, beta, mean, var, epsilon: float) -> list:
    """The inference affine of a batch norm trained with batch statistics, from its parameters and
    running statistics (runtime/train.py inference_params): scale' = gamma / sqrt(var + eps) and
    shift' = beta - mean * scale', on the device, with the training form's normalizing kernel
    (x - m) * rsqrt(v + eps) * s + b over one row: x = 1, m = 0, s = gamma gives scale'; x = mean,
    m = 0, s = -gamma, b = beta gives shift'. A training library's forward runs these first, so
    it computes with the statistics the last training step left (codegen: its prologue)."""
    import torch
    from .elementwise import elementwise_chain
    from .norm_grad import batch_norm_train
    c = gamma.numel()
    row = lambda t: t.reshape(1, c)            # noqa: E731
    ones, zeros = ctx.constant(torch.ones(1, c, dtype=torch.float32)), ctx.constant(torch.zeros(c, dtype=torch.float32))
    neg = ctx.workspace(c)
    calls = [batch_norm_train(ones, zeros, var, gamma, zeros, epsilon, out=row(scale_out), launch=False),
             elementwise_chain(gamma.reshape(c), [("mul", -1.0)], out=neg, launch=False),
             batch_norm_train(row(mean), zeros, var, neg, beta, epsilon, out=row(shift_out), launch=False)]
    return _fixed(calls)


# --------------------------------------------------------------------------- optimizer updates

# state roles of each update op: (state0, state1, step) as multi_tensor_update takes them
_UPDATE_STATE = {"sgd": ("velocity", None, None), "adam": ("adam_m", "adam_v", "adam_step"),
                 "rmsprop": ("square_avg", None, None), "adagrad": ("sum_sq", None, None),
                 "adadelta": ("square_avg", "acc_delta", None), "adamax": ("adamax_m", "adamax_u", "adamax_step")}
# the update op's attributes multi_tensor_update takes (the rest go into the chunk table)
_UPDATE_ATTRS = ("momentum", "nesterov", "beta1", "beta2", "alpha", "rho", "eps", "weight_decay", "clip_norm", "clip_low",
                 "clip_high", "convention")


def _update(optimizer):
    def lower(ctx, members) -> list:
        """One parameter's update: the multi-tensor kernel over a chunk table of that parameter
        alone (the plan frees each gradient right after its update), embedded in the library."""
        import torch
        from .optim import DEFAULT_CHUNK, chunk_table, multi_tensor_update
        op = single_member(members)
        a = op_attrs(op)
        bound = op.attrs.get("params") or {}
        s0r, s1r, str_ = _UPDATE_STATE[optimizer]
        p = ctx.param(op, "param")
        s0 = ctx.param(op, s0r) if s0r in bound else None
        s1 = ctx.param(op, s1r) if s1r and s1r in bound else None
        step = ctx.param(op, str_) if str_ and str_ in bound else None
        table = chunk_table([(0, 0, 0 if s0 is not None else None, 0 if s1 is not None else None, p.numel(),
                              0 if step is not None else None, float(a["lr_scale"]), float(a["wd_scale"]))],
                            DEFAULT_CHUNK)
        kw = {k: a[k] for k in _UPDATE_ATTRS if k in a}
        calls = multi_tensor_update(
            optimizer, ctx.constant(table), p, ctx.value(op.operands[0]), ctx.value(op.operands[1]),
            state0=s0, state1=s1, step=step,
            step_offsets=ctx.constant(torch.zeros(1, dtype=torch.int64)) if step is not None else None,
            norm=ctx.value(op.operands[2]) if len(op.operands) > 2 else None, launch=False,
            **kw, **pinned(multi_tensor_update, ctx))
        return _fixed(calls)
    return lower


def _lower_global_norm(ctx, members) -> list:
    """sqrt of the sum of squares of every gradient operand: one sum-of-squares kernel per gradient
    (its own chunk table) into the workspace, then one program adds the partials in order."""
    import triton
    from .common import KernelCall
    from .optim import DEFAULT_CHUNK, chunk_table, norm_finish_kernel, sum_squares_kernel
    op = single_member(members)
    grads = [ctx.value(v) for v in op.operands]
    tables = [chunk_table([(0, 0, None, None, g.numel(), None, 1.0, 1.0)], DEFAULT_CHUNK) for g in grads]
    total = sum(t.shape[0] for t in tables)
    ws = ctx.workspace(total)
    block = int(ctx.pin.get("block") or 1024)
    calls, first = [], 0
    for g, t in zip(grads, tables):
        calls.append(KernelCall(sum_squares_kernel, (t.shape[0],), (ctx.constant(t), g, ws, first), dict(BLOCK=block),
                                dict(num_warps=4), ws))
        first += t.shape[0]
    fb = min(1024, triton.next_power_of_2(max(total, 1)))
    calls.append(KernelCall(norm_finish_kernel, (1,), (ws, ctx.out, total), dict(BLOCK=fb), dict(num_warps=4), ctx.out))
    return _fixed(calls)


# --------------------------------------------------------------------------- embeddings

def _lower_embedding(ctx, members) -> KernelSpec:
    """Table rows gathered by id (kernels/embedding.py): a grid over the ids, ids per sample rows each."""
    from .embedding import embedding
    op = single_member(members)
    ids = ctx.value(op.operands[0])
    call = embedding(ids, ctx.param(op, "table"), out=ctx.out, launch=False, **pinned(embedding, ctx))
    return KernelSpec(call, ids.numel() // ctx.batch, "BLOCK_M")


def _lower_embedding_grad(ctx, members) -> list:
    """The [V, D] gradient cleared, then dy's rows added at their ids (a grid that does not depend on the batch)."""
    from .embedding import embedding_grad
    op = single_member(members)
    return _fixed(embedding_grad(ctx.value(op.operands[0]), ctx.value(op.operands[1]), int(op_attrs(op)["num_embeddings"]),
                                 out=ctx.out, launch=False, **pinned(embedding_grad, ctx)))


def _lower_sparse_sgd_update(ctx, members) -> list:
    """The rows the ids touched, updated in place: table[id] -= lr * lr_scale * row."""
    from .embedding import sparse_sgd_update
    op = single_member(members)
    call = sparse_sgd_update(ctx.param(op, "param"), ctx.value(op.operands[0]), ctx.value(op.operands[1]),
                             ctx.value(op.operands[2]), lr_scale=float(op_attrs(op)["lr_scale"]), launch=False,
                             **pinned(sparse_sgd_update, ctx))
    return _fixed([call])


# --------------------------------------------------------------------------- the table

ACTIVATION_OPS = {"netc.relu": "relu", "netc.sigmoid": "sigmoid", "netc.tanh": "tanh", "netc.stanh": "stanh"}

_ACTIVATION = Lowering(lower=_lower_chain, epilogue=_epilogue_activation, chain=_chain_activation)

LOWERINGS: dict[str, Lowering] = {
    # GEMM anchors and what folds into their epilogue (kernels/common.py: the epilogue's order)
    "netc.conv2d": Lowering(lower=_lower_conv2d),
    "netc.inner_product": Lowering(lower=_lower_inner_product),
    "netc.batch_norm": Lowering(lower=_lower_batch_norm, epilogue=_epilogue_batch_norm, chain=_bn_chain_step,
                                trained=_bn_trained, derive=_bn_derive),
    "netc.elementwise": Lowering(lower=_lower_chain, epilogue=_epilogue_residual, chain=_chain_elementwise),
    **{name: _ACTIVATION for name in ACTIVATION_OPS},
    # one op, one kernel
    "netc.maxpool": Lowering(lower=_pool("maxpool")),
    "netc.avgpool": Lowering(lower=_pool("avgpool")),
    "netc.lrn": Lowering(lower=_lower_lrn),
    # depthwise convolutions and their gradients (kernels/depthwise.py; entries in depthwise_lowering.py)
    **{name: Lowering(lower=fn) for name, fn in DEPTHWISE_LOWERINGS.items()},
    # clip (ReLU6) and its gradient (an elementwise chain, kernels/clip.py; entries in clip_lowering.py)
    **{name: Lowering(lower=fn) for name, fn in CLIP_LOWERINGS.items()},
    "netc.softmax": Lowering(lower=_lower_softmax),
    # the identity on their operand's bytes: no kernel where the plan aliases them, else a copy
    "netc.reshape": Lowering(lower=_lower_copy),
    "netc.identity": Lowering(lower=_lower_copy),
    "netc.dummy": Lowering(lower=_lower_copy),
    "netc.dropout": Lowering(lower=_lower_dropout),
    "netc.concat": Lowering(copies=True),
    # training forms (netc/ops: OpDef.training_form)
    "netc.dropout_mask": Lowering(lower=_lower_dropout_mask),
    "netc.batch_stats": Lowering(lower=_lower_batch_stats),
    "netc.running_stats_update": Lowering(lower=_lower_running_stats_update),
    # gradients (kernels/conv_grad.py, pool_grad.py, loss_grad.py, norm_grad.py, elementwise.py)
    "netc.conv2d_grad_data": Lowering(lower=_lower_conv2d_grad_data),
    "netc.conv2d_grad_filter": Lowering(lower=_lower_conv2d_grad_filter),
    "netc.bias_grad": Lowering(lower=_lower_bias_grad),
    "netc.inner_product_grad_data": Lowering(lower=_lower_inner_product_grad_data),
    "netc.inner_product_grad_filter": Lowering(lower=_lower_inner_product_grad_filter),
    "netc.activation_grad": Lowering(lower=_lower_activation_grad, prologue=_prologue_activation_grad,
                                     epilogue=_epilogue_activation_grad),
    "netc.maxpool_grad": Lowering(lower=_pool_grad(True)),
    "netc.avgpool_grad": Lowering(lower=_pool_grad(False)),
    "netc.upsample2d_grad": Lowering(lower=_lower_upsample2d_grad),
    "netc.softmax_grad": Lowering(lower=_lower_softmax_grad),
    "netc.lrn_grad": Lowering(lower=_lower_lrn_grad),
    "netc.batch_norm_grad": Lowering(lower=_lower_batch_norm_grad, unsupported=_synchronized_batch_norm_grad),
    "netc.batch_norm_grad_scale": Lowering(lower=_lower_batch_norm_grad_scale),
    "netc.elementwise_max_grad": Lowering(lower=_lower_elementwise_max_grad),
    "netc.narrow": Lowering(lower=_lower_narrow),
    "netc.slice": Lowering(lower=_lower_slice),
    "netc.pad_dim": Lowering(lower=_lower_pad_dim),
    "netc.scale": Lowering(lower=_lower_chain, chain=_chain_scale),
    # optimizer updates (kernels/optim.py: one multi-tensor kernel per optimizer) and clipping
    "netc.sgd_update": Lowering(lower=_update("sgd")),
    "netc.adam_update": Lowering(lower=_update("adam")),
    "netc.rmsprop_update": Lowering(lower=_update("rmsprop")),
    "netc.adagrad_update": Lowering(lower=_update("adagrad")),
    **{f"netc.{o}_update": Lowering(lower=_update(o)) for o in ("adadelta", "adamax")},
    "netc.global_norm": Lowering(lower=_lower_global_norm),
    # embeddings (kernels/embedding.py): a gather, its gradient's scatter-add, the sparse update
    "netc.embedding": Lowering(lower=_lower_embedding),
    "netc.embedding_grad": Lowering(lower=_lower_embedding_grad),
    "netc.sparse_sgd_update": Lowering(lower=_lower_sparse_sgd_update),
    # the LSTM and the GRU (kernels/lstm.py, gru.py; their entries in kernels/recurrent_lowering.py)
    **{name: Lowering(**kw) for name, kw in RECURRENT_LOWERINGS.items()},
    # Recurrent and Clockwork (kernels/rnn.py; their entries in kernels/rnn_lowering.py)
    **{name: Lowering(lower=fn) for name, fn in RNN_LOWERINGS.items()},
    # losses in every form, OneHot, SequencePool (kernels/loss.py, loss_grad.py, sequence.py; sequence_lowering.py)
    **{name: Lowering(**kw) for name, kw in SEQUENCE_LOWERINGS.items()},
    # SequenceReverse, also its own gradient (a gather, kernels/seq_reverse.py; seq_reverse_lowering.py)
    **{name: Lowering(lower=fn) for name, fn in SEQ_REVERSE_LOWERINGS.items()},
    # ChannelPermute, also its own gradient's form (a gather through an embedded order, kernels/channel_permute.py)
    **{name: Lowering(lower=fn) for name, fn in CHANNEL_PERMUTE_LOWERINGS.items()},
    # SequenceMask, also its own gradient (a copy or zero, kernels/seq_mask.py; seq_mask_lowering.py)
    **{name: Lowering(lower=fn) for name, fn in SEQ_MASK_LOWERINGS.items()},
    # an RBM's visible layer (out = in: aliased, else a copy) and contrastive divergence's ops
    # (kernels/energy.py; their entries in kernels/energy_lowering.py)
    "netc.rbm_visible": Lowering(lower=_lower_copy),
    **{name: Lowering(lower=fn) for name, fn in ENERGY_LOWERINGS.items()},
    # no kernel (yet)
    "netc.deconv2d": Lowering(missing="transposed convolution"),
    "netc.upsample2d": Lowering(missing="upsampling"),
    "netc.argsort": Lowering(missing="SINGA's ArgSort"),
    "netc.accuracy": Lowering(missing="SINGA's Accuracy"),
    "netc.opaque": Lowering(missing="an opaque (unknown) layer", opaque=True),
}


def lowering_of(ir_name: str) -> Lowering | None:
    """The table's entry of an IR op name, or None."""
    return LOWERINGS.get(ir_name)


def no_kernel(op) -> str | None:
    """What `op` is when it has no kernel (its entry's `missing`, or why this form is unsupported),
    or None when it has one. Ops without an entry say so through their OpDef."""
    entry = LOWERINGS.get(op.name)
    if entry is None:
        return "no kernel is registered for it (netc/kernels/lowering.py)"
    if entry.missing:
        return entry.missing
    if entry.unsupported is not None:
        return entry.unsupported(op)
    if entry.lower is None and not entry.copies:
        return "no kernel is registered for it (netc/kernels/lowering.py)"
    return None
