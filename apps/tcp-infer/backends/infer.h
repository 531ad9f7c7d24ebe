/* tcp-infer: the backends that run each request by itself (infer.c): cuv (and its --graph and
 * --cublas), offload, baseline; and the loop set-up that batch.c's backend shares. */
#ifndef TCP_INFER_INFER_H
#define TCP_INFER_INFER_H

#include <stdbool.h>

#include "backend.h"
#include "server.h"

extern const backend_t backend_cuv, backend_offload, backend_baseline;

/* A loop's GPU side before it serves (loop thread): --graph's capture streams, its workspaces
 * and, with bridge, its streams and its bridge (the backends that submit through cuv's bridge;
 * without it, baseline's cuv_sync uses the default policy's streams). infer_loop_free frees what
 * was made, after the loop ran dry. */
int infer_loop_init(loop_t *lp, bool bridge);
void infer_loop_free(loop_t *lp);
/* Answers a request this backend does not run (or could not submit) with `status` as its GPU
 * work's result, counted as submitted, through its completion. */
void infer_refuse(loop_t *lp, request_t *req, int status);

#endif
