"""Training on the reference executor: one step of a training program (the backward and optimizer
passes' IR) run op by op with every op's reference semantics -- the generated gradient ops
included, never torch.autograd -- and the independent oracle that checks them: torch.autograd
over the forward ops' reference semantics, in float64 (check_grads).

A training program's own inputs are marked with a `role` (the backward and optimizer passes add
them): `learning_rate` (a scalar), `seed` (dropout masks: each step draws new ones),
`grad_seed:<layer>` (the gradient fed to a named output). Parameters and optimizer state live in
one dict of tensors by symbol name; update ops write into it in place.
"""
from __future__ import annotations

import math

import torch

from ..diagnostics import NetcError
from ..ir.core import Module, Operation, SymbolRef
from ..ir.query import layer_name, layers, network_inputs
from ..ops import lookup
from .reference import (INT_DTYPES, carried_inputs, feed_tensor, network_of, execute, module_params, random_input,
                        with_carried_state)


def is_forward(op: Operation) -> bool:
    """Whether an op of a training program is part of its forward computation (not a gradient,
    not an update)."""
    d = lookup(op.name)
    return "grad_of" not in op.attrs and not (d is not None and d.side_effects)


def program_inputs(net: Operation) -> dict:
    """role -> input op, for a training program's own inputs."""
    return {op.attrs["role"]: op for op in network_inputs(net) if op.attrs.get("role")}


def data_inputs(net: Operation) -> list:
    """The inputs a user feeds (images, labels): every input without a role."""
    return [op for op in network_inputs(net) if not op.attrs.get("role")]


class ReferenceTrainer:
    """Runs a training program step by step on the reference executor.

    trainer = ReferenceTrainer(module, network=None, params=None, seed=0)
    out = trainer.step({"data": x, "label": y}, lr=0.01)   # every value of the step, by name
    trainer.params                                         # parameters and state, updated in place

    carry_state=True carries recurrent state from step to step as ReferenceExecutor's carry_state does
    (Brainstorm's context; truncated backpropagation through time: the carried state is an input, the
    gradient stops there): each step's final state (taken as the forward runs, before the update) feeds
    the next step's state inputs unless the step gives them; `state`, reset_state() as there.
    """

    def __init__(self, module: Module, network=None, params: dict | None = None, seed: int = 0,
                 dtype=torch.float64, device="cpu", carry_state: bool = False):
        self.module, self.net = module, network_of(module, network)
        if "gradients" not in self.net.attrs:
            raise NetcError(f"network '{self.net.attrs.get('sym_name')}' is not a training program (run the backward "
                            f"pass first: netc run --train)")
        self.dtype, self.device, self.seed = dtype, device, seed
        ops = layers(self.net)
        used = {ref.name for op in ops for ref in (op.attrs.get("params") or {}).values()
                if isinstance(ref, SymbolRef)}
        self.params = module_params(module, params, seed, dtype, device, names=used)
        self.steps = 0
        self.carry_state, self.state = carry_state, {}
        if carry_state and not carried_inputs(self.net):
            raise NetcError(f"network '{self.net.attrs.get('sym_name')}' has no state to carry: no recurrent layer "
                            f"takes its initial state from an input (give the Lstm its h0 and c0 inputs)")

    def reset_state(self) -> None:
        """Forget the carried state: the next step starts from zeros."""
        self.state = {}

    def feed(self, inputs: dict | None, lr: float | None = None, step_seed: int | None = None) -> dict:
        """The step's input tensors: the given data inputs (all of them; None: seeded random ones),
        the learning rate and the dropout seed."""
        data = data_inputs(self.net)
        names = [layer_name(op) for op in data]
        out = {}
        if inputs is not None:
            unknown = [k for k in inputs if k not in names]
            if unknown:
                raise NetcError(f"network '{self.net.attrs.get('sym_name')}' has no input '{unknown[0]}' "
                                f"(inputs: {', '.join(names)})")
            missing = [n for n in names if n not in inputs]
            if missing:
                raise NetcError(f"missing input{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}")
        for op in data:
            v, name = op.results[0], layer_name(op)
            want = INT_DTYPES.get(v.type.dtype, self.dtype)
            out[name] = (feed_tensor(inputs[name], v.type.shape, want, f"input '{name}'", self.device) if inputs is not None
                         else random_input(self.net, op, self.seed, self.dtype).to(self.device))
        for role, op in program_inputs(self.net).items():
            v, name = op.results[0], layer_name(op)
            if role == "learning_rate":
                if lr is None:
                    raise NetcError("the training program needs a learning rate")
                out[name] = torch.tensor(float(lr), dtype=self.dtype, device=self.device)
            elif role == "seed":
                s = (self.seed * 1_000_003 + self.steps) if step_seed is None else step_seed
                out[name] = torch.tensor(s, dtype=torch.int64, device=self.device)
            elif role.startswith("grad_seed:"):
                out[name] = random_input(self.net, op, self.seed, self.dtype).to(self.device)
            else:
                raise NetcError(f"input '{name}' has the role '{role}', which this executor does not know")
        return out

    def step(self, inputs: dict | None = None, lr: float | None = None, step_seed: int | None = None) -> dict:
        if not self.carry_state:
            named = execute(self.net, self.feed(inputs, lr, step_seed), self.params, self.dtype)
            self.steps += 1
            return named
        carried = with_carried_state(self.net, {}, self.state, self.dtype, self.device)
        feed = self.feed(None if inputs is None else {**carried, **inputs}, lr, step_seed)
        if inputs is None:      # random data, the carried state
            feed.update(carried)
        states: dict = {}
        named = execute(self.net, feed, self.params, self.dtype, states=states)
        self.state = states
        self.steps += 1
        return named

    # executor.TrainingExecutor
    def set_params(self, values: dict) -> None:
        from .executor import unknown_params
        unknown_params(values, self.params)
        for k, v in values.items():
            t = self.params[k]
            t.copy_(torch.as_tensor(v).reshape(t.shape).to(t.dtype))

    def get_params(self) -> dict:
        return {k: v.detach().clone() for k, v in self.params.items()}

    def train_step(self, inputs: dict, lr: float, seed: int = 0) -> float:
        named = self.step(inputs, lr, step_seed=seed)
        return float(sum(float(v) for v in self.losses(named).values()))

    def step_on(self, feed: dict) -> dict:
        """One step on a given feed (a feed() of this trainer or of its twin: the same inputs, learning
        rate and seeds), its floating tensors in this trainer's dtype."""
        fd = {k: v.to(self.device, self.dtype) if v.is_floating_point() else v.to(self.device) for k, v in feed.items()}
        named = execute(self.net, fd, self.params, self.dtype)
        self.steps += 1
        return named

    def twin(self, dtype) -> "ReferenceTrainer":
        """A trainer of the same program, seed and device computing in `dtype` (made once; its
        parameters are its own: set them before a step)."""
        twins = self.__dict__.setdefault("_twins", {})
        if dtype not in twins:
            twins[dtype] = ReferenceTrainer(self.module, self.net, None, seed=self.seed, dtype=dtype, device=self.device)
        return twins[dtype]

    def losses(self, named: dict) -> dict:
        return {n: named[n] for n in self.net.attrs.get("losses", [])}

    def data_batch(self, data: "Dataset") -> int:
        """fit's check of a Dataset against this program's data inputs: their batch size."""
        return data.check(self.net)

    def gradients(self, named: dict) -> dict:
        """Each trainable parameter's gradient from a step's values, by parameter name."""
        return {p: named[v] for p, v in self.net.attrs["gradients"].items()}


def autograd_gradients(module: Module, net: Operation, feed: dict, params: dict, dtype=torch.float64) -> dict:
    """The oracle: torch.autograd over the forward ops' reference semantics (the training program
    minus its gradient and update ops), from the same inputs (masks included) and parameters.
    Returns the gradient of the losses' sum (and of sum(output * seed) for named outputs) with
    respect to every trainable parameter."""
    decl = {p.attrs["sym_name"]: p for p in module.params()}
    leaves, tensors = {}, {}
    for n, t in params.items():
        sf = decl[n].attrs.get("share_from") if n in decl else None
        if sf is None:
            leaves[n] = tensors[n] = t.detach().clone().to(dtype).requires_grad_(t.is_floating_point())
    for n, t in params.items():
        sf = decl[n].attrs.get("share_from") if n in decl else None
        if sf is not None:
            tensors[n] = leaves[sf.name].reshape(tuple(decl[n].attrs["type"].shape))
    with torch.enable_grad():
        named = execute(net, feed, tensors, dtype, only=is_forward)
        total = 0
        for name in net.attrs.get("losses", []):
            v = named[name]
            seed = next((feed[layer_name(op)] for role, op in program_inputs(net).items()
                         if role == f"grad_seed:{name}"), None)
            total = total + (v * seed).sum() if seed is not None else total + v.sum()
        wanted = list(net.attrs["gradients"])
        grads = torch.autograd.grad(total, [leaves[p] for p in wanted], allow_unused=True)
    return {p: (g if g is not None else torch.zeros_like(leaves[p])) for p, g in zip(wanted, grads)}


def check_grads(module: Module, network=None, inputs: dict | None = None, params: dict | None = None,
                seed: int = 0) -> list[dict]:
    """One step's generated gradients against autograd, in float64: per trainable parameter the
    worst relative error max|g - g_ref| / max(max|g_ref|, 1e-6 * G) and the reference's max|g_ref|,
    where G is the largest gradient entry of the network. (The floor: a gradient that is zero in
    exact arithmetic -- the bias of a layer a batch norm follows, whose mean the normalization
    removes -- comes out as rounding noise of 1e-17 in both, which says nothing relative to itself.)"""
    tr = ReferenceTrainer(module, network, params, seed, torch.float64)
    ruled = [op for op in layers(tr.net) if getattr(lookup(op.name), "learning_rule", None) is not None]
    if ruled:   # its parameters' updates are no derivative: autograd has nothing to compare them with
        name = ruled[0].attrs.get("name") or ruled[0].name
        raise NetcError(f"--check-grads: '{name}' ({lookup(ruled[0].name).type_name}) learns by a rule that is no "
                        f"derivative, so there is no gradient to check against autograd", ruled[0].loc)
    feed = tr.feed(inputs, lr=0.0)
    before = {n: t.clone() for n, t in tr.params.items()}
    named = execute(tr.net, feed, tr.params, torch.float64, only=lambda op: not _updates(op))
    got = tr.gradients(named)
    ref = autograd_gradients(module, tr.net, feed, before, torch.float64)
    rows = []
    G = max((float(r.abs().max()) for r in ref.values() if r.numel()), default=0.0)
    for p, g in got.items():
        r = ref[p]
        scale = float(r.abs().max()) if r.numel() else 0.0
        err = float((g.to(torch.float64) - r).abs().max()) / max(scale, 1e-6 * G, 1e-300) if r.numel() else 0.0
        rows.append({"param": p, "rel_error": err, "max_abs": scale, "shape": list(r.shape)})
    return rows


def _updates(op) -> bool:
    d = lookup(op.name)
    return d is not None and d.side_effects


# -- data, the training loop, evaluation ----------------------------------------------------------

class Dataset:
    """Named arrays with a leading sample axis, one per data input of a network (an .npz file such
    as examples/digits_data.py writes: `data` [S, 8, 8, 1], `label` [S]). Batches of the network's
    batch size are drawn in a seeded random order, a new one each epoch; a last partial batch is
    dropped (training) or padded (evaluation). An input with batch_axis 1, a time-major sequence
    [T, B, ...], takes one sequence a sample ([S, T, ...]): a batch of B of them stacked along axis 1."""

    def __init__(self, arrays: dict, what: str = "--data"):
        from .io import about
        self.arrays, self.what = arrays, what
        with about(arrays):   # errors about a data file name it
            if not arrays:
                raise NetcError(f"{what}: the archive holds no arrays")
            sizes = {k: int(v.shape[0]) if v.dim() else 0 for k, v in arrays.items()}
            if len(set(sizes.values())) != 1 or not next(iter(sizes.values())):
                raise NetcError(f"{what}: every array needs the same number of samples (its first axis); got "
                                + ", ".join(f"'{k}' {n}" for k, n in sizes.items()))
        self.size = next(iter(sizes.values()))
        self.axes: dict[str, int] = {}    # input -> its batch axis, where not 0 (check())

    def check(self, net: Operation) -> int:
        """The network's batch size, after checking that the arrays fit its data inputs (and that
        the labels of a SoftmaxLoss are class indices of its classes)."""
        from .io import about
        from .reference import index_bound_of, label_classes_of
        self.axes = {layer_name(op): op.attrs["batch_axis"] for op in data_inputs(net) if op.attrs.get("batch_axis")}
        batch = self.check_shapes({layer_name(op): tuple(op.results[0].type.shape) for op in data_inputs(net)},
                                  net.attrs.get("sym_name"))
        with about(self.arrays):
            for op in data_inputs(net):
                name, v = layer_name(op), op.results[0]
                t = self.arrays[name]
                if t.dtype == torch.bool or t.is_complex():
                    raise NetcError(f"{self.what}: '{name}' has dtype {str(t.dtype).replace('torch.', '')}, not a "
                                    f"real number type")
                if v.type.dtype.startswith("i") and t.is_floating_point() and not torch.equal(t, t.round()):
                    raise NetcError(f"{self.what}: '{name}' feeds an integer input and must hold integers, got "
                                    f"fractional values")
                if t.is_floating_point() and t.numel() and not bool(torch.isfinite(t).all()):
                    i = int((~torch.isfinite(t)).reshape(len(t), -1).any(1).nonzero()[0])
                    raise NetcError(f"{self.what}: '{name}' holds a value that is not finite (NaN or infinity) in "
                                    f"sample {i}")
                classes = label_classes_of(net, v)
                if classes is not None and t.numel() and math.prod(v.type.shape[1:]) == 1:
                    lo, hi = float(t.min()), float(t.max())
                    if not (lo >= 0 and hi < classes):
                        bad = lo if not lo >= 0 else hi
                        raise NetcError(f"{self.what}: '{name}' holds the label {bad:g}; the labels of a "
                                        f"SoftmaxLoss over {classes} classes are 0 to {classes - 1}")
                rows = index_bound_of(net, v)
                if rows is not None and t.numel():
                    bad = (t < 0) | (t >= rows)
                    if bool(bad.any()):
                        i = int(bad.reshape(len(t), -1).any(1).nonzero()[0])
                        raise NetcError(f"{self.what}: '{name}' holds the id {float(t[bad][0]):g} in sample {i}; the "
                                        f"ids of an embedding over {rows} rows are 0 to {rows - 1}")
        return batch

    def check_shapes(self, shapes: dict, network: str) -> int:
        """The batch size of data inputs of these shapes (by name, batch first), after checking that
        the arrays fit them."""
        from .io import about
        with about(self.arrays):
            return self._check_shapes(shapes, network)

    def _check_shapes(self, shapes: dict, network: str) -> int:
        names = list(shapes)
        missing = [n for n in names if n not in self.arrays]
        if missing:
            raise NetcError(f"{self.what}: no array for input{'s' if len(missing) > 1 else ''} "
                            f"{', '.join(map(repr, missing))} of network '{network}' (arrays: "
                            f"{', '.join(self.arrays)})")
        extra = [k for k in self.arrays if k not in names]
        if extra:
            raise NetcError(f"{self.what}: array '{extra[0]}' feeds no input (inputs: {', '.join(names)})")
        batch = None
        for name, shape in shapes.items():
            shape, axis = tuple(shape), self.axes.get(name, 0)
            got = tuple(self.arrays[name].shape[1:])
            if len(shape) <= axis or got != shape[:axis] + shape[axis + 1:]:
                per = list(shape[:axis] + shape[axis + 1:])
                raise NetcError(f"{self.what}: samples of '{name}' have shape {list(got)}, the input takes {per} per "
                                f"sample ({list(shape)} per batch{', samples along axis 1' if axis else ''})")
            batch = shape[axis] if batch is None else batch
        if self.size < batch:
            raise NetcError(f"{self.what}: {self.size} sample{'s are' if self.size != 1 else ' is'} fewer than one "
                            f"batch of {batch} (arrays {', '.join(map(repr, names))})")
        return batch

    def batches(self, batch: int, seed: int, epoch: int, shuffle: bool = True, pad: bool = False):
        """(batch dict, number of real samples in it) for every batch of one epoch."""
        if shuffle:
            order = torch.randperm(self.size, generator=torch.Generator().manual_seed(seed * 7919 + epoch))
        else:
            order = torch.arange(self.size)
        for i in range(0, self.size, batch):
            idx = order[i:i + batch]
            real = len(idx)
            if real < batch:
                if not pad:
                    return
                idx = torch.cat([idx, idx[:1].repeat(batch - real)])
            yield {k: v[idx].movedim(0, self.axes[k]) if self.axes.get(k) else v[idx]
                   for k, v in self.arrays.items()}, real


def dataset_feeds(data: "Dataset", batch: int, seed: int, steps: int | None = None, epochs: int | None = None):
    """(batch of inputs, epoch from 1) for each step of a run over `data`: `steps` steps, else
    `epochs` passes (default 1), shuffled per epoch from `seed` (Dataset.batches)."""
    n, epoch = 0, 0
    while True:
        for feed, _ in data.batches(batch, seed, epoch):
            if steps is not None and n >= steps:
                return
            n += 1
            yield feed, epoch + 1
        epoch += 1
        if steps is None and epoch >= (epochs or 1):
            return


def fit(trainer: ReferenceTrainer, lr_at, steps: int | None = None, epochs: int | None = None,
        data: Dataset | None = None, inputs: dict | None = None, log=None, grads_out: dict | None = None) -> list:
    """Train: `steps` steps (or `epochs` passes over `data`), the learning rate lr_at(step) (0-based);
    inputs from `data` (shuffled batches), else the fixed `inputs` (None: seeded random ones).
    log(row) after every step; grads_out, when given, receives the first step's gradients.
    Returns the history: one {"step", "epoch", "lr", "loss", <each loss>} per step."""
    history = []
    batch = trainer.data_batch(data) if data is not None else None

    def one(feed, epoch):
        k = trainer.steps
        lr = lr_at(k)
        named = trainer.step(feed, lr)
        losses = {n: float(v) for n, v in trainer.losses(named).items()}
        if grads_out is not None and k == 0:
            grads_out.update({p: g.detach().clone() for p, g in trainer.gradients(named).items()})
        row = {"step": k + 1, "epoch": epoch, "lr": lr, "loss": sum(losses.values()), **(
            {f"loss:{n}": v for n, v in losses.items()} if len(losses) > 1 else {})}
        if row["loss"] != row["loss"]:
            raise NetcError(f"the loss became NaN at step {k + 1} (learning rate {lr:g}): lower --lr")
        history.append(row)
        if log:
            log(row)

    if data is None:
        for _ in range(steps if steps is not None else 1):
            one(inputs, 0)
        return history
    for feed, epoch in dataset_feeds(data, batch, trainer.seed, steps, epochs):
        one(feed, epoch)
    return history


def inference_params(inference: Module, params: dict) -> dict:
    """The parameters an inference program of the same network takes, from a training run's:
    state that inference does not use is left out, and a batch norm trained on batch statistics
    is folded with its running statistics into the inference affine (scale' = scale / sqrt(var +
    eps), shift' = shift - mean * scale')."""
    declared = {p.attrs["sym_name"] for p in inference.params()}
    out = {k: v for k, v in params.items() if k in declared}
    for net in inference.networks():
        for op in net.regions[0].ops:
            d = lookup(op.name)
            refs = {r: ref.name for r, ref in (op.attrs.get("params") or {}).items() if isinstance(ref, SymbolRef)}
            if d is None or not refs:
                continue
            layer = op.attrs.get("name")
            state = {k.rpartition(".")[2]: v for k, v in params.items() if k.startswith(f"{layer}.running_")}
            mine = {r: params[n] for r, n in refs.items() if n in params}
            for role, t in d.inference_params(d.attrs_of(op), mine, state).items():
                out[refs[role]] = t
    return out


STATE_SUFFIXES = (".velocity", ".adam_m", ".adam_v", ".adam_step", ".square_avg", ".sum_sq", ".acc_delta",
                  ".adamax_m", ".adamax_u", ".adamax_step", ".running_mean", ".running_var")


def params_for_inference(inference: Module, given: dict) -> tuple[dict, list]:
    """A parameter file written by training (`netc run --train -o`), made fit for an inference
    program of the same network: batch norms folded with their running statistics
    (inference_params), optimizer state and running statistics left out. Returns (parameters,
    the names left out). Names that are neither declared nor training state stay, so a misspelled
    parameter is still reported."""
    from .io import Arrays, about, source_of
    declared = {p.attrs["sym_name"] for p in inference.params()}
    if all(k in declared for k in given):
        return Arrays(given, source=source_of(given)), []
    with about(given):
        folded = inference_params(inference, given)
    dropped = [k for k in given if k not in declared and k.endswith(STATE_SUFFIXES)]
    kept = {k: v for k, v in given.items() if k not in declared and k not in dropped}
    return Arrays({**folded, **kept}, source=source_of(given)), dropped


def evaluate(inference: Module, params: dict, data: Dataset, network=None, dtype=torch.float64) -> dict:
    """Loss and accuracy of an inference program on every sample of `data` (batches of the
    network's size; the last one padded, the padding not counted). Accuracy: the argmax of each
    SoftmaxLoss's logits against its labels."""
    from .reference import run_reference
    net = network_of(inference, network)
    batch = data.check(net)
    losses = [op for op in layers(net) if lookup(op.name) is not None and lookup(op.name).is_loss]
    soft = classifiers(losses)
    steps = time_steps(net)
    total, right, counted, seen, nll = 0.0, 0, 0, 0, 0.0
    p = inference_params(inference, params)
    for feed, real in data.batches(batch, 0, 0, shuffle=False, pad=True):
        named = run_reference(inference, feed, p, network=net, dtype=dtype, intermediates=True)
        for op in losses:
            # the batch mean of the real samples: the losses are means over the batch
            total += (float(named[layer_name(op)]) * real if real == batch else
                      _partial_loss(op, named, real, batch, steps))
        for op in soft:
            r, n, e = classified_rows(op, named, batch, real, steps)
            right, counted, nll = right + r, counted + n, nll + e
        seen += real
    out = {"samples": seen}
    if losses:
        out["loss"] = total / seen
    if soft:
        out["accuracy"] = right / counted     # per sample; per step (character) of a time-major network
        if steps is not None:                 # the loss may be any scale of it (SINGA's: the sum over steps)
            out["cross_entropy_per_step"] = nll / counted
    return out


def evaluate_rule_metrics(module: Module, params: dict, data: Dataset, network=None, dtype=torch.float64) -> dict:
    """The metrics a learning rule reports (an RBM's reconstruction error) on `data` with the trained
    `params`, as SINGA's test phase of a kCD job (CDWorker::TestOneBatch: every layer's positive phase,
    then the visible layers' reconstruction from a sample of the hidden units, its "Squared Error"):
    the training program's ops but its updates, with the reference executor, over every whole batch of
    `data` in order (SINGA's test_steps count whole batches: a last partial one is left out), batch i
    drawing its samples from seed i. Returns {"samples", "metrics": {name: the mean of its per-batch
    values}}, {} for a program whose rule reports none."""
    net = network_of(module, network)
    names = [n for n, op in _outputs_by_name(net, net.attrs.get("losses") or []).items()
             if not (lookup(op.name) is not None and lookup(op.name).is_loss)]
    if not names:
        return {}
    tr = ReferenceTrainer(module, net, {k: v.detach() for k, v in params.items()}, seed=0, dtype=dtype)
    batch = tr.data_batch(data)
    sums, seen = dict.fromkeys(names, 0.0), 0
    for i, (feed, real) in enumerate(data.batches(batch, 0, 0, shuffle=False, pad=False)):
        named = execute(tr.net, tr.feed(feed, lr=0.0, step_seed=i), tr.params, dtype,
                        only=lambda op: not (lookup(op.name) is not None and lookup(op.name).side_effects))
        for n in names:
            sums[n] += float(named[n])
        seen += real
    batches = seen // batch if batch else 0
    return {"samples": seen, "metrics": {n: s / batches for n, s in sums.items()}} if batches else {"samples": 0}


def _outputs_by_name(net: Operation, names: list) -> dict:
    ops = {layer_name(op): op for op in layers(net)}
    return {n: ops[n] for n in names if n in ops}


def time_steps(net: Operation) -> int | None:
    """T of a time-major network (a data input with batch_axis 1, [T, B, ...]), else None."""
    for op in data_inputs(net):
        shape = op.results[0].type.shape
        if op.attrs.get("batch_axis", 0) == 1 and len(shape) >= 2:
            return int(shape[0])
    return None


def real_part(t: torch.Tensor, batch: int, real: int, steps: int | None) -> torch.Tensor:
    """The part of a batch's value `t` that belongs to its first `real` samples: rows [:real]; in a
    time-major network (T = steps) a sequence's [T, B, ...] the columns [:, :real] and its steps flattened
    step-major, [T*B, ...] (row t*B + b), the rows whose b < real."""
    if steps is None or t.dim() == 0:
        return t[:real]
    if t.dim() >= 2 and tuple(t.shape[:2]) == (steps, batch):
        return t[:, :real]
    if t.shape[0] == steps * batch and steps > 1:
        return t.reshape(steps, batch, *t.shape[1:])[:, :real].reshape(steps * real, *t.shape[1:])
    return t[:real]


def classifiers(losses: list) -> list:
    """The loss ops among `losses` whose accuracy is measured (OpDef.classifier: softmax losses), those that
    read a class per sample (axis 0); a per-step loss over a sequence (with lengths, or labels [T, B]) has no
    per-sample accuracy and is left out."""
    def per_sample(op, d):
        shapes = [v.type.shape for v in op.operands]
        return len(shapes) == 2 and d.label_classes(d.attrs_of(op), shapes)[0] == math.prod(shapes[0][1:])
    return [op for op in losses if lookup(op.name) is not None and lookup(op.name).classifier
            and per_sample(op, lookup(op.name))]


def classified_right(op, named: dict, batch: int, real: int | None = None) -> int:
    """How many of the first `real` (all `batch`) samples a classifier loss `op` classifies right: the
    argmax of its scores (operand 0, [batch, C]) equal to its labels (class indices, or one-hot rows),
    the values read from `named` by layer name."""
    return classified_rows(op, named, batch, batch if real is None else real)[0]


def classified_rows(op, named: dict, batch: int, real: int, steps: int | None = None) -> tuple:
    """(right, counted, cross-entropy): classified_right over the first `real` samples, how many rows it
    counted, and the sum over them of -log softmax(scores)[label]; in a time-major network (T = steps, its
    loss reading [T*B, C] scores step-major: SINGA's rolled char-rnn) every step of them is a row, T * real
    rows."""
    d = lookup(op.name)
    scores = named[layer_name(op.operands[0].owner)]
    labels = named[layer_name(op.operands[d.label_operand].owner)]
    if steps is not None and scores.shape[0] == steps * batch and steps > 1:
        rows = steps * batch
    else:
        rows = batch
    logits = real_part(scores.reshape(rows, -1), batch, real, steps if rows != batch else None)
    n = logits.shape[0]
    if labels.numel() != rows:   # one-hot labels
        labels = labels.reshape(rows, -1).argmax(1)
    labels = real_part(labels.reshape(-1), batch, real, steps if rows != batch else None).long()
    nll = -torch.log_softmax(logits.to(torch.float64), 1).gather(1, labels[:, None]).sum()
    return int((logits.argmax(1) == labels).sum()), n, float(nll)


def _partial_loss(op, named, real, batch: int, steps: int | None = None) -> float:
    """A loss's sum over the first `real` samples of a padded batch (its op's reference on them)."""
    d = lookup(op.name)
    ins = [real_part(named[layer_name(v.owner)], batch, real, steps) for v in op.operands]
    return float(d.reference(d.attrs_of(op), ins, {})) * real


def plot_history(history: list, path: str, title: str = "") -> None:
    """The loss per step (and the learning rate) as PNG/SVG/PDF, with matplotlib."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4.5))
    steps = [r["step"] for r in history]
    ax.plot(steps, [r["loss"] for r in history], label="training loss", lw=1.2)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_yscale("log" if min(r["loss"] for r in history) > 0 else "linear")
    ax.grid(alpha=0.3)
    ax.set_title(title or "training loss")
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
