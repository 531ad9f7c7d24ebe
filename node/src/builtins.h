/* The built-in ops: saxpy (kernels/saxpy.cu), mlp (kernels/mlp.cu's dense layer, a launch
 * per layer) and nop (an empty op, cuv_value: the bridge and Promise machinery alone). Their
 * builders serve the Promise bindings here and the bench's comparison bindings (the repository's
 * node/bench/src/baseline.c, built into the bench's addon only). */
#ifndef CUV_NODE_BUILTINS_H
#define CUV_NODE_BUILTINS_H

#include "addon.h"

/* saxpy(a, x, y) from argv[0..2]: y = a*x + y on float32 DeviceBuffers of one length. */
int cuv_node_build_saxpy(cuv_node_call_t *c, cuv_op_t **op);
/* mlp(x, rows, layers) from argv[0..2]: a launch per layer, each layer's output allocated
 * stream-ordered when it runs; *result_length receives the floats of the result (rows x the last
 * layer's width), which cuv_node_mlp_result finds in the op's output once it completed. */
int cuv_node_build_mlp(cuv_node_call_t *c, cuv_op_t **op, size_t *result_length);
/* The result buffer in a completed mlp op's output (borrowed from the output), or NULL. */
cuv_buffer_t *cuv_node_mlp_result(const cuv_output_t *output);

napi_value cuv_node_js_saxpy(napi_env env, napi_callback_info info);
napi_value cuv_node_js_mlp(napi_env env, napi_callback_info info);
napi_value cuv_node_js_nop(napi_env env, napi_callback_info info);

#endif
