#!/usr/bin/env python3
"""Handwritten digits with netc's Python API: scikit-learn's bundled 8x8 digits (1,797 images, no
download), a small convolutional network -- the one in examples/digits.nd, written as Python
expressions -- trained with Adam on the CPU target (the API's default; --target reference: the f64
oracle, about 4 times slower), then the held-out accuracy.

    python examples/python/digits.py [--passes 10] [--plot build/digits_cost.png] [--fast] [--target cpu]

Needs scikit-learn (pip install 'netc[data]'); --plot needs matplotlib ('netc[plot]'). --fast (or the
environment variable NETC_EXAMPLES_FAST=1): one pass over a fifth of the data, a smoke test.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import netc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from digits_data import digits  # noqa: E402  (examples/digits_data.py: the stratified 80/20 split)

L = netc.layer


def network():
    """(cost, prob): examples/digits.nd as layers. The data layers are made image first, then label, so a
    sample is (image, label)."""
    image = L.data("data", [8, 8, 1])               # pixels scaled to [0, 1], NHWC
    label = L.data("label", [], "i32")              # the digit
    h = L.conv2d(image, 3, 16, padding="SAME", act="relu", name="conv1")
    h = L.max_pool(h, 2, stride=2, name="pool1")
    h = L.conv2d(h, 3, 32, padding="SAME", act="relu", name="conv2")
    h = L.max_pool(h, 2, stride=2, name="pool2")
    h = L.fc(h, 64, act="relu", name="fc1")
    logits = L.fc(h, 10, name="fc2")
    return L.softmax_loss(logits, label, name="loss"), L.softmax(logits, name="prob")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passes", type=int, default=10, help="passes over the training digits (default 10)")
    ap.add_argument("--batch", type=int, default=32, help="batch size (default 32)")
    ap.add_argument("--lr", type=float, default=0.003, help="Adam's learning rate (default 0.003)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plot", metavar="COST.png", help="draw the training cost (matplotlib)")
    ap.add_argument("--save", metavar="PARAMS.npz", help="write the trained parameters (.npz or .safetensors)")
    ap.add_argument("--fast", action="store_true", default=os.environ.get("NETC_EXAMPLES_FAST") == "1",
                    help="one pass over a fifth of the data (a smoke test)")
    ap.add_argument("--target", default="cpu", choices=("cpu", "reference"),
                    help="where train/test/infer run: cpu (default, f32) or reference (the f64 oracle, slower)")
    a = ap.parse_args(argv)
    train_set, test_set = digits(a.seed)
    if a.fast:
        a.passes = 1
        train_set = {k: v[::5] for k, v in train_set.items()}

    cost, prob = network()
    params = netc.parameters.create(cost, seed=a.seed)
    print(f"{len(params)} parameters, {sum(t.numel() for t in params.values()):,} values")
    # samples (image, label) in a new order every pass, in batches of a.batch (the last partial one dropped)
    train_reader = netc.reader.batch(
        netc.reader.shuffle(netc.reader.from_arrays(train_set["data"], train_set["label"]), 2048, seed=a.seed),
        a.batch, drop_last=True)
    test_reader = netc.reader.from_arrays(test_set["data"], test_set["label"])
    t0 = time.time()

    def report(e):
        if isinstance(e, netc.event.EndPass):
            r = netc.test(cost, params, test_reader, batch_size=128, target=a.target, threads=1)
            print(f"pass {e.pass_id + 1}: train cost {e.cost:.4f}, accuracy {100 * e.metrics['accuracy']:.2f}%;"
                  f" held-out cost {r.cost:.4f}, accuracy {100 * r.metrics['accuracy']:.2f}%  "
                  f"({time.time() - t0:.1f}s)", flush=True)

    handlers = [report] + ([netc.plot.CostPlot(a.plot, "digits: training cost")] if a.plot else [])
    steps_per_pass = len(train_set["label"]) // a.batch
    # Adam, its learning rate halved every two passes (a SINGA-style step schedule)
    adam = netc.optimizer.Adam(schedule={"type": "step", "base_lr": a.lr, "gamma": 0.5,
                                         "change_freq": 2 * steps_per_pass})
    # threads=1: the network's ops are small, and one thread beats two contending ones
    netc.train(cost, params, train_reader, adam, event_handler=handlers, num_passes=a.passes, seed=a.seed,
               target=a.target, threads=1)

    result = netc.test(cost, params, test_reader, batch_size=128, target=a.target, threads=1)
    predicted = netc.infer(prob, params, {"data": test_set["data"]}, target=a.target, threads=1).argmax(1)
    agree = float((predicted == test_set["label"]).mean())
    print(f"held-out accuracy: {100 * result.metrics['accuracy']:.2f}% on {result.samples} digits "
          f"(infer agrees: {100 * agree:.2f}%), trained in {time.time() - t0:.1f}s")
    if a.plot:
        print(f"wrote {a.plot}")
    if a.save:
        params.save(a.save)
        print(f"wrote {a.save}")
    return 0 if a.fast or result.metrics["accuracy"] >= 0.95 else 1


if __name__ == "__main__":
    sys.exit(main())
