"""Losses and metrics: SoftmaxLoss (softmax + cross-entropy against integer labels) and
EuclideanLoss reduce to a scalar (the batch mean); ArgSort and Accuracy give the top-k classes
per sample (SINGA's kArgSort / kAccuracy data blobs).

Kernels (netc/kernels/loss.py, loss_grad.py; lowering rows in kernels/sequence_lowering.py) for every
form of the two losses and their gradients: per sample (rows of axis 0), per step of a time-major
sequence (logits [T, B, C] with labels [T, B]: the per-sample kernels over the T*B steps as rows) and
masked by lengths [B] (the same kernels, each row weighted by whether its step is valid, the sum divided
by the valid steps; a padding step's label is never read there)."""
from __future__ import annotations

from ..diagnostics import NetcError
from .registry import AttrSpec, Cost, OpDef, ShapeError, prod, register
from .sequence import check_lengths, check_lengths_dtype, check_lengths_shape, step_mask


# --------------------------------------------------------------------------- per-step readings

def per_step(x: tuple, y: tuple, masked: bool) -> bool:
    """Whether a SoftmaxLoss over logits x and labels y reads them per step of a time-major sequence:
    always with lengths (`masked`); without, for labels [T, B] of class indices that the per-sample reading
    ([N] / [N, 1] / [N, C] against logits flattened to [N, C]) cannot take."""
    if masked:
        return True
    return len(x) >= 3 and tuple(y) == tuple(x[:2]) and prod(y[1:]) not in (1, prod(x[1:]))


def step_classes(ins: list) -> int:
    """C, the classes per step of a per-step SoftmaxLoss (x [T, B, ...], labels [T, B] / [T, B, 1] / one-hot
    [T, B, C], optional lengths [B]), or ShapeError."""
    x, y = ins[0], ins[1]
    if len(x) < 3:
        raise ShapeError(f"a SoftmaxLoss with lengths reads time-major logits [T, B, classes...] (rank >= 3), "
                         f"got {list(x)}", operand=0)
    c = prod(x[2:])
    if len(y) < 2 or tuple(y[:2]) != tuple(x[:2]) or prod(y[2:]) not in (1, c):
        raise ShapeError(f"per-step labels must be class indices [T, B] = {list(x[:2])} (or [T, B, 1]) or one-hot "
                         f"[T, B, {c}], got {list(y)}", operand=1)
    if len(ins) == 3:
        check_lengths_shape(x, ins[2], 2, "SoftmaxLoss")
    return c


def _step_pair(ins: list) -> None:
    x, y, n = ins
    if len(x) < 2:
        raise ShapeError(f"an EuclideanLoss with lengths reads time-major inputs [T, B, ...], got {list(x)}",
                         operand=0)
    if tuple(y[:2]) != tuple(x[:2]) or prod(y) != prod(x):
        raise ShapeError(f"EuclideanLoss inputs must have the same shape: {list(x)} vs {list(y)}", operand=1)
    check_lengths_shape(x, n, 2, "EuclideanLoss")


def step_weights(a: dict, lengths, x, what: str):
    """[T, B] in x's dtype: each step's weight in a per-step mean, 1 / sum(lengths) on the valid steps and 0 on
    padding (1 / (T*B) everywhere without lengths)."""
    import torch
    t, b = x.shape[0], x.shape[1]
    if lengths is None:
        return torch.full((t, b), 1.0 / (t * b), dtype=x.dtype, device=x.device)
    n = check_lengths(lengths.to(x.device), t, a.get("name"), what)
    return step_mask(n, t, x.dtype) / float(n.sum())


def class_ids(a: dict, ids, c: int, b: int | None = None):
    """A SoftmaxLoss's class-index labels as int64, or NetcError naming the first that is not a class 0 to C-1
    (a fractional one too); `b`: the batch of a per-step loss (labels [T*B], named by step and sample)."""
    import torch
    name = a.get("name")
    if ids.is_floating_point() and not bool(torch.equal(ids, ids.round())):
        raise NetcError(f"SoftmaxLoss '{name}': its labels must be class indices, got fractional values")
    ids = ids.long()
    bad = (ids < 0) | (ids >= c)
    if bool(bad.any()):
        k = int(bad.nonzero()[0, 0])
        where = f"at step {k // b} of sample {k % b}" if b else f"of sample {k}"
        raise NetcError(f"SoftmaxLoss '{name}': the label {int(ids[k])} {where} is not a class 0 to {c - 1}")
    return ids


def _step_softmax(a: dict, ins: list):
    """(weights [T*B], log_softmax [T*B, C], targets [T*B, C]) of a per-step SoftmaxLoss."""
    import torch
    from .reference import in_compute_dtype
    x, y = in_compute_dtype(ins[0]), ins[1]
    t, b = x.shape[0], x.shape[1]
    logp = torch.log_softmax(x.reshape(t * b, -1), dim=1)
    c = logp.shape[1]
    if y[0, 0].numel() == 1:    # class indices
        ids = class_ids(a, y.reshape(-1), c, b)
        target = torch.nn.functional.one_hot(ids.to(x.device), c).to(x.dtype)
    else:
        target = in_compute_dtype(y).reshape(logp.shape).to(x.device)
    w = step_weights(a, ins[2] if len(ins) > 2 else None, x, "SoftmaxLoss")
    return w.reshape(-1), logp, target


@register
class SoftmaxLoss(OpDef):
    name = "softmax_loss"
    is_loss = True
    label_operand = 1   # class indices or one-hot targets
    classifier = True
    types = ("SoftmaxLoss", "SoftmaxCrossEntropy")
    f32_result = True   # losses stay f32 in 16-bit nets
    arity = (2, 3)
    attrs = {}
    lengths_operand = 2
    doc = ("Cross-entropy of softmax(logits) against labels: logits [N, ...] (flattened to [N, C]), "
           "labels [N] or [N, 1] (class indices) or [N, C] (one-hot). Output: scalar mean loss. "
           "Per step of a time-major sequence: logits [T, B, ...] (C = the features per step) with labels "
           "[T, B] (class indices; one-hot [T, B, C] too when lengths are given), the mean over the T*B steps; "
           "with lengths [B] (i32/i64, 1 to T) the mean over the valid steps only (t < lengths[b]). "
           "FLOPs: 5 per logit forward, 2 backward.")

    def singa_layer(self, a, ins, v1, scale, plain):
        return "kSoftmaxLoss", ["softmaxloss_conf { topk: 1 }"], []

    def eager(self, a, params, x_shape, out_shape, training):
        """F.cross_entropy for class indices; one-hot (or soft) targets by hand."""
        import torch
        import torch.nn.functional as F

        def ce(x, labels, *lengths):
            if lengths or per_step(tuple(x.shape), tuple(labels.shape), False):   # masked or per step: by hand
                return self.reference(a, [x, labels, *lengths], params)
            x = x.reshape(x.shape[0], -1)
            if labels.numel() == x.shape[0] and x.shape[1] != 1:
                return F.cross_entropy(x, labels.reshape(-1).long())
            return -(labels.to(x.dtype).reshape(x.shape) * torch.log_softmax(x, 1)).sum(1).mean()
        return ce

    def infer(self, a, ins):
        if len(ins) == 3 or per_step(ins[0], ins[1], False):
            step_classes(ins)
            return ()
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

    def check_dtypes(self, a, dtypes):
        if len(dtypes) == 3:
            check_lengths_dtype(dtypes, 2, "SoftmaxLoss")

    def label_classes(self, a, ins):
        if len(ins) == 3 or per_step(ins[0], ins[1], False):
            return step_classes(ins), len(ins[1]) == 2 or prod(ins[1][2:]) == 1
        return super().label_classes(a, ins)

    def reference(self, a, ins, params):
        import torch
        from .reference import in_compute_dtype
        if len(ins) == 3 or per_step(tuple(ins[0].shape), tuple(ins[1].shape), False):
            w, logp, target = _step_softmax(a, ins)
            return -(w.reshape(-1, 1) * target * logp).sum()
        x, y = ins
        logp = torch.log_softmax(in_compute_dtype(x).reshape(x.shape[0], -1), dim=1)
        if y[0].numel() == 1 and logp.shape[1] != 1:   # class indices [N] / [N, 1]
            ids = class_ids(a, y.reshape(-1), logp.shape[1]).to(logp.device)
            return -logp.gather(1, ids.reshape(-1, 1)).mean()
        return -(in_compute_dtype(y).reshape(logp.shape) * logp).sum(1).mean()   # one-hot (or soft) targets

    def cost(self, a, ins, out, needs_input_grad=True):
        n = prod(ins[0])
        return Cost(5 * n, 2 * n, 0)

    def gradient(self, g, op, dy):
        """(softmax(x) - target) / N for the logits; labels get none (they are data)."""
        if not g.needs(0):
            return [None] * len(op.operands), {}
        ins = list(op.operands) + ([dy] if dy is not None else [])
        masked = {"lengths": True} if len(op.operands) == 3 else None
        return [g.emit("netc.softmax_loss_grad", ins, masked)] + [None] * (len(op.operands) - 1), {}


@register
class EuclideanLoss(OpDef):
    name = "euclidean_loss"
    is_loss = True
    types = ("EuclideanLoss",)
    f32_result = True
    arity = (2, 3)
    lengths_operand = 2
    attrs = {}
    doc = ("0.5 * mean over the batch (axis 0) of ||a - b||^2; inputs must have the same element count. With "
           "lengths [B] (i32/i64, 1 to T), a and b time-major [T, B, ...]: 0.5 * the sum of ||a[t, b] - b[t, b]||^2 "
           "over the valid steps (t < lengths[b]) / their count, sum(lengths).")

    def singa_layer(self, a, ins, v1, scale, plain):
        return "kEuclideanLoss", [], []

    def eager(self, a, params, x_shape, out_shape, training):
        def sq(x, y, *lengths):
            if lengths:     # masked: by hand
                return self.reference(a, [x, y, *lengths], params)
            return 0.5 * ((x - y.reshape(x.shape)) ** 2).sum() / x.shape[0]
        return sq

    def check_dtypes(self, a, dtypes):
        if len(dtypes) == 3:
            check_lengths_dtype(dtypes, 2, "EuclideanLoss")

    def infer(self, a, ins):
        if len(ins) == 3:
            _step_pair(ins)
            return ()
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
        if len(ins) == 3:
            w = step_weights(a, ins[2], x, "EuclideanLoss")
            return 0.5 * (w * ((x - y.reshape(x.shape)) ** 2).reshape(w.shape + (-1,)).sum(2)).sum()
        return 0.5 * ((x - y.reshape(x.shape)) ** 2).sum() / x.shape[0]

    def cost(self, a, ins, out, needs_input_grad=True):
        n = prod(ins[0])
        return Cost(3 * n, 2 * n, 0)

    def gradient(self, g, op, dy):
        """(a - b) / N for the first input, its negative (in b's shape) for the second."""
        extra = [dy] if dy is not None else []
        out = [None] * len(op.operands)
        masked = {"lengths": True} if len(op.operands) == 3 else {}
        for i in (0, 1):
            if g.needs(i):
                out[i] = g.emit("netc.euclidean_loss_grad", list(op.operands) + extra, {"wrt": i, **masked},
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


LENGTHS_ATTR = AttrSpec("bool", False, doc="operand 2 is the loss's lengths [B] (a masked per-step loss)")


def _loss_ins(a: dict, ins: list) -> tuple[list, object]:
    """(the loss's operands, the seed or None) of a loss gradient's operands."""
    k = 3 if a.get("lengths") else 2
    return list(ins[:k]), (ins[k] if len(ins) > k else None)


@register
class SoftmaxLossGrad(OpDef):
    name = "softmax_loss_grad"
    training_only = True
    arity = (2, 4)
    f32_result = True
    attrs = {"lengths": LENGTHS_ATTR}
    doc = ("The gradient of SoftmaxLoss for its logits: (softmax(x) - target) / N in x's shape (soft targets: "
           "softmax(x) * sum(target) - target); per step w[t, b] * (softmax - target), w the step's weight (0 on "
           "padding, else 1 / the valid steps); times the optional scalar seed dloss. FLOPs 2 per logit.")

    def infer(self, a, ins):
        loss_ins, _ = _loss_ins(a, ins)
        if len(ins) > len(loss_ins) + 1:
            raise ShapeError("too many operands: logits, labels, the lengths (with lengths: true) and a seed",
                             operand=len(ins) - 1)
        SoftmaxLoss().infer(a, loss_ins)
        _scalar_seed(ins, len(loss_ins))
        return tuple(ins[0])

    def check_dtypes(self, a, dtypes):
        if a.get("lengths"):
            check_lengths_dtype(dtypes, 2, "SoftmaxLoss")

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(2 * prod(ins[0]))

    def reference(self, a, ins, params):
        import torch
        from . import reference as R      # lazy: torch is slow to import
        loss_ins, seed = _loss_ins(a, ins)
        if not (a.get("lengths") or per_step(tuple(ins[0].shape), tuple(ins[1].shape), False)):
            return R.softmax_loss_grad(ins[0], ins[1], seed)
        w, logp, target = _step_softmax(a, loss_ins)
        g = w.reshape(-1, 1) * (torch.exp(logp) * target.sum(1, keepdim=True) - target)
        if seed is not None:
            g = g * R.in_compute_dtype(seed)
        return g.reshape(tuple(ins[0].shape))


@register
class EuclideanLossGrad(OpDef):
    name = "euclidean_loss_grad"
    training_only = True
    arity = (2, 4)
    f32_result = True
    attrs = {"wrt": AttrSpec("int", 0, doc="which input: 0 (a) or 1 (b)"), "lengths": LENGTHS_ATTR}
    doc = ("The gradient of EuclideanLoss for input `wrt`: +-(a - b) / N in that input's shape (with lengths: "
           "+-(a - b) / sum(lengths) on the valid steps, 0 on padding). FLOPs 2 per element.")

    def infer(self, a, ins):
        loss_ins, _ = _loss_ins(a, ins)
        if len(ins) > len(loss_ins) + 1:
            raise ShapeError("too many operands: a, b, the lengths (with lengths: true) and a seed",
                             operand=len(ins) - 1)
        EuclideanLoss().infer(a, loss_ins)
        _scalar_seed(ins, len(loss_ins))
        if a["wrt"] not in (0, 1):
            raise ShapeError(f"wrt must be 0 or 1, got {a['wrt']}", attr="wrt")
        return tuple(ins[a["wrt"]])

    def check_dtypes(self, a, dtypes):
        if a.get("lengths"):
            check_lengths_dtype(dtypes, 2, "EuclideanLoss")

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(2 * prod(ins[0]))

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        loss_ins, seed = _loss_ins(a, ins)
        if not a.get("lengths"):
            return R.euclidean_loss_grad(ins[0], ins[1], a["wrt"], seed)
        x = R.in_compute_dtype(ins[0])
        w = step_weights(a, ins[2], x, "EuclideanLoss")
        d = w.reshape(w.shape + (1,) * (x.dim() - 2)) * (x - R.in_compute_dtype(ins[1]).reshape(x.shape))
        if seed is not None:
            d = d * R.in_compute_dtype(seed)
        return d if a["wrt"] == 0 else (-d).reshape(tuple(ins[1].shape))


# --------------------------------------------------------------------------- Brainstorm's binomial losses

_CLIP = AttrSpec("number", 1e-6, doc="probabilities are clipped to [clip, 1] before the log (Brainstorm: 1e-6)")
_BATCH_AXIS = AttrSpec("int", 0, doc="the samples' axis: the sum is divided by its size (1: a time-major [T, B, ...] "
                                     "sequence, as Brainstorm's Loss divides by B)")


def _batch_axis(a: dict, x: tuple) -> None:
    if not 0 <= a["batch_axis"] < len(x):
        raise ShapeError(f"batch_axis {a['batch_axis']} is not an axis of the input {list(x)}", attr="batch_axis")


def _binomial_terms(a: dict, x, t):
    """(p, ln clip(p), ln clip(1 - p)) of a BinomialCE: p = sigmoid(x) with logits, else x."""
    import torch
    p = torch.sigmoid(x) if a["logits"] else x
    c = float(a["clip"])
    return p, torch.log(torch.clamp(p, c, 1.0)), torch.log(torch.clamp(1 - p, c, 1.0))


def _binomial_shapes(a: dict, ins: list) -> None:
    x, t = ins[0], ins[1]
    if not x:
        raise ShapeError("BinomialCE needs an input with a batch axis, got a scalar []", operand=0)
    if tuple(t) != tuple(x):
        raise ShapeError(f"BinomialCE targets must have the input's shape {list(x)}, got {list(t)}", operand=1)
    _batch_axis(a, x)


@register
class BinomialCE(OpDef):
    name = "binomial_ce"
    is_loss = True
    types = ("BinomialCE", "BinomialCrossEntropy", "SigmoidCE")
    f32_result = True
    arity = (2, 2)
    attrs = {"logits": AttrSpec("bool", False, doc="the input is logits: p = sigmoid(x) (Brainstorm's SigmoidCE); "
                                                   "false: x is the probability (BinomialCrossEntropy)"),
             "clip": _CLIP, "batch_axis": _BATCH_AXIS}
    doc = ("Binomial cross-entropy against targets t of the input's shape: the sum over every element of "
           "-(t ln clip(p) + (1 - t) ln clip(1 - p)), divided by the batch (the size of batch_axis, 0: [B, ...]; 1: "
           "a sequence [T, B, ...]); p = x, or sigmoid(x) with "
           "logits: true; clip(v) = min(max(v, clip), 1). Brainstorm's BinomialCrossEntropy (logits false) and "
           "SigmoidCE (logits true) each followed by a Loss. The targets get no gradient. FLOPs: 8 per element.")

    def infer(self, a, ins):
        _binomial_shapes(a, ins)
        return ()

    def reference(self, a, ins, params):
        from .reference import in_compute_dtype
        x, t = in_compute_dtype(ins[0]), in_compute_dtype(ins[1])
        _, lp, lq = _binomial_terms(a, x, t)
        return -(t * lp + (1 - t) * lq).sum() / x.shape[a["batch_axis"]]

    def cost(self, a, ins, out, needs_input_grad=True):
        n = prod(ins[0])
        return Cost(8 * n, 10 * n, 0)

    def gradient(self, g, op, dy):
        """d/dx of the clipped sum (binomial_ce_grad); the targets are data."""
        if not g.needs(0):
            return [None, None], {}
        ins = list(op.operands) + ([dy] if dy is not None else [])
        a = self.attrs_of(op)
        return [g.emit("netc.binomial_ce_grad", ins, {k: a[k] for k in ("logits", "clip", "batch_axis")}), None], {}


@register
class BinomialCEGrad(OpDef):
    name = "binomial_ce_grad"
    training_only = True
    arity = (2, 3)
    f32_result = True
    attrs = dict(BinomialCE.attrs)
    doc = ("The gradient of BinomialCE for its input, times the seed (operand 2, a scalar) if given: "
           "-(t [clip <= p] / p - (1 - t) [clip <= 1 - p] / (1 - p)) / N, times p (1 - p) with logits. "
           "FLOPs 10 per element.")

    def infer(self, a, ins):
        _binomial_shapes(a, ins)
        _scalar_seed(ins, 2)
        return tuple(ins[0])

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(10 * prod(ins[0]))

    def reference(self, a, ins, params):
        from .reference import in_compute_dtype
        x, t = in_compute_dtype(ins[0]), in_compute_dtype(ins[1])
        p, _, _ = _binomial_terms(a, x, t)
        c = float(a["clip"])
        q = 1 - p
        on_p, on_q = (p >= c) & (p <= 1), (q >= c) & (q <= 1)     # where the clamps pass a gradient (torch's)
        dp = -(t * on_p / p.clamp(min=c) - (1 - t) * on_q / q.clamp(min=c)) / x.shape[a["batch_axis"]]
        d = dp * p * q if a["logits"] else dp
        return d * in_compute_dtype(ins[2]) if len(ins) > 2 else d


# --------------------------------------------------------------------------- Brainstorm's decay losses

@register
class DecayLoss(OpDef):
    name = "decay_loss"
    is_loss = True
    types = ("DecayLoss", "L1Decay", "L2Decay")
    f32_result = True
    arity = (1, 1)
    attrs = {"norm": AttrSpec("enum", "l2", ("l1", "l2", "sum"), doc="l1: the sum of |x|; l2: 0.5 * the sum of x^2; "
                                                                     "sum: the sum of x (Brainstorm's Loss itself)"),
             "batch_axis": _BATCH_AXIS}
    doc = ("A penalty on a value as a loss: the sum over every element of |x| (norm l1), 0.5 x^2 (norm l2) or x (norm "
           "sum: Brainstorm's Loss on a value that is no netc loss), "
           "divided by the batch (the size of batch_axis). Brainstorm's L1Decay / L2Decay each followed by a Loss. "
           "Its gradient is sign(x) / N, x / N or 1 / N. No kernel yet (reference executor only). FLOPs: 2 per "
           "element forward, 2 backward.")

    def infer(self, a, ins):
        if not ins[0]:
            raise ShapeError("DecayLoss needs an input with a batch axis, got a scalar []", operand=0)
        _batch_axis(a, ins[0])
        return ()

    def reference(self, a, ins, params):
        from .reference import in_compute_dtype
        x = in_compute_dtype(ins[0])
        s = {"l1": x.abs(), "l2": 0.5 * x * x, "sum": x}[a["norm"]].sum()
        return s / x.shape[a["batch_axis"]]

    def cost(self, a, ins, out, needs_input_grad=True):
        n = prod(ins[0])
        return Cost(2 * n, 2 * n, 0)

    def gradient(self, g, op, dy):
        if not g.needs(0):
            return [None], {}
        ins = list(op.operands) + ([dy] if dy is not None else [])
        a = self.attrs_of(op)
        return [g.emit("netc.decay_loss_grad", ins, {"norm": a["norm"], "batch_axis": a["batch_axis"]})], {}


@register
class DecayLossGrad(OpDef):
    name = "decay_loss_grad"
    training_only = True
    arity = (1, 2)
    f32_result = True
    attrs = dict(DecayLoss.attrs)
    doc = ("The gradient of DecayLoss, times the seed (operand 1, a scalar) if given: sign(x) / N (l1), x / N (l2) or "
           "1 / N (sum).")

    def infer(self, a, ins):
        DecayLoss().infer(a, ins[:1])
        _scalar_seed(ins, 1)
        return tuple(ins[0])

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(2 * prod(ins[0]))

    def reference(self, a, ins, params):
        import torch
        from .reference import in_compute_dtype
        x = in_compute_dtype(ins[0])
        d = {"l1": torch.sign(x), "l2": x, "sum": torch.ones_like(x)}[a["norm"]] / x.shape[a["batch_axis"]]
        return d * in_compute_dtype(ins[1]) if len(ins) > 1 else d
