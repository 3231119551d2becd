"""The one error for a PaddlePaddle v2 name that netc.v2 does not have: `paddle.layer.lstmemory` in a
program that imports `netc.v2 as paddle` stops at the user's line with a message naming it, what that
module of netc.v2 does have, and the closest name -- not an AttributeError deep in a traceback.

Every module of netc.v2 ends with `__getattr__ = missing_names(__name__, __all__)`. Names starting with
an underscore stay plain AttributeErrors (Python's own probes: `__path__`, `__wrapped__`, ...). The
error is both a netc.api.Error (a located diagnostic) and an AttributeError (so `hasattr` and
`getattr(module, name, default)` keep working).

Uncaught, such an error -- any netc located error a v2 program does not catch -- is printed as its
diagnostic alone, without Python's traceback through netc (`report_uncaught`, sys.excepthook while
netc.v2 is imported; NETC_DEBUG=1 keeps the traceback). An import of a module netc.v2 lacks
(`import netc.v2.dataset.conll05`, `from netc.v2.dataset import wmt14`) is reported the same way, at the
import's line."""
from __future__ import annotations

import linecache
import os
import re
import sys

from ..api.errors import Error, error, user_loc
from ..diagnostics import SOURCES, Loc, did_you_mean

NETC_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class MissingName(Error, AttributeError):
    """A PaddlePaddle v2 name netc.v2 lacks: a located diagnostic that is also an AttributeError."""


def missing(module: str, name: str, have, loc: Loc | None = None) -> MissingName:
    """The error for `paddle.<module>.<name>` (module: netc.v2's, shown as paddle's), at loc or the user's
    call."""
    shown = module.replace("netc.v2", "paddle", 1)
    hint = did_you_mean(name, list(have))
    e = error(f"netc.v2 has no '{shown}.{name}'" + (f"; did you mean '{shown}.{hint}'?" if hint else "")
              + f" (netc.v2 is PaddlePaddle v2's API on netc; {shown} has: {', '.join(sorted(have))}; "
              f"docs/v2.md lists what is covered)", loc or user_loc())
    return MissingName(e.diagnostics)


def missing_names(module: str, have):
    """A module-level __getattr__ raising `missing` for public names."""
    def __getattr__(name):
        if name.startswith("_"):
            raise AttributeError(f"module '{module}' has no attribute '{name}'")
        raise missing(module, name, have)
    return __getattr__


def traceback_loc(tb) -> Loc | None:
    """The last frame of a traceback in the user's code (outside netc and importlib): its file, line and
    the column of the statement's first character, the source registered so the diagnostic quotes it."""
    found = None
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if not name.startswith("<") and not os.path.abspath(name).startswith(NETC_DIR):
            found = (name, tb.tb_lineno)
        tb = tb.tb_next
    if found is None:
        return None
    name, line = found
    text = linecache.getline(name, line)
    shown = os.path.relpath(name) if not os.path.relpath(name).startswith("..") else name
    lines = linecache.getlines(name)
    if lines:
        SOURCES.add(shown, "".join(lines))
    return Loc(shown, line, len(text) - len(text.lstrip()) + 1)


def missing_import(e: ImportError, tb) -> MissingName | None:
    """A MissingName for an import of a netc.v2 module or name that does not exist, else None."""
    module = e.name or ""
    if not module.startswith("netc.v2"):
        return None
    if isinstance(e, ModuleNotFoundError):
        module, _, name = module.rpartition(".")
    else:
        m = re.match(r"cannot import name '(\w+)'", str(e))
        if m is None:
            return None
        name = m.group(1)
    have = getattr(sys.modules.get(module), "__all__", None)
    if have is None:
        return None
    return missing(module, name, have, traceback_loc(tb))


def report_uncaught(etype, value, tb, previous=sys.__excepthook__):
    """sys.excepthook: a netc located error (or an import netc.v2 cannot satisfy) printed as its diagnostic
    alone; anything else, or NETC_DEBUG set, as Python prints it."""
    if not os.environ.get("NETC_DEBUG"):
        if isinstance(value, ImportError):
            value = missing_import(value, tb) or value
        if isinstance(value, Error):
            sys.stderr.write(str(value) + "\n")
            return
    previous(etype, value, tb)


def install_report():
    """Make report_uncaught the excepthook, in front of whatever hook was there (once)."""
    if getattr(sys.excepthook, "netc_v2", False):
        return
    previous = sys.excepthook

    def hook(etype, value, tb):
        report_uncaught(etype, value, tb, previous)
    hook.netc_v2 = True
    sys.excepthook = hook


__all__ = ["MissingName", "missing", "missing_names", "report_uncaught", "install_report", "missing_import"]
