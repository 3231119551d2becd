"""Bugs the random-network harness (bench/randnet.py) found, each with its minimized network inline."""
from __future__ import annotations

import torch

from netc.frontend import load_text
from netc.passes.manager import DEFAULT_PIPELINE, PassContext, PassManager
from netc.runtime.train import check_grads

# randnet grad check, seed 4: a differentiated output (a random cotangent) that a later loss also
# reads got only its own seed gradient -- the backward pass dropped what flowed back from the loss.
# (grad:mismatch, gradient of 'l2.weight' / 'l2.scale' vs torch.autograd: relative error 3e-2 .. 5e-1)
OUTPUT_READ_BY_A_LOSS = """network rn {
  input x1: f32[2, 4, 7, 7]
  l2 = %s
  input label4: i32[2]
  l5 = SoftmaxLoss(l2, label4)
  output l2, l5
}
"""


def test_seeded_output_read_by_a_loss_sums_both_gradients():
    for layer in ("BatchNorm(x1)", "InnerProduct(x1) { num_outputs: 5 }", "Convolution(x1) { filter: [1, 1, 7, 3] }"):
        m = load_text(OUTPUT_READ_BY_A_LOSS % layer, "rn.nd")
        ctx = PassContext(phase="train", options={"backward": {"outputs": ["l2", "l5"]}})
        PassManager(DEFAULT_PIPELINE + ["backward"]).run(m, ctx)
        net = m.networks()[0]
        assert any(op.attrs.get("name") == "l2.grad_acc" or op.attrs.get("name") == "l2.grad"
                   for op in net.regions[0].ops)
        rows = check_grads(m, seed=4)
        assert rows and max(r["rel_error"] for r in rows) <= 1e-8, (layer, rows)
    assert torch.get_default_dtype() == torch.float32
