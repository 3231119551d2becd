"""The LSTM kernels (netc/kernels/lstm.py) against the ops' float64 references (netc/ops/lstm.py):
the forward (input GEMM + the recurrence with its fused epilogue), lstm_grad_gates (the forward
recomputed into the result's blocks + backpropagation through time), dx, and the parameter
gradients (the column sums for b* and p*, netc's gemm on the gates' transposed views for W* and R*,
as kernels/recurrent_lowering.py lowers them), on odd shapes: T = 1, B = 1, H and X not multiples of the
tiles (several row, column and K tiles), with and without h0, c0, every activation, bf16, a result
written into a column slice of a wider buffer. Results are NaN-poisoned first, so an element a
kernel leaves unwritten fails. Tiny shapes: the interpreter is slow."""
import pytest

pytest.importorskip("triton", reason="Triton is not importable; kernel tests need it")

import torch  # noqa: E402

from netc.kernels.gemm import gemm  # noqa: E402
from netc.kernels.lstm import lstm, lstm_column_sums, lstm_grad_gates, lstm_grad_x, lstm_workspace  # noqa: E402
from netc.ops import lookup  # noqa: E402
from netc.ops.lstm import BLOCKS, ROLES  # noqa: E402

LSTM, GATES_OP = lookup("netc.lstm"), lookup("netc.lstm_grad_gates")
DATA, PARAM = lookup("netc.lstm_grad_data"), lookup("netc.lstm_grad_param")
NAN = float("nan")
# (T, B, X, H, with h0/c0, activation, tiles (block_m, block_n, block_k) or None: the launcher's)
CASES = [
    (1, 1, 1, 1, False, "tanh", None),
    (1, 2, 3, 17, True, "sigmoid", (16, 16, 16)),
    (3, 1, 20, 5, True, "relu", (16, 16, 16)),
    (4, 17, 5, 33, False, "none", (16, 16, 16)),
    (5, 3, 2, 4, True, "tanh", None),
    (2, 3, 7, 18, True, "relu", (16, 32, 16)),
]
IDS = [f"T{c[0]}-B{c[1]}-X{c[2]}-H{c[3]}-{'state' if c[4] else 'nostate'}-{c[5]}" for c in CASES]


def _problem(t, b, x, h, state, seed=0, features=None):
    g = torch.Generator().manual_seed(seed)
    shapes = LSTM.param_shapes({"size": h, "activation": "tanh"}, [(t, b, x)], None)
    p = {r: 0.6 * torch.randn(s, generator=g, dtype=torch.float64) for r, s in shapes.items()}
    xs = torch.randn((t, b) + (features or (x,)), generator=g, dtype=torch.float64)
    st = [torch.randn(b, h, generator=g, dtype=torch.float64) for _ in range(2)] if state else []
    dy = torch.randn(t, b, h, generator=g, dtype=torch.float64)
    return p, xs, st, dy


def _f(v, dtype=torch.float32):
    return None if v is None else v.to(dtype)


def _tiles(tiles):
    return dict(zip(("block_m", "block_n", "block_k"), tiles)) if tiles else {}


def _close(got, ref, what, tol=2e-5):
    err = (got.double() - ref).abs().max().item() if got.numel() else 0.0
    scale = max(1.0, ref.abs().max().item() if ref.numel() else 0.0)
    assert not torch.isnan(got).any(), f"{what}: NaN (an element left unwritten)"
    assert err <= tol * scale, f"{what}: max error {err:.3g} (scale {scale:.3g})"


@pytest.mark.parametrize("t,b,x,h,state,act,tiles", CASES, ids=IDS)
def test_forward(t, b, x, h, state, act, tiles):
    p, xs, st, _ = _problem(t, b, x, h, state, features=(x,) if x < 4 else (2, x // 2) if x % 2 == 0 else (x,))
    ref = LSTM.reference({"size": h, "activation": act}, [xs, *st], p)
    out = torch.full((t, b, h), NAN)
    h0, c0 = (st + [None, None])[:2]
    y = lstm(_f(xs), _f(h0), _f(c0), {r: _f(v) for r, v in p.items()}, act, out=out, **_tiles(tiles))
    assert y is out
    _close(y, ref, "y")


@pytest.mark.parametrize("t,b,x,h,state,act,tiles", CASES, ids=IDS)
def test_grad_gates_and_the_gradients_it_feeds(t, b, x, h, state, act, tiles):
    p, xs, st, dy = _problem(t, b, x, h, state, seed=1)
    a = {"size": h, "activation": act}
    ref = GATES_OP.reference(a, [xs, *st, dy], p)
    h0, c0 = (st + [None, None])[:2]
    pf = {r: _f(v) for r, v in p.items()}
    out = torch.full((t, b, 9, h), NAN)
    g = lstm_grad_gates(_f(xs), _f(h0), _f(c0), _f(dy), pf, act, out=out, **_tiles(tiles))
    for name, k in BLOCKS.items():
        _close(g[:, :, k], ref[:, :, k], name)
    # the data and parameter gradients from the kernel's blocks, against the ops' references on its own
    dx = lstm_grad_x(g, pf, xs.shape, out=torch.full(xs.shape, NAN), **_tiles(tiles))
    _close(dx, DATA.reference({"wrt": "x", "input_shape": list(xs.shape)}, [ref], p), "dx")
    for role in ROLES:
        want = PARAM.reference({"role": role}, [ref] + ([xs] if role[0] == "W" else []), {})
        da = g[:, :, BLOCKS[role[1]]]
        res = torch.full(tuple(want.shape), NAN)
        if role[0] in "WR":     # as kernels/recurrent_lowering.py: gemm on the transposed gates view
            other = _f(xs) if role[0] == "W" else g[:, :, BLOCKS["h_prev"]]
            gemm(da.reshape(t * b, h).t(), other.reshape(t * b, -1), out=res, block_k=16)
        else:
            s = None if role[0] == "b" else g[:, :, BLOCKS["c" if role == "po" else "c_prev"]]
            lstm_column_sums(da, s, out=res, block_m=2 if tiles else None)
        _close(res, want, role)


# (T, B, X, H, with h0/c0, block input activation, cell output activation, tiles)
CELL_CASES = [
    (3, 2, 4, 5, True, "relu", "tanh", None),                # PaddlePaddle's book: lstmemory(act=Relu), state_act Tanh
    (4, 17, 5, 33, False, "tanh", "sigmoid", (16, 16, 16)),
    (2, 3, 7, 18, True, "none", "sigmoid", (16, 32, 16)),
]


@pytest.mark.parametrize("t,b,x,h,state,act,cact,tiles", CELL_CASES, ids=[f"{c[5]}-{c[6]}" for c in CELL_CASES])
def test_a_cell_activation_of_its_own(t, b, x, h, state, act, cact, tiles):
    """cell_activation: the cell output's activation, applied to c (and differentiated there) where the
    block input's is applied to z: the forward, the gates gradient and dx against the references."""
    p, xs, st, dy = _problem(t, b, x, h, state, seed=5)
    a = {"size": h, "activation": act, "cell_activation": cact}
    h0, c0 = (st + [None, None])[:2]
    pf = {r: _f(v) for r, v in p.items()}
    y = lstm(_f(xs), _f(h0), _f(c0), pf, act, cell_activation=cact, out=torch.full((t, b, h), NAN), **_tiles(tiles))
    ref = LSTM.reference(a, [xs, *st], p)
    _close(y, ref, "y")
    # the same activation for both would be another function: the test can tell them apart
    assert (LSTM.reference({"size": h, "activation": act}, [xs, *st], p) - ref).abs().max() > 1e-3
    g = lstm_grad_gates(_f(xs), _f(h0), _f(c0), _f(dy), pf, act, cell_activation=cact,
                        out=torch.full((t, b, 9, h), NAN), **_tiles(tiles))
    gref = GATES_OP.reference(a, [xs, *st, dy], p)
    for name, k in BLOCKS.items():
        _close(g[:, :, k], gref[:, :, k], name)
    dx = lstm_grad_x(g, pf, xs.shape, out=torch.full(xs.shape, NAN), **_tiles(tiles))
    _close(dx, DATA.reference({"wrt": "x", "input_shape": list(xs.shape)}, [gref], p), "dx")


def test_into_a_column_slice_and_a_strided_state():
    """y written into columns [2, 2 + H) of a wider buffer; h0 and c0 rows of wider buffers."""
    t, b, x, h = 3, 2, 4, 5
    p, xs, st, _ = _problem(t, b, x, h, True, seed=2)
    ref = LSTM.reference({"size": h, "activation": "tanh"}, [xs, *st], p)
    wide = torch.full((t, b, h + 4), NAN)
    h0w, c0w = torch.zeros(b, h + 3), torch.zeros(b, h + 1)
    h0w[:, 1:1 + h], c0w[:, :h] = st[0].float(), st[1].float()
    lstm(_f(xs), h0w[:, 1:1 + h], c0w[:, :h], {r: _f(v) for r, v in p.items()}, out=wide[:, :, 2:2 + h])
    _close(wide[:, :, 2:2 + h], ref, "y")
    assert torch.isnan(wide[:, :, :2]).all() and torch.isnan(wide[:, :, 2 + h:]).all()


def test_bf16():
    t, b, x, h = 3, 2, 5, 6
    p, xs, st, dy = _problem(t, b, x, h, True, seed=3, features=(x,))
    bf = torch.bfloat16
    ref = LSTM.reference({"size": h, "activation": "tanh"}, [xs, *st], p)
    y = lstm(_f(xs, bf), _f(st[0], bf), _f(st[1], bf), {r: _f(v, bf) for r, v in p.items()})
    assert y.dtype == bf
    _close(y, ref, "y (bf16)", tol=3e-2)
    g = lstm_grad_gates(_f(xs, bf), _f(st[0], bf), _f(st[1], bf), _f(dy, bf), {r: _f(v, bf) for r, v in p.items()})
    gref = GATES_OP.reference({"size": h, "activation": "tanh"}, [xs, *st, dy], p)
    _close(g, gref, "gates (bf16)", tol=6e-2)


def test_workspace_sizes_and_bad_arguments():
    assert lstm_workspace(4, 3, 5) == 3 * 5 + 4 * 3 * 4 * 5
    assert lstm_workspace(4, 3, 5, forward=False) == 4 * 3 * 4 * 5
    p, xs, st, dy = _problem(2, 3, 4, 5, True, seed=4)
    pf = {r: _f(v) for r, v in p.items()}
    with pytest.raises(ValueError, match="workspace"):
        lstm(_f(xs), None, None, pf, workspace=torch.empty(10))
    with pytest.raises(ValueError, match="come together"):
        lstm(_f(xs), _f(st[0]), None, pf)
    with pytest.raises(ValueError, match="h0 must be"):
        lstm(_f(xs), _f(st[0][:2]), _f(st[1]), pf)
    with pytest.raises(ValueError, match="time-major"):
        lstm(_f(xs[0]), None, None, pf)
    with pytest.raises(ValueError, match="Wz must be"):
        lstm(_f(xs[:, :, :3]), None, None, pf)
    with pytest.raises(ValueError, match="dy must be"):
        lstm_grad_gates(_f(xs), None, None, _f(dy[:1]), pf)


class _Ctx:
    """A lowering-table context over real tensors (kernels/lowering.py LowerContext's surface)."""
    pin: dict = {}
    tf32 = False
    prologue: dict = {}

    def __init__(self, values: dict, params: dict, out, batch):
        self.values, self.params, self.out, self.batch = values, params, out, batch

    def value(self, v):
        return self.values[v]

    def param(self, op, role):
        return self.params[role]


@pytest.mark.parametrize("name,wrt,block", [("netc.lstm_grad_data", "h0", "dh_prev"),
                                            ("netc.lstm_grad_data", "c0", "dc_prev"),
                                            ("netc.gru_grad_data", "h0", "dh_prev")])
def test_the_initial_state_gradients_are_copies_of_step_0(name, wrt, block):
    """lstm_grad_data / gru_grad_data for h0, c0 (kernels/recurrent_lowering.py): the block step 0 sends
    back, copied by the elementwise kernel into the [B, H] result (no network here trains a state: it
    is an input, without a gradient)."""
    from types import SimpleNamespace
    from netc.kernels.lowering import LOWERINGS
    from netc.ops.recurrent import BLOCKS as GRU_BLOCKS
    blocks = BLOCKS if name.startswith("netc.lstm") else GRU_BLOCKS
    t, b, h = 3, 2, 5
    gates = torch.randn(t, b, len(blocks), h)
    op = SimpleNamespace(name=name, attrs={"wrt": wrt, "input_shape": [b, h]}, operands=["gates"], results=["out"])
    out = torch.full((b, h), NAN)
    spec = LOWERINGS[name].lower(_Ctx({"gates": gates}, {}, out, t), [op])
    spec.call.launch()
    assert torch.equal(out, gates[0, :, blocks[block]])
