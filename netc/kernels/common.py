"""Pieces shared by the kernels: activation codes, the fused GEMM epilogue, the dot step, and the
host-side helpers that turn netc attributes (strides, padding, dtypes) into kernel arguments.

The epilogue order is fixed and documented once, here, for gemm and conv2d alike:

    y = acc                      (fp32 accumulator of A @ B)
    y = y + bias[col]            HAS_BIAS
    y = y * scale[col] + shift[col]   HAS_AFFINE (a folded batch norm)
    y = y + residual             HAS_RESIDUAL and not RESIDUAL_AFTER_ACT   (ResNet: relu(bn(conv) + x))
    y = act(y)                   ACTIVATION
    y = y + residual             HAS_RESIDUAL and RESIDUAL_AFTER_ACT
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import triton
import triton.language as tl

from ..ops.geometry import pair, window_geometry  # noqa: F401  (re-exported for the launchers)

# ACTIVATION constexpr codes (shared by every kernel with a fused activation).
ACT_NONE, ACT_RELU, ACT_SIGMOID, ACT_TANH, ACT_LEAKY_RELU, ACT_STANH = 0, 1, 2, 3, 4, 5
ACTIVATIONS = {"none": ACT_NONE, "relu": ACT_RELU, "sigmoid": ACT_SIGMOID, "tanh": ACT_TANH,
               "leaky_relu": ACT_LEAKY_RELU, "stanh": ACT_STANH}

# torch dtype -> the Triton signature type of a pointer to it (used by the AOT compiler).
POINTER_TYPES = {torch.float32: "*fp32", torch.float16: "*fp16", torch.bfloat16: "*bf16"}
FLOAT_DTYPES = tuple(POINTER_TYPES)

# Triton's CPU interpreter (TRITON_INTERPRET=1, read when a kernel is decorated) keeps bf16 blocks
# as NumPy uint16 (NumPy has no bf16) and its tl.dot (interpreter.py create_dot, triton 3.6-3.9)
# calls np.matmul on those raw integers: only fp8 operands are converted first. Every other bf16
# operation converts properly. So under the interpreter mma() widens bf16 operands to fp32 first,
# which is exact and what tensor cores compute (exact products, fp32 accumulation).
# The interpreter's tl.dot also ignores input_precision (np.matmul in fp32): for TF32, mma()
# truncates fp32 operands to TF32's 10-bit mantissa as the tensor cores do with fp32 registers.
INTERPRETING = tl.constexpr(bool(triton.knobs.runtime.interpret))


def _squeeze_interpreter_index():
    """Triton 3.6's interpreter converts a scalar to a Python int (a loop bound: `range(0, n)` over a
    runtime argument) with int(handle.data), and its scalars are 1-element 1-D arrays, which NumPy 2.4
    and later refuse ('only 0-dimensional arrays can be converted to Python scalars'): every kernel with
    such a loop failed. Later Triton squeezes the array first; this makes 3.6 do the same (the GPU
    machine's image pairs Triton 3.6 with NumPy 2.5). It wraps the interpreter's per-launch patching of
    tl.tensor, so the scope it records still restores everything after the launch."""
    import inspect

    from triton.runtime import interpreter
    patch = getattr(interpreter, "_patch_lang_tensor", None)
    if patch is None or getattr(patch, "netc_squeezes_index", False):
        return
    if list(inspect.signature(patch).parameters) != ["tensor", "scope"]:
        return   # another interpreter layout than Triton 3.6-3.9's: leave it as it is

    def patch_lang_tensor(tensor, scope):
        patch(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0])
                       if self.handle.data.size == 1 else int(self.handle.data))

    patch_lang_tensor.netc_squeezes_index = True
    interpreter._patch_lang_tensor = patch_lang_tensor


def _no_overflow_checks():
    """Triton's interpreter checks every 32-bit integer add, sub and mul for overflow (its builder's
    `sanitize_overflow`, on by default): each becomes a cast to int64, the operation again, two
    comparisons and an assert, about a third of the interpreter's time on netc's kernels. The compiled
    kernels check nothing unless built with debug=True, so neither does the interpreter here
    (NETC_INTERPRETER_CHECKS=1 keeps them: they catch 32-bit index overflow, which needs tensors of
    2**31 elements, beyond what the interpreter runs)."""
    import dataclasses
    import os

    from triton.runtime import interpreter
    if os.environ.get("NETC_INTERPRETER_CHECKS") == "1":
        return
    builder = getattr(interpreter, "interpreter_builder", None)
    options = getattr(builder, "options", None)
    if options is None or not getattr(options, "sanitize_overflow", False) or not dataclasses.is_dataclass(options):
        return   # another interpreter layout than Triton 3.6-3.9's: leave it as it is
    builder.options = dataclasses.replace(options, sanitize_overflow=False)


class _AlreadyPatched:
    """What a nested device-function call gets instead of a fresh patching: nothing to restore."""

    def restore(self):
        pass


def _patch_once_per_launch():
    """Triton's interpreter patches triton.language (every builtin, tl.tensor's operators, tl.core)
    when a kernel launches and restores it when the launch ends; it patches the same modules AGAIN on
    every call of a nested @triton.jit function (interpreter.py InterpretedFunction.__call__, Triton
    3.6-3.9), and that scope is never restored. netc's kernels call their helpers (activate, mma, the
    epilogue) once per tile, so that repetition was about 40% of the interpreter's time. The patch
    depends only on which of tl and tl.core the function's globals hold (Triton's own helpers, tl.cdiv,
    tl.zeros, tl.sum, see tl.core; netc's see tl): a nested call whose modules this launch has already
    patched skips it; anything else patches as before."""
    import inspect

    from triton.runtime import interpreter
    patch = getattr(interpreter, "_patch_lang", None)
    if patch is None or getattr(patch, "netc_once_per_launch", False):
        return
    if list(inspect.signature(patch).parameters) != ["fn"]:
        return   # another interpreter layout than Triton 3.6-3.9's: leave it as it is
    patched = []   # the modules patched in the launch in progress (one at most: launches do not nest)

    def modules_of(fn):
        return frozenset(id(v) for v in getattr(fn, "__globals__", {}).values() if v is tl or v is tl.core)

    def patch_lang(fn):
        modules = modules_of(fn)
        if patched and modules <= patched[0]:
            return _AlreadyPatched()
        scope = patch(fn)
        if patched:               # a nested call's patching is never restored: it holds to the launch's end
            patched[0] |= modules
        elif modules:
            patched.append(set(modules))
            restore = scope.restore

            def restore_then_forget():
                patched.clear()
                restore()

            scope.restore = restore_then_forget
        return scope

    patch_lang.netc_once_per_launch = True
    interpreter._patch_lang = patch_lang


if INTERPRETING:
    _squeeze_interpreter_index()
    _no_overflow_checks()
    _patch_once_per_launch()


@triton.jit
def activate(x, ACTIVATION: tl.constexpr, slope):
    """Apply activation ACTIVATION to an fp32 block; `slope` is leaky ReLU's negative slope."""
    if ACTIVATION == 1:
        x = tl.maximum(x, 0.0)
    elif ACTIVATION == 2:
        x = 1.0 / (1.0 + tl.exp(-x))
    elif ACTIVATION == 3:
        # tanh from exp(-2|x|): no overflow, exact sign, no libdevice (the interpreter has none)
        t = tl.exp(-2.0 * tl.abs(x))
        y = (1.0 - t) / (1.0 + t)
        x = tl.where(x < 0.0, -y, y)
    elif ACTIVATION == 4:
        x = tl.where(x < 0.0, x * slope, x)
    elif ACTIVATION == 5:
        # SINGA's scaled tanh, A tanh(B x) (ops/activation.py STANH_A, STANH_B), tanh as above
        t = tl.exp(-2.0 * tl.abs(0.66666667 * x))
        y = 1.7159047 * (1.0 - t) / (1.0 + t)
        x = tl.where(x < 0.0, -y, y)
    return x


@triton.jit
def grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of program `pid` in the grouped ordering of the matrix-product kernels (gemm,
    conv2d and its gradients): GROUP_M row blocks share each column block while it is hot in L2."""
    width = GROUP_M * num_pid_n
    group = pid // width
    first_m = group * GROUP_M
    group_size = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % group_size
    pid_n = (pid % width) // group_size
    return pid_m, pid_n


@triton.jit
def to_tf32(x):
    """An fp32 block with the low 13 mantissa bits cleared: the TF32 value a tensor core reads."""
    return (x.to(tl.uint32, bitcast=True) & 0xFFFFE000).to(tl.float32, bitcast=True)


# ALLOW_TF32's values (tf32_mode): fp32 products in IEEE fp32, on TF32 tensor cores, or as three TF32
# products (3xTF32: each operand split into a TF32 "big" part and the TF32 of its remainder; big*big +
# big*small + small*big, the small*small term dropped: about fp32's accuracy at tensor-core speed)
TF32X3 = 3


def tf32_mode(allow_tf32):
    """The ALLOW_TF32 constexpr of a launcher's `allow_tf32`: False/None (IEEE), True (TF32) or "tf32x3"
    (3xTF32: TF32X3). Booleans stay booleans, so the specializations of the first two keep their keys."""
    if allow_tf32 in ("tf32x3", TF32X3):
        return TF32X3
    if allow_tf32 in (None, False, True, 0, 1):
        return bool(allow_tf32)
    raise ValueError(f"allow_tf32 is False, True or 'tf32x3', got {allow_tf32!r}")


@triton.jit
def tf32_split(x):
    """(big, small): x's TF32 value and the TF32 value of what is left (3xTF32's operands, as the
    interpreter computes them; compiled, Triton splits them itself)."""
    big = to_tf32(x)
    return big, to_tf32(x - big)


@triton.jit
def mma(a, b, acc, ALLOW_TF32: tl.constexpr):
    """acc += a @ b with an fp32 accumulator. fp32 operands use TF32 tensor cores when ALLOW_TF32 is
    True, three TF32 products when it is TF32X3 (3xTF32), otherwise full IEEE fp32 ("ieee").
    fp16/bf16 operands (b is converted to a's dtype when they differ) multiply exactly on the tensor
    cores and ignore ALLOW_TF32."""
    if a.dtype != b.dtype:
        b = b.to(a.dtype)
    if a.dtype == tl.float32:
        if ALLOW_TF32 == 3:        # TF32X3 (a literal: a jitted function reads no module globals)
            if INTERPRETING:
                a_big, a_small = tf32_split(a)
                b_big, b_small = tf32_split(b)
                acc = tl.dot(a_small, b_big, acc, input_precision="ieee")
                acc = tl.dot(a_big, b_small, acc, input_precision="ieee")
                acc = tl.dot(a_big, b_big, acc, input_precision="ieee")
            else:
                acc = tl.dot(a, b, acc, input_precision="tf32x3")
        elif ALLOW_TF32:
            if INTERPRETING:
                a = to_tf32(a)
                b = to_tf32(b)
            acc = tl.dot(a, b, acc, input_precision="tf32")
        else:
            acc = tl.dot(a, b, acc, input_precision="ieee")
    else:
        if INTERPRETING:
            if a.dtype == tl.bfloat16:
                a = a.to(tl.float32)
                b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    return acc


@triton.jit
def epilogue(acc, offs_m, offs_n, mask_m, mask_n,
             bias_ptr, scale_ptr, shift_ptr, res_ptr, stride_rm, stride_rn, slope,
             HAS_BIAS: tl.constexpr, HAS_AFFINE: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
             RESIDUAL_AFTER_ACT: tl.constexpr, ACTIVATION: tl.constexpr):
    """The fused epilogue of a [BLOCK_M, BLOCK_N] fp32 tile (order in the module docstring).
    offs_m must already be int64 when the residual can be large."""
    if HAS_BIAS:
        bias = tl.load(bias_ptr + offs_n, mask=mask_n, other=0.0).to(tl.float32)
        acc = acc + bias[None, :]
    if HAS_AFFINE:
        scale = tl.load(scale_ptr + offs_n, mask=mask_n, other=0.0).to(tl.float32)
        shift = tl.load(shift_ptr + offs_n, mask=mask_n, other=0.0).to(tl.float32)
        acc = acc * scale[None, :] + shift[None, :]
    if HAS_RESIDUAL:
        r_ptrs = res_ptr + offs_m[:, None] * stride_rm + offs_n[None, :] * stride_rn
        res = tl.load(r_ptrs, mask=mask_m[:, None] & mask_n[None, :], other=0.0).to(tl.float32)
        if not RESIDUAL_AFTER_ACT:
            acc = acc + res
    acc = activate(acc, ACTIVATION, slope)
    if HAS_RESIDUAL:
        if RESIDUAL_AFTER_ACT:
            acc = acc + res
    return acc


# --------------------------------------------------------------------------- host-side helpers

def activation_code(activation) -> int:
    if isinstance(activation, int):
        if activation not in ACTIVATIONS.values():
            raise ValueError(f"unknown activation code {activation}")
        return activation
    try:
        return ACTIVATIONS[activation or "none"]
    except KeyError:
        raise ValueError(f"unknown activation {activation!r}; expected one of {sorted(ACTIVATIONS)}") from None


def check_float(t: torch.Tensor, what: str):
    if t.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{what} must be float32, float16 or bfloat16, got {t.dtype}")


def channel_slice(out: torch.Tensor | None, shape: tuple, channel_offset: int, dtype, device) -> torch.Tensor:
    """The [..., C] view a kernel writes: a fresh tensor, or channels [off, off+C) of `out` whose
    last axis holds the total channel count of a concatenation (zero-copy concat)."""
    c = shape[-1]
    if out is None:
        if channel_offset:
            raise ValueError("out_channel_offset needs an `out` buffer")
        return torch.empty(shape, dtype=dtype, device=device)
    if tuple(out.shape[:-1]) != tuple(shape[:-1]):
        raise ValueError(f"out buffer {list(out.shape)} does not match the output {list(shape)} "
                         f"outside the channel axis")
    if not 0 <= channel_offset or channel_offset + c > out.shape[-1]:
        raise ValueError(f"channels [{channel_offset}, {channel_offset + c}) do not fit the out buffer's "
                         f"{out.shape[-1]} channels")
    view = out[..., channel_offset:channel_offset + c]
    row_stride(view, "out")
    return view


def row_stride(t: torch.Tensor, what: str) -> int:
    """The stride between consecutive pixels (rows) of an [..., C] tensor whose channels are
    contiguous and whose pixels are evenly spaced, as in a channel slice of a contiguous NHWC
    buffer. Raises for other layouts."""
    if t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError(f"{what} needs contiguous channels (stride 1 on the last axis), got strides {t.stride()}")
    rs = None  # the stride of the innermost pixel axis longer than 1; the outer ones must nest
    for d in range(t.dim() - 2, -1, -1):
        if t.shape[d] == 1:
            continue
        if rs is None:
            rs = expect = t.stride(d)
        elif t.stride(d) != expect:
            raise ValueError(f"{what} must have evenly spaced pixels (a channel slice of a contiguous buffer), "
                             f"got shape {list(t.shape)} strides {t.stride()}")
        expect *= t.shape[d]
    return rs if rs is not None else t.shape[-1]


def dummy(device) -> torch.Tensor:
    """A stand-in for an absent optional pointer (never dereferenced: its constexpr switch is off)."""
    return torch.empty(1, dtype=torch.float32, device=device)


def pow2_at_least(n: int, lo: int = 16) -> int:
    return max(lo, triton.next_power_of_2(max(int(n), 1)))


@dataclass
class KernelCall:
    """One fully resolved kernel launch: what a launcher would run, for codegen to compile ahead of
    time (aot.compile_call) and schedule. `args` are the runtime arguments in the kernel's order
    (tensors stand for pointers), `constexprs` the compile-time ones, `options` num_warps/num_stages."""
    kernel: object
    grid: tuple
    args: tuple
    constexprs: dict
    options: dict = field(default_factory=dict)
    out: torch.Tensor | None = None
    # runtime arguments (positions in `args`) that are multiples of 16 wherever the call runs: integers,
    # and pointers 16-byte aligned. Triton's JIT finds this from the values it is called with and
    # specializes on it (tt.divisibility: wide loads, cp.async pipelining); an ahead-of-time compile
    # (aot.compile_call) knows only what it is told here. Empty: nothing is assumed.
    aligned: tuple = ()
    # (position, d) for runtime arguments that are multiples of d in {2, 4, 8} (not of 16) wherever the call
    # runs: Triton's JIT marks 16 only, but an [N, 1000] bf16 matrix's rows are 16-byte aligned all the same
    # (1000 = 8 * 125), and told so Triton loads them 16 bytes at a time, as a 16-multiple's (masks too:
    # `offs < N` is constant over 8 lanes when N is a multiple of 8)
    divisible: tuple = ()
    # a preparatory kernel of its group (a filter's K-major copy before the convolution that reads it):
    # the group's tiles, tuning key and pin are those of its main kernel, the first that is not setup
    setup: bool = False

    def launch(self):
        self.kernel[self.grid](*self.args, **self.constexprs, **self.options)
        return self.out


def finish(call: KernelCall, launch: bool):
    """A launcher's last step: run the call and return its output, or (launch=False) return the call."""
    return call.launch() if launch else call
