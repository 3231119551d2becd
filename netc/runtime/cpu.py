"""The CPU target (`netc run --target cpu`, inference and `--train`): a program's ops in schedule order on the
CPU, computed in float32.

The reference executor (runtime/reference.py) is the oracle: it stores values in the program's dtype but each
op's reference computes in float64 (ops/reference.py in_compute_dtype), written for clarity. This target runs the
same ops with the same semantics, in f32 arithmetic (ops.reference.computing_in), and where a reference is slow
for a reason that is only its way of computing, a CPU lowering registered here beside it (CPU_LOWERINGS: the same
function, the fast way torch's CPU kernels allow). `--compare` checks a run against the float64 reference, as
for the interpreter target.

    CPU_LOWERINGS["netc.maxpool_grad"]   max pooling's gradient through torch's max_pool2d_with_indices and its
                                         backward (the reference: an argmax over unfolded windows, then a fold);
                                         the same routing: each window's gradient to its first maximum in
                                         row-major window order, none from a window without an in-bounds element

What this first version does not do yet (issue 28): store values in the memory plan's arena (every value a view
at its planned offset, no allocation per step), apply the fusion groups, and the remaining lowerings of ops whose
reference is slow (bench/cpu.py measures where the time goes against PyTorch eager and torch.compile).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .train import ReferenceTrainer


def maxpool_grad(a, ins, params):
    """netc.maxpool_grad (x, dy, NHWC) -> dx, as ops/reference.py maxpool_grad computes it."""
    from ..ops.geometry import pair
    from ..ops.reference import pads
    x, dy = ins
    kh, kw = pair(a["ksize"], "ksize")
    sh, sw = pair(a["strides"], "strides")
    xn = x.permute(0, 3, 1, 2)
    oh, ow, t, b, l, r = pads(xn.shape[2], xn.shape[3], kh, kw, sh, sw, a["padding"])
    padded = F.pad(xn, (max(l, 0), max(r, 0), max(t, 0), max(b, 0)), value=float("-inf")) if max(t, b, l, r) > 0 else xn
    if min(t, b, l, r) < 0:                 # a negative pad crops (Paleo's SAME of a stride-2 1x1 window)
        padded = padded[:, :, max(-t, 0):padded.shape[2] - max(-b, 0), max(-l, 0):padded.shape[3] - max(-r, 0)]
    y, idx = F.max_pool2d(padded.contiguous(), (kh, kw), (sh, sw), return_indices=True)
    g = dy.permute(0, 3, 1, 2).to(padded.dtype)
    g = g[:, :, :y.shape[2], :y.shape[3]]
    if max(t, b, l, r) >= min(kh, kw):     # a window may hold padding alone: it passes no gradient
        g = torch.where(torch.isfinite(y), g, 0.0)
    gpad = torch.ops.aten.max_pool2d_with_indices_backward(g.contiguous(), padded.contiguous(), [kh, kw], [sh, sw],
                                                           [0, 0], [1, 1], False, idx)
    full = F.pad(gpad, (-max(l, 0), -max(r, 0), -max(t, 0), -max(b, 0)))
    if min(t, b, l, r) < 0:
        full = F.pad(full, (max(-l, 0), max(-r, 0), max(-t, 0), max(-b, 0)))
    return full.permute(0, 2, 3, 1)


CPU_LOWERINGS = {"netc.maxpool_grad": maxpool_grad}


class CpuTrainer(ReferenceTrainer):
    """ReferenceTrainer's API (feed, step, losses, gradients, params) on the CPU target: f32 arithmetic and
    the CPU lowerings."""

    def __init__(self, module, network=None, params: dict | None = None, seed: int = 0, **kw):
        super().__init__(module, network, params, seed, torch.float32, **kw)

    def step(self, inputs: dict | None = None, lr: float | None = None, step_seed: int | None = None) -> dict:
        from ..ops.reference import computing_in
        from .reference import execute
        with computing_in(torch.float32):
            if self.carry_state:
                return super().step(inputs, lr, step_seed)
            named = execute(self.net, self.feed(inputs, lr, step_seed), self.params, self.dtype,
                            impls=CPU_LOWERINGS)
        self.steps += 1
        return named


def run_cpu(module, inputs: dict | None = None, params: dict | None = None, network=None, seed: int = 0) -> dict:
    """run_reference's contract on the CPU target: the outputs by layer name (f32)."""
    from ..ops.reference import computing_in
    from . import reference as ref
    with computing_in(torch.float32):
        return ref.run_reference(module, inputs, params, network=network, seed=seed, dtype=torch.float32,
                                 impls=CPU_LOWERINGS)
