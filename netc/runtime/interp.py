"""The interpreter target: the compiled .so's kernels, schedule and memory plan, run on the CPU
through Triton's interpreter (TRITON_INTERPRET=1) and checked against the reference executor.

InterpProgram lowers the network exactly as `netc compile --target cuda` does
(codegen/lower.py: lower_network -> Launch recipes), then plays the C launcher's part in Python:

* ONE torch uint8 arena on the CPU: the constant region (codegen's _const_region: the constant
  arena rounded up to 256 bytes) and then the batch arena at the requested batch b
  (plan.arenas[BATCH].size * b bytes), exactly as netc_create lays out the device arena;
* every pointer argument is base[region] + coeff * b + const (memory/plan.py: a batch buffer
  sits at offset*b, sample s at offset*b + s*size, plus the tensor's offset), passed to the
  kernel as a one-element view of the arena at that address (the interpreter dereferences raw
  addresses, so kernels reach the whole tensor, strided channel-concat slices included);
* integer arguments are coeff * b + const, the grid's first axis cdiv(rows * b, block) * rep;
* parameters (by `netc.param` sym_name, random ones as run_reference draws them) are copied to
  their constant offsets once; inputs are copied to their planned places before every run and
  outputs read from theirs. The batch region is poisoned with 0xFF bytes (NaN in f32, f16 and
  bf16) before every run, so a value the schedule never writes shows up as NaN.

The interpreter mode is fixed when netc.kernels' modules are imported (they decorate their
kernels then). Choice: no subprocess. ensure_interpreter() sets TRITON_INTERPRET=1 if
netc.kernels has not been imported yet, and raises a clear NetcError if it already was imported
in compiled mode (e.g. after `netc compile --target cuda` in the same process): run in a fresh
process, or set TRITON_INTERPRET=1 before anything imports netc.kernels.
"""
from __future__ import annotations

import os
import sys

import torch

from ..diagnostics import NetcError
from ..ir.core import Module

_KERNEL_MODULES = ("netc.kernels.common", "netc.kernels.conv", "netc.kernels.gemm", "netc.kernels.pool",
                   "netc.kernels.lrn", "netc.kernels.softmax", "netc.kernels.elementwise")


def ensure_interpreter() -> None:
    """Make netc.kernels run under Triton's interpreter, or raise if that is no longer possible."""
    common = sys.modules.get("netc.kernels.common")
    if common is None and not any(m in sys.modules for m in _KERNEL_MODULES):
        os.environ["TRITON_INTERPRET"] = "1"
        from ..kernels import common  # noqa: F811  (decorates the shared helpers in interpreter mode)
    if not bool(common.INTERPRETING):
        raise NetcError("the interpreter target needs netc.kernels imported with TRITON_INTERPRET=1, but this "
                        "process already imported them compiled (for a GPU); run it in a fresh process, or set "
                        "TRITON_INTERPRET=1 before anything imports netc.kernels")


def prepare(module: Module, network=None, phase: str = "test"):
    """Run the default pipeline + fuse on `module` (skipping work already done) and plan its memory
    for inference. Returns (network op, MemoryPlan)."""
    from ..memory.plan import plan_memory
    from ..passes.manager import DEFAULT_PIPELINE, PassContext, PassManager
    from .reference import _network
    ctx = PassContext(phase=phase)
    PassManager(DEFAULT_PIPELINE + ["fuse"]).run(module, ctx)
    if ctx.diag.has_errors():
        raise NetcError(ctx.diag.diagnostics[:])
    net = _network(module, network)
    return net, plan_memory(module, net, mode="inference")


class InterpProgram:
    """One network lowered like the .so, runnable on the CPU through Triton's interpreter."""

    def __init__(self, module: Module, network=None, batch: int | None = None, params: dict | None = None,
                 seed: int = 0, phase: str = "test"):
        ensure_interpreter()
        from ..codegen import _const_region
        from ..codegen.lower import lower_network
        from ..memory.plan import BATCH
        from .reference import module_params
        self.module = module
        self.net, self.plan = prepare(module, network, phase)
        plan = self.plan
        self.lowered = lower_network(module, self.net, plan)
        self.launches = self.lowered.launches
        self.batch = plan.batch if batch is None else int(batch)
        if not 1 <= self.batch <= plan.batch:
            raise NetcError(f"batch {self.batch} is outside 1..{plan.batch} (the planned batch)")
        self.const_bytes = _const_region(plan)
        self.batch_bytes = plan.arenas[BATCH].size * self.batch
        total = self.const_bytes + self.batch_bytes
        self.arena = torch.empty((total + 7) // 8 * 8, dtype=torch.uint8)
        self.arena.fill_(0xFF)
        self._typed = {}
        self.base = {1: 0, 2: self.const_bytes}   # lower.CONST_ARENA, lower.BATCH_ARENA
        used = {t.name[1:] for t in plan.tensors if t.kind == "param"}
        self.set_params(module_params(self.module, params, seed, torch.float64, names=used))

    # ----------------------------------------------------------------------------- views
    def typed(self, dt) -> torch.Tensor:
        if dt not in self._typed:
            self._typed[dt] = self.arena.view(dt)
        return self._typed[dt]

    def view(self, t, batch: int | None = None) -> torch.Tensor:
        """The arena view of plan tensor t (a TensorPlan) at the run's batch, with its planned
        strides (a channel-concat slice is strided)."""
        from ..codegen.lower import TORCH_DTYPES
        from ..memory.plan import BATCH, CONSTANT, row_major
        b = self.batch if batch is None else batch
        dt = TORCH_DTYPES.get(t.dtype)
        if dt is None:
            raise NetcError(f"tensor '{t.name}' has dtype {t.dtype}; the interpreter target supports f32, f16, bf16")
        buf = self.plan.buffers[t.buffer]
        fshape = tuple(t.feature_shape)
        fstr = tuple(t.strides) if t.strides is not None else row_major(fshape)
        isz = t.itemsize
        if t.cls == BATCH:
            addr = self.const_bytes + buf.offset * b + t.offset
            shape, strides = (b,) + fshape, (buf.size // isz,) + fstr
        elif t.cls == CONSTANT:
            addr = buf.offset + t.offset
            shape, strides = fshape, fstr
        else:
            raise NetcError(f"tensor '{t.name}' is time-sized; the interpreter target has no recurrent ops")
        assert addr % isz == 0, (t.name, addr)
        return self.typed(dt).as_strided(shape, strides, addr // isz)

    # ----------------------------------------------------------------------------- data
    def set_params(self, ptensors: dict) -> None:
        for t in self.plan.tensors:
            if t.kind != "param" or t.alias == "share":
                continue
            name = t.name[1:]
            if name not in ptensors:
                raise NetcError(f"no value for parameter '{name}'")
            v = self.view(t)
            v.copy_(ptensors[name].reshape(v.shape).to(v.dtype))

    def _arg_ptr(self, a, v):
        if a.region == 0:                 # NULL: an absent optional operand, never dereferenced
            return torch.empty(1, dtype=v.dtype)
        addr = self.base[a.region] + a.coeff * self.batch + a.const
        isz = v.element_size()
        assert addr % isz == 0 and 0 <= addr < self.arena.numel(), addr
        return self.typed(v.dtype)[addr // isz: addr // isz + 1]

    def run(self, inputs: dict) -> dict:
        """Inputs by name ([batch, ...]); returns the network outputs by layer name (fresh tensors)."""
        from .reference import _name, network_inputs, network_outputs
        b = self.batch
        self.arena[self.const_bytes:].fill_(0xFF)          # poison: unwritten values read as NaN
        for op in network_inputs(self.net):
            name = _name(op)
            if name not in inputs:
                raise NetcError(f"missing input '{name}'")
            v = self.view(self.plan.tensor(name))
            x = torch.as_tensor(inputs[name])
            if tuple(x.shape) != tuple(v.shape):
                raise NetcError(f"input '{name}' has shape {list(x.shape)}, expected {list(v.shape)}")
            v.copy_(x.to(v.dtype))
        cd = lambda p, q: -(-p // q)                        # noqa: E731
        for L in self.launches:
            c = L.call
            args = []
            for a, v in zip(L.args, c.args):
                if a.kind == "ptr":
                    args.append(self._arg_ptr(a, v))
                elif a.kind == "fp32":
                    args.append(a.fval)
                else:
                    args.append(a.coeff * b + a.const)
            (rows, block, rep), g1, g2 = L.grid
            grid = (cd(rows * b, block) * rep, g1, g2)
            c.kernel[grid](*args, **c.constexprs, **c.options)
        return {_name(op): self.view(self.plan.tensor(_name(op))).clone() for op in network_outputs(self.net)}

    def manifest(self) -> dict:
        from ..memory.plan import BATCH
        return dict(target="interp", network=self.plan.network, batch=self.plan.batch,
                    memory=dict(self.plan.summary(), constant_bytes=self.const_bytes,
                                batch_bytes_per_sample=self.plan.arenas[BATCH].size,
                                arena_bytes=self.const_bytes + self.plan.arenas[BATCH].size * self.plan.batch),
                    schedule=[dict(step=L.step, group=L.group, layers=L.layers, kernel=L.call.kernel.__name__,
                                   constexprs={k: list(v) if isinstance(v, tuple) else v
                                               for k, v in L.call.constexprs.items()}) for L in self.launches],
                    splits=self.lowered.splits)


def default_inputs(module: Module, net, seed: int = 0, batch: int | None = None) -> dict:
    """run_reference's random inputs (float64, seeded per name), cut to `batch` samples."""
    from .reference import _name, network_inputs, random_input
    out = {}
    for op in network_inputs(net):
        x = random_input(net, op, seed)
        out[_name(op)] = x if batch is None else x[:batch]
    return out


def run_interp(module: Module, inputs: dict | None = None, params: dict | None = None, batch: int | None = None,
               seed: int = 0, network=None) -> dict:
    """Run one network through the interpreter target. Missing inputs/parameters are random exactly
    as in run_reference (same seed -> same values), so the two can be compared."""
    prog = InterpProgram(module, network, batch, params, seed)
    if inputs is None:
        inputs = default_inputs(module, prog.net, seed, prog.batch)
    return prog.run(inputs)
