#!/usr/bin/env python3
"""Pretrain SINGA's RBM stack (the corpus' rbm1 -> rbm4 job.confs: 784-1000-500-250-30, the last with
Gaussian hidden units) layer by layer with contrastive divergence on scikit-learn's bundled digits,
from the command line, as SINGA's examples/rbm does on MNIST: each stage is one `netc run CONF --train`
that starts from the previous stage's parameters (--params, where SINGA reads checkpoint_path) and
writes its own (-o). The digits are 8x8, so `--spatial 8` scales the confs' 28x28 input to 64 visible
units; hidden sizes, updaters and learning rates are the confs'. Then the corpus' rbm_autoencoder.conf
fine-tunes the stack unrolled into an autoencoder (the decoder shares the encoder's weights transposed:
share_from with transpose; Euclidean loss, AdaGrad) from rbm4's parameters: its v0.2 form, at 64 units
(`shape` and the last `num_output` 784 -> 64), with the share_from names SINGA v0.2 needs ('0#w1').

    python examples/rbm_digits.py [-o build/rbm] [--epochs 20] [--ae-epochs 20] [--confs DIR] [--plot PNG]
                                  [--target reference|interp] [--compare-steps N]

--target interp trains every stage through netc's Triton kernels under Triton's interpreter (`netc run
--target interp`, the kernels' large tiles) instead of the reference executor; --compare-steps N first
runs N steps of each stage with `--compare` on the stage's first batch (the interpreter's step beside
the float64 reference's from the same parameters, state and seed; exit 1 beyond f32's tolerance).

Prints the reconstruction error (SINGA's "Squared Error": sum over a sample's units of (v0 - v1)^2,
per sample) of each stage's first and last epoch, the autoencoder's loss (SINGA's Euclidean loss: half
that error), and the held-out error of the stack unrolled into an autoencoder (mean field) before and
after fine-tuning. Needs scikit-learn (and matplotlib for --plot).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

STAGES = (("rbm1", "w1", "b11", "b12", False), ("rbm2", "w2", "b21", "b22", False),
          ("rbm3", "w3", "b31", "b32", False), ("rbm4", "w4", "b41", "b42", True))   # weight, visible, hidden bias


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def unrolled(p: dict, x):
    """The stack as an autoencoder, mean field (probabilities, no sampling): up through the four RBMs'
    hidden units (linear at the top), down through their visible units with the transposed weights."""
    h = x
    for _, w, _, bh, gauss in STAGES:
        a = h @ p[w] + p[bh]
        h = a if gauss else sigmoid(a)
    for _, w, bv, _, _ in reversed(STAGES):
        h = sigmoid(h @ p[w].T + p[bv])
    return h


def first_rbm(p: dict, x):
    """rbm1 alone, mean field: v1 = sigmoid(sigmoid(x W + bh) W^T + bv)."""
    return sigmoid(sigmoid(x @ p["w1"] + p["b12"]) @ p["w1"].T + p["b11"])


def error(x, y) -> float:
    return float(((x - y) ** 2).sum(1).mean())


def losses_by_epoch(path):
    """(mean loss of the first epoch, of the last, steps) of a --history file."""
    by_epoch: dict = {}
    h = json.load(open(path))
    for r in h:
        by_epoch.setdefault(r["epoch"], []).append(r["loss"])
    return float(np.mean(by_epoch[min(by_epoch)])), float(np.mean(by_epoch[max(by_epoch)])), len(h)


def target_flags(a) -> list:
    """netc run's flags for the chosen executor."""
    return ["--reference"] if a.target == "reference" else ["--target", "interp", "--interp-blocks", "large"]


def compare_first_batch(a, netc, conf: str, batch: dict, extra: list):
    """--compare-steps: the stage's first steps on the interpreter beside the reference's; exit 1 if beyond."""
    if not a.compare_steps:
        return
    path = os.path.join(a.output, "first_batch.npz")
    np.savez(path, **batch)
    if netc(["run", conf, "--train", "--target", "interp", "--interp-blocks", "large", "--compare", "--steps",
             str(a.compare_steps), "--inputs", path, *extra]) != 0:
        raise SystemExit(1)


def fine_tune(a, netc, train, p: dict, rows: list):
    """rbm_autoencoder.conf (v0.2) at 64 units from the stack's parameters; its parameters, named as
    the stack's (without v0.2's '0#')."""
    with open(os.path.join(a.confs, "0.2.0_rbm_autoencoder.conf")) as f:
        text = f.read()
    text = text.replace("shape: 784", "shape: 64").replace("num_output: 784", "num_output: 64")
    text = re.sub(r'share_from: "(\w+)"', r'share_from: "0#\1"', text)
    conf = os.path.join(a.output, "autoencoder.conf")
    with open(conf, "w") as f:
        f.write(text)
    data, start = os.path.join(a.output, "digits_flat.npz"), os.path.join(a.output, "autoencoder_start.npz")
    np.savez(data, **{"0#data:0": train["data"].reshape(len(train["data"]), -1)})
    np.savez(start, **{"0#" + k: v for k, v in p.items() if "." not in k})     # the weights, not the velocities
    out, hist = os.path.join(a.output, "autoencoder.npz"), os.path.join(a.output, "autoencoder_history.json")
    compare_first_batch(a, netc, conf, {"0#data:0": train["data"][:100].reshape(100, -1)}, ["--params", start])
    if netc(["run", conf, "--train", *target_flags(a), "--data", data, "--epochs", str(a.ae_epochs), "--params", start,
             "-o", out, "--history", hist]) != 0:
        raise SystemExit(1)
    rows.append(("ae", *losses_by_epoch(hist)))
    return {k[2:]: v for k, v in np.load(out).items() if k.startswith("0#")}


def main(argv=None) -> int:
    from digits_data import digits
    from netc.cli import main as netc
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default="build/rbm", help="folder for the data, parameters and histories")
    ap.add_argument("--epochs", type=int, default=20, help="epochs per stage (default 20)")
    ap.add_argument("--ae-epochs", type=int, default=20, help="epochs of fine-tuning (default 20; 0: none)")
    ap.add_argument("--confs", default=os.path.join(HERE, "..", "..", "shared", "corpus", "singa"),
                    help="folder of the corpus' 0.1.0_rbm_rbm{1..4}.conf")
    ap.add_argument("--plot", default=None, help="write originals and reconstructions of held-out digits here")
    ap.add_argument("--target", choices=("reference", "interp"), default="reference",
                    help="train on the reference executor (default) or through the kernels on the interpreter")
    ap.add_argument("--compare-steps", type=int, default=0, metavar="N",
                    help="first compare N steps of each stage on the interpreter with the reference (netc run --compare)")
    a = ap.parse_args(argv)
    os.makedirs(a.output, exist_ok=True)
    train, test = digits(0)
    data = os.path.join(a.output, "digits_mnist.npz")
    np.savez(data, **{"mnist:00": train["data"]})       # the v0.1 confs' input layer is 'mnist'
    prev, rows = None, []
    for name, *_ in STAGES:
        conf = os.path.join(a.confs, f"0.1.0_rbm_{name}.conf")
        out, hist = os.path.join(a.output, f"{name}.npz"), os.path.join(a.output, f"{name}_history.json")
        start = ["--params", prev] if prev else []
        compare_first_batch(a, netc, conf, {"mnist:00": train["data"][:100]}, ["--spatial", "8", *start])
        args = ["run", conf, "--train", *target_flags(a), "--spatial", "8", "--data", data, "--epochs", str(a.epochs),
                "-o", out, "--history", hist] + start
        if netc(args) != 0:
            return 1
        rows.append((name, *losses_by_epoch(hist)))
        prev = out
    p = dict(np.load(prev))
    x = test["data"].reshape(len(test["data"]), -1).astype(np.float64)
    ft = fine_tune(a, netc, train, p, rows) if a.ae_epochs else None
    print(f"\n{'stage':6}  steps  error (first epoch)  error (last epoch)")
    for name, first, last, steps in rows:
        print(f"{name:6}  {steps:5}  {first:19.3f}  {last:18.3f}")
    print(f"held-out ({len(x)} digits), mean field: rbm1 alone {error(x, first_rbm(p, x)):.3f}, the unrolled stack "
          f"{error(x, unrolled(p, x)):.3f}" + (f", fine-tuned {error(x, unrolled(ft, x)):.3f}" if ft else "")
          + f", the mean digit {error(x, np.broadcast_to(x.mean(0), x.shape)):.3f}")
    if a.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        pick = [int(np.flatnonzero(test["label"] == d)[0]) for d in range(10)]
        rows_img = [("held-out digits", lambda v: v), ("rbm1 reconstruction", lambda v: first_rbm(p, v)),
                    ("rbm1-4 unrolled, pretrained (64-1000-500-250-30)", lambda v: unrolled(p, v))]
        if ft:
            rows_img.append(("the autoencoder, fine-tuned", lambda v: unrolled(ft, v)))
        fig, ax = plt.subplots(len(rows_img), 10, figsize=(10, 1.1 * len(rows_img)))
        for j, i in enumerate(pick):
            for r, (_, f) in enumerate(rows_img):
                ax[r, j].imshow(f(x[i:i + 1])[0].reshape(8, 8), cmap="gray_r", vmin=0, vmax=1)
                ax[r, j].axis("off")
        for r, (t, _) in enumerate(rows_img):
            ax[r, 0].set_title(t, loc="left", fontsize=9)
        fig.subplots_adjust(left=0.01, right=0.99, top=0.9, bottom=0.01, hspace=0.35, wspace=0.05)
        os.makedirs(os.path.dirname(a.plot) or ".", exist_ok=True)
        fig.savefig(a.plot, dpi=100)
        print(f"wrote {a.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
