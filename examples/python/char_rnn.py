#!/usr/bin/env python3
"""SINGA's char-rnn with netc's Python API: character ids -> OneHot -> GRU (SINGA's kGRU) -> fc at every
step -> a softmax cost at every step, trained on the Python standard library's own sources
(examples/char_rnn_data.py's windows), then text sampled from it one character at a time with the GRU's
state carried between steps (netc.sample).

The layers and parameter names are the job file's (/work/shared/corpus/singa/0.2.0_char-rnn_job.conf:
onehot, gru1 with z_hx .. c_b, ip1 with w and b; its updater: RMSProp with rho 0.95, SINGA's convention,
gradients clipped to [-5, 5], lr 0.002), so with --hidden 512 the parameters this writes (-o) are the
job's: `netc sample <job.conf> --params P.npz --vocab ...` samples them. One difference: the API's
per-step cost is the mean over the steps, the job's objective their sum (T times larger); the cost
printed here is per character.

    python examples/python/char_rnn.py [--steps 150] [--hidden 128] [--batch 32] [--fast] [-o P.npz]

--fast (or NETC_EXAMPLES_FAST=1): a tiny network, a few steps; a smoke test.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

import netc

L, DT = netc.layer, netc.data_type
ROLES = ("z_hx", "r_hx", "c_hx", "z_hh", "r_hh", "c_hh", "z_b", "r_b", "c_b")
HERE = os.path.dirname(os.path.abspath(__file__))


def corpus_module():
    """examples/char_rnn_data.py, imported from its file."""
    spec = importlib.util.spec_from_file_location("char_rnn_data", os.path.join(HERE, "..", "char_rnn_data.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def network(hidden: int, classes: int = 101):
    """The job's layers, named as there: a cost over every step of the windows."""
    chars = L.data("data", DT.integer_value_sequence(classes))
    following = L.data("label", DT.integer_value_sequence(classes))
    onehot = L.OneHot(chars, depth=classes, name="onehot")                      # [T, B, 101]
    h = L.gru(onehot, hidden, name="gru1", param_name={r: r for r in ROLES})   # [T, B, hidden]
    scores = L.fc(h, classes, name="ip1", param_name={"weight": "w", "bias": "b"})
    return L.classification_cost(scores, following, name="loss")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=150, help="training steps (default 150)")
    ap.add_argument("--hidden", type=int, default=128, help="the GRU's dim_hidden (the job's: 512)")
    ap.add_argument("--batch", type=int, default=32, help="windows per step (the job's: 50)")
    ap.add_argument("--window", type=int, default=50, help="characters per window, T (the job's unroll_len: 50)")
    ap.add_argument("--max-bytes", type=int, default=2_000_000, help="size of the corpus")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--output", help="write the trained parameters here (.npz or .safetensors)")
    ap.add_argument("--fast", action="store_true", default=os.environ.get("NETC_EXAMPLES_FAST") == "1")
    ap.add_argument("--target", default="cpu", choices=("cpu", "reference"),
                    help="where train/test/infer run: cpu (default, f32) or reference (the f64 oracle, slower)")
    a = ap.parse_args(argv)
    if a.fast:
        a.steps, a.hidden, a.batch, a.window, a.max_bytes = 8, 16, 8, 12, 60_000
    data = corpus_module().build(a.window, a.max_bytes)
    train = [(x.tolist(), y.tolist()) for x, y in zip(data["train"]["data"], data["train"]["label"])]
    held = [(x.tolist(), y.tolist()) for x, y in zip(data["val"]["data"], data["val"]["label"])][:10 * a.batch]
    print(f"corpus: {len(data['text']):,} characters of the standard library's sources; {len(train):,} training "
          f"windows of {a.window}, vocabulary {len(data['vocab'])} + 'other'")

    cost = network(a.hidden)
    params = netc.parameters.create(cost, seed=a.seed)
    rmsprop = netc.optimizer.RMSProp(0.002, alpha=0.95, convention="singa", clip_low=-5, clip_high=5)
    start = time.time()

    def report(e):
        if isinstance(e, netc.event.EndIteration) and (e.batch_id + 1) % max(1, a.steps // 6) == 0:
            print(f"step {e.batch_id + 1:4d}: cost {e.cost:.3f} nats per character  ({time.time() - start:.1f}s)")

    reader = netc.reader.firstn(netc.reader.shuffle(lambda: iter(train), 4096, seed=a.seed), a.steps * a.batch)
    netc.train(cost, params, reader, rmsprop, batch_size=a.batch, event_handler=report, target=a.target, threads=1)
    result = netc.test(cost, params, lambda: iter(held), batch_size=a.batch, target=a.target)
    print(f"held-out cost {result.cost:.3f} nats per character on {result.samples} windows "
          f"(uniform over 101 ids: 4.615)")
    if a.output:
        params.save(a.output, state=False)
        print(f"wrote {a.output}")
    text = netc.sample(cost, params, "def ", 200 if not a.fast else 40, temperature=0.8, seed=a.seed,
                       vocab=data["vocab"])
    print("sampled (temperature 0.8) after 'def ':\n" + "def " + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
