"""`netc run FILE --workers K`: start K worker processes the way torchrun does (docs/partitioning.md).

Each worker is `python -m netc run <the same arguments>` with RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR (127.0.0.1) and MASTER_PORT (a free port) in its environment, and
OMP_NUM_THREADS=1 unless set; rank 0 prints the results. The launcher watches them: when one exits
with an error, the others get min(timeout, grace) seconds to exit on their own (they notice a dead
peer at once, a hung one within their process-group timeout, and say which rank and which op
failed); whatever still runs then is killed, and the launcher says which ranks failed or hung.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import traceback

from ..diagnostics import NetcError, render


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(argv: list, workers: int, timeout: float, grace: float = 10.0, env: dict | None = None) -> int:
    """Run `python -m netc <argv>` as `workers` ranks; the exit status is 0 when every rank succeeds."""
    port = free_port()
    procs = []
    for r in range(workers):
        e = dict(os.environ, **(env or {}))
        e.update(RANK=str(r), WORLD_SIZE=str(workers), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(workers),
                 MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        e.setdefault("OMP_NUM_THREADS", "1")
        e.setdefault("GLOO_SOCKET_IFNAME", "lo")
        procs.append(subprocess.Popen([sys.executable, "-m", "netc", *argv], env=e))
    failed: dict = {}
    deadline = None
    try:
        while True:
            running = 0
            for r, p in enumerate(procs):
                rc = p.poll()
                if rc is None:
                    running += 1
                elif rc != 0 and r not in failed:
                    failed[r] = rc
                    if deadline is None:
                        deadline = time.monotonic() + min(timeout, grace)
            if not running:
                break
            if deadline is not None and time.monotonic() > deadline:
                hung = [r for r, p in enumerate(procs) if p.poll() is None]
                for r in hung:
                    procs[r].kill()
                    failed[r] = "killed"
                sys.stderr.write(f"netc: rank{'s' if len(hung) > 1 else ''} {', '.join(map(str, hung))} did not exit "
                                 f"within {min(timeout, grace):g} s of the first failure: killed\n")
                break
            time.sleep(0.05)
    except KeyboardInterrupt:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in procs:
            p.wait()
        return 130
    for p in procs:
        p.wait()
    if failed:
        what = ", ".join(f"rank {r} ({'exit status ' + str(rc) if rc != 'killed' else rc})"
                         for r, rc in sorted(failed.items()))
        sys.stderr.write(f"netc: {len(failed)} of {workers} workers failed: {what}\n")
        return 1
    return 0


def launch_forked(run_rank, workers: int, timeout: float, grace: float = 10.0) -> int:
    """The same with forked processes: rank r runs run_rank(r) (its exit status) in a child of this
    process, which already holds the compiled program; torchrun's variables are set in the child."""
    port = free_port()
    sys.stdout.flush()
    sys.stderr.flush()
    pids = []
    for r in range(workers):
        pid = os.fork()
        if pid == 0:                                   # the child: rank r
            rc = 1
            try:
                os.environ.update(RANK=str(r), WORLD_SIZE=str(workers), LOCAL_RANK=str(r),
                                  LOCAL_WORLD_SIZE=str(workers), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                                  NETC_LAUNCHED="1")
                os.environ.setdefault("OMP_NUM_THREADS", "1")
                os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
                rc = run_rank(r)
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else 1
            except BaseException as e:  # noqa: BLE001 - report, never fall back into the parent's code
                if isinstance(e, NetcError):
                    for d in e.diagnostics:
                        sys.stderr.write(render(d) + "\n")
                else:
                    sys.stderr.write(f"netc: rank {r}: internal error: {type(e).__name__}: {e}\n")
                    if os.environ.get("NETC_DEBUG"):
                        traceback.print_exc()
                rc = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(rc if isinstance(rc, int) else 1)
        pids.append(pid)
    status: dict = {}
    failed: dict = {}
    deadline = None
    try:
        while len(status) < workers:
            for r, pid in enumerate(pids):
                if r in status:
                    continue
                got, st = os.waitpid(pid, os.WNOHANG)
                if got:
                    rc = os.waitstatus_to_exitcode(st)
                    status[r] = rc
                    if rc != 0:
                        failed[r] = rc
                        if deadline is None:
                            deadline = time.monotonic() + min(timeout, grace)
            if deadline is not None and time.monotonic() > deadline and len(status) < workers:
                hung = [r for r in range(workers) if r not in status]
                for r in hung:
                    os.kill(pids[r], signal.SIGKILL)
                    os.waitpid(pids[r], 0)
                    status[r] = failed[r] = "killed"
                sys.stderr.write(f"netc: rank{'s' if len(hung) > 1 else ''} {', '.join(map(str, hung))} did not exit "
                                 f"within {min(timeout, grace):g} s of the first failure: killed\n")
            time.sleep(0.02)
    except KeyboardInterrupt:
        for r, pid in enumerate(pids):
            if r not in status:
                os.kill(pid, signal.SIGINT)
        for r, pid in enumerate(pids):
            if r not in status:
                os.waitpid(pid, 0)
        return 130
    if failed:
        what = ", ".join(f"rank {r} ({'exit status ' + str(rc) if rc != 'killed' else rc})"
                         for r, rc in sorted(failed.items()))
        sys.stderr.write(f"netc: {len(failed)} of {workers} workers failed: {what}\n")
        return 1
    return 0
