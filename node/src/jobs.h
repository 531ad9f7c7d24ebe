/* Promises settled by the bridge: an op submitted on the environment's loop (cuv_uv_submit), its
 * Promise resolved or rejected in the bridge's callback on the same thread, and cancelled by
 * ticket (cuv_uv_cancel: the callback runs at the loop's next iteration with CUV_ECANCELED, while
 * the GPU work keeps what it uses until it is done). */
#ifndef CUV_NODE_JOBS_H
#define CUV_NODE_JOBS_H

#include "addon.h"

/* What a Promise resolves with once its op completed. */
typedef struct cuv_node_result {
  enum { CUV_NODE_UNDEFINED, CUV_NODE_VALUE, CUV_NODE_DEVICE, CUV_NODE_HOST, CUV_NODE_OUTPUT } kind;
  napi_value value;     /* VALUE: this JavaScript value (kept alive meanwhile) */
  cuv_buffer_t *device; /* DEVICE: a new DeviceBuffer takes over this reference */
  /* OUTPUT: a new DeviceBuffer over the buffer pick finds in the op's output (a reference taken
   * in the completion, where the output is valid; the result is then a DEVICE one) */
  cuv_buffer_t *(*pick)(const cuv_output_t *output);
  cuv_host_buffer_t *host;   /* HOST: a new pinned TypedArray takes over this reference */
  napi_typedarray_type type; /* DEVICE, HOST: element type and length */
  size_t length;
} cuv_node_result_t;

/* Submits op; the Promise resolves with *result. `token`, when an object, receives the
 * submission's ticket as token.ticket (a BigInt) for cancel(ticket) (index.js's AbortSignal).
 * Consumes op and the references in *result, also when it fails. */
napi_value cuv_node_submit(cuv_node_call_t *c, cuv_op_t *op, napi_value token,
                           const cuv_node_result_t *result);
/* cancel(ticket): true when the submission was cancelled, false when it had already finished. */
napi_value cuv_node_js_cancel(napi_env env, napi_callback_info info);

#endif
