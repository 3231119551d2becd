"""Diagnostics: source locations, errors that collect, clang-style rendering.

A user's mistake is a Diagnostic (file:line:col, message, the source line, a caret, notes).
Passes report into a DiagnosticEngine and keep going where problems are independent; the
driver renders everything at the end. NetcError carries diagnostics out of a stage that cannot
continue. Anything else that escapes is netc's own bug (exit 2).
"""
from __future__ import annotations

import contextlib
import difflib
import gc
import sys
from dataclasses import dataclass, field


class Loc:
    """A point in a source file (1-based line and column). `path` is a JSON path for formats
    where lines are not meaningful, e.g. '$.layers.conv1.filter'."""

    __slots__ = ("file", "line", "col", "path")

    def __init__(self, file: str, line: int = 0, col: int = 0, path: str | None = None):
        self.file, self.line, self.col, self.path = file, line, col, path

    def __repr__(self):
        return f"Loc({self.file!r}, {self.line}, {self.col})"

    def __str__(self):
        s = self.file
        if self.line:
            s += f":{self.line}:{self.col}"
        if self.path:
            s += f": {self.path}" if not self.line else f" ({self.path})"
        return s

    def __eq__(self, other):
        return isinstance(other, Loc) and (self.file, self.line, self.col) == (other.file, other.line, other.col)

    def __hash__(self):
        return hash((self.file, self.line, self.col))


UNKNOWN_LOC = Loc("<unknown>")


@dataclass
class Note:
    message: str
    loc: Loc | None = None


@dataclass
class Diagnostic:
    severity: str  # "error" | "warning" | "note"
    message: str
    loc: Loc | None = None
    notes: list[Note] = field(default_factory=list)
    width: int = 1  # caret underline width

    def note(self, message: str, loc: Loc | None = None) -> "Diagnostic":
        self.notes.append(Note(message, loc))
        return self


class SourceManager:
    """Holds the text of every file netc read, so diagnostics can quote source lines."""

    def __init__(self):
        self._files: dict[str, list[str]] = {}

    def add(self, name: str, text: str):
        self._files[name] = text.split("\n")

    def line(self, name: str, line: int) -> str | None:
        lines = self._files.get(name)
        if lines is None or not (1 <= line <= len(lines)):
            return None
        return lines[line - 1]


SOURCES = SourceManager()


class DiagnosticEngine:
    def __init__(self, sources: SourceManager = SOURCES, werror: bool = False):
        self.sources = sources
        self.diagnostics: list[Diagnostic] = []
        self.werror = werror
        self._warned_once: set = set()

    def error(self, message: str, loc: Loc | None = None, width: int = 1) -> Diagnostic:
        d = Diagnostic("error", message, loc, width=width)
        self.diagnostics.append(d)
        return d

    def warning(self, message: str, loc: Loc | None = None, once_key=None, width: int = 1) -> Diagnostic:
        if once_key is not None:
            if once_key in self._warned_once:
                return Diagnostic("warning", message, loc)  # detached: not reported twice
            self._warned_once.add(once_key)
        d = Diagnostic("error" if self.werror else "warning", message, loc, width=width)
        self.diagnostics.append(d)
        return d

    def extend(self, diags):
        self.diagnostics.extend(diags)

    @property
    def error_count(self) -> int:
        return sum(1 for d in self.diagnostics if d.severity == "error")

    def has_errors(self) -> bool:
        return self.error_count > 0

    def render(self, color: bool = False) -> str:
        return "".join(render(d, self.sources, color) for d in self.diagnostics)

    def flush(self, stream=None, color: bool | None = None):
        stream = stream or sys.stderr
        if color is None:
            color = hasattr(stream, "isatty") and stream.isatty()
        if self.diagnostics:
            stream.write(self.render(color))
            n_err, n_warn = self.error_count, sum(1 for d in self.diagnostics if d.severity == "warning")
            parts = []
            if n_warn:
                parts.append(f"{n_warn} warning{'s' if n_warn != 1 else ''}")
            if n_err:
                parts.append(f"{n_err} error{'s' if n_err != 1 else ''}")
            if n_err > 1 or (n_err and n_warn):
                stream.write(" and ".join(parts) + " generated.\n")
        self.diagnostics = []


_COLORS = {"error": "\x1b[1;31m", "warning": "\x1b[1;35m", "note": "\x1b[1;36m"}


def _render_one(severity: str, message: str, loc: Loc | None, sources: SourceManager, color: bool,
                width: int = 1) -> str:
    head = f"{loc}: " if loc is not None else ("" if severity == "note" else "netc: ")
    sev = f"{_COLORS[severity]}{severity}:\x1b[0m" if color else f"{severity}:"
    out = f"{head}{sev} {message}\n"
    if loc is not None and loc.line:
        text = sources.line(loc.file, loc.line)
        if text is not None:
            text = text.rstrip("\r").replace("\t", " ")
            col = min(max(loc.col, 1), len(text) + 1)  # a column past the end: the caret just after the line
            if len(text) > _MAX_SHOWN:  # a very long line: show a window around the caret
                start = max(0, min(col - 1 - _MAX_SHOWN // 2, len(text) - _MAX_SHOWN))
                pre, post = ("..." if start else ""), ("..." if start + _MAX_SHOWN < len(text) else "")
                text = pre + text[start:start + _MAX_SHOWN] + post
                col = col - start + len(pre)
                width = min(width, len(text) - len(post) - col + 1)
            caret = " " * (col - 1) + "^" + "~" * max(0, min(width, len(text) - col + 1) - 1)
            out += f"{text}\n{caret}\n"
    return out


_MAX_SHOWN = 160  # source characters quoted under a diagnostic


def render(d: Diagnostic, sources: SourceManager = SOURCES, color: bool = False) -> str:
    out = _render_one(d.severity, d.message, d.loc, sources, color, d.width)
    for n in d.notes:
        out += _render_one("note", n.message, n.loc, sources, color)
    return out


class NetcError(Exception):
    """A user error that stops the current stage. Carries one or more diagnostics."""

    def __init__(self, message_or_diags, loc: Loc | None = None):
        if isinstance(message_or_diags, list):
            self.diagnostics = message_or_diags
        elif isinstance(message_or_diags, Diagnostic):
            self.diagnostics = [message_or_diags]
        else:
            self.diagnostics = [Diagnostic("error", str(message_or_diags), loc)]
        super().__init__(self.diagnostics[0].message if self.diagnostics else "error")

    def note(self, message: str, loc: Loc | None = None) -> "NetcError":
        self.diagnostics[0].note(message, loc)
        return self


def did_you_mean(word: str, candidates, n: int = 1, cutoff: float = 0.6) -> str | None:
    """The closest candidate to `word`, or None. Case-insensitive first, then fuzzy."""
    cands = list(candidates)
    low = {c.lower(): c for c in cands}
    if word.lower() in low and low[word.lower()] != word:
        return low[word.lower()]
    m = difflib.get_close_matches(word, cands, n=n, cutoff=cutoff)
    return m[0] if m else None


@contextlib.contextmanager
def gc_paused():
    """Pause Python's cyclic garbage collector while building or transforming a large IR: it
    allocates millions of objects and frees none, so generational collections only rescan the
    growing graph (a third of the frontend's time at 100k layers) and reclaim nothing."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
