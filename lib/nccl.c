/* The NCCL table. NCCL is never linked: it is opened with dlopen at the first call that needs it,
 * after the driver, and every entry point of internal/nccl_funcs.h is looked up by name, so cuv
 * builds and runs without NCCL and only collectives fail (CUV_ENONCCL, with a sentence that names
 * what is missing; those of internal/nccl_funcs.h's optional list may be missing, and stay NULL).
 * With the driver "sim" the simulator stands in: its collectives run on its
 * simulated devices, and it hands out its entry points through cuv_sim_nccl_proc (it exports no
 * nccl* symbol, so a program linking libcuv-sim never shadows a real NCCL's). The library is
 * never closed: NCCL keeps threads of its own. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "nccl.h"

#define NCCL_SONAME "libnccl.so.2"
#define SIM_PROC "cuv_sim_nccl_proc" /* include/cuv/sim.h */

cuv__nccl_funcs_t cuv__nccl;

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool load_done;
static int load_status;
static char load_error[PATH_MAX + 256]; /* why the load failed; "" otherwise */

typedef void *(*sim_proc_fn)(const char *name);

/* What the setting asks for: its path, "sim", or the default for the driver in use. */
static const char *wanted(void) {
  const char *nccl = cuv__config.nccl;
  if (nccl && *nccl)
    return nccl;
  return cuv__drv.is_sim ? "sim" : NCCL_SONAME;
}

/* The simulator's collectives work only on its own devices: "sim" is the driver's library. */
static void *open_library(const char *name) {
  if (strcmp(name, "sim") != 0)
    return dlopen(name, RTLD_NOW | RTLD_LOCAL);
  return cuv__drv.is_sim ? cuv__drv.handle : NULL;
}

static int resolve_all(void *handle, const char **missing) {
  sim_proc_fn proc = NULL;
  *(void **)&proc = dlsym(handle, SIM_PROC); /* the POSIX idiom for functions */
#define CUV__NCCL_RESOLVE(name, params)                                                           \
  do {                                                                                            \
    void *fn = proc ? proc(#name) : dlsym(handle, #name);                                         \
    if (!fn) {                                                                                    \
      *missing = #name;                                                                           \
      return CUV_ENONCCL;                                                                         \
    }                                                                                             \
    memcpy(&cuv__nccl.name, &fn, sizeof fn); /* ISO C has no object-to-function cast */           \
  } while (0);
  CUV__NCCL_FUNCS(CUV__NCCL_RESOLVE)
#undef CUV__NCCL_RESOLVE
  /* Those of later versions stay NULL where the library lacks them (their callers check). */
#define CUV__NCCL_RESOLVE_OPTIONAL(name, params)                                                  \
  do {                                                                                            \
    void *fn = proc ? proc(#name) : dlsym(handle, #name);                                         \
    memcpy(&cuv__nccl.name, &fn, sizeof fn);                                                      \
  } while (0);
  CUV__NCCL_OPTIONAL_FUNCS(CUV__NCCL_RESOLVE_OPTIONAL)
#undef CUV__NCCL_RESOLVE_OPTIONAL
  return 0;
}

/* 2.19.3 from 21903 (and the older scheme, 2.8.4 from 2804). */
static void version_parts(int code, int *major, int *minor, int *patch) {
  int scale = code >= 10000 ? 10000 : 1000;
  *major = code / scale;
  *minor = code % scale / 100;
  *patch = code % 100;
}

static int check_version(const char *name) {
  int code = 0;
  cuv__nccl_result_t r = cuv__nccl.ncclGetVersion(&code);
  if (r != CUV__NCCL_SUCCESS) {
    snprintf(load_error, sizeof load_error, "NCCL \"%s\": ncclGetVersion failed (%d)", name, r);
    return CUV_ENONCCL;
  }
  if (code >= CUV__NCCL_VERSION_MIN)
    return 0;
  int major, minor, patch;
  version_parts(code, &major, &minor, &patch);
  snprintf(load_error, sizeof load_error,
           "NCCL \"%s\" is version %d.%d.%d; cuv needs 2.19 or later", name, major, minor,
           patch);
  return CUV_ENONCCL;
}

/* With load_lock held, once. */
static int load_locked(void) {
  const char *name = wanted();
  /* Before NCCL reads its environment (at its first communicator): NVLink multicast stays off
   * unless the program asked for it, and the collectives' channels are connected in the init
   * (on cuv's init thread, lib/comm.c) rather than by the first collective's ncclGroupEnd, which
   * on a blocking communicator would wait there, holding the communicator, for every peer to
   * reach its own first collective. */
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  setenv("NCCL_RUNTIME_CONNECT", "0", 0);
  dlerror();
  void *handle = open_library(name);
  if (!handle) {
    const char *reason = strcmp(name, "sim") == 0 ? "the simulator's collectives need the driver "
                                                    "\"sim\" (CUV_DRIVER=sim)"
                                                  : dlerror();
    snprintf(load_error, sizeof load_error, "cannot load NCCL \"%s\": %s", name,
             reason ? reason : "not found");
    return CUV_ENONCCL;
  }
  const char *missing = NULL;
  int rc = resolve_all(handle, &missing);
  if (rc < 0)
    snprintf(load_error, sizeof load_error, "NCCL \"%s\" lacks %s", name, missing);
  else
    rc = check_version(name);
  if (rc < 0) {
    memset(&cuv__nccl, 0, sizeof cuv__nccl);
    if (handle != cuv__drv.handle)
      dlclose(handle);
  }
  return rc;
}

int cuv__nccl_load(void) {
  if (atomic_load_explicit(&load_done, memory_order_acquire))
    return load_status;
  int rc = cuv__driver_init();
  if (rc < 0)
    return rc;
  pthread_mutex_lock(&load_lock);
  if (!atomic_load_explicit(&load_done, memory_order_relaxed)) {
    load_status = load_locked();
    atomic_store_explicit(&load_done, true, memory_order_release);
  }
  rc = load_status;
  pthread_mutex_unlock(&load_lock);
  return rc;
}

CUcontext cuv__nccl_enter(void) {
  CUcontext current = NULL;
  if (cuv__drv.cuCtxGetCurrent(&current) != CUDA_SUCCESS)
    current = NULL;
  return current;
}

void cuv__nccl_leave(CUcontext saved) {
  CUcontext current = NULL;
  if (cuv__drv.cuCtxGetCurrent(&current) != CUDA_SUCCESS || current != saved)
    cuv__drv.cuCtxSetCurrent(saved);
}

CUV_EXTERN int cuv_nccl_version(int *version) {
  if (!version)
    return CUV_EINVAL;
  int rc = cuv__nccl_load();
  if (rc == 0)
    rc = cuv__nccl_status(cuv__nccl.ncclGetVersion(version));
  return rc;
}

CUV_EXTERN const char *cuv_nccl_error(void) {
  if (!atomic_load_explicit(&load_done, memory_order_acquire))
    return NULL;
  return load_error[0] ? load_error : NULL;
}
