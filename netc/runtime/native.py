"""A compiled network (`netc compile --target cuda` -> net.so) called from Python with torch tensors.

    net = netc.runtime.load("alexnet.so")            # checks the ABI, reads the manifest, creates it
    net.set_params("weights.safetensors")           # or a dict of tensors, or seed=N for random ones
    y = net(x)                                      # x: CUDA tensor [b, ...], 1 <= b <= net.batch
    net.close()                                     # or `with netc.runtime.load(...) as net:`
    net.profile({"data": x})                         # per launch: median and min ms (CUDA events)

A training library (`netc compile --train`) also trains, in place, on the same parameters:

    with netc.runtime.load("lenet_train.so", seed=0) as net:
        loss = net.train_step({"data": x, "label": y}, lr=0.01, seed=step)   # one step at the compiled batch
        probs = net(x, y)["prob"]                   # the forward (inference program) on the updated parameters
        ckpt = net.get_params()                     # parameters and optimizer state; net.set_params(ckpt) restores

Outputs are [b, ...], except those without a batch axis (TensorSpec.batched False: a loss, the mean
over the b samples of the call), which have their own shape (a scalar loss: shape []).

Segments (ABI 4): net.run_segment(k, inputs, lr, seed) launches segment k of the library's segmented
program (the launches between its communication ops; the manifest's `segmented` section) and
net.arena() is the library's arena as a torch uint8 tensor on its device (not a copy: the launches'
memory), so a communication op's operands and results are views of it (at the manifest's `regions`
offset of their region plus their offset). A rank library (`netc compile --workers K`: one rank's
program of a partitioned network) runs only so; netc.runtime.distributed runs it with
torch.distributed between the segments (docs/partitioning.md, "compiled ranks").

The library is opened with ctypes; its C ABI is in the header `netc compile` writes beside it
(codegen/launcher.py). netc_create runs in torch's CUDA context (torch's primary context of the
device, made current first), so device pointers of torch tensors are valid for the launcher, and a
forward is enqueued on torch's current stream (or `stream=`): like any torch op, it is asynchronous
and ordered with the work around it. Outputs are allocated by torch's caching allocator.

Parameters are packed into the manifest's layout (netc.runtime.params) and copied in one go; random
ones are the reference executor's, so `netc run --reference` with the same seed computes with the
same values. A library built with embedded parameters (`netc compile --params/--embed-params`) needs
none; set_params still overrides them.

Every failure is a NetcError (the CLI prints it, exit 1): NetcRuntimeError (also a RuntimeError)
when the library cannot be loaded or created or a call fails, NetcInputError (also a ValueError)
when arguments do not fit the network, naming the input or parameter.
"""
from __future__ import annotations

import contextlib
import ctypes
import json
import os
import sys
import threading
from dataclasses import dataclass

import torch

from ..diagnostics import NetcError, did_you_mean
from . import params as P


class _AllMessages:
    def __str__(self):   # every problem, not just the first (set_params reports them all at once)
        return "\n".join(d.message for d in self.diagnostics)


class NetcRuntimeError(_AllMessages, NetcError, RuntimeError):
    """The library cannot be loaded or created, or a call into it failed."""


class NetcInputError(_AllMessages, NetcError, ValueError):
    """An input, a parameter or an option does not fit the network."""


@dataclass(frozen=True)
class TensorSpec:
    """An input, output or parameter of the network, as its manifest describes it. For batched
    inputs and outputs shape[0] is the compiled batch; a call takes any batch 1..shape[0]. An
    output without a batch axis (batched False) has `shape` at every batch."""
    name: str
    shape: tuple
    dtype: torch.dtype
    dtype_name: str           # the IR's spelling: f32, bf16, ...
    batched: bool = True
    classes: int | None = None   # an input read as a SoftmaxLoss's labels: its class count
    rows: int | None = None      # an input read as an embedding's ids: its table's row count
    per_sample: int = 1          # rows of axis 0 a sample: B for an output [T*B, ...] (a sequence's steps flattened)
    steps: int | None = None     # an input read as sequence lengths: the step count T (lengths in [1, T])


def spec_of(d: dict) -> TensorSpec:
    """The TensorSpec of a manifest entry (an input, output or parameter)."""
    return TensorSpec(d["name"], tuple(d["shape"]), P.torch_dtype(d["dtype"]), d["dtype"],
                      bool(d.get("batched", True)), d.get("classes"), d.get("rows"), int(d.get("rows_per_sample", 1)),
                      d.get("steps"))


def _shape(s) -> str:
    return "[" + ", ".join(str(d) for d in s) + "]"


def _dt(t) -> str:
    return str(t).replace("torch.", "")


class _DeviceBytes:
    """`n` bytes of device memory at `ptr`, for torch.as_tensor (the CUDA array interface)."""

    def __init__(self, ptr: int, n: int):
        self.__cuda_array_interface__ = dict(shape=(n,), typestr="|u1", data=(ptr, False), strides=None, version=2)


# ----------------------------------------------------------------------------------- the library

def _open(path: str):
    """(ctypes library, manifest) of a netc-compiled .so; nothing touches the GPU."""
    from ..codegen.launcher import ABI_VERSION
    if not os.path.exists(path):
        raise NetcRuntimeError(f"no such file: '{path}'")
    if os.path.isdir(path):
        raise NetcRuntimeError(f"'{path}' is a directory, not a compiled network (.so)")
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise NetcRuntimeError(f"cannot load '{path}' as a shared library: {e}") from None
    try:
        lib.netc_abi_version.restype = ctypes.c_int
        lib.netc_manifest.restype = ctypes.c_char_p
    except AttributeError:
        raise NetcRuntimeError(f"'{path}' is not a network compiled by netc (it exports no netc_abi_version "
                               f"and netc_manifest)") from None
    version = lib.netc_abi_version()
    if version != ABI_VERSION:
        raise NetcRuntimeError(f"'{path}' implements netc ABI version {version}, but this netc reads version "
                               f"{ABI_VERSION}; recompile it with this netc (`netc compile`)")
    try:
        manifest = json.loads(lib.netc_manifest().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, AttributeError) as e:
        raise NetcRuntimeError(f"'{path}': its manifest is not valid JSON ({e})") from None
    for name, res, args in (
            ("netc_create", ctypes.c_void_p, []),
            ("netc_destroy", None, [ctypes.c_void_p]),
            ("netc_set_params", ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]),
            ("netc_forward", ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                            ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_void_p]),
            ("netc_last_error", ctypes.c_char_p, [ctypes.c_void_p]),
            ("netc_last_create_error", ctypes.c_char_p, [])):
        try:
            f = getattr(lib, name)
        except AttributeError:
            raise NetcRuntimeError(f"'{path}' lacks {name}: not a complete netc library") from None
        f.restype, f.argtypes = res, args
    try:
        lib.netc_embedded_params.restype = ctypes.c_void_p
        lib.netc_embedded_params.argtypes = [ctypes.POINTER(ctypes.c_size_t)]
    except AttributeError:   # built before parameters could be embedded
        pass
    try:
        lib.netc_train_step.restype = ctypes.c_int
        lib.netc_train_step.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_float,
                                        ctypes.c_longlong, ctypes.c_void_p, ctypes.POINTER(ctypes.c_float)]
        lib.netc_get_params.restype = ctypes.c_int
        lib.netc_get_params.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    except AttributeError:   # impossible at ABI 3 (checked above); kept for clarity
        raise NetcRuntimeError(f"'{path}' lacks netc_train_step/netc_get_params: not a complete netc library") from None
    lib.netc_num_segments.restype = ctypes.c_int          # ABI 4 (checked above)
    lib.netc_num_segments.argtypes = []
    lib.netc_run_segment.restype = ctypes.c_int
    lib.netc_run_segment.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_float,
                                     ctypes.c_longlong, ctypes.c_void_p]
    lib.netc_arena.restype = ctypes.c_ulonglong
    lib.netc_arena.argtypes = [ctypes.c_void_p, ctypes.c_int]
    try:
        lib.netc_profile.restype = ctypes.c_int
        lib.netc_profile.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p),
                                     ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_float)]
        lib.netc_num_launches.restype = ctypes.c_int
        lib.netc_num_launches.argtypes = []
    except AttributeError:   # built before netc_profile (Net.profile asks for a recompile)
        pass
    return lib, manifest


def read_manifest(path) -> dict:
    """The manifest of a compiled network (inputs, outputs, parameters, plan, kernels); needs no GPU."""
    return _open(os.path.abspath(os.fspath(path)))[1]


def _msg(raw) -> str:
    s = raw.decode("utf-8", "replace") if raw else ""
    return s[len("netc: "):] if s.startswith("netc: ") else s


def _torch_device(device=None) -> torch.device | None:
    """The CUDA device a network runs on (torch's current one by default); None where torch has no
    CUDA. (Tests of the launcher against a fake driver replace this with the CPU.)"""
    if not torch.cuda.is_available():
        return None
    d = torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device())
    if d.type != "cuda":
        raise NetcInputError(f"a compiled network runs on a CUDA device, not '{d}'")
    return d if d.index is not None else torch.device("cuda", torch.cuda.current_device())


def device_name(device=None) -> str | None:
    """torch's name of the CUDA device a Net would run on (e.g. "NVIDIA H100 80GB HBM3"), or None
    where torch has no CUDA."""
    d = _torch_device(device)
    return torch.cuda.get_device_name(d) if d is not None and d.type == "cuda" else None


def load(path, params=None, *, seed: int | None = None, device=None) -> "Net":
    """Open a compiled network and create it on `device` (default: torch's current CUDA device).
    `params`/`seed`: as Net.set_params (nothing needed when the library embeds its parameters)."""
    net = Net(path, device=device)
    if params is not None or seed is not None:
        try:
            net.set_params(params, seed=seed)
        except BaseException:
            net.close()
            raise
    return net


class Net:
    """A created instance of a compiled network. Not for concurrent calls from several threads
    (calls are serialized by a lock); create one per thread for that."""

    def __init__(self, path, *, device=None):
        self.path = os.path.abspath(os.fspath(path))
        self._h = None
        self._lib, self.manifest = _open(self.path)
        m = self.manifest
        self.network: str = m.get("network", "network")
        self.batch: int = int(m["batch"])
        self.inputs = [spec_of(d) for d in m["inputs"]]
        self.outputs = [spec_of(d) for d in m["outputs"]]
        self.parameters = [spec_of(d) for d in m.get("parameters", [])]
        self.params_embedded: bool = bool(m.get("params_embedded"))
        # a training library's training step: its data inputs (labels too), at the compiled batch
        self.training: dict | None = m.get("training")
        self.train_inputs = [spec_of(d) for d in self.training["inputs"]] if self.training else []
        # a rank library (one rank's program of a partitioned network): it runs in segments only
        self.rank: dict | None = m.get("rank")
        self.segmented: dict = m.get("segmented") or {}
        # inputs without a batch axis ("batched": false): a rank library's, and a time-major op's initial
        # state (an Lstm's h0, c0 [B, H] beside its sequence [T, B, ...], whose T is the batch): fed whole
        self._lock = threading.Lock()
        self._values = None                 # the parameters last set (host tensors), for params()
        self.device = _torch_device(device)
        if self.device is not None and self.device.type == "cuda":
            # torch's primary context of the device, current on this thread: netc_create adopts it
            torch.cuda.synchronize(self.device)
            with torch.cuda.device(self.device):
                h = self._lib.netc_create()
        else:
            h = self._lib.netc_create()
        if not h:
            raise NetcRuntimeError(f"cannot create '{os.path.basename(self.path)}': "
                                   f"{_msg(self._lib.netc_last_create_error())}")
        self._h = h
        self._params_set = self.params_embedded or not m.get("param_bytes")

    # --------------------------------------------------------------------------- lifetime
    def close(self) -> None:
        """Free the network's device memory (after the work queued on it is done). Idempotent."""
        h, self._h = self._h, None
        if h:
            if self.device is not None and self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            with self._lock:
                self._lib.netc_destroy(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if not sys.is_finalizing() and getattr(self, "_h", None):
            self.close()

    def __repr__(self):
        ins = ", ".join(f"{s.name}: {s.dtype_name}{_shape(s.shape)}" for s in self.inputs)
        outs = ", ".join(f"{s.name}: {s.dtype_name}{_shape(s.shape)}" for s in self.outputs)
        state = "closed" if not self._h else str(self.device or "no CUDA in torch")
        return f"<netc.Net {self.network} ({ins}) -> ({outs}), {os.path.basename(self.path)}, {state}>"

    def _handle(self):
        if not self._h:
            raise NetcRuntimeError(f"'{os.path.basename(self.path)}' is closed")
        return self._h

    def _error(self, what: str) -> NetcRuntimeError:
        return NetcRuntimeError(f"{self.network}: {what}: {_msg(self._lib.netc_last_error(self._h))}")

    # --------------------------------------------------------------------------- parameters
    def set_params(self, source=None, *, seed: int | None = None) -> None:
        """Set every parameter: `source` is a dict of tensors by parameter name, or the path of an
        .npz/.safetensors file; without `seed`, it must hold every parameter (names as in
        .parameters); with `seed`, missing ones are random. source=None: all random (seed, default 0),
        the values `netc run --reference --seed` draws. Synchronous."""
        what = ""
        if source is None:
            given, seed = {}, 0 if seed is None else seed
        elif isinstance(source, (str, os.PathLike)):
            given, what = P.read_params(os.fspath(source), "parameters"), f" in '{os.fspath(source)}'"
        elif isinstance(source, dict):
            given = source
        else:
            raise NetcInputError(f"set_params takes a dict of tensors by name, the path of an .npz or .safetensors "
                                 f"file, or None (random); got {type(source).__name__}")
        # optimizer state and running statistics (a training library's) start at their initial value
        state = {p["name"]: torch.full(tuple(p["shape"]), float(p.get("init", 0.0)))
                 for p in self.manifest.get("parameters", []) if "state" in p and p["name"] not in given}
        try:
            values = P.complete(self.manifest, {**state, **given}, seed, what)
        except NetcError as e:
            raise NetcInputError(e.diagnostics) from None
        blob = P.layout(self.manifest, values)
        h = self._handle()
        with self._lock:
            if self.device is not None and self.device.type == "cuda":
                torch.cuda.synchronize(self.device)     # no forward still reads the old values
            rc = self._lib.netc_set_params(h, blob.ctypes.data if blob.size else None, blob.size)
        if rc:
            raise self._error("setting the parameters failed")
        self._values = values
        self._params_set = True

    def get_params(self) -> dict:
        """Every parameter and, in a training library, the optimizer state as the library holds them
        now (host tensors by name, aliases included; netc_get_params): a checkpoint that set_params
        restores. Waits for the work queued on the device."""
        h = self._handle()
        if not self._params_set:
            raise NetcInputError(f"{self.network}: no parameters are set yet (set_params)")
        import numpy as np
        blob = np.zeros(int(self.manifest.get("param_bytes", 0)), dtype=np.uint8)
        with self._lock:
            if self.device is not None and self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            rc = self._lib.netc_get_params(h, blob.ctypes.data if blob.size else None, blob.size)
        if rc:
            raise self._error("reading the parameters failed")
        return P.unpack(self.manifest, blob)

    def train_step(self, inputs: dict, lr: float, seed: int = 0, *, stream=None, wait: bool = True):
        """One training step (netc_train_step) on `inputs` by name -- the training program's data
        inputs, labels included: CUDA tensors [batch, ...] at the COMPILED batch -- with learning rate
        `lr` and dropout seed `seed` (give each step its own to draw new masks). The parameters and
        optimizer state are updated in place. Returns the loss (a float; the sum of the program's
        losses), or None with wait=False (then nothing waits for the step)."""
        self._not_a_rank("train_step")
        if not self.training:
            raise NetcInputError(f"'{os.path.basename(self.path)}' was compiled for inference only: compile it with "
                                 f"`netc compile --train` to train it")
        h = self._handle()
        if not self._params_set:
            raise NetcInputError(f"{self.network}: set the parameters first: net.set_params(a dict, an .npz or "
                                 f".safetensors file, or seed=N for random ones)")
        if not isinstance(inputs, dict):
            raise NetcInputError(f"train_step takes the inputs as a dict by name, got {type(inputs).__name__}")
        names = [s.name for s in self.train_inputs]
        for k in inputs:
            if k not in names:
                hint = did_you_mean(k, names)
                raise NetcInputError(f"the training step of '{self.network}' has no input '{k}'"
                                     + (f"; did you mean '{hint}'?" if hint else "") + f" (inputs: {', '.join(names)})")
        missing = [n for n in names if n not in inputs]
        if missing:
            raise NetcInputError(f"missing input{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))} "
                                 f"of the training step of '{self.network}'")
        xs = []
        for s in self.train_inputs:
            t = inputs[s.name]
            if self._check(s, t) not in (None, self.batch):
                raise NetcInputError(f"input '{s.name}' has batch {t.shape[0]}: a training step runs at the compiled "
                                     f"batch {self.batch}")
            xs.append(t)
        handle = 0
        if stream is not None:
            if isinstance(stream, torch.cuda.Stream):
                handle = stream.cuda_stream
            elif isinstance(stream, int):
                handle = stream
            else:
                raise NetcInputError(f"stream must be a torch.cuda.Stream or a CUstream handle (int), got "
                                     f"{type(stream).__name__}")
        elif self.device is not None and self.device.type == "cuda":
            handle = torch.cuda.current_stream(self.device).cuda_stream
        loss = ctypes.c_float(float("nan"))
        ins_c = (ctypes.c_void_p * max(len(xs), 1))(*[t.data_ptr() for t in xs])
        with self._lock:
            rc = self._lib.netc_train_step(h, ins_c, float(lr), int(seed), handle or None,
                                           ctypes.byref(loss) if wait else None)
        if rc:
            raise self._error("the training step failed")
        self._values = None          # params() reads them back now: they changed
        return float(loss.value) if wait else None

    # --------------------------------------------------------------------------- segments
    def run_segment(self, k: int, inputs=None, lr: float = 0.0, seed: int = 0, *, stream=None) -> None:
        """netc_run_segment: segment k of the segmented program (manifest `segmented`), asynchronously on
        `stream` (default torch's current stream). Segment 0 takes the program's inputs (a dict by name,
        or a list in manifest order: tensors on the device in the inputs' dtypes, at the compiled batch),
        the learning rate and the dropout seed (a rank's training program, or a training library's step);
        the others take none."""
        h = self._handle()
        if not self._params_set:
            raise NetcInputError(f"{self.network}: set the parameters first (set_params)")
        n = self._lib.netc_num_segments()
        if not 0 <= k < n:
            raise NetcInputError(f"{self.network}: segment {k} is outside 0..{n - 1}")
        specs = self.train_inputs if self.segmented.get("program") == "training" and self.training else self.inputs
        xs = []
        if k == 0:
            if isinstance(inputs, dict):
                missing = [s.name for s in specs if s.name not in inputs]
                if missing:
                    raise NetcInputError(f"missing input{'s' if len(missing) > 1 else ''} "
                                         f"{', '.join(map(repr, missing))} of '{self.network}'")
                inputs = [inputs[s.name] for s in specs]
            inputs = list(inputs or [])
            if len(inputs) != len(specs):
                raise NetcInputError(f"segment 0 of '{self.network}' takes {len(specs)} inputs, got {len(inputs)}")
            for s, t in zip(specs, inputs):
                if not torch.is_tensor(t) or t.dtype != s.dtype or tuple(t.shape) != tuple(s.shape) \
                        or not t.is_contiguous() or (self.device is not None and t.device != self.device):
                    raise NetcInputError(f"input '{s.name}' must be a contiguous {_dt(s.dtype)} tensor "
                                         f"{_shape(s.shape)} on {self.device}")
                xs.append(t)
        handle = 0
        if isinstance(stream, torch.cuda.Stream):
            handle = stream.cuda_stream
        elif isinstance(stream, int):
            handle = stream
        elif self.device is not None and self.device.type == "cuda":
            handle = torch.cuda.current_stream(self.device).cuda_stream
        ins_c = (ctypes.c_void_p * max(len(xs), 1))(*[t.data_ptr() for t in xs])
        with self._lock:
            rc = self._lib.netc_run_segment(h, int(k), ins_c if xs else None, float(lr), int(seed), handle or None)
        if rc:
            raise self._error(f"segment {k} failed")
        if self.segmented.get("program") == "training":
            self._values = None          # params() reads them back now: the updates change them

    def arena_address(self, region: int) -> int:
        """netc_arena: the device address of an arena region (1 constant, the arena's start; 2 batch; ...)."""
        addr = self._lib.netc_arena(self._handle(), int(region))
        if not addr:
            raise self._error(f"no address of arena region {region}")
        return int(addr)

    def arena(self) -> torch.Tensor:
        """The whole arena (the manifest's regions' arena_bytes) as a uint8 tensor on the network's device:
        the library's own memory, not a copy (valid while the net is open). Views of it at a place of
        the manifest (its region's offset in `regions` plus its offset) are a communication op's operands
        and results."""
        n = int(self.manifest["regions"]["arena_bytes"])
        ptr = self.arena_address(1)
        if self.device is not None and self.device.type == "cuda":
            return torch.as_tensor(_DeviceBytes(ptr, n), device=self.device)
        # no CUDA in torch (tests against a fake driver with host memory): host bytes
        return torch.frombuffer((ctypes.c_uint8 * n).from_address(ptr), dtype=torch.uint8)

    def embedded_params(self) -> dict | None:
        """The parameters embedded in the library (host tensors by name), or None."""
        f = getattr(self._lib, "netc_embedded_params", None)
        if f is None:
            return None
        n = ctypes.c_size_t(0)
        ptr = f(ctypes.byref(n))
        if not ptr:
            return None
        import numpy as np
        view = np.ctypeslib.as_array((ctypes.c_uint8 * n.value).from_address(ptr)) if n.value else np.zeros(0, np.uint8)
        return P.unpack(self.manifest, view.copy())     # a copy: the library's memory goes with it

    def params(self) -> dict:
        """The parameter values in use (host tensors by name, aliases included): the ones last set,
        else the embedded ones."""
        if self._values is not None:
            return P.with_aliases(self.manifest, self._values)
        if self.training and self._params_set:
            return self.get_params()
        emb = self.embedded_params()
        if emb is None:
            raise NetcInputError(f"{self.network}: no parameters are set yet (set_params)")
        return emb

    # --------------------------------------------------------------------------- inputs
    def random_inputs(self, seed: int = 0, batch: int | None = None) -> dict:
        """The reference executor's random inputs (drawn at the compiled batch, cut to `batch`), on the
        network's device, in the inputs' dtypes: class labels for a SoftmaxLoss's labels input, ids below
        an embedding's row count, lengths in [1, T] for a sequence's lengths (the manifest records each
        bound). An input without a batch axis (an initial state, a sequence's lengths, per-sequence
        labels) is drawn whole."""
        from .reference import random_float_input, random_ids, random_labels, random_lengths
        b = self.batch if batch is None else self._batch_ok(batch, "batch")
        out = {}
        for s in self.inputs:
            if s.classes is not None:
                x = random_labels(s.name, s.shape, s.classes, seed, s.dtype)
            elif s.rows is not None:
                x = random_ids(s.name, s.shape, s.rows, seed, s.dtype)
            elif s.steps is not None:
                x = random_lengths(s.name, s.shape, s.steps, seed, s.dtype)
            elif not s.dtype.is_floating_point:
                raise NetcInputError(f"input '{s.name}' is {s.dtype_name}: random integer inputs need the network's "
                                     f"source (what the integers mean); give it a value")
            else:
                x = random_float_input(s.name, s.shape, seed, torch.float64).to(s.dtype)
            x = x[:b] if s.batched else x
            out[s.name] = x.to(self.device) if self.device is not None else x
        return out

    def _batch_ok(self, b: int, what: str) -> int:
        if not 1 <= b <= self.batch:
            raise NetcInputError(f"{what} {b} is outside 1..{self.batch}: '{self.network}' was compiled for batches "
                                 f"of at most {self.batch} (recompile with a larger batch for more)")
        return b

    def _gather(self, args, kwargs) -> list:
        names = [s.name for s in self.inputs]
        if len(args) > len(names):
            raise NetcInputError(f"'{self.network}' takes {len(names)} input{'s' if len(names) != 1 else ''} "
                                 f"({', '.join(names)}), got {len(args)}")
        given = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                hint = did_you_mean(k, names)
                raise NetcInputError(f"'{self.network}' has no input '{k}'"
                                     + (f"; did you mean '{hint}'?" if hint else "") + f" (inputs: {', '.join(names)})")
            if k in given:
                raise NetcInputError(f"input '{k}' is given twice (by position and by name)")
            given[k] = v
        missing = [n for n in names if n not in given]
        if missing:
            raise NetcInputError(f"missing input{'s' if len(missing) > 1 else ''} "
                                 f"{', '.join(repr(m) for m in missing)} of '{self.network}'")
        return [given[n] for n in names]

    def _check(self, s: TensorSpec, t) -> int | None:
        """The batch of input tensor t, after checking it against spec s (None for an input without a
        batch axis, which must have its shape)."""
        if not torch.is_tensor(t):
            raise NetcInputError(f"input '{s.name}' must be a torch tensor, got {type(t).__name__}")
        if self.device is None:
            raise NetcInputError(f"input '{s.name}' is on {t.device}, but torch here has no CUDA device "
                                 f"(torch.cuda.is_available() is False): a compiled network runs on the GPU")
        if t.device != self.device:
            raise NetcInputError(f"input '{s.name}' is on {t.device}; '{self.network}' runs on {self.device} "
                                 f"(move it with .to('{self.device}'))")
        if t.dtype != s.dtype:
            raise NetcInputError(f"input '{s.name}' has dtype {_dt(t.dtype)}; '{self.network}' takes {_dt(s.dtype)} "
                                 f"(convert it with .to(torch.{_dt(s.dtype)}))")
        if not s.batched:
            if tuple(t.shape) != tuple(s.shape):
                raise NetcInputError(f"input '{s.name}' has shape {_shape(t.shape)}; '{self.network}' takes "
                                     f"{_shape(s.shape)} (it has no batch axis: an initial state, fed whole)")
            if not t.is_contiguous():
                raise NetcInputError(f"input '{s.name}' is not contiguous (call .contiguous() on it)")
            return None
        want = f"[b, {', '.join(str(d) for d in s.shape[1:])}] with 1 <= b <= {self.batch}"
        if t.dim() != len(s.shape) or tuple(t.shape[1:]) != tuple(s.shape[1:]):
            raise NetcInputError(f"input '{s.name}' has shape {_shape(t.shape)}; '{self.network}' takes {want}")
        if not 1 <= t.shape[0] <= self.batch:
            raise NetcInputError(f"input '{s.name}' has batch {t.shape[0]}; '{self.network}' was compiled for "
                                 f"batches of 1 to {self.batch} ({want})")
        if not t.is_contiguous():
            raise NetcInputError(f"input '{s.name}' is not contiguous (call .contiguous() on it)")
        return int(t.shape[0])

    # --------------------------------------------------------------------------- running
    def _inputs(self, args, kwargs) -> tuple[list, int]:
        """The input tensors in manifest order, checked, and their (common) batch."""
        xs = self._gather(args, kwargs)
        checked = [(s, self._check(s, t)) for s, t in zip(self.inputs, xs)]
        batches = [(s, b) for s, b in checked if b is not None]
        if len({b for _, b in batches}) > 1:
            raise NetcInputError("the inputs have different batch sizes: "
                                 + ", ".join(f"{s.name} {b}" for s, b in batches))
        return xs, batches[0][1] if batches else self.batch

    def _not_a_rank(self, what: str) -> None:
        if self.rank:
            r = self.rank
            raise NetcInputError(f"{what}: '{os.path.basename(self.path)}' is rank {r['rank']} of {r['world']} of the "
                                 f"partitioned network '{r.get('of')}': it runs in segments (run_segment), with the "
                                 f"communication between them (netc run FILE --workers K --target cuda)")

    def forward(self, *args, stream=None, **kwargs) -> list:
        """Run on inputs given by position (manifest order) or name; the outputs as a list."""
        self._not_a_rank("forward")
        xs, b = self._inputs(args, kwargs)
        return self._run(xs, b, stream)

    def _run(self, xs: list, b: int, stream, ms=None) -> list:
        """netc_forward on checked inputs; with `ms` (NETC_NLAUNCHES + 2 c_floats), netc_profile."""
        h = self._handle()
        if not self._params_set:
            raise NetcInputError(f"{self.network}: set the parameters first: net.set_params(a dict, an .npz or "
                                 f".safetensors file, or seed=N for random ones)")
        cuda = self.device is not None and self.device.type == "cuda"
        tstream, handle = None, 0
        if stream is not None:
            if isinstance(stream, torch.cuda.Stream):
                tstream, handle = stream, stream.cuda_stream
            elif isinstance(stream, int):
                handle = stream                  # a raw CUstream: its ordering is the caller's business
            else:
                raise NetcInputError(f"stream must be a torch.cuda.Stream or a CUstream handle (int), got "
                                     f"{type(stream).__name__}")
        elif cuda:
            handle = torch.cuda.current_stream(self.device).cuda_stream
        ctx = torch.cuda.stream(tstream) if tstream is not None else contextlib.nullcontext()
        with self._lock, ctx:
            dev = self.device
            outs = [torch.empty((b * s.per_sample,) + s.shape[1:] if s.batched else s.shape, dtype=s.dtype, device=dev)
                    for s in self.outputs]
            if tstream is not None:
                for t in xs:
                    t.record_stream(tstream)     # the caching allocator keeps them until it is done
            ins_c = (ctypes.c_void_p * max(len(xs), 1))(*[t.data_ptr() for t in xs])
            outs_c = (ctypes.c_void_p * max(len(outs), 1))(*[t.data_ptr() for t in outs])
            if ms is None:
                rc = self._lib.netc_forward(h, ins_c, outs_c, b, handle or None)
            else:
                rc = self._lib.netc_profile(h, ins_c, outs_c, b, handle or None, ms)
        if rc:
            raise self._error("forward failed" if ms is None else "profiling failed")
        return outs

    def profile(self, inputs: dict, repeat: int = 20, warmup: int = 3, stream=None) -> list:
        """Time every part of a forward on `inputs` (by name) with CUDA events (netc_profile): `warmup`
        untimed runs, then `repeat` timed ones. One dict per part, in order: the input copies, each
        kernel launch of the schedule, the output copies, with median_ms and min_ms over the timed
        runs and, from the manifest, kind ("input copy", "launch", "output copy"), index (of the
        launch in the schedule), step, kernel (the cubin's entry), kernel_name, group, layers, op
        (IR op of the first layer), flops and bytes: at the COMPILED batch (the manifest's
        numbers; a copy moves its bytes twice, read and written). Each timed run waits for its
        last event, so nothing else overlaps it."""
        import statistics
        so = os.path.basename(self.path)
        if getattr(self._lib, "netc_profile", None) is None:
            raise NetcRuntimeError(f"'{so}' was built by an older netc without netc_profile (per-launch timing): "
                                   f"recompile it with this netc (`netc compile`) to profile it")
        self._not_a_rank("profile")
        for what, v, lo in (("repeat", repeat, 1), ("warmup", warmup, 0)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise NetcInputError(f"profile: {what} must be an integer >= {lo}, got {v!r}")
        if not isinstance(inputs, dict):
            raise NetcInputError(f"profile takes the inputs as a dict by name, got {type(inputs).__name__}")
        xs, b = self._inputs((), inputs)
        sched = self.manifest.get("schedule", [])
        n = self._lib.netc_num_launches()
        if n != len(sched):
            raise NetcRuntimeError(f"'{so}' launches {n} kernels but its manifest's schedule lists {len(sched)}")
        ms = (ctypes.c_float * (n + 2))()
        runs = []
        for i in range(warmup + repeat):
            self._run(xs, b, stream, ms)
            if i >= warmup:
                runs.append(list(ms))
        kernels = self.manifest.get("kernels", [])

        def io_bytes(ds):
            return 2 * sum(d["bytes_per_sample"] * self.batch if d.get("batched", True) else d["bytes"] for d in ds)

        parts = [dict(kind="input copy", index=None, step=None, kernel=None, kernel_name=None, group=None,
                      layers=[d["name"] for d in self.manifest["inputs"]], op=None, flops=0,
                      bytes=io_bytes(self.manifest["inputs"]))]
        for k, e in enumerate(sched):
            kd = kernels[e["kernel"]] if 0 <= e.get("kernel", -1) < len(kernels) else {}
            parts.append(dict(kind="launch", index=k, step=e.get("step"), kernel=kd.get("entry"),
                              kernel_name=kd.get("kernel"), group=e.get("group"), layers=list(e.get("layers", [])),
                              op=e.get("op"), flops=e.get("flops", 0), bytes=e.get("bytes", 0)))
        parts.append(dict(kind="output copy", index=None, step=None, kernel=None, kernel_name=None, group=None,
                          layers=[d["name"] for d in self.manifest["outputs"]], op=None, flops=0,
                          bytes=io_bytes(self.manifest["outputs"])))
        for j, p in enumerate(parts):
            col = [r[j] for r in runs]
            p.update(median_ms=statistics.median(col), min_ms=min(col))
        return parts

    def __call__(self, *args, stream=None, **kwargs):
        """net(x) / net(x, y) / net(data=x): one output -> a tensor; several -> a dict by name."""
        outs = self.forward(*args, stream=stream, **kwargs)
        return outs[0] if len(outs) == 1 else {s.name: o for s, o in zip(self.outputs, outs)}

    def run(self, inputs: dict, stream=None) -> dict:
        """Inputs by name -> outputs by name."""
        outs = self.forward(stream=stream, **inputs)
        return {s.name: o for s, o in zip(self.outputs, outs)}


# ----------------------------------------------------------------------------------- `netc run NET.so`

def is_compiled(path: str) -> bool:
    """Whether `path` names a compiled network (*.so, or an ELF file) rather than a network source."""
    if path.endswith(".so"):
        return True
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def batch_of(net: Net, inputs: dict) -> int:
    """The batch of `inputs` by name: the leading axis of the batch-sized ones (an initial state has none)."""
    batched = {s.name for s in net.inputs if s.batched}
    return next((int(v.shape[0]) for k, v in inputs.items() if k in batched), 1)


def _feed(net: Net, inputs: dict, what: str = "input") -> dict:
    """CLI inputs (from .npy/.npz files, any real dtype) as the network's dtypes on its device."""
    names = [s.name for s in net.inputs]
    for k in inputs:
        if k not in names:
            hint = did_you_mean(k, names)
            raise NetcInputError(f"'{net.network}' has no input '{k}'" + (f"; did you mean '{hint}'?" if hint else "")
                                 + f" (inputs: {', '.join(names)})")
    missing = [n for n in names if n not in inputs]
    if missing:
        raise NetcInputError(f"missing input{'s' if len(missing) > 1 else ''} {', '.join(repr(m) for m in missing)} "
                             f"of '{net.network}' (give every input, or none for random ones)")
    out = {}
    for s in net.inputs:
        t = inputs[s.name]
        if t.dtype == torch.bool or t.is_complex():
            raise NetcInputError(f"{what} '{s.name}' has dtype {_dt(t.dtype)}, not a real number type")
        if not s.dtype.is_floating_point and t.is_floating_point() and not torch.equal(t, t.round()):
            raise NetcInputError(f"{what} '{s.name}' must hold integers (it is an integer input), got fractional "
                                 f"values")
        t = t.to(s.dtype)
        out[s.name] = t.to(net.device).contiguous() if net.device is not None else t.contiguous()
    return out


@contextlib.contextmanager
def _cli_net(args):
    """`netc run NET.so`'s set-up: the options checked, the library loaded, its parameters set
    (--params, the embedded ones, or random from --seed) and its inputs (--input/--inputs, or random
    ones at --batch, default the compiled batch); yields (net, inputs by name) and closes the net."""
    from .io import load_npz, parse_input_specs
    not_here = [flag for flag, attr in (("--reference", "reference"), ("--target", "target"), ("--network", "network"),
                                        ("--dtype", "dtype"), ("--tf32", "tf32"), ("--tf32x3", "tf32x3"),
                                        ("--singa-version", "singa_version"),
                                        ("--size", "size"))
                if getattr(args, attr, None)]
    if not_here:
        raise NetcInputError(f"{', '.join(not_here)} appl{'y' if len(not_here) > 1 else 'ies'} to network sources, not "
                             f"to '{args.file}': a compiled network runs as it was compiled (on the GPU)")
    if getattr(args, "source", None) and not args.compare:
        raise NetcInputError("--source names the network source for --compare; give --compare too")
    inputs = load_npz(args.inputs, "--inputs") if args.inputs else {}
    for k, v in parse_input_specs(args.input).items():
        if k in inputs:
            raise NetcInputError(f"input '{k}' is given both by --input and in {args.inputs}")
        inputs[k] = v
    given = P.read_params(args.params, "--params") if args.params else None
    with load(args.file) as net:
        if inputs:
            inputs = _feed(net, inputs)
            b = batch_of(net, inputs)
            if args.batch is not None and args.batch != b:
                raise NetcInputError(f"--batch {args.batch} contradicts the inputs' batch {b}")
        else:
            inputs = net.random_inputs(args.seed, args.batch)
        if given is not None:   # like --reference: parameters the file lacks are random (--seed)
            net.set_params(given, seed=args.seed)
        elif not net.params_embedded:
            net.set_params(seed=args.seed)
        yield net, inputs


def run_cli(args) -> tuple[dict, list]:
    """`netc run NET.so`: load, set parameters (--params, the embedded ones, or random from --seed),
    run on --input/--inputs (or random inputs at --batch, default the compiled batch) and, with
    --compare, check against the reference executor on the network's source. Returns (outputs on
    the CPU, diagnostics for outputs beyond the tolerance)."""
    with _cli_net(args) as (net, inputs):
        outs = net.run(inputs)
        if net.device is not None and net.device.type == "cuda":
            torch.cuda.synchronize(net.device)
        outs = {k: v.cpu() for k, v in outs.items()}
        failed = _compare(net, args, inputs, outs) if args.compare else []
    return outs, failed


def profile_cli(args, repeat: int, warmup: int = 3) -> dict:
    """`netc run NET.so --profile`: set up as run_cli does, then Net.profile. Returns network,
    library, batch (of the inputs), compiled_batch, device_name (torch's, or None), repeat, warmup
    and rows (Net.profile's parts)."""
    with _cli_net(args) as (net, inputs):
        b = batch_of(net, inputs)
        rows = net.profile(inputs, repeat=repeat, warmup=warmup)
        name = torch.cuda.get_device_name(net.device) if net.device is not None and net.device.type == "cuda" else None
        return dict(network=net.network, library=net.path, batch=int(b), compiled_batch=net.batch, device_name=name,
                    repeat=repeat, warmup=warmup, rows=rows)


def source_of(net: Net, given: str | None = None) -> str:
    """The path of the source `net` was compiled from, for --compare: `given` (--source) or the one the
    manifest records, readable and (unless given) unchanged since (its sha256); else a clear error."""
    import hashlib
    rec = net.manifest.get("source") or {}
    path = given or rec.get("path")
    so = os.path.basename(net.path)
    if not path:
        raise NetcInputError(f"--compare needs the network's source: '{so}' does not record it; give --source FILE")
    try:
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
    except OSError as e:
        raise NetcInputError(f"--compare: cannot read the source '{path}': {e.strerror}"
                             + ("" if given else "; give --source FILE")) from None
    if rec.get("sha256") and digest != rec["sha256"]:
        msg = f"'{path}' has changed since '{so}' was compiled from it"
        if not given:
            raise NetcInputError(f"--compare: {msg}; recompile, or pass --source {path} to compare anyway")
        sys.stderr.write(f"netc: warning: {msg}\n")
    return path


def _compare(net: Net, args, inputs: dict, outs: dict) -> list:
    """--compare: the f64 reference executor on the network's source (recorded in the manifest, or
    --source) with the very inputs and parameters the library ran with; prints the max relative
    error of every output beside the reference's in the library's own precision (compare.py) and returns a
    diagnostic for each beyond what compare.check_outputs allows."""
    from .compare import check_outputs, own_precision, own_precision_dtype
    rec = net.manifest.get("source") or {}
    path = source_of(net, getattr(args, "source", None))
    so = os.path.basename(net.path)
    kw = dict(seed=args.seed, phase=rec.get("phase", "test"), load_batch=rec.get("batch"),
              options={"singa_version": rec.get("singa_version"), "sizes": rec.get("sizes")}, rescaled_batch=rec.get("rescaled_batch"))
    ref = reference_outputs(net, path, inputs, **kw)
    for k in outs:
        if k not in ref:
            raise NetcInputError(f"--compare: the reference of '{path}' has no output '{k}' (it has "
                                 f"{', '.join(ref)}): is it the source of '{so}'?")
    precision = net.manifest.get("precision") or {"dtype": "f32"}
    with own_precision(precision):        # the same run in the library's precision: what it can hold (compare.py)
        ref32 = reference_outputs(net, path, inputs, dtype=own_precision_dtype(precision), **kw)
    return check_outputs(outs, ref, precision, subject=f"of '{so}'", ref32=ref32)


def reference_outputs(net: Net, path: str, inputs: dict, *, seed: int = 0, phase: str = "test",
                      load_batch: int | None = None, options: dict | None = None, device="cpu",
                      rescaled_batch: int | None = None, dtype=torch.float64) -> dict:
    """What `net` computes from `inputs` (b samples, by name) with the parameters it runs with
    (net.params()), computed by the reference executor in `dtype` (f64) on the network's source `path` (loaded
    with `load_batch`/`options`, its inputs rescaled to `rescaled_batch` where the library was compiled
    with --batch, run through the default pipeline in `phase`), on `device`.

    The reference runs at the compiled batch, the samples past b zeros, and batched outputs are cut
    to their first b samples, as the .so's; except when an output has no batch axis (a loss: the
    mean over the b samples of the call) and b is smaller: then the source's inputs are scaled to
    batch b (runtime/scale.py) and the reference runs on exactly the b samples."""
    from ..diagnostics import DiagnosticEngine
    from ..frontend import load as load_source
    from ..pipelines import Options, inference
    from .reference import run_reference
    b = batch_of(net, inputs)
    whole = [s.name for s in net.outputs if not s.batched]
    scaled = bool(whole) and b < net.batch
    diag = DiagnosticEngine()
    module = load_source(path, diag, load_batch or 1, options=options)
    if scaled and any(op.attrs.get("batch_axis", 0) == 1 for n in module.networks() for op in n.regions[0].ops
                      if op.name == "netc.input"):
        # the library's batch is the sequences' T (its leading axis), the source's batch axis is B (axis 1):
        # at b < T the call runs fewer steps, which the source scaled to batch b would not
        raise NetcInputError(f"'{os.path.basename(net.path)}' is time-major: its batch is the {net.batch} steps of "
                             f"its sequences, so a call of {b} runs {b} steps, and the reference (whose batch is "
                             f"the sequences' axis 1) cannot follow; compare it at its compiled batch ({net.batch})")
    try:
        if scaled or rescaled_batch:   # the call's b samples, or the batch `netc compile --batch B` compiled at
            from .scale import scale_inputs
            scale_inputs(module, batch=b if scaled else rescaled_batch)
        inference(module, Options(phase=phase), diag)
        if diag.has_errors():
            raise NetcError(diag.diagnostics[:])
    except NetcError as e:
        if scaled:
            e.note(f"the reference of '{os.path.basename(net.path)}' runs at batch {b}, the inputs' batch, for its "
                   f"output{'s' if len(whole) > 1 else ''} without a batch axis ({', '.join(whole)}: over the b "
                   f"samples of a call); at the compiled batch {net.batch} it needs no scaling")
        raise
    ref_in = {}
    for s in net.inputs:
        x = inputs[s.name].to(device)
        x = x.to(dtype) if x.is_floating_point() else x
        if not scaled and s.batched:   # at the compiled batch: samples past b are zeros (unread by batched outputs)
            x = torch.cat([x, x.new_zeros((net.batch - x.shape[0],) + tuple(x.shape[1:]))])
        ref_in[s.name] = x
    owners = {p["name"] for p in net.manifest.get("parameters", []) if "shares" not in p}
    ref_params = {k: v.to(dtype) for k, v in net.params().items() if k in owners}
    ref = run_reference(module, ref_in, ref_params, network=net.network, seed=seed, device=device, dtype=dtype)
    batched = {s.name: s.per_sample for s in net.outputs if s.batched}
    return {k: v[:b * batched[k]] if k in batched and not scaled else v for k, v in ref.items()}
