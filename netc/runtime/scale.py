"""Scaling a network down before it runs: `netc run --batch B --spatial N` (or HxW).

scale_inputs() rewrites the declared shapes of the network inputs -- every input's first axis
becomes B (a time-major sequence's axis 1 where it declares batch_axis 1; the inputs a time-major network
reads per sample -- an initial state [B, H], lengths [B], labels [B] of a pool, memory/graph.py
initial_state_inputs -- follow B there and are left alone where B is not scaled), every 4-D (NHWC) input's H and W
become N (or H x W) -- before shape inference, so
everything downstream follows from the new shapes: convolutions and pools shrink, inner products
take the flattened features they now see, parameters are sized from them. What cannot follow
(a window larger than its input, a parameter declared with a fixed shape, a Reshape to fixed
sizes) is reported by shape inference as usual, with a note saying the inputs were scaled.

smallest_spatial() finds the smallest N for which the scaled network is still valid (`--spatial min`).
"""
from __future__ import annotations

from ..diagnostics import NetcError
from ..ir.core import UNRANKED, Module


def parse_spatial(text: str) -> tuple:
    """'N' or 'HxW' -> (H, W); a clear error otherwise."""
    s = str(text).strip().lower()
    parts = s.split("x") if "x" in s else [s, s]
    try:
        h, w = (int(p) for p in parts)
    except ValueError:
        raise NetcError(f"--spatial expects N or HxW (positive integers), got '{text}'") from None
    if len(parts) != 2 or h <= 0 or w <= 0:
        raise NetcError(f"--spatial expects N or HxW (positive integers), got '{text}'")
    return h, w


def scale_inputs(module: Module, batch: int | None = None, spatial=None) -> list:
    """Give every input of every network batch `batch` (on its batch axis: 0, or 1 for a time-major input,
    Input.batch_axis; a recurrent op's initial state is left alone) and, when 4-D, spatial size `spatial`
    ((H, W), an int, or 'HxW'). Must run before shape inference (on a freshly loaded module).
    Returns [(network, input, old shape, new shape)] of the inputs changed."""
    if batch is not None and int(batch) <= 0:
        raise NetcError(f"--batch must be positive, got {batch}")
    hw = None if spatial is None else (spatial if isinstance(spatial, tuple) else
                                       ((spatial, spatial) if isinstance(spatial, int) else parse_spatial(spatial)))
    if hw is not None and (hw[0] <= 0 or hw[1] <= 0):
        raise NetcError(f"--spatial must be positive, got {hw[0]}x{hw[1]}")
    from ..memory.graph import initial_state_inputs
    changed = []
    four_d = False
    for net in module.networks():
        state = initial_state_inputs(net)
        ins = [op for op in net.regions[0].ops if op.name == "netc.input"]
        # where --batch sets B (axis 1 of the sequences), the inputs read per sample ([B, ...]: lengths,
        # labels, an initial state) follow it; where it sets T (axis 0), they keep their B
        b_axis = any(op.attrs.get("batch_axis", 0) == 1 for op in ins if op.attrs.get("name") not in state)
        for op in ins:
            shape = list(op.attrs.get("shape") or [])
            new = list(shape)
            if batch is not None and new and (op.attrs.get("name") not in state or b_axis):
                axis = op.attrs.get("batch_axis", 0) if op.attrs.get("name") not in state else 0
                if axis < len(new):     # 1: a time-major sequence [T, B, ...] (T is a size: --size T=N)
                    new[axis] = int(batch)
            if hw is not None and len(new) == 4:
                new[1], new[2] = hw
                four_d = True
            if new != shape:
                op.attrs["shape"] = new
                op.results[0].type = UNRANKED   # shape inference gives it the new type
                if new[:1] != shape[:1] and op.attr_locs:
                    op.attr_locs.pop("batch", None)   # the batch is --batch's, not the file's field
                changed.append((net.attrs.get("sym_name"), op.attrs.get("name"), shape, new))
    if hw is not None and not four_d:
        raise NetcError("--spatial sets the H and W of 4-D (NHWC) inputs, and this file has none")
    return changed


def smallest_spatial(load, batch: int | None = None, phase: str = "train", hi: int = 4096):
    """The smallest N in 1..hi for which `load()` (a fresh module each call), scaled to N x N (and
    batch), passes the default pipeline with every layer runnable; None if there is none. Scans
    upwards: validity is not monotone in N (a VALID window after a fixed-size parameter wants one
    exact size), so no bisection."""
    from ..diagnostics import DiagnosticEngine
    from ..ops.registry import not_runnable
    from ..pipelines import Options, inference
    for n in range(1, hi + 1):
        m = load()
        scale_inputs(m, batch=batch, spatial=(n, n))
        try:
            inference(m, Options(phase=phase), DiagnosticEngine())
        except NetcError:
            continue
        if not any(not_runnable(op) for net in m.networks() for op in net.regions[0].ops):
            return n
    return None


def forward_at_training_batch(module, batch: int, phase, diag):
    """A training library's forward shares the training step's arena and compiled batch: where the
    forward's phase declares another batch (SINGA's test phase reading 100 records, the training
    phase 64), its inputs get the training batch, and a warning says so."""
    from ..memory.graph import initial_state_inputs
    state = set().union(*(initial_state_inputs(n) for n in module.networks()))
    other = [op for n in module.networks() for op in n.regions[0].ops
             if op.name == "netc.input" and op.attrs.get("shape") and int(op.attrs["shape"][0]) != batch
             and op.attrs.get("name") not in state]
    if other:
        old = int(other[0].attrs["shape"][0])
        scale_inputs(module, batch=batch)
        diag.warning(f"the library's forward (phase '{phase}') declares batch {old} but the training step runs at "
                     f"{batch}: the forward is compiled at the training batch (netc_forward takes up to {batch} "
                     f"samples; compile without --train for a forward at {old})", other[0].loc)
