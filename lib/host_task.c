/* Host functions on a stream. CUDA 13.2's cuLaunchHostFunc_v2 also says how the driver's callback
 * thread waits for the next host function once this one returned: spinning (lower latency, a
 * busy core) or blocked. It is the wait CUV_HOST_SYNC names, so cuv passes that mode where the
 * driver resolved the entry point (lib/driver.c, once per load). Without it, and with
 * CUV_HOST_SYNC=off (host functions are then only the fallback of streams without memory
 * operations: completion.c), a host function is cuLaunchHostFunc's, with the driver's own wait. */
#include "internal.h"
#include "host_task.h"

CUresult cuv__launch_host_func(CUstream stream, CUhostFn fn, void *arg) {
  cuv_host_sync_t sync = cuv__config.host_sync;
  if (!cuv__drv.cuLaunchHostFunc_v2 || sync == CUV_HOST_SYNC_OFF)
    return cuv__drv.cuLaunchHostFunc(stream, fn, arg);
  unsigned mode = sync == CUV_HOST_SYNC_SPIN ? CUV__HOST_TASK_SPINWAIT : CUV__HOST_TASK_BLOCKING;
  return cuv__drv.cuLaunchHostFunc_v2(stream, fn, arg, mode);
}
