#ifndef CUV_DRIVER_FUNCS_H
#define CUV_DRIVER_FUNCS_H

/* Every CUDA driver entry point cuv uses, in one list. lib/driver.c resolves each through
 * cuGetProcAddress (by the base name, at the CUDA version of the headers), libcuv-sim implements
 * each, and the failure-injection sweep walks the same list.
 *
 * X(name) is the name as cuda.h spells it: where cuda.h maps a name to a versioned symbol
 * (cuMemcpyHtoDAsync -> cuMemcpyHtoDAsync_v2), uses of the table member expand the same way, and
 * __typeof__ of the name gives the prototype of the version we request. */

#include <cuda.h>

#define CUV__DRIVER_FUNCS(X)                                                                      \
  X(cuInit)                                                                                       \
  X(cuDriverGetVersion)                                                                           \
  X(cuGetErrorName)                                                                               \
  X(cuGetErrorString)                                                                             \
  X(cuDeviceGetCount)                                                                             \
  X(cuDeviceGet)                                                                                  \
  X(cuDeviceGetName)                                                                              \
  X(cuDeviceGetAttribute)                                                                         \
  X(cuDevicePrimaryCtxRetain)                                                                     \
  X(cuDevicePrimaryCtxRelease)                                                                    \
  X(cuDevicePrimaryCtxReset)                                                                      \
  X(cuCtxSetCurrent)                                                                              \
  X(cuCtxGetCurrent)                                                                              \
  X(cuCtxSynchronize)                                                                             \
  X(cuDeviceCanAccessPeer)                                                                        \
  X(cuCtxEnablePeerAccess)                                                                        \
  X(cuCtxDisablePeerAccess)                                                                       \
  X(cuStreamCreate)                                                                               \
  X(cuStreamDestroy)                                                                              \
  X(cuStreamQuery)                                                                                \
  X(cuStreamSynchronize)                                                                          \
  X(cuStreamWaitEvent)                                                                            \
  X(cuEventCreate)                                                                                \
  X(cuEventDestroy)                                                                               \
  X(cuEventRecord)                                                                                \
  X(cuEventQuery)                                                                                 \
  X(cuEventSynchronize)                                                                           \
  X(cuMemAlloc)                                                                                   \
  X(cuMemFree)                                                                                    \
  X(cuMemAllocAsync)                                                                              \
  X(cuMemFreeAsync)                                                                               \
  X(cuMemHostAlloc)                                                                               \
  X(cuMemFreeHost)                                                                                \
  X(cuMemHostGetDevicePointer)                                                                    \
  X(cuMemcpyHtoDAsync)                                                                            \
  X(cuMemcpyDtoHAsync)                                                                            \
  X(cuMemcpyDtoDAsync)                                                                            \
  X(cuMemcpyPeerAsync)                                                                            \
  X(cuMemsetD8Async)                                                                              \
  X(cuMemsetD16Async)                                                                             \
  X(cuMemsetD32Async)                                                                             \
  X(cuModuleLoadData)                                                                             \
  X(cuModuleUnload)                                                                               \
  X(cuModuleGetFunction)                                                                          \
  X(cuFuncGetParamInfo)                                                                           \
  X(cuLaunchKernel)                                                                               \
  X(cuLaunchHostFunc)                                                                             \
  X(cuStreamWriteValue32)                                                                         \
  X(cuStreamWriteValue64)                                                                         \
  X(cuStreamWaitValue32)                                                                          \
  X(cuStreamBeginCapture)                                                                         \
  X(cuStreamEndCapture)                                                                           \
  X(cuStreamIsCapturing)                                                                          \
  X(cuGraphInstantiateWithFlags)                                                                  \
  X(cuGraphUpload)                                                                                \
  X(cuGraphLaunch)                                                                                \
  X(cuGraphDestroy)                                                                               \
  X(cuGraphExecDestroy)

/* Two names need care, because the driver resolves them to another prototype than cuda.h gives:
 * - "cuGraphInstantiate" is the legacy five-argument cuGraphInstantiate_v2 at every version, while
 *   cuda.h 12+ #defines the name to cuGraphInstantiateWithFlags: so the list names that function,
 *   and `cuv__drv.cuGraphInstantiate(...)` still reaches it through cuda.h's macro.
 * - "cuCtxSynchronize" at 13000 is the variant that takes a CUcontext
 *   (PFN_cuCtxSynchronize_v13000); cuda.h's (void) one is asked for at 12000.
 * CUV__DRIVER_VERSION gives the CUDA version each entry point is resolved at. */
#define CUV__DRIVER_VERSION(name)                                                                 \
  (__builtin_strcmp((name), "cuCtxSynchronize") == 0 && CUDA_VERSION > 12000 ? 12000 : CUDA_VERSION)

/* cuLaunchHostFunc with the host-task sync mode of the driver's callback thread (CUDA 13.2+),
 * newer than the cuda.h cuv may build against: declared here, resolved by its own name at
 * CUV__LAUNCH_HOST_FUNC_V2_VERSION apart from the list above (lib/driver.c), and NULL where the
 * driver lacks it. The modes' values are cuda.h's CU_HOST_TASK_BLOCKING and _SPINWAIT: after the
 * function, the callback thread blocks, or spin-waits, until the next host function is ready. */
CUresult CUDAAPI cuLaunchHostFunc_v2(CUstream hStream, CUhostFn fn, void *userData,
                                     unsigned int syncMode);
#define CUV__LAUNCH_HOST_FUNC_V2_VERSION 13020
#define CUV__HOST_TASK_BLOCKING 0u
#define CUV__HOST_TASK_SPINWAIT 1u

/* Entry points cuv can live without (older drivers): a missing one leaves its member NULL. */
#define CUV__DRIVER_OPTIONAL(name) (__builtin_strcmp((name), "cuFuncGetParamInfo") == 0)

#endif
