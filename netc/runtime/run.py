"""`netc run`'s jobs on a network source or a compiled library, below the CLI: inputs and parameter
files, --batch/--spatial scaling, the interpreter target's outputs (with --compare), training runs
(their step lines, summaries, -o/--history/--plot), a training library's steps. `args` is netc run's
parsed options (an argparse namespace: the attributes its flags name)."""
from __future__ import annotations

import os
import sys

from ..diagnostics import DiagnosticEngine, NetcError


def given_inputs(args) -> dict:
    """`netc run`'s --inputs IN.npz and --input NAME=PATH.npy, by name (a name given twice is an error)."""
    from . import io
    inputs = io.load_npz(args.inputs, "--inputs") if args.inputs else {}
    for k, v in io.parse_input_specs(args.input).items():
        if k in inputs:
            raise NetcError(f"input '{k}' is given both by --input and in {args.inputs}")
        inputs[k] = v
    return inputs



def check_given_indices(net, inputs: dict, source: str | None = None) -> None:
    """A given input read as sequence lengths outside 1..T, as row ids outside 0..V-1 or as class labels outside
    0..C-1 is an error located at the file that gave it (--inputs, --data), else at the input's declaration: the
    kernels cannot raise (they clamp a length, read a zero row for an id, a NaN loss for a label), the reference
    does."""
    import torch
    from ..diagnostics import Loc
    from ..ir.query import layer_name, network_inputs
    from .io import source_of
    from .reference import index_bound_of, label_reading_of, lengths_bound_of
    src = source or source_of(inputs)     # arrays read from a file (--inputs, --data): their file
    for op in network_inputs(net):
        x = inputs.get(layer_name(op))
        if x is None:
            continue
        x = torch.as_tensor(x)
        v = op.results[0]
        steps, rows = lengths_bound_of(net, v), index_bound_of(net, v)
        labels = label_reading_of(net, v) if not x.is_floating_point() else None
        if steps is not None:
            lo, hi, what = 1, steps, f"sequence lengths must be 1 to T = {steps} (the kernels would clamp it)"
        elif rows is not None:
            lo, hi, what = 0, rows - 1, f"row ids must be 0 to {rows - 1} (the kernels would read a zero row)"
        elif labels is not None and labels[1]:      # class indices (not one-hot rows)
            lo, hi, what = 0, labels[0] - 1, f"class labels must be 0 to {labels[0] - 1}"
        else:
            continue
        bad = (x < lo) | (x > hi) | (x != x.round() if x.is_floating_point() else torch.zeros_like(x, dtype=torch.bool))
        if bool(bad.any()):
            at = [int(i) for i in bad.nonzero()[0]]
            name, value = layer_name(op), x[tuple(at)].item()
            if src:     # the value is the file's: located there, with the input it feeds
                raise NetcError(f"'{name}' holds {value} at {at}: {what} (input '{name}' of {op.loc})", Loc(src))
            raise NetcError(f"input '{name}' holds {value} at {at}: {what}", op.loc)


def check_state_flags(args, compiled: bool) -> None:
    """--state-in / --state-out carry a recurrent layer's state between runs of the reference executor."""
    given = [f for f, v in (("--state-in", args.state_in), ("--state-out", args.state_out)) if v]
    if not given:
        return
    why = ("a compiled NET.so" if compiled else "--train (ReferenceTrainer(carry_state=True) carries it from step "
           "to step in Python)" if args.train or args.check_grads else
           "--workers" if (args.partition_workers or 1) > 1 else
           f"--target {args.target}" if args.target not in (None, "reference") else None)
    if why:
        raise NetcError(f"{' and '.join(given)} carr{'y' if len(given) > 1 else 'ies'} state between runs of the "
                        f"reference executor (--reference), not of {why}")


def run_carrying_state(module, args, inputs: dict, params, dtype) -> dict:
    """`netc run --reference` with --state-in / --state-out: one network's outputs, started from the state
    in --state-in (zeros for a state it lacks, unless --inputs gives it), its final state written to
    --state-out by input name. Inputs not given are random (--seed), as without the flags."""
    from . import io
    from .reference import carried_inputs, network_of, random_input, run_reference, with_carried_state
    from ..ir.query import layer_name, network_inputs
    nets = module.networks()
    if args.network is None and len(nets) > 1:
        raise NetcError(f"--state-in/--state-out carry one network's state: name it with --network "
                        f"({', '.join(n.attrs['sym_name'] for n in nets)})")
    net = network_of(module, args.network)
    carried = carried_inputs(net)
    if not carried:
        raise NetcError(f"network '{net.attrs.get('sym_name')}' has no state to carry: no recurrent layer takes its "
                        f"initial state from an input (give the Lstm its h0 and c0 inputs)")
    state = io.load_npz(args.state_in, "--state-in") if args.state_in else {}
    for k in state:
        if k not in carried:
            raise NetcError(f"{args.state_in} holds '{k}', which is no state input of network "
                            f"'{net.attrs.get('sym_name')}' (its state inputs: {', '.join(carried)})")
        if k in inputs:
            raise NetcError(f"input '{k}' is given both by --state-in and by --inputs/--input")
    feed = with_carried_state(net, inputs, state, dtype)
    for op in network_inputs(net):
        if layer_name(op) not in feed:
            feed[layer_name(op)] = random_input(net, op, args.seed, dtype)
    final: dict = {}
    outs = run_reference(module, feed, params, network=net, seed=args.seed, dtype=dtype, states=final)
    if args.state_out:
        io.save_npz(args.state_out, final)
    return outs


def check_training_flags(args):
    """The flags of a training run, a source's or a library's: --plot's format, --steps/--epochs
    positive, --epochs with --data, --data or --inputs."""
    if args.plot and not args.plot.lower().endswith((".png", ".svg", ".pdf")):
        raise NetcError("--plot writes PNG, SVG or PDF (by the extension); name the file *.png, *.svg or *.pdf")
    for flag in ("steps", "epochs"):
        v = getattr(args, flag)
        if v is not None and v < 1:
            raise NetcError(f"--{flag} takes a positive number, got {v}")
    if args.epochs is not None and not args.data:
        raise NetcError("--epochs counts passes over --data; without --data give --steps")
    if args.data and (args.inputs or args.input):
        raise NetcError("--data and --inputs/--input both give the training inputs: give one")



def lr_schedule(optimizer: dict | None, lr: float | None) -> dict:
    """The learning-rate schedule of a training run: --lr (fixed), else the file's, else 0.01 fixed."""
    if lr is not None and not lr >= 0:
        raise NetcError(f"--lr takes a learning rate >= 0, got {lr:g}")
    if lr is not None:
        return {"type": "fixed", "base_lr": lr}
    return dict((optimizer or {}).get("schedule") or {"type": "fixed", "base_lr": 0.01})



def step_log(every: int = 1):
    """A training run's line per step (step 1, then every `every`-th): step, epoch, lr, loss(es)."""
    def log(row):
        if row["step"] % every == 0 or row["step"] == 1:
            extra = "".join(f"  {k[5:]} {v:.6g}" for k, v in row.items() if k.startswith("loss:"))
            print(f"step {row['step']:5d}  epoch {row['epoch']:3d}  lr {row['lr']:.4g}  loss {row['loss']:.6f}{extra}",
                  flush=True)
    return log



def fit_and_report(args, trainer, schedule, inputs, data, grads, name, optimizer, where: str = ""):
    """Train (runtime.train.fit: --steps, or --epochs over --data) and print a line per step (about
    50 for a long run) and the summary (saying `where` it trained: ' on the CPU target'); returns the history."""
    from ..ops.optim import learning_rate
    from .train import fit
    net = getattr(trainer, "net", None)
    if net is not None and inputs:  # labels, ids and lengths out of range: an error, on every target (a --data
        check_given_indices(net, inputs)    # file's: Dataset.check)
    every = 1
    if data is not None:
        per_epoch = data.size // trainer.data_batch(data)
        total = args.steps or per_epoch * (args.epochs or 1)
        every = max(1, total // 50)   # about 50 lines for a long run

    history = fit(trainer, lambda k: learning_rate(schedule, k), steps=args.steps, epochs=args.epochs, data=data,
                  inputs=inputs, log=step_log(every), grads_out=grads)
    print(f"trained {len(history)} step{'s' if len(history) != 1 else ''} of network '{name}' ({optimizer}){where}: "
          f"loss {history[0]['loss']:.6f} -> {history[-1]['loss']:.6f}")
    return history



def write_training(args, history, trainer, given, name):
    """--history, --plot and -o of a training run: -o writes what the file gave and this program does
    not train (another network's parameters and state), then everything the trainer holds, updated."""
    import json

    from .params import save_tensors
    from .train import plot_history
    if args.history:
        try:
            with open(args.history, "w") as f:
                json.dump(history, f, indent=1)
        except OSError as e:
            raise NetcError(f"cannot write '{args.history}': {e.strerror}") from None
        sys.stderr.write(f"wrote {args.history}\n")
    if args.plot:
        plot_to(args.plot, lambda path: plot_history(history, path, f"training {name}"))
    if args.output:
        written = {**given, **{k: v for k, v in trainer.params.items()}}
        save_tensors(args.output, written)
        sys.stderr.write(f"wrote {args.output} ({len(written)} parameters and state tensors)\n")



def reference_for_comm_ops(args, module, target: str) -> str:
    """run_target's choice once the program is built: with no --target, a program with communication ops (a SINGA
    job's partitioned layers bring their bridges, slices and concatenations into one process) runs on the
    reference executor, which runs them in place, and says so on stderr; the CPU target runs them only with their
    ranks on several workers (--workers K --target cpu). --compare keeps the CPU target, and its error."""
    from ..ir.query import layers
    from ..ops.comm import is_comm
    if args.target or target != "cpu" or args.compare:
        return target
    comm = next((op for net in module.networks() for op in layers(net) if is_comm(op)), None)
    if comm is None:
        return target
    sys.stderr.write(f"netc: running on the reference executor: the program has communication ops ({comm.name} "
                     f"'{comm.attrs.get('name')}', ...), which the CPU target runs only on several workers "
                     f"(--workers K --target cpu)\n")
    return "reference"



def warn_opaque_pass_through(module, diag, executor: str = "the reference executor"):
    """The reference executor (and the CPU target, running the same ops: `executor`) runs a layer of a type netc
    does not know (netc.opaque, Paleo's Generic) as its shape rule says: a pass-through. Say so, once per type,
    naming the layers, so an output downstream of one is not taken for the real network's. (An RBM's visible layer
    passes its input through in SINGA's positive phase too: no warning.)"""
    by_type: dict = {}
    for net in module.networks():
        for op in net.regions[0].ops:
            if op.name == "netc.opaque" and not op.attrs.get("energy_model"):
                by_type.setdefault(op.attrs.get("type", "?"), []).append(op)
    for kind, ops in by_type.items():
        names = [op.attrs.get("name") for op in ops]
        diag.warning(f"{executor} passes {len(names)} layer{'s' if len(names) != 1 else ''} of unknown "
                     f"type '{kind}' through unchanged (what '{kind}' computes is unknown to netc): "
                     f"{', '.join(names)}", ops[0].loc, width=len(names[0] or "x"))



def scale_for_run(module, args, load):
    """`netc run --batch B --spatial N`: new input shapes before shape inference (runtime/scale.py)."""
    if args.batch is None and args.spatial is None:
        return None
    from .scale import scale_inputs, smallest_spatial
    if args.spatial == "min":
        n = smallest_spatial(lambda: load(args, DiagnosticEngine()), args.batch, args.phase)
        if n is None:
            raise NetcError("--spatial min: no spatial size up to 4096 makes this network valid")
        sys.stderr.write(f"--spatial min: {n} is the smallest valid spatial size\n")
        args.spatial = str(n)
    changed = scale_inputs(module, batch=args.batch, spatial=args.spatial)
    for net, name, old, new in changed:
        sys.stderr.write(f"input '{name}'{f' of {net}' if len(module.networks()) > 1 else ''}: {old} -> {new}\n")
    return " ".join(f"--{k} {v}" for k, v in (("batch", args.batch), ("spatial", args.spatial)) if v is not None)



def scale_quietly(module, args, load):
    """scale_for_run without its report (ranks other than 0)."""
    import contextlib
    import io as _io
    with contextlib.redirect_stderr(_io.StringIO()):
        return scale_for_run(module, args, load)



def print_outputs(args, outs, failed):
    """`netc run`'s result: a summary line per output (or --output OUT.npz); then the --compare failures."""
    from . import io
    from .params import save_tensors
    if args.output:
        save_tensors(args.output, outs)
        sys.stderr.write(f"wrote {args.output} ({len(outs)} output{'s' if len(outs) != 1 else ''})\n")
    else:
        width = max((len(k) for k in outs), default=0)
        for k, v in outs.items():
            print(io.describe(k, v, width))
    if failed:
        raise NetcError(failed)
    return 0



def run_interp(module, args, inputs, params, precision):
    """`netc run --target interp`: every network (or --network), compiled in precision's dtype; with
    --compare, the max relative error (max |diff| over max |reference|) of every output against the
    float64 reference executor on the same values, and a diagnostic for each output beyond that
    precision's tolerance (runtime.compare.NETWORK_TOLERANCES). Outputs are keyed 'network.layer'
    when the file has several networks (as --reference does). Returns (outputs, diagnostics)."""
    from .interp import InterpProgram, default_inputs, split_inputs
    from .io import source_of
    nets = [args.network] if args.network else [n.attrs.get("sym_name") for n in module.networks()]
    per = split_inputs(module, nets, inputs)
    tuning = None
    if args.tuning:
        from ..codegen.tuning_file import load_tuning
        tuning = load_tuning(args.tuning, 90)
        if not tuning:
            sys.stderr.write(f"netc: warning: --tuning: '{args.tuning}' has no entries for sm_90: every kernel keeps "
                             f"its default tiles\n")
    outs, failed = {}, []
    for name in nets:
        prog = InterpProgram(module, name, params=params, seed=args.seed, phase=args.phase,
                             dtype=precision.dtype, tf32="tf32x3" if precision.tf32x3 else precision.tf32,
                             blocks=args.interp_blocks or "cuda", tuning=tuning)
        if tuning:
            n = sum(1 for L in prog.launches if L.tuned)
            sys.stderr.write(f"{prog.plan.network}: {n} of {len(prog.launches)} launches tuned by {args.tuning}\n")
        if per[name] is not None:
            check_given_indices(prog.net, per[name], source_of(inputs))
        ins = per[name] if per[name] is not None else default_inputs(module, prog.net, args.seed)
        got = prog.run(ins)
        prefix = f"{prog.plan.network}." if len(nets) > 1 else ""
        if args.compare:
            failed += check_against_reference(module, prog.net, got, ins, params, args.seed, prefix)
        outs.update({prefix + k: v for k, v in got.items()})
    return outs, failed


def run_cpu(module, args, inputs, params) -> tuple:
    """`netc run --target cpu`: every network (or --network) on the CPU target; with --compare, each output
    against the float64 reference on the same values (runtime.run.check_against_reference: the f32 rule).
    Outputs are keyed 'network.layer' when the file has several networks. Returns (outputs, diagnostics)."""
    from .cpu import run_cpu as run_on_cpu
    from .interp import default_inputs, split_inputs
    from .reference import network_of
    nets = [args.network] if args.network else [n.attrs.get("sym_name") for n in module.networks()]
    per = split_inputs(module, nets, inputs)
    outs, failed = {}, []
    for name in nets:
        net = network_of(module, name)
        ins = per[name] if per[name] is not None else default_inputs(module, net, args.seed)
        got = run_on_cpu(module, ins, params, network=net, seed=args.seed)
        prefix = f"{name}." if len(nets) > 1 else ""
        if args.compare:
            failed += check_against_reference(module, net, got, ins, params, args.seed, prefix)
        outs.update({prefix + k: v for k, v in got.items()})
    return outs, failed


def check_against_reference(module, net, got: dict, inputs: dict, params, seed: int, prefix: str = "",
                            ref: dict | None = None) -> list:
    """--compare of one network's outputs `got` (a compiled run on `inputs`): the f64 reference (`ref`,
    when the caller has it) and the reference in the network's own precision
    (compare.own_precision_dtype) on the same inputs and parameters; prints each output's errors and
    returns a Diagnostic per output beyond the rule."""
    from ..passes.set_dtype import precision_of
    from .compare import check_outputs, own_precision, own_precision_dtype
    from .reference import run_reference
    if ref is None:
        ref = run_reference(module, inputs, params, network=net, seed=seed)
    precision = precision_of(net)
    with own_precision(precision):        # the same run in the network's precision: what it can hold
        low = run_reference(module, inputs, params, network=net, seed=seed, dtype=own_precision_dtype(precision))
    return check_outputs(got, ref, precision, prefix, ref32=low)



def train_library(args):
    """`netc run NET.so --train`: training steps of a training library (`netc compile --train`) on
    the GPU -- --steps N, or --epochs over --data; the learning rate of --lr or the file's schedule;
    parameters from --params, the embedded ones or --seed -- printed as `netc run FILE --train` prints
    them; -o writes the trained parameters and optimizer state. With --compare each step is checked
    against the float64 reference executor's on the library's source (runtime/library_train.py)."""
    import torch
    from . import io
    from .compare import compare_training
    from .interp import compare_step
    from .library_train import LibraryTrainer, training_reference
    from .native import load
    from .params import read_params
    from .train import Dataset, ReferenceTrainer
    fixed = [f"--{f.replace('_', '-')}" for f in FIXED_IN_A_LIBRARY if getattr(args, f, None) not in (None, [], False)]
    if fixed:
        raise NetcError(f"{', '.join(fixed)} {'are' if len(fixed) > 1 else 'is'} fixed when a training library is "
                        f"compiled (netc compile --train {' '.join(fixed)}), not when it runs")
    for flag, why in (("check_grads", "checks a network source's gradient ops (netc run FILE --check-grads)"),
                      ("grads", "writes the gradients the reference executor computes; a library does not return "
                                "its gradients (they show in the parameters after the update)"),
                      ("eval", "evaluates with the reference executor on a network source; run the trained "
                               "parameters (-o) with `netc run NET.so --params`"),
                      ("profile", "times a forward (netc run NET.so --profile)"),
                      ("batch", "is fixed when a library is compiled: a training step runs at the compiled batch")):
        if getattr(args, flag, None) not in (None, False):
            raise NetcError(f"--{flag.replace('_', '-')} does not apply to a training library's --train: it {why}")
    not_here = [f"--{f.replace('_', '-')}" for f in ("reference", "target", "network", "dtype", "tf32", "tf32x3", "singa_version",
                                                          "size") if getattr(args, f, None)]
    if not_here:
        raise NetcError(f"{', '.join(not_here)} appl{'y' if len(not_here) > 1 else 'ies'} to network sources, not to "
                        f"'{args.file}': a compiled network runs as it was compiled (on the GPU)")
    check_training_flags(args)
    if args.compare and (args.data or args.history or args.plot):
        raise NetcError("--compare runs --steps N steps on fixed inputs (--inputs, or random ones) and prints the "
                        "errors; --data/--history/--plot go with a training run without --compare")
    if getattr(args, "source", None) and not args.compare:
        raise NetcError("--source names the network source for --compare; give --compare too")
    inputs = given_inputs(args)
    given = read_params(args.params, "--params") if args.params else None
    data = Dataset(io.load_npz(args.data, "--data"), "--data") if args.data else None
    with load(args.file) as net:
        trainer = LibraryTrainer(net, seed=args.seed)
        if given is not None:
            net.set_params(given, seed=args.seed)      # parameters the file lacks are random (--seed)
        elif not net.params_embedded:
            net.set_params(seed=args.seed)
        schedule = lr_schedule(trainer.optimizer, args.lr)
        optimizer = trainer.optimizer.get("name", "sgd")
        if args.compare:
            module, irnet = training_reference(net, getattr(args, "source", None))
            on = net.device if net.device is not None and net.device.type == "cuda" else "cpu"
            ref = ReferenceTrainer(module, irnet, None, seed=args.seed, dtype=torch.float64, device=on)
            if not inputs:   # the reference's random inputs, fed to both
                inputs = {k: v for k, v in ref.feed(None, 0.0).items() if k in trainer.input_shapes}
            where = f"of '{os.path.basename(args.file)}'" + (" on the GPU" if net.device is not None and
                                                               net.device.type == "cuda" else "")
            compare_training(trainer, ref, irnet, inputs, schedule, where, args.steps or 1,
                             getattr(args, "output", None), compare_step, precision=net.manifest.get("precision"))
            write_training(args, None, trainer, dict(given or {}), trainer.name)    # -o
            return 0
        history = fit_and_report(args, trainer, schedule, inputs or None, data, None, trainer.name, optimizer)
        write_training(args, history, trainer, dict(given or {}), trainer.name)
    return 0



TRAINED_ON = {"reference": " on the reference executor", "cpu": " on the CPU target",
              "interp": " on the interpreter target"}     # a training run's summary line: where its steps ran


FIXED_IN_A_LIBRARY = ("optimizer", "momentum", "weight_decay", "clip_norm", "freeze", "loss", "loss_on",
                       "train_network")



def source_record(args, training: dict | None = None) -> dict:
    """What `netc run NET.so --compare` needs to rebuild the reference: the source and load options
    (and a training library's backward and optimizer options)."""
    import hashlib
    with open(args.file, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    # batch: the load batch (a Brainstorm file's B); rescaled_batch: compile --batch B rescaled every input
    b = getattr(args, "batch", None)
    rec = dict(path=os.path.abspath(args.file), sha256=digest, phase=args.phase, batch=b,
               singa_version=getattr(args, "singa_version", None), rescaled_batch=b)
    from .flags import size_options
    sizes = size_options(getattr(args, "size", None))
    if sizes:
        rec["sizes"] = sizes
    if training is not None:
        rec["training"] = training
    return rec



def plot_to(path: str, draw) -> None:
    """--plot: draw(path) with matplotlib (the `plot` extra), PNG, SVG or PDF by the extension."""
    if not path.lower().endswith((".png", ".svg", ".pdf")):
        raise NetcError("--plot writes PNG, SVG or PDF (by the extension); name the file *.png, *.svg or *.pdf")
    try:
        draw(path)
    except ImportError:
        raise NetcError("--plot draws with matplotlib, which is not installed: pip install 'netc[plot]' "
                        "(or pip install matplotlib)") from None
    except OSError as e:
        raise NetcError(f"cannot write '{path}': {e.strerror or e}") from None
    sys.stderr.write(f"wrote {path}\n")



def train_source(args, diag):
    """`netc run FILE --train`: the training program (backward + optimizer passes) step by step on the target
    flags.run_target picks (the CPU target unless told otherwise; the reference executor, the interpreter target);
    or --check-grads: one step's gradients against torch.autograd (the reference executor's ops)."""
    from .flags import cpu_in_f32, load_network, load_source, pipeline_options, run_dtypes, run_target
    import torch
    from ..pipelines import inference as inference_pipeline, program
    from . import io
    from .train import Dataset, ReferenceTrainer, check_grads, evaluate, evaluate_rule_metrics
    target = run_target(args)   # no --target: the CPU target, or the reference where a flag needs it
    if args.reference and target != "reference":
        raise NetcError(f"--reference and --target {target} contradict each other; give one")
    if target == "cpu":
        cpu_in_f32(args, "trains")
        if args.check_grads:
            raise NetcError("--target cpu trains in f32 through its generated step; --check-grads checks the reference "
                            "executor's gradient ops against torch.autograd: drop --target cpu (--target cpu --train "
                            "--compare checks the CPU target's step against the reference)")
        if args.interp_blocks:
            raise NetcError("--interp-blocks needs --target interp (the compiled kernels' tiles)")
    if target == "interp":
        # before anything imports netc.kernels: the interpreter mode is fixed at import
        from .interp import ensure_interpreter
        ensure_interpreter()
        if args.check_grads:
            raise NetcError("--check-grads checks the reference executor's gradient ops against autograd; "
                            "--target interp --compare checks the compiled step against the reference")
        if args.dtype not in (None, "f32", "fp32") or args.tf32 or getattr(args, "tf32x3", False):
            raise NetcError("training on the interpreter target runs f32 kernels for now: drop --dtype/--tf32/--tf32x3")
    elif target != "cpu":
        if args.compare:
            raise NetcError("--compare needs --target interp or cpu with --train (the compiled training step on the "
                            "CPU against the reference executor)")
        if args.interp_blocks:
            raise NetcError("--interp-blocks needs --target interp (the compiled kernels' tiles)")
    if args.profile:
        raise NetcError("--profile does not apply to --train")
    check_training_flags(args)
    ref_dtype, _ = run_dtypes(args, "reference") if target == "reference" else ("f32", None)
    # training computes in f32 unless told otherwise (--dtype f64); --check-grads always in f64
    dtype = torch.float64 if (ref_dtype == "f64" and args.dtype is not None) else torch.float32
    module = load_network(args, diag)
    scale_for_run(module, args, load_source)
    program(module, pipeline_options(args, training=True, gradients_only=args.check_grads), diag)
    nets = [n for n in module.networks() if "gradients" in n.attrs]
    if len(nets) > 1:
        raise NetcError(f"{len(nets)} networks of this file have a loss ({', '.join(n.attrs['sym_name'] for n in nets)}); "
                        f"train one at a time with --network NAME (networks sharing parameters train alternately: "
                        f"-o after one, --params before the next)")
    net = nets[0]
    target = reference_for_comm_ops(args, module, target)
    inputs = given_inputs(args)
    from .params import read_params, save_tensors
    params = read_params(args.params, "--params") if args.params else None
    carried = {}
    if params:
        # a file written by training another network of the same file (a GAN's other half) holds
        # that network's optimizer state too: carried through to -o untouched, not an error
        declared = {p.attrs["sym_name"] for p in module.params()}
        carried = {k: v for k, v in params.items() if k not in declared}
        params = {k: v for k, v in params.items() if k in declared}
        if carried:
            shown = ", ".join(sorted(carried)[:6]) + (", ..." if len(carried) > 6 else "")
            diag.warning(f"--params: {len(carried)} tensor{'s' if len(carried) != 1 else ''} of {args.params} "
                         f"{'are' if len(carried) != 1 else 'is'} not in this training program (another network's "
                         f"state?), kept as they are{' in -o' if args.output else ''}: {shown}")
    if args.check_grads:
        rows = check_grads(module, net, inputs or None, params, seed=args.seed)
        width = max(len(r["param"]) for r in rows)
        print(f"{'parameter':{width}s}  {'shape':>16s}  {'max |grad|':>12s}  rel. error vs autograd")
        worst = 0.0
        for r in rows:
            print(f"{r['param']:{width}s}  {str(r['shape']):>16s}  {r['max_abs']:12.4e}  {r['rel_error']:.3e}")
            worst = max(worst, r["rel_error"])
        print(f"worst relative error {worst:.3e} over {len(rows)} parameter gradient{'s' if len(rows) != 1 else ''} "
              f"({'ok' if worst <= 1e-8 else 'FAILED'}: tolerance 1e-8)")
        if worst > 1e-8:
            raise NetcError(f"generated gradients differ from torch.autograd: worst relative error {worst:.3e} > 1e-8")
        return 0
    schedule = lr_schedule(net.attrs.get("optimizer"), args.lr)
    if args.compare and (args.data or args.eval or args.grads or args.history or args.plot):
        raise NetcError("--compare runs --steps N steps on fixed inputs (--inputs, or random ones) and prints the "
                        "errors; --data/--eval/--grads/--history/--plot go with a training run without --compare")
    if target in ("interp", "cpu"):
        if target == "interp":
            from .interp import InterpTrainer
            trainer = InterpTrainer(module, net.attrs["sym_name"], params, seed=args.seed,
                                    blocks=args.interp_blocks or "cuda")
        else:
            from .cpu import CpuTrainer
            trainer = CpuTrainer(module, net, params, seed=args.seed, capture=bool(args.compare or args.grads))
        if args.compare:
            ref = ReferenceTrainer(module, net, params, seed=args.seed, dtype=torch.float64)
            from .compare import compare_training
            from .interp import compare_step
            where = "on the interpreter target" if target == "interp" else "on the CPU target"
            compare_training(trainer, ref, net, inputs or None, schedule, where, args.steps or 1, args.output,
                             compare_step)
            write_training(args, None, trainer, {**carried, **(params or {})}, net.attrs["sym_name"])   # -o
            return 0
    else:
        trainer = ReferenceTrainer(module, net, params, seed=args.seed, dtype=dtype)
    data = Dataset(io.load_npz(args.data, "--data"), "--data") if args.data else None
    grads = {} if args.grads else None
    history = fit_and_report(args, trainer, schedule, inputs or None, data, grads, net.attrs["sym_name"],
                              net.attrs.get("optimizer", {}).get("name", "sgd"), TRAINED_ON[target])
    if args.eval:
        inference = load_source(args, diag)
        scale_for_run(inference, args, load_source)
        inference_pipeline(inference, pipeline_options(args), diag)
        test = Dataset(io.load_npz(args.eval, "--eval"), "--eval")
        r = evaluate(inference, trainer.params, test, network=net.attrs["sym_name"], dtype=dtype)
        # no loss: the metrics of a learning rule (an RBM's reconstruction error: SINGA's kCD test phase)
        rule = {} if "loss" in r else evaluate_rule_metrics(module, trainer.params, test, net.attrs["sym_name"], dtype)
        acc = f", accuracy {100 * r['accuracy']:.2f}%" if "accuracy" in r else ""
        if "cross_entropy_per_step" in r:     # a time-major network: per step (a character of char-rnn)
            acc += f" of the steps; cross-entropy per step {r['cross_entropy_per_step']:.4f}"
        loss = (f"loss {r['loss']:.6f}" if "loss" in r else
                ", ".join(f"{n} {v:.6f}" for n, v in rule["metrics"].items()) + f" (the mean over {rule['samples']} "
                f"samples in whole batches: SINGA's test phase of a kCD job)" if rule.get("metrics") else
                "no loss layer to evaluate")
        print(f"eval on {r['samples']} samples of {args.eval}: {loss}{acc}")
    if args.grads:
        save_tensors(args.grads, {k: v for k, v in grads.items()})
        sys.stderr.write(f"wrote {args.grads} ({len(grads)} gradients of step 1)\n")
    write_training(args, history, trainer, {**carried, **(params or {})}, net.attrs["sym_name"])
    return 0
