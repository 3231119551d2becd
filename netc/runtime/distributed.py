"""K workers on torch.distributed: each process runs its rank's program (split-workers) with the
reference executor, or compiled (the interpreter target, the CPU target's generated step, or a rank library
on a GPU), and the communication ops as plain torch.distributed calls (docs/partitioning.md).

Processes follow torchrun's protocol: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK in the
environment (`netc run FILE --workers K` starts them itself, netc/runtime/launch.py; `torchrun
--nproc-per-node K -m netc run FILE --workers K` works too). The backend is gloo on CPUs (NCCL on
GPUs). Every rank runs its ops in the program's order, which is one global topological order
restricted to the rank, so the two ends of every transfer and every member of a collective meet:

  send            isend (the tensor kept until the step ends, then waited), never batch_isend_irecv
                  (which hangs on gloo: pytorch#132644)
  recv            a blocking recv into a tensor of the recorded shape
  all_gather      all_gather_single (all_gather_into_tensor before torch 2.13) along dim 0, then moved
                  into place for another dim
  reduce_scatter  reduce_scatter_single (_tensor) on the dim moved to the front; where the backend has
                  none, an all_reduce and the rank's chunk
  all_reduce      sum; consecutive all-reduces of one `bucket` (a data-parallel gradient bucket) run as
                  one all_reduce of their concatenation
  broadcast       broadcast from the root

Parameters: each rank makes the values the single-process run would use, by their logical names
(random: seeded per name, as the reference executor draws them; or from --params): a sliced
parameter (`slice_of`) is its part of the logical one. Then every parameter held by several ranks
is broadcast from the lowest of them, so that replicas start identical. Inputs likewise: the
logical input, drawn or given, cut to the rank's shard (`partition`).

Failures: the process group has a timeout; each step starts and ends with a monitored_barrier
(gloo), which names a rank that does not arrive; a failing communication raises a CommError naming
this rank, the op and its peer. `run_worker` turns them into a message and exit status 1.

Test hook: NETC_FAULT="RANK:N:exit|hang" makes rank RANK exit (status 17) or hang before its N-th
communication op (0-based), "RANK:bN:..." before its N-th barrier, to check that the others exit
cleanly and name it.

Compiled ranks (Worker target "interp", "cpu" or "cuda"): the rank's program is compiled as `netc compile
--workers K` compiles it -- its schedule cut into segments at its communication ops, each op a
manifest entry with the arena places of its operands and results (codegen.segment_manifest) -- and
CompiledRank runs segment 0 (which feeds the inputs), communication op 0 on views of the arena,
segment 1, and so on. Only two things differ between the targets: how a segment runs and how the
arena is obtained. The interpreter's InterpProgram runs its launches through Triton's interpreter
on a CPU arena; a rank library (SegmentLibrary over native.Net) calls netc_run_segment and wraps
the device arena (netc_arena) as a torch tensor; the CPU target's cpu_step.CpuRank runs its generated
step, a generator that yields at each communication op, over the plan's constant and batch arenas (two
tensors: `region_arenas`; its segments and places built from its own unfused plan). Everything else --
the inputs, parameters and their broadcast, the communication ops and their bucketing, reading the
outputs -- is this module's, for all of them. With gloo and a device arena, the communication ops stage their tensors through host memory.
"""
from __future__ import annotations

import datetime
import os
import re
import sys
import time
import warnings
from typing import Protocol, runtime_checkable

import torch
import torch.distributed as dist

from ..diagnostics import NetcError
from ..ir.core import DTYPES, SymbolRef
from ..ir.query import layer_name, layers, network_inputs, param_roles
from ..ops import lookup
from ..ops.comm import COMM_OPS
from .params import torch_dtype
from .reference import (INT_DTYPES, feed_tensor, seeded_generator, label_reading_of, random_float_input, random_labels,
                        index_bound_of, lengths_bound_of, random_ids, random_lengths, random_param, run_op)
from ..ops.initializers import init_tensor

DEFAULT_TIMEOUT = 120.0


class CommError(NetcError):
    """A communication failed or timed out (the message names the rank, the op and its peer)."""


def _reason(e: Exception) -> str:
    """The transport's message, without gloo's source path and boilerplate."""
    msg = " ".join(str(e).split()) or type(e).__name__
    msg = re.sub(r"\[[^\]]*\.(cc|cpp|h):\d+\]\s*", "", msg)
    msg = msg.split(" This is typically")[0]
    return msg[:400]


def env_rank():
    """(rank, world size) from torchrun's environment, or None outside a distributed launch."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    return None


def rank_network(module, rank: int, network=None):
    nets = [n for n in module.networks() if n.attrs.get("rank") == rank
            and (network is None or n.attrs.get("of") == network)]
    if not nets:
        raise NetcError(f"the module has no program for rank {rank}")
    return nets[0]


# -- logical values and their parts ---------------------------------------------------------------

def _part_bounds(part: dict, full: int):
    """(start, length) of a shard along its dim, given the logical size."""
    sizes = part.get("sizes")
    if sizes:
        i = part["index"]
        return sum(sizes[:i]), sizes[i]
    n = full // part["count"]
    return part["index"] * n, n


def logical_shape(op) -> list:
    shape = list(op.results[0].type.shape)
    part = op.attrs.get("partition") or {}
    if "dim" in part:
        d = part["dim"]
        shape[d] = sum(part["sizes"]) if part.get("sizes") else shape[d] * part["count"]
    return shape


def logical_data_inputs(module, network=None) -> dict:
    """{logical name: logical shape} of the data inputs (no role) of a partitioned network, over the
    programs of every rank: what a training dataset's arrays must feed."""
    out = {}
    for net in module.networks():
        if "rank" not in net.attrs or (network is not None and net.attrs.get("of") != network):
            continue
        for op in network_inputs(net):
            if not op.attrs.get("role"):
                out.setdefault((op.attrs.get("partition") or {}).get("of", layer_name(op)), logical_shape(op))
    return out


def shard_of(t: torch.Tensor, part: dict | None):
    if not part or "dim" not in part:
        return t
    start, n = _part_bounds(part, t.shape[part["dim"]])
    return t.narrow(part["dim"], start, n)


def logical_input(net, op, seed: int, dtype, given: dict | None):
    """The logical value an input op is part of: given by its logical name, else drawn as the
    reference executor draws the input of that name and shape."""
    part = op.attrs.get("partition") or {}
    name = part.get("of", layer_name(op))
    shape = logical_shape(op)
    v = op.results[0]
    tdtype = INT_DTYPES.get(v.type.dtype, dtype)
    if given is not None:
        if name not in given:
            raise NetcError(f"missing input '{name}'")
        return feed_tensor(given[name], shape, tdtype, f"input '{name}'", "cpu")
    # a worker may read its labels through slices or communication: the partition pass recorded
    # the class count of the logical labels (else the loss reads them here)
    reading = label_reading_of(net, v)
    c = part.get("classes") or (reading[0] if reading else None)
    if c is not None:
        return random_labels(name, shape, c, seed, tdtype, ids=reading[1] if reading else None)
    rows = index_bound_of(net, v)
    if rows is not None:
        return random_ids(name, shape, rows, seed, tdtype)
    steps = lengths_bound_of(net, v)
    if steps is not None:
        return random_lengths(name, shape, steps, seed, tdtype)
    if v.type.dtype in INT_DTYPES:
        return torch.randint(0, 10, tuple(shape), generator=seeded_generator(seed, name)).to(tdtype)
    return random_float_input(name, shape, seed, dtype)


def rank_inputs(net, seed: int, dtype, given: dict | None = None) -> dict:
    """This rank's data inputs (without a role), by their names, cut from the logical inputs."""
    out = {}
    for op in network_inputs(net):
        if op.attrs.get("role"):
            continue
        out[layer_name(op)] = shard_of(logical_input(net, op, seed, dtype, given), op.attrs.get("partition"))
    return out


def _logical_param(p):
    """(logical name, logical shape, slice spec or None) of a parameter op."""
    sl = p.attrs.get("slice_of")
    if sl is not None:
        return sl["name"], sl["shape"], sl
    return p.attrs["sym_name"], list(p.attrs["type"].shape), None


def rank_params(module, names, seed: int, dtype, given: dict | None = None) -> dict:
    """The parameter and state tensors a rank uses, by symbol: a sliced parameter is its part of the
    logical one (given by the logical name, else drawn as the reference executor draws it)."""
    decl = {p.attrs["sym_name"]: p for p in module.params()}
    roles = param_roles(module)
    out = {}
    want = set(names)
    for n in list(want):
        sf = decl[n].attrs.get("share_from") if n in decl else None
        if sf is not None:
            want.add(sf.name)
    for n in sorted(want):
        p = decl[n]
        if p.attrs.get("share_from") is not None:
            continue
        shape = list(p.attrs["type"].shape)
        if "state" in p.attrs:
            out[n] = torch.full(tuple(shape), float(p.attrs.get("value", 0.0)), dtype=dtype)
            continue
        lname, lshape, sl = _logical_param(p)
        if given is not None and lname in given:
            t = feed_tensor(given[lname], lshape, dtype, f"parameter '{lname}'", "cpu")
        else:
            role = roles.get(n, "weight")
            t = init_tensor(lname, tuple(lshape), p.attrs, seed, dtype)   # its init, else netc's draw
            if t is None:
                t = random_param(lname, tuple(lshape), role, seed, dtype)
        if sl is not None:
            t = t.narrow(sl["dim"], sl["start"], sl["length"]).clone()
        out[n] = t
    for n in sorted(want):
        sf = decl[n].attrs.get("share_from")
        if sf is not None:
            out[n] = out[sf.name].reshape(tuple(decl[n].attrs["type"].shape))
    return out


def assemble(parts: list, order: list | None = None) -> dict:
    """Logical values from every rank's [(name, tensor, partition)]: shards concatenated along their
    dim in index order, a loss over shards averaged, a replica taken once."""
    groups: dict = {}
    for name, t, part in parts:
        part = part or {}
        key = part.get("of", name)
        groups.setdefault(key, []).append((t, part))
    out = {}
    for key, items in groups.items():
        p0 = items[0][1]
        if "dim" in p0:
            items.sort(key=lambda x: x[1]["index"])
            out[key] = torch.cat([t for t, _ in items], dim=p0["dim"])
        elif p0.get("reduce") == "mean":
            out[key] = sum(t for t, _ in items) / len(items)
        else:
            out[key] = items[0][0]
    if order:
        out = {k: out[k] for k in order if k in out} | {k: v for k, v in out.items() if k not in order}
    return out


def logical_param_parts(module, tensors: dict) -> list:
    """[(symbol, tensor, partition)] for assemble(): sliced parameters (and their optimizer state,
    '<slice>.<role>') as shards of the logical parameter."""
    decl = {p.attrs["sym_name"]: p for p in module.params()}
    out = []
    for n, t in tensors.items():
        p = decl.get(n)
        sl = p.attrs.get("slice_of") if p is not None else None
        suffix = ""
        if sl is None and "." in n:
            base, _, suffix = n.rpartition(".")
            q = decl.get(base)
            sl = q.attrs.get("slice_of") if q is not None else None
            suffix = "." + suffix
        if sl is None:
            out.append((n, t, None))
            continue
        if t.dim() <= sl["dim"]:
            # a scalar state of a slice (Adam's step count): the same on every slice, not a shard
            out.append((n, t, {"of": sl["name"] + suffix, "replica": True}))
            continue
        count = sl["shape"][sl["dim"]] // sl["length"]
        out.append((n, t, {"of": sl["name"] + suffix, "dim": sl["dim"], "index": sl["start"] // sl["length"],
                           "count": count}))
    return out


# -- communication --------------------------------------------------------------------------------

class Comm:
    """Runs the communication ops of one rank's program with torch.distributed, counting bytes.
    Point-to-point messages and the step barriers have process groups of their own, so that the
    collectives' group sees the same sequence of operations on every rank (what
    TORCH_DISTRIBUTED_DEBUG=DETAIL checks)."""

    def __init__(self, rank: int, world: int, groups: dict, timeout: float, p2p=None, barriers=None):
        self.rank, self.world, self.groups, self.timeout = rank, world, groups, timeout
        self.p2p, self.barriers = p2p, barriers
        self.pending = []
        self.count = 0
        self.stats = {"sent_bytes": 0, "predicted_bytes": 0, "ops": 0}
        fault = os.environ.get("NETC_FAULT", "")
        self.fault = None
        self.barriers_passed = 0
        if fault:
            r, n, what = fault.split(":")
            if int(r) == rank:
                self.fault = (n, what)

    def group(self, ranks):
        ranks = list(ranks)
        return None if ranks == list(range(self.world)) else self.groups[tuple(ranks)]

    def _check_fault(self, where: str, what: str):
        """NETC_FAULT=RANK:N:exit|hang (before the N-th communication op) or RANK:bN:exit|hang (before the
        N-th barrier): the test hook of a worker that dies or hangs."""
        if not self.fault or self.fault[0] != where:
            return
        if self.fault[1] == "exit":
            sys.stderr.write(f"netc: rank {self.rank}: NETC_FAULT: exiting before {what}\n")
            sys.stderr.flush()
            os._exit(17)
        sys.stderr.write(f"netc: rank {self.rank}: NETC_FAULT: hanging before {what}\n")
        sys.stderr.flush()
        time.sleep(3600)

    def describe(self, op) -> str:
        a = op.attrs
        if op.name == "netc.send":
            return f"send '{layer_name(op)}' to rank {a['peer']}"
        if op.name == "netc.recv":
            return f"recv '{layer_name(op)}' from rank {a['peer']}"
        return f"{op.name[5:]} '{layer_name(op)}' over ranks {a.get('ranks')}"

    def run(self, op, xs: list, dtype, bucket_ops=None):
        self._check_fault(str(self.count), f"'{layer_name(op)}'")
        self.count += 1
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                return self._run(op, xs, dtype, bucket_ops)
        except NetcError:
            raise
        except Exception as e:  # noqa: BLE001 - any transport failure: name the rank and the op
            raise CommError(f"rank {self.rank}: {self.describe(op)} failed: {_reason(e)}") from None

    def _count(self, op, out_shape, ins_shapes, t_elems_factor):
        d = lookup(op.name)
        a = d.attrs_of(op)
        item = DTYPES[op.results[0].type.dtype] if op.results else 4
        self.stats["predicted_bytes"] += d.comm_bytes(a, ins_shapes, tuple(out_shape), item)
        self.stats["sent_bytes"] += int(t_elems_factor * item)
        self.stats["ops"] += 1

    def _run(self, op, xs, dtype, bucket_ops):
        return self.RUNS[op.name](self, op, lookup(op.name).attrs_of(op), xs, dtype, bucket_ops)

    def _send(self, op, a, xs, dtype, bucket_ops):
        t = xs[0].contiguous()
        self.pending.append((dist.isend(t, a["peer"], group=self.p2p), t, op))
        self._count(op, t.shape, [tuple(t.shape)], t.numel())
        return t

    def _recv(self, op, a, xs, dtype, bucket_ops):
        shape = tuple(op.results[0].type.shape)
        t = torch.empty(shape, dtype=INT_DTYPES.get(op.results[0].type.dtype, dtype))
        dist.recv(t, a["peer"], group=self.p2p)
        self._count(op, shape, [], 0)
        return t

    def _broadcast(self, op, a, xs, dtype, bucket_ops):
        shape = tuple(op.results[0].type.shape)
        t = xs[0].contiguous().clone() if xs else torch.empty(shape, dtype=INT_DTYPES.get(
            op.results[0].type.dtype, dtype))
        dist.broadcast(t, a["root"], group=self.group(a["ranks"]))
        self._count(op, shape, [shape] if xs else [], t.numel() if xs else 0)
        return t

    def _all_reduce(self, op, a, xs, dtype, bucket_ops):
        n, g = len(a["ranks"]), self.group(a["ranks"])
        ts = [x.contiguous() for x in xs] if bucket_ops is None else xs
        if bucket_ops is None:
            t = ts[0].clone()
            dist.all_reduce(t, group=g)
            self._count(op, t.shape, [tuple(t.shape)], 2 * t.numel() * (n - 1) / n)
            return t
        flat = torch.cat([x.reshape(-1) for x in ts])
        dist.all_reduce(flat, group=g)
        out, k = [], 0
        for o, x in zip(bucket_ops, ts):
            out.append(flat[k:k + x.numel()].reshape(x.shape))
            k += x.numel()
            self._count(o, x.shape, [tuple(x.shape)], 2 * x.numel() * (n - 1) / n)
        return out

    def _all_gather(self, op, a, xs, dtype, bucket_ops):
        n, g = len(a["ranks"]), self.group(a["ranks"])
        d = a["dim"] % xs[0].dim()
        x = xs[0].movedim(d, 0).contiguous()
        out = torch.empty((x.shape[0] * n,) + tuple(x.shape[1:]), dtype=x.dtype)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        gather(out, x, group=g)
        y = out.movedim(0, d).contiguous()
        self._count(op, y.shape, [tuple(xs[0].shape)], y.numel() * (n - 1) / n)
        return y

    def _reduce_scatter(self, op, a, xs, dtype, bucket_ops):
        ranks = list(a["ranks"])
        n, g = len(ranks), self.group(ranks)
        d = a["dim"] % xs[0].dim()
        x = xs[0].movedim(d, 0).contiguous()
        out = torch.empty((x.shape[0] // n,) + tuple(x.shape[1:]), dtype=x.dtype)
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        try:
            scatter(out, x, group=g)
        except (RuntimeError, NotImplementedError):     # a backend without reduce-scatter (older gloo)
            s = x.clone()
            dist.all_reduce(s, group=g)
            out = s.chunk(n, dim=0)[ranks.index(self.rank)].contiguous()
        y = out.movedim(0, d).contiguous()
        self._count(op, y.shape, [tuple(xs[0].shape)], xs[0].numel() * (n - 1) / n)
        return y

    # how each communication op of ops/comm.py runs on torch.distributed (the distributed runtime's
    # lowering table: a new communication op adds its row here)
    RUNS = {"netc.send": _send, "netc.recv": _recv, "netc.broadcast": _broadcast, "netc.all_reduce": _all_reduce,
            "netc.all_gather": _all_gather, "netc.reduce_scatter": _reduce_scatter}

    def finish(self):
        for work, t, op in self.pending:
            try:
                work.wait()
            except Exception as e:  # noqa: BLE001
                raise CommError(f"rank {self.rank}: {self.describe(op)} failed: {_reason(e)}") from None
        self.pending = []

    def barrier(self, what: str):
        self._check_fault(f"b{self.barriers_passed}", f"the barrier {what}")
        self.barriers_passed += 1
        try:
            if dist.get_backend(self.barriers) == "gloo":
                dist.monitored_barrier(group=self.barriers, timeout=datetime.timedelta(seconds=self.timeout))
            else:
                dist.barrier(group=self.barriers)
        except Exception as e:  # noqa: BLE001
            raise CommError(f"rank {self.rank}: barrier {what} failed: {_reason(e)}") from None


# -- running a rank -------------------------------------------------------------------------------

def execute_rank(net, feed: dict, ptensors: dict, comm: Comm, dtype=torch.float64) -> dict:
    """Run one rank's program: compute ops with their reference semantics, communication with
    torch.distributed (a bucket of all-reduces as one). Returns every value by layer name."""
    ops = layers(net)
    values, named = {}, {}
    i = 0
    while i < len(ops):
        op = ops[i]
        i += 1
        if op.name == "netc.input":
            values[id(op.results[0])] = named[layer_name(op)] = feed[layer_name(op)]
            continue
        if op.name in COMM_OPS:
            xs = [values[id(x)] for x in op.operands]
            b = op.attrs.get("bucket")
            if op.name == "netc.all_reduce" and b is not None:
                group = [op]
                while i < len(ops) and ops[i].name == "netc.all_reduce" and ops[i].attrs.get("bucket") == b:
                    group.append(ops[i])
                    i += 1
                ys = comm.run(op, [values[id(o.operands[0])] for o in group], dtype, bucket_ops=group)
                for o, y in zip(group, ys):
                    values[id(o.results[0])] = named[layer_name(o)] = y
                continue
            y = comm.run(op, xs, dtype)
            values[id(op.results[0])] = named[layer_name(op)] = y
            continue
        run_op(op, values, named, ptensors, dtype)
    comm.finish()
    return named


def _outputs(net) -> list:
    return [v.owner for op in net.regions[0].ops if op.name == "netc.output" for v in op.operands]


# -- compiled ranks -------------------------------------------------------------------------------

class _Type:
    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype


class _Value:
    def __init__(self, place):
        self.type = _Type(place["shape"], place["dtype"])


@runtime_checkable
class SegmentProgram(Protocol):
    """What CompiledRank runs: a rank's program in segments between its communication ops, over an arena.
    Implemented by interp.InterpProgram, SegmentLibrary (a rank library) and cpu_step.CpuRank (the CPU target,
    which also has `region_arenas`: region -> a uint8 tensor of its own, where a region is not in `arena`)."""

    segmented: dict         # codegen.segment_manifest's section: segments, comms (places), outputs (places)
    arena: torch.Tensor     # uint8; its device says whether gloo stages the communication through host memory
    regions: dict           # region name -> byte offset in `arena`

    def run_segment(self, k: int, feed: dict | None = None, capture=()) -> dict:
        """Segment k (0 first takes `feed`: every input by name); the values of `capture` it computed."""

    def param_views(self) -> dict:
        """Every parameter and state tensor by name, as the program holds it."""


class CommEntry:
    """A manifest's communication op (codegen.segment_manifest's `comms`) seen as the IR op Comm runs:
    its op name, attributes (with its layer name) and results' types."""

    def __init__(self, e: dict):
        self.entry = e
        self.name = e["op"]
        self.attrs = dict(e["attrs"], name=e["name"])
        self.results = [_Value(r) for r in e["results"]]
        self.operands = [_Value(o) for o in e["operands"]]


class CompiledRank:
    """One rank's compiled program run in segments, its communication ops between them on views of
    the arena. `program` (a SegmentProgram: InterpProgram, SegmentLibrary, cpu_step.CpuRank) gives
    `segmented` (the manifest section), `arena` (a uint8 tensor), `regions` (region -> byte offset),
    optionally `region_arenas` (region -> a uint8 tensor of its own, where the region is not in `arena`: the
    CPU target's) and run_segment(k, feed, capture) -> captured values; the rest is shared."""

    def __init__(self, program, comm: Comm, backend: str = "gloo"):
        self.program, self.comm = program, comm
        seg = program.segmented
        self.comms = seg["comms"]
        self.ops = [CommEntry(e) for e in self.comms]
        self.nseg = len(seg["segments"])
        self.empty = [s["launches"] == 0 for s in seg["segments"]]
        self.arena, self.regions = program.arena, program.regions
        # a program whose regions are tensors of their own (the CPU target's constant and batch arenas)
        self.region_arenas = getattr(program, "region_arenas", None) or {}
        # gloo runs on host memory: a device arena's tensors go through it
        self.stage = self.arena.device.type != "cpu" and backend == "gloo"
        self._typed: dict = {}

    def view(self, place: dict) -> torch.Tensor:
        """The arena's tensor at a manifest place: a view (shape, element strides, dtype)."""
        dt = torch_dtype(place["dtype"])
        arena = self.region_arenas.get(place["region"], self.arena)
        if (id(arena), dt) not in self._typed:
            isz = torch.empty((), dtype=dt).element_size()
            self._typed[id(arena), dt] = arena[:arena.numel() // isz * isz].view(dt)
        typed = self._typed[id(arena), dt]
        isz = typed.element_size()
        addr = self.regions[place["region"]] + place["offset"]
        if addr % isz:
            raise AssertionError(f"'{place['name']}' at byte {addr} is not aligned for {place['dtype']}")
        return typed.as_strided(tuple(place["shape"]), tuple(place["strides"]), addr // isz)

    def _bucket(self, k: int) -> list:
        """Communication ops k, k+1, ... that run as one: consecutive all-reduces of one gradient bucket
        over one group with nothing between them (as execute_rank runs them)."""
        e = self.comms[k]
        group = [k]
        if e["kind"] != "all_reduce" or e["attrs"].get("bucket") is None:
            return group
        while group[-1] + 1 < len(self.comms):
            j = group[-1] + 1
            f = self.comms[j]
            if not (self.empty[j] and f["kind"] == "all_reduce" and f["attrs"].get("bucket") == e["attrs"]["bucket"]
                    and f["attrs"].get("ranks") == e["attrs"].get("ranks")):
                break
            group.append(j)
        return group

    def _communicate(self, group: list, named: dict) -> None:
        ops = [self.ops[j] for j in group]
        e = self.comms[group[0]]
        dtype = torch_dtype(e["results"][0]["dtype"]) if e["results"] else torch.float32
        if len(group) > 1:
            xs = [self.view(self.comms[j]["operands"][0]) for j in group]
        else:
            xs = [self.view(p) for p in e["operands"]]
        if self.stage:
            xs = [x.cpu() for x in xs]
        elif e["kind"] == "send":
            xs = [x.clone() for x in xs]      # isend reads it later; the arena's bytes are the plan's again
        ys = self.comm.run(ops[0], xs, dtype, bucket_ops=ops) if len(group) > 1 else \
            [self.comm.run(ops[0], xs, dtype)]
        for j, y in zip(group, ys):
            f = self.comms[j]
            if f["kind"] != "send":           # a send's result is the message: nothing reads it
                self.view(f["results"][0]).copy_(y)
            named[f["name"]] = y

    def run(self, feed: dict, capture=()) -> dict:
        """Segment 0 (fed `feed`: every input by name, the learning rate and seed included), then each
        communication op and the segment after it. Returns the outputs (copies), every communication
        op's result, and the values of `capture` (the interpreter's: see InterpProgram.run)."""
        named: dict = {}
        k = 0
        while True:
            named.update(self.program.run_segment(k, feed if k == 0 else None, capture) or {})
            if k == len(self.comms):
                break
            group = self._bucket(k)
            self._communicate(group, named)
            for j in group[1:]:
                named.update(self.program.run_segment(j, None, capture) or {})
            k = group[-1] + 1
        for p in self.program.segmented["outputs"]:
            named[p["name"]] = self.view(p).clone()
        self.comm.finish()
        return named


class SegmentLibrary:
    """A rank library (native.Net of `netc compile --workers K`'s .so) as CompiledRank runs it: a segment is
    netc_run_segment, the arena the device memory netc_arena gives."""

    def __init__(self, net):
        self.net = net
        self.segmented = net.manifest["segmented"]
        self.regions = {k: v for k, v in net.manifest["regions"].items() if k != "arena_bytes"}
        self.arena = net.arena()
        rank = net.manifest.get("rank") or {}
        self.lr = (rank.get("learning_rate") or {}).get("name")
        self.seed = (rank.get("seed") or {}).get("name")

    def run_segment(self, k: int, feed: dict | None = None, capture=()) -> dict:
        if capture:
            raise NetcError("a rank library returns no intermediate values (--grads needs --target interp)")
        if k != 0:
            self.net.run_segment(k)
            return {}
        dev = self.net.device
        xs = [torch.as_tensor(feed[s.name]).to(dtype=s.dtype, device=dev).contiguous() for s in self.net.inputs]
        lr = float(feed[self.lr]) if self.lr else 0.0
        seed = int(feed[self.seed]) if self.seed else 0
        self.net.run_segment(0, xs, lr, seed)
        return {}

    def set_params(self, values: dict) -> None:
        names = {p["name"] for p in self.net.manifest["parameters"] if "shares" not in p}
        self.net.set_params({k: v for k, v in values.items() if k in names})

    def param_views(self) -> dict:
        return self.net.get_params()


def cpu_rank(module, net, params: dict):
    """A rank's program on the CPU target (cpu_step.CpuRank, with the CPU lowerings), or the error saying why the
    generated step does not take it (a recurrent program's time-sized arena)."""
    from .cpu import CPU_LOWERINGS
    from .cpu_step import CpuRank, NoArena
    try:
        return CpuRank(module, net, params, CPU_LOWERINGS)
    except NoArena as e:
        msg = e.diagnostics[0].message if e.diagnostics else str(e)
        raise NetcError(f"rank {net.attrs.get('rank')}'s program does not run on --target cpu ({msg}): use --target "
                        f"reference or interp", net.loc) from None


def rank_library_path(directory: str, net) -> str:
    """Where a rank's library lies: `<directory>/<network>.so` (network: `<net>.rank<r>`)."""
    return os.path.join(directory, f"{net.attrs['sym_name']}.so")


class Worker:
    """One rank of a K-worker run: its process group, program, parameters and communication."""

    def __init__(self, module, rank: int, world: int, network=None, timeout: float = DEFAULT_TIMEOUT,
                 dtype=torch.float64, seed: int = 0, params: dict | None = None, backend: str | None = None,
                 target: str = "reference", blocks: str = "cuda", library: str | None = None):
        """target: "reference" (the reference executor in `dtype`), "interp" (the compiled program on
        the interpreter target, tiles `blocks`; parameters and inputs drawn in `dtype`, run in f32), "cpu"
        (the CPU target's step generated over the plan's arena, f32: cpu_step.CpuRank) or "cuda" (the rank
        library at `library`, on device LOCAL_RANK modulo the devices)."""
        self.module, self.rank, self.world, self.dtype, self.seed = module, rank, world, dtype, seed
        self.timeout = timeout
        self.target = target
        self.net = rank_network(module, rank, network)
        if self.net.attrs.get("world") != world:
            raise NetcError(f"the program was split for {self.net.attrs.get('world')} workers, but {world} processes "
                            f"run it (WORLD_SIZE)")
        if target not in ("reference", "interp", "cpu", "cuda"):
            raise NetcError(f"unknown target '{target}' for a rank (reference, interp, cpu, cuda)")
        device = None
        if target == "cuda":
            if not torch.cuda.is_available():
                raise NetcError("--target cuda runs each rank's library on a GPU, and torch sees none here")
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
            torch.cuda.set_device(device)
        backend = backend or ("nccl" if torch.cuda.is_available() and os.environ.get("NETC_BACKEND") == "nccl"
                              else "gloo")
        self.backend = backend
        if not dist.is_initialized():
            dist.init_process_group(backend, rank=rank, world_size=world,
                                    timeout=datetime.timedelta(seconds=timeout))
        # every rank creates every sub-group, in one order (new_group is collective)
        groups = {}
        all_ranks = sorted({tuple(op.attrs["ranks"]) for n in module.networks() for op in n.regions[0].ops
                            if "ranks" in op.attrs and op.name in COMM_OPS} | set(self.holder_groups().values()))
        td = datetime.timedelta(seconds=timeout)     # new_group's default would be torch's (30 minutes)
        for rs in all_ranks:
            if list(rs) != list(range(world)) and len(rs) > 1:
                groups[rs] = dist.new_group(list(rs), timeout=td)
        p2p = dist.new_group(list(range(world)), timeout=td)
        barriers = dist.new_group(list(range(world)), backend="gloo", timeout=td)
        self.comm = Comm(rank, world, groups, timeout, p2p, barriers)
        self.comm.barrier("at start")
        used = {ref.name for op in layers(self.net) for ref in (op.attrs.get("params") or {}).values()
                if isinstance(ref, SymbolRef)}
        self.params = rank_params(module, used, seed, dtype, params)
        self.broadcast_replicas()
        self.steps = 0
        self.executor = None
        if target != "reference":
            training = "gradients" in self.net.attrs
            if target == "interp":
                from .interp import InterpProgram
                program = InterpProgram(module, self.net.attrs["sym_name"], params=self.params, seed=seed,
                                        blocks=blocks, training=training)
            elif target == "cpu":
                program = cpu_rank(module, self.net, self.params)
            else:
                from .native import load
                program = SegmentLibrary(load(library, device=device))
                program.set_params(self.params)
            self.executor = CompiledRank(program, self.comm, backend)
            self.params = program.param_views()

    def holder_groups(self) -> dict:
        """parameter -> the ranks whose programs use it (those held by several are broadcast)."""
        holders: dict = {}
        for n in self.module.networks():
            if "rank" not in n.attrs:
                continue
            for op in n.regions[0].ops:
                for ref in (op.attrs.get("params") or {}).values():
                    if isinstance(ref, SymbolRef):
                        holders.setdefault(ref.name, set()).add(n.attrs["rank"])
        decl = {p.attrs["sym_name"]: p for p in self.module.params()}
        out = {}
        for p, rs in holders.items():
            if len(rs) > 1 and p in decl and "state" not in decl[p].attrs and decl[p].attrs.get("share_from") is None:
                out[p] = tuple(sorted(rs))
        return out

    def broadcast_replicas(self):
        """Replicas start equal: each parameter held by several ranks comes from the lowest of them."""
        for p, rs in sorted(self.holder_groups().items()):
            if self.rank not in rs:
                continue
            t = self.params[p]
            g = self.comm.group(rs)
            try:
                if self.backend == "nccl":      # NCCL moves device memory
                    d = t.cuda()
                    dist.broadcast(d, rs[0], group=g)
                    t.copy_(d.cpu())
                    continue
                dist.broadcast(t, rs[0], group=g)
            except Exception as e:  # noqa: BLE001
                raise CommError(f"rank {self.rank}: broadcast of parameter '{p}' from rank {rs[0]} failed: "
                                f"{str(e).strip()[:300]}") from None

    def _execute(self, feed: dict, capture=()) -> dict:
        if self.executor is not None:
            return self.executor.run(feed, capture)
        return execute_rank(self.net, feed, self.params, self.comm, self.dtype)

    def current_params(self) -> dict:
        """The parameters and state tensors as the rank holds them now (a compiled rank's: copies of its
        arena's, which a pickle would otherwise carry whole)."""
        if self.target == "cuda":
            return self.executor.program.param_views()
        if self.executor is not None:
            return {k: v.clone() for k, v in self.params.items()}
        return self.params

    def forward(self, inputs: dict | None = None) -> list:
        feed = rank_inputs(self.net, self.seed, self.dtype, inputs)
        named = self._execute(feed)
        self.comm.barrier("after the forward pass")
        return [(layer_name(op), named[layer_name(op)], op.attrs.get("partition")) for op in _outputs(self.net)]

    def step(self, inputs: dict | None, lr: float, capture=()) -> dict:
        feed = rank_inputs(self.net, self.seed, self.dtype, inputs)
        for op in network_inputs(self.net):
            role = op.attrs.get("role")
            if role == "learning_rate":
                feed[layer_name(op)] = torch.tensor(float(lr), dtype=self.dtype)
            elif role == "seed":
                feed[layer_name(op)] = torch.tensor(self.seed * 1_000_003 + self.steps, dtype=torch.int64)
            elif role:
                raise NetcError(f"input '{layer_name(op)}' has the role '{role}', which the distributed runtime "
                                f"does not feed")
        self.comm.barrier(f"before step {self.steps + 1}")
        named = self._execute(feed, capture)
        self.comm.barrier(f"after step {self.steps + 1}")
        self.steps += 1
        return named

    def gather(self, obj):
        """Every rank's `obj` on rank 0 (a list, in rank order), None elsewhere."""
        out = [None] * self.world if self.rank == 0 else None
        try:
            dist.gather_object(obj, out, dst=0)
        except Exception as e:  # noqa: BLE001
            raise CommError(f"rank {self.rank}: gathering the results on rank 0 failed: {str(e).strip()[:300]}") \
                from None
        return out

    def close(self):
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001
            pass


def run_forward(worker: Worker, inputs: dict | None = None) -> dict | None:
    """One forward pass on every rank; on rank 0 the network's outputs, assembled as the single-process
    run names them (None on the other ranks)."""
    parts = worker.forward(inputs)
    every = worker.gather(parts)
    return assemble([p for ps in every for p in ps]) if worker.rank == 0 else None


def run_training(worker: Worker, steps: int, lr_at, inputs: dict | None = None, log=None, want_grads=False,
                 feeds=None):
    """`steps` training steps on every rank. On rank 0: (history, first step's gradients by logical
    parameter or None); `log(row)` after each step there. The loss is the network's (the mean of its
    partitions' losses). feeds: (logical inputs, epoch) per step instead of the fixed `inputs` (a
    dataset's batches, the same on every rank: each cuts its shards from them)."""
    history, grads = [], None
    net = worker.net
    feeds = iter(feeds) if feeds is not None else None
    for k in range(steps):
        lr = lr_at(k)
        epoch = 0
        if feeds is not None:
            inputs, epoch = next(feeds)
        # a compiled rank's gradients: captured as their updates read them (the plan reuses their bytes)
        capture = sorted((net.attrs.get("gradients") or {}).values()) if want_grads and k == 0 else ()
        named = worker.step(inputs, lr, capture)
        mine = [(n, named[n], _partition_of(net, n)) for n in net.attrs.get("losses", [])]
        if want_grads and k == 0:
            g = {p: named[v] for p, v in (net.attrs.get("gradients") or {}).items()}
            every_g = worker.gather(logical_param_parts(worker.module, g))
            if worker.rank == 0:
                grads = assemble([p for ps in every_g for p in ps])
        every = worker.gather(mine)
        if worker.rank == 0:
            losses = {n: float(v) for n, v in assemble([p for ps in every for p in ps]).items()}
            row = {"step": k + 1, "epoch": epoch, "lr": lr, "loss": sum(losses.values()),
                   **({f"loss:{n}": v for n, v in losses.items()} if len(losses) > 1 else {})}
            if row["loss"] != row["loss"]:
                raise NetcError(f"the loss became NaN at step {k + 1} (learning rate {lr:g}): lower --lr")
            history.append(row)
            if log:
                log(row)
    return (history, grads) if worker.rank == 0 else (None, None)


def gather_params(worker: Worker) -> dict | None:
    """Every parameter and state tensor by its logical name, on rank 0 (replicas once, slices joined)."""
    every = worker.gather(logical_param_parts(worker.module, worker.current_params()))
    return assemble([p for ps in every for p in ps]) if worker.rank == 0 else None


def _partition_of(net, name):
    for op in net.regions[0].ops:
        if op.attrs.get("name") == name:
            return op.attrs.get("partition")
    return None
