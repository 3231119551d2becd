"""paddle.pooling: PaddlePaddle v2's pooling types, Max and Avg, for img_pool (and
networks.simple_img_conv_pool) and for layer.pooling over a sequence's steps (netc.api.sequence's
SequencePool: the maximum, or the mean over the valid steps). Sum and SquareRootN are not in netc.v2 yet."""
from __future__ import annotations

from .names import missing_names


class BasePoolingType:
    name = "max"

    def __repr__(self):
        return f"paddle.pooling.{type(self).__name__}()"


class Max(BasePoolingType):
    name = "max"


class Avg(BasePoolingType):
    name = "avg"


MaxPooling, AvgPooling = Max, Avg

__all__ = ["BasePoolingType", "Max", "Avg", "MaxPooling", "AvgPooling"]
__getattr__ = missing_names(__name__, __all__)
