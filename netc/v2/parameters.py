"""paddle.parameters: PaddlePaddle v2's Parameters over a netc ParameterSet, and its tar files.

`create(layers)` makes the netc ParameterSet of the topology the layers reach (netc.api.parameters:
shared by name, initialized as netc.v2.layer's attributes say: PaddlePaddle's defaults). A Parameters
object shows it as PaddlePaddle does: names(), get_shape(name) (PaddlePaddle's dims: fc weights
[input width, size], biases [1, size], a convolution's filter [1, values] and shared bias
[num_filters, 1]), `params[name]` / get(name) a numpy copy in that shape, set(name, value) /
`params[name] = value` into the tensor training updates.

Tar files (PaddlePaddle's format, python/paddle/v2/parameters.py): for each parameter a member
`<name>` -- the header struct "IIQ" (0, 4, count) and the float32 values -- and a member
`<name>.protobuf`, its ParameterConfig (netc.v2.paramconf). `to_tar(f)` writes one, `from_tar(f)` reads
one into a Parameters whose values a topology takes by name when trained or inferred with (`bind`),
`init_from_tar(f)` copies a file's values into the parameters of equal name. Values are shown and
written in PaddlePaddle's order (netc.v2.layer.to_paddle): fc weights [input, size] row-major, a
convolution's filter [num_filters, channels, fh, fw] (netc's is HWIO), an fc weight reading an image
with its rows in CHW order (netc's images are HWC)."""
from __future__ import annotations

import io
import math
import tarfile

import numpy as np
import torch

from ..api import parameters as api_params
from ..api.errors import error, user_loc
from ..api.topology import as_topology
from . import paramconf
from .layer import PARAM_DIMS, PARAM_STATE, from_paddle, to_paddle
from .seqlayer import COMPOSITE, FIXED
from .names import missing_names


def _outputs(layers):
    return list(layers) if isinstance(layers, (list, tuple)) else [layers]


class Parameters:
    """PaddlePaddle's parameter pool: names, shapes (PaddlePaddle's dims), numpy values, tar files."""

    def __init__(self, pset=None, loose=None):
        self.pset = pset                 # netc ParameterSet (None: values read from a tar file only)
        self.loose = dict(loose or {})   # name -> (numpy values, dims) not yet in a ParameterSet

    # -- the mapping --------------------------------------------------------------------------------
    def _moving(self) -> list:
        """PaddlePaddle's batch norm moving mean / variance parameters of this set's layers."""
        held = self.held()
        return [n for n, (_, _, _, owner) in PARAM_STATE.items() if owner in held]

    def held(self) -> set:
        """The names the netc ParameterSet has (its parameters and their aliases; a set: `in` on the
        ParameterSet itself would build a did-you-mean for every miss)."""
        return set() if self.pset is None else set(self.pset.names()) | set(self.pset.aliases)

    def shown(self) -> list:
        """The ParameterSet's parameters as PaddlePaddle names them: a recurrent layer's per-gate netc
        parameters as their COMPOSITE PaddlePaddle parameter, its FIXED input selections left out."""
        if self.pset is None:
            return []
        held, parts, out = self.held(), {}, []
        for cname, c in COMPOSITE.items():
            if all(n in held for n, *_ in c.parts):
                parts.update({n: cname for n, *_ in c.parts})
        for n in self.pset:
            name = parts.get(n, n)
            if n not in FIXED and name not in out:
                out.append(name)
        return out

    def composite(self, key):
        """The Composite of a PaddlePaddle parameter this set holds as netc parts (else None)."""
        c = COMPOSITE.get(key)
        return c if c is not None and self.pset is not None and all(n in self.held() for n, *_ in c.parts) else None

    def names(self) -> list:
        own = self.shown() + self._moving()
        return own + [n for n in self.loose if n not in own]

    keys = names

    def has_key(self, key) -> bool:
        return key in self.names()

    def __contains__(self, key):
        return self.has_key(key)

    def __iter__(self):
        return iter(self.names())

    def __len__(self):
        return len(self.names())

    def _check(self, key, loc):
        if not isinstance(key, str) or key not in self.names():
            from ..diagnostics import did_you_mean
            hint = did_you_mean(str(key), self.names())
            raise error(f"no parameter {key!r}" + (f"; did you mean '{hint}'?" if hint else "")
                        + f" (parameters: {', '.join(self.names()[:8])}{' ...' if len(self) > 8 else ''})", loc)

    def get_shape(self, key) -> tuple:
        """PaddlePaddle's dims of a parameter (its ParameterConfig.dims, else (1, size))."""
        self._check(key, user_loc())
        if key in self.loose and key not in self.pset_names():
            return tuple(self.loose[key][1])
        if key in PARAM_STATE:
            return (1, PARAM_STATE[key][2])
        if self.composite(key) is not None:
            return COMPOSITE[key].dims
        size = self.pset[key].numel()
        dims = PARAM_DIMS.get(key)
        return tuple(dims) if dims and math.prod(dims) == size else (1, size) if len(self.pset[key].shape) < 2 \
            else tuple(self.pset[key].shape)

    def pset_names(self) -> list:
        """The names this set's netc ParameterSet holds (its parameters and batch norms' moving statistics)."""
        return self.shown() + self._moving()

    def __getitem__(self, key) -> np.ndarray:
        self._check(key, user_loc())
        if key in self._moving():
            state, start, c, _ = PARAM_STATE[key]
            t = self.pset.state.get(state)
            return (np.full(c, start) if t is None else t.detach().cpu().numpy()).reshape(1, c).astype(np.float32)
        if self.composite(key) is not None:
            c = COMPOSITE[key]
            return c.to_paddle(self.pset.numpy).reshape(c.dims).astype(np.float32)
        if key in self.held():
            return to_paddle(key, self.pset.numpy(key)).reshape(self.get_shape(key)).astype(np.float32)
        return self.loose[key][0].copy()

    get = __getitem__

    def __setitem__(self, key, value):
        loc = user_loc()
        self._check(key, loc)
        arr = np.asarray(value, dtype=np.float32)
        if arr.shape != self.get_shape(key):
            raise error(f"parameter '{key}' has shape {self.get_shape(key)}, the value {arr.shape}", loc)
        if key in self._moving():
            self._set_state(key, arr)
        elif self.composite(key) is not None:
            for n, v in COMPOSITE[key].from_paddle(arr).items():
                self.pset[n] = v
        elif key in self.held():
            with torch.no_grad():
                t = self.pset[key]
                t.copy_(torch.as_tensor(from_paddle(key, arr, tuple(t.shape))).to(t.dtype))
        else:
            self.loose[key] = (arr.copy(), arr.shape)

    def _set_state(self, key, arr):
        state, _, c, _ = PARAM_STATE[key]
        value = torch.as_tensor(np.asarray(arr, np.float32).reshape(c)).to(self.pset.dtype)
        if state in self.pset.state:
            with torch.no_grad():
                self.pset.state[state].copy_(value)
        else:
            self.pset.state[state] = value.clone()

    def set(self, parameter_name, value):
        self[parameter_name] = value

    def bind(self, layers):
        """The netc ParameterSet for the topology of `layers`: this set when it has every parameter;
        else one made for the topology (create) holding these values by name (tar files' values)."""
        top = as_topology(_outputs(layers) if len(_outputs(layers)) > 1 else _outputs(layers)[0])
        need = api_params.collect([top])
        held = self.held()
        if self.pset is not None and all(n in held for n, i in need.items() if not i.share_from) and \
                not any(n in self.loose for n in self.pset_names()):
            return self.pset
        fresh = fill_fixed(api_params.create(top))
        for n in [n for n in self.loose if n in COMPOSITE]:      # a recurrent layer's parameter: its netc parts
            if all(p in fresh for p, *_ in COMPOSITE[n].parts):
                for p, v in COMPOSITE[n].from_paddle(self.loose.pop(n)[0]).items():
                    self.loose[p] = (v, v.shape)
        values = {n: fresh[n] for n in fresh}
        infos = dict(fresh.infos)
        if self.pset is not None:                     # the values this set has win over fresh ones
            values.update({n: self.pset[n] for n in self.pset})
            infos.update({n: i for n, i in self.pset.infos.items() if n not in infos})
        for n, (arr, _) in list(self.loose.items()):
            if n in values:
                if arr.size != values[n].numel():
                    raise error(f"parameter '{n}' has {arr.size} values in the tar file and {values[n].numel()} "
                                f"in the topology", user_loc())
                with torch.no_grad():
                    values[n].copy_(torch.as_tensor(from_paddle(n, arr, tuple(values[n].shape))))
                del self.loose[n]
        self.pset = api_params.ParameterSet(values, infos, self.pset.state if self.pset is not None else {},
                                            [top])
        for n in self._moving():
            if n in self.loose:
                self._set_state(n, self.loose.pop(n)[0])
        return self.pset

    # -- tar files ----------------------------------------------------------------------------------
    def _config(self, name) -> bytes:
        dims = self.get_shape(name)
        first = COMPOSITE[name].parts[0][0] if name in COMPOSITE else name
        info = self.pset.infos.get(first) if self.pset is not None else None
        a = info.attrs if info is not None else {}
        if name in PARAM_STATE:                        # a moving statistic: is_static, starting at 0
            a = {"init": "constant", "value": 0.0}
        mean, std, strategy = 0.0, 0.01, 0
        if a.get("init") in ("gaussian", "normal"):
            mean, std = float(a.get("mean", 0.0)), float(a.get("std", 1.0))
        elif a.get("init") == "constant":
            mean, std = float(a.get("value", 1.0)), 0.0
        elif a.get("init") == "uniform":
            lo, hi = float(a.get("low", -1.0)), float(a.get("high", 1.0))
            mean, std, strategy = (lo + hi) / 2, (hi - lo) / 2, 1
        return paramconf.encode(name, math.prod(dims), dims, mean, std, strategy)

    def serialize(self, name, f):
        arr = self[name].astype(np.float32)
        f.write(paramconf.HEADER.pack(0, 4, arr.size))
        f.write(arr.tobytes())

    def to_tar(self, f):
        """Write PaddlePaddle's parameter tar file to the file object f (binary, or a text file's buffer)."""
        tar = tarfile.TarFile(fileobj=binary_file(f, user_loc()), mode="w")
        for name in self.names():
            for member, data in ((name, None), (f"{name}.protobuf", self._config(name))):
                if data is None:
                    buf = io.BytesIO()
                    self.serialize(name, buf)
                    data = buf.getvalue()
                info = tarfile.TarInfo(name=member)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        tar.close()

    @staticmethod
    def from_tar(f) -> "Parameters":
        """A Parameters of every parameter in PaddlePaddle's tar file (binary file object f)."""
        return Parameters(None, _read_tar(f, user_loc()))

    def init_from_tar(self, f, exclude_params=()):
        """Copy the tar file's values into the parameters of equal name (others are left as they are)."""
        loc = user_loc()
        for name, (arr, dims) in _read_tar(f, loc).items():
            if name in self.names() and name not in exclude_params:
                if arr.size != math.prod(self.get_shape(name)):
                    raise error(f"parameter '{name}': {arr.size} values in the tar file, {self.get_shape(name)} here",
                                loc)
                self[name] = arr.reshape(self.get_shape(name))

    def __repr__(self):
        return f"<paddle Parameters: {len(self)} parameters>"


def binary_file(f, loc):
    """f, or the bytes under a text file: the book's Python 2 programs open their tar files with 'w' / 'r',
    which Python 2 made binary; Python 3's text file of the same open() writes and reads its buffer here."""
    if not isinstance(f, io.TextIOBase):
        return f
    if getattr(f, "buffer", None) is None:
        raise error(f"a parameter tar file needs a binary file object (open(..., 'wb') / 'rb'), got {type(f).__name__}",
                    loc)
    f.flush()
    return f.buffer


def _read_tar(f, loc) -> dict:
    try:
        tar = tarfile.TarFile(fileobj=binary_file(f, loc), mode="r")
        members = {m.name: m for m in tar.getmembers()}
    except tarfile.TarError as e:
        raise error(f"not a PaddlePaddle parameter tar file: {e}", loc) from None
    out = {}
    for mname in members:
        if not mname.endswith(".protobuf"):
            continue
        try:
            conf = paramconf.decode(tar.extractfile(members[mname]).read())
        except ValueError as e:
            raise error(f"member '{mname}' of the tar file is no ParameterConfig ({e})", loc) from None
        name = conf["name"]
        if name not in members:
            raise error(f"the tar file has '{mname}' but no member '{name}' with its values", loc)
        raw = tar.extractfile(members[name]).read()
        arr = np.frombuffer(raw[paramconf.HEADER.size:], dtype=np.float32)
        dims = tuple(conf["dims"]) or (1, conf["size"])
        if arr.size != math.prod(dims):
            raise error(f"parameter '{name}' in the tar file: {arr.size} values for dims {list(dims)}", loc)
        out[name] = (arr.reshape(dims).copy(), dims)
    return out


def create(layers) -> Parameters:
    """The parameters of the topology `layers` (a cost, an output layer, or a list) reach."""
    outs = _outputs(layers)
    with_loc = user_loc()
    if not outs:
        raise error("paddle.parameters.create needs a layer", with_loc)
    return Parameters(fill_fixed(api_params.create(as_topology(outs if len(outs) > 1 else outs[0]))))


def fill_fixed(pset):
    """The ParameterSet with its FIXED parameters (recurrent layers' input selections) set."""
    for n in pset.names():
        if n in FIXED:
            pset[n] = FIXED[n]
    return pset


__all__ = ["Parameters", "create"]
__getattr__ = missing_names(__name__, __all__)
