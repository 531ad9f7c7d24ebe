/* The bindings the bench compares cuv's Promises with, running the same ops (bench.js); only the
 * bench's addon (addon.c here) exports them, as `baseline`:
 *   saxpySync(a, x, y), mlpSync(x, rows, layers), launchSync(kernel, grid, block, args,
 *   sharedBytes), nopSync()
 *       cuv_sync on the JavaScript thread: it blocks until the GPU is done (what
 *       onnxruntime-node's run does)
 *   saxpyWork(a, x, y), mlpWork(x, rows, layers), launchWork(kernel, grid, block, args,
 *   sharedBytes), nopWork()
 *       -> Promise: napi_async_work whose execute runs cuv_sync on a thread of libuv's pool,
 *       which it holds until the GPU is done (the pattern of node-llama-cpp and most GPU addons)
 * Their arguments and results are those of saxpy, mlp, nop (builtins.h) and launch (kernels.h). */
#ifndef CUV_NODE_BASELINE_H
#define CUV_NODE_BASELINE_H

#include <node_api.h>

napi_value cuv_node_js_saxpy_sync(napi_env env, napi_callback_info info);
napi_value cuv_node_js_mlp_sync(napi_env env, napi_callback_info info);
napi_value cuv_node_js_launch_sync(napi_env env, napi_callback_info info);
napi_value cuv_node_js_nop_sync(napi_env env, napi_callback_info info);
napi_value cuv_node_js_saxpy_work(napi_env env, napi_callback_info info);
napi_value cuv_node_js_mlp_work(napi_env env, napi_callback_info info);
napi_value cuv_node_js_launch_work(napi_env env, napi_callback_info info);
napi_value cuv_node_js_nop_work(napi_env env, napi_callback_info info);

#endif
