"""Helpers of the ops' singa_layer() rules (OpDef.singa_layer; netc/export/singa.py writes the job):
SINGA's spelling of netc's numbers, dimensions (NHWC -> NCHW) and windows, and the SINGA names some
ops carry (the GRU's parameter order, the opaque layer types SINGA may carry through)."""
from __future__ import annotations

from .geometry import out_size
from .registry import SingaInexpressible

GRU_ROLES = ("z_hx", "r_hx", "c_hx", "z_hh", "r_hh", "c_hh", "z_b", "r_b", "c_b")  # SINGA's param order
# netc.opaque types SINGA layers may carry through (pass-through shape in netc, no conf needed)
OPAQUE_OK = {"kImagePreprocess", "kCSVOutput", "kRecordOutput", "kCharRNNOutput", "kBridgeSrc", "kBridgeDst",
             "kSoftmaxLoss", "kCudnnSoftmaxLoss", "kDummy", "kRNNDummy"}


def fmt(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def singa_dim(d: int, rank: int) -> int:
    """netc's concat/slice dimension -> SINGA's (NHWC -> NCHW for 4-D tensors)."""
    d = d + rank if d < 0 else d
    return {0: 0, 1: 2, 2: 3, 3: 1}[d] if rank == 4 else d


def geometry(name, what, x, k, s, pad, v1):
    """SINGA's kernel/pad/stride fields for a netc window (explicit or SAME/VALID padding) of the
    layer `name`."""
    kh, kw = k
    sh, sw = s
    ps = []
    for axis, (xx, kk, ss) in enumerate(((x[1], kh, sh), (x[2], kw, sw))):
        o, p = out_size(xx, kk, ss, pad, axis)
        if p < 0 or (xx + 2 * p - kk) // ss + 1 != o:
            raise SingaInexpressible(
                f"{what} '{name}': netc's {pad if isinstance(pad, str) else 'explicit'} padding gives "
                f"{o} outputs from {xx} along {'HW'[axis]}, which SINGA's symmetric-pad formula cannot express")
        ps.append(p)
    ph, pw = ps
    if (kh, ph, sh) == (kw, pw, sw):
        return f"kernel: {kh} pad: {ph} stride: {sh}" if (ph or not v1 or what != "pooling") else \
            f"kernel: {kh} stride: {sh}"
    if v1:
        raise SingaInexpressible(f"{what} '{name}' has a non-square window ({kh}x{kw}, stride {sh}x{sw}, pad "
                                 f"{ph}x{pw}); SINGA v0.1 has only square kernel/pad/stride")
    return f"kernel_x: {kw} kernel_y: {kh} pad_x: {pw} pad_y: {ph} stride_x: {sw} stride_y: {sh}"
