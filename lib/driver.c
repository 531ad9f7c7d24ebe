/* The driver table. libcuda is never linked: it is opened with dlopen and every entry point is
 * resolved through cuGetProcAddress at the CUDA version of the headers we were built with (except
 * where driver_funcs.h says otherwise), so each pointer has exactly the prototype cuda.h declares.
 * CUV_DRIVER=sim swaps in libcuv-sim. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

cuv__driver_t cuv__drv;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_status;

#define SIM_SONAME "libcuv-sim.so.0"

/* libcuv-sim next to this library (installed) or in the build tree's sim/ folder. */
static void *open_sim_beside_us(void) {
  Dl_info info;
  if (!dladdr(&cuv__drv, &info) || !info.dli_fname)
    return NULL;
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", info.dli_fname);
  char *slash = strrchr(dir, '/');
  if (!slash)
    return NULL;
  *slash = '\0';
  static const char *const rel[] = {"/" SIM_SONAME, "/../sim/" SIM_SONAME};
  for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s%s", dir, rel[i]);
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle)
      return handle;
  }
  return NULL;
}

static void *open_library(const char *path, cuv__driver_t *table) {
  if (!path || !*path || strcmp(path, "cuda") == 0) {
    snprintf(table->name, sizeof table->name, "cuda");
    return dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  }
  if (strcmp(path, "sim") == 0) {
    table->is_sim = 1;
    snprintf(table->name, sizeof table->name, "sim");
    void *handle = dlopen(SIM_SONAME, RTLD_NOW | RTLD_LOCAL);
    return handle ? handle : open_sim_beside_us();
  }
  snprintf(table->name, sizeof table->name, "%s", path);
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  /* A path that turns out to be libcuv-sim identifies itself by its registry entry point. */
  if (handle && dlsym(handle, "cuv_sim_register_kernel"))
    table->is_sim = 1;
  return handle;
}

typedef CUresult (*get_proc_fn)(const char *, void **, int, cuuint64_t,
                                CUdriverProcAddressQueryResult *);

static int resolve_all(cuv__driver_t *table, get_proc_fn get_proc) {
#define CUV__RESOLVE(fn)                                                                          \
  do {                                                                                            \
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                  \
    void *ptr = NULL;                                                                             \
    if (get_proc(#fn, &ptr, CUV__DRIVER_VERSION(#fn), CU_GET_PROC_ADDRESS_DEFAULT, &found) !=     \
            CUDA_SUCCESS ||                                                                       \
        found != CU_GET_PROC_ADDRESS_SUCCESS)                                                     \
      ptr = NULL;                                                                                 \
    memcpy(&table->fn, &ptr, sizeof ptr); /* ISO C has no cast from object to function pointer */ \
    if (!ptr && !CUV__DRIVER_OPTIONAL(#fn))                                                       \
      return CUV_EDRIVER;                                                                         \
  } while (0);
  CUV__DRIVER_FUNCS(CUV__RESOLVE)
#undef CUV__RESOLVE
  return 0;
}

int cuv__driver_load(cuv__driver_t *table, const char *path) {
  memset(table, 0, sizeof *table);
  void *handle = open_library(path, table);
  if (!handle)
    return CUV_ENODRIVER;
  get_proc_fn get_proc;
  *(void **)&get_proc = dlsym(handle, "cuGetProcAddress_v2"); /* the POSIX idiom for functions */
  int rc = get_proc ? resolve_all(table, get_proc) : CUV_EDRIVER;
  if (rc < 0) {
    dlclose(handle);
    memset(table, 0, sizeof *table);
    return rc;
  }
  table->handle = handle;
  return 0;
}

void cuv__driver_unload(cuv__driver_t *table) {
  if (table->handle)
    dlclose(table->handle);
  memset(table, 0, sizeof *table);
}

static void init_once_fn(void) {
  cuv__config_load();
  int rc = cuv__driver_load(&cuv__drv, getenv("CUV_DRIVER"));
  if (rc == 0) {
    CUresult r = cuv__drv.cuInit(0);
    /* A driver without a usable device is, for the user, the same as no driver. */
    if (r == CUDA_ERROR_NO_DEVICE || r == CUDA_ERROR_STUB_LIBRARY)
      rc = CUV_ENODRIVER;
    else if (r != CUDA_SUCCESS)
      rc = cuv__cu(r);
    if (rc == 0)
      rc = cuv__cu(cuv__drv.cuDriverGetVersion(&cuv__drv.version));
  }
  init_status = rc;
}

int cuv__driver_init(void) {
  pthread_once(&init_once, init_once_fn);
  return init_status;
}

CUV_EXTERN int cuv_init(void) { return cuv__driver_init(); }

CUV_EXTERN const char *cuv_driver_name(void) {
  return cuv__driver_init() == 0 ? cuv__drv.name : NULL;
}

CUV_EXTERN int cuv_driver_is_sim(void) { return cuv__driver_init() == 0 && cuv__drv.is_sim; }

CUV_EXTERN int cuv_driver_version(int *version) {
  if (!version)
    return CUV_EINVAL;
  int rc = cuv__driver_init();
  if (rc == 0)
    *version = cuv__drv.version;
  return rc;
}
