#!/usr/bin/env python3
"""Chapter 01 of the PaddlePaddle book, fit a line, as a PaddlePaddle v2 program on netc: only the import
says netc. Linear regression of the Boston house prices (13 features -> the price) with the square error,
Momentum(momentum=0) at PaddlePaddle's default learning rate, batches of 2, 30 passes; the test cost after
every pass, the parameters saved as PaddlePaddle's tar file, then predictions for five test houses -- from
the trained parameters and from the tar file read back.

    python examples/v2/fit_a_line.py [--passes 30] [--out DIR] [--seed N]

Data: PaddlePaddle's cache, ~/.cache/paddle/dataset/uci_housing/housing.data (netc.v2 downloads nothing;
tests/test_v2.py writes a small file of that format). docs/v2.md.
"""
from __future__ import annotations

import argparse
import os
import random

import netc.v2 as paddle
import netc.v2.dataset.uci_housing as uci_housing


def regression():
    """(prediction, cost): one fc layer without activation, the square error against the price."""
    features = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(13))
    price = paddle.layer.data(name="y", type=paddle.data_type.dense_vector(1))
    prediction = paddle.layer.fc(input=features, size=1, act=paddle.activation.Linear())
    return prediction, paddle.layer.square_error_cost(input=prediction, label=price)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passes", type=int, default=30)
    ap.add_argument("--out", default=".", help="where params_pass_<n>.tar go")
    ap.add_argument("--seed", type=int, default=None, help="seed Python's random (the shuffle's order)")
    args = ap.parse_args()
    if args.seed is not None:
        random.seed(args.seed)

    paddle.init(use_gpu=False, trainer_count=1)
    prediction, cost = regression()
    parameters = paddle.parameters.create(cost)
    sgd = paddle.trainer.SGD(cost=cost, parameters=parameters,
                             update_equation=paddle.optimizer.Momentum(momentum=0))
    fields = {"x": 0, "y": 1}
    test_costs = []

    def on_event(event):
        if isinstance(event, paddle.event.EndIteration) and event.batch_id % 100 == 0:
            print(f"pass {event.pass_id}, batch {event.batch_id}: cost {event.cost:.4f}")
        if isinstance(event, paddle.event.EndPass):
            with open(os.path.join(args.out, f"params_pass_{event.pass_id}.tar"), "wb") as f:
                sgd.save_parameter_to_tar(f)
            result = sgd.test(reader=paddle.batch(uci_housing.test(), batch_size=2), feeding=fields)
            test_costs.append(result.cost)
            print(f"test after pass {event.pass_id}: cost {result.cost:.4f}")

    sgd.train(reader=paddle.batch(paddle.reader.shuffle(uci_housing.train(), buf_size=500), batch_size=2),
              feeding=fields, event_handler=on_event, num_passes=args.passes)

    houses, prices = [], []
    for features, price in uci_housing.test()():
        houses.append((features,))
        prices.append(float(price[0]))
        if len(houses) == 5:
            break
    predicted = paddle.infer(output_layer=prediction, parameters=parameters, input=houses)
    with open(os.path.join(args.out, f"params_pass_{args.passes - 1}.tar"), "rb") as f:
        saved = paddle.parameters.Parameters.from_tar(f)
    again = paddle.infer(output_layer=prediction, parameters=saved, input=houses)
    for p, q, t in zip(predicted[:, 0], again[:, 0], prices):
        print(f"price {t:.2f}, predicted {p:.2f} (from the tar file {q:.2f})")
    print(f"test cost: {test_costs[0]:.4f} after the first pass, {test_costs[-1]:.4f} after the last")


if __name__ == "__main__":
    main()
