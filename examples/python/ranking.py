#!/usr/bin/env python3
"""A three-branch ranking model with netc's Python API (PaddlePaddle v2's API design example): one
sub-network f maps a query Q and two documents A and B to "semantic" vectors, all three branches
sharing f's parameters by name; a scorer (shared too) rates the pairs (Q, A) and (Q, B), and a pairwise
cross-entropy (RankNet's, PaddlePaddle's rank_cost) learns which of A and B ranks higher. Afterwards
`infer` runs the sub-network fA alone with the trained parameters.

The data is synthetic and learnable: documents are bags of words drawn from one of 5 topics (plus
noise words: 6 of 10 are random); for each query one document shares its topic (relevant) and the other does not.

    python examples/python/ranking.py [--passes 6] [--fast]

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
VOCAB, TOPICS, WORDS, NOISE = 40, 5, 10, 6    # vocabulary, topics, words per document (NOISE of them random)


def make_data(n: int, seed: int):
    """n triples (q, a, b, label): bags of words (f32 [VOCAB], normalized), label 1 when A is the one that
    shares Q's topic, else 0; and the topic of every A."""
    topic_words = np.array_split(np.random.default_rng(1234).permutation(VOCAB), TOPICS)  # 8 words each
    rng = np.random.default_rng(seed)

    def doc(topic):
        own = rng.choice(topic_words[topic], size=WORDS - NOISE)
        noise = rng.integers(0, VOCAB, size=NOISE)
        return np.bincount(np.concatenate([own, noise]), minlength=VOCAB).astype(np.float32) / WORDS

    samples, topics_a = [], []
    for _ in range(n):
        t = int(rng.integers(TOPICS))
        other = int((t + rng.integers(1, TOPICS)) % TOPICS)
        label = int(rng.integers(2))                                # 1: A is the relevant one
        ta, tb = (t, other) if label else (other, t)
        samples.append((doc(t), doc(ta), doc(tb), label))
        topics_a.append(ta)
    return samples, np.array(topics_a)


def semantic(x, branch: str):
    """f: a bag of words -> an 8-dimensional semantic vector. Every branch names its layer after itself and
    its parameters 'f.weight' / 'f.bias': one set of parameters for the three branches."""
    return L.fc(x, 8, act="tanh", name=f"f{branch}", param_name={"weight": "f.weight", "bias": "f.bias"})


def score(fq, fx, branch: str):
    """The relevance of a document to the query: a learned weighting of the two vectors' product."""
    both = L.multiply(fq, fx, name=f"match{branch}")
    return L.fc(both, 1, name=f"score{branch}", param_name={"weight": "score.weight", "bias": "score.bias"})


def network():
    q = L.data("Q", [VOCAB])
    a = L.data("A", [VOCAB])
    b = L.data("B", [VOCAB])
    label = L.data("label", [], "i32")                # 1: A ranks higher than B
    fq, fa, fb = semantic(q, "Q"), semantic(a, "A"), semantic(b, "B")
    cost = L.rank_cost(score(fq, fa, "A"), score(fq, fb, "B"), label, name="rank")
    return cost, fa


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passes", type=int, default=6)
    ap.add_argument("--samples", type=int, default=3000, help="training triples (default 3000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fast", action="store_true", default=os.environ.get("NETC_EXAMPLES_FAST") == "1")
    ap.add_argument("--target", default="cpu", choices=("cpu", "reference"),
                    help="where train/test/infer run: cpu (default, f32) or reference (the f64 oracle, slower)")
    a = ap.parse_args(argv)
    if a.fast:
        a.passes, a.samples = 1, a.samples // 5
    train_samples, _ = make_data(a.samples, a.seed)
    test_samples, test_topics = make_data(1000, a.seed + 1)

    cost, fa = network()
    params = netc.parameters.create(cost, seed=a.seed)
    print(f"parameters: {', '.join(f'{n} {list(s)}' for n, s in params.shapes.items())} (shared by the 3 branches)")
    reader = netc.reader.shuffle(lambda: iter(train_samples), 1024, seed=a.seed)   # samples (Q, A, B, label)
    test_reader = lambda: iter(test_samples)                                        # noqa: E731
    t0 = time.time()

    def report(e):
        if isinstance(e, netc.event.EndPass):
            r = netc.test(cost, params, test_reader, batch_size=250, target=a.target, threads=1)
            print(f"pass {e.pass_id + 1}: ranking loss {e.cost:.4f} (train), {r.cost:.4f} (held out); ranking "
                  f"accuracy {100 * r.metrics['accuracy']:.1f}% held out  ({time.time() - t0:.1f}s)", flush=True)

    netc.train(cost, params, reader, netc.optimizer.Adam(0.02), event_handler=report, num_passes=a.passes,
               batch_size=32, seed=a.seed, target=a.target, threads=1)

    # the sub-network fA alone, with the trained (shared) parameters: semantic vectors of documents
    vectors = netc.infer(fa, params, [s[1] for s in test_samples], target=a.target, threads=1)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cos = unit @ unit.T
    same = test_topics[:, None] == test_topics[None, :]
    off = ~np.eye(len(unit), dtype=bool)
    print(f"infer on fA: {vectors.shape[0]} semantic vectors of {vectors.shape[1]} dimensions; mean cosine "
          f"similarity {cos[same & off].mean():.2f} between documents of one topic, {cos[~same].mean():.2f} across "
          f"topics")
    print("the first two:", np.array2string(vectors[:2], precision=2, suppress_small=True).replace("\n", ""))
    final = netc.test(cost, params, test_reader, batch_size=250, target=a.target, threads=1)
    print(f"held-out ranking accuracy: {100 * final.metrics['accuracy']:.1f}% ({time.time() - t0:.1f}s)")
    return 0 if a.fast or final.metrics["accuracy"] >= 0.9 else 1


if __name__ == "__main__":
    sys.exit(main())
