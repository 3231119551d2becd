"""Compiling a library: compile_module (the passes' fused, planned module -> net.so and its header),
compile_rank (one rank's program), plan_library (a library's programs lowered and its arena laid out).

compile_module() is what `netc compile --target cuda` runs after the passes (the pipeline plus
fuse and plan-memory). The interpreter target (netc/runtime/interp.py) reuses lower.py as is.
Which kernel an op becomes is netc/kernels/lowering.py's table (lower.py asks it).

A training library (`netc compile --train`, train=) holds two programs in one arena: the training
step (the backward and optimizer passes' program, planned in training mode) and the forward (the
inference program of the same source), whose parameters are the training step's (recipes.ArenaLayout:
its lowering addresses them at the training plan's offsets; parameters it derives, a batch norm's
folded affine, get its own storage and a prologue of kernels). launcher.py has the ABI.

A rank library (network=, one rank's program of a split-workers module, forward or training step)
holds that one program, compiled for its compiled batch only, its schedule cut into segments at its
communication ops (lower.py: CommPoint; the manifest's `segmented` section, segment_manifest: the
segments and, between them, each communication op with the arena places of its operands and
results; `rank`: rank, world, the program's learning-rate and seed inputs, losses, gradients).
plan_program plans it so that its communication ops keep the program's order (docs/partitioning.md,
"compiled ranks").
"""
from __future__ import annotations

import inspect
import json
import os
import shutil
import time
from dataclasses import dataclass, field

from ..diagnostics import NetcError
from .manifest import (const_region, constexprs_of, index_bounds, io_copy, io_entry, kernel_name, label_classes,
                       lengths_bounds, network_io, parameters_manifest, rank_io, rank_manifest, schedule_manifest, segment_manifest, segments_of,
                       training_io, training_manifest)
from .recipes import is_comm, is_rank_program

ARCHS = {"sm_90": 90, "sm_80": 80}


def comm_order_problem(net, plan) -> str | None:
    """Why `plan`'s schedule cannot run rank program `net` in segments, or None. Its communication ops
    must run in the program's order -- every rank's program is a subsequence of one global order, in
    which blocking receives and collectives cannot deadlock and every group sees the same sequence --
    and a gradient bucket's all-reduces one right after the other (the runtime runs them as one)."""
    from ..ir.query import layers
    ops = {op.attrs.get("name"): op for op in layers(net)}
    prog = [n for n, op in ops.items() if is_comm(op)]
    names = set(prog)
    sched = [(st.index, st.layers[0]) for st in plan.steps if st.layers and st.layers[0] in names]
    if [n for _, n in sched] != prog:
        first = next(i for i, (a, (_, b)) in enumerate(zip(prog, sched)) if a != b)
        return (f"its schedule runs the communication op '{sched[first][1]}' where the program runs "
                f"'{prog[first]}'")
    for (i, a), (j, b) in zip(sched, sched[1:]):
        ba, bb = ops[a].attrs.get("bucket"), ops[b].attrs.get("bucket")
        if ba is not None and ba == bb and ops[a].name == ops[b].name and j != i + 1:
            return f"its schedule runs other ops between the all-reduces '{a}' and '{b}' of one gradient bucket"
    return None


def plan_program(module, net, mode: str | None = None):
    """The memory plan codegen compiles network `net` with: plan_memory's (the best of its schedules);
    for a rank's program (split-workers), the best schedule that keeps its communication ops in the
    program's order (comm_order_problem), else the program's own order."""
    from ..memory.plan import plan_memory
    plan = plan_memory(module, net, mode=mode)
    if is_rank_program(net) and comm_order_problem(net, plan):
        plan = plan_memory(module, net, mode=mode, schedule="original")
    return plan


def compile_rank(module, network, out_path: str, **kw) -> "CompileResult":
    """The library of one rank's program (`netc compile FILE --workers K`, `netc run --workers K --target
    cuda`): the split-workers module fused, the rank's network planned by plan_program (for training
    when it is a training program) and compiled alone (compile_module's keywords `kw`)."""
    from ..memory.verify import check_plan
    from ..pipelines import fuse
    net = _named_network(module, network)
    training = "gradients" in net.attrs
    ctx = fuse(module, "train" if training else "test")
    if ctx.diag.has_errors():
        raise NetcError(ctx.diag.diagnostics[:])
    plan = plan_program(module, net, mode="training" if training else "inference")
    check_plan(plan, module, net)
    return compile_module(module, {plan.network: plan}, out_path, network=net.attrs.get("sym_name"), **kw)


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
                   tuning: dict | None = None, train: tuple | None = None, network=None) -> CompileResult:
    """Build out_path (a shared library) and its header from a fused, planned module.

    embed: a function (the parameters' layout {"parameters", "param_bytes"}) -> the packed bytes to
    embed in the library (netc.runtime.params.pack, which draws random values as the reference
    executor does; the caller chooses it, so codegen needs nothing of the runtime); without it, the
    caller sets them at run time. `source` (path, sha256, load options) is
    recorded in the manifest so that `netc run NET.so --compare` can rebuild the reference.
    `tuning` ({tuning key: launcher keywords}, tune.load_tuning) replaces default tiles with tuned ones.
    `train`: (training module, its plans) -- the backward and optimizer passes' program of the same
    source, fused and planned in training mode -- makes a training library: `module` is then its
    forward (inference) program, compiled to read the parameters where the training step keeps
    them (launcher.py: one arena, two programs; the manifest's `training` section). `network` (a
    name): the network of a module of several to compile -- a rank's program of a split-workers module
    makes a rank library (its plan from plan_program; the manifest's `rank` and `segmented`)."""
    from ..memory.model import BATCH, CONSTANT
    from .launcher import ABI_VERSION, build_shared_library, generate_c, write_header

    arch_n = parse_arch(arch)
    t0 = time.perf_counter()
    lib = plan_library(module, plans, train, arch_n=arch_n, tuning=tuning, cache=not emit_triton, network=network)
    net, plan, ins, outs, layout = lib.net, lib.plan, lib.ins, lib.outs, lib.layout
    tnet, tplan, lows, regions, arena_bytes = lib.tnet, lib.tplan, lib.lows, lib.regions, lib.arena_bytes
    params, param_bytes = lib.params, lib.param_bytes
    pblob = None
    if embed is not None:   # checked before the (slow) kernels
        from .launcher import MAX_EMBEDDED_PARAM_BYTES
        if param_bytes > MAX_EMBEDDED_PARAM_BYTES:
            raise NetcError(f"the parameters take {param_bytes} bytes, too many to embed in the library "
                            f"(at most {MAX_EMBEDDED_PARAM_BYTES}); set them at run time instead")
        pblob = embed(dict(parameters=params, param_bytes=param_bytes))
    t_lower = time.perf_counter()
    cubins, firsts = _kernels_of([low for low, _ in lows], arch_n, progress_stream)
    for low, lkey in lows:
        if lkey and not getattr(low, "from_cache", False):
            from . import lowering_cache
            lowering_cache.store(lkey, low, {i: c.key for i, c in enumerate(cubins)})
    t_kernels = time.perf_counter()
    low = lows[0][0]

    # inputs, outputs, parameters
    from . import lowering_cache
    from ..version import __version__
    from ..passes.set_dtype import precision_of
    classes, rows, steps = label_classes(net), index_bounds(net), lengths_bounds(net)
    fwd_const_off = layout.const_shift if train is not None else 0
    fc, fb = regions.get("forward_constant", 0), regions.get("forward_batch", 0)
    data_offs, blob, ws_off = lib.data_offsets, lib.data, lib.workspace_offset
    if train is not None:
        tmodule = train[0]
        tins, troles = lib.tins, lib.troles
    rnames = ("forward_constant", "forward_batch") if train is not None else ("constant", "batch")
    manifest = dict(
        abi_version=ABI_VERSION, netc=__version__, triton=lowering_cache._version("triton"), target="cuda", arch=f"sm_{arch_n}",
        network=plan.network, batch=plan.batch,
        inputs=[io_entry(plan, t, classes.get(t.name), rnames, fwd_const_off, rows.get(t.name), steps.get(t.name))
                for t in ins],
        outputs=[io_entry(plan, t, None, rnames, fwd_const_off) for t in outs],
        parameters=params, param_bytes=param_bytes,
        # the compute dtype (set-dtype's --dtype, or as declared), f32 accumulation, TF32 or not;
        # each input, output and parameter carries its own dtype (netc_set_params takes them so)
        precision=precision_of(net),
        dtypes=sorted({t.dtype for t in plan.tensors}),
        memory=dict(plan.summary(), constant_bytes=plan.arenas[CONSTANT].size,
                    batch_bytes_per_sample=plan.arenas[BATCH].size,
                    arena_bytes=const_region(plan) + plan.arenas[BATCH].size * plan.batch),
        regions=dict(regions, arena_bytes=arena_bytes),
        kernels=[dict(entry=c.name, kernel=kernel_name(firsts[i]), constexprs=constexprs_of(firsts[i]),
                      num_warps=c.num_warps, shared=c.shared, cubin_bytes=len(c.cubin),
                      tuned=bool(getattr(firsts[i], "tuned", False))) for i, c in enumerate(cubins)],
        schedule=schedule_manifest(net, plan, low.launches),
        splits=low.splits,
        params_embedded=pblob is not None,
    )
    rank = is_rank_program(net)
    seg_low = lows[1][0] if train is not None else low
    manifest["segmented"] = segment_manifest(seg_low, (tplan or plan).batch,
                                             "training" if train is not None or "gradients" in net.attrs
                                             else "forward")
    seg_c = dict(bounds=[a for a, _ in segments_of(seg_low)] + [len(seg_low.launches)], train=train is not None)
    if rank:
        manifest["rank"] = rank_manifest(net, plan, lib.troles)
        troles = lib.troles
        seg_c.update(rank=(net.attrs["rank"], net.attrs["world"], net.attrs.get("of", plan.network)),
                     lr=troles["learning_rate"]["offset"] if "learning_rate" in troles else None,
                     seed=(troles["seed"]["offset"], troles["seed"]["bytes"]) if "seed" in troles else None)
    train_c = None
    if train is not None:
        tlow = lows[1][0]
        tclasses = label_classes(tnet)
        manifest["training"] = training_manifest(tmodule, tnet, tplan, tins, troles, tclasses, tlow)
        manifest["training"]["schedule"] = schedule_manifest(tnet, tplan, tlow.launches)
        train_c = dict(launches=[(L.kernel_index, L.grid, L.args, ",".join(n for n in L.layers if n))
                                 for L in tlow.launches],
                       inputs=[io_copy(tplan, t) for t in tins],
                       lr=troles["learning_rate"]["offset"] if "learning_rate" in troles else None,
                       seed=(troles["seed"]["offset"], troles["seed"]["bytes"]) if "seed" in troles else None,
                       losses=[d["offset"] for d in manifest["training"]["losses"]])
    if pblob is not None:
        import hashlib
        manifest["params_sha256"] = hashlib.sha256(memoryview(pblob)).hexdigest()
    if source:
        manifest["source"] = source
    mtext = json.dumps(manifest, indent=1)
    c_src = generate_c(
        arch=arch_n, batch=plan.batch, const_bytes=const_region(tplan or plan),
        batch_bytes=(tplan or plan).arenas[BATCH].size, param_bytes=param_bytes,
        kernels=[(c.name, c.cubin, c.shared, 32 * c.num_warps) for c in cubins],
        launches=[(L.kernel_index, L.grid, L.args, ",".join(n for n in L.layers if n)) for L in low.launches],
        inputs=[io_copy(plan, t, layout) for t in ins], outputs=[io_copy(plan, t, layout) for t in outs],
        manifest=mtext, params_embedded=pblob is not None, arena_bytes=arena_bytes,
        fwd_regions=(fc, fb) if train is not None else None, train=train_c,
        data=(data_offs[0], data_offs[1], blob), workspace_offset=ws_off, segments=seg_c)
    out_dir = os.path.dirname(os.path.abspath(out_path))
    os.makedirs(out_dir, exist_ok=True)
    build_shared_library(c_src, out_path, [c.cubin for c in cubins], params_blob=pblob, data=blob)
    stem = os.path.splitext(os.path.basename(out_path))[0]
    header = os.path.join(os.path.dirname(out_path), stem + ".h")
    write_header(header, stem)
    if emit_triton:
        write_triton_sources(emit_triton, [firsts[i] for i in range(len(firsts))], cubins)
    t_end = time.perf_counter()
    from .tuning_file import TUNED_KERNELS
    nlaunches = sum(len(lw.launches) for lw, _ in lows)
    return CompileResult(out_path, header, manifest, len(cubins), nlaunches,
                         sum(c.cached for c in cubins),
                         dict(lower=t_lower - t0, kernels=t_kernels - t_lower, build=t_end - t_kernels,
                              total=t_end - t0),
                         tuned=sum(bool(k["tuned"]) for k in manifest["kernels"]),
                         tunable=sum(k["kernel"] in TUNED_KERNELS for k in manifest["kernels"]))


@dataclass
class Library:
    """What a library's arena holds and its programs' launches (plan_library): shared by compile_module
    and the interpreter's replay of a library (runtime/interp.py InterpLibrary)."""
    net: object
    plan: object
    ins: list
    outs: list
    layout: object                  # the forward's recipes.ArenaLayout
    lows: list                      # [(Lowered, lowering-cache key)]: the forward, then the training step
    regions: dict                   # region name -> byte offset in the arena (the manifest's `regions`)
    arena_bytes: int
    data_offsets: tuple             # the forward's and the training step's DATA regions
    data: bytes                     # what netc_create uploads at data_offsets[0]
    workspace_offset: int
    params: list                    # the manifest's parameters
    param_bytes: int
    tnet: object = None
    tplan: object = None
    tins: list = field(default_factory=list)
    troles: dict = field(default_factory=dict)


def plan_library(module, plans: dict, train: tuple | None = None, *, arch_n: int = 90, tuning: dict | None = None,
                 cache: bool = True, blocks: str = "cuda", network=None) -> Library:
    """Lower a library's programs (compile_module's `module`/`plans`/`train`/`network`) and lay out its
    arena: the constant region, the batch arena or (a training library) the training step's batch arena
    overlaid by the forward's own regions, then each program's embedded data, then the workspace.
    cache: use the lowering cache (cuda tiles only); blocks: the tile policy (lower.BLOCK_POLICIES).
    A rank's program (`network`) is one program: its data inputs in `ins`, its learning rate and seed
    inputs in `troles`."""
    from ..memory.model import BATCH, CONSTANT, align_up
    from .recipes import FWD_BATCH, FWD_CONST, ArenaLayout
    net = _one_network(module) if network is None else _named_network(module, network)
    plan = plans[net.attrs.get("sym_name", "network")]
    tnet = tplan = None
    tins, troles = [], {}
    if is_rank_program(net):
        if train is not None:
            raise NetcError("a rank's program compiles alone: its training step is the program (no train=)")
        problem = comm_order_problem(net, plan)
        if problem:
            raise NetcError(f"the memory plan of '{net.attrs.get('sym_name')}' cannot run in segments: {problem} "
                            f"(plan it with codegen.plan_program)")
        ins, troles = rank_io(net, plan)
        outs = network_io(net, plan, any_class=True)[1]
    else:
        ins, outs = network_io(net, plan)     # checked before the (slow) lowering
    layout = ArenaLayout()
    derived = []
    if train is not None:
        tmodule, tplans = train
        tnet = _one_network(tmodule)
        tplan = tplans[tnet.attrs.get("sym_name", "network")]
        tins, troles = training_io(tnet, tplan)
        if tplan.batch != plan.batch:
            raise AssertionError(f"the training step is planned at batch {tplan.batch}, the forward at {plan.batch}")
        fc = const_region(tplan)
        fixed = plan.arenas[CONSTANT].fixed
        own, derived, own_bytes = _derived_params(net, plan, tplan, align_up(plan.arenas[CONSTANT].size - fixed, 256))
        fb = fc + align_up(plan.arenas[CONSTANT].size - fixed, 256) + own_bytes
        at = {t.name[1:]: tplan.buffers[t.buffer].offset + t.offset for t in tplan.tensors if t.kind == "param"}
        # a forward parameter declared `share_from` a training one (SINGA's test-phase copies) is its storage
        for p in module.params():
            src = p.attrs.get("share_from")
            src = getattr(src, "name", src)
            if src is not None and p.attrs["sym_name"] not in at and src in at:
                at[p.attrs["sym_name"]] = at[src]
        layout = ArenaLayout(FWD_CONST, FWD_BATCH, tuple(sorted(at.items())), fixed, tuple(sorted(own.items())))
    progs = [(module, net, plan, layout, derived)]
    if train is not None:
        progs.append((tmodule, tnet, tplan, ArenaLayout(), []))
    use_cache = cache and blocks == "cuda"
    lows = [_lower_program(m, n, p, arch_n, tuning, not use_cache, lay, pro, blocks)
            for m, n, p, lay, pro in progs]
    params, param_bytes = parameters_manifest(train[0] if train is not None else module, tplan or plan)
    regions = dict(constant=0, batch=const_region(tplan or plan))
    if train is not None:
        regions.update(forward_constant=fc, forward_batch=fb)
        arena_bytes = max(const_region(tplan) + tplan.arenas[BATCH].size * tplan.batch,
                          fb + plan.arenas[BATCH].size * plan.batch)
    else:
        arena_bytes = const_region(plan) + plan.arenas[BATCH].size * plan.batch
    # above the programs' memory: each program's embedded data (chunk tables), then the workspace
    datas = [bytes(getattr(lw, "data", b"")) for lw, _ in lows] + [b""]
    data_offs = [align_up(arena_bytes, 256)]
    data_offs.append(data_offs[0] + align_up(len(datas[0]), 256))
    blob = datas[0] + b"\0" * (data_offs[1] - data_offs[0] - len(datas[0])) + datas[1] if datas[1] else datas[0]
    ws_off = align_up(data_offs[0] + len(blob), 256)
    ws_bytes = max(int(getattr(lw, "workspace_bytes", 0)) for lw, _ in lows)
    if blob or ws_bytes:
        regions.update(forward_data=data_offs[0], training_data=data_offs[1], workspace=ws_off)
        arena_bytes = ws_off + align_up(ws_bytes, 256)
    return Library(net, plan, ins, outs, layout, lows, regions, arena_bytes, tuple(data_offs), blob, ws_off, params,
                   param_bytes, tnet, tplan, tins, troles)


def _one_network(module):
    from ..ir.query import one_network
    return one_network(module, "netc compile needs a file with")


def _named_network(module, name):
    if not isinstance(name, str):
        return name
    for n in module.networks():
        if n.attrs.get("sym_name") == name:
            return n
    raise NetcError(f"no network '{name}' in the module")


def _derived_params(net, plan, tplan, start: int) -> tuple:
    """A training library's forward parameters that are derived from the training program's (the
    lowering table's `trained`/`derive`: a batch norm's inference affine from the trained scale,
    shift and running statistics): ({name: offset in the forward's constant region}, its prologue
    [(name, op, fn(placements, pin) -> KernelSpecs)], their bytes). Their own storage starts at
    `start` in the forward's constant region (after its constant temporaries)."""
    from ..ir.query import layers
    from ..kernels.lowering import lowering_of
    from ..memory.model import align_up
    from .lower import fold_context
    fwd = {t.name[1:]: t for t in plan.tensors if t.kind == "param"}
    trained = {t.name[1:]: (tplan.buffers[t.buffer].offset + t.offset, list(t.shape), t.dtype)
               for t in tplan.tensors if t.kind == "param"}
    own, prologue, at = {}, [], start
    for op in layers(net):
        e = lowering_of(op.name)
        if e is None or e.trained is None:
            continue
        mine, need = e.trained(op)
        if not mine or not all(n in trained for n in need.values()):
            continue
        for n in mine.values():
            if n not in own:
                own[n] = at
                at += align_up(fwd[n].size, 256)
        prologue.append((f"derive:{op.attrs.get('name')}", op, fold_context(e.derive, op, mine, need, trained)))
    return own, prologue, at - start


def _lower_program(module, net, plan, arch_n: int, tuning, emit_triton, layout, prologue=(), blocks="cuda"):
    """(launches of one program, its lowering-cache key or None). A warm compile of an unchanged
    network takes its launches from the lowering cache (their cubins from the kernel cache: an entry
    whose cubins have gone missing is lowered again), without importing torch or Triton."""
    from . import lowering_cache
    from .cache import load_cached
    lkey = None if emit_triton else lowering_cache.key(net, plan, arch_n, tuning, layout)
    low = lowering_cache.load(lkey) if lkey else None
    if low is not None:
        for L in low.launches:
            if L.cubin_key not in _CUBINS:
                c = load_cached(L.cubin_key)
                if c is None:          # evicted from the kernel cache: lower again
                    low = None
                    break
                _CUBINS[L.cubin_key] = c
    if low is not None:
        low.from_cache = True
        return low, lkey
    from .lower import lower_network
    return lower_network(module, net, plan, blocks=blocks, tuning=tuning, layout=layout, prologue=prologue), lkey


_CUBINS: dict = {}   # cubins read from the kernel cache by this process, by key


def _kernels_of(lows: list, arch_n: int, progress_stream) -> tuple:
    """(cubins, first launch of each) of the distinct specializations of every program's launches,
    numbering them (kernel_index) in order of first use; cubins from the lowering cache's keys or
    compiled (cache.compile_many: the cache misses in parallel)."""
    from .cache import Progress, compile_many
    from .lowering_cache import spec_text
    distinct: dict = {}
    firsts = {}
    every = [L for low in lows for L in low.launches]
    for L in every:
        L.kernel_index = distinct.setdefault(spec_text(L.spec_key), len(distinct))
        firsts.setdefault(L.kernel_index, L)
    todo = [i for i in range(len(firsts)) if not hasattr(firsts[i], "cubin_key")]
    prog = Progress(len(todo), "compiling kernels", progress_stream) if todo else None
    made = compile_many([firsts[i].call for i in todo], arch_n, prog,
                        [f"{firsts[i].call.kernel.__name__} ({firsts[i].layers[0]})" for i in todo])
    made = dict(zip(todo, made))
    cubins = [made[i] if i in made else _CUBINS[firsts[i].cubin_key] for i in range(len(firsts))]
    if prog:
        prog.close()
    for L in every:
        c = cubins[L.kernel_index]
        if c.n_params != len(L.args) + 2 or len(c.params) != len(L.args):
            raise AssertionError(f"{c.name}: the cubin takes {c.n_params} parameters, the launcher passes "
                                 f"{len(L.args)} + 2 scratch pointers")
    return cubins, firsts


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
