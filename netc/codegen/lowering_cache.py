"""A cache of lowerings, so that a warm `netc compile` needs neither torch nor Triton.

Lowering (lower.py) is a pure function of the network's IR, its memory plan, the target arch and
netc's own codegen and kernel sources (it calls the kernels' launchers on torch meta tensors). Its
result, the launch recipes (Launch: argument recipes, grid, the specialization key) plus each
distinct kernel's cubin-cache key (cache.py), is stored as JSON under
$NETC_CACHE_DIR/lowerings (default ~/.cache/netc/lowerings), keyed by

    sha256(IR of the network as printed, without locations; the memory plan (every tensor,
           buffer, step and arena); arch; the sources of netc/codegen/*.py and netc/kernels/*.py;
           the installed triton and torch versions; the arena layout, where it is not the plan's
           own: a training library's forward program)

so any change to any of them is a miss. On a hit, compile_module() takes the cubins from the
kernel cache by their keys (a cubin that has gone missing makes the whole entry a miss) and only
builds the manifest, the C launcher and the .so. Locations are left out of the key because they
only appear in error messages, and lowering a network that raised an error is never stored.

What a hit returns stands in for Lowered: CachedLaunch has every field compile_module reads
(group, layers, step, args, grid, spec_key, kernel_index) and, instead of the KernelCall, the
kernel's name and constexprs (for the manifest) and the cubin key; a rank program's communication
ops (CommPoint), outputs (Place) and fixed batch come back as they were lowered.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass, field
from importlib import metadata

FORMAT = 4


@dataclass
class CachedLaunch:
    group: str
    layers: list
    step: int
    args: list               # lower.Arg
    grid: tuple
    spec_key: str            # JSON text of the specialization key: equal keys share one cubin
    kernel_name: str
    constexprs: dict
    cubin_key: str
    kernel_index: int = -1
    tuned: bool = False
    part: int = 0


@dataclass
class CachedLowering:
    launches: list = field(default_factory=list)
    splits: list = field(default_factory=list)
    data: bytes = b""
    workspace_bytes: int = 0
    comms: list = field(default_factory=list)      # recipes.CommPoint
    fixed_batch: bool = False
    outputs: list = field(default_factory=list)    # recipes.Place


def lowering_dir() -> str:
    d = os.environ.get("NETC_CACHE_DIR")
    return os.path.join(d, "lowerings") if d else os.path.join(os.path.expanduser("~"), ".cache", "netc", "lowerings")


def _version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "none"


_SOURCES: str | None = None


def _sources_digest() -> str:
    """sha256 over netc's codegen and kernel sources (read once per process)."""
    global _SOURCES
    if _SOURCES is None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        h = hashlib.sha256()
        for sub in ("codegen", "kernels"):
            d = os.path.join(root, sub)
            for name in sorted(os.listdir(d)):
                if name.endswith(".py"):
                    h.update(name.encode())
                    with open(os.path.join(d, name), "rb") as f:
                        h.update(f.read())
        _SOURCES = h.hexdigest()
    return _SOURCES


def key(net, plan, arch: int, tuning: dict | None = None, layout=None) -> str:
    from ..ir.printer import print_ir
    h = hashlib.sha256()
    h.update(f"netc-lowering-{FORMAT}\n".encode())
    h.update(print_ir(net, with_locs=False).encode())
    doc = dataclasses.asdict(plan)
    doc.pop("seconds", None)      # how long planning took: not part of the plan
    h.update(json.dumps(doc, sort_keys=True, default=str).encode())
    from .tuning_file import digest
    h.update(f"\narch={arch} sources={_sources_digest()} triton={_version('triton')} "
             f"torch={_version('torch')} tuning={digest(tuning)}".encode())
    if layout is not None and layout != type(layout)():    # a training library's forward program
        h.update(f"\nlayout={layout!r}".encode())
    return h.hexdigest()[:40]


def load(k: str) -> CachedLowering | None:
    from .recipes import Arg, CommPoint, Place
    path = os.path.join(lowering_dir(), k + ".json")
    try:
        with open(path) as f:
            doc = json.load(f)
        if doc.get("format") != FORMAT:
            return None
        def place(d):
            return Place(d["name"], d["region"], d["coeff"], d["const"], tuple(d["shape"]), tuple(d["strides"]),
                         d["dtype"])
        low = CachedLowering(splits=list(doc["splits"]), data=bytes.fromhex(doc.get("data", "")),
                             workspace_bytes=int(doc.get("workspace_bytes", 0)),
                             fixed_batch=bool(doc.get("fixed_batch")),
                             outputs=[place(d) for d in doc.get("outputs", [])])
        for c in doc.get("comms", []):
            low.comms.append(CommPoint(c["at"], c["step"], c["op"], c["name"], c["attrs"],
                                       [place(d) for d in c["operands"]], [place(d) for d in c["results"]],
                                       c["bytes"], c["message_bytes"]))
        for L in doc["launches"]:
            low.launches.append(CachedLaunch(
                L["group"], L["layers"], L["step"], [Arg(**a) for a in L["args"]],
                tuple(tuple(g) if isinstance(g, list) else g for g in L["grid"]), L["spec_key"],
                L["kernel_name"], L["constexprs"], L["cubin_key"], tuned=bool(L.get("tuned")),
                part=int(L.get("part", 0))))
        return low
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store(k: str, low, cubin_keys: dict) -> None:
    """Record `low` (lower.Lowered, kernel_index set on every launch) with the cubin key of each
    kernel index."""
    from .cache import atomic_write
    launches = []
    for L in low.launches:
        launches.append(dict(
            group=L.group, layers=L.layers, step=L.step, args=[dataclasses.asdict(a) for a in L.args],
            grid=[list(g) if isinstance(g, tuple) else g for g in L.grid], spec_key=spec_text(L.spec_key),
            kernel_name=L.call.kernel.__name__,
            constexprs={c: list(v) if isinstance(v, tuple) else v for c, v in L.call.constexprs.items()},
            cubin_key=cubin_keys[L.kernel_index], tuned=bool(getattr(L, "tuned", False)),
            part=int(getattr(L, "part", 0))))
    d = lowering_dir()
    os.makedirs(d, exist_ok=True)
    atomic_write(os.path.join(d, k + ".json"),
                  json.dumps(dict(format=FORMAT, launches=launches, splits=list(low.splits),
                                  data=bytes(getattr(low, "data", b"")).hex(),
                                  workspace_bytes=int(getattr(low, "workspace_bytes", 0)),
                                  comms=[dataclasses.asdict(c) for c in getattr(low, "comms", [])],
                                  fixed_batch=bool(getattr(low, "fixed_batch", False)),
                                  outputs=[dataclasses.asdict(p) for p in getattr(low, "outputs", [])])).encode())


def spec_text(spec_key) -> str:
    return spec_key if isinstance(spec_key, str) else json.dumps(spec_key, default=str)
