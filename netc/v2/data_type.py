"""paddle.data_type: PaddlePaddle v2's input types, netc.api.data_type's (dense_vector,
integer_value and their sequence forms, sparse_binary_vector: a sample the indices of its ones, fed as a
dense 0/1 vector). sparse_vector (with values) and sparse sequences are not in netc.v2 yet."""
from __future__ import annotations

from ..api.data_type import (DataType, InputType, SequenceType, dense_vector, dense_vector_sequence,  # noqa: F401
                             integer_value, integer_value_sequence, sparse_binary_vector)
from .names import missing_names

__all__ = ["InputType", "DataType", "SequenceType", "dense_vector", "dense_vector_sequence", "integer_value",
           "integer_value_sequence", "sparse_binary_vector"]
__getattr__ = missing_names(__name__, __all__)
