"""Tuning files (tune.py writes them on a GPU; `netc compile --tuning FILE` reads them anywhere),
without torch or Triton: a warm compile with a tuning file stays free of both. The format is
described in tune.py."""
from __future__ import annotations

import hashlib
import json
import os

from ..diagnostics import SOURCES, Diagnostic, Loc, NetcError

FORMAT, VERSION = "netc-tuning", 1
# launcher keywords a config may hold, and their allowed values
CONFIG_KEYS = {"block_m": (16, 512), "block_n": (16, 512), "block_k": (16, 512), "group_m": (1, 64),
               "block": (32, 2 ** 16), "block_p": (1, 4096), "block_c": (1, 4096), "flat_k": None,
               "split": (1, 64), "num_warps": (1, 32), "num_stages": (1, 8)}
# the kernels tuning configures (softmax and the losses keep their one configuration)
TUNED_KERNELS = ("gemm_kernel", "conv2d_kernel", "pool2d_kernel", "lrn_kernel", "elementwise_kernel")


def _err(path, msg, note=None):
    d = Diagnostic("error", msg, Loc(path))
    if note:
        d.note(note)
    return NetcError([d])


def read_file(path: str) -> dict:
    """The tuning file's document; a located error for anything that is not one."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise NetcError(f"--tuning: no such file: '{path}'") from None
    except (OSError, UnicodeDecodeError) as e:
        raise NetcError(f"--tuning: cannot read '{path}': {getattr(e, 'strerror', None) or e}") from None
    SOURCES.add(path, text)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise NetcError([Diagnostic("error", f"--tuning: not valid JSON: {e.msg}", Loc(path, e.lineno, e.colno))]) \
            from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("entries"), list):
        raise _err(path, f"--tuning: '{os.path.basename(path)}' is not a netc tuning file (it needs \"format\": "
                         f"\"{FORMAT}\" and a list of \"entries\")", "`netc compile --autotune` writes one on a GPU")
    if doc.get("version") != VERSION:
        raise _err(path, f"--tuning: tuning file version {doc.get('version')!r}; this netc reads version {VERSION}")
    for i, e in enumerate(doc["entries"]):
        _check_entry(path, i, e)
    return doc


def _check_entry(path, i, e):
    where = f"--tuning: entry {i}"
    if not isinstance(e, dict) or not isinstance(e.get("key"), str) or not isinstance(e.get("config"), dict):
        raise _err(path, f"{where} needs a \"key\" (string) and a \"config\" (object)")
    if not isinstance(e.get("arch"), int):
        raise _err(path, f"{where} ('{e['key']}') needs an integer \"arch\" (e.g. 90)")
    for k, v in e["config"].items():
        if k not in CONFIG_KEYS:
            raise _err(path, f"{where} ('{e['key']}'): unknown configuration key '{k}'",
                       f"known: {', '.join(CONFIG_KEYS)}")
        lim = CONFIG_KEYS[k]
        if lim is None:
            if not isinstance(v, bool):
                raise _err(path, f"{where}: '{k}' must be true or false, got {v!r}")
        elif isinstance(v, bool) or not isinstance(v, int) or not lim[0] <= v <= lim[1]:
            raise _err(path, f"{where}: '{k}' must be an integer in [{lim[0]}, {lim[1]}], got {v!r}")
        elif k.startswith("block") and v & (v - 1):
            raise _err(path, f"{where}: '{k}' must be a power of two, got {v}")


def load_tuning(path: str, arch: int) -> dict:
    """{tuning key: launcher keywords} of the file's entries for sm_<arch> (first entry wins)."""
    out = {}
    for e in read_file(path)["entries"]:
        if e["arch"] == arch:
            out.setdefault(e["key"], dict(e["config"]))
    return out


def digest(tuning: dict | None) -> str:
    """What the lowering cache keys on: the tuned configurations in use."""
    if not tuning:
        return "none"
    return hashlib.sha256(json.dumps(tuning, sort_keys=True).encode()).hexdigest()[:16]


def merge(path: str, entries: list) -> dict:
    """Write `entries` into the tuning file at `path` (created if missing): an entry replaces the
    one of the same key and device. Returns the document written."""
    doc = read_file(path) if os.path.exists(path) else {"format": FORMAT, "version": VERSION, "entries": []}
    new = {(e["key"], e["device"]) for e in entries}
    doc["entries"] = [e for e in doc["entries"] if (e.get("key"), e.get("device")) not in new] + list(entries)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)
    return doc
