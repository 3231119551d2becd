"""paddle.dataset.common: where PaddlePaddle's datasets live, DATA_HOME = ~/.cache/paddle/dataset, a
dataset's files in DATA_HOME/<name>/ under the names PaddlePaddle downloads them as (the last part of
their URL). netc.v2 downloads nothing: `cached(url, name)` is the file's path, or a located error
naming the file, where it goes and where PaddlePaddle gets it. (PaddlePaddle checks an MD5 and downloads
again on a mismatch; netc.v2 reads what is there.)"""
from __future__ import annotations

import os

from ...api.errors import error, user_loc

DATA_HOME = os.path.expanduser("~/.cache/paddle/dataset")


def data_home() -> str:
    """DATA_HOME now (a program or test may set it, as in PaddlePaddle); '~' expanded at the call."""
    return os.path.expanduser(DATA_HOME)


def cached(url: str, module_name: str) -> str:
    """The path of PaddlePaddle's cached copy of `url` for dataset `module_name`, or a located error."""
    path = os.path.join(data_home(), module_name, url.split("/")[-1])
    if not os.path.exists(path):
        raise error(f"paddle.dataset.{module_name}: no file '{path}': netc.v2 reads PaddlePaddle's cache and "
                    f"downloads nothing; put the file there (PaddlePaddle downloads it from {url})", user_loc())
    return path


download = cached

__all__ = ["DATA_HOME", "data_home", "cached", "download"]
