"""The interpreter target: the compiled .so's kernels, schedule and memory plan, run on the CPU
through Triton's interpreter (TRITON_INTERPRET=1) and checked against the reference executor.

InterpProgram lowers the network exactly as `netc compile --target cuda` does
(codegen/lower.py: lower_network -> Launch recipes), then plays the C launcher's part in Python:

* ONE torch uint8 arena on the CPU: the constant region (codegen's const_region: the constant
  arena rounded up to 256 bytes) and then the batch arena at the requested batch b
  (plan.arenas[BATCH].size * b bytes), exactly as netc_create lays out the device arena, then the
  lowering's embedded data (an update's chunk table) and the workspace of two-stage reductions;
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

Training (InterpTrainer): a training program (the backward and optimizer passes' IR) is fused and
planned in training mode and lowered to the kernels `netc compile --train` puts in the .so's
netc_train_step; each step feeds the data inputs, the learning rate and the dropout seed, runs
every launch (gradients, optimizer updates writing the parameters and state in place) and returns
the losses and every parameter's gradient as its update read it. compare_step checks a step
against the reference executor's from the same state (`netc run --train --target interp --compare`).

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
from .train import ReferenceTrainer

_KERNEL_MODULES = ("netc.kernels.common", "netc.kernels.conv", "netc.kernels.gemm", "netc.kernels.pool",
                   "netc.kernels.lrn", "netc.kernels.softmax", "netc.kernels.elementwise")


def _triton_compiled_mode() -> bool:
    """Whether Triton itself was imported without its interpreter: its standard library's @jit functions (the
    reductions' combine functions) were then decorated for the compiler, and an interpreted kernel that calls
    one fails ("Cannot call @triton.jit'd outside of the scope of a kernel")."""
    standard = sys.modules.get("triton.language.standard")
    combine = getattr(standard, "_sum_combine", None)
    return combine is not None and type(combine).__name__ != "InterpretedFunction"


def ensure_interpreter() -> None:
    """Make netc.kernels run under Triton's interpreter, or raise if that is no longer possible."""
    common = sys.modules.get("netc.kernels.common")
    if common is None and not any(m in sys.modules for m in _KERNEL_MODULES):
        if _triton_compiled_mode():
            raise NetcError("the interpreter target needs Triton imported with TRITON_INTERPRET=1, but this process "
                            "already imported triton without it; run it in a fresh process, or set "
                            "TRITON_INTERPRET=1 before anything imports triton")
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


def prepare(module: Module, network=None, phase: str = "test", dtype: str | None = None, tf32: bool | str = False):
    """Run the default pipeline (+ set-dtype when dtype or tf32 is given: 'f32', 'bf16', 'f16'/'fp16'; tf32
    True for TF32 products, "tf32x3" for three TF32 products each)
    + fuse on `module` (skipping work already done) and plan its memory for inference.
    Returns (network op, MemoryPlan)."""
    from ..memory.plan import plan_memory
    from ..pipelines import Options, Precision, compile
    from .reference import network_of
    precision = Precision(dtype, tf32 is True, tf32 == "tf32x3") if dtype is not None or tf32 else None
    ctx = compile(module, Options(phase=phase, precision=precision))
    if ctx.diag.has_errors():
        raise NetcError(ctx.diag.diagnostics[:])
    net = network_of(module, network)
    return net, plan_memory(module, net, mode="inference")


def prepare_training(module: Module, network=None):
    """(network op, verified MemoryPlan) of a training program (the backward and optimizer passes
    have run on `module`), fused and planned in training mode, as `netc compile --train` does."""
    from ..memory.plan import plan_memory
    from ..memory.verify import check_plan
    from ..pipelines import fuse
    from .reference import network_of
    ctx = fuse(module, "train")
    if ctx.diag.has_errors():
        raise NetcError(ctx.diag.diagnostics[:])
    net = network_of(module, network)
    if "gradients" not in net.attrs:
        raise NetcError(f"network '{net.attrs.get('sym_name')}' is not a training program (run the backward pass "
                        f"first: --train)")
    plan = plan_memory(module, net, mode="training")
    check_plan(plan, module, net)
    return net, plan


def prepare_rank(module: Module, network, training: bool = False):
    """(network op, verified MemoryPlan) of one rank's program of a split-workers module (forward, or
    a training step), fused and planned as `netc compile --workers` plans it (codegen.plan_program:
    its communication ops in the program's order)."""
    from ..codegen import plan_program
    from ..memory.verify import check_plan
    from ..pipelines import fuse
    from .reference import network_of
    ctx = fuse(module, "train" if training else "test")
    if ctx.diag.has_errors():
        raise NetcError(ctx.diag.diagnostics[:])
    net = network_of(module, network)
    if training and "gradients" not in net.attrs:
        raise NetcError(f"network '{net.attrs.get('sym_name')}' is not a training program")
    plan = plan_program(module, net, mode="training" if training else "inference")
    check_plan(plan, module, net)
    return net, plan


def check_arena(total: int, plan, net) -> None:
    """The arena the interpreter allocates and fills must fit in half this machine's memory (the
    parameters are drawn beside it in float64): a network whose tensors do not (a dimension of 2^31
    in a file) is the user's error, at the layer of its largest tensor, not an allocator's failure."""
    try:
        phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        phys = 1 << 40
    if total <= phys // 2:
        return
    from ..memory.model import CONSTANT
    big = max(plan.tensors, key=lambda t: t.size * (1 if t.cls == CONSTANT else plan.batch))
    layer = None
    for op in net.regions[0].ops:
        refs = op.attrs.get("params") or {}
        if op.attrs.get("name") == big.name or any(getattr(r, "name", None) == big.name[1:] for r in refs.values()):
            layer = op
            break
    nbytes = big.size * (1 if big.cls == CONSTANT else plan.batch)
    what = f"parameter '{big.name[1:]}'" if big.kind == "param" else f"the output of '{big.name}'"
    raise NetcError(f"the interpreter target needs a {total:,}-byte arena, more than half of this machine's "
                    f"{phys:,} bytes of memory: {what} alone is {nbytes:,} bytes ({list(big.shape)} "
                    f"{big.dtype})", layer.loc if layer is not None else net.loc)


class InterpProgram:
    """One network lowered like the .so, runnable on the CPU through Triton's interpreter.
    training=True: `module` holds a training program (the backward and optimizer passes' IR), which
    is fused and planned for training and run whole, at the planned batch (InterpTrainer).

    A rank's program (a network of a split-workers module, forward or training step) is planned and
    lowered as `netc compile --workers` does (prepare_rank), at its compiled batch only, and runs in
    segments: run_segment(k) launches the kernels between communication op k-1 and k (segment 0
    first feeds the inputs), and the distributed runtime runs each communication op on views of the
    arena between them (`segmented`: codegen.segment_manifest, the .so's manifest section; `arena`
    and `regions`: the uint8 arena and its regions' byte offsets, as the .so lays them out)."""

    def __init__(self, module: Module, network=None, batch: int | None = None, params: dict | None = None,
                 seed: int = 0, phase: str = "test", dtype: str | None = None, tf32: bool = False,
                 blocks: str = "cuda", training: bool = False, tuning: dict | None = None):
        ensure_interpreter()
        from ..codegen import const_region, is_rank_program, network_io, rank_io, segment_manifest, training_io
        from ..codegen.lower import lower_network
        from ..memory.model import BATCH, CONSTANT, align_up
        from .reference import network_of, module_params
        self.module = module
        self.rank_program = is_rank_program(network_of(module, network))
        if self.rank_program:
            if dtype is not None or tf32:
                raise NetcError("a rank's program runs in f32 on the interpreter target: drop --dtype/--tf32")
            self.net, self.plan = prepare_rank(module, network, training)
            rank_io(self.net, self.plan)        # its learning rate and seed are scalars
            if batch is not None and batch != self.plan.batch:
                raise NetcError(f"a rank's program runs at its compiled batch {self.plan.batch}")
        elif training:
            self.net, self.plan = prepare_training(module, network)
            training_io(self.net, self.plan)    # what netc_train_step feeds: batch-sized data, scalar lr and seed
        else:
            self.net, self.plan = prepare(module, network, phase, dtype, tf32)
            network_io(self.net, self.plan)     # what the .so accepts: batch-sized inputs
        plan = self.plan
        # tuning: a tuning file's configurations (load_tuning), run on the CPU as the .so would on the GPU
        self.lowered = lower_network(module, self.net, plan, blocks=blocks, tuning=tuning)
        self.launches = self.lowered.launches
        self.batch = plan.batch if batch is None else int(batch)
        if not 1 <= self.batch <= plan.batch:
            raise NetcError(f"batch {self.batch} is outside 1..{plan.batch} (the planned batch)")
        if training and self.batch != plan.batch:
            raise NetcError(f"a training step runs at the planned batch {plan.batch}")
        self.const_bytes = const_region(plan)
        self.batch_bytes = plan.arenas[BATCH].size * self.batch
        # as the .so lays it out: the constant region, the batch arena, the lowering's embedded data
        # (chunk tables), the workspace (two-stage reductions)
        data = bytes(self.lowered.data)
        self.data_off = align_up(self.const_bytes + self.batch_bytes, 256)
        self.ws_off = align_up(self.data_off + len(data), 256)
        self.regions = dict(constant=0, batch=self.const_bytes)     # the places' regions (the .so's `regions`)
        self.segmented = segment_manifest(self.lowered, self.batch, "training" if training else "forward")
        self.segments = [(s["first"], s["launches"]) for s in self.segmented["segments"]]
        total = self.ws_off + self.lowered.workspace_bytes
        check_arena(total, plan, self.net)
        self.arena = torch.empty((total + 7) // 8 * 8, dtype=torch.uint8)
        self.arena.fill_(0xFF)
        if data:
            self.arena[self.data_off:self.data_off + len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        self._typed = {}
        # lower.CONST_ARENA, BATCH_ARENA, DATA, WORKSPACE (a training library's forward regions are the .so's)
        self.base = {1: 0, 2: self.const_bytes, 5: self.data_off, 6: self.ws_off}
        self.fixed = plan.arenas[CONSTANT].fixed
        self.training = training
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
        from ..memory.model import BATCH, CONSTANT, row_major
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
        v = self.typed(dt).as_strided(shape, strides, addr // isz)
        if t.flat:      # the IR's [T*B, ...] rows of a [T, B, ...] placement (memory/graph.py)
            from ..codegen.lower import flat_rows
            return flat_rows(v, t.name)
        return v

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

    def param_views(self) -> dict:
        """Every parameter and state tensor by name, as a view of the arena (updates show through)."""
        return {t.name[1:]: self.view(t) for t in self.plan.tensors if t.kind == "param"}

    def get_params(self) -> dict:          # executor.Executor
        return {k: v.clone() for k, v in self.param_views().items()}

    def run(self, inputs: dict, capture=()) -> dict:
        """Inputs by name ([batch, ...]); returns the network outputs by layer name (fresh tensors)
        and, for every plan tensor named in `capture` (a training step's gradients), its value as the
        last kernel that reads it read it (or as its kernel wrote it, if nothing reads it): the plan
        reuses a gradient's bytes once its update has run."""
        from ..ir.query import layer_name as _name, network_outputs
        if self.lowered.comms:
            raise NetcError(f"'{self.plan.network}' has communication ops: it runs in segments (run_segment), with "
                            f"torch.distributed between them (netc run --workers K --target interp)")
        self._feed(inputs)
        got = self._launch(0, len(self.launches), capture)
        out = {_name(op): self.view(self.plan.tensor(_name(op))).clone() for op in network_outputs(self.net)}
        return {**got, **out}

    def run_segment(self, k: int, inputs: dict | None = None, capture=()) -> dict:
        """Segment k of the schedule (the launches between communication op k-1 and k); segment 0 first
        copies the inputs (by name, every network input: the learning rate and seed included) as run()
        does. Returns the values of `capture` this segment's kernels read or wrote (see run)."""
        if not 0 <= k < len(self.segments):
            raise NetcError(f"segment {k} is outside 0..{len(self.segments) - 1}")
        if k == 0:
            if inputs is None:
                raise NetcError("segment 0 takes the inputs")
            self._feed(inputs)
        first, n = self.segments[k]
        return self._launch(first, n, capture)

    def _feed(self, inputs: dict) -> None:
        """Poison the arena above the parameters and copy the inputs to their places."""
        from ..ir.query import layer_name as _name, network_inputs
        # poison everything but the parameters (activations without a batch axis, such as a loss,
        # live in the constant region above them) and the embedded data: unwritten values read as NaN
        self.arena[self.fixed:self.data_off].fill_(0xFF)
        self.arena[self.ws_off:].fill_(0xFF)
        for op in network_inputs(self.net):
            name = _name(op)
            if name not in inputs:
                raise NetcError(f"missing input '{name}'")
            v = self.view(self.plan.tensor(name))
            x = torch.as_tensor(inputs[name])
            if tuple(x.shape) != tuple(v.shape):
                raise NetcError(f"input '{name}' has shape {list(x.shape)}, expected {list(v.shape)}")
            v.copy_(x.to(v.dtype))

    def _launch(self, first: int, count: int, capture=()) -> dict:
        """Launches [first, first + count) of the schedule; the values of `capture` (see run)."""
        b = self.batch
        cd = lambda p, q: -(-p // q)                        # noqa: E731
        T = self.plan.tensors
        wanted = {t.id for t in T if t.name in set(capture)}
        got: dict = {}
        with one_blas_thread():
            for L in self.launches[first:first + count]:
                st = self.plan.steps[L.step - 1]
                if L.part == 0:
                    for i in st.reads:
                        if i in wanted:
                            got[T[i].name] = self.view(T[i]).clone()
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
                for i in st.writes:
                    if i in wanted:
                        got[T[i].name] = self.view(T[i]).clone()
        return got

    def manifest(self) -> dict:
        from ..memory.model import BATCH
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


class InterpTrainer(ReferenceTrainer):
    """ReferenceTrainer's API (feed, step, losses, gradients, params) on the interpreter target: each
    step runs the compiled training program -- fused, planned for training, lowered to the same
    kernels, launches and arena as `netc compile --train` -- through Triton's interpreter. Inputs,
    learning rates, dropout seeds and initial parameters are the reference trainer's (drawn in
    float64, rounded to the program's dtypes in the arena), so a ReferenceTrainer with the same
    seed computes the same step in float64 (compare_step). `params` are views of the arena: the
    updates show through. A step returns the outputs, every parameter's gradient (as its update
    read it) and the forward values the backward read (`last_feed` holds the step's inputs)."""

    def __init__(self, module: Module, network=None, params: dict | None = None, seed: int = 0,
                 blocks: str = "cuda", capture=()):
        from ..ir.query import layers
        from .train import is_forward
        super().__init__(module, network, params, seed, torch.float64)
        self.program = InterpProgram(module, self.net.attrs.get("sym_name"), params=self.params, seed=seed,
                                     blocks=blocks, training=True)
        self.plan = self.program.plan
        self.params = self.program.param_views()
        # what compare_step's local check needs: the forward values that gradient ops read
        fwd = set()
        for op in layers(self.net):
            if not is_forward(op):
                fwd.update(_vname(v) for v in op.operands
                           if v.owner.name != "netc.input" and is_forward(v.owner))
        stored = {t.name for t in self.plan.tensors if not t.fused}
        self._capture = sorted((self.net.attrs.get("gradients") or {}).values()) + sorted(fwd & stored)
        self._capture += [c for c in capture if c not in self._capture]    # the caller's (a cost's logits)
        self.last_feed = None

    def step(self, inputs: dict | None = None, lr: float | None = None, step_seed: int | None = None) -> dict:
        self.last_feed = self.feed(inputs, lr, step_seed)
        named = self.program.run(self.last_feed, capture=self._capture)
        self.steps += 1
        return named


def _vname(v) -> str:
    from ..ir.query import layer_name
    n = layer_name(v.owner)
    return n if len(v.owner.results) == 1 else f"{n}#{v.index}"


def reference_step_from(net, feed: dict, values: dict, params: dict, dtype=torch.float64,
                        own_gradients: bool = False) -> tuple:
    """One training step with every op's reference semantics (in `dtype`) from given values: the
    inputs `feed`, the parameters and state `params` (copied: the updates write the copies), and
    the forward values `values` by name where given (else computed). Returns (every value the step
    computes by name, the parameters and state after its updates). With a compiled step's own
    forward values this checks its gradient and update kernels alone: a forward value that rounding
    moved across a discontinuity (a max-pool window's argmax, a ReLU at 0) is the same on both sides.
    own_gradients: the update ops read the operands `values` gives (the compiled step's gradients), so
    the parameters after check its update kernels alone: Adam's first step divides a gradient by its
    magnitude plus eps, and an element whose decayed gradient cancels to eps's order takes the sign of
    its rounding."""
    from ..ir.query import layers
    from ..ops import lookup
    from .train import is_forward
    ps = {k: v.detach().to(dtype).clone() if v.is_floating_point() else v.detach().clone() for k, v in params.items()}
    vals, named = {}, {}
    for op in layers(net):
        d = lookup(op.name)
        refs = {role: ref.name for role, ref in (op.attrs.get("params") or {}).items() if hasattr(ref, "name")}
        if op.name == "netc.input":
            ys = [feed[_vname(op.results[0])]]
        elif is_forward(op) and all(_vname(r) in values for r in op.results):
            ys = [values[_vname(r)] for r in op.results]
        else:
            xs = [vals[id(v)] for v in op.operands]
            if own_gradients and d.side_effects:
                xs = [values[_vname(v)].to(dtype) if _vname(v) in values and x.is_floating_point() else x
                      for v, x in zip(op.operands, xs)]
            y = d.reference(d.attrs_of(op), xs, {r: ps[n] for r, n in refs.items()})
            if d.side_effects:
                for role, t in (y or {}).items():
                    ps[refs[role]].copy_(t.to(ps[refs[role]].dtype))
                continue
            ys = list(y) if len(op.results) > 1 else [y]
        for r, t in zip(op.results, ys):
            t = t.to(dtype) if t.is_floating_point() else t
            vals[id(r)] = named[_vname(r)] = t
    return named, ps


def compare_step(trainer, ref: ReferenceTrainer, inputs: dict | None, lr: float,
                 tol: float | None = None) -> dict:
    """One step of a compiled trainer (InterpTrainer, or library_train.LibraryTrainer: a .so on the
    GPU) and the reference from the SAME state (the reference is set to the compiled step's
    parameters and optimizer state first, so each step is compared alone and errors do not compound),
    with the same inputs, learning rate and dropout seed. Returns the step's losses and the worst
    relative errors of the loss, the gradients and the parameters and state after the update
    (compare.training_tolerances), each with the parameter it occurs at; where the gradients or the
    parameters are beyond the tolerance, also `local_grad`/`local_param`: the errors against the
    reference's gradient ops run on the compiled step's own forward values and its update ops on the
    compiled step's own gradients (reference_step_from). A trainer whose step does not return its gradients (a .so's) has
    grad_err None: its gradients show in the parameters after the update.

    The reference executor computes the step a second time in f32 arithmetic (ref.twin, inside
    ops.reference.computing_in) from the same state and feed; `loss_err32`, `grad_err32` and `param_err32` are its errors against the f64 step, measured
    the same way, for the tensor each row names (the one nearest to failing the rule of
    compare.within: error <= tol + F32_MULTIPLE * its f32 error). `beyond` lists what fails it
    ("loss", "gradients", "parameters"); tol None measures with the f32 tolerance."""
    from ..ops.reference import computing_in
    from .compare import (NETWORK_TOLERANCES, grad_scales, judged, param_scales, relative_error, state_kinds,
                          tensor_errors, within)
    rule_tol = tol if tol is not None else NETWORK_TOLERANCES["f32"]
    f32 = ref.twin(torch.float32)
    before = {k: v.detach().double().clone() for k, v in trainer.params.items()}
    for r in (ref, f32):
        for k, v in r.params.items():
            v.copy_(before[k].reshape(v.shape))
    fed = ref.feed(inputs, lr)
    got = trainer.step(inputs, lr)
    want = ref.step_on(fed)
    with computing_in(torch.float32):     # f32 arithmetic, not only f32 values between ops
        low = f32.step_on(fed)
    lg = sum(float(v) for v in trainer.losses(got).values())
    lw = sum(float(v) for v in ref.losses(want).values())
    losses = list(trainer.losses(got))
    row = dict(step=trainer.steps, lr=lr, loss=lg, ref_loss=lw)
    row["loss_err"], row["loss_err32"], row["loss_at"] = judged(
        {n: relative_error(got[n], want[n]) for n in losses}, {n: relative_error(low[n], want[n]) for n in losses},
        rule_tol)
    grads = trainer.gradients(got)
    if grads is not None:
        gref = ref.gradients(want)
        scales = grad_scales(gref)
        row["grad_err"], row["grad_err32"], row["grad_at"] = judged(
            tensor_errors(grads, gref, scales), tensor_errors(f32.gradients(low), gref, scales), rule_tol)
    else:
        row["grad_err"] = row["grad_err32"] = row["grad_at"] = None
    scales = param_scales(ref.params, state_kinds(ref.module))
    row["param_err"], row["param_err32"], row["param_at"] = judged(
        tensor_errors(trainer.params, ref.params, scales), tensor_errors(f32.params, ref.params, scales), rule_tol)
    row["beyond"] = [what for what, k in (("loss", "loss"), ("gradients", "grad"), ("parameters", "param"))
                     if row[f"{k}_err"] is not None and not within(row[f"{k}_err"], row[f"{k}_err32"], rule_tol)]
    if tol is not None and grads is not None and ("gradients" in row["beyond"] or "parameters" in row["beyond"]):
        row["local_grad"], row["local_param"] = local_check(trainer, got, before)
    return row


def local_check(trainer: InterpTrainer, named: dict, before: dict) -> tuple:
    """(gradient error, parameter error) of a compiled step against reference_step_from on its own
    forward values."""
    from .compare import grad_errors, param_errors, state_kinds
    # the reference's gradients from the compiled forward's values; its updates from the compiled gradients
    local, after = reference_step_from(trainer.net, trainer.last_feed, named, before, own_gradients=True)
    g, _ = grad_errors(trainer.gradients(named), {p: local[v] for p, v in trainer.net.attrs["gradients"].items()})
    p, _ = param_errors(trainer.params, after, state_kinds(trainer.module))
    return g, p


def default_inputs(module: Module, net, seed: int = 0, batch: int | None = None) -> dict:
    """run_reference's random inputs (float64, seeded per name), cut to `batch` samples (but a
    time-major op's initial state [B, H]: it has no batch axis, memory/graph.py)."""
    from ..ir.query import layer_name as _name, network_inputs
    from ..memory.graph import initial_state_inputs
    from .reference import random_input
    out, state = {}, initial_state_inputs(net)
    for op in network_inputs(net):
        x = random_input(net, op, seed)
        out[_name(op)] = x if batch is None or _name(op) in state else x[:batch]
    return out


def split_inputs(module: Module, networks: list, inputs: dict | None) -> dict:
    """Given inputs by name for the networks named in `networks`: {network: {input: tensor} or None
    (random)}. As run_module: 'x' feeds every listed network with an input 'x', 'net.x' only that
    one; a name no listed network has is an error."""
    from ..ir.query import layer_name as _name, network_inputs
    from .reference import network_of
    per = {n: (None if inputs is None else {}) for n in networks}
    for k, t in (inputs or {}).items():
        hit = False
        for n in networks:
            local = k[len(n) + 1:] if k.startswith(n + ".") else k
            if local in [_name(op) for op in network_inputs(network_of(module, n))]:
                per[n][local] = t
                hit = True
        if not hit:
            every = [f"{n}.{_name(op)}" if len(networks) > 1 else _name(op)
                     for n in networks for op in network_inputs(network_of(module, n))]
            raise NetcError(f"no network has an input '{k}' (inputs: {', '.join(every)})")
    return per


def run_interp(module: Module, inputs: dict | None = None, params: dict | None = None, batch: int | None = None,
               seed: int = 0, network=None, dtype: str | None = None, tf32: bool | str = False) -> dict:
    """Run one network through the interpreter target, compiled in `dtype` ('f32', 'bf16', 'f16';
    None: as declared) with TF32 products if tf32 (three each if "tf32x3"). Missing inputs/parameters are random exactly
    as in run_reference (same seed -> same values), so the two can be compared."""
    prog = InterpProgram(module, network, batch, params, seed, dtype=dtype, tf32=tf32)
    if inputs is None:
        inputs = default_inputs(module, prog.net, seed, prog.batch)
    return prog.run(inputs)




class InterpLibrary:
    """A compiled library replayed on the CPU: the programs and the arena of codegen.plan_library
    (what `netc compile` puts in the .so: a training library's forward reading the training step's
    parameters, its batch norms' prologue, the embedded tables, the workspace), run as the C
    launcher runs them (codegen/launcher.py) through Triton's interpreter. The .so's ABI in Python:
    set_params / get_params (parameters and optimizer state by name), forward (netc_forward, at any
    batch up to the compiled one), train_step (netc_train_step: inputs, learning rate, seed ->
    the loss). How the library is checked without a GPU."""

    def __init__(self, module: Module, plans: dict, train: tuple | None = None, blocks: str = "large"):
        ensure_interpreter()
        from ..codegen import plan_library
        lib = self.lib = plan_library(module, plans, train, cache=False, blocks=blocks)
        self.batch = lib.plan.batch
        self.arena = torch.full(((lib.arena_bytes + 7) // 8 * 8,), 0xFF, dtype=torch.uint8)
        if lib.data:
            d = lib.data_offsets[0]
            self.arena[d:d + len(lib.data)] = torch.frombuffer(bytearray(lib.data), dtype=torch.uint8)
        self.forward_launches = lib.lows[0][0].launches
        self.train_launches = lib.lows[1][0].launches if train is not None else []

    def _base(self, data: int) -> dict:
        r = self.lib.regions
        return {0: 0, 1: 0, 2: r["batch"], 3: r.get("forward_constant", 0), 4: r.get("forward_batch", 0),
                5: self.lib.data_offsets[data], 6: self.lib.workspace_offset}

    def _bytes(self, at: int, n: int) -> torch.Tensor:
        return self.arena[at:at + n]

    # ----------------------------------------------------------------------------- parameters
    def set_params(self, values: dict) -> None:
        """Every parameter (and optimizer state) by name, at the manifest's offsets."""
        for p in self.lib.params:
            if "shares" in p:
                continue
            from .params import torch_dtype
            t = values[p["name"]].detach().to(torch_dtype(p["dtype"])).contiguous().reshape(-1)
            self._bytes(p["offset"], p["bytes"]).copy_(t.view(torch.uint8))

    def get_params(self) -> dict:
        from .params import torch_dtype
        return {p["name"]: self._bytes(p["offset"], p["bytes"]).clone().view(torch_dtype(p["dtype"])).reshape(p["shape"])
                for p in self.lib.params if "shares" not in p}

    # ----------------------------------------------------------------------------- running
    def _copy_in(self, io, x: torch.Tensor, b: int, base: dict) -> None:
        region, batched, coeff, const, width, pitch = io
        at = base[region] + (coeff * b if batched else 0) + const
        raw = x.contiguous().reshape(-1).view(torch.uint8).reshape(b if batched else 1, width)
        for s in range(raw.shape[0]):
            self._bytes(at + s * pitch, width).copy_(raw[s])

    def _copy_out(self, io, b: int, base: dict, dtype, shape) -> torch.Tensor:
        region, batched, coeff, const, width, pitch = io
        at = base[region] + (coeff * b if batched else 0) + const
        rows = [self._bytes(at + s * pitch, width) for s in range(b if batched else 1)]
        return torch.cat(rows).view(dtype).reshape(shape).clone()

    def _run(self, launches, b: int, base: dict) -> None:
        cd = lambda p, q: -(-p // q)                        # noqa: E731
        typed = {}
        with one_blas_thread():
            for L in launches:
                c = L.call
                args = []
                for a, v in zip(L.args, c.args):
                    if a.kind == "ptr":
                        if a.region == 0:
                            args.append(torch.empty(1, dtype=v.dtype))
                            continue
                        addr = base[a.region] + a.coeff * b + a.const
                        isz = v.element_size()
                        if v.dtype not in typed:
                            typed[v.dtype] = self.arena.view(v.dtype)
                        assert addr % isz == 0 and 0 <= addr < self.arena.numel(), (L.group, addr)
                        args.append(typed[v.dtype][addr // isz: addr // isz + 1])
                    elif a.kind == "fp32":
                        args.append(a.fval)
                    else:
                        args.append(a.coeff * b + a.const)
                (rows, block, rep), g1, g2 = L.grid
                c.kernel[(cd(rows * b, block) * rep, g1, g2)](*args, **c.constexprs, **c.options)

    def forward(self, inputs: dict) -> dict:
        """netc_forward: inputs by name ([b, ...]) -> outputs by name."""
        from ..codegen import io_copy
        from ..codegen.lower import TORCH_DTYPES
        from ..memory.model import BATCH
        lib = self.lib
        b = next(iter(inputs.values())).shape[0]
        base = self._base(0)
        for t in lib.ins:
            self._copy_in(io_copy(lib.plan, t, lib.layout), inputs[t.name].to(TORCH_DTYPES[t.dtype]), b, base)
        self._run(self.forward_launches, b, base)
        out = {}
        for t in lib.outs:
            shape = (b,) + tuple(t.shape[1:]) if t.cls == BATCH else tuple(t.shape)
            if t.flat:      # [T*B, ...]: B rows a sample (memory/graph.py)
                shape = (b * t.shape[1],) + tuple(t.shape[2:])
            out[t.name] = self._copy_out(io_copy(lib.plan, t, lib.layout), b, base, TORCH_DTYPES[t.dtype], shape)
        return out

    def run(self, inputs: dict) -> dict:    # executor.Executor
        return self.forward(inputs)

    def train_step(self, inputs: dict, lr: float, seed: int = 0) -> float:
        """netc_train_step at the compiled batch: the data inputs by name, the learning rate and the
        dropout seed -> the loss (the sum of the program's losses)."""
        from ..codegen import io_copy
        from ..codegen.lower import TORCH_DTYPES
        lib = self.lib
        b = self.batch
        base = self._base(1)
        for t in lib.tins:
            self._copy_in(io_copy(lib.tplan, t), inputs[t.name].to(TORCH_DTYPES[t.dtype]), b, base)
        if "learning_rate" in lib.troles:
            d = lib.troles["learning_rate"]
            self._bytes(d["offset"], 4).copy_(torch.tensor([lr], dtype=torch.float32).view(torch.uint8))
        if "seed" in lib.troles:
            d = lib.troles["seed"]
            s = torch.tensor([seed], dtype=torch.int64 if d["bytes"] == 8 else torch.int32)
            self._bytes(d["offset"], d["bytes"]).copy_(s.view(torch.uint8))
        self._run(self.train_launches, b, base)
        total = 0.0
        for name in lib.tnet.attrs.get("losses", []):
            t = lib.tplan.tensor(name)
            at = lib.tplan.buffers[t.buffer].offset + t.offset
            total += float(self._bytes(at, 4).view(torch.float32)[0])
        return total
