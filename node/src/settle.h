/* Settling in slices. The bridge hands over every completion its drain found at once (thousands,
 * when thousands of ops are in flight); settling them all there would hold Node's loop for as
 * long as their Promise reactions run, and timers, I/O and the thread pool's callbacks would
 * wait. So completions queue here, in completion order, and a check handle (after the loop's
 * I/O) settles them in slices of about `budget` per loop turn, under one callback scope per
 * chunk (its close runs the reactions, as after any native callback); an idle handle keeps the
 * loop from blocking, and alive, while some wait. Every queued completion settles once: closing
 * settles what is left before the handles go. Loop thread only. */
#ifndef CUV_NODE_SETTLE_H
#define CUV_NODE_SETTLE_H

#include <node_api.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

typedef struct cuv_node_done cuv_node_done_t;
typedef void (*cuv_node_settle_fn)(napi_env env, cuv_node_done_t *done);

/* A completion waiting to settle: embedded in its job, which settle() settles and frees. */
struct cuv_node_done {
  cuv_node_done_t *next;
  cuv_node_settle_fn settle;
};

typedef struct cuv_node_settler {
  uv_check_t check; /* settles a slice after each poll for I/O */
  uv_idle_t idle;   /* while completions wait: poll without blocking, and keep the loop alive */
  cuv_node_done_t *head, **tail; /* in completion order */
  uint64_t budget_ns; /* per loop turn */
  bool open;          /* the handles are initialized */
  unsigned closing;   /* handles whose close callback is due */
  void (*closed)(void *arg);
  void *closed_arg;
} cuv_node_settler_t;

/* The default budget per loop turn, in microseconds (CUV_NODE_SETTLE_US overrides it). */
#define CUV_NODE_SETTLE_US 500

struct cuv_node_addon;
/* Initializes a's settler on loop (cannot fail). */
void cuv_node_settler_open(struct cuv_node_addon *a, uv_loop_t *loop);
/* Queues a completion; it settles in a later slice of this loop turn or the next ones. */
void cuv_node_settler_push(struct cuv_node_addon *a, cuv_node_done_t *done);
/* Settles everything queued, closes the handles, then calls closed(arg) from a later loop
 * callback (at once when the settler was never opened). */
void cuv_node_settler_close(struct cuv_node_addon *a, void (*closed)(void *arg), void *arg);

#endif
