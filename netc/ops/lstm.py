"""LSTM: one op over a whole sequence (time-major), with Brainstorm's semantics (its `Lstm` layer,
brainstorm/layers/lstm_layer.py), and its gradient, backpropagation through time.

x is [T, B, ...], time first, its trailing feature axes flattened to X (as Brainstorm does); the
state is h (the output) and c (the cell), [B, H] each, H = `size`. With act = `activation`
(default tanh; Brainstorm applies the same function to the block input and to the cell output),
cact = `cell_activation` (unset: act; PaddlePaddle's lstmemory has its own, state_act, e.g. its book's
Relu block input with a Tanh cell) and sigma the logistic sigmoid, for t = 0 .. T-1:

    z[t] = act(x[t] Wz^T + h[t-1] Rz^T + bz)                        block input
    i[t] = sigma(x[t] Wi^T + h[t-1] Ri^T + pi * c[t-1] + bi)        input gate  (peephole from c[t-1])
    f[t] = sigma(x[t] Wf^T + h[t-1] Rf^T + pf * c[t-1] + bf)        forget gate (peephole from c[t-1])
    c[t] = i[t] * z[t] + f[t] * c[t-1]                              cell
    o[t] = sigma(x[t] Wo^T + h[t-1] Ro^T + po * c[t] + bo)          output gate (peephole from c[t])
    h[t] = y[t] = o[t] * cact(c[t])                                 the output, [T, B, H]

h[-1], c[-1] are the optional operands h0 and c0 [B, H] (Brainstorm's context: the state carried
over from a previous call); without them both are 0. The op has one result, y; the final h is
y[T-1]; the final state (h, c) is OpDef.final_state, the c recomputed by lstm_states below: the
reference executor carries it into the next call's h0, c0 when asked (carry_state; netc run
--state-in/--state-out; tests/test_sequence.py). Parameters, Brainstorm's names, shapes and order:
Wz, Wi, Wf, Wo [H, X]; pi, pf, po [1, H]; Rz, Ri, Rf, Ro [H, H]; bz, bi, bf, bo [H].

Cost (FLOPs, 2 per multiply-add; 4 per sigmoid or activation, as netc's Sigmoid/Tanh):
  forward      8TBXH (the input products) + 8TBH^2 (the recurrent ones, also at t = 0, as Brainstorm
               computes them against its zero context) + 38TBH (per state element and step: 4 bias
               and 4 recurrent sums, 3 peephole multiply-adds, 3 sigmoids, 2 activations, the cell
               i*z + f*c, the output o*act(c))
  backward     data: 8TBXH (dx, when x needs a gradient) + 8TBH^2 (the recurrent deltas through R,
               dh0 among them) + 30TBH (the elementwise chain: 4 gate derivatives, the cell's and
               the peepholes' contributions, the carry through f); filter: 8TBXH (dW) + 8TBH^2 (dR)
               + 4TBH (db) + 6TBH (dp)

The gradient, split as a kernel would split it (like the GRU's): lstm_grad_gates recomputes the
forward states and runs the recurrence backwards, by hand (torch.autograd and finite differences
check it, tests/test_lstm.py), giving per step the gates' pre-activation gradients, what the step
sends back to c[t-1] and h[t-1], and the states the parameter gradients read; then lstm_grad_data
(dx: products with W; dh0, dc0: the t = 0 blocks) and lstm_grad_param (one per parameter: products
and sums over time and batch). The kernels (kernels/lstm.py, cuDNN's recipe) split it the same way:
the input products of all T steps as one GEMM, the recurrence as one launch that loops over the steps
with the gate math fused after the recurrent product; lstm_grad_gates' kernels recompute the forward
into their own result's blocks (so the forward keeps nothing for the backward) and run the recurrence
backwards; dx, dW, dR are GEMMs over all T * B rows, db and dp column sums.
With a nonzero context this gradient differs from Brainstorm's backward_pass on purpose: there the
t = 0 terms of dR*, dpi and dpf read the context's deltas (dy[-1], dCa[-1]; dIa[0] also for pf)
where the derivative reads its values (h0, c0; dFa[0] for pf), and no dh0, dc0 are produced; here
they are the derivative's, checked against finite differences with h0, c0 nonzero.

The batch is axis 1 (OpDef.batch_axis; lstm_grad_gates' too): the partition pass refuses
partition_dim 0 on an Lstm, which would cut the sequence in time. The compiled targets (the .so and
--target interp) scale the leading axis of every batch-sized tensor with their run-time batch: for a
network whose inputs are sequences that axis is T, so it is planned with T as its batch (a .so
compiled at T runs sequences of 1..T steps) and B is a fixed size; h0 and c0 [B, H] are no batch-sized
inputs but are fed whole at every call (memory/graph.py initial_state_values, kernels/recurrent_lowering.py).
"""
from __future__ import annotations

from .registry import AttrSpec, Cost, OpDef, ShapeError, lookup, prod, register

GATES = ("z", "i", "f", "o")
ROLES = ("Wz", "Wi", "Wf", "Wo", "pi", "pf", "po", "Rz", "Ri", "Rf", "Ro", "bz", "bi", "bf", "bo")
ACTIVATIONS = ("tanh", "sigmoid", "relu", "none")


def _shapes(a, ins):
    """(T, B, X, H) of an Lstm's operand shapes, or ShapeError."""
    h = a["size"]
    if h <= 0:
        raise ShapeError(f"size must be positive, got {h}", attr="size")
    x = ins[0]
    if len(x) < 3:
        raise ShapeError(f"Lstm reads a time-major sequence [T, B, features...] (rank >= 3), got {list(x)}",
                         operand=0)
    if len(ins) == 2:
        raise ShapeError("Lstm takes x alone or x, h0 and c0 (Brainstorm's context holds both states): "
                         "give c0 too", operand=1)
    for k in range(1, len(ins)):
        if tuple(ins[k]) != (x[1], h):
            raise ShapeError(f"the initial {('h', 'c')[k - 1]} must be [B, size] = {[x[1], h]}, got {list(ins[k])}",
                             operand=k)
    return x[0], x[1], prod(x[2:]), h


def _param_shapes(t, b, x, h):
    shapes = {f"W{g}": (h, x) for g in GATES}
    shapes.update({f"p{g}": (1, h) for g in "ifo"})
    shapes.update({f"R{g}": (h, h) for g in GATES})
    shapes.update({f"b{g}": (h,) for g in GATES})
    return {r: shapes[r] for r in ROLES}


def _flops(t, b, x, h):
    """(input products, recurrent products, per-state-element count (T*B*H)) of one direction."""
    return 8 * t * b * x * h, 8 * t * b * h * h, t * b * h


@register
class Lstm(OpDef):
    name = "lstm"
    types = ("Lstm",)
    arity = (1, 3)
    batch_axis = 1           # time-major: a split along axis 0 would cut the sequence
    context_rows = 1         # Brainstorm's layout: y is (T + 1, B, H), and so are its internals:
    layout_internals = ("Za", "Zb", "Ia", "Ib", "Fa", "Fb", "Oa", "Ob", "Ca", "Cb")
    state_operands = (1, 2)  # h0, c0: a caller may carry the final state over (final_state)
    param_roles = ROLES
    attrs = {
        "size": AttrSpec("int", doc="H, the width of the state h (the output) and the cell c"),
        "activation": AttrSpec("enum", "tanh", ACTIVATIONS,
                               doc="of the block input and of the cell output (Brainstorm's; its 'rel' is "
                                   "relu, 'linear' none)"),
        "cell_activation": AttrSpec("enum", None, ACTIVATIONS,
                                    doc="of the cell output when it differs from the block input's (PaddlePaddle's "
                                        "lstmemory: act for the block input, state_act for the cell); unset: "
                                        "`activation` (Brainstorm)"),
    }
    doc = ("An LSTM over a whole time-major sequence, Brainstorm's Lstm: x [T, B, ...] (features flattened), "
           "optionally the initial state h0, c0 [B, size]; output y [T, B, size]. Peepholes pi, pf from c[t-1], "
           "po from c[t]; y[t] = o[t] * act(c[t]).")

    def infer(self, a, ins):
        t, b, _, h = _shapes(a, ins)
        return (t, b, h)

    def param_shapes(self, a, ins, out):
        return _param_shapes(*_shapes(a, ins))

    def cost(self, a, ins, out, needs_input_grad=True):
        gx, gh, n = _flops(*_shapes(a, ins))
        return Cost(gx + gh + 38 * n, (gx if needs_input_grad else 0) + gh + 30 * n, gx + gh + 10 * n)

    def reference(self, a, ins, params):
        from .reference import in_compute_dtype
        x, h0, c0 = (in_compute_dtype(v) for v in (list(ins) + [None, None])[:3])
        p = {r: in_compute_dtype(params[r]) for r in ROLES}
        return lstm_states(x, h0, c0, p, a["activation"], cell_act(a))["y"]

    def final_state(self, a, ins, params, out):
        """[h, c] after the last step: h = y[T-1], c recomputed (the forward again; y is the only result)."""
        from .reference import in_compute_dtype
        x, h0, c0 = (in_compute_dtype(v) for v in (list(ins) + [None, None])[:3])
        c = lstm_states(x, h0, c0, {r: in_compute_dtype(params[r]) for r in ROLES}, a["activation"],
                        cell_act(a))["c_last"]
        return [out[-1], c]

    def gradient(self, g, op, dy):
        """lstm_grad_gates runs the recurrence backwards (the gates' pre-activation gradients at every
        step); then plain products and sums of its blocks: lstm_grad_data for x, h0 and c0,
        lstm_grad_param for each parameter; each only where needed."""
        return lstm_block_gradients(g, op, dy, "netc.lstm_grad_gates", ROLES)


def lstm_block_gradients(g, op, dy, gates_op: str, param_roles) -> tuple:
    """The gradient ops of an Lstm-like op (Lstm, Brainstorm's ClockworkLstm): `gates_op` runs the recurrence
    backwards into the gates' pre-activation gradients (reading every parameter of `param_roles`); then
    lstm_grad_data for x, h0 and c0 and lstm_grad_param for each of ROLES, each only where needed."""
    a = lookup(op.name).attrs_of(op)
    x = op.operands[0]
    params = {r: g.param(r) for r in param_roles}
    acts = {"activation": a["activation"]}
    if a.get("cell_activation") not in (None, a["activation"]):
        acts["cell_activation"] = a["cell_activation"]
    gates = g.emit(gates_op, list(op.operands) + [dy], {"size": a["size"], **acts}, params=params, tag="grad_gates")
    data = []
    for k, wrt in enumerate(("x", "h0", "c0")[:len(op.operands)]):
        if not g.needs(k):
            data.append(None)
            continue
        data.append(g.emit("netc.lstm_grad_data", [gates],
                           {"wrt": wrt, "input_shape": list(op.operands[k].type.shape)},
                           params={f"W{gt}": params[f"W{gt}"] for gt in GATES} if wrt == "x" else None,
                           tag="grad_data" if wrt == "x" else f"grad_{wrt}"))
    grads = {r: g.emit("netc.lstm_grad_param", [gates] + ([x] if r[0] == "W" else []), {"role": r},
                       tag=f"grad_{r}") for r in ROLES if g.needs_param(r)}
    return data, grads


# --------------------------------------------------------------------------- gradients

# The blocks of lstm_grad_gates' [T, B, 9, H] result at step t: the gradients of the pre-activations
# of z, i, f, o; what step t sends back to c[t-1] and to h[t-1] (at t = 0: dc0 and dh0); and the
# forward states the parameter gradients read: c[t-1], c[t], h[t-1].
BLOCKS = {"z": 0, "i": 1, "f": 2, "o": 3, "dc_prev": 4, "dh_prev": 5, "c_prev": 6, "c": 7, "h_prev": 8}


def _gates_shape(gates):
    if len(gates) != 4 or gates[2] != len(BLOCKS):
        raise ShapeError(f"expected an LSTM gates gradient [T, B, {len(BLOCKS)}, H], got {list(gates)}", operand=0)
    return gates[0], gates[1], gates[3]


@register
class LstmGradGates(OpDef):
    name = "lstm_grad_gates"
    training_only = True
    batch_axis = 1           # time-major like the Lstm: x, dy and the result lead with T; h0, c0 [B, H]
    arity = (2, 4)
    param_roles = ROLES
    attrs = {"size": Lstm.attrs["size"], "activation": Lstm.attrs["activation"],
             "cell_activation": Lstm.attrs["cell_activation"]}
    doc = ("The recurrence of an Lstm's gradient, backwards through time: x, h0 and c0 (when the Lstm has "
           "them) and dy [T, B, size] -> [T, B, 9, size]: per step the gradients of the pre-activations of z, "
           "i, f, o, what the step sends back to c[t-1] and h[t-1] (dc0, dh0 at t = 0), and the forward c[t-1], "
           "c[t], h[t-1] (recomputed). FLOPs: 8TBH^2 (the recurrent deltas) + 30TBH (the elementwise chain).")

    def infer(self, a, ins):
        *fwd, dy = ins
        t, b, _, h = _shapes(a, fwd)
        if tuple(dy) != (t, b, h):
            raise ShapeError(f"the gradient {list(dy)} is not the Lstm's output {[t, b, h]}", operand=len(fwd))
        return (t, b, len(BLOCKS), h)

    def param_shapes(self, a, ins, out):
        return _param_shapes(*_shapes(a, ins[:-1]))

    def cost(self, a, ins, out, needs_input_grad=True):
        _, gh, n = _flops(*_shapes(a, ins[:-1]))
        return Cost(gh + 30 * n)

    def reference(self, a, ins, params):
        from .reference import in_compute_dtype
        *fwd, dy = (in_compute_dtype(v) for v in ins)
        x, h0, c0 = (fwd + [None, None])[:3]
        return lstm_grad_gates(x, h0, c0, dy, {r: in_compute_dtype(params[r]) for r in ROLES}, a["activation"],
                               cell_act(a))


@register
class LstmGradData(OpDef):
    name = "lstm_grad_data"
    training_only = True
    arity = (1, 1)
    param_roles = tuple(f"W{g}" for g in GATES)
    attrs = {"wrt": AttrSpec("enum", choices=("x", "h0", "c0"), doc="whose gradient"),
             "input_shape": AttrSpec("shape", doc="its shape")}
    doc = ("The gradient of an Lstm's x (the sum over the gates of the pre-activation gradient times W, in "
           "x's shape; FLOPs 8TBXH), h0 or c0 (the block lstm_grad_gates sends back from t = 0; no FLOPs), "
           "from lstm_grad_gates' result.")

    def bindable_roles(self, a):
        return self.param_roles if a.get("wrt") == "x" else ()

    def infer(self, a, ins):
        t, b, h = _gates_shape(ins[0])
        s = tuple(a["input_shape"])
        if (a["wrt"] == "x" and (len(s) < 3 or s[:2] != (t, b))) or (a["wrt"] != "x" and s != (b, h)):
            raise ShapeError(f"{list(s)} is not the {a['wrt']} of an Lstm with gates gradient {list(ins[0])}",
                             attr="input_shape")
        return s

    def param_shapes(self, a, ins, out):
        if a["wrt"] != "x":
            return {}
        return {r: (ins[0][3], prod(out[2:])) for r in self.param_roles}

    def cost(self, a, ins, out, needs_input_grad=True):
        t, b, h = _gates_shape(ins[0])
        return Cost(8 * t * b * h * prod(out[2:]) if a["wrt"] == "x" else 0)

    def reference(self, a, ins, params):
        from .reference import in_compute_dtype
        gates = in_compute_dtype(ins[0])
        if a["wrt"] != "x":
            return gates[0, :, BLOCKS["dc_prev" if a["wrt"] == "c0" else "dh_prev"]]
        dx = sum(gates[:, :, BLOCKS[g]] @ in_compute_dtype(params[f"W{g}"]) for g in GATES)
        return dx.reshape(tuple(a["input_shape"]))


@register
class LstmGradParam(OpDef):
    name = "lstm_grad_param"
    training_only = True
    unbatched = True
    arity = (1, 2)
    attrs = {"role": AttrSpec("enum", choices=ROLES, doc="the parameter")}
    doc = ("The gradient of one Lstm parameter from lstm_grad_gates' result (and x, for Wz..Wo), summed over "
           "time and batch: W* dA^T x [H, X] (2TBXH FLOPs), R* dA^T h[t-1] [H, H] (2TBH^2), b* dA [H] (TBH), "
           "pi, pf dA * c[t-1] and po dA * c[t] [1, H] (2TBH).")

    def infer(self, a, ins):
        t, b, h = _gates_shape(ins[0])
        r = a["role"]
        if (len(ins) == 2) != (r[0] == "W"):
            raise ShapeError(f"the gradient of {r} reads {'x too' if r[0] == 'W' else 'the gates gradient alone'}",
                             attr="role")
        if r[0] == "W":
            x = ins[1]
            if len(x) < 3 or tuple(x[:2]) != (t, b):
                raise ShapeError(f"{list(x)} is not the input of an Lstm with gates gradient {list(ins[0])}",
                                 operand=1)
            return (h, prod(x[2:]))
        return {"R": (h, h), "b": (h,), "p": (1, h)}[r[0]]

    def cost(self, a, ins, out, needs_input_grad=True):
        t, b, h = _gates_shape(ins[0])
        n = t * b * h
        return Cost({"W": 2 * n * prod(out[1:]), "R": 2 * n * h, "b": n, "p": 2 * n}[a["role"][0]])

    def reference(self, a, ins, params):
        from .reference import in_compute_dtype
        gates = in_compute_dtype(ins[0])
        t, b = gates.shape[:2]
        kind, g = a["role"][0], a["role"][1]
        da = gates[:, :, BLOCKS[g]].reshape(t * b, -1)
        if kind == "W":
            return da.T @ in_compute_dtype(ins[1]).reshape(t * b, -1)
        if kind == "R":
            return da.T @ gates[:, :, BLOCKS["h_prev"]].reshape(t * b, -1)
        if kind == "b":
            return da.sum(0)
        state = gates[:, :, BLOCKS["c" if g == "o" else "c_prev"]].reshape(t * b, -1)
        return (da * state).sum(0, keepdim=True)


# --------------------------------------------------------------------------- the reference, by hand

def cell_act(a: dict) -> str:
    """The cell output's activation of an Lstm's attributes: cell_activation, else activation."""
    return a.get("cell_activation") or a["activation"]


def lstm_states(x, h0, c0, p: dict, act: str = "tanh", cact: str | None = None) -> dict:
    """The forward recurrence (the module docstring's equations): every state, stacked over time, [T, B, H]
    each: za (the block input's pre-activation), z, i, f, o, c, cb = cact(c) (cact: act unless given), y;
    also c_prev (c[t-1]), h_prev (h[t-1]) and the final state h_last, c_last [B, H]."""
    from .reference import activation
    import torch
    t_len, b = x.shape[0], x.shape[1]
    xf = x.reshape(t_len, b, -1)
    hid = p["bz"].shape[0]
    h = h0 if h0 is not None else xf.new_zeros((b, hid))
    c = c0 if c0 is not None else xf.new_zeros((b, hid))
    keep = {k: [] for k in ("za", "z", "i", "f", "o", "c", "cb", "y", "c_prev", "h_prev")}

    def pre(g, t):
        return xf[t] @ p[f"W{g}"].T + h @ p[f"R{g}"].T + p[f"b{g}"]

    for t in range(t_len):
        za = pre("z", t)
        z = activation(za, act)
        i = torch.sigmoid(pre("i", t) + p["pi"] * c)
        f = torch.sigmoid(pre("f", t) + p["pf"] * c)
        c_new = i * z + f * c
        o = torch.sigmoid(pre("o", t) + p["po"] * c_new)
        cb = activation(c_new, cact or act)
        y = o * cb
        for k, v in (("za", za), ("z", z), ("i", i), ("f", f), ("o", o), ("c", c_new), ("cb", cb), ("y", y),
                     ("c_prev", c), ("h_prev", h)):
            keep[k].append(v)
        h, c = y, c_new
    out = {k: torch.stack(v) for k, v in keep.items()}
    out["h_last"], out["c_last"] = h, c
    return out


def lstm_grad_gates(x, h0, c0, dy, p: dict, act: str = "tanh", cact: str | None = None):
    """Backpropagation through time of lstm_states' y against dy [T, B, H], by hand: [T, B, 9, H], the
    blocks of BLOCKS at every step."""
    from .reference import activation, activation_grad   # float64 (or the compute dtype) like their inputs
    import torch
    s = lstm_states(x, h0, c0, p, act, cact)
    dh_next = torch.zeros_like(s["y"][0])     # what step t+1 sends back to h[t]
    dc_next = torch.zeros_like(s["c"][0])     # ... and to c[t]
    steps = []
    for t in reversed(range(x.shape[0])):
        i, f, o, z, cb = s["i"][t], s["f"][t], s["o"][t], s["z"][t], s["cb"][t]
        dh = dy[t] + dh_next
        do = dh * cb * o * (1 - o)
        dc = activation_grad(cb, dh * o, cact or act) + dc_next + do * p["po"]
        df = dc * s["c_prev"][t] * f * (1 - f)
        di = dc * z * i * (1 - i)
        dz = activation_grad(z, dc * i, act)
        dh_next = dz @ p["Rz"] + di @ p["Ri"] + df @ p["Rf"] + do @ p["Ro"]
        dc_next = dc * f + di * p["pi"] + df * p["pf"]
        steps.append(torch.stack([dz, di, df, do, dc_next, dh_next, s["c_prev"][t], s["c"][t], s["h_prev"][t]], 1))
    return torch.stack(steps[::-1])
