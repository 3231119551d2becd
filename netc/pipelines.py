"""The named pipelines: which passes run, in which order, with which options.

The CLI, the Python API, the exports, codegen and the runtimes ask for a pipeline by name with typed
options (the dataclasses below) and never assemble pass lists themselves (the habit of xDSL's
PassPipeline and TVM's pipeline map). A pass still reads its options from ctx.options (a dict per
pass, documented in its module); the options here are turned into those dicts in one place
(`context`).

Every pipeline is a prefix of one canonical order, each stage present or not:

    the default pipeline (passes/manager.py DEFAULT_PIPELINE: select-phase ... shape-inference ... partition)
    -> opaque-as-identity -> set-dtype -> backward -> optimizer -> split-workers -> fuse
    -> rematerialize -> plan-memory

    inference   the default pipeline (+ opaque-as-identity, + set-dtype): the forward program, checked
    training    inference + backward (+ optimizer): a training step (options.training)
    program     inference, or training when options.training is given
    compile     program + fuse (+ plan-memory with a Plan): what codegen lowers
    workers     program + split-workers (+ fuse): one program per rank
    explain     program (+ split-workers, fuse, rematerialize, plan-memory): `netc explain`'s report
    fuse        fuse alone, over a program the pipelines above made (codegen and the interpreter target)
    custom      the passes a user names (`netc opt -p`), prerequisites and --train's passes added
    reinfer-shapes  shape inference again over a module a caller edited after a pipeline (a loss appended)

A pipeline returns the PassContext it ran with (ctx.notes holds the memory plans, and "pass_times" the
seconds of each pass that ran, "ir_dumps" the IR printed after each with print_after_all). The
manager raises NetcError after a pass that reported errors.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

from .diagnostics import DiagnosticEngine
from .passes.manager import DEFAULT_PIPELINE, PassContext, PassManager


@dataclass(frozen=True)
class Precision:
    """The set-dtype pass's options: floating tensors and parameters in `dtype` ('f32', 'bf16', 'fp16';
    None: as declared), f32 matrix products on TF32 tensor cores with `tf32`, or as three TF32 products
    each (3xTF32: about f32's accuracy) with `tf32x3`."""
    dtype: str | None = None
    tf32: bool = False
    tf32x3: bool = False

    @classmethod
    def named(cls, name: str) -> "Precision | None":
        """The precision benchmarks and reports name: 'bf16', 'fp16', 'tf32', 'tf32x3', or 'f32' (None: the
        network as declared, f32 products in IEEE f32)."""
        table = {"bf16": cls("bf16"), "fp16": cls("fp16"), "tf32": cls(tf32=True), "tf32x3": cls(tf32x3=True),
                 "f32": None}
        if name not in table:
            raise ValueError(f"unknown precision '{name}' (one of {', '.join(table)})")
        return table[name]


@dataclass(frozen=True)
class Training:
    """The backward and optimizer passes' options (passes/backward.py, passes/optimizer.py).

    freeze: parameters, layers or patterns not trained; loss, loss_on: a loss to append ('softmax',
    'euclidean') and the layer it goes on; networks: the networks to differentiate (None: every one
    with a loss); outputs: outputs to differentiate instead of the losses; freeze_name, no_loss_hint:
    how messages name `freeze` and what they advise without a loss (None: the pass's defaults);
    optimizer: the optimizer pass's options (a name and its options, ops/optim.py resolve_optimizer
    checks them); gradients_only: the backward pass alone (gradients, no updates)."""
    freeze: tuple = ()
    loss: str | None = None
    loss_on: str | None = None
    networks: tuple | None = None
    outputs: tuple | None = None
    freeze_name: str | None = None
    no_loss_hint: str | None = None
    optimizer: dict = field(default_factory=dict)
    gradients_only: bool = False

    def backward_options(self) -> dict:
        opts = {"freeze": list(self.freeze), "loss": self.loss, "loss_on": self.loss_on,
                "networks": list(self.networks) if self.networks is not None else None}
        for k in ("outputs", "freeze_name", "no_loss_hint"):
            v = getattr(self, k)
            if v is not None:
                opts[k] = list(v) if k == "outputs" else v
        return opts

    def optimizer_options(self) -> dict:
        return copy.deepcopy(dict(self.optimizer))

    def record(self) -> dict:
        """What a training library records of these options (the source record's "backward" and
        "optimizer"; `from_record` reads them back)."""
        return {"backward": self.backward_options(), "optimizer": self.optimizer_options()}

    @classmethod
    def from_record(cls, rec: dict) -> "Training":
        b = rec.get("backward") or {}
        return cls(freeze=tuple(b.get("freeze") or ()), loss=b.get("loss"), loss_on=b.get("loss_on"),
                   networks=tuple(b["networks"]) if b.get("networks") is not None else None,
                   outputs=tuple(b["outputs"]) if b.get("outputs") is not None else None,
                   freeze_name=b.get("freeze_name"), no_loss_hint=b.get("no_loss_hint"),
                   optimizer=dict(rec.get("optimizer") or {}))

    def key(self):
        """A hashable form (caches of compiled programs)."""
        def freeze(v):
            if isinstance(v, dict):
                return tuple(sorted((k, freeze(x)) for k, x in v.items()))
            if isinstance(v, (list, tuple, set)):
                return tuple(freeze(x) for x in v)
            return v
        return freeze((self.backward_options(), self.optimizer, self.gradients_only))


@dataclass(frozen=True)
class Plan:
    """The plan-memory pass's options (passes/plan_memory.py; None: its default): mode 'inference' or
    'training'; reuse: buffers whose lifetimes do not overlap share bytes; concat 'contiguous' and
    fusion 'none': no strided slices, op by op (what a Brainstorm layout can express); time_sized: sequences
    [T, B, ...] are Brainstorm's time-sized class (a layout's; the executors plan without it)."""
    mode: str | None = None
    reuse: bool | None = None
    concat: str | None = None
    fusion: str | None = None
    time_sized: bool | None = None

    def options(self) -> dict:
        return {k: v for k, v in (("mode", self.mode), ("reuse", self.reuse), ("concat", self.concat),
                                  ("fusion", self.fusion), ("time_sized", self.time_sized)) if v is not None}


LAYOUT_PLAN = Plan(reuse=True, concat="contiguous", fusion="none", time_sized=True)


@dataclass(frozen=True)
class Options:
    """What every pipeline takes: the phase whose layers are kept; workers: partition over K workers
    (None: as the file says); opaque_as_identity: unknown layer types run as the identity; precision:
    the set-dtype pass; training: the backward and optimizer passes."""
    phase: str = "train"
    workers: int | None = None
    opaque_as_identity: bool = False
    precision: Precision | None = None
    training: Training | None = None


def context(options: Options = Options(), diag: DiagnosticEngine | None = None, ctx: PassContext | None = None,
            plan: Plan | None = None, budget: int | None = None) -> PassContext:
    """The PassContext of a pipeline: ctx.options holds each pass's options (a new context in
    options.phase, or `ctx` given, its own phase and diagnostics kept)."""
    if ctx is None:
        ctx = PassContext(diag=diag if diag is not None else DiagnosticEngine(), phase=options.phase)
    if options.workers is not None:
        ctx.options["partition"] = {"workers": options.workers}
    if options.precision is not None:
        ctx.options["set_dtype"] = {"dtype": options.precision.dtype, "tf32": options.precision.tf32,
                                    "tf32x3": options.precision.tf32x3}
    if options.training is not None:
        ctx.options["backward"] = options.training.backward_options()
        ctx.options["optimizer"] = options.training.optimizer_options()
    if budget is not None:
        ctx.options["rematerialize"] = {"budget": budget}
    if plan is not None:
        ctx.options["plan_memory"] = plan.options()
    return ctx


def pass_names(options: Options = Options(), *, train: bool = True, split_workers: bool = False,
               fuse: bool = False, rematerialize: bool = False, plan: bool = False) -> list[str]:
    """The canonical order (see the module's docstring) with the stages these options ask for;
    train=False leaves the training passes out even with options.training (their options only)."""
    names = list(DEFAULT_PIPELINE)
    if options.opaque_as_identity:
        names.append("opaque-as-identity")
    if options.precision is not None:
        names.append("set-dtype")
    if train and options.training is not None:
        names += ["backward"] + ([] if options.training.gradients_only else ["optimizer"])
    if split_workers:
        names.append("split-workers")
    if fuse:
        names.append("fuse")
    if rematerialize:
        names.append("rematerialize")
    if plan:
        names.append("plan-memory")
    return names


def _run(names, module, ctx, **manager) -> PassContext:
    pm = PassManager(names, **manager)
    try:
        pm.run(module, ctx)
    finally:
        ctx.notes["pass_times"] = list(pm.times)     # [(pass, seconds)] of the passes that ran
        if pm.dumps:
            ctx.notes["ir_dumps"] = list(pm.dumps)   # [(pass, banner + IR)] with print_after_all
    return ctx


def inference(module, options: Options = Options(), diag=None, *, ctx=None, verify: bool = True,
              print_after_all: bool = False, out=None) -> PassContext:
    """The forward program: the default pipeline (+ opaque-as-identity, + set-dtype). verify=False skips
    the verifier between passes (bench/frontend.py times the passes alone); print_after_all writes the IR
    after every pass to `out` (stdout when None). ctx.notes["pass_times"]: each pass's seconds."""
    if options.training is not None:
        raise ValueError("the inference pipeline takes no training options (use training or program)")
    return _run(pass_names(options), module, context(options, diag, ctx), verify=verify,
                print_after_all=print_after_all, out=out)


def training(module, options: Options, diag=None, *, ctx=None) -> PassContext:
    """A training step: the inference pipeline + backward (+ optimizer) with options.training."""
    if options.training is None:
        raise ValueError("the training pipeline needs options.training")
    return _run(pass_names(options), module, context(options, diag, ctx))


def program(module, options: Options = Options(), diag=None, *, ctx=None) -> PassContext:
    """inference, or training when options.training is given."""
    return _run(pass_names(options), module, context(options, diag, ctx))


def compile(module, options: Options = Options(), diag=None, *, plan: Plan | None = None,  # noqa: A001
            ctx=None) -> PassContext:
    """What codegen lowers: program + fuse, + plan-memory with `plan` (ctx.notes["memory_plan"])."""
    return _run(pass_names(options, fuse=True, plan=plan is not None), module, context(options, diag, ctx, plan))


def workers(module, options: Options, diag=None, *, fuse: bool = False, ctx=None) -> PassContext:
    """One program per rank: program + split-workers (+ fuse, for rank libraries)."""
    return _run(pass_names(options, split_workers=True, fuse=fuse), module, context(options, diag, ctx))


def explain(module, options: Options = Options(), diag=None, *, split_workers: bool = False, fuse: bool = False,
            budget: int | None = None, plan: Plan | None = None, print_after_all: bool = False) -> PassContext:
    """`netc explain`'s program: program (+ split-workers, + fuse: the groups --dot draws, + rematerialize
    under `budget` bytes, + plan-memory with `plan`), the IR printed after every pass with print_after_all."""
    names = pass_names(options, split_workers=split_workers, fuse=fuse, rematerialize=budget is not None,
                       plan=plan is not None)
    return _run(names, module, context(options, diag, None, plan, budget), print_after_all=print_after_all)


def reinfer_shapes(module, ctx: PassContext) -> PassContext:
    """Shape inference again, over a module the pipelines above made and a caller then edited (a loss
    appended to a checked network: bench/gpu.py's training benchmark)."""
    return _run(["shape-inference"], module, ctx)


def layout(module, ctx: PassContext) -> PassContext:
    """A Brainstorm layout's plan: the default pipeline + plan-memory with LAYOUT_PLAN."""
    return _run(pass_names(plan=True), module, context(ctx=ctx, plan=LAYOUT_PLAN))


def fuse(module, phase: str) -> PassContext:
    """The fuse pass over a program the pipelines above made (work already done is skipped)."""
    return _run(["fuse"], module, PassContext(phase=phase))


def custom(names: list[str], options: Options = Options(), diag=None, *, train: bool = False,
           print_after_all: bool = False, print_after: set | None = None) -> tuple[PassManager, PassContext]:
    """`netc opt -p NAMES`: the passes named, in their order (the manager adds prerequisites), with
    options' passes added where they belong: train, the training passes after the default pipeline's
    part of NAMES, before what NAMES adds after it (fuse, plan-memory, rematerialize see the training
    program); a partition or split-workers named: partition before the training passes, split-workers
    after them; precision: set-dtype at the end unless named. Returns the manager (its timing report)
    and the context, for the caller to run."""
    ctx = context(options, diag)
    extra = [n for n in pass_names(options)[len(DEFAULT_PIPELINE):] if n in ("backward", "optimizer")] if train else []
    extra = [n for n in extra if n not in names]
    at = next((i for i, n in enumerate(names) if n not in DEFAULT_PIPELINE and n not in ("backward", "optimizer")),
              len(names))
    names = list(names[:at]) + extra + list(names[at:])
    if "split-workers" in names or "partition" in names:
        # partition the forward program, train it, then one program per rank from the whole
        split = "split-workers" in names
        names = [n for n in names if n not in ("partition", "split-workers")]
        first = next((i for i, n in enumerate(names) if n in ("backward", "optimizer")), len(names))
        names = names[:first] + ["partition"] + names[first:] + (["split-workers"] if split else [])
    if options.precision is not None and "set-dtype" not in names:
        names = list(names) + ["set-dtype"]
    return PassManager(names, print_after_all=print_after_all, print_after=print_after), ctx


PIPELINES = {"inference": inference, "training": training, "program": program, "compile": compile,
             "workers": workers, "explain": explain, "layout": layout, "fuse": fuse, "custom": custom,
             "reinfer-shapes": reinfer_shapes}
