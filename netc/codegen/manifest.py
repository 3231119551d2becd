"""What a library's manifest and C launcher are told about a lowered, planned program: its inputs and
outputs (io_entry, io_copy: places in the arena), parameters, schedule with per-launch costs, the
training and rank sections and the segments between communication ops. The interpreter target
(runtime/interp.py) describes its programs with the same functions."""
from __future__ import annotations

from ..diagnostics import NetcError
from ..ops.readings import index_bound_of, label_classes_of, lengths_bound_of


def segment_manifest(low, batch: int, program: str = "forward") -> dict:
    """The manifest's `segmented` section of a program lowered to `low` (lower.Lowered) and run at
    `batch`: its segments ({index, first, launches}: launches [first, first + launches) of the
    program's schedule), its communication ops (`comms`: comm k runs between segment k and k + 1;
    its kind, layer name, attributes, wire and message bytes, and a place per operand and result),
    and a rank program's outputs (`outputs`: places). A place is {name, region (the manifest's
    `regions` names), offset (bytes from the region's start at this batch), shape, strides (elements),
    dtype}. The interpreter target builds the same section (runtime/interp.py), so the distributed
    runtime runs both from it."""
    from .recipes import REGION_NAMES

    def place(p):
        return dict(name=p.name, region=REGION_NAMES[p.region], offset=p.coeff * batch + p.const,
                    shape=list(p.shape), strides=list(p.strides), dtype=p.dtype)
    comms = getattr(low, "comms", [])
    return dict(
        program=program, batch=batch, fixed_batch=bool(getattr(low, "fixed_batch", False)),
        segments=[dict(index=k, first=a, launches=n) for k, (a, n) in enumerate(segments_of(low))],
        comms=[dict(index=k, op=c.op, kind=c.op.split(".", 1)[1], name=c.name, step=c.step, attrs=dict(c.attrs),
                    bytes=c.bytes, message_bytes=c.message_bytes, operands=[place(p) for p in c.operands],
                    results=[place(p) for p in c.results]) for k, c in enumerate(comms)],
        outputs=[place(p) for p in getattr(low, "outputs", [])])


def segments_of(low) -> list:
    cuts = [0] + [c.at for c in getattr(low, "comms", [])] + [len(low.launches)]
    return [(a, b - a) for a, b in zip(cuts, cuts[1:])]


def scalar_role(plan, t, role: str, op, fn: str, who: str) -> dict:
    """Where the program reads its learning rate or dropout seed (an input with that role): checked
    to be a scalar that `fn` can write."""
    from ..memory.model import CONSTANT
    if role not in ("learning_rate", "seed"):
        raise NetcError(f"input '{t.name}' has the role '{role}', which {fn} does not feed", op.loc)
    want = {"learning_rate": ("f32",), "seed": ("i64", "i32")}[role]
    if t.dtype not in want or t.cls != CONSTANT or t.shape:
        raise NetcError(f"the {role.replace('_', ' ')} input '{t.name}' is {t.dtype}{shape_text(t.shape)}: {who} feeds a "
                        f"scalar {' or '.join(want)} (train in f32)", op.loc)
    return dict(name=t.name, offset=plan.buffers[t.buffer].offset + t.offset, bytes=t.size, dtype=t.dtype)


def rank_io(net, plan) -> tuple:
    """(plan tensors of a rank program's data inputs, in plan order, of any class: batch-sized or
    not; {role: {name, offset, bytes, dtype}} of its learning-rate and seed inputs, as training_io)."""
    from ..ir.query import layer_name, network_inputs
    roles, data = {}, set()
    for op in network_inputs(net):
        t = plan.tensor(layer_name(op))
        role = op.attrs.get("role")
        if role is None:
            data.add(t.name)
            continue
        roles[role] = scalar_role(plan, t, role, op, "netc_run_segment", "a compiled rank")
    ins = [plan.tensors[i] for i in plan.inputs if plan.tensors[i].name in data]
    for t in ins:
        if t.strides is not None:
            raise AssertionError(f"network input '{t.name}' is strided")
    return ins, roles


def rank_manifest(net, plan, roles: dict) -> dict:
    """The manifest's `rank` section: which rank's program of which network, and what a training
    program's netc_run_segment feeds (learning rate, seed) and computes (losses, gradients)."""
    from ..memory.model import CONSTANT
    losses = []
    for name in net.attrs.get("losses", []):
        t = plan.tensor(name)
        if t.cls != CONSTANT or t.shape:
            raise NetcError(f"loss '{name}' is {t.dtype}{shape_text(t.shape)}: a compiled rank returns scalar losses")
        losses.append(dict(name=name, offset=plan.buffers[t.buffer].offset + t.offset, dtype=t.dtype))
    return dict(rank=net.attrs["rank"], world=net.attrs["world"], of=net.attrs.get("of"),
                program="training" if "gradients" in net.attrs else "forward",
                learning_rate=roles.get("learning_rate"), seed=roles.get("seed"), losses=losses,
                gradients=dict(net.attrs.get("gradients") or {}), optimizer=net.attrs.get("optimizer"))


def parameters_manifest(module, plan) -> tuple:
    """(the manifest's parameters, param_bytes): every `netc.param` tensor of the plan at its offset
    in the constant arena, with its role (how random values are drawn); optimizer state and running
    statistics (a training library's) say `state` and their initial value `init`."""
    from ..ir.query import param_roles as _param_roles
    from ..memory.model import CONSTANT
    from ..ops.initializers import init_attrs
    roles = _param_roles(module)
    decl = {p.attrs["sym_name"]: p for p in module.params()}
    params, param_bytes = [], plan.arenas[CONSTANT].fixed
    for t in plan.tensors:
        if t.kind != "param":
            continue
        name = t.name[1:]
        off = plan.buffers[t.buffer].offset + t.offset
        d = dict(name=name, shape=list(t.shape), dtype=t.dtype, offset=off, bytes=t.size,
                 role=roles.get(name, "weight"),   # how random values are drawn
                 **({"shares": plan.tensors[t.alias_of].name[1:]} if t.alias == "share" else {}))
        p = decl.get(name)
        if p is not None and "state" in p.attrs:
            d.update(state=p.attrs["state"], init=float(p.attrs.get("value", 0.0)))
        elif p is not None and init_attrs(p.attrs):    # where training starts (ops/initializers.py)
            d["initializer"] = init_attrs(p.attrs)
        params.append(d)
        param_bytes = max(param_bytes, off + t.size)
    return params, param_bytes


def schedule_manifest(net, plan, launches) -> list:
    return [dict(step=L.step, group=L.group, layers=L.layers, kernel=L.kernel_index, **cost)
            for L, cost in zip(launches, launch_costs(net, plan, launches))]


def training_io(net, plan) -> tuple:
    """(plan tensors of a training program's data inputs, {role: {offset, bytes, dtype}} of its own
    scalar inputs: the learning rate and the dropout seed). Data inputs are batch-sized; the
    learning rate must be f32 (netc_train_step takes a float)."""
    from ..ir.query import layer_name, network_inputs
    from ..memory.model import BATCH
    from ..memory.graph import initial_state_inputs
    data, roles = [], {}
    state = initial_state_inputs(net)       # a time-major op's initial state [B, H]: fed whole
    for op in network_inputs(net):
        t = plan.tensor(layer_name(op))
        role = op.attrs.get("role")
        if role is None:
            if t.cls != BATCH and t.name not in state:
                raise NetcError(f"input '{t.name}' has shape {shape_text(t.shape)}, without the batch axis of the network's "
                                f"other inputs ({plan.batch}): a training library takes batch-sized inputs only", op.loc)
            data.append(t)
            continue
        roles[role] = scalar_role(plan, t, role, op, "netc_train_step", "a training library")
    order = [plan.tensors[i].name for i in plan.inputs]
    data.sort(key=lambda t: order.index(t.name))
    return data, roles


def training_manifest(module, net, plan, ins, roles, classes, low) -> dict:
    """The manifest's `training` section: what netc_train_step feeds and computes."""
    from ..memory.model import BATCH, CONSTANT
    from ..ops import lookup
    losses = []
    for name in net.attrs.get("losses", []):
        t = plan.tensor(name)
        if t.cls != CONSTANT or t.shape or t.dtype != "f32":
            raise NetcError(f"loss '{name}' is {t.dtype}{shape_text(t.shape)}: a training library returns f32 scalar losses")
        losses.append(dict(name=name, offset=plan.buffers[t.buffer].offset + t.offset, dtype=t.dtype))
    grads = dict(net.attrs.get("gradients") or {})
    rows, steps = index_bounds(net), lengths_bounds(net)
    trained = set(grads) | {ref.name for op in net.regions[0].ops for role, ref in (op.attrs.get("params") or {}).items()
                            if role == "param" and getattr(lookup(op.name), "side_effects", False)}   # sparse updates
    decl = {p.attrs["sym_name"]: p for p in module.params()}
    used = {t.name[1:] for t in plan.tensors if t.kind == "param"}
    return dict(
        network=plan.network, batch=plan.batch,
        inputs=[io_entry(plan, t, classes.get(t.name), rows=rows.get(t.name), steps=steps.get(t.name)) for t in ins],
        learning_rate=roles.get("learning_rate"), seed=roles.get("seed"), losses=losses,
        optimizer=net.attrs.get("optimizer"), gradients=grads,
        frozen=sorted(n for n in used if n in decl and "state" not in decl[n].attrs and n not in trained
                      and "share_from" not in decl[n].attrs),
        state=sorted(n for n in used if n in decl and "state" in decl[n].attrs),
        memory=dict(plan.summary(), constant_bytes=plan.arenas[CONSTANT].size,
                    batch_bytes_per_sample=plan.arenas[BATCH].size,
                    arena_bytes=const_region(plan) + plan.arenas[BATCH].size * plan.batch),
        splits=low.splits)


def launch_costs(net, plan, launches) -> list[dict]:
    """Per launch, at the compiled batch: `op` (the IR op of its first layer), forward `flops` and
    `bytes` moved, summed over its layers as `netc explain` counts them (ops.layer_cost). Read off
    the IR by layer name, so launches from the lowering cache (no IR ops) get them too. A concat
    copy (lower_network's group "<group>:<input>", one per input copied into its slice) moves its
    input's bytes twice (read, then written) and does no arithmetic."""
    from ..ir.query import layers
    from ..kernels.lowering import lowering_of
    from ..memory.model import BATCH
    from ..ops import layer_cost
    ops = {op.attrs.get("name"): op for op in layers(net)}
    tensors = {t.name: t for t in plan.tensors}
    out = []
    for L in launches:
        first = ops.get(L.layers[0]) if L.layers else None
        flops = nbytes = 0
        if getattr(L, "part", 0):
            pass      # a group's later kernel (the second stage of a reduction): its layer is counted once
        elif first is not None and getattr(lowering_of(first.name), "copies", False):
            base = first.attrs.get("fusion_group") or f"op:{first.attrs.get('name')}"
            src = tensors.get(L.group[len(base) + 1:] if L.group.startswith(base + ":") else L.group.rsplit(":", 1)[-1])
            if src is not None:
                nbytes = 2 * src.size * (plan.batch if src.cls == BATCH else 1)
        else:
            for name in L.layers:
                if name in ops:
                    c, b = layer_cost(ops[name])
                    flops, nbytes = flops + c.flops_fwd, nbytes + b
        out.append(dict(op=first.name if first is not None else None, flops=flops, bytes=nbytes))
    return out


def network_io(net, plan, any_class: bool = False) -> tuple[list, list]:
    """The plan tensors of the network's inputs (in plan order) and outputs (in the order the source
    lists them). Inputs must be batch-sized (any_class: or not, a rank's program, which runs at its
    compiled batch only), except a time-major op's initial state (an Lstm's h0, c0 [B, H] beside its
    sequence [T, B, ...], whose leading T is the batch the compiled targets scale: the state is fed
    whole at every call); an output may have no batch axis (a loss)."""
    from ..ir.query import layer_name, network_inputs, network_outputs
    from ..memory.graph import initial_state_inputs
    from ..memory.model import BATCH, CONSTANT
    state = initial_state_inputs(net)
    ins = [plan.tensors[i] for i in plan.inputs]
    order = {layer_name(op): i for i, op in enumerate(network_outputs(net))}
    outs = sorted((t for t in plan.tensors if t.output), key=lambda t: order.get(t.name, len(order)))
    in_ops = {layer_name(op): op for op in network_inputs(net)}
    for t in ins:
        if t.cls != BATCH and not any_class and t.name not in state:
            op = in_ops.get(t.name)
            raise NetcError(f"input '{t.name}' has shape {shape_text(t.shape)}, without the batch axis of the network's "
                            f"other inputs ({plan.batch}): compiled networks (the .so and --target interp) take batch-sized inputs only "
                            f"([{plan.batch}, ...]; a call feeds 1..{plan.batch} samples)",
                            op.loc if op is not None else None)
    for t in ins + outs:
        if t.cls not in (BATCH, CONSTANT):
            raise NetcError(f"'{t.name}' has a time axis; netc compile handles no recurrent networks")
        if t.strides is not None:
            raise AssertionError(f"network result '{t.name}' is strided")
    return ins, outs


def io_entry(plan, t, classes: int | None = None, regions=("constant", "batch"), const_shift: int = 0,
             rows: int | None = None, steps: int | None = None) -> dict:
    """The manifest's entry of a network input or output. Batch-sized ones ("batched": true) are
    [b, ...] at a call's batch b, sample s at arena_offset_per_sample * b + s * pitch +
    offset_in_sample in their region (memory/plan.py's address; `region` names it, the manifest's
    `regions` gives its byte offset in the arena: the batch arena after the constant region). One
    without a batch axis (a loss reduced over the batch's samples: constant class) has its own shape
    at every batch and lives at `offset` bytes from its region's start (the constant region, like the
    parameters). `classes`: the class count of an input read as a SoftmaxLoss's labels (netc run
    NET.so draws random labels from it, as the reference executor does); `rows`: the row count of
    the table an input's ids index (an embedding's: random ids are drawn below it); `steps`: the step
    count T of the sequences an input gives the lengths of (random lengths are drawn in [1, T])."""
    from ..memory.model import BATCH
    buf = plan.buffers[t.buffer]
    d = dict(name=t.name, shape=list(t.shape), dtype=t.dtype, batched=t.cls == BATCH)
    if getattr(t, "flat", False):   # a sequence's steps flattened, [T*B, ...]: B rows a sample (memory/graph.py)
        d.update(shape=[t.shape[0] * t.shape[1]] + list(t.shape[2:]), rows_per_sample=t.shape[1])
    if t.cls == BATCH:
        d.update(region=regions[1], bytes_per_sample=t.size, arena_offset_per_sample=buf.offset,
                 offset_in_sample=t.offset, pitch=buf.size)
    else:
        d.update(region=regions[0], offset=buf.offset + t.offset - const_shift, bytes=t.size)
    if classes is not None:
        d["classes"] = classes
    if rows is not None:
        d["rows"] = rows
    if steps is not None:
        d["steps"] = steps
    return d


def io_copy(plan, t, layout=None) -> tuple:
    """The launcher's copy of a network input or output (launcher.generate_c): (region, batched,
    bytes per sample times b plus constant, width, pitch); without a batch axis, all its bytes at
    one address of a constant region. `layout` (recipes.ArenaLayout): the regions of the program."""
    from ..memory.model import BATCH
    from .recipes import ArenaLayout
    lay = layout or ArenaLayout()
    buf = plan.buffers[t.buffer]
    if t.cls == BATCH:
        return (lay.batch_region, True, buf.offset, t.offset, t.size, buf.size)
    return (lay.const_region, False, 0, buf.offset + t.offset - lay.const_shift, t.size, t.size)


def label_classes(net) -> dict:
    """{input name: C} for the inputs a classifier loss reads as class labels (ops/readings.py: C is
    the loss's class count, the rule of the reference executor's random inputs)."""
    return _input_readings(net, label_classes_of)


def index_bounds(net) -> dict:
    """{input name: V} for the inputs an op reads as row ids (an embedding's ids in [0, V); the smallest V
    when several read one: ops/readings.py)."""
    return _input_readings(net, index_bound_of)


def lengths_bounds(net) -> dict:
    """{input name: T} for the inputs an op reads as per-sample sequence lengths (in [1, T] of its
    time-major operand [T, B, ...]; the smallest T when several read one: ops/readings.py)."""
    return _input_readings(net, lengths_bound_of)


def _input_readings(net, reading) -> dict:
    from ..ir.query import layer_name, network_inputs
    out = {}
    for op in network_inputs(net):
        if op.results:
            v = reading(net, op.results[0])
            if v is not None:
                out[layer_name(op)] = v
    return out


def shape_text(s) -> str:
    return "[" + ", ".join(str(d) for d in s) + "]"


def kernel_name(L) -> str:
    return L.kernel_name if hasattr(L, "kernel_name") else L.call.kernel.__name__


def constexprs_of(L) -> dict:
    if hasattr(L, "constexprs"):
        return L.constexprs
    return {k: list(v) if isinstance(v, tuple) else v for k, v in L.call.constexprs.items()}


def const_region(plan) -> int:
    from ..memory.model import CONSTANT, align_up
    return align_up(plan.arenas[CONSTANT].size, max(plan.alignment, 256))
