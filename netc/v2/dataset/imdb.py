"""paddle.dataset.imdb: the IMDB movie reviews (Maas et al., aclImdb), PaddlePaddle v2's readers over its
cache file DATA_HOME/imdb/aclImdb_v1.tar.gz (aclImdb/{train,test}/{pos,neg}/*.txt, a review a file).

As PaddlePaddle's module: a review is tokenized as its text with trailing newlines stripped, ASCII
punctuation removed, lower-cased, split on white space; word_dict() numbers the words of all four
folders counted more than 150 times, by falling count then by the word, '<unk>' last
(build_dict(pattern, cutoff)); train(word_idx) / test(word_idx) give (ids, label) samples, positive
reviews labelled 0 and negative ones 1, alternately (pos, neg, pos, ...; the rest of the longer list at
the end), each kind in the archive's order -- as the v2 reader of the book's time, whose train() returned
the samples' iterator (the book writes `shuffle(lambda: imdb.train(word_dict), ...)`); later versions
return a reader (`shuffle(imdb.train(word_dict), ...)`). Here the result serves both: calling it gives
an iterator of the samples, and it is iterable itself."""
from __future__ import annotations

import collections
import re
import string
import tarfile

from ...api.errors import error, user_loc
from .common import cached

URL = "http://ai.stanford.edu/%7Eamaas/data/sentiment/aclImdb_v1.tar.gz"
_PUNCT = str.maketrans("", "", string.punctuation)


def tokenize(pattern):
    """The token lists of the archive's members whose names match the compiled regex `pattern`."""
    path = cached(URL, "imdb")
    try:
        with tarfile.open(path) as tarf:
            for m in tarf:
                if pattern.match(m.name) and m.isfile():
                    text = tarf.extractfile(m).read().decode("utf-8", "replace").rstrip("\n\r")
                    yield text.translate(_PUNCT).lower().split()
    except (tarfile.TarError, OSError) as e:
        raise error(f"paddle.dataset.imdb: '{path}' is no tar.gz archive ({e})", user_loc()) from None


def build_dict(pattern, cutoff):
    """{word: id} of the words counted more than cutoff times in the matching reviews, '<unk>' last."""
    word_freq = collections.defaultdict(int)
    for doc in tokenize(pattern):
        for w in doc:
            word_freq[w] += 1
    kept = sorted(((w, c) for w, c in word_freq.items() if c > cutoff), key=lambda x: (-x[1], x[0]))
    word_idx = {w: i for i, (w, _) in enumerate(kept)}
    word_idx["<unk>"] = len(kept)
    return word_idx


class Samples:
    """A dataset's samples as a reader (call it: an iterator) and as an iterable."""

    def __init__(self, samples):
        self.samples = samples

    def __call__(self):
        return iter(self.samples)

    def __iter__(self):
        return iter(self.samples)

    def __len__(self):
        return len(self.samples)


def reader_creator(pos_pattern, neg_pattern, word_idx, buffer_size=None):
    """The labelled samples of the reviews matching pos_pattern (0) and neg_pattern (1), alternately."""
    if "<unk>" not in word_idx:
        raise error("paddle.dataset.imdb: word_idx has no '<unk>' (use word_dict())", user_loc())
    unk = word_idx["<unk>"]
    pos = [([word_idx.get(w, unk) for w in doc], 0) for doc in tokenize(pos_pattern)]
    neg = [([word_idx.get(w, unk) for w in doc], 1) for doc in tokenize(neg_pattern)]
    n = min(len(pos), len(neg))
    samples = [s for pair in zip(pos[:n], neg[:n]) for s in pair] + pos[n:] + neg[n:]
    return Samples(samples)


def train(word_idx):
    return reader_creator(re.compile(r"aclImdb/train/pos/.*\.txt$"), re.compile(r"aclImdb/train/neg/.*\.txt$"),
                          word_idx)


def test(word_idx):
    return reader_creator(re.compile(r"aclImdb/test/pos/.*\.txt$"), re.compile(r"aclImdb/test/neg/.*\.txt$"),
                          word_idx)


test.__test__ = False


def word_dict():
    return build_dict(re.compile(r"aclImdb/((train)|(test))/((pos)|(neg))/.*\.txt$"), 150)


__all__ = ["URL", "Samples", "tokenize", "build_dict", "reader_creator", "train", "test", "word_dict"]
