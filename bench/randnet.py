"""Differential testing with random valid networks (issue 21; NNSmith's approach).

    python bench/randnet.py --check infer --count 50            # a quick look (prints a table)
    python bench/randnet.py --counts infer=1000,train=500,part=200,grad=200 --out /tmp/randnet
    python bench/randnet.py --rerun /tmp/randnet/003-infer-mismatch.nd    # a saved finding, again
    python bench/randnet.py --coverage                           # which registry ops each check draws

The generator builds random networks that are valid by construction -- every candidate layer is
checked with its op's own shape rule from the registry (OpDef.infer) before it is kept -- and
writes them as .nd text, so a failing network is a file a user can run with `netc run`. It draws
over every layer type of the registry (OPS below; ops added later without a generator are listed
as uncovered by --coverage, and tests/test_randnet.py fails on them) with branches, fan-out
(a value read by several layers, twice by one), parameters shared by name, frozen parameters
(`immutable: true`, and --freeze), phases (a train-only dropout, a layer of one name per phase),
`output` statements, every dtype the interpreter target compiles (f32, f16, bf16, TF32 products),
labels as i32/i64 class indices or one-hot rows, and odd shapes (batch 1, odd spatial sizes,
channel counts that are no multiple of any tile).

Five checks, each through netc's library functions in-process (in a forked child per network,
with a time limit):

  infer  the interpreter target (InterpProgram: the .so's kernels, plan and schedule through
         Triton's interpreter) against the f64 reference executor, with runtime.compare's
         check_outputs (the tolerance of the network's precision, NETWORK_TOLERANCES)
  train  N training steps of the compiled step (InterpTrainer) against the f64 reference from the
         same state (runtime.interp.compare_step, runtime.compare.training_tolerance), failures
         decided as `netc run --train --target interp --compare` decides them
  grad   vector-Jacobian products: the backward pass differentiates every float output with a
         random cotangent (its grad_seed input) and the losses; runtime.train.check_grads checks
         every generated parameter gradient against torch.autograd in f64 (tolerance 1e-8, as
         `netc run --check-grads`)
  cpu    the CPU target (runtime/cpu.py) on training networks over every differentiable op: the inference
         program's outputs (CpuNet) against the f64 reference as --compare decides, then N training steps
         (CpuTrainer) as train decides
  part   random partition annotations (partition_dim 0/1/-1, location) run on K = 2 workers (gloo,
         forked ranks: `netc run --workers 2`, in-process) against the single process (--workers
         1): the forward outputs, and 2 training steps' gradients and parameters, in f64 (1e-10;
         a parameter may also differ by what its update makes of the gradients' rounding
         difference, _update_noise: Adam's lr / eps amplifies a 1e-16 noise gradient to 1e-11)

Each mismatch or internal error is minimized (delta debugging over the network's statements, and
bypassing a layer by its parent, while the same failure signature holds) and saved under --out as
NNN-<check>-<outcome>.nd with a .json sidecar (command, signature, seed, message). Known bugs
being fixed elsewhere are recognized by their signatures (KNOWN) and counted apart. Figures go to
bench/results/randnet.json (machine, date, versions, config, counts per check and outcome).
"""
from __future__ import annotations

import os

# the interpreter mode is fixed when netc.kernels is imported: before anything imports it
os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

CHECKS = ("infer", "train", "grad", "part", "cpu")
TRAIN_STEPS = 2
GRAD_TOL = 1e-8          # `netc run --check-grads`
PART_TOL = 1e-10         # K workers vs one process, both f64 (tests/test_distributed.py)

# Known bugs other work is fixing: (id, check or None, regex over "signature\nmessage"). A finding
# that matches is counted as known-<id>, not minimized.
KNOWN: list = []


# NetcErrors that are no user's mistake on a network the front end and shape inference accepted.
NOT_USER_ERRORS = [r"^cannot lower layer", r"no value for parameter", r"missing input"]


# ============================================================================ the networks

@dataclass
class Stmt:
    """One statement of a network: an input (type None) or a layer."""
    name: str
    type: str | None                 # layer type; None for an input
    parents: list = field(default_factory=list)
    attrs: dict = field(default_factory=dict)
    dtype: str = "f32"               # inputs
    shape: tuple = ()                # inputs: declared; layers: inferred (in the phase drawn for)
    op: str = ""                     # IR op name (coverage)

    def text(self) -> str:
        a = (" { " + ", ".join(f"{k}: {_nd(v)}" for k, v in self.attrs.items()) + " }") if self.attrs else ""
        if self.type is None:
            return f"  input {self.name}: {self.dtype}[{', '.join(map(str, self.shape))}]{a}"
        return f"  {self.name} = {self.type}({', '.join(self.parents)}){a}"


@dataclass
class Net:
    stmts: list
    outputs: list | None = None
    optimizer: tuple | None = None    # (name, {options})
    name: str = "rn"

    def text(self) -> str:
        head = ""
        if self.optimizer:
            n, o = self.optimizer
            head = f"optimizer {n} {{ " + ", ".join(f"{k}: {_nd(v)}" for k, v in o.items()) + " }\n\n"
        body = [s.text() for s in self.stmts]
        if self.outputs:
            body.append("  output " + ", ".join(self.outputs))
        return head + f"network {self.name} {{\n" + "\n".join(body) + "\n}\n"


def _nd(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return v if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", v) and v not in ("true", "false", "null") else json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_nd(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k}: {_nd(x)}" for k, x in v.items()) + " }"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


class Gen:
    """Draws one network for a check. `vals`: name -> shape of float values a layer may read."""

    def __init__(self, rng: random.Random, check: str, ops: list):
        self.rng, self.check, self.ops = rng, check, ops
        self.stmts: list[Stmt] = []
        self.vals: dict[str, tuple] = {}
        self.params: dict[str, tuple] = {}       # parameter name -> (role, shape)
        self.frozen: set = set()
        self.n = 0
        self.batch = rng.choice([1, 2, 3, 2, 4]) if check != "part" else rng.choice([2, 4, 4, 6])
        self.used_ops: set = set()
        self.readers: dict[str, int] = {}
        self.deps: dict[str, frozenset] = {}     # value -> the trainable parameters it depends on

    def fresh(self, prefix="l") -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    # -- values ----------------------------------------------------------------------------
    def add_input(self, shape, dtype="f32", attrs=None, prefix="x") -> str:
        name = self.fresh(prefix)
        self.stmts.append(Stmt(name, None, dtype=dtype, shape=tuple(shape), attrs=dict(attrs or {}), op="netc.input"))
        if dtype == "f32":
            self.vals[name] = tuple(shape)
        return name

    def pick(self, pred=lambda s: True, recent=True):
        if getattr(self, "force", None):
            x, self.force = self.force, None
            return x
        cands = [n for n, s in self.vals.items() if pred(s)]
        if not cands:
            return None
        if recent and self.rng.random() < 0.6:
            return cands[-1]
        return self.rng.choice(cands)

    def try_layer(self, opname: str, parents: list, attrs: dict, type_: str | None = None, keep=True):
        """Check the layer with its op's shape rule; add it (returns its name) or return None."""
        from netc.ops import lookup
        from netc.ops.registry import ShapeError
        d = lookup(opname)
        ins = [self.vals.get(p) or self.shape_of(p) for p in parents]
        a = {k: s.default for k, s in d.attrs.items() if not s.required}
        a.update(attrs)
        try:
            for _k, msg, _h in d.check_attrs(dict(a)):
                return None
            out = tuple(d.infer(a, [tuple(s) for s in ins]))
            pshapes = d.param_shapes(a, [tuple(s) for s in ins], out) if d.param_roles else {}
        except (ShapeError, ValueError, ZeroDivisionError, IndexError, TypeError, KeyError):
            return None
        if any(x <= 0 for x in out) or _prod(out) > 4096:
            return None
        name = self.fresh()
        attrs = dict(attrs)
        own = set()
        if pshapes:
            if a.get("bias") is False:
                pshapes = {r: v for r, v in pshapes.items() if r != "bias"}
            b = self.bind_params(name, pshapes)
            if b:
                attrs["params"] = b
            for role in pshapes:
                bound = b.get(role) if b else None
                pn = bound["name"] if isinstance(bound, dict) else (bound or f"{name}.{role}")
                if pn not in self.frozen:
                    own.add(pn)
        s = Stmt(name, type_ or d.types[0], list(parents), attrs, shape=out, op=opname)
        self.deps[name] = frozenset(own).union(*[self.deps.get(p, frozenset()) for p in parents])
        if keep:
            self.stmts.append(s)
            for p in parents:
                self.readers[p] = self.readers.get(p, 0) + 1
            self.used_ops.add(opname)
        return s

    def shape_of(self, name):
        for s in self.stmts:
            if s.name == name:
                return s.shape
        raise KeyError(name)

    def bind_params(self, layer: str, pshapes: dict) -> dict:
        """Parameter bindings: shared by name with an earlier parameter of the same role and shape
        (PaddlePaddle's sharing), frozen (immutable), or the defaults (no binding)."""
        rng, out = self.rng, {}
        share = rng.random() < 0.3
        for role, shape in pshapes.items():
            shape = tuple(shape)
            same = [n for n, (r, s) in self.params.items() if r == role and s == shape]
            if share and same:
                out[role] = rng.choice(same)
                continue
            if rng.random() < 0.25:
                pname = f"p_{layer}_{role}"
                self.params[pname] = (role, shape)
                if rng.random() < 0.3 and self.check in ("train", "grad", "part"):
                    out[role] = {"name": pname, "immutable": True}
                    self.frozen.add(pname)
                else:
                    out[role] = pname
            else:
                self.params[f"{layer}.{role}"] = (role, shape)
        return out

    def commit(self, s) -> str | None:
        if s is None:
            return None
        self.vals[s.name] = s.shape
        return s.name


# -- one generator per op: (gen) -> the new layer's name, or None (draw again) -----------------------

def _img(s):
    return len(s) == 4


def _act(rng):
    return rng.choice(["none", "none", "relu", "sigmoid", "tanh"])


def _pad(rng):
    return rng.choice(["VALID", "SAME", "SAME", [rng.randint(0, 1), rng.randint(0, 1)]])


def g_unary(type_):
    def gen(g):
        x = g.pick()
        attrs = {}
        if type_ == "ReLU" and g.rng.random() < 0.3:
            attrs["negative_slope"] = 0.1
        if type_ == "Dropout":
            attrs["dropout_keep_prob"] = g.rng.choice([0.5, 0.75])
        return g.commit(g.try_layer(_OPNAME[type_], [x], attrs, type_))
    return gen


def g_conv(g):
    r = g.rng
    x = g.pick(_img)
    if x is None:
        return None
    s = g.vals[x]
    kh, kw = r.randint(1, 3), r.randint(1, 3)
    a = {"filter": [kh, kw, r.choice([s[3], -1]), r.choice([1, 3, 5, 6, 7, 9])],
         "strides": [1, r.choice([1, 1, 2]), r.choice([1, 1, 2]), 1], "padding": _pad(r)}
    if r.random() < 0.5:
        a["activation"] = _act(r)
    if r.random() < 0.15 and g.check != "part":
        a["normalizer"] = "batch_norm"
    if r.random() < 0.2:
        a["bias"] = False
    return g.commit(g.try_layer("netc.conv2d", [x], a))


def g_depthwise(g):
    """A depthwise convolution (MobileNet's), channel multipliers 1 to 3."""
    r = g.rng
    x = g.pick(_img)
    if x is None:
        return None
    s = g.vals[x]
    a = {"filter": [r.randint(1, 3), r.randint(1, 3), r.choice([s[3], -1]), r.choice([1, 1, 2, 3])],
         "strides": [1, r.choice([1, 1, 2]), r.choice([1, 1, 2]), 1], "padding": _pad(r)}
    if r.random() < 0.5:
        a["activation"] = _act(r)
    if r.random() < 0.2:
        a["bias"] = False
    return g.commit(g.try_layer("netc.depthwise_conv2d", [x], a))


def g_clip(g):
    """ReLU6 (Clip's defaults) or a Clip of narrow bounds."""
    a = g.rng.choice([{}, {"min": -0.5, "max": 0.5}, {"min": 0.0, "max": 0.25}])
    return g.commit(g.try_layer("netc.clip", [g.pick()], a, "Clip" if a else "ReLU6"))


def g_deconv(g):
    r = g.rng
    x = g.pick(_img)
    if x is None:
        return None
    n, h, w, c = g.vals[x]
    kh, kw, st = r.randint(1, 3), r.randint(1, 3), r.choice([1, 2])
    pad = _pad(r)
    cout = r.randint(1, 5)
    for _ in range(8):
        H, W = r.randint(h, h * st + 2), r.randint(w, w * st + 2)
        a = {"filter": [kh, kw, cout, c], "strides": [1, st, st, 1], "padding": pad, "output_shape": [n, H, W, cout]}
        if r.random() < 0.3:
            a["activation"] = _act(r)
        s = g.try_layer("netc.deconv2d", [x], a)
        if s is not None:
            # its bias is not applied (netc.deconv2d): it gets no gradient, so nothing trains through it
            b = (s.attrs.get("params") or {}).get("bias")
            g.deps[s.name] = g.deps[s.name] - {b["name"] if isinstance(b, dict) else (b or f"{s.name}.bias")}
            return g.commit(s)
    return None


def g_ip(g):
    r = g.rng
    x = g.pick()
    a = {"num_outputs": r.choice([1, 2, 3, 5, 7, 10, 17])}
    if r.random() < 0.4:
        a["activation"] = _act(r)
    if r.random() < 0.15 and g.check != "part":
        a["normalizer"] = "batch_norm"
    if r.random() < 0.2:
        a["bias"] = False
    return g.commit(g.try_layer("netc.inner_product", [x], a))


def g_bn(g):
    r = g.rng
    x = g.pick()
    a = {}
    if r.random() < 0.5:
        a["epsilon"] = r.choice([1e-5, 1e-3])
    if r.random() < 0.3:
        a["momentum"] = 0.5
    return g.commit(g.try_layer("netc.batch_norm", [x], a))


def g_lrn(g):
    r = g.rng
    x = g.pick(_img)
    if x is None:
        return None
    a = {"local_size": r.choice([1, 3, 5]), "alpha": r.choice([1e-4, 0.05]), "beta": 0.75, "knorm": r.choice([1.0, 2.0])}
    return g.commit(g.try_layer("netc.lrn", [x], a))


def g_pool(type_):
    def gen(g):
        r = g.rng
        x = g.pick(_img)
        if x is None:
            return None
        k1, k2 = r.randint(1, 3), r.randint(1, 3)
        a = {"ksize": [1, k1, k2, 1], "strides": [1, r.randint(1, 2), r.randint(1, 2), 1]}
        if r.random() < 0.6:
            a["padding"] = r.choice(["VALID", "SAME", [r.randint(0, k1 // 2), r.randint(0, k2 // 2)],
                                     [r.randint(0, k1 - 1), r.randint(0, k2 - 1), r.randint(0, k1 - 1), r.randint(0, k2 - 1)]])
        return g.commit(g.try_layer(_OPNAME[type_], [x], a, type_))
    return gen


def g_upsample(g):
    r = g.rng
    x = g.pick(_img)
    if x is None:
        return None
    return g.commit(g.try_layer("netc.upsample2d", [x], {"ksize": [1, r.randint(1, 2), r.randint(1, 2), 1]}))


def g_concat(g):
    r = g.rng
    x = g.pick(lambda s: len(s) >= 2)
    if x is None:
        return None
    s = g.vals[x]
    dim = len(s) - 1 if r.random() < 0.7 else r.randrange(1, len(s))
    same = [n for n, t in g.vals.items() if len(t) == len(s) and all(a == b for j, (a, b) in enumerate(zip(t, s))
                                                                    if j != dim)]
    k = r.randint(2, 3)
    parents = [x] + [r.choice(same) for _ in range(k - 1)]
    r.shuffle(parents)
    a = {"dim": r.choice([dim, dim - len(s)])} if (dim != len(s) - 1 or r.random() < 0.5) else {}
    return g.commit(g.try_layer("netc.concat", parents, a, "Concatenate"))


def g_elementwise(g):
    r = g.rng
    x = g.pick()
    s = g.vals[x]
    same = [n for n, t in g.vals.items() if t == s]
    parents = [x] + [r.choice(same) for _ in range(r.randint(1, 2))]
    r.shuffle(parents)
    a = {"operation": r.choice(["sum", "sum", "product", "max"])}
    return g.commit(g.try_layer("netc.elementwise", parents, a))


def g_slice(g):
    r = g.rng
    x = g.pick(lambda s: len(s) >= 2)
    s = g.vals[x]
    dims = [d for d in range(1, len(s)) if any(s[d] % k == 0 for k in (2, 3)) or s[d] >= 1]
    d = r.choice(dims)
    ks = [k for k in (1, 2, 3) if s[d] % k == 0]
    k = r.choice(ks)
    a = {"dim": r.choice([d, d - len(s)]), "num_slices": k, "index": r.randrange(k)}
    return g.commit(g.try_layer("netc.slice", [x], a))


def g_reshape(g):
    r = g.rng
    x = g.pick()
    s = g.vals[x]
    rest = _prod(s[1:])
    divs = [d for d in range(1, rest + 1) if rest % d == 0]
    d = r.choice(divs)
    shape = r.choice([None, [s[0], -1], [-1, rest], [s[0], d, rest // d], [s[0], -1, d]])
    if g.check == "part" and shape and shape[0] != -1:
        shape = [-1] + shape[1:]          # a batch split cannot reshape to a literal batch (the pass says so)
        if shape.count(-1) > 1:
            shape = [-1, rest]
    a = {} if shape is None else {"output_shape": shape}
    return g.commit(g.try_layer("netc.reshape", [x], a, r.choice(["Reshape", "Flatten"])))


def g_softmax(g):
    x = g.pick()
    a = {}
    if g.rng.random() < 0.3:
        a["num_classes"] = _prod(g.vals[x][1:])
    return g.commit(g.try_layer("netc.softmax", [x], a))


def g_argsort(g):
    x = g.pick()
    f = _prod(g.vals[x][1:])
    s = g.try_layer("netc.argsort", [x], {"topk": g.rng.randint(1, min(f, 3))}, g.rng.choice(["ArgSort", "TopK"]))
    return s.name if s else None          # an integer result: nothing reads it


def g_accuracy(g):
    x = g.pick()
    f = _prod(g.vals[x][1:])
    lab = g.add_input([g.batch], "i32", prefix="lab")
    s = g.try_layer("netc.accuracy", [x, lab], {"topk": g.rng.randint(1, min(f, 3))})
    return s.name if s else None


def g_softmax_loss(g):
    r = g.rng
    x = g.pick()
    c = _prod(g.vals[x][1:])
    dt = r.choice(["i32", "i32", "i64"])
    shape = r.choice([[g.batch], [g.batch], [g.batch, 1], [g.batch, c]])
    lab = g.add_input(shape, dt, prefix="label")
    s = g.try_layer("netc.softmax_loss", [x, lab], {}, r.choice(["SoftmaxLoss", "SoftmaxCrossEntropy"]))
    return s.name if s else None


def g_euclidean_loss(g):
    r = g.rng
    x = g.pick()
    s = g.vals[x]
    other = [n for n, t in g.vals.items() if _prod(t) == _prod(s) and n != x]
    if other and r.random() < 0.3:
        y = r.choice(other)
    else:
        y = g.add_input(s if r.random() < 0.7 else (s[0], _prod(s[1:])), prefix="target")
    st = g.try_layer("netc.euclidean_loss", [x, y], {})
    return st.name if st else None


def g_embedding(g):
    """Rows of a table by integer ids: a new ids input ([B] or [B, L], i32 or i64), drawn in [0, V)."""
    r = g.rng
    shape = r.choice([[g.batch], [g.batch, r.randint(1, 4)]])
    ids = g.add_input(shape, r.choice(["i32", "i64"]), prefix="ids")
    return g.commit(g.try_layer("netc.embedding", [ids], {"num_embeddings": r.choice([1, 3, 17, 100]),
                                                         "dim": r.choice([1, 4, 7])}))


def g_recurrent(opname):
    def gen(g):
        """A time-major recurrent layer (Lstm, GRU, Recurrent, Clockwork) over a value [N, a, ...] of rank >= 3 read as a
        sequence: T = N, the batch the compiled targets scale, B = a (its features flattened); sometimes
        with an initial state, new inputs [a, H] no other layer reads (fed whole: no batch axis). Not in
        the part check (a split of axis 0, its time, is refused)."""
        r = g.rng
        x = g.pick(lambda s: len(s) >= 3)
        if x is None or g.check == "part":
            return None
        h, b = r.choice([1, 3, 5, 8]), g.vals[x][1]
        if opname == "netc.lstm":
            a, states = {"size": h, "activation": r.choice(["tanh", "sigmoid", "relu", "none"])}, 2
        elif opname in ("netc.recurrent", "netc.clockwork"):
            a, states = {"size": h, "activation": r.choice(["tanh", "sigmoid", "relu", "none"])}, 1
        else:
            a, states = {"dim_hidden": h, "bias": r.random() < 0.8, "linear_before_reset": r.random() < 0.6}, 1
        parents = [x]
        if r.random() < 0.4:
            for _ in range(states):
                parents.append(g.add_input([b, h], prefix="h"))
                g.vals.pop(parents[-1])
        s = g.try_layer(opname, parents, a)
        if s is None:
            g.stmts = [t for t in g.stmts if t.name not in parents[1:]]
        return g.commit(s)
    return gen


def g_rbm_visible(g):
    """SINGA's kRBMVis in its positive phase (out = in, a visible bias [vdim]). Its bias learns by
    contrastive divergence, which is not compiled: it has no gradient, so it is always frozen."""
    x = g.pick(lambda s: len(s) >= 2)
    if x is None or (g.check != "infer" and g.deps.get(x)):
        return None       # no gradient flows through it: nothing trainable before it
    s = g.try_layer("netc.rbm_visible", [x], {"gaussian": True} if g.rng.random() < 0.5 else {}, keep=False)
    if s is None:
        return None
    pname = f"p_{s.name}_bias"
    g.params[pname] = ("bias", (_prod(s.shape[1:]),))
    g.frozen.add(pname)
    s.attrs["params"] = {"bias": {"name": pname, "immutable": True}}
    g.deps[s.name] = g.deps.get(x, frozenset())
    g.stmts.append(s)
    g.readers[x] = g.readers.get(x, 0) + 1
    g.used_ops.add("netc.rbm_visible")
    return g.commit(s)


_OPNAME = {"ReLU": "netc.relu", "Sigmoid": "netc.sigmoid", "Tanh": "netc.tanh", "STanh": "netc.stanh", "Dropout": "netc.dropout",
           "Identity": "netc.identity", "Dummy": "netc.dummy", "Pooling": "netc.maxpool", "MaxPool": "netc.maxpool", "AvgPool": "netc.avgpool"}

# IR op -> (generator, weight, is a terminal: a loss or an integer result nothing reads)
OPS = {
    "netc.relu": (g_unary("ReLU"), 3, False), "netc.sigmoid": (g_unary("Sigmoid"), 1, False),
    "netc.tanh": (g_unary("Tanh"), 1, False), "netc.stanh": (g_unary("STanh"), 1, False),
    "netc.dropout": (g_unary("Dropout"), 1, False),
    "netc.identity": (g_unary("Identity"), 1, False), "netc.dummy": (g_unary("Dummy"), 1, False),
    "netc.rbm_visible": (g_rbm_visible, 1, False),
    "netc.conv2d": (g_conv, 5, False), "netc.deconv2d": (g_deconv, 2, False),
    "netc.depthwise_conv2d": (g_depthwise, 2, False), "netc.clip": (g_clip, 1, False),
    "netc.inner_product": (g_ip, 3, False), "netc.batch_norm": (g_bn, 2, False), "netc.lrn": (g_lrn, 1, False),
    "netc.maxpool": (g_pool("MaxPool"), 2, False), "netc.avgpool": (g_pool("AvgPool"), 2, False),
    "netc.upsample2d": (g_upsample, 1, False),
    "netc.concat": (g_concat, 2, False), "netc.elementwise": (g_elementwise, 2, False),
    "netc.slice": (g_slice, 1, False), "netc.reshape": (g_reshape, 1, False), "netc.softmax": (g_softmax, 1, False),
    "netc.embedding": (g_embedding, 1, False),
    "netc.lstm": (g_recurrent("netc.lstm"), 1, False), "netc.gru": (g_recurrent("netc.gru"), 1, False),
    "netc.recurrent": (g_recurrent("netc.recurrent"), 1, False),
    "netc.clockwork": (g_recurrent("netc.clockwork"), 1, False),
    "netc.argsort": (g_argsort, 1, True), "netc.accuracy": (g_accuracy, 1, True),
    "netc.softmax_loss": (g_softmax_loss, 1, True), "netc.euclidean_loss": (g_euclidean_loss, 1, True),
}

# Layer ops the generator never draws, and why.
SKIPPED = {
    "netc.opaque": "a layer type netc does not know: nothing to compare (executors refuse it; "
                   "--opaque-as-identity makes it an Identity, which is drawn)",
    "netc.input": "not a layer: every network declares inputs (f32 data, i32/i64 labels, one-hot rows)",
    "netc.one_hot": "it has a kernel (tests/kernels/test_sequence_kernels.py, tests/test_sequence_targets.py) but "
                    "reads integer ids, which the generator draws only for Embedding: not drawn yet",
    "netc.binomial_ce": "no kernel yet (Brainstorm's SigmoidCE / BinomialCrossEntropy, reference only: "
                        "tests/test_brainstorm_layers.py checks it against Brainstorm's formula and finite differences)",
    "netc.decay_loss": "no kernel yet (Brainstorm's L1Decay / L2Decay / Loss, reference only: "
                       "tests/test_brainstorm_layers.py)",
    "netc.deltas_scaling": "no kernel yet (Brainstorm's DeltasScaling, reference only: tests/test_brainstorm_layers.py)",
    "netc.mask": "no kernel yet (Brainstorm's Mask, reference only: tests/test_brainstorm_layers.py)",
    "netc.squared_difference": "no kernel yet (Brainstorm's SquaredDifference, reference only: "
                               "tests/test_brainstorm_layers.py)",
    "netc.highway": "no kernel yet (Brainstorm's Highway, reference only: tests/test_brainstorm_ops.py checks it "
                    "against Brainstorm's forward pass and finite differences)",
    "netc.clockwork_lstm": "no kernel yet (Brainstorm's ClockworkLstm, reference only: tests/test_brainstorm_ops.py "
                           "checks it against Brainstorm's forward pass and finite differences)",
    "netc.seq_pool": "it has kernels (tests/kernels/test_sequence_kernels.py, tests/test_sequence_targets.py) but "
                     "reads a time-major [T, B, ...] sequence with lengths [B] and gives [B, ...]: not drawn yet "
                     "(tests/test_sequence.py checks its reference and gradient; tests/test_gradients.py draws it)",
    "netc.channel_permute": "it has a kernel (tests/kernels/test_channel_permute_kernel.py) but its order must "
                            "be a permutation of the channels: not drawn yet (tests/test_reference.py and "
                            "tests/test_gradients.py draw it)",
    "netc.seq_reverse": "it has a kernel (tests/kernels/test_seq_reverse_kernel.py, tests/test_seq_reverse.py) but "
                        "reads a time-major [T, B, ...] sequence with lengths [B]: not drawn yet (tests/test_reference.py "
                        "and tests/test_gradients.py draw it)",
    "netc.seq_mask": "it has a kernel (tests/kernels/test_seq_mask_kernel.py, tests/test_seq_mask.py) but reads a "
                     "time-major [T, B, ...] sequence with lengths [B]: not drawn yet (tests/test_reference.py and "
                     "tests/test_gradients.py draw it)",
}


def ops_for(check: str) -> list:
    """The IR ops a check draws: the interpreter's kernels (infer, train: also their gradient
    kernels) or the reference executor's semantics (grad: ops with a gradient rule, and the
    non-differentiable ones as side outputs; part: every op)."""
    from netc.kernels.lowering import LOWERINGS
    from netc.ops import lookup
    out = []
    for name in OPS:
        d = lookup(name)
        entry = LOWERINGS.get(name)
        kernel = entry is not None and not entry.missing
        if check == "infer" and kernel:
            out.append(name)
        elif check == "train" and kernel and d.differentiable:
            out.append(name)
        elif check in ("grad", "part"):
            out.append(name)
        elif check == "cpu" and d.differentiable:    # the CPU target runs every op (a fast form or its reference)
            out.append(name)
    return out


def coverage() -> dict:
    """Every registry op: the checks that draw it, or why none does."""
    from netc.ops import all_ops
    per = {c: set(ops_for(c)) for c in CHECKS}
    rows = {}
    for d in all_ops():
        if d.training_only:
            rows[d.ir_name] = {"checks": ["train", "grad", "part"],
                               "how": "made by the training passes (no layer type): run by the train, grad and "
                                      "part checks wherever a drawn op's gradient, training form or update needs it"}
        elif getattr(d, "comm", False) or d.ir_name in ("netc.send", "netc.recv", "netc.all_gather",
                                                        "netc.reduce_scatter", "netc.all_reduce", "netc.broadcast"):
            rows[d.ir_name] = {"checks": ["part"], "how": "made by the partition pass (no layer type): run by the "
                                                          "part check's K-worker runs"}
        elif d.ir_name in OPS:
            cs = [c for c in CHECKS if d.ir_name in per[c]]
            why = {}
            if "infer" not in cs:
                why["infer"] = "no interpreter kernel (netc/kernels/lowering.py: " + \
                    (_missing(d.ir_name) or "none") + ")"
            if "train" not in cs and "infer" in cs:
                why["train"] = "not differentiable"
            rows[d.ir_name] = {"checks": cs, "types": list(d.types), **({"not_in": why} if why else {})}
        elif d.ir_name in SKIPPED:
            rows[d.ir_name] = {"checks": [], "skipped": SKIPPED[d.ir_name]}
        else:
            rows[d.ir_name] = {"checks": [], "uncovered": "no generator in bench/randnet.py OPS: add one"}
    return rows


def _differentiable(name) -> bool:
    from netc.ops import lookup
    return lookup(name).differentiable


def _missing(name):
    from netc.kernels.lowering import LOWERINGS
    e = LOWERINGS.get(name)
    return e.missing if e else None


def generate(seed: int, check: str) -> tuple:
    """(Net, config) for one seed of one check. config: what the check runs it with (dtype, phase,
    optimizer, freeze list, blocks...)."""
    rng = random.Random(f"{check}:{seed}")
    ops = ops_for(check)
    cfg = {"check": check, "seed": seed}
    check = "train" if check == "cpu" else check     # the CPU target's check draws training networks over every op
    g = Gen(rng, check, ops)
    N = g.batch
    # inputs: an image batch (odd spatial sizes, channels 1..7) and sometimes a flat one
    part = check == "part"

    def pattr(s=None):
        """Random partition annotations the partition pass accepts (its rules: inputs split along
        the batch or not at all; only convolutions and inner products with an even output count
        split by features, pointwise layers and pooling follow a feature-split input)."""
        if not part:
            return {}
        x = rng.random()
        if s is None or s.type is None:
            return {"partition_dim": 0} if x < 0.6 else {}
        feat = (s.op == "netc.conv2d" and s.attrs["filter"][3] % 2 == 0) or \
            (s.op == "netc.inner_product" and s.attrs["num_outputs"] % 2 == 0)
        follows = s.op in ("netc.relu", "netc.sigmoid", "netc.tanh", "netc.dropout", "netc.identity", "netc.maxpool",
                           "netc.avgpool") and any(
            t.attrs.get("partition_dim") == 1 for t in g.stmts if t.name in s.parents)
        if x < 0.4:
            return {"partition_dim": 0}
        if x < 0.6 and (feat or follows):
            return {"partition_dim": 1}
        if x < 0.68:
            return {"partition_dim": -1}
        if x < 0.85:
            return {"location": rng.randint(0, 1)}
        return {}

    if rng.random() < 0.8:
        g.add_input([N, rng.choice([3, 4, 5, 6, 7, 9]), rng.choice([3, 5, 6, 7]), rng.choice([1, 2, 3, 4, 5, 7])],
                    attrs=pattr())
    if rng.random() < 0.4 or not g.vals:
        g.add_input([N, rng.choice([1, 3, 4, 6, 9, 16])], attrs=pattr())
    body = [o for o in ops if not OPS[o][2]]
    terms = [o for o in ops if OPS[o][2]]
    weights = [OPS[o][1] for o in body]
    length = rng.randint(2, 7)
    tries = 0
    while sum(1 for s in g.stmts if s.type) < length and tries < 60:
        tries += 1
        op = rng.choices(body, weights)[0]
        before = len(g.stmts)
        name = OPS[op][0](g)
        if name and len(g.stmts) > before and part:
            g.stmts[-1].attrs.update(pattr(g.stmts[-1]))
    # phases: a train-only layer, or one name with a layer per phase
    phase = "train" if check in ("train", "grad", "part") else rng.choice(["test", "val", "train"])
    cfg["phase"] = phase
    if rng.random() < 0.25:
        x = g.pick()
        t1, t2 = rng.sample(["ReLU", "Sigmoid", "Tanh", "Identity", "Dropout"], 2)
        s1 = g.try_layer(_OPNAME[t1], [x], {}, t1)
        if s1 is not None:
            s1.attrs["include"] = "train"
            s2 = Stmt(s1.name, t2, [x], {"exclude": "train"}, shape=s1.shape, op=_OPNAME[t2])
            g.stmts.append(s2)
            g.used_ops.add(_OPNAME[t2])
            g.commit(s1)
    if rng.random() < 0.15:
        x = g.pick(recent=False)
        other = "test" if phase == "train" else "train"
        s = g.try_layer("netc.relu", [x], {}, "ReLU")
        if s is not None:
            s.attrs["include"] = rng.choice([other, phase])
            if s.attrs["include"] == phase:
                g.commit(s)
    # terminals: losses (train needs one), integer side outputs
    want_loss = check == "train" or (check in ("grad", "part") and rng.random() < 0.6) or rng.random() < 0.2
    tnames = []
    if terms:
        for _ in range(rng.randint(0, 1)):
            t = rng.choice(terms)
            if t in ("netc.softmax_loss", "netc.euclidean_loss") and (phase != "train" and check == "infer"):
                pass
            if t in ("netc.softmax_loss", "netc.euclidean_loss") and check != "infer":
                continue                          # the loss below reads a value with trainable parameters
            n = OPS[t][0](g)
            if n:
                tnames.append(n)
    if want_loss and not any(s.op in ("netc.softmax_loss", "netc.euclidean_loss") for s in g.stmts):
        leaves = [n for n in g.vals if not g.readers.get(n)] or list(g.vals)
        trained = [n for n in leaves if g.deps.get(n)] or [n for n in g.vals if g.deps.get(n)]
        x = trained[-1] if trained else leaves[-1]
        if not trained:   # the loss must depend on a trainable parameter
            x = g.commit(g.try_layer("netc.inner_product", [x], {"num_outputs": rng.choice([2, 3, 5])})) or x
        g.force = x                              # the loss reads it
        n = (g_softmax_loss if rng.random() < 0.6 else g_euclidean_loss)(g)
        if n:
            tnames.append(n)
    if check == "grad" and not any(g.deps.get(s.name) for s in g.stmts
                                   if s.type and not g.readers.get(s.name) and _differentiable(s.op)):
        x = ([n for n in g.vals if not g.readers.get(n)] or list(g.vals))[-1]   # some output must depend on a parameter
        g.commit(g.try_layer("netc.inner_product", [x], {"num_outputs": rng.choice([2, 3])}))
    if part:
        for s in g.stmts:
            if s.type and not any(k in s.attrs for k in ("partition_dim", "location")) and rng.random() < 0.7:
                s.attrs.update(pattr(s))
            if s.type is None and s.dtype != "f32" and "partition_dim" not in s.attrs and rng.random() < 0.5:
                s.attrs["partition_dim"] = 0
    net = Net(g.stmts)
    if rng.random() < 0.15:
        other = {s.name for s in g.stmts if s.attrs.get("include") not in (None, phase) and s.name not in g.vals}
        leaves = [s.name for s in g.stmts if s.type and not g.readers.get(s.name) and s.name not in other]
        inner = [s.name for s in g.stmts if s.type and g.readers.get(s.name) and s.name in g.vals]
        outs = list(dict.fromkeys(rng.sample(leaves, max(1, len(leaves) - 1)) + rng.sample(inner, min(1, len(inner)))))
        if check != "infer":
            outs += [s.name for s in g.stmts if s.op in ("netc.softmax_loss", "netc.euclidean_loss")]
        if check == "grad":      # an output the gradient reaches a parameter from (the last such leaf)
            op_of = {t.name: t.op for t in g.stmts}
            outs += [n for n in leaves if g.deps.get(n) and _differentiable(op_of[n])][-1:]
        net.outputs = list(dict.fromkeys(outs)) or None
    if check == "infer":
        cfg["dtype"] = rng.choice(["f32", "f32", "f32", "f16", "bf16", "tf32"])
        cfg["blocks"] = rng.choice(["cuda", "large"])
    if check in ("train", "part"):
        name = rng.choice(["sgd", "sgd", "momentum", "nesterov", "adam", "rmsprop", "adagrad"])
        opts = {"lr": rng.choice([0.01, 0.02, 0.05]) if name not in ("adam", "rmsprop", "adagrad") else 0.001}
        if rng.random() < 0.3:
            opts["weight_decay"] = 0.001
        if rng.random() < 0.15 and check == "train":
            opts["clip_norm"] = 1.0
        net.optimizer = (name, opts)
        if check == "train":
            cfg["blocks"] = rng.choice(["cuda", "large", "large"])
    if check in ("train", "grad", "part") and rng.random() < 0.2:
        ends = [s.name for s in g.stmts if s.type and not g.readers.get(s.name)]
        reach = set().union(*[g.deps.get(n, frozenset()) for n in ends]) if ends else set()
        if len(reach) >= 2:
            cfg["freeze"] = [rng.choice(sorted(reach))]
    cfg["ops"] = sorted({s.op for s in g.stmts if s.type})
    return net, cfg


# ============================================================================ the checks

@dataclass
class Outcome:
    status: str                  # ok, mismatch, internal, rejected, known, timeout, invalid
    signature: str = ""
    message: str = ""
    metric: float | None = None  # the worst error against the tolerance's measure

    def as_dict(self):
        return dict(status=self.status, signature=self.signature, message=self.message[:2000], metric=self.metric)


def _norm(msg: str) -> str:
    """A message without its numbers and names of values: the part that identifies a failure."""
    msg = msg.strip().splitlines()[0] if msg.strip() else ""
    msg = re.sub(r"'[^']*'", "'_'", msg)
    msg = re.sub(r"\(netc\.\w+\)", "(op)", msg)
    msg = re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "N", msg)
    return msg[:120]


def _where(exc) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    frames = [f for f in tb if "/netc/" in f.filename] or tb
    f = frames[-1] if frames else None
    return f"{os.path.basename(f.filename)}:{f.name}" if f else "?"


def _load(text: str, path: str):
    from netc.frontend import load_text
    return load_text(text, path)


def _training(freeze=(), outputs=None, optimizer=None):
    """The training options of a check: `freeze`; outputs: differentiate these outputs instead of the
    losses; optimizer None: gradients only (the backward pass alone), else the optimizer pass's options."""
    from netc.pipelines import Training
    return Training(freeze=tuple(freeze), outputs=tuple(outputs) if outputs is not None else None,
                    optimizer=dict(optimizer or {}), gradients_only=optimizer is None)


def _check_ctx(ctx):
    from netc.diagnostics import NetcError
    if ctx.diag.has_errors():
        raise NetcError(ctx.diag.diagnostics[:])
    return ctx


def check_infer(text: str, cfg: dict, path: str) -> Outcome:
    from netc.passes.set_dtype import precision_of
    from netc.runtime.compare import network_tolerance, relative_error
    from netc.runtime.interp import InterpProgram, default_inputs
    from netc.runtime.reference import run_reference
    from netc.runtime.run import check_against_reference
    m = _load(text, path)
    d = cfg.get("dtype", "f32")
    dtype, tf32 = (None, False) if d == "f32" else (("f32", True) if d == "tf32" else (d, False))
    prog = InterpProgram(m, None, seed=cfg["seed"], phase=cfg.get("phase", "test"), dtype=dtype, tf32=tf32,
                         blocks=cfg.get("blocks", "cuda"))
    ins = default_inputs(m, prog.net, cfg["seed"])
    got = prog.run(ins)
    ref = run_reference(m, ins, None, network=prog.net, seed=cfg["seed"])
    precision = precision_of(prog.net)
    with contextlib.redirect_stderr(io.StringIO()):     # the rule of --compare
        failed = check_against_reference(m, prog.net, got, ins, None, cfg["seed"], ref=ref)
    tol = network_tolerance(precision)
    worst = max((relative_error(v, ref[k]) for k, v in got.items()), default=0.0)
    if failed:
        return Outcome("mismatch", f"infer:mismatch:{d}", "; ".join(f.message for f in failed), worst / tol)
    return Outcome("ok", metric=worst / tol)


def _training_module(text, cfg, path, optimizer=None):
    from netc.pipelines import Options, training
    m = _load(text, path)
    _check_ctx(training(m, Options(phase="train", training=_training(cfg.get("freeze", []), optimizer=optimizer))))
    net = next(n for n in m.networks() if "gradients" in n.attrs)
    return m, net


def check_train(text: str, cfg: dict, path: str) -> Outcome:
    import torch
    from netc.ops.optim import learning_rate
    from netc.passes.set_dtype import precision_of
    from netc.runtime.compare import training_tolerance
    from netc.runtime.interp import InterpTrainer, compare_step
    from netc.runtime.train import ReferenceTrainer
    m, net = _training_module(text, cfg, path, optimizer={})
    if not net.attrs.get("gradients"):
        return Outcome("ok", message="nothing to train")
    tol = training_tolerance(precision_of(net))
    schedule = dict((net.attrs.get("optimizer") or {}).get("schedule") or {"type": "fixed", "base_lr": 0.01})
    trainer = InterpTrainer(m, net.attrs["sym_name"], None, seed=cfg["seed"], blocks=cfg.get("blocks", "cuda"))
    ref = ReferenceTrainer(m, net, None, seed=cfg["seed"], dtype=torch.float64)
    worst = 0.0
    for k in range(cfg.get("steps", TRAIN_STEPS)):
        row = compare_step(trainer, ref, None, learning_rate(schedule, k), tol)
        errs = [("loss", row["loss_err"]), ("grad", row["grad_err"]), ("param", row["param_err"])]
        worst = max([worst] + [e for _, e in errs if e is not None])
        # as `netc run --train --compare` decides (runtime.compare.compare_training): compare_step's
        # `beyond` applies the f32-aware rule (tolerance + 8 x the f32 reference's own error), and
        # the reference's gradient and update ops on the compiled forward's own values agreeing is
        # rounding across a discontinuity, not a failure
        bad = row["beyond"]
        if not bad:
            continue
        if "local_grad" in row and row["local_grad"] <= tol and row["local_param"] <= tol and "loss" not in bad:
            continue
        saturated = " saturated" if min(abs(row["ref_loss"]), abs(row["loss"])) < 1e-4 else ""
        msg = (f"step {row['step']}: {', '.join(bad)} beyond {tol:.0e} + 8 x the f32 reference's error (loss "
               f"{row['ref_loss']:.3e}, loss err {row['loss_err']:.2e} (f32 {row['loss_err32']:.2e}), gradient of "
               f"'{row['grad_at']}' {row['grad_err']} (f32 {row['grad_err32']}), '{row['param_at']}' "
               f"{row['param_err']:.3e} (f32 {row['param_err32']:.3e}) after the update)")
        return Outcome("mismatch", f"train:mismatch:{bad[0]}{saturated}", msg, worst / tol)
    return Outcome("ok", metric=worst / tol)


def check_cpu(text: str, cfg: dict, path: str) -> Outcome:
    """The CPU target (runtime/cpu.py: the generated step, its out= forms, tuned convolution forms and lowerings):
    the inference program's outputs (CpuNet) against the f64 reference as `netc run --target cpu --compare` decides,
    then N training steps (CpuTrainer) against the f64 reference from the same state, as check_train decides."""
    import torch
    from netc.ops.optim import learning_rate
    from netc.passes.set_dtype import precision_of
    from netc.pipelines import Options, inference
    from netc.runtime.compare import network_tolerance, relative_error, training_tolerance
    from netc.runtime.cpu import CpuNet, CpuTrainer
    from netc.runtime.interp import compare_step, default_inputs
    from netc.runtime.reference import run_reference
    from netc.runtime.run import check_against_reference
    from netc.runtime.train import ReferenceTrainer
    m = _load(text, path)
    _check_ctx(inference(m, Options(phase=cfg.get("phase", "train"))))
    net = m.networks()[0]
    cpu = CpuNet(m, None, None, seed=cfg["seed"])
    ins = default_inputs(m, net, cfg["seed"])
    got = cpu(ins)
    ref = run_reference(m, ins, None, network=net, seed=cfg["seed"])
    with contextlib.redirect_stderr(io.StringIO()):     # the rule of --compare
        failed = check_against_reference(m, net, got, ins, None, cfg["seed"], ref=ref)
    tol = network_tolerance(precision_of(net))
    worst = max((relative_error(v, ref[k]) for k, v in got.items() if k in ref), default=0.0) / tol
    if failed:
        return Outcome("mismatch", "cpu:mismatch:infer", "; ".join(f.message for f in failed), worst)
    m, net = _training_module(text, cfg, path, optimizer={})
    if not net.attrs.get("gradients"):
        return Outcome("ok", message="nothing to train", metric=worst)
    tol = training_tolerance(precision_of(net))
    schedule = dict((net.attrs.get("optimizer") or {}).get("schedule") or {"type": "fixed", "base_lr": 0.01})
    trainer = CpuTrainer(m, net, None, seed=cfg["seed"], capture=True)
    ref = ReferenceTrainer(m, net, None, seed=cfg["seed"], dtype=torch.float64)
    for k in range(cfg.get("steps", TRAIN_STEPS)):
        row = compare_step(trainer, ref, None, learning_rate(schedule, k), tol)
        errs = [e for e in (row["loss_err"], row["grad_err"], row["param_err"]) if e is not None]
        worst = max([worst] + [e / tol for e in errs])
        bad = row["beyond"]
        if not bad or ("local_grad" in row and row["local_grad"] <= tol and row["local_param"] <= tol
                       and "loss" not in bad):
            continue
        return Outcome("mismatch", f"cpu:mismatch:train:{bad[0]}",
                       f"step {row['step']}: {', '.join(bad)} beyond {tol:.0e} + 8 x the f32 reference's error "
                       f"(loss err {row['loss_err']:.2e}, gradient of '{row['grad_at']}' {row['grad_err']}, "
                       f"'{row['param_at']}' {row['param_err']:.3e} after the update)", worst)
    return Outcome("ok", metric=worst)


def check_grad(text: str, cfg: dict, path: str) -> Outcome:
    from netc.ir.query import network_outputs
    from netc.pipelines import Options, inference, training
    from netc.runtime.reference import _name
    from netc.runtime.train import check_grads
    m = _load(text, path)
    _check_ctx(inference(m, Options(phase="train")))
    net = m.networks()[0]
    # a random cotangent on every float output (its grad_seed input), a unit one on the losses
    outs = [_name(op) for op in network_outputs(net) if op.results and op.results[0].type.dtype.startswith(("f", "b"))]
    # the backward pass over the same forward program: the training pipeline on a fresh load of the text
    m = _load(text, path)
    _check_ctx(training(m, Options(phase="train", training=_training(cfg.get("freeze", []), outputs=outs))))
    net = m.networks()[0]
    if not net.attrs.get("gradients"):
        return Outcome("ok", message="no trainable parameter reaches an output")
    rows = check_grads(m, None, None, None, seed=cfg["seed"])
    worst = max((r["rel_error"] for r in rows), default=0.0)
    if worst > GRAD_TOL:
        r = max(rows, key=lambda r: r["rel_error"])
        return Outcome("mismatch", "grad:mismatch", f"gradient of '{r['param']}' differs from torch.autograd: "
                       f"relative error {worst:.3e} > {GRAD_TOL:.0e}", worst / GRAD_TOL)
    return Outcome("ok", metric=worst / GRAD_TOL)


def _update_noise(text: str, ga, gb) -> dict:
    """{parameter: how far its value after TRAIN_STEPS updates may move from rounding alone}: the
    gradients of two runs that agree to rounding (K workers sum in another order) differ by dg, and
    an update moves a parameter by at most S x dg for a gradient change dg -- S = lr for SGD, lr / (1 -
    momentum) with momentum, and lr / eps for Adam, RMSProp and AdaGrad near a zero gradient (their
    step is lr g / (sqrt(v) + eps) with v ~ g^2: a gradient that is 0 up to rounding, 1e-16, moves
    the parameter by 1e-11 with lr 1e-3 and eps 1e-8, which is no scale a relative tolerance knows).
    Bounded by TRAIN_STEPS x S x dg, twice over (dg is the last step's, the earlier ones' alike)."""
    import numpy as np
    from netc.ops.optim import OPTIMIZERS
    m = re.search(r"^optimizer (\w+) \{(.*)\}", text, re.M)
    name = m.group(1) if m else "sgd"
    opts = dict(OPTIMIZERS.get(name, ("", {}))[1])
    for k, v in re.findall(r"(\w+): ([-+.\deE]+)", m.group(2) if m else ""):
        opts[k] = float(v)
    lr = float(opts.get("lr", 0.01))
    if "eps" in opts:
        sens = lr / float(opts["eps"])
    else:
        sens = lr / (1.0 - float(opts.get("momentum", 0.0)))
    if not (os.path.exists(ga) and os.path.exists(gb)):
        return {}
    a, b = np.load(ga), np.load(gb)
    return {k: 2 * TRAIN_STEPS * sens * float(np.abs(a[k].astype("f8") - b[k].astype("f8")).max())
            for k in a.files if k in b.files and a[k].shape == b[k].shape and a[k].size}


def _npz_err(a, b, noise: dict | None = None) -> tuple:
    """(max relative error, at) of the tensors of npz `a` against `b`, each measured against the larger
    of its own max and 1e-2 x the largest of its kind (runtime.compare's grad_scales/param_scales:
    a gradient that is zero up to rounding, and the optimizer state Adam or AdaGrad accumulates from
    it, is rounding noise, not a scale; kind = the name's last component: weight, bias, adam_v, ...;
    gradients (a .g.npz) are one kind). noise: {parameter: absolute difference its update's rounding
    explains} (_update_noise), taken off a parameter's difference first."""
    import numpy as np
    grads = str(a).endswith(".g.npz")
    a, b = np.load(a), np.load(b)
    if sorted(a.files) != sorted(b.files):
        return float("inf"), f"different tensors: {sorted(set(a.files) ^ set(b.files))[:4]}"
    kind = (lambda k: "grad") if grads else (lambda k: k.rpartition(".")[2])
    big: dict = {}
    for k in b.files:
        if b[k].size:
            big[kind(k)] = max(big.get(kind(k), 0.0), float(np.abs(b[k].astype("f8")).max()))
    worst, at = 0.0, None
    for k in a.files:
        x, y = a[k], b[k]
        if x.shape != y.shape:
            return float("inf"), f"'{k}' has shape {x.shape}, the single process {y.shape}"
        if not y.size:
            continue
        scale = max(float(np.abs(y).max()), 1e-2 * big.get(kind(k), 0.0), 1e-300)
        diff = float(np.abs(x.astype("f8") - y.astype("f8")).max())
        e = max(0.0, diff - (noise or {}).get(k, 0.0)) / scale
        e = float("inf") if e != e else e
        if e >= worst:
            worst, at = e, k
    return worst, at


def _netc(argv: list) -> tuple:
    """`netc ARGV` in this process, stdout and stderr caught at the descriptors (forked ranks write
    there too): (exit status, output)."""
    from netc.cli import main
    with tempfile.TemporaryFile("w+") as f:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            with contextlib.redirect_stdout(io.TextIOWrapper(os.fdopen(os.dup(1), "wb"), write_through=True)) as o, \
                    contextlib.redirect_stderr(o):
                rc = main([str(a) for a in argv])
                o.flush()
        finally:
            sys.stdout.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        f.seek(0)
        return rc, f.read()


def check_part(text: str, cfg: dict, path: str) -> Outcome:
    d = tempfile.mkdtemp(prefix="randnet-part-")
    try:
        worst = 0.0
        modes = [("forward", []), ("train", ["--train", "--steps", str(TRAIN_STEPS), "--dtype", "f64"])]
        has_loss = "Loss(" in text or "CrossEntropy(" in text
        for mode, extra in modes:
            if mode == "train" and not has_loss:
                continue
            if mode == "train" and cfg.get("freeze"):
                extra = extra + ["--freeze", ",".join(cfg["freeze"])]
            files = {k: os.path.join(d, f"{mode}-{k}") for k in ("one", "many")}
            grads = (lambda k: ["--grads", files[k] + ".g.npz"]) if mode == "train" else (lambda k: [])
            rc1, out1 = _netc(["run", path, "--workers", "1", *extra, "-o", files["one"] + ".npz", *grads("one")])
            if rc1 != 0:
                kind = "internal" if rc1 == 2 else "invalid"
                return Outcome(kind, f"part:{kind}:single:{_norm(_first_error(out1))}", out1[-1500:])
            rc2, out2 = _netc(["run", path, "--workers", "2", *extra, "-o", files["many"] + ".npz", *grads("many")])
            if rc2 != 0:
                internal = rc2 == 2 or "internal error" in out2 or "Traceback" in out2
                kind = "internal" if internal else "rejected"
                return Outcome(kind, f"part:{kind}:{mode}:{_norm(_first_error(out2))}", out2[-1500:])
            pairs = [(files["many"] + ".npz", files["one"] + ".npz")]
            if mode == "train":
                pairs.append((files["many"] + ".g.npz", files["one"] + ".g.npz"))
            noise = _update_noise(text, files["many"] + ".g.npz", files["one"] + ".g.npz") if mode == "train" else {}
            for a, b in pairs:
                e, at = _npz_err(a, b, noise if a.endswith(".npz") and not a.endswith(".g.npz") else None)
                worst = max(worst, e)
                if e > PART_TOL:
                    what = "gradient" if a.endswith(".g.npz") else ("output" if mode == "forward" else "parameter")
                    return Outcome("mismatch", f"part:mismatch:{mode}:{what}",
                                   f"{mode}: {what} '{at}' on 2 workers differs from the single process: relative "
                                   f"error {e:.3e} > {PART_TOL:.0e}", e / PART_TOL)
        return Outcome("ok", metric=worst / PART_TOL)
    finally:
        import shutil
        shutil.rmtree(d, ignore_errors=True)


def _first_error(out: str) -> str:
    for line in out.splitlines():
        if "error:" in line or "internal error" in line or "Error:" in line:
            return line.split("error:", 1)[-1]
    return out.strip().splitlines()[-1] if out.strip() else ""


CHECK_FNS = {"infer": check_infer, "train": check_train, "grad": check_grad, "part": check_part, "cpu": check_cpu}


def run_check(text: str, cfg: dict, path: str) -> Outcome:
    """One check of one network in this process: exceptions become outcomes."""
    from netc.diagnostics import NetcError
    try:
        out = CHECK_FNS[cfg["check"]](text, cfg, path)
    except NetcError as e:
        msg = "; ".join(d.message for d in e.diagnostics) if e.diagnostics else str(e)
        # a valid network the compiler cannot build is netc's failure, not a user error
        kind = "internal" if any(re.search(rx, msg) for rx in NOT_USER_ERRORS) else "rejected"
        out = Outcome(kind, f"{cfg['check']}:{kind}:{_norm(msg)}", msg)
    except _Timeout:
        out = Outcome("timeout", f"{cfg['check']}:timeout", "")
    except Exception as e:  # noqa: BLE001 - netc's own bug: what the harness is for
        msg = f"{type(e).__name__}: {e}"
        out = Outcome("internal", f"{cfg['check']}:internal:{type(e).__name__}:{_where(e)}:{_norm(str(e))}",
                      msg + "\n" + "".join(traceback.format_exception(e))[-3000:])
    return _known(out, cfg["check"])


def _known(out: Outcome, check: str) -> Outcome:
    if out.status in ("ok",):
        return out
    blob = out.signature + "\n" + out.message
    for kid, kcheck, rx in KNOWN:
        if (kcheck is None or kcheck == check) and re.search(rx, blob):
            return Outcome("known", f"known:{kid}", out.message, out.metric)
    return out


class _Timeout(Exception):
    pass


def run_isolated(text: str, cfg: dict, timeout: float, path: str | None = None) -> Outcome:
    """run_check in a forked child (its own process group: forked ranks die with it), killed after
    `timeout` seconds."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 0
        try:
            os.setpgid(0, 0)
            p = path
            if p is None:
                fd, p = tempfile.mkstemp(suffix=".nd", prefix="randnet-")
                with os.fdopen(fd, "w") as f:
                    f.write(text)

            def alarm(*_):
                raise _Timeout()
            signal.signal(signal.SIGALRM, alarm)
            signal.alarm(max(1, int(timeout)))
            out = run_check(text, cfg, p)
            signal.alarm(0)
            if path is None:
                os.unlink(p)
            data = json.dumps(out.as_dict()).encode()
            with os.fdopen(w, "wb") as f:
                f.write(data)
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    deadline = time.monotonic() + timeout + 15
    chunks = []
    import select
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(r)
            return Outcome("timeout", f"{cfg['check']}:timeout", f"killed after {timeout + 15:.0f} s")
        ready, _, _ = select.select([r], [], [], min(left, 1.0))
        if ready:
            b = os.read(r, 1 << 16)
            if not b:
                break
            chunks.append(b)
    os.close(r)
    _, st = os.waitpid(pid, 0)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)     # any rank left behind
    if not chunks:
        code = os.waitstatus_to_exitcode(st)
        return Outcome("internal", f"{cfg['check']}:internal:crash:{code}", f"the check's process died ({code})")
    d = json.loads(b"".join(chunks))
    return Outcome(**d)


# ============================================================================ minimization

def _refs_replaced(stmts, old, new):
    out = []
    for s in stmts:
        if old in s.parents:
            s = Stmt(s.name, s.type, [new if p == old else p for p in s.parents], s.attrs, s.dtype, s.shape, s.op)
        out.append(s)
    return out


def minimize(net: Net, cfg: dict, signature: str, timeout: float, budget_s: float = 600.0, log=None) -> Net:
    """Delta debugging over the statements (chunks, then one at a time), then bypassing each layer
    (its readers read its first parent instead), then dropping attributes, while run_check's
    signature stays the same. Returns the smallest network found within the budget."""
    t0 = time.monotonic()

    def same(candidate: Net) -> bool:
        if time.monotonic() - t0 > budget_s:
            return False
        return run_isolated(candidate.text(), cfg, timeout).signature == signature

    def with_stmts(stmts, outputs=net.outputs):
        names = {s.name for s in stmts}
        outs = [o for o in (outputs or []) if o in names] or None
        return Net(stmts, outs, net.optimizer, net.name)

    cur = net
    # ddmin over statements
    n = 2
    while len(cur.stmts) >= 2 and time.monotonic() - t0 < budget_s:
        size = max(1, len(cur.stmts) // n)
        reduced = False
        for i in range(0, len(cur.stmts), size):
            cand = with_stmts(cur.stmts[:i] + cur.stmts[i + size:], cur.outputs)
            if same(cand):
                cur, n, reduced = cand, max(n - 1, 2), True
                break
        if not reduced:
            if size == 1:
                break
            n = min(n * 2, len(cur.stmts))
    # bypass layers
    changed = True
    while changed and time.monotonic() - t0 < budget_s:
        changed = False
        for s in list(cur.stmts):
            if s.type is None or not s.parents:
                continue
            rest = [t for t in cur.stmts if t is not s]
            for p in dict.fromkeys(s.parents):
                cand = with_stmts(_refs_replaced(rest, s.name, p),
                                  [p if o == s.name else o for o in (cur.outputs or [])] or None)
                if same(cand):
                    cur, changed = cand, True
                    break
            if changed:
                break
    # attributes, and the optimizer and output statement
    for i, s in enumerate(list(cur.stmts)):
        for k in list(s.attrs):
            if time.monotonic() - t0 > budget_s:
                break
            a = {kk: v for kk, v in s.attrs.items() if kk != k}
            t = Stmt(s.name, s.type, s.parents, a, s.dtype, s.shape, s.op)
            cand = with_stmts(cur.stmts[:i] + [t] + cur.stmts[i + 1:], cur.outputs)
            if same(cand):
                cur = cand
                s = t
    if cur.outputs and same(Net(cur.stmts, None, cur.optimizer, cur.name)):
        cur = Net(cur.stmts, None, cur.optimizer, cur.name)
    if log:
        log(f"  minimized {len(net.stmts)} -> {len(cur.stmts)} statements in {time.monotonic() - t0:.0f} s")
    return cur


# ============================================================================ the campaign

def command_of(cfg: dict, path: str) -> str:
    """The command that reruns a saved network's check."""
    c = cfg["check"]
    if c == "infer":
        d = cfg.get("dtype", "f32")
        dt = {"f32": "", "tf32": " --tf32", "f16": " --dtype fp16", "bf16": " --dtype bf16"}[d]
        return (f"netc run {path} --target interp --compare --phase {cfg.get('phase', 'test')}{dt} --seed "
                f"{cfg['seed']}" + (" --interp-blocks large" if cfg.get("blocks") == "large" else ""))
    fr = f" --freeze {','.join(cfg['freeze'])}" if cfg.get("freeze") else ""
    if c == "train":
        return (f"netc run {path} --train --target interp --compare --steps {cfg.get('steps', TRAIN_STEPS)} --seed "
                f"{cfg['seed']}{fr}" + (" --interp-blocks large" if cfg.get("blocks") == "large" else ""))
    if c == "grad":
        return f"python bench/randnet.py --rerun {path}   (VJPs with random cotangents: the backward pass's outputs option)"
    if c == "cpu":
        return (f"netc run {path} --target cpu --compare --phase {cfg.get('phase', 'train')} --seed {cfg['seed']}; "
                f"netc run {path} --train --target cpu --compare --steps {cfg.get('steps', TRAIN_STEPS)} --seed "
                f"{cfg['seed']}{fr}")
    return (f"netc run {path} --workers 2 [--train --steps {TRAIN_STEPS} --dtype f64{fr}] -o many.npz   vs   the "
            f"same with --workers 1")


def versions() -> dict:
    import torch
    import triton
    import netc
    return {"netc": getattr(netc, "__version__", None) or _netc_version(), "torch": torch.__version__,
            "triton": triton.__version__}


def _netc_version():
    from netc.version import __version__
    return __version__


def _git_head() -> str | None:
    import subprocess
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True).stdout.strip() or None
    except OSError:
        return None


def campaign(counts: dict, seed0: int, out: Path, timeout: float, results: Path | None, minimize_them: bool = True,
             min_budget: float = 600.0, log=print) -> dict:
    import results_file
    out.mkdir(parents=True, exist_ok=True)
    doc = {"benchmark": "randnet", "date": results_file.now(), "machine": results_file.machine(),
           "versions": versions(), "git": _git_head(),
           "config": {"counts": counts, "seed": seed0, "timeout_s": timeout, "train_steps": TRAIN_STEPS,
                      "workers": 2, "tolerances": {"infer": "runtime.compare.network_tolerance (f32 1e-4, tf32 1e-2, "
                                                            "f16 5e-3, bf16 4e-2)",
                                                   "train": "runtime.compare.training_tolerance (f32 1e-4) via "
                                                            "compare_step, local rounding check as the CLI",
                                                   "grad": GRAD_TOL, "part": PART_TOL}},
           "coverage": coverage(), "checks": {}, "findings": [], "complete": False}
    found = 0
    for check, count in counts.items():
        rec = {"nets": 0, "outcomes": {}, "signatures": {}, "ops": {}, "dtypes": {}, "elapsed_s": 0.0,
               "worst_metric": 0.0, "rejected": {}, "known": {}}
        doc["checks"][check] = rec
        t0 = time.monotonic()
        for i in range(count):
            seed = seed0 + i
            net, cfg = generate(seed, check)
            text = net.text()
            t1 = time.monotonic()
            o = run_isolated(text, cfg, timeout)
            dt = time.monotonic() - t1
            rec["nets"] += 1
            rec["outcomes"][o.status] = rec["outcomes"].get(o.status, 0) + 1
            for op in cfg["ops"]:
                rec["ops"][op] = rec["ops"].get(op, 0) + 1
            if "dtype" in cfg:
                rec["dtypes"][cfg["dtype"]] = rec["dtypes"].get(cfg["dtype"], 0) + 1
            if o.metric is not None and o.status == "ok":
                rec["worst_metric"] = max(rec["worst_metric"], o.metric)
            if o.status == "rejected":
                rec["rejected"][o.signature] = rec["rejected"].get(o.signature, 0) + 1
            if o.status == "known":
                rec["known"][o.signature] = rec["known"].get(o.signature, 0) + 1
            if o.status not in ("ok", "rejected", "known"):
                rec["signatures"][o.signature] = rec["signatures"].get(o.signature, 0) + 1
                log(f"{check} seed {seed}: {o.status}: {o.signature} ({dt:.1f} s)\n    {o.message[:300]}")
                first = rec["signatures"][o.signature] == 1
                small = net
                if minimize_them and first and o.status != "timeout":
                    small = minimize(net, cfg, o.signature, timeout, min_budget, log)
                found += 1
                stem = f"{found:03d}-{check}-{o.status}"
                path = out / f"{stem}.nd"
                path.write_text(small.text())
                (out / f"{stem}.orig.nd").write_text(text)
                side = {"check": check, "seed": seed, "config": cfg, "signature": o.signature, "status": o.status,
                        "message": o.message[:3000], "command": command_of(cfg, str(path)),
                        "minimized": minimize_them and first and o.status != "timeout"}
                (out / f"{stem}.json").write_text(json.dumps(side, indent=1))
                doc["findings"].append({"file": str(path), "signature": o.signature, "seed": seed, "check": check})
            if (i + 1) % 25 == 0 or i + 1 == count:
                rec["elapsed_s"] = round(time.monotonic() - t0, 1)
                rec["nets_per_s"] = round(rec["nets"] / max(rec["elapsed_s"], 1e-9), 3)
                log(f"{check}: {i + 1}/{count} nets, {rec['outcomes']} ({rec['elapsed_s']:.0f} s)")
                if results:
                    _write(results, doc)
    doc["complete"] = True
    doc["date_end"] = results_file.now()
    if results:
        _write(results, doc)
    return doc


def _write(path: Path, doc: dict):
    tmp = Path(str(path) + ".tmp")
    tmp.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, path)


def table(doc: dict) -> str:
    statuses = ["ok", "mismatch", "internal", "timeout", "rejected", "known", "invalid"]
    lines = [f"{'check':6s} {'nets':>6s} " + " ".join(f"{s:>9s}" for s in statuses) + f" {'nets/s':>7s} {'worst':>7s}"]
    for c, r in doc["checks"].items():
        lines.append(f"{c:6s} {r['nets']:6d} " + " ".join(f"{r['outcomes'].get(s, 0):9d}" for s in statuses)
                     + f" {r.get('nets_per_s', 0):7.3f} {r['worst_metric']:7.3f}")
    lines.append("(worst: the largest error of a passing net as a fraction of its tolerance)")
    return "\n".join(lines)


def rerun(path: str) -> int:
    side = json.loads(Path(path[:-3] + ".json").read_text())
    text = Path(path).read_text()
    o = run_check(text, side["config"], path)
    print(f"{o.status}: {o.signature}\n{o.message}")
    print(f"(recorded: {side['signature']})")
    return 0 if o.status == "ok" else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", choices=CHECKS)
    p.add_argument("--count", type=int, default=20)
    p.add_argument("--counts", help="check=N,... (several checks in one run)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=90.0, help="seconds per network and check")
    p.add_argument("--out", default="/tmp/randnet", help="folder for the minimized findings")
    p.add_argument("--results", default=str(ROOT / "bench" / "results" / "randnet.json"))
    p.add_argument("--no-results", action="store_true")
    p.add_argument("--no-minimize", action="store_true")
    p.add_argument("--min-budget", type=float, default=300.0, help="seconds of minimization per new signature")
    p.add_argument("--print", dest="show", type=int, metavar="SEED", help="print the net of --check and SEED")
    p.add_argument("--rerun", metavar="FILE.nd")
    p.add_argument("--coverage", action="store_true")
    a = p.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    if a.rerun:
        return rerun(a.rerun)
    if a.coverage:
        print(json.dumps(coverage(), indent=1))
        return 0
    if a.show is not None:
        net, cfg = generate(a.show, a.check or "infer")
        print(net.text())
        print(json.dumps(cfg))
        return 0
    counts = dict((k, int(v)) for k, v in (x.split("=") for x in a.counts.split(","))) if a.counts else \
        {a.check or "infer": a.count}
    from netc.runtime.interp import ensure_interpreter
    ensure_interpreter()
    import netc.kernels.lowering  # noqa: F401  (warm the forks: imported once here)
    doc = campaign(counts, a.seed, Path(a.out), a.timeout, None if a.no_results else Path(a.results),
                   not a.no_minimize, a.min_budget)
    print(table(doc))
    return 1 if any(r["outcomes"].get(s) for r in doc["checks"].values() for s in ("mismatch", "internal", "timeout")) \
        else 0


if __name__ == "__main__":
    sys.exit(main())
