"""Tiles as large as the problem for Triton's interpreter (codegen/lower.py large_tiles, the "large" block
policy): INTERPRETER_TILES, kernel name -> KernelCall -> launcher keywords; kernels/lowering.py re-exports it.
Each rule keeps a tile within tens of MiB and leaves a reduction unsplit."""
from __future__ import annotations

from typing import Callable

from .channel_permute_lowering import CHANNEL_PERMUTE_TILES
from .clip_lowering import CLIP_TILES
from .depthwise_lowering import DEPTHWISE_TILES
from .energy_lowering import ENERGY_TILES
from .recurrent_lowering import RECURRENT_TILES
from .seq_mask_lowering import SEQ_MASK_TILES
from .seq_reverse_lowering import SEQ_REVERSE_TILES
from .sequence_lowering import SEQUENCE_TILES
from .spec import call_args, pow2_between

def _tiles_gemm(call):
    a = call_args(call)
    return dict(block_m=pow2_between(a["M"], 16, 256), block_n=pow2_between(a["N"], 16, 512),
                block_k=pow2_between(a["K"], 16, 512), split=1)   # (one program per tile: no idle SMs to fill)


def _tiles_conv2d(call):
    a, k = call_args(call), call.constexprs
    m = a["NB"] * a["OH"] * a["OW"]
    kk = k["KH"] * k["KW"] * a["CI"] if k["FLAT_K"] else a["CI"]
    bn = pow2_between(a["CO"], 16, 512)
    bk = pow2_between(kk, 16, 512)
    return dict(block_m=pow2_between(m, 16, max(16, 2 ** 17 // max(bn, bk))), block_n=bn, block_k=bk)


def _tiles_pool_lrn(call):
    a = call_args(call)
    c = a["C"]
    p = a["NB"] * a["OH"] * a["OW"] if "OH" in a else a["P"]
    bc = pow2_between(c, 1, 1024)
    return dict(block_c=bc, block_p=pow2_between(p, 1, max(1, 2 ** 16 // bc)))


def _tiles_elementwise(call):
    return dict(block=pow2_between(call_args(call)["NUMEL"], 1, 2 ** 18))


def _tiles_conv2d_grad_data(call):
    a = call_args(call)
    m = a["NB"] * a["HJ"] * a["WJ"]
    bn, bk = pow2_between(a["CI"], 16, 512), pow2_between(a["CO"], 16, 512)
    return dict(block_m=pow2_between(m, 16, max(16, 2 ** 17 // max(bn, bk))), block_n=bn, block_k=bk)


def _tiles_conv2d_grad_filter(call):
    a, k = call_args(call), call.constexprs
    rows = k["KH"] * k["KW"] * a["CI"] if k.get("FLAT_K", k.get("FLAT")) else a["CI"]
    bm, bn = pow2_between(rows, 16, 512), pow2_between(a["CO"], 16, 512)
    return dict(block_m=bm, block_n=bn, block_k=pow2_between(a["NB"] * a["OH"] * a["OW"], 16, max(16, 2 ** 17 // max(bm, bn))),
                split=1)


def _tiles_rows(call, split=False):
    a = call_args(call)
    bc = pow2_between(a["C"], 1, 1024)
    out = dict(block_c=bc, block_r=pow2_between(a["M"], 1, max(1, 2 ** 16 // bc)))
    if split:
        out["split"] = 1
    return out


def _tiles_pool_grad(call):
    a = call_args(call)
    bc = pow2_between(a["C"], 1, 1024)
    return dict(block_c=bc, block_p=pow2_between(a["NB"] * a["H"] * a["W"], 1, max(1, 2 ** 16 // bc)))


def _tiles_lrn_grad(call):
    a = call_args(call)
    bc = pow2_between(a["C"], 1, 1024)
    return dict(block_c=bc, block_p=pow2_between(a["P"], 1, max(1, 2 ** 16 // bc)))


def _tiles_numel(key):
    def rule(call):
        a = call_args(call)
        n = a["NB"] * a["F"] if key == "NB*F" else a[key]
        return dict(block=pow2_between(n, 1, 2 ** 18))
    return rule


def _tiles_update(call):
    n = call.out.numel() if call.out is not None else 1024     # the parameter (one per launch)
    return dict(block=pow2_between(min(n, 65536), 16, 65536))


def _tiles_embedding(call):
    a = call_args(call)
    bn = pow2_between(a["D"], 1, 1024)
    return dict(block_n=bn, block_m=pow2_between(a["M"], 1, max(1, 2 ** 16 // bn)))


def _tiles_channels(call):
    return dict(block_c=pow2_between(call_args(call)["C"], 1, 1024))


# kernel name -> KernelCall -> launcher keywords of tiles as large as the problem (codegen/lower.py
# large_tiles: the interpreter's block policy; reductions unsplit); kernels not listed keep their
# launcher's tiles
INTERPRETER_TILES: dict[str, Callable] = {
    "gemm_kernel": _tiles_gemm,
    "conv2d_kernel": _tiles_conv2d,
    "pool2d_kernel": _tiles_pool_lrn,
    "lrn_kernel": _tiles_pool_lrn,
    "elementwise_kernel": _tiles_elementwise,
    "conv2d_grad_data_kernel": _tiles_conv2d_grad_data,
    "conv2d_grad_filter_kernel": _tiles_conv2d_grad_filter,
    **DEPTHWISE_TILES,
    **CLIP_TILES,
    "column_sums_kernel": lambda call: _tiles_rows(call, split=True),
    "batch_stats_kernel": lambda call: _tiles_rows(call, split=True),
    "batch_norm_rows_kernel": _tiles_rows,
    "pool_grad_kernel": _tiles_pool_grad,
    "upsample2d_grad_kernel": _tiles_pool_grad,
    "lrn_grad_kernel": _tiles_lrn_grad,
    "euclidean_loss_grad_kernel": _tiles_numel("NB*F"),
    "dropout_kernel": _tiles_numel("NUMEL"),
    "shifted_copy_kernel": _tiles_numel("NUMEL"),
    "max_grad_kernel": _tiles_numel("NUMEL"),
    "multi_tensor_update_kernel": _tiles_update,
    "running_stats_kernel": _tiles_channels,
    "embedding_kernel": _tiles_embedding,
    "fill_kernel": _tiles_numel("NUMEL"),
    **RECURRENT_TILES,
    **SEQUENCE_TILES,
    **SEQ_REVERSE_TILES,
    **CHANNEL_PERMUTE_TILES,
    **SEQ_MASK_TILES,
    **ENERGY_TILES,
}
