"""paddle.dataset.imikolov: the Penn Treebank text of Mikolov's RNNLM examples, PaddlePaddle v2's readers
over its cache file DATA_HOME/imikolov/simple-examples.tgz (the tar.gz of the RNNLM toolkit's
simple-examples: ./simple-examples/data/ptb.train.txt, ptb.valid.txt, a sentence a line, words split
by spaces).

As PaddlePaddle's module: build_dict(min_word_freq=50) counts the words of ptb.train.txt and
ptb.valid.txt, with '<s>' and '<e>' counted once per line, drops '<unk>', keeps the words counted more
than min_word_freq times, sorted by falling count then by the word, numbered from 0, and '<unk>' last.
train(word_idx, n) / test(word_idx, n) read ptb.train.txt / ptb.valid.txt: DataType.NGRAM (default)
yields every n consecutive ids of each line framed '<s> ... <e>' (lines shorter than n yield none),
unknown words as '<unk>'; DataType.SEQ yields (['<s>'] + ids, ids + ['<e>']), lines whose source has
more than n ids (n > 0) left out."""
from __future__ import annotations

import collections
import tarfile

from ...api.errors import error, user_loc
from .common import cached

URL = "http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz"
TRAIN = "./simple-examples/data/ptb.train.txt"
TEST = "./simple-examples/data/ptb.valid.txt"


class DataType:
    NGRAM = 1
    SEQ = 2


def _lines(member, loc):
    path = cached(URL, "imikolov")
    try:
        with tarfile.open(path) as tf:
            f = tf.extractfile(member)
            data = f.read() if f is not None else None
    except (tarfile.TarError, KeyError, OSError) as e:
        raise error(f"paddle.dataset.imikolov: '{path}' has no member '{member}' or is no tar.gz ({e})", loc) from None
    if data is None:
        raise error(f"paddle.dataset.imikolov: '{member}' in '{path}' is not a file", loc)
    return data.decode("utf-8", "replace").splitlines()


def word_count(lines, word_freq=None):
    word_freq = collections.defaultdict(int) if word_freq is None else word_freq
    for line in lines:
        for w in line.strip().split():
            word_freq[w] += 1
        word_freq["<s>"] += 1
        word_freq["<e>"] += 1
    return word_freq


def build_dict(min_word_freq=50):
    """{word: id} of the words counted more than min_word_freq times, '<unk>' last (module doc)."""
    loc = user_loc()
    word_freq = word_count(_lines(TEST, loc), word_count(_lines(TRAIN, loc)))
    word_freq.pop("<unk>", None)
    kept = sorted(((w, c) for w, c in word_freq.items() if c > min_word_freq), key=lambda x: (-x[1], x[0]))
    word_idx = {w: i for i, (w, _) in enumerate(kept)}
    word_idx["<unk>"] = len(kept)
    return word_idx


def reader_creator(filename, word_idx, n, data_type):
    loc = user_loc()
    if "<unk>" not in word_idx:
        raise error("paddle.dataset.imikolov: word_idx has no '<unk>' (use build_dict())", loc)
    if data_type == DataType.NGRAM and n < 1:
        raise error(f"paddle.dataset.imikolov: an n-gram reader needs n >= 1, got {n!r}", loc)

    def reader():
        unk = word_idx["<unk>"]
        for line in _lines(filename, loc):
            if data_type == DataType.NGRAM:
                words = ["<s>"] + line.strip().split() + ["<e>"]
                if len(words) >= n:
                    ids = [word_idx.get(w, unk) for w in words]
                    for i in range(n, len(ids) + 1):
                        yield tuple(ids[i - n:i])
            elif data_type == DataType.SEQ:
                ids = [word_idx.get(w, unk) for w in line.strip().split()]
                src, trg = [word_idx["<s>"]] + ids, ids + [word_idx["<e>"]]
                if n > 0 and len(src) > n:
                    continue
                yield src, trg
            else:
                raise error(f"paddle.dataset.imikolov: data_type is DataType.NGRAM or DataType.SEQ, got "
                            f"{data_type!r}", loc)
    return reader


def train(word_idx, n, data_type=DataType.NGRAM):
    cached(URL, "imikolov")
    return reader_creator(TRAIN, word_idx, n, data_type)


def test(word_idx, n, data_type=DataType.NGRAM):
    cached(URL, "imikolov")
    return reader_creator(TEST, word_idx, n, data_type)


test.__test__ = False

__all__ = ["DataType", "build_dict", "word_count", "reader_creator", "train", "test", "URL"]
