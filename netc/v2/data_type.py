"""paddle.data_type: PaddlePaddle v2's input types, netc.api.data_type's (dense_vector,
integer_value and their sequence forms). Sparse types are not in netc.v2 yet."""
from __future__ import annotations

from ..api.data_type import (DataType, InputType, SequenceType, dense_vector, dense_vector_sequence,  # noqa: F401
                             integer_value, integer_value_sequence)
from .names import missing_names

__all__ = ["InputType", "DataType", "SequenceType", "dense_vector", "dense_vector_sequence", "integer_value",
           "integer_value_sequence"]
__getattr__ = missing_names(__name__, __all__)
