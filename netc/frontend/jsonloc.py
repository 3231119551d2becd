"""A strict JSON reader (RFC 8259) that remembers where every value was written.

Python's json module gives values without positions; importers need file:line:col for their
diagnostics. `load_json(text, file)` returns (value, locs, duplicates): `locs` maps a JSON path
("$.layers.conv1.filter") to the Loc of that value, `duplicates` lists (path, loc, first_loc)
for repeated object keys (the last one wins, as in Python's json module).
"""
from __future__ import annotations

import bisect
import json
import re

from ..diagnostics import Loc, NetcError

_WS = re.compile(r"[ \t\r\n]*")
_NUM = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_STR = re.compile(r'"((?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*)"')
_ESC = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def path_join(path: str, key) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if key.isascii() and key.isidentifier():    # [A-Za-z_][A-Za-z0-9_]*
        return f"{path}.{key}"
    return f"{path}[{key!r}]".replace("'", '"') if "'" not in key else f"{path}[{key!r}]"


_MISSING = object()


class _Locs(dict):
    """JSON path -> Loc, kept as offsets into the text until asked (a document has a value per
    path, a reader asks for a few)."""

    def __init__(self, file: str, text: str):
        super().__init__()
        self.file = file
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def at(self, pos: int, path: str | None = None) -> Loc:
        line = bisect.bisect_right(self.starts, pos)
        return Loc(self.file, line, pos - self.starts[line - 1] + 1, path)

    def __getitem__(self, path):
        return self.at(dict.__getitem__(self, path), path)

    def get(self, path, default=None):
        pos = dict.get(self, path, _MISSING)
        return default if pos is _MISSING else self.at(pos, path)

    def items(self):
        return [(k, self.at(p, k)) for k, p in dict.items(self)]

    def values(self):
        return [self.at(p, k) for k, p in dict.items(self)]


class _Reader:
    def __init__(self, text: str, file: str):
        self.s, self.file, self.i = text, file, 0
        self.locs = _Locs(file, text)
        self.dups: list = []

    def loc(self, pos: int, path: str | None = None) -> Loc:
        return self.locs.at(pos, path)

    def fail(self, msg: str, pos: int | None = None):
        pos = self.i if pos is None else pos
        raise NetcError(f"invalid JSON: {msg}", self.loc(min(pos, len(self.s))))

    def ws(self):
        if self.i < len(self.s) and self.s[self.i] in " \t\r\n":
            self.i = _WS.match(self.s, self.i).end()

    def value(self, path: str, depth: int = 0):
        if depth > 500:
            self.fail("nesting is too deep")
        self.ws()
        if self.i >= len(self.s):
            self.fail("unexpected end of file, expected a value")
        c = self.s[self.i]
        dict.__setitem__(self.locs, path, self.i)
        if c == "{":
            return self.obj(path, depth)
        if c == "[":
            return self.arr(path, depth)
        if c == '"':
            return self.string()
        if c == "-" or c.isdigit():
            m = _NUM.match(self.s, self.i)
            if not m:
                self.fail("malformed number")
            self.i = m.end()
            t = m.group(0)
            return float(t) if (m.group(2) or m.group(3)) else int(t)
        for word, val in (("true", True), ("false", False), ("null", None)):
            if self.s.startswith(word, self.i):
                self.i += len(word)
                return val
        if self.s.startswith(("NaN", "Infinity", "-Infinity"), self.i):
            self.fail("NaN and Infinity are not JSON")
        self.fail(f"unexpected character {c!r}")

    def string(self) -> str:
        m = _STR.match(self.s, self.i)
        if not m:
            end = self.s.find('"', self.i + 1)
            if end < 0 or "\n" in self.s[self.i:end]:
                self.fail("unterminated string")
            self.fail("invalid character or escape in string")
        self.i = m.end()
        raw = m.group(1)
        if "\\" not in raw:
            return raw
        return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", lambda e: chr(int(e.group(1)[1:], 16)) if e.group(1)[0] == "u"
                      else _ESC[e.group(1)], raw)

    def obj(self, path: str, depth: int):
        self.i += 1
        out: dict = {}
        keylocs: dict = {}
        self.ws()
        if self.s.startswith("}", self.i):
            self.i += 1
            return out
        while True:
            self.ws()
            if self.i >= len(self.s):
                self.fail("unexpected end of file inside an object")
            if self.s[self.i] != '"':
                if self.s[self.i] == "}":
                    self.fail("trailing comma before '}'")
                self.fail(f"expected a string key, got {self.s[self.i]!r}")
            kpos = self.i
            k = self.string()
            self.ws()
            if not self.s.startswith(":", self.i):
                self.fail("expected ':' after the key")
            self.i += 1
            sub = path_join(path, k)
            if k in keylocs:
                self.dups.append((sub, self.loc(kpos, sub), self.loc(keylocs[k], sub)))
                out.pop(k)  # last wins, and moves to the end as in Python's json + dict
            keylocs[k] = kpos
            out[k] = self.value(sub, depth + 1)
            self.ws()
            if self.s.startswith(",", self.i):
                self.i += 1
                continue
            if self.s.startswith("}", self.i):
                self.i += 1
                return out
            if self.i >= len(self.s):
                self.fail("unexpected end of file, expected ',' or '}'")
            self.fail(f"expected ',' or '}}', got {self.s[self.i]!r}")

    def arr(self, path: str, depth: int):
        self.i += 1
        out = []
        self.ws()
        if self.s.startswith("]", self.i):
            self.i += 1
            return out
        while True:
            out.append(self.value(path_join(path, len(out)), depth + 1))
            self.ws()
            if self.s.startswith(",", self.i):
                self.i += 1
                self.ws()
                if self.s.startswith("]", self.i):
                    self.fail("trailing comma before ']'")
                continue
            if self.s.startswith("]", self.i):
                self.i += 1
                return out
            if self.i >= len(self.s):
                self.fail("unexpected end of file, expected ',' or ']'")
            self.fail(f"expected ',' or ']', got {self.s[self.i]!r}")


def load_json(text: str, file: str = "<input>"):
    fast = _load_fast(text, file)
    if fast is not None:
        return fast
    r = _Reader(text, file)
    v = r.value("$")
    r.ws()
    if r.i != len(r.s):
        r.fail("extra data after the JSON value")
    return v, r.locs, r.dups


class _NotFast(Exception):
    pass


def _no_constant(name):
    raise _NotFast(name)


_TOKEN = re.compile(r'[{}\[\]:,]|"(?:[^"\\]|\\.)*"|[^ \t\r\n{}\[\]:,"]+')


def _load_fast(text: str, file: str):
    """load_json of a document Python's json module reads as this reader would (no NaN, no \\u
    escape, no repeated key, not nested deeper than 500): its values from the json module, the
    locations from one scan of its tokens. None for any other document: _Reader reads it, and
    says what is wrong where."""
    if "\\u" in text:
        return None
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError, _NotFast):
        return None
    locs = _Locs(file, text)
    put = dict.__setitem__
    stack: list = []      # [path, index or None (an object), its keys so far]
    path = "$"
    want_key = False
    for m in _TOKEN.finditer(text):
        t = m.group()
        c = t[0]
        if c == ",":
            top = stack[-1]
            if top[1] is None:
                want_key = True
            else:
                top[1] += 1
                path = path_join(top[0], top[1])
            continue
        if c == ":":
            continue
        if c == "}" or c == "]":
            stack.pop()
            want_key = False
            continue
        if want_key:
            key = t[1:-1] if "\\" not in t else json.loads(t)
            top = stack[-1]
            if key in top[2]:
                return None      # a repeated key: _Reader reports it
            top[2].add(key)
            path = path_join(top[0], key)
            want_key = False
            continue
        if len(stack) > 500:
            return None
        put(locs, path, m.start())
        if c == "{":
            stack.append([path, None, set()])
            want_key = True
        elif c == "[":
            stack.append([path, 0, None])
            path = path_join(path, 0)
    return value, locs, []


def nearest_loc(locs: dict, path: str):
    """The location of `path`, or of its closest enclosing value that has one."""
    while path and path not in locs:
        cut = max(path.rfind("."), path.rfind("["))
        if cut <= 0:
            return None
        path = path[:cut]
    return locs.get(path)
