/* tcp-infer: GET /metrics (metrics.c) */
#ifndef TCP_INFER_METRICS_H
#define TCP_INFER_METRICS_H

#include "server.h"

/* metrics.c: the /metrics body (malloc'd), summed over every loop. */
char *metrics_render(const server_t *s, size_t *len);
/* An inference's response is ready (or it was dropped): its outcome and durations (loop thread). */
void metrics_request_done(loop_t *lp, const request_t *req);
/* An inference that never ran: its client went away while it waited (Triton's CANCELED), or the
 * protocol refused it (a KServe request that cannot run: OTHER). */
void metrics_request_canceled(loop_t *lp, const request_t *req);
void metrics_request_refused(loop_t *lp, const request_t *req);

#endif
