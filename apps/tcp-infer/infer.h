/* tcp-infer: request dispatch (infer.c) */
#ifndef TCP_INFER_INFER_H
#define TCP_INFER_INFER_H

#include "server.h"

/* infer.c: request dispatch (loop thread, except the loop set-up). */
/* A loop's workspaces and, with --coalesce, its batcher (before the loop serves). */
int infer_loop_init(loop_t *lp);
void infer_loop_free(loop_t *lp);
/* Starts a complete POST /infer (body and batch valid): now, or once a workspace is free. */
void infer_start(loop_t *lp, request_t *req);
/* A request that never started (waiting, or in the pending batch) leaves its queue. */
void infer_forget(loop_t *lp, request_t *req);
/* Gives the request's workspace back (next waiting request starts on it). */
void infer_release(loop_t *lp, request_t *req);

#endif
