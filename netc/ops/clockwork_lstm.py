"""ClockworkLstm: an LSTM whose units update on their clock periods, with Brainstorm's semantics (its
`ClockworkLstm` layer, brainstorm/layers/clockwork_lstm_layer.py), and its gradient, backpropagation
through time.

Every step first computes netc's Lstm step (netc/ops/lstm.py, the same equations, parameters and
peepholes) from the carried state h[t-1], c[t-1], giving a candidate c'[t] and y'[t]; then, as the
Clockwork RNN does (netc/ops/rnn.py), only the units whose clock ticks take them:

    m[t] = 1 where t = 0 or fmod(t, timing) == 0, else 0          (per unit; all units update at t = 0)
    c[t] = m[t] * c'[t] + (1 - m[t]) * c[t-1]                      (Brainstorm: copy_to_if(Ca[t-1], Ca[t]))
    h[t] = y[t] = m[t] * y'[t] + (1 - m[t]) * y[t-1]               (copy_to_if(y[t-1], y[t]))

The output gate's peephole reads the candidate c'[t] (Brainstorm computes Oa[t] before it resets Ca[t]).
h[-1], c[-1] are the optional operands h0 and c0 [B, H] (Brainstorm's context); without them 0. t counts
from 0 in each call, as in Brainstorm and netc's Clockwork, so a carried state does not carry the clock's
phase. Parameters, Brainstorm's names, shapes and order: the Lstm's fifteen (Wz .. bo), then timing [H],
each unit's period (a float, compared with fmod; netc's random parameters give 1, 2, 4, ..., 2^j), which
gets no gradient (Brainstorm's computes_no_gradients_for).

Cost: the Lstm's (netc/ops/lstm.py) plus 2TBH forward (the two selects of the kept units) and 4TBH
backward (the mask on the incoming deltas and the kept units' carry of dh and dc).

The gradient is the derivative of these equations, split as the Lstm's: clockwork_lstm_grad_gates runs
the recurrence backwards by hand (a unit that keeps its state at step t passes the gradients of y[t] and
c[t] on to y[t-1] and c[t-1] and gets zero gate gradients there) into the Lstm's [T, B, 9, H] blocks
(netc/ops/lstm.py BLOCKS; its 'c' block holds the candidate c'[t] the peephole po reads), and the Lstm's
own lstm_grad_data and lstm_grad_param read them. Finite differences in float64 check it, and without a
context it equals Brainstorm's backward_pass (tests/test_brainstorm_ops.py, Brainstorm's gradients recorded).
With a nonzero context it differs from Brainstorm's on purpose, where that one is not the derivative: there
the t = 0 terms of dR* and dpi, dpf read the context's deltas (dy[-1], dCa[-1]) where the derivative reads
its values (h0, c0), dpf's reads dIa[0] where dFa[0] belongs, and no dh0, dc0 are produced.

The batch is axis 1 (OpDef.batch_axis), as the Lstm's. No kernel (kernels/lowering.py has no row): the
reference and Python targets run it; a compiled target refuses it with a located error.
"""
from __future__ import annotations

from .lstm import BLOCKS, ROLES, Lstm, lstm_block_gradients
from .registry import Cost, OpDef, ShapeError, prod, register

CLOCK_ROLES = ROLES + ("timing",)


def check_shapes(a, ins):
    """(T, B, X, H) of a ClockworkLstm's operand shapes (x; or x, h0 and c0), or ShapeError."""
    h = a["size"]
    if h <= 0:
        raise ShapeError(f"size must be positive, got {h}", attr="size")
    x = ins[0]
    if len(x) < 3:
        raise ShapeError(f"ClockworkLstm reads a time-major sequence [T, B, features...] (rank >= 3), got "
                         f"{list(x)}", operand=0)
    if len(ins) == 2:
        raise ShapeError("ClockworkLstm takes x alone or x, h0 and c0 (Brainstorm's context holds both states): "
                         "give c0 too", operand=1)
    for k in range(1, len(ins)):
        if tuple(ins[k]) != (x[1], h):
            raise ShapeError(f"the initial {('h', 'c')[k - 1]} must be [B, size] = {[x[1], h]}, got {list(ins[k])}",
                             operand=k)
    return x[0], x[1], prod(x[2:]), h


def _compute(ins, params):
    from .reference import in_compute_dtype
    vals = [in_compute_dtype(v) for v in ins] + [None, None]
    return vals[0], vals[1], vals[2], {r: in_compute_dtype(params[r]) for r in CLOCK_ROLES}


@register
class ClockworkLstm(Lstm):
    name = "clockwork_lstm"
    types = ("ClockworkLstm",)
    param_roles = CLOCK_ROLES
    attrs = {k: v for k, v in Lstm.attrs.items() if k != "cell_activation"}   # Brainstorm's: one activation
    doc = ("Brainstorm's ClockworkLstm: an Lstm over a whole time-major sequence (x [T, B, ...], optionally h0, c0 "
           "[B, size]; y [T, B, size]) whose units update only where their clock ticks (t = 0 or fmod(t, timing) "
           "== 0) and elsewhere keep c and y. Parameters: the Lstm's and timing [size] (the periods; no gradient).")

    def infer(self, a, ins):
        t, b, _, h = check_shapes(a, ins)
        return (t, b, h)

    def param_shapes(self, a, ins, out):
        t, b, _, h = check_shapes(a, ins)
        shapes = dict(Lstm.param_shapes(self, a, ins, out))
        shapes["timing"] = (h,)
        return shapes

    def cost(self, a, ins, out, needs_input_grad=True):
        t, b, _, h = check_shapes(a, ins)
        c = Lstm.cost(self, a, ins, out, needs_input_grad)
        return Cost(c.flops_fwd + 2 * t * b * h, c.flops_bwd_data + 4 * t * b * h, c.flops_bwd_filter)

    def reference(self, a, ins, params):
        x, h0, c0, p = _compute(ins, params)
        return clockwork_lstm_states(x, h0, c0, p, a["activation"])["y"]

    def final_state(self, a, ins, params, out):
        """[h, c] after the last step: h = y[T-1], c recomputed. The clock restarts at t = 0 in every call (every
        unit updates there), so only periods of 1 make two calls equal one."""
        x, h0, c0, p = _compute(ins, params)
        return [out[-1], clockwork_lstm_states(x, h0, c0, p, a["activation"])["c_last"]]

    def gradient(self, g, op, dy):
        """clockwork_lstm_grad_gates runs the recurrence backwards; then the Lstm's lstm_grad_data (x, h0, c0)
        and lstm_grad_param (each parameter but timing, which has no gradient), each only where needed."""
        return lstm_block_gradients(g, op, dy, "netc.clockwork_lstm_grad_gates", CLOCK_ROLES)


@register
class ClockworkLstmGradGates(OpDef):
    name = "clockwork_lstm_grad_gates"
    training_only = True
    batch_axis = 1
    arity = (2, 4)
    param_roles = CLOCK_ROLES
    attrs = {"size": Lstm.attrs["size"], "activation": Lstm.attrs["activation"]}
    doc = ("The recurrence of a ClockworkLstm's gradient, backwards through time: x, h0 and c0 (when the layer has "
           "them) and dy [T, B, size] -> the Lstm's [T, B, 9, size] blocks (lstm_grad_gates'; a unit whose clock does "
           "not tick at t gets zero gate gradients there and passes dy, dc on). FLOPs: 8TBH^2 + 34TBH.")

    def infer(self, a, ins):
        *fwd, dy = ins
        t, b, _, h = check_shapes(a, fwd)
        if tuple(dy) != (t, b, h):
            raise ShapeError(f"the gradient {list(dy)} is not the ClockworkLstm's output {[t, b, h]}",
                             operand=len(fwd))
        return (t, b, len(BLOCKS), h)

    def param_shapes(self, a, ins, out):
        return ClockworkLstm().param_shapes(a, ins[:-1], None)

    def cost(self, a, ins, out, needs_input_grad=True):
        t, b, _, h = check_shapes(a, ins[:-1])
        return Cost(8 * t * b * h * h + 34 * t * b * h)

    def reference(self, a, ins, params):
        x, h0, c0, p = _compute(ins[:-1], params)
        from .reference import in_compute_dtype
        return clockwork_lstm_grad_gates(x, h0, c0, in_compute_dtype(ins[-1]), p, a["activation"])


# --------------------------------------------------------------------------- the reference, by hand

def clock_mask(timing, t: int, dtype):
    """m[t] [H]: 1 for the units that update at step t (all at t = 0, else fmod(t, timing) == 0), else 0."""
    from .rnn import clock_ticks
    return clock_ticks(timing, t).to(dtype)


def clockwork_lstm_states(x, h0, c0, p: dict, act: str = "tanh") -> dict:
    """The forward recurrence (the module docstring's equations), every state stacked over time, [T, B, H] each:
    z, i, f, o, cn (the candidate c'[t]), cb = act(c'[t]), c (the kept cell), y; c_prev, h_prev (c[t-1], h[t-1]);
    m [T, H], and the final state h_last, c_last [B, H]."""
    from .reference import activation
    import torch
    t_len, b = x.shape[0], x.shape[1]
    xf = x.reshape(t_len, b, -1)
    hid = p["bz"].shape[0]
    h = h0 if h0 is not None else xf.new_zeros((b, hid))
    c = c0 if c0 is not None else xf.new_zeros((b, hid))
    keep = {k: [] for k in ("z", "i", "f", "o", "cn", "cb", "c", "y", "c_prev", "h_prev", "m")}

    def pre(g, t):
        return xf[t] @ p[f"W{g}"].T + h @ p[f"R{g}"].T + p[f"b{g}"]

    for t in range(t_len):
        m = clock_mask(p["timing"], t, xf.dtype)
        z = activation(pre("z", t), act)
        i = torch.sigmoid(pre("i", t) + p["pi"] * c)
        f = torch.sigmoid(pre("f", t) + p["pf"] * c)
        cn = i * z + f * c
        o = torch.sigmoid(pre("o", t) + p["po"] * cn)
        cb = activation(cn, act)
        c_new = m * cn + (1 - m) * c
        y = m * (o * cb) + (1 - m) * h
        for k, v in (("z", z), ("i", i), ("f", f), ("o", o), ("cn", cn), ("cb", cb), ("c", c_new), ("y", y),
                     ("c_prev", c), ("h_prev", h), ("m", m)):
            keep[k].append(v)
        h, c = y, c_new
    out = {k: torch.stack(v) for k, v in keep.items()}
    out["h_last"], out["c_last"] = h, c
    return out


def clockwork_lstm_grad_gates(x, h0, c0, dy, p: dict, act: str = "tanh"):
    """Backpropagation through time of clockwork_lstm_states' y against dy [T, B, H], by hand: [T, B, 9, H], the
    blocks of netc/ops/lstm.py BLOCKS at every step ('c': the candidate c'[t])."""
    from .reference import activation_grad
    import torch
    s = clockwork_lstm_states(x, h0, c0, p, act)
    dh_next = torch.zeros_like(s["y"][0])     # what step t+1 sends back to h[t]
    dc_next = torch.zeros_like(s["c"][0])     # ... and to c[t]
    steps = []
    for t in reversed(range(x.shape[0])):
        i, f, o, z, cb, m = s["i"][t], s["f"][t], s["o"][t], s["z"][t], s["cb"][t], s["m"][t]
        dh = (dy[t] + dh_next) * m            # to the candidate y'[t]; the rest passes on to y[t-1]
        do = dh * cb * o * (1 - o)
        dc = activation_grad(cb, dh * o, act) + dc_next * m + do * p["po"]
        df = dc * s["c_prev"][t] * f * (1 - f)
        di = dc * z * i * (1 - i)
        dz = activation_grad(z, dc * i, act)
        dh_prev = dz @ p["Rz"] + di @ p["Ri"] + df @ p["Rf"] + do @ p["Ro"] + (dy[t] + dh_next) * (1 - m)
        dc_prev = dc * f + di * p["pi"] + df * p["pf"] + dc_next * (1 - m)
        dh_next, dc_next = dh_prev, dc_prev
        steps.append(torch.stack([dz, di, df, do, dc_prev, dh_prev, s["c_prev"][t], s["cn"][t], s["h_prev"][t]], 1))
    return torch.stack(steps[::-1])
