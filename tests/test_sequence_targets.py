"""Sequence networks on the compiled targets (issue 23): OneHot, SequencePool and its gradient, the per-step
and length-masked losses and their gradients lowered to kernels (kernels/sequence.py, loss.py, loss_grad.py;
rows in kernels/sequence_lowering.py), run under Triton's interpreter against the float64 reference
(`netc run --target interp --compare`, `--train --compare --steps 2`) and built into a .so without a GPU.

The planner's side (memory/graph.py): a network whose batch is T, the leading axis of its sequences, reads
its lengths [B], and the labels [B] of a classifier over a SequencePool, per sample: they neither vote for
the batch nor are batch-sized (fed whole), and a pool's [B, ...] is not batch-sized even when T == B. A
rolled recurrent net's steps flattened, [T*B, ...] (SINGA's char-rnn: an InnerProduct at every step), are
batch-sized, planned as the [T, B, ...] they are."""
from __future__ import annotations

import os
import re
import shutil

# the interpreter mode is fixed when netc.kernels is imported: set it at collection (the library replay below
# runs in this process; the CLI runs set it for their subprocesses themselves)
os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

from netc import pipelines  # noqa: E402
from netc.frontend import load, load_text  # noqa: E402
from netc.diagnostics import DiagnosticEngine  # noqa: E402
from netc.pipelines import Options, Training  # noqa: E402
from cli_process import netc_process  # noqa: E402  (tests/: the test modules' directory)
from cli_inprocess import netc_interp  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEQUENCES = os.path.join(ROOT, "examples", "sequences.nd")
CHAR_RNN = "/work/shared/corpus/singa/0.2.0_char-rnn_job.conf"

# T == B == 3: every form of the losses, the pools with and without lengths, a classifier over two pools
# (its labels per sample), and a per-sample loss between a pool and an InnerProduct of pools (both gradients)
EVERY_FORM = """network tb {
  input x: f32[3, 3, 4]
  input n: i32[3]
  input t: i32[3, 3]
  input y: f32[3, 3, 4]
  input label: i32[3]
  s = Lstm(x) { size: 4 }
  masked = SoftmaxLoss(s, t, n)
  per_step = SoftmaxLoss(s, t)
  l2 = EuclideanLoss(s, y, n)
  top = SequencePool(s, n) { mode: max }
  first = SequencePool(s) { mode: first }
  last = SequencePool(s, n) { mode: last }
  both = Concatenate(top, first, last) { dim: 1 }
  c = InnerProduct(both) { num_outputs: 4 }
  mean = SequencePool(s, n) { mode: mean }
  l3 = EuclideanLoss(c, mean)
  cls = SoftmaxLoss(c, label)
}
"""


def _run(*args, interp=True) -> str:
    """netc on the interpreter target (in this process where it can run here: tests/cli_inprocess.py), or in a
    subprocess without TRITON_INTERPRET to build cubins (it is read when the kernels are first imported)."""
    r = netc_interp(*args) if interp else netc_process(*args)
    assert r.returncode == 0, r.stderr + r.stdout
    return r.stdout + r.stderr


def _tiny_char_rnn(tmp_path, t=3, b=2, vocab=7, hidden=5):
    """SINGA's char-rnn job, as a SINGA conf still, at unroll_len t, batchsize b, a vocabulary and a GRU of
    the given sizes."""
    src = open(CHAR_RNN).read()
    src = re.sub(r"unroll_len: 50", f"unroll_len: {t}", src)
    src = src.replace("batchsize: 50", f"batchsize: {b}").replace("vocab_size: 101", f"vocab_size: {vocab}")
    src = src.replace("dim_hidden: 512", f"dim_hidden: {hidden}").replace("num_output: 101", f"num_output: {vocab}")
    path = tmp_path / "char-rnn.conf"
    path.write_text(src)
    return path


def test_plan_reads_lengths_and_labels_per_sample():
    """T == B: lengths, the per-sample labels and what the pools give are not batch-sized; the sequences are."""
    from netc.codegen import network_io, training_io
    from netc.memory import BATCH, CONSTANT
    from netc.memory.plan import plan_memory
    for mode in ("inference", "training"):
        m = load_text(EVERY_FORM, "tb.nd")
        if mode == "training":
            pipelines.training(m, Options(training=Training()))
        else:
            pipelines.inference(m, Options())
        plan = plan_memory(m, m.networks()[0], mode=mode)
        cls = {k: plan.tensor(k).cls for k in ("x", "n", "t", "y", "label", "s", "top", "both", "c", "mean")}
        assert cls == {"x": BATCH, "n": CONSTANT, "t": BATCH, "y": BATCH, "label": CONSTANT, "s": BATCH,
                       "top": CONSTANT, "both": CONSTANT, "c": CONSTANT, "mean": CONSTANT}
        ins = (training_io if mode == "training" else network_io)(m.networks()[0], plan)[0]
        assert sorted(i.name for i in ins) == ["label", "n", "t", "x", "y"]     # none refused


def test_plan_flattened_steps_are_batch_sized(tmp_path):
    """The rolled char-rnn's [T*B, ...] values are batch-sized (T the batch), planned as [T, B, ...]."""
    from netc.memory import BATCH
    from netc.memory.plan import plan_memory
    diag = DiagnosticEngine()
    m = load(str(_tiny_char_rnn(tmp_path)), diag)
    pipelines.inference(m, Options(), diag)
    plan = plan_memory(m, m.networks()[0])
    assert plan.batch == 3
    for name in ("ip1.in", "ip1", "loss", "loss.label"):
        t = plan.tensor(name)
        assert (t.cls, t.flat, tuple(t.shape)) == (BATCH, True, (3, 2) + tuple(t.shape[2:])), name
    assert not plan.tensor("gru1").flat and plan.tensor("gru1").cls == BATCH


# the Python API's joint sequence topology as its to_nd writes it at T = 5, B = 4 (tests/test_api_sequence.py
# _joint: embedding, lstm, recurrent, gru, the four pools, fc at every step over the flattened steps, a
# classifier and a tagger's masked per-step cost; the sequences batch_axis 1)
API_JOINT = """network joint {
  input words: i32[5, 4] { batch_axis: 1 }
  input words.lengths: i32[4]
  input tags: i32[5, 4] { batch_axis: 1 }
  input label: i32[4]
  emb = Embedding(words) { num_embeddings: 13, dim: 5 }
  lstm = Lstm(emb) { size: 6, activation: "tanh" }
  rnn = Recurrent(emb) { size: 3, activation: "sigmoid" }
  last = SequencePool(lstm, words.lengths) { mode: "last" }
  mean = SequencePool(lstm, words.lengths) { mode: "mean" }
  first = SequencePool(rnn, words.lengths) { mode: "first" }
  max = SequencePool(rnn, words.lengths) { mode: "max" }
  both = Concatenate(last, mean, first, max) { dim: 1 }
  cls = InnerProduct(both) { num_outputs: 2 }
  cls_cost = SoftmaxLoss(cls, label)
  gru = GRU(emb) { dim_hidden: 4 }
  tagger.rows = Reshape(gru) { output_shape: [-1, 4] }
  tagger.fc = InnerProduct(tagger.rows) { num_outputs: 3, params: {weight: "tagger.weight", bias: "tagger.bias"} }
  tagger = Reshape(tagger.fc) { output_shape: [5, 4, 3] }
  tag_cost = SoftmaxLoss(tagger, tags, words.lengths)
  output cls_cost, tag_cost
}
"""


@pytest.mark.parametrize("src", ["sequences", "every_form", "api"])
def test_interpreter_runs_and_trains_against_the_reference(src, tmp_path):
    pytest.importorskip("triton")
    path = SEQUENCES if src == "sequences" else tmp_path / "net.nd"
    if src != "sequences":
        path.write_text(EVERY_FORM if src == "every_form" else API_JOINT)
    if src != "api":        # (the API's net: its two losses are checked by the training steps' forward)
        out = _run("run", path, "--target", "interp", "--compare")
        for name in ("tag_loss", "loss") if src == "sequences" else ("masked", "per_step", "l2", "l3", "cls"):
            assert f"{name}: max relative error" in out, out
    out = _run("run", path, "--target", "interp", "--train", "--compare", "--steps", "2")
    assert re.search(r"compared 2 training steps of network '\w+' \(sgd\) on the interpreter target: ok", out), out


def test_char_rnn_trains_on_the_interpreter_step_for_step(tmp_path):
    """The issue's done-when: SINGA's char-rnn conf (made tiny) trains on the reference executor and through the
    compiled kernels on the interpreter, step for step equal within f32 (its RMSProp with clipping)."""
    pytest.importorskip("triton")
    conf = _tiny_char_rnn(tmp_path, t=5, b=7, vocab=9, hidden=6)     # T*B = 35 rows: several tiles of some kernels
    out = _run("run", conf, "--target", "interp", "--compare")
    assert "loss.loss: max relative error" in out
    out = _run("run", conf, "--target", "interp", "--train", "--compare", "--steps", "2")
    assert "compared 2 training steps of network 'char_rnn' (rmsprop) on the interpreter target: ok" in out, out


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_char_rnn_compiles_with_a_training_step_without_a_gpu(tmp_path):
    pytest.importorskip("triton.backends.nvidia.compiler")
    from netc.runtime import native as N
    conf = _tiny_char_rnn(tmp_path)
    _run("compile", conf, "-o", tmp_path / "c.so", "--target", "cuda", "--train", interp=False)
    m = N.read_manifest(tmp_path / "c.so")
    assert m["batch"] == 3
    ops = [e["op"] for e in m["schedule"]]
    assert ops.count("netc.one_hot") == 2 and "netc.gru" in ops
    assert "netc.softmax_loss_grad" in [e["op"] for e in m["training"]["schedule"]]
    outs = {o["name"]: o for o in m["outputs"]}     # the softmax over the flattened steps: B = 2 rows a step
    assert (outs["loss"]["shape"], outs["loss"]["batched"], outs["loss"]["rows_per_sample"]) == ([6, 7], True, 2)


def test_given_lengths_and_ids_out_of_range_are_located(tmp_path):
    """The kernels cannot raise (a length is clamped to [1, T], an id reads a zero row), so netc run --target interp
    checks the inputs it is given against what reads them, located at the input (the reference raises too)."""
    import numpy as np
    from netc.diagnostics import NetcError
    from netc.runtime.run import check_given_indices
    m = load_text(API_JOINT, "net.nd")
    pipelines.inference(m, Options())
    rng = np.random.default_rng(0)
    good = {"words": rng.integers(0, 13, (5, 4)).astype(np.int32), "words.lengths": np.array([5, 1, 3, 2], np.int32),
            "tags": rng.integers(0, 3, (5, 4)).astype(np.int32), "label": np.array([0, 1, 1, 0], np.int32)}
    check_given_indices(m.networks()[0], good)
    for name, value, words in (("words.lengths", np.array([5, 0, 3, 2], np.int32), "holds 0 at [1]: sequence lengths "
                                "must be 1 to T = 5"),
                               ("words", np.full((5, 4), 13, np.int32), "holds 13 at [0, 0]: row ids must be 0 to 12")):
        with pytest.raises(NetcError, match=re.escape(f"input '{name}' {words}")) as e:
            check_given_indices(m.networks()[0], {**good, name: value})
        assert e.value.diagnostics[0].loc is not None
    pytest.importorskip("triton")
    path = tmp_path / "net.nd"
    path.write_text(API_JOINT)
    np.savez(tmp_path / "in.npz", **{**good, "words.lengths": np.array([5, 6, 3, 2], np.int32)})
    r = netc_interp("run", path, "--target", "interp", "--inputs", tmp_path / "in.npz")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert (f"{tmp_path / 'in.npz'}: error: 'words.lengths' holds 6 at [1]: sequence lengths must be 1 to T = 5 (the "
            f"kernels would clamp it) (input 'words.lengths' of {path}:3:9)") in r.stderr, r.stderr


def test_per_sample_values_follow_the_pool_past_a_seed():
    """What a pool gives stays per sample through the ops computing from it, with inputs (labels) and operand-less
    values (a loss gradient's seed) beside it; a sequence's values do not become per sample."""
    from types import SimpleNamespace
    from netc.memory.graph import per_sample_values

    def op(name, **attrs):
        return SimpleNamespace(name=name, attrs=attrs)
    entries = [(op("netc.input"), [], None, ["x"]), (op("netc.input"), [], None, ["n"]),
               (op("netc.input"), [], None, ["label"]), (op("netc.lstm"), ["x"], (3, 3, 4), ["h"]),
               (op("netc.seq_pool"), ["h", "n"], (3, 3, 4), ["p"]), (op("netc.seed_of_some_kind"), [], None, ["seed"]),
               (op("netc.softmax_loss_grad"), ["p", "label", "seed"], (3, 4), ["g"]),
               (op("netc.seq_pool_grad"), ["h", "n", "g"], (3, 3, 4), ["dh"])]
    assert per_sample_values(entries) == {"p", "g"}


def test_char_rnn_library_replayed_runs_fewer_steps():
    """The tiny char-rnn's .so replayed on the CPU (runtime/interp.py InterpLibrary, the launcher's tiles): its
    softmax output [T*B, V] (the steps flattened, B rows a step) equals the reference's at the compiled T = 70 and,
    called with 2 of its steps, the reference's first 2 * B rows (the GRU reads only the steps before)."""
    pytest.importorskip("triton")
    import tempfile
    from netc.pipelines import Plan, compile
    from netc.runtime.compare import relative_error
    from netc.runtime.interp import InterpLibrary
    from netc.runtime.reference import module_params, random_input, run_reference
    with tempfile.TemporaryDirectory() as d:
        conf = _tiny_char_rnn(__import__("pathlib").Path(d), t=70, b=3, vocab=6, hidden=4)
        diag = DiagnosticEngine()
        m = load(str(conf), diag)
        ctx = compile(m, Options(phase="test"), diag, plan=Plan())
    lib = InterpLibrary(m, ctx.notes["memory_plan"], blocks="cuda")     # the .so's tiles and grids
    net = m.networks()[0]
    ins = {op.attrs["name"]: random_input(net, op, 3) for op in net.regions[0].ops if op.name == "netc.input"}
    params = module_params(m)
    lib.set_params(params)
    want = run_reference(m, ins, params)
    got = lib.forward({k: v.to(torch.int32) for k, v in ins.items()})
    assert tuple(got["loss"].shape) == (210, 6) and relative_error(got["loss"], want["loss"]) <= 1e-4
    short = lib.forward({k: v[:2].to(torch.int32) for k, v in ins.items()})
    assert tuple(short["loss"].shape) == (6, 6) and relative_error(short["loss"], want["loss"][:6]) <= 1e-4


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_a_library_draws_lengths_and_per_sequence_labels_as_the_reference_does(tmp_path):
    """examples/sequences.nd's .so: its manifest says what the integer inputs mean (lengths: steps T = 8;
    per-sequence labels: 3 classes; per-step tags: 4), so Net.random_inputs (`netc run NET.so`, its
    --compare) draws them as the reference executor does, whole where they have no batch axis; on the
    first GPU run with lengths the library refused them ('random integer inputs need the network's
    source')."""
    pytest.importorskip("triton.backends.nvidia.compiler")
    from netc.runtime import native as N
    from netc.runtime.reference import random_labels, random_lengths
    _run("compile", SEQUENCES, "-o", tmp_path / "s.so", "--target", "cuda", interp=False)
    m = N.read_manifest(tmp_path / "s.so")
    ins = {d["name"]: d for d in m["inputs"]}
    assert (ins["lengths"]["steps"], ins["lengths"]["batched"]) == (8, False)
    assert (ins["label"]["classes"], ins["label"]["batched"]) == (3, False)
    assert ins["tags"]["classes"] == 4 and "steps" not in ins["x"]
    net = object.__new__(N.Net)
    net.batch, net.device, net.network = m["batch"], None, m["network"]
    net.inputs = [N.spec_of(d) for d in m["inputs"]]
    xs = net.random_inputs(0, 2)
    assert torch.equal(xs["lengths"], random_lengths("lengths", (6,), 8, 0, torch.int32))
    assert torch.equal(xs["label"], random_labels("label", (6,), 3, 0, torch.int32))
    assert 1 <= int(xs["lengths"].min()) and int(xs["lengths"].max()) <= 8 and len(set(xs["lengths"].tolist())) > 1
    assert tuple(xs["x"].shape) == (2, 6, 5) and tuple(xs["tags"].shape) == (2, 6)
