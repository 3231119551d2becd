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
    ("api", "onnx"),
    ("v2",),
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


def draw(path: str) -> None:
    """The import graph between netc's top-level packages and modules, bottom to top in LAYERS'
    order, as its transitive reduction (an import implied by a path through others is left out):
    docs/architecture.md's picture, `python tests/test_layering.py docs/images/imports.png`."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    g = nx.DiGraph()
    for a, b, _ in imports(modules()):
        ta, tb = layer(a)[1], layer(b)[1]
        if ta and tb and ta != tb:
            g.add_edge(ta, tb)
    g = nx.transitive_reduction(g)
    pos = {}
    for i, names in enumerate(LAYERS):
        for j, n in enumerate(names):
            shift = 0.9 if len(names) == 1 and i % 2 else (-0.9 if len(names) == 1 else 0)
            pos[n] = ((j - (len(names) - 1) / 2) * 2.4 + shift, i)
    fig, ax = plt.subplots(figsize=(8, 8))
    for a, b in g.edges:
        (xa, ya), (xb, yb) = pos[a], pos[b]
        ax.annotate("", xy=(xb, yb), xytext=(xa, ya),
                    arrowprops=dict(arrowstyle="-|>", color="0.45", lw=1.0, shrinkA=13, shrinkB=13))
    for n, (x, y) in pos.items():
        ax.text(x, y, n, ha="center", va="center", fontsize=10,
                bbox=dict(boxstyle="round,pad=0.35", fc="#f6d8a8" if n in ("cli", "api") else "#cfe0f3", ec="0.3"))
    ax.set_xlim(-5, 5)
    ax.set_ylim(-0.7, len(LAYERS) - 0.3)
    ax.axis("off")
    ax.set_title("netc's layers: an arrow is an import (implied ones left out); every arrow points down", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    import sys
    draw(sys.argv[1] if len(sys.argv) > 1 else "docs/images/imports.png")
