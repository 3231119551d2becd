"""paddle.dataset.uci_housing: the Boston housing data, PaddlePaddle v2's reader over its cache file
DATA_HOME/uci_housing/housing.data (whitespace-separated numbers, 14 per row: 13 features and the
price). As PaddlePaddle: every feature becomes (x - mean) / (max - min) over the whole file, the first
80% of the rows are the training set and the rest the test set; a sample is (13 features, [price]),
float64 arrays. (PaddlePaddle also draws the features' ranges into image/ranges.png; this does not.)"""
from __future__ import annotations

import numpy as np

from ...api.errors import error, user_loc
from .common import cached

URL = "https://archive.ics.uci.edu/ml/machine-learning-databases/housing/housing.data"
feature_names = ["CRIM", "ZN", "INDUS", "CHAS", "NOX", "RM", "AGE", "DIS", "RAD", "TAX", "PTRATIO", "B", "LSTAT"]

_LOADED: dict = {}


def load_data(filename, feature_num=14, ratio=0.8):
    """(train rows, test rows) of the file, normalized (module doc); read once per file."""
    if filename not in _LOADED:
        data = np.fromfile(filename, sep=" ")
        if data.size == 0 or data.size % feature_num:
            raise error(f"paddle.dataset.uci_housing: '{filename}' holds {data.size} numbers, not rows of "
                        f"{feature_num}", user_loc())
        data = data.reshape(data.size // feature_num, feature_num)
        maximums, minimums, avgs = data.max(axis=0), data.min(axis=0), data.sum(axis=0) / data.shape[0]
        for i in range(feature_num - 1):
            span = maximums[i] - minimums[i]
            data[:, i] = (data[:, i] - avgs[i]) / (span if span else 1.0)
        offset = int(data.shape[0] * ratio)
        _LOADED[filename] = (data[:offset], data[offset:])
    return _LOADED[filename]


def _reader(rows):
    def reader():
        for d in rows:
            yield d[:-1], d[-1:]
    return reader


def train():
    """A reader of the training samples (feature vector, [price])."""
    return _reader(load_data(cached(URL, "uci_housing"))[0])


def test():
    """A reader of the test samples."""
    return _reader(load_data(cached(URL, "uci_housing"))[1])


test.__test__ = False

__all__ = ["train", "test", "feature_names", "load_data", "URL"]
