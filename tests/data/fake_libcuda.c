/* A stand-in for libcuda.so.1 (tests only): enough of the driver API for netc's launcher, which
   records every launch in $NETC_FAKE_LOG as "launch name gx gy gz threads shared p0 p1" (the first
   two arguments, pointers in every netc kernel). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef unsigned long long dptr;
static FILE* logf_(void) { static FILE* f; if (!f) { const char* p = getenv("NETC_FAKE_LOG"); f = p ? fopen(p, "w") : stderr; setvbuf(f, NULL, _IOLBF, 0); } return f; }
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
int cuMemAlloc_v2(dptr* p, size_t n) { *p = 0x100000000ULL; fprintf(logf_(), "alloc %zu\n", n); return 0; }
int cuMemFree_v2(dptr p) { return 0; }
int cuMemcpyHtoD_v2(dptr d, const void* h, size_t n) { fprintf(logf_(), "htod %llu %zu\n", d, n); return 0; }
int cuMemcpyDtoDAsync_v2(dptr d, dptr s, size_t n, void* st) { fprintf(logf_(), "dtod %llu %llu %zu\n", d, s, n); return 0; }
int cuMemcpy2DAsync_v2(const void* c, void* st) { fprintf(logf_(), "copy2d\n"); return 0; }
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void* st, void** params, void** extra) {
  FILE* o = logf_();
  fprintf(o, "launch %s %u %u %u %u %u", (const char*)f, gx, gy, gz, bx, shared);
  for (int i = 0; i < 2; i++) { unsigned long long v = 0; memcpy(&v, params[i], 8); fprintf(o, " %llu", v); }
  fprintf(o, "\n");
  fflush(o);
  return 0;
}
