#ifndef CUV_SIM_ENTER_H
#define CUV_SIM_ENTER_H

/* What every entry point does first (enter.c): SIM_ENTER counts the call, lets cuv_sim_fail fail
 * it, and checks the driver's and the current context's state. */

#include "sim.h"

/* Every base name the simulator answers to, for call counting and failure injection: the names of
 * internal/driver_funcs.h plus the variants the real driver also resolves
 * (cuGraphInstantiateWithFlags), the newer cuLaunchHostFunc_v2 and cuGetProcAddress itself, and
 * the NCCL entry points of internal/nccl_funcs.h (sim/nccl.c; an injected result is their
 * ncclResult_t). Kept separate
 * from CUV__DRIVER_FUNCS so that renaming an entry there does not change the ids used inside the
 * simulator. */
#define SIM_ENTRY_POINTS(X)                                                                      \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount)      \
  X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain)          \
  X(cuDevicePrimaryCtxRelease) X(cuDevicePrimaryCtxReset) X(cuCtxSetCurrent) X(cuCtxGetCurrent)  \
  X(cuCtxSynchronize) X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamQuery)                      \
  X(cuDeviceCanAccessPeer) X(cuCtxEnablePeerAccess) X(cuCtxDisablePeerAccess)                    \
  X(cuMemcpyPeerAsync)                                                                           \
  X(cuStreamSynchronize) X(cuStreamWaitEvent) X(cuEventCreate) X(cuEventDestroy)                 \
  X(cuEventRecord) X(cuEventQuery) X(cuEventSynchronize) X(cuMemAlloc) X(cuMemFree)              \
  X(cuMemAllocAsync) X(cuMemFreeAsync) X(cuMemHostAlloc) X(cuMemFreeHost)                        \
  X(cuMemHostGetDevicePointer) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync)    \
  X(cuMemsetD8Async) X(cuMemsetD16Async) X(cuMemsetD32Async) X(cuModuleLoadData)                 \
  X(cuModuleUnload)                                                                              \
  X(cuModuleGetFunction) X(cuFuncGetParamInfo) X(cuLaunchKernel) X(cuLaunchHostFunc)             \
  X(cuLaunchHostFunc_v2)                                                                         \
  X(cuStreamWriteValue32) X(cuStreamWriteValue64) X(cuStreamWaitValue32)                         \
  X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuStreamIsCapturing) X(cuGraphInstantiate)     \
  X(cuGraphInstantiateWithFlags) X(cuGraphUpload) X(cuGraphLaunch) X(cuGraphDestroy)             \
  X(cuGraphExecDestroy) X(cuGetProcAddress)                                                     \
  X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRankConfig) X(ncclCommGetAsyncError)        \
  X(ncclCommFinalize) X(ncclCommDestroy) X(ncclCommAbort) X(ncclGroupStart) X(ncclGroupEnd)      \
  X(ncclAllReduce) X(ncclBroadcast) X(ncclReduce) X(ncclAllGather) X(ncclReduceScatter)          \
  X(ncclSend) X(ncclRecv) X(ncclCommShrink) X(ncclCommRevoke)

/* One id per entry point. The ## keeps cuda.h's renaming macros (cuMemAlloc -> cuMemAlloc_v2)
 * from expanding, so the ids carry the base names. */
enum sim_entry_id {
#define SIM__ID(name) SIM_ID_##name,
  SIM_ENTRY_POINTS(SIM__ID)
#undef SIM__ID
  SIM_ID_COUNT
};

/* How much an entry point checks before it acts. */
enum sim_enter_checks {
  SIM_CHECK_NONE,   /* works before cuInit (cuInit, cuGetErrorName, cuGetProcAddress, ...) */
  SIM_CHECK_INIT,   /* needs cuInit: devices, primary contexts, current context */
  SIM_CHECK_CTX,    /* also fails at once when the current context is destroyed
                       (CUDA_ERROR_CONTEXT_IS_DESTROYED) or has a sticky fault: every call that
                       works on a context, destroy calls included, as the real driver */
  SIM_CHECK_SYNC,   /* as SIM_CHECK_CTX, but a synchronize call returning a sticky fault first
                       waits until no command of the context is in progress, so that its caller
                       may free what the work used (a GPU kills its kernels; a twin runs on) */
};

/* Counts the call, applies failure injection, then the checks (context.c's). Returns
 * CUDA_SUCCESS to proceed, or the result the entry point must return. */
SIM_HIDDEN CUresult sim_enter(enum sim_entry_id id, enum sim_enter_checks checks);
/* Whether CUV_SIM_HIDE names the entry point: lookups of it fail as on a library without it. */
SIM_HIDDEN bool sim_entry_hidden(const char *name);

/* Every entry point starts with one of these: the call is counted and may be failed by
 * cuv_sim_fail before it acts. */
#define SIM__ENTER(id, checks)                                                                   \
  do {                                                                                           \
    CUresult sim__r = sim_enter((id), (checks));                                                 \
    if (sim__r != CUDA_SUCCESS)                                                                  \
      return sim__r;                                                                             \
  } while (0)
#define SIM_ENTER(name) SIM__ENTER(SIM_ID_##name, SIM_CHECK_CTX)
#define SIM_ENTER_SYNC(name) SIM__ENTER(SIM_ID_##name, SIM_CHECK_SYNC)
#define SIM_ENTER_NOCTX(name) SIM__ENTER(SIM_ID_##name, SIM_CHECK_INIT)
#define SIM_ENTER_NOINIT(name) SIM__ENTER(SIM_ID_##name, SIM_CHECK_NONE)

#endif
