"""Pass registry and pass manager: pipelines by name, MLIR-style IR dumps, timing, verification.

A pass is a class with `name` ("shape-inference"), `title` ("ShapeInference") and
`run(module, ctx)`. It reports user errors into ctx.diag; the manager stops the pipeline after
a pass that reported errors (later passes would only repeat them). `needed(module)` says whether
a pass still has work to do, so that `netc opt -p shape-inference file.nd` first runs the
prerequisites the file needs and nothing else.
"""
from __future__ import annotations

import sys
import time

from ..diagnostics import NetcError, gc_paused
from ..ir.core import Module
from ..ir.printer import print_ir
# every pass, registered as its module is imported (they import registry.py, never this module)
from . import (backward, dce, expand_model_parallel, flatten_blocks, fuse, materialize_params,  # noqa: F401
               opaque_as_identity, optimizer, partition, plan_memory, rematerialize, resolve_names, select_phase,
               set_dtype, shape_inference, split_workers)
from .registry import PASSES, Pass, PassContext, register_pass  # noqa: F401  (re-exported: the passes' API)

# The canonical order. Requested passes run in the order given; prerequisites are inserted.
# `partition` does nothing (and is not printed) unless a network is to run on K > 1 workers: the
# file's own (SINGA's nworkers_per_group) or --workers K. `split-workers` (one program per rank)
# runs on request, after the training passes when there are any.
DEFAULT_PIPELINE = ["select-phase", "expand-model-parallel", "flatten-blocks", "resolve-names",
                    "shape-inference", "materialize-params", "dce", "partition"]


def _banner(p) -> str:
    return f"// -----// IR Dump After {p.title} ({p.name}) //----- //"


def resolve_pipeline(names: list[str], module: Module | None = None, with_prereqs: bool = True) -> list[str]:
    for n in names:
        if n not in PASSES:
            from ..diagnostics import did_you_mean
            hint = did_you_mean(n, PASSES)
            raise NetcError(f"unknown pass '{n}'" + (f"; did you mean '{hint}'?" if hint else "")
                            + f" (passes: {', '.join(DEFAULT_PIPELINE)})")
    if not with_prereqs:
        return list(names)
    out: list[str] = []

    def add(n):
        for r in PASSES[n].requires:
            if r not in out and r not in names:
                add(r)
        if n not in out:
            out.append(n)

    for n in names:
        add(n)
    # prerequisites whose work is already done (e.g. the input is resolved .mlir) are skipped
    if module is not None:
        out = [n for n in out if n in names or PASSES[n]().needed(module)]
    return out


class PassManager:
    def __init__(self, names: list[str], print_after_all: bool = False, print_after: set | None = None,
                 timing: bool = False, verify: bool = True, out=None):
        self.names = names
        self.print_after_all = print_after_all
        self.print_after = print_after or set()
        self.timing = timing
        self.verify = verify
        self.out = out or sys.stdout
        self.times: list[tuple[str, float]] = []
        self.dumps: list[tuple[str, str]] = []  # (pass name, IR text) when printing

    def run(self, module: Module, ctx: PassContext) -> Module:
        from ..ir.verifier import verify_module
        for n in resolve_pipeline(self.names, module):
            p = PASSES[n]()
            applies = getattr(p, "applies", None)   # a pass may have nothing to do with these options
            if applies is not None and not applies(module, ctx):      # (partition with K = 1): skipped, not printed
                continue
            t0 = time.perf_counter()
            errors_before = ctx.diag.error_count
            with gc_paused():
                p.run(module, ctx)
            self.times.append((n, time.perf_counter() - t0))
            # A pass that reports errors stops the pipeline (later passes would only repeat them).
            # Errors from the frontend do not: layers it marked invalid are skipped by the passes,
            # which still report every independent problem in the rest of the file.
            if ctx.diag.error_count > errors_before:
                raise NetcError([d for d in ctx.diag.diagnostics])
            if self.verify:
                problems = verify_module(module)
                if problems:
                    raise AssertionError(f"IR verification failed after {n}: " + "; ".join(problems[:5]))
            if self.print_after_all or n in self.print_after:
                text = _banner(p) + "\n" + print_ir(module)
                self.dumps.append((n, text))
                self.out.write(text + "\n")
        if ctx.diag.has_errors():
            raise NetcError([d for d in ctx.diag.diagnostics])
        return module

    def timing_report(self) -> str:
        total = sum(t for _, t in self.times) or 1e-12
        lines = ["===" + "-" * 73 + "===", "                         ... Execution time report ...",
                 "===" + "-" * 73 + "===", f"  Total Execution Time: {total:.4f} seconds", "",
                 "  ----Wall Time----  ----Name----"]
        for n, t in self.times:
            lines.append(f"  {t:9.4f} ({100 * t / total:5.1f}%)  {PASSES[n].title} ({n})")
        lines.append(f"  {total:9.4f} (100.0%)  Total")
        return "\n".join(lines) + "\n"
