"""NetBuilder: PaddlePaddle's Network design (a net of ops you add one by one, then backward and
optimizer ops, run over any range of its schedule), on netc's IR and passes.

    net = netc.NetBuilder("mlp", batch_size=16)
    x = net.add_input("x", [4])
    label = net.add_input("label", [], "i32")
    h = net.add_op("InnerProduct", [x], num_outputs=8, activation="relu")   # shapes inferred as ops are added
    y = net.add_op("InnerProduct", [h], num_outputs=3, name="y")
    cost = net.add_op("SoftmaxLoss", [y, label], name="cost")
    net.backward_from(cost)                       # the backward pass's gradient ops
    net.add_optimization(0.1, "adam")             # the optimizer pass's update ops
    net.schedule()                                # every op of the step, in order
    net.run({"x": xs, "label": ys}, end="cost")   # forward only
    net.run(begin="cost.grad", end="y.weight.grad")   # a segment, from the values already computed
    net.run({"x": xs, "label": ys})               # the whole step: forward, gradients, updates

Types are the .nd layer types ("Convolution", "InnerProduct", ...); attributes as in .nd. The program is
the topology of every op added (outputs: the ops nobody reads), compiled with the default pipeline and,
after backward_from / add_optimization, the backward and optimizer passes. Values live in a workspace
between runs (`values`), parameters in a ParameterSet (`parameters`).
"""
from __future__ import annotations

import torch

from ..ir.query import layer_name, layers
from ..ops import lookup
from ..pipelines import Training
from ..runtime.reference import INT_DTYPES, feed_tensor, module_params
from .errors import error, user_errors, user_loc
from .layer import Layer, data, make_layer
from .optimizer import Optimizer, by_name
from .parameters import ParameterSet, collect, initial_value
from .topology import Topology


class NetBuilder:
    def __init__(self, name: str = "net", batch_size: int | None = None, parameters: ParameterSet | None = None,
                 seed: int = 0):
        self.name, self.batch_size, self.seed = name, batch_size, seed
        self.ops: list = []
        self.cost: Layer | None = None
        self.freeze: list = []
        self.optimizer: Optimizer | None = None
        self.parameters = parameters
        self.values: dict = {}          # the workspace: layer name -> tensor (the last run's)
        self._compiled = None           # (key, module, net)
        self._ids: dict = {}

    # -- building ----------------------------------------------------------------------------
    def add_input(self, name: str, shape, dtype: str = "f32") -> Layer:
        x = data(name, shape, dtype, batch_size=self.batch_size)
        self.ops.append(x)
        return x

    def _input(self, x, loc):
        if isinstance(x, Layer):
            return x
        if isinstance(x, str):
            for op in self.ops:
                if op.name == x:
                    return op
            raise error(f"net '{self.name}' has no op '{x}' to take as an input", loc)
        raise error(f"an input is a layer (or its name), got {type(x).__name__}", loc)

    def add_op(self, type: str, inputs=(), name: str | None = None, param_name=None, param_attr=None,
               **attrs) -> Layer:
        """Add an op of a .nd layer type ("Input" takes shape= and dtype=); returns its result."""
        loc = user_loc()
        if type == "Input":
            if inputs:
                raise error("an Input op takes no inputs", loc)
            return self.add_input(name, attrs.pop("shape", None), attrs.pop("dtype", "f32"))
        ins = [inputs] if isinstance(inputs, (Layer, str)) else list(inputs)
        x = make_layer(type, [self._input(i, loc) for i in ins], attrs, name, param_name, param_attr, loc)
        self.ops.append(x)
        self._compiled = None
        return x

    def backward_from(self, cost, freeze=()) -> None:
        """Differentiate `cost` (a loss, or any scalar op) with respect to every trainable parameter: the
        backward pass's ops join the schedule. freeze: parameter/layer names or patterns not trained."""
        self.cost = self._input(cost, user_loc())
        self.freeze = [freeze] if isinstance(freeze, str) else list(freeze)
        self._compiled = None

    def add_optimization(self, lr: float = 0.01, optimizer="sgd", **options) -> None:
        """One update op per trainable parameter (the optimizer pass): `optimizer` a name (sgd, momentum,
        nesterov, adam, rmsprop, adagrad) or a netc.optimizer object."""
        loc = user_loc()
        if self.cost is None:
            raise error("add_optimization needs the gradients: call backward_from(cost) first", loc)
        self.optimizer = optimizer if isinstance(optimizer, Optimizer) else by_name(optimizer, lr, **options)
        self._compiled = None

    # -- the program -------------------------------------------------------------------------
    def topology(self) -> Topology:
        read = {id(i) for op in self.ops for i in op.inputs}
        outs = [op for op in self.ops if id(op) not in read and not op.is_data]
        if not outs:
            raise error(f"net '{self.name}' has no ops yet", user_loc())
        return Topology(outs, self.name, declare_outputs=False)

    def program(self, batch: int | None = None):
        """(module, network) of the step as it stands: forward ops, then gradients and updates."""
        if batch is None:     # the batch of the last program, else the declared one
            batch = self._compiled[0][3] if self._compiled is not None else (self.batch_size or 1)
        key = (len(self.ops), id(self.cost), id(self.optimizer), batch)
        if self._compiled is None or self._compiled[0] != key:
            top = self.topology()
            training = None
            if self.cost is not None:
                training = Training(outputs=(self.cost.name,), freeze=tuple(self.freeze),
                                    optimizer=self.optimizer.options if self.optimizer is not None else {},
                                    gradients_only=self.optimizer is None)
            with user_errors():
                module = top.module(batch, training)
            net = module.networks()[0]
            self._compiled = (key, module, net)
            self.values.clear()
            self._ensure_params(top, module)
        return self._compiled[1], self._compiled[2]

    def _ensure_params(self, top, module):
        infos = collect([top])
        if self.parameters is None:
            self.parameters = ParameterSet({}, {}, {}, [top])
        for n, info in infos.items():
            self.parameters.infos.setdefault(n, info)
            if not info.share_from and n not in self.parameters:
                self.parameters._values[n] = initial_value(info, self.seed)
            elif info.share_from:
                self.parameters.aliases[n] = info.share_from
        self._ptensors = module_params(module, self.parameters.tensors(p.attrs["sym_name"] for p in module.params()),
                                       self.seed, self.parameters.dtype)
        self.parameters.adopt_state(self._ptensors)

    def schedule(self, batch: int | None = None) -> list:
        """The names of the step's ops in the order they run (inputs first)."""
        _, net = self.program(batch)
        return [layer_name(op) for op in layers(net)]

    # -- running -----------------------------------------------------------------------------
    def _index(self, names, x, default, loc):
        if x is None:
            return default
        if isinstance(x, int) and not isinstance(x, bool):
            if not -len(names) <= x < len(names):
                raise error(f"op index {x} is outside the schedule (0..{len(names) - 1})", loc)
            return x % len(names)
        x = x.name if isinstance(x, Layer) else x
        if x not in names:
            from ..diagnostics import did_you_mean
            hint = did_you_mean(str(x), names)
            raise error(f"no op '{x}' in the schedule" + (f"; did you mean '{hint}'?" if hint else "")
                        + " (NetBuilder.schedule() lists them)", loc)
        return names.index(x)

    def run(self, feed: dict | None = None, begin=None, end=None, lr: float | None = None) -> dict:
        """Run the ops of the schedule from `begin` to `end` (names or indices, both included; default the
        whole step) with their reference semantics. `feed`: data inputs by name (tensors or arrays with the
        batch first); inputs not fed and values computed before `begin` come from the workspace. Returns
        the values this run computed, by op name."""
        loc = user_loc()
        batch = None
        if feed:
            first = next(iter(feed.values()))
            batch = len(first) if hasattr(first, "__len__") else None
        module, net = self.program(batch or self.batch_size)
        ops = layers(net)
        names = [layer_name(op) for op in ops]
        i0, i1 = self._index(names, begin, 0, loc), self._index(names, end, len(ops) - 1, loc)
        if i1 < i0:
            raise error(f"the range runs backwards: '{names[i0]}' (op {i0}) comes after '{names[i1]}' (op {i1})", loc)
        dtype = self.parameters.dtype
        for k, v in (feed or {}).items():
            op = next((o for o in ops if o.name == "netc.input" and layer_name(o) == k and not o.attrs.get("role")),
                      None)
            if op is None:
                raise error(f"net '{self.name}' has no data input '{k}'", loc)
            want = INT_DTYPES.get(op.results[0].type.dtype, dtype)
            with user_errors(loc):
                self.values[k] = feed_tensor(v, op.results[0].type.shape, want, f"input '{k}'", "cpu")
        steps = self.optimizer.steps if self.optimizer is not None else 0
        out = {}
        updated = False
        for op in ops[i0:i1 + 1]:
            name = layer_name(op)
            if op.name == "netc.input":
                role = op.attrs.get("role")
                if role == "learning_rate":
                    r = lr if lr is not None else self.optimizer.learning_rate()
                    self.values[name] = torch.tensor(float(r), dtype=dtype)
                elif role == "seed":
                    self.values[name] = torch.tensor(self.seed * 1_000_003 + steps, dtype=torch.int64)
                elif name not in self.values:
                    raise error(f"input '{name}' has no value: feed it (run({{'{name}': ...}}))", loc)
                out[name] = self.values[name]
                continue
            missing = [layer_name(v.owner) for v in op.operands if self._value(v) is None]
            if missing:
                raise error(f"op '{name}' reads '{missing[0]}', which has no value yet: run from an earlier op", loc)
            d = lookup(op.name)
            refs = {role: ref for role, ref in (op.attrs.get("params") or {}).items() if hasattr(ref, "name")}
            ps = {role: self._ptensors[ref.name] for role, ref in refs.items()}
            with user_errors(loc):
                y = d.reference(d.attrs_of(op), [self._value(v) for v in op.operands], ps)
            if d.side_effects:
                for role, t in (y or {}).items():
                    dst = self._ptensors[refs[role].name]
                    dst.copy_(t.to(dst.dtype))
                updated = updated or op.name.endswith("_update")
                continue
            ys = list(y) if len(op.results) > 1 else [y]
            for k, t in enumerate(ys):
                t = t.to(dtype) if t.is_floating_point() else t
                key = name if len(op.results) == 1 else f"{name}#{k}"
                self.values[key] = out[key] = t
            if len(op.results) > 1:
                self.values[name] = out[name] = ys[0]
        if updated and self.optimizer is not None:
            self.optimizer.steps += 1
        return out

    def _value(self, v):
        o = v.owner
        name = layer_name(o)
        return self.values.get(name if len(o.results) == 1 else f"{name}#{v.index}")

    def __repr__(self):
        what = " + backward" if self.cost is not None else ""
        what += " + optimizer" if self.optimizer is not None else ""
        return f"<NetBuilder {self.name}: {len(self.ops)} ops{what}>"


__all__ = ["NetBuilder"]
