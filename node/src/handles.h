/* DeviceBuffers' numbers: a hot call names its buffers by number, so the addon finds them with an
 * index instead of napi_check_object_type_tag and napi_unwrap (two private-property lookups
 * each: on a GPU they were 15% of the JavaScript thread's time per saxpy Promise,
 * bench/RESULTS.md). index.js reads the number from the object, under a symbol it
 * gets from the addon, for objects that are DeviceBuffers; a number that names no buffer of this
 * environment is refused like any other non-buffer. The table outlives the environment's state
 * while buffers remain: their finalizers may run after it is gone (Node's teardown runs them
 * last), so each holds the table, not the state. */
#ifndef CUV_NODE_HANDLES_H
#define CUV_NODE_HANDLES_H

#include <node_api.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct cuv_node_handles cuv_node_handles_t;
struct cuv_node_buffer;

/* The environment's table (one reference, dropped with cuv_node_handles_release); NULL without
 * memory. */
cuv_node_handles_t *cuv_node_handles_new(void);
void cuv_node_handles_release(cuv_node_handles_t *t);
/* Numbers b (it records the number and a reference on t); false without memory. */
bool cuv_node_handles_add(cuv_node_handles_t *t, struct cuv_node_buffer *b);
/* Frees b's number (its finalizer); drops b's reference on the table. */
void cuv_node_handles_remove(struct cuv_node_buffer *b);
/* The buffer that value names, when it is a number naming one; NULL otherwise. */
struct cuv_node_buffer *cuv_node_handles_find(cuv_node_handles_t *t, napi_env env,
                                              napi_value value);

#endif
