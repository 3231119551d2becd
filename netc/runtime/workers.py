"""`netc run FILE --workers K` below the CLI: run_workers checks the flags, runs the workers pipeline
and launches the ranks (runtime/launch.py); run_rank is one rank's program on the reference executor, the interpreter
target, the CPU target (--target cpu: its generated step, f32) or its own library (--target cuda), its training
steps or forward, rank 0 printing what the single-process run prints. `args` is netc run's parsed options."""
from __future__ import annotations

import os
import sys

from ..diagnostics import NetcError


def run_rank(args, diag, module, rank, world, timeout, dtype, target="reference"):
    """One rank of `netc run --workers K` (see run_workers)."""
    import json

    from . import distributed as D
    from .run import given_inputs, lr_schedule, plot_to, print_outputs, step_log
    inputs = given_inputs(args)
    from .params import read_params, save_tensors
    params = read_params(args.params, "--params") if args.params else None
    library = rank_library(module, args, rank, world) if target == "cuda" else None
    try:
        worker = D.Worker(module, rank, world, network=args.network, timeout=timeout, dtype=dtype, seed=args.seed,
                          params=params, target=target, blocks=args.interp_blocks or "cuda", library=library)
        if args.train:
            from ..ops.optim import learning_rate
            net = worker.net
            schedule = lr_schedule(net.attrs.get("optimizer"), args.lr)

            steps, feeds, every = args.steps or 1, None, 1
            if args.data:
                from .train import dataset_feeds
                data, batch = rank_dataset(args, module)
                steps = args.steps or data.size // batch * (args.epochs or 1)
                feeds = dataset_feeds(data, batch, args.seed, args.steps, args.epochs)
                every = max(1, steps // 50)   # about 50 lines for a long run

            history, grads = D.run_training(worker, steps, lambda k: learning_rate(schedule, k),
                                            inputs or None, step_log(every), want_grads=bool(args.grads),
                                            feeds=feeds)
            final = D.gather_params(worker) if args.output else None
            if rank == 0:
                last = history[-1]
                print(f"trained {len(history)} step{'s' if len(history) != 1 else ''} of network '{net.attrs['of']}' "
                      f"on {world} workers ({net.attrs.get('optimizer', {}).get('name', 'sgd')}): loss "
                      f"{history[0]['loss']:.6f} -> {last['loss']:.6f}")
                if args.grads:
                    save_tensors(args.grads, grads)
                    sys.stderr.write(f"wrote {args.grads} ({len(grads)} gradients of step 1)\n")
                if args.output:
                    save_tensors(args.output, final)
                    sys.stderr.write(f"wrote {args.output} ({len(final)} parameters and state tensors)\n")
                if args.history:
                    with open(args.history, "w") as f:
                        json.dump(history, f, indent=1)
                    sys.stderr.write(f"wrote {args.history}\n")
                if args.plot:
                    from .train import plot_history
                    plot_to(args.plot, lambda path: plot_history(history, path, f"training {net.attrs['of']} on "
                                                                              f"{world} workers"))
        else:
            outs = D.run_forward(worker, inputs or None)
            if rank == 0:
                print_outputs(args, outs, [])
        stats = worker.gather(dict(worker.comm.stats, rank=rank))
        if rank == 0 and args.comm_log:
            with open(args.comm_log, "w") as f:
                json.dump(stats, f, indent=1)
        sys.stdout.flush()
        worker.close()
    except D.CommError as e:
        diag.flush()
        sys.stderr.write(f"netc: {e.diagnostics[0].message if e.diagnostics else e}\n")
        sys.stderr.flush()
        os._exit(1)   # the process group may be broken: no teardown that could hang
    return 0



def rank_dataset(args, module):
    """--data with --workers K: (Dataset, batch) checked against the partitioned network's logical
    data inputs (every rank loads it and cuts its shards from the same batches)."""
    from . import distributed as D
    from . import io
    from .train import Dataset
    data = Dataset(io.load_npz(args.data, "--data"), "--data")
    shapes = D.logical_data_inputs(module, args.network)
    name = args.network or next((n.attrs.get("of") for n in module.networks() if "rank" in n.attrs), "network")
    return data, data.check_shapes(shapes, name)



def rank_library(module, args, rank, world):
    """--target cuda: this rank's program compiled to a library in a temporary directory (its path)."""
    import tempfile

    from ..codegen import compile_rank
    from .run import source_record
    from . import distributed as D
    net = D.rank_network(module, rank, args.network)
    d = tempfile.mkdtemp(prefix=f"netc-rank{rank}-")
    path = D.rank_library_path(d, net)
    compile_rank(module, net.attrs["sym_name"], path, source=source_record(args))
    return path



def run_workers(args, diag):
    """`netc run FILE --workers K` (K > 1): outside a distributed launch, check and partition the network,
    then start K ranks (runtime/launch.py); inside one (RANK, WORLD_SIZE: this launcher's or torchrun's),
    run this rank's program (runtime/distributed.py) and, on rank 0, print what the single-process run
    prints: the outputs, or the training steps."""
    from .flags import load_network, load_source, no_training_flags, pipeline_options, run_dtypes
    from .run import check_training_flags, scale_for_run, scale_quietly
    import torch
    from ..pipelines import workers
    from . import distributed as D
    K = args.partition_workers
    target = args.target or "reference"
    if args.reference and target != "reference":
        raise NetcError(f"--reference and --target {target} contradict each other; give one")
    if target == "interp":
        # before anything imports netc.kernels: the interpreter mode is fixed at import
        from .interp import ensure_interpreter
        ensure_interpreter()
    for flag in ("compare", "profile", "check_grads"):
        if getattr(args, flag):
            raise NetcError(f"--{flag.replace('_', '-')} does not apply to --workers K")
    if args.steps is not None and args.steps < 1:
        raise NetcError(f"--steps takes a positive number, got {args.steps}")
    if args.interp_blocks and target != "interp":
        raise NetcError("--interp-blocks needs --target interp")
    if target != "reference":
        f32 = target == "cpu" and args.dtype in ("f32", "fp32")      # --target cpu's own dtype, as single-process
        if (args.dtype is not None and not f32) or args.tf32 or getattr(args, "tf32x3", False):
            raise NetcError(f"--target {target} runs each rank's program compiled in f32: drop --dtype/--tf32 (the "
                            f"reference run to compare with: --workers 1 --dtype f64)")
        if target == "cuda" and args.grads:
            raise NetcError("--grads with --target cuda: a rank library keeps no gradients (use --target interp or "
                            "cpu)")
        if target == "cuda" and not torch.cuda.is_available():
            raise NetcError("--target cuda runs each rank's program compiled on a GPU, and torch sees none here "
                            "(--target interp runs the same programs on the CPU)")
    if args.eval:
        raise NetcError("--eval with --workers K is not supported yet: evaluate the trained parameters (-o) with "
                        "`netc run FILE --reference --params P.npz --inputs TEST.npz`")
    if not args.train:
        no_training_flags(args)
    else:
        check_training_flags(args)
    timeout = args.timeout if args.timeout is not None else float(os.environ.get("NETC_DIST_TIMEOUT", D.DEFAULT_TIMEOUT))
    if timeout <= 0:
        raise NetcError(f"--timeout must be positive, got {timeout:g}")
    ref_dtype, _ = run_dtypes(args, "reference")
    if target != "reference":
        dtype = torch.float64      # values drawn as the f64 reference draws them, rounded to the arena's f32
    elif args.train:
        dtype = torch.float64 if (ref_dtype == "f64" and args.dtype is not None) else torch.float32
    else:
        dtype = torch.float32 if ref_dtype == "f32" else torch.float64
    er = D.env_rank()
    module = load_network(args, diag)
    scale_for_run(module, args, load_source) if er is None or er[0] == 0 else scale_quietly(module, args, load_source)
    options = pipeline_options(args, training=args.train)
    if args.train and args.clip_norm:
        raise NetcError("--clip-norm with --workers K is not supported yet (the norm would need an all-reduce)")
    workers(module, options, diag)
    if er is None and args.data:   # the dataset fits the logical inputs: say so before any rank starts
        rank_dataset(args, module)
    if er is None:   # the launcher: the network is fine; start the ranks (they print warnings no more)
        from . import launch
        diag.flush()
        diag.diagnostics[:] = []
        if os.environ.get("NETC_LAUNCH", "fork") == "spawn" or not hasattr(os, "fork"):
            return launch.launch(args.argv, K, timeout, env={"NETC_LAUNCHED": "1"})
        # forked ranks start at once with the program compiled here (no second import of torch)
        return launch.launch_forked(lambda r: run_rank(args, diag, module, r, K, timeout, dtype, target), K, timeout)
    rank, world = er
    if world != K:
        raise NetcError(f"--workers {K}, but this process is one of WORLD_SIZE={world}")
    if os.environ.get("NETC_LAUNCHED") or rank != 0:   # the launcher (or rank 0) reported them
        diag.diagnostics[:] = [d for d in diag.diagnostics if d.severity == "error"]
    return run_rank(args, diag, module, rank, world, timeout, dtype, target)
