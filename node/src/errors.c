/* Errors as JavaScript sees them (errors.h). */
#include <limits.h>
#include <stdio.h>

#include <cuv.h>

#include "addon.h"
#include "errors.h"

static void set_string(napi_env env, napi_value obj, const char *key, const char *value) {
  napi_value v;
  if (napi_create_string_utf8(env, value, NAPI_AUTO_LENGTH, &v) == napi_ok)
    napi_set_named_property(env, obj, key, v);
}

/* Why the driver did not load or start, while no initialization succeeded: then every call fails
 * with the initialization's status, and the message carries cuv_init_error's reason (the library
 * tried and the loader's words), which cuv_strerror's text only points to. */
static const char *init_reason(void) { return cuv_driver_name() ? NULL : cuv_init_error(); }

napi_value cuv_node_error(napi_env env, int status, const char *detail) {
  /* cuv_strerror's text and a detail: an argument's, or an init reason, which names a path. */
  char message[CUV_NODE_DETAIL_MAX + PATH_MAX + 512];
  if (!detail || !*detail)
    detail = init_reason();
  if (detail && *detail)
    snprintf(message, sizeof message, "%s: %s", cuv_strerror(status), detail);
  else
    snprintf(message, sizeof message, "%s", cuv_strerror(status));
  napi_value msg, number, error = NULL;
  napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &msg);
  if (napi_create_error(env, NULL, msg, &error) != napi_ok)
    return NULL;
  bool driver = cuv_cuda_result(status) != 0;
  set_string(env, error, "code", driver ? "CUV_ECUDA" : cuv_err_name(status));
  if (driver)
    set_string(env, error, "cuResult", cuv_err_name(status));
  if (napi_create_int32(env, status, &number) == napi_ok)
    napi_set_named_property(env, error, "errno", number);
  return error;
}

napi_value cuv_node_throw(napi_env env, int status, const char *detail) {
  napi_throw(env, cuv_node_error(env, status, detail));
  return NULL;
}

napi_value cuv_node_rejected(napi_env env, int status, const char *detail) {
  napi_deferred deferred;
  napi_value promise;
  if (napi_create_promise(env, &deferred, &promise) != napi_ok)
    return NULL;
  napi_reject_deferred(env, deferred, cuv_node_error(env, status, detail));
  return promise;
}
