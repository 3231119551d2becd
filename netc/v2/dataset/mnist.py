"""paddle.dataset.mnist: MNIST, PaddlePaddle v2's readers over its cache files in DATA_HOME/mnist/:
train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz,
t10k-labels-idx1-ubyte.gz (the gzipped IDX files of yann.lecun.com). A sample is (784 float32 pixels
scaled to [-1, 1] as x / 255 * 2 - 1, the label an int), read as PaddlePaddle reads them: in chunks of
100 after the 16- and 8-byte headers, a last partial chunk left out."""
from __future__ import annotations

import gzip

import numpy as np

from ...api.errors import error, user_loc
from .common import cached

URL_PREFIX = "http://yann.lecun.com/exdb/mnist/"
TEST_IMAGE_URL = URL_PREFIX + "t10k-images-idx3-ubyte.gz"
TEST_LABEL_URL = URL_PREFIX + "t10k-labels-idx1-ubyte.gz"
TRAIN_IMAGE_URL = URL_PREFIX + "train-images-idx3-ubyte.gz"
TRAIN_LABEL_URL = URL_PREFIX + "train-labels-idx1-ubyte.gz"


def reader_creator(image_filename, label_filename, buffer_size):
    loc = user_loc()

    def reader():
        with gzip.open(image_filename, "rb") as m, gzip.open(label_filename, "rb") as lab:
            if len(m.read(16)) < 16 or len(lab.read(8)) < 8:
                raise error(f"paddle.dataset.mnist: '{image_filename}' or '{label_filename}' is shorter than its "
                            f"header", loc)
            while True:
                labels = np.frombuffer(lab.read(buffer_size), np.uint8).astype(int)
                if labels.size != buffer_size:
                    break
                raw = m.read(buffer_size * 28 * 28)
                if len(raw) != buffer_size * 28 * 28:
                    raise error(f"paddle.dataset.mnist: '{image_filename}' has fewer images than "
                                f"'{label_filename}' labels", loc)
                images = np.frombuffer(raw, np.uint8).reshape(buffer_size, 28 * 28).astype("float32")
                images = images / 255.0 * 2.0 - 1.0
                for i in range(buffer_size):
                    yield images[i, :], int(labels[i])
    return reader


def train():
    """A reader of the training samples (784 pixels, label)."""
    return reader_creator(cached(TRAIN_IMAGE_URL, "mnist"), cached(TRAIN_LABEL_URL, "mnist"), 100)


def test():
    """A reader of the test samples."""
    return reader_creator(cached(TEST_IMAGE_URL, "mnist"), cached(TEST_LABEL_URL, "mnist"), 100)


test.__test__ = False

__all__ = ["train", "test", "reader_creator"]
