/* The built-in ops: saxpy (kernels/saxpy.cu), mlp (kernels/mlp.cu's dense layer, a launch
 * per layer) and nop (an empty op, cuv_value: the bridge and Promise machinery alone). Their
 * builders serve the Promise bindings here and the bench's comparison bindings (the repository's
 * node/bench/src/baseline.c, built into the bench's addon only). */
#ifndef CUV_NODE_BUILTINS_H
#define CUV_NODE_BUILTINS_H

#include "addon.h"

/* saxpy(a, x, y) from argv[0..2]: y = a*x + y on float32 DeviceBuffers of one length. */
int cuv_node_build_saxpy(cuv_node_call_t *c, cuv_op_t **op);
/* mlp(x, rows, layers) from argv[0..2]: a launch per layer; *result receives a reference on the
 * last layer's output, a new float32 buffer of rows x its width. */
int cuv_node_build_mlp(cuv_node_call_t *c, cuv_op_t **op, cuv_buffer_t **result);

napi_value cuv_node_js_saxpy(napi_env env, napi_callback_info info);
napi_value cuv_node_js_mlp(napi_env env, napi_callback_info info);
napi_value cuv_node_js_nop(napi_env env, napi_callback_info info);

#endif
