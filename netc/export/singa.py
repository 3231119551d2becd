"""`netc export --format singa`: a network (one phase, after the default pipeline) as a SINGA job.conf.

Two kinds of network:

* One SINGA built (imported from a job.conf). Its layers are SINGA's nodes, named as netc's
  importer names them (netc/frontend/singa/to_ir.py): `<unroll index>#<layer>:<partition>` for v0.2+
  (`0#conv1:0`, `3#gru1:0`, `0#ip1:1`), `<layer>:<partition, 2 digits>` for v0.1 (`conv1:00`), and
  the layers SINGA generates (`split(...)`, `slice(...)`, `concate(...)`, `bridge_src(...)`). The
  exporter recovers the config layers behind the nodes - unrolling (unroll_len, unroll_conn_type,
  shift; the kGRU recurrent edge is SINGA's own), partitioning (nworkers_per_group and every layer's
  partition_dim, solved from the connection layers SINGA inserted between partitions), parameter
  names and share_from - and writes a job in the net's own SINGA version (v0.1 for v0.1 nets, v0.3
  otherwise), so that importing the result builds the same net: the same IR (names, shapes,
  attributes, parameters, sharing). What the IR does not record is written with fixed values:
  file paths, initializers, updater, the layer types of inputs (see below).
* Any other network (.nd, Paleo, Brainstorm): one SINGA v0.3 layer per netc layer, K = 1.

Inputs. SINGA's input layers all become netc inputs, so the exporter picks the layer that yields
the input's shape: v0.2+ kRecordInput (store_conf batchsize and shape; NHWC [N, H, W, C] is written
as shape C, H, W), unrolled inputs kOneHot / kRNNLabel reading a kCharRNN (which has no IR op of its
own), other integer inputs kRNNLabel; v0.1 kShardData (no IR op) read by the parsers kMnist
([N, 28, 28, 1]), kRGBImage ([N, H, W, 3], H = W <= 32, cropped from the 3x32x32 CIFAR-10 records)
and kLabel. SINGA's labels travel with records: a loss reading `<input>.label` reads that input.

A network SINGA cannot express is an error naming the layer, never an approximation.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..diagnostics import DiagnosticEngine, NetcError
from ..ops import lookup
from ..ops.registry import SingaInexpressible
from ..ops.singa import singa_dim as _singa_dim

_V2_NODE = re.compile(r"^(\d+)#(.*):(\d+)(?:\.(label|loss|\d+))?$")
_V1_NODE = re.compile(r"^(.*):(\d\d+)(?:\.(loss|\d+))?$")
_GENERATED = re.compile(r"^(split|slice|concate|bridge_src|bridge_dst)\(")
_CONCATE = re.compile(r"^concate\((split|slice)\((\d+)#(.*)\)\):(\d+)$")
# SINGA v0.1's LayerType enum, every name (src/proto/job.proto at tag v0.1.0): the types a v0.1 job may hold
_V01_TYPES = {"kLMDBData", "kPrefetch", "kShardData", "kLabel", "kMnist", "kRGBImage", "kConvolution",
              "kCConvolution", "kCPooling", "kDropout", "kInnerProduct", "kLRN", "kPooling", "kReLU", "kRBMVis",
              "kRBMHid", "kSigmoid", "kSTanh", "kSoftmaxLoss", "kEuclideanLoss", "kBridgeDst", "kBridgeSrc",
              "kConcate", "kSlice", "kSplit"}


def _err(msg, op=None):
    loc = op.loc if op is not None and op.loc is not None and op.loc.file != "<unknown>" else None
    raise NetcError(msg, loc)


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass
class _Param:
    name: str | None          # None: unnamed (SINGA v0.1 names it '<node>$')
    share_from: str | None = None
    role: str = "weight"
    scales: tuple = ()        # ("lr_scale: 2", "wd_scale: 0"): the optimizer's multipliers, when not 1
    init: str = ""            # ' init { ... }' from the parameter's init attributes ("": netc's default)


@dataclass
class _Layer:
    name: str
    type: str = ""
    srcs: list = field(default_factory=list)       # srclayers, in order
    conn: list = field(default_factory=list)       # unroll_conn_type per srclayers entry (None: default)
    shift: list = field(default_factory=list)      # shift per srclayers entry
    confs: list = field(default_factory=list)      # '<x>_conf { ... }' pieces
    params: list = field(default_factory=list)     # [_Param]
    pdim: int | None = None
    unroll: int = 1
    op: object = None                              # an IR op of the layer (locations in errors)
    roles: list = field(default_factory=list)      # netc param roles behind the `param` entries, in order


# ------------------------------------------------------------------------------------------ writing

def _nchw_rec(shape) -> list:
    """SINGA's record shape (all but the batch) of a netc shape: NHWC [N, H, W, C] -> C, H, W."""
    s = list(shape)
    return [s[3], s[1], s[2]] if len(s) == 4 else s[1:]


def _init(role: str) -> str:
    if role in ("bias", "shift") or role.endswith("_b"):
        return " init { type: kConstant value: 0 }"
    return " init { type: kGaussian std: 0.01 }"


_UPDATER = "updater { type: kSGD learning_rate { type: kFixed base_lr: 0.01 } }"
_UPDATER_TYPES = {"sgd": "kSGD", "momentum": "kSGD", "nesterov": "kNesterov", "adagrad": "kAdaGrad",
                  "rmsprop": "kRMSProp", "adam": "kAdam", "adadelta": "kAdaDelta", "adamax": "kAdamMax"}
_LR_TYPES = {"fixed": ("kFixed", None), "step": ("kStep", "step_conf"), "linear": ("kLinear", "linear_conf"),
             "exponential": ("kExponential", "exponential_conf"), "inverse": ("kInverse", "inverse_conf"),
             "inverse_t": ("kInverseT", "inverset_conf"), "fixed_step": ("kFixedStep", "fixedstep_conf")}


def _num(v) -> str:
    return repr(v) if isinstance(v, float) else str(v)


def _updater(opt, version: str, built: bool = False) -> str:
    """The job's `updater` from the module's optimizer (a SINGA job's, frontend/singa/to_ir.py); the
    fixed default for none, or for one SINGA cannot express (none at all for a v0.2+ job that had
    none: it reads back the same)."""
    if not opt and built and version != "0.1":
        return ""
    if _inexpressible(opt, version) is not None or not opt:
        return _UPDATER
    t = _UPDATER_TYPES[opt["name"]]
    f = [f"type: {t}"]
    if opt["name"] in ("momentum", "nesterov") and opt.get("momentum"):
        f.append(f"momentum: {_num(opt['momentum'])}")
    if opt.get("weight_decay"):
        f.append(f"weight_decay: {_num(opt['weight_decay'])}")
    if "eps" in opt:
        f.append(f"delta: {_num(opt['eps'])}")
    if opt["name"] == "rmsprop":
        f.append(f"rmsprop_conf {{ rho: {_num(opt['alpha'])} }}")
    if opt["name"] == "adadelta":
        f.append(f"adadelta_conf {{ rho: {_num(opt['rho'])} }}")
    if opt["name"] in ("adam", "adamax"):
        conf = "adam_conf" if opt["name"] == "adam" else "adammax_conf"
        f.append(f"{conf} {{ beta1: {_num(opt['beta1'])} beta2: {_num(opt['beta2'])} }}")
    if version != "0.1" and opt.get("clip_high", 0.0) > opt.get("clip_low", 0.0):
        f.append(f"clip_low: {_num(opt['clip_low'])} clip_high: {_num(opt['clip_high'])}")
    sch = opt.get("schedule")
    if sch is None:           # a job without a learning_rate reads back without one
        return "updater { " + " ".join(f) + " }"
    lt, conf = _LR_TYPES[sch["type"]]
    lr = [f"type: {lt}"] + ([f"base_lr: {_num(sch['base_lr'])}"] if "base_lr" in sch else [])
    if sch["type"] == "fixed_step":
        c = [f"step: {s}" for s in sch["steps"]] + [f"step_lr: {_num(v)}" for v in sch["lrs"]]
    else:
        c = [f"{k}: {_num(v)}" for k, v in sch.items() if k not in ("type", "base_lr")]
    if conf:
        lr.append(f"{conf} {{ {' '.join(c)} }}")
    f.append(f"learning_rate {{ {' '.join(lr)} }}")
    return "updater { " + " ".join(f) + " }"


def _init_of(param_op) -> str:
    """' init { ... }' of a netc.param with SINGA's init (ops/initializers.py SINGA_INITS), else ""."""
    from ..ops.initializers import SINGA_INITS
    a = param_op.attrs if param_op is not None else {}
    kind = {"normal": "gaussian"}.get(a.get("init"), a.get("init"))
    t = next((k for k, v in SINGA_INITS.items() if v == kind), None)
    if t is None:
        return ""
    keys = ("value",) if kind == "constant" else ("mean", "std", "value") if "gaussian" in kind else \
        ("low", "high", "value")
    return " init { " + " ".join([f"type: {t}"] + [f"{k}: {_num(float(a[k]))}" for k in keys if k in a]) + " }"


def _scales(param_op) -> tuple:
    out = []
    for k in ("lr_scale", "wd_scale"):
        v = param_op.attrs.get(k) if param_op is not None else None
        if v is not None and float(v) != 1.0:
            out.append(f"{k}: {_num(float(v))}")
    return tuple(out)


def _partitioned_nodes(text: str, version: str) -> list:
    """The nodes of SINGA's partitioned training graph of a written job, in its order (the frontend
    builds the logical net; the partition pass builds SINGA's graph of K partitions)."""
    from ..frontend.singa.to_ir import import_singa, nname
    from ..pipelines import Options, inference
    diag = DiagnosticEngine()
    m = import_singa(text, "<netc export>", diag, version=version)
    ctx = inference(m, Options(phase="train"), diag)
    graph = next(iter(ctx.notes.get("singa_graph", {}).values()), [])
    return [nname(n["node"]) for n in graph]


def _write(name: str, layers: list[_Layer], K: int, version: str, phase: str = "train",
           updater: str = _UPDATER, unroll: int = 1) -> str:
    """The job; unroll > 1: the neuralnet's unroll_len (a rolled net's), each layer's own where it differs."""
    rbm = any(L.type in ("kRBMVis", "kRBMHid") for L in layers)
    unrolled = any(L.unroll > 1 for L in layers)
    alg = "kCD" if rbm else ("kBPTT" if unrolled and version != "0.1" else "kBP")
    cd_k = max((L.op.attrs.get("cd_k", 1) for L in layers if L.type == "kRBMVis"), default=1)
    if cd_k != 1:
        alg += f" cd_conf {{ cd_k: {cd_k} }}"
    out = [f"# written by `netc export --format singa`: the {phase} net, as a SINGA "
           f"{'v0.1' if version == '0.1' else 'v0.3'} job",
           f"name: {_q(name)}", "train_steps: 1000", "disp_freq: 100", f"train_one_batch {{ alg: {alg} }}",
           *([updater] if updater else []), "neuralnet {" + (f" unroll_len: {unroll}" if unroll > 1 else "")]
    for L in layers:
        body = [f"name: {_q(L.name)}", f"type: {L.type}"] + [f"srclayers: {_q(s)}" for s in L.srcs]
        if L.unroll != unroll and (L.unroll > 1 or unroll > 1):
            body.append(f"unroll_len: {L.unroll}")
        if any(c is not None for c in L.conn):
            body += [f"unroll_conn_type: {c or 'kUnrollOneToOne'}" for c in L.conn]
        if any(L.shift):
            body += [f"shift: {s}" for s in L.shift]
        if L.pdim is not None:
            body.append(f"partition_dim: {L.pdim}")
        body += L.confs
        for p in L.params:
            fields = ([f"name: {_q(p.name)}"] if p.name is not None else []) + (
                [f"share_from: {_q(p.share_from)}"] if p.share_from else [])
            fields += list(p.scales)
            out_p = "param { " + " ".join(fields) + ("" if p.share_from else p.init or _init(p.role)) + " }"
            body.append(out_p.replace("{  ", "{ "))
        out.append("  layer { " + " ".join(body) + " }")
    out.append("}")
    out.append(f"cluster {{ nworker_groups: 1 nserver_groups: 1 nworkers_per_group: {K} "
               f"workspace: \"workspace\" }}")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------ layer bodies

class _Names:
    """Unique SINGA names (layers and params share nothing, but each set must be unique)."""

    def __init__(self, taken=()):
        self.taken = set(taken)

    def fresh(self, base: str) -> str:
        from ..ir.query import unique_name
        return unique_name(base, self.taken)


def _body(op, L: _Layer, ins: list, v1: bool, K: int, plain: bool = False):
    """Type and conf of the SINGA layer for netc op `op` (inputs are handled by the callers): the op's
    own OpDef.singa_layer (netc/ops/). ins: the operands' shapes. Sets L.type / L.confs; returns the
    param roles the layer lists."""
    opdef = lookup(op.name)
    scale = K if L.pdim == 1 else 1   # partition_dim 1 layers hold 1/K of the features
    try:
        layer = opdef.singa_layer(op.attrs, ins, v1, scale, plain) if opdef is not None else None
    except SingaInexpressible as e:
        _err(str(e), op)
    if layer is None:
        nm = op.attrs.get("name")
        kind = op.name.removeprefix("netc.")
        _err(f"layer '{nm}' is {'an' if kind[0] in 'aeiou' else 'a'} {kind}, which netc cannot write as a SINGA layer "
             f"(supported: conv, pooling, relu/sigmoid/tanh, lrn, inner product, dropout, concat, slice, softmax, "
             f"softmax loss, euclidean loss, batch norm, argsort, accuracy, gru)", op)
    L.type, confs, roles = layer
    L.confs.extend(confs)
    return roles


def _check_version(layers, v1):
    if not v1:
        return
    for L in layers:
        if L.type not in _V01_TYPES:
            _err(f"layer '{L.name}' would be a {L.type}, which SINGA v0.1 does not have", L.op)


# ------------------------------------------------------------------------------------------ plain nets

def _plain(ops, name, decl=None) -> tuple[list[_Layer], int]:
    """One SINGA layer per netc layer (K = 1): .nd, Paleo and Brainstorm networks."""
    label_inputs = {id(op.operands[d.label_operand].owner) for op in ops
                    for d in [lookup(op.name)] if d is not None and d.label_operand is not None}
    inputs = [op for op in ops if op.name == "netc.input" and id(op) not in label_inputs]
    if len(inputs) != 1:
        _err(f"SINGA nets read one data layer; this network has {len(inputs)} inputs that are not labels"
             + (f" ({', '.join(op.attrs['name'] for op in inputs[:4])}{', ...' if len(inputs) > 4 else ''})"
                if inputs else ""), inputs[1] if len(inputs) > 1 else ops[0])
    data = inputs[0]
    for op in ops:
        if op.name == "netc.input" and id(op) in label_inputs and len(op.attrs["shape"]) > 2:
            _err(f"label input '{op.attrs['name']}' {op.attrs['shape']}: SINGA labels are one class index per "
                 f"record", op)
    names = _Names()
    pnames = _Names()
    lname: dict[int, str] = {}
    owner_of: dict[str, str] = {}   # netc param -> SINGA param name of its first binder
    layers: list[_Layer] = []

    def sname(n):
        return names.fresh(re.sub(r"[@#+]", "_", n) or "layer")

    s = list(data.attrs["shape"])
    if len(s) < 1:
        _err(f"input '{data.attrs['name']}' {s} has no batch dimension", data)
    L = _Layer(sname(data.attrs["name"]), "kRecordInput", op=data)
    L.confs.append(f"store_conf {{ backend: \"kvfile\" path: \"{L.name}.bin\" batchsize: "
                   f"{s[0]}" + "".join(f" shape: {d}" for d in _nchw_rec(s)) + " }")
    layers.append(L)
    lname[id(data)] = L.name
    for op in ops:
        a = op.attrs
        if op.name == "netc.input":
            if id(op) in label_inputs:
                lname[id(op)] = lname[id(data)]
            continue
        srcs = [lname[id(v.owner)] for v in op.operands]
        L = _Layer(sname(a.get("name", "x")), op=op)
        roles = _body(op, L, [v.type.shape for v in op.operands], False, 1, plain=True)
        L.srcs = srcs
        _bind_params(L, op, roles, pnames, owner_of, decl)
        layers.append(L)
        last = L.name
        act = a.get("activation")
        if "activation" in lookup(op.name).attrs and act not in (None, "none"):   # a fused activation
            A = _Layer(names.fresh(f"{L.name}_{act}"), op=op, srcs=[L.name])
            if act == "relu":
                A.type = "kReLU"
            elif act == "sigmoid":
                A.type = "kSigmoid"
            elif act == "tanh":
                A.type, A.confs = "kActivation", ["activation_conf { type: TANH }"]
            else:
                _err(f"activation '{act}' of '{a['name']}' cannot be written in SINGA", op)
            layers.append(A)
            last = A.name
        lname[id(op)] = last
    return layers, 1


def _bind_params(L: _Layer, op, roles, pnames: _Names, owner_of: dict, decl) -> None:
    """L's `param` entries for its roles: a netc parameter's first binder names it, later ones share_from it."""
    refs = op.attrs.get("params") or {}
    for role in roles:
        ref = refs.get(role)
        if ref is None:
            L.params.append(_Param(pnames.fresh(f"{L.name}_{role}"), role=role))
        elif ref.name in owner_of:
            L.params.append(_Param(pnames.fresh(f"{L.name}_{role}"), owner_of[ref.name], role))
        else:
            owner_of[ref.name] = pnames.fresh(re.sub(r"[@#+]", "_", ref.name))
            pop = (decl or {}).get(ref.name)
            L.params.append(_Param(owner_of[ref.name], role=role, scales=_scales(pop), init=_init_of(pop)))


# ------------------------------------------------------------------------------------------ rolled nets

# how a rolled net's ops are written back (_rolled): a view passes its source's layer on, the loss's
# probabilities and one-hot targets are its kSoftmaxLoss's, the others are layers of their own
_ROLLED_KINDS = {"netc.reshape": "view", "netc.softmax": "probs", "netc.one_hot": "onehot",
                 "netc.softmax_loss": "loss", "netc.gru": "gru"}


def _rolled(ops, decl) -> tuple[list[_Layer], int]:
    """A recurrent net as SINGA's importer rolls it (frontend/singa/rolled.py): time-major inputs [T, B]
    (batch_axis 1) -> one kCharRNN and its kRNNLabel, one layer per op written back with the neuralnet's
    unroll_len T; the reshapes around a time-distributed layer and the loss's one-hot targets are that
    layer's (a target of value T * scale is kSoftmaxLoss's softmaxloss_conf.scale)."""
    seq = [op for op in ops if op.name == "netc.input" and op.attrs.get("batch_axis") == 1]
    t, b = (list(seq[0].attrs["shape"]) + [0, 0])[:2]
    names, pnames, owner_of = _Names(), _Names(), {}
    data = _Layer(names.fresh("data"), "kCharRNN", op=seq[0])
    data.confs.append(f"char_rnn_conf {{ path: \"train.txt\" vocab_path: \"vocab.txt\" batchsize: {b} unroll_len: {t} }}")
    layers, lname, scale = [data], {}, {}
    kind = {id(op): _ROLLED_KINDS.get(op.name, "layer") for op in ops}
    losses = {op.attrs.get("name") for op in ops if kind[id(op)] == "loss"}

    def target(op):   # a loss's one-hot targets: '<loss layer>.target'
        return kind[id(op)] == "onehot" and f"{op.attrs.get('name')}".removesuffix(".target") + ".loss" in losses
    ids = {id(op.operands[0].owner) for op in ops if kind[id(op)] == "onehot" and not target(op)}
    for op in ops:
        a, nm, k = op.attrs, op.attrs.get("name", "x"), kind[id(op)]
        srcs = [lname[id(v.owner)] for v in op.operands]
        if op.name == "netc.input":
            if a.get("batch_axis") != 1 or a.get("dtype", "f32") == "f32" or list(a["shape"]) != [t, b]:
                _err(f"input '{nm}' {a['shape']}: a rolled SINGA net reads character ids [T, B] = {[t, b]} (i32, "
                     f"batch_axis 1): its kCharRNN data and kRNNLabel labels", op)
            if id(op) in ids:
                lname[id(op)] = data.name
                continue
            L = _Layer(names.fresh(nm), "kRNNLabel", [data.name], ["kUnrollOneToAll"], [0], op=op, unroll=t)
        elif k == "view" or (k == "probs" and f"{nm}.loss" in losses) or target(op):
            lname[id(op)] = srcs[0] if srcs and k != "probs" else ""
            if k == "onehot":
                scale[id(op)] = a.get("on_value", 1.0) / t
            elif id(op.operands[0].owner) in scale:
                scale[id(op)] = scale[id(op.operands[0].owner)]
            continue
        elif k == "onehot":
            if a.get("on_value", 1.0) != 1.0:
                _err(f"OneHot '{nm}' writes {a['on_value']} at the id; SINGA's kOneHot writes 1", op)
            L = _Layer(names.fresh(nm), "kOneHot", srcs, ["kUnrollOneToAll"], [0], [f"onehot_conf {{ vocab_size: "
                                                                                      f"{a['depth']} }}"], op=op, unroll=t)
        elif k == "loss":
            L = _Layer(names.fresh(nm.removesuffix(".loss")), "kSoftmaxLoss", srcs, op=op, unroll=t)
            sc = scale.get(id(op.operands[1].owner), 1.0)
            L.confs.append("softmaxloss_conf { topk: 1" + (f" scale: {_num(sc)}" if sc != 1.0 else "") + " }")
        else:
            if k == "gru" and (len(op.operands) != 1 or len(op.operands[0].type.shape) != 3):
                _err(f"GRU '{nm}' reads {'an initial state' if len(op.operands) > 1 else 'one step'}; a rolled "
                     f"SINGA kGRU reads [T, B, X] from the zero state", op)
            L = _Layer(names.fresh(nm), op=op, srcs=srcs, unroll=t)
            _bind_params(L, op, _body(op, L, [v.type.shape for v in op.operands], False, 1), pnames, owner_of, decl)
        layers.append(L)
        lname[id(op)] = L.name
    return layers, t


# ------------------------------------------------------------------------------------------ SINGA-built nets

class _Built:
    """Recover the config layers of a net SINGA built (see the module docstring)."""

    def __init__(self, module, ops, version):
        self.v1 = version == "0.1"
        self.ops = ops
        self.module_params = list(module.params())
        self.node: dict[int, tuple] = {}          # id(op) -> (layer, unroll index, partition, suffix)
        self.copies: dict[str, dict] = {}         # layer -> {(i, p): main op}
        self.extra: dict[str, dict] = {}          # layer -> {(i, p, suffix): op}
        self.order: list[str] = []                # layers in order of first appearance
        self.generated: dict[str, object] = {}    # generated node name -> op
        pat = _V1_NODE if self.v1 else _V2_NODE
        for op in ops:
            nm = op.attrs.get("name", "")
            m = pat.match(nm)
            if m is None:
                self.generated[nm] = op
                continue
            if self.v1:
                lay, i, p, suf = m.group(1), 0, int(m.group(2)), m.group(3)
            else:
                i, lay, p, suf = int(m.group(1)), m.group(2), int(m.group(3)), m.group(4)
            if lay not in self.copies:
                self.copies[lay], self.extra[lay] = {}, {}
                self.order.append(lay)
            self.node[id(op)] = (lay, i, p, suf)
            if suf is None:
                self.copies[lay][(i, p)] = op
            else:
                self.extra[lay][(i, p, suf)] = op
        self.K = 1 + max((p for c in self.copies.values() for (_, p) in c), default=0)
        self.U = {lay: 1 + max(i for (i, _) in c) if c else 1 for lay, c in self.copies.items()}
        if self.v1 and self.K > 1:
            _err(f"this SINGA v0.1 net is partitioned ({self.K} workers); netc writes v0.1 jobs only for "
                 f"unpartitioned nets (export --phase test, whose net SINGA builds with one worker)", ops[0])
        for lay in self.order:
            c = self.copies[lay]
            want = {(i, p) for i in range(self.U[lay]) for p in range(self.K)}
            if set(c) != want:
                op = next(iter(self.extra[lay].values()), None) if not c else next(iter(c.values()))
                _err(f"layer '{lay}' has the nodes {sorted(c)} (unroll index, partition); a SINGA layer has one "
                     f"per unroll step and partition: {sorted(want)}", op)
            if self.U[lay] > 1 and self.K > 1:
                _err(f"layer '{lay}' is unrolled in a partitioned net; netc does not write such SINGA jobs",
                     c[(0, 0)])

    # -- sources --------------------------------------------------------------------------------
    def resolve(self, v, consumer):
        """(kind, layer, unroll index, partition) of an operand: kind 'direct', 'split' or 'slice'
        (read through SINGA's partition connection layers)."""
        op = v.owner
        info = self.node.get(id(op))
        if info is not None:
            lay, i, p, suf = info
            if suf == "loss":
                _err(f"'{consumer.attrs['name']}' reads the loss of '{lay}', which SINGA cannot express", consumer)
            return "direct", lay, i, p
        m = _CONCATE.match(op.attrs.get("name", ""))
        if m is None or self.v1:
            _err(f"'{consumer.attrs['name']}' reads '{op.attrs.get('name')}', which is not a node netc can write "
                 f"back as a SINGA layer", consumer)
        return m.group(1), m.group(3), int(m.group(2)), int(m.group(4))

    def operands(self, lay, op):
        """The operands that are SINGA sources of a layer's main op."""
        if op.name == "netc.softmax" or (op.name == "netc.opaque" and op.attrs.get("type") in
                                         ("kSoftmaxLoss", "kCudnnSoftmaxLoss")):
            i, p = self.where(op)
            loss = self.extra[lay].get((i, p, "loss"))
            if loss is not None:
                return list(loss.operands)
        return list(op.operands)

    def where(self, op):
        _, i, p, _ = self.node[id(op)]
        return i, p

    # -- the whole net --------------------------------------------------------------------------
    def layers(self) -> tuple[list[_Layer], int]:
        K = self.K
        L_of: dict[str, _Layer] = {}
        refs: dict[str, dict] = {}      # layer -> {(i, p): [(kind, src layer, j, q)]}
        energy_hid = {}                 # kRBMHid layer -> kRBMVis layer
        for lay in self.order:
            op0 = self.copies[lay][(0, 0)]
            L = _Layer(lay, op=op0, unroll=self.U[lay])
            L_of[lay] = L
            if op0.name == "netc.rbm_visible":
                for h in op0.attrs.get("hidden", []):
                    m = (_V1_NODE if self.v1 else _V2_NODE).match(h)
                    if m:
                        energy_hid[m.group(1) if self.v1 else m.group(2)] = lay
            if op0.name == "netc.input":
                continue
            r = {}
            for (i, p), op in self.copies[lay].items():
                r[(i, p)] = [self.resolve(v, op) for v in self.operands(lay, op)]
            refs[lay] = r
        pdim = self.partition_dims(refs, L_of) if K > 1 else {}
        for lay, L in L_of.items():
            L.pdim = pdim.get(lay)
        # sources, unrolling connections
        for lay in self.order:
            if lay in refs:
                self.connect(L_of[lay], refs[lay], L_of)
        # layer bodies, params
        layers = []
        names = _Names(self.order)
        inputs = _Inputs(self, names, K)
        for lay in self.order:
            L = L_of[lay]
            op0 = L.op
            if op0.name == "netc.input":
                layers.extend(inputs.layer(L))
                continue
            ins = [v.type.shape for v in self.operands(lay, op0)]
            if lay in energy_hid:
                L.type = "kRBMHid"
                gauss = self.copies[energy_hid[lay]][(0, 0)].attrs.get("hidden_gaussian")
                L.confs.append(f"rbm_conf {{ hdim: {op0.attrs['num_outputs']}{' gaussian: true' if gauss else ''} }}")
                roles = ["weight", "bias"]
            elif op0.name == "netc.rbm_visible":
                hid = [h for h, v in energy_hid.items() if v == lay]
                if len(hid) != 1:
                    _err(f"energy model '{op0.attrs['name']}' has {len(hid)} hidden layers; SINGA's kRBMVis has one",
                         op0)
                hop = self.copies[hid[0]][(0, 0)]
                L.type = "kRBMVis"
                L.srcs = L.srcs + [hid[0]]
                L.conn, L.shift = L.conn + [None] * (len(L.srcs) - len(L.conn)), L.shift + [0] * (
                    len(L.srcs) - len(L.shift))
                L.confs.append(f"rbm_conf {{ hdim: {hop.attrs['num_outputs']} }}")
                roles = []
            else:
                roles = _body(op0, L, ins, self.v1, K)
                if op0.name == "netc.softmax" and self.extra[lay].get((0, 0, "loss")) is not None:
                    L.type, L.confs = "kSoftmaxLoss", ["softmaxloss_conf { topk: 1 }"]
            L.roles = roles
            layers.append(L)
        self.bind_params(layers)
        _check_version(layers, self.v1)
        return layers, K

    def connect(self, L, r, L_of):
        """srclayers, unroll_conn_type and shift of layer L from its nodes' sources r."""
        lay, U = L.name, L.unroll
        gru = L.op.name == "netc.gru"
        per = {}
        for i in range(U):
            got = list(r[(i, 0)])
            if gru:  # SINGA appends the previous step itself (the recurrent edge)
                if i > 0:
                    if not got or got[-1][1:3] != (lay, i - 1):
                        _err(f"step {i} of GRU '{lay}' does not read step {i - 1} last: SINGA's recurrent edge "
                             f"is the last source", self.copies[lay][(i, 0)])
                    got = got[:-1]
                elif any(g[1] == lay for g in got):
                    _err(f"the first step of GRU '{lay}' reads the GRU itself", L.op)
            per[i] = got
        if U == 1:
            srcs, conn = [], []
            # one srclayers entry per source layer; a layer reading every copy of an unrolled
            # source (kUnrollOneToAll) or only its last (kUnrollFirstToLast) lists it once
            for g in per[0]:
                if srcs and srcs[-1] == g[1] and conn[-1] == "all":
                    continue
                m = self.U[g[1]]
                run = [x[2] for x in per[0] if x[1] == g[1]]
                if m > 1 and run == list(range(m)):
                    srcs.append(g[1])
                    conn.append("all")
                elif m > 1 and run == [m - 1]:
                    srcs.append(g[1])
                    conn.append("last")
                elif g[2] == 0:
                    srcs.append(g[1])
                    conn.append(None)
                else:
                    _err(f"'{L.op.attrs['name']}' reads copy {g[2]} of the unrolled layer '{g[1]}', which no "
                         f"unroll_conn_type expresses", L.op)
            L.srcs = srcs
            L.conn = [{"all": "kUnrollOneToAll", "last": "kUnrollFirstToLast"}.get(c) for c in conn]
            L.shift = [0] * len(srcs)
            return
        # unrolled: one entry per source layer, its connection type read off every copy
        fullest = max(range(U), key=lambda i: (len({g[1] for g in per[i]}), -i))
        srcs = []
        for g in per[fullest]:
            if g[1] not in srcs:
                srcs.append(g[1])
        for i in range(U):
            for g in per[i]:
                if g[1] not in srcs:
                    srcs.append(g[1])
        conn, shift = [], []
        for s in srcs:
            m = self.U[s]
            js = {i: [g[2] for g in per[i] if g[1] == s] for i in range(U)}
            first = next((i for i in range(U) if js[i]), None)
            sh = first - js[first][0] if first is not None and len(js[first]) == 1 else None
            if sh is not None and sh >= 0 and all(js[i] == ([i - sh] if i >= sh else []) for i in range(U)):
                conn.append(None)
                shift.append(sh)
            elif all(js[i] == list(range(m)) for i in range(U)):
                conn.append("kUnrollOneToAll")
                shift.append(0)
            elif js[0] == [m - 1] and all(not js[i] for i in range(1, U)):
                conn.append("kUnrollFirstToLast")
                shift.append(0)
            else:
                _err(f"the unrolled layer '{lay}' reads the copies {[js[i] for i in range(U)]} of '{s}', which no "
                     f"SINGA unroll_conn_type expresses", L.op)
        L.srcs, L.conn, L.shift = srcs, conn, shift

    def partition_dims(self, refs, L_of) -> dict:
        """Every layer's partition_dim from the connections SINGA inserted (spec 5.6): a direct edge
        joins equal partition dims; split -> concate feeds a partition_dim 1 kOneToAll layer; slice ->
        concate joins different ones (the slice cuts along the consumer's partition dim, the concate
        joins along the source's). Layers with per-partition params ('<name>:<partition>') are
        partition_dim 1, those sharing one param across partitions are not. Returns {layer: 1 or
        None} (None: the default 0)."""
        parent = {lay: lay for lay in L_of}

        def find(x):
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        def dim_of(op, rank):
            d = _singa_dim(op.attrs.get("dim", 0), rank)
            if d not in (0, 1):
                _err(f"'{op.attrs['name']}' works on dimension {d}; SINGA partitions only along dimension 0 or 1", op)
            return d

        cons, diff = [], []
        for lay, r in refs.items():
            for (i, p), gs in r.items():
                op = self.copies[lay][(i, p)]
                for kind, s, j, q in gs:
                    if kind == "direct":
                        parent[find(lay)] = find(s)
                        continue
                    cop = self.generated[f"concate({kind}({j}#{s})):{q}"]
                    cons.append((s, dim_of(cop, len(cop.results[0].type.shape)), cop))
                    if kind == "split":
                        cons.append((lay, 1, op))
                        continue
                    sl = next((o for n, o in self.generated.items()
                               if n.startswith(f"slice({j}#{s}):") and o.name == "netc.slice"), None)
                    if sl is None:
                        _err(f"'{cop.attrs['name']}' has no slice layer in front of it", cop)
                    cons.append((lay, dim_of(sl, len(sl.operands[0].type.shape)), sl))
                    diff.append((lay, s, op))
        for lay in L_of:
            op0 = self.copies[lay][(0, 0)]
            named = [x.name for role, x in (op0.attrs.get("params") or {}).items()
                     if x.name != f"{op0.attrs['name']}.{role}"]   # bound to SINGA's params, not netc's defaults
            if named:
                cons.append((lay, 1 if all(re.search(r":\d+$", x) for x in named) else 0, op0))
        fixed: dict[str, tuple] = {}
        for lay, v, op in cons:
            r = find(lay)
            if r in fixed and fixed[r][0] != v:
                _err(f"netc cannot solve the partitioning of this net: '{op.attrs['name']}' needs partition_dim {v}, "
                     f"'{fixed[r][1].attrs['name']}' {fixed[r][0]}, and a direct edge joins them", op)
            fixed[r] = (v, op)
        out = {lay: fixed[find(lay)][0] if find(lay) in fixed else 0 for lay in L_of}
        for lay, s, op in diff:
            if out[lay] == out[s]:
                _err(f"'{op.attrs['name']}' reads '{s}' through a slice although both have partition_dim {out[lay]}",
                     op)
        return {lay: (1 if v == 1 else None) for lay, v in out.items()}

    # -- parameters -----------------------------------------------------------------------------
    def pname(self, ref_name: str, L: _Layer) -> str:
        n = ref_name
        if not self.v1:
            n = re.sub(r"^\d+#", "", n)
        if L.pdim == 1:
            n = re.sub(r":\d+$", "", n)
        return n

    def bind_params(self, layers):
        """Every layer's `param` entries, in SINGA's positional order, named as SINGA named them
        (v0.2+ without the '0#' of unrolling, partition_dim 1 ones without the ':<partition>')."""
        taken = _Names()
        owners: dict[str, str] = {}   # IR param -> the SINGA name that owns its storage in the job
        for L in layers:              # an RBM's visible layer holds the weight its hidden layer binds
            if L.type == "kRBMVis":
                for k, pn in enumerate(L.op.attrs.get("params_singa", [])):
                    n = pn if self.v1 else re.sub(r"^\d+#", "", pn)
                    taken.taken.add(n)
                    owners.setdefault(pn, n)
                    decl = next((p for p in self.module_params if p.attrs.get("sym_name") == pn), None)
                    L.params.append(_Param(n, role="weight" if k == 0 else "bias", scales=_scales(decl),
                                           init=_init_of(decl)))
        for L in layers:
            op = L.op
            if op is None or op.name == "netc.input" or L.type == "kRBMVis":
                continue
            node = op.attrs.get("name")
            refs = op.attrs.get("params") or {}
            if op.name == "netc.batch_norm":
                # SINGA's kBM lists 4 params ([1, C, 1, 1]); netc's batch norm binds its own
                L.params = [_Param(taken.fresh(f"{L.name}_{k}"), role="bias" if k in ("bias", "mean") else "scale")
                            for k in ("scale", "bias", "mean", "var")]
                continue
            unnamed = 0
            for role in L.roles:
                if role not in refs:
                    _err(f"'{node}' has no parameter for its {role}", op)
                ir = refs[role].name
                if self.v1 and ir == f"{node}{'$' * (unnamed + 1)}":
                    unnamed += 1
                    L.params.append(_Param(None, role=role))   # SINGA v0.1 names it '<node>$' again
                    continue
                if ir in owners:
                    # bound by an earlier layer (an RBM's visible layer): a new name that shares the
                    # owner's storage, as the original config had it (v0.2+: the owner's unrolled '0#' name,
                    # which SINGA's share_from must give)
                    L.params.append(_Param(taken.fresh(f"{self.pname(ir, L)}_"),
                                           owners[ir] if self.v1 else "0#" + owners[ir], role))
                    continue
                n = self.pname(ir, L)
                if n in taken.taken:
                    _err(f"parameter '{ir}' of '{node}' would be written as '{n}', which another parameter is", op)
                taken.taken.add(n)
                owners[ir] = n
                sf = self.share_from(ir)
                if sf is None:
                    decl = next((p for p in self.module_params if p.attrs.get("sym_name") == ir), None)
                    L.params.append(_Param(n, role=role, scales=_scales(decl), init=_init_of(decl)))
                    continue
                if L.pdim == 1:
                    _err(f"parameter '{ir}' of '{node}' shares from '{sf}' in a partition_dim 1 layer (SINGA resolves "
                         f"it to an arbitrary partition)", op)
                L.params.append(_Param(n, sf, role))   # SINGA's own owner name ('w4'; '0#w4' in v0.2+)
                if self.v1 and lookup(op.name).singa_weight_transposed and role == "weight":
                    self.transpose_for_v1(L, op, sf)

    def settle_order(self, layers, K, version, name, phase, diag) -> list[_Layer]:
        """Order the config's layers so that SINGA's Graph::Sort puts the nodes in this net's order.

        Layers are first written in the order their nodes appear, which Sort keeps for chains; where
        it breaks ties differently (a layer reading the last step of an unrolled one, say), the layer
        whose node comes too late is moved before the one that overtook it, checked by building the
        written job with netc's SINGA builder (the same graph code as the import)."""
        from ..frontend.singa import build_singa
        from ..frontend.singa.to_ir import nname
        want_all = [op.attrs["name"] for op in self.ops if id(op) in self.node and self.node[id(op)][3] is None]
        layer_of = {n: self.node[id(op)][0] for op in self.ops if id(op) in self.node
                    for n in [op.attrs["name"]]}
        layers = list(layers)
        for _ in range(2 * len(layers) + 1):
            text = _write(name, layers, K, version, phase)
            try:
                net = build_singa(text, "train", version=version, file="<netc export>")
                got_all = [nname(n.name) for n in net.nodes] if K == 1 else _partitioned_nodes(text, version)
            except NetcError as e:
                d = e.diagnostics[0]
                raise AssertionError(f"the written SINGA job does not build: {d.loc}: {d.message}") from None
            missing = set(want_all) - set(got_all)
            if missing:
                raise AssertionError(f"the written SINGA job lacks the nodes {sorted(missing)[:5]}")
            keep = set(want_all)
            got = [x for x in got_all if x in keep]
            k = next((i for i, (a, b) in enumerate(zip(want_all, got)) if a != b), None)
            if k is None:
                return layers
            lx, ly = layer_of[want_all[k]], layer_of[got[k]]
            ix = next(i for i, L in enumerate(layers) if L.name == lx)
            iy = next(i for i, L in enumerate(layers) if L.name == ly)
            if ix < iy:
                break
            layers.insert(iy, layers.pop(ix))
        diag.warning(f"the written job has the same layers, but SINGA would run them in another order than this net "
                     f"(it puts '{got[k]}' before '{want_all[k]}')")
        return layers

    def share_from(self, ir_name):
        for p in self.module_params:
            if p.attrs["sym_name"] == ir_name:
                sf = p.attrs.get("share_from")
                return sf.name if sf is not None else None
        return None

    def transpose_for_v1(self, L, op, owner):
        """SINGA v0.1 shares only identical shapes: a shared inner-product weight whose [M, K] is the
        owner's [K, M] is written `transpose: true` (stored [K, M], as the original config had)."""
        shapes = {p.attrs["sym_name"]: list(p.attrs["type"].shape) for p in self.module_params if "type" in p.attrs}
        mine = shapes.get(op.attrs["params"]["weight"].name)
        theirs = shapes.get(owner)
        if mine is None or theirs is None:
            return
        # netc's inner-product weight is [K, M]; SINGA's is [M, K], or [K, M] with transpose
        own_singa = self.singa_shape_of(owner, theirs)
        if [mine[1], mine[0]] == own_singa:
            return
        if mine == own_singa:
            L.confs = [c.replace("innerproduct_conf { ", "innerproduct_conf { transpose: true ")
                       if c.startswith("innerproduct_conf") else c for c in L.confs]
            return
        _err(f"'{op.attrs['name']}' shares its weight with '{owner}' of another shape; SINGA v0.1 shares only "
             f"identical shapes", op)

    def singa_shape_of(self, pname, netc_shape):
        for op in self.ops:
            refs = op.attrs.get("params") or {}
            if (lookup(op.name).singa_weight_transposed and refs.get("weight") is not None
                    and refs["weight"].name == pname):
                return [netc_shape[1], netc_shape[0]]
        return list(netc_shape)


class _Inputs:
    """SINGA input layers for the netc inputs of a SINGA-built net (see the module docstring)."""

    def __init__(self, built: _Built, names: _Names, K: int):
        self.b, self.names, self.K = built, names, K
        self.charrnn: dict[int, _Layer] = {}    # batch -> kCharRNN layer
        self.shards: dict[tuple, _Layer] = {}   # (kind, batch) -> kShardData layer (v0.1)

    def layer(self, L: _Layer) -> list[_Layer]:
        b = self.b
        op = L.op
        shape, dtype = list(op.attrs["shape"]), op.attrs.get("dtype", "f32")
        if not shape:
            _err(f"input '{op.attrs['name']}' is a scalar; SINGA blobs have a batch dimension", op)
        if b.v1:
            return self.v1(L, shape, dtype)
        out = []
        if dtype != "f32":
            if len(shape) != 1:
                _err(f"integer input '{op.attrs['name']}' {shape}: SINGA's integer inputs are labels [N]", op)
            if self.K > 1:
                _err(f"integer input '{op.attrs['name']}' in a partitioned net: netc writes it as a kRNNLabel, "
                     f"which SINGA does not partition", op)
            src = self.char_rnn(shape[0], L.unroll, out)
            L.type, L.srcs = "kRNNLabel", [src]
            L.conn, L.shift = ["kUnrollOneToAll" if L.unroll > 1 else None], [0]
        elif L.unroll > 1:
            if len(shape) != 2:
                _err(f"unrolled input '{op.attrs['name']}' {shape}: netc writes unrolled inputs as kOneHot [N, V]",
                     op)
            src = self.char_rnn(shape[0], L.unroll, out)
            L.type, L.srcs = "kOneHot", [src]
            L.conn, L.shift = ["kUnrollOneToAll"], [0]
            L.confs.append(f"onehot_conf {{ vocab_size: {shape[1]} }}")
        else:
            batch = shape[0] * (self.K if L.pdim is None else 1)
            L.type = "kRecordInput"
            L.confs.append(f"store_conf {{ backend: \"kvfile\" path: \"{L.name}.bin\" batchsize: {batch}"
                           + "".join(f" shape: {d}" for d in _nchw_rec(shape)) + " }")
        return out + [L]

    def char_rnn(self, batch, steps, out) -> str:
        C = self.charrnn.get(batch)
        if C is None:
            C = _Layer(self.names.fresh("data"), "kCharRNN")
            self.charrnn[batch] = C
            out.append(C)
        C.confs = [f"char_rnn_conf {{ path: \"train.txt\" vocab_path: \"vocab.txt\" batchsize: {batch} "
                   f"unroll_len: {max(steps, getattr(C, '_steps', 1))} }}"]
        C._steps = max(steps, getattr(C, "_steps", 1))
        return C.name

    def shard(self, kind, batch, out) -> str:
        S = self.shards.get((kind, batch))
        if S is None:
            S = _Layer(self.names.fresh("data"), "kShardData")
            S.confs.append(f"sharddata_conf {{ path: \"examples/{kind}/train_shard\" batchsize: {batch} }}")
            self.shards[(kind, batch)] = S
            out.append(S)
        return S.name

    def v1(self, L, shape, dtype) -> list[_Layer]:
        op = L.op
        out = []
        if dtype != "f32":
            if len(shape) != 1:
                _err(f"integer input '{op.attrs['name']}' {shape}: SINGA v0.1's labels are [N]", op)
            kind = next((k for (k, bb) in self.shards if bb == shape[0]), "mnist")
            L.type, L.srcs, L.conn, L.shift = "kLabel", [self.shard(kind, shape[0], out)], [None], [0]
            return out + [L]
        if len(shape) == 4 and shape[3] == 1 and shape[1] == shape[2] == 28:
            L.type, L.srcs, L.conn, L.shift = "kMnist", [self.shard("mnist", shape[0], out)], [None], [0]
            L.confs.append("mnist_conf { norm_a: 1 norm_b: 0 }")
            return out + [L]
        if len(shape) == 4 and shape[3] == 3 and shape[1] == shape[2] <= 32:
            L.type, L.srcs, L.conn, L.shift = "kRGBImage", [self.shard("cifar10", shape[0], out)], [None], [0]
            if shape[1] != 32:
                L.confs.append(f"rgbimage_conf {{ cropsize: {shape[1]} }}")
            return out + [L]
        _err(f"input '{op.attrs['name']}' {shape}: a SINGA v0.1 input is an MNIST image [N, 28, 28, 1], a CIFAR-10 "
             f"image [N, H, H, 3] (H <= 32) or a label [N] (v0.1 reads the record shape from the data file)", op)


# ------------------------------------------------------------------------------------------ entry

def singa_version_of(net) -> str | None:
    """'0.1' or '0.3' when the network is one SINGA built (imported from a job.conf), else None."""
    m = re.match(r"SINGA (\S+) job", net.attrs.get("title") or "")
    if not m:
        return None
    return "0.1" if m.group(1) == "0.1" else "0.3"


def export_singa(module, ctx, name: str = "net") -> str:
    """SINGA job.conf text for one phase of a module (runs the default pipeline)."""
    from ..pipelines import inference
    inference(module, ctx=ctx)
    if ctx.diag.has_errors():
        raise NetcError(ctx.diag.diagnostics[:])
    nets = module.networks()
    if len(nets) != 1:
        _err(f"a SINGA job holds one net; this file has {len(nets)}", nets[1] if len(nets) > 1 else module)
    net = nets[0]
    ops = [op for op in net.regions[0].ops if op.name not in ("netc.output", "netc.layout")]
    if not ops:
        _err(f"network '{net.attrs.get('sym_name')}' has no layer in phase {ctx.phase}; a SINGA job needs at least "
             f"an input layer", net)
    version = singa_version_of(net)
    built_net = version is not None and _is_built(ops, version)
    unroll = 1
    if any(op.name == "netc.input" and op.attrs.get("batch_axis") == 1 for op in ops):   # a rolled recurrent net
        version, built_net = "0.3", version is not None
        layers, unroll = _rolled(ops, {p.attrs["sym_name"]: p for p in module.params()})
        K = 1
    elif built_net:
        built = _Built(module, ops, version)
        layers, K = built.layers()
        layers = built.settle_order(layers, K, version, name, ctx.phase, ctx.diag)
    else:
        version = "0.3"
        layers, K = _plain(ops, name, {p.attrs["sym_name"]: p for p in module.params()})
    opt = module.attrs.get("optimizer")
    why = _inexpressible(opt, version)
    if why:
        ctx.diag.warning(f"the file's optimizer ({opt.get('name')}) {why}: the job gets SINGA's default updater "
                         f"(kSGD at a fixed 0.01) instead", module.attr_loc("optimizer"), width=len("optimizer"))
    return _write(name, layers, K, version, ctx.phase, _updater(opt, version, built_net), unroll)


def _inexpressible(opt, version: str) -> str | None:
    """Why a module's optimizer has no SINGA updater computing the same updates, or None."""
    if not opt:
        return None
    if opt.get("name") not in _UPDATER_TYPES:
        return f"has no SINGA updater (SINGA's: {', '.join(_UPDATER_TYPES)})"
    if opt["name"] in ("adam", "adadelta", "adamax") and version == "0.1":
        return f"has no SINGA v0.1 updater ({_UPDATER_TYPES[opt['name']]} came in v0.3)"
    if opt.get("convention") != "singa" and not (opt["name"] == "sgd" and not opt.get("momentum")) \
            and opt["name"] != "adadelta":
        # (plain SGD and AdaDelta are the same arithmetic under both conventions)
        return ("follows torch's update formulas, which SINGA's updaters do not compute (the learning rate "
                "inside the momentum history, eps inside the square root); give it `convention: singa` to export "
                "it")
    if opt.get("clip_norm"):
        return "clips by the global norm, which SINGA's updaters do not"
    if opt["name"] in ("adam", "adadelta", "adamax") and opt.get("clip_high", 0.0) > opt.get("clip_low", 0.0):
        return f"clips by value, which SINGA's {_UPDATER_TYPES[opt['name']]} does not"
    return None


def _is_built(ops, version) -> bool:
    pat = _V1_NODE if version == "0.1" else _V2_NODE
    for op in ops:
        n = op.attrs.get("name", "")
        if not pat.match(n) and not (version != "0.1" and _GENERATED.match(n)):
            return False
    return True
