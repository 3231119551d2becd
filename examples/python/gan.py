#!/usr/bin/env python3
"""A GAN with netc's Python API, in PaddlePaddle's design (its v1/v2 GAN demo): a generator and a
discriminator as TWO topologies that share the discriminator's parameters by name, trained alternately.

    d0  "generator training":     noise -> G -> D -> cost against "real"   (D immutable here)
    d1  "discriminator training": sample -> D -> cost against real/fake

netc.parameters.create([d0, d1]) gives one ParameterSet in which every D parameter ('D.fc1.weight', ...)
is one tensor: training d1 changes what d0 sees, and train(d0, ..., immutable_parameters={"D.*"})
changes only the generator. The real data is scikit-learn's two moons (make_moons). At the end:
a PNG of generated vs real samples.

    python examples/python/gan.py [--iterations 2000] [--plot build/gan.png] [--fast]

Needs scikit-learn ('netc[data]') and, for the picture, matplotlib ('netc[plot]'). --fast (or
NETC_EXAMPLES_FAST=1): 100 iterations, a smoke test.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import netc

L = netc.layer
NOISE, HIDDEN, BATCH = 4, 32, 64


def generator(noise):
    h = L.fc(noise, HIDDEN, act="relu", name="G.fc1")
    h = L.fc(h, HIDDEN, act="relu", name="G.fc2")
    return L.fc(h, 2, name="G.sample")


def discriminator(x, branch: str):
    """D's layers are named per topology (branch) but bind their parameters to the same names, 'D.<layer>.<role>':
    the two topologies share one discriminator."""
    def named(layer):
        return {"weight": f"D.{layer}.weight", "bias": f"D.{layer}.bias"}
    h = L.fc(x, HIDDEN, act="relu", name=f"{branch}.D.fc1", param_name=named("fc1"))
    h = L.fc(h, HIDDEN, act="relu", name=f"{branch}.D.fc2", param_name=named("fc2"))
    return L.fc(h, 2, name=f"{branch}.D.logit", param_name=named("logit"))   # logits of (fake, real)


def topologies():
    noise = L.data("noise", [NOISE])
    want = L.data("label", [], "i32")                     # 1: what the generator wants D to say, "real"
    sample = generator(noise)
    d0 = netc.Topology(L.softmax_loss(discriminator(sample, "d0"), want, name="cost"), name="d0")
    x = L.data("sample", [2])
    label = L.data("label", [], "i32")                    # 1 real, 0 generated
    d1 = netc.Topology(L.softmax_loss(discriminator(x, "d1"), label, name="cost"), name="d1")
    return d0, d1, sample


def real_samples(n, rng):
    from sklearn.datasets import make_moons
    x, _ = make_moons(n, noise=0.05, random_state=int(rng.integers(1 << 30)))
    return ((x - [0.5, 0.25]) / [1.0, 0.5]).astype(np.float32)     # centred, about unit scale


def one_batch(samples):
    """A reader of one batch (a list of samples): each train() call below is one step."""
    return lambda: iter([samples])


def nearest(a, b):
    """The mean distance from each point of a to its nearest point of b."""
    d = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
    return float(np.sqrt(d.min(1)).mean())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plot", metavar="GAN.png", default="build/gan.png",
                    help="generated vs real samples (default build/gan.png; '' for none)")
    ap.add_argument("--fast", action="store_true", default=os.environ.get("NETC_EXAMPLES_FAST") == "1")
    ap.add_argument("--target", default="cpu", choices=("cpu", "reference"),
                    help="where train/test/infer run: cpu (default, f32) or reference (the f64 oracle, slower)")
    a = ap.parse_args(argv)
    if a.fast:
        a.iterations = 100
    try:
        import sklearn  # noqa: F401
    except ImportError:
        sys.exit("gan.py needs scikit-learn: pip install 'netc[data]'")
    rng = np.random.default_rng(a.seed)
    d0, d1, sample = topologies()
    params = netc.parameters.create([d0, d1], seed=a.seed)
    shared = sorted(set(d0.parameters()) & set(d1.parameters()))
    print(f"d0 and d1 share {len(shared)} parameters: {', '.join(shared)}")
    opt_d, opt_g = netc.optimizer.Adam(0.002, beta1=0.5), netc.optimizer.Adam(0.002, beta1=0.5)
    ones = np.ones(BATCH, dtype=np.int32)
    t0, d_losses, g_losses = time.time(), [], []
    for it in range(1, a.iterations + 1):
        z = rng.standard_normal((BATCH, NOISE)).astype(np.float32)
        # G alone, with the current parameters
        fake = netc.infer(sample, params, {"noise": z}, target=a.target, threads=1)
        real = real_samples(BATCH, rng)
        x = np.concatenate([real, fake])
        y = np.concatenate([ones, 0 * ones])
        r = netc.train(d1, params, one_batch(list(zip(x, y))), opt_d, seed=it, target=a.target, threads=1)
        d_losses.append(r["cost"])
        z = rng.standard_normal((BATCH, NOISE)).astype(np.float32)
        r = netc.train(d0, params, one_batch(list(zip(z, ones))), opt_g, immutable_parameters={"D.*"}, seed=it,
                       target=a.target, threads=1)
        g_losses.append(r["cost"])
        if it % max(1, a.iterations // 10) == 0 or it == 1:
            print(f"iteration {it:5d}: discriminator loss {np.mean(d_losses[-50:]):.4f}, generator loss "
                  f"{np.mean(g_losses[-50:]):.4f}  ({time.time() - t0:.1f}s)", flush=True)
    z = rng.standard_normal((1000, NOISE)).astype(np.float32)
    generated = netc.infer(sample, params, {"noise": z}, target=a.target, threads=1)
    real = real_samples(1000, rng)
    print(f"mean distance of a generated sample to the nearest real one: {nearest(generated, real):.3f} "
          f"(real to real: {nearest(real_samples(1000, rng), real):.3f}, noise to real: "
          f"{nearest(rng.standard_normal((1000, 2)).astype(np.float32), real):.3f})")
    if a.plot:
        try:
            import matplotlib
        except ImportError:
            sys.exit("the picture needs matplotlib: pip install 'netc[plot]' (or --plot '')")
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        os.makedirs(os.path.dirname(a.plot) or ".", exist_ok=True)
        fig, ax = plt.subplots(figsize=(6, 4.5))
        ax.scatter(real[:, 0], real[:, 1], s=4, alpha=0.5, label="real (two moons)")
        ax.scatter(generated[:, 0], generated[:, 1], s=4, alpha=0.5, label="generated")
        ax.set_title(f"netc GAN after {a.iterations} iterations")
        ax.legend(loc="upper right")
        fig.tight_layout()
        fig.savefig(a.plot)
        plt.close(fig)
        print(f"wrote {a.plot}")
    print(f"done in {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
