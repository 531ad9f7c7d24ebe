/* The bench's comparison bindings (baseline.h). */
#include <stdlib.h>

#include "baseline.h"
#include "builtins.h"
#include "device_buffer.h"
#include "errors.h"
#include "kernels.h"

/* The float32 DeviceBuffer over the output an mlp wrote (its reference taken over), or NULL. */
static napi_value mlp_output(cuv_node_addon_t *a, cuv_buffer_t *out) {
  return cuv_node_buffer_new(a, out, napi_float32_array, cuv_buffer_size(out) / sizeof(float));
}

/* One op run by cuv_sync on a pool thread. */
typedef struct work {
  napi_async_work work;
  napi_deferred deferred;
  napi_ref value; /* resolve with it (saxpy's y), or NULL */
  cuv_node_addon_t *addon;
  cuv_buffer_t *output; /* else resolve with a DeviceBuffer over it (mlp's), or undefined */
  cuv_op_t *op;
  int status;
} work_t;

static void execute(napi_env env, void *data) {
  work_t *w = data;
  w->status = cuv_sync(w->op, NULL); /* holds this pool thread until the GPU is done */
  w->op = NULL;
}

static void complete(napi_env env, napi_status work_status, void *data) {
  work_t *w = data;
  napi_value value = NULL;
  cuv_op_destroy(w->op); /* not run: the work was cancelled before it started */
  if (work_status != napi_ok && w->status == 0)
    w->status = CUV_ECANCELED;
  if (w->status == 0 && w->value)
    napi_get_reference_value(env, w->value, &value);
  else if (w->status == 0 && w->output)
    value = mlp_output(w->addon, w->output);
  else if (w->status == 0)
    napi_get_undefined(env, &value);
  else
    cuv_buffer_unref(w->output);
  if (value)
    napi_resolve_deferred(env, w->deferred, value);
  else
    napi_reject_deferred(env, w->deferred,
                         cuv_node_error(env, w->status < 0 ? w->status : CUV_ENOMEM, NULL));
  if (w->value)
    napi_delete_reference(env, w->value);
  napi_delete_async_work(env, w->work);
  free(w);
}

/* Queues op on the pool; the Promise resolves with `value` when not NULL, else with a DeviceBuffer
 * over `output` when not NULL, else with undefined. Consumes op and the reference on output. */
static napi_value queue(cuv_node_call_t *c, cuv_op_t *op, napi_value value, cuv_buffer_t *output) {
  napi_env env = c->env;
  napi_value promise, name;
  work_t *w = calloc(1, sizeof *w);
  if (!w || napi_create_promise(env, &w->deferred, &promise) != napi_ok) {
    free(w);
    cuv_op_destroy(op);
    cuv_buffer_unref(output);
    return cuv_node_rejected(env, CUV_ENOMEM, NULL);
  }
  w->op = op;
  w->addon = c->addon;
  w->output = output;
  if ((value && napi_create_reference(env, value, 1, &w->value) != napi_ok) ||
      napi_create_string_utf8(env, "cuv.baseline", NAPI_AUTO_LENGTH, &name) != napi_ok ||
      napi_create_async_work(env, NULL, name, execute, complete, w, &w->work) != napi_ok ||
      napi_queue_async_work(env, w->work) != napi_ok) {
    w->status = CUV_ENOMEM;
    napi_reject_deferred(env, w->deferred, cuv_node_error(env, w->status, NULL));
    cuv_op_destroy(w->op);
    cuv_buffer_unref(w->output);
    if (w->work)
      napi_delete_async_work(env, w->work);
    if (w->value)
      napi_delete_reference(env, w->value);
    free(w);
  }
  return promise;
}

/* ---- the ops, and the two ways of running them -------------------------------------------- */

/* An op from a call's arguments; *output receives a new buffer the result is made of (mlp's), or
 * stays NULL. */
typedef int (*build_t)(cuv_node_call_t *c, cuv_op_t **op, cuv_buffer_t **output);

static int build_saxpy(cuv_node_call_t *c, cuv_op_t **op, cuv_buffer_t **output) {
  return cuv_node_build_saxpy(c, op);
}

static int build_launch(cuv_node_call_t *c, cuv_op_t **op, cuv_buffer_t **output) {
  return cuv_node_build_launch(c, op);
}

static int build_nop(cuv_node_call_t *c, cuv_op_t **op, cuv_buffer_t **output) {
  int rc = cuv_node_setup(c->addon);
  if (rc == 0)
    *op = cuv_value(NULL, NULL);
  return rc;
}

/* cuv_sync on the JavaScript thread; returns argv[2] (saxpy's y) when returns_y, else a
 * DeviceBuffer over the output, else undefined. */
static napi_value run_sync(napi_env env, napi_callback_info info, build_t build, bool returns_y) {
  cuv_node_call_t c;
  cuv_op_t *op = NULL;
  cuv_buffer_t *output = NULL;
  if (!cuv_node_call_get(env, info, &c))
    return NULL;
  int rc = build(&c, &op, &output);
  if (rc == 0)
    rc = cuv_sync(op, NULL);
  if (rc < 0) {
    cuv_buffer_unref(output);
    return cuv_node_throw(env, rc, c.detail);
  }
  if (returns_y)
    return c.argv[2];
  if (!output)
    return NULL;
  napi_value value = mlp_output(c.addon, output);
  return value ? value : cuv_node_throw(env, CUV_ENOMEM, NULL);
}

/* The same as napi_async_work, resolving with what run_sync returns. */
static napi_value run_work(napi_env env, napi_callback_info info, build_t build, bool returns_y) {
  cuv_node_call_t c;
  cuv_op_t *op = NULL;
  cuv_buffer_t *output = NULL;
  if (!cuv_node_call_get(env, info, &c))
    return NULL;
  int rc = build(&c, &op, &output);
  return rc < 0 ? cuv_node_rejected(env, rc, c.detail)
                : queue(&c, op, returns_y ? c.argv[2] : NULL, output);
}

napi_value cuv_node_js_saxpy_sync(napi_env env, napi_callback_info info) {
  return run_sync(env, info, build_saxpy, true);
}

napi_value cuv_node_js_mlp_sync(napi_env env, napi_callback_info info) {
  return run_sync(env, info, cuv_node_build_mlp, false);
}

napi_value cuv_node_js_launch_sync(napi_env env, napi_callback_info info) {
  return run_sync(env, info, build_launch, false);
}

napi_value cuv_node_js_nop_sync(napi_env env, napi_callback_info info) {
  return run_sync(env, info, build_nop, false);
}

napi_value cuv_node_js_saxpy_work(napi_env env, napi_callback_info info) {
  return run_work(env, info, build_saxpy, true);
}

napi_value cuv_node_js_mlp_work(napi_env env, napi_callback_info info) {
  return run_work(env, info, cuv_node_build_mlp, false);
}

napi_value cuv_node_js_launch_work(napi_env env, napi_callback_info info) {
  return run_work(env, info, build_launch, false);
}

napi_value cuv_node_js_nop_work(napi_env env, napi_callback_info info) {
  return run_work(env, info, build_nop, false);
}
