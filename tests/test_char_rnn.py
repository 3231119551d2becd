"""SINGA's char-rnn end to end: the corpus script (examples/char_rnn_data.py: the standard library's
sources as character windows), a GRU's final state carried between calls (4 steps = 2 + 2 through the
reference executor), a tiny version of the char-rnn job (the conf with small T, B and dim_hidden) training
from the command line on those windows, and sampling from it (netc/runtime/sample.py, `netc sample`):
deterministic under a seed, and T one-step calls with the state carried equal to one T-step run."""
from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from netc.cli import main
from netc.diagnostics import NetcError
from netc.frontend import load, load_text
from netc import pipelines
from netc.pipelines import Options
from netc.runtime.reference import ReferenceExecutor, module_params, run_reference
from netc.runtime.sample import Sampler, load_sampler, step_module

ROOT = Path(__file__).resolve().parent.parent
CONF = Path("/work/shared/corpus/singa/0.2.0_char-rnn_job.conf")
needs_conf = pytest.mark.skipif(not CONF.is_file(), reason="SINGA corpus not available")


def data_module():
    spec = importlib.util.spec_from_file_location("char_rnn_data", ROOT / "examples" / "char_rnn_data.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


D = data_module()


def small_corpus(steps=8):
    return D.build(steps=steps, max_bytes=40_000, files=D.stdlib_files()[:6])


# -- the corpus ------------------------------------------------------------------------------------

def test_windows_are_ids_and_next_characters():
    d = small_corpus()
    vocab, text = d["vocab"], d["text"]
    assert len(vocab) == min(100, len(set(text))) == len(set(vocab))
    counts = [text.count(c) for c in vocab]
    assert counts == sorted(counts, reverse=True)              # most frequent first
    assert min(counts) >= max((text.count(c) for c in set(text) - set(vocab)), default=0)
    for part in ("train", "val"):
        x, y = d[part]["data"], d[part]["label"]
        assert x.dtype == y.dtype == np.int32 and x.shape == y.shape and x.shape[1] == 8
        assert x.min() >= 0 and x.max() <= len(vocab) and y.min() >= 0 and y.max() <= len(vocab)
        assert (y[:, :-1] == x[:, 1:]).all()                   # label = the next character
        assert (y[:-1, -1] == x[1:, 0]).all()                  # windows one after the other
    ids = D.encode(text, vocab)
    assert (d["train"]["data"].reshape(-1) == ids[:d["train"]["data"].size]).all()
    assert D.decode(d["train"]["data"][0], vocab) == text[:8]
    assert D.decode([100], vocab) == "\ufffd"


def test_rarer_characters_are_the_other_id(tmp_path):
    """150 distinct characters, character k appearing k + 1 times: the 100 most frequent are the vocabulary
    (most frequent first), the 50 rarest all id 100."""
    chars = [chr(0x100 + k) for k in range(150)]
    (tmp_path / "a.py").write_text("".join(c * (k + 1) for k, c in enumerate(chars)), encoding="utf-8")
    d = D.build(steps=5, max_bytes=10 ** 6, files=[str(tmp_path / "a.py")])
    assert d["vocab"] == "".join(reversed(chars[50:]))
    ids = D.encode(d["text"], d["vocab"])
    assert (ids[:sum(range(1, 51))] == 100).all() and ids.max() == 100 and ids[-1] == 0


def test_corpus_is_reproducible(tmp_path):
    a, b = small_corpus(), small_corpus()
    assert a["vocab"] == b["vocab"] and a["files"] == b["files"]
    for part in ("train", "val"):
        for k in ("data", "label"):
            assert np.array_equal(a[part][k], b[part][k])
    assert D.main(["-o", str(tmp_path / "c"), "--max-bytes", "30000", "--steps", "10"]) == 0
    assert D.main(["-o", str(tmp_path / "d"), "--max-bytes", "30000", "--steps", "10"]) == 0
    for name in ("train.npz", "val.npz", "vocab.txt", "corpus.txt"):
        assert (tmp_path / f"c_{name}").read_bytes() == (tmp_path / f"d_{name}").read_bytes()
    vocab = (tmp_path / "c_vocab.txt").read_text(encoding="utf-8")
    assert 0 < len(vocab) <= 100
    w = np.load(tmp_path / "c_train.npz")
    assert w["data"].shape[1] == 10


# -- the GRU's carried state ---------------------------------------------------------------------

GRU_NET = """network g {{
  input x: f32[{t}, 3, 5]
  input h0: f32[3, 4]
  y = GRU(x, h0) {{ dim_hidden: 4, params: {{z_hx: {{name: "z_hx"}}, r_hx: {{name: "r_hx"}}, c_hx: {{name: "c_hx"}},
                   z_hh: {{name: "z_hh"}}, r_hh: {{name: "r_hh"}}, c_hh: {{name: "c_hh"}}, z_b: {{name: "z_b"}},
                   r_b: {{name: "r_b"}}, c_b: {{name: "c_b"}}}} }}
}}
"""


def compiled_text(text, path="g.nd"):
    m = load_text(text, path)
    pipelines.inference(m, Options())
    return m


def test_gru_final_state_carries_4_as_2_plus_2():
    """netc.gru's final_state is y[T-1]: two calls of 2 steps with carry_state equal one call of 4 steps."""
    four, two = compiled_text(GRU_NET.format(t=4)), compiled_text(GRU_NET.format(t=2))
    x = torch.randn(4, 3, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    h0 = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    whole = ReferenceExecutor(four, seed=5)
    want = whole.run({"x": x, "h0": h0})["y"]
    carry = ReferenceExecutor(two, seed=5, carry_state=True)
    first = carry.run({"x": x[:2], "h0": h0})["y"]          # given: the input wins over the (empty) state
    assert torch.equal(carry.state["h0"], first[-1])
    second = carry.run({"x": x[2:]})["y"]                   # h0 from the state carried
    torch.testing.assert_close(torch.cat([first, second]), want, rtol=1e-12, atol=1e-12)
    carry.reset_state()
    again = carry.run({"x": x[2:]})["y"]                    # zeros after a reset
    torch.testing.assert_close(again, whole.run({"x": x[2:].repeat(2, 1, 1), "h0": torch.zeros(3, 4,
                                                 dtype=torch.float64)})["y"][:2], rtol=1e-12, atol=1e-12)


# -- the char-rnn job, tiny ------------------------------------------------------------------------

def tiny_conf(tmp_path, t=6, b=4, hidden=16) -> Path:
    """The char-rnn job with unroll_len t, batchsize b and dim_hidden hidden (vocabulary 101 and the
    rest unchanged)."""
    text = CONF.read_text()
    text = re.sub(r"unroll_len: 50", f"unroll_len: {t}", text)
    text = text.replace("batchsize: 50", f"batchsize: {b}").replace("dim_hidden: 512", f"dim_hidden: {hidden}")
    assert text.count(f"unroll_len: {t}") == 2 and f"batchsize: {b}" in text
    path = tmp_path / "tiny_char_rnn.conf"
    path.write_text(text)
    return path


def write_windows(tmp_path, steps=6):
    d = small_corpus(steps)
    np.savez(tmp_path / "train.npz", **d["train"])
    np.savez(tmp_path / "val.npz", **{k: v[:40] for k, v in d["val"].items()})
    (tmp_path / "vocab.txt").write_text(d["vocab"], encoding="utf-8", newline="")
    return d


@needs_conf
def test_tiny_char_rnn_trains_from_the_command_line(tmp_path, capsys):
    """The conf (SINGA's RMSProp, lr schedule and clipping) at T = 6, B = 4, dim_hidden 16 on windows of the
    corpus: the loss (the sum over the 6 steps of the batch-mean cross-entropy) falls over 60 steps."""
    conf = tiny_conf(tmp_path)
    write_windows(tmp_path)
    hist = tmp_path / "h.json"
    assert main(["run", str(conf), "--train", "--reference", "--data", str(tmp_path / "train.npz"), "--steps", "60",
                 "--eval", str(tmp_path / "val.npz"), "--history", str(hist), "-o", str(tmp_path / "p.npz")]) == 0
    out = capsys.readouterr().out
    assert "trained 60 steps" in out and "eval on 40 samples" in out
    line = next(x for x in out.split("\n") if x.startswith("eval on"))
    loss, per_step = (float(v) for v in re.search(r"loss ([0-9.]+),.* cross-entropy per step ([0-9.]+)", line).groups())
    assert abs(per_step - loss / 6) < 1e-3 and "of the steps" in line
    losses = [h["loss"] for h in json.loads(hist.read_text())]
    assert len(losses) == 60
    assert abs(losses[0] - 6 * np.log(101)) < 0.15 * 6 * np.log(101)    # about T ln V at the start
    assert np.mean(losses[-5:]) < 0.85 * np.mean(losses[:5])
    assert (tmp_path / "p.npz").is_file()


# -- sampling --------------------------------------------------------------------------------------

@needs_conf
def test_one_step_calls_equal_one_run_over_the_steps(tmp_path):
    """The sampler's network (T = 1, the GRU's state an input carried between calls) gives, call by call, the
    scores the T-step training network gives at each step."""
    conf = tiny_conf(tmp_path)
    m = load(str(conf))
    pipelines.inference(m, Options())
    params = module_params(m, seed=7)
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, 101, (6, 4), generator=g, dtype=torch.int32)
    full = run_reference(m, {"data": ids, "label": ids}, params, intermediates=True)["loss.in"].reshape(6, 4, 101)
    sampler = load_sampler(str(conf), params, batch=4)
    assert sampler.batch == 4 and sampler.ids == "data" and sampler.scores == "loss.in"
    for t in range(6):
        torch.testing.assert_close(sampler.step(ids[t]), full[t], rtol=1e-10, atol=1e-12)
    assert set(sampler.executor.state) == {"gru1.h0"}


@needs_conf
def test_sampling_is_deterministic_under_a_seed(tmp_path):
    conf = tiny_conf(tmp_path)
    m = load(str(conf))
    pipelines.inference(m, Options())
    params = module_params(m, seed=2)
    a = load_sampler(str(conf), params, seed=11, batch=2).sample(30, [5, 6, 7])
    b = load_sampler(str(conf), params, seed=11, batch=2).sample(30, [5, 6, 7])
    c = load_sampler(str(conf), params, seed=12, batch=2).sample(30, [5, 6, 7])
    assert a == b and a != c and len(a) == 2 and all(len(s) == 30 for s in a)
    assert all(0 <= i < 101 for s in a for i in s)
    greedy = load_sampler(str(conf), params, temperature=0).sample(10, [5])
    assert greedy == load_sampler(str(conf), params, temperature=0, seed=99).sample(10, [5])
    with pytest.raises(NetcError, match="lack z_hx"):
        load_sampler(str(conf), {k: v for k, v in params.items() if k != "z_hx"})


@needs_conf
def test_netc_sample_command(tmp_path, capsys):
    """netc sample after netc run --train -o: a seeded text of the vocabulary's characters; located refusals."""
    conf = tiny_conf(tmp_path)
    d = write_windows(tmp_path)
    assert main(["run", str(conf), "--train", "--reference", "--data", str(tmp_path / "train.npz"), "--steps", "3",
                 "-o", str(tmp_path / "p.npz")]) == 0
    capsys.readouterr()
    args = ["sample", str(conf), "--params", str(tmp_path / "p.npz"), "--vocab", str(tmp_path / "vocab.txt"),
            "--prime", "def ", "-n", "40", "--seed", "3"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert main(args) == 0
    assert capsys.readouterr().out == first
    assert len(first) == 45 and first.startswith("def ") and set(first[:-1]) <= set(d["vocab"]) | {"\ufffd"}
    assert main(args[:-1] + ["4", "--batch", "2", "-o", str(tmp_path / "s.txt")]) == 0
    assert len((tmp_path / "s.txt").read_text(encoding="utf-8").split("\n\n")) == 2
    assert main(["sample", str(conf), "--params", str(tmp_path / "p.npz"), "--prime", "1, 2 3", "-n", "5"]) == 0
    ids = capsys.readouterr().out.split()
    assert ids[:3] == ["1", "2", "3"] and len(ids) == 8
    assert main(["sample", str(conf), "--params", str(tmp_path / "p.npz"), "--prime", "101"]) == 1
    assert "outside the network's classes 0 to 100" in capsys.readouterr().err
    assert main(["sample", str(ROOT / "examples" / "digits.nd"), "--params", str(tmp_path / "p.npz")]) == 1
    err = capsys.readouterr().err
    assert "sampling feeds one sequence of ids [T, B]" in err and "digits.nd:" in err


def test_step_module_refuses_a_reshape_fixing_other_sizes():
    text = """network n {
  input data: i32[4, 3] { batch_axis: 1 }
  input label: i32[12]
  oh = OneHot(data) { depth: 5 }
  g = GRU(oh) { dim_hidden: 6 }
  flat = Reshape(g) { output_shape: [6, 12] }
  s = Reshape(flat) { output_shape: [12, 6] }
  loss = SoftmaxLoss(s, label)
}
"""
    m = load_text(text, "n.nd")
    with pytest.raises(NetcError) as e:
        step_module(m)
    d = e.value.diagnostics[0]
    assert "layer 'flat' reshapes to [6, 12]" in d.message and d.loc.line == 6


# -- the Python API ----------------------------------------------------------------------------------

def test_api_sample_equals_the_runtime_sampler():
    """netc.sample over a topology built with the API (ids -> OneHot -> gru -> fc at every step -> a per-step
    cost): seeded, and the same draws as the runtime's Sampler over the job-like .nd the topology writes."""
    import netc
    L, DT = netc.layer, netc.data_type
    ids = L.data("data", DT.integer_value_sequence(7))
    nxt = L.data("label", DT.integer_value_sequence(7))
    h = L.gru(L.OneHot(ids, depth=7, name="onehot"), 5, name="gru1")
    cost = L.classification_cost(L.fc(h, 7, name="ip1"), nxt, name="loss")
    params = netc.parameters.create(cost, seed=4)
    a = netc.sample(cost, params, [1, 2], 12, seed=3, batch=2)
    assert a == netc.sample(cost, params, [1, 2], 12, seed=3, batch=2) and len(a) == 2 and len(a[0]) == 12
    text = netc.Topology(cost).to_nd(batch=2, steps=1)
    want = load_sampler("api.nd", {k: params[k] for k in params}, batch=2, seed=3, text=text).sample(12, [1, 2])
    assert a == want
    greedy = netc.sample(cost, params, "ab", 5, vocab="abcdef", temperature=0)
    assert len(greedy) == 5 and greedy == netc.sample(cost, params, "ab", 5, vocab="abcdef", temperature=0, seed=9)
    assert set(netc.sample(cost, params, "ab", 20, vocab="abcdef", seed=1)) <= set("abcdef\ufffd")


def test_the_example_runs(tmp_path):
    import subprocess
    import sys
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "python" / "char_rnn.py"), "--fast"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300,
                       env=dict(os.environ, NETC_EXAMPLES_FAST="1"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "held-out cost" in r.stdout and "sampled (temperature 0.8) after 'def ':" in r.stdout


@needs_conf
def test_api_load_refuses_time_major_inputs(tmp_path):
    """netc.load reads inputs batch-first: the job's time-major windows would be fed along time (with T = B
    the shapes even agree), so it refuses them, located at the call and at the input."""
    import netc
    import netc.api
    conf = tiny_conf(tmp_path, t=4, b=4, hidden=8)
    with pytest.raises(netc.api.Error) as e:
        netc.load(str(conf))
    text = str(e.value)
    assert "input 'data' takes its samples along axis 1 (time-major, [4, 4])" in text
    assert "test_char_rnn.py:" in text and "tiny_char_rnn.conf:30:5: note: the input is declared here" in text


@needs_conf
def test_eval_of_windows_counts_each_window_and_character(tmp_path):
    """--eval's evaluate() on a time-major job, a last batch padded (S = 2B + 3): the loss is the mean over
    the windows of SINGA's objective (each window's sum over its steps), the accuracy the share of its
    characters predicted right -- against each window run alone (copied into every column of a batch)."""
    from netc.runtime.train import Dataset, evaluate
    conf = tiny_conf(tmp_path, t=5, b=4, hidden=8)
    m = load(str(conf))
    pipelines.inference(m, Options())
    params = module_params(m, seed=3)
    g = np.random.default_rng(0)
    x = g.integers(0, 101, (11, 5)).astype(np.int32)
    y = g.integers(0, 101, (11, 5)).astype(np.int32)
    got = evaluate(m, params, Dataset({"data": torch.tensor(x), "label": torch.tensor(y)}, "--eval"))
    total, right = 0.0, 0
    for s in range(11):
        feed = {"data": torch.tensor(np.repeat(x[s][:, None], 4, 1)), "label": torch.tensor(np.repeat(y[s][:, None], 4, 1))}
        named = run_reference(m, feed, params, intermediates=True)
        total += float(named["loss.loss"])
        right += int((named["loss.in"].reshape(5, 4, 101)[:, 0].argmax(1) == torch.tensor(y[s]).long()).sum())
    assert got["samples"] == 11
    assert abs(got["loss"] - total / 11) < 1e-9 * total
    assert got["accuracy"] == right / 55
    # SINGA's objective is the sum over the 5 steps of the batch-mean cross-entropy: per step, / 5
    assert abs(got["cross_entropy_per_step"] - total / 11 / 5) < 1e-6 * total
