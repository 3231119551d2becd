"""Scaling big networks down for tests, beyond `netc run --batch B --spatial N` (runtime/scale.py):
narrower channels keep every shape rule valid and the same kernels, fusion groups and plan
structure, at ~1/div^2 of the work."""
from __future__ import annotations


def narrow(module, div: int = 8):
    """Every convolution output width, inner-product width and class count divisible by `div`
    divided by it; convolutions infer their input channels (-1). Before shape inference."""
    for op in module.walk():
        f = op.attrs.get("filter")
        if op.name == "netc.conv2d" and isinstance(f, list) and len(f) == 4:
            op.attrs["filter"] = [f[0], f[1], -1, f[3] // div if f[3] % div == 0 else f[3]]
        for k in ("num_outputs", "num_classes", "dim_hidden"):
            v = op.attrs.get(k)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0 and v % div == 0:
                op.attrs[k] = v // div
