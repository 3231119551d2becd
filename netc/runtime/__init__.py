"""Running networks: the reference executor (plain torch on the IR, the oracle every target is
checked against) and compiled .so artifacts loaded with ctypes and called with torch tensors
(native.py; parameter files and the packed parameter layout in params.py); the executors' one
interface (executor.py), the interpreter target (interp.py), training (train.py), K ranks
(distributed.py, workers.py) and what `netc run`'s flags mean (flags.py, run.py).

The names below are reached lazily (PEP 562): importing a submodule that needs no torch (flags.py,
for `netc compile`) must not import torch through this package."""

# name -> its module in this package
_LAZY = {"Net": "native", "load": "native", "read_manifest": "native", "module_params": "reference",
         "network_outputs": "reference", "run_module": "reference", "run_reference": "reference"}


def __getattr__(name):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
