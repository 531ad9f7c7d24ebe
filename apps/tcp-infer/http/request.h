/* tcp-infer: a request, from its head's arrival to its response's write (one per HTTP request,
 * or per frame in --isolate's worker), and its response (request.c). */
#ifndef TCP_INFER_REQUEST_H
#define TCP_INFER_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include <cuv.h>

typedef struct loop loop_t;
typedef struct conn conn_t;
typedef struct gpu gpu_t;
typedef struct request request_t;
typedef struct workspace workspace_t;
struct model;

typedef enum {
  REQ_PARSING, /* its message is being parsed */
  REQ_WAITING, /* complete, waiting for a workspace */
  REQ_RUNNING, /* its GPU work is in flight */
  REQ_READY,   /* its response is ready, waiting for the requests before it */
  REQ_WRITING, /* its response is being written (owned by the write) */
} req_state_t;

/* FAULT, HANG: --debug-fault's POST /debug/fault and POST /debug/hang. V2_*: KServe v2 (kserve.c):
 * the server's metadata, liveness and readiness, the model's metadata and readiness, inference;
 * NO_MODEL a model or version this server does not serve, UNKNOWN any other path under /v2. */
typedef enum {
  ROUTE_NONE,
  ROUTE_INFER,
  ROUTE_STATS, /* GET /metrics, and its alias GET /stats */
  ROUTE_FAULT,
  ROUTE_HANG,
  ROUTE_V2_SERVER,
  ROUTE_V2_LIVE,
  ROUTE_V2_READY,
  ROUTE_V2_MODEL,
  ROUTE_V2_MODEL_READY,
  ROUTE_V2_INFER,
  ROUTE_V2_NO_MODEL,
  ROUTE_V2_UNKNOWN,
} route_t;

/* Whether the route runs the model on rows (POST /infer, KServe's infer): the debug routes run
 * their own kernels, the rest no GPU work. */
static inline bool route_runs_model(route_t route) {
  return route == ROUTE_INFER || route == ROUTE_V2_INFER;
}

/* Whether the route is KServe's (its errors take the protocol's JSON form). */
static inline bool route_is_v2(route_t route) { return route >= ROUTE_V2_SERVER; }

struct request {
  loop_t *lp;
  /* Its completion (loop thread), set by the layer that made it: conn.c's response, worker.c's
   * reply frame. The layers below it (infer.c, batch.c, isolate.c) call it once the request's
   * work ended (req->gpu_status) instead of calling upward; it may free req. */
  void (*done)(request_t *req);
  conn_t *conn; /* holds a reference */
  request_t *next;      /* the connection's queue, in arrival order */
  request_t *next_wait; /* the loop's queue of requests waiting for a workspace */
  req_state_t state;
  bool orphan;     /* its connection closed while the GPU worked: free it on completion */
  bool keep_alive;
  bool http10;
  bool head_only; /* HEAD: the head of the GET response, no body */
  bool rejected;  /* refused before its work ran (a queue full, the submission refused, its
                   * timeout passed while it waited) */
  bool timed_out; /* waitq.c: its timeout passed while it waited (answered 503 "Request timeout
                   * expired"; --isolate's worker says so in its reply frame) */
  route_t route;
  unsigned status; /* HTTP status of the response */
  char *body;      /* POST /infer: the input batch */
  size_t body_len, body_cap;
  size_t body_max; /* a chunked body: what it may grow to (route.c), 0 otherwise */
  unsigned batch;
  /* KServe's parameters (kserve.c): its priority level, 1 the highest (0: the default, the
   * lowest), and when (uv_hrtime) its timeout passes, if it still waits then (0: none) */
  unsigned priority;
  uint64_t deadline;
  const struct model *model; /* the model it runs or asks about (repo.h), set with its route */
  gpu_t *gpu;         /* the device its GPU work ran on (metrics.c's per-device counts) */
  int gpu_status;     /* the GPU work's result */
  cuv_output_t out;   /* POST /infer: the downloaded outputs */
  char *text;         /* other responses: a malloc'd text body */
  size_t text_len;
  const char *content_type;
  const char *extra_header; /* e.g. "Allow: POST\r\n" */
  long infer_header_len;    /* KServe: the request's Inference-Header-Content-Length (-1: none) */
  size_t reply_json_len;    /* KServe, binary output: the response's JSON part (the header) */
  struct kserve_req *kserve; /* KServe inference: what its response must hold (kserve.c) */
  void *priv; /* the backend's state of it (backend_t.req_size bytes, made with it), or NULL */
  const char *gpu_error; /* a failure's text instead of the cuv error's name (static) */
  /* GET /metrics: when (uv_hrtime) the inference's message was in, its GPU work began, was
   * submitted and ended; and the time its input took to read before (KServe's JSON) */
  uint64_t t_begin, t_start, t_submitted, t_done, input_ns;
  struct stage_times *stage; /* stages.c: a sampled request's stage times, else NULL */
  size_t held; /* conn.c: its body's and answer's bytes, counted in its loop's (flow.c) */
};

/* The HTTP status of a request whose GPU work failed with `gpu_status`: 503 (Unavailable, try
 * again) when it never ran, its queue closed or its timeout passed while it waited (pool.c's
 * CUV_ECANCELED), 500 otherwise. */
static inline unsigned gpu_failure_status(int gpu_status) {
  return gpu_status == CUV_ECLOSED || gpu_status == CUV_ECANCELED ? 503 : 500;
}

/* What conn.c's parser gathered of a request's head (route.c and kserve.c decide from it). */
typedef struct http_head {
  uint8_t method;         /* llhttp_method_t */
  const char *url;        /* NUL-terminated, query included */
  bool url_long;          /* longer than conn.c keeps: no route has such a path */
  bool has_length, chunked;
  uint64_t content_length;
  long x_in_dim, x_batch; /* -1: not sent; -2: not a non-negative number */
  long infer_header_len;  /* Inference-Header-Content-Length, the same way */
  uint8_t http_major, http_minor;
  unsigned hosts;   /* Host header lines (RFC 9112 3.2: one, and in HTTP/1.1 at least one) */
  bool field_space; /* a field name followed by whitespace before its colon (RFC 9112 5.1) */
} http_head_t;

/* A zeroed request with room after it for the backend's state (req->priv: priv bytes, NULL when
 * 0): `size` is sizeof(request_t), or the size of the maker's own struct that begins with one
 * (worker.c). One allocation, freed with free(req); NULL when out of memory. */
request_t *request_alloc(size_t size, size_t priv);
/* conn.c's requests (sizeof(request_t) and the loop's backend's req_size), loop thread: a zeroed
 * one from the loop's free list, else request_alloc's; NULL when out of memory (or lp NULL). */
request_t *request_take(loop_t *lp);
/* Back to the loop's free list, what it held released already (freed when the list holds
 * REQUEST_CACHE_MAX or the loop stops); NULL: nothing. */
void request_give(loop_t *lp, request_t *req);
/* The loop's closing: its free list freed. */
void requests_free(loop_t *lp);
/* A text response, ready for its turn: `text` is malloc'd (owned by req from now on) or NULL. */
void respond_text(request_t *req, unsigned status, const char *content_type, char *text);
/* An error response: one line of text/plain (the message and a newline). */
void respond_error(request_t *req, unsigned status, const char *message);

#endif
