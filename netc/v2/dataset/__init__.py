"""paddle.dataset: PaddlePaddle v2's dataset readers over its cache (~/.cache/paddle/dataset/<name>/,
the same file names and formats; netc.v2 downloads nothing): uci_housing, mnist, cifar, imikolov, imdb,
movielens. Others (conll05, wmt14, ...) are not in netc.v2 yet."""
from __future__ import annotations

from . import cifar, common, imdb, imikolov, mnist, movielens, uci_housing  # noqa: F401
from ..names import missing_names

__all__ = ["cifar", "common", "imdb", "imikolov", "mnist", "movielens", "uci_housing"]
__getattr__ = missing_names(__name__, __all__)
