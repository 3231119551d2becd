"""paddle.infer: PaddlePaddle v2's inference, netc.infer on the parameters' netc set.

`infer(output_layer, parameters, input, feeding=None, field="value")`: input a list of samples (tuples
of the fields the output reads, in the order of its data layers or as `feeding` says); the answer a
numpy array [samples, size] ("value"), or the argmax per sample ("id"). With several output layers, a
list of arrays in their order."""
from __future__ import annotations

import numpy as np

from ..api import trainer as api_trainer
from ..api.errors import error, user_loc
from ..api.topology import as_topology
from .parameters import Parameters
from .trainer import SETTINGS, feeding_for


def infer(output_layer, parameters, input, feeding=None, field="value"):  # noqa: A002
    loc = user_loc()
    if not isinstance(parameters, Parameters):
        raise error(f"paddle.infer: parameters come from paddle.parameters.create or Parameters.from_tar, got "
                    f"{type(parameters).__name__}", loc)
    fields = [field] if isinstance(field, str) else list(field)
    bad = [f for f in fields if f not in ("value", "id")]
    if bad:
        raise error(f"paddle.infer: field is 'value' or 'id', got {bad[0]!r}", loc)
    outs = list(output_layer) if isinstance(output_layer, (list, tuple)) else [output_layer]
    top = as_topology(outs if len(outs) > 1 else outs[0])
    pset = parameters.bind(top)
    got = api_trainer.infer(top, pset, list(input), feeding=feeding_for(top, feeding), threads=SETTINGS["threads"])
    arrays = [got] if len(outs) == 1 else [got[o.name] for o in outs]
    answer = []
    for a in arrays:
        for f in fields:
            answer.append(np.asarray(a) if f == "value" else np.argmax(a.reshape(len(a), -1), axis=1))
    return answer[0] if len(answer) == 1 else answer


__all__ = ["infer"]
