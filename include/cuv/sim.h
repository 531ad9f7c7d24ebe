#ifndef CUV_SIM_H
#define CUV_SIM_H

/** @file
 * libcuv-sim: a CPU implementation of the CUDA driver entry points cuv uses, loaded in place of
 * libcuda with CUV_DRIVER=sim. Programs that run kernels on it link libcuv-sim (pkg-config cuv-sim)
 * and register a host twin for each kernel name; the PTX they load is accepted as is, and
 * cuModuleGetFunction resolves names against the registry.
 *
 * Each stream is a FIFO worker thread; host functions run on one driver callback thread;
 * device memory is host memory (a CUdeviceptr is the host address). docs/simulator.md describes
 * it.
 *
 * Errors: the functions below that can fail return 0 or a negative errno, as cuv's codes are
 * (include/cuv/errors.h): -EINVAL is CUV_EINVAL, -ENOMEM is CUV_ENOMEM. */

#include <stddef.h>
#include <stdint.h>

#include <cuv/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Marks a function of libcuv-sim's API: default visibility while libcuv-sim is built, nothing
 * otherwise. */
#if defined(CUV_SIM_BUILDING) && defined(__GNUC__)
#define CUV_SIM_EXTERN __attribute__((visibility("default")))
#else
#define CUV_SIM_EXTERN
#endif

/** The shape of a launch, as a host twin receives it. */
typedef struct cuv_sim_launch {
  unsigned grid[3];      /**< Blocks in x, y and z (cuLaunchKernel's gridDim). */
  unsigned block[3];     /**< Threads per block in x, y and z (blockDim). */
  unsigned shared_bytes; /**< Dynamic shared memory of the launch, in bytes. */
  void *shared;          /**< shared_bytes of scratch for the launch (one block at a time). */
} cuv_sim_launch_t;

/** A host twin: runs the whole grid (it loops over blocks and threads itself).
 *
 * params[i] points to parameter i, as cuLaunchKernel's kernelParams, at its alignment. Return 0,
 * or a CUresult to fail like the GPU would (CUDA_ERROR_ILLEGAL_ADDRESS makes the context's sticky
 * fault). It runs on the worker thread of the launch's stream. */
typedef int (*cuv_sim_kernel_fn)(const cuv_sim_launch_t *launch, void **params);

/** Registers a host twin by kernel name, with its parameter sizes (reported through
 * cuFuncGetParamInfo).
 *
 * Registering a name again replaces it. Each parameter's alignment is inferred from its size:
 * the largest power of two dividing it, up to 16 (cuv_sim_register_kernel_aligned says when that
 * is wrong).
 *
 * @returns 0.
 * @errors -EINVAL (CUV_EINVAL): name or fn is NULL, param_sizes is NULL with nparams > 0, or a
 *         parameter size is 0.
 *         -ENOMEM (CUV_ENOMEM): no memory for the registration (the earlier one, if any, stays).
 * @threads Any thread.
 * @notes The name and the sizes are copied.
 */
CUV_SIM_EXTERN int cuv_sim_register_kernel(const char *name, cuv_sim_kernel_fn fn, size_t nparams,
                                           const size_t *param_sizes);
/** As cuv_sim_register_kernel, with each parameter's alignment.
 *
 * param_aligns[i] is a power of two dividing param_sizes[i], as _Alignof gives it; NULL: inferred
 * from the sizes, as cuv_sim_register_kernel does. The simulator lays the parameters out as the
 * driver does from the PTX's `.param .align`, reports those offsets through cuFuncGetParamInfo,
 * and hands the twin each value at its alignment: a twin may read a parameter of a type with
 * `__align__(32)` directly. A size inferred alignment gets wrong is a struct aligned below its
 * size's largest power of two (a double and a float: 16 bytes at 8) or above 16.
 *
 * @returns 0.
 * @errors -EINVAL (CUV_EINVAL): as cuv_sim_register_kernel, or an alignment is 0, not a power
 *         of two, or does not divide its parameter's size.
 *         -ENOMEM (CUV_ENOMEM): no memory for the registration (the earlier one, if any, stays).
 * @threads Any thread.
 * @notes The name, the sizes and the alignments are copied.
 */
CUV_SIM_EXTERN int cuv_sim_register_kernel_aligned(const char *name, cuv_sim_kernel_fn fn,
                                                   size_t nparams, const size_t *param_sizes,
                                                   const size_t *param_aligns);
/** Why this thread's last cuModuleGetFunction (cuv_kernel_get: CUV_ENOTFOUND) found no kernel.
 *
 * @returns A text that names the kernel and says whether its host twin is not registered, the
 *          module's PTX declares no `.entry` of that name, or both; NULL when that lookup
 *          succeeded or failed otherwise, or when the thread made none.
 * @threads Any thread: each thread has its own.
 * @notes The text is valid until the thread's next lookup.
 */
CUV_SIM_EXTERN const char *cuv_sim_lookup_error(void);
/** Makes every launch of `name` take at least `usec` microseconds on its stream (0: as fast as it
 * runs).
 *
 * A name not registered yet keeps the duration for its registration. A NULL name is ignored, and
 * so is the call when there is no memory to note a new name.
 *
 * @threads Any thread.
 * @notes It applies to launches enqueued afterwards (cuLaunchKernel).
 */
CUV_SIM_EXTERN void cuv_sim_set_kernel_duration(const char *name, unsigned usec);

/** Failure injection: the `nth` call of entry point `entry` from now on (1: the next one; 0: every
 * call) returns `result` without acting.
 *
 * entry is the base name, as cuGetProcAddress takes it ("cuStreamWriteValue32"), or a NCCL entry
 * point's name (result then an ncclResult_t). Rules accumulate until cuv_sim_fail_clear; the first
 * rule that matches a call decides.
 *
 * @threads Any thread.
 * @notes An unknown or NULL entry is ignored, with a line on stderr that names it.
 */
CUV_SIM_EXTERN void cuv_sim_fail(const char *entry, unsigned nth, int result);
/** Removes every rule of cuv_sim_fail.
 *
 * @threads Any thread.
 */
CUV_SIM_EXTERN void cuv_sim_fail_clear(void);
/** The calls made so far to `entry` (counted also when they failed), since the process started.
 *
 * @returns That count; 0 for an unknown or NULL entry.
 * @threads Any thread.
 */
CUV_SIM_EXTERN unsigned long cuv_sim_calls(const char *entry);
/** The host functions launched with cuLaunchHostFunc_v2 and host-task sync mode `sync_mode`
 * (CU_HOST_TASK_BLOCKING, 0, or CU_HOST_TASK_SPINWAIT, 1; any other: 0) that ran since the
 * process started (counted as each starts, so before anything it makes visible; a captured one
 * at each replay). After a SPINWAIT function the simulator's callback thread spin-waits for the
 * next one for up to a millisecond, then blocks; after a BLOCKING one it blocks at once.
 *
 * @returns The count.
 * @threads Any thread.
 */
CUV_SIM_EXTERN unsigned long cuv_sim_host_funcs(unsigned sync_mode);

/** Makes the context's sticky fault now, with `result` (a CUresult), as a faulting kernel would.
 *
 * The context is the calling thread's current one, else device 0's. A result of 0 (CUDA_SUCCESS)
 * does nothing, and a context that has faulted keeps its first fault. Queued kernels, copies,
 * memsets and waits are dropped, and nothing can be queued after. As on the GPU, host functions
 * and cuStreamWriteValue32 writes queued behind a kernel that was running when the fault hit
 * still run, on every stream but the faulting kernel's, unless something in front of them on
 * their stream was dropped.
 *
 * @threads Any thread.
 */
CUV_SIM_EXTERN void cuv_sim_fault(int result);

/** Delayed flag visibility: every cuStreamWriteValue32 executed from now on lands `usec`
 * microseconds after its stream passed it (0, the default: at once).
 *
 * The stream does not wait for it: cuStreamQuery, cuStreamSynchronize and events behind the write
 * already report the work done while the word still holds its old value, and late writes land in
 * the order their streams passed them (a late write that finds its memory freed is dropped). The
 * environment variable CUV_SIM_WRITE_DELAY_US sets the same, read at the first write; this call
 * overrides it. For testing what a late flag write does to a reader that reused the word (cuv's
 * reactor slots). CUV_SIM_WRITE_HOLD holds the writes instead.
 *
 * @threads Any thread.
 */
CUV_SIM_EXTERN void cuv_sim_set_write_delay_us(unsigned usec);
/** As the delay of cuv_sim_set_write_delay_us: every write passed from now waits, however long,
 * until the delay is set to another value, and then they land at once, in order (a test that
 * needs writes to land after something, whatever the machine's load). */
#define CUV_SIM_WRITE_HOLD 0xffffffffu
/** Late writes that landed while a later cuStreamWriteValue32 to the same word was already
 * enqueued (queued on a stream, or passed and waiting to land): the old value overwrote a word its
 * reader had armed again.
 *
 * @returns That count, since the process started.
 * @threads Any thread.
 */
CUV_SIM_EXTERN unsigned long cuv_sim_stale_writes(void);

/** cuModuleUnload calls that found a launch of one of the module's functions still queued or
 * running (a caller's bug: the GPU may lose the code under the launch).
 *
 * The simulator lets the pending launches run their twins and frees the module after the last;
 * the handle dies at once.
 *
 * @returns That count, since the process started.
 * @threads Any thread.
 */
CUV_SIM_EXTERN unsigned long cuv_sim_unloads_with_pending_launches(void);
/** Sets the number of devices the simulator reports, from 0 to 16 (a count outside is clamped to
 * that range).
 *
 * Without this call, the environment variable CUV_SIM_DEVICES gives it (a program that does not
 * link libcuv-sim runs on several simulated devices with CUV_DRIVER=sim CUV_SIM_DEVICES=2), else
 * 1. A variable that is not a count from 0 to 16 makes cuInit fail with CUDA_ERROR_INVALID_VALUE,
 * and a count of 0 with CUDA_ERROR_NO_DEVICE, as the driver does on a machine without GPUs
 * (cuv_init then fails with CUV_ENODRIVER: the driver "sim" did not start).
 *
 * @threads Any thread, before the first successful cuInit (cuv_init), which fixes the count: a
 *          later call changes nothing.
 */
CUV_SIM_EXTERN void cuv_sim_set_device_count(int count);
/** Sets whether device `dev` may access the memory of `peer_dev` directly, as
 * cuDeviceCanAccessPeer reports it.
 *
 * By default every pair of distinct devices may; a device never is its own peer. Access is
 * one-way, as on the GPU. cuCtxEnablePeerAccess of a pair that may not fails with
 * CUDA_ERROR_PEER_ACCESS_UNSUPPORTED; cuMemcpyPeerAsync copies either way, as the driver does.
 * An ordinal outside [0, 16) is ignored.
 *
 * @threads Any thread.
 * @notes It applies from the next query.
 */
CUV_SIM_EXTERN void cuv_sim_set_peer_access(int dev, int peer_dev, int can_access);

/* ---- NCCL (cuv's collectives with CUV_DRIVER=sim: include/cuv/collective.h) ----
 * libcuv-sim implements the NCCL entry points cuv uses on the host (ncclCommShrink and
 * ncclCommRevoke included, as NCCL 2.28 has them), over its simulated devices:
 * the ranks of a group meet in a shared-memory segment named after the group's unique id, so they
 * may be devices of one process or separate processes (on one machine). It exports no nccl*
 * symbol: cuv takes its functions from cuv_sim_nccl_proc. Every entry point is counted and may be
 * failed by cuv_sim_fail (by its NCCL name, with an ncclResult_t) and hidden with CUV_SIM_HIDE, as
 * the driver's are. Like NCCL, a call on a communicator leaves its device's primary context
 * current on the calling thread. */

/** The simulator's function for a NCCL entry point.
 *
 * @returns The function for `name` ("ncclAllReduce"), or NULL for a NULL or unknown name, or one
 *          that CUV_SIM_HIDE lists.
 * @threads Any thread.
 */
CUV_SIM_EXTERN void *cuv_sim_nccl_proc(const char *name);
/** Failure injection on a communicator (an ncclComm_t: cuv_comm_handle): its asynchronous error
 * becomes `result` (an ncclResult_t, such as 3 for ncclInternalError).
 *
 * Its collectives stop, as NCCL's kernels wait for data that never comes, until it is aborted.
 * Only the first error set on a communicator stays.
 *
 * @returns 0.
 * @errors -EINVAL (CUV_EINVAL): comm is not a live communicator of the simulator, or result is
 *         0 or negative.
 * @threads Any thread.
 */
CUV_SIM_EXTERN int cuv_sim_nccl_set_async_error(void *comm, int result);
/** The rank of `comm` dies, as if its process had exited.
 *
 * It leaves its group, its collectives stop (until it is aborted) and it reports
 * ncclSystemError; its peers' collectives that need it stop and their communicators report
 * ncclRemoteError (as they do when a peer's process exits).
 *
 * @returns 0 (also for a rank that died already).
 * @errors -EINVAL (CUV_EINVAL): comm is not a live communicator of the simulator.
 * @threads Any thread.
 */
CUV_SIM_EXTERN int cuv_sim_nccl_kill(void *comm);
/** The rank of `comm` dies without its peers learning of it, as a process whose peers' kernels
 * wait on NVLink for data it will never send: NCCL reports nothing to them.
 *
 * Its collectives stop (until it is aborted) and it reports ncclSystemError itself, but it stays
 * in its group: its peers' collectives that need it wait, and their communicators report no
 * error, until the rank is aborted or destroyed (then it leaves, as cuv_sim_nccl_kill's does).
 *
 * @returns 0 (also for a rank that died already).
 * @errors -EINVAL (CUV_EINVAL): comm is not a live communicator of the simulator.
 * @threads Any thread.
 */
CUV_SIM_EXTERN int cuv_sim_nccl_vanish(void *comm);
/** From now on, a group of non-blocking communicators reaches its streams `usec` microseconds
 * after ncclGroupEnd (from another thread), which returns ncclInProgress.
 *
 * ncclCommGetAsyncError says ncclInProgress until then, as NCCL does while it connects its first
 * collective. 0: at once.
 *
 * @threads Any thread.
 */
CUV_SIM_EXTERN void cuv_sim_nccl_set_launch_delay_us(unsigned usec);
/** Holds every NCCL init not yet ended (hold nonzero), or lets them end (0).
 *
 * While held, ncclCommGetAsyncError reports ncclInProgress for a communicator whose init has not
 * ended, and a blocking init (ncclCommInitRankConfig with blocking = 1, or the ncclGroupEnd of its
 * group) keeps its caller waiting: an init made slow, to show which thread waits for it.
 *
 * @threads Any thread.
 */
CUV_SIM_EXTERN void cuv_sim_nccl_hold_inits(int hold);
/** The callers waiting inside a blocking NCCL init now (ncclCommInitRankConfig, or the ncclGroupEnd
 * of its group).
 *
 * @returns That count.
 * @threads Any thread.
 */
CUV_SIM_EXTERN unsigned cuv_sim_nccl_inits_waiting(void);
/** The group ends with calls since the process started (a collective or send/recv outside a group
 * is a group of its own): those of blocking communicators, launched on the calling thread, and
 * those of non-blocking ones, which NCCL launches from a thread it starts for the group. Each
 * count is stored where its pointer is not NULL.
 *
 * @threads Any thread.
 */
CUV_SIM_EXTERN void cuv_sim_nccl_group_counts(unsigned long *blocking, unsigned long *nonblocking);
/** Sets the version ncclGetVersion reports (a NCCL version code; 0 or less: the default, 22809).
 *
 * @threads Any thread. cuv checks the version once, when it first loads NCCL; cuv_nccl_version
 *          reports the setting of its call.
 */
CUV_SIM_EXTERN void cuv_sim_nccl_set_version(int version);

#ifdef __cplusplus
}
#endif

#endif
