/* Reading a call's arguments and recording what was wrong with them (calls.h). */
#include <stdarg.h>
#include <stdio.h>

#include <cuv.h>

#include "calls.h"

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
