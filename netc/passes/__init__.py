"""Passes, one per file. Each registers itself (registry.py) when imported; the pass manager
(manager.py) imports them all."""
