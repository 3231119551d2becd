"""Ahead-of-time compilation of a resolved KernelCall to a cubin, on a machine without a GPU.

Triton's compiler runs on the CPU and ships ptxas inside its wheel (triton/backends/nvidia/bin), so

    src = triton.compiler.ASTSource(fn=kernel, signature={name: "*fp32" | "i32" | "fp32" | "constexpr", ...},
                                    constexprs={name: value, ...}, attrs={(i,): [["tt.divisibility", 16]], ...})
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8, "num_stages": 3})
    k.asm["cubin"], k.asm["ptx"], k.metadata.name, k.metadata.shared, ...

works unchanged in triton 3.6 and 3.9 (GPUTarget(backend, arch, warp_size): the third field is the
warp size, 32 on NVIDIA). The signature lists every parameter of the kernel, constexprs included
(typed "constexpr"); constexprs are keyed by name. attrs mark the arguments known to be multiples of 16
(KernelCall.aligned): without them Triton assumes nothing, and every load is a scalar, synchronous
one (no 16-byte vectors, no cp.async pipelining: a Hopper convolution ran at ~50 TFLOP/s so).

The cubin's entry point takes the non-constexpr parameters in order, then two pointers Triton
appends itself (global scratch and profile scratch; both may be NULL when the metadata's
global_scratch_size and profile_scratch_size are 0, as for all of netc's kernels). AotKernel.params
lists the kernel's own ones. Launch it with grid `call.grid`, block (32 * num_warps, 1, 1) and
`shared` bytes of dynamic shared memory (raise the function's limit past 48 KiB first).

Compilation needs real @triton.jit functions: run it in a process without TRITON_INTERPRET=1.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import torch
import triton
from triton.backends.compiler import GPUTarget

from .common import POINTER_TYPES, KernelCall


@dataclass
class AotKernel:
    name: str            # the cubin's entry point
    arch: int            # 80, 90, ...
    cubin: bytes
    ptx: str
    params: list         # runtime parameters, in order: (name, triton type)
    n_params: int        # parameters of the PTX entry (params + Triton's scratch pointers)
    num_warps: int
    shared: int          # dynamic shared memory in bytes
    global_scratch_size: int
    compiled: object     # triton's CompiledKernel


INT_POINTER_TYPES = {torch.int8: "*i8", torch.int32: "*i32", torch.int64: "*i64"}


def arg_type(v) -> str:
    """The Triton signature type of one runtime argument of a KernelCall."""
    if isinstance(v, torch.Tensor):
        t = POINTER_TYPES.get(v.dtype) or INT_POINTER_TYPES.get(v.dtype)   # integers: labels
        if t is None:
            raise TypeError(f"no kernel pointer type for {v.dtype}")
        return t
    if isinstance(v, bool):
        return "i1"
    if isinstance(v, int):
        return "i32" if -2**31 <= v < 2**31 else "i64"
    if isinstance(v, float):
        return "fp32"
    raise TypeError(f"cannot type kernel argument {v!r}")


def signature_of(call: KernelCall) -> dict:
    """{parameter: type} for every parameter of call.kernel, constexprs typed 'constexpr'."""
    names = list(call.kernel.arg_names)
    runtime = names[:len(call.args)]
    rest = names[len(call.args):]
    missing = [n for n in rest if n not in call.constexprs]
    if missing:
        raise ValueError(f"{call.kernel.__name__}: no value for {missing}")
    sig = {n: arg_type(v) for n, v in zip(runtime, call.args)}
    sig.update({n: "constexpr" for n in rest})
    return sig


def divisibility_attrs(call: KernelCall) -> dict:
    """Triton's argument attributes for call.aligned: {(position,): [["tt.divisibility", 16]]}, the
    form its JIT passes for an argument it found divisible by 16 (triton 3.6 and 3.9 alike), and for
    call.divisible the same attribute with 2, 4 or 8 (which the JIT never passes, but Triton's
    alignment analysis reads as it reads 16)."""
    n = len(call.args)
    for i in call.aligned:
        if not 0 <= i < n or isinstance(call.args[i], (bool, float)):
            raise ValueError(f"{call.kernel.__name__}: argument {i} cannot be marked a multiple of 16")
    out = {(i,): [["tt.divisibility", 16]] for i in sorted(set(call.aligned))}
    for i, d in call.divisible:
        if not 0 <= i < n or isinstance(call.args[i], (bool, float)) or d not in (2, 4, 8):
            raise ValueError(f"{call.kernel.__name__}: argument {i} cannot be marked a multiple of {d}")
        out.setdefault((i,), [["tt.divisibility", d]])
    return out


def aligned_by_value(call: KernelCall) -> tuple:
    """The positions of call.args that Triton's JIT would take as multiples of 16 from their values:
    tensors whose address is (not meta tensors: they have none), integers (not booleans)."""
    out = []
    for i, v in enumerate(call.args):
        if isinstance(v, torch.Tensor):
            if v.device.type != "meta" and v.data_ptr() % 16 == 0:
                out.append(i)
        elif isinstance(v, int) and not isinstance(v, bool) and v % 16 == 0:
            out.append(i)
    return tuple(out)


def compile_call(call: KernelCall, arch: int = 90) -> AotKernel:
    """Compile the specialization `call` describes for sm_<arch>; see the module docstring."""
    fn = call.kernel
    if not isinstance(fn, triton.runtime.JITFunction):
        raise RuntimeError(f"{getattr(fn, '__name__', fn)} is not a compilable @triton.jit function "
                           f"(is TRITON_INTERPRET=1 set in this process?)")
    sig = signature_of(call)
    src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=dict(call.constexprs),
                                    attrs=divisibility_attrs(call))
    k = triton.compile(src, target=GPUTarget("cuda", arch, 32), options=dict(call.options))
    ptx = k.asm["ptx"]
    entry = re.search(r"\.entry\s+[\w$]+\s*\((.*?)\)", ptx, re.S)
    n_params = entry.group(1).count(".param") if entry else -1
    md = k.metadata
    return AotKernel(name=md.name, arch=arch, cubin=k.asm["cubin"], ptx=ptx,
                     params=[(n, t) for n, t in sig.items() if t != "constexpr"], n_params=n_params,
                     num_warps=md.num_warps, shared=md.shared,
                     global_scratch_size=getattr(md, "global_scratch_size", 0) or 0, compiled=k)


def mma_instructions(ptx: str) -> list:
    """The tensor-core instructions of a kernel's PTX, e.g. 'mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32'
    (sm_80: D = f32, A = B = bf16, C = f32) or 'wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16'
    (sm_90): they show the operand dtypes and the f32 accumulator. IEEE fp32 products use none (FMA)."""
    return sorted(set(re.findall(r"\b(?:wgmma\.mma_async|mma\.sync)[\w.]*", ptx)))


def ptxas_path(arch: int = 90):
    """The ptxas Triton would use for sm_<arch> (its own copy, unless TRITON_PTXAS_PATH or
    TRITON_PTXAS_BLACKWELL_PATH say otherwise), or None when there is none."""
    try:
        from triton.backends.nvidia.compiler import get_ptxas
        return get_ptxas(arch).path
    except Exception:
        return None


def representative_calls() -> dict:
    """One specialization of every kernel (and of each K walk, dtype and epilogue family), described
    with meta tensors: what `python -m netc.kernels.aot` compiles to show the toolchain works."""
    from .conv import conv2d
    from .elementwise import elementwise_chain
    from .gemm import gemm
    from .loss import euclidean_loss, softmax_loss
    from .lrn import lrn
    from .pool import avgpool, maxpool
    from .softmax import softmax

    def m(*shape, dt=torch.float32):
        return torch.empty(*shape, dtype=dt, device="meta")

    f16, bf16 = torch.float16, torch.bfloat16
    return {
        "gemm_f32_tf32_relu": gemm(m(128, 9216), m(9216, 4096), m(4096), activation="relu", allow_tf32=True,
                                   launch=False),
        "gemm_f16_bn_res_sigmoid": gemm(m(128, 512, dt=f16), m(512, 1000, dt=f16), m(1000), scale=m(1000),
                                        shift=m(1000), residual=m(128, 1000, dt=f16), residual_after_act=True,
                                        activation="sigmoid", launch=False),
        "gemm_bf16_tanh": gemm(m(128, 512, dt=bf16), m(512, 1000, dt=bf16), activation="tanh", launch=False),
        "conv_f32_3x3_taps": conv2d(m(8, 28, 28, 64), m(3, 3, 64, 128), m(128), activation="relu", launch=False),
        "conv_f16_11x11_flat": conv2d(m(8, 224, 224, 3, dt=f16), m(11, 11, 3, 64, dt=f16), m(64),
                                      strides=[1, 4, 4, 1], padding="VALID", launch=False),
        "conv_bf16_1x1_bn_res_concat": conv2d(
            m(8, 14, 14, 256, dt=bf16), m(1, 1, 256, 256, dt=bf16), scale=m(256), shift=m(256),
            residual=m(8, 14, 14, 256, dt=bf16), activation="leaky_relu", negative_slope=0.1,
            out=m(8, 14, 14, 512, dt=bf16), out_channel_offset=256, launch=False),
        "maxpool_f32": maxpool(m(8, 55, 55, 96), [1, 3, 3, 1], [1, 2, 2, 1], "VALID", launch=False),
        "avgpool_f16_same": avgpool(m(8, 35, 35, 192, dt=f16), [1, 3, 3, 1], [1, 1, 1, 1], "SAME", launch=False),
        "maxpool_bf16": maxpool(m(8, 55, 55, 96, dt=bf16), [1, 3, 3, 1], [1, 2, 2, 1], "VALID", launch=False),
        "lrn_f32": lrn(m(8, 27, 27, 96), 5, 1e-4, 0.75, 2.0, launch=False),
        "lrn_f16": lrn(m(8, 27, 27, 96, dt=f16), 5, 1e-4, 0.75, 2.0, launch=False),
        "lrn_bf16": lrn(m(8, 27, 27, 96, dt=bf16), 5, 1e-4, 0.75, 2.0, launch=False),
        "softmax_f32": softmax(m(8, 1000), launch=False),
        "softmax_f16": softmax(m(8, 1000, dt=f16), launch=False),
        # what --dtype bf16 compiles: bf16 logits, f32 probabilities (netc/passes/set_dtype.py)
        "softmax_bf16_to_f32": softmax(m(8, 1000, dt=bf16), out_dtype=torch.float32, launch=False),
        "elementwise_chain_f32": elementwise_chain(
            m(8, 14, 14, 64), [("add", m(8, 14, 14, 64)), ("scale_shift", m(64), m(64)), "relu", ("mul", 0.5),
                               ("max", 0.25), "sigmoid", "tanh", ("leaky_relu", 0.2)], launch=False),
        # a 16-bit batch norm + residual + relu: bf16 tensors, f32 per-channel scale and shift
        "elementwise_chain_bf16_bn_f32": elementwise_chain(
            m(8, 14, 14, 64, dt=bf16), [("scale_shift", m(64), m(64)), ("add", m(8, 14, 14, 64, dt=bf16)), "relu"],
            launch=False),
        "elementwise_chain_f16": elementwise_chain(m(8, 14, 14, 64, dt=f16), ["sigmoid", ("mul", 2.0)], launch=False),
        # losses (one program reduces the batch): i32 class indices, one-hot targets
        "softmax_loss_f32_i32": softmax_loss(m(8, 1000), m(8, dt=torch.int32), launch=False),
        "softmax_loss_bf16_onehot": softmax_loss(m(8, 10, dt=bf16), m(8, 10), launch=False),
        "euclidean_loss_f32": euclidean_loss(m(8, 2), m(8, 2), launch=False),
    }


def training_calls() -> dict:
    """One specialization of every training kernel (gradients, batch norm, dropout, optimizers; each
    stage of the two-stage ones), described with meta tensors: `python -m netc.kernels.aot --training`."""
    from . import conv_grad as CG, dropout as D, elementwise as E, loss_grad as LG, norm_grad as NG
    from . import optim as O, pool_grad as PG

    def m(*shape, dt=torch.float32):
        return torch.empty(shape, dtype=dt, device="meta")

    f16, bf16 = torch.float16, torch.bfloat16
    calls = {
        "conv_grad_data_f32_s2_relu": CG.conv2d_grad_data(m(8, 14, 14, 128), m(3, 3, 64, 128), (8, 28, 28, 64),
                                                          [1, 2, 2, 1], "SAME", activation="relu",
                                                          y=m(8, 14, 14, 128), launch=False),
        "conv_grad_data_bf16": CG.conv2d_grad_data(m(8, 28, 28, 64, dt=bf16), m(3, 3, 32, 64, dt=bf16),
                                                   (8, 28, 28, 32), launch=False),
        "deconv_f16_tanh": CG.deconv2d(m(8, 14, 14, 64, dt=f16), m(4, 4, 32, 64, dt=f16), (8, 28, 28, 32),
                                       [1, 2, 2, 1], "SAME", activation="tanh", launch=False),
    }
    for name, call in (("conv_grad_filter_f32_split_bias", CG.conv2d_grad_filter(
                            m(8, 28, 28, 64), m(8, 28, 28, 128), [3, 3, 64, 128], padding="SAME", bias=True,
                            split=4, launch=False)),
                       ("conv_grad_filter_bf16_flat_sigmoid", CG.conv2d_grad_filter(
                            m(8, 227, 227, 3, dt=bf16), m(8, 55, 55, 64, dt=bf16), [11, 11, 3, 64], [1, 4, 4, 1],
                            "VALID", activation="sigmoid", y=m(8, 55, 55, 64, dt=bf16), split=1, launch=False)),
                       ("bias_grad_f16_split", CG.bias_grad(m(64, 7, 7, 96, dt=f16), split=8, launch=False)),
                       ("batch_stats_split", NG.batch_stats(m(32, 14, 14, 64), split=8, launch=False)),
                       ("batch_norm_grad_bf16", NG.batch_norm_grad(m(32, 14, 14, 64, dt=bf16), m(64), m(64),
                                                                   m(32, 14, 14, 64, dt=bf16), m(64), split=4,
                                                                   launch=False)),
                       ("adam_f32", O.adam_update([m(300, 20)], [m(300, 20)], m(), adam_m=[m(300, 20)],
                                                  adam_v=[m(300, 20)], adam_step=[m()], norm=m(), clip_norm=1.0,
                                                  weight_decay=1e-4, launch=False)),
                       ("global_norm_bf16", O.global_norm([m(300, 20, dt=bf16)], launch=False))):
        for i, c in enumerate(call):
            calls[f"{name}_{i}"] = c
    calls.update({
        "ip_grad_data_gemm_f32": CG.inner_product_grad_data(m(64, 500), m(800, 500), (64, 4, 4, 50), launch=False),
        "maxpool_grad_f32": PG.maxpool_grad(m(8, 55, 55, 96), m(8, 27, 27, 96), [1, 3, 3, 1], [1, 2, 2, 1],
                                            "VALID", launch=False),
        "avgpool_grad_bf16_same": PG.avgpool_grad(m(8, 18, 18, 192, dt=bf16), (8, 35, 35, 192), [1, 3, 3, 1],
                                                  [1, 2, 2, 1], "SAME", launch=False),
        "upsample2d_grad_f16": PG.upsample2d_grad(m(8, 28, 28, 64, dt=f16), [1, 2, 2, 1], launch=False),
        "lrn_grad_bf16": NG.lrn_grad(m(8, 27, 27, 96, dt=bf16), m(8, 27, 27, 96, dt=bf16), m(8, 27, 27, 96, dt=bf16),
                                     5, 1e-4, 0.75, 2.0, launch=False),
        "batch_norm_train_relu": NG.batch_norm_train(m(32, 14, 14, 64, dt=f16), m(64), m(64), m(64), m(64),
                                                     activation="relu", launch=False),
        "running_stats_update": NG.running_stats_update(m(64), m(64), m(64), m(64), 6272, launch=False),
        "softmax_grad_f32": LG.softmax_grad(m(64, 1000), m(64, 1000), launch=False),
        "softmax_loss_grad_bf16_i32": LG.softmax_loss_grad(m(64, 1000, dt=bf16), m(64, dt=torch.int32), m(),
                                                           launch=False),
        "softmax_loss_grad_onehot": LG.softmax_loss_grad(m(64, 10), m(64, 10), launch=False),
        "euclidean_loss_grad_f16": LG.euclidean_loss_grad(m(64, 2, dt=f16), m(64, 2, dt=f16), m(), 1, launch=False),
        "dropout_mask": D.dropout_mask(m(dt=torch.int64), (64, 4096), 0.5, 123456789, launch=False),
        "dropout_seeded_bf16": D.dropout_seeded(m(64, 4096, dt=bf16), m(dt=torch.int64), 0.5, 7, launch=False),
        "activation_grad_chain_bf16": E.elementwise_chain(
            m(8, 14, 14, 64, dt=bf16), [("relu_grad", m(8, 14, 14, 64, dt=bf16)), ("sigmoid_grad", m(8, 14, 14, 64)),
                                        ("tanh_grad", m(8, 14, 14, 64)), ("leaky_relu_grad", m(8, 14, 14, 64), 0.1)],
            launch=False),
        "pad_dim_f32": E.pad_dim(m(8, 7, 7, 64), 3, 32, 16, launch=False),
        "elementwise_max_grad_3": E.elementwise_max_grad([m(8, 100), m(8, 100), m(8, 100)], m(8, 100), 1,
                                                         launch=False),
        "sgd_nesterov_f16": O.sgd_update([m(300, 20, dt=f16)], [m(300, 20, dt=f16)], m(), velocity=[m(300, 20)],
                                         momentum=0.9, nesterov=True, launch=False)[0],
        "rmsprop_singa": O.rmsprop_update([m(300, 20)], [m(300, 20)], m(), square_avg=[m(300, 20)],
                                          clip_low=-1.0, clip_high=1.0, convention="singa", launch=False)[0],
        "adagrad": O.adagrad_update([m(300, 20)], [m(300, 20)], m(), sum_sq=[m(300, 20)], launch=False)[0],
    })
    return calls


def main(argv=None) -> int:
    import argparse
    import json
    import time

    ap = argparse.ArgumentParser(prog="python -m netc.kernels.aot",
                                 description="Compile one specialization of every netc kernel to a cubin.")
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--only", nargs="*", help="names from representative_calls()")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    ap.add_argument("--training", action="store_true", help="the training kernels (training_calls()) instead")
    a = ap.parse_args(argv)
    results = {}
    for name, call in (training_calls() if a.training else representative_calls()).items():
        if a.only and name not in a.only:
            continue
        t = time.time()
        k = compile_call(call, a.arch)
        results[name] = dict(entry=k.name, cubin_bytes=len(k.cubin), elf=k.cubin[:4] == b"\x7fELF",
                             params=len(k.params), ptx_params=k.n_params, shared=k.shared,
                             num_warps=k.num_warps, mma=mma_instructions(k.ptx), seconds=round(time.time() - t, 2))
    if a.json:
        print(json.dumps(dict(triton=triton.__version__, arch=a.arch, ptxas=ptxas_path(a.arch), kernels=results)))
    else:
        print(f"triton {triton.__version__}, sm_{a.arch}, ptxas {ptxas_path(a.arch)}")
        for name, r in results.items():
            print(f"  {name:30s} {r['entry']:20s} cubin {r['cubin_bytes']:7d} B  shared {r['shared']:6d} B  "
                  f"{r['num_warps']} warps  {r['seconds']:.2f}s  {' '.join(r['mma']) or '(no tensor cores)'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
