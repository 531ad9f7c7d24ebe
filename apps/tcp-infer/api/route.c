/* tcp-infer: routes. What a request asks for is decided once its head is in (route_head): its
 * route, an error status (its body, if any, is then read and dropped), or the body to read. Once
 * the whole message is in, route_message answers it at once (errors, GET /stats, KServe's
 * metadata and health) or starts its work (infer.c, or isolate.c's worker process; a KServe
 * inference once kserve.c turned its body into rows); route_gpu_result turns the work's end into
 * the response. conn.c calls these and serializes what they set; they call downward only.
 *
 * HEAD is answered as GET on every route GET serves, without the body (conn.c sends the head
 * only, Content-Length included). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend.h"
#include "kserve.h"
#include "metrics.h"
#include "route.h"
#include "server.h"

#define ROW_BYTES (MLP_IN * sizeof(float))
#define ALLOW_GET "Allow: GET, HEAD\r\n"
#define ALLOW_POST "Allow: POST\r\n"
#define CHUNKED_FIRST 4096 /* a chunked body's first buffer; conn.c doubles it as chunks come */

/* ---- error messages ----------------------------------------------------------------------- */

static const char *error_message(unsigned status) {
  switch (status) {
  case 400: return "body must be a positive multiple of 256 bytes (batch x 64 float32, "
                   "little-endian); X-In-Dim, if sent, must be 64 and X-Batch the batch";
  case 404: return "unknown route: POST /infer, GET /metrics (or /stats), the KServe v2 routes "
                   "under /v2";
  case 405: return "method not allowed";
  case 411: return "POST /infer needs a Content-Length";
  default: return "server busy";
  }
}

/* ---- the head ----------------------------------------------------------------------------- */

/* The path of a request target: origin-form as it is; absolute-form (RFC 9112 3.2.2,
 * "http://host:port/path?query", what a proxy is sent and a server must take too) from the
 * first '/' after its authority, the scheme's letters in any case. */
static const char *target_path(const char *url) {
  if (url[0] == '/')
    return url; /* origin-form, what clients send: no scheme to compare */
  const char *rest = !strncasecmp(url, "http://", 7)    ? url + 7
                     : !strncasecmp(url, "https://", 8) ? url + 8
                                                        : NULL;
  if (!rest)
    return url;
  return rest + strcspn(rest, "/?#");
}

/* The route of a request target, and the model it runs or asks about (req->model). POST /infer
 * runs the seeded MLP (none with a repository: route_head refuses it). */
static route_t route_of(const server_t *s, request_t *req, const char *target) {
  const char *url = target_path(target);
  size_t len = strcspn(url, "?#");
  if (len >= 3 && !memcmp(url, "/v2", 3))
    return kserve_route_of(s, url, len, &req->model);
  if (len == 6 && !memcmp(url, "/infer", 6)) {
    req->model = !s->repository && s->nmodels ? &s->models[0] : NULL;
    return ROUTE_INFER;
  }
  if ((len == 6 && !strncmp(url, "/stats", 6)) || (len == 8 && !strncmp(url, "/metrics", 8)))
    return ROUTE_STATS;
  if (len == 12 && !strncmp(url, "/debug/fault", 12))
    return ROUTE_FAULT;
  if (len == 11 && !strncmp(url, "/debug/hang", 11))
    return ROUTE_HANG;
  return ROUTE_NONE;
}

/* GET routes take HEAD too; the others POST only. 0, or 405 with the Allow header set. */
static unsigned check_method(request_t *req, uint8_t method, bool get_route) {
  bool ok = get_route ? method == HTTP_GET || method == HTTP_HEAD : method == HTTP_POST;
  if (ok)
    return 0;
  req->extra_header = get_route ? ALLOW_GET : ALLOW_POST;
  return 405;
}

/* POST /infer's body of `bytes`: batch x 64 float32, X-Batch (when sent, >= 0) the batch. 0 and
 * req->batch, or an error status. */
static unsigned infer_rows(const loop_t *lp, request_t *req, uint64_t bytes, long x_batch) {
  if (bytes > (uint64_t)lp->srv->max_batch * ROW_BYTES)
    return 413;
  if (bytes == 0 || bytes % ROW_BYTES || (x_batch >= 0 && (uint64_t)x_batch != bytes / ROW_BYTES))
    return 400;
  req->batch = (unsigned)(bytes / ROW_BYTES);
  return 0;
}

/* POST /infer's head: the body's size from Content-Length, or a chunked body that may grow to
 * the largest batch (conn.c; its rows are counted once it is in, X-Batch kept in req->batch
 * until then). 0, or an error status. */
static unsigned infer_body(const loop_t *lp, request_t *req, const http_head_t *h) {
  if (!h->chunked && !h->has_length)
    return 411;
  if (h->chunked) {
    if ((h->x_in_dim != -1 && h->x_in_dim != MLP_IN) || h->x_batch == -2 || h->x_batch == 0 ||
        h->x_batch > (long)lp->srv->max_batch)
      return 400;
    req->batch = h->x_batch > 0 ? (unsigned)h->x_batch : 0;
    req->body_max = (size_t)lp->srv->max_batch * ROW_BYTES;
    req->body_cap = req->body_max < CHUNKED_FIRST ? req->body_max : CHUNKED_FIRST;
    return 0;
  }
  unsigned status = infer_rows(lp, req, h->content_length, h->x_batch == -2 ? 0 : h->x_batch);
  if (status == 0 && h->x_in_dim != -1 && h->x_in_dim != MLP_IN)
    status = 400;
  if (status == 0)
    req->body_cap = (size_t)h->content_length;
  return status;
}

/* A chunked POST /infer is in: its rows counted as Content-Length's would have been. */
static unsigned chunked_rows(const loop_t *lp, request_t *req) {
  long x_batch = req->batch ? (long)req->batch : -1;
  return infer_rows(lp, req, req->body_len, x_batch);
}

/* The routes that GET (and HEAD) serve; the others take POST. */
static bool get_route(route_t route) {
  return route == ROUTE_STATS || route == ROUTE_V2_SERVER || route == ROUTE_V2_LIVE ||
         route == ROUTE_V2_READY || route == ROUTE_V2_MODEL || route == ROUTE_V2_MODEL_READY;
}

void route_too_large(loop_t *lp, request_t *req, uint64_t bytes) {
  char message[128];
  size_t max = req->route == ROUTE_INFER ? lp->srv->max_batch * ROW_BYTES
                                         : kserve_body_max(req->model);
  snprintf(message, sizeof message, "body of %s%llu bytes: at most %zu (max batch %u)",
           req->body_max ? "more than " : "", (unsigned long long)bytes, max, lp->srv->max_batch);
  req->keep_alive = false;
  if (route_is_v2(req->route))
    kserve_error(req, 413, message);
  else
    respond_error(req, 413, message);
}

/* RFC 9112's rules on the head that llhttp leaves to the server: exactly one Host (HTTP/1.1
 * needs one, no version may send two: which names the target would be a guess, 3.2) and no
 * whitespace between a field's name and its colon (5.1); NULL, or why the head is refused. */
static const char *head_refused(const http_head_t *h) {
  if (h->field_space)
    return "bad request: whitespace between a header field's name and its colon";
  if (h->hosts > 1)
    return "bad request: more than one Host header";
  if (h->hosts == 0 && h->http_major == 1 && h->http_minor >= 1)
    return "bad request: an HTTP/1.1 request needs a Host header";
  return NULL;
}

/* 400 now: the connection then stops reading, as after any malformed head. */
static void refuse_head(request_t *req, const char *why) {
  req->keep_alive = false;
  if (route_is_v2(req->route))
    kserve_error(req, 400, why);
  else
    respond_error(req, 400, why);
}

bool route_head(loop_t *lp, request_t *req, const http_head_t *h) {
  req->route = h->url_long ? ROUTE_NONE : route_of(lp->srv, req, h->url);
  const char *refused = head_refused(h);
  if (refused) {
    lp->n.parse_errors++;
    refuse_head(req, refused);
    return false;
  }
  req->head_only = h->method == HTTP_HEAD;
  req->infer_header_len = -1;
  bool debug = req->route == ROUTE_FAULT || req->route == ROUTE_HANG;
  if (debug && !lp->srv->debug_fault)
    req->route = ROUTE_NONE; /* the debug routes exist only with --debug-fault */
  unsigned status = 0;
  if (req->route == ROUTE_NONE || req->route == ROUTE_V2_NO_MODEL ||
      req->route == ROUTE_V2_UNKNOWN)
    status = 404;
  else
    status = check_method(req, h->method, get_route(req->route));
  if (status == 0 && req->route == ROUTE_INFER && !req->model)
    status = 404; /* a repository's models are KServe's to name */
  else if (status == 0 && req->route == ROUTE_INFER)
    status = infer_body(lp, req, h);
  else if (status == 0 && req->route == ROUTE_V2_INFER)
    status = kserve_head(req, h);
  req->status = status;
  if (status != 413)
    return true;
  route_too_large(lp, req, h->content_length);
  return false;
}

/* Whether a GPU worker can take work now: in process, while the loop serves (the model is
 * loaded before it listens); with --isolate, while every loop's active worker is ready. */
static bool ready(const loop_t *lp) {
  if (lp->stopping)
    return false;
  return lp->backend->ready ? lp->backend->ready(lp->srv) : true;
}

/* --max-queue-size, Triton's queue policy: an inference that would wait behind that many others
 * of its loop for a workspace is answered 503 with Retry-After at once, rather than queued. */
static bool queue_full(loop_t *lp, request_t *req) {
  unsigned max = lp->srv->max_queue_size;
  if (!max || !route_runs_model(req->route) || lp->n.waiting < max)
    return false;
  lp->n.queue_rejected++;
  char message[96];
  snprintf(message, sizeof message, "queue full: %u requests wait for the GPU (--max-queue-size)",
           max);
  if (route_is_v2(req->route))
    kserve_error(req, 503, message);
  else
    respond_error(req, 503, message);
  req->extra_header = "Retry-After: 1\r\n";
  return true;
}

/* A complete request with GPU work: to the loop's backend, whichever it is (backend.h). */
static void start_work(loop_t *lp, request_t *req) {
  if (queue_full(lp, req))
    return;
  if (route_runs_model(req->route))
    lp->n.infer_rows_total += req->batch;
  lp->backend->submit(lp, req);
}

/* A KServe inference: its body becomes rows, then it runs as POST /infer's. */
static void start_v2_infer(loop_t *lp, request_t *req) {
  char why[192];
  req->t_begin = uv_hrtime();
  if (kserve_infer_parse(lp, req, why, sizeof why) != 0) {
    metrics_request_refused(lp, req);
    kserve_error(req, 400, why);
    return;
  }
  req->input_ns = uv_hrtime() - req->t_begin;
  start_work(lp, req);
}

/* ---- the message -------------------------------------------------------------------------- */

void route_message(loop_t *lp, request_t *req) {
  if (!req->status && req->body_max && req->route == ROUTE_INFER)
    req->status = chunked_rows(lp, req);
  if (req->status && route_is_v2(req->route)) {
    kserve_error(req, req->status, kserve_status_message(req->route, req->status));
  } else if (req->status == 404 && req->route == ROUTE_INFER) {
    respond_error(req, 404, "POST /infer runs the seeded MLP, which --model-dir replaces: "
                            "POST /v2/models/{name}/infer runs a repository's model");
  } else if (req->status) {
    respond_error(req, req->status, error_message(req->status));
  } else if (req->route == ROUTE_V2_INFER) {
    start_v2_infer(lp, req);
  } else if (route_is_v2(req->route)) {
    kserve_answer(req, ready(lp));
  } else if (req->route == ROUTE_STATS) {
    size_t len;
    char *text = metrics_render(lp->srv, &len);
    if (text)
      respond_text(req, 200, "text/plain; version=0.0.4; charset=utf-8", text);
    else
      respond_error(req, 503, "out of memory");
  } else {
    req->t_begin = uv_hrtime();
    start_work(lp, req); /* POST /infer, POST /debug/ */
  }
}

void route_gpu_result(request_t *req) {
  if (req->route == ROUTE_V2_INFER) {
    kserve_infer_result(req);
    return;
  }
  if (req->gpu_status == 0) {
    req->status = 200;
    req->content_type = "application/octet-stream";
    req->state = REQ_READY;
    return;
  }
  char message[160];
  if (req->gpu_error) /* --isolate: the front's own words (the worker was lost, ...) */
    snprintf(message, sizeof message, "%s", req->gpu_error);
  else
    snprintf(message, sizeof message, "GPU work failed: %s (%s)", cuv_err_name(req->gpu_status),
             cuv_strerror(req->gpu_status));
  cuv_output_release(&req->out);
  respond_error(req, gpu_failure_status(req->gpu_status), message);
}
