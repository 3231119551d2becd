"""The ranks of `netc run FILE --workers K` (the CLI checks the flags, runs the workers pipeline and
launches them, runtime/launch.py): one rank's program on the reference executor, the interpreter
target or its own library (--target cuda), its training steps or forward, rank 0 printing what the
single-process run prints. `args` is netc run's parsed options."""
from __future__ import annotations

import os
import sys


def run_rank(args, diag, module, rank, world, timeout, dtype, target="reference"):
    """One rank of `netc run --workers K` (see _run_workers)."""
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

