/* Primary contexts (retain, release, reset: a reset tears down every subsystem of the context,
 * so this file is above them all), the thread's current context, and context-wide
 * synchronization. */

#include "capture.h"
#include "context.h"
#include "context_api.h"
#include "enter.h"
#include "event.h"
#include "graph.h"
#include "memory.h"
#include "module.h"
#include "peer.h"
#include "stream.h"
#include "stream_api.h"
#include "util.h"

/* ---- Primary contexts ------------------------------------------------------------------------ */

/* Destroys everything the context owns: stops its workers (queued work is dropped), frees its
 * streams, events, graphs, modules and memory, and leaves the context uninitialized until the
 * next retain. Handles from before then fail with CUDA_ERROR_INVALID_HANDLE (the real driver may
 * crash on them). A sticky fault is NOT cleared: as cuda.h says of CUDA_ERROR_ILLEGAL_ADDRESS and
 * the other sticky errors, and as the driver does (even for CUDA_ERROR_ASSERT), the process must
 * be restarted to use the device again. Lock held. */
static void ctx_teardown(struct sim_ctx *ctx) {
  ctx->resetting = true;
  atomic_store(&ctx->active, false);
  sim_stream_stop_all(ctx);
  sim_graph_reset_ctx(ctx);
  sim_event_reset_ctx(ctx);
  sim_module_reset_ctx(ctx);
  sim_mem_reset_ctx(ctx);
  sim_peer_reset_ctx(ctx);
  ctx->resetting = false;
  sim_wake_all();
}

/* Initializes the primary context if a reset or the last release left it uninitialized. Fails
 * with the sticky fault once there was one. */
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  SIM_ENTER_NOCTX(cuDevicePrimaryCtxRetain);
  if (!pctx)
    return CUDA_ERROR_INVALID_VALUE;
  if (!sim_device_valid(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  struct sim_ctx *ctx = sim_ctx_of_device(dev);
  CUresult r = sim_ctx_fault(ctx);
  sim_lock();
  if (r == CUDA_SUCCESS) {
    ctx->retain++;
    atomic_store(&ctx->active, true);
    *pctx = (CUcontext)ctx;
  }
  sim_unlock();
  return r;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) {
  SIM_ENTER_NOCTX(cuDevicePrimaryCtxRelease);
  if (!sim_device_valid(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  CUresult r = CUDA_SUCCESS;
  sim_lock();
  struct sim_ctx *ctx = sim_ctx_of_device(dev);
  if (ctx->retain == 0)
    r = CUDA_ERROR_INVALID_CONTEXT;
  else if (--ctx->retain == 0)
    ctx_teardown(ctx); /* "automatically reset once the last reference is released" */
  sim_unlock();
  return r;
}

/* The retain count is kept, but the context is uninitialized until the next retain: calls with
 * it current fail with CUDA_ERROR_CONTEXT_IS_DESTROYED meanwhile. The handle stays the same. */
CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev) {
  SIM_ENTER_NOCTX(cuDevicePrimaryCtxReset);
  if (!sim_device_valid(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  sim_lock();
  ctx_teardown(sim_ctx_of_device(dev));
  sim_unlock();
  return CUDA_SUCCESS;
}

/* ---- Current context ------------------------------------------------------------------------- */

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  SIM_ENTER_NOCTX(cuCtxSetCurrent);
  if (!ctx) {
    sim_ctx_set_current(NULL);
    return CUDA_SUCCESS;
  }
  struct sim_ctx *c = sim_ctx_from_handle(ctx);
  if (!c)
    return CUDA_ERROR_INVALID_CONTEXT;
  sim_ctx_set_current(c);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx) {
  SIM_ENTER_NOCTX(cuCtxGetCurrent);
  if (!pctx)
    return CUDA_ERROR_INVALID_VALUE;
  *pctx = (CUcontext)sim_ctx_current();
  return CUDA_SUCCESS;
}

/* ---- Synchronization ------------------------------------------------------------------------ */

/* Context-wide synchronization is illegal while any stream of the context captures, in every
 * capture mode: it fails and invalidates the captures. Lock held. */
static CUresult ctx_synchronize(struct sim_ctx *ctx) {
  if (sim_capture_block_ctx_sync(ctx))
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return sim_stream_drain_ctx(ctx);
}

CUresult CUDAAPI cuCtxSynchronize(void) {
  SIM_ENTER_SYNC(cuCtxSynchronize);
  struct sim_ctx *ctx;
  sim_lock();
  CUresult r = sim_ctx_require(&ctx);
  if (r == CUDA_SUCCESS)
    r = ctx_synchronize(ctx);
  sim_unlock();
  return r;
}

/* cuCtxSynchronize as resolved at CUDA 13.0: NULL is the current context. The argument is
 * checked before anything else (an unknown one gives CUDA_ERROR_CONTEXT_IS_DESTROYED, as the
 * driver answers when called through the 12.x prototype with no argument). */
CUresult CUDAAPI sim_cuCtxSynchronize_v2(CUcontext hctx) {
  SIM_ENTER_NOCTX(cuCtxSynchronize);
  struct sim_ctx *ctx = hctx ? sim_ctx_from_handle(hctx) : NULL;
  if (hctx && (!ctx || !atomic_load(&ctx->active)))
    return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  CUresult r = sim_ctx_entry_check(true);
  if (r != CUDA_SUCCESS)
    return r;
  sim_lock();
  if (!ctx)
    r = sim_ctx_require(&ctx);
  if (r == CUDA_SUCCESS)
    r = sim_ctx_settle(ctx); /* as SIM_CHECK_SYNC, for a context that is not current */
  if (r == CUDA_SUCCESS)
    r = ctx_synchronize(ctx);
  sim_unlock();
  return r;
}
