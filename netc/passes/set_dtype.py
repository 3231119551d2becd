"""set-dtype: compile a network's floating tensors and parameters in f32, bf16 or f16.

Every floating value (inputs, activations) and every floating parameter gets the requested
dtype; integer tensors (labels, indices fed as i32/i64) are left alone. The memory plan then sizes
buffers by the new types, and codegen specializes every kernel for them: kernels load their
operands in their own dtype, compute and accumulate in f32, and store in the result's dtype
(netc/kernels/common.py).

What stays f32 in a 16-bit network, as serious mixed-precision inference stacks do (PyTorch
autocast's f32 op list, apex's keep_batchnorm_fp32, cuDNN's f32 batch-norm parameters,
TensorRT/ONNX Runtime keeping reductions to probabilities and losses in f32). Each op declares
these facts in its OpDef (netc/ops/registry.py), the pass never switches on op names:

* results of ops with `f32_result`: softmax probabilities (tiny tensors; an exp-normalized row
  loses the small classes in bf16), losses, and class indices (ArgSort/Accuracy: bf16 holds
  integers exactly only up to 256);
* parameters in an op's `f32_params` roles: batch norm's folded per-channel scale and shift
  (a per-channel factor rounded to bf16 is a systematic 0.4% error on the whole channel, and it
  costs C values). A parameter bound to such a role anywhere stays f32 everywhere; parameters
  that share storage (share_from) take one dtype, f32 if any of them needs it;
* views and identities (reshape, dropout at inference) keep their operand's dtype, so they stay
  free aliases of its bytes instead of needing a converting copy;
* in a training program, optimizer state and running statistics (parameters marked `state`: an
  Adam step count in bf16 would stop counting at 256, its moments would lose small updates) and
  the program's own inputs (the learning rate) stay f32.

Weights and biases take the requested dtype (a weight is a tensor-core operand; a bias is added
to the f32 accumulator and rounded with the result anyway). Accumulation is always f32.

TF32: option `tf32` lets f32 matrix products (conv2d, inner product) use TF32 tensor cores
(`tl.dot(..., input_precision="tf32")`); off by default, and meaningless for f16/bf16. Option `tf32x3`
computes each f32 product as three TF32 ones instead (3xTF32, `input_precision="tf32x3"`: each operand a
TF32 value plus the TF32 value of its remainder; about f32's accuracy, on the tensor cores).

The decision is recorded on the network op as `netc.precision = {dtype, accumulate, tf32}` (and
`tf32x3: true` when set) for codegen (lowering reads tf32 and tf32x3 there) and the manifest. Options:
ctx.options["set_dtype"] = {"dtype": "f32" | "bf16" | "f16" (also "fp16", "fp32"), "tf32": bool,
"tf32x3": bool}; `netc opt -p set-dtype
--dtype bf16`, `netc compile --dtype bf16`, `netc run --target interp --dtype fp16` set them.
"""
from __future__ import annotations

from ..diagnostics import NetcError, did_you_mean
from ..ir.core import STRUCTURAL_OPS, TensorType
from ..ops import lookup
from .registry import Pass, register_pass

FLOAT_DTYPES = ("f16", "bf16", "f32", "f64")
# user spellings -> IR dtype names
DTYPE_NAMES = {"f32": "f32", "fp32": "f32", "bf16": "bf16", "f16": "f16", "fp16": "f16"}
COMPILE_DTYPES = ("f32", "bf16", "fp16")   # as the CLI lists them


def parse_dtype(name: str, what: str = "--dtype") -> str:
    """The IR dtype for a user's spelling ('fp16' -> 'f16'), or a NetcError naming the choices."""
    if name in DTYPE_NAMES:
        return DTYPE_NAMES[name]
    hint = did_you_mean(str(name), list(DTYPE_NAMES))
    raise NetcError(f"unknown {what} '{name}' (supported: {', '.join(COMPILE_DTYPES)})"
                    + (f"; did you mean '{hint}'?" if hint else ""))


@register_pass
class SetDtype(Pass):
    name = "set-dtype"
    title = "SetDtype"
    requires = ("materialize-params",)
    summary = "compile floating tensors and parameters in f32, bf16 or f16 (f32 accumulation; optional TF32)"

    def run(self, module, ctx):
        opts = dict(ctx.options.get("set_dtype") or {})
        dtype, tf32, x3 = opts.get("dtype"), bool(opts.get("tf32", False)), bool(opts.get("tf32x3", False))
        if dtype is None and not tf32 and not x3:
            raise NetcError("set-dtype needs a dtype: give --dtype f32, bf16 or fp16 (or --tf32, --tf32x3)")
        if tf32 and x3:
            raise NetcError("--tf32 and --tf32x3 are two ways to compute f32 products: give one of them")
        if dtype is not None:
            dtype = parse_dtype(dtype)
        for flag, on in (("--tf32", tf32), ("--tf32x3", x3)):
            if on and dtype not in (None, "f32"):
                raise NetcError(f"{flag} applies to f32 matrix products; a {dtype} network has none "
                                f"(use --dtype f32 {flag}, or drop {flag})")
        set_dtype(module, dtype, tf32, x3)


def _is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def set_dtype(module, dtype: str | None, tf32: bool = False, tf32x3: bool = False) -> None:
    """Rewrite `module` in place (see the module docstring). dtype None keeps the types as written
    (only records tf32 and tf32x3)."""
    params = {p.attrs["sym_name"]: p for p in module.params()}
    if dtype is not None:
        _set_param_dtypes(module, params, dtype)
        for net in module.networks():
            _set_value_dtypes(net, dtype)
    for net in module.networks():
        prec = {"accumulate": "f32", "tf32": bool(tf32), **({"tf32x3": True} if tf32x3 else {})}
        if dtype is not None:
            prec = {"dtype": dtype, **prec}
        net.attrs["netc.precision"] = prec


def _set_param_dtypes(module, params: dict, dtype: str) -> None:
    keep: set = set()                       # parameters bound to an f32 role somewhere
    for net in module.networks():
        for op in net.regions[0].ops:
            d = lookup(op.name)
            if d is None or not d.f32_params:
                continue
            for role, ref in (op.attrs.get("params") or {}).items():
                if role in d.f32_params and hasattr(ref, "name"):
                    keep.add(ref.name)

    # share_from ties a parameter to its owner's bytes: one dtype per owner and its sharers
    def root(name):
        owner = params[name].attrs.get("share_from") if name in params else None
        return owner.name if owner is not None and owner.name in params else name
    keep_roots = {root(n) for n in keep if n in params}
    for name, p in params.items():
        t = p.attrs.get("type")
        if not isinstance(t, TensorType) or not _is_float(t.dtype):
            continue
        want = "f32" if (root(name) in keep_roots or p.attrs.get("state")) else dtype
        p.attrs["type"] = TensorType(t.shape, want)


def _set_value_dtypes(net, dtype: str) -> None:
    for op in net.regions[0].ops:
        if op.name in STRUCTURAL_OPS:
            continue
        d = lookup(op.name)
        for r in op.results:
            t = r.type
            if not _is_float(t.dtype):
                continue
            if d is not None and d.f32_result:
                want = "f32"
            elif d is not None and (d.view or d.identity_at_inference) and op.operands \
                    and _is_float(op.operands[0].type.dtype):
                want = op.operands[0].type.dtype   # stays a free alias of its operand's bytes
            else:
                want = dtype
            r.type = TensorType(t.shape, want)
        if op.name == "netc.input" and op.attrs.get("role"):
            for r in op.results:   # a training program's own inputs (the learning rate) stay as they are
                r.type = TensorType(r.type.shape, op.attrs.get("dtype", r.type.dtype))
        elif op.name == "netc.input" and _is_float(op.attrs.get("dtype", "f32")):
            op.attrs["dtype"] = op.results[0].type.dtype


def precision_of(net) -> dict:
    """The precision a network runs in: {dtype, accumulate, tf32} (and tf32x3: true when set). dtype is
    set-dtype's choice, or (without it) the narrowest floating dtype of the network's values, as the file
    declares them."""
    prec = dict(net.attrs.get("netc.precision") or {})
    floats = {r.type.dtype for op in net.regions[0].ops if op.name not in STRUCTURAL_OPS for r in op.results}
    narrowest = next((d for d in ("bf16", "f16", "f32", "f64") if d in floats), "f32")
    return dict(dtype=prec.get("dtype", narrowest), accumulate="f32", tf32=bool(prec.get("tf32", False)),
                **({"tf32x3": True} if prec.get("tf32x3") else {}))
