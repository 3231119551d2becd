"""The lowering-table entries of contrastive divergence's ops (netc/ops/energy.py; kernels/lowering.py reads
ENERGY_LOWERINGS and ENERGY_TILES into its tables), and the weight an inner product reads transposed
(SINGA's `transpose: true` share, an autoencoder's decoder tied to its encoder: `transpose_weight`).

* netc.rbm_sample: kernels/energy.py rbm_sample on the step's seed input, its grid over the sample's
  elements (H per sample); netc.rbm_reconstruct: gemm with the sigmoid epilogue, its grid over the batch's
  rows; netc.rbm_statistics and netc.rbm_error reduce over the batch into fixed-size results (FIXED_GRID).
* A transposed weight W [M, K] is W.t(), a view: the forward is gemm(x, W.t()) and the plain data gradient
  gemm(dz, W). The data gradient with a fused activation (a prologue or epilogue: it runs as
  conv2d_grad_data on 1x1 views, which reads its filter [K, M] with contiguous columns) first copies W.t()
  into the workspace (a setup kernel, as conv2d's K-major filter copy), and reads the copy.

Like the table, this module imports no launcher until an entry runs.
"""
from __future__ import annotations

from .spec import FIXED_GRID, KernelSpec, call_args, op_attrs, pinned, pow2_between, row_factor, single_member


def lower_rbm_sample(ctx, members) -> KernelSpec:
    from .energy import rbm_sample
    op = single_member(members)
    a = op_attrs(op)
    h = ctx.value(op.operands[0])
    call = rbm_sample(h, ctx.value(op.operands[1]), int(a["salt"]), int(a["offset"]), bool(a["gaussian"]),
                      out=ctx.out, launch=False, **pinned(rbm_sample, ctx))
    return KernelSpec(call, h.numel() // ctx.batch, "BLOCK")


def lower_rbm_reconstruct(ctx, members) -> KernelSpec:
    from .energy import rbm_reconstruct
    from .gemm import gemm
    op = single_member(members)
    hs = ctx.value(op.operands[0])
    pin = {k: v for k, v in pinned(gemm, ctx).items() if k not in ("split", "workspace")}
    call = rbm_reconstruct(hs, ctx.param(op, "weight"), ctx.param(op, "bias"), out=ctx.out, allow_tf32=ctx.tf32,
                           launch=False, **pin)
    return KernelSpec(call, row_factor(hs, ctx), "BLOCK_M")


def lower_rbm_statistics(ctx, members) -> list:
    from .energy import rbm_statistics
    op = single_member(members)
    call = rbm_statistics(*(ctx.value(v) for v in op.operands), role=op_attrs(op)["role"], out=ctx.out,
                          allow_tf32=ctx.tf32, launch=False, **pinned(rbm_statistics, ctx))
    return [KernelSpec(call, 1, FIXED_GRID)]


def lower_rbm_error(ctx, members) -> list:
    from .energy import rbm_error
    op = single_member(members)
    call = rbm_error(ctx.value(op.operands[0]), ctx.value(op.operands[1]), out=ctx.out, launch=False,
                     **pinned(rbm_error, ctx))
    return [KernelSpec(call, 1, FIXED_GRID)]


ENERGY_LOWERINGS = {
    "netc.rbm_sample": lower_rbm_sample,
    "netc.rbm_reconstruct": lower_rbm_reconstruct,
    "netc.rbm_statistics": lower_rbm_statistics,
    "netc.rbm_error": lower_rbm_error,
}


# --------------------------------------------------------------------------- a weight read transposed

def weight_as_read(ctx, op):
    """The [K, M] weight an inner product (or its data gradient) multiplies by: its parameter, or with
    transpose_weight the parameter [M, K]'s transposed view."""
    w = ctx.param(op, "weight")
    return w.t() if op.attrs.get("transpose_weight") else w


def contiguous_weight(ctx, op):
    """(setup KernelSpecs, the [K, M] weight with contiguous columns): for a transposed weight, a copy of
    W.t() into the workspace made before each run of the layer (the copy's kernel is a setup kernel of
    the group); else the parameter itself and no setup."""
    w = weight_as_read(ctx, op)
    if not op.attrs.get("transpose_weight"):
        return [], w
    from .elementwise import narrow
    k, m = w.shape
    ws = ctx.workspace(k * m)[:k * m].view(k, m)
    copy = narrow(w, 0, 0, k, out=ws, launch=False, **{n: v for n, v in ctx.pin.items() if n == "block"})
    copy.setup = True
    return [KernelSpec(copy, 1, FIXED_GRID)], ws


# --------------------------------------------------------------------------- interpreter tiles

def _tiles_sample(call):
    return dict(block=pow2_between(call_args(call)["NUMEL"], 1, 2 ** 18))


def _tiles_weight_stats(call):
    a = call_args(call)
    bm, bn = pow2_between(a["V"], 16, 256), pow2_between(a["H"], 16, 512)
    return dict(block_m=bm, block_n=bn, block_k=pow2_between(a["B"], 16, max(16, 2 ** 17 // max(bm, bn))))


def _tiles_bias_stats(call):
    a = call_args(call)
    bc = pow2_between(a["C"], 1, 1024)
    return dict(block_c=bc, block_r=pow2_between(a["B"], 1, max(1, 2 ** 16 // bc)))


ENERGY_TILES = {
    "rbm_sample_kernel": _tiles_sample,
    "rbm_weight_stats_kernel": _tiles_weight_stats,
    "rbm_bias_stats_kernel": _tiles_bias_stats,
    "rbm_error_kernel": lambda call: dict(block=pow2_between(call_args(call)["NUMEL"], 1, 2 ** 18)),
}
