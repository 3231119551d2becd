"""The IR: tensor types, SSA values, operations with attributes, regions and locations.

Deliberately small (tinygrad-sized), MLIR-shaped:

* an Operation has an op name ("netc.conv2d"), operands (Values), results (Values), an
  attribute dict, nested regions and a source location;
* a Region holds one Block; a Block is an ordered list of operations (plus block arguments,
  unused by netc so far);
* a Module is a top-level "builtin.module" operation with one region.

Attributes are plain Python data: int, float, str, bool, list, dict, TensorType and SymbolRef.
"""
from __future__ import annotations

from typing import Iterator

from ..diagnostics import Loc, UNKNOWN_LOC

DTYPES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i8": 1, "i32": 4, "i64": 8}


# The netc dialect's registered ops (as MLIR contexts register dialects): netc.ops.registry adds
# each definition when it is imported, so the IR's parser and verifier know which `netc.*` ops
# exist without importing the layer above them.
_DIALECT: dict = {}


def register_op(ir_name: str, definition) -> None:
    _DIALECT[ir_name] = definition


def registered_op(ir_name: str):
    """The definition registered for an op name ('netc.conv2d'), or None."""
    if not _DIALECT:
        raise RuntimeError("no netc ops are registered: import netc.ops first")
    return _DIALECT.get(ir_name)


def registered_op_names() -> list:
    return sorted(_DIALECT)


class TensorType:
    """tensor<128x224x224x3xf32>; shape None is unranked (tensor<*xf32>), not yet inferred."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: tuple | list | None, dtype: str = "f32"):
        self.shape = tuple(shape) if shape is not None else None
        self.dtype = dtype

    @property
    def ranked(self) -> bool:
        return self.shape is not None

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPES[self.dtype]

    def __eq__(self, other):
        return isinstance(other, TensorType) and self.shape == other.shape and self.dtype == other.dtype

    def __hash__(self):
        return hash((self.shape, self.dtype))

    def __str__(self):
        if self.shape is None:
            return f"tensor<*x{self.dtype}>"
        dims = "".join(f"{d}x" for d in self.shape)
        return f"tensor<{dims}{self.dtype}>"

    __repr__ = __str__


UNRANKED = TensorType(None)


class SymbolRef:
    """@name: a reference to a module-level symbol (a parameter, a network)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, SymbolRef) and other.name == self.name

    def __hash__(self):
        return hash(("@", self.name))

    def __repr__(self):
        return f"@{self.name}"


class Value:
    """An SSA value: one result of an operation."""

    __slots__ = ("type", "owner", "index")

    def __init__(self, type: TensorType, owner: "Operation", index: int = 0):
        self.type, self.owner, self.index = type, owner, index

    def __repr__(self):
        return f"<Value {self.owner.attrs.get('name', self.owner.name)}#{self.index}: {self.type}>"


class Block:
    __slots__ = ("ops", "parent")

    def __init__(self, ops=None, parent: "Region | None" = None):
        self.ops: list[Operation] = []
        self.parent = parent
        for op in ops or []:
            self.append(op)

    def append(self, op: "Operation"):
        op.parent = self
        self.ops.append(op)

    def set_ops(self, ops):
        self.ops = list(ops)
        for op in self.ops:
            op.parent = self


class Region:
    __slots__ = ("block", "parent")

    def __init__(self, ops=None, parent: "Operation | None" = None):
        self.parent = parent
        self.block = Block(ops, self)

    @property
    def ops(self) -> list["Operation"]:
        return self.block.ops


class Operation:
    __slots__ = ("name", "operands", "results", "attrs", "regions", "loc", "parent", "attr_locs")

    def __init__(self, name: str, operands=(), result_types=(), attrs=None, regions=(),
                 loc: Loc | None = None):
        self.name = name
        self.operands: list[Value] = list(operands)
        self.results: list[Value] = [Value(t, self, i) for i, t in enumerate(result_types)]
        self.attrs: dict = dict(attrs or {})
        self.regions: list[Region] = []
        for r in regions:
            self.add_region(r)
        self.loc = loc or UNKNOWN_LOC
        self.parent: Block | None = None
        # Where each attribute was written in the source (frontends fill this in), so
        # diagnostics about an attribute point at its value, not just at the layer.
        self.attr_locs: dict[str, Loc] | None = None

    def add_region(self, region: Region):
        region.parent = self
        self.regions.append(region)
        return region

    @property
    def result(self) -> Value:
        return self.results[0]

    @property
    def layer_name(self) -> str | None:
        return self.attrs.get("name")

    def attr_loc(self, key: str) -> Loc:
        if self.attr_locs and key in self.attr_locs:
            return self.attr_locs[key]
        return self.loc

    def walk(self) -> Iterator["Operation"]:
        """Pre-order walk over this op and everything nested in its regions."""
        yield self
        for r in self.regions:
            for op in r.ops:
                yield from op.walk()

    def __repr__(self):
        return f"<Operation {self.name} {self.attrs.get('name', self.attrs.get('sym_name', ''))}>"


class Module(Operation):
    """builtin.module: params and networks at top level."""

    __slots__ = ()

    def __init__(self, ops=(), loc: Loc | None = None, attrs=None):
        super().__init__("builtin.module", attrs=attrs, loc=loc)
        self.add_region(Region(ops))

    @property
    def body(self) -> list[Operation]:
        return self.regions[0].ops

    def networks(self) -> list[Operation]:
        return [op for op in self.body if op.name == "netc.network"]

    def network(self, name: str | None = None) -> Operation:
        nets = self.networks()
        if name is None:
            return nets[0]
        for n in nets:
            if n.attrs.get("sym_name") == name:
                return n
        raise KeyError(name)

    def params(self) -> list[Operation]:
        return [op for op in self.body if op.name == "netc.param"]


def copy_attr(v):
    """A deep copy of plain attribute data (dicts and lists; leaves are immutable)."""
    if isinstance(v, dict):
        return {k: copy_attr(x) for k, x in v.items()}
    if isinstance(v, list):
        return [copy_attr(x) for x in v]
    return v


def is_layer(op: Operation) -> bool:
    """Layers are the ops of a network body that compute something (not structure)."""
    return op.name not in STRUCTURAL_OPS


STRUCTURAL_OPS = {"netc.block", "netc.parallel", "netc.output", "netc.layout", "netc.network",
                  "netc.param", "builtin.module"}
