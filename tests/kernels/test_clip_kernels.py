"""netc.clip (ReLU6) and its gradient on the kernels (kernels/clip.py) against the float64 references: the
forward exactly (max and negations are exact), into a channel slice; the gradient where the input lies
inside, outside and exactly on the bounds; a training step on the interpreter target (the lowering rows)."""
import subprocess
import sys

import pytest

pytest.importorskip("triton", reason="Triton is not importable; kernel tests need it")

import torch  # noqa: E402

from netc.kernels.clip import clip, clip_grad  # noqa: E402
from netc.ops import lookup  # noqa: E402
from netc.ops import reference as R  # noqa: E402

NAN = float("nan")


@pytest.mark.parametrize("lo,hi", [(0.0, 6.0), (-0.5, 0.25), (1.0, 1.0)])
def test_clip_and_its_gradient(lo, hi, device):
    g = torch.Generator().manual_seed(5)
    x = (torch.randn(3, 5, 4, 7, generator=g) * 4)
    x[0, 0, 0, :3] = torch.tensor([lo, hi, (lo + hi) / 2])      # on the bounds: the gradient passes (torch.clamp's)
    x = x.to(device)
    a = {"min": lo, "max": hi}
    buf = torch.full((3, 5, 4, 10), NAN, device=device)
    y = clip(x, lo, hi, out=buf, out_channel_offset=2, block=64)
    want = lookup("netc.clip").reference(a, [x], {})
    assert torch.equal(y.cpu().double(), want.cpu())
    assert torch.isnan(buf[..., :2]).all() and torch.isnan(buf[..., 9:]).all()
    dy = torch.randn(3, 5, 4, 7, generator=g).to(device)
    dx = clip_grad(x, dy, lo, hi, out=torch.full_like(dy, NAN), block=64)
    R.check(dx, lookup("netc.clip_grad").reference(a, [x, dy], {}), torch.float32)
    assert float(dx[0, 0, 0, 0]) == float(dy[0, 0, 0, 0]) and float(dx[0, 0, 0, 1]) == float(dy[0, 0, 0, 1])


NET = """
network c {
  input data: f32[3, 6]
  h = InnerProduct(data) { num_outputs: 8 }
  r = ReLU6(h)
  k = Clip(r) { min: 0.5, max: 2.0 }
  f = InnerProduct(k) { num_outputs: 4 }
}
"""


def test_a_training_step_on_the_interpreter_target(tmp_path):
    path = tmp_path / "clip.nd"
    path.write_text(NET)
    r = subprocess.run([sys.executable, "-m", "netc", "run", str(path), "--target", "interp", "--train", "--steps", "2",
                        "--loss", "softmax", "--compare"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "on the interpreter target: ok" in r.stdout
