"""Sequences of different lengths in one batch, and reductions over time (issue 23).

A batch of sequences is time-major and padded to the longest, x [T, B, ...], with a per-sample
length, lengths [B] (an integer input, i32 or i64): sample b's valid steps are t = 0 .. lengths[b]-1,
the rest is padding whose values do not matter. How the mask reaches an op: the op takes `lengths`
as an operand (OpDef.lengths_operand says which), and builds the mask t < lengths[b] itself; no op
reads a mask tensor, and an op without the operand treats every step as valid. A length outside
[1, T] (or a fractional one) is an error at run time, naming the layer; random inputs draw lengths
in [1, T] (runtime/reference.py). The ops that read lengths: SequencePool (here), and SoftmaxLoss and
EuclideanLoss (ops/loss.py: their per-step forms, averaged over the valid steps).

SequencePool reduces x [T, B, ...] over time to [B, ...] with `mode`:
  last   x[lengths[b]-1, b]                 PaddlePaddle v2's last_seq (paddle.layer.last_seq)
  first  x[0, b]                            first_seq
  max    the largest of the valid steps     pooling with MaxPooling (padding never wins)
  mean   the sum of the valid steps / lengths[b]   pooling with AvgPooling (its default strategy,
                                            'average', divides by the sequence's length)
Without lengths every sample is T steps long. Its gradient, seq_pool_grad, sends dy back to the
steps the reduction read: to step lengths[b]-1 (last), 0 (first), the first step holding the
maximum (max: ties go to the earliest step, as torch's argmax), or dy / lengths[b] to every valid
step (mean); padding steps get 0. lengths get no gradient (they are data).

Kernels (netc/kernels/sequence.py): a program per tile of samples and features loops over the steps (T a
run-time argument, the compiled targets' batch), the gradient writing every step of its tile (padding 0,
max's first maximum found again from x). A pool's result [B, ...] is per sample: where T is the batch, it
is not batch-sized (OpDef.reduces_time; memory/graph.py), and nor are the lengths (fed whole).

Costs (FLOPs, with N = T*B*F the elements of x, F the features per step): forward first and last 0
(a copy of B*F values), max N (a comparison per element), mean N + B*F (the sums and one division
per output); backward data first, last and max 0 (a scatter of dy), mean N (dy / lengths[b] spread
over the steps, padding zeroed).
"""
from __future__ import annotations

from ..diagnostics import NetcError
from .registry import AttrSpec, Cost, OpDef, ShapeError, prod, register

MODES = ("last", "first", "max", "mean")
PADDLE_NAMES = {"last": "last_seq", "first": "first_seq", "max": "pooling (MaxPooling)",
                "mean": "pooling (AvgPooling)"}


def check_lengths_shape(x: tuple, lengths: tuple, k: int, what: str) -> None:
    """ShapeError (at operand k) unless `lengths` is [B] for the time-major x [T, B, ...]."""
    if tuple(lengths) != (x[1],):
        raise ShapeError(f"{what}'s lengths must be [B] = [{x[1]}] (one per sample of the time-major [T, B, ...] "
                         f"input {list(x)}), got {list(lengths)}", operand=k)


def check_lengths_dtype(dtypes: list, k: int, what: str) -> None:
    if len(dtypes) > k and dtypes[k] not in ("i32", "i64"):
        raise ShapeError(f"{what} reads lengths as integers (i32 or i64), got {dtypes[k]} values", operand=k)


def check_lengths(lengths, t: int, layer: str | None, what: str):
    """The lengths as int64 (on their device), or NetcError naming the first outside [1, T]."""
    import torch
    if lengths.is_floating_point() and not bool(torch.equal(lengths, lengths.round())):
        raise NetcError(f"{what} '{layer}': its lengths must be integers, got fractional values")
    n = lengths.to(torch.int64)
    bad = (n < 1) | (n > t)
    if bool(bad.any()):
        b = int(bad.nonzero()[0, 0])
        raise NetcError(f"{what} '{layer}': sample {b} has length {int(n[b])}; lengths must be 1 to T = {t} "
                        f"(the padded sequence's steps)")
    return n


def step_mask(lengths, t: int, dtype):
    """[T, B] in `dtype`: 1 where step t of sample b is valid (t < lengths[b]), else 0."""
    import torch
    return (torch.arange(t, device=lengths.device).reshape(t, 1) < lengths.reshape(1, -1)).to(dtype)


def _picked_steps(a: dict, x, lengths):
    """[B, F] int64: the step each output element reads (first, last, the first maximum of max)."""
    import torch
    t, b = x.shape[0], x.shape[1]
    xf = x.reshape(t, b, -1)
    if a["mode"] == "first":
        return torch.zeros(b, xf.shape[2], dtype=torch.int64, device=x.device)
    if a["mode"] == "last":
        return (lengths - 1).reshape(b, 1).expand(b, xf.shape[2])
    mask = step_mask(lengths, t, torch.bool).reshape(t, b, 1)
    return xf.masked_fill(~mask, float("-inf")).argmax(0)


def _lengths_of(a: dict, ins, t: int, b: int, device):
    import torch
    if len(ins) > 1 and ins[1] is not None:
        return check_lengths(ins[1].to(device), t, a.get("name"), "SequencePool")
    return torch.full((b,), t, dtype=torch.int64, device=device)


def _pool_shapes(ins, what):
    x = ins[0]
    if len(x) < 2:
        raise ShapeError(f"{what} reads a time-major sequence [T, B, ...] (rank >= 2), got {list(x)}", operand=0)
    if x[0] < 1:
        raise ShapeError(f"{what} needs at least one step, got T = {x[0]}", operand=0)
    if len(ins) > 1:
        check_lengths_shape(x, ins[1], 1, what)
    return tuple(x[1:])


@register
class SequencePool(OpDef):
    name = "seq_pool"
    types = ("SequencePool",)
    arity = (1, 2)
    batch_axis = 1          # time-major: a split along axis 0 would cut the sequences
    lengths_operand = 1
    reduces_time = True     # its [B, ...] is per sample: not batch-sized where T is the batch (memory/graph.py)
    attrs = {"mode": AttrSpec("enum", choices=MODES,
                              doc="last, first, max or mean over each sample's valid steps (PaddlePaddle v2: "
                                  "last_seq, first_seq, pooling with MaxPooling / AvgPooling)")}
    doc = ("A reduction over time of a time-major sequence: x [T, B, ...] and optionally lengths [B] (i32/i64, "
           "1 to T; without them every sample is T steps) -> [B, ...]: the step lengths[b]-1 (last), step 0 "
           "(first), the maximum (max) or the mean (mean) of the valid steps; padding is never read. FLOPs: "
           "first/last 0, max T*B*F, mean T*B*F + B*F; backward 0 but mean's T*B*F.")

    def infer(self, a, ins):
        return _pool_shapes(ins, "SequencePool")

    def check_dtypes(self, a, dtypes):
        check_lengths_dtype(dtypes, 1, "SequencePool")

    def cost(self, a, ins, out, needs_input_grad=True):
        n, f_out = prod(ins[0]), prod(out)
        fwd = {"first": 0, "last": 0, "max": n, "mean": n + f_out}[a["mode"]]
        # (needs_input_grad is not read: layer_cost clears it for any operand fed by an input, lengths too)
        return Cost(fwd, n if a["mode"] == "mean" else 0, 0)

    def reference(self, a, ins, params):
        import torch
        from .reference import in_compute_dtype
        x = in_compute_dtype(ins[0])
        t, b = x.shape[0], x.shape[1]
        n = _lengths_of(a, ins, t, b, x.device)
        xf = x.reshape(t, b, -1)
        if a["mode"] == "mean":
            mask = step_mask(n, t, x.dtype).reshape(t, b, 1)
            y = (xf * mask).sum(0) / n.reshape(b, 1).to(x.dtype)
        else:
            y = xf.gather(0, _picked_steps(a, x, n).unsqueeze(0))[0]
        return y.reshape(tuple(x.shape[1:]))

    def gradient(self, g, op, dy):
        """seq_pool_grad: dy back to the steps the reduction read (x for max's argmax, lengths for the mask)."""
        if not g.needs(0):
            return [None] * len(op.operands), {}
        dx = g.emit("netc.seq_pool_grad", list(op.operands) + [dy], {"mode": self.attrs_of(op)["mode"]})
        return [dx] + [None] * (len(op.operands) - 1), {}


@register
class SequencePoolGrad(OpDef):
    name = "seq_pool_grad"
    training_only = True
    arity = (2, 3)
    batch_axis = 1
    lengths_operand = None
    attrs = {"mode": SequencePool.attrs["mode"]}
    doc = ("The gradient of SequencePool for x: x, lengths (when the pool has them) and dy [B, ...] -> [T, B, ...]: "
           "dy at the step each output read (first, last, the first maximum), or dy / lengths[b] at every valid "
           "step (mean); 0 on padding. FLOPs 0 (mean: T*B*F).")

    def infer(self, a, ins):
        *fwd, dy = ins
        out = _pool_shapes(fwd, "SequencePool")
        if tuple(dy) != out:
            raise ShapeError(f"the gradient {list(dy)} is not the SequencePool's output {list(out)}", operand=len(fwd))
        return tuple(fwd[0])

    def check_dtypes(self, a, dtypes):
        if len(dtypes) == 3:
            check_lengths_dtype(dtypes, 1, "SequencePool")

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(prod(out) if a["mode"] == "mean" else 0)

    def reference(self, a, ins, params):
        import torch
        from .reference import in_compute_dtype
        x, dy = in_compute_dtype(ins[0]), in_compute_dtype(ins[-1])
        t, b = x.shape[0], x.shape[1]
        n = _lengths_of(a, ins[:-1], t, b, x.device)
        dyf = dy.reshape(b, -1)
        if a["mode"] == "mean":
            mask = step_mask(n, t, x.dtype).reshape(t, b, 1)
            dx = mask * (dyf / n.reshape(b, 1).to(x.dtype)).unsqueeze(0)
        else:
            dx = torch.zeros((t,) + tuple(dyf.shape), dtype=x.dtype, device=x.device)
            dx.scatter_(0, _picked_steps(a, x, n).unsqueeze(0), dyf.unsqueeze(0))
        return dx.reshape(tuple(x.shape))
