"""The CPU target's generated step (issue 28): a program's schedule turned once into one straight-line
Python function over the memory plan's arenas.

CpuProgram plans the network's memory (memory/plan.py, every op its own step), allocates the plan's
constant and batch arenas once (runtime/planned.py's PlannedProgram: every value is a view at its planned
offset, parameters and optimizer state live in the constant arena), and writes the source of a function
`step(feed)`: the inputs copied into place, then for every step of the plan's schedule the lines of its
out= lowering (runtime/cpu_emit.py: torch calls writing into the result's arena view, their views and
scratch buffers made once), or, where there is none, a call of the op's CPU lowering (runtime/cpu.py) or
its OpDef reference with the result copied into place; an alias step (a view, an identity) runs nothing.
The source is compiled once (compile/exec); `CpuProgram.source` holds it, and with the environment variable
NETC_CPU_STEP=1 every generated step is printed to stderr as it is made (`netc run --target cpu` too). A step allocates only what torch's kernels allocate
inside (a convolution's result before the activation writes it into place).

The values a step returns: the network's outputs (copies, so the next step does not overwrite them) and
the `capture` values (copies taken right after the op that computes them: the gradients and forward values
--compare reads, before the plan reuses their bytes).

A rank's program (`netc run --workers K --target cpu`): CpuRank plans it as codegen plans a rank (rank_plan:
its communication ops in the program's order), and its step is a generator that yields at each communication
op (the operands in their arena views by then); distributed.CompiledRank runs the communication on those views
and resumes it, so segment k is the ops between communication op k-1 and k, as for the interpreter target.
"""
from __future__ import annotations

import os
import re
import sys

import torch

from ..diagnostics import NetcError
from ..ir.core import SymbolRef
from ..ir.query import layer_name, layers
from ..memory.model import TIME
from ..ops import lookup
from ..ops.comm import is_comm
from .cpu_emit import EMITTERS, INPLACE_SAFE, Emit, overwritable


class NoArena(NetcError):
    """A network the generated step does not take (a time-sized arena, a plan it cannot make): the callers run
    it op by op instead."""


def located(e: NetcError, loc) -> NetcError:
    """`e` with `loc` on every diagnostic that has no location (as the reference executor's run_op places them)."""
    for d in e.diagnostics:
        if d.loc is None:
            d.loc = loc
    return e


def _ident(s: str) -> str:
    return re.sub(r"\W", "_", s)


class _Generator:
    """The step's source lines and namespace."""

    def __init__(self):
        import torch.nn.functional as F
        self.env: dict = {"torch": torch, "F": F, "CL": torch.channels_last, "NetcError": NetcError, "located": located,
                          "take": take}
        self.lines: list = []
        self.scalars: dict = {}
        self.pool_indices: dict = {}
        self.views: dict = {}         # (name, hint) -> the name of a view made once
        self.readers: dict = {}       # id of an IR value -> the ops reading it
        self.deferred: dict = {}      # id of an op -> (the expression holding its result, computed earlier, the local)
        self.value_names: dict = {}   # id of an IR value -> the name of its arena view
        self.frozen = False           # no op of the step updates a parameter (inference)
        self.kept: set = set()        # the names of the values a step returns (outputs, captures)
        self.locals: dict = {}        # name of an arena view -> the local holding its value instead
        self.local_of: dict = {}      # the local -> the arena view it stands for
        self.materialize: dict = {}   # name of a value's arena view -> (its NCHW view, the local holding it)
        self.packs: list = []         # (name of a rearranged copy of a parameter, name of the parameter's view)
        self.param_name = lambda op, role: None     # CpuProgram's: the view of another op's parameter
        self.external: set = set()    # the names of the inputs read where the caller holds them, and their views
        self.head: list = []          # the lines that make those views at each step
        self.fast: list = []         # the layers whose out= lowering runs
        self.slow: list = []         # the layers that call their lowering or reference

    def bind(self, obj, hint: str) -> str:
        base = _ident(hint).strip("_") or "value"
        if base[0].isdigit():       # a SINGA layer's name ('0#data:0'): no Python identifier starts with a digit
            base = "v_" + base
        name, k = base, 1
        while name in self.env:
            k += 1
            name = f"{base}_{k}"
        self.env[name] = obj
        return name

    def name_of(self, value) -> str:
        """The name of an IR value's arena view."""
        return self.value_names[id(value)]

    def scalar(self, name: str) -> str:
        if name not in self.scalars:
            self.scalars[name] = self.bind(None, f"s_{name.removeprefix('v_')}")
        return self.scalars[name]


class CpuProgram:
    """One network's step generated once over its planned arenas.

    prog = CpuProgram(module, net, params)     # params: every parameter and state tensor by sym_name
    out = prog.run(feed)                       # feed: every input by name; the outputs (and captures)
    prog.params                                # views of the constant arena (updates show through)
    prog.source                                # the generated step
    """

    def __init__(self, module, net, params: dict, impls: dict | None = None, capture=(), plan=None):
        from ..memory.plan import plan_memory
        from .planned import PlannedProgram
        from ..memory.model import PlanError
        if plan is None:
            try:     # the inputs read where the caller holds them (a rank's step, with communication: copied in)
                plan = plan_memory(module, net, fusion="none", overwrite=overwritable(layers(net)),
                                   external_inputs=not any(is_comm(op) for op in layers(net)))
            except PlanError as e:
                raise NoArena(f"no memory plan for the CPU step: {e}") from None
        if plan.arenas[TIME].size:
            raise NoArena("the CPU step has no time-sized (recurrent) arena")
        self.net, self.plan = net, plan
        self.arenas = PlannedProgram(module, net, plan, torch.float32)
        self.arenas.set_params(params)
        self.params = self.arenas.param_views()
        if self.params is None:
            raise NoArena("the CPU step needs every parameter aligned to its element size in the arena")
        self.capture = list(capture)
        self.comm_steps: list = []     # the plan steps of the communication ops, where the step yields (a rank's)
        gen = _Generator()
        gen.frozen = not any(s.updates for s in plan.steps)
        self.names = {}
        for t in plan.tensors:
            if not t.fused:
                self.names[t.id] = gen.bind(self.arenas.view(t), ("v_" + t.name) if t.kind != "param" else "p_" + t.name[1:])
                if plan.buffers[t.buffer].external:
                    gen.external.add(self.names[t.id])
        self.source = self._generate(gen, module, impls or {})
        _drop_stand_ins(gen, self.source)
        self.fast, self.slow = gen.fast, gen.slow
        self._packs = [(gen.env[a], gen.env[b]) for a, b in gen.packs]
        code = compile(self.source, f"<netc cpu step: {net.attrs.get('sym_name')}>", "exec")
        exec(code, gen.env)       # the generated source above: netc's own text, no user input in it
        self.fn = gen.env["step"]
        if os.environ.get("NETC_CPU_STEP"):
            sys.stderr.write(self.source)

    def _generate(self, gen: _Generator, module, impls: dict) -> str:
        plan, T = self.plan, self.plan.tensors
        ops = {layer_name(op): op for op in layers(self.net)}
        ids = {t.name: t.id for t in plan.tensors}
        for op in ops.values():
            for v in op.operands:
                gen.readers.setdefault(id(v), []).append(op)
            for v in op.results:
                if _vname(v) in ids and ids[_vname(v)] in self.names:
                    gen.value_names[id(v)] = self.names[ids[_vname(v)]]
        gen.kept = {self.names[t.id] for t in T if not t.fused and (t.output or t.name in self.capture)}

        def param_name(op, role):       # the name of another op's parameter view (a gradient group's weight)
            ref = (op.attrs.get("params") or {}).get(role)
            return self.names.get(ids.get("@" + ref.name)) if isinstance(ref, SymbolRef) else None
        gen.param_name = param_name
        body = []
        for i in plan.inputs:
            name = self.names[i]
            if name in gen.external:     # the caller's tensor where it has the planned layout (else a copy of it)
                v = gen.env[name]
                body.append(f"{name} = take(feed, {T[i].name!r}, {tuple(v.shape)}, {v.stride()}, {v.dtype})")
            else:
                body.append(f"{name}.copy_(feed[{T[i].name!r}])")
        head = len(body)
        threaded_off = False
        for st in plan.steps:
            op = ops[st.members[0].layer] if st.members else ops[st.layer]
            body.append(f"# {st.index}: {layer_name(op)} = {op.name}({', '.join(layer_name(v.owner) for v in op.operands)})"
                        + ("  [in place]" if st.action == "inplace" else ""))
            if is_comm(op):     # the distributed runtime runs it on the arena's views of its operands and result
                body += [f"{gen.materialize[i][0]}.copy_({gen.materialize[i][1]})"
                         for i in (self.names[ids[_vname(v)]] for v in op.operands) if i in gen.materialize]
                if threaded_off:
                    body.append("torch.set_num_threads(threads)")
                    threaded_off = False
                body.append(f"yield {len(self.comm_steps)}")
                self.comm_steps.append(st)
                continue
            if st.action == "alias":
                body.append("#    an alias of its operand's bytes: nothing runs")
                continue
            small = id(op) in gen.deferred or _small(op)     # deferred: a copy of what an earlier op computed
            if small != threaded_off:
                body.append(f"torch.set_num_threads({'1' if small else 'threads'})")
                threaded_off = small
            body += self._op_lines(gen, op, st, ids, impls)
            for i in st.writes:
                if T[i].name in self.capture:
                    body.append(f"if cap is not None: cap[{T[i].name!r}] = {self.names[i]}.clone()")
        for name, var in gen.scalars.items():
            body.insert(head, f"{var} = float({name})")
        body[head:head] = gen.head
        if threaded_off:
            body.append("torch.set_num_threads(threads)")
        outs = [t for t in T if t.output and not t.fused]
        if self.comm_steps:     # a generator of segments: the caller reads the outputs from the arena
            body.append("return")
        else:
            body.append("return {" + ", ".join(f"{t.name!r}: {self.names[t.id]}.clone()" for t in outs) + "}")
        return "def step(feed, cap, threads):\n" + "".join(f"    {ln}\n" for ln in body)

    def _op_lines(self, gen: _Generator, op, st, ids: dict, impls: dict) -> list:
        opdef = lookup(op.name)
        a = opdef.attrs_of(op)
        refs = {role: ref.name for role, ref in (op.attrs.get("params") or {}).items() if isinstance(ref, SymbolRef)}
        ins = [self.names[ids[_vname(v)]] for v in op.operands]
        ps = {role: self.names[ids["@" + n]] for role, n in refs.items()}
        outs = [self.names[i] for i in st.writes]
        emitter = EMITTERS.get(op.name)
        dense = all(gen.env[o].is_contiguous() for o in outs)
        if emitter is not None and dense and (st.action != "inplace" or op.name in INPLACE_SAFE):
            lines = emitter(Emit(gen, op, a, ins, outs, ps, ps if opdef.side_effects else {}, st.action == "inplace"))
            if lines is not None:
                gen.fast.append(layer_name(op))
                if id(op) in gen.deferred:     # the last reader of an earlier op's local frees it
                    local = gen.deferred.pop(id(op))[1]
                    if all(d[1] != local for d in gen.deferred.values()):
                        lines.append(f"del {local}")
                return lines
        gen.slow.append(layer_name(op))
        name = layer_name(op)
        fill = [f"{gen.materialize[i][0]}.copy_({gen.materialize[i][1]})" for i in ins if i in gen.materialize]
        fn = gen.bind(impls.get(op.name, opdef.reference), f"ref_{name}")
        pdict = gen.bind({r: gen.env[v] for r, v in ps.items()}, f"params_{name}")
        call = f"{fn}({gen.bind(a, f'attrs_{name}')}, [{', '.join(ins)}], {pdict})"
        if opdef.side_effects:      # the new values of the symbols it writes, into place
            lines = [f"for _k, _v in ({call} or {{}}).items():", f"    {pdict}[_k].copy_(_v)"]
        elif len(op.results) > 1:
            lines = [f"_y = {call}"] + [f"{o}.copy_(_y[{k}])" for k, o in enumerate(outs)]
        else:
            lines = [f"{outs[0]}.copy_({call})"]
        # a value the reference refuses at run time (an id outside a table): the error at the op's layer
        loc = gen.bind(op.loc, f"loc_{name}")
        return fill + ["try:"] + [f"    {ln}" for ln in lines] + ["except NetcError as _e:", f"    raise located(_e, {loc})"]

    def repack(self) -> None:
        """After parameters changed outside a step (set_params): the copies an inference step rearranged once."""
        for packed, view in self._packs:
            packed.copy_(view)

    def run(self, feed: dict) -> dict:
        """One step: `feed` (every input by name, checked) into place, then the schedule. Returns the outputs
        and the captured values by plan tensor name (copies)."""
        from ..ops.reference import computing_in
        if self.comm_steps:
            raise NetcError(f"'{self.net.attrs.get('sym_name')}' has communication ops: it runs in segments (CpuRank), "
                            f"with torch.distributed between them (netc run --workers K --target cpu)")
        cap: dict = {}
        threads = torch.get_num_threads()
        try:
            if self.slow:      # the references compute in f32 (a step of out= forms alone needs no setting)
                with computing_in(torch.float32):
                    out = self.fn(feed, cap, threads)
            else:
                out = self.fn(feed, cap, threads)
        finally:
            if torch.get_num_threads() != threads:    # a step stopped by an error between its small ops
                torch.set_num_threads(threads)
        out.update(cap)
        return out


def take(feed: dict, name: str, shape: tuple, strides: tuple, dtype) -> torch.Tensor:
    """An input the step reads where the caller holds it: the fed tensor itself where it has the planned shape,
    strides and dtype (nothing copied), else a copy in that layout."""
    x = feed[name]
    if x.dtype == dtype and tuple(x.shape) == shape and tuple(x.stride()) == strides:
        return x
    return torch.empty_strided(shape, strides, dtype=dtype).copy_(x)


def _drop_stand_ins(gen: _Generator, source: str) -> None:
    """The build-time stand-ins of the inputs the caller holds (and their views) out of the step's namespace: the step
    assigns every one it reads at its start (a name the step reads but does not assign would be a stale stand-in: an
    internal error, not a wrong result)."""
    assigned = set(re.findall(r"^    (\w+) = ", source, re.M))
    used = set(re.findall(r"\b\w+\b", source))
    stale = sorted(n for n in gen.external if n in used and n not in assigned)
    if stale:
        raise AssertionError(f"the CPU step reads the build-time stand-ins of inputs: {', '.join(stale)}")
    for n in gen.external:
        gen.env.pop(n, None)


def rank_plan(module, net):
    """The memory plan of a rank's program (split-workers) for the CPU step: every op its own step, the best
    schedule that keeps the communication ops in the program's order and a gradient bucket's all-reduces
    together (codegen.comm_order_problem), else the program's own order -- as codegen.plan_program plans it."""
    from ..codegen.compile import comm_order_problem
    from ..memory.model import PlanError
    from ..memory.plan import plan_memory
    try:
        over = overwritable(layers(net))
        plan = plan_memory(module, net, fusion="none", overwrite=over)
        if comm_order_problem(net, plan):
            plan = plan_memory(module, net, fusion="none", schedule="original", overwrite=over)
    except PlanError as e:
        raise NoArena(f"no memory plan for the CPU step: {e}") from None
    return plan


class CpuRank:
    """A rank's program (a network of a split-workers module, forward or training step) on the CPU target, as
    distributed.CompiledRank runs a compiled rank: its step generated once (CpuProgram), yielding at each
    communication op, so that segment k is the ops between communication op k-1 and k. What CompiledRank reads is
    InterpProgram's -- `segmented` (codegen.segment_manifest's section: segments, comms with the places of their
    operands and results, the outputs' places), `arena` and `regions`, run_segment(k, feed, capture),
    param_views() -- and `region_arenas`: the plan's constant and batch arenas are two uint8 tensors (a place's
    offset is from its region's tensor's start). Nothing is allocated per step but the generator."""

    def __init__(self, module, net, params: dict, impls: dict | None = None):
        plan = rank_plan(module, net)
        capture = sorted((net.attrs.get("gradients") or {}).values())    # --grads: taken only when asked
        self.program = prog = CpuProgram(module, net, params, impls, capture=capture, plan=plan)
        self.net, self.plan = net, plan
        # the plan's constant and batch arenas, each a tensor of its own (CompiledRank.view: region_arenas)
        self.region_arenas = {"constant": prog.arenas.arenas[0], "batch": prog.arenas.arenas[1]}
        self.arena, self.regions = prog.arenas.arenas[0], {"constant": 0, "batch": 0}
        self.segmented = self._segmented()
        self._gen, self._next, self._cap = None, 0, None

    def _place(self, t) -> dict:
        from ..memory.model import BATCH
        v = self.program.arenas.view(t)
        region = "batch" if t.cls == BATCH else "constant"
        return dict(name=t.name, region=region, offset=v.storage_offset() * v.element_size(),
                    shape=list(v.shape), strides=list(v.stride()), dtype=t.dtype)

    def _segmented(self) -> dict:
        ops = {layer_name(op): op for op in layers(self.net)}
        comm = {st.index for st in self.program.comm_steps}
        counts, n = [], 0
        for st in self.plan.steps:
            if st.index in comm:
                counts.append(n)
                n = 0
            elif st.action != "alias":
                n += 1
        counts.append(n)
        firsts = [sum(counts[:k]) for k in range(len(counts))]
        comms = []
        for k, st in enumerate(self.program.comm_steps):
            op = ops[st.layer]
            comms.append(dict(index=k, op=op.name, kind=op.name.split(".", 1)[1], name=layer_name(op), step=st.index,
                              attrs={a: v for a, v in op.attrs.items() if a != "name"},
                              operands=[self._place(self.plan.tensor(_vname(v))) for v in op.operands],
                              results=[self._place(self.plan.tensor(_vname(v))) for v in op.results]))
        return dict(program="training" if "gradients" in self.net.attrs else "forward", batch=self.plan.batch,
                    fixed_batch=True, comms=comms,
                    segments=[dict(index=k, first=f, launches=c) for k, (f, c) in enumerate(zip(firsts, counts))],
                    outputs=[self._place(t) for t in self.plan.tensors if t.output])

    def run_segment(self, k: int, feed: dict | None = None, capture=()) -> dict:
        """Segment k: the ops between communication op k-1 and k (segment 0 first copies `feed`, every input by
        name, the learning rate and seed included). Returns the values of `capture` (gradients) this segment
        computed, copies taken as they are computed."""
        from ..ops.reference import computing_in
        threads = torch.get_num_threads()
        if k == 0:
            if feed is None:
                raise NetcError("segment 0 takes the inputs")
            self._cap = {} if capture else None
            if self.program.comm_steps:
                self._gen = self.program.fn(feed, self._cap, threads)   # a generator: nothing runs yet
        elif self._gen is None or k != self._next:
            raise NetcError(f"segment {k} runs after segment {k - 1} of the same step")
        # a program without communication ops (a data-parallel forward) is one segment: its step a plain function
        go = (lambda: next(self._gen, None)) if self.program.comm_steps else \
            (lambda: self.program.fn(feed, self._cap, threads) and None)
        try:
            if self.program.slow:       # the references compute in f32 (as CpuProgram.run)
                with computing_in(torch.float32):
                    at = go()
            else:
                at = go()
        except BaseException:
            self._gen = None
            torch.set_num_threads(threads)      # a step stopped by an error between its small ops
            raise
        self._next = k + 1
        if at is None:
            self._gen = None
        return self._captured(capture)

    def _captured(self, capture) -> dict:
        got = self._cap or {}
        return {n: got.pop(n) for n in capture if n in got}

    def set_params(self, values: dict) -> None:
        from .executor import unknown_params
        unknown_params(values, self.program.params)
        for n, v in values.items():
            self.program.params[n].copy_(torch.as_tensor(v).reshape(self.program.params[n].shape))
        self.program.repack()

    def param_views(self) -> dict:
        """Every parameter and state tensor by name, a view of the arena (updates show through)."""
        return dict(self.program.params)


SMALL_FLOPS, SMALL_ELEMENTS = 4e6, 1 << 16


def _small(op) -> bool:
    """Whether an op is small enough to run on one thread: below SMALL_FLOPS and SMALL_ELEMENTS in every operand
    and result. Waking a second thread costs more than it saves there, and on a loaded machine a parallel
    region waits for a descheduled thread (milliseconds for a microsecond op), which the step then avoids."""
    d = lookup(op.name)
    shapes = [tuple(v.type.shape) for v in list(op.operands) + list(op.results)]
    elements = max((_numel(s) for s in shapes), default=0)
    try:
        c = d.cost(d.attrs_of(op), [tuple(v.type.shape) for v in op.operands],
                   tuple(op.results[0].type.shape) if op.results else (), False)
        flops = c.flops_fwd or (c.flops_bwd_data + c.flops_bwd_filter)
    except Exception:       # noqa: BLE001  (a cost rule that does not take this case: count it large)
        return False
    return flops < SMALL_FLOPS and elements < SMALL_ELEMENTS


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _vname(v) -> str:
    n = layer_name(v.owner)
    return n if len(v.owner.results) == 1 else f"{n}#{v.index}"
