/* tcp-infer: the coalesce backend (batch.c, --coalesce): the requests of a loop iteration as one
 * GPU submission; and its metrics. */
#ifndef TCP_INFER_BATCH_H
#define TCP_INFER_BATCH_H

#include <stdio.h>

#include "backend.h"
#include "server.h"

extern const backend_t backend_coalesce;

/* GET /stats (any thread): the batch counters, summed over the loops. */
void batch_metrics(const server_t *s, FILE *f);

#endif
