/* tcp-infer: a queue of complete requests waiting to run, Triton's schedule policy.
 *
 * By priority level (request_t.priority, 1 first; 0, none asked, is the lowest level,
 * --priority-levels), in arrival order within a level. A request whose timeout
 * (request_t.deadline) passes while it waits is taken out and handed to the queue's owner, which
 * answers it 503 "Request timeout expired" (waitq_timed_out); one that started is never cut. One
 * timer per queue fires at the earliest deadline of those waiting, armed only while a waiting
 * request has one; libuv's timers count milliseconds, so it fires up to 1 ms late.
 *
 * Two owners, on their loop's thread: pool.c (the requests waiting for a workspace, in process
 * and in --isolate's workers) and isolate.c (the front's requests waiting for a ready worker). */
#include "waitq.h"
#include "server.h"

static void on_expiry(uv_timer_t *timer);

void waitq_init(waitq_t *q, loop_t *lp, waitq_expired_fn expired, void *owner) {
  *q = (waitq_t){.lp = lp, .expired = expired, .owner = owner};
  uv_timer_init(&lp->loop, &q->expiry); /* cannot fail */
  uv_unref((uv_handle_t *)&q->expiry);
  q->expiry.data = q;
}

void waitq_close(waitq_t *q) {
  if (q->expiry.loop && !uv_is_closing((uv_handle_t *)&q->expiry))
    uv_close((uv_handle_t *)&q->expiry, NULL);
}

/* Its level: 1 the highest; 0 (not asked) is the lowest, --priority-levels. */
static unsigned level_of(const waitq_t *q, const request_t *req) {
  return req->priority ? req->priority : q->lp->srv->priority_levels;
}

/* The timer fires at `at` (uv_hrtime), rounded up to libuv's milliseconds. */
static void arm(waitq_t *q, uint64_t at) {
  uint64_t now = uv_hrtime(), ms = at > now ? (at - now + 999999) / 1000000 : 0;
  q->expiry_at = at;
  uv_timer_start(&q->expiry, on_expiry, ms, 0);
}

/* Links req in at *p (NULL: the end), counts it, arms its timeout. */
static void insert(waitq_t *q, request_t **p, request_t *req) {
  req->state = REQ_WAITING;
  req->next_wait = *p;
  *p = req;
  if (!req->next_wait)
    q->tail = req;
  q->len++;
  q->lp->n.waiting++;
  bool closing = uv_is_closing((uv_handle_t *)&q->expiry);
  if (req->deadline && !closing && (!q->expiry_at || req->deadline < q->expiry_at))
    arm(q, req->deadline);
}

void waitq_push(waitq_t *q, request_t *req) {
  unsigned level = level_of(q, req);
  request_t **p = &q->head;
  if (q->tail && level_of(q, q->tail) <= level)
    p = &q->tail->next_wait; /* the common case: at the end, at once */
  while (*p && level_of(q, *p) <= level)
    p = &(*p)->next_wait;
  insert(q, p, req);
}

void waitq_push_ahead(waitq_t *q, request_t *req) {
  unsigned level = level_of(q, req);
  request_t **p = &q->head;
  while (*p && level_of(q, *p) < level)
    p = &(*p)->next_wait;
  insert(q, p, req);
}

request_t *waitq_first(const waitq_t *q) { return q->head; }

request_t *waitq_pop(waitq_t *q) {
  request_t *req = q->head;
  if (req)
    waitq_remove(q, req);
  return req;
}

bool waitq_remove(waitq_t *q, request_t *req) {
  request_t **p = &q->head, *prev = NULL;
  while (*p && *p != req) {
    prev = *p;
    p = &(*p)->next_wait;
  }
  if (!*p)
    return false;
  *p = req->next_wait;
  if (q->tail == req)
    q->tail = prev;
  req->next_wait = NULL;
  q->len--;
  q->lp->n.waiting--;
  return true;
}

bool waitq_past_timeout(const request_t *req, uint64_t now) {
  return req->deadline && req->deadline <= now;
}

void waitq_timed_out(loop_t *lp, request_t *req) {
  lp->n.queue_timeouts++;
  req->rejected = true;
  req->timed_out = true;
  req->gpu_status = CUV_ECANCELED;
  req->gpu_error = "Request timeout expired: the request waited for the GPU past its timeout";
  req->done(req);
}

/* The first waiting request whose deadline passed by `now`, taken out; NULL: none. */
static request_t *take_expired(waitq_t *q, uint64_t now) {
  for (request_t *req = q->head; req; req = req->next_wait)
    if (waitq_past_timeout(req, now)) {
      waitq_remove(q, req);
      return req;
    }
  return NULL;
}

/* Hands over the requests whose timeout passed, one at a time (an answer may make others leave
 * the queue), then arms the timer for the earliest deadline left, if any. */
static void on_expiry(uv_timer_t *timer) {
  waitq_t *q = timer->data;
  uint64_t now = uv_hrtime(), next = 0;
  q->expiry_at = 0;
  request_t *req;
  while ((req = take_expired(q, now)))
    q->expired(q, req);
  for (req = q->head; req; req = req->next_wait)
    if (req->deadline && (!next || req->deadline < next))
      next = req->deadline;
  if (next)
    arm(q, next);
}
