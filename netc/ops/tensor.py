"""Data movement and structure: Input, Concatenate, Elementwise, Reshape, Softmax, and the
opaque pass-through op that importers use for layer types netc does not know."""
from __future__ import annotations

from ..diagnostics import NetcError
from ..ir.core import DTYPES
from .registry import AttrSpec, Cost, OpDef, ShapeError, prod, register


@register
class Input(OpDef):
    name = "input"
    singa_one_to_many = True   # but a `whole` input (SINGA's kDummy), a NeuronLayer
    types = ("Input",)
    arity = (0, 0)
    moves_data = False
    attrs = {"shape": AttrSpec("shape"), "dtype": AttrSpec("enum", "f32", tuple(DTYPES)),
             "role": AttrSpec("str", "", doc="what a training program's own input carries, for the executors: "
                                             "learning_rate, seed (dropout masks), grad_seed:<layer>"),
             "whole": AttrSpec("bool", False, doc="partition_dim 0 keeps it whole on every partition instead of "
                                                  "cutting its batch (a SINGA kDummy input: DummyLayer::Setup takes "
                                                  "dummy_conf.shape as it is, whatever the partition count)"),
             "batch_axis": AttrSpec("int", 0, doc="the axis of the samples: 1 for a time-major sequence [T, B, ...] "
                                                  "(--data arrays then hold one sequence a sample, [S, T, ...], "
                                                  "batched along axis 1)")}
    doc = ("A network input; written `input data: f32[N, H, W, C]` in .nd. A dimension after the first may "
           "be 0 (an empty tensor, as SINGA builds from sizes left at their default 0); negative ones are "
           "errors, and so is a batch (the first dimension) of 0: every tensor computed from it would be "
           "empty, and memory is planned per sample.")

    def result_dtype(self, a, operand_dtypes):
        return a["dtype"]

    def infer(self, a, ins):
        shape = a["shape"]
        if any(d < 0 for d in shape):
            raise ShapeError(f"input dimensions must not be negative, got {shape}", attr="shape")
        if shape and shape[0] == 0:
            raise ShapeError(f"the batch (the first dimension) of an input must be positive, got {shape}",
                             attr="shape")
        return tuple(shape)

    def reference(self, a, ins, params):
        raise NotImplementedError("a network input is fed by the caller (netc.runtime.run_reference), "
                                  "not computed")


@register
class Concat(OpDef):
    name = "concat"
    types = ("Concatenate", "Concat")
    moves_data = False  # producers write their slices in place (zero-copy in the memory plan)
    concat = True
    arity = (2, None)
    attrs = {"dim": AttrSpec("int", -1, doc="axis; negative counts from the end")}
    doc = "Concatenation along `dim` (channels = 3 in NHWC). Zero-copy in the memory plan; 0 FLOPs."

    def onnx(self, a, w, op):
        """Concat of the operands in the first one's layout (an NCHW image's axes mapped)."""
        r = len(op.operands[0].type.shape)
        d = a["dim"] % r
        layout = w.layout(op) if r == 4 else "nhwc"
        axis = [0, 2, 3, 1][d] if layout == "nchw" else d
        y = w.node("Concat", [w.x(op, i, layout) for i in range(len(op.operands))], hint=a.get("name") or "concat",
                   axis=axis)
        w.result(op, y, layout)

    def singa_layer(self, a, ins, v1, scale, plain):
        from .singa import singa_dim
        r = len(ins[0])
        return "kConcate", [f"concate_conf {{ concate_dim: {singa_dim(a.get('dim', -1), r)}"
                            + ("" if v1 else f" num_concates: {len(ins)}") + " }"], []

    def eager(self, a, params, x_shape, out_shape, training):
        import torch
        d = a["dim"]
        return lambda *xs: torch.cat(xs, dim=d)

    def infer(self, a, ins):
        r = len(ins[0])
        d = a["dim"] + r if a["dim"] < 0 else a["dim"]
        if not 0 <= d < r:
            raise ShapeError(f"dim {a['dim']} is out of range for rank-{r} inputs", attr="dim")
        out = list(ins[0])
        for i, s in enumerate(ins[1:], 1):
            if len(s) != r or any(s[j] != out[j] for j in range(r) if j != d):
                raise ShapeError(f"cannot concatenate {list(s)} with {list(ins[0])} along dim {d}: "
                                 f"the other dimensions must match", operand=i)
            out[d] += s[d]
        return tuple(out)

    def reference(self, a, ins, params):
        import torch
        return torch.cat(ins, dim=a["dim"])

    def gradient(self, g, op, dy):
        """Each operand's slice of dy along `dim` (netc.narrow)."""
        a = self.attrs_of(op)
        r = len(dy.type.shape)
        d = a["dim"] + r if a["dim"] < 0 else a["dim"]
        out, start = [], 0
        for i, v in enumerate(op.operands):
            n = v.type.shape[d]
            out.append(g.emit("netc.narrow", [dy], {"dim": d, "start": start, "length": n},
                              tag=f"grad{i}") if g.needs(i) else None)
            start += n
        return out, {}


@register
class Slice(OpDef):
    name = "slice"
    singa_one_to_many = True   # a user's kSlice hands reader k its blob k
    types = ("Slice",)
    arity = (1, 1)
    attrs = {
        "dim": AttrSpec("int", doc="axis to cut; negative counts from the end"),
        "num_slices": AttrSpec("int", doc="equal parts; must divide the axis exactly"),
        "index": AttrSpec("int", 0, doc="which part this op yields, 0-based"),
    }
    doc = ("Part `index` of `num_slices` equal contiguous parts along `dim` (SINGA's kSlice: each "
           "consumer takes one part). 0 FLOPs; a copy, or a view in the memory plan.")

    def singa_layer(self, a, ins, v1, scale, plain):
        from .singa import SingaInexpressible as No, singa_dim
        if plain and a.get("index", 0):
            raise No(f"slice '{a.get('name')}' takes part {a['index']} of {a['num_slices']}; SINGA's kSlice hands its "
                     f"parts to its consumers in the order they are set up, which netc writes only for nets imported "
                     f"from SINGA")
        r = len(ins[0])
        return "kSlice", [f"slice_conf {{ slice_dim: {singa_dim(a['dim'], r)}"
                          + ("" if v1 else f" num_slices: {a['num_slices']}") + " }"], []

    def infer(self, a, ins):
        (x,) = ins
        r = len(x)
        d = a["dim"] + r if a["dim"] < 0 else a["dim"]
        if not 0 <= d < r:
            raise ShapeError(f"dim {a['dim']} is out of range for a rank-{r} input", attr="dim")
        n = a["num_slices"]
        if n <= 0 or x[d] % n:
            raise ShapeError(f"{x[d]} (dimension {d} of {list(x)}) does not split into {n} equal parts",
                             attr="num_slices")
        if not 0 <= a["index"] < n:
            raise ShapeError(f"index {a['index']} is out of range for {n} slices", attr="index")
        out = list(x)
        out[d] //= n
        return tuple(out)

    def reference(self, a, ins, params):
        (x,) = ins
        return x.chunk(a["num_slices"], dim=a["dim"])[a["index"]]

    def gradient(self, g, op, dy):
        """dy padded with zeros into the input's shape (netc.pad_dim)."""
        a = self.attrs_of(op)
        x = op.operands[0].type.shape
        d = a["dim"] + len(x) if a["dim"] < 0 else a["dim"]
        n = x[d] // a["num_slices"]
        return [g.emit("netc.pad_dim", [dy], {"dim": d, "before": a["index"] * n,
                                              "after": x[d] - (a["index"] + 1) * n})], {}


@register
class Elementwise(OpDef):
    name = "elementwise"
    pointwise = "elementwise"
    channelwise = True
    types = ("Elementwise", "Add")
    elementwise = True
    arity = (2, None)
    attrs = {"operation": AttrSpec("enum", "sum", ("sum", "product", "max"))}
    doc = "Elementwise sum/product/max of same-shaped inputs (a residual add). Paleo: 0 FLOPs."

    def onnx(self, a, w, op):
        """Sum / Mul / Max of the operands in the first one's layout."""
        layout = w.layout(op)
        t = {"sum": "Sum", "product": "Mul", "max": "Max"}[a["operation"]]
        xs = [w.x(op, i, layout) for i in range(len(op.operands))]
        y = xs[0]
        if t == "Mul":
            for z in xs[1:]:
                y = w.node("Mul", [y, z], hint=a.get("name") or "mul")
        else:
            y = w.node(t, xs, hint=a.get("name") or t.lower())
        w.result(op, y, layout)

    def eager(self, a, params, x_shape, out_shape, training):
        import torch
        f = {"sum": torch.add, "product": torch.mul, "max": torch.maximum}[a["operation"]]

        def ew(*xs):
            y = xs[0]
            for z in xs[1:]:
                y = f(y, z)
            return y
        return ew

    def chains(self, op):
        """An elementwise chain kernel takes sum, product and max of at most 5 operands."""
        return op.attrs.get("operation", "sum") in ("sum", "product", "max") and len(op.operands) <= 5

    def residual_add(self, op):
        return op.attrs.get("operation", "sum") == "sum" and len(op.operands) == 2

    def infer(self, a, ins):
        for i, s in enumerate(ins[1:], 1):
            if tuple(s) != tuple(ins[0]):
                raise ShapeError(f"elementwise inputs must have identical shapes: {list(ins[0])} vs {list(s)}",
                                 operand=i)
        return tuple(ins[0])

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.elementwise(a["operation"], ins)

    def gradient(self, g, op, dy):
        """sum: dy to every operand; product: dy times the other operands; max: dy where the operand is
        the (first) maximum (netc.elementwise_max_grad)."""
        operation = self.attrs_of(op)["operation"]
        out = []
        for i, v in enumerate(op.operands):
            if not g.needs(i):
                out.append(None)
            elif operation == "sum":
                out.append(dy)
            elif operation == "product":
                others = [w for j, w in enumerate(op.operands) if j != i]
                out.append(g.emit("netc.elementwise", [dy] + others, {"operation": "product"}, tag=f"grad{i}"))
            else:
                out.append(g.emit("netc.elementwise_max_grad", list(op.operands) + [dy], {"index": i},
                                  tag=f"grad{i}"))
        return out, {}


# Paleo's own Reshape and Softmax shape rules check nothing (shared/spec/paleo-format.md §6.9, §6.10).
# The Paleo importer sets `paleo_unchecked: true` on those layers so that netc reproduces Paleo's
# numbers; where Paleo's number is not a real tensor shape, shape inference warns (real_shape_problem)
# and executors refuse the layer. Without the attribute (.nd written by hand) the rules are checked.
_PALEO_UNCHECKED = AttrSpec("bool", False, doc="use Paleo's unchecked shape rule (set by the Paleo importer); "
                                               "a layer whose Paleo shape is not real cannot be run")


@register
class Reshape(OpDef):
    name = "reshape"
    types = ("Reshape", "Flatten")
    moves_data = False
    view = True
    attrs = {"output_shape": AttrSpec("shape", [-1, -1], doc="one -1 is inferred; default flattens to [N, -1]"),
             "paleo_unchecked": _PALEO_UNCHECKED}
    doc = "A view with a new shape; the element count must not change. Default: flatten to [N, rest]."

    def onnx(self, a, w, op):
        """Reshape to the inferred shape (of netc's element order: an NCHW image is transposed back first)."""
        out = list(op.results[0].type.shape)
        y = w.node("Reshape", [w.x(op, 0, "nhwc"), w.const(out, (a.get("name") or "reshape") + ".shape")],
                   hint=a.get("name") or "reshape")
        w.result(op, y)

    def eager(self, a, params, x_shape, out_shape, training):
        shape = tuple(out_shape[1:])
        if x_shape[0] != out_shape[0]:      # the leading axis changes too (a sequence's [T, B, H] into [T*B, H] rows)
            return lambda x: x.reshape((-1,) + shape)
        return lambda x: x.reshape((x.shape[0],) + shape)

    def infer(self, a, ins):
        if a["paleo_unchecked"]:
            return self._paleo(a, ins[0])
        return self._checked(a, ins[0])

    @staticmethod
    def _checked(a, x):
        out = list(a["output_shape"])
        if not x and (out == [-1, -1] or out.count(-1) > 1):  # both read the batch, x[0]
            raise ShapeError("Reshape needs an input with a batch dimension, got a scalar []", operand=0)
        if out == [-1, -1]:
            return (x[0], prod(x[1:]))
        if out.count(-1) > 1:
            # Paleo's rule: a leading -1 is the batch
            if out[0] == -1:
                out[0] = x[0]
            if out.count(-1) > 1:
                raise ShapeError(f"at most one -1 can be inferred in output_shape {a['output_shape']}",
                                 attr="output_shape")
        if any(d == 0 or d < -1 for d in out):
            raise ShapeError(f"invalid dimension in output_shape {a['output_shape']}", attr="output_shape")
        n = prod(x)
        if -1 in out:
            known = prod(d for d in out if d != -1)
            if n % known:
                raise ShapeError(f"cannot reshape {list(x)} ({n} elements) to {a['output_shape']}",
                                 attr="output_shape")
            out[out.index(-1)] = n // known
        if prod(out) != n:
            raise ShapeError(f"cannot reshape {list(x)} ({n} elements) to {out} ({prod(out)} elements)",
                             attr="output_shape")
        return tuple(out)

    @staticmethod
    def _paleo(a, x):
        """Paleo's rule (§6.9): output_shape, with a leading -1 := batch, else a trailing -1 :=
        prod(input) // output_shape[0]; nothing else resolved, the element count not checked."""
        out = list(a["output_shape"])
        if not out:
            raise ShapeError("Paleo's Reshape needs a non-empty output_shape", attr="output_shape")
        if not x and (out[0] == -1 or out[-1] == -1):
            raise ShapeError("Reshape needs an input with a batch dimension, got a scalar []", operand=0)
        if out[0] == -1:
            out[0] = x[0]
        elif out[-1] == -1:
            if out[0] == 0:
                raise ShapeError(f"Paleo's Reshape divides by output_shape[0], which is 0 in {a['output_shape']}",
                                 attr="output_shape")
            out[-1] = prod(x) // out[0]
        if any(d < 0 for d in out):
            raise ShapeError(f"Paleo's Reshape rule gives {out} for output_shape {a['output_shape']} on {list(x)} "
                             f"(it resolves only a leading or else a trailing -1): not a shape netc can count with",
                             attr="output_shape")
        return tuple(out)

    def real_shape_problem(self, a, ins, out):
        if not a["paleo_unchecked"]:
            return None
        (x,) = ins
        try:
            real = self._checked(a, x)
        except ShapeError:
            real = None
        if real == tuple(out):
            return None
        n, m = prod(x), prod(out)
        why = (f"the input {list(x)} has {n} elements, {list(out)} has {m}" if n != m else
               f"netc's own rule gives {list(real)}")
        return f"Paleo's Reshape gives {list(out)} without checking it against the input: {why}"

    def reference(self, a, ins, params):
        return ins[0].reshape(self.infer(a, [tuple(ins[0].shape)]))  # row-major (NHWC) order

    def gradient(self, g, op, dy):
        """dy reshaped back to the input's shape."""
        _refuse_unreal(self, op)
        return [g.emit("netc.reshape", [dy], {"output_shape": list(op.operands[0].type.shape)})], {}


@register
class Softmax(OpDef):
    name = "softmax"
    cheap_to_recompute = True
    singa_one_to_all = ("v0.1", "v0.2+")
    types = ("Softmax",)
    f32_result = True   # probabilities stay f32 in 16-bit nets (autocast's rule)
    attrs = {"num_classes": AttrSpec("int", 0, doc="if given, must equal the class count"),
             "paleo_unchecked": _PALEO_UNCHECKED}
    doc = "Softmax over the flattened features: [N, ...] -> [N, prod(...)]. Paleo: 0 FLOPs."

    def singa_layer(self, a, ins, v1, scale, plain):
        return "kSoftmax", [], []

    def eager(self, a, params, x_shape, out_shape, training):
        import torch
        return lambda x: torch.softmax(x.reshape(x.shape[0], -1), dim=1)

    def onnx(self, a, w, op):
        """Softmax over the flattened features (in netc's element order)."""
        nm = a.get("name") or "softmax"
        x = w.x(op, 0, "nhwc")
        if len(op.operands[0].type.shape) != 2:
            x = w.node("Flatten", [x], hint=nm + ".flat", axis=1)
        w.result(op, w.node("Softmax", [x], hint=nm, axis=1))

    def infer(self, a, ins):
        (x,) = ins
        if a["paleo_unchecked"]:
            # Paleo's rule (§6.10): [N, num_classes], or [N, last dimension] without it; no check
            if not x:
                raise ShapeError("Softmax needs an input with a batch dimension, got a scalar []", operand=0)
            if a["num_classes"] < 0:
                raise ShapeError(f"num_classes must be positive, got {a['num_classes']}", attr="num_classes")
            return (x[0], a["num_classes"] or x[-1])
        return self._checked(a, x)

    @staticmethod
    def _checked(a, x):
        if len(x) < 2:
            raise ShapeError(f"Softmax needs an input of rank >= 2, got {list(x)}", operand=0)
        c = prod(x[1:])
        if a["num_classes"] and a["num_classes"] != c:
            raise ShapeError(f"num_classes is {a['num_classes']} but the input {list(x)} has {c} features",
                             attr="num_classes")
        return (x[0], c)

    def real_shape_problem(self, a, ins, out):
        (x,) = ins
        if not a["paleo_unchecked"] or (len(x) >= 2 and tuple(out) == (x[0], prod(x[1:]))):
            return None
        rule = "[N, num_classes]" if a["num_classes"] else "[N, last dimension]"
        feats = f"{prod(x[1:])} features" if len(x) >= 2 else "no feature dimension"
        return (f"Paleo's Softmax gives {list(out)} ({rule}) without checking it against the input {list(x)}, "
                f"which has {feats}")

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.softmax(ins[0])

    def gradient(self, g, op, dy):
        """softmax_grad from the output and dy, in the input's shape."""
        _refuse_unreal(self, op)
        return [g.emit("netc.softmax_grad", [op.results[0], dy],
                       {"input_shape": list(op.operands[0].type.shape)})], {}


@register
class Opaque(OpDef):
    name = "opaque"
    channelwise = True
    types = ("Opaque",)
    moves_data = False
    arity = (0, None)
    attrs = {"type": AttrSpec("str")}
    doc = ("A layer type netc does not know, kept from an imported file (`Opaque(x) { type: \"BatchNorm\" }`): "
           "shape pass-through, no parameters, 0 FLOPs - Paleo's Generic layer.")

    def singa_layer(self, a, ins, v1, scale, plain):
        """The SINGA layer type it carries, where SINGA needs no conf for it (ops/singa.py's OPAQUE_OK)."""
        from .singa import OPAQUE_OK, SingaInexpressible as No
        t = a.get("type")
        if t not in OPAQUE_OK:
            raise No(f"layer '{a.get('name')}' is an opaque layer of type '{t}', which netc cannot write as a SINGA "
                     f"layer")
        return t, [], []

    def check_attrs(self, attrs):
        return iter(())  # keeps whatever the original file said

    def infer(self, a, ins):
        if len(ins) != 1:
            raise ShapeError(f"layer type '{a.get('type')}' is unknown to netc, so its output shape is only "
                             f"known for one input (it passes the shape through); it has {len(ins)}")
        return tuple(ins[0])

    def reference(self, a, ins, params):
        return ins[0]  # pass-through: the shape rule is all netc knows of it


@register
class Identity(OpDef):
    name = "identity"
    channelwise = True
    types = ("Identity",)
    moves_data = False
    identity_at_inference = True   # the memory plan places it on its operand's bytes (no kernel)
    attrs = {}
    doc = ("The identity: out = in. `netc run`/`netc compile --opaque-as-identity` turns shape-preserving "
           "opaque layers (unknown types, Paleo's Generic pass-throughs) into it, keeping their `type`. "
           "Zero-copy in the memory plan; 0 FLOPs.")

    def eager(self, a, params, x_shape, out_shape, training):
        return lambda x: x

    def infer(self, a, ins):
        return tuple(ins[0])

    def reference(self, a, ins, params):
        return ins[0]

    def gradient(self, g, op, dy):
        """dy unchanged."""
        return [dy], {}


@register
class DeltasScaling(Identity):
    """The identity forward whose gradient is scaled (Brainstorm's DeltasScaling; -1: a gradient reversal)."""
    name = "deltas_scaling"
    types = ("DeltasScaling",)
    attrs = {"factor": AttrSpec("number", 1.0, doc="the gradient passing back through it is multiplied by this")}
    doc = ("out = in; its gradient is factor * dy (Brainstorm's DeltasScaling: -1 reverses the gradient). "
           "Zero-copy at inference; its gradient is a Scale. FLOPs: 0 forward, 1 per element backward.")

    def eager(self, a, params, x_shape, out_shape, training):
        return None if training and a["factor"] != 1 else (lambda x: x)

    def reference(self, a, ins, params):
        """The identity, with the scaled gradient where torch.autograd differentiates it (the oracle's view)."""
        import torch

        factor = float(a["factor"])

        class ScaledGrad(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.view_as(x)

            @staticmethod
            def backward(ctx, dy):
                return dy * factor
        return ScaledGrad.apply(ins[0]) if torch.is_grad_enabled() and ins[0].requires_grad else ins[0]

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(0, prod(ins[0]), 0)     # backward: the Scale, 1 FLOP per element

    def gradient(self, g, op, dy):
        """factor * dy (netc.scale)."""
        return [g.emit("netc.scale", [dy], {"factor": self.attrs_of(op)["factor"]})], {}


@register
class Dummy(Identity):
    """Identity's shape rule, reference and gradient, SINGA's name, attributes and partitioning."""
    name = "dummy"
    types = ("Dummy",)
    channelwise = False            # an ordinary SINGA layer to the partition pass, not a channel-wise one
    attrs = {"output": AttrSpec("bool", False, doc="SINGA's dummy_conf.output: the net's end (SINGA's "
                                                   "ComputeGradient draws its gradient uniformly from [0, 1))")}
    doc = ("SINGA's kDummy (DummyLayer), the layer SINGA's own tests are built of. Reading a source it passes it "
           "through: out = in, gradient dy unchanged. An input dummy (dummy_conf { input: true shape: [...] }) is "
           "a network input of that shape, fed by the caller (SINGA's DummyLayer::Feed; its own fill is uniform "
           "[0, 1)), kept whole on every partition (`whole`, see Input). With `output: true` SINGA seeds the "
           "backward pass there with a uniform [0, 1) gradient instead of a loss's; netc records it. "
           "Zero-copy in the memory plan; 0 FLOPs.")

    def singa_layer(self, a, ins, v1, scale, plain):
        return "kDummy", (["dummy_conf { output: true }"] if a.get("output") else []), []


# --------------------------------------------------------------------------- gradients

def _refuse_unreal(opdef, op):
    """A layer whose shape is only Paleo's bookkeeping number has no gradient either."""
    problem = opdef.real_shape_problem(opdef.attrs_of(op), [v.type.shape for v in op.operands],
                                       op.results[0].type.shape)
    if problem:
        raise NetcError(f"cannot differentiate {opdef.type_name} '{op.attrs.get('name')}': {problem}", op.loc)


def _dim(a, shape) -> int:
    d = a["dim"]
    if not 0 <= d < len(shape):
        raise ShapeError(f"dim {d} is out of range for rank {len(shape)}", attr="dim")
    return d


@register
class Narrow(OpDef):
    name = "narrow"
    training_only = True
    arity = (1, 1)
    attrs = {"dim": AttrSpec("int"), "start": AttrSpec("int"), "length": AttrSpec("int")}
    doc = ("x[start:start + length] along `dim` (a concat's gradient for one operand; the adjoint of pad_dim). "
           "0 FLOPs, as the concat.")

    def infer(self, a, ins):
        (x,) = ins
        d = _dim(a, x)
        if a["start"] < 0 or a["length"] < 0 or a["start"] + a["length"] > x[d]:
            raise ShapeError(f"[{a['start']}, {a['start'] + a['length']}) is not within dimension {d} of {list(x)}",
                             attr="start")
        out = list(x)
        out[d] = a["length"]
        return tuple(out)

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.narrow(ins[0], a["dim"], a["start"], a["length"])


@register
class PadDim(OpDef):
    name = "pad_dim"
    training_only = True
    arity = (1, 1)
    attrs = {"dim": AttrSpec("int"), "before": AttrSpec("int", 0), "after": AttrSpec("int", 0)}
    doc = ("x with `before` zeros in front and `after` zeros behind along `dim` (a slice's gradient; the "
           "adjoint of narrow). 0 FLOPs, as the slice.")

    def infer(self, a, ins):
        (x,) = ins
        d = _dim(a, x)
        if a["before"] < 0 or a["after"] < 0:
            raise ShapeError(f"pads must not be negative, got {a['before']} and {a['after']}", attr="before")
        out = list(x)
        out[d] += a["before"] + a["after"]
        return tuple(out)

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.pad_dim(ins[0], a["dim"], a["before"], a["after"])


@register
class ElementwiseMaxGrad(OpDef):
    name = "elementwise_max_grad"
    training_only = True
    arity = (3, None)
    elementwise = True
    attrs = {"index": AttrSpec("int", doc="the operand whose gradient this is")}
    doc = ("The gradient of an elementwise max for operand `index`: the max's operands, then dy -> dy where "
           "that operand is the first maximum, else 0. 0 FLOPs, as the max.")

    def infer(self, a, ins):
        for i, s in enumerate(ins[1:], 1):
            if tuple(s) != tuple(ins[0]):
                raise ShapeError(f"operands must have identical shapes: {list(ins[0])} vs {list(s)}", operand=i)
        if not 0 <= a["index"] < len(ins) - 1:
            raise ShapeError(f"index {a['index']} is not one of the {len(ins) - 1} operands of the max", attr="index")
        return tuple(ins[0])

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.elementwise_max_grad(ins[:-1], ins[-1], a["index"])


@register
class SoftmaxGrad(OpDef):
    name = "softmax_grad"
    training_only = True
    arity = (2, 2)
    attrs = {"input_shape": AttrSpec("shape", doc="the forward input's shape")}
    doc = ("The gradient of softmax: its output y [N, C] and dy -> y * (dy - sum(dy * y)) in the input's shape. "
           "0 FLOPs, as the softmax (Paleo).")

    def infer(self, a, ins):
        y, dy = ins
        x = tuple(a["input_shape"])
        if len(y) != 2 or tuple(dy) != tuple(y) or len(x) < 2 or (x[0], prod(x[1:])) != tuple(y):
            raise ShapeError(f"softmax output {list(y)}, its gradient {list(dy)} and input {list(x)} do not fit",
                             operand=1)
        return x

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.softmax_grad(ins[0], ins[1], a["input_shape"])


# --------------------------------------------------------------------------- Brainstorm's Mask and SquaredDifference

def _mask_shape_ok(x: tuple, m: tuple) -> bool:
    """A mask is x's shape, or x's first k axes and a 1 (k >= 1: one factor per sample, per step, per position)."""
    return tuple(m) == tuple(x) or (2 <= len(m) <= len(x) and m[-1] == 1 and tuple(m[:-1]) == tuple(x[:len(m) - 1]))


@register
class Mask(OpDef):
    name = "mask"
    types = ("Mask",)
    arity = (2, 2)
    elementwise = True
    attrs = {}
    doc = ("x times a mask that gets no gradient (Brainstorm's Mask): the mask has x's shape, or x's first k >= 1 axes "
           "and a trailing 1 ([B, 1] for x [B, ...]; [T, B, 1] for a sequence; [B, H, W, 1] per position), "
           "broadcast over the rest. The gradient of x is dy masked alike. 1 FLOP per element each way.")

    def infer(self, a, ins):
        x, m = ins
        if not _mask_shape_ok(x, m):
            raise ShapeError(f"the mask must have the input's shape {list(x)} or its first axes and a 1 (such as "
                             f"{list(x[:1]) + [1]}), got {list(m)}", operand=1)
        return tuple(x)

    def reference(self, a, ins, params):
        from .reference import in_compute_dtype
        x, m = in_compute_dtype(ins[0]), in_compute_dtype(ins[1]).detach()   # the mask gets no gradient
        if tuple(m.shape) != tuple(x.shape):
            m = m.reshape(tuple(m.shape[:-1]) + (1,) * (x.dim() - m.dim() + 1))
        return x * m

    def cost(self, a, ins, out, needs_input_grad=True):
        n = prod(ins[0])
        return Cost(n, n, 0)

    def gradient(self, g, op, dy):
        """dy masked alike; the mask none."""
        return [g.emit("netc.mask", [dy, op.operands[1]], {}) if g.needs(0) else None, None], {}


@register
class SquaredDifference(OpDef):
    name = "squared_difference"
    types = ("SquaredDifference",)
    arity = (2, 2)
    elementwise = True
    attrs = {"factor": AttrSpec("number", 1.0, doc="the result is factor * (a - b)^2 (0.5: Brainstorm's SquaredError "
                                                   "loss per element)")}
    doc = ("factor * (a - b)^2 elementwise, of same-shaped a and b (Brainstorm's SquaredDifference; with factor 0.5 "
           "SquaredError's per-element loss). Gradients +-2 factor (a - b) dy "
           "(squared_difference_grad). 2 FLOPs per element forward, 3 per input backward (6 for both).")

    def infer(self, a, ins):
        if tuple(ins[1]) != tuple(ins[0]):
            raise ShapeError(f"SquaredDifference inputs must have the same shape: {list(ins[0])} vs {list(ins[1])}",
                             operand=1)
        return tuple(ins[0])

    def reference(self, a, ins, params):
        from .reference import in_compute_dtype
        return a["factor"] * (in_compute_dtype(ins[0]) - in_compute_dtype(ins[1])) ** 2

    def cost(self, a, ins, out, needs_input_grad=True):
        n = prod(ins[0])
        return Cost(2 * n, 6 * n, 0)     # backward: both inputs' gradients

    def gradient(self, g, op, dy):
        out = [None, None]
        for i in (0, 1):
            if g.needs(i):
                out[i] = g.emit("netc.squared_difference_grad", list(op.operands) + [dy],
                                {"wrt": i, "factor": self.attrs_of(op)["factor"]},
                                tag=f"grad{i}" if g.needs(1 - i) else "grad")
        return out, {}


@register
class SquaredDifferenceGrad(OpDef):
    name = "squared_difference_grad"
    training_only = True
    arity = (3, 3)
    attrs = {"wrt": AttrSpec("int", 0, doc="which input: 0 (a) or 1 (b)"), "factor": SquaredDifference.attrs["factor"]}
    doc = "The gradient of SquaredDifference for input `wrt`: 2 factor (a - b) dy for a, its negative for b."

    def infer(self, a, ins):
        SquaredDifference().infer(a, ins[:2])
        if tuple(ins[2]) != tuple(ins[0]):
            raise ShapeError(f"the gradient must have the inputs' shape {list(ins[0])}, got {list(ins[2])}", operand=2)
        if a["wrt"] not in (0, 1):
            raise ShapeError(f"wrt must be 0 or 1, got {a['wrt']}", attr="wrt")
        return tuple(ins[0])

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(3 * prod(ins[0]))

    def reference(self, a, ins, params):
        from .reference import in_compute_dtype
        d = 2 * a["factor"] * (in_compute_dtype(ins[0]) - in_compute_dtype(ins[1])) * in_compute_dtype(ins[2])
        return d if a["wrt"] == 0 else -d
