"""SequenceMask (netc/ops/seq_mask.py): the op by hand (the valid steps kept, the padding zero), its gradient
(the same mask) against torch.autograd, bad operands located, lengths out of range refused; a masked LSTM's
forward and two training steps on the interpreter target against the reference."""
from __future__ import annotations

import pytest
import torch

from netc.cli import main
from netc.diagnostics import NetcError
from netc.frontend import load_text
from netc import pipelines
from netc.pipelines import Options
from netc.ops import lookup
from cli_inprocess import netc_interp  # noqa: E402  (tests/: the test modules' directory)

MASK = lookup("netc.seq_mask")
NET = """network msk {
  input x: f32[4, 3, 2]
  input n: i32[3]
  input label: f32[4, 3, 5]
  h = Lstm(x) { size: 5 }
  y = SequenceMask(h, n)
  loss = EuclideanLoss(y, label)
}
"""


def test_the_valid_steps_kept_and_the_padding_zero():
    x = torch.arange(1.0, 4 * 3 * 2 + 1).reshape(4, 3, 2)
    y = MASK.reference({"name": "m"}, [x, torch.tensor([4, 1, 2], dtype=torch.int32)], {})
    want = x.clone()
    want[1:, 1] = 0
    want[2:, 2] = 0
    assert torch.equal(y, want)


def test_gradient_is_the_same_mask_against_autograd():
    x = torch.randn(3, 2, 4, dtype=torch.float64, requires_grad=True)
    n = torch.tensor([2, 3])
    dy = torch.randn(3, 2, 4, dtype=torch.float64)
    y = MASK.reference({"name": "m"}, [x, n], {})
    (gx,) = torch.autograd.grad(y, x, dy)
    assert torch.equal(MASK.reference({"name": "m"}, [dy, n], {}), gx)


@pytest.mark.parametrize("bad,words", [
    ("SequenceMask(h, label)", "lengths must be [B] = [3]"),
    ("SequenceMask(n, n)", "rank >= 2"),
    ("SequenceMask(h)", "operand"),
])
def test_bad_operands_are_located(bad, words, tmp_path, capsys):
    path = tmp_path / "m.nd"
    path.write_text(NET.replace("SequenceMask(h, n)", bad))
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert "m.nd:6:" in err and words in err and "^" in err, err


def test_float_lengths_and_lengths_out_of_range_are_refused():
    with pytest.raises(NetcError, match="integers"):
        pipelines.inference(load_text(NET.replace("input n: i32[3]", "input n: f32[3]"), "m.nd"), Options())
    with pytest.raises(NetcError, match="sample 1 has length 5"):
        MASK.reference({"name": "m"}, [torch.zeros(4, 3), torch.tensor([1, 5, 2])], {})


def test_interpreter_target_runs_and_trains_against_the_reference(tmp_path):
    """The kernel (kernels/seq_mask.py), forward and as its own gradient, after an LSTM: a forward and two
    training steps within f32 tolerance of the float64 reference."""
    pytest.importorskip("triton")
    path = tmp_path / "m.nd"
    path.write_text(NET)
    r = netc_interp("run", path, "--target", "interp", "--train", "--compare", "--steps", "2")
    assert r.returncode == 0, r.stderr + r.stdout
    assert "compared 2 training steps of network 'msk' (sgd) on the interpreter target: ok" in r.stdout + r.stderr
