"""ONNX's LSTM and GRU nodes as netc's Lstm and GRU (frontend/onnx.py hands them here: recurrent_node), one per
direction, a reverse one between two netc.seq_reverse; the translation's state is onnx.py's import object
(its lines, names, constants and shapes; value, nd and attrs read operands, write .nd values and read a node's
attributes)."""
from __future__ import annotations

import numpy as np


def recurrent_node(imp, node, a, op):
    """ONNX's LSTM and GRU (time-major [T, B, X]; an LSTM's block input and cell output activations Tanh, Sigmoid
    or Relu, netc's Lstm's activation and cell_activation; a GRU's the defaults) as netc's Lstm and GRU over the whole
    sequence, one per direction: "forward" as it is, "reverse" between two SequenceReverse (the recurrence runs
    from the last step to the first and writes each step's output at its own position), "bidirectional" both,
    W/R/B/P/initial states split by direction (index 0 forward, 1 reverse). LSTM: gates i, o, f, c in ONNX's W,
    R, B, P are netc's Wi, Wo, Wf, Wz (c is the block input z), the two biases summed, the peepholes pi, po, pf
    (zero without P); GRU: z, r, h are netc's z, r, c, each recurrent bias folded into the gate's bias where it
    adds outside the reset (all but the new memory's with linear_before_reset 1, which netc's GRU, SINGA's, does
    not have: refused unless zero). Y [T, D, B, H] is the directions' outputs reshaped and concatenated (torch's
    Transpose of it to [T, B, D, H]: their concatenation along the features, _transposed_directions); Y_h
    [D, B, H] each direction's last step (the reverse one's is at t = 0); an initial state [D, B, H]: a model
    input [1, B, H] is declared [B, H], others are sliced and reshaped per direction. sequence_lens (a model
    input, int32 [B]) are the lengths of netc's sequence ops, with onnxruntime's semantics: the reverse
    direction starts at each sequence's last valid step (SequenceReverse with the lengths), Y is zero past each
    length (SequenceMask), Y_h is each direction's state after its last valid step (SequencePool 'last' of the
    recurrence's own output: the forward's step lengths[b] - 1, the reverse's step 0); a constant
    sequence_lens of T everywhere is none, another constant is refused (feed it as an input). Y_c (the final
    cell) is not read yet."""
    gates = 4 if op == "LSTM" else 3
    ins = list(node.input) + [""] * (8 - len(node.input))
    w, r = imp.consts.get(ins[1]), imp.consts.get(ins[2])
    if w is None or r is None:
        raise imp.err(node, "W and R must be constants (initializers)")
    nd, gh, _ = w.shape
    hsz = gh // gates
    direction = a.get("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    dirs = {"forward": ["forward"], "reverse": ["reverse"], "bidirectional": ["forward", "reverse"]}.get(direction)
    why = []
    if dirs is None or nd != len(dirs):
        why.append(f"direction {direction!r} with {nd} directions of weights")
    if a.get("clip") is not None:
        why.append("clip")
    acts = _activations(a, op, nd, why)
    if a.get("input_forget"):
        why.append("input_forget 1")
    if a.get("layout"):
        why.append("layout 1 (batch-major)")
    used = {i for n in imp.graph.node for i in n.input} | {o.name for o in imp.graph.output}
    if len(node.output) > 2 and node.output[2] in used and op == "LSTM":
        why.append("the final cell state Y_c, read")
    if why:
        raise imp.err(node, f"not read yet: {', '.join(why)}")
    b = imp.consts.get(ins[3]) if ins[3] else np.zeros((nd, 2 * gh), np.float32)
    if b is None:
        raise imp.err(node, "B must be a constant (an initializer)")
    for k in (5, 6):             # a zero initial state (torch's default, folded) is netc's default
        if ins[k] in imp.consts and not np.any(imp.consts[ins[k]]):
            ins[k] = ""
    if op == "LSTM" and bool(ins[5]) != bool(ins[6]):
        raise imp.err(node, "an initial hidden state without an initial cell state (or the other way): netc's Lstm "
                            "takes both")
    base = node.name or node.output[0]
    t, bsz = imp.shape[ins[0]][0], imp.shape[ins[0]][1]
    lens = _lengths(imp, node, ins[4], t)
    runs = [_direction(imp, node, op, (w[d], r[d], b[d], ins, d, nd), f"{base}_{kind}" if nd > 1 else base,
                       kind == "reverse", acts[d], lens) for d, kind in enumerate(dirs or [])]
    seqs = [sq for sq, _ in runs]
    if lens and node.output[0] in used:      # ONNX's Y is zero past each sequence's length
        seqs = [_masked(imp, sq, lens, f"{sq}_masked") for sq in seqs]
    if node.output[0] in used and not _transposed_directions(imp, node, seqs, t, bsz, hsz):
        parts = []
        for sq in seqs:
            parts.append(imp.fresh(_out_hint(imp, node.output[0], base + "_Y", len(seqs))))
            imp.lines.append(f"  {parts[-1]} = Reshape({sq}) {{ output_shape: [{t}, 1, {bsz}, {hsz}] }}")
        _join(imp, node.output[0], parts, 1, base + "_Y")
    if len(node.output) > 1 and node.output[1] in used:
        lasts = []
        for (sq, own), kind in zip(runs, dirs):
            lasts.append(imp.fresh(_out_hint(imp, node.output[1], base + "_Y_h", len(seqs))))
            if lens:        # the recurrence's state after each sequence's last valid step
                last = imp.fresh(base + "_last")
                imp.lines.append(f"  {last} = SequencePool({own}, {lens}) {{ mode: \"last\" }}")
                imp.lines.append(f"  {lasts[-1]} = Reshape({last}) {{ output_shape: [1, {bsz}, {hsz}] }}")
                continue
            step = t - 1 if kind == "forward" else 0
            imp.lines.append(f"  {lasts[-1]} = Slice({sq}) {{ dim: 0, num_slices: {t}, index: {step} }}")
        _join(imp, node.output[1], lasts, 0, base + "_Y_h")


def _lengths(imp, node, name, t):
    """The netc name of an LSTM/GRU's sequence_lens (a model input), or None: none given, or a constant of T
    for every sequence (every step valid); another constant is refused, located."""
    if not name:
        return None
    if name in imp.consts:
        v = np.asarray(imp.consts[name]).reshape(-1)
        if v.size and np.all(v == t):
            return None
        raise imp.err(node, f"a constant sequence_lens {v.tolist()} other than T = {t} for every sequence: feed it "
                            f"as a model input (int32 [B]), netc's lengths")
    return imp.value(node, 4)


def _masked(imp, x, lens, hint):
    """x [T, B, H] zero past each sequence's length (netc's SequenceMask)."""
    name = imp.fresh(hint)
    imp.lines.append(f"  {name} = SequenceMask({x}, {lens})")
    return name


def _out_hint(imp, onnx_name, hint, parts=1):
    """The name a value gets: a model output's own (of the one part that is all of it), else the hint."""
    return onnx_name if parts == 1 and onnx_name in {o.name for o in imp.graph.output} else hint


NETC_ACTIVATION = {"Tanh": "tanh", "Sigmoid": "sigmoid", "Relu": "relu"}


def _activations(a, op, nd, why) -> list:
    """Per direction, the netc Lstm's {activation, cell_activation} for ONNX's [f, g, h] (f the gates' sigmoid, g
    the block input's, h the cell output's: Tanh, Sigmoid or Relu; onnxruntime's semantics), {} for a GRU (only
    its defaults [Sigmoid, Tanh] read); what is not read goes to `why`."""
    default = ["Sigmoid", "Tanh", "Tanh"] if op == "LSTM" else ["Sigmoid", "Tanh"]
    acts = [v.decode() if isinstance(v, bytes) else v for v in a.get("activations") or []] or default * nd
    per = len(default)
    if len(acts) != per * nd or a.get("activation_alpha") or a.get("activation_beta"):
        why.append(f"activations {acts}")
        return [{}] * nd
    out = []
    for d in range(nd):
        f, *rest = acts[d * per:(d + 1) * per]
        if f != "Sigmoid" or (op == "GRU" and rest != ["Tanh"]) or any(x not in NETC_ACTIVATION for x in rest):
            why.append(f"activations {acts[d * per:(d + 1) * per]}")
            return [{}] * nd
        g = {"activation": NETC_ACTIVATION[rest[0]]} if op == "LSTM" and rest[0] != "Tanh" else {}
        if op == "LSTM" and rest[1] != rest[0]:
            g["cell_activation"] = NETC_ACTIVATION[rest[1]]
        out.append(g)
    return out


def _join(imp, onnx_name, parts, dim, hint):
    """onnx_name is parts, one per direction, concatenated along dim (a single one as it is)."""
    if len(parts) == 1:
        imp.netc[onnx_name] = parts[0]
        return
    name = imp.fresh(_out_hint(imp, onnx_name, hint))
    imp.lines.append(f"  {name} = Concatenate({', '.join(parts)}) {{ dim: {dim} }}")
    imp.netc[onnx_name] = name


def _transposed_directions(imp, node, seqs, t, bsz, hsz) -> bool:
    """When every reader of Y [T, D, B, H] is a Transpose to [T, B, D, H] (torch's export of a bidirectional
    recurrence, reshaped to [T, B, D*H] after it): those Transposes are the directions' outputs concatenated
    along the features, reshaped; Y itself is not written. Returns whether it was so."""
    readers = [n for n in imp.graph.node if node.output[0] in n.input]
    if not readers or any(n.op_type != "Transpose" or list(imp.attrs(n).get("perm", [])) != [0, 2, 1, 3] for n in readers) \
            or node.output[0] in {o.name for o in imp.graph.output}:
        return False
    base = node.name or node.output[0]
    joined = seqs[0]
    if len(seqs) > 1:
        joined = imp.fresh(base + "_features")
        imp.lines.append(f"  {joined} = Concatenate({', '.join(seqs)}) {{ dim: 2 }}")
    out = imp.fresh(base + "_Y_t")
    imp.lines.append(f"  {out} = Reshape({joined}) {{ output_shape: [{t}, {bsz}, {len(seqs)}, {hsz}] }}")
    for n in readers:
        imp.netc[n.output[0]] = out
        imp.transposed.add(n.output[0])
    return True


def _direction(imp, node, op, weights, base, reverse, acts, lens=None):
    """One direction's netc Lstm or GRU over the node's sequence (reversed before and after for "reverse", over
    the lengths `lens` where given): its parameters and initial states from that direction's slices; returns
    the netc names [T, B, H] of its output at each step's own position and of the recurrence's own output (the
    same for "forward"; in the recurrence's order, reversed, for "reverse")."""
    w, r, b, ins, d, nd = weights
    gates = 4 if op == "LSTM" else 3
    gh = w.shape[0]
    hsz = gh // gates
    wb, rb = b[:gh], b[gh:]
    part = lambda m, k: m[k * hsz:(k + 1) * hsz]      # noqa: E731
    p = {}
    if op == "LSTM":            # ONNX i, o, f, c -> netc z (c), i, f, o
        for g, k in {"i": 0, "o": 1, "f": 2, "z": 3}.items():
            p[f"W{g}"], p[f"R{g}"] = part(w, k), part(r, k)
            p[f"b{g}"] = part(wb, k) + part(rb, k)
        pp = imp.consts.get(ins[7]) if ins[7] else np.zeros((nd, 3 * hsz), np.float32)
        if pp is None:
            raise imp.err(node, "P must be a constant (an initializer)")
        for g, k in {"i": 0, "o": 1, "f": 2}.items():
            p[f"p{g}"] = part(pp[d], k).reshape(1, hsz)
        layer, attrs = "Lstm", {"size": hsz, **acts}
    else:                       # ONNX z, r, h -> netc z, r, c
        lbr = bool(imp.attrs(node).get("linear_before_reset", 0))
        for g, k in {"z": 0, "r": 1, "c": 2}.items():
            p[f"{g}_hx"], p[f"{g}_hh"] = part(w, k), part(r, k)
            if g == "c" and lbr and np.any(part(rb, k) != 0):
                raise imp.err(node, "linear_before_reset 1 with a recurrent bias of the new memory (Rbh, torch's "
                                    "b_hn): netc's GRU has no recurrent bias there")
            p[f"{g}_b"] = part(wb, k) + part(rb, k)
        layer, attrs = "GRU", {"dim_hidden": hsz, "linear_before_reset": lbr}
    x = imp.value(node, 0)
    if reverse:
        x = _reversed(imp, x, base + "_x_reversed", lens)
    args = [x]
    for k in ((5, 6) if op == "LSTM" else (5,)):
        if not ins[k]:
            continue
        if ins[k] in imp.consts:
            raise imp.err(node, "a constant nonzero initial state is not read yet: feed it as an input")
        if ins[k] in imp.squeezed:     # a model input [1, B, H], declared [B, H]
            args.append(imp.value(node, k))
            continue
        src, n0 = imp.value(node, k), imp.shape[ins[k]][1]
        if nd > 1:
            src_d = imp.fresh(f"{base}_{'h0' if k == 5 else 'c0'}_dir")
            imp.lines.append(f"  {src_d} = Slice({src}) {{ dim: 0, num_slices: {nd}, index: {d} }}")
            src = src_d
        st = imp.fresh(f"{base}_{'h0' if k == 5 else 'c0'}")
        imp.lines.append(f"  {st} = Reshape({src}) {{ output_shape: [{n0}, {hsz}] }}")
        args.append(st)
    params = {k: imp.param(f"{base}_{k}", np.ascontiguousarray(v, dtype=np.float32)) for k, v in p.items()}
    seq = imp.fresh(f"{base}_seq")
    body = ", ".join(f"{k}: {imp.nd(v)}" for k, v in dict(attrs, params=params).items())
    imp.lines.append(f"  {seq} = {layer}({', '.join(args)}) {{ {body} }}")
    return (_reversed(imp, seq, base + "_seq_forward", lens) if reverse else seq), seq


def _reversed(imp, x, hint, lens=None):
    """x [T, B, ...] with each sequence's steps in reverse order (netc's SequenceReverse, over the lengths
    `lens` where given: the valid steps reversed, padding in place)."""
    name = imp.fresh(hint)
    imp.lines.append(f"  {name} = SequenceReverse({x}{', ' + lens if lens else ''})")
    return name
