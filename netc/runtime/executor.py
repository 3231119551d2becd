"""The one interface every executor of a program declares, so that a comparison, a training loop or
the Python API works with any of them:

    Executor          set_params(values), get_params(), run(inputs) -> outputs by name
    TrainingExecutor  set_params(values), get_params(), train_step(inputs, lr, seed) -> the loss

Implemented by the reference executor (reference.ReferenceExecutor; train.ReferenceTrainer), the
planned executor (planned.PlannedProgram, PlannedTrainer), the interpreter target (interp.InterpProgram,
InterpTrainer, InterpLibrary) and a compiled library (native.Net). Parameters go in and come out by
their `netc.param` names (optimizer state included where a program has it); inputs by input name.
Distributed ranks run segments of one program each (distributed.py) and are not executors of a
whole program."""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..diagnostics import NetcError


@runtime_checkable
class Executor(Protocol):
    def set_params(self, values: dict) -> None:
        """Parameters by name (each of the program's; a name it does not have is an error)."""

    def get_params(self) -> dict:
        """Every parameter (and optimizer state) by name: copies, not views."""

    def run(self, inputs: dict) -> dict:
        """One forward pass on `inputs` by name; the network's outputs by name."""


@runtime_checkable
class TrainingExecutor(Protocol):
    def set_params(self, values: dict) -> None:
        """As Executor.set_params."""

    def get_params(self) -> dict:
        """As Executor.get_params."""

    def train_step(self, inputs: dict, lr: float, seed: int = 0) -> float:
        """One training step on `inputs` by name with learning rate `lr` and dropout seed `seed`:
        parameters and state updated in place; the sum of the program's losses."""


def compare_executors(a: Executor, b: Executor, inputs: dict, params: dict | None = None) -> dict:
    """Run two executors of one network on the same inputs (and parameters, when given) and return
    each output's largest error relative to `a`'s largest magnitude, by name."""
    import torch
    if params is not None:
        a.set_params(params)
        b.set_params(params)
    ra, rb = a.run(inputs), b.run(inputs)
    missing = sorted(k for k in ra if k not in rb)
    if missing:     # (an executor may return more values than the outputs: the planned one returns all)
        raise NetcError(f"the second executor returns no {', '.join(map(repr, missing))}")
    out = {}
    for k, x in ra.items():
        x, y = x.detach().double().cpu(), rb[k].detach().double().cpu()
        scale = max(float(x.abs().max()) if x.numel() else 0.0, 1e-30)
        out[k] = float((x - y).abs().max()) / scale if x.numel() else 0.0
    return out


def unknown_params(values: dict, known) -> None:
    """The error for parameter names a program does not have (set_params of every executor)."""
    bad = sorted(k for k in values if k not in known)
    if bad:
        raise NetcError(f"no parameter {', '.join(map(repr, bad[:5]))}{' ...' if len(bad) > 5 else ''} in this "
                        f"program (its parameters: {', '.join(sorted(known)[:8])}{' ...' if len(known) > 8 else ''})")
