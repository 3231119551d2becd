"""The generated C launcher: cubins + schedule + plan -> C source -> net.so (built with `cc`).

The .so links nothing but libdl: the CUDA driver is dlopen'd ("libcuda.so.1", or $NETC_LIBCUDA)
by netc_create, so the library loads anywhere and creation fails cleanly without a driver.
netc_create loads every cubin (cuModuleLoadData), allocates ONE device arena (cuMemAlloc): the
constant arena (parameters at its bottom, in manifest order) then the batch arena sized for the
compiled batch. Parameters embedded at compile time (`netc compile --params/--embed-params`: the
packed blob of netc.runtime.params, assembled in with .incbin like the cubins) are uploaded there
by netc_create; netc_set_params overrides them. netc_forward copies the inputs into their planned places, launches the schedule
on the caller's stream (argument values from the plan's offsets: base + per_sample * batch +
offset; NULL for Triton's two trailing scratch pointers) and copies the outputs out: a batch-sized
one as b rows (one copy when dense), one without a batch axis (a loss reduced over the batch: the
plan's constant class, so it lives in the constant region) as one copy of all its bytes. Everything
is asynchronous on that stream.

netc_profile runs the very same code (one static function, netc_run, serves both) with CUDA
events recorded before the input copies, after them, after every launch and after the output
copies, waits for the last one and writes the NETC_NLAUNCHES + 2 intervals (cuEventElapsedTime,
ms): input copies, each launch in schedule order, output copies. The event functions are looked
up optionally: a driver without them still runs netc_forward, and netc_profile then fails with a
clear netc_last_error. The events are created on the first netc_profile call and destroyed by
netc_destroy. netc_num_launches gives NETC_NLAUNCHES (the manifest's schedule, in that order).

A training library (`netc compile --train`) holds two programs over one arena and one copy of the
parameters: the training step (forward, gradients, optimizer updates: the backward and optimizer
passes' program, planned in training mode) and the forward (the inference program of the same
source, compiled alongside). The arena is the training step's constant region (parameters and
optimizer state at its bottom, in manifest order, then its constant temporaries: gradients,
losses) and then either the training step's batch arena or, overlaid on the same bytes, the
forward's constant temporaries and batch arena: the forward reads the parameters where the
training step keeps them (codegen's ArenaLayout), so a step's updates are what the next forward
computes with. The two programs share the scratch bytes, so calls on one net must not overlap
(one stream, or ordered by the caller). netc_train_step copies the data inputs (labels too) into
place at the compiled batch, writes the learning rate and the dropout seed (4 and 8 bytes from
host memory, asynchronously), launches the step and, when loss_out is given, copies the losses
back and waits for the stream. netc_get_params reads parameters and optimizer state back (a
checkpoint that netc_set_params restores). A library compiled for inference exports the same
functions; netc_train_step fails there with a message.

Segments (ABI 4). Every library has one *segmented program* -- the training step of a training
library, else the forward -- whose schedule is cut at its communication ops: segment k is the
launches between communication op k-1 and k (the manifest's `segmented` section: `segments`, each
{index, first, launches}, and `comms`, each op's kind, attributes, bytes and the arena places of its
operands and results). netc_run_segment(net, k, inputs, lr, seed, stream) launches segment k at the
compiled batch; segment 0 first copies the program's inputs (as netc_train_step or, at the compiled
batch, netc_forward does) and writes the learning rate and the dropout seed where the program has
them. Between segments the caller runs the communication op on the arena's bytes: netc_arena(net,
region) is the device address of a region (recipes.py's numbering: 1 the constant region, which is
the arena's start, 2 batch, 3/4 a training library's forward regions, 5 data, 6 workspace), and a
place is that address plus its `offset`. A library without communication ops has one segment. A
*rank library* (`netc compile FILE --workers K`: one rank's program of split-workers, forward or
training step; the manifest's `rank` section) is compiled for its compiled batch only and runs only
in segments: netc_forward, netc_profile and netc_train_step refuse it.

ABI versions: 1, every input and output is [batch, ...]; 2, an output may have no batch axis: its
manifest entry says "batched": false and its buffer is dense in its own shape (netc_profile and
netc_num_launches were added to version 2 without a new version); 3, netc_train_step and
netc_get_params, a manifest `training` section and `regions`, each input and output entry names its
region; 4 (this one), netc_num_segments, netc_run_segment and netc_arena, the manifest's `segmented`
section, rank libraries (`rank`; their inputs may lack the batch axis: "batched": false). Libraries
of an older version are refused by netc.runtime with a request to recompile.
"""
from __future__ import annotations

import os
import subprocess
import tempfile

ABI_VERSION = 4
PARAMS_FILE = "params.bin"
DATA_FILE = "data.bin"
# .rodata is reached PC-relative (+-2 GiB) from the launcher's code: keep embedded blobs well below
MAX_EMBEDDED_PARAM_BYTES = 2 ** 31 - 2 ** 27

HEADER = """\
/* {name}.h - C ABI of a network compiled by netc (ABI version {abi}). */
#ifndef NETC_{guard}_H
#define NETC_{guard}_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {{
#endif

#define NETC_ABI_VERSION {abi}

/* The ABI version this library implements (NETC_ABI_VERSION). */
int netc_abi_version(void);
/* JSON: inputs, outputs, parameters (names, shapes, dtypes, offsets), memory plan, kernels. */
const char* netc_manifest(void);
/* Load the CUDA driver, the kernels and allocate the arena on the current context's device (or
   device $NETC_DEVICE, default 0). NULL on failure: see netc_last_error(NULL). */
void* netc_create(void);
void netc_destroy(void* net);
/* Copy all parameters (the manifest's param_bytes, laid out at the manifest's offsets; in a training
   library the optimizer state too) from host memory; synchronous. 0 on success. */
int netc_set_params(void* net, const void* host_ptr, size_t bytes);
/* The same from a raw file holding exactly param_bytes bytes. */
int netc_set_params_file(void* net, const char* path);
/* The parameters embedded at compile time (param_bytes bytes, the manifest's layout; netc_create
   uploads them, so netc_set_params is optional), or NULL if none were; *bytes gets their size. */
const void* netc_embedded_params(size_t* bytes);
/* Run the network on `batch` samples (1..compiled batch): inputs/outputs are device pointers, in
   manifest order, dense [batch, ...]; except an output whose manifest entry has "batched": false
   (e.g. a loss, a mean over the batch's samples): dense in its own shape ("bytes" bytes).
   Asynchronous on `stream` (a CUstream; NULL = default). */
int netc_forward(void* net, const void* const* inputs, void* const* outputs, int batch, void* stream);
/* netc_forward, timed with CUDA events: waits for the run to finish and writes netc_num_launches() + 2
   floats to `ms` (milliseconds): the input copies, each kernel launch in schedule order (the manifest's
   "schedule"), the output copies. Events are created on the first call (the driver's cuEvent*
   functions; without them this fails and netc_last_error says why). Not for production runs: every
   launch is separated by an event record. */
int netc_profile(void* net, const void* const* inputs, void* const* outputs, int batch, void* stream, float* ms);
/* The number of kernel launches of one forward (the manifest's schedule). */
int netc_num_launches(void);
/* Training libraries (`netc compile --train`; the manifest's "training" section describes the step):
   one training step at the compiled batch -- forward, gradients, optimizer updates, which write the
   parameters and optimizer state in place -- on `inputs` (device pointers in the order of the
   manifest's training.inputs: the data inputs and the labels, dense [batch, ...]), with learning rate
   `lr` and dropout seed `seed` (a new one each step draws new masks). Asynchronous on `stream`; with
   loss_out (host memory) it waits for the step and writes the loss there (the sum of the program's
   losses, each a mean over the batch). A library compiled for inference returns an error. netc_forward
   computes with the same parameters (the inference program: dropout off, batch norm folded); the two
   share scratch memory, so do not run them concurrently on one net. */
int netc_train_step(void* net, const void* const* inputs, float lr, long long seed, void* stream, float* loss_out);
/* Copy all parameters and the optimizer state (param_bytes, the manifest's layout) to host memory,
   after the work queued on the legacy default stream; netc_set_params takes the same bytes back (a
   checkpoint). 0 on success. */
int netc_get_params(void* net, void* host_ptr, size_t bytes);
/* The number of kernel launches of one training step (0 without training). */
int netc_num_train_launches(void);
/* Segments (ABI 4): the library's segmented program -- a rank library's program, else the training step of
   a training library, else the forward -- cut at its communication ops (the manifest's "segmented" section:
   "segments" and, between segment k and k + 1, "comms"[k] with the arena places of its operands and
   results). The number of segments (communication ops + 1). */
int netc_num_segments(void);
/* Launch segment k (0 <= k < netc_num_segments()) at the compiled batch, asynchronously on `stream`.
   Segment 0 first copies `inputs` (device pointers in the order of the segmented program's inputs: the
   manifest's "inputs", or "training"."inputs" for a training step; dense, [batch, ...] or, where an
   entry says "batched": false, in its own shape) and writes the learning rate `lr` and the dropout seed
   `seed` where the program reads them (as netc_train_step); later segments ignore them (pass NULL). The
   caller runs communication op k between segment k and k + 1 on the arena (netc_arena). */
int netc_run_segment(void* net, int k, const void* const* inputs, float lr, long long seed, void* stream);
/* The device address of arena region `region` (1 constant: the arena's start; 2 batch; 3, 4 a training
   library's forward constant and batch regions; 5 the segmented program's embedded data; 6 workspace),
   0 on error. A place of the manifest (region name, offset) is at the address of its region, whose byte
   offset from the arena's start is the manifest's "regions"[name], plus its offset. */
unsigned long long netc_arena(void* net, int region);
/* The last error of `net` ("" if none); with NULL, the last netc_create failure of this thread. */
const char* netc_last_error(void* net);
const char* netc_last_create_error(void);

#ifdef __cplusplus
}}
#endif
#endif
"""

_PRELUDE = r"""
/* generated by netc: do not edit */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))
typedef int CUresult;
typedef int CUdevice;
typedef void* CUcontext;
typedef void* CUmodule;
typedef void* CUfunction;
typedef void* CUstream;
typedef void* CUevent;
typedef unsigned long long CUdeviceptr;
typedef struct {
  size_t srcXInBytes, srcY; int srcMemoryType; const void* srcHost; CUdeviceptr srcDevice; void* srcArray;
  size_t srcPitch;
  size_t dstXInBytes, dstY; int dstMemoryType; void* dstHost; CUdeviceptr dstDevice; void* dstArray;
  size_t dstPitch;
  size_t WidthInBytes, Height;
} netc_memcpy2d;  /* CUDA_MEMCPY2D */
#define CU_MEMORYTYPE_DEVICE 2
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8

typedef struct {
  void* lib;
  CUresult (*cuInit)(unsigned);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxGetDevice)(CUdevice*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemcpy2DAsync)(const netc_memcpy2d*, CUstream);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**);
  /* optional (netc_profile only): NULL where the driver lacks them; event_missing names the first */
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  CUresult (*cuEventDestroy)(CUevent);
  const char* event_missing;
  /* optional (netc_train_step, netc_get_params only): copy_missing names the first one missing */
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*cuStreamSynchronize)(CUstream);
  const char* copy_missing;
} netc_driver;

typedef struct { const unsigned char* image; size_t size; const char* name; unsigned shared; unsigned threads; } netc_kdef;
typedef struct { unsigned char kind, region; long long coeff, cnst; float f; } netc_arg;  /* kind 0 ptr 1 i32 2 i64 3 f32 */
typedef struct { int kernel; long long rows, block, rep; unsigned g1, g2; int first, nargs; const char* layer; } netc_launch;
/* an input or output: batched, b rows of width bytes at base[region] + coeff * b + cnst, pitch apart;
   else width bytes at base[region] + cnst (a constant region) */
typedef struct { int region, batched; long long coeff, cnst, width, pitch; } netc_io;
/* a program: launches [first, first + n) of netc_launches, its inputs and outputs */
typedef struct { int first, n; const netc_io* inputs; int ninputs; const netc_io* outputs; int noutputs; } netc_prog;

typedef struct {
  netc_driver d;
  CUcontext ctx;
  CUdevice dev;
  int primary;
  CUmodule modules[NETC_NKERNELS > 0 ? NETC_NKERNELS : 1];
  CUfunction funcs[NETC_NKERNELS > 0 ? NETC_NKERNELS : 1];
  CUdeviceptr arena;
  int params_set;
  uint64_t slots[NETC_NARGS + 2 > 2 ? NETC_NARGS + 2 : 3];
  /* netc_profile's events (NETC_NEVENTS: before the inputs, after them, after each launch, after the
     outputs), created on its first call; nevents of them exist */
  CUevent events[NETC_NEVENTS];
  int nevents;
  /* netc_train_step's host-side scalars (copied from here) and losses (copied to here) */
  float lr_host;
  long long seed_host;
  float loss_host[NETC_NLOSSES > 0 ? NETC_NLOSSES : 1];
  char err[1024];
} netc_net;

static __thread char g_create_err[1024];

static void set_err(char* buf, const char* fmt, ...) {
  va_list ap; va_start(ap, fmt); vsnprintf(buf, 1024, fmt, ap); va_end(ap);
}

static const char* cu_msg(netc_driver* d, CUresult r) {
  const char* s = NULL;
  if (d->cuGetErrorString && d->cuGetErrorString(r, &s) == 0 && s) return s;
  return "unknown CUDA error";
}

#define CU(net, call, what) do { CUresult r_ = (call); if (r_ != 0) { \
  set_err((net)->err, "%s failed: %s (CUresult %d)", what, cu_msg(&(net)->d, r_), r_); return -(int)r_ - 1000; } } while (0)

static int load_driver(netc_driver* d, char* err) {
  const char* path = getenv("NETC_LIBCUDA");
  if (!path || !*path) path = "libcuda.so.1";
  memset(d, 0, sizeof *d);
  d->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!d->lib) {
    const char* e = dlerror();
    set_err(err, "netc: cannot load the CUDA driver (%s): %s; this network needs an NVIDIA GPU and driver",
            path, e ? e : "not found");
    return -1;
  }
#define SYM(field, name) do { *(void**)(&d->field) = dlsym(d->lib, name); \
    if (!d->field) { set_err(err, "netc: the CUDA driver %s has no %s", path, name); dlclose(d->lib); d->lib = NULL; return -1; } } while (0)
  SYM(cuInit, "cuInit");
  SYM(cuGetErrorString, "cuGetErrorString");
  SYM(cuCtxGetCurrent, "cuCtxGetCurrent");
  SYM(cuCtxSetCurrent, "cuCtxSetCurrent");
  SYM(cuCtxGetDevice, "cuCtxGetDevice");
  SYM(cuDeviceGet, "cuDeviceGet");
  SYM(cuDeviceGetAttribute, "cuDeviceGetAttribute");
  SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  *(void**)(&d->cuDevicePrimaryCtxRelease) = dlsym(d->lib, "cuDevicePrimaryCtxRelease_v2");
  if (!d->cuDevicePrimaryCtxRelease) SYM(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease");
  SYM(cuModuleLoadData, "cuModuleLoadData");
  SYM(cuModuleUnload, "cuModuleUnload");
  SYM(cuModuleGetFunction, "cuModuleGetFunction");
  SYM(cuFuncSetAttribute, "cuFuncSetAttribute");
  SYM(cuMemAlloc, "cuMemAlloc_v2");
  SYM(cuMemFree, "cuMemFree_v2");
  SYM(cuMemcpyHtoD, "cuMemcpyHtoD_v2");
  SYM(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
  SYM(cuMemcpy2DAsync, "cuMemcpy2DAsync_v2");
  SYM(cuLaunchKernel, "cuLaunchKernel");
#undef SYM
#define OPT(field, name) do { *(void**)(&d->field) = dlsym(d->lib, name); \
    if (!d->field && !d->event_missing) d->event_missing = name; } while (0)
  OPT(cuEventCreate, "cuEventCreate");
  OPT(cuEventRecord, "cuEventRecord");
  OPT(cuEventSynchronize, "cuEventSynchronize");
  OPT(cuEventElapsedTime, "cuEventElapsedTime");
  *(void**)(&d->cuEventDestroy) = dlsym(d->lib, "cuEventDestroy_v2");
  if (!d->cuEventDestroy) OPT(cuEventDestroy, "cuEventDestroy");
#undef OPT
#define OPTC(field, name) do { *(void**)(&d->field) = dlsym(d->lib, name); \
    if (!d->field && !d->copy_missing) d->copy_missing = name; } while (0)
  OPTC(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
  OPTC(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
  OPTC(cuMemcpyDtoH, "cuMemcpyDtoH_v2");
  OPTC(cuStreamSynchronize, "cuStreamSynchronize");
#undef OPTC
  return 0;
}

API int netc_abi_version(void) { return NETC_ABI; }
API const void* netc_embedded_params(size_t* bytes) {
  if (bytes) *bytes = NETC_PARAMS_EMBEDDED ? (size_t)NETC_PARAM_BYTES : 0;
#if NETC_PARAMS_EMBEDDED
  return netc_params_blob;
#else
  return NULL;
#endif
}
API const char* netc_manifest(void) { return netc_manifest_json; }
API int netc_num_launches(void) { return NETC_NLAUNCHES; }
API int netc_num_train_launches(void) { return NETC_NTRAIN_LAUNCHES; }
API int netc_num_segments(void) { return NETC_NSEGMENTS; }
API const char* netc_last_create_error(void) { return g_create_err; }
API const char* netc_last_error(void* h) { return h ? ((netc_net*)h)->err : g_create_err; }

API void netc_destroy(void* h) {
  netc_net* n = (netc_net*)h;
  if (!n) return;
  if (n->d.lib) {
    if (n->ctx) n->d.cuCtxSetCurrent(n->ctx);
    for (int i = 0; i < n->nevents; i++) n->d.cuEventDestroy(n->events[i]);
    if (n->arena) n->d.cuMemFree(n->arena);
    for (int i = 0; i < NETC_NKERNELS; i++) if (n->modules[i]) n->d.cuModuleUnload(n->modules[i]);
    if (n->primary) n->d.cuDevicePrimaryCtxRelease(n->dev);
    dlclose(n->d.lib);
  }
  free(n);
}

#define CREATE_FAIL(...) do { set_err(g_create_err, __VA_ARGS__); netc_destroy(n); return NULL; } while (0)

API void* netc_create(void) {
  g_create_err[0] = 0;
  netc_net* n = (netc_net*)calloc(1, sizeof(netc_net));
  if (!n) { set_err(g_create_err, "netc: out of host memory"); return NULL; }
  if (load_driver(&n->d, g_create_err)) { free(n); return NULL; }
  CUresult r = n->d.cuInit(0);
  if (r) CREATE_FAIL("netc: cuInit failed: %s (CUresult %d)", cu_msg(&n->d, r), r);
  CUcontext cur = NULL;
  n->d.cuCtxGetCurrent(&cur);
  if (cur) {
    n->ctx = cur;
    if ((r = n->d.cuCtxGetDevice(&n->dev))) CREATE_FAIL("netc: cuCtxGetDevice failed: %s", cu_msg(&n->d, r));
  } else {
    const char* e = getenv("NETC_DEVICE");
    int ordinal = e && *e ? atoi(e) : 0;
    if ((r = n->d.cuDeviceGet(&n->dev, ordinal))) CREATE_FAIL("netc: no CUDA device %d: %s", ordinal, cu_msg(&n->d, r));
    if ((r = n->d.cuDevicePrimaryCtxRetain(&n->ctx, n->dev))) CREATE_FAIL("netc: cannot create a context: %s", cu_msg(&n->d, r));
    n->primary = 1;
  }
  if ((r = n->d.cuCtxSetCurrent(n->ctx))) CREATE_FAIL("netc: cuCtxSetCurrent failed: %s", cu_msg(&n->d, r));
  int major = 0, minor = 0;
  n->d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, n->dev);
  n->d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, n->dev);
  if (major != NETC_ARCH / 10 || minor < NETC_ARCH % 10)
    CREATE_FAIL("netc: this network was compiled for sm_%d but the device is sm_%d%d; recompile with --arch sm_%d%d",
                NETC_ARCH, major, minor, major, minor);
  for (int i = 0; i < NETC_NKERNELS; i++) {
    if ((r = n->d.cuModuleLoadData(&n->modules[i], netc_kernels[i].image)))
      CREATE_FAIL("netc: cannot load kernel %s: %s (CUresult %d)", netc_kernels[i].name, cu_msg(&n->d, r), r);
    if ((r = n->d.cuModuleGetFunction(&n->funcs[i], n->modules[i], netc_kernels[i].name)))
      CREATE_FAIL("netc: kernel %s not found in its cubin: %s", netc_kernels[i].name, cu_msg(&n->d, r));
    if (netc_kernels[i].shared > 49152 &&
        (r = n->d.cuFuncSetAttribute(n->funcs[i], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)netc_kernels[i].shared)))
      CREATE_FAIL("netc: kernel %s needs %u bytes of shared memory: %s", netc_kernels[i].name, netc_kernels[i].shared,
                  cu_msg(&n->d, r));
  }
  size_t bytes = (size_t)NETC_ARENA_BYTES;
  if ((r = n->d.cuMemAlloc(&n->arena, bytes ? bytes : 256)))
    CREATE_FAIL("netc: cannot allocate the %zu-byte arena: %s", bytes, cu_msg(&n->d, r));
#if NETC_PARAMS_EMBEDDED
  if ((r = n->d.cuMemcpyHtoD(n->arena, netc_params_blob, (size_t)NETC_PARAM_BYTES)))
    CREATE_FAIL("netc: cannot upload the embedded parameters: %s (CUresult %d)", cu_msg(&n->d, r), r);
  n->params_set = 1;
#endif
#if NETC_DATA_BYTES
  if ((r = n->d.cuMemcpyHtoD(n->arena + (CUdeviceptr)NETC_FWD_DATA_OFF, netc_data_blob, (size_t)NETC_DATA_BYTES)))
    CREATE_FAIL("netc: cannot upload the kernels' tables: %s (CUresult %d)", cu_msg(&n->d, r), r);
#endif
  return n;
}

API int netc_set_params(void* h, const void* host, size_t bytes) {
  netc_net* n = (netc_net*)h;
  if (!n) return -1;
  if (bytes != (size_t)NETC_PARAM_BYTES) {
    set_err(n->err, "netc_set_params: expected %llu bytes of parameters, got %zu", (unsigned long long)NETC_PARAM_BYTES, bytes);
    return -2;
  }
  if (!host && bytes) { set_err(n->err, "netc_set_params: host_ptr is NULL"); return -3; }
  CU(n, n->d.cuCtxSetCurrent(n->ctx), "cuCtxSetCurrent");
  if (bytes) CU(n, n->d.cuMemcpyHtoD(n->arena, host, bytes), "cuMemcpyHtoD (parameters)");
  n->params_set = 1;
  n->err[0] = 0;
  return 0;
}

API int netc_set_params_file(void* h, const char* path) {
  netc_net* n = (netc_net*)h;
  if (!n) return -1;
  FILE* f = path ? fopen(path, "rb") : NULL;
  if (!f) { set_err(n->err, "netc_set_params_file: cannot open '%s'", path ? path : "(null)"); return -4; }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (size != (long)NETC_PARAM_BYTES) {
    fclose(f);
    set_err(n->err, "netc_set_params_file: '%s' holds %ld bytes, expected %llu", path, size, (unsigned long long)NETC_PARAM_BYTES);
    return -2;
  }
  void* buf = malloc(size ? (size_t)size : 1);
  if (!buf) { fclose(f); set_err(n->err, "netc_set_params_file: out of host memory"); return -5; }
  size_t got = fread(buf, 1, (size_t)size, f);
  fclose(f);
  int rc = got == (size_t)size ? netc_set_params(n, buf, (size_t)size) : -6;
  if (rc == -6) set_err(n->err, "netc_set_params_file: short read from '%s'", path);
  free(buf);
  return rc;
}

static int copy_rows(netc_net* n, CUdeviceptr dst, size_t dpitch, CUdeviceptr src, size_t spitch, size_t width,
                     size_t rows, CUstream s) {
  if (dpitch == width && spitch == width) {
    CU(n, n->d.cuMemcpyDtoDAsync(dst, src, width * rows, s), "cuMemcpyDtoDAsync");
    return 0;
  }
  netc_memcpy2d c;
  memset(&c, 0, sizeof c);
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE; c.srcDevice = src; c.srcPitch = spitch;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE; c.dstDevice = dst; c.dstPitch = dpitch;
  c.WidthInBytes = width; c.Height = rows;
  CU(n, n->d.cuMemcpy2DAsync(&c, s), "cuMemcpy2DAsync");
  return 0;
}

/* The regions' addresses (codegen/recipes.py): 0 NULL, 1 constant, 2 batch, 3 and 4 a training
   library's forward constant and batch regions, 5 the running program's embedded data (data_off),
   6 the workspace. */
static void bases(netc_net* n, CUdeviceptr* base, unsigned long long data_off) {
  base[0] = 0;
  base[1] = n->arena;
  base[2] = n->arena + (CUdeviceptr)NETC_CONST_BYTES;
  base[3] = n->arena + (CUdeviceptr)NETC_FWD_CONST_OFF;
  base[4] = n->arena + (CUdeviceptr)NETC_FWD_BATCH_OFF;
  base[5] = n->arena + (CUdeviceptr)data_off;
  base[6] = n->arena + (CUdeviceptr)NETC_WS_OFF;
}

static CUdeviceptr io_at(const netc_io* io, const CUdeviceptr* base, long long b) {
  return base[io->region] + (io->batched ? io->coeff * b : 0) + io->cnst;
}

/* Launches [first, first + count) of netc_launches at batch b on stream s; with `ev`, ev[k] is
   recorded after launch first + k. */
static int launch_range(netc_net* n, const char* who, int first, int count, long long b, CUstream s,
                        const CUdeviceptr* base, CUevent* ev) {
  for (int k = 0; k < count; k++) {
    const netc_launch* L = &netc_launches[first + k];
    void* params[NETC_MAXARGS + 2];
    for (int j = 0; j < L->nargs; j++) {
      const netc_arg* a = &netc_args[L->first + j];
      uint64_t* slot = &n->slots[j];
      long long v = a->coeff * b + a->cnst;
      switch (a->kind) {
        case 0: *slot = a->region ? (uint64_t)(base[a->region] + v) : 0; break;
        case 1: { int32_t x = (int32_t)v; memcpy(slot, &x, 4); break; }
        case 2: { int64_t x = v; memcpy(slot, &x, 8); break; }
        default: { float x = a->f; memcpy(slot, &x, 4); break; }
      }
      params[j] = slot;
    }
    /* Triton's global and profile scratch pointers: unused by netc's kernels */
    n->slots[NETC_MAXARGS] = 0;
    n->slots[NETC_MAXARGS + 1] = 0;
    params[L->nargs] = &n->slots[NETC_MAXARGS];
    params[L->nargs + 1] = &n->slots[NETC_MAXARGS + 1];
    long long g0 = ((L->rows * b + L->block - 1) / L->block) * L->rep;
    const netc_kdef* K = &netc_kernels[L->kernel];
    CUresult r = n->d.cuLaunchKernel(n->funcs[L->kernel], (unsigned)g0, L->g1, L->g2, K->threads, 1, 1, K->shared, s,
                                     params, NULL);
    if (r) {
      set_err(n->err, "%s: launching %s for layer '%s' failed: %s (CUresult %d)", who, K->name, L->layer,
              cu_msg(&n->d, r), r);
      return -(int)r - 1000;
    }
    if (ev) CU(n, n->d.cuEventRecord(ev[k], s), "netc_profile: cuEventRecord");
  }
  return 0;
}

/* netc_forward's body, shared with netc_profile: `who` names the caller in errors; with `ev`
   (NETC_NEVENTS events), ev[0] is recorded before the input copies, ev[1] after them, ev[2 + k]
   after launch k and ev[NETC_NLAUNCHES + 2] after the output copies. */
#define MARK(i) do { if (ev) CU(n, n->d.cuEventRecord(ev[i], s), "netc_profile: cuEventRecord"); } while (0)
static int netc_run(netc_net* n, const char* who, const netc_prog* P, const void* const* inputs, void* const* outputs,
                    int batch, void* stream, CUevent* ev) {
#if NETC_RANK_PROGRAM
  (void)P; (void)inputs; (void)outputs; (void)batch; (void)stream; (void)ev;
  set_err(n->err, "%s: " NETC_RANK_WHAT, who);
  return -10;
#endif
  if (batch < 1 || batch > NETC_BATCH) {
    set_err(n->err, "%s: batch %d is outside 1..%d (the compiled batch)", who, batch, NETC_BATCH);
    return -2;
  }
  if (!n->params_set && NETC_PARAM_BYTES) { set_err(n->err, "%s: call netc_set_params first", who); return -3; }
  if ((P->ninputs && !inputs) || (P->noutputs && !outputs)) {
    set_err(n->err, "%s: inputs/outputs is NULL", who);
    return -4;
  }
  CUstream s = (CUstream)stream;
  CU(n, n->d.cuCtxSetCurrent(n->ctx), "cuCtxSetCurrent");
  CUdeviceptr base[7];
  bases(n, base, NETC_FWD_DATA_OFF);
  long long b = batch;
  MARK(0);
  for (int i = 0; i < P->ninputs; i++) {
    const netc_io* io = &P->inputs[i];
    if (copy_rows(n, io_at(io, base, b), io->pitch, (CUdeviceptr)(uintptr_t)inputs[i], io->width, io->width,
                  io->batched ? b : 1, s))
      return -5;
  }
  MARK(1);
  int rc = launch_range(n, who, P->first, P->n, b, s, base, ev ? ev + 2 : NULL);
  if (rc) return rc;
  for (int i = 0; i < P->noutputs; i++) {
    const netc_io* io = &P->outputs[i];
    if (copy_rows(n, (CUdeviceptr)(uintptr_t)outputs[i], io->width, io_at(io, base, b), io->pitch, io->width,
                  io->batched ? b : 1, s))
      return -6;
  }
  MARK(P->n + 2);
  n->err[0] = 0;
  return 0;
}
#undef MARK

static const netc_prog netc_forward_prog = {0, NETC_NLAUNCHES, netc_inputs, NETC_NINPUTS, netc_outputs, NETC_NOUTPUTS};

API int netc_forward(void* h, const void* const* inputs, void* const* outputs, int batch, void* stream) {
  netc_net* n = (netc_net*)h;
  if (!n) return -1;
  return netc_run(n, "netc_forward", &netc_forward_prog, inputs, outputs, batch, stream, NULL);
}

API int netc_profile(void* h, const void* const* inputs, void* const* outputs, int batch, void* stream, float* ms) {
  netc_net* n = (netc_net*)h;
  if (!n) return -1;
  if (!ms) { set_err(n->err, "netc_profile: ms is NULL (it takes %d floats)", NETC_NLAUNCHES + 2); return -7; }
  if (n->d.event_missing) {
    set_err(n->err, "netc_profile: the CUDA driver has no %s: cannot time the launches with CUDA events "
            "(netc_forward still works)", n->d.event_missing);
    return -8;
  }
  if (n->nevents < NETC_NEVENTS) {
    CU(n, n->d.cuCtxSetCurrent(n->ctx), "cuCtxSetCurrent");
    while (n->nevents < NETC_NEVENTS) {
      /* flags 0, CU_EVENT_DEFAULT: timing enabled */
      CU(n, n->d.cuEventCreate(&n->events[n->nevents], 0), "netc_profile: cuEventCreate");
      n->nevents++;
    }
  }
  int rc = netc_run(n, "netc_profile", &netc_forward_prog, inputs, outputs, batch, stream, n->events);
  if (rc) return rc;
  CU(n, n->d.cuEventSynchronize(n->events[NETC_NEVENTS - 1]), "netc_profile: cuEventSynchronize");
  for (int i = 0; i < NETC_NEVENTS - 1; i++)
    CU(n, n->d.cuEventElapsedTime(&ms[i], n->events[i], n->events[i + 1]), "netc_profile: cuEventElapsedTime");
  n->err[0] = 0;
  return 0;
}

/* The first thing a training step (or segment 0) does: copy its inputs into the arena, then write the
   learning rate and the dropout seed where the program reads them (pageable host memory: each copy
   has read its source when the call returns). */
static int stage_inputs(netc_net* n, CUdeviceptr* base, long long b, const netc_io* ios, int nin,
                        const void* const* inputs, float lr, long long seed, CUstream s) {
  for (int i = 0; i < nin; i++) {
    const netc_io* io = &ios[i];
    if (copy_rows(n, io_at(io, base, b), io->pitch, (CUdeviceptr)(uintptr_t)inputs[i], io->width, io->width,
                  io->batched ? b : 1, s))
      return -5;
  }
  n->lr_host = lr;
  if (NETC_LR_OFF >= 0)
    CU(n, n->d.cuMemcpyHtoDAsync(base[1] + (CUdeviceptr)NETC_LR_OFF, &n->lr_host, 4, s), "cuMemcpyHtoDAsync (lr)");
  n->seed_host = seed;
  if (NETC_SEED_OFF >= 0) {
    int32_t s32 = (int32_t)seed;
    const void* src = NETC_SEED_BYTES == 4 ? (const void*)&s32 : (const void*)&n->seed_host;
    CU(n, n->d.cuMemcpyHtoDAsync(base[1] + (CUdeviceptr)NETC_SEED_OFF, src, NETC_SEED_BYTES, s),
       "cuMemcpyHtoDAsync (seed)");
  }
  return 0;
}

API int netc_train_step(void* h, const void* const* inputs, float lr, long long seed, void* stream, float* loss_out) {
  netc_net* n = (netc_net*)h;
  if (!n) return -1;
#if NETC_RANK_PROGRAM
  set_err(n->err, "netc_train_step: " NETC_RANK_WHAT);
  return -10;
#endif
#if NETC_TRAINING
  static const netc_prog train = {NETC_NLAUNCHES, NETC_NTRAIN_LAUNCHES, netc_train_inputs, NETC_NTRAIN_INPUTS, NULL, 0};
  if (n->d.copy_missing) {
    set_err(n->err, "netc_train_step: the CUDA driver has no %s", n->d.copy_missing);
    return -8;
  }
  CUstream s = (CUstream)stream;
  /* the inputs, the step's launches: netc_run at the compiled batch, without outputs */
  if (!n->params_set && NETC_PARAM_BYTES) { set_err(n->err, "netc_train_step: call netc_set_params first"); return -3; }
  if (NETC_NTRAIN_INPUTS && !inputs) { set_err(n->err, "netc_train_step: inputs is NULL"); return -4; }
  CU(n, n->d.cuCtxSetCurrent(n->ctx), "cuCtxSetCurrent");
  CUdeviceptr base[7];
  bases(n, base, NETC_TRAIN_DATA_OFF);
  long long b = NETC_BATCH;
  int rc = stage_inputs(n, base, b, netc_train_inputs, NETC_NTRAIN_INPUTS, inputs, lr, seed, s);
  if (rc) return rc;
  rc = launch_range(n, "netc_train_step", train.first, train.n, b, s, base, NULL);
  if (rc) return rc;
  if (loss_out) {
    float total = 0.0f;
    for (int i = 0; i < NETC_NLOSSES; i++)
      CU(n, n->d.cuMemcpyDtoHAsync(&n->loss_host[i], base[1] + (CUdeviceptr)netc_loss_offsets[i], 4, s),
         "cuMemcpyDtoHAsync (loss)");
    CU(n, n->d.cuStreamSynchronize(s), "cuStreamSynchronize");
    for (int i = 0; i < NETC_NLOSSES; i++) total += n->loss_host[i];
    *loss_out = total;
  }
  n->err[0] = 0;
  return 0;
#else
  (void)inputs; (void)lr; (void)seed; (void)stream; (void)loss_out;
  set_err(n->err, "netc_train_step: this library was compiled for inference only (compile it with "
          "`netc compile --train` to train it)");
  return -9;
#endif
}

API int netc_run_segment(void* h, int k, const void* const* inputs, float lr, long long seed, void* stream) {
  netc_net* n = (netc_net*)h;
  if (!n) return -1;
  if (k < 0 || k >= NETC_NSEGMENTS) {
    set_err(n->err, "netc_run_segment: segment %d is outside 0..%d", k, NETC_NSEGMENTS - 1);
    return -2;
  }
  if (!n->params_set && NETC_PARAM_BYTES) {
    set_err(n->err, "netc_run_segment: call netc_set_params first");
    return -3;
  }
  CUstream s = (CUstream)stream;
  CU(n, n->d.cuCtxSetCurrent(n->ctx), "cuCtxSetCurrent");
  CUdeviceptr base[7];
  bases(n, base, NETC_SEG_DATA_OFF);
  long long b = NETC_BATCH;
  if (k == 0) {
    if (NETC_SEG_NINPUTS && !inputs) { set_err(n->err, "netc_run_segment: inputs is NULL"); return -4; }
    if ((NETC_LR_OFF >= 0 || NETC_SEED_OFF >= 0) && n->d.copy_missing) {
      set_err(n->err, "netc_run_segment: the CUDA driver has no %s", n->d.copy_missing);
      return -8;
    }
    int rc = stage_inputs(n, base, b, NETC_SEG_INPUTS, NETC_SEG_NINPUTS, inputs, lr, seed, s);
    if (rc) return rc;
  } else {
    (void)inputs; (void)lr; (void)seed;
  }
  int first = netc_segment_bounds[k], count = netc_segment_bounds[k + 1] - netc_segment_bounds[k];
  int rc = launch_range(n, "netc_run_segment", NETC_SEG_FIRST + first, count, b, s, base, NULL);
  if (rc) return rc;
  n->err[0] = 0;
  return 0;
}

API unsigned long long netc_arena(void* h, int region) {
  netc_net* n = (netc_net*)h;
  if (!n) return 0;
  if (region < 1 || region > 6) {
    set_err(n->err, "netc_arena: region %d is outside 1..6", region);
    return 0;
  }
  CUdeviceptr base[7];
  bases(n, base, NETC_SEG_DATA_OFF);
  n->err[0] = 0;
  return (unsigned long long)base[region];
}

API int netc_get_params(void* h, void* host, size_t bytes) {
  netc_net* n = (netc_net*)h;
  if (!n) return -1;
  if (bytes != (size_t)NETC_PARAM_BYTES) {
    set_err(n->err, "netc_get_params: the parameters take %llu bytes, got room for %zu", (unsigned long long)NETC_PARAM_BYTES,
            bytes);
    return -2;
  }
  if (!host && bytes) { set_err(n->err, "netc_get_params: host_ptr is NULL"); return -3; }
  if (!n->params_set && NETC_PARAM_BYTES) { set_err(n->err, "netc_get_params: no parameters are set yet"); return -4; }
  if (n->d.copy_missing) {
    set_err(n->err, "netc_get_params: the CUDA driver has no %s", n->d.copy_missing);
    return -8;
  }
  CU(n, n->d.cuCtxSetCurrent(n->ctx), "cuCtxSetCurrent");
  if (bytes) CU(n, n->d.cuMemcpyDtoH(host, n->arena, bytes), "cuMemcpyDtoH (parameters)");
  n->err[0] = 0;
  return 0;
}
"""


def _c_string(s: str) -> str:
    out = []
    for line in s.splitlines(keepends=True):
        esc = line.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        out.append(f'  "{esc}"')
    return "\n".join(out) or '""'


def _c_literal(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _incbin(name: str, file: str) -> str:
    """Embed `file` with the assembler's .incbin (decimal C arrays of megabytes of cubins or
    parameters take cc seconds and gigabytes); build_shared_library writes it beside the C source."""
    return (f'__asm__(".section .rodata\\n.balign 64\\n{name}:\\n.incbin \\"{file}\\"\\n'
            f'.byte 0\\n.previous\\n");\n'
            f"extern const unsigned char {name}[] __attribute__((visibility(\"hidden\")));\n")


def generate_c(*, arch: int, batch: int, const_bytes: int, batch_bytes: int, param_bytes: int,
               kernels: list, launches: list, inputs: list, outputs: list, manifest: str,
               params_embedded: bool = False, arena_bytes: int | None = None, fwd_regions: tuple | None = None,
               train: dict | None = None, data: tuple = (0, 0, b""), workspace_offset: int | None = None,
               segments: dict | None = None) -> str:
    """kernels: [(entry, cubin, shared, threads)]; launches: the forward's [(kernel, grid, args, layer)]
    with grid ((rows, block, rep), g1, g2) and args lowered Arg; inputs/outputs: [(region, batched,
    coeff, const, width, pitch)]: batched, b rows at base[region] + coeff * b + const; else width
    bytes at base[region] + const (codegen.manifest.io_copy).
    params_embedded: the library embeds PARAMS_FILE (param_bytes bytes; see build_shared_library).
    A training library also gives arena_bytes (what netc_create allocates; default the constant
    region plus the batch arena), fwd_regions (the byte offsets of regions FWD_CONST and FWD_BATCH)
    and train: {"launches": [...] as launches, "inputs": [...] as inputs, "lr": byte offset or None,
    "seed": (byte offset, bytes) or None, "losses": [byte offsets of f32 losses]} (constant region).
    data: (forward data offset, training data offset, the bytes uploaded at the first: DATA_FILE);
    workspace_offset: the WORKSPACE region's (default: the end of the arena).
    segments: the segmented program (netc_run_segment): {"bounds": [first launch of each segment ...,
    the program's launch count] (the program's own numbering), "train": whether it is the training
    step (else the forward), "rank": (rank, world, network) of a rank library or None, "lr", "seed":
    as train's, for a rank library's training program}; default: the forward, one segment."""
    train_launches = train["launches"] if train else []
    every = list(launches) + list(train_launches)
    nargs = max([len(a) for _, _, a, _ in every] or [0])
    total = sum(len(a) for _, _, a, _ in every)
    if arena_bytes is None:
        arena_bytes = const_bytes + batch_bytes * batch
    fc, fb = fwd_regions if fwd_regions is not None else (0, const_bytes)
    ws = arena_bytes if workspace_offset is None else workspace_offset
    for what, off in (("constant", const_bytes), ("forward constant", fc), ("forward batch", fb),
                      ("forward data", data[0]), ("training data", data[1]), ("workspace", ws)):
        if off % 16:
            # the kernels are compiled taking 16-byte-aligned addresses as such (lower.multiple_of_16)
            raise AssertionError(f"the {what} region starts at byte {off} of the arena, not a multiple of 16")
    seg = segments or {}
    seg_train = bool(seg.get("train"))
    if seg_train and train is None:
        raise ValueError("the segmented program is the training step, but the library has none")
    bounds = list(seg.get("bounds") or [0, len(train_launches) if seg_train else len(launches)])
    if bounds[-1] != (len(train_launches) if seg_train else len(launches)) or bounds != sorted(bounds):
        raise ValueError(f"segment bounds {bounds} do not cut the program's launches")
    rank = seg.get("rank")
    seed = train.get("seed") if train else seg.get("seed")
    lr = train.get("lr") if train else seg.get("lr")
    losses = train["losses"] if train else []
    p = [f"#define NETC_ABI {ABI_VERSION}", f"#define NETC_ARCH {arch}", f"#define NETC_BATCH {batch}",
         f"#define NETC_CONST_BYTES {const_bytes}ULL", f"#define NETC_BATCH_BYTES {batch_bytes}ULL",
         f"#define NETC_ARENA_BYTES {arena_bytes}ULL",
         f"#define NETC_FWD_CONST_OFF {fc}ULL", f"#define NETC_FWD_BATCH_OFF {fb}ULL",
         f"#define NETC_PARAM_BYTES {param_bytes}ULL", f"#define NETC_NKERNELS {len(kernels)}",
         f"#define NETC_NLAUNCHES {len(launches)}", f"#define NETC_NEVENTS {len(launches) + 3}",
         f"#define NETC_MAXARGS {nargs}", f"#define NETC_NARGS {nargs}",
         f"#define NETC_NINPUTS {len(inputs)}", f"#define NETC_NOUTPUTS {len(outputs)}",
         f"#define NETC_PARAMS_EMBEDDED {int(bool(params_embedded and param_bytes))}",
         f"#define NETC_TRAINING {int(train is not None)}",
         f"#define NETC_NTRAIN_LAUNCHES {len(train_launches)}",
         f"#define NETC_NTRAIN_INPUTS {len(train['inputs']) if train else 0}",
         f"#define NETC_LR_OFF {lr if lr is not None else -1}LL",
         f"#define NETC_SEED_OFF {seed[0] if seed else -1}LL", f"#define NETC_SEED_BYTES {seed[1] if seed else 8}",
         f"#define NETC_NLOSSES {len(losses)}",
         f"#define NETC_FWD_DATA_OFF {data[0]}ULL", f"#define NETC_TRAIN_DATA_OFF {data[1]}ULL",
         f"#define NETC_DATA_BYTES {len(data[2])}ULL",
         f"#define NETC_WS_OFF {arena_bytes if workspace_offset is None else workspace_offset}ULL",
         f"#define NETC_NSEGMENTS {len(bounds) - 1}",
         f"#define NETC_SEG_FIRST {len(launches) if seg_train else 0}",
         f"#define NETC_SEG_INPUTS {'netc_train_inputs' if seg_train else 'netc_inputs'}",
         f"#define NETC_SEG_NINPUTS {'NETC_NTRAIN_INPUTS' if seg_train else 'NETC_NINPUTS'}",
         f"#define NETC_SEG_DATA_OFF {'NETC_TRAIN_DATA_OFF' if seg_train else 'NETC_FWD_DATA_OFF'}",
         f"#define NETC_RANK_PROGRAM {int(rank is not None)}"]
    if rank is not None:
        r, w, name = rank
        what = (f"this library is rank {r} of {w} of the partitioned network '{name}': it runs in segments "
                f"(netc_run_segment), with the communication ops between them")
        p.append(f"#define NETC_RANK_WHAT {_c_literal(what.replace('%', '%%'))}")
    body = []
    for i in range(len(kernels)):
        body.append(_incbin(f"netc_cubin_{i}", f"cubin_{i}.bin"))
    if params_embedded and param_bytes:
        body.append(_incbin("netc_params_blob", PARAMS_FILE))
    if data[2]:
        body.append(_incbin("netc_data_blob", DATA_FILE))
    ks = ",\n".join(f'  {{netc_cubin_{i}, {len(c)}, "{e}", {sh}, {th}}}' for i, (e, c, sh, th) in enumerate(kernels))
    body.append(f"static const netc_kdef netc_kernels[] = {{\n{ks or '  {0}'}\n}};\n")
    kinds = {"ptr": 0, "i32": 1, "i64": 2, "fp32": 3}
    flat, ls, first = [], [], 0
    for k, grid, args, layer in every:
        for a in args:
            flat.append(f"  {{{kinds[a.kind]}, {a.region}, {a.coeff}LL, {a.const}LL, {float(a.fval)!r}f}}")
        (rows, block, rep), g1, g2 = grid
        ls.append(f'  {{{k}, {rows}LL, {block}LL, {rep}LL, {g1}u, {g2}u, {first}, {len(args)}, "{layer}"}}')
        first += len(args)
    sep = ",\n"
    body.append("static const netc_arg netc_args[] = {\n" + (sep.join(flat) or "  {0}") + "\n};\n")
    body.append("static const netc_launch netc_launches[] = {\n" + (sep.join(ls) or "  {0}") + "\n};\n")
    tables = [("netc_inputs", inputs), ("netc_outputs", outputs)]
    if train is not None:
        tables.append(("netc_train_inputs", train["inputs"]))
    for nm, ios in tables:
        rows = ",\n".join(f"  {{{rg}, {int(bool(bt))}, {c}LL, {k}LL, {w}LL, {pt}LL}}" for rg, bt, c, k, w, pt in ios)
        body.append(f"static const netc_io {nm}[] = {{\n{rows or '  {0}'}\n}};\n")
    if train is not None:
        offs = ", ".join(f"{o}ULL" for o in losses) or "0"
        body.append(f"static const unsigned long long netc_loss_offsets[] = {{{offs}}};\n")
    body.append("static const int netc_segment_bounds[] = {" + ", ".join(str(int(x)) for x in bounds) + "};\n")
    body.append(f"static const char netc_manifest_json[] =\n{_c_string(manifest)};\n")
    assert total == first
    # the prelude needs the tables' sizes; the tables need the prelude's types
    prelude = _PRELUDE
    split = prelude.index("static __thread")
    return "\n".join(p) + "\n" + prelude[:split] + "\n".join(body) + "\n" + prelude[split:]


def build_shared_library(c_source: str, out_path: str, cubins: list, cc: str | None = None,
                         params_blob=None, data: bytes = b"") -> None:
    """Compile the launcher with `cc`; cubins[i] is embedded as netc_cubin_<i>, params_blob (bytes-like,
    the packed parameters) as netc_params_blob when the source was generated with params_embedded."""
    cc = cc or os.environ.get("CC") or "cc"
    out_path = os.path.abspath(out_path)
    with tempfile.TemporaryDirectory(prefix="netc-cc-") as d:
        src = os.path.join(d, "launcher.c")
        with open(src, "w") as f:
            f.write(c_source)
        for i, blob in enumerate(cubins):
            with open(os.path.join(d, f"cubin_{i}.bin"), "wb") as f:
                f.write(blob)
        if data:
            with open(os.path.join(d, DATA_FILE), "wb") as f:
                f.write(data)
        if params_blob is not None:
            with open(os.path.join(d, PARAMS_FILE), "wb") as f:
                f.write(memoryview(params_blob).cast("B"))
        cmd = [cc, "-shared", "-fPIC", "-O1", "-fvisibility=hidden", "-std=gnu11", "-o", out_path, src, "-ldl"]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, cwd=d)
        except FileNotFoundError:
            from ..diagnostics import NetcError
            raise NetcError(f"cannot build the shared library: no C compiler '{cc}' (set CC)") from None
        if r.returncode != 0:
            raise RuntimeError(f"building the launcher failed ({' '.join(cmd)}):\n{r.stderr[-4000:]}")


def write_header(path: str, name: str) -> None:
    guard = "".join(c if c.isalnum() else "_" for c in name).upper()
    with open(path, "w") as f:
        f.write(HEADER.format(name=name, abi=ABI_VERSION, guard=guard))
