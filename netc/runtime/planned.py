"""The planned executor: the reference semantics, every tensor stored where the memory plan puts it.

Brainstorm's stale-read test for a static memory plan. Each op runs with its OpDef's reference()
exactly as the reference executor runs it (netc.runtime.reference.execute), but no value lives in
a Python dict: every tensor is read from and written to ONE byte arena per class (constant, then
batch) at the plan's offsets -- a view of the arena with the plan's strides, so a channel-concat
slice is a strided view of its concatenation's buffer, as in the interpreter target
(netc/runtime/interp.py, InterpProgram.view). Before every step (every run) each byte that is
neither a network input nor a parameter or state is filled with garbage -- f32 NaN and
3.4e38 words, alternating, shifted each run -- so a value the plan lets something overwrite while
it is still needed, or a read of bytes nobody wrote, shows up as NaN or a huge number (or an
out-of-range label) in the results instead of silently reusing last step's value.

The steps are the plan's: a fused step's members pass their fused intermediates from one to the
next outside memory (they have no bytes), and only the step's results are stored, after every
member has read its operands (so an in-place step reads its operand before overwriting it); an
"alias" step (a view, an identity, a zero-copy concatenation) stores nothing at all: its output's
bytes must already hold the value; a "concat-copy" step stores the whole concatenation (its
zero-copy slices rewritten with what they already hold). Ops with side effects (optimizer
updates, running statistics) write the new values of their parameter and state symbols into the
constant arena in place.

Operands are read as contiguous copies and parameters as contiguous copies too, so every op sees
exactly what the reference executor gives it: at the same float dtype, the results are identical
(bit for bit), which is what tests/test_training_memory.py asserts over two training steps.
Values go in and out byte for byte (uint8 views of the arena), so a plan made with an alignment
below an element's size (an i64 seed at a multiple of 4) runs too.

    prog = PlannedProgram(module, net, plan)            # plan: plan_memory(module, net)
    prog.set_params(module_params(module, seed=0, dtype=torch.float32))
    named = prog.run(feed)                              # values by plan tensor name
    trainer = PlannedTrainer(module, seed=0)            # ReferenceTrainer's API, on the arenas
"""
from __future__ import annotations

import torch

from ..diagnostics import NetcError
from ..ir.core import Module, Operation, SymbolRef
from ..ir.query import layer_name, layers, network_inputs
from ..memory.plan import plan_memory
from ..memory.model import BATCH, CONSTANT, TIME, MemoryPlan, row_major
from ..memory.verify import check_plan
from ..ops import lookup
from .reference import INT_DTYPES, feed_tensor, network_of, module_params, random_input
from .train import ReferenceTrainer

TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64,
                "i32": torch.int32, "i64": torch.int64, "i8": torch.int8}
# the garbage: f32 NaN (all ones: also -1 as an integer, an invalid label) and 0x7F7FFFFF
# (3.4e38, the largest f32; 2139095039 as an integer)
_GARBAGE = (-1, 0x7F7FFFFF)


class PlannedProgram:
    """One network run op by op with reference semantics on arenas laid out by `plan`."""

    def __init__(self, module: Module, net: Operation, plan: MemoryPlan, dtype=torch.float32):
        if plan.arenas[TIME].size:
            raise NetcError("the planned executor has no time-sized (recurrent) arena")
        self.module, self.net, self.plan, self.dtype = module, net, plan, dtype
        self.ops = {layer_name(op): op for op in layers(net)}
        self.ids = {t.name: t.id for t in plan.tensors}
        for t in plan.tensors:
            if t.dtype not in TORCH_DTYPES:
                raise NetcError(f"tensor '{t.name}' has dtype {t.dtype}, which the planned executor does not store")
        self.arenas = [torch.zeros(-(-max(n, 8) // 8) * 8, dtype=torch.uint8)
                       for n in plan.arena_bytes()[:2]]
        self._typed: dict = {}
        self.runs = 0

    # ------------------------------------------------------------------------------ storage
    def _place(self, t) -> tuple:
        """(byte address in its class's arena, shape, element strides) of plan tensor t."""
        if t.fused:
            raise AssertionError(f"'{t.name}' is fused: it has no bytes")
        buf = self.plan.buffers[t.buffer]
        fshape = tuple(t.feature_shape)
        fstr = tuple(t.strides) if t.strides is not None else row_major(fshape)
        if t.cls == BATCH:
            b, isz = self.plan.batch, t.itemsize
            if buf.size % isz:
                raise AssertionError(f"'{t.name}': its buffer's per-sample size is no multiple of its element size")
            return buf.offset * b + t.offset, (b,) + fshape, (buf.size // isz,) + fstr
        return buf.offset + t.offset, fshape, fstr

    def view(self, t) -> torch.Tensor:
        """The arena view of plan tensor t (TensorPlan) at the compiled batch, with its strides, in the IR value's
        shape (a `flat` tensor's [T*B, ...] rows) (its address must be a multiple of its element size: see
        read/write otherwise)."""
        addr, shape, strides = self._place(t)
        dt, isz = TORCH_DTYPES[t.dtype], t.itemsize
        if self.plan.buffers[t.buffer].external:     # an input the caller holds: a stand-in of its layout
            return torch.empty_strided(shape, strides, dtype=dt)
        if addr % isz:
            raise AssertionError(f"'{t.name}' is not aligned to its element size in the arena")
        key = (t.cls, dt)
        if key not in self._typed:
            self._typed[key] = self.arenas[t.cls].view(dt)
        typed = self._typed[key]     # as_strided's offset counts from the storage's start, not the arena's
        v = typed.as_strided(shape, strides, typed.storage_offset() + addr // isz)
        if t.flat:      # the IR's [T*B, ...] rows of a [T, B, ...] placement (memory/graph.py)
            from ..codegen.lower import flat_rows
            return flat_rows(v, t.name)
        return v

    def _bytes(self, t) -> torch.Tensor:
        """t's bytes as a uint8 view [*shape, itemsize]: any alignment (a plan made with an
        alignment below the element size places an i64 seed at a multiple of 4)."""
        addr, shape, strides = self._place(t)
        isz = t.itemsize
        arena = self.arenas[t.cls]
        return arena.as_strided(shape + (isz,), tuple(s * isz for s in strides) + (1,), arena.storage_offset() + addr)

    def read(self, t) -> torch.Tensor:
        """A contiguous copy of t's value as the arena holds it."""
        raw = self._bytes(t).clone(memory_format=torch.contiguous_format)
        return raw.reshape(-1).view(TORCH_DTYPES[t.dtype]).reshape(raw.shape[:-1])

    def write(self, t, value: torch.Tensor) -> None:
        dst = self._bytes(t)
        flat = value.to(TORCH_DTYPES[t.dtype]).contiguous().reshape(-1)    # stride 1, whatever the shape
        dst.copy_(flat.view(torch.uint8).reshape(dst.shape))

    def poison(self) -> None:
        """Garbage into every byte but the parameters and state (the bottom of the constant arena)."""
        k = self.runs % 2
        words = torch.tensor([_GARBAGE[k], _GARBAGE[1 - k]], dtype=torch.int32).view(torch.uint8)  # 8 bytes
        for cls, arena in enumerate(self.arenas):
            start = self.plan.arenas[CONSTANT].fixed if cls == CONSTANT else 0
            pat = words.repeat(arena.numel() // 8 + 1)[:arena.numel()]     # by absolute address
            arena[start:] = pat[start:]

    def set_params(self, ptensors: dict) -> None:
        """Parameter and state values by symbol name into their planned places."""
        for t in self.plan.tensors:
            if t.kind != "param" or t.alias == "share":
                continue
            name = t.name[1:]
            if name not in ptensors:
                raise NetcError(f"no value for parameter '{name}'")
            self.write(t, ptensors[name].reshape(self._place(t)[1]))

    def param_views(self) -> dict:
        """Every parameter and state symbol as a view of its bytes (updates show through), or None
        when one is not aligned to its element size (then param_values() reads them)."""
        ts = [t for t in self.plan.tensors if t.kind == "param"]
        if any(self._place(t)[0] % t.itemsize for t in ts):
            return None
        return {t.name[1:]: self.view(t) for t in ts}

    def param_values(self) -> dict:
        """Every parameter and state symbol's current value (copies)."""
        return {t.name[1:]: self.read(t) for t in self.plan.tensors if t.kind == "param"}

    def get_params(self) -> dict:          # executor.Executor
        return self.param_values()

    # ------------------------------------------------------------------------------ running
    def run(self, feed: dict) -> dict:
        """One run: garbage everywhere but the parameters, `feed` (input tensors by name) into
        place, then every step. Returns each tensor's value as its last reader read it from memory
        (a gradient: as its update read it), network results as they are at the end; by plan
        tensor name (the i-th result of a multi-result op: 'name#i')."""
        plan, T = self.plan, self.plan.tensors
        self.poison()
        self.runs += 1
        for i in plan.inputs:
            t = T[i]
            if t.name not in feed:
                raise NetcError(f"missing input '{t.name}'")
            x = torch.as_tensor(feed[t.name])
            shape = self._place(t)[1]
            if tuple(x.shape) != tuple(shape):
                raise NetcError(f"input '{t.name}' has shape {list(x.shape)}, expected {list(shape)}")
            self.write(t, x)
        seen: dict[str, torch.Tensor] = {}
        for st in plan.steps:
            if st.action == "alias":
                continue         # its output's bytes already hold the value: nothing runs
            local: dict[int, torch.Tensor] = {}      # fused intermediates of this step

            def read(i):
                if i in local:
                    return local[i]
                x = self.read(T[i])
                if T[i].kind != "param":
                    seen[T[i].name] = x
                return x

            results: list = []
            for mb in st.members:
                op = self.ops[mb.layer]
                opdef = lookup(op.name)
                n = len(op.operands)
                ins = [read(i) for i in mb.reads[:n]]
                refs = {role: ref for role, ref in (op.attrs.get("params") or {}).items()
                        if isinstance(ref, SymbolRef)}
                ps = {role: read(self.ids["@" + ref.name]) for role, ref in refs.items()}
                y = opdef.reference(opdef.attrs_of(op), ins, ps)
                if opdef.side_effects:
                    for role, v in (y or {}).items():
                        results.append((self.ids["@" + refs[role].name], v))
                    continue
                ys = list(y) if len(op.results) > 1 else [y]
                for i, v in zip(mb.writes, ys):
                    if v.is_floating_point():
                        v = v.to(self.dtype)
                    if T[i].fused:
                        local[i] = v
                    else:
                        results.append((i, v))
            # every member has read its operands: now the step's results go to memory
            for i, v in results:
                self.write(T[i], v)
        for t in T:
            if t.output and not t.fused:
                seen[t.name] = self.read(t)
        return seen


def plan_training_program(module: Module, network=None, **plan_options) -> tuple:
    """(network op, verified plan) of a training program (or any network) of a shape-inferred,
    fused module."""
    net = network_of(module, network)
    plan = plan_memory(module, net, **plan_options)
    check_plan(plan, module, net)
    return net, plan


class PlannedTrainer(ReferenceTrainer):
    """ReferenceTrainer's API (feed, step, losses, gradients, params), each step run on the
    planned arenas: parameters and state live in the constant arena (`params` are views of it,
    or copies read after every step where the plan's alignment is below an element's size)."""

    def __init__(self, module: Module, network=None, params: dict | None = None, seed: int = 0,
                 dtype=torch.float32, plan: MemoryPlan | None = None, **plan_options):
        super().__init__(module, network, params, seed, dtype)
        if plan is None:
            _, plan = plan_training_program(module, self.net, **plan_options)
        self.plan = plan
        self.program = PlannedProgram(module, self.net, plan, dtype)
        self.program.set_params(self.params)
        self._views = self.program.param_views()
        self.params = self._views if self._views is not None else self.program.param_values()

    def set_params(self, values: dict) -> None:
        super().set_params(values)
        if self._views is None:              # copies: into the arena too
            self.program.set_params(self.params)

    def step(self, inputs: dict | None = None, lr: float | None = None, step_seed: int | None = None) -> dict:
        named = self.program.run(self.feed(inputs, lr, step_seed))
        self.steps += 1
        if self._views is None:
            self.params = self.program.param_values()
        return named


def run_planned(module: Module, inputs: dict | None = None, params: dict | None = None, network=None,
                seed: int = 0, dtype=torch.float32, plan: MemoryPlan | None = None) -> dict:
    """run_reference's contract (random inputs and parameters when not given, seeded alike) on
    the planned arenas of one network; returns every value by plan tensor name."""
    net = network_of(module, network)
    if plan is None:
        net, plan = plan_training_program(module, net)
    used = {ref.name for op in layers(net) for ref in (op.attrs.get("params") or {}).values()
            if isinstance(ref, SymbolRef)}
    prog = PlannedProgram(module, net, plan, dtype)
    prog.set_params(module_params(module, params, seed, dtype, names=used))
    feed = {}
    for op in network_inputs(net):
        v, name = op.results[0], layer_name(op)
        want = INT_DTYPES.get(v.type.dtype, dtype)
        feed[name] = (feed_tensor(inputs[name], v.type.shape, want, f"input '{name}'", "cpu") if inputs is not None
                      else random_input(net, op, seed, dtype))
    return prog.run(feed)
