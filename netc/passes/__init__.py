"""Passes, one per file; importing load_all() registers them with the pass manager."""


def load_all():
    from . import (dce, expand_model_parallel, flatten_blocks, fuse, materialize_params,  # noqa: F401
                   opaque_as_identity, plan_memory, resolve_names, select_phase, set_dtype, shape_inference)
