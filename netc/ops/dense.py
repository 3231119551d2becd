"""Fully connected layers: InnerProduct (auto-flattens its input, as Paleo does)."""
from __future__ import annotations

from .activation import fused_activation_grad
from .conv import ACTIVATIONS, NORMALIZERS
from .registry import AttrSpec, Cost, OpDef, ShapeError, TimeTerms, prod, register


@register
class InnerProduct(OpDef):
    name = "inner_product"
    gemm_epilogue = True
    feature_params = {"weight": 1, "bias": 0}
    feature_attr, feature_noun, singa_feature_field = ("num_outputs", None), "outputs (num_outputs)", "num_output"
    row_parallel = True
    singa_weight_transposed = True
    singa_one_to_all = ("v0.2+",)   # v0.1 connects inner products one to one
    types = ("InnerProduct", "FullyConnected")
    arity = (1, 1)
    param_roles = ("weight", "bias")
    attrs = {
        "num_outputs": AttrSpec("int"),
        "activation": AttrSpec("enum", "none", ACTIVATIONS),
        "normalizer": AttrSpec("enum", "none", NORMALIZERS),
        "bias": AttrSpec("bool", True, doc="false: no bias parameter (none is added or trained)"),
        "transpose_weight": AttrSpec("bool", False, doc="the weight is stored [M, K] and read transposed (SINGA's "
                                                        "transpose: true sharing a weight of the other orientation)"),
    }
    doc = "y = x W + b with x flattened to [N, K]; W is [K, M] ([M, K] read transposed with transpose_weight)."

    def singa_layer(self, a, ins, v1, scale, plain):
        from .singa import SingaInexpressible as No
        nm = a.get("name")
        if not a.get("bias", True):
            raise No(f"'{nm}': SINGA's kInnerProduct always has a bias")
        if a.get("normalizer", "none") != "none":
            raise No(f"'{nm}' has a fused {a['normalizer']}, which SINGA cannot express")
        t = " transpose: true" if a.get("transpose_weight") else ""
        return "kInnerProduct", [f"innerproduct_conf {{ num_output: {a['num_outputs'] * scale}{t} }}"], ["weight", "bias"]

    def onnx(self, a, w, op):
        """Flatten then Gemm. An NCHW image is flattened as it stands, (c, h, w), with the weight's rows
        permuted to that order, rather than transposed back to netc's (h, w, c)."""
        shape = op.operands[0].type.shape
        nm = a.get("name") or "fc"
        if a.get("transpose_weight"):
            from .singa import SingaInexpressible as No
            raise No(f"'{nm}' reads its weight transposed (a SINGA transpose share); the ONNX writer does not yet")
        if len(shape) == 4 and w.layout(op) == "nchw":
            _, h, wd, c = shape
            x = w.x(op, 0, "nchw")
            weight = w.param(op, "weight", lambda f: f.reshape(h, wd, c, -1).transpose(2, 0, 1, 3).reshape(h * wd * c, -1),
                             ".chw")
        else:
            x = w.x(op, 0, "nhwc")
            weight = w.param(op, "weight")
        if len(shape) != 2:
            x = w.node("Flatten", [x], hint=nm + ".flat", axis=1)
        ins = [x, weight] + ([w.param(op, "bias")] if a.get("bias", True) else [])
        y = w.node("Gemm", ins, hint=nm)
        w.result(op, w.activation(y, a.get("activation"), nm + "." + str(a.get("activation"))))

    def eager(self, a, params, x_shape, out_shape, training):
        """F.linear on the flattened input (the weight transposed once, or in the step when training)."""
        import torch.nn.functional as F
        from . import eager as E
        w0, b = params["weight"], params.get("bias")
        if a.get("transpose_weight"):       # stored [M, K]: F.linear's own layout
            return lambda x: E.act(F.linear(x.reshape(x.shape[0], -1), w0, b), a)
        if training:
            return lambda x: E.act(F.linear(x.reshape(x.shape[0], -1), w0.t(), b), a)
        w = w0.t().contiguous()
        return lambda x: E.act(F.linear(x.reshape(x.shape[0], -1), w, b), a)

    def with_feature_count(self, a, n):
        if a.get("transpose_weight"):   # its features are the weight's axis 0, which a split does not slice yet
            from ..diagnostics import NetcError
            raise NetcError(f"'{a.get('name')}' reads its weight transposed (transpose_weight): splitting it by "
                            f"features is not supported yet")
        return super().with_feature_count(a, n)

    def infer(self, a, ins):
        (x,) = ins
        if len(x) < 2:
            raise ShapeError(f"InnerProduct needs an input of rank >= 2, got {list(x)}", operand=0)
        if a["num_outputs"] <= 0:
            raise ShapeError(f"num_outputs must be positive, got {a['num_outputs']}", attr="num_outputs")
        return (x[0], a["num_outputs"])

    def reference(self, a, ins, params):
        # `normalizer: batch_norm` is bookkeeping only (no parameters): ignored, as on conv2d.
        from . import reference as R      # lazy: torch is slow to import
        w = params["weight"].t() if a.get("transpose_weight") else params["weight"]
        return R.inner_product(ins[0], w, params.get("bias"), activation=a["activation"])

    def param_shapes(self, a, ins, out):
        x = ins[0]
        k, m = prod(x[1:]), a["num_outputs"]
        shapes = {"weight": (m, k) if a.get("transpose_weight") else (k, m)}
        if a.get("bias", True):          # `bias: false`: no bias parameter, none added, none trained
            shapes["bias"] = (a["num_outputs"],)
        return shapes

    def cost(self, a, ins, out, needs_input_grad=True):
        x = ins[0]
        n, k, m = x[0], prod(x[1:]), a["num_outputs"]
        return Cost(2 * n * k * m, 2 * n * m * k, 2 * k * n * m)

    def gradient(self, g, op, dy):
        """The fused activation's gradient, then dx = dz W^T, dW = x^T dz and the bias gradient."""
        a = self.attrs_of(op)
        dz = fused_activation_grad(g, op, dy, a["activation"])
        x = op.operands[0]
        dx = dw = db = None
        t = {"transpose_weight": True} if a.get("transpose_weight") else {}
        if g.needs(0):
            dx = g.emit("netc.inner_product_grad_data", [dz], {"input_shape": list(x.type.shape), **t},
                        params={"weight": g.param("weight")}, tag="grad_data")
        if g.needs_param("weight") and t:   # W [M, K]: dW = dz^T x, the filter gradient with the operands swapped
            x2 = x if len(x.type.shape) == 2 else g.emit("netc.reshape", [x], {"output_shape": [x.type.shape[0], -1]},
                                                          tag="flat")
            dw = g.emit("netc.inner_product_grad_filter", [dz, x2], tag="grad_filter")
        elif g.needs_param("weight"):
            dw = g.emit("netc.inner_product_grad_filter", [x, dz], tag="grad_filter")
        if g.needs_param("bias"):
            db = g.emit("netc.bias_grad", [dz], tag="grad_bias")
        return [dx], {"weight": dw, "bias": db}

    def paleo_timing(self, a, ins, out, needs_input_grad=True):
        """Paleo's estimate of X[n, k] @ W[k, m] = Y: 2*n*k*m FLOPs and the three matrices (§10).
        Data gradient: Y @ W^T = dX. Filter gradient: X^T @ Y = dW (Paleo hands an InnerProduct to
        its convolution filter-gradient estimator, which fails; netc times the matrix product)."""
        n, k, m = ins[0][0], prod(ins[0][1:]), a["num_outputs"]
        t = TimeTerms(2 * n * k * m, (n * k, k * m, n * m))
        return {"fwd": t, "bwd_data": t, "bwd_filter": t}


# --------------------------------------------------------------------------- gradients

@register
class InnerProductGradData(OpDef):
    name = "inner_product_grad_data"
    prologue_operand = 0
    grad_epilogue = True
    training_only = True
    arity = (1, 1)
    param_roles = ("weight",)
    attrs = {"input_shape": AttrSpec("shape", doc="the forward input's shape (unflattened)"),
             "transpose_weight": AttrSpec("bool", False, doc="W is stored [M, K]: dx = dz W")}
    doc = "The data gradient of an inner product: dx = dz W^T, in the input's shape. FLOPs 2*n*k*m."

    def infer(self, a, ins):
        (dz,) = ins
        x = tuple(a["input_shape"])
        if len(dz) != 2 or len(x) < 2 or dz[0] != x[0]:
            raise ShapeError(f"the gradient {list(dz)} does not fit an inner product of input {list(x)}", operand=0)
        return x

    def param_shapes(self, a, ins, out):
        k, m = prod(out[1:]), ins[0][1]
        return {"weight": (m, k) if a.get("transpose_weight") else (k, m)}

    def cost(self, a, ins, out, needs_input_grad=True):
        n, m = ins[0]
        return Cost(2 * n * m * prod(out[1:]))

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        w = params["weight"].t() if a.get("transpose_weight") else params["weight"]
        return R.inner_product_grad_data(ins[0], w, a["input_shape"])


@register
class InnerProductGradFilter(OpDef):
    name = "inner_product_grad_filter"
    prologue_operand = 1
    training_only = True
    arity = (2, 2)
    unbatched = True
    attrs = {}
    doc = "The weight gradient of an inner product: dW = x^T dz with x flattened to [N, K]. FLOPs 2*k*n*m."

    def infer(self, a, ins):
        x, dz = ins
        if len(dz) != 2 or dz[0] != x[0]:
            raise ShapeError(f"the gradient {list(dz)} does not fit an inner product of input {list(x)}", operand=1)
        return (prod(x[1:]), dz[1])

    def cost(self, a, ins, out, needs_input_grad=True):
        x, dz = ins
        return Cost(2 * prod(x[1:]) * x[0] * dz[1])

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.inner_product_grad_filter(ins[0], ins[1])
