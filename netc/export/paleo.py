"""Writing a network as Paleo's JSON (shared/spec/paleo-format.md): `netc export --format paleo`."""
from __future__ import annotations

import json

from ..diagnostics import NetcError
from ..frontend.paleo import PALEO_TYPES

# netc op -> (Paleo type, {netc attr: Paleo key})
_TO_PALEO = {op: (t, {a: k for k, a in keys.items()}) for t, (op, keys) in PALEO_TYPES.items()}
_STRUCT = {"name", "parents"}


def export_error(msg, op=None):
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
            export_error(f"input '{name}' inside a block: Paleo has no such thing", op)
        if a.get("dtype", "f32") != "f32":
            export_error(f"input '{name}' is {a['dtype']}: Paleo tensors have no element type (only f32 inputs can be "
                 f"exported)", op)
        extra = set(a) - {"name", "shape", "dtype"}
        if extra:
            export_error(f"input '{name}' has attributes Paleo cannot express: {', '.join(sorted(extra))}", op)
        return {"type": "Input", "tensor": list(a["shape"]), "parents": []}
    if op.name in ("netc.block", "netc.parallel"):
        if in_block:
            export_error(f"block '{name}' is nested in a block: Paleo does not expand nested blocks", op)
        spec = {"type": "Block" if op.name == "netc.block" else "ModelParallel", "parents": list(a.get("parents", []))}
        if op.name == "netc.parallel":
            spec["splits"] = a.get("splits", 1)
        if "endpoint" in a:
            spec["endpoint"] = a["endpoint"]
        layers = {}
        for sub in op.regions[0].ops:
            sname = sub.attrs.get("name")
            if sname in layers:
                export_error(f"two layers named '{sname}' in block '{name}'", sub)
            layers[sname] = _paleo_layer(sub, in_block=True)
        spec["layers"] = layers
        return spec
    if op.name == "netc.opaque":
        t = a.get("type")
        if t in PALEO_TYPES or t in ("Input", "Block", "ModelParallel"):
            export_error(f"opaque layer '{name}' has type '{t}', which Paleo would not read as a pass-through", op)
        extra = set(a) - _STRUCT - {"type"}
        if extra:
            export_error(f"layer '{name}' ({t}) has attributes Paleo cannot express: {', '.join(sorted(extra))}", op)
        return {"type": t, "parents": list(a.get("parents", []))}
    if op.name not in _TO_PALEO:
        export_error(f"layer '{name}' is a {op.name.removeprefix('netc.')}, which Paleo cannot express "
             f"(Paleo types: {', '.join(PALEO_TYPES)})", op)
    t, keys = _TO_PALEO[op.name]
    spec = {"type": t, "parents": list(a.get("parents", []))}
    for k, v in a.items():
        if k in _STRUCT or k in ("invalid", "paleo_unchecked"):
            continue  # (paleo_unchecked: Paleo's own Reshape/Softmax rules are the unchecked ones)
        if k not in keys:
            export_error(f"attribute '{k}' of {t} layer '{name}' has no Paleo equivalent (Paleo reads: "
                 f"{', '.join(keys.values()) or 'nothing'})", op)
        if k == "padding" and isinstance(v, list) and len(v) == 4:
            export_error(f"{t} layer '{name}' pads [top, left, bottom, right] = {v}: Paleo pads [h, w] on both sides", op)
        spec[keys[k]] = _paleo_value(v)
    return spec


def export_paleo(module) -> str:
    """Paleo JSON text for an unresolved module (one network)."""
    params = list(module.params())
    if params:
        export_error("the file declares shared parameters (`param`), which Paleo cannot express", params[0])
    nets = module.networks()
    if len(nets) != 1:  # at the second network, or at the start of a file without one
        export_error(f"Paleo files hold exactly one network; this file has {len(nets)}", nets[1] if nets else module)
    net = nets[0]
    layers = {}
    for op in net.regions[0].ops:
        if op.name in ("netc.output", "netc.layout"):
            export_error(f"{'an output statement' if op.name == 'netc.output' else 'a layout'} cannot be written in Paleo "
                 f"(Paleo computes every layer reachable from 'data')", op)
        name = op.attrs.get("name")
        if name in layers:
            export_error(f"two layers named '{name}'", op)
        layers[name] = _paleo_layer(op)
    if "data" not in layers or layers["data"].get("type") != "Input":
        first = next((op for op in net.regions[0].ops if op.name == "netc.input"), net)
        export_error("Paleo needs its input layer to be named 'data'", first)
    inputs = [n for n, s in layers.items() if s.get("type") == "Input"]
    if len(inputs) > 1:
        second = [op for op in net.regions[0].ops if op.name == "netc.input"][1]
        export_error(f"Paleo networks have one input ('data'); this one has {len(inputs)}: {', '.join(inputs)}", second)
    doc = {}
    if net.attrs.get("title"):
        doc["name"] = net.attrs["title"]
    doc["layers"] = layers
    return json.dumps(doc, indent=4) + "\n"


# ------------------------------------------------------------------------------------------ layout
