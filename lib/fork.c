/* fork: branches on different streams of the policy, so independent work overlaps
 * inside one submission. Each branch first waits for what the executing stream had enqueued
 * before the fork (it sees the chain's earlier results), and the executing stream waits for every
 * branch, so the submission's completion on its own stream proves the branches complete too
 * (lib/cross.c). Every fork point is recorded before any branch enqueues work and every join
 * after the last branch: a branch forked after branch 0 ran (on the executing stream) or after an
 * earlier branch's join waited for that work, and the branches ran one after the other
 * (tests/completion/concurrency.c test_fork_branches_overlap). A branch of another device runs on a
 * stream of that device (the policy's when it serves that device, else the device's default
 * policy's); a branch of no device stays on the executing device. Branches that conflict on a
 * buffer are still ordered by the hazard tracking (lib/hazard.c). */
#include "internal.h"
#include "combinators.h"
#include "cross.h"
#include "policy.h"

/* A stream of the executing device for branch i: the executing stream for the first, else one
 * the policy gives that no other branch uses (falling back to sharing, which is still correct,
 * only serial). */
static cuv_stream_t *branch_stream(cuv__exec_t *ex, cuv_stream_t **used, size_t i) {
  if (i == 0 || !ex->policy)
    return ex->stream;
  cuv_stream_t *pick = ex->stream;
  for (unsigned tries = 0; tries < 2 * i + 4; tries++) {
    cuv_stream_t *s = NULL;
    if (cuv__policy_stream_on(ex->policy, ex->stream->dev, &s) < 0)
      break;
    bool taken = false;
    for (size_t j = 0; j < i; j++)
      taken = taken || used[j] == s;
    pick = s;
    if (!taken)
      break;
  }
  return pick;
}

/* Where branch i runs, forked from the executing stream. */
static int fork_branch(cuv__exec_t *ex, cuv_op_t *op, cuv_stream_t **used, size_t i) {
  int rc = 0;
  if (op->device >= 0 && op->device != ex->stream->dev->ordinal)
    rc = cuv__cross_stream(ex, op->device, &used[i]);
  else
    used[i] = branch_stream(ex, used, i);
  return rc < 0 ? rc : cuv__cross_fork(ex, used[i]);
}

static void fork_drop(cuv_op_t *op) {
  cuv__multi_op_t *f = (cuv__multi_op_t *)op;
  cuv__op_drop_all(f->ops, f->n);
}

static int fork_execute(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out) {
  cuv__multi_op_t *f = (cuv__multi_op_t *)op;
  cuv_stream_t *used_inline[8];
  cuv_stream_t **used = f->n <= 8 ? used_inline : calloc(f->n, sizeof *used);
  *out = cuv__tuple_new(f->n);
  int rc = used && out->data ? 0 : CUV_ENOMEM;
  /* All fork points first; a failed one runs no branch. */
  for (size_t i = 0; rc == 0 && i < f->n; i++)
    rc = fork_branch(ex, f->ops[i], used, i);
  size_t ran = 0;
  for (; rc == 0 && ran < f->n; ran++)
    rc = cuv__cross_run(ex, used[ran], f->ops[ran], &((cuv_tuple_t *)out->data)->items[ran]);
  /* A branch that failed midway enqueued work too: joined with the ones that ran. */
  for (size_t i = 0; i < ran; i++) {
    int join = cuv__cross_join(ex, used[i]);
    rc = rc < 0 ? rc : join;
  }
  /* Not run (a fork point or an earlier branch failed): only the fork wait is on their stream,
   * and it ends when the executing stream gets there. */
  cuv__op_drop_all(f->ops + ran, f->n - ran);
  if (used != used_inline)
    free(used);
  return rc;
}

static const cuv__op_vt_t fork_vt = {"fork", fork_execute, fork_drop,
                                    NULL /* its branches take streams as they run */};

CUV_EXTERN cuv_op_t *cuv_fork(cuv_op_t *const *ops, size_t n) {
  return cuv__gather_ops(&fork_vt, ops, n);
}
