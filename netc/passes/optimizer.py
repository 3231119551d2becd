"""optimizer: one update op per trainable parameter -- the end of a training step.

Runs after `backward`, which leaves each trainable parameter's gradient as a value named in the
network's `gradients` attribute ({parameter: gradient layer}). For every network it differentiated
the pass adds
* the learning-rate input: a scalar f32 `lr` with role "learning_rate" (executors feed it per step,
  from the schedule recorded below);
* with clip_norm, `grad_norm` = netc.global_norm(every gradient), torch's clip_grad_norm_ norm;
* one update op per gradient (ops/optim.py: netc.sgd_update, adam_update, rmsprop_update,
  adagrad_update), named '<param>.update', located at the parameter's declaration (or its first
  use), after every gradient op (a parameter changes only once everything that reads it has run),
  binding `param` and its state: module-level `netc.param` symbols '<param>.<role>' marked `state`
  (backward.state_param), zero-initialized, shared by every network that trains the parameter;
  lr_scale / wd_scale of the parameter's declaration become the op's attributes;
* removes the gradients from the network's `netc.output` (the updates consume them; the executors
  still see every value, `gradients` still names them), and records the resolved optimizer,
  schedule included, as the network's `optimizer` attribute (the runtime reads the schedule).
Frozen and immutable parameters have no gradient, hence no update.

Sparse updates (PaddlePaddle's `sparse_update`): a parameter declared `sparse_update: true` whose
gradient is one embedding's scatter of rows (OpDef.sparse_rows: netc.embedding_grad) gets
netc.sparse_sgd_update(ids, rows, lr) instead, which changes only the rows the ids touch; the dense
gradient op is removed (it is no longer named in `gradients`). That equals the dense SGD step
exactly (duplicate ids add up) only for plain SGD without weight decay or clipping, so with any
other optimizer or option (momentum, Adam: state that moves untouched rows too; PaddlePaddle's lazy
sparse momentum keeps their state instead, which netc does not do), a 16-bit table or a
partitioned program the pass warns and updates the table densely.

Options (ctx.options["optimizer"]): name ("sgd", "momentum", "nesterov", "adam", "rmsprop",
"adagrad"), that optimizer's own options (ops/optim.py OPTIMIZERS: momentum, nesterov, beta1,
beta2, eps, alpha), and for all: weight_decay, clip_norm, clip_low / clip_high (SINGA's value
clipping), convention ("torch" or "singa"), lr (a fixed schedule) or schedule (a dictionary,
ops/optim.py SCHEDULES). Defaults: the module's own optimizer (module.attrs["optimizer"], which a
frontend records: a SINGA job's updater), else plain SGD at a fixed 0.01. Options override it key
by key; naming another optimizer than the module's keeps only its schedule and weight decay.
"""
from __future__ import annotations

from ..diagnostics import NetcError
from ..ir.core import STRUCTURAL_OPS, Operation, SymbolRef, TensorType
from ..ops import lookup
from ..ops.optim import OPTIMIZERS, UPDATE_OPS, OptimizerError, resolve_optimizer  # noqa: F401 (resolve_optimizer: API)
from .backward import program_input, state_param
from .partition.common import is_partitioned
from .registry import Pass, register_pass



@register_pass
class Optimizer(Pass):
    name = "optimizer"
    title = "Optimizer"
    requires = ("backward",)
    summary = "append one update op per trainable parameter (SGD, momentum, Nesterov, Adam, RMSProp, AdaGrad)"

    def needed(self, module):
        return not any(op.name in UPDATE_OPS for op in module.walk())

    def run(self, module, ctx):
        options = ctx.options.get("optimizer") or {}
        try:
            spec = resolve_optimizer(module.attrs.get("optimizer"), options)
        except OptimizerError as e:
            # a problem in the optimizer the file records (IR text's module attribute, which its reader
            # does not check) is at that attribute; one in the command line's options stays unlocated
            if module.attrs.get("optimizer") is not None and (e.key is None or e.key not in options):
                for d in e.diagnostics:
                    if d.loc is None or not d.loc.line:
                        d.loc = module.attr_loc("optimizer")
            raise
        params = {p.attrs["sym_name"]: p for p in module.params()}
        for net in module.networks():
            grads = net.attrs.get("gradients")
            if grads and not any(op.name in UPDATE_OPS for op in net.regions[0].ops):
                _append_updates(module, net, grads, params, spec, ctx.diag)


def _update_attrs(spec: dict, param: Operation) -> dict:
    """The update op's attributes: the optimizer's own options, weight decay, and what differs from
    the defaults (the parameter's lr_scale / wd_scale, clipping, SINGA's convention)."""
    name = spec["name"]
    _, own = OPTIMIZERS[name]
    a = {k: spec[k] for k in own if k != "nesterov"}
    if name == "nesterov" or spec.get("nesterov"):
        a["nesterov"] = True
    a["weight_decay"] = spec["weight_decay"]
    for k in ("lr_scale", "wd_scale"):
        v = param.attrs.get(k, 1.0)
        if v is not None and float(v) != 1.0:
            a[k] = float(v)
    if spec["clip_norm"] > 0:
        a["clip_norm"] = spec["clip_norm"]
    if spec["clip_low"] < spec["clip_high"]:
        a["clip_low"], a["clip_high"] = spec["clip_low"], spec["clip_high"]
    if spec["convention"] != "torch":
        a["convention"] = spec["convention"]
    return a


def _sparse_rows(net, p, g, spec: dict):
    """(ids, rows) of a sparse update of parameter `p` (declared `sparse_update: true`) from its
    gradient `g`, or why the dense update it falls back to is needed (a string)."""
    d = lookup(g.owner.name) if g.owner is not None else None
    rows = getattr(d, "sparse_rows", None)
    if rows is None:
        return "its gradient is not one embedding's scatter of rows (a table several layers read, or no table)"
    if spec["name"] != "sgd" or spec["momentum"] != 0 or spec.get("nesterov"):
        return (f"the optimizer is {spec['name']}: netc's sparse update is plain SGD's (momentum and adaptive "
                f"state would move every row)")
    if spec["weight_decay"] * float(p.attrs.get("wd_scale", 1.0) or 0.0) != 0:
        return "weight decay changes every row"
    if spec["clip_norm"] > 0 or spec["clip_low"] < spec["clip_high"]:
        return "gradient clipping needs the summed gradient"
    if p.attrs["type"].dtype != "f32":
        return f"the table is {p.attrs['type'].dtype} (the sparse update adds in place with f32 atomics)"
    if is_partitioned(net):
        return "the program is partitioned (its workers' gradients are summed densely)"
    if any(v is g for op in net.regions[0].ops if op.name != "netc.output" for v in op.operands):
        return "another op reads its gradient"
    return rows(g.owner)


def _append_updates(module, net, grads: dict, params: dict, spec: dict, diag=None):
    body = net.regions[0].ops
    by_name = {op.attrs.get("name"): op for op in body if op.attrs.get("name")}
    names = set(by_name)

    def unique(n):
        m, i = n, 1
        while m in names:
            m = f"{n}_{i}"
            i += 1
        names.add(m)
        return m

    new_inputs: list = []
    lr = program_input(net, "lr", [], "f32", net.loc, "learning_rate", new_inputs, unique)
    missing = [g for g in grads.values() if g not in by_name or not by_name[g].results]
    if missing:
        raise NetcError(f"network '{net.attrs.get('sym_name')}': its `gradients` attribute names "
                        f"{', '.join(map(repr, missing))}, which the network does not compute (removed by dce? "
                        f"run backward and optimizer together)", net.loc)
    values = {p: by_name[g].results[0] for p, g in grads.items()}
    ops: list = []
    norm = None
    if spec["clip_norm"] > 0:
        gs = list(values.values())
        nop = Operation("netc.global_norm", gs, result_types=[TensorType((), gs[0].type.dtype)],
                        attrs={"name": unique("grad_norm")}, loc=net.loc)
        ops.append(nop)
        norm = nop.results[0]
    ir_name = OPTIMIZERS[spec["name"]][0]
    opdef = lookup(ir_name)
    dropped: set = set()     # dense gradients a sparse update replaces
    for pname, g in values.items():
        p = params[pname]
        loc = p.loc if p.loc is not None and p.loc.file != "<unknown>" else _first_use(body, pname, net.loc)
        if p.attrs.get("sparse_update"):
            sparse = _sparse_rows(net, p, g, spec)
            if isinstance(sparse, str):
                if diag is not None:
                    diag.warning(f"parameter '{pname}' has sparse_update, but netc updates it densely: {sparse}",
                                 loc, width=len(pname))
            else:
                a = {"num_embeddings": int(p.attrs["type"].shape[0]), "name": unique(f"{pname}.update"),
                     "params": {"param": SymbolRef(pname)}}
                if float(p.attrs.get("lr_scale", 1.0) or 0.0) != 1.0:
                    a["lr_scale"] = float(p.attrs["lr_scale"])
                ops.append(Operation("netc.sparse_sgd_update", [*sparse, lr], result_types=[], attrs=a, loc=loc))
                dropped.add(id(g.owner))
                continue
        attrs = _update_attrs(spec, p)
        full = {k: s.default for k, s in opdef.attrs.items() if not s.required}
        full.update(attrs)
        operands = [g, lr] + ([norm] if norm is not None else [])
        shape = list(p.attrs["type"].shape)
        if list(g.type.shape) != shape:
            raise AssertionError(f"gradient of '{pname}' has shape {list(g.type.shape)}, the parameter {shape}")
        opdef.infer(full, [v.type.shape for v in operands])   # a ShapeError here is netc's bug
        bound = {"param": SymbolRef(pname)}
        for role, sshape in opdef.state_shapes(full, shape).items():
            bound[role] = state_param(module, f"{pname}.{role}", role, list(sshape), 0.0, p.attrs["type"].dtype, loc)
        attrs["name"] = unique(f"{pname}.update")
        attrs["params"] = bound
        ops.append(Operation(ir_name, operands, result_types=[], attrs=attrs, loc=loc))

    # the new body: inputs (old, then new), the rest, the updates, then the structural ops
    grad_ids = {id(v) for v in values.values()}
    inputs = [op for op in body if op.name == "netc.input"] + new_inputs
    compute = [op for op in body if op.name not in STRUCTURAL_OPS and op.name != "netc.input" and id(op) not in dropped]
    rest = [op for op in body if op.name in STRUCTURAL_OPS]
    for o in rest:
        if o.name == "netc.output":
            o.operands = [v for v in o.operands if id(v) not in grad_ids]
    net.regions[0].block.set_ops(inputs + compute + ops + rest)
    net.attrs["optimizer"] = spec
    if dropped:   # a sparse update's table has no dense gradient to name
        net.attrs["gradients"] = {p: v for p, v in grads.items() if id(values[p].owner) not in dropped}


def _first_use(body, pname, default):
    for op in body:
        for ref in (op.attrs.get("params") or {}).values():
            if isinstance(ref, SymbolRef) and ref.name == pname:
                return op.loc
    return default
