#!/usr/bin/env python3
"""Text classification with netc's Python API (PaddlePaddle v2's understand_sentiment, in small): word ids
-> embedding -> LSTM -> the last step and the maximum over the steps -> a softmax over 2 classes, trained
on sentences of different lengths. The data layer is a sequence (netc.data_type.integer_value_sequence):
each batch is padded to its longest sentence and the sequence layers read only the valid steps.

The data is synthetic and needs word order: sentences of 3 to 16 words from a vocabulary of positive,
negative and neutral words and the word "not", which flips the sentiment of the word after it; a sentence
is positive when its sentiment sums above 0 (ties are left out).

    python examples/python/text_classification.py [--passes 6] [--fast]

--fast (or NETC_EXAMPLES_FAST=1): one pass over a fifth of the data, a smoke test.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import netc

L = netc.layer
POS, NEG, NEUTRAL = 10, 10, 30          # words of each kind; then "not", then the padding-free vocabulary ends
NOT = POS + NEG + NEUTRAL
VOCAB = NOT + 1


def sentiment(ids) -> int:
    """The sum of the words' sentiments (+1 positive, -1 negative), each flipped by a "not" before it."""
    total, flip = 0, 1
    for i in ids:
        if i == NOT:
            flip = -1
            continue
        total += flip * (1 if i < POS else -1 if i < POS + NEG else 0)
        flip = 1
    return total


def make_data(n: int, seed: int) -> list:
    """n (word ids, label) samples, label 1 for a positive sentence."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        k = int(rng.integers(3, 17))
        ids = rng.integers(0, VOCAB, k)
        ids[rng.random(k) < 0.15] = NOT
        s = sentiment(ids)
        if s != 0:
            out.append((ids.tolist(), int(s > 0)))
    return out


def network():
    words = L.data("words", netc.data_type.integer_value_sequence(VOCAB))
    label = L.data("label", netc.data_type.integer_value(2))
    emb = L.embedding(words, 16, num_embeddings=VOCAB, name="emb")       # [T, B] -> [T, B, 16]
    h = L.lstm(emb, 32, name="lstm")                                      # [T, B, 32]
    both = L.concat([L.last_seq(h, name="last"), L.pooling(h, L.MaxPooling(), name="max")], axis=1, name="both")
    prob = L.fc(both, 2, act="softmax", name="out")
    return L.classification_cost(prob, label, name="cost"), prob


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passes", type=int, default=6)
    ap.add_argument("--samples", type=int, default=2000, help="training sentences (default 2000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fast", action="store_true", default=os.environ.get("NETC_EXAMPLES_FAST") == "1")
    ap.add_argument("--target", default="cpu", choices=("cpu", "reference"),
                    help="where train/test/infer run: cpu (default, f32) or reference (the f64 oracle, slower)")
    a = ap.parse_args(argv)
    if a.fast:
        a.passes, a.samples = 1, a.samples // 5
    train_samples, test_samples = make_data(a.samples, a.seed), make_data(500, a.seed + 1)
    cost, prob = network()
    params = netc.parameters.create(cost, seed=a.seed)
    print(f"{len(params)} parameters, {sum(int(np.prod(s)) for s in params.shapes.values())} values; sentences of "
          f"3 to 16 words, batches padded to their longest")
    reader = netc.reader.shuffle(lambda: iter(train_samples), 1024, seed=a.seed)
    t0 = time.time()

    def report(e):
        if isinstance(e, netc.event.EndPass):
            r = netc.test(cost, params, lambda: iter(test_samples), batch_size=100, target=a.target, threads=1)
            print(f"pass {e.pass_id + 1}: train cost {e.cost:.4f}, accuracy {100 * e.metrics['accuracy']:.1f}%; "
                  f"held-out cost {r.cost:.4f}, accuracy {100 * r.metrics['accuracy']:.1f}%  ({time.time() - t0:.1f}s)",
                  flush=True)

    netc.train(cost, params, reader, netc.optimizer.Adam(0.01), event_handler=report, num_passes=a.passes,
               batch_size=32, seed=a.seed, target=a.target, threads=1)
    final = netc.test(cost, params, lambda: iter(test_samples), batch_size=100, target=a.target, threads=1)
    good, bad = 0, POS                                       # a positive word and a negative one
    for words in ([good, 30, 31], [NOT, good, 30, 31], [32, bad], [NOT, bad, 33, 34, 35]):
        p = netc.infer(prob, params, [words], target=a.target, threads=1)[0]
        print(f"  {words}: sentiment {sentiment(words):+d}, P(positive) {p[1]:.2f}")
    print(f"held-out accuracy: {100 * final.metrics['accuracy']:.1f}% on {final.samples} sentences "
          f"({time.time() - t0:.1f}s)")
    return 0 if a.fast or final.metrics["accuracy"] >= 0.85 else 1


if __name__ == "__main__":
    sys.exit(main())
