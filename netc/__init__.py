"""netc: a compiler toolchain for neural networks.

Layers, bottom to top; a module imports its own layer and the ones below, never one above
(tests/test_layering.py checks every import, those inside functions too, and that no imports
form a cycle; an import inside a function exists only to keep startup fast, as torch, Triton and
matplotlib load slowly):

    diagnostics, version               locations, errors, rendering; the version
    ir                                 the IR, its text (printer, parser), verifier, dialect registry
    ops                                one definition per op; window geometry; float64 reference semantics
    frontend                           .nd, Paleo JSON, SINGA configs, Brainstorm layouts -> IR
    memory                             the static memory plan and its verifier
    passes                             one pass per file, the pass manager
    pipelines                          the named pipelines (inference, training, compile, workers, ...)
    kernels                            Triton kernels and their launchers; AOT compilation
    codegen                            lowering, tuning, the C launcher, the .so
    runtime                            the reference executor, the .so from Python, the interpreter target
    costmodel, explain, export, profile   reports, Paleo's model, writers, profiles
    api, onnx                          the Python API: layers as expressions, parameters, train/test/infer;
                                       netc as an ONNX backend (onnx.backend.base.Backend)
    v2                                 PaddlePaddle v2's API on netc.api (`import netc.v2 as paddle`)
    cli                                the `netc` command

The Python API is reached from here lazily (PEP 562): `import netc` stays light (the CLI imports it,
and a warm `netc compile` must not import torch), and `netc.layer`, `netc.train`, ... import netc.api
on first use.
"""
from .version import __version__  # noqa: F401  (netc.__version__)

# name -> (module of netc.api, attribute or None for the module itself)
_LAZY = {
    "layer": ("layer", None),
    "data_type": ("data_type", None),
    "parameters": ("parameters", None),
    "optimizer": ("optimizer", None),
    "reader": ("reader", None),
    "event": ("event", None),
    "plot": ("plot", None),
    "train": ("trainer", "train"),
    "test": ("trainer", "test"),
    "infer": ("trainer", "infer"),
    "load": ("topology", "load"),
    "Topology": ("topology", "Topology"),
    "ParamAttr": ("layer", "ParamAttr"),
    "NetBuilder": ("netbuilder", "NetBuilder"),
    "sample": ("sampling", "sample"),
}


def __getattr__(name):
    spec = _LAZY.get(name)
    if spec is None:
        raise AttributeError(f"module 'netc' has no attribute '{name}'")
    from . import api   # the top layer; importing it is what this hook is for
    module = getattr(api, spec[0])
    value = module if spec[1] is None else getattr(module, spec[1])
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
