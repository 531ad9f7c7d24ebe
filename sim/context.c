/* The contexts' state: the devices cuInit fixed, one primary context each, the thread's current
 * context, the checks every entry point makes on it, and the sticky fault. Entry points that
 * change it are above (device.c, context_api.c); everything else reads it. */

#include "context.h"
#include "util.h"

static atomic_bool initialized;
static int ndevices; /* fixed by the first successful cuInit */
static struct sim_ctx contexts[SIM_MAX_DEVICES];
static __thread struct sim_ctx *current;

bool sim_initialized(void) { return atomic_load_explicit(&initialized, memory_order_acquire); }

int sim_device_count(void) { return sim_initialized() ? ndevices : 0; }

bool sim_device_valid(int dev) { return dev >= 0 && dev < sim_device_count(); }

struct sim_ctx *sim_ctx_of_device(int dev) { return &contexts[dev]; }

/* Fixes the device count at the first call that finds it valid (lock held). */
CUresult sim_ctx_init_devices(int count) {
  if (!sim_initialized()) {
    ndevices = count;
    for (int i = 0; i < SIM_MAX_DEVICES; i++)
      contexts[i].device = i;
  }
  /* The real driver fails cuInit on a machine without GPUs and stays uninitialized; a count the
   * variable does not give is refused the same way, with the value's error. */
  CUresult r = ndevices > 0 ? CUDA_SUCCESS
               : ndevices < 0 ? CUDA_ERROR_INVALID_VALUE
                              : CUDA_ERROR_NO_DEVICE;
  if (r == CUDA_SUCCESS)
    atomic_store_explicit(&initialized, true, memory_order_release);
  return r;
}

/* ---- Current context ------------------------------------------------------------------------- */

struct sim_ctx *sim_ctx_from_handle(CUcontext h) {
  for (int i = 0; i < ndevices; i++)
    if ((CUcontext)&contexts[i] == h)
      return &contexts[i];
  return NULL;
}

struct sim_ctx *sim_ctx_current(void) { return current; }

void sim_ctx_set_current(struct sim_ctx *ctx) { current = ctx; }

void sim_ctx_make_current(int device) {
  if (sim_device_valid(device))
    current = &contexts[device];
}

CUresult sim_ctx_require(struct sim_ctx **out) {
  struct sim_ctx *ctx = current;
  if (!ctx)
    return CUDA_ERROR_INVALID_CONTEXT;
  /* "a primary context which has not yet been initialized" (or is being torn down) */
  if (!atomic_load(&ctx->active) || ctx->resetting)
    return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  *out = ctx;
  return CUDA_SUCCESS;
}

CUresult sim_ctx_entry_check(bool settle) {
  struct sim_ctx *ctx = current;
  if (!ctx)
    return CUDA_SUCCESS; /* calls that need a context say so themselves */
  if (!atomic_load(&ctx->active))
    return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  CUresult r = sim_ctx_fault(ctx);
  if (r != CUDA_SUCCESS && settle) {
    sim_lock();
    sim_ctx_settle(ctx);
    sim_unlock();
  }
  return r;
}

/* ---- The sticky fault ----------------------------------------------------------------------- */

CUresult sim_ctx_fault(const struct sim_ctx *ctx) {
  return (CUresult)atomic_load_explicit(&ctx->fault, memory_order_acquire);
}

void sim_ctx_set_fault(struct sim_ctx *ctx, CUresult result, const struct sim_stream *by) {
  int expected = CUDA_SUCCESS;
  if (result == CUDA_SUCCESS)
    return;
  if (atomic_compare_exchange_strong(&ctx->fault, &expected, (int)result))
    ctx->fault_stream = by;
  sim_wake_all(); /* release synchronize calls and event waits inside streams */
}

bool sim_ctx_idle(const struct sim_ctx *ctx) {
  for (const struct sim_stream *s = ctx->streams; s; s = s->next)
    if (s->busy)
      return false;
  return true;
}

CUresult sim_ctx_settle(struct sim_ctx *ctx) {
  CUresult r = sim_ctx_fault(ctx);
  while (r != CUDA_SUCCESS && !sim_ctx_idle(ctx))
    sim_wait();
  return r;
}

/* The calling thread's current context; without one, device 0's (the only one by default). */
CUV_SIM_EXTERN void cuv_sim_fault(int result) {
  sim_lock();
  struct sim_ctx *ctx = current ? current : &contexts[0];
  sim_ctx_set_fault(ctx, (CUresult)result, NULL);
  sim_unlock();
}
