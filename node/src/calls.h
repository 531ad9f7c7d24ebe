/* The bottom of the addon's files: one call of a binding, read with its environment's state, and
 * what was wrong with its arguments. Every binding starts with cuv_node_call_get. */
#ifndef CUV_NODE_CALLS_H
#define CUV_NODE_CALLS_H

#include <node_api.h>
#include <stdbool.h>
#include <stddef.h>

#define CUV_NODE_DETAIL_MAX 160 /* what was wrong with an argument, after cuv_strerror's text */
#define CUV_NODE_ARGS_MAX 6

struct cuv_node_addon;

/* One call: its environment's state, `this`, its arguments, and what was wrong with them. */
typedef struct cuv_node_call {
  napi_env env;
  struct cuv_node_addon *addon;
  napi_value self;
  size_t argc; /* as passed; argv beyond it holds undefined */
  napi_value argv[CUV_NODE_ARGS_MAX];
  char detail[CUV_NODE_DETAIL_MAX];
} cuv_node_call_t;

/* Reads a call; false when Node cannot tell (an exception is then pending). */
bool cuv_node_call_get(napi_env env, napi_callback_info info, cuv_node_call_t *c);
/* Records what was wrong with an argument (appended to the error's message); returns status. */
int cuv_node_fail(cuv_node_call_t *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same for CUV_EINVAL, the usual answer. */
int cuv_node_bad(cuv_node_call_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Whether argument i is undefined or missing. */
bool cuv_node_arg_absent(const cuv_node_call_t *c, size_t i);

#endif
