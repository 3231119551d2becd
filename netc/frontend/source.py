"""Reading a source file's text, for every frontend: missing files, directories and bytes that are
not UTF-8 are the user's errors (located at the first bad byte)."""
from __future__ import annotations

from ..diagnostics import Loc, NetcError


def read_source(path: str, name: str | None = None) -> str:
    """A source file's text. Missing files, directories and bytes that are not UTF-8 become
    NetcErrors (the last with the line and column of the first bad byte)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise NetcError(f"no such file: '{path}'")
    except IsADirectoryError:
        raise NetcError(f"'{path}' is a directory, not a network file")
    except OSError as e:
        raise NetcError(f"cannot read '{path}': {e.strerror or e}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise NetcError("file is not valid UTF-8", Loc(name or path, line, col))
