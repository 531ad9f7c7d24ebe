#ifndef CUV_SIM_H
#define CUV_SIM_H

/* libcuv-sim: a CPU implementation of the CUDA driver entry points cuv uses, loaded in place of
 * libcuda with CUV_DRIVER=sim. Programs that run kernels on it link libcuv-sim (pkg-config cuv-sim)
 * and register a host twin for each kernel name; the PTX they load is accepted as is, and
 * cuModuleGetFunction resolves names against the registry.
 *
 * Each stream is a FIFO worker thread; host functions run on one driver callback thread;
 * device memory is host memory (a CUdeviceptr is the host address). */

#include <stddef.h>
#include <stdint.h>

#include <cuv/export.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(CUV_SIM_BUILDING) && defined(__GNUC__)
#define CUV_SIM_EXTERN __attribute__((visibility("default")))
#else
#define CUV_SIM_EXTERN
#endif

typedef struct cuv_sim_launch {
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;
  void *shared; /* shared_bytes of scratch for the launch (one block at a time) */
} cuv_sim_launch_t;

/* A host twin: runs the whole grid (loop over blocks and threads itself). params[i] points to
 * parameter i, as cuLaunchKernel's kernelParams. Returns 0, or a CUresult to fail like the GPU
 * would (CUDA_ERROR_ILLEGAL_ADDRESS makes the context's sticky fault). */
typedef int (*cuv_sim_kernel_fn)(const cuv_sim_launch_t *launch, void **params);

/* Registers a kernel by name with its parameter sizes (nparams entries; reported through
 * cuFuncGetParamInfo). Registering a name again replaces it. Returns 0, or a negative errno as
 * cuv's codes are (include/cuv/errors.h): -EINVAL (CUV_EINVAL) without a name or a function, or
 * for a parameter size of 0; -ENOMEM (CUV_ENOMEM). */
CUV_SIM_EXTERN int cuv_sim_register_kernel(const char *name, cuv_sim_kernel_fn fn, size_t nparams,
                                           const size_t *param_sizes);
/* The same with each parameter's alignment (a power of two dividing its size, as _Alignof gives
 * it; NULL: inferred from the sizes, as cuv_sim_register_kernel does). The simulator lays the
 * parameters out as the driver does from the PTX's `.param .align`, reports those offsets through
 * cuFuncGetParamInfo, and hands the twin each value at its alignment: a twin may read a
 * parameter of a type with `__align__(32)` directly. A size inferred alignment gets wrong is a
 * struct aligned below its size's largest power of two (a double and a float: 16 bytes at 8) or
 * above 16. -EINVAL also for an alignment that is not such a power of two. */
CUV_SIM_EXTERN int cuv_sim_register_kernel_aligned(const char *name, cuv_sim_kernel_fn fn,
                                                   size_t nparams, const size_t *param_sizes,
                                                   const size_t *param_aligns);
/* Why this thread's last cuModuleGetFunction (cuv_kernel_get: CUV_ENOTFOUND) found no kernel:
 * the text names the kernel and says whether its host twin is not registered, the module's PTX
 * declares no `.entry` of that name, or both. NULL when that lookup succeeded or failed otherwise.
 * Valid until the thread's next lookup. */
CUV_SIM_EXTERN const char *cuv_sim_lookup_error(void);
/* Every launch of `name` takes at least `usec` microseconds on its stream (0: as fast as it
 * runs). */
CUV_SIM_EXTERN void cuv_sim_set_kernel_duration(const char *name, unsigned usec);

/* Failure injection: the `nth` call (1-based; 0 = every call) of entry point `entry` (its base
 * name, as cuGetProcAddress takes it: "cuStreamWriteValue32") returns `result` without acting.
 * Rules accumulate until cuv_sim_fail_clear. */
CUV_SIM_EXTERN void cuv_sim_fail(const char *entry, unsigned nth, int result);
CUV_SIM_EXTERN void cuv_sim_fail_clear(void);
/* Calls made so far to `entry` (counted also when they failed). */
CUV_SIM_EXTERN unsigned long cuv_sim_calls(const char *entry);

/* Makes the context's sticky fault now, as a faulting kernel would. Queued kernels, copies,
 * memsets and waits are dropped, and nothing can be queued after. As on the GPU, host functions
 * and cuStreamWriteValue32 writes queued behind a kernel that was running when the fault hit
 * still run, on every stream but the faulting kernel's, unless something in front of them on
 * their stream was dropped. */
CUV_SIM_EXTERN void cuv_sim_fault(int result);

/* Delayed flag visibility: every cuStreamWriteValue32 executed from now on lands `usec`
 * microseconds after its stream passed it (0, the default: at once). The stream does not wait for
 * it: cuStreamQuery, cuStreamSynchronize and events behind the write already report the work
 * done while the word still holds its old value, and late writes land in the order their streams
 * passed them (a late write that finds its memory freed is dropped). The environment variable
 * CUV_SIM_WRITE_DELAY_US sets the same, read at the first write; this call overrides it. For
 * testing what a late flag write does to a reader that reused the word (cuv's reactor slots). */
CUV_SIM_EXTERN void cuv_sim_set_write_delay_us(unsigned usec);
/* As the delay: every write passed from now waits, however long, until the delay is set to
 * another value, and then they land at once, in order (a test that needs writes to land after
 * something, whatever the machine's load). */
#define CUV_SIM_WRITE_HOLD 0xffffffffu
/* Late writes that landed while a later cuStreamWriteValue32 to the same word was already
 * enqueued (queued on a stream, or passed and waiting to land): the old value overwrote a word
 * its reader had armed again. Counted since the process started. */
CUV_SIM_EXTERN unsigned long cuv_sim_stale_writes(void);

/* cuModuleUnload calls that found a launch of one of the module's functions still queued or
 * running (a caller's bug: the GPU may lose the code under the launch). The simulator lets the
 * pending launches run their twins and frees the module after the last; the handle dies at
 * once. Counted since the process started. */
CUV_SIM_EXTERN unsigned long cuv_sim_unloads_with_pending_launches(void);
/* Number of devices the simulator reports (0 to 16; set before cuInit). Without this call, the
 * environment variable CUV_SIM_DEVICES gives it (a program that does not link libcuv-sim runs on
 * several simulated devices with CUV_DRIVER=sim CUV_SIM_DEVICES=2), else 1. A variable that is
 * not a count from 0 to 16 makes cuInit fail with CUDA_ERROR_INVALID_VALUE (cuv_init: the
 * driver "sim" did not start). */
CUV_SIM_EXTERN void cuv_sim_set_device_count(int count);
/* Whether device `dev` may access the memory of `peer_dev` directly, as cuDeviceCanAccessPeer
 * reports it (by default every pair of distinct devices may; a device never is its own peer).
 * cuCtxEnablePeerAccess of a pair that may not fails with CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
 * cuMemcpyPeerAsync copies either way, as the driver does. Applies from the next query. */
CUV_SIM_EXTERN void cuv_sim_set_peer_access(int dev, int peer_dev, int can_access);

/* ---- NCCL (cuv's collectives with CUV_DRIVER=sim: include/cuv/collective.h) ----
 * libcuv-sim implements the NCCL entry points cuv uses on the host, over its simulated devices:
 * the ranks of a group meet in a shared-memory segment named after the group's unique id, so they
 * may be devices of one process or separate processes (on one machine). It exports no nccl*
 * symbol: cuv takes its functions from cuv_sim_nccl_proc. Every entry point is counted and may be
 * failed by cuv_sim_fail (by its NCCL name, with an ncclResult_t) and hidden with CUV_SIM_HIDE, as
 * the driver's are. Like NCCL, a call on a communicator leaves its device's primary context
 * current on the calling thread. */

/* The simulator's function for a NCCL entry point's name ("ncclAllReduce"), or NULL. */
CUV_SIM_EXTERN void *cuv_sim_nccl_proc(const char *name);
/* Failure injection on a communicator (an ncclComm_t: cuv_comm_handle): its asynchronous error
 * becomes `result` (an ncclResult_t, such as 3 for ncclInternalError), and its collectives stop,
 * as NCCL's kernels wait for data that never comes, until it is aborted. 0, or -EINVAL for an
 * unknown communicator or a result that is not an error. */
CUV_SIM_EXTERN int cuv_sim_nccl_set_async_error(void *comm, int result);
/* The rank of `comm` dies, as if its process had exited: it leaves its group, its collectives
 * stop (until it is aborted) and it reports ncclSystemError; its peers' collectives that need it
 * stop and their communicators report ncclRemoteError (as they do when a peer's process exits).
 * 0 or -EINVAL. */
CUV_SIM_EXTERN int cuv_sim_nccl_kill(void *comm);
/* From now on, a group of non-blocking communicators reaches its streams `usec` microseconds after
 * ncclGroupEnd (from another thread), which returns ncclInProgress; ncclCommGetAsyncError says
 * ncclInProgress until then, as NCCL does while it connects its first collective. 0: at once. */
CUV_SIM_EXTERN void cuv_sim_nccl_set_launch_delay_us(unsigned usec);
/* The version ncclGetVersion reports (a NCCL version code; 0 or less: the default, 22809). */
CUV_SIM_EXTERN void cuv_sim_nccl_set_version(int version);

#ifdef __cplusplus
}
#endif

#endif
