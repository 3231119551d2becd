"""`netc compile` as a library call (the CLI parses the arguments and calls compile_from_args): the
network through the compile pipeline, then a shared library (codegen.compile_module), one per rank
with --workers K (codegen.compile_rank), or the interpreter target's manifest; --tuning/--autotune's
configurations (codegen/tune.py). Progress lines go to `report` (default: stderr)."""
from __future__ import annotations

import os
import sys

from ..diagnostics import NetcError


def _stderr(text: str) -> None:
    sys.stderr.write(text)

def compile_from_args(args, diag, report=None):
    from . import flags as F
    from . import run as R
    from ..codegen import compile_module
    from ..pipelines import Options, Plan, Precision, compile
    precision = F.precision_options(args)   # a bad --dtype fails before any work
    if args.partition_workers is not None and args.partition_workers > 1:
        return _compile_workers(args, diag, precision, report)
    if args.target == "interp":
        if args.train:
            raise NetcError("--train with --target interp: the interpreter runs the training step directly "
                            "(netc run FILE --train --target interp [--compare])")
        if args.tuning or args.autotune:
            raise NetcError("--tuning/--autotune choose the GPU kernels' tiles (--target cuda); the interpreter target "
                            "runs its own (netc run --target interp --interp-blocks)")
        if args.params or args.embed_params:
            raise NetcError("--params/--embed-params embed parameters in a .so (--target cuda); the interpreter "
                            "target takes them at run time (netc run --target interp --params)")
        return _compile_interp(args, diag, precision or Precision(), report)
    # AOT compilation needs real @triton.jit kernels: the interpreter mode is fixed at import
    os.environ.pop("TRITON_INTERPRET", None)
    emit = {}
    for what, d in args.emit:
        if what != "triton":
            raise NetcError(f"unknown --emit '{what}' (supported: triton)")
        emit[what] = d
    train = None
    if args.train:
        if precision is not None and precision.dtype not in (None, "f32"):
            raise NetcError("a training library computes in f32 for now: drop --dtype with --train (its matrix "
                            "products may use --tf32 or --tf32x3)")
        tmodule = F.load_source(args, diag)
        rescale(tmodule, args)
        training = F.training_options(args)
        tctx = compile(tmodule, Options(phase="train", opaque_as_identity=bool(args.opaque_as_identity),
                                        training=training, precision=precision), diag, plan=Plan(mode="training"))
        train = (tmodule, tctx.notes["memory_plan"])
        # what `netc run NET.so --train --compare` rebuilds the reference's training program with
        train_options = dict(**training.record(), opaque_as_identity=bool(args.opaque_as_identity))
    else:
        F.pipeline_options(args, training=True)      # the training flags need --train
    module = F.load_source(args, diag)
    rescale(module, args)
    if train is not None:
        from .scale import forward_at_training_batch
        forward_at_training_batch(module, next(iter(train[1].values())).batch, args.phase, diag)
    ctx = compile(module, F.pipeline_options(args, precision=precision), diag, plan=Plan(mode="inference"))
    packer = None
    if args.params or args.embed_params:     # (params.py imports torch: a warm compile without them does not)
        from . import params as P
        packer = P.packer(P.embedded_params(args), args.seed if args.embed_params else None)
        if train is not None:
            packer = P.with_state_init(packer)
    tuning = _tuning(args, module, ctx.notes["memory_plan"], diag)
    r = compile_module(module, ctx.notes["memory_plan"], args.output, arch=args.arch, emit_triton=emit.get("triton"),
                       embed=packer, source=R.source_record(args, train_options if train is not None else None),
                       tuning=tuning, train=train)
    what = f"{r.launches} launches"
    if train is not None:
        nt = len(r.manifest["training"]["schedule"])
        what = f"{r.launches - nt} forward + {nt} training-step launches"
    (report or _stderr)(f"wrote {r.so_path} and {r.header_path}: {what}, {r.kernels} kernels "
                     f"({r.cached} from the cache), {r.seconds['total']:.1f}s"
                     + (f"; {r.tuned} of {r.tunable} kernels tuned" if tuning is not None else "") + "\n")
    return 0


def _tuning(args, module, plans, diag):
    """compile --tuning FILE / --autotune (codegen/tune.py autotune): the tuned configurations, or None."""
    from ..codegen import parse_arch
    from ..codegen.tuning_file import load_tuning
    if not (args.tuning or args.autotune):
        return None
    arch = parse_arch(args.arch)
    path = args.tuning
    if args.autotune:
        from ..codegen.tune import autotune
        path = args.tuning or os.path.splitext(args.output)[0] + ".tuning.json"
        autotune(module, plans, arch, path)
    tuning = load_tuning(path, arch)
    if not tuning:
        diag.warning(f"--tuning: '{path}' has no entries for sm_{arch}: every kernel keeps its default tiles")
    return tuning


def _compile_workers(args, diag, precision, report):
    """`netc compile FILE --workers K -o NET.so`: partition the network, split it into one program per rank
    (forward, or with --train the training step) and compile each to NET.rank<r>.so (+ .h): a rank library,
    its schedule in segments between its communication ops (codegen.compile_rank)."""
    from . import flags as F
    from . import run as R
    from ..codegen import compile_rank
    from ..pipelines import workers
    given = [f for f, v in (("--target interp", args.target == "interp"), ("--dtype/--tf32/--tf32x3", precision is not None),
                            ("--params", args.params), ("--embed-params", args.embed_params),
                            ("--tuning", args.tuning), ("--autotune", args.autotune), ("--emit", args.emit)) if v]
    if given:
        raise NetcError(f"{', '.join(given)} with --workers K is not supported: a rank library is compiled in f32 "
                        f"with the default tiles, its parameters set at run time (netc run --workers K runs them)")
    os.environ.pop("TRITON_INTERPRET", None)   # AOT compilation needs real @triton.jit kernels
    module = F.load_source(args, diag)
    rescale(module, args)
    options = F.pipeline_options(args, training=True, phase="train" if args.train else None)
    if args.train and args.clip_norm:
        raise NetcError("--clip-norm with --workers K is not supported yet (the norm would need an all-reduce)")
    workers(module, options, diag, fuse=True)
    ranks = sorted((n for n in module.networks() if "rank" in n.attrs), key=lambda n: n.attrs["rank"])
    if not ranks:
        raise NetcError(f"--workers {args.partition_workers}: the network says nothing about how to distribute it "
                        f"(partition_dim, location, parallel splits): nothing to split")
    stem, ext = os.path.splitext(args.output)
    for net in ranks:
        out = f"{stem}.rank{net.attrs['rank']}{ext or '.so'}"
        r = compile_rank(module, net.attrs["sym_name"], out, arch=args.arch, source=R.source_record(args))
        seg = r.manifest["segmented"]
        ns, nc = len(seg["segments"]), len(seg["comms"])
        shape = (f"in {ns} segments between {nc} communication op{'s' * (nc != 1)}" if nc
                 else "in one segment (no communication)")
        (report or _stderr)(f"wrote {r.so_path} and {r.header_path}: rank {net.attrs['rank']} of {net.attrs['world']}, "
                         f"{r.launches} launches {shape}, {r.kernels} kernels ({r.cached} from the cache), "
                         f"{r.seconds['total']:.1f}s\n")
    return 0


def _compile_interp(args, diag, precision, report):
    """`netc compile --target interp`: lower the network for the interpreter (validating every group
    against the plan) and write a JSON manifest (OUT if it ends in .json, else OUT/<network>.interp.json)."""
    from . import flags as F
    import json
    from .interp import InterpProgram, ensure_interpreter
    ensure_interpreter()
    module = F.load_source(args, diag)
    rescale(module, args)
    if diag.has_errors():
        raise NetcError(diag.diagnostics[:])
    from ..ir.query import one_network
    nets = [one_network(module, "netc compile needs a file with")]
    if args.opaque_as_identity:   # its warnings go to the command's diagnostics; InterpProgram skips done work
        from ..pipelines import inference
        inference(module, F.pipeline_options(args), diag)
    prog = InterpProgram(module, nets[0].attrs.get("sym_name"), phase=args.phase, dtype=precision.dtype,
                         tf32="tf32x3" if precision.tf32x3 else precision.tf32)
    out = args.output
    if not out.endswith(".json"):
        os.makedirs(out, exist_ok=True)
        out = os.path.join(out, f"{prog.plan.network}.interp.json")
    else:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(prog.manifest(), f, indent=1)
    (report or _stderr)(f"wrote {out}: {len(prog.launches)} launches (interpreter target)\n")
    return 0


def rescale(module, args):
    """explain/compile --batch B: every input's batch becomes B (a Brainstorm file is read at B already)."""
    if args.batch is None or not module.networks():
        return
    from .scale import scale_inputs
    scale_inputs(module, batch=args.batch)
