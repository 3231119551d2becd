"""The partition pass's lowering for every other network (.nd, Paleo): typed collectives where
they fit. A layer split by features (OpDef.feature_params) reads its whole input: all_gather of a
batch-split value, broadcast of one on a single worker; pointwise layers and pooling
(OpDef.channelwise) follow a split input. An inner product (OpDef.row_parallel) whose input
arrives split by features runs row-parallel when that moves fewer bytes than gathering its input
(Megatron's column- then row-parallel pair): each worker multiplies its rows, then
reduce_scatter (to a split output) or all_reduce. A change of split dimension is an all-to-all
(slices, send/recv, concat); a value needed on one worker is sent (gathered). Concats on each
worker of one value from every worker, in rank order (Paleo's `X@all` inside a parallel block),
become all_gather."""
from __future__ import annotations

from ...diagnostics import NetcError
from ...ir.core import STRUCTURAL_OPS, SymbolRef
from ...ir.query import network_outputs
from ...ops import lookup, prod
from .common import Emitter, feature_dim, pos

class _Layout:
    """Where a logical value lives: kind 'on' (whole, on worker w), 'rep' (whole, on every worker),
    'split' (shard i on worker i along dim), 'partial' (summands, one per worker). `vals`: worker ->
    Value (for 'rep' inputs filled lazily)."""
    __slots__ = ("kind", "w", "dim", "vals", "name", "op", "wanted")

    def __init__(self, kind, vals, w=None, dim=None, name="", op=None):
        self.kind, self.vals, self.w, self.dim, self.name, self.op = kind, vals, w, dim, name, op
        self.wanted: set = set()     # the workers whose layers read the whole value


class NetcLowering:
    def __init__(self, em: Emitter, opts: dict):
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
            if lookup(op.name).batch_axis != 0:
                self.error(f"'{op.attrs.get('name')}' ({lookup(op.name).type_name}) cannot be split along axis 0 "
                           f"(partition_dim 0): its batch is axis {lookup(op.name).batch_axis} (a time-major "
                           f"sequence), and its steps depend on each other", op.attr_loc("partition_dim"))
            return ("split", 0)
        if pd == 1:
            if lookup(op.name).feature_params:
                return ("feature",)
            if lookup(op.name).channelwise:
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
                a = {"name": name, "dim": pos(op.attrs.get("dim", -1), len(op.results[0].type.shape)),
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
            if not lookup(op.name).concat or len(op.operands) != K or place[id(op)][0] != "on":
                continue
            ws = [place.get(id(v.owner)) for v in op.operands]
            if all(w is not None and w[0] == "on" and w[1] == i for i, w in enumerate(ws)):
                groups.setdefault(tuple(id(v) for v in op.operands), []).append(op)
        for key, members in groups.items():
            if sorted(place[id(m)][1] for m in members) == list(range(K)):
                out.update(id(m) for m in members)
        return out

    def sync_stats(self, op, vals: dict):
        """The copies of a layer normalizing with batch statistics, split along the batch, all-reduce
        them (torch's SyncBatchNorm), so that K workers compute what one process does: each copy
        records the ranks, its shard's share of the batch (`weight`) and the elements per channel of
        the whole batch (`count`); the training form and the gradient (BatchNorm's) read them."""
        shape = op.results[0].type.shape
        count = prod(shape) // max(shape[-1], 1)
        ranks = sorted(vals)
        for i, v in vals.items():
            v.owner.attrs["sync_stats"] = {"ranks": ranks, "weight": v.type.shape[0] / shape[0], "count": count}

    def layer(self, op, kind, ins):
        em, K = self.em, self.K
        name = op.attrs["name"]
        opdef = lookup(op.name)
        if kind[0] == "on":
            w = kind[1]
            if opdef.row_parallel and ins and ins[0].kind == "split" and self.row_parallel_cheaper(op, ins[0], "on"):
                return self.row_parallel(op, ins[0], ("on", w))
            x = [self.whole_on(lay, w, op.loc) for lay in ins]
            c = em.clone(op, name, x, w)
            return _Layout("on", {w: c.results[0]}, w=w, name=name)
        if kind[0] == "split":
            if opdef.row_parallel and ins and ins[0].kind == "split" and ins[0].dim != 0 \
                    and self.row_parallel_cheaper(op, ins[0], "split"):
                return self.row_parallel(op, ins[0], ("split", 0))
            vals = {}
            sync = opdef.batch_statistics and bool(op.results[0].type.shape)
            # copies that all-reduce their statistics: every shard is in place (sent) before the first
            # copy's all-reduce, which would otherwise wait on a worker still waiting for its shard
            shards = [[self.shard(lay, 0, i, op.loc) for lay in ins] for i in range(K)] if sync else None
            for i in range(K):
                x = shards[i] if sync else [self.shard(lay, 0, i, op.loc) for lay in ins]
                part = {"of": name, "dim": 0, "index": i, "count": K}
                if not op.results[0].type.shape:
                    part = {"of": name, "reduce": "mean"} if opdef.is_loss else {"of": name, "replica": True}
                vals[i] = em.clone(op, f"{name}:{i}", x, i, partition=part).results[0]
            if sync:
                self.sync_stats(op, vals)
            return _Layout("split", vals, dim=0, name=name)
        if kind[0] == "feature":
            if opdef.row_parallel and ins[0].kind == "split" and ins[0].dim != 0 \
                    and self.row_parallel_cheaper(op, ins[0], "feature"):
                return self.row_parallel(op, ins[0], ("split", 1))
            fdim = feature_dim(op.results[0].type.shape)
            vals = {}
            for i in range(K):
                x = [self.whole_on(lay, i, op.loc, everywhere=True) for lay in ins]
                m = opdef.feature_count(op.attrs)
                if m % K:
                    self.error(f"'{name}' has {m} {opdef.feature_noun}, which do not split {K} ways", op.loc)
                a = opdef.with_feature_count(op.attrs, m // K)
                a["params"] = {role: em.slice_param(ref, opdef.feature_params[role], i, K, f":{i}", op.loc)
                               if isinstance(ref, SymbolRef) and role in opdef.feature_params else ref
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
