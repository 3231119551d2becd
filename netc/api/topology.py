"""Topologies: the layers an expression reaches from its outputs, as one network of the IR.

`Topology(cost)` collects every layer `cost` depends on (data layers first, in the order they were
made, then the others in the order they were made, which is topological) and writes them as the
*unresolved* IR the .nd frontend builds: `netc.input` ops and layer ops that name their parents,
parameter bindings in the .nd form, an `output` statement for the topology's outputs. The default
pipeline then resolves, infers and materializes it like any .nd file, so `to_ir()` is what
`netc opt -p materialize-params,dce` prints for the same network written in .nd, and `to_nd()`
writes that .nd (netc/frontend/nd_writer.py).

Parameter names never depend on which topologies are compiled together: a binding's name, else
`<layer>.<role>`. (.nd prefixes unbound names with the network's name in a file of several networks;
writing several topologies into one module therefore binds every parameter explicitly.)

`load(path)` goes the other way: a .nd file (or any format netc reads) becomes Topologies of Layers,
with the file's locations, so a loaded network trains, infers and explains like a built one.
"""
from __future__ import annotations

import copy
import warnings

from ..diagnostics import DiagnosticEngine, Loc, render
from ..ir.core import UNRANKED, Module, Operation, Region, SymbolRef
from ..ir.printer import print_ir
from ..ir.query import network_outputs
from ..ops import lookup
from ..pipelines import Options, Training, inference, program
from .errors import Error, error, user_errors, user_loc
from .layer import Layer, ParamAttr, as_layers, check_name, data, make_layer


class Topology:
    """A network made of layers: `Topology(outputs, name="net")`.

    outputs          a layer or a list of layers (the network's results: costs, predictions)
    name             the network's name (its `network NAME` in .nd)
    declare_outputs  write an `output` statement (default); False: the outputs are the layers nobody
                     reads, as in a .nd file without one
    """

    def __init__(self, outputs, name: str = "net", declare_outputs: bool = True, phase: str = "train",
                 loc: Loc | None = None, inputs=(), declared=(), attrs: dict | None = None,
                 module_attrs: dict | None = None):
        loc = loc or user_loc()
        if not isinstance(outputs, Layer) and not hasattr(outputs, "__iter__"):
            raise error(f"Topology: expected an output layer or a list of them, got {type(outputs).__name__}", loc)
        outs = as_layers([outputs] if isinstance(outputs, Layer) else list(outputs), "Topology", loc)
        if not outs:
            raise error("a topology needs at least one output layer", loc)
        check_name(name, loc)
        self.name, self.outputs, self.declare_outputs, self.phase, self.loc = name, outs, declare_outputs, phase, loc
        # module-level parameter declarations (`param NAME: f32[...]`) no layer binds but an alias shares from
        # (a loaded file's); netc.param ops
        self.declared = list(declared)
        # what a frontend recorded on the network (a title) and on the module (a SINGA job's optimizer)
        self.attrs, self.module_attrs = dict(attrs or {}), dict(module_attrs or {})
        seen: dict = {}
        stack = list(outs) + as_layers(list(inputs), "Topology inputs", loc)   # inputs: kept even if unread
        while stack:
            x = stack.pop()
            if id(x) not in seen:
                seen[id(x)] = x
                stack.extend(x.inputs)
        every = sorted(seen.values(), key=lambda x: x.order)
        self.layers = [x for x in every if x.is_data] + [x for x in every if not x.is_data]
        by_name: dict = {}
        for x in self.layers:
            other = by_name.get(x.name)
            if other is not None and not (_phased(x) and _phased(other)):
                raise error(f"two different layers are named '{x.name}' in topology '{name}'", x.loc,
                            [("the other one is made here", other.loc)])
            by_name.setdefault(x.name, x)
        self._by_name = by_name
        batches = {x.batch for x in self.layers if x.is_data and x.batch is not None}
        if len(batches) > 1:
            raise error(f"the data layers of topology '{name}' declare different batch sizes: "
                        f"{', '.join(str(b) for b in sorted(batches))}", loc)
        self.batch_size = next(iter(batches)) if batches else None
        self._cache: dict = {}

    # -- questions ------------------------------------------------------------------------------
    def data_layers(self) -> list:
        """The data layers, in the order they were made: the order of a tuple sample's fields (a sequence's
        lengths input and steps mask, which the feeding fills, are none)."""
        return [x for x in self.layers if x.is_data and x.lengths_of is None and x.mask_of is None]

    def sequences(self) -> list:
        """The sequence data layers (time-major [T, B, ...]), in the order they were made."""
        return [x for x in self.layers if x.is_data and x.seq is x]

    def default_steps(self) -> int:
        """T where none is given: the sequences' declared max_len (the largest), else 1."""
        return max([x.itype.max_len or 1 for x in self.sequences()] or [1])

    def layer(self, name: str) -> Layer:
        try:
            return self._by_name[name]
        except KeyError:
            from ..diagnostics import did_you_mean
            hint = did_you_mean(name, self._by_name)
            raise error(f"topology '{self.name}' has no layer '{name}'" + (f"; did you mean '{hint}'?" if hint else ""),
                        user_loc()) from None

    def parameters(self) -> dict:
        """{parameter name: shape} of every parameter the topology uses (aliases included)."""
        m = self.module()
        return {p.attrs["sym_name"]: tuple(p.attrs["type"].shape) for p in m.params() if "state" not in p.attrs}

    def __repr__(self):
        outs = ", ".join(o.name for o in self.outputs)
        return f"<Topology {self.name}: {len(self.layers)} layers, outputs {outs}>"

    # -- the IR ---------------------------------------------------------------------------------
    def module(self, batch: int | None = None, training: Training | None = None, steps: int | None = None) -> Module:
        """The network after the inference pipeline (the training pipeline with `training`), at batch
        `batch` (default: the declared batch, else 1) and, with sequences, `steps` T (default_steps()).
        Cached: a topology does not change."""
        key = (batch or self.batch_size or 1, training.key() if training is not None else None,
               steps or self.default_steps())
        m = self._cache.get(key)
        if m is None:
            m = self._cache[key] = compile_module([self], key[0], self.phase, training, key[2])
        return m

    def to_ir(self, batch: int | None = None, locations: bool = True, steps: int | None = None) -> str:
        """The IR after the default pipeline, printed (MLIR's generic form, with the Python call sites as
        locations)."""
        return print_ir(self.module(batch, steps=steps), with_locs=locations)

    def to_nd(self, batch: int | None = None, header: str | None = None, steps: int | None = None) -> str:
        """The topology as .nd source (netc.load reads it back); sequences at `steps` T."""
        return to_nd([self], batch, header, steps)

    def explain(self, format: str = "table", batch: int | None = None):
        """Per-layer shapes, parameters, FLOPs and bytes (`netc explain --brief`): the table as text, or
        format="json" for the dictionary."""
        from ..explain import explain_json, explain_table
        m = self.module(batch)
        if format == "json":
            return explain_json(m)
        if format != "table":
            raise error(f"explain(format=...) is 'table' or 'json', got {format!r}", user_loc())
        return explain_table(m)


def _phased(x: Layer) -> bool:
    return "include" in x.attrs or "exclude" in x.attrs


_IMPLICIT: dict = {}    # (ids of output layers) -> the Topology made for them (it keeps the layers alive)


def as_topology(x, what: str = "topology") -> Topology:
    """A Topology from a Topology, a layer or a list of layers (its outputs)."""
    if isinstance(x, Topology):
        return x
    if isinstance(x, Layer) or (isinstance(x, (list, tuple)) and x and all(isinstance(i, Layer) for i in x)):
        key = (id(x),) if isinstance(x, Layer) else tuple(id(i) for i in x)
        top = _IMPLICIT.get(key)
        if top is None:     # one Topology per set of output layers: its compiled programs are reused
            if len(_IMPLICIT) >= 256:
                _IMPLICIT.clear()
            top = _IMPLICIT[key] = Topology(x, loc=user_loc())
        return top
    raise error(f"{what}: expected a Topology or output layers, got {type(x).__name__}", user_loc())


# -- topologies -> IR --------------------------------------------------------------------------------

def _network_op(top: Topology, batch: int | None, bind_all: bool, steps: int | None = None) -> Operation:
    b = batch or top.batch_size or 1
    t = steps or top.default_steps()
    body = []
    for x in top.layers:
        if x.is_data:
            shape = ([t, b] if x.seq is x or x.mask_of is not None else [b]) + list(x.sample_shape)
            a = {"name": x.name, "shape": shape, "dtype": x.dtype, **copy.deepcopy(x.attrs)}
            if x.seq is x or x.mask_of is not None:       # time-major: the samples are axis 1 (ops/tensor.py Input)
                a["batch_axis"] = 1
            body.append(Operation("netc.input", result_types=[UNRANKED], attrs=a, loc=x.loc))
            continue
        a = {"name": x.name, "parents": [i.name for i in x.inputs], **copy.deepcopy(x.attrs)}
        if x.at_compile is not None:      # attributes that depend on T and B (a reshape back to [T, B, ...])
            a.update(x.at_compile(t, b))
        binding = {}
        for role in x.param_shapes:
            if role in x.params:
                binding[role] = x.params[role].binding(f"{x.name}.{role}")
            elif bind_all:
                binding[role] = {"name": f"{x.name}.{role}"}
        if binding:
            a["params"] = binding
        body.append(Operation(x.opdef.ir_name, result_types=[UNRANKED] * 1, attrs=a, loc=x.loc))
    if top.declare_outputs:
        body.append(Operation("netc.output", attrs={"parents": [o.name for o in top.outputs]}, loc=top.loc))
    return Operation("netc.network", attrs={"sym_name": top.name, **copy.deepcopy(top.attrs)}, regions=[Region(body)],
                     loc=top.loc)


def build_module(tops, batch: int | None = None, steps: int | None = None) -> Module:
    """The unresolved IR of one or several topologies (one network each), as a frontend builds it."""
    tops = list(tops)
    names = [t.name for t in tops]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise error(f"two topologies are named '{dup}': networks in one module need distinct names "
                    f"(Topology(..., name=...))", tops[names.index(dup, names.index(dup) + 1)].loc)
    decls = {}
    for t in tops:
        for p in t.declared:
            decls.setdefault(p.attrs["sym_name"], p)
    module = Module([copy.deepcopy(p) for p in decls.values()]
                    + [_network_op(t, batch, len(tops) > 1, steps) for t in tops],
                    loc=tops[0].loc)
    for t in tops:
        for k, v in t.module_attrs.items():
            module.attrs.setdefault(k, copy.deepcopy(v))
    module.attrs["source"] = tops[0].loc.file
    return module


def compile_module(tops, batch: int | None = None, phase: str = "train", training: Training | None = None,
                   steps: int | None = None) -> Module:
    """build_module + the inference pipeline (the training pipeline with `training`); the user's mistakes
    raise an Error located in their code, warnings go to Python's warnings."""
    module = build_module(tops, batch, steps)
    diag = DiagnosticEngine()
    with user_errors():
        program(module, Options(phase=phase, training=training), diag)
    for d in diag.diagnostics:
        if d.severity == "warning":
            warnings.warn(render(d).rstrip(), stacklevel=3)
    return module


def as_topologies(tops, what: str) -> list:
    """One topology or several: a Topology or output layer, or a list or tuple of them (each through
    as_topology); anything else is the caller's mistake, located in their code."""
    if isinstance(tops, (list, tuple)):
        return [as_topology(t, what) for t in tops]
    return [as_topology(tops, what)]


def to_ir(tops, batch: int | None = None, locations: bool = True) -> str:
    """The IR of several topologies in one module (they share parameters by name), printed."""
    tops = as_topologies(tops, "netc.api.to_ir")
    if not tops:
        raise error("netc.api.to_ir needs at least one topology", user_loc())
    return print_ir(compile_module(tops, batch, tops[0].phase), with_locs=locations)


def to_nd(tops, batch: int | None = None, header: str | None = None, steps: int | None = None) -> str:
    """.nd source of one or several topologies (several: every parameter binding explicit); sequences
    at `steps` T (default: their declared max_len, else 1)."""
    from ..frontend.nd_writer import write_nd
    tops = as_topologies(tops, "netc.api.to_nd")
    if not tops:
        raise error("netc.api.to_nd needs at least one topology", user_loc())
    module = build_module(tops, batch, steps)
    for op in module.walk():     # .nd's short form of a binding that only names: `weight: NAME`
        ps = op.attrs.get("params")
        if isinstance(ps, dict):
            op.attrs["params"] = {r: (b["name"] if isinstance(b, dict) and list(b) == ["name"] else b)
                                  for r, b in ps.items()}
    return write_nd(module, header)


# -- files -> topologies -----------------------------------------------------------------------------

def load(path: str, network: str | None = None, phase: str = "train"):
    """The networks of a file (.nd, or any format netc reads) as Topologies: one Topology when the file
    has one network (or `network` names one), else a tuple of them in file order (they share
    parameters by name). Parameters keep the file's names (a file of several networks prefixes unbound
    ones with the network's name), phases are resolved (`phase`), blocks flattened."""
    from ..frontend import load as load_file
    loc = user_loc()
    with user_errors():
        diag = DiagnosticEngine()
        module = load_file(path, diag)
        had_output = {n.attrs["sym_name"]: any(op.name == "netc.output" for op in n.regions[0].ops)
                      for n in module.networks()}
        inference(module, Options(phase=phase), diag)
    nets = module.networks()
    if network is not None:
        names = [n.attrs["sym_name"] for n in nets]
        if network not in names:
            from ..diagnostics import did_you_mean
            hint = did_you_mean(network, names)
            raise error(f"'{path}' has no network '{network}'" + (f"; did you mean '{hint}'?" if hint else "")
                        + f" (networks: {', '.join(names)})", loc)
        nets = [n for n in nets if n.attrs["sym_name"] == network]
    for net in nets:      # samples fed along another axis than the first: not what a data layer feeds
        for op in net.regions[0].ops:
            if op.name == "netc.input" and op.attrs.get("batch_axis", 0) != 0:
                raise error(f"'{path}': input '{op.attrs['name']}' takes its samples along axis "
                            f"{op.attrs['batch_axis']} (time-major, {list(op.results[0].type.shape)}), and netc.load "
                            f"reads every input batch-first: it would feed the samples along time", loc,
                            notes=[("the input is declared here", op.loc),
                                   "train the file with `netc run --train --data`, or build the network with "
                                   "netc.data_type's sequence types (examples/python/char_rnn.py, docs/sequences.md)"])
    decls = {p.attrs["sym_name"]: p for p in module.params()}
    module_attrs = {k: v for k, v in module.attrs.items() if k != "source"}
    tops = tuple(_topology_of(net, decls, had_output.get(net.attrs["sym_name"], True), phase, module_attrs)
                 for net in nets)
    return tops[0] if len(tops) == 1 else tops


_PARAM_KEYS = ("init", "std", "mean", "low", "high", "value", "lr_scale", "wd_scale", "immutable")


_STRUCTURE = ("name", "parents", "params", "invalid")


def _topology_of(net: Operation, decls: dict, declare_outputs: bool, phase: str, module_attrs: dict) -> Topology:
    layers: dict = {}
    for op in net.regions[0].ops:
        if op.name == "netc.input":
            shape = list(op.results[0].type.shape)
            extra = {k: v for k, v in op.attrs.items() if k in ("partition_dim", "location")}
            x = data(op.attrs["name"], shape[1:], op.results[0].type.dtype,
                     batch_size=shape[0] if shape else None, **extra)
            x.loc = op.loc
            layers[id(op.results[0])] = x
            continue
        opdef = lookup(op.name)
        if opdef is None:
            continue
        attrs = {k: copy.deepcopy(v) for k, v in op.attrs.items()
                 if k not in _STRUCTURE and k not in ("include", "exclude") and (k != "type" or "type" in opdef.attrs)}
        params = {}
        for role, ref in (op.attrs.get("params") or {}).items():
            if not isinstance(ref, SymbolRef):
                continue
            p = decls.get(ref.name)
            extra = {k: p.attrs[k] for k in _PARAM_KEYS if p is not None and k in p.attrs}
            sf = p.attrs.get("share_from") if p is not None else None
            if sf is not None:
                extra["share_from"] = sf.name
            if ref.name != f"{op.attrs.get('name').replace('@', '.split')}.{role}" or extra:
                params[role] = ParamAttr(name=ref.name, **extra)
        # a model-parallel block's copies 'x@0', 'x@1' become 'x.split0', ... ('@' in a parent is a reference
        # to splits): their parameters keep the file's names
        x = make_layer(opdef, [layers[id(v)] for v in op.operands], attrs, op.attrs.get("name").replace("@", ".split"),
                       param_attr=params or None, loc=op.loc, _loaded=True)
        for r in op.results:
            layers[id(r)] = x
    outs = [layers[id(o.results[0])] for o in network_outputs(net)]
    bound = {ref.name for op in net.regions[0].ops for ref in (op.attrs.get("params") or {}).values()
             if isinstance(ref, SymbolRef)}
    owners = {decls[n].attrs["share_from"].name for n in bound if n in decls and "share_from" in decls[n].attrs}
    declared = [_declaration(decls[n]) for n in sorted(owners - bound) if n in decls]
    inputs = [x for x in layers.values() if x.is_data]
    return Topology(outs, net.attrs["sym_name"], declare_outputs, phase, loc=net.loc, inputs=inputs, declared=declared,
                    attrs={k: v for k, v in net.attrs.items() if k == "title"}, module_attrs=module_attrs)


def _declaration(p: Operation) -> Operation:
    """A `param` declaration of the file (shape and init attributes), for a topology that only aliases it."""
    return Operation("netc.param", attrs={k: copy.deepcopy(v) for k, v in p.attrs.items()
                                          if k in ("sym_name", "type") + _PARAM_KEYS}, loc=p.loc)


__all__ = ["Topology", "as_topology", "build_module", "compile_module", "to_ir", "to_nd", "load", "Error"]
