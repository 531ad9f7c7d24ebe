/* The scope completions settle in (scope.h). */
#include <stdlib.h>

#include "scope.h"

/* CUV_NODE_SETTLE_US: microseconds of callbacks per loop turn; 0 or unset: the default. */
static uint64_t budget_ns(void) {
  const char *text = getenv("CUV_NODE_SETTLE_US");
  char *end = NULL;
  unsigned long us = text ? strtoul(text, &end, 10) : 0;
  if (!text || end == text || *end || us == 0)
    us = CUV_NODE_SETTLE_US;
  return (uint64_t)us * 1000u;
}

static void leave(cuv_node_scope_t *s) {
  if (!s->open)
    return;
  s->open = false;
  if (s->callbacks)
    napi_close_callback_scope(s->env, s->callbacks); /* runs the reactions */
  napi_close_handle_scope(s->env, s->handles);
}

static void after_turn(cuv_uv_t *bridge, void *arg) {
  (void)bridge;
  leave(arg);
}

int cuv_node_scope_attach(cuv_node_scope_t *s, cuv_uv_t *bridge) {
  cuv_uv_turn_t turn = {.budget_ns = budget_ns(), .after = after_turn, .arg = s};
  return cuv_uv_set_turn(bridge, &turn);
}

void cuv_node_scope_enter(cuv_node_scope_t *s) {
  napi_value resource;
  if (s->open)
    return;
  s->open = true;
  s->settled = 0;
  napi_open_handle_scope(s->env, &s->handles);
  if (napi_get_reference_value(s->env, s->resource, &resource) != napi_ok ||
      napi_open_callback_scope(s->env, resource, s->context, &s->callbacks) != napi_ok)
    s->callbacks = NULL;
}

void cuv_node_scope_settled(cuv_node_scope_t *s) {
  if (s->open && ++s->settled >= CUV_NODE_SCOPE_CHUNK)
    leave(s);
}
