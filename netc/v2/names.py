"""The one error for a PaddlePaddle v2 name that netc.v2 does not have: `paddle.layer.lstmemory` in a
program that imports `netc.v2 as paddle` stops at the user's line with a message naming it, what that
module of netc.v2 does have, and the closest name -- not an AttributeError deep in a traceback.

Every module of netc.v2 ends with `__getattr__ = missing_names(__name__, __all__)`. Names starting with
an underscore stay plain AttributeErrors (Python's own probes: `__path__`, `__wrapped__`, ...). The
error is both a netc.api.Error (a located diagnostic) and an AttributeError (so `hasattr` and
`getattr(module, name, default)` keep working)."""
from __future__ import annotations

from ..api.errors import Error, error, user_loc
from ..diagnostics import did_you_mean


class MissingName(Error, AttributeError):
    """A PaddlePaddle v2 name netc.v2 lacks: a located diagnostic that is also an AttributeError."""


def missing(module: str, name: str, have) -> MissingName:
    """The error for `paddle.<module>.<name>` (module: netc.v2's, shown as paddle's)."""
    shown = module.replace("netc.v2", "paddle", 1)
    hint = did_you_mean(name, list(have))
    e = error(f"netc.v2 has no '{shown}.{name}'" + (f"; did you mean '{shown}.{hint}'?" if hint else "")
              + f" (netc.v2 is PaddlePaddle v2's API on netc; {shown} has: {', '.join(sorted(have))}; "
              f"docs/v2.md lists what is covered)", user_loc())
    return MissingName(e.diagnostics)


def missing_names(module: str, have):
    """A module-level __getattr__ raising `missing` for public names."""
    def __getattr__(name):
        if name.startswith("_"):
            raise AttributeError(f"module '{module}' has no attribute '{name}'")
        raise missing(module, name, have)
    return __getattr__


__all__ = ["MissingName", "missing", "missing_names"]
