"""Losses and metrics: SoftmaxLoss (softmax + cross-entropy against integer labels) and
EuclideanLoss reduce to a scalar (the batch mean); ArgSort and Accuracy give the top-k classes
per sample (SINGA's kArgSort / kAccuracy data blobs)."""
from __future__ import annotations

from .registry import AttrSpec, Cost, OpDef, ShapeError, prod, register


@register
class SoftmaxLoss(OpDef):
    name = "softmax_loss"
    is_loss = True
    label_operand = 1   # class indices or one-hot targets
    classifier = True
    types = ("SoftmaxLoss", "SoftmaxCrossEntropy")
    f32_result = True   # losses stay f32 in 16-bit nets
    arity = (2, 2)
    attrs = {}
    doc = ("Cross-entropy of softmax(logits) against labels: logits [N, ...] (flattened to [N, C]), "
           "labels [N] or [N, 1] (class indices) or [N, C] (one-hot). Output: scalar mean loss. "
           "FLOPs: 5 per logit forward, 2 backward.")

    def singa_layer(self, a, ins, v1, scale, plain):
        return "kSoftmaxLoss", ["softmaxloss_conf { topk: 1 }"], []

    def eager(self, a, params, x_shape, out_shape, training):
        """F.cross_entropy for class indices; one-hot (or soft) targets by hand."""
        import torch
        import torch.nn.functional as F

        def ce(x, labels):
            x = x.reshape(x.shape[0], -1)
            if labels.numel() == x.shape[0] and x.shape[1] != 1:
                return F.cross_entropy(x, labels.reshape(-1).long())
            return -(labels.to(x.dtype).reshape(x.shape) * torch.log_softmax(x, 1)).sum(1).mean()
        return ce

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
        from .reference import in_compute_dtype
        x, y = ins
        logp = torch.log_softmax(in_compute_dtype(x).reshape(x.shape[0], -1), dim=1)
        if y[0].numel() == 1 and logp.shape[1] != 1:   # class indices [N] / [N, 1]
            return -logp.gather(1, y.reshape(-1, 1).long()).mean()
        return -(in_compute_dtype(y).reshape(logp.shape) * logp).sum(1).mean()   # one-hot (or soft) targets

    def cost(self, a, ins, out, needs_input_grad=True):
        n = prod(ins[0])
        return Cost(5 * n, 2 * n, 0)

    def gradient(self, g, op, dy):
        """(softmax(x) - target) / N for the logits; labels get none (they are data)."""
        if not g.needs(0):
            return [None, None], {}
        ins = list(op.operands) + ([dy] if dy is not None else [])
        return [g.emit("netc.softmax_loss_grad", ins), None], {}


@register
class EuclideanLoss(OpDef):
    name = "euclidean_loss"
    is_loss = True
    types = ("EuclideanLoss",)
    f32_result = True
    arity = (2, 2)
    attrs = {}
    doc = "0.5 * mean over the batch of ||a - b||^2; inputs must have the same element count."

    def singa_layer(self, a, ins, v1, scale, plain):
        return "kEuclideanLoss", [], []

    def eager(self, a, params, x_shape, out_shape, training):
        return lambda x, y: 0.5 * ((x - y.reshape(x.shape)) ** 2).sum() / x.shape[0]

    def infer(self, a, ins):
        x, y = ins
        if not x or not y:
            raise ShapeError(f"EuclideanLoss needs inputs with a batch dimension, got {list(x)} and {list(y)}",
                             operand=0 if not x else 1)
        if prod(x) != prod(y) or x[0] != y[0]:
            raise ShapeError(f"EuclideanLoss inputs must have the same shape: {list(x)} vs {list(y)}", operand=1)
        return ()

    def reference(self, a, ins, params):
        from .reference import in_compute_dtype
        x, y = in_compute_dtype(ins[0]), in_compute_dtype(ins[1])
        return 0.5 * ((x - y.reshape(x.shape)) ** 2).sum() / x.shape[0]

    def cost(self, a, ins, out, needs_input_grad=True):
        n = prod(ins[0])
        return Cost(3 * n, 2 * n, 0)

    def gradient(self, g, op, dy):
        """(a - b) / N for the first input, its negative (in b's shape) for the second."""
        extra = [dy] if dy is not None else []
        out = [None, None]
        for i in (0, 1):
            if g.needs(i):
                out[i] = g.emit("netc.euclidean_loss_grad", list(op.operands) + extra, {"wrt": i},
                                tag=f"grad{i}" if g.needs(1 - i) else "grad")
        return out, {}


@register
class ArgSort(OpDef):
    name = "argsort"
    differentiable = False   # class indices: no gradient flows through
    types = ("ArgSort", "TopK")
    f32_result = True   # class indices: bf16 holds integers exactly only up to 256
    arity = (1, 1)
    attrs = {"topk": AttrSpec("int", 1, doc="how many classes per sample")}
    doc = "The indices of the `topk` largest features per sample, largest first: [N, ...] -> [N, topk]."

    singa_type = "kArgSort"

    def singa_layer(self, a, ins, v1, scale, plain):
        return self.singa_type, [f"argsort_conf {{ topk: {a.get('topk', 1)} }}"], []

    def infer(self, a, ins):
        (x,) = ins
        if len(x) < 2:
            raise ShapeError(f"ArgSort needs an input of rank >= 2, got {list(x)}", operand=0)
        if not 1 <= a["topk"] <= prod(x[1:]):
            raise ShapeError(f"topk {a['topk']} must be between 1 and the {prod(x[1:])} features", attr="topk")
        return (x[0], a["topk"])

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(prod(ins[0]) * a["topk"], 0, 0)

    def reference(self, a, ins, params):
        (x,) = ins
        return x.reshape(x.shape[0], -1).topk(a["topk"], dim=1).indices.to(x.dtype)


@register
class Accuracy(ArgSort):
    name = "accuracy"
    singa_type = "kAccuracy"
    label_operand = 1
    types = ("Accuracy",)
    arity = (2, 2)
    attrs = {"topk": AttrSpec("int", 1, doc="a sample counts as right if its label is among the top k")}
    doc = ("Top-k predictions per sample for an accuracy metric against labels [N] / [N, 1]: "
           "[N, ...], labels -> [N, topk] (SINGA's kAccuracy blob; the metric is the fraction of "
           "samples whose label is in their row).")

    def infer(self, a, ins):
        x, y = ins
        if len(x) < 2:
            raise ShapeError(f"Accuracy needs predictions of rank >= 2, got {list(x)}", operand=0)
        if not y or y[0] != x[0] or prod(y[1:]) != 1:
            raise ShapeError(f"labels {list(y)} must be class indices [N] or [N, 1] with N = {x[0]}", operand=1)
        return super().infer(a, [x])

    def reference(self, a, ins, params):
        return super().reference(a, ins[:1], params)


# --------------------------------------------------------------------------- gradients

def _scalar_seed(ins, k):
    if len(ins) > k and tuple(ins[k]) != ():
        raise ShapeError(f"the loss's gradient seed must be a scalar, got {list(ins[k])}", operand=k)


@register
class SoftmaxLossGrad(OpDef):
    name = "softmax_loss_grad"
    training_only = True
    arity = (2, 3)
    f32_result = True
    attrs = {}
    doc = ("The gradient of SoftmaxLoss for its logits: (softmax(x) - target) / N in x's shape (soft targets: "
           "softmax(x) * sum(target) - target); times the optional scalar seed dloss. FLOPs 2 per logit.")

    def infer(self, a, ins):
        SoftmaxLoss().infer(a, ins[:2])
        _scalar_seed(ins, 2)
        return tuple(ins[0])

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(2 * prod(ins[0]))

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.softmax_loss_grad(ins[0], ins[1], ins[2] if len(ins) > 2 else None)


@register
class EuclideanLossGrad(OpDef):
    name = "euclidean_loss_grad"
    training_only = True
    arity = (2, 3)
    f32_result = True
    attrs = {"wrt": AttrSpec("int", 0, doc="which input: 0 (a) or 1 (b)")}
    doc = "The gradient of EuclideanLoss for input `wrt`: +-(a - b) / N in that input's shape. FLOPs 2 per element."

    def infer(self, a, ins):
        EuclideanLoss().infer(a, ins[:2])
        _scalar_seed(ins, 2)
        if a["wrt"] not in (0, 1):
            raise ShapeError(f"wrt must be 0 or 1, got {a['wrt']}", attr="wrt")
        return tuple(ins[a["wrt"]])

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(2 * prod(ins[0]))

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.euclidean_loss_grad(ins[0], ins[1], a["wrt"], ins[2] if len(ins) > 2 else None)
