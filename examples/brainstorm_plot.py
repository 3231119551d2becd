#!/usr/bin/env python3
"""The loss curves of Brainstorm's examples trained by netc, in one picture (docs/images/brainstorm_loss.png):
XOR beside Brainstorm's own curve for the same start (tests/data/brainstorm_xor.json), mnist_pi and cifar10_cnn
(the loss per step, and its mean per epoch). Reads the JSON that `netc run --history` (or brainstorm_train.py
--history) writes:

    python examples/brainstorm_plot.py --xor X.json --mnist-pi M.json --cifar10-cnn C.json -o out.png

Needs matplotlib.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _read(path):
    with open(path) as f:
        rows = json.load(f)
    return [r["step"] for r in rows], [r["loss"] for r in rows], [r["epoch"] for r in rows]


def _epoch_means(steps, losses, epochs):
    xs, ys = [], []
    for e in sorted(set(epochs)):
        idx = [i for i, ep in enumerate(epochs) if ep == e]
        xs.append(steps[idx[-1]])
        ys.append(sum(losses[i] for i in idx) / len(idx))
    return xs, ys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--xor", required=True)
    ap.add_argument("--mnist-pi", required=True)
    ap.add_argument("--cifar10-cnn", required=True)
    ap.add_argument("--brainstorm-xor", default=str(ROOT / "tests" / "data" / "brainstorm_xor.json"),
                    help="Brainstorm's own XOR run (default: tests/data/brainstorm_xor.json)")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args(argv)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("brainstorm_plot.py needs matplotlib: pip install matplotlib")
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2), dpi=80)
    steps, losses, _ = _read(a.xor)
    with open(a.brainstorm_xor) as f:
        bs = json.load(f)["loss"]
    ax = axes[0]
    ax.plot(range(1, len(bs) + 1), bs, color="0.6", lw=4, label="Brainstorm (float32)")
    ax.plot(steps, losses, color="C3", lw=1.2, label="netc (float64)")
    ax.set(title="XOR (test_xor.py): SGD lr 4", xlabel="step (= epoch)", ylabel="loss")
    ax.legend(frameon=False)
    for ax, path, title in ((axes[1], a.mnist_pi, "mnist_pi: momentum, B 100"),
                            (axes[2], a.cifar10_cnn, "cifar10_cnn: momentum, B 32")):
        steps, losses, epochs = _read(path)
        ax.plot(steps, losses, color="C0", lw=0.6, alpha=0.6, label="per step")
        ax.plot(*_epoch_means(steps, losses, epochs), "o-", color="C1", ms=3, label="epoch mean")
        ax.set(title=title, xlabel="step", ylim=(0, None))
        ax.legend(frameon=False)
    fig.tight_layout()
    fig.savefig(a.output)
    print(f"wrote {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
