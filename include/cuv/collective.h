#ifndef CUV_COLLECTIVE_H
#define CUV_COLLECTIVE_H

/** @file
 * Collectives: NCCL's all-reduce, all-gather, reduce-scatter, broadcast, reduce and send/recv as
 * cuv ops, on cuv buffers, over a communicator that is a cuv object.
 *
 * NCCL is opened with dlopen at the first call that needs it (CUV_NCCL, cuv_config_t.nccl, says
 * which library; with CUV_DRIVER=sim the simulator's own collectives stand in, on its simulated
 * devices). cuv builds and runs without NCCL: then, or with a NCCL older than 2.19, every call
 * below that needs it fails with CUV_ENONCCL and cuv_nccl_error() says what is missing. A NCCL
 * call that fails keeps its ncclResult_t inside CUV_ENCCL(result) (include/cuv/errors.h).
 * cuv sets NCCL_NVLS_ENABLE=0 in the environment before NCCL starts, unless it is set: cuv never
 * creates NVLink multicast objects. It also sets NCCL_RUNTIME_CONNECT=0 unless it is set: the
 * collectives' connections are made while the communicator is created, not by its first
 * collective (which would then wait, holding the communicator, for its peers to connect).
 *
 * Communicators. A cuv_comm_t holds one NCCL communicator per local rank: every device of a
 * process (cuv_comm_init_all, NCCL's ncclCommInitAll case), or one rank of a group whose other
 * ranks are other processes or hosts (cuv_comm_init_rank, with the unique id the program hands
 * over: cuv_nccl_unique_id on one rank, sent to the others by any means). The NCCL communicators
 * are blocking ones, so a collective's group is launched by its ncclGroupEnd on the thread that
 * issues it, with no thread of NCCL's. Creating one is an op: NCCL's blocking initialization, run
 * on a thread cuv starts for each creation (cuv-nccl-init), so no loop or submitter thread waits
 * for it; a queued submission's callback comes once every rank is ready. Its output is the
 * cuv_comm_t (data; released with cuv_comm_unref unless taken): submit it like any op
 * (cuv_submit, cuv_uv_submit, or cuv_sync to block). Communicators are reference counted;
 * every op that uses one holds it until its work is proven complete.
 *
 * Ops. A collective takes one buffer per local rank (arrays of cuv_comm_local_count(comm)
 * buffers, element i on cuv_comm_device(comm, i)) and a count of elements of a NCCL data type.
 * All local ranks' calls are made in one NCCL group (ncclGroupStart/End), each on its rank's
 * stream of the communicator (cuv_comm_stream), ordered after what the executing stream enqueued
 * before and joined back to it with events: the op completes when every device's part did. So
 * the op composes with every combinator, may run on any device's stream, is hazard-tracked like a
 * launch (send buffers read, receive buffers written), retains the communicator and its buffers
 * until proven complete, and can be captured in a graph. Every rank of the group must issue the
 * same collectives in the same order (NCCL's rule): submit a communicator's ops from one thread,
 * or order them. Each device's submission engine keeps the order of its own jobs only: work
 * submitted to another device just before a collective may reach the hazard tracker after it, so
 * sequence such steps by their callbacks (as samples/collectives does), or put them in the op's
 * tree where they share its device. A graph replay of a collective on another device than the
 * executing stream's is not hazard-tracked on that device: order other uses of those buffers
 * yourself.
 * A collective's NCCL calls are made on a submitter thread, never on the submitting thread of
 * cuv_submit or cuv_uv_submit (unless CUV_SUBMIT_THREADS=0): NCCL's first collective of a kind may
 * set its connections up in the background, and cuv waits until the work is on the streams before
 * joining it.
 *
 * Faults. cuv polls every communicator that has work in flight (ncclCommGetAsyncError, about
 * every 10 ms). When NCCL reports an error (a peer that died, a network failure, ...), or an op
 * outlives the communicator's timeout (cuv_comm_set_timeout), every op of the communicator still
 * pending fails with CUV_ENCCL(that error) (or CUV_ETIMEDOUT), and the communicator's work is
 * ended: revoked where NCCL has ncclCommRevoke (2.28 and later: its kernels end, and its NCCL
 * communicators stay, for cuv_comm_shrink), aborted where it has not (ncclCommAbort, which ends
 * its kernels too; never ncclCommDestroy, which can block). Later ops fail with the same status
 * at once. cuv_comm_abort aborts on request. The survivors of a rank that died go on with
 * cuv_comm_shrink: each submits it with the same list of the dead ranks, and its output is their
 * smaller communicator. */

#include <stdbool.h>
#include <stddef.h>

#include <cuv.h>

#ifdef __cplusplus
extern "C" {
#endif

/** NCCL's data types (ncclDataType_t's values). The FP8 types need a NCCL that has them. */
typedef enum cuv_nccl_type {
  CUV_NCCL_INT8 = 0,        /**< int8_t. */
  CUV_NCCL_UINT8 = 1,       /**< uint8_t. */
  CUV_NCCL_INT32 = 2,       /**< int32_t. */
  CUV_NCCL_UINT32 = 3,      /**< uint32_t. */
  CUV_NCCL_INT64 = 4,       /**< int64_t. */
  CUV_NCCL_UINT64 = 5,      /**< uint64_t. */
  CUV_NCCL_FLOAT16 = 6,     /**< IEEE half precision. */
  CUV_NCCL_FLOAT32 = 7,     /**< float. */
  CUV_NCCL_FLOAT64 = 8,     /**< double. */
  CUV_NCCL_BFLOAT16 = 9,    /**< bfloat16. */
  CUV_NCCL_FLOAT8E4M3 = 10, /**< FP8, 4 exponent and 3 mantissa bits. */
  CUV_NCCL_FLOAT8E5M2 = 11  /**< FP8, 5 exponent and 2 mantissa bits. */
} cuv_nccl_type_t;

/** NCCL's reductions (ncclRedOp_t's values). */
typedef enum cuv_nccl_redop {
  CUV_NCCL_SUM = 0,  /**< The sum. */
  CUV_NCCL_PROD = 1, /**< The product. */
  CUV_NCCL_MAX = 2,  /**< The maximum. */
  CUV_NCCL_MIN = 3,  /**< The minimum. */
  CUV_NCCL_AVG = 4   /**< The sum divided by the number of ranks (integers: integer division). */
} cuv_nccl_redop_t;

/** Bytes per element of `type`.
 *
 * @returns The size in bytes; 0 for a value that is no cuv_nccl_type_t.
 * @threads Any thread.
 */
CUV_EXTERN size_t cuv_nccl_type_size(cuv_nccl_type_t type);

/* ---- NCCL, loaded at first use -------------------------------------------------------------- */

/** Loads NCCL if no call did yet, and gives its version code (22809 for 2.28.9).
 *
 * It initializes the process as cuv_init() does if nothing did.
 *
 * @returns 0, and *version holds NCCL's version code.
 * @errors CUV_EINVAL: version is NULL.
 *         Any error of cuv_init() when that initialization failed (its status is returned).
 *         CUV_ENONCCL: no NCCL could be loaded, it lacks an entry point cuv needs, or it is older
 *         than 2.19 (cuv_nccl_error says which). The first load's result stays for the process.
 *         CUV_ENCCL(result): ncclGetVersion fails.
 * @threads Any thread.
 */
CUV_EXTERN int cuv_nccl_version(int *version);
/** Why NCCL could not be used.
 *
 * @returns A sentence naming the library tried and the loader's reason, or the version found;
 *          NULL when NCCL loaded, or when no call tried to load it yet.
 * @threads Any thread.
 * @notes The string is static: it stays valid for the process's lifetime.
 */
CUV_EXTERN const char *cuv_nccl_error(void);
/** The ncclResult_t behind a CUV_ENCCL(...) status.
 *
 * @returns The ncclResult_t, or 0 when status is not a NCCL failure.
 * @errors None: any status is accepted.
 * @threads Any thread.
 */
CUV_EXTERN int cuv_nccl_result(int status);

/** An ncclUniqueId: made by one rank, handed to every rank of the group (its bytes travel as they
 * are, over TCP or a file). */
typedef struct cuv_nccl_id {
  char bytes[128]; /**< NCCL's opaque bytes. */
} cuv_nccl_id_t;

/** Makes a new unique id for a group (ncclGetUniqueId), to hand to every rank's
 * cuv_comm_init_rank.
 *
 * It loads NCCL as cuv_nccl_version does if nothing did.
 *
 * @returns 0, and *id holds the new id.
 * @errors CUV_EINVAL: id is NULL.
 *         Any error of cuv_init() when that initialization failed (its status is returned).
 *         CUV_ENONCCL: NCCL cannot be used (cuv_nccl_error says why).
 *         CUV_ENCCL(result): ncclGetUniqueId fails (*id is left as it was).
 * @threads Any thread.
 */
CUV_EXTERN int cuv_nccl_unique_id(cuv_nccl_id_t *id);

/* ---- communicators -------------------------------------------------------------------------- */

/** A communicator: one NCCL communicator per local rank, reference counted (see the file's
 * description). */
typedef struct cuv_comm_s cuv_comm_t;

/** An op that creates a communicator over n devices of this process: local rank i, and rank i of
 * the group, on devs[i].
 *
 * Its output is the cuv_comm_t (data; released with cuv_comm_unref unless taken). It runs on a
 * stream of devs[0]'s device; a then or map over it runs once the communicator is ready. NCCL is
 * loaded when the op is built, and the group's unique id is made when it executes.
 *
 * @returns A new op, never NULL; a failure is carried by the op (cuv_op_error).
 * @errors CUV_EINVAL: devs is NULL, n is 0 or more than 64, or a device is NULL or repeated.
 *         Any error of cuv_init() when the process's initialization failed.
 *         CUV_ENONCCL: NCCL cannot be used (cuv_nccl_error says why).
 *         CUV_ENOMEM: no memory for the op.
 *         At execution: CUV_EDEVICE (a stream of another device than devs[0]'s), CUV_ENOTSUP
 *         (inside a graph capture: a graph cannot replay a creation), CUV_ENOMEM, CUV_ETHREAD
 *         (the cuv-nccl-init thread cannot start), CUV_ENCCL(result) (ncclGetUniqueId, a group
 *         call or ncclCommInitRankConfig fails, or a rank's initialization fails), or the
 *         driver's error (creating a rank's stream, binding a device's context).
 * @threads Any thread builds it. It executes on the thread that makes the submission's driver
 *          calls, which starts the initialization on a cuv-nccl-init thread of its own and
 *          returns; no thread waits for it but a blocking executor's caller (cuv_sync,
 *          cuv_enqueue_on).
 * @notes A queued submission (cuv_submit, cuv_uv_submit) is delivered, and a then or map over
 *        the op runs, once every rank is ready. An initialization whose peers never join (a
 *        cuv_comm_init_rank group short of a rank) keeps its cuv-nccl-init thread inside NCCL
 *        until NCCL gives up; the communicator is not given out before, so nothing can abort it.
 */
CUV_EXTERN cuv_op_t *cuv_comm_init_all(cuv_device_t *const *devs, size_t n);
/** An op that creates rank `rank` of a group of `nranks` on dev, with the group's unique id.
 *
 * Its output is the cuv_comm_t, with one local rank. It completes once every rank of the group
 * joined (each calls it with the same id and nranks, and its own rank).
 *
 * @returns A new op, never NULL; a failure is carried by the op (cuv_op_error).
 * @errors CUV_EINVAL: dev or id is NULL, nranks is below 1, or rank is not in [0, nranks).
 *         Any error of cuv_init() when the process's initialization failed.
 *         CUV_ENONCCL: NCCL cannot be used (cuv_nccl_error says why).
 *         CUV_ENOMEM: no memory for the op.
 *         At execution: the errors of cuv_comm_init_all's execution, but for ncclGetUniqueId
 *         (the id is the caller's).
 * @threads As cuv_comm_init_all.
 * @notes As cuv_comm_init_all: a queued submission is delivered once every rank joined.
 */
CUV_EXTERN cuv_op_t *cuv_comm_init_rank(cuv_device_t *dev, const cuv_nccl_id_t *id, int rank,
                                        int nranks);
/** Takes one more reference on comm.
 *
 * @returns comm, or NULL when comm is NULL.
 * @threads Any thread.
 */
CUV_EXTERN cuv_comm_t *cuv_comm_ref(cuv_comm_t *comm);
/** Drops a reference; at the last, cuv-nccl finalizes and destroys the NCCL communicators.
 *
 * NULL is ignored.
 *
 * @threads Any thread. The NCCL communicators end on the cuv-nccl thread (ncclCommFinalize, then
 *          ncclCommDestroy; an abort instead when the finalize fails).
 * @notes Every op of the communicator holds a reference of its own until its work is proven
 *        complete, so the last cuv_comm_unref may come before their callbacks.
 */
CUV_EXTERN void cuv_comm_unref(cuv_comm_t *comm);
/** The number of local ranks: the devices of this process in the communicator.
 *
 * @returns That count; 0 when comm is NULL.
 * @threads Any thread.
 */
CUV_EXTERN unsigned cuv_comm_local_count(const cuv_comm_t *comm);
/** The number of ranks of the whole group.
 *
 * @returns That count; 0 when comm is NULL.
 * @errors None: a NULL comm gives 0.
 * @threads Any thread.
 */
CUV_EXTERN int cuv_comm_size(const cuv_comm_t *comm);
/** The group rank of local rank `local`.
 *
 * @returns The rank (0 or more).
 * @errors CUV_EINVAL: comm is NULL, or local is not below cuv_comm_local_count(comm).
 * @threads Any thread.
 */
CUV_EXTERN int cuv_comm_rank(const cuv_comm_t *comm, unsigned local);
/** The device of local rank `local`.
 *
 * @returns The device (borrowed: the communicator holds it), or NULL when comm is NULL or local is
 *          not below cuv_comm_local_count(comm).
 * @threads Any thread.
 */
CUV_EXTERN cuv_device_t *cuv_comm_device(const cuv_comm_t *comm, unsigned local);
/** The stream of local rank `local` that the communicator's NCCL calls use.
 *
 * An op executed on it needs no fork or join for that rank's part.
 *
 * @returns The stream (owned by the communicator), or NULL when comm is NULL or local is not
 *          below cuv_comm_local_count(comm).
 * @threads Any thread.
 */
CUV_EXTERN cuv_stream_t *cuv_comm_stream(const cuv_comm_t *comm, unsigned local);
/** The ncclComm_t of local rank `local`, for code that calls NCCL itself.
 *
 * Make such calls on cuv_comm_stream, and none while a cuv op of the communicator may be issuing
 * its own.
 *
 * @returns The ncclComm_t, or NULL when comm is NULL or local is not below
 *          cuv_comm_local_count(comm).
 * @threads Any thread.
 */
CUV_EXTERN void *cuv_comm_handle(const cuv_comm_t *comm, unsigned local);
/** Whether the communicator is usable.
 *
 * @returns 0 while it is usable; once it failed or was aborted, the status its ops fail with.
 * @errors CUV_EINVAL: comm is NULL.
 *         CUV_ENCCL(result): NCCL reported result for one of its ranks (its first failure).
 *         CUV_ECANCELED: cuv_comm_abort was called before any failure.
 *         CUV_ETIMEDOUT: a collective outlived the timeout (cuv_comm_set_timeout).
 * @threads Any thread.
 */
CUV_EXTERN int cuv_comm_status(const cuv_comm_t *comm);
/** Sets the communicator's timeout: once one of its collectives has been pending (issued to NCCL
 * but not proven complete) for more than `ms` milliseconds, the communicator fails with
 * CUV_ETIMEDOUT, as on an asynchronous error: every pending op fails with it, once, the NCCL
 * communicators are revoked (or aborted, without ncclCommRevoke: their kernels end either way),
 * and later ops fail at once.
 *
 * It is what ends the collectives of a peer that died without NCCL noticing (on NVLink, a peer's
 * kernels may wait for a dead process's data for good, and NCCL reports nothing). The time counts
 * from the op's NCCL calls, so it includes the wait behind the communicator's earlier work: set
 * it above the longest collective and queue. The fault watch wakes when the earliest pending op's
 * time is up, so a timeout fails the ops as it falls due (a thread's wake-up later): with 100 ms,
 * the survivors' ops pending when a peer died fail within about 100 ms of its death. 0, the
 * default: none.
 *
 * @returns 0.
 * @errors CUV_EINVAL: comm is NULL.
 * @threads Any thread. It applies to ops already pending too.
 */
CUV_EXTERN int cuv_comm_set_timeout(cuv_comm_t *comm, unsigned ms);
/** An op that makes the communicator of comm's group without the ranks in exclude (n of them):
 * ncclCommShrink, NCCL 2.27 and later. Its output is the new cuv_comm_t, of
 * cuv_comm_size(comm) - n ranks, as cuv_comm_init_all's is.
 *
 * Every surviving rank of the group submits it (in each process, once per communicator), with the
 * same ranks in exclude; the excluded ranks do not. The survivors are renumbered as NCCL does: a
 * rank's new rank is its old one less the excluded ranks below it. The new communicator's local
 * ranks are comm's that survive, in their order, on the same devices, with streams of their own;
 * its timeout is comm's. comm is shrunk as it is: when it failed (a peer that died), NCCL is told
 * to end its work still in flight first (NCCL_SHRINK_ABORT); comm keeps its status, and its ops
 * still fail. It stays to be released with cuv_comm_unref, as before.
 *
 * @returns A new op, never NULL; a failure is carried by the op (cuv_op_error).
 * @errors CUV_EINVAL: comm or exclude is NULL, n is 0 or not below cuv_comm_size(comm), a rank of
 *         exclude is not in [0, cuv_comm_size(comm)) or is named twice, every local rank of comm
 *         is excluded, or an excluded rank is a local rank of comm whose NCCL communicator
 *         reports no error of its own (a live rank: it would be left out of both communicators).
 *         CUV_ENOMEM: no memory for the op.
 *         At execution: CUV_ENOTSUP (the loaded NCCL has no ncclCommShrink, as before 2.27; or comm
 *         failed and was aborted, NCCL having no ncclCommRevoke, as before 2.28: its NCCL
 *         communicators are gone; or inside a graph capture), comm's status (cuv_comm_abort
 *         aborted it), CUV_EBUSY (comm is being shrunk by another op, or has
 *         ops in flight and has not failed: order the shrink after their callbacks), and the
 *         other errors of cuv_comm_init_all's execution, CUV_ENCCL(result) being ncclCommShrink's
 *         or its group's.
 * @threads Any thread builds it. It executes as cuv_comm_init_all does: its NCCL calls are made on
 *          a cuv-nccl-init thread of its own, since each returns only once every survivor called
 *          it. While they run, comm's ops that execute fail with CUV_EBUSY.
 * @notes A queued submission is delivered, and a then or map over the op runs, once every survivor
 *        joined. The op holds comm until it executed, and the new communicator holds none of it.
 */
CUV_EXTERN cuv_op_t *cuv_comm_shrink(cuv_comm_t *comm, const int *exclude, size_t n);
/** Aborts the communicator.
 *
 * Its pending ops fail with CUV_ECANCELED (their GPU work ends, and what they hold is released once
 * that is proven), the NCCL communicators are aborted on cuv-nccl, and later ops fail at once.
 * Calling it again does nothing more; after a failure the communicator keeps that failure's
 * status, and NCCL communicators the failure revoked are aborted now (no shrink can follow).
 *
 * @returns 0.
 * @errors CUV_EINVAL: comm is NULL.
 * @threads Any thread. The NCCL calls (ncclCommAbort) are made on the cuv-nccl thread.
 */
CUV_EXTERN int cuv_comm_abort(cuv_comm_t *comm);

/* ---- collective ops ------------------------------------------------------------------------- */

/* Each collective below takes one buffer per local rank in send and recv (arrays of
 * cuv_comm_local_count(comm) entries), and send == NULL means in place, as NCCL defines it:
 * each rank's data is read from recv (for all-gather, from the rank's slot of recv; for
 * reduce-scatter, recv holds every rank's input and the result lands in the rank's slot). */

/** recv[i] = the reduction over the ranks of send (count elements each).
 *
 * @returns A new op, never NULL, whose output is unit; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: comm or recv is NULL, type or op is unknown, or a buffer a rank needs is
 *         NULL.
 *         CUV_EDEVICE: a buffer is on another device than its local rank's.
 *         CUV_ERANGE: a buffer holds fewer than count elements of type.
 *         CUV_ENOMEM: no memory for the op.
 *         The communicator's status (cuv_comm_status), once it failed or was aborted.
 *         At execution: CUV_EDEVICE (a one-rank communicator's op on another device's stream),
 *         CUV_ECONFLICT (a CUV_HAZARD_STRICT buffer in flight on another stream), CUV_ENOMEM,
 *         CUV_ETHREAD (the cuv-nccl thread cannot start), CUV_ENCCL(result) (a NCCL call
 *         fails, or the communicator fails while the op is in flight), CUV_ECANCELED
 *         (cuv_comm_abort while it is in flight), CUV_ETIMEDOUT (it or another op of the
 *         communicator outlived its timeout: cuv_comm_set_timeout), or the driver's error (the
 *         fork and join).
 * @threads Any thread builds it. Its NCCL calls are made on the thread that makes the
 *          submission's driver calls (for cuv_submit, a submitter thread: see the file's
 *          description).
 * @notes The op holds the communicator and the buffers (send read, recv written) until its work
 *        is proven complete.
 */
CUV_EXTERN cuv_op_t *cuv_comm_all_reduce(cuv_comm_t *comm, cuv_buffer_t *const *send,
                                         cuv_buffer_t *const *recv, size_t count,
                                         cuv_nccl_type_t type, cuv_nccl_redop_t op);
/** The reduction over the ranks of send (count elements each) lands in the root's recv only.
 *
 * recv[i] may be NULL for the local ranks other than the root's, unless in place.
 *
 * @returns A new op, never NULL, whose output is unit; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: root is not in [0, cuv_comm_size(comm)), or as cuv_comm_all_reduce.
 *         The other codes of cuv_comm_all_reduce, at construction and at execution.
 * @threads As cuv_comm_all_reduce.
 * @notes As cuv_comm_all_reduce.
 */
CUV_EXTERN cuv_op_t *cuv_comm_reduce(cuv_comm_t *comm, cuv_buffer_t *const *send,
                                     cuv_buffer_t *const *recv, size_t count,
                                     cuv_nccl_type_t type, cuv_nccl_redop_t op, int root);
/** Every recv receives the root's send (count elements).
 *
 * send[i] may be NULL for the local ranks other than the root's.
 *
 * @returns A new op, never NULL, whose output is unit; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: root is not in [0, cuv_comm_size(comm)), or as cuv_comm_all_reduce (no
 *         reduction is checked).
 *         The other codes of cuv_comm_all_reduce, at construction and at execution.
 * @threads As cuv_comm_all_reduce.
 * @notes As cuv_comm_all_reduce.
 */
CUV_EXTERN cuv_op_t *cuv_comm_broadcast(cuv_comm_t *comm, cuv_buffer_t *const *send,
                                        cuv_buffer_t *const *recv, size_t count,
                                        cuv_nccl_type_t type, int root);
/** Every recv (cuv_comm_size(comm) * send_count elements) receives every rank's send, in rank
 * order.
 *
 * @returns A new op, never NULL, whose output is unit; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: as cuv_comm_all_reduce (no reduction is checked).
 *         CUV_ERANGE: a send holds fewer than send_count elements, or a recv fewer than
 *         cuv_comm_size(comm) * send_count.
 *         The other codes of cuv_comm_all_reduce, at construction and at execution.
 * @threads As cuv_comm_all_reduce.
 * @notes As cuv_comm_all_reduce.
 */
CUV_EXTERN cuv_op_t *cuv_comm_all_gather(cuv_comm_t *comm, cuv_buffer_t *const *send,
                                         cuv_buffer_t *const *recv, size_t send_count,
                                         cuv_nccl_type_t type);
/** Rank r's recv receives the reduction of every rank's r-th slice of send.
 *
 * Each send holds cuv_comm_size(comm) * recv_count elements.
 *
 * @returns A new op, never NULL, whose output is unit; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: as cuv_comm_all_reduce.
 *         CUV_ERANGE: a send holds fewer than cuv_comm_size(comm) * recv_count elements, or a
 *         recv fewer than recv_count (in place: recv fewer than the send's).
 *         The other codes of cuv_comm_all_reduce, at construction and at execution.
 * @threads As cuv_comm_all_reduce.
 * @notes As cuv_comm_all_reduce.
 */
CUV_EXTERN cuv_op_t *cuv_comm_reduce_scatter(cuv_comm_t *comm, cuv_buffer_t *const *send,
                                             cuv_buffer_t *const *recv, size_t recv_count,
                                             cuv_nccl_type_t type, cuv_nccl_redop_t op);

/** The kinds of a point-to-point transfer (cuv_nccl_p2p_t.kind). */
enum {
  CUV_NCCL_SEND = 0, /**< The local rank sends its buffer to the peer (ncclSend). */
  CUV_NCCL_RECV = 1  /**< The local rank receives the peer's data into its buffer (ncclRecv). */
};
/** One point-to-point transfer of cuv_comm_send_recv: local rank `local` sends `count` elements
 * of `buffer` to rank `peer`, or receives them from it. */
typedef struct cuv_nccl_p2p {
  int kind;             /**< CUV_NCCL_SEND or CUV_NCCL_RECV. */
  unsigned local;       /**< The local rank that sends or receives (below its local count). */
  int peer;             /**< The group rank on the other end. */
  cuv_buffer_t *buffer; /**< What is sent, or where it is received: on the local rank's device. */
  size_t count;         /**< Elements of the op's type. */
} cuv_nccl_p2p_t;

/** The n transfers, in one NCCL group.
 *
 * A rank may send and receive in one op (a ring exchange) without deadlock, which two separate
 * ops could not. Every send must be matched by the peer's receive of the same count, in the same
 * order.
 *
 * @returns A new op, never NULL, whose output is unit; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: comm or transfers is NULL, n is 0 or more than an array could hold, type is
 *         unknown, or a transfer's kind is unknown, its local rank out of range, its peer not in
 *         [0, cuv_comm_size(comm)), or its buffer NULL.
 *         CUV_EDEVICE: a buffer is on another device than its local rank's.
 *         CUV_ERANGE: a buffer holds fewer than its count elements of type.
 *         CUV_ENOMEM: no memory for the op.
 *         The communicator's status (cuv_comm_status), once it failed or was aborted.
 *         At execution: the codes of cuv_comm_all_reduce's execution.
 * @threads As cuv_comm_all_reduce.
 * @notes The transfers are copied. The op holds the communicator and the buffers (sent ones
 *        read, received ones written) until its work is proven complete.
 */
CUV_EXTERN cuv_op_t *cuv_comm_send_recv(cuv_comm_t *comm, const cuv_nccl_p2p_t *transfers,
                                        size_t n, cuv_nccl_type_t type);

#ifdef __cplusplus
}
#endif

#endif
