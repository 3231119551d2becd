"""Paleo network JSON -> netc IR (shared/spec/paleo-format.md).

The file becomes the same unresolved IR the .nd frontend produces (layers with parent names,
`netc.block` and `netc.parallel` regions), so blocks, model-parallel expansion, shapes and costs
go through the very passes and op definitions .nd files use; only Paleo's vocabulary and its
quirks are handled here. Diagnostics point at file:line:col and carry the JSON path.

Quirks that define Paleo's numbers are reproduced; where Paleo is silently wrong or lenient,
netc follows its numbers and says so in a warning (unknown types are pass-throughs, nested blocks
are ignored, order-dependent block shortcuts, layers its graph walk would drop, duplicate keys).
"""
from __future__ import annotations

import os
import re

from ..diagnostics import SOURCES, DiagnosticEngine, Loc, NetcError
from ..ir.core import UNRANKED, Module, Operation, Region
from ..ops import lookup
from .jsonloc import load_json, path_join

# Paleo's layer types (§3.1) -> netc op, and the keys each one reads (Paleo key -> netc attribute).
PALEO_TYPES = {
    "Convolution": ("netc.conv2d", {"filter": "filter", "strides": "strides", "padding": "padding",
                                    "splits": "splits", "activation_fn": "activation",
                                    "normalizer_fn": "normalizer"}),
    "Deconvolution": ("netc.deconv2d", {"filter": "filter", "strides": "strides", "padding": "padding",
                                        "output_shape": "output_shape", "activation_fn": "activation"}),
    "Pooling": ("netc.maxpool", {"ksize": "ksize", "strides": "strides", "padding": "padding"}),
    "AvgPool": ("netc.avgpool", {"ksize": "ksize", "strides": "strides", "padding": "padding"}),
    "UpSampling2D": ("netc.upsample2d", {"ksize": "ksize"}),
    "Dropout": ("netc.dropout", {"dropout_keep_prob": "dropout_keep_prob"}),
    "Concatenate": ("netc.concat", {"dim": "dim"}),
    "Elementwise": ("netc.elementwise", {}),
    "Reshape": ("netc.reshape", {"output_shape": "output_shape"}),
    "Softmax": ("netc.softmax", {"num_classes": "num_classes"}),
    "Sigmoid": ("netc.sigmoid", {}),
    "InnerProduct": ("netc.inner_product", {"num_outputs": "num_outputs"}),
}
# Keys Paleo reads for no op, or ignores, and that real files carry: accepted silently.
_IGNORED = {"type", "parents", "activation_fn", "normalizer_fn", "bias", "device", "name", "splits"}
_REQUIRED = {"Convolution": ("filter", "strides", "padding"), "Deconvolution": ("filter", "strides", "padding",
                                                                                "output_shape"),
             "Pooling": ("ksize", "strides", "padding"), "AvgPool": ("ksize", "strides", "padding"),
             "UpSampling2D": ("ksize",), "Dropout": ("dropout_keep_prob",), "Concatenate": ("dim",),
             "Reshape": ("output_shape",), "InnerProduct": ("num_outputs",)}


def is_paleo(data) -> bool:
    return isinstance(data, dict) and isinstance(data.get("layers"), dict)


def network_name(path: str) -> str:
    stem = os.path.splitext(os.path.basename(path))[0] or "net"
    s = re.sub(r"[^A-Za-z0-9_]", "_", stem)
    return s if s[0].isalpha() or s[0] == "_" else "net_" + s


class _Importer:
    def __init__(self, file: str, locs: dict, diag: DiagnosticEngine):
        self.file, self.locs, self.diag = file, locs, diag

    def loc(self, path: str) -> Loc:
        return self.locs.get(path) or Loc(self.file, 1, 1, path)

    def error(self, msg, path):
        return self.diag.error(msg, self.loc(path))

    def warn(self, msg, path, once=None):
        return self.diag.warning(msg, self.loc(path), once_key=once)

    def module(self, data, name: str) -> Module:
        if not isinstance(data, dict):
            raise NetcError("a Paleo network file is a JSON object with a \"layers\" object", self.loc("$"))
        if "layers" not in data:
            raise NetcError("a Paleo network file needs a \"layers\" object", self.loc("$"))
        if not isinstance(data["layers"], dict):
            raise NetcError("\"layers\" must be an object mapping layer names to layer specs",
                            self.loc("$.layers"))
        layers = data["layers"]
        if "data" not in layers:
            self.error("Paleo needs the root input layer to be named 'data' (its graph walk starts there)",
                       "$.layers")
        ops = []
        block_names = [n for n, s in layers.items() if isinstance(s, dict) and s.get("type") in ("Block",
                                                                                                  "ModelParallel")]
        seen_blocks = set()
        for lname, spec in layers.items():
            path = path_join("$.layers", lname)
            op = self.layer(lname, spec, path, top=True)
            if op is None:
                continue
            if isinstance(spec, dict) and spec.get("type") in ("Block", "ModelParallel"):
                seen_blocks.add(lname)
            for p in (spec.get("parents") or []) if isinstance(spec, dict) else []:
                if isinstance(p, str) and p in block_names and p not in seen_blocks:
                    self.warn(f"'{lname}' names block '{p}' before the block appears in the file; netc resolves "
                              f"it to the block's endpoint, but Paleo's expansion is order-sensitive and would "
                              f"fail", path_join(path, "parents"))
            ops.append(op)
        net = Operation("netc.network", attrs={"sym_name": name}, regions=[Region(ops)], loc=self.loc("$"))
        if isinstance(data.get("name"), str):
            net.attrs["title"] = data["name"]
        m = Module([net], loc=Loc(self.file, 1, 1))
        m.attrs["source"] = self.file
        return m

    def _parents(self, name, spec, path):
        if "parents" not in spec:
            self.error(f"layer '{name}' has no \"parents\" (Paleo requires the key, even if empty)", path)
            return None
        ps = spec["parents"]
        ppath = path_join(path, "parents")
        if not isinstance(ps, list) or not all(isinstance(p, str) for p in ps):
            self.error(f"\"parents\" of '{name}' must be a list of layer names", ppath)
            return None
        if len(set(ps)) != len(ps):
            dup = next(p for p in ps if ps.count(p) > 1)
            self.warn(f"layer '{name}' lists parent '{dup}' twice: Paleo's graph walk would silently omit it "
                      f"and everything after it; netc builds it", ppath)
        return ps

    def layer(self, name, spec, path, top=False, in_block=False):
        if not isinstance(spec, dict):
            self.error(f"layer '{name}' must be an object", path)
            return None
        if "type" not in spec:
            self.error(f"layer '{name}' has no \"type\"", path)
            return None
        t = spec["type"]
        tpath = path_join(path, "type")
        if not isinstance(t, str):
            self.error(f"\"type\" of '{name}' must be a string", tpath)
            return None
        if "@" in name:
            self.error(f"layer name '{name}' contains '@', which Paleo reserves for split indices", path)
        parents = self._parents(name, spec, path)
        if parents is None:
            return None
        loc = self.loc(path)
        attr_locs = {"name": loc, "type": self.loc(tpath)}
        for i, _ in enumerate(parents):
            attr_locs[f"parent{i}"] = self.loc(path_join(path_join(path, "parents"), i))
        base = {"name": name, "parents": list(parents)}
        if t in ("Block", "ModelParallel") and top:
            return self.block(name, spec, path, t, base, attr_locs)
        if t in ("Block", "ModelParallel"):
            self.warn(f"Paleo does not expand a {t} nested in a block: '{name}' becomes a pass-through and its "
                      f"layers are ignored, as in Paleo", tpath)
            return self._opaque(t, base, attr_locs, loc)
        if t == "Input":
            tensor = spec.get("tensor")
            if not (isinstance(tensor, list) and tensor and all(isinstance(d, int) and not isinstance(d, bool)
                                                               for d in tensor)):
                self.error(f"Input '{name}' needs \"tensor\": a list of integers (its shape)",
                           path_join(path, "tensor") if "tensor" in spec else path)
                return None
            if parents:
                self.warn(f"Input '{name}' ignores its parents (as Paleo does)", path_join(path, "parents"))
            op = Operation("netc.input", result_types=[UNRANKED],
                           attrs={"name": name, "shape": list(tensor), "dtype": "f32"}, loc=loc)
            op.attr_locs = {"name": loc, "shape": self.loc(path_join(path, "tensor"))}
            return op
        if t not in PALEO_TYPES:
            self.warn(f"layer type '{t}' is unknown to Paleo: it is a pass-through with no parameters and 0 FLOPs "
                      f"(Paleo's Generic layer)", tpath, once=("paleo-generic", t))
            return self._opaque(t, base, attr_locs, loc)
        opname, keys = PALEO_TYPES[t]
        attrs = dict(base)
        for k in _REQUIRED.get(t, ()):
            if k not in spec:
                self.error(f"{t} '{name}' needs \"{k}\"", path)
                attrs["invalid"] = True
        for k, v in spec.items():
            kpath = path_join(path, k)
            if k in keys:
                a = keys[k]
                if k in ("activation_fn", "normalizer_fn"):
                    if v is None:
                        continue
                    opdef = lookup(opname)
                    choices = opdef.attrs[a].choices
                    if v not in choices:
                        self.warn(f"{k} {v!r} of '{name}' is not one netc knows ({', '.join(choices[1:])}); "
                                  f"ignored, as Paleo ignores it for costs", kpath)
                        continue
                if k == "num_classes" and v is None:
                    continue
                if k == "splits" and not top:
                    continue  # inside a ModelParallel block the block's splits apply
                attrs[a] = v
                attr_locs[a] = self.loc(kpath)
            elif k not in _IGNORED and k not in ("tensor", "layers", "endpoint"):
                self.warn(f"key \"{k}\" is not read by Paleo for {t} layers; ignored", kpath,
                          once=("paleo-key", t, k))
        op = Operation(opname, result_types=[UNRANKED], attrs=attrs, loc=loc)
        op.attr_locs = attr_locs
        opdef = lookup(opname)
        for key, msg, hint in opdef.check_attrs(op.attrs):
            d = self.diag.error(msg, attr_locs.get(key, loc) if key else loc)
            if hint:
                d.note(hint)
            op.attrs["invalid"] = True
        if t == "Sigmoid":
            self.warn(f"Paleo's Sigmoid outputs [N, 1] whatever its input; netc's Sigmoid is elementwise "
                      f"(the same for [N, 1] inputs)", tpath, once=("paleo-sigmoid",))
        return op

    def _opaque(self, t, base, attr_locs, loc):
        op = Operation("netc.opaque", result_types=[UNRANKED], attrs=dict(base, type=t), loc=loc)
        op.attr_locs = attr_locs
        return op

    def block(self, name, spec, path, t, base, attr_locs):
        layers = spec.get("layers")
        lpath = path_join(path, "layers")
        if not isinstance(layers, dict):
            self.error(f"{t} '{name}' needs \"layers\": an object of sublayers", lpath if "layers" in spec else path)
            return None
        attrs = dict(base)
        if t == "ModelParallel":
            splits = spec.get("splits", 1)
            if not isinstance(splits, int) or isinstance(splits, bool) or splits < 1:
                self.error(f"\"splits\" of '{name}' must be a positive integer", path_join(path, "splits"))
                splits = 1
            attrs["splits"] = splits
        if "endpoint" in spec:
            ep = spec["endpoint"]
            if not isinstance(ep, str):
                self.error(f"\"endpoint\" of '{name}' must be a sublayer name", path_join(path, "endpoint"))
            else:
                attrs["endpoint"] = ep
                attr_locs["endpoint"] = self.loc(path_join(path, "endpoint"))
        subs = []
        for sname, sspec in layers.items():
            op = self.layer(sname, sspec, path_join(lpath, sname), top=False, in_block=True)
            if op is not None:
                if op.name == "netc.input":
                    self.error(f"an Input inside block '{name}' is never expanded by Paleo", path_join(lpath, sname))
                    continue
                subs.append(op)
        op = Operation("netc.block" if t == "Block" else "netc.parallel", attrs=attrs, regions=[Region(subs)],
                       loc=self.loc(path))
        op.attr_locs = attr_locs
        return op


def import_paleo(text: str, file: str = "<input>", diag: DiagnosticEngine | None = None, data=None,
                 locs=None, dups=None) -> Module:
    SOURCES.add(file, text)
    own = diag is None
    diag = diag or DiagnosticEngine()
    if data is None:
        data, locs, dups = load_json(text, file)
    imp = _Importer(file, locs, diag)
    for path, loc, first in dups or ():
        diag.warning(f"duplicate key {path}: the last one wins (as in Paleo)", loc).note("first given here", first)
    m = imp.module(data, network_name(file))
    if own and diag.has_errors():
        raise NetcError(diag.diagnostics)
    return m
