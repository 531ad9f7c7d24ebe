/* TypedArrays over pinned host memory (cuv host buffers): what download resolves with, and what
 * cuv.pinned makes. An upload from one, or a download into one, is a single DMA with no staging
 * copy. Node hands the memory to JavaScript as an external ArrayBuffer, without copying it; a
 * runtime that refuses external buffers (Electron's memory cage: napi_no_external_buffers_allowed)
 * gets an ordinary ArrayBuffer with a copy instead, and uploads from it are staged. */
#ifndef CUV_NODE_PINNED_H
#define CUV_NODE_PINNED_H

#include "addon.h"
#include "arrays.h"

/* A TypedArray of `length` elements of `type` over host's memory: takes over the caller's reference
 * on host (the array's backing store holds it; a copy drops it at once). NULL on failure. */
napi_value cuv_node_pinned_array(cuv_node_addon_t *a, cuv_host_buffer_t *host,
                                 napi_typedarray_type type, size_t length);
/* The host buffer under a pinned array (borrowed) and the array's byte offset into it; NULL when
 * the array's memory is not cuv's. */
cuv_host_buffer_t *cuv_node_pinned_of(napi_env env, const cuv_node_array_t *array, size_t *offset);

/* pinned(type, length): a zeroed TypedArray over pinned memory. isPinned(array). */
napi_value cuv_node_js_pinned(napi_env env, napi_callback_info info);
napi_value cuv_node_js_is_pinned(napi_env env, napi_callback_info info);

#endif
