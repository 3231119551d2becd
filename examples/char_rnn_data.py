#!/usr/bin/env python3
"""Build a character corpus for SINGA's char-rnn (`/work/shared/corpus/singa/0.2.0_char-rnn_job.conf`)
from the Python standard library's own source files on this machine (char-rnn was first shown on
source code; no download), and write what `netc run <conf> --train --data ... --eval ...` reads:

* PREFIX_train.npz and PREFIX_val.npz: one window a sample, `data` i32 [S, T] character ids and
  `label` i32 [S, T] the next character (label[s, t] = data[s, t + 1]; the last one is the character
  after the window). Windows are cut from the text one after the other (window s starts at s * T);
  the last tenth of the text (by default) is the validation text.
* PREFIX_vocab.txt: the vocabulary as SINGA's CharRNNInputLayer reads vocab.txt, the characters one
  after the other, a character's id its position; the 100 most frequent characters of the corpus,
  most frequent first (ties by code point; fewer if the corpus has fewer). Id len(vocab) (100) is
  'other': every rarer character. So the vocabulary has 101 ids, the conf's onehot_conf.vocab_size.
* PREFIX_corpus.txt: the text itself (so `netc sample` and the docs can show what it looks like).

The files are `sysconfig.get_paths()["stdlib"]`'s top-level *.py files in sorted order, read as UTF-8,
whole files until --max-bytes, joined as they are: the same Python installation gives the same
corpus, byte for byte (the files and their order are printed).

    python examples/char_rnn_data.py [-o build/char_rnn] [--steps 50] [--max-bytes 2000000]
"""
from __future__ import annotations

import argparse
import collections
import glob
import os
import sys
import sysconfig

import numpy as np

VOCAB = 100          # the most frequent characters; id VOCAB is every other one


def stdlib_files() -> list:
    """The standard library's top-level *.py files, sorted by name: a fixed list for one installation."""
    root = sysconfig.get_paths()["stdlib"]
    return sorted(glob.glob(os.path.join(root, "*.py")), key=os.path.basename)


def corpus(max_bytes: int = 2_000_000, files: list | None = None) -> tuple:
    """(text, files used): whole files, in order, while the text stays within max_bytes characters."""
    parts, used, size = [], [], 0
    for path in files if files is not None else stdlib_files():
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            text = f.read()
        if used and size + len(text) > max_bytes:
            break
        parts.append(text)
        used.append(path)
        size += len(text)
    return "".join(parts), used


def vocabulary(text: str, size: int = VOCAB) -> str:
    """The `size` most frequent characters, most frequent first, ties by code point."""
    counts = collections.Counter(text)
    return "".join(sorted(counts, key=lambda c: (-counts[c], ord(c)))[:size])


def encode(text: str, vocab: str) -> np.ndarray:
    """Character ids: the position in `vocab`, len(vocab) for a character not in it."""
    index = {c: i for i, c in enumerate(vocab)}
    other = len(vocab)
    return np.array([index.get(c, other) for c in text], dtype=np.int32)


def decode(ids, vocab: str, other: str = "\ufffd") -> str:
    """The text of character ids (`other` for the 'other' id)."""
    return "".join(vocab[i] if i < len(vocab) else other for i in np.asarray(ids).reshape(-1).tolist())


def windows(ids: np.ndarray, steps: int) -> dict:
    """One sample per window of `steps` characters, cut one after the other: data [S, steps] and
    label [S, steps], the next characters (the window shifted by one)."""
    n = (len(ids) - 1) // steps
    if n < 1:
        raise ValueError(f"a text of {len(ids)} characters has no window of {steps} characters and a next one")
    data = ids[:n * steps].reshape(n, steps)
    label = ids[1:n * steps + 1].reshape(n, steps)
    return {"data": np.ascontiguousarray(data, dtype=np.int32), "label": np.ascontiguousarray(label, dtype=np.int32)}


def build(steps: int = 50, max_bytes: int = 2_000_000, val_fraction: float = 0.1, files: list | None = None) -> dict:
    """{'train', 'val'}: window dicts; 'vocab': the vocabulary string; 'text', 'files': the corpus."""
    text, used = corpus(max_bytes, files)
    vocab = vocabulary(text)
    ids = encode(text, vocab)
    cut = int(len(ids) * (1 - val_fraction))
    return {"train": windows(ids[:cut], steps), "val": windows(ids[cut:], steps), "vocab": vocab,
            "text": text, "files": used}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default="build/char_rnn", help="prefix of the files (default build/char_rnn)")
    ap.add_argument("--steps", type=int, default=50, help="characters per window, T (the conf's unroll_len: 50)")
    ap.add_argument("--max-bytes", type=int, default=2_000_000, help="size of the corpus (default 2,000,000)")
    ap.add_argument("--val-fraction", type=float, default=0.1, help="the end of the text held out (default 0.1)")
    a = ap.parse_args(argv)
    if a.steps < 1 or a.max_bytes < 1 or not 0 < a.val_fraction < 1:
        ap.error("--steps and --max-bytes must be positive, --val-fraction in (0, 1)")
    d = build(a.steps, a.max_bytes, a.val_fraction)
    os.makedirs(os.path.dirname(a.output) or ".", exist_ok=True)
    print(f"corpus: {len(d['text']):,} characters from {len(d['files'])} files of "
          f"{os.path.dirname(d['files'][0])} ({os.path.basename(d['files'][0])} .. {os.path.basename(d['files'][-1])})")
    for part in ("train", "val"):
        path = f"{a.output}_{part}.npz"
        np.savez(path, **d[part])
        print(f"wrote {path}: {len(d[part]['data']):,} windows of {a.steps} characters")
    for name, text in (("vocab", d["vocab"]), ("corpus", d["text"])):
        with open(f"{a.output}_{name}.txt", "w", encoding="utf-8", newline="") as f:
            f.write(text)
    other = sum(1 for c in d["text"] if c not in set(d["vocab"]))
    print(f"wrote {a.output}_vocab.txt: {len(d['vocab'])} characters (+ id {len(d['vocab'])}, 'other': "
          f"{other:,} characters of the corpus) and {a.output}_corpus.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
