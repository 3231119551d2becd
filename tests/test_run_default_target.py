"""`netc run FILE` without --target or --reference (issue 28): the CPU target, for inference and --train; the
reference executor where a flag only it takes is given (--dtype f64, --check-grads, --state-in/--state-out) and with
--workers 1; the same flags with an explicit --target cpu stay clear errors."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cli_inprocess import netc_inprocess as netc

ROOT = Path(__file__).resolve().parent.parent
DIGITS = ROOT / "examples" / "digits.nd"
SMALL = ("--batch", "2")

SEQ = """network seq {
  input x: f32[3, 2, 4]
  input h0: f32[2, 5]
  input c0: f32[2, 5]
  y = Lstm(x, h0, c0) { size: 5 }
}
"""


def ok(*args):
    r = netc(*args)
    assert r.returncode == 0, r.stderr
    return r


def test_inference_runs_on_the_cpu_target():
    """The same printed outputs as --target cpu's (f32), not the reference's (f64)."""
    default = ok("run", DIGITS, *SMALL)
    assert default.stdout == ok("run", DIGITS, *SMALL, "--target", "cpu").stdout
    assert "float32" in default.stdout and "float64" not in default.stdout
    assert default.stdout != ok("run", DIGITS, *SMALL, "--reference").stdout


def test_training_runs_on_the_cpu_target(tmp_path):
    """Loss lines, summary and -o's parameters equal --target cpu's; the summary says where the steps ran."""
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    train = ("run", DIGITS, "--train", "--steps", "3", "--optimizer", "adam", "--lr", "0.01")
    default = ok(*train, "-o", a)
    assert default.stdout == ok(*train, "--target", "cpu", "-o", b).stdout
    assert "trained 3 steps of network 'digits' (adam) on the CPU target: loss " in default.stdout
    with np.load(a) as x, np.load(b) as y:
        assert sorted(x.files) == sorted(y.files) and "fc1.weight.adam_m" in x.files
        for k in x.files:
            np.testing.assert_array_equal(x[k], y[k])
    ref = ok(*train, "--reference")
    assert "(adam) on the reference executor: loss " in ref.stdout


def test_compare_without_a_target_checks_the_cpu_target():
    r = ok("run", DIGITS, *SMALL, "--compare")
    assert "max relative error" in r.stderr and "against the f64 reference" in r.stderr


@pytest.mark.parametrize("flags", [("--dtype", "f64"), ("--workers", "1")])
def test_a_flag_of_the_reference_runs_the_reference(flags):
    """--dtype f64 (and --workers 1, a K-worker run's baseline): the reference executor's f64 outputs, as with
    --reference, without an error."""
    r = ok("run", DIGITS, *SMALL, *flags)
    assert "float64" in r.stdout and r.stdout == ok("run", DIGITS, *SMALL, *flags, "--reference").stdout


def test_training_in_f64_and_check_grads_run_on_the_reference():
    r = ok("run", DIGITS, *SMALL, "--train", "--steps", "2", "--dtype", "f64")
    assert "(sgd) on the reference executor: loss " in r.stdout
    r = ok("run", DIGITS, *SMALL, "--check-grads")
    assert "worst relative error" in r.stdout and "(ok: tolerance 1e-8)" in r.stdout


def test_carried_state_runs_on_the_reference(tmp_path):
    """--state-out, then --state-in: the reference executor carries an Lstm's state, no --reference needed."""
    (tmp_path / "s.nd").write_text(SEQ)
    ok("run", tmp_path / "s.nd", "--state-out", tmp_path / "st.npz")
    with np.load(tmp_path / "st.npz") as z:
        assert sorted(z.files) == ["c0", "h0"]
    r = ok("run", tmp_path / "s.nd", "--state-in", tmp_path / "st.npz", "--network", "seq")
    assert "float64" in r.stdout


@pytest.mark.parametrize("flags,message", [
    (("--dtype", "f64"), "--target cpu computes in f32: drop --dtype f64 (without --target, --dtype f64 runs the "
                         "reference executor"),
    (("--tf32",), "--target cpu computes in f32: drop --tf32"),
    (("--state-out", "s.npz"), "--state-out carries state between runs of the reference executor (--reference), not "
                               "of --target cpu"),
    (("--interp-blocks", "large"), "--interp-blocks needs --target interp"),
    (("--reference",), "--reference and --target cpu contradict each other"),
    (("--train", "--dtype", "f64"), "--target cpu trains in f32: drop --dtype f64"),
    (("--check-grads",), "--check-grads checks the reference executor's gradient ops against torch.autograd: drop "
                         "--target cpu"),
    (("--train", "--interp-blocks", "large"), "--interp-blocks needs --target interp"),
])
def test_an_explicit_cpu_target_refuses_the_references_flags(flags, message):
    r = netc("run", DIGITS, *SMALL, "--target", "cpu", *flags)
    assert r.returncode == 1 and message in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_without_a_target_flags_of_other_targets_are_still_errors():
    """No target is no licence: --interp-blocks (inference and training) and --tf32 still name their target."""
    for flags, message in ((("--interp-blocks", "large"), "--interp-blocks needs --target interp"),
                           (("--train", "--interp-blocks", "large"), "--interp-blocks needs --target interp"),
                           (("--tf32",), "--tf32 needs --target interp"),
                           (("--dtype", "bf16"), "--dtype bf16 is a compiled dtype: use it with --target interp")):
        r = netc("run", DIGITS, *SMALL, *flags)
        assert r.returncode == 1 and message in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_an_unknown_layer_is_named_on_the_cpu_target_too(tmp_path):
    """The CPU target runs an opaque layer as the reference does, a pass-through, and says so, located."""
    f = tmp_path / "op.nd"
    f.write_text('network n {\n  input x: f32[2, 4]\n  a = Opaque(x) { type: "Mystery" }\n  b = ReLU(a)\n}\n')
    r = ok("run", f)
    assert f"{f}:3:3: warning: the CPU target passes 1 layer of unknown type 'Mystery' through unchanged" in r.stderr


HYBRID = ROOT.parent / "shared" / "corpus" / "singa" / "0.2.0_cifar10_hybrid.conf"


@pytest.mark.skipif(not HYBRID.exists(), reason="the shared corpus is not beside the repository")
def test_a_program_with_communication_ops_runs_on_the_reference():
    """A SINGA job whose partitioned layers bring bridges into one process: the CPU target runs those only on
    several workers, so without a target the reference executor runs it, as --reference does, and says so."""
    r = ok("run", HYBRID, "--batch", "2")
    assert "netc: running on the reference executor: the program has communication ops (netc.send" in r.stderr
    assert "float64" in r.stdout and r.stdout == ok("run", HYBRID, "--batch", "2", "--reference").stdout
    r = ok("run", HYBRID, "--batch", "2", "--train", "--steps", "1")
    assert "on the reference executor: loss " in r.stdout


MNIST = ROOT.parent / "shared" / "corpus" / "singa" / "0.3.0_mnist_job.conf"


@pytest.mark.skipif(not MNIST.exists(), reason="the shared corpus is not beside the repository")
def test_a_singa_job_runs_and_trains_on_the_cpu_target():
    """SINGA's layer names ('0#data:0') name the generated step's views: no Python identifier starts with a digit."""
    r = ok("run", MNIST, "--batch", "4", "--compare")
    assert "max relative error" in r.stderr
    r = ok("run", MNIST, "--batch", "4", "--train", "--steps", "2", "--compare")
    assert "on the CPU target: ok" in r.stdout


@pytest.mark.skipif(not HYBRID.exists(), reason="the shared corpus is not beside the repository")
def test_a_batch_split_in_one_process_is_a_clear_error_on_the_interpreter_target():
    """The same job on --target interp: its bridges' concatenation along the batch cannot be placed by a compiled
    network that scales its batch -- a located error naming the way out, not an internal error."""
    from cli_inprocess import netc_interp
    r = netc_interp("run", HYBRID, "--batch", "2", "--target", "interp", "--compare")
    assert r.returncode == 1 and "internal error" not in r.stderr, r.stderr
    assert "0.2.0_cifar10_hybrid.conf:231:5: error: concatenation 'concate(split(0#pool3)):1' joins parts of the " \
           "batch (axis 0)" in r.stderr
