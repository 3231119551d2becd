"""Code generation: fusion groups -> kernel specializations -> cubins -> C launcher -> net.so.

    compile.py   compile_module / compile_rank: plan, lower and build a library (plan_library lays out its arena)
    manifest.py  what a library's manifest and launcher are told: inputs, outputs, parameters, schedule, segments
    lower.py     groups + memory plan -> launches (KernelCall specializations, argument recipes)
    cache.py     AOT compile (netc.kernels.aot) with an on-disk cache; progress bar
    tune.py      autotuning on a GPU -> tuning files (tuning_file.py) that compile reads anywhere
    launcher.py  the C launcher source, its header, and the `cc` build

compile_module() is what `netc compile --target cuda` runs after the passes (the pipeline plus
fuse and plan-memory). The interpreter target (netc/runtime/interp.py) reuses lower.py as is.
Which kernel an op becomes is netc/kernels/lowering.py's table (lower.py asks it). This module only
re-exports codegen's API.
"""
from .compile import (ARCHS, CompileResult, Library, compile_module, compile_rank, comm_order_problem,  # noqa: F401
                      parse_arch, plan_library, plan_program, write_triton_sources)
from .manifest import (const_region, io_copy, launch_costs, network_io, rank_io, segment_manifest,  # noqa: F401
                       training_io)
from .recipes import is_comm, is_rank_program  # noqa: F401
