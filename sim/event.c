/* Events. Each cuEventRecord makes a fresh completion token that the record command marks done
 * when its stream reaches it; the event points to its most recent token. cuStreamWaitEvent and
 * cuEventSynchronize take the token current *at the time of the call*, so a later re-record does
 * not change what they wait for (record generations, as the real driver). A never-recorded event
 * has no token: it is complete, and waiting on it is a no-op.
 *
 * During stream capture, cuEventRecord creates no node (as the real driver without
 * CU_EVENT_RECORD_EXTERNAL): the event becomes a capture event, and cuStreamWaitEvent on it
 * either orders within the capture (a no-op in the simulator's linear graphs) or makes another
 * stream join the capture (fork). */

#include <stdlib.h>

#include "capture.h"
#include "cmd.h"
#include "context.h"
#include "enter.h"
#include "event.h"
#include "handle.h"
#include "stream.h"
#include "util.h"

/* ---- Tokens ---------------------------------------------------------------------------------- */

static struct sim_token *token_new(struct sim_ctx *ctx) {
  struct sim_token *t = calloc(1, sizeof *t);
  if (t) {
    t->refs = 1;
    t->ctx = ctx;
  }
  return t;
}

void sim_token_unref(struct sim_token *t) {
  if (t && --t->refs == 0)
    free(t);
}

/* ---- Events ---------------------------------------------------------------------------------- */

static void event_clear_capture(struct sim_event *e) {
  if (!e->cap)
    return;
  sim_capture_unref(e->cap);
  sim_stream_unref(e->cap_stream);
  e->cap = NULL;
  e->cap_stream = NULL;
}

void sim_event_unref(struct sim_event *e) {
  if (--e->refs > 0)
    return;
  sim_token_unref(e->last);
  event_clear_capture(e);
  free(e);
}

void sim_event_reset_ctx(struct sim_ctx *ctx) {
  size_t n;
  struct sim_obj **events = sim_handle_take_all(ctx, SIM_OBJ_EVENT, &n);
  for (size_t i = 0; i < n; i++)
    sim_event_unref((struct sim_event *)events[i]);
  free(events);
}

/* Is e last recorded into a capture sequence that is still active (not ended, not
 * invalidated)? */
static struct sim_capture *event_live_capture(const struct sim_event *e) {
  return e->cap && !e->cap->ended && !e->cap->invalidated ? e->cap : NULL;
}

/* ---- Commands -------------------------------------------------------------------------------- */

/* Record: the token is marked done when the command is released, which happens right after the
 * worker reached it, or when a context reset drops it. One dropped by the sticky fault never is:
 * the work it captured never completes, and cuStreamWaitEvent makes a stream wait for all of that
 * work, so a stream of another, healthy context waiting on it stays blocked for good (busy to
 * cuStreamQuery, its context unharmed), as the driver's documented semantics have it. Waiters of
 * the dead context itself and cuEventQuery or cuEventSynchronize of the event answer the fault. */
struct record_cmd {
  struct sim_cmd base;
  struct sim_token *token;
};

static void record_run(struct sim_cmd *cmd, struct sim_stream *s) {}

static void record_release(struct sim_cmd *cmd) {
  struct record_cmd *c = (struct record_cmd *)cmd;
  if (!cmd->skipped) {
    c->token->done = true;
    sim_wake_all();
  }
  sim_token_unref(c->token);
}

static const struct sim_cmd_ops record_ops = {.run = record_run, .release = record_release};

/* Wait: blocks the stream until the token is done, or until its own context faults or resets. A
 * captured external wait (flag CU_EVENT_WAIT_EXTERNAL) holds the event instead and takes its
 * current token at each launch. */
struct wait_cmd {
  struct sim_cmd base;
  struct sim_event *event;
  struct sim_token *token;
};

static void wait_run(struct sim_cmd *cmd, struct sim_stream *s) {
  struct sim_token *t = ((struct wait_cmd *)cmd)->token;
  if (!t)
    return;
  sim_lock();
  while (!t->done && !atomic_load(&s->stop) && !sim_ctx_fault(s->obj.ctx))
    sim_wait();
  sim_unlock();
}

static void wait_bind(struct sim_cmd *cmd) {
  struct wait_cmd *c = (struct wait_cmd *)cmd;
  if (c->event && !c->token && c->event->last) {
    c->token = c->event->last;
    c->token->refs++;
  }
}

static bool wait_dup(struct sim_cmd *copy) {
  struct wait_cmd *c = (struct wait_cmd *)copy;
  if (c->event)
    c->event->refs++;
  if (c->token)
    c->token->refs++;
  return true;
}

static void wait_release(struct sim_cmd *cmd) {
  struct wait_cmd *c = (struct wait_cmd *)cmd;
  sim_token_unref(c->token);
  if (c->event)
    sim_event_unref(c->event);
}

static const struct sim_cmd_ops wait_ops = {
    .run = wait_run, .bind = wait_bind, .dup = wait_dup, .release = wait_release};

/* ---- Entry points ---------------------------------------------------------------------------- */

#define SIM_EVENT_FLAGS                                                                          \
  (CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)

CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags) {
  SIM_ENTER(cuEventCreate);
  if (!phEvent || (Flags & ~(unsigned)SIM_EVENT_FLAGS) != 0 ||
      ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING)))
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_ctx *ctx;
  sim_lock();
  CUresult r = sim_ctx_require(&ctx);
  if (r == CUDA_SUCCESS)
    r = sim_ctx_fault(ctx);
  struct sim_event *e = NULL;
  if (r == CUDA_SUCCESS) {
    e = calloc(1, sizeof *e);
    if (!e || !sim_handle_add(&e->obj)) {
      free(e);
      r = CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  if (r == CUDA_SUCCESS) {
    e->obj.type = SIM_OBJ_EVENT;
    e->obj.ctx = ctx;
    e->flags = Flags;
    e->refs = 1;
    *phEvent = (CUevent)e;
  }
  sim_unlock();
  return r;
}

/* Does not wait: pending records complete on their own (tokens outlive the event). */
CUresult CUDAAPI cuEventDestroy(CUevent hEvent) {
  SIM_ENTER(cuEventDestroy);
  sim_lock();
  struct sim_event *e = (struct sim_event *)sim_handle_get(hEvent, SIM_OBJ_EVENT);
  CUresult r = e ? sim_ctx_fault(e->obj.ctx) : CUDA_ERROR_INVALID_HANDLE;
  if (r == CUDA_SUCCESS) {
    sim_handle_remove(&e->obj);
    sim_event_unref(e);
  }
  sim_unlock();
  return r;
}

/* Record into a capture: no node, the event now designates the capture's current position. */
static CUresult record_captured(struct sim_event *e, struct sim_stream *s) {
  if (s->cap->invalidated)
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  sim_token_unref(e->last);
  e->last = NULL;
  event_clear_capture(e);
  e->cap = s->cap;
  e->cap->refs++;
  e->cap_stream = s;
  sim_stream_ref(s);
  e->cap_ops = s->cap_ops;
  return CUDA_SUCCESS;
}

/* On an idle stream the record captures no pending work: the event is complete at once (a GPU
 * completes it within microseconds; a query right after finds it done). */
static CUresult record_now(struct sim_event *e, struct sim_stream *s) {
  bool idle = s->completed == s->submitted;
  struct record_cmd *c = idle ? NULL : sim_cmd_new(&record_ops, sizeof *c);
  struct sim_token *t = token_new(s->obj.ctx);
  if ((!idle && !c) || !t) {
    free(c);
    free(t);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  event_clear_capture(e);
  sim_token_unref(e->last);
  e->last = t; /* the event's reference */
  if (idle) {
    t->done = true;
    return CUDA_SUCCESS;
  }
  t->refs++;
  c->token = t; /* the command's reference */
  sim_stream_push(s, &c->base);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream) {
  SIM_ENTER(cuEventRecord);
  struct sim_stream *s;
  sim_lock();
  struct sim_event *e = (struct sim_event *)sim_handle_get(hEvent, SIM_OBJ_EVENT);
  CUresult r = e ? sim_stream_get_live(hStream, &s) : CUDA_ERROR_INVALID_HANDLE;
  if (r == CUDA_SUCCESS && e->obj.ctx != s->obj.ctx)
    r = CUDA_ERROR_INVALID_HANDLE; /* event and stream must be of the same context */
  if (r == CUDA_SUCCESS)
    r = s->cap ? record_captured(e, s) : record_now(e, s);
  sim_unlock();
  return r;
}

/* Query/synchronize of an event last recorded in a capture (as the driver answers): while the
 * capture is active, CUDA_ERROR_CAPTURED_EVENT, and the capture is invalidated; once it was
 * invalidated or ended, CUDA_ERROR_INVALID_VALUE until the event is recorded again. Otherwise a
 * query or synchronize is a "potentially unsafe" call during another capture. Lock held. */
static CUresult event_capture_check(struct sim_event *e) {
  if (!e->cap)
    return sim_capture_check_unsafe();
  if (!event_live_capture(e))
    return CUDA_ERROR_INVALID_VALUE;
  e->cap->invalidated = true;
  return CUDA_ERROR_CAPTURED_EVENT;
}

CUresult CUDAAPI cuEventQuery(CUevent hEvent) {
  SIM_ENTER(cuEventQuery);
  sim_lock();
  struct sim_event *e = (struct sim_event *)sim_handle_get(hEvent, SIM_OBJ_EVENT);
  CUresult r = e ? sim_ctx_fault(e->obj.ctx) : CUDA_ERROR_INVALID_HANDLE;
  if (r == CUDA_SUCCESS)
    r = event_capture_check(e);
  if (r == CUDA_SUCCESS && e->last && !e->last->done)
    r = CUDA_ERROR_NOT_READY;
  sim_unlock();
  return r;
}

CUresult CUDAAPI cuEventSynchronize(CUevent hEvent) {
  SIM_ENTER_SYNC(cuEventSynchronize);
  sim_lock();
  struct sim_event *e = (struct sim_event *)sim_handle_get(hEvent, SIM_OBJ_EVENT);
  CUresult r = e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
  if (r == CUDA_SUCCESS && !sim_ctx_fault(e->obj.ctx))
    r = event_capture_check(e);
  if (r == CUDA_SUCCESS && e->last) {
    struct sim_token *t = e->last;
    struct sim_ctx *ctx = e->obj.ctx;
    t->refs++;
    /* After a fault, queued records are dropped: wait only for commands in progress. */
    while (!t->done && !(sim_ctx_fault(ctx) && sim_ctx_idle(ctx)))
      sim_wait();
    sim_token_unref(t);
  }
  if (r == CUDA_SUCCESS)
    r = sim_ctx_settle(e->obj.ctx);
  sim_unlock();
  return r;
}

/* A wait issued on a capturing stream (or on an event recorded into a capture). */
static CUresult wait_in_capture(struct sim_stream *s, struct sim_event *e, unsigned flags) {
  struct sim_capture *ec = event_live_capture(e);
  if (!ec && e->cap) /* its capture was invalidated or ended */
    return e->cap == s->cap ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_ERROR_INVALID_VALUE;
  if (ec) {
    if (s->cap == ec) {
      /* Ordering inside the capture: the linear graph already has it; note the join. */
      struct sim_stream *from = e->cap_stream;
      if (from != s && from->cap == ec && e->cap_ops > from->cap_joined)
        from->cap_joined = e->cap_ops;
      return ec->invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
    }
    if (!s->cap)
      return sim_capture_join(s, ec); /* fork: s now captures into ec */
    return CUDA_ERROR_STREAM_CAPTURE_MERGE;
  }
  if (s->cap->invalidated)
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  if (flags & CU_EVENT_WAIT_EXTERNAL) {
    struct wait_cmd *c = sim_cmd_new(&wait_ops, sizeof *c);
    if (!c)
      return CUDA_ERROR_OUT_OF_MEMORY;
    c->event = e;
    e->refs++;
    return sim_capture_append(s, &c->base);
  }
  if (!e->last)
    return CUDA_SUCCESS; /* empty work: no dependency */
  /* A dependency on work outside the capture sequence. */
  sim_capture_invalidate(s);
  return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
}

static CUresult wait_now(struct sim_stream *s, struct sim_event *e) {
  if (!e->last || e->last->done)
    return CUDA_SUCCESS; /* nothing to wait for */
  struct wait_cmd *c = sim_cmd_new(&wait_ops, sizeof *c);
  if (!c)
    return CUDA_ERROR_OUT_OF_MEMORY;
  c->token = e->last;
  c->token->refs++;
  sim_stream_push(s, &c->base);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  SIM_ENTER(cuStreamWaitEvent);
  if ((Flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_stream *s;
  sim_lock();
  struct sim_event *e = (struct sim_event *)sim_handle_get(hEvent, SIM_OBJ_EVENT);
  CUresult r = e ? sim_stream_get_live(hStream, &s) : CUDA_ERROR_INVALID_HANDLE;
  if (r == CUDA_SUCCESS) {
    if (s->cap || e->cap)
      r = wait_in_capture(s, e, Flags);
    else if (Flags & CU_EVENT_WAIT_EXTERNAL)
      r = CUDA_ERROR_ILLEGAL_STATE; /* "invalid outside of stream capture" */
    else
      r = wait_now(s, e);
  }
  sim_unlock();
  return r;
}
