/* tcp-infer: --coalesce [ROWS], dynamic batching: the coalesce backend (backend.h; calls infer.c's
 * loop set-up, model.c and pool.c).
 *
 * Each request costs the loop thread the same few driver calls whatever its size (upload, two
 * launches, download, the completion's flag), so under load the loop is bound by calls, not rows.
 * With --coalesce a complete POST /infer does not run by itself: it joins the loop's pending batch,
 * and a uv_check handle, which runs right after the poll phase (once the iteration read and parsed
 * everything that was readable), submits the whole batch as ONE op:
 *   upload(in, the bodies concatenated) ; dense ; dense ; download(out)
 * through one workspace sized for ROWS rows (model_rows_op). The bodies are concatenated straight
 * into the pinned host buffer of the batch's workspace (cuv_host_buffer_t), so the upload is one
 * DMA with no
 * staging copy; the submission holds that buffer until its work completed, and the batch slot
 * (with its workspace) is reused only after the completion. The completion (loop thread) hands
 * each request its slice of the downloaded outputs, one reference-counted output shared by the
 * batch's responses (no copy), and answers each in turn through its done callback.
 *
 * When a batch leaves is Triton's dynamic batcher's rule: at once when it is full (its rows reach
 * ROWS), when its rows equal one of the preferred sizes (--preferred-batch) or reach the largest
 * of them; otherwise once its oldest request waited --max-queue-delay-us, or, with no delay (the
 * default), at the end of the loop iteration that filled it. A delay shorter than TIMER_MIN_US
 * is waited out with the loop polling (libuv's timers count milliseconds), a longer one with a
 * timer for all but that last part.
 *
 * A request that would overflow the pending batch flushes it first. The workspaces are the loop's
 * pool (one per batch in flight); when none is free, requests wait in the loop's queue (pool.c),
 * as without --coalesce, by priority level then arrival, and the next batch is filled from its
 * head once a workspace returns: the highest level first. A workspace goes back
 * to the pool only in the batch's completion, after cuv proved its GPU work complete, so no batch
 * can write a workspace the GPU still reads for another.
 *
 * A request in the pending batch is REQ_WAITING (its connection's close takes it out, through
 * the backend's forget: batch_forget, else pool_forget); once submitted it is REQ_RUNNING (its
 * connection's close orphans it, and its done callback frees it; the rest of the batch is
 * answered as usual).
 *
 * --baseline --coalesce runs the same batch op with cuv_sync in a thread-pool worker. --graph
 * --coalesce replays the workspace's graph for the batch's bucket of rows (model_graph_op: one
 * graph per power of two of rows, captured on first use); the completion copies each request's
 * slice of the workspace's pinned output into its body's buffer, since the workspace (and that
 * output) is reused as soon as the completion returns. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "batch.h"
#include "infer.h"
#include "model.h"
#include "pool.h"
#include "server.h"
#include "streams.h"

#define ROW_IN (MLP_IN * sizeof(float))
#define ROW_OUT (MLP_OUT * sizeof(float))
#define TIMER_MIN_US 2000 /* a delay's last part waited out polling, not with a timer */

/* Why a batch left (GET /metrics counts them): full, a preferred size, its oldest request's
 * delay over, the loop iteration's end (no delay); NONE: it waits. */
typedef enum { TRIG_FULL, TRIG_PREFERRED, TRIG_DELAY, TRIG_ITERATION, TRIG_NONE } trigger_t;

typedef struct batch {
  loop_t *lp;
  workspace_t *ws;
  request_t *reqs; /* in arrival order, linked by next_wait */
  unsigned nreqs, rows;
  int status;      /* --baseline: cuv_sync's result and output */
  cuv_output_t out;
  uv_work_t work;
  int stream;      /* streams.c: the stream it went to (-1: none) */
} batch_t;

struct batcher {
  uv_check_t check; /* flushes the pending batch after the iteration's reads */
  uv_idle_t idle;   /* keeps the poll from blocking while a flush is due (see schedule) */
  uv_timer_t delay; /* --max-queue-delay-us: wakes the loop when the pending batch's delay ends */
  /* chosen once at set-up: the batch's op (--graph: its workspace's graph) and how it goes out
   * (--baseline: cuv_sync in the thread pool; else through the bridge) */
  cuv_op_t *(*op)(batch_t *bt);
  int (*send)(loop_t *lp, batch_t *bt);
  batch_t *batches; /* batches[i] runs on lp->workspaces[i] */
  request_t *head, *tail; /* the pending batch */
  unsigned rows;
};

/* One batch's downloaded outputs, shared by its requests' responses (each holds a reference in
 * its req->out, released when the response is written or dropped; all on the loop thread). */
typedef struct shared_out {
  cuv_output_t whole;
  unsigned refs;
} shared_out_t;

static void shared_unref(void *arg) {
  shared_out_t *sh = arg;
  if (--sh->refs)
    return;
  cuv_output_release(&sh->whole);
  free(sh);
}

/* The loop's batcher: the backend's state of a loop. */
static struct batcher *batcher_of(const loop_t *lp) { return lp->backend_state; }

/* ---- the queues --------------------------------------------------------------------------- */

static void pending_push(loop_t *lp, request_t *req) {
  struct batcher *b = batcher_of(lp);
  req->next_wait = NULL;
  if (b->tail)
    b->tail->next_wait = req;
  else
    b->head = req;
  b->tail = req;
  b->rows += req->batch;
  lp->n.batch_pending++;
}

/* Moves waiting requests into the pending batch, in order, while they fit. */
static void refill(loop_t *lp) {
  struct batcher *b = batcher_of(lp);
  request_t *req;
  while (!lp->stopping && (req = pool_first_waiting(lp)) &&
         b->rows + req->batch <= lp->srv->coalesce)
    pending_push(lp, pool_next_waiting(lp));
}

static bool batch_forget(loop_t *lp, request_t *req) {
  struct batcher *b = batcher_of(lp);
  request_t **p = &b->head, *prev = NULL;
  while (*p && *p != req) {
    prev = *p;
    p = &(*p)->next_wait;
  }
  if (!*p)
    return false;
  *p = req->next_wait;
  if (b->tail == req)
    b->tail = prev;
  b->rows -= req->batch;
  lp->n.batch_pending--;
  return true;
}

/* ---- completion --------------------------------------------------------------------------- */

static void schedule(loop_t *lp);

/* Loop thread: every request of the batch gets the result (its slice of the outputs, or the
 * error), in order; then the workspace goes back, since the GPU is proven done with it. */
static void batch_done(batch_t *bt, int status, cuv_output_t *out) {
  loop_t *lp = bt->lp;
  shared_out_t *sh = NULL;
  /* --graph: the workspace's pinned output holds the outputs (only its workspaces have one) */
  const char *graph_out = bt->ws->host_out ? cuv_host_buffer_data(bt->ws->host_out) : NULL;
  if (status == 0 && !graph_out && !(sh = malloc(sizeof *sh)))
    status = CUV_ENOMEM;
  if (sh)
    *sh = (shared_out_t){.whole = cuv_output_take(out), .refs = 1};
  cuv_output_release(out);
  size_t off = 0;
  request_t *req = bt->reqs;
  bt->reqs = NULL;
  while (req) {
    request_t *next = req->next_wait;
    req->next_wait = NULL;
    req->gpu_status = status;
    if (sh) {
      sh->refs++;
      req->out = (cuv_output_t){(char *)sh->whole.data + off, shared_unref, sh};
    } else if (graph_out && status == 0) {
      memcpy(req->body, graph_out + off, req->batch * ROW_OUT); /* freed with the request */
      req->out = (cuv_output_t){.data = req->body};
    }
    off += req->batch * ROW_OUT;
    req->done(req); /* may free req (an orphan) */
    req = next;
  }
  if (sh)
    shared_unref(sh);
  pool_put(lp, bt->ws);
  bt->ws = NULL;
  refill(lp);
  if (batcher_of(lp)->head)
    schedule(lp);
}

static void on_gpu_done(int status, cuv_output_t *out, void *arg) {
  batch_t *bt = arg;
  streams_done(bt->lp, bt->stream);
  batch_done(bt, status, out);
}

static cuv_op_t *graph_op(batch_t *bt) { return model_graph_op(bt->lp, bt->ws, bt->rows); }

static cuv_op_t *rows_op(batch_t *bt) {
  cuv_op_t *upload = cuv_upload(bt->ws->in, 0, bt->ws->host_in, 0, bt->rows * ROW_IN);
  return model_rows_op(bt->ws, &bt->lp->srv->models[0], upload, bt->rows); /* the seeded MLP */
}

/* --baseline: a thread-pool worker builds the op and blocks until the GPU is done. */
static void baseline_work(uv_work_t *work) {
  batch_t *bt = work->data;
  bt->status = cuv_sync(batcher_of(bt->lp)->op(bt), &bt->out);
}

static void baseline_after(uv_work_t *work, int status) {
  batch_t *bt = work->data;
  if (status < 0 && bt->status == 0)
    bt->status = CUV_ECANCELED;
  batch_done(bt, bt->status, &bt->out);
}

/* ---- submission --------------------------------------------------------------------------- */

static void count(loop_t *lp, const batch_t *bt) {
  unsigned log2 = 0;
  while (log2 < 16 && bt->rows >> (log2 + 1))
    log2++;
  lp->n.batches++;
  lp->n.batched_requests += bt->nreqs;
  lp->n.batched_rows += bt->rows;
  lp->n.batches_by_log2[log2]++;
  lp->n.gpu_submitted += bt->nreqs;
  if (bt->ws->gpu != lp->gpu)
    bt->ws->gpu->stolen++; /* --balance steal: another device's workspace (pool.c) */
  counters_exec(&lp->n, bt->rows);
}

/* GET /metrics: when the batch's requests began their GPU work, and when it was submitted. */
static void stamp(batch_t *bt, bool submitted) {
  uint64_t now = uv_hrtime();
  for (request_t *req = bt->reqs; req; req = req->next_wait)
    if (submitted)
      req->t_submitted = now;
    else
      req->t_start = now;
}

/* Takes the pending batch into a free workspace's batch, its inputs concatenated. */
static batch_t *take_pending(loop_t *lp, workspace_t *ws) {
  struct batcher *b = batcher_of(lp);
  batch_t *bt = &b->batches[ws - lp->workspaces];
  bt->ws = ws;
  bt->reqs = b->head;
  bt->rows = bt->nreqs = 0;
  char *host = cuv_host_buffer_data(ws->host_in);
  for (request_t *req = b->head; req; req = req->next_wait) {
    memcpy(host + bt->rows * ROW_IN, req->body, req->batch * ROW_IN); /* the body is kept: it
                                            * goes back to conn.c's cache with the request */
    req->state = REQ_RUNNING;
    req->gpu = ws->gpu;
    bt->rows += req->batch;
    bt->nreqs++;
  }
  lp->n.batch_pending -= bt->nreqs;
  b->head = b->tail = NULL;
  b->rows = 0;
  return bt;
}

/* How a batch goes out: 0 when accepted (its completion comes later, on the loop thread). */
static int send_bridge(loop_t *lp, batch_t *bt) {
  cuv_submit_opts_t opts = {.stream = streams_take(lp, bt->ws, &bt->stream)};
  int rc = cuv_uv_submit(lp->bridge, batcher_of(lp)->op(bt), on_gpu_done, bt, &opts);
  if (rc != 0)
    streams_done(lp, bt->stream);
  return rc;
}

static int send_pooled(loop_t *lp, batch_t *bt) {
  bt->status = 0;
  bt->work.data = bt;
  return uv_queue_work(&lp->loop, &bt->work, baseline_work, baseline_after) ? CUV_EINVAL : 0;
}

/* Submits the pending batch; 0 when it left (submitted, or refused and answered), -1 when there
 * is none or no workspace is free. */
static int flush(loop_t *lp, trigger_t why) {
  workspace_t *ws = batcher_of(lp)->head ? pool_take(lp) : NULL;
  if (!ws)
    return -1;
  batch_t *bt = take_pending(lp, ws);
  count(lp, bt);
  lp->n.batch_triggers[why]++;
  stamp(bt, false);
  int rc = batcher_of(lp)->send(lp, bt);
  if (rc != 0) {
    lp->n.refused += bt->nreqs;
    for (request_t *req = bt->reqs; req; req = req->next_wait)
      req->rejected = true;
    batch_done(bt, rc, NULL); /* every request gets the error */
    return 0;
  }
  stamp(bt, true); /* accepted: the completion comes later, on the loop thread */
  return 0;
}

/* ---- when to flush ------------------------------------------------------------------------ */

static bool preferred(const server_t *s, unsigned rows) {
  for (unsigned i = 0; i < s->npreferred; i++)
    if (rows == s->preferred[i])
      return true;
  return s->npreferred && rows >= s->preferred[s->npreferred - 1]; /* sorted: the largest */
}

/* Whether the pending batch leaves now, and why. */
static trigger_t due(const loop_t *lp, uint64_t now) {
  const struct batcher *b = batcher_of(lp);
  const server_t *s = lp->srv;
  if (!b->head)
    return TRIG_NONE;
  if (b->rows >= s->coalesce)
    return TRIG_FULL;
  if (preferred(s, b->rows))
    return TRIG_PREFERRED;
  if (!s->queue_delay_us)
    return TRIG_ITERATION;
  uint64_t waited_us = now > b->head->t_begin ? (now - b->head->t_begin) / 1000 : 0;
  return waited_us >= s->queue_delay_us ? TRIG_DELAY : TRIG_NONE;
}

static void schedule(loop_t *lp);

static void on_delay(uv_timer_t *timer) { schedule(timer->data); }

/* The pending batch waits for its delay: a timer for most of it, the loop polling for the rest. */
static void wait_delay(loop_t *lp) {
  struct batcher *b = batcher_of(lp);
  uint64_t now = uv_hrtime(), end = b->head->t_begin + (uint64_t)lp->srv->queue_delay_us * 1000;
  uint64_t left_us = end > now ? (end - now) / 1000 : 0;
  if (left_us < TIMER_MIN_US) {
    schedule(lp); /* the idle handle keeps the loop polling: the next check looks again */
    return;
  }
  uv_timer_start(&b->delay, on_delay, (left_us - TIMER_MIN_US / 2) / 1000, 0);
}

/* As many batches as are due and there are workspaces for; then nothing is due until a batch
 * completes, more requests come or the pending one's delay ends. */
static void on_check(uv_check_t *check) {
  loop_t *lp = check->data;
  struct batcher *b = batcher_of(lp);
  trigger_t why;
  while ((why = due(lp, uv_hrtime())) != TRIG_NONE && flush(lp, why) == 0)
    refill(lp);
  uv_check_stop(&b->check);
  uv_idle_stop(&b->idle);
  if (why == TRIG_NONE && b->head && !uv_is_active((uv_handle_t *)&b->delay))
    wait_delay(lp);
}

static void on_idle(uv_idle_t *idle) { (void)idle; }

/* The check handle flushes at the end of this iteration when requests arrive in the poll phase
 * (reads). A completion may run in another phase (the bridge also delivers from its own idle and
 * check handles): the idle handle then keeps the next poll from blocking, so the check still runs
 * without waiting for more I/O. */
static void schedule(loop_t *lp) {
  uv_check_start(&batcher_of(lp)->check, on_check);
  uv_idle_start(&batcher_of(lp)->idle, on_idle);
}

static void batch_add(loop_t *lp, request_t *req) {
  struct batcher *b = batcher_of(lp);
  unsigned limit = lp->srv->coalesce;
  req->state = REQ_WAITING;
  if (!pool_first_waiting(lp) && b->rows + req->batch > limit)
    flush(lp, TRIG_FULL); /* it would overflow the pending batch: that one goes first */
  if (pool_first_waiting(lp) || b->rows + req->batch > limit || !pool_can_take(lp)) {
    pool_wait(lp, req); /* no workspace for the batch: by priority, then first come */
    return;
  }
  pending_push(lp, req);
  if (b->rows < limit || flush(lp, TRIG_FULL) != 0)
    schedule(lp);
}

/* ---- set-up, metrics ---------------------------------------------------------------------- */

static int batch_loop_init(loop_t *lp) {
  struct batcher *b = calloc(1, sizeof *b);
  unsigned n = pool_size(lp);
  if (!b || !(b->batches = calloc(n, sizeof *b->batches))) {
    free(b);
    return CUV_ENOMEM;
  }
  lp->backend_state = b;
  for (unsigned i = 0; i < n; i++)
    b->batches[i].lp = lp;
  uv_check_init(&lp->loop, &b->check); /* cannot fail */
  uv_idle_init(&lp->loop, &b->idle);
  uv_timer_init(&lp->loop, &b->delay);
  uv_unref((uv_handle_t *)&b->delay); /* the pending requests' connections keep the loop alive */
  b->check.data = b->idle.data = b->delay.data = lp;
  b->op = lp->srv->graph ? graph_op : rows_op;
  b->send = lp->srv->baseline ? send_pooled : send_bridge;
  return 0;
}

static void batch_loop_free(loop_t *lp) {
  struct batcher *b = batcher_of(lp);
  if (!b)
    return;
  if (b->check.loop) {
    /* inactive once the loop ran dry: closed here, and one more iteration runs their close */
    uv_close((uv_handle_t *)&b->check, NULL);
    uv_close((uv_handle_t *)&b->idle, NULL);
    uv_close((uv_handle_t *)&b->delay, NULL);
    uv_run(&lp->loop, UV_RUN_NOWAIT);
  }
  free(b->batches);
  free(b);
  lp->backend_state = NULL;
}

/* ---- the backend ------------------------------------------------------------------------ */

static int coalesce_init(loop_t *lp) {
  int rc = infer_loop_init(lp, !lp->srv->baseline); /* --baseline: no bridge, cuv_sync */
  return rc == 0 ? batch_loop_init(lp) : rc;
}

static void coalesce_submit(loop_t *lp, request_t *req) {
  if (route_runs_model(req->route))
    batch_add(lp, req); /* it joins the loop's next batch */
  else
    infer_refuse(lp, req, CUV_ENOTSUP); /* POST /debug/ runs only in --isolate's workers */
}

static void coalesce_forget(loop_t *lp, request_t *req) {
  if (!batch_forget(lp, req)) /* it was not in the pending batch: it waits for a workspace */
    pool_forget(lp, req);
}

/* A batch gives its workspace back itself, in its completion (batch_done). */
static void coalesce_release(loop_t *lp, request_t *req) {}

static void coalesce_close(loop_t *lp) {
  batch_loop_free(lp);
  infer_loop_free(lp);
}

const backend_t backend_coalesce = {.name = "coalesce",
                                    .init = coalesce_init,
                                    .submit = coalesce_submit,
                                    .forget = coalesce_forget,
                                    .release = coalesce_release,
                                    .close = coalesce_close};

/* Batches by what made them leave. */
static void trigger_metrics(const server_t *s, FILE *f) {
  static const char *const names[] = {"full", "preferred", "delay", "iteration"};
  fprintf(f, "# HELP cuv_infer_batches_by_trigger_total Batches submitted, by what made them "
             "leave (full, a preferred size, the delay over, the loop iteration's end).\n"
             "# TYPE cuv_infer_batches_by_trigger_total counter\n");
  for (int t = 0; t < 4; t++) {
    uint64_t n = 0;
    for (unsigned i = 0; i < s->nloops; i++)
      n += s->loops[i].n.batch_triggers[t];
    fprintf(f, "cuv_infer_batches_by_trigger_total{trigger=\"%s\"} %llu\n", names[t],
            (unsigned long long)n);
  }
}

void batch_metrics(const server_t *s, FILE *f) {
  if (!s->coalesce || s->isolate)
    return; /* --isolate: the front batches nothing, its worker processes do */
  uint64_t batches = 0, requests = 0, rows = 0, pending = 0, by_log2[17] = {0};
  for (unsigned i = 0; i < s->nloops; i++) {
    const counters_t *n = &s->loops[i].n;
    batches += n->batches;
    requests += n->batched_requests;
    rows += n->batched_rows;
    pending += n->batch_pending;
    for (int k = 0; k < 17; k++)
      by_log2[k] += n->batches_by_log2[k];
  }
  static const struct {
    const char *name, *type, *help;
  } m[] = {
      {"cuv_infer_batch_rows_limit", "gauge", "Rows per batch at most (--coalesce)."},
      {"cuv_infer_batches_total", "counter", "Batches submitted (one GPU submission each)."},
      {"cuv_infer_batch_requests_total", "counter", "Requests submitted in batches."},
      {"cuv_infer_batch_rows_total", "counter", "Rows submitted in batches."},
      {"cuv_infer_batch_pending", "gauge", "Requests in the pending batches, not submitted yet."},
  };
  const uint64_t v[] = {s->coalesce, batches, requests, rows, pending};
  for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", m[i].name, m[i].help, m[i].name,
            m[i].type, m[i].name, (unsigned long long)v[i]);
  /* in seconds, Prometheus' base unit (the option counts microseconds, as Triton's does) */
  fprintf(f, "# HELP cuv_infer_batch_queue_delay_seconds How long a batch waits for more "
             "requests at most (--max-queue-delay-us; 0: one loop iteration).\n"
             "# TYPE cuv_infer_batch_queue_delay_seconds gauge\n"
             "cuv_infer_batch_queue_delay_seconds %.6f\n", s->queue_delay_us / 1e6);
  trigger_metrics(s, f);
  fprintf(f, "# HELP cuv_infer_batches_by_rows_total Batches submitted, by their rows (a range "
             "of powers of two).\n# TYPE cuv_infer_batches_by_rows_total counter\n");
  for (unsigned k = 0; k < 17 && (1u << k) <= s->coalesce; k++) {
    unsigned lo = 1u << k, hi = (2u << k) - 1 < s->coalesce ? (2u << k) - 1 : s->coalesce;
    char range[32];
    if (lo == hi)
      snprintf(range, sizeof range, "%u", lo);
    else
      snprintf(range, sizeof range, "%u-%u", lo, hi);
    fprintf(f, "cuv_infer_batches_by_rows_total{rows=\"%s\"} %llu\n", range,
            (unsigned long long)by_log2[k]);
  }
}
