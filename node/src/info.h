/* What the addon tells about itself and cuv:
 *   driver()      "sim", "cuda" or the driver's path; null when no driver loads
 *   config()      the configuration in force (cuv_config_get), initializing cuv; throws when the
 *                 environment's is invalid
 *   device()      device 0's name (opens it); throws without a driver
 *   stats()       cuv_stats()'s counters;  pending(): this environment's callbacks outstanding
 *   liveBuffers() DeviceBuffer objects not finalized yet (the whole process)
 *   uvVersion     {header, runtime}: the libuv of the headers, and of the process (Node's)
 *   ptx           {saxpy, mlp, testing}: the embedded PTX texts
 *   ptxOrigin     the same keys: where each came from ("nvcc", "shipped", "listing": ptx.h) */
#ifndef CUV_NODE_INFO_H
#define CUV_NODE_INFO_H

#include <node_api.h>
#include <stdbool.h>

napi_value cuv_node_js_driver(napi_env env, napi_callback_info info);
napi_value cuv_node_js_config(napi_env env, napi_callback_info info);
napi_value cuv_node_js_device(napi_env env, napi_callback_info info);
napi_value cuv_node_js_stats(napi_env env, napi_callback_info info);
napi_value cuv_node_js_pending(napi_env env, napi_callback_info info);
napi_value cuv_node_js_live_buffers(napi_env env, napi_callback_info info);
napi_value cuv_node_uv_version(napi_env env);
/* ptx (origins false) or ptxOrigin (true). */
napi_value cuv_node_ptx_table(napi_env env, bool origins);

#endif
