/* One Node environment's state (instance data): set up at its first GPU call, closed by an async
 * cleanup hook at its end, letting the work in flight finish (cuv holds what the GPU uses until
 * then) before the state goes (instance.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "addon.h"
#include "ptx.h"

/* ---- setup -------------------------------------------------------------------------------- */

static int open_bridge(cuv_node_addon_t *a) {
  uv_loop_t *loop = NULL;
  napi_value resource, name;
  if (napi_get_uv_event_loop(a->env, &loop) != napi_ok)
    return CUV_EINVAL;
  cuv_node_scope_t *s = &a->scope;
  s->env = a->env;
  int rc = cuv_uv_open(&a->bridge, loop);
  if (rc == 0 && (napi_create_object(a->env, &resource) != napi_ok ||
                  napi_create_string_utf8(a->env, "cuv", NAPI_AUTO_LENGTH, &name) != napi_ok ||
                  napi_async_init(a->env, resource, name, &s->context) != napi_ok ||
                  napi_create_reference(a->env, resource, 1, &s->resource) != napi_ok))
    rc = CUV_ENOMEM;
  if (rc == 0)
    rc = cuv_node_scope_attach(s, a->bridge);
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

/* The submission ring's capacity where CUV_SUBMIT_RING is unset (cuv's own default is 1 024). A
 * Node program makes thousands of calls in one turn (a Promise.all over an array), and a call
 * that finds the ring full makes the oldest queued job's driver calls on the JavaScript thread
 * (docs/engine.md): 5 000 calls at once then cost some of them milliseconds each. 16 384 slots
 * are 256 KiB per device. */
#define NODE_SUBMIT_RING 16384u

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_status;

static bool env_set(const char *name) {
  const char *text = getenv(name);
  return text && *text;
}

/* cuv's configuration from the environment, with the package's defaults for what it leaves
 * unset: a variable the user set always wins. */
static void init_cuv(void) {
  cuv_config_t c;
  if (cuv_config_default(&c) < 0) {
    init_status = cuv_init(); /* what is wrong with the environment, as cuv_init says it */
    return;
  }
  if (!env_set("CUV_STREAMS"))
    c.streams = node_streams();
  if (!env_set("CUV_SUBMIT_RING"))
    c.submit_ring = NODE_SUBMIT_RING;
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
    a->hooks->attach(); /* before any kernel is looked up */
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
  if (a->scope.resource) {
    napi_async_destroy(a->env, a->scope.context);
    napi_delete_reference(a->env, a->scope.resource);
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

/* Every callback ran, and every Promise settled (the bridge's close delivers them all). */
static void on_bridge_closed(cuv_uv_t *bridge, void *arg) { finish(arg); }

/* Node keeps running the environment's loop until napi_remove_async_cleanup_hook (in finish), so
 * the bridge closes first. */
static void cleanup_hook(napi_async_cleanup_hook_handle handle, void *arg) {
  cuv_node_addon_t *a = arg;
  if (!a->bridge || cuv_uv_close(a->bridge, on_bridge_closed, a) < 0)
    on_bridge_closed(NULL, a);
}

cuv_node_addon_t *cuv_node_instance_new(napi_env env, const cuv_node_instance_hooks_t *hooks) {
  cuv_node_addon_t *a = calloc(1, sizeof *a);
  if (!a) {
    napi_throw_error(env, "CUV_ENOMEM", cuv_strerror(CUV_ENOMEM));
    return NULL;
  }
  a->env = env;
  a->hooks = hooks;
  const char *no_external = getenv("CUV_NODE_NO_EXTERNAL_BUFFERS");
  a->no_external_buffers = no_external && strcmp(no_external, "1") == 0;
  if (napi_set_instance_data(env, a, NULL, NULL) != napi_ok ||
      napi_add_async_cleanup_hook(env, cleanup_hook, a, &a->cleanup) != napi_ok) {
    free(a);
    napi_throw_error(env, NULL, "cuv: cannot keep the environment's state");
    return NULL;
  }
  return a;
}
