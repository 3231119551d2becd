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

Gradients, as a kernel would split them: gru_grad_gates recomputes the gates from x, h and the
parameters and gives the gradients of the gates' pre-activations (the elementwise part), then plain
products: gru_grad_input for x and for h, gru_grad_weight for each weight, gru_grad_bias for each bias.
The backward pass sums the unrolled steps' parameter gradients into the shared storage.
"""
from __future__ import annotations

from .registry import AttrSpec, Cost, OpDef, ShapeError, prod, register

_GATES = ("z", "r", "c")


@register
class GRU(OpDef):
    name = "gru"
    singa_one_to_many = True
    types = ("GRU",)
    arity = (1, 2)
    param_roles = tuple(f"{g}_hx" for g in _GATES) + tuple(f"{g}_hh" for g in _GATES) + tuple(f"{g}_b" for g in _GATES)
    attrs = {
        "dim_hidden": AttrSpec("int", doc="size of the hidden state h"),
        "bias": AttrSpec("bool", True, doc="gate biases z_b, r_b, c_b"),
    }
    doc = ("One GRU step (SINGA's kGRU): inputs x [N, ...] (flattened) and, after the first step, the previous "
           "state h [N, dim_hidden]; output the new state [N, dim_hidden].")

    def singa_layer(self, a, ins, v1, scale, plain):
        from .singa import GRU_ROLES, SingaInexpressible
        if plain and len(ins) > 1:
            raise SingaInexpressible(f"GRU '{a['name']}' reads a previous state; SINGA's kGRU gets it only by "
                                     f"unrolling (import the SINGA job instead)")
        roles = list(GRU_ROLES[:9 if a.get("bias", True) else 6])
        return "kGRU", [f"gru_conf {{ dim_hidden: {a['dim_hidden']} }}"], roles

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
        gemm_x, gemm_h, ew = _flops(a, ins)
        n, h = ins[0][0], a["dim_hidden"]
        fwd = gemm_x + gemm_h + ew
        bwd_data = (gemm_x if needs_input_grad else 0) + gemm_h + ew
        bwd_filter = gemm_x + gemm_h + (3 * n * h if a["bias"] else 0)
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

    def gradient(self, g, op, dy):
        """The gates' gradients (gru_grad_gates), then x's and h's gradients (gru_grad_input) and each
        parameter's (gru_grad_weight, gru_grad_bias), each only where needed. On the first step the
        hidden-to-hidden weights get none (their products vanish there)."""
        a = self.attrs_of(op)
        params = {role: g.param(role) for role in op.attrs.get("params", {})}
        rec = len(op.operands) == 2
        gates = g.emit("netc.gru_grad_gates", list(op.operands) + [dy],
                       {"dim_hidden": a["dim_hidden"], "bias": a["bias"]}, params=params, tag="grad_gates")
        data = []
        for i, side in enumerate(("hx", "hh")[:len(op.operands)]):
            v = op.operands[i]
            data.append(g.emit("netc.gru_grad_input", [gates],
                               {"input_shape": list(v.type.shape), "hidden": side == "hh"},
                               params={gt: g.param(f"{gt}_{side}") for gt in _GATES},
                               tag="grad_data" if i == 0 else "grad_state") if g.needs(i) else None)
        grads = {}
        for role in params:
            gate, kind = role.split("_")
            if not g.needs_param(role) or (kind == "hh" and not rec):
                continue
            block = _BLOCKS[gate] if not (gate == "c" and kind == "hh") else _BLOCK_U
            if kind == "b":
                grads[role] = g.emit("netc.gru_grad_bias", [gates], {"block": block}, tag=f"grad_{role}")
            else:
                grads[role] = g.emit("netc.gru_grad_weight", [op.operands[0 if kind == "hx" else 1], gates],
                                     {"block": block}, tag=f"grad_{role}")
        return data, grads


def _flops(a, ins):
    """(x's GEMMs, h's GEMMs, the elementwise work) of one step, forward (and backward, the same):
    GEMMs at 2 FLOPs per multiply-add; per element of the [N, h] state 2 sigmoids and a tanh (4 each,
    as netc's Sigmoid/Tanh), the gate sums (1 per bias, 1 per hidden product), r * (h W_ch^T) and the
    output mix ((1 - z) * c, + z * h: 4; 2 without h). Backward-data: x's GEMMs (skipped when x needs
    no gradient), h's, the elementwise work; backward-filter: the weight GEMMs and the bias sums."""
    n, v, h = ins[0][0], prod(ins[0][1:]), a["dim_hidden"]
    rec = len(ins) == 2
    nh = n * h
    return 6 * n * v * h, (6 * n * h * h if rec else 0), nh * (12 + (3 if a["bias"] else 0) + (8 if rec else 2))


# --------------------------------------------------------------------------- gradients

# The blocks of gru_grad_gates' [N, 5, H] result: the gradients of the z, r and c gates' pre-activations,
# of u = h W_ch^T (the c gate's hidden product, reset by r), and of h' through z * h (dy * z).
_BLOCKS = {"z": 0, "r": 1, "c": 2}
_BLOCK_U, _BLOCK_DIRECT, _NBLOCKS = 3, 4, 5


def _gates_shape(gates, operand=0):
    if len(gates) != 3 or gates[1] != _NBLOCKS:
        raise ShapeError(f"expected a GRU gates gradient [N, {_NBLOCKS}, H], got {list(gates)}", operand=operand)
    return gates


def _block_attr(a):
    if not 0 <= a["block"] < _NBLOCKS:
        raise ShapeError(f"block must be 0 to {_NBLOCKS - 1}, got {a['block']}", attr="block")


@register
class GRUGradGates(OpDef):
    name = "gru_grad_gates"
    training_only = True
    arity = (2, 3)
    param_roles = GRU.param_roles
    attrs = {"dim_hidden": GRU.attrs["dim_hidden"], "bias": GRU.attrs["bias"]}
    doc = ("The elementwise part of a GRU step's backward: x, the previous state h (after the first step) and "
           "dy -> [N, 5, H]: the gradients of the z, r and c gates' pre-activations, of u = h W_ch^T, and dy * z "
           "(h's direct path); the gates are recomputed from x, h and the parameters. On the first step r and u "
           "get 0. FLOPs: the step's elementwise work.")

    def infer(self, a, ins):
        *fwd, dy = ins
        out = GRU().infer(a, fwd)
        if tuple(dy) != tuple(out):
            raise ShapeError(f"the gradient {list(dy)} is not the GRU step's output {list(out)}", operand=len(fwd))
        return (out[0], _NBLOCKS, out[1])

    def param_shapes(self, a, ins, out):
        return GRU().param_shapes(a, ins[:1], None)

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(_flops(a, ins[:-1])[2])

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.gru_grad_gates(ins[0], ins[1] if len(ins) == 3 else None, ins[-1], params, a["bias"])


@register
class GRUGradInput(OpDef):
    name = "gru_grad_input"
    training_only = True
    arity = (1, 1)
    param_roles = _GATES
    attrs = {"input_shape": AttrSpec("shape", doc="x's (or h's) shape"),
             "hidden": AttrSpec("bool", False, doc="h's gradient (weights *_hh, blocks z, r, u and dy * z), "
                                                   "else x's (weights *_hx, blocks z, r, c)")}
    doc = ("The gradient of a GRU step's input x or previous state h from its gates' gradients: the sum of each "
           "block times its gate's weight (z, r, c: [H, V] or [H, H]), plus dy * z for h; in the input's shape. "
           "FLOPs: those products.")

    def infer(self, a, ins):
        n, _, h = _gates_shape(ins[0])
        x = tuple(a["input_shape"])
        if len(x) < 2 or x[0] != n or (a["hidden"] and x != (n, h)):
            raise ShapeError(f"{list(x)} is not the {'state' if a['hidden'] else 'input'} of a GRU step with gates "
                             f"{list(ins[0])}", attr="input_shape")
        return x

    def param_shapes(self, a, ins, out):
        return {gt: (ins[0][2], prod(out[1:])) for gt in _GATES}

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(3 * 2 * ins[0][0] * ins[0][2] * prod(out[1:]))

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        blocks = (_BLOCKS["z"], _BLOCKS["r"], _BLOCK_U) if a["hidden"] else tuple(_BLOCKS.values())
        return R.gru_grad_input(ins[0], [params[gt] for gt in _GATES], blocks,
                                _BLOCK_DIRECT if a["hidden"] else None, a["input_shape"])


@register
class GRUGradWeight(OpDef):
    name = "gru_grad_weight"
    training_only = True
    unbatched = True
    arity = (2, 2)
    attrs = {"block": AttrSpec("int", doc="the gates-gradient block (0 z, 1 r, 2 c, 3 u)")}
    doc = ("The gradient of one GRU weight: its input a (x, flattened, or h) and the gates' gradients -> "
           "block^T a, [H, V]. FLOPs 2*N*H*V.")

    def infer(self, a, ins):
        x, gates = ins
        n, _, h = _gates_shape(gates, 1)
        _block_attr(a)
        if len(x) < 2 or x[0] != n:
            raise ShapeError(f"{list(x)} is not an input of a GRU step with gates {list(gates)}", operand=0)
        return (h, prod(x[1:]))

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(2 * ins[0][0] * prod(out))

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.gru_grad_weight(ins[0], ins[1], a["block"])


@register
class GRUGradBias(OpDef):
    name = "gru_grad_bias"
    training_only = True
    unbatched = True
    arity = (1, 1)
    attrs = {"block": AttrSpec("int", doc="the gates-gradient block (0 z, 1 r, 2 c)")}
    doc = "The gradient of one GRU bias: the gates' gradient block summed over the batch, [H]. FLOPs N*H."

    def infer(self, a, ins):
        _, _, h = _gates_shape(ins[0])
        _block_attr(a)
        return (h,)

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(ins[0][0] * ins[0][2])

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.gru_grad_bias(ins[0], a["block"])
