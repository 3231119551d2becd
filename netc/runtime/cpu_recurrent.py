"""The CPU target's lowerings of the GRU, the LSTM and their recurrence gradients (issue 28): ops/recurrent.py's netc.gru
and netc.gru_grad_gates, ops/lstm.py's netc.lstm and netc.lstm_grad_gates, the same functions computed the way
torch's CPU kernels go fast.

The references (ops/recurrent.py gru_states, gru_grad_gates) are written for clarity: per step, one product per
gate with x and one with h, the states appended to lists and stacked. Here, as kernels/gru.py splits the work:

    the input products of all steps at once: x [T*B, X] times the three *_hx stacked [X, 3H] (the biases added by
    the same addmm), one GEMM instead of 3T small ones;
    per step, the recurrent products as one: h [B, H] times z_hh, r_hh (and c_hh, where the reset follows the
    product) stacked; the gates' elementwise work on slices of preallocated [T, B, H] states;
    the backward per step: what step t sends back to h[t-1] as one product of [dz, dr] with [z_hh; r_hh] stacked
    plus c_hh's, written straight into the [T, B, 7, H] blocks of gru_grad_gates' result (the LSTM's: the four
    gate blocks of its [T, B, 9, H] result times Rz, Ri, Rf, Ro stacked, one product a step).

Same equations, same operand order in every sum where it matters for rounding to f32 within the reference's
tolerance (tests/test_cpu_target.py checks both against the references in float64, where they agree to
rounding, and whole char-rnn steps against the reference executor).
"""
from __future__ import annotations

import torch

GATES = ("z", "r", "c")


def _seq(x):
    return x.unsqueeze(0) if x.dim() == 2 else x


def _params(a, params) -> dict:
    from ..ops.reference import in_compute_dtype
    from ..ops.recurrent import ROLES
    roles = ROLES if a.get("bias", True) else ROLES[:6]
    return {r: in_compute_dtype(params[r]) for r in roles}


def states(x, h0, p: dict, lbr: bool, keep: bool):
    """The forward recurrence over x [T, B, ...]: y [T, B, H] and, with keep, the states gru_grad_gates reads
    ({z, r, c, u, h_prev}, each [T, B, H])."""
    t_len, b = x.shape[0], x.shape[1]
    hid = p["z_hh"].shape[0]
    xf = x.reshape(t_len * b, -1)
    wx = torch.cat([p[f"{g}_hx"] for g in GATES])                     # [3H, X]
    if "z_b" in p:
        gx = torch.addmm(torch.cat([p[f"{g}_b"] for g in GATES]), xf, wx.T)
    else:
        gx = xf @ wx.T
    gx = gx.view(t_len, b, 3 * hid)
    wh = torch.cat([p["z_hh"], p["r_hh"]] + ([p["c_hh"]] if lbr else [])).T     # [H, 2H or 3H]
    y = x.new_empty((t_len, b, hid))
    st = {k: x.new_empty((t_len, b, hid)) for k in ("z", "r", "c", "u", "h_prev")} if keep else None
    h = h0 if h0 is not None else x.new_zeros((b, hid))
    for t in range(t_len):
        gh = h @ wh
        zr = torch.sigmoid(gx[t, :, :2 * hid] + gh[:, :2 * hid])
        z, r = zr[:, :hid], zr[:, hid:]
        if lbr:
            u = gh[:, 2 * hid:]
            c = torch.tanh(gx[t, :, 2 * hid:] + r * u)
        else:
            u = (r * h) @ p["c_hh"].T
            c = torch.tanh(gx[t, :, 2 * hid:] + u)
        torch.add((1 - z) * c, z * h, out=y[t])
        if keep:
            for k, v in (("z", z), ("r", r), ("c", c), ("u", u), ("h_prev", h)):
                st[k][t] = v
        h = y[t]
    return y, st


def gru(a, ins, params):
    """netc.gru (x [T, B, ...] or one step [B, X], optionally h0) -> y, as ops/recurrent.py's reference."""
    from ..ops.reference import in_compute_dtype
    x = in_compute_dtype(ins[0])
    h0 = in_compute_dtype(ins[1]) if len(ins) == 2 else None
    y, _ = states(_seq(x), h0, _params(a, params), a.get("linear_before_reset", True), keep=False)
    return y[0] if x.dim() == 2 else y


def gru_grad_gates(a, ins, params):
    """netc.gru_grad_gates (x, [h0,] dy) -> [T, B, 7, H]: the blocks of ops/recurrent.py BLOCKS at every step."""
    from ..ops.reference import in_compute_dtype
    from ..ops.recurrent import BLOCKS
    x = _seq(in_compute_dtype(ins[0]))
    h0 = in_compute_dtype(ins[1]) if len(ins) == 3 else None
    dy = _seq(in_compute_dtype(ins[-1]))
    p = _params(a, params)
    lbr = a.get("linear_before_reset", True)
    _, s = states(x, h0, p, lbr, keep=True)
    t_len, b, hid = dy.shape[0], dy.shape[1], p["z_hh"].shape[0]
    out = dy.new_empty((t_len, b, len(BLOCKS), hid))
    assert (BLOCKS["z"], BLOCKS["r"], BLOCKS["c"]) == (0, 1, 2)
    zr_hh = torch.cat([p["z_hh"], p["r_hh"]])                         # [2H, H]
    dh_next = dy.new_zeros((b, hid))
    for t in reversed(range(t_len)):
        z, r, c, u, hp = s["z"][t], s["r"][t], s["c"][t], s["u"][t], s["h_prev"][t]
        blk = out[t]
        dh = dy[t] + dh_next
        torch.mul(dh * (1 - z), 1 - c * c, out=blk[:, BLOCKS["c"]])
        dc = blk[:, BLOCKS["c"]]
        torch.mul(dh * (hp - c) * z, 1 - z, out=blk[:, BLOCKS["z"]])
        if lbr:
            torch.mul(dc, r, out=blk[:, BLOCKS["uc"]])
            blk[:, BLOCKS["hc"]] = hp
            torch.mul(dc * u * r, 1 - r, out=blk[:, BLOCKS["r"]])
            back = blk[:, BLOCKS["uc"]] @ p["c_hh"]
        else:
            drh = dc @ p["c_hh"]
            blk[:, BLOCKS["uc"]] = dc
            torch.mul(r, hp, out=blk[:, BLOCKS["hc"]])
            torch.mul(drh * hp * r, 1 - r, out=blk[:, BLOCKS["r"]])
            back = drh * r
        dzr = blk[:, :2].reshape(b, 2 * hid)                           # the z and r blocks side by side: a view
        dh_next = blk[:, BLOCKS["dh_prev"]]
        torch.addmm(dh * z + back, dzr, zr_hh, out=dh_next)
        blk[:, BLOCKS["h_prev"]] = hp
    return out


def lstm_states(x, h0, c0, p: dict, act: str, cact: str, keep: bool):
    """ops/lstm.py's forward recurrence over x [T, B, ...]: y [T, B, H] and, with keep, the states lstm_grad_gates
    reads ({z, i, f, o, c, cb, c_prev, h_prev}, each [T, B, H])."""
    from ..ops.reference import activation
    t_len, b = x.shape[0], x.shape[1]
    hid = p["bz"].shape[0]
    gx = torch.addmm(torch.cat([p[f"b{g}"] for g in "zifo"]), x.reshape(t_len * b, -1),
                     torch.cat([p[f"W{g}"] for g in "zifo"]).T).view(t_len, b, 4 * hid)
    rh = torch.cat([p[f"R{g}"] for g in "zifo"]).T                      # [H, 4H]
    y = x.new_empty((t_len, b, hid))
    st = {k: x.new_empty((t_len, b, hid)) for k in ("z", "i", "f", "o", "c", "cb", "c_prev", "h_prev")} if keep else None
    h = h0 if h0 is not None else x.new_zeros((b, hid))
    c = c0 if c0 is not None else x.new_zeros((b, hid))
    for t in range(t_len):
        pre = gx[t] + h @ rh
        z = activation(pre[:, :hid], act)
        i = torch.sigmoid(pre[:, hid:2 * hid] + p["pi"] * c)
        f = torch.sigmoid(pre[:, 2 * hid:3 * hid] + p["pf"] * c)
        c_new = i * z + f * c
        o = torch.sigmoid(pre[:, 3 * hid:] + p["po"] * c_new)
        cb = activation(c_new, cact)
        torch.mul(o, cb, out=y[t])
        if keep:
            for k, v in (("z", z), ("i", i), ("f", f), ("o", o), ("c", c_new), ("cb", cb), ("c_prev", c), ("h_prev", h)):
                st[k][t] = v
        h, c = y[t], c_new
    return y, st


def _lstm_operands(a, ins, params, grad: bool):
    from ..ops.lstm import ROLES, cell_act
    from ..ops.reference import in_compute_dtype
    vals = [in_compute_dtype(v) for v in ins]
    dy = vals.pop() if grad else None
    x, h0, c0 = (vals + [None, None])[:3]
    return x, h0, c0, dy, {r: in_compute_dtype(params[r]) for r in ROLES}, a["activation"], cell_act(a) or a["activation"]


def lstm(a, ins, params):
    """netc.lstm (x [T, B, ...], optionally h0, c0) -> y, as ops/lstm.py's reference."""
    x, h0, c0, _, p, act, cact = _lstm_operands(a, ins, params, grad=False)
    return lstm_states(x, h0, c0, p, act, cact, keep=False)[0]


def lstm_grad_gates(a, ins, params):
    """netc.lstm_grad_gates (x, [h0, c0,] dy) -> [T, B, 9, H]: the blocks of ops/lstm.py BLOCKS at every step."""
    from ..ops.lstm import BLOCKS
    from ..ops.reference import activation_grad
    x, h0, c0, dy, p, act, cact = _lstm_operands(a, ins, params, grad=True)
    _, s = lstm_states(x, h0, c0, p, act, cact, keep=True)
    t_len, b, hid = dy.shape[0], dy.shape[1], p["bz"].shape[0]
    out = dy.new_empty((t_len, b, len(BLOCKS), hid))
    assert [BLOCKS[g] for g in "zifo"] == [0, 1, 2, 3]
    r4 = torch.cat([p[f"R{g}"] for g in "zifo"])                       # [4H, H]
    dh_next, dc_next = dy.new_zeros((b, hid)), dy.new_zeros((b, hid))
    for t in reversed(range(t_len)):
        i, f, o, z, cb = s["i"][t], s["f"][t], s["o"][t], s["z"][t], s["cb"][t]
        blk = out[t]
        dh = dy[t] + dh_next
        do = dh * cb * o * (1 - o)
        dc = activation_grad(cb, dh * o, cact) + dc_next + do * p["po"]
        blk[:, BLOCKS["o"]] = do
        torch.mul(dc * s["c_prev"][t] * f, 1 - f, out=blk[:, BLOCKS["f"]])
        torch.mul(dc * z * i, 1 - i, out=blk[:, BLOCKS["i"]])
        blk[:, BLOCKS["z"]] = activation_grad(z, dc * i, act)
        dh_next = blk[:, BLOCKS["dh_prev"]]
        torch.mm(blk[:, :4].reshape(b, 4 * hid), r4, out=dh_next)      # the four gate blocks side by side: a view
        dc_next = blk[:, BLOCKS["dc_prev"]]
        torch.add(dc * f + blk[:, BLOCKS["i"]] * p["pi"], blk[:, BLOCKS["f"]] * p["pf"], out=dc_next)
        blk[:, BLOCKS["c_prev"]] = s["c_prev"][t]
        blk[:, BLOCKS["c"]] = s["c"][t]
        blk[:, BLOCKS["h_prev"]] = s["h_prev"][t]
    return out


LOWERINGS = {"netc.gru": gru, "netc.gru_grad_gates": gru_grad_gates, "netc.lstm": lstm,
             "netc.lstm_grad_gates": lstm_grad_gates}
