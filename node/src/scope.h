/* The scope completions settle in. The bridge runs its callbacks on the loop thread in slices of
 * a turn's budget (include/cuv/uv.h, cuv_uv_set_turn); a Promise settled there needs a handle
 * scope and a callback scope, whose close runs the reactions (microtasks and nextTicks), as
 * after any native callback. A scope opens at a turn's first settlement and closes every
 * CUV_NODE_SCOPE_CHUNK settlements, so reactions run inside the bridge's budget, which counts
 * them, and at the turn's end (the bridge's `after`). Loop thread only. */
#ifndef CUV_NODE_SCOPE_H
#define CUV_NODE_SCOPE_H

#include <node_api.h>
#include <stdbool.h>
#include <stdint.h>

#include <cuv/uv.h>

/* Settlements per callback scope: few enough that the bridge's clock, read between its slices,
 * sees the reactions' time soon, many enough that the scope's close (a microtask checkpoint)
 * costs little per Promise. */
#define CUV_NODE_SCOPE_CHUNK 32

/* The default budget of callbacks per loop turn, in microseconds (CUV_NODE_SETTLE_US overrides
 * it): 10 000 Promises in flight keep Node's loop delay under 1 ms (bench/RESULTS.md, cuv-node). */
#define CUV_NODE_SETTLE_US 500

typedef struct cuv_node_scope {
  napi_env env;
  napi_ref resource; /* the async resource completions run under */
  napi_async_context context;
  napi_handle_scope handles;
  napi_callback_scope callbacks; /* NULL when Node could not open one (an ending environment) */
  bool open;
  unsigned settled; /* in the open scope */
} cuv_node_scope_t;

/* Gives the bridge its turn: the budget and the scope's close after its callbacks. */
int cuv_node_scope_attach(cuv_node_scope_t *s, cuv_uv_t *bridge);
/* Before a settlement: opens the scope unless it is open. */
void cuv_node_scope_enter(cuv_node_scope_t *s);
/* After a settlement: closes the scope once it holds CUV_NODE_SCOPE_CHUNK of them. */
void cuv_node_scope_settled(cuv_node_scope_t *s);

#endif
