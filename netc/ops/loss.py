"""Losses: SoftmaxLoss (softmax + cross-entropy against integer labels) and EuclideanLoss.
Both reduce to a scalar (the batch mean)."""
from __future__ import annotations

from .registry import Cost, OpDef, ShapeError, prod, register


@register
class SoftmaxLoss(OpDef):
    name = "softmax_loss"
    types = ("SoftmaxLoss", "SoftmaxCrossEntropy")
    arity = (2, 2)
    attrs = {}
    doc = ("Cross-entropy of softmax(logits) against labels: logits [N, ...] (flattened to [N, C]), "
           "labels [N] or [N, 1] (class indices) or [N, C] (one-hot). Output: scalar mean loss. "
           "FLOPs: 5 per logit forward, 2 backward.")

    def infer(self, a, ins):
        x, y = ins
        if len(x) < 2:
            raise ShapeError(f"SoftmaxLoss logits need rank >= 2, got {list(x)}", operand=0)
        n, c = x[0], prod(x[1:])
        if not y:
            raise ShapeError(f"labels must be class indices [N] / [N, 1] or one-hot [N, {c}], got a scalar []",
                             operand=1)
        if y[0] != n:
            raise ShapeError(f"labels have batch {y[0]} but the logits have batch {n}", operand=1)
        if prod(y[1:]) not in (1, c):
            raise ShapeError(f"labels {list(y)} must be class indices [N] / [N, 1] or one-hot [N, {c}]", operand=1)
        return ()

    def reference(self, a, ins, params):
        import torch
        x, y = ins
        logp = torch.log_softmax(x.double().reshape(x.shape[0], -1), dim=1)
        if y[0].numel() == 1 and logp.shape[1] != 1:   # class indices [N] / [N, 1]
            return -logp.gather(1, y.reshape(-1, 1).long()).mean()
        return -(y.double().reshape(logp.shape) * logp).sum(1).mean()   # one-hot (or soft) targets

    def cost(self, a, ins, out, needs_input_grad=True):
        n = prod(ins[0])
        return Cost(5 * n, 2 * n, 0)


@register
class EuclideanLoss(OpDef):
    name = "euclidean_loss"
    types = ("EuclideanLoss",)
    arity = (2, 2)
    attrs = {}
    doc = "0.5 * mean over the batch of ||a - b||^2; inputs must have the same element count."

    def infer(self, a, ins):
        x, y = ins
        if not x or not y:
            raise ShapeError(f"EuclideanLoss needs inputs with a batch dimension, got {list(x)} and {list(y)}",
                             operand=0 if not x else 1)
        if prod(x) != prod(y) or x[0] != y[0]:
            raise ShapeError(f"EuclideanLoss inputs must have the same shape: {list(x)} vs {list(y)}", operand=1)
        return ()

    def reference(self, a, ins, params):
        x, y = ins[0].double(), ins[1].double()
        return 0.5 * ((x - y.reshape(x.shape)) ** 2).sum() / x.shape[0]

    def cost(self, a, ins, out, needs_input_grad=True):
        n = prod(ins[0])
        return Cost(3 * n, 2 * n, 0)
