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
#include <string.h>

#include "sim.h"

/* ---- Commands -------------------------------------------------------------------------------- */

void *sim_cmd_new(const struct sim_cmd_ops *ops, size_t size) {
  struct sim_cmd *cmd = calloc(1, size);
  if (!cmd)
    return NULL;
  cmd->ops = ops;
  cmd->size = size;
  return cmd;
}

struct sim_cmd *sim_cmd_clone(const struct sim_cmd *cmd) {
  struct sim_cmd *copy = malloc(cmd->size);
  if (!copy)
    return NULL;
  memcpy(copy, cmd, cmd->size);
  copy->next = NULL;
  if (cmd->ops->dup && !cmd->ops->dup(copy)) {
    free(copy);
    return NULL;
  }
  return copy;
}

void sim_cmd_free(struct sim_cmd *cmd) {
  if (cmd->ops->release)
    cmd->ops->release(cmd);
  free(cmd);
}

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

void sim_stream_stop_all(struct sim_ctx *ctx) {
  size_t n;
  struct sim_obj **handles = sim_handle_take_all(ctx, SIM_OBJ_STREAM, &n);
  for (size_t i = 0; i < n; i++)
    ((struct sim_stream *)handles[i])->destroyed = true;
  for (struct sim_stream *s = ctx->streams; s; s = s->next) {
    atomic_store(&s->stop, true);
    sim_capture_leave(s);
    pthread_cond_signal(&s->wake);
  }
  sim_hostfn_reset_ctx(ctx);
  sim_wake_all();
  while (ctx->workers > 0)
    sim_wait();
  for (size_t i = 0; i < n; i++)
    sim_stream_unref((struct sim_stream *)handles[i]);
  free(handles);
  if (ctx->null_stream) {
    sim_stream_unref(ctx->null_stream);
    ctx->null_stream = NULL;
  }
}

/* ---- Resolving and submitting ---------------------------------------------------------------- */

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

CUresult sim_stream_submit(struct sim_stream *s, struct sim_cmd *cmd) {
  if (s->cap)
    return sim_capture_append(s, cmd);
  if (cmd->ops->bind)
    cmd->ops->bind(cmd);
  sim_stream_push(s, cmd);
  return CUDA_SUCCESS;
}

CUresult sim_submit(CUstream h, struct sim_cmd *cmd) {
  struct sim_stream *s;
  sim_lock();
  CUresult r = sim_stream_get_live(h, &s);
  if (r == CUDA_SUCCESS)
    r = sim_stream_submit(s, cmd);
  else
    sim_cmd_free(cmd);
  sim_unlock();
  return r;
}

/* ---- Entry points ---------------------------------------------------------------------------- */

CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags) {
  SIM_ENTER(cuStreamCreate);
  if (!phStream || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_ctx *ctx;
  struct sim_stream *s;
  sim_lock();
  CUresult r = sim_ctx_require(&ctx);
  if (r == CUDA_SUCCESS)
    r = sim_ctx_fault(ctx);
  if (r == CUDA_SUCCESS)
    r = sim_stream_create(ctx, Flags, false, &s);
  if (r == CUDA_SUCCESS && !sim_handle_add(&s->obj)) {
    s->destroyed = true; /* let the worker exit */
    pthread_cond_signal(&s->wake);
    sim_stream_unref(s);
    r = CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (r == CUDA_SUCCESS)
    *phStream = (CUstream)s;
  sim_unlock();
  return r;
}

/* Returns at once; queued work still runs, then the worker exits and the stream is freed. After
 * a sticky fault it fails with the fault and destroys nothing (as the driver): the context's
 * objects go with cuDevicePrimaryCtxReset. */
CUresult CUDAAPI cuStreamDestroy(CUstream hStream) {
  SIM_ENTER(cuStreamDestroy);
  sim_lock();
  struct sim_stream *s = (struct sim_stream *)sim_handle_get(hStream, SIM_OBJ_STREAM);
  CUresult r = s ? sim_ctx_fault(s->obj.ctx) : CUDA_ERROR_INVALID_HANDLE;
  if (r != CUDA_SUCCESS) {
    sim_unlock();
    return r;
  }
  sim_handle_remove(&s->obj);
  sim_capture_leave(s);
  s->destroyed = true;
  pthread_cond_signal(&s->wake);
  sim_stream_unref(s);
  sim_unlock();
  return CUDA_SUCCESS;
}

/* Synchronous calls on a capturing stream are illegal: they fail and invalidate the capture. On
 * any other stream they are "potentially unsafe" calls (see sim_capture_check_unsafe). */
static CUresult check_not_capturing(struct sim_stream *s) {
  if (!s->cap)
    return sim_capture_check_unsafe();
  sim_capture_invalidate(s);
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult CUDAAPI cuStreamQuery(CUstream hStream) {
  SIM_ENTER(cuStreamQuery);
  struct sim_stream *s;
  sim_lock();
  CUresult r = sim_stream_get_live(hStream, &s);
  if (r == CUDA_SUCCESS)
    r = check_not_capturing(s);
  if (r == CUDA_SUCCESS && s->completed != s->submitted)
    r = CUDA_ERROR_NOT_READY;
  sim_unlock();
  return r;
}

/* Waits for everything queued on the stream so far (lock held); the status a synchronize call
 * returns. */
static CUresult stream_wait_queued(struct sim_stream *s) {
  struct sim_ctx *ctx = s->obj.ctx;
  uint64_t target = s->submitted;
  sim_stream_ref(s);
  while (!sim_stream_settled(s, target))
    sim_wait();
  CUresult r = sim_ctx_settle(ctx);
  if (r == CUDA_SUCCESS && s->completed < target)
    r = CUDA_ERROR_CONTEXT_IS_DESTROYED; /* reset while waiting */
  sim_stream_unref(s);
  return r;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) {
  SIM_ENTER_SYNC(cuStreamSynchronize);
  struct sim_stream *s;
  sim_lock();
  /* Not sim_stream_get_live: after a fault this still waits for a command in progress. */
  CUresult r = sim_stream_get(hStream, &s);
  if (r == CUDA_SUCCESS && !sim_ctx_fault(s->obj.ctx))
    r = check_not_capturing(s);
  if (r == CUDA_SUCCESS)
    r = stream_wait_queued(s);
  sim_unlock();
  return r;
}

CUresult sim_stream_wait_copy(CUstream h) {
  struct sim_stream *s;
  sim_lock();
  CUresult r = sim_stream_get(h, &s);
  if (r == CUDA_SUCCESS && !s->cap)
    r = stream_wait_queued(s);
  sim_unlock();
  return r;
}
