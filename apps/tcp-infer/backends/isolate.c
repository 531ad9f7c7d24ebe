/* tcp-infer --isolate: the front's side. Each loop runs its GPU work in a worker process of its
 * own (this executable with --worker, worker.c), so that a sticky device fault, which kills the
 * CUDA context for the rest of the process's life (a context reset does not clear it on the real
 * driver, nor on the simulator), costs one worker and not the server: the front keeps every
 * connection, answers what the dead worker held, and starts a new one.
 *
 * The front never opens the device. A request is a frame to the worker (frames.h) and stays on
 * the worker's outstanding list (in send order, linked by next_wait) until its reply frame comes
 * back, or until the worker is gone (its pipe at EOF and its exit seen: every reply it wrote has
 * been read by then). Inference is idempotent (the same rows give the same answer, and running
 * them twice changes nothing), so a request its worker could not answer runs again on the next
 * ready worker (retry_or_fail), as many times as it takes, until it is answered or its deadline
 * (--isolate-deadline-ms, from its arrival) passes: the front keeps its body until then. So the
 * active worker and its spare dying together, or a second worker dying during the failover,
 * cost no client-visible error while a new worker can start. A worker lost, or one that reported
 * its fault, is no fault of the request's; an error answered by a worker that reported none (an
 * error the fault caused before its "faulted" frame, or maybe the request's own) is run again a
 * few times only (ISOLATE_ERROR_RUNS), so that a request that fails everywhere does not go round
 * the workers until its deadline. Only the debug requests, and an inference past its deadline or
 * its error runs, are answered with the error (503 with Retry-After when the worker was lost). A
 * request is on one list at a time and each reply takes it off, so it is answered once, and only
 * from a whole reply frame. Requests that arrive while no worker is ready wait in a bounded queue
 * (--isolate-queue; beyond it 503; replays are never refused), by KServe priority level (waitq.c;
 * a replay ahead of the others of its level), sent in that order once the new worker's ready
 * frame arrives, or answered 503 at their deadline. A worker that dies before it was ready takes
 * the queue with it (503s, not an unbounded wait) and the next one starts after a back-off, so a
 * worker that cannot start does not spin.
 *
 * Scheduling (KServe's parameters.priority and .timeout, as in process): while a worker is ready
 * every request goes to it at once, so requests wait for the GPU in the worker's workspace queue
 * (pool.c); its frame carries its level and its deadline, and that queue orders it and answers
 * its timeout, in a reply frame the front answers as in process (FRAME_STATUS_TIMEOUT: 503
 * "Request timeout expired", cuv_infer_queue_timeouts_total). The front's own queue does the same
 * for what waits there. A request whose worker could not answer it is not run again past its
 * timeout: it gets that answer too (one that started is never cut, but is not restarted).
 *
 * Starting a worker costs a process, a CUDA context, the module and the weights: hundreds of ms
 * on a GPU, during which its loop answers nothing. So (--isolate-spares 1, the default) each loop
 * keeps a spare: a second worker, started once the active one is ready, that sent its ready frame
 * and gets no requests. When the active worker reports a fault or ends, the spare is promoted at
 * once (the queue goes to it) and a new spare starts in the background. A sticky fault is its
 * process's context's, so the spare, on the same GPU, is untouched by it. A spare that ends is
 * replaced after the back-off.
 *
 * A worker that neither answers nor ends (a kernel that never returns, a deadlock) would hold its
 * requests for ever: the watchdog (--isolate-timeout) kills a worker whose oldest outstanding
 * request waited that long, and one that is still not ready --isolate-start-timeout after its
 * start (stuck in its start-up); its end is then handled like any other. It looks at the oldest
 * request and not at the last reply, because one kernel that spins holds its own request while
 * the others keep completing on other streams. Long before that, an inference unanswered for
 * --hang-suspect-ms (queued behind the hung kernel on its stream) moves to the other ready worker
 * (the spare, or the active one for a request at the spare), once: the worker it left is only
 * suspected, keeps its role and may still answer it (that late reply is dropped), and the
 * watchdog still judges it. A worker that stopped as a whole (SIGSTOP, a fault that halts its
 * every stream before the driver reports it, a deadlock) answers nothing at all: after
 * --stall-suspect-ms without a reply, counted from its last one or from the send of its oldest
 * inference, every inference it holds moves the same way, at once, long before its socket closes
 * or its fault is reported. A worker under load answers all the time and never looks stalled;
 * one batch longer than that on an idle worker is moved too (it runs twice, is answered once).
 * Everything runs on the loop's thread; the counters are atomics for GET /metrics on any loop. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "isolate-metrics.h"
#include "isolate.h"

#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 2000
/* At shutdown, a worker still running after this is killed. A worker that got EOF while still
 * starting (a spare) first finishes its start, then its teardown: on two GPUs under the gpu
 * suite's load, spares took more than 5 s and were killed (bench/RESULTS.md,
 * tcp-infer --isolate). */
#define STOP_GRACE_MS 15000
#define RETRY_AFTER "Retry-After: 1\r\n"
/* Runs of a request that a worker answered with an error without having reported a fault. */
#define ISOLATE_ERROR_RUNS 3
#define FROM_SPARE "X-Worker: spare\r\n" /* an answer the spare computed (moved, or replayed) */

typedef enum { AS_CUR, AS_SPARE } role_t;

/* The backend's state of a request (request_t.priv): its frame id at the worker it went to, when
 * it went (the hang watchdog), the workers it was sent to (a replay is the second), the errors
 * it got from workers that reported no fault, and whether it was moved off a suspected hang. */
typedef struct iso_req {
  uint64_t id, sent_ns;
  unsigned attempts, error_runs;
  bool moved;
} iso_req_t;

static iso_req_t *ireq(const request_t *req) { return req->priv; }

static int spawn(isolate_t *iso, role_t role);

/* ---- answering requests ------------------------------------------------------------------- */

/* The texts of the 503s the front makes itself (the client sees why, not a cuv error name). */
static const char LOST[] = "GPU worker lost: it ended before answering (a new one takes over)";
static const char FULL[] = "GPU worker restarting: too many requests are waiting for it";
static const char NOT_STARTED[] = "GPU worker could not start";
static const char STOPPING[] = "server shutting down";
static const char EXPIRED[] = "no GPU worker could take it before its deadline";

/* A request the front answers itself, as failed GPU work: counted as submitted (once, however
 * many workers it went to) so that the in-flight gauge (submitted - completed - failed) stays
 * right. `why`: CUV_ECLOSED's text. */
static void fail_request(loop_t *lp, request_t *req, int status, const char *why) {
  if (!ireq(req)->attempts)
    lp->n.gpu_submitted++;
  req->gpu_status = status;
  if (status == CUV_ECLOSED) {
    req->gpu_error = why;
    req->extra_header = RETRY_AFTER; /* a new worker is on its way */
  }
  req->done(req);
}

/* A request that never ran on a worker, or whose worker could not answer it, past its
 * timeout (request_t.deadline): 503 "Request timeout expired", as in process (waitq.c). */
static void answer_timeout(isolate_t *iso, request_t *req) {
  if (!ireq(req)->attempts)
    iso->lp->n.gpu_submitted++;
  waitq_timed_out(iso->lp, req);
}

static request_t *queue_pop(isolate_t *iso) {
  request_t *req = waitq_pop(&iso->q);
  iso->queued_gauge = iso->q.len;
  return req;
}

/* Every queued request: 503 (shutdown, or the worker they waited for died before it was ready). */
static void fail_queue(isolate_t *iso, const char *why) {
  request_t *req;
  while ((req = queue_pop(iso)) != NULL)
    fail_request(iso->lp, req, CUV_ECLOSED, why);
}

/* ---- sending ------------------------------------------------------------------------------ */

/* A frame on its way: its head and a copy of the body (the request keeps its own for a replay,
 * and may be freed before the write's callback). */
typedef struct send_req {
  uv_write_t write;
  char head[FRAME_REQUEST_HEAD];
  char body[];
} send_req_t;

static void kill_worker(wproc_t *w) {
  /* never pid 0 (a spawn that failed): kill(0, ...) would signal our own process group */
  if (w->proc.pid > 0 && !w->exited && !w->killed && uv_process_kill(&w->proc, SIGKILL) == 0)
    w->killed = true;
}

static void on_sent(uv_write_t *write, int status) {
  send_req_t *sr = write->data;
  wproc_t *w = write->handle->data;
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

/* The rows of the request's frame: its batch, or a debug request's mark. */
static uint32_t frame_rows(const request_t *req) {
  return route_runs_model(req->route) ? req->batch
         : req->route == ROUTE_HANG        ? FRAME_ROWS_HANG
                                           : FRAME_ROWS_FAULT;
}

/* To the worker: the request is REQ_RUNNING and outstanding until its reply or the worker's end. */
static void send_to(wproc_t *w, request_t *req) {
  loop_t *lp = w->iso->lp;
  uint32_t rows = frame_rows(req);
  size_t payload = frame_request_payload(rows);
  send_req_t *sr = NULL;
  if ((payload && (!req->body || req->body_len != payload)) ||
      !(sr = malloc(sizeof *sr + payload))) {
    fail_request(lp, req, payload ? CUV_ENOMEM : CUV_EINVAL, NULL);
    return;
  }
  ireq(req)->id = ++w->iso->next_id;
  frame_request_head(sr->head, ireq(req)->id, rows, req->priority, req->deadline);
  if (payload)
    memcpy(sr->body, req->body, payload);
  sr->write.data = sr;
  req->state = REQ_RUNNING;
  ireq(req)->sent_ns = req->t_submitted = uv_hrtime();
  if (!ireq(req)->attempts++) { /* its first worker: the GPU work begins (a replay continues it) */
    req->t_start = ireq(req)->sent_ns;
    lp->n.gpu_submitted++;
  }
  outstanding_push(w, req);
  uv_buf_t bufs[2] = {uv_buf_init(sr->head, FRAME_REQUEST_HEAD),
                      uv_buf_init(sr->body, (unsigned)payload)};
  if (uv_write(&sr->write, (uv_stream_t *)&w->pipe, bufs, payload ? 2 : 1, on_sent) != 0) {
    free(sr);
    kill_worker(w); /* the request stays outstanding: replayed once the worker is gone */
  }
}

/* Queues req for the next ready worker, by its priority level: after the others of its level,
 * or before them (a replay, which waited longest). Its timeout, if any, runs while it waits. */
static void queue_push(isolate_t *iso, request_t *req, bool ahead) {
  if (ahead)
    waitq_push_ahead(&iso->q, req);
  else
    waitq_push(&iso->q, req);
  iso->queued_gauge = iso->q.len;
}

/* A queued request whose timeout passed (waitq.c took it out). */
static void queue_expired(waitq_t *q, request_t *req) {
  isolate_t *iso = q->owner;
  iso->queued_gauge = q->len;
  answer_timeout(iso, req);
}

/* Whether the worker is known to be ending: killed by the front, or its exit seen. */
static bool dying(const wproc_t *w) { return w->killed || w->exited || w->gone; }

/* Whether a worker can take a request now: ready, not draining, not known to be dying. */
static bool usable(const wproc_t *w) { return w && w->ready && !w->draining && !dying(w); }

/* Where a replay goes: a usable worker other than the one that failed it, the active one or else
 * the spare (a worker that faulted may still be the active one until its "faulted" frame comes);
 * NULL: none is, the replay waits in the queue. */
static wproc_t *replay_target(isolate_t *iso, const wproc_t *from) {
  if (iso->cur != from && usable(iso->cur))
    return iso->cur;
  if (iso->spare != from && usable(iso->spare))
    return iso->spare;
  return NULL;
}

static uint64_t deadline_ns(const isolate_t *iso) {
  return (uint64_t)iso->lp->srv->isolate_deadline_ms * 1000000u;
}

/* Whether the request's deadline passed: it counts from its arrival (its first send if none). */
static bool past_deadline(const isolate_t *iso, const request_t *req, uint64_t now) {
  uint64_t since = req->t_begin ? req->t_begin : req->t_start;
  return since && now - since >= deadline_ns(iso);
}

/* Whether a request its worker could not answer runs again: an inference still wanted before its
 * deadline, whose worker was lost (`lost`) or reported its fault, or that has error runs left. */
static bool retry_wanted(const isolate_t *iso, request_t *req, bool lost, const wproc_t *from) {
  if (!route_runs_model(req->route) || req->orphan || iso->stopping ||
      past_deadline(iso, req, uv_hrtime()))
    return false;
  return lost || from->draining || ++ireq(req)->error_runs < ISOLATE_ERROR_RUNS;
}

/* A request its worker could not answer (the worker is gone: `lost`, or it answered an error):
 * an inference runs again on another usable worker (or waits for one, ahead of its level in the
 * queue); one past its timeout gets the timeout's answer; a debug request, an inference past its
 * deadline or its error runs, an orphan, or anything at shutdown gets the error. */
static void retry_or_fail(isolate_t *iso, request_t *req, int status, bool lost,
                          const wproc_t *from) {
  if (route_runs_model(req->route) && !req->orphan && !iso->stopping &&
      waitq_past_timeout(req, uv_hrtime())) {
    answer_timeout(iso, req); /* its timeout passed: never run again, as a queued one */
    return;
  }
  if (!retry_wanted(iso, req, lost, from)) {
    if (lost)
      iso->lost++;
    fail_request(iso->lp, req, status, lost ? LOST : NULL);
    return;
  }
  iso->replays++;
  wproc_t *to = replay_target(iso, from);
  if (to)
    send_to(to, req);
  else
    queue_push(iso, req, true);
}

/* Takes a complete POST /infer or POST /debug/fault: to the worker, or queued until one is
 * ready, or answered 503 (queue full). */
static void isolate_start(loop_t *lp, request_t *req) {
  if (!lp || !req)
    return;
  isolate_t *iso = loop_iso(lp);
  if (!iso) { /* POST /debug/fault reaches here only with --isolate; refuse it otherwise */
    fail_request(lp, req, CUV_ENOTSUP, NULL);
    return;
  }
  if (iso->cur && iso->cur->ready && !iso->stopping) {
    send_to(iso->cur, req);
  } else if (iso->stopping || iso->q.len >= lp->srv->isolate_queue) {
    iso->refused++;
    lp->n.refused++;
    req->rejected = true;
    fail_request(lp, req, CUV_ECLOSED, iso->stopping ? STOPPING : FULL);
  } else {
    queue_push(iso, req, false);
  }
}

/* A queued request (REQ_WAITING) whose connection closed leaves the queue. */
static void isolate_forget(loop_t *lp, request_t *req) {
  if (!lp || !loop_iso(lp) || !req)
    return;
  isolate_t *iso = loop_iso(lp);
  waitq_remove(&iso->q, req);
  iso->queued_gauge = iso->q.len;
}

/* ---- the active worker and its spare ------------------------------------------------------ */

static uint64_t unix_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* A spare starts only beside a ready active worker: while one is starting, a second start would
 * only slow it down (both make a context on the same device), and it would be the spare. */
static void ensure_spare(isolate_t *iso) {
  if (iso->stopping || !iso->lp->srv->isolate_spares || iso->spare || !iso->cur ||
      !iso->cur->ready || uv_is_active((uv_handle_t *)&iso->timer))
    return;
  spawn(iso, AS_SPARE);
}

/* The active worker is ready (its ready frame, or a ready spare promoted): the queue goes to it. */
static void cur_ready(isolate_t *iso) {
  wproc_t *w = iso->cur;
  iso->ready = true;
  iso->backoff_ms = 0;
  if (iso->lost_at_ns) {
    iso->last_recovery_us = (uv_hrtime() - iso->lost_at_ns) / 1000u;
    iso->lost_at_ns = 0;
  }
  request_t *req;
  while (!iso->stopping && w == iso->cur && !w->gone && (req = queue_pop(iso)) != NULL)
    if (route_runs_model(req->route) && waitq_past_timeout(req, uv_hrtime()))
      answer_timeout(iso, req); /* its timer is due: it was still waiting */
    else
      send_to(w, req);
  ensure_spare(iso);
}

static void set_cur(isolate_t *iso, wproc_t *w) {
  iso->cur = w;
  iso->pid = w->proc.pid;
  if (iso->installed++)
    iso->restarts++;
}

/* The active worker failed (cur is NULL): the spare takes over, ready or still starting (it is
 * further on than a new one would be), or a new worker starts (no spare, or one known to be
 * dying: it died with the active one, and its end comes as a spare's). */
static void replace_cur(isolate_t *iso) {
  wproc_t *s = iso->spare;
  if (!s || dying(s)) {
    spawn(iso, AS_CUR);
    return;
  }
  iso->spare = NULL;
  iso->spare_pid = 0;
  iso->spare_ready = false;
  set_cur(iso, s);
  if (s->ready) {
    iso->promotions++;
    cur_ready(iso);
  }
}

static void on_ready(wproc_t *w) {
  isolate_t *iso = w->iso;
  w->ready = true;
  if (w == iso->spare) {
    iso->spare_ready = true;
    iso->spare_backoff_ms = 0;
  } else if (w == iso->cur) {
    cur_ready(iso);
  }
}

/* The active worker's device faulted: it answers what it holds and exits. New requests go to its
 * successor (the spare, or one that starts now), while it drains. */
static void on_faulted(wproc_t *w) {
  isolate_t *iso = w->iso;
  w->draining = true;
  if (iso->cur != w)
    return; /* a spare runs nothing that could fault; its end is handled as any spare's */
  iso->cur = NULL;
  iso->ready = false;
  iso->pid = 0;
  iso->lost_at_ns = uv_hrtime();
  iso->last_exit_unix_us = unix_us();
  if (!iso->stopping)
    replace_cur(iso);
}

/* ---- replies ------------------------------------------------------------------------------ */

/* The outstanding request with this id, taken off the list; NULL if there is none. Replies come
 * in about the order sent, so the search ends near the head. */
static request_t *outstanding_take(wproc_t *w, uint64_t id) {
  request_t **p = &w->head, *prev = NULL;
  while (*p && ireq(*p)->id != id) {
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

/* How many live workers sent replies that their latest report does not count yet. */
static void count_behind(isolate_t *iso) {
  unsigned behind = 0;
  for (const wproc_t *w = iso->live; w; w = w->next_live)
    behind += w->last.r.replies != w->replies;
  iso->reports_behind = behind;
}

/* The sum GET /metrics reads: the ended workers' last reports and the live ones' latest. */
static void publish_reports(isolate_t *iso) {
  for (size_t i = 0; i < REPORT_WORDS; i++) {
    uint64_t v = report_word_is_gauge(i) ? 0 : iso->retired.w[i];
    for (const wproc_t *w = iso->live; w; w = w->next_live)
      v += w->last.w[i];
    iso->reports[i] = v;
  }
  count_behind(iso);
}

/* Whether id is a request moved off w (a suspected hang); forgotten as its late reply came. */
static bool moved_away_take(wproc_t *w, uint64_t id) {
  for (unsigned i = 0; i < w->nmoved; i++)
    if (w->moved[i].id == id) {
      w->moved[i] = w->moved[--w->nmoved];
      return true;
    }
  return false;
}

/* One reply frame; -1 when it makes no sense (the worker is then killed). */
static int on_reply(wproc_t *w, const frame_t *f) {
  if (f->id == FRAME_CONTROL_ID && f->rows == FRAME_ROWS_STATS) {
    memcpy(w->last.w, f->payload, sizeof w->last.w);
    publish_reports(w->iso);
    return 0;
  }
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
  if (!req && !moved_away_take(w, f->id))
    return -1;
  w->replies++;
  w->replied_ns = uv_hrtime(); /* it is not stalled (--stall-suspect-ms) */
  count_behind(w->iso);
  if (!req) { /* the late reply of a request moved off this worker (answered elsewhere) */
    w->iso->late_replies++;
    return 0;
  }
  if (f->status == FRAME_STATUS_TIMEOUT && route_runs_model(req->route)) {
    answer_timeout(w->iso, req); /* it waited there past its timeout: not an error to retry */
    return 0;
  }
  if (f->status != 0 && route_runs_model(req->route)) { /* on another worker (retry_wanted) */
    retry_or_fail(w->iso, req, f->status, false, w);
    return 0;
  }
  uint32_t rows = route_runs_model(req->route) ? req->batch : 0;
  req->gpu_status = f->status;
  if (f->status == 0 && f->rows != rows)
    req->gpu_status = CUV_EINVAL; /* never answer with the wrong shape */
  if (req->gpu_status == 0 && w == w->iso->spare)
    req->extra_header = FROM_SPARE; /* it runs only moves and replays: the client can tell */
  if (req->gpu_status == 0 && f->payload_len) {
    void *data = malloc(f->payload_len);
    if (data) {
      memcpy(data, f->payload, f->payload_len);
      req->out = (cuv_output_t){.data = data, .release = release_free, .release_arg = data};
    } else {
      req->gpu_status = CUV_ENOMEM;
    }
  }
  req->done(req);
  return 0;
}

/* ---- a worker's end ----------------------------------------------------------------------- */

static void on_handle_closed(uv_handle_t *handle) {
  wproc_t *w = handle->data;
  if (--w->handles > 0)
    return;
  frame_reader_free(&w->rd);
  free(w->moved);
  free(w);
}

static void on_timer_closed(uv_handle_t *handle) { (void)handle; }

static void close_timers(isolate_t *iso) {
  waitq_close(&iso->q); /* empty: fail_queue answered what waited */
  if (!iso->timer_closed)
    uv_close((uv_handle_t *)&iso->timer, on_timer_closed);
  if (!iso->watchdog_closed)
    uv_close((uv_handle_t *)&iso->watchdog, on_timer_closed);
  iso->timer_closed = iso->watchdog_closed = true;
}

/* The back-off ended: the active worker that could not start, or a spare, starts again. */
static void on_respawn_timer(uv_timer_t *timer) {
  isolate_t *iso = timer->data;
  if (iso->stopping)
    return;
  if (!iso->cur)
    replace_cur(iso);
  else
    ensure_spare(iso);
}

static unsigned next_backoff(unsigned ms) {
  ms = ms ? ms * 2 : BACKOFF_MIN_MS;
  return ms > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : ms;
}

static void log_end(const wproc_t *w, bool spare, unsigned lost) {
  const char *role = spare ? "spare worker" : "worker";
  if (w->term_signal)
    fprintf(stderr, "tcp-infer: %s %d killed by signal %d", role, w->proc.pid, w->term_signal);
  else
    fprintf(stderr, "tcp-infer: %s %d exited with status %lld%s", role, w->proc.pid,
            (long long)w->exit_status,
            w->exit_status == WORKER_EXIT_FAULT ? " (device fault)" : "");
  fprintf(stderr, ", %u request%s it held replayed or answered 503\n", lost,
          lost == 1 ? "" : "s");
}

/* What comes after the active worker's end: its successor now (it had served, or a ready spare
 * waits), or after a back-off (it never got ready: maybe none can, and the queue it held goes). */
static void after_cur_end(isolate_t *iso, bool was_ready) {
  if (was_ready || usable(iso->spare)) { /* not a dying spare: a failed spawn would come back */
    replace_cur(iso);
    return;
  }
  fail_queue(iso, NOT_STARTED);
  iso->backoff_ms = next_backoff(iso->backoff_ms);
  uv_timer_start(&iso->timer, on_respawn_timer, iso->backoff_ms, 0);
}

/* A spare ended (it runs no requests): another after the back-off, which grows while spares end
 * before they are ready (a device that takes no second context, say). */
static void after_spare_end(isolate_t *iso, bool was_ready) {
  iso->spare_backoff_ms = was_ready ? BACKOFF_MIN_MS : next_backoff(iso->spare_backoff_ms);
  if (!uv_is_active((uv_handle_t *)&iso->timer))
    uv_timer_start(&iso->timer, on_respawn_timer, iso->spare_backoff_ms, 0);
}

static void live_remove(isolate_t *iso, wproc_t *w) {
  for (wproc_t **p = &iso->live; *p; p = &(*p)->next_live)
    if (*p == w) {
      *p = w->next_live;
      return;
    }
}

/* The worker's role ends: cur or spare becomes NULL. The successor is chosen after. */
static void drop_role(isolate_t *iso, wproc_t *w) {
  if (iso->cur == w) {
    iso->cur = NULL;
    iso->ready = false;
    iso->pid = 0;
    iso->lost_at_ns = uv_hrtime();
    iso->last_exit_unix_us = unix_us();
  } else if (iso->spare == w) {
    iso->spare = NULL;
    iso->spare_pid = 0;
    iso->spare_ready = false;
  }
}

/* Counts the end; false when it was a clean exit at shutdown. */
static bool count_end(isolate_t *iso, const wproc_t *w) {
  bool clean = iso->stopping && w->exit_status == 0 && !w->term_signal;
  if (iso->stopping && !clean && !w->draining && w->ready) /* one never ready held no work */
    iso->unclean_stop = true; /* e.g. a leak under ASan: the server's exit status says so */
  if (!w->term_signal && w->exit_status == WORKER_EXIT_FAULT)
    iso->fault_exits++;
  else if (!clean)
    iso->crashes++;
  return !clean;
}

/* Once the pipe is at EOF (every reply read) and the exit was seen: the successor is chosen
 * first (so that GET /stats counts the restart before a client sees a 503), then the requests it
 * still held are answered 503. */
static void maybe_gone(wproc_t *w) {
  if (!w->exited || !w->eof || w->gone)
    return;
  isolate_t *iso = w->iso;
  w->gone = true;
  live_remove(iso, w);
  for (size_t i = 0; i < REPORT_WORDS; i++) /* its last report stays counted */
    iso->retired.w[i] += report_word_is_gauge(i) ? 0 : w->last.w[i];
  publish_reports(iso);
  bool was_cur = iso->cur == w, was_spare = iso->spare == w; /* neither when draining */
  drop_role(iso, w);
  bool failed = count_end(iso, w);
  if (iso->stopping && !iso->live)
    close_timers(iso);
  else if (was_cur && !iso->stopping)
    after_cur_end(iso, w->ready);
  else if (was_spare && !iso->stopping)
    after_spare_end(iso, w->ready);
  request_t *req = w->head;
  w->head = w->tail = NULL;
  unsigned held = 0;
  while (req) { /* the list is detached: the answers may close connections, not touch it */
    request_t *next = req->next_wait;
    req->next_wait = NULL;
    retry_or_fail(iso, req, CUV_ECLOSED, true, w);
    held++;
    req = next;
  }
  if (failed)
    log_end(w, was_spare, held);
  uv_close((uv_handle_t *)&w->pipe, on_handle_closed);
  uv_close((uv_handle_t *)&w->proc, on_handle_closed);
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

/* ---- the hang watchdog -------------------------------------------------------------------- */

/* Whether the worker counts as hung: its oldest outstanding request waited the timeout, or the
 * oldest of those moved off it is still not answered there (a worker still starting holds no
 * request; its start-up has a limit of its own, below). */
static bool hung(const wproc_t *w, uint64_t now, uint64_t limit) {
  if (!limit || w->gone || w->killed || w->exited)
    return false;
  bool moved_hung = false;
  for (unsigned i = 0; i < w->nmoved && !moved_hung; i++)
    moved_hung = now - w->moved[i].sent_ns > limit;
  return moved_hung || (w->head && now - ireq(w->head)->sent_ns > limit);
}

/* Whether the worker is stuck in its start-up: not ready that long after it was spawned. The
 * limit is generous: a start (a context, the module, the weights) takes long on a loaded
 * machine, and what waits for it is bounded by the queue. */
static bool stuck_starting(const wproc_t *w, uint64_t now, uint64_t limit) {
  return limit && !w->ready && !w->gone && !w->killed && !w->exited &&
         now - w->started_ns > limit;
}

/* An inference at its worker that may move to another: still wanted, not moved yet (once). */
static bool movable(const request_t *req) {
  return route_runs_model(req->route) && !req->orphan && !ireq(req)->moved;
}

/* A movable inference at its worker that long without an answer: it may sit behind a hung
 * kernel. */
static bool suspect(const request_t *req, uint64_t now, uint64_t limit) {
  return movable(req) && now - ireq(req)->sent_ns > limit;
}

/* Remembers the request's id at w (its late reply is dropped); false without memory. */
static bool moved_away_add(wproc_t *w, const request_t *req) {
  if (w->nmoved == w->moved_cap) {
    unsigned cap = w->moved_cap ? 2 * w->moved_cap : 16;
    struct moved_away *m = realloc(w->moved, cap * sizeof *m);
    if (!m)
      return false;
    w->moved = m;
    w->moved_cap = cap;
  }
  w->moved[w->nmoved++] = (struct moved_away){ireq(req)->id, ireq(req)->sent_ns};
  return true;
}

/* The request leaves w's list for `to`'s; w's reply to it, if one comes, is dropped. Without the
 * memory to remember it, it stays. */
static bool move_request(wproc_t *w, request_t *req, request_t *prev, wproc_t *to) {
  if (!moved_away_add(w, req))
    return false;
  if (prev)
    prev->next_wait = req->next_wait;
  else
    w->head = req->next_wait;
  if (w->tail == req)
    w->tail = prev;
  req->next_wait = NULL;
  ireq(req)->moved = true;
  w->iso->moved++;
  send_to(to, req);
  return true;
}

/* The worker's movable inferences unanswered for more than `limit` (0: all of them) go to
 * another usable worker (the spare, or the active one from the spare), each once; how many did.
 * The worker keeps its role. */
static unsigned move_off(isolate_t *iso, wproc_t *w, uint64_t now, uint64_t limit) {
  wproc_t *to = replay_target(iso, w);
  unsigned moved = 0;
  if (!to || w->gone || w->killed || w->exited)
    return 0;
  request_t *prev = NULL, *req = w->head;
  while (req) {
    request_t *next = req->next_wait;
    bool due = limit ? suspect(req, now, limit) : movable(req);
    if (due && move_request(w, req, prev, to))
      moved++;
    else
      prev = req;
    req = next;
  }
  return moved;
}

/* --hang-suspect-ms: the worker's inferences unanswered that long move. */
static void move_suspects(isolate_t *iso, wproc_t *w, uint64_t now, uint64_t limit) {
  if (limit)
    move_off(iso, w, now, limit);
}

/* Whether the worker answered none of its requests for more than `limit`: counted from its last
 * reply, or from the send of its oldest movable inference if that came later (the time it sat
 * idle, and a request that cannot move, such as POST /debug/hang's, do not count). A worker
 * under load answers all the time, so only one that stopped as a whole (SIGSTOP, a device whose
 * every stream halted, a deadlock) is stalled, long before its end or its fault is seen. */
static bool stalled(const wproc_t *w, uint64_t now, uint64_t limit) {
  const request_t *oldest = w->head;
  while (oldest && !movable(oldest))
    oldest = oldest->next_wait;
  if (!limit || !oldest)
    return false;
  uint64_t since = ireq(oldest)->sent_ns > w->replied_ns ? ireq(oldest)->sent_ns : w->replied_ns;
  return now - since > limit;
}

/* --stall-suspect-ms: every movable inference of a stalled worker moves at once. */
static void move_stalled(isolate_t *iso, wproc_t *w, uint64_t now, uint64_t limit) {
  if (stalled(w, now, limit) && move_off(iso, w, now, 0))
    iso->stalls++;
}

/* The first queued request past its deadline, taken off the queue; NULL if none is. */
static request_t *queue_take_expired(isolate_t *iso, uint64_t now) {
  for (request_t *req = iso->q.head; req; req = req->next_wait)
    if (past_deadline(iso, req, now)) {
      isolate_forget(iso->lp, req);
      return req;
    }
  return NULL;
}

/* Queued requests past their deadline: 503 (no worker was ready for them in time). One at a
 * time, the queue kept whole between them: an answer may close a connection, whose other queued
 * requests then leave the queue (isolate_forget). */
static void expire_queue(isolate_t *iso, uint64_t now) {
  request_t *req;
  while ((req = queue_take_expired(iso, now)) != NULL) {
    iso->expired++;
    fail_request(iso->lp, req, CUV_ECLOSED, EXPIRED);
  }
}

static void on_watchdog(uv_timer_t *timer) {
  isolate_t *iso = timer->data;
  const server_t *s = iso->lp->srv;
  uint64_t now = uv_hrtime(), limit = (uint64_t)s->isolate_timeout_ms * 1000000u;
  uint64_t start_limit = (uint64_t)s->isolate_start_timeout_ms * 1000000u;
  /* More than two periods since the last run: the loop itself was held (a loaded machine), and
   * the replies that came meanwhile may not be read yet: no worker is judged stalled now. */
  bool loop_late = iso->watchdog_ran_ns && now - iso->watchdog_ran_ns > 2 * iso->watchdog_period_ns;
  iso->watchdog_ran_ns = now;
  expire_queue(iso, now);
  for (wproc_t *w = iso->live; w; w = w->next_live) {
    if (hung(w, now, limit)) {
      fprintf(stderr, "tcp-infer: worker %d left a request unanswered for %u ms: killed\n",
              w->proc.pid, s->isolate_timeout_ms);
      iso->hangs++;
    } else if (stuck_starting(w, now, start_limit)) {
      fprintf(stderr, "tcp-infer: worker %d not ready %u ms after its start: killed\n",
              w->proc.pid, s->isolate_start_timeout_ms);
      iso->start_timeouts++;
    } else {
      if (!loop_late)
        move_stalled(iso, w, now, (uint64_t)s->stall_suspect_ms * 1000000u);
      move_suspects(iso, w, now, (uint64_t)s->hang_suspect_ms * 1000000u);
      continue;
    }
    kill_worker(w); /* its end comes through maybe_gone: replays, the spare promoted */
  }
}

/* The shortest nonzero of the limits the watchdog checks; 0 when all are off. */
static unsigned shortest(unsigned a, unsigned b) { return !a ? b : !b ? a : a < b ? a : b; }

/* Checks a few times per limit (the shortest: the hang timeout, the start timeout, the hang
 * and stall suspicions, the deadline): a hung worker is killed between 1 and 1.25 timeouts. */
static void start_watchdog(isolate_t *iso) {
  const server_t *s = iso->lp->srv;
  unsigned ms = shortest(shortest(s->isolate_timeout_ms, s->isolate_start_timeout_ms),
                         shortest(s->hang_suspect_ms, s->isolate_deadline_ms));
  ms = shortest(ms, s->stall_suspect_ms);
  uv_timer_init(&iso->lp->loop, &iso->watchdog);
  iso->watchdog.data = iso;
  if (ms) {
    uint64_t period = ms / 4 ? ms / 4 : 1;
    iso->watchdog_period_ns = period * 1000000u;
    uv_timer_start(&iso->watchdog, on_watchdog, period, period);
  }
}

/* ---- starting and stopping ---------------------------------------------------------------- */

/* The new worker takes its role; a failed start is retried after the back-off. */
static void spawned(isolate_t *iso, wproc_t *w, role_t role) {
  w->next_live = iso->live;
  iso->live = w;
  if (role == AS_CUR) {
    set_cur(iso, w);
  } else {
    iso->spare = w;
    iso->spare_pid = w->proc.pid;
  }
}

static void spawn_failed(isolate_t *iso, role_t role) {
  if (role == AS_CUR)
    after_cur_end(iso, false);
  else
    after_spare_end(iso, false);
}

static int spawn(isolate_t *iso, role_t role) {
  loop_t *lp = iso->lp;
  wproc_t *w = calloc(1, sizeof *w);
  if (!w || frame_reader_init(&w->rd, true, lp->srv->max_batch) != 0) {
    free(w);
    spawn_failed(iso, role); /* a back-off, then another try */
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
  /* the worker's rank among its loop's, for --debug-start-hang (uv_spawn copies the args) */
  char start[24];
  snprintf(start, sizeof start, "%u", ++iso->spawns);
  iso->args[iso->nargs] = "--worker-start";
  iso->args[iso->nargs + 1] = start;
  char device[24]; /* the device of the front's loop (--devices): the worker opens that one */
  snprintf(device, sizeof device, "%d", lp->gpu->ordinal);
  iso->args[iso->nargs + 2] = "--worker-device";
  iso->args[iso->nargs + 3] = device;
  w->started_ns = uv_hrtime();
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
    spawn_failed(iso, role);
    return CUV_ENOMEM;
  }
  spawned(iso, w, role);
  return 0;
}

/* argv of the worker: this executable, --worker, and the front's own options (the worker reads
 * the model's: --ptx, --seed, --max-batch, --workspaces, --cublas, --sim-delay-us, ...), then
 * room for --worker-start K and --worker-device D (spawn fills them). */
static char **worker_args(const server_t *s) {
  char **args = calloc((size_t)s->argc + 7, sizeof *args);
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

/* Spawns the loop's worker (on the loop's thread). */
static int isolate_open(loop_t *lp) {
  if (!lp || !lp->srv)
    return CUV_EINVAL;
  isolate_t *iso = calloc(1, sizeof *iso);
  if (!iso || !(iso->args = worker_args(lp->srv))) {
    free(iso);
    return CUV_ENOMEM;
  }
  iso->nargs = (unsigned)lp->srv->argc + 1; /* exe, --worker, the front's options after argv[0] */
  iso->lp = lp;
  uv_timer_init(&lp->loop, &iso->timer);
  iso->timer.data = iso;
  waitq_init(&iso->q, lp, queue_expired, iso);
  start_watchdog(iso);
  lp->backend_state = iso;
  spawn(iso, AS_CUR); /* a failure retries after a back-off; the spare follows its ready frame */
  return 0;
}

static void on_stop_timeout(uv_timer_t *timer) {
  isolate_t *iso = timer->data;
  for (wproc_t *w = iso->live; w; w = w->next_live)
    kill_worker(w);
}

static void on_shutdown(uv_shutdown_t *sh, int status) {
  wproc_t *w = sh->data;
  if (status < 0 && status != UV_ECANCELED && !w->gone)
    kill_worker(w);
}

/* Shutdown: nothing new goes out; every worker (the spare too) sees EOF, finishes what it holds
 * (their replies still free the orphaned requests) and exits 0; killed after a grace period. */
static void isolate_stop(loop_t *lp) {
  if (!lp || !loop_iso(lp) || loop_iso(lp)->stopping)
    return;
  isolate_t *iso = loop_iso(lp);
  iso->stopping = true;
  fail_queue(iso, STOPPING);
  uv_timer_stop(&iso->timer);
  if (!iso->watchdog_closed)
    uv_close((uv_handle_t *)&iso->watchdog, on_timer_closed); /* the grace period rules now */
  iso->watchdog_closed = true;
  if (!iso->live) {
    close_timers(iso);
    return;
  }
  uv_timer_start(&iso->timer, on_stop_timeout, STOP_GRACE_MS, 0);
  for (wproc_t *w = iso->live; w; w = w->next_live) {
    w->shutdown.data = w;
    if (uv_shutdown(&w->shutdown, (uv_stream_t *)&w->pipe, on_shutdown) != 0)
      kill_worker(w);
  }
}

/* After every loop ended: -1 when its worker did not end cleanly (status 0) at shutdown. */
static int isolate_free(loop_t *lp) {
  if (!lp || !loop_iso(lp))
    return 0;
  int rc = loop_iso(lp)->unclean_stop ? -1 : 0;
  free(loop_iso(lp)->args[0]);
  free(loop_iso(lp)->args);
  free(loop_iso(lp));
  lp->backend_state = NULL;
  return rc;
}

/* ---- the backend ------------------------------------------------------------------------ */

/* The front's requests hold nothing of the loop's once answered. */
static void isolate_release(loop_t *lp, request_t *req) {}

const backend_t backend_isolate = {.name = "isolate",
                                   .req_size = sizeof(iso_req_t),
                                   .init = isolate_open,
                                   .submit = isolate_start,
                                   .forget = isolate_forget,
                                   .release = isolate_release,
                                   .stop = isolate_stop,
                                   .finish = isolate_free,
                                   .ready = isolate_ready};
