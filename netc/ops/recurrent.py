"""GRU: one op over a whole time-major sequence with SINGA's semantics (kGRU, v0.2/v0.3,
src/neuralnet/neuron_layer/gru.cc), and its gradient, backpropagation through time.

x is [T, B, ...], time first, its trailing feature axes flattened to X; the state h is [B, H],
H = `dim_hidden`. With sigma the logistic sigmoid, for t = 0 .. T-1 (SINGA's GRULayer::ComputeFeature):

    z[t] = sigma(x[t] z_hx^T + z_b + h[t-1] z_hh^T)               update gate
    r[t] = sigma(x[t] r_hx^T + r_b + h[t-1] r_hh^T)               reset gate
    c[t] = tanh(x[t] c_hx^T + c_b + r[t] * (h[t-1] c_hh^T))       new memory: the reset gate multiplies
                                                                 the recurrent product (ONNX's
                                                                 linear_before_reset = 1)
    h[t] = y[t] = (1 - z[t]) * c[t] + z[t] * h[t-1]               the output, [T, B, H]

There is no recurrent bias (SINGA has none). `linear_before_reset: false` is the other convention
(Cho et al. 2014, ONNX's linear_before_reset = 0): c[t] = tanh(x[t] c_hx^T + c_b + (r[t] * h[t-1]) c_hh^T).
h[-1] is the optional operand h0 [B, H] (the state carried over from a previous call); without it
0 (SINGA's zero context on the first unrolled step). The final state is y[T-1].

A rank-2 x [B, X] is one step without a time axis (y [B, H]): SINGA's unrolled form, one op per
step reading the previous step's output as h0 (the SINGA importer keeps it for nets it cannot roll,
and the .nd language takes it as before).

Parameters keep SINGA's roles, layout and order: z_hx, r_hx, c_hx [H, X]; z_hh, r_hh, c_hh [H, H];
z_b, r_b, c_b [H] (only with `bias`).

Cost (FLOPs, 2 per multiply-add; 4 per sigmoid or tanh, as netc's Sigmoid/Tanh), with S the steps
that read a state (S = T with h0; S = T - 1 without: step 0's recurrent products vanish against the
zero state, and a step without a state is the unrolled form's first step, costed as before):
  forward      6TBXH (the input products) + 6SBH^2 (the recurrent ones) + E, the elementwise work per
               state element and step: 2 sigmoids and a tanh (12), the 3 bias adds (with bias), and
               8 on a step with a state (the 3 recurrent sums, the reset product, the output mix
               (1 - z) * c + z * h) or 2 without ((1 - z) * c): E = BH(T(12 + 3) + 8S + 2(T - S))
  backward     data: 6TBXH (dx, when x needs a gradient) + 6SBH^2 (the recurrent deltas, dh0 among
               them) + E (the elementwise chain, counted as the forward's); filter: 6TBXH (the
               *_hx) + 6SBH^2 (the *_hh) + 3TBH (the biases, with bias)

The gradient, split as lstm's: gru_grad_gates recomputes the forward states and runs the recurrence
backwards, by hand (finite differences and torch.autograd check it, tests/test_gru.py), giving per
step the gates' pre-activation gradients, what the step sends back to h[t-1] and the states the
parameter gradients read; then gru_grad_data (dx: products with the *_hx; dh0: the t = 0 block)
and gru_grad_param (one per parameter: products and sums over time and batch). Where SINGA's own
ComputeGradient differs from the derivative (it adds z to the context's gradient where the
derivative has dy * z) this follows the derivative. The kernels (kernels/gru.py, the LSTM's recipe)
split it the same way: the input products of all steps as one GEMM, the recurrence as one launch
looping over the steps, gru_grad_gates' recomputing the forward into its own blocks; a single step's
gradient has none (its [1, B, 7, H] blocks lead with the step, not the batch). The batch is axis 1 of
a sequence (OpDef.batch_axis; gru_grad_gates' too: the partition pass refuses partition_dim 0 on it,
which would cut the sequence in time; the compiled targets plan T as their batch and take h0 whole,
as for netc/ops/lstm.py).
"""
from __future__ import annotations

from .registry import AttrSpec, Cost, OpDef, ShapeError, prod, register

GATES = ("z", "r", "c")
ROLES = tuple(f"{g}_hx" for g in GATES) + tuple(f"{g}_hh" for g in GATES) + tuple(f"{g}_b" for g in GATES)


def _roles(a) -> tuple:
    return ROLES if a.get("bias", True) else ROLES[:6]


def _shapes(a, ins):
    """(T, B, X, H) of a GRU's operand shapes (T = 1 for a single step [B, X]), or ShapeError."""
    h = a["dim_hidden"]
    if h <= 0:
        raise ShapeError(f"dim_hidden must be positive, got {h}", attr="dim_hidden")
    x = tuple(ins[0])
    if len(x) < 2:
        raise ShapeError(f"GRU reads a time-major sequence [T, B, features...] (or one step [B, X]), got {list(x)}",
                         operand=0)
    t, b, feats = (1, x[0], x[1:]) if len(x) == 2 else (x[0], x[1], x[2:])
    if len(ins) == 2 and tuple(ins[1]) != (b, h):
        raise ShapeError(f"the initial state h0 must be [B, dim_hidden] = {[b, h]}, got {list(ins[1])}", operand=1)
    return t, b, prod(feats), h


def _param_shapes(a, t, b, x, h):
    shapes = {f"{g}_hx": (h, x) for g in GATES}
    shapes.update({f"{g}_hh": (h, h) for g in GATES})
    shapes.update({f"{g}_b": (h,) for g in GATES})
    return {r: shapes[r] for r in _roles(a)}


def _flops(a, ins):
    """(input products, recurrent products, the elementwise work E, state elements T*B*H) of a GRU's
    operands (the module docstring's formulas)."""
    t, b, x, h = _shapes(a, ins)
    s = t if len(ins) == 2 else t - 1
    ew = b * h * (t * (12 + (3 if a.get("bias", True) else 0)) + 8 * s + 2 * (t - s))
    return 6 * t * b * x * h, 6 * s * b * h * h, ew, t * b * h


LBR = AttrSpec("bool", True, doc="the reset gate multiplies the recurrent product, r * (h c_hh^T) (SINGA's kGRU, "
                                 "ONNX's linear_before_reset = 1); false: (r * h) c_hh^T (Cho et al.)")


@register
class GRU(OpDef):
    name = "gru"
    singa_one_to_many = True  # SINGA's unrolled kGRU fans out (to the next step and its readers) without a split
    types = ("GRU",)
    arity = (1, 2)
    batch_axis = 1           # time-major: a split along axis 0 would cut the sequence
    state_operands = (1,)    # h0: a caller may carry the final state over (final_state)
    param_roles = ROLES
    attrs = {
        "dim_hidden": AttrSpec("int", doc="H, the width of the state h (the output)"),
        "bias": AttrSpec("bool", True, doc="gate biases z_b, r_b, c_b"),
        "linear_before_reset": LBR,
    }
    doc = ("A GRU over a whole time-major sequence, SINGA's kGRU: x [T, B, ...] (features flattened; a rank-2 "
           "[B, X] is one step), optionally the initial state h0 [B, dim_hidden]; output y [T, B, dim_hidden]. "
           "y[t] = (1 - z) * c + z * y[t-1]; c = tanh(x c_hx^T + c_b + r * (y[t-1] c_hh^T)).")

    def singa_layer(self, a, ins, v1, scale, plain):
        from .singa import SingaInexpressible
        if not a.get("linear_before_reset", True):
            raise SingaInexpressible(f"GRU '{a['name']}' resets h before its recurrent product "
                                     f"(linear_before_reset: false); SINGA's kGRU resets after it")
        if plain and len(ins) > 1:
            raise SingaInexpressible(f"GRU '{a['name']}' reads a previous state; SINGA's kGRU gets it only by "
                                     f"unrolling (import the SINGA job instead)")
        return "kGRU", [f"gru_conf {{ dim_hidden: {a['dim_hidden']} }}"], list(_roles(a))

    def infer(self, a, ins):
        t, b, _, h = _shapes(a, ins)
        return (b, h) if len(ins[0]) == 2 else (t, b, h)

    def param_shapes(self, a, ins, out):
        return _param_shapes(a, *_shapes(a, ins))

    def cost(self, a, ins, out, needs_input_grad=True):
        gx, gh, ew, n = _flops(a, ins)
        return Cost(gx + gh + ew, (gx if needs_input_grad else 0) + gh + ew, gx + gh + (3 * n if a["bias"] else 0))

    def reference(self, a, ins, params):
        from .reference import in_compute_dtype
        x = in_compute_dtype(ins[0])
        h0 = in_compute_dtype(ins[1]) if len(ins) == 2 else None
        p = {r: in_compute_dtype(params[r]) for r in _roles(a)}
        y = gru_states(_seq(x), h0, p, a.get("linear_before_reset", True))["y"]
        return y[0] if x.dim() == 2 else y

    def final_state(self, a, ins, params, out):
        """[h] after the last step: y[T-1] (a single step [B, X]: its output); the reference executor carries
        it into the next call's h0 (carry_state)."""
        return [out if ins[0].dim() == 2 else out[-1]]

    def gradient(self, g, op, dy):
        """gru_grad_gates runs the recurrence backwards (the gates' pre-activation gradients at every
        step); then plain products and sums of its blocks: gru_grad_data for x and h0, gru_grad_param
        for each parameter; each only where needed."""
        a = self.attrs_of(op)
        x = op.operands[0]
        roles = _roles(a)
        params = {r: g.param(r) for r in roles}
        ga = {"dim_hidden": a["dim_hidden"], "bias": a["bias"], "linear_before_reset": a["linear_before_reset"]}
        gates = g.emit("netc.gru_grad_gates", list(op.operands) + [dy], ga, params=params, tag="grad_gates")
        data = []
        for k, wrt in enumerate(("x", "h0")[:len(op.operands)]):
            if not g.needs(k):
                data.append(None)
                continue
            data.append(g.emit("netc.gru_grad_data", [gates],
                               {"wrt": wrt, "input_shape": list(op.operands[k].type.shape)},
                               params={f"{gt}_hx": params[f"{gt}_hx"] for gt in GATES} if wrt == "x" else None,
                               tag="grad_data" if wrt == "x" else "grad_h0"))
        zero = {"zero_state": True} if len(op.operands) == 1 else {}
        grads = {r: g.emit("netc.gru_grad_param", [gates] + ([x] if r.endswith("_hx") else []),
                           {"role": r, **(zero if r.endswith("_hh") else {})}, tag=f"grad_{r}")
                 for r in roles if g.needs_param(r)}
        return data, grads


def _seq(x):
    """x as a sequence: a single step [B, X] gets its time axis."""
    return x.unsqueeze(0) if x.dim() == 2 else x


# --------------------------------------------------------------------------- gradients

# The blocks of gru_grad_gates' [T, B, 7, H] result at step t: the gradients of the pre-activations of
# z, r and c; what step t sends back to h[t-1] (at t = 0: dh0); h[t-1]; and the two sides of c_hh's
# product: its gradient is uc^T hc (uc = dc_pre * r and hc = h[t-1] when the reset follows the product,
# uc = dc_pre and hc = r * h[t-1] when it precedes it).
BLOCKS = {"z": 0, "r": 1, "c": 2, "dh_prev": 3, "h_prev": 4, "uc": 5, "hc": 6}


def _gates_shape(gates):
    if len(gates) != 4 or gates[2] != len(BLOCKS):
        raise ShapeError(f"expected a GRU gates gradient [T, B, {len(BLOCKS)}, H], got {list(gates)}", operand=0)
    return gates[0], gates[1], gates[3]


@register
class GRUGradGates(OpDef):
    name = "gru_grad_gates"
    training_only = True
    batch_axis = 1           # time-major like the GRU: x, dy and the result lead with T; h0 [B, H]
    arity = (2, 3)
    param_roles = ROLES
    attrs = {"dim_hidden": GRU.attrs["dim_hidden"], "bias": GRU.attrs["bias"], "linear_before_reset": LBR}
    doc = ("The recurrence of a GRU's gradient, backwards through time: x, h0 (when the GRU has it) and dy -> "
           "[T, B, 7, dim_hidden]: per step the gradients of the pre-activations of z, r, c, what the step sends "
           "back to h[t-1] (dh0 at t = 0), the forward h[t-1] (recomputed) and the two sides of c_hh's product. "
           "FLOPs: 6SBH^2 (the recurrent deltas; S the steps with a state) + the elementwise chain (netc/ops/"
           "recurrent.py).")

    def infer(self, a, ins):
        *fwd, dy = ins
        t, b, _, h = _shapes(a, fwd)
        out = GRU().infer(a, fwd)
        if tuple(dy) != tuple(out):
            raise ShapeError(f"the gradient {list(dy)} is not the GRU's output {list(out)}", operand=len(fwd))
        return (t, b, len(BLOCKS), h)

    def param_shapes(self, a, ins, out):
        return _param_shapes(a, *_shapes(a, ins[:-1]))

    def cost(self, a, ins, out, needs_input_grad=True):
        _, gh, ew, _ = _flops(a, ins[:-1])
        return Cost(gh + ew)

    def reference(self, a, ins, params):
        from .reference import in_compute_dtype
        *fwd, dy = (in_compute_dtype(v) for v in ins)
        x, h0 = (fwd + [None])[:2]
        p = {r: in_compute_dtype(params[r]) for r in _roles(a)}
        return gru_grad_gates(_seq(x), h0, _seq(dy), p, a.get("linear_before_reset", True))


@register
class GRUGradData(OpDef):
    name = "gru_grad_data"
    training_only = True
    arity = (1, 1)
    param_roles = tuple(f"{g}_hx" for g in GATES)
    attrs = {"wrt": AttrSpec("enum", choices=("x", "h0"), doc="whose gradient"),
             "input_shape": AttrSpec("shape", doc="its shape")}
    doc = ("The gradient of a GRU's x (the sum over the gates of the pre-activation gradient times *_hx, in x's "
           "shape; FLOPs 6TBXH) or h0 (the block gru_grad_gates sends back from t = 0; no FLOPs), from "
           "gru_grad_gates' result.")

    def bindable_roles(self, a):
        return self.param_roles if a.get("wrt") == "x" else ()

    def infer(self, a, ins):
        t, b, h = _gates_shape(ins[0])
        s = tuple(a["input_shape"])
        ok = (len(s) >= 3 and s[:2] == (t, b)) or (len(s) == 2 and t == 1 and s[0] == b) if a["wrt"] == "x" \
            else s == (b, h)
        if not ok:
            raise ShapeError(f"{list(s)} is not the {a['wrt']} of a GRU with gates gradient {list(ins[0])}",
                             attr="input_shape")
        return s

    def param_shapes(self, a, ins, out):
        if a["wrt"] != "x":
            return {}
        t, b, h = _gates_shape(ins[0])
        return {r: (h, prod(out) // (t * b)) for r in self.param_roles}

    def cost(self, a, ins, out, needs_input_grad=True):
        t, b, h = _gates_shape(ins[0])
        return Cost(6 * h * prod(out) if a["wrt"] == "x" else 0)

    def reference(self, a, ins, params):
        from .reference import in_compute_dtype
        gates = in_compute_dtype(ins[0])
        if a["wrt"] != "x":
            return gates[0, :, BLOCKS["dh_prev"]]
        dx = sum(gates[:, :, BLOCKS[g]] @ in_compute_dtype(params[f"{g}_hx"]) for g in GATES)
        return dx.reshape(tuple(a["input_shape"]))


@register
class GRUGradParam(OpDef):
    name = "gru_grad_param"
    training_only = True
    unbatched = True
    arity = (1, 2)
    attrs = {"role": AttrSpec("enum", choices=ROLES, doc="the parameter"),
             "zero_state": AttrSpec("bool", False, doc="the GRU starts from the zero state (no h0): step 0 adds "
                                                        "nothing to a *_hh gradient (not counted)")}
    doc = ("The gradient of one GRU parameter from gru_grad_gates' result (and x, for the *_hx), summed over "
           "time and batch: *_hx dA^T x [H, X] (2TBXH FLOPs), *_hh dA^T h[t-1] [H, H] (2SBH^2, S the steps with "
           "a state; c_hh: the blocks uc^T hc), *_b dA [H] (TBH).")

    def infer(self, a, ins):
        t, b, h = _gates_shape(ins[0])
        r = a["role"]
        if (len(ins) == 2) != r.endswith("_hx"):
            raise ShapeError(f"the gradient of {r} reads {'x too' if r.endswith('_hx') else 'the gates gradient alone'}",
                             attr="role")
        if r.endswith("_hx"):
            x = tuple(ins[1])
            if not ((len(x) >= 3 and x[:2] == (t, b)) or (len(x) == 2 and t == 1 and x[0] == b)):
                raise ShapeError(f"{list(x)} is not the input of a GRU with gates gradient {list(ins[0])}",
                                 operand=1)
            return (h, prod(x) // (t * b))
        return (h, h) if r.endswith("_hh") else (h,)

    def cost(self, a, ins, out, needs_input_grad=True):
        t, b, h = _gates_shape(ins[0])
        n = t * b * h
        kind = a["role"][2:]
        s = t - 1 if a.get("zero_state") else t
        return Cost({"hx": 2 * n * out[-1], "hh": 2 * s * b * h * h, "b": n}[kind])

    def reference(self, a, ins, params):
        from .reference import in_compute_dtype
        gates = in_compute_dtype(ins[0])
        t, b = gates.shape[:2]
        g, kind = a["role"].split("_")
        if g == "c" and kind == "hh":
            return gates[:, :, BLOCKS["uc"]].reshape(t * b, -1).T @ gates[:, :, BLOCKS["hc"]].reshape(t * b, -1)
        da = gates[:, :, BLOCKS[g]].reshape(t * b, -1)
        if kind == "hx":
            return da.T @ in_compute_dtype(ins[1]).reshape(t * b, -1)
        if kind == "hh":
            return da.T @ gates[:, :, BLOCKS["h_prev"]].reshape(t * b, -1)
        return da.sum(0)


# --------------------------------------------------------------------------- the reference, by hand

def gru_states(x, h0, p: dict, linear_before_reset: bool = True) -> dict:
    """The forward recurrence (the module docstring's equations) over x [T, B, ...]: every state, stacked
    over time, [T, B, H] each: z, r, c, u (c_hh's product: h[t-1] c_hh^T, or (r * h[t-1]) c_hh^T), y, and
    h_prev (h[t-1]); also the final state h_last [B, H]. p: the roles (biases optional)."""
    import torch
    t_len, b = x.shape[0], x.shape[1]
    xf = x.reshape(t_len, b, -1)
    hid = p["z_hh"].shape[0]
    h = h0 if h0 is not None else xf.new_zeros((b, hid))
    keep = {k: [] for k in ("z", "r", "c", "u", "y", "h_prev")}

    def pre(g, t):
        v = xf[t] @ p[f"{g}_hx"].T
        return v + p[f"{g}_b"] if f"{g}_b" in p else v

    for t in range(t_len):
        z = torch.sigmoid(pre("z", t) + h @ p["z_hh"].T)
        r = torch.sigmoid(pre("r", t) + h @ p["r_hh"].T)
        if linear_before_reset:
            u = h @ p["c_hh"].T
            c = torch.tanh(pre("c", t) + r * u)
        else:
            u = (r * h) @ p["c_hh"].T
            c = torch.tanh(pre("c", t) + u)
        y = (1 - z) * c + z * h
        for k, v in (("z", z), ("r", r), ("c", c), ("u", u), ("y", y), ("h_prev", h)):
            keep[k].append(v)
        h = y
    out = {k: torch.stack(v) for k, v in keep.items()}
    out["h_last"] = h
    return out


def gru_grad_gates(x, h0, dy, p: dict, linear_before_reset: bool = True):
    """Backpropagation through time of gru_states' y against dy [T, B, H], by hand: [T, B, 7, H], the
    blocks of BLOCKS at every step."""
    import torch
    s = gru_states(x, h0, p, linear_before_reset)
    dh_next = torch.zeros_like(s["y"][0])     # what step t+1 sends back to h[t]
    steps = []
    for t in reversed(range(x.shape[0])):
        z, r, c, u, hp = s["z"][t], s["r"][t], s["c"][t], s["u"][t], s["h_prev"][t]
        dh = dy[t] + dh_next
        dc = dh * (1 - z) * (1 - c * c)                # the pre-activation of c
        dz = dh * (hp - c) * z * (1 - z)
        if linear_before_reset:
            uc, hc = dc * r, hp                        # d(h c_hh^T) = dc * r
            dr = dc * u * r * (1 - r)
            back = uc @ p["c_hh"]
        else:
            drh = dc @ p["c_hh"]                       # d(r * h)
            uc, hc = dc, r * hp
            dr = drh * hp * r * (1 - r)
            back = drh * r
        dh_next = dh * z + dz @ p["z_hh"] + dr @ p["r_hh"] + back
        steps.append(torch.stack([dz, dr, dc, dh_next, hp, uc, hc], 1))
    return torch.stack(steps[::-1])
