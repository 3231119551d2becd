"""Code generation: fusion groups -> kernel specializations -> cubins -> C launcher -> net.so.

    lower.py     groups + memory plan -> launches (KernelCall specializations, argument recipes)
    cache.py     AOT compile (netc.kernels.aot) with an on-disk cache; progress bar
    tune.py      autotuning on a GPU -> tuning files (tuning_file.py) that compile reads anywhere
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
    tuned: int = 0               # kernels compiled with a tuning file's configuration
    tunable: int = 0             # kernels a tuning file could configure


def parse_arch(arch) -> int:
    if isinstance(arch, int):
        return arch
    if arch not in ARCHS:
        raise NetcError(f"unknown --arch '{arch}' (supported: {', '.join(ARCHS)})")
    return ARCHS[arch]


def compile_module(module, plans: dict, out_path: str, *, arch="sm_90", emit_triton: str | None = None,
                   progress_stream=None, embed=None, source: dict | None = None,
                   tuning: dict | None = None) -> CompileResult:
    """Build out_path (a shared library) and its header from a fused, planned module.

    embed: a function (the parameters' layout {"parameters", "param_bytes"}) -> the packed bytes to
    embed in the library (netc.runtime.params.pack, which draws random values as the reference
    executor does; the caller chooses it, so codegen needs nothing of the runtime); without it, the
    caller sets them at run time. `source` (path, sha256, load options) is
    recorded in the manifest so that `netc run NET.so --compare` can rebuild the reference.
    `tuning` ({tuning key: launcher keywords}, tune.load_tuning) replaces default tiles with tuned ones."""
    from ..memory.plan import BATCH, CONSTANT
    from . import lowering_cache
    from .cache import Progress, compile_cached, load_cached
    from .launcher import ABI_VERSION, build_shared_library, generate_c, write_header

    arch_n = parse_arch(arch)
    t0 = time.perf_counter()
    nets = module.networks()
    if len(nets) != 1:
        raise NetcError(f"netc compile needs a file with exactly one network; this one has {len(nets)}")
    net = nets[0]
    plan = plans[net.attrs.get("sym_name", "network")]
    ins, outs = _network_io(net, plan)     # checked before the (slow) lowering
    # a warm compile of an unchanged network takes its launches from the lowering cache and its
    # cubins from the kernel cache, without importing torch or Triton (lowering_cache.py)
    lkey = None if emit_triton else lowering_cache.key(net, plan, arch_n, tuning)
    low = lowering_cache.load(lkey) if lkey else None
    cubins = [] if low is not None else None
    if low is not None:
        distinct = {}
        for L in low.launches:
            L.kernel_index = distinct.setdefault(L.spec_key, len(distinct))
            if L.kernel_index == len(cubins):
                c = load_cached(L.cubin_key)
                if c is None:          # evicted from the kernel cache: lower again
                    low, cubins = None, None
                    break
                cubins.append(c)
    if low is None:
        from .lower import lower_network
        low = lower_network(module, net, plan, tuning=tuning)
    from ..ir.query import param_roles as _param_roles
    roles = _param_roles(module)
    params, param_bytes = [], plan.arenas[CONSTANT].fixed
    for t in plan.tensors:
        if t.kind != "param":
            continue
        off = plan.buffers[t.buffer].offset + t.offset
        params.append(dict(name=t.name[1:], shape=list(t.shape), dtype=t.dtype, offset=off, bytes=t.size,
                           role=roles.get(t.name[1:], "weight"),   # how random values are drawn
                           **({"shares": plan.tensors[t.alias_of].name[1:]} if t.alias == "share" else {})))
        param_bytes = max(param_bytes, off + t.size)
    blob = None
    if embed is not None:   # checked before the (slow) kernels
        from .launcher import MAX_EMBEDDED_PARAM_BYTES
        if param_bytes > MAX_EMBEDDED_PARAM_BYTES:
            raise NetcError(f"the parameters take {param_bytes} bytes, too many to embed in the library "
                            f"(at most {MAX_EMBEDDED_PARAM_BYTES}); set them at run time instead")
        blob = embed(dict(parameters=params, param_bytes=param_bytes))
    t_lower = time.perf_counter()

    firsts = {}
    if cubins is None:
        distinct: dict = {}
        for L in low.launches:
            L.kernel_index = distinct.setdefault(L.spec_key, len(distinct))
        for L in low.launches:
            firsts.setdefault(L.kernel_index, L)
        prog = Progress(len(firsts), "compiling kernels", progress_stream)
        cubins = []
        for i in range(len(firsts)):
            L = firsts[i]
            prog.step(f"{L.call.kernel.__name__} ({L.layers[0]})")
            cubins.append(compile_cached(L.call, arch_n))
        prog.close()
        if lkey:
            lowering_cache.store(lkey, low, {i: c.key for i, c in enumerate(cubins)})
    else:
        for L in low.launches:
            firsts.setdefault(L.kernel_index, L)
    for i, c in enumerate(cubins):
        L = firsts[i]
        if c.n_params != len(L.args) + 2 or len(c.params) != len(L.args):
            raise AssertionError(f"{c.name}: the cubin takes {c.n_params} parameters, the launcher passes "
                                 f"{len(L.args)} + 2 scratch pointers")
    t_kernels = time.perf_counter()

    # inputs, outputs, parameters
    classes = _label_classes(net)
    from .. import __version__
    from ..passes.set_dtype import precision_of
    manifest = dict(
        abi_version=ABI_VERSION, netc=__version__, triton=lowering_cache._version("triton"), target="cuda", arch=f"sm_{arch_n}",
        network=plan.network, batch=plan.batch,
        inputs=[_io(plan, t, classes.get(t.name)) for t in ins], outputs=[_io(plan, t) for t in outs],
        parameters=params, param_bytes=param_bytes,
        # the compute dtype (set-dtype's --dtype, or as declared), f32 accumulation, TF32 or not;
        # each input, output and parameter carries its own dtype (netc_set_params takes them so)
        precision=precision_of(net),
        dtypes=sorted({t.dtype for t in plan.tensors}),
        memory=dict(plan.summary(), constant_bytes=plan.arenas[CONSTANT].size,
                    batch_bytes_per_sample=plan.arenas[BATCH].size,
                    arena_bytes=_const_region(plan) + plan.arenas[BATCH].size * plan.batch),
        kernels=[dict(entry=c.name, kernel=_kernel_name(firsts[i]), constexprs=_constexprs(firsts[i]),
                      num_warps=c.num_warps, shared=c.shared, cubin_bytes=len(c.cubin),
                      tuned=bool(getattr(firsts[i], "tuned", False))) for i, c in enumerate(cubins)],
        schedule=[dict(step=L.step, group=L.group, layers=L.layers, kernel=L.kernel_index, **cost)
                  for L, cost in zip(low.launches, _launch_costs(net, plan, low.launches))],
        splits=low.splits,
        params_embedded=blob is not None,
    )
    if blob is not None:
        import hashlib
        manifest["params_sha256"] = hashlib.sha256(memoryview(blob)).hexdigest()
    if source:
        manifest["source"] = source
    mtext = json.dumps(manifest, indent=1)
    c_src = generate_c(
        arch=arch_n, batch=plan.batch, const_bytes=_const_region(plan), batch_bytes=plan.arenas[BATCH].size,
        param_bytes=param_bytes,
        kernels=[(c.name, c.cubin, c.shared, 32 * c.num_warps) for c in cubins],
        launches=[(L.kernel_index, L.grid, L.args, ",".join(n for n in L.layers if n)) for L in low.launches],
        inputs=[_io_copy(plan, t) for t in ins], outputs=[_io_copy(plan, t) for t in outs],
        manifest=mtext, params_embedded=blob is not None)
    out_dir = os.path.dirname(os.path.abspath(out_path))
    os.makedirs(out_dir, exist_ok=True)
    build_shared_library(c_src, out_path, [c.cubin for c in cubins], params_blob=blob)
    stem = os.path.splitext(os.path.basename(out_path))[0]
    header = os.path.join(os.path.dirname(out_path), stem + ".h")
    write_header(header, stem)
    if emit_triton:
        write_triton_sources(emit_triton, [firsts[i] for i in range(len(firsts))], cubins)
    t_end = time.perf_counter()
    from .tuning_file import TUNED_KERNELS
    return CompileResult(out_path, header, manifest, len(cubins), len(low.launches),
                         sum(c.cached for c in cubins),
                         dict(lower=t_lower - t0, kernels=t_kernels - t_lower, build=t_end - t_kernels,
                              total=t_end - t0),
                         tuned=sum(bool(k["tuned"]) for k in manifest["kernels"]),
                         tunable=sum(k["kernel"] in TUNED_KERNELS for k in manifest["kernels"]))


def _launch_costs(net, plan, launches) -> list[dict]:
    """Per launch, at the compiled batch: `op` (the IR op of its first layer), forward `flops` and
    `bytes` moved, summed over its layers as `netc explain` counts them (ops.layer_cost). Read off
    the IR by layer name, so launches from the lowering cache (no IR ops) get them too. A concat
    copy (lower_network's group "<group>:<input>", one per input copied into its slice) moves its
    input's bytes twice (read, then written) and does no arithmetic."""
    from ..ir.core import STRUCTURAL_OPS
    from ..memory.plan import BATCH
    from ..ops import layer_cost
    ops = {op.attrs.get("name"): op for op in net.regions[0].ops
           if op.name not in STRUCTURAL_OPS and op.name != "netc.input"}
    tensors = {t.name: t for t in plan.tensors}
    out = []
    for L in launches:
        first = ops.get(L.layers[0]) if L.layers else None
        flops = nbytes = 0
        if first is not None and first.name == "netc.concat":
            base = first.attrs.get("fusion_group") or f"op:{first.attrs.get('name')}"
            src = tensors.get(L.group[len(base) + 1:] if L.group.startswith(base + ":") else L.group.rsplit(":", 1)[-1])
            if src is not None:
                nbytes = 2 * src.size * (plan.batch if src.cls == BATCH else 1)
        else:
            for name in L.layers:
                if name in ops:
                    c, b = layer_cost(ops[name])
                    flops, nbytes = flops + c.flops_fwd, nbytes + b
        out.append(dict(op=first.name if first is not None else None, flops=flops, bytes=nbytes))
    return out


def _network_io(net, plan) -> tuple[list, list]:
    """The plan tensors of the network's inputs (in plan order) and outputs (in the order the source
    lists them). Inputs must be batch-sized; an output may have no batch axis (a loss)."""
    from ..ir.query import layer_name, network_inputs, network_outputs
    from ..memory.plan import BATCH, CONSTANT
    ins = [plan.tensors[i] for i in plan.inputs]
    order = {layer_name(op): i for i, op in enumerate(network_outputs(net))}
    outs = sorted((t for t in plan.tensors if t.output), key=lambda t: order.get(t.name, len(order)))
    in_ops = {layer_name(op): op for op in network_inputs(net)}
    for t in ins:
        if t.cls != BATCH:
            op = in_ops.get(t.name)
            raise NetcError(f"input '{t.name}' has shape {_shape(t.shape)}, without the batch axis of the network's "
                            f"other inputs ({plan.batch}): compiled networks (the .so and --target interp) take batch-sized inputs only "
                            f"([{plan.batch}, ...]; a call feeds 1..{plan.batch} samples)",
                            op.loc if op is not None else None)
    for t in ins + outs:
        if t.cls not in (BATCH, CONSTANT):
            raise NetcError(f"'{t.name}' has a time axis; netc compile handles no recurrent networks")
        if t.strides is not None:
            raise AssertionError(f"network result '{t.name}' is strided")
    return ins, outs


def _io(plan, t, classes: int | None = None) -> dict:
    """The manifest's entry of a network input or output. Batch-sized ones ("batched": true) are
    [b, ...] at a call's batch b, sample s at arena_offset_per_sample * b + s * pitch +
    offset_in_sample in the batch arena (memory/plan.py's address). One without a batch axis (a
    loss reduced over the batch's samples: constant class) has its own shape at every batch and
    lives at `offset` bytes from the arena's start (the constant region, like the parameters).
    `classes`: the class count of an input read as a SoftmaxLoss's labels (netc run NET.so draws
    random labels from it, as the reference executor does)."""
    from ..memory.plan import BATCH
    buf = plan.buffers[t.buffer]
    d = dict(name=t.name, shape=list(t.shape), dtype=t.dtype, batched=t.cls == BATCH)
    if t.cls == BATCH:
        d.update(region="batch", bytes_per_sample=t.size, arena_offset_per_sample=buf.offset,
                 offset_in_sample=t.offset, pitch=buf.size)
    else:
        d.update(region="constant", offset=buf.offset + t.offset, bytes=t.size)
    if classes is not None:
        d["classes"] = classes
    return d


def _io_copy(plan, t) -> tuple:
    """The launcher's copy of a network input or output (launcher.generate_c): (batched, bytes per
    sample times b plus constant, width, pitch); without a batch axis, all its bytes at one address
    of the constant region."""
    from ..memory.plan import BATCH
    buf = plan.buffers[t.buffer]
    if t.cls == BATCH:
        return (True, buf.offset, t.offset, t.size, buf.size)
    return (False, 0, buf.offset + t.offset, t.size, t.size)


def _label_classes(net) -> dict:
    """{input name: C} for the inputs a netc.softmax_loss reads as labels (its second operand): C is
    the class count, the logits' features (the rule of runtime/reference.py's random inputs)."""
    from ..ir.query import layer_name, network_inputs
    owner = {id(op.results[0]): layer_name(op) for op in network_inputs(net) if op.results}
    out = {}
    for op in net.regions[0].ops:
        if op.name == "netc.softmax_loss" and len(op.operands) == 2 and id(op.operands[1]) in owner:
            c = 1
            for d in op.operands[0].type.shape[1:]:
                c *= d
            out[owner[id(op.operands[1])]] = c
    return out


def _shape(s) -> str:
    return "[" + ", ".join(str(d) for d in s) + "]"


def _kernel_name(L) -> str:
    return L.kernel_name if hasattr(L, "kernel_name") else L.call.kernel.__name__


def _constexprs(L) -> dict:
    if hasattr(L, "constexprs"):
        return L.constexprs
    return {k: list(v) if isinstance(v, tuple) else v for k, v in L.call.constexprs.items()}


def _const_region(plan) -> int:
    from ..memory.plan import CONSTANT, align_up
    return align_up(plan.arenas[CONSTANT].size, max(plan.alignment, 256))


def write_triton_sources(directory: str, launches: list, cubins: list) -> None:
    """The Triton source of every kernel used (its module, plus the shared helpers it calls) and
    the list of specializations compiled from it."""
    from ..kernels import common
    from ..ops import geometry
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
