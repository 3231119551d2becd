"""Parameter files and the packed parameter blob of a compiled network.

Files: `.npz` (numpy's archive of named arrays) and `.safetensors` (through the safetensors
package, the format's reference implementation: an 8-byte header length, a JSON header of names,
dtypes, shapes and byte ranges, then the bytes).

The blob: a compiled .so keeps every parameter in one region of its device arena, at the byte
offsets its manifest lists (`parameters`: name, shape, dtype, offset, bytes; `shares` marks a
share_from alias, which has no storage of its own). pack() lays parameters out there; netc_set_params
copies the blob in one go, and `netc compile --params/--embed-params` embeds it in the library.
Random parameters are the reference executor's (reference.random_param, seeded by name), so a
compiled network and `netc run --reference` with the same seed compute with the same values.
"""
from __future__ import annotations

import json
import os
import re

import numpy as np
import torch

from ..diagnostics import Diagnostic, Loc, NetcError, did_you_mean

# manifest dtypes (the IR's) -> torch
TORCH_DTYPES = {"f64": torch.float64, "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
                "i64": torch.int64, "i32": torch.int32, "i16": torch.int16, "i8": torch.int8, "u8": torch.uint8}
# the torch dtypes netc writes to .safetensors (those with a name in the format)
_ST_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
              torch.int8, torch.uint8, torch.bool)


def _shape(s) -> str:
    return "[" + ", ".join(str(d) for d in s) + "]"


def _dt(t) -> str:
    return str(t).replace("torch.", "")


# ------------------------------------------------------------------------------------- files

def read_params(path: str, what: str = "--params") -> dict[str, torch.Tensor]:
    """Named tensors from an .npz or .safetensors file (chosen by the extension, else by content), or from a
    Brainstorm parameter file (HDF5: frontend/brainstorm_params.py, its views as netc's parameters)."""
    path = os.fspath(path)
    from .io import Arrays, load_npz
    kind = _file_kind(path, what)
    if kind == "safetensors":
        return Arrays(read_safetensors(path, what)[0], source=path)
    if kind == "hdf5":
        from ..frontend.brainstorm_params import netc_params, read_hdf5
        arch, flat = read_hdf5(path, what)
        return Arrays({k: torch.from_numpy(v) for k, v in netc_params(arch, flat, path, what).items()}, source=path)
    return load_npz(path, what)


def write_params(path: str, tensors: dict, metadata: dict | None = None) -> None:
    """Write named tensors as .safetensors or .npz (by the extension)."""
    path = os.fspath(path)
    if path.endswith(".safetensors"):
        return write_safetensors(path, tensors, metadata)
    if path.endswith(".npz"):   # (numpy has no bfloat16: save_npz writes those as float32, exactly)
        from .io import save_npz
        return save_npz(path, tensors)
    raise NetcError(f"cannot write '{path}': parameter files are .npz or .safetensors")


def save_tensors(path: str, tensors: dict) -> None:
    """Named tensors netc writes (trained parameters and state, gradients, outputs): a .safetensors
    file when the name says so, else an .npz archive (what read_params reads back by content)."""
    if os.fspath(path).endswith(".safetensors"):
        return write_safetensors(os.fspath(path), tensors)
    from .io import save_npz
    return save_npz(path, tensors)


def _file_kind(path: str, what: str) -> str:
    if path.endswith(".safetensors"):
        return "safetensors"
    if path.endswith(".npz"):
        return "npz"
    try:
        with open(path, "rb") as f:
            head = f.read(9)
    except FileNotFoundError:
        raise NetcError(f"{what}: no such file: '{path}'")
    except OSError as e:
        raise NetcError(f"{what}: cannot read '{path}': {e.strerror}")
    if head[:4] == b"PK\x03\x04" or head[:4] == b"PK\x05\x06":
        return "npz"
    if len(head) == 9 and head[8:9] == b"{":
        return "safetensors"
    if head[:8] == b"\x89HDF\r\n\x1a\n":
        return "hdf5"
    raise NetcError(f"{what}: '{path}' is neither an .npz archive, a .safetensors file nor a Brainstorm parameter "
                    f"file (HDF5)")


def read_safetensors(path: str, what: str = "--params") -> tuple[dict[str, torch.Tensor], dict]:
    """(tensors by name in the file's order, the header's __metadata__), read by the safetensors
    package (the format's reference implementation, which validates the header, the dtypes, the
    shapes against the byte ranges and that ranges neither overlap nor leave gaps). Any problem is a
    NetcError naming the file (and the tensor, where the package says which)."""
    from safetensors import SafetensorError, safe_open
    try:
        with open(path, "rb"):
            pass
    except FileNotFoundError:
        raise NetcError(f"{what}: no such file: '{path}'")
    except IsADirectoryError:
        raise NetcError(f"{what}: '{path}' is a directory")
    except OSError as e:
        raise NetcError(f"{what}: cannot read '{path}': {e.strerror}")
    try:
        with safe_open(path, framework="pt") as f:
            meta = f.metadata() or {}
            out = {k: f.get_tensor(k) for k in f.offset_keys()}
    except (SafetensorError, ValueError, TypeError, OSError) as e:
        reason = str(e).replace("Error while deserializing header: ", "")
        m = re.search(r"tensor `([^`]*)`", reason)
        jpath = _jpath(m.group(1)) if m else None
        if jpath is None:
            jpath, detail = _which_entry(path)
            reason += f" ({detail})" if detail else ""
        raise NetcError(Diagnostic("error", f"{what}: '{os.path.basename(path)}' is not a valid .safetensors file: "
                                            f"{reason}", Loc(path, path=jpath))) from None
    return out, dict(meta)


def _jpath(name: str) -> str:
    return "$" + (f".{name}" if name.replace("_", "a").replace(".", "a").isalnum() else f"[{json.dumps(name)}]")


def _which_entry(path: str) -> tuple:
    """(JSON path, what is wrong) of the first header entry whose byte range does not fit its dtype
    and shape, or (None, None): only to name the culprit when the package's message does not (the
    package has already validated and refused the file)."""
    sizes = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
    try:
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(min(n, 100_000_000)))
        for name, e in header.items():
            if name == "__metadata__" or e.get("dtype") not in sizes:
                continue
            numel = 1
            for d in e["shape"]:
                numel *= d
            need, (b, end) = numel * sizes[e["dtype"]], e["data_offsets"]
            if end - b != need:
                return _jpath(name) + ".data_offsets", f"'{name}': {_shape(e['shape'])} {e['dtype']} needs {need} " \
                                                       f"bytes, data_offsets give {end - b}"
    except (OSError, ValueError, TypeError, AttributeError, KeyError):
        pass
    return None, None


def write_safetensors(path: str, tensors: dict, metadata: dict | None = None) -> None:
    """Named tensors (any strides; copied contiguous) through the safetensors package."""
    from safetensors.torch import save_file
    out = {}
    for name, t in tensors.items():
        if not torch.is_tensor(t):
            t = torch.as_tensor(np.asarray(t))
        if t.dtype not in _ST_DTYPES:
            raise NetcError(f"cannot write '{name}' to '{path}': dtype {_dt(t.dtype)} has no safetensors name")
        out[name] = t.detach().cpu().contiguous().clone()    # own storage: the package refuses aliases
    try:
        save_file(out, path, metadata={str(k): str(v) for k, v in (metadata or {}).items()} or None)
    except OSError as e:
        raise NetcError(f"cannot write '{path}': {e.strerror}")


# ------------------------------------------------------------------------------------- the blob

def torch_dtype(name: str) -> torch.dtype:
    try:
        return TORCH_DTYPES[name]
    except KeyError:
        raise NetcError(f"dtype {name} has no torch equivalent") from None


def random_params(manifest: dict, seed: int = 0, names=None) -> dict[str, torch.Tensor]:
    """The reference executor's initial values of every parameter with storage, in its manifest dtype:
    its recorded `initializer` (ops/initializers.py, a SINGA param's init), else
    reference.random_param (seeded by name, drawn by the parameter's role)."""
    from ..ops.initializers import init_tensor
    from .reference import random_param
    out = {}
    for p in manifest.get("parameters", []):
        if "shares" in p or (names is not None and p["name"] not in names):
            continue
        t = init_tensor(p["name"], tuple(p["shape"]), p.get("initializer"), seed)
        if t is None:
            t = random_param(p["name"], tuple(p["shape"]), p.get("role", "weight"), seed, torch.float64)
        out[p["name"]] = t.to(torch_dtype(p["dtype"]))
    return out


def _convert(t, p: dict, what: str, problems: list):
    """`t` as parameter p's dtype and shape, or None after recording why not."""
    name, want = p["name"], torch_dtype(p["dtype"])
    if not torch.is_tensor(t):
        try:
            t = torch.as_tensor(np.asarray(t))
        except (TypeError, ValueError, RuntimeError) as e:
            problems.append(f"parameter '{name}'{what}: cannot use a {type(t).__name__} as a tensor ({e})")
            return None
    if tuple(t.shape) != tuple(p["shape"]):
        problems.append(f"parameter '{name}'{what} has shape {_shape(t.shape)}, but the network expects "
                        f"{_shape(p['shape'])}")
        return None
    if t.dtype == torch.bool or t.is_complex() or (not want.is_floating_point and t.is_floating_point()
                                                   and not torch.equal(t, t.round())):
        problems.append(f"parameter '{name}'{what} has dtype {_dt(t.dtype)}; the network stores {p['dtype']}")
        return None
    return t.detach().to(device="cpu", dtype=want).contiguous()


def check_names(manifest: dict, given, what: str = "") -> list[str]:
    """Problems with names in `given` that are no parameter of the network (with a suggestion)."""
    known = [p["name"] for p in manifest.get("parameters", [])]
    out = []
    for k in given:
        if k not in known:
            hint = did_you_mean(k, known)
            listed = ", ".join(known[:6]) + (f", ... ({len(known)} in all)" if len(known) > 6 else "")
            out.append(f"unknown parameter '{k}'{what}" + (f"; did you mean '{hint}'?" if hint else "")
                       + f" (the network's parameters: {listed})")
    return out


def complete(manifest: dict, given: dict | None, seed: int | None = None, what: str = "") -> dict[str, torch.Tensor]:
    """Every parameter with storage, by name, in its manifest dtype: the given ones checked (unknown
    names, shapes, dtypes; a share_from alias must equal its owner), the missing ones random from
    `seed`, or an error listing them when seed is None. All problems are reported at once."""
    from .io import source_of
    src = source_of(given)
    given = dict(given or {})
    params = manifest.get("parameters", [])
    problems = check_names(manifest, given, what)
    owners = [p for p in params if "shares" not in p]
    missing = [p["name"] for p in owners if p["name"] not in given]
    if missing and seed is None:
        problems.append(f"missing parameter{'s' if len(missing) > 1 else ''}{what}: "
                        + ", ".join(repr(m) for m in missing[:8]) + (f" and {len(missing) - 8} more"
                                                                      if len(missing) > 8 else ""))
    out = {}
    rnd = random_params(manifest, seed, set(missing)) if missing and seed is not None else {}
    for p in owners:
        if p["name"] in given:
            t = _convert(given[p["name"]], p, what, problems)
            if t is not None:
                out[p["name"]] = t
        elif p["name"] in rnd:
            out[p["name"]] = rnd[p["name"]]
    for p in params:
        if "shares" in p and p["name"] in given:
            t = _convert(given[p["name"]], p, what, problems)
            o = out.get(p["shares"])
            if t is not None and o is not None and not torch.equal(t.reshape(-1), o.reshape(-1)):
                problems.append(f"parameter '{p['name']}'{what} is an alias of '{p['shares']}' (share_from); "
                                f"give the owner's value, not a different one for the alias")
    if problems:
        raise NetcError([Diagnostic("error", m, Loc(src) if src else None) for m in problems])
    return out


def pack(manifest: dict, given: dict | None = None, seed: int | None = None, what: str = "") -> np.ndarray:
    """The parameter blob (uint8, the manifest's param_bytes) of `given` (+ random ones from `seed`)."""
    return layout(manifest, complete(manifest, given, seed, what))


def layout(manifest: dict, values: dict) -> np.ndarray:
    """The blob of complete() values: each parameter's bytes at its manifest offset (aliases have none)."""
    blob = np.zeros(int(manifest.get("param_bytes", 0)), dtype=np.uint8)
    for p in manifest.get("parameters", []):
        if "shares" in p:
            continue
        raw = values[p["name"]].reshape(-1).view(torch.uint8).numpy()
        if raw.size != p["bytes"] or p["offset"] + raw.size > blob.size:
            raise AssertionError(f"manifest entry of '{p['name']}' is inconsistent: {raw.size} bytes at "
                                 f"{p['offset']} (declared {p['bytes']}, blob {blob.size})")
        blob[p["offset"]:p["offset"] + raw.size] = raw
    return blob


def unpack(manifest: dict, blob) -> dict[str, torch.Tensor]:
    """The parameters (aliases included, as views of their owners) held in a blob (a uint8 numpy
    array, torch tensor or bytes-like; the tensors share its memory where it is writable)."""
    if torch.is_tensor(blob):
        raw = blob
    elif isinstance(blob, np.ndarray):
        raw = torch.from_numpy(blob)
    else:
        raw = torch.frombuffer(bytearray(blob), dtype=torch.uint8)
    out = {}
    for p in manifest.get("parameters", []):
        if "shares" not in p:
            out[p["name"]] = raw[p["offset"]:p["offset"] + p["bytes"]].view(torch_dtype(p["dtype"])).reshape(p["shape"])
    return with_aliases(manifest, out)


def with_aliases(manifest: dict, values: dict) -> dict[str, torch.Tensor]:
    """complete() values plus every share_from alias, as a view of its owner in the alias's shape."""
    out = dict(values)
    for p in manifest.get("parameters", []):
        if "shares" in p:
            out[p["name"]] = out[p["shares"]].reshape(p["shape"])
    return out


# -- what `netc compile` embeds and what `netc run` feeds: parameters from files, for a library or an inference


def packer(given, seed):
    """What compile_module embeds: the parameters `given` (by name) and random ones from `seed` for
    the rest, packed in the library's layout (netc.runtime.params.pack); None: nothing embedded.
    The packer takes the layout and, optionally, defaults for parameters `given` lacks."""
    if given is None and seed is None:
        return None
    return lambda layout, defaults=None: pack(layout, {**(defaults or {}), **(given or {})}, seed)



def with_state_init(packer):
    """A packer that gives optimizer state and running statistics (training libraries: manifest
    entries with `state`) their initial value where the parameters given do not hold them."""
    def pack(layout):
        import torch
        init = {p["name"]: torch.full(tuple(p["shape"]), p["init"]) for p in layout["parameters"] if "state" in p}
        return packer(layout, init)
    return pack



def embedded_params(args):
    """--params FILE as tensors (checked against the network by compile_module), {} for --embed-params
    alone, None when nothing is embedded."""
    if args.params:
        from .params import read_params
        return read_params(args.params, "--params")
    return {} if args.embed_params else None



def params_for_run(module, params, path, diag):
    """--params written by `netc run --train -o`: its optimizer state and running statistics are
    left out (and batch norms folded with the statistics), with a note."""
    from .train import params_for_inference
    params, dropped = params_for_inference(module, params)
    if dropped:
        diag.warning(f"--params: {path} holds training state, left out for inference: {len(dropped)} tensor"
                     f"{'s' if len(dropped) != 1 else ''} ({', '.join(sorted(dropped)[:4])}"
                     f"{', ...' if len(dropped) > 4 else ''}); batch norms use their running statistics")
    return params
