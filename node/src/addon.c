/* cuv_node: cuv for Node.js (Node-API). GPU work submitted from JavaScript settles Promises on
 * Node's own libuv loop through cuv's libuv bridge (uv/bridge.c, compiled into this module
 * against Node's uv.h: every uv_* symbol resolves to the node process's libuv). index.js is the
 * API users see (and index.d.ts its types); it wraps what this module exports with AbortSignal
 * handling and argument defaults. This file is the module's entry and the top of its files; the
 * export table is exports.c's. */

#include "exports.h"

/* Node may call this once per environment: the main thread and each worker, each with its own
 * state (instance.c). node_api.h's macro defines functions it declares nowhere else. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
NAPI_MODULE_INIT() { return cuv_node_exports(env, exports); }
