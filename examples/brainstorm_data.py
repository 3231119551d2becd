#!/usr/bin/env python3
"""Brainstorm's examples for netc, on data made here (no download): the architectures of IDSIA Brainstorm's
examples/mnist_pi.py, examples/cifar10_cnn.py and its XOR integration test (test_integration/test_xor.py) in
Brainstorm's JSON form, their initial parameters drawn as those scripts draw them (Brainstorm's Gaussian
initializers), and scikit-learn's bundled digits (load_digits: 1,797 8x8 images) made into MNIST-like and
CIFAR-like archives for `netc run ARCH.json --train --data ... --eval ...`:

    PREFIX/mnist_pi.json, cifar10_cnn.json, xor.json      the architectures (netc reads them directly)
    PREFIX/mnist_pi_init.npz, cifar10_cnn_init.npz        the initial parameters, by netc's parameter names
    PREFIX/mnist_pi_train.npz, mnist_pi_test.npz          Input.default f32 [S, 28, 28, 1], Input.targets f32 [S, 1]
    PREFIX/cifar10_cnn_train.npz, cifar10_cnn_test.npz    Input.default f32 [S, 32, 32, 3], Input.targets f32 [S, 1]
    PREFIX/xor.npz, xor_init.npz                          the four XOR points and their targets; the parameters
                                                          Brainstorm's XOR test starts from (Gaussian(1.0), seed 42)

The digits: each 8x8 image (0..16 scaled to 0..1) is enlarged 3x (nearest) to 24x24 and placed in a 28x28 frame
(mnist_pi: Brainstorm's Input is (28, 28, 1); its first layer flattens it), or enlarged 4x to 32x32 with three
channels of different gains, standardized per channel like Brainstorm's normalized CIFAR-10 (cifar10_cnn).
A stratified fifth is held out (centered in its frame); every training digit appears `--copies` times at random
offsets (default 2: 2,884 training samples, 355 held out). Targets are class indices as Brainstorm keeps them,
(T, B, 1) floats: one step, so a sample's target is [class].

    python examples/brainstorm_data.py [-o build/brainstorm] [--seed 0] [--copies 2]

Needs scikit-learn (pip install 'netc[data]').
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np


def _fc(size, nxt, activation="linear"):
    return {"@type": "FullyConnected", "@outgoing_connections": {"default": [nxt]}, "size": size,
            "activation": activation}


def _input(shape, first, targets_to):
    return {"@type": "Input", "@outgoing_connections": {"default": [first], "targets": [targets_to]},
            "out_shapes": {"default": ["T", "B", *shape], "targets": ["T", "B", 1]}}


def _loss():
    return {"@type": "Loss", "@outgoing_connections": {}, "importance": 1.0}


def mnist_pi() -> dict:
    """examples/mnist_pi.py: get_in_out_layers('classification', (28, 28, 1), 10, projection_name='FC'),
    Dropout(0.2), FullyConnected(1200, 'rel') x 2 each after Dropout(0.5)."""
    return {
        "Input": _input((28, 28, 1), "Dropout_1.default", "Output.targets"),
        "Dropout_1": {"@type": "Dropout", "@outgoing_connections": {"default": ["Hid1.default"]}, "drop_prob": 0.2},
        "Hid1": _fc(1200, "Dropout_2.default", "rel"),
        "Dropout_2": {"@type": "Dropout", "@outgoing_connections": {"default": ["Hid2.default"]}, "drop_prob": 0.5},
        "Hid2": _fc(1200, "Dropout_3.default", "rel"),
        "Dropout_3": {"@type": "Dropout", "@outgoing_connections": {"default": ["FC.default"]}, "drop_prob": 0.5},
        "FC": _fc([10], "Output.default"),
        "Output": {"@type": "SoftmaxCE", "@outgoing_connections": {"loss": ["Loss.default"]}},
        "Loss": _loss(),
    }


def cifar10_cnn() -> dict:
    """examples/cifar10_cnn.py: three Convolution2D(5x5, padding 2, 'rel') each before a 3x3/2 max Pooling2D,
    FullyConnected(64), the 10-way projection, SoftmaxCE."""
    arch = {"Input": _input((32, 32, 3), "Conv1.default", "Output.targets")}
    for i, f in ((1, 32), (2, 32), (3, 64)):
        nxt = f"Conv{i + 1}.default" if i < 3 else "FC.default"
        arch[f"Conv{i}"] = {"@type": "Convolution2D", "@outgoing_connections": {"default": [f"Pooling2D_{i}.default"]},
                            "num_filters": f, "kernel_size": [5, 5], "stride": [1, 1], "padding": 2,
                            "activation": "rel"}
        arch[f"Pooling2D_{i}"] = {"@type": "Pooling2D", "@outgoing_connections": {"default": [nxt]},
                                  "kernel_size": [3, 3], "type": "max", "stride": [2, 2], "padding": 0}
    arch["FC"] = _fc(64, "Output_projection.default", "rel")
    arch["Output_projection"] = _fc([10], "Output.default")
    arch["Output"] = {"@type": "SoftmaxCE", "@outgoing_connections": {"loss": ["Loss.default"]}}
    arch["Loss"] = _loss()
    return arch


def xor() -> dict:
    """test_integration/test_xor.py: FullyConnected(2, sigmoid) >> FullyConnected(1, sigmoid, 'OutLayer') >>
    BinomialCrossEntropy >> Loss, the targets from the Input."""
    return {
        "Input": _input((2,), "FullyConnected.default", "BinomialCrossEntropy.targets"),
        "FullyConnected": _fc(2, "OutLayer.default", "sigmoid"),
        "OutLayer": _fc(1, "BinomialCrossEntropy.default", "sigmoid"),
        "BinomialCrossEntropy": {"@type": "BinomialCrossEntropy",
                                 "@outgoing_connections": {"default": ["Loss.default"]}},
        "Loss": _loss(),
    }


XOR_X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=np.float32)
XOR_T = np.array([[0], [1], [1], [0]], dtype=np.float32)
# The parameters Brainstorm's XOR test draws (net.initialize(Gaussian(1.0), seed=42), Brainstorm's own code at
# 8f1fc88 run in float32; tests/data/brainstorm_xor.json has the whole run), in Brainstorm's shapes: W (size, in).
XOR_INIT_BRAINSTORM = {
    "FullyConnected": {"W": [[1.2561421394348145, -0.5379302501678467], [-0.10434044897556305, 0.669921875]],
                       "bias": [-0.44221779704093933, -1.185210108757019]},
    "OutLayer": {"W": [[-1.9983912706375122, -0.6890639662742615]], "bias": [0.8146527409553528]},
}


def xor_init() -> dict:
    """XOR_INIT_BRAINSTORM by netc's names and shapes (a FullyConnected's weight is [in, size])."""
    out = {}
    for layer, ps in XOR_INIT_BRAINSTORM.items():
        out[f"{layer}.weight"] = np.array(ps["W"], dtype=np.float32).T.copy()
        out[f"{layer}.bias"] = np.array(ps["bias"], dtype=np.float32)
    return out


def initial_params(net: str, seed: int = 0) -> dict:
    """netc's parameter names -> arrays drawn as Brainstorm's example draws them: mnist_pi Gaussian(0.01) for every
    parameter (biases too); cifar10_cnn Gaussian(0.01) for the convolutions' W, Gaussian(0.1) for FC's and the
    projection's W, biases 0. netc's shapes: a FullyConnected's weight [in, size] (Brainstorm's W is (size, in)),
    a Convolution2D's [kh, kw, C, F] (Brainstorm's (F, kh, kw, C))."""
    rng = np.random.default_rng(seed)

    def g(std, *shape):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    if net == "mnist_pi":
        shapes = {"Hid1": (784, 1200), "Hid2": (1200, 1200), "FC": (1200, 10)}
        out = {}
        for name, (i, o) in shapes.items():
            out[f"{name}.weight"], out[f"{name}.bias"] = g(0.01, i, o), g(0.01, o)
        return out
    if net == "cifar10_cnn":
        out = {}
        for name, (c, f) in (("Conv1", (3, 32)), ("Conv2", (32, 32)), ("Conv3", (32, 64))):
            out[f"{name}.weight"], out[f"{name}.bias"] = g(0.01, 5, 5, c, f), np.zeros(f, np.float32)
        for name, (i, o) in (("FC", (576, 64)), ("Output_projection", (64, 10))):
            out[f"{name}.weight"], out[f"{name}.bias"] = g(0.1, i, o), np.zeros(o, np.float32)
        return out
    raise ValueError(f"no initial parameters for {net!r}")


def _load_digits():
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        sys.exit("brainstorm_data.py needs scikit-learn: pip install 'netc[data]' (or pip install scikit-learn)")
    d = load_digits()
    return d.images.astype(np.float32) / 16.0, d.target


def split(y, seed: int = 0):
    """A boolean mask of the held-out samples: a fifth of every class, seeded."""
    rng = np.random.default_rng(seed)
    test = np.zeros(len(y), dtype=bool)
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        test[idx[:len(idx) // 5]] = True
    return test


def framed(images, scale: int, frame: int, offsets):
    """Each 8x8 image enlarged `scale` times (nearest) and placed at its (row, col) offset in a frame x frame
    field of zeros: [S, frame, frame]."""
    big = np.kron(images, np.ones((scale, scale), dtype=np.float32))
    out = np.zeros((len(images), frame, frame), dtype=np.float32)
    n = big.shape[1]
    for k, (r, c) in enumerate(offsets):
        out[k, r:r + n, c:c + n] = big[k]
    return out


def make_images(images, labels, net: str, rng, copies: int, centered: bool):
    """(Input.default, Input.targets) of one part: `copies` placements of every image (centered, or at random
    offsets), shuffled."""
    scale, frame = (3, 28) if net == "mnist_pi" else (4, 32)
    room = frame - 8 * scale
    xs, ys = [], []
    for _ in range(copies):
        offs = ([(room // 2, room // 2)] * len(images) if centered
                else rng.integers(0, room + 1, size=(len(images), 2)))
        xs.append(framed(images, scale, frame, offs))
        ys.append(labels)
    x, y = np.concatenate(xs), np.concatenate(ys)
    order = rng.permutation(len(x))
    x, y = x[order], y[order]
    if net == "mnist_pi":
        x = x[..., None]
    else:
        gains = np.array([1.0, 0.8, 0.6], dtype=np.float32)      # three channels that differ
        x = x[..., None] * gains
    return x.astype(np.float32), y.astype(np.float32)[:, None]


def datasets(net: str, seed: int = 0, copies: int = 2, limit: int | None = None):
    """(train, test): dicts of Input.default and Input.targets. `limit`: only the first `limit` digits (tests)."""
    images, labels = _load_digits()
    if limit is not None:
        images, labels = images[:limit], labels[:limit]
    test = split(labels, seed)
    rng = np.random.default_rng(seed + 1)
    xtr, ytr = make_images(images[~test], labels[~test], net, rng, copies, centered=False)
    xte, yte = make_images(images[test], labels[test], net, rng, 1, centered=True)
    if net == "cifar10_cnn":                     # standardized per channel with the training set's statistics
        mean, std = xtr.mean(axis=(0, 1, 2)), xtr.std(axis=(0, 1, 2))
        xtr, xte = (xtr - mean) / std, (xte - mean) / std
    return ({"Input.default": xtr, "Input.targets": ytr}, {"Input.default": xte, "Input.targets": yte})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default="build/brainstorm", help="folder of the files (default build/brainstorm)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the split, the offsets and the initial parameters")
    ap.add_argument("--copies", type=int, default=2, help="placements of every training digit (default 2)")
    a = ap.parse_args(argv)
    if a.copies < 1:
        ap.error(f"--copies must be at least 1, got {a.copies}")
    os.makedirs(a.output, exist_ok=True)
    for name, arch in (("mnist_pi", mnist_pi()), ("cifar10_cnn", cifar10_cnn()), ("xor", xor())):
        path = os.path.join(a.output, f"{name}.json")
        with open(path, "w") as f:
            json.dump(arch, f, indent=1)
        print(f"wrote {path}")
    np.savez(os.path.join(a.output, "xor.npz"), **{"Input.default": XOR_X, "Input.targets": XOR_T})
    np.savez(os.path.join(a.output, "xor_init.npz"), **xor_init())
    for net in ("mnist_pi", "cifar10_cnn"):
        path = os.path.join(a.output, f"{net}_init.npz")
        np.savez(path, **initial_params(net, a.seed))
        print(f"wrote {path}")
        for part, arrays in zip(("train", "test"), datasets(net, a.seed, a.copies)):
            path = os.path.join(a.output, f"{net}_{part}.npz")
            np.savez(path, **arrays)
            print(f"wrote {path}: {len(arrays['Input.targets'])} samples")
    return 0


if __name__ == "__main__":
    sys.exit(main())
