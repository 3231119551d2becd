"""paddle.reader: PaddlePaddle v2's reader decorators, netc.api.reader's: shuffle(reader, buf_size),
buffered(reader, size), chain, compose, firstn, map_readers, cache. (xmap_readers, PipeReader and the
creator module are not in netc.v2 yet.)"""
from __future__ import annotations

import random

from ..api.reader import buffered, cache, chain, compose, firstn, map_readers  # noqa: F401
from ..api.reader import shuffle as netc_shuffle
from .names import missing_names


def shuffle(reader, buf_size):
    """Samples shuffled within windows of buf_size by Python's `random` (PaddlePaddle's: `random.seed(n)`
    makes the order repeatable): netc.reader.shuffle with the `random` module as its generator."""
    return netc_shuffle(reader, buf_size, rng=random)


__all__ = ["shuffle", "buffered", "cache", "chain", "compose", "firstn", "map_readers"]
__getattr__ = missing_names(__name__, __all__)
