"""The GRU kernels (netc/kernels/gru.py, with kernels/lstm.py's shared input GEMM, dx GEMM and column
sums) against the ops' float64 references (netc/ops/recurrent.py): the forward and gru_grad_gates
(the forward recomputed into the result's blocks + backpropagation through time), then dx and every
parameter gradient from the kernel's blocks, as kernels/recurrent_lowering.py lowers them; both
conventions (the reset after the recurrent product, SINGA's, and before it), with and without h0
and biases, T = 1, B = 1, H and X off the tiles (several row, column and K tiles), the single step
x [B, X]. Results are NaN-poisoned first; tiny shapes (the interpreter is slow)."""
import pytest

pytest.importorskip("triton", reason="Triton is not importable; kernel tests need it")

import torch  # noqa: E402

from netc.kernels.gemm import gemm  # noqa: E402
from netc.kernels.gru import gru, gru_grad_gates, gru_workspace  # noqa: E402
from netc.kernels.lstm import gates_grad_x, lstm_column_sums  # noqa: E402
from netc.ops import lookup  # noqa: E402
from netc.ops.recurrent import BLOCKS  # noqa: E402

GRU, GATES_OP = lookup("netc.gru"), lookup("netc.gru_grad_gates")
DATA, PARAM = lookup("netc.gru_grad_data"), lookup("netc.gru_grad_param")
NAN = float("nan")
# (T (0: one step x [B, X]), B, X, H, with h0, bias, linear_before_reset, tiles or None)
CASES = [
    (1, 1, 1, 1, False, True, True, None),
    (3, 2, 5, 17, True, True, True, (16, 16, 16)),
    (4, 17, 20, 6, True, False, False, (16, 16, 16)),
    (2, 3, 4, 33, False, True, False, (16, 16, 16)),
    (0, 3, 4, 5, True, True, True, None),
    (0, 2, 3, 4, False, False, False, None),
]
IDS = [f"T{c[0]}-B{c[1]}-X{c[2]}-H{c[3]}-{'h0' if c[4] else 'noh0'}-{'bias' if c[5] else 'nobias'}-"
       f"{'lbr' if c[6] else 'cho'}" for c in CASES]


def _problem(t, b, x, h, state, bias, seed):
    g = torch.Generator().manual_seed(seed)
    a = {"dim_hidden": h, "bias": bias, "linear_before_reset": True}
    p = {r: 0.6 * torch.randn(s, generator=g, dtype=torch.float64)
         for r, s in GRU.param_shapes(a, [(1, 1, x)], None).items()}
    xs = torch.randn((b, x) if t == 0 else (t, b, x), generator=g, dtype=torch.float64)
    h0 = torch.randn(b, h, generator=g, dtype=torch.float64) if state else None
    dy = torch.randn((b, h) if t == 0 else (t, b, h), generator=g, dtype=torch.float64)
    return p, xs, h0, dy


def _f(v):
    return None if v is None else v.float()


def _close(got, ref, what, tol=2e-5):
    assert not torch.isnan(got).any(), f"{what}: NaN (an element left unwritten)"
    err = (got.double() - ref).abs().max().item()
    scale = max(1.0, ref.abs().max().item())
    assert err <= tol * scale, f"{what}: max error {err:.3g} (scale {scale:.3g})"


@pytest.mark.parametrize("t,b,x,h,state,bias,lbr,tiles", CASES, ids=IDS)
def test_forward_and_gradient(t, b, x, h, state, bias, lbr, tiles):
    p, xs, h0, dy = _problem(t, b, x, h, state, bias, seed=t + 10 * b + 100 * h)
    a = {"dim_hidden": h, "bias": bias, "linear_before_reset": lbr}
    st = [h0] if state else []
    kw = dict(zip(("block_m", "block_n", "block_k"), tiles)) if tiles else {}
    pf = {r: _f(v) for r, v in p.items()}
    ref = GRU.reference(a, [xs, *st], p)
    y = gru(_f(xs), _f(h0), pf, bias, lbr, out=torch.full(tuple(ref.shape), NAN), **kw)
    _close(y, ref, "y")
    gref = GATES_OP.reference(a, [xs, *st, dy], p)
    g = gru_grad_gates(_f(xs), _f(h0), _f(dy), pf, bias, lbr, out=torch.full(tuple(gref.shape), NAN), **kw)
    for name, k in BLOCKS.items():
        _close(g[:, :, k], gref[:, :, k], name)
    roles = [f"{gt}_hx" for gt in "zrc"]
    dx = gates_grad_x(g, pf, roles, xs.shape, out=torch.full(tuple(xs.shape), NAN), **kw)
    _close(dx, DATA.reference({"wrt": "x", "input_shape": list(xs.shape)}, [gref], p), "dx")
    tt, bb = g.shape[:2]
    for role in p:
        gate, kind = role.split("_")
        want = PARAM.reference({"role": role}, [gref] + ([xs] if kind == "hx" else []), {})
        res = torch.full(tuple(want.shape), NAN)
        da = g[:, :, BLOCKS["uc" if role == "c_hh" else gate]]
        if kind == "b":
            lstm_column_sums(da, out=res)
        else:
            other = _f(xs) if kind == "hx" else g[:, :, BLOCKS["hc" if gate == "c" else "h_prev"]]
            gemm(da.reshape(tt * bb, h).t(), other.reshape(tt * bb, -1), out=res, block_k=16)
        _close(res, want, role)


def test_workspace_and_bad_arguments():
    assert gru_workspace(4, 3, 5) == 4 * 3 * 5 * 5
    assert gru_workspace(4, 3, 5, forward=False) == 4 * 3 * 3 * 5
    p, xs, h0, dy = _problem(2, 3, 4, 5, True, True, seed=1)
    pf = {r: _f(v) for r, v in p.items()}
    with pytest.raises(ValueError, match="workspace"):
        gru(_f(xs), None, pf, workspace=torch.empty(10))
    with pytest.raises(ValueError, match="h0 must be"):
        gru(_f(xs), _f(h0[:2]), pf)
    with pytest.raises(ValueError, match="z_hx must be"):
        gru(_f(xs[:, :, :3]), None, pf)
    with pytest.raises(ValueError, match="dy must be"):
        gru_grad_gates(_f(xs), None, _f(dy[:1]), pf)
