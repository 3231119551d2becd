"""Parse IR text (MLIR's generic form, as netc.ir.printer writes it) back into IR.

    %conv1 = "netc.conv2d"(%data) ({ ...nested ops... }) {name = "conv1", strides = [4, 4]}
        : (tensor<128x224x224x3xf32>) -> tensor<128x54x54x64xf32> loc("alexnet.nd":7:3)

The invariant is `print_ir(parse_ir(print_ir(m))) == print_ir(m)` at every stage of the pipeline.

A hand-written tokenizer and recursive-descent parser rather than Lark: the whole text is split
into tokens by one regular expression (`findall`, in C), and the parser walks the token list.
Token positions are not kept on the fast path; when a diagnostic needs one, the text is scanned
again with the same expression (`finditer`) and the token is found by its index. That keeps
parsing within about twice the time of printing.

SSA values are scoped as in MLIR: a value is visible after its definition in its own region and
in the regions nested in it, not after its region closes. (The printer makes names unique across
the whole module; a value used outside its region is reported as such.) `//` line comments are
skipped, so a `--print-ir-after-all` dump with its banner line parses too.

Ops of the netc dialect must be known (netc.ops or the structural ops); other dialects'
ops are taken as they come, so the parser stays generic.

Errors in the text raise NetcError with file:line:col. Syntax errors stop at once; problems that
do not derail the parse (undefined or twice-defined values, operand and result counts, operand
types, unknown dtypes and ops) are collected and reported together (at most 20).

Parsed ops get attr_locs {"name": op.loc} (layers) or {}: where attributes were written in the
original source is not part of the IR text, so diagnostics about them point at the op.
"""
from __future__ import annotations

import bisect
import gc
import re

from ..diagnostics import SOURCES, UNKNOWN_LOC, Diagnostic, Loc, NetcError, did_you_mean
from .core import (DTYPES, STRUCTURAL_OPS, Module, Operation, Region, SymbolRef, TensorType, registered_op,
                   registered_op_names)

_STR = r'"(?:[^"\\\n]|\\.)*'  # a string without its closing quote
_T = r"tensor<[^>\n]*>"
# Order matters: the first alternative that matches wins. The first few are "composite" tokens
# for the forms the printer writes most (a key with its '=', a list of ints or of plain strings,
# a whole function type, a whole loc): they cut the token count nearly in half. Anything they
# do not cover (other spacing, escapes in strings) falls through to the plain tokens, which the
# parser accepts everywhere too.
_TOKEN = re.compile(r"\s*(" + "|".join([
    r"[(){}\]=,]",
    r"[A-Za-z_][A-Za-z0-9_$.]* =(?!=)",             # key =
    _STR + '"',                                     # "string"
    r"%[A-Za-z0-9_$.\-#]+",                         # %ssa (the printer writes %x#0 for multi-results)
    r'loc\((?:unknown|"[^"\\\n]*"(?::[0-9]+:[0-9]+)?)\)',  # loc("file":1:2), loc(unknown)
    r"\[-?[0-9]+(?:, -?[0-9]+)*\]",                 # [1, 2, 3]
    r'\["[^"\\\n]*"(?:, "[^"\\\n]*")*\]',           # ["a", "b"]
    r"\[",
    rf": \((?:{_T}(?:, {_T})*)?\) -> (?:{_T}|\((?:{_T}(?:, {_T})*)?\))",  # : (T, T) -> T
    r":",
    _STR,                                           # unterminated string (reported as such)
    r"@(?:[A-Za-z_][A-Za-z0-9_$.]*|" + _STR + '")',  # @symbol, @"quoted symbol"
    _T,                                             # tensor<2x3xf32>, tensor<*xf32>, tensor<f32>
    r"->",
    r"-?[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?",   # 3, -2, 0.5, 1e-05
    r"[A-Za-z_][A-Za-z0-9_$.]*",                    # bare keys and keywords
    r"//[^\n]*",                                    # comment (dropped)
    r"\S",                                          # anything else: an error token
]) + ")")
_TENSOR = re.compile(r"tensor<(\*x|(?:-?[0-9]+x)*)([A-Za-z][A-Za-z0-9_]*)>")
_ESCAPE = re.compile(r'\\([0-9A-Fa-f]{2}|.)')
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "r": "\r"}
_MAX_ERRORS = 20
_EOF = ""  # sentinel token at the end of the list
_WORDS = {"true": True, "false": False, "none": None}


class _SyntaxError(Exception):
    def __init__(self, message: str, index: int, offset: int = 0, width: int = 0):
        self.message, self.index, self.offset, self.width = message, index, offset, width


MAX_LOC_NUMBER = 2 ** 31 - 1  # lines and columns of loc(...), as MLIR's (unsigned 32-bit, kept positive here)


def _describe(tok: str) -> str:
    if tok == _EOF:
        return "end of file"
    if len(tok) > 40:
        tok = tok[:37] + "..."
    return f"'{tok}'"


class _Parser:
    def __init__(self, text: str, file: str):
        self.text, self.file = text, file
        toks = _TOKEN.findall(text)
        self.comments = "//" in text
        if self.comments:
            toks = [t for t in toks if t[:2] != "//"]
        toks += [_EOF] * 4  # so that looking a few tokens ahead never runs off the end
        self.toks = toks
        self.i = 0
        # name -> (Value, its type's text, token index of the definition); only the values
        # visible here: those of enclosing regions, as in MLIR
        self.values: dict[str, tuple] = {}
        self.defined: list[str] = []  # names defined in the region being parsed
        self.closed: dict[str, int] = {}  # names of regions already closed -> definition index
        self.known_ops: dict[str, bool] = {}
        self.types: dict[str, TensorType] = {}
        self.strings: dict[str, str] = {}
        self.errors: list[tuple] = []  # (message, token index, offset, width, notes)
        self.no_loc: list[tuple] = []  # (op, token index): ops written without loc(...)

    # -- errors ----------------------------------------------------------------------------
    def fail(self, message: str, index: int | None = None, offset: int = 0, width: int = 0):
        raise _SyntaxError(message, self.i if index is None else index, offset, width)

    def expect(self, what: str, index: int):
        self.fail(f"expected {what}, got {_describe(self.toks[index])}", index)

    def error(self, message: str, index: int, offset: int = 0, width: int = 0, notes=()):
        self.errors.append((message, index, offset, width, list(notes)))
        if len(self.errors) >= _MAX_ERRORS:
            self.fail("too many errors; stopping here", index)

    def positions(self, wanted) -> dict[int, int]:
        """Character offsets of the tokens with the given indices (scans the text again)."""
        wanted = set(wanted)
        out: dict[int, int] = {}
        k = 0
        end = 0
        last = max(wanted) if wanted else -1
        for m in _TOKEN.finditer(self.text):
            if self.comments and m.group()[:2] == "//":
                continue
            if k in wanted:
                out[k] = m.start(1)
            end = m.end()
            k += 1
            if k > last:
                break
        for w in wanted:
            if w not in out:  # the end-of-file sentinel: just after the last token
                out[w] = end
        return out

    def locs(self, wanted) -> dict[int, Loc]:
        pos = self.positions(wanted)
        starts = self._line_starts()
        out = {}
        for k, p in pos.items():
            line = bisect.bisect_right(starts, p)
            out[k] = Loc(self.file, line, p - starts[line - 1] + 1)
        return out

    def _line_starts(self):
        starts = [0]
        find = self.text.find
        p = find("\n")
        while p >= 0:
            starts.append(p + 1)
            p = find("\n", p + 1)
        return starts

    def diagnostics(self, extra: _SyntaxError | None = None) -> list[Diagnostic]:
        errs = list(self.errors)
        if extra is not None:
            errs.append((extra.message, extra.index, extra.offset, extra.width, []))
        wanted = {e[1] for e in errs} | {n[1] for e in errs for n in e[4] if n[1] is not None}
        locs = self.locs(wanted)
        out = []
        for message, index, offset, width, notes in errs:
            loc = locs[index]
            if offset:
                loc = Loc(loc.file, loc.line, loc.col + offset)
            if not width:
                tok = self.toks[index] if index < len(self.toks) else _EOF
                width = max(1, len(tok) - offset) if "\n" not in tok else 1
            d = Diagnostic("error", message, loc, width=width)
            for note, nindex in notes:
                d.note(note, None if nindex is None else locs[nindex])
            out.append(d)
        return out

    # -- tokens ----------------------------------------------------------------------------
    def string(self, tok: str, index: int) -> str:
        s = self.strings.get(tok)
        if s is not None:
            return s
        if len(tok) < 2 or tok[-1] != '"':
            self.fail("unterminated string", index)
        s = tok[1:-1]
        if "\\" in s:
            if (len(s) - len(s.rstrip("\\"))) % 2:  # the closing quote is escaped
                self.fail("unterminated string", index)

            def unescape(m):
                e = m.group(1)
                if len(e) == 2:
                    return chr(int(e, 16))
                r = _ESCAPES.get(e)
                if r is None:
                    self.fail(f"unknown escape '\\{e}' in string", index, offset=1 + m.start(), width=2)
                return r
            s = _ESCAPE.sub(unescape, s)
        if len(self.strings) < 100000:
            self.strings[tok] = s
        return s

    def tensor_type(self, tok: str, index: int, offset: int = 0) -> TensorType:
        """The type `tok` (cached by its text); `offset` is where it starts inside token `index`."""
        t = self.types.get(tok)
        if t is not None:
            return t
        if not tok.startswith("tensor<"):
            if offset:
                self.fail(f"expected a type like tensor<2x3xf32>, got '{tok}'", index, offset, len(tok))
            self.expect("a type like tensor<2x3xf32>", index)
        m = _TENSOR.fullmatch(tok)
        if m is None:
            self.fail(f"malformed tensor type '{tok}': expected tensor<2x3xf32>, tensor<*xf32> or tensor<f32>",
                      index, offset, len(tok))
        dims, dtype = m.group(1), m.group(2)
        if dtype not in DTYPES:
            self.error(f"unknown dtype '{dtype}' (dtypes: {', '.join(DTYPES)})", index, offset=offset + m.start(2),
                       width=max(1, len(dtype)))
            dtype = "f32"
        shape = None if dims == "*x" else tuple(int(d) for d in dims.split("x")[:-1])
        t = TensorType(shape, dtype)
        self.types[tok] = t
        return t

    # -- attributes ------------------------------------------------------------------------
    def value(self):
        """One attribute value starting at token self.i; leaves self.i after it."""
        toks = self.toks
        i = self.i
        t = toks[i]
        c = t[:1]
        if c == '"':
            self.i = i + 1
            s = self.strings.get(t)
            return s if s is not None else self.string(t, i)
        if c == "[":
            if len(t) > 1:  # a whole list of ints or of plain strings in one token
                self.i = i + 1
                if t[1] == '"':
                    return t[2:-2].split('", "')
                return [int(x) for x in t[1:-1].split(", ")]
            i += 1
            out = []
            if toks[i] == "]":
                self.i = i + 1
                return out
            while True:
                self.i = i
                out.append(self.value())
                i = self.i
                t = toks[i]
                if t == ",":
                    i += 1
                elif t == "]":
                    self.i = i + 1
                    return out
                else:
                    self.expect("',' or ']' in a list", i)
        if c == "{":
            self.i = i + 1
            return self.dict_body()
        if c.isdigit() or (c == "-" and t[1:2].isdigit()):
            self.i = i + 1
            try:
                return int(t)
            except ValueError:
                return float(t)
        if t in _WORDS:
            self.i = i + 1
            return _WORDS[t]
        if c == "@":
            self.i = i + 1
            name = t[1:]
            return SymbolRef(self.string(name, i) if name[:1] == '"' else name)
        if c == "t" and t.startswith("tensor<"):
            self.i = i + 1
            return self.types.get(t) or self.tensor_type(t, i)
        self.expect("an attribute value", i)

    def dict_body(self) -> dict:
        """Entries after '{' up to and including '}'. Plain values are read inline (the hot path)."""
        toks = self.toks
        strings = self.strings
        i = self.i
        out: dict = {}
        if toks[i] == "}":
            self.i = i + 1
            return out
        while True:
            t = toks[i]
            if t.endswith(" ="):  # 'key =' in one token
                key = t[:-2]
                i += 1
            else:
                c = t[:1]
                if c == '"':
                    key = self.string(t, i)
                elif c.isalpha() or c == "_":
                    key = t
                else:
                    self.expect("an attribute name", i)
                if toks[i + 1] != "=":
                    self.expect(f"'=' after attribute name '{key}'", i + 1)
                i += 2
            if key in out:
                self.error(f"duplicate attribute '{key}'", i - 1 if t.endswith(" =") else i - 2,
                           width=len(key))
            t = toks[i]
            c = t[:1]
            if c == '"':
                v = strings.get(t)
                out[key] = v if v is not None else self.string(t, i)
                i += 1
            elif c == "[" and len(t) > 1:
                out[key] = t[2:-2].split('", "') if t[1] == '"' else [int(x) for x in t[1:-1].split(", ")]
                i += 1
            else:
                self.i = i
                out[key] = self.value()
                i = self.i
            t = toks[i]
            if t == ",":
                i += 1
            elif t == "}":
                self.i = i + 1
                return out
            else:
                self.expect("',' or '}' in an attribute dictionary", i)

    # -- operations ------------------------------------------------------------------------
    def op(self, top: bool = False) -> Operation:
        toks = self.toks
        values = self.values
        i = self.i
        start = i
        names = None
        t = toks[i]
        if t[:1] == "%":
            names = [t]
            i += 1
            while toks[i] == ",":
                i += 1
                if toks[i][:1] != "%":
                    self.expect("a result name like %x", i)
                names.append(toks[i])
                i += 1
            if toks[i] != "=":
                self.expect("'=' after the result names", i)
            i += 1
        t = toks[i]
        if t[:1] != '"':
            self.expect('"builtin.module"' if top else 'an operation like "netc.conv2d"(...)' if names
                        else "an operation or '}'", i)
        name_index = i
        opname = self.strings.get(t) or self.string(t, i)
        known = self.known_ops.get(opname)
        if known is None:
            known = self.known_ops[opname] = _known_op(opname)
        if not known:
            self.unknown_op(opname, i)
        i += 1
        if toks[i] != "(":
            self.expect("'(' before the operands", i)
        i += 1
        operands = []
        undefined = False
        if toks[i] != ")":
            while True:
                t = toks[i]
                if t[:1] != "%":
                    self.expect("an operand like %x", i)
                d = values.get(t)
                if d is None:
                    if t in self.closed:
                        self.error(f"use of value '{t}' outside the region that defines it", i,
                                   notes=[("defined here", self.closed[t])])
                    else:
                        self.error(f"use of undefined value '{t}'", i)
                    undefined = True
                else:
                    operands.append(d)
                i += 1
                t = toks[i]
                if t == ",":
                    i += 1
                elif t == ")":
                    break
                else:
                    self.expect("',' or ')' after an operand", i)
        i += 1
        regions = []
        if toks[i] == "(":
            i += 1
            while True:
                if toks[i] != "{":
                    self.expect("'{' to open a region", i)
                self.i = i + 1
                ops = []
                outer, self.defined = self.defined, []
                while toks[self.i] != "}":
                    if toks[self.i] == _EOF:
                        self.fail(f"unexpected end of file: the region of '{opname}' is not closed "
                                  "(expected '}')")
                    ops.append(self.op())
                for n in self.defined:  # the region's values are not visible after it
                    self.closed[n] = values.pop(n)[2]
                self.defined = outer
                regions.append(Region(ops))
                i = self.i + 1
                t = toks[i]
                if t == ",":
                    i += 1
                elif t == ")":
                    i += 1
                    break
                else:
                    self.expect("',' or ')' after a region", i)
        attrs = None
        if toks[i] == "{":
            self.i = i + 1
            attrs = self.dict_body()
            i = self.i
        type_index = i
        ins, outs, result_types, i = self.function_type(i)
        t = toks[i]
        loc = None
        if t[:3] == "loc":
            loc, i = self.loc(i)
        self.i = i

        # -- checks that need the whole op ---------------------------------------------------
        if not undefined:
            if len(ins) != len(operands):
                self.error(f"'{opname}' has {len(operands)} operand{'s' if len(operands) != 1 else ''} but its "
                           f"function type lists {len(ins)}", *self.type_pos(type_index, -1))
            else:
                for k, (v, s) in enumerate(zip(operands, ins)):
                    if v[1] != s and v[0].type != self.types.get(s):
                        self.error(f"operand {k} of '{opname}' has type {s} here, but its definition "
                                   f"says {v[1]}", *self.type_pos(type_index, k), notes=[("defined here", v[2])])
        if names is not None and len(names) != len(outs):
            self.error(f"'{opname}' defines {len(names)} result{'s' if len(names) != 1 else ''} but its "
                       f"function type has {len(outs)}", start, width=1)

        if top and opname == "builtin.module":
            if operands or result_types or len(regions) != 1:
                self.fail('"builtin.module" takes no operands, has no results and one region', name_index)
            op = Module(regions[0].ops, loc=loc, attrs=attrs)
        else:
            op = Operation(opname, [v[0] for v in operands], result_types, attrs, regions, loc)
        # Where each attribute was written is not in the IR text, except that a layer's op loc is
        # where its name was written. A map rather than None: passes add entries to it
        # (expand-model-parallel's clones; util.clone_layer copies an empty map as None).
        op.attr_locs = {"name": op.loc} if attrs and "name" in attrs else {}
        if loc is None:
            self.no_loc.append((op, start))
        if names is not None:
            for k, (n, r, s) in enumerate(zip(names, op.results, outs)):
                prev = values.get(n)
                if prev is not None:
                    self.error(f"value '{n}' is defined twice", start + 2 * k, notes=[("first defined here", prev[2])])
                    continue
                values[n] = (r, s, start + 2 * k)
                self.defined.append(n)
        return op

    def function_type(self, i):
        """`: (T, ...) -> T` or `-> (T, ...)`; returns (operand type texts, result type texts,
        result TensorTypes, next token index)."""
        toks = self.toks
        types = self.types
        t = toks[i]
        if t[:3] == ": (":  # the whole function type in one token
            inner, _, outs = t[3:].partition(") -> ")
            ins = inner.split(", ") if inner else []
            if outs[0] == "(":
                outs = outs[1:-1].split(", ") if len(outs) > 2 else []
            else:
                outs = [outs]
            for s in ins:
                if s not in types:
                    self.tensor_type(s, i, t.find(s))
            return ins, outs, [types.get(s) or self.tensor_type(s, i, t.rfind(s)) for s in outs], i + 1
        if t != ":":
            self.expect("':' and the function type", i)
        i += 1
        if toks[i] != "(":
            self.expect("'(' to start the operand types", i)
        i += 1
        ins = []
        if toks[i] != ")":
            while True:
                ins.append(toks[i])
                self.tensor_type(toks[i], i)
                i += 1
                t = toks[i]
                if t == ",":
                    i += 1
                elif t == ")":
                    break
                else:
                    self.expect("',' or ')' after an operand type", i)
        i += 1
        if toks[i] != "->":
            self.expect("'->' and the result types", i)
        i += 1
        if toks[i] == "(":
            i += 1
            outs = []
            if toks[i] != ")":
                while True:
                    outs.append(toks[i])
                    i += 1
                    t = toks[i]
                    if t == ",":
                        i += 1
                    elif t == ")":
                        break
                    else:
                        self.expect("',' or ')' after a result type", i)
            first = i - 2 * len(outs) + 1
            i += 1
        else:
            outs = [toks[i]]
            first = i
            i += 1
        return ins, outs, [self.tensor_type(s, first + 2 * k) for k, s in enumerate(outs)], i

    def type_pos(self, index: int, k: int):
        """(token index, offset, width) of operand type k (-1: all of them, in parentheses) of
        the function type that starts at token `index`."""
        t = self.toks[index]
        if t[:3] == ": (":
            inner = t[3:].partition(") -> ")[0]
            if k < 0:
                return index, 2, len(inner) + 2
            types = inner.split(", ")
            return index, 3 + sum(len(s) + 2 for s in types[:k]), len(types[k])
        return (index + 1, 0, 1) if k < 0 else (index + 2 + 2 * k, 0, 0)

    def unknown_op(self, opname: str, index: int):
        known = sorted(STRUCTURAL_OPS | set(registered_op_names()))
        hint = did_you_mean(opname, known)
        self.error(f"unknown operation '{opname}'", index, offset=1, width=len(opname),
                   notes=[(f"did you mean '{hint}'?", None)] if hint else [])

    def loc_number(self, digits: str, index: int) -> int:
        """A line or column of loc("file":line:col): from 1 (netc's line 0 means "no line", and a
        location without one is written loc("file")) to MAX_LOC_NUMBER."""
        n = int(digits) if len(digits) <= 10 else MAX_LOC_NUMBER + 1
        if not 1 <= n <= MAX_LOC_NUMBER:
            self.fail(f"a line or column in loc(...) must be from 1 to {MAX_LOC_NUMBER}, got {digits[:20]}"
                      f"{'...' if len(digits) > 20 else ''} (write loc(\"file\") for a file without a line)", index)
        return n

    def loc(self, i):
        toks = self.toks
        t = toks[i]
        if t[3:4] == "(":  # the whole loc(...) in one token
            if t == "loc(unknown)":
                return UNKNOWN_LOC, i + 1
            if t[-2] == '"':
                return Loc(self.string(t[4:-1], i)), i + 1
            f, line, col = t[4:-1].rsplit(":", 2)
            file = self.strings.get(f) or self.string(f, i)
            return Loc(file, self.loc_number(line, i), self.loc_number(col, i)), i + 1
        if t != "loc":
            self.expect("loc(...) or the next operation", i)
        if toks[i + 1] != "(":
            self.expect("'(' after loc", i + 1)
        t = toks[i + 2]
        if t == "unknown":
            loc = UNKNOWN_LOC
            i += 3
        elif t[:1] == '"':
            file = self.string(t, i + 2)
            i += 3
            if toks[i] == ":":
                line, col = toks[i + 1], toks[i + 3]
                if not line.isdigit():
                    self.expect("a line number", i + 1)
                if toks[i + 2] != ":":
                    self.expect("':' and a column number", i + 2)
                if not col.isdigit():
                    self.expect("a column number", i + 3)
                loc = Loc(file, self.loc_number(line, i + 1), self.loc_number(col, i + 3))
                i += 4
            else:
                loc = Loc(file)
        else:
            self.expect('unknown or "file":line:col in loc(...)', i + 2)
        if toks[i] != ")":
            self.expect("')' to close loc(...)", i)
        return loc, i + 1

    def module(self) -> Module:
        toks = self.toks
        t = toks[0]
        if t[:1] == "%" or (t[:1] == '"' and t != '"builtin.module"'):
            self.fail('expected "builtin.module" at the top level of IR text', 0)
        op = self.op(top=True)
        if not isinstance(op, Module):
            self.fail('expected "builtin.module" at the top level of IR text', 0)
        if toks[self.i] != _EOF:
            self.expect("end of file after the module", self.i)
        return op


def _known_op(name: str) -> bool:
    """Ops of the netc dialect must be defined (netc.ops) or structural; other dialects'
    ops (builtin.module) are taken as they are."""
    if not name.startswith("netc.") or name in STRUCTURAL_OPS:
        return True
    return registered_op(name) is not None


def parse_ir(text: str, file: str = "<input>") -> Module:
    """Parse a printed module (MLIR generic form) back into IR. Raises NetcError on bad input."""
    SOURCES.add(file, text)
    p = _Parser(text, file)
    # The parse allocates hundreds of thousands of objects that all stay alive; the cyclic
    # garbage collector would walk them again and again for nothing (about a third of the time).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        module = p.module()
    except _SyntaxError as e:
        raise NetcError(p.diagnostics(e)) from None
    except RecursionError:
        raise NetcError("IR text is nested too deeply", Loc(file, 1, 1)) from None
    finally:
        if gc_was_enabled:
            gc.enable()
    if p.errors:
        raise NetcError(p.diagnostics())
    if p.no_loc:
        # like MLIR: an op written without loc(...) is located where it is in the IR text
        locs = p.locs(k for _, k in p.no_loc)
        for op, k in p.no_loc:
            op.loc = locs[k]
    return module
