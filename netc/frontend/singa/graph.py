"""SINGA's graph construction, per phase (spec sections 4-6): the output data (SingaNet, SingaNode,
SingaParam), user layer rules (the RNNLM example's plugin), layer classes, phase filtering, the
v0.2+ and v0.1 graph builders (unrolling, sharing, model splits) and Graph::Sort. The graph is the
logical net's, one partition: SINGA's partitioning (connection layers, K nodes per layer, bridges,
spec 5.6-5.8) is the `partition` pass's (netc/passes/partition/singa.py), which reads the partition_dim
and K the IR records; here only v0.1's inability to bridge (B3) is diagnosed, from the config."""
from __future__ import annotations

from dataclasses import dataclass, field

from ...diagnostics import Diagnostic, Loc, NetcError, did_you_mean
from ...ir.query import singa_sort

from .schema import V_LABEL, Msg

# ------------------------------------------------------------------------------------------
# Output data

@dataclass
class SingaParam:
    """A parameter of a node (the logical net's; the partition pass makes partition_dim 1 layers'
    slices '<name>:<i>' and lets partition_dim 0 replicas share the name, spec 5.9)."""
    name: str                    # SINGA's param name ('0#w1', 'w1', 'conv1@00$' for unnamed v0.1 params)
    shape: list[int]
    share_from: str | None = None  # owner's name (unrolled copies: '0#<name>')
    loc: Loc | None = None
    conf: dict = field(default_factory=dict)  # init / lr_scale / wd_scale (the owner's, when shared)


@dataclass
class SingaNode:
    name: str                 # node name as SINGA builds it: '0#conv1@0', 'conv1@00', 'split(0#relu2)@0', ...
    layer: str                # its layer in the built net: '0#conv1', 'split(0#relu2)', 'conv1'
    origin: str               # the config layer it comes from ('conv1'); connection layers: the layer they serve
    type: str                 # LayerType identifier, or 'user:<user_type>'
    srcs: list[str]           # source node names, in SINGA's edge order (the order Setup sees them)
    dsts: list[str]
    pid: int                  # partition id = worker
    partition_dim: int
    num_partitions: int
    shape: list[int]          # main data blob; [] when the layer has none
    params: list[SingaParam]
    conf: dict                # the configuration values Setup used (kernel, stride, num_output, ...)
    layer_conf: dict          # the layer's *_conf messages as plain dicts (defaults filled), extensions as '[name]'
    loc: Loc | None
    unroll_index: int = 0
    generated: bool = False   # split/slice/concate/bridge layers SINGA adds
    batchsize: int | None = None       # kShardData / kLMDBData: per-partition batch
    record_shape: list[int] | None = None  # kShardData / kLMDBData: shape of one record
    batch_loc: Loc | None = None       # data layers: where batchsize is written (partitioning warns there)

    def to_reference(self) -> dict:
        """This node in the format of /work/shared/reference/singa/*.jsonl."""
        d = {"node": self.name, "type": self.type, "src": list(self.srcs), "pid": self.pid}
        if self.type in ("kShardData", "kLMDBData"):
            d["batchsize"] = self.batchsize
            d["record_shape"] = self.record_shape
        d["shape"] = list(self.shape)
        if self.params:
            d["params"] = [list(p.shape) for p in self.params]
        return d


@dataclass
class SingaNet:
    file: str
    version: str              # '0.1' | '0.2' | '0.3' | 'dev'
    phase: str                # 'kTrain' | 'kTest' | 'kVal'
    K: int                    # partitions of the built graph: always 1, the logical net (spec 5.6-5.8 are
                              # the partition pass's)
    nodes: list[SingaNode]    # SINGA's topological (Setup/execution) order
    diagnostics: list[Diagnostic] = field(default_factory=list)  # warnings
    non_singa: list[str] = field(default_factory=list)  # where netc deliberately differs (opt-in fix-ups)
    job: object = None        # the typed JobProto (Msg)
    version_reason: str = ""
    workers: int = 1          # the partition count the job asks for (cluster.nworkers_per_group for kTrain, or
                              # build_singa's K): the IR records it as num_partitions, the partition pass uses it

    def node(self, name: str) -> SingaNode:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def to_reference(self) -> list[dict]:
        return [n.to_reference() for n in self.nodes]


@dataclass
class UserLayerRule:
    """Shape rule for a `user_type` layer (spec 3.3): setup(conf, src_shapes, K) returns
    (shape, [param shapes]); conf is the layer's LayerProto (Msg; extensions via
    conf.extensions()). src_conn / dst_conn as in spec 3.2."""
    setup: object
    src_conn: str = "kOneToOne"
    dst_conn: str = "kOneToOne"
    min_params: int = 0


def _ext(conf, short):
    for k, v in conf.extensions().items():
        if k.rsplit(".", 1)[-1] == short:
            return v
    return None


def _rnnlm_data(conf, srcs, K):
    dc = _ext(conf, "data_conf")
    w = dc.get("max_window") if dc is not None else 0
    return [w + 1, 4], []


def _rnnlm_embedding(conf, srcs, K):
    ec = _ext(conf, "embedding_conf")
    wd, vs = (ec.get("word_dim"), ec.get("vocab_size")) if ec is not None else (0, 0)
    return [srcs[0][0], wd], [[vs, wd]]


def _rnnlm_hidden(conf, srcs, K):
    return list(srcs[0]), [[srcs[0][1], srcs[0][1]]]


def _rnnlm_loss(conf, srcs, K):
    lc = _ext(conf, "loss_conf")
    vs, nc = (lc.get("vocab_size"), lc.get("nclass")) if lc is not None else (0, 0)
    vdim = srcs[0][1]
    return [], [[vs, vdim], [nc, vdim]]


def _rnnlm_label(conf, srcs, K):
    return list(srcs[0]), []


# The rnnlm example's user layers (spec appendix B). Assumptions beyond the appendix: the data
# layer fans out without a split (it derives from SINGA's input layer class, kOneToMany), the
# v0.1 "kLabel" user layer keeps its source's shape, and the loss layer has no data blob.
RNNLM_PLUGIN = {
    "kData": UserLayerRule(_rnnlm_data, dst_conn="kOneToMany"),
    "kLabel": UserLayerRule(_rnnlm_label),
    "kEmbedding": UserLayerRule(_rnnlm_embedding, min_params=1),
    "kHidden": UserLayerRule(_rnnlm_hidden, min_params=1),
    "kLoss": UserLayerRule(_rnnlm_loss, min_params=2),
}


# ------------------------------------------------------------------------------------------
# Layer classes (spec 3.2, 3.3)

_INPUTS_V1 = {"kShardData", "kLMDBData", "kMnist", "kRGBImage", "kLabel"}
_INPUTS_V2 = _INPUTS_V1 | {"kRecordInput", "kCSVInput", "kImagePreprocess", "kCharRNN", "kRNNLabel", "kOneHot"}
_REGISTERED_V1 = {"kBridgeDst", "kBridgeSrc", "kConvolution", "kCConvolution", "kCPooling", "kConcate",
                  "kDropout", "kEuclideanLoss", "kInnerProduct", "kLabel", "kLRN", "kMnist", "kPrefetch",
                  "kPooling", "kRBMHid", "kRBMVis", "kRGBImage", "kReLU", "kShardData", "kSigmoid", "kSlice",
                  "kSoftmaxLoss", "kSplit", "kSTanh", "kLMDBData"}
_REGISTERED_V2 = {"kRecordInput", "kCSVInput", "kImagePreprocess", "kRecordOutput", "kCSVOutput", "kCharRNN",
                  "kRNNLabel", "kOneHot", "kCharRNNOutput", "kBridgeDst", "kBridgeSrc", "kConcate", "kSlice",
                  "kSplit", "kRNNDummy", "kAccuracy", "kArgSort", "kConvolution", "kCConvolution", "kCPooling",
                  "kEmbedding", "kDropout", "kDummy", "kEuclideanLoss", "kInnerProduct", "kLabel", "kLRN",
                  "kMnist", "kPooling", "kRBMHid", "kRBMVis", "kRGBImage", "kReLU", "kShardData", "kSigmoid",
                  "kSoftmaxLoss", "kSTanh", "kSoftmax", "kGRU", "kLMDBData", "kCudnnConv", "kCudnnPool",
                  "kCudnnLRN", "kCudnnSoftmax", "kCudnnActivation", "kCudnnSoftmaxLoss",
                  "kActivation", "kBM", "kCudnnBM"}  # the last three: v0.3 only (not in v0.2's enum)
# netc builds SINGA's graph explicitly: K nodes per partitioned layer (and up to K x K connections
# between two of them), one copy per step of an unrolled layer. Past these sizes the graph and its
# memory plan take minutes and gigabytes (K = 64 on the CIFAR-10 hybrid job: ~2 minutes; 1,000 steps
# of char-rnn: ~1 minute), so they are the user's error, at the value that asks for them.
MAX_PARTITIONS = 32     # cluster.nworkers_per_group (SINGA's examples use 1 to 4)
MAX_UNROLL = 512        # unroll_len (char-rnn unrolls 50 steps)
MAX_LAYER_COPIES = 16384  # unrolled layers x partitions

TERMINAL_TYPES = {"kSoftmaxLoss", "kEuclideanLoss", "kCudnnSoftmaxLoss", "kAccuracy", "kArgSort", "kCSVOutput",
             "kRecordOutput", "kCharRNNOutput", "kSoftmax", "kCudnnSoftmax"}
BASE_TYPES = {"kCConvolution": "kConvolution", "kCudnnConv": "kConvolution", "kCPooling": "kPooling",
         "kCudnnPool": "kPooling", "kCudnnLRN": "kLRN", "kCudnnActivation": "kActivation",
         "kCudnnSoftmax": "kSoftmax", "kCudnnBM": "kBM", "kCSVInput": "kRecordInput",
         "kLMDBData": "kShardData", "kSigmoid": "kActivation", "kSTanh": "kActivation", "kReLU": "kActivation",
         "kDropout": "kActivation", "kRecordOutput": "kCSVOutput", "kCharRNNOutput": "kCSVOutput"}


class ParamSlot:
    __slots__ = ("name", "orig", "share_from", "user_share", "msg", "loc", "owner")

    def __init__(self, name, orig, share_from, user_share, msg, loc):
        self.name, self.orig, self.share_from, self.user_share = name, orig, share_from, user_share
        self.msg, self.loc, self.owner = msg, loc, None


class _Lay:
    __slots__ = ("name", "type", "proto", "srcs", "pdim", "params", "unroll_index", "loc", "origin",
                 "gen", "pid", "made_for")

    def __init__(self, name, type, proto, pdim, loc, origin, unroll_index=0, gen=None):
        self.name, self.type, self.proto, self.pdim, self.loc = name, type, proto, pdim, loc
        self.origin, self.unroll_index, self.gen = origin, unroll_index, gen
        self.srcs: list[str] = []
        self.params: list[ParamSlot] = []
        self.pid = 0
        self.made_for = None


class GraphNode:
    __slots__ = ("name", "lay", "pid", "K", "srcs", "dsts", "shape", "params", "conf", "blobs",
                 "batchsize", "record_shape", "failed")

    def __init__(self, name, lay, pid, K):
        self.name, self.lay, self.pid, self.K = name, lay, pid, K
        self.srcs: list[GraphNode] = []
        self.dsts: list[GraphNode] = []
        self.shape = None
        self.params = []
        self.conf = {}
        self.blobs = None
        self.batchsize = self.record_shape = None
        self.failed = False


def _edge(a: GraphNode, b: GraphNode):
    a.dsts.append(b)
    b.srcs.append(a)


class SetupError(Exception):
    """A layer's setup failed; `loc`: where the offending value is written (default: the layer)."""

    def __init__(self, msg, loc=None):
        super().__init__(msg)
        self.loc = loc


class BuildContext:
    def __init__(self, version, file, phase, K, plugins, record_shapes, fix_share_from, workers=1):
        self.version, self.file, self.phase, self.K = version, file, phase, K
        self.workers = workers
        self.v1 = version == "0.1"
        self.plugins = plugins or {}
        self.record_shapes = record_shapes or {}
        self.fix_share_from = fix_share_from
        self.errors: list[Diagnostic] = []
        self.warnings: list[Diagnostic] = []
        self.non_singa: list[str] = []
        self._warned = set()

    @property
    def label(self):
        return V_LABEL[self.version]

    def error(self, msg, loc, note=None, width=1):
        d = Diagnostic("error", msg, loc, width=width)
        if note:
            for n in (note if isinstance(note, list) else [note]):
                d.note(*n) if isinstance(n, tuple) else d.note(n)
        self.errors.append(d)
        return d

    def warn(self, msg, loc, key=None):
        if key is not None:
            if key in self._warned:
                return None
            self._warned.add(key)
        d = Diagnostic("warning", msg, loc)
        self.warnings.append(d)
        return d

    def check(self):
        if self.errors:
            errs, self.errors = self.errors, []
            raise NetcError(errs)

    def src_conn(self, t):
        if t.startswith("user:"):
            r = self.plugins.get(t[5:])
            return r.src_conn if r else "kOneToOne"
        if t in ("kConvolution", "kCConvolution", "kCudnnConv", "kSoftmax", "kCudnnSoftmax"):
            return "kOneToAll"
        if t == "kInnerProduct":
            return "kOneToOne" if self.v1 else "kOneToAll"
        if t == "kSoftmaxLoss":
            return "kOneToAll" if self.v1 else "kOneToOne"
        return "kOneToOne"

    def dst_conn(self, t):
        if t.startswith("user:"):
            r = self.plugins.get(t[5:])
            return r.dst_conn if r else "kOneToOne"
        if t in (_INPUTS_V1 if self.v1 else _INPUTS_V2) or (not self.v1 and t == "kGRU"):
            return "kOneToMany"
        if t == "kSlice":
            # SliceLayer hands reader k its blob k itself (Layer2Index, SINGA's DataSliceTest /
            # ModelSliceTest), but does not override dst_layer_connection, so SINGA's NeuralNet puts
            # a model split after a user kSlice read by several layers and all of them get blob 0.
            # netc follows SliceLayer and says so (_slice_split_warning)
            return "kOneToMany"
        return "kOneToOne"


def _slice_split_warning(ctx: BuildContext, name: str, loc, readers: list):
    ctx.warn(f"kSlice '{name}' is read by {len(readers)} layers ({', '.join(readers)}): netc gives reader k slice k, "
             f"as SINGA's SliceLayer hands out its blobs; SINGA's NeuralNet would put a model split after it "
             f"(kSlice keeps the default kOneToOne dst connection) and give every reader slice 0", loc,
             key=("slice-split", name))


def _ltype(L: Msg) -> str:
    return "user:" + L.get("user_type") if L.has("user_type") else L.get("type")


def _phase_filter(ctx: BuildContext, net: Msg):
    """Spec 5.2 / 6 (v0.1 has exclude only). Returns the kept LayerProtos and, for B7's notes,
    every layer name with the phases it is excluded from."""
    layers = net.get("layer")
    inc = [L for L in layers if L.has("include")]
    exc = [L for L in layers if L.has("exclude")]
    if inc and exc:  # B12: SINGA's check depends on layer order; netc rejects any mixing
        ctx.error("this net uses both 'include' and 'exclude' (SINGA: \"Don't use include and exclude "
                  "together\"; its check depends on the order of the layers)", exc[0].at("exclude"),
                  note=[("'include' is used here", inc[0].at("include"))])
        ctx.check()
    kept = []
    for L in layers:
        keep = True
        if L.has("exclude") and ctx.phase in L.get("exclude"):
            keep = False
        if L.has("include"):
            keep = ctx.phase in L.get("include")  # equality per value: include: kPositive never matches
        if keep:
            kept.append(L)
    if not layers:
        ctx.error("the net has no layers", net.loc)
    elif not kept:
        ctx.error(f"no layer of the net is kept in phase {ctx.phase}", net.loc)
    seen = {}
    for L in kept:
        name = L.get("name")
        if name in seen:
            ctx.error(f"layer name '{name}' is used twice in phase {ctx.phase} (names must be unique after "
                      f"phase filtering)", L.at("name"), note=[("first defined here", seen[name].at("name"))])
            continue
        seen[name] = L
        bad = [c for c in "@#+" if c in name]
        if not name:
            ctx.error("empty layer name", L.at("name"))
        elif bad:
            ctx.error(f"layer name '{name}' contains '{bad[0]}'; SINGA reserves '@', '#' and '+' for the names it "
                      f"generates, so such names are ambiguous", L.at("name"))
    ctx.check()
    return kept, {L.get("name") for L in layers}


def _check_types(ctx: BuildContext, kept):
    reg = _REGISTERED_V1 if ctx.v1 else _REGISTERED_V2
    for L in kept:
        t = _ltype(L)
        if t.startswith("user:"):
            if t[5:] not in ctx.plugins:
                d = ctx.error(f"layer '{L.get('name')}' is a user layer (user_type \"{t[5:]}\") of type kUserLayer, "
                              f"and netc has no shape rule for it", L.at("user_type"))
                known = ", ".join(sorted(RNNLM_PLUGIN))
                d.note(f"pass plugins={{'{t[5:]}': UserLayerRule(...)}}; netc.frontend.singa.RNNLM_PLUGIN has the "
                       f"rules of SINGA's rnnlm example ({known})")
        elif t == "kUserLayer":
            ctx.error(f"layer '{L.get('name')}' has no type: kUserLayer (the default) needs a 'user_type'",
                      L.at("type") if L.has("type") else L.at("name"))
        elif t == "kPrefetch":
            # SINGA's own PrefetchLayer::ComputeFeature is LOG(FATAL) << "Not implemented" (v0.1.0
            # src/neuralnet/input_layer.cc:369-371, v0.2.0 src/neuralnet/input_layer/prefetch.cc:33-35)
            ctx.error(f"layer '{L.get('name')}' is a kPrefetch layer, which {ctx.label} "
                      f"registers but never implemented (PrefetchLayer::ComputeFeature aborts with \"Not implemented\"); "
                      f"write its sublayers as layers of the net", L.at("type"))
        elif t not in reg:
            ctx.error(f"layer type {t} has no layer class in {ctx.label} (SINGA's factory aborts)", L.at("type"))
        elif t in ("kActivation", "kBM", "kCudnnBM") and ctx.version == "0.2":
            ctx.error(f"layer type {t} needs SINGA v0.3", L.at("type"))
    ctx.check()


def _unknown_src(ctx, L, S, loc, kept_names, all_names):
    name = L.get("name")
    d = ctx.error(f"unknown source layer '{S}' of layer '{name}' (in phase {ctx.phase})", loc, width=len(S) + 2)
    if S in all_names:
        d.note(f"layer '{S}' exists in the file but is not part of phase {ctx.phase}")
    else:
        cand = did_you_mean(S, kept_names)
        if cand:
            d.note(f"did you mean '{cand}'?")
    if ctx.v1:
        d.note("SINGA v0.1 aborts here (uncaught std::out_of_range)")
    else:
        d.note("SINGA v0.2/v0.3 silently connects an unknown source to the first layer of the net")


# ------------------------------------------------------------------------------------------
# v0.2 / v0.3 construction (spec 5)

def build_v2(ctx: BuildContext, job: Msg) -> list[GraphNode]:
    net = job.get("neuralnet")
    kept, all_names = _phase_filter(ctx, net)
    _check_types(ctx, kept)
    kept_names = [L.get("name") for L in kept]
    # 5.1 / 5.3 unrolling
    copies: dict[str, list[_Lay]] = {}
    lays: list[_Lay] = []
    bad_unroll: set = set()
    for L in kept:
        name = L.get("name")
        n = L.get("unroll_len") if L.has("unroll_len") else net.get("unroll_len")
        if n < 1 or n > MAX_UNROLL:
            where = L.at("unroll_len") if L.has("unroll_len") else net.at("unroll_len")
            if where not in bad_unroll:  # the net's own unroll_len: once, not once per layer inheriting it
                bad_unroll.add(where)
                ctx.error(f"unroll_len of layer '{name}' is {n}; it must be at least 1" if n < 1 else
                          f"unroll_len of layer '{name}' is {n}; netc unrolls a layer into one copy per step and "
                          f"allows at most {MAX_UNROLL}", where)
            n = 1
        pd = L.get("partition_dim") if L.has("partition_dim") else net.get("partition_dim")
        cl = []
        for i in range(n):
            lay = _Lay(f"{i}#{name}", _ltype(L), L, pd, L.at("name"), name, i)
            for p in L.get("param"):
                pn = p.get("name")
                user = p.get("share_from") if (i == 0 and p.has("share_from")) else None
                share = user if i == 0 else f"0#{pn}"
                lay.params.append(ParamSlot(f"{i}#{pn}", pn, share, user is not None, p, p.loc))
            cl.append(lay)
            lays.append(lay)
        copies[name] = cl
    K = ctx.workers   # the partitions the partition pass will make of every layer
    if len(lays) * K > MAX_LAYER_COPIES:
        ctx.error(f"this net unrolls into {len(lays)} layers, {len(lays) * K} nodes with its {K} partitions; "
                  f"netc builds at most {MAX_LAYER_COPIES} (fewer steps in unroll_len, or fewer partitions)",
                  net.at("unroll_len") or job.at("neuralnet"))
    ctx.check()
    for L in kept:
        name = L.get("name")
        cts, shs = L.get("unroll_conn_type"), L.get("shift")
        for k, (S, sloc) in enumerate(zip(L.get("srclayers"), L.vlocs_of("srclayers"))):
            if S not in copies:
                _unknown_src(ctx, L, S, sloc, kept_names, all_names)
                continue
            ct = cts[k] if k < len(cts) else "kUnrollOneToOne"
            sh = shs[k] if k < len(shs) else 0
            sc = copies[S]
            for j, lay in enumerate(copies[name]):
                if ct == "kUnrollOneToAll":
                    lay.srcs.extend(c.name for c in sc)
                elif ct == "kUnrollOneToOne":
                    if j >= sh:
                        if j - sh >= len(sc):  # B5
                            ctx.error(f"copy {j} of layer '{name}' reads copy {j - sh} of source '{S}', which has only "
                                      f"{len(sc)} cop{'y' if len(sc) == 1 else 'ies'} (SINGA reads out of range)", sloc,
                                      note=["unrolled layers that read a shorter source need "
                                            "`unroll_conn_type: kUnrollOneToAll` (as char-rnn does) or a matching "
                                            "unroll_len"])
                            break
                        lay.srcs.append(sc[j - sh].name)
                elif ct == "kUnrollFirstToLast":
                    if j == 0:
                        lay.srcs.append(sc[-1].name)
                else:
                    ctx.error(f"unroll_conn_type {ct} is not implemented by SINGA", L.vlocs_of("unroll_conn_type")[k])
                    break
        if _ltype(L) == "kGRU":
            cl = copies[name]
            for j in range(1, len(cl)):
                cl[j].srcs.append(cl[j - 1].name)  # the recurrent edge
    ctx.check()
    # 5.4 share_from
    pmap: dict[str, ParamSlot] = {}
    for lay in lays:
        for p in lay.params:
            if p.name in pmap:
                other = pmap[p.name]
                if p.orig == "":  # B11
                    ctx.error(f"layer '{lay.origin}' has an unnamed param and so does layer "
                              f"'{_owner_layer(lays, other)}': SINGA names every unnamed param '{p.name}' and aborts "
                              f"(\"Repeated param\")", p.loc,
                              note=[("the other unnamed param", other.loc), "give every param a unique name"])
                else:
                    ctx.error(f"param name '{p.orig}' is used twice (SINGA: \"Repeated param = {p.name}\")", p.loc,
                              note=[("first used here", other.loc)])
            else:
                pmap[p.name] = p
    for lay in lays:
        for p in lay.params:
            if not p.share_from:
                continue
            sf = p.share_from
            floc = p.msg.vat("share_from") if p.user_share else p.loc
            if sf in pmap:
                p.owner = pmap[sf]
            elif p.user_share and ("0#" + sf) in pmap:  # B1
                if ctx.fix_share_from:
                    p.share_from = "0#" + sf
                    p.owner = pmap[p.share_from]
                    ctx.non_singa.append(f"share_from \"{sf}\" of param '{p.orig}' (layer '{lay.origin}') resolved "
                                         f"to '0#{sf}' ({ctx.label} aborts instead)")
                else:
                    ctx.error(f"share_from \"{sf}\" of param '{p.orig}' in layer '{lay.origin}' names no param: "
                              f"{ctx.label}'s unrolling renames every param to '<i>#<name>', so the owner is now "
                              f"'0#{sf}' and SINGA aborts (\"can't find share_from = {sf}\")", floc,
                              note=["pass fix_share_from=True to resolve it to '0#" + sf + "' (netc's fix-up, "
                                    "not SINGA behaviour)"])
            else:
                cand = did_you_mean(sf, [q.orig for q in pmap.values()])
                ctx.error(f"share_from \"{sf}\" of param '{p.orig}' in layer '{lay.origin}' names no param in phase "
                          f"{ctx.phase}" + (f"; did you mean '{cand}'?" if cand else ""), floc)
    ctx.check()
    # 5.5 split insertion
    dst_count: dict[str, int] = {}
    for lay in lays:
        for s in lay.srcs:
            dst_count[s] = dst_count.get(s, 0) + 1
    splits = []
    for lay in lays:
        c = dst_count.get(lay.name, 0)
        if c > 1 and lay.type == "kSlice":
            _slice_split_warning(ctx, lay.origin, lay.loc, [d.origin for d in lays if lay.name in d.srcs])
        if c > 1 and ctx.dst_conn(lay.type) == "kOneToOne":
            sp = _Lay(f"split({lay.name})", "kSplit", None, lay.pdim, lay.loc, lay.origin, gen={"num_splits": c})
            sp.srcs = [lay.name]
            splits.append((lay.name, sp))
    for x, sp in splits:
        for lay in lays:
            lay.srcs = [sp.name if s == x else s for s in lay.srcs]
    lays += [sp for _, sp in splits]
    # 5.6 (partition connection layers), 5.7 (K nodes per layer, bridges) and the sort of a
    # partitioned graph are the `partition` pass's (netc/passes/partition/singa.py): the frontend builds the
    # logical net, one node '<layer>@0' per layer, and records K for the pass
    nodes: list[GraphNode] = []
    by_node: dict[str, GraphNode] = {}
    lay_nodes: dict[str, GraphNode] = {}
    for lay in lays:
        name = f"{lay.name}@0"
        if name in by_node:
            ctx.error(f"node '{name}' is created twice (SINGA: \"node {name} already exists\")", lay.loc)
            ctx.check()
        n = GraphNode(name, lay, 0, 1)
        nodes.append(n)
        by_node[name] = n
        lay_nodes[lay.name] = n
    for D in lays:
        for sname in D.srcs:
            _edge(lay_nodes[sname], lay_nodes[D.name])
    return nodes


def _owner_layer(lays, p):
    for lay in lays:
        if p in lay.params:
            return lay.origin
    return "?"


# ------------------------------------------------------------------------------------------
# v0.1 construction (spec 6)

def build_v1(ctx: BuildContext, job: Msg) -> list[GraphNode]:
    net = job.get("neuralnet")
    K = 1   # the logical net (its K = 1 graph, whose connection nodes v0.1 builds even then)
    kept, all_names = _phase_filter(ctx, net)
    _check_types(ctx, kept)
    kept_names = [L.get("name") for L in kept]
    protos = {L.get("name"): L for L in kept}
    lays: dict[str, _Lay] = {}
    pmap: dict[str, ParamSlot] = {}
    for L in kept:
        name = L.get("name")
        pd = L.get("partition_dim") if L.has("partition_dim") else net.get("partition_dim")
        lay = _Lay(name, _ltype(L), L, pd, L.at("name"), name)
        lay.pid = L.get("partition_id")
        for p in L.get("param"):
            pn = p.get("name")
            q = ParamSlot(pn, pn, p.get("share_from") if p.has("share_from") else None, True, p, p.loc)
            lay.params.append(q)
            if pn:
                if pn in pmap:
                    ctx.error(f"param name '{pn}' is used twice (SINGA v0.1 requires unique param names)", p.loc,
                              note=[("first used here", pmap[pn].loc)])
                else:
                    pmap[pn] = q
        lays[name] = lay
        if pd not in (-1, 0, 1):
            ctx.error(f"partition_dim {pd} of layer '{name}' is invalid (SINGA v0.1: -1, 0 or 1)",
                      L.at("partition_dim") if L.has("partition_dim") else net.at("partition_dim"))
    for lay in lays.values():
        for p in lay.params:
            if p.share_from:
                if p.share_from in pmap:
                    p.owner = pmap[p.share_from]
                else:
                    cand = did_you_mean(p.share_from, pmap)
                    ctx.error(f"share_from \"{p.share_from}\" of param '{p.orig}' in layer '{lay.name}' names no param "
                              f"in phase {ctx.phase} (SINGA: \"can't find param {p.share_from}\")"
                              + (f"; did you mean '{cand}'?" if cand else ""), p.msg.vat("share_from"))
    ctx.check()
    nodes: list[GraphNode] = []
    by_node: dict[str, GraphNode] = {}

    def add_node(name, lay, pid, k):
        if name in by_node:
            ctx.error(f"node '{name}' is created twice (SINGA aborts)", lay.loc)
            ctx.check()
        n = GraphNode(name, lay, pid, k)
        nodes.append(n)
        by_node[name] = n
        return n

    if ctx.workers > 1:
        _v1_partitionable(ctx, kept, lays)
    lay_nodes: dict[str, list[GraphNode]] = {}
    for L in kept:
        lay = lays[L.get("name")]
        if lay.pdim in (0, 1):
            lay_nodes[lay.name] = [add_node(f"{lay.name}@{i:02d}", lay, i, K) for i in range(K)]
        else:
            lay_nodes[lay.name] = [add_node(lay.name, lay, lay.pid, 1)]
    conn_used = []
    for L in kept:
        D = lays[L.get("name")]
        dn = lay_nodes[D.name]
        pd, ct = D.pdim, ctx.src_conn(D.type)
        for S, sloc in zip(L.get("srclayers"), L.vlocs_of("srclayers")):
            if S not in lays:
                _unknown_src(ctx, L, S, sloc, kept_names, all_names)
                continue
            Sl = lays[S]
            sn, ps = lay_nodes[S], Sl.pdim
            if ps == -1:
                if pd == 0 or (pd == 1 and ct == "kOneToOne"):
                    sl = _Lay(f"{S}<", "kSlice", None, -1, Sl.loc, S, gen={"slice_dim": pd, "num_slices": len(dn)})
                    sl.made_for = D
                    x = add_node(sl.name, sl, sn[0].pid, 1)
                    _edge(sn[0], x)
                    for d in dn:
                        _edge(x, d)
                    conn_used.append(x)
                elif pd == -1:
                    _edge(sn[0], dn[0])
                else:
                    sp = _Lay(f"{S}+", "kSplit", None, -1, Sl.loc, S, gen={"num_splits": len(dn)})
                    x = add_node(sp.name, sp, sn[0].pid, 1)
                    _edge(sn[0], x)
                    for d in dn:
                        _edge(x, d)
                    conn_used.append(x)
            elif pd == -1 or (pd == 1 and ct == "kOneToAll" and ps == 0):
                for d in dn:
                    cc = _Lay(">" + d.name, "kConcate", None, pd, D.loc, D.name, gen={"concate_dim": ps})
                    x = add_node(cc.name, cc, d.pid, 1)
                    for s in sn:
                        _edge(s, x)
                    _edge(x, d)
                    conn_used.append(x)
            elif ps != pd:
                ctx.error(f"SINGA v0.1 cannot connect layer '{S}' (partition_dim {ps}) to '{D.name}' (partition_dim "
                          f"{pd}): \"not implemented\"", sloc)
            elif ps == 1 and ct == "kOneToAll":
                ctx.error(f"SINGA v0.1 cannot connect '{S}' to '{D.name}' (both partition_dim 1, '{D.name}' is "
                          f"kOneToAll): \"in wrong branch, not implemented\"", sloc)
            else:
                for i in range(len(dn)):
                    _edge(sn[i], dn[i])
    ctx.check()
    order = sort_nodes(ctx, nodes)
    # split insertion after the fact (in sorted order); the split node is appended
    for n in list(order):
        if len(n.dsts) > 1 and ctx.dst_conn(n.lay.type) == "kOneToOne":
            dsts = list(n.dsts)
            for d in dsts:
                n.dsts.remove(d)
                d.srcs.remove(n)
            sp = _Lay(n.name + "+", "kSplit", None, n.lay.pdim, n.lay.loc, n.lay.origin, gen={"num_splits": len(dsts)})
            x = add_node(sp.name, sp, n.pid, 1)
            order.append(x)
            _edge(n, x)
            for d in dsts:
                _edge(x, d)
            conn_used.append(x)
    # B3: v0.1 never inserts bridges
    for n in order:
        for d in n.dsts:
            if d.pid != n.pid:
                ctx.error(f"edge from '{n.name}' (worker {n.pid}) to '{d.name}' (worker {d.pid}) crosses workers, and "
                          f"SINGA v0.1 never inserts the bridge layers that would carry it (its bridge pass compares a "
                          f"node's partition with itself)", d.lay.loc)
                break
    ctx.check()
    order = sort_nodes(ctx, order)  # SINGA sorts again after adding the split nodes
    if conn_used:  # B4
        kinds = sorted({x.lay.type for x in conn_used})
        ctx.warn(f"SINGA v0.1 cannot run this net: it needs {', '.join(kinds)} layers, whose v0.1 implementation "
                 f"is missing (\"Not implemented\")", conn_used[0].lay.loc, key="B4")
    return order


def _v1_partitionable(ctx: BuildContext, kept, lays):
    """A v0.1 job with K > 1 workers (the partition pass builds its partitions): SINGA v0.1 connects
    layers of equal partition_dim pairwise and nothing else works (spec 6): an edge its graph would
    carry across workers has no bridge (B3), other combinations are "not implemented"."""
    K = ctx.workers
    for L in kept:
        D = lays[L.get("name")]
        pd, ct = D.pdim, ctx.src_conn(D.type)
        for S, sloc in zip(L.get("srclayers"), L.vlocs_of("srclayers")):
            if S not in lays:
                continue
            ps = lays[S].pdim
            if ps == -1 and pd == -1:
                continue
            if ps == -1 or pd == -1 or (pd == 1 and ct == "kOneToAll" and ps == 0):
                ctx.error(f"edge from '{S}' to '{D.name}' crosses workers (K = {K}), and SINGA v0.1 never inserts "
                          f"the bridge layers that would carry it (its bridge pass compares a node's partition with "
                          f"itself)", D.loc)
            elif ps != pd:
                ctx.error(f"SINGA v0.1 cannot connect layer '{S}' (partition_dim {ps}) to '{D.name}' (partition_dim "
                          f"{pd}): \"not implemented\"", sloc)
            elif ps == 1 and ct == "kOneToAll":
                ctx.error(f"SINGA v0.1 cannot connect '{S}' to '{D.name}' (both partition_dim 1, '{D.name}' is "
                          f"kOneToAll): \"in wrong branch, not implemented\"", sloc)
    ctx.check()


# ------------------------------------------------------------------------------------------
# Graph::Sort (spec 5.8)

def sort_nodes(ctx: BuildContext, nodes: list[GraphNode]) -> list[GraphNode]:
    order = singa_sort(nodes)
    if len(order) != len(nodes):
        visited = set(order)
        _cycle_error(ctx, [n for n in nodes if n not in visited])
    return order


def _cycle_error(ctx, rest):
    rest_set = set(rest)
    # find a cycle by walking sources inside the unsorted part
    for start in rest:
        path, pos, n = [], {}, start
        while n is not None and n not in pos:
            pos[n] = len(path)
            path.append(n)
            n = next((s for s in n.srcs if s in rest_set), None)
        if n is not None:
            cyc = list(reversed(path[pos[n]:]))
            names = " -> ".join(x.lay.origin for x in cyc + [cyc[0]])
            ctx.error(f"the net has a cycle ({names}); SINGA's topological sort accepts only the two-layer "
                      f"RBMVis <-> RBMHid kind and loops forever on this one", cyc[0].lay.loc)
            ctx.check()
    ctx.error(f"{len(rest)} node(s) cannot be ordered (not reachable from a layer without sources): "
              f"{', '.join(n.name for n in rest[:5])}{', ...' if len(rest) > 5 else ''}", rest[0].lay.loc)
    ctx.check()
