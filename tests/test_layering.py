"""The layers import downward only, and nothing imports in a circle (shared/DESIGN.md, "One op, one
place"; netc/__init__.py lists the order). Every import counts, the ones inside functions too:
those exist only to keep startup fast (torch, Triton, matplotlib load slowly) and may never be a
way around a cycle, which the acyclic import graph proves."""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

NETC = Path(__file__).resolve().parents[1] / "netc"
# bottom to top; a module may import its own layer and the ones below
LAYERS = [
    ("diagnostics", "version"),
    ("ir",),
    ("ops",),
    ("frontend",),
    ("memory",),
    ("passes",),
    ("pipelines",),
    ("kernels",),
    ("codegen",),
    ("runtime",),
    ("costmodel", "explain", "export", "profile"),
    ("api",),
    ("cli", "__main__"),
]
LEVEL = {name: i for i, names in enumerate(LAYERS) for name in names}


def modules() -> dict:
    out = {}
    for p in NETC.rglob("*.py"):
        parts = p.relative_to(NETC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


def imports(mods: dict):
    """(importer, imported module, line) for every netc import, resolved to a module of netc."""
    def resolve(t):
        while t not in mods and "." in t:
            t = t.rsplit(".", 1)[0]
        return t if t in mods else None
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - node.level + 1]
                    root = ".".join(base + ([node.module] if node.module else []))
                elif (node.module or "").split(".")[0] == "netc":
                    root = node.module
                else:
                    continue
                targets = [resolve(f"{root}.{a.name}") for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [resolve(a.name) for a in node.names if a.name.split(".")[0] == "netc"]
            else:
                continue
            for t in targets:
                if t and t != name:
                    yield name, t, node.lineno


def layer(module: str) -> tuple:
    top = module.split(".")[1] if "." in module else ""
    return LEVEL.get(top), top


def test_every_module_has_a_layer():
    missing = sorted({layer(m)[1] for m in modules() if m != "netc" and layer(m)[0] is None})
    assert not missing, f"add these to LAYERS (and netc/__init__.py's list): {missing}"


def test_imports_go_downward_only():
    mods = modules()
    bad = []
    for a, b, line in imports(mods):
        if b == "netc" or a == "netc":          # the package's own __init__ (version) is below everything
            continue
        (la, na), (lb, nb) = layer(a), layer(b)
        if lb > la:
            bad.append(f"{mods[a].relative_to(NETC.parent)}:{line}: {na} (layer {la}) imports {b} (layer {lb})")
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_no_import_cycles():
    g = nx.DiGraph()
    for a, b, _ in imports(modules()):
        g.add_edge(a, b)
    cycles = list(nx.simple_cycles(g))
    assert not cycles, "import cycles (counting imports inside functions):\n" + "\n".join(
        " -> ".join(c + [c[0]]) for c in cycles[:10])


def test_the_check_catches_an_upward_import(tmp_path, monkeypatch):
    """The test above cannot pass vacuously: an ops module importing the runtime is found."""
    import shutil
    fake = tmp_path / "netc"
    shutil.copytree(NETC, fake, ignore=shutil.ignore_patterns("__pycache__"))
    (fake / "ops" / "bad.py").write_text("def f():\n    from ..runtime import native\n")
    monkeypatch.setattr(__import__(__name__), "NETC", fake)
    try:
        test_imports_go_downward_only()
    except AssertionError as e:
        assert "ops/bad.py:2: ops (layer 2) imports netc.runtime.native (layer 9)" in str(e)
    else:
        raise AssertionError("an upward import went unnoticed")
