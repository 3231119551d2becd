"""split-workers: one program per rank from a partitioned network (docs/partitioning.md).

The `partition` pass leaves one program over K workers (every op carries `worker`). This pass
replaces it by K networks `<net>.rank<r>` (attributes rank, world, of), each holding only its
rank's ops, in the global order (a subsequence of one topological order, so that blocking
receives and collectives called in that order on every rank cannot deadlock while sends do not
block): a recv keeps no operand (it says `shape` and `dtype`), a collective keeps only its rank's
own operand, a non-root broadcast none. Each rank network has an explicit `netc.output` (the global
outputs that live on it) and gets its own memory plan from plan-memory.

A training program (after backward and optimizer) is completed first, on the global program:
* gradient ops run where the op they differentiate runs (`grad_of`); ops the training passes made
  without a worker (dropout masks, an appended loss) run where their first consumer (else operand)
  does; the program's own inputs (learning rate, seed) are fed on every rank that reads them;
* the gradient of each of K partitions of a loss is scaled by 1/K (netc.scale): the network's loss
  is the mean over the K shards, each worker's loss the mean over its own;
* a parameter held by several workers (a data-parallel replica) gets its gradient as an all_reduce
  (sum) over them of each worker's local sum, in buckets of at most `bucket_bytes` (ctx option
  split_workers.bucket_bytes, default 25 MiB) filled in reverse layer order (the order the
  gradients are ready in), each bucket's all-reduces contiguous (the runtime runs a bucket as one
  flat all-reduce); its update runs on every holder (`<update>:<w>`);
* every other operand produced on another worker (the gradients of communication and of
  collectives: all_gather's chunks, which sum to a reduce-scatter, ...) is sent there (send/recv).
The ranks' gradient values are named in each rank network's `gradients` attribute.
"""
from __future__ import annotations

from ..diagnostics import NetcError
from ..ir.core import STRUCTURAL_OPS, Operation, Region, SymbolRef, copy_attr
from ..ops import lookup
from ..ops.comm import COLLECTIVE_OPS, COMM_OPS
from .partition import is_partitioned, make_op
from .registry import Pass, register_pass

BUCKET_BYTES = 25 * 2 ** 20


def is_split(net) -> bool:
    return "rank" in net.attrs


@register_pass
class SplitWorkers(Pass):
    name = "split-workers"
    title = "SplitWorkers"
    requires = ("partition",)
    summary = "one program per rank: its ops and the communication naming its peers (training: gradients all-reduced)"

    def needed(self, module):
        return any(is_partitioned(n) and not is_split(n) for n in module.networks())

    def applies(self, module, ctx) -> bool:
        return self.needed(module)

    def run(self, module, ctx):
        opts = ctx.options.get("split_workers", {})
        body = []
        for op in module.body:
            if op.name == "netc.network" and is_partitioned(op) and not is_split(op):
                if "gradients" in op.attrs:
                    _Training(module, op, opts.get("bucket_bytes", BUCKET_BYTES)).complete()
                body += split(module, op)
            else:
                body.append(op)
        module.regions[0].block.set_ops(body)


# ------------------------------------------------------------------------------------------------
# completing a training program

class _Training:
    def __init__(self, module, net, bucket_bytes):
        self.module, self.net, self.bucket_bytes = module, net, bucket_bytes
        self.K = net.attrs["workers"]
        self.names = {op.attrs.get("name") for op in net.regions[0].ops}
        self.params = {p.attrs["sym_name"]: p for p in module.params()}

    def unique(self, base):
        n, k = base, 1
        while n in self.names:
            n = f"{base}_{k}"
            k += 1
        self.names.add(n)
        return n

    def new(self, ir_name, operands, attrs, loc, worker):
        attrs = dict(attrs)
        attrs["name"] = self.unique(attrs["name"])
        op = make_op(ir_name, operands, attrs, loc)
        op.attrs["worker"] = worker
        return op

    def complete(self):
        net = self.net
        body = net.regions[0].ops
        ops = [op for op in body if op.name not in STRUCTURAL_OPS]
        layer_worker = {op.attrs.get("name"): op.attrs["worker"] for op in ops if "worker" in op.attrs}
        grads = net.attrs.get("gradients", {})
        # 1. workers of the training passes' ops
        acc = {}   # id(op) -> param, for the running sums of a parameter's gradient
        for p, gname in grads.items():
            for op in ops:
                if op.attrs.get("grad_of") == p and op.name == "netc.elementwise" and p in self.params \
                        and p not in layer_worker:
                    acc[id(op)] = p
        users: dict = {}
        for op in ops:
            for v in op.operands:
                users.setdefault(id(v.owner), []).append(op)
        pending = []
        for op in ops:
            if "worker" in op.attrs or op.name == "netc.input" or id(op) in acc or lookup(op.name).side_effects:
                continue
            g = op.attrs.get("grad_of")
            if g is not None and g in layer_worker:
                op.attrs["worker"] = layer_worker[g]
            else:
                pending.append(op)
        for _ in range(len(pending) + 1):
            left = []
            for op in pending:
                w = next((u.attrs["worker"] for u in users.get(id(op), []) if "worker" in u.attrs), None)
                if w is None:
                    w = next((v.owner.attrs["worker"] for v in op.operands if "worker" in v.owner.attrs), None)
                if w is None:
                    left.append(op)
                else:
                    op.attrs["worker"] = w
            if len(left) == len(pending):
                break
            pending = left
        if pending:
            raise NetcError(f"split-workers: cannot place '{pending[0].attrs.get('name')}' on a worker", pending[0].loc)
        # 2. the 1/K of each partitioned loss's gradient
        new_body = []
        counts: dict = {}
        for op in ops:
            part = op.attrs.get("partition") or {}
            if part.get("reduce") == "mean":
                counts[part["of"]] = counts.get(part["of"], 0) + 1
        scaled = {}
        for op in ops:
            part = op.attrs.get("partition") or {}
            if part.get("reduce") == "mean" and counts[part["of"]] > 1:
                scaled[op.attrs["name"]] = 1.0 / counts[part["of"]]
        for op in body:
            new_body.append(op)
            g = op.attrs.get("grad_of")
            if g in scaled and op.results and op.name != "netc.scale":
                v = op.results[0]
                s = self.new("netc.scale", [v], {"name": f"{op.attrs['name']}.mean", "factor": scaled[g],
                                                 "grad_of": g}, op.loc, op.attrs["worker"])
                for u in users.get(id(op), []):
                    u.operands = [s.results[0] if x is v else x for x in u.operands]
                new_body.append(s)
        body = new_body
        # 3. parameter gradients
        body = self.param_gradients(body, acc, grads)
        # 4. what crosses workers otherwise: sent
        body = self.transfers(body)
        net.regions[0].block.set_ops(body)

    def param_gradients(self, body, acc, grads):
        """Each parameter's gradient where its update runs: on its one worker, or, for a parameter held
        by several (a replica), an all_reduce of the workers' local sums, bucketed."""
        net = self.net
        by_name = {op.attrs.get("name"): op for op in body}
        holders: dict = {}
        for op in body:
            d = lookup(op.name)
            if "worker" in op.attrs and d is not None and not d.side_effects:
                for ref in (op.attrs.get("params") or {}).values():
                    if isinstance(ref, SymbolRef):
                        holders.setdefault(ref.name, set()).add(op.attrs["worker"])
        final = {}     # param -> (top op, leaves, inner sums)
        for p, gname in grads.items():
            top = by_name[gname]
            leaves, stack, inner = [], [top], []
            while stack:
                o = stack.pop()
                if acc.get(id(o)) == p:
                    inner.append(o)
                    stack.extend(v.owner for v in reversed(o.operands))
                else:
                    leaves.append(o)
            final[p] = (top, leaves, inner)
        replicated = []
        for p in grads:
            top, leaves, inner = final[p]
            where = {o.attrs["worker"] for o in leaves}
            ws = holders.get(p, set()) | where
            if len(ws) > 1:
                if where != ws:
                    raise NetcError(f"parameter '{p}' is held by workers {sorted(ws)} but only {sorted(where)} compute "
                                    f"a gradient for it: its replicas would diverge", self.params[p].loc)
                replicated.append(p)
            else:
                for o in inner:
                    o.attrs["worker"] = next(iter(where))
        pos = {id(op): i for i, op in enumerate(body)}
        replicated.sort(key=lambda p: pos[id(final[p][0])])   # reverse layer order: as the gradients are ready
        bucket_of, last_of, b, size = {}, {}, 0, 0
        for p in replicated:
            nbytes = final[p][0].results[0].type.nbytes
            if size and size + nbytes > self.bucket_bytes:
                b, size = b + 1, 0
            bucket_of[p] = b
            size += nbytes
            last_of[b] = p
        inner_ids = {id(o) for p in replicated for o in final[p][2]}
        top_of = {id(final[p][0]): p for p in replicated}
        out, pending, new_grads = [], {}, {p: {} for p in replicated}
        for op in body:
            p = top_of.get(id(op))
            if id(op) not in inner_ids:
                d = lookup(op.name)
                ref = (op.attrs.get("params") or {}).get("param") if d is not None and d.side_effects else None
                if ref is not None and ref.name in bucket_of:     # the update of a replica: on every holder
                    for w, v in sorted(new_grads[ref.name].items()):
                        c = Operation(op.name, [v] + list(op.operands[1:]), result_types=[],
                                      attrs=copy_attr(op.attrs), loc=op.loc)
                        c.attrs["name"] = self.unique(f"{op.attrs['name']}:{w}")
                        c.attrs["worker"] = w
                        out.append(c)
                    continue
                if ref is not None:
                    op.attrs["worker"] = op.operands[0].owner.attrs["worker"]
                elif d is not None and d.side_effects and "worker" not in op.attrs and op.operands:
                    # another in-place writer (batch norm's running statistics): where its operands are
                    op.attrs["worker"] = op.operands[0].owner.attrs["worker"]
                out.append(op)
            if p is not None:
                out += self.local_sums(p, final[p], pending)
                if last_of[bucket_of[p]] == p:
                    out += self.bucket_reduce(bucket_of[p], bucket_of, pending, new_grads)
        per_rank: dict = {}
        for p in grads:
            if p in bucket_of:
                for w, v in new_grads[p].items():
                    per_rank.setdefault(w, {})[p] = v.owner.attrs["name"]
            else:
                top = final[p][0]
                per_rank.setdefault(top.attrs["worker"], {})[p] = top.attrs["name"]
        net.attrs["rank_gradients"] = {str(w): g for w, g in sorted(per_rank.items())}
        return out

    def owner(self, p):
        sf = self.params[p].attrs.get("share_from") if p in self.params else None
        return sf.name if sf is not None else p

    def local_sums(self, p, fin, pending):
        top, leaves, inner = fin
        by_w: dict = {}
        for l in leaves:
            by_w.setdefault(l.attrs["worker"], []).append(l.results[0])
        out = []
        local = {}
        for w, vs in sorted(by_w.items()):
            v = vs[0]
            for x in vs[1:]:
                s = self.new("netc.elementwise", [v, x], {"name": f"{p}.grad_acc:{w}", "operation": "sum",
                                                          "grad_of": p}, top.loc, w)
                out.append(s)
                v = s.results[0]
            local[w] = v
        pending[p] = (local, top.loc)
        return out

    def bucket_reduce(self, b, bucket_of, pending, new_grads):
        out = []
        for p in [q for q in bucket_of if bucket_of[q] == b]:
            local, loc = pending.pop(p)
            ranks = sorted(local)
            ins = [local[w] for w in ranks]
            for w in ranks:
                ar = self.new("netc.all_reduce", ins, {"name": f"{p}.grad:{w}", "ranks": ranks, "grad_of": p,
                                                       "bucket": b}, loc, w)
                out.append(ar)
                new_grads[p][w] = ar.results[0]
        return out

    def transfers(self, body):
        cache, out = {}, []
        for op in body:
            if (op.name == "netc.input" and "worker" not in op.attrs) or op.name in STRUCTURAL_OPS:
                out.append(op)
                continue
            w = op.attrs["worker"]
            if op.name in COLLECTIVE_OPS or op.name in ("netc.recv", "netc.broadcast"):
                out.append(op)
                continue
            new_ops = []
            for i, v in enumerate(op.operands):
                src = v.owner
                if src.name == "netc.input" and "worker" not in src.attrs:
                    continue
                u = src.attrs["worker"]
                if u == w:
                    continue
                key = (id(v), w)
                if key not in cache:
                    base = src.attrs.get("name")
                    s = self.new("netc.send", [v], {"name": f"{base}.send({u}->{w})", "peer": w}, op.loc, u)
                    r = self.new("netc.recv", [s.results[0]], {"name": f"{base}.recv({u}->{w})", "peer": u}, op.loc, w)
                    new_ops += [s, r]
                    cache[key] = r.results[0]
                op.operands[i] = cache[key]
            out += new_ops
            out.append(op)
        return out


# ------------------------------------------------------------------------------------------------
# one program per rank

def split(module, net) -> list:
    K = net.attrs["workers"]
    sym = net.attrs["sym_name"]
    body = net.regions[0].ops
    ops = [op for op in body if op.name not in STRUCTURAL_OPS]
    outs = [v for op in body if op.name == "netc.output" for v in op.operands]
    if not outs:
        read = {id(v.owner) for op in ops for v in op.operands}
        outs = [op.results[0] for op in ops if op.results and op.name != "netc.input" and id(op) not in read
                and op.name not in COMM_OPS]
    out_ids = {id(v) for v in outs}
    users: dict = {}
    for op in ops:
        for v in op.operands:
            users.setdefault(id(v.owner), set()).add(op.attrs.get("worker"))
    nets = []
    rank_grads = net.attrs.get("rank_gradients", {})
    for r in range(K):
        vmap: dict = {}
        new = []
        for op in ops:
            w = op.attrs.get("worker")
            if w is None:       # a program input every rank reads (learning rate, seed)
                if op.name != "netc.input" or r not in users.get(id(op), set()):
                    continue
            elif w != r:
                continue
            if op.name == "netc.recv":
                operands = []
                a = copy_attr(op.attrs)
                a["shape"] = list(op.results[0].type.shape)
                a["dtype"] = op.results[0].type.dtype
            elif op.name in COLLECTIVE_OPS:
                i = op.attrs["ranks"].index(r)
                operands = [vmap[id(op.operands[i])]] if len(op.operands) == len(op.attrs["ranks"]) else \
                    [vmap[id(v)] for v in op.operands]
                a = copy_attr(op.attrs)
            elif op.name == "netc.broadcast":
                a = copy_attr(op.attrs)
                if r == op.attrs["root"]:
                    operands = [vmap[id(op.operands[0])]]
                else:
                    operands = []
                    a["shape"] = list(op.results[0].type.shape)
                    a["dtype"] = op.results[0].type.dtype
            else:
                operands = [vmap[id(v)] for v in op.operands]
                a = copy_attr(op.attrs)
            c = Operation(op.name, operands, result_types=[res.type for res in op.results], attrs=a, loc=op.loc)
            c.attr_locs = op.attr_locs
            for old, nv in zip(op.results, c.results):
                vmap[id(old)] = nv
            new.append(c)
        outputs = [vmap[id(v)] for v in outs if id(v) in vmap]
        if outputs:
            new.append(Operation("netc.output", outputs, attrs={}, loc=net.loc))
        attrs = {k: copy_attr(v) for k, v in net.attrs.items() if k not in ("sym_name", "rank_gradients", "gradients",
                                                                             "losses")}
        attrs.update(sym_name=f"{sym}.rank{r}", rank=r, world=K, of=sym)
        if "gradients" in net.attrs:
            attrs["gradients"] = dict(rank_grads.get(str(r), {}))
            names = {o.attrs.get("name") for o in new}
            attrs["losses"] = [n for n in net.attrs.get("losses", []) if n in names]
        n = Operation("netc.network", attrs=attrs, regions=[Region(new)], loc=net.loc)
        nets.append(n)
    return nets
