/* tcp-infer: the KServe v2 protocol (kserve.c) */
#ifndef TCP_INFER_KSERVE_H
#define TCP_INFER_KSERVE_H

#include "server.h"

/* kserve.c: the KServe v2 protocol (loop thread). */
/* The route of a path (without its query) under /v2; ROUTE_NONE when it is not under /v2. A
 * model's route sets *model to the one of s->models it names (else NULL: ROUTE_V2_NO_MODEL). */
route_t kserve_route_of(const server_t *s, const char *path, size_t len, const model_t **model);
/* The largest inference request body taken for model m (JSON spells each float in many bytes). */
size_t kserve_body_max(const model_t *m);
/* An inference request's head (req->model set): 0 and its body's size (req->body_cap), or an
 * error status. */
unsigned kserve_head(request_t *req, const http_head_t *head);
/* Its whole body is in: its rows replace the body (req->body, req->batch), 0; or -1 and why. */
int kserve_infer_parse(loop_t *lp, request_t *req, char *why, size_t why_len);
/* Answers a route that runs nothing (metadata, health); ready: whether a GPU worker can take
 * work now (a model's readiness also needs the model loaded). */
void kserve_answer(request_t *req, bool ready);
/* The inference's response from its GPU work's end: the outputs in JSON or binary, or the error. */
void kserve_infer_result(request_t *req);
/* The protocol's error form, {"error": message}, with that status. */
void kserve_error(request_t *req, unsigned status, const char *message);
/* The message of an error status decided from the head. */
const char *kserve_status_message(route_t route, unsigned status);
void kserve_req_free(struct kserve_req *ks);

#endif
