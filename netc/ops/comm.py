"""Communication between workers: the ops the `partition` pass inserts where a tensor changes worker
or partitioning (docs/partitioning.md).

A partitioned network is one program over K workers: every op carries `worker` (its rank). Where a
value crosses workers the pass inserts

  send / recv        point to point: `send` on the producer's worker (peer: the receiver), `recv` on
                     the consumer's (peer: the sender); SINGA's kBridgeSrc / kBridgeDst
  all_gather         every rank ends with the shards of all ranks, concatenated along `dim`
  reduce_scatter     every rank ends with its chunk (along `dim`) of the sum over ranks
  all_reduce         every rank ends with the sum over ranks
  broadcast          every rank ends with `root`'s value

Two forms. In the *global* program (after `partition`) a collective is one op per member rank,
and its operands are the contributions of every rank of `ranks`, in that order: the op's value is
then a plain function of its operands, which is how the single-process emulation runs it (the
reference semantics below) and how the backward pass differentiates it. After `split-workers`
each rank's program keeps only its own operand (a `recv` or a non-root `broadcast` none, with
`shape` and `dtype` attributes), and the distributed runtime (netc/runtime/distributed.py) runs
the op with torch.distributed.

Gradients (per member, in the global form): send -> recv to the same peer, recv -> send back;
all_gather -> each operand's chunk of dy (summed over the members: a reduce-scatter); all_reduce ->
dy to every operand (summed: an all-reduce); reduce_scatter -> dy in its chunk, zeros elsewhere
(summed: an all-gather); broadcast -> dy to the root. Summing contributions that live on other
workers is `split-workers`' job (it sends them).

Bytes: `comm_bytes()` is what one member puts on the wire under the ring algorithms (send: the
tensor; all_gather, reduce_scatter: (n-1)/n of the full tensor; all_reduce: 2(n-1)/n; broadcast:
the tensor, from the root) and `message_bytes()` the logical tensor (what `netc explain` prints
per edge). They move no device memory in the per-layer table (moves_data False).

`netc.scale` is the 1/K of the data-parallel mean: each worker's loss is the mean over its shard,
the network's loss the mean over the K shards, so the gradient of each loss partition is scaled
by 1/K (split-workers inserts it).
"""
from __future__ import annotations

from .registry import AttrSpec, Cost, OpDef, ShapeError, prod, register
from ..ir.core import DTYPES

COMM_OPS = ("netc.send", "netc.recv", "netc.all_gather", "netc.reduce_scatter", "netc.all_reduce",
            "netc.broadcast")
# the collectives whose global form has one operand per member rank (a rank's program keeps its own);
# a broadcast has the root's only, a recv none
COLLECTIVE_OPS = ("netc.all_gather", "netc.all_reduce", "netc.reduce_scatter")


def is_comm(op_or_name) -> bool:
    name = op_or_name if isinstance(op_or_name, str) else op_or_name.name
    return name in COMM_OPS


def _ranks(a) -> list:
    return list(a.get("ranks") or [])


def _dim(a, rank: int) -> int:
    d = a["dim"] + rank if a["dim"] < 0 else a["dim"]
    if not 0 <= d < rank:
        raise ShapeError(f"dim {a['dim']} is out of range for rank-{rank} operands", attr="dim")
    return d


class _Comm(OpDef):
    moves_data = False          # no device-memory traffic: the network carries it (comm_bytes)
    comm = True                 # the distributed runtime runs it with torch.distributed
    collective = True
    f32_result = False

    def result_dtype(self, a, operand_dtypes):
        return operand_dtypes[0] if operand_dtypes else a.get("dtype", "f32")

    def group_size(self, a) -> int:
        return max(len(_ranks(a)), 1)

    def message_bytes(self, a, ins: list, out: tuple, itemsize: int = 4) -> int:
        """The logical tensor: the full value the collective makes (or the message a send carries)."""
        return prod(out) * itemsize

    def comm_bytes(self, a, ins: list, out: tuple, itemsize: int = 4) -> int:
        raise NotImplementedError

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost()


@register
class Send(_Comm):
    name = "send"
    collective = False
    arity = (1, 1)
    attrs = {"peer": AttrSpec("int", doc="the rank that receives")}
    doc = ("Point-to-point send of its operand to rank `peer` (SINGA's kBridgeSrc). In the global program "
           "its result is the message, read by the matching recv; a rank's program never reads it.")

    def infer(self, a, ins):
        return tuple(ins[0])

    def reference(self, a, ins, params):
        return ins[0]

    def comm_bytes(self, a, ins, out, itemsize=4):
        return prod(out) * itemsize

    def gradient(self, g, op, dy):
        """The gradient comes back from the peer: a recv from it."""
        return [g.emit("netc.recv", [dy], {"peer": self.attrs_of(op)["peer"]})], {}


@register
class Recv(_Comm):
    name = "recv"
    collective = False
    arity = (0, 1)
    attrs = {"peer": AttrSpec("int", doc="the rank that sends"),
             "shape": AttrSpec("shape", [], doc="a rank's program: the shape received (no operand)"),
             "dtype": AttrSpec("enum", "f32", tuple(DTYPES))}
    doc = ("Point-to-point receive from rank `peer` (SINGA's kBridgeDst). Global program: its operand is the "
           "matching send's result; a rank's program: no operand, `shape` and `dtype` say what arrives.")

    def infer(self, a, ins):
        return tuple(ins[0]) if ins else tuple(a["shape"])

    def reference(self, a, ins, params):
        if not ins:
            raise NotImplementedError("a rank's recv is run by the distributed runtime")
        return ins[0]

    def comm_bytes(self, a, ins, out, itemsize=4):
        return 0

    def gradient(self, g, op, dy):
        """The gradient goes back to the peer: a send to it."""
        return [g.emit("netc.send", [dy], {"peer": self.attrs_of(op)["peer"]})], {}


@register
class AllGather(_Comm):
    name = "all_gather"
    arity = (1, None)
    attrs = {"dim": AttrSpec("int", 0), "ranks": AttrSpec("ints", [])}
    doc = ("All-gather along `dim`: the shards of every rank of `ranks`, concatenated in rank order. Global "
           "program: one operand per rank; a rank's program: its own shard. Ring bytes (n-1)/n of the result.")

    def infer(self, a, ins):
        n = self.group_size(a)
        d = _dim(a, len(ins[0]))
        if len(ins) == 1 and n > 1:
            out = list(ins[0])
            out[d] *= n
            return tuple(out)
        if len(ins) != n:
            raise ShapeError(f"an all_gather over {n} ranks takes one operand per rank (or its own), got {len(ins)}")
        out = list(ins[0])
        for s in ins[1:]:
            if len(s) != len(out) or any(s[j] != out[j] for j in range(len(out)) if j != d):
                raise ShapeError(f"cannot gather {list(s)} with {list(ins[0])} along dim {d}")
            out[d] += s[d]
        return tuple(out)

    def reference(self, a, ins, params):
        import torch
        if len(ins) != self.group_size(a):
            raise NotImplementedError("a rank's all_gather is run by the distributed runtime")
        return torch.cat(ins, dim=a["dim"])

    def comm_bytes(self, a, ins, out, itemsize=4):
        n = self.group_size(a)
        return prod(out) * itemsize * (n - 1) // n

    def gradient(self, g, op, dy):
        """Each operand's chunk of dy (summed over the members: a reduce-scatter)."""
        d = _dim(self.attrs_of(op), len(dy.type.shape))
        out, start = [], 0
        for i, v in enumerate(op.operands):
            k = v.type.shape[d]
            out.append(g.emit("netc.narrow", [dy], {"dim": d, "start": start, "length": k}, tag=f"grad{i}")
                       if g.needs(i) else None)
            start += k
        return out, {}


@register
class ReduceScatter(_Comm):
    name = "reduce_scatter"
    arity = (1, None)
    attrs = {"dim": AttrSpec("int", 0), "ranks": AttrSpec("ints", []),
             "index": AttrSpec("int", 0, doc="which chunk this member keeps (its position in ranks)")}
    doc = ("Reduce-scatter along `dim`: the sum over the ranks of `ranks`, cut in equal chunks, chunk `index` "
           "kept. Global program: one full-size operand per rank. Ring bytes (n-1)/n of an operand. (gloo "
           "may lack it: the runtime then all-reduces and keeps the chunk.)")

    def infer(self, a, ins):
        n = self.group_size(a)
        d = _dim(a, len(ins[0]))
        if len(ins) not in (1, n):
            raise ShapeError(f"a reduce_scatter over {n} ranks takes one operand per rank (or its own), got {len(ins)}")
        for s in ins[1:]:
            if tuple(s) != tuple(ins[0]):
                raise ShapeError(f"reduce_scatter operands must have identical shapes: {list(ins[0])} vs {list(s)}")
        if ins[0][d] % n:
            raise ShapeError(f"{ins[0][d]} (dimension {d} of {list(ins[0])}) does not split into {n} equal chunks",
                             attr="dim")
        out = list(ins[0])
        out[d] //= n
        return tuple(out)

    def reference(self, a, ins, params):
        if len(ins) != self.group_size(a):
            raise NotImplementedError("a rank's reduce_scatter is run by the distributed runtime")
        s = ins[0]
        for t in ins[1:]:
            s = s + t
        return s.chunk(self.group_size(a), dim=a["dim"])[a["index"]]

    def message_bytes(self, a, ins, out, itemsize=4):
        return prod(ins[0]) * itemsize

    def comm_bytes(self, a, ins, out, itemsize=4):
        n = self.group_size(a)
        return prod(out) * n * itemsize * (n - 1) // n

    def gradient(self, g, op, dy):
        """dy in this member's chunk, zeros elsewhere, to every operand (summed: an all-gather)."""
        a = self.attrs_of(op)
        x = op.operands[0].type.shape
        d = _dim(a, len(x))
        k = dy.type.shape[d]
        out = []
        for i in range(len(op.operands)):
            out.append(g.emit("netc.pad_dim", [dy], {"dim": d, "before": a["index"] * k,
                                                     "after": x[d] - (a["index"] + 1) * k}, tag=f"grad{i}")
                       if g.needs(i) else None)
        return out, {}


@register
class AllReduce(_Comm):
    name = "all_reduce"
    arity = (1, None)
    attrs = {"ranks": AttrSpec("ints", []), "op": AttrSpec("enum", "sum", ("sum",))}
    doc = ("All-reduce (sum) over the ranks of `ranks`. Global program: one operand per rank. Ring bytes "
           "2(n-1)/n of the tensor.")

    def infer(self, a, ins):
        for s in ins[1:]:
            if tuple(s) != tuple(ins[0]):
                raise ShapeError(f"all_reduce operands must have identical shapes: {list(ins[0])} vs {list(s)}")
        return tuple(ins[0])

    def reference(self, a, ins, params):
        if len(ins) != self.group_size(a):
            raise NotImplementedError("a rank's all_reduce is run by the distributed runtime")
        s = ins[0]
        for t in ins[1:]:
            s = s + t
        return s

    def comm_bytes(self, a, ins, out, itemsize=4):
        n = self.group_size(a)
        return 2 * prod(out) * itemsize * (n - 1) // n

    def gradient(self, g, op, dy):
        """dy to every operand (summed over the members: an all-reduce)."""
        return [dy if g.needs(i) else None for i in range(len(op.operands))], {}


@register
class Broadcast(_Comm):
    name = "broadcast"
    arity = (0, 1)
    attrs = {"root": AttrSpec("int", 0), "ranks": AttrSpec("ints", []),
             "shape": AttrSpec("shape", [], doc="a non-root rank's program: the shape received"),
             "dtype": AttrSpec("enum", "f32", tuple(DTYPES))}
    doc = ("Broadcast of `root`'s value to every rank of `ranks`. Global program: the operand is the root's "
           "value; a rank's program: the root keeps it, the others have none (`shape`, `dtype`).")

    def infer(self, a, ins):
        return tuple(ins[0]) if ins else tuple(a["shape"])

    def reference(self, a, ins, params):
        if not ins:
            raise NotImplementedError("a rank's broadcast is run by the distributed runtime")
        return ins[0]

    def comm_bytes(self, a, ins, out, itemsize=4):
        return prod(out) * itemsize if ins else 0

    def gradient(self, g, op, dy):
        """dy to the root's value (the members' contributions are summed there)."""
        return [dy], {}


@register
class Scale(OpDef):
    name = "scale"
    arity = (1, 1)
    elementwise = True
    training_only = True
    attrs = {"factor": AttrSpec("number", 1.0)}
    doc = ("x * factor. split-workers scales the gradient of each of K loss partitions by 1/K (the network's "
           "loss is the mean of the K workers' losses, each the mean over its shard).")

    def infer(self, a, ins):
        return tuple(ins[0])

    def reference(self, a, ins, params):
        return ins[0] * a["factor"]

    def cost(self, a, ins, out, needs_input_grad=True):
        n = prod(ins[0])
        return Cost(n, n, 0)
