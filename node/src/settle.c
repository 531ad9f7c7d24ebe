/* Settling in slices (settle.h). */
#include <stdlib.h>

#include "addon.h"
#include "settle.h"

/* Completions settled under one callback scope: few enough that a slice ends close to its
 * budget (the scope's close runs their reactions), many enough that opening and closing the
 * scope (a microtask checkpoint each) costs little per Promise. */
#define CHUNK 32

/* CUV_NODE_SETTLE_US: microseconds of settling per loop turn; 0 or unset: the default. */
static uint64_t budget_ns(void) {
  const char *text = getenv("CUV_NODE_SETTLE_US");
  char *end = NULL;
  unsigned long us = text ? strtoul(text, &end, 10) : 0;
  if (!text || end == text || *end || us == 0)
    us = CUV_NODE_SETTLE_US;
  return (uint64_t)us * 1000u;
}

static cuv_node_done_t *pop(cuv_node_settler_t *s) {
  cuv_node_done_t *d = s->head;
  if (d && !(s->head = d->next))
    s->tail = &s->head;
  return d;
}

/* Up to CHUNK completions, in one handle scope and one callback scope: Node runs the Promise
 * reactions (microtasks) and process.nextTick callbacks when the scope closes. */
static void settle_chunk(cuv_node_addon_t *a) {
  napi_env env = a->env;
  napi_handle_scope handles;
  napi_callback_scope scope = NULL;
  napi_value resource;
  napi_open_handle_scope(env, &handles);
  if (napi_get_reference_value(env, a->resource, &resource) != napi_ok ||
      napi_open_callback_scope(env, resource, a->async_context, &scope) != napi_ok)
    scope = NULL;
  cuv_node_done_t *d;
  for (unsigned i = 0; i < CHUNK && (d = pop(&a->settler)); i++)
    d->settle(env, d);
  if (scope)
    napi_close_callback_scope(env, scope);
  napi_close_handle_scope(env, handles);
}

/* Chunks until the queue is empty or `budget` has passed. */
static void settle_for(cuv_node_addon_t *a, uint64_t budget) {
  uint64_t start = uv_hrtime();
  while (a->settler.head) {
    settle_chunk(a);
    if (uv_hrtime() - start >= budget)
      break;
  }
}

static void on_idle(uv_idle_t *idle) { (void)idle; /* its being active is what counts */ }

static void stop(cuv_node_settler_t *s) {
  uv_check_stop(&s->check);
  uv_idle_stop(&s->idle);
}

static void on_check(uv_check_t *check) {
  cuv_node_addon_t *a = check->data;
  settle_for(a, a->settler.budget_ns);
  if (!a->settler.head)
    stop(&a->settler);
}

void cuv_node_settler_open(cuv_node_addon_t *a, uv_loop_t *loop) {
  cuv_node_settler_t *s = &a->settler;
  s->head = NULL;
  s->tail = &s->head;
  s->budget_ns = budget_ns();
  uv_check_init(loop, &s->check); /* cannot fail */
  uv_idle_init(loop, &s->idle);   /* cannot fail */
  s->check.data = s->idle.data = a;
  uv_unref((uv_handle_t *)&s->check); /* the idle handle alone keeps the loop alive */
  s->open = true;
}

void cuv_node_settler_push(cuv_node_addon_t *a, cuv_node_done_t *done) {
  cuv_node_settler_t *s = &a->settler;
  bool was_empty = !s->head;
  done->next = NULL;
  *s->tail = done;
  s->tail = &done->next;
  if (was_empty && !s->closed) {
    uv_check_start(&s->check, on_check);
    uv_idle_start(&s->idle, on_idle);
  }
}

static void on_closed(uv_handle_t *handle) {
  cuv_node_addon_t *a = handle->data;
  if (--a->settler.closing == 0)
    a->settler.closed(a->settler.closed_arg);
}

void cuv_node_settler_close(cuv_node_addon_t *a, void (*closed)(void *arg), void *arg) {
  cuv_node_settler_t *s = &a->settler;
  if (!s->open) {
    closed(arg);
    return;
  }
  s->closed = closed;
  s->closed_arg = arg;
  settle_for(a, UINT64_MAX); /* the environment is ending: nothing may be left behind */
  stop(s);
  s->closing = 2;
  uv_close((uv_handle_t *)&s->check, on_closed);
  uv_close((uv_handle_t *)&s->idle, on_closed);
}
