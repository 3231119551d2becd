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
    netc explain FILE --brief --train --loss softmax --memory    (inputs numbered 1 mod 3)
    netc explain FILE --workers 2 --device titanx              (inputs numbered 2 mod 3)
    netc compile FILE --target interp -o OUT                   (inputs numbered 0 mod 3, small seeds only)

The last three cost several times the first four (the backward pass, the simulation, the
interpreter's parameters), so each runs on its own third of the inputs, by the input's number
(EXPENSIVE, recorded in the results' config): a 100,000-input run still gives each of them tens
of thousands of runs (compile: thousands), and the campaign fits an hour on two cores. The
runs per front end and command are in the results' table.

And four more front ends, one command each, on a small network (SMALL_ND, written beside the input):
the Python API (`api`: a generated script of netc.layer builder calls, good arguments mostly and bad
ones here and there, run as a user runs it), tuning files (`run NET --target interp --tuning FILE`,
mutated like JSON text), parameter files (`run NET --reference --params FILE`, .npz and .safetensors)
and training sets (`run NET --reference --train --steps 1 --data FILE`, .npz), the last two mutated
as files of arrays (an array dropped, renamed, reshaped, retyped, given NaN or an out-of-range label,
a safetensors header's dtype/shape/offsets changed) or as bytes (truncated, flipped, replaced).
Every run has one outcome:

    ok          exit 0
    user        exit 1, and every `error:` names the input: `<file>:<line>:<col>` with 1 <= line <=
                the file's lines + 1 (IR text may also point, through its loc(...), at the file it
                was printed from). Each command line here is fixed and valid, so there are no
                command-line errors to exempt.
                For a Python API script, Python's own error at the script's line (a NameError)
                counts as `user` too. For an .npz/.safetensors input, which has no lines, an error
                is located when it names the file (its location is the file, or its message quotes
                the file's name) and what in it is wrong: one of the file's arrays or one the
                network expects, quoted ('conv1.weight'); or, where the format's own reader (numpy,
                the safetensors package) refuses the file whole, that it is not such a file
                ('is not a valid .safetensors file', 'cannot read ... as an .npz archive'); or, for
                an archive without arrays, that it 'holds no arrays' (classify_binary).
    unlocated   exit 1 with an error that names no line of the input (`netc: error: ...`,
                `file: error:`, a JSON path alone), or exit 1 with no error at all
    internal    exit 2 (netc's "internal error"; for an API script, an exception other than netc's
                own errors raised inside the netc package), an exception escaping main, any other exit
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

# the interpreter target (compile/run --target interp) needs netc.kernels imported under Triton's
# interpreter; every run here is in-process, so the kernels are imported that way from the start
os.environ.setdefault("TRITON_INTERPRET", "1")
BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))

import results_file  # noqa: E402  (bench/results_file.py, beside this script)

FRONTENDS = ("nd", "paleo", "singa", "brainstorm", "mlir", "api", "tuning", "params", "data")
TEXT_FRONTENDS = ("nd", "paleo", "singa", "brainstorm", "mlir")
BINARY_FRONTENDS = ("params", "data")
# A command is `netc WORDS` with the input after the first word, unless it names FILE (the input),
# NET (the small network the input belongs to, beside it) or OUT (a scratch folder of the worker).
TRAIN_EXPLAIN = "explain --brief --train --loss softmax --memory"
WORKERS_EXPLAIN = "explain --workers 2 --device titanx"
COMPILE_INTERP = "compile --target interp -o OUT"
API = "api"
TUNING_RUN = "run NET --target interp --tuning FILE"
PARAMS_RUN = "run NET --reference --params FILE"
DATA_RUN = "run NET --reference --train --steps 1 --data FILE"
COMMANDS = ("check", "explain --memory --brief", "opt -p fuse",
            "export --format paleo", "export --format singa", "export --format layout",
            TRAIN_EXPLAIN, WORKERS_EXPLAIN, COMPILE_INTERP, API, TUNING_RUN, PARAMS_RUN, DATA_RUN)
# seeds small enough for `compile --target interp` (it draws every parameter: AlexNet's 60M take seconds,
# SINGA's MNIST MLP jobs' 12M half a second; their convolutional and RBM jobs are small)
COMPILE_SEEDS = ("examples/lenet.nd", "examples/cifar10_phases.nd", "examples/gan.nd", "examples/digits.nd",
                 "examples/brainstorm_fixture.nd", "examples/partition_*.nd", "netc opt examples/lenet.nd*",
                 "netc opt examples/cifar10_phases.nd*", "netc opt examples/gan.nd*",
                 "netc opt examples/brainstorm_fixture.nd*", "netc explain examples/*", "corpus/brainstorm/*",
                 "corpus/singa/*cifar10*", "corpus/singa/*mnist_conv*", "corpus/singa/*mnist_rbm*",
                 "corpus/singa/*mnist_model*")
# the expensive commands of a text input, each on the inputs whose number is `residue` mod 3
# (COMPILE_INTERP: of the COMPILE_SEEDS only)
EXPENSIVE = {TRAIN_EXPLAIN: 1, WORKERS_EXPLAIN: 2, COMPILE_INTERP: 0}
EXPENSIVE_EVERY = 3
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
    seeds += small_network_seeds(gen)
    return [s for s in seeds
            if (max_bytes is None or len(_as_bytes(s.text)) <= max_bytes)
            and not any(fnmatch.fnmatch(s.label, g) for g in exclude)]


# The network the tuning, parameter and data inputs belong to: two layers with parameters and a loss,
# so that a run of it is milliseconds (it is written beside each such input as NET_NAME)
NET_NAME = "small.nd"
SMALL_ND = """network small {
  input data: f32[2, 4, 4, 1]
  input label: i32[2]
  conv1 = Convolution(data) { filter: [3, 3, 1, 2], strides: [1, 1, 1, 1], padding: SAME, activation: relu }
  fc1 = InnerProduct(conv1) { num_outputs: 3 }
  loss = SoftmaxLoss(fc1, label)
  output loss
}
"""


def _as_text(data: bytes) -> str:
    """Bytes as the str every input is kept as (write_input writes them back, byte for byte)."""
    return data.decode("utf-8", "surrogateescape")


def _as_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def small_tuning(net_path: Path) -> dict:
    """A valid tuning file for SMALL_ND: an sm_90 entry for each of its tunable launches (keys as
    the lowering makes them), and one for sm_80."""
    from netc.codegen.lower import lower_network, tuning_key
    from netc.codegen.tuning_file import FORMAT, VERSION
    from netc.diagnostics import DiagnosticEngine
    from netc.frontend import load
    from netc.pipelines import Options, Plan, compile
    diag = DiagnosticEngine()
    m = load(str(net_path), diag)
    ctx = compile(m, Options(phase="test"), diag, plan=Plan(mode="inference"))
    net = m.networks()[0]
    launches = lower_network(m, net, ctx.notes["memory_plan"][net.attrs["sym_name"]]).launches
    entries = []
    for L in launches:
        k = L.call.kernel.__name__
        if k == "conv2d_kernel":
            cfg = dict(block_m=16, block_n=16, block_k=16, group_m=4, num_warps=2, num_stages=2,
                       flat_k=bool(L.call.constexprs["FLAT_K"]))
        elif k == "gemm_kernel":
            cfg = dict(block_m=16, block_n=16, block_k=16, split=2, num_warps=1)
        else:
            continue
        entries.append(dict(key=tuning_key(L.call), device="fuzz", arch=90, config=cfg))
    if entries:
        entries.append(dict(entries[0], arch=80, config=dict(block_m=32, num_warps=4)))
    return dict(format=FORMAT, version=VERSION, entries=entries)


def small_network_seeds(gen: Path) -> list:
    """The seeds of the inputs that belong to SMALL_ND: a tuning file, its parameters as .npz and
    .safetensors, a training set; and the Python API's (its scripts are generated: no text)."""
    import numpy as np
    net = gen / NET_NAME
    net.write_text(SMALL_ND)
    comp = {NET_NAME: SMALL_ND}
    rng = np.random.default_rng(0)
    params = {"conv1.weight": rng.standard_normal((3, 3, 1, 2)).astype(np.float32),
              "conv1.bias": np.zeros(2, np.float32),
              "fc1.weight": rng.standard_normal((32, 3)).astype(np.float32), "fc1.bias": np.zeros(3, np.float32)}
    data = {"data": rng.random((5, 4, 4, 1)).astype(np.float32), "label": np.array([0, 1, 2, 1, 0], np.int32)}
    out = [Seed("api", "net.py", "generated Python API calls", "")]
    try:
        out.append(Seed("tuning", "small.tuning.json", "a tuning file of the small network",
                        json.dumps(small_tuning(net), indent=1), dict(comp)))
    except Exception as e:  # noqa: BLE001 - the other seeds still run
        print(f"fuzz: no tuning seed ({type(e).__name__}: {e})", file=sys.stderr)
    out.append(Seed("params", "p.npz", "the small network's parameters (.npz)", _as_text(_npz_bytes(params)),
                    dict(comp)))
    out.append(Seed("params", "p.safetensors", "the small network's parameters (.safetensors)",
                    _as_text(_safetensors_bytes(params)), dict(comp)))
    out.append(Seed("data", "d.npz", "a training set of the small network (.npz)", _as_text(_npz_bytes(data)),
                    dict(comp)))
    return out


def _npz_bytes(arrays: dict) -> bytes:
    import numpy as np
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _safetensors_bytes(arrays: dict, header_edit=None) -> bytes:
    """The .safetensors encoding of arrays (numeric numpy dtypes); header_edit(header) may change the
    JSON header before it is written (wrong dtype names, shapes, offsets)."""
    codes = {"float64": "F64", "float32": "F32", "float16": "F16", "int64": "I64", "int32": "I32", "int16": "I16",
             "int8": "I8", "uint8": "U8", "bool": "BOOL"}
    header, blobs, off = {}, [], 0
    for k, a in arrays.items():
        b = a.tobytes()
        header[k] = {"dtype": codes.get(str(a.dtype), str(a.dtype)), "shape": list(a.shape),
                     "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if header_edit is not None:
        header_edit(header)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return len(h).to_bytes(8, "little") + h + b"".join(blobs)


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


# ---------------------------------------------------------------- mutations of .npz / .safetensors

def _decode_arrays(data: bytes, kind: str):
    """The file's arrays by name (numpy), or None where the bytes are no longer a readable file."""
    import numpy as np
    try:
        if kind == "npz":
            with np.load(io.BytesIO(data), allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8:8 + n])
        types = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
                 "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
        body, out = data[8 + n:], {}
        for k, e in header.items():
            if k == "__metadata__":
                continue
            b, end = e["data_offsets"]
            out[k] = np.frombuffer(body[b:end], types[e["dtype"]]).reshape(e["shape"]).copy()
        return out
    except Exception:  # noqa: BLE001 - a mutated file: only byte mutations apply
        return None


def _encode_arrays(arrays: dict, kind: str, header_edit=None) -> bytes:
    return _npz_bytes(arrays) if kind == "npz" else _safetensors_bytes(arrays, header_edit)


BAD_DTYPES = ("float64", "float16", "int32", "int64", "int8", "uint8", "bool", "complex64", "<U3", "object")
BAD_KEYS = ("", " ", "x", "conv1", "conv1.weight ", "CONV1.WEIGHT", "fc1/weight", "\u00e9", "a" * 300, "data",
            "label", "loss", "fc1.weight.momentum", "..", "label\x00")
BAD_NUMBERS = (float("nan"), float("inf"), -float("inf"), 1e38, -1, 3, 2 ** 31 - 1, -2 ** 31, 0.5, 255)


def _array_mutation(rng, arrays: dict, kind: str):
    """One change to the file's arrays, or None where none applies."""
    import numpy as np
    if not arrays:
        return None
    arrays = dict(arrays)
    k = rng.choice(sorted(arrays))
    a = arrays[k]
    how = rng.choice(("drop", "rename", "extra", "reshape", "retype", "values", "samples", "empty", "scalar",
                      "header"))
    if how == "drop":
        del arrays[k]
    elif how == "rename":
        arrays[rng.choice(BAD_KEYS + tuple(arrays))] = arrays.pop(k)
    elif how == "extra":
        arrays[rng.choice(BAD_KEYS)] = rng.choice((a, np.zeros((2, 2), np.float32), np.array(1.0, np.float32)))
    elif how == "reshape":
        shape = list(a.shape)
        choice = rng.randrange(4)
        if choice == 0 and shape:
            shape[rng.randrange(len(shape))] += rng.choice((-1, 1, 5))
            shape = [max(d, 0) for d in shape]
            a = np.resize(a, shape)
        elif choice == 1:
            a = a.reshape(a.shape + (1,))
        elif choice == 2 and a.ndim > 1:
            a = a.reshape(-1)
        else:
            a = a.T.copy()
        arrays[k] = a
    elif how == "retype":
        dt = rng.choice(BAD_DTYPES)
        if kind == "safetensors" and dt in ("complex64", "<U3", "object"):
            dt = "int8"
        arrays[k] = a.astype(dt) if dt != "object" else a.astype(object)
    elif how == "values":
        a = a.copy()
        if a.size:
            v = rng.choice(BAD_NUMBERS)
            if a.dtype.kind in "iub" and (isinstance(v, float) and not v.is_integer() or abs(v) > 2 ** 31):
                a = a.astype(np.float64)
            elif a.dtype.kind in "iu":
                a = a.astype(np.int64)
            a.reshape(-1)[rng.randrange(a.size)] = v
        arrays[k] = a
    elif how == "samples":
        arrays[k] = a[:rng.choice((0, 1, max(len(a) - 1, 0)))] if a.ndim else a
    elif how == "empty":
        arrays[k] = np.zeros((0,) + a.shape[1:], a.dtype)
    elif how == "scalar":
        arrays[k] = np.array(a.reshape(-1)[0] if a.size else 0, a.dtype)
    elif how == "header" and kind == "safetensors":
        def edit(h):
            e = h[rng.choice([n for n in h])]
            field_ = rng.choice(("dtype", "shape", "data_offsets", "meta", "drop"))
            if field_ == "dtype":
                e["dtype"] = rng.choice(("C64", "F8_E4M3", "X", "", "f32", 1, None))
            elif field_ == "shape":
                e["shape"] = rng.choice(([], [0], [-1], [2 ** 40], ["3"], [1.5], None, [3, 3, 1, 2, 1]))
            elif field_ == "data_offsets":
                e["data_offsets"] = rng.choice(([0, 0], [0, 2 ** 40], [8, 4], [-1, 4], [0], None, ["0", "4"]))
            elif field_ == "meta":
                h["__metadata__"] = rng.choice(({"a": 1}, [], "x", None, {"format": "pt"}))
            else:
                e.pop(rng.choice(("dtype", "shape", "data_offsets")), None)
        return _encode_arrays(arrays, kind, edit)
    else:
        return None
    try:
        return _encode_arrays(arrays, kind)
    except Exception:  # noqa: BLE001 - a change the format cannot hold
        return None


def _byte_mutation(rng, data: bytes):
    how = rng.choice(("truncate", "flip", "insert", "zero", "replace"))
    if how == "truncate":
        return data[:rng.randrange(len(data) + 1)]
    if how == "flip" and data:
        i = rng.randrange(len(data))
        return data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1:]
    if how == "insert":
        i = rng.randrange(len(data) + 1)
        return data[:i] + rng.choice((b"\x00", b"\xff" * 4, b"PK\x03\x04", b"{", b"\x93NUMPY")) + data[i:]
    if how == "zero" and data:
        i = rng.randrange(len(data))
        return data[:i] + b"\x00" * min(rng.randint(1, 64), len(data) - i) + data[i + 64:]
    return rng.choice((b"", b"not a file", b"{}", b"\x00" * 8 + b"{}", b"PK\x05\x06" + b"\x00" * 18,
                       (2 ** 63).to_bytes(8, "little") + b"{}"))


def mutate_binary(rng, text: str, kind: str):
    """A mutation of an .npz or .safetensors input: of its arrays (most) or of its bytes."""
    data = _as_bytes(text)
    arrays = _decode_arrays(data, kind) if rng.random() < 0.8 else None
    new = _array_mutation(rng, arrays, kind) if arrays is not None else None
    if new is None or new == data:   # (a change that changed nothing: renamed to itself, cut to its length)
        for _ in range(8):
            new = _byte_mutation(rng, data)
            if new != data:
                break
        return _as_text(new), "bytes"
    return _as_text(new), "arrays"


# --------------------------------------------------------------------- the Python API's calls

API_GOOD = {"size": ("3", "10", "1"), "num_filters": ("2", "4"), "filter_size": ("3", "1", "[3, 3]", "(1, 3)"),
            "pool_size": ("2", "[2, 2]"), "stride": ("1", "2", "None"), "padding": ('"SAME"', '"VALID"', "0", "1"),
            "act": ('"relu"', '"tanh"', "None", '"softmax"'), "name": ("None", '"a"', '"b"'),
            "axis": ("None", "-1", "1"), "keep_prob": ("0.5", "None"), "dropout_rate": ("None", "0.1"),
            "shape": ("[4, 4, 3]", "[8]", "[2, 2, 2]", "[-1]", "[12]"), "pool_type": ('"max"', '"avg"'),
            "bias": ("True", "False"), "num_classes": ("None", "3"), "negative_slope": ("None", "0.1"),
            "epsilon": ("None", "1e-5"), "momentum": ("None", "0.9"), "local_size": ("None", "5"),
            "alpha": ("None", "1e-4"), "beta": ("None", "0.75"), "knorm": ("None", "1.0")}
API_BAD = ("-1", "0", "2 ** 63", "1e308", 'float("nan")', 'float("inf")', '"x"', '""', "[]", "{}", "None", "True",
           "[1, 2, 3]", "(1,)", 'b"x"', "object()", "1.5", "[[1]]", '"relu6"', "[0, 0]", "2 ** 31", "{'a': 1}",
           "lambda: 0", '"@all"', '"a b"')
API_FRIENDLY = ("fc", "conv2d", "pool", "max_pool", "avg_pool", "lrn", "batch_norm", "dropout", "concat", "relu",
                "sigmoid", "tanh", "softmax", "identity", "add", "multiply", "maximum", "reshape", "flatten",
                "embedding", "softmax_loss", "euclidean", "rank_cost")
API_ENDS = ("netc.Topology({v})", "netc.Topology([{v}, {w}])", "netc.parameters.create({v})",
            "netc.api.to_ir({v})", "netc.api.to_nd({v})", "netc.Topology({v}, name={bad})",
            "netc.parameters.create(netc.Topology({v}))")


def api_script(rng) -> str:
    """A short script of netc.layer calls: data layers, then builders (friendly and generated) with
    good arguments mostly and a bad one here and there, then a topology, parameters or IR of the
    last layer. Every line is one statement (minimization removes lines)."""
    import inspect

    import netc.api.layer as L
    lines = ["import netc", "L = netc.layer"]
    names = []
    for i in range(rng.randint(1, 2)):
        shape = rng.choice(('[4, 4, 3]', '[8]', '[2, 2, 2]', '[]', '3', rng.choice(API_BAD)))
        dtype = rng.choice(('"f32"', '"f32"', '"i32"', '"f16"', rng.choice(API_BAD)))
        lines.append(f'v{len(names)} = L.data("x{i}", {shape}, {dtype})')
        names.append(f"v{len(names)}")
    generated = sorted(L.types())
    for _ in range(rng.randint(1, 4)):
        fname = rng.choice(API_FRIENDLY) if rng.random() < 0.7 else rng.choice(generated)
        fn = getattr(L, fname)
        args = []
        for pname, prm in inspect.signature(fn).parameters.items():
            bad = rng.random() < 0.15
            if prm.kind is inspect.Parameter.VAR_POSITIONAL:
                args += [rng.choice(names) if not bad else rng.choice(API_BAD)
                         for _ in range(rng.choice((1, 1, 2, 0)))]
            elif prm.kind is inspect.Parameter.VAR_KEYWORD:
                if rng.random() < 0.2:
                    args.append(f"{rng.choice(('include', 'location', 'bogus', 'partition_dim'))}="
                                f"{rng.choice(API_BAD)}")
            elif pname in ("input", "left", "right", "label"):
                v = rng.choice(names) if not bad else rng.choice(API_BAD + (f"[{rng.choice(names)}]",))
                args.append(v if prm.kind is not inspect.Parameter.KEYWORD_ONLY else f"{pname}={v}")
            elif prm.default is inspect.Parameter.empty or rng.random() < 0.3:
                v = rng.choice(API_BAD) if bad else rng.choice(API_GOOD.get(pname, ("1", "None", "2")))
                if prm.default is inspect.Parameter.empty and prm.kind is not inspect.Parameter.KEYWORD_ONLY:
                    args.append(v)
                else:
                    args.append(f"{pname}={v}")
        lines.append(f"v{len(names)} = L.{fname}({', '.join(args)})")
        names.append(f"v{len(names)}")
    end = rng.choice(API_ENDS)
    lines.append(end.format(v=names[-1], w=rng.choice(names), bad=rng.choice(API_BAD)))
    return "\n".join(lines) + "\n"


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
    one of its seeds, 1 to 3 mutations, an export format; the same for the same seed and index.
    A Python API input is a generated script (api_script), unmutated; an .npz/.safetensors input
    gets mutate_binary's mutations."""
    rng = random.Random(f"netc-fuzz/{seed_value}/{index}")
    frontends = sorted(by_frontend, key=FRONTENDS.index)
    seed = rng.choice(by_frontend[rng.choice(frontends)])
    export = rng.choice(("paleo", "singa", "layout"))
    if seed.frontend == "api":
        return Case(index, seed, api_script(rng), ["api_script"], export)
    text, done = seed.text, []
    if seed.frontend in BINARY_FRONTENDS:
        kind = "safetensors" if seed.name.endswith(".safetensors") else "npz"
        for _ in range(rng.choice((1, 1, 2))):
            text, what = mutate_binary(rng, text, kind)
            done.append(what)
        return Case(index, seed, text, done, export)
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3))):
        for _attempt in range(8):
            name = rng.choices(_NAMES, _WEIGHTS)[0]
            new = MUTATORS[name][0](rng, text)
            if new is not None and new != text:
                text = new
                done.append(name)
                break
    return Case(index, seed, text, done, export)


def argv_of(command: str, path: str) -> list[str]:
    """The command line of `command` on the input at path (see COMMANDS: FILE, NET, OUT)."""
    words = command.split()
    if "FILE" not in words:
        words = [words[0], "FILE", *words[1:]]
    folder = os.path.dirname(path)
    subst = {"FILE": path, "NET": os.path.join(folder, NET_NAME),
             "OUT": os.path.join(os.path.dirname(folder) or ".", "out")}
    return [subst.get(w, w) for w in words]


# ----------------------------------------------------------------------------- running one input

class _Hang(BaseException):
    """Raised by SIGALRM in a run that is over its time (a BaseException: netc's own `except
    Exception` must not turn it into an internal error)."""


def _on_alarm(signum, frame):
    raise _Hang()


def write_input(path: str, text: str):
    with open(path, "wb") as f:
        f.write(text.encode("utf-8", "surrogateescape"))


_PLACED: dict = {}   # folder -> what place_input last wrote there (the same input's next command reuses it)


def place_input(folder: str, name: str, text: str, companions: dict) -> str:
    """Write the input (and its unmutated companions) into folder, alone: files an earlier input
    left there are removed, so no input reads another's mutated .proto. The input an earlier call
    wrote there is not written again (each text input runs several commands), unless a file of
    the folder changed since (a command that wrote beside its input)."""
    path = os.path.join(folder, name)
    key = (name, text, tuple(sorted(companions.items())))
    last = _PLACED.get(folder)
    if last is not None and last[0] == key:
        try:
            if _folder_state(folder) == last[1]:
                return path
        except OSError:
            pass
    _PLACED.pop(folder, None)
    os.makedirs(folder, exist_ok=True)
    for f in os.listdir(folder):
        if f != name and f not in companions:
            os.remove(os.path.join(folder, f))
    for n, t in companions.items():
        write_input(os.path.join(folder, n), t)
    write_input(path, text)
    _PLACED[folder] = (key, _folder_state(folder))
    return path


def _folder_state(folder: str) -> tuple:
    """Names, sizes and modification times of a folder's files."""
    with os.scandir(folder) as it:
        return tuple(sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in it))


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
            rc = run_api(path) if command == API else main(argv_of(command, path))
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


def run_api(path: str) -> int:
    """Run a Python API script as a user would (its own file, its own globals) and answer as netc's
    main would: 0; 1 with the rendered diagnostics of a netc error, or with `path:line:col: error:`
    for an exception the script raised itself (a NameError, a call with a missing argument: Python
    points at the script); 2 with netc's internal-error lines for any other exception whose
    innermost frame is inside the netc package (a TypeError from deep inside is a netc bug)."""
    from netc.diagnostics import NetcError, render
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        source = f.read()
    netc_dir = str(ROOT / "netc") + os.sep
    try:
        exec(compile(source, path, "exec"), {"__name__": "__main__", "__file__": path})
    except NetcError as e:
        sys.stderr.write("".join(render(d) for d in e.diagnostics) or f"netc: error: {e}\n")
        return 1
    except (_Hang, KeyboardInterrupt):
        raise
    except Exception as e:  # noqa: BLE001
        tb = traceback.extract_tb(e.__traceback__)
        inner = tb[-1] if tb else None
        if inner is not None and os.path.abspath(inner.filename).startswith(netc_dir):
            sys.stderr.write(f"netc: internal error: this is a bug in netc\n  {type(e).__name__}: {e}\n"
                             + "".join(traceback.format_exception(e)))
            return 2
        line = next((fr.lineno for fr in reversed(tb) if fr.filename == path), None) or 1
        sys.stderr.write(f"{path}:{line}:1: error: {type(e).__name__}: {e}\n")
        return 1
    return 0


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
    if frontend in BINARY_FRONTENDS:
        return classify_binary(err, path, text)
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


_WHOLE_FILE = re.compile(r"\b(not an? |is not |cannot read|neither an|not a valid)")
_EMPTY_FILE = re.compile(r"\bholds no arrays\b")


def _readable(data: bytes, kind: str) -> bool:
    """Whether the format's own reader (numpy, the safetensors package) reads the file whole."""
    import numpy as np
    try:
        if kind == "npz":
            with np.load(io.BytesIO(data), allow_pickle=False) as z:
                for k in z.files:
                    z[k]
        else:
            from safetensors.numpy import load
            load(data)
        return True
    except Exception:  # noqa: BLE001
        return False


def classify_binary(err: str, path: str, text: str) -> tuple[str, str, str]:
    """An exit 1 on an .npz/.safetensors input: `user` when every error is located in the sense of
    the module docstring -- it names the file (its location is the file, or its message quotes the
    file's name or path) and what in it is wrong: the name of one of the file's arrays or of one
    the network expects (quoted, 'conv1.weight'), or, for a file that cannot be read as its
    format at all (numpy or the safetensors package refuses it), that it is not one ('is not a
    valid .safetensors file', 'cannot read ... as an .npz archive'), or for a file without arrays,
    that it 'holds no arrays'. Else `unlocated`."""
    errors = [d for d in diagnostics(err) if d[1] == "error"]
    if not errors:
        first = next((ln for ln in err.split("\n") if ln.strip()), "(nothing on stderr)")
        return "unlocated", "exit 1 without an error", f"exit 1 without an `error:` line: {first[:200]}"
    kind = "safetensors" if path.endswith(".safetensors") else "npz"
    arrays = _decode_arrays(_as_bytes(text), kind)
    names = set(arrays or ()) | {"conv1.weight", "conv1.bias", "fc1.weight", "fc1.bias", "data", "label"}
    base = os.path.basename(path)
    for loc, _, msg in errors:
        names_file = loc.split(" (")[0].split(":")[0] == path or f"'{path}'" in msg or f"'{base}'" in msg
        names_what = any(f"'{n}'" in msg or f"`{n}`" in msg or f'"{n}"' in msg for n in names) \
            or (_WHOLE_FILE.search(msg) is not None and not _readable(_as_bytes(text), kind)) \
            or (_EMPTY_FILE.search(msg) is not None and arrays == {})
        if not (names_file and names_what):
            shown = loc.replace(path, "FILE")
            return "unlocated", _normalize(msg.replace(path, "FILE")), f"{shown}: error: {msg}"[:300]
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
            seq, (name, text, command, debug, companions) = task
            path = place_input(os.path.join(workdir, "in"), name, text, companions)
            res = run_once(path, command, timeout, debug)
            res["path"] = path
            conn.send((seq, res))


class Runner:
    """Runs tasks (name, text, command) in `jobs` worker processes, or in this process (jobs 0).
    A result is run_once's dict plus `path` (where the input was written)."""

    def __init__(self, jobs: int, timeout: float, workdir: Path, mem_limit: int | None = 6 << 30):
        self.jobs, self.timeout, self.workdir, self.mem_limit = jobs, timeout, Path(workdir), mem_limit
        self.workers: list = []
        self.restarts = 0
        self.seq = 0   # tasks are numbered: a worker's answer is matched to the task it answers
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
        return {"i": i, "proc": p, "conn": parent, "task": None, "since": 0.0, "seq": 0}

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
                self.seq += 1
                w["task"], w["key"], w["since"], w["seq"] = task, key, time.monotonic(), self.seq
                try:
                    w["conn"].send((self.seq, task))
                except (OSError, ValueError):  # the worker died while idle: a new one takes the task
                    self._restart(w)
                    w["task"], w["key"], w["since"], w["seq"] = task, key, time.monotonic(), self.seq
                    w["conn"].send((self.seq, task))
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
                        seq, res = w["conn"].recv()
                        if seq != w["seq"]:
                            # the result of a task sent before this one (by a run that stopped early,
                            # without reading it): not this task's
                            res = None
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
    if frontend in BINARY_FRONTENDS:   # lines and characters of a zip archive mean nothing
        return text
    lines = ddmin(text.split("\n"), lambda ls: fails("\n".join(ls)), budget)
    text = "\n".join(lines)
    if len(text) <= 4000 and frontend != "api":
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
    """A text input: the four front-end commands, and one of the expensive ones by the input's number
    (EXPENSIVE: the training explain, the workers explain, or compile --target interp for a small
    seed); the other front ends: their one command."""
    f = case.seed.frontend
    if f == "api":
        return [API]
    if f == "tuning":
        return [TUNING_RUN]
    if f == "params":
        return [PARAMS_RUN]
    if f == "data":
        return [DATA_RUN]
    cmds = ["check", "explain --memory --brief", "opt -p fuse", f"export --format {case.export}"]
    for c, residue in EXPENSIVE.items():
        if case.index % EXPENSIVE_EVERY == residue and (
                c != COMPILE_INTERP or any(fnmatch.fnmatch(case.seed.label, g) for g in COMPILE_SEEDS)):
            cmds.append(c)
    return cmds


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
    ap.add_argument("--inputs", type=int, default=1000, metavar="N", help="mutated inputs (a text input runs 6 or 7 commands, the others 1)")
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
                   "max_seed_bytes": a.max_seed_bytes, "exclude": a.exclude, "frontends": a.frontends,
                   "expensive_commands": {c: f"inputs numbered {r} mod {EXPENSIVE_EVERY}"
                                          + (", small seeds (COMPILE_SEEDS)" if c == COMPILE_INTERP else "")
                                          for c, r in EXPENSIVE.items()}}
            results_file.write(a.results, document(rep, seeds, cfg, findings), str(ROOT))
    return 1 if rep.bad or rep.error else 0


if __name__ == "__main__":
    sys.exit(main())
