"""Recurrent cells: GRU, one unrolled time step with SINGA's semantics (kGRU, v0.2+).

A recurrent net is unrolled into one op per step (SINGA does this when it builds the net); the
recurrent edge is an ordinary operand: step t reads its input x_t and the output of step t-1.
The first step has no previous state (SINGA feeds a zero context), so `gru` takes 1 or 2 inputs.

    z  = sigmoid(x W_z^T + b_z + h W_zh^T)          update gate
    r  = sigmoid(x W_r^T + b_r + h W_rh^T)          reset gate
    c  = tanh(x W_c^T + b_c + r * (h W_ch^T))       candidate ("new memory"; reset after the product)
    h' = (1 - z) * c + z * h                        the output, [N, dim_hidden]

x is flattened to [N, vdim]. Parameters keep SINGA's layout and order: z_hx, r_hx, c_hx
[dim_hidden, vdim]; z_hh, r_hh, c_hh [dim_hidden, dim_hidden]; z_b, r_b, c_b [dim_hidden] (only
with `bias`). Every step owns all of them, also the first (whose hidden-to-hidden products vanish):
the unrolled copies of one layer share their storage by `share_from` on the first step's.
"""
from __future__ import annotations

from .registry import AttrSpec, Cost, OpDef, ShapeError, prod, register

_GATES = ("z", "r", "c")


@register
class GRU(OpDef):
    name = "gru"
    types = ("GRU",)
    arity = (1, 2)
    param_roles = tuple(f"{g}_hx" for g in _GATES) + tuple(f"{g}_hh" for g in _GATES) + tuple(f"{g}_b" for g in _GATES)
    attrs = {
        "dim_hidden": AttrSpec("int", doc="size of the hidden state h"),
        "bias": AttrSpec("bool", True, doc="gate biases z_b, r_b, c_b"),
    }
    doc = ("One GRU step (SINGA's kGRU): inputs x [N, ...] (flattened) and, after the first step, the previous "
           "state h [N, dim_hidden]; output the new state [N, dim_hidden].")

    def infer(self, a, ins):
        x = ins[0]
        h = a["dim_hidden"]
        if len(x) < 2:
            raise ShapeError(f"GRU needs an input of rank >= 2 ([N, ...]), got {list(x)}", operand=0)
        if h <= 0:
            raise ShapeError(f"dim_hidden must be positive, got {h}", attr="dim_hidden")
        if len(ins) == 2 and tuple(ins[1]) != (x[0], h):
            raise ShapeError(f"the previous state must be [N, dim_hidden] = {[x[0], h]}, got {list(ins[1])}",
                             operand=1)
        return (x[0], h)

    def param_shapes(self, a, ins, out):
        h, v = a["dim_hidden"], prod(ins[0][1:])
        shapes = {f"{g}_hx": (h, v) for g in _GATES}
        shapes.update({f"{g}_hh": (h, h) for g in _GATES})
        if a["bias"]:
            shapes.update({f"{g}_b": (h,) for g in _GATES})
        return shapes

    def cost(self, a, ins, out, needs_input_grad=True):
        # GEMMs at 2 FLOPs per multiply-add; elementwise work per element of the [N, h] state:
        # forward 2 sigmoids and a tanh (4 each, as netc's Sigmoid/Tanh), the gate sums (1 per bias,
        # 1 per hidden product), r * (h W_ch^T) and the output mix ((1 - z) * c, + z * h: 4; 2 without h).
        # Backward: the same elementwise work; data: x's gradient (skipped when x is a network input)
        # and h's; filter: the weight gradients and the bias sums.
        n, v, h = ins[0][0], prod(ins[0][1:]), a["dim_hidden"]
        rec = len(ins) == 2
        nh = n * h
        gemm_x, gemm_h = 6 * n * v * h, (6 * n * h * h if rec else 0)
        ew = nh * (12 + (3 if a["bias"] else 0) + (8 if rec else 2))
        fwd = gemm_x + gemm_h + ew
        bwd_data = (gemm_x if needs_input_grad else 0) + gemm_h + ew
        bwd_filter = gemm_x + gemm_h + (3 * nh if a["bias"] else 0)
        return Cost(fwd, bwd_data, bwd_filter)

    def reference(self, a, ins, params):
        import torch
        x = ins[0].reshape(ins[0].shape[0], -1)
        h = ins[1] if len(ins) == 2 else None

        def gate(g):
            y = x @ params[f"{g}_hx"].T
            if a["bias"]:
                y = y + params[f"{g}_b"]
            return y

        if h is None:  # SINGA's zero context: the hidden products vanish
            z, r = torch.sigmoid(gate("z")), torch.sigmoid(gate("r"))
            c = torch.tanh(gate("c"))
            return (1 - z) * c
        z = torch.sigmoid(gate("z") + h @ params["z_hh"].T)
        r = torch.sigmoid(gate("r") + h @ params["r_hh"].T)
        c = torch.tanh(gate("c") + r * (h @ params["c_hh"].T))
        return (1 - z) * c + z * h
