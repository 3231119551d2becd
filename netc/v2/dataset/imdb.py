"""paddle.dataset.imdb: the IMDB movie reviews (Maas et al., aclImdb), PaddlePaddle v2's readers over its
cache file DATA_HOME/imdb/aclImdb_v1.tar.gz (aclImdb/{train,test}/{pos,neg}/*.txt, a review a file).

As PaddlePaddle's module: a review is tokenized as its text with trailing newlines stripped, ASCII
punctuation removed, lower-cased, split on white space; word_dict() numbers the words of all four
folders counted more than 150 times, by falling count then by the word, '<unk>' last
(build_dict(pattern, cutoff)); train(word_idx) / test(word_idx) yield (ids, label), the positive
reviews first with label 0, then the negative ones with label 1, in the archive's order."""
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


def reader_creator(pos_pattern, neg_pattern, word_idx):
    if "<unk>" not in word_idx:
        raise error("paddle.dataset.imdb: word_idx has no '<unk>' (use word_dict())", user_loc())
    unk = word_idx["<unk>"]
    samples = [([word_idx.get(w, unk) for w in doc], 0) for doc in tokenize(pos_pattern)]
    samples += [([word_idx.get(w, unk) for w in doc], 1) for doc in tokenize(neg_pattern)]

    def reader():
        yield from samples
    return reader


def train(word_idx):
    return reader_creator(re.compile(r"aclImdb/train/pos/.*\.txt$"), re.compile(r"aclImdb/train/neg/.*\.txt$"),
                          word_idx)


def test(word_idx):
    return reader_creator(re.compile(r"aclImdb/test/pos/.*\.txt$"), re.compile(r"aclImdb/test/neg/.*\.txt$"),
                          word_idx)


test.__test__ = False


def word_dict():
    return build_dict(re.compile(r"aclImdb/((train)|(test))/((pos)|(neg))/.*\.txt$"), 150)


__all__ = ["URL", "tokenize", "build_dict", "reader_creator", "train", "test", "word_dict"]
