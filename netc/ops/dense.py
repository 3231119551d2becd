"""Fully connected layers: InnerProduct (auto-flattens its input, as Paleo does)."""
from __future__ import annotations

from .conv import ACTIVATIONS, NORMALIZERS
from .registry import AttrSpec, Cost, OpDef, ShapeError, TimeTerms, prod, register


@register
class InnerProduct(OpDef):
    name = "inner_product"
    types = ("InnerProduct", "FullyConnected")
    arity = (1, 1)
    param_roles = ("weight", "bias")
    attrs = {
        "num_outputs": AttrSpec("int"),
        "activation": AttrSpec("enum", "none", ACTIVATIONS),
        "normalizer": AttrSpec("enum", "none", NORMALIZERS),
        "bias": AttrSpec("bool", True),
    }
    doc = "y = x W + b with x flattened to [N, K]; W is [K, M]."

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
        return R.inner_product(ins[0], params["weight"], params.get("bias"), activation=a["activation"])

    def param_shapes(self, a, ins, out):
        x = ins[0]
        return {"weight": (prod(x[1:]), a["num_outputs"]), "bias": (a["num_outputs"],)}

    def cost(self, a, ins, out, needs_input_grad=True):
        x = ins[0]
        n, k, m = x[0], prod(x[1:]), a["num_outputs"]
        return Cost(2 * n * k * m, 2 * n * m * k, 2 * k * n * m)

    def paleo_timing(self, a, ins, out, needs_input_grad=True):
        """Paleo's estimate of X[n, k] @ W[k, m] = Y: 2*n*k*m FLOPs and the three matrices (§10).
        Data gradient: Y @ W^T = dX. Filter gradient: X^T @ Y = dW (Paleo hands an InnerProduct to
        its convolution filter-gradient estimator, which fails; netc times the matrix product)."""
        n, k, m = ins[0][0], prod(ins[0][1:]), a["num_outputs"]
        t = TimeTerms(2 * n * k * m, (n * k, k * m, n * m))
        return {"fwd": t, "bwd_data": t, "bwd_filter": t}
