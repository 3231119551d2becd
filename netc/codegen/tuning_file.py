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


def _err(path, msg, note=None, loc=None):
    d = Diagnostic("error", msg, loc or Loc(path))
    if note:
        d.note(note)
    return NetcError([d])


def read_file(path: str) -> dict:
    """The tuning file's document; a located error for anything that is not one."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise NetcError(f"--tuning: no such file: '{path}'") from None
    except OSError as e:
        raise NetcError(f"--tuning: cannot read '{path}': {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:   # at the byte: its line, and its column in characters
        line = data.count(b"\n", 0, e.start) + 1
        col = len(data[data.rfind(b"\n", 0, e.start) + 1:e.start].decode("utf-8", "replace")) + 1
        SOURCES.add(path, data.decode("utf-8", "replace"))
        raise NetcError(f"--tuning: not UTF-8 text: byte 0x{data[e.start]:02x} cannot start or continue a "
                        f"character", Loc(path, line, col)) from None
    SOURCES.add(path, text)
    # (the reader that remembers where each value was written: every error below points at its value)
    from ..frontend.jsonloc import load_json, nearest_loc
    try:
        doc, locs, _dups = load_json(text, path)
    except NetcError as e:
        for d in e.diagnostics:
            d.message = f"--tuning: not valid JSON: {d.message.removeprefix('invalid JSON: ')}"
        raise
    at = lambda jpath: nearest_loc(locs, jpath) or Loc(path, 1, 1)  # noqa: E731
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("entries"), list):
        where = "$.entries" if isinstance(doc, dict) and doc.get("format") == FORMAT else "$.format"
        raise _err(path, f"--tuning: '{os.path.basename(path)}' is not a netc tuning file (it needs \"format\": "
                         f"\"{FORMAT}\" and a list of \"entries\")", "`netc compile --autotune` writes one on a GPU",
                   at(where))
    if doc.get("version") != VERSION or isinstance(doc.get("version"), bool):
        raise _err(path, f"--tuning: tuning file version {doc.get('version')!r}; this netc reads version {VERSION}",
                   loc=at("$.version"))
    for i, e in enumerate(doc["entries"]):
        _check_entry(path, i, e, lambda sub, i=i: at(f"$.entries[{i}]" + sub))
    return doc


def _check_entry(path, i, e, at):
    where = f"--tuning: entry {i}"
    if not isinstance(e, dict) or not isinstance(e.get("key"), str) or not isinstance(e.get("config"), dict):
        sub = "" if not isinstance(e, dict) else ".key" if not isinstance(e.get("key"), str) else ".config"
        raise _err(path, f"{where} needs a \"key\" (string) and a \"config\" (object)", loc=at(sub))
    if not isinstance(e.get("arch"), int) or isinstance(e.get("arch"), bool):
        raise _err(path, f"{where} ('{e['key']}') needs an integer \"arch\" (e.g. 90)", loc=at(".arch"))
    for k, v in e["config"].items():
        from ..frontend.jsonloc import path_join
        loc = at(path_join(".config", k))
        if k not in CONFIG_KEYS:
            raise _err(path, f"{where} ('{e['key']}'): unknown configuration key '{k}'",
                       f"known: {', '.join(CONFIG_KEYS)}", loc)
        lim = CONFIG_KEYS[k]
        if lim is None:
            if not isinstance(v, bool):
                raise _err(path, f"{where}: '{k}' must be true or false, got {v!r}", loc=loc)
        elif isinstance(v, bool) or not isinstance(v, int) or not lim[0] <= v <= lim[1]:
            raise _err(path, f"{where}: '{k}' must be an integer in [{lim[0]}, {lim[1]}], got {v!r}", loc=loc)
        elif k.startswith("block") and v & (v - 1):
            raise _err(path, f"{where}: '{k}' must be a power of two, got {v}", loc=loc)


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
