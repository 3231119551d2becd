"""Errors of the Python API, located at the user's own code.

A layer remembers where it was made: the first frame of the call stack outside the netc package
(user_loc). Every diagnostic about it -- an attribute the op's schema rejects, a shape rule that
fails, a parameter shared with two shapes -- points there, so the message reads like a compiler's
for a .nd file, with the Python line quoted under it. `Error` is a NetcError whose text is the whole
rendered diagnostic (file:line:col: error: ..., the line, a caret, the notes).
"""
from __future__ import annotations

import contextlib
import itertools
import linecache
import os
import sys

from ..diagnostics import SOURCES, UNKNOWN_LOC, Loc, NetcError, render

_NETC_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_SEEN: set = set()


class Error(NetcError):
    """A user's mistake found by the Python API; str() is the rendered diagnostics."""

    def __str__(self):
        return "".join(render(d) for d in self.diagnostics).rstrip("\n")


def _outside_netc(filename: str) -> bool:
    if filename.startswith("<frozen"):        # importlib's own frames
        return False
    return not os.path.abspath(filename).startswith(_NETC_DIR)


def user_loc() -> Loc:
    """Where the user's code called into netc: the first frame outside the netc package (its file,
    line and the column of the call), registered with the source manager so diagnostics quote it."""
    f = sys._getframe(1)
    while f is not None and not _outside_netc(f.f_code.co_filename):
        f = f.f_back
    if f is None:
        return UNKNOWN_LOC
    filename, line, col = f.f_code.co_filename, f.f_lineno, 0
    try:   # Python 3.11+: the position of the instruction being run, i.e. of the call
        pos = next(itertools.islice(f.f_code.co_positions(), f.f_lasti // 2, None))
        if pos[0] == line and pos[2] is not None:
            col = pos[2] + 1
    except (AttributeError, StopIteration, TypeError):
        pass
    shown = filename
    try:
        rel = os.path.relpath(filename)
        if not rel.startswith(".."):
            shown = rel
    except ValueError:
        pass
    if shown not in _SEEN:
        lines = linecache.getlines(filename)
        if lines:
            SOURCES.add(shown, "".join(lines))
        _SEEN.add(shown)
    return Loc(shown, line, col)


def error(message: str, loc: Loc | None = None, notes=(), width: int = 1) -> Error:
    from ..diagnostics import Diagnostic
    d = Diagnostic("error", message, loc, width=width)
    for n in notes:
        d.note(*n) if isinstance(n, tuple) else d.note(n)
    return Error(d)


@contextlib.contextmanager
def user_errors(loc: Loc | None = None):
    """Re-raise a NetcError from the layers below as an Error (whose text shows every diagnostic);
    diagnostics without a location get `loc` (the user's call)."""
    try:
        yield
    except NetcError as e:
        diags = [d for d in e.diagnostics if d.severity == "error"] or e.diagnostics
        if loc is not None:
            for d in diags:
                if d.loc is None or d.loc.file == UNKNOWN_LOC.file:
                    d.loc = loc
        if isinstance(e, Error) and loc is None:
            raise
        raise Error(diags) from None
