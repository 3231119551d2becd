"""Events netc.train sends to its event_handler, in this order:

    BeginTraining
      BeginPass(pass_id)                                   per pass over the reader
        BeginIteration(pass_id, batch_id)                  per batch
        EndIteration(pass_id, batch_id, cost, metrics, batch_size)
      EndPass(pass_id, cost, metrics)                      only when the pass ended: the reader's
                                                           iterator is exhausted
    EndTraining(passes, iterations)

A pass is one call of the reader and ends when the iterator it returned is exhausted; that is how a
reader marks the end of a pass (an endless reader never ends one: stop it with netc.reader.firstn, or
raise StopTraining from a handler, after which the pass in progress gets no EndPass). `cost` is the
sum of the topology's losses on the batch (each a mean over the batch), `metrics` a dict: `accuracy`
for every softmax loss (the argmax of its logits against its labels; with several losses
`accuracy:<loss layer>`), and EndPass's are the sample-weighted means over the pass.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class BeginTraining:
    num_passes: int


@dataclass
class EndTraining:
    passes: int          # passes that ended (EndPass sent)
    iterations: int


@dataclass
class BeginPass:
    pass_id: int


@dataclass
class EndPass:
    pass_id: int
    cost: float
    metrics: dict = field(default_factory=dict)


@dataclass
class BeginIteration:
    pass_id: int
    batch_id: int


@dataclass
class EndIteration:
    pass_id: int
    batch_id: int
    cost: float
    metrics: dict = field(default_factory=dict)
    batch_size: int = 0


class StopTraining(Exception):
    """Raised by an event handler: training ends after the current iteration (EndTraining is still sent)."""


__all__ = ["BeginTraining", "EndTraining", "BeginPass", "EndPass", "BeginIteration", "EndIteration", "StopTraining"]
