/* tcp-infer: the server's parts (README.md describes the protocol).
 *
 *   server.c   options, start-up, the loops (one thread each), shutdown
 *   conn.c     connections: HTTP/1.1 parsing (llhttp), requests answered in order
 *   limits.c   a loop's connection timeouts (slow heads, slow bodies, idle keep-alive)
 *   route.c    what a request asks for (route, method, headers), its answer or its start
 *   kserve.c   the KServe v2 protocol: its paths, metadata, JSON and binary inference requests
 *              and responses (json.c: the JSON reader and writer)
 *   bodies.c   request bodies, from free lists of their loop by size class
 *   infer.c    request dispatch: each complete POST /infer runs as one cuv submission (or the
 *              baseline: the same work in libuv's thread pool with a blocking cuv_sync)
 *   batch.c    --coalesce: the requests a loop iteration completed run as one GPU submission
 *   pool.c     a loop's workspaces and the FIFO of requests waiting for one
 *   streams.c  a loop's streams: each submission on the least loaded one whose work progresses
 *              (stall.c: the choice)
 *   model.c    the model on the GPU: kernels, weights, workspaces' buffers, the op over N rows
 *              (cublas.c: its --cublas layers)
 *   metrics.c  GET /metrics (and /stats): cuv_stats(), Triton's model metrics, histograms and the
 *              server's counters, Prometheus text format (histogram.c: the histograms)
 *   isolate.c  --isolate, the front: each loop's GPU work runs in a worker process it supervises
 *              (a spare beside it, a hang watchdog); isolate-metrics.c: its GET /stats metrics
 *   worker.c   --isolate, the worker process: frames from the front through infer.c's pipeline
 *   frames.c   --isolate: the frames between them (frames.h)
 *
 * Dispatch calls downward only, in this order: conn.c, route.c, infer.c, batch.c, pool.c,
 * model.c, cublas.c (a file calls only files after it). Completions go up to the connection
 * through request_gpu_done.
 *
 * Each connection belongs to one loop and everything about it runs on that loop's thread, except
 * infer.c's baseline work function (a thread-pool worker: it touches only its request's GPU work).
 * A device's loops share its kernels and weights (gpu_t), read-only while serving; --balance
 * steal lets a loop run work on another device's workspaces of its own (pool.c). */
#ifndef TCP_INFER_SERVER_H
#define TCP_INFER_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <llhttp.h>
#include <uv.h>

#include <cuv.h>
#include <cuv/uv.h>

#include "histogram.h"
#include "mlp.h"
#include "stages.h"

typedef struct server server_t;
typedef struct gpu gpu_t;
union report_words; /* report.h: a worker's report */
typedef struct loop loop_t;
typedef struct conn conn_t;

#define MAX_DEVICES 16 /* --devices at most */
#define BODY_CLASSES 9 /* conn.c's size classes of request bodies: 256 B << 0..8 */
typedef struct request request_t;
typedef struct workspace workspace_t;

#define GRAPH_BUCKETS 17 /* --graph: a workspace's graphs, for 1, 2, 4 .. 65536 rows */

/* Device memory for one request in flight, sized for the largest batch; reused once the
 * request's GPU work completed. With --coalesce or --graph, pinned host memory for its input
 * (host_in, uploaded in one DMA); with --graph, for its output too (host_out) and the graphs of
 * its whole op, one per bucket of rows, captured on first use (model_graph_op). */
struct workspace {
  gpu_t *gpu; /* the device its buffers are on */
  cuv_buffer_t *in, *hidden, *out;
  cuv_host_buffer_t *host_in, *host_out;
  unsigned rows; /* what it holds */
  cuv_graph_t *graphs[GRAPH_BUCKETS];
  workspace_t *next;
};

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
  conn_t *conn; /* holds a reference */
  request_t *next;      /* the connection's queue, in arrival order */
  request_t *next_wait; /* the loop's queue of requests waiting for a workspace */
  req_state_t state;
  bool orphan;     /* its connection closed while the GPU worked: free it on completion */
  bool keep_alive;
  bool http10;
  bool head_only; /* HEAD: the head of the GET response, no body */
  route_t route;
  unsigned status; /* HTTP status of the response */
  char *body;      /* POST /infer: the input batch */
  size_t body_len, body_cap;
  unsigned batch;
  workspace_t *ws;
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
  uv_work_t work;     /* --baseline */
  uint64_t iso_id;    /* --isolate: its frame id at the worker process */
  uint64_t iso_sent_ns; /* --isolate: when it went to the worker (the hang watchdog) */
  unsigned iso_attempts; /* --isolate: workers it was sent to (a replay is the second) */
  int stream; /* streams.c: the stream its GPU work went to (-1: none of the loop's) */
  const char *gpu_error; /* a failure's text instead of the cuv error's name (static) */
  /* GET /metrics: when (uv_hrtime) the inference's message was in, its GPU work began, was
   * submitted and ended; and the time its input took to read before (KServe's JSON) */
  uint64_t t_begin, t_start, t_submitted, t_done, input_ns;
  struct stage_times *stage; /* stages.c: a sampled request's stage times, else NULL */
};

/* Each loop's own counters: written by its thread, summed by GET /stats on any loop. */
typedef struct counters {
  _Atomic uint64_t connections_total;
  _Atomic uint64_t requests_total;
  _Atomic uint64_t responses_by_status[6]; /* 1xx .. 5xx at [1..5] */
  _Atomic uint64_t infer_rows_total;
  _Atomic uint64_t gpu_submitted, gpu_completed, gpu_failed;
  _Atomic uint64_t responses_dropped; /* the connection went away before its response was written */
  _Atomic uint64_t truncated;         /* connections closed in the middle of a request */
  _Atomic uint64_t parse_errors;
  _Atomic uint64_t refused;           /* the submission was refused (503) */
  /* --coalesce: batches submitted, the requests and rows in them, batches by log2(rows) */
  _Atomic uint64_t batches, batched_requests, batched_rows, batches_by_log2[17];
  _Atomic uint64_t batch_triggers[4]; /* by what made them leave (batch.c) */
  _Atomic unsigned batch_pending; /* gauge: requests in the pending batch */
  _Atomic unsigned open_conns, free_workspaces, waiting; /* gauges */
  _Atomic unsigned graphs; /* gauge, --graph: graphs captured and alive */
  /* GET /metrics, Triton's model metrics: inferences answered from GPU work that gave outputs
   * (success) or not, their rows; model executions (a request, or a batch) and their rows; the
   * inferences' durations summed in microseconds (metrics.c says what each covers) */
  _Atomic uint64_t infer_success, infer_failure, infer_rows_done, execs;
  _Atomic uint64_t request_us, queue_us, input_us, infer_us, output_us;
  /* streams.c: submissions that found a stream stalled (and went to another), streams added */
  _Atomic uint64_t stalled_picks, streams_added;
  /* conn.c, limits.c: connections refused (over --max-connections), accepts that failed (out of
   * descriptors), requests timed out in their head or body, idle connections closed */
  _Atomic uint64_t connections_refused, accept_errors, timeouts_head, timeouts_body, timeouts_idle;
  histogram_t latency, exec_rows;
} counters_t;

/* One event loop on its own thread (--loops): its listener (SO_REUSEPORT spreads connections over
 * the loops), its bridge, its connections and its workspaces. */
struct loop {
  server_t *srv;
  gpu_t *gpu; /* its device: its streams, its own workspaces; --isolate: its workers' */
  unsigned index;
  uv_loop_t loop;
  uv_thread_t thread;
  uv_tcp_t listener;
  int listen_fd;
  uv_async_t stop;
  cuv_uv_t *bridge; /* NULL in --baseline */
  struct stage_log *stages; /* stages.c: its sampled stage times (--stage-sample) */
  /* its workspaces, its device's first; --balance steal: as many on every other device after
   * them (pool.c), each device's free ones on their own list */
  workspace_t *workspaces, *free_ws[MAX_DEVICES];
  request_t *wait_head, *wait_tail;
  conn_t *conns; /* open connections, for shutdown */
  struct isolate *iso;     /* --isolate (the front): this loop's worker process; else NULL */
  struct worker_side *wk;  /* in the worker process: requests come from the front, not conns */
  struct batcher *batcher; /* --coalesce: the pending batch, the batches in flight; else NULL */
  struct streams *streams; /* streams.c: the loop's streams (none in --baseline) */
  cuv_stream_t *capture[MAX_DEVICES]; /* --graph: the loop's own streams for captures, one per
                                       * device it uses (model_graph_op) */
  bool stopping;
  int setup_status;
  counters_t n;
  llhttp_settings_t settings;
  char date[32]; /* conn.c: the Date header's value, made once per second */
  int64_t date_sec;
  /* conn.c: connections whose responses are flushed at the loop's check (one write each per
   * iteration), and the request bodies kept for reuse (free lists by size class) */
  uv_check_t flush_check;
  uv_idle_t flush_idle;
  uv_timer_t limits; /* limits.c: the sweep over the connections' timeouts */
  conn_t *dirty;
  char *body_cache[BODY_CLASSES];
  unsigned body_cached[BODY_CLASSES];
  char read_buf[65536]; /* the loop reads one connection at a time */
};

/* One device and its copy of the model, shared by its loops (read-only once serving), and its
 * counters (GET /metrics, label device="N"), written by any loop. */
struct gpu {
  server_t *srv;
  unsigned index;   /* in srv->gpus */
  int ordinal;      /* the CUDA device (a worker's is the one its front gave it) */
  cuv_device_t *dev; /* NULL in --isolate's front: its workers open it */
  struct mlp_module *kernels; /* mlp.cu's, loaded by model.c (generated mlp_launchers.h) */
  cuv_kernel_t *bias_act;     /* kernels->mlp_bias_act (borrowed): the --cublas epilogue */
  cuv_buffer_t *w1, *b1, *w2, *b2;
  void *cublas_ctx; /* cublas.c's state when --cublas found the library */
  _Atomic unsigned busy; /* its workspaces in use, by every loop (pool.c: --balance steal) */
  /* inferences answered from its GPU work and their rows; executions it ran for another
   * device's loops (stolen); connections its loops accepted (the kernel's hash) */
  _Atomic uint64_t requests, rows, stolen, connections;
};

/* --balance: how work spreads over the devices (README: Several GPUs) */
typedef enum { BALANCE_HASH, BALANCE_STEAL } balance_t;

/* What every loop shares, read-only once serving. */
struct server {
  gpu_t gpus[MAX_DEVICES];
  unsigned ndevices, loops_per_device; /* loop i serves gpus[i / loops_per_device] */
  balance_t balance;
  unsigned max_batch, workspaces_per_loop, nloops;
  bool baseline, offload;
  bool graph; /* --graph: each workspace replays captured graphs of its op */
  unsigned coalesce; /* --coalesce: rows per batch (each workspace's size); 0: off */
  unsigned queue_delay_us; /* --max-queue-delay-us: a batch waits this long at most; 0: one loop
                            * iteration */
  unsigned preferred[8], npreferred; /* --preferred-batch: rows a batch leaves at, ascending */
  unsigned nstreams;        /* --streams: each loop's streams (streams.c) */
  unsigned stream_stall_ms; /* --stream-stall-ms: a stream without progress this long is avoided */
  unsigned stage_sample;    /* --stage-sample: one request in this many is timed (stages.c) */
  loop_t *loops;
  uv_sem_t ready; /* each loop posts once it listens (or failed to) */
  /* Every loop's set-up done before any serves: a loop reads the others' state (/metrics adds
   * their isolated workers' reports), which their set-up writes. */
  uv_barrier_t set_up;
  /* --isolate: the front opens no device; each loop spawns `argv[0] --worker argv[1..]` */
  bool isolate, debug_fault;
  unsigned isolate_queue; /* requests that may wait for a worker; more: 503 */
  unsigned isolate_spares; /* ready workers kept idle per loop, promoted when the active fails */
  unsigned isolate_timeout_ms; /* a request unanswered this long: its worker is killed; 0: off */
  unsigned isolate_start_timeout_ms; /* a worker not ready this long after its start: killed */
  unsigned debug_start_hang, worker_start; /* --debug-start-hang; the worker's --worker-start */
  int argc;
  char **argv;
  /* the limits of a server on a network (conn.c, limits.c) */
  _Atomic unsigned connections; /* open now, over every loop */
  unsigned max_connections, max_header_bytes;
  unsigned header_timeout_ms, body_timeout_ms, idle_timeout_ms; /* 0: none */
};

/* conn.c */
void conn_settings_init(llhttp_settings_t *settings);
void conn_on_connection(uv_stream_t *listener, int status);
/* Serves a connected stream socket accepted elsewhere (fuzz/http.c: one end of a socketpair); the
 * loop owns and closes it once this returns 0. */
int conn_open(loop_t *lp, uv_os_sock_t sock);
void conn_close_all(loop_t *lp);
/* Shutdown: closes the connections and the loop's own handles of conn.c, frees its caches. */
void conn_loop_close(loop_t *lp);
/* A request's GPU work completed (loop thread): respond, or free it if its connection is gone. */
void request_gpu_done(request_t *req);
/* For limits.c: the loop's connections, and where each is: closing (a clock of its own), idle
 * (since its last read or write), in a request's head or body (since it began), or owed answers
 * (the GPU work's own limits apply). */
typedef enum { CONN_CLOSING, CONN_IDLE, CONN_HEAD, CONN_BODY, CONN_BUSY } conn_stage_t;
conn_t *conn_first(loop_t *lp);
conn_t *conn_next(const conn_t *c);
conn_stage_t conn_stage(const conn_t *c, uint64_t *since_ms);
/* Its time is up: a request in its head or body is answered 408 and the connection closes after
 * the answers owed before it; an idle one closes. */
void conn_expire(conn_t *c);

/* limits.c (loop thread): the sweep over the connections' timeouts, started with the loop. */
void limits_start(loop_t *lp);
void limits_stop(loop_t *lp);

/* route.c: a request's route and answer, decided by its head and started once complete (loop
 * thread). What conn.c's parser gathered of a request's head: */
typedef struct http_head {
  uint8_t method;         /* llhttp_method_t */
  const char *url;        /* NUL-terminated, query included */
  bool url_long;          /* longer than conn.c keeps: no route has such a path */
  bool has_length, chunked;
  uint64_t content_length;
  long x_in_dim, x_batch; /* -1: not sent; -2: not a non-negative number */
  long infer_header_len;  /* Inference-Header-Content-Length, the same way */
} http_head_t;
/* Sets req's route and either its error status or the body it needs (req->body_cap bytes, 0:
 * none; conn.c allocates it); false when the request must be answered before its body is read,
 * and the connection then closed (413). */
bool route_head(loop_t *lp, request_t *req, const http_head_t *head);
/* The whole message is in: req is answered now (REQ_READY) or its work starts. */
void route_message(loop_t *lp, request_t *req);
/* Its GPU work ended (req->gpu_status): its response, 200 with the outputs or the error. */
void route_gpu_result(request_t *req);
/* A text response, ready for its turn: `text` is malloc'd (owned by req from now on) or NULL. */
void respond_text(request_t *req, unsigned status, const char *content_type, char *text);
/* An error response: one line of text/plain (the message and a newline). */
void respond_error(request_t *req, unsigned status, const char *message);
/* An HTTP status's reason phrase. */
const char *status_reason(unsigned status);

/* kserve.c: the KServe v2 protocol (loop thread). */
/* The route of a path (without its query) under /v2; ROUTE_NONE when it is not under /v2. */
route_t kserve_route_of(const char *path, size_t len);
/* The largest inference request body taken (JSON spells each float in many bytes). */
size_t kserve_body_max(const server_t *s);
/* An inference request's head: 0 and its body's size (req->body_cap), or an error status. */
unsigned kserve_head(const server_t *s, request_t *req, const http_head_t *head);
/* Its whole body is in: its rows replace the body (req->body, req->batch), 0; or -1 and why. */
int kserve_infer_parse(loop_t *lp, request_t *req, char *why, size_t why_len);
/* Answers a route that runs nothing (metadata, health); ready: whether a GPU worker can take
 * work now. */
void kserve_answer(request_t *req, bool ready);
/* The inference's response from its GPU work's end: the outputs in JSON or binary, or the error. */
void kserve_infer_result(request_t *req);
/* The protocol's error form, {"error": message}, with that status. */
void kserve_error(request_t *req, unsigned status, const char *message);
/* The message of an error status decided from the head. */
const char *kserve_status_message(route_t route, unsigned status);
void kserve_req_free(struct kserve_req *ks);

/* bodies.c: request bodies from the loop's free lists (loop thread). */
char *body_alloc(loop_t *lp, size_t bytes);
void body_free(loop_t *lp, char *body, size_t cap);
void bodies_free(loop_t *lp); /* shutdown: frees the lists */

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

/* pool.c: a loop's workspaces and the FIFO of requests waiting for one (loop thread). */
int pool_init(loop_t *lp); /* sized for --max-batch rows, or --coalesce's */
/* Its workspaces: --workspaces, on each device it uses (--balance steal: every device). */
unsigned pool_size(const loop_t *lp);
void pool_free(loop_t *lp);
/* A free workspace, of its own device or (--balance steal) a less busy one's; NULL: none. */
workspace_t *pool_take(loop_t *lp);
void pool_put(loop_t *lp, workspace_t *ws);
/* Queues req (REQ_WAITING) at the end of the FIFO. */
void pool_wait(loop_t *lp, request_t *req);
/* The oldest waiting request, left in the FIFO (first) or taken out of it (next); NULL: none. */
request_t *pool_first_waiting(const loop_t *lp);
request_t *pool_next_waiting(loop_t *lp);
/* Takes req out of the FIFO; false when it was not there. */
bool pool_forget(loop_t *lp, request_t *req);

/* model.c: the model on the GPU. */
/* The kernels (from the PTX file ptx, or NULL: the PTX embedded in the program) and the weights
 * (uploaded once). */
int model_init(gpu_t *g, const char *ptx, uint64_t seed);
void model_free(gpu_t *g);
/* A workspace's buffers for `rows` rows on g; model_workspace_free frees what was made. */
int model_workspace_init(gpu_t *g, workspace_t *ws, size_t rows);
void model_workspace_free(workspace_t *ws);
/* The GPU work of `rows` rows of input through ws (on ws's device), as one op whose output is
 * the rows x MLP_OUT outputs: `upload` (which fills ws->in with the rows x MLP_IN input floats),
 * the layers, the download. */
cuv_op_t *model_rows_op(workspace_t *ws, cuv_op_t *upload, unsigned rows);
/* --graph: the op that replays ws's graph for `rows` rows (captured now on first use, on the
 * loop's capture stream of ws's device: a stream that other work shares may see an enqueue, or a
 * query of the reactor's, while it captures, which fails that call and invalidates the
 * capture): the upload of the first rows x MLP_IN floats of ws->host_in, the layers, the download
 * into ws->host_out, whose first rows x MLP_OUT floats are the outputs once the replay
 * completed. The graph covers the bucket of rows (the next power of two, at most ws->rows): the
 * rows beyond `rows` hold what an earlier request left there, and since the model is row-wise
 * they change no row of this one. Its output is unit. A capture that fails gives an op that
 * fails with its status. */
cuv_op_t *model_graph_op(loop_t *lp, workspace_t *ws, unsigned rows);
/* Registers the kernels' host twins with libcuv-sim (when linked); delay_us > 0 makes each
 * launch last at least that long on the simulator (a stand-in for a GPU's latency). */
void model_register_twins(unsigned delay_us);

/* cublas.c: --cublas. Loads libcublas at run time (never linked) and, when it loads, runs the
 * layers as cublasSgemm inside cuv_with_context; returns 0, or non-zero when it is unavailable
 * (the server then silently keeps its own kernel). */
int model_cublas_open(gpu_t *g);
void model_cublas_close(gpu_t *g);
/* The two layers for `rows` rows of ws->in into ws->out, as one op. */
cuv_op_t *model_cublas_layers(gpu_t *g, workspace_t *ws, unsigned rows);

/* isolate.c (the front, --isolate; loop thread unless said). */
int isolate_open(loop_t *lp);   /* spawns the loop's worker (on the loop's thread) */
void isolate_stop(loop_t *lp);  /* shutdown: the worker finishes its work and exits */
/* After the loop ended: -1 when its worker did not end cleanly (status 0) at shutdown. */
int isolate_free(loop_t *lp);
/* Takes a complete POST /infer or POST /debug/fault: to the worker, or queued until one is
 * ready, or answered 503 (queue full). */
void isolate_start(loop_t *lp, request_t *req);
/* A queued request (REQ_WAITING) whose connection closed leaves the queue. */
void isolate_forget(loop_t *lp, request_t *req);
/* GET /stats (any thread): the worker metrics, summed over the loops. */
void isolate_metrics(const server_t *s, FILE *f);
/* Any thread: whether every loop's active worker is ready (KServe's readiness). */
bool isolate_ready(const server_t *s);
/* Any thread: the workers' reports, summed over the loops (the live workers' latest and the
 * ended ones' last; report.h), into *words; false without --isolate. */
bool isolate_report(const server_t *s, union report_words *words);

/* worker.c (the worker process, --worker): serves frames on fd 3 with the loaded model; returns
 * the process's exit status. */
int worker_main(server_t *s);
/* The host twins of the debug kernels (mlp_fault, mlp_hang) for libcuv-sim, registered before the
 * model's module is loaded: it loads every kernel of mlp.cu. */
void worker_register_twins(void);
/* request_gpu_done for the worker's requests: the reply frame goes back to the front. */
void worker_request_done(request_t *req);
/* batch.c (--coalesce; loop thread). */
int batch_loop_init(loop_t *lp); /* after the workspaces, on the loop's thread */
void batch_loop_free(loop_t *lp); /* after the loop ran dry (closes its handles) */
/* Takes a complete POST /infer into the pending batch (or the wait queue when that is full). */
void batch_add(loop_t *lp, request_t *req);
/* Removes a request from the pending batch; false when it was not there. */
bool batch_forget(loop_t *lp, request_t *req);
/* GET /stats (any thread): the batch counters, summed over the loops. */
void batch_metrics(const server_t *s, FILE *f);

/* streams.c: a loop's streams (loop thread). */
int streams_init(loop_t *lp); /* streams_free frees what was made */
void streams_free(loop_t *lp);
/* The stream for the next submission through ws (counted on it until streams_done) and its
 * index in *idx; NULL and -1 when the loop has none, or ws is on another device than the loop's
 * (stolen work: that device's default policy picks). */
cuv_stream_t *streams_take(loop_t *lp, const workspace_t *ws, int *idx);
/* The submission on stream idx completed, or was refused (idx -1: nothing to do). */
void streams_done(loop_t *lp, int idx);

/* metrics.c: the /metrics body (malloc'd), summed over every loop. */
char *metrics_render(const server_t *s, size_t *len);
/* An inference's response is ready (or it was dropped): its outcome and durations (loop thread). */
void metrics_request_done(loop_t *lp, const request_t *req);
/* A model execution of `rows` rows started: a request, or a batch (loop thread). */
void metrics_exec(loop_t *lp, unsigned rows);

#endif
