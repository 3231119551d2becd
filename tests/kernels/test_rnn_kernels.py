"""The Recurrent and Clockwork kernels (netc/kernels/rnn.py) against the ops' float64 references
(netc/ops/rnn.py): the forward (input GEMM + the recurrence with its fused activation and clock), the
steps gradient (the forward recomputed into the result's blocks + backpropagation through time), dx
and dh0, and the parameter gradients (netc's gemm on the steps' transposed views for W and R, the
column sums for bias), on odd shapes: T = 1, B = 1, H and X not multiples of the tiles (several row,
column and K tiles), with and without h0, every activation, Clockwork periods 1, 2, 3, 5 and 2.5 (a
unit of period 1 ticks at every step, one of 2.5 never after t = 0), bf16, a result written into a
column slice of a wider buffer. Results are NaN-poisoned first, so an element a kernel leaves
unwritten fails. Tiny shapes: the interpreter is slow."""
import pytest

pytest.importorskip("triton", reason="Triton is not importable; kernel tests need it")

import torch  # noqa: E402

from netc.kernels.rnn import (rnn_backward_steps, rnn_forward, rnn_grad_param, rnn_grad_x,  # noqa: E402
                              rnn_workspace)
from netc.ops import lookup  # noqa: E402
from netc.ops.rnn import BLOCKS, ROLES  # noqa: E402

DATA, PARAM = lookup("netc.rnn_grad_data"), lookup("netc.rnn_grad_param")
NAN = float("nan")
PERIODS = (1.0, 2.0, 3.0, 5.0, 2.5)
# (kind, T, B, X, H, with h0, activation, tiles (block_m, block_n, block_k) or None: the launcher's)
CASES = [
    ("recurrent", 1, 1, 1, 1, False, "tanh", None),
    ("clockwork", 1, 2, 3, 17, True, "sigmoid", (16, 16, 16)),
    ("recurrent", 3, 1, 20, 5, True, "relu", (16, 16, 16)),
    ("clockwork", 6, 17, 5, 33, False, "none", (16, 16, 16)),
    ("clockwork", 7, 3, 2, 4, True, "tanh", None),
    ("recurrent", 4, 17, 7, 18, False, "sigmoid", (16, 32, 16)),
    ("clockwork", 5, 3, 7, 18, True, "relu", (16, 32, 16)),
]
IDS = [f"{c[0]}-T{c[1]}-B{c[2]}-X{c[3]}-H{c[4]}-{'h0' if c[5] else 'noh0'}-{c[6]}" for c in CASES]


def _problem(kind, t, b, x, h, state, seed=0, features=None):
    g = torch.Generator().manual_seed(seed)
    shapes = lookup(f"netc.{kind}").param_shapes({"size": h, "activation": "tanh"}, [(t, b, x)], None)
    p = {r: 0.6 * torch.randn(s, generator=g, dtype=torch.float64) for r, s in shapes.items()}
    if "timing" in p:
        p["timing"] = torch.tensor([PERIODS[j % len(PERIODS)] for j in range(h)], dtype=torch.float64)
    xs = torch.randn((t, b) + (features or (x,)), generator=g, dtype=torch.float64)
    h0 = torch.randn(b, h, generator=g, dtype=torch.float64) if state else None
    dy = torch.randn(t, b, h, generator=g, dtype=torch.float64)
    return p, xs, h0, dy


def _f(v, dtype=torch.float32):
    return None if v is None else v.to(dtype)


def _tiles(tiles):
    return dict(zip(("block_m", "block_n", "block_k"), tiles)) if tiles else {}


def _close(got, ref, what, tol=2e-5):
    assert not torch.isnan(got).any(), f"{what}: NaN (an element left unwritten)"
    err = (got.double() - ref).abs().max().item() if got.numel() else 0.0
    scale = max(1.0, ref.abs().max().item() if ref.numel() else 0.0)
    assert err <= tol * scale, f"{what}: max error {err:.3g} (scale {scale:.3g})"


@pytest.mark.parametrize("kind,t,b,x,h,state,act,tiles", CASES, ids=IDS)
def test_forward(kind, t, b, x, h, state, act, tiles):
    feats = (2, x // 2) if x % 2 == 0 and x > 2 else (x,)
    p, xs, h0, _ = _problem(kind, t, b, x, h, state, features=feats)
    ref = lookup(f"netc.{kind}").reference({"size": h, "activation": act}, [xs] + ([h0] if state else []), p)
    out = torch.full((t, b, h), NAN)
    y = rnn_forward(_f(xs), _f(h0), {r: _f(v) for r, v in p.items()}, act, out=out, **_tiles(tiles))
    assert y is out
    _close(y, ref, "y")


@pytest.mark.parametrize("kind,t,b,x,h,state,act,tiles", CASES, ids=IDS)
def test_steps_and_the_gradients_they_feed(kind, t, b, x, h, state, act, tiles):
    p, xs, h0, dy = _problem(kind, t, b, x, h, state, seed=1)
    a = {"size": h, "activation": act}
    ref = lookup(f"netc.{kind}_grad_steps").reference(a, [xs] + ([h0] if state else []) + [dy], p)
    pf = {r: _f(v) for r, v in p.items()}
    out = torch.full((t, b, 3, h), NAN)
    s = rnn_backward_steps(_f(xs), _f(h0), _f(dy), pf, act, out=out, **_tiles(tiles))
    assert s is out
    for name, k in BLOCKS.items():
        _close(s[:, :, k], ref[:, :, k], name)
    # the data and parameter gradients from the kernel's blocks, against the ops' references on their own
    dx = rnn_grad_x(s, pf["W"], xs.shape, out=torch.full(xs.shape, NAN), **_tiles(tiles))
    _close(dx, DATA.reference({"wrt": "x", "input_shape": list(xs.shape)}, [ref], p), "dx")
    for role in ROLES:
        want = PARAM.reference({"role": role}, [ref] + ([xs] if role == "W" else []), {})
        res = torch.full(tuple(want.shape), NAN)
        got = rnn_grad_param(s, role, _f(xs) if role == "W" else None, out=res,
                             **({"block_m": 2} if role == "bias" and tiles else _tiles(tiles)))
        _close(got, want, role)


def test_a_clockwork_unit_keeps_its_output_between_ticks():
    """Over t = 0 .. 4, period 1 ticks at every step, 2 at t = 0, 2, 4, 3 at t = 0, 3, and 5 and 2.5 at
    t = 0 only: the kernel's y changes exactly where a unit's clock ticks, and holds still elsewhere."""
    p, xs, h0, _ = _problem("clockwork", 5, 2, 3, 5, True, seed=5)
    y = rnn_forward(_f(xs), _f(h0), {r: _f(v) for r, v in p.items()})
    moved = (y[1:] != y[:-1]).any(1)             # [T - 1, H]: did unit j change from t - 1 to t
    want = torch.tensor([[float(t) % per == 0 for per in PERIODS] for t in range(1, 5)])
    assert torch.equal(moved, want)


def test_into_a_column_slice_and_a_strided_state():
    """y written into columns [2, 2 + H) of a wider buffer; h0 rows of a wider buffer."""
    t, b, x, h = 3, 2, 4, 5
    p, xs, h0, _ = _problem("clockwork", t, b, x, h, True, seed=2)
    ref = lookup("netc.clockwork").reference({"size": h, "activation": "tanh"}, [xs, h0], p)
    wide = torch.full((t, b, h + 4), NAN)
    h0w = torch.zeros(b, h + 3)
    h0w[:, 1:1 + h] = h0.float()
    rnn_forward(_f(xs), h0w[:, 1:1 + h], {r: _f(v) for r, v in p.items()}, out=wide[:, :, 2:2 + h])
    _close(wide[:, :, 2:2 + h], ref, "y")
    assert torch.isnan(wide[:, :, :2]).all() and torch.isnan(wide[:, :, 2 + h:]).all()


def test_bf16():
    t, b, x, h = 3, 2, 5, 6
    p, xs, h0, dy = _problem("clockwork", t, b, x, h, True, seed=3)
    bf = torch.bfloat16
    a = {"size": h, "activation": "tanh"}
    pb = {r: _f(v, bf) for r, v in p.items()}
    y = rnn_forward(_f(xs, bf), _f(h0, bf), pb)
    assert y.dtype == bf
    _close(y, lookup("netc.clockwork").reference(a, [xs, h0], p), "y (bf16)", tol=3e-2)
    s = rnn_backward_steps(_f(xs, bf), _f(h0, bf), _f(dy, bf), pb)
    _close(s, lookup("netc.clockwork_grad_steps").reference(a, [xs, h0, dy], p), "steps (bf16)", tol=6e-2)


def test_workspace_sizes_and_bad_arguments():
    assert rnn_workspace(4, 3, 5) == 4 * 3 * 5
    p, xs, h0, dy = _problem("recurrent", 2, 3, 4, 5, True, seed=4)
    pf = {r: _f(v) for r, v in p.items()}
    with pytest.raises(ValueError, match="workspace"):
        rnn_forward(_f(xs), None, pf, workspace=torch.empty(10))
    with pytest.raises(ValueError, match="h0 must be"):
        rnn_forward(_f(xs), _f(h0[:2]), pf)
    with pytest.raises(ValueError, match="time-major"):
        rnn_forward(_f(xs[0]), None, pf)
    with pytest.raises(ValueError, match="W must be"):
        rnn_forward(_f(xs[:, :, :3]), None, pf)
    with pytest.raises(ValueError, match="needs the parameter R"):
        rnn_forward(_f(xs), None, {"W": pf["W"], "bias": pf["bias"]})
    with pytest.raises(ValueError, match="timing must be"):
        rnn_forward(_f(xs), None, {**pf, "timing": torch.ones(4)})
    with pytest.raises(ValueError, match="dy must be"):
        rnn_backward_steps(_f(xs), None, _f(dy[:1]), pf)
    s = rnn_backward_steps(_f(xs), None, _f(dy), pf)
    with pytest.raises(ValueError, match="steps gradient"):
        rnn_grad_x(s[:, :, :2], pf["W"], xs.shape)
    with pytest.raises(ValueError, match="is not the x"):
        rnn_grad_x(s, pf["W"], (3, 3, 4))
    with pytest.raises(ValueError, match="reads x too"):
        rnn_grad_param(s, "W")
    with pytest.raises(ValueError, match="not 'timing'"):
        rnn_grad_param(s, "timing")
