/* tcp-infer: a loop's workspaces and the queue of complete requests waiting for one.
 *
 * Each op in flight uses one workspace of its loop (model.c's buffers, sized for the largest
 * request, or for a batch with --coalesce); when none is free, complete requests wait here,
 * which bounds the device memory and the work in flight. Everything runs on the loop's thread;
 * infer.c and batch.c decide when a workspace is taken and given back.
 *
 * The queue is Triton's schedule policy (waitq.c, lp->wait): by priority level, in arrival order
 * within a level, so a batch (batch.c) is filled from the highest level first; a request whose
 * timeout passes while it waits is answered 503 "Request timeout expired".
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
#include "waitq.h"

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

static void expired(waitq_t *q, request_t *req);

int pool_init(loop_t *lp) {
  server_t *s = lp->srv;
  waitq_init(&lp->wait, lp, expired, lp); /* the waiting requests' connections keep the loop up */
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
  if (lp->wait.expiry.loop && !uv_is_closing((uv_handle_t *)&lp->wait.expiry)) {
    waitq_close(&lp->wait); /* after the loop ran dry: one more runs it */
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

/* ---- the queue (waitq.c): priority levels, timeouts ----------------------------------------- */

/* A request whose timeout passed while it waited: answered as a refused submission (counted
 * in, answered with the error). */
static void expired(waitq_t *q, request_t *req) {
  loop_t *lp = q->owner;
  lp->n.gpu_submitted++;
  waitq_timed_out(lp, req);
}

void pool_wait(loop_t *lp, request_t *req) { waitq_push(&lp->wait, req); }

request_t *pool_first_waiting(const loop_t *lp) { return waitq_first(&lp->wait); }

request_t *pool_next_waiting(loop_t *lp) { return waitq_pop(&lp->wait); }

bool pool_forget(loop_t *lp, request_t *req) { return waitq_remove(&lp->wait, req); }
