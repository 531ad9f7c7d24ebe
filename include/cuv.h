#ifndef CUV_H
#define CUV_H

/** @file
 * cuv: asynchronous GPU work on the CUDA Driver API, as lazy device operations.
 *
 * Ownership, in five sentences:
 * 1. An op (cuv_op_t) is a recipe; building it touches no stream. Every combinator and executor
 *    consumes the ops handed to it, also when that call fails; cuv_op_destroy drops one never used.
 *    An op handed to a second owner while its first still holds it (cuv_seq(a, a); cuv_seq(a, x)
 *    then cuv_sync(a)) is refused with CUV_ECONSUMED and stays with the first.
 * 2. An op's output (cuv_output_t) is a value with its release function. The executor hands it to
 *    you; you release it once with cuv_output_release (a completion callback's output is released
 *    by cuv after the callback returns unless the callback moves it out with cuv_output_take).
 * 3. Devices, buffers, host buffers, modules, kernels, shared ops and graphs are reference
 *    counted: X_ref takes a reference and X_unref drops one (the constructor's out-parameter holds
 *    the first). Streams, policies and queues have one owner, who ends them with X_destroy; a
 *    device's default policy is borrowed (never destroyed by you). Whatever a submission touches
 *    is retained until its GPU work is proven complete, so dropping your reference early (or
 *    destroying a stream with work in flight) never frees memory the GPU may still use. Only the
 *    libuv bridge closes asynchronously: cuv_uv_close, with a callback.
 * 4. Host memory handed to a copy is borrowed (CUV_COPY_BORROW: it must live and stay unchanged
 *    until the submission completes) or staged (CUV_COPY_STAGE, the default: cuv copies it into
 *    pinned staging when the op is built, so you may reuse it as soon as cuv_memcpy_htod returns).
 * 5. A device-to-host copy's destination is valid only after the submission completed: after
 *    cuv_sync returns, or in the completion callback.
 *
 * Threads: every function may be called from any thread; cuv binds the device's primary context
 * itself. Objects are safe to share between threads, except that one op may be consumed once. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuv/config.h>
#include <cuv/errors.h>
#include <cuv/export.h>
#include <cuv/version.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Driver handles, declared as cuda.h declares them, so cuda.h is not needed to include this. */
struct CUstream_st;
struct CUctx_st;
/** A device address, as the driver's CUdeviceptr (cuv_buffer_ptr, CUV_ARG_PTR). */
typedef unsigned long long cuv_deviceptr_t;

/* ---- errors, version, driver ---------------------------------------------------------------- */

/** A message for any status, including CUV_ECUDA(...) codes (the driver's own text).
 *
 * @returns A static string: "success" for 0, "unknown error" for a code cuv does not know.
 *          Never NULL.
 * @threads Any thread.
 */
CUV_EXTERN const char *cuv_strerror(int status);
/** The code's name: "CUV_EINVAL", or for CUDA failures "CUDA_ERROR_ILLEGAL_ADDRESS".
 *
 * @returns A static string: "CUV_OK" for 0, "CUV_EUNKNOWN" for a code cuv does not know.
 *          Never NULL.
 * @threads Any thread.
 */
CUV_EXTERN const char *cuv_err_name(int status);
/** The CUresult behind a CUV_ECUDA(...) status.
 *
 * @returns The CUresult, or 0 when status is not a driver failure.
 * @errors None: any status is accepted.
 * @threads Any thread.
 */
CUV_EXTERN int cuv_cuda_result(int status);
/** Whether status is a sticky device fault (illegal address, trap, launch failure, ECC error...).
 *
 * After such a fault the context is dead.
 * What the work held is leaked on purpose.
 * Every later call in that context fails.
 * On current drivers only a new process brings the device back (docs/errors.md).
 * A server runs its GPU work in a process it can restart (apps/tcp-infer --isolate).
 *
 * @returns true for a sticky fault, false for any other status.
 * @threads Any thread.
 */
CUV_EXTERN bool cuv_status_is_fault(int status);
/** The library's version, as "MAJOR.MINOR.PATCH".
 *
 * @returns A static string (CUV_VERSION_STRING of the library, not of the header).
 * @threads Any thread.
 */
CUV_EXTERN const char *cuv_version_string(void);

/* Initialization (cuv_init, cuv_init_with) and the settings: include/cuv/config.h. */
/** The driver a successful init loaded: "cuda", "sim" or the driver's path (cuv_config_t.driver).
 *
 * A query: it initializes nothing (cuv_config_get says which driver an init would load).
 *
 * @returns The name, or NULL before a successful init.
 * @threads Any thread.
 */
CUV_EXTERN const char *cuv_driver_name(void);
/** Whether a successful init loaded libcuv-sim.
 *
 * It initializes nothing.
 *
 * @returns true when libcuv-sim was loaded, false otherwise and before an init.
 * @threads Any thread.
 */
CUV_EXTERN bool cuv_driver_is_sim(void);
/** Whether the loaded driver takes a host-task mode with a host function (it resolves
 * cuLaunchHostFunc_v2: CUDA 13.2 and later, and libcuv-sim), looked for once, when it was loaded.
 *
 * Where it does, the host functions cuv launches under CUV_HOST_SYNC=spin carry
 * CU_HOST_TASK_SPINWAIT and under block CU_HOST_TASK_BLOCKING (how the driver's callback thread
 * waits for the next one); elsewhere, and with CUV_HOST_SYNC=off, they are cuLaunchHostFunc's, as
 * before (docs/completion.md).
 *
 * It initializes nothing.
 *
 * @returns true when a successful init loaded such a driver, false otherwise and before an init.
 * @threads Any thread.
 */
CUV_EXTERN bool cuv_driver_has_host_task_modes(void);
/** The driver's CUDA version (13000 for 13.0).
 *
 * It must ask the driver, so it initializes the process as cuv_init() does if nothing did.
 * That initialization fixes the configuration.
 *
 * @returns 0, and *version holds the driver's version.
 * @errors CUV_EINVAL: version is NULL.
 *         Any error of cuv_init() when that initialization failed (its status is returned).
 * @threads Any thread.
 */
CUV_EXTERN int cuv_driver_version(int *version);

/* ---- devices -------------------------------------------------------------------------------- */

/** A device: one object per ordinal, reference counted, holding its primary context. */
typedef struct cuv_device_s cuv_device_t;

/** The number of CUDA devices the driver sees.
 *
 * It initializes the process as cuv_init() does if nothing did.
 *
 * @returns 0, and *count holds the number of devices.
 * @errors CUV_EINVAL: count is NULL.
 *         Any error of cuv_init() when that initialization failed (its status is returned).
 *         A driver error (a CUresult as a negative code, see errors.h) when cuDeviceGetCount
 *         fails.
 * @threads Any thread.
 */
CUV_EXTERN int cuv_device_count(int *count);
/** Opens (and retains the primary context of) device `ordinal`.
 *
 * Opening the same ordinal again returns the same object with one more reference.
 * It initializes the process as cuv_init() does if nothing did.
 *
 * @returns 0, and *dev holds the device with one more reference.
 * @errors CUV_EINVAL: dev is NULL.
 *         CUV_ENODEV: ordinal is negative, or not below the device count (or cuv's maximum).
 *         CUV_ENOMEM: no memory for the device object.
 *         Any error of cuv_init() when that initialization failed (its status is returned).
 *         A driver error when cuDeviceGet, cuDeviceGetName or cuDevicePrimaryCtxRetain fails.
 * @threads Any thread.
 * @notes Each open needs one cuv_device_unref.
 */
CUV_EXTERN int cuv_device_open(cuv_device_t **dev, int ordinal);
/** Takes one more reference on dev.
 *
 * @returns dev, or NULL when dev is NULL.
 * @threads Any thread.
 * @notes The reference is dropped with cuv_device_unref.
 */
CUV_EXTERN cuv_device_t *cuv_device_ref(cuv_device_t *dev);
/** Drops a reference; the device (and its primary context) is released at the last one.
 *
 * NULL is ignored.
 *
 * @threads Any thread.
 * @notes Streams, buffers and modules hold references of their own, so the device stays alive
 *        while one of them does.
 */
CUV_EXTERN void cuv_device_unref(cuv_device_t *dev);
/** The device's ordinal.
 *
 * @returns The ordinal (0 or more), or CUV_EINVAL when dev is NULL.
 * @errors CUV_EINVAL: dev is NULL.
 * @threads Any thread.
 */
CUV_EXTERN int cuv_device_ordinal(const cuv_device_t *dev);
/** The device's name, as the driver gives it (cuDeviceGetName).
 *
 * @returns A string owned by the device (valid while it is referenced), or NULL when dev is NULL.
 * @threads Any thread.
 */
CUV_EXTERN const char *cuv_device_name(const cuv_device_t *dev);
/** Any CUdevice_attribute value (cuDeviceGetAttribute).
 *
 * @returns 0, and *value holds the attribute's value.
 * @errors CUV_EINVAL: dev or value is NULL.
 *         A driver error when cuDeviceGetAttribute fails (CUDA_ERROR_INVALID_VALUE for an
 *         unknown attribute).
 * @threads Any thread.
 */
CUV_EXTERN int cuv_device_attribute(const cuv_device_t *dev, int cu_attribute, int *value);
/** The device's primary context (a CUcontext).
 *
 * @returns The context, or NULL when dev is NULL.
 * @threads Any thread.
 * @notes Borrowed: it is retained while the device is referenced.
 */
CUV_EXTERN struct CUctx_st *cuv_device_context(const cuv_device_t *dev);
/** Makes the device's context current on the calling thread.
 *
 * cuv does this itself; this is for code that calls the driver directly.
 *
 * @returns 0 once the context is current (also when it already was).
 * @errors CUV_EINVAL: dev is NULL.
 *         A driver error when cuCtxSetCurrent fails.
 * @threads Any thread (it binds the calling thread).
 */
CUV_EXTERN int cuv_device_bind(cuv_device_t *dev);

/* Faults: a sticky device fault (illegal address, trap) kills the device's context, and driver
 * 580 cannot revive it in the same process. cuv fails every submission on it with the driver's
 * error (cuv_status_is_fault says which errors these are) and leaks on purpose what the GPU may
 * still touch (cuv_stats().leaked). Serving on is the application's job: run GPU work in a worker
 * process and replace it when it faults, as apps/tcp-infer --isolate does. */

/* ---- streams -------------------------------------------------------------------------------- */

/** A stream: a CUstream of one device, reference counted by the submissions on it. */
typedef struct cuv_stream_s cuv_stream_t;

/** Creates a new non-blocking stream on `dev` (cuStreamCreate, CU_STREAM_NON_BLOCKING).
 *
 * @returns 0, and *stream holds the caller's reference.
 * @errors CUV_EINVAL: stream or dev is NULL.
 *         CUV_ENOMEM: no memory for the stream object.
 *         A driver error when binding the context or cuStreamCreate fails.
 * @threads Any thread.
 * @notes The stream holds a reference on dev. Drop it with cuv_stream_destroy.
 */
CUV_EXTERN int cuv_stream_create(cuv_stream_t **stream, cuv_device_t *dev);
/** Wraps a CUstream the application owns; cuv never destroys it.
 *
 * raw must belong to dev's context (NULL is the context's legacy default stream).
 *
 * @returns 0, and *stream holds the caller's reference.
 * @errors CUV_EINVAL: stream or dev is NULL.
 *         CUV_ENOMEM: no memory for the stream object.
 * @threads Any thread.
 * @notes raw must outlive the wrapper and every submission on it. The wrapper holds a reference
 *        on dev.
 */
CUV_EXTERN int cuv_stream_wrap(cuv_stream_t **stream, cuv_device_t *dev, struct CUstream_st *raw);
/** Drops the caller's reference; the stream is destroyed once no submission uses it.
 *
 * NULL is ignored. cuv_enqueue_on work still on the stream is waited for and reaped first.
 *
 * @threads Any thread.
 * @notes A stream cuv created is destroyed with cuStreamDestroy; a wrapped one is left alone.
 */
CUV_EXTERN void cuv_stream_destroy(cuv_stream_t *stream);
/** The stream's CUstream.
 *
 * @returns The CUstream, or NULL when stream is NULL (or wraps the default stream).
 * @threads Any thread.
 * @notes Borrowed: valid while the stream is referenced.
 */
CUV_EXTERN struct CUstream_st *cuv_stream_handle(const cuv_stream_t *stream);
/** The stream's device.
 *
 * @returns The device (borrowed: take a reference with cuv_device_ref to keep it), or NULL when
 *          stream is NULL.
 * @threads Any thread.
 */
CUV_EXTERN cuv_device_t *cuv_stream_device(const cuv_stream_t *stream);
/** Blocks until all work on the stream is done (cuStreamSynchronize).
 *
 * It then reaps the cuv_enqueue_on work on the stream.
 *
 * @returns 0 when the stream's work completed.
 * @errors CUV_EINVAL: stream is NULL.
 *         The stream's error if it faulted (a driver error, see cuv_status_is_fault), or a
 *         driver error when binding the context fails.
 * @threads Any thread; it blocks the calling thread.
 */
CUV_EXTERN int cuv_stream_synchronize(cuv_stream_t *stream);
/** The submissions executed on this stream and not yet proven complete.
 *
 * @returns That count, or 0 when stream is NULL.
 * @threads Any thread; the count may change as soon as it is read.
 */
CUV_EXTERN unsigned cuv_stream_in_flight(const cuv_stream_t *stream);

/* ---- outputs -------------------------------------------------------------------------------- */

/** Releases a value: called once, as release(release_arg). */
typedef void (*cuv_release_fn)(void *arg);

/** An op's output: a value and how to release it. A cleared output is all zeros. */
typedef struct cuv_output {
  void *data;             /**< The value; NULL for ops without one ("unit"). */
  cuv_release_fn release; /**< Called once as release(release_arg) when dropped; may be NULL. */
  void *release_arg;      /**< Usually data itself; cuv_value sets it so. */
} cuv_output_t;

/** Releases the value (once) and clears *out.
 *
 * Safe on a cleared output; NULL is ignored.
 *
 * @threads Any thread; release runs on the calling thread.
 */
CUV_EXTERN void cuv_output_release(cuv_output_t *out);
/** Moves the value out, leaving *out cleared (so cuv will not release it).
 *
 * @returns The value, now the caller's to release; a cleared output when out is NULL.
 * @threads Any thread.
 */
CUV_EXTERN cuv_output_t cuv_output_take(cuv_output_t *out);

/** The output of zip and fork: data is a cuv_tuple_t whose release releases every item. */
typedef struct cuv_tuple {
  size_t n; /**< The number of items. */
#ifndef __cplusplus /* C++ has no flexible array member: it reads items with cuv_tuple_get */
  cuv_output_t items[]; /**< The items, in the order of the ops (C only). */
#endif
} cuv_tuple_t;

/** Item i of a tuple output.
 *
 * @returns The item (owned by the tuple: cuv_output_take it to keep its value), or NULL when out
 *          is NULL, is not a tuple, or has no more than i items.
 * @threads Any thread.
 */
CUV_EXTERN cuv_output_t *cuv_tuple_get(const cuv_output_t *out, size_t i);

/* ---- ops ------------------------------------------------------------------------------------ */

/** An op: a lazy description of GPU and host work, owned by one holder until it executes. */
typedef struct cuv_op_s cuv_op_t;

/** Drops an op that was never consumed, releasing what it captured.
 *
 * NULL is ignored.
 *
 * @threads Any thread; the release functions of what it captured run on the calling thread.
 * @notes Only for an op no combinator or executor consumed.
 */
CUV_EXTERN void cuv_op_destroy(cuv_op_t *op);
/** The error an op carries from a failed constructor.
 *
 * Executing it reports the same.
 *
 * @returns 0 for a valid op, or its (negative) error.
 * @errors CUV_EINVAL: op is NULL.
 *         Whatever error its constructor failed with (see the constructor's @errors).
 * @threads Any thread.
 */
CUV_EXTERN int cuv_op_error(const cuv_op_t *op);

/** An op that fails with `status` (a negative code) when executed.
 *
 * This is how a with_context or then callback reports an error of its own (a cuBLAS failure,
 * say) through the chain.
 *
 * @returns An error op, never NULL; cuv_op_error gives status.
 * @errors status itself, when it is negative.
 *         CUV_EINVAL: status is 0 or positive.
 * @threads Any thread.
 */
CUV_EXTERN cuv_op_t *cuv_fail(int status);

/** Lifts a host value into an op whose output is data.
 *
 * release(data) runs when the value is dropped (free, for malloc'd data).
 *
 * @returns A new op, never NULL; a failure is carried by the op (cuv_op_error).
 * @errors CUV_ENOMEM: no memory for the op (release(data) has then run already).
 * @threads Any thread; release runs on the thread that drops the value.
 * @notes The op owns data until it executes; then the output does.
 */
CUV_EXTERN cuv_op_t *cuv_value(void *data, cuv_release_fn release);

/** The callback of cuv_with_context: returns the op to run on `stream` (never NULL). */
typedef cuv_op_t *(*cuv_context_fn)(cuv_stream_t *stream, void *arg);
/** Builds the op to run once its stream is known.
 *
 * fn runs at execution time.
 * It may call the driver (or cuBLAS...) on the stream's CUstream.
 * It returns the op to run there (cuv_value(...) for a host value).
 *
 * @returns A new op, never NULL; a failure is carried by the op (cuv_op_error).
 * @errors CUV_EINVAL: fn is NULL, or fn returned NULL.
 *         CUV_ENOMEM: no memory for the op.
 *         CUV_ECANCELED: the submission was cancelled before fn started.
 *         CUV_EREENTRANT: fn executed another op inside it.
 *         CUV_EDEVICE: fn returned an op of a device the tree did not name when it was built.
 *         Any error of the op fn returns.
 * @threads Any thread builds it. fn runs at execution time on the executing thread, under the
 *          execution lock (the thread cuv_then names for its fn).
 * @notes arg_release(arg) runs once, when fn returned or when the op is dropped unexecuted (also
 *        when the constructor fails). It may be NULL.
 */
CUV_EXTERN cuv_op_t *cuv_with_context(cuv_context_fn fn, void *arg, cuv_release_fn arg_release);

/* ---- buffers: device memory ----------------------------------------------------------------- */

/** A device buffer: reference counted device memory of one device. */
typedef struct cuv_buffer_s cuv_buffer_t;

/** Allocates `bytes` of device memory on `dev`, now (cuMemAlloc).
 *
 * @returns 0, and *buf holds the caller's first reference.
 * @errors CUV_EINVAL: buf or dev is NULL, or bytes is 0.
 *         CUV_ENOMEM: no memory for the buffer object.
 *         A driver error (a CUresult as a negative code, see errors.h) when binding the context
 *         or cuMemAlloc fails (CUDA_ERROR_OUT_OF_MEMORY: the device has not that much free).
 * @threads Any thread.
 * @notes The memory is freed once no reference and no submission holds it.
 */
CUV_EXTERN int cuv_buffer_create(cuv_buffer_t **buf, cuv_device_t *dev, size_t bytes);
/** Takes one more reference on buf.
 *
 * @returns buf, or NULL when buf is NULL.
 * @threads Any thread.
 */
CUV_EXTERN cuv_buffer_t *cuv_buffer_ref(cuv_buffer_t *buf);
/** Drops a reference; the memory is freed once no reference and no submission holds it.
 *
 * NULL is ignored.
 *
 * @threads Any thread.
 * @notes Memory from cuv_alloc is freed on its allocating stream (cuMemFreeAsync).
 */
CUV_EXTERN void cuv_buffer_unref(cuv_buffer_t *buf);
/** The buffer's device address.
 *
 * @returns The address, or 0 when buf is NULL.
 * @threads Any thread.
 * @notes Valid while the buffer is referenced.
 */
CUV_EXTERN cuv_deviceptr_t cuv_buffer_ptr(const cuv_buffer_t *buf);
/** The buffer's size in bytes.
 *
 * @returns The size, or 0 when buf is NULL.
 * @threads Any thread.
 */
CUV_EXTERN size_t cuv_buffer_size(const cuv_buffer_t *buf);
/** The buffer's device.
 *
 * @returns The device (borrowed), or NULL when buf is NULL.
 * @threads Any thread.
 */
CUV_EXTERN cuv_device_t *cuv_buffer_device(const cuv_buffer_t *buf);

/* Cross-stream hazards. Each buffer tracks the accesses in flight on it (stream, read or write)
 * through the submissions that hold it. An op that writes a buffer another stream still reads or
 * writes, or reads a buffer another stream still writes, is ordered after that work with an event
 * wait cuv inserts (CUV_HAZARD_ORDER, the default); reads on several streams run concurrently.
 * CUV_HAZARD_STRICT refuses the conflict with CUV_ECONFLICT instead (also
 * the default for every buffer with CUV_STRICT_HAZARDS=1); CUV_HAZARD_NONE tracks nothing (the
 * caller orders). Accesses through cuv_enqueue_on stay tracked until their event is reaped. */
/** The hazard modes of cuv_buffer_set_hazard_mode. */
enum {
  CUV_HAZARD_ORDER = 0,  /**< Order a conflicting access after the other stream's (default). */
  CUV_HAZARD_STRICT = 1, /**< Refuse a conflicting access with CUV_ECONFLICT. */
  CUV_HAZARD_NONE = 2,   /**< Track nothing: the caller orders. */
};
/** Sets how buf's cross-stream hazards are handled (CUV_HAZARD_ORDER, _STRICT or _NONE).
 *
 * @returns 0.
 * @errors CUV_EINVAL: buf is NULL, or mode is not one of the three.
 * @threads Any thread.
 * @notes The mode applies to accesses that execute afterwards.
 */
CUV_EXTERN int cuv_buffer_set_hazard_mode(cuv_buffer_t *buf, int mode);

/** Stream-ordered allocation of `bytes` on `dev` (cuMemAllocAsync on the executing stream).
 *
 * Its output is a cuv_buffer_t * (cuv_output_buffer), released by unref.
 *
 * @returns A new op, never NULL; a failure is carried by the op (cuv_op_error).
 * @errors CUV_EINVAL: dev is NULL, or bytes is 0.
 *         CUV_ENOMEM: no memory for the op or the buffer object.
 *         CUV_EDEVICE: executed on a stream of another device.
 *         CUV_ENOTSUP: executed inside a graph capture (cuv_graph_capture).
 *         A driver error when cuMemAllocAsync fails.
 * @threads Any thread.
 */
CUV_EXTERN cuv_op_t *cuv_alloc(cuv_device_t *dev, size_t bytes);
/** Stream-ordered free: consumes the caller's reference.
 *
 * When it is the last one, the memory is freed with cuMemFreeAsync on the executing stream.
 * Otherwise it is freed at the last unref. Output: unit.
 *
 * @returns A new op, never NULL; a failure is carried by the op (cuv_op_error).
 * @errors CUV_EINVAL: buf is NULL.
 *         CUV_ENOMEM: no memory for the op.
 *         CUV_EDEVICE: executed on a stream of another device (the reference is dropped).
 *         CUV_ENOTSUP: executed inside a graph capture (the reference is dropped once the
 *         capture ended, so that nothing is freed into it).
 * @threads Any thread.
 * @notes The reference passes to the op when it is built.
 */
CUV_EXTERN cuv_op_t *cuv_free(cuv_buffer_t *buf);

/** The flags of cuv_memcpy_htod. */
enum {
  CUV_COPY_STAGE = 0,  /**< cuv copies the host data into pinned staging now (default). */
  CUV_COPY_BORROW = 1, /**< The host memory is used in place: keep it alive until completion. */
};

/* The copies below each take their own reference on the buffers; their output is unit. Executed,
 * each can also fail with CUV_EDEVICE (a stream of another device), CUV_ECONFLICT (a conflict
 * with a CUV_HAZARD_STRICT buffer), CUV_ENOMEM (no memory to track the access) or a driver
 * error of its copy or set. */
/** Copies `bytes` of host memory at src into dst at dst_offset (cuMemcpyHtoDAsync).
 *
 * With CUV_COPY_STAGE the data is copied into pinned staging now, so src may be reused at once.
 *
 * @returns A new op, never NULL, whose output is unit; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: dst is NULL, src is NULL with bytes > 0, or flags is neither flag.
 *         CUV_ERANGE: dst_offset + bytes is past dst's end.
 *         CUV_ENOMEM: no memory for the op or its staging.
 *         At execution: CUV_EDEVICE, CUV_ECONFLICT, CUV_ENOMEM, or the driver's error.
 * @threads Any thread.
 * @notes With CUV_COPY_BORROW, src must stay valid until the submission completes.
 */
CUV_EXTERN cuv_op_t *cuv_memcpy_htod(cuv_buffer_t *dst, size_t dst_offset, const void *src,
                                     size_t bytes, unsigned flags);
/** Copies `bytes` of src at src_offset into host memory at dst (cuMemcpyDtoHAsync).
 *
 * Into pageable memory the driver returns only once the copy ran, so the submitting thread waits
 * for the stream's earlier work (and what it waits on): from a loop thread, copy into pinned
 * memory (cuv_download_into a host buffer, or cuv_download).
 *
 * @returns A new op, never NULL, whose output is unit; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: src is NULL, or dst is NULL with bytes > 0.
 *         CUV_ERANGE: src_offset + bytes is past src's end.
 *         CUV_ENOMEM: no memory for the op.
 *         At execution: CUV_EDEVICE, CUV_ECONFLICT, CUV_ENOMEM, or the driver's error.
 * @threads Any thread.
 * @notes dst must stay valid until the submission completes; its contents are defined only then.
 */
CUV_EXTERN cuv_op_t *cuv_memcpy_dtoh(void *dst, cuv_buffer_t *src, size_t src_offset, size_t bytes);
/** Copies `bytes` of src at src_offset into dst at dst_offset, on one device.
 *
 * @returns A new op, never NULL, whose output is unit; a failure is carried by the op
 *          (cuv_op_error).
 * Unique storage: the destination range may not share a byte of device memory with the source
 * range (the same buffer, or two adopted over one allocation); disjoint ranges of one buffer are
 * fine.
 *
 * @errors CUV_EINVAL: dst or src is NULL.
 *         CUV_ERANGE: either range is past its buffer's end.
 *         CUV_EDEVICE: dst and src are buffers of two devices (use cuv_memcpy_peer).
 *         CUV_EOVERLAP: the two ranges overlap (bytes > 0).
 *         CUV_ENOMEM: no memory for the op.
 *         At execution: CUV_EDEVICE, CUV_ECONFLICT, CUV_ENOMEM, or the driver's error.
 * @threads Any thread.
 */
CUV_EXTERN cuv_op_t *cuv_memcpy_dtod(cuv_buffer_t *dst, size_t dst_offset, cuv_buffer_t *src,
                                     size_t src_offset, size_t bytes);
/** Copies between buffers of two devices (docs/devices.md), with cuMemcpyPeerAsync.
 *
 * It runs on a stream of dst's device.
 * cuv enables peer access once per pair of devices where cuDeviceCanAccessPeer allows it, and
 * copies without it where it does not.
 * Where the driver refuses the peer copy (CUDA_ERROR_NOT_SUPPORTED, CUDA_ERROR_NOT_PERMITTED or
 * CUDA_ERROR_PEER_ACCESS_UNSUPPORTED), it stages the copy through pinned host memory.
 * The op's device is dst's, and it touches both devices.
 * Buffers of one device: the same as cuv_memcpy_dtod.
 *
 * @returns A new op, never NULL, whose output is unit; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: dst or src is NULL.
 *         CUV_ERANGE: either range is past its buffer's end.
 *         CUV_ENOMEM: no memory for the op, or for staging at execution.
 *         CUV_ENOTSUP: executed inside a graph capture.
 *         At execution: CUV_EDEVICE (a stream of a device other than dst's, or a tree that did
 *         not name src's device), CUV_ECONFLICT, or the driver's error.
 * @threads Any thread.
 * @notes Both buffers are hazard-tracked and held until completion.
 */
CUV_EXTERN cuv_op_t *cuv_memcpy_peer(cuv_buffer_t *dst, size_t dst_offset, cuv_buffer_t *src,
                                     size_t src_offset, size_t bytes);
/** Sets `bytes` bytes of dst at offset to value (cuMemsetD8Async).
 *
 * @returns A new op, never NULL, whose output is unit; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: dst is NULL.
 *         CUV_ERANGE: offset + bytes is past dst's end.
 *         CUV_ENOMEM: no memory for the op.
 *         At execution: CUV_EDEVICE, CUV_ECONFLICT, CUV_ENOMEM, or the driver's error.
 * @threads Any thread.
 */
CUV_EXTERN cuv_op_t *cuv_memset8(cuv_buffer_t *dst, size_t offset, uint8_t value, size_t bytes);
/** Sets `count` 16-bit elements of dst from byte `offset` to value (cuMemsetD16Async).
 *
 * offset is in bytes and must be 2-byte aligned; count is in 16-bit elements.
 *
 * @returns A new op, never NULL, whose output is unit; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: dst is NULL, offset is not 2-byte aligned, or count * 2 overflows.
 *         CUV_ERANGE: the range is past dst's end.
 *         CUV_ENOMEM: no memory for the op.
 *         At execution: CUV_EDEVICE, CUV_ECONFLICT, CUV_ENOMEM, or the driver's error.
 * @threads Any thread.
 */
CUV_EXTERN cuv_op_t *cuv_memset16(cuv_buffer_t *dst, size_t offset, uint16_t value, size_t count);
/** Sets `count` 32-bit words of dst from byte `offset` to value (cuMemsetD32Async).
 *
 * offset is in bytes and must be 4-byte aligned; count is in 32-bit words.
 *
 * @returns A new op, never NULL, whose output is unit; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: dst is NULL, offset is not 4-byte aligned, or count * 4 overflows.
 *         CUV_ERANGE: the range is past dst's end.
 *         CUV_ENOMEM: no memory for the op.
 *         At execution: CUV_EDEVICE, CUV_ECONFLICT, CUV_ENOMEM, or the driver's error.
 * @threads Any thread.
 */
CUV_EXTERN cuv_op_t *cuv_memset32(cuv_buffer_t *dst, size_t offset, uint32_t value, size_t count);
/** Copies a device range into new host memory (pinned, from cuv's pool).
 *
 * @returns A new op, never NULL, whose output is a pointer to `bytes` bytes (valid after
 *          completion), released with the output; a failure is carried by the op (cuv_op_error).
 * @errors CUV_EINVAL: src is NULL, or bytes is 0.
 *         CUV_ERANGE: src_offset + bytes is past src's end.
 *         CUV_ENOMEM: no memory for the op, or no pinned memory at execution.
 *         At execution: CUV_EDEVICE, CUV_ECONFLICT, or the driver's error.
 * @threads Any thread.
 */
CUV_EXTERN cuv_op_t *cuv_download(cuv_buffer_t *src, size_t src_offset, size_t bytes);

/* Host buffers: page-locked host memory from cuv's pinned pool, usable by every context, and
 * reference counted like device buffers. A copy from or into one is a single DMA, with no staging
 * copy (a server can assemble a batch in one and upload it as is), and every op that uses one
 * holds a reference until its GPU work is proven complete, so dropping yours early is safe. The
 * caller orders host accesses: write it only while no submission that reads it is in flight, and
 * read what cuv_download_into wrote only after that submission completed. */
/** A host buffer: reference counted page-locked host memory from cuv's pinned pool. */
typedef struct cuv_host_buffer_s cuv_host_buffer_t;
/** Allocates a host buffer of `bytes` from dev's pinned pool.
 *
 * It initializes the process as cuv_init() does if nothing did.
 *
 * @returns 0, and *out holds the caller's first reference.
 * @errors CUV_EINVAL: out or dev is NULL, or bytes is 0 (*out is set to NULL when out is not).
 *         CUV_ENOMEM: no pinned memory of that size.
 *         Any error of cuv_init() when that initialization failed (its status is returned).
 * @threads Any thread.
 * @notes The memory goes back to the pool at the last cuv_host_buffer_unref.
 */
CUV_EXTERN int cuv_host_buffer_create(cuv_host_buffer_t **out, cuv_device_t *dev, size_t bytes);
/** The host buffer's memory.
 *
 * @returns The address, or NULL when buf is NULL.
 * @threads Any thread.
 * @notes Valid while the buffer is referenced.
 */
CUV_EXTERN void *cuv_host_buffer_data(const cuv_host_buffer_t *buf);
/** The host buffer's size in bytes.
 *
 * @returns The size, or 0 when buf is NULL.
 * @threads Any thread.
 */
CUV_EXTERN size_t cuv_host_buffer_size(const cuv_host_buffer_t *buf);
/** Takes one more reference on buf.
 *
 * @returns buf, or NULL when buf is NULL.
 * @threads Any thread.
 */
CUV_EXTERN cuv_host_buffer_t *cuv_host_buffer_ref(cuv_host_buffer_t *buf);
/** Drops a reference; at the last one the memory goes back to the pinned pool.
 *
 * NULL is ignored.
 *
 * @threads Any thread.
 */
CUV_EXTERN void cuv_host_buffer_unref(cuv_host_buffer_t *buf);
/** Uploads: dst[dst_offset..+bytes) = src[src_offset..+bytes), in one DMA.
 *
 * @returns A new op, never NULL, whose output is unit; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: dst or src is NULL.
 *         CUV_ERANGE: either range is past its buffer's end.
 *         CUV_ENOMEM: no memory for the op.
 *         At execution: CUV_EDEVICE, CUV_ECONFLICT, CUV_ENOMEM, or the driver's error.
 * @threads Any thread.
 * @notes The op holds references on both buffers until the copy is proven complete.
 */
CUV_EXTERN cuv_op_t *cuv_upload(cuv_buffer_t *dst, size_t dst_offset, cuv_host_buffer_t *src,
                                size_t src_offset, size_t bytes);
/** Downloads: dst[dst_offset..+bytes) = src[src_offset..+bytes), in one DMA.
 *
 * @returns A new op, never NULL, whose output is unit; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: dst or src is NULL.
 *         CUV_ERANGE: either range is past its buffer's end.
 *         CUV_ENOMEM: no memory for the op.
 *         At execution: CUV_EDEVICE, CUV_ECONFLICT, CUV_ENOMEM, or the driver's error.
 * @threads Any thread.
 * @notes dst's contents are defined once the submission completed.
 */
CUV_EXTERN cuv_op_t *cuv_download_into(cuv_host_buffer_t *dst, size_t dst_offset,
                                       cuv_buffer_t *src, size_t src_offset, size_t bytes);

/* ---- buffer helpers: new buffers as lazy ops ------------------------------------------------- */

/* Zeros, ones, patterns, iota and copies. Each op allocates a buffer on the executing stream
 * (stream-ordered, as cuv_alloc) and fills it there; its output is the new buffer (a
 * cuv_buffer_t *: cuv_output_buffer), which the submission holds as written, so another stream's
 * use of it is ordered after the fill as for cuv_memset32. count is in elements: 0, or
 * count * element size past SIZE_MAX, is CUV_EINVAL; so is a NULL device or buffer. Executed on a
 * stream of another device: CUV_EDEVICE. Like cuv_alloc, refused inside a graph capture
 * (CUV_ENOTSUP). */
/** A new buffer of `count` bytes, each set to value.
 *
 * @returns A new op, never NULL, whose output is the new buffer; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: dev is NULL, or count is 0.
 *         CUV_ENOMEM: no memory for the op, the buffer object or its tracking.
 *         CUV_EDEVICE: executed on a stream of another device.
 *         A driver error when cuMemAllocAsync or the set fails.
 * @threads Any thread.
 */
CUV_EXTERN cuv_op_t *cuv_fill8(cuv_device_t *dev, size_t count, uint8_t value);
/** A new buffer of `count` 16-bit elements, each set to value.
 *
 * @returns A new op, never NULL, whose output is the new buffer; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: dev is NULL, count is 0, or count * 2 is past SIZE_MAX.
 *         CUV_ENOMEM: no memory for the op, the buffer object or its tracking.
 *         CUV_EDEVICE: executed on a stream of another device.
 *         A driver error when cuMemAllocAsync or the set fails.
 * @threads Any thread.
 */
CUV_EXTERN cuv_op_t *cuv_fill16(cuv_device_t *dev, size_t count, uint16_t value);
/** A new buffer of `count` 32-bit words, each set to value.
 *
 * @returns A new op, never NULL, whose output is the new buffer; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: dev is NULL, count is 0, or count * 4 is past SIZE_MAX.
 *         CUV_ENOMEM: no memory for the op, the buffer object or its tracking.
 *         CUV_EDEVICE: executed on a stream of another device.
 *         A driver error when cuMemAllocAsync or the set fails.
 * @threads Any thread.
 */
CUV_EXTERN cuv_op_t *cuv_fill32(cuv_device_t *dev, size_t count, uint32_t value);
/** A new buffer of `bytes` zero bytes (zero in every type).
 *
 * @returns A new op, never NULL, whose output is the new buffer; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: dev is NULL, or bytes is 0.
 *         CUV_ENOMEM: no memory for the op, the buffer object or its tracking.
 *         CUV_EDEVICE: executed on a stream of another device.
 *         A driver error when cuMemAllocAsync or the set fails.
 * @threads Any thread.
 */
CUV_EXTERN cuv_op_t *cuv_zeros(cuv_device_t *dev, size_t bytes);
/** A new buffer of `count` floats of 1.0f.
 *
 * @returns A new op, never NULL, whose output is the new buffer; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: dev is NULL, count is 0, or count * 4 is past SIZE_MAX.
 *         CUV_ENOMEM: no memory for the op, the buffer object or its tracking.
 *         CUV_EDEVICE: executed on a stream of another device.
 *         A driver error when cuMemAllocAsync or the set fails.
 * @threads Any thread.
 */
CUV_EXTERN cuv_op_t *cuv_ones_f32(cuv_device_t *dev, size_t count);
/** A new buffer of `count` uint32_t: element i is start + i * step, modulo 2^32.
 *
 * The values are computed on the host when the op executes, into pinned staging.
 * They are copied in with one DMA.
 *
 * @returns A new op, never NULL, whose output is the new buffer; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: dev is NULL, count is 0, or count * 4 is past SIZE_MAX.
 *         CUV_ENOMEM: no memory for the op, the buffer object, its tracking or the staging.
 *         CUV_EDEVICE: executed on a stream of another device.
 *         A driver error when cuMemAllocAsync or the copy fails.
 * @threads Any thread.
 */
CUV_EXTERN cuv_op_t *cuv_iota_u32(cuv_device_t *dev, size_t count, uint32_t start, uint32_t step);
/** A new buffer of `count` floats: element i is start + i * step.
 *
 * Each element is computed in double and rounded to float once.
 * The values are computed on the host when the op executes, into pinned staging.
 * They are copied in with one DMA.
 *
 * @returns A new op, never NULL, whose output is the new buffer; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: dev is NULL, count is 0, or count * 4 is past SIZE_MAX.
 *         CUV_ENOMEM: no memory for the op, the buffer object, its tracking or the staging.
 *         CUV_EDEVICE: executed on a stream of another device.
 *         A driver error when cuMemAllocAsync or the copy fails.
 * @threads Any thread.
 */
CUV_EXTERN cuv_op_t *cuv_iota_f32(cuv_device_t *dev, size_t count, float start, float step);
/** A new buffer of src's size holding a copy of src.
 *
 * src is read on the executing stream, ordered after writers of src on other streams.
 *
 * @returns A new op, never NULL, whose output is the new buffer; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: src is NULL.
 *         CUV_ENOMEM: no memory for the op, the buffer object or its tracking.
 *         CUV_EDEVICE: executed on a stream of a device other than src's.
 *         CUV_ECONFLICT: src is CUV_HAZARD_STRICT and another stream still writes it.
 *         A driver error when cuMemAllocAsync or the copy fails.
 * @threads Any thread.
 * @notes The op holds a reference on src until the copy is proven complete.
 */
CUV_EXTERN cuv_op_t *cuv_dup(cuv_buffer_t *src);
/** The buffer an output holds.
 *
 * That is the buffer of cuv_alloc, the helpers above, a launch with one op argument, or a
 * cuv_value passing such an output on.
 *
 * @returns The buffer, or NULL when out is NULL or holds none.
 * @threads Any thread.
 * @notes Borrowed: it lives as long as the output, or take a reference (cuv_buffer_ref).
 */
CUV_EXTERN cuv_buffer_t *cuv_output_buffer(const cuv_output_t *out);

/* ---- modules and kernels -------------------------------------------------------------------- */

/** A loaded module (cuModule) of one device, reference-counted. */
typedef struct cuv_module_s cuv_module_t;
/** A kernel of a module (cuFunction), reference-counted; it holds a reference on its module. */
typedef struct cuv_kernel_s cuv_kernel_t;

/** Loads PTX (NUL-terminated), cubin or fatbin from memory onto `dev` (cuModuleLoadData).
 *
 * `size` is the image's size in bytes; 0 means a NUL-terminated PTX text (its length is taken).
 * The image is copied before the driver reads it, so a PTX image given with its length but
 * without a NUL is accepted.
 *
 * @returns 0, and *mod holds the caller's first reference.
 * @errors CUV_EINVAL: mod, dev or image is NULL.
 *         CUV_ENOMEM: no memory for the module or the image's copy.
 *         A driver error (a CUresult as a negative code, see errors.h) when binding dev's context
 *         or cuModuleLoadData fails (an invalid image, one built for another architecture...).
 * @threads Any thread.
 * @notes The module holds a reference on dev. cuv_module_unref drops the caller's reference.
 */
CUV_EXTERN int cuv_module_load_data(cuv_module_t **mod, cuv_device_t *dev, const void *image,
                                    size_t size);
/** Loads the PTX, cubin or fatbin file at `path` onto `dev`, as cuv_module_load_data does.
 *
 * The whole file is read into memory, NUL-terminated, and loaded from there.
 *
 * @returns 0, and *mod holds the caller's first reference.
 * @errors CUV_EINVAL: mod, dev or path is NULL.
 *         CUV_EIO: the file cannot be opened, its size cannot be found, or reading it fails.
 *         CUV_ENOMEM: no memory for the file's contents or the module.
 *         A driver error (a CUresult as a negative code, see errors.h) when binding dev's context
 *         or cuModuleLoadData fails.
 * @threads Any thread.
 * @notes The module holds a reference on dev. cuv_module_unref drops the caller's reference.
 */
CUV_EXTERN int cuv_module_load_file(cuv_module_t **mod, cuv_device_t *dev, const char *path);
/** Takes one more reference on mod.
 *
 * @returns mod, or NULL when mod is NULL.
 * @threads Any thread.
 */
CUV_EXTERN cuv_module_t *cuv_module_ref(cuv_module_t *mod);
/** Drops the caller's reference; NULL is ignored.
 *
 * @threads Any thread.
 * @notes The module is unloaded (cuModuleUnload) once no kernel or submission holds it: a kernel
 *        holds its module, and a launch holds its kernel until its submission retires.
 */
CUV_EXTERN void cuv_module_unref(cuv_module_t *mod);
/** Looks a kernel up by name in mod (cuModuleGetFunction).
 *
 * Where the driver can tell (CUDA 12.4+), the kernel's parameter count and sizes are read too,
 * so that cuv_launch checks arguments against them.
 *
 * @returns 0, and *kernel holds the caller's first reference.
 * @errors CUV_EINVAL: kernel, mod or name is NULL, or name is too long for cuv to keep.
 *         CUV_ENOMEM: no memory for the kernel.
 *         CUV_ENOTFOUND: mod has no kernel of that name.
 *         A driver error (a CUresult as a negative code, see errors.h) when binding the
 *         module's context or cuModuleGetFunction fails otherwise.
 * @threads Any thread.
 * @notes The kernel holds a reference on its module. cuv_kernel_unref drops the caller's.
 */
CUV_EXTERN int cuv_kernel_get(cuv_kernel_t **kernel, cuv_module_t *mod, const char *name);
/** Takes one more reference on kernel.
 *
 * @returns kernel, or NULL when kernel is NULL.
 * @threads Any thread.
 */
CUV_EXTERN cuv_kernel_t *cuv_kernel_ref(cuv_kernel_t *kernel);
/** Drops the caller's reference; NULL is ignored.
 *
 * @threads Any thread.
 * @notes The last reference (a launch holds one until its submission retires) frees the kernel
 *        and drops its reference on the module.
 */
CUV_EXTERN void cuv_kernel_unref(cuv_kernel_t *kernel);
/** The kernel's number of parameters, where the driver can tell (CUDA 12.4+).
 *
 * @returns 0, and *count holds the number of parameters.
 * @errors CUV_EINVAL: kernel or count is NULL.
 *         CUV_ENOTSUP: the driver cannot tell (older than CUDA 12.4, or its query failed).
 * @threads Any thread.
 */
CUV_EXTERN int cuv_kernel_param_count(const cuv_kernel_t *kernel, size_t *count);

/** A grid or block shape, in three dimensions; every one must be at least 1 for cuv_launch. */
typedef struct cuv_dim3 {
  unsigned x; /**< The first dimension. */
  unsigned y; /**< The second dimension. */
  unsigned z; /**< The third dimension. */
} cuv_dim3_t;
/** A cuv_dim3_t of x_ by y_ by z_. */
#define CUV_DIM3(x_, y_, z_) ((cuv_dim3_t){(x_), (y_), (z_)})
/** A one-dimensional cuv_dim3_t: x_ by 1 by 1. */
#define CUV_DIM1(x_) ((cuv_dim3_t){(x_), 1, 1})

/** What a kernel argument is, and how the kernel accesses a buffer argument. */
enum cuv_arg_kind {
  CUV_ARG_KIND_SCALAR, /**< A value, copied when the launch op is built. */
  CUV_ARG_KIND_READ,   /**< A buffer (or an op's buffer) the kernel only reads. */
  CUV_ARG_KIND_WRITE,  /**< A buffer (or an op's buffer) the kernel writes. */
  CUV_ARG_KIND_RW,     /**< A buffer (or an op's buffer) the kernel reads and writes. */
};

/** Flags of a buffer argument (cuv_arg_t.flags). */
enum {
  /** This writable argument may share storage with other writable arguments of its launch: for a
   * kernel that aliases on purpose and orders its own accesses. */
  CUV_ARG_FLAG_MAY_ALIAS = 1u << 0,
};

/** One kernel argument: a buffer with its access (passed to the kernel as the buffer's device
 * pointer plus offset), a scalar of any size and alignment (copied when the launch op is built; a
 * struct __align__(32) is passed as it is, the driver lays it out), or an op whose output buffer
 * becomes the argument (CUV_ARG_OP_*, below).
 *
 * Unique storage: a writable buffer argument (WRITE,
 * RW) names the bytes [offset, offset + length) of its buffer (length 0: to the buffer's end), and
 * no other writable argument of the launch may name any of them: cuv_launch refuses that with
 * CUV_EARGS. Disjoint ranges of one buffer are fine. A read may overlap a write: an in-place
 * kernel reads through one pointer what it writes through another (y = f(x) with y == x), and
 * refusing that would refuse the common case to catch nothing a single writer could not do alone.
 * A kernel that aliases writable arguments on purpose marks one with CUV_ARG_MAY_ALIAS. A range
 * past the buffer is CUV_ERANGE. Hazard tracking between streams stays per buffer, whatever the
 * ranges.
 *
 * Build arguments with the CUV_ARG_* macros rather than by hand. */
typedef struct cuv_arg {
  enum cuv_arg_kind kind; /**< Scalar, or the buffer argument's access. */
  cuv_buffer_t *buffer;   /**< Buffer arguments: the buffer (NULL for an op argument). */
  size_t offset;          /**< Buffer arguments: bytes into the buffer. */
  const void *scalar;     /**< Scalars: the value, `size` bytes. */
  size_t size;            /**< Scalars: the value's size in bytes (not 0). */
  size_t length; /**< Buffer arguments: bytes the kernel may touch from offset; 0: to the end. */
  unsigned flags; /**< Buffer arguments: CUV_ARG_FLAG_*; 0 for scalars. */
  cuv_op_t *op;   /**< Op arguments, instead of buffer: the op, consumed by cuv_launch. */
} cuv_arg_t;

/** @cond INTERNAL */
#define CUV__ARG_BUF(kind, buf, off, len)                                                         \
  ((cuv_arg_t){(kind), (buf), (off), NULL, 0, (len), 0, NULL})
/** @endcond */
/** A buffer the kernel reads, from its start. */
#define CUV_ARG_READ(buf) CUV__ARG_BUF(CUV_ARG_KIND_READ, (buf), 0, 0)
/** A buffer the kernel writes, from its start. */
#define CUV_ARG_WRITE(buf) CUV__ARG_BUF(CUV_ARG_KIND_WRITE, (buf), 0, 0)
/** A buffer the kernel reads and writes, from its start. */
#define CUV_ARG_RW(buf) CUV__ARG_BUF(CUV_ARG_KIND_RW, (buf), 0, 0)
/** CUV_ARG_READ at a byte offset into the buffer (the kernel receives its pointer + offset). */
#define CUV_ARG_READ_AT(buf, off) CUV__ARG_BUF(CUV_ARG_KIND_READ, (buf), (off), 0)
/** CUV_ARG_WRITE at a byte offset into the buffer (the kernel receives its pointer + offset). */
#define CUV_ARG_WRITE_AT(buf, off) CUV__ARG_BUF(CUV_ARG_KIND_WRITE, (buf), (off), 0)
/** CUV_ARG_RW at a byte offset into the buffer (the kernel receives its pointer + offset). */
#define CUV_ARG_RW_AT(buf, off) CUV__ARG_BUF(CUV_ARG_KIND_RW, (buf), (off), 0)
/** CUV_ARG_READ_AT for the `len` bytes from `off` only. */
#define CUV_ARG_READ_RANGE(buf, off, len) CUV__ARG_BUF(CUV_ARG_KIND_READ, (buf), (off), (len))
/** CUV_ARG_WRITE_AT for the `len` bytes from `off` only: two writable ranges of one buffer that
 * do not overlap are accepted (two halves written by one kernel). */
#define CUV_ARG_WRITE_RANGE(buf, off, len) CUV__ARG_BUF(CUV_ARG_KIND_WRITE, (buf), (off), (len))
/** CUV_ARG_RW_AT for the `len` bytes from `off` only: two writable ranges of one buffer that do
 * not overlap are accepted. */
#define CUV_ARG_RW_RANGE(buf, off, len) CUV__ARG_BUF(CUV_ARG_KIND_RW, (buf), (off), (len))
/** A scalar of `bytes` bytes at `ptr`, copied when the launch op is built. */
#define CUV_ARG_SCALAR(ptr, bytes)                                                                \
  ((cuv_arg_t){CUV_ARG_KIND_SCALAR, NULL, 0, (ptr), (bytes), 0, 0, NULL})
/** A scalar: the value of `lvalue`, sizeof(lvalue) bytes. */
#define CUV_ARG_VALUE(lvalue) CUV_ARG_SCALAR(&(lvalue), sizeof(lvalue))

/** `arg` marked CUV_ARG_FLAG_MAY_ALIAS: CUV_ARG_MAY_ALIAS(CUV_ARG_RW(buf)).
 *
 * @returns A copy of arg with CUV_ARG_FLAG_MAY_ALIAS set in its flags.
 * @threads Any thread.
 */
static inline cuv_arg_t cuv_arg_may_alias(cuv_arg_t arg) {
  arg.flags |= CUV_ARG_FLAG_MAY_ALIAS;
  return arg;
}
/** `arg` marked CUV_ARG_FLAG_MAY_ALIAS (cuv_arg_may_alias). */
#define CUV_ARG_MAY_ALIAS(arg) cuv_arg_may_alias(arg)

/** @cond INTERNAL */
#define CUV__ARG_OP(kind, op_) ((cuv_arg_t){(kind), NULL, 0, NULL, 0, 0, 0, (op_)})
/** @endcond */
/** An op as a kernel argument the kernel reads: CUV_ARG_OP_READ(cuv_dup(x)).
 *
 * The op must output a buffer (cuv_output_buffer: cuv_alloc, the buffer helpers, or a then, map
 * or cuv_value passing one on). The launch runs it first, on its own stream, before the kernel and
 * in argument order, and passes that buffer with the access given (offset and length apply to
 * it, as to a buffer argument: CUV_ERANGE past it). The launch's output is then that buffer's
 * output (one op argument) or a tuple of them in argument order (several), instead of unit:
 * cuv_sync(cuv_launch(k, grid, block, 0, args, n), &out) hands the results back. An op whose
 * output is not a buffer fails the launch with CUV_EARGS when it runs; one of another device is
 * CUV_EDEVICE. cuv_launch consumes every op argument, also when it fails (an op owned elsewhere
 * already, or named twice: CUV_ECONSUMED). */
#define CUV_ARG_OP_READ(op) CUV__ARG_OP(CUV_ARG_KIND_READ, (op))
/** An op as a kernel argument the kernel writes (see CUV_ARG_OP_READ). */
#define CUV_ARG_OP_WRITE(op) CUV__ARG_OP(CUV_ARG_KIND_WRITE, (op))
/** An op as a kernel argument the kernel reads and writes: CUV_ARG_OP_RW(cuv_dup(x))
 * (see CUV_ARG_OP_READ). */
#define CUV_ARG_OP_RW(op) CUV__ARG_OP(CUV_ARG_KIND_RW, (op))

/** A kernel launch (cuLaunchKernel) of `grid` blocks of `block` threads, with `shared_bytes` of
 * dynamic shared memory and the `nargs` arguments of `args`.
 *
 * Arguments are checked against the kernel's parameter count and sizes where the driver reports
 * them (CUV_EARGS), and for unique storage (cuv_arg_t). Buffer arguments become device pointers
 * when the op is built and scalars are copied into it, so args is free once cuv_launch returns.
 * Output: unit, or the buffers of its op arguments (CUV_ARG_OP_READ).
 *
 * @returns A new op, never NULL; a failure is carried by the op (cuv_op_error).
 * @errors CUV_EINVAL: kernel is NULL, args is NULL with nargs > 0, a grid or block dimension is
 *         0, an argument's kind or flags are unknown, a scalar has no value, size 0, a length,
 *         flags or an op, or a buffer argument names both a buffer and an op, or neither.
 *         CUV_ERANGE: a buffer argument's offset and length reach past its buffer (for an op
 *         argument: past the op's buffer, when it runs).
 *         CUV_EDEVICE: a buffer argument's buffer, or an op argument, is of another device than
 *         the kernel (for an op argument's buffer: when it runs).
 *         CUV_EARGS: the argument count or an argument's size differs from the kernel's
 *         parameters, two writable arguments name overlapping bytes of one buffer (neither
 *         marked CUV_ARG_FLAG_MAY_ALIAS), or an op argument's output is not a buffer (when it
 *         runs).
 *         CUV_ECONSUMED: an op argument is already held by another combinator, or named twice.
 *         CUV_ENOMEM: no memory for the op, its argument list, or the tuple of op outputs.
 *         An op argument's own error, when it is an error op or fails when it runs.
 *         A driver error (a CUresult as a negative code, see errors.h) when cuLaunchKernel fails.
 * @threads Any thread builds it. It executes on the thread that makes the submission's driver
 *          calls.
 * @notes Consumes every op argument, also when it fails. The op holds the kernel, and the buffers
 *        with their access, until its submission retires.
 */
CUV_EXTERN cuv_op_t *cuv_launch(cuv_kernel_t *kernel, cuv_dim3_t grid, cuv_dim3_t block,
                                unsigned shared_bytes, const cuv_arg_t *args, size_t nargs);

/* ---- combinators ---------------------------------------------------------------------------- */

/* Devices: a combinator may hold ops of several devices (docs/devices.md). The tree executes
 * on a stream of its first op's device (cuv_op_device); an op of another device runs on a stream
 * of its own device (the executor's policy's when it serves that device, else that device's
 * default policy's), after what the executing stream enqueued before it, and the executing
 * stream waits for it before what follows: "the same stream" below is, for such an op, the
 * order this gives. The op a then or with_context callback returns may use only the devices the
 * tree named when it was built (CUV_EDEVICE otherwise). A tree over several devices cannot be
 * captured into a graph (CUV_ENOTSUP). */

/** The callback of cuv_then: receives the output of `first` (owned) and returns the next op. */
typedef cuv_op_t *(*cuv_then_fn)(cuv_output_t *input, void *arg);
/** Continues `first` with the op that fn returns.
 *
 * At execution, after `first` was enqueued, fn receives first's output (it owns it: pass it on or
 * release it) and returns the op to enqueue next on the same stream.
 * When fn runs (the same for map): right after the work before it was enqueued, except that when
 * that work includes a copy to the host (cuv_download, cuv_download_into, cuv_memcpy_dtoh, or a
 * with_context whose calls may have been one), fn runs once the stream got there, so it reads the
 * downloaded data. Otherwise the GPU may not have run `first` yet: use the output's handles, not
 * device data.
 *
 * @returns A new op, never NULL; a failure is carried by the op (cuv_op_error).
 * @errors CUV_EINVAL: first or fn is NULL (first is released), or fn returned NULL.
 *         CUV_ECONSUMED: first is already held by another combinator.
 *         CUV_ENOMEM: no memory for the op.
 *         first's own error, when first is an error op (that op is returned).
 *         CUV_EREENTRANT: fn executed another op inside it.
 *         CUV_EDEVICE: fn returned an op of a device the tree did not name when it was built.
 *         CUV_ECANCELED: the submission was cancelled before fn started.
 * @threads Any thread builds it. fn runs on the thread that makes the submission's driver calls,
 *          under the execution lock. For cuv_submit and the libuv bridge that thread is never
 *          one that must not block while the callback waits for a copy: such submissions go to
 *          a cuv-submit-N thread (with submit_threads 0 there is none, and the submitting thread
 *          waits). The blocking executors and cuv_enqueue_on wait on the calling thread. Inside
 *          cuv_graph_capture nothing runs, so fn does not wait.
 * @notes Consumes first. Cancelled (cuv_cancel; the same for map, with_context and custom ops):
 *        fn does not start once its submission was cancelled (the then fails with CUV_ECANCELED
 *        and first's output is released). The submission's done waits for an fn already running,
 *        so fn never runs after done started and may use what done frees. arg has no release
 *        function: free it in done, or after the executor returned.
 */
CUV_EXTERN cuv_op_t *cuv_then(cuv_op_t *first, cuv_then_fn fn, void *arg);
/** The same as cuv_then without the execution lock, for code that knows what it does.
 *
 * @returns A new op, never NULL; a failure is carried by the op (cuv_op_error).
 * @errors The codes of cuv_then, except CUV_EREENTRANT.
 * @threads As cuv_then, except that fn does not hold the execution lock.
 * @notes Consumes first.
 */
CUV_EXTERN cuv_op_t *cuv_then_unchecked(cuv_op_t *first, cuv_then_fn fn, void *arg);
/** Runs first, then second on the same stream.
 *
 * @returns A new op, never NULL, whose output is second's; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: first or second is NULL.
 *         CUV_ECONSUMED: first or second is already held by another combinator.
 *         The first error of first and second, when either is an error op.
 *         CUV_ENOMEM: no memory for the op.
 * @threads Any thread.
 * @notes Consumes first and second. first's output is released.
 */
CUV_EXTERN cuv_op_t *cuv_seq(cuv_op_t *first, cuv_op_t *second);

/** The callback of cuv_map: may replace *value (releasing the old one); a negative return fails
 * the op. */
typedef int (*cuv_map_fn)(cuv_output_t *value, void *arg);
/** Transforms the output of `op` on the host.
 *
 * fn runs when and where then's fn would run (cuv_then: after a copy to the host, once the data
 * landed), under the execution lock.
 *
 * @returns A new op, never NULL; a failure is carried by the op (cuv_op_error).
 * @errors CUV_EINVAL: op or fn is NULL.
 *         CUV_ECONSUMED: op is already held by another combinator.
 *         CUV_ENOMEM: no memory for the op.
 *         op's own error, when op is an error op.
 *         fn's negative return, when fn fails.
 *         CUV_ECANCELED: the submission was cancelled before fn started.
 * @threads Any thread builds it; fn runs on the thread cuv_then names for its fn.
 * @notes Consumes op. Cancellation and arg's lifetime are as for cuv_then.
 */
CUV_EXTERN cuv_op_t *cuv_map(cuv_op_t *op, cuv_map_fn fn, void *arg);

/** Runs the n ops in order on one stream.
 *
 * @returns A new op, never NULL, whose output is a tuple of their outputs; a failure is carried
 *          by the op (cuv_op_error).
 * @errors CUV_EINVAL: ops is NULL, n is 0, or an entry is NULL.
 *         CUV_ECONSUMED: an op is already held by another combinator, or is listed twice.
 *         The first error among the ops, when one is an error op.
 *         CUV_ENOMEM: no memory for the op or its tuple.
 * @threads Any thread.
 * @notes Consumes ops[].
 */
CUV_EXTERN cuv_op_t *cuv_zip(cuv_op_t *const *ops, size_t n);
/** Runs the n ops on different streams of the policy (the executing stream for the first), and
 * joins them back with events.
 *
 * @returns A new op, never NULL, whose output is a tuple; a failure is carried by the op
 *          (cuv_op_error).
 * @errors The codes of cuv_zip, and at execution a driver error (a CUresult as a negative code)
 *         when an event cannot be made or recorded.
 * @threads Any thread.
 * @notes Consumes ops[].
 */
CUV_EXTERN cuv_op_t *cuv_fork(cuv_op_t *const *ops, size_t n);

/** An execute-once op whose clones may be consumed anywhere, also concurrently from several
 * threads.
 *
 * The first clone executed runs the op, the others wait for it to be enqueued. A clone executed
 * on another stream is ordered after the producer with a CUDA event. Every clone outputs a view
 * of the same value (data identical). The value is released when the shared handle and every
 * clone output are gone. A buffer is viewed through a reference of its own, so a clone's output
 * is a buffer to cuv_output_buffer and may be a launch's op argument. */
typedef struct cuv_shared_s cuv_shared_t;
/** Makes a shared handle of op.
 *
 * @returns A handle holding the caller's first reference, never NULL: without an op (CUV_EINVAL)
 *          or memory (CUV_ENOMEM) it returns a handle whose clones fail with that status, as an
 *          error op does.
 * @errors None returned; its clones carry CUV_EINVAL (op is NULL), CUV_ENOMEM (no memory),
 *         CUV_ECONSUMED (op is already held by a combinator) or op's own error.
 * @threads Any thread.
 * @notes Consumes op. Release the handle with cuv_shared_unref.
 */
CUV_EXTERN cuv_shared_t *cuv_shared(cuv_op_t *op);
/** Makes an op that outputs a view of the shared value.
 *
 * @returns A new op, never NULL; a failure is carried by the op (cuv_op_error).
 * @errors CUV_EINVAL: shared is NULL.
 *         CUV_ENOMEM: no memory for the op.
 *         The shared handle's status, when cuv_shared failed or the shared op failed.
 *         CUV_EREENTRANT: the clone was executed inside its own producer.
 * @threads Any thread; clones may be executed concurrently from several threads.
 * @notes The clone holds a reference to the shared handle.
 */
CUV_EXTERN cuv_op_t *cuv_shared_clone(cuv_shared_t *shared);
/** Takes another reference to `shared`.
 *
 * @returns shared, or NULL when shared is NULL.
 * @threads Any thread.
 */
CUV_EXTERN cuv_shared_t *cuv_shared_ref(cuv_shared_t *shared);
/** Drops a reference to `shared`; NULL is ignored.
 *
 * @threads Any thread.
 * @notes The value lives on while a clone output holds it.
 */
CUV_EXTERN void cuv_shared_unref(cuv_shared_t *shared);
/** How many times the shared op's own work ran, for tests and debugging.
 *
 * @returns 0 or 1; 0 when shared is NULL.
 * @threads Any thread.
 */
CUV_EXTERN unsigned cuv_shared_runs(const cuv_shared_t *shared);

/* ---- scheduling policies -------------------------------------------------------------------- */

/** A scheduling policy: picks the stream each op runs on. */
typedef struct cuv_policy_s cuv_policy_t;

/** A policy's behaviour. */
typedef struct cuv_policy_ops {
  /** Picks a stream for an op and returns it borrowed (the policy keeps it alive). */
  int (*next_stream)(void *state, const cuv_op_t *op, cuv_stream_t **stream);
  /** Tells which device the policy serves. */
  cuv_device_t *(*device)(void *state);
  /** Frees state (may be NULL). */
  void (*destroy)(void *state);
} cuv_policy_ops_t;

/** Makes a policy of the caller's own behaviour `ops` over `state`.
 *
 * @returns 0, and *policy holds the new policy.
 * @errors CUV_EINVAL: policy or ops is NULL, or ops lacks next_stream or device.
 *         CUV_ENOMEM: no memory for the policy.
 * @threads Any thread.
 * @notes ops is copied. cuv_policy_destroy calls ops->destroy(state).
 */
CUV_EXTERN int cuv_policy_create(cuv_policy_t **policy, const cuv_policy_ops_t *ops, void *state);
/** Round-robin over `nstreams` new streams of `dev` (0: the configuration's `streams`, 4 by
 * default).
 *
 * @returns 0, and *policy holds the new policy.
 * @errors CUV_EINVAL: policy or dev is NULL, or nstreams is over 1024.
 *         CUV_ENOMEM: no memory for the policy.
 *         A driver error (a CUresult as a negative code) when a stream cannot be created.
 * @threads Any thread.
 * @notes The policy holds its streams; destroy it with cuv_policy_destroy.
 */
CUV_EXTERN int cuv_policy_round_robin(cuv_policy_t **policy, cuv_device_t *dev, unsigned nstreams);
/** Always `stream` (also a wrapped application stream).
 *
 * @returns 0, and *policy holds the new policy.
 * @errors CUV_EINVAL: policy or stream is NULL.
 *         CUV_ENOMEM: no memory for the policy.
 * @threads Any thread.
 * @notes The policy holds a reference to stream.
 */
CUV_EXTERN int cuv_policy_single(cuv_policy_t **policy, cuv_stream_t *stream);
/** The stream with the fewest submissions in flight among `nstreams` new streams (0: as for
 * cuv_policy_round_robin).
 *
 * @returns 0, and *policy holds the new policy.
 * @errors The codes of cuv_policy_round_robin.
 * @threads Any thread.
 * @notes The policy holds its streams; destroy it with cuv_policy_destroy.
 */
CUV_EXTERN int cuv_policy_least_loaded(cuv_policy_t **policy, cuv_device_t *dev, unsigned nstreams);
/** Round-robin policy over a set of devices (`ndevs` distinct devices, 1 to 64), with `nstreams`
 * new streams on each (0: as for cuv_policy_round_robin).
 *
 * An op of one of them runs on that device's streams (round-robin). An op of no device
 * (cuv_value, cuv_with_context, trees of such) goes to the next device in turn. An op of a device
 * outside the set is refused with CUV_EDEVICE. The parts of a tree on other devices of the set
 * take their streams from it too. cuv_policy_device gives the first device.
 *
 * @returns 0, and *policy holds the new policy.
 * @errors CUV_EINVAL: policy or devs is NULL, ndevs is 0 or over 64, an entry is NULL or
 *         repeated, or nstreams is over 1024.
 *         CUV_ENOMEM: no memory for the policy.
 *         A driver error (a CUresult as a negative code) when a stream cannot be created.
 * @threads Any thread.
 */
CUV_EXTERN int cuv_policy_round_robin_devices(cuv_policy_t **policy, cuv_device_t *const *devs,
                                              unsigned ndevs, unsigned nstreams);
/** As cuv_policy_round_robin_devices, but an op of one of the devices runs on the least loaded of
 * its streams, and an op of no device goes to the device with the fewest submissions in flight
 * on its streams.
 *
 * @returns 0, and *policy holds the new policy.
 * @errors The codes of cuv_policy_round_robin_devices.
 * @threads Any thread.
 */
CUV_EXTERN int cuv_policy_least_loaded_devices(cuv_policy_t **policy, cuv_device_t *const *devs,
                                               unsigned ndevs, unsigned nstreams);
/** Destroys a policy (calls its ops' destroy); NULL is ignored.
 *
 * @threads Any thread, once no executor uses the policy.
 */
CUV_EXTERN void cuv_policy_destroy(cuv_policy_t *policy);
/** Asks the policy for the stream `op` should run on.
 *
 * @returns 0, and *stream holds a stream borrowed from the policy.
 * @errors CUV_EINVAL: policy or stream is NULL, or the policy gave no stream.
 *         CUV_EDEVICE: a device-set policy got an op of a device outside its set.
 *         Any other negative code the policy's next_stream returns.
 * @threads Any thread.
 */
CUV_EXTERN int cuv_policy_next_stream(cuv_policy_t *policy, const cuv_op_t *op,
                                      cuv_stream_t **stream);
/** The device the policy serves (a device-set policy: its first device).
 *
 * @returns The device, borrowed; NULL when policy is NULL.
 * @threads Any thread.
 */
CUV_EXTERN cuv_device_t *cuv_policy_device(cuv_policy_t *policy);
/** The device's default policy (round-robin over the configuration's `streams`, 4 by default),
 * created on first use.
 *
 * @returns 0, and *policy holds the policy, borrowed from the device.
 * @errors CUV_EINVAL: dev or policy is NULL.
 *         CUV_ENOMEM: no memory for the policy.
 *         A driver error (a CUresult as a negative code) when a stream cannot be created.
 * @threads Any thread; concurrent first calls get the same policy.
 * @notes The device owns the policy: do not destroy it.
 */
CUV_EXTERN int cuv_device_policy(cuv_device_t *dev, cuv_policy_t **policy);
/** The device an op will run on.
 *
 * That is the device of the buffers or kernels it touches, and for a tree (seq, zip, fork, then,
 * map) the device of its first op that has one, else 0. An executor with no stream and no policy
 * runs it on a stream of that device's default policy. Parts of the tree on other devices run on
 * streams of their own devices (docs/devices.md).
 *
 * @returns 0, and *ordinal holds the device's ordinal.
 * @errors CUV_EINVAL: op or ordinal is NULL.
 * @threads Any thread.
 */
CUV_EXTERN int cuv_op_device(const cuv_op_t *op, int *ordinal);

/* ---- blocking executors --------------------------------------------------------------------- */

/** Runs op on a stream of its device's default policy and waits.
 *
 * @returns 0, and *out (when out is not NULL) holds the output; out NULL releases it.
 * @errors CUV_EINVAL: op is NULL.
 *         CUV_ECONSUMED: op is held by a combinator (it stays there).
 *         CUV_EREENTRANT: called under the execution lock (inside a then, map or capture).
 *         op's own error, when op is an error op.
 *         CUV_EDEVICE: op's device is not the stream's.
 *         CUV_ENOMEM: no memory for the submission.
 *         A driver error (a CUresult as a negative code) when the driver cannot be loaded, or
 *         the work fails to enqueue or on the device.
 *         Any error of the op's execution (its callbacks' and parts' codes).
 * @threads Any thread not under the execution lock; callbacks run on the calling thread.
 * @notes Consumes op.
 */
CUV_EXTERN int cuv_sync(cuv_op_t *op, cuv_output_t *out);
/** As cuv_sync, with the stream chosen by `policy`.
 *
 * @returns 0, and *out (when out is not NULL) holds the output.
 * @errors CUV_EINVAL: policy or op is NULL.
 *         The codes of cuv_sync, and those of the policy's next_stream.
 * @threads As cuv_sync.
 * @notes Consumes op.
 */
CUV_EXTERN int cuv_sync_policy(cuv_policy_t *policy, cuv_op_t *op, cuv_output_t *out);
/** Runs op on `stream` and waits for this op's work (not the whole stream).
 *
 * @returns 0, and *out (when out is not NULL) holds the output.
 * @errors CUV_EINVAL: stream or op is NULL.
 *         The codes of cuv_sync.
 * @threads As cuv_sync.
 * @notes Consumes op.
 */
CUV_EXTERN int cuv_sync_on(cuv_stream_t *stream, cuv_op_t *op, cuv_output_t *out);
/** Enqueues op on `stream` and returns at once.
 *
 * Unsafe by design: the output's device data is pending and the caller synchronizes
 * (cuv_stream_synchronize).
 *
 * @returns 0, and *out (when out is not NULL) holds the output, whose device data is pending.
 * @errors CUV_EINVAL: stream or op is NULL.
 *         The codes of cuv_sync, except those of the device's run.
 * @threads As cuv_sync; callbacks run on the calling thread.
 * @notes Consumes op. cuv still retains what the op touches until an event recorded behind it
 *        has completed.
 */
CUV_EXTERN int cuv_enqueue_on(cuv_stream_t *stream, cuv_op_t *op, cuv_output_t *out);

/* ---- asynchronous submission into a completion queue ---------------------------------------- */

/** A completion queue: finished submissions wait in it until its owner drains it. */
typedef struct cuv_queue_s cuv_queue_t;

/** Called when the queue goes from empty to non-empty, from the thread that completed the work:
 * the reactor, a cuv_queue_poll caller (its look at young work reads every queue's completion
 * flags), the driver's callback thread, the submitting thread or a cuv-submit-N thread. Must not
 * block. */
typedef void (*cuv_notify_fn)(cuv_queue_t *queue, void *arg);
/** A submission's completion, run by cuv_queue_drain on the draining thread. status is 0 or a
 * negative code; output is valid during the call (see cuv_output_take). */
typedef void (*cuv_done_fn)(int status, cuv_output_t *output, void *arg);

/** Makes a completion queue whose `notify` (may be NULL) runs with `notify_arg`.
 *
 * @returns 0, and *queue holds the new queue.
 * @errors CUV_EINVAL: queue is NULL.
 *         CUV_ENOMEM: no memory for the queue.
 * @threads Any thread; notify runs on the threads cuv_notify_fn names.
 * @notes Destroy it with cuv_queue_destroy once cuv_queue_pending is 0.
 */
CUV_EXTERN int cuv_queue_create(cuv_queue_t **queue, cuv_notify_fn notify, void *notify_arg);
/** Runs the callbacks of every finished submission on the calling thread.
 *
 * @returns How many callbacks ran (0 or more).
 * @errors CUV_EINVAL: queue is NULL.
 * @threads The queue's owner, one thread at a time; done callbacks run on it.
 */
CUV_EXTERN int cuv_queue_drain(cuv_queue_t *queue);
/** A descriptor for any event loop (epoll, poll, select, asyncio's add_reader, io_uring's poll).
 *
 * It polls readable exactly while a drain would deliver something (finished submissions or due
 * cancellations), which is when cuv_queue_poll sets its next_poll_ns to 1.
 *
 * @returns 0, with *fd set to the queue's descriptor (an eventfd); every call gives the same one.
 * @errors CUV_EINVAL: queue or fd is NULL.
 *         The system's error as a negative code (UV_EMFILE...) when the descriptor cannot be
 *         made; the queue works on without one.
 * @threads Any thread may call it. The first call makes the descriptor, so concurrent first
 *          calls get the same one.
 * @notes It is level-triggered: wait until it is readable, then call cuv_queue_poll (or
 *        cuv_queue_drain) on the owner's thread. A drain that leaves nothing to deliver makes it
 *        unreadable. The next completion or due cancellation makes it readable again, also one
 *        that lands during the drain. A cuv_queue_poll whose budget ran out leaves the rest
 *        readable, with no new edge: an edge-triggered loop (EPOLLET) looks again until
 *        next_poll_ns is no longer 1. It may read readable for a cancelled submission whose work
 *        finished: the drain retires it and runs no callback. It turns readable on the
 *        transitions that call the queue's notify hook, and the hook still runs. Do not read,
 *        write or close it: a read of yours would leave it unreadable while work waits.
 *        cuv_queue_destroy closes it, and its number may be reused after that. A closed queue
 *        keeps its descriptor working until destroyed, since its work in flight is still
 *        drained. It is close-on-exec and non-blocking. Linux only (eventfd).
 */
CUV_EXTERN int cuv_queue_fd(cuv_queue_t *queue, int *fd);
/** Submissions of this queue not yet done with.
 *
 * They are counted from the moment cuv_submit starts (before the work reaches a stream) until
 * the drain takes them, just before their callback runs (a callback does not count itself). A
 * submission cancelled while its work runs is called back at once and still counts until a later
 * drain retires its work.
 *
 * @returns The count; 0 when queue is NULL.
 * @threads Any thread.
 */
CUV_EXTERN unsigned cuv_queue_pending(const cuv_queue_t *queue);
/** Blocks until at least one submission of this queue has finished, or timeout_ms passed
 * (negative: forever), for owners that have no loop.
 *
 * @returns 0 when a drain would deliver something.
 * @errors CUV_EINVAL: queue is NULL.
 *         CUV_EBUSY: the timeout passed with nothing to deliver.
 * @threads Any thread, usually the queue's owner; it runs no callback (drain after it).
 */
CUV_EXTERN int cuv_queue_wait(cuv_queue_t *queue, int timeout_ms);
/** Marks the queue closed; NULL is ignored.
 *
 * Later submissions fail with CUV_ECLOSED. Submissions in flight still complete and are drained.
 *
 * @threads Any thread.
 */
CUV_EXTERN void cuv_queue_close(cuv_queue_t *queue);
/** Destroys the queue, once cuv_queue_pending is 0.
 *
 * @returns 0, and the queue is gone.
 * @errors CUV_EINVAL: queue is NULL.
 *         CUV_EBUSY: submissions are pending (the queue is kept).
 * @threads The queue's owner.
 * @notes Once destroy returned 0, no notify of the queue is running or will run, and its
 *        descriptor (cuv_queue_fd) is closed.
 */
CUV_EXTERN int cuv_queue_destroy(cuv_queue_t *queue);

/** Flags of cuv_submit_opts_t's `flags`. */
enum {
  /** Do not spin on the submitting thread for young work: its owner polls instead (the libuv
   * bridge keeps its loop awake while work is young rather than stall the loop's I/O). */
  CUV_SUBMIT_NO_SPIN = 1u << 0,
};

/** Names one accepted submission of a queue, for cuv_cancel: given only to a caller that asked
 * for it (cuv_submit_opts_t.ticket). */
typedef uint64_t cuv_ticket_t;

/** When one submission passed each stage, in nanoseconds of CLOCK_MONOTONIC (uv_hrtime's clock),
 * for a caller that samples where its requests' time goes. cuv_submit clears it and fills it in
 * as the submission goes; every field is set before the callback runs, which may read it. A
 * stage the submission never reached (refused, cancelled before its work started) stays 0. */
typedef struct cuv_trace {
  uint64_t submitted_ns; /**< cuv_submit was called */
  uint64_t started_ns;   /**< a thread began the op's driver calls (a submitter, or the caller) */
  uint64_t enqueued_ns;  /**< they returned: the work is on its stream */
  uint64_t completed_ns; /**< cuv saw it finish (reactor, a poll, a spin, a host function) */
  uint64_t called_ns;    /**< its callback began */
  bool ran_here;         /**< the driver calls were made by the thread that called cuv_submit */
} cuv_trace_t;

/** Options of cuv_submit; NULL stands for all zero. */
typedef struct cuv_submit_opts {
  cuv_policy_t *policy; /**< NULL: the op's device's default policy */
  cuv_stream_t *stream; /**< non-NULL: run on this stream (overrides policy) */
  unsigned flags;       /**< CUV_SUBMIT_* */
  /** non-NULL: receives the submission's ticket, which cuv_cancel takes. Only a submission that
   * asked for its ticket can be cancelled; asking costs the queue's lock once. */
  cuv_ticket_t *ticket;
  /** non-NULL: filled in with the submission's stage times; it must stay valid until the callback
   * has run (when cuv_submit refused the submission, until it returned). NULL costs nothing. */
  cuv_trace_t *trace;
} cuv_submit_opts_t;

/** Submits op asynchronously; its completion is delivered into `queue`.
 *
 * Schedules op (picks its stream) and accepts it on this thread, then hands its driver calls to
 * the device's submission engine (docs/engine.md). They are made by a submitter thread, or on
 * this thread when the engine is idle or several threads are submitting. Its completion is armed
 * and (status, output) delivered to `queue`, where cuv_queue_drain runs done(status, output, arg)
 * exactly once. Callbacks run in the order the work was seen complete: submissions on one stream
 * complete in order, unless their completion paths differ (a timeline word and a host callback
 * race to the queue, or an inline spin sees its work first).
 *
 * @returns 0 when the submission was accepted: done will run, also with an error found while
 *          enqueueing (the codes of cuv_sync, or CUV_ECANCELED after cuv_cancel).
 * @errors A negative code when it was refused, and done will not run:
 *         CUV_EINVAL: queue, op or done is NULL.
 *         CUV_ECLOSED: the queue is closed.
 *         CUV_ENOMEM: no memory for the submission.
 *         CUV_ECONSUMED: op is held by a combinator.
 *         CUV_EREENTRANT: called under the execution lock.
 *         op's own error, when op is an error op.
 *         CUV_EDEVICE: op's device is not the stream's, or not in the policy's set.
 *         A driver error (a CUresult as a negative code) when the driver cannot be loaded or no
 *         stream can be made.
 * @threads Any thread not under the execution lock. done runs on the thread that drains the
 *          queue; then, map and with_context callbacks run on the thread cuv_then names.
 * @notes Consumes op either way. The ticket and trace of opts are written as their members say.
 */
CUV_EXTERN int cuv_submit(cuv_queue_t *queue, cuv_op_t *op, cuv_done_fn done, void *arg,
                          const cuv_submit_opts_t *opts);

/** An event loop's one look at its queue: delivers what is done, within a time budget, and says
 * when to look again.
 *
 * While the queue's latest submission is young (submitted less than its poll window ago: the
 * spin budget, or 1.5 times the queue's recent submit-to-drain time when that is longer and at
 * most cuv_config_t's uv_poll_max_us), it first reads the completion flags itself (the reactor
 * thread's scan, done on this thread), so short work reaches its callback without the reactor
 * thread's wake-up. Then it runs callbacks as cuv_queue_drain does, in slices of a few, until
 * nothing is left to deliver or budget_ns has passed: a backlog of thousands reaches the loop
 * across several turns, its timers and I/O served between them. A queue is timed from its first
 * cuv_queue_poll on (its owner polls it): call it once with budget 0 as the owner starts, so its
 * first submissions are timed too.
 *
 * @param queue The queue to look at, on its owner's thread.
 * @param budget_ns How long it may run callbacks; 0 delivers nothing (a look only).
 * @param next_poll_ns May be NULL. Set to 0 when nothing is due soon: nothing left to deliver and
 *        no young work in flight, so the owner may block (its notify hook, or its descriptor,
 *        tells it of what finishes later); 1 exactly when something is left to deliver (the
 *        budget ran out, or work finished meanwhile: look again at once, after the loop's other
 *        work), which is when the queue's descriptor (cuv_queue_fd) is readable; else the
 *        nanoseconds, 2 or more, the young work stays young (look again on the next turn,
 *        without blocking, until then).
 * @returns How many callbacks ran (0 or more).
 * @errors CUV_EINVAL: queue is NULL (*next_poll_ns is then left alone).
 * @threads The queue's owner, as cuv_queue_drain. Queues' notify hooks may run on it.
 */
CUV_EXTERN int cuv_queue_poll(cuv_queue_t *queue, uint64_t budget_ns, uint64_t *next_poll_ns);

/** Cancels a submission of `queue`.
 *
 * Its done callback runs exactly once, with CUV_ECANCELED and no output, at the next
 * cuv_queue_drain, without waiting for the GPU. Done is the last of the submission's callbacks:
 * from the cancel on, none of its then, map or with_context callbacks or custom ops' execute
 * starts (that op fails with CUV_ECANCELED instead, as a failed op does: what follows it is not
 * enqueued; a custom op's drop runs). One already running when the cancel comes holds done back
 * until it returned (done is due at the first drain after that). So a closure those callbacks
 * share may be freed in done.
 *
 * Release functions (cuv_value's, with_context's arg_release, a custom op's drop,
 * cuv_custom_retain's) are not such callbacks: they run when cuv lets go of what they release,
 * which for a cancelled submission may be after done. A shared op's value is made by the first
 * clone executed for every clone: a cancelled submission's clone neither makes nor waits for it
 * (another clone does). One cancelled while its clone makes it gets its done once the making is
 * over, its callbacks not refused.
 *
 * @returns 0, and done is due with CUV_ECANCELED.
 * @errors CUV_EINVAL: queue is NULL.
 *         CUV_ENOENT: the ticket is unknown (no submission of this queue was given it), already
 *         cancelled, or its callback already ran or is running.
 * @threads Any thread; done runs on the thread that drains the queue.
 * @notes The GPU work is not interrupted: everything it touches (its output included) stays held
 *        until its completion is proven. A later drain retires it without calling back again
 *        (cuv_queue_pending counts it until then).
 */
CUV_EXTERN int cuv_cancel(cuv_queue_t *queue, cuv_ticket_t ticket);

/* ---- CUDA graphs ---------------------------------------------------------------------------- */

/** A captured, instantiated CUDA graph and the stream it replays on. */
typedef struct cuv_graph_s cuv_graph_t;

/** How a graph's stream capture treats the driver calls CUDA calls potentially unsafe during a
 * capture (a synchronize or query, cuMemAlloc, cuMemHostAlloc, a module unload), as
 * cuStreamBeginCapture's mode does. */
typedef enum cuv_capture_mode {
  /** The default: such calls are allowed, on every thread (CU_STREAM_CAPTURE_MODE_RELAXED). */
  CUV_CAPTURE_RELAXED = 0,
  /** The capturing thread may not make them: they fail, and the capture with them
   * (CU_STREAM_CAPTURE_MODE_THREAD_LOCAL). Other threads are unaffected. */
  CUV_CAPTURE_THREAD_LOCAL,
  /** No thread may make them while the capture runs: they fail, and the capture with them
   * (CU_STREAM_CAPTURE_MODE_GLOBAL), including the polls of cuv's own threads for work in flight
   * elsewhere in the process. */
  CUV_CAPTURE_GLOBAL,
} cuv_capture_mode_t;

/** Options of cuv_graph_capture_opts; NULL stands for all zero. */
typedef struct cuv_graph_opts {
  cuv_capture_mode_t capture_mode; /**< CUV_CAPTURE_RELAXED (0) unless set */
} cuv_graph_opts_t;

/** Captures op into a graph on `stream`, in relaxed mode, then instantiates and uploads it: the
 * same as cuv_graph_capture_opts with NULL options.
 *
 * stream NULL takes a stream of the op device's default policy, which the submission engine's
 * threads may be using meanwhile: pass a stream of your own whenever other threads submit.
 * Nothing runs: *out (may be NULL) receives the captured op's output, whose device data the first
 * launch produces. Capture always ends, also when op fails midway (the partial graph is destroyed
 * and the error returned). The captured op runs under the execution lock.
 *
 * @returns 0, and *graph holds the caller's first reference.
 * @errors CUV_EINVAL: graph or op is NULL.
 *         CUV_ENOMEM: no memory for the graph or submission.
 *         CUV_ECONSUMED: op is held by a combinator.
 *         CUV_EREENTRANT: called under the execution lock, or the captured op executed another op
 *         inside it.
 *         op's own error, when op is an error op, or any error of its execution.
 *         CUV_EDEVICE: op's device is not the stream's.
 *         CUV_ENOTSUP: the tree spans several devices, or the captured op allocates or frees
 *         device memory (cuv_alloc, cuv_free, the buffer helpers: cuv_zeros, cuv_dup, ...), or is
 *         a peer copy.
 *         A driver error (a CUresult as a negative code) when capture, instantiation or upload
 *         fails.
 * @threads Any thread not under the execution lock; the op's callbacks run on it and do not wait.
 * @notes Consumes op. The graph holds what the capture touched (buffers, kernels, staged host
 *        data) for its lifetime. Allocations and frees are refused inside a capture; use buffers
 *        made before. A given stream must carry nothing else during the capture (no submissions
 *        through a policy that may pick it: the submission engine's threads enqueue
 *        concurrently).
 */
CUV_EXTERN int cuv_graph_capture(cuv_graph_t **graph, cuv_op_t *op, cuv_stream_t *stream,
                                 cuv_output_t *out);
/** Captures op into a graph on `stream` in the capture mode opts names, then instantiates and
 * uploads it: cuv_graph_capture with options.
 *
 * With CUV_CAPTURE_THREAD_LOCAL or CUV_CAPTURE_GLOBAL, an op whose execution makes a potentially
 * unsafe call fails with the driver's error (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, or
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED from the end of the capture): for instance a cuv_download
 * whose pinned block the staging pool does not hold yet (cuMemHostAlloc). With
 * CUV_CAPTURE_GLOBAL, another thread's unsafe call fails and makes the capture fail too: capture
 * while nothing else of the process is in flight.
 *
 * @returns 0, and *graph holds the caller's first reference.
 * @errors CUV_EINVAL: graph or op is NULL, or opts->capture_mode is not a cuv_capture_mode_t.
 *         Otherwise those of cuv_graph_capture.
 * @threads Any thread not under the execution lock; the op's callbacks run on it and do not wait.
 * @notes Consumes op, as cuv_graph_capture.
 */
CUV_EXTERN int cuv_graph_capture_opts(cuv_graph_t **graph, cuv_op_t *op, cuv_stream_t *stream,
                                      cuv_output_t *out, const cuv_graph_opts_t *opts);
/** An op that replays the graph on the executing stream. Usable with every executor and
 * combinator.
 *
 * @returns A new op, never NULL; a failure is carried by the op (cuv_op_error).
 * @errors CUV_EINVAL: graph is NULL.
 *         CUV_ENOMEM: no memory for the op.
 *         CUV_EDEVICE: it executes on a stream of another device than the graph's.
 *         A driver error (a CUresult as a negative code) when the launch fails.
 * @threads Any thread.
 * @notes It holds the graph until the replay is proven complete, so it may outlive
 *        cuv_graph_unref.
 */
CUV_EXTERN cuv_op_t *cuv_graph_launch(cuv_graph_t *graph);
/** Enqueues op (graph-safe work with a unit output: copies, kernel launches) on the graph's
 * stream without waiting, e.g. to copy new inputs into the captured buffers.
 *
 * @returns 0 once op is enqueued.
 * @errors CUV_EINVAL: graph or op is NULL.
 *         The codes of cuv_enqueue_on.
 * @threads As cuv_enqueue_on.
 * @notes Consumes op. It is ordered before later launches on that same stream
 *        (cuv_sync_on(cuv_graph_stream(g), cuv_graph_launch(g), ...)). A launch on another
 *        stream is ordered after it only through hazard tracking of the buffers both touch (each
 *        replay holds the captured buffers like a launch would); with CUV_HAZARD_NONE on them,
 *        it is not.
 */
CUV_EXTERN int cuv_graph_update(cuv_graph_t *graph, cuv_op_t *op);
/** The stream the graph was captured on and replays on by cuv_graph_update.
 *
 * @returns The stream, borrowed from the graph; NULL when graph is NULL.
 * @threads Any thread.
 */
CUV_EXTERN cuv_stream_t *cuv_graph_stream(const cuv_graph_t *graph);
/** Takes another reference to `graph`.
 *
 * @returns graph, or NULL when graph is NULL.
 * @threads Any thread.
 */
CUV_EXTERN cuv_graph_t *cuv_graph_ref(cuv_graph_t *graph);
/** Drops a reference to `graph`; NULL is ignored.
 *
 * @threads Any thread.
 * @notes A launch op still holds the graph until its replay is proven complete.
 */
CUV_EXTERN void cuv_graph_unref(cuv_graph_t *graph);

/* ---- statistics ----------------------------------------------------------------------------- */

/** Process-wide counters since start (cuv_stats). */
typedef struct cuv_stats {
  uint64_t submitted;          /**< cuv_submit / sync / enqueue executions accepted */
  uint64_t completed;          /**< submissions proven complete */
  uint64_t completed_spin;     /**< ... by the inline spin */
  uint64_t completed_reactor;  /**< ... by the timeline reactor (a stream's word reached it) */
  /** ... of those, seen by a cuv_queue_poll caller's own look, not the reactor thread */
  uint64_t completed_polled;
  uint64_t completed_hostfn;   /**< ... by the host-callback path */
  uint64_t completed_sync;     /**< ... by a blocking executor's wait */
  uint64_t completed_event;    /**< ... by an event behind cuv_enqueue_on work */
  uint64_t fallbacks;          /**< to a host callback: the stream's word could not be written */
  uint64_t faults;             /**< submissions completed with a device fault */
  uint64_t waits_inserted;     /**< event waits cuv inserted between streams */
  /** submissions whose resources were leaked (completion unprovable) */
  uint64_t leaked;
  uint64_t in_flight;          /**< submissions not yet proven complete */
  uint64_t reactor_waiting;    /**< submissions waiting in the reactor now (on stream words) */
  uint64_t reactor_wakeups;    /**< times the reactor thread was woken from its park */
  uint64_t engine_inline;      /**< submissions whose driver calls the submitting thread made */
  uint64_t engine_queued;      /**< ... that a submitter thread made, from the ring */
  uint64_t engine_helped;      /**< queued work a pushing thread ran because the ring was full */
} cuv_stats_t;

/** Copies the current counters into *stats; NULL is ignored.
 *
 * @threads Any thread; each counter is read atomically, the set is not one snapshot.
 */
CUV_EXTERN void cuv_stats(cuv_stats_t *stats);

#ifdef __cplusplus
}
#endif

#include <cuv/typed.h> /* typed launches: launch configurations, vector types */
#include <cuv/custom.h> /* custom ops and adopted device memory */
#include <cuv/collective.h> /* NCCL collectives as ops, communicators */

#endif
