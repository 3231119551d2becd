"""SINGA's recurrent nets imported rolled: one op per layer over the whole time-major sequence.

A v0.2+ job with `unroll_len: T` (T > 1) on its neuralnet makes SINGA build T copies of every
unrolled layer ('0#gru1' .. '49#gru1', parameters shared by share_from), steps chained by the
GRU's recurrent edge. netc imports such a net ROLLED when its built graph is that plain pattern
(roll_steps below): every layer between the data layer and the loss becomes ONE op over
[T, B, ...] (time first, Brainstorm's convention), named after the configured layer ('gru1') and
bound to its step-0 parameters under their configured names ('z_hx', 'w'). Any other net (a
kConcate over the steps, kUnrollFirstToLast, partitions, layer types not below) is imported
unrolled, one op per step, as before (to_ir.py).

  kCharRNN         netc.input i32 [T, B], the character ids of the T steps (B = char_rnn_conf.batchsize,
                   T = char_rnn_conf.unroll_len, which must equal the neuralnet's). SINGA's layer reads
                   T + 1 characters per window; the (T+1)-th is only the last step's label
  kRNNLabel        netc.input i32 [T, B]: step t's label is the character of step t + 1 (SINGA's
                   RNNLabelLayer reads the data layer's blob unroll_index + 1)
  kOneHot          netc.one_hot {depth: vocab_size} of the ids: [T, B, vocab_size] f32 (an op, not an
                   input and not an embedding: no parameters, as SINGA's OneHotLayer)
  kEmbedding       netc.embedding {num_embeddings: vocab_size, dim: feature_dim} of the ids: [T, B, feature_dim],
                   its table SINGA's param 0 [vocab_size, feature_dim] (EmbeddingLayer copies row word_idx[i],
                   0.2.0 src/neuralnet/neuron_layer/embedding.cc:40-52)
  kGRU             netc.gru {dim_hidden, bias}: [T, B, dim_hidden], the zero initial state (SINGA's
                   zero context on step 0)
  kInnerProduct    time-distributed: `<layer>.in` reshape [T*B, F], `<layer>` inner_product [T*B, M],
                   `<layer>.out` reshape [T, B, M] (readers read the last)
  kSoftmax         the same pattern around softmax
  kReLU, kSigmoid, elementwise on [T, B, ...] directly
  kSTanh, kActivation, kDropout
  kSoftmaxLoss     `<layer>.in` reshape [T*B, C], `<layer>` softmax [T*B, C] (SINGA's data blob, the
                   probabilities, step-major rows t*B + b), `<layer>.target` one_hot {depth: C, on_value:
                   T * softmaxloss_conf.scale} of the labels [T, B, C], `<layer>.label` its reshape
                   [T*B, C], and `<layer>.loss` softmax_loss of the logits against those targets. SINGA's T loss layers
                   each send back (p - onehot) * scale / B (loss_layer/softmax.cc), so the objective SINGA
                   trains is the sum over the steps of the batch-mean cross-entropy: T times the mean over
                   the T*B predictions, which is what a cross-entropy against targets of value T is
                   (it is linear in the targets; its gradient is (p * T - target) / (T*B)). SINGA
                   displays the mean (its loss metric averages the layers'): netc's loss / T

Both inputs are time-major with batch_axis 1, so the arrays of `netc run --train --data D.npz` hold one
window a sample: '<data layer>' [S, T] (integers: the ids of T characters, 0 to vocab_size - 1) and
'<label layer>' [S, T] (the ids of the next T characters: window s of the text shifted by one); a batch
takes B windows and feeds them as [T, B].
"""
from __future__ import annotations


def nname(singa_name: str) -> str:
    """netc's name of a SINGA node or parameter (to_ir.py's rule: '@' -> ':')."""
    return singa_name.replace("@", ":")


ROLLABLE = {"kCharRNN", "kRNNLabel", "kOneHot", "kEmbedding", "kGRU", "kInnerProduct", "kSoftmax", "kCudnnSoftmax",
            "kSoftmaxLoss", "kCudnnSoftmaxLoss", "kReLU", "kSigmoid", "kSTanh", "kActivation",
            "kCudnnActivation", "kDropout"}
_SOURCES = {"kCharRNN"}          # not unrolled: one node, read by every step
_GRU_ROLES = ("z_hx", "r_hx", "c_hx", "z_hh", "r_hh", "c_hh", "z_b", "r_b", "c_b")


def roll_steps(net) -> int | None:
    """T when `net` (a built SingaNet) is a recurrent net netc imports rolled (see the docstring), else None."""
    nn = net.job.get("neuralnet") if net.job is not None and net.job.has("neuralnet") else None
    t = nn.get("unroll_len") if nn is not None else 0
    if not t or t <= 1 or net.version == "0.1" or net.workers != 1:
        return None
    by_origin: dict[str, list] = {}
    for n in net.nodes:
        if n.type not in ROLLABLE or n.generated:
            return None
        by_origin.setdefault(n.origin, []).append(n)
    step = {}
    for origin, nodes in by_origin.items():
        idx = sorted(n.unroll_index for n in nodes)
        src = nodes[0].type in _SOURCES
        if (src and idx != [0]) or (not src and idx != list(range(t))):
            return None
        if src and nodes[0].conf.get("unroll_len") != t:
            return None
        for n in nodes:
            step[n.name] = (origin, n.unroll_index, src)
    for n in net.nodes:
        origin, i, src = step[n.name]
        if src:
            continue
        for k, s in enumerate(n.srcs):
            so, si, ssrc = step[s]
            recurrent = n.type == "kGRU" and so == origin and si == i - 1 and k == len(n.srcs) - 1 == 1
            if not (ssrc or (si == i and so != origin) or recurrent):
                return None
        if n.type == "kGRU" and len(n.srcs) != (2 if i else 1):
            return None
    return t


def _step0(net) -> list:
    return [n for n in net.nodes if n.unroll_index == 0]


def _plain(name: str) -> str:
    """A parameter's configured name: '0#z_hx' -> 'z_hx'."""
    name = nname(name)
    return name.split("#", 1)[1] if "#" in name.split(":")[0] else name


def _bind(conv, n, roles) -> dict:
    params = conv.bind(n, None, dict(zip(roles, n.params)))
    for spec in params.values():
        spec["name"] = _plain(spec["name"])
        if "share_from" in spec:
            spec["share_from"] = _plain(spec["share_from"])
    return params


def build_rolled(conv, t: int) -> list:
    """The ops of conv.net (a to_ir converter) rolled over its T = t steps."""
    net = conv.net
    shapes: dict[str, list] = {}   # netc layer -> shape (what readers see)
    batch = next((n.conf["batchsize"] for n in net.nodes if n.type in _SOURCES), None)
    for n in _step0(net):
        conv.cur = n
        _node(conv, n, t, batch, shapes)
    return conv.ops


def _node(conv, n, t, b, shapes):
    tp, loc, name, c = n.type, n.loc, nname(n.origin), n.conf
    srcs = [conv.alias.get(s, s) for s in n.srcs[:1 if tp == "kGRU" else None]]
    if tp in ("kCharRNN", "kRNNLabel"):
        conv.input(name, [t, b], "i32", loc).attrs["batch_axis"] = 1   # --data: one window [T] a sample
        shapes[name] = [t, b]
        conv.alias[n.name] = name
        return
    ins = [shapes[s] for s in srcs]
    out = name
    if tp == "kOneHot":
        conv.add("netc.one_hot", name, srcs, loc, depth=c["vocab_size"])
        shapes[name] = ins[0] + [c["vocab_size"]]
    elif tp == "kEmbedding":
        conv.add("netc.embedding", name, srcs, loc, num_embeddings=c["vocab_size"], dim=c["feature_dim"],
                 params=_bind(conv, n, ("table",)))
        shapes[name] = ins[0] + [c["feature_dim"]]
    elif tp == "kGRU":
        conv.add("netc.gru", name, srcs, loc, dim_hidden=c["dim_hidden"],
                 **({"bias": False} if not c.get("bias", True) else {}), params=_bind(conv, n, _GRU_ROLES))
        shapes[name] = [t, b, c["dim_hidden"]]
    elif tp == "kInnerProduct":
        out = _distributed(conv, name, srcs[0], ins[0], loc, "netc.inner_product", c["num_output"], shapes,
                           num_outputs=c["num_output"], params=_bind(conv, n, ("weight", "bias")))
    elif tp in ("kSoftmax", "kCudnnSoftmax"):
        feats = _feats(ins[0])
        out = _distributed(conv, name, srcs[0], ins[0], loc, "netc.softmax", feats, shapes)
    elif tp in ("kSoftmaxLoss", "kCudnnSoftmaxLoss"):
        feats = _feats(ins[0])
        conv.add("netc.reshape", name + ".in", [srcs[0]], loc, output_shape=[-1, feats])   # T*B: --batch scales B
        conv.add("netc.softmax", name, [name + ".in"], loc)
        conv.add("netc.one_hot", name + ".target", [srcs[1]], loc, depth=feats, on_value=float(c.get("scale", 1.0)) * t)
        conv.add("netc.reshape", name + ".label", [name + ".target"], loc, output_shape=[-1, feats])
        conv.add("netc.softmax_loss", name + ".loss", [name + ".in", name + ".label"], loc)
        shapes[name] = [t * b, feats]
    elif tp == "kDropout":
        conv.add("netc.dropout", name, srcs, loc, dropout_keep_prob=1.0 - c.get("dropout_ratio", 0.5))
        shapes[name] = ins[0]
    else:   # the activations
        act = c.get("activation") or "RELU"
        op = {"RELU": "netc.relu", "SIGMOID": "netc.sigmoid", "TANH": "netc.tanh", "STANH": "netc.stanh"}.get(act)
        if op is None:
            conv.add("netc.opaque", name, srcs, loc, type=f"{tp}:{act}")
        elif op == "netc.relu" and c.get("negative_slope"):
            conv.add(op, name, srcs, loc, negative_slope=c["negative_slope"])
        else:
            conv.add(op, name, srcs, loc)
        shapes[name] = ins[0]
    for m in _all_steps(conv.net, n):
        conv.alias[m.name] = out


def _feats(shape) -> int:
    f = 1
    for d in shape[2:]:
        f *= d
    return f


def _distributed(conv, name, src, shape, loc, opname, m, shapes, **attrs) -> str:
    """opname applied to every step of src [T, B, ...]: reshape to [T*B, F], the op, reshape to [T, B, m] (written
    [-1, F] and [T, -1, m], so that --batch, which sets B, keeps them true)."""
    t, b = shape[0], shape[1]
    conv.add("netc.reshape", name + ".in", [src], loc, output_shape=[-1, _feats(shape)])
    conv.add(opname, name, [name + ".in"], loc, **attrs)
    conv.add("netc.reshape", name + ".out", [name], loc, output_shape=[t, -1, m])
    shapes[name + ".out"] = [t, b, m]
    return name + ".out"


def _all_steps(net, n) -> list:
    return [m for m in net.nodes if m.origin == n.origin]
