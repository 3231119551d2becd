"""paddle.dataset.cifar: CIFAR-10 and CIFAR-100, PaddlePaddle v2's readers over its cache files
DATA_HOME/cifar/cifar-10-python.tar.gz and cifar-100-python.tar.gz (the archives of
www.cs.toronto.edu/~kriz/cifar.html: pickled batches with 'data' [n, 3072] uint8 in CHW order and
'labels', or 'fine_labels' for CIFAR-100). A sample is (3072 float32 values x / 255, in CHW order as
img_conv(num_channels=3) reads them, the label an int); train10 reads the members named data_batch*,
test10 test_batch, train100 / test100 the members train / test -- PaddlePaddle's selection by name."""
from __future__ import annotations

import pickle
import tarfile

import numpy as np

from ...api.errors import error, user_loc
from .common import cached

URL_PREFIX = "https://www.cs.toronto.edu/~kriz/"
CIFAR10_URL = URL_PREFIX + "cifar-10-python.tar.gz"
CIFAR100_URL = URL_PREFIX + "cifar-100-python.tar.gz"


def _field(batch, *keys):
    for k in keys:
        for kk in (k, k.encode()):
            if kk in batch:
                return batch[kk]
    return None


def reader_creator(filename, sub_name):
    loc = user_loc()

    def reader():
        try:
            with tarfile.open(filename, mode="r") as f:
                for member in f:
                    if sub_name not in member.name or not member.isfile():
                        continue
                    batch = pickle.load(f.extractfile(member), encoding="latin1")
                    data, labels = _field(batch, "data"), _field(batch, "labels", "fine_labels")
                    if data is None or labels is None:
                        raise error(f"paddle.dataset.cifar: member '{member.name}' of '{filename}' has no 'data' and "
                                    f"'labels' (or 'fine_labels')", loc)
                    for sample, label in zip(np.asarray(data), labels):
                        yield (sample / 255.0).astype(np.float32), int(label)
        except (tarfile.TarError, pickle.UnpicklingError, EOFError) as e:
            raise error(f"paddle.dataset.cifar: '{filename}' is not a CIFAR python archive ({e})", loc) from None
    return reader


def train10():
    """CIFAR-10's training samples (the data_batch members)."""
    return reader_creator(cached(CIFAR10_URL, "cifar"), "data_batch")


def test10():
    """CIFAR-10's test samples (test_batch)."""
    return reader_creator(cached(CIFAR10_URL, "cifar"), "test_batch")


def train100():
    return reader_creator(cached(CIFAR100_URL, "cifar"), "train")


def test100():
    return reader_creator(cached(CIFAR100_URL, "cifar"), "test")


test10.__test__ = test100.__test__ = False

__all__ = ["train10", "test10", "train100", "test100", "reader_creator"]
