"""What a network's integer inputs mean, read off the ops that consume them: class labels of a classifier
loss (OpDef.classifier, label_operand, label_classes), row ids of an embedding (OpDef.index_operand,
index_bound), per-sample sequence lengths (OpDef.lengths_operand). The bounds every random input is
drawn within (the reference executor's, runtime/reference.py) and that a compiled library's manifest
records for its inputs (codegen/manifest.py), so both draw the same values."""
from __future__ import annotations

from ..ir.core import Operation
from .registry import lookup


def label_classes_of(net: Operation, value) -> int | None:
    """The class count C when `value` is the labels operand of a classifier loss (OpDef.classifier: a
    SoftmaxLoss), else None."""
    reading = label_reading_of(net, value)
    return reading[0] if reading else None


def label_reading_of(net: Operation, value) -> tuple[int, bool] | None:
    """(C, ids) when `value` is the labels operand of a classifier loss (OpDef.label_classes: its class
    count, and whether the labels are class indices rather than one-hot rows), else None. The labels may reach
    the loss through views (a reshape: Brainstorm's per-position targets [B, H, W, 1] as rows [B*H*W, 1])."""
    same = [value]
    for op in net.regions[0].ops:
        d = lookup(op.name)
        if d is not None and d.view and op.operands and any(op.operands[0] is v for v in same):
            same.extend(op.results)
        if d is not None and d.classifier and len(op.operands) > d.label_operand \
                and any(op.operands[d.label_operand] is v for v in same):
            return d.label_classes(d.attrs_of(op), [v.type.shape for v in op.operands])
    return None


def index_bound_of(net: Operation, value) -> int | None:
    """The row count V when `value` is read as row ids by an op (OpDef.index_operand: an embedding's
    ids, in [0, V)), the smallest such V when several read it, else None."""
    bounds = []
    for op in net.regions[0].ops:
        d = lookup(op.name)
        if d is not None and d.index_operand is not None and len(op.operands) > d.index_operand \
                and op.operands[d.index_operand] is value:
            bounds.append(int(d.attrs_of(op)[d.index_bound]))
    return min(bounds) if bounds else None


def lengths_bound_of(net: Operation, value) -> int | None:
    """The step count T when `value` is read as per-sample sequence lengths by an op (OpDef.lengths_operand:
    lengths in [1, T] of its time-major operand 0 [T, B, ...]), the smallest such T when several read it."""
    bounds = []
    for op in net.regions[0].ops:
        d = lookup(op.name)
        if d is not None and d.lengths_operand is not None and len(op.operands) > d.lengths_operand \
                and op.operands[d.lengths_operand] is value:
            bounds.append(int(op.operands[0].type.shape[0]))
    return min(bounds) if bounds else None
