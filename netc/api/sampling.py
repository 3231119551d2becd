"""Sampling from a trained sequence model written with the API (a char-rnn: ids -> ... -> a recurrent layer ->
fc at every step -> classification_cost): netc.sample draws ids (or characters of a vocabulary) one step at
a time, the recurrent layers' state carried from step to step -- netc/runtime/sample.py's Sampler over the
topology written as .nd at one step (`to_nd(batch, steps=1)`), the state inputs added there."""
from __future__ import annotations

from .topology import Topology


def sample(cost, parameters, prime, length: int = 200, temperature: float = 1.0, seed: int = 0, batch: int = 1,
           vocab: str | None = None, loss: str | None = None):
    """`batch` samples of `length` ids drawn after `prime` (ids; or, with `vocab` -- the characters in id
    order, SINGA's vocab.txt as a string -- text, returned as text): each step's scores (the classifier
    loss's operand in `cost`, a layer or a Topology) divided by `temperature` (0: the most likely id),
    softmax, one draw (seeded by `seed`) fed back as the next step's input. One sample: a list (or a
    string); several: a list of them."""
    from ..runtime.sample import decode, encode, load_sampler
    top = cost if isinstance(cost, Topology) else Topology(cost)
    text = top.to_nd(batch=batch, steps=1)
    params = {k: parameters[k] for k in parameters}
    sampler = load_sampler(f"<{top.name}: sampling>", params, batch=batch, loss=loss, temperature=temperature,
                           seed=seed, text=text)
    if vocab is not None:
        out = [decode(s, vocab) for s in sampler.sample(length, encode(prime, vocab, sampler.classes))]
    else:
        out = sampler.sample(length, [int(i) for i in prime])
    return out[0] if batch == 1 else out
