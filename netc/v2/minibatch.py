"""paddle.batch: PaddlePaddle v2's minibatch reader decorator (lists of batch_size samples; the last one
shorter unless drop_last), netc.api.reader.batch."""
from __future__ import annotations

from ..api.errors import error, user_loc
from ..api.reader import batch as api_batch


def batch(reader, batch_size, drop_last=False):
    loc = user_loc()
    if not callable(reader):
        raise error(f"paddle.batch: reader is a callable returning an iterator of samples, got "
                    f"{type(reader).__name__}", loc)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise error(f"paddle.batch: batch_size is a positive integer, got {batch_size!r}", loc)
    return api_batch(reader, batch_size, drop_last)


__all__ = ["batch"]
