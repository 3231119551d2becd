"""The lowering-table entries of netc.lstm, netc.gru and their gradient ops (kernels/lowering.py
reads RECURRENT_LOWERINGS and RECURRENT_TILES into its table): which launchers of kernels/lstm.py and
kernels/gru.py (and netc's gemm and elementwise copy) each op becomes, on the tensors codegen hands them (kernels/lowering.py's
module docstring: the context, the KernelSpecs). Like the table, this module imports no launcher
until an entry runs.

The batch axis. A time-major op's sequence [T, B, ...] leads with T, and the compiled targets scale
the leading axis of every batch-sized tensor with their run-time batch (memory/graph.py: a network
whose inputs are sequences is planned with T as its batch; the initial state h0, c0 [B, H] and its
gradients are constant-sized). So T is a run-time argument of every kernel here, B a fixed size: the
input GEMM's and dx's grids grow with T (B rows per step), the recurrence is one launch per
direction over cdiv(B, BLOCK_M) programs that loops over the steps inside (kernels/lstm.py), and the
parameter gradients reduce over T * B rows into fixed-size results. A .so compiled at T runs any
sequence of 1..T steps (inference; a training step runs at the planned T).

Memory: the forward's cell state and the input projection gx, and the gradient's gx, are scratch in
the program's WORKSPACE region (ctx.workspace: planned by codegen, shared by every group, sized for
the largest); lstm_grad_gates' own result holds everything its backward and the parameter
gradients read (kernels/lstm.py), so nothing is kept from the forward.
"""
from __future__ import annotations

from .spec import FIXED_GRID, KernelSpec, call_args, grows_with_steps, op_attrs, pinned, pow2_between, single_member

# lstm_grad_gates' and gru_grad_gates' blocks (netc.ops.lstm.BLOCKS, netc.ops.recurrent.BLOCKS; repeated
# here so that reading the table imports no op)
_BLOCK = {"z": 0, "i": 1, "f": 2, "o": 3, "dc_prev": 4, "dh_prev": 5, "c_prev": 6, "c": 7, "h_prev": 8}
_GRU_BLOCK = {"z": 0, "r": 1, "c": 2, "dh_prev": 3, "h_prev": 4, "uc": 5, "hc": 6}
_ROLES = ("Wz", "Wi", "Wf", "Wo", "pi", "pf", "po", "Rz", "Ri", "Rf", "Ro", "bz", "bi", "bf", "bo")


def _state(ctx, op, first):
    """(h0, c0) tensors of an Lstm's (or its gradient's) operands from index `first`, or (None, None)."""
    vs = op.operands[first:first + 2] if len(op.operands) > first + 1 else []
    return tuple(ctx.value(v) for v in vs) if vs else (None, None)


def lower_lstm(ctx, members) -> list:
    """The input GEMM over all T * B rows, then the recurrence (kernels/lstm.py lstm)."""
    from .lstm import lstm, lstm_workspace
    op = single_member(members)
    a = op_attrs(op)
    x = ctx.value(op.operands[0])
    h0, c0 = _state(ctx, op, 1)
    ws = ctx.workspace(lstm_workspace(x.shape[0], x.shape[1], a["size"]))
    first, second = lstm(x, h0, c0, {r: ctx.param(op, r) for r in _ROLES}, a["activation"],
                         cell_activation=a.get("cell_activation"), out=ctx.out, workspace=ws, allow_tf32=ctx.tf32,
                         launch=False, **pinned(lstm, ctx))
    return [grows_with_steps(ctx, x, first), KernelSpec(second, 1, FIXED_GRID)]


def lower_lstm_grad_gates(ctx, members) -> list:
    """The input GEMM, the forward recomputed into the result's blocks, the recurrence backwards."""
    from .lstm import lstm_grad_gates, lstm_workspace
    op = single_member(members)
    a = op_attrs(op)
    x = ctx.value(op.operands[0])
    h0, c0 = _state(ctx, op, 1) if len(op.operands) == 4 else (None, None)
    ws = ctx.workspace(lstm_workspace(x.shape[0], x.shape[1], a["size"], forward=False))
    calls = lstm_grad_gates(x, h0, c0, ctx.value(op.operands[-1]), {r: ctx.param(op, r) for r in _ROLES},
                            a["activation"], cell_activation=a.get("cell_activation"), out=ctx.out, workspace=ws,
                            allow_tf32=ctx.tf32, launch=False, **pinned(lstm_grad_gates, ctx))
    return [grows_with_steps(ctx, x, calls[0])] + [KernelSpec(c, 1, FIXED_GRID) for c in calls[1:]]


def lower_lstm_grad_data(ctx, members) -> KernelSpec:
    """dx: one GEMM over all T * B rows (the four gates' blocks its K); dh0, dc0: a copy of the block
    step 0 sends back (constant-sized: a fixed grid)."""
    op = single_member(members)
    a = op_attrs(op)
    gates = ctx.value(op.operands[0])
    if a["wrt"] == "x":
        from .lstm import lstm_grad_x
        call = lstm_grad_x(gates, {f"W{g}": ctx.param(op, f"W{g}") for g in "zifo"}, tuple(ctx.out.shape),
                           out=ctx.out, allow_tf32=ctx.tf32, launch=False, **pinned(lstm_grad_x, ctx))
        return grows_with_steps(ctx, gates, call)
    from .elementwise import elementwise_chain
    src = gates[0, :, _BLOCK["dc_prev" if a["wrt"] == "c0" else "dh_prev"]]
    pin = {k: v for k, v in ctx.pin.items() if k in ("block", "num_warps")}
    return KernelSpec(elementwise_chain(src, [], out=ctx.out, launch=False, **pin), 1, FIXED_GRID)


def lower_lstm_grad_param(ctx, members) -> KernelSpec:
    """W*: dA^T x and R*: dA^T h[t-1] (netc's gemm on transposed views, K = T * B); b*: the column
    sums of dA; p*: of dA times c[t-1] (c[t] for po)."""
    op = single_member(members)
    role = op_attrs(op)["role"]
    gates = ctx.value(op.operands[0])
    t, b, _, h = gates.shape
    da = gates[:, :, _BLOCK[role[1]]]
    if role[0] in "WR":
        from .gemm import gemm
        other = ctx.value(op.operands[1]) if role[0] == "W" else gates[:, :, _BLOCK["h_prev"]]
        kw = {**pinned(gemm, ctx), "split": 1}
        call = gemm(da.reshape(t * b, h).t(), other.reshape(t * b, -1), out=ctx.out, allow_tf32=ctx.tf32,
                    launch=False, **kw)
        return KernelSpec(call, 1, FIXED_GRID)
    from .lstm import lstm_column_sums
    state = None if role[0] == "b" else gates[:, :, _BLOCK["c" if role == "po" else "c_prev"]]
    call = lstm_column_sums(da, state, out=ctx.out, launch=False, **pinned(lstm_column_sums, ctx))
    return KernelSpec(call, 1, FIXED_GRID)


# --------------------------------------------------------------------------- the GRU

def _gru_roles(a) -> list:
    return [f"{g}_{k}" for k in ("hx", "hh") for g in "zrc"] + ([f"{g}_b" for g in "zrc"] if a["bias"] else [])


def _gru_specs(ctx, x, calls) -> list:
    """A GRU's input GEMM (rows: T * B) and recurrence kernels (over B): for a sequence the GEMM grows
    with T when T is the batch; for one step x [B, X] both grow with B when B is the batch."""
    if x.dim() >= 3:
        return [grows_with_steps(ctx, x, calls[0])] + [KernelSpec(c, 1, FIXED_GRID) for c in calls[1:]]
    if x.shape[0] == ctx.batch:
        return [KernelSpec(c, 1, "BLOCK_M") for c in calls]
    return [KernelSpec(c, 1, FIXED_GRID) for c in calls]


def _gru_dims(x, h):
    return (1, x.shape[0], h) if x.dim() == 2 else (x.shape[0], x.shape[1], h)


def lower_gru(ctx, members) -> list:
    """The input GEMM over all T * B rows and three gates, then the recurrence (kernels/gru.py gru)."""
    from .gru import gru, gru_workspace
    op = single_member(members)
    a = op_attrs(op)
    x = ctx.value(op.operands[0])
    h0 = ctx.value(op.operands[1]) if len(op.operands) == 2 else None
    ws = ctx.workspace(gru_workspace(*_gru_dims(x, a["dim_hidden"])))
    calls = gru(x, h0, {r: ctx.param(op, r) for r in _gru_roles(a)}, a["bias"], a["linear_before_reset"],
                out=ctx.out, workspace=ws, allow_tf32=ctx.tf32, launch=False, **pinned(gru, ctx))
    return _gru_specs(ctx, x, calls)


def lower_gru_grad_gates(ctx, members) -> list:
    """The input GEMM, the forward recomputed into the result's blocks, the recurrence backwards."""
    from .gru import gru_grad_gates, gru_workspace
    op = single_member(members)
    a = op_attrs(op)
    x = ctx.value(op.operands[0])
    h0 = ctx.value(op.operands[1]) if len(op.operands) == 3 else None
    ws = ctx.workspace(gru_workspace(*_gru_dims(x, a["dim_hidden"]), forward=False))
    calls = gru_grad_gates(x, h0, ctx.value(op.operands[-1]), {r: ctx.param(op, r) for r in _gru_roles(a)}, a["bias"],
                           a["linear_before_reset"], out=ctx.out, workspace=ws, allow_tf32=ctx.tf32, launch=False,
                           **pinned(gru_grad_gates, ctx))
    return _gru_specs(ctx, x, calls)


def gru_single_step_gradient(op) -> str | None:
    """Why a GRU's single step (x [B, X]) has no gradient kernels: its gates gradient [1, B, 7, H] leads with
    the step, not the batch, so it is no batch-sized tensor of the plan."""
    if op.operands and op.operands[0].type.shape is not None and len(op.operands[0].type.shape) == 2:
        return ("the gradient of a GRU's single step (x [B, X], SINGA's unrolled form; a sequence [T, B, X] "
                "has kernels): train it on the reference executor (--target reference)")
    return None


def lower_gru_grad_data(ctx, members) -> KernelSpec:
    """dx: one GEMM over all T * B rows (the three gates' blocks its K); dh0: a copy of step 0's block."""
    op = single_member(members)
    a = op_attrs(op)
    gates = ctx.value(op.operands[0])
    if a["wrt"] == "x":
        from .lstm import gates_grad_x
        roles = [f"{g}_hx" for g in "zrc"]
        call = gates_grad_x(gates, {r: ctx.param(op, r) for r in roles}, roles, tuple(ctx.out.shape), out=ctx.out,
                            allow_tf32=ctx.tf32, launch=False, **pinned(gates_grad_x, ctx))
        return grows_with_steps(ctx, gates, call)
    from .elementwise import elementwise_chain
    pin = {k: v for k, v in ctx.pin.items() if k in ("block", "num_warps")}
    return KernelSpec(elementwise_chain(gates[0, :, _GRU_BLOCK["dh_prev"]], [], out=ctx.out, launch=False, **pin), 1,
                      FIXED_GRID)


def lower_gru_grad_param(ctx, members) -> KernelSpec:
    """*_hx: dA^T x; z_hh, r_hh: dA^T h[t-1]; c_hh: uc^T hc (netc's gemm on transposed views, K = T * B);
    *_b: the column sums of dA."""
    op = single_member(members)
    g, kind = op_attrs(op)["role"].split("_")
    gates = ctx.value(op.operands[0])
    t, b, _, h = gates.shape
    da = gates[:, :, _GRU_BLOCK["uc" if (g, kind) == ("c", "hh") else g]]
    if kind in ("hx", "hh"):
        from .gemm import gemm
        other = ctx.value(op.operands[1]) if kind == "hx" else gates[:, :, _GRU_BLOCK["hc" if g == "c" else "h_prev"]]
        call = gemm(da.reshape(t * b, h).t(), other.reshape(t * b, -1), out=ctx.out, allow_tf32=ctx.tf32,
                    launch=False, **{**pinned(gemm, ctx), "split": 1})
        return KernelSpec(call, 1, FIXED_GRID)
    from .lstm import lstm_column_sums
    return KernelSpec(lstm_column_sums(da, None, out=ctx.out, launch=False, **pinned(lstm_column_sums, ctx)), 1,
                      FIXED_GRID)


# op name -> the keywords of its kernels/lowering.py Lowering
RECURRENT_LOWERINGS = {
    "netc.lstm": dict(lower=lower_lstm),
    "netc.lstm_grad_gates": dict(lower=lower_lstm_grad_gates),
    "netc.lstm_grad_data": dict(lower=lower_lstm_grad_data),
    "netc.lstm_grad_param": dict(lower=lower_lstm_grad_param),
    "netc.gru": dict(lower=lower_gru),
    "netc.gru_grad_gates": dict(lower=lower_gru_grad_gates, unsupported=gru_single_step_gradient),
    "netc.gru_grad_data": dict(lower=lower_gru_grad_data),
    "netc.gru_grad_param": dict(lower=lower_gru_grad_param),
}


# --------------------------------------------------------------------------- interpreter tiles

def _tiles_input(call):
    """The input GEMM's tiles, which the group's recurrence shares (its BLOCK_M rows of the batch)."""
    a = call_args(call)
    return dict(block_m=pow2_between(a["M"], 16, 256), block_n=pow2_between(a["H"], 16, 256),
                block_k=pow2_between(max(a["X"], a["H"]), 16, 256))


def _tiles_grad_x(call):
    a = call_args(call)
    return dict(block_m=pow2_between(a["M"], 16, 256), block_n=pow2_between(a["X"], 16, 256),
                block_k=pow2_between(a["H"], 16, 256))


def _tiles_column_sums(call):
    a = call_args(call)
    bn = pow2_between(a["N"], 1, 1024)
    return dict(block_n=bn, block_m=pow2_between(a["M"], 1, max(1, 2 ** 16 // bn)))


# kernel name -> the large tiles of the interpreter's block policy (kernels/lowering.py INTERPRETER_TILES)
RECURRENT_TILES = {
    "lstm_input_kernel": _tiles_input,
    "lstm_grad_x_kernel": _tiles_grad_x,
    "lstm_column_sums_kernel": _tiles_column_sums,
}
