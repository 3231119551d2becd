"""The lowering-table entries of netc.recurrent, netc.clockwork and their gradient ops (kernels/lowering.py
reads RNN_LOWERINGS into its table): which launchers of kernels/rnn.py (and netc's elementwise copy)
each op becomes, on the tensors codegen hands them (kernels/lowering.py's module docstring: the
context, the KernelSpecs). Like the table, this module imports no launcher until an entry runs.

The batch axis, as for the LSTM (kernels/lstm_lowering.py): a network whose inputs are sequences
[T, B, ...] is planned with T as its batch, so T is a run-time argument of every kernel here and B a
fixed size: the input GEMM's and dx's grids grow with T (B rows per step), the recurrence is one
launch over cdiv(B, BLOCK_M) programs that loops over the steps inside, and the parameter gradients
reduce over T * B rows into fixed-size results; h0 [B, H] and its gradient are constant-sized.

Memory: the input projection gx of the forward and of the steps gradient is scratch in the program's
WORKSPACE region (ctx.workspace); the steps gradient's own result holds everything its backward and
the data and parameter gradients read, so nothing is kept from the forward.
"""
from __future__ import annotations

from .spec import FIXED_GRID, KernelSpec, grows_with_steps, op_attrs, pinned, single_member

# the steps gradient's blocks (netc.ops.rnn.BLOCKS; repeated here so that reading the table imports no op)
_DH_PREV = 1


def _params(ctx, op) -> dict:
    """The layer's parameters by role: W, R, bias (and a Clockwork's timing)."""
    from ..ops import lookup
    return {r: ctx.param(op, r) for r in lookup(op.name).param_roles}


def lower_rnn(ctx, members) -> list:
    """The input GEMM over all T * B rows, then the recurrence (kernels/rnn.py rnn_forward)."""
    from .rnn import rnn_forward, rnn_workspace
    op = single_member(members)
    a = op_attrs(op)
    x = ctx.value(op.operands[0])
    h0 = ctx.value(op.operands[1]) if len(op.operands) == 2 else None
    ws = ctx.workspace(rnn_workspace(x.shape[0], x.shape[1], a["size"]))
    first, second = rnn_forward(x, h0, _params(ctx, op), a["activation"], out=ctx.out, workspace=ws,
                                allow_tf32=ctx.tf32, launch=False, **pinned(rnn_forward, ctx))
    return [grows_with_steps(ctx, x, first), KernelSpec(second, 1, FIXED_GRID)]


def lower_rnn_grad_steps(ctx, members) -> list:
    """The input GEMM, the forward recomputed into the result's blocks, the recurrence backwards."""
    from .rnn import rnn_backward_steps, rnn_workspace
    op = single_member(members)
    a = op_attrs(op)
    x = ctx.value(op.operands[0])
    h0 = ctx.value(op.operands[1]) if len(op.operands) == 3 else None
    ws = ctx.workspace(rnn_workspace(x.shape[0], x.shape[1], a["size"]))
    calls = rnn_backward_steps(x, h0, ctx.value(op.operands[-1]), _params(ctx, op), a["activation"], out=ctx.out,
                               workspace=ws, allow_tf32=ctx.tf32, launch=False, **pinned(rnn_backward_steps, ctx))
    return [grows_with_steps(ctx, x, calls[0])] + [KernelSpec(c, 1, FIXED_GRID) for c in calls[1:]]


def lower_rnn_grad_data(ctx, members) -> KernelSpec:
    """dx: one GEMM over all T * B rows; dh0: a copy of the block step 0 sends back (constant-sized:
    a fixed grid)."""
    op = single_member(members)
    steps = ctx.value(op.operands[0])
    if op_attrs(op)["wrt"] == "x":
        from .rnn import rnn_grad_x
        call = rnn_grad_x(steps, ctx.param(op, "W"), tuple(ctx.out.shape), out=ctx.out, allow_tf32=ctx.tf32,
                          launch=False, **pinned(rnn_grad_x, ctx))
        return grows_with_steps(ctx, steps, call)
    from .elementwise import elementwise_chain
    pin = {k: v for k, v in ctx.pin.items() if k in ("block", "num_warps")}
    return KernelSpec(elementwise_chain(steps[0, :, _DH_PREV], [], out=ctx.out, launch=False, **pin), 1, FIXED_GRID)


def lower_rnn_grad_param(ctx, members) -> KernelSpec:
    """W: dHa^T x, R: dHa^T h[t-1] (netc's gemm on transposed views, K = T * B); bias: the column sums
    of dHa. Fixed grids: the results are parameter-sized."""
    from .rnn import rnn_grad_param
    op = single_member(members)
    x = ctx.value(op.operands[1]) if len(op.operands) == 2 else None
    call = rnn_grad_param(ctx.value(op.operands[0]), op_attrs(op)["role"], x, out=ctx.out, allow_tf32=ctx.tf32,
                          launch=False, **pinned(rnn_grad_param, ctx))
    return KernelSpec(call, 1, FIXED_GRID)


RNN_LOWERINGS = {
    "netc.recurrent": lower_rnn,
    "netc.clockwork": lower_rnn,
    "netc.recurrent_grad_steps": lower_rnn_grad_steps,
    "netc.clockwork_grad_steps": lower_rnn_grad_steps,
    "netc.rnn_grad_data": lower_rnn_grad_data,
    "netc.rnn_grad_param": lower_rnn_grad_param,
}
