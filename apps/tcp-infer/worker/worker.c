/* tcp-infer --isolate: the worker process (`tcp-infer --worker ...`, started by isolate.c).
 *
 * It loads the model as the server does (server.c's start-up, model_init), then serves request
 * frames from fd 3 (frames.h) with infer.c's dispatch unchanged: each frame becomes a request_t
 * without a connection, submitted to the loop's backend (the mode the front was given: cuv,
 * offload, baseline, coalesce; backend.h), and its completion (its done callback,
 * worker_request_done, set here) writes the reply frame. One loop, one bridge.
 *
 * A sticky device fault (illegal address, trap, ...) kills the CUDA context for the rest of the
 * process: the driver's primary-context reset gives the fault back (the simulator does the same),
 * so cuv has no recovery in process, and this process is the unit of recovery. On the first
 * completion that reports one (cuv_status_is_fault), the worker stops reading, lets every request
 * it holds resolve (cuv resolves each with the fault, none hangs) and write its reply, and exits
 * with WORKER_EXIT_FAULT through _exit: what cuv could not prove complete is leaked on purpose,
 * and the process's end frees it; the front starts a new worker. On EOF (the front shuts down)
 * it finishes its work and exits 0 cleanly. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "backend.h"
#include "frames.h"
#include "mlp_launchers.h"
#include "model.h"
#include "report.h"
#include "server.h"
#include "streams.h"
#include "worker.h"

#define FRAMES_FD 3
#define FAULT_GRACE_MS 10000 /* after a fault: exit even if a request never resolved */
#define REPORT_MS 100 /* how often the front gets the worker's report (GET /metrics' lag) */
/* POST /debug/hang's kernel ends by itself after this long, so that a test machine whose front
 * does not kill the worker (--isolate-timeout 0) is not wedged for ever. */
#define HANG_GUARD_NS 60000000000ull

struct worker_side {
  loop_t *lp;
  uv_pipe_t pipe;
  uv_timer_t grace;
  uv_timer_t report; /* sends the report every REPORT_MS */
  frame_reader_t rd;
  unsigned held;    /* requests taken and not yet answered (reply written) */
  uint64_t replies; /* reply frames handed to the pipe (the report says how many) */
  bool faulted, eof, closed;
};

#ifdef TCP_INFER_WITH_SIM
#include <cuv/sim.h>

/* mlp_fault's host twin: what the GPU reports for its write through a bad pointer. */
static int twin_fault(const cuv_sim_launch_t *launch, void **params) {
  (void)launch;
  (void)params;
  return CUDA_ERROR_ILLEGAL_ADDRESS;
}

/* mlp_hang's host twin: the kernel that spins until its guard, as a sleep of the stream's
 * thread (the front's watchdog kills the process long before, as it would on a GPU). */
static int twin_hang(const cuv_sim_launch_t *launch, void **params) {
  (void)launch;
  unsigned long long guard_ns;
  memcpy(&guard_ns, params[0], sizeof guard_ns);
  struct timespec step = {.tv_nsec = 10000000};
  for (unsigned long long slept = 0; slept < guard_ns; slept += 10000000u)
    nanosleep(&step, NULL);
  return 0;
}

void worker_register_twins(void) {
  static const size_t fault_sizes[1] = {sizeof(unsigned long long)};
  static const size_t hang_sizes[1] = {sizeof(unsigned long long)};
  cuv_sim_register_kernel("mlp_fault", twin_fault, 1, fault_sizes);
  cuv_sim_register_kernel("mlp_hang", twin_hang, 1, hang_sizes);
}
#else
void worker_register_twins(void) {}
#endif

/* ---- ending --------------------------------------------------------------------------------- */

static void on_closed(uv_handle_t *handle) { (void)handle; }

/* Once nothing is held: after a fault, exit now; after EOF, close the handles and the bridge so
 * that uv_run returns and worker_main frees everything. */
static void maybe_finish(struct worker_side *wk) {
  if (wk->held || wk->closed || !(wk->faulted || wk->eof))
    return;
  if (wk->faulted) {
    fflush(stdout);
    fflush(stderr);
    _exit(WORKER_EXIT_FAULT); /* the context is dead: no teardown to trust, the exit frees it */
  }
  wk->closed = true;
  uv_close((uv_handle_t *)&wk->pipe, on_closed);
  uv_close((uv_handle_t *)&wk->grace, on_closed);
  uv_close((uv_handle_t *)&wk->report, on_closed);
  if (wk->lp->bridge)
    cuv_uv_close(wk->lp->bridge, NULL, NULL);
}

static void on_grace(uv_timer_t *timer) {
  struct worker_side *wk = timer->data;
  fprintf(stderr, "tcp-infer worker %d: %u requests still unresolved after the fault; exiting\n",
          (int)getpid(), wk->held);
  fflush(stderr);
  _exit(WORKER_EXIT_FAULT);
}

static void on_control_sent(uv_write_t *w, int status) {
  (void)status;
  free(w);
}

static void enter_fault(struct worker_side *wk, int status) {
  if (wk->faulted)
    return;
  wk->faulted = true;
  uv_read_stop((uv_stream_t *)&wk->pipe); /* nothing new: the front answers what it still sent */
  fprintf(stderr, "tcp-infer worker %d: device fault (%s): answering the %u requests held, then "
          "exiting\n", (int)getpid(), cuv_err_name(status), wk->held);
  uv_timer_start(&wk->grace, on_grace, FAULT_GRACE_MS, 0);
  /* Tell the front now, so that it queues new requests for the next worker, and starts that one
   * while this one drains, rather than sending more here until the exit. */
  static char faulted[FRAME_REPLY_HEAD];
  frame_reply_head(faulted, FRAME_CONTROL_ID, status, 0);
  uv_buf_t buf = uv_buf_init(faulted, FRAME_REPLY_HEAD);
  uv_write_t *w = malloc(sizeof *w);
  if (w && uv_write(w, (uv_stream_t *)&wk->pipe, &buf, 1, on_control_sent) != 0)
    free(w);
}

/* ---- the report --------------------------------------------------------------------------- */

static void on_report_sent(uv_write_t *w, int status) {
  (void)status; /* a lost report: the next one has the same counters, and more */
  free(w);
}

/* cuv_stats() and the loop's model executions, to the front (report.h). */
static void on_report(uv_timer_t *timer) {
  struct worker_side *wk = timer->data;
  const counters_t *n = &wk->lp->n;
  uv_write_t *w = malloc(sizeof *w + FRAME_REPLY_HEAD + FRAME_STATS_BYTES);
  if (!w)
    return;
  char *head = (char *)(w + 1);
  report_words_t *r = (report_words_t *)(void *)(head + FRAME_REPLY_HEAD);
  memset(r, 0, FRAME_STATS_BYTES);
  cuv_stats(&r->r.cuv);
  r->r.execs = n->execs;
  for (unsigned i = 0; i < HIST_BUCKETS; i++)
    r->r.batch_rows[i] = n->exec_rows.buckets[i];
  r->r.batch_rows[HIST_BUCKETS] = n->exec_rows.count;
  r->r.batch_rows[HIST_BUCKETS + 1] = n->exec_rows.sum;
  r->r.batches = n->batches;
  r->r.batched_requests = n->batched_requests;
  r->r.batched_rows = n->batched_rows;
  r->r.replies = wk->replies;
  r->r.stalled_picks = n->stalled_picks;
  r->r.streams_added = n->streams_added;
  r->r.graphs = n->graphs;
  frame_reply_head(head, FRAME_CONTROL_ID, 0, FRAME_ROWS_STATS);
  uv_buf_t buf = uv_buf_init(head, FRAME_REPLY_HEAD + FRAME_STATS_BYTES);
  if (uv_write(w, (uv_stream_t *)&wk->pipe, &buf, 1, on_report_sent) != 0)
    free(w);
}

/* ---- replies ------------------------------------------------------------------------------ */

/* A request from a frame: the request, and the frame's id (the reply's). */
typedef struct worker_req {
  request_t req; /* first: the request is the allocation (request_alloc, freed with free) */
  uint64_t frame_id;
  int stream; /* POST /debug/: the stream its kernel went to (-1: none of the loop's) */
} worker_req_t;

typedef struct reply {
  uv_write_t write;
  char head[FRAME_REPLY_HEAD];
  request_t *req;
} reply_t;

static void request_free(request_t *req) {
  stages_discard(req->stage);
  cuv_output_release(&req->out);
  free(req->body);
  free(req);
}

static void reply_done(struct worker_side *wk, reply_t *r) {
  request_free(r->req);
  free(r);
  wk->held--;
  maybe_finish(wk);
}

static void on_replied(uv_write_t *write, int status) {
  (void)status; /* a write error: the front is gone, and so is the need to answer it */
  reply_done(write->handle->data, write->data);
}

/* One frame back to the front; an outcome without a frame (out of memory) is left to the front,
 * which answers 503 for what the worker never answered once it is gone. */
static void send_reply(struct worker_side *wk, uint64_t id, int status, request_t *req) {
  reply_t *r = malloc(sizeof *r);
  if (!r) {
    request_free(req);
    wk->held--;
    maybe_finish(wk);
    return;
  }
  uint32_t rows = req->route == ROUTE_INFER ? req->batch : 0;
  if (status == 0 && rows && !req->out.data)
    status = CUV_EINVAL; /* no output: never a reply of the wrong size */
  if (req->timed_out)
    status = FRAME_STATUS_TIMEOUT; /* not a failure of the GPU's: the front answers it so */
  frame_reply_head(r->head, id, status, rows);
  r->req = req;
  r->write.data = r;
  uv_buf_t bufs[2] = {uv_buf_init(r->head, FRAME_REPLY_HEAD),
                      uv_buf_init(req->out.data, (unsigned)frame_reply_payload(status, rows))};
  unsigned n = frame_reply_payload(status, rows) ? 2 : 1;
  if (wk->closed || uv_write(&r->write, (uv_stream_t *)&wk->pipe, bufs, n, on_replied) != 0) {
    reply_done(wk, r);
    return;
  }
  wk->replies++;
}

static void worker_request_done(request_t *req) {
  if (!req || !req->lp || !req->lp->wk)
    return;
  struct worker_side *wk = req->lp->wk;
  if (req->route == ROUTE_INFER)
    wk->lp->backend->release(wk->lp, req); /* the next waiting request may start on it */
  if (cuv_status_is_fault(req->gpu_status)) /* the context died: a sticky fault */
    enter_fault(wk, req->gpu_status);
  send_reply(wk, ((worker_req_t *)req)->frame_id, req->gpu_status, req);
}

/* ---- requests ----------------------------------------------------------------------------- */

static void on_debug_done(int status, cuv_output_t *out, void *arg) {
  (void)out;
  request_t *req = arg;
  streams_done(req->lp, ((worker_req_t *)req)->stream);
  req->gpu_status = status;
  worker_request_done(req);
}

/* The debug requests: one thread of one kernel with one 64-bit argument.
 * POST /debug/fault: mlp_fault writes through a bad pointer (the GPU's first page is never
 * mapped), which makes the context's sticky fault. POST /debug/hang: mlp_hang spins until its
 * guard (a kernel that never ends, as far as the front's watchdog can tell). */
static void start_debug(struct worker_side *wk, request_t *req) {
  int *stream = &((worker_req_t *)req)->stream;
  const mlp_module_t *kernels = wk->lp->gpu->kernels;
  cuv_launch_config_t one = cuv_for_num_elems_block(1, 1);
  int rc = CUV_ENOTSUP; /* the worker runs them only when told --debug-fault too */
  if (wk->lp->srv->debug_fault) {
    cuv_op_t *op = req->route == ROUTE_HANG ? mlp_hang_launch(kernels, one, HANG_GUARD_NS)
                                            : mlp_fault_launch(kernels, one, 0x10);
    /* on a stream of the loop's, as a user's kernel would be: a hang stalls that one */
    cuv_submit_opts_t opts = {.stream = streams_take(wk->lp, NULL, stream)};
    rc = cuv_uv_submit(wk->lp->bridge, op, on_debug_done, req, &opts);
    if (rc == 0)
      return;
    streams_done(wk->lp, *stream);
  }
  req->gpu_status = rc;
  worker_request_done(req);
}

static void take_frame(struct worker_side *wk, const frame_t *f) {
  worker_req_t *wr = (worker_req_t *)request_alloc(sizeof *wr, wk->lp->backend->req_size);
  if (!wr)
    return; /* unanswered: the front answers it 503 once this worker is gone */
  request_t *req = &wr->req;
  loop_t *lp = wk->lp;
  req->lp = lp;
  req->done = worker_request_done; /* the reply frame, not a connection's response */
  wr->frame_id = f->id;
  req->state = REQ_RUNNING;
  req->t_begin = uv_hrtime(); /* --max-queue-delay-us counts from here in the worker */
  req->priority = f->priority; /* its KServe schedule, as the front parsed it: the workspace */
  req->deadline = f->deadline; /* queue (pool.c) orders it and answers its timeout */
  wk->held++;
  if (f->rows == FRAME_ROWS_FAULT || f->rows == FRAME_ROWS_HANG) {
    req->route = f->rows == FRAME_ROWS_HANG ? ROUTE_HANG : ROUTE_FAULT;
    start_debug(wk, req);
    return;
  }
  req->route = ROUTE_INFER;
  req->batch = f->rows;
  req->body_len = req->body_cap = f->payload_len;
  req->body = malloc(f->payload_len);
  if (!req->body) {
    req->gpu_status = CUV_ENOMEM;
    worker_request_done(req);
    return;
  }
  memcpy(req->body, f->payload, f->payload_len);
  lp->backend->submit(lp, req); /* now, or once a workspace is free */
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
  struct worker_side *wk = handle->data;
  char *base;
  size_t len;
  (void)suggested;
  if (frame_reader_space(&wk->rd, 64u << 10, &base, &len) != 0)
    *buf = uv_buf_init(NULL, 0);
  else
    *buf = uv_buf_init(base, (unsigned)len);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  struct worker_side *wk = stream->data;
  (void)buf;
  if (nread > 0) {
    frame_reader_fill(&wk->rd, (size_t)nread);
    frame_t f;
    int rc;
    while (!wk->faulted && (rc = frame_next(&wk->rd, &f)) == 1)
      take_frame(wk, &f);
    if (wk->faulted || rc >= 0)
      return;
    fprintf(stderr, "tcp-infer worker %d: malformed frame from the front\n", (int)getpid());
  } else if (nread == 0) {
    return;
  }
  /* EOF (the front shuts down), an error, or a malformed frame: take nothing more, finish */
  uv_read_stop(stream);
  wk->eof = true;
  maybe_finish(wk);
}

/* ---- start-up ----------------------------------------------------------------------------- */

/* --debug-start-hang: a worker stuck in its start-up, for the front's start timeout to find; it
 * goes on after HANG_GUARD_NS, so that a front without that timeout is not wedged for ever. */
static void debug_start_hang(void) {
  fprintf(stderr, "tcp-infer worker %d: hanging before ready (--debug-start-hang)\n",
          (int)getpid());
  struct timespec step = {.tv_nsec = 10000000};
  for (unsigned long long slept = 0; slept < HANG_GUARD_NS; slept += 10000000u)
    nanosleep(&step, NULL);
}

/* The loop, its workspaces and bridge, the frames' pipe; then the ready frame. */
static int setup(struct worker_side *wk) {
  loop_t *lp = wk->lp;
  int rc = lp->backend->init(lp);
  if (rc == 0 && !lp->bridge) /* also in --baseline: the debug kernels go through it */
    rc = cuv_uv_open(&lp->bridge, &lp->loop);
  if (rc != 0)
    return rc;
  if (frame_reader_init(&wk->rd, false, lp->srv->max_batch) != 0)
    return CUV_ENOMEM;
  uv_timer_init(&lp->loop, &wk->grace);
  uv_timer_init(&lp->loop, &wk->report);
  uv_pipe_init(&lp->loop, &wk->pipe, 0);
  wk->grace.data = wk->pipe.data = wk->report.data = wk;
  uv_timer_start(&wk->report, on_report, REPORT_MS, REPORT_MS);
  uv_unref((uv_handle_t *)&wk->report); /* the pipe and the work keep the loop alive, not it */
  if (uv_pipe_open(&wk->pipe, FRAMES_FD) != 0 ||
      uv_read_start((uv_stream_t *)&wk->pipe, on_alloc, on_read) != 0)
    return CUV_EINVAL;
  if (lp->srv->debug_start_hang >= lp->srv->worker_start && lp->srv->worker_start)
    debug_start_hang(); /* --debug-start-hang: stuck before the ready frame */
  static char ready[FRAME_REPLY_HEAD];
  frame_reply_head(ready, FRAME_CONTROL_ID, 0, 0);
  uv_buf_t buf = uv_buf_init(ready, FRAME_REPLY_HEAD);
  return uv_try_write((uv_stream_t *)&wk->pipe, &buf, 1) == FRAME_REPLY_HEAD ? 0 : CUV_EINVAL;
}

int worker_main(server_t *s) {
  if (!s || !s->gpus[0].dev || !s->gpus[0].kernels)
    return EXIT_FAILURE;
  if (uv_guess_handle(FRAMES_FD) != UV_NAMED_PIPE) {
    fprintf(stderr, "tcp-infer: --worker is started by --isolate (frames on fd %d)\n", FRAMES_FD);
    return 2;
  }
  struct worker_side wk = {0};
  loop_t *lp = calloc(1, sizeof *lp);
  if (!lp)
    return EXIT_FAILURE;
  lp->srv = s;
  lp->gpu = &s->gpus[0]; /* the one its front gave it (--worker-device) */
  lp->wk = &wk;
  lp->backend = backend_select(s); /* the front's mode (its options, without --isolate) */
  wk.lp = lp;
  s->loops = lp;
  s->nloops = 1;
  uv_loop_init(&lp->loop);
  int rc = setup(&wk);
  if (rc != 0) {
    fprintf(stderr, "tcp-infer worker: start-up failed: %s\n", cuv_err_name(rc));
    fflush(stderr);
    _exit(EXIT_FAILURE); /* handles half made: the front sees a worker that never got ready */
  }
  uv_run(&lp->loop, UV_RUN_DEFAULT); /* until EOF and every request answered */
  if (lp->backend->close)
    lp->backend->close(lp);
  int status = uv_loop_close(&lp->loop) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
  frame_reader_free(&wk.rd);
  free(lp);
  s->loops = NULL;
  s->nloops = 0;
  model_free(&s->gpus[0]);
  cuv_device_unref(s->gpus[0].dev);
  s->gpus[0].dev = NULL;
  return status;
}
