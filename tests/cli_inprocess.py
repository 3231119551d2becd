"""`netc ARGS` run in the test's own process (netc.cli.main), for tests that check a command's exit status
and output and need nothing a process of its own gives: each `python -m netc` pays for a fresh interpreter
and its imports (torch's alone is about 1.5 s of CPU; CI is CPU-bound). A test that needs Triton's other
mode than its xdist worker's, an environment of its own, several processes or the `python -m netc` entry
point itself keeps tests/cli_process.py or subprocess."""
from __future__ import annotations

import contextlib
import io
import subprocess


def netc_inprocess(*args) -> subprocess.CompletedProcess:
    """netc.cli.main(ARGS) with stdout and stderr captured, as a CompletedProcess (argparse's exits included)."""
    from netc.cli import main
    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:           # argparse: --help, usage errors
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    return subprocess.CompletedProcess(["netc", *argv], rc, out.getvalue(), err.getvalue())


def netc_interp(*args) -> subprocess.CompletedProcess:
    """`netc ARGS` of a command that runs kernels on the interpreter target: in this process when netc's kernels
    run under Triton's interpreter here (or can still be made to: nothing imported them yet), else in a process
    of its own with TRITON_INTERPRET=1 (tests/cli_process.py). Never skipped."""
    from netc.diagnostics import NetcError
    from netc.runtime.interp import ensure_interpreter
    try:
        ensure_interpreter()
    except NetcError:
        from cli_process import netc_process
        return netc_process(*args, interp=True)
    return netc_inprocess(*args)
