"""Robustness: whatever the input, `netc check` exits 0 (fine) or 1 (the user's error), never 2
(netc's own bug) and never with an exception.

Every examples/*.nd and tests/golden/**/*.nd file is cut short after each line and has each
line deleted in turn (files are globbed at test time, so new examples are covered as they come).
Long files are sampled, deterministically, to keep the whole module within about a minute on
two cores. Then a handful of hand-made nasty inputs.
"""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from netc.cli import main

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES_PER_FILE = 150       # lines mutated per file, sampled beyond this
MAX_MUTATED_BYTES = 1_500_000  # total source text checked per file (bounds time on big inputs)


def _sources():
    files = sorted(ROOT.glob("examples/*.nd")) + sorted(ROOT.glob("tests/golden/*/*.nd"))
    return [p.relative_to(ROOT).as_posix() for p in files]


def _check(path: Path, capsys) -> tuple[int | str, str]:
    """Run `netc check` in-process; the exit code (or the escaped exception) and stderr."""
    try:
        rc = main(["check", str(path)])
    except SystemExit as e:  # argparse usage errors exit 2 by themselves; not expected here
        rc = f"SystemExit({e.code})"
    except BaseException as e:  # noqa: BLE001 - the point is that nothing escapes
        rc = f"{type(e).__name__}: {e}"
    out, err = capsys.readouterr()
    return rc, err


def _lines_to_mutate(name: str, lines: list[str]) -> list[int]:
    n = len(lines)
    budget = max(8, min(MAX_LINES_PER_FILE, MAX_MUTATED_BYTES // max(1, sum(map(len, lines)))))
    if n <= budget:
        return list(range(n))
    # the first and last few lines (headers, closing braces) plus a fixed sample of the rest
    rng = random.Random(name)  # deterministic: seeded by the file's name
    edge = list(range(4)) + list(range(n - 4, n))
    middle = sorted(rng.sample(range(4, n - 4), budget - len(edge)))
    return sorted(set(edge + middle))


@pytest.mark.parametrize("rel", _sources())
def test_truncated_and_deleted_lines(rel, tmp_path, capsys):
    text = (ROOT / rel).read_text(encoding="utf-8")
    lines = text.split("\n")
    path = tmp_path / Path(rel).name  # same name and extension: same format detection
    failures = []
    for i in _lines_to_mutate(rel, lines):
        for kind, variant in (("truncated after", lines[:i + 1]), ("without", lines[:i] + lines[i + 1:])):
            path.write_text("\n".join(variant), encoding="utf-8")
            rc, err = _check(path, capsys)
            if rc not in (0, 1):
                failures.append(f"{rel} {kind} line {i + 1}: exit {rc}\n{err[-600:]}")
            elif rc == 1 and "error:" not in err:
                failures.append(f"{rel} {kind} line {i + 1}: exit 1 without an error message")
    assert not failures, f"{len(failures)} failure(s); first ones:\n" + "\n".join(failures[:5])


def _nested_blocks(depth: int) -> str:
    out = ["network n {", "  input data: f32[2, 3]", "  block b(data) -> b {"]
    out += ["  block b() -> b {"] * (depth - 2)
    out += ["  block b() -> x {", "    x = ReLU()"] + ["  }"] * depth + ["  y = ReLU(b)", "}"]
    return "\n".join(out) + "\n"


NASTY = {
    "empty.nd": b"",
    "only_comments.nd": b"// nothing here\n# nor here\n\n   \n",
    "only_whitespace.nd": b" \t\r\n\f\n",
    "binary_garbage.nd": bytes(random.Random(7).randrange(256) for _ in range(4096)),
    "latin1.nd": "network n {\n  input d: f32[2, 3]  # caf\u00e9\n}\n".encode("latin-1"),
    "nul_bytes.nd": b"network n {\x00\n  input d: f32[2, 3]\n}\n",
    "utf8_bom.nd": "\ufeffnetwork n {\n  input d: f32[2, 3]\n}\n".encode("utf-8"),
    "unicode_names.nd": "network n {\n  input d\u00e4ta: f32[2, 3]\n  r = ReLU(d\u00e4ta)\n}\n".encode("utf-8"),
    "crlf.nd": b"network n {\r\n  input d: f32[2, 3]\r\n  r = ReLU(d)\r\n}\r\n",
    "deep_blocks_2000.nd": _nested_blocks(2000).encode(),
    "deep_blocks_50.nd": _nested_blocks(50).encode(),
    "deep_list_value.nd": ("network n {\n  input d: f32[2, 3]\n  r = ReLU(d) { negative_slope: "
                           + "[" * 3000 + "]" * 3000 + " }\n}\n").encode(),
    "deep_dict_layout.nd": ("network n {\n  input d: f32[2, 3]\n  layout { x: " + "{a: " * 3000 + "1"
                            + "}" * 3000 + " }\n}\n").encode(),
    "huge_integers.nd": (b"network n {\n  input d: f32[2, 99999999999999999999999999999999999999]\n"
                         b"  fc = InnerProduct(d) { num_outputs: 123456789012345678901234567890 }\n"
                         b"  c = Convolution(d) { filter: [3, 3, -99999999999999999999999, 2] }\n"
                         b"  p = Pooling(d) { ksize: [1, 99999999999999999999, 1, 1] }\n}\n"),
    "huge_conv.nd": (b"network n {\n  input d: f32[1, 99999999999999999999, 99999999999999999999, 3]\n"
                     b"  c = Convolution(d) { filter: [3, 3, 3, 99999999999999999999], strides: [1, 7, 7, 1] }\n}\n"),
    "zero_and_negative_dims.nd": (b"network n {\n  input a: f32[0, 3]\n  input b: f32[-2, 3]\n  input c: f32[]\n"
                                  b"  r = ReLU(a)\n  s = Softmax(c)\n  f = InnerProduct(c) { num_outputs: 0 }\n"
                                  b"  p = Pooling(b) { ksize: [1, 0, 0, 1], strides: [1, 0, 0, 1] }\n}\n"),
    "wide_shape.nd": ("network n {\n  input d: f32[" + ", ".join(["1"] * 20000) + "]\n  r = ReLU(d)\n}\n").encode(),
    "long_line.nd": ("network n {\n  input d: f32[2, 3]\n  r = ReLU(d) { " + "x" * 100_000 + ": 1 }\n}\n").encode(),
    "many_errors.nd": ("network n {\n  input d: f32[2, 3]\n"
                       + "".join(f"  l{i} = Nope{i}(d{i}) {{ bad{i}: {i} }}\n" for i in range(300)) + "}\n").encode(),
    "self_cycle.nd": b"network n {\n  a = ReLU(a)\n}\n",
    "empty_network.nd": b"network n { }\n",
    "empty_block.nd": b"network n {\n  input d: f32[2]\n  block b(d) -> x { }\n  y = ReLU(b)\n}\n",
    "empty_parallel.nd": b"network n {\n  input d: f32[2]\n  parallel p(d) splits 0 -> x { }\n  y = ReLU(p)\n}\n",
    "huge_splits.nd": (b"network n {\n  input d: f32[2, 4]\n  parallel p(d) splits 99999999999999999999 {\n"
                       b"    a = ReLU()\n  }\n}\n"),
    "nested_parallel.nd": (b"network n {\n  input d: f32[2, 4]\n  block b(d) -> p {\n"
                           b"    parallel p() splits 2 { a = ReLU() }\n  }\n}\n"),
    "quoted_everything.nd": (b'network "n" {\n  input "d": f32[2, 3]\n  "r" = ReLU("d") { "negative_slope": 0.5 }\n'
                             b'  "" = ReLU("")\n  "a b" = Tanh("a b")\n}\n'),
    "bad_escape.nd": b'network n {\n  input d: f32[2]\n  r = ReLU(d) { x: "\\x\\u12" }\n}\n',
    "keywords_as_names.nd": (b"network network {\n  input input: f32[2]\n  block = ReLU(input)\n}\n"),
    "only_params.nd": b"param w: f32[3] { init: gaussian }\nparam w: f32[4]\n",
    "reserved_attributes.nd": (b'network n {\n  input d: f32[2, 4, 4, 3]\n'
                               b'  r = ReLU(d) { name: "other", parents: [], type: "x", split_index: 1 }\n'
                               b'  c = Convolution(d) { filter: [1, 1, 3, 4], splits: "two" }\n}\n'),
    "share_from_not_a_name.nd": (b"param w { share_from: 1.5 }\nnetwork n {\n  input d: f32[2, 3]\n"
                                 b"  f = InnerProduct(d) { num_outputs: 2, params: { weight: w, bias: { name: b, "
                                 b"share_from: [1] } } }\n}\n"),
    "scalar_inputs_to_losses.nd": (b"network n {\n  input x: f32[]\n  input y: f32[]\n  input z: f32[4, 3]\n"
                                   b"  a = EuclideanLoss(x, y)\n  b = SoftmaxLoss(z, y)\n  c = BatchNorm(x)\n"
                                   b"  d = Reshape(x)\n}\n"),
}


@pytest.mark.parametrize("name", sorted(NASTY))
def test_nasty_input(name, tmp_path, capsys):
    path = tmp_path / name
    path.write_bytes(NASTY[name])
    rc, err = _check(path, capsys)
    assert rc in (0, 1), f"exit {rc}\n{err[-2000:]}"
    if rc == 1:
        assert "error:" in err and "internal error" not in err


def test_deep_blocks_are_a_user_error(tmp_path, capsys):
    path = tmp_path / "deep.nd"
    path.write_text(_nested_blocks(2000))
    rc, err = _check(path, capsys)
    assert rc == 1 and "nested" in err, err


def test_missing_file(tmp_path, capsys):
    rc, err = _check(tmp_path / "does_not_exist.nd", capsys)
    assert rc == 1 and "no such file" in err


def test_directory(tmp_path, capsys):
    d = tmp_path / "adir.nd"
    d.mkdir()
    rc, err = _check(d, capsys)
    assert rc == 1 and "directory" in err


@pytest.mark.parametrize("name", ["binary_garbage.nd", "latin1.nd"])
def test_not_utf8_is_a_user_error(name, tmp_path, capsys):
    path = tmp_path / name
    path.write_bytes(NASTY[name])
    rc, err = _check(path, capsys)
    assert rc == 1 and "UTF-8" in err, err


def _sample_value(spec) -> str:
    """A well-formed .nd value for an attribute schema (for required attributes)."""
    return {"ints": "[" + ", ".join(["1"] * (spec.length or 2)) + "]", "shape": "[2, -1]", "int": "2",
            "float": "0.5", "number": "0.5", "bool": "true", "str": '"x"', "padding": "VALID",
            "enum": spec.choices[0] if spec.choices else "x"}.get(spec.kind, "1")


RANKS = [[], [3], [2, 3], [2, 3, 4], [2, 5, 5, 3], [2, 3, 4, 5, 6]]


def test_every_op_on_inputs_of_every_rank(tmp_path, capsys):
    """Each layer type on inputs of rank 0 to 5 (every combination for two-input ops): a shape
    rule must reject what it cannot handle with a diagnostic, not an IndexError."""
    from itertools import product
    from netc.ops import by_type, layer_types
    path = tmp_path / "op.nd"
    failures = []
    for t in layer_types():
        opdef = by_type(t)
        lo = opdef.arity[0]
        if t != opdef.types[0] or lo == 0:
            continue
        attrs = ", ".join(f"{k}: {_sample_value(s)}" for k, s in opdef.attrs.items() if s.required)
        for shapes in product(RANKS, repeat=min(lo, 2)):
            inputs = "".join(f"  input i{j}: f32{list(s)}\n" for j, s in enumerate(shapes))
            refs = ", ".join(f"i{j}" for j in range(len(shapes)))
            path.write_text(f"network n {{\n{inputs}  l = {t}({refs}) {{ {attrs} }}\n}}\n")
            rc, err = _check(path, capsys)
            if rc not in (0, 1):
                failures.append(f"{t} on {list(shapes)}: exit {rc}\n{err[-400:]}")
    assert not failures, "\n".join(failures[:5])


def test_other_commands_on_nasty_inputs(tmp_path, capsys):
    """opt and explain print the IR and tables too: printers must survive what check accepts."""
    failures = []
    for name in sorted(NASTY):
        path = tmp_path / name
        path.write_bytes(NASTY[name])
        for argv in (["opt", str(path)], ["opt", str(path), "--print-ir-after-all"], ["explain", str(path)]):
            try:
                rc = main(argv)
            except BaseException as e:  # noqa: BLE001
                rc = f"{type(e).__name__}: {e}"
            out, err = capsys.readouterr()
            if rc not in (0, 1):
                failures.append(f"netc {' '.join(argv[:1] + argv[2:])} {name}: exit {rc}\n{err[-600:]}")
    assert not failures, "\n".join(failures[:5])


def test_duplicate_input_names(tmp_path, capsys):
    path = tmp_path / "dup.nd"
    path.write_text("network n {\n  input d: f32[2, 3]\n  input d: f32[2, 3]\n}\n")
    rc, err = _check(path, capsys)
    assert rc == 1 and "duplicate layer name 'd'" in err, err
