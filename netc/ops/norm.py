"""Normalization: BatchNorm and LRN (across channels, the last NHWC axis), their training forms and
gradients."""
from __future__ import annotations

from ..diagnostics import NetcError
from .registry import AttrSpec, Cost, OpDef, ShapeError, prod, register


@register
class BatchNorm(OpDef):
    name = "batch_norm"
    pointwise = "affine"
    types = ("BatchNorm",)
    arity = (1, 3)
    param_roles = ("scale", "shift")
    f32_params = ("scale", "shift")   # cuDNN/apex-style: batch-norm parameters stay f32 in 16-bit nets
    batch_statistics = True
    attrs = {"epsilon": AttrSpec("number", 1e-5),
             "momentum": AttrSpec("number", 0.9, doc="running statistics: new = momentum * old + "
                                                     "(1 - momentum) * batch (torch's momentum is 1 - this)")}
    doc = ("Batch normalization over the last (channel) axis with a per-channel scale and shift. One input: "
           "inference, folded (x * scale + shift: the running statistics and epsilon live in scale and shift). "
           "Three inputs (x, mean, var), as training makes it: (x - mean) / sqrt(var + epsilon) * scale + shift "
           "(running statistics are state, not parameters). 2 FLOPs/element forward (folded), 4 backward.")
    elementwise = True

    def singa_layer(self, a, ins, v1, scale, plain):
        from .singa import SingaInexpressible as No
        if len(ins[0]) != 4:
            raise No(f"batch norm '{a.get('name')}' normalizes a {len(ins[0])}-D tensor; SINGA's kBM takes 4-D ones")
        return "kBM", [], ["bm"] * 4

    def inference_params(self, a, params, state):
        """Trained on batch statistics: folded with the running statistics into the inference affine
        (scale' = scale / sqrt(var + eps), shift' = shift - mean * scale')."""
        if "running_mean" not in state or "running_var" not in state or "scale" not in params:
            return {}
        import torch
        scale = params["scale"] / torch.sqrt(state["running_var"] + a["epsilon"])
        return {"scale": scale, "shift": params["shift"] - state["running_mean"] * scale}

    def chain_followers(self, op) -> tuple:
        """The training form (x, mean, var) is its own kernel, with at most one activation after it
        (kernels/lowering.py's batch_norm_train); the inference form is a chain step like any."""
        if len(op.operands) == 3:
            return ("activation",), 1
        return super().chain_followers(op)

    def eager(self, a, params, x_shape, out_shape, training):
        """Training: the batch's statistics, over every axis but the last (F.batch_norm); inference:
        the folded scale and shift."""
        import torch
        import torch.nn.functional as F
        sc, sh = params["scale"], params["shift"]
        if training:
            eps = float(a["epsilon"])
            return lambda x: F.batch_norm(x.reshape(-1, x.shape[-1]), None, None, sc, sh, True, 0.0,
                                          eps).reshape(x.shape)
        return lambda x: torch.addcmul(sh, x, sc)

    def infer(self, a, ins):
        if not ins[0]:
            raise ShapeError("BatchNorm needs an input with a channel axis, got a scalar []", operand=0)
        if len(ins) == 2:
            raise ShapeError("BatchNorm takes the input alone (inference) or with its mean and variance "
                             "(3 inputs), not 2", operand=1)
        c = ins[0][-1]
        for i in range(1, len(ins)):
            if tuple(ins[i]) != (c,):
                raise ShapeError(f"the {('mean', 'variance')[i - 1]} must have one entry per channel, [{c}], "
                                 f"got {list(ins[i])}", operand=i)
        return tuple(ins[0])

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        if len(ins) == 3:
            return R.batch_norm_train(ins[0], ins[1], ins[2], params["scale"], params["shift"], a["epsilon"])
        # inference, folded: the running statistics (and epsilon) live in scale and shift
        return R.batch_norm(ins[0], params["scale"], params["shift"])

    def param_shapes(self, a, ins, out):
        c = ins[0][-1]
        return {"scale": (c,), "shift": (c,)}

    def cost(self, a, ins, out, needs_input_grad=True):
        n = prod(out)
        return Cost(2 * n, 4 * n if needs_input_grad else 0, 2 * n)

    def training_form(self, g, op):
        """Normalize with the batch's statistics (netc.batch_stats, two results: mean and biased
        variance) and update the running statistics (state `<layer>.running_mean`/`running_var`,
        initially 0 and 1) with them. A batch norm given its statistics already stays as it is."""
        if len(op.operands) != 1:
            return
        x = op.operands[0]
        a = self.attrs_of(op)
        c = x.type.shape[-1]
        mean, var = g.emit("netc.batch_stats", [x], tag="stats", results=2)
        count = prod(x.type.shape) // max(c, 1)
        layer = None
        sync = op.attrs.get("sync_stats")
        if sync:
            # a copy on one shard of a batch split (the partition pass's sync_stats): the batch's
            # statistics are those of all shards, as one process computes them (torch's
            # SyncBatchNorm) -- the shards' means and means of squares weighted by their share of
            # the batch, all-reduced; the running statistics are the logical layer's
            w, ranks, worker = sync["weight"], sync["ranks"], op.attrs.get("worker")

            def emit(name, operands, attrs, tag):
                return g.emit(f"netc.{name}", operands, {**attrs, **({"worker": worker} if name == "all_reduce" else {})},
                              tag=tag)
            sq = emit("elementwise", [mean, mean], {"operation": "product"}, "stats_sq")
            m2 = emit("elementwise", [var, sq], {"operation": "sum"}, "stats_m2")
            mean = emit("all_reduce", [emit("scale", [mean], {"factor": w}, "stats_wmean")], {"ranks": ranks},
                        "stats_mean")
            m2 = emit("all_reduce", [emit("scale", [m2], {"factor": w}, "stats_wm2")], {"ranks": ranks}, "stats_m2sum")
            msq = emit("scale", [emit("elementwise", [mean, mean], {"operation": "product"}, "stats_msq")],
                       {"factor": -1.0}, "stats_negmsq")
            var = emit("elementwise", [m2, msq], {"operation": "sum"}, "stats_var")
            count = sync["count"]
            layer = (op.attrs.get("partition") or {}).get("of")
        op.operands.extend([mean, var])
        g.emit("netc.running_stats_update", [mean, var],
               {"momentum": a["momentum"], "count": count},
               params={"mean": g.state("running_mean", [c], 0.0, layer=layer),
                       "var": g.state("running_var", [c], 1.0, layer=layer)},
               tag="running_stats", results=0)

    def gradient(self, g, op, dy):
        """The data gradient through the batch's statistics (they are functions of x: the rule covers
        those paths, so operands 1 and 2 get none), the scale gradient and the shift's (a bias gradient:
        free, as conv2d's bias)."""
        if len(op.operands) != 3:
            raise AssertionError("batch_norm is differentiated in its training form (3 operands)")
        x, mean, var = op.operands
        a = self.attrs_of(op)
        sync = op.attrs.get("sync_stats")
        stats = sync is not None or (mean.owner.name == "netc.batch_stats" and mean.owner.operands[0] is x
                                     and var.owner is mean.owner)
        if not stats and (g.needs(1) or g.needs(2)):
            raise NetcError(f"cannot differentiate BatchNorm '{op.attrs.get('name')}' with respect to the "
                            f"statistics it is given (only batch statistics of its input are supported)", op.loc)
        ops = [x, mean, var, dy]
        dx = dscale = dshift = None
        if g.needs_param("scale") or (sync and g.needs(0)):
            dscale = g.emit("netc.batch_norm_grad_scale", ops, {"epsilon": a["epsilon"]}, tag="grad_scale")
        if g.needs_param("shift") or (sync and g.needs(0)):
            dshift = g.emit("netc.bias_grad", [dy], tag="grad_shift")
        if g.needs(0):
            if sync:
                # through statistics of the whole batch: the sums over all shards of dy and of
                # dy * xhat (each shard's shift and scale gradients, all-reduced)
                w = op.attrs.get("worker")
                sums = [g.emit("netc.all_reduce", [v], {"ranks": sync["ranks"], **({"worker": w} if w is not None else {})},
                               tag=f"grad_{k}_sum") for k, v in (("shift", dshift), ("scale", dscale))]
                dx = g.emit("netc.batch_norm_grad", ops + sums,
                            {"epsilon": a["epsilon"], "batch_stats": True, "count": sync["count"]},
                            params={"scale": g.param("scale")}, tag="grad_data")
            else:
                dx = g.emit("netc.batch_norm_grad", ops, {"epsilon": a["epsilon"], "batch_stats": stats},
                            params={"scale": g.param("scale")}, tag="grad_data")
        return [dx, None, None], {"scale": dscale if g.needs_param("scale") else None,
                                  "shift": dshift if g.needs_param("shift") else None}


@register
class LRN(OpDef):
    name = "lrn"
    cheap_to_recompute = True
    types = ("LRN",)
    attrs = {
        "local_size": AttrSpec("int", 5),
        "alpha": AttrSpec("number", 1e-4),
        "beta": AttrSpec("number", 0.75),
        "knorm": AttrSpec("number", 1.0),
    }
    doc = ("Local response normalization across channels: x / (knorm + alpha/n * sum x^2)^beta. "
           "FLOPs: (2*local_size + 3) per element forward, twice that backward.")

    def onnx(self, a, w, op):
        """ONNX's LRN (the same formula) on NCHW; an even window is centred differently there, so only odd
        ones are written."""
        n = a["local_size"]
        if n % 2 == 0 or len(op.operands[0].type.shape) != 4:
            raise NotImplementedError(f"'{a.get('name')}': ONNX's LRN centres an even window ({n}) differently")
        y = w.node("LRN", [w.x(op, 0, "nchw")], hint=a.get("name") or "lrn", size=n, alpha=float(a["alpha"]),
                   beta=float(a["beta"]), bias=float(a["knorm"]))
        w.result(op, y, "nchw")

    def singa_layer(self, a, ins, v1, scale, plain):
        from .singa import fmt
        return "kLRN", [f"lrn_conf {{ local_size: {a.get('local_size', 5)} alpha: {fmt(a.get('alpha', 1e-4))} "
                        f"beta: {fmt(a.get('beta', 0.75))} knorm: {fmt(a.get('knorm', 1.0))} }}"], []

    def eager(self, a, params, x_shape, out_shape, training):
        """F.local_response_norm (an odd window only: torch's is centered)."""
        if a["local_size"] % 2 != 1:
            return None
        import torch.nn.functional as F
        from . import eager as E
        return lambda x: E.nhwc(F.local_response_norm(E.nchw(x), a["local_size"], a["alpha"], a["beta"], a["knorm"]))

    def infer(self, a, ins):
        (x,) = ins
        if a["local_size"] <= 0 or a["local_size"] % 2 == 0:
            raise ShapeError(f"local_size must be a positive odd number, got {a['local_size']}", attr="local_size")
        return tuple(x)

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.lrn(ins[0], a["local_size"], a["alpha"], a["beta"], a["knorm"])

    def cost(self, a, ins, out, needs_input_grad=True):
        n = prod(out) * (2 * a["local_size"] + 3)
        return Cost(n, 2 * n if needs_input_grad else 0, 0)

    def gradient(self, g, op, dy):
        """lrn_grad from the input, the output and dy."""
        a = self.attrs_of(op)
        return [g.emit("netc.lrn_grad", [op.operands[0], op.results[0], dy],
                       {k: a[k] for k in ("local_size", "alpha", "beta", "knorm")})], {}


# --------------------------------------------------------------------------- training forms and gradients

def _channel_vectors(ins, first: int, c: int):
    for i in range(first, len(ins)):
        if tuple(ins[i]) != (c,):
            raise ShapeError(f"operand {i} must have one entry per channel, [{c}], got {list(ins[i])}", operand=i)


@register
class BatchStats(OpDef):
    name = "batch_stats"
    num_results = 2
    training_only = True
    unbatched = True
    arity = (1, 1)
    attrs = {}
    doc = ("A batch's statistics per channel (the last axis), over every other axis: two results, the mean "
           "and the biased variance, [C] each (batch norm's training form). FLOPs: 3 per element.")

    def infer(self, a, ins):
        (x,) = ins
        if not x:
            raise ShapeError("batch statistics need an input with a channel axis, got a scalar []", operand=0)
        return ((x[-1],), (x[-1],))

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(3 * prod(ins[0]))

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.batch_stats(ins[0])


@register
class RunningStatsUpdate(OpDef):
    name = "running_stats_update"
    num_results = 0
    training_only = True
    side_effects = True
    arity = (2, 2)
    param_roles = ("mean", "var")
    attrs = {"momentum": AttrSpec("number", 0.9, doc="new = momentum * old + (1 - momentum) * batch"),
             "count": AttrSpec("int", doc="elements per channel the statistics were computed over")}
    doc = ("Writes batch norm's running statistics (its `mean` and `var` state) from a batch's mean and biased "
           "variance: new = momentum * old + (1 - momentum) * batch, the variance made unbiased "
           "(count / (count - 1)) as torch does; torch's momentum is 1 - this one. No results. "
           "FLOPs: 5 per channel.")

    def infer(self, a, ins):
        mean, var = ins
        if len(mean) != 1:
            raise ShapeError(f"the batch mean must be a vector [C], got {list(mean)}", operand=0)
        _channel_vectors(ins, 1, mean[0])
        return ()

    def param_shapes(self, a, ins, out):
        return {"mean": tuple(ins[0]), "var": tuple(ins[0])}

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(5 * ins[0][0])

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        mean, var = R.running_stats_update(params["mean"], params["var"], ins[0], ins[1], a["count"],
                                           a["momentum"])
        return {"mean": mean, "var": var}


_EPSILON = AttrSpec("number", 1e-5)


def _bn_grad_infer(ins):
    x, mean, var, dy = ins
    if not x:
        raise ShapeError("batch norm's gradient needs an input with a channel axis", operand=0)
    _channel_vectors([x, mean, var], 1, x[-1])
    if tuple(dy) != tuple(x):
        raise ShapeError(f"the gradient {list(dy)} is not batch norm's output for input {list(x)}", operand=3)
    return tuple(x)


@register
class BatchNormGrad(OpDef):
    name = "batch_norm_grad"
    training_only = True
    arity = (4, 6)
    param_roles = ("scale",)
    f32_params = ("scale",)
    attrs = {"epsilon": _EPSILON,
             "batch_stats": AttrSpec("bool", True, doc="mean and var are the batch statistics of x (the "
                                                       "gradient flows through them); false: constants"),
             "count": AttrSpec("int", 0, doc="with 6 operands: the elements per channel of the whole batch, whose "
                                             "statistics mean and var are (a shard's copy of a batch split)")}
    doc = ("The data gradient of a training-form batch norm: x, its mean and variance, dy -> dx, through the "
           "batch statistics: rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dy * scale. "
           "FLOPs: batch norm's backward-data FLOPs (4 per element).")

    def infer(self, a, ins):
        if len(ins) == 5:
            raise ShapeError("batch norm's gradient takes 4 operands, or 6 with the sums of dy and dy * xhat "
                             "over the whole batch", operand=4)
        out = _bn_grad_infer(ins[:4])
        if len(ins) == 6:
            _channel_vectors(ins, 4, ins[0][-1])
        return out

    def param_shapes(self, a, ins, out):
        return {"scale": (ins[0][-1],)}

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(BatchNorm().cost(a, [ins[0]], out).flops_bwd_data)

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        if len(ins) == 6:
            return R.batch_norm_grad(*ins[:4], params["scale"], a["epsilon"], True, sums=ins[4:], count=a["count"])
        return R.batch_norm_grad(*ins, params["scale"], a["epsilon"], a["batch_stats"])


@register
class BatchNormGradScale(OpDef):
    name = "batch_norm_grad_scale"
    training_only = True
    unbatched = True
    arity = (4, 4)
    attrs = {"epsilon": _EPSILON}
    doc = ("The scale gradient of a training-form batch norm: x, its mean and variance, dy -> sum(dy * xhat) per "
           "channel (the shift's is netc.bias_grad of dy). FLOPs: batch norm's backward-filter FLOPs.")

    def infer(self, a, ins):
        return (_bn_grad_infer(ins)[-1],)

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(BatchNorm().cost(a, [ins[0]], ins[0]).flops_bwd_filter)

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.batch_norm_grad_scale(*ins, a["epsilon"])


@register
class LRNGrad(OpDef):
    name = "lrn_grad"
    training_only = True
    arity = (3, 3)
    attrs = {k: LRN.attrs[k] for k in ("local_size", "alpha", "beta", "knorm")}
    doc = ("The gradient of LRN: its input x, output y and dy -> dx, the exact derivative across the clipped "
           "channel window. FLOPs: LRN's backward FLOPs.")

    def infer(self, a, ins):
        x, y, dy = ins
        for i, s in ((1, y), (2, dy)):
            if tuple(s) != tuple(x):
                raise ShapeError(f"LRN's input {list(x)} and operand {i} {list(s)} differ", operand=i)
        return tuple(x)

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(LRN().cost(a, [ins[0]], out).flops_bwd_data)

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        return R.lrn_grad(*ins, a["local_size"], a["alpha"], a["beta"], a["knorm"])
