"""Typed reading of a job.conf's protobuf text (prototext.py does the syntax) against a release's
schema, with hints for misspelled fields and enums, and which release (mode) a file is written
for (detect_version)."""
from __future__ import annotations

import math

from ...diagnostics import Diagnostic, Loc, NetcError, did_you_mean
from .. import prototext as pt

from .schema import INT_RANGE, MISSING, V_LABEL, VERSIONS, EnumSpec, FieldSpec, Msg, MsgSpec, Schema, load_schema

# ------------------------------------------------------------------------------------------
# Reading a message tree against a schema

_FIELD_HINTS = {
    ("JobProto", "net"): "did you mean 'neuralnet'? (`net { }` appears only in the pseudo-configs of "
                         "SINGA's documentation)",
    ("NetProto", "net"): "did you mean 'neuralnet'? (and it belongs at the top level of the job)",
    ("LayerProto", "srclayer"): "did you mean 'srclayers'? (the field is plural and repeated)",
    ("LayerProto", "location"): "(documented in SINGA's docs but not present in any SINGA release)",
    ("LayerProto", "locationid"): "(`locationid` existed only in pre-0.1 SINGA, May-July 2015; no release has it)",
    ("JobProto", "model"): "(the `model { }` wrapper is the July-2015 pre-0.1 JobProto; from SINGA v0.1 on "
                           "its fields -- name, train_steps, updater, neuralnet, ... -- are written at the top level)",
    ("LayerProto", "partition_type"): "(pre-0.1 SINGA; releases use 'partition_dim')",
    ("NetProto", "partition_type"): "(pre-0.1 SINGA; releases use 'partition_dim')",
    ("ParamProto", "init_method"): "(pre-0.1 SINGA; releases write `init { type: ... }`)",
    ("ParamProto", "learning_rate_multiplier"): "(pre-0.1 SINGA; releases use 'lr_scale')",
    ("ParamProto", "weight_decay_multiplier"): "(pre-0.1 SINGA; releases use 'wd_scale')",
    ("UpdaterProto", "base_learning_rate"): "(the pre-0.1 ModelProto updater; releases write "
                                            "`learning_rate { base_lr: ... }`)",
    ("UpdaterProto", "learning_rate_change_method"): "(the pre-0.1 ModelProto updater; releases write "
                                                     "`learning_rate { type: ... }`)",
    ("UpdaterProto", "base_lr"): "(pre-0.1 SINGA; releases write `learning_rate { base_lr: ... }`)",
    ("UpdaterProto", "lr_change"): "(pre-0.1 SINGA; releases write `learning_rate { type: ... }`)",
    ("JobProto", "test_frequency"): "(pre-0.1 SINGA; releases use 'test_freq')",
    ("JobProto", "display_frequency"): "(pre-0.1 SINGA; releases use 'disp_freq')",
    ("JobProto", "alg"): "(pre-0.1 SINGA; releases write `train_one_batch { alg: ... }`)",
}
_PARAM_TO_CONF = {"inner_product_param": "innerproduct_conf", "data_param": "sharddata_conf",
                  "softmaxloss_param": "softmaxloss_conf", "tanh_param": "(kSTanh has no conf)"}
_ENUM_HINTS = {
    ("LayerType", "kData"): "'kData' is not a LayerType (it exists only as a user_type string of the rnnlm "
                            "example); data layers are kRecordInput (v0.2+) or kShardData",
    ("LayerType", "kImage"): "'kImage' is not a LayerType (SINGA's documentation pseudo-configs use it); "
                             "image parsing is kRGBImage / kImagePreprocess",
    ("LayerType", "kHidden"): "'kHidden' is not a LayerType (it exists only as a user_type string of the rnnlm "
                              "example)",
    ("LayerType", "kVisLayer"): "did you mean 'kRBMVis'?",
    ("LayerType", "kHidLayer"): "did you mean 'kRBMHid'?",
    ("LayerType", "kTanh"): "did you mean 'kSTanh'? ('kTanh' is pre-0.1 SINGA)",
    ("LayerType", "kMnistImage"): "did you mean 'kMnist'? ('kMnistImage' is pre-0.1 SINGA)",
    ("AlgType", "kBackPropagation"): "did you mean 'kBP'? ('kBackPropagation' is pre-0.1 SINGA)",
    ("AlgType", "kContrastiveDivergence"): "did you mean 'kCD'? ('kContrastiveDivergence' is pre-0.1 SINGA)",
    ("PoolMethod", "AVE"): "did you mean 'AVG'? ('AVE' is pre-0.1 SINGA)",
}


class ConfReader:
    """Converts a prototext tree into Msg objects against a Schema, collecting diagnostics."""

    MAX_DEPTH = 100

    def __init__(self, schema: Schema, version: str, file: str, ext_loader=None):
        self.schema, self.version, self.file = schema, version, file
        self.errors: list[Diagnostic] = []
        self.ext_loader = ext_loader  # callable(name, loc) -> bool (True if something new was loaded)

    def error(self, msg, loc, width=1, note=None):
        d = Diagnostic("error", msg, loc, width=width)
        if note:
            d.note(*note) if isinstance(note, tuple) else d.note(note)
        self.errors.append(d)
        return d

    def convert(self, tree: pt.Message, spec: MsgSpec, where: Loc, depth=0, fname=None) -> Msg:
        if depth > self.MAX_DEPTH:
            self.error("messages nested too deeply", where)
            return Msg(spec, where)
        m = Msg(spec, where)
        n_err = len(self.errors)
        for f in tree.fields:
            if f.ext:
                fs = self._ext_field(spec, f)
                if fs is None:
                    continue
                key = "[" + fs.full_name + "]"
            else:
                fs = spec.fields.get(f.name)
                if fs is None:
                    self._unknown_field(spec, f)
                    continue
                key = f.name
            if fs.kind == "message":
                if not f.is_message:
                    self.error(f"field '{f.name}' of {spec.short} is a message ({fs.type.short}); "
                               f"write '{f.name} {{ ... }}'", f.value.loc)
                    continue
                v = self.convert(f.value, fs.type, f.loc, depth + 1, f.name)
            else:
                if f.is_message:
                    self.error(f"field '{f.name}' of {spec.short} is a scalar ({fs.describe()}), "
                               f"not a message", f.value.loc)
                    continue
                v = self._scalar(fs, f, spec)
                if v is MISSING:
                    continue
            if fs.repeated:
                m.vals.setdefault(key, []).append(v)
                m.locs.setdefault(key, []).append(f.loc)
                if fs.kind != "message":
                    m.vlocs.setdefault(key, []).append(f.value.loc)
            elif key in m.vals:
                self.error(f"field '{f.name}' of {spec.short} is given twice (it is not repeated)", f.loc,
                           width=len(f.name), note=("first given here", m.locs[key]))
            else:
                m.vals[key] = v
                m.locs[key] = f.loc
                if fs.kind != "message":
                    m.vlocs[key] = f.value.loc
        if len(self.errors) == n_err:  # a misspelt required field is reported once, as unknown
            what = f"'{fname}' ({spec.short})" if fname else f"the job ({spec.short})"
            for name, fs in spec.fields.items():
                if fs.label == "required" and name not in m.vals:
                    self.error(f"missing required field '{name}' in {what}", where,
                               width=len(fname) if fname else 1)
        return m

    def _unknown_field(self, spec: MsgSpec, f: pt.Field):
        hint = _FIELD_HINTS.get((spec.short, f.name))
        msg = f"unknown field '{f.name}' in {spec.short}"
        notes = []
        if hint is None and f.name.endswith("_param"):
            conf = _PARAM_TO_CONF.get(f.name, f.name[:-6] + "_conf")
            hint = f"(`*_param` is the pre-0.1 spelling, May-June 2015; releases use '{conf}')"
        if hint is None:
            cand = did_you_mean(f.name, spec.fields)
            if cand:
                hint = f"did you mean '{cand}'?"
        other = self._other_versions_with_field(spec.short, f.name)
        if other:
            notes.append(f"'{f.name}' is a field of {spec.short} in {', '.join(V_LABEL[v] for v in other)}; "
                         f"this file is read as {V_LABEL[self.version]} (pass version=... to change)")
            if f.name == "ratio" or f.name == "ngpu_per_group":
                notes[-1] += "; it exists only on the 2016 development branch (version='dev')"
        d = self.error(msg + (("; " if hint.startswith("did") else " ") + hint if hint else ""), f.loc,
                       width=len(f.name) + (2 if f.ext else 0))
        for n in notes:
            d.note(n)

    def _other_versions_with_field(self, short, name):
        out = []
        for v in VERSIONS:
            if v == self.version:
                continue
            spec = load_schema(v).messages.get("singa." + short)
            if spec is not None and name in spec.fields:
                out.append(v)
        return out

    def _ext_field(self, spec: MsgSpec, f: pt.Field):
        if not spec.ext_ranges:
            self.error(f"{spec.short} has no extensions, but '[{f.name}]' is given", f.loc)
            return None
        for attempt in (0, 1):
            exts = self.schema.extensions.get(spec.name, {})
            fs = exts.get(f.name) or exts.get(f.name.lstrip("."))
            if fs is not None:
                return fs
            if attempt == 0 and self.ext_loader is not None:
                try:
                    if not self.ext_loader(f):
                        break
                except NetcError as e:
                    e.diagnostics[0].note(f"loaded because of the extension '[{f.name}]' used here", f.loc)
                    raise
        loaded = ", ".join(self.schema.loaded) or "none"
        d = self.error(f"unknown extension '[{f.name}]' of {spec.short}: no loaded .proto file declares it "
                       f"(loaded: {loaded})", f.loc, width=len(f.name) + 2)
        d.note("pass the user's .proto (e.g. examples/rnnlm/rnnlm.proto) with extension_protos=[...], or "
               "put it next to the job file")
        return None

    def _scalar(self, fs: FieldSpec, f: pt.Field, spec: MsgSpec):
        sc: pt.Scalar = f.value
        kind = fs.kind
        where = f"field '{f.name}' ({fs.describe()})"
        if kind == "int":
            if sc.kind == "int":
                lo, hi = INT_RANGE[fs.type]
                if not lo <= sc.value <= hi:
                    self.error(f"value {sc.text} is out of range for {where}", sc.loc, len(sc.text))
                    return MISSING
                return sc.value
            self.error(f"expected an integer for {where}, found {_found(sc)}", sc.loc, len(sc.text))
            return MISSING
        if kind == "float":
            if sc.kind in ("int", "float"):
                return float(sc.value)
            if sc.kind == "ident" and sc.value.lower() in ("inf", "infinity", "nan"):
                v = float("nan") if sc.value.lower() == "nan" else math.inf
                return -v if sc.negative else v
            self.error(f"expected a number for {where}, found {_found(sc)}", sc.loc, len(sc.text))
            return MISSING
        if kind == "bool":
            if sc.kind == "ident" and not sc.negative and sc.value in ("true", "True", "t", "false", "False", "f"):
                return sc.value in ("true", "True", "t")
            if sc.kind == "int" and not sc.negative and sc.value in (0, 1):
                return sc.value == 1
            self.error(f"expected true or false for {where}, found {_found(sc)}", sc.loc, len(sc.text))
            return MISSING
        if kind == "string":
            if sc.kind == "string":
                return sc.value
            self.error(f"expected a quoted string for {where}, found {_found(sc)}", sc.loc, len(sc.text))
            return MISSING
        # enum
        e: EnumSpec = fs.type
        if sc.kind == "ident" and not sc.negative:
            if sc.value in e.values:
                return sc.value
            self._unknown_enum(e, sc, f)
            return MISSING
        if sc.kind == "int":
            if sc.value in e.numbers:
                return e.numbers[sc.value]
            self.error(f"{sc.value} is not a value of enum {e.short} ({where})", sc.loc, len(sc.text))
            return MISSING
        if sc.kind == "string" and e.short == "LayerType":
            d = self.error(f"expected a {e.short} identifier for {where}, found the string {sc.text}", sc.loc,
                           len(sc.text))
            d.note("quoted layer types (`type: \"kConvolution\"`) are the pre-0.1 dialect (May-June 2015); "
                   "releases write the identifier unquoted" + (f": type: {sc.value}" if sc.value in e.values else ""))
            return MISSING
        self.error(f"expected a {e.short} value for {where}, found {_found(sc)}", sc.loc, len(sc.text))
        return MISSING

    def _unknown_enum(self, e: EnumSpec, sc: pt.Scalar, f: pt.Field):
        hint = _ENUM_HINTS.get((e.short, sc.value))
        if hint is None:
            cand = did_you_mean(sc.value, e.values)
            hint = f"did you mean '{cand}'?" if cand else None
        msg = f"unknown {e.short} value '{sc.value}' for field '{f.name}'"
        d = self.error(msg + ("; " + hint if hint else ""), sc.loc, len(sc.text))
        other = [v for v in VERSIONS if v != self.version
                 and sc.value in getattr(load_schema(v).enums.get(e.name), "values", {})]
        if other:
            d.note(f"'{sc.value}' is a {e.short} value in {', '.join(V_LABEL[v] for v in other)}; this file "
                   f"is read as {V_LABEL[self.version]} (pass version=... to change)")


def _found(sc: pt.Scalar) -> str:
    kind = {"int": "the integer", "float": "the number", "string": "the string", "ident": "the identifier"}[sc.kind]
    return f"{kind} {sc.text}"


# ------------------------------------------------------------------------------------------
# Version detection

# Field names and identifiers that only some dialects have. Detection rules, in order:
#  1. pre-0.1 (ModelProto, May-July 2015) if the file quotes a layer type (`type: "kConvolution"`),
#     uses a `*_param` conf, wraps the job in `model { }`, or uses another pre-0.1-only field
#     (partition_type, locationid, init_method, learning_rate_multiplier, ...);
#  2. otherwise v0.2+ if it uses anything v0.1 does not have (`include`, store_conf, unrolling,
#     gpu, cuDNN/RNN/record layer types, ...): "dev" if it uses a dev-branch-only field
#     (store_conf.ratio, cluster.ngpu_per_group), "0.2" if it uses a v0.2-only feature (prefetch
#     inside a v0.2+ file), else "0.3" (v0.3 accepts every v0.2 file except those);
#  3. otherwise v0.1 (exclude + kShardData and parser layers, or nothing version-specific).
_PRE01_FIELDS = {"partition_type", "locationid", "partitionid", "init_method", "learning_rate_multiplier",
                 "weight_decay_multiplier", "share_param", "share_ary", "learning_rate_change_method",
                 "base_learning_rate", "display_frequency", "test_frequency", "sublayers", "model",
                 "lr_change", "datablob", "param_type", "checkpoint_frequency", "vis_step", "pcd_k"}
_V02_FIELDS = {"include", "store_conf", "unroll_len", "unroll_conn_type", "shift", "share_src_blobs", "gpu",
               "char_rnn_conf", "onehot_conf", "activation_conf", "dummy_conf", "softmax_conf", "gru_conf",
               "embedding_conf", "argsort_conf", "rnn_dummy_conf", "bm_conf", "clip_low", "clip_high",
               "kernel_x", "kernel_y", "pad_x", "pad_y", "stride_x", "stride_y", "layer_group",
               "num_concates", "num_slices", "adadelta_conf", "adam_conf", "adammax_conf"}
_V03_ONLY = {"bm_conf", "prefetching", "kActivation", "kBM", "kCudnnBM"}
_DEV_ONLY = {"ratio", "ngpu_per_group"}


def detect_version(tree: pt.Message) -> tuple[str, str]:
    """(version, reason) for a parsed job file; see the rules above."""
    v, reason, _ = detect_dialect(tree)
    return v, reason


def detect_dialect(tree: pt.Message):
    names: dict[str, Loc] = {}
    idents: dict[str, Loc] = {}
    quoted_type = None
    batchsize_twice = None
    stack = [(tree, "")]
    while stack:
        msg, parent = stack.pop()
        seen_bs = 0
        for f in msg.fields:
            if f.ext:  # names inside user extensions say nothing about SINGA's schema
                continue
            names.setdefault(f.name, f.loc)
            if f.is_message:
                stack.append((f.value, f.name))
            else:
                v = f.value
                if v.kind == "ident":
                    idents.setdefault(v.value, v.loc)
                elif (v.kind == "string" and f.name == "type" and parent in ("layer", "sublayers")
                      and quoted_type is None):
                    quoted_type = f.loc
                if parent == "store_conf" and f.name == "batchsize":
                    seen_bs += 1
                    if seen_bs == 2:
                        batchsize_twice = f.loc

    def why(what, loc):
        return f"{what} at line {loc.line}" if loc and loc.line else what

    if quoted_type is not None:
        return "pre0.1", why("a quoted layer type", quoted_type), quoted_type
    for n, loc in names.items():
        if n.endswith("_param") or n in _PRE01_FIELDS:
            return "pre0.1", why(f"'{n}'", loc), loc
    v2 = [(n, loc) for n, loc in names.items() if n in _V02_FIELDS]
    v2_types = load_schema("0.3").enum("LayerType").values.keys() - load_schema("0.1").enum("LayerType").values.keys()
    v2 += [(i, loc) for i, loc in idents.items() if i in v2_types or i in ("kBPTT", "kUnrollOneToAll")]
    if not v2:
        return "0.1", "no v0.2+ feature (include, store_conf, unrolling, v0.2 layer types) is used", None
    first = min(v2, key=lambda x: (x[1].line, x[1].col))
    for n, loc in names.items():
        if n in _DEV_ONLY:
            return "dev", why(f"the dev-branch field '{n}'", loc), loc
    for n, loc in list(names.items()) + list(idents.items()):
        if n in _V03_ONLY:
            return "0.3", why(f"'{n}'", loc), loc
    if batchsize_twice is not None:
        return "0.3", why("a repeated store_conf.batchsize", batchsize_twice), batchsize_twice
    for n in ("prefetch_conf", "kPrefetch"):
        if n in names or n in idents:
            loc = names.get(n) or idents.get(n)
            return "0.2", why(f"'{n}' (removed in v0.3) together with {first[0]}", loc), loc
    return "0.3", why(f"'{first[0]}'", first[1]), first[1]
