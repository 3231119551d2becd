"""Setup: every node's output and parameter shapes, as SINGA's layers compute them (spec section
7), and the final SingaNodes."""
from __future__ import annotations

import math

from .schema import Msg
from .graph import MAX_UNROLL, SingaNode, SingaParam, BASE_TYPES, BuildContext, GraphNode, ParamSlot, SetupError, TERMINAL_TYPES

# ------------------------------------------------------------------------------------------
# Setup: output and parameter shapes (spec 7)

def _cdiv(a: int, b: int) -> int:
    """C++ integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _count(shape):
    return math.prod(shape[1:])


def _chw(shape, what="input"):
    if len(shape) >= 4:
        return shape[-3], shape[-2], shape[-1]
    if len(shape) == 3:
        return 1, shape[-2], shape[-1]
    raise SetupError(f"needs a 3-D or 4-D {what}, got {shape}")


def _batch(n, s, t):
    """The batch (first) dimension of a source shape; a 0-d source (a data layer's records, a loss)
    has none, which SINGA would read past."""
    if not s:
        src = n.srcs[0]
        why = (" (a data layer's records: a parser layer such as kMnist, kRGBImage or kLabel reads them)"
               if src.batchsize is not None else "")
        raise SetupError(f"{t} needs an input with a batch dimension, but its source '{src.lay.origin}' "
                          f"({src.lay.type}) has shape []{why}")
    return s[0]


def _nsrc(ss, k, t):
    if len(ss) != k:
        raise SetupError(f"{t} needs exactly {k} source layer{'s' if k > 1 else ''}, got {len(ss)}")


def _div(ctx, n, value, what):
    """value / K for partitioned sizes (B9)."""
    K = n.K
    if K > 1 and value % K:
        raise SetupError(f"{what} {value} is not divisible by the {K} partitions (SINGA truncates silently to "
                          f"{value // K} per partition)")
    return value // K


def _batchsize(msg: Msg, what: str):
    """`msg`'s batchsize (a list where repeated), each one checked where it is written: positive.
    SINGA accepts 0 silently (empty blobs), but every tensor of the net would be empty and netc
    plans memory per sample."""
    v = msg.get("batchsize")
    vals, locs = (v, msg.vlocs_of("batchsize")) if isinstance(v, list) else ([v], [msg.vat("batchsize")])
    for i, x in enumerate(vals):
        if isinstance(x, int) and x <= 0:
            raise SetupError(f"{what}.batchsize must be positive, got {x}", locs[i] if i < len(locs) else msg.loc)
    return v


def _geom(cc: Msg, v1: bool):
    if v1:
        k, p, s = cc.get("kernel"), cc.get("pad"), cc.get("stride")
        return (k, k), (p, p), (s, s)
    g = []
    for f in ("kernel", "pad", "stride"):
        if cc.has(f):
            g.append((cc.get(f), cc.get(f)))
        else:
            g.append((cc.get(f + "_y"), cc.get(f + "_x")))
    return tuple(g)


def _window(H, W, k, p, s):
    if s[0] <= 0 or s[1] <= 0:
        raise SetupError(f"stride {list(s)} must be positive")
    oh = _cdiv(H + 2 * p[0] - k[0], s[0]) + 1
    ow = _cdiv(W + 2 * p[1] - k[1], s[1]) + 1
    if oh <= 0 or ow <= 0:
        raise SetupError(f"kernel {list(k)} (pad {list(p)}) does not fit the {H}x{W} input (output {oh}x{ow})")
    return oh, ow


def _params(ctx, n, shapes, need, why=""):
    lay = n.lay
    have = len(lay.params)
    if have < need:  # B10
        raise SetupError(f"needs {need} param entr{'y' if need == 1 else 'ies'} (`param {{ ... }}`), found {have}"
                          f"{why}; SINGA would read past the end of the list")
    if have > len(shapes):
        ctx.warn(f"layer '{lay.origin}' has {have} param entries; {lay.type} uses only the first {len(shapes)}",
                 lay.loc, key=("extra-params", lay.origin))
    n.params = [(lay.params[i], list(s)) for i, s in enumerate(shapes)]


def _record_shape(ctx, n, path):
    lay = n.lay
    if lay.origin in ctx.record_shapes:
        return list(ctx.record_shapes[lay.origin]), "override"
    p = (path or "").lower()
    if "mnist" in p:
        return [28, 28], "path"
    if "cifar" in p:
        return [3, 32, 32], "path"
    kinds = {d.lay.type for d in n.dsts}
    if "kMnist" in kinds:
        return [28, 28], "consumer"
    if "kRGBImage" in kinds:
        return [3, 32, 32], "consumer"
    return None, None


def _batch_src(n, ss, t):
    if not n.srcs or n.srcs[0].batchsize is None:
        raise SetupError(f"{t} parses records, so its source must be a kShardData or kLMDBData layer")
    return n.srcs[0].batchsize


def _setup(ctx: BuildContext, n: GraphNode):
    lay, t = n.lay, n.lay.type
    L, gen = lay.proto, lay.gen
    ss = [s.shape for s in n.srcs]
    base = BASE_TYPES.get(t, t)
    v1 = ctx.v1
    conf = n.conf
    if t.startswith("user:"):
        rule = ctx.plugins[t[5:]]
        shape, pshapes = rule.setup(L, [list(s) for s in ss], n.K)
        _params(ctx, n, pshapes, rule.min_params)
        n.shape = list(shape)
        return
    if base == "kRecordInput":
        sc = L.get("store_conf")
        bs = _batchsize(sc, "store_conf")
        if isinstance(bs, list):  # v0.3: repeated
            if not bs:
                raise SetupError("store_conf.batchsize is not set")
            if lay.pdim == 0 and len(bs) == 1:
                b = _div(ctx, n, bs[0], "batchsize")
            elif len(bs) > 1:
                # one batch size per partition: the logical batch is their sum (the partition pass
                # gives partition i its own, `partition_sizes`)
                k = ctx.workers if lay.pdim == 0 else 1
                if k > len(bs):
                    raise SetupError(f"partition {len(bs)} has no store_conf.batchsize entry ({len(bs)} given)")
                b = sum(bs[:k])
                if k > 1:
                    conf["partition_sizes"] = list(bs[:k])
            else:
                b = bs[0]
        else:
            b = _div(ctx, n, bs, "batchsize") if lay.pdim == 0 else bs
        n.shape = [b] + list(sc.get("shape"))
        conf.update(batchsize=b, shape=list(sc.get("shape")), backend=sc.get("backend"), path=sc.get("path"),
                    mean_file=sc.get("mean_file"), std_file=sc.get("std_file"), mean_value=sc.get("mean_value"),
                    std_value=sc.get("std_value"), has_label=sc.get("has_label"), encoded=sc.get("encoded"))
    elif base == "kShardData":
        conf_name = "sharddata_conf" if t == "kShardData" else "lmdbdata_conf"
        dp = L.get(conf_name)
        bs = _batchsize(dp, conf_name)
        b = _div(ctx, n, bs, "batchsize") if lay.pdim == 0 else bs
        n.batchsize = b
        n.record_shape, how = _record_shape(ctx, n, dp.get("path"))
        n.shape = []
        conf.update(batchsize=b, path=dp.get("path"), record_shape=n.record_shape, record_shape_from=how)
    elif t == "kMnist":
        b = _batch_src(n, ss, t)
        rs = n.srcs[0].record_shape
        if rs is None:
            raise SetupError(f"the record shape of '{n.srcs[0].lay.origin}' is unknown (SINGA reads it from the "
                              f"data file); pass record_shapes={{'{n.srcs[0].lay.origin}': [28, 28]}}")
        if len(rs) < 2 or rs[-1] != rs[-2]:
            raise SetupError(f"kMnist needs square records, got {rs}")
        n.shape = [b, 1, rs[-1], rs[-1]]
        mc = L.get("mnist_conf")
        conf.update(norm_a=mc.get("norm_a"), norm_b=mc.get("norm_b"))
    elif t == "kRGBImage":
        b = _batch_src(n, ss, t)
        rs = n.srcs[0].record_shape
        if rs is None:
            raise SetupError(f"the record shape of '{n.srcs[0].lay.origin}' is unknown (SINGA reads it from the "
                              f"data file); pass record_shapes={{'{n.srcs[0].lay.origin}': [3, 32, 32]}}")
        if len(rs) != 3:
            raise SetupError(f"kRGBImage needs 3-D records, got {rs}")
        rc = L.get("rgbimage_conf")
        crop = rc.get("cropsize")
        n.shape = [b, rs[0], crop, crop] if crop else [b] + list(rs)
        conf.update(scale=rc.get("scale"), cropsize=crop, mirror=rc.get("mirror"), meanfile=rc.get("meanfile"))
    elif t == "kLabel":
        n.shape = [_batch_src(n, ss, t)]
    elif t == "kImagePreprocess":
        _nsrc(ss, 1, t)
        s = ss[0]
        if len(s) != 4 or s[2] != s[3]:
            raise SetupError(f"kImagePreprocess needs a 4-D input with H == W, got {s}")
        rc = L.get("rgbimage_conf")
        crop = rc.get("cropsize")
        n.shape = [s[0], s[1], crop, crop] if crop and (crop != s[2] or crop != s[3]) else list(s)
        conf.update(cropsize=crop, mirror=rc.get("mirror"), scale=rc.get("scale"), meanfile=rc.get("meanfile"))
    elif base == "kConvolution":
        _nsrc(ss, 1, t)
        s = ss[0]
        C, H, W = _chw(s)
        cc = L.get("convolution_conf")
        k, p, st = _geom(cc, v1)
        F = cc.get("num_filters")
        if lay.pdim > 0:
            F = _div(ctx, n, F, "num_filters")
        oh, ow = _window(H, W, k, p, st)
        n.shape = [s[0], F, oh, ow]
        wshape = [F, C * k[0] * k[1]]
        if v1:
            _params(ctx, n, [wshape, [F]], 2, " (SINGA v0.1 convolution always reads 2)")
        else:
            _params(ctx, n, [wshape, [F]] if len(lay.params) >= 2 else [wshape], 1)
        conf.update(num_filters=F, kernel=list(k), pad=list(p), stride=list(st), bias=len(n.params) > 1)
    elif base == "kPooling":
        _nsrc(ss, 1, t)
        s = ss[0]
        C, H, W = _chw(s)
        pc = L.get("pooling_conf")
        k, p, st = _geom(pc, v1)
        if v1:
            if pc.get("pad"):  # B13
                ctx.warn(f"SINGA v0.1 pooling ignores pad ({pc.get('pad')}) in layer '{lay.origin}'; the shape is "
                         f"computed without it", pc.at("pad"), key=("B13", lay.origin))
            conf["pad_ignored"] = list(p)
            p = (0, 0)
        oh, ow = _window(H, W, k, p, st)
        n.shape = [s[0], C, oh, ow]
        conf.update(pool=pc.get("pool"), kernel=list(k), pad=list(p), stride=list(st))
    elif base == "kLRN":
        _nsrc(ss, 1, t)
        if len(ss[0]) != 4:
            raise SetupError(f"{t} needs a 4-D input, got {ss[0]}")
        lc = L.get("lrn_conf")
        if lc.get("local_size") % 2 == 0:
            raise SetupError(f"lrn_conf.local_size must be odd, got {lc.get('local_size')}")
        n.shape = list(ss[0])
        conf.update(local_size=lc.get("local_size"), alpha=lc.get("alpha"), beta=lc.get("beta"), knorm=lc.get("knorm"))
    elif base == "kActivation":
        _nsrc(ss, 1, t)
        n.shape = list(ss[0])
        if t in ("kActivation", "kCudnnActivation"):
            conf["activation"] = L.get("activation_conf").get("type")
        elif t == "kReLU":
            conf.update(activation="RELU", negative_slope=L.get("relu_conf").get("negative_slope"))
        elif t == "kSigmoid":
            conf["activation"] = "SIGMOID"
        elif t == "kSTanh":
            conf["activation"] = "STANH"
        elif t == "kDropout":
            conf["dropout_ratio"] = L.get("dropout_conf").get("dropout_ratio")
    elif t == "kInnerProduct":
        _nsrc(ss, 1, t)
        s = ss[0]
        ic = L.get("innerproduct_conf")
        h = ic.get("num_output")
        if lay.pdim > 0:
            h = _div(ctx, n, h, "num_output")
        vdim = _count(s)
        n.shape = [_batch(n, s, t), h]
        _params(ctx, n, [[vdim, h] if ic.get("transpose") else [h, vdim], [h]], 2,
                " (kInnerProduct always reads param 0 and 1)")
        conf.update(num_output=h, transpose=ic.get("transpose"), bias=True)
    elif base == "kSoftmax" or t == "kCudnnSoftmaxLoss":
        if t == "kCudnnSoftmaxLoss":
            _nsrc(ss, 2, t)
            conf.update(topk=L.get("softmaxloss_conf").get("topk"), scale=L.get("softmaxloss_conf").get("scale"))
        else:
            _nsrc(ss, 1, t)
        n.shape = [_batch(n, ss[0], t), _count(ss[0])]
    elif t == "kSoftmaxLoss":
        _nsrc(ss, 2, t)
        n.shape = list(ss[0])
        sc = L.get("softmaxloss_conf")
        conf.update(topk=sc.get("topk"), scale=sc.get("scale"))
    elif t == "kEuclideanLoss":
        _nsrc(ss, 2, t)
        n.shape = []
    elif t in ("kArgSort", "kAccuracy"):
        _nsrc(ss, 2 if t == "kAccuracy" else 1, t)
        topk = L.get("argsort_conf").get("topk")
        n.shape = [_batch(n, ss[0], t), topk]
        conf["topk"] = topk
    elif t == "kRBMVis":
        _nsrc(ss, 2, t)
        ins = [s for s in n.srcs if s.lay.type != "kRBMHid"]
        if len(ins) != 1:
            raise SetupError("kRBMVis needs one kRBMHid source and one input source")
        hdim = L.get("rbm_conf").get("hdim")
        vdim = _count(ins[0].shape)
        n.shape = list(ins[0].shape)
        _params(ctx, n, [[hdim, vdim], [vdim]], 2)
        conf.update(hdim=hdim, gaussian=L.get("rbm_conf").get("gaussian"))
    elif t == "kRBMHid":
        _nsrc(ss, 1, t)
        hdim = L.get("rbm_conf").get("hdim")
        vdim = _count(ss[0])
        n.shape = [_batch(n, ss[0], t), hdim]
        _params(ctx, n, [[hdim, vdim], [hdim]], 2)
        conf.update(hdim=hdim, gaussian=L.get("rbm_conf").get("gaussian"))
    elif base == "kBM":
        _nsrc(ss, 1, t)
        if len(ss[0]) != 4:
            raise SetupError(f"{t} needs a 4-D input, got {ss[0]}")
        C = ss[0][1]
        n.shape = list(ss[0])
        _params(ctx, n, [[1, C, 1, 1]] * 4, 4)
    elif t == "kGRU":
        if not 1 <= len(ss) <= 2:
            raise SetupError(f"kGRU takes its input and the previous step, got {len(ss)} sources")
        h = L.get("gru_conf").get("dim_hidden")
        vdim = _count(ss[0])
        if len(lay.params) not in (6, 9):  # B10
            raise SetupError(f"kGRU needs 6 param entries (z_hx, r_hx, c_hx, z_hh, r_hh, c_hh) or 9 (plus z_b, r_b, "
                              f"c_b), found {len(lay.params)}")
        shapes = [[h, vdim]] * 3 + [[h, h]] * 3 + ([[h]] * 3 if len(lay.params) > 6 else [])
        n.shape = [_batch(n, ss[0], t), h]
        _params(ctx, n, shapes, 6)
        conf.update(dim_hidden=h, bias=len(shapes) == 9)
    elif t in ("kEmbedding", "kOneHot", "kRNNLabel"):
        _nsrc(ss, 1, t)
        blobs = n.srcs[0].blobs or [ss[0]]
        idx = lay.unroll_index + (1 if t == "kRNNLabel" else 0)
        if idx >= len(blobs) or not blobs[idx]:
            raise SetupError(f"reads blob {idx} of '{n.srcs[0].name}', which has {len(blobs)} blob(s)")
        b = blobs[idx][0]
        if t == "kEmbedding":
            ec = L.get("embedding_conf")
            n.shape = [b, ec.get("feature_dim")]
            _params(ctx, n, [[ec.get("vocab_size"), ec.get("feature_dim")]], 1)
            conf.update(vocab_size=ec.get("vocab_size"), feature_dim=ec.get("feature_dim"))
        elif t == "kOneHot":
            vs = L.get("onehot_conf").get("vocab_size")
            n.shape = [b, vs]
            conf["vocab_size"] = vs
        else:
            n.shape = []
            conf["label_size"] = b
    elif t == "kCharRNN":
        cc = L.get("char_rnn_conf")
        _batchsize(cc, "char_rnn_conf")
        if cc.get("unroll_len") > MAX_UNROLL:  # one blob per step (and the next character)
            raise SetupError(f"char_rnn_conf.unroll_len is {cc.get('unroll_len')}; netc allows at most {MAX_UNROLL} "
                              f"steps", cc.vat("unroll_len") or cc.loc)
        n.blobs = [[cc.get("batchsize")] for _ in range(cc.get("unroll_len") + 1)]
        n.shape = []
        conf.update(batchsize=cc.get("batchsize"), unroll_len=cc.get("unroll_len"), path=cc.get("path"),
                    vocab_path=cc.get("vocab_path"))
    elif t == "kRNNDummy":
        rc = L.get("rnn_dummy_conf")
        if ss:
            n.shape = list(ss[0])
        else:
            if rc.get("low") == rc.get("high"):
                raise SetupError("kRNNDummy without a source needs rnn_dummy_conf.low != high")
            n.shape = list(rc.get("shape"))
        conf.update(shape=list(rc.get("shape")), integer=rc.get("integer"), low=rc.get("low"), high=rc.get("high"),
                    dynamic_srclayer=rc.get("dynamic_srclayer"))
    elif t == "kDummy":
        dc = L.get("dummy_conf")
        if dc.get("input"):
            n.shape = list(dc.get("shape"))
        else:
            _nsrc(ss, 1, t)
            n.shape = list(ss[0])
        conf.update(input=dc.get("input"), output=dc.get("output"))
    elif base == "kCSVOutput":
        n.shape = []
    elif t in ("kSplit", "kBridgeSrc", "kBridgeDst"):
        _nsrc(ss, 1, t)
        n.shape = list(ss[0])
        if t == "kSplit":
            conf["num_splits"] = gen["num_splits"] if gen else L.get("split_conf").get("num_splits")
    elif t == "kSlice":
        _nsrc(ss, 1, t)
        if gen is not None:
            dim, num = gen["slice_dim"], gen["num_slices"]
        else:
            sc = L.get("slice_conf")
            dim = sc.get("slice_dim")
            num = sc.get("num_slices") if sc.spec.fields.get("num_slices") else max(1, len(n.dsts))
        s = list(ss[0])
        if gen is None and len(n.dsts) > num:   # SliceLayer::data(from): CHECK_LT(idx, num_slices)
            raise SetupError(f"{len(n.dsts)} layers read the {num} slices of this kSlice (reader k takes slice k): "
                              f"SINGA aborts at the reader past the last slice")
        if not 0 <= dim < len(s):
            raise SetupError(f"slice dimension {dim} is out of range for the input {s}")
        if num < 1 or s[dim] % num:
            raise SetupError(f"cannot slice dimension {dim} of {s} into {num} equal parts (must divide exactly)")
        s[dim] //= num
        n.shape = s
        conf.update(slice_dim=dim, num_slices=num)
    elif t == "kConcate":
        if gen is not None:
            dim, num = gen["concate_dim"], gen.get("num_concates", len(ss))
        else:
            cc = L.get("concate_conf")
            dim = cc.get("concate_dim")
            num = cc.get("num_concates") if cc.spec.fields.get("num_concates") else len(ss)
        if len(ss) < 2:  # B17 in v0.1
            raise SetupError("a concate layer needs at least 2 sources, got 1" +
                              (" (SINGA v0.1 builds one when a partition_dim -1 layer reads a partitioned layer with "
                               "K = 1, and aborts)" if v1 else ""))
        if not v1 and num != len(ss):
            raise SetupError(f"concate_conf.num_concates is {num} but the layer has {len(ss)} sources")
        s = list(ss[0])
        if not 0 <= dim < len(s):
            raise SetupError(f"concate dimension {dim} is out of range for the input {s}")
        for o in ss[1:]:
            if len(o) != len(s) or any(a != b for i, (a, b) in enumerate(zip(o, s)) if i != dim):
                raise SetupError(f"cannot concatenate {ss[0]} and {o} along dimension {dim}")
        s[dim] = sum(o[dim] for o in ss)
        n.shape = s
        conf.update(concate_dim=dim, num_concates=len(ss))
    else:
        raise SetupError(f"netc has no shape rule for layer type {t}")


def setup_all(ctx: BuildContext, order: list[GraphNode]):
    seen = set()
    for n in order:
        if any(s.failed for s in n.srcs):
            n.failed = True
            continue
        try:
            _setup(ctx, n)
        except SetupError as e:
            key = (n.lay.origin, str(e))
            if key not in seen:  # once per layer, not per partition / unrolled copy
                seen.add(key)
                ctx.error(f"layer '{n.lay.origin}' (node {n.name}, {n.lay.type}): {e}", e.loc or n.lay.loc)
            n.failed = True
            continue
        zero = [s for s in [n.shape] + [sh for _, sh in n.params] if 0 in s]
        if zero:  # B14
            ctx.warn(f"layer '{n.lay.origin}' gets a zero-sized tensor {zero[0]} (a size left at its default 0?); "
                     f"SINGA accepts it silently", n.lay.loc, key=("B14", n.lay.origin))
    ctx.check()


def _param_conf(p: ParamSlot) -> dict:
    m = p.owner.msg if p.owner is not None else p.msg  # share_from copies the owner's configuration
    if m is None:
        return {}
    init = m.get("init")
    return {"init": init.to_dict(True), "lr_scale": m.get("lr_scale"), "wd_scale": m.get("wd_scale")}


def _layer_conf(L: Msg | None, cache: dict) -> dict:
    if L is None:
        return {}
    d = cache.get(id(L))
    if d is None:
        d = {k: (v.to_dict(True) if isinstance(v, Msg) else v) for k, v in L.vals.items()
             if k.endswith("_conf") or k.startswith("[")}
        cache[id(L)] = d
    return d


def batch_loc(proto: Msg | None):
    """Where a data layer's (first) batchsize value is written: store_conf (kRecordInput, kCSVInput),
    sharddata_conf / lmdbdata_conf (kShardData, kLMDBData); None for other layers."""
    for f in ("store_conf", "sharddata_conf", "lmdbdata_conf"):
        if proto is not None and proto.has(f) and proto.get(f).has("batchsize"):
            return proto.get(f).vat("batchsize")
    return None


def finish_nodes(ctx: BuildContext, order: list[GraphNode]) -> list[SingaNode]:
    out, cache = [], {}
    pshapes: dict[str, tuple[list, ParamSlot]] = {}
    for n in order:
        lay = n.lay
        ps, unnamed = [], 0
        for p, sh in n.params:
            name = p.name
            if ctx.v1 and not p.orig:
                unnamed += 1
                name = n.name + "$" * unnamed
            ps.append(SingaParam(name, sh, p.share_from, p.loc, _param_conf(p)))
            pshapes.setdefault(name, (sh, p))
        out.append(SingaNode(
            name=n.name, layer=lay.name, origin=lay.origin, type=lay.type, srcs=[s.name for s in n.srcs],
            dsts=[d.name for d in n.dsts], pid=n.pid, partition_dim=lay.pdim, num_partitions=n.K,
            shape=list(n.shape), params=ps, conf=dict(n.conf), layer_conf=_layer_conf(lay.proto, cache),
            loc=lay.loc, unroll_index=lay.unroll_index, generated=lay.proto is None,
            batchsize=n.batchsize, record_shape=n.record_shape, batch_loc=batch_loc(lay.proto)))
    # share_from needs matching shapes: identical in v0.1, equal element counts in v0.2+
    for node in out:
        for p in node.params:
            if p.share_from and p.share_from in pshapes:
                osh = pshapes[p.share_from][0]
                bad = osh != p.shape if ctx.v1 else math.prod(osh) != math.prod(p.shape)
                if bad:
                    ctx.error(f"param '{p.name}' of layer '{node.origin}' shares from '{p.share_from}', but its shape "
                              f"{p.shape} does not match the owner's {osh}"
                              + (" (SINGA v0.1 needs identical shapes)" if ctx.v1 else " (SINGA needs equal sizes)"),
                              p.loc)
    ctx.check()
    # B15: dead ends
    used: dict[str, bool] = {}
    first: dict[str, SingaNode] = {}
    for node in out:
        if node.generated:
            continue
        used[node.origin] = used.get(node.origin, False) or bool(node.dsts)
        first.setdefault(node.origin, node)
    for origin, u in used.items():
        node = first[origin]
        if not u and node.type not in TERMINAL_TYPES and not node.type.startswith("user:") and not (
                node.type == "kDummy" and node.conf.get("output")):   # dummy_conf.output: an end, by design
            ctx.warn(f"the output of layer '{origin}' ({node.type}) is unused: no layer reads it in phase {ctx.phase} "
                     f"(SINGA builds and runs it anyway)", node.loc, key=("B15", origin))
    return out
