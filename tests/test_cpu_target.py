"""The CPU target (runtime/cpu.py, `netc run --target cpu`, issue 28): its lowerings compute what the references
compute, and its runs and training steps equal the float64 reference executor within f32 (`--compare`)."""
from __future__ import annotations

import pytest
import torch

from netc.cli import main
from netc.ops import reference as R
from netc.runtime import cpu as C
from netc.runtime import cpu_emit as C_emit
from netc.runtime.cpu import maxpool_grad


@pytest.mark.parametrize("n,h,w,c,k,s,pad", [
    (2, 7, 9, 3, 3, 2, "SAME"),        # asymmetric SAME: the bottom and right padded more
    (1, 8, 8, 4, 2, 2, "VALID"),
    (3, 5, 6, 2, 3, 1, "SAME"),        # overlapping windows: gradients add
    (2, 6, 6, 3, 1, 2, "SAME"),        # Paleo's SAME of a 1x1 stride-2 window: a negative pad (a crop)
    (1, 4, 4, 2, 3, 3, [1, 1]),        # explicit padding
    (1, 2, 2, 1, 2, 2, [2, 2]),        # windows without an in-bounds element pass no gradient
])
def test_maxpool_gradient_lowering_is_the_reference(n, h, w, c, k, s, pad):
    g = torch.Generator().manual_seed(n * 100 + h)
    x = torch.randn(n, h, w, c, generator=g, dtype=torch.float64)
    x[:, 0, 1] = x[:, 0, 0]                # ties: the first maximum in row-major window order takes it
    a = {"ksize": [1, k, k, 1], "strides": [1, s, s, 1], "padding": pad}
    dy = torch.randn(R.maxpool(x, a["ksize"], a["strides"], pad).shape, generator=g, dtype=torch.float64)
    want = R.maxpool_grad(x, dy, a["ksize"], a["strides"], pad)
    got = maxpool_grad(a, [x, dy], {})
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n,h,w,ci,co,k,s,pad", [
    (2, 7, 9, 3, 5, 3, 2, "SAME"), (1, 8, 8, 4, 6, 2, 2, "VALID"), (3, 5, 6, 2, 4, 3, 1, "SAME"),
    (2, 6, 6, 3, 2, 1, 2, "SAME"),     # a negative pad: the forward crops a row and a column
    (1, 6, 5, 2, 3, 3, 3, [1, 1]), (2, 9, 9, 3, 4, 5, 1, "SAME"),
])
def test_convolution_and_pooling_lowerings_are_the_references(n, h, w, ci, co, k, s, pad):
    g = torch.Generator().manual_seed(h * 10 + k)
    x = torch.randn(n, h, w, ci, generator=g, dtype=torch.float64)
    wt = torch.randn(k, k, ci, co, generator=g, dtype=torch.float64)
    bias = torch.randn(co, generator=g, dtype=torch.float64)
    a = {"strides": [1, s, s, 1], "padding": pad, "activation": "relu", "filter": [k, k, ci, co],
         "input_shape": list(x.shape)}
    y = R.conv2d(x, wt, bias, a["strides"], pad, activation="relu")
    torch.testing.assert_close(C.conv2d(a, [x], {"weight": wt, "bias": bias}), y, rtol=1e-12, atol=1e-12)
    dz = torch.randn(y.shape, generator=g, dtype=torch.float64)
    torch.testing.assert_close(C.conv2d_grad_filter(a, [x, dz], {}), R.conv2d_grad_filter(x, dz, [k, k], a["strides"], pad),
                               rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(C.conv2d_grad_data(a, [dz], {"weight": wt}),
                               R.conv2d_grad_data(dz, wt, list(x.shape), a["strides"], pad), rtol=1e-12, atol=1e-12)
    p = {"ksize": [1, k, k, 1], "strides": [1, s, s, 1], "padding": pad}
    torch.testing.assert_close(C.maxpool(p, [x], {}), R.maxpool(x, p["ksize"], p["strides"], pad), rtol=0, atol=0)


def test_inference_and_training_equal_the_reference(capsys):
    assert main(["run", "examples/digits.nd", "--target", "cpu", "--compare"]) == 0
    assert "prob: max relative error" in capsys.readouterr().err
    assert main(["run", "examples/lenet.nd", "--target", "cpu", "--train", "--steps", "2", "--compare"]) == 0
    assert "on the CPU target: ok" in capsys.readouterr().out


def test_it_trains(capsys, tmp_path):
    assert main(["run", "examples/digits.nd", "--target", "cpu", "--train", "--steps", "8", "--lr", "0.05",
                 "--history", str(tmp_path / "h.json")]) == 0
    import json
    losses = [r["loss"] for r in json.loads((tmp_path / "h.json").read_text())]
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("flags,why", [
    (["--dtype", "bf16"], "computes in f32"),
    (["--train", "--dtype", "f64"], "trains in f32"),
    (["--train", "--check-grads"], "trains in f32"),
])
def test_what_it_does_not_do_is_a_clear_error(capsys, flags, why):
    assert main(["run", "examples/digits.nd", "--target", "cpu", *flags]) == 1
    assert why in capsys.readouterr().err


def _program(path: str, optimizer: dict):
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load
    from netc.pipelines import Options, Training, program
    diag = DiagnosticEngine()
    module = load(path, diag)
    program(module, Options(phase="train", training=Training(optimizer=optimizer)), diag)
    return module, [n for n in module.networks() if "gradients" in n.attrs][0]


def _steps_agree(module, net, steps=3):
    """CpuTrainer's generated steps against the reference executor's in f32 arithmetic, from the same
    parameters, inputs and learning rate: the losses, the gradients and the parameters and state after."""
    from netc.runtime.train import ReferenceTrainer
    cpu = C.CpuTrainer(module, net, None, seed=3, capture=True)
    ref = ReferenceTrainer(module, net, {k: v.clone() for k, v in cpu.params.items()}, seed=3, dtype=torch.float32)
    for _ in range(steps):
        got = cpu.step(None, 0.05)
        with R.computing_in(torch.float32):
            want = ref.step(None, 0.05)
        for n in net.attrs["losses"]:
            torch.testing.assert_close(got[n], want[n], rtol=1e-5, atol=1e-6)
        for p, g in cpu.gradients(got).items():
            _close(g, ref.gradients(want)[p])
        for k, v in ref.params.items():
            _close(cpu.params[k], v)
    return cpu


def _close(a, b, tol=1e-4):
    """max |a - b| within tol of b's largest magnitude (f32 rounding in another order; Adam's and RMSProp's
    division moves a few small elements further, relative to themselves)."""
    assert float((a.double() - b.double()).abs().max()) <= tol * max(float(b.abs().max()), 1e-3)


@pytest.mark.parametrize("optimizer", [{"name": "sgd"}, {"name": "momentum", "momentum": 0.9},
                                       {"name": "adam"}, {"name": "rmsprop"}])
def test_the_generated_step_is_the_reference(optimizer):
    module, net = _program("examples/digits.nd", optimizer)
    cpu = _steps_agree(module, net)
    prog = cpu.program
    assert "def step(feed, cap, threads):" in prog.source
    # every op of the digits network and its SGD/momentum/Adam update has its out= form; RMSProp's update
    # calls its reference (and still agrees)
    if optimizer["name"] == "rmsprop":
        assert prog.slow and all(s.endswith(".update") for s in prog.slow)
    else:
        assert prog.slow == []


def test_every_op_by_its_reference_too(monkeypatch):
    """The generated step without any out= form (each op's lowering or reference, copied into place) agrees too:
    the fallback every op without a fast form takes."""
    from netc.runtime import cpu_step
    monkeypatch.setattr(cpu_step, "EMITTERS", {})
    module, net = _program("examples/lenet.nd", {"name": "momentum", "momentum": 0.9})
    cpu = _steps_agree(module, net, steps=2)
    assert not cpu.program.fast


def test_a_step_stays_in_its_arenas():
    """Parameters and state are views of the constant arena, which no step replaces: updates land in place."""
    module, net = _program("examples/digits.nd", {"name": "adam"})
    cpu = C.CpuTrainer(module, net, None, seed=1)
    arenas = [a.data_ptr() for a in cpu.program.arenas.arenas]
    lo, hi = arenas[0], arenas[0] + cpu.program.arenas.arenas[0].numel()
    before = {k: v.clone() for k, v in cpu.params.items()}
    threads = torch.get_num_threads()
    for _ in range(2):
        cpu.step(None, 0.01)
    assert torch.get_num_threads() == threads        # the small ops' one thread is undone after the step
    assert "torch.set_num_threads(1)" in cpu.program.source
    assert [a.data_ptr() for a in cpu.program.arenas.arenas] == arenas
    assert all(lo <= v.data_ptr() < hi for v in cpu.params.values())
    assert not torch.equal(cpu.params["fc1.weight"], before["fc1.weight"])
    assert cpu.gradients(cpu.step(None, 0.01)) is None      # not captured: the plan reused their bytes


def test_inference_is_the_reference():
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load
    from netc.pipelines import Options, inference
    from netc.runtime.reference import run_reference
    module = load("examples/lenet.nd", DiagnosticEngine())
    inference(module, Options(), DiagnosticEngine())
    x = {"data": torch.rand(64, 28, 28, 1), "label": torch.randint(0, 10, (64,))}
    net = C.CpuNet(module, None, None, seed=2)
    with R.computing_in(torch.float32):
        want = run_reference(module, x, None, seed=2, dtype=torch.float32)
    for _ in range(2):
        got = net(x)
        for k in want:
            torch.testing.assert_close(got[k], want[k], rtol=1e-5, atol=1e-6)
    # a convolution oneDNN can write into its arena view has no local beside its planned bytes
    assert "x_conv1_nchw" not in net.program.source and "conv1_nchw" in net.program.source
    # new parameters: the convolution weights an inference step rearranged once follow
    new = {"conv1.weight": net.params["conv1.weight"] * -0.5, "conv2.bias": net.params["conv2.bias"] + 1}
    net.set_params(new)
    with R.computing_in(torch.float32):
        want = run_reference(module, x, {k: v.clone() for k, v in net.params.items()}, seed=2, dtype=torch.float32)
    for k, v in net(x).items():
        torch.testing.assert_close(v, want[k], rtol=1e-5, atol=1e-6)
    from netc.diagnostics import NetcError
    with pytest.raises(NetcError, match="did you mean 'data'"):
        net({"dat": x["data"], "label": x["label"]})
    with pytest.raises(NetcError, match="missing input 'label'"):
        net({"data": x["data"]})


MIXED = """
network mixed {
  input data: f32[4, 8, 8, 2]
  input label: i32[4]
  conv1 = Convolution(data) { filter: [3, 3, 2, 5], strides: [1, 2, 2, 1], padding: SAME, activation: relu }
  pool1 = Pooling(conv1) { ksize: [1, 2, 2, 1], strides: [1, 1, 1, 1], padding: SAME }
  conv2 = Convolution(pool1) { filter: [3, 3, 5, 4], padding: SAME, activation: tanh }
  fc1 = InnerProduct(conv2) { num_outputs: 6, activation: sigmoid }
  drop = Dropout(fc1) { dropout_keep_prob: 0.6 }
  fc2 = InnerProduct(drop) { num_outputs: 3 }
  loss = SoftmaxLoss(fc2, label)
  output loss
}
"""


def test_fast_forms_and_references_mixed(tmp_path):
    """Asymmetric SAME padding (conv1's 3x3 window at stride 2 on 8 rows, pool1's 2x2 at stride 1), tanh and sigmoid gradients,
    dropout: the ops with an out= form and those calling their lowering or reference, in one step, agree with the
    reference executor."""
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load_text
    from netc.pipelines import Options, Training, program
    module = load_text(MIXED, str(tmp_path / "mixed.nd"))
    program(module, Options(phase="train", training=Training(optimizer={"name": "momentum", "momentum": 0.5})),
            DiagnosticEngine())
    net = [n for n in module.networks() if "gradients" in n.attrs][0]
    cpu = _steps_agree(module, net, steps=2)
    fast, slow = set(cpu.program.fast), set(cpu.program.slow)
    assert {"drop", "drop.mask", "conv2", "fc1", "fc2", "conv2.weight.grad"} <= fast
    assert {"conv1", "conv1.weight.grad", "pool1", "conv2.act_grad"} <= slow


@pytest.mark.parametrize("shape,keep,salt,offset", [((32, 256), 0.5, 123, 0), ((7, 13), 0.3, 2 ** 32 - 5, 17),
                                                    ((4, 6), 0.9, 0, 2 ** 32 - 30)])
def test_the_dropout_mask_draw_is_the_references_bit_for_bit(shape, keep, salt, offset):
    out = torch.empty(shape)
    draw = C_emit.PhiloxMask({"keep_prob": keep, "salt": salt, "offset": offset}, shape[0] * shape[1])
    for seed in (0, 5, 2 ** 40 + 3, -1):
        draw(torch.tensor(seed), out)
        assert torch.equal(out, R.dropout_mask(seed, shape, keep, salt, offset).to(torch.float32))


def test_inference_local_results_reach_a_reference_reader(tmp_path, monkeypatch):
    """A convolution's result kept in a local for its one reader (where oneDNN cannot write it into the arena view:
    a torch without oneDNN's in-place convolution, as here): a pooling with an out= form (pool2) takes the local; one
    calling its lowering (pool1's asymmetric SAME window) gets the arena view filled first."""
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load_text
    from netc.pipelines import Options, inference
    from netc.runtime.reference import run_reference
    text = """
network loc {
  input data: f32[2, 7, 7, 3]
  conv1 = Convolution(data) { filter: [3, 3, 3, 4], padding: VALID, activation: relu }
  pool1 = Pooling(conv1) { ksize: [1, 2, 2, 1], strides: [1, 1, 1, 1], padding: SAME }
  conv2 = Convolution(pool1) { filter: [3, 3, 4, 2], padding: VALID, activation: tanh }
  pool2 = Pooling(conv2) { ksize: [1, 3, 3, 1], strides: [1, 1, 1, 1], padding: VALID }
  output pool2
}
"""
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    module = load_text(text, str(tmp_path / "loc.nd"))
    inference(module, Options(), DiagnosticEngine())
    net = C.CpuNet(module, None, None, seed=4)
    src = net.program.source
    assert net.program.slow == ["pool1"] and "x_conv1_nchw = " in src and "x_conv2_nchw = " in src
    assert "conv1_nchw.copy_(x_conv1_nchw)" in src
    x = {"data": torch.randn(2, 7, 7, 3)}
    with R.computing_in(torch.float32):
        want = run_reference(module, x, None, seed=4, dtype=torch.float32)
    for k, v in net(x).items():
        torch.testing.assert_close(v, want[k], rtol=1e-5, atol=1e-6)


def test_a_value_a_reference_refuses_is_located(tmp_path, capsys):
    """An id outside an embedding's table, in a step that calls the embedding's reference: the error at its layer."""
    import numpy as np
    nd = tmp_path / "emb.nd"
    nd.write_text("network emb {\n  input ids: i32[2, 3]\n  e = Embedding(ids) { num_embeddings: 10, dim: 4 }\n"
                  "  fc = InnerProduct(e) { num_outputs: 2 }\n  output fc\n}\n")
    np.savez(tmp_path / "in.npz", ids=np.array([[1, 2, 3], [4, 5, 12]], dtype=np.int32))
    assert main(["run", str(nd), "--target", "cpu", "--inputs", str(tmp_path / "in.npz")]) == 1
    err = capsys.readouterr().err
    assert "emb.nd:3:3: error: Embedding 'e': id 12" in err and "Traceback" not in err


@pytest.mark.parametrize("train", [False, True])
def test_a_label_outside_the_classes_is_located(tmp_path, capsys, train):
    import numpy as np
    np.savez(tmp_path / "in.npz", data=np.zeros((32, 8, 8, 1), np.float32), label=np.array([12] + [1] * 31, np.int32))
    flags = ["--train", "--steps", "1"] if train else []
    assert main(["run", "examples/digits.nd", "--target", "cpu", *flags, "--inputs", str(tmp_path / "in.npz")]) == 1
    err = capsys.readouterr().err
    if train:   # training checks its inputs first, on every target (runtime/run.py check_given_indices)
        assert "in.npz: error: 'label' holds 12 at [0]: class labels must be 0 to 9 (input 'label' of" in err
    else:       # the generated step's guard
        assert "digits.nd:24:3: error: SoftmaxLoss 'loss': a label outside the classes 0 to 9" in err


SEQUENCE_ROWS = """
network rows {
  input data: i32[6, 4] { batch_axis: 1 }
  input label: i32[6, 4] { batch_axis: 1 }
  onehot = OneHot(data) { depth: 7 }
  gru1 = GRU(onehot) { dim_hidden: 5 }
  ip1.in = Reshape(gru1) { output_shape: [-1, 5] }
  ip1 = InnerProduct(ip1.in) { num_outputs: 7 }
  labels = Reshape(label) { output_shape: [-1] }
  loss = SoftmaxLoss(ip1, labels)
}
"""


def test_a_sequences_steps_flattened_into_rows(tmp_path, capsys):
    """char-rnn's pattern: a GRU's [T, B, H] reshaped to [T*B, H] rows for an inner product (the plan places them as
    [T, B, H]: the step's views take the IR's shape), inference and training against the reference."""
    path = tmp_path / "rows.nd"
    path.write_text(SEQUENCE_ROWS)
    assert main(["run", str(path), "--target", "cpu", "--compare"]) == 0
    assert "loss: max relative error" in capsys.readouterr().err
    assert main(["run", str(path), "--target", "cpu", "--train", "--steps", "2", "--compare"]) == 0
    assert "on the CPU target: ok" in capsys.readouterr().out


def test_the_eager_baseline_flattens_a_sequence_into_rows(tmp_path):
    """bench/cpu.py's PyTorch baseline (runtime/eager.py) on the same pattern: the Reshape that merges the time axis
    into the rows equals the reference's."""
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load_text
    from netc.pipelines import Options, inference
    from netc.runtime.eager import EagerNet
    from netc.runtime.reference import module_params, run_reference
    module = load_text(SEQUENCE_ROWS, str(tmp_path / "rows.nd"))
    inference(module, Options(), DiagnosticEngine())
    params = module_params(module, None, 3, torch.float64)
    x = {"data": torch.randint(0, 7, (6, 4), dtype=torch.int32), "label": torch.randint(0, 7, (6, 4), dtype=torch.int32)}
    want = run_reference(module, x, params, dtype=torch.float64)
    got = EagerNet(module, None, params, "cpu", torch.float64)(x)
    torch.testing.assert_close(got["loss"], want["loss"], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("lbr", [True, False])
@pytest.mark.parametrize("h0,bias,step", [(False, True, False), (True, False, False), (True, True, True)])
def test_the_gru_lowerings_are_the_references(lbr, h0, bias, step):
    """runtime/cpu_recurrent.py's GRU forward and recurrence gradient against ops/recurrent.py's references, in float64:
    both conventions of the reset, with and without h0 and biases, a single unrolled step [B, X]."""
    from netc.ops import lookup
    from netc.runtime import cpu_recurrent as CR
    from netc.ops.recurrent import ROLES
    g = torch.Generator().manual_seed(7)
    t, b, x_dim, hid = 5, 3, 4, 6
    a = {"dim_hidden": hid, "bias": bias, "linear_before_reset": lbr}
    shapes = {**{f"{k}_hx": (hid, x_dim) for k in "zrc"}, **{f"{k}_hh": (hid, hid) for k in "zrc"},
              **{f"{k}_b": (hid,) for k in "zrc"}}
    p = {r: torch.randn(shapes[r], generator=g, dtype=torch.float64) for r in (ROLES if bias else ROLES[:6])}
    x = torch.randn((b, x_dim) if step else (t, b, x_dim), generator=g, dtype=torch.float64)
    ins = [x] + ([torch.randn(b, hid, generator=g, dtype=torch.float64)] if h0 else [])
    want = lookup("netc.gru").reference(a, ins, p)
    torch.testing.assert_close(CR.gru(a, ins, p), want, rtol=1e-12, atol=1e-12)
    dy = torch.randn(want.shape, generator=g, dtype=torch.float64)
    want = lookup("netc.gru_grad_gates").reference(a, ins + [dy], p)
    torch.testing.assert_close(CR.gru_grad_gates(a, ins + [dy], p), want, rtol=1e-10, atol=1e-12)


CONVS = """
network convs {
  input data: f32[3, 9, 9, 2]
  input label: i32[3]
  conv1 = Convolution(data) { filter: [3, 3, 2, 4], strides: [1, 2, 2, 1], padding: VALID, activation: relu }
  conv2 = Convolution(conv1) { filter: [3, 3, 4, 5], padding: SAME, activation: tanh }
  pool = Pooling(conv2) { ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1], padding: VALID }
  fc = InnerProduct(pool) { num_outputs: 3 }
  loss = SoftmaxLoss(fc, label)
}
"""


@pytest.mark.parametrize("form", ["cl", "nchw", "im2col", "into", "copy", "pairwise"])
def test_every_convolution_form_is_the_reference(form, monkeypatch, tmp_path):
    """Each form runtime/cpu_tune.py may choose (forced by NETC_CPU_TUNE) -- oneDNN on channels_last views or on
    NCHW copies, im2col and a GEMM, oneDNN writing into the arena; an inference pooling copied into place or taken as
    maxima of strided views -- in training steps and in inference (where a convolution's result stays a local)
    agrees with the reference."""
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load_text
    from netc.pipelines import Options, Training, inference, program
    from netc.runtime.reference import run_reference
    monkeypatch.setenv("NETC_CPU_TUNE", form)
    module = load_text(CONVS, str(tmp_path / "convs.nd"))
    program(module, Options(phase="train", training=Training(optimizer={"name": "sgd"})), DiagnosticEngine())
    cpu = _steps_agree(module, [n for n in module.networks() if "gradients" in n.attrs][0], steps=2)
    assert f"# {form} (runtime/cpu_tune.py)" in cpu.program.source or form in ("im2col", "copy", "pairwise")
    module = load_text(CONVS, str(tmp_path / "convs.nd"))
    inference(module, Options(), DiagnosticEngine())
    net = C.CpuNet(module, None, None, seed=2)
    assert f"# {form} (runtime/cpu_tune.py)" in net.program.source
    x = {"data": torch.randn(3, 9, 9, 2), "label": torch.tensor([0, 2, 1], dtype=torch.int32)}
    with R.computing_in(torch.float32):
        want = run_reference(module, x, None, seed=2, dtype=torch.float32)
    for k, v in net(x).items():
        torch.testing.assert_close(v, want[k], rtol=1e-5, atol=1e-6)


POOLS = """
network pools {
  input data: f32[2, 13, 13, 3]
  conv = Convolution(data) { filter: [3, 3, 3, 4], padding: SAME, activation: relu }
  over = Pooling(conv) { ksize: [1, 3, 3, 1], strides: [1, 2, 2, 1], padding: VALID }
  tiles = Pooling(over) { ksize: [1, 2, 2, 1], strides: [1, 2, 2, 1], padding: VALID }
}
"""


@pytest.mark.parametrize("form", ["copy", "pairwise"])
def test_inference_pooling_forms_are_the_reference(form, monkeypatch, tmp_path):
    """An inference max pooling copied from torch's result or taken as the maxima of the windows' strided views into
    the arena: overlapping 3x3/2 windows over a convolution's result and 2x2 tiles over a pooling's, ties (ReLU's
    zeros) and a NaN, which both propagate as the reference does (and the convolution's ReLU before them)."""
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load_text
    from netc.pipelines import Options, inference
    from netc.runtime.reference import run_reference
    monkeypatch.setenv("NETC_CPU_TUNE", form)
    module = load_text(POOLS, str(tmp_path / "pools.nd"))
    inference(module, Options(), DiagnosticEngine())
    net = C.CpuNet(module, None, None, seed=4)
    assert net.program.source.count(f"# {form} (runtime/cpu_tune.py)") == 2
    x = torch.randn(2, 13, 13, 3)
    x[1, 4, 4, :] = float("nan")
    with R.computing_in(torch.float32):
        want = run_reference(module, {"data": x}, net.params, dtype=torch.float32)
    got = net({"data": x})
    assert torch.isnan(want["tiles"]).any()
    torch.testing.assert_close(got["tiles"], want["tiles"], rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("act,cact,state", [("tanh", None, False), ("relu", "tanh", True), ("sigmoid", None, True)])
def test_the_lstm_lowerings_are_the_references(act, cact, state):
    """runtime/cpu_recurrent.py's LSTM forward and recurrence gradient against ops/lstm.py's references, in float64:
    block-input and cell activations, with and without the carried state h0, c0 (peepholes from both)."""
    from netc.ops import lookup
    from netc.ops.lstm import ROLES
    from netc.runtime import cpu_recurrent as CR
    g = torch.Generator().manual_seed(11)
    t, b, x_dim, hid = 4, 3, 5, 6
    a = {"size": hid, "activation": act, "cell_activation": cact}
    shape = {"W": (hid, x_dim), "R": (hid, hid), "p": (1, hid), "b": (hid,)}
    p = {r: torch.randn(shape[r[0]], generator=g, dtype=torch.float64) * 0.5 for r in ROLES}
    ins = [torch.randn(t, b, x_dim, generator=g, dtype=torch.float64)]
    if state:
        ins += [torch.randn(b, hid, generator=g, dtype=torch.float64) for _ in range(2)]
    want = lookup("netc.lstm").reference(a, ins, p)
    torch.testing.assert_close(CR.lstm(a, ins, p), want, rtol=1e-12, atol=1e-12)
    dy = torch.randn(want.shape, generator=g, dtype=torch.float64)
    want = lookup("netc.lstm_grad_gates").reference(a, ins + [dy], p)
    torch.testing.assert_close(CR.lstm_grad_gates(a, ins + [dy], p), want, rtol=1e-10, atol=1e-12)


def test_an_unknown_tuning_setting_is_a_clear_error(monkeypatch, capsys):
    monkeypatch.setenv("NETC_CPU_TUNE", "fastest")
    assert main(["run", "examples/lenet.nd", "--batch", "2", "--target", "cpu"]) == 1
    err = capsys.readouterr().err
    assert "NETC_CPU_TUNE='fastest': expected 0 (no tuning), 1 (tuning, the default) or a form" in err
    assert "Traceback" not in err


def test_a_pooling_gradient_writes_over_its_input():
    """The CPU step's max-pooling gradient routes by the forward's indices and reads its input's shape only, so its plan
    (plan_memory's overwrite) lets the gradient take its input's bytes where the input dies there: LeNet's conv1.grad
    over conv1 (2.9 MB of its batch arena at batch 64); the steps still equal the reference's, and the verifier
    accepts the plan only with the overwrite recorded."""
    from netc.memory.plan import plan_memory
    from netc.memory.verify import verify_plan
    module, net = _program("examples/lenet.nd", {"name": "sgd"})
    cpu = _steps_agree(module, net, steps=2)
    assert "netc.maxpool_grad(conv1, pool1.grad)  [in place]" in cpu.program.source
    # its schedule runs conv2's filter gradient before its data gradient: one convolution_backward computes the
    # three (the data gradient with the data op's weight), none twice; conv1's: filter and bias
    assert cpu.program.source.count("torch.ops.aten.convolution_backward(") == 2
    plan = cpu.program.plan
    assert plan.options["overwrite"] == {"conv1.grad": [0], "conv2.grad": [0]}
    assert verify_plan(plan, module, net) == []
    # the plan's bytes: below the one without the overwrite, which has no such step
    plain = plan_memory(module, net, fusion="none")
    assert plan.arenas[1].size < plain.arenas[1].size
    assert "conv1.grad" not in [s.layer for s in plain.steps if s.action == "inplace"]
    plan.options.pop("overwrite")
    assert any("writes over 'conv1'" in p for p in verify_plan(plan, module, net))


def test_inputs_are_read_where_the_caller_holds_them(tmp_path):
    """The CPU step's plan (plan_memory external_inputs) keeps an input alone in its buffer out of the arenas: the step
    reads the fed tensor itself where it has the planned layout and dtype (a copy otherwise), never writes it, and its
    arena is smaller by the input's bytes; an input that a view joins stays in the arena (copied in); the verifier
    accepts an external buffer only for an input alone."""
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load, load_text
    from netc.memory.plan import plan_memory
    from netc.memory.verify import verify_plan
    from netc.pipelines import Options, inference
    from netc.runtime.reference import run_reference
    module = load("examples/lenet.nd", DiagnosticEngine())
    inference(module, Options(), DiagnosticEngine())
    net = C.CpuNet(module, None, None, seed=2)
    plan = net.program.plan
    ext = [plan.tensors[b.root].name for b in plan.buffers if b.external]
    assert sorted(ext) == ["data", "label"] and verify_plan(plan, module) == []
    assert "v_data = take(feed, 'data', (64, 28, 28, 1)" in net.program.source
    x = {"data": torch.rand(64, 28, 28, 1), "label": torch.randint(0, 10, (64,), dtype=torch.int32)}
    before = {k: v.clone() for k, v in x.items()}
    with R.computing_in(torch.float32):
        want = run_reference(module, x, net.params, dtype=torch.float32)
    for feed in (x, {"data": x["data"].double(), "label": x["label"].long()},     # another dtype: copied
                 {"data": x["data"].permute(0, 3, 1, 2).contiguous().permute(0, 2, 3, 1), "label": x["label"]}):
        for k, v in net(feed).items():
            torch.testing.assert_close(v, want[k], rtol=1e-5, atol=1e-6)
    assert all(torch.equal(x[k], before[k]) for k in x)
    # a training step reads them too and writes none of them
    mod, tnet = _program("examples/lenet.nd", {"name": "sgd"})
    cpu = _steps_agree(mod, tnet, steps=1)
    assert "take(feed, 'data'" in cpu.program.source
    # the image is read by conv1's filter gradient at the step's end: live at the arena's peak, now outside it
    copied = plan_memory(mod, tnet, fusion="none", overwrite=cpu.program.plan.options["overwrite"])
    assert copied.arenas[1].size - cpu.program.plan.arenas[1].size >= 28 * 28 * 4
    feed = cpu.feed(None, 0.05)
    kept = {k: v.clone() for k, v in feed.items()}
    cpu.program.run(feed)
    assert all(torch.equal(feed[k], kept[k]) for k in feed)
    # a view of the input joins its buffer: copied into the arena
    module = load_text("network v {\n input x: f32[4, 3, 2]\n r = Reshape(x) { output_shape: [4, 6] }\n"
                       " fc = InnerProduct(r) { num_outputs: 2 }\n}\n", str(tmp_path / "v.nd"))
    inference(module, Options(), DiagnosticEngine())
    net = C.CpuNet(module, None, None, seed=1)
    assert not any(b.external for b in net.program.plan.buffers) and "v_x.copy_(feed['x'])" in net.program.source
    # the verifier: an external buffer that holds anything but one input
    plan.buffers[[b.root for b in plan.buffers].index(plan.tensor("conv1").id)].external = True
    assert any("is external but not an input alone in it" in p for p in verify_plan(plan))
