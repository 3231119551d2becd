"""Training a compiled training library (`netc compile --train`, runtime.native.Net) step by step,
as `netc run NET.so --train` does: LibraryTrainer gives a library the trainer protocol of
runtime.train.fit and interp.compare_step (feed, step, losses, params), and training_reference
rebuilds, from the source and options the manifest records, the training program the library was
compiled from, for the float64 reference to check each step against (--compare).

The library computes on the GPU; what a step takes (inputs at the compiled batch, the learning rate,
the dropout seed) and the random inputs it draws without any are the reference executor's, so a
library and `netc run FILE --train` started from the same parameters and seed take the same steps."""
from __future__ import annotations

import torch

from ..diagnostics import NetcError
from .native import Net, NetcInputError, source_of
from .reference import feed_tensor, random_float_input, random_ids, random_labels


class LibraryTrainer:
    """A training library as a trainer: step() runs netc_train_step and returns the losses read from
    the arena; `params` reads the parameters and optimizer state back (host copies). The library
    does not return its gradients (gradients() is None): they show in the parameters after the update."""

    def __init__(self, net: Net, seed: int = 0):
        if not net.training:
            raise NetcInputError(f"'{net.path}' was compiled for inference only: compile it with `netc compile "
                                 f"--train` to train it")
        self.lib, self.seed, self.steps = net, seed, 0
        self.name = net.training.get("network") or net.network
        self.optimizer = dict(net.training.get("optimizer") or {})
        self.input_shapes = {s.name: tuple(s.shape) for s in net.train_inputs}

    @property
    def params(self) -> dict:
        return self.lib.get_params()

    def data_batch(self, data) -> int:
        """fit's check of a Dataset against the training step's inputs: the compiled batch."""
        return data.check_shapes(self.input_shapes, self.name)

    def random_inputs(self) -> dict:
        """The reference executor's random inputs of the training step (runtime.reference)."""
        out = {}
        for s in self.lib.train_inputs:
            if s.classes is not None:
                out[s.name] = random_labels(s.name, s.shape, s.classes, self.seed, s.dtype)
            elif s.rows is not None:
                out[s.name] = random_ids(s.name, s.shape, s.rows, self.seed, s.dtype)
            elif s.dtype.is_floating_point:
                out[s.name] = random_float_input(s.name, s.shape, self.seed, torch.float64)
            else:
                raise NetcInputError(f"input '{s.name}' of the training step is {s.dtype_name}: random integer "
                                     f"inputs need the network's source (what the integers mean); give --inputs or "
                                     f"--data")
        return out

    def feed(self, inputs: dict | None) -> dict:
        """The step's inputs on the library's device in its dtypes (None: the random ones), checked as
        the reference executor checks them (shape; integers for integer inputs)."""
        xs = self.random_inputs() if inputs is None else inputs
        dev = self.lib.device if self.lib.device is not None else "cpu"
        out = {}
        for s in self.lib.train_inputs:
            t = xs.get(s.name)
            if t is None:
                continue    # train_step names what is missing
            out[s.name] = feed_tensor(t, s.shape, s.dtype, f"input '{s.name}'", dev).contiguous()
        out.update({k: v for k, v in xs.items() if k not in out})   # unknown names: train_step says so
        return out

    def step(self, inputs: dict | None = None, lr: float | None = None, step_seed: int | None = None) -> dict:
        if lr is None:
            raise NetcError("the training step needs a learning rate")
        seed = (self.seed * 1_000_003 + self.steps) if step_seed is None else step_seed   # as ReferenceTrainer
        total = self.lib.train_step(self.feed(inputs), float(lr), seed=int(seed))
        self.steps += 1
        return self._losses(total)

    def _losses(self, total: float) -> dict:
        """Each loss of the step by name, read from the arena (its manifest offset); the sum is what
        netc_train_step returned."""
        losses = self.lib.training.get("losses") or []
        if len(losses) == 1:
            return {losses[0]["name"]: torch.tensor(total, dtype=torch.float64)}
        arena = self.lib.arena()
        return {d["name"]: arena[d["offset"]:d["offset"] + 4].cpu().view(torch.float32)[0].double()
                for d in losses}

    def losses(self, named: dict) -> dict:
        return named

    def gradients(self, named: dict):
        return None


def training_reference(net: Net, source: str | None = None):
    """(module, network): the training program `net` was compiled from -- its source (the manifest's,
    or `source`) through the default pipeline and the backward and optimizer passes with the options
    `netc compile --train` recorded -- for the reference executor."""
    import os

    from ..diagnostics import DiagnosticEngine
    from ..frontend import load as load_source
    from ..pipelines import Options, Training, training
    rec = net.manifest.get("source") or {}
    so = os.path.basename(net.path)
    options = rec.get("training")
    if options is None:
        raise NetcInputError(f"--compare --train needs the options '{so}' was compiled with (loss, optimizer, frozen "
                             f"parameters), which a library built by an older netc does not record: recompile it")
    path = source_of(net, source)
    diag = DiagnosticEngine()
    module = load_source(path, diag, rec.get("batch") or 1, options={"singa_version": rec.get("singa_version"),
                                                                            "sizes": rec.get("sizes")})
    if rec.get("rescaled_batch"):   # compiled at `netc compile --batch B`: every input rescaled to B
        from .scale import scale_inputs
        scale_inputs(module, batch=rec["rescaled_batch"])
    training(module, Options(phase="train", opaque_as_identity=bool(options.get("opaque_as_identity")),
                             training=Training.from_record(options)), diag)
    nets = [n for n in module.networks() if "gradients" in n.attrs]
    name = net.training.get("network") or net.network
    match = [n for n in nets if n.attrs.get("sym_name") == name]
    if not match:
        raise NetcInputError(f"--compare: the training program of '{path}' has no network '{name}' with a loss: is it "
                             f"the source of '{so}'?")
    return module, match[0]
