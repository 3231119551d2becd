"""partition: place every op on one of K workers and make every crossing explicit (docs/partitioning.md).

Input: a shape-inferred network whose layers say how to distribute them, and a worker count K
(ctx.options["partition"]["workers"], `--workers K`; else the file's own: the largest
`num_partitions` of its layers, which the SINGA frontend sets from cluster.nworkers_per_group;
else 1, and the pass changes nothing):

  partition_dim: 0   the layer is split along the batch: K copies on K shards (data parallelism;
                     its parameters replicated, one symbol, their gradients all-reduced in training)
  partition_dim: 1   split along its features: a convolution's output channels or an inner product's
                     outputs are cut in K (parameters sliced: `<param>:<i>`, each worker owns one);
                     pointwise layers (activations, dropout, pooling) follow a split input
  location: L        the whole layer on worker L (a pipeline of stages); Paleo's `@i` splits (the
                     `split_index` expand-model-parallel leaves) are locations i mod K
  (nothing)          worker 0; an input without annotations is read by every worker that needs it

Output: the same network as one program over K workers. Every op carries `worker`; each copy of a
layer is named `<layer>:<i>` and carries `partition = {of: <layer>, ...}`, how its value relates
to the logical one (dim/index/count: a shard; replica; reduce: mean, a loss over a shard; partial:
a row-parallel partial sum); sliced parameters carry `slice_of`. Where a value changes worker or
partitioning the pass inserts slices and concats (netc.slice / netc.concat) and communication
(ops/comm.py): send/recv, all_gather, reduce_scatter, all_reduce, broadcast, with their bytes.

Two lowerings of the same annotations:

* SINGA's (the network has `num_partitions`, as every SINGA import does): SINGA's own graph
  construction (shared/spec/singa-format.md 5.5-5.8 for v0.2+, 6 for v0.1) over the IR: model
  splits, the connection layers split(S) / slice(S) / concate(...), K nodes per layer named
  `<layer>:<i>`, a kBridgeSrc/kBridgeDst pair per cross-worker edge into a concate (netc.send /
  netc.recv named `bridge_src(...)` / `bridge_dst(...)`), Graph::Sort's order. SINGA's nodes and
  shapes come out of this pass (the frontend builds the logical network). One deliberate
  difference: a kSlice's blob j goes to the consumer on worker j (SINGA hands blobs out in
  first-request order, which feeds a worker another worker's samples).
* netc's (everything else: .nd, Paleo): typed collectives where they fit. A layer split by
  features reads its whole input: all_gather of a batch-split value, broadcast of one on a single
  worker. An inner product whose input arrives split by features runs row-parallel when that moves
  fewer bytes than gathering its input (Megatron's column- then row-parallel pair): each worker
  multiplies its rows, then reduce_scatter (to a split output) or all_reduce. A change of split
  dimension is an all-to-all (slices, send/recv, concat); a value needed on one worker is sent
  (gathered). Concats on each worker of one value from every worker, in rank order (Paleo's
  `X@all` inside a parallel block), become all_gather.

Errors (the user's): a size that does not divide by K (SINGA's B9: batchsize, num_filters,
num_output), a location outside 0..K-1, a layer that cannot be split by features, SINGA's B2 (two
connection layers of one name), B3 (v0.1 never bridges), B6 (partition_dim -1 beside 0/1), B16
(share_from on a partition_dim 1 layer).
"""
from __future__ import annotations

import re

from ..diagnostics import NetcError
from ..ir.core import STRUCTURAL_OPS, Operation, SymbolRef, TensorType, copy_attr
from ..ir.query import network_outputs, singa_sort
from ..ops import lookup, prod
from ..ops.registry import ShapeError, result_dtype
from .registry import Pass, register_pass

# ops that split their output features when partitioned by features, and the dimension of their
# weight and bias that holds those features
FEATURE_OPS = {"netc.conv2d": {"weight": -1, "bias": 0}, "netc.inner_product": {"weight": 1, "bias": 0}}
# ops that work on each feature (channel) on its own: they follow an input split by features
CHANNELWISE = {"netc.relu", "netc.sigmoid", "netc.tanh", "netc.dropout", "netc.identity", "netc.maxpool",
               "netc.avgpool", "netc.elementwise", "netc.opaque"}


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


def _pos(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


class _Emitter:
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
        d = _pos(dim, len(shape))
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


def _reorder_params(module, extra: dict):
    """Parameters in first-use order (as materialize-params leaves them), the new slices included;
    logical parameters no layer uses any more (they were sliced) dropped."""
    params = {p.attrs["sym_name"]: p for p in module.params()}
    params.update(extra)
    order = []
    for net in module.networks():
        for op in net.regions[0].ops:
            for ref in (op.attrs.get("params") or {}).values():
                if isinstance(ref, SymbolRef) and ref.name in params and ref.name not in order:
                    order.append(ref.name)
    for name in list(order):
        sf = params[name].attrs.get("share_from")
        if sf is not None and sf.name not in order:
            order.append(sf.name)
    sliced = {p.attrs["slice_of"]["name"] for p in extra.values()}
    rest = [n for n in params if n not in order and n not in sliced]
    others = [op for op in module.body if op.name != "netc.param"]
    module.regions[0].block.set_ops([params[n] for n in order + rest] + others)


@register_pass
class Partition(Pass):
    name = "partition"
    title = "Partition"
    requires = ("materialize-params", "dce")
    summary = "place every op on one of K workers (partition_dim, location, Paleo splits); insert slices, concats and communication"

    def needed(self, module):
        return any(not is_partitioned(n) for n in module.networks())

    def applies(self, module, ctx) -> bool:
        """Only a network to run on K > 1 workers has anything to partition."""
        opts = ctx.options.get("partition", {})
        return any(not is_partitioned(n) and workers_of(n, opts) > 1 for n in module.networks())

    def run(self, module, ctx):
        if ctx.diag.has_errors():
            # the frontend's errors do not stop the pipeline, but the layers it marked invalid have no
            # shapes to split: stop here with what was reported (plan-memory does the same)
            raise NetcError(list(ctx.diag.diagnostics))
        opts = ctx.options.get("partition", {})
        extra: dict = {}
        for net in module.networks():
            if is_partitioned(net):
                continue
            if "gradients" in net.attrs and workers_of(net, opts) > 1:
                raise NetcError("the partition pass runs on the forward network, before the training passes "
                                "(backward, optimizer); split-workers completes the training program per worker")
            bad = [op for op in net.regions[0].ops if "num_partitions" in op.attrs
                   and (not isinstance(op.attrs["num_partitions"], int) or isinstance(op.attrs["num_partitions"], bool)
                        or op.attrs["num_partitions"] < 1)]
            for op in bad:
                ctx.diag.error(f"'num_partitions' must be a positive integer, got {op.attrs['num_partitions']!r}",
                               op.attr_loc("num_partitions"))
            if bad:
                continue
            K = workers_of(net, opts)
            if K < 1:
                raise NetcError(f"the number of workers must be at least 1, got {K}")
            if K == 1:
                continue
            singa = "singa_graph" in module.attrs or any("num_partitions" in op.attrs for op in net.regions[0].ops)
            em = _Emitter(module, net, K, ctx.diag)
            if singa:
                _SingaLowering(em, module.attrs.get("singa_graph", "v0.2+")).run()
                if em.singa_graph is not None:   # for tests and tools: SINGA's nodes, '@' names
                    ctx.notes.setdefault("singa_graph", {})[net.attrs["sym_name"]] = em.singa_graph
            else:
                if not any(k in op.attrs for op in net.regions[0].ops
                           for k in ("partition_dim", "location", "split_index")):
                    ctx.diag.warning(f"network '{net.attrs['sym_name']}' says nothing about partitioning (partition_dim, "
                                     f"location, parallel splits): every layer runs on worker 0 of {K}", net.loc,
                                     width=len(net.attrs["sym_name"]))
                _NetcLowering(em, opts).run()
            extra.update(em.new_params)
        if extra or any(is_partitioned(n) for n in module.networks()):
            _reorder_params(module, extra)


# ============================================================================================
# SINGA's graph construction (spec 5.5-5.8; 6 for v0.1)

_NODE = re.compile(r"^(?P<base>.*):(?P<idx>\d+)(?P<suffix>(?:\.[^:()>]*)?)$")
_TRANSPOSE_4D = {0: 0, 1: 3, 2: 1, 3: 2}    # SINGA's NCHW dimension -> netc's NHWC


def _netc_dim(d: int, rank: int) -> int:
    return _TRANSPOSE_4D.get(d, d) if rank == 4 else d


def _origin(layer: str) -> str:
    """The config layer of a SINGA layer name ('0#fc' -> 'fc')."""
    m = re.match(r"^\d+#(.*)$", layer)
    return m.group(1) if m else layer


class _Lay:
    __slots__ = ("name", "pd", "ops", "main", "srcs", "kind", "src", "made_for", "gen", "width", "loc", "eff", "orig")

    def __init__(self, name, pd, kind, loc, width=0):
        self.name, self.pd, self.kind, self.loc, self.width = name, pd, kind, loc, width
        self.ops: list = []          # the logical ops of a user layer (main op first in body order)
        self.main = None
        self.srcs: list = []         # layer names, in SINGA's edge order
        self.src = None              # connection layers: their source layer
        self.made_for = None
        self.gen: dict = {}
        self.eff: dict = {}          # user layers: source layer -> the layer actually read (after 5.5 / 5.6)
        self.orig: list = []


class _Node:
    __slots__ = ("name", "lay", "pid", "srcs", "dsts", "bridge")

    def __init__(self, name, lay, pid, bridge=None):
        self.name, self.lay, self.pid, self.bridge = name, lay, pid, bridge
        self.srcs: list = []
        self.dsts: list = []


def _edge(a, b):
    a.dsts.append(b)
    b.srcs.append(a)


class _SingaLowering:
    def __init__(self, em: _Emitter, version: str):
        self.em, self.K, self.v1 = em, em.K, version == "v0.1"

    def error(self, msg, loc, notes=()):
        d = self.em.diag.error(msg, loc)
        for n in notes:
            d.note(*n) if isinstance(n, tuple) else d.note(n)
        return d

    def conn(self, lay) -> str:
        """SINGA's src_conn of a layer, from its netc op (conv, inner product, softmax: kOneToAll)."""
        op = lay.main
        if op is None:
            return "kOneToOne"
        if op.name in ("netc.conv2d", "netc.softmax"):
            return "kOneToAll"
        if op.name == "netc.inner_product":
            return "kOneToOne" if self.v1 else "kOneToAll"
        return "kOneToOne"

    def one_to_many(self, lay) -> bool:
        """SINGA's dst_layer_connection kOneToMany (no model split): input layers (a kDummy input, a
        `whole` one, is a NeuronLayer: kOneToOne), GRUs, and a user's kSlice, which hands reader k
        its blob k (the frontend's rule, singa/graph.py)."""
        op = lay.main
        if op is None:
            return False
        if op.name == "netc.input":
            return not op.attrs.get("whole")
        return op.name in ("netc.gru", "netc.slice")

    # ------------------------------------------------------------------------------------------
    def run(self):
        em, K = self.em, self.K
        ops = [op for op in em.net.regions[0].ops if op.name not in STRUCTURAL_OPS]
        layers: dict[str, _Lay] = {}
        order: list[_Lay] = []
        self.lay_of: dict[int, _Lay] = {}
        self.suffix: dict[int, tuple] = {}       # id(op) -> (base, width, suffix)
        lazy_inputs = set()
        for op in ops:
            name = op.attrs.get("name")
            m = _NODE.match(name or "")
            base, width, suffix = (m.group("base"), len(m.group("idx")), m.group("suffix")) if m else (name, 0, "")
            self.suffix[id(op)] = (base, width, suffix)
            lay = layers.get(base)
            if lay is None:
                pd = op.attrs.get("partition_dim", 0)
                lay = layers[base] = _Lay(base, pd, "user", op.loc, width)
                order.append(lay)
            lay.ops.append(op)
            if not suffix:
                lay.main = op
                lay.pd = op.attrs.get("partition_dim", 0)
                lay.loc = op.loc
            elif op.name == "netc.input":
                lazy_inputs.add(id(op))
            self.lay_of[id(op)] = lay
        for lay in order:
            for op in lay.ops:
                for v in op.operands:
                    s = self.lay_of[id(v.owner)]
                    if s is not lay and s.name not in lay.srcs:
                        lay.srcs.append(s.name)
        self.lazy_inputs = lazy_inputs
        for lay in order:
            lay.orig = list(lay.srcs)
        if self.v1:
            return self.run_v1(order, layers)
        # 5.5 model splits (no op: SINGA's kSplit shares its source's data)
        count: dict = {}
        for lay in order:
            for s in lay.srcs:
                count[s] = count.get(s, 0) + 1
        splits = []
        for lay in order:
            if count.get(lay.name, 0) > 1 and not self.one_to_many(lay) and lay.main is not None:
                sp = _Lay(f"split({lay.name})", lay.pd, "split", lay.loc)
                sp.src = lay.name
                sp.srcs = [lay.name]
                splits.append(sp)
        for sp in splits:
            for lay in order:
                if lay.kind == "user":
                    lay.srcs = [sp.name if s == sp.src else s for s in lay.srcs]
        lays = order + splits
        by_name = {lay.name: lay for lay in lays}
        # 5.6 connection layers
        conn, dup = [], set()

        def add(name, kind, pd, src, gen, made_for):
            if name in by_name:                                           # B2
                other = by_name[name]
                if src.name in dup:
                    return other
                dup.add(name)
                who = other.made_for.name if other.made_for else other.name
                self.error(f"SINGA names connection layers after their source only: '{name}' is needed for "
                           f"'{made_for.name}' and for '{who}', and SINGA aborts (\"node {name}@0 already exists\")",
                           made_for.loc, [(f"'{who}' is here", other.loc)])
                return other
            lay = _Lay(name, pd, kind, src.loc if kind in ("split", "slice") else made_for.loc)
            lay.src, lay.srcs, lay.made_for, lay.gen = src.name, [src.name], made_for, gen
            by_name[name] = lay
            conn.append(lay)
            return lay

        for D in lays:
            pd, ct = D.pd, self.conn(D)
            new = []
            for sname in D.srcs:
                S = by_name[sname]
                ps = S.pd
                if ps != pd and (ps == -1 or pd == -1):                  # B6
                    self.error(f"partition_dim -1 is unsupported by SINGA v0.2/v0.3 with K > 1: layer "
                               f"'{_origin(D.name)}' (partition_dim {pd}) reads '{_origin(S.name)}' (partition_dim "
                               f"{ps}); SINGA builds a slice or concate on dimension -1 and aborts", D.loc)
                    new.append(sname)
                    continue
                if pd == 1 and ct == "kOneToAll":
                    sp = add(f"split({sname})", "split", ps, S, {"num_splits": K}, D)
                    cc = add(f"concate({sp.name})", "concate", pd, sp, {"concate_dim": ps}, D)
                    new.append(cc.name)
                elif ps == pd:
                    new.append(sname)
                else:
                    sl = add(f"slice({sname})", "slice", ps, S, {"slice_dim": pd}, D)
                    cc = add(f"concate({sl.name})", "concate", pd, sl, {"concate_dim": ps}, D)
                    new.append(cc.name)
            D.srcs = new
            if D.kind == "user":
                D.eff = dict(zip(D.orig, new))
        lays += conn
        for lay in lays:                                                   # B16
            if lay.pd == 1 and lay.main is not None:
                for ref in (lay.main.attrs.get("params") or {}).values():
                    p = self.em.params.get(ref.name) if isinstance(ref, SymbolRef) else None
                    if p is not None and p.attrs.get("share_from") is not None:
                        self.error(f"param '{ref.name}' of layer '{lay.name}' shares from "
                                   f"'{p.attrs['share_from'].name}' on a partition_dim 1 layer with K = {K}: SINGA's "
                                   f"param names carry no partition, so it resolves to an arbitrary partition's slice",
                                   p.loc)
        if self.em.diag.has_errors():
            return
        # 5.7 nodes and edges
        nodes, lay_nodes = [], {}

        def node_name(lay, i):
            return f"{lay.name}:{i:0{lay.width}d}" if lay.width else f"{lay.name}:{i}"

        for lay in lays:
            lay_nodes[lay.name] = []
            for i in range(K):
                n = _Node(node_name(lay, i), lay, i)
                nodes.append(n)
                lay_nodes[lay.name].append(n)
        for D in lays:
            dn = lay_nodes[D.name]
            for sname in D.srcs:
                sn = lay_nodes[sname]
                if D.kind == "concate":
                    for i in range(K):
                        for j in range(K):
                            if i == j:
                                _edge(sn[i], dn[j])
                            else:
                                tag = f"{sn[i].name}->{dn[j].name}"
                                bs = _Node(f"bridge_src({tag})", D, i, bridge=("src", sn[i], dn[j]))
                                bd = _Node(f"bridge_dst({tag})", D, j, bridge=("dst", sn[i], dn[j]))
                                nodes += [bs, bd]
                                _edge(sn[i], bs)
                                _edge(bs, bd)
                                _edge(bd, dn[j])
                else:
                    for i in range(K):
                        _edge(sn[i], dn[i])
        self.emit_sorted(_sort(nodes), by_name, lay_nodes)

    # ------------------------------------------------------------------------------------------
    def divided(self, op, value, what, loc):
        if value % self.K:
            raise NetcError(f"{what} {value} is not divisible by the {self.K} partitions (SINGA truncates silently "
                            f"to {value // self.K} per partition)", loc)
        return value // self.K

    def sizes_of(self, op):
        """The uneven batch partition sizes an op inherits from its inputs (v0.3's repeated batchsize)."""
        seen, stack = set(), [op]
        while stack:
            o = stack.pop()
            if id(o) in seen:
                continue
            seen.add(id(o))
            if o.name == "netc.input" and o.attrs.get("partition_sizes"):
                return list(o.attrs["partition_sizes"])
            stack.extend(v.owner for v in o.operands)
        return None

    def partition_attrs(self, lay, op, i):
        """The attributes and parameters of partition i of a user layer's op (SINGA's Setup with K)."""
        K, a = self.K, {}
        # a `whole` input (SINGA's kDummy: dummy_conf.shape on every partition) keeps its shape
        if lay.pd == 0 and op.name == "netc.input" and op.attrs.get("shape") and not op.attrs.get("whole"):
            shape = list(op.attrs["shape"])
            sizes = op.attrs.get("partition_sizes")    # v0.3: one batchsize per partition
            if sizes:
                if len(sizes) != K or sum(sizes) != shape[0]:
                    raise NetcError(f"input '{op.attrs.get('name')}' has partition sizes {sizes} for {K} partitions "
                                    f"of a batch of {shape[0]}", op.attr_loc("shape"))
                shape[0] = sizes[i]
            else:
                shape[0] = self.divided(op, shape[0], "batchsize", op.attr_loc("shape"))
            a["shape"] = shape
        if lay.pd == 1 and op.name in FEATURE_OPS:
            if op.name == "netc.conv2d":
                f = list(op.attrs["filter"])
                f[3] = self.divided(op, f[3], "num_filters", op.loc)
                a["filter"] = f
            else:
                a["num_outputs"] = self.divided(op, op.attrs["num_outputs"], "num_output", op.loc)
            refs = {}
            for role, ref in (op.attrs.get("params") or {}).items():
                dim = FEATURE_OPS[op.name].get(role)
                refs[role] = (self.em.slice_param(ref, dim, i, K, f":{i}", op.loc)
                              if dim is not None and isinstance(ref, SymbolRef) else ref)
            a["params"] = refs
        return a

    def emit_sorted(self, order, by_name, lay_nodes):
        em, K = self.em, self.K
        value: dict = {}            # (layer name, i) -> Value (the main op's result)
        clones: dict = {}           # (id(logical op), i) -> Operation
        blobs: dict = {}            # (slice layer, i, blob) -> Value
        done_inputs = set()

        def main_value(lname, i):
            lay = by_name[lname]
            if lay.kind == "split":
                return main_value(lay.src, i)
            return value[(lname, i)]

        def source_value(lname, i, dest):
            """What a consumer on worker `dest` reads of layer lname's node i (slice: blob `dest`)."""
            lay = by_name[lname]
            if lay.kind != "slice":
                return main_value(lname, i)
            key = (lname, i, dest)
            if key not in blobs:
                src = main_value(lay.src, i)
                x = src.type.shape
                nm = f"{lname}:{i}" if dest == 0 else f"{lname}:{i}.{dest}"
                op = em.new("netc.slice", [src], {"name": nm, "dim": _netc_dim(lay.gen["slice_dim"], len(x)),
                                                  "num_slices": K, "index": dest}, lay.loc, i)
                blobs[key] = op.results[0]
            return blobs[key]

        def logical_part(lay, op, i):
            """How partition i of a user op relates to the logical value."""
            base, width, suffix = self.suffix[id(op)]
            of = op.attrs["name"]
            out = {"of": of}
            d = lookup(op.name)
            if lay.pd == 0 and op.results and op.results[0].type.shape and op.results[0].type.shape != ():
                out.update(dim=0, index=i, count=K)
                sizes = self.sizes_of(op)
                if sizes:
                    out["sizes"] = sizes
            elif lay.pd == 0 and d is not None and d.is_loss:
                out["reduce"] = "mean"
            elif lay.pd == 1 and op.name in FEATURE_OPS:
                out.update(dim=feature_dim(op.results[0].type.shape), index=i, count=K)
            else:
                out["replica"] = True
            return out

        def operand(lay, v, i):
            s = self.lay_of[id(v.owner)]
            if v.owner is not s.main or s is lay:     # a companion (a label input): its own partition
                c = clones.get((id(v.owner), i))
                if c is None:
                    raise NetcError(f"'{lay.name}' reads '{v.owner.attrs.get('name')}', which SINGA's graph does not "
                                    f"place before it", lay.loc)
                return c.results[v.index]
            eff = lay.eff.get(s.name, s.name)
            return source_value(eff, i, i)

        def emit_user(lay, i):
            for op in lay.ops:
                for v in op.operands:
                    if id(v.owner) in self.lazy_inputs and (id(v.owner), i) not in done_inputs:
                        src_lay = self.lay_of[id(v.owner)]
                        emit_op(src_lay, v.owner, i)
                        done_inputs.add((id(v.owner), i))
            for op in lay.ops:
                if id(op) in self.lazy_inputs:
                    continue
                emit_op(lay, op, i)

        def emit_op(lay, op, i):
            base, width, suffix = self.suffix[id(op)]
            name = (f"{base}:{i:0{width}d}{suffix}" if width else f"{base}:{i}{suffix}")
            ins = [operand(lay, v, i) for v in op.operands]
            c = em.clone(op, name, ins, i, self.partition_attrs(lay, op, i), logical_part(lay, op, i))
            if "dim" in c.attrs["partition"] and c.results and c.results[0].type.shape == op.results[0].type.shape:
                # the whole value on this worker (from a `whole` input): a replica, not a shard
                c.attrs["partition"] = {"of": op.attrs["name"], "replica": True}
            clones[(id(op), i)] = c
            if op is lay.main:
                value[(lay.name, i)] = c.results[0]

        kinds = {"user": "layer", "split": "kSplit", "slice": "kSlice", "concate": "kConcate"}
        em.singa_graph = [{"node": n.name.replace(":", "@"), "pid": n.pid, "src": [x.name.replace(":", "@") for x in n.srcs],
                           "type": ("kBridgeSrc" if n.bridge[0] == "src" else "kBridgeDst") if n.bridge else
                           kinds[n.lay.kind]} for n in order]
        sends = {}
        for n in order:
            lay = n.lay
            if n.bridge is not None:
                kind, s, d = n.bridge
                if kind == "src":
                    v = source_value(s.lay.name, s.pid, d.pid)
                    op = em.new("netc.send", [v], {"name": n.name, "peer": d.pid}, lay.loc, n.pid)
                    sends[(s.name, d.name)] = op.results[0]
                else:
                    em.new("netc.recv", [sends[(s.name, d.name)]], {"name": n.name, "peer": s.pid}, lay.loc, n.pid)
                    value[("bridge", s.name, d.name)] = em.body[-1].results[0]
                continue
            if lay.kind == "user":
                emit_user(lay, n.pid)
            elif lay.kind == "split":
                continue
            elif lay.kind == "slice":
                source_value(lay.name, n.pid, 0)
            elif lay.kind == "concate":
                j = n.pid
                ins = []
                for i, s in enumerate(lay_nodes[lay.src]):
                    ins.append(source_value(lay.src, i, j) if i == j else value[("bridge", s.name, n.name)])
                rank = len(ins[0].type.shape)
                op = em.new("netc.concat", ins, {"name": n.name, "dim": _netc_dim(lay.gen["concate_dim"], rank)},
                            lay.loc, j)
                value[(lay.name, j)] = op.results[0]
        em.finish([])

    # ------------------------------------------------------------------------------------------
    def run_v1(self, order, layers):
        """v0.1 (spec 6) with K > 1: K nodes per partitioned layer, pairwise edges (the frontend rejected
        every edge SINGA v0.1 would carry across workers: it never inserts bridges, B3)."""
        K, em = self.K, self.em
        for D in order:
            for sname in D.srcs:
                S = layers[sname]
                if S.pd != D.pd or D.pd not in (0, 1):
                    raise NetcError(f"SINGA v0.1 cannot partition the edge from '{S.name}' to '{D.name}' "
                                    f"(partition_dim {S.pd} -> {D.pd}) with K = {K}", D.loc)
        clones = {}
        for lay in order:
            for i in range(K):
                for op in lay.ops:
                    base, width, suffix = self.suffix[id(op)]
                    name = f"{base}:{i:0{width}d}{suffix}" if width else f"{base}:{i}{suffix}"
                    ins = [clones[(id(v.owner), i)].results[v.index] for v in op.operands]
                    part = {"of": op.attrs["name"]}
                    if lay.pd == 0 and op.results[0].type.shape:
                        part.update(dim=0, index=i, count=K)
                    elif lay.pd == 0 and lookup(op.name).is_loss:
                        part["reduce"] = "mean"
                    elif lay.pd == 1 and op.name in FEATURE_OPS:
                        part.update(dim=feature_dim(op.results[0].type.shape), index=i, count=K)
                    else:
                        part["replica"] = True
                    clones[(id(op), i)] = em.clone(op, name, ins, i, self.partition_attrs(lay, op, i), part)
        em.finish([])


def _sort(nodes):
    """SINGA's Graph::Sort (spec 5.8) of the partitioned graph."""
    order = singa_sort(nodes)
    if len(order) != len(nodes):
        raise NetcError(f"{len(nodes) - len(order)} node(s) of the partitioned graph cannot be ordered")
    return order


# ============================================================================================
# netc's lowering: typed collectives

class _Layout:
    """Where a logical value lives: kind 'on' (whole, on worker w), 'rep' (whole, on every worker),
    'split' (shard i on worker i along dim), 'partial' (summands, one per worker). `vals`: worker ->
    Value (for 'rep' inputs filled lazily)."""
    __slots__ = ("kind", "w", "dim", "vals", "name", "op", "wanted")

    def __init__(self, kind, vals, w=None, dim=None, name="", op=None):
        self.kind, self.vals, self.w, self.dim, self.name, self.op = kind, vals, w, dim, name, op
        self.wanted: set = set()     # the workers whose layers read the whole value


class _NetcLowering:
    def __init__(self, em: _Emitter, opts: dict):
        self.em, self.K, self.opts = em, em.K, opts
        self.cache: dict = {}

    def error(self, msg, loc):
        raise NetcError(msg, loc)

    # -- placement --------------------------------------------------------------------------
    def placement(self, op):
        """('split', 0) | ('feature',) | ('channelwise',) | ('on', w) | ('rep',) for an input."""
        K = self.K
        pd, loc = op.attrs.get("partition_dim"), op.attrs.get("location")
        if loc is not None and pd in (0, 1):
            self.error(f"'{op.attrs.get('name')}' has both partition_dim {pd} and location {loc}: a partitioned layer "
                       f"runs on every worker (SINGA's scheme 4, all partitions on one worker, is not supported)",
                       op.attr_loc("location"))
        if loc is not None and not 0 <= loc < K:
            self.error(f"location {loc} of '{op.attrs.get('name')}' needs at least {loc + 1} workers; there are {K}",
                       op.attr_loc("location"))
        if op.name == "netc.input":
            if pd == 0:
                return ("split", 0)
            if pd == 1:
                self.error(f"input '{op.attrs.get('name')}': inputs are split along the batch (partition_dim 0) or "
                           f"not at all", op.attr_loc("partition_dim"))
            return ("on", loc) if loc is not None else ("rep",)
        if pd == 0:
            return ("split", 0)
        if pd == 1:
            if op.name in FEATURE_OPS:
                return ("feature",)
            if op.name in CHANNELWISE:
                return ("channelwise",)
            self.error(f"'{op.attrs.get('name')}' ({lookup(op.name).type_name}) cannot be split by features "
                       f"(partition_dim 1): only convolutions and inner products split their outputs, and pointwise "
                       f"layers and pooling follow a split input", op.attr_loc("partition_dim"))
        if loc is not None:
            return ("on", loc)
        if "split_index" in op.attrs:
            return ("on", op.attrs["split_index"] % K)
        return ("on", 0)

    # -- conversions --------------------------------------------------------------------------
    def name(self, base):
        n, k = base, 1
        while n in self.em.names:
            n = f"{base}_{k}"
            k += 1
        self.em.names.add(n)
        return n

    def rep_value(self, lay: _Layout, w: int):
        """The whole value on worker w, for a replicated layout (an input: its copy on w, made on first use)."""
        if w not in lay.vals:
            op = lay.op
            c = self.em.clone(op, f"{lay.name}:{w}", [], w, partition={"of": lay.name, "replica": True})
            lay.vals[w] = c.results[0]
        return lay.vals[w]

    def send(self, v, src, dst, base, loc):
        key = ("send", id(v), dst)
        if key not in self.cache:
            s = self.em.new("netc.send", [v], {"name": self.name(f"{base}.send({src}->{dst})"), "peer": dst}, loc, src)
            r = self.em.new("netc.recv", [s.results[0]], {"name": self.name(f"{base}.recv({src}->{dst})"), "peer": src},
                            loc, dst)
            self.cache[key] = r.results[0]
        return self.cache[key]

    def whole_on(self, lay: _Layout, w: int, loc, everywhere=False):
        """The whole logical value on worker w (everywhere: every worker will ask; collectives then)."""
        K = self.K
        if lay.kind == "on":
            if lay.w == w:
                return lay.vals[w]
            if everywhere or (K > 2 and lay.wanted | {lay.w} == set(range(K))):   # every worker reads it
                key = ("bcast", lay.name)
                if key not in self.cache:
                    x = lay.vals[lay.w]
                    out = {}
                    for r in range(K):     # every rank takes part, the root too
                        out[r] = self.em.new("netc.broadcast", [x], {"name": self.name(f"{lay.name}.broadcast:{r}"),
                                                                     "root": lay.w, "ranks": list(range(K))},
                                             loc, r).results[0]
                    self.cache[key] = out
                return self.cache[key][w]
            return self.send(lay.vals[lay.w], lay.w, w, lay.name, loc)
        if lay.kind == "rep":
            return self.rep_value(lay, w)
        if lay.kind == "split":
            if everywhere:
                key = ("gather_all", lay.name)
                if key not in self.cache:
                    ins = [lay.vals[i] for i in range(K)]
                    self.cache[key] = {r: self.em.new("netc.all_gather", ins, {
                        "name": self.name(f"{lay.name}.all_gather:{r}"), "dim": lay.dim, "ranks": list(range(K))},
                        loc, r, {"of": lay.name, "replica": True}).results[0] for r in range(K)}
                return self.cache[key][w]
            key = ("gather", lay.name, w)
            if key not in self.cache:
                ins = [lay.vals[i] if i == w else self.send(lay.vals[i], i, w, f"{lay.name}:{i}", loc) for i in range(K)]
                self.cache[key] = self.em.new("netc.concat", ins, {"name": self.name(f"{lay.name}.gather"),
                                                                   "dim": lay.dim}, loc, w).results[0]
            return self.cache[key]
        raise AssertionError(lay.kind)

    def shard(self, lay: _Layout, d: int, i: int, loc):
        """Shard i along dim d, on worker i."""
        K = self.K
        if lay.kind == "split" and lay.dim == d:
            return lay.vals[i]
        if lay.kind == "rep":
            key = ("slice", lay.name, d, i)
            if key not in self.cache:
                x = self.rep_value(lay, i)
                self.check_divides(x, d, lay.name, loc)
                self.cache[key] = self.em.new("netc.slice", [x], {"name": self.name(f"{lay.name}.slice{d}:{i}"),
                                                                  "dim": d, "num_slices": K, "index": i}, loc, i).results[0]
            return self.cache[key]
        if lay.kind == "on":
            key = ("scatter", lay.name, d, i)
            if key not in self.cache:
                x = lay.vals[lay.w]
                self.check_divides(x, d, lay.name, loc)
                part = self.em.new("netc.slice", [x], {"name": self.name(f"{lay.name}.slice{d}:{i}"), "dim": d,
                                                       "num_slices": K, "index": i}, loc, lay.w).results[0]
                self.cache[key] = part if i == lay.w else self.send(part, lay.w, i, f"{lay.name}.slice{d}:{i}", loc)
            return self.cache[key]
        if lay.kind == "split":          # all-to-all: every shard cut along d, piece j to worker j
            key = ("a2a", lay.name, d)
            if key not in self.cache:
                pieces = {}
                for s in range(K):
                    x = lay.vals[s]
                    self.check_divides(x, d, f"{lay.name}:{s}", loc)
                    for j in range(K):
                        p = self.em.new("netc.slice", [x], {"name": self.name(f"{lay.name}:{s}.slice{d}.{j}"), "dim": d,
                                                            "num_slices": K, "index": j}, loc, s).results[0]
                        pieces[(s, j)] = p
                out = {}
                for j in range(K):
                    ins = [pieces[(s, j)] if s == j else self.send(pieces[(s, j)], s, j, f"{lay.name}:{s}.slice{d}.{j}",
                                                                    loc) for s in range(K)]
                    out[j] = self.em.new("netc.concat", ins, {"name": self.name(f"{lay.name}.dim{d}:{j}"),
                                                              "dim": lay.dim}, loc, j).results[0]
                self.cache[key] = out
            return self.cache[key][i]
        raise AssertionError(lay.kind)

    def check_divides(self, v, d, what, loc):
        n = v.type.shape[d]
        if n % self.K:
            self.error(f"'{what}' {list(v.type.shape)} cannot be split {self.K} ways along dimension {d} ({n} is not "
                       f"divisible by {self.K})", loc)

    # -- the walk -------------------------------------------------------------------------------
    def run(self):
        em, K = self.em, self.K
        ops = [op for op in em.net.regions[0].ops if op.name not in STRUCTURAL_OPS]
        # the logical outputs, stated explicitly: a broadcast's root member or a collective whose result
        # one worker does not read must not become an output
        logical_outs = [o.results[0] for o in network_outputs(em.net)]
        layouts: dict = {}        # id(logical Value) -> _Layout
        gathers = self.all_gather_concats(ops)
        wanted: dict = {}         # id(logical Value) -> workers whose whole-value layers read it
        for op in ops:
            try:
                k = self.placement(op)
            except NetcError:
                break
            if k[0] == "on" and id(op) not in gathers:
                for v in op.operands:
                    wanted.setdefault(id(v), set()).add(k[1])
        for op in ops:
            name = op.attrs["name"]
            kind = self.placement(op)
            if op.name == "netc.input":
                if kind[0] == "rep":
                    layouts[id(op.results[0])] = _Layout("rep", {}, name=name, op=op)
                elif kind[0] == "on":
                    c = em.clone(op, name, [], kind[1])
                    layouts[id(op.results[0])] = _Layout("on", {kind[1]: c.results[0]}, w=kind[1], name=name)
                else:
                    shape = list(op.attrs["shape"])
                    if not shape or shape[0] % K:
                        self.error(f"input '{name}' {shape} cannot be split {K} ways along the batch", op.attr_loc("shape"))
                    shape[0] //= K
                    vals = {i: em.clone(op, f"{name}:{i}", [], i, {"shape": shape},
                                        {"of": name, "dim": 0, "index": i, "count": K}).results[0] for i in range(K)}
                    layouts[id(op.results[0])] = _Layout("split", vals, dim=0, name=name)
                continue
            ins = [layouts[id(v)] for v in op.operands]
            if id(op) in gathers:
                w = kind[1]
                srcs = [ins[i].vals[i] for i in range(K)]
                a = {"name": name, "dim": _pos(op.attrs.get("dim", -1), len(op.results[0].type.shape)),
                     "ranks": list(range(K))}
                c = em.new("netc.all_gather", srcs, a, op.loc, w, None)
                c.attr_locs = dict(op.attr_locs or {})
                layouts[id(op.results[0])] = _Layout("on", {w: c.results[0]}, w=w, name=name)
                continue
            layouts[id(op.results[0])] = self.layer(op, kind, ins)
            layouts[id(op.results[0])].wanted = wanted.get(id(op.results[0]), set())
        outputs = []
        for v in logical_outs:
            lay = layouts[id(v)]
            if lay.kind == "rep" and lay.op is not None and not lay.vals:    # an input nobody reads
                self.rep_value(lay, 0)
            outputs += [lay.vals[w] for w in sorted(lay.vals)]
        em.finish(outputs)
        # replicated inputs used by one worker only keep their name
        for op in em.body:
            p = op.attrs.get("partition")
            if op.name == "netc.input" and p and p.get("replica"):
                copies = [o for o in em.body if o.name == "netc.input" and (o.attrs.get("partition") or {}).get("of")
                          == p["of"]]
                if len(copies) == 1:
                    op.attrs["name"] = p["of"]
                    del op.attrs["partition"]

    def all_gather_concats(self, ops) -> set:
        """Concats (one per worker) that each read one value from every worker in rank order: all_gather."""
        K, out = self.K, set()
        place = {}
        for op in ops:
            try:
                k = self.placement(op)
            except NetcError:
                return set()
            place[id(op)] = k
        groups: dict = {}
        for op in ops:
            if op.name != "netc.concat" or len(op.operands) != K or place[id(op)][0] != "on":
                continue
            ws = [place.get(id(v.owner)) for v in op.operands]
            if all(w is not None and w[0] == "on" and w[1] == i for i, w in enumerate(ws)):
                groups.setdefault(tuple(id(v) for v in op.operands), []).append(op)
        for key, members in groups.items():
            if sorted(place[id(m)][1] for m in members) == list(range(K)):
                out.update(id(m) for m in members)
        return out

    def layer(self, op, kind, ins):
        em, K = self.em, self.K
        name = op.attrs["name"]
        opdef = lookup(op.name)
        if kind[0] == "on":
            w = kind[1]
            if op.name == "netc.inner_product" and ins and ins[0].kind == "split" and self.row_parallel_cheaper(op, ins[0], "on"):
                return self.row_parallel(op, ins[0], ("on", w))
            x = [self.whole_on(lay, w, op.loc) for lay in ins]
            c = em.clone(op, name, x, w)
            return _Layout("on", {w: c.results[0]}, w=w, name=name)
        if kind[0] == "split":
            if op.name == "netc.inner_product" and ins and ins[0].kind == "split" and ins[0].dim != 0 \
                    and self.row_parallel_cheaper(op, ins[0], "split"):
                return self.row_parallel(op, ins[0], ("split", 0))
            vals = {}
            for i in range(K):
                x = [self.shard(lay, 0, i, op.loc) for lay in ins]
                part = {"of": name, "dim": 0, "index": i, "count": K}
                if not op.results[0].type.shape:
                    part = {"of": name, "reduce": "mean"} if opdef.is_loss else {"of": name, "replica": True}
                vals[i] = em.clone(op, f"{name}:{i}", x, i, partition=part).results[0]
            return _Layout("split", vals, dim=0, name=name)
        if kind[0] == "feature":
            if op.name == "netc.inner_product" and ins[0].kind == "split" and ins[0].dim != 0 \
                    and self.row_parallel_cheaper(op, ins[0], "feature"):
                return self.row_parallel(op, ins[0], ("split", 1))
            fdim = feature_dim(op.results[0].type.shape)
            vals = {}
            for i in range(K):
                x = [self.whole_on(lay, i, op.loc, everywhere=True) for lay in ins]
                a = {}
                if op.name == "netc.conv2d":
                    f = list(op.attrs["filter"])
                    if f[3] % K:
                        self.error(f"'{name}' has {f[3]} output channels, which do not split {K} ways", op.loc)
                    f[3] //= K
                    a["filter"] = f
                else:
                    m = op.attrs["num_outputs"]
                    if m % K:
                        self.error(f"'{name}' has {m} outputs (num_outputs), which do not split {K} ways", op.loc)
                    a["num_outputs"] = m // K
                a["params"] = {role: em.slice_param(ref, FEATURE_OPS[op.name][role], i, K, f":{i}", op.loc)
                               if isinstance(ref, SymbolRef) and role in FEATURE_OPS[op.name] else ref
                               for role, ref in (op.attrs.get("params") or {}).items()}
                vals[i] = em.clone(op, f"{name}:{i}", x, i, a,
                                   {"of": name, "dim": fdim, "index": i, "count": K}).results[0]
            return _Layout("split", vals, dim=fdim, name=name)
        if kind[0] == "channelwise":
            src = ins[0]
            d = src.dim if src.kind == "split" and src.dim != 0 else feature_dim(op.operands[0].type.shape)
            vals = {}
            for i in range(K):
                x = [self.shard(lay, d, i, op.loc) for lay in ins]
                vals[i] = em.clone(op, f"{name}:{i}", x, i,
                                   partition={"of": name, "dim": d, "index": i, "count": K}).results[0]
            return _Layout("split", vals, dim=d, name=name)
        raise AssertionError(kind)

    # -- row-parallel inner products ------------------------------------------------------------
    def row_parallel_cheaper(self, op, src: _Layout, target: str) -> bool:
        """Megatron's row-parallel product (each worker multiplies its rows of W, then a reduction)
        when it moves fewer bytes than bringing the input where the column form wants it."""
        K = self.K
        a = lookup(op.name).attrs_of(op)
        x = op.operands[0].type.shape
        if len(x) != 2 or src.dim != 1 or a["activation"] != "none" or a["normalizer"] != "none":
            return False
        nx, ny = prod(x), prod(op.results[0].type.shape)
        gather = {"feature": (K - 1) * nx, "on": (K - 1) * nx // K, "split": (K - 1) * nx // K}[target]
        reduce = {"feature": (K - 1) * ny, "on": 2 * (K - 1) * ny, "split": (K - 1) * ny}[target]
        if target == "split" and op.results[0].type.shape[0] % K:
            return False
        if target == "feature" and op.results[0].type.shape[1] % K:
            return False
        return reduce < gather

    def row_parallel(self, op, src: _Layout, out):
        em, K = self.em, self.K
        name = op.attrs["name"]
        refs = op.attrs.get("params") or {}
        partials = []
        for i in range(K):
            a = {"params": {}}
            if isinstance(refs.get("weight"), SymbolRef):
                a["params"]["weight"] = em.slice_param(refs["weight"], 0, i, K, f":{i}", op.loc)
            if i == 0 and "bias" in refs:
                a["params"]["bias"] = refs["bias"]
            if i > 0:
                a["bias"] = False
            partials.append(em.clone(op, self.name(f"{name}.partial:{i}"), [src.vals[i]], i, a,
                                     {"of": name, "partial": True}).results[0])
        ranks = list(range(K))
        if out[0] == "split":
            d = out[1]
            vals = {i: em.new("netc.reduce_scatter", partials, {"name": f"{name}:{i}", "dim": d, "ranks": ranks,
                                                                 "index": i}, op.loc, i,
                              {"of": name, "dim": d, "index": i, "count": K}).results[0] for i in range(K)}
            return _Layout("split", vals, dim=d, name=name)
        vals = {i: em.new("netc.all_reduce", partials, {"name": f"{name}:{i}", "ranks": ranks}, op.loc, i,
                          {"of": name, "replica": True}).results[0] for i in range(K)}
        return _Rep(vals, name)


class _Rep(_Layout):
    """A value computed on every worker (an all_reduce's result)."""

    def __init__(self, vals, name):
        super().__init__("rep", vals, name=name)
