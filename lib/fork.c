/* fork (cuv_all): branches on different streams of the policy, so independent work overlaps
 * inside one submission. Each branch first waits for what the executing stream had enqueued
 * before the fork (it sees the chain's earlier results), and the executing stream waits for every
 * branch, so the submission's completion on its own stream proves the branches complete too.
 * Every fork point is recorded before any branch enqueues work and every join after the last
 * branch: a branch forked after branch 0 ran (on the executing stream) or after an earlier
 * branch's join waited for that work, and the branches ran one after the other
 * (tests/concurrency.c test_fork_branches_overlap). Branches that conflict on a buffer are still
 * ordered by the hazard tracking (lib/hazard.c). */
#include "internal.h"
#include "combinators.h"

/* A stream for branch i: the executing stream for the first, else one the policy gives that no
 * other branch uses (falling back to sharing, which is still correct, only serial). */
static cuv_stream_t *branch_stream(cuv__exec_t *ex, cuv_stream_t **used, size_t i) {
  if (i == 0 || !ex->policy)
    return ex->stream;
  cuv_stream_t *pick = ex->stream;
  for (unsigned tries = 0; tries < 2 * i + 4; tries++) {
    cuv_stream_t *s = NULL;
    if (cuv_policy_next_stream(ex->policy, NULL, &s) < 0 || !s || s->dev != ex->sub->dev)
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

/* The fork point: the branch's stream waits for what the executing stream enqueued so far. */
static int fork_branch(cuv__exec_t *ex, cuv_stream_t *stream) {
  if (stream == ex->stream)
    return 0;
  int rc = cuv__sub_use_stream(ex->sub, stream);
  return rc < 0 ? rc : cuv__sub_order(ex->sub, ex->stream, stream);
}

static int run_branch(cuv__exec_t *ex, cuv_stream_t *stream, cuv_op_t *op, cuv_output_t *item) {
  if (stream == ex->stream)
    return cuv__op_execute(op, ex, item);
  cuv__exec_t branch = {ex->sub, stream, ex->policy, false};
  int rc = cuv__op_execute(op, &branch, item);
  ex->landing = ex->landing || branch.landing; /* the join orders it before what follows */
  return rc;
}

/* Joined back even when the branch failed midway: what it enqueued must finish before the
 * submission can be proven complete. */
static int join_branch(cuv__exec_t *ex, cuv_stream_t *stream) {
  if (stream == ex->stream)
    return 0;
  int join = cuv__sub_order(ex->sub, stream, ex->stream);
  if (join < 0) {
    /* Without the join, completion on the executing stream proves nothing about this branch:
     * wait for it here, or the submission would release what the branch still uses. */
    int wait = cuv__cu(cuv__drv.cuStreamSynchronize(stream->cu));
    if (cuv_status_is_fault(wait))
      join = wait;
  }
  return join;
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
  for (size_t i = 0; rc == 0 && i < f->n; i++) {
    used[i] = branch_stream(ex, used, i);
    rc = fork_branch(ex, used[i]);
  }
  size_t ran = 0;
  for (; rc == 0 && ran < f->n; ran++)
    rc = run_branch(ex, used[ran], f->ops[ran], &((cuv_tuple_t *)out->data)->items[ran]);
  /* A branch that failed midway enqueued work too: joined with the ones that ran. */
  for (size_t i = 0; i < ran; i++) {
    int join = join_branch(ex, used[i]);
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
