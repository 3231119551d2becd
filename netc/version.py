"""netc's version (pyproject.toml's), at the bottom layer: what a library's manifest and a profile
record, importable from any layer without importing the package root (netc/__init__.py reaches the
Python API, a layer above everything that records it)."""
__version__ = "0.1.0"
