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
 * creates NVLink multicast objects.
 *
 * Communicators. A cuv_comm_t holds one NCCL communicator per local rank: every device of a
 * process (cuv_comm_init_all, NCCL's ncclCommInitAll case), or one rank of a group whose other
 * ranks are other processes or hosts (cuv_comm_init_rank, with the unique id the program hands
 * over: cuv_nccl_unique_id on one rank, sent to the others by any means). Creating one is an op:
 * NCCL's non-blocking initialization, polled by cuv's cuv-nccl thread, so no thread waits for it
 * (the stream the op runs on waits: pass a stream of your own to keep other work off it). Its
 * output is the cuv_comm_t (data; released with cuv_comm_unref unless taken): submit it like any
 * op (cuv_submit, cuv_uv_submit, or cuv_sync to block). Communicators are reference counted;
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
 * every 10 ms). When NCCL reports an error (a peer that died, a network failure, ...), every op
 * of the communicator still pending fails with CUV_ENCCL(that error), and the communicator is
 * aborted (ncclCommAbort, which ends its kernels; never ncclCommDestroy, which can block): later
 * ops fail with the same status at once. cuv_comm_abort does the same on request. */

#include <stdbool.h>
#include <stddef.h>

#include <cuv.h>

#ifdef __cplusplus
extern "C" {
#endif

/* NCCL's data types (ncclDataType_t's values). The FP8 types need a NCCL that has them. */
typedef enum cuv_nccl_type {
  CUV_NCCL_INT8 = 0,
  CUV_NCCL_UINT8 = 1,
  CUV_NCCL_INT32 = 2,
  CUV_NCCL_UINT32 = 3,
  CUV_NCCL_INT64 = 4,
  CUV_NCCL_UINT64 = 5,
  CUV_NCCL_FLOAT16 = 6,
  CUV_NCCL_FLOAT32 = 7,
  CUV_NCCL_FLOAT64 = 8,
  CUV_NCCL_BFLOAT16 = 9,
  CUV_NCCL_FLOAT8E4M3 = 10,
  CUV_NCCL_FLOAT8E5M2 = 11
} cuv_nccl_type_t;

/* NCCL's reductions (ncclRedOp_t's values). CUV_NCCL_AVG divides the sum by the number of ranks
 * (integer types: integer division). */
typedef enum cuv_nccl_redop {
  CUV_NCCL_SUM = 0,
  CUV_NCCL_PROD = 1,
  CUV_NCCL_MAX = 2,
  CUV_NCCL_MIN = 3,
  CUV_NCCL_AVG = 4
} cuv_nccl_redop_t;

/* Bytes per element of `type`; 0 for a value that is no type. */
CUV_EXTERN size_t cuv_nccl_type_size(cuv_nccl_type_t type);

/* ---- NCCL, loaded at first use -------------------------------------------------------------- */

/* Loads NCCL if no call did yet, and gives its version code (22809 for 2.28.9). Returns 0,
 * CUV_ENONCCL (none, or one older than 2.19), or the driver's initialization error. */
CUV_EXTERN int cuv_nccl_version(int *version);
/* Why NCCL could not be used, in a sentence naming the library tried and the loader's reason, or
 * the version found; NULL when it loaded or no call tried yet. */
CUV_EXTERN const char *cuv_nccl_error(void);
/* The ncclResult_t behind a CUV_ENCCL(...) status, or 0 when status is not a NCCL failure. */
CUV_EXTERN int cuv_nccl_result(int status);

/* ncclUniqueId: made by one rank, handed to every rank of the group (its bytes travel as they
 * are, over TCP or a file). */
typedef struct cuv_nccl_id {
  char bytes[128];
} cuv_nccl_id_t;

CUV_EXTERN int cuv_nccl_unique_id(cuv_nccl_id_t *id);

/* ---- communicators -------------------------------------------------------------------------- */

typedef struct cuv_comm_s cuv_comm_t;

/* An op that creates a communicator over n devices of this process, local rank i (and rank i of
 * the group) on devs[i]. Output: the cuv_comm_t. An error op for NULL or repeated devices, n == 0
 * (CUV_EINVAL) or no NCCL (CUV_ENONCCL). It runs on a stream of devs[0]'s device; a then or map
 * over it runs once the communicator is ready. Executed inside a graph capture it fails with
 * CUV_ENOTSUP (a graph cannot replay a creation); a NCCL failure fails it with CUV_ENCCL(...). */
CUV_EXTERN cuv_op_t *cuv_comm_init_all(cuv_device_t *const *devs, size_t n);
/* An op that creates rank `rank` of a group of `nranks` (0 <= rank < nranks) on dev, with the
 * group's unique id: it completes once every rank joined. Output: the cuv_comm_t. */
CUV_EXTERN cuv_op_t *cuv_comm_init_rank(cuv_device_t *dev, const cuv_nccl_id_t *id, int rank,
                                        int nranks);
CUV_EXTERN cuv_comm_t *cuv_comm_ref(cuv_comm_t *comm);
/* Drops a reference; at the last, cuv-nccl finalizes and destroys the NCCL communicators. */
CUV_EXTERN void cuv_comm_unref(cuv_comm_t *comm);
/* Local ranks: the devices of this process in the communicator (0 for NULL). */
CUV_EXTERN unsigned cuv_comm_local_count(const cuv_comm_t *comm);
/* Ranks of the whole group (0 for NULL). */
CUV_EXTERN int cuv_comm_size(const cuv_comm_t *comm);
/* The group rank of local rank `local`; CUV_EINVAL for NULL or a local rank out of range (as
 * for the getters below, which return NULL then). */
CUV_EXTERN int cuv_comm_rank(const cuv_comm_t *comm, unsigned local);
CUV_EXTERN cuv_device_t *cuv_comm_device(const cuv_comm_t *comm, unsigned local);
/* The stream of local rank `local` that the communicator's NCCL calls use (owned by the
 * communicator). An op executed on it needs no fork or join for that rank's part. */
CUV_EXTERN cuv_stream_t *cuv_comm_stream(const cuv_comm_t *comm, unsigned local);
/* The ncclComm_t of local rank `local`, for code that calls NCCL itself (make its calls on
 * cuv_comm_stream, and none while a cuv op of the communicator may be issuing its own). */
CUV_EXTERN void *cuv_comm_handle(const cuv_comm_t *comm, unsigned local);
/* 0 while the communicator is usable; once it failed or was aborted, the status its ops fail
 * with (CUV_ENCCL(...), or CUV_ECANCELED after cuv_comm_abort). CUV_EINVAL for NULL. */
CUV_EXTERN int cuv_comm_status(const cuv_comm_t *comm);
/* Aborts the communicator: its pending ops fail with CUV_ECANCELED (their GPU work ends, and what
 * they hold is released once that is proven), the NCCL communicators are aborted on cuv-nccl,
 * and later ops fail at once. Returns 0; again, it does nothing more. CUV_EINVAL for NULL. */
CUV_EXTERN int cuv_comm_abort(cuv_comm_t *comm);

/* ---- collective ops ------------------------------------------------------------------------- */

/* Each returns an op (output: unit), or an error op: CUV_EINVAL for a NULL communicator or
 * receive array, a NULL buffer where one is needed, an unknown type or reduction, or a root out of
 * range; CUV_EDEVICE for a buffer on another device than its local rank's; CUV_ERANGE for a
 * buffer too small for the count; the communicator's status once it failed.
 * send == NULL means in place, as NCCL defines it: each rank's data is read from recv (for
 * all-gather, from the rank's slot of recv; for reduce-scatter, recv holds every rank's input and
 * the result lands in the rank's slot). */

/* recv[i] = reduction over the ranks of send (count elements each). */
CUV_EXTERN cuv_op_t *cuv_comm_all_reduce(cuv_comm_t *comm, cuv_buffer_t *const *send,
                                         cuv_buffer_t *const *recv, size_t count,
                                         cuv_nccl_type_t type, cuv_nccl_redop_t op);
/* The reduction lands in the root's recv only (recv[i] may be NULL for the other local ranks,
 * unless in place). */
CUV_EXTERN cuv_op_t *cuv_comm_reduce(cuv_comm_t *comm, cuv_buffer_t *const *send,
                                     cuv_buffer_t *const *recv, size_t count,
                                     cuv_nccl_type_t type, cuv_nccl_redop_t op, int root);
/* Every recv receives the root's send (send[i] may be NULL for the other local ranks). */
CUV_EXTERN cuv_op_t *cuv_comm_broadcast(cuv_comm_t *comm, cuv_buffer_t *const *send,
                                        cuv_buffer_t *const *recv, size_t count,
                                        cuv_nccl_type_t type, int root);
/* recv (size * send_count elements) receives every rank's send, in rank order. */
CUV_EXTERN cuv_op_t *cuv_comm_all_gather(cuv_comm_t *comm, cuv_buffer_t *const *send,
                                         cuv_buffer_t *const *recv, size_t send_count,
                                         cuv_nccl_type_t type);
/* send holds size * recv_count elements; rank r's recv receives the reduction of every rank's
 * r-th slice. */
CUV_EXTERN cuv_op_t *cuv_comm_reduce_scatter(cuv_comm_t *comm, cuv_buffer_t *const *send,
                                             cuv_buffer_t *const *recv, size_t recv_count,
                                             cuv_nccl_type_t type, cuv_nccl_redop_t op);

/* One point-to-point transfer of cuv_comm_send_recv: local rank `local` sends `count` elements of
 * `buffer` to rank `peer` (CUV_NCCL_SEND), or receives them from it (CUV_NCCL_RECV). */
enum { CUV_NCCL_SEND = 0, CUV_NCCL_RECV = 1 };
typedef struct cuv_nccl_p2p {
  int kind; /* CUV_NCCL_SEND or CUV_NCCL_RECV */
  unsigned local;
  int peer;
  cuv_buffer_t *buffer;
  size_t count;
} cuv_nccl_p2p_t;

/* The n transfers, in one NCCL group: a rank may send and receive in one op (a ring exchange)
 * without deadlock, which two separate ops could not. Every send must be matched by the peer's
 * receive of the same count, in the same order. An error op as above, also for n == 0 or an
 * unknown kind. */
CUV_EXTERN cuv_op_t *cuv_comm_send_recv(cuv_comm_t *comm, const cuv_nccl_p2p_t *transfers,
                                        size_t n, cuv_nccl_type_t type);

#ifdef __cplusplus
}
#endif

#endif
