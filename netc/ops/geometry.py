"""Window geometry of netc's convolutions and pools (Paleo's output sizes and stored pads),
shared by the ops' shape rules, the float64 references (reference.py) and the kernel launchers
(netc/kernels). Plain Python: no torch, no Triton."""
from __future__ import annotations


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def out_size(h: int, k: int, s: int, padding, axis: int) -> tuple[int, int]:
    """Paleo's output size and stored pad along one spatial axis (axis 0 = h, 1 = w). An explicit
    [top, left, bottom, right] (a pool's) pads each side as given, rounding down: the output of a
    window sweep over the padded input."""
    if padding == "VALID":
        return ceil_div(h - k + 1, s), 0
    if padding == "SAME":
        o = ceil_div(h, s)
        return o, ((o - 1) * s + k - h) // 2
    p = padding[axis]
    after = padding[axis + 2] if len(padding) == 4 else p
    return (h + p + after - k) // s + 1, p


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
    """(oh, ow, pad_top, pad_left) by Paleo's rules (out_size): VALID, SAME (top/left
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
