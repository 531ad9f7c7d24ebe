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
  bool abort_wanted;          /* cuv_comm_abort: cuv-nccl aborts the NCCL communicators */
  bool initializing; /* NCCL's blocking init runs on the init thread: no one else calls NCCL */
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

#endif
