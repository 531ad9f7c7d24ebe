/* Streams: each stream is a FIFO of commands executed in order by its own worker thread.
 *
 * Enqueueing appends a small malloc'd command under the lock and signals the worker's condition
 * variable, so a round trip costs microseconds. The worker executes each command with the lock
 * released, then counts it completed and wakes every waiter. After the context's sticky fault,
 * commands are dropped (counted completed without running), except host functions and flag
 * writes on a stream other than the faulting one with nothing dropped in front of them since the
 * fault (behind a kernel that was running when it hit, whose twin runs to its end). The GPU ran
 * those in one run and in the next ended that kernel early and ran nothing behind it
 * (tests/engine/conformance.c test_fault_runs_queued_host_work): this is the first of its two
 * answers. A write behind dropped work must not land: its reader would take the work for done
 * (cuv's reactor does; apps/tcp-infer's fault tests answered wrongly).
 *
 * The NULL stream (also CU_STREAM_LEGACY and CU_STREAM_PER_THREAD) is one more worker per context,
 * created on first use. It does NOT implement the legacy stream's implicit synchronization with
 * other blocking streams: cuv only creates CU_STREAM_NON_BLOCKING streams, for which the real
 * driver has no such synchronization either. */

#include <stdlib.h>

#include "cmd.h"
#include "context.h"
#include "handle.h"
#include "stream.h"
#include "util.h"

/* ---- Worker ---------------------------------------------------------------------------------- */

static struct sim_cmd *queue_pop(struct sim_stream *s) {
  struct sim_cmd *cmd = s->head;
  s->head = cmd->next;
  if (!s->head)
    s->tail = NULL;
  return cmd;
}

static void stream_unlink(struct sim_stream *s) {
  struct sim_ctx *ctx = s->obj.ctx;
  for (struct sim_stream **p = &ctx->streams; *p; p = &(*p)->next) {
    if (*p == s) {
      *p = s->next;
      break;
    }
  }
  s->next = NULL;
}

/* Runs until the stream is destroyed and drained, or stopped by a context reset. */
static void *worker_main(void *arg) {
  struct sim_stream *s = arg;
  struct sim_ctx *ctx = s->obj.ctx;
  pthread_setname_np(pthread_self(), s->is_null ? "cuv-sim-null" : "cuv-sim-stream");
  sim_lock();
  for (;;) {
    while (!s->head && !s->destroyed && !atomic_load(&s->stop))
      sim_wait_on(&s->wake);
    if (atomic_load(&s->stop) || !s->head)
      break;
    struct sim_cmd *cmd = queue_pop(s);
    /* Decided under the lock with `busy`: once a fault is visible, no kernel, copy or memset
     * starts. */
    bool faulted = sim_ctx_fault(ctx) != CUDA_SUCCESS;
    bool run = !faulted || (cmd->ops->after_fault && ctx->fault_stream != s && !s->dropped);
    s->dropped = s->dropped || !run;
    cmd->skipped = !run;
    s->busy = run && !cmd->ops->app_code;
    sim_unlock();
    if (run)
      cmd->ops->run(cmd, s);
    sim_lock();
    s->busy = false;
    sim_cmd_free(cmd);
    s->completed++;
    sim_wake_all();
  }
  /* Stopped by a reset: whatever is still queued is dropped. */
  while (s->head) {
    sim_cmd_free(queue_pop(s));
    s->completed++;
  }
  stream_unlink(s);
  ctx->workers--;
  sim_wake_all();
  sim_stream_unref(s); /* the worker's reference */
  sim_unlock();
  return NULL;
}

bool sim_stream_settled(struct sim_stream *s, uint64_t target) {
  return s->completed >= target || atomic_load(&s->stop) ||
         (sim_ctx_fault(s->obj.ctx) && !s->busy);
}

/* ---- Lifetime -------------------------------------------------------------------------------- */

void sim_stream_ref(struct sim_stream *s) { s->refs++; }

void sim_stream_unref(struct sim_stream *s) {
  if (--s->refs > 0)
    return;
  pthread_cond_destroy(&s->wake);
  free(s);
}

CUresult sim_stream_create(struct sim_ctx *ctx, unsigned flags, bool is_null,
                           struct sim_stream **out) {
  struct sim_stream *s = calloc(1, sizeof *s);
  if (!s)
    return CUDA_ERROR_OUT_OF_MEMORY;
  s->obj.type = SIM_OBJ_STREAM;
  s->obj.ctx = ctx;
  s->flags = flags;
  s->is_null = is_null;
  s->refs = 2; /* the owner (handle or ctx->null_stream) and the worker */
  pthread_cond_init(&s->wake, NULL);
  if (!sim_thread_start(worker_main, s)) {
    pthread_cond_destroy(&s->wake);
    free(s);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  s->next = ctx->streams;
  ctx->streams = s;
  ctx->workers++;
  *out = s;
  return CUDA_SUCCESS;
}

/* ---- Resolving and pushing ------------------------------------------------------------------ */

static bool is_null_handle(CUstream h) {
  return h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD;
}

CUresult sim_stream_get(CUstream h, struct sim_stream **out) {
  if (is_null_handle(h)) {
    struct sim_ctx *ctx;
    CUresult r = sim_ctx_require(&ctx);
    if (r != CUDA_SUCCESS)
      return r;
    if (!ctx->null_stream) {
      r = sim_stream_create(ctx, 0, true, &ctx->null_stream);
      if (r != CUDA_SUCCESS)
        return r;
    }
    *out = ctx->null_stream;
    return CUDA_SUCCESS;
  }
  struct sim_obj *obj = sim_handle_get(h, SIM_OBJ_STREAM);
  if (!obj)
    return CUDA_ERROR_INVALID_HANDLE;
  *out = (struct sim_stream *)obj;
  return CUDA_SUCCESS;
}

CUresult sim_stream_get_live(CUstream h, struct sim_stream **out) {
  CUresult r = sim_stream_get(h, out);
  return r != CUDA_SUCCESS ? r : sim_ctx_fault((*out)->obj.ctx);
}

void sim_stream_push(struct sim_stream *s, struct sim_cmd *cmd) {
  cmd->next = NULL;
  if (s->tail)
    s->tail->next = cmd;
  else
    s->head = cmd;
  s->tail = cmd;
  s->submitted++;
  pthread_cond_signal(&s->wake);
}

/* ---- Waiting for a context's streams -------------------------------------------------------- */

struct drain_point {
  struct sim_stream *s;
  uint64_t target;
};

CUresult sim_stream_drain_ctx(struct sim_ctx *ctx) {
  size_t n = 0;
  for (struct sim_stream *s = ctx->streams; s; s = s->next)
    n++;
  struct drain_point *pts = calloc(n ? n : 1, sizeof *pts);
  if (!pts)
    return CUDA_ERROR_OUT_OF_MEMORY;
  /* Snapshot first: work submitted after this call is not waited for. */
  n = 0;
  for (struct sim_stream *s = ctx->streams; s; s = s->next) {
    sim_stream_ref(s);
    pts[n].s = s;
    pts[n++].target = s->submitted;
  }
  for (size_t i = 0; i < n; i++)
    while (!sim_stream_settled(pts[i].s, pts[i].target))
      sim_wait();
  for (size_t i = 0; i < n; i++)
    sim_stream_unref(pts[i].s);
  free(pts);
  return sim_ctx_settle(ctx);
}
