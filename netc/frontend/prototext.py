"""A reader for protobuf *text format* (what SINGA's job.conf files are), schema-free.

The output is a generic tree: a `Message` is an ordered list of `Field`s; a field's value is
either a `Scalar` (a literal exactly as written: number, string, identifier) or a nested
`Message`. Every field name and every value keeps its `Loc(file, line, col)`. Which literals
are valid for which field (int vs. float, enum identifiers, booleans) is the schema's business
(netc/frontend/singa.py); this module only knows the syntax:

    message   := (field [',' | ';'])*
    field     := name ':' scalar | name [':'] msgval | name ':' '[' [item (',' item)*] ']'
    name      := IDENT | '[' IDENT ('.' IDENT)* ['/' IDENT ('.' IDENT)*] ']'   (extension / Any URL)
    msgval    := '{' message '}' | '<' message '>'
    scalar    := ['-'] NUMBER | ['-'] IDENT | STRING+     (adjacent strings concatenate)

`#` starts a comment anywhere outside a string. Strings take C escapes (\\n \\t \\\\ \\" \\' \\?
\\a \\b \\f \\v \\r, octal \\NNN, hex \\xHH, \\uXXXX, \\UXXXXXXXX) and single or double quotes.

The parser is iterative (no recursion), so nesting depth is unlimited, and every malformed
input -- truncated files included -- ends in a NetcError with file:line:col, never another
exception. `tokenize(..., proto=True)` is the same scanner with `//` and `/* */` comments, used
by the .proto schema reader in singa.py.
"""
from __future__ import annotations

import re

from ..diagnostics import SOURCES, Diagnostic, Loc, NetcError
from .source import read_source

__all__ = ["Scalar", "Field", "Message", "Token", "tokenize", "parse_text", "parse_file"]


class Scalar:
    """A literal as written. kind: 'int' | 'float' | 'string' | 'ident'.

    `value` is the Python value: int / float for numbers (negated when written with '-'),
    str for strings (escapes decoded) and identifiers. `text` is the source spelling
    ('-5', '5e-05', 'kTrain', '"a" "b"'), `negative` records a leading '-' (so '-kFoo' and
    '-inf' can be judged by the schema), `loc` is where the literal starts."""

    __slots__ = ("kind", "value", "text", "negative", "loc")

    def __init__(self, kind: str, value, text: str, loc: Loc, negative: bool = False):
        self.kind, self.value, self.text, self.loc, self.negative = kind, value, text, loc, negative

    def __repr__(self):
        return f"Scalar({self.kind}, {self.value!r})"


class Field:
    """One `name: value` / `name { ... }` entry. `ext` is True for `[ext.name]` fields (then
    `name` is the dotted name inside the brackets). For a message value `value` is a Message,
    else a Scalar. `loc` is the location of the field name, `value.loc` that of the value."""

    __slots__ = ("name", "value", "loc", "ext", "colon")

    def __init__(self, name: str, value, loc: Loc, ext: bool = False, colon: bool = True):
        self.name, self.value, self.loc, self.ext, self.colon = name, value, loc, ext, colon

    @property
    def is_message(self) -> bool:
        return isinstance(self.value, Message)

    def __repr__(self):
        n = f"[{self.name}]" if self.ext else self.name
        return f"Field({n}={self.value!r} @{self.loc.line}:{self.loc.col})"


class Message:
    """An ordered list of fields. `loc` is the opening '{' (the file start for the root),
    `end` the closing '}'."""

    __slots__ = ("fields", "loc", "end")

    def __init__(self, loc: Loc, fields=None, end: Loc | None = None):
        self.loc, self.fields, self.end = loc, fields if fields is not None else [], end

    def __iter__(self):
        return iter(self.fields)

    def __len__(self):
        return len(self.fields)

    def all(self, name: str) -> list[Field]:
        return [f for f in self.fields if f.name == name and not f.ext]

    def first(self, name: str) -> Field | None:
        for f in self.fields:
            if f.name == name and not f.ext:
                return f
        return None

    def __repr__(self):
        return f"Message({self.fields!r})"


# ------------------------------------------------------------------------------------------
# Tokens

class Token:
    __slots__ = ("kind", "text", "line", "col", "pos")

    def __init__(self, kind, text, line, col, pos):
        self.kind, self.text, self.line, self.col, self.pos = kind, text, line, col, pos

    def __repr__(self):
        return f"Token({self.kind}, {self.text!r}, {self.line}:{self.col})"


# kinds: ident, number, string, sym (one of {}<>:[],;-./=()+), eof. Whitespace and comments are
# one 'skip' match per gap; a number glued to a name ('5abc', '1e') is a 'badnum'.
_NUMBER = (r"(?:0[xX][0-9A-Fa-f]+|(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fF]?"
           r"(?![A-Za-z0-9_])")
_REST = (r"|(?P<ident>[A-Za-z_][A-Za-z0-9_]*)"
         r"|(?P<number>" + _NUMBER + r")"
         r"|(?P<badnum>(?:[0-9]|\\.[0-9])[0-9A-Za-z_.]*)"
         r"|(?P<string>\"(?:[^\"\\\n]|\\[^\n])*\"|'(?:[^'\\\n]|\\[^\n])*')"
         r"|(?P<sym>[{}<>:\[\],;\-./=()+])")
_TEXT_RE = re.compile(r"(?P<skip>(?:[ \t\r\n\f\v]+|#[^\n]*)+)" + _REST)
_PROTO_RE = re.compile(r"(?P<skip>(?:[ \t\r\n\f\v]+|//[^\n]*|/\*(?:[^*]|\*(?!/))*\*/)+)" + _REST)


def _linecol(text, pos):
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _scan(text: str, file: str, proto: bool = False):
    """Tokens as (kind, text, line, col) tuples, ending with ('eof', '', line, col). Raises
    NetcError at the first character that starts no token."""
    toks = []
    append = toks.append
    pos, line, bol = 0, 1, 0
    count, rfind = text.count, text.rfind
    for m in (_PROTO_RE if proto else _TEXT_RE).finditer(text):
        start = m.start()
        if start != pos:
            _lex_error(text, pos, file, proto)
        kind = m.lastgroup
        pos = m.end()
        if kind == "skip":
            k = count("\n", start, pos)
            if k:
                line += k
                bol = rfind("\n", start, pos) + 1
            continue
        if kind == "badnum":
            raise NetcError(f"invalid number '{m.group()}'" + (" (a number needs a space before a name)"
                            if any(c.isalpha() or c == "_" for c in m.group()) else ""),
                            Loc(file, line, start - bol + 1))
        append((kind, m.group(), line, start - bol + 1))
    if pos != len(text):
        _lex_error(text, pos, file, proto)
    append(("eof", "", line, len(text) - bol + 1))
    return toks


def tokenize(text: str, file: str = "<input>", proto: bool = False) -> list[Token]:
    """Split `text` into Tokens (1-based line/col). `proto=True` takes .proto comments (// and
    /* */) instead of #. Raises NetcError on a character that starts no token, an unterminated
    string or comment, or a number glued to a name."""
    return [Token(kind, t, ln, col, 0) for kind, t, ln, col in _scan(text, file, proto)]


def _lex_error(text, pos, file, proto):
    ch = text[pos]
    loc = Loc(file, *_linecol(text, pos))
    if ch in "\"'":
        raise NetcError("unterminated string literal (strings cannot span lines)", loc)
    if proto and text.startswith("/*", pos):
        raise NetcError("unterminated /* comment", loc)
    if ch == "\\":
        raise NetcError("stray '\\' outside a string", loc)
    if ord(ch) < 32 or ord(ch) == 127:
        raise NetcError(f"unexpected control character {ch!r}", loc)
    raise NetcError(f"unexpected character {ch!r}", loc)


_SIMPLE_ESC = {"n": 10, "t": 9, "r": 13, "a": 7, "b": 8, "f": 12, "v": 11, "\\": 92, "'": 39, '"': 34, "?": 63}


def unescape(quoted: str, loc: Loc) -> str:
    """Decode a quoted string token (C escapes; the bytes are decoded as UTF-8)."""
    s = quoted[1:-1]
    if "\\" not in s:
        return s
    out = bytearray()
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c != "\\":
            j = s.find("\\", i)
            j = n if j < 0 else j
            out += s[i:j].encode("utf-8", "surrogatepass")
            i = j
            continue
        e = s[i + 1]  # the regex guarantees a character after a backslash
        if e in _SIMPLE_ESC:
            out.append(_SIMPLE_ESC[e])
            i += 2
        elif e in "01234567":
            j = i + 1
            while j < n and j < i + 4 and s[j] in "01234567":
                j += 1
            out.append(int(s[i + 1:j], 8) & 0xFF)
            i = j
        elif e in "xX":
            j = i + 2
            while j < n and j < i + 4 and s[j] in "0123456789abcdefABCDEF":
                j += 1
            if j == i + 2:
                raise NetcError("'\\x' escape without hex digits", Loc(loc.file, loc.line, loc.col + 1 + i))
            out.append(int(s[i + 2:j], 16))
            i = j
        elif e in "uU":
            k = 4 if e == "u" else 8
            h = s[i + 2:i + 2 + k]
            if len(h) != k or any(ch not in "0123456789abcdefABCDEF" for ch in h) or int(h, 16) > 0x10FFFF:
                raise NetcError(f"invalid '\\{e}' escape (needs {k} hex digits)",
                                Loc(loc.file, loc.line, loc.col + 1 + i))
            out += chr(int(h, 16)).encode("utf-8", "surrogatepass")
            i += 2 + k
        else:
            raise NetcError(f"invalid escape sequence '\\{e}' in string literal",
                            Loc(loc.file, loc.line, loc.col + 1 + i))
    return out.decode("utf-8", "replace")


def parse_number(text: str):
    """'12' -> 12, '0x1f' -> 31, '017' -> 15 (octal, as protobuf), '1.5f' / '5e-05' -> float.
    Returns (kind, value)."""
    t = text[:-1] if text[-1] in "fF" and not text.lower().startswith("0x") else text
    tl = t.lower()
    if tl.startswith("0x"):
        return "int", int(t, 16)
    if "." in t or "e" in tl or t != text:
        return "float", float(t)
    if len(t) > 1 and t[0] == "0":
        if all(c in "01234567" for c in t):
            return "int", int(t, 8)
        return "float", float(t)  # protobuf: a leading-zero decimal like 09 is not an int
    return "int", int(t)


# ------------------------------------------------------------------------------------------
# Parser (iterative)

def parse_text(text: str, file: str = "<input>") -> Message:
    """Parse protobuf text format into a Message tree. Raises NetcError on syntax errors."""
    SOURCES.add(file, text)
    toks = _scan(text, file)
    return _Parser(toks, file).parse(0, len(toks) - 1)


class _Parser:
    MAX_LIST_DEPTH = 100  # messages inside list values are parsed recursively

    def __init__(self, toks, file):
        self.toks, self.file = toks, file
        self.depth = 0

    def loc(self, t) -> Loc:
        return Loc(self.file, t[2], t[3])

    def err(self, tok, msg, note=None):
        kind, text = tok[0], tok[1]
        where = "end of file" if kind == "eof" else f"'{text}'"
        d = Diagnostic("error", msg.replace("{found}", where), self.loc(tok), width=max(1, len(text)))
        e = NetcError(d)
        if note:
            e.note(*note)
        raise e

    def parse(self, i, stop) -> Message:
        """Parse toks[i:stop] (toks[stop] acts as the end) as one message; iterative."""
        toks, loc = self.toks, self.loc
        root = Message(loc(toks[i]) if i else Loc(self.file, 1, 1))
        # stack entries: (message, closing symbol, opening token, field name)
        stack = [(root, "", None, "")]
        msg, close, open_tok, fname = stack[-1]
        eof = ("eof", "", toks[stop][2], toks[stop][3])
        while True:
            t = toks[i] if i < stop else eof
            kind, text = t[0], t[1]
            if kind == "eof":
                if open_tok is not None:
                    self.err(t, f"unexpected end of file: message '{fname}' is not closed (expected '{close}')",
                             (f"'{open_tok[1]}' opened here", loc(open_tok)))
                return root
            if kind == "sym" and (text == "}" or text == ">"):
                if text != close:
                    if open_tok is None:
                        self.err(t, f"unexpected '{text}': no message is open here")
                    self.err(t, f"expected '{close}' to close message '{fname}', found {{found}}",
                             (f"'{open_tok[1]}' opened here", loc(open_tok)))
                msg.end = loc(t)
                stack.pop()
                msg, close, open_tok, fname = stack[-1]
                i += 1
                if i < stop and toks[i][0] == "sym" and toks[i][1] in ",;":
                    i += 1
                continue
            # field name
            ext = False
            if kind == "ident":
                name, name_tok = text, t
                i += 1
            elif kind == "sym" and text == "[":
                name_tok = t
                i, name = self.ext_name(i + 1, stop)
                ext = True
            else:
                self.err(t, "expected a field name, found {found}")
            t = toks[i] if i < stop else eof
            colon = False
            if t[0] == "sym" and t[1] == ":":
                colon = True
                i += 1
                t = toks[i] if i < stop else eof
            floc = loc(name_tok)
            if t[0] == "sym" and (t[1] == "{" or t[1] == "<"):
                sub = Message(loc(t))
                msg.fields.append(Field(name, sub, floc, ext, colon))
                stack.append((sub, "}" if t[1] == "{" else ">", t, name))
                msg, close, open_tok, fname = stack[-1]
                i += 1
                continue
            if not colon:
                if t[0] in ("ident", "number", "string") or (t[0] == "sym" and t[1] in "-["):
                    self.err(t, f"expected ':' between field '{name}' and its value, found {{found}}")
                self.err(t, f"expected ':' or '{{{{' after field name '{name}', found {{found}}")
            if t[0] == "sym" and t[1] == "[":  # list form  field: [v1, v2] / [{..}, {..}]
                i += 1
                t = toks[i] if i < stop else eof
                if not (t[0] == "sym" and t[1] == "]"):
                    while True:
                        t = toks[i] if i < stop else eof
                        if t[0] == "sym" and t[1] in "{<":
                            sub, i = self.list_message(i, stop)
                            msg.fields.append(Field(name, sub, floc, ext, colon))
                        else:
                            val, i = self.scalar(i, stop, name)
                            msg.fields.append(Field(name, val, floc, ext, colon))
                        t = toks[i] if i < stop else eof
                        if t[0] == "sym" and t[1] == ",":
                            i += 1
                            continue
                        if t[0] == "sym" and t[1] == "]":
                            break
                        self.err(t, f"expected ',' or ']' in the list value of '{name}', found {{found}}")
                i += 1
            else:
                val, i = self.scalar(i, stop, name)
                msg.fields.append(Field(name, val, floc, ext, colon))
            if i < stop and toks[i][0] == "sym" and toks[i][1] in ",;":
                i += 1

    def tok(self, i, stop):
        return self.toks[i] if i < stop else ("eof", "", self.toks[stop][2], self.toks[stop][3])

    def ext_name(self, i, stop):
        parts = []
        while True:
            t = self.tok(i, stop)
            if t[0] != "ident":
                self.err(t, "expected an extension name inside '[ ]', found {found}")
            parts.append(t[1])
            i += 1
            t = self.tok(i, stop)
            if t[0] == "sym" and t[1] in "./":
                parts.append(t[1])
                i += 1
                continue
            if t[0] == "sym" and t[1] == "]":
                return i + 1, "".join(parts)
            self.err(t, "expected ']' to end the extension name, found {found}")

    def scalar(self, i, stop, fname):
        t = self.tok(i, stop)
        loc = self.loc(t)
        neg = False
        if t[0] == "sym" and t[1] == "-":
            neg = True
            i += 1
            t = self.tok(i, stop)
            if t[0] not in ("number", "ident"):
                self.err(t, f"expected a number after '-' in the value of '{fname}', found {{found}}")
        kind, text = t[0], t[1]
        if kind == "number":
            k, v = parse_number(text)
            return Scalar(k, -v if neg else v, "-" + text if neg else text, loc, neg), i + 1
        if kind == "ident":
            return Scalar("ident", text, "-" + text if neg else text, loc, neg), i + 1
        if kind == "string":
            parts, texts = [unescape(text, loc)], [text]
            i += 1
            t = self.tok(i, stop)
            while t[0] == "string":  # adjacent literals concatenate
                parts.append(unescape(t[1], self.loc(t)))
                texts.append(t[1])
                i += 1
                t = self.tok(i, stop)
            return Scalar("string", "".join(parts), " ".join(texts), loc), i
        self.err(t, f"expected a value for field '{fname}', found {{found}}")

    def list_message(self, i, stop):
        """A message literal inside a list value ('[{...}, {...}]'): find its matching close and
        parse the tokens in between as a message of their own."""
        toks = self.toks
        start = toks[i]
        depth, j = 0, i
        while True:
            t = self.tok(j, stop)
            if t[0] == "eof":
                self.err(t, "unexpected end of file inside a message in a list value",
                         ("message opened here", self.loc(start)))
            if t[0] == "sym" and t[1] in "{<":
                depth += 1
            elif t[0] == "sym" and t[1] in "}>":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        if ("}" if start[1] == "{" else ">") != toks[j][1]:
            self.err(toks[j], f"expected '{'}' if start[1] == '{' else '>'}' to close the message, found {{found}}",
                     ("opened here", self.loc(start)))
        if self.depth >= self.MAX_LIST_DEPTH:
            self.err(start, "messages inside list values are nested too deeply")
        self.depth += 1
        sub = self.parse(i + 1, j)
        self.depth -= 1
        sub.loc, sub.end = self.loc(start), self.loc(toks[j])
        return sub, j + 1


def parse_file(path: str, file_name: str | None = None) -> Message:
    """Read and parse a text-format file. I/O and decoding problems become NetcError."""
    name = file_name or str(path)
    text = read_source(str(path), name)
    return parse_text(text, name)
