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

Two lowerings of the same annotations: SINGA's graph construction for networks SINGA built (the
network has `num_partitions`, as every SINGA import does; singa.py), and netc's typed collectives
for everything else (.nd, Paleo; collectives.py). What they share (the emitter, make_op) is
common.py. Which ops split by features, follow a split, or run row-parallel is each op's
declaration (OpDef's partitioning facts, netc/ops/).

Errors (the user's): a size that does not divide by K (SINGA's B9: batchsize, num_filters,
num_output; a job.conf's batchsize is rounded down as SINGA does, with a warning), a location outside 0..K-1, a layer that cannot be split by features, SINGA's B2 (two
connection layers of one name), B3 (v0.1 never bridges), B6 (partition_dim -1 beside 0/1), B16
(share_from on a partition_dim 1 layer).
"""
from __future__ import annotations

from ...diagnostics import NetcError
from ...ir.core import SymbolRef
from ...ops import lookup
from ...ops.registry import prod
from ..registry import Pass, register_pass
from .collectives import NetcLowering
from .common import Emitter, is_partitioned, workers_of
from .singa import SingaLowering


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


def _label_classes(net) -> dict:
    """{input name: class count C} of the inputs a loss reads as its labels (C: the logits' features,
    as runtime.reference.label_classes_of counts them)."""
    out = {}
    for op in net.regions[0].ops:
        d = lookup(op.name)
        if d is None or not d.is_loss or d.label_operand is None or len(op.operands) <= d.label_operand:
            continue
        src = op.operands[d.label_operand].owner
        if src is not None and src.name == "netc.input" and op.operands[0].type.shape is not None:
            out[src.attrs.get("name")] = prod(op.operands[0].type.shape[1:])
    return out


def _record_label_classes(net, classes: dict):
    """Each worker's copy of a labels input says how many classes its logical value has
    (partition.classes): a worker's program may read its shard through slices, concats and
    communication rather than in the loss, and draws the same labels as the single process."""
    for op in net.regions[0].ops:
        part = op.attrs.get("partition")
        if op.name == "netc.input" and isinstance(part, dict) and part.get("of") in classes:
            op.attrs["partition"] = {**part, "classes": classes[part["of"]]}


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
            classes = _label_classes(net)
            em = Emitter(module, net, K, ctx.diag)
            if singa:
                SingaLowering(em, module.attrs.get("singa_graph", "v0.2+")).run()
                if em.singa_graph is not None:   # for tests and tools: SINGA's nodes, '@' names
                    ctx.notes.setdefault("singa_graph", {})[net.attrs["sym_name"]] = em.singa_graph
            else:
                if not any(k in op.attrs for op in net.regions[0].ops
                           for k in ("partition_dim", "location", "split_index")):
                    ctx.diag.warning(f"network '{net.attrs['sym_name']}' says nothing about partitioning (partition_dim, "
                                     f"location, parallel splits): every layer runs on worker 0 of {K}", net.loc,
                                     width=len(net.attrs["sym_name"]))
                NetcLowering(em, opts).run()
            _record_label_classes(net, classes)
            extra.update(em.new_params)
        if extra or any(is_partitioned(n) for n in module.networks()):
            _reorder_params(module, extra)
