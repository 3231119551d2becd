"""PyTorch eager baseline: a network's IR as a plain functional torch program in the network's own
dtype (f32), the way one would write it by hand with torch.nn.functional - cuDNN convolutions on
channels_last tensors, F.max_pool2d, F.linear, torch.cat - with no netc kernel involved.

bench/gpu.py times it (and torch.compile of it) against the compiled .so on the same inputs and
parameters. It is not the oracle: the reference executor (reference.py, float64, deliberately
naive) is; tests check this program against it. Activations are kept in the IR's NHWC layout as
views of channels_last storage, so permuting to NCHW for cuDNN and back is free. Values are
dropped after their last use, as a real model's would be.

Each op's hand-written rule is its OpDef.eager (netc/ops/, with ops/eager.py's helpers). Ops without
one run through their OpDef.reference (in f64, cast back), and EagerNet.fallbacks names them: the
baseline is honest about which layers are not native torch.
"""
from __future__ import annotations

import torch

from ..diagnostics import NetcError
from ..ir.core import SymbolRef
from ..ops import lookup

class EagerNet:
    """net = EagerNet(module, network, params, device, dtype); outputs = net(inputs by name).
    `params`: tensors by parameter sym_name (every one the network uses; aliases may be omitted)."""

    def __init__(self, module, network=None, params: dict | None = None, device="cpu", dtype=torch.float32,
                 training: bool = False):
        self.training = training
        from ..ir.query import layer_name as _name, layers as _layers, network_outputs
        from .reference import network_of
        self.net = network_of(module, network)
        self.dtype, self.device = dtype, torch.device(device)
        layers = _layers(self.net)
        decl = {p.attrs["sym_name"]: p for p in module.params() if "type" in p.attrs}
        self.fallbacks: list[str] = []
        self.param_tensors: dict = {}   # name -> the device tensor this program computes with
        self.steps = []                  # (fn, operand indices, result index, indices dead after it)
        index, last_use = {}, {}
        for op in layers:
            index[id(op.results[0])] = len(index)
        for op in layers:
            for v in op.operands:
                last_use[index[id(v)]] = id(op)
        self.outputs = [(_name(op), index[id(op.results[0])]) for op in network_outputs(self.net)]
        keep = {i for _, i in self.outputs}
        self.inputs = []
        params = dict(params or {})

        def param(ref):
            n = ref.name
            owner = decl[n].attrs["share_from"].name if n in decl and "share_from" in decl[n].attrs else n
            if n not in params and owner not in params:
                raise NetcError(f"EagerNet: no value for parameter '{n}'")
            t = params[n] if n in params else params[owner].reshape(decl[n].attrs["type"].shape)
            if n not in self.param_tensors:
                self.param_tensors[n] = t if (t.device == self.device and t.dtype == dtype) else \
                    t.to(device=self.device, dtype=dtype)
            return self.param_tensors[n]

        for op in layers:
            out = index[id(op.results[0])]
            if op.name == "netc.input":
                self.inputs.append((_name(op), out, op.results[0].type.shape))
                continue
            ps = {role: param(ref) for role, ref in (op.attrs.get("params") or {}).items()
                  if isinstance(ref, SymbolRef)}
            fn = self._rule(op, ps)
            ins = [index[id(v)] for v in op.operands]
            free = [i for i in dict.fromkeys(ins) if last_use.get(i) == id(op) and i not in keep]
            self.steps.append((fn, ins, out, free))

    # ---------------------------------------------------------------------------------- op rules
    def _rule(self, op, ps):
        opdef = lookup(op.name)
        a = opdef.attrs_of(op)
        x_shape = op.operands[0].type.shape if op.operands else None
        fn = opdef.eager(a, ps, x_shape, op.results[0].type.shape, self.training)
        if fn is not None:
            return fn
        # no hand-written rule: the op's reference (f64), cast back
        self.fallbacks.append(op.attrs.get("name") or op.name)
        dtype = self.dtype
        return lambda *xs: opdef.reference(a, list(xs), ps).to(dtype)

    @property
    def param_bytes(self) -> int:
        """Bytes of the parameters as this program holds them (its dtype, on its device)."""
        return sum(t.numel() * t.element_size() for t in self.param_tensors.values())

    # ---------------------------------------------------------------------------------- running
    def __call__(self, inputs: dict) -> dict:
        """Outputs by name; inputs by name, [b, ...] with any b (the IR's batch is not enforced)."""
        vals = {}
        for name, i, _ in self.inputs:
            vals[i] = inputs[name]
        for fn, ins, out, free in self.steps:
            vals[out] = fn(*[vals[i] for i in ins])
            for i in free:
                del vals[i]
        return {name: vals[i] for name, i in self.outputs}

    def example_inputs(self, batch: int | None = None, seed: int = 0) -> dict:
        """The reference executor's random inputs, cut to `batch`, in this program's dtype and device."""
        from .reference import random_float_input
        return {name: random_float_input(name, shape, seed)[:batch].to(device=self.device, dtype=self.dtype)
                for name, _, shape in self.inputs}


_OPTIMIZERS = {"sgd": "SGD", "momentum": "SGD", "nesterov": "SGD", "adam": "Adam", "rmsprop": "RMSprop",
               "adagrad": "Adagrad", "adadelta": "Adadelta", "adamax": "Adamax"}


class EagerTrainer:
    """The PyTorch eager training step a user would write for the same network: the forward as
    EagerNet in training mode (batch statistics, torch's dropout), the sum of the losses,
    torch.autograd's backward and a torch.optim step -- the baseline bench/gpu.py times a compiled
    training step against (and torch.compile of it). Not an oracle.

    trainer = EagerTrainer(inference_module, network, params, optimizer={"name": "adam", ...})
    loss = trainer.step(inputs, lr)        # parameters (trainer.params) updated in place
    `optimizer` is a training program's `optimizer` attribute (netc.ops.optim's names and options,
    the torch convention) or None for plain SGD."""

    def __init__(self, module, network=None, params: dict | None = None, optimizer: dict | None = None,
                 device="cpu", dtype=torch.float32, frozen=()):
        from .reference import network_of, module_params
        net = network_of(module, network)
        given = module_params(module, params, 0, dtype, device)
        decl = {p.attrs["sym_name"]: p for p in module.params() if "type" in p.attrs}
        self.params = {n: t.detach().clone().requires_grad_(n not in frozen and "share_from" not in decl[n].attrs)
                       for n, t in given.items()}
        self.net = EagerNet(module, net, self.params, device, dtype, training=True)
        self.losses = [op.attrs.get("name") for op in net.regions[0].ops
                       if lookup(op.name) is not None and lookup(op.name).is_loss]
        if not self.losses:
            raise NetcError(f"EagerTrainer: network '{net.attrs.get('sym_name')}' has no loss")
        opt = dict(optimizer or {"name": "sgd"})
        name = opt.get("name", "sgd")
        if opt.get("convention", "torch") != "torch" or name not in _OPTIMIZERS:
            raise NetcError(f"EagerTrainer: no torch.optim counterpart of {opt}")
        kw = {"lr": 0.0, "weight_decay": float(opt.get("weight_decay", 0.0) or 0.0)}
        if name in ("momentum", "nesterov"):
            kw.update(momentum=float(opt.get("momentum", 0.9)), nesterov=name == "nesterov")
        elif name == "adam":
            kw.update(betas=(float(opt.get("beta1", 0.9)), float(opt.get("beta2", 0.999))),
                      eps=float(opt.get("eps", 1e-8)))
        elif name == "rmsprop":
            kw.update(alpha=float(opt.get("alpha", 0.99)), eps=float(opt.get("eps", 1e-8)))
        elif name == "adagrad":
            kw.update(eps=float(opt.get("eps", 1e-10)))
        elif name == "adadelta":
            kw.update(rho=float(opt.get("rho", 0.9)), eps=float(opt.get("eps", 1e-6)))
        elif name == "adamax":
            kw.update(betas=(float(opt.get("beta1", 0.9)), float(opt.get("beta2", 0.999))),
                      eps=float(opt.get("eps", 1e-8)))
        self.clip = float(opt.get("clip_norm", 0.0) or 0.0)
        trainable = [t for t in self.params.values() if t.requires_grad]
        self.optimizer = getattr(torch.optim, _OPTIMIZERS[name])(trainable, **kw)
        self.trainable = trainable

    def loss(self, inputs: dict) -> torch.Tensor:
        """The forward pass: the sum of the network's losses (outputs EagerNet returns)."""
        out = self.net(inputs)
        missing = [n for n in self.losses if n not in out]
        if missing:
            raise NetcError(f"EagerTrainer: the loss {missing[0]!r} is not an output of the network")
        return sum(out[n] for n in self.losses)

    def step(self, inputs: dict, lr: float) -> torch.Tensor:
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss(inputs)
        loss.backward()
        if self.clip:
            torch.nn.utils.clip_grad_norm_(self.trainable, self.clip)
        self.optimizer.step()
        return loss.detach()
