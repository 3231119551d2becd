"""Op definitions. Importing this package registers every op (one file per op family)."""
from . import activation, channel_permute, clockwork_lstm, comm, conv, dense, depthwise, embedding, energy, highway, loss, lstm, norm, optim, pool, recurrent, rnn, seq_mask, seq_reverse, sequence, tensor  # noqa: F401  (registration)
from .registry import (AttrSpec, Cost, OpDef, ShapeError, all_ops, by_type, layer_cost,  # noqa: F401
                       layer_types, lookup, prod)
