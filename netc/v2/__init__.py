"""netc.v2: PaddlePaddle v2's Python API on netc -- `import netc.v2 as paddle` and a v2 program runs as
written (docs/v2.md): PaddlePaddle's names and arguments, and its semantics where they differ from
netc's own API (costs summed over the batch, square_error_cost's formula, default initial values and
activations, learning rates as PaddlePaddle's), built on netc.api (the same layers, passes and
executors; no second engine).

Modules: layer, activation, attr, data_type, pooling, networks, optimizer (ModelAverage: netc.v2.average),
trainer, event, evaluator, parameters, topology, reader, dataset (uci_housing, mnist, cifar, imikolov, imdb,
movielens); functions init, batch, infer. Sequences and ids (embedding, lstmemory, grumemory, sequence_conv_pool,
...): netc.v2.seqlayer. A PaddlePaddle v2 name netc.v2 does not have is one located error naming it
(netc.v2.names); importing netc.v2 makes an uncaught netc error print as that diagnostic alone."""
from __future__ import annotations

from ..api.errors import error, user_loc
from . import activation, attr, data_type, dataset, evaluator, event, layer, networks  # noqa: F401
from . import optimizer, parameters, pooling  # noqa: F401
from . import reader, topology, trainer  # noqa: F401
from .inference import infer  # noqa: F401
from .minibatch import batch  # noqa: F401
from .names import install_report, missing_names


def init(use_gpu=False, trainer_count=1, **kwargs):
    """PaddlePaddle's init: trainer_count is the CPU threads netc.v2 trains and infers with; use_gpu is
    noted (netc.v2 runs on netc's reference executor, on the CPU); other flags are accepted and ignored."""
    if isinstance(trainer_count, bool) or not isinstance(trainer_count, int) or trainer_count < 1:
        raise error(f"paddle.init: trainer_count is a positive integer, got {trainer_count!r}", user_loc())
    trainer.SETTINGS.update(threads=trainer_count, use_gpu=bool(use_gpu), flags=dict(kwargs))


install_report()   # an uncaught netc error prints as its diagnostic, without the traceback (netc.v2.names)

__all__ = ["init", "batch", "infer", "activation", "attr", "data_type", "dataset", "evaluator", "event", "layer",
           "networks",
           "optimizer", "parameters", "pooling", "reader", "topology", "trainer"]
__getattr__ = missing_names(__name__, __all__)
