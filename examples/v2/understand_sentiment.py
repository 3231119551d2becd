#!/usr/bin/env python3
"""Chapter 06 of the PaddlePaddle book, understand sentiment, as a PaddlePaddle v2 program on netc: only
the import says netc. IMDB reviews (word ids) -> positive / negative with the book's convolution net
(--net conv: an embedding, sequence_conv_pool of 3 and of 4 steps, a softmax over both) or its stacked
LSTM (the default): an
embedding, fc + lstmemory, then (stacked_num - 1) times an fc of the previous fc and LSTM and an LSTM over
it, every second one backwards in time (reverse=True), each LSTM with a Relu block input and a Tanh cell,
max pooling over time of the last fc and LSTM, a softmax; Adam(2e-3, L2 8e-4) with ModelAverage(0.5) (the tar files hold the averaged values), batches
of 100. Tests after every pass, infers a few test reviews.

    python examples/v2/understand_sentiment.py [--net lstm|conv] [--passes 2] [--stacked 3]
                                               [--emb 128] [--hid 512] [--cutoff 150] [--out DIR] [--seed N]

Both networks are the book's functions as written (only the import differs): a reversed lstmemory is
netc.seq_reverse, the forward LSTM, netc.seq_reverse (docs/sequences.md), and the Relu/Tanh cell netc's
Lstm with cell_activation. They train on the reference executor (netc.v2's trainer); the LSTM kernels
take the book's cell too, so the network's .nd also runs on the compiled targets.

Data: PaddlePaddle's cache, ~/.cache/paddle/dataset/imdb/aclImdb_v1.tar.gz (netc.v2 downloads nothing;
tests/test_v2_sequences.py writes a small file of that format). docs/v2.md.
"""
from __future__ import annotations

import argparse
import os
import random
import re

import netc.v2 as paddle
import netc.v2.dataset.imdb as imdb


def convolution_net(input_dim, class_dim=2, emb_dim=128, hid_dim=128):
    data = paddle.layer.data("word", paddle.data_type.integer_value_sequence(input_dim))
    emb = paddle.layer.embedding(input=data, size=emb_dim)
    conv_3 = paddle.networks.sequence_conv_pool(input=emb, context_len=3, hidden_size=hid_dim)
    conv_4 = paddle.networks.sequence_conv_pool(input=emb, context_len=4, hidden_size=hid_dim)
    output = paddle.layer.fc(input=[conv_3, conv_4], size=class_dim, act=paddle.activation.Softmax())
    lbl = paddle.layer.data("label", paddle.data_type.integer_value(2))
    return paddle.layer.classification_cost(input=output, label=lbl), output


def stacked_lstm_net(input_dim, class_dim=2, emb_dim=128, hid_dim=512, stacked_num=3):
    assert stacked_num % 2 == 1
    fc_para_attr = paddle.attr.Param(learning_rate=1e-3)
    lstm_para_attr = paddle.attr.Param(initial_std=0., learning_rate=1.)
    para_attr = [fc_para_attr, lstm_para_attr]
    bias_attr = paddle.attr.Param(initial_std=0., l2_rate=0.)
    relu = paddle.activation.Relu()
    linear = paddle.activation.Linear()

    data = paddle.layer.data("word", paddle.data_type.integer_value_sequence(input_dim))
    emb = paddle.layer.embedding(input=data, size=emb_dim)
    fc1 = paddle.layer.fc(input=emb, size=hid_dim, act=linear, bias_attr=bias_attr)
    lstm1 = paddle.layer.lstmemory(input=fc1, act=relu, bias_attr=bias_attr)
    inputs = [fc1, lstm1]
    for i in range(2, stacked_num + 1):
        fc = paddle.layer.fc(input=inputs, size=hid_dim, act=linear, param_attr=para_attr, bias_attr=bias_attr)
        lstm = paddle.layer.lstmemory(input=fc, reverse=(i % 2) == 0, act=relu, bias_attr=bias_attr)
        inputs = [fc, lstm]
    fc_last = paddle.layer.pooling(input=inputs[0], pooling_type=paddle.pooling.Max())
    lstm_last = paddle.layer.pooling(input=inputs[1], pooling_type=paddle.pooling.Max())
    output = paddle.layer.fc(input=[fc_last, lstm_last], size=class_dim, act=paddle.activation.Softmax(),
                             bias_attr=bias_attr, param_attr=para_attr)
    lbl = paddle.layer.data("label", paddle.data_type.integer_value(2))
    return paddle.layer.classification_cost(input=output, label=lbl), output


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--net", choices=("lstm", "conv"), default="lstm")
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--stacked", type=int, default=3)
    ap.add_argument("--emb", type=int, default=128)
    ap.add_argument("--hid", type=int, default=512)
    ap.add_argument("--cutoff", type=int, default=150, help="words counted more often than this are the "
                    "dictionary (imdb.word_dict()'s 150)")
    ap.add_argument("--out", default=".", help="where params_pass_<n>.tar go")
    ap.add_argument("--seed", type=int, default=None, help="seed Python's random (the shuffle's order)")
    args = ap.parse_args()
    if args.seed is not None:
        random.seed(args.seed)

    paddle.init(use_gpu=False, trainer_count=1)
    word_dict = imdb.word_dict() if args.cutoff == 150 else imdb.build_dict(
        re.compile(r"aclImdb/((train)|(test))/((pos)|(neg))/.*\.txt$"), args.cutoff)
    dict_dim = len(word_dict)
    if args.net == "conv":
        cost, output = convolution_net(dict_dim, emb_dim=args.emb, hid_dim=args.hid)
    else:
        cost, output = stacked_lstm_net(dict_dim, emb_dim=args.emb, hid_dim=args.hid, stacked_num=args.stacked)
    parameters = paddle.parameters.create(cost)
    adam = paddle.optimizer.Adam(learning_rate=2e-3, regularization=paddle.optimizer.L2Regularization(rate=8e-4),
                                 model_average=paddle.optimizer.ModelAverage(average_window=0.5))
    trainer = paddle.trainer.SGD(cost=cost, parameters=parameters, update_equation=adam)
    feeding = {"word": 0, "label": 1}
    train_reader = paddle.batch(paddle.reader.shuffle(imdb.train(word_dict), buf_size=1000), batch_size=100)
    test_reader = paddle.batch(imdb.test(word_dict), batch_size=100)

    def on_event(event):
        if isinstance(event, paddle.event.EndIteration) and event.batch_id % 100 == 0:
            print(f"pass {event.pass_id}, batch {event.batch_id}: cost {event.cost:.4f}")
        if isinstance(event, paddle.event.EndPass):
            result = trainer.test(reader=test_reader, feeding=feeding)
            print(f"test after pass {event.pass_id}: cost {result.cost:.4f}, "
                  f"error {100 * result.metrics['classification_error_evaluator']:.1f}%")
            with open(os.path.join(args.out, f"params_pass_{event.pass_id}.tar"), "wb") as f:
                trainer.save_parameter_to_tar(f)

    trainer.train(reader=train_reader, event_handler=on_event, feeding=feeding, num_passes=args.passes)
    reviews = [s for _, s in zip(range(6), imdb.test(word_dict)())]
    probs = paddle.infer(output_layer=output, parameters=parameters, input=[(ids,) for ids, _ in reviews],
                         feeding={"word": 0})
    print("labels:", " ".join(str(lab) for _, lab in reviews))
    print("inferred:", " ".join(str(int(p.argmax())) for p in probs))
    print(f"{len(parameters.names())} parameters: {sum(parameters[n].size for n in parameters.names())} values")


if __name__ == "__main__":
    main()
