"""Helpers of the ops' eager() rules (OpDef.eager): how a hand-written torch program computes netc's
NHWC ops with torch's NCHW ones (runtime/eager.py's baseline). Activations stay NHWC as views of
channels_last storage, so the permutes here are free. Imported by the rules when they run (torch
is slow to import)."""
from __future__ import annotations

import torch

from .reference import pads

ACT = {"none": None, "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}


def torch_padding(x_shape, kh, kw, a):
    """(pad_h, pad_w) for torch's symmetric padding giving exactly netc's windows (Paleo's padding,
    possibly asymmetric), or None: torch's windows then start where netc's do, and torch's output
    size, floor((h + 2 pad - k) / s) + 1, must be netc's (extra bottom/right rows are left out)."""
    sh, sw = a["strides"][1], a["strides"][2]
    oh, ow, t, _, l, _ = pads(x_shape[1], x_shape[2], kh, kw, sh, sw, a["padding"])
    if t < 0 or l < 0 or (x_shape[1] + 2 * t - kh) // sh + 1 != oh or (x_shape[2] + 2 * l - kw) // sw + 1 != ow:
        return None
    return t, l


def explicit_pads(x_shape, kh, kw, a):
    _, _, t, b, l, r = pads(x_shape[1], x_shape[2], kh, kw, a["strides"][1], a["strides"][2], a["padding"])
    return l, r, t, b


def act(y, a):
    f = ACT[a.get("activation", "none") or "none"]
    return f(y) if f is not None else y


def nchw(x):
    return x.permute(0, 3, 1, 2)


def nhwc(x):
    return x.permute(0, 2, 3, 1)
