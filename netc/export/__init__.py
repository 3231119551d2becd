"""`netc export`: write a network back in one of the seed formats.

* `paleo`  -- Paleo network JSON (shared/spec/paleo-format.md) from the *unresolved* IR a frontend
  produces: `netc.block` -> `Block`, `netc.parallel` -> `ModelParallel` (with `splits`, `endpoint`),
  parents as written (`@self`/`@all` kept), op attributes renamed back to Paleo's keys
  (`activation` -> `activation_fn`, `normalizer` -> `normalizer_fn`), opaque layers -> their
  original type (Paleo's Generic layer). Importing the result gives the same IR.
* `layout` -- the memory plan in Brainstorm's March-2015 layout format (netc/export/layout.py), planned
  with contiguous concatenations, as `netc explain --layout` writes it.
* `hub-layout` -- a Brainstorm architecture's layout as Brainstorm's own `create_layout` writes it (its
  `@`-key hub format: every layer's inputs, outputs, parameters, internals and their deltas, in hubs;
  netc/frontend/brainstorm_structure.py), with the architecture and the hub table beside it, the form
  `netc check` reads and checks against the architecture.
* `singa`  -- a SINGA job.conf (NetProto text) for one phase (netc/export/singa.py). A net SINGA
  built (imported from a job.conf) is written back, in its own SINGA version, as the config that
  builds it again: unrolling, partitioning, parameter names and share_from recovered, so importing
  the result gives the same IR. Other nets become SINGA v0.3 jobs with one layer per netc layer:
  kRecordInput (one data input; NHWC [N, H, W, C] becomes store_conf batchsize N, shape C, H, W --
  SINGA is NCHW), kCConvolution, kCPooling (MAX/AVG), kReLU/kSigmoid/kActivation (fused
  activations become their own layer named `<layer>_<activation>`), kLRN, kInnerProduct, kDropout,
  kConcate, kSlice, kSoftmax, kBM, kArgSort, kAccuracy, kGRU (one step), kSoftmaxLoss (its label
  source is the data layer: SINGA's labels travel with the records), kEuclideanLoss.

* `onnx`   -- an ONNX model of the network's inference form with its parameters (netc/export/onnx.py;
  each op's OpDef.onnx rule; `netc export` writes it in cli._export_onnx, bytes rather than text).

Anything a format cannot say is an error naming the layer, never a silent approximation.
"""
from __future__ import annotations

import json
import re

from ..diagnostics import SOURCES, NetcError
from .paleo import export_error, export_paleo


def export_layout(module, ctx) -> str:
    from ..pipelines import layout as plan_for_layout
    from .layout import LayoutError, write_layout
    plan_for_layout(module, ctx)
    plans = ctx.notes.get("memory_plan", {})
    if len(plans) != 1:  # at the second network, or at the start of a file without one
        nets = module.networks()
        export_error(f"a layout describes one network; this file has {len(plans)}", nets[1] if len(nets) > 1 else module)
    try:
        doc = write_layout(next(iter(plans.values())))
    except LayoutError as e:
        raise NetcError(f"cannot write the plan as a layout: {e}")
    return json.dumps(doc, indent=1) + "\n"


def export_hub_layout(path: str, diag) -> str:
    """Brainstorm's create_layout of the Brainstorm architecture in `path` (bare or wrapped as
    {"architecture": ...}); a structure Brainstorm cannot lay out is a located error."""
    from ..diagnostics import Loc
    from ..frontend.brainstorm import is_brainstorm
    from ..frontend.brainstorm_structure import StructureError, hub_layout
    from ..frontend.jsonloc import load_json, nearest_loc
    with open(path, encoding="utf-8") as f:
        text = f.read()
    SOURCES.add(path, text)
    data, locs, _ = load_json(text, path) if path.endswith(".json") else (None, {}, ())
    if not is_brainstorm(data):
        raise NetcError("a hub layout is Brainstorm's layout of a Brainstorm architecture; this file is not one "
                        "(for netc's own memory plan, use --format layout)", Loc(path, 1, 1, "$"))
    wrapped = isinstance(data.get("architecture"), dict)
    arch, root = (data["architecture"], "$.architecture") if wrapped else (data, "$")
    try:
        doc = hub_layout(arch, root)
    except StructureError as e:
        loc = locs.get(e.path) or nearest_loc(locs, e.path) or Loc(path, 1, 1)
        raise NetcError(e.msg, Loc(loc.file, loc.line, loc.col, e.path))
    from ..version import __version__
    out = {"generated_by": f"netc {__version__} export --format hub-layout (Brainstorm's create_layout, 8f1fc88)",
           "layer_order": doc["layer_order"], "architecture": arch, "hubs": doc["hubs"], "layout": doc["layout"]}
    return json.dumps(out, indent=1) + "\n"


# ------------------------------------------------------------------------------------------ singa

def export_singa(module, ctx, name: str = "net") -> str:
    """A SINGA job.conf for the phase ctx.phase (netc/export/singa.py: nets SINGA built are written
    back as the config that builds them, other nets one layer per netc layer)."""
    from .singa import export_singa as write
    return write(module, ctx, name)


FORMATS = ("paleo", "singa", "layout", "hub-layout")


def export(path: str, fmt: str, diag, batch: int = 1, phase: str = "train", options: dict | None = None) -> str:
    from ..frontend import load
    from ..frontend.paleo import network_name
    from ..passes.manager import PassContext
    if fmt == "hub-layout":
        return export_hub_layout(path, diag)
    module = load(path, diag, batch, options=options)
    if diag.has_errors():
        raise NetcError(diag.diagnostics[:])
    if fmt in ("paleo", "layout") and module.attrs.get("optimizer"):
        what = "Paleo's network JSON" if fmt == "paleo" else "a Brainstorm layout"
        loc = module.attr_loc("optimizer")
        word = re.match(r"\w*", (SOURCES.line(loc.file, loc.line) or "")[max(loc.col - 1, 0):]).group(0)
        diag.warning(f"{what} has no place for the file's optimizer ({module.attrs['optimizer'].get('name')}): it "
                     f"is not exported (the SINGA export writes it as the job's updater)", loc,
                     width=max(1, len(word)))     # the keyword there: `optimizer`, or SINGA's `updater`
    if fmt == "paleo":
        return export_paleo(module)
    ctx = PassContext(diag=diag, phase=phase)
    if fmt == "layout":
        return export_layout(module, ctx)
    if fmt == "singa":
        return export_singa(module, ctx, network_name(path))
    raise NetcError(f"unknown export format '{fmt}' (use {', '.join(FORMATS)})")
