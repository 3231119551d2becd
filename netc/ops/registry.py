"""The op registry: every op is defined once, as an OpDef subclass, and passes ask the registry.

An OpDef declares
  name         IR name without the dialect prefix ("conv2d" -> "netc.conv2d")
  types        the layer-type spellings users write in .nd (Paleo's vocabulary first)
  attrs        attribute schema: AttrSpec(kind, default, choices)
  arity        (min, max) number of data inputs; max None = unbounded
  param_roles  names of the parameters the op owns, in order ("weight", "bias")
  infer()      the shape rule (raise ShapeError with the attribute or operand at fault)
  param_shapes() parameter shapes given the input shapes
  cost()       forward FLOPs, backward data/filter FLOPs (Paleo's model where Paleo has one)
  reference()  inference semantics in a few lines of torch: the oracle (netc.runtime.reference)
  gradient()   the gradient rule: which ops compute the gradients of its operands and parameters
               (passes/backward.py asks it; docs/training.md). Gradient ops are OpDefs too, defined
               beside the op they differentiate, with hand-written reference semantics (never
               autograd: torch.autograd is the independent oracle they are checked against)
  training_form()  how the op changes in a training program (dropout draws a mask, batch norm
               normalizes with the batch's statistics), or None
  learning_rule()  a learning rule that is no derivative (SINGA's CD-k for RBMs), or None
  traits       facts the later stages read instead of switching on op names: the memory plan's
               (view, concat, ...), precision, training, fusion (fuse.py: gemm_epilogue, pointwise,
               prologue_operand, ...), partitioning (passes/partition/: feature_params,
               channelwise, row_parallel, SINGA's connection rules), and the writers' and
               baselines' per-op rules: eager() (runtime/eager.py's torch program) and
               singa_layer() (export/singa.py's layer conf)
How an op lowers to a kernel is not on the class: it is the op's row in netc/kernels/lowering.py's
table (kernels sit above ops), which codegen asks. So adding an op touches netc/ops/ (its
definition), netc/kernels/ (its kernel) and that one row.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..diagnostics import did_you_mean
from ..ir.core import register_op
from ..ir.query import MAX_SPLITS
from ..ir.core import DTYPES

REQUIRED = object()

# Attributes every layer may carry, whatever its op (structure, phases, partitioning).
COMMON_ATTRS = {"name", "parents", "include", "exclude", "partition_dim", "location", "params",
                "splits", "split_index", "type", "num_partitions"}

PHASES = ("train", "val", "test")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def common_attr_problem(key: str, v, attrs: dict) -> str | None:
    """What is wrong with the value of a common attribute the passes read as they find it, or None
    (the .nd frontend checks these as it reads; Paleo's layer "splits" and hand-written IR come
    here): a split count, a split's index, phases, a partition dimension, a worker."""
    if key == "splits" and not (_is_int(v) and 1 <= v <= MAX_SPLITS):
        return f"'splits' must be an integer from 1 to {MAX_SPLITS}, got {v!r}"
    if key == "split_index":
        n = attrs.get("splits")
        if not (_is_int(v) and 0 <= v < (n if _is_int(n) else MAX_SPLITS)):
            return f"'split_index' must be an integer from 0 to the splits less one, got {v!r}"
    if key in ("include", "exclude") and not (isinstance(v, list) and
                                              all(isinstance(p, str) and p in PHASES for p in v)):
        return f"'{key}' must be a list of phases ({', '.join(PHASES)}), got {v!r}"
    if key == "partition_dim" and not (_is_int(v) and v in (-1, 0, 1)):
        return f"'partition_dim' must be -1, 0 or 1, got {v!r}"
    if key == "location" and not (_is_int(v) and v >= 0):
        return f"'location' must be a worker index >= 0, got {v!r}"
    return None


class ShapeError(Exception):
    """Raised by a shape rule. `attr` or `operand` says what to point the caret at."""

    def __init__(self, message: str, attr: str | None = None, operand: int | None = None,
                 notes: list[str] | None = None):
        super().__init__(message)
        self.attr, self.operand, self.notes = attr, operand, notes or []


class SingaInexpressible(Exception):
    """Raised by OpDef.singa_layer: this form of the op has no SINGA layer (the message says why)."""


class AttrError(Exception):
    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True)
class AttrSpec:
    kind: str               # int, float, number, str, enum, bool, ints, shape, padding, pool_padding, any
    default: object = REQUIRED
    choices: tuple = ()
    length: int | None = None  # for ints: exact list length
    doc: str = ""

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def describe(self) -> str:
        if self.kind == "enum":
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.kind == "ints":
            return f"a list of {self.length} integers" if self.length else "a list of integers"
        if self.kind == "shape":
            return "a list of integers (a shape)"
        if self.kind == "padding":
            return "\"VALID\", \"SAME\" or [pad_h, pad_w]"
        if self.kind == "pool_padding":
            return "\"VALID\", \"SAME\", [pad_h, pad_w] or [top, left, bottom, right]"
        return {"int": "an integer", "float": "a number", "number": "a number", "str": "a string",
                "bool": "true or false"}.get(self.kind, self.kind)

    def check(self, value):
        """Return the normalized value or raise AttrError."""
        k = self.kind
        if k == "any":
            return value
        if k == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise AttrError(f"expected {self.describe()}, got {_show(value)}")
            return value
        if k in ("float", "number"):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise AttrError(f"expected {self.describe()}, got {_show(value)}")
            return value
        if k == "bool":
            if not isinstance(value, bool):
                raise AttrError(f"expected {self.describe()}, got {_show(value)}")
            return value
        if k == "str":
            if not isinstance(value, str):
                raise AttrError(f"expected {self.describe()}, got {_show(value)}")
            return value
        if k == "enum":
            if not isinstance(value, str) or value not in self.choices:
                hint = did_you_mean(value, self.choices) if isinstance(value, str) else None
                raise AttrError(f"expected {self.describe()}, got {_show(value)}",
                                f"did you mean '{hint}'?" if hint else None)
            return value
        if k in ("ints", "shape"):
            if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
                raise AttrError(f"expected {self.describe()}, got {_show(value)}")
            if self.length is not None and len(value) != self.length:
                raise AttrError(f"expected {self.describe()}, got {len(value)} element{'s' if len(value) != 1 else ''}")
            return value
        if k in ("padding", "pool_padding"):
            if isinstance(value, str):
                if value in ("VALID", "SAME"):
                    return value
                hint = did_you_mean(value, ("VALID", "SAME"))
                raise AttrError(f"expected {self.describe()}, got {_show(value)}",
                                f"did you mean '{hint}'? (padding strings are case-sensitive)" if hint else None)
            if (isinstance(value, list) and len(value) in ((2, 4) if k == "pool_padding" else (2,))
                    and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)):
                return value
            raise AttrError(f"expected {self.describe()}, got {_show(value)}")
        raise AssertionError(f"unknown attribute kind {k}")


def _show(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, list):
        s = "[" + ", ".join(_show(v) for v in value[:6]) + (", ..." if len(value) > 6 else "") + "]"
        return s
    if isinstance(value, dict):
        return "a dictionary"
    return str(value)


@dataclass
class Cost:
    flops_fwd: int | float = 0
    flops_bwd_data: int | float = 0
    flops_bwd_filter: int | float = 0


@dataclass(frozen=True)
class TimeTerms:
    """One pass of a layer as Paleo's FLOP-based profiler times it (paleo-format.md §10): its
    FLOPs and the element count of every tensor it reads or writes, each its own memory term."""
    flops: int | float = 0
    tensors: tuple = ()


def prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


class OpDef:
    name: str = ""
    types: tuple = ()
    attrs: dict = {}
    arity: tuple = (1, 1)
    param_roles: tuple = ()
    elementwise: bool = False   # output = input shape, one value per element: may run in place
    moves_data: bool = True     # False for views and bookkeeping ops (input, reshape, opaque)
    # Memory-plan facts (netc/memory/plan.py reads these; it never switches on op names):
    view: bool = False                   # output = the input's bytes with a new shape (no kernel)
    cheap_to_recompute: bool = False     # not elementwise, yet cheap enough that rematerialize may recompute it
                                         # rather than keep its result (pooling, upsampling, normalization)
    identity_at_inference: bool = False  # output = input when not training (dropout)
    concat: bool = False                 # output is its inputs side by side (zero-copy slices)
    writes_rows: bool = True             # its kernel can write its result as a slice of a wider buffer whose
                                         # last axis is contiguous and whose rows (pixels) are evenly spaced
                                         # (a channel slice of a contiguous NHWC buffer; kernels/common.py's
                                         # row_stride); False: only a dense buffer. A view op that cannot
                                         # alias is a reshape copy, which writes dense buffers only
    # Precision facts (the set-dtype pass reads these): what stays f32 when a network is compiled
    # in f16/bf16 (netc/passes/set_dtype.py has the policy and its reasons).
    f32_result: bool = False             # the result (softmax probabilities, losses, class indices)
    f32_params: tuple = ()               # these parameter roles (batch norm's scale and shift)
    # Training facts (the backward and optimizer passes and the executors read these):
    training_only: bool = False          # made by the training passes (gradients, updates, masks), never
                                         # written in .nd: no layer type
    is_loss: bool = False                # a scalar the backward pass starts from (its gradient is 1)
    differentiable: bool = True          # False: no gradient flows through (integer results: top-k
                                         # indices); a path through it is pruned, never an error
    unbatched: bool = False              # its result has no batch axis even when its operands have
                                         # one (parameter gradients): the memory plan's constant class
    num_results: int = 1                 # the values it defines (0: an update; 2: batch statistics)
    side_effects: bool = False           # writes its `params` symbols in place (optimizer updates,
                                         # running statistics); no results, never dead code
    # Fusion facts (passes/fuse.py reads these; the kernels that fuse are kernels/lowering.py's rows):
    gemm_epilogue: bool = False          # a GEMM whose kernel folds its pointwise consumers into a fused
                                         # epilogue (batch norm scale/shift, residual add, activation)
    pointwise: str = ""                  # its step in a GEMM epilogue or an elementwise chain: "activation",
                                         # "affine" (a folded batch norm) or "elementwise" (chains() and
                                         # residual_add() say which forms)
    prologue_operand: int | None = None  # a gradient GEMM that can compute this operand (its dz) as it loads
                                         # it, from an activation gradient run as the group's prologue
    fusion_prologue: bool = False        # runs in a gradient GEMM's prologue, or in a data gradient's store
                                         # (the activation gradient, dz = act'(y) * dy)
    grad_epilogue: bool = False          # a data gradient whose kernel applies the layer below's activation
                                         # gradient as it stores (cuDNN's dgrad + drelu)
    # Partitioning facts (passes/partition/ reads these):
    feature_params: dict = {}            # splits its output features under partition_dim 1: {parameter role:
                                         # the dimension of that parameter holding them}; {}: it cannot
    feature_attr: tuple = ()             # (attribute, index in it or None): where its output feature count is
    feature_noun: str = ""               # that count in netc's errors ("output channels")
    singa_feature_field: str = ""        # ... and in SINGA's ("num_filters")
    batch_axis: int = 0                  # the axis of its data operands and result holding the batch (1: time-major
                                         # sequences, an Lstm's [T, B, ...]); partition_dim 0 splits axis 0, so only
                                         # a layer with batch_axis 0 may be split that way
    context_rows: int = 0                # a time-major layer's result in Brainstorm's layout has this many extra
                                         # time steps after the T real ones (its context_size: the state the next
                                         # call starts from); the time-sized plan records it (memory/graph.py)
    layout_internals: tuple = ()         # the forward internals Brainstorm's layer of this type keeps, per time
                                         # step, each of its result's feature shape and context (an Lstm's Za ..
                                         # Cb): a layout lists them (export/layout.py)
    batch_statistics: bool = False       # normalizes with statistics over the batch (batch norm's training form):
                                         # split along the batch, its copies all-reduce them (sync_stats)
    channelwise: bool = False            # works on each feature (channel) on its own: follows an input split
                                         # by features
    row_parallel: bool = False           # a matrix product that may run row-parallel (Megatron's second half)
                                         # on an input split by features
    singa_one_to_all: tuple = ()         # the SINGA graph versions ("v0.1", "v0.2+") whose src_conn for it is
                                         # kOneToAll (it reads all of its source: a split by features gathers)
    singa_one_to_many: bool = False      # SINGA's dst_layer_connection kOneToMany: no model split after it
    singa_weight_transposed: bool = False  # SINGA stores its weight transposed (inner product: [M, K], netc [K, M])
    # Operand facts:
    label_operand: int | None = None     # the operand read as class labels (a loss's, an accuracy's)
    classifier: bool = False             # a loss whose operand 0 holds per-class scores (logits, flattened to
                                         # [N, C]) and whose label_operand the classes: class indices [N] or
                                         # one-hot [N, C]; the executors measure its accuracy (argmax of the
                                         # scores) and draw its random labels in [0, C)
    index_operand: int | None = None     # the operand holding row ids into a table (an embedding's): integers
                                         # in [0, a[index_bound]); random inputs for it are drawn there, data
                                         # fed to it is checked against it, and it gets no gradient
    index_bound: str = ""                # the attribute holding that row count
    lengths_operand: int | None = None   # the operand holding per-sample lengths [B] of its time-major operand 0
                                         # [T, B, ...] (ops/sequence.py): random inputs for it are drawn in [1, T]
    state_operands: tuple = ()           # the operands holding a recurrent op's initial state (an Lstm's h0, c0:
                                         # Brainstorm's context), which a caller may carry over from the previous
                                         # call's final state (final_state; runtime/reference.py carry_state)
    # The gradient protocol. `gradient(g, op, dy)` emits the ops that compute the gradients of
    # `op`'s operands and parameters from `dy`, the gradient of its (first) result (None for a loss
    # the backward pass starts from: a unit seed), through the builder `g`, and returns
    # ([gradient of operand i, or None], {parameter role: gradient}). The builder
    # (passes/backward.py, GradBuilder) offers:
    #   g.needs(i)           operand i needs a gradient (it depends on a trainable parameter)
    #   g.needs_param(role)  the parameter bound to `role` is trainable
    #   g.param(role)        the SymbolRef bound to `role`, to pass on in `params=`
    #   g.emit(ir_name, operands, attrs=None, params=None, tag="grad", results=1)
    #                        append a gradient op, located at `op`, named '<layer>.<tag>', typed by
    #                        its own shape rule; returns its result (a list when results > 1)
    # A rule asks only for what is needed; branches that need no gradient are pruned before any
    # rule is asked. `training_form(g, op)` rewrites a forward op for training (g.emit appends
    # before it there). `learning_rule(g, op)` serves ops whose parameters learn by a rule that
    # is no derivative (SINGA's contrastive divergence for RBMs: positive phase, k Gibbs steps,
    # negative phase): it emits those ops and returns {role: update direction}, which the
    # optimizer applies exactly like a gradient (descent on it).
    gradient = None
    training_form = None
    learning_rule = None
    doc: str = ""

    @property
    def ir_name(self) -> str:
        return "netc." + self.name

    @property
    def type_name(self) -> str:
        return self.types[0] if self.types else self.name

    def result_dtype(self, a: dict, operand_dtypes: list) -> str:
        """The element type of the results: the first operand's (f32 without operands); ops whose
        result is not of their first operand's type (an input, a dropout mask drawn from an
        integer seed) say so here."""
        return operand_dtypes[0] if operand_dtypes else "f32"

    # -- fusion and partitioning, by attributes -----------------------------------------------
    def chains(self, op) -> bool:
        """Whether this pointwise op, as it stands, can be a step of an elementwise chain kernel."""
        return True

    def residual_add(self, op) -> bool:
        """Whether this op adds a residual into a GEMM's epilogue (a sum of two operands)."""
        return False

    def chain_followers(self, op) -> tuple:
        """(pointwise kinds, how many or None for any) of the ops an elementwise chain this op heads may
        take after it (fuse.py)."""
        return ("activation", "affine", "elementwise"), None

    def feature_count(self, a: dict) -> int:
        """Its output feature count (feature_attr) in attributes `a`."""
        key, i = self.feature_attr
        return a[key] if i is None else a[key][i]

    def with_feature_count(self, a: dict, n: int) -> dict:
        """The attributes that give it `n` output features (one part of a split by features)."""
        key, i = self.feature_attr
        if i is None:
            return {key: n}
        v = list(a[key])
        v[i] = n
        return {key: v}

    # -- writers' and baselines' rules ------------------------------------------------------
    def eager(self, a: dict, params: dict, x_shape, out_shape, training: bool):
        """The op as a hand-written torch program (runtime/eager.py's baseline: cuDNN, F.max_pool2d,
        F.linear on the network's dtype), a function of its operand tensors; None: the baseline runs
        its reference() instead and says so."""
        return None

    def onnx(self, a: dict, w, op) -> None:
        """The op written into an ONNX graph (export/onnx.py): read operands with w.x(op, i, layout),
        parameters with w.param(op, role, transform), add nodes with w.node(type, inputs, **attrs), bind
        the result with w.result(op, name, layout). Ops without a rule of their own have no ONNX form
        (writes_onnx)."""
        raise NotImplementedError(f"netc.{self.name} has no ONNX form")

    def writes_onnx(self) -> bool:
        return type(self).onnx is not OpDef.onnx

    def inference_params(self, a: dict, params: dict, state: dict) -> dict:
        """Its parameters for an inference program, from a training run's (runtime/train.py
        inference_params): {role: tensor} to replace, given its `params` and `state` tensors by role
        (state: its running statistics, when the run kept them). {}: as they are."""
        return {}

    def singa_layer(self, a: dict, ins: list, v1: bool, scale: int, plain: bool):
        """The SINGA layer that writes this op (export/singa.py): (layer type, [conf pieces], [param
        roles, in SINGA's order]); raise SingaInexpressible(message) for a form SINGA cannot express,
        None for an op SINGA has no layer for. `a` the op's attributes as written (its name
        included), `ins` its operands' shapes, `scale` K for a partition_dim 1 layer (its feature
        counts are 1/K of the config's), `plain` a network SINGA did not build."""
        return None

    def bindable_roles(self, a: dict) -> tuple:
        """The roles an op with attributes `a` may bind in `params`: its parameters, and the state
        an optimizer update writes (ops/optim.py). The IR verifier checks bindings against these."""
        return tuple(self.param_roles)

    def attrs_of(self, op) -> dict:
        """The op's attributes with schema defaults filled in."""
        a = {k: s.default for k, s in self.attrs.items() if not s.required}
        a.update(op.attrs)
        return a

    def check_attrs(self, attrs: dict):
        """Yield (key, message, hint) for every schema violation."""
        for k, v in list(attrs.items()):
            if k in COMMON_ATTRS:
                problem = common_attr_problem(k, v, attrs)
                if problem:
                    yield k, problem, None
                continue
            spec = self.attrs.get(k)
            if spec is None:
                hint = did_you_mean(k, list(self.attrs))
                yield k, f"unknown attribute '{k}' for {self.type_name}", (
                    f"did you mean '{hint}'?" if hint else
                    ("valid attributes: " + ", ".join(self.attrs) if self.attrs else f"{self.type_name} takes no attributes"))
                continue
            try:
                attrs[k] = spec.check(v)
            except AttrError as e:
                yield k, f"attribute '{k}' of {self.type_name}: {e}", e.hint
        for k, spec in self.attrs.items():
            if spec.required and k not in attrs:
                yield None, f"{self.type_name} requires attribute '{k}' ({spec.describe()})", None

    # -- rules, overridden per op ------------------------------------------------------------
    def infer(self, a: dict, ins: list[tuple]) -> tuple:
        raise NotImplementedError

    def param_shapes(self, a: dict, ins: list[tuple], out: tuple) -> dict:
        return {}

    def final_state(self, a: dict, ins: list, params: dict, out) -> list:
        """A recurrent op's final state, one tensor per state_operands entry (in that order and each in its
        operand's shape), after the call with operand tensors `ins`, parameters `params` by role and result
        `out`: what the next call's initial state is when a caller carries state over."""
        raise NotImplementedError(f"{self.ir_name} declares state_operands but no final_state")

    def label_classes(self, a: dict, ins: list[tuple]) -> tuple[int, bool]:
        """(C, ids) of a classifier (label_operand's readings): its class count and whether its labels are
        class indices (else one-hot rows). The per-sample reading: scores [N, ...] flattened to [N, C],
        labels [N] / [N, 1] indices or [N, C] one-hot; a per-step loss (ops/loss.py) reads C per step."""
        c = prod(ins[0][1:])
        return c, prod(ins[self.label_operand][1:]) == 1 or c == 1

    def check_dtypes(self, a: dict, dtypes: list) -> None:
        """Raise ShapeError (operand=i) for an operand whose element type the op cannot read; shape
        inference asks after infer(). The index_operand's ids must be integers (i32 or i64)."""
        k = self.index_operand
        if k is not None and len(dtypes) > k and dtypes[k] not in ("i32", "i64"):
            raise ShapeError(f"{self.type_name} reads ids (integers, i32 or i64), got {dtypes[k]} values", operand=k)

    def cost(self, a: dict, ins: list[tuple], out: tuple, needs_input_grad: bool = True) -> Cost:
        return Cost()

    def paleo_timing(self, a: dict, ins: list[tuple], out: tuple, needs_input_grad: bool = True) -> dict:
        """Paleo's timing terms per pass ({"fwd", "bwd_data", "bwd_filter"} -> TimeTerms; a pass
        left out takes no time). Paleo times convolutions, pooling, dropout and inner products
        only; every other layer is "unimplemented" there and takes 0 ms (§10)."""
        return {}

    def real_shape_problem(self, a: dict, ins: list[tuple], out: tuple) -> str | None:
        """Why `out` (infer()'s result) is only a bookkeeping number and not the shape of a real
        tensor, or None. Ops that reproduce a format's unchecked rule (Paleo's Reshape/Softmax with
        `paleo_unchecked`) say so here: shape-inference warns, executors refuse the layer."""
        return None

    def reference(self, a: dict, ins: list, params: dict):
        """The op's inference semantics in plain torch: `a` its attributes (attrs_of), `ins` its
        operand tensors, `params` its parameter tensors by role ("weight", "bias", ...). Returns
        the output tensor, whose shape is exactly infer()'s. The oracle every target is checked
        against (netc.runtime.reference runs a network with it)."""
        raise NotImplementedError(f"op '{self.ir_name}' has no reference semantics (define "
                                  f"{type(self).__name__}.reference in netc/ops/)")

    def bytes_moved(self, a: dict, ins: list[tuple], out: tuple, itemsize: int = 4) -> int:
        """Forward memory traffic: every input and parameter read once, the output written once
        (Paleo's model for pooling, dropout and inner product; views and free ops move nothing)."""
        if not self.moves_data:
            return 0
        params = self.param_shapes(a, ins, out) if self.param_roles else {}
        return itemsize * (sum(prod(s) for s in ins) + prod(out) + sum(prod(s) for s in params.values()))


def result_dtype(opdef: OpDef, a: dict, operand_dtypes: list) -> str:
    """The element type of an op's results (OpDef.result_dtype)."""
    return opdef.result_dtype(a, operand_dtypes)


_BY_NAME: dict[str, OpDef] = {}
_BY_TYPE: dict[str, OpDef] = {}


def register(cls):
    inst = cls()
    assert inst.name and inst.ir_name not in _BY_NAME, inst.name
    _BY_NAME[inst.ir_name] = inst
    register_op(inst.ir_name, inst)        # the IR's parser and verifier ask there
    for t in inst.types:
        assert t not in _BY_TYPE, t
        _BY_TYPE[t] = inst
    return cls


def lookup(ir_name: str) -> OpDef | None:
    """OpDef of an IR op name ('netc.conv2d'), or None for structural ops."""
    return _BY_NAME.get(ir_name)


def by_type(type_name: str) -> OpDef | None:
    """OpDef of a layer type as written in .nd ('Convolution')."""
    return _BY_TYPE.get(type_name)


def not_runnable(op) -> str | None:
    """Why an inferred layer cannot be executed (its shape is only a bookkeeping number, see
    OpDef.real_shape_problem), as a message for the user, or None. Executors and code generators
    ask this before they run or lower anything."""
    opdef = _BY_NAME.get(op.name)
    if opdef is None or not op.results or op.results[0].type.shape is None:
        return None
    problem = opdef.real_shape_problem(opdef.attrs_of(op), [v.type.shape for v in op.operands],
                                       op.results[0].type.shape)
    if not problem:
        return None
    return (f"cannot run {opdef.type_name} '{op.attrs.get('name')}': {problem}, so its shape is not a real "
            f"tensor's (paleo_unchecked reproduces Paleo's number; fix the layer to run it)")


def layer_cost(op) -> tuple[Cost, int]:
    """(Cost, forward bytes moved) of one IR layer at its inferred shapes: the numbers `netc explain`
    reports per layer and `netc compile` records per launch in the manifest (one formula, the op's
    cost() and bytes_moved()). The data gradient of a layer fed by a network input, or by a layer no
    gradient flows through (OpDef.differentiable False: a one-hot of ids), is 0."""
    opdef = _BY_NAME[op.name]
    ins = [v.type.shape for v in op.operands]
    a = opdef.attrs_of(op)
    needs_grad = not any(v.owner.name == "netc.input" or not getattr(_BY_NAME.get(v.owner.name), "differentiable", True)
                         for v in op.operands)
    if not op.results:   # an update: what it writes is its parameter's, the size of its first operand
        shape, itemsize = (ins[0] if ins else ()), DTYPES[op.operands[0].type.dtype] if ins else 4
        return opdef.cost(a, ins, (), needs_grad), opdef.bytes_moved(a, ins, shape, itemsize)
    out = op.results[0].type
    return opdef.cost(a, ins, out.shape, needs_grad), opdef.bytes_moved(a, ins, out.shape, DTYPES[out.dtype])


def layer_types() -> list[str]:
    return list(_BY_TYPE)


def all_ops() -> list[OpDef]:
    return list(_BY_NAME.values())
