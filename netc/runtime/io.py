"""Tensors in and out of files for `netc run`: .npy / .npz reading with user-facing errors, .npz
writing, and a one-line summary of a tensor (shape, dtype, statistics, checksum)."""
from __future__ import annotations

import zlib

import numpy as np
import torch

from ..diagnostics import NetcError


def _tensor(arr, what: str) -> torch.Tensor:
    if arr.dtype.kind not in "biuf":
        raise NetcError(f"{what}: arrays of dtype {arr.dtype} cannot be fed to a network (numbers only)")
    return torch.from_numpy(np.ascontiguousarray(arr))


def load_npy(path: str, what: str) -> torch.Tensor:
    try:
        arr = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise NetcError(f"{what}: no such file: '{path}'")
    except (OSError, ValueError, EOFError) as e:
        raise NetcError(f"{what}: cannot read '{path}' as a .npy array ({e})")
    if isinstance(arr, np.lib.npyio.NpzFile):
        arr.close()
        raise NetcError(f"{what}: '{path}' is an .npz archive; give one .npy array here (or use --inputs)")
    return _tensor(arr, f"{what} ('{path}')")


def load_npz(path: str, what: str) -> dict[str, torch.Tensor]:
    try:
        z = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise NetcError(f"{what}: no such file: '{path}'")
    except (OSError, ValueError, EOFError) as e:
        raise NetcError(f"{what}: cannot read '{path}' as an .npz archive ({e})")
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise NetcError(f"{what}: '{path}' is a single .npy array, not an .npz archive of named arrays")
    with z:
        try:
            return {k: _tensor(z[k], f"{what} '{k}' in '{path}'") for k in z.files}
        except (OSError, ValueError, EOFError) as e:
            raise NetcError(f"{what}: cannot read '{path}' ({e})")


def parse_input_specs(specs: list[str]) -> dict[str, torch.Tensor]:
    """--input name=path.npy (repeatable)."""
    out = {}
    for s in specs or []:
        name, eq, path = s.partition("=")
        if not eq or not name or not path:
            raise NetcError(f"--input expects NAME=PATH.npy, got '{s}'")
        if name in out:
            raise NetcError(f"input '{name}' is given twice")
        out[name] = load_npy(path, f"input '{name}'")
    return out


def save_npz(path: str, tensors: dict[str, torch.Tensor]):
    # NumPy has no bfloat16: bf16 outputs are saved as float32 (exact)
    arrays = {k: (v.float() if v.dtype == torch.bfloat16 else v).detach().cpu().numpy() for k, v in tensors.items()}
    try:
        with open(path, "wb") as f:
            np.savez(f, **arrays)
    except OSError as e:
        raise NetcError(f"cannot write '{path}': {e.strerror}")


def checksum(t: torch.Tensor) -> str:
    """crc32 of the tensor's bytes (C order): equal only for bit-identical results."""
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:   # NumPy has no bfloat16: the same bytes as int16
        t = t.view(torch.int16)
    return f"{zlib.crc32(t.numpy().tobytes()):08x}"


def describe(name: str, t: torch.Tensor, width: int = 0) -> str:
    d = t.detach().cpu().double()
    dt = str(t.dtype).replace("torch.", "")
    head = f"{name:{width}s}  {str(list(t.shape)):16s} {dt:8s}"
    if d.numel() == 0:
        return f"{head} (empty)  crc32={checksum(t)}"
    return (f"{head} mean={d.mean().item():+.6g} std={d.std(unbiased=False).item():.6g} "
            f"min={d.min().item():+.6g} max={d.max().item():+.6g} crc32={checksum(t)}")
