"""torchvision's models for the tests (issue 27: its classic CNNs exported with torch.onnx and imported), and
the reason the tests skip where torchvision cannot be imported.

torchvision's wheel on the package index is built against CUDA torch: on a machine with torch's CPU build its
C++ ops (_C.so) do not load, and `import torchvision` then fails where it registers fake kernels for two
of them (`torch.library.register_fake("torchvision::nms")`: "operator torchvision::nms does not exist").
The models use none of those ops. Only where they failed to load (torch.ops.torchvision lacks nms), this
module defines the two schemas torchvision registers fakes for unconditionally (nms and qnms; no kernel:
calling them would fail) and imports torchvision again; the model code is torchvision's own.
`make install` installs the torchvision release that matches the installed torch, with --no-deps."""
from __future__ import annotations

import importlib.util
import sys

import torch

INSTALL = ("pip install --no-deps torchvision==0.(N+15) for torch 2.N (torch 2.13: torchvision==0.28.0; "
           "`make install` does)")

_LIBRARY = None      # the schemas' torch.library.Library, kept alive while the process runs


def _define_missing_ops() -> None:
    global _LIBRARY
    if _LIBRARY is None and not hasattr(torch.ops.torchvision, "nms"):
        _LIBRARY = torch.library.Library("torchvision", "DEF")
        _LIBRARY.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _LIBRARY.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")


def load_torchvision():
    """(torchvision, None), or (None, why it is unavailable and how to install it)."""
    if importlib.util.find_spec("torchvision") is None:
        return None, f"torchvision is not installed: {INSTALL}"
    try:
        import torchvision
        return torchvision, None
    except RuntimeError as e:
        if "torchvision::" not in str(e):
            return None, f"torchvision does not import ({e}): {INSTALL}"
    for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
        del sys.modules[name]        # the failed import's half-initialized modules
    _define_missing_ops()
    try:
        import torchvision
    except Exception as e:  # noqa: BLE001 -- the reason goes into the skip message
        return None, f"torchvision does not import ({e}): {INSTALL}"
    return torchvision, None
