/* tcp-infer: routes (route.c) */
#ifndef TCP_INFER_ROUTE_H
#define TCP_INFER_ROUTE_H

#include "server.h"

/* route.c: a request's route and answer, decided by its head and started once complete (loop
 * thread). */
/* Sets req's route and either its error status or the body it needs (req->body_cap bytes, 0:
 * none; conn.c allocates it; a chunked body may grow to req->body_max); false when the request
 * must be answered before its body is read, and the connection then closed (413, a bad Host, a
 * field name with whitespace before its colon). */
bool route_head(loop_t *lp, request_t *req, const http_head_t *head);
/* 413, answered now: the body (`bytes` so far, or declared) is over the route's limit; the
 * connection then stops reading (conn.c: a chunked body that grew past req->body_max). */
void route_too_large(loop_t *lp, request_t *req, uint64_t bytes);
/* The whole message is in: req is answered now (REQ_READY) or its work starts. */
void route_message(loop_t *lp, request_t *req);
/* Its GPU work ended (req->gpu_status): its response, 200 with the outputs or the error. */
void route_gpu_result(request_t *req);

#endif
