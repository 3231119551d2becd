"""`netc export`: write a network back in one of the seed formats.

* `paleo`  -- Paleo network JSON (shared/spec/paleo-format.md) from the *unresolved* IR a frontend
  produces: `netc.block` -> `Block`, `netc.parallel` -> `ModelParallel` (with `splits`, `endpoint`),
  parents as written (`@self`/`@all` kept), op attributes renamed back to Paleo's keys
  (`activation` -> `activation_fn`, `normalizer` -> `normalizer_fn`), opaque layers -> their
  original type (Paleo's Generic layer). Importing the result gives the same IR.
* `layout` -- the memory plan in Brainstorm's March-2015 layout format (netc.memory.layout), planned
  with contiguous concatenations, as `netc explain --layout` writes it.
* `singa`  -- a SINGA v0.3 job.conf (NetProto text) for nets SINGA can express: kRecordInput (one
  data input; NHWC [N, H, W, C] becomes store_conf batchsize N, shape C, H, W -- SINGA is NCHW),
  kCConvolution, kCPooling (MAX/AVG), kReLU/kSigmoid/kActivation (fused activations become their own
  layer named `<layer>_<activation>`), kLRN, kInnerProduct, kDropout, kConcate, kSoftmax,
  kSoftmaxLoss (its label source is the data layer: SINGA's labels travel with the records).

Anything a format cannot say is an error naming the layer, never a silent approximation.
"""
from __future__ import annotations

import json

from .diagnostics import NetcError
from .frontend.paleo import PALEO_TYPES

# netc op -> (Paleo type, {netc attr: Paleo key})
_TO_PALEO = {op: (t, {a: k for k, a in keys.items()}) for t, (op, keys) in PALEO_TYPES.items()}
_STRUCT = {"name", "parents"}


def _err(msg, op=None):
    raise NetcError(msg, op.loc if op is not None and op.loc is not None and op.loc.file != "<unknown>" else None)


# ------------------------------------------------------------------------------------------ paleo

def _paleo_value(v):
    if isinstance(v, tuple):
        return [_paleo_value(x) for x in v]
    if isinstance(v, list):
        return [_paleo_value(x) for x in v]
    return v


def _paleo_layer(op, in_block=False):
    a = op.attrs
    name = a.get("name")
    if op.name == "netc.input":
        if in_block:
            _err(f"input '{name}' inside a block: Paleo has no such thing", op)
        if a.get("dtype", "f32") != "f32":
            _err(f"input '{name}' is {a['dtype']}: Paleo tensors have no element type (only f32 inputs can be "
                 f"exported)", op)
        extra = set(a) - {"name", "shape", "dtype"}
        if extra:
            _err(f"input '{name}' has attributes Paleo cannot express: {', '.join(sorted(extra))}", op)
        return {"type": "Input", "tensor": list(a["shape"]), "parents": []}
    if op.name in ("netc.block", "netc.parallel"):
        if in_block:
            _err(f"block '{name}' is nested in a block: Paleo does not expand nested blocks", op)
        spec = {"type": "Block" if op.name == "netc.block" else "ModelParallel", "parents": list(a.get("parents", []))}
        if op.name == "netc.parallel":
            spec["splits"] = a.get("splits", 1)
        if "endpoint" in a:
            spec["endpoint"] = a["endpoint"]
        layers = {}
        for sub in op.regions[0].ops:
            sname = sub.attrs.get("name")
            if sname in layers:
                _err(f"two layers named '{sname}' in block '{name}'", sub)
            layers[sname] = _paleo_layer(sub, in_block=True)
        spec["layers"] = layers
        return spec
    if op.name == "netc.opaque":
        t = a.get("type")
        if t in PALEO_TYPES or t in ("Input", "Block", "ModelParallel"):
            _err(f"opaque layer '{name}' has type '{t}', which Paleo would not read as a pass-through", op)
        extra = set(a) - _STRUCT - {"type"}
        if extra:
            _err(f"layer '{name}' ({t}) has attributes Paleo cannot express: {', '.join(sorted(extra))}", op)
        return {"type": t, "parents": list(a.get("parents", []))}
    if op.name not in _TO_PALEO:
        _err(f"layer '{name}' is a {op.name.removeprefix('netc.')}, which Paleo cannot express "
             f"(Paleo types: {', '.join(PALEO_TYPES)})", op)
    t, keys = _TO_PALEO[op.name]
    spec = {"type": t, "parents": list(a.get("parents", []))}
    for k, v in a.items():
        if k in _STRUCT or k == "invalid":
            continue
        if k not in keys:
            _err(f"attribute '{k}' of {t} layer '{name}' has no Paleo equivalent (Paleo reads: "
                 f"{', '.join(keys.values()) or 'nothing'})", op)
        spec[keys[k]] = _paleo_value(v)
    return spec


def export_paleo(module) -> str:
    """Paleo JSON text for an unresolved module (one network)."""
    if any(True for _ in module.params()):
        _err("the file declares shared parameters (`param`), which Paleo cannot express")
    nets = module.networks()
    if len(nets) != 1:
        _err(f"Paleo files hold exactly one network; this file has {len(nets)}")
    net = nets[0]
    layers = {}
    for op in net.regions[0].ops:
        if op.name in ("netc.output", "netc.layout"):
            _err(f"{'an output statement' if op.name == 'netc.output' else 'a layout'} cannot be written in Paleo "
                 f"(Paleo computes every layer reachable from 'data')", op)
        name = op.attrs.get("name")
        if name in layers:
            _err(f"two layers named '{name}'", op)
        layers[name] = _paleo_layer(op)
    if "data" not in layers or layers["data"].get("type") != "Input":
        _err("Paleo needs its input layer to be named 'data'")
    inputs = [n for n, s in layers.items() if s.get("type") == "Input"]
    if len(inputs) > 1:
        _err(f"Paleo networks have one input ('data'); this one has {len(inputs)}: {', '.join(inputs)}")
    doc = {}
    if net.attrs.get("title"):
        doc["name"] = net.attrs["title"]
    doc["layers"] = layers
    return json.dumps(doc, indent=4) + "\n"


# ------------------------------------------------------------------------------------------ layout

def export_layout(module, ctx) -> str:
    from .memory.layout import LayoutError, write_layout
    from .passes.manager import DEFAULT_PIPELINE, PassManager
    ctx.options["plan_memory"] = {"reuse": True, "concat": "contiguous"}
    PassManager(DEFAULT_PIPELINE + ["plan-memory"]).run(module, ctx)
    plans = ctx.notes.get("memory_plan", {})
    if len(plans) != 1:
        _err(f"a layout describes one network; this file has {len(plans)}")
    try:
        doc = write_layout(next(iter(plans.values())))
    except LayoutError as e:
        raise NetcError(f"cannot write the plan as a layout: {e}")
    return json.dumps(doc, indent=1) + "\n"


# ------------------------------------------------------------------------------------------ singa

def _singa_pad(op, x, k, s, pad, axis, what):
    """SINGA's symmetric pad p for a netc padding, or an error if SINGA's (H + 2p - k) / s + 1 differs."""
    from .ops.conv import out_size
    o, p = out_size(x, k, s, pad, axis)
    if p < 0 or (x + 2 * p - k) // s + 1 != o:
        _err(f"{what} '{op.attrs['name']}': netc's {pad if isinstance(pad, str) else 'explicit'} padding gives "
             f"{o} outputs from {x} along {'HW'[axis]}, which SINGA's symmetric-pad formula cannot express", op)
    return p


def _fmt(v):
    if isinstance(v, float):
        r = repr(v)
        return r
    return str(v)


def export_singa(module, ctx, name: str = "net") -> str:
    from .passes.manager import DEFAULT_PIPELINE, PassManager
    PassManager(DEFAULT_PIPELINE).run(module, ctx)
    if ctx.diag.has_errors():
        raise NetcError(ctx.diag.diagnostics[:])
    nets = module.networks()
    if len(nets) != 1:
        _err(f"a SINGA job holds one net; this file has {len(nets)}")
    net = nets[0]
    ops = [op for op in net.regions[0].ops if op.name not in ("netc.output", "netc.layout")]
    label_inputs = {id(op.operands[1].owner) for op in ops if op.name == "netc.softmax_loss"}
    inputs = [op for op in ops if op.name == "netc.input" and id(op) not in label_inputs]
    if len(inputs) != 1:
        _err(f"SINGA nets read one data layer; this network has {len(inputs)} inputs that are not labels")
    data = inputs[0]
    for op in ops:
        if op.name == "netc.input" and id(op) in label_inputs and len(op.attrs["shape"]) > 2:
            _err(f"label input '{op.attrs['name']}' {op.attrs['shape']}: SINGA labels are one class index per "
                 f"record", op)
    lname: dict[int, str] = {}
    used: set = set()

    def sname(op):
        n = op.attrs.get("name", "x").replace("@", "_")
        while n in used:
            n += "_"
        used.add(n)
        return n

    out = [f'name: "{name}"', "train_steps: 1000", "disp_freq: 100",
           "train_one_batch { alg: kBP }",
           "updater { type: kSGD learning_rate { type: kFixed base_lr: 0.01 } }",
           "neuralnet {"]

    def layer(nm, typ, srcs, conf="", params=()):
        body = [f'name: "{nm}"', f"type: {typ}"] + [f'srclayers: "{s}"' for s in srcs]
        if conf:
            body.append(conf)
        body += [f'param {{ name: "{p}" init {{ type: kGaussian std: 0.01 }} }}' for p in params]
        out.append("  layer { " + " ".join(body) + " }")

    def act(op, nm, a):
        if a in (None, "none"):
            return nm
        n2 = sname_str(f"{nm}_{a}")
        if a == "relu":
            layer(n2, "kReLU", [nm])
        elif a == "sigmoid":
            layer(n2, "kSigmoid", [nm])
        elif a == "tanh":
            layer(n2, "kActivation", [nm], "activation_conf { type: TANH }")
        else:
            _err(f"activation '{a}' of '{op.attrs['name']}' cannot be written in SINGA", op)
        return n2

    def sname_str(n):
        while n in used:
            n += "_"
        used.add(n)
        return n

    lname[id(data)] = sname(data)
    for op in ops:
        a = op.attrs
        shp = lambda v: v.type.shape  # noqa: E731
        srcs = [lname[id(v.owner)] for v in op.operands if id(v.owner) in lname]
        if op.name == "netc.input":
            if id(op) in label_inputs:
                lname[id(op)] = lname[id(data)]
                continue
            s = list(a["shape"])
            if len(s) == 4:
                rec = [s[3], s[1], s[2]]
            elif len(s) >= 2:
                rec = s[1:]
            else:
                _err(f"input '{a['name']}' {s} has no batch dimension", op)
            nm = lname[id(op)]
            layer(nm, "kRecordInput", [], "store_conf { backend: \"kvfile\" path: \"train_data.bin\" batchsize: "
                  f"{s[0]} " + " ".join(f"shape: {d}" for d in rec) + " }")
            continue
        if op.name == "netc.softmax_loss":
            srcs = [lname[id(op.operands[0].owner)], lname[id(data)]]
        nm = sname(op)
        n_out = nm
        if op.name == "netc.conv2d":
            x = shp(op.operands[0])
            kh, kw, ci, co = a["filter"]
            if a.get("splits"):
                _err(f"'{a['name']}' splits its filters (model parallelism): write the unexpanded net", op)
            if a.get("normalizer", "none") != "none":
                _err(f"'{a['name']}' has a fused {a['normalizer']}, which SINGA v0.3 convolutions cannot express", op)
            sh, sw = a.get("strides", [1, 1, 1, 1])[1:3]
            pad = a.get("padding", "SAME")
            ph = _singa_pad(op, x[1], kh, sh, pad, 0, "convolution")
            pw = _singa_pad(op, x[2], kw, sw, pad, 1, "convolution")
            geo = (f"kernel: {kh} pad: {ph} stride: {sh}" if (kh, ph, sh) == (kw, pw, sw) else
                   f"kernel_x: {kw} kernel_y: {kh} pad_x: {pw} pad_y: {ph} stride_x: {sw} stride_y: {sh}")
            params = [f"{nm}_w"] + ([f"{nm}_b"] if a.get("bias", True) else [])
            layer(nm, "kCConvolution", srcs, f"convolution_conf {{ num_filters: {co} {geo} }}", params)
            n_out = act(op, nm, a.get("activation"))
        elif op.name in ("netc.maxpool", "netc.avgpool"):
            x = shp(op.operands[0])
            _, kh, kw, _ = a["ksize"]
            sh, sw = a["strides"][1:3]
            pad = a.get("padding", "VALID")
            ph = _singa_pad(op, x[1], kh, sh, pad, 0, "pooling")
            pw = _singa_pad(op, x[2], kw, sw, pad, 1, "pooling")
            geo = (f"kernel: {kh} pad: {ph} stride: {sh}" if (kh, ph, sh) == (kw, pw, sw) else
                   f"kernel_x: {kw} kernel_y: {kh} pad_x: {pw} pad_y: {ph} stride_x: {sw} stride_y: {sh}")
            pool = "MAX" if op.name == "netc.maxpool" else "AVG"
            layer(nm, "kCPooling", srcs, f"pooling_conf {{ pool: {pool} {geo} }}")
        elif op.name == "netc.inner_product":
            if not a.get("bias", True):
                _err(f"'{a['name']}': SINGA's kInnerProduct always has a bias", op)
            if a.get("normalizer", "none") != "none":
                _err(f"'{a['name']}' has a fused {a['normalizer']}, which SINGA v0.3 cannot express", op)
            layer(nm, "kInnerProduct", srcs, f"innerproduct_conf {{ num_output: {a['num_outputs']} }}",
                  [f"{nm}_w", f"{nm}_b"])
            n_out = act(op, nm, a.get("activation"))
        elif op.name == "netc.relu":
            ns = a.get("negative_slope", 0.0)
            layer(nm, "kReLU", srcs, f"relu_conf {{ negative_slope: {_fmt(ns)} }}" if ns else "")
        elif op.name == "netc.sigmoid":
            layer(nm, "kSigmoid", srcs)
        elif op.name == "netc.tanh":
            layer(nm, "kActivation", srcs, "activation_conf { type: TANH }")
        elif op.name == "netc.dropout":
            layer(nm, "kDropout", srcs, f"dropout_conf {{ dropout_ratio: {_fmt(round(1 - a.get('dropout_keep_prob', 0.5), 12))} }}")
        elif op.name == "netc.lrn":
            layer(nm, "kLRN", srcs, f"lrn_conf {{ local_size: {a.get('local_size', 5)} alpha: {_fmt(a.get('alpha', 1e-4))} "
                                    f"beta: {_fmt(a.get('beta', 0.75))} knorm: {_fmt(a.get('knorm', 1.0))} }}")
        elif op.name == "netc.concat":
            r = len(shp(op.operands[0]))
            d = a.get("dim", -1)
            d = d + r if d < 0 else d
            nchw = {0: 0, 1: 2, 2: 3, 3: 1}[d] if r == 4 else d
            layer(nm, "kConcate", srcs, f"concate_conf {{ concate_dim: {nchw} num_concates: {len(srcs)} }}")
        elif op.name == "netc.softmax":
            layer(nm, "kSoftmax", srcs)
        elif op.name == "netc.softmax_loss":
            layer(nm, "kSoftmaxLoss", srcs, "softmaxloss_conf { topk: 1 }")
        else:
            _err(f"layer '{a.get('name')}' is a {op.name.removeprefix('netc.')}, which netc cannot write as a SINGA "
                 f"v0.3 layer (supported: conv, pooling, relu/sigmoid/tanh, lrn, inner product, dropout, concat, "
                 f"softmax, softmax loss)", op)
        lname[id(op)] = n_out
    out.append("}")
    out.append("cluster { nworker_groups: 1 nserver_groups: 1 nworkers_per_group: 1 workspace: \"workspace\" }")
    return "\n".join(out) + "\n"


FORMATS = ("paleo", "singa", "layout")


def export(path: str, fmt: str, diag, batch: int = 1, phase: str = "train", options: dict | None = None) -> str:
    from .frontend import load
    from .frontend.paleo import network_name
    from .passes.manager import PassContext
    module = load(path, diag, batch, options=options)
    if diag.has_errors():
        raise NetcError(diag.diagnostics[:])
    if fmt == "paleo":
        return export_paleo(module)
    ctx = PassContext(diag=diag, phase=phase)
    if fmt == "layout":
        return export_layout(module, ctx)
    if fmt == "singa":
        return export_singa(module, ctx, network_name(path))
    raise NetcError(f"unknown export format '{fmt}' (use {', '.join(FORMATS)})")
