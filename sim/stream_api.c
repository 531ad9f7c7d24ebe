/* The stream entry points (cuStreamCreate, cuStreamDestroy, cuStreamQuery,
 * cuStreamSynchronize), the wait of a copy into pageable memory, and the stop of a context's
 * streams at a reset. Above capture.c: destroying, querying or synchronizing a stream ends or
 * invalidates its capture. */

#include <stdlib.h>

#include "callback.h"
#include "capture.h"
#include "context.h"
#include "enter.h"
#include "handle.h"
#include "stream.h"
#include "stream_api.h"
#include "util.h"

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
  sim_callback_reset_ctx(ctx);
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
