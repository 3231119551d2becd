"""SequenceMask (netc.seq_mask): the padding of a time-major batch set to zero, ONNX's LSTM/GRU outputs past
each sequence's length (issue 27: their sequence_lens; frontend/onnx_recurrent.py).

x is [T, B, ...] padded at the end (docs/sequences.md) with lengths [B] (i32/i64, 1 to T):

    y[t, b] = x[t, b]    for t <  lengths[b]   (the valid steps)
    y[t, b] = 0          for t >= lengths[b]   (the padding)

The lengths are required (without them nothing is padding: use the value itself). Masking the steps is a
projection, so the op is its own gradient: dx = seq_mask(dy, lengths). netc's recurrent ops run over the
padding and nothing else in netc reads it; ONNX defines the padded outputs as zeros, which this op writes.

Kernel: a copy or a zero per element (netc/kernels/seq_mask.py), one program per tile of steps x samples
x features. Cost: 0 FLOPs forward and backward.
"""
from __future__ import annotations

from .registry import Cost, OpDef, ShapeError, register
from .sequence import check_lengths, check_lengths_dtype, check_lengths_shape


def masked_steps(x, lengths):
    """The reference: x [T, B, ...] (torch) with its steps t >= lengths[b] zero (lengths int64 [B], checked)."""
    import torch
    t, b = x.shape[0], x.shape[1]
    keep = torch.arange(t, device=x.device).reshape(t, 1) < lengths.reshape(1, b)
    return torch.where(keep.reshape((t, b) + (1,) * (x.dim() - 2)), x, torch.zeros((), dtype=x.dtype, device=x.device))


@register
class SequenceMask(OpDef):
    name = "seq_mask"
    types = ("SequenceMask",)
    arity = (2, 2)
    batch_axis = 1          # time-major: a split along axis 0 would cut the sequences
    lengths_operand = 1
    attrs = {}
    doc = ("The padding of a time-major x [T, B, ...] set to zero: y[t, b] = x[t, b] for the valid steps "
           "t < lengths[b], 0 for t >= lengths[b] (lengths i32/i64 [B], 1 to T; required). ONNX's LSTM/GRU "
           "outputs past each sequence's sequence_lens. Its own gradient; 0 FLOPs.")

    def infer(self, a, ins):
        x = ins[0]
        if len(x) < 2:
            raise ShapeError(f"SequenceMask reads a time-major sequence [T, B, ...] (rank >= 2), got {list(x)}",
                             operand=0)
        if x[0] < 1:
            raise ShapeError(f"SequenceMask needs at least one step, got T = {x[0]}", operand=0)
        check_lengths_shape(x, ins[1], 1, "SequenceMask")
        return tuple(x)

    def check_dtypes(self, a, dtypes):
        check_lengths_dtype(dtypes, 1, "SequenceMask")

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(0, 0, 0)

    def reference(self, a, ins, params):
        x = ins[0]
        n = check_lengths(ins[1].to(x.device), x.shape[0], a.get("name"), "SequenceMask")
        return masked_steps(x, n)

    def gradient(self, g, op, dy):
        """The same mask over dy (a projection: its own gradient)."""
        if not g.needs(0):
            return [None, None], {}
        return [g.emit("netc.seq_mask", [dy, op.operands[1]]), None], {}
