/* The raw-driver baseline of the benches (raw.h). */
#include "raw.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver_funcs.h" /* CUV__DRIVER_VERSION: the version cuv resolves each name at */

typedef CUresult (*get_proc_t)(const char *, void **, int, cuuint64_t,
                               CUdriverProcAddressQueryResult *);

static const char *prog_name = "cuv-bench";
static get_proc_t get_proc;

/* The library behind cuv_driver_name(): "cuda", "sim" (already loaded: linked for the twins) or a
 * path. */
static void *open_driver(void) {
  const char *name = cuv_driver_name();
  if (strcmp(name, "cuda") == 0)
    return dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (strcmp(name, "sim") == 0)
    return dlopen(CUV_SIM_SONAME, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD); /* bench/meson.build */
  return dlopen(name, RTLD_NOW | RTLD_LOCAL);
}

void raw_open(const char *prog, cuv_device_t *dev) {
  prog_name = prog;
  void *lib = open_driver();
  if (lib)
    *(void **)&get_proc = dlsym(lib, "cuGetProcAddress_v2");
  if (!get_proc) {
    fprintf(stderr, "%s: cannot open the driver %s\n", prog_name, cuv_driver_name());
    exit(1);
  }
  __typeof__(cuCtxSetCurrent) *set_current;
  raw_resolve("cuCtxSetCurrent", &set_current);
  raw_check("cuCtxSetCurrent", set_current(cuv_device_context(dev)));
}

void raw_resolve(const char *name, void *fn_ptr) {
  void *ptr = NULL;
  CUdriverProcAddressQueryResult found;
  if (get_proc(name, &ptr, CUV__DRIVER_VERSION(name), CU_GET_PROC_ADDRESS_DEFAULT, &found) !=
          CUDA_SUCCESS ||
      !ptr) {
    fprintf(stderr, "%s: driver lacks %s\n", prog_name, name);
    exit(1);
  }
  memcpy(fn_ptr, &ptr, sizeof ptr); /* ISO C has no object-to-function pointer cast */
}

void raw_check(const char *what, CUresult r) {
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "%s: raw %s failed: CUresult %d\n", prog_name, what, (int)r);
    exit(1);
  }
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  char *text = NULL;
  long len;
  if (f && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
      (text = calloc(1, (size_t)len + 1)) && fread(text, 1, (size_t)len, f) != (size_t)len) {
    free(text);
    text = NULL;
  }
  if (f)
    fclose(f);
  if (!text) {
    fprintf(stderr, "%s: cannot read %s\n", prog_name, path);
    exit(1);
  }
  return text;
}

CUfunction raw_kernel(const char *ptx_path, const char *name) {
  __typeof__(cuModuleLoadData) *load;
  __typeof__(cuModuleGetFunction) *get_function;
  raw_resolve("cuModuleLoadData", &load);
  raw_resolve("cuModuleGetFunction", &get_function);
  char *ptx = read_file(ptx_path);
  CUmodule mod;
  CUfunction fn;
  raw_check("cuModuleLoadData", load(&mod, ptx));
  free(ptx);
  raw_check("cuModuleGetFunction", get_function(&fn, mod, name));
  return fn;
}

uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double percentile(double *v, int n, double p) {
  qsort(v, (size_t)n, sizeof *v, compare_doubles);
  return v[(int)(p * (n - 1) + 0.5)];
}

int bench_cuv_kernel(const char *ptx_path, const char *name, cuv_device_t **dev,
                     cuv_kernel_t **kernel) {
  cuv_module_t *mod = NULL;
  int rc = cuv_init();
  if (rc == 0)
    rc = cuv_device_open(dev, 0);
  if (rc == 0)
    rc = cuv_module_load_file(&mod, *dev, ptx_path);
  if (rc == 0)
    rc = cuv_kernel_get(kernel, mod, name);
  if (mod)
    cuv_module_unref(mod); /* the kernel holds the module */
  return rc;
}
