"""The Python API (PaddlePaddle v2's design): topologies as expressions of layers, parameters shared
by name across topologies, train / test / infer, readers and events -- on the same IR, passes and
executors as the .nd language (docs/python.md).

    import netc
    x = netc.layer.data("x", [8, 8, 1]); y = netc.layer.data("y", [], "i32")
    cost = netc.layer.softmax_loss(netc.layer.fc(x, 10), y)
    params = netc.parameters.create(cost)
    netc.train(cost, params, netc.reader.from_arrays(X, Y), netc.optimizer.Adam(0.01), batch_size=32)

Modules: layer (the builders: friendly ones and one per registry op type), data_type (PaddlePaddle's input
types: integer_value, integer_value_sequence, dense_vector, dense_vector_sequence), sequence (the
builders over time: lstm, gru, recurrent, last_seq, first_seq, pooling; re-exported by layer), core
(Layer, ParamAttr, make_layer), topology (Topology, load,
to_ir, to_nd), parameters (create, load, ParameterSet), optimizer, reader, event, trainer (train, test,
infer), plot, netbuilder (NetBuilder), sampling (sample: draw from a trained sequence model, its state
carried), errors (Error, located in the user's code).
"""
from . import data_type, event, layer, optimizer, parameters, plot, reader, sampling, sequence  # noqa: F401
from .errors import Error  # noqa: F401
from .layer import Layer, ParamAttr  # noqa: F401
from .netbuilder import NetBuilder  # noqa: F401
from .topology import Topology, load, to_ir, to_nd  # noqa: F401
from .trainer import TestResult, infer, train  # noqa: F401
from .trainer import test  # noqa: F401  (netc.test; pytest: not a test, see trainer.test.__test__)

__all__ = ["data_type", "sequence", "event", "layer", "optimizer", "parameters", "plot", "reader", "Error", "Layer", "ParamAttr", "NetBuilder",
           "Topology", "load", "to_ir", "to_nd", "TestResult", "infer", "train", "test", "sampling"]
