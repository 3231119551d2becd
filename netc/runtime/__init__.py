"""Running networks: the reference executor (plain torch on the IR, the oracle every target is
checked against) and compiled .so artifacts loaded with ctypes and called with torch tensors
(native.py; parameter files and the packed parameter layout in params.py)."""
from .native import Net, load, read_manifest  # noqa: F401
from .reference import module_params, network_outputs, run_module, run_reference  # noqa: F401
