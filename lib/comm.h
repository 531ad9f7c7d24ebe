#ifndef CUV_LIB_COMM_H
#define CUV_LIB_COMM_H

/* comm.c: communicators (include/cuv/collective.h): one NCCL communicator per local rank, each
 * with its device and the stream its NCCL calls use; their creation as an op; the watch of their
 * work in flight, their failure and abort, and their end, on the cuv-nccl thread. */

#include "nccl_funcs.h"

typedef struct cuv__comm_pending cuv__comm_pending_t;

typedef struct cuv__comm_local {
  cuv__nccl_comm_t nccl;
  cuv_device_t *dev;
  cuv_stream_t *stream;
  int rank;
} cuv__comm_local_t;

struct cuv_comm_s {
  atomic_int refs;
  /* NCCL's rule, one thread at a time in a communicator's calls (cuv-nccl's polls included); it
   * also guards the fields below that are not atomic. */
  pthread_mutex_t lock;
  _Atomic int state;          /* COMM_* (comm.c) */
  _Atomic int status;         /* 0, or what its ops fail with once it failed or was aborted */
  bool nccl_ended;            /* aborted or destroyed: the NCCL handles are gone */
  bool abort_wanted;          /* cuv-nccl aborts the NCCL communicators */
  bool abort_asked;           /* by cuv_comm_abort (not for a failure) */
  bool revoke_wanted;         /* a failure, NCCL having ncclCommRevoke: cuv-nccl revokes them */
  bool revoked;               /* revoked: the handles stay, for a shrink, until aborted */
  bool initializing; /* NCCL's blocking init runs on the init thread: no one else calls NCCL */
  bool shrinking;    /* a shrink's NCCL calls use the handles (lib/shrink.c): likewise */
  bool watched;               /* in cuv-nccl's list, which holds a reference */
  int nranks;
  unsigned n;
  /* Set once every rank is ready or the creation failed (by the init thread): a blocking creation
   * waits for it on the host, a queued one's delivery waits for it through its submission's gate
   * (comm.c says why not its stream). */
  atomic_bool created;
  cuv__submission_t *_Atomic gate; /* a queued creation's submission, until that gate opened */
  cuv__submission_t *creation; /* the creation's submission, until it retires */
  cuv__comm_pending_t *pending; /* submissions with this communicator's work in flight */
  uint64_t finalize_deadline;   /* when closing: abort rather than wait for the finalize after */
  _Atomic uint64_t timeout_ns;  /* cuv_comm_set_timeout: a collective pending longer fails it */
  struct cuv_comm_s *watch_next;
  cuv__comm_local_t local[];
};

/* Takes the communicator for NCCL calls: its lock, the calling thread's context saved (restored by
 * cuv__comm_leave). Fails with the communicator's status, without the lock, once it failed. */
int cuv__comm_enter(cuv_comm_t *comm, CUcontext *saved);
void cuv__comm_leave(cuv_comm_t *comm, CUcontext saved);
/* Watches `sub`, which has this communicator's work in flight, until it retires: a failure of the
 * communicator meanwhile fails it (cuv__sub_fail_late). The submission holds the watch. */
int cuv__comm_track(cuv_comm_t *comm, cuv__submission_t *sub);
/* Holds a reference of the communicator in `sub` (unless it holds one already) until retirement;
 * the caller's reference is dropped then. */
int cuv__comm_hold(cuv__submission_t *sub, cuv_comm_t *comm);
cuv_comm_t *cuv__comm_ref(cuv_comm_t *comm);

/* A communicator to create: local rank i on devs[i] (referenced), with group rank ranks[i] of
 * nranks; NULL when out of memory. */
cuv_comm_t *cuv__comm_alloc(cuv_device_t *const *devs, unsigned n, int nranks, const int *ranks);
/* NCCL's blocking calls that make a communicator's handles (comm->local[i].nccl): run on a
 * cuv-nccl-init thread, without the communicator's lock; 0 or the error. drop frees arg, once,
 * whatever happens. */
typedef struct cuv__comm_job {
  int (*run)(cuv_comm_t *comm, void *arg);
  void *arg;
  void (*drop)(void *arg);
} cuv__comm_job_t;
/* A creation op's execution (comm.c says how it waits): takes comm's reference (NULL: out of
 * memory) and the job; *out holds the communicator once ready. */
int cuv__comm_create(cuv_comm_t *comm, cuv__exec_t *ex, const cuv__comm_job_t *job,
                     cuv_output_t *out);

/* A shrink of `comm` begins: under its lock, a failure's revoke or abort not yet made is made
 * now, and the communicator is marked shrinking (no other thread calls NCCL on it until
 * cuv__comm_shrink_end). 0, with *failed set when the communicator has failed (the shrink ends its
 * work first); CUV_EBUSY while it is being created or shrunk, or has work in flight and has not
 * failed; CUV_ENOTSUP when it was aborted for
 * a failure, NCCL lacking ncclCommRevoke; its status when cuv_comm_abort aborted it. */
int cuv__comm_shrink_begin(cuv_comm_t *comm, bool *failed);
/* The shrink's NCCL calls returned: what was asked meanwhile (a failure, an abort) is done. */
void cuv__comm_shrink_end(cuv_comm_t *comm);
/* Whether local rank `local` is known to live: its NCCL communicator answers and reports no error
 * of its own (a rank whose device or process failed does; ncclRemoteError, a peer's failure, is
 * not one). False when it reports one, or when that cannot be asked now (the handles are in use
 * or gone: then cuv__comm_shrink_begin fails the shrink anyway). */
bool cuv__comm_local_live(cuv_comm_t *comm, unsigned local);

#endif
