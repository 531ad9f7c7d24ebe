/* tcp-infer: a loop's workspaces and the queue of complete requests waiting for one.
 *
 * Each op in flight uses one workspace of its loop (model.c's buffers, sized for the largest
 * request, or for a batch with --coalesce); when none is free, complete requests wait here,
 * which bounds the device memory and the work in flight. Everything runs on the loop's thread;
 * infer.c and batch.c decide when a workspace is taken and given back.
 *
 * The queue is Triton's schedule policy: by priority level (request_t.priority, 1 first), in
 * arrival order within a level, so a batch (batch.c) is filled from the highest level first. A
 * request whose timeout (request_t.deadline) passes while it waits is taken out and answered 503
 * "Request timeout expired", Triton's words and status; one that started is never cut. One timer
 * per loop (lp->expiry) fires at the earliest deadline of those waiting, armed only when a
 * waiting request has one; libuv's timers count milliseconds, so it fires up to 1 ms late.
 *
 * --balance steal: the loop also has as many workspaces on every other device. A request (or a
 * batch) takes one of its own device's, unless another device is less busy (fewer workspaces in
 * use, counted over every loop) by more than STEAL_MARGIN, or its own are all taken while
 * another device has work to spare: then the idle device takes it. The request and its
 * connection stay on their loop (cuv submits an op of any device from any loop's bridge, and
 * its completion comes back to that loop), so stealing moves GPU work, never a connection. */
#include <stdlib.h>

#include "model.h"
#include "pool.h"
#include "server.h"

/* How much busier than another its own device must be before a loop's work goes there: small
 * differences come and go within an iteration, and the loop's own streams are the ones whose
 * stalls it watches (streams.c). */
#define STEAL_MARGIN 4

/* The loop's workspaces on device d (--balance steal: d may be another than its own). */
static unsigned devices_of(const loop_t *lp) {
  return lp->srv->balance == BALANCE_STEAL ? lp->srv->ndevices : 1;
}

/* The device of the loop's workspaces [k * n, (k + 1) * n): its own first, then the others. */
static gpu_t *device_at(const loop_t *lp, unsigned k) {
  server_t *s = lp->srv;
  return &s->gpus[(lp->gpu->index + k) % s->ndevices];
}

static void push(loop_t *lp, workspace_t *ws) {
  ws->next = lp->free_ws[ws->gpu->index];
  lp->free_ws[ws->gpu->index] = ws;
}

unsigned pool_size(const loop_t *lp) { return lp->srv->workspaces_per_loop * devices_of(lp); }

static void on_expiry(uv_timer_t *timer);

int pool_init(loop_t *lp) {
  server_t *s = lp->srv;
  uv_timer_init(&lp->loop, &lp->expiry); /* cannot fail */
  uv_unref((uv_handle_t *)&lp->expiry); /* the waiting requests' connections keep the loop up */
  lp->expiry.data = lp;
  unsigned n = s->workspaces_per_loop, total = pool_size(lp);
  lp->workspaces = calloc(total, sizeof *lp->workspaces);
  if (!lp->workspaces)
    return CUV_ENOMEM;
  size_t rows = s->workspace_rows;
  for (unsigned i = 0; i < total; i++) {
    int rc = model_workspace_init(device_at(lp, i / n), &lp->workspaces[i], rows);
    if (rc != 0)
      return rc; /* pool_free frees what was made */
    push(lp, &lp->workspaces[i]);
  }
  lp->n.free_workspaces = n; /* the gauge counts its own device's */
  return 0;
}

void pool_free(loop_t *lp) {
  if (lp->expiry.loop && !uv_is_closing((uv_handle_t *)&lp->expiry)) {
    uv_close((uv_handle_t *)&lp->expiry, NULL); /* after the loop ran dry: one more runs it */
    uv_run(&lp->loop, UV_RUN_NOWAIT);
  }
  for (unsigned i = 0; lp->workspaces && i < pool_size(lp); i++)
    model_workspace_free(&lp->workspaces[i]);
  free(lp->workspaces);
  lp->workspaces = NULL;
}

static workspace_t *pop(loop_t *lp, gpu_t *g) {
  workspace_t *ws = lp->free_ws[g->index];
  if (!ws)
    return NULL;
  lp->free_ws[g->index] = ws->next;
  g->busy++;
  return ws;
}

/* --balance steal: the least busy other device with a workspace of this loop free. */
static gpu_t *idlest(const loop_t *lp) {
  gpu_t *best = NULL;
  for (unsigned k = 1; k < devices_of(lp); k++) {
    gpu_t *g = device_at(lp, k);
    if (lp->free_ws[g->index] && (!best || g->busy < best->busy))
      best = g;
  }
  return best;
}

/* Whether the loop's next work goes to device `other` rather than its own. */
static bool steal_to(const loop_t *lp, const gpu_t *other) {
  unsigned own = lp->gpu->busy;
  if (!lp->free_ws[lp->gpu->index])
    return other->busy < own; /* its own are all taken: anything less busy takes it */
  return own > other->busy + STEAL_MARGIN;
}

workspace_t *pool_take(loop_t *lp) {
  gpu_t *other = idlest(lp);
  if (other && steal_to(lp, other))
    return pop(lp, other);
  workspace_t *ws = pop(lp, lp->gpu);
  if (ws)
    lp->n.free_workspaces--;
  return ws;
}

bool pool_can_take(const loop_t *lp) {
  if (lp->free_ws[lp->gpu->index])
    return true;
  gpu_t *other = idlest(lp);
  return other && steal_to(lp, other);
}

void pool_put(loop_t *lp, workspace_t *ws) {
  push(lp, ws);
  ws->gpu->busy--;
  if (ws->gpu == lp->gpu)
    lp->n.free_workspaces++;
}

/* ---- the queue: priority levels, timeouts --------------------------------------------------- */

/* Its level: 1 the highest; 0 (not asked) is the lowest, --priority-levels. */
static unsigned level_of(const loop_t *lp, const request_t *req) {
  return req->priority ? req->priority : lp->srv->priority_levels;
}

/* The timer fires at `at` (uv_hrtime), rounded up to libuv's milliseconds. */
static void arm(loop_t *lp, uint64_t at) {
  uint64_t now = uv_hrtime(), ms = at > now ? (at - now + 999999) / 1000000 : 0;
  lp->expiry_at = at;
  uv_timer_start(&lp->expiry, on_expiry, ms, 0);
}

void pool_wait(loop_t *lp, request_t *req) {
  req->state = REQ_WAITING;
  unsigned level = level_of(lp, req);
  request_t **p = &lp->wait_head;
  if (lp->wait_tail && level_of(lp, lp->wait_tail) <= level)
    p = &lp->wait_tail->next_wait; /* the common case: at the end, at once */
  while (*p && level_of(lp, *p) <= level)
    p = &(*p)->next_wait;
  req->next_wait = *p;
  *p = req;
  if (!req->next_wait)
    lp->wait_tail = req;
  lp->n.waiting++;
  if (req->deadline && (!lp->expiry_at || req->deadline < lp->expiry_at))
    arm(lp, req->deadline);
}

/* The first waiting request whose deadline passed by `now`, taken out; NULL: none. */
static request_t *take_expired(loop_t *lp, uint64_t now) {
  for (request_t *req = lp->wait_head; req; req = req->next_wait)
    if (req->deadline && req->deadline <= now) {
      pool_forget(lp, req);
      return req;
    }
  return NULL;
}

/* Answers the requests whose timeout passed, one at a time (an answer may make others leave
 * the queue), then arms the timer for the earliest deadline left, if any. */
static void on_expiry(uv_timer_t *timer) {
  loop_t *lp = timer->data;
  uint64_t now = uv_hrtime(), next = 0;
  lp->expiry_at = 0;
  request_t *req;
  while ((req = take_expired(lp, now))) {
    lp->n.queue_timeouts++;
    lp->n.gpu_submitted++; /* as a refused submission: counted in, answered with the error */
    req->rejected = true;
    req->gpu_status = CUV_ECANCELED;
    req->gpu_error = "Request timeout expired: the request waited for the GPU past its timeout";
    req->done(req);
  }
  for (req = lp->wait_head; req; req = req->next_wait)
    if (req->deadline && (!next || req->deadline < next))
      next = req->deadline;
  if (next)
    arm(lp, next);
}

request_t *pool_first_waiting(const loop_t *lp) { return lp->wait_head; }

request_t *pool_next_waiting(loop_t *lp) {
  request_t *req = lp->wait_head;
  if (!req)
    return NULL;
  lp->wait_head = req->next_wait;
  if (!lp->wait_head)
    lp->wait_tail = NULL;
  lp->n.waiting--;
  return req;
}

bool pool_forget(loop_t *lp, request_t *req) {
  request_t **p = &lp->wait_head, *prev = NULL;
  while (*p && *p != req) {
    prev = *p;
    p = &(*p)->next_wait;
  }
  if (!*p)
    return false;
  *p = req->next_wait;
  if (lp->wait_tail == req)
    lp->wait_tail = prev;
  lp->n.waiting--;
  return true;
}
