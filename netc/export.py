"""`netc export`: write a network back in one of the seed formats.

* `paleo`  -- Paleo network JSON (shared/spec/paleo-format.md) from the *unresolved* IR a frontend
  produces: `netc.block` -> `Block`, `netc.parallel` -> `ModelParallel` (with `splits`, `endpoint`),
  parents as written (`@self`/`@all` kept), op attributes renamed back to Paleo's keys
  (`activation` -> `activation_fn`, `normalizer` -> `normalizer_fn`), opaque layers -> their
  original type (Paleo's Generic layer). Importing the result gives the same IR.
* `layout` -- the memory plan in Brainstorm's March-2015 layout format (netc.memory.layout), planned
  with contiguous concatenations, as `netc explain --layout` writes it.
* `singa`  -- a SINGA job.conf (NetProto text) for one phase (netc/export_singa.py). A net SINGA
  built (imported from a job.conf) is written back, in its own SINGA version, as the config that
  builds it again: unrolling, partitioning, parameter names and share_from recovered, so importing
  the result gives the same IR. Other nets become SINGA v0.3 jobs with one layer per netc layer:
  kRecordInput (one data input; NHWC [N, H, W, C] becomes store_conf batchsize N, shape C, H, W --
  SINGA is NCHW), kCConvolution, kCPooling (MAX/AVG), kReLU/kSigmoid/kActivation (fused
  activations become their own layer named `<layer>_<activation>`), kLRN, kInnerProduct, kDropout,
  kConcate, kSlice, kSoftmax, kBM, kArgSort, kAccuracy, kGRU (one step), kSoftmaxLoss (its label
  source is the data layer: SINGA's labels travel with the records), kEuclideanLoss.

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
        if k in _STRUCT or k in ("invalid", "paleo_unchecked"):
            continue  # (paleo_unchecked: Paleo's own Reshape/Softmax rules are the unchecked ones)
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
    ctx.options["plan_memory"] = {"reuse": True, "concat": "contiguous", "fusion": "none"}
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

def export_singa(module, ctx, name: str = "net") -> str:
    """A SINGA job.conf for the phase ctx.phase (netc/export_singa.py: nets SINGA built are written
    back as the config that builds them, other nets one layer per netc layer)."""
    from .export_singa import export_singa as write
    return write(module, ctx, name)


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
