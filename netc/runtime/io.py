"""Tensors in and out of files for `netc run`: .npy / .npz reading with user-facing errors, .npz
writing, and a one-line summary of a tensor (shape, dtype, statistics, checksum)."""
from __future__ import annotations

import contextlib
import zipfile
import zlib

import numpy as np
import torch

from ..diagnostics import Loc, NetcError


class Arrays(dict):
    """Named tensors read from a file (an .npz, a .safetensors), which they remember: an error about
    them (a name the network lacks, a shape, a dtype, a label) names the file as its location."""

    def __init__(self, items=(), source: str | None = None):
        super().__init__(items)
        self.source = source


def source_of(arrays) -> str | None:
    return getattr(arrays, "source", None)


@contextlib.contextmanager
def about(arrays):
    """Errors raised inside, about `arrays`, without a location get the arrays' file as theirs."""
    try:
        yield
    except NetcError as e:
        src = source_of(arrays)
        if src:
            for d in e.diagnostics:
                if d.loc is None:
                    d.loc = Loc(src)
        raise


# what reading a damaged archive raises: numpy's and zipfile's errors, zlib's for a bad deflate stream
_READ_ERRORS = (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error, KeyError, NotImplementedError,
                RuntimeError, OverflowError, MemoryError)


def _tensor(arr, what: str) -> torch.Tensor:
    if arr.dtype.kind not in "biuf":
        raise NetcError(f"{what}: arrays of dtype {arr.dtype} cannot be fed to a network (numbers only)")
    if arr.dtype.kind == "u" and arr.dtype.itemsize > 1:   # torch has no uint16/32/64 tensors to compute with
        raise NetcError(f"{what}: arrays of dtype {arr.dtype} cannot be fed to a network (unsigned integers are "
                        f"uint8 only; use a signed type)")
    return torch.from_numpy(np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("=")))


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
    except _READ_ERRORS as e:
        raise NetcError(f"{what}: cannot read '{path}' as an .npz archive ({e or type(e).__name__})", Loc(path))
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise NetcError(f"{what}: '{path}' is a single .npy array, not an .npz archive of named arrays", Loc(path))
    out = Arrays(source=path)
    with z:
        for k in z.files:
            try:
                arr = z[k]
            except _READ_ERRORS as e:
                raise NetcError(f"{what}: cannot read array '{k}' of '{path}' ({e or type(e).__name__})",
                                Loc(path)) from None
            with about(out):
                out[k] = _tensor(arr, f"{what} '{k}'")
    return out


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
