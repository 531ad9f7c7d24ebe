#ifndef CUV_CUSTOM_H
#define CUV_CUSTOM_H

/** @file
 * Custom operations: an op whose work is the caller's own driver calls (cuBLAS, raw cuMemcpy,
 * another library's kernels), composable with every combinator and executor like cuv's ops; and
 * device memory that cuv did not allocate, adopted as a cuv_buffer_t (docs/custom-ops.md).
 *
 * What a custom op gives cuv, and what cuv gives it back:
 * - At build time, the buffers its work touches, each with its access (read, write or both):
 *   the op holds a reference on each until it runs, the submission engine orders jobs that
 *   conflict on them, and at execution cuv holds them with their access and orders the op after
 *   conflicting work on other streams (an event wait, as for a launch) before calling execute.
 * - At execution, a context (cuv_custom_ctx_t): the stream and device it runs on, and retain,
 *   which keeps any object alive until the submission's GPU work is proven complete, on every
 *   path (success, execute failing after it retained, a later op of the submission failing,
 *   cancel, a graph capture: then for the graph's lifetime). After a sticky device fault nothing
 *   is released: what the faulted work held is leaked on purpose (cuv_status_is_fault).
 *
 * What execute may do: enqueue work on the context's stream (driver calls on
 * cuv_custom_cu_stream, a library call after setting its stream), retain what that work uses
 * before or right after enqueueing it, and set its output. It must not block on the stream (the
 * thread may be a loop's) or execute another op: executors called inside it return
 * CUV_EREENTRANT (it runs under the execution lock, as then and with_context callbacks do). It
 * runs on the thread that makes the submission's driver calls: the executing thread, or for
 * cuv_submit possibly a cuv-submit-N thread, with the device's primary context current. Work it
 * enqueues on other streams is outside cuv's knowledge: order and hold it yourself. As after a
 * with_context, a then or map callback over a custom op runs once the stream got past its work
 * (it may have copied to the host: include/cuv.h, then).
 *
 * Include <cuv.h>, which includes this header. */

#include <cuv.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A buffer a custom op's work touches, with its access.
 *
 * The range is checked against the buffer, while hazards are tracked per buffer, so a range
 * narrows no ordering. Unique storage: a WRITE or RW access may not share a byte of device memory
 * with another access of the same op (work that reads and writes the same bytes declares them
 * once, RW); reads may overlap each other. Build accesses with the CUV_ACCESS_* macros. */
typedef struct cuv_access {
  cuv_buffer_t *buffer;   /**< The buffer (the op takes its own reference). */
  enum cuv_arg_kind kind; /**< CUV_ARG_KIND_READ, _WRITE or _RW. */
  size_t offset;          /**< The first byte touched. */
  size_t bytes;           /**< The bytes touched from offset; 0: to the buffer's end. */
} cuv_access_t;

/** The work reads the whole buffer. */
#define CUV_ACCESS_READ(buf) ((cuv_access_t){(buf), CUV_ARG_KIND_READ, 0, 0})
/** The work writes the whole buffer. */
#define CUV_ACCESS_WRITE(buf) ((cuv_access_t){(buf), CUV_ARG_KIND_WRITE, 0, 0})
/** The work reads and writes the whole buffer. */
#define CUV_ACCESS_RW(buf) ((cuv_access_t){(buf), CUV_ARG_KIND_RW, 0, 0})
/** The work reads bytes [off, off + len) of the buffer. */
#define CUV_ACCESS_READ_RANGE(buf, off, len)                                                      \
  ((cuv_access_t){(buf), CUV_ARG_KIND_READ, (off), (len)})
/** The work writes bytes [off, off + len) of the buffer. */
#define CUV_ACCESS_WRITE_RANGE(buf, off, len)                                                     \
  ((cuv_access_t){(buf), CUV_ARG_KIND_WRITE, (off), (len)})
/** The work reads and writes bytes [off, off + len) of the buffer. */
#define CUV_ACCESS_RW_RANGE(buf, off, len) ((cuv_access_t){(buf), CUV_ARG_KIND_RW, (off), (len)})

/** What execute receives: the stream and device it runs on, and retain. Valid only during that
 * call. */
typedef struct cuv_custom_ctx_s cuv_custom_ctx_t;

/** A custom op's work: enqueues it on cuv_custom_stream(ctx).
 *
 * *out starts cleared: set it to give the op an output (released by cuv when execute fails).
 * Return 0, or a negative code, which fails the op and its submission; what was enqueued and
 * retained before still finishes, and is held until then. A positive value counts as 0. */
typedef int (*cuv_custom_fn)(cuv_custom_ctx_t *ctx, cuv_output_t *out, void *arg);

/** A custom op: execute(ctx, out, arg) enqueues its work when it runs.
 *
 * The naccesses accesses are copied; the op takes its own reference on each buffer, and runs on
 * their device (any device's stream without accesses). Exactly one of execute(ctx, out, arg)
 * and drop(arg) runs (drop may be NULL): execute when the op runs, drop when it never does
 * (cuv_op_destroy, a failing constructor, combinator or executor, an earlier op of its submission
 * failing, a declared buffer refused at execution, its submission cancelled before execute
 * started: then possibly after the submission's done). After execute, arg is execute's: free it
 * there, or retain it when the GPU work uses it.
 *
 * @returns A new op, never NULL; a failure is carried by the op (cuv_op_error).
 * @errors CUV_EINVAL: execute is NULL, accesses is NULL with naccesses > 0, or an access's buffer
 *         is NULL or its kind is not CUV_ARG_KIND_READ, _WRITE or _RW.
 *         CUV_ERANGE: an access's range reaches past its buffer.
 *         CUV_EDEVICE: the accesses name buffers of two devices.
 *         CUV_EOVERLAP: a WRITE or RW access overlaps another access (cuv_access_t).
 *         CUV_ENOMEM: no memory for the op (or naccesses too large for one).
 *         At execution: CUV_EDEVICE (a stream of another device than the buffers'),
 *         CUV_ECONFLICT (a CUV_HAZARD_STRICT buffer in flight on another stream), CUV_ENOMEM
 *         (no memory to track an access), CUV_ECANCELED (its submission was cancelled before
 *         execute started), or execute's own negative code.
 * @threads Any thread builds it. execute runs on the thread that makes the submission's driver
 *          calls (the executing thread, or for cuv_submit possibly a cuv-submit-N thread), with
 *          the device's primary context current, under the execution lock (executors called
 *          inside it return CUV_EREENTRANT). drop runs on the thread that drops the op.
 * @notes On a construction failure drop(arg) has run before cuv_custom returns. The op holds the
 *        buffers with their access until its submission retires.
 */
CUV_EXTERN cuv_op_t *cuv_custom(cuv_custom_fn execute, void *arg, cuv_release_fn drop,
                                const cuv_access_t *accesses, size_t naccesses);

/** The stream the custom op runs on.
 *
 * @returns The stream (borrowed), or NULL when ctx is NULL.
 * @threads The thread running execute, during that call.
 */
CUV_EXTERN cuv_stream_t *cuv_custom_stream(const cuv_custom_ctx_t *ctx);
/** The CUstream of the stream the custom op runs on, for driver and library calls.
 *
 * @returns The CUstream (borrowed), or NULL when ctx is NULL.
 * @threads The thread running execute, during that call.
 */
CUV_EXTERN struct CUstream_st *cuv_custom_cu_stream(const cuv_custom_ctx_t *ctx);
/** The device the custom op runs on.
 *
 * @returns The device (borrowed), or NULL when ctx is NULL.
 * @threads The thread running execute, during that call.
 */
CUV_EXTERN cuv_device_t *cuv_custom_device(const cuv_custom_ctx_t *ctx);

/** Keeps object alive until the submission's GPU work is proven complete, then calls
 * release(object) once.
 *
 * It holds on every path: success, execute failing after it retained, a later op of the
 * submission failing, cancel. Inside a graph capture, until the graph is gone.
 *
 * @returns 0, and release(object) will run once.
 * @errors CUV_EINVAL: ctx or release is NULL.
 *         CUV_ENOMEM: no memory for the hold.
 * @threads The thread running execute, during that call. release runs on the thread that retires
 *          the submission (a queue's draining thread, a blocking executor's caller).
 * @notes On failure nothing is held and object stays the caller's. After a sticky device fault
 *        nothing is released (cuv_status_is_fault).
 */
CUV_EXTERN int cuv_custom_retain(cuv_custom_ctx_t *ctx, void *object, cuv_release_fn release);

/** Wraps device memory the caller allocated on dev (cuMemAlloc, another library's allocator) as a
 * buffer usable by every op.
 *
 * cuv never frees it: release(release_arg) runs exactly once, when the last reference and the
 * last submission holding the buffer are gone (cuv_free of the last reference hands it to its
 * submission, so release waits for the work before it). With a NULL release the caller keeps
 * ownership: free the memory only after its last cuv_buffer_unref, once no submission can use it
 * (their callbacks ran; a cancelled one's work is not over then).
 *
 * @returns 0, and *buf holds the caller's first reference.
 * @errors CUV_EINVAL: buf or dev is NULL, ptr is 0, bytes is 0, or [ptr, ptr + bytes) is past the
 *         address space.
 *         CUV_ENOMEM: no memory for the buffer object.
 * @threads Any thread. release runs on the thread that dropped the last reference or hold, with
 *          dev's context current (when it could be bound).
 * @notes On failure release does not run. cuv does not check that the memory is dev's.
 */
CUV_EXTERN int cuv_buffer_adopt(cuv_buffer_t **buf, cuv_device_t *dev, cuv_deviceptr_t ptr,
                                size_t bytes, cuv_release_fn release, void *release_arg);

#ifdef __cplusplus
}
#endif

#endif
