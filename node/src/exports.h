/* The package's exports (exports.c): every binding, on one Node environment's exports object. */
#ifndef CUV_NODE_EXPORTS_H
#define CUV_NODE_EXPORTS_H

#include <node_api.h>

/* Sets up this environment's state (instance.h) and defines the bindings on `exports`; returns
 * it, or NULL with a JavaScript exception pending. */
napi_value cuv_node_exports(napi_env env, napi_value exports);

#endif
