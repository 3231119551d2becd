"""The reference executor: runs a shape-inferred network op by op with each OpDef's reference()
(plain torch, float64 by default). It is the oracle the interpreter target and the compiled .so
are checked against, so it is deliberately naive: no memory plan, no fusion, inference semantics
(dropout is the identity), every value kept.

Inputs and parameters the caller does not give are random and deterministic: each tensor has its
own generator seeded from (seed, its name), so a value does not depend on what else is generated.
Parameters are drawn well-conditioned (weights ~ N(0, 1/fan_in), biases and shifts ~ N(0, 0.1^2),
scales ~ 1 + N(0, 0.1^2)) whatever the file's `init` says: an oracle wants every value to matter
(a constant-0 bias would hide a kernel that forgets it). Integer inputs read as labels by a
SoftmaxLoss are valid class indices [0, C) (or one-hot rows, for [N, C] labels); integer inputs read
as an embedding's ids are valid rows [0, V).
"""
from __future__ import annotations

import zlib

import torch

from ..diagnostics import NetcError, did_you_mean
from ..ir.core import Module, Operation, SymbolRef
from ..ir.query import layer_name as _name, layers as _layers, network_inputs, network_outputs  # noqa: F401
from ..ir.query import param_roles as _param_roles  # noqa: F401
from ..ops import lookup, prod
from ..ops.registry import not_runnable
from ..ops.initializers import init_tensor
from ..ops.readings import index_bound_of, label_classes_of, label_reading_of, lengths_bound_of  # noqa: F401

INT_DTYPES = {"i8": torch.int8, "i32": torch.int32, "i64": torch.int64}


def seeded_generator(seed: int, name: str) -> torch.Generator:
    return torch.Generator().manual_seed((seed * 1_000_003 + zlib.crc32(name.encode())) % (2 ** 63))


def network_of(module: Module, network) -> Operation:
    if isinstance(network, Operation):
        return network
    nets = module.networks()
    if not nets:
        raise NetcError("the module has no network to run")
    if network is None:
        return nets[0]
    try:
        return module.network(network)
    except KeyError:
        names = [n.attrs.get("sym_name") for n in nets]
        hint = did_you_mean(network, names)
        raise NetcError(f"no network '{network}'" + (f"; did you mean '{hint}'?" if hint else "")
                        + f" (networks: {', '.join(names)})")


def random_param(name: str, shape: tuple, role: str, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    z = torch.randn(shape, generator=seeded_generator(seed, "@" + name), dtype=torch.float64)
    if role in ("bias", "shift"):
        t = 0.1 * z
    elif role == "scale":
        t = 1.0 + 0.1 * z
    elif role == "timing":   # a Clockwork's periods (ops/rnn.py): unit j ticks every 2^j steps
        t = 2.0 ** torch.arange(prod(shape), dtype=torch.float64).reshape(shape)
    else:
        fan_in = prod(shape[:-1]) if len(shape) > 1 else 1
        t = z / max(fan_in, 1) ** 0.5
    return t.to(dtype)


def random_lengths(name: str, shape, steps: int, seed: int = 0, dtype=torch.int64) -> torch.Tensor:
    """The random value of the lengths input `name` of sequences padded to `steps`: lengths in [1, steps]."""
    return torch.randint(1, steps + 1, tuple(shape), generator=seeded_generator(seed, name)).to(dtype)


def random_ids(name: str, shape, bound: int, seed: int = 0, dtype=torch.int64) -> torch.Tensor:
    """The random value of the ids input `name` of an embedding over `bound` rows: ids in [0, bound)."""
    return torch.randint(0, bound, tuple(shape), generator=seeded_generator(seed, name)).to(dtype)


def random_input(net: Operation, op: Operation, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    v = op.results[0]
    shape, name = v.type.shape, _name(op)
    tdtype = INT_DTYPES.get(v.type.dtype, dtype)
    reading = label_reading_of(net, v)
    if reading is not None:
        return random_labels(name, shape, reading[0], seed, tdtype, ids=reading[1])
    ids = index_bound_of(net, v)
    if ids is not None:
        return random_ids(name, shape, ids, seed, tdtype)
    steps = lengths_bound_of(net, v)
    if steps is not None:
        return random_lengths(name, shape, steps, seed, tdtype)
    if v.type.dtype in INT_DTYPES:
        return torch.randint(0, 10, shape, generator=seeded_generator(seed, name)).to(tdtype)
    return random_float_input(name, shape, seed, dtype)


def random_labels(name: str, shape, classes: int, seed: int = 0, dtype=torch.int64, ids: bool | None = None) -> torch.Tensor:
    """The random value of the labels input `name` of a SoftmaxLoss over `classes` classes: class
    indices for [N] / [N, 1] (or where `ids` says so: a per-step loss's [T, B]), one-hot rows otherwise
    (what random_input draws for it; a compiled .so draws with this, from the class count its manifest
    records)."""
    g = seeded_generator(seed, name)
    shape = tuple(shape)
    if ids or prod(shape[1:]) == 1 or classes == 1:   # class indices [N] / [N, 1]
        return torch.randint(0, classes, shape, generator=g).to(dtype)
    idx = torch.randint(0, classes, (prod(shape) // classes,), generator=g)   # a row per sample (per step)
    return torch.nn.functional.one_hot(idx, classes).reshape(shape).to(dtype)


def random_float_input(name: str, shape, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    """The random value of the floating input `name` (what random_input draws for it; a compiled
    .so, which has no IR, draws its random inputs with this)."""
    return torch.randn(tuple(shape), generator=seeded_generator(seed, name), dtype=torch.float64).to(dtype)


# -- feeding and checking -----------------------------------------------------------------------

def _shape_str(s) -> str:
    return "[" + ", ".join(str(d) for d in s) + "]"


def feed_tensor(t, want_shape, want_dtype, what: str, device) -> torch.Tensor:
    if not torch.is_tensor(t):
        try:
            t = torch.as_tensor(t)
        except (TypeError, ValueError, RuntimeError) as e:
            raise NetcError(f"{what}: cannot use a value of type {type(t).__name__} as a tensor ({e})")
    if tuple(t.shape) != tuple(want_shape):
        raise NetcError(f"{what} has shape {_shape_str(t.shape)}, but the network expects "
                        f"{_shape_str(want_shape)}")
    if t.dtype == torch.bool or t.is_complex():
        raise NetcError(f"{what} has dtype {str(t.dtype).replace('torch.', '')}, not a real number type")
    if not want_dtype.is_floating_point and t.is_floating_point():
        if not torch.equal(t, t.round()):
            raise NetcError(f"{what} must hold integers (it is an integer input), got fractional values")
    return t.to(device=device, dtype=want_dtype)


def module_params(module: Module, params: dict | None = None, seed: int = 0, dtype=torch.float64,
                  device="cpu", names=None) -> dict[str, torch.Tensor]:
    """Every parameter tensor by its `netc.param` sym_name: given ones checked and converted, the
    rest random. A share_from alias is its owner's tensor (reshaped to the alias's shape). `names`
    limits the result to those parameters (and their owners)."""
    from .io import about
    with about(params):   # errors about a parameter file name it
        return _module_params(module, params, seed, dtype, device, names)


def _module_params(module, params, seed, dtype, device, names) -> dict[str, torch.Tensor]:
    decl = {p.attrs["sym_name"]: p for p in module.params() if "type" in p.attrs}
    params = dict(params or {})
    if module.attrs.get("onnx_source"):     # an ONNX model's own values, where none are given
        from ..frontend.onnx import params_of
        for k, v in params_of(module.attrs["onnx_source"]).items():
            if k in decl:
                params.setdefault(k, torch.tensor(v))
    for k in params:
        if k not in decl:
            hint = did_you_mean(k, decl)
            raise NetcError(f"unknown parameter '{k}'" + (f"; did you mean '{hint}'?" if hint else ""))
    roles = _param_roles(module)
    want = set(decl) if names is None else set(names) & set(decl)
    owner = {n: (decl[n].attrs["share_from"].name if "share_from" in decl[n].attrs else n) for n in decl}
    want |= {owner[n] for n in want}
    out: dict[str, torch.Tensor] = {}
    for n in [n for n in decl if n in want and owner[n] == n]:
        shape = decl[n].attrs["type"].shape
        if n in params:
            out[n] = feed_tensor(params[n], shape, dtype, f"parameter '{n}'", device)
        elif "state" in decl[n].attrs:   # optimizer state, running statistics: their initial value
            out[n] = torch.full(tuple(shape), float(decl[n].attrs.get("value", 0.0)), dtype=dtype, device=device)
        else:   # the parameter's init (ops/initializers.py), else netc's draw by role
            try:
                t = init_tensor(n, shape, decl[n].attrs, seed, dtype)
            except ValueError as e:
                raise NetcError(str(e), decl[n].loc) from None
            out[n] = (t if t is not None else random_param(n, shape, roles.get(n, "weight"), seed, dtype)).to(device)
    for n in [n for n in decl if n in want and owner[n] != n]:
        o, shape = owner[n], decl[n].attrs["type"].shape
        if o not in out:
            raise NetcError(f"parameter '{n}' shares from '{o}', which has no storage")
        out[n] = out[o].reshape(shape)
        if n in params and not torch.equal(feed_tensor(params[n], shape, dtype, f"parameter '{n}'", device), out[n]):
            raise NetcError(f"parameter '{n}' is an alias of '{o}' (share_from); give the owner's value, "
                            f"not a different one for the alias")
    return out


# -- the executor -------------------------------------------------------------------------------

def run_reference(module: Module, inputs: dict | None = None, params: dict | None = None, network=None,
                  device="cpu", dtype=torch.float64, seed: int = 0,
                  intermediates: bool = False, states: dict | None = None, impls: dict | None = None) -> dict[str, torch.Tensor]:
    """Run one network of a shape-inferred module (after the default pipeline) with the ops'
    reference semantics. `inputs` by input name and `params` by parameter sym_name; None (or a
    missing parameter) means random, seeded by `seed`. Given inputs must be all of them.
    Returns the network's outputs by layer name, or every value (inputs included, in schedule
    order) with intermediates=True. Floating values are `dtype`; integer inputs keep theirs. `states`:
    as execute's (the final states to carry into the next call, by input name)."""
    net = network_of(module, network)
    layers = _layers(net)
    for op in layers:  # a shape that is only Paleo's bookkeeping number cannot be computed
        why = not_runnable(op)
        if why:
            raise NetcError(why, op.loc)
    in_ops = network_inputs(net)
    in_names = [_name(op) for op in in_ops]
    if inputs is not None:
        for k in inputs:
            if k not in in_names:
                hint = did_you_mean(k, in_names)
                raise NetcError(f"network '{net.attrs.get('sym_name')}' has no input '{k}'"
                                + (f"; did you mean '{hint}'?" if hint else "")
                                + f" (inputs: {', '.join(in_names)})")
        missing = [n for n in in_names if n not in inputs]
        if missing:
            raise NetcError(f"missing input{'s' if len(missing) > 1 else ''} {', '.join(repr(m) for m in missing)} "
                            f"of network '{net.attrs.get('sym_name')}' (give every input, or none for random ones)")
    used = {ref.name for op in layers for ref in (op.attrs.get("params") or {}).values()
            if isinstance(ref, SymbolRef)}
    ptensors = module_params(module, params, seed, dtype, device, names=used)
    feed = {}
    for op in in_ops:
        v, name = op.results[0], _name(op)
        want = INT_DTYPES.get(v.type.dtype, dtype)
        feed[name] = (feed_tensor(inputs[name], v.type.shape, want, f"input '{name}'", device) if inputs is not None
                      else random_input(net, op, seed, dtype).to(device))
    named = execute(net, feed, ptensors, dtype, states=states, impls=impls)
    if intermediates:
        return named
    return {_name(op): named[_name(op)] for op in network_outputs(net)}


def carried_inputs(net: Operation) -> dict:
    """{input name: (recurrent op, k)} for every network input that feeds the initial state of a recurrent op
    (OpDef.state_operands; k indexes them): what carry_state feeds from the previous call's final state. A state
    operand computed by a layer is not carried; an input feeding two state operands is an error."""
    out = {}
    for op in _layers(net):
        d = lookup(op.name)
        for k, i in enumerate(d.state_operands if d is not None else ()):
            if i < len(op.operands) and op.operands[i].owner.name == "netc.input":
                name = _name(op.operands[i].owner)
                if name in out:
                    raise NetcError(f"input '{name}' is the initial state of two recurrent layers ('{_name(out[name][0])}' "
                                    f"and '{_name(op)}'): their final states cannot both be carried into it", op.loc)
                out[name] = (op, k)
    return out


def with_carried_state(net: Operation, inputs: dict | None, state: dict, dtype=torch.float64,
                       device="cpu") -> dict:
    """`inputs` with every carried state input (carried_inputs) they lack: `state`'s value, or zeros (no
    previous call: Brainstorm's empty context). Inputs given explicitly win."""
    out = dict(inputs or {})
    for name, (op, k) in carried_inputs(net).items():
        if name not in out:
            shape = op.operands[lookup(op.name).state_operands[k]].type.shape
            out[name] = state[name] if name in state else torch.zeros(shape, dtype=dtype, device=device)
    return out


def _keep_final_state(op, opdef, values: dict, ptensors: dict, states: dict, carried: dict) -> None:
    mine = {name: k for name, (o, k) in carried.items() if o is op}
    if not mine:
        return
    refs = {role: ref for role, ref in (op.attrs.get("params") or {}).items() if isinstance(ref, SymbolRef)}
    final = opdef.final_state(opdef.attrs_of(op), [values[id(x)] for x in op.operands],
                              {role: ptensors[ref.name] for role, ref in refs.items()}, values[id(op.results[0])])
    for name, k in mine.items():
        states[name] = final[k].detach().clone()


def execute(net: Operation, feed: dict, ptensors: dict, dtype=torch.float64, only=None,
            states: dict | None = None, impls: dict | None = None) -> dict[str, torch.Tensor]:
    """Run every op of a network in schedule order with its reference semantics: `feed` the
    input tensors by name (already checked), `ptensors` every parameter and state tensor by
    sym_name. Ops with side effects (optimizer updates, running statistics) write their new values
    into `ptensors`' tensors in place, so share_from aliases (views of their owner) follow.
    Returns every value by layer name (the i-th result of a multi-result op as 'name#i' too).
    `only(op)`, when given, says which ops run (the forward part of a training program). `states`, when
    a dict, receives the final state of each recurrent op whose initial state a network input feeds, by
    that input's name (carried_inputs), computed as the op runs (before any update of its parameters).
    `impls` ({op name: fn(attrs, operands, params)}) replaces an op's reference by a function of the same
    semantics (the CPU target's lowerings: runtime/cpu.py)."""
    values: dict[int, torch.Tensor] = {}
    named: dict[str, torch.Tensor] = {}
    carried = carried_inputs(net) if states is not None else {}
    for op in _layers(net):
        if only is not None and not only(op):
            continue
        if op.name == "netc.input":
            y = feed[_name(op)]
            values[id(op.results[0])] = named[_name(op)] = y
            continue
        run_op(op, values, named, ptensors, dtype, impls)
        if carried:
            _keep_final_state(op, lookup(op.name), values, ptensors, states, carried)
    return named


def run_op(op, values: dict, named: dict, ptensors: dict, dtype, impls: dict | None = None) -> None:
    """One compute op with its reference semantics: operands from `values` (by id of the IR value),
    parameters from `ptensors` (an op with side effects writes its symbols' new values there, in
    place), results into `values` and by layer name into `named` ('name#i' too for several)."""
    opdef = lookup(op.name)
    refs = {role: ref for role, ref in (op.attrs.get("params") or {}).items() if isinstance(ref, SymbolRef)}
    ps = {role: ptensors[ref.name] for role, ref in refs.items()}
    fn = impls.get(op.name, opdef.reference) if impls else opdef.reference
    try:
        y = fn(opdef.attrs_of(op), [values[id(x)] for x in op.operands], ps)
    except NetcError as e:      # a value the op refuses at run time (an id outside a table): at its layer
        for d in e.diagnostics:
            if d.loc is None:
                d.loc = op.loc
        raise
    if opdef.side_effects:
        for role, t in (y or {}).items():   # the new values of the symbols it writes
            dst = ptensors[refs[role].name]
            dst.copy_(t.to(dst.dtype))
        return
    ys = list(y) if len(op.results) > 1 else [y]
    for k, (r, t) in enumerate(zip(op.results, ys)):
        if t.is_floating_point():
            t = t.to(dtype)
        # a mismatch is a bug in an op's reference, not the user's
        assert tuple(t.shape) == tuple(r.type.shape), (
            f"{op.name} '{_name(op)}': reference gives {list(t.shape)}, shape rule {list(r.type.shape)}")
        values[id(r)] = t
        if len(op.results) > 1:
            named[f"{_name(op)}#{k}"] = t
    named[_name(op)] = values[id(op.results[0])]


class ReferenceExecutor:
    """run_reference as an executor.Executor: one network of a shape-inferred module with parameters
    it keeps (random ones from `seed` until set_params gives others), in `dtype`.

    With carry_state=True it carries recurrent state between calls (Brainstorm's context): each call's
    final state of a recurrent op (OpDef.final_state: an Lstm's h and c) is fed to the input that gives
    that op its initial state (its h0, c0 inputs) in the next call, unless the call gives that input
    itself; the first call (and the first after reset_state()) starts from zeros. So running 4 steps at
    once equals running 2, then 2 more. `state` holds the carried values by input name."""

    def __init__(self, module: Module, network=None, seed: int = 0, dtype=torch.float64, device="cpu",
                 carry_state: bool = False):
        self.module, self.net, self.dtype, self.device = module, network_of(module, network), dtype, device
        used = {ref.name for op in _layers(self.net) for ref in (op.attrs.get("params") or {}).values()
                if isinstance(ref, SymbolRef)}
        self.params = module_params(module, None, seed, dtype, device, names=used)
        self.carry_state, self.state = carry_state, {}
        if carry_state and not carried_inputs(self.net):
            raise NetcError(f"network '{self.net.attrs.get('sym_name')}' has no state to carry: no recurrent layer "
                            f"takes its initial state from an input (give one its initial state as inputs: an Lstm h0 and c0; a GRU, Recurrent or Clockwork h0)")

    def reset_state(self) -> None:
        """Forget the carried state: the next call starts from zeros."""
        self.state = {}

    def set_params(self, values: dict) -> None:
        from .executor import unknown_params
        unknown_params(values, self.params)
        for k, v in values.items():
            self.params[k] = torch.as_tensor(v).reshape(self.params[k].shape).to(self.device, self.params[k].dtype)

    def get_params(self) -> dict:
        return {k: v.clone() for k, v in self.params.items()}

    def run(self, inputs: dict) -> dict:
        if not self.carry_state:
            return run_reference(self.module, inputs, self.params, self.net, self.device, self.dtype)
        states: dict = {}
        out = run_reference(self.module, with_carried_state(self.net, inputs, self.state, self.dtype, self.device),
                            self.params, self.net, self.device, self.dtype, states=states)
        self.state = states
        return out


def run_module(module: Module, inputs: dict | None = None, params: dict | None = None, network=None,
               **kw) -> dict[str, torch.Tensor]:
    """run_reference over one network (`network`) or every network of the module. With several,
    results are keyed 'network.layer' and an input name 'x' feeds every network that has an input
    'x' ('network.x' feeds one). Parameters are shared across networks, as in the module."""
    nets = [network_of(module, network)] if network is not None else module.networks()
    if len(nets) == 1:
        return run_reference(module, inputs, params, nets[0], **kw)
    per = {n.attrs["sym_name"]: None if inputs is None else {} for n in nets}
    for k, t in (inputs or {}).items():
        hits = []
        for n in nets:
            sym, names = n.attrs["sym_name"], [_name(op) for op in network_inputs(n)]
            local = k[len(sym) + 1:] if k.startswith(sym + ".") else k
            if local in names:
                per[sym][local] = t
                hits.append(sym)
        if not hits:
            every = [f"{n.attrs['sym_name']}.{_name(op)}" for n in nets for op in network_inputs(n)]
            raise NetcError(f"no network has an input '{k}' (inputs: {', '.join(every)})")
    out = {}
    for n in nets:
        sym = n.attrs["sym_name"]
        for k, v in run_reference(module, per[sym], params, n, **kw).items():
            out[f"{sym}.{k}"] = v
    return out
