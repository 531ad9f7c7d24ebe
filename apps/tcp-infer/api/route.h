/* tcp-infer: routes (route.c) */
#ifndef TCP_INFER_ROUTE_H
#define TCP_INFER_ROUTE_H

#include "server.h"

/* route.c: a request's route and answer, decided by its head and started once complete (loop
 * thread). */
/* Sets req's route and either its error status or the body it needs (req->body_cap bytes, 0:
 * none; conn.c allocates it); false when the request must be answered before its body is read,
 * and the connection then closed (413). */
bool route_head(loop_t *lp, request_t *req, const http_head_t *head);
/* The whole message is in: req is answered now (REQ_READY) or its work starts. */
void route_message(loop_t *lp, request_t *req);
/* Its GPU work ended (req->gpu_status): its response, 200 with the outputs or the error. */
void route_gpu_result(request_t *req);

#endif
