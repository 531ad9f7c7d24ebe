/* Shrinks (cuv_comm_shrink, include/cuv/collective.h): the communicator of a group's survivors,
 * made from the parent's NCCL communicators by ncclCommShrink (NCCL 2.27), as a creation is made
 * (lib/comm.c): an op whose output is the new communicator, with NCCL's blocking calls on a
 * cuv-nccl-init thread of their own (a survivor's shrink returns only once every survivor called
 * it), never on a loop or submitter thread. The parent is marked shrinking meanwhile, which keeps
 * every other thread off its handles. A parent that failed is shrunk with NCCL_SHRINK_ABORT,
 * which ends what it still has in flight first (a revoked one, lib/comm.c, has nothing left).
 * Ranks are renumbered as NCCL does: a survivor's new rank is its old one less the excluded ranks
 * below it, and its local ranks keep their order. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "comm.h"
#include "nccl.h"

typedef struct shrink_op {
  struct cuv_op_s op;
  cuv_comm_t *parent;
  int n;
  int exclude[];
} shrink_op_t;

/* What the init thread needs: the parent (a reference, and its shrinking mark) and which of its
 * local ranks survive. */
typedef struct shrink_job {
  cuv_comm_t *parent;
  int flags; /* ncclCommShrink's */
  int n;
  unsigned from[CUV__MAX_DEVICES]; /* the new local rank i is the parent's local rank from[i] */
  int exclude[];                   /* NCCL sorts it in place: the job's own copy */
} shrink_job_t;

static bool is_excluded(const int *exclude, int n, int rank) {
  for (int i = 0; i < n; i++)
    if (exclude[i] == rank)
      return true;
  return false;
}

/* NCCL's renumbering: the excluded ranks below `rank` leave their places. */
static int new_rank(const int *exclude, int n, int rank) {
  int below = 0;
  for (int i = 0; i < n; i++)
    below += exclude[i] < rank;
  return rank - below;
}

/* Every surviving local rank's shrink, in one group (NCCL's rule for several ranks of one
 * thread: none waits for another); on the init thread. */
static int shrink_nccl(cuv_comm_t *comm, void *arg) {
  shrink_job_t *job = arg;
  CUcontext saved = cuv__nccl_enter();
  int rc = cuv__nccl_status(cuv__nccl.ncclGroupStart());
  bool grouped = rc == 0;
  for (unsigned i = 0; rc == 0 && i < comm->n; i++) {
    rc = cuv__bind(comm->local[i].dev);
    if (rc == 0)
      rc = cuv__nccl_status(cuv__nccl.ncclCommShrink(job->parent->local[job->from[i]].nccl,
                                                     job->exclude, job->n,
                                                     &comm->local[i].nccl, NULL, job->flags));
  }
  int end = grouped ? cuv__nccl_status(cuv__nccl.ncclGroupEnd()) : 0;
  cuv__nccl_leave(saved);
  return rc < 0 ? rc : end;
}

/* After the shrink ran, or when it could not start: the parent is another thread's again. */
static void job_drop(void *arg) {
  shrink_job_t *job = arg;
  cuv__comm_shrink_end(job->parent);
  cuv_comm_unref(job->parent);
  free(job);
}

static shrink_job_t *job_new(const shrink_op_t *o) {
  shrink_job_t *job = malloc(sizeof *job + (size_t)o->n * sizeof job->exclude[0]);
  if (!job)
    return NULL;
  job->parent = cuv__comm_ref(o->parent);
  job->n = o->n;
  memcpy(job->exclude, o->exclude, (size_t)o->n * sizeof job->exclude[0]);
  return job;
}

/* The new communicator: the parent's surviving local ranks, in order, renumbered. */
static cuv_comm_t *survivors(const shrink_op_t *o, shrink_job_t *job) {
  const cuv_comm_t *parent = o->parent;
  cuv_device_t *devs[CUV__MAX_DEVICES];
  int ranks[CUV__MAX_DEVICES];
  unsigned n = 0;
  for (unsigned i = 0; i < parent->n; i++) {
    if (is_excluded(o->exclude, o->n, parent->local[i].rank))
      continue;
    job->from[n] = i;
    devs[n] = parent->local[i].dev;
    ranks[n++] = new_rank(o->exclude, o->n, parent->local[i].rank);
  }
  cuv_comm_t *comm = cuv__comm_alloc(devs, n, parent->nranks - o->n, ranks);
  if (comm) /* the survivors' deaths are watched as the parent's were */
    atomic_store(&comm->timeout_ns, atomic_load(&parent->timeout_ns));
  return comm;
}

static void shrink_drop(cuv_op_t *op) { cuv_comm_unref(((shrink_op_t *)op)->parent); }

static int shrink_execute(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out) {
  shrink_op_t *o = (shrink_op_t *)op;
  int rc = cuv__nccl.ncclCommShrink ? 0 : CUV_ENOTSUP; /* a NCCL before 2.27 */
  shrink_job_t *job = rc == 0 ? job_new(o) : NULL;
  if (rc == 0 && !job)
    rc = CUV_ENOMEM;
  bool failed = false;
  if (rc == 0 && (rc = cuv__comm_shrink_begin(o->parent, &failed)) < 0) {
    cuv_comm_unref(job->parent);
    free(job);
  }
  if (rc == 0) {
    job->flags = failed ? CUV__NCCL_SHRINK_ABORT : CUV__NCCL_SHRINK_DEFAULT;
    cuv__comm_job_t work = {shrink_nccl, job, job_drop};
    rc = cuv__comm_create(survivors(o, job), ex, &work, out);
  }
  shrink_drop(op);
  return rc;
}

static const cuv__op_vt_t shrink_vt = {"comm_shrink", shrink_execute, shrink_drop,
                                       cuv__touches_none};

/* Every excluded rank in range and named once, not every rank excluded, a survivor among the
 * local ranks, and no live local rank excluded (it would be left out of both communicators). */
static int check_exclusion(cuv_comm_t *comm, const int *exclude, size_t n) {
  if (!comm || !exclude || n == 0 || n >= (size_t)comm->nranks)
    return CUV_EINVAL;
  for (size_t i = 0; i < n; i++) {
    if (exclude[i] < 0 || exclude[i] >= comm->nranks || is_excluded(exclude, (int)i, exclude[i]))
      return CUV_EINVAL;
  }
  unsigned left = 0;
  for (unsigned i = 0; i < comm->n; i++) {
    if (!is_excluded(exclude, (int)n, comm->local[i].rank))
      left++;
    else if (cuv__comm_local_live(comm, i))
      return CUV_EINVAL;
  }
  return left ? 0 : CUV_EINVAL;
}

CUV_EXTERN cuv_op_t *cuv_comm_shrink(cuv_comm_t *comm, const int *exclude, size_t n) {
  int rc = check_exclusion(comm, exclude, n);
  shrink_op_t *o = NULL;
  if (rc == 0)
    o = (shrink_op_t *)cuv__op_new(&shrink_vt, sizeof *o + n * sizeof o->exclude[0]);
  if (!o)
    return cuv__op_fail(rc < 0 ? rc : CUV_ENOMEM);
  o->parent = cuv__comm_ref(comm);
  o->n = (int)n;
  memcpy(o->exclude, exclude, n * sizeof o->exclude[0]);
  for (unsigned i = 0; i < comm->n; i++) {
    if (!is_excluded(exclude, o->n, comm->local[i].rank)) {
      o->op.device = comm->local[i].dev->ordinal; /* the new communicator's first device */
      break;
    }
  }
  o->op.host = CUV__OP_LANDS | CUV__OP_WAITS; /* as a creation's (lib/comm.c) */
  return &o->op;
}
