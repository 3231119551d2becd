"""What the partition pass's two lowerings share: the worker count, the op builder, and the
emitter that collects the new body, sliced parameters and errors of one network."""
from __future__ import annotations

from ...diagnostics import NetcError
from ...ir.core import STRUCTURAL_OPS, Operation, SymbolRef, TensorType, copy_attr
from ...ops import lookup
from ...ops.registry import ShapeError, result_dtype


def workers_of(net, options: dict) -> int:
    """K for a network: the option (`--workers`), else the largest num_partitions of its layers, else 1."""
    k = options.get("workers")
    if k is not None:
        return int(k)
    return max([int(op.attrs["num_partitions"]) for op in net.regions[0].ops
                if isinstance(op.attrs.get("num_partitions"), int)] or [1])


def is_partitioned(net) -> bool:
    return any("worker" in op.attrs for op in net.regions[0].ops)


def has_partitioning(module) -> bool:
    """Whether a module says how to distribute it (partition_dim, location, num_partitions, splits)."""
    return any(op.name == "netc.parallel" or any(k in op.attrs for k in ("partition_dim", "location", "num_partitions",
                                                                         "split_index"))
               for op in module.walk())


def make_op(ir_name, operands, attrs, loc, results=1) -> Operation:
    """A new op typed by its own shape rule (ShapeError propagates)."""
    opdef = lookup(ir_name)
    op = Operation(ir_name, list(operands), result_types=[None] * results, attrs=attrs, loc=loc)
    full = opdef.attrs_of(op)
    shapes = opdef.infer(full, [v.type.shape for v in operands])
    shapes = [shapes] if results == 1 else list(shapes)
    dtype = result_dtype(opdef, full, [v.type.dtype for v in operands])
    for r, s in zip(op.results, shapes):
        r.type = TensorType(s, dtype)
    return op


def feature_dim(shape) -> int:
    return len(shape) - 1


def pos(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


class Emitter:
    """What both lowerings share: the new body, sliced parameters, errors."""

    def __init__(self, module, net, K, diag):
        self.module, self.net, self.K, self.diag = module, net, K, diag
        self.body: list[Operation] = []
        self.params = {p.attrs["sym_name"]: p for p in module.params()}
        self.new_params: dict[str, Operation] = {}
        self.names = {op.attrs.get("name") for op in net.regions[0].ops}
        self.singa_graph = None      # SINGA's partitioned graph, node by node (the SINGA lowering)

    def emit(self, op, worker, partition=None):
        op.attrs["worker"] = worker
        if partition is not None:
            op.attrs["partition"] = partition
        self.body.append(op)
        return op

    def new(self, ir_name, operands, attrs, loc, worker, partition=None):
        try:
            op = make_op(ir_name, operands, attrs, loc)
        except ShapeError as e:
            raise NetcError(f"partitioning '{attrs.get('name')}': {e}", loc) from None
        return self.emit(op, worker, partition)

    def clone(self, op, name, operands, worker, attrs=None, partition=None):
        """A copy of a logical layer for one worker, retyped by its shape rule."""
        a = copy_attr(op.attrs)
        for k in ("num_partitions",):
            a.pop(k, None)
        a.update(attrs or {})
        a["name"] = name
        try:
            c = make_op(op.name, operands, a, op.loc, len(op.results))
        except ShapeError as e:
            raise NetcError(f"layer '{op.attrs.get('name')}' cannot be partitioned {self.K} ways: {e}", op.loc) from None
        c.attr_locs = dict(op.attr_locs) if op.attr_locs else {}
        return self.emit(c, worker, partition)

    def slice_param(self, ref: SymbolRef, dim: int, index: int, count: int, suffix: str, loc) -> SymbolRef:
        """Part `index` of `count` of a logical parameter along `dim`, as a new parameter symbol."""
        p = self.params[ref.name]
        shape = list(p.attrs["type"].shape)
        d = pos(dim, len(shape))
        if shape[d] % count:
            raise NetcError(f"parameter '{ref.name}' {shape} does not split into {count} equal parts along "
                            f"dimension {d}", loc)
        n = shape[d] // count
        name = f"{ref.name}{suffix}"
        if name not in self.new_params:
            attrs = {k: copy_attr(v) for k, v in p.attrs.items() if k not in ("sym_name", "type")}
            new_shape = list(shape)
            new_shape[d] = n
            attrs.update(sym_name=name, type=TensorType(new_shape, p.attrs["type"].dtype),
                         slice_of={"name": ref.name, "dim": d, "start": index * n, "length": n, "shape": shape})
            self.new_params[name] = Operation("netc.param", attrs=attrs, loc=p.loc)
        return SymbolRef(name)

    def finish(self, outputs):
        rest = [op for op in self.net.regions[0].ops if op.name in STRUCTURAL_OPS and op.name != "netc.output"]
        new = list(self.body)
        if outputs:
            new.append(Operation("netc.output", outputs, attrs={}, loc=self.net.loc))
        self.net.regions[0].block.set_ops(new + rest)
        self.net.attrs["workers"] = self.K
