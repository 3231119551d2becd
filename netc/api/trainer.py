"""netc.train, netc.test and netc.infer: a topology's training program, cost and predictions.

train() compiles the topology's training program -- netc/pipelines.py's training pipeline: the backward
pass (Training.freeze = immutable_parameters) and the optimizer pass (the optimizer object's
options) after the inference pipeline -- once per batch size it meets, and runs it step by step on a
target (netc/api/targets.py): "cpu" by default (the CPU target's generated step over the memory plan's
arenas, f32), "reference" (netc.runtime.train.ReferenceTrainer: every op's reference semantics in f64,
computing on the ParameterSet's own tensors) or "interp" (the compiled kernels under Triton's
interpreter). Whatever the target, a step's updates land in the set's tensors, so a parameter shared by
name with another topology is one tensor that both see; optimizer state and running statistics the
program creates are kept in the set's `state`. test() and infer() run the inference program on the same
targets. Feeding (Feeder), metrics, events and the progress bar are the same on every target.
"""
from __future__ import annotations

import math
import sys
import time

import numpy as np
import torch

from ..ir.query import layer_name, layers, network_outputs
from ..ops import lookup
from ..pipelines import Training
from ..runtime.train import classified_right, classifiers, inference_params
from . import event as ev
from .errors import Error, error, user_errors, user_loc
from .optimizer import SGD, Optimizer, Recorded
from .parameters import ParameterSet
from .sequence import aligned_sequences, check_ids, padded, sample_steps, unpad
from .targets import DEFAULT_TARGET, TARGETS, check_target, forward, forward_layers, training
from .topology import as_topology

class _threads:
    """torch's intra-op threads for the duration of a call (None: leave them). The reference executor runs
    small ops, for which one thread is often much faster than several (no OpenMP hand-offs; on a busy
    machine several threads contend for the cores)."""

    def __init__(self, n, loc):
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
            raise error(f"threads is a positive integer or None, got {n!r}", loc)
        self.n = n

    def __enter__(self):
        if self.n is not None:
            self.before = torch.get_num_threads()
            torch.set_num_threads(self.n)

    def __exit__(self, *exc):
        if self.n is not None:
            torch.set_num_threads(self.before)


def _logits(net) -> list:
    """The values _measure reads besides the losses: each softmax loss's logits (by layer name)."""
    return [layer_name(op.operands[0].owner) for op in classifiers(_loss_ops(net))]


# -- feeding ----------------------------------------------------------------------------------------

class Feeder:
    """Batches of samples -> {data layer name: tensor [B, ...]} (the sample forms: netc.api.reader)."""

    def __init__(self, top, feeding=None, loc=None):
        self.loc = loc
        self.layers = top.data_layers()
        # sequences (netc.api.sequence): the lengths inputs the feeding fills, the sequences read together
        self.lengths_inputs = [x for x in top.layers if x.is_data and x.lengths_of is not None]
        self.mask_inputs = [x for x in top.layers if x.is_data and x.mask_of is not None]
        self.aligned = aligned_sequences(top.layers)
        self.steps, self.lengths = None, {}      # the last batch's T and {sequence data layer: lengths}
        self.names = [x.name for x in self.layers]
        self.explicit = feeding is not None
        if feeding is None:
            self.index = {n: i for i, n in enumerate(self.names)}
        elif isinstance(feeding, dict):
            self.index = dict(feeding)
        elif isinstance(feeding, (list, tuple)):
            self.index = {n: i for i, n in enumerate(feeding) if n is not None}
        else:
            raise error(f"feeding is {{data layer: index}} or a list of data layer names, got {type(feeding).__name__}",
                        loc)
        unknown = [n for n in self.index if n not in self.names]
        if unknown:
            raise error(f"feeding names '{unknown[0]}', which is no data layer of topology '{top.name}' (data layers: "
                        f"{', '.join(self.names)})", loc)
        missing = [n for n in self.names if n not in self.index]
        if missing:
            raise error(f"feeding gives no field for data layer{'s' if len(missing) > 1 else ''} "
                        f"{', '.join(map(repr, missing))}", loc)

    def _field(self, s, name):
        if isinstance(s, dict):
            if name not in s:
                raise error(f"a sample (a dict with keys {', '.join(map(str, s))}) has no '{name}' for data layer "
                            f"'{name}'", self.loc)
            return s[name]
        if len(self.names) == 1 and not self.explicit and not (isinstance(s, tuple) and len(s) == 1):
            return s
        if not isinstance(s, (tuple, list)):
            raise error(f"a sample is a {type(s).__name__}; with {len(self.names)} data layers "
                        f"({', '.join(self.names)}) it is a tuple of one value per layer, or a dict", self.loc)
        if not self.explicit and len(s) != len(self.names):
            raise error(f"a sample has {len(s)} fields and the topology {len(self.names)} data layers "
                        f"({', '.join(self.names)}, in the order they were made); give feeding= to say which "
                        f"field feeds which layer", self.loc)
        i = self.index[name]
        if i >= len(s):
            raise error(f"feeding takes field {i} for '{name}', and the sample has {len(s)}", self.loc)
        return s[i]

    def _columns(self, samples) -> dict:
        """{data layer name: its values, one per sample}: tuples of one length taken apart at once, any other
        form (and any mistake, to be reported) field by field."""
        n = len(self.names)
        if (n > 1 or self.explicit) and samples and all(type(s) is tuple for s in samples):
            width = len(samples[0])
            fits = width == n if not self.explicit else width > max(self.index.values(), default=-1)
            if fits and all(len(s) == width for s in samples):
                fields = list(zip(*samples))
                return {name: list(fields[self.index[name]]) for name in self.names}
        return {name: [self._field(s, name) for s in samples] for name in self.names}

    def __call__(self, samples) -> dict:
        if isinstance(samples, dict):      # {name: array with a sample axis}
            cols = {n: samples[n] for n in self.names if n in samples}
            missing = [n for n in self.names if n not in samples]
            if missing:
                raise error(f"no array for data layer{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}",
                            self.loc)
        else:
            cols = self._columns(samples)
        out = self._sequences(cols)
        for x in self.layers:
            if x.seq is x:
                continue
            col = cols[x.name]
            if x.itype is not None and x.itype.is_sparse and not isinstance(col, np.ndarray):
                col = ones_at(x, col, self.loc)
            if isinstance(col, list) and all(type(v) is np.ndarray for v in col):
                arr = np.stack(col)
            else:
                arr = (col.detach().cpu().numpy() if torch.is_tensor(col) else
                       np.stack([np.asarray(v.detach().cpu() if torch.is_tensor(v) else v) for v in col])
                       if isinstance(col, list) else np.asarray(col))
            want = tuple(x.sample_shape)
            if tuple(arr.shape[1:]) != want:
                if arr.ndim >= 1 and math.prod(arr.shape[1:]) == math.prod(want):
                    arr = arr.reshape((arr.shape[0],) + want)
                else:
                    raise error(f"samples for data layer '{x.name}' have shape {list(arr.shape[1:])}, and it takes "
                                f"{list(want)} per sample", self.loc, [("the data layer is made here", x.loc)])
            if not x.dtype.startswith(("f", "b")):
                if arr.dtype.kind == "f" and not np.array_equal(arr, np.round(arr)):
                    raise error(f"data layer '{x.name}' is {x.dtype}: its samples must hold integers", self.loc)
                arr = arr.astype(np.int64)
            elif arr.dtype.kind not in "fiub":
                raise error(f"samples for data layer '{x.name}' are not numbers ({arr.dtype})", self.loc)
            if x.itype is not None and x.itype.is_index:
                check_ids(x, arr, self.loc)
            out[x.name] = torch.as_tensor(np.ascontiguousarray(arr))
        return out

    def _sequences(self, cols) -> dict:
        """The sequence data layers' tensors [T, B, ...], padded to the batch's longest sequence T, and the
        lengths inputs; sets `steps` (T, None without sequences) and `lengths`."""
        steps = {x.name: sample_steps(x, cols[x.name], self.loc) for x in self.layers if x.seq is x}
        self.lengths = {k: np.array([len(a) for a in v], np.int64) for k, v in steps.items()}
        self.steps = max((len(a) for v in steps.values() for a in v), default=None)
        for a, b, layer in self.aligned:
            if a.name in steps and b.name in steps and not np.array_equal(self.lengths[a.name], self.lengths[b.name]):
                i = int(np.argmax(self.lengths[a.name] != self.lengths[b.name]))
                raise error(f"sample {i}: sequence '{a.name}' has {self.lengths[a.name][i]} steps and '{b.name}' "
                            f"{self.lengths[b.name][i]}, and layer '{layer.name}' reads them step by step", self.loc,
                            [("that layer is made here", layer.loc)])
        out = {}
        for x in self.layers:
            if x.seq is x:
                arr = padded(x, steps[x.name], self.steps)
                if x.itype.is_index:
                    check_ids(x, arr, self.loc, steps=True)
                out[x.name] = torch.as_tensor(arr)
        for n in self.lengths_inputs:
            out[n.name] = torch.as_tensor(self.lengths[n.lengths_of.name])
        for m in self.mask_inputs:         # 1 at each sequence's steps, 0 at its padding: [T, B, 1]
            n = self.lengths[m.mask_of.name]
            out[m.name] = torch.as_tensor((np.arange(self.steps)[:, None] < n[None, :])[..., None].astype(np.float32))
        return out


def ones_at(x, col, loc) -> np.ndarray:
    """A sparse_binary_vector data layer's samples (each the indices of its ones) as [B, dim] 0/1 rows."""
    out = np.zeros((len(col), x.itype.dim), np.float32)
    for i, s in enumerate(col):
        ids = np.asarray(s.detach().cpu() if torch.is_tensor(s) else s).reshape(-1)
        if ids.size and (ids.dtype.kind not in "iu" or ids.min() < 0 or ids.max() >= x.itype.dim):
            raise error(f"sample {i} of data layer '{x.name}' ({x.itype!r}) gives {ids.tolist()}: the indices of its "
                        f"ones are integers in 0 .. {x.itype.dim - 1}", loc, [("the data layer is made here", x.loc)])
        out[i, ids.astype(np.int64)] = 1.0
    return out


def _batches(reader, batch_size, loc):
    """A callable giving lists of samples: the reader's own batches (lists of samples), or its samples in
    lists of batch_size. A list is a batch when no batch size is known, or when its items are samples
    (tuples, dicts, arrays); a list of numbers is one sample."""
    if not callable(reader):
        raise error(f"a reader is a callable that returns an iterator of samples, got {type(reader).__name__}", loc)

    def batched():
        b = []
        for s in reader():
            if isinstance(s, list) and (batch_size is None or _looks_batched(s)):
                if b:
                    yield b
                    b = []
                if s:
                    yield s
                continue
            if batch_size is None:
                raise error("the reader yields single samples: give batch_size= (or batch the reader with "
                            "netc.reader.batch, or give the data layers a batch_size)", loc)
            b.append(s)
            if len(b) == batch_size:
                yield b
                b = []
        if b:
            yield b
    return batched


def _looks_batched(s) -> bool:
    return bool(s) and all(isinstance(x, (tuple, dict, list, np.ndarray)) or torch.is_tensor(x) for x in s)


# -- metrics ----------------------------------------------------------------------------------------

def _loss_ops(net):
    return [op for op in layers(net) if "grad_of" not in op.attrs and lookup(op.name) is not None
            and lookup(op.name).is_loss]


def _measure(net, named, batch) -> tuple:
    """(cost, metrics) of one batch from every value of the step."""
    losses = _loss_ops(net)
    cost = sum(float(named[layer_name(op)]) for op in losses)
    metrics = {}
    soft = classifiers(losses)
    for op in soft:
        acc = classified_right(op, named, batch) / batch
        metrics["accuracy" if len(soft) == 1 else f"accuracy:{layer_name(op)}"] = acc
    if len(losses) > 1:
        for op in losses:
            metrics[f"cost:{layer_name(op)}"] = float(named[layer_name(op)])
    return cost, metrics


class _Mean:
    def __init__(self):
        self.n, self.sums = 0, {}

    def add(self, n, cost, metrics):
        self.n += n
        for k, v in {"cost": cost, **metrics}.items():
            self.sums[k] = self.sums.get(k, 0.0) + v * n

    def result(self):
        r = {k: v / max(self.n, 1) for k, v in self.sums.items()}
        return r.pop("cost", float("nan")), r


# -- the progress bar -------------------------------------------------------------------------------

class _Progress:
    """One line on stderr per pass, redrawn in place: only when stderr is a terminal, and only once a
    train() call has run for half a second (a GAN's one-step calls draw nothing)."""

    def __init__(self, enabled, num_passes):
        self.on = sys.stderr.isatty() if enabled is None else bool(enabled)
        self.wait = 0.5 if enabled is None else 0.0
        self.num_passes, self.total, self.t0, self.drawn = num_passes, None, time.time(), False

    def step(self, pass_id, batch_id, cost, metrics):
        if not self.on or time.time() - self.t0 < self.wait:
            return
        done = batch_id + 1
        if self.total:
            k = min(30, 30 * done // self.total)
            bar = f"[{'#' * k}{'.' * (30 - k)}] {done}/{self.total}"
        else:
            bar = f"batch {done}"
        acc = f"  accuracy {metrics['accuracy']:.3f}" if "accuracy" in metrics else ""
        sys.stderr.write(f"\rpass {pass_id + 1}/{self.num_passes} {bar}  cost {cost:.5f}{acc}  "
                         f"{time.time() - self.t0:.0f}s\x1b[K")
        sys.stderr.flush()
        self.drawn = True

    def end_pass(self, batches):
        self.total = self.total or batches
        if self.drawn:
            sys.stderr.write("\n")
            sys.stderr.flush()
            self.drawn = False


# -- train ------------------------------------------------------------------------------------------

def _handlers(event_handler, loc):
    if event_handler is None:
        return []
    hs = list(event_handler) if isinstance(event_handler, (list, tuple)) else [event_handler]
    for h in hs:
        if not callable(h):
            raise error(f"an event handler is a callable taking an event, got {type(h).__name__}", loc)
    return hs


def _given(module, parameters: ParameterSet, top, loc) -> dict:
    """The set's tensors for every parameter (and existing state) the program declares; an Error naming
    the parameters the set does not have."""
    declared = {p.attrs["sym_name"]: p for p in module.params()}
    owners = [n for n, p in declared.items() if "state" not in p.attrs and "share_from" not in p.attrs]
    missing = [n for n in owners if n not in parameters]
    if missing:
        raise error(f"the ParameterSet has no parameter{'s' if len(missing) > 1 else ''} "
                    f"{', '.join(map(repr, missing[:6]))}{' ...' if len(missing) > 6 else ''} of topology "
                    f"'{top.name}': make it with netc.parameters.create([...]) from every topology you train or "
                    f"infer with", loc)
    return parameters.tensors(declared)


def train(topology, parameters, reader, optimizer: Optimizer | None = None, event_handler=None,
          immutable_parameters=(), num_passes: int = 1, target: str = DEFAULT_TARGET, batch_size: int | None = None,
          feeding=None, seed: int = 0, progress: bool | None = None, threads: int | None = None,
          observe=None) -> dict:
    """Train `topology` (a Topology or its cost layer(s)) on the batches of `reader` for `num_passes`
    passes, updating `parameters` in place. immutable_parameters: parameter names, layer names or
    fnmatch patterns ("d_*") that do not change. threads: torch's threads while training (None: as set).
    observe: a callable observe(values, n) given each batch's values ({layer name: tensor}, the fed
    inputs and every layer of the step) before its EndIteration event (evaluators' statistics).
    Returns {"cost", "metrics", "iterations"} of the last pass (or of the iterations done). Events:
    netc.event."""
    loc = user_loc()
    with _threads(threads, loc):
        return _train(loc, topology, parameters, reader, optimizer, event_handler, immutable_parameters, num_passes,
                      target, batch_size, feeding, seed, progress, observe)


def _train(loc, topology, parameters, reader, optimizer, event_handler, immutable_parameters, num_passes, target,
           batch_size, feeding, seed, progress, observe=None):
    top = as_topology(topology)
    check_target(target, "training", loc)
    if not isinstance(parameters, ParameterSet):
        raise error(f"parameters: expected a ParameterSet (netc.parameters.create), got {type(parameters).__name__}",
                    loc)
    if not isinstance(num_passes, int) or isinstance(num_passes, bool) or num_passes < 0:
        raise error(f"num_passes is a non-negative integer, got {num_passes!r}", loc)
    if optimizer is None:      # a file's own optimizer (a SINGA job's updater), else plain SGD
        recorded = top.module_attrs.get("optimizer")
        optimizer = Recorded(recorded) if recorded else SGD()
    if not isinstance(optimizer, Optimizer):
        raise error(f"optimizer: expected a netc.optimizer object (SGD, Adam, ...), got {type(optimizer).__name__}",
                    loc)
    freeze = [immutable_parameters] if isinstance(immutable_parameters, str) else sorted(immutable_parameters or ())
    handlers = _handlers(event_handler, loc)
    feeder = Feeder(top, feeding, loc)
    batches = _batches(reader, batch_size or top.batch_size, loc)
    programs: dict = {}

    def program(n, t):
        if (n, t) not in programs:
            with user_errors(loc):
                module = top.module(n, steps=t, training=Training(
                    freeze=tuple(freeze), freeze_name="immutable_parameters",
                    no_loss_hint="train a cost (netc.layer.softmax_loss, euclidean, rank_cost), not its outputs",
                    optimizer=optimizer.batch_options(n)))
                net = next(x for x in module.networks() if "gradients" in x.attrs)
                given = _given(module, parameters, top, loc)
            programs[n, t] = training(target, module, net, parameters, given, seed, _captures(net, observe), loc)
        return programs[n, t]

    def send(e):
        for h in handlers:
            h(e)

    bar = _Progress(progress, num_passes)
    iterations, passes_done, last = 0, 0, None
    send(ev.BeginTraining(num_passes))
    try:
        for pass_id in range(num_passes):
            send(ev.BeginPass(pass_id))
            mean = _Mean()
            batch_id = -1
            for batch_id, samples in enumerate(batches()):
                feed = feeder(samples)
                n = len(samples)
                send(ev.BeginIteration(pass_id, batch_id))
                tr = program(n, feeder.steps)
                lr = optimizer.batch_learning_rate(n)
                with user_errors(loc):
                    named = tr.step(feed, lr, seed * 1_000_003 + optimizer.steps)
                optimizer.steps += 1
                iterations += 1
                cost, metrics = _measure(tr.net, named, n)
                if cost != cost:
                    raise error(f"the cost became NaN at pass {pass_id}, batch {batch_id} (learning rate {lr:g}): "
                                f"lower the learning rate", loc)
                mean.add(n, cost, metrics)
                if observe is not None:
                    observe({**feed, **named}, n)
                bar.step(pass_id, batch_id, cost, metrics)
                last = {"cost": cost, "metrics": metrics}
                send(ev.EndIteration(pass_id, batch_id, cost, metrics, n))
            bar.end_pass(batch_id + 1)
            cost, metrics = mean.result()
            passes_done += 1
            last = {"cost": cost, "metrics": metrics}
            send(ev.EndPass(pass_id, cost, metrics))
    except ev.StopTraining:
        bar.end_pass(0)
    send(ev.EndTraining(passes_done, iterations))
    return {**(last or {"cost": float("nan"), "metrics": {}}), "iterations": iterations}


# -- test and infer ---------------------------------------------------------------------------------

def _captures(net, observe) -> tuple:
    """The values a compiled target's training step returns besides the outputs: each softmax loss's logits
    and what `observe` reads (its `layers` attribute, else every forward layer)."""
    if observe is None:
        return tuple(_logits(net))
    seen = getattr(observe, "layers", None)
    return tuple(dict.fromkeys(_logits(net) + list(forward_layers(net) if seen is None else seen)))


class TestResult:
    """netc.test's answer: the mean cost and metrics over every sample of the reader."""

    __test__ = False      # (not a pytest test class)

    def __init__(self, cost, metrics, samples):
        self.cost, self.metrics, self.samples = cost, metrics, samples

    def __repr__(self):
        m = "".join(f", {k} {v:.4f}" for k, v in self.metrics.items())
        return f"<TestResult cost {self.cost:.6f}{m} over {self.samples} samples>"


def _inference(top, parameters, n, loc, steps=None):
    with user_errors(loc):
        module = top.module(n, steps=steps)
    given = _given(module, parameters, top, loc)
    merged = {**given, **{k: v for k, v in parameters.state.items()}}
    return module, inference_params(module, merged)


def test(topology, parameters, reader, batch_size: int | None = None, feeding=None, target: str = DEFAULT_TARGET,
         threads: int | None = None, observe=None) -> TestResult:
    """The cost and metrics (accuracy for softmax losses) of `topology` on every sample of `reader`,
    with inference semantics (dropout off, batch norm with its running statistics). observe: as
    train's, given each batch's values (its `layers` attribute, if any, names layers to keep)."""
    loc = user_loc()
    with _threads(threads, loc):
        return _test(loc, topology, parameters, reader, batch_size, feeding, target, observe)


def _test(loc, topology, parameters, reader, batch_size, feeding, target, observe=None) -> TestResult:
    top = as_topology(topology)
    check_target(target, "testing", loc)
    feeder = Feeder(top, feeding, loc)
    mean = _Mean()
    cache: dict = {}
    for samples in _batches(reader, batch_size or top.batch_size, loc)():
        n = len(samples)
        feed = feeder(samples)
        key = (n, feeder.steps)
        if key not in cache:
            cache[key] = _inference(top, parameters, n, loc, feeder.steps)
        module, params = cache[key]
        net = module.networks()[0]
        capture = tuple(_logits(net)) + (tuple(getattr(observe, "layers", ())) if observe is not None else ())
        with user_errors(loc):
            named = forward(target, module, net, feed, params, parameters.dtype, capture, cache, key)
        cost, metrics = _measure(net, named, n)
        mean.add(n, cost, metrics)
        if observe is not None:
            observe({**feed, **named}, n)
    cost, metrics = mean.result()
    return TestResult(cost, metrics, mean.n)


test.__test__ = False     # (pytest: not a test function when imported into a test module)


def infer(output_layer, parameters, input, feeding=None, batch_size: int | None = None, target: str = DEFAULT_TARGET,
          threads: int | None = None):
    """The outputs of `output_layer` (a layer, a list of layers or a Topology) for `input`: a list of
    samples (the forms of netc.api.reader) or {data layer: array with a sample axis}. Returns a numpy
    array [S, ...] for one output, else {layer name: array}; computed in batches of batch_size (default:
    all samples at once, at most 1024). A sequence output is a list of S arrays, each sample's valid
    steps [length, ...]."""
    loc = user_loc()
    with _threads(threads, loc):
        return _infer(loc, output_layer, parameters, input, feeding, batch_size, target)


def _infer(loc, output_layer, parameters, input, feeding, batch_size, target):
    top = as_topology(output_layer)
    check_target(target, "inference", loc)
    feeder = Feeder(top, feeding, loc)
    if isinstance(input, dict) and top.sequences():     # padded per batch: as samples
        cols = {k: list(v) for k, v in input.items()}
        input = [{k: c[j] for k, c in cols.items()} for j in range(min(map(len, cols.values()), default=0))]
    if isinstance(input, dict):
        feed_all = feeder(input)
        total = len(next(iter(feed_all.values()))) if feed_all else 0
    else:
        samples = list(input)
        total = len(samples)
    if total == 0:
        raise error("infer needs at least one sample", loc)
    step = batch_size or min(total, 1024)
    cache: dict = {}
    chunks: dict = {}
    for i in range(0, total, step):
        feed = ({k: v[i:i + step] for k, v in feed_all.items()} if isinstance(input, dict)
                else feeder(samples[i:i + step]))
        n = min(step, total - i)
        key = (n, feeder.steps)
        if key not in cache:
            cache[key] = _inference(top, parameters, n, loc, feeder.steps)
        module, params = cache[key]
        net = module.networks()[0]
        with user_errors(loc):
            outs = forward(target, module, net, feed, params, parameters.dtype, (), cache, key)
        for op in network_outputs(net):
            y, seq = outs[layer_name(op)], top.layer(layer_name(op)).seq
            if seq is not None:      # a sequence: each sample's valid steps
                y = unpad(y.detach().cpu().numpy(), feeder.lengths[seq.name])
            chunks.setdefault(layer_name(op), []).append((n, y))
    result = {}
    for name, parts in chunks.items():
        if isinstance(parts[0][1], list):
            result[name] = [a for _, p in parts for a in p]
        elif parts[0][1].dim() == 0:       # a scalar (a loss): the sample-weighted mean
            result[name] = np.asarray(sum(float(t) * n for n, t in parts) / total)
        else:
            result[name] = torch.cat([t for _, t in parts]).detach().cpu().numpy()
    names = [o.name for o in top.outputs]
    return result[names[0]] if len(names) == 1 else {n: result[n] for n in names}


__all__ = ["train", "test", "infer", "Feeder", "TestResult", "TARGETS"]
