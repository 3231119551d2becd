"""paddle.topology: PaddlePaddle v2's Topology of output layers, over netc.api.topology.Topology.

`Topology(layers, extra_layers=None)`: the network the layers reach; data_type() its data layers'
[(name, type)], get_layer(name), data_layers() {name: layer}; serialize_for_inference(stream) pickles
{"protobin": the network as netc's .nd text (bytes), "data_type": data_type(), "format": "netc-nd"}.
PaddlePaddle pickles its ModelConfig protobuf under "protobin"; netc.v2 has no ModelConfig, so such a
file is for netc (netc.load reads the .nd text), not for PaddlePaddle's inference."""
from __future__ import annotations

import pickle

from ..api.core import Layer
from ..api.errors import error, user_loc
from ..api.topology import Topology as ApiTopology
from .names import missing_names


class Topology:
    def __init__(self, layers, extra_layers=None):
        loc = user_loc()
        outs = list(layers) if isinstance(layers, (list, tuple)) else [layers]
        outs += [] if extra_layers is None else list(extra_layers) if isinstance(extra_layers, (list, tuple)) \
            else [extra_layers]
        if not outs or not all(isinstance(x, Layer) for x in outs):
            raise error(f"paddle.topology.Topology: layers are paddle.layer layers, got {layers!r}", loc)
        self.layers = outs
        self.topology = ApiTopology(outs, name="paddle_v2", loc=loc)

    def data_layers(self) -> dict:
        return {x.name: x for x in self.topology.data_layers()}

    def data_type(self) -> list:
        """[(data layer name, its paddle.data_type type)] in the order the data layers were made."""
        return [(x.name, x.itype) for x in self.topology.data_layers()]

    def get_layer(self, name):
        return self.topology.layer(name)

    def serialize_for_inference(self, stream):
        """Pickle the network (netc's .nd text, module doc) and its data types to the binary stream."""
        pickle.dump({"protobin": self.topology.to_nd().encode(), "data_type": self.data_type(), "format": "netc-nd"},
                    stream, pickle.HIGHEST_PROTOCOL)


__all__ = ["Topology"]
__getattr__ = missing_names(__name__, __all__)
