/* libcuv-sim from JavaScript (sim.h). */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include <cuv.h>

#include "addon.h"
#include "errors.h"
#include "sim.h"
#include "twins.h"

/* The simulator's API as the loaded library exports it; NULL when it is not loaded. */
static struct {
  cuv_node_register_fn register_kernel;
  void (*set_kernel_duration)(const char *name, unsigned usec);
  void (*fail)(const char *entry, unsigned nth, int result);
  void (*fail_clear)(void);
  unsigned long (*calls)(const char *entry);
  bool complete; /* every function above was found */
} api;

static pthread_once_t attach_once = PTHREAD_ONCE_INIT;

/* Looks a function up; dlsym's object pointer is copied into a function pointer (the POSIX way). */
static void resolve(void *lib, const char *name, void *fn, size_t size) {
  void *sym = dlsym(lib, name);
  memcpy(fn, &sym, size);
}

static void attach(void) {
  /* The library cuv loaded, found by its soname: RTLD_NOLOAD never loads a second copy. */
  void *lib = dlopen(CUV_SIM_SONAME, RTLD_NOW | RTLD_NOLOAD);
  if (!lib)
    return;
  resolve(lib, "cuv_sim_register_kernel", &api.register_kernel, sizeof api.register_kernel);
  resolve(lib, "cuv_sim_set_kernel_duration", &api.set_kernel_duration,
          sizeof api.set_kernel_duration);
  resolve(lib, "cuv_sim_fail", &api.fail, sizeof api.fail);
  resolve(lib, "cuv_sim_fail_clear", &api.fail_clear, sizeof api.fail_clear);
  resolve(lib, "cuv_sim_calls", &api.calls, sizeof api.calls);
  api.complete =
      api.register_kernel && api.set_kernel_duration && api.fail && api.fail_clear && api.calls;
  if (api.complete)
    cuv_node_twins_register(api.register_kernel);
}

void cuv_node_sim_attach(void) {
  if (cuv_driver_is_sim())
    pthread_once(&attach_once, attach);
}

/* The call, once the driver is known to be the simulator; false after throwing. */
static bool sim_call(napi_env env, napi_callback_info info, cuv_node_call_t *c) {
  if (!cuv_node_call_get(env, info, c))
    return false;
  int rc = cuv_node_setup(c->addon);
  if (rc == 0 && !(cuv_driver_is_sim() && api.complete))
    rc = cuv_node_fail(c, CUV_ENOTSUP, "the driver is not the simulator (CUV_DRIVER=sim)");
  if (rc < 0)
    cuv_node_throw(env, rc, c->detail);
  return rc == 0;
}

static bool get_name(cuv_node_call_t *c, size_t i, char *name, size_t size) {
  size_t len = 0;
  return napi_get_value_string_utf8(c->env, c->argv[i], name, size, &len) == napi_ok && len > 0 &&
         len + 1 < size;
}

static napi_value kernel_duration(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  char name[128];
  uint32_t usec;
  if (!sim_call(env, info, &c))
    return NULL;
  if (!get_name(&c, 0, name, sizeof name) ||
      napi_get_value_uint32(env, c.argv[1], &usec) != napi_ok)
    return cuv_node_throw(env, CUV_EINVAL, "expected (kernel name, microseconds)");
  api.set_kernel_duration(name, usec);
  return NULL;
}

static napi_value fail(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  char entry[64];
  uint32_t nth;
  int32_t result;
  if (!sim_call(env, info, &c))
    return NULL;
  if (!get_name(&c, 0, entry, sizeof entry) ||
      napi_get_value_uint32(env, c.argv[1], &nth) != napi_ok ||
      napi_get_value_int32(env, c.argv[2], &result) != napi_ok)
    return cuv_node_throw(env, CUV_EINVAL, "expected (entry point, nth call, CUresult)");
  api.fail(entry, nth, result);
  return NULL;
}

static napi_value clear_failures(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  if (sim_call(env, info, &c))
    api.fail_clear();
  return NULL;
}

static napi_value calls(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  char entry[64];
  napi_value result = NULL;
  if (!sim_call(env, info, &c))
    return NULL;
  if (!get_name(&c, 0, entry, sizeof entry))
    return cuv_node_throw(env, CUV_EINVAL, "expected an entry point's name");
  napi_create_double(env, (double)api.calls(entry), &result);
  return result;
}

napi_value cuv_node_sim_exports(napi_env env) {
  napi_value obj;
  const napi_property_descriptor props[] = {
      {"kernelDuration", NULL, kernel_duration, NULL, NULL, NULL, napi_enumerable, NULL},
      {"fail", NULL, fail, NULL, NULL, NULL, napi_enumerable, NULL},
      {"clearFailures", NULL, clear_failures, NULL, NULL, NULL, napi_enumerable, NULL},
      {"calls", NULL, calls, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  if (napi_create_object(env, &obj) != napi_ok ||
      napi_define_properties(env, obj, sizeof props / sizeof props[0], props) != napi_ok)
    return NULL;
  return obj;
}
