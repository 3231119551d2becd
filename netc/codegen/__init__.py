"""Code generation: fusion groups -> kernel specializations -> cubins -> C launcher -> net.so.

    lower.py     groups + memory plan -> launches (KernelCall specializations, argument recipes)
    cache.py     AOT compile (netc.kernels.aot) with an on-disk cache; progress bar
    launcher.py  the C launcher source, its header, and the `cc` build

compile_module() is what `netc compile --target cuda` runs after the passes (the pipeline plus
fuse and plan-memory). The interpreter target (netc/runtime/interp.py) reuses lower.py as is.
"""
from __future__ import annotations

import inspect
import json
import os
import shutil
import time
from dataclasses import dataclass, field

from ..diagnostics import NetcError

ARCHS = {"sm_90": 90, "sm_80": 80}


@dataclass
class CompileResult:
    so_path: str
    header_path: str
    manifest: dict
    kernels: int                 # distinct cubins
    launches: int
    cached: int                  # cubins found in the cache
    seconds: dict = field(default_factory=dict)


def parse_arch(arch) -> int:
    if isinstance(arch, int):
        return arch
    if arch not in ARCHS:
        raise NetcError(f"unknown --arch '{arch}' (supported: {', '.join(ARCHS)})")
    return ARCHS[arch]


def compile_module(module, plans: dict, out_path: str, *, arch="sm_90", emit_triton: str | None = None,
                   progress_stream=None) -> CompileResult:
    """Build out_path (a shared library) and its header from a fused, planned module."""
    from ..memory.plan import BATCH, CONSTANT
    from .cache import Progress, compile_cached
    from .launcher import ABI_VERSION, build_shared_library, generate_c, write_header
    from .lower import lower_network

    arch_n = parse_arch(arch)
    t0 = time.perf_counter()
    nets = module.networks()
    if len(nets) != 1:
        raise NetcError(f"netc compile needs a file with exactly one network; this one has {len(nets)}")
    net = nets[0]
    plan = plans[net.attrs.get("sym_name", "network")]
    low = lower_network(module, net, plan)
    t_lower = time.perf_counter()

    distinct: dict = {}
    for L in low.launches:
        L.kernel_index = distinct.setdefault(L.spec_key, len(distinct))
    firsts = {}
    for L in low.launches:
        firsts.setdefault(L.kernel_index, L)
    prog = Progress(len(firsts), "compiling kernels", progress_stream)
    cubins = []
    for i in range(len(firsts)):
        L = firsts[i]
        prog.step(f"{L.call.kernel.__name__} ({L.layers[0]})")
        c = compile_cached(L.call, arch_n)
        if c.n_params != len(L.args) + 2 or len(c.params) != len(L.args):
            raise AssertionError(f"{c.name}: the cubin takes {c.n_params} parameters, the launcher passes "
                                 f"{len(L.args)} + 2 scratch pointers")
        cubins.append(c)
    prog.close()
    t_kernels = time.perf_counter()

    # inputs, outputs, parameters
    def io(t):
        buf = plan.buffers[t.buffer]
        return dict(name=t.name, shape=list(t.shape), dtype=t.dtype, bytes_per_sample=t.size,
                    arena_offset_per_sample=buf.offset, offset_in_sample=t.offset, pitch=buf.size)
    ins = [plan.tensors[i] for i in plan.inputs]
    outs = [t for t in plan.tensors if t.output]
    for t in ins + outs:
        if t.cls != BATCH:
            raise NetcError(f"'{t.name}' has no batch axis; netc compile handles batch-sized inputs and outputs only")
        if t.strides is not None:
            raise AssertionError(f"network result '{t.name}' is strided")
    params, param_bytes = [], plan.arenas[CONSTANT].fixed
    for t in plan.tensors:
        if t.kind != "param":
            continue
        off = plan.buffers[t.buffer].offset + t.offset
        params.append(dict(name=t.name[1:], shape=list(t.shape), dtype=t.dtype, offset=off, bytes=t.size,
                           **({"shares": plan.tensors[t.alias_of].name[1:]} if t.alias == "share" else {})))
        param_bytes = max(param_bytes, off + t.size)
    import triton
    from .. import __version__
    manifest = dict(
        abi_version=ABI_VERSION, netc=__version__, triton=triton.__version__, target="cuda", arch=f"sm_{arch_n}",
        network=plan.network, batch=plan.batch,
        inputs=[io(t) for t in ins], outputs=[io(t) for t in outs],
        parameters=params, param_bytes=param_bytes,
        dtypes=sorted({t.dtype for t in plan.tensors}),
        memory=dict(plan.summary(), constant_bytes=plan.arenas[CONSTANT].size,
                    batch_bytes_per_sample=plan.arenas[BATCH].size,
                    arena_bytes=_const_region(plan) + plan.arenas[BATCH].size * plan.batch),
        kernels=[dict(entry=c.name, kernel=firsts[i].call.kernel.__name__,
                      constexprs={k: list(v) if isinstance(v, tuple) else v
                                  for k, v in firsts[i].call.constexprs.items()},
                      num_warps=c.num_warps, shared=c.shared, cubin_bytes=len(c.cubin)) for i, c in enumerate(cubins)],
        schedule=[dict(step=L.step, group=L.group, layers=L.layers, kernel=L.kernel_index) for L in low.launches],
        splits=low.splits,
    )
    mtext = json.dumps(manifest, indent=1)
    c_src = generate_c(
        arch=arch_n, batch=plan.batch, const_bytes=_const_region(plan), batch_bytes=plan.arenas[BATCH].size,
        param_bytes=param_bytes,
        kernels=[(c.name, c.cubin, c.shared, 32 * c.num_warps) for c in cubins],
        launches=[(L.kernel_index, L.grid, L.args, ",".join(n for n in L.layers if n)) for L in low.launches],
        inputs=[(plan.buffers[t.buffer].offset, t.offset, t.size, plan.buffers[t.buffer].size) for t in ins],
        outputs=[(plan.buffers[t.buffer].offset, t.offset, t.size, plan.buffers[t.buffer].size) for t in outs],
        manifest=mtext)
    out_dir = os.path.dirname(os.path.abspath(out_path))
    os.makedirs(out_dir, exist_ok=True)
    build_shared_library(c_src, out_path, [c.cubin for c in cubins])
    stem = os.path.splitext(os.path.basename(out_path))[0]
    header = os.path.join(out_dir, stem + ".h")
    write_header(header, stem)
    if emit_triton:
        write_triton_sources(emit_triton, [firsts[i] for i in range(len(firsts))], cubins)
    t_end = time.perf_counter()
    return CompileResult(out_path, header, manifest, len(cubins), len(low.launches),
                         sum(c.cached for c in cubins),
                         dict(lower=t_lower - t0, kernels=t_kernels - t_lower, build=t_end - t_kernels,
                              total=t_end - t0))


def _const_region(plan) -> int:
    from ..memory.plan import CONSTANT, align_up
    return align_up(plan.arenas[CONSTANT].size, max(plan.alignment, 256))


def write_triton_sources(directory: str, launches: list, cubins: list) -> None:
    """The Triton source of every kernel used (its module, plus the shared helpers it calls) and
    the list of specializations compiled from it."""
    from ..kernels import common, geometry
    os.makedirs(directory, exist_ok=True)
    mods = {common.__name__: common, geometry.__name__: geometry}
    for L in launches:
        m = inspect.getmodule(L.call.kernel.fn)
        mods[m.__name__] = m
    for name, m in mods.items():
        shutil.copyfile(inspect.getsourcefile(m), os.path.join(directory, name.rsplit(".", 1)[-1] + ".py"))
    specs = [dict(entry=c.name, kernel=L.call.kernel.__name__, module=L.call.kernel.__module__,
                  constexprs={k: list(v) if isinstance(v, tuple) else v for k, v in L.call.constexprs.items()},
                  options=L.call.options, first_layer=L.layers[0]) for L, c in zip(launches, cubins)]
    with open(os.path.join(directory, "specializations.json"), "w") as f:
        json.dump(specs, f, indent=1)
