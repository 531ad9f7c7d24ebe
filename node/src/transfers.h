/* Moving data between TypedArrays and device memory:
 *   alloc(type, length)               a DeviceBuffer now (cuMemAlloc), contents undefined
 *   upload(array, token)              -> Promise<DeviceBuffer> of the array's type and length
 *   write(buffer, array, byteOffset, token) -> Promise<buffer>: the array's bytes into buffer
 *   download(buffer, token)           -> Promise<TypedArray> of the buffer's type (pinned.h)
 * From an ordinary array, the bytes are copied into pinned staging when the call is made, so the
 * array may change at once; from a pinned array (pinned.h) the copy is one DMA out of the array
 * itself, which must then stay unchanged until the Promise settles. Downloads land in pinned
 * memory, which the resolved array is (or, where external buffers are refused, a copy of). */
#ifndef CUV_NODE_TRANSFERS_H
#define CUV_NODE_TRANSFERS_H

#include <node_api.h>

napi_value cuv_node_js_alloc(napi_env env, napi_callback_info info);
napi_value cuv_node_js_upload(napi_env env, napi_callback_info info);
napi_value cuv_node_js_write(napi_env env, napi_callback_info info);
napi_value cuv_node_js_download(napi_env env, napi_callback_info info);

#endif
