#!/usr/bin/env python3
"""Chapter 02 of the PaddlePaddle book, recognize digits, as a PaddlePaddle v2 program on netc: MNIST with
softmax regression, a multilayer perceptron (128 and 64 ReLU units) or a convolutional network (two
5x5 convolution + 2x2 max-pool stages of 20 and 50 filters), trained with the book's Momentum (learning
rate 0.1 / 128, momentum 0.9, L2 rate 0.0005 * 128 -- PaddlePaddle's rates, for the cost summed over
a batch of 128), the test error after every pass, parameters saved as PaddlePaddle's tar files, and the
digits inferred for a few test images.

    python examples/v2/recognize_digits.py [--net softmax|mlp|conv] [--passes 5] [--out DIR] [--seed N]

Data: PaddlePaddle's cache, ~/.cache/paddle/dataset/mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz
(netc.v2 downloads nothing; tests/test_v2.py writes small files of that format). docs/v2.md.
"""
from __future__ import annotations

import argparse
import os
import random

import numpy as np

import netc.v2 as paddle


def softmax_regression(img):
    return paddle.layer.fc(input=img, size=10, act=paddle.activation.Softmax())


def multilayer_perceptron(img):
    h1 = paddle.layer.fc(input=img, size=128, act=paddle.activation.Relu())
    h2 = paddle.layer.fc(input=h1, size=64, act=paddle.activation.Relu())
    return paddle.layer.fc(input=h2, size=10, act=paddle.activation.Softmax())


def convolutional_neural_network(img):
    stage1 = paddle.networks.simple_img_conv_pool(input=img, filter_size=5, num_filters=20, num_channel=1,
                                                  pool_size=2, pool_stride=2, act=paddle.activation.Relu())
    stage2 = paddle.networks.simple_img_conv_pool(input=stage1, filter_size=5, num_filters=50, num_channel=20,
                                                  pool_size=2, pool_stride=2, act=paddle.activation.Relu())
    return paddle.layer.fc(input=stage2, size=10, act=paddle.activation.Softmax())


NETS = {"softmax": softmax_regression, "mlp": multilayer_perceptron, "conv": convolutional_neural_network}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--net", choices=list(NETS), default="conv")
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--out", default=".", help="where params_pass_<n>.tar go")
    ap.add_argument("--seed", type=int, default=None, help="seed Python's random (the shuffle's order)")
    args = ap.parse_args()
    if args.seed is not None:
        random.seed(args.seed)

    paddle.init(use_gpu=False, trainer_count=1)
    pixels = paddle.layer.data(name="pixel", type=paddle.data_type.dense_vector(784))
    digit = paddle.layer.data(name="label", type=paddle.data_type.integer_value(10))
    probabilities = NETS[args.net](pixels)
    cost = paddle.layer.classification_cost(input=probabilities, label=digit)
    parameters = paddle.parameters.create(cost)
    momentum = paddle.optimizer.Momentum(learning_rate=0.1 / 128.0, momentum=0.9,
                                         regularization=paddle.optimizer.L2Regularization(rate=0.0005 * 128))
    sgd = paddle.trainer.SGD(cost=cost, parameters=parameters, update_equation=momentum)
    history = []

    def on_event(event):
        if isinstance(event, paddle.event.EndIteration) and event.batch_id % 100 == 0:
            print(f"pass {event.pass_id}, batch {event.batch_id}: cost {event.cost:.4f}, {event.metrics}")
        if isinstance(event, paddle.event.EndPass):
            with open(os.path.join(args.out, f"params_pass_{event.pass_id}.tar"), "wb") as f:
                sgd.save_parameter_to_tar(f)
            result = sgd.test(reader=paddle.batch(paddle.dataset.mnist.test(), batch_size=128))
            error = result.metrics["classification_error_evaluator"]
            history.append((event.pass_id, result.cost, error))
            print(f"test after pass {event.pass_id}: cost {result.cost:.4f}, error {100 * error:.2f}%")

    sgd.train(reader=paddle.batch(paddle.reader.shuffle(paddle.dataset.mnist.train(), buf_size=8192),
                                  batch_size=128),
              event_handler=on_event, num_passes=args.passes)

    best = min(history, key=lambda h: h[1])
    print(f"best pass {best[0]}: test cost {best[1]:.4f}, accuracy {100 * (1 - best[2]):.2f}%")
    images, labels = [], []
    for image, label in paddle.dataset.mnist.test()():
        images.append((image,))
        labels.append(label)
        if len(images) == 8:
            break
    probs = paddle.infer(output_layer=probabilities, parameters=parameters, input=images)
    guesses = np.argsort(-probs)[:, 0]
    print("digits:   " + " ".join(map(str, labels)))
    print("inferred: " + " ".join(map(str, guesses)))


if __name__ == "__main__":
    main()
