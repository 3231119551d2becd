"""paddle.activation: PaddlePaddle v2's activation objects, `act=paddle.activation.Relu()`.

Each maps onto what netc fuses into a layer (relu, sigmoid, tanh) or the Softmax layer netc adds after
it. Linear (alias Identity) is none. PaddlePaddle's others (BRelu, SoftRelu, STanh, Abs, Square, Exp,
Log, SequenceSoftmax) are not here yet: naming one is netc.v2's located error."""
from __future__ import annotations

from .names import missing_names


class BaseActivation:
    """An activation: `name` is PaddlePaddle's, `netc` what netc.api's builders take (None: linear)."""
    name = "linear"
    netc = None

    def __repr__(self):
        return f"paddle.activation.{type(self).__name__}()"


class Linear(BaseActivation):
    name, netc = "linear", None


Identity = Linear


class Relu(BaseActivation):
    name, netc = "relu", "relu"


class Sigmoid(BaseActivation):
    name, netc = "sigmoid", "sigmoid"


class Tanh(BaseActivation):
    name, netc = "tanh", "tanh"


class Softmax(BaseActivation):
    name, netc = "softmax", "softmax"


__all__ = ["BaseActivation", "Linear", "Identity", "Relu", "Sigmoid", "Tanh", "Softmax"]
__getattr__ = missing_names(__name__, __all__)
