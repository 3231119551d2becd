"""The fuzzer (bench/fuzz.py) on a fixed sample: 1,000 mutated inputs (seed 0) from the examples,
the shared corpus and IR text, each through `check`, `explain --memory --brief`, `opt -p fuse` and
one `export` format, in this process. None may end in an internal error or a hang, and every
error must name a line and column of the input. The big seeds (Inception, DenseNet, ResNet-50,
the larger Brainstorm layouts) and the unrolled char-rnn jobs are left out to keep this within
about a minute on one core; `python bench/fuzz.py --inputs 100000` covers them. Everything is
written under pytest's tmp_path.
"""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = 1000
MAX_SEED_BYTES = 16_000
EXCLUDE = ["*char-rnn_job*"]


def _fuzz_module():
    spec = importlib.util.spec_from_file_location("netc_bench_fuzz", ROOT / "bench" / "fuzz.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # (its dataclasses look their module up)
    spec.loader.exec_module(mod)
    return mod


def test_fuzz_sample_has_no_internal_errors_hangs_or_unlocated_errors(tmp_path):
    fuzz = _fuzz_module()
    rep, seeds, runner = fuzz.fuzz(seed=0, inputs=SAMPLE, jobs=0, timeout=10.0, workdir=tmp_path / "work",
                                   max_seed_bytes=MAX_SEED_BYTES, exclude=EXCLUDE)
    try:
        assert rep.inputs == SAMPLE and rep.runs >= SAMPLE
        assert {s.frontend for s in seeds} >= {"nd", "mlir"}  # (the corpus front ends when it is there)
        if rep.bad:
            found = fuzz.write_findings(rep, runner, tmp_path / "failures", minimize_them=False, log=lambda s: None)
            lines = [f"{f['file']}: {f['outcome']} in `netc {f['command']}`: {f['message']}" for f in found]
            raise AssertionError(
                f"{rep.total('internal')} internal error(s), {rep.total('hang')} hang(s), {rep.total('unlocated')} "
                f"unlocated error(s) in {rep.runs} runs; inputs under {tmp_path / 'failures'}:\n"
                + "\n".join(lines[:20]) + "\n" + fuzz.table(rep))
    finally:
        runner.close()
    assert rep.total("user") > 0 and rep.total("ok") > 0  # the sample exercises both


def test_fuzz_sample_of_the_new_surfaces(tmp_path):
    """Issue 21's surfaces on a small fixed sample (seconds): the Python API's builders, tuning files,
    .npz/.safetensors parameter files and --data files of the small network, and the training and
    workers explains (and compile --target interp) of the small examples."""
    fuzz = _fuzz_module()
    rep, seeds, runner = fuzz.fuzz(seed=21, inputs=60, jobs=0, timeout=10.0, workdir=tmp_path / "work",
                                   corpus=None, max_seed_bytes=4000,
                                   frontends=["api", "tuning", "params", "data", "nd"])
    try:
        if rep.bad:
            found = fuzz.write_findings(rep, runner, tmp_path / "failures", minimize_them=False, log=lambda s: None)
            raise AssertionError("\n".join(f"{f['file']}: {f['outcome']} in `netc {f['command']}`: {f['message']}"
                                           for f in found))
    finally:
        runner.close()
    commands = {c for (_, c) in rep.counts}
    assert {fuzz.API, fuzz.TUNING_RUN, fuzz.PARAMS_RUN, fuzz.DATA_RUN, fuzz.TRAIN_EXPLAIN,
            fuzz.WORKERS_EXPLAIN} <= commands, commands


def test_classify_outcomes(tmp_path):
    """What counts as located, unlocated and internal."""
    fuzz = _fuzz_module()
    p = str(tmp_path / "n.nd")
    text = "a\nb\n"

    def res(rc, err="", out="", escaped=None):
        return {"rc": rc, "stderr": err, "stdout": out, "escaped": escaped, "seconds": 0.0}

    assert fuzz.classify(res(0), p, text, "nd")[0] == "ok"
    assert fuzz.classify(res(1, f"{p}:2:5: error: bad\n  b\n    ^\n"), p, text, "nd")[0] == "user"
    assert fuzz.classify(res(1, f"{p}:3:1: error: at the end\n"), p, text, "nd")[0] == "user"
    assert fuzz.classify(res(1, f"{p}:9:1: error: past the end\n"), p, text, "nd")[0] == "unlocated"
    assert fuzz.classify(res(1, "netc: error: nowhere\n"), p, text, "nd")[0] == "unlocated"
    assert fuzz.classify(res(1, f"{p}: error: no line\n"), p, text, "nd")[0] == "unlocated"
    assert fuzz.classify(res(1, f"{p}:1:1: error: one\nnetc: error: two\n"), p, text, "nd")[0] == "unlocated"
    assert fuzz.classify(res(1, ""), p, text, "nd")[0] == "unlocated"
    # the quoted source line under a located error is not a diagnostic of its own
    assert fuzz.classify(res(1, f"{p}:1:1: error: x\nx: error: y\n^\n"), p, "x: error: y\n", "nd")[0] == "user"
    internal = fuzz.classify(res(2, "netc: internal error: this is a bug\n  ValueError: nope\n"), p, text, "nd")
    assert internal[:2] == ("internal", "ValueError")
    assert fuzz.classify(res(1, "Traceback (most recent call last):\nKeyError: 'x'\n"), p, text, "nd")[0] == "internal"
    assert fuzz.classify(res(None, escaped="RecursionError: deep"), p, text, "nd")[:2] == ("internal",
                                                                                         "escaped RecursionError")
    assert fuzz.classify(res("hang"), p, text, "nd")[0] == "hang"
    # a binary input: the error names the file and the array (or says the file is no archive)
    z = str(tmp_path / "p.npz")
    npz = fuzz._as_text(fuzz._npz_bytes({"w": __import__("numpy").zeros(2)}))
    assert fuzz.classify(res(1, f"{z}: error: parameter 'w' has shape [2]\n"), z, npz, "params")[0] == "user"
    assert fuzz.classify(res(1, "netc: error: parameter 'w' has shape [2]\n"), z, npz, "params")[0] == "unlocated"
    assert fuzz.classify(res(1, f"{z}: error: something is wrong\n"), z, npz, "params")[0] == "unlocated"
    assert fuzz.classify(res(1, f"{z}: error: cannot read it\n"), z, "junk", "params")[0] == "user"
    # IR text may point, through loc(...), at the file it was printed from
    ir = 'x loc("ex.nd":3:4)\n'
    assert fuzz.classify(res(1, "ex.nd:3:4: error: e\n"), str(tmp_path / "a.mlir"), ir, "mlir")[0] == "user"


def test_inputs_are_reproducible_and_mutated(tmp_path):
    fuzz = _fuzz_module()
    seeds = fuzz.collect_seeds(tmp_path, max_bytes=MAX_SEED_BYTES, exclude=EXCLUDE)
    by = {}
    for s in seeds:
        by.setdefault(s.frontend, []).append(s)
    a = [fuzz.make_case(3, i, by) for i in range(50)]
    b = [fuzz.make_case(3, i, by) for i in range(50)]
    assert [(c.seed.label, c.text, c.mutations, c.export) for c in a] == \
           [(c.seed.label, c.text, c.mutations, c.export) for c in b]
    assert all(c.mutations and c.text != c.seed.text for c in a)


def test_minimizer_keeps_the_outcome(tmp_path):
    """Delta debugging shrinks a failing input to the lines (then characters) that keep it failing."""
    fuzz = _fuzz_module()
    items = list(range(40))
    assert fuzz.ddmin(items, lambda xs: 7 in xs and 31 in xs, [1000]) == [7, 31]
    doc = json.dumps({"a": 1})
    assert fuzz.ddmin(list(doc), lambda cs: "1" in cs, [1000]) == ["1"]


def test_runner_survives_replaced_and_dead_workers(tmp_path, monkeypatch):
    """A worker killed after a hang is replaced and the run goes on (it used to read the task of
    the replacement, None, and end a 100k run with a TypeError); so is one that died while idle."""
    import multiprocessing
    import time
    if "fork" not in multiprocessing.get_all_start_methods():
        import pytest
        pytest.skip("the fake worker body is inherited through fork")
    fuzz = _fuzz_module()

    def fake_run_once(path, command, timeout, debug=False):  # a hang SIGALRM cannot interrupt
        if open(path).read() == "hang":
            time.sleep(60)
        return {"rc": 0, "escaped": None, "stdout": "", "stderr": "", "seconds": 0.0}

    monkeypatch.setattr(fuzz, "run_once", fake_run_once)
    monkeypatch.setattr(fuzz, "GRACE_S", 0.5)
    runner = fuzz.Runner(1, 0.5, tmp_path / "run")
    try:
        tasks = [(i, ("x.nd", t, "check", False, {})) for i, t in enumerate(["ok", "hang", "ok"])]
        got = dict(runner.imap(tasks))
        assert [got[i]["rc"] for i in range(3)] == [0, "hang", 0] and runner.restarts == 1
        assert got[1]["path"].endswith("x.nd")
        runner.workers[0]["proc"].kill()  # dies while idle
        runner.workers[0]["proc"].join(5)
        assert runner.run(("x.nd", "ok", "check", False, {}))["rc"] == 0 and runner.restarts == 2
    finally:
        runner.close()


def test_runner_ignores_the_answer_to_an_earlier_task(tmp_path, monkeypatch):
    """A run stopped early (^C, an exception) leaves a worker's answer unread in its pipe; the next
    task on that worker (the minimizer's, after an interrupted campaign) read it as its own, and
    findings were 'minimized' to inputs that did not fail (issue: fuzz-surfaces-seed21's findings)."""
    import multiprocessing
    if "fork" not in multiprocessing.get_all_start_methods():
        import pytest
        pytest.skip("the fake worker body is inherited through fork")
    fuzz = _fuzz_module()

    def fake_run_once(path, command, timeout, debug=False):
        return {"rc": 0, "escaped": None, "stdout": open(path).read(), "stderr": "", "seconds": 0.0}

    monkeypatch.setattr(fuzz, "run_once", fake_run_once)
    runner = fuzz.Runner(1, 5.0, tmp_path / "run")
    try:
        runner.workers[0]["conn"].send((-1, ("x.nd", "old", "check", False, {})))  # never read
        assert runner.run(("x.nd", "new", "check", False, {}))["stdout"] == "new"
        assert runner.run(("x.nd", "newer", "check", False, {}))["stdout"] == "newer"
    finally:
        runner.close()
