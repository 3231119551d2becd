"""Running networks: the reference executor (plain torch on the IR, the oracle every target is
checked against). Loading compiled .so artifacts will live here too."""
from .reference import module_params, network_outputs, run_module, run_reference  # noqa: F401
