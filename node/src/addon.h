/* What the addon's files share: the state of one Node environment (the main thread's, or a
 * worker's: instance data), and the reading of a call's arguments. Everything here runs on that
 * environment's JavaScript thread, which is its loop's thread; so do the bridge's callbacks. */
#ifndef CUV_NODE_ADDON_H
#define CUV_NODE_ADDON_H

#include <node_api.h>
#include <stdbool.h>

#include <cuv.h>
#include <cuv/uv.h>

#include "feeder.h"
#include "handles.h"
#include "settle.h"

#define CUV_NODE_DETAIL_MAX 160 /* what was wrong with an argument, after cuv_strerror's text */
#define CUV_NODE_ARGS_MAX 6

typedef struct cuv_node_addon {
  napi_env env;
  int setup; /* 0: not yet; 1: ready; < 0: the error setting up failed with (kept) */
  cuv_device_t *dev;
  cuv_kernel_t *saxpy, *dense; /* samples/saxpy's kernel, apps/tcp-infer's dense layer */
  cuv_uv_t *bridge;
  cuv_node_feeder_t feeder;   /* submits for this thread while many jobs are in flight */
  cuv_node_settler_t settler; /* the bridge's completions, settled in slices per loop turn */
  napi_ref resource; /* the async resource completions run under (napi_open_callback_scope) */
  napi_async_context async_context;
  napi_async_cleanup_hook_handle cleanup;
  napi_ref buffer_class, module_class, kernel_class;
  cuv_node_handles_t *handles; /* DeviceBuffers' numbers (handles.h) */
  napi_ref handle_key;         /* the symbol they are under */
  void *constructing;       /* the native object a class constructor is wrapping now, else NULL */
  bool no_external_buffers; /* behave as a runtime that refuses external ArrayBuffers */
} cuv_node_addon_t;

/* One call: its environment's state, `this`, its arguments, and what was wrong with them. */
typedef struct cuv_node_call {
  napi_env env;
  cuv_node_addon_t *addon;
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

/* Loads the driver, opens device 0 and the bridge on the environment's loop, once (first use). */
int cuv_node_setup(cuv_node_addon_t *a);
/* cuv's initialization, once per process: the environment's configuration (CUV_*), with the
 * package's default policy over as many streams as the GPU has queues (addon.c) where
 * CUV_STREAMS is unset. */
int cuv_node_init(void);
/* The built-in kernel `saxpy` or `mlp_dense` (loaded at first use; borrowed). */
int cuv_node_builtin_kernel(cuv_node_addon_t *a, const char *name, cuv_kernel_t **kernel);

#endif
