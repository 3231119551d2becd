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
  their constant offsets once; inputs (floats, or integer labels) are copied to their planned
  places before every run and outputs read from theirs. The arena above the parameters is
  poisoned with 0xFF bytes (NaN in f32, f16 and bf16) before every run, so a value the schedule
  never writes shows up as NaN -- activations without a batch axis (a loss) included.

Tiles: blocks="cuda" (default) lowers with exactly the .so's tile sizes; blocks="large" pins tiles
as large as the problem (codegen/lower.py large_tiles): the same kernels, 10-100x faster under the
interpreter, whose cost is per program and loop iteration. Every tl.dot of the interpreter is an
np.matmul of one tile; runs hold NumPy's OpenBLAS to one thread (one_blas_thread), as its threads
only stall on tiles that small.

The interpreter mode is fixed when netc.kernels' modules are imported (they decorate their
kernels then). Choice: no subprocess. ensure_interpreter() sets TRITON_INTERPRET=1 if
netc.kernels has not been imported yet, and raises a clear NetcError if it already was imported
in compiled mode (e.g. after `netc compile --target cuda` in the same process): run in a fresh
process, or set TRITON_INTERPRET=1 before anything imports netc.kernels.
"""
from __future__ import annotations

import contextlib
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


_BLAS_THREADS = []


def _openblas():
    """(get, set) of NumPy's bundled OpenBLAS thread count, or None (another BLAS, or none found)."""
    if not _BLAS_THREADS:
        found = None
        try:
            import ctypes
            import glob
            import numpy
            here = os.path.dirname(numpy.__file__)
            for lib in sorted(glob.glob(os.path.join(here, os.pardir, "numpy.libs", "*openblas*"))
                              + glob.glob(os.path.join(here, ".dylibs", "*openblas*"))):
                h = ctypes.CDLL(lib)   # already loaded by NumPy: the same handle
                for get, set_ in (("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
                                  ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
                                  ("openblas_get_num_threads", "openblas_set_num_threads")):
                    if hasattr(h, get) and hasattr(h, set_):
                        found = (getattr(h, get), getattr(h, set_))
                        break
                if found:
                    break
        except OSError:
            found = None
        _BLAS_THREADS.append(found)
    return _BLAS_THREADS[0]


@contextlib.contextmanager
def one_blas_thread():
    """Run the block with NumPy's OpenBLAS on one thread. Triton's interpreter computes every
    tl.dot as np.matmul of one tile; OpenBLAS's threads only add overhead on tiles that small, and
    on a busy machine their spin-waits stall each call (measured: a 16x512x512 tile 57 ms with 2
    threads on 2 loaded cores, 0.34 ms with 1). The previous count is restored afterwards."""
    fns = _openblas()
    if fns is None:
        yield
        return
    get, set_ = fns
    before = get()
    set_(1)
    try:
        yield
    finally:
        set_(before)


def prepare(module: Module, network=None, phase: str = "test", dtype: str | None = None, tf32: bool = False):
    """Run the default pipeline (+ set-dtype when dtype or tf32 is given: 'f32', 'bf16', 'f16'/'fp16')
    + fuse on `module` (skipping work already done) and plan its memory for inference.
    Returns (network op, MemoryPlan)."""
    from ..memory.plan import plan_memory
    from ..passes.manager import DEFAULT_PIPELINE, PassContext, PassManager
    from .reference import _network
    ctx = PassContext(phase=phase)
    names = list(DEFAULT_PIPELINE)
    if dtype is not None or tf32:
        ctx.options["set_dtype"] = {"dtype": dtype, "tf32": tf32}
        names.append("set-dtype")
    PassManager(names + ["fuse"]).run(module, ctx)
    if ctx.diag.has_errors():
        raise NetcError(ctx.diag.diagnostics[:])
    net = _network(module, network)
    return net, plan_memory(module, net, mode="inference")


class InterpProgram:
    """One network lowered like the .so, runnable on the CPU through Triton's interpreter."""

    def __init__(self, module: Module, network=None, batch: int | None = None, params: dict | None = None,
                 seed: int = 0, phase: str = "test", dtype: str | None = None, tf32: bool = False,
                 blocks: str = "cuda"):
        ensure_interpreter()
        from ..codegen import _const_region
        from ..codegen.lower import lower_network
        from ..memory.plan import BATCH
        from .reference import module_params
        self.module = module
        self.net, self.plan = prepare(module, network, phase, dtype, tf32)
        plan = self.plan
        from ..codegen import _network_io
        _network_io(self.net, plan)      # what the .so accepts: batch-sized inputs
        self.lowered = lower_network(module, self.net, plan, blocks=blocks)
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
            raise NetcError(f"tensor '{t.name}' has dtype {t.dtype}; the interpreter target supports f32, f16, bf16 "
                            f"(and i32, i64, i8 for labels)")
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
        from ..memory.plan import CONSTANT
        from .reference import _name, network_inputs, network_outputs
        b = self.batch
        # poison everything but the parameters (activations without a batch axis, such as a loss,
        # live in the constant region above them): unwritten values read as NaN
        self.arena[self.plan.arenas[CONSTANT].fixed:].fill_(0xFF)
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
        with one_blas_thread():
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
        from ..passes.set_dtype import precision_of
        return dict(target="interp", network=self.plan.network, batch=self.plan.batch,
                    precision=precision_of(self.net),
                    inputs={t.name: t.dtype for t in (self.plan.tensors[i] for i in self.plan.inputs)},
                    outputs={t.name: t.dtype for t in self.plan.tensors if t.output},
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


def split_inputs(module: Module, networks: list, inputs: dict | None) -> dict:
    """Given inputs by name for the networks named in `networks`: {network: {input: tensor} or None
    (random)}. As run_module: 'x' feeds every listed network with an input 'x', 'net.x' only that
    one; a name no listed network has is an error."""
    from .reference import _name, _network, network_inputs
    per = {n: (None if inputs is None else {}) for n in networks}
    for k, t in (inputs or {}).items():
        hit = False
        for n in networks:
            local = k[len(n) + 1:] if k.startswith(n + ".") else k
            if local in [_name(op) for op in network_inputs(_network(module, n))]:
                per[n][local] = t
                hit = True
        if not hit:
            every = [f"{n}.{_name(op)}" if len(networks) > 1 else _name(op)
                     for n in networks for op in network_inputs(_network(module, n))]
            raise NetcError(f"no network has an input '{k}' (inputs: {', '.join(every)})")
    return per


def run_interp(module: Module, inputs: dict | None = None, params: dict | None = None, batch: int | None = None,
               seed: int = 0, network=None, dtype: str | None = None, tf32: bool = False) -> dict:
    """Run one network through the interpreter target, compiled in `dtype` ('f32', 'bf16', 'f16';
    None: as declared) with TF32 products if tf32. Missing inputs/parameters are random exactly
    as in run_reference (same seed -> same values), so the two can be compared."""
    prog = InterpProgram(module, network, batch, params, seed, dtype=dtype, tf32=tf32)
    if inputs is None:
        inputs = default_inputs(module, prog.net, seed, prog.batch)
    return prog.run(inputs)


