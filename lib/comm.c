/* Communicators. A cuv_comm_t holds one NCCL communicator per local rank, each with its device (a
 * reference) and a stream of that device on which every NCCL call of that rank goes, so a rank's
 * collectives reach the GPU in the order they were issued, as NCCL needs on every rank.
 *
 * The NCCL communicators are blocking (ncclConfig_t's blocking = 1): a group of a non-blocking one
 * ends on a thread NCCL starts for each ncclGroupEnd, which the caller then waits for; a blocking
 * group is launched by ncclGroupEnd itself, on the calling thread. Their initialization, which
 * then blocks, runs on a thread of its own per creation (cuv-nccl-init: one group of every local
 * rank's ncclCommInitRankConfig). One per creation, since the ranks of one group may be created by
 * separate ops of one process, and each init returns only once every rank joined. Creation is an
 * op: a queued submission's delivery waits behind a gate the init thread opens (creation_gate says
 * why not its stream), a blocking executor waits on its own thread; no loop or submitter thread
 * waits for NCCL's init. A failure reaches the submission as its late status (lib/submission.h).
 * NCCL_RUNTIME_CONNECT=0 (lib/nccl.c) has NCCL connect the collectives' channels in that init, so
 * a collective's blocking ncclGroupEnd does not wait there for its peers to connect.
 *
 * Faults. Every submission with a collective in flight is watched (a pending record it holds); the
 * cuv-nccl thread polls the communicators that have one. An error, or one pending longer than the
 * communicator's timeout (cuv_comm_set_timeout: a peer whose death NCCL never reports), fails them
 * all (late status) and ends the NCCL communicators' work: revoked where NCCL has ncclCommRevoke
 * (2.28: their kernels end and the communicators stay, for a shrink, lib/shrink.c), aborted
 * where it has not (ncclCommAbort ends their kernels too); the streams move on and the
 * submissions complete with the error. cuv_comm_abort aborts, on request. ncclCommDestroy, which
 * can block, is called only at the end, on cuv-nccl, after a finalize that went through; a
 * revoked communicator is aborted then (NCCL forbids its finalize). A shrink's NCCL calls run on
 * an init thread while the parent is marked shrinking, which keeps every other thread off its
 * handles as an init does. */
#include <string.h>

#include "internal.h"
#include "comm.h"
#include "completion.h"
#include "hazard.h"
#include "nccl.h"
#include "poller.h"

enum { COMM_STARTING, COMM_READY, COMM_FAILED };

#define START_POLL_US 1000u  /* while a communicator is being closed; a creation's wait */
#define WATCH_POLL_US 10000u /* while collectives are in flight: a failure is seen this soon */
#define FINALIZE_NS 10000000000ull /* a finalize that takes longer is given up for an abort */

struct cuv__comm_pending {
  cuv_comm_t *comm;
  cuv__submission_t *sub;
  uint64_t issued_ns; /* when it was tracked, just before its NCCL calls: the timeout's start */
  cuv__comm_pending_t *prev, *next;
};

/* cuv-nccl's lists: communicators watched (each holds a reference) and closing (no reference
 * left: cuv-nccl ends and frees them). */
static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static cuv_comm_t *watch_head, *closing_head;

static unsigned poll_all(bool ending);

/* Pushes onto one of the lists, or takes a whole list, under watch_lock. */
static void list_push(cuv_comm_t **head, cuv_comm_t *comm) {
  pthread_mutex_lock(&watch_lock);
  comm->watch_next = *head;
  *head = comm;
  pthread_mutex_unlock(&watch_lock);
}

static cuv_comm_t *list_take(cuv_comm_t **head) {
  pthread_mutex_lock(&watch_lock);
  cuv_comm_t *list = *head;
  *head = NULL;
  pthread_mutex_unlock(&watch_lock);
  return list;
}

/* ---- references and the end ---- */

cuv_comm_t *cuv__comm_ref(cuv_comm_t *comm) {
  atomic_fetch_add(&comm->refs, 1);
  return comm;
}

/* Frees what is left once the NCCL communicators are gone. */
static void comm_free(cuv_comm_t *comm) {
  for (unsigned i = 0; i < comm->n; i++) {
    cuv__stream_unref(comm->local[i].stream);
    cuv__device_unref(comm->local[i].dev);
  }
  pthread_mutex_destroy(&comm->lock);
  free(comm);
}

/* The last reference went: ending NCCL communicators may block, so cuv-nccl does it. */
static void comm_release(void *arg) {
  cuv_comm_t *comm = arg;
  if (atomic_fetch_sub(&comm->refs, 1) != 1)
    return;
  list_push(&closing_head, comm);
  cuv__poller_wake(poll_all); /* without the thread, it stays listed to the process's end */
}

CUV_EXTERN cuv_comm_t *cuv_comm_ref(cuv_comm_t *comm) { return comm ? cuv__comm_ref(comm) : NULL; }

CUV_EXTERN void cuv_comm_unref(cuv_comm_t *comm) {
  if (comm)
    comm_release(comm);
}

int cuv__comm_hold(cuv__submission_t *sub, cuv_comm_t *comm) {
  int rc = cuv__sub_hold_unique(sub, comm_release, comm);
  if (rc == 1)
    comm_release(comm); /* held already: the caller's reference is not needed */
  return rc < 0 ? rc : 0;
}

/* ---- cuv-nccl's list ---- */

/* Adds the communicator to cuv-nccl's list (which then holds a reference) unless it is there; the
 * caller holds comm->lock, so cuv-nccl cannot be deciding meanwhile to drop it. */
static void watch_locked(cuv_comm_t *comm) {
  pthread_mutex_lock(&watch_lock);
  if (!comm->watched) {
    comm->watched = true;
    comm->watch_next = watch_head;
    watch_head = cuv__comm_ref(comm);
  }
  pthread_mutex_unlock(&watch_lock);
}

/* Wakes cuv-nccl for a pass now. Without the thread nothing would ever fail, abort or end the
 * communicator: CUV_ETHREAD. */
static int watch_wake(void) { return cuv__poller_wake(poll_all); }

/* ---- failure and abort ---- */

/* Aborts the NCCL communicators once (their kernels end). Lock held. */
static void abort_locked(cuv_comm_t *comm) {
  if (comm->nccl_ended || comm->initializing || comm->shrinking)
    return; /* an init or shrink in progress: done once NCCL returns (init_main, poll_one) */
  CUcontext saved = cuv__nccl_enter();
  for (unsigned i = 0; i < comm->n; i++)
    if (comm->local[i].nccl)
      cuv__nccl.ncclCommAbort(comm->local[i].nccl);
  cuv__nccl_leave(saved);
  comm->nccl_ended = true;
}

/* Revokes the NCCL communicators once: their work in flight ends (their kernels stop), they take
 * no more, and they stay for a shrink (NCCL 2.28). Lock held. */
static void revoke_locked(cuv_comm_t *comm) {
  if (comm->nccl_ended || comm->revoked || comm->initializing || comm->shrinking)
    return;
  CUcontext saved = cuv__nccl_enter();
  for (unsigned i = 0; i < comm->n; i++)
    if (comm->local[i].nccl)
      cuv__nccl.ncclCommRevoke(comm->local[i].nccl, CUV__NCCL_REVOKE_DEFAULT);
  cuv__nccl_leave(saved);
  comm->revoked = true;
}

/* What a failure (or an abort) asked for, once no init or shrink is in NCCL's calls. Lock held. */
static void end_work_locked(cuv_comm_t *comm) {
  if (comm->abort_wanted)
    abort_locked(comm);
  else if (comm->revoke_wanted)
    revoke_locked(comm);
}

/* Lets the creation go on (its submission fails or succeeds by its late status): a waiting thread,
 * or a queued submission's delivery. Once. */
static void release_creation(cuv_comm_t *comm) {
  atomic_store(&comm->created, true);
  cuv__submission_t *gated = atomic_exchange(&comm->gate, NULL);
  if (gated)
    cuv__complete_gate_open(gated); /* not touched after: it may be delivered at once */
}

/* The first failure wins: every submission in flight fails with it, and the NCCL communicators
 * are aborted on cuv-nccl (or here, when cuv-nccl is the caller). Lock held. */
static void fail_locked(cuv_comm_t *comm, int status) {
  int none = 0;
  atomic_compare_exchange_strong(&comm->status, &none, status);
  status = atomic_load(&comm->status);
  atomic_store(&comm->state, COMM_FAILED);
  for (cuv__comm_pending_t *p = comm->pending; p; p = p->next)
    cuv__sub_fail_late(p->sub, status);
  if (comm->creation)
    cuv__sub_fail_late(comm->creation, status);
  if (cuv__nccl.ncclCommRevoke && !comm->creation)
    comm->revoke_wanted = true; /* a ready communicator: kept, for a shrink */
  else
    comm->abort_wanted = true;
}

/* ---- NCCL calls ---- */

int cuv__comm_enter(cuv_comm_t *comm, CUcontext *saved) {
  pthread_mutex_lock(&comm->lock);
  int status = atomic_load(&comm->status);
  if (status == 0 && (atomic_load(&comm->state) != COMM_READY || comm->shrinking))
    status = CUV_EBUSY; /* being created (only its creation's completion makes it usable), or
                           shrunk (its handles are the shrink's until NCCL returns) */
  if (status < 0) {
    pthread_mutex_unlock(&comm->lock);
    return status;
  }
  *saved = cuv__nccl_enter();
  return 0;
}

void cuv__comm_leave(cuv_comm_t *comm, CUcontext saved) {
  cuv__nccl_leave(saved);
  pthread_mutex_unlock(&comm->lock);
}

/* The local ranks' state: IN_PROGRESS while one is (a finalize), else the first error, else
 * SUCCESS. Lock held. */
static cuv__nccl_result_t ranks_state(cuv_comm_t *comm) {
  cuv__nccl_result_t worst = CUV__NCCL_SUCCESS;
  for (unsigned i = 0; i < comm->n; i++) {
    cuv__nccl_result_t state = CUV__NCCL_SUCCESS;
    cuv__nccl_result_t r = cuv__nccl.ncclCommGetAsyncError(comm->local[i].nccl, &state);
    if (r != CUV__NCCL_SUCCESS)
      state = r;
    if (state == CUV__NCCL_IN_PROGRESS && worst == CUV__NCCL_SUCCESS)
      worst = state;
    else if (state != CUV__NCCL_SUCCESS && state != CUV__NCCL_IN_PROGRESS)
      return state;
  }
  return worst;
}

/* ---- submissions in flight, and cuv-nccl's passes ---- */

static void pending_release(void *arg) {
  cuv__comm_pending_t *p = arg;
  cuv_comm_t *comm = p->comm;
  pthread_mutex_lock(&comm->lock);
  if (p->prev)
    p->prev->next = p->next;
  else
    comm->pending = p->next;
  if (p->next)
    p->next->prev = p->prev;
  pthread_mutex_unlock(&comm->lock);
  free(p);
  comm_release(comm);
}

int cuv__comm_track(cuv_comm_t *comm, cuv__submission_t *sub) {
  cuv__comm_pending_t *p = calloc(1, sizeof *p);
  if (!p)
    return CUV_ENOMEM;
  int rc = cuv__sub_hold(sub, pending_release, p);
  if (rc < 0) {
    free(p);
    return rc;
  }
  p->comm = cuv__comm_ref(comm);
  p->sub = sub;
  p->issued_ns = cuv__now_ns();
  pthread_mutex_lock(&comm->lock);
  bool first = !comm->pending;
  p->next = comm->pending;
  if (p->next)
    p->next->prev = p;
  comm->pending = p;
  int status = atomic_load(&comm->status);
  if (status < 0)
    cuv__sub_fail_late(sub, status); /* it failed after the caller looked */
  watch_locked(comm);
  pthread_mutex_unlock(&comm->lock);
  return first ? watch_wake() : 0; /* the thread may be parked: nothing was watched */
}

/* Whether a submission has been pending longer than the communicator's timeout: NCCL may never
 * report a peer that died (its kernels may wait on NVLink for good), so this is what fails the
 * communicator then. Lock held. */
static bool timed_out(cuv_comm_t *comm) {
  uint64_t timeout = atomic_load(&comm->timeout_ns), now = cuv__now_ns();
  for (cuv__comm_pending_t *p = comm->pending; timeout && p; p = p->next)
    if (now - p->issued_ns > timeout)
      return true;
  return false;
}

/* The soonest timeout of the watched communicators, for this pass (cuv-nccl's own): the next pass
 * comes then rather than at the next 10 ms tick, so a timeout fails the ops as it falls due. */
static uint64_t soonest_deadline;

static void note_deadline(cuv_comm_t *comm) {
  uint64_t timeout = atomic_load(&comm->timeout_ns);
  if (!timeout || atomic_load(&comm->state) != COMM_READY || comm->shrinking)
    return; /* (a shrinking one's pending ops are not checked: poll_one) */
  for (cuv__comm_pending_t *p = comm->pending; p; p = p->next)
    if (!soonest_deadline || p->issued_ns + timeout < soonest_deadline)
      soonest_deadline = p->issued_ns + timeout;
}

/* Until the next pass: the watch's tick, or sooner when a timeout falls due before it. */
static unsigned watch_pause_us(void) {
  uint64_t now = cuv__now_ns(), due = soonest_deadline;
  if (!due || due >= now + WATCH_POLL_US * 1000ull)
    return WATCH_POLL_US;
  return due > now ? (unsigned)((due - now) / 1000u) + 1u : 1u;
}

/* Back in cuv-nccl's list as it was (it still holds the list's reference). */
static void rewatch(cuv_comm_t *comm) { list_push(&watch_head, comm); }

/* One communicator's pass; true while it still needs watching. A communicator busy with a thread
 * that issues collectives is looked at in the next pass; one being initialized is its init
 * thread's (an abort asked meanwhile is made there). */
static bool poll_one(cuv_comm_t *comm) {
  if (pthread_mutex_trylock(&comm->lock) != 0) {
    rewatch(comm);
    return true;
  }
  CUcontext saved = cuv__nccl_enter();
  if (atomic_load(&comm->state) == COMM_READY && comm->pending && !comm->shrinking) {
    cuv__nccl_result_t r = ranks_state(comm);
    if (r != CUV__NCCL_SUCCESS && r != CUV__NCCL_IN_PROGRESS)
      fail_locked(comm, CUV_ENCCL(r));
    else if (timed_out(comm))
      fail_locked(comm, CUV_ETIMEDOUT);
  }
  if ((comm->abort_wanted || comm->revoke_wanted) && !comm->initializing && !comm->shrinking) {
    end_work_locked(comm);
    release_creation(comm);
  }
  note_deadline(comm);
  cuv__nccl_leave(saved);
  bool keep = atomic_load(&comm->state) == COMM_READY && comm->pending;
  pthread_mutex_lock(&watch_lock); /* decided under comm->lock: no track can slip in between */
  comm->watched = keep;
  pthread_mutex_unlock(&watch_lock);
  if (keep)
    rewatch(comm);
  pthread_mutex_unlock(&comm->lock);
  return keep;
}

/* Finalizes, then destroys (or aborts, when a finalize fails or hangs) a closing communicator's
 * NCCL communicators; true once they are gone (or never were: a creation that failed early). No
 * lock needed: no one else has it. */
static bool close_one(cuv_comm_t *comm) {
  bool any = false;
  for (unsigned i = 0; i < comm->n; i++)
    any = any || comm->local[i].nccl;
  if (comm->nccl_ended || !any)
    return true;
  CUcontext saved = cuv__nccl_enter();
  if (comm->revoked) { /* failed: NCCL forbids the finalize, and the abort cannot block */
    abort_locked(comm);
    cuv__nccl_leave(saved);
    return true;
  }
  if (!comm->finalize_deadline) {
    comm->finalize_deadline = cuv__now_ns() + FINALIZE_NS;
    for (unsigned i = 0; i < comm->n; i++)
      cuv__nccl.ncclCommFinalize(comm->local[i].nccl);
  }
  cuv__nccl_result_t state = ranks_state(comm);
  if (state == CUV__NCCL_SUCCESS) {
    for (unsigned i = 0; i < comm->n; i++)
      cuv__nccl.ncclCommDestroy(comm->local[i].nccl);
    comm->nccl_ended = true;
  } else if (state != CUV__NCCL_IN_PROGRESS || cuv__now_ns() > comm->finalize_deadline) {
    abort_locked(comm);
  }
  cuv__nccl_leave(saved);
  return comm->nccl_ended;
}

/* The watched communicators' passes; those that need no more watching leave the list. */
static void poll_watched(void) {
  cuv_comm_t *list = list_take(&watch_head);
  while (list) {
    cuv_comm_t *comm = list;
    list = comm->watch_next;
    if (!poll_one(comm))
      comm_release(comm); /* the list's reference */
  }
}

static bool poll_closing(void) {
  cuv_comm_t *list = list_take(&closing_head);
  bool left = false;
  while (list) {
    cuv_comm_t *comm = list;
    list = comm->watch_next;
    if (close_one(comm)) {
      comm_free(comm);
    } else {
      left = true;
      list_push(&closing_head, comm);
    }
  }
  return left;
}

/* cuv-nccl's pass (lib/poller.c): often while something closes, less often while collectives are
 * in flight, not at all when nothing is watched; at exit, the closing ones. */
static unsigned poll_all(bool ending) {
  if (ending)
    return poll_closing() ? START_POLL_US : 0;
  soonest_deadline = 0;
  poll_watched();
  bool busy = poll_closing();
  pthread_mutex_lock(&watch_lock);
  bool watching = watch_head != NULL;
  busy = busy || closing_head != NULL;
  pthread_mutex_unlock(&watch_lock);
  unsigned watch = watching ? watch_pause_us() : 0;
  return busy && (!watch || watch > START_POLL_US) ? START_POLL_US : watch;
}

/* ---- creation ---- */

cuv_comm_t *cuv__comm_alloc(cuv_device_t *const *devs, unsigned n, int nranks, const int *ranks) {
  cuv_comm_t *comm = calloc(1, sizeof *comm + n * sizeof comm->local[0]);
  if (!comm)
    return NULL;
  atomic_init(&comm->refs, 1);
  pthread_mutex_init(&comm->lock, NULL);
  comm->n = n;
  comm->nranks = nranks;
  for (unsigned i = 0; i < n; i++) {
    comm->local[i].dev = cuv__device_ref(devs[i]);
    comm->local[i].rank = ranks[i];
  }
  return comm;
}

/* The streams of the local ranks. */
static int comm_resources(cuv_comm_t *comm) {
  int rc = 0;
  for (unsigned i = 0; rc == 0 && i < comm->n; i++)
    rc = cuv__stream_create(&comm->local[i].stream, comm->local[i].dev, true);
  return rc;
}

/* Every local rank's blocking initialization, in one group: returns once every rank of the
 * group is ready, or with the error. On the init thread, without the lock (cuv_comm_abort must not
 * wait for it); comm->initializing keeps every other thread off these NCCL handles meanwhile. */
static int init_nccl(cuv_comm_t *comm, void *arg) {
  const cuv__nccl_id_t *id = arg;
  cuv__nccl_config_t config = {sizeof config,      CUV__NCCL_CONFIG_MAGIC, CUV__NCCL_CONFIG_VERSION,
                               1 /* blocking */,   CUV__NCCL_UNDEF_INT,    CUV__NCCL_UNDEF_INT,
                               CUV__NCCL_UNDEF_INT, NULL,                  CUV__NCCL_UNDEF_INT};
  CUcontext saved = cuv__nccl_enter();
  int rc = cuv__nccl_status(cuv__nccl.ncclGroupStart());
  bool grouped = rc == 0;
  for (unsigned i = 0; rc == 0 && i < comm->n; i++) {
    rc = cuv__bind(comm->local[i].dev); /* NCCL takes the rank's device from the context */
    if (rc == 0)
      rc = cuv__nccl_status(cuv__nccl.ncclCommInitRankConfig(
          &comm->local[i].nccl, comm->nranks, *id, comm->local[i].rank, &config));
  }
  int end = grouped ? cuv__nccl_status(cuv__nccl.ncclGroupEnd()) : 0;
  cuv__nccl_leave(saved);
  return rc < 0 ? rc : end;
}

/* What the init thread needs: its own reference of the communicator, and the job (the op is gone
 * once its execution returned). */
typedef struct init_job {
  cuv_comm_t *comm;
  cuv__comm_job_t job;
} init_job_t;

/* The init thread: NCCL's blocking calls, then the communicator ready or failed (aborted here: no
 * other thread calls NCCL on it until this one is done), and the creation let go on. */
static void *init_main(void *arg) {
  init_job_t *job = arg;
  cuv_comm_t *comm = job->comm;
  int rc = job->job.run(comm, job->job.arg);
  job->job.drop(job->job.arg);
  free(job);
  pthread_mutex_lock(&comm->lock);
  comm->initializing = false;
  if (rc == 0 && atomic_load(&comm->status) == 0) {
    atomic_store(&comm->state, COMM_READY);
    comm->creation = NULL; /* done: a later failure is not the creation's */
  } else {
    fail_locked(comm, rc < 0 ? rc : atomic_load(&comm->status));
    abort_locked(comm); /* some ranks may have started, or an abort was asked meanwhile */
  }
  release_creation(comm);
  pthread_mutex_unlock(&comm->lock);
  comm_release(comm);
  return NULL;
}

/* Starts the init thread, detached (nothing joins it: it ends with the init). It owns the job
 * from here, also when it cannot start (dropped then). */
static int init_start(cuv_comm_t *comm, const cuv__comm_job_t *work) {
  init_job_t *job = malloc(sizeof *job);
  if (!job) {
    work->drop(work->arg);
    return CUV_ENOMEM;
  }
  job->comm = cuv__comm_ref(comm);
  job->job = *work;
  comm->initializing = true; /* before any other thread can see the communicator's handles */
  pthread_attr_t attr;
  pthread_t thread;
  int rc = pthread_attr_init(&attr) == 0 ? 0 : CUV_ETHREAD;
  if (rc == 0 && pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) != 0)
    rc = CUV_ETHREAD;
  if (rc == 0 && pthread_create(&thread, &attr, init_main, job) != 0)
    rc = CUV_ETHREAD;
  if (rc == 0)
    pthread_setname_np(thread, "cuv-nccl-init");
  pthread_attr_destroy(&attr);
  if (rc < 0) {
    comm->initializing = false;
    comm_release(comm);
    work->drop(work->arg);
    free(job);
  }
  return rc;
}

/* The creation's submission leaves the communicator (after the creation was released). */
static void creation_release(void *arg) {
  cuv_comm_t *comm = arg;
  pthread_mutex_lock(&comm->lock);
  comm->creation = NULL;
  pthread_mutex_unlock(&comm->lock);
  comm_release(comm);
}

/* Where the creation waits for NCCL's init. Not on its stream: NCCL's initialization allocates
 * and copies with implicit device-wide synchronization, which would wait forever for a stream of
 * that device held back until the initialization ends (seen on the GPU). A queued submission
 * (cuv_submit, cuv_uv_submit) is delivered only once cuv-nccl opened its gate, so no thread
 * waits, and a then or map over the creation waits for the gate like for a landing copy
 * (completion.c); a blocking executor, and cuv_enqueue_on, wait here, on the calling thread. */
static void creation_gate(cuv_comm_t *comm, cuv__exec_t *ex) {
  if (!ex->sub->queue)
    return;
  cuv__sub_gate(ex->sub);
  atomic_store(&comm->gate, ex->sub);
}

static int await_creation(cuv_comm_t *comm, cuv__exec_t *ex) {
  if (ex->sub->queue)
    return 0;
  struct timespec pause = {0, START_POLL_US * 1000L};
  while (!atomic_load(&comm->created))
    nanosleep(&pause, NULL);
  return atomic_load(&comm->status);
}

/* The job is the init thread's from here (or dropped, when it cannot start). */
static int creation_begin(cuv_comm_t *comm, const cuv__comm_job_t *job, cuv__exec_t *ex) {
  int rc = cuv__hazard_capturing(ex->sub) ? CUV_ENOTSUP : 0; /* a graph cannot replay it */
  if (rc == 0)
    rc = comm_resources(comm);
  if (rc == 0)
    rc = cuv__sub_hold(ex->sub, creation_release, cuv__comm_ref(comm));
  if (rc < 0) {
    job->drop(job->arg);
    return rc;
  }
  pthread_mutex_lock(&comm->lock);
  comm->creation = ex->sub;
  rc = init_start(comm, job);
  if (rc < 0) {
    fail_locked(comm, rc);
    release_creation(comm);
  }
  pthread_mutex_unlock(&comm->lock);
  return rc;
}

int cuv__comm_create(cuv_comm_t *comm, cuv__exec_t *ex, const cuv__comm_job_t *job,
                     cuv_output_t *out) {
  if (comm)
    creation_gate(comm, ex);
  int rc = CUV_ENOMEM;
  if (comm)
    rc = creation_begin(comm, job, ex);
  else
    job->drop(job->arg);
  if (rc == 0)
    rc = await_creation(comm, ex);
  int bound = cuv__bind(ex->stream->dev); /* the ranks' devices were made current meanwhile */
  rc = rc < 0 ? rc : bound;
  if (rc == 0) {
    ex->landing = true; /* a then/map over it sees the communicator ready */
    *out = cuv__output(comm, comm_release, comm);
  } else if (comm) {
    release_creation(comm); /* a failure before the init thread started opens the gate here */
    comm_release(comm);
  }
  return rc;
}

typedef struct init_op {
  struct cuv_op_s op;
  unsigned n;
  int nranks, first_rank;
  cuv__nccl_id_t id;
  bool make_id; /* all devices of the process: the id is made at execution */
  cuv_device_t *devs[];
} init_op_t;

static void init_drop(cuv_op_t *op) {
  init_op_t *o = (init_op_t *)op;
  for (unsigned i = 0; i < o->n; i++)
    cuv__device_unref(o->devs[i]);
}

static void id_drop(void *arg) { free(arg); }

static int init_execute(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out) {
  init_op_t *o = (init_op_t *)op;
  int rc = o->make_id ? cuv__nccl_status(cuv__nccl.ncclGetUniqueId(&o->id)) : 0;
  cuv__nccl_id_t *id = rc == 0 ? malloc(sizeof *id) : NULL;
  int ranks[CUV__MAX_DEVICES];
  for (unsigned i = 0; i < o->n; i++)
    ranks[i] = o->first_rank + (int)i;
  if (id) {
    memcpy(id, &o->id, sizeof *id);
    cuv__comm_job_t job = {init_nccl, id, id_drop};
    rc = cuv__comm_create(cuv__comm_alloc(o->devs, o->n, o->nranks, ranks), ex, &job, out);
  } else if (rc == 0) {
    rc = CUV_ENOMEM;
  }
  init_drop(op);
  return rc;
}

static const cuv__op_vt_t init_vt = {"comm_init", init_execute, init_drop, cuv__touches_none};

static cuv_op_t *init_new(cuv_device_t *const *devs, unsigned n, int nranks, int first_rank) {
  int rc = cuv__nccl_load();
  init_op_t *o = rc < 0 ? NULL : (init_op_t *)cuv__op_new(&init_vt, sizeof *o + n * sizeof *devs);
  if (!o)
    return cuv__op_fail(rc < 0 ? rc : CUV_ENOMEM);
  o->n = n;
  o->nranks = nranks;
  o->first_rank = first_rank;
  for (unsigned i = 0; i < n; i++)
    o->devs[i] = cuv__device_ref(devs[i]);
  o->op.device = devs[0]->ordinal;
  o->op.host = CUV__OP_LANDS | CUV__OP_WAITS; /* await_creation, or a then's landing */
  return &o->op;
}

CUV_EXTERN cuv_op_t *cuv_comm_init_all(cuv_device_t *const *devs, size_t n) {
  if (!devs || n == 0 || n > CUV__MAX_DEVICES)
    return cuv__op_fail(CUV_EINVAL);
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; devs[i] && j < i; j++)
      if (devs[j] == devs[i])
        return cuv__op_fail(CUV_EINVAL); /* one rank per device */
  for (size_t i = 0; i < n; i++)
    if (!devs[i])
      return cuv__op_fail(CUV_EINVAL);
  cuv_op_t *op = init_new(devs, (unsigned)n, (int)n, 0);
  if (!op->error)
    ((init_op_t *)op)->make_id = true;
  return op;
}

CUV_EXTERN cuv_op_t *cuv_comm_init_rank(cuv_device_t *dev, const cuv_nccl_id_t *id, int rank,
                                        int nranks) {
  if (!dev || !id || nranks < 1 || rank < 0 || rank >= nranks)
    return cuv__op_fail(CUV_EINVAL);
  cuv_op_t *op = init_new(&dev, 1, nranks, rank);
  if (!op->error)
    memcpy(&((init_op_t *)op)->id, id, sizeof *id);
  return op;
}

CUV_EXTERN int cuv_nccl_unique_id(cuv_nccl_id_t *id) {
  if (!id)
    return CUV_EINVAL;
  int rc = cuv__nccl_load();
  cuv__nccl_id_t made;
  if (rc == 0)
    rc = cuv__nccl_status(cuv__nccl.ncclGetUniqueId(&made));
  if (rc == 0)
    memcpy(id, &made, sizeof *id);
  return rc;
}

/* ---- shrinks (lib/shrink.c) ---- */

int cuv__comm_shrink_begin(cuv_comm_t *comm, bool *failed) {
  pthread_mutex_lock(&comm->lock);
  int rc = 0;
  if (comm->initializing || comm->shrinking || atomic_load(&comm->state) == COMM_STARTING)
    rc = CUV_EBUSY;
  else
    end_work_locked(comm); /* the revoke (or abort) cuv-nccl has not made yet */
  if (rc == 0 && comm->nccl_ended) /* aborted on request, or for a failure NCCL cannot revoke */
    rc = comm->abort_asked ? atomic_load(&comm->status) : CUV_ENOTSUP;
  /* A healthy communicator's work in flight would hold its device, which NCCL's shrink
   * synchronizes, and its failure could not end it meanwhile (the handles are the shrink's). */
  if (rc == 0 && atomic_load(&comm->status) == 0 && comm->pending)
    rc = CUV_EBUSY;
  *failed = atomic_load(&comm->status) < 0;
  if (rc == 0)
    comm->shrinking = true;
  pthread_mutex_unlock(&comm->lock);
  return rc;
}

void cuv__comm_shrink_end(cuv_comm_t *comm) {
  pthread_mutex_lock(&comm->lock);
  comm->shrinking = false;
  bool wanted = comm->abort_wanted || comm->revoke_wanted;
  if (wanted)
    watch_locked(comm); /* cuv-nccl makes the calls put off meanwhile */
  pthread_mutex_unlock(&comm->lock);
  if (wanted)
    watch_wake();
}

bool cuv__comm_local_live(cuv_comm_t *comm, unsigned local) {
  pthread_mutex_lock(&comm->lock);
  bool live = false;
  if (!comm->initializing && !comm->shrinking && !comm->nccl_ended &&
      atomic_load(&comm->state) != COMM_STARTING && comm->local[local].nccl) {
    CUcontext saved = cuv__nccl_enter();
    cuv__nccl_result_t state = CUV__NCCL_SUCCESS;
    cuv__nccl_result_t r = cuv__nccl.ncclCommGetAsyncError(comm->local[local].nccl, &state);
    cuv__nccl_leave(saved);
    /* a peer's failure (ncclRemoteError) is not this rank's */
    live = r == CUV__NCCL_SUCCESS && (state == CUV__NCCL_SUCCESS ||
                                      state == CUV__NCCL_IN_PROGRESS ||
                                      state == CUV__NCCL_REMOTE_ERROR);
  }
  pthread_mutex_unlock(&comm->lock);
  return live;
}

/* ---- the public getters and the abort ---- */

CUV_EXTERN int cuv_comm_abort(cuv_comm_t *comm) {
  if (!comm)
    return CUV_EINVAL;
  int none = 0; /* before the lock: the status is seen at once by every thread that looks */
  atomic_compare_exchange_strong(&comm->status, &none, CUV_ECANCELED);
  pthread_mutex_lock(&comm->lock);
  fail_locked(comm, CUV_ECANCELED);
  comm->abort_wanted = comm->abort_asked = true; /* also of one a failure revoked */
  watch_locked(comm); /* cuv-nccl makes the abort calls */
  pthread_mutex_unlock(&comm->lock);
  watch_wake();
  return 0;
}

CUV_EXTERN int cuv_comm_set_timeout(cuv_comm_t *comm, unsigned ms) {
  if (!comm)
    return CUV_EINVAL;
  atomic_store(&comm->timeout_ns, (uint64_t)ms * 1000000u);
  watch_wake(); /* cuv-nccl's next pass is timed by the new timeout (no lock: it may be held by
                   a blocking NCCL call) */
  return 0;
}

CUV_EXTERN int cuv_comm_status(const cuv_comm_t *comm) {
  return comm ? atomic_load(&((cuv_comm_t *)comm)->status) : CUV_EINVAL;
}

CUV_EXTERN unsigned cuv_comm_local_count(const cuv_comm_t *comm) { return comm ? comm->n : 0; }

CUV_EXTERN int cuv_comm_size(const cuv_comm_t *comm) { return comm ? comm->nranks : 0; }

CUV_EXTERN int cuv_comm_rank(const cuv_comm_t *comm, unsigned local) {
  return comm && local < comm->n ? comm->local[local].rank : CUV_EINVAL;
}

CUV_EXTERN cuv_device_t *cuv_comm_device(const cuv_comm_t *comm, unsigned local) {
  return comm && local < comm->n ? comm->local[local].dev : NULL;
}

CUV_EXTERN cuv_stream_t *cuv_comm_stream(const cuv_comm_t *comm, unsigned local) {
  return comm && local < comm->n ? comm->local[local].stream : NULL;
}

CUV_EXTERN void *cuv_comm_handle(const cuv_comm_t *comm, unsigned local) {
  return comm && local < comm->n ? (void *)comm->local[local].nccl : NULL;
}
