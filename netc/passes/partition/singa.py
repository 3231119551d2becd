"""The partition pass's lowering for networks SINGA built (they have `num_partitions`, as every
SINGA import does): SINGA's own graph construction (shared/spec/singa-format.md 5.5-5.8 for v0.2+,
6 for v0.1) over the IR: model splits, the connection layers split(S) / slice(S) / concate(...),
K nodes per layer named `<layer>:<i>`, a kBridgeSrc/kBridgeDst pair per cross-worker edge into a
concate (netc.send / netc.recv named `bridge_src(...)` / `bridge_dst(...)`), Graph::Sort's order.
SINGA's nodes and shapes come out of this pass (the frontend builds the logical network). One
deliberate difference: a kSlice's blob j goes to the consumer on worker j (SINGA hands blobs out
in first-request order, which feeds a worker another worker's samples). Errors: SINGA's B2 (two
connection layers of one name), B3 (v0.1 never bridges), B6 (partition_dim -1 beside 0/1), B9
(a size that does not divide by K; a job.conf's batchsize instead follows SINGA's rule, each
partition takes batchsize / K rounded down, with a warning), B16 (share_from on a partition_dim 1
layer)."""
from __future__ import annotations

import re

from ...diagnostics import NetcError
from ...ir.core import STRUCTURAL_OPS, SymbolRef
from ...ir.query import singa_sort
from ...ops import lookup
from .common import Emitter, feature_dim

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


class SingaLowering:
    def __init__(self, em: Emitter, version: str):
        self.em, self.K, self.v1 = em, em.K, version == "v0.1"
        self.singa_conf = "singa_graph" in em.module.attrs   # built from a job.conf: SINGA's batch rule
        self.warned: set = set()

    def error(self, msg, loc, notes=()):
        d = self.em.diag.error(msg, loc)
        for n in notes:
            d.note(*n) if isinstance(n, tuple) else d.note(n)
        return d

    def conn(self, lay) -> str:
        """SINGA's src_conn of a layer, from its netc op (OpDef.singa_one_to_all: conv, softmax, inner
        product from v0.2 on)."""
        op = lay.main
        if op is None:
            return "kOneToOne"
        d = lookup(op.name)
        if d is not None and ("v0.1" if self.v1 else "v0.2+") in d.singa_one_to_all:
            return "kOneToAll"
        return "kOneToOne"

    def one_to_many(self, lay) -> bool:
        """SINGA's dst_layer_connection kOneToMany (no model split): input layers (a kDummy input, a
        `whole` one, is a NeuronLayer: kOneToOne), GRUs, and a user's kSlice, which hands reader k
        its blob k (the frontend's rule, singa/graph.py): OpDef.singa_one_to_many."""
        op = lay.main
        if op is None:
            return False
        d = lookup(op.name)
        return d is not None and d.singa_one_to_many and not op.attrs.get("whole")

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

    def batch_share(self, lay, op, batch):
        """A partition's share of a data layer's batch. SINGA's data layers on partition_dim 0 take
        batchsize / num_partitions in C++ integer division (v0.1.0 src/neuralnet/input_layer.cc:66,169;
        v0.2.0 src/neuralnet/input_layer/store.cc:38-39 and deprecated.cc:53,106; v0.3.0-rc3
        input_layer/store.cc:44-46 with one batchsize), so batchsize % K samples of every batch are never
        read. A job SINGA built (the module has `singa_graph`) follows that rule with a warning at the
        batchsize field; netc's own files (.nd, IR text without it) keep B9's error."""
        K = self.K
        if batch % K == 0:
            return batch // K
        at = op.attr_loc("batch")
        if not self.singa_conf:
            return self.divided(op, batch, "batchsize", op.attr_loc("shape"))
        if batch < K:
            raise NetcError(f"the batch {batch} leaves the {K} partitions without a sample (SINGA gives each "
                            f"{batch} / {K} = 0 and runs on empty blobs): use a batchsize of at least {K}", at)
        written = bool(op.attr_locs) and "batch" in op.attr_locs   # else --batch set it
        if str(at) not in self.warned:     # once per batchsize field (a shard's parsers share one)
            self.warned.add(str(at))
            drop = batch % K
            self.em.diag.warning(f"{'batchsize' if written else 'the batch'} {batch} does not divide among the {K} "
                                 f"partitions: as SINGA does, each "
                                 f"takes {batch} / {K} = {batch // K} (rounded down), so {drop} sample"
                                 f"{'s' if drop > 1 else ''} of every batch {'are' if drop > 1 else 'is'} dropped "
                                 f"({K * (batch // K)} of {batch} used per step)", at,
                                 width=len(str(batch)) if written else 1)
        return batch // K

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
                shape[0] = self.batch_share(lay, op, shape[0])
            a["shape"] = shape
        d = lookup(op.name)
        if lay.pd == 1 and d is not None and d.feature_params:
            a.update(d.with_feature_count(op.attrs, self.divided(op, d.feature_count(op.attrs),
                                                                  d.singa_feature_field, op.loc)))
            refs = {}
            for role, ref in (op.attrs.get("params") or {}).items():
                dim = d.feature_params.get(role)
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
            elif lay.pd == 1 and d is not None and d.feature_params:
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
                    elif lay.pd == 1 and lookup(op.name).feature_params:
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
