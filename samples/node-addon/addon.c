/* cuv_node: a Node.js addon (N-API) that runs cuv work on the GPU and settles Promises on Node's
 * own libuv loop, through the cuv libuv bridge (uv/bridge.c, compiled into this module against
 * Node's uv.h; every uv_* symbol resolves to the node process's libuv when the module loads).
 *
 * JavaScript API (index.js re-exports it). Every asynchronous function returns a Promise and
 * never throws: bad arguments reject too.
 *   upload(Float32Array)          -> Promise<DeviceBuffer>  the array is copied at once
 *   download(DeviceBuffer)        -> Promise<Float32Array>
 *   saxpy(a, x, y)                -> Promise<y>             y = a*x + y, on the device
 *   mlp(x, rows, [{weights, bias}, ...]) -> Promise<DeviceBuffer>
 *                                    a dense layer each (weights out x in, row-major), relu
 *                                    between layers; x holds `rows` rows of `in` floats
 *   nop()                         -> Promise<undefined>     an empty op (cuv_value) round trip
 *   saxpySync(a, x, y), nopSync()    the same work run with cuv_sync, blocking (for bench.js)
 *   driver()                      -> "sim", "cuda" (or CUV_DRIVER's path); null without a driver
 *   device()                      -> the device's name (opens it); throws without a driver
 *   stats()                       -> cuv_stats() counters;  pending() -> callbacks outstanding
 *   liveBuffers()                 -> DeviceBuffers not yet finalized (the whole process)
 *   simKernelDuration(name, usec)    simulator builds: each launch of `name` takes >= usec
 *   simFail(entry, nth, result)      simulator builds: failure injection (cuv_sim_fail); simFail()
 *                                    clears it
 *   uvVersion                     -> {header, runtime}: libuv of the headers and of the process
 * A DeviceBuffer is an object with `length` (in floats); when it is garbage collected its
 * cuv_buffer_t reference is dropped (the memory is freed once no submission uses it either).
 * Errors are Error objects whose message is cuv_strerror's (with what was wrong with an argument)
 * and whose `code` is cuv_err_name's ("CUV_EINVAL", "CUDA_ERROR_ILLEGAL_ADDRESS", ...).
 *
 * Threads: everything here runs on the JavaScript thread, which is the loop's thread; so do the
 * bridge's completion callbacks. Each environment (main thread, worker) has its own state and
 * bridge; an async cleanup hook closes the bridge (letting work in flight finish) at its end. */
#define NAPI_VERSION 8
#include <node_api.h>
#include <uv.h>

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuv.h>
#include <cuv/uv.h>
#ifdef CUV_NODE_WITH_SIM
#include <cuv/sim.h>

#include "twins.h"
#endif

#define DETAIL_MAX 160 /* what was wrong with an argument, appended to cuv_strerror's message */
#define BLOCK 256u

typedef struct addon {
  napi_env env;
  int setup; /* 0: not yet; 1: ready; < 0: the error setting up failed with (kept) */
  cuv_device_t *dev;
  cuv_kernel_t *saxpy, *dense; /* samples/saxpy's kernel, apps/tcp-infer's dense layer */
  cuv_uv_t *bridge;
  napi_ref resource; /* the async resource completions run under (napi_open_callback_scope) */
  napi_async_context async_context;
  napi_async_cleanup_hook_handle cleanup;
} addon_t;

/* One Promise in flight: what it resolves with once its submission completes. */
typedef struct job {
  addon_t *addon;
  napi_deferred deferred;
  napi_ref value;       /* resolve with this object (saxpy's y, download's array), or NULL */
  cuv_buffer_t *buffer; /* or with a new DeviceBuffer that takes over this reference */
} job_t;

/* DeviceBuffer handles whose finalizer has not run yet, in the whole process (tests read it). */
static atomic_uint live_handles;

static const napi_type_tag buffer_tag = {0x6375765f6e6f6465ull, 0x4465766963654266ull};

/* ---- errors ------------------------------------------------------------------------------- */

static napi_value make_error(napi_env env, int status, const char *detail) {
  char message[DETAIL_MAX + 160];
  if (detail && *detail)
    snprintf(message, sizeof message, "%s: %s", cuv_strerror(status), detail);
  else
    snprintf(message, sizeof message, "%s", cuv_strerror(status));
  napi_value code, msg, error = NULL;
  napi_create_string_utf8(env, cuv_err_name(status), NAPI_AUTO_LENGTH, &code);
  napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &msg);
  napi_create_error(env, code, msg, &error);
  return error;
}

static napi_value throw_status(napi_env env, int status, const char *detail) {
  napi_throw(env, make_error(env, status, detail));
  return NULL;
}

static napi_value rejected(napi_env env, int status, const char *detail) {
  napi_deferred deferred;
  napi_value promise;
  if (napi_create_promise(env, &deferred, &promise) != napi_ok)
    return NULL;
  napi_reject_deferred(env, deferred, make_error(env, status, detail));
  return promise;
}

/* ---- DeviceBuffer handles ----------------------------------------------------------------- */

static void buffer_finalize(napi_env env, void *data, void *hint) {
  cuv_buffer_t *buf = data;
  int64_t ignored;
  napi_adjust_external_memory(env, -(int64_t)cuv_buffer_size(buf), &ignored);
  cuv_buffer_unref(buf);
  atomic_fetch_sub(&live_handles, 1);
}

/* A new handle owning the caller's reference on buf (dropped here when this fails). */
static napi_value buffer_handle(napi_env env, cuv_buffer_t *buf) {
  napi_value obj, length;
  if (napi_create_object(env, &obj) != napi_ok ||
      napi_create_uint32(env, (uint32_t)(cuv_buffer_size(buf) / sizeof(float)), &length) !=
          napi_ok ||
      napi_wrap(env, obj, buf, buffer_finalize, NULL, NULL) != napi_ok) {
    cuv_buffer_unref(buf);
    return NULL;
  }
  atomic_fetch_add(&live_handles, 1);
  int64_t ignored; /* device memory counts as external memory: it makes the GC collect sooner */
  napi_adjust_external_memory(env, (int64_t)cuv_buffer_size(buf), &ignored);
  napi_property_descriptor prop = {"length", NULL, NULL, NULL, NULL, length, napi_enumerable, NULL};
  napi_define_properties(env, obj, 1, &prop);
  napi_type_tag_object(env, obj, &buffer_tag);
  return obj;
}

/* The buffer behind a DeviceBuffer (borrowed), or NULL when value is not one. */
static cuv_buffer_t *get_buffer(napi_env env, napi_value value) {
  napi_valuetype type;
  bool tagged = false;
  void *buf = NULL;
  if (napi_typeof(env, value, &type) != napi_ok || type != napi_object ||
      napi_check_object_type_tag(env, value, &buffer_tag, &tagged) != napi_ok || !tagged ||
      napi_unwrap(env, value, &buf) != napi_ok)
    return NULL;
  return buf;
}

static size_t buffer_floats(const cuv_buffer_t *buf) {
  return cuv_buffer_size(buf) / sizeof(float);
}

static bool get_number(napi_env env, napi_value value, double *out) {
  return napi_get_value_double(env, value, out) == napi_ok;
}

/* A Float32Array's data and length. */
static bool get_floats(napi_env env, napi_value value, float **data, size_t *n) {
  bool is_typed = false;
  napi_typedarray_type type;
  napi_value arraybuffer;
  size_t offset;
  return napi_is_typedarray(env, value, &is_typed) == napi_ok && is_typed &&
         napi_get_typedarray_info(env, value, &type, n, (void **)data, &arraybuffer, &offset) ==
             napi_ok &&
         type == napi_float32_array;
}

/* ---- setup and teardown ------------------------------------------------------------------- */

static void release_gpu(addon_t *a) {
  cuv_kernel_unref(a->saxpy);
  cuv_kernel_unref(a->dense);
  if (a->dev)
    cuv_device_unref(a->dev);
  a->saxpy = a->dense = NULL;
  a->dev = NULL;
}

/* *kernel = `name` of the PTX file `path` (the kernel holds its module). */
static int load_kernel(cuv_device_t *dev, const char *path, const char *name,
                       cuv_kernel_t **kernel) {
  cuv_module_t *mod;
  int rc = cuv_module_load_file(&mod, dev, path);
  if (rc < 0)
    return rc;
  rc = cuv_kernel_get(kernel, mod, name);
  cuv_module_unref(mod);
  return rc;
}

static int open_gpu(addon_t *a) {
  int rc = cuv_device_open(&a->dev, 0);
  if (rc == 0)
    rc = load_kernel(a->dev, CUV_NODE_SAXPY_PTX, "saxpy", &a->saxpy);
  if (rc == 0)
    rc = load_kernel(a->dev, CUV_NODE_MLP_PTX, "mlp_dense", &a->dense);
  return rc;
}

/* Opens the device, loads the kernels and opens the bridge on Node's loop, once (first use). */
static int setup(napi_env env, addon_t *a) {
  if (a->setup)
    return a->setup < 0 ? a->setup : 0;
  uv_loop_t *loop = NULL;
  napi_value resource, name;
  int rc = cuv_init();
  if (rc == 0)
    rc = open_gpu(a);
  if (rc == 0 && napi_get_uv_event_loop(env, &loop) != napi_ok)
    rc = CUV_EINVAL;
  if (rc == 0)
    rc = cuv_uv_open(&a->bridge, loop);
  if (rc == 0 && (napi_create_object(env, &resource) != napi_ok ||
                  napi_create_string_utf8(env, "cuv", NAPI_AUTO_LENGTH, &name) != napi_ok ||
                  napi_async_init(env, resource, name, &a->async_context) != napi_ok ||
                  napi_create_reference(env, resource, 1, &a->resource) != napi_ok))
    rc = CUV_ENOMEM;
  if (rc < 0)
    release_gpu(a); /* an open bridge stays: the cleanup hook closes it */
  a->setup = rc < 0 ? rc : 1;
  return rc;
}

/* The environment ends (process exit, worker exit): close the bridge, which lets the work in
 * flight complete and run its callbacks, then free the state. Node keeps running the loop until
 * napi_remove_async_cleanup_hook. */
static void finish(addon_t *a) {
  release_gpu(a);
  if (a->resource) {
    napi_async_destroy(a->env, a->async_context);
    napi_delete_reference(a->env, a->resource);
  }
  napi_remove_async_cleanup_hook(a->cleanup);
  free(a);
}

static void on_bridge_closed(cuv_uv_t *bridge, void *arg) { finish(arg); }

static void cleanup_hook(napi_async_cleanup_hook_handle handle, void *arg) {
  addon_t *a = arg;
  if (!a->bridge || cuv_uv_close(a->bridge, on_bridge_closed, a) < 0)
    finish(a);
}

/* ---- Promises ----------------------------------------------------------------------------- */

/* Settles job's Promise with status and frees the job. */
static void settle(napi_env env, job_t *job, int status) {
  napi_value value = NULL;
  if (status == 0 && job->buffer) {
    value = buffer_handle(env, job->buffer); /* takes the reference, also when it fails */
    job->buffer = NULL;
    if (!value)
      status = CUV_ENOMEM;
  } else if (status == 0 && job->value) {
    napi_get_reference_value(env, job->value, &value);
  } else if (status == 0) {
    napi_get_undefined(env, &value);
  }
  if (status == 0)
    napi_resolve_deferred(env, job->deferred, value);
  else
    napi_reject_deferred(env, job->deferred, make_error(env, status, NULL));
  if (job->value)
    napi_delete_reference(env, job->value);
  cuv_buffer_unref(job->buffer);
  free(job);
}

/* The bridge's callback, on the loop thread outside any JavaScript: a callback scope makes Node
 * run the microtasks (the Promise reactions) when it closes, as after any native callback. */
static void on_done(int status, cuv_output_t *output, void *arg) {
  job_t *job = arg;
  napi_env env = job->addon->env;
  napi_handle_scope handles;
  napi_callback_scope scope = NULL;
  napi_value resource;
  (void)output; /* released by cuv after this returns; no op here outputs anything kept */
  napi_open_handle_scope(env, &handles);
  if (napi_get_reference_value(env, job->addon->resource, &resource) != napi_ok ||
      napi_open_callback_scope(env, resource, job->addon->async_context, &scope) != napi_ok)
    scope = NULL;
  settle(env, job, status);
  if (scope)
    napi_close_callback_scope(env, scope);
  napi_close_handle_scope(env, handles);
}

/* Submits op into the bridge; the Promise resolves with `keep` (may be NULL), or with a new
 * DeviceBuffer that takes over the reference `result` (may be NULL). Consumes op and result. */
static napi_value submit(napi_env env, addon_t *a, cuv_op_t *op, napi_value keep,
                         cuv_buffer_t *result) {
  napi_value promise;
  job_t *job = calloc(1, sizeof *job);
  if (!job || napi_create_promise(env, &job->deferred, &promise) != napi_ok) {
    cuv_op_destroy(op);
    cuv_buffer_unref(result);
    free(job);
    return rejected(env, CUV_ENOMEM, NULL);
  }
  job->addon = a;
  job->buffer = result;
  int rc = CUV_ENOMEM;
  if (keep && napi_create_reference(env, keep, 1, &job->value) != napi_ok)
    cuv_op_destroy(op);
  else
    rc = cuv_uv_submit(a->bridge, op, on_done, job, NULL);
  if (rc < 0)
    settle(env, job, rc); /* refused: done will not run */
  return promise;
}

/* ---- argument handling -------------------------------------------------------------------- */

typedef struct call {
  napi_env env;
  addon_t *addon;
  napi_value argv[3];
  char detail[DETAIL_MAX];
} call_t;

static bool get_call(napi_env env, napi_callback_info info, call_t *c) {
  size_t argc = 3;
  void *data = NULL;
  c->env = env;
  c->detail[0] = 0;
  if (napi_get_cb_info(env, info, &argc, c->argv, NULL, &data) != napi_ok)
    return false;
  c->addon = data;
  return true;
}

/* Records what was wrong with an argument; returns CUV_EINVAL. */
static int bad(call_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(call_t *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->detail, sizeof c->detail, fmt, ap);
  va_end(ap);
  return CUV_EINVAL;
}

static int get_buffer_arg(call_t *c, size_t i, const char *name, cuv_buffer_t **buf) {
  *buf = get_buffer(c->env, c->argv[i]);
  return *buf ? 0 : bad(c, "%s must be a DeviceBuffer (from upload)", name);
}

/* ---- the ops ------------------------------------------------------------------------------ */

static cuv_dim3_t grid_for(size_t threads) {
  return CUV_DIM1((unsigned)((threads + BLOCK - 1) / BLOCK));
}

/* saxpy(a, x, y): argv = a, x, y. */
static int build_saxpy(call_t *c, cuv_op_t **op) {
  double a_value;
  cuv_buffer_t *x, *y;
  int rc;
  if (!get_number(c->env, c->argv[0], &a_value))
    return bad(c, "a must be a number");
  if ((rc = get_buffer_arg(c, 1, "x", &x)) < 0 || (rc = get_buffer_arg(c, 2, "y", &y)) < 0)
    return rc;
  if (buffer_floats(x) != buffer_floats(y))
    return bad(c, "x and y differ in length (%zu and %zu)", buffer_floats(x), buffer_floats(y));
  if ((rc = setup(c->env, c->addon)) < 0)
    return rc;
  unsigned n = (unsigned)buffer_floats(x);
  float a = (float)a_value;
  const cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(a), CUV_ARG_READ(x), CUV_ARG_RW(y)};
  *op = cuv_launch(c->addon->saxpy, grid_for(n), CUV_DIM1(BLOCK), 0, args, 4);
  return 0;
}

/* One layer of mlp(x, rows, layers): y = act(w x + b) for `rows` rows of `in` floats. */
static int build_layer(call_t *c, napi_value layer, unsigned index, unsigned rows, unsigned *in,
                       bool relu, cuv_buffer_t *x, cuv_op_t **op, cuv_buffer_t **y) {
  napi_value wv = NULL, bv = NULL;
  cuv_buffer_t *w = NULL, *b = NULL;
  napi_valuetype type;
  if (napi_typeof(c->env, layer, &type) != napi_ok || type != napi_object ||
      napi_get_named_property(c->env, layer, "weights", &wv) != napi_ok ||
      napi_get_named_property(c->env, layer, "bias", &bv) != napi_ok ||
      !(w = get_buffer(c->env, wv)) || !(b = get_buffer(c->env, bv)))
    return bad(c, "layers[%u] must be {weights, bias} of DeviceBuffers", index);
  size_t out = buffer_floats(b);
  if (buffer_floats(w) != out * *in)
    return bad(c, "layers[%u].weights has %zu floats, expected %zu (%zu outputs x %u inputs)",
               index, buffer_floats(w), out * *in, out, *in);
  int rc = cuv_buffer_create(y, c->addon->dev, (size_t)rows * out * sizeof(float));
  if (rc < 0)
    return rc;
  unsigned outputs = (unsigned)out, act = relu;
  const cuv_arg_t args[] = {CUV_ARG_VALUE(rows), CUV_ARG_VALUE(*in), CUV_ARG_VALUE(outputs),
                            CUV_ARG_READ(x), CUV_ARG_READ(w), CUV_ARG_READ(b),
                            CUV_ARG_WRITE(*y), CUV_ARG_VALUE(act)};
  *op = cuv_launch(c->addon->dense, grid_for((size_t)rows * out), CUV_DIM1(BLOCK), 0, args, 8);
  *in = outputs;
  return 0;
}

/* mlp(x, rows, layers): argv = x, rows, layers. *result receives the output buffer. */
static int build_mlp(call_t *c, cuv_op_t **op, cuv_buffer_t **result) {
  cuv_buffer_t *x;
  uint32_t rows, nlayers;
  bool is_array = false;
  int rc;
  if ((rc = get_buffer_arg(c, 0, "x", &x)) < 0)
    return rc;
  if (napi_get_value_uint32(c->env, c->argv[1], &rows) != napi_ok || rows == 0)
    return bad(c, "rows must be a positive integer");
  if (buffer_floats(x) % rows != 0)
    return bad(c, "x has %zu floats, not a multiple of %u rows", buffer_floats(x), rows);
  if (napi_is_array(c->env, c->argv[2], &is_array) != napi_ok || !is_array ||
      napi_get_array_length(c->env, c->argv[2], &nlayers) != napi_ok || nlayers == 0)
    return bad(c, "layers must be a non-empty array");
  if ((rc = setup(c->env, c->addon)) < 0)
    return rc;
  unsigned in = (unsigned)(buffer_floats(x) / rows);
  cuv_op_t *chain = NULL;
  cuv_buffer_t *input = cuv_buffer_ref(x);
  for (uint32_t i = 0; i < nlayers && rc == 0; i++) {
    napi_value layer;
    cuv_op_t *launch = NULL;
    cuv_buffer_t *y = NULL;
    if (napi_get_element(c->env, c->argv[2], i, &layer) != napi_ok)
      rc = bad(c, "layers[%u] cannot be read", i);
    else
      rc = build_layer(c, layer, i, rows, &in, i + 1 < nlayers, input, &launch, &y);
    if (rc == 0) {
      chain = chain ? cuv_seq(chain, launch) : launch; /* the launches hold their buffers */
      cuv_buffer_unref(input);
      input = y;
    }
  }
  if (rc < 0) {
    cuv_op_destroy(chain);
    cuv_buffer_unref(input);
    return rc;
  }
  *op = chain;
  *result = input;
  return 0;
}

/* ---- JavaScript functions ----------------------------------------------------------------- */

static napi_value js_upload(napi_env env, napi_callback_info info) {
  call_t c;
  float *data;
  size_t n;
  cuv_buffer_t *buf;
  if (!get_call(env, info, &c))
    return NULL;
  if (!get_floats(env, c.argv[0], &data, &n))
    return rejected(env, CUV_EINVAL, "expected a Float32Array");
  if (n == 0)
    return rejected(env, CUV_EINVAL, "the array is empty");
  int rc = setup(env, c.addon);
  if (rc == 0)
    rc = cuv_buffer_create(&buf, c.addon->dev, n * sizeof(float));
  if (rc < 0)
    return rejected(env, rc, NULL);
  /* Staged: the data is copied now, so the caller may change the array at once. */
  cuv_op_t *op = cuv_memcpy_htod(buf, 0, data, n * sizeof(float), CUV_COPY_STAGE);
  return submit(env, c.addon, op, NULL, buf);
}

static napi_value js_download(napi_env env, napi_callback_info info) {
  call_t c;
  cuv_buffer_t *src;
  napi_value arraybuffer, array;
  void *data;
  if (!get_call(env, info, &c))
    return NULL;
  int rc = get_buffer_arg(&c, 0, "the argument", &src);
  if (rc == 0)
    rc = setup(env, c.addon);
  if (rc < 0)
    return rejected(env, rc, c.detail);
  size_t n = buffer_floats(src);
  if (napi_create_arraybuffer(env, n * sizeof(float), &data, &arraybuffer) != napi_ok ||
      napi_create_typedarray(env, napi_float32_array, n, arraybuffer, 0, &array) != napi_ok)
    return rejected(env, CUV_ENOMEM, NULL);
  /* Straight into the array's memory: the job's reference keeps it alive (backing stores do
   * not move), and no script sees it before the Promise resolves. */
  return submit(env, c.addon, cuv_memcpy_dtoh(data, src, 0, n * sizeof(float)), array, NULL);
}

static napi_value js_saxpy(napi_env env, napi_callback_info info) {
  call_t c;
  cuv_op_t *op = NULL;
  if (!get_call(env, info, &c))
    return NULL;
  int rc = build_saxpy(&c, &op);
  return rc < 0 ? rejected(env, rc, c.detail) : submit(env, c.addon, op, c.argv[2], NULL);
}

static napi_value js_saxpy_sync(napi_env env, napi_callback_info info) {
  call_t c;
  cuv_op_t *op = NULL;
  if (!get_call(env, info, &c))
    return NULL;
  int rc = build_saxpy(&c, &op);
  if (rc == 0)
    rc = cuv_sync(op, NULL);
  return rc < 0 ? throw_status(env, rc, c.detail) : c.argv[2];
}

static napi_value js_mlp(napi_env env, napi_callback_info info) {
  call_t c;
  cuv_op_t *op = NULL;
  cuv_buffer_t *result = NULL;
  if (!get_call(env, info, &c))
    return NULL;
  int rc = build_mlp(&c, &op, &result);
  return rc < 0 ? rejected(env, rc, c.detail) : submit(env, c.addon, op, NULL, result);
}

static napi_value js_nop(napi_env env, napi_callback_info info) {
  call_t c;
  if (!get_call(env, info, &c))
    return NULL;
  int rc = setup(env, c.addon);
  return rc < 0 ? rejected(env, rc, NULL) : submit(env, c.addon, cuv_value(NULL, NULL), NULL, NULL);
}

static napi_value js_nop_sync(napi_env env, napi_callback_info info) {
  call_t c;
  if (!get_call(env, info, &c))
    return NULL;
  int rc = setup(env, c.addon);
  if (rc == 0)
    rc = cuv_sync(cuv_value(NULL, NULL), NULL);
  return rc < 0 ? throw_status(env, rc, NULL) : NULL;
}

static napi_value js_driver(napi_env env, napi_callback_info info) {
  napi_value result;
  if (cuv_init() < 0)
    napi_get_null(env, &result);
  else
    napi_create_string_utf8(env, cuv_driver_name(), NAPI_AUTO_LENGTH, &result);
  return result;
}

static napi_value js_device(napi_env env, napi_callback_info info) {
  call_t c;
  napi_value result;
  if (!get_call(env, info, &c))
    return NULL;
  int rc = setup(env, c.addon);
  if (rc < 0)
    return throw_status(env, rc, NULL);
  napi_create_string_utf8(env, cuv_device_name(c.addon->dev), NAPI_AUTO_LENGTH, &result);
  return result;
}

static napi_value js_pending(napi_env env, napi_callback_info info) {
  call_t c;
  napi_value result;
  if (!get_call(env, info, &c))
    return NULL;
  napi_create_uint32(env, c.addon->bridge ? cuv_uv_pending(c.addon->bridge) : 0, &result);
  return result;
}

static napi_value js_live_buffers(napi_env env, napi_callback_info info) {
  napi_value result;
  napi_create_uint32(env, atomic_load(&live_handles), &result);
  return result;
}

#ifdef CUV_NODE_WITH_SIM
/* simKernelDuration(name, usec): on the simulator, every launch of `name` takes at least usec. */
static napi_value js_sim_kernel_duration(napi_env env, napi_callback_info info) {
  call_t c;
  char name[64];
  uint32_t usec;
  if (!get_call(env, info, &c))
    return NULL;
  if (napi_get_value_string_utf8(env, c.argv[0], name, sizeof name, NULL) != napi_ok ||
      napi_get_value_uint32(env, c.argv[1], &usec) != napi_ok)
    return throw_status(env, CUV_EINVAL, "expected (kernel name, microseconds)");
  cuv_sim_set_kernel_duration(name, usec);
  return NULL;
}

/* simFail(entry, nth, result): on the simulator, the nth call (0: every call) of driver entry
 * point `entry` returns the CUresult `result`; simFail() clears every such rule. */
static napi_value js_sim_fail(napi_env env, napi_callback_info info) {
  call_t c;
  char entry[64];
  uint32_t nth, result;
  napi_valuetype type;
  if (!get_call(env, info, &c))
    return NULL;
  if (napi_typeof(env, c.argv[0], &type) == napi_ok && type == napi_undefined) {
    cuv_sim_fail_clear();
    return NULL;
  }
  if (napi_get_value_string_utf8(env, c.argv[0], entry, sizeof entry, NULL) != napi_ok ||
      napi_get_value_uint32(env, c.argv[1], &nth) != napi_ok ||
      napi_get_value_uint32(env, c.argv[2], &result) != napi_ok)
    return throw_status(env, CUV_EINVAL, "expected (entry point, nth call, CUresult)");
  cuv_sim_fail(entry, nth, (int)result);
  return NULL;
}
#endif

static napi_value js_stats(napi_env env, napi_callback_info info) {
  cuv_stats_t s;
  napi_value obj;
  cuv_stats(&s);
  const struct {
    const char *name;
    uint64_t value;
  } fields[] = {
      {"submitted", s.submitted},         {"completed", s.completed},
      {"completedSpin", s.completed_spin}, {"completedReactor", s.completed_reactor},
      {"completedPolled", s.completed_polled},
      {"completedHostfn", s.completed_hostfn}, {"completedSync", s.completed_sync},
      {"fallbacks", s.fallbacks},         {"faults", s.faults},
      {"waitsInserted", s.waits_inserted}, {"leaked", s.leaked},
      {"inFlight", s.in_flight},          {"slotsInUse", s.slots_in_use},
  };
  napi_create_object(env, &obj);
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    napi_value v;
    napi_create_double(env, (double)fields[i].value, &v);
    napi_set_named_property(env, obj, fields[i].name, v);
  }
  return obj;
}

/* {header, runtime}: the libuv version this module was compiled against, and the one the
 * process runs (Node's, since uv_version resolves there). */
static napi_value uv_versions(napi_env env) {
  char header[32];
  napi_value obj, h, r;
  snprintf(header, sizeof header, "%d.%d.%d", UV_VERSION_MAJOR, UV_VERSION_MINOR, UV_VERSION_PATCH);
  napi_create_object(env, &obj);
  napi_create_string_utf8(env, header, NAPI_AUTO_LENGTH, &h);
  napi_create_string_utf8(env, uv_version_string(), NAPI_AUTO_LENGTH, &r);
  napi_set_named_property(env, obj, "header", h);
  napi_set_named_property(env, obj, "runtime", r);
  return obj;
}

NAPI_MODULE_INIT() {
  addon_t *a = calloc(1, sizeof *a);
  if (!a) {
    napi_throw_error(env, "CUV_ENOMEM", cuv_strerror(CUV_ENOMEM));
    return NULL;
  }
  a->env = env;
  if (napi_add_async_cleanup_hook(env, cleanup_hook, a, &a->cleanup) != napi_ok) {
    free(a);
    napi_throw_error(env, NULL, "cuv_node: cannot add a cleanup hook");
    return NULL;
  }
#ifdef CUV_NODE_WITH_SIM
  cuv_node_register_twins();
#endif
#define FN(name, fn) {name, NULL, fn, NULL, NULL, NULL, napi_enumerable, a}
  napi_property_descriptor props[] = {
      FN("upload", js_upload),       FN("download", js_download), FN("saxpy", js_saxpy),
      FN("saxpySync", js_saxpy_sync), FN("mlp", js_mlp),          FN("nop", js_nop),
      FN("nopSync", js_nop_sync),    FN("driver", js_driver),     FN("device", js_device),
      FN("pending", js_pending),     FN("stats", js_stats),
      FN("liveBuffers", js_live_buffers),
#ifdef CUV_NODE_WITH_SIM
      FN("simKernelDuration", js_sim_kernel_duration), FN("simFail", js_sim_fail),
#endif
      {"uvVersion", NULL, NULL, NULL, NULL, uv_versions(env), napi_enumerable, NULL},
  };
#undef FN
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}
