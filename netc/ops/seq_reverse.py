"""SequenceReverse (netc.seq_reverse): each sequence of a time-major batch in reverse order, the building
block of every backwards recurrence (issues 26 and 27).

x is [T, B, ...] padded at the end (docs/sequences.md) with optional lengths [B] (i32/i64, 1 to T):

    y[t, b] = x[lengths[b] - 1 - t, b]    for t <  lengths[b]   (the valid steps, last first)
    y[t, b] = x[t, b]                     for t >= lengths[b]   (padding copied through where it was)

Without lengths every sample is T steps: a flip of axis 0. The padding stays at the end, so the result
is again a sequence padded at the end with the same lengths, and the op is its own inverse; being a
permutation of the steps, it is also its own gradient: dx = seq_reverse(dy, lengths).

A recurrence backwards in time is not a flag of each recurrent op but three ops:
seq_reverse -> the forward recurrence -> seq_reverse (the Python API's `lstm(..., reverse=True)`,
netc.v2's `lstmemory(reverse=True)`). That is PaddlePaddle's reversed recurrence: its LstmLayer with
`reversed` runs each sequence from its last valid step to its first, starting from a zero state at
the last valid step, and writes each step's output at the step's own position
(paddle/gserver/layers/LstmLayer.cpp); padding never enters the recurrence because after the first
seq_reverse it is still at the end. An ONNX LSTM/GRU with direction "reverse" is the same three ops
over its sequence_lens; "bidirectional" is the forward op and that reversed form side by side.

Kernel: a gather (netc/kernels/seq_reverse.py), one program per tile of steps x samples x features.
Cost: 0 FLOPs forward and backward (a copy of T*B*F values).
"""
from __future__ import annotations

from .registry import Cost, OpDef, ShapeError, register
from .sequence import check_lengths, check_lengths_dtype, check_lengths_shape


def reversed_steps(x, lengths):
    """The reference's gather: x [T, B, ...] (torch) with lengths [B] (int64, checked) or None."""
    import torch
    t, b = x.shape[0], x.shape[1]
    if lengths is None:
        return x.flip(0)
    steps = torch.arange(t, device=x.device).reshape(t, 1)
    n = lengths.reshape(1, b)
    src = torch.where(steps < n, n - 1 - steps, steps)        # [T, B]: the step each output reads
    idx = src.reshape((t, b) + (1,) * (x.dim() - 2)).expand(x.shape)
    return x.gather(0, idx)


@register
class SequenceReverse(OpDef):
    name = "seq_reverse"
    types = ("SequenceReverse",)
    arity = (1, 2)
    batch_axis = 1          # time-major: a split along axis 0 would cut the sequences
    lengths_operand = 1
    attrs = {}
    doc = ("Each sequence of a time-major x [T, B, ...] backwards: y[t, b] = x[lengths[b]-1-t, b] for the valid "
           "steps t < lengths[b], padding (t >= lengths[b]) copied through; without lengths (i32/i64 [B], 1 to T) "
           "a flip of the time axis. Its own inverse and its own gradient; a reverse recurrence is SequenceReverse, "
           "the forward recurrence, SequenceReverse (PaddlePaddle's reverse=True). 0 FLOPs (a gather).")

    def infer(self, a, ins):
        x = ins[0]
        if len(x) < 2:
            raise ShapeError(f"SequenceReverse reads a time-major sequence [T, B, ...] (rank >= 2), got {list(x)}",
                             operand=0)
        if x[0] < 1:
            raise ShapeError(f"SequenceReverse needs at least one step, got T = {x[0]}", operand=0)
        if len(ins) > 1:
            check_lengths_shape(x, ins[1], 1, "SequenceReverse")
        return tuple(x)

    def check_dtypes(self, a, dtypes):
        check_lengths_dtype(dtypes, 1, "SequenceReverse")

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(0, 0, 0)

    def reference(self, a, ins, params):
        x = ins[0]
        n = None
        if len(ins) > 1 and ins[1] is not None:
            n = check_lengths(ins[1].to(x.device), x.shape[0], a.get("name"), "SequenceReverse")
        return reversed_steps(x, n)

    def gradient(self, g, op, dy):
        """The same permutation of dy's steps (the op is its own inverse)."""
        if not g.needs(0):
            return [None] * len(op.operands), {}
        dx = g.emit("netc.seq_reverse", [dy] + list(op.operands[1:]))
        return [dx] + [None] * (len(op.operands) - 1), {}
