"""Golden tests: run the `netc` CLI in-process on tests/golden/**/*.nd and compare its output.

    tests/golden/<pass>/<case>.nd          netc opt <case>.nd -p <pass>   -> <case>.mlir (stdout)
    tests/golden/print-ir-after-all/...    netc opt <case>.nd --print-ir-after-all
    tests/golden/diagnostics/<case>.nd     netc check <case>.nd           -> <case>.err (stderr), exit 1

Other directories whose name is a pass run that pass. Any stderr of a passing run is kept in
<case>.err as well (warnings), so a new warning shows up as a diff. A line `// ARGS: ...` at the
top of an input adds command-line arguments (e.g. `--phase test`).

Paths are relative to the repository root, so the loc("tests/golden/...") strings in the
expectations do not depend on where the checkout lives. After a deliberate change, regenerate
with `make golden` (pytest --update-goldens) and review the diff.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from netc.cli import main

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"

# Directories that are not a pass name: how to run them and the exit code they expect.
SPECIAL = {
    "diagnostics": (["check"], 1),
    "print-ir-after-all": (["opt", "--print-ir-after-all"], 0),
}


def _cases():
    return sorted(p.relative_to(ROOT).as_posix() for p in GOLDEN.glob("*/*.nd"))


def _extra_args(text: str) -> list[str]:
    args = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("// ARGS:"):
            args += shlex.split(s[len("// ARGS:"):])
        elif s and not s.startswith(("//", "#")):
            break
    return args


def _argv(rel: str) -> tuple[list[str], int]:
    group = Path(rel).parent.name
    extra = _extra_args((ROOT / rel).read_text(encoding="utf-8"))
    if group in SPECIAL:
        head, rc = SPECIAL[group]
        return [head[0], rel, *head[1:], *extra], rc
    return ["opt", rel, "-p", group, *extra], 0


def run_netc(argv, capsys, monkeypatch):
    """Run the CLI in-process from the repository root; (exit code, stdout, stderr)."""
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("NETC_DEBUG", raising=False)
    capsys.readouterr()
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _check(path: Path, actual: str, update: bool, what: str):
    """Compare `actual` to the file at `path` (absent file = empty expectation)."""
    if update:
        if actual:
            path.write_text(actual, encoding="utf-8")
        elif path.exists():
            path.unlink()
        return
    expected = path.read_text(encoding="utf-8") if path.exists() else ""
    assert actual == expected, (f"{what} differs from {path.relative_to(ROOT)}; if the change is deliberate, "
                                f"run `make golden` and review the diff")


@pytest.mark.parametrize("rel", _cases())
def test_golden(rel, capsys, monkeypatch, update_goldens):
    argv, want_rc = _argv(rel)
    rc, out, err = run_netc(argv, capsys, monkeypatch)
    assert "internal error" not in err, err
    assert rc == want_rc, f"`netc {' '.join(argv)}` exited {rc}, expected {want_rc}\n{err}"
    base = ROOT / rel
    out_file = base.with_suffix(".mlir")
    err_file = base.with_suffix(".err")
    if Path(rel).parent.name == "diagnostics":
        assert err.strip(), "a diagnostic case must report something"
        assert out == ""
        _check(err_file, err, update_goldens, "stderr")
    else:
        assert out.strip(), "an opt case must print IR"
        _check(out_file, out, update_goldens, "stdout")
        _check(err_file, err, update_goldens, "stderr")


def test_every_golden_directory_is_runnable():
    """A directory name that is neither a pass nor a special mode would silently test nothing."""
    from netc.passes.manager import PASSES     # importing the manager registers every pass
    for d in sorted(p for p in GOLDEN.iterdir() if p.is_dir()):
        assert d.name in PASSES or d.name in SPECIAL, f"tests/golden/{d.name}: not a pass name"
        assert list(d.glob("*.nd")), f"tests/golden/{d.name}: no cases"


def test_no_orphan_expectations():
    """Every expectation file belongs to an input (a renamed case leaves no stale file)."""
    for p in sorted(GOLDEN.glob("*/*")):
        if p.suffix in (".mlir", ".err"):
            assert p.with_suffix(".nd").exists(), f"{p.relative_to(ROOT)} has no input {p.stem}.nd"


@pytest.mark.parametrize("rel", [p.relative_to(ROOT).as_posix() for p in sorted(GOLDEN.glob("*/*.mlir"))])
def test_golden_ir_round_trips(rel):
    """Every expected IR text parses back (netc.ir.parser) and prints identically; dumps of
    --print-ir-after-all are split at their banners first."""
    from netc.ir.parser import parse_ir
    from netc.ir.printer import print_ir
    text = (ROOT / rel).read_text(encoding="utf-8")
    for chunk in re.split(r"^// -----// IR Dump After .*//----- //\n", text, flags=re.M):
        if chunk.strip():
            ir = chunk.rstrip("\n") + "\n"
            assert print_ir(parse_ir(ir, rel)) == ir
