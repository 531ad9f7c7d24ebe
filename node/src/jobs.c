/* Promises settled by the bridge (jobs.h). */
#include <stdlib.h>

#include "device_buffer.h"
#include "errors.h"
#include "jobs.h"
#include "pinned.h"
#include "scope.h"

typedef struct job {
  cuv_node_addon_t *addon;
  napi_deferred deferred;
  napi_ref value; /* VALUE's value */
  cuv_node_result_t result;
} job_t;

static void release_result(cuv_node_result_t *r) {
  cuv_buffer_unref(r->device);
  cuv_host_buffer_unref(r->host);
  r->device = NULL;
  r->host = NULL;
}

/* The value to resolve with; NULL when making it failed (the result's references are dropped). */
static napi_value resolution(napi_env env, job_t *job) {
  napi_value value = NULL;
  cuv_node_result_t *r = &job->result;
  switch (r->kind) {
  case CUV_NODE_VALUE: napi_get_reference_value(env, job->value, &value); break;
  case CUV_NODE_DEVICE:
    value = cuv_node_buffer_new(job->addon, r->device, r->type, r->length);
    r->device = NULL;
    break;
  case CUV_NODE_HOST:
    value = cuv_node_pinned_array(job->addon, r->host, r->type, r->length);
    r->host = NULL;
    break;
  default: napi_get_undefined(env, &value);
  }
  return value;
}

/* Settles job's Promise with status and frees the job. */
static void settle(napi_env env, job_t *job, int status) {
  napi_value value = status == 0 ? resolution(env, job) : NULL;
  if (value)
    napi_resolve_deferred(env, job->deferred, value);
  else
    napi_reject_deferred(env, job->deferred,
                         cuv_node_error(env, status < 0 ? status : CUV_ENOMEM, NULL));
  if (job->value)
    napi_delete_reference(env, job->value);
  release_result(&job->result);
  free(job);
}

/* The bridge's callback, on the loop thread, in a slice of its turn's budget (scope.h). */
static void on_done(int status, cuv_output_t *output, void *arg) {
  job_t *job = arg;
  cuv_node_result_t *r = &job->result;
  cuv_node_scope_t *scope = &job->addon->scope;
  if (status == 0 && r->kind == CUV_NODE_OUTPUT) {
    r->device = cuv_buffer_ref(r->pick(output));
    r->kind = CUV_NODE_DEVICE;
    status = r->device ? 0 : CUV_EINVAL; /* an op without the buffer pick looks for */
  }
  cuv_node_scope_enter(scope);
  settle(scope->env, job, status);
  cuv_node_scope_settled(scope);
}

static bool is_object(napi_env env, napi_value v) {
  napi_valuetype type;
  return v && napi_typeof(env, v, &type) == napi_ok && type == napi_object;
}

static void give_ticket(napi_env env, napi_value token, cuv_ticket_t ticket) {
  napi_value value;
  if (is_object(env, token) && napi_create_bigint_uint64(env, ticket, &value) == napi_ok)
    napi_set_named_property(env, token, "ticket", value);
}

napi_value cuv_node_submit(cuv_node_call_t *c, cuv_op_t *op, napi_value token,
                           const cuv_node_result_t *result) {
  napi_value promise;
  job_t *job = malloc(sizeof *job); /* not calloc: glibc's skips the thread's cache */
  if (job)
    *job = (job_t){.result = *result, .addon = c->addon};
  if (!job || napi_create_promise(c->env, &job->deferred, &promise) != napi_ok) {
    cuv_op_destroy(op);
    cuv_node_result_t dropped = *result;
    release_result(&dropped);
    free(job);
    return cuv_node_rejected(c->env, CUV_ENOMEM, NULL);
  }
  cuv_ticket_t ticket = 0;
  bool cancellable = is_object(c->env, token);
  cuv_submit_opts_t opts = {.ticket = cancellable ? &ticket : NULL};
  int rc = CUV_ENOMEM;
  if (result->kind == CUV_NODE_VALUE &&
      napi_create_reference(c->env, result->value, 1, &job->value) != napi_ok)
    cuv_op_destroy(op);
  else
    rc = cuv_uv_submit(c->addon->bridge, op, on_done, job, &opts);
  if (rc < 0)
    settle(c->env, job, rc); /* refused: on_done will not run */
  else if (cancellable)
    give_ticket(c->env, token, ticket);
  return promise;
}

napi_value cuv_node_js_cancel(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  uint64_t ticket = 0;
  bool lossless = false;
  napi_value result = NULL;
  if (!cuv_node_call_get(env, info, &c))
    return NULL;
  if (napi_get_value_bigint_uint64(env, c.argv[0], &ticket, &lossless) != napi_ok || !lossless)
    return cuv_node_throw(env, CUV_EINVAL, "the ticket must be a BigInt from a submission");
  int rc = c.addon->bridge ? cuv_uv_cancel(c.addon->bridge, ticket) : CUV_ENOENT;
  if (rc < 0 && rc != CUV_ENOENT)
    return cuv_node_throw(env, rc, NULL);
  napi_get_boolean(env, rc == 0, &result);
  return result;
}
