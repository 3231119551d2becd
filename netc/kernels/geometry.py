"""Window geometry of netc's convolutions and pools, shared by the launchers and the references.
Plain Python (no Triton), so reference.py works where Triton is not installed."""
from __future__ import annotations

from ..ops.conv import out_size


def pair(v, name: str) -> tuple[int, int]:
    """netc's [1, h, w, 1] (strides, ksize), or (h, w), or one int -> (h, w)."""
    if isinstance(v, int):
        return v, v
    v = list(v)
    if len(v) == 4:
        return int(v[1]), int(v[2])
    if len(v) == 2:
        return int(v[0]), int(v[1])
    raise ValueError(f"{name} must be an int, [h, w] or [1, h, w, 1], got {v}")


def window_geometry(h: int, w: int, kh: int, kw: int, sh: int, sw: int, padding):
    """(oh, ow, pad_top, pad_left) by Paleo's rules (netc.ops.conv.out_size): VALID, SAME (top/left
    pad ((o-1)*s + k - h)//2, the rest at the bottom/right; it may be negative, i.e. a crop) or
    explicit [ph, pw] (floor rounding; the bottom/right pad is whatever the output size needs)."""
    if isinstance(padding, str):
        padding = padding.upper()
    elif isinstance(padding, int):
        padding = (padding, padding)
    oh, ph = out_size(h, kh, sh, padding, 0)
    ow, pw = out_size(w, kw, sw, padding, 1)
    if oh <= 0 or ow <= 0:
        raise ValueError(f"a {kh}x{kw} window with strides {sh}x{sw} and padding {padding!r} "
                         f"does not fit a {h}x{w} input")
    return oh, ow, ph, pw
