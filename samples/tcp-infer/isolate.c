/* tcp-infer --isolate: the front's side. Each loop runs its GPU work in a worker process of its
 * own (this executable with --worker, worker.c), so that a sticky device fault, which kills the
 * CUDA context for the rest of the process's life (a context reset does not clear it on the real
 * driver, nor on the simulator), costs one worker and not the server: the front keeps every
 * connection, answers what the dead worker held, and starts a new one.
 *
 * The front never opens the device. A request is a frame to the worker (frames.h) and stays on
 * the worker's outstanding list (in send order, linked by next_wait) until its reply frame comes
 * back, or until the worker is gone (its pipe at EOF and its exit seen: every reply it wrote has
 * been read by then), when each outstanding request is answered 503 with Retry-After. Requests
 * that arrive while no worker is ready wait in a bounded queue (--isolate-queue; beyond it 503),
 * sent in order once the new worker's ready frame arrives. A worker that dies before it was
 * ready takes the queue with it (503s, not an unbounded wait) and the next one starts after a
 * back-off, so a worker that cannot start does not spin. Everything runs on the loop's thread;
 * the counters are atomics for GET /stats on any loop. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frames.h"
#include "server.h"

#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 2000
#define STOP_GRACE_MS 5000 /* at shutdown, a worker still running after this is killed */
#define RETRY_AFTER "Retry-After: 1\r\n"

typedef struct isolate isolate_t;

/* One worker process. Freed once both its handles closed. */
typedef struct wproc {
  isolate_t *iso;
  uv_process_t proc;
  uv_pipe_t pipe;
  uv_shutdown_t shutdown;
  frame_reader_t rd;
  request_t *head, *tail; /* outstanding at this worker, in send order */
  unsigned handles;       /* open handles */
  bool ready, exited, eof, gone, killed;
  bool draining; /* it reported a fault: its successor may already run */
  int64_t exit_status;
  int term_signal;
} wproc_t;

struct isolate {
  loop_t *lp;
  wproc_t *cur; /* the worker requests go to; NULL while none runs */
  request_t *q_head, *q_tail;
  unsigned queued;
  uint64_t next_id;
  unsigned spawned; /* workers started */
  uv_timer_t timer; /* the back-off before a respawn; at shutdown, the grace period */
  unsigned backoff_ms;
  bool stopping, timer_closed;
  bool unclean_stop; /* a worker ended otherwise than with status 0 at shutdown */
  uint64_t lost_at_ns; /* when the last worker was found gone (for the recovery time) */
  char **args;         /* argv of the worker */
  /* GET /stats, read on any loop's thread */
  _Atomic uint64_t restarts, fault_exits, crashes, lost, refused;
  _Atomic uint64_t last_exit_unix_us, last_recovery_us;
  _Atomic int pid;
  _Atomic bool ready;
  _Atomic unsigned queued_gauge;
};

static int spawn(isolate_t *iso);

/* ---- answering requests ------------------------------------------------------------------- */

/* A request the front answers itself, as failed GPU work: counted as submitted so that the
 * in-flight gauge (submitted - completed - failed) stays right. */
static void fail_request(loop_t *lp, request_t *req, int status, bool submitted) {
  if (!submitted)
    lp->n.gpu_submitted++;
  req->gpu_status = status;
  if (status == CUV_ECLOSED)
    req->extra_header = RETRY_AFTER; /* a new worker is on its way */
  request_gpu_done(req);
}

static request_t *queue_pop(isolate_t *iso) {
  request_t *req = iso->q_head;
  if (!req)
    return NULL;
  iso->q_head = req->next_wait;
  if (!iso->q_head)
    iso->q_tail = NULL;
  req->next_wait = NULL;
  iso->queued--;
  iso->queued_gauge = iso->queued;
  iso->lp->n.waiting--;
  return req;
}

/* Every queued request: 503 (shutdown, or the worker they waited for died before it was ready). */
static void fail_queue(isolate_t *iso) {
  request_t *req;
  while ((req = queue_pop(iso)) != NULL)
    fail_request(iso->lp, req, CUV_ECLOSED, false);
}

/* ---- sending ------------------------------------------------------------------------------ */

typedef struct send_req {
  uv_write_t write;
  char head[FRAME_REQUEST_HEAD];
  char *body; /* the request's body, owned by the write from now on */
} send_req_t;

static void kill_worker(wproc_t *w) {
  /* never pid 0 (a spawn that failed): kill(0, ...) would signal our own process group */
  if (w->proc.pid > 0 && !w->exited && !w->killed && uv_process_kill(&w->proc, SIGKILL) == 0)
    w->killed = true;
}

static void on_sent(uv_write_t *write, int status) {
  send_req_t *sr = write->data;
  wproc_t *w = write->handle->data;
  free(sr->body);
  free(sr);
  /* A frame that did not go out whole leaves the pipe unusable: end the worker, whose
   * outstanding requests are then answered 503 (the handle is still open: a write's callback
   * runs before its handle's close callback). */
  if (status < 0 && !w->gone)
    kill_worker(w);
}

static void outstanding_push(wproc_t *w, request_t *req) {
  req->next_wait = NULL;
  if (w->tail)
    w->tail->next_wait = req;
  else
    w->head = req;
  w->tail = req;
}

/* To the worker: the request is REQ_RUNNING and outstanding until its reply or the worker's end. */
static void send_to(wproc_t *w, request_t *req) {
  loop_t *lp = w->iso->lp;
  uint32_t rows = req->route == ROUTE_FAULT ? 0 : req->batch;
  size_t payload = frame_request_payload(rows);
  send_req_t *sr = NULL;
  if ((rows && (!req->body || req->body_len != payload)) || !(sr = malloc(sizeof *sr))) {
    fail_request(lp, req, rows ? CUV_ENOMEM : CUV_EINVAL, false);
    return;
  }
  req->iso_id = ++w->iso->next_id;
  frame_request_head(sr->head, req->iso_id, rows);
  sr->body = req->body;
  req->body = NULL;
  sr->write.data = sr;
  req->state = REQ_RUNNING;
  lp->n.gpu_submitted++;
  outstanding_push(w, req);
  uv_buf_t bufs[2] = {uv_buf_init(sr->head, FRAME_REQUEST_HEAD),
                      uv_buf_init(sr->body, (unsigned)payload)};
  if (uv_write(&sr->write, (uv_stream_t *)&w->pipe, bufs, rows ? 2 : 1, on_sent) != 0) {
    free(sr->body);
    free(sr);
    kill_worker(w); /* the request stays outstanding: answered 503 when the worker is gone */
  }
}

void isolate_start(loop_t *lp, request_t *req) {
  if (!lp || !req)
    return;
  isolate_t *iso = lp->iso;
  if (!iso) { /* POST /debug/fault reaches here only with --isolate; refuse it otherwise */
    fail_request(lp, req, CUV_ENOTSUP, false);
    return;
  }
  if (req->route == ROUTE_INFER)
    lp->n.infer_rows_total += req->batch;
  if (iso->cur && iso->cur->ready && !iso->stopping) {
    send_to(iso->cur, req);
  } else if (iso->stopping || iso->queued >= lp->srv->isolate_queue) {
    iso->refused++;
    lp->n.refused++;
    fail_request(lp, req, CUV_ECLOSED, false);
  } else {
    req->state = REQ_WAITING;
    req->next_wait = NULL;
    if (iso->q_tail)
      iso->q_tail->next_wait = req;
    else
      iso->q_head = req;
    iso->q_tail = req;
    iso->queued++;
    iso->queued_gauge = iso->queued;
    lp->n.waiting++;
  }
}

void isolate_forget(loop_t *lp, request_t *req) {
  if (!lp || !lp->iso || !req)
    return;
  isolate_t *iso = lp->iso;
  request_t **p = &iso->q_head, *prev = NULL;
  while (*p && *p != req) {
    prev = *p;
    p = &(*p)->next_wait;
  }
  if (!*p)
    return;
  *p = req->next_wait;
  if (iso->q_tail == req)
    iso->q_tail = prev;
  req->next_wait = NULL;
  iso->queued--;
  iso->queued_gauge = iso->queued;
  lp->n.waiting--;
}

/* ---- replies ------------------------------------------------------------------------------ */

static uint64_t unix_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void on_ready(wproc_t *w) {
  isolate_t *iso = w->iso;
  w->ready = true;
  iso->ready = true;
  iso->backoff_ms = 0;
  if (iso->lost_at_ns) {
    iso->last_recovery_us = (uv_hrtime() - iso->lost_at_ns) / 1000u;
    iso->lost_at_ns = 0;
  }
  request_t *req;
  while (!iso->stopping && w == iso->cur && !w->gone && (req = queue_pop(iso)) != NULL)
    send_to(w, req);
}

/* The worker's device faulted: it answers what it holds and exits. New requests wait for its
 * successor, which starts now, while it drains. */
static void on_faulted(wproc_t *w) {
  isolate_t *iso = w->iso;
  w->draining = true;
  if (iso->cur != w)
    return;
  iso->cur = NULL;
  iso->ready = false;
  iso->lost_at_ns = uv_hrtime();
  iso->last_exit_unix_us = unix_us();
  if (!iso->stopping)
    spawn(iso);
}

/* The outstanding request with this id, taken off the list; NULL if there is none. Replies come
 * in about the order sent, so the search ends near the head. */
static request_t *outstanding_take(wproc_t *w, uint64_t id) {
  request_t **p = &w->head, *prev = NULL;
  while (*p && (*p)->iso_id != id) {
    prev = *p;
    p = &(*p)->next_wait;
  }
  request_t *req = *p;
  if (!req)
    return NULL;
  *p = req->next_wait;
  if (w->tail == req)
    w->tail = prev;
  req->next_wait = NULL;
  return req;
}

static void release_free(void *p) { free(p); }

/* One reply frame; -1 when it makes no sense (the worker is then killed). */
static int on_reply(wproc_t *w, const frame_t *f) {
  if (f->id == FRAME_CONTROL_ID) {
    if (f->status == 0 && !w->ready)
      on_ready(w);
    else if (f->status != 0 && !w->draining)
      on_faulted(w);
    else
      return -1;
    return 0;
  }
  request_t *req = outstanding_take(w, f->id);
  if (!req)
    return -1;
  uint32_t rows = req->route == ROUTE_FAULT ? 0 : req->batch;
  req->gpu_status = f->status;
  if (f->status == 0 && f->rows != rows)
    req->gpu_status = CUV_EINVAL; /* never answer with the wrong shape */
  if (req->gpu_status == 0 && f->payload_len) {
    void *data = malloc(f->payload_len);
    if (data) {
      memcpy(data, f->payload, f->payload_len);
      req->out = (cuv_output_t){.data = data, .release = release_free, .release_arg = data};
    } else {
      req->gpu_status = CUV_ENOMEM;
    }
  }
  request_gpu_done(req);
  return 0;
}

/* ---- a worker's end ----------------------------------------------------------------------- */

static void on_handle_closed(uv_handle_t *handle) {
  wproc_t *w = handle->data;
  if (--w->handles > 0)
    return;
  frame_reader_free(&w->rd);
  free(w);
}

static void on_timer_closed(uv_handle_t *handle) { (void)handle; }

static void close_timer(isolate_t *iso) {
  if (iso->timer_closed)
    return;
  iso->timer_closed = true;
  uv_close((uv_handle_t *)&iso->timer, on_timer_closed);
}

static void on_respawn_timer(uv_timer_t *timer) {
  isolate_t *iso = timer->data;
  if (!iso->stopping && !iso->cur)
    spawn(iso);
}

static void log_end(const wproc_t *w, unsigned lost) {
  if (w->term_signal)
    fprintf(stderr, "tcp-infer: worker %d killed by signal %d", w->proc.pid, w->term_signal);
  else
    fprintf(stderr, "tcp-infer: worker %d exited with status %lld%s", w->proc.pid,
            (long long)w->exit_status,
            w->exit_status == WORKER_EXIT_FAULT ? " (device fault)" : "");
  fprintf(stderr, ", %u request%s it held answered 503\n", lost, lost == 1 ? "" : "s");
}

/* What comes after a worker's end: a new one now (it had served), after a back-off (it never got
 * ready: maybe it cannot), or nothing (shutdown). */
static void after_end(isolate_t *iso, bool was_ready) {
  if (iso->stopping) {
    close_timer(iso);
    return;
  }
  if (!was_ready) {
    fail_queue(iso);
    iso->backoff_ms = iso->backoff_ms ? iso->backoff_ms * 2 : BACKOFF_MIN_MS;
    if (iso->backoff_ms > BACKOFF_MAX_MS)
      iso->backoff_ms = BACKOFF_MAX_MS;
    uv_timer_start(&iso->timer, on_respawn_timer, iso->backoff_ms, 0);
    return;
  }
  spawn(iso);
}

/* Once the pipe is at EOF (every reply read) and the exit was seen: the requests it still held
 * are answered 503, and a new worker starts. */
static void maybe_gone(wproc_t *w) {
  if (!w->exited || !w->eof || w->gone)
    return;
  isolate_t *iso = w->iso;
  w->gone = true;
  bool was_cur = iso->cur == w; /* not when draining: its successor is cur */
  if (was_cur) {
    iso->cur = NULL;
    iso->ready = false;
    iso->pid = 0;
    iso->lost_at_ns = uv_hrtime();
    iso->last_exit_unix_us = unix_us();
  }
  bool clean = iso->stopping && w->exit_status == 0 && !w->term_signal;
  if (iso->stopping && !clean && !w->draining)
    iso->unclean_stop = true; /* e.g. a leak under ASan: the server's exit status says so */
  if (!w->term_signal && w->exit_status == WORKER_EXIT_FAULT)
    iso->fault_exits++;
  else if (!clean)
    iso->crashes++;
  request_t *req = w->head;
  w->head = w->tail = NULL;
  unsigned lost = 0;
  while (req) { /* the list is detached: the answers may close connections, not touch it */
    request_t *next = req->next_wait;
    req->next_wait = NULL;
    fail_request(iso->lp, req, CUV_ECLOSED, true);
    lost++;
    req = next;
  }
  iso->lost += lost;
  if (!clean)
    log_end(w, lost);
  uv_close((uv_handle_t *)&w->pipe, on_handle_closed);
  uv_close((uv_handle_t *)&w->proc, on_handle_closed);
  if (was_cur || (iso->stopping && !iso->cur))
    after_end(iso, w->ready);
}

static void on_worker_exit(uv_process_t *proc, int64_t exit_status, int term_signal) {
  wproc_t *w = proc->data;
  w->exited = true;
  w->exit_status = exit_status;
  w->term_signal = term_signal;
  maybe_gone(w);
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
  wproc_t *w = handle->data;
  char *base;
  size_t len;
  (void)suggested;
  if (frame_reader_space(&w->rd, 64u << 10, &base, &len) != 0)
    *buf = uv_buf_init(NULL, 0); /* the read callback gets UV_ENOBUFS */
  else
    *buf = uv_buf_init(base, (unsigned)len);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  wproc_t *w = stream->data;
  (void)buf;
  if (nread > 0) {
    frame_reader_fill(&w->rd, (size_t)nread);
    frame_t f;
    int rc;
    while ((rc = frame_next(&w->rd, &f)) == 1 && !w->gone)
      if (on_reply(w, &f) != 0) {
        rc = -1;
        break;
      }
    if (rc < 0) {
      fprintf(stderr, "tcp-infer: worker %d sent a malformed frame: killed\n", w->proc.pid);
      kill_worker(w);
    }
    return;
  }
  if (nread < 0) { /* EOF, or an error: nothing more will come from it */
    uv_read_stop(stream);
    if (nread != UV_EOF)
      kill_worker(w);
    w->eof = true;
    maybe_gone(w);
  }
}

/* ---- starting and stopping ---------------------------------------------------------------- */

static int spawn(isolate_t *iso) {
  loop_t *lp = iso->lp;
  wproc_t *w = calloc(1, sizeof *w);
  if (!w || frame_reader_init(&w->rd, true, lp->srv->max_batch) != 0) {
    free(w);
    after_end(iso, false); /* a back-off, then another try */
    return CUV_ENOMEM;
  }
  w->iso = iso;
  uv_pipe_init(&lp->loop, &w->pipe, 0);
  w->pipe.data = w->proc.data = w;
  /* The worker's logs go where the front's go; fd 3 carries the frames both ways. */
  uv_stdio_container_t stdio[4] = {
      {.flags = UV_IGNORE},
      {.flags = UV_INHERIT_FD, .data.fd = 1},
      {.flags = UV_INHERIT_FD, .data.fd = 2},
      {.flags = UV_CREATE_PIPE | UV_READABLE_PIPE | UV_WRITABLE_PIPE,
       .data.stream = (uv_stream_t *)&w->pipe}};
  uv_process_options_t opts = {.exit_cb = on_worker_exit, .file = iso->args[0], .args = iso->args,
                               .stdio = stdio, .stdio_count = 4};
  int rc = uv_spawn(&lp->loop, &w->proc, &opts);
  w->handles = 2; /* the process handle is initialized even when the spawn failed */
  if (rc != 0)
    w->proc.pid = 0; /* nothing to kill */
  else
    rc = uv_read_start((uv_stream_t *)&w->pipe, on_alloc, on_read);
  if (rc != 0) {
    fprintf(stderr, "tcp-infer: cannot start a worker: %s\n", uv_strerror(rc));
    kill_worker(w); /* started, but its pipe cannot be read: its exit is not waited for */
    w->gone = true;
    uv_close((uv_handle_t *)&w->pipe, on_handle_closed);
    uv_close((uv_handle_t *)&w->proc, on_handle_closed);
    after_end(iso, false);
    return CUV_ENOMEM;
  }
  iso->cur = w;
  iso->pid = w->proc.pid;
  if (iso->spawned++)
    iso->restarts++;
  return 0;
}

/* argv of the worker: this executable, --worker, and the front's own options (the worker reads
 * the model's: --ptx, --seed, --max-batch, --workspaces, --cublas, --sim-delay-us, ...). */
static char **worker_args(const server_t *s) {
  char **args = calloc((size_t)s->argc + 3, sizeof *args);
  char exe[4096];
  size_t size = sizeof exe;
  if (!args || uv_exepath(exe, &size) != 0 || !(args[0] = strdup(exe))) {
    free(args);
    return NULL;
  }
  args[1] = "--worker";
  for (int i = 1; i < s->argc; i++)
    args[i + 1] = s->argv[i];
  return args;
}

int isolate_open(loop_t *lp) {
  if (!lp || !lp->srv)
    return CUV_EINVAL;
  isolate_t *iso = calloc(1, sizeof *iso);
  if (!iso || !(iso->args = worker_args(lp->srv))) {
    free(iso);
    return CUV_ENOMEM;
  }
  iso->lp = lp;
  uv_timer_init(&lp->loop, &iso->timer);
  iso->timer.data = iso;
  lp->iso = iso;
  spawn(iso); /* a failure retries after a back-off */
  return 0;
}

static void on_stop_timeout(uv_timer_t *timer) {
  isolate_t *iso = timer->data;
  if (iso->cur)
    kill_worker(iso->cur);
}

static void on_shutdown(uv_shutdown_t *sh, int status) {
  wproc_t *w = sh->data;
  if (status < 0 && status != UV_ECANCELED && !w->gone)
    kill_worker(w);
}

/* Shutdown: nothing new goes out; the worker sees EOF, finishes what it holds (their replies
 * still free the orphaned requests) and exits 0; killed after a grace period. */
void isolate_stop(loop_t *lp) {
  if (!lp || !lp->iso || lp->iso->stopping)
    return;
  isolate_t *iso = lp->iso;
  iso->stopping = true;
  fail_queue(iso);
  uv_timer_stop(&iso->timer);
  wproc_t *w = iso->cur;
  if (!w) {
    close_timer(iso);
    return;
  }
  uv_timer_start(&iso->timer, on_stop_timeout, STOP_GRACE_MS, 0);
  w->shutdown.data = w;
  if (uv_shutdown(&w->shutdown, (uv_stream_t *)&w->pipe, on_shutdown) != 0)
    kill_worker(w);
}

int isolate_free(loop_t *lp) {
  if (!lp || !lp->iso)
    return 0;
  int rc = lp->iso->unclean_stop ? -1 : 0;
  free(lp->iso->args[0]);
  free(lp->iso->args);
  free(lp->iso);
  lp->iso = NULL;
  return rc;
}

/* ---- GET /stats --------------------------------------------------------------------------- */

static void family(FILE *f, const char *name, const char *type, const char *help) {
  fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void total(FILE *f, const server_t *s, const char *name, const char *help,
                  size_t offset) {
  uint64_t sum = 0;
  for (unsigned i = 0; i < s->nloops; i++)
    if (s->loops[i].iso)
      sum += *(_Atomic uint64_t *)((char *)s->loops[i].iso + offset);
  family(f, name, "counter", help);
  fprintf(f, "%s %llu\n", name, (unsigned long long)sum);
}

static void per_loop(FILE *f, const server_t *s) {
  family(f, "cuv_infer_worker_pid", "gauge", "The loop's worker process (0: none running).");
  for (unsigned i = 0; i < s->nloops; i++)
    if (s->loops[i].iso)
      fprintf(f, "cuv_infer_worker_pid{loop=\"%u\"} %d\n", i, (int)s->loops[i].iso->pid);
  family(f, "cuv_infer_worker_ready", "gauge", "1 when the loop's worker takes requests.");
  for (unsigned i = 0; i < s->nloops; i++)
    if (s->loops[i].iso)
      fprintf(f, "cuv_infer_worker_ready{loop=\"%u\"} %d\n", i, s->loops[i].iso->ready ? 1 : 0);
  family(f, "cuv_infer_worker_queued", "gauge", "Requests waiting for a ready worker.");
  for (unsigned i = 0; i < s->nloops; i++)
    if (s->loops[i].iso)
      fprintf(f, "cuv_infer_worker_queued{loop=\"%u\"} %u\n", i, s->loops[i].iso->queued_gauge);
  family(f, "cuv_infer_worker_last_exit_timestamp_seconds", "gauge",
         "When the loop's worker last failed (its fault report, or its end); 0: never.");
  for (unsigned i = 0; i < s->nloops; i++)
    if (s->loops[i].iso)
      fprintf(f, "cuv_infer_worker_last_exit_timestamp_seconds{loop=\"%u\"} %.6f\n", i,
              (double)s->loops[i].iso->last_exit_unix_us / 1e6);
  family(f, "cuv_infer_worker_last_recovery_seconds", "gauge",
         "From the loop's last worker failure to its successor's ready frame.");
  for (unsigned i = 0; i < s->nloops; i++)
    if (s->loops[i].iso)
      fprintf(f, "cuv_infer_worker_last_recovery_seconds{loop=\"%u\"} %.6f\n", i,
              (double)s->loops[i].iso->last_recovery_us / 1e6);
}

void isolate_metrics(const server_t *s, FILE *f) {
  if (!s || !f || !s->isolate || !s->loops)
    return;
  total(f, s, "cuv_infer_worker_restarts_total", "Worker processes started after one ended.",
        offsetof(isolate_t, restarts));
  total(f, s, "cuv_infer_worker_fault_exits_total",
        "Workers that exited after a sticky device fault.", offsetof(isolate_t, fault_exits));
  total(f, s, "cuv_infer_worker_crashes_total",
        "Workers that ended otherwise (a signal such as kill -9, another exit status).",
        offsetof(isolate_t, crashes));
  total(f, s, "cuv_infer_worker_lost_requests_total",
        "Requests answered 503 because their worker ended before answering.",
        offsetof(isolate_t, lost));
  total(f, s, "cuv_infer_worker_refused_total",
        "Requests answered 503 because the queue for a worker was full.",
        offsetof(isolate_t, refused));
  per_loop(f, s);
}
