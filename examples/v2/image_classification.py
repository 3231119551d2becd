#!/usr/bin/env python3
"""Chapter 03 of the PaddlePaddle book, image classification, as a PaddlePaddle v2 program on netc: CIFAR-10
with the book's VGG (five groups of 3x3 convolutions, each with batch norm and dropout, 2x2 max pooling, then
dropout, an fc of 512 with batch norm and an fc of 512) or its ResNet (conv + batch norm units, basic blocks
of 16, 32, 64 channels, average pooling over the last 8x8), trained with the book's Momentum (learning rate
0.1 / 128, momentum 0.9, L2 rate 0.0002 * 128, the discexp schedule), the test error after every pass,
parameters saved as PaddlePaddle's tar files, and a few test images classified -- also from the last tar
file read back.

    python examples/v2/image_classification.py [--net vgg|resnet] [--depth 32] [--passes 200] [--batch 128]
                                               [--narrow 1] [--out DIR] [--seed N]

--narrow K divides every convolution's and fc's width by K (the book's networks are --narrow 1; the tests
train narrow ones). Data: PaddlePaddle's cache, ~/.cache/paddle/dataset/cifar/cifar-10-python.tar.gz
(netc.v2 downloads nothing; tests/test_v2.py writes small files of that format). docs/v2.md.
"""
from __future__ import annotations

import argparse
import os
import random

import numpy as np

import netc.v2 as paddle


def vgg_bn_drop(image, narrow=1):
    def conv_block(ipt, num_filter, groups, dropouts, num_channels=None):
        return paddle.networks.img_conv_group(
            input=ipt, num_channels=num_channels, pool_size=2, pool_stride=2,
            conv_num_filter=[num_filter // narrow] * groups, conv_filter_size=3,
            conv_act=paddle.activation.Relu(), conv_with_batchnorm=True, conv_batchnorm_drop_rate=dropouts,
            pool_type=paddle.pooling.Max())
    h = conv_block(image, 64, 2, [0.3, 0], 3)
    h = conv_block(h, 128, 2, [0.4, 0])
    for width in (256, 512, 512):
        h = conv_block(h, width, 3, [0.4, 0.4, 0])
    h = paddle.layer.fc(input=paddle.layer.dropout(input=h, dropout_rate=0.5), size=512 // narrow,
                        act=paddle.activation.Linear())
    h = paddle.layer.batch_norm(input=h, act=paddle.activation.Relu(), layer_attr=paddle.attr.Extra(drop_rate=0.5))
    return paddle.layer.fc(input=h, size=512 // narrow, act=paddle.activation.Linear())


def conv_bn(x, ch_out, filter_size, stride, padding, act=None, ch_in=None):
    conv = paddle.layer.img_conv(input=x, filter_size=filter_size, num_channels=ch_in, num_filters=ch_out,
                                 stride=stride, padding=padding, act=paddle.activation.Linear(), bias_attr=False)
    return paddle.layer.batch_norm(input=conv, act=act or paddle.activation.Relu())


def basic_block(x, ch_in, ch_out, stride):
    h = conv_bn(conv_bn(x, ch_out, 3, stride, 1), ch_out, 3, 1, 1, paddle.activation.Linear())
    short = conv_bn(x, ch_out, 1, stride, 0, paddle.activation.Linear()) if ch_in != ch_out else x
    return paddle.layer.addto(input=[h, short], act=paddle.activation.Relu())


def resnet_cifar10(image, depth=32, narrow=1):
    n = (depth - 2) // 6
    widths = [16 // narrow, 32 // narrow, 64 // narrow]
    h = conv_bn(image, widths[0], 3, 1, 1, ch_in=3)
    ch_in = widths[0]
    for ch_out, stride in zip(widths, (1, 2, 2)):
        h = basic_block(h, ch_in, ch_out, stride)
        for _ in range(n - 1):
            h = basic_block(h, ch_out, ch_out, 1)
        ch_in = ch_out
    return paddle.layer.img_pool(input=h, pool_size=8, stride=1, pool_type=paddle.pooling.Avg())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--net", choices=["vgg", "resnet"], default="vgg")
    ap.add_argument("--depth", type=int, default=32, help="the ResNet's depth: 6n + 2")
    ap.add_argument("--passes", type=int, default=200)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--narrow", type=int, default=1, help="divide every width by this")
    ap.add_argument("--out", default=".", help="where params_pass_<n>.tar go")
    ap.add_argument("--seed", type=int, default=None, help="seed Python's random (the shuffle's order)")
    args = ap.parse_args()
    if args.seed is not None:
        random.seed(args.seed)
    if (args.depth - 2) % 6:
        ap.error("--depth must be 6n + 2 (20, 32, 44, 56, 110)")

    paddle.init(use_gpu=False, trainer_count=1)
    image = paddle.layer.data(name="image", type=paddle.data_type.dense_vector(3 * 32 * 32))
    label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(10))
    net = (vgg_bn_drop(image, args.narrow) if args.net == "vgg"
           else resnet_cifar10(image, args.depth, args.narrow))
    out = paddle.layer.fc(input=net, size=10, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=out, label=label)
    parameters = paddle.parameters.create(cost)
    print(f"{args.net}: {sum(parameters[n].size for n in parameters.names())} parameters")
    momentum = paddle.optimizer.Momentum(
        momentum=0.9, regularization=paddle.optimizer.L2Regularization(rate=0.0002 * 128),
        learning_rate=0.1 / 128.0, learning_rate_decay_a=0.1, learning_rate_decay_b=50000 * 100,
        learning_rate_schedule="discexp")
    sgd = paddle.trainer.SGD(cost=cost, parameters=parameters, update_equation=momentum)
    feeding = {"image": 0, "label": 1}

    def on_event(event):
        if isinstance(event, paddle.event.EndIteration) and event.batch_id % 100 == 0:
            print(f"pass {event.pass_id}, batch {event.batch_id}: cost {event.cost:.4f}, {event.metrics}")
        if isinstance(event, paddle.event.EndPass):
            with open(os.path.join(args.out, f"params_pass_{event.pass_id}.tar"), "wb") as f:
                sgd.save_parameter_to_tar(f)
            result = sgd.test(reader=paddle.batch(paddle.dataset.cifar.test10(), batch_size=args.batch),
                              feeding=feeding)
            error = result.metrics["classification_error_evaluator"]
            print(f"test after pass {event.pass_id}: cost {result.cost:.4f}, error {100 * error:.2f}%")

    sgd.train(reader=paddle.batch(paddle.reader.shuffle(paddle.dataset.cifar.train10(), buf_size=50000),
                                  batch_size=args.batch),
              num_passes=args.passes, event_handler=on_event, feeding=feeding)

    samples = [s for _, s in zip(range(8), paddle.dataset.cifar.test10()())]
    images = [(s[0],) for s in samples]
    probs = paddle.infer(output_layer=out, parameters=parameters, input=images)
    with open(os.path.join(args.out, f"params_pass_{args.passes - 1}.tar"), "rb") as f:
        saved = paddle.parameters.Parameters.from_tar(f)
    again = paddle.infer(output_layer=out, parameters=saved, input=images)
    print("labels:   " + " ".join(str(s[1]) for s in samples))
    print("inferred: " + " ".join(map(str, np.argsort(-probs)[:, 0])))
    print("from the tar file: " + " ".join(map(str, np.argsort(-again)[:, 0])))


if __name__ == "__main__":
    main()
