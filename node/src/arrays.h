/* TypedArrays as the addon reads them, and their element types by name ("float32": the
 * constructor's name without "Array", lower case, as index.js and a DeviceBuffer's `type` say). */
#ifndef CUV_NODE_ARRAYS_H
#define CUV_NODE_ARRAYS_H

#include <node_api.h>
#include <stdbool.h>

#include "addon.h"

typedef struct cuv_node_array {
  napi_typedarray_type type;
  size_t length; /* elements */
  size_t bytes;
  void *data;
  napi_value arraybuffer;
  size_t byte_offset; /* into arraybuffer */
} cuv_node_array_t;

/* Reads any TypedArray; false when value is none. */
bool cuv_node_array_get(napi_env env, napi_value value, cuv_node_array_t *out);
/* A new TypedArray of `type` over arraybuffer (byte offset 0). */
napi_value cuv_node_array_new(napi_env env, napi_typedarray_type type, size_t length,
                              napi_value arraybuffer);
size_t cuv_node_type_size(napi_typedarray_type type);
const char *cuv_node_type_name(napi_typedarray_type type);
/* The type named by the string `name`; false for anything else. */
bool cuv_node_type_parse(napi_env env, napi_value name, napi_typedarray_type *type);
/* An allocation's arguments, argv[0], a type's name, and argv[1], a positive integer count of
 * elements whose bytes fit a size_t (CUV_EINVAL with the detail otherwise); then sets the
 * environment up, whose error it returns. *bytes = the allocation's size. */
int cuv_node_alloc_args(cuv_node_call_t *c, napi_typedarray_type *type, size_t *length,
                        size_t *bytes);

#endif
