"""SINGA job.conf -> netc IR (back half of the SINGA importer; the package's other modules are the
front half).

build_singa (frontend/singa/__init__.py) builds the nets SINGA builds (per phase) with SINGA's own
node names, order and NCHW shapes: the logical net, one partition (nodes '<layer>@0'). This module maps each built net onto
netc's *unresolved* IR (layers with `parents` name lists), like the Paleo and .nd frontends, so
phases, shapes, parameters and costs go through netc's normal passes and op definitions.

Partitioning. Every layer records SINGA's `partition_dim` (the layer's, else NetProto's, default
0), and for a net SINGA builds with K > 1 partitions (the training net, cluster.nworkers_per_group)
`num_partitions: K`; the module records which construction rules apply (`singa_graph`: "v0.1" or
"v0.2+"). The `partition` pass (netc/passes/partition/singa.py) then builds SINGA's partitioned graph
from the IR: the connection layers, K nodes per layer `<layer>:<i>`, the bridges as netc.send /
netc.recv, SINGA's order, the divided shapes and sliced parameters; so `netc run --workers 1`
runs the unpartitioned net and `--workers K` any K.

Phases. All three nets (kTrain with K = cluster.nworkers_per_group, kTest and kVal with K = 1) are
built and merged into one `netc.network`: a layer identical in every phase is written once, the
others carry `include: [phase, ...]` - so `--phase train|val|test` selects SINGA's kTrain / kVal /
kTest net, and `netc import` writes one .nd file for the whole job. Errors in the training net,
or in a net the job really builds (test_steps / validate_steps > 0), are reported; a net SINGA
would not build that fails to build is left out (selecting that phase gives an empty network).

Names. Every layer is named after SINGA's node, with the one substitution '@' -> ':' (the .nd
language reserves '@' for split indices): `conv1@00` -> `conv1:00`, `0#conv1@0` -> `0#conv1:0`,
`concate(split(0#pool3))@1` -> `concate(split(0#pool3)):1`. Layers netc adds carry a `.suffix`.
`node_map()` gives the SINGA node -> netc layer correspondence.

Recurrent nets. A v0.2+ job with `unroll_len: T` on its neuralnet whose built graph is SINGA's plain
unrolled pattern (char-rnn's) is imported ROLLED: one op per layer over the time-major sequence
[T, B, ...] (one netc.gru, not T copies), named after the configured layers; rolled.py says which
nets and how each layer maps. Other unrolled nets keep one op per step, as below.

Layout. netc is NHWC: a 4-D SINGA shape [N, C, H, W] is [N, H, W, C]; other ranks are kept;
concat / slice dimension 1 of a 4-D tensor becomes 3.

Mapping (SINGA type -> netc op):
  kShardData, kLMDBData, kCharRNN      no op: record readers without a data blob (shape []); the
                                       parser layers reading them carry the shapes
  kMnist, kRGBImage, kRecordInput,     netc.input f32 with the built shape (NHWC); kLabel, kRNNLabel:
  kCSVInput, kLabel, kOneHot,          netc.input i32 [batch]; kOneHot: f32 [batch, vocab];
  kRNNLabel, kEmbedding, kDummy/       kEmbedding: f32 [batch, feature_dim] (its lookup table is
  kRNNDummy without source             not represented; a rolled net has the lookup, rolled.py).
                                       A v0.2+ record input read as a label by a
                                       loss also gets `<node>.label`: i32 [batch]. A kDummy input is
                                       `whole`: every partition has all of dummy_conf.shape
  kDummy with a source                 dummy {output}: the identity (SINGA's DummyLayer)
  kImagePreprocess                     opaque pass-through if it keeps the shape, else an input with
                                       the cropped shape
  kConvolution/kCConvolution/          conv2d: filter [k_y, k_x, C_in, num_filters (/K for
  kCudnnConv                           partition_dim 1)], strides [1, s_y, s_x, 1], padding
                                       [p_y, p_x] (SINGA's floor formula)
  kPooling/kCPooling/kCudnnPool        maxpool / avgpool, ksize [1,k_y,k_x,1], explicit padding (v0.1
                                       ignores pad: padding [0, 0], as SINGA computes the shape)
  kLRN/kCudnnLRN                       lrn {local_size, alpha, beta, knorm}
  kReLU, kSigmoid, kSTanh,             relu {negative_slope}, sigmoid, tanh (SINGA's STanh is the
  kActivation/kCudnnActivation         scaled 1.7159 tanh(2x/3): same shape, costed as tanh)
  kDropout                             dropout {dropout_keep_prob: 1 - dropout_ratio}
  kInnerProduct                        inner_product {num_outputs}; netc's weight is [K, M], SINGA's
                                       [M, K] (or [K, M] with transpose): same element count
  kSoftmax/kCudnnSoftmax               softmax
  kSoftmaxLoss/kCudnnSoftmaxLoss       the node is softmax(prediction) - SINGA's data blob holds the
                                       probabilities, shape [N, C] - plus `<node>.loss` =
                                       softmax_loss(prediction, labels), the scalar loss
  kEuclideanLoss                       euclidean_loss (scalar, SINGA's shape [] too)
  kBM/kCudnnBM                         batch_norm
  kGRU                                 gru {dim_hidden, bias} on one step x [B, X] (an unrolled net
                                       rolled.py does not roll): (x) on the first unrolled step, (x, the
                                       previous step as h0) after it; all 6 / 9 params bound, in SINGA's
                                       order and layout (z_hx, r_hx, c_hx [h, vdim], ..., z_b, ...)
  kSplit (a model split)               no op: a value may have several users in netc; readers of
                                       the split read its source (same shape)
  kBridgeSrc/kBridgeDst                (made by the partition pass: netc.send / netc.recv)
  kConcate                             concat {dim}
  kSlice                               slice {dim, num_slices, index}: one op per blob, `<node>`
                                       (blob 0) and `<node>.<k>`; reader k (in the order readers are
                                       set up) takes blob k, as SINGA's SliceLayer hands them out
                                       (the SINGA builder puts no model split after a kSlice: see
                                       singa/graph.py)
  kRBMVis / kRBMHid                    energy model (below)
  kArgSort / kAccuracy                 argsort / accuracy {topk}: [N, topk]
  outputs, user layers                 opaque pass-through {type}
  layers (with a plugin), others

Parameters are bound by SINGA's names (`params: {weight: {name, share_from}}`), so share_from
and the v0.2+ '0#' names are SINGA's. (After the partition pass, partition_dim 0 replicas bind the
same name, one storage as in SINGA; partition_dim 1 slices are distinct: `<name>:<partition>`.)
A conv without a bias param still gets netc's bias (netc's conv2d always has one).

Energy models (RBM configs, kRBMVis <-> kRBMHid 2-cycle): the visible node becomes rbm_visible,
a pass-through of its input (SINGA's positive phase) {type: kRBMVis, hidden: <hid layer>} that
binds SINGA's visible bias [vdim] (its param(1)), and the hidden node inner_product(visible)
{num_outputs: hdim}, bound to the RBM weight [hdim, vdim] and the hidden bias [hdim] (share_from
an RBMVis weight binds the owner's name directly, since the visible node binds no weight); the
hidden -> visible edge is recorded in the `hidden` attribute, not as an edge. Parameter counts
are SINGA's: W + visible bias + hidden bias. Shapes equal
SINGA's; `netc explain` works and a note says it is an energy model. Training learns it by CD-k
(netc/ops/energy.py) on the reference executor and through the kernels (kernels/energy.py).
"""
from __future__ import annotations

import os
import re

from ...diagnostics import SOURCES, Diagnostic, DiagnosticEngine, Loc, NetcError
from ...ir.core import UNRANKED, Module, Operation, Region
from ...ops.initializers import FAN_INITS, SINGA_INITS
from ...ops.optim import OptimizerError, resolve_optimizer, schedule_problem
from . import build_singa, read_job
from .rolled import build_rolled, roll_steps

_PHASES = (("kTrain", "train"), ("kTest", "test"), ("kVal", "val"))
_NO_OP = {"kShardData", "kLMDBData", "kCharRNN"}
_INPUTS = {"kMnist", "kRGBImage", "kRecordInput", "kCSVInput", "kLabel", "kOneHot", "kRNNLabel", "kEmbedding"}
_CONV = {"kConvolution", "kCConvolution", "kCudnnConv"}
_POOL = {"kPooling", "kCPooling", "kCudnnPool"}
_ACT = {"RELU": "netc.relu", "SIGMOID": "netc.sigmoid", "TANH": "netc.tanh", "STANH": "netc.stanh"}


def nname(singa_name: str) -> str:
    """netc layer / parameter name of a SINGA node / parameter name."""
    return singa_name.replace("@", ":")


def nhwc(shape) -> list:
    s = list(shape)
    return [s[0], s[2], s[3], s[1]] if len(s) == 4 else s


def nchw(shape) -> list:
    """netc's NHWC shape in SINGA's NCHW order (`netc explain --nchw`); other ranks unchanged."""
    s = list(shape)
    return [s[0], s[3], s[1], s[2]] if len(s) == 4 else s


def _dim(d: int, rank: int) -> int:
    return {1: 3, 2: 1, 3: 2}.get(d, d) if rank == 4 else d


def network_name(path: str) -> str:
    stem = os.path.splitext(os.path.basename(path))[0] or "net"
    s = re.sub(r"[^A-Za-z0-9_]", "_", stem)
    return s if s[0].isalpha() or s[0] == "_" else "net_" + s


class _Net:
    """One built SingaNet -> a list of unresolved ops (plus the node -> layer map)."""

    def __init__(self, net):
        self.net = net
        self.nodes = {n.name: n for n in net.nodes}
        self.ops: list[Operation] = []
        self.alias: dict[str, str | None] = {}   # SINGA node -> netc layer (None: no op)
        self.slices: dict[str, list] = {}        # kSlice node -> [name, parent, loc, attrs, {reader: blob}]
        self.energy = []
        self.labels: dict[str, str] = {}
        self.cur = None                          # the node being converted
        self.problems: list[Diagnostic] = []     # about params' init (reported once per job)

    def ref(self, src: str) -> str | None:
        sl = self.slices.get(src)
        if sl is not None:
            # SINGA's kSlice yields num_slices blobs; each reader takes the next one, in the order
            # readers are set up (SliceLayer's Layer2Index: first request first, one blob per reader
            # layer however often it reads): blob k is its own slice op. (Setup checked that there
            # are no more readers than blobs.)
            name, parent, loc, attrs, used = sl
            reader = self.cur.name if self.cur is not None else None
            if reader not in used:
                used[reader] = len(used)
                k = used[reader]
                if k:
                    self.add("netc.slice", f"{name}.{k}", [parent], loc, **dict(attrs, index=k))
            k = used[reader]
            return name if k == 0 else f"{name}.{k}"
        return self.alias.get(src, nname(src))

    def add(self, opname, name, parents, loc, **attrs):
        a = {"name": name, "parents": [p for p in parents]}
        a.update(attrs)
        if self.cur is not None:   # how SINGA partitions it: the partition pass reads these
            a["partition_dim"] = self.cur.partition_dim
            if self.net.workers > 1:
                a["num_partitions"] = self.net.workers
        op = Operation(opname, result_types=[UNRANKED], attrs=a, loc=loc)
        op.attr_locs = {"name": loc}
        self.ops.append(op)
        return op

    def input(self, name, shape, dtype, loc, n=None):
        n = n or self.cur
        a = {"name": name, "shape": list(shape), "dtype": dtype}
        if n is not None:
            a["partition_dim"] = n.partition_dim
            if n.conf.get("partition_sizes"):
                a["partition_sizes"] = list(n.conf["partition_sizes"])
        op = Operation("netc.input", result_types=[UNRANKED], attrs=a, loc=loc)
        op.attr_locs = {"name": loc, "shape": loc}
        at = self.batch_loc(n)
        if at is not None:   # the partition pass's batch rule points at the batchsize field
            op.attr_locs["batch"] = at
        self.ops.append(op)
        return op

    def batch_loc(self, n):
        """Where the batchsize of input node n is written: its own data conf, else its source's (a
        parser reading a kShardData, a kImagePreprocess reading a kRecordInput)."""
        seen = set()
        while n is not None and n.name not in seen:
            if n.batch_loc is not None:
                return n.batch_loc
            seen.add(n.name)
            n = self.nodes.get(n.srcs[0]) if n.srcs else None
        return None

    def pname(self, n, p) -> str:
        name = nname(p.name)
        if n.partition_dim == 1 and n.num_partitions > 1:
            name = f"{name}:{n.pid}"
        return name

    def bind(self, n, roles, params):
        """params: {role: SingaParam}"""
        out = {}
        for role, p in params.items():
            if p is None:
                continue
            spec = {"name": self.pname(n, p)}
            if p.share_from:
                spec["share_from"] = nname(p.share_from)
            for k in ("lr_scale", "wd_scale"):    # the optimizer's per-parameter multipliers
                v = p.conf.get(k)
                if v is not None and float(v) != 1.0:
                    spec[k] = float(v)
            spec.update(singa_init(p, self.problems))
            out[role] = spec
        return out

    def transposed_share(self, n, p) -> bool:
        """Whether inner-product node n shares its weight param p with one of the other orientation (SINGA's
        innerproduct_conf transpose differs from the owner's; an RBM's weight is [hdim, vdim], untransposed):
        SINGA then uses the same [M, K] storage transposed (rbm_autoencoder.conf's decoder)."""
        if p is None or not p.share_from:
            return False
        owner = next((m for m in self.net.nodes for q in m.params if q.name == p.share_from), None)
        if owner is None or owner.type not in ("kInnerProduct", "kRBMVis", "kRBMHid"):
            return False
        return bool(owner.conf.get("transpose")) != bool(n.conf.get("transpose"))

    def label_of(self, src: str, loc) -> str:
        """The label provider for a loss reading `src` (v0.2+ record inputs carry labels)."""
        n = self.nodes.get(src)
        if n is not None and n.type in ("kRecordInput", "kCSVInput", "kImagePreprocess"):
            root = n
            while root.type == "kImagePreprocess" and root.srcs:
                root = self.nodes[root.srcs[0]]
            lab = self.labels.get(root.name)
            if lab is None:
                lab = nname(root.name) + ".label"
                self.labels[root.name] = lab
                self.input(lab, [n.shape[0]], "i32", root.loc, root)
            return lab
        return self.ref(src)

    def build(self):
        steps = roll_steps(self.net)
        if steps:   # a recurrent net: one op per layer over the whole sequence (rolled.py)
            return build_rolled(self, steps)
        for n in self.net.nodes:
            self.node(n)
        # A share_from owner that no netc op binds (an RBM weight: kRBMVis owns it): the sharer
        # binds the owner's name itself, which is the same storage (netc shares parameters bound
        # by one name).
        bound = {spec["name"] for op in self.ops for spec in (op.attrs.get("params") or {}).values()}
        for op in self.ops:
            for spec in (op.attrs.get("params") or {}).values():
                if "share_from" in spec and spec["share_from"] not in bound:
                    spec["name"] = spec.pop("share_from")
        return self.ops

    def node(self, n):
        self.cur = n
        t, loc, name = n.type, n.loc, nname(n.name)
        base = t[5:] if t.startswith("user:") else t
        srcs = [self.ref(s) for s in n.srcs]
        srcs = [s for s in srcs if s is not None]
        c = n.conf
        if t in _NO_OP:
            self.alias[n.name] = None
            return
        if t in _INPUTS or (t in ("kDummy", "kRNNDummy") and not n.srcs):
            if t in ("kLabel", "kRNNLabel"):
                shape = [c.get("label_size", n.shape[0] if n.shape else 1)] if t == "kRNNLabel" else n.shape
                self.input(name, shape, "i32", loc)
            else:
                op = self.input(name, nhwc(n.shape), "f32", loc)
                if t == "kDummy":   # dummy_conf.shape as it is on every partition (DummyLayer::Setup)
                    op.attrs["whole"] = True
            return
        if t == "kImagePreprocess":
            src = self.nodes.get(n.srcs[0]) if n.srcs else None
            if src is not None and list(src.shape) == list(n.shape):
                self.add("netc.opaque", name, srcs, loc, type=t)
            else:
                self.input(name, nhwc(n.shape), "f32", loc)
            return
        if t == "kSplit":
            self.alias[n.name] = srcs[0]
            return
        ps = n.params
        if t in _CONV:
            ky, kx = c["kernel"]
            cin = self.nodes[n.srcs[0]].shape[1]
            params = self.bind(n, None, {"weight": ps[0] if ps else None, "bias": ps[1] if len(ps) > 1 else None})
            self.add("netc.conv2d", name, srcs, loc, filter=[ky, kx, cin, c["num_filters"]],
                     strides=[1, c["stride"][0], c["stride"][1], 1], padding=list(c["pad"]),
                     **({"bias": False} if not c.get("bias", True) else {}), **({"params": params} if params else {}))
        elif t in _POOL:
            ky, kx = c["kernel"]
            self.add("netc.avgpool" if c.get("pool") == "AVG" else "netc.maxpool", name, srcs, loc,
                     ksize=[1, ky, kx, 1], strides=[1, c["stride"][0], c["stride"][1], 1], padding=list(c["pad"]))
        elif t in ("kLRN", "kCudnnLRN"):
            self.add("netc.lrn", name, srcs, loc, local_size=c["local_size"], alpha=c["alpha"], beta=c["beta"],
                     knorm=c["knorm"])
        elif t in ("kReLU", "kSigmoid", "kSTanh", "kActivation", "kCudnnActivation"):
            act = c.get("activation") or "RELU"
            opname = _ACT.get(act)
            if opname is None:
                self.add("netc.opaque", name, srcs, loc, type=f"{t}:{act}")
            elif opname == "netc.relu":
                self.add(opname, name, srcs, loc, **({"negative_slope": c["negative_slope"]}
                                                     if c.get("negative_slope") else {}))
            else:
                self.add(opname, name, srcs, loc)
        elif t == "kDropout":
            self.add("netc.dropout", name, srcs, loc, dropout_keep_prob=1.0 - c.get("dropout_ratio", 0.5))
        elif t == "kInnerProduct":
            params = self.bind(n, None, {"weight": ps[0] if ps else None, "bias": ps[1] if len(ps) > 1 else None})
            extra = {}
            if self.transposed_share(n, ps[0] if ps else None):
                if n.partition_dim == 1 and n.num_partitions > 1:
                    self.problems.append(Diagnostic(
                        "warning", f"'{name}' shares its weight transposed (SINGA's innerproduct_conf transpose) in a "
                        f"partition_dim 1 layer: netc shares it as the owner's storage reshaped, so the values computed "
                        f"through '{name}' are not SINGA's", ps[0].loc or loc))
                else:   # the owner's storage [M, K] read transposed, as SINGA does: bind the owner itself
                    params["weight"]["name"] = params["weight"].pop("share_from")
                    extra["transpose_weight"] = True
            self.add("netc.inner_product", name, srcs, loc, num_outputs=c["num_output"], **extra,
                     **({"params": params} if params else {}))
        elif t in ("kSoftmax", "kCudnnSoftmax"):
            self.add("netc.softmax", name, srcs, loc)
        elif t in ("kSoftmaxLoss", "kCudnnSoftmaxLoss"):
            pred = srcs[0]
            lab = self.label_of(n.srcs[1], loc)
            if len(n.shape) == 2:
                self.add("netc.softmax", name, [pred], loc)
            else:
                self.add("netc.opaque", name, [pred], loc, type=t)
            self.add("netc.softmax_loss", name + ".loss", [pred, lab], loc)
        elif t == "kEuclideanLoss":
            self.add("netc.euclidean_loss", name, srcs, loc)
        elif t in ("kBM", "kCudnnBM"):
            self.add("netc.batch_norm", name, srcs, loc)
        elif t == "kConcate":
            self.add("netc.concat", name, srcs, loc, dim=_dim(c["concate_dim"], len(n.shape)))
        elif t == "kSlice":
            self.slice(n, name, srcs[0], loc)
        elif t in ("kBridgeSrc", "kBridgeDst"):
            self.add("netc.opaque", name, srcs, loc, type=t)
        elif t == "kDummy":
            self.add("netc.dummy", name, srcs, loc, **({"output": True} if c.get("output") else {}))
        elif t == "kArgSort":
            self.add("netc.argsort", name, srcs[:1], loc, topk=c.get("topk", 1))
        elif t == "kAccuracy":
            self.add("netc.accuracy", name, [srcs[0], self.label_of(n.srcs[1], loc)], loc, topk=c.get("topk", 1))
        elif t == "kRBMVis":
            hid = [s for s in n.srcs if self.nodes[s].type == "kRBMHid"]
            ins = [self.ref(s) for s in n.srcs if self.nodes[s].type != "kRBMHid"]
            # SINGA's RBMVisLayer owns param(0), the weight [hdim, vdim], and param(1), the visible bias
            # [vdim]; it learns them by CD-k with the hidden layer's bias (its param(1)), so the visible op
            # binds all three (the hidden layer's inner product binds the weight and hidden bias too)
            hn = self.nodes[hid[0]] if len(hid) == 1 else None
            hps = hn.params if hn is not None else []
            params = self.bind(n, None, {"bias": ps[1] if len(ps) > 1 else None, "weight": ps[0] if ps else None,
                                         "hidden_bias": hps[1] if len(hps) > 1 else None})
            hconf = hn.conf if hn is not None else {}
            self.add("netc.rbm_visible", name, ins, loc, type=t, energy_model=True, hidden=[nname(h) for h in hid],
                     params_singa=[nname(p.name) for p in ps], **({"gaussian": True} if c.get("gaussian") else {}),
                     **({"hdim": c["hdim"]} if c.get("hdim") else {}),
                     **({"hidden_gaussian": True} if hconf.get("gaussian") else {}),
                     **({"params": params} if params else {}))
            self.energy.append((n, hid))
        elif t == "kRBMHid":
            params = self.bind(n, None, {"weight": ps[0] if ps else None, "bias": ps[1] if len(ps) > 1 else None})
            if "share_from" in params.get("weight", {}):   # the visible layer's weight: bind it by its name
                params["weight"]["name"] = params["weight"].pop("share_from")
            # SINGA's RBMHidLayer: sigmoid(v W^T + b), linear for Gaussian hidden units (rbm_conf.gaussian)
            self.add("netc.inner_product", name, srcs, loc, num_outputs=c["hdim"],
                     **({} if c.get("gaussian") else {"activation": "sigmoid"}), **({"params": params} if params else {}))
        elif t == "kGRU":
            roles = ("z_hx", "r_hx", "c_hx", "z_hh", "r_hh", "c_hh", "z_b", "r_b", "c_b")
            params = self.bind(n, None, dict(zip(roles, ps)))
            self.add("netc.gru", name, srcs, loc, dim_hidden=c["dim_hidden"],
                     **({"bias": False} if not c.get("bias", True) else {}), params=params)
        else:
            self.add("netc.opaque", name, srcs, loc, type=base)

    def slice(self, n, name, src, loc):
        c = n.conf
        ins = nhwc(self.nodes[n.srcs[0]].shape)
        attrs = {"dim": _dim(c["slice_dim"], len(ins)), "num_slices": c["num_slices"]}
        self.add("netc.slice", name, [src], loc, **dict(attrs, index=0))
        self.slices[n.name] = [name, src, loc, attrs, {}]


def _key(op):
    a = {k: v for k, v in op.attrs.items()}
    return (op.name, repr(sorted(a.items(), key=lambda kv: kv[0])))


def singa_nets(path_or_text, version=None, file=None, diag=None, **kw):
    """{phase ('train'|'test'|'val'): SingaNet} for the nets netc imports (see the docstring)."""
    job = read_job(path_or_text, version, file=file)
    built = set(job.phases)
    nets, skipped = {}, {}
    for ph, short in _PHASES:
        try:
            nets[short] = build_singa(job, ph, **kw)
        except NetcError as e:
            if ph in built:
                raise
            skipped[short] = e
    return job, nets, skipped


def import_singa(text: str, file: str = "<input>", diag: DiagnosticEngine | None = None,
                 version: str | None = None) -> Module:
    """A SINGA job file -> unresolved netc IR (one network, phases as include tags)."""
    SOURCES.add(file, text)
    own = diag is None
    diag = diag or DiagnosticEngine()
    path = file if os.path.exists(file) else None
    job, nets, skipped = singa_nets(path or text, version, file=file)
    seen = set()
    merged: list = []  # (op, phases, key)
    energy = []
    for short, net in nets.items():
        for d in net.diagnostics:
            k = (d.severity, d.message, str(d.loc))
            if k not in seen:
                seen.add(k)
                diag.extend([d])
        conv = _Net(net)
        ops = conv.build()
        for d in conv.problems:
            k = (d.severity, d.message, str(d.loc))
            if k not in seen:
                seen.add(k)
                diag.extend([d])
        energy.extend(conv.energy)
        pos = -1
        for op in ops:
            k = _key(op)
            hit = next((i for i, (o, phs, ok) in enumerate(merged) if ok == k and short not in phs), None)
            if hit is not None:
                merged[hit][1].append(short)
                pos = hit
            else:
                pos += 1
                merged.insert(pos, (op, [short], k))
    phases = list(nets)
    body = []
    for op, phs, _ in merged:
        if len(phs) != len(phases) or skipped:
            op.attrs["include"] = [p for p in ("train", "val", "test") if p in phs]
        body.append(op)
    loc = Loc(file, 1, 1)
    net = Operation("netc.network", attrs={"sym_name": network_name(file)}, regions=[Region(body)], loc=loc)
    net.attrs["title"] = f"SINGA {job.version} job ({job.reason})" if job.reason else f"SINGA {job.version} job"
    m = Module([net], loc=loc)
    m.attrs["source"] = file
    # the partition pass builds SINGA's partitioned graph by these rules: spec 6 (v0.1) or 5.5-5.8 (v0.2+)
    m.attrs["singa_graph"] = "v0.1" if job.version == "0.1" else "v0.2+"
    opt = singa_optimizer(job, diag)
    if opt is not None:
        m.attrs["optimizer"] = opt
        m.attr_locs = {"optimizer": job.job.get("updater").loc}
    if energy:
        cd_k = cd_steps(job)
        for op in body:
            if op.name == "netc.rbm_visible" and cd_k != 1:
                op.attrs["cd_k"] = cd_k
        n, hid = energy[0]
        diag.extend([Diagnostic("note", f"this is an energy model (RBM): '{nname(n.name)}' (kRBMVis) and "
                                f"'{', '.join(nname(h) for h in hid)}' (kRBMHid) form a cycle; netc shows the "
                                f"visible -> hidden direction (shapes, parameters, costs); training learns it by "
                                f"contrastive divergence (CD-{cd_k})", n.loc)])
    if own and diag.has_errors():
        raise NetcError(diag.diagnostics)
    return m


# ------------------------------------------------------------------------------------------
# A param's `init { }` (ParamGenProto) -> the netc.param's init attributes (ops/initializers.py),
# where `netc run` and training start (unless --params gives values). SINGA's generators (param.cc,
# the same in v0.1-v0.3; registered in driver.cc): kConstant value; kGaussian N(mean, std^2) *
# value; kUniform U(low, high) * value; kGaussianSqrtFanIn the Gaussian / sqrt(shape[1]);
# kUniformSqrtFanIn the uniform / sqrt(shape[1] / 3); kUniformSqrtFanInOut the uniform /
# sqrt(shape[0] + shape[1]), shape SINGA's blob shape (its CHECK_EQ(shape.size(), 2): a located
# error here), recorded as fan_in = shape[1], fan_out = shape[0]. A param without `init` (SINGA's
# default type is kUserInit, which needs a user generator) and a user generator (user_type) keep
# netc's own draw, the latter with a warning.

def singa_init(p, problems: list) -> dict:
    """The init attributes of SingaParam `p` (see above); problems appended as Diagnostics."""
    c = p.conf.get("init") or {}
    if c.get("user_type"):
        problems.append(Diagnostic("warning", f"param '{nname(p.name)}': user init generator '{c['user_type']}' is not "
                                   f"SINGA's; netc draws its own initial values", p.loc))
        return {}
    kind = SINGA_INITS.get(c.get("type"))
    if kind is None:
        return {}
    out = {"init": kind}
    keys = ("value",) if kind == "constant" else \
        ("mean", "std", "value") if "gaussian" in kind else ("low", "high", "value")
    for k in keys:
        if c.get(k) is not None:
            out[k] = float(c[k])
    if kind in FAN_INITS:
        if len(p.shape) != 2:
            problems.append(Diagnostic("error", f"param '{nname(p.name)}' has shape {list(p.shape)}, but SINGA's "
                                       f"{c['type']} fills 2-D params only (param.cc: CHECK_EQ(shape.size(), 2); "
                                       f"fan in is shape[1])", p.loc))
            return {}
        out["fan_in"], out["fan_out"] = int(p.shape[1]), int(p.shape[0])
    return out


# ------------------------------------------------------------------------------------------
# The updater: the job's `updater { ... }` -> the module's optimizer (module.attrs["optimizer"],
# which the `optimizer` pass reads). SINGA's formulas (src/utils/updater.cc of v0.1-v0.3) are the
# update ops' "singa" convention (ops/optim.py): the learning rate inside the momentum history,
# eps (SINGA's `delta`) inside the square root, Adam without bias correction.
#   kSGD       sgd, or momentum when momentum > 0 (SINGA's `if (momentum_ > 0)`)
#   kNesterov  nesterov {momentum}
#   kAdaGrad   adagrad {eps: delta}            (momentum unused, as in SINGA: a warning if set)
#   kRMSProp   rmsprop {alpha: rmsprop_conf.rho, eps: delta}
#   kAdam      adam {beta1, beta2: adam_conf, eps: delta}   (v0.3; SINGA's Adam does not clip)
#   kAdaDelta  adadelta {rho: adadelta_conf.rho, eps: delta}  (v0.3; does not clip)
#   kAdamMax   adamax {beta1, beta2: adammax_conf, eps: delta} (v0.3; does not clip)
#   weight_decay (applied when > 0), clip_low / clip_high (v0.2+: value clipping when high > low)
#   learning_rate: kFixed, kStep, kLinear, kExponential, kInverse, kInverseT, kFixedStep -> the
#   schedules of ops/optim.py (fixed, step, linear, exponential, inverse, inverse_t, fixed_step)
# (docs/training.md "SINGA's updaters" has every formula with its line in updater.cc.) User
# updaters (user_type, or no type: SINGA's default kUserUpdater) and
# user learning-rate generators are errors, located at the value. Two placeholders are not: an
# empty `updater { }` (v0.1 requires the field) records no optimizer, and an updater without a
# learning_rate records none of its own (the optimizer pass then trains at a fixed 0.01), where
# SINGA itself would need one to run.

_UPDATERS = {"kSGD": "sgd", "kNesterov": "nesterov", "kAdaGrad": "adagrad", "kRMSProp": "rmsprop", "kAdam": "adam",
             "kAdaDelta": "adadelta", "kAdamMax": "adamax"}
_NO_CLIP = ("kAdam", "kAdaDelta", "kAdamMax")     # their Update() never calls Clip (updater.cc v0.3)
_SCHEDULES = {"kFixed": ("fixed", None, {}),
              "kStep": ("step", "step_conf", {"gamma": "gamma", "change_freq": "change_freq"}),
              "kLinear": ("linear", "linear_conf", {"final_lr": "final_lr", "change_freq": "change_freq"}),
              "kExponential": ("exponential", "exponential_conf", {"change_freq": "change_freq"}),
              "kInverse": ("inverse", "inverse_conf", {"gamma": "gamma", "pow": "pow"}),
              "kInverseT": ("inverse_t", "inverset_conf", {"final_lr": "final_lr"}),
              "kFixedStep": ("fixed_step", "fixedstep_conf", {"steps": "step", "lrs": "step_lr"})}


def cd_steps(job) -> int:
    """The Gibbs steps of a kCD job: train_one_batch.cd_conf.cd_k (SINGA's default 1)."""
    tob = job.job.get("train_one_batch") if job.job.has("train_one_batch") else None
    cd = tob.get("cd_conf") if tob is not None and tob.has("cd_conf") else None
    return int(cd.get("cd_k")) if cd is not None and cd.has("cd_k") else 1


def singa_optimizer(job, diag: DiagnosticEngine) -> dict | None:
    """The optimizer of a SINGA job (see above), or None when it has no updater; problems are
    reported into `diag` (and None returned)."""
    if not job.job.has("updater"):
        return None
    u = job.job.get("updater")
    if not u.vals:
        return None
    t = u.get("type")
    known = ", ".join(_UPDATERS)
    if u.has("user_type") and u.get("user_type"):
        ut = u.get("user_type")
        diag.error(f"user updater '{ut}': netc trains with SINGA's built-in updaters only ({known})",
                   u.vat("user_type"), width=len(ut) + 2)
        return None
    if not u.has("type"):
        diag.error(f"the updater has no type (SINGA's default, kUserUpdater, is a user updater); give one of "
                   f"{known}", u.loc, width=len("updater"))
        return None
    if t not in _UPDATERS:
        diag.error(f"updater type {t} is not supported: netc's optimizers cover {known}", u.vat("type"),
                   width=len(t))
        return None
    if t == "kRMSProp" and job.version == "0.1":
        diag.warning("SINGA v0.1.0 registers no kRMSProp updater (driver.cc:88 is a TODO; v0.2 has it): SINGA v0.1 "
                     "cannot run this job, netc trains it with v0.2's kRMSProp", u.vat("type"), width=len(t))
    name = _UPDATERS[t]
    spec = {"name": name}
    mom = u.get("momentum") or 0.0
    if t == "kSGD":
        if mom > 0:
            spec = {"name": "momentum", "momentum": mom}
    elif t == "kNesterov":
        spec["momentum"] = mom
    elif mom:
        diag.warning(f"{t} does not use momentum (SINGA ignores it, and so does netc)", u.vat("momentum"),
                     width=len("momentum"))
    if t in ("kAdaGrad", "kRMSProp", "kAdam", "kAdaDelta", "kAdamMax"):
        spec["eps"] = u.get("delta")
    if t == "kRMSProp":
        if not u.get("rmsprop_conf").has("rho"):
            diag.error("kRMSProp needs rmsprop_conf { rho: ... } (SINGA's RMSPropProto.rho is required)",
                       u.vat("type"), width=len(t))
            return None
        spec["alpha"] = u.get("rmsprop_conf").get("rho")
    if t == "kAdaDelta":
        spec["rho"] = u.get("adadelta_conf").get("rho")
    if t in ("kAdam", "kAdamMax"):
        c = u.get("adam_conf" if t == "kAdam" else "adammax_conf")
        spec["beta1"], spec["beta2"] = c.get("beta1"), c.get("beta2")
    wd = u.get("weight_decay") or 0.0
    if wd > 0:
        spec["weight_decay"] = wd
    lo, hi = u.get("clip_low") or 0.0, u.get("clip_high") or 0.0
    if hi > lo:
        if t in _NO_CLIP:
            diag.warning(f"SINGA's {t} does not clip gradients: clip_low / clip_high are ignored",
                         u.at("clip_low") if u.has("clip_low") else u.at("clip_high"), width=len("clip_low"))
        else:
            spec["clip_low"], spec["clip_high"] = lo, hi
    spec["convention"] = "singa"
    if _bad_option(u, t, spec, diag):
        return None
    if not u.has("learning_rate"):
        return spec
    schedule = _singa_schedule(u, diag)
    if schedule is None:
        return None
    spec["schedule"] = schedule
    return spec


_CONF_OF = {"kRMSProp": "rmsprop_conf", "kAdaDelta": "adadelta_conf", "kAdam": "adam_conf", "kAdamMax": "adammax_conf"}


def _bad_option(u, t, spec, diag) -> bool:
    """Report an option value the optimizer refuses (ops/optim.py resolve_optimizer) at its field."""
    try:
        resolve_optimizer(None, spec)
    except OptimizerError as e:
        field = {"eps": "delta", "alpha": "rho"}.get(e.key, e.key)
        conf = u.get(_CONF_OF[t]) if t in _CONF_OF and u.has(_CONF_OF[t]) else None
        if field and conf is not None and conf.has(field):
            loc = conf.at(field)
        elif field and u.has(field):
            loc = u.at(field)
        else:
            loc, field = u.vat("type"), t
        diag.error(f"{t}: {e.diagnostics[0].message}", loc, width=len(field))
        return True
    return False


def _singa_schedule(u, diag) -> dict | None:
    lr = u.get("learning_rate")
    known = ", ".join(_SCHEDULES)
    if lr.has("user_type") and lr.get("user_type"):
        ut = lr.get("user_type")
        diag.error(f"user learning-rate generator '{ut}': netc knows SINGA's built-in ones ({known})",
                   lr.vat("user_type"), width=len(ut) + 2)
        return None
    t = lr.get("type")
    if not lr.has("type") or t not in _SCHEDULES:
        where = lr.vat("type") if lr.has("type") else u.at("learning_rate")
        what = f"learning-rate change method {t} is not supported" if lr.has("type") else \
            "learning_rate has no type (SINGA's default, kUserChange, is a user generator)"
        diag.error(f"{what}: netc knows {known}", where, width=len(t) if lr.has("type") else len("learning_rate"))
        return None
    kind, conf_name, fields = _SCHEDULES[t]
    schedule = {"type": kind}
    if kind != "fixed_step":
        schedule["base_lr"] = lr.get("base_lr")
    conf = lr.get(conf_name) if conf_name else None
    for key, field in fields.items():
        v = conf.get(field)
        schedule[key] = list(v) if isinstance(v, list) else v
    problem = schedule_problem(schedule)
    if problem:
        loc, width = lr.vat("type"), len(t)
        if conf is not None:
            bad = next((f for k, f in fields.items() if k in problem or f in problem), None)
            if bad is not None and conf.has(bad):
                loc, width = conf.at(bad), len(bad)
            elif lr.has(conf_name):
                loc, width = lr.at(conf_name), len(conf_name)
        diag.error(f"{t}: {problem}", loc, width=width)
        return None
    return schedule
