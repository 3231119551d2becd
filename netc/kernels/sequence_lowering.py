"""The lowering-table entries of the sequence ops and the losses (kernels/lowering.py reads
SEQUENCE_LOWERINGS and SEQUENCE_TILES into its table): netc.one_hot, netc.seq_pool and netc.seq_pool_grad
(kernels/sequence.py), and netc.softmax_loss, netc.euclidean_loss and their gradients (kernels/loss.py,
loss_grad.py) in every form: per sample (rows of axis 0), per step of a time-major sequence (logits
[T, B, C] with labels [T, B]: the per-sample kernels over T*B rows, as views) and masked by lengths [B]
(the same kernels with each row weighted by whether its step is valid, the mean over the valid steps).
Like the table, this module imports no launcher until an entry runs.

The batch axis, as for the recurrent ops (kernels/recurrent_lowering.py): a network whose inputs are
sequences [T, B, ...] is planned with T as its batch, so T is a run-time argument of the kernels here
and B a fixed size. A per-step loss gradient's grid (one program per row) grows with T, B rows per
step; a pool and its gradient loop over the steps inside a grid over B (fixed when T is the batch);
the one-hot encoding's grid grows with its ids. A pool's result [B, ...] is per sample, not batch-sized
(memory/graph.py: OpDef.reduces_time), so what follows it runs at a fixed size.
"""
from __future__ import annotations

from .spec import FIXED_GRID, KernelSpec, call_args, op_attrs, pinned, pow2_between, row_factor, single_member


def _per_step(op) -> bool:
    """A softmax loss (or its gradient) over a sequence's steps without lengths (labels [T, B])."""
    from ..ops.loss import per_step
    return "softmax_loss" in op.name and per_step(tuple(op.operands[0].type.shape),
                                                  tuple(op.operands[1].type.shape), False)


def _steps_as_rows(x, y):
    """A per-step loss's logits [T, B, ...] and labels [T, B] (or [T, B, 1]) as [T*B, C] and [T*B] views."""
    t, b = x.shape[0], x.shape[1]
    return x.reshape(t * b, -1), y.reshape(t * b)


def _over_b(ctx, x, call) -> KernelSpec:
    """A grid over the B samples of x [T, B, ...]: fixed when T is the program's batch, else growing with it."""
    if x.shape[0] == ctx.batch or x.shape[1] != ctx.batch:
        return KernelSpec(call, 1, FIXED_GRID)
    return KernelSpec(call, 1, "BLOCK_M")


# --------------------------------------------------------------------------- one_hot, seq_pool

def lower_one_hot(ctx, members) -> KernelSpec:
    """A fill of the rows: on_value at each id, 0 elsewhere; a grid over the ids."""
    from .sequence import one_hot
    op = single_member(members)
    a = op_attrs(op)
    ids = ctx.value(op.operands[0])
    call = one_hot(ids, int(a["depth"]), float(a["on_value"]), out=ctx.out, launch=False, **pinned(one_hot, ctx))
    return KernelSpec(call, max(1, ids.numel() // ctx.batch), "BLOCK_M")


def lower_seq_pool(ctx, members) -> KernelSpec:
    from .sequence import seq_pool
    op = single_member(members)
    x = ctx.value(op.operands[0])
    n = ctx.value(op.operands[1]) if len(op.operands) > 1 else None
    call = seq_pool(x, n, op_attrs(op)["mode"], out=ctx.out, launch=False, **pinned(seq_pool, ctx))
    return _over_b(ctx, x, call)


def lower_seq_pool_grad(ctx, members) -> KernelSpec:
    """dx [T, B, ...]: every step written (padding zeros) by programs over the samples."""
    from .sequence import seq_pool_grad
    op = single_member(members)
    x = ctx.value(op.operands[0])
    n = ctx.value(op.operands[1]) if len(op.operands) == 3 else None
    call = seq_pool_grad(x, n, ctx.value(op.operands[-1]), op_attrs(op)["mode"], out=ctx.out, launch=False,
                         **pinned(seq_pool_grad, ctx))
    return _over_b(ctx, x, call)


# --------------------------------------------------------------------------- losses

def _loss(fn_name):
    def lower(ctx, members) -> KernelSpec:
        from . import loss
        op = single_member(members)
        x, y = ctx.value(op.operands[0]), ctx.value(op.operands[1])
        n = ctx.value(op.operands[2]) if len(op.operands) > 2 else None
        if n is None and _per_step(op):
            x, y = _steps_as_rows(x, y)
        call = getattr(loss, fn_name)(x, y, n, out=ctx.out, launch=False, **pinned(getattr(loss, fn_name), ctx))
        return KernelSpec(call, 1, FIXED_GRID)      # one program reduces the whole batch
    return lower


def _grad_operands(ctx, op) -> tuple:
    """(a, b, lengths or None, the seed or None) of a loss gradient's operands."""
    k = 3 if op.attrs.get("lengths") else 2
    vs = [ctx.value(v) for v in op.operands]
    return vs[0], vs[1], (vs[2] if k == 3 else None), (vs[k] if len(vs) > k else None)


def lower_softmax_loss_grad(ctx, members) -> KernelSpec:
    """One program per row: the T*B steps of a per-step or masked loss, the samples of the per-sample one."""
    from .loss_grad import softmax_loss_grad
    op = single_member(members)
    x, y, n, seed = _grad_operands(ctx, op)
    out = ctx.out
    rows = row_factor(x, ctx)       # per sample: 1, or B for [T*B, C] rows (a rolled net's steps flattened)
    if n is not None or _per_step(op):
        rows = x.shape[1] if x.shape[0] == ctx.batch else 1
        if n is None:
            x, y = _steps_as_rows(x, y)
            out = out.reshape(x.shape)
    call = softmax_loss_grad(x, y, seed, n, out=out, out_dtype=out.dtype, launch=False,
                             **pinned(softmax_loss_grad, ctx))
    return KernelSpec(call, rows, None)


def lower_euclidean_loss_grad(ctx, members) -> KernelSpec:
    from .loss_grad import euclidean_loss_grad
    op = single_member(members)
    x, y, n, seed = _grad_operands(ctx, op)
    call = euclidean_loss_grad(x, y, seed, int(op_attrs(op)["wrt"]), n, out=ctx.out, out_dtype=ctx.out.dtype,
                               launch=False, **pinned(euclidean_loss_grad, ctx))
    return KernelSpec(call, max(1, ctx.out.numel() // ctx.batch), "BLOCK")


SEQUENCE_LOWERINGS = {
    "netc.one_hot": dict(lower=lower_one_hot),
    "netc.seq_pool": dict(lower=lower_seq_pool),
    "netc.seq_pool_grad": dict(lower=lower_seq_pool_grad),
    "netc.softmax_loss": dict(lower=_loss("softmax_loss"), labels=1),
    "netc.euclidean_loss": dict(lower=_loss("euclidean_loss")),
    "netc.softmax_loss_grad": dict(lower=lower_softmax_loss_grad),
    "netc.euclidean_loss_grad": dict(lower=lower_euclidean_loss_grad),
}


# --------------------------------------------------------------------------- interpreter tiles

def _tiles_one_hot(call):
    a = call_args(call)
    bn = pow2_between(a["V"], 1, 1024)
    return dict(block_n=bn, block_m=pow2_between(a["M"], 1, max(1, 2 ** 16 // bn)))


def _tiles_over_b(call):
    a = call_args(call)
    bn = pow2_between(a["F"], 1, 1024)
    return dict(block_n=bn, block_m=pow2_between(a["B"], 1, max(1, 2 ** 16 // bn)))


SEQUENCE_TILES = {"one_hot_kernel": _tiles_one_hot, "seq_pool_kernel": _tiles_over_b,
                  "seq_pool_grad_kernel": _tiles_over_b}
