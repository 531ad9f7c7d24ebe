/* The driver table. libcuda is never linked: it is opened with dlopen and every entry point is
 * resolved through cuGetProcAddress at the CUDA version of the headers we were built with (except
 * where driver_funcs.h says otherwise), so each pointer has exactly the prototype cuda.h declares.
 * The driver "sim" swaps in libcuv-sim. Initialization lives here too: it applies the one
 * configuration of the process (lib/config.c) and then loads the driver it names, once. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

cuv__driver_t cuv__drv;

#define SIM_SONAME CUV_SIM_SONAME /* libcuv-sim.so.<major>: lib/meson.build */

/* A message into why[n] (n may be 0: nobody asked). */
__attribute__((format(printf, 3, 4))) static void say(char *why, size_t n, const char *fmt, ...) {
  if (!why || !n)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, n, fmt, ap);
  va_end(ap);
}

/* What a driver name made cuv look for, for messages: a path speaks for itself. */
static const char *looked_for(const char *name) {
  if (strcmp(name, "cuda") == 0)
    return " (libcuda.so.1)";
  return strcmp(name, "sim") == 0 ? " (" SIM_SONAME ", on the library path or beside libcuv)" : "";
}

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

static int resolve_all(cuv__driver_t *table, get_proc_fn get_proc, const char **missing) {
#define CUV__RESOLVE(fn)                                                                          \
  do {                                                                                            \
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                  \
    void *ptr = NULL;                                                                             \
    if (get_proc(#fn, &ptr, CUV__DRIVER_VERSION(#fn), CU_GET_PROC_ADDRESS_DEFAULT, &found) !=     \
            CUDA_SUCCESS ||                                                                       \
        found != CU_GET_PROC_ADDRESS_SUCCESS)                                                     \
      ptr = NULL;                                                                                 \
    memcpy(&table->fn, &ptr, sizeof ptr); /* ISO C has no cast from object to function pointer */ \
    if (!ptr && !CUV__DRIVER_OPTIONAL(#fn)) {                                                     \
      *missing = #fn;                                                                             \
      return CUV_EDRIVER;                                                                         \
    }                                                                                             \
  } while (0);
  CUV__DRIVER_FUNCS(CUV__RESOLVE)
#undef CUV__RESOLVE
  return 0;
}

/* The optional entry point newer than cuv's cuda.h (driver_funcs.h), looked for once per load. */
static void resolve_host_func_v2(cuv__driver_t *table, get_proc_fn get_proc) {
  CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  void *ptr = NULL;
  if (get_proc("cuLaunchHostFunc_v2", &ptr, CUV__LAUNCH_HOST_FUNC_V2_VERSION,
               CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS ||
      found != CU_GET_PROC_ADDRESS_SUCCESS)
    ptr = NULL;
  memcpy(&table->cuLaunchHostFunc_v2, &ptr, sizeof ptr);
}

/* Loads path into table; on failure, a sentence naming what was tried goes into why[n]. */
static int load(cuv__driver_t *table, const char *path, char *why, size_t n) {
  memset(table, 0, sizeof *table);
  dlerror(); /* clear: the message below must be this load's */
  void *handle = open_library(path, table);
  if (!handle) {
    const char *reason = dlerror();
    const char *name = path && *path ? path : "cuda";
    say(why, n, "cannot load the driver \"%s\"%s: %s", name, looked_for(name),
        reason ? reason : "not found");
    memset(table, 0, sizeof *table);
    return CUV_ENODRIVER;
  }
  get_proc_fn get_proc;
  *(void **)&get_proc = dlsym(handle, "cuGetProcAddress_v2"); /* the POSIX idiom for functions */
  const char *missing = "cuGetProcAddress_v2";
  int rc = get_proc ? resolve_all(table, get_proc, &missing) : CUV_EDRIVER;
  if (rc < 0) {
    say(why, n, "the driver \"%s\" lacks %s", table->name, missing);
    dlclose(handle);
    memset(table, 0, sizeof *table);
    return rc;
  }
  resolve_host_func_v2(table, get_proc);
  table->handle = handle;
  return 0;
}

int cuv__driver_load(cuv__driver_t *table, const char *path) { return load(table, path, NULL, 0); }

void cuv__driver_unload(cuv__driver_t *table) {
  if (table->handle)
    dlclose(table->handle);
  memset(table, 0, sizeof *table);
}

/* ---- initialization: one configuration, applied once per process ---- */

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool init_done;
static int init_status;
/* Under init_lock: why the initialization failed, for good ("" when it succeeded or did not run),
 * and cuv_init_error's text, why the last initialization call failed ("" when it succeeded). */
static char init_error[PATH_MAX + 256];
static char call_error[PATH_MAX + 256];

/* cuInit on the loaded table; a driver without a usable device is, for the user, no driver. */
static int start_driver(void) {
  CUresult r = cuv__drv.cuInit(0);
  int rc = 0;
  if (r == CUDA_ERROR_NO_DEVICE || r == CUDA_ERROR_STUB_LIBRARY)
    rc = CUV_ENODRIVER;
  else if (r != CUDA_SUCCESS)
    rc = cuv__cu(r);
  if (rc == 0)
    rc = cuv__cu(cuv__drv.cuDriverGetVersion(&cuv__drv.version));
  if (rc < 0) {
    const char *name = NULL;
    if (r != CUDA_SUCCESS && cuv__drv.cuGetErrorName)
      cuv__drv.cuGetErrorName(r, &name);
    say(init_error, sizeof init_error, "the driver \"%s\" did not start: %s (%s)", cuv__drv.name,
        r != CUDA_SUCCESS ? "cuInit failed" : "cuDriverGetVersion failed",
        name ? name : "no usable device or an unknown error");
  }
  return rc;
}

/* With init_lock held and nothing initialized: config (NULL: the environment's) checked, applied
 * and the driver loaded. A refused configuration initializes nothing and says why in call_error. */
static int init_locked(const cuv_config_t *config) {
  cuv_config_t env;
  int rc = 0;
  if (!config) {
    rc = cuv__config_from_env(&env, call_error, sizeof call_error);
    config = &env;
  }
  if (rc == 0)
    rc = cuv__config_check(config, call_error, sizeof call_error);
  if (rc < 0)
    return rc;
  cuv__config_apply(config);
  init_error[0] = '\0';
  rc = load(&cuv__drv, cuv__config.driver, init_error, sizeof init_error);
  if (rc == 0)
    rc = start_driver();
  init_status = rc;
  atomic_store_explicit(&init_done, true, memory_order_release);
  return rc;
}

/* An initialization call: the first initializes; a later one with another configuration is
 * refused, and says which field differs; any other returns the initialization's status, and its
 * text becomes cuv_init_error's again (none once it succeeded). */
static int init_with(const cuv_config_t *config) {
  pthread_mutex_lock(&init_lock);
  int rc;
  bool refused = false;
  if (!atomic_load_explicit(&init_done, memory_order_relaxed)) {
    rc = init_locked(config);
    refused = !atomic_load_explicit(&init_done, memory_order_relaxed);
  } else if (config && cuv__config_differs(config, call_error, sizeof call_error)) {
    rc = CUV_EBUSY;
    refused = true;
  } else {
    rc = init_status;
  }
  if (!refused)
    snprintf(call_error, sizeof call_error, "%s", init_error);
  pthread_mutex_unlock(&init_lock);
  return rc;
}

int cuv__driver_init(void) {
  if (atomic_load_explicit(&init_done, memory_order_acquire))
    return init_status;
  return init_with(NULL);
}

/* Not through cuv__driver_init's shortcut: a call of its own resets cuv_init_error's text. */
CUV_EXTERN int cuv_init(void) { return init_with(NULL); }

CUV_EXTERN int cuv_init_with(const cuv_config_t *config) {
  pthread_mutex_lock(&init_lock);
  int rc = cuv__config_check(config, call_error, sizeof call_error); /* also after init */
  pthread_mutex_unlock(&init_lock);
  return rc < 0 ? rc : init_with(config);
}

/* The process initialized, and successfully. */
static bool initialized(void) {
  return atomic_load_explicit(&init_done, memory_order_acquire) && init_status == 0;
}

CUV_EXTERN int cuv_config_get(cuv_config_t *config) {
  if (!config)
    return CUV_EINVAL;
  if (atomic_load_explicit(&init_done, memory_order_acquire)) {
    *config = cuv__config;
    return 0;
  }
  /* A query fixes nothing: what cuv_init() would apply now, or CUV_EINVAL where it would refuse;
   * the default NCCL spelled "", as cuv__config_apply spells it. */
  int rc = cuv__config_from_env(config, NULL, 0);
  if (!config->nccl)
    config->nccl = "";
  return rc;
}

CUV_EXTERN const char *cuv_init_error(void) {
  pthread_mutex_lock(&init_lock);
  const char *why = call_error[0] ? call_error : NULL;
  pthread_mutex_unlock(&init_lock);
  return why;
}

CUV_EXTERN const char *cuv_driver_name(void) { return initialized() ? cuv__drv.name : NULL; }

CUV_EXTERN bool cuv_driver_is_sim(void) { return initialized() && cuv__drv.is_sim; }

CUV_EXTERN bool cuv_driver_has_host_task_modes(void) {
  return initialized() && cuv__drv.cuLaunchHostFunc_v2;
}

CUV_EXTERN int cuv_driver_version(int *version) {
  if (!version)
    return CUV_EINVAL;
  int rc = cuv__driver_init(); /* the driver must be loaded to answer: documented in cuv.h */
  if (rc == 0)
    *version = cuv__drv.version;
  return rc;
}
