"""The CPU target (`netc run --target cpu`, inference and `--train`): a program's ops in schedule order on the
CPU, computed in float32.

The reference executor (runtime/reference.py) is the oracle: it stores values in the program's dtype but each
op's reference computes in float64 (ops/reference.py in_compute_dtype), written for clarity. This target runs the
same ops with the same semantics, in f32 arithmetic (ops.reference.computing_in), and where a reference is slow
for a reason that is only its way of computing, a CPU lowering registered here beside it (CPU_LOWERINGS: the same
function, the fast way torch's CPU kernels allow). `--compare` checks a run against the float64 reference, as
for the interpreter target.

    netc.maxpool_grad      max pooling's gradient through torch's max_pool2d_with_indices and its backward (the
                           reference: an argmax over unfolded windows, then a fold); the same routing: each
                           window's gradient to its first maximum in row-major window order, none from a window
                           without an in-bounds element
    netc.maxpool           torch's max_pool2d
    netc.conv2d            torch's conv2d, then the reference's epilogue
    netc.conv2d_grad_filter, netc.conv2d_grad_data
                           aten's convolution_backward (the reference: a correlation with the batch as channels,
                           a transposed convolution)
    netc.gru, netc.gru_grad_gates, netc.lstm, netc.lstm_grad_gates
                           runtime/cpu_recurrent.py: the input products of all steps as one GEMM, the recurrent
                           ones of a step as one (the references: a product per gate and step)
The pooling and convolution lowerings work on NCHW views of NHWC storage (channels_last), which torch's CPU kernels take as they are (a
contiguous NCHW copy made max pooling's backward ten times slower); Paleo's padding (asymmetric SAME, the crop
of a negative pad) as the references apply it. tests/test_cpu_target.py checks each against its reference.

CpuTrainer (training) and CpuNet / run_cpu (inference) run a program through its step generated once over the
memory plan's arenas (runtime/cpu_step.py; each op's out= form in runtime/cpu_emit.py, or the lowering above or
its reference copied into place); a program the generated step does not take (recurrent state carried between
steps, a time-sized arena) runs op by op as the reference executor does, with these lowerings. Not done yet
(issue 28): the fusion pass's groups (the step plans every op as its own step; its own groupings are a
convolution's gradients in one call and a convolution's result handed to the next op in inference), and
sequences' ops have no out= forms (the recurrent ones have lowerings). docs/performance.md has the figures against PyTorch eager and torch.compile.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .cpu_recurrent import LOWERINGS as RECURRENT_LOWERINGS
from .train import ReferenceTrainer


def maxpool_grad(a, ins, params):
    """netc.maxpool_grad (x, dy, NHWC) -> dx, as ops/reference.py maxpool_grad computes it."""
    from ..ops.geometry import pair
    from ..ops.reference import pads
    x, dy = ins
    kh, kw = pair(a["ksize"], "ksize")
    sh, sw = pair(a["strides"], "strides")
    xn = x.permute(0, 3, 1, 2)
    oh, ow, t, b, l, r = pads(xn.shape[2], xn.shape[3], kh, kw, sh, sw, a["padding"])
    padded = F.pad(xn, (max(l, 0), max(r, 0), max(t, 0), max(b, 0)), value=float("-inf")) if max(t, b, l, r) > 0 else xn
    if min(t, b, l, r) < 0:                 # a negative pad crops (Paleo's SAME of a stride-2 1x1 window)
        padded = padded[:, :, max(-t, 0):padded.shape[2] - max(-b, 0), max(-l, 0):padded.shape[3] - max(-r, 0)]
    # NCHW views of NHWC storage (channels_last): torch's CPU pooling kernels take them as they are, several
    # times faster than on contiguous NCHW copies
    cl = torch.channels_last
    padded = padded.contiguous(memory_format=cl)
    y, idx = F.max_pool2d(padded, (kh, kw), (sh, sw), return_indices=True)
    g = dy.permute(0, 3, 1, 2).to(padded.dtype)
    g = g[:, :, :y.shape[2], :y.shape[3]]
    if max(t, b, l, r) >= min(kh, kw):     # a window may hold padding alone: it passes no gradient
        g = torch.where(torch.isfinite(y), g, 0.0)
    gpad = torch.ops.aten.max_pool2d_with_indices_backward(g.contiguous(memory_format=cl), padded, [kh, kw],
                                                           [sh, sw], [0, 0], [1, 1], False, idx)
    full = F.pad(gpad, (-max(l, 0), -max(r, 0), -max(t, 0), -max(b, 0)))
    if min(t, b, l, r) < 0:
        full = F.pad(full, (max(-l, 0), max(-r, 0), max(-t, 0), max(-b, 0)))
    return full.permute(0, 2, 3, 1)


def _nchw_padded(x, t, b, l, r, value=0.0):
    """x NHWC as an NCHW view of channels_last storage, padded (a negative pad crops) as Paleo pads."""
    xn = x.permute(0, 3, 1, 2)
    if max(t, b, l, r) > 0:
        xn = F.pad(xn, (max(l, 0), max(r, 0), max(t, 0), max(b, 0)), value=value)
    if min(t, b, l, r) < 0:
        xn = xn[:, :, max(-t, 0):xn.shape[2] - max(-b, 0), max(-l, 0):xn.shape[3] - max(-r, 0)]
    return xn.contiguous(memory_format=torch.channels_last)


def maxpool(a, ins, params):
    """netc.maxpool (NHWC): torch's max_pool2d on channels_last storage, Paleo's padding (-inf), a window
    without an in-bounds element 0 (as the reference)."""
    from ..ops.geometry import pair
    from ..ops.reference import pads
    (x,) = ins
    kh, kw = pair(a["ksize"], "ksize")
    sh, sw = pair(a["strides"], "strides")
    _, _, t, b, l, r = pads(x.shape[1], x.shape[2], kh, kw, sh, sw, a["padding"])
    y = F.max_pool2d(_nchw_padded(x, t, b, l, r, float("-inf")), (kh, kw), (sh, sw))
    if max(t, b, l, r) >= min(kh, kw):
        y = torch.where(torch.isfinite(y), y, 0.0)
    return y.permute(0, 2, 3, 1)


def _conv_geometry(a, x_shape, w_shape):
    from ..ops.geometry import pair
    from ..ops.reference import pads
    sh, sw = pair(a["strides"], "strides")
    return (sh, sw), pads(x_shape[1], x_shape[2], w_shape[0], w_shape[1], sh, sw, a["padding"])[2:]


def conv2d(a, ins, params):
    """netc.conv2d: torch's conv2d on channels_last storage, then the reference's epilogue (bias, activation)."""
    from ..ops.reference import epilogue
    (x,), w = ins, params["weight"]
    (sh, sw), (t, b, l, r) = _conv_geometry(a, x.shape, w.shape)
    wt = w.permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)
    y = F.conv2d(_nchw_padded(x, t, b, l, r), wt, stride=(sh, sw)).permute(0, 2, 3, 1)
    return epilogue(y, params.get("bias"), activation_=a["activation"])


def _conv_backward(x_shape, w, dz, a, xp, want):
    """aten's convolution_backward of the padded problem: (d padded input, d weight [CO, CI, KH, KW])."""
    wt = w.permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)
    (sh, sw), _ = _conv_geometry(a, x_shape, w.shape)
    g = dz.permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last)
    mask = [want == "x", want == "w", False]
    try:
        dx, dw, _ = torch.ops.aten.convolution_backward(g, xp, wt, None, [sh, sw], [0, 0], [1, 1], False, [0, 0], 1, mask)
    except RuntimeError:    # a shape oneDNN does not take: torch's slow convolution wants contiguous NCHW operands
        dx, dw, _ = torch.ops.aten.convolution_backward(g.contiguous(), xp.contiguous(), wt.contiguous(), None, [sh, sw],
                                                        [0, 0], [1, 1], False, [0, 0], 1, mask)
    return dx, dw


def conv2d_grad_filter(a, ins, params):
    """netc.conv2d_grad_filter (x, dz) -> dW HWIO, by aten's convolution_backward."""
    x, dz = ins
    kh, kw = a["filter"][0], a["filter"][1]
    (sh, sw), (t, b, l, r) = _conv_geometry(a, x.shape, (kh, kw))
    xp = _nchw_padded(x, t, b, l, r)
    w = torch.empty((kh, kw, x.shape[3], dz.shape[3]), dtype=x.dtype)
    _, dw = _conv_backward(x.shape, w, dz, a, xp, "w")
    return dw.permute(2, 3, 1, 0).contiguous()


def conv2d_grad_data(a, ins, params):
    """netc.conv2d_grad_data (dz) -> dx NHWC, by aten's convolution_backward, the padding undone."""
    (dz,), w = ins, params["weight"]
    shape = tuple(a["input_shape"])
    (sh, sw), (t, b, l, r) = _conv_geometry(a, shape, w.shape)
    xp = _nchw_padded(torch.empty(shape, dtype=dz.dtype), t, b, l, r)
    dxp, _ = _conv_backward(shape, w, dz, a, xp, "x")
    full = dxp[:, :, max(t, 0):dxp.shape[2] - max(b, 0), max(l, 0):dxp.shape[3] - max(r, 0)]
    if min(t, b, l, r) < 0:             # rows the forward cropped get no gradient
        full = F.pad(full, (max(-l, 0), max(-r, 0), max(-t, 0), max(-b, 0)))
    return full.permute(0, 2, 3, 1)


CPU_LOWERINGS = {"netc.maxpool_grad": maxpool_grad, "netc.maxpool": maxpool, "netc.conv2d": conv2d,
                 "netc.conv2d_grad_filter": conv2d_grad_filter, "netc.conv2d_grad_data": conv2d_grad_data,
                 **RECURRENT_LOWERINGS}


class CpuTrainer(ReferenceTrainer):
    """ReferenceTrainer's API (feed, step, losses, gradients, params) on the CPU target: the step generated
    once over the memory plan's arenas (runtime/cpu_step.py), f32 arithmetic and the CPU lowerings; `params`
    are views of the constant arena. A step returns the losses and outputs, and with capture=True also every
    parameter's gradient and the forward values the backward reads (what --compare and --grads read; copies
    taken as they are computed). A program the generated step does not take (recurrent state carried
    between steps, a time-sized arena) runs op by op on the reference executor's loop, as before."""

    def __init__(self, module, network=None, params: dict | None = None, seed: int = 0, capture: bool = False,
                 **kw):
        super().__init__(module, network, params, seed, torch.float32, **kw)
        self.program = None
        if not self.carry_state:
            from .cpu_step import CpuProgram, NoArena
            try:
                self.program = CpuProgram(module, self.net, self.params, CPU_LOWERINGS,
                                          capture=captured_values(self.net) if capture else ())
            except NoArena:
                self.program = None          # no arena for it: the op-by-op loop
            else:
                self.params = self.program.params

    def step(self, inputs: dict | None = None, lr: float | None = None, step_seed: int | None = None) -> dict:
        from ..ops.reference import computing_in
        from .reference import execute
        if self.program is not None:
            self.last_feed = self.feed(inputs, lr, step_seed)     # (compare_step's local check reads it)
            named = self.program.run(self.last_feed)
            self.steps += 1
            return named
        with computing_in(torch.float32):
            if self.carry_state:
                return super().step(inputs, lr, step_seed)
            self.last_feed = self.feed(inputs, lr, step_seed)
            named = execute(self.net, self.last_feed, self.params, self.dtype, impls=CPU_LOWERINGS)
        self.steps += 1
        return named

    def gradients(self, named: dict):
        """Each trainable parameter's gradient from a step's values (None where the step did not capture them)."""
        grads = self.net.attrs["gradients"]
        return {p: named[v] for p, v in grads.items()} if all(v in named for v in grads.values()) else None


def captured_values(net) -> list:
    """The values a CpuTrainer(capture=True) step returns besides the outputs: every parameter's gradient and
    the forward values gradient ops read (compare_step's local check)."""
    from ..ir.query import layer_name, layers
    from .train import is_forward
    names = set((net.attrs.get("gradients") or {}).values())
    for op in layers(net):
        if not is_forward(op):
            names.update(layer_name(v.owner) if len(v.owner.results) == 1 else f"{layer_name(v.owner)}#{v.index}"
                         for v in op.operands if v.owner.name != "netc.input" and is_forward(v.owner))
    return sorted(names)


class CpuNet:
    """One network's inference on the CPU target, its step generated once: net = CpuNet(module, network,
    params); outputs = net(inputs by name, every one; checked and converted as run_reference does). Parameters
    live in the step's arena (`params`; change them with set_params: convolution weights are rearranged once)."""

    def __init__(self, module, network=None, params: dict | None = None, seed: int = 0):
        from ..ir.core import SymbolRef
        from ..ir.query import layer_name, layers, network_inputs, network_outputs
        from .cpu_step import CpuProgram
        from .reference import INT_DTYPES, module_params, network_of
        from ..diagnostics import NetcError
        from ..ops.registry import not_runnable
        self.module, self.net = module, network_of(module, network)
        for op in layers(self.net):     # a shape that is only Paleo's bookkeeping number cannot be computed
            why = not_runnable(op)
            if why:
                raise NetcError(why, op.loc)
        used = {ref.name for op in layers(self.net) for ref in (op.attrs.get("params") or {}).values()
                if isinstance(ref, SymbolRef)}
        self.program = CpuProgram(module, self.net, module_params(module, params, seed, torch.float32, names=used),
                                  CPU_LOWERINGS)
        self.params = self.program.params
        self.inputs = [(layer_name(op), torch.Size(op.results[0].type.shape),
                        INT_DTYPES.get(op.results[0].type.dtype, torch.float32)) for op in network_inputs(self.net)]
        self.outputs = [layer_name(op) for op in network_outputs(self.net)]

    def set_params(self, values: dict) -> None:
        """New values of parameters by sym_name (into the arena; the rearranged copies follow)."""
        from .executor import unknown_params
        unknown_params(values, self.params)
        for k, v in values.items():
            self.params[k].copy_(torch.as_tensor(v).reshape(self.params[k].shape))
        self.program.repack()

    def __call__(self, inputs: dict) -> dict:
        from ..diagnostics import NetcError, did_you_mean
        from .reference import feed_tensor
        if len(inputs) != len(self.inputs) or any(k not in inputs for k, _, _ in self.inputs):
            names = [k for k, _, _ in self.inputs]
            for k in inputs:
                if k not in names:
                    hint = did_you_mean(k, names)
                    raise NetcError(f"network '{self.net.attrs.get('sym_name')}' has no input '{k}'"
                                    + (f"; did you mean '{hint}'?" if hint else "") + f" (inputs: {', '.join(names)})")
            missing = [k for k in names if k not in inputs]
            raise NetcError(f"missing input '{missing[0]}' of network '{self.net.attrs.get('sym_name')}'")
        feed = {}
        for name, shape, dt in self.inputs:
            t = inputs[name]
            # a tensor of the right shape and kind goes straight in (the step's copy into the arena converts an
            # integer dtype); anything else is checked and converted as run_reference does
            ok = (torch.is_tensor(t) and t.shape == shape and t.device.type == "cpu"
                  and (t.dtype == dt or not (t.is_floating_point() or dt.is_floating_point or t.dtype == torch.bool
                                             or t.is_complex())))
            feed[name] = t if ok else feed_tensor(t, shape, dt, f"input '{name}'", "cpu")
        out = self.program.run(feed)
        return {k: out[k] for k in self.outputs}


def run_cpu(module, inputs: dict | None = None, params: dict | None = None, network=None, seed: int = 0) -> dict:
    """run_reference's contract on the CPU target: the outputs by layer name (f32). A network whose memory
    the plan does not take runs op by op with the CPU lowerings."""
    from ..ops.reference import computing_in
    from . import reference as ref
    from .cpu_step import NoArena
    net = ref.network_of(module, network)
    if inputs is not None:
        try:
            cpu_net = CpuNet(module, net, params, seed)
        except NoArena:
            pass
        else:
            return cpu_net(inputs)
    with computing_in(torch.float32):
        return ref.run_reference(module, inputs, params, network=net, seed=seed, dtype=torch.float32,
                                 impls=CPU_LOWERINGS)
