"""The house rules that keep netc's modules small and their boundaries real (issue 22; DESIGN.md):

* no function over 150 lines and no module over 1,000 lines, except the ones on the allow-list below,
  which may only shrink: an entry that no longer needs its place must leave the list, and none may
  grow past the size it has there;
* no module imports another module's private names (`from .x import _y`): what two modules share
  is public in the lower one;
* every module says in its docstring what it is.

tests/test_layering.py checks the import direction."""
from __future__ import annotations

import ast
import re
from pathlib import Path

NETC = Path(__file__).resolve().parents[1] / "netc"
MAX_FUNCTION_LINES = 150
MAX_MODULE_LINES = 1000

# path (relative to netc/) or path:function -> its size in lines when it was allowed; lower these
# numbers (or remove the entry) as the code shrinks, never raise them
ALLOWED = {
    "frontend/singa/setup.py:_setup": 300,
    "memory/verify.py:verify_plan": 221,
    "passes/backward.py:_differentiate": 171,
}


def _modules():
    return sorted(p for p in NETC.rglob("*.py"))


def _sizes() -> dict:
    out = {}
    for p in _modules():
        rel = p.relative_to(NETC).as_posix()
        text = p.read_text()
        n = text.count("\n")
        if n > MAX_MODULE_LINES:
            out[rel] = n
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    out[f"{rel}:{node.name}"] = length
    return out


def test_no_function_or_module_too_long():
    sizes = _sizes()
    new = {k: v for k, v in sizes.items() if k not in ALLOWED}
    assert not new, ("over the size limits (functions <= 150 lines, modules <= 1,000): split them "
                     f"rather than adding them to ALLOWED: {new}")
    grown = {k: (v, ALLOWED[k]) for k, v in sizes.items() if k in ALLOWED and v > ALLOWED[k]}
    assert not grown, f"allowed entries that grew (now, allowed): {grown}"


def test_allow_list_only_shrinks():
    sizes = _sizes()
    stale = sorted(k for k in ALLOWED if k not in sizes)
    assert not stale, f"within the limits now: remove from ALLOWED: {stale}"
    slack = {k: (sizes[k], v) for k, v in ALLOWED.items() if k in sizes and sizes[k] < v}
    assert not slack, f"smaller now (size, allowed): lower ALLOWED to the new sizes: {slack}"


def test_no_private_imports_across_modules():
    found = []
    for p in _modules():
        for node in ast.walk(ast.parse(p.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if not node.level and not (node.module or "").startswith("netc"):
                continue
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    found.append(f"{p.relative_to(NETC)}:{node.lineno}: imports {a.name} from "
                                 f"{'.' * node.level}{node.module or ''}")
    assert not found, "private names imported across modules (make them public in the lower one):\n" + "\n".join(found)


def test_every_module_says_what_it_is():
    missing = [str(p.relative_to(NETC)) for p in _modules()
               if p.read_text().strip() and not ast.get_docstring(ast.parse(p.read_text()))]
    assert not missing, f"modules without a docstring: {missing}"


# -- issue 22: no hand-built pass list outside netc/pipelines.py ------------------------------------------

ROOT = NETC.parent
# where a pass manager may be built: the named pipelines and the manager's own module
MANAGER_HOMES = ("netc/pipelines.py", "netc/passes/manager.py")
# file (relative to the repository) -> (how many manager constructions it has, why it cannot ask
# netc.pipelines). This list may only shrink: never add a file or raise a count; a file that no
# longer needs its place leaves the list (test_pass_manager_allow_list_only_shrinks says so).
PASS_MANAGER_ALLOWED = {
    "tests/test_fuzz_regressions.py": (1, "one pass in isolation: expand-model-parallel on a module "
                                          "edited by hand, as a fuzz finding gave it"),
}
_MANAGER_CALL = re.compile(r"\bPassManager\s*\(")


def _manager_calls() -> dict:
    """{file relative to the repository: [line numbers]} of every pass manager built in netc/, bench/
    and tests/ outside MANAGER_HOMES."""
    out = {}
    for top in ("netc", "bench", "tests"):
        for p in sorted((ROOT / top).rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            if rel in MANAGER_HOMES:
                continue
            lines = [i for i, line in enumerate(p.read_text().splitlines(), 1) if _MANAGER_CALL.search(line)]
            if lines:
                out[rel] = lines
    return out


def test_pass_lists_only_in_pipelines():
    """Issue 22: passes run through a named pipeline of netc/pipelines.py (inference, training,
    compile, workers, explain, fuse, custom, ...), never a pass list assembled by hand."""
    calls = _manager_calls()
    new = {f: lines for f, lines in calls.items() if f not in PASS_MANAGER_ALLOWED}
    assert not new, ("a pass manager built outside netc/pipelines.py (file: lines); call the matching "
                     f"netc.pipelines pipeline instead (or add the missing shape there): {new}")
    grown = {f: (len(lines), PASS_MANAGER_ALLOWED[f][0]) for f, lines in calls.items()
             if f in PASS_MANAGER_ALLOWED and len(lines) > PASS_MANAGER_ALLOWED[f][0]}
    assert not grown, f"allowed files with more pass managers than allowed (now, allowed): {grown}"


def test_pass_manager_allow_list_only_shrinks():
    calls = _manager_calls()
    stale = sorted(f for f in PASS_MANAGER_ALLOWED if f not in calls)
    assert not stale, f"no pass manager built there any more: remove from PASS_MANAGER_ALLOWED: {stale}"
    slack = {f: (len(calls[f]), n) for f, (n, _) in PASS_MANAGER_ALLOWED.items()
             if f in calls and len(calls[f]) < n}
    assert not slack, f"fewer pass managers now (now, allowed): lower PASS_MANAGER_ALLOWED: {slack}"
    assert all(why.strip() for _, why in PASS_MANAGER_ALLOWED.values()), "every allowed file says why"
