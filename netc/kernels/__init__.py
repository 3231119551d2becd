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

Every launcher takes launch=False to return the resolved KernelCall (kernel, grid, arguments,
constexprs) instead of running it. Dropout is the identity at inference and has no kernel.

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
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
