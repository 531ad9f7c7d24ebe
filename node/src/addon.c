/* cuv_node: cuv for Node.js (Node-API). GPU work submitted from JavaScript settles Promises on
 * Node's own libuv loop through cuv's libuv bridge (uv/bridge.c, compiled into this module
 * against Node's uv.h: every uv_* symbol resolves to the node process's libuv). index.js is the
 * API users see (and index.d.ts its types); it wraps what this module exports with AbortSignal
 * handling and argument defaults. This file is the module's entry: each Node environment (the
 * main thread, every worker) gets its own state as instance data, set up at its first GPU call,
 * and an async cleanup hook that closes its bridge at its end, letting the work in flight finish
 * (cuv holds what the GPU uses until then) before the state goes. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addon.h"
#include "arrays.h"
#include "baseline.h"
#include "builtins.h"
#include "device_buffer.h"
#include "errors.h"
#include "info.h"
#include "jobs.h"
#include "kernels.h"
#include "pinned.h"
#include "ptx.h"
#include "sim.h"
#include "transfers.h"

/* ---- calls -------------------------------------------------------------------------------- */

bool cuv_node_call_get(napi_env env, napi_callback_info info, cuv_node_call_t *c) {
  void *data = NULL;
  c->env = env;
  c->argc = CUV_NODE_ARGS_MAX;
  c->detail[0] = '\0';
  if (napi_get_cb_info(env, info, &c->argc, c->argv, &c->self, NULL) != napi_ok ||
      napi_get_instance_data(env, &data) != napi_ok || !data)
    return false;
  c->addon = data;
  return true;
}

int cuv_node_fail(cuv_node_call_t *c, int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->detail, sizeof c->detail, fmt, ap);
  va_end(ap);
  return status;
}

int cuv_node_bad(cuv_node_call_t *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->detail, sizeof c->detail, fmt, ap); /* cuv_node_fail's, without a va_list form */
  va_end(ap);
  return CUV_EINVAL;
}

bool cuv_node_arg_absent(const cuv_node_call_t *c, size_t i) {
  napi_valuetype type = napi_undefined;
  return i >= c->argc || napi_typeof(c->env, c->argv[i], &type) != napi_ok ||
         type == napi_undefined;
}

/* ---- setup -------------------------------------------------------------------------------- */

static int open_bridge(cuv_node_addon_t *a) {
  uv_loop_t *loop = NULL;
  napi_value resource, name;
  if (napi_get_uv_event_loop(a->env, &loop) != napi_ok)
    return CUV_EINVAL;
  cuv_node_settler_open(a, loop);
  int rc = cuv_uv_open(&a->bridge, loop);
  if (rc == 0)
    cuv_node_feeder_open(&a->feeder, loop, a->bridge, cuv_node_job_refused, a);
  if (rc == 0 && (napi_create_object(a->env, &resource) != napi_ok ||
                  napi_create_string_utf8(a->env, "cuv", NAPI_AUTO_LENGTH, &name) != napi_ok ||
                  napi_async_init(a->env, resource, name, &a->async_context) != napi_ok ||
                  napi_create_reference(a->env, resource, 1, &a->resource) != napi_ok))
    rc = CUV_ENOMEM;
  return rc;
}

/* The default policy's width where CUV_STREAMS is unset (cuv's own default is 4): as many
 * streams as the GPU has queues to take work from, CUDA_DEVICE_MAX_CONNECTIONS (1 to 32; the
 * driver's 8 where it is unset or invalid). A Node program keeps many independent Promises in
 * flight from one thread, and only ops on different streams overlap on the GPU; but streams
 * beyond the queues share them, and then a launch may wait in the driver for another stream's
 * work (cuv's bench/RESULTS.md: the loop's delay with 10 000 long ops in flight). */
static unsigned node_streams(void) {
  const char *text = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  char *end = NULL;
  unsigned long queues = text && *text >= '0' && *text <= '9' ? strtoul(text, &end, 10) : 0;
  return end && *end == '\0' && queues >= 1 && queues <= 32 ? (unsigned)queues : 8;
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_status;

static void init_cuv(void) {
  cuv_config_t c;
  const char *streams = getenv("CUV_STREAMS");
  if (cuv_config_default(&c) < 0 || (streams && *streams)) {
    init_status = cuv_init(); /* the environment's configuration, or what is wrong with it */
    return;
  }
  c.streams = node_streams();
  init_status = cuv_init_with(&c);
}

int cuv_node_init(void) {
  pthread_once(&init_once, init_cuv);
  return init_status;
}

int cuv_node_setup(cuv_node_addon_t *a) {
  if (a->setup)
    return a->setup < 0 ? a->setup : 0;
  int rc = cuv_node_init();
  if (rc == 0)
    cuv_node_sim_attach(); /* before any kernel is looked up */
  if (rc == 0)
    rc = cuv_device_open(&a->dev, 0);
  if (rc == 0)
    rc = open_bridge(a); /* a bridge opened stays on failure: the cleanup hook closes it */
  a->setup = rc < 0 ? rc : 1;
  return rc;
}

/* *kernel = `name` from the embedded module `module` (the kernel holds its module). */
static int load_builtin(cuv_node_addon_t *a, const char *module, const char *name,
                        cuv_kernel_t **kernel) {
  const char *text = NULL;
  cuv_module_t *mod;
  for (size_t i = 0; i < cuv_node_ptx_count; i++) {
    if (strcmp(cuv_node_ptx[i].name, module) == 0)
      text = cuv_node_ptx[i].text;
  }
  int rc = text ? cuv_module_load_data(&mod, a->dev, text, 0) : CUV_ENOTFOUND;
  if (rc < 0)
    return rc;
  rc = cuv_kernel_get(kernel, mod, name);
  cuv_module_unref(mod);
  return rc;
}

int cuv_node_builtin_kernel(cuv_node_addon_t *a, const char *name, cuv_kernel_t **kernel) {
  bool saxpy = strcmp(name, "saxpy") == 0;
  cuv_kernel_t **slot = saxpy ? &a->saxpy : &a->dense;
  int rc = cuv_node_setup(a);
  if (rc == 0 && !*slot)
    rc = load_builtin(a, saxpy ? "saxpy" : "mlp", name, slot);
  *kernel = *slot;
  return rc;
}

/* ---- the environment's end ---------------------------------------------------------------- */

static void finish(cuv_node_addon_t *a) {
  cuv_kernel_unref(a->saxpy);
  cuv_kernel_unref(a->dense);
  if (a->dev)
    cuv_device_unref(a->dev);
  if (a->resource) {
    napi_async_destroy(a->env, a->async_context);
    napi_delete_reference(a->env, a->resource);
  }
  napi_ref classes[] = {a->buffer_class, a->module_class, a->kernel_class};
  for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++) {
    if (classes[i])
      napi_delete_reference(a->env, classes[i]);
  }
  if (a->handle_key)
    napi_delete_reference(a->env, a->handle_key);
  cuv_node_handles_release(a->handles); /* the buffers still numbered keep it */
  napi_remove_async_cleanup_hook(a->cleanup);
  free(a);
}

static void on_settler_closed(void *arg) { finish(arg); }

/* Every callback ran: the settler settles what it still holds, then closes. */
static void on_bridge_closed(cuv_uv_t *bridge, void *arg) {
  cuv_node_addon_t *a = arg;
  cuv_node_settler_close(a, on_settler_closed, a);
}

/* The feeder submitted everything it was given: the bridge's close delivers every callback. */
static void on_feeder_closed(void *arg) {
  cuv_node_addon_t *a = arg;
  if (!a->bridge || cuv_uv_close(a->bridge, on_bridge_closed, a) < 0)
    on_bridge_closed(NULL, a);
}

/* Node keeps running the environment's loop until napi_remove_async_cleanup_hook (in finish), so
 * the feeder and then the bridge close first. */
static void cleanup_hook(napi_async_cleanup_hook_handle handle, void *arg) {
  cuv_node_feeder_close(&((cuv_node_addon_t *)arg)->feeder, on_feeder_closed, arg);
}

/* ---- exports ------------------------------------------------------------------------------ */

#define FN(name, fn)                                                                               \
  { name, NULL, fn, NULL, NULL, NULL, napi_enumerable, NULL }
#define VALUE(name, v)                                                                             \
  { name, NULL, NULL, NULL, NULL, v, napi_enumerable, NULL }

static napi_value baseline_exports(napi_env env) {
  napi_value obj;
  const napi_property_descriptor props[] = {
      FN("saxpySync", cuv_node_js_saxpy_sync),
      FN("mlpSync", cuv_node_js_mlp_sync),
      FN("launchSync", cuv_node_js_launch_sync),
      FN("nopSync", cuv_node_js_nop_sync),
      FN("saxpyWork", cuv_node_js_saxpy_work),
      FN("mlpWork", cuv_node_js_mlp_work),
      FN("launchWork", cuv_node_js_launch_work),
      FN("nopWork", cuv_node_js_nop_work),
  };
  if (napi_create_object(env, &obj) != napi_ok ||
      napi_define_properties(env, obj, sizeof props / sizeof props[0], props) != napi_ok)
    return NULL;
  return obj;
}

/* The symbol DeviceBuffers' numbers are under (handles.h), with their table. */
static napi_value handle_key(napi_env env, cuv_node_addon_t *a) {
  napi_value name, key;
  if (!(a->handles = cuv_node_handles_new()) ||
      napi_create_string_utf8(env, "cuv.handle", NAPI_AUTO_LENGTH, &name) != napi_ok ||
      napi_create_symbol(env, name, &key) != napi_ok ||
      napi_create_reference(env, key, 1, &a->handle_key) != napi_ok)
    return NULL;
  return key;
}

static napi_status define_exports(napi_env env, cuv_node_addon_t *a, napi_value exports) {
  const napi_property_descriptor props[] = {
      FN("alloc", cuv_node_js_alloc),
      FN("upload", cuv_node_js_upload),
      FN("write", cuv_node_js_write),
      FN("download", cuv_node_js_download),
      FN("pinned", cuv_node_js_pinned),
      FN("isPinned", cuv_node_js_is_pinned),
      FN("saxpy", cuv_node_js_saxpy),
      FN("mlp", cuv_node_js_mlp),
      FN("nop", cuv_node_js_nop),
      FN("loadModule", cuv_node_js_load_module),
      FN("launch", cuv_node_js_launch),
      FN("cancel", cuv_node_js_cancel),
      FN("driver", cuv_node_js_driver),
      FN("config", cuv_node_js_config),
      FN("device", cuv_node_js_device),
      FN("stats", cuv_node_js_stats),
      FN("pending", cuv_node_js_pending),
      FN("liveBuffers", cuv_node_js_live_buffers),
      VALUE("DeviceBuffer", cuv_node_buffer_class(env, a)),
      VALUE("Module", cuv_node_module_class(env, a)),
      VALUE("Kernel", cuv_node_kernel_class(env, a)),
      VALUE("baseline", baseline_exports(env)),
      VALUE("sim", cuv_node_sim_exports(env)),
      VALUE("uvVersion", cuv_node_uv_version(env)),
      VALUE("ptx", cuv_node_ptx_table(env, false)),
      VALUE("ptxOrigin", cuv_node_ptx_table(env, true)),
      VALUE("handleKey", handle_key(env, a)),
  };
  for (size_t i = 0; i < sizeof props / sizeof props[0]; i++) {
    if (!props[i].method && !props[i].value)
      return napi_generic_failure;
  }
  return napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
}

#undef FN
#undef VALUE

/* Node may call this once per environment: the main thread and each worker. node_api.h's macro
 * defines functions it declares nowhere else. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
NAPI_MODULE_INIT() {
  cuv_node_addon_t *a = calloc(1, sizeof *a);
  if (!a) {
    napi_throw_error(env, "CUV_ENOMEM", cuv_strerror(CUV_ENOMEM));
    return NULL;
  }
  a->env = env;
  const char *no_external = getenv("CUV_NODE_NO_EXTERNAL_BUFFERS");
  a->no_external_buffers = no_external && strcmp(no_external, "1") == 0;
  if (napi_set_instance_data(env, a, NULL, NULL) != napi_ok ||
      napi_add_async_cleanup_hook(env, cleanup_hook, a, &a->cleanup) != napi_ok) {
    free(a);
    napi_throw_error(env, NULL, "cuv: cannot keep the environment's state");
    return NULL;
  }
  if (define_exports(env, a, exports) != napi_ok) {
    napi_throw_error(env, NULL, "cuv: cannot define the exports");
    return NULL;
  }
  return exports;
}
