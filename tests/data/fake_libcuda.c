/* A stand-in for libcuda.so.1 (tests only): enough of the driver API for netc's launcher, which
   records every call that matters in $NETC_FAKE_LOG:
     alloc BYTES PTR | htod DST BYTES | dtod DST SRC BYTES | copy2d DST DPITCH SRC SPITCH WIDTH ROWS
     launch NAME GX GY GZ THREADS SHARED P0 P1 P2
       (P0, P1: the first two arguments, pointers in every kernel; P2: the third argument's 8 bytes, a
       pointer where the kernel has three, e.g. a loss's output: every launch passes at least three
       slots, its arguments and Triton's two scratch pointers)
   By default "device memory" is a fake address (0x100000000) and copies only log. With
   NETC_FAKE_MEM=1 it is host memory: cuMemAlloc mallocs, the copies copy, so host pointers (CPU
   tensors) stand for device pointers and a test can read back what the launcher uploaded.
   NETC_FAKE_FAIL_LAUNCH=1 makes cuLaunchKernel fail (CUDA_ERROR_LAUNCH_FAILED, 719).
   The training ABI's copies (netc_train_step, netc_get_params) log htod_async DST BYTES | dtoh SRC BYTES |
   dtoh_async SRC BYTES | stream_sync; with NETC_FAKE_MEM=1 they copy. Built with -DNETC_FAKE_NO_TRAIN_COPIES
   it lacks them (a driver netc_train_step cannot use).
   Events (netc_profile): a fake clock (ms) advances with every copy (0.001 + bytes * 1e-6) and launch
   (0.002 + 0.001 * the grid's blocks); cuEventRecord stamps an event with it, cuEventElapsedTime is
   the difference, so the times are deterministic and say which operations ran between two records.
   Logged: event_create ID | record ID | event_sync ID | event_destroy ID (IDs in creation order).
   NETC_FAKE_FAIL_EVENT=1 makes cuEventCreate fail (CUDA_ERROR_OUT_OF_MEMORY, 2). Built with
   -DNETC_FAKE_NO_EVENTS it has no event functions at all (a driver netc_profile cannot use). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef unsigned long long dptr;
typedef struct {
  size_t srcXInBytes, srcY; int srcMemoryType; const void* srcHost; dptr srcDevice; void* srcArray;
  size_t srcPitch;
  size_t dstXInBytes, dstY; int dstMemoryType; void* dstHost; dptr dstDevice; void* dstArray;
  size_t dstPitch;
  size_t WidthInBytes, Height;
} memcpy2d;
/* the log follows $NETC_FAKE_LOG as it changes (one file per test, even while the library stays loaded) */
static FILE* logf_(void) {
  static FILE* f;
  static char path[4096];
  const char* p = getenv("NETC_FAKE_LOG");
  if (!p) p = "";
  if (!f || strcmp(p, path)) {
    if (f && f != stderr) fclose(f);
    snprintf(path, sizeof path, "%s", p);
    f = *p ? fopen(p, "w") : stderr;
    if (!f) f = stderr;
    setvbuf(f, NULL, _IOLBF, 0);
  }
  return f;
}
static int mem(void) { const char* m = getenv("NETC_FAKE_MEM"); return m && *m == '1'; }
static double fake_clock_ms;   /* advanced by copies and launches; read by cuEventRecord */
int cuInit(unsigned f) { return 0; }
int cuGetErrorString(int r, const char** s) { *s = "fake error"; return 0; }
int cuCtxGetCurrent(void** c) { *c = NULL; return 0; }
int cuCtxSetCurrent(void* c) { return 0; }
int cuCtxGetDevice(int* d) { *d = 0; return 0; }
int cuDeviceGet(int* d, int o) { *d = o; return 0; }
int cuDeviceGetAttribute(int* v, int a, int d) { const char* cc = getenv("NETC_FAKE_CC"); int x = cc ? atoi(cc) : 90; *v = a == 75 ? x / 10 : x % 10; return 0; }
int cuDevicePrimaryCtxRetain(void** c, int d) { *c = (void*)0x1; return 0; }
int cuDevicePrimaryCtxRelease_v2(int d) { return 0; }
int cuModuleLoadData(void** m, const void* img) { *m = (void*)img; return memcmp(img, "\177ELF", 4) ? 200 : 0; }
int cuModuleUnload(void* m) { return 0; }
int cuModuleGetFunction(void** f, void* m, const char* name) { *f = strdup(name); return 0; }
int cuFuncSetAttribute(void* f, int a, int v) { return 0; }
int cuMemAlloc_v2(dptr* p, size_t n) {
  if (mem()) { void* q = aligned_alloc(256, (n + 255) / 256 * 256); if (!q) return 2; memset(q, 0xAB, n); *p = (dptr)q; }
  else *p = 0x100000000ULL;
  fprintf(logf_(), "alloc %zu %llu\n", n, *p);
  return 0;
}
int cuMemFree_v2(dptr p) { if (mem()) free((void*)p); return 0; }
int cuMemcpyHtoD_v2(dptr d, const void* h, size_t n) {
  fprintf(logf_(), "htod %llu %zu\n", d, n);
  if (mem()) memcpy((void*)d, h, n);
  return 0;
}
int cuMemcpyDtoDAsync_v2(dptr d, dptr s, size_t n, void* st) {
  fprintf(logf_(), "dtod %llu %llu %zu\n", d, s, n);
  fake_clock_ms += 0.001 + n * 1e-6;
  if (mem()) memcpy((void*)d, (const void*)s, n);
  return 0;
}
int cuMemcpy2DAsync_v2(const memcpy2d* c, void* st) {
  fprintf(logf_(), "copy2d %llu %zu %llu %zu %zu %zu\n", c->dstDevice, c->dstPitch, c->srcDevice, c->srcPitch,
          c->WidthInBytes, c->Height);
  fake_clock_ms += 0.001 + c->WidthInBytes * c->Height * 1e-6;
  if (mem())
    for (size_t r = 0; r < c->Height; r++)
      memcpy((char*)c->dstDevice + r * c->dstPitch, (const char*)c->srcDevice + r * c->srcPitch, c->WidthInBytes);
  return 0;
}
#ifndef NETC_FAKE_NO_TRAIN_COPIES
int cuMemcpyHtoDAsync_v2(dptr d, const void* h, size_t n, void* st) {
  fprintf(logf_(), "htod_async %llu %zu\n", d, n);
  if (mem()) memcpy((void*)d, h, n);
  return 0;
}
int cuMemcpyDtoHAsync_v2(void* h, dptr s, size_t n, void* st) {
  fprintf(logf_(), "dtoh_async %llu %zu\n", s, n);
  if (mem()) memcpy(h, (const void*)s, n);
  return 0;
}
int cuMemcpyDtoH_v2(void* h, dptr s, size_t n) {
  fprintf(logf_(), "dtoh %llu %zu\n", s, n);
  if (mem()) memcpy(h, (const void*)s, n);
  return 0;
}
int cuStreamSynchronize(void* st) { fprintf(logf_(), "stream_sync\n"); return 0; }
#endif
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void* st, void** params, void** extra) {
  FILE* o = logf_();
  fprintf(o, "launch %s %u %u %u %u %u", (const char*)f, gx, gy, gz, bx, shared);
  for (int i = 0; i < 3; i++) { unsigned long long v = 0; memcpy(&v, params[i], 8); fprintf(o, " %llu", v); }
  fprintf(o, "\n");
  fflush(o);
  fake_clock_ms += 0.002 + 0.001 * (double)gx * gy * gz;
  const char* fail = getenv("NETC_FAKE_FAIL_LAUNCH");
  return fail && *fail == '1' ? 719 : 0;
}

#ifndef NETC_FAKE_NO_EVENTS
typedef struct { int id; int recorded; double t; } fake_event;
static int next_event_id;
int cuEventCreate(void** e, unsigned flags) {
  const char* fail = getenv("NETC_FAKE_FAIL_EVENT");
  if (fail && *fail == '1') return 2;
  fake_event* ev = calloc(1, sizeof *ev);
  ev->id = next_event_id++;
  *e = ev;
  fprintf(logf_(), "event_create %d\n", ev->id);
  return 0;
}
int cuEventRecord(void* e, void* st) {
  fake_event* ev = e;
  ev->recorded = 1;
  ev->t = fake_clock_ms;
  fprintf(logf_(), "record %d\n", ev->id);
  return 0;
}
int cuEventSynchronize(void* e) { fprintf(logf_(), "event_sync %d\n", ((fake_event*)e)->id); return 0; }
int cuEventElapsedTime(float* ms, void* a, void* b) {
  fake_event *s = a, *t = b;
  if (!s->recorded || !t->recorded) return 400;   /* CUDA_ERROR_INVALID_HANDLE */
  *ms = (float)(t->t - s->t);
  return 0;
}
int cuEventDestroy_v2(void* e) { fprintf(logf_(), "event_destroy %d\n", ((fake_event*)e)->id); free(e); return 0; }
#endif
