"""Brainstorm's parameter files as netc's parameters.

Brainstorm's `Network.save_as_hdf5` writes an HDF5 file with two datasets: `description` (the network's JSON
description, its `architecture` inside) and `parameters` (the flat parameter buffer: every layer's parameters
are views of it, laid out by Brainstorm's create_layout). read_hdf5 reads the two; netc_params cuts the buffer
by the same layout (frontend/brainstorm_structure.py hub_layout, which equals create_layout) and gives each
view netc's name, shape and meaning:

  FullyConnected    W (out, in) -> <layer>.weight [in, out] (or <layer>.flat.weight where the importer flattens
                    steps or a multi-axis size), bias -> .bias
  Convolution2D     W (filters, kh, kw, in) -> <layer>.weight [kh, kw, in, filters] (HWIO), bias -> .bias
  BatchNorm         gamma -> .scale, beta -> .shift; mu (Brainstorm keeps the negated running mean) ->
                    .running_mean = -mu; sigma (the running sqrt(var + epsilon)) -> .running_var = sigma^2 - epsilon
  Lstm, Recurrent, Clockwork, ClockworkLstm
                    the same names and shapes (netc's recurrent ops take Brainstorm's)

Reading HDF5 needs h5py (`pip install 'netc[brainstorm]'`); netc says so when it is missing.
"""
from __future__ import annotations

import json

import numpy as np

from ..diagnostics import Loc, NetcError

RECURRENT_SAME = ("Lstm", "Recurrent", "Clockwork", "ClockworkLstm")


def need_h5py():
    try:
        import h5py
    except ImportError:
        raise NetcError("reading a Brainstorm parameter file (HDF5) needs the h5py package: pip install "
                        "'netc[brainstorm]' (or pip install h5py)") from None
    return h5py


def read_hdf5(path: str, what: str = "--params") -> tuple[dict, np.ndarray]:
    """(architecture, flat parameter buffer) of a file Brainstorm's Network.save_as_hdf5 wrote."""
    h5py = need_h5py()
    try:
        with h5py.File(path, "r") as f:
            missing = [k for k in ("description", "parameters") if k not in f]
            if missing:
                raise NetcError(f"{what}: '{path}' is an HDF5 file without {' and '.join(missing)}: not one Brainstorm's "
                                f"Network.save_as_hdf5 wrote", Loc(path))
            raw = f["description"][()]
            flat = np.asarray(f["parameters"][()], dtype=np.float64).reshape(-1)
    except OSError as e:
        raise NetcError(f"{what}: cannot read '{path}' as HDF5 ({e})", Loc(path)) from None
    try:
        desc = json.loads(raw.decode() if isinstance(raw, (bytes, np.bytes_)) else str(raw))
    except ValueError as e:
        raise NetcError(f"{what}: the description in '{path}' is not JSON ({e})", Loc(path)) from None
    arch = desc.get("architecture") if isinstance(desc, dict) else None
    if not isinstance(arch, dict):
        raise NetcError(f"{what}: the description in '{path}' has no architecture", Loc(path))
    return arch, flat


def _views(arch: dict, path: str, what: str) -> dict:
    """{layer: {view: (start, stop, shape)}} of the parameters, by Brainstorm's layout."""
    from .brainstorm_structure import StructureError, hub_layout
    try:
        layout = hub_layout(arch, "$")["layout"]
    except StructureError as e:
        raise NetcError(f"{what}: Brainstorm cannot lay out the architecture in '{path}': {e.msg}", Loc(path)) from None
    out = {}
    for lname in arch:
        node = (layout.get(lname) or {}).get("parameters") or {}
        out[lname] = {k: (v["@slice"][0], v["@slice"][1], tuple(v["@shape"])) for k, v in node.items()
                      if isinstance(v, dict) and "@slice" in v}
    return out


def netc_params(arch: dict, flat: np.ndarray, path: str = "<input>", what: str = "--params") -> dict:
    """netc's parameters and running statistics ({name: float64 array}) from Brainstorm's flat buffer."""
    from .brainstorm import SEQUENCE
    views = _views(arch, path, what)
    need = max((stop for v in views.values() for _, stop, _ in v.values()), default=0)
    if flat.size != need:
        raise NetcError(f"{what}: '{path}' holds {flat.size} parameter values; its architecture's layout has {need}",
                        Loc(path))
    time_major = any(s.get("@type") in SEQUENCE for s in arch.values() if isinstance(s, dict))
    out = {}
    for lname, vs in views.items():
        if not vs:
            continue
        spec = arch[lname]
        t = spec["@type"]
        v = {k: flat[a:b].reshape(shape) for k, (a, b, shape) in vs.items()}
        if t == "FullyConnected":
            size = spec.get("size")
            flat_name = time_major or (isinstance(size, list) and len(size) != 1)
            base = f"{lname}.flat." if flat_name else f"{lname}."
            out[base + "weight"] = v["W"].reshape(v["W"].shape[0], -1).T.copy()
            out[base + "bias"] = v["bias"].reshape(-1)
        elif t == "Convolution2D":
            out[f"{lname}.weight"] = v["W"].transpose(1, 2, 3, 0).copy()
            out[f"{lname}.bias"] = v["bias"]
        elif t == "BatchNorm":
            eps = spec.get("epsilon", 1.0e-5)
            out[f"{lname}.scale"], out[f"{lname}.shift"] = v["gamma"], v["beta"]
            out[f"{lname}.running_mean"] = -v["mu"]
            out[f"{lname}.running_var"] = v["sigma"] ** 2 - eps
        elif t in RECURRENT_SAME:
            out.update({f"{lname}.{k}": a for k, a in v.items()})
        else:
            raise NetcError(f"{what}: layer '{lname}' ({t}) in '{path}' has parameters {sorted(v)} that netc does "
                            f"not know how to read", Loc(path))
    return out
