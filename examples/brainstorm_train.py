#!/usr/bin/env python3
"""Train one of Brainstorm's examples through netc's Python API (netc.load of the Brainstorm architecture,
netc.parameters, netc.train, netc.test) on the archives examples/brainstorm_data.py writes:

    python examples/brainstorm_data.py -o build/brainstorm
    python examples/brainstorm_train.py mnist_pi -d build/brainstorm --passes 20 --batch 100 --lr 0.01
    python examples/brainstorm_train.py cifar10_cnn -d build/brainstorm --passes 3 --batch 32 --lr 0.01

Brainstorm's MomentumStepper(learning_rate, momentum) scales the learning rate by (1 - momentum): it is torch's
momentum (netc.optimizer.Momentum) with lr = learning_rate (1 - momentum), so mnist_pi's learning_rate 0.1 is
--lr 0.01 here. Prints the cost of every pass and the held-out loss and accuracy; --history writes the cost of
every iteration as JSON (the form `netc run --history` writes: step, epoch, loss).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np


def train(net: str, folder: str, passes: int, batch: int, lr: float, momentum: float, seed: int = 0):
    """(history, test result): netc.train from the example's initial parameters."""
    import netc
    top = netc.load(os.path.join(folder, f"{net}.json"))
    params = netc.parameters.create(top, seed=seed)
    with np.load(os.path.join(folder, f"{net}_init.npz")) as init:
        for name in init.files:
            params[name] = init[name]
    with np.load(os.path.join(folder, f"{net}_train.npz")) as z:
        train_set = {k: z[k] for k in z.files}
    with np.load(os.path.join(folder, f"{net}_test.npz")) as z:
        test_set = {k: z[k] for k in z.files}
    history = []

    def on_event(e):
        if isinstance(e, netc.event.EndIteration):
            history.append({"step": len(history) + 1, "epoch": e.pass_id + 1, "loss": float(e.cost)})
        elif isinstance(e, netc.event.EndPass):
            costs = [h["loss"] for h in history if h["epoch"] == e.pass_id + 1]
            print(f"pass {e.pass_id + 1:3d}: mean cost {np.mean(costs):.6f}")

    reader = netc.reader.shuffle(netc.reader.from_arrays(**train_set), 4096, seed=seed)
    netc.train(top, params, reader, netc.optimizer.Momentum(lr, momentum=momentum), num_passes=passes,
               batch_size=batch, event_handler=on_event, seed=seed)
    result = netc.test(top, params, netc.reader.from_arrays(**test_set), batch_size=batch)
    return history, result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("net", choices=("mnist_pi", "cifar10_cnn"))
    ap.add_argument("-d", "--data", default="build/brainstorm", help="brainstorm_data.py's folder")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--lr", type=float, default=0.01, help="torch's momentum lr (Brainstorm's x (1 - momentum))")
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--history", help="write the cost per iteration as JSON")
    a = ap.parse_args(argv)
    if a.passes < 1 or a.batch < 1:
        ap.error("--passes and --batch must be at least 1")
    if not os.path.exists(os.path.join(a.data, f"{a.net}.json")):
        ap.error(f"no {a.net}.json in {a.data}: run python examples/brainstorm_data.py -o {a.data} first")
    history, result = train(a.net, a.data, a.passes, a.batch, a.lr, a.momentum)
    print(f"trained {len(history)} iterations of {a.net}: cost {history[0]['loss']:.6f} -> {history[-1]['loss']:.6f}")
    print(f"held out: loss {result.cost:.6f}, accuracy {100 * result.metrics['accuracy']:.2f}%")
    if a.history:
        with open(a.history, "w") as f:
            json.dump(history, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
