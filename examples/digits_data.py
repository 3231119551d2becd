#!/usr/bin/env python3
"""Write scikit-learn's bundled handwritten digits (load_digits: 1,797 8x8 images, no download) as
the two .npz archives `netc run examples/digits.nd --train --data ... --eval ...` reads: PREFIX_train.npz
(four fifths) and PREFIX_test.npz (the held-out fifth), each with `data` f32 [S, 8, 8, 1] (pixels
scaled from 0..16 to 0..1, NHWC) and `label` i32 [S]. The split is stratified and seeded.

    python examples/digits_data.py [-o build/digits] [--seed 0]

Needs scikit-learn (pip install 'netc[data]').
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np


def digits(seed: int = 0):
    """(train, test): dicts of `data` [S, 8, 8, 1] f32 and `label` [S] i32; a stratified 80/20 split."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        sys.exit("digits_data.py needs scikit-learn: pip install 'netc[data]' (or pip install scikit-learn)")
    d = load_digits()
    x = (d.images.astype(np.float32) / 16.0)[..., None]
    y = d.target.astype(np.int32)
    rng = np.random.default_rng(seed)
    test = np.zeros(len(y), dtype=bool)
    for c in np.unique(y):            # a fifth of every class is held out
        idx = rng.permutation(np.flatnonzero(y == c))
        test[idx[:len(idx) // 5]] = True
    return {"data": x[~test], "label": y[~test]}, {"data": x[test], "label": y[test]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default="build/digits", help="prefix of the two archives (default build/digits)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the train/test split")
    a = ap.parse_args(argv)
    train, test = digits(a.seed)
    os.makedirs(os.path.dirname(a.output) or ".", exist_ok=True)
    for part, arrays in (("train", train), ("test", test)):
        path = f"{a.output}_{part}.npz"
        np.savez(path, **arrays)
        print(f"wrote {path}: {len(arrays['label'])} samples")
    return 0


if __name__ == "__main__":
    sys.exit(main())
