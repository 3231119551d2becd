"""The CPU target's out= lowerings (issue 28): for each op, the lines of Python the generated step
(runtime/cpu_step.py) runs for it -- torch calls that write straight into the op's planned arena view,
with every reshape, permute and scratch buffer made once when the step is generated, not per step.

An emitter gets an Emit (the op's attributes, the names of its operand, result and parameter views in the
step's namespace, and the build-time tensors behind them) and returns the lines, or None where its fast
form does not cover the case (an asymmetric padding, soft targets, an optimizer option): the step then
calls the op's CPU lowering or its OpDef reference and copies the result into place, so every op keeps
one semantics. Each fast form computes what the reference computes, in f32 (tests/test_cpu_target.py
checks whole steps against the reference executor):

    conv2d               torch's conv2d on channels_last views (bias fused), the activation into the arena; or
                         oneDNN writing into the arena itself (the "into" form: bias fused, nothing allocated)
    conv2d_grad_*        aten's convolution_backward (torch's symmetric padding only)
    maxpool              max_pool2d_with_indices into the arena, the indices kept for maxpool_grad (inference:
                         max_pool2d, no indices, or the maxima of the windows' strided views into the arena)
    maxpool_grad         max_pool2d_with_indices_backward from the forward's indices (the same routing:
                         each window's gradient to its first maximum in row-major window order)
    inner_product        addmm into the arena, the activation in place
    *_grad_data/filter   mm into the arena (views of the weight and input made once)
    bias_grad            sum over the rows into the arena
    activation_grad      relu: threshold_backward (dy where y > 0, else 0; a NaN y passes dy, where the
                         reference gives 0: the forward is NaN already)
    dropout              x * mask into the arena
    dropout_mask         netc's Philox draw (the reference's, bit for bit) with its counters made once
    softmax, softmax_loss(_grad)   torch's softmax / cross_entropy; the gradient as softmax, minus one at
                         the label, over N
    sgd_update           w += -lr g in place (momentum: buf = mu buf + g first); adam_update in place, one
                         scratch buffer per parameter for the denominator
"""
from __future__ import annotations

import torch

CL = torch.channels_last


class Emit:
    """One op as the generator hands it to an emitter."""

    def __init__(self, gen, op, a: dict, ins: list, outs: list, ps: dict, updates: dict, inplace: bool):
        self.gen, self.op, self.a = gen, op, a
        self.ins, self.outs, self.ps, self.updates, self.inplace = ins, outs, ps, updates, inplace

    def t(self, name: str) -> torch.Tensor:
        """The build-time tensor (an arena view) behind a name (a local's: the arena view it stands for)."""
        return self.gen.env[self.gen.local_of.get(name, name)]

    def bind(self, obj, hint: str) -> str:
        """A name for `obj` in the step's namespace (a view made once, a scratch buffer, a constant)."""
        return self.gen.bind(obj, hint)

    def view(self, name: str, fn, hint: str):
        """A view of a named tensor made once (fn(tensor)), or None where it is no view (it would copy)."""
        key = (name, hint)
        if key in self.gen.views:
            return self.gen.views[key]
        t = self.t(name)
        try:
            v = fn(t)
        except RuntimeError:
            return None
        if v.untyped_storage().data_ptr() != t.untyped_storage().data_ptr():
            return None
        self.gen.views[key] = self.bind(v, f"{name.removeprefix('v_')}_{hint}")
        if name in self.gen.external:       # an input the caller holds: the view made at each step, of its tensor
            self.gen.head.append(f"{self.gen.views[key]} = {self.bind(fn, 'view_of')}({name})")
            self.gen.external.add(self.gen.views[key])
        return self.gen.views[key]

    def guarded(self, lines: list, what: str) -> list:
        """`lines` with torch's index errors (a label outside the classes) turned into an error at the op's layer:
        `what` and torch's message."""
        from ..ir.query import layer_name
        from ..ops import lookup
        loc = self.bind(self.op.loc, f"loc_{layer_name(self.op)}")
        msg = f"{lookup(self.op.name).type_name} '{layer_name(self.op)}': {what}"
        return (["try:"] + [f"    {ln}" for ln in lines] + ["except (IndexError, RuntimeError) as _e:",
                f"    raise located(NetcError({msg!r} + f' ({{_e}})'), {loc}) from None"])

    def scalar(self, name: str) -> str:
        """A Python float of a named scalar view (an input: the learning rate), read once at the top of the step."""
        return self.gen.scalar(name)


def _nchw(e, name):
    """The NCHW view of a named NHWC value (channels_last storage), or the local holding it (_local_result)."""
    v = e.view(name, lambda t: t.permute(0, 3, 1, 2), "nchw")
    return e.gen.locals.get(v, v)


def _local_result(e: Emit, out: str):
    """Inference: a name for a convolution's result kept in a Python local of the step instead of being copied into
    its arena view, where its one reader is the next convolution or pooling (which read its NCHW form); a reader
    that calls its reference gets the arena view filled first (CpuProgram). None where that does not hold."""
    readers = e.gen.readers.get(id(e.op.results[0]), [])
    if (not e.gen.frozen or len(readers) != 1 or readers[0].name not in LOCAL_READERS
            or e.outs[0] in e.gen.kept):
        return None
    local = "x_" + out
    e.gen.locals[out], e.gen.local_of[local] = local, out
    e.gen.materialize[e.outs[0]] = (out, local)
    return local


def _torch_pad(e, x_shape, kh, kw):
    from ..ops.eager import torch_padding
    return torch_padding(x_shape, kh, kw, e.a)


def _act_into(act: str, y: str, out: str) -> list | None:
    if act in (None, "none"):
        return [f"{out}.copy_({y})"]
    if act == "relu":
        return [f"torch.clamp_min({y}, 0, out={out})"]
    if act in ("sigmoid", "tanh"):
        return [f"torch.{act}({y}, out={out})"]
    return None


def conv2d(e: Emit):
    if set(e.ps) - {"weight", "bias"}:
        return None
    w = e.t(e.ps["weight"])
    x_shape = tuple(e.t(e.ins[0]).shape)
    pad = _torch_pad(e, x_shape, w.shape[0], w.shape[1])
    x, out = _nchw(e, e.ins[0]), _nchw(e, e.outs[0])
    wp = e.view(e.ps["weight"], lambda t: t.permute(3, 2, 0, 1), "oihw")
    if pad is None or x is None or out is None or wp is None:
        return None
    s = (e.a["strides"][1], e.a["strides"][2])
    b = e.ps.get("bias", "None")
    act = _act_into(e.a["activation"], "_y", out)
    if act is None:
        return None
    weights = {}
    for fmt, hint in ((CL, "packed"), (torch.contiguous_format, "packed_nchw")):
        if e.gen.frozen:        # parameters no step updates: the weight rearranged once (CpuProgram.repack)
            weights[fmt] = e.bind(e.t(wp).contiguous(memory_format=fmt), f"{e.ps['weight']}_{hint}")
        else:
            weights[fmt] = f"{wp}.contiguous(memory_format={'CL' if fmt is CL else 'torch.contiguous_format'})"
    k = [int(w.shape[0]), int(w.shape[1])]
    forms = {"cl": f"torch.conv2d({x}, {weights[CL]}, {b}, {s}, {tuple(pad)})",      # oneDNN on channels_last
             "nchw": f"torch.conv2d({x}.contiguous(), {weights[torch.contiguous_format]}, {b}, {s}, {tuple(pad)})",
             "im2col": f"torch.ops.aten._slow_conv2d_forward({x}.contiguous(), {weights[torch.contiguous_format]}, "
                       f"{k}, {b}, {list(s)}, {list(pad)})"}
    into = _conv_into(e, x, out, weights[CL], b, s, pad)
    # a local only where oneDNN cannot write into the arena view (a torch without it): a local's planned bytes go
    # unused beside it
    local = _local_result(e, out) if into is None else None
    if local is not None:       # the activation in place on torch's result, which stays where it is
        inplace = {"relu": ".clamp_min_(0)", "sigmoid": ".sigmoid_()", "tanh": ".tanh_()"}.get(e.a["activation"], "")
        lines = {n: [f"{local} = {c}.contiguous(memory_format=CL){inplace}"] for n, c in forms.items()}
    else:
        lines = {n: [f"_y = {c}"] + act for n, c in forms.items()}
    if into is not None:
        lines["into"] = into
    key = f"conv2d x{list(e.t(x).shape)} w{list(w.shape)} s{list(s)} p{list(pad)} {e.a['activation']} {local is not None}"
    choice = _fastest(e, key, lines, allocation_free=("into",))
    if e.gen.frozen:            # the rearranged weight the chosen form reads (the other one dropped)
        used, unused = (CL, torch.contiguous_format) if choice in ("cl", "into") else (torch.contiguous_format, CL)
        e.gen.packs.append((weights[used], wp))
        del e.gen.env[weights[unused]]
    return [f"# {choice} (runtime/cpu_tune.py)"] + lines[choice]


def _conv_into(e: Emit, x: str, out: str, w: str, b: str, s, pad) -> list | None:
    """The "into" form: oneDNN's convolution writing straight into the result's arena view (its in-place binary
    post-op, an addition to the view, zeroed first; the bias fused), then the activation in place, so no result is
    allocated and none copied -- a convolution's output is what a training step holds most of. (oneDNN's fused ReLU
    post-op maps a NaN to 0, where the reference keeps it: the activation runs apart.) None where torch has no such op
    (a build without oneDNN) or the operands are not channels_last."""
    act = {None: [], "none": [], "relu": [f"{out}.clamp_min_(0)"], "sigmoid": [f"{out}.sigmoid_()"],
           "tanh": [f"{out}.tanh_()"]}.get(e.a["activation"])
    if (act is None or not torch.backends.mkldnn.is_available()
            or not hasattr(torch.ops.mkldnn, "_convolution_pointwise_")):
        return None
    if not (e.t(out).is_contiguous(memory_format=CL) and e.t(x).is_contiguous(memory_format=CL)):
        return None
    return [f"{out}.zero_()",
            f"torch.ops.mkldnn._convolution_pointwise_({out}, {x}, {w}, {b}, {list(pad)}, {list(s)}, [1, 1], 1, "
            f"'add', 1.0, None, [], None)"] + act


def _fastest(e: Emit, key: str, lines: dict, allocation_free=()) -> str:
    """The name of the fastest of equivalent forms ({name: lines}), each run as a function over the step's namespace
    (its build-time arena views) by runtime/cpu_tune.py."""
    from .cpu_tune import fastest
    fns = {}
    for n, body in lines.items():
        src = "def _form():\n" + "".join(f"    {ln}\n" for ln in body)
        env = dict(e.gen.env)       # a local of the step (_local_result) stands for its arena view here
        env.update({loc: e.gen.env[view] for loc, view in e.gen.local_of.items()})
        exec(compile(src, f"<netc cpu form: {n}>", "exec"), env)      # netc's own text, as the step
        fns[n] = env["_form"]
    return fastest(key, fns, allocation_free)


def _conv_bwd(e: Emit, x_shape, w_shape):
    """(stride, padding) of a convolution gradient with torch's symmetric padding, or None."""
    pad = _torch_pad(e, x_shape, w_shape[0], w_shape[1])
    return None if pad is None else ([e.a["strides"][1], e.a["strides"][2]], list(pad))


def _conv_grads(e: Emit, dz) -> dict:
    """The gradient ops of one convolution, the ones reading the same dz with the same windows: {"data": op,
    "filter": op, "bias": op} (those that exist). Computed together by one convolution_backward, as torch's
    autograd does: the first of them in the schedule computes all, the later ones copy their part into place
    (gen.deferred)."""
    group = {}
    for op in e.gen.readers.get(id(dz), ()):
        role = {"netc.conv2d_grad_data": "data", "netc.conv2d_grad_filter": "filter", "netc.bias_grad": "bias"}.get(op.name)
        k = 1 if role == "filter" else 0
        if role is None or op.operands[k] is not dz or role in group:
            return {}
        if role != "bias" and any(op.attrs.get(x) != e.op.attrs.get(x) for x in ("strides", "padding")):
            return {}
        group[role] = op
    return group


def _conv_backward_all(e: Emit, group: dict, g: str, wp: str | None, x_shape, w_shape) -> list | None:
    """convolution_backward of every gradient in `group` at once: the lines, with the parts of the later ops
    left in locals for them (gen.deferred), or None."""
    geo = _conv_bwd(e, x_shape, w_shape)
    if geo is None:
        return None
    fop = group.get("filter")
    x = None
    if fop is not None:
        x = _nchw(e, e.gen.name_of(fop.operands[0]))
        if x is None or "data" in group and wp is None:
            return None
    xs, ws = (x_shape[0], x_shape[3], x_shape[1], x_shape[2]), (w_shape[3], w_shape[2], w_shape[0], w_shape[1])
    forms = {}
    for name, fmt, copy in (("cl", CL, ""), ("nchw", torch.contiguous_format, ".contiguous()")):
        # the operands as channels_last views (oneDNN takes them as they are) or as contiguous NCHW copies
        xf = (e.bind(torch.empty(xs).contiguous(memory_format=fmt), "shape_of_x") if x is None else x + copy)
        wf = (e.bind(torch.empty(ws).contiguous(memory_format=fmt), "shape_of_w") if wp is None else
              f"{wp}.contiguous(memory_format={'CL' if fmt is CL else 'torch.contiguous_format'})")
        forms[name] = (g + copy, xf, wf)
    mask = [k in group for k in ("data", "filter", "bias")]
    local = "l_" + e.bind(None, f"grads_{e.gen.name_of(e.op.results[0]).removeprefix('v_')}")
    lines = {n: [f"{local} = torch.ops.aten.convolution_backward({gf}, {xf}, {wf}, {[w_shape[3]] if mask[2] else None}, "
                 f"{geo[0]}, {geo[1]}, [1, 1], False, [0, 0], 1, {mask})"] for n, (gf, xf, wf) in forms.items()}
    choice = _fastest(e, f"conv2d_backward x{list(xs)} w{list(ws)} s{geo[0]} p{geo[1]} {mask}", lines)
    for n, operands in forms.items():       # the shape-only stand-ins of the forms not chosen: not kept
        for v in operands[1:] if n != choice else ():
            if v.startswith("shape_of_"):
                del e.gen.env[v]
    lines = [f"# {choice} (runtime/cpu_tune.py)"] + lines[choice]
    for k, role in enumerate(("data", "filter", "bias")):
        if role in group and group[role] is not e.op:
            e.gen.deferred[id(group[role])] = (f"{local}[{k}]", local)
    return lines


def _pending(e: Emit, group: dict) -> dict:
    """The gradients of `group` the step has not computed yet (this op's and the later ones in the schedule)."""
    from ..ir.query import layer_name
    done = set(e.gen.fast) | set(e.gen.slow)
    return {k: op for k, op in group.items() if op is e.op or layer_name(op) not in done}


def conv2d_grad_data(e: Emit):
    if id(e.op) in e.gen.deferred:
        out = _nchw(e, e.outs[0])
        return None if out is None else [f"{out}.copy_({e.gen.deferred[id(e.op)][0]})"]
    w = e.t(e.ps["weight"])
    shape = tuple(e.a["input_shape"])
    g, out = _nchw(e, e.ins[0]), _nchw(e, e.outs[0])
    wp = e.view(e.ps["weight"], lambda t: t.permute(3, 2, 0, 1), "oihw")
    if g is None or out is None or wp is None:
        return None
    group = _pending(e, _conv_grads(e, e.op.operands[0]))
    lines = _conv_backward_all(e, group or {"data": e.op}, g, wp, shape, tuple(w.shape))
    return None if lines is None else lines + [f"{out}.copy_({lines[-1].split(' = ')[0]}[0])"]


def conv2d_grad_filter(e: Emit):
    out = e.view(e.outs[0], lambda t: t.permute(3, 2, 0, 1), "oihw")
    if out is None:
        return None
    if id(e.op) in e.gen.deferred:
        return [f"{out}.copy_({e.gen.deferred[id(e.op)][0]})"]
    kh, kw = e.a["filter"][0], e.a["filter"][1]
    xt, dz = e.t(e.ins[0]), e.t(e.ins[1])
    g = _nchw(e, e.ins[1])
    if g is None:
        return None
    group = _pending(e, _conv_grads(e, e.op.operands[1]))
    wp = None
    if "data" in group:     # the data gradient's weight (its op's parameter), else the data gradient later, alone
        wname = e.gen.param_name(group["data"], "weight")
        wp = None if wname is None else e.view(wname, lambda t: t.permute(3, 2, 0, 1), "oihw")
        if wp is None:
            del group["data"]
    lines = _conv_backward_all(e, group or {"filter": e.op}, g, wp, tuple(xt.shape), (kh, kw, xt.shape[3], dz.shape[3]))
    return None if lines is None else lines + [f"{out}.copy_({lines[-1].split(' = ')[0]}[1])"]


def _cl(e: Emit, name) -> bool:
    """Whether a named NCHW view is channels_last storage with several channels: what torch's pooling kernels
    keep as it is (they restride an out= tensor to the input's suggested format)."""
    return name is not None and e.t(name).shape[1] > 1 and e.t(name).is_contiguous(memory_format=CL)


def _pool_geometry(e: Emit, x_shape):
    """(k, s) of a pooling without padding or crop (torch's windows exactly), or None."""
    from ..ops.geometry import pair
    from ..ops.reference import pads
    kh, kw = pair(e.a["ksize"], "ksize")
    sh, sw = pair(e.a["strides"], "strides")
    _, _, t, b, l, r = pads(x_shape[1], x_shape[2], kh, kw, sh, sw, e.a["padding"])
    return ([kh, kw], [sh, sw]) if (t, b, l, r) == (0, 0, 0, 0) else None


def window_key(op) -> tuple:
    """What makes a maxpool_grad's windows a forward maxpool's: the same input value, window and padding."""
    from ..ops import lookup
    a = lookup(op.name).attrs_of(op)
    return id(op.operands[0]), repr(a["ksize"]), repr(a["strides"]), repr(a["padding"])


def overwritable(ops) -> dict:
    """For the memory plan (plan_memory's overwrite): the max-pooling gradients whose result may be written over
    their input, {layer: [0]} -- those with a forward pooling of the same windows, whose indices the gradient's form
    routes by, reading its input's shape only (where a form does not take the case, the reference computes the
    whole result before it is copied into place: also right over the input)."""
    from ..ir.query import layer_name
    pooled = {window_key(op) for op in ops if op.name in INDEXED_POOLINGS.values()}
    return {layer_name(op): [0] for op in ops if INDEXED_POOLINGS.get(op.name) and window_key(op) in pooled}


def maxpool(e: Emit):
    xt = e.t(e.ins[0])
    geo = _pool_geometry(e, tuple(xt.shape))
    x, out = _nchw(e, e.ins[0]), _nchw(e, e.outs[0])
    if geo is None or not (_cl(e, x) and _cl(e, out)):
        return None
    if e.gen.frozen:        # no gradient reads the argmax: no indices kept
        return _pool_forms(e, x, out, geo)
    yt = e.t(out)
    idx = e.bind(torch.empty(yt.shape, dtype=torch.int64).contiguous(memory_format=CL), "argmax")
    e.gen.pool_indices[window_key(e.op)] = idx
    return [f"torch._C._nn.max_pool2d_with_indices({x}, {geo[0]}, {geo[1]}, [0, 0], [1, 1], False, "
            f"out=({out}, {idx}))"]


def _pool_forms(e: Emit, x: str, out: str, geo) -> list:
    """An inference max pooling: torch's result copied into place ("copy"), or the maxima of the window's strided
    views of the input taken into the result's arena view ("pairwise": nothing allocated; what the reference computes,
    a NaN included, which torch.maximum propagates)."""
    (kh, kw), (sh, sw) = geo
    ho, wo = e.t(out).shape[2], e.t(out).shape[3]
    views = []
    for i in range(kh):
        for j in range(kw):
            sl = lambda t, i=i, j=j: t[:, :, i:i + sh * (ho - 1) + 1:sh, j:j + sw * (wo - 1) + 1:sw]
            v = None if x in e.gen.local_of else e.view(x, sl, f"window{i}{j}")
            views.append(v or f"{x}[:, :, {i}:{i + sh * (ho - 1) + 1}:{sh}, {j}:{j + sw * (wo - 1) + 1}:{sw}]")
    lines = {"copy": [f"{out}.copy_(torch.max_pool2d({x}, {geo[0]}, {geo[1]}))"],
             "pairwise": [f"{out}.copy_({views[0]})"] + [f"torch.maximum({out}, {v}, out={out})" for v in views[1:]]}
    key = f"maxpool x{list(e.t(x).shape)} k{geo[0]} s{geo[1]}"
    choice = _fastest(e, key, lines, allocation_free=("pairwise",))
    return [f"# {choice} (runtime/cpu_tune.py)"] + lines[choice]


def maxpool_grad(e: Emit):
    idx = e.gen.pool_indices.get(window_key(e.op))
    geo = _pool_geometry(e, tuple(e.t(e.ins[0]).shape))
    x, dy, out = _nchw(e, e.ins[0]), _nchw(e, e.ins[1]), _nchw(e, e.outs[0])
    if idx is None or geo is None or not (_cl(e, x) and _cl(e, dy) and _cl(e, out)):
        return None
    return [f"torch.ops.aten.max_pool2d_with_indices_backward.grad_input({dy}, {x}, {geo[0]}, {geo[1]}, [0, 0], "
            f"[1, 1], False, {idx}, grad_input={out})"]


def _rows(e: Emit, name: str):
    """A [N, features] view of a named value, made once (None: it is no view)."""
    return e.view(name, lambda t: t.view(t.shape[0], -1), "rows")


def inner_product(e: Emit):
    if set(e.ps) - {"weight", "bias"} or e.a.get("transpose_weight"):
        return None
    x = _rows(e, e.ins[0])
    out = e.outs[0]
    if x is None or e.a["activation"] not in ("none", "relu", "sigmoid", "tanh", None):
        return None
    w = e.ps["weight"]
    line = (f"torch.addmm({e.ps['bias']}, {x}, {w}, out={out})" if "bias" in e.ps else
            f"torch.mm({x}, {w}, out={out})")
    act = e.a["activation"]
    return [line] + ([] if act in ("none", None) else [f"{out}.{'clamp_min_(0)' if act == 'relu' else act + '_()'}"])


def inner_product_grad_data(e: Emit):
    if e.a.get("transpose_weight"):
        return None
    out = _rows(e, e.outs[0])
    wt = e.view(e.ps["weight"], lambda t: t.t(), "t")
    if out is None or wt is None:
        return None
    return [f"torch.mm({e.ins[0]}, {wt}, out={out})"]


def inner_product_grad_filter(e: Emit):
    xt = e.view(e.ins[0], lambda t: t.view(t.shape[0], -1).t(), "rows_t")
    if xt is None:
        return None
    return [f"torch.mm({xt}, {e.ins[1]}, out={e.outs[0]})"]


def bias_grad(e: Emit):
    if id(e.op) in e.gen.deferred:         # computed with its convolution's other gradients
        return [f"{e.outs[0]}.copy_({e.gen.deferred[id(e.op)][0]})"]
    dz = e.view(e.ins[0], lambda t: t.view(-1, t.shape[-1]), "flat")
    return None if dz is None else [f"torch.sum({dz}, 0, out={e.outs[0]})"]


def activation_grad(e: Emit):
    if e.a["activation"] != "relu" or e.a["negative_slope"]:
        return None
    return [f"torch.ops.aten.threshold_backward.grad_input({e.ins[1]}, {e.ins[0]}, 0, grad_input={e.outs[0]})"]


def dropout(e: Emit):
    """Training: x * mask (its mask op draws netc's Philox mask, by its reference); inference: a copy."""
    if len(e.ins) == 2:
        return [f"torch.mul({e.ins[0]}, {e.ins[1]}, out={e.outs[0]})"]
    return [f"{e.outs[0]}.copy_({e.ins[0]})"]


# Philox4x32's multipliers and key increments (Salmon et al., 2011; Triton's tl.rand, ops/reference.py philox4x32)
PHILOX_M0, PHILOX_M1, PHILOX_W0, PHILOX_W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85


class PhiloxMask:
    """netc.dropout_mask's draw (ops/reference.py dropout_mask, bit for bit: Philox4x32-10 at counters (salt * 2**32
    + i + offset), key the seed's two words, tl.rand's float, 1/keep_prob where it is below keep_prob) with its
    counters made once and the key schedule as scalars, into an f32 out tensor."""

    def __init__(self, a: dict, n: int):
        import numpy as np
        from ..ops.reference import dropout_offsets
        off = dropout_offsets(a["salt"], n, a.get("offset", 0)).view(np.uint64)
        self.lo, self.hi = off & np.uint64(0xFFFFFFFF), off >> np.uint64(32)
        self.keep = np.float32(a["keep_prob"])
        self.scale = float(np.float32(1.0 / float(a["keep_prob"])))

    def __call__(self, seed, out) -> None:
        import numpy as np
        u64, m32 = np.uint64, np.uint64(0xFFFFFFFF)
        seed = int(seed) % 2 ** 64
        k0, k1 = seed & 0xFFFFFFFF, seed >> 32
        c0, c1 = self.lo, self.hi
        c2 = c3 = np.zeros_like(c0)
        for _ in range(10):
            p0, p2 = u64(PHILOX_M0) * c0, u64(PHILOX_M1) * c2
            c0, c1, c2, c3 = (p2 >> u64(32)) ^ c1 ^ u64(k0), p2 & m32, (p0 >> u64(32)) ^ c3 ^ u64(k1), p0 & m32
            k0, k1 = (k0 + PHILOX_W0) & 0xFFFFFFFF, (k1 + PHILOX_W1) & 0xFFFFFFFF
        x = c0.astype(np.uint32).view(np.int32)
        u = np.where(x < 0, ~x, x).astype(np.float32) * np.float32(4.6566127342e-10)
        torch.mul(torch.from_numpy(u < self.keep).reshape(out.shape), self.scale, out=out)


def dropout_mask(e: Emit):
    out = e.t(e.outs[0])
    if out.dtype != torch.float32 or not out.is_contiguous():
        return None
    draw = e.bind(PhiloxMask(e.a, out.numel()), f"draw_{e.outs[0].removeprefix('v_')}")
    return [f"{draw}({e.ins[0]}, {e.outs[0]})"]


def softmax(e: Emit):
    x = _rows(e, e.ins[0])
    return None if x is None else [f"torch.softmax({x}, 1, out={e.outs[0]})"]


def _class_indices(e: Emit, n_ins: int):
    """Whether a softmax loss (its first n_ins operands) reads class indices [N] / [N, 1] against logits
    flattened to [N, C], C > 1 (not per step, no lengths)."""
    from ..ops.loss import per_step
    if e.a.get("lengths") or len(e.op.operands) != n_ins:
        return False
    x, y = e.t(e.ins[0]), e.t(e.ins[1])
    if per_step(tuple(x.shape), tuple(y.shape), False):
        return False
    n, c = x.shape[0], x[0].numel()
    return y.numel() == n and c != 1 and not y.is_floating_point()


def softmax_loss(e: Emit):
    x = _rows(e, e.ins[0])
    if x is None or not _class_indices(e, 2):
        return None
    return e.guarded([f"{e.outs[0]}.copy_(F.cross_entropy({x}, {e.ins[1]}.reshape(-1).long()))"],
                     f"a label outside the classes 0 to {e.t(x).shape[1] - 1}")


def softmax_loss_grad(e: Emit):
    x, out = _rows(e, e.ins[0]), _rows(e, e.outs[0])
    seeded = len(e.op.operands) == 3
    if x is None or out is None or not _class_indices(e, 3 if seeded else 2):
        return None
    n = e.t(x).shape[0]
    minus = e.bind(torch.full((n, 1), -1.0, dtype=e.t(out).dtype), "minus_one")
    lines = [f"torch.softmax({x}, 1, out={out})",
             f"{out}.scatter_add_(1, {e.ins[1]}.reshape(-1, 1).long(), {minus})",
             f"{out}.div_({n})"]
    if seeded:
        lines.append(f"{out}.mul_({e.ins[2]})")
    return e.guarded(lines, f"a label outside the classes 0 to {e.t(x).shape[1] - 1}")


def _plain_update(e: Emit) -> bool:
    a = e.a
    return (a["convention"] == "torch" and a["clip_norm"] <= 0 and not a["clip_low"] < a["clip_high"]
            and a["weight_decay"] * a["wd_scale"] == 0 and len(e.op.operands) == 2)


def sgd_update(e: Emit):
    if not _plain_update(e) or e.a["nesterov"]:
        return None
    g, lr = e.ins[0], e.scalar(e.ins[1])
    w = e.updates["param"]
    step = f"-({lr} * {float(e.a['lr_scale'])!r})"
    if "velocity" not in e.updates:
        return [f"{w}.add_({g}, alpha={step})"]
    v = e.updates["velocity"]
    return [f"{v}.mul_({float(e.a['momentum'])!r}).add_({g})", f"{w}.add_({v}, alpha={step})"]


def adam_update(e: Emit):
    if not _plain_update(e):
        return None
    g, lr = e.ins[0], e.scalar(e.ins[1])
    w, m, v, t = (e.updates[k] for k in ("param", "adam_m", "adam_v", "adam_step"))
    b1, b2, eps = float(e.a["beta1"]), float(e.a["beta2"]), float(e.a["eps"])
    d = e.bind(torch.empty_like(e.t(v)), "denominator")
    return [f"{t}.add_(1)",
            "_s = float(" + t + ")",
            f"{m}.lerp_({g}, {1 - b1!r})",
            f"{v}.mul_({b2!r}).addcmul_({g}, {g}, value={1 - b2!r})",
            f"torch.sqrt({v}, out={d}).div_((1 - {b2!r} ** _s) ** 0.5).add_({eps!r})",
            f"{w}.addcdiv_({m}, {d}, value=-({lr} * {float(e.a['lr_scale'])!r} / (1 - {b1!r} ** _s)))"]


EMITTERS = {"netc.conv2d": conv2d, "netc.conv2d_grad_data": conv2d_grad_data,
            "netc.conv2d_grad_filter": conv2d_grad_filter, "netc.maxpool": maxpool, "netc.maxpool_grad": maxpool_grad,
            "netc.inner_product": inner_product, "netc.inner_product_grad_data": inner_product_grad_data,
            "netc.inner_product_grad_filter": inner_product_grad_filter, "netc.bias_grad": bias_grad,
            "netc.activation_grad": activation_grad, "netc.softmax": softmax, "netc.softmax_loss": softmax_loss,
            "netc.softmax_loss_grad": softmax_loss_grad, "netc.sgd_update": sgd_update, "netc.dropout": dropout,
            "netc.dropout_mask": dropout_mask,
            "netc.adam_update": adam_update}
# the pooling gradients whose form routes by the indices their forward pooling (the value) kept
INDEXED_POOLINGS = {"netc.maxpool_grad": "netc.maxpool"}
# the readers whose emitters take a convolution's result as a local NCHW tensor (_local_result)
LOCAL_READERS = {"netc.maxpool", "netc.conv2d"}
# the emitters whose lines stay right when the result is written over an operand (the plan's in-place steps)
# (maxpool_grad: its form reads its input's shape only, overwritable above)
INPLACE_SAFE = {"netc.activation_grad", "netc.dropout", "netc.maxpool_grad"}
