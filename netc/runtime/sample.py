"""Sampling from a trained sequence model (SINGA's char-rnn): the network re-timed to one step, run on the
reference executor with its recurrent state carried from call to call, a class drawn from each step's
softmax (with a temperature) and fed back as the next step's input.

step_module() turns a freshly loaded module (layers linked by name, before shape inference) into that
one-step network: the layers the loss's scores depend on (the loss, its labels and whatever only they
read are dropped), the one sequence of ids they read, [T, B] (time-major, batch_axis 1), given [1, b];
every recurrent layer without an initial state (OpDef.state_operands) gets one as a new input
'<layer>.h0' (and '<layer>.c0' for a second: an Lstm's) [b, hidden], which ReferenceExecutor's carry_state
feeds from the previous call's final state (OpDef.final_state); a Reshape to [T*B, ...], [T, B, ...] or
[T, -1, ...] becomes [b, ...], [1, b, ...] or [1, -1, ...] ([-1, F] stays: SINGA's rolled import,
frontend/singa/rolled.py, and the API's fc at every step write these). Anything else that fixes T or B is
refused, located.

Sampler runs it: prime() feeds given ids one step at a time, sample(n) draws n more. Running T = 1 steps
this way equals one run over the T steps (the state between calls is the state between steps;
tests/test_char_rnn.py checks it). Vocabulary files are SINGA's vocab.txt (CharRNNInputLayer): the
characters one after another, an id a character's position; ids past the file's characters (char_rnn_data's
'other' id) print as U+FFFD.
"""
from __future__ import annotations

import torch

from ..diagnostics import NetcError
from ..ir.core import UNRANKED, Operation
from ..ops import lookup

STATE_NAMES = ("h0", "c0")     # the recurrent ops' names for their initial-state operands
OTHER = "\ufffd"               # how an id without a character in the vocabulary prints


def _scores_layer(net: Operation, loss_name: str | None) -> tuple:
    """(the loss op, the name of the layer holding its scores) of the network's classifier loss."""
    losses = [op for op in net.regions[0].ops if getattr(lookup(op.name), "is_loss", False)
              and getattr(lookup(op.name), "classifier", False)]
    if loss_name is not None:
        losses = [op for op in losses if op.attrs.get("name") == loss_name]
    if len(losses) != 1:
        what = f"no classifier loss named '{loss_name}'" if loss_name else (
            "no classifier loss (a SoftmaxLoss over the per-step scores)" if not losses else
            f"{len(losses)} classifier losses ({', '.join(op.attrs.get('name') for op in losses)}): name one")
        raise NetcError(f"sampling needs the network's scores: network '{net.attrs.get('sym_name')}' has {what}",
                        net.loc)
    return losses[0], losses[0].attrs["parents"][0]


def _ancestors(ops: dict, name: str) -> set:
    seen, todo = set(), [name]
    while todo:
        n = todo.pop()
        if n in seen or n not in ops:
            continue
        seen.add(n)
        todo.extend(ops[n].attrs.get("parents") or [])
    return seen


def _retime_shape(op: Operation, t: int, b: int, batch: int) -> None:
    shape = list(op.attrs["output_shape"])
    if len(shape) >= 2 and shape[0] == t and shape[1] in (b, -1):     # [T, B, ...] or [T, -1, ...]
        op.attrs["output_shape"] = [1, batch if shape[1] == b else -1] + shape[2:]
    elif shape and shape[0] == t * b:                                  # [T*B, ...]
        op.attrs["output_shape"] = [batch] + shape[1:]
    elif -1 in shape and not {t, b, t * b} & set(shape):               # [-1, F]: sized by its input
        return
    else:
        raise NetcError(f"layer '{op.attrs.get('name')}' reshapes to {shape}, which fixes neither [T*B, ...] nor "
                        f"[T, B, ...] (T = {t}, B = {b}): it cannot run one step at a time", op.attr_loc("output_shape"))


def _state_inputs(op: Operation, batch: int) -> list:
    """New inputs giving a recurrent layer the initial states it lacks, [batch, hidden] each."""
    d = lookup(op.name)
    have = len(op.attrs.get("parents") or [])
    hidden = op.attrs.get("dim_hidden", op.attrs.get("size"))
    new = []
    for k, i in enumerate(d.state_operands):
        if i < have:
            continue
        if i != have or hidden is None:
            raise NetcError(f"layer '{op.attrs.get('name')}': cannot give it an initial state to carry", op.loc)
        name = f"{op.attrs['name']}.{STATE_NAMES[k] if k < len(STATE_NAMES) else f'state{k}'}"
        new.append(Operation("netc.input", result_types=[UNRANKED], loc=op.loc,
                             attrs={"name": name, "shape": [batch, int(hidden)], "dtype": "f32"}))
        op.attrs["parents"] = list(op.attrs.get("parents") or []) + [name]
        have += 1
    return new


def step_module(module, network: str | None = None, batch: int = 1, loss: str | None = None) -> tuple:
    """Re-time a freshly loaded module's network to one step of `batch` sequences, in place (see the module
    docstring). Returns (module, ids input name, scores layer name, [state input names])."""
    if batch < 1:
        raise NetcError(f"the sampling batch must be positive, got {batch}")
    nets = module.networks()
    net = nets[0] if network is None else next((n for n in nets if n.attrs.get("sym_name") == network), None)
    if net is None:
        raise NetcError(f"no network '{network}' (networks: {', '.join(n.attrs.get('sym_name') for n in nets)})")
    ops = {op.attrs.get("name"): op for op in net.regions[0].ops if op.attrs.get("name")}
    _, scores = _scores_layer(net, loss)
    keep = _ancestors(ops, scores)
    inputs = [ops[n] for n in keep if ops[n].name == "netc.input"]
    seqs = [op for op in inputs if op.attrs.get("batch_axis") == 1 and len(op.attrs.get("shape") or []) == 2
            and str(op.attrs.get("dtype", "")).startswith("i")]
    if len(seqs) != 1 or len(inputs) != 1:
        raise NetcError(f"sampling feeds one sequence of ids [T, B] (time-major, batch_axis 1) back into the network; "
                        f"its scores '{scores}' read the inputs {', '.join(sorted(o.attrs['name'] for o in inputs))}",
                        (seqs or inputs or [net])[0].loc)
    ids = seqs[0]
    t, b = (int(v) for v in ids.attrs["shape"])
    body, states = [], []
    for op in net.regions[0].ops:
        name = op.attrs.get("name")
        if name is not None and name not in keep:
            continue
        if op.name == "netc.output":        # the scores are the one output
            op.attrs["parents"] = [scores]
        if op is ids:
            op.attrs["shape"] = [1, batch]
        elif "output_shape" in op.attrs:
            _retime_shape(op, t, b, batch)
        if name is not None and lookup(op.name) is not None and lookup(op.name).state_operands:
            new = _state_inputs(op, batch)
            body.extend(new)
            states.extend(o.attrs["name"] for o in new)
        body.append(op)
    net.regions[0].block.set_ops(body)
    return module, ids.attrs["name"], scores, states


def read_vocab(path: str) -> str:
    """SINGA's vocab.txt: the characters one after another (read as UTF-8, newlines kept)."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read()
    except OSError as e:
        raise NetcError(f"cannot read the vocabulary {path}: {e.strerror}") from None


def encode(text: str, vocab: str, classes: int) -> list:
    """Ids of `text`'s characters: the position in `vocab`; a character not in it is the 'other' id
    len(vocab) when the network has one (classes > len(vocab)), else an error."""
    index = {}
    for i, c in enumerate(vocab):
        index.setdefault(c, i)
    out = []
    for c in text:
        if c not in index and classes <= len(vocab):
            raise NetcError(f"the character {c!r} is not in the vocabulary, and the network has no 'other' id")
        out.append(index.get(c, len(vocab)))
    return out


def decode(ids, vocab: str) -> str:
    """The characters of ids; an id without one in `vocab` (the 'other' id) as U+FFFD."""
    return "".join(vocab[i] if i < len(vocab) else OTHER for i in ids)


class Sampler:
    """One-step runs of a step_module() network with carried state. `params`: trained parameters by name
    (those the network uses; others are ignored). temperature scales the scores before the softmax (0: the
    most likely class every step); `seed` seeds the draws."""

    def __init__(self, module, ids: str, scores: str, params: dict, network=None, dtype=torch.float64,
                 temperature: float = 1.0, seed: int = 0):
        from .reference import ReferenceExecutor
        if temperature < 0:
            raise NetcError(f"the temperature must be 0 or more, got {temperature}")
        self.ids, self.scores, self.temperature = ids, scores, float(temperature)
        self.executor = ReferenceExecutor(module, network, seed=seed, dtype=dtype, carry_state=True)
        used = set(self.executor.params)
        missing = sorted(used - set(params))
        if missing:
            raise NetcError(f"the parameters lack {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''} "
                            f"(give the trained ones: netc run --train -o P.npz writes them)")
        self.executor.set_params({k: v for k, v in params.items() if k in used})
        shape = next(op for op in self.executor.net.regions[0].ops if op.attrs.get("name") == ids).results[0].type.shape
        self.batch = int(shape[1])
        self.generator = torch.Generator().manual_seed(seed)

    @property
    def classes(self) -> int:
        """How many classes a step's scores hold (the ids the network predicts)."""
        op = next(op for op in self.executor.net.regions[0].ops if op.attrs.get("name") == self.scores)
        return int(op.results[0].type.shape[-1])

    def step(self, ids) -> torch.Tensor:
        """Feed one id per sequence ([batch]); the scores of the next one, [batch, classes] (float64)."""
        x = torch.as_tensor(ids, dtype=torch.int32).reshape(1, self.batch)
        out = self.executor.run({self.ids: x})
        if self.scores not in out:
            raise NetcError(f"layer '{self.scores}' is no output of the one-step network")
        return out[self.scores].reshape(self.batch, -1).to(torch.float64)

    def draw(self, scores: torch.Tensor) -> torch.Tensor:
        """A class per row of scores: the argmax at temperature 0, else a draw from softmax(scores / T)."""
        if self.temperature == 0:
            return scores.argmax(1)
        p = torch.softmax(scores / self.temperature, dim=1)
        return torch.multinomial(p, 1, generator=self.generator)[:, 0]

    def reset(self) -> None:
        self.executor.reset_state()

    def sample(self, n: int, prime: list) -> list:
        """[batch] lists of n drawn ids each, after feeding `prime` (ids, at least one; every sequence of the
        batch starts from the same prime) one step at a time."""
        if not prime:
            raise NetcError("sampling needs at least one character (or id) to start from")
        if n < 0:
            raise NetcError(f"the number of characters to sample must be 0 or more, got {n}")
        scores = None
        for i in prime:
            scores = self.step([i] * self.batch)
        out = [[] for _ in range(self.batch)]
        for k in range(n):
            nxt = self.draw(scores)
            for j, v in enumerate(nxt.tolist()):
                out[j].append(v)
            if k + 1 < n:
                scores = self.step(nxt)
        return out


def load_sampler(path: str, params: dict, network=None, batch: int = 1, loss=None, dtype=torch.float64,
                 temperature: float = 1.0, seed: int = 0, options: dict | None = None, diag=None,
                 text: str | None = None) -> Sampler:
    """A Sampler for the network in `path` (any file netc reads; or `text`, the source itself, read as
    `path`) with trained `params`."""
    from ..diagnostics import DiagnosticEngine
    from ..frontend import load, load_text
    from ..pipelines import Options, inference
    diag = diag or DiagnosticEngine()
    module = load(path, diag, options=options) if text is None else load_text(text, path, diag, options=options)
    module, ids, scores, _ = step_module(module, network, batch, loss)
    inference(module, Options(), diag)
    if diag.has_errors():
        raise NetcError([d for d in diag.diagnostics if d.severity == "error"])
    return Sampler(module, ids, scores, params, network, dtype, temperature, seed)


def sample_text(path: str, params_path: str, vocab_path: str | None = None, prime: str | None = None,
                length: int = 500, temperature: float = 1.0, seed: int = 0, batch: int = 1, network=None,
                loss=None, dtype=torch.float64, options: dict | None = None) -> list:
    """`netc sample`: `batch` texts, each `prime` (its characters fed first; default a newline) and the
    `length` characters drawn after it from the network in `path` with the trained parameters in
    `params_path`. Without a vocabulary (SINGA's vocab.txt) the prime is ids separated by spaces or commas
    and the result lists ids."""
    from .params import read_params
    params = read_params(params_path, "--params")
    sampler = load_sampler(path, params, network, batch, loss, dtype, temperature, seed, options)
    classes = sampler.classes
    if vocab_path is not None:
        vocab = read_vocab(vocab_path)
        if len(vocab) > classes:
            raise NetcError(f"the vocabulary {vocab_path} has {len(vocab)} characters, more than the network's "
                            f"{classes} classes")
        prime = "\n" if prime is None else prime
        return [prime + decode(s, vocab) for s in sampler.sample(length, encode(prime, vocab, classes))]
    try:
        ids = [int(v) for v in (prime or "0").replace(",", " ").split()]
    except ValueError:
        raise NetcError(f"without --vocab, --prime is ids separated by spaces or commas, got {prime!r}") from None
    bad = [i for i in ids if not 0 <= i < classes]
    if bad:
        raise NetcError(f"--prime: the id {bad[0]} is outside the network's classes 0 to {classes - 1}")
    return [" ".join(map(str, ids + s)) for s in sampler.sample(length, ids)]
