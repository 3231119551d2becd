"""What `netc`'s command-line flags mean to the library: the source a command reads, the pipelines'
typed options (pipelines.Options, Training, Precision) and the executors' dtypes from the flags, and
the checks that flags go together. `args` is a command's parsed options (an argparse namespace: the
attributes its flags name); the CLI parses, these functions interpret, the library runs."""
from __future__ import annotations

from ..diagnostics import NetcError


def precision_options(args):
    """pipelines.Precision from --dtype/--tf32/--tf32x3, or None when none is given."""
    from ..passes.set_dtype import parse_dtype
    from ..pipelines import Precision
    x3 = bool(getattr(args, "tf32x3", False))
    if args.dtype is None and not args.tf32 and not x3:
        return None
    dtype = parse_dtype(args.dtype) if args.dtype is not None else None
    if args.tf32 and x3:
        raise NetcError("--tf32 and --tf32x3 are two ways to compute f32 products: give one of them")
    for flag, on in (("--tf32", args.tf32), ("--tf32x3", x3)):
        if on and dtype not in (None, "f32"):
            raise NetcError(f"{flag} applies to f32 matrix products; --dtype {args.dtype} has none (drop one of them)")
    return Precision(dtype, bool(args.tf32), x3)


def training_options(args, listed=(), gradients_only: bool = False):
    """pipelines.Training from the training flags: for --train (or --check-grads), or when `listed`
    (opt's -p) names backward or optimizer; else None (and the training flags are an error)."""
    from ..pipelines import Training
    if not (getattr(args, "train", False) or getattr(args, "check_grads", False)
            or any(n in ("backward", "optimizer") for n in listed)):
        given = [f"--{f.replace('_', '-')}" for f in ("optimizer", "momentum", "weight_decay", "clip_norm", "freeze",
                                                      "loss", "loss_on", "train_network")
                 if getattr(args, f, None) not in (None, [], False)]
        if given:
            raise NetcError(f"{', '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to training: add --train")
        return None
    if args.loss_on and not args.loss:
        raise NetcError("--loss-on names the layer for --loss: give --loss softmax|euclidean too")
    return Training(freeze=tuple(n.strip() for f in args.freeze for n in f.split(",") if n.strip()),
                    loss=args.loss, loss_on=args.loss_on,
                    networks=(args.train_network,) if args.train_network else (
                        (args.network,) if getattr(args, "network", None) and getattr(args, "cmd", "") == "run"
                        else None),
                    optimizer={k: v for k, v in (("name", args.optimizer), ("momentum", args.momentum),
                                                 ("weight_decay", args.weight_decay),
                                                 ("clip_norm", args.clip_norm)) if v is not None},
                    gradients_only=gradients_only)


def size_options(given) -> dict:
    """--size NAME=N (repeatable) -> {NAME: N}; a malformed one is the user's error."""
    sizes = {}
    for item in given or ():
        name, eq, value = item.partition("=")
        name = name.strip()
        try:
            n = int(value) if eq else 0
        except ValueError:
            n = 0
        if not eq or not name or n < 1:
            raise NetcError(f"--size {item}: expected NAME=N with N a positive integer (e.g. --size T=100)")
        if name in sizes and sizes[name] != n:
            raise NetcError(f"--size {name} is given twice ({sizes[name]} and {n})")
        sizes[name] = n
    return sizes


def load_options(args) -> dict:
    """The front ends' options from a command's flags: --singa-version, --size (frontend.load_text)."""
    options = {"singa_version": getattr(args, "singa_version", None)}
    sizes = size_options(getattr(args, "size", None))
    if sizes:
        options["sizes"] = sizes
    return options


def load_source(args, diag):
    from ..frontend import load
    # Errors the frontend collected do not stop here: the passes skip the layers it marked
    # invalid and go on to report independent problems elsewhere in the file.
    return load(args.file, diag, getattr(args, "batch", None) or 1, options=load_options(args))


def load_network(args, diag):
    """load_source for `netc run`: a file that defines no network (only comments, or cut before its first
    `network`) is an error, not a silent success."""
    module = load_source(args, diag)
    if not module.networks() and not diag.has_errors():
        from ..diagnostics import Loc
        raise NetcError(f"'{args.file}' defines no network to run", Loc(args.file, 1, 1))
    return module


def pipeline_options(args, *, training: bool = False, listed=(), gradients_only: bool = False, precision=None,
             phase: str | None = None):
    """pipelines.Options from the command's flags: --phase, --workers K (the partition pass places the
    network on K workers), --opaque-as-identity, and with `training` the training flags (training_options)."""
    from ..pipelines import Options
    k = getattr(args, "partition_workers", None)
    if k is not None and k < 1:
        raise NetcError(f"--workers takes the number of workers (at least 1), got {k}")
    return Options(phase=phase or args.phase, workers=k, opaque_as_identity=bool(getattr(args, "opaque_as_identity", False)),
                   precision=precision, training=training_options(args, listed, gradients_only) if training else None)


TRAINING_FLAGS = ("steps", "epochs", "data", "eval", "optimizer", "lr", "momentum", "weight_decay", "clip_norm",
                   "freeze", "loss", "grads", "history", "plot")  # (run's; explain and opt take the passes' ones)


def no_training_flags(args):
    given = [f"--{f.replace('_', '-')}" for f in TRAINING_FLAGS if getattr(args, f, None) not in (None, [], False)]
    if given:
        raise NetcError(f"{', '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to training: add --train")


REFERENCE_DTYPES = {"f64": "f64", "fp64": "f64", "f32": "f32", "fp32": "f32"}


def reference_flags(args) -> list:
    """The flags of `netc run` on a network source that the CPU target does not take and the reference executor
    does (or refuses with its own message: a compiled --dtype, --tf32): --dtype other than f32, --tf32,
    --state-in/--state-out, --check-grads. The CPU target refuses each of them when it is named (--target cpu)."""
    given = [f"--dtype {args.dtype}"] if args.dtype not in (None, "f32", "fp32") else []
    given += [f for f, v in (("--tf32", args.tf32), ("--tf32x3", getattr(args, "tf32x3", False)),
                             ("--state-in", args.state_in), ("--state-out", args.state_out),
                             ("--check-grads", getattr(args, "check_grads", False))) if v]
    return given


def cpu_in_f32(args, verb: str = "computes") -> None:
    """--target cpu computes (and trains) in f32: another --dtype, or --tf32, is an error naming where it runs."""
    d = args.dtype
    given = [f for f, v in ((f"--dtype {d}", d not in (None, "f32", "fp32")), ("--tf32", args.tf32),
                            ("--tf32x3", getattr(args, "tf32x3", False))) if v]
    if given:
        raise NetcError(f"--target cpu {verb} in f32: drop {' and '.join(given)} (without --target, --dtype f64 "
                        f"runs the reference executor; bf16, fp16 and TF32 are --target interp's)")


def run_target(args) -> str:
    """The target `netc run` runs a network source on: --target, --reference; --workers 1 (the baseline of a
    K-worker run) the reference executor; else the CPU target (issue 28), unless a flag only the reference
    executor takes is given (reference_flags): then the reference executor, as if --reference were given."""
    if args.target:
        return args.target
    if args.reference or args.partition_workers or reference_flags(args):
        return "reference"
    return "cpu"


def run_dtypes(args, target):
    """(reference executor dtype, interp precision {dtype, tf32}) from `netc run`'s --dtype/--tf32.
    One flag, one meaning per target: the reference executor computes in f64 or f32; the interpreter
    target runs the network compiled in f32, bf16 or fp16 (default: as the file declares it); the CPU target
    computes in f32."""
    from ..diagnostics import did_you_mean
    from ..passes.set_dtype import DTYPE_NAMES
    d = args.dtype
    if target == "reference":
        for flag, on in (("--tf32", args.tf32), ("--tf32x3", getattr(args, "tf32x3", False))):
            if on:
                raise NetcError(f"{flag} needs --target interp (the reference executor has no TF32)")
        if d is None or d in REFERENCE_DTYPES:
            return REFERENCE_DTYPES.get(d, "f64"), None
        if d in DTYPE_NAMES:
            raise NetcError(f"--dtype {d} is a compiled dtype: use it with --target interp (compared against the "
                            f"f64 reference with --compare); the reference executor computes in f64 or f32")
        hint = did_you_mean(d, list(REFERENCE_DTYPES) + list(DTYPE_NAMES))
        raise NetcError(f"unknown --dtype '{d}' (the reference executor: f64, f32; --target interp: f32, bf16, "
                        f"fp16)" + (f"; did you mean '{hint}'?" if hint else ""))
    if target == "cpu":
        cpu_in_f32(args)
        return "f32", None
    if d in ("f64", "fp64"):
        raise NetcError("--target interp runs f32, bf16 or fp16 kernels; f64 is the reference executor's "
                        "(--reference --dtype f64), which --compare checks against")
    from ..pipelines import Precision
    return None, precision_options(args) or Precision()


def check_profile_flags(args):
    """`netc run`'s --profile and the flags that go with it."""
    if not args.profile:
        given = [f for f, v in (("--repeat", args.repeat), ("--device", args.device),
                                ("--profile-out", args.profile_out)) if v is not None]
        if given:
            raise NetcError(f"{', '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to --profile (netc run NET.so "
                            f"--profile)")
        return
    if args.repeat is not None and args.repeat < 1:
        raise NetcError(f"--repeat takes the number of timed runs (at least 1), got {args.repeat}")
