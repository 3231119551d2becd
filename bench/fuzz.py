#!/usr/bin/env python3
"""Fuzzer: mutate the examples and the shared corpus, run them through netc, and count what comes out.

Every input is a seed file (examples/*.nd; Paleo JSON, SINGA configs and Brainstorm layouts from
the shared corpus; IR text printed by `netc opt --no-locs` on a few examples, expanded and not)
with one to three mutations: a line deleted, duplicated or swapped, a chunk of lines deleted, the
file truncated, a number replaced by an extreme (0, -1, 2^31, 2^63, 1e308, nan, inf, a string, a
list ...), an identifier swapped for another of the file's, a character inserted (brackets, '@',
quotes, NUL, an invalid UTF-8 byte, right-to-left marks ...) or deleted, a bad split suffix
appended to a name ('fc6@x', '@]', '@-1'), a string emptied or blown up, a JSON key dropped or a
JSON value replaced by one of another type. Each input runs, in-process (`netc.cli.main`, output
captured), through

    netc check FILE
    netc explain FILE --memory --brief
    netc opt FILE -p fuse
    netc export FILE --format paleo|singa|layout     (one format per input, drawn with it)

and every run has one outcome:

    ok          exit 0
    user        exit 1, and every `error:` names the input: `<file>:<line>:<col>` with 1 <= line <=
                the file's lines + 1 (IR text may also point, through its loc(...), at the file it
                was printed from). Each command line here is fixed and valid, so there are no
                command-line errors to exempt.
    unlocated   exit 1 with an error that names no line of the input (`netc: error: ...`,
                `file: error:`, a JSON path alone), or exit 1 with no error at all
    internal    exit 2 (netc's "internal error"), an exception escaping main, any other exit
                status, or "Traceback" in the output
    hang        still running after --timeout seconds (SIGALRM in the worker; a worker that does
                not answer within the timeout plus a grace period is killed and replaced)

Inputs run in --jobs worker processes (0: in this process, soft time limits only; what the CI test
uses). Inputs are drawn deterministically from --seed and their index, so a run is reproducible
whatever the number of jobs. Every unlocated, internal and hang finding is a netc bug: the first
--keep inputs of each (outcome, command, exception type or message) are minimized by delta
debugging, over lines and then characters, keeping the outcome and its signature, and written to
--out with a .json sidecar (command, outcome, message, the seed, the mutations, and for internal
errors the traceback). Each kept finding is also appended, unminimized, to --out/findings.jsonl
the moment it is found, and a run that fails late (or is interrupted) still reports and writes
the figures it has. A table per front end and command goes to stdout, the figures to
bench/results/fuzz.json (machine, date, versions). Exit status 1 when anything was found.

    python bench/fuzz.py [--seed 0] [--inputs 1000] [--jobs J] [--timeout 10] [--out DIR]
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import fnmatch
import hashlib
import io
import json
import math
import multiprocessing
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))

import results_file  # noqa: E402  (bench/results_file.py, beside this script)

FRONTENDS = ("nd", "paleo", "singa", "brainstorm", "mlir")
COMMANDS = ("check", "explain --memory --brief", "opt -p fuse",
            "export --format paleo", "export --format singa", "export --format layout")
OUTCOMES = ("ok", "user", "unlocated", "internal", "hang")
BAD = ("unlocated", "internal", "hang")
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus"
GRACE_S = 10.0  # a worker that overruns its own alarm by this much is killed


# ----------------------------------------------------------------------------------------- seeds

@dataclass
class Seed:
    frontend: str
    name: str      # the file's name (kept: formats are detected by extension and content)
    label: str     # where it came from, for reports
    text: str
    companions: dict = field(default_factory=dict)  # files read beside it (a SINGA job's .proto), unmutated


def _quiet_main(argv) -> int:
    from netc.cli import main
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return main(argv)


# IR seeds: `netc opt --no-locs` (diagnostics then point into the .mlir itself), the full pipeline
# and, for unexpanded blocks, parallel splits and phases, only select-phase; one with locations
MLIR_SEEDS = (
    ("lenet", ()), ("alexnet_4gpu", ()), ("cifar10_phases", ()), ("gan", ()), ("nin", ()),
    ("brainstorm_fixture", ()), ("alexnet_4gpu", ("-p", "select-phase")), ("gan", ("-p", "select-phase")),
    ("cifar10_phases", ("-p", "select-phase")), ("inception_v3", ("-p", "select-phase")),
    ("lenet", ("-p", "fuse")), ("lenet", ("locs",)),
)


def collect_seeds(workdir: Path, corpus: Path | None = DEFAULT_CORPUS, max_bytes: int | None = None,
                  exclude=()) -> list[Seed]:
    """Every seed, in a fixed order; the generated ones (IR text, Brainstorm layouts) are written
    under workdir. Seeds over max_bytes, or whose label matches an `exclude` glob, are left out."""
    seeds: list[Seed] = []

    def add(frontend, path: Path, label: str):
        seeds.append(Seed(frontend, path.name, label, path.read_text(encoding="utf-8")))

    for p in sorted((ROOT / "examples").glob("*.nd")):
        add("nd", p, f"examples/{p.name}")
    if corpus is not None and corpus.is_dir():
        for sub in ("paleo", "paleo-generated"):
            for p in sorted((corpus / sub).glob("*.json")):
                add("paleo", p, f"corpus/{sub}/{p.name}")
        protos = {p.name: p.read_text(encoding="utf-8") for p in sorted((corpus / "singa").glob("*.proto"))}
        for p in sorted((corpus / "singa").glob("*")):
            if p.suffix in (".conf", ".proto"):
                add("singa", p, f"corpus/singa/{p.name}")
            if p.suffix == ".conf":  # a job reads the .proto files named like it ('0.2.0_rnnlm_*.proto')
                prefix = p.name[:p.name.rfind("_") + 1]
                seeds[-1].companions = {n: t for n, t in protos.items() if n.startswith(prefix)}
        for p in sorted((corpus / "brainstorm").glob("*.json")):
            add("brainstorm", p, f"corpus/brainstorm/{p.name}")
    gen = workdir / "seeds"
    gen.mkdir(parents=True, exist_ok=True)
    # Brainstorm layouts netc writes (`netc check` verifies them)
    for ex in ("lenet", "brainstorm_fixture"):
        out = gen / f"{ex}.layout.json"
        if _quiet_main(["explain", str(ROOT / "examples" / f"{ex}.nd"), "--brief", "--layout", str(out)]) == 0:
            add("brainstorm", out, f"netc explain examples/{ex}.nd --layout")
    for ex, how in MLIR_SEEDS:
        stage = "locs" if how == ("locs",) else (how[1] if how else "all")
        out = gen / f"{ex}.{stage}.mlir"
        argv = ["opt", str(ROOT / "examples" / f"{ex}.nd"), "-o", str(out)]
        argv += [] if how == ("locs",) else ["--no-locs", *how]
        if _quiet_main(argv) == 0:
            add("mlir", out, " ".join(["netc opt", f"examples/{ex}.nd", *argv[4:]]))
    return [s for s in seeds
            if (max_bytes is None or len(s.text.encode("utf-8")) <= max_bytes)
            and not any(fnmatch.fnmatch(s.label, g) for g in exclude)]


# ------------------------------------------------------------------------------------- mutations

NUM_RE = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")
IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
STRING_RE = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
EXTREMES = ("0", "-1", "2147483648", "2147483647", "-2147483649", "4294967296", "9223372036854775808",
            "99999999999999999999999999", "1e308", "-1e308", "1e-308", "1e400", "nan", "NaN", "inf", "-inf",
            "Infinity", "0.5", "-0", "1.0", '"x"', '""', "[]", "[1, 2]", "{}", "true", "null", "x")
INSERTS = tuple("{}[]()<>@,:;=\"'#/\\*%$-+.!?|&^~`0") + (
    "\x00", "\t", "\n", "\r", " ", "\u00e9", "\u0663", "\ufeff", "\u202e", "\U0001f4a5", "\x7f",
    "\udcff",  # written with surrogateescape: the byte 0xff, which is not UTF-8
    "//", "/*", "#", "@all", "@self", "-> ", "{ }", "[[", "]]", '"\\', "\\u12")
REF_SUFFIXES = ("@x", "@]", "@-1", "@ 1", "@1@2", "@", "@all", "@self", "@0", "@1", "@99", "@\u0663",
                "@+1", "@1_0", "@1.5", "@self@all", "@2147483648")
STRINGS = ("", " ", "x", "@", "data", "conv1", "a/b", "a b", "\u00e9", "x" * 5000, "VALID", "SAME", "kTrain",
           "relu", "../../etc/passwd", "%s%n", "\\n")
JSON_VALUES = (0, -1, 2 ** 31, 2 ** 63, 1e308, float("nan"), float("inf"), "", "x", [], [1, 2], {}, None, True,
               [[1]], {"a": 1}, [2 ** 31, 0, -1], "@all")


def _lines(text):
    return text.split("\n")


def m_delete_line(rng, text):
    ls = _lines(text)
    if len(ls) < 2:
        return None
    del ls[rng.randrange(len(ls))]
    return "\n".join(ls)


def m_delete_chunk(rng, text):
    ls = _lines(text)
    if len(ls) < 4:
        return None
    i = rng.randrange(len(ls))
    del ls[i:i + rng.randint(2, 10)]
    return "\n".join(ls)


def m_duplicate_line(rng, text):
    ls = _lines(text)
    i = rng.randrange(len(ls))
    ls.insert(rng.randrange(len(ls) + 1) if rng.random() < 0.3 else i, ls[i])
    return "\n".join(ls)


def m_swap_lines(rng, text):
    ls = _lines(text)
    if len(ls) < 2:
        return None
    i = rng.randrange(len(ls))
    j = min(i + 1, len(ls) - 1) if rng.random() < 0.5 else rng.randrange(len(ls))
    ls[i], ls[j] = ls[j], ls[i]
    return "\n".join(ls)


def m_truncate(rng, text):
    return text[:rng.randrange(len(text) + 1)] if text else None


def _pick(rng, regex, text):
    ms = list(regex.finditer(text))
    return rng.choice(ms) if ms else None


def m_number(rng, text):
    m = _pick(rng, NUM_RE, text)
    if m is None:
        return None
    return text[:m.start()] + rng.choice(EXTREMES) + text[m.end():]


def m_identifier_swap(rng, text):
    ms = list(IDENT_RE.finditer(text))
    words = sorted({m.group() for m in ms})
    if len(words) < 2:
        return None
    m = rng.choice(ms)
    other = rng.choice([w for w in words if w != m.group()])
    return text[:m.start()] + other + text[m.end():]


def m_char_insert(rng, text):
    i = rng.randrange(len(text) + 1)
    return text[:i] + rng.choice(INSERTS) + text[i:]


def m_char_delete(rng, text):
    if not text:
        return None
    i = rng.randrange(len(text))
    return text[:i] + text[i + 1:]


def m_ref_suffix(rng, text):
    """A split suffix on a name: the class of 'fc6@x' (quoted names, where formats quote them)."""
    m = _pick(rng, STRING_RE if rng.random() < 0.6 else IDENT_RE, text)
    if m is None:
        return None
    end = m.end() - 1 if m.group().startswith('"') else m.end()
    return text[:end] + rng.choice(REF_SUFFIXES) + text[end:]


def m_string(rng, text):
    m = _pick(rng, STRING_RE, text)
    if m is None:
        return None
    s = rng.choice(STRINGS)
    return text[:m.start()] + json.dumps(s, ensure_ascii=False) + text[m.end():]


def _json_slots(doc):
    """(container, key) for every value in a JSON document."""
    out, stack = [], [doc]
    while stack:
        c = stack.pop()
        items = c.items() if isinstance(c, dict) else enumerate(c) if isinstance(c, list) else ()
        for k, v in items:
            out.append((c, k))
            stack.append(v)
    return out


def _json_doc(text):
    try:
        return json.loads(text)
    except ValueError:
        return None


def m_json_drop_key(rng, text):
    doc = _json_doc(text)
    slots = [(c, k) for c, k in _json_slots(doc) if isinstance(c, dict)] if doc is not None else []
    if not slots:
        return None
    c, k = rng.choice(slots)
    del c[k]
    return json.dumps(doc, indent=1)


def m_json_retype(rng, text):
    doc = _json_doc(text)
    slots = _json_slots(doc) if doc is not None else []
    if not slots:
        return None
    c, k = rng.choice(slots)
    c[k] = rng.choice(JSON_VALUES)
    return json.dumps(doc, indent=1)


MUTATORS = {
    "delete_line": (m_delete_line, 3), "delete_chunk": (m_delete_chunk, 1), "duplicate_line": (m_duplicate_line, 2),
    "swap_lines": (m_swap_lines, 2), "truncate": (m_truncate, 1), "number": (m_number, 4),
    "identifier_swap": (m_identifier_swap, 3), "char_insert": (m_char_insert, 2), "char_delete": (m_char_delete, 2),
    "ref_suffix": (m_ref_suffix, 1), "string": (m_string, 1), "json_drop_key": (m_json_drop_key, 2),
    "json_retype": (m_json_retype, 2),
}
_NAMES = list(MUTATORS)
_WEIGHTS = [MUTATORS[n][1] for n in _NAMES]


@dataclass
class Case:
    index: int
    seed: Seed
    text: str
    mutations: list
    export: str


def make_case(seed_value: int, index: int, by_frontend: dict) -> Case:
    """Input number `index` of a run: a front end (uniformly, so small front ends get their share),
    one of its seeds, 1 to 3 mutations, an export format; the same for the same seed and index."""
    rng = random.Random(f"netc-fuzz/{seed_value}/{index}")
    frontends = sorted(by_frontend, key=FRONTENDS.index)
    seed = rng.choice(by_frontend[rng.choice(frontends)])
    text, done = seed.text, []
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3))):
        for _attempt in range(8):
            name = rng.choices(_NAMES, _WEIGHTS)[0]
            new = MUTATORS[name][0](rng, text)
            if new is not None and new != text:
                text = new
                done.append(name)
                break
    return Case(index, seed, text, done, rng.choice(("paleo", "singa", "layout")))


def argv_of(command: str, path: str) -> list[str]:
    words = command.split()
    return [words[0], path, *words[1:]]


# ----------------------------------------------------------------------------- running one input

class _Hang(BaseException):
    """Raised by SIGALRM in a run that is over its time (a BaseException: netc's own `except
    Exception` must not turn it into an internal error)."""


def _on_alarm(signum, frame):
    raise _Hang()


def write_input(path: str, text: str):
    with open(path, "wb") as f:
        f.write(text.encode("utf-8", "surrogateescape"))


def place_input(folder: str, name: str, text: str, companions: dict) -> str:
    """Write the input (and its unmutated companions) into folder, alone: files an earlier input
    left there are removed, so no input reads another's mutated .proto."""
    os.makedirs(folder, exist_ok=True)
    for f in os.listdir(folder):
        if f != name and f not in companions:
            os.remove(os.path.join(folder, f))
    for n, t in companions.items():
        write_input(os.path.join(folder, n), t)
    path = os.path.join(folder, name)
    write_input(path, text)
    return path


@contextlib.contextmanager
def cached_parser():
    """netc.cli.main builds its argparse parser on every call (a quarter of a fuzz run's time, on
    these small inputs); the parser is not changed by parsing, so one is built and reused while
    fuzzing, then main is left as it was."""
    import functools

    import netc.cli as cli
    original = cli.build_parser
    cli.build_parser = functools.lru_cache(maxsize=1)(original)
    try:
        yield
    finally:
        cli.build_parser = original


def run_once(path: str, command: str, timeout: float | None, debug: bool = False) -> dict:
    """netc COMMAND on path, in this process: exit status (or what escaped), stdout, stderr, time."""
    from netc.cli import main
    out, err = io.StringIO(), io.StringIO()
    alarm = timeout is not None and threading.current_thread() is threading.main_thread()
    old_handler = None
    saved_env = os.environ.get("NETC_DEBUG")
    if debug:
        os.environ["NETC_DEBUG"] = "1"
    t0 = time.perf_counter()
    rc, escaped = None, None
    try:
        if alarm:
            old_handler = signal.signal(signal.SIGALRM, _on_alarm)
            signal.setitimer(signal.ITIMER_REAL, timeout)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv_of(command, path))
    except _Hang:
        rc = "hang"
    except SystemExit as e:
        escaped = f"SystemExit({e.code})"
    except BaseException as e:  # noqa: BLE001 - whatever escapes netc's main is a finding
        escaped = f"{type(e).__name__}: {e}"
        err.write("".join(traceback.format_exception(e)))
    finally:
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old_handler)
        if debug:
            if saved_env is None:
                os.environ.pop("NETC_DEBUG", None)
            else:
                os.environ["NETC_DEBUG"] = saved_env
    dt = time.perf_counter() - t0
    if timeout is not None and not alarm and dt > timeout:
        rc = "hang"  # no alarm off the main thread: at least the time is counted
    return {"rc": rc, "escaped": escaped, "stdout": out.getvalue(), "stderr": err.getvalue(), "seconds": dt}


_HEAD = re.compile(r"^(?P<loc>.*?): (?P<sev>error|warning|note): (?P<msg>.*)$")
_CARET = re.compile(r"^ *\^~*$")
_LOC_IN_IR = re.compile(r'loc\("((?:[^"\\\n]|\\.)*)"')
_EXC = re.compile(r"^  ([A-Za-z_][\w.]*): ?(.*)$")


def diagnostics(stderr: str) -> list[tuple[str, str, str]]:
    """(location text, severity, message) of every diagnostic netc printed; the quoted source
    line and caret under a diagnostic are skipped (they are the input's text, not diagnostics)."""
    out, lines, i = [], stderr.split("\n"), 0
    while i < len(lines):
        m = _HEAD.match(lines[i])
        if m:
            out.append((m.group("loc"), m.group("sev"), m.group("msg")))
            if i + 2 < len(lines) and _CARET.match(lines[i + 2]):
                i += 2
        i += 1
    return out


def located(loc: str, path: str, nlines: int, others=()) -> bool:
    """Whether a diagnostic's location is `path:line:col` (a JSON path may follow in parentheses)
    with a line of the input (or one past its end), or a line:col in one of `others`."""
    for f in [path, *others]:
        if loc.startswith(f + ":"):
            m = re.fullmatch(r"(\d+):(\d+)(?: \(.*\))?", loc[len(f) + 1:])
            if m is not None and 1 <= int(m.group(1)) <= (nlines + 1 if f == path else 10 ** 9):
                return True
    return False


def classify(res: dict, path: str, text: str, frontend: str, companions=()) -> tuple[str, str, str]:
    """(outcome, signature, message) of one run. The signature is what minimization keeps: the
    exception type of an internal error, the first unlocated error's message."""
    rc, out, err = res["rc"], res["stdout"], res["stderr"]
    if rc == "hang":
        return "hang", "hang", f"over the time limit ({res['seconds']:.1f} s)"
    if res["escaped"] is not None:
        etype = res["escaped"].split(":")[0]
        return "internal", f"escaped {etype}", res["escaped"].split("\n")[0][:300]
    if rc == 2 or "Traceback (most recent call last)" in out + err or "internal error" in err or rc not in (0, 1):
        lines = err.split("\n")
        for j, line in enumerate(lines):
            if "internal error" in line:
                for nxt in lines[j + 1:]:
                    m = _EXC.match(nxt)
                    if m:
                        return "internal", m.group(1), f"{m.group(1)}: {m.group(2)}"[:300]
        tb = [ln for ln in (out + err).split("\n") if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Exit)\b", ln)]
        if tb:
            return "internal", tb[-1].split(":")[0], tb[-1][:300]
        return "internal", f"exit {rc}", (err.strip().split("\n") or [""])[0][:300]
    if rc == 0:
        return "ok", "", ""
    # IR text's loc(...) point at the file it was printed from
    others = sorted({m.group(1) for m in _LOC_IN_IR.finditer(text)} - {path}) if frontend == "mlir" else []
    # a SINGA job's .proto files (unmutated) are inputs too
    others += [os.path.join(os.path.dirname(path), c) for c in companions]
    nlines = text.count("\n") + 1
    errors = [d for d in diagnostics(err) if d[1] == "error"]
    if not errors:
        first = next((ln for ln in err.split("\n") if ln.strip()), "(nothing on stderr)")
        return "unlocated", "exit 1 without an error", f"exit 1 without an `error:` line: {first[:200]}"
    for loc, _, msg in errors:
        if not located(loc, path, nlines, others):
            shown = loc.replace(path, "FILE")
            return "unlocated", _normalize(msg), f"{shown}: error: {msg}"[:300]
    return "user", "", errors[0][2][:300]


def _normalize(msg: str) -> str:
    """A message as a signature: numbers and quoted names blurred, so one bug is one finding."""
    msg = re.sub(r"'[^']*'", "'_'", msg)
    msg = re.sub(r'"[^"]*"', '"_"', msg)
    return re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "N", msg)[:160]


# ------------------------------------------------------------------------------------ the workers

def _worker(conn, workdir: str, timeout: float, mem_limit: int | None):
    """A worker process: runs (name, text, command, debug) tasks until it reads None."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if mem_limit:
        try:
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (mem_limit, mem_limit))
        except (ImportError, ValueError, OSError):
            pass
    os.makedirs(workdir, exist_ok=True)
    import gc

    import netc.cli  # noqa: F401
    gc.freeze()  # what is imported stays: collections need not rescan it
    with cached_parser():
        while True:
            try:
                task = conn.recv()
            except (EOFError, KeyboardInterrupt):
                return
            if task is None:
                return
            name, text, command, debug, companions = task
            path = place_input(os.path.join(workdir, "in"), name, text, companions)
            res = run_once(path, command, timeout, debug)
            res["path"] = path
            conn.send(res)


class Runner:
    """Runs tasks (name, text, command) in `jobs` worker processes, or in this process (jobs 0).
    A result is run_once's dict plus `path` (where the input was written)."""

    def __init__(self, jobs: int, timeout: float, workdir: Path, mem_limit: int | None = 6 << 30):
        self.jobs, self.timeout, self.workdir, self.mem_limit = jobs, timeout, Path(workdir), mem_limit
        self.workers: list = []
        self.restarts = 0
        if jobs > 0:
            method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
            self.ctx = multiprocessing.get_context(method)
            self.workers = [self._start(i) for i in range(jobs)]

    def _start(self, i):
        parent, child = self.ctx.Pipe()
        p = self.ctx.Process(target=_worker, args=(child, str(self.workdir / f"w{i}"), self.timeout, self.mem_limit),
                             daemon=True)
        p.start()
        child.close()
        return {"i": i, "proc": p, "conn": parent, "task": None, "since": 0.0}

    def _restart(self, w):
        try:
            w["proc"].kill()
        except Exception:  # noqa: BLE001
            pass
        w["proc"].join(5)
        w["conn"].close()
        self.restarts += 1
        nw = self._start(w["i"])
        w.update(nw)

    def close(self):
        for w in self.workers:
            try:
                w["conn"].send(None)
            except (OSError, BrokenPipeError):
                pass
        for w in self.workers:
            w["proc"].join(5)
            if w["proc"].is_alive():
                w["proc"].kill()
        self.workers = []

    def run_inline(self, task):
        name, text, command, debug, companions = task
        path = place_input(str(self.workdir / "inline"), name, text, companions)
        res = run_once(path, command, self.timeout, debug)
        res["path"] = path
        return res

    def imap(self, tasks):
        """(key, result) for each (key, task), in completion order."""
        tasks = iter(tasks)
        if self.jobs == 0:
            with cached_parser():
                for key, task in tasks:
                    yield key, self.run_inline(task)
            return
        pending = True
        idle = list(self.workers)
        busy = {}
        while pending or busy:
            while pending and idle:
                try:
                    key, task = next(tasks)
                except StopIteration:
                    pending = False
                    break
                w = idle.pop()
                w["task"], w["key"], w["since"] = task, key, time.monotonic()
                try:
                    w["conn"].send(task)
                except (OSError, ValueError):  # the worker died while idle: a new one takes the task
                    self._restart(w)
                    w["task"], w["key"], w["since"] = task, key, time.monotonic()
                    w["conn"].send(task)
                busy[w["i"]] = w
            if not busy:
                break
            ready = wait([w["conn"] for w in busy.values()], timeout=1.0)
            now = time.monotonic()
            for w in list(busy.values()):
                res = None
                key, task = w["key"], w["task"]  # (a restart below replaces the worker's record)
                if w["conn"] in ready:
                    try:
                        res = w["conn"].recv()
                    except (EOFError, OSError):
                        code = w["proc"].exitcode
                        res = {"rc": None, "escaped": f"WorkerDied: the worker exited ({code}) while running netc",
                               "stdout": "", "stderr": "", "seconds": now - w["since"]}
                        self._restart(w)
                elif now - w["since"] > self.timeout + GRACE_S:
                    res = {"rc": "hang", "escaped": None, "stdout": "", "stderr": "", "seconds": now - w["since"]}
                    self._restart(w)
                if res is not None:
                    res.setdefault("path", str(self.workdir / f"w{w['i']}" / "in" / task[0]))
                    w["task"], w["key"] = None, None
                    del busy[w["i"]]
                    idle.append(w)
                    yield key, res

    def run(self, task):
        return next(iter(self.imap([(0, task)])))[1]


# ----------------------------------------------------------------------------------- minimization

def ddmin(items: list, still_fails, budget: list) -> list:
    """Zeller's delta debugging over complements: a 1-minimal list for which still_fails holds
    (budget[0]: tests left, shared by the caller's passes)."""
    n = 2
    while len(items) >= 2 and budget[0] > 0:
        chunk = math.ceil(len(items) / n)
        for start in range(0, len(items), chunk):
            if budget[0] <= 0:
                break
            comp = items[:start] + items[start + chunk:]
            budget[0] -= 1
            if comp and still_fails(comp):
                items = comp
                n = max(n - 1, 2)
                break
        else:
            if n >= len(items):
                break
            n = min(len(items), 2 * n)
    return items


def minimize(runner: Runner, finding: dict, max_tests: int = 600, max_seconds: float = 120.0) -> str:
    """The smallest text (lines, then characters) with the same outcome and signature."""
    name, command, frontend = finding["name"], finding["command"], finding["frontend"]
    want = (finding["outcome"], finding["signature"])
    cache: dict = {}
    t_end = time.monotonic() + max_seconds
    hang = finding["outcome"] == "hang"
    budget = [min(max_tests, 12) if hang else max_tests]

    def fails(text: str) -> bool:
        if time.monotonic() > t_end:
            return False
        key = hashlib.sha1(text.encode("utf-8", "surrogateescape")).hexdigest()
        if key not in cache:
            res = runner.run((name, text, command, False, finding["companions"]))
            out = classify(res, res["path"], text, frontend, finding["companions"])
            cache[key] = (out[0], out[1]) == want
        return cache[key]

    text = finding["text"]
    lines = ddmin(text.split("\n"), lambda ls: fails("\n".join(ls)), budget)
    text = "\n".join(lines)
    if len(text) <= 4000:
        text = "".join(ddmin(list(text), lambda cs: fails("".join(cs)), budget))
    return text


# ------------------------------------------------------------------------------------------ a run

@dataclass
class Report:
    inputs: int = 0
    runs: int = 0
    elapsed_s: float = 0.0
    counts: dict = field(default_factory=dict)      # (frontend, command) -> Counter of outcomes
    seconds: dict = field(default_factory=dict)     # (frontend, command) -> run seconds
    findings: list = field(default_factory=list)    # kept bad runs (minimized later)
    signatures: collections.Counter = field(default_factory=collections.Counter)
    strategies: collections.Counter = field(default_factory=collections.Counter)
    restarts: int = 0
    error: str | None = None                        # what stopped the run early (the figures are partial)

    def total(self, outcome=None, frontend=None, command=None) -> int:
        n = 0
        for (f, c), cnt in self.counts.items():
            if (frontend is None or f == frontend) and (command is None or c == command):
                n += sum(cnt.values()) if outcome is None else cnt[outcome]
        return n

    @property
    def bad(self) -> int:
        return sum(self.total(o) for o in BAD)


def commands_of(case: Case) -> list[str]:
    return ["check", "explain --memory --brief", "opt -p fuse", f"export --format {case.export}"]


def fuzz(seed: int = 0, inputs: int = 1000, jobs: int | None = None, timeout: float = 10.0,
         workdir: Path | None = None, corpus: Path | None = DEFAULT_CORPUS, max_seed_bytes: int | None = None,
         exclude=(), frontends=None, keep: int = 3, progress=None,
         findings_log: Path | None = None) -> tuple[Report, list[Seed], Runner]:
    """Run `inputs` mutated inputs; returns the report, the seeds and the (open) runner. Each kept
    finding is appended, as it is found, to findings_log (JSON lines, unminimized) when given. An
    exception in the loop (or ^C) ends the run early, not the report: what was counted so far is
    returned, with the reason in rep.error."""
    jobs = (os.cpu_count() or 1) if jobs is None else jobs
    workdir = Path(workdir or tempfile.mkdtemp(prefix="netc-fuzz-"))
    seeds = collect_seeds(workdir, corpus, max_seed_bytes, exclude)
    by_frontend: dict = {}
    for s in seeds:
        if frontends is None or s.frontend in frontends:
            by_frontend.setdefault(s.frontend, []).append(s)
    if not by_frontend:
        raise SystemExit("fuzz: no seeds")
    runner = Runner(jobs, timeout, workdir / "run")
    rep = Report()
    cases: dict[int, Case] = {}
    remaining: dict[int, int] = {}

    def tasks():
        for i in range(inputs):
            case = make_case(seed, i, by_frontend)
            cases[i] = case
            cmds = commands_of(case)
            remaining[i] = len(cmds)
            rep.strategies.update(case.mutations)
            for c in cmds:
                yield (i, c), (case.seed.name, case.text, c, False, case.seed.companions)

    if findings_log is not None:
        findings_log.parent.mkdir(parents=True, exist_ok=True)
        findings_log.write_text("")
    t0 = time.monotonic()
    try:
        _fuzz_loop(rep, runner, tasks(), cases, remaining, inputs, keep, progress, findings_log, t0)
    except BaseException as e:  # noqa: BLE001 - the figures so far are still worth writing
        rep.error = "".join(traceback.format_exception(e))
        if progress:
            progress(f"fuzz: the run stopped early after {rep.inputs} inputs: {type(e).__name__}: {e}")
    rep.elapsed_s = time.monotonic() - t0
    rep.restarts = runner.restarts
    return rep, seeds, runner


def _fuzz_loop(rep: Report, runner: Runner, tasks, cases: dict, remaining: dict, inputs: int, keep: int,
               progress, findings_log: Path | None, t0: float):
    last = t0
    for (i, command), res in runner.imap(tasks):
        case = cases[i]
        outcome, sig, msg = classify(res, res["path"], case.text, case.seed.frontend, case.seed.companions)
        key = (case.seed.frontend, command)
        rep.counts.setdefault(key, collections.Counter())[outcome] += 1
        rep.seconds[key] = rep.seconds.get(key, 0.0) + res["seconds"]
        rep.runs += 1
        if outcome in BAD:
            skey = (outcome, command, sig)
            rep.signatures[skey] += 1
            if rep.signatures[skey] <= keep:
                rep.findings.append({"frontend": case.seed.frontend, "seed": case.seed.label, "name": case.seed.name,
                                     "index": i, "command": command, "outcome": outcome, "signature": sig,
                                     "message": msg, "mutations": list(case.mutations), "text": case.text,
                                     "companions": case.seed.companions})
                if findings_log is not None:
                    with open(findings_log, "a", encoding="utf-8", errors="surrogateescape") as fh:
                        fh.write(json.dumps({k: v for k, v in rep.findings[-1].items() if k != "companions"})
                                 + "\n")
        remaining[i] -= 1
        if remaining[i] == 0:
            del remaining[i], cases[i]
            rep.inputs += 1
        now = time.monotonic()
        if progress and (now - last > 30 or rep.inputs == inputs and not remaining):
            last = now
            progress(f"  {rep.inputs}/{inputs} inputs, {rep.runs} runs, {rep.inputs / (now - t0):.1f} inputs/s, "
                     f"{rep.bad} bad ({rep.total('internal')} internal, {rep.total('hang')} hangs, "
                     f"{rep.total('unlocated')} unlocated)")


def table(rep: Report) -> str:
    head = (f"{'front end':<11} {'command':<26} {'runs':>7} {'ok':>7} {'user':>7} {'unlocated':>9} "
            f"{'internal':>8} {'hangs':>6} {'bad %':>7} {'ms/run':>7}")
    rows = [head, "-" * len(head)]

    def row(f, c, cnt, secs):
        n = sum(cnt.values())
        bad = sum(cnt[o] for o in BAD)
        return (f"{f:<11} {c:<26} {n:>7} {cnt['ok']:>7} {cnt['user']:>7} {cnt['unlocated']:>9} {cnt['internal']:>8} "
                f"{cnt['hang']:>6} {100 * bad / max(n, 1):>6.2f}% {1000 * secs / max(n, 1):>7.1f}")

    for f in FRONTENDS:
        keys = [k for k in rep.counts if k[0] == f]
        if not keys:
            continue
        for c in COMMANDS:
            if (f, c) in rep.counts:
                rows.append(row(f, c, rep.counts[(f, c)], rep.seconds[(f, c)]))
        tot = collections.Counter()
        for k in keys:
            tot.update(rep.counts[k])
        rows.append(row(f, "(all)", tot, sum(rep.seconds[k] for k in keys)))
    tot = collections.Counter()
    for cnt in rep.counts.values():
        tot.update(cnt)
    rows.append("-" * len(head))
    rows.append(row("all", "(all)", tot, sum(rep.seconds.values())))
    return "\n".join(rows)


def write_findings(rep: Report, runner: Runner, out: Path, minimize_them: bool = True, log=print) -> list[dict]:
    """Each kept finding, minimized, as NNN-<outcome>-<seed name> plus .orig and .json."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.iterdir():  # a previous run's findings (only the files this script writes)
        if re.match(r"^\d{3}-(unlocated|internal|hang)-", old.name):
            old.unlink()
    written = []
    for n, f in enumerate(rep.findings):
        t0 = time.monotonic()
        base = f"{n:03d}-{f['outcome']}-{f['name']}"
        stem, ext = os.path.splitext(base)
        if f["name"].endswith(".layout.json"):
            stem, ext = base[:-len(".layout.json")], ".layout.json"
        side = {k: f[k] for k in ("frontend", "seed", "command", "outcome", "signature", "message", "mutations")}
        side["argv"] = ["netc", *argv_of(f["command"], base)]
        side["occurrences"] = rep.signatures[(f["outcome"], f["command"], f["signature"])]
        side["original_bytes"] = len(f["text"].encode("utf-8", "surrogateescape"))
        # the original first, so that a minimization that goes wrong still leaves the finding
        write_input(str(out / base), f["text"])
        write_input(str(out / f"{stem}.orig{ext}"), f["text"])
        small = f["text"]
        try:
            if minimize_them:
                small = minimize(runner, f)
                write_input(str(out / base), small)
            if f["outcome"] == "internal":
                res = runner.run((f["name"], small, f["command"], True, f["companions"]))
                side["traceback"] = (res["stderr"] + res["stdout"])[-6000:]
        except Exception as e:  # noqa: BLE001 - keep the finding, say why it is not minimized
            side["minimize_error"] = f"{type(e).__name__}: {e}"
        side["bytes"] = len(small.encode("utf-8", "surrogateescape"))
        with open(out / f"{base}.json", "w") as fh:
            json.dump(side, fh, indent=1)
        log(f"  {base}: {f['outcome']} in `netc {f['command']}`: {f['message'][:150]} "
            f"({side['original_bytes']} -> {side['bytes']} bytes, {time.monotonic() - t0:.1f} s)")
        written.append(dict(side, file=base))
    return written


def document(rep: Report, seeds, args: dict, findings: list[dict]) -> dict:
    import lark

    import netc
    rows = []
    for (f, c), cnt in sorted(rep.counts.items(), key=lambda kv: (FRONTENDS.index(kv[0][0]), COMMANDS.index(kv[0][1]))):
        n = sum(cnt.values())
        rows.append({"frontend": f, "command": c, "inputs": n, **{o: cnt[o] for o in OUTCOMES},
                     "ms_per_run": round(1000 * rep.seconds[(f, c)] / max(n, 1), 2)})
    per_frontend = {}
    for f in FRONTENDS:
        if any(k[0] == f for k in rep.counts):
            per_frontend[f] = {o: rep.total(o, frontend=f) for o in OUTCOMES}
            per_frontend[f]["runs"] = rep.total(frontend=f)
    return {
        "benchmark": "fuzz", "date": results_file.now(), "machine": results_file.machine(),
        "versions": {"netc": netc.__version__, "lark": lark.__version__},
        "config": args,
        "inputs": rep.inputs, "runs": rep.runs, "elapsed_s": round(rep.elapsed_s, 1),
        "inputs_per_s": round(rep.inputs / max(rep.elapsed_s, 1e-9), 2),
        "runs_per_s": round(rep.runs / max(rep.elapsed_s, 1e-9), 2),
        "totals": {o: rep.total(o) for o in OUTCOMES},
        "located_errors_pct": round(100 * rep.total("user") / max(1, rep.total("user") + rep.total("unlocated")), 3),
        "per_frontend": per_frontend, "table": rows,
        "worker_restarts": rep.restarts,
        "stopped_early": rep.error,
        "seeds": {f: sorted(s.label for s in seeds if s.frontend == f) for f in FRONTENDS},
        "mutations": dict(sorted(rep.strategies.items())),
        "signatures": [{"outcome": o, "command": c, "signature": s, "count": k}
                       for (o, c, s), k in rep.signatures.most_common()],
        "findings": findings,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--inputs", type=int, default=1000, metavar="N", help="mutated inputs (each runs 4 commands)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, metavar="J",
                    help="worker processes (default: every core; 0: in this process, soft time limits only)")
    ap.add_argument("--timeout", type=float, default=10.0, metavar="S", help="seconds per run before it is a hang")
    ap.add_argument("--out", default=str(ROOT / "build" / "fuzz-failures"), metavar="DIR",
                    help="where minimized failing inputs go (default build/fuzz-failures)")
    ap.add_argument("--results", default=str(BENCH / "results" / "fuzz.json"), metavar="FILE",
                    help="the figures as JSON (default bench/results/fuzz.json; '-' for none)")
    ap.add_argument("--corpus", default=str(DEFAULT_CORPUS), metavar="DIR", help="the shared corpus")
    ap.add_argument("--max-seed-bytes", type=int, default=None, metavar="B", help="leave out bigger seeds")
    ap.add_argument("--exclude", action="append", default=[], metavar="GLOB", help="leave out seeds (by label)")
    ap.add_argument("--frontends", default=None, help="comma-separated subset of " + ",".join(FRONTENDS))
    ap.add_argument("--keep", type=int, default=3, help="findings minimized and written per signature")
    ap.add_argument("--no-minimize", action="store_true")
    ap.add_argument("--workdir", default=None, help="scratch folder (default: a new temporary one)")
    a = ap.parse_args(argv)
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    workdir = Path(a.workdir) if a.workdir else Path(tempfile.mkdtemp(prefix="netc-fuzz-"))
    out = Path(a.out)
    rep, seeds, runner = fuzz(a.seed, a.inputs, a.jobs, a.timeout, workdir, Path(a.corpus), a.max_seed_bytes,
                              a.exclude, a.frontends.split(",") if a.frontends else None, a.keep, progress=log,
                              findings_log=out / "findings.jsonl")
    findings = []
    try:
        if rep.error:
            print(f"netc fuzz: the run stopped early; the figures below are partial:\n{rep.error}")
        print(f"netc fuzz: seed {a.seed}, {rep.inputs} inputs ({rep.runs} runs) from {len(seeds)} seeds in "
              f"{rep.elapsed_s:.0f} s on {a.jobs or 1} job(s): {rep.inputs / max(rep.elapsed_s, 1e-9):.1f} inputs/s")
        print(table(rep))
        n_err = rep.total("user") + rep.total("unlocated")
        print(f"internal errors {rep.total('internal')}, hangs {rep.total('hang')}, unlocated {rep.total('unlocated')}; "
              f"errors located: {100 * rep.total('user') / max(n_err, 1):.3f}% of {n_err}")
        if rep.findings:
            print(f"{len(rep.signatures)} distinct finding(s), {len(rep.findings)} kept "
                  f"(unminimized in {out / 'findings.jsonl'}); minimizing into {out}")
            findings = write_findings(rep, runner, out, not a.no_minimize, log=print)
    finally:
        runner.close()
        if not a.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
        if a.results != "-":  # written whatever happened above: the figures are counted already
            cfg = {"seed": a.seed, "inputs": a.inputs, "jobs": a.jobs, "timeout_s": a.timeout,
                   "max_seed_bytes": a.max_seed_bytes, "exclude": a.exclude, "frontends": a.frontends}
            results_file.write(a.results, document(rep, seeds, cfg, findings), str(ROOT))
    return 1 if rep.bad or rep.error else 0


if __name__ == "__main__":
    sys.exit(main())
