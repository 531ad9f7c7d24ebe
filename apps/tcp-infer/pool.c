/* tcp-infer: a loop's workspaces and the FIFO of complete requests waiting for one.
 *
 * Each op in flight uses one workspace of its loop (model.c's buffers, sized for the largest
 * request, or for a batch with --coalesce); when none is free, complete requests wait here in
 * arrival order, which bounds the device memory and the work in flight. Everything runs on the
 * loop's thread; infer.c and batch.c decide when a workspace is taken and given back. */
#include <stdlib.h>

#include "server.h"

int pool_init(loop_t *lp) {
  server_t *s = lp->srv;
  unsigned n = s->workspaces_per_loop;
  lp->workspaces = calloc(n, sizeof *lp->workspaces);
  if (!lp->workspaces)
    return CUV_ENOMEM;
  size_t rows = s->coalesce ? s->coalesce : s->max_batch;
  for (unsigned i = 0; i < n; i++) {
    int rc = model_workspace_init(s, &lp->workspaces[i], rows);
    if (rc != 0)
      return rc; /* pool_free frees what was made */
    pool_put(lp, &lp->workspaces[i]);
  }
  return 0;
}

void pool_free(loop_t *lp) {
  for (unsigned i = 0; lp->workspaces && i < lp->srv->workspaces_per_loop; i++)
    model_workspace_free(&lp->workspaces[i]);
  free(lp->workspaces);
  lp->workspaces = NULL;
}

workspace_t *pool_take(loop_t *lp) {
  workspace_t *ws = lp->free_ws;
  if (!ws)
    return NULL;
  lp->free_ws = ws->next;
  lp->n.free_workspaces--;
  return ws;
}

void pool_put(loop_t *lp, workspace_t *ws) {
  ws->next = lp->free_ws;
  lp->free_ws = ws;
  lp->n.free_workspaces++;
}

void pool_wait(loop_t *lp, request_t *req) {
  req->state = REQ_WAITING;
  req->next_wait = NULL;
  if (lp->wait_tail)
    lp->wait_tail->next_wait = req;
  else
    lp->wait_head = req;
  lp->wait_tail = req;
  lp->n.waiting++;
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
