"""Questions about a network op that every executor and codegen ask: its layers, inputs, outputs,
layer names and parameter roles (no torch here, so a warm `netc compile` never imports it)."""
from __future__ import annotations

import re
from collections import deque

from ..diagnostics import NetcError
from .core import STRUCTURAL_OPS, Module, Operation, SymbolRef


def unique_name(base: str, taken: set) -> str:
    """`base`, or base_2, base_3, ... : the first not in `taken` (which then holds it). The writers' and
    importers' names for what they create (ONNX values, SINGA layers)."""
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


def layers(net: Operation) -> list[Operation]:
    ops = []
    for op in net.regions[0].ops:
        if op.name in ("netc.block", "netc.parallel"):
            raise NetcError("run the default pipeline first: the network still has blocks")
        if op.name in STRUCTURAL_OPS:
            continue
        for r in op.results:
            if r.type.shape is None:
                raise NetcError(f"'{op.attrs.get('name')}' has no inferred shape; run shape-inference first")
        ops.append(op)
    return ops


def network_inputs(net: Operation) -> list[Operation]:
    return [op for op in net.regions[0].ops if op.name == "netc.input"]


def network_outputs(net: Operation) -> list[Operation]:
    """The ops whose values a run returns: the `netc.output` operands, else the layers nobody reads."""
    body = net.regions[0].ops
    outs = [v.owner for op in body if op.name == "netc.output" for v in op.operands]
    if outs:
        return list(dict.fromkeys(outs))
    read = {id(v.owner) for op in body for v in op.operands}
    return [op for op in layers(net) if op.name != "netc.input" and id(op) not in read]


def layer_name(op: Operation) -> str:
    return op.attrs.get("name") or op.name


def param_roles(module: Module) -> dict[str, str]:
    roles = {}
    for net in module.networks():
        for op in net.regions[0].ops:
            for role, ref in (op.attrs.get("params") or {}).items():
                if isinstance(ref, SymbolRef):
                    roles.setdefault(ref.name, role)
    return roles


_SPLIT = re.compile(r"self|all|[0-9]+")
MAX_SPLITS = 4096  # ways a parallel block may be split (Paleo's studies go to a few hundred workers)


def split_ref_problem(ref: str) -> str | None:
    """What is wrong with the split suffix of a parent reference, or None when it is well-formed.
    A reference is a layer name, optionally followed by one '@' and which splits of a model-parallel
    layer it means: 'self', 'all' or an index 0, 1, ... (ASCII digits only). Every reader of
    references (the .nd frontend, the Paleo importer, hand-written IR) asks this, so a bad suffix is
    reported where it is written, never reaches int() in expand-model-parallel."""
    base, at, suffix = ref.partition("@")
    if not at:
        return None
    if not base:
        return f"'{ref}': a layer name must come before '@'"
    if "@" in suffix:
        return f"'{ref}' has more than one '@' (a reference names one layer and, after '@', its splits)"
    if not _SPLIT.fullmatch(suffix):
        return (f"'{ref}': the split after '@' must be 'self', 'all' or an index (0, 1, ...), "
                f"got '{suffix}'")
    return None


def singa_sort(nodes: list) -> list:
    """SINGA's Graph::Sort (spec 5.8) over nodes with `srcs` and `dsts` lists: breadth first from the
    nodes without sources, a node ready once its sources are visited -- but a node in a
    bidirectional pair (an RBM's hidden and visible layers source each other) once its first source
    is. The order stops short of `nodes` where they hold a cycle (the callers say so)."""
    queue = deque(n for n in nodes if not n.srcs)
    queued, visited, order = set(queue), set(), []
    stalls = 0
    while queue:
        n = queue.popleft()
        bi = any(n in s.srcs for s in n.srcs)
        ready = (n.srcs[0] in visited) if (bi and len(n.srcs) > 1) else all(s in visited for s in n.srcs)
        if ready:
            order.append(n)
            visited.add(n)
            stalls = 0
            for d in n.dsts:
                if d not in queued:
                    queued.add(d)
                    queue.append(d)
        else:
            queue.append(n)
            stalls += 1
            if stalls > len(queue):
                break
    return order


def one_network(module, what: str):
    """The module's one network; else a located error saying that `what` (e.g. "netc compile
    needs a file with") takes one: at the second network (the first in a note), or at the top of
    a file that has none."""
    nets = module.networks()
    if len(nets) == 1:
        return nets[0]
    at = nets[1].loc if nets else module.loc
    err = NetcError(f"{what} exactly one network; this one has {len(nets)}", at if at is not None and at.line else None)
    if nets:
        err.note(f"the first, '{nets[0].attrs.get('sym_name')}', is here", nets[0].loc)
    raise err

