"""backward: reverse-mode differentiation on the IR -- the gradient ops of a training step.

From a network's scalar losses (ops whose OpDef says `is_loss`; or outputs the caller names, each
then fed a seed gradient through a new input `<output>.grad_seed`), the pass appends, in reverse
schedule order, the ops each forward op's gradient rule emits (OpDef.gradient; the protocol is
documented in ops/registry.py). What it decides, and how:

* Trainable parameters: every parameter the network uses, except immutable ones (`immutable:
  true` on the parameter in .nd, or the caller's freeze list: parameter names, layer names, or
  fnmatch patterns such as `d_*`). A `share_from` alias is trainable with its owner: the alias's
  gradient is reshaped to the owner's shape and summed into it.
* Pruning, before any rule is asked: a value needs a gradient when it depends on a trainable
  parameter (through differentiable ops) and a loss depends on it. Only ops whose result needs a
  gradient, or that own a trainable parameter, are differentiated; inputs never get gradients.
  Every op on such a path without a gradient rule is reported, located and named, in one run.
* Training forms: ops whose semantics change in training (dropout draws a mask from the `seed`
  input, batch norm normalizes with the batch's statistics) are rewritten first
  (OpDef.training_form), whether or not a gradient passes through them.
* Sums: a value read by several ops gets the sum of their contributions, a parameter used by
  several layers, networks or aliases too: a running sum (`netc.elementwise` sum ops named
  `<x>.grad_acc`, the last one `<x>.grad`) that adds each contribution as it is made, so it
  dies at once.
* Names: the gradient of layer `x` is `%x.grad`, of parameter `p` `%p.grad`; other gradient ops
  are `<layer>.<tag>`; each gradient op keeps the location of the op it differentiates and
  records it in `grad_of`. Parameter gradients and losses become network outputs (the optimizer
  pass consumes the gradients).
* Learning rules that are no derivative (OpDef.learning_rule: RBMs' contrastive divergence) give
  their parameters' update directions the same way. An op with such a rule is a root like a loss (a
  network of energy models trains without one); the metrics its rule reports (g.metric: an RBM's
  reconstruction error) become outputs and are listed with the losses, which the runtime reports.

Options (ctx.options["backward"]): freeze (list of names/patterns; freeze_name: what the caller
calls it in messages, default "--freeze"; no_loss_hint: the advice for a network without a loss), outputs (names of outputs to
differentiate instead of the losses), networks (the networks to differentiate; default every
network with a loss), loss ("softmax" or "euclidean": append that loss, fed by a new `label`
input, to a network that has none) and loss_on (the layer it goes on; default the output).
"""
from __future__ import annotations

import fnmatch
from collections import defaultdict

from ..diagnostics import NetcError, did_you_mean
from ..ir.core import STRUCTURAL_OPS, Operation, SymbolRef, TensorType
from ..ops import lookup
from ..ops.registry import result_dtype
from .registry import Pass, register_pass

GRAD_SUFFIX = ".grad"


def is_grad_op(op: Operation) -> bool:
    return "grad_of" in op.attrs


class GradBuilder:
    """What a gradient rule (or a training form) sees of the pass: see ops/registry.py."""

    def __init__(self, pass_, op: Operation, needs: list[bool], trainable_roles: set, sink: list,
                 forward: bool = False):
        self._p, self.op, self._needs, self._roles, self._sink = pass_, op, needs, trainable_roles, sink
        self._forward = forward   # a training form's builder: its ops are forward ops (no `grad_of`)

    def needs(self, i: int) -> bool:
        return self._needs[i]

    def needs_param(self, role: str) -> bool:
        return role in self._roles

    def param(self, role: str) -> SymbolRef:
        return self.op.attrs["params"][role]

    def input(self, role: str, shape=(), dtype: str = "i64"):
        """A network input the training program needs (role "seed": the dropout seed), created once,
        named after its role and marked with it (executors feed inputs by role)."""
        return self._p.program_input(role, list(shape), dtype, self.op.loc, role)

    def state(self, role: str, shape, value: float = 0.0, dtype: str = "f32", layer: str | None = None) -> SymbolRef:
        """A state symbol of this layer (batch norm's running statistics): a module-level
        `netc.param` named '<layer>.<role>', marked `state = role`, initialized to `value`, never
        trained (the memory plan's constant class); bind it in `params=` of the op that writes it.
        `layer`: another name for it (the logical layer, for the copies of a partitioned one)."""
        layer = layer or self.op.attrs.get("name") or self.op.name
        return self._p.state_param(f"{layer}.{role}", role, list(shape), value, dtype, self.op.loc)

    def metric(self, value) -> None:
        """Report a scalar a learning rule computes (an RBM's reconstruction error): an output of the
        training program, listed with its losses (the runtime reports it as the loss)."""
        self._p.metrics.append(value)

    def emit(self, ir_name: str, operands, attrs=None, params=None, tag: str = "grad", results: int = 1):
        layer = self.op.attrs.get("name") or self.op.name
        op = self._p.make_op(ir_name, list(operands), attrs, params, f"{layer}.{tag}", self.op.loc,
                             None if self._forward else layer, results)
        self._sink.append(op)
        return op.results[0] if results == 1 else list(op.results)


class _Program:
    """The state of differentiating one network."""

    def __init__(self, module, net: Operation, names: set, new_inputs: list):
        self.module, self.net, self.names, self.new_inputs = module, net, names, new_inputs
        self.metrics: list = []      # scalars learning rules report (GradBuilder.metric)

    def state_param(self, name, role, shape, value, dtype, loc) -> SymbolRef:
        return state_param(self.module, name, role, shape, value, dtype, loc)

    def unique(self, name: str) -> str:
        n, i = name, 1
        while n in self.names:
            n = f"{name}_{i}"
            i += 1
        self.names.add(n)
        return n

    def program_input(self, name: str, shape: list, dtype: str, loc, role: str):
        return program_input(self.net, name, shape, dtype, loc, role, self.new_inputs, self.unique)

    def make_op(self, ir_name, operands, attrs, params, name, loc, grad_of, results=1) -> Operation:
        opdef = lookup(ir_name)
        if opdef is None:
            raise AssertionError(f"gradient rule emits unregistered op {ir_name}")
        a = dict(attrs or {})
        a["name"] = self.unique(name)
        if grad_of is not None:
            a["grad_of"] = grad_of
        if params:
            a["params"] = dict(params)
        op = Operation(ir_name, operands, result_types=[None] * results, attrs=a, loc=loc)
        full = opdef.attrs_of(op)
        shapes = opdef.infer(full, [v.type.shape for v in operands])  # a ShapeError here is netc's bug
        shapes = [shapes] if results == 1 else list(shapes)
        dtype = result_dtype(opdef, full, [v.type.dtype for v in operands])
        for r, s in zip(op.results, shapes):
            r.type = TensorType(s, dtype)
        return op


@register_pass
class Backward(Pass):
    name = "backward"
    title = "Backward"
    requires = ("materialize-params", "dce")
    summary = "append the gradient ops of a training step: from the losses to every trainable parameter"

    def needed(self, module):
        return not any(is_grad_op(op) for op in module.walk())

    def run(self, module, ctx):
        if ctx.diag.has_errors():
            # the frontend's errors do not stop the pipeline, but a layer it marked invalid has no shape
            # for a gradient rule to work with (a TypeError deep in a shape rule): stop with them
            raise NetcError(list(ctx.diag.diagnostics))
        opts = ctx.options.get("backward", {})
        params = {p.attrs["sym_name"]: p for p in module.params()}
        frozen = resolve_freeze(module, opts.get("freeze") or [], ctx.diag, opts.get("freeze_name", "--freeze"))
        wanted = opts.get("networks")
        nets = module.networks()
        if wanted:
            known = [n.attrs["sym_name"] for n in nets]
            for w in wanted:
                if w not in known:
                    hint = did_you_mean(w, known)
                    raise NetcError(f"no network '{w}' to train" + (f"; did you mean '{hint}'?" if hint else "")
                                    + f" (networks: {', '.join(known)})")
            nets = [n for n in nets if n.attrs["sym_name"] in wanted]
        done = 0
        for net in nets:
            if "gradients" in net.attrs:   # already a training program (IR text printed after backward)
                done += 1
                continue
            if opts.get("loss"):
                append_loss(net, opts["loss"], ctx.diag, opts.get("loss_on"))
            losses = _losses(net, opts.get("outputs"), ctx.diag)
            if losses is None:
                continue
            if not losses and not _has_learning_rule(net):
                if wanted or len(module.networks()) == 1:
                    ctx.diag.error(f"network '{net.attrs['sym_name']}' has no loss to train: "
                                   + opts.get("no_loss_hint", "add a loss layer (SoftmaxLoss, EuclideanLoss) or run "
                                              "with --loss softmax|euclidean, which appends one to the network's "
                                              "output"), net.loc, width=len(net.attrs["sym_name"]))
                continue
            if self._differentiate(module, net, losses, params, frozen, ctx):
                done += 1
        if not done and not ctx.diag.has_errors():
            ctx.diag.error("no network of this file has a loss to train", module.loc)

    # ------------------------------------------------------------------------------------------
    def _differentiate(self, module, net, losses, params, frozen, ctx) -> bool:
        opts = ctx.options.get("backward", {})
        body = net.regions[0].ops
        fwd = [op for op in body if op.name not in STRUCTURAL_OPS and op.name != "netc.input"]
        prog = _Program(module, net, {op.attrs.get("name") for op in body if op.attrs.get("name")}, [])

        def owner(n):
            sf = params[n].attrs.get("share_from")
            return sf.name if sf is not None else n

        used = {ref.name for op in fwd for ref in (op.attrs.get("params") or {}).values() if isinstance(ref, SymbolRef)}
        trainable = {n for n in used if owner(n) not in frozen and n not in frozen
                     and not params[owner(n)].attrs.get("immutable") and not params[n].attrs.get("immutable")
                     and not params[n].attrs.get("state")}

        def trainable_roles(op):
            return {role for role, ref in (op.attrs.get("params") or {}).items()
                    if isinstance(ref, SymbolRef) and ref.name in trainable}

        rules = [op for op in fwd if lookup(op.name) is not None and lookup(op.name).learning_rule is not None
                 and trainable_roles(op)]
        # what depends on a trainable parameter, and what the losses (and the learning rules) depend on
        dep: set = set()
        for op in fwd:
            opdef = lookup(op.name)
            if opdef is None or not opdef.differentiable:
                continue
            if trainable_roles(op) or any(id(v) in dep for v in op.operands):
                dep.update(id(r) for r in op.results)
        reach: set = set()
        stack = [op for op, _ in losses] + rules
        while stack:
            op = stack.pop()
            if id(op) in reach:
                continue
            reach.add(id(op))
            stack.extend(v.owner for v in op.operands)
        todo = [op for op in fwd if id(op) in reach and (id(op.results[0]) in dep if op.results else False)]

        # every op on a gradient path needs a rule: report all that lack one
        missing = [op for op in todo if lookup(op.name).gradient is None and op not in rules]
        for op in missing:
            opdef = lookup(op.name)
            kind = (f"layer type '{op.attrs.get('type')}', which netc does not know" if op.name == "netc.opaque"
                    else f"{opdef.type_name} ({op.name})")
            d = ctx.diag.error(f"cannot differentiate '{op.attrs.get('name')}': no gradient rule for {kind}",
                               op.loc, width=len(op.attrs.get("name") or "x"))
            d.note(f"it lies between the loss{'es' if len(losses) > 1 else ''} "
                   f"{', '.join(repr(o.attrs.get('name')) for o, _ in losses)} and trainable parameters; freeze "
                   f"the parameters before it ({opts.get('freeze_name', '--freeze')}) or remove the layer"
                   + (" (netc run --opaque-as-identity trains through unknown layers as the identity)"
                      if op.name == "netc.opaque" else ""))
        if missing:
            return False

        # training forms: new forward ops go right before the op they serve
        before: dict = defaultdict(list)
        for op in fwd:
            opdef = lookup(op.name)
            if opdef is not None and opdef.training_form is not None:
                opdef.training_form(GradBuilder(prog, op, [False] * len(op.operands), set(), before[id(op)],
                                                forward=True), op)

        # the reverse sweep
        out: list = []
        contrib: dict = defaultdict(list)            # id(value) -> gradient contributions
        pgrad: dict = defaultdict(list)              # owner parameter -> contributions (owner's shape)
        seeds = {}
        for op, _ in losses:
            v = op.results[0]
            # a loss (a scalar) starts from a unit gradient; a named output of another shape from a
            # seed gradient the caller feeds
            seeds[id(op)] = None if (lookup(op.name).is_loss or v.type.shape == ()) else prog.program_input(
                f"{op.attrs.get('name')}.grad_seed", list(v.type.shape), v.type.dtype, op.loc,
                f"grad_seed:{op.attrs.get('name')}")
        final_names: set = set()

        def accumulate(store, key, g, name, loc, grad_of):
            """Add a contribution as it arrives (a running sum, one binary sum op each), so every
            contribution dies at once: n uses of a value or parameter (50 unrolled steps sharing
            a weight) keep one partial sum alive, not n contributions."""
            if not store[key]:
                store[key].append(g)
                return
            acc = prog.make_op("netc.elementwise", [store[key][0], g], {"operation": "sum"}, None,
                               name + "_acc", loc, grad_of)
            out.append(acc)
            store[key][0] = acc.results[0]

        def total(values, name, loc, grad_of):
            if len(values) == 1:
                v = values[0]
                o = v.owner
                if is_grad_op(o) and id(o) not in final_names and len(o.results) == 1:
                    prog.names.discard(o.attrs["name"])
                    o.attrs["name"] = prog.unique(name)
                    final_names.add(id(o))
                return v
            op = prog.make_op("netc.elementwise", values, {"operation": "sum"}, None, name, loc, grad_of)
            out.append(op)
            final_names.add(id(op))
            return op.results[0]

        for op in reversed(fwd):
            if id(op) in reach and op in rules:
                roles = trainable_roles(op)
                dirs = lookup(op.name).learning_rule(GradBuilder(prog, op, [False] * len(op.operands), roles, out), op)
                for role, v in (dirs or {}).items():
                    self._param_contrib(prog, pgrad, params, op, role, v, out, accumulate)
                continue
            if op not in todo:
                continue
            opdef = lookup(op.name)
            layer = op.attrs.get("name") or op.name
            if id(op) in seeds:
                dy = seeds[id(op)]
                cs = contrib.get(id(op.results[0]))
                if cs and dy is not None:
                    # a differentiated output that later ones also read (the caller's outputs include
                    # a value and a loss over it): its seed plus what flowed back from its readers
                    dy = total([dy, *cs], layer + GRAD_SUFFIX, op.loc, layer)
            else:
                cs = contrib.get(id(op.results[0]))
                if not cs:
                    continue  # nothing downstream sent a gradient (a pruned branch)
                dy = total(cs, layer + GRAD_SUFFIX, op.loc, layer)
            needs = [id(v) in dep and id(v.owner) in reach for v in op.operands]
            roles = trainable_roles(op)
            ins, pgs = opdef.gradient(GradBuilder(prog, op, needs, roles, out), op, dy)
            for i, g in enumerate(ins or []):
                if g is not None and needs[i]:
                    v = op.operands[i]
                    vname = v.owner.attrs.get("name") or v.owner.name
                    accumulate(contrib, id(v), g, vname + GRAD_SUFFIX, v.owner.loc, vname)
            for role, g in (pgs or {}).items():
                if g is not None and role in roles:
                    self._param_contrib(prog, pgrad, params, op, role, g, out, accumulate)

        grads, names = [], {}
        for pname in [n for n in params if n in pgrad]:
            p = params[pname]
            grads.append(total(pgrad[pname], pname + GRAD_SUFFIX, p.loc, pname))
            names[pname] = grads[-1].owner.attrs["name"]
        if not grads:
            ctx.diag.error(f"network '{net.attrs['sym_name']}' has no trainable parameter that its loss depends on "
                           f"(all frozen or immutable?)", net.loc, width=len(net.attrs["sym_name"]))
            return False

        # the new body: inputs (old, then new), forward ops with their training-form ops, gradients, outputs
        inputs = [op for op in body if op.name == "netc.input"] + prog.new_inputs
        rest = [op for op in body if op.name in STRUCTURAL_OPS]
        outs = [op for op in rest if op.name == "netc.output"]
        others = [op for op in rest if op.name != "netc.output"]
        new_body = list(inputs)
        for op in fwd:
            new_body.extend(before.get(id(op), ()))
            new_body.append(op)
        new_body += out
        results = _current_outputs(net, fwd, outs)
        for op, _ in losses:
            if op.results and op.results[0] not in results:
                results.append(op.results[0])
        results += [m for m in prog.metrics if m not in results] + grads
        loc = outs[0].loc if outs else net.loc
        new_body.append(Operation("netc.output", results, attrs={}, loc=loc))
        new_body += others
        net.regions[0].block.set_ops(new_body)
        # which value holds each trainable parameter's gradient (the optimizer and executors read it)
        net.attrs["gradients"] = names
        net.attrs["losses"] = [op.attrs.get("name") for op, _ in losses] + [m.owner.attrs["name"] for m in prog.metrics]
        return True

    @staticmethod
    def _param_contrib(prog, pgrad, params, op, role, g, out, accumulate):
        ref = op.attrs["params"][role]
        p = params[ref.name]
        sf = p.attrs.get("share_from")
        if sf is not None:  # an alias of another parameter's storage: its gradient goes to the owner
            oshape = list(params[sf.name].attrs["type"].shape)
            if list(g.type.shape) != oshape:
                layer = op.attrs.get("name") or op.name
                r = prog.make_op("netc.reshape", [g], {"output_shape": oshape}, None,
                                 f"{layer}.{role}.grad_as_{sf.name}", op.loc, layer)
                out.append(r)
                g = r.results[0]
            owner = sf.name
        else:
            owner = ref.name
        accumulate(pgrad, owner, g, owner + GRAD_SUFFIX, params[owner].loc, owner)


def state_param(module, name: str, role: str, shape: list, value: float, dtype: str, loc) -> SymbolRef:
    """A module-level state symbol (optimizer state, running statistics): `netc.param` with
    `state = role` and its initial `value`, placed after the module's other parameters; the same
    symbol again when it exists (a shared layer's, a second network's)."""
    body = module.body
    for op in body:
        if op.name == "netc.param" and op.attrs.get("sym_name") == name:
            if op.attrs.get("state") != role or list(op.attrs["type"].shape) != list(shape):
                raise NetcError(f"the training program needs a state '{name}' ({role}, {list(shape)}), and the "
                                f"module has a parameter of that name that is not it", op.loc)
            return SymbolRef(name)
    p = Operation("netc.param", attrs={"sym_name": name, "type": TensorType(shape, dtype), "state": role,
                                       "value": float(value)}, loc=loc)
    k = max((i + 1 for i, op in enumerate(body) if op.name == "netc.param"), default=0)
    module.regions[0].block.set_ops(body[:k] + [p] + body[k:])
    return SymbolRef(name)


def program_input(net, name: str, shape: list, dtype: str, loc, role: str, new_inputs: list, unique):
    """The input of the training program with this `role` ("seed", "learning_rate", "grad_seed:<layer>"),
    created (in new_inputs, named `name` or a free variant) when the network has none yet."""
    for op in net.regions[0].ops + new_inputs:
        if op.name == "netc.input" and op.attrs.get("role") == role:
            return op.results[0]
    op = Operation("netc.input", result_types=[TensorType(shape, dtype)],
                   attrs={"name": unique(name), "shape": list(shape), "dtype": dtype, "role": role}, loc=loc)
    new_inputs.append(op)
    return op.results[0]


def _has_learning_rule(net) -> bool:
    """Whether a network has an op that learns by a rule that is no derivative (it trains without a loss)."""
    return any(lookup(op.name) is not None and lookup(op.name).learning_rule is not None
               for op in net.regions[0].ops)


def _current_outputs(net, fwd, outs) -> list:
    if outs:
        return list(dict.fromkeys(v for o in outs for v in o.operands))
    read = {id(v) for op in fwd for v in op.operands}
    return [op.results[0] for op in fwd if op.results and id(op.results[0]) not in read]


def _losses(net, names, diag):
    """[(op, seed gradient or None)]: the losses to start from, or the named outputs (each fed by a
    new seed input). None when a named output is missing (reported)."""
    body = net.regions[0].ops
    if names:
        by_name = {op.attrs.get("name"): op for op in body if op.name not in STRUCTURAL_OPS}
        out = []
        for n in names:
            op = by_name.get(n)
            if op is None:
                hint = did_you_mean(n, [k for k in by_name if k])
                diag.error(f"no layer '{n}' to differentiate in network '{net.attrs['sym_name']}'"
                           + (f"; did you mean '{hint}'?" if hint else ""), net.loc)
                return None
            out.append((op, None))
        return out
    return [(op, None) for op in body if lookup(op.name) is not None and lookup(op.name).is_loss]


def resolve_freeze(module, names, diag, what: str = "--freeze") -> set:
    """Parameter names frozen by a freeze list: parameter names, layer names (all their parameters)
    or fnmatch patterns over both. An entry that matches nothing is an error."""
    params = [p.attrs["sym_name"] for p in module.params()]
    by_layer: dict = defaultdict(set)
    for net in module.networks():
        for op in net.regions[0].ops:
            for ref in (op.attrs.get("params") or {}).values():
                if isinstance(ref, SymbolRef):
                    by_layer[op.attrs.get("name")].add(ref.name)
                    by_layer[f"{net.attrs['sym_name']}.{op.attrs.get('name')}"].add(ref.name)
    out = set()
    for n in names:
        hit = {p for p in params if fnmatch.fnmatchcase(p, n)}
        for layer, ps in by_layer.items():
            if layer and fnmatch.fnmatchcase(layer, n):
                hit |= ps
        if not hit:
            hint = did_you_mean(n, params + [k for k in by_layer if k])
            raise NetcError(f"{what} '{n}' names no parameter or layer" + (f"; did you mean '{hint}'?" if hint else "")
                            + f" (parameters: {', '.join(params[:12])}{', ...' if len(params) > 12 else ''})")
        out |= hit
    return out


def append_loss(net, kind: str, diag, on: str | None = None) -> None:
    """`--loss softmax|euclidean [--loss-on LAYER]`: a network without a loss gets one on its output
    (or on LAYER), fed by a new input `label` (class indices [N] for softmax, the output's shape for
    euclidean)."""
    body = net.regions[0].ops
    if any(lookup(op.name) is not None and lookup(op.name).is_loss for op in body):
        return
    fwd = [op for op in body if op.name not in STRUCTURAL_OPS and op.name != "netc.input"]
    if on is not None:
        by = {op.attrs.get("name"): op for op in fwd}
        if on not in by:
            hint = did_you_mean(on, [k for k in by if k])
            raise NetcError(f"--loss-on: network '{net.attrs['sym_name']}' has no layer '{on}'"
                            + (f"; did you mean '{hint}'?" if hint else ""), net.loc)
        outs = [by[on].results[0]]
    else:
        outs = [op for op in _current_outputs(net, fwd, [o for o in body if o.name == "netc.output"])]
    outs = [v for v in outs if v.type.shape and len(v.type.shape) >= 2]
    if not outs:
        raise NetcError(f"--loss: network '{net.attrs['sym_name']}' has no output with a batch axis to put a loss on",
                        net.loc)
    if len(outs) > 1:
        names = ", ".join(v.owner.attrs.get("name") for v in outs)
        raise NetcError(f"--loss: network '{net.attrs['sym_name']}' has {len(outs)} outputs ({names}); the loss "
                        f"goes on one: name it with --loss-on LAYER", net.loc)
    x = outs[0]
    if x.owner.name == "netc.softmax" and kind == "softmax":
        x = x.owner.operands[0]  # the logits: a softmax loss applies its own softmax
    names = {op.attrs.get("name") for op in body}
    n = x.type.shape[0]
    label_name = "label" if "label" not in names else "loss_label"
    if kind == "softmax":
        ltype = TensorType([n], "i32")
        lop_name = "netc.softmax_loss"
    elif kind == "euclidean":
        ltype = TensorType(list(x.type.shape), x.type.dtype)
        lop_name = "netc.euclidean_loss"
    else:
        raise NetcError(f"--loss takes softmax or euclidean, got '{kind}'")
    label = Operation("netc.input", result_types=[ltype], attrs={"name": label_name, "shape": list(ltype.shape),
                                                                  "dtype": ltype.dtype}, loc=net.loc)
    loss = Operation(lop_name, [x, label.results[0]], result_types=[TensorType((), "f32")],
                     attrs={"name": "loss" if "loss" not in names else "appended_loss"}, loc=x.owner.loc)
    inputs = [op for op in body if op.name == "netc.input"]
    rest = [op for op in body if op.name != "netc.input"]
    outs_ops = [op for op in rest if op.name == "netc.output"]
    if outs_ops:
        outs_ops[0].operands.append(loss.results[0])
        i = rest.index(outs_ops[0])
        rest = rest[:i] + [loss] + rest[i:]
    else:
        rest = [op for op in rest if op.name not in STRUCTURAL_OPS] + [loss] + \
               [op for op in rest if op.name in STRUCTURAL_OPS]
    net.regions[0].block.set_ops(inputs + [label] + rest)
    diag.warning(f"--loss {kind}: network '{net.attrs['sym_name']}' has no loss; training minimizes a "
                 f"{'softmax cross-entropy' if kind == 'softmax' else 'Euclidean'} loss on "
                 f"'{x.owner.attrs.get('name')}' against a new input '{label_name}' {ltype}", x.owner.loc,
                 width=len(x.owner.attrs.get("name") or "x"))
