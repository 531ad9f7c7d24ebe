/* The bench's comparison bindings (baseline.h). */
#include <stdlib.h>

#include "baseline.h"
#include "builtins.h"
#include "device_buffer.h"
#include "errors.h"
#include "kernels.h"

/* A float32 DeviceBuffer over the mlp's result in its op's output (a reference taken), or NULL. */
static napi_value mlp_output(cuv_node_addon_t *a, const cuv_output_t *out) {
  cuv_buffer_t *result = cuv_buffer_ref(cuv_node_mlp_result(out));
  return result ? cuv_node_buffer_new(a, result, napi_float32_array,
                                      cuv_buffer_size(result) / sizeof(float))
                : NULL;
}

/* One op run by cuv_sync on a pool thread. */
typedef struct work {
  napi_async_work work;
  napi_deferred deferred;
  napi_ref value; /* resolve with it (saxpy's y), or NULL */
  cuv_node_addon_t *addon;
  bool mlp;            /* else resolve with a DeviceBuffer over the mlp's result, or undefined */
  cuv_output_t output; /* the op's */
  cuv_op_t *op;
  int status;
} work_t;

static void execute(napi_env env, void *data) {
  work_t *w = data;
  w->status = cuv_sync(w->op, &w->output); /* holds this pool thread until the GPU is done */
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
  else if (w->status == 0 && w->mlp)
    value = mlp_output(w->addon, &w->output);
  else if (w->status == 0)
    napi_get_undefined(env, &value);
  cuv_output_release(&w->output);
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
 * over the mlp's result when `mlp`, else with undefined. Consumes op. */
static napi_value queue(cuv_node_call_t *c, cuv_op_t *op, napi_value value, bool mlp) {
  napi_env env = c->env;
  napi_value promise, name;
  work_t *w = calloc(1, sizeof *w);
  if (!w || napi_create_promise(env, &w->deferred, &promise) != napi_ok) {
    free(w);
    cuv_op_destroy(op);
    return cuv_node_rejected(env, CUV_ENOMEM, NULL);
  }
  w->op = op;
  w->addon = c->addon;
  w->mlp = mlp;
  if ((value && napi_create_reference(env, value, 1, &w->value) != napi_ok) ||
      napi_create_string_utf8(env, "cuv.baseline", NAPI_AUTO_LENGTH, &name) != napi_ok ||
      napi_create_async_work(env, NULL, name, execute, complete, w, &w->work) != napi_ok ||
      napi_queue_async_work(env, w->work) != napi_ok) {
    w->status = CUV_ENOMEM;
    napi_reject_deferred(env, w->deferred, cuv_node_error(env, w->status, NULL));
    cuv_op_destroy(w->op);
    if (w->work)
      napi_delete_async_work(env, w->work);
    if (w->value)
      napi_delete_reference(env, w->value);
    free(w);
  }
  return promise;
}

/* ---- the ops, and the two ways of running them -------------------------------------------- */

/* An op from a call's arguments. */
typedef int (*build_t)(cuv_node_call_t *c, cuv_op_t **op);

static int build_mlp(cuv_node_call_t *c, cuv_op_t **op) {
  size_t length;
  return cuv_node_build_mlp(c, op, &length);
}

static int build_nop(cuv_node_call_t *c, cuv_op_t **op) {
  int rc = cuv_node_setup(c->addon);
  if (rc == 0)
    *op = cuv_value(NULL, NULL);
  return rc;
}

/* What run_sync and run_work resolve with: saxpy's y (argv[2]), a DeviceBuffer over the mlp's
 * result, or undefined. */
enum returns { RETURNS_Y, RETURNS_MLP, RETURNS_NOTHING };

/* cuv_sync on the JavaScript thread; returns what `returns` names. */
static napi_value run_sync(napi_env env, napi_callback_info info, build_t build,
                           enum returns returns) {
  cuv_node_call_t c;
  cuv_op_t *op = NULL;
  cuv_output_t output = {0};
  if (!cuv_node_call_get(env, info, &c))
    return NULL;
  int rc = build(&c, &op);
  if (rc == 0)
    rc = cuv_sync(op, &output);
  if (rc < 0)
    return cuv_node_throw(env, rc, c.detail);
  napi_value value = NULL;
  if (returns == RETURNS_Y)
    value = c.argv[2];
  else if (returns == RETURNS_MLP && !(value = mlp_output(c.addon, &output)))
    value = cuv_node_throw(env, CUV_ENOMEM, NULL);
  cuv_output_release(&output);
  return value;
}

/* The same as napi_async_work, resolving with what run_sync returns. */
static napi_value run_work(napi_env env, napi_callback_info info, build_t build,
                           enum returns returns) {
  cuv_node_call_t c;
  cuv_op_t *op = NULL;
  if (!cuv_node_call_get(env, info, &c))
    return NULL;
  int rc = build(&c, &op);
  return rc < 0 ? cuv_node_rejected(env, rc, c.detail)
                : queue(&c, op, returns == RETURNS_Y ? c.argv[2] : NULL, returns == RETURNS_MLP);
}

napi_value cuv_node_js_saxpy_sync(napi_env env, napi_callback_info info) {
  return run_sync(env, info, cuv_node_build_saxpy, RETURNS_Y);
}

napi_value cuv_node_js_mlp_sync(napi_env env, napi_callback_info info) {
  return run_sync(env, info, build_mlp, RETURNS_MLP);
}

napi_value cuv_node_js_launch_sync(napi_env env, napi_callback_info info) {
  return run_sync(env, info, cuv_node_build_launch, RETURNS_NOTHING);
}

napi_value cuv_node_js_nop_sync(napi_env env, napi_callback_info info) {
  return run_sync(env, info, build_nop, RETURNS_NOTHING);
}

napi_value cuv_node_js_saxpy_work(napi_env env, napi_callback_info info) {
  return run_work(env, info, cuv_node_build_saxpy, RETURNS_Y);
}

napi_value cuv_node_js_mlp_work(napi_env env, napi_callback_info info) {
  return run_work(env, info, build_mlp, RETURNS_MLP);
}

napi_value cuv_node_js_launch_work(napi_env env, napi_callback_info info) {
  return run_work(env, info, cuv_node_build_launch, RETURNS_NOTHING);
}

napi_value cuv_node_js_nop_work(napi_env env, napi_callback_info info) {
  return run_work(env, info, build_nop, RETURNS_NOTHING);
}
