"""Energy models: a restricted Boltzmann machine's visible layer (SINGA's kRBMVis) and the ops of its
learning rule, SINGA's contrastive divergence (CD-k, `train_one_batch { alg: kCD }`).

The visible layer owns the learning rule (OpDef.learning_rule), as SINGA's RBMVisLayer owns the weight
and computes its update: it binds the weight [vdim, hdim] (netc's inner-product layout; SINGA stores
[hdim, vdim]), the visible bias [vdim] and the hidden bias [hdim] (the hidden layer's inner product binds
the same weight and hidden bias for the positive phase). The rule emits, after SINGA's CDWorker
(src/worker.cc, TrainOneBatch) and RBMVisLayer / RBMHidLayer (src/neuralnet/neuron_layer/rbm.cc, v0.2):

    h0 = sigmoid(v0 W + bh)                  the positive phase (linear for Gaussian hidden units)
    step i = 1..k:  hs = sample(h_{i-1})     binary: 1 where u < h (u uniform); Gaussian: h + N(0, 1)
                    v_i = sigmoid(hs W^T + bv)   visible units are kept as means, never sampled
                    h_i = sigmoid(v_i W + bh)    (linear for Gaussian hidden units)
    directions  dW = (v_k^T h_k - v0^T h0) / B,  dbh = sum(h_k - h0) / B,  dbv = sum(v_k - v0) / B

which the optimizer descends on like gradients (SINGA's updaters do the same with its `grad`). The
reconstruction error is SINGA's "Squared Error": sum((v0 - v1)^2) / B of the first Gibbs step, per batch
(a metric the runtime reports as the program's loss). Sampling uses Triton's counter-based Philox, as the
dropout mask does: counters (salt << 32) + offset + i for the crc32 of the layer's name as salt, so a
kernel calling tl.rand / tl.randn at those offsets draws the same samples.
"""
from __future__ import annotations

import zlib

from ..diagnostics import NetcError
from .registry import AttrSpec, Cost, OpDef, ShapeError, prod, register


@register
class RBMVisible(OpDef):
    name = "rbm_visible"
    types = ("RBMVisible",)
    arity = (1, 1)
    moves_data = False
    view = True          # out = in: the memory plan aliases it (no kernel; a copy where it cannot)
    param_roles = ("bias", "weight", "hidden_bias")
    attrs = {
        "hidden": AttrSpec("any", [], doc="the hidden layer(s) of the energy model (the edge back, kept as names)"),
        "energy_model": AttrSpec("bool", True, doc="an energy model's layer: learns by contrastive divergence"),
        "gaussian": AttrSpec("bool", False, doc="SINGA's rbm_conf.gaussian of the visible layer (SINGA never "
                                                "samples visible units: no effect)"),
        "params_singa": AttrSpec("any", [], doc="SINGA's names of the layer's weight and visible bias"),
        "hdim": AttrSpec("int", 0, doc="the hidden units; > 0: the layer binds the weight [vdim, hdim] and the "
                                       "hidden bias [hdim] and learns by CD-k"),
        "hidden_gaussian": AttrSpec("bool", False, doc="the hidden layer's rbm_conf.gaussian: hidden units are "
                                                       "linear, sampled as h + N(0, 1)"),
        "cd_k": AttrSpec("int", 1, doc="Gibbs steps of CD-k (SINGA's cd_conf.cd_k; below 1 runs one, as SINGA)"),
    }
    doc = ("The visible layer of a restricted Boltzmann machine (SINGA's kRBMVis): in the positive phase its "
           "data is its input (out = in); it owns the visible bias [vdim] (vdim = the input's count per sample) "
           "and, with `hdim`, the weight [vdim, hdim] and the hidden bias [hdim] that the hidden layer's inner "
           "product binds too. Training learns them by SINGA's CD-k (netc/ops/energy.py, docs/energy.md); the "
           "reconstruction error is reported as the loss. 0 FLOPs.")

    def infer(self, a, ins):
        (x,) = ins
        if len(x) < 2:
            raise ShapeError(f"an RBM's visible layer needs an input with a batch, got {list(x)}", operand=0)
        if a["hdim"] < 0:
            raise ShapeError(f"hdim must not be negative, got {a['hdim']}", attr="hdim")
        return tuple(x)

    def param_shapes(self, a, ins, out):
        vdim = prod(ins[0][1:])
        shapes = {"bias": (vdim,)}
        if a.get("hdim", 0) > 0:
            shapes.update(weight=(vdim, a["hdim"]), hidden_bias=(a["hdim"],))
        return shapes

    def reference(self, a, ins, params):
        return ins[0]   # the positive phase: the visible data is the input

    def learning_rule(self, g, op):
        """SINGA's CD-k (the module's docstring): the ops of k Gibbs steps and the update directions of
        the trainable ones of weight, hidden_bias and bias; the reconstruction error as a metric."""
        return cd_rule(g, op, self.attrs_of(op))


def cd_rule(g, op, a: dict) -> dict:
    layer = op.attrs.get("name") or op.name
    bound = op.attrs.get("params") or {}
    if a["hdim"] <= 0 or "weight" not in bound or "hidden_bias" not in bound:
        raise NetcError(f"cannot train RBM '{layer}' by contrastive divergence: its visible layer needs the hidden "
                        f"layer's size (hdim) and binds no weight and hidden bias (SINGA's kRBMVis with its kRBMHid "
                        f"gives them)", op.loc)
    if op.attrs.get("partition"):
        raise NetcError(f"cannot train RBM '{op.attrs['partition'].get('of', layer)}' on several workers yet: contrastive divergence runs on one "
                        f"(each worker's samples and statistics would need the whole batch's)", op.loc)
    v0 = op.operands[0]
    batch = v0.type.shape[0]
    vdim, hdim = prod(v0.type.shape[1:]), a["hdim"]
    steps = max(1, int(a["cd_k"]))
    if steps * batch * hdim >= 2 ** 32:
        raise NetcError(f"RBM '{layer}': cd_k {steps} x batch {batch} x hdim {hdim} samples exceed the 2**32 "
                        f"counters of one salt", op.loc)
    gauss = bool(a["hidden_gaussian"])
    act = "none" if gauss else "sigmoid"
    hid = {"weight": g.param("weight"), "bias": g.param("hidden_bias")}
    vis = {"weight": g.param("weight"), "bias": g.param("bias")}
    seed = g.input("seed", (), "i64")
    salt = zlib.crc32(layer.encode())
    h0 = g.emit("netc.inner_product", [v0], {"num_outputs": hdim, "activation": act}, params=hid, tag="cd.h0")
    h, v = h0, None
    for i in range(steps):
        hs = g.emit("netc.rbm_sample", [h, seed], {"gaussian": gauss, "salt": salt, "offset": i * batch * hdim},
                    tag=f"cd.h{i}_sample")
        v = g.emit("netc.rbm_reconstruct", [hs], {"vdim": vdim}, params=vis, tag=f"cd.v{i + 1}")
        if i == 0:
            g.metric(g.emit("netc.rbm_error", [v0, v], tag="error"))
        h = g.emit("netc.inner_product", [v], {"num_outputs": hdim, "activation": act}, params=hid,
                   tag=f"cd.h{i + 1}")
    return {role: g.emit("netc.rbm_statistics", [v0, h0, v, h], {"role": role}, tag=f"cd.{role}")
            for role in ("weight", "hidden_bias", "bias") if g.needs_param(role)}


# --------------------------------------------------------------------------- the rule's ops

@register
class RBMSample(OpDef):
    name = "rbm_sample"
    training_only = True
    differentiable = False
    arity = (2, 2)
    attrs = {"gaussian": AttrSpec("bool", False, doc="h + N(0, 1) (Gaussian hidden units) instead of a binary draw"),
             "salt": AttrSpec("int", 0, doc="crc32 of the RBM's name: the Philox counter's high word"),
             "offset": AttrSpec("int", 0, doc="the first element's counter (Gibbs step i starts at i * B * hdim)")}
    doc = ("A sample of hidden units from their probabilities h [B, H] and the scalar integer seed: element j "
           "(row-major) is 1 where u < h, else 0, for u = tl.rand(seed, salt * 2**32 + offset + j) (SINGA's "
           "SampleBinary); gaussian: h + n with n = tl.randn(seed, the same counter) (SINGA's SampleGaussian "
           "plus the mean). 1 FLOP per element.")

    def result_dtype(self, a, operand_dtypes):
        return operand_dtypes[0]

    def infer(self, a, ins):
        h, seed = ins
        if tuple(seed) != ():
            raise ShapeError(f"the seed must be a scalar, got {list(seed)}", operand=1)
        if len(h) != 2:
            raise ShapeError(f"hidden probabilities must be [B, H], got {list(h)}", operand=0)
        return tuple(h)

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(prod(out), 0, 0)

    def reference(self, a, ins, params):
        return rbm_sample(ins[0], int(ins[1]), a["salt"], a.get("offset", 0), a["gaussian"])


@register
class RBMReconstruct(OpDef):
    name = "rbm_reconstruct"
    training_only = True
    arity = (1, 1)
    param_roles = ("weight", "bias")
    attrs = {"vdim": AttrSpec("int", doc="the visible units")}
    doc = ("The visible units' means from sampled hidden units: v = sigmoid(hs W^T + bv) [B, vdim] for hs "
           "[B, hdim], W [vdim, hdim] (SINGA's RBMVisLayer negative phase; visible units are never sampled). "
           "FLOPs 2*B*vdim*hdim.")

    def infer(self, a, ins):
        (hs,) = ins
        if len(hs) != 2:
            raise ShapeError(f"hidden samples must be [B, H], got {list(hs)}", operand=0)
        if a["vdim"] <= 0:
            raise ShapeError(f"vdim must be positive, got {a['vdim']}", attr="vdim")
        return (hs[0], a["vdim"])

    def param_shapes(self, a, ins, out):
        return {"weight": (a["vdim"], ins[0][1]), "bias": (a["vdim"],)}

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(2 * prod(ins[0]) * a["vdim"], 0, 0)

    def reference(self, a, ins, params):
        import torch
        from . import reference as R      # lazy: torch is slow to import
        hs = R.in_compute_dtype(ins[0])
        return torch.sigmoid(hs @ R.in_compute_dtype(params["weight"]).t() + R.in_compute_dtype(params["bias"]))


ROLES = ("weight", "hidden_bias", "bias")


@register
class RBMStatistics(OpDef):
    name = "rbm_statistics"
    training_only = True
    unbatched = True
    arity = (4, 4)
    attrs = {"role": AttrSpec("enum", "weight", ROLES, doc="which parameter's update direction")}
    doc = ("An update direction of CD-k from the positive statistics (v0 [B, ...] flattened to [B, V], h0 "
           "[B, H]) and the negative ones (vk [B, V], hk [B, H]), as SINGA's RBM layers' ComputeGradient: "
           "weight (vk^T hk - v0^T h0) / B [V, H]; hidden_bias sum_rows(hk - h0) / B [H]; bias (the visible "
           "one) sum_rows(vk - v0) / B [V]. The optimizer descends on it. FLOPs 4*B*V*H for the weight.")

    def infer(self, a, ins):
        v0, h0, vk, hk = ins
        b, v = v0[0] if v0 else 0, prod(v0[1:])
        if len(v0) < 2 or len(h0) != 2 or tuple(vk) != (b, v) or tuple(hk) != tuple(h0) or h0[0] != b:
            raise ShapeError(f"CD statistics need v0 [B, ...], h0 [B, H], vk [B, V], hk [B, H]; got "
                             f"{[list(s) for s in ins]}", operand=0)
        return {"weight": (v, h0[1]), "hidden_bias": (h0[1],), "bias": (v,)}[a["role"]]

    def cost(self, a, ins, out, needs_input_grad=True):
        b, h = ins[1]
        return Cost(4 * b * prod(ins[0][1:]) * h if a["role"] == "weight" else 2 * b * prod(out), 0, 0)

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        v0, h0, vk, hk = (R.in_compute_dtype(t) for t in ins)
        v0 = v0.reshape(v0.shape[0], -1)
        b = v0.shape[0]
        if a["role"] == "weight":
            return (vk.t() @ hk - v0.t() @ h0) / b
        if a["role"] == "hidden_bias":
            return (hk.sum(0) - h0.sum(0)) / b
        return (vk.sum(0) - v0.sum(0)) / b


@register
class RBMError(OpDef):
    name = "rbm_error"
    training_only = True
    unbatched = True
    differentiable = False
    arity = (2, 2)
    attrs = {}
    doc = ("SINGA's reconstruction error of an RBM (its \"Squared Error\"): sum((v0 - v1)^2) / B over the batch's "
           "data v0 [B, ...] and the first Gibbs step's reconstruction v1 [B, V]. A scalar; 3 FLOPs per element.")

    def infer(self, a, ins):
        v0, v1 = ins
        if len(v0) < 2 or tuple(v1) != (v0[0], prod(v0[1:])):
            raise ShapeError(f"the reconstruction {list(v1)} does not fit the data {list(v0)}", operand=1)
        return ()

    def cost(self, a, ins, out, needs_input_grad=True):
        return Cost(3 * prod(ins[1]), 0, 0)

    def reference(self, a, ins, params):
        from . import reference as R      # lazy: torch is slow to import
        v0, v1 = (R.in_compute_dtype(t) for t in ins)
        return ((v0.reshape(v1.shape) - v1) ** 2).sum() / v1.shape[0]


# --------------------------------------------------------------------------- sampling

def tl_randn(seed: int, offsets):
    """Triton's tl.randn(seed, offsets) for int64 offsets (numpy): the first Box-Muller normal of the
    first two Philox words, u1 = max(1e-7, uniform(word 0)), u2 = uniform(word 1), computed in float64
    from Triton's float32 uniforms (a kernel's float32 log, sqrt and cos differ by rounding only)."""
    import numpy as np
    from . import reference as R
    off = np.asarray(offsets).astype(np.int64).view(np.uint64)
    lo = (off & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    hi = (off >> np.uint64(32)).astype(np.uint32)
    zero = np.zeros_like(lo)
    w0, w1, _, _ = R.philox4x32(seed, lo, hi, zero, zero)

    def uniform(w):
        x = w.view(np.int32)
        return np.where(x < 0, ~x, x).astype(np.float32) * np.float32(4.6566127342e-10)

    u1 = np.maximum(np.float32(1e-7), uniform(w0)).astype(np.float64)
    u2 = uniform(w1).astype(np.float64)
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(6.283185307179586 * u2)


def rbm_sample(h, seed: int, salt: int, offset: int = 0, gaussian: bool = False):
    """netc.rbm_sample's semantics (see the op): binary (u < h) or h + N(0, 1), in h's shape and dtype."""
    import numpy as np
    import torch
    from . import reference as R
    n = h.numel()
    offs = R.dropout_offsets(salt, n, offset)
    if gaussian:
        noise = torch.from_numpy(tl_randn(seed, offs)).reshape(h.shape).to(h.device, R.in_compute_dtype(h).dtype)
        return R.in_compute_dtype(h) + noise
    u = torch.from_numpy(R.tl_rand(seed, offs).astype(np.float64)).reshape(h.shape).to(h.device)
    return (u < R.in_compute_dtype(h).to(torch.float64)).to(R.in_compute_dtype(h).dtype)
