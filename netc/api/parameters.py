"""Parameters of one or several topologies: `params = netc.parameters.create([t1, t2], seed=0)`.

create() compiles each topology (the default pipeline's materialize-params names and shapes every
parameter), puts the parameters of equal names together -- ONE tensor per name, so training one
topology updates what the other reads -- and initializes them: per parameter by its binding's
`init` (ParamAttr / .nd), each tensor from its own generator seeded by (seed, name), so a value does
not depend on what else is initialized (netc/ops/initializers.py draws them, for `netc run` too):

    (none)                  the reference executor's draw (netc.runtime.reference.random_param, what
                            `netc run --reference --seed` uses): weights N(0, 1/fan_in), biases and
                            shifts N(0, 0.1^2), scales 1 + N(0, 0.1^2)
    constant                value (default 1, SINGA's)
    gaussian, normal        N(mean, std^2) (defaults 0, 1), times value when given (SINGA's kGaussian)
    uniform                 U(low, high) (defaults -1, 1), times value when given (kUniform)
    gaussian_sqrt_fan_in    N(mean, std^2) * value / sqrt(fan_in)        (SINGA's kGaussianSqrtFanIn)
    uniform_sqrt_fan_in     U(low, high) * value / sqrt(fan_in / 3)      (kUniformSqrtFanIn)
    uniform_sqrt_fan_in_out U(low, high) * value / sqrt(fan_in + fan_out) (kUniformSqrtFanInOut)
    xavier                  U(-a, a), a = sqrt(6 / (fan_in + fan_out))   (Glorot and Bengio)
    msra                    N(0, 2 / fan_in)                              (He et al.)

fan_in is the product of all but the last axis of netc's weight layouts ([K, M] inner products, HWIO
filters), fan_out the last axis times the window (kh * kw).

A ParameterSet maps names to torch tensors (the parameters; share_from aliases read as views of
their owners) and keeps training state beside them (`state`: optimizer moments, batch norm's running
statistics) so that successive train() calls go on where the last one stopped. save()/load() write
and read .npz or .safetensors (netc/runtime/params.py), state included, as `netc run --train -o`
writes them; save(path, state=False) writes the parameters alone, what `netc run --reference
--params` and `netc compile --params` take.
"""
from __future__ import annotations

from collections.abc import Mapping

import torch

from ..diagnostics import did_you_mean
from ..runtime.params import read_params, read_safetensors, write_params
from ..ops.initializers import INITS, init_tensor
from ..runtime.reference import random_param
from .errors import error, user_errors, user_loc
from .topology import as_topology



class ParamInfo:
    """What a topology says about one parameter: shape, role, binding attributes, where it was made."""

    __slots__ = ("name", "shape", "role", "attrs", "loc", "topology", "share_from")

    def __init__(self, name, shape, role, attrs, loc, topology, share_from=None):
        self.name, self.shape, self.role, self.attrs, self.loc = name, tuple(shape), role, attrs, loc
        self.topology, self.share_from = topology, share_from

    def __repr__(self):
        return f"<Param {self.name} {list(self.shape)} ({self.role})>"


def collect(tops) -> dict:
    """{name: ParamInfo} over the topologies; equal names must have equal shapes (else an Error naming
    both call sites)."""
    from ..ir.query import param_roles
    out: dict = {}
    for top in tops:
        m = top.module()
        roles = param_roles(m)
        for p in m.params():
            if "state" in p.attrs:
                continue
            n = p.attrs["sym_name"]
            sf = p.attrs.get("share_from")
            info = ParamInfo(n, p.attrs["type"].shape, roles.get(n, "weight"),
                             {k: v for k, v in p.attrs.items() if k not in ("sym_name", "type", "share_from")},
                             p.loc, top.name, sf.name if sf is not None else None)
            first = out.get(n)
            if first is None:
                out[n] = info
            elif first.shape != info.shape:
                raise error(f"parameter '{n}' is shared with a different shape: {list(info.shape)} in topology "
                            f"'{top.name}', {list(first.shape)} in topology '{first.topology}'", info.loc,
                            [("the other use is made here", first.loc)])
            elif (first.share_from or None) != (info.share_from or None):
                raise error(f"parameter '{n}' shares from '{info.share_from}' here and from '{first.share_from}' in "
                            f"topology '{first.topology}'", info.loc, [("the other use is made here", first.loc)])
            else:
                for k, v in info.attrs.items():     # a binding's init attributes apply wherever it is used
                    first.attrs.setdefault(k, v)
    return out


def initial_value(info: ParamInfo, seed: int = 0, dtype=torch.float32) -> torch.Tensor:
    """The initial tensor of a parameter (the module doc's table; ops/initializers.py draws it)."""
    init = info.attrs.get("init")
    if init is None:
        return random_param(info.name, info.shape, info.role, seed, torch.float64).to(dtype)
    if init not in INITS:
        hint = did_you_mean(str(init), INITS)
        raise error(f"parameter '{info.name}': unknown init '{init}'" + (f"; did you mean '{hint}'?" if hint else "")
                    + f" (inits: {', '.join(INITS)})", info.loc)
    try:
        return init_tensor(info.name, info.shape, info.attrs, seed, torch.float64).to(dtype)
    except ValueError as e:
        raise error(str(e), info.loc) from None


class ParameterSet(Mapping):
    """Parameters by name (torch tensors, one per name) and training state beside them.

    params["fc.weight"]            the tensor (an alias: a view of its owner)
    params["fc.weight"] = array    copied into the tensor in place (everything sharing it sees it)
    params.names(), params.shapes  the parameters with storage, their shapes
    params.state                   {name: tensor} optimizer state and running statistics
    params.save("w.npz" | "w.safetensors"), params.load(path), netc.parameters.load(path)
    """

    def __init__(self, values: dict, infos: dict | None = None, state: dict | None = None, topologies=()):
        self._values = dict(values)
        self.infos = dict(infos or {})
        self.aliases = {n: i.share_from for n, i in self.infos.items() if i.share_from}
        self.state = dict(state or {})
        self.topologies = list(topologies)

    # -- the mapping -----------------------------------------------------------------------------
    def __getitem__(self, name: str) -> torch.Tensor:
        if name in self._values:
            return self._values[name]
        if name in self.aliases:
            return self._values[self.aliases[name]].reshape(self.infos[name].shape)
        hint = did_you_mean(name, list(self._values) + list(self.aliases))
        raise KeyError(f"no parameter '{name}'" + (f"; did you mean '{hint}'?" if hint else ""))

    def __iter__(self):
        return iter(self._values)

    def __len__(self):
        return len(self._values)

    def __setitem__(self, name: str, value) -> None:
        """Copy `value` into the parameter's tensor (in place: every topology sharing it sees the change)."""
        t = self[name] if (name in self._values or name in self.aliases) else None
        if t is None:
            raise error(f"no parameter '{name}' to set (parameters: {', '.join(list(self._values)[:8])}"
                        f"{', ...' if len(self._values) > 8 else ''})", user_loc())
        v = torch.as_tensor(value)
        if tuple(v.shape) != tuple(t.shape):
            raise error(f"parameter '{name}' has shape {list(t.shape)}, the value {list(v.shape)}", user_loc())
        with torch.no_grad():
            t.copy_(v.to(t.dtype))

    def names(self) -> list:
        return list(self._values)

    @property
    def shapes(self) -> dict:
        return {n: tuple(t.shape) for n, t in self._values.items()}

    @property
    def dtype(self):
        return next(iter(self._values.values())).dtype if self._values else torch.float32

    def numpy(self, name: str):
        """A parameter's values as a numpy array (a copy)."""
        return self[name].detach().cpu().numpy().copy()

    def tensors(self, names) -> dict:
        """{name: tensor} for the given names, from the parameters and the state (the ones present)."""
        out = {}
        for n in names:
            if n in self._values:
                out[n] = self._values[n]
            elif n in self.state:
                out[n] = self.state[n]
        return out

    def adopt_state(self, tensors: dict) -> None:
        """Keep the state tensors a training run created (its optimizer state, running statistics)."""
        for n, t in tensors.items():
            if n not in self._values and n not in self.aliases and n not in self.state:
                self.state[n] = t

    def __repr__(self):
        total = sum(t.numel() for t in self._values.values())
        return f"<ParameterSet: {len(self._values)} parameters, {total:,} values, {len(self.state)} state tensors>"

    # -- files -----------------------------------------------------------------------------------
    def save(self, path: str, state: bool = True) -> None:
        """Write the parameters (and, with state, the training state) as .npz or .safetensors (by the
        extension). Without state the file is what `netc run --reference --params` and `netc compile
        --params` take; with it, what `netc run --train --params` and load() take."""
        kept = self.state if state else {}
        with user_errors(user_loc()):
            write_params(path, {**self._values, **kept},
                         {"netc_state": ",".join(kept)} if str(path).endswith(".safetensors") else None)

    def load(self, path: str, strict: bool = True) -> "ParameterSet":
        """Read a file's tensors into this set, in place (shapes checked; with strict, every parameter of
        the set must be in the file). Names that are not parameters become state."""
        loc = user_loc()
        with user_errors():
            got = read_params(path, "parameters")
        missing = [n for n in self._values if n not in got]
        if strict and missing:
            raise error(f"'{path}' lacks parameter{'s' if len(missing) > 1 else ''} "
                        f"{', '.join(map(repr, missing[:6]))}{' ...' if len(missing) > 6 else ''}", loc)
        for n, t in got.items():
            if n in self._values:
                if tuple(t.shape) != tuple(self._values[n].shape):
                    raise error(f"parameter '{n}' in '{path}' has shape {list(t.shape)}, the set "
                                f"{list(self._values[n].shape)}", loc)
                with torch.no_grad():
                    self._values[n].copy_(t.to(self._values[n].dtype))
            elif n in self.state and tuple(self.state[n].shape) == tuple(t.shape):
                with torch.no_grad():
                    self.state[n].copy_(t.to(self.state[n].dtype))
            elif n not in self.aliases:
                self.state[n] = t.to(self.dtype) if t.is_floating_point() else t
        return self


def create(topologies, seed: int = 0, dtype=torch.float32) -> ParameterSet:
    """Every parameter of one or several topologies (or output layers), shared by name, initialized
    (seeded) -- the module doc's rules."""
    loc = user_loc()
    tops = [as_topology(t) for t in (topologies if isinstance(topologies, (list, tuple)) else [topologies])]
    if not tops:
        raise error("netc.parameters.create needs at least one topology", loc)
    infos = collect(tops)
    values = {n: initial_value(i, seed, dtype) for n, i in infos.items() if not i.share_from}
    for n, i in infos.items():
        if i.share_from and i.share_from not in values:
            raise error(f"parameter '{n}' shares from '{i.share_from}', which no topology defines", i.loc)
    return ParameterSet(values, infos, {}, tops)


def load(path: str, dtype=torch.float32) -> ParameterSet:
    """A ParameterSet of every tensor in a .npz / .safetensors file. A .safetensors file written by save()
    says which tensors are state; from an .npz every tensor is taken as a parameter (a training program
    takes the names it declares from the parameters or the state alike)."""
    with user_errors():
        if str(path).endswith(".safetensors"):
            got, meta = read_safetensors(path, "parameters")
        else:
            got, meta = read_params(path, "parameters"), {}
    state_names = set(filter(None, meta.get("netc_state", "").split(",")))
    conv = {n: (t.to(dtype) if t.is_floating_point() else t) for n, t in got.items()}
    return ParameterSet({n: t for n, t in conv.items() if n not in state_names},
                        state={n: t for n, t in conv.items() if n in state_names})


__all__ = ["ParameterSet", "ParamInfo", "create", "load", "collect", "initial_value", "INITS"]
