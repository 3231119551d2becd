"""What a pass is and how it is registered (the pass manager, manager.py, runs them; each pass
module imports only this, so registering never imports the manager)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..diagnostics import DiagnosticEngine
from ..ir.core import Module

PASSES: dict[str, type] = {}

def register_pass(cls):
    PASSES[cls.name] = cls
    return cls


@dataclass
class PassContext:
    diag: DiagnosticEngine = field(default_factory=DiagnosticEngine)
    phase: str = "train"
    options: dict = field(default_factory=dict)
    # Facts one pass leaves for the diagnostics of a later one (never for semantics).
    notes: dict = field(default_factory=dict)


class Pass:
    name = ""
    title = ""
    requires: tuple = ()
    summary = ""

    def needed(self, module: Module) -> bool:
        return True

    def run(self, module: Module, ctx: PassContext):
        raise NotImplementedError
