/* DeviceBuffer: device memory as a JavaScript object (cuv_buffer_t), with its element type and
 * length. dispose() (also [Symbol.dispose], index.js) gives up the object's reference at once, and
 * collection does otherwise, to the releaser thread that drops it (releaser.h); either way the
 * memory is freed only once no submission holds it (cuv holds what the GPU uses until its work is
 * proven complete). */
#ifndef CUV_NODE_DEVICE_BUFFER_H
#define CUV_NODE_DEVICE_BUFFER_H

#include "addon.h"
#include "handles.h"

typedef struct cuv_node_buffer {
  cuv_buffer_t *buf; /* NULL once disposed */
  napi_typedarray_type type;
  size_t length;    /* elements of type */
  int64_t external; /* bytes counted as V8 external memory (it makes the GC run sooner) */
  cuv_node_handles_t *handles; /* the table that numbers it (handles.h); NULL: none */
  uint32_t number;
} cuv_node_buffer_t;

/* Defines the class (into a->buffer_class) and returns its constructor. */
napi_value cuv_node_buffer_class(napi_env env, cuv_node_addon_t *a);
/* A new DeviceBuffer that takes over the caller's reference on buf (dropped when this fails). */
napi_value cuv_node_buffer_new(cuv_node_addon_t *a, cuv_buffer_t *buf, napi_typedarray_type type,
                               size_t length);
/* Argument i as a live DeviceBuffer (borrowed), given as the object or as its number
 * (handles.h); CUV_EINVAL with the detail otherwise. */
int cuv_node_buffer_arg(cuv_node_call_t *c, size_t i, const char *what, cuv_node_buffer_t **out);
/* The DeviceBuffer behind value, disposed or not; NULL when it is none. */
cuv_node_buffer_t *cuv_node_buffer_of(napi_env env, napi_value value);
/* DeviceBuffer objects not finalized yet, in the whole process (tests read it). */
unsigned cuv_node_buffer_live(void);

#endif
