#!/usr/bin/env python3
"""Chapter 04 of the PaddlePaddle book, word2vec, as a PaddlePaddle v2 program on netc: only the import
says netc. An N-gram language model of the Penn Treebank (imikolov): the 4 words before a word, each
looked up in ONE shared table `_proj` (table_projection with Param(name="_proj")), concatenated, an fc of
256 sigmoids with dropout 0.5, a softmax over the dictionary; AdaGrad(3e-3, L2 8e-4; the table exempt
with l2_rate=0), batches of 32. Tests after every pass, saves the parameters as PaddlePaddle's tar file,
then predicts the next word of a few test 4-grams.

    python examples/v2/word2vec.py [--passes 100] [--min-word-freq 50] [--out DIR] [--seed N]

Data: PaddlePaddle's cache, ~/.cache/paddle/dataset/imikolov/simple-examples.tgz (netc.v2 downloads
nothing; tests/test_v2_sequences.py writes a small file of that format). docs/v2.md.
"""
from __future__ import annotations

import argparse
import math
import os
import random

import netc.v2 as paddle
import netc.v2.dataset.imikolov as imikolov

embsize = 32
hiddensize = 256
N = 5


def wordemb(inlayer):
    """A word's row of the shared table `_proj`."""
    return paddle.layer.table_projection(
        input=inlayer, size=embsize,
        param_attr=paddle.attr.Param(name="_proj", initial_std=0.001, learning_rate=1, l2_rate=0, sparse_update=True))


def ngram_lm(dict_size):
    """(the softmax over the next word, the cost): PaddlePaddle's book network."""
    words = [paddle.layer.data(name=n, type=paddle.data_type.integer_value(dict_size))
             for n in ("firstw", "secondw", "thirdw", "fourthw")]
    nextword = paddle.layer.data(name="fifthw", type=paddle.data_type.integer_value(dict_size))
    contextemb = paddle.layer.concat(input=[wordemb(w) for w in words])
    hidden1 = paddle.layer.fc(input=contextemb, size=hiddensize, act=paddle.activation.Sigmoid(),
                              layer_attr=paddle.attr.Extra(drop_rate=0.5),
                              bias_attr=paddle.attr.Param(learning_rate=2),
                              param_attr=paddle.attr.Param(initial_std=1. / math.sqrt(embsize * 8), learning_rate=1))
    predictword = paddle.layer.fc(input=hidden1, size=dict_size, bias_attr=paddle.attr.Param(learning_rate=2),
                                  act=paddle.activation.Softmax())
    return predictword, paddle.layer.classification_cost(input=predictword, label=nextword)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passes", type=int, default=100)
    ap.add_argument("--min-word-freq", type=int, default=50)
    ap.add_argument("--out", default=".", help="where params_pass_<n>.tar go")
    ap.add_argument("--seed", type=int, default=None, help="seed Python's random")
    args = ap.parse_args()
    if args.seed is not None:
        random.seed(args.seed)

    paddle.init(use_gpu=False, trainer_count=1)
    word_dict = imikolov.build_dict(args.min_word_freq)
    dict_size = len(word_dict)
    predictword, cost = ngram_lm(dict_size)
    parameters = paddle.parameters.create(cost)
    adagrad = paddle.optimizer.AdaGrad(learning_rate=3e-3,
                                       regularization=paddle.optimizer.L2Regularization(8e-4))
    trainer = paddle.trainer.SGD(cost, parameters, adagrad)
    feeding = {"firstw": 0, "secondw": 1, "thirdw": 2, "fourthw": 3, "fifthw": 4}

    def on_event(event):
        if isinstance(event, paddle.event.EndIteration) and event.batch_id % 100 == 0:
            print(f"pass {event.pass_id}, batch {event.batch_id}: cost {event.cost:.4f}")
        if isinstance(event, paddle.event.EndPass):
            result = trainer.test(paddle.batch(imikolov.test(word_dict, N), 32), feeding=feeding)
            print(f"test after pass {event.pass_id}: cost {result.cost:.4f}, "
                  f"error {100 * result.metrics['classification_error_evaluator']:.1f}%")
            with open(os.path.join(args.out, f"params_pass_{event.pass_id}.tar"), "wb") as f:
                trainer.save_parameter_to_tar(f)

    trainer.train(paddle.batch(imikolov.train(word_dict, N), 32), num_passes=args.passes,
                  event_handler=on_event, feeding=feeding)

    words = {i: w for w, i in word_dict.items()}
    grams = [g for _, g in zip(range(5), imikolov.test(word_dict, N)())]
    probs = paddle.infer(output_layer=predictword, parameters=parameters, input=[g[:4] for g in grams],
                         feeding={k: v for k, v in feeding.items() if k != "fifthw"})
    for g, p in zip(grams, probs):
        print(f"{' '.join(words[i] for i in g[:4])} -> {words[int(p.argmax())]} (the text: {words[g[4]]})")
    print(f"dictionary {dict_size} words, {len(parameters.names())} parameters: "
          f"{sum(parameters[n].size for n in parameters.names())} values")


if __name__ == "__main__":
    main()
