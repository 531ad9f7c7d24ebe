/* Generic kernels from JavaScript:
 *   loadModule(image)                  -> Module   PTX (a string) or cubin/fatbin (a Uint8Array),
 *                                                  loaded now (the driver may compile PTX: slow
 *                                                  the first time, so load once, at start-up)
 *   module.kernel(name, signature)     -> Kernel   the signature as in kernel_args.h; its length
 *                                                  must match the kernel's parameter count where
 *                                                  the driver reports it (CUV_EARGS)
 *   launch(kernel, grid, block, args, sharedBytes, token) -> Promise<undefined>
 *   module.dispose(), kernel.dispose()             drop the reference at once (a kernel holds its
 *                                                  module, a launch in flight its kernel)
 * grid and block are a positive integer or an array of one to three. */
#ifndef CUV_NODE_KERNELS_H
#define CUV_NODE_KERNELS_H

#include "addon.h"

/* Define the classes Module and Kernel (into a's references) and return their constructors. */
napi_value cuv_node_module_class(napi_env env, cuv_node_addon_t *a);
napi_value cuv_node_kernel_class(napi_env env, cuv_node_addon_t *a);

/* launch's op from argv[0..4] (kernel, grid, block, args, sharedBytes), its arguments checked. */
int cuv_node_build_launch(cuv_node_call_t *c, cuv_op_t **op);

napi_value cuv_node_js_load_module(napi_env env, napi_callback_info info);
napi_value cuv_node_js_launch(napi_env env, napi_callback_info info);

#endif
