"""ONNX import (frontend/onnx.py): a channel shuffle, the Reshape -> Transpose -> Reshape triple over an NCHW
image whose net effect is a fixed permutation of its channels, read as one netc ChannelPermute.

ShuffleNet's (and torchvision's ShuffleNetV2's channel_shuffle) is

    Reshape [N, C, H, W] -> [N, g, C/g, H, W],  Transpose perm (0, 2, 1, 3, 4),  Reshape -> [N, C, H, W]

More generally: the first Reshape splits the channel axis into factors [d1, ..., dk] (N, H and W kept), the
Transpose permutes only those factor axes, and the second Reshape merges them back into the same [N, C, H, W].
Then y[:, j] = x[:, order[j]] with order = arange(C).reshape(d).transpose(p).reshape(C), which netc's NHWC
image holds as a permutation of its last axis (written `groups: g` where it is the shuffle of g groups). The
two intermediate 5-d (or more) values must be read by nothing else. Any other reshape of an image, or transpose, is left to frontend/onnx.py's located refusals.

A Gather of the channels by constant indices that are a permutation of them (an NCHW image's axis 1, another
value's last axis) is the same op: what netc's own export writes for a ChannelPermute (channel_gather).
"""
from __future__ import annotations

import numpy as np

from ..ops.channel_permute import shuffle_order


def _consumers(imp, name: str) -> list:
    return [n for n in imp.graph.node if name in n.input]


def _permute(imp, src, out: str, hint: str, order: list, image: bool):
    c = len(order)
    g = next((g for g in range(2, c) if c % g == 0 and order == shuffle_order(c, g)), 0)
    attr = f"groups: {g}" if g else f"order: {imp.nd(order)}"
    name = imp.fresh(hint)
    imp.lines.append(f"  {name} = ChannelPermute({src}) {{ {attr} }}")
    imp.netc[out] = name
    if image:
        imp.image[out] = True


def channel_gather(imp, node, a) -> bool:
    """A Gather (`a` its attributes) of a computed value's channels by constant indices [C] that permute them, as
    a ChannelPermute; False (nothing written) otherwise."""
    idx = np.asarray(imp.consts[node.input[1]])
    shape = list(imp.shape.get(node.input[0]) or [])
    image = bool(imp.image.get(node.input[0]))
    if not shape or idx.ndim != 1:
        return False
    axis = a.get("axis", 0) % len(shape)
    c = shape[axis]
    if axis != (1 if image else len(shape) - 1) or idx.size != c or sorted(int(i) % c for i in idx) != list(range(c)):
        return False
    outputs = {o.name for o in imp.graph.output}
    hint = node.output[0] if node.output[0] in outputs else (node.name or node.output[0])
    _permute(imp, imp.value(node), node.output[0], hint, [int(i) % c for i in idx], image)
    return True


def channel_shuffle(imp, node) -> bool:
    """Translate the triple starting at Reshape `node` (its input an NCHW image) as a ChannelPermute, marking the
    Transpose and the second Reshape done (imp.transposed); False (nothing written) when it is not one."""
    src, mid = node.input[0], node.output[0]
    x = list(imp.shape.get(src) or [])
    split = list(imp.shape.get(mid) or [])
    outputs = {o.name for o in imp.graph.output}
    if len(x) != 4 or len(split) < 5 or split[0] != x[0] or split[-2:] != x[2:] or mid in outputs:
        return False
    dims = split[1:-2]
    if int(np.prod(dims)) != x[1]:
        return False
    users = _consumers(imp, mid)
    if len(users) != 1 or users[0].op_type != "Transpose":
        return False
    tr = users[0]
    perm = list(imp.attrs(tr).get("perm") or [])
    k = len(dims)
    if len(perm) != k + 3 or perm[0] != 0 or perm[-2:] != [k + 1, k + 2] or sorted(perm[1:-2]) != list(range(1, k + 1)):
        return False
    users = _consumers(imp, tr.output[0])
    if tr.output[0] in outputs or len(users) != 1 or users[0].op_type != "Reshape":
        return False
    back = users[0]
    if list(imp.shape.get(back.output[0]) or []) != x:
        return False
    order = np.arange(x[1]).reshape(dims).transpose([p - 1 for p in perm[1:-2]]).reshape(-1)
    hint = back.output[0] if back.output[0] in outputs else (back.name or back.output[0])
    _permute(imp, imp.value(node), back.output[0], hint, [int(o) for o in order], True)
    imp.transposed.update((tr.output[0], back.output[0]))
    return True
