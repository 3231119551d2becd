"""`netc export --format onnx`: a network as an ONNX model (inference, parameters included), built with the
`onnx` package (helper, numpy_helper, checker: no hand-written protobuf).

Each op says how it is written in its OpDef.onnx rule (netc/ops/), through the OnnxWriter below: the
writer holds the graph being built, the parameters, and the layout each 4-d value is in. netc's images
are NHWC and ONNX's image ops (Conv, MaxPool, AveragePool, LRN) take NCHW, so a value carries its layout:
an image op asks for NCHW, a layer that flattens (InnerProduct, Softmax, Reshape) for netc's own order,
a layer that does not care (ReLU, Concatenate with its axis mapped, Elementwise, Dropout) takes what it
is given. A Transpose is written only where a consumer needs the other layout (once per value and
layout): a CNN gets one after its input and none between its convolutions. The model's inputs and
outputs keep netc's shapes and layout (NHWC), so the exported model is fed what `netc run` is fed. An
InnerProduct reading an NCHW image has its weight rows permuted instead of the image transposed.

Losses (and the inputs only they read, their labels) are not inference: they are left out, with a
warning. A layer without an ONNX rule is an error that names every such layer of the network at once.
The model is checked with onnx.checker before it is written; tests run it in onnxruntime against the
reference executor on the same inputs and parameters.
"""
from __future__ import annotations

import numpy as np

from ..diagnostics import NetcError

OPSET = 17
NHWC_TO_NCHW = [0, 3, 1, 2]
NCHW_TO_NHWC = [0, 2, 3, 1]


def need_onnx():
    try:
        import onnx
    except ImportError:
        raise NetcError("netc export --format onnx needs the onnx package: pip install 'netc[onnx]' "
                        "(or pip install onnx)") from None
    return onnx


class OnnxWriter:
    """The graph being written: `nodes`, `initializers`, and where each IR value stands (its ONNX name
    and layout: "nhwc" as netc holds it, or "nchw"). The ops' OpDef.onnx rules call it."""

    def __init__(self, params: dict):
        self.onnx = need_onnx()
        self.params = params                 # {parameter name: tensor (any float dtype)}
        self.nodes, self.initializers = [], []
        self.where: dict = {}                # id(value) -> {layout: ONNX name}
        self.layout_of: dict = {}            # id(value) -> the layout of its first name
        self._names: set = set()
        self._params_written: dict = {}

    # -- names ------------------------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        from ..ir.query import unique_name
        return unique_name("".join(c if c.isalnum() or c in "._-" else "_" for c in hint) or "v", self._names)

    # -- values -----------------------------------------------------------------------------------
    def bind(self, value, name: str, layout: str = "nhwc"):
        self.where.setdefault(id(value), {})[layout] = name
        self.layout_of.setdefault(id(value), layout)

    def layout(self, op, i: int = 0) -> str:
        return self.layout_of[id(op.operands[i])]

    def x(self, op, i: int = 0, layout: str | None = None) -> str:
        """Operand i of `op` by its ONNX name, in `layout` ("nhwc", "nchw"; None: as it stands). A 4-d
        value in the other layout is transposed once; later readers share the transpose."""
        v = op.operands[i]
        names = self.where[id(v)]
        if layout is None or layout in names or len(v.type.shape) != 4:
            return names.get(layout) or names[self.layout_of[id(v)]]
        src = names[self.layout_of[id(v)]]
        perm = NHWC_TO_NCHW if layout == "nchw" else NCHW_TO_NHWC
        out = self.node("Transpose", [src], hint=f"{src}.{layout}", perm=perm)
        names[layout] = out
        return out

    def result(self, op, name: str, layout: str = "nhwc"):
        self.bind(op.results[0], name, layout if len(op.results[0].type.shape) == 4 else "nhwc")

    # -- nodes and parameters -----------------------------------------------------------------------
    def node(self, op_type: str, inputs: list, hint: str = "", **attrs) -> str:
        out = self.fresh(hint or op_type)
        self.nodes.append(self.onnx.helper.make_node(op_type, list(inputs), [out], name=self.fresh("n_" + out),
                                                     **attrs))
        return out

    def param(self, op, role: str, transform=None, suffix: str = "") -> str:
        """The initializer of `op`'s parameter `role` (its netc name; `transform`: a function of the
        float32 numpy array, e.g. HWIO -> OIHW, written under name + suffix)."""
        ref = (op.attrs.get("params") or {}).get(role)
        name = getattr(ref, "name", ref)
        if name is None or name not in self.params:
            raise NetcError(f"no value for parameter '{role}' of layer '{op.attrs.get('name')}'")
        key = (name, suffix)
        if key in self._params_written:
            return self._params_written[key]
        arr = self.params[name].detach().double().cpu().numpy().astype(np.float32)
        if transform is not None:
            arr = np.ascontiguousarray(transform(arr))
        out = self.fresh(name + suffix)
        self.initializers.append(self.onnx.numpy_helper.from_array(arr, out))
        self._params_written[key] = out
        return out

    def const(self, values, hint: str, dtype=np.int64) -> str:
        out = self.fresh(hint)
        self.initializers.append(self.onnx.numpy_helper.from_array(np.asarray(values, dtype=dtype), out))
        return out

    def activation(self, name: str, act: str | None, hint: str) -> str:
        """`name` through netc's fused activation `act` (none, relu, sigmoid, tanh)."""
        op_type = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh"}.get(act or "none")
        if act not in (None, "none") and op_type is None:
            raise NetcError(f"no ONNX form for the fused activation '{act}'")
        return self.node(op_type, [name], hint=hint) if op_type else name

    def window_pads(self, op, name: str, kh: int, kw: int, strides, padding, hint: str) -> tuple:
        """(ONNX name, pads [top, left, bottom, right]) of an NCHW image for a window sweep with netc's
        (Paleo's) padding: ONNX's pads where they are >= 0; a negative pad (netc drops rows a window would
        overhang) crops first, with a Slice."""
        from ..ops.reference import pads
        x = op.operands[0].type.shape            # NHWC
        oh, ow, t, b, l, r = pads(x[1], x[2], kh, kw, strides[1], strides[2], padding)
        # rows netc's sweep never reaches at the bottom/right: ONNX's rounding down drops them too when they
        # are fewer than a stride (a VALID 3x3/2 pool of 32 rows), so no crop is written for them
        if b < 0 and (x[1] + max(t, 0) - kh) // strides[1] + 1 == oh:
            b = 0
        if r < 0 and (x[2] + max(l, 0) - kw) // strides[2] + 1 == ow:
            r = 0
        if min(t, b, l, r) < 0:
            starts = [max(0, -t), max(0, -l)]
            ends = [x[1] - max(0, -b), x[2] - max(0, -r)]
            name = self.node("Slice", [name, self.const(starts, hint + ".starts"), self.const(ends, hint + ".ends"),
                                       self.const([2, 3], hint + ".axes")], hint=hint + ".crop")
        return name, [max(0, t), max(0, l), max(0, b), max(0, r)]


def export_onnx(module, network=None, params: dict | None = None, seed: int = 0, warn=None) -> bytes:
    """The ONNX model (serialized) of `network` (the module's only one by default) of an inferred module
    (pipelines.inference, phase test), with `params` (tensors by name; default: the reference executor's
    random parameters for `seed`, as `netc run` draws them). `warn(message)` is told what was left out."""
    onnx = need_onnx()
    from ..ir.query import layer_name, layers, network_inputs, network_outputs
    from ..ops import lookup
    from ..runtime.reference import module_params, network_of
    net = network_of(module, network)
    params = module_params(module, params, seed)     # given ones checked, the rest the reference's draw
    w = OnnxWriter(params)
    ops = layers(net)
    # what only losses read is left out: the losses, and inputs no other layer reads
    losses = [op for op in ops if getattr(lookup(op.name), "is_loss", False)]
    dropped = {id(op) for op in losses}
    readers: dict = {}
    for op in ops:
        for v in op.operands:
            readers.setdefault(id(v), []).append(op)
    for op in network_inputs(net):
        rs = readers.get(id(op.results[0]), [])
        if rs and all(id(r) in dropped for r in rs):
            dropped.add(id(op))
    missing = [f"'{layer_name(op)}' ({op.name})" for op in ops
               if id(op) not in dropped and op.name != "netc.input" and not lookup(op.name).writes_onnx()]
    if missing:
        raise NetcError(f"no ONNX form for {len(missing)} layer{'s' if len(missing) > 1 else ''}: {', '.join(missing)}")
    if losses and warn:
        warn(f"left out of the ONNX model (losses are not inference): {', '.join(layer_name(op) for op in losses)}"
             + "".join(f"; input '{layer_name(op)}' (only losses read it)" for op in network_inputs(net)
                       if id(op) in dropped))
    elem = onnx.TensorProto.FLOAT
    kept_outputs = [op for op in network_outputs(net) if id(op) not in dropped]
    for op in kept_outputs:            # the model's outputs are named as the layers: reserved first
        w.fresh(layer_name(op))
    graph_inputs = []
    for op in network_inputs(net):
        if id(op) in dropped:
            continue
        v = op.results[0]
        ints = {"i32": onnx.TensorProto.INT32, "i64": onnx.TensorProto.INT64}
        if v.type.dtype not in ("f32", "f16", "bf16", "f64") and v.type.dtype not in ints:
            raise NetcError(f"input '{layer_name(op)}' is {v.type.dtype}: the ONNX export takes float inputs and "
                            f"integer (i32, i64) ids")
        name = w.fresh(layer_name(op))
        graph_inputs.append(onnx.helper.make_tensor_value_info(name, ints.get(v.type.dtype, elem), list(v.type.shape)))
        w.bind(v, name)
    for op in ops:
        if op.name == "netc.input" or id(op) in dropped:
            continue
        d = lookup(op.name)
        d.onnx(d.attrs_of(op), w, op)
    graph_outputs = []
    for op in kept_outputs:
        v, out = op.results[0], layer_name(op)
        w.nodes.append(onnx.helper.make_node("Identity", [_nhwc_name(w, v)], [out], name=w.fresh("n_" + out)))
        graph_outputs.append(onnx.helper.make_tensor_value_info(out, elem, list(v.type.shape)))
    graph = onnx.helper.make_graph(w.nodes, net.attrs.get("sym_name", "network"), graph_inputs, graph_outputs,
                                   w.initializers)
    model = onnx.helper.make_model(graph, producer_name="netc", opset_imports=[onnx.helper.make_opsetid("", OPSET)])
    model.ir_version = min(model.ir_version, 8)     # onnxruntime releases read IR 8 with opset 17
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()


def _nhwc_name(w: OnnxWriter, v) -> str:
    names = w.where[id(v)]
    if "nhwc" in names:
        return names["nhwc"]
    out = w.node("Transpose", [names["nchw"]], hint=names["nchw"] + ".nhwc", perm=NCHW_TO_NHWC)
    names["nhwc"] = out
    return out
