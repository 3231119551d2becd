"""Simple recurrent layers over a whole sequence (time-major), with Brainstorm's semantics: `Recurrent`
(an Elman net, brainstorm/layers/recurrent_layer.py) and `Clockwork` (a clockwork RNN,
brainstorm/layers/clockwork_layer.py), and their gradient, backpropagation through time.

x is [T, B, ...], time first, its trailing feature axes flattened to X (as Brainstorm does); the
state is h = the output, [B, H], H = `size`. With act = `activation` (default tanh, Brainstorm's):

    Ha[t] = x[t] W^T + bias + h[t-1] R^T          the pre-activation (Brainstorm's internal Ha)
    h[t]  = y[t] = act(Ha[t])                     Recurrent
    h[t]  = y[t] = act(Ha[t])   where t = 0 or fmod(t, timing) == 0      Clockwork
            y[t] = y[t-1]       elsewhere (the unit keeps its output: its clock did not tick)

h[-1] is the optional operand h0 [B, H] (Brainstorm's context: the state carried over from a
previous call); without it, 0. At t = 0 every Clockwork unit updates (Brainstorm undoes updates
only from t = 1 on, also when a context is given). t counts from 0 in each call, as Brainstorm's
does, so a carried state does not carry the clock's phase. Parameters, Brainstorm's names, shapes
and order: W [H, X], R [H, H], bias [H]; the Clockwork also timing [H], each unit's period (a float,
compared with fmod as Brainstorm does; netc's random parameters give it 1, 2, 4, ..., 2^j), which
gets no gradient (Brainstorm's computes_no_gradients_for: it is piecewise constant).

Cost (FLOPs, 2 per multiply-add; 4 per activation, as netc's Sigmoid/Tanh):
  forward      2TBXH (the input product) + 2TBH^2 (the recurrent one, also at t = 0, as Brainstorm
               computes it against its zero context) + 6TBH (bias and recurrent sums, activation);
               the Clockwork 1TBH more (the select of the kept units)
  backward     data: 2TBXH (dx, when x needs a gradient) + 2TBH^2 (the recurrent deltas through R, dh0
               among them) + 4TBH (the activation's derivative, the carry); the Clockwork 2TBH more
               (the mask, the kept units' carry); filter: 2TBXH (dW) + 2TBH^2 (dR) + TBH (dbias)

The gradient, split as netc/ops/lstm.py splits the Lstm's: recurrent_grad_steps (clockwork_grad_steps)
recomputes the forward states and runs the recurrence backwards, by hand (finite differences and
torch.autograd check it, tests/test_rnn.py), giving per step the pre-activation gradient dHa[t], what
the step sends back to h[t-1] (at t = 0: dh0) and h[t-1] itself; then rnn_grad_data (dx: dHa W; dh0:
the t = 0 block) and rnn_grad_param (dW, dR, dbias: products and sums over time and batch). Brainstorm's
backward_pass produces no dh0; here it is the derivative's, checked against finite differences with h0
nonzero.

Kernels (netc/kernels/rnn.py, lowered by kernels/rnn_lowering.py), the LSTM's recipe: the input product
of all T steps as one GEMM, the recurrence as one launch looping over the steps with the activation and
the clock's update rule fused after the recurrent product; <type>_grad_steps recomputes the forward into
its result's blocks and runs the recurrence backwards in one more launch (the elementwise chain fused
after the recurrent delta product); dx, dW and dR are GEMMs over the T * B rows, dbias column sums.

The batch is axis 1 (OpDef.batch_axis; <type>_grad_steps' too): the partition pass refuses partition_dim
0 on these layers, and the compiled targets, which scale a network's leading axis, scale T and take h0
[B, H] whole (memory/graph.py initial_state_values).
"""
from __future__ import annotations

from .registry import AttrSpec, Cost, OpDef, ShapeError, prod, register

ACTIVATIONS = ("tanh", "sigmoid", "relu", "none")
ROLES = ("W", "R", "bias")
CLOCK_ROLES = ROLES + ("timing",)
# The blocks of the steps gradient [T, B, 3, H] at step t: dHa[t], what step t sends back to h[t-1]
# (at t = 0: dh0), and the forward h[t-1] (recomputed) that dR reads.
BLOCKS = {"pre": 0, "dh_prev": 1, "h_prev": 2}


def _shapes(kind, a, ins):
    """(T, B, X, H) of a Recurrent's / Clockwork's operand shapes, or ShapeError."""
    h = a["size"]
    if h <= 0:
        raise ShapeError(f"size must be positive, got {h}", attr="size")
    x = ins[0]
    if len(x) < 3:
        raise ShapeError(f"{kind} reads a time-major sequence [T, B, features...] (rank >= 3), got {list(x)}",
                         operand=0)
    if len(ins) == 2 and tuple(ins[1]) != (x[1], h):
        raise ShapeError(f"the initial h must be [B, size] = {[x[1], h]}, got {list(ins[1])}", operand=1)
    return x[0], x[1], prod(x[2:]), h


def _param_shapes(t, b, x, h, clock):
    shapes = {"W": (h, x), "R": (h, h), "bias": (h,)}
    if clock:
        shapes["timing"] = (h,)
    return shapes


def _cost(kind, a, ins, needs_input_grad):
    t, b, x, h = _shapes(kind, a, ins)
    gx, gh, n = 2 * t * b * x * h, 2 * t * b * h * h, t * b * h
    clock = kind == "Clockwork"
    return Cost(gx + gh + (7 if clock else 6) * n, (gx if needs_input_grad else 0) + gh + (6 if clock else 4) * n,
                gx + gh + n)


@register
class Recurrent(OpDef):
    name = "recurrent"
    types = ("Recurrent",)
    arity = (1, 2)
    batch_axis = 1           # time-major: a split along axis 0 would cut the sequence
    context_rows = 1         # Brainstorm's layout: y is (T + 1, B, H), and so is its internal Ha
    layout_internals = ("Ha",)
    state_operands = (1,)    # h0: a caller may carry the final state over (final_state)
    param_roles = ROLES
    clock = False
    attrs = {
        "size": AttrSpec("int", doc="H, the width of the state h (the output)"),
        "activation": AttrSpec("enum", "tanh", ACTIVATIONS,
                               doc="of the pre-activation Ha (Brainstorm's; its 'rel' is relu, 'linear' none)"),
    }
    doc = ("A simple (Elman) recurrent layer over a whole time-major sequence, Brainstorm's Recurrent: x [T, B, ...] "
           "(features flattened), optionally the initial state h0 [B, size]; y[t] = act(x[t] W^T + y[t-1] R^T + bias), "
           "[T, B, size].")

    def infer(self, a, ins):
        t, b, _, h = _shapes(self.type_name, a, ins)
        return (t, b, h)

    def param_shapes(self, a, ins, out):
        return _param_shapes(*_shapes(self.type_name, a, ins), self.clock)

    def cost(self, a, ins, out, needs_input_grad=True):
        return _cost(self.type_name, a, ins, needs_input_grad)

    def reference(self, a, ins, params):
        from .reference import in_compute_dtype
        x, h0 = (in_compute_dtype(v) for v in (list(ins) + [None])[:2])
        p = {r: in_compute_dtype(params[r]) for r in self.param_roles}
        return rnn_states(x, h0, p, a["activation"])["y"]

    def final_state(self, a, ins, params, out):
        """[h] after the last step, y[T-1]: the reference executor carries it into the next call's h0
        (carry_state). A Clockwork's clock restarts at t = 0 in every call (every unit updates there, as in
        Brainstorm, whose context carries the state but not the time), so only periods of 1 make two calls
        equal one."""
        return [out[-1]]

    def gradient(self, g, op, dy):
        """<type>_grad_steps runs the recurrence backwards (dHa at every step); then plain products and
        sums of its blocks: rnn_grad_data for x and h0, rnn_grad_param for W, R and bias (timing has none)."""
        a = self.attrs_of(op)
        x = op.operands[0]
        params = {r: g.param(r) for r in self.param_roles}
        steps = g.emit(f"netc.{self.name}_grad_steps", list(op.operands) + [dy],
                       {"size": a["size"], "activation": a["activation"]}, params=params, tag="grad_steps")
        data = []
        for k, wrt in enumerate(("x", "h0")[:len(op.operands)]):
            if not g.needs(k):
                data.append(None)
                continue
            data.append(g.emit("netc.rnn_grad_data", [steps], {"wrt": wrt, "input_shape": list(op.operands[k].type.shape)},
                               params={"W": params["W"]} if wrt == "x" else None,
                               tag="grad_data" if wrt == "x" else "grad_h0"))
        grads = {r: g.emit("netc.rnn_grad_param", [steps] + ([x] if r == "W" else []), {"role": r}, tag=f"grad_{r}")
                 for r in ROLES if g.needs_param(r)}
        return data, grads


@register
class Clockwork(Recurrent):
    name = "clockwork"
    types = ("Clockwork",)
    param_roles = CLOCK_ROLES
    clock = True
    doc = ("A clockwork RNN over a whole time-major sequence, Brainstorm's Clockwork: Recurrent's step, but at t > 0 "
           "a unit whose fmod(t, timing) != 0 keeps its previous output; x [T, B, ...], optionally h0 [B, size] -> "
           "[T, B, size]. Parameters W, R, bias and timing (the periods; no gradient).")


# --------------------------------------------------------------------------- gradients

@register
class RecurrentGradSteps(OpDef):
    name = "recurrent_grad_steps"
    training_only = True
    batch_axis = 1           # time-major like the layer: x, dy and the result lead with T; h0 [B, H]
    arity = (2, 3)
    param_roles = ROLES
    kind = "Recurrent"
    attrs = dict(Recurrent.attrs)
    doc = ("The recurrence of a Recurrent's gradient, backwards through time: x, h0 (when the layer has it) and dy "
           "[T, B, size] -> [T, B, 3, size]: per step dHa[t] (the pre-activation's gradient), what the step sends back "
           "to h[t-1] (dh0 at t = 0) and the forward h[t-1] (recomputed). FLOPs: 2TBH^2 + 4TBH.")

    def infer(self, a, ins):
        *fwd, dy = ins
        t, b, _, h = _shapes(self.kind, a, fwd)
        if tuple(dy) != (t, b, h):
            raise ShapeError(f"the gradient {list(dy)} is not the {self.kind}'s output {[t, b, h]}", operand=len(fwd))
        return (t, b, len(BLOCKS), h)

    def param_shapes(self, a, ins, out):
        return _param_shapes(*_shapes(self.kind, a, ins[:-1]), self.kind == "Clockwork")

    def cost(self, a, ins, out, needs_input_grad=True):
        t, b, _, h = _shapes(self.kind, a, ins[:-1])
        return Cost(2 * t * b * h * h + (6 if self.kind == "Clockwork" else 4) * t * b * h)

    def reference(self, a, ins, params):
        from .reference import in_compute_dtype
        *fwd, dy = (in_compute_dtype(v) for v in ins)
        x, h0 = (fwd + [None])[:2]
        return rnn_grad_steps(x, h0, dy, {r: in_compute_dtype(params[r]) for r in self.param_roles}, a["activation"])


@register
class ClockworkGradSteps(RecurrentGradSteps):
    name = "clockwork_grad_steps"
    param_roles = CLOCK_ROLES
    kind = "Clockwork"
    doc = ("The recurrence of a Clockwork's gradient, backwards through time (as recurrent_grad_steps; a unit that "
           "keeps its output at step t passes the gradient of y[t] on to y[t-1] and gets no dHa[t]). FLOPs: "
           "2TBH^2 + 6TBH.")


def _steps_shape(steps):
    if len(steps) != 4 or steps[2] != len(BLOCKS):
        raise ShapeError(f"expected a recurrent steps gradient [T, B, {len(BLOCKS)}, H], got {list(steps)}", operand=0)
    return steps[0], steps[1], steps[3]


@register
class RnnGradData(OpDef):
    name = "rnn_grad_data"
    training_only = True
    arity = (1, 1)
    param_roles = ("W",)
    attrs = {"wrt": AttrSpec("enum", choices=("x", "h0"), doc="whose gradient"),
             "input_shape": AttrSpec("shape", doc="its shape")}
    doc = ("The gradient of a Recurrent's or Clockwork's x (dHa W, in x's shape; FLOPs 2TBXH) or h0 (the block the "
           "steps gradient sends back from t = 0; no FLOPs), from <type>_grad_steps' result.")

    def bindable_roles(self, a):
        return self.param_roles if a.get("wrt") == "x" else ()

    def infer(self, a, ins):
        t, b, h = _steps_shape(ins[0])
        s = tuple(a["input_shape"])
        if (a["wrt"] == "x" and (len(s) < 3 or s[:2] != (t, b))) or (a["wrt"] != "x" and s != (b, h)):
            raise ShapeError(f"{list(s)} is not the {a['wrt']} of a recurrent layer with steps gradient {list(ins[0])}",
                             attr="input_shape")
        return s

    def param_shapes(self, a, ins, out):
        return {"W": (ins[0][3], prod(out[2:]))} if a["wrt"] == "x" else {}

    def cost(self, a, ins, out, needs_input_grad=True):
        t, b, h = _steps_shape(ins[0])
        return Cost(2 * t * b * h * prod(out[2:]) if a["wrt"] == "x" else 0)

    def reference(self, a, ins, params):
        from .reference import in_compute_dtype
        steps = in_compute_dtype(ins[0])
        if a["wrt"] != "x":
            return steps[0, :, BLOCKS["dh_prev"]]
        return (steps[:, :, BLOCKS["pre"]] @ in_compute_dtype(params["W"])).reshape(tuple(a["input_shape"]))


@register
class RnnGradParam(OpDef):
    name = "rnn_grad_param"
    training_only = True
    unbatched = True
    arity = (1, 2)
    attrs = {"role": AttrSpec("enum", choices=ROLES, doc="the parameter")}
    doc = ("The gradient of a Recurrent's or Clockwork's W, R or bias from <type>_grad_steps' result (and x, for W), "
           "summed over time and batch: W dHa^T x [H, X] (2TBXH FLOPs), R dHa^T h[t-1] [H, H] (2TBH^2), bias dHa [H] (TBH).")

    def infer(self, a, ins):
        t, b, h = _steps_shape(ins[0])
        r = a["role"]
        if (len(ins) == 2) != (r == "W"):
            raise ShapeError(f"the gradient of {r} reads {'x too' if r == 'W' else 'the steps gradient alone'}",
                             attr="role")
        if r == "W":
            x = ins[1]
            if len(x) < 3 or tuple(x[:2]) != (t, b):
                raise ShapeError(f"{list(x)} is not the input of a recurrent layer with steps gradient {list(ins[0])}",
                                 operand=1)
            return (h, prod(x[2:]))
        return (h, h) if r == "R" else (h,)

    def cost(self, a, ins, out, needs_input_grad=True):
        t, b, h = _steps_shape(ins[0])
        n = t * b * h
        return Cost({"W": 2 * n * prod(out[1:]), "R": 2 * n * h, "bias": n}[a["role"]])

    def reference(self, a, ins, params):
        from .reference import in_compute_dtype
        steps = in_compute_dtype(ins[0])
        t, b = steps.shape[:2]
        da = steps[:, :, BLOCKS["pre"]].reshape(t * b, -1)
        if a["role"] == "W":
            return da.T @ in_compute_dtype(ins[1]).reshape(t * b, -1)
        if a["role"] == "R":
            return da.T @ steps[:, :, BLOCKS["h_prev"]].reshape(t * b, -1)
        return da.sum(0)


# --------------------------------------------------------------------------- the reference, by hand

def clock_ticks(timing, t: int):
    """Which units update at step t ([H] booleans): all at t = 0, else those with fmod(t, timing) == 0
    (Brainstorm's test; a unit whose fmod is not 0, NaN included, keeps its output)."""
    import torch
    if t == 0:
        return torch.ones(timing.shape, dtype=torch.bool, device=timing.device)
    return torch.fmod(torch.full_like(timing, float(t)), timing) == 0


def rnn_states(x, h0, p: dict, act: str = "tanh") -> dict:
    """The forward recurrence (the module docstring's equations; a Clockwork when p has 'timing'): every
    state stacked over time, [T, B, H] each: ha (Ha), a = act(Ha), y, h_prev (h[t-1]); tick [T, H] (which
    units updated) and the final state h_last [B, H]."""
    from .reference import activation
    import torch
    t_len, b = x.shape[0], x.shape[1]
    xf = x.reshape(t_len, b, -1)
    h = h0 if h0 is not None else xf.new_zeros((b, p["bias"].shape[0]))
    keep = {k: [] for k in ("ha", "a", "y", "h_prev", "tick")}
    for t in range(t_len):
        ha = xf[t] @ p["W"].T + p["bias"] + h @ p["R"].T
        a = activation(ha, act)
        tick = clock_ticks(p["timing"], t) if "timing" in p else torch.ones_like(p["bias"], dtype=torch.bool)
        y = torch.where(tick, a, h)
        for k, v in (("ha", ha), ("a", a), ("y", y), ("h_prev", h), ("tick", tick)):
            keep[k].append(v)
        h = y
    out = {k: torch.stack(v) for k, v in keep.items()}
    out["h_last"] = h
    return out


def rnn_grad_steps(x, h0, dy, p: dict, act: str = "tanh"):
    """Backpropagation through time of rnn_states' y against dy [T, B, H], by hand: [T, B, 3, H], the
    blocks of BLOCKS at every step. A unit that kept its output at step t sends dy[t] (and what came
    back to it) on to y[t-1] unchanged and has dHa[t] = 0."""
    from .reference import activation, activation_grad   # float64 (or the compute dtype) like their inputs
    import torch
    s = rnn_states(x, h0, p, act)
    carry = torch.zeros_like(s["y"][0])       # what step t+1 sends back to h[t]
    steps = []
    for t in reversed(range(x.shape[0])):
        d = dy[t] + carry
        tick = s["tick"][t].to(d.dtype)
        dha = activation_grad(s["a"][t], d, act) * tick
        carry = dha @ p["R"] + d * (1 - tick)
        steps.append(torch.stack([dha, carry, s["h_prev"][t]], 1))
    return torch.stack(steps[::-1])
