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
  X(cuMemsetD8Async)                                                                              \
  X(cuMemsetD32Async)                                                                             \
  X(cuModuleLoadData)                                                                             \
  X(cuModuleUnload)                                                                               \
  X(cuModuleGetFunction)                                                                          \
  X(cuFuncGetParamInfo)                                                                           \
  X(cuLaunchKernel)                                                                               \
  X(cuLaunchHostFunc)                                                                             \
  X(cuStreamWriteValue32)                                                                         \
  X(cuStreamWaitValue32)                                                                          \
  X(cuStreamBeginCapture)                                                                         \
  X(cuStreamEndCapture)                                                                           \
  X(cuStreamIsCapturing)                                                                          \
  X(cuGraphInstantiate)                                                                           \
  X(cuGraphUpload)                                                                                \
  X(cuGraphLaunch)                                                                                \
  X(cuGraphDestroy)                                                                               \
  X(cuGraphExecDestroy)

/* Entry points cuv can live without (older drivers): a missing one leaves its member NULL. */
#define CUV__DRIVER_OPTIONAL(name) (__builtin_strcmp((name), "cuFuncGetParamInfo") == 0)

#endif
