/* tcp-infer: a loop's workspaces (pool.c) */
#ifndef TCP_INFER_POOL_H
#define TCP_INFER_POOL_H

#include "server.h"

/* pool.c: a loop's workspaces and the queue of requests waiting for one, by priority level
 * (loop thread). */
int pool_init(loop_t *lp); /* sized for --max-batch rows, or --coalesce's */
/* Its workspaces: --workspaces, on each device it uses (--balance steal: every device). */
unsigned pool_size(const loop_t *lp);
void pool_free(loop_t *lp);
/* A free workspace, of its own device or (--balance steal) a less busy one's; NULL: none. */
workspace_t *pool_take(loop_t *lp);
void pool_put(loop_t *lp, workspace_t *ws);
/* Whether pool_take would give a workspace now. */
bool pool_can_take(const loop_t *lp);
/* Queues req (REQ_WAITING) after the waiting requests of its priority level and the higher
 * ones (request_t.priority); its timeout (request_t.deadline), if any, armed. */
void pool_wait(loop_t *lp, request_t *req);
/* The first waiting request (the highest level's oldest), left in the queue (first) or taken
 * out of it (next); NULL: none. */
request_t *pool_first_waiting(const loop_t *lp);
request_t *pool_next_waiting(loop_t *lp);
/* Takes req out of the queue; false when it was not there. */
bool pool_forget(loop_t *lp, request_t *req);

#endif
