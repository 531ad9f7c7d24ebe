/* cuv_queue_poll: an event loop's whole contract with a queue (include/cuv.h). It delivers what
 * is done within a time budget and says when to look again, so an adapter (uv/bridge.c) needs no
 * other call to decide between polling on its next turn and blocking in the kernel: while the
 * queue's latest work is young it reads the completion flags itself (cuv__reactor_poll), so
 * short work reaches its callback without a cross-thread wake; callbacks run in slices of
 * POLL_SLICE with the clock read between them, so a backlog is spread over the loop's turns. */
#include "internal.h"
#include "queue.h"
#include "reactor.h"

/* Callbacks between two looks at the clock: a clock read is some 20 ns, a callback's retirement
 * at least as much, so the budget is overrun by at most a few callbacks. */
#define POLL_SLICE 16u

/* How long the queue's latest timed work stays young; 0 once it is not, or with none in flight. */
static uint64_t young_left_ns(cuv_queue_t *q, uint64_t now) {
  uint64_t until = atomic_load_explicit(&q->young_until, memory_order_relaxed);
  return until > now && atomic_load(&q->pending) > 0 ? until - now : 0;
}

/* Slices of callbacks until nothing is left or the budget has passed; how many ran. */
static int deliver_within(cuv_queue_t *q, uint64_t start, uint64_t budget_ns) {
  int ran = 0;
  for (uint64_t now = start; now - start < budget_ns && cuv__queue_ready(q); now = cuv__now_ns())
    ran += cuv__queue_drain_max(q, POLL_SLICE);
  return ran;
}

/* When to look again (cuv_queue_poll's next_poll_ns): 1 exactly while something is left to
 * deliver, the one sign of it an owner gets, so young work with 1 ns left reads 2. */
static uint64_t next_look_ns(cuv_queue_t *q) {
  if (cuv__queue_ready(q))
    return 1;
  uint64_t young = young_left_ns(q, cuv__now_ns());
  return young == 1 ? 2 : young;
}

CUV_EXTERN int cuv_queue_poll(cuv_queue_t *q, uint64_t budget_ns, uint64_t *next_poll_ns) {
  if (!q)
    return CUV_EINVAL;
  if (!atomic_load_explicit(&q->polled, memory_order_relaxed))
    atomic_store_explicit(&q->polled, true, memory_order_relaxed);
  uint64_t start = cuv__now_ns();
  int ran = 0;
  if (budget_ns > 0) {
    if (young_left_ns(q, start) > 0)
      cuv__reactor_poll();
    ran = deliver_within(q, start, budget_ns);
  }
  if (next_poll_ns)
    *next_poll_ns = next_look_ns(q);
  return ran;
}
