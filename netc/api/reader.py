"""Readers: plain Python callables that return an iterator of samples (PaddlePaddle v2's design), and
helpers that compose them. Nothing here imports torch.

A sample feeds the data layers of a topology:
  * a dict {data layer name: value}, or
  * a tuple (or list) with one value per data layer, in the order the data layers were MADE
    (Topology.data_layers(); for a loaded .nd file, the order of its `input` statements). That is the
    answer to PaddlePaddle's open question of tuple order; `feeding=` (train/test/infer) overrides it:
    {name: index in the tuple} or a list of names, one per tuple position;
  * a bare value when the topology has one data layer.
A value is anything numpy converts (numbers, lists, arrays, tensors) with the data layer's per-sample
shape, or as many elements (they are reshaped: 64 pixels feed an [8, 8, 1] layer).

A batch is a list of samples (what `batch` yields). netc.train batches a sample reader itself when
given batch_size= (or when the data layers declare one); a reader that yields lists is taken as
batched. A pass ends when the reader's iterator is exhausted.
"""
from __future__ import annotations

import itertools
import random

__all__ = ["batch", "shuffle", "map", "map_readers", "chain", "compose", "firstn", "buffered", "cache",
           "from_arrays", "one_hot", "ComposeNotAligned"]


def batch(reader, batch_size: int, drop_last: bool = False):
    """Lists of `batch_size` samples (the last one shorter unless drop_last)."""
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ValueError(f"batch_size is a positive integer, got {batch_size!r}")

    def batched():
        b = []
        for s in reader():
            b.append(s)
            if len(b) == batch_size:
                yield b
                b = []
        if b and not drop_last:
            yield b
    return batched


def shuffle(reader, buf_size: int, seed: int | None = None, rng=None):
    """Samples shuffled within windows of `buf_size` (seeded: a new order every pass, the same run to run).
    `rng`: shuffle with this object's shuffle() instead (netc.v2: Python's `random` module, PaddlePaddle's)."""
    state = {"pass": 0}

    def shuffled():
        r = rng if rng is not None else random.Random(None if seed is None else seed * 1_000_003 + state["pass"])
        state["pass"] += 1
        buf = []
        for s in reader():
            buf.append(s)
            if len(buf) >= buf_size:
                r.shuffle(buf)
                yield from buf
                buf = []
        r.shuffle(buf)
        yield from buf
    return shuffled


def map_readers(func, *readers):
    """func(*samples) for the samples of the readers taken together (stops at the shortest)."""
    def mapped():
        for xs in zip(*(r() for r in readers)):
            yield func(*xs)
    return mapped


map = map_readers     # noqa: A001  (netc.reader.map, PaddlePaddle's name)


def chain(*readers):
    """The samples of each reader, one reader after the other."""
    def chained():
        return itertools.chain(*(r() for r in readers))
    return chained


class ComposeNotAligned(ValueError):
    """compose(): the readers ran out at different samples."""


def compose(*readers, check_alignment: bool = True):
    """Samples of several readers side by side, flattened into one tuple: readers of (x,) and (y, z)
    give (x, y, z) -- how separate sources feed several data layers."""
    def flat(x):
        return x if isinstance(x, tuple) else (x,)

    def composed():
        its = [r() for r in readers]
        sentinel = object()
        for xs in itertools.zip_longest(*its, fillvalue=sentinel):
            if any(x is sentinel for x in xs):
                if check_alignment:
                    raise ComposeNotAligned("compose(): the readers have different numbers of samples")
                return
            yield sum((flat(x) for x in xs), ())
    return composed


def firstn(reader, n: int):
    """The first n samples."""
    def first():
        return itertools.islice(reader(), n)
    return first


def buffered(reader, size: int):
    """The same samples, read ahead `size` at a time (a plain prefetch, no threads)."""
    def buf():
        it = reader()
        while True:
            chunk = list(itertools.islice(it, size))
            if not chunk:
                return
            yield from chunk
    return buf


def cache(reader):
    """The reader's samples, read once and kept in memory."""
    kept = []

    def cached():
        if not kept:
            kept.extend(reader())
        return iter(kept)
    return cached


def from_arrays(*arrays, **named):
    """A reader over arrays with a leading sample axis: from_arrays(x, y) yields (x[i], y[i]);
    from_arrays(data=x, label=y) yields {"data": x[i], "label": y[i]}."""
    if arrays and named:
        raise ValueError("from_arrays takes arrays or named arrays, not both")
    cols = arrays or tuple(named.values())
    n = {len(c) for c in cols}
    if len(n) != 1:
        raise ValueError(f"from_arrays: the arrays have different numbers of samples: {sorted(n)}")
    keys = list(named)

    def read():
        for i in range(len(cols[0])):
            if named:
                yield {k: c[i] for k, c in zip(keys, cols)}
            else:
                yield tuple(c[i] for c in cols)
    return read


def one_hot(index: int, depth: int, dtype="float32"):
    """A one-hot row of `depth` (what an embedding layer reads: netc has no lookup op)."""
    import numpy as np
    row = np.zeros(depth, dtype=dtype)
    row[int(index)] = 1
    return row
