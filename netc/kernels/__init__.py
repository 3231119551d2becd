"""netc's Triton kernel library: the templates codegen specializes (constexpr switches for fused
epilogues, block sizes as parameters), each with a small launcher taking torch tensors and the
op's netc attributes.

    gemm, inner_product     gemm.py         C = act(A @ B + bias, folded BN, residual)
    conv2d                  conv.py         implicit GEMM over NHWC, same epilogue, concat-slice output
    maxpool, avgpool        pool.py         NHWC, Paleo padding, padding excluded from averages
    lrn                     lrn.py          across channels
    softmax                 softmax.py      rows of the flattened features, numerically stable
    softmax_loss, ...       loss.py         softmax cross-entropy, euclidean loss: the batch mean
    elementwise_chain, ...  elementwise.py  a constexpr sequence of unary/binary ops in one pass
    compile_call            aot.py          cubins for sm_80/sm_90 without a GPU

Training (the gradient ops of a training program, netc/ops/*.py `training_only`):

    conv2d_grad_data, deconv2d      conv_grad.py   transposed implicit GEMM, the stride's phases as a grid axis
    conv2d_grad_filter, bias_grad   conv_grad.py   implicit GEMM / column sums over N*OH*OW, split deterministically
    inner_product_grad_data/_filter conv_grad.py   gemm on transposed views (1x1 conv gradients with a prologue)
    maxpool_grad, avgpool_grad,     pool_grad.py   gather-style: each input element sums its windows
      upsample2d_grad
    lrn_grad, batch_stats,          norm_grad.py   LRN's gradient; batch norm's training form and gradients
      batch_norm_train, batch_norm_grad, batch_norm_grad_scale, running_stats_update
    softmax_grad, softmax_loss_grad, loss_grad.py  one program per row; euclidean elementwise
      euclidean_loss_grad
    dropout_mask, dropout,          dropout.py     Philox masks (tl.rand, = reference.dropout_mask), x * mask,
      dropout_seeded                               x * mask from the seed (no mask tensor)
    activation_grad, narrow,        elementwise.py activation gradients as chain ops (fusable); offset copies;
      pad_dim, elementwise_max_grad                the max's gradient
    sgd_update, adam_update,        optim.py       one multi-tensor kernel per optimizer over a chunk table;
      rmsprop_update, adagrad_update, global_norm  the global norm (two stages, deterministic)

How each IR op lowers to these launchers (which one, and how its tensors and attributes become the
launcher's arguments) is one table, lowering.py's LOWERINGS, keyed by IR op name: codegen asks it.

Every launcher takes launch=False to return the resolved KernelCall (kernel, grid, arguments,
constexprs) instead of running it; the two-stage ones (split reductions, Adam's step counter, the
global norm) return a list of KernelCalls to run in order (train_common.py). Dropout is the identity
at inference and has no kernel there.

Kernels run on CUDA tensors, or on CPU tensors under Triton's interpreter: set TRITON_INTERPRET=1
before these modules are imported (the mode is fixed when a kernel is decorated). Names load
lazily. The float64 oracle they are tested against is netc.ops.reference (no Triton needed).
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "gemm": "gemm", "inner_product": "gemm",
    "conv2d": "conv",
    "maxpool": "pool", "avgpool": "pool",
    "lrn": "lrn",
    "softmax": "softmax",
    "softmax_loss": "loss", "euclidean_loss": "loss",
    "elementwise_chain": "elementwise", "elementwise": "elementwise", "relu": "elementwise",
    "sigmoid": "elementwise", "tanh": "elementwise", "batch_norm": "elementwise",
    "KernelCall": "common", "ACTIVATIONS": "common",
    "compile_call": "aot",
    # training
    "conv2d_grad_data": "conv_grad", "conv2d_grad_filter": "conv_grad", "bias_grad": "conv_grad",
    "inner_product_grad_data": "conv_grad", "inner_product_grad_filter": "conv_grad", "deconv2d": "conv_grad",
    "maxpool_grad": "pool_grad", "avgpool_grad": "pool_grad", "upsample2d_grad": "pool_grad",
    "lrn_grad": "norm_grad", "batch_stats": "norm_grad", "batch_norm_train": "norm_grad",
    "batch_norm_grad": "norm_grad", "batch_norm_grad_scale": "norm_grad", "running_stats_update": "norm_grad",
    "softmax_grad": "loss_grad", "softmax_loss_grad": "loss_grad", "euclidean_loss_grad": "loss_grad",
    "dropout_mask": "dropout", "dropout": "dropout", "dropout_seeded": "dropout",
    "activation_grad": "elementwise", "narrow": "elementwise", "pad_dim": "elementwise",
    "elementwise_max_grad": "elementwise",
    "sgd_update": "optim", "adam_update": "optim", "rmsprop_update": "optim", "adagrad_update": "optim",
    "global_norm": "optim", "multi_tensor_update": "optim", "chunk_table": "optim",
    "LOWERINGS": "lowering", "lowering_of": "lowering",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
