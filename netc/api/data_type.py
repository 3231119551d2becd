"""Input types of data layers, in PaddlePaddle v2's vocabulary (paddle.v2.data_type, from its
PyDataProvider2): what one sample of a data layer holds.

    integer_value(n)            one id in 0 .. n-1 (a class label, a word)     i32 [B]
    integer_value_sequence(n)   a variable-length list of such ids             i32 [T, B] (time-major)
    dense_vector(d)             d floats                                       f32 [B, d]
    dense_vector_sequence(d)    a variable-length list of d-float vectors     f32 [T, B, d]
    sparse_binary_vector(d)     the indices (in 0 .. d-1) of a d-vector's ones f32 [B, d] (0s and 1s)

`netc.layer.data("words", netc.data_type.integer_value_sequence(5000))` (or `type=`) makes the data layer.
A sequence sample is a list (or array) of steps; the feeding pads a batch to its longest sequence, T,
and fills the sequence's lengths input [B] (netc.api.sequence). `max_len`, netc's addition, bounds a
sequence's steps: a longer one is an error at the feeding, located at the data layer.

Nothing here imports torch or the rest of the API: a type is a small description, as in PaddlePaddle.
"""
from __future__ import annotations


class SequenceType:
    NO_SEQUENCE = 0
    SEQUENCE = 1


class DataType:
    Dense = 0
    SparseNonValue = 1
    Index = 3


class InputType:
    """What a data layer's sample holds: `dim` (the id range of an Index type, the width of a Dense
    one), `seq_type` (SequenceType) and `type` (DataType), PaddlePaddle's three fields; `max_len` the
    most steps a sequence may have (None: any)."""

    __slots__ = ("dim", "seq_type", "type", "max_len")

    def __init__(self, dim: int, seq_type: int, tp: int, max_len: int | None = None):
        self.dim, self.seq_type, self.type, self.max_len = dim, seq_type, tp, max_len

    @property
    def is_sequence(self) -> bool:
        return self.seq_type == SequenceType.SEQUENCE

    @property
    def is_index(self) -> bool:
        return self.type == DataType.Index

    @property
    def is_sparse(self) -> bool:
        return self.type == DataType.SparseNonValue

    def problem(self) -> str | None:
        """What is wrong with the type's numbers (None: nothing)."""
        for what, v in (("dim", self.dim), ("max_len", self.max_len)):
            if v is None and what == "max_len":
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                return f"{self}: {what} is a positive integer, got {v!r}"
        return None

    def __repr__(self):
        name = {(DataType.Index, 0): "integer_value", (DataType.Index, 1): "integer_value_sequence",
                (DataType.Dense, 0): "dense_vector", (DataType.Dense, 1): "dense_vector_sequence",
                (DataType.SparseNonValue, 0): "sparse_binary_vector"}.get(
                    (self.type, self.seq_type), "InputType")
        return f"{name}({self.dim!r}" + (f", max_len={self.max_len!r}" if self.max_len is not None else "") + ")"


def integer_value(value_range: int) -> InputType:
    """One integer in 0 .. value_range-1 per sample (i32 [B])."""
    return InputType(value_range, SequenceType.NO_SEQUENCE, DataType.Index)


def integer_value_sequence(value_range: int, max_len: int | None = None) -> InputType:
    """A variable-length sequence of integers in 0 .. value_range-1 per sample (i32 [T, B])."""
    return InputType(value_range, SequenceType.SEQUENCE, DataType.Index, max_len)


def dense_vector(dim: int) -> InputType:
    """`dim` floats per sample (f32 [B, dim])."""
    return InputType(dim, SequenceType.NO_SEQUENCE, DataType.Dense)


def dense_vector_sequence(dim: int, max_len: int | None = None) -> InputType:
    """A variable-length sequence of `dim`-float vectors per sample (f32 [T, B, dim])."""
    return InputType(dim, SequenceType.SEQUENCE, DataType.Dense, max_len)


def sparse_binary_vector(dim: int) -> InputType:
    """A `dim`-vector of zeros and ones per sample, given as the indices of its ones (f32 [B, dim]: the
    feeding sets them; PaddlePaddle's sparse_binary_vector, held dense)."""
    return InputType(dim, SequenceType.NO_SEQUENCE, DataType.SparseNonValue)


integer_sequence = integer_value_sequence

__all__ = ["InputType", "SequenceType", "DataType", "integer_value", "integer_value_sequence", "integer_sequence",
           "dense_vector", "dense_vector_sequence", "sparse_binary_vector"]
