"""ONNX models in (issue 27): `netc import model.onnx -o model.nd` and every command taking a .onnx file.

The model is read with the `onnx` package (load, checker, version_converter to opset 17 from opset 7 or
later, shape_inference), never with hand-written protobuf. It becomes .nd source (so `netc import` writes
what the other commands read) plus its parameter values:

* NCHW becomes netc's NHWC as it is read, not by transposes left in the program: a 4-d value is held
  in netc's layout and the ops' axes are mapped (Concat's axis 1 is netc's 3); Conv filters OIHW become
  HWIO; a Gemm or MatMul after a Flatten of an image gets its weight rows permuted from ONNX's (c, h, w)
  order to netc's (h, w, c). The model's inputs are declared NHWC ([N, C, H, W] becomes [N, H, W, C]).
* Constant subgraphs (Shape -> Gather -> Concat -> Reshape, Constant, ConstantOfShape, Unsqueeze ...) are
  evaluated at import with onnx.reference on the static shapes, so a Reshape gets its shape as a number.
* Initializers become parameters named as in the model; a BatchNormalization is folded into netc's
  inference affine (scale / sqrt(var + eps), shift - mean * that); a Conv or Gemm followed by an Add of
  a constant vector takes it as its bias.
* An op netc lacks is one error that lists every unsupported op of the model (node name and op type)
  at once, with the model's path.

`params_of(path)` gives the converted values (the reference executor uses them for a .onnx file:
reference.module_params), and `netc import` writes them beside the .nd as an .npz.
"""
from __future__ import annotations

import os

import numpy as np

from ..diagnostics import Loc, NetcError
from .onnx_recurrent import recurrent_node
from .onnx_shuffle import channel_gather, channel_shuffle

OPSET = 17
_CACHE: dict = {}


def need_onnx():
    try:
        import onnx
    except ImportError:
        raise NetcError("reading an ONNX model needs the onnx package: pip install 'netc[onnx]' "
                        "(or pip install onnx)") from None
    return onnx


def is_onnx(path: str) -> bool:
    return os.path.splitext(path)[1].lower() == ".onnx"


class _Import:
    """The model being translated: .nd lines, parameter values, and each ONNX value's netc name, shape
    (netc's layout) and whether it is a 4-d image held NHWC (its ONNX axes are NCHW)."""

    def __init__(self, model, path):
        from onnx import numpy_helper
        self.path = path
        self.graph = model.graph
        self.consts = {t.name: numpy_helper.to_array(t) for t in self.graph.initializer}
        self.lines, self.values, self.names = [], {}, set()
        self.shape: dict = {}      # ONNX name -> its ONNX shape (static)
        self.netc: dict = {}       # ONNX name -> netc value name
        self.image: dict = {}      # ONNX name -> True for a 4-d NCHW value held NHWC
        self.flat_of: dict = {}    # ONNX name -> (c, h, w) of the image a Flatten made it from
        self.nhwc_inputs: set = set()
        self.channel_of: set = set()  # [N, H, W]: one channel of an image (x[:, c]), held NHWC [N, H, W, 1]
        self.squeezed: set = set()  # inputs [1, B, H] declared [B, H]: a recurrent op's initial state
        self.transposed: set = set()  # nodes translated with another: a recurrence's Y Transposes, a channel shuffle's
        for vi in list(self.graph.value_info) + list(self.graph.input) + list(self.graph.output):
            dims = [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]
            self.shape[vi.name] = dims

    def fresh(self, hint: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in hint).strip("_") or "v"
        if not (base[0].isalpha() or base[0] == "_"):
            base = "v_" + base
        from .nd_writer import name as nd_name
        if nd_name(base) != base:          # a keyword of the language ('input', 'output', ...)
            base += "_"
        from ..ir.query import unique_name
        return unique_name(base, self.names)

    def err(self, node, message: str) -> NetcError:
        return NetcError(f"node '{node.name or node.output[0]}' ({node.op_type}): {message}", Loc(self.path))

    def value(self, node, i: int = 0) -> str:
        """The netc name of the node's computed input i (a constant there is an error)."""
        return _in(self, node, i)

    @staticmethod
    def nd(v) -> str:
        """v written as an .nd attribute value."""
        return _nd(v)

    @staticmethod
    def attrs(node) -> dict:
        """The node's attributes by name."""
        return _attrs(node)

    def param(self, hint: str, array) -> str:
        name = self.fresh(hint)
        self.values[name] = np.ascontiguousarray(np.asarray(array, dtype=np.float32))
        return name


def _attrs(node) -> dict:
    from onnx import helper
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


SUPPORTED = ("Transpose", "Conv", "Gemm", "MatMul", "Add", "Sum", "Mul", "Sub", "Div", "Relu", "LeakyRelu", "Sigmoid", "Tanh",
             "Clip", "MaxPool",
             "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LRN", "Concat", "Flatten", "Reshape", "Dropout",
             "Identity", "Softmax", "BatchNormalization", "Gather", "LSTM", "GRU", "Squeeze", "Unsqueeze")
FOLDABLE = ("Constant", "ConstantOfShape", "Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "Cast", "Slice",
            "Range", "Add", "Mul", "Sub", "Div", "Reshape", "Identity", "ReduceProd", "Equal", "Where", "Expand")


def load_model(path: str):
    onnx = need_onnx()
    try:
        model = onnx.load(path)
    except Exception as e:     # noqa: BLE001 - the package's own message, located at the file
        raise NetcError(f"not an ONNX model that the onnx package can read: {e}", Loc(path)) from None
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as e:
        raise NetcError(f"the onnx checker refuses the model: {str(e).splitlines()[0]}", Loc(path)) from None
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None or opset < 7:
        raise NetcError(f"opset {opset} of the default domain; netc reads opsets 7 and later", Loc(path))
    if opset != OPSET:
        from onnx import version_converter
        try:
            model = version_converter.convert_version(model, OPSET)
        except Exception as e:     # noqa: BLE001
            raise NetcError(f"converting opset {opset} to {OPSET} failed: {e}", Loc(path)) from None
    try:
        return onnx.shape_inference.infer_shapes(model, strict_mode=True)
    except onnx.shape_inference.InferenceError as e:
        raise NetcError(f"the onnx shape inference refuses the model: {str(e).splitlines()[0][:300]}",
                        Loc(path)) from None


def _fold_constants(imp: _Import, nodes) -> list:
    """Evaluate every node whose inputs are all known (initializers, constants, static shapes) with
    onnx.reference; returns the nodes left to translate."""
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator
    rest = []
    for node in nodes:
        src = node.input[0] if node.input else None
        dims = list(imp.consts[src].shape) if src in imp.consts else imp.shape.get(src)
        if node.op_type == "Shape" and dims is not None and all(d is not None for d in dims):
            a = _attrs(node)
            s = np.array(dims, dtype=np.int64)[a.get("start", 0):a.get("end", None)]
            imp.consts[node.output[0]] = s
            continue
        if node.op_type == "ConstantOfShape" and node.input and node.input[0] in imp.consts:
            # (numpy at once: the light models of the ONNX test suite make every weight so)
            value = _attrs(node).get("value")
            fill = numpy_helper.to_array(value).reshape(-1) if value is not None else np.zeros(1, np.float32)
            imp.consts[node.output[0]] = np.full(tuple(int(d) for d in imp.consts[node.input[0]]), fill[0], fill.dtype)
            continue
        if node.op_type in FOLDABLE and all(i in imp.consts or i == "" for i in node.input):
            g = helper.make_graph([node], "fold", [], [helper.make_tensor_value_info(o, 0, None) for o in node.output])
            try:
                outs = ReferenceEvaluator(helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)]))\
                    .run(None, {i: imp.consts[i] for i in node.input if i})
            except Exception as e:     # noqa: BLE001
                raise imp.err(node, f"cannot evaluate this constant subgraph at import: {e}") from None
            for o, v in zip(node.output, outs):
                imp.consts[o] = np.asarray(v)
            continue
        rest.append(node)
    return rest


def _reinfer_shapes(imp, model, nodes):
    """Shape inference again over the nodes left, the folded constants as initializers: a Reshape whose
    shape was computed (Shape -> Gather -> Concat) now has a static output."""
    import onnx
    from onnx import helper, numpy_helper
    used = {i for n in nodes for i in n.input}
    # small constants by value (a Reshape's computed shape); large ones (weights) by their type alone: shape
    # inference needs no values there, and serializing hundreds of MB each round made imports take seconds
    small = {k: np.asarray(v) for k, v in imp.consts.items() if k in used and np.asarray(v).size <= 4096}
    typed = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype), list(np.shape(v)))
             for k, v in imp.consts.items() if k in used and k not in small]
    inits = [numpy_helper.from_array(v, k) for k, v in small.items()]
    g = helper.make_graph(nodes, model.graph.name or "g",
                          [i for i in model.graph.input if i.name not in imp.consts] + typed,
                          list(model.graph.output), inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    m = onnx.shape_inference.infer_shapes(m)
    for vi in list(m.graph.value_info) + list(m.graph.output):
        dims = [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]
        if dims and all(d is not None for d in dims):
            imp.shape[vi.name] = dims


def translate(path: str):
    """(.nd text, parameter values by name, the inputs' and outputs' netc names and layouts) of the ONNX model at `path`."""
    model = load_model(path)
    imp = _Import(model, path)
    nodes = list(imp.graph.node)
    while True:       # folding gives static shapes, which let more fold (a Shape of a computed reshape)
        left = _fold_constants(imp, nodes)
        _reinfer_shapes(imp, model, left)
        if len(left) == len(nodes):
            break
        nodes = left
    bad = [f"'{n.name or n.output[0]}' ({n.op_type})" for n in nodes if n.op_type not in SUPPORTED]
    if bad:
        raise NetcError(f"{len(bad)} node{'s' if len(bad) > 1 else ''} of op types netc does not read yet: "
                        f"{', '.join(bad[:20])}{' ...' if len(bad) > 20 else ''}", Loc(path))
    inits = set(imp.consts)
    title = os.path.splitext(os.path.basename(path))[0]
    lines = [f"# Imported from {os.path.basename(path)} (ONNX, opset {OPSET}): NCHW read as netc's NHWC",
             f"network {imp.fresh(title)} {{"]
    consumers: dict = {}
    for n in nodes:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    for vi in imp.graph.input:
        if vi.name in inits:
            continue
        dims = imp.shape.get(vi.name)
        bounds = [u for u in consumers.get(vi.name, []) if u.op_type == "Clip" and vi.name in list(u.input)[1:]]
        if bounds:
            raise NetcError(f"input '{vi.name}' is a bound of Clip '{bounds[0].name or bounds[0].output[0]}': netc's "
                            f"Clip takes constant bounds (initializers or constants)", Loc(path))
        if not dims or any(d is None for d in dims):
            raise NetcError(f"input '{vi.name}' has a dynamic shape {dims}; give it a fixed one "
                            f"(onnx.tools.update_model_dims)", Loc(path))
        elem = vi.type.tensor_type.elem_type
        users = consumers.get(vi.name, [])
        ids = elem in (6, 7) and users and all(
            (u.op_type == "Gather" and len(u.input) > 1 and u.input[1] == vi.name)
            or (u.op_type in ("LSTM", "GRU") and list(u.input).index(vi.name) == 4) for u in users)
        if elem != 1 and not ids:
            raise NetcError(f"input '{vi.name}' is not float32 (ONNX type {elem}); netc reads float inputs, and "
                            f"integer ones (int32, int64) only as the ids of a Gather from a table or the "
                            f"sequence_lens of an LSTM/GRU", Loc(path))
        name = imp.fresh(vi.name)
        imp.netc[vi.name] = name
        if len(dims) == 3 and dims[0] == 1 and users and all(
                u.op_type in ("LSTM", "GRU") and vi.name in list(u.input)[5:7] and list(u.input).count(vi.name) == 1
                for u in users):
            # an initial state [1, B, H] only a recurrent op reads: netc's [B, H] (fed whole, not batch-sized)
            imp.squeezed.add(vi.name)
            lines.append(f"  input {name}: f32[{', '.join(map(str, dims[1:]))}]")
            continue
        if ids:
            lines.append(f"  input {name}: {'i64' if elem == 7 else 'i32'}[{', '.join(map(str, dims))}]")
            continue
        if len(dims) == 4 and users and all(u.op_type == "Transpose" and list(_attrs(u).get("perm", [])) == [0, 3, 1, 2]
                                            for u in users):
            # an NHWC input transposed into NCHW (what netc's export writes): netc's layout as it is
            imp.nhwc_inputs.add(vi.name)
        elif len(dims) == 4:
            imp.image[vi.name] = True
            dims = [dims[0], dims[2], dims[3], dims[1]]
        lines.append(f"  input {name}: f32[{', '.join(map(str, dims))}]")
    imp.lines = lines
    for node in nodes:
        _translate_node(imp, node)
    for o in imp.graph.output:
        c_h_w = imp.flat_of.get(o.name)
        if c_h_w and c_h_w[1] * c_h_w[2] > 1:
            raise NetcError(f"output '{o.name}' is an image flattened in ONNX's (c, h, w) order, which netc "
                            f"holds as (h, w, c)", Loc(path))
    outs = [imp.netc[o.name] for o in imp.graph.output if o.name in imp.netc]
    missing = [o.name for o in imp.graph.output if o.name not in imp.netc]
    if missing:
        raise NetcError(f"output{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                        f"{'are' if len(missing) > 1 else 'is'} constant: nothing to compute", Loc(path))
    imp.lines.append(f"  output {', '.join(outs)}")
    imp.lines.append("}")
    # how the model's inputs and outputs meet netc's: an NCHW image is held NHWC (frontend docstring)
    io = {"inputs": {vi.name: (imp.netc[vi.name], "nchw" if imp.image.get(vi.name) else
                               "drop_axis0" if vi.name in imp.squeezed else "as_is")
                     for vi in imp.graph.input if vi.name in imp.netc},
          "outputs": {o.name: (imp.netc[o.name], "nchw" if imp.image.get(o.name) else "as_is")
                      for o in imp.graph.output}}
    return "\n".join(imp.lines) + "\n", imp.values, io


def _key(path: str) -> tuple:
    if not os.path.isfile(path):
        raise NetcError(f"no such file: '{path}'")
    return os.path.abspath(path), os.path.getmtime(path)


def params_of(path: str) -> dict:
    """The model's parameters in netc's layouts, by the names the import gives them (cached per file)."""
    key = _key(path)
    if key not in _CACHE:
        _CACHE[key] = translate(path)
    return _CACHE[key][1]


def write_params_beside(path: str, nd_path: str, diag) -> None:
    """`netc import MODEL.onnx -o MODEL.nd`: the model's parameters into MODEL.npz beside it, as `netc run --params`
    takes them (a warning with -o -, which has no place beside it)."""
    import os
    import sys
    import numpy as np
    values = params_of(path)
    if nd_path == "-":
        diag.warning(f"the model's {len(values)} parameter tensors are not written with -o -: give -o MODEL.nd to "
                     f"get MODEL.npz beside it")
        return
    npz = os.path.splitext(nd_path)[0] + ".npz"
    np.savez(npz, **values)
    sys.stderr.write(f"netc: wrote {nd_path} and its {len(values)} parameter tensors {npz} "
                     f"(netc run {nd_path} --params {npz})\n")


def import_onnx(path: str, diag=None):
    """The IR module of the ONNX model at `path` (its .nd translation parsed; its values: params_of)."""
    key = _key(path)
    if key not in _CACHE:
        _CACHE[key] = translate(path)
    text, _, io = _CACHE[key]
    from .dsl import parse_nd
    from ..diagnostics import SOURCES
    shown = path + " (as .nd)"
    SOURCES.add(shown, text)
    module = parse_nd(text, shown, diag)
    module.attrs["onnx_source"] = os.path.abspath(path)
    module.attrs["onnx_io"] = io
    return module


# -- the nodes ------------------------------------------------------------------------------------------

def _in(imp, node, i=0):
    name = node.input[i]
    if name in imp.consts:
        raise imp.err(node, f"input {i} ('{name}') is a constant where netc needs a computed value")
    return imp.netc[name]


def _emit(imp, node, layer: str, args: list, attrs: dict, image=None, out_shape=None):
    # a model output keeps its name, also through an Identity or Dropout that only renames it
    named = {o.name: o.name for o in imp.graph.output}
    for n in imp.graph.node:
        if n.op_type in ("Identity", "Dropout") and n.output[0] in named:
            named.setdefault(n.input[0], n.output[0])
    name = imp.fresh(named.get(node.output[0]) or node.name or node.output[0])
    body = ", ".join(f"{k}: {_nd(v)}" for k, v in attrs.items() if v is not None)
    imp.lines.append(f"  {name} = {layer}({', '.join(args)})" + (f" {{ {body} }}" if body else ""))
    imp.netc[node.output[0]] = name
    if image is None:
        image = len(imp.shape.get(node.output[0]) or []) == 4
    if image:
        imp.image[node.output[0]] = True
    return name


def _nd(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_nd(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k}: {_nd(x)}" for k, x in v.items()) + " }"
    if isinstance(v, float):
        return repr(float(v))
    return str(v)


def _ceil_size(h, k, s, before, after):
    """ONNX's (and torch's) ceil_mode output size along one axis: rounded up, less the last window when it
    would start past the input and the padding before it (in the padding after it)."""
    o = -(-(h + before + after - k) // s) + 1
    return o - 1 if (o - 1) * s >= h + before else o


def _window(imp, node, a, kh, kw, pool=False):
    """netc's padding for ONNX's pads / auto_pad: "VALID", "SAME" or [top, left] (floor rounding), checked
    against the output size ONNX infers; for a pool also [top, left, bottom, right], which takes pads on one
    side only and ceil_mode (the bottom/right padding that gives ONNX's rounded-up output size)."""
    auto = a.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if a.get("dilations") and any(d != 1 for d in a["dilations"]):
        raise imp.err(node, f"dilations {list(a['dilations'])}: netc's windows are not dilated")
    if a.get("ceil_mode") and auto == "NOTSET":
        return _ceil_window(imp, node, a, kh, kw)
    if auto in ("SAME_UPPER",):
        return "SAME"
    if auto == "SAME_LOWER":
        raise imp.err(node, "auto_pad SAME_LOWER (more padding at the top): netc's SAME pads the bottom more")
    if auto == "VALID":
        return "VALID"
    p = list(a.get("pads") or [0, 0, 0, 0])
    if p == [0, 0, 0, 0]:
        return "VALID"
    t, l = p[0], p[1]
    h, w = imp.shape[node.input[0]][2], imp.shape[node.input[0]][3]
    s = list(a.get("strides") or [1, 1])
    want = imp.shape.get(node.output[0])
    got = [(h + t + p[2] - kh) // s[0] + 1, (w + l + p[3] - kw) // s[1] + 1]
    mine = [(h + 2 * t - kh) // s[0] + 1, (w + 2 * l - kw) // s[1] + 1]
    from ..ops.geometry import window_geometry
    if mine == got:
        return [t, l]
    sh = window_geometry(h, w, kh, kw, s[0], s[1], "SAME")
    if [sh[0], sh[1]] == got and [sh[2], sh[3]] == [t, l]:
        return "SAME"
    if pool:
        return p
    raise imp.err(node, f"pads {p} (output {want}): netc's convolutions pad [top, left] and round down, or as SAME")


def _ceil_window(imp, node, a, kh, kw):
    """A pool's ceil_mode 1 as explicit padding: ONNX's pads with the bottom/right grown until netc's
    rounding down gives ONNX's rounded-up size (the windows it adds overhang the input: the max and the
    average read only their in-bounds elements, as ONNX's do); the plain [top, left] where it gives that
    size too."""
    p = list(a.get("pads") or [0, 0, 0, 0])
    h, w = imp.shape[node.input[0]][2], imp.shape[node.input[0]][3]
    s = list(a.get("strides") or [1, 1])
    size = [_ceil_size(h, kh, s[0], p[0], p[2]), _ceil_size(w, kw, s[1], p[1], p[3])]
    want = imp.shape.get(node.output[0])
    if want and list(want[2:]) != size:
        raise imp.err(node, f"ceil_mode 1 gives {size} rows and columns here, the onnx shape inference "
                            f"{list(want[2:])}")
    if size == [(h + 2 * p[0] - kh) // s[0] + 1, (w + 2 * p[1] - kw) // s[1] + 1]:
        return [p[0], p[1]] if any(p[:2]) else "VALID"
    return [p[0], p[1], (size[0] - 1) * s[0] + kh - h - p[0], (size[1] - 1) * s[1] + kw - w - p[1]]


def _chw_rows(imp, node, w_kn):
    """A [K, N] weight whose K rows follow ONNX's (c, h, w) flattening of an image, reordered to netc's
    (h, w, c) when the operand was flattened from an NCHW image."""
    src = node.input[0]
    if src in imp.flat_of:
        c, h, wd = imp.flat_of[src]
        n = w_kn.shape[1]
        return w_kn.reshape(c, h, wd, n).transpose(1, 2, 0, 3).reshape(c * h * wd, n)
    if imp.image.get(src):
        c, h, wd = imp.shape[src][1:]
        n = w_kn.shape[1]
        return w_kn.reshape(c, h, wd, n).transpose(1, 2, 0, 3).reshape(c * h * wd, n)
    return w_kn


ORDER_FREE = ("Identity", "Dropout", "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip")


def _translate_node(imp, node):
    a = _attrs(node)
    op = node.op_type
    # a value flattened from an NCHW image holds netc's (h, w, c) order where ONNX has (c, h, w): only a
    # product (its weight rows reordered) or an op that does not care about order may read it
    for i in node.input:
        c_h_w = imp.flat_of.get(i)
        if c_h_w and c_h_w[1] * c_h_w[2] > 1 and op not in ORDER_FREE + ("Gemm", "MatMul") \
                and not (op in ARITHMETIC and _scalar_operand(imp, node)):
            raise imp.err(node, f"reads '{i}', an image flattened in ONNX's (c, h, w) order, which netc holds as "
                                f"(h, w, c): only a Gemm/MatMul (its weight rows reordered) or an elementwise "
                                f"activation may read it")
        if i in imp.channel_of and op != "Unsqueeze":
            raise imp.err(node, f"reads '{i}', one channel of an NCHW image taken without its axis: netc reads it "
                                f"only unsqueezed back to [N, 1, H, W]")
    if op in ("Identity", "Dropout") or (op == "Concat" and len(node.input) == 1):   # (DenseNet's torch.cat([x]))
        imp.netc[node.output[0]] = _in(imp, node)
        imp.image[node.output[0]] = imp.image.get(node.input[0], False)
        if node.input[0] in imp.flat_of:
            imp.flat_of[node.output[0]] = imp.flat_of[node.input[0]]
        return
    if node.output[0] in imp.transposed:     # (done with its recurrence or its channel shuffle)
        return
    if op == "Transpose":
        perm = list(a.get("perm", []))
        src = node.input[0]
        if src in imp.nhwc_inputs and perm == [0, 3, 1, 2]:          # NHWC -> NCHW: netc holds it so already
            imp.netc[node.output[0]] = _in(imp, node)
            imp.image[node.output[0]] = True
            return
        if imp.image.get(src) and perm == [0, 2, 3, 1]:               # NCHW -> NHWC: netc's own layout
            imp.netc[node.output[0]] = _in(imp, node)
            imp.image[node.output[0]] = False
            return
        raise imp.err(node, f"a transpose {perm} that is not a change between NCHW and NHWC")
    if op in ("Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LRN") \
            and not imp.image.get(node.input[0]):
        rank = len(imp.shape.get(node.input[0]) or [])
        if rank and rank != 4:
            raise imp.err(node, f"a {rank - 2}-d {op} (input rank {rank}): netc's image ops are 2-d, on NCHW images")
        raise imp.err(node, "an image op on a 4-d value that is not an NCHW image")
    if op in ("Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LRN"):
        return _image_node(imp, node, a, op)
    if op in ("Gemm", "MatMul"):
        return _product_node(imp, node, a, op)
    if op in ARITHMETIC and any(i in imp.consts for i in node.input):
        return _constant_affine(imp, node, op)
    if op in ("Sub", "Div"):
        raise imp.err(node, f"{op} of two computed values is not read yet (with a constant operand it is an affine)")
    if op in ("Add", "Sum", "Mul"):
        if len({tuple(imp.shape.get(i) or []) for i in node.input}) != 1:
            raise imp.err(node, "operands of different shapes (broadcasting) are not read yet")
        _emit(imp, node, "Elementwise", [_in(imp, node, i) for i in range(len(node.input))],
              {"operation": "product" if op == "Mul" else "sum"})
        return
    if op in ("Relu", "Sigmoid", "Tanh", "LeakyRelu"):
        layer = {"Relu": "ReLU", "Sigmoid": "Sigmoid", "Tanh": "Tanh", "LeakyRelu": "ReLU"}[op]
        attrs = {"negative_slope": float(a.get("alpha", 0.01))} if op == "LeakyRelu" else {}
        _emit(imp, node, layer, [_in(imp, node)], attrs, image=imp.image.get(node.input[0], False))
        if node.input[0] in imp.flat_of:
            imp.flat_of[node.output[0]] = imp.flat_of[node.input[0]]
        return
    if op == "Clip":
        return _clip(imp, node)
    if op == "Concat":
        r = len(imp.shape[node.output[0]])
        axis = a["axis"] % r
        images = [imp.image.get(i, False) for i in node.input]
        if r == 4 and all(images):
            axis = [0, 3, 1, 2][axis]
        elif any(images):
            raise imp.err(node, "a concatenation of images with other values")
        _emit(imp, node, "Concatenate", [_in(imp, node, i) for i in range(len(node.input))], {"dim": axis},
              image=r == 4 and all(images))
        return
    if op == "Unsqueeze" and node.input[0] in imp.channel_of:
        n, h, w = imp.shape[node.input[0]]
        if list(imp.shape[node.output[0]]) != [n, 1, h, w]:
            raise imp.err(node, "one channel of an image unsqueezed elsewhere than at its channel axis")
        imp.netc[node.output[0]], imp.image[node.output[0]] = imp.netc[node.input[0]], True
        return
    if op in ("Squeeze", "Unsqueeze") and not imp.image.get(node.input[0]):   # (an image's: below, refused)
        _emit(imp, node, "Reshape", [_in(imp, node)], {"output_shape": list(imp.shape[node.output[0]])}, image=False)
        return
    if op == "Reshape" and imp.image.get(node.input[0]) and channel_shuffle(imp, node):   # onnx_shuffle.py
        return
    if op in ("Flatten", "Reshape", "Squeeze", "Unsqueeze"):
        src = node.input[0]
        out = imp.shape[node.output[0]]
        if op == "Flatten" and a.get("axis", 1) != 1:
            raise imp.err(node, f"axis {a['axis']}: netc flattens to [N, rest]")
        if imp.image.get(src):
            if len(out) != 2 or out[0] != imp.shape[src][0]:
                raise imp.err(node, f"a reshape of an NCHW image to {out}: only the flattening to [N, C*H*W] keeps "
                                    f"its meaning in netc's NHWC (followed by a product whose rows netc reorders)")
            imp.flat_of[node.output[0]] = tuple(imp.shape[src][1:])
        _emit(imp, node, "Reshape", [_in(imp, node)], {"output_shape": list(out)}, image=False)
        return
    if op == "Softmax":
        r = len(imp.shape[node.input[0]])
        if a.get("axis", -1) % r != r - 1 or r != 2:
            raise imp.err(node, f"softmax over axis {a.get('axis', -1)} of a rank-{r} value: netc's is over the "
                                f"features of [N, K]")
        _emit(imp, node, "Softmax", [_in(imp, node)], {}, image=False)
        return
    if op in ("LSTM", "GRU"):
        return recurrent_node(imp, node, a, op)
    if op == "Gather" and node.input[0] not in imp.consts and node.input[1] in imp.consts:
        return _gather_index(imp, node, a)
    if op == "Gather":
        table, a_ = imp.consts.get(node.input[0]), a.get("axis", 0)
        if table is None or table.ndim != 2 or a_ != 0 or node.input[1] in imp.consts:
            raise imp.err(node, "a Gather of rows (axis 0) of a constant 2-d table by computed ids is what netc reads "
                                "(an embedding)")
        v, d = table.shape
        _emit(imp, node, "Embedding", [_in(imp, node, 1)],
              {"num_embeddings": int(v), "dim": int(d),
               "params": {"table": imp.param(f"{node.name or node.output[0]}_table", table.astype(np.float32))}},
              image=False)
        return
    if op == "BatchNormalization":
        scale, shift, mean, var = (imp.consts.get(i) for i in node.input[1:5])
        if any(v is None for v in (scale, shift, mean, var)):
            raise imp.err(node, "an inference batch norm with constant scale, bias, mean and variance")
        k = scale / np.sqrt(var + a.get("epsilon", 1e-5))
        base = node.name or node.output[0]
        _emit(imp, node, "BatchNorm", [_in(imp, node)],
              {"params": {"scale": imp.param(base + "_scale", k), "shift": imp.param(base + "_shift", shift - mean * k)}},
              image=imp.image.get(node.input[0], False))
        return
    raise imp.err(node, "not read yet")


ARITHMETIC = ("Add", "Sub", "Mul", "Div")
F32_MAX = float(np.finfo(np.float32).max)


def _clip(imp, node):
    """Clip with constant bounds (inputs 1 and 2 since opset 11; torch's ReLU6 and hardtanh): netc's Clip, a
    missing bound the float32 extreme (a lower bound of 0 alone: ReLU; none: the identity)."""
    bounds = []
    for k, default in ((1, -F32_MAX), (2, F32_MAX)):
        name = node.input[k] if len(node.input) > k else ""
        if name and name not in imp.consts:
            raise imp.err(node, f"a computed bound ('{name}'): netc's Clip takes constant bounds")
        bounds.append(float(np.asarray(imp.consts[name]).reshape(-1)[0]) if name else default)
    lo, hi = bounds
    if lo > hi:
        raise imp.err(node, f"min {lo} is above max {hi} (ONNX's result would be max everywhere)")
    src = node.input[0]
    if lo == -F32_MAX and hi == F32_MAX:
        imp.netc[node.output[0]] = _in(imp, node)
        imp.image[node.output[0]] = imp.image.get(src, False)
    elif lo == 0.0 and hi == F32_MAX:
        _emit(imp, node, "ReLU", [_in(imp, node)], {}, image=imp.image.get(src, False))
    else:
        _emit(imp, node, "Clip", [_in(imp, node)], {"min": lo, "max": hi}, image=imp.image.get(src, False))
    if src in imp.flat_of:
        imp.flat_of[node.output[0]] = imp.flat_of[src]


def _scalar_operand(imp, node) -> bool:
    """Whether a binary node has a constant operand of one value."""
    return len(node.input) == 2 and any(i in imp.consts and imp.consts[i].size == 1 for i in node.input)


def _constant_affine(imp, node, op):
    """x + c, x - c, c - x, x * c, x / c with c a constant of one value or one per channel (an NCHW image's
    axis 1, another value's last axis; broadcast over the rest): netc's folded BatchNorm, x * scale + shift
    over the channel axis, with the constant in its scale or shift."""
    if len(node.input) != 2 or all(i in imp.consts for i in node.input):
        raise imp.err(node, f"{op} of constants only (not folded), or of more than two operands")
    xi = 0 if node.input[1] in imp.consts else 1
    x, c = node.input[xi], np.asarray(imp.consts[node.input[1 - xi]], dtype=np.float64)
    shape = list(imp.shape.get(x) or [])
    if list(imp.shape.get(node.output[0]) or []) != shape or not shape:
        raise imp.err(node, f"{op} that broadcasts '{x}' {shape} to a larger shape")
    image = bool(imp.image.get(x))
    axis = 1 if image else len(shape) - 1
    ch = shape[axis]
    if c.size == 1:
        v = np.full(ch, float(c.reshape(-1)[0]))
    else:
        full = [1] * (len(shape) - c.ndim) + list(c.shape)
        if len(full) != len(shape) or any(d != 1 for k, d in enumerate(full) if k != axis) or full[axis] != ch \
                or x in imp.flat_of:
            where = "axis 1 of the NCHW image" if image else "the last axis"
            raise imp.err(node, f"a constant of shape {list(c.shape)} against {shape}: netc reads one value, or one "
                                f"per channel ({where})")
        v = c.reshape(-1)
    if op == "Div" and xi == 1:
        raise imp.err(node, "a constant divided by a value (not an affine of it)")
    if op == "Div" and (v == 0).any():
        raise imp.err(node, "a division by a constant holding zeros")
    one, zero = np.ones(ch), np.zeros(ch)
    scale, shift = {"Add": (one, v), "Mul": (v, zero), "Div": (1.0 / v, zero),
                    "Sub": (one, -v) if xi == 0 else (-one, v)}[op]
    base = node.name or node.output[0]
    _emit(imp, node, "BatchNorm", [_in(imp, node, xi)],
          {"params": {"scale": imp.param(base + "_scale", scale.astype(np.float32)),
                      "shift": imp.param(base + "_shift", shift.astype(np.float32))}}, image=image)
    if x in imp.flat_of:
        imp.flat_of[node.output[0]] = imp.flat_of[x]


def _gather_index(imp, node, a):
    """A Gather of one constant index of a computed value (torch's y[-1]: a sequence's last step) as netc's Slice
    of that index along the axis, reshaped where the index was a scalar (the axis dropped). One channel of an
    NCHW image (torchvision GoogLeNet's transform_input: x[:, 0], unsqueezed) is netc's Slice of the channels."""
    if channel_gather(imp, node, a):      # a permutation of the channels (onnx_shuffle.py; netc's ChannelPermute)
        return
    idx = np.asarray(imp.consts[node.input[1]])
    shape = imp.shape.get(node.input[0]) or []
    if imp.image.get(node.input[0]) and idx.size == 1 and a.get("axis", 0) % 4 == 1:
        c = shape[1]
        _emit(imp, node, "Slice", [_in(imp, node)], {"dim": 3, "num_slices": c, "index": int(idx.reshape(-1)[0]) % c},
              image=idx.ndim == 1)
        if idx.ndim == 0:
            imp.channel_of.add(node.output[0])
        return
    if imp.image.get(node.input[0]) or idx.size != 1 or not shape:
        raise imp.err(node, "a Gather of a computed value is read for one constant index of a value that is not "
                            "an NCHW image (a sequence's step)")
    axis = a.get("axis", 0) % len(shape)
    i = int(idx.reshape(-1)[0]) % shape[axis]
    part = imp.fresh((node.name or node.output[0]) + "_step")
    imp.lines.append(f"  {part} = Slice({_in(imp, node)}) {{ dim: {axis}, num_slices: {shape[axis]}, index: {i} }}")
    if idx.ndim == 0:
        _emit(imp, node, "Reshape", [part], {"output_shape": list(imp.shape[node.output[0]])}, image=False)
    else:
        imp.netc[node.output[0]] = part


MAX_GROUPS = 64


def _grouped_conv(imp, node, w, g, attrs, base):
    """A Conv of `group` g as netc writes one: g convolutions, each on its Slice of the input's channels with
    its part of the filter (and bias), concatenated along the channels (AlexNet's two towers, ShuffleNet's
    groups; a depthwise one, one input channel per group, is netc's DepthwiseConvolution instead). Other
    convolutions of more than MAX_GROUPS groups are refused (so many layers would be no program)."""
    co = w.shape[0]
    cin = (imp.shape.get(node.input[0]) or [0, 0])[1]
    if g > MAX_GROUPS:
        raise imp.err(node, f"group {g}: netc writes a grouped convolution as one convolution per group, up to "
                            f"{MAX_GROUPS} (a depthwise one, one input channel per group, is read at any size)")
    if co % g or cin % g:
        raise imp.err(node, f"group {g} does not divide the {cin} input and {co} output channels")
    x, per = _in(imp, node), co // g
    outs = []
    for k in range(g):
        part = imp.fresh(f"{base}_in{k}")
        imp.lines.append(f"  {part} = Slice({x}) {{ dim: 3, num_slices: {g}, index: {k} }}")
        params = {"weight": imp.param(f"{base}_W{k}", w[k * per:(k + 1) * per].transpose(2, 3, 1, 0))}
        if attrs["bias"]:
            params["bias"] = imp.param(f"{base}_B{k}", imp.consts[node.input[2]][k * per:(k + 1) * per])
        body = ", ".join(f"{key}: {_nd(v)}" for key, v in dict(attrs, params=params).items())
        name = imp.fresh(f"{base}_g{k}")
        imp.lines.append(f"  {name} = Convolution({part}) {{ {body} }}")
        outs.append(name)
    _emit(imp, node, "Concatenate", outs, {"dim": 3}, image=True)


def _image_node(imp, node, a, op):
    """Conv, the pools and LRN: NCHW in ONNX, netc's NHWC ops."""
    if op == "Conv":
        w = imp.consts.get(node.input[1])
        if w is None or len(w.shape) != 4:
            raise imp.err(node, "a 2-d convolution with a constant filter (an initializer) is what netc reads")
        co, ci, kh, kw = w.shape
        s = list(a.get("strides") or [1, 1])
        g = int(a.get("group", 1))
        bias = len(node.input) > 2 and node.input[2] != ""
        attrs = {"filter": [kh, kw, ci, co // g], "strides": [1, s[0], s[1], 1],
                 "padding": _pad_nd(_window(imp, node, a, kh, kw)), "bias": bias}
        base = node.name or node.output[0]
        if g == 1:
            params = {"weight": imp.param(f"{base}_W", w.transpose(2, 3, 1, 0))}
            if bias:
                params["bias"] = imp.param(f"{base}_B", imp.consts[node.input[2]])
            _emit(imp, node, "Convolution", [_in(imp, node)], dict(attrs, params=params), image=True)
            return
        if ci == 1 and g == imp.shape[node.input[0]][1] and co % g == 0:     # depthwise: one channel per group
            m = co // g
            params = {"weight": imp.param(f"{base}_W", w.reshape(g, m, kh, kw).transpose(2, 3, 0, 1))}
            if bias:
                params["bias"] = imp.param(f"{base}_B", imp.consts[node.input[2]])
            _emit(imp, node, "DepthwiseConvolution", [_in(imp, node)],
                  dict(attrs, filter=[kh, kw, g, m], params=params), image=True)
            return
        return _grouped_conv(imp, node, w, g, attrs, base)
    if op in ("MaxPool", "AveragePool"):
        kh, kw = a["kernel_shape"]
        s = list(a.get("strides") or [1, 1])
        if op == "AveragePool" and a.get("count_include_pad", 0) and a.get("pads") and any(a["pads"]):
            # (ceil_mode's overhang is no padding: ONNX and torch divide by the window clipped to the input there)
            raise imp.err(node, "count_include_pad 1 with padding: netc averages over the in-bounds elements")
        pad = _window(imp, node, a, kh, kw, pool=True)
        _emit(imp, node, "Pooling" if op == "MaxPool" else "AvgPool", [_in(imp, node)],
              {"ksize": [1, kh, kw, 1], "strides": [1, s[0], s[1], 1], "padding": _pad_nd(pad)}, image=True)
        return
    if op in ("GlobalAveragePool", "GlobalMaxPool"):
        _, _, h, w = imp.shape[node.input[0]]
        _emit(imp, node, "AvgPool" if op == "GlobalAveragePool" else "Pooling", [_in(imp, node)],
              {"ksize": [1, h, w, 1], "strides": [1, 1, 1, 1], "padding": "VALID"}, image=True)
        return
    if op == "LRN":
        n = a["size"]
        if n % 2 == 0:
            raise imp.err(node, f"an even window ({n}): ONNX centres it differently from netc")
        _emit(imp, node, "LRN", [_in(imp, node)], {"local_size": n, "alpha": float(a.get("alpha", 1e-4)),
                                                  "beta": float(a.get("beta", 0.75)), "knorm": float(a.get("bias", 1.0))},
              image=True)
        return


def _product_node(imp, node, a, op):
    """Gemm and MatMul with a constant weight: netc's InnerProduct (rows reordered after an image's flatten)."""
    if op in ("Gemm", "MatMul"):
        w = imp.consts.get(node.input[1])
        if w is None or w.ndim != 2:
            raise imp.err(node, "a product with a constant 2-d weight (an initializer) is what netc reads")
        if op == "Gemm":
            if a.get("transA", 0) or a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0:
                raise imp.err(node, "transA, alpha or beta other than 0, 1, 1")
            if a.get("transB", 0):
                w = w.T
        w = _chw_rows(imp, node, w)
        params = {"weight": imp.param(f"{node.name or node.output[0]}_W", w)}
        bias = op == "Gemm" and len(node.input) > 2 and node.input[2] != ""
        if bias:
            c = np.broadcast_to(imp.consts[node.input[2]], (w.shape[1],))
            params["bias"] = imp.param(f"{node.name or node.output[0]}_B", c)
        _emit(imp, node, "InnerProduct", [_in(imp, node)], {"num_outputs": int(w.shape[1]), "bias": bias, "params": params},
              image=False)
        return


def _pad_nd(p):
    return p if isinstance(p, str) else list(p)
