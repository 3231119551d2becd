"""Frontends: turn a source file into (unresolved) IR. The format is detected from the content."""
from __future__ import annotations

import os

from ..diagnostics import SOURCES, DiagnosticEngine, Loc, NetcError
from .source import read_source  # noqa: F401  (the frontends' one file reader, re-exported)


def detect_format(path: str, text: str) -> str:
    ext = os.path.splitext(path)[1].lower()
    head = text.lstrip()[:200]
    body = "\n".join(line for line in head.splitlines() if not line.lstrip().startswith("//")).lstrip()
    if ext == ".mlir" or body.startswith('"builtin.module"') or head.startswith("// -----// IR Dump"):
        return "mlir"
    if ext == ".nd":
        return "nd"
    if head.startswith("{"):
        return "json"
    if ext in (".conf", ".proto", ".txt"):
        return "singa"
    return "nd"


def load(path: str, diag: DiagnosticEngine | None = None, batch: int = 1, options: dict | None = None):
    """Read `path` and return its IR module. Raises NetcError for the user's problems."""
    from .onnx import import_onnx, is_onnx
    if is_onnx(path):       # binary: read by the onnx package (frontend/onnx.py)
        return import_onnx(path, diag)
    text = read_source(path)
    return load_text(text, path, diag, batch, options)


def load_text(text: str, path: str = "<input>", diag: DiagnosticEngine | None = None, batch: int = 1,
              options: dict | None = None):
    """`batch`: B for formats whose batch size is not in the file (Brainstorm).
    `options`: {"singa_version": "0.1" | "0.2" | "0.3" | "dev"} for SINGA files (detected when absent);
    {"sizes": {name: N}} (the CLI's --size) for a .nd file's named sizes (`size T = 50`) and a Brainstorm
    architecture's T, its sequence length (default 1; also {"time": T})."""
    SOURCES.add(path, text)  # so every diagnostic, even a syntax error, can quote its line
    fmt = detect_format(path, text)
    sizes = dict((options or {}).get("sizes") or {})
    if fmt == "nd":
        from .brainstorm_nd import import_nd, is_brainstorm_form
        if is_brainstorm_form(text):        # Brainstorm's construction syntax (X = Input(...)): its importer
            if set(sizes) - {"T"}:
                _no_such_sizes(sizes, path, "a network in Brainstorm's form has T (the sequence length) alone")
            return import_nd(text, path, diag, batch=batch, time=sizes.get("T", (options or {}).get("time", 1)))
        from .dsl import parse_nd
        return parse_nd(text, path, diag, sizes=sizes)
    if sizes and fmt != "json":
        _no_such_sizes(sizes, path, f"this {fmt} file has none")
    if fmt == "mlir":
        from ..ir.parser import parse_ir
        from ..ir.verifier import verify_ops
        module = parse_ir(text, path)
        # hand-written or edited IR: broken invariants are the user's errors, at the op
        problems = verify_ops(module) + _attr_problems(module)
        if problems:
            from ..diagnostics import Diagnostic
            raise NetcError([Diagnostic("error", f"invalid IR: {msg}", op.loc if op is not None else Loc(path))
                             for msg, op in problems])
        _check_recorded_optimizer(module)
        return module
    if fmt == "json":
        from .jsonloc import load_json
        from .paleo import import_paleo, is_paleo
        data, locs, dups = load_json(text, path)
        if is_paleo(data):
            if sizes:
                _no_such_sizes(sizes, path, "this Paleo network has none")
            return import_paleo(text, path, diag, data, locs, dups)
        from .brainstorm import import_brainstorm, is_bare_hub_layout, is_brainstorm
        if is_brainstorm(data):
            if set(sizes) - {"T"}:
                _no_such_sizes(sizes, path, "a Brainstorm architecture has T (the sequence length) alone")
            return import_brainstorm(text, path, diag, data, locs, dups, batch=batch,
                                     time=sizes.get("T", (options or {}).get("time", 1)))
        if is_bare_hub_layout(data):
            raise NetcError("this is a Brainstorm buffer layout without an architecture: it describes memory, not "
                            "a network; `netc check` validates it", Loc(path, 1, 1))
        raise NetcError("this JSON file is neither a Paleo network (no \"layers\" object) nor a Brainstorm "
                        "architecture (no \"architecture\" object or \"@type\" layers)", Loc(path, 1, 1))
    if fmt == "singa":
        from .singa.to_ir import import_singa
        return import_singa(text, path, diag, version=(options or {}).get("singa_version"))
    raise NetcError(f"unknown input format '{fmt}'", Loc(path, 1, 1))


def _no_such_sizes(sizes: dict, path: str, why: str):
    raise NetcError(f"--size {', '.join(f'{k}={v}' for k, v in sizes.items())}: named sizes belong to .nd files "
                    f"(`size NAME = N`) and Brainstorm architectures (T); {why} (the batch: --batch)", Loc(path, 1, 1))


def _check_recorded_optimizer(module) -> None:
    """IR text's recorded optimizer (the module's `optimizer` attribute) resolves as the optimizer pass
    would resolve it, or the error is at that attribute: every command reads it (export writes it as a
    SINGA updater), not only the training ones."""
    opt = module.attrs.get("optimizer")
    if opt is None:
        return
    from ..ops.optim import OptimizerError, resolve_optimizer
    try:
        resolve_optimizer(opt, {})
    except OptimizerError as e:
        for d in e.diagnostics:
            if d.loc is None or not d.loc.line:
                d.loc = module.attr_loc("optimizer")
        raise


def _attr_problems(module) -> list[tuple]:
    """(message, op) for every attribute of hand-written IR that its op's schema rejects (a float
    or a string where the schema wants integers: `shape = [64, 1e400]` would reach the memory plan
    as inf). Attributes a schema does not declare are the passes' own (fusion groups, ...): left
    alone. The .nd and Paleo frontends check the same schemas as they read."""
    from ..ops import lookup
    from ..ops.registry import COMMON_ATTRS
    out = []
    for op in module.walk():
        opdef = lookup(op.name)
        if opdef is None:
            continue
        for key, msg, _hint in opdef.check_attrs(dict(op.attrs)):
            if key is None or key in opdef.attrs or key in COMMON_ATTRS:
                out.append((msg, op))
        if len(out) > 20:
            break
    return out
