/* tcp-infer: the state the server's parts share: the server, its devices (gpu_t), its loops
 * (loop_t) and their workspaces. It declares no function: each part's functions are in its own
 * header (http/conn.h declares conn.c's, and so on; scripts/check-layers holds the rule, test
 * layers-tcp-infer), and a request is http/request.h's. README.md describes the protocol and the
 * layout, docs/design.md draws the layers.
 *
 * Calls go one way, from the top (a file calls only files below it):
 *   server.c                    options, start-up, the loops (one thread each), shutdown
 *   http/timeouts.c             a loop's connection timeouts (slow heads and bodies, idle)
 *   http/accept.c               a loop's accepts; connections refused when descriptors run out
 *   http/conn.c                 connections: HTTP/1.1 parsing (llhttp), requests answered in order
 *   api/route.c                 what a request asks for, its answer or its start
 *   api/metrics.c, kserve.c     GET /metrics (and /stats); the KServe v2 protocol (kserve_json.c)
 *   backends/                   how a loop runs its requests' GPU work (backend.h), one backend
 *                               per mode: isolate.c (worker/worker.c runs one of the others in
 *                               each worker process), batch.c (coalesce), infer.c (cuv, offload,
 *                               baseline)
 *   gpu/                        workspaces (pool.c), streams (streams.c, stall.c), the model
 *                               (model.c, cublas.c); NVML's readings (nvml.c, for metrics.c)
 *   http/request.c, bodies.c, api/stages.c   a request's response; bodies; stage times
 * A request's answer never calls upward: the layer that made the request (conn.c, or worker.c in
 * the worker process) sets its completion callback (request_t.done), and the backend that ran its
 * work calls that.
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

#include "counters.h"
#include "histogram.h"
#include "mlp.h"
#include "repo.h"
#include "request.h"
#include "stages.h"
#include "waitq.h"

typedef struct server server_t;
typedef struct gpu gpu_t;
union report_words; /* report.h: a worker's report */
typedef struct loop loop_t;
typedef struct conn conn_t;

#define MAX_DEVICES 16 /* --devices at most */
#define BODY_CLASSES 9 /* conn.c's size classes of request bodies: 256 B << 0..8 */
#define RESPONSE_HEAD_MAX 512 /* conn.c: a response's status line and headers, at most */
#define REQUEST_CACHE_MAX 512 /* requests a loop keeps for reuse (request.c), about 250 KiB */
typedef struct request request_t;
typedef struct workspace workspace_t;

/* conn.c: the last response head a loop serialized and what it was made of (the request's
 * fields that put_head reads, the body's length, the Date's second): the next response alike,
 * under load every POST /infer of one batch size, copies it. */
typedef struct head_cache {
  size_t len; /* 0: none yet */
  unsigned status, route, batch;
  bool keep_alive, http10;
  const char *content_type, *extra_header; /* static strings: the same pointer, the same text */
  size_t body_len, reply_json_len;
  int64_t date_sec;
  char bytes[RESPONSE_HEAD_MAX];
} head_cache_t;

#define GRAPH_BUCKETS 17 /* --graph: a workspace's graphs, for 1, 2, 4 .. 65536 rows */

/* Device memory for one request in flight, sized for the largest batch; reused once the
 * request's GPU work completed. With --coalesce or --graph, pinned host memory for its input
 * (host_in, uploaded in one DMA); with --graph, for its output too (host_out) and the graphs of
 * its whole op, one per bucket of rows, captured on first use (model_graph_op). */
struct workspace {
  gpu_t *gpu; /* the device its buffers are on */
  cuv_buffer_t *in, *hidden, *out;
  cuv_buffer_t *hidden2; /* a model of three layers or more: the inner layers take turns */
  cuv_host_buffer_t *host_in, *host_out;
  unsigned rows; /* what it holds */
  cuv_graph_t *graphs[GRAPH_BUCKETS];
  workspace_t *next;
};


/* One event loop on its own thread (--loops): its listener (SO_REUSEPORT spreads connections over
 * the loops), its bridge, its connections and its workspaces. */
struct loop {
  server_t *srv;
  gpu_t *gpu; /* its device: its streams, its own workspaces; --isolate: its workers' */
  unsigned index;
  uv_loop_t loop;
  uv_thread_t thread;
  uv_poll_t listener; /* accept.c: the listening socket, accepted from on the loop */
  int listen_fd, reserve_fd; /* reserve_fd: accept.c's spare, for when descriptors run out */
  uv_async_t stop;
  cuv_uv_t *bridge; /* NULL in --baseline */
  struct stage_log *stages; /* stages.c: its sampled stage times (--stage-sample) */
  /* its workspaces, its device's first; --balance steal: as many on every other device after
   * them (pool.c), each device's free ones on their own list */
  workspace_t *workspaces, *free_ws[MAX_DEVICES];
  waitq_t wait; /* pool.c: the requests waiting for a workspace (waitq.h) */
  conn_t *conns; /* open connections, for shutdown */
  struct worker_side *wk;  /* in the worker process: requests come from the front, not conns */
  /* its backend (backend.h: how its requests' GPU work runs), chosen once at start, and the
   * backend's state of the loop (isolate.c's worker process, batch.c's batches, ...) */
  const struct backend *backend;
  void *backend_state;
  struct streams *streams; /* streams.c: the loop's streams (none in --baseline) */
  cuv_stream_t *capture[MAX_DEVICES]; /* --graph: the loop's own streams for captures, one per
                                       * device it uses (model_graph_op) */
  bool stopping;
  int setup_status;
  counters_t n;
  llhttp_settings_t settings;
  char date[32]; /* conn.c: the Date header's value, made once per second */
  int64_t date_sec;
  head_cache_t last_head;
  /* conn.c: connections whose responses are flushed at the loop's check (one write each per
   * iteration), and the request bodies kept for reuse (free lists by size class) */
  uv_check_t flush_check;
  uv_idle_t flush_idle;
  uv_timer_t limits; /* timeouts.c: the sweep over the connections' timeouts */
  conn_t *dirty;
  /* flow.c: the loop's cap paused connections; conn.c: resume them at the next check */
  bool cap_paused, resume_all;
  char *body_cache[BODY_CLASSES];
  unsigned body_cached[BODY_CLASSES];
  request_t *req_cache; /* request.c: conn.c's requests kept for reuse (REQUEST_CACHE_MAX) */
  unsigned req_cached;
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
  cuv_buffer_t *w1, *b1, *w2, *b2; /* the seeded MLP's layers (--cublas's gemms) */
  struct model_buffers *models;     /* model.c: each ready model's weights, by model_t.index */
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
  /* the models served (repo.c): the repository's (--model-dir) or the seeded MLP; the
   * workspaces are sized for the largest (bounds) */
  model_t *models;
  unsigned nmodels;
  bool repository;
  repo_bounds_t bounds;
  unsigned ndevices, loops_per_device; /* loop i serves gpus[i / loops_per_device] */
  balance_t balance;
  unsigned max_batch, workspaces_per_loop, nloops;
  bool baseline, offload;
  bool graph; /* graphs (options.c: the default in process, --graph, --no-graph): each workspace
               * replays captured graphs of its op */
  unsigned coalesce; /* --coalesce: rows per batch (each workspace's size); 0: off */
  unsigned queue_delay_us; /* --max-queue-delay-us: a batch waits this long at most; 0: one loop
                            * iteration */
  unsigned preferred[8], npreferred; /* --preferred-batch: rows a batch leaves at, ascending */
  /* What the mode asks of the workspaces and reports, decided once at start (server.c) so that
   * gpu/ and api/ test no mode: each workspace's rows, whether it keeps pinned host staging for
   * its input (batches, graphs) and its output (graphs), how many the front itself holds (none
   * with --isolate: the workers do), and the mode's name in /metrics */
  unsigned workspace_rows;
  bool staged_input, staged_output;
  unsigned front_workspaces;
  const char *mode_name;
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
  unsigned isolate_deadline_ms; /* an inference is retried on the next worker until this old */
  unsigned hang_suspect_ms; /* an inference unanswered this long moves to another worker; 0: off */
  unsigned stall_suspect_ms; /* a worker answering none of its requests this long: all move */
  unsigned debug_start_hang, worker_start; /* --debug-start-hang; the worker's --worker-start */
  int argc;
  char **argv;
  /* the limits of a server on a network (conn.c, timeouts.c) */
  _Atomic unsigned connections; /* open now, over every loop */
  unsigned max_connections, max_header_bytes;
  unsigned header_timeout_ms, body_timeout_ms, idle_timeout_ms; /* 0: none */
  /* flow.c: a connection's requests queued and bytes unsent before it is not read; the bytes
   * held over every connection (each loop its share) */
  unsigned max_conn_requests;
  size_t max_conn_unsent, max_buffered;
  unsigned max_queue_size; /* route.c: inferences waiting for a workspace, per loop; 0: any */
  unsigned priority_levels; /* kserve.c, pool.c: request priorities 1 (first) to N (default) */
  struct nvml *nvml; /* nvml.c: the GPUs' own metrics for GET /metrics; NULL: absent */
};

#endif
