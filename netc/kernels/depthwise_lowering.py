"""The lowering-table entries of netc.depthwise_conv2d and its gradient ops (kernels/lowering.py reads
DEPTHWISE_LOWERINGS and DEPTHWISE_TILES into its tables): which launcher of kernels/depthwise.py each op
becomes, on the tensors codegen hands them (kernels/lowering.py's module docstring). Like the table, this
module imports no launcher until an entry runs.

The forward and the data gradient grow with the batch (BLOCK_P pixels of each image per program); the
filter gradient is one program per tap and channel block whatever the batch (it loops over the batch's
pixels inside)."""
from __future__ import annotations

from .spec import FIXED_GRID, KernelSpec, call_args, op_attrs, pinned, pow2_between, single_member


def lower_depthwise(ctx, members) -> KernelSpec:
    """The convolution with its bias and fused activation (kernels/depthwise.py depthwise_conv2d)."""
    from .depthwise import depthwise_conv2d
    op = single_member(members)
    a = op_attrs(op)
    bias = ctx.param(op, "bias") if a.get("bias", True) else None
    call = depthwise_conv2d(ctx.value(op.operands[0]), ctx.param(op, "weight"), bias, strides=a["strides"],
                            padding=a["padding"], activation=a["activation"], out=ctx.out, launch=False,
                            **pinned(depthwise_conv2d, ctx))
    return KernelSpec(call, ctx.out.shape[1] * ctx.out.shape[2], "BLOCK_P")


def lower_depthwise_grad_data(ctx, members) -> KernelSpec:
    from .depthwise import depthwise_conv2d_grad_data
    op = single_member(members)
    a = op_attrs(op)
    call = depthwise_conv2d_grad_data(ctx.value(op.operands[0]), ctx.param(op, "weight"), tuple(ctx.out.shape),
                                      a["strides"], a["padding"], out=ctx.out, launch=False,
                                      **pinned(depthwise_conv2d_grad_data, ctx))
    return KernelSpec(call, ctx.out.shape[1] * ctx.out.shape[2], "BLOCK_P")


def lower_depthwise_grad_filter(ctx, members) -> list:
    from .depthwise import depthwise_conv2d_grad_filter
    op = single_member(members)
    a = op_attrs(op)
    call = depthwise_conv2d_grad_filter(ctx.value(op.operands[0]), ctx.value(op.operands[1]), tuple(a["filter"][:2]),
                                        a["strides"], a["padding"], out=ctx.out, launch=False,
                                        **pinned(depthwise_conv2d_grad_filter, ctx))
    return [KernelSpec(call, 1, FIXED_GRID)]


DEPTHWISE_LOWERINGS = {
    "netc.depthwise_conv2d": lower_depthwise,
    "netc.depthwise_conv2d_grad_data": lower_depthwise_grad_data,
    "netc.depthwise_conv2d_grad_filter": lower_depthwise_grad_filter,
}


def _tiles(pixels: str, channels: str):
    def rule(call):
        a = call_args(call)
        bc = pow2_between(a[channels], 1, 1024)
        p = a["NB"] * a[pixels[0]] * a[pixels[1]]
        return dict(block_c=bc, block_p=pow2_between(p, 1, max(1, 2 ** 16 // bc)))
    return rule


# the interpreter's tiles (kernels/lowering.py INTERPRETER_TILES): as large as the problem
DEPTHWISE_TILES = {
    "depthwise_kernel": _tiles(("OH", "OW"), "CO"),
    "depthwise_grad_data_kernel": _tiles(("H", "W"), "C"),
    "depthwise_grad_filter_kernel": _tiles(("OH", "OW"), "CO"),
}
