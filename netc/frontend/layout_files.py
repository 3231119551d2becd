"""Brainstorm layout files read as files: telling a layout document apart from a network file, and
checking one (`netc check`/`import` on a layout: read it and verify it, W1-W4 and overlaps)."""
from __future__ import annotations

from ..diagnostics import SOURCES, Loc, NetcError


def layout_text(path):
    """The file's text if it is a Brainstorm layout document (has "sizes" and "layout"), else None."""
    if not path.endswith(".json"):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return None
    head = text[:4096]
    if '"BufferView"' in text and '"layers"' not in head:
        return text  # a Brainstorm @-key hub layout
    return text if ('"sizes"' in head or '"sizes"' in text) and '"layout"' in text and '"layers"' not in head else None


def check_layout_file(path: str, text: str, diag) -> tuple[str, bool]:
    """Check a layout document (the text of `path`): (the report, whether it is a hub layout wrapped
    with its architecture, which the caller loads and checks too). Problems are located errors."""
    from .hub_layout import is_hub_document
    from .jsonloc import load_json, nearest_loc, path_join
    from .layout import LayoutError, read_layout
    SOURCES.add(path, text)
    doc, locs, _ = load_json(text, path)
    if is_hub_document(doc):  # Brainstorm's later @-key format (maybe wrapped with its architecture)
        return _check_hub_document(path, diag, doc, locs)
    # a layout document, or several under "results" (how Brainstorm's own runs were recorded)
    found = [("$", doc)]
    if isinstance(doc, dict) and "sizes" not in doc and isinstance(doc.get("results"), dict):
        found = [(path_join("$.results", k), v) for k, v in doc["results"].items()
                 if isinstance(v, dict) and "sizes" in v and "layout" in v]
    reports = []
    for base, sub in found:
        try:
            lay = read_layout({"sizes": sub.get("sizes"), "layout": sub.get("layout"),
                               **({"netc": sub["netc"]} if "netc" in sub else {})} if isinstance(sub, dict) else sub)
        except LayoutError as e:
            for p, msg in e.problems:
                p = base + p[1:]
                loc = locs.get(p) or nearest_loc(locs, p) or Loc(path, 1, 1)
                diag.error(msg, Loc(loc.file, loc.line, loc.col, p))
            continue
        n = len(getattr(lay, "arrays", []) or [])
        where = "" if base == "$" else f" ({base})"
        reports.append(f"{path}{where}: a valid layout: sizes {sub.get('sizes')}" + (f", {n} arrays" if n else ""))
    if diag.has_errors():
        raise NetcError(diag.diagnostics[:])
    return "\n".join(reports) + "\n", False


def _check_hub_document(path, diag, doc, locs) -> tuple[str, bool]:
    """A hub layout (bare, or wrapped with an architecture, which the caller checks too)."""
    from .hub_layout import LayoutError, nearest_loc, read_hub_layout
    try:
        lay = read_hub_layout(doc)
    except LayoutError as e:
        _located(path, diag, locs, e.problems)
    if isinstance(doc.get("architecture"), dict) and isinstance(doc.get("layout"), dict):
        from .brainstorm_structure import contradictions     # the layout against its own architecture
        _located(path, diag, locs, contradictions(doc))
    return (f"{path}: a valid Brainstorm hub layout: {len(lay.hub_sizes)} hubs, {len(lay.arrays)} arrays\n",
            isinstance(doc.get("architecture"), dict))


def _located(path, diag, locs, problems):
    """Each (JSON path, message) as a located error; NetcError if there was one."""
    from .hub_layout import nearest_loc
    for p, msg in problems:
        loc = locs.get(p) or nearest_loc(locs, p) or Loc(path, 1, 1)
        diag.error(msg, Loc(loc.file, loc.line, loc.col, p))
    if problems:
        raise NetcError(diag.diagnostics[:])
