/* The state of one Node environment (the main thread's, or a worker's: instance data) and its
 * setup: the driver, device 0 and the bridge on the environment's loop, opened at its first GPU
 * call. Everything here runs on that environment's JavaScript thread. */
#ifndef CUV_NODE_INSTANCE_H
#define CUV_NODE_INSTANCE_H

#include <node_api.h>
#include <stdbool.h>

#include <cuv.h>
#include <cuv/uv.h>

#include "calls.h"
#include "handles.h"
#include "scope.h"

/* What setup needs from the files above it, given by the export table (exports.c), which knows
 * them all: so that this file calls only downwards. */
typedef struct cuv_node_instance_hooks {
  void (*attach)(void); /* before any kernel is looked up: the simulator's hooks (sim.h) */
} cuv_node_instance_hooks_t;

typedef struct cuv_node_addon {
  napi_env env;
  const cuv_node_instance_hooks_t *hooks;
  int setup; /* 0: not yet; 1: ready; < 0: the error setting up failed with (kept) */
  cuv_device_t *dev;
  cuv_kernel_t *saxpy, *dense; /* kernels/saxpy.cu, kernels/mlp.cu's dense layer */
  cuv_uv_t *bridge;
  cuv_node_scope_t scope; /* what the bridge's completions settle in (scope.h) */
  napi_async_cleanup_hook_handle cleanup;
  napi_ref buffer_class, module_class, kernel_class;
  cuv_node_handles_t *handles; /* DeviceBuffers' numbers (handles.h) */
  napi_ref handle_key;         /* the symbol they are under */
  void *constructing;       /* the native object a class constructor is wrapping now, else NULL */
  bool no_external_buffers; /* behave as a runtime that refuses external ArrayBuffers */
} cuv_node_addon_t;

/* Loads the driver, opens device 0 and the bridge on the environment's loop, once (first use). */
int cuv_node_setup(cuv_node_addon_t *a);
/* cuv's initialization, once per process: the environment's configuration (CUV_*), with the
 * package's default policy over as many streams as the GPU has queues (addon.c) where
 * CUV_STREAMS is unset. */
int cuv_node_init(void);
/* A new environment's state, as its instance data, with the cleanup hook that closes it; NULL
 * with an exception pending when Node cannot keep it. */
cuv_node_addon_t *cuv_node_instance_new(napi_env env, const cuv_node_instance_hooks_t *hooks);
/* The built-in kernel `saxpy` or `mlp_dense` (loaded at first use; borrowed). */
int cuv_node_builtin_kernel(cuv_node_addon_t *a, const char *name, cuv_kernel_t **kernel);

#endif
