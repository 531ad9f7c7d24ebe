/* tcp-infer: --coalesce (batch.c) */
#ifndef TCP_INFER_BATCH_H
#define TCP_INFER_BATCH_H

#include "server.h"

/* batch.c (--coalesce; loop thread). */
int batch_loop_init(loop_t *lp); /* after the workspaces, on the loop's thread */
void batch_loop_free(loop_t *lp); /* after the loop ran dry (closes its handles) */
/* Takes a complete POST /infer into the pending batch (or the wait queue when that is full). */
void batch_add(loop_t *lp, request_t *req);
/* Removes a request from the pending batch; false when it was not there. */
bool batch_forget(loop_t *lp, request_t *req);
/* GET /stats (any thread): the batch counters, summed over the loops. */
void batch_metrics(const server_t *s, FILE *f);

#endif
