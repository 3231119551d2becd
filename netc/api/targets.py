"""The targets netc.train, netc.test and netc.infer run a topology's programs on, and how a ParameterSet's
tensors reach each of them (netc/api/trainer.py compiles the programs and calls these).

    "cpu"        the default: netc.runtime.cpu's CPU target (`netc run --target cpu`): each program's step
                 generated once over its memory plan's arenas, f32 arithmetic, the CPU lowerings (CpuTrainer
                 for a training step, CpuNet for test and infer); a program the generated step does not take
                 (a sequence's time-sized arena) runs op by op with the same lowerings, as CpuTrainer does.
                 Its parameters live in the program's arena: before each step the set's values (and its
                 optimizer state) are copied there, after a training step the updated ones are copied back,
                 so sharing by name works as on the reference target. The programs are kept per compiled
                 module across calls (a GAN calls train once per step; a report calls test every pass).
    "reference"  the oracle: netc.runtime.train.ReferenceTrainer computing on the set's own tensors, and
                 run_reference for test and infer (each op's reference semantics, f64 arithmetic).
    "interp"     the compiled kernels under Triton's interpreter (InterpTrainer, InterpProgram), f32, its
                 arena written and read back as the CPU target's.
    "cuda"       not wired into the API: a located error saying what to use instead.

A step's values: the fed inputs and, besides the outputs, the `capture` values the caller reads (a softmax
loss's logits for its accuracy, an observer's layers); the reference executor returns every value.
"""
from __future__ import annotations

from collections import OrderedDict

import torch

from ..runtime.reference import run_reference
from ..runtime.train import ReferenceTrainer, is_forward
from .errors import error, user_errors

TARGETS = ("cpu", "reference", "interp", "cuda")
DEFAULT_TARGET = "cpu"


def check_target(target, what: str, loc) -> None:
    """A located error for a target the API does not run."""
    if target not in TARGETS:
        raise error(f"unknown target {target!r} (targets: {', '.join(TARGETS)})", loc)
    if target == "cuda":
        raise error(f"{what} on target 'cuda' is not wired into the Python API yet: compile the network (`netc "
                    f"compile`, with --train for training) and use netc.runtime.load(...) (run, train_step), or "
                    f"target=\"cpu\" (the default) on the CPU", loc)
    if target == "interp":
        from ..runtime.interp import ensure_interpreter
        with user_errors(loc):
            ensure_interpreter()


def forward_layers(net) -> list:
    """Every forward layer's name in a training network (what an observer without a `layers` list sees)."""
    from ..ir.query import layer_name, layers
    return [layer_name(op) for op in layers(net) if is_forward(op) and op.name != "netc.input"]


# -- the programs kept across calls (the CPU target) -----------------------------------------------

KEPT: OrderedDict = OrderedDict()    # (id of the module, kind, captures) -> (the module, its program), oldest first
KEPT_PROGRAMS = 128                   # the most kept; the least recently used goes first


def _kept(module, kind: str, capture: tuple, make):
    """The program kept for (module, kind, capture), made by make() the first time (the module, held in the entry,
    keeps its id from being reused)."""
    key = (id(module), kind, capture)
    hit = KEPT.get(key)
    if hit is None or hit[0] is not module:
        hit = KEPT[key] = (module, make())
        while len(KEPT) > KEPT_PROGRAMS:
            KEPT.popitem(last=False)
    KEPT.move_to_end(key)
    return hit[1]


def _copy_all(dst: list, src: list) -> None:
    if dst:
        torch._foreach_copy_(dst, src)     # one call for every tensor (each a copy_, dtypes converted)


def _own(params: dict) -> dict:
    """Copies for a program to start from (a kept program never computes on some set's own tensors)."""
    return {k: v.detach().to(torch.float32).clone() if v.is_floating_point() else v.detach().clone()
            for k, v in params.items()}


# -- training --------------------------------------------------------------------------------------

class ReferenceRun:
    """A training program on the reference executor, computing on the set's own tensors."""

    def __init__(self, module, net, parameters, given, seed):
        self.trainer = ReferenceTrainer(module, net, given, seed, dtype=parameters.dtype)
        self.net = self.trainer.net
        for k, t in given.items():
            assert self.trainer.params[k] is t, f"parameter '{k}' was copied, not shared"
        parameters.adopt_state(self.trainer.params)

    def step(self, feed, lr, step_seed) -> dict:
        return self.trainer.step(feed, lr, step_seed=step_seed)


class InterpRun:
    """A training program under Triton's interpreter; the set's values into its arena and back each step."""

    def __init__(self, module, net, parameters, given, seed, capture):
        from ..runtime.interp import InterpTrainer
        known = {**given, **parameters.state}
        self.trainer = tr = InterpTrainer(module, net, known, seed, blocks="large", capture=list(capture))
        self.net, self.parameters, self.given = tr.net, parameters, given
        parameters.adopt_state({k: v.detach().to(parameters.dtype).clone() for k, v in tr.params.items()
                                if k not in given})

    def step(self, feed, lr, step_seed) -> dict:
        tr = self.trainer
        held = {**self.given, **self.parameters.state}
        tr.program.set_params(held)
        named = tr.step(feed, lr, step_seed=step_seed)
        for k, v in tr.params.items():
            if k in held:
                held[k].copy_(v.reshape(held[k].shape).to(held[k].dtype))
        return {**tr.last_feed, **named}


class CpuTraining:
    """One training program on the CPU target, kept across calls: CpuTrainer over copies of the parameters
    (its arena's views), the initial values of the state it made, and the values it updates."""

    def __init__(self, module, net, given: dict, seed: int, capture: tuple):
        from ..runtime.cpu import CPU_LOWERINGS, CpuTrainer
        from ..runtime.cpu_step import CpuProgram
        state = {p.attrs["sym_name"] for p in module.params() if "state" in p.attrs}
        # the state starts from the program's own initial values (zeros, a running variance's ones), kept for a
        # set that has none yet; a set's own state is copied in at every step
        self.trainer = tr = CpuTrainer(module, net, _own({k: v for k, v in given.items() if k not in state}), seed)
        self.net, self.derived = tr.net, []
        if tr.program is not None:
            want, self.derived = captures(tr.program.plan, tr.net, capture)
            if want:        # the step returns them too: generated again with the captures (once per program)
                tr.program = CpuProgram(module, tr.net, tr.params, CPU_LOWERINGS, capture=want, plan=tr.program.plan)
                tr.params = tr.program.params
        self.state = {k: v.detach().clone() for k, v in tr.params.items() if k in state}
        self.updated = set((tr.net.attrs.get("gradients") or {})) | set(self.state)

    def bind(self, parameters, given: dict) -> "BoundCpuTraining":
        """This program on `parameters` for one train call: the state the set lacks adopted (the program's
        initial values), the pairs of tensors copied each step."""
        parameters.adopt_state({k: (v.to(parameters.dtype) if v.is_floating_point() else v).clone()
                                for k, v in self.state.items() if k not in parameters.state})
        return BoundCpuTraining(self, {**given, **{k: parameters.state[k] for k in self.state}})


def captures(plan, net, want) -> tuple:
    """(the values a generated step captures, [op] computed after it): a value an alias step holds (a view,
    a concatenation its operands wrote in place) runs nothing in the step, so it is computed afterwards by
    its op's reference from its operands, themselves captured (or computed so) in turn. The step's outputs
    and inputs are there anyway."""
    from ..ir.query import layer_name, layers
    ops = {layer_name(op): op for op in layers(net)}
    written = {plan.tensors[i].name for st in plan.steps if st.action != "alias" for i in st.writes}
    there = {t.name for t in plan.tensors if t.output} | {plan.tensors[i].name for i in plan.inputs}
    direct, derived, seen = [], [], set()

    def need(name):
        if name in seen:
            return
        seen.add(name)
        op = ops.get(name.partition("#")[0])
        if name in there or (op is not None and op in derived):
            return
        if name in written or op is None:
            direct.append(name)
            return
        for v in op.operands:
            need(_name(v))
        derived.append(op)

    for name in want:
        need(name)
    return tuple(direct), derived


def _name(v) -> str:
    """An IR value's name in a step's values: its layer's, 'layer#i' for one of several results."""
    from ..ir.query import layer_name
    return layer_name(v.owner) if len(v.owner.results) == 1 else f"{layer_name(v.owner)}#{v.index}"


def complete(named: dict, derived: list) -> dict:
    """`named` with the values `captures` left to compute after the step (each op's reference, in f32)."""
    from ..ir.query import layer_name
    from ..ops import lookup
    from ..ops.reference import computing_in
    if derived:
        with computing_in(torch.float32):
            for op in derived:
                d = lookup(op.name)
                y = d.reference(d.attrs_of(op), [named[_name(v)] for v in op.operands], {})
                ys = list(y) if len(op.results) > 1 else [y]
                for r, t in zip(op.results, ys):
                    named[_name(r)] = t.to(torch.float32) if t.is_floating_point() else t
                named[layer_name(op)] = named[_name(op.results[0])]
    return named


class BoundCpuTraining:
    """A kept CPU training program bound to a ParameterSet's tensors for one train call."""

    def __init__(self, kept: CpuTraining, held: dict):
        arena = kept.trainer.params
        self.trainer, self.net, self.derived = kept.trainer, kept.net, kept.derived
        pairs = [(k, arena[k], t.view(arena[k].shape)) for k, t in held.items() if k in arena and arena[k] is not t]
        self.into = ([a for _, a, _ in pairs], [t for _, _, t in pairs])
        back = [(a, t) for k, a, t in pairs if k in kept.updated]
        self.back = ([t for _, t in back], [a for a, _ in back])

    def step(self, feed, lr, step_seed) -> dict:
        _copy_all(*self.into)
        with torch.no_grad():
            named = self.trainer.step(feed, lr, step_seed=step_seed)
        _copy_all(*self.back)
        return complete({**feed, **named}, self.derived)


def training(target: str, module, net, parameters, given: dict, seed: int, capture: tuple, loc):
    """The runner of a training program on `target`: .net, .step(feed, lr, step_seed) -> the step's values."""
    with user_errors(loc):
        if target == "cpu":
            kept = _kept(module, "train", capture, lambda: CpuTraining(module, net, given, seed, capture))
            return kept.bind(parameters, given)
        if target == "interp":
            return InterpRun(module, net, parameters, given, seed, capture)
        return ReferenceRun(module, net, parameters, given, seed)


# -- inference -------------------------------------------------------------------------------------

class CpuForward:
    """An inference program on the CPU target, kept across calls: CpuNet's generated step (with the captures
    the caller reads), or, where the step takes no arena (sequences), the ops one by one with the CPU
    lowerings."""

    def __init__(self, module, net, params: dict, capture: tuple):
        from ..runtime.cpu import CPU_LOWERINGS, CpuNet
        from ..runtime.cpu_step import CpuProgram, NoArena
        self.module, self.capture, self.lowerings = module, capture, CPU_LOWERINGS
        try:
            self.cpu_net = CpuNet(module, net, _own(params))
        except NoArena:
            self.cpu_net, self.net = None, net
            return
        self.net = self.cpu_net.net
        want, self.derived = captures(self.cpu_net.program.plan, self.net, capture)
        if want:
            self.cpu_net.program = CpuProgram(module, self.net, self.cpu_net.params, CPU_LOWERINGS, capture=want,
                                              plan=self.cpu_net.program.plan)
            self.cpu_net.params = self.cpu_net.program.params

    def set_params(self, params: dict) -> None:
        if self.cpu_net is not None:
            self.cpu_net.set_params({k: v for k, v in params.items() if k in self.cpu_net.params})

    def __call__(self, feed: dict, params: dict) -> dict:
        if self.cpu_net is not None:
            return complete({**feed, **self.cpu_net.program.run(feed)}, self.derived)
        from ..ops.reference import computing_in
        with computing_in(torch.float32):
            return run_reference(self.module, feed, params, self.net, dtype=torch.float32,
                                 intermediates=bool(self.capture), impls=self.lowerings)


def forward(target: str, module, net, feed: dict, params: dict, dtype, capture: tuple, cache: dict, key) -> dict:
    """An inference program's values on `target`: the fed inputs, the outputs and `capture` (the reference
    executor: every value when capture is given). `cache` is the call's: a program is set to `params` once
    per call."""
    if target == "reference":
        return run_reference(module, feed, params, net, dtype=dtype, intermediates=bool(capture))
    if (target, key) not in cache:
        if target == "interp":
            from ..runtime.interp import InterpProgram
            cache[target, key] = InterpProgram(module, net.attrs.get("sym_name"), params=params, blocks="large")
        else:
            prog = _kept(module, "infer", capture, lambda: CpuForward(module, net, params, capture))
            prog.set_params(params)
            cache[target, key] = prog
    prog = cache[target, key]
    if target == "interp":
        prog.set_params(dict(params))
        out = prog.run(feed, capture=capture)
    else:
        with torch.no_grad():
            out = prog(feed, params)
    return {**{k: torch.as_tensor(v) for k, v in feed.items()}, **out}


__all__ = ["TARGETS", "DEFAULT_TARGET", "check_target", "forward_layers", "training", "forward"]
