/* Driver initialization, devices and their attributes, primary contexts, the thread's current
 * context, context-wide synchronization and the sticky fault. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static atomic_bool initialized;
static atomic_int device_count_setting = -1; /* -1: not set, CUV_SIM_DEVICES or 1 */
static int ndevices; /* fixed by the first successful cuInit */
static struct sim_ctx contexts[SIM_MAX_DEVICES];
static __thread struct sim_ctx *current;

bool sim_initialized(void) { return atomic_load_explicit(&initialized, memory_order_acquire); }

static bool device_valid(CUdevice dev) { return dev >= 0 && dev < ndevices; }

CUV_SIM_EXTERN void cuv_sim_set_device_count(int count) {
  atomic_store(&device_count_setting, count < 0 ? 0 : count > SIM_MAX_DEVICES ? SIM_MAX_DEVICES
                                                                               : count);
}

int sim_device_count(void) { return sim_initialized() ? ndevices : 0; }

struct sim_ctx *sim_ctx_of_device(int dev) { return &contexts[dev]; }

/* ---- Initialization and devices -------------------------------------------------------------- */

/* The device count cuInit fixes: cuv_sim_set_device_count's, else CUV_SIM_DEVICES (a count from 0
 * to SIM_MAX_DEVICES), else 1. -1 for a variable that is not such a count. */
static int device_count_wanted(void) {
  int set = atomic_load(&device_count_setting);
  const char *env = getenv("CUV_SIM_DEVICES");
  if (set >= 0 || !env || !*env)
    return set >= 0 ? set : 1;
  char *end;
  long n = strtol(env, &end, 10);
  if (*end || n < 0 || n > SIM_MAX_DEVICES) {
    fprintf(stderr, "cuv-sim: CUV_SIM_DEVICES=%s is not a device count from 0 to %d\n", env,
            SIM_MAX_DEVICES);
    return -1;
  }
  return (int)n;
}

CUresult CUDAAPI cuInit(unsigned int Flags) {
  SIM_ENTER_NOINIT(cuInit);
  if (Flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  sim_lock();
  if (!sim_initialized()) {
    ndevices = device_count_wanted();
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
  sim_unlock();
  return r;
}

CUresult CUDAAPI cuDriverGetVersion(int *driverVersion) {
  SIM_ENTER_NOINIT(cuDriverGetVersion);
  if (!driverVersion)
    return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = CUDA_VERSION;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int *count) {
  SIM_ENTER_NOCTX(cuDeviceGetCount);
  if (!count)
    return CUDA_ERROR_INVALID_VALUE;
  *count = ndevices;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal) {
  SIM_ENTER_NOCTX(cuDeviceGet);
  if (!device)
    return CUDA_ERROR_INVALID_VALUE;
  if (!device_valid(ordinal))
    return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev) {
  SIM_ENTER_NOCTX(cuDeviceGetName);
  if (!name || len <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (!device_valid(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  static const char device_name[] = "cuv-sim CPU device";
  size_t n = strlen(device_name);
  if (n >= (size_t)len)
    n = (size_t)len - 1;
  memcpy(name, device_name, n);
  name[n] = '\0';
  return CUDA_SUCCESS;
}

/* Values of the GPU (compute capability 9.0; those that vary were read from one with driver 580);
 * attributes not listed are 0. */
static int attribute_value(CUdevice_attribute attrib, CUdevice dev) {
  switch (attrib) {
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
  case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
  case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 2147483647;
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
  case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
  case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
  case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: return 1;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
  case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
  case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT: return 512;
  case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
  case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
  case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return dev;
  case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 3201000;
  case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 6144;
  case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 60 * 1024 * 1024;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
  case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 3;
  case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
  case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return 233472;
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
  case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
  case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: return 1;
  case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return 232448;
  case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
  case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: return 1;
  case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS: return 1;
  case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR: return 1;
  case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT: return 4;
  default: return 0;
  }
}

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
  SIM_ENTER_NOCTX(cuDeviceGetAttribute);
  if (!pi || (int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
    return CUDA_ERROR_INVALID_VALUE;
  if (!device_valid(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  *pi = attribute_value(attrib, dev);
  return CUDA_SUCCESS;
}

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
  if (!device_valid(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  struct sim_ctx *ctx = &contexts[dev];
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
  if (!device_valid(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  CUresult r = CUDA_SUCCESS;
  sim_lock();
  struct sim_ctx *ctx = &contexts[dev];
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
  if (!device_valid(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  sim_lock();
  ctx_teardown(&contexts[dev]);
  sim_unlock();
  return CUDA_SUCCESS;
}

/* ---- Current context ------------------------------------------------------------------------- */

struct sim_ctx *sim_ctx_from_handle(CUcontext h) {
  for (int i = 0; i < ndevices; i++)
    if ((CUcontext)&contexts[i] == h)
      return &contexts[i];
  return NULL;
}

struct sim_ctx *sim_ctx_current(void) { return current; }

void sim_ctx_make_current(int device) {
  if (device_valid(device))
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

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  SIM_ENTER_NOCTX(cuCtxSetCurrent);
  if (!ctx) {
    current = NULL;
    return CUDA_SUCCESS;
  }
  struct sim_ctx *c = sim_ctx_from_handle(ctx);
  if (!c)
    return CUDA_ERROR_INVALID_CONTEXT;
  current = c;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx) {
  SIM_ENTER_NOCTX(cuCtxGetCurrent);
  if (!pctx)
    return CUDA_ERROR_INVALID_VALUE;
  *pctx = (CUcontext)current;
  return CUDA_SUCCESS;
}

/* ---- Synchronization and the sticky fault ---------------------------------------------------- */

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

struct drain_point {
  struct sim_stream *s;
  uint64_t target;
};

CUresult sim_ctx_drain(struct sim_ctx *ctx) {
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

/* Context-wide synchronization is illegal while any stream of the context captures, in every
 * capture mode: it fails and invalidates the captures. Lock held. */
static CUresult ctx_synchronize(struct sim_ctx *ctx) {
  if (sim_capture_block_ctx_sync(ctx))
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return sim_ctx_drain(ctx);
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

/* The calling thread's current context; without one, device 0's (the only one by default). */
CUV_SIM_EXTERN void cuv_sim_fault(int result) {
  sim_lock();
  struct sim_ctx *ctx = current ? current : &contexts[0];
  sim_ctx_set_fault(ctx, (CUresult)result, NULL);
  sim_unlock();
}
