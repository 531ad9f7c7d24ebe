/* cuv_submit: the asynchronous executor. The op tree is enqueued like the blocking executors do,
 * then its completion is armed (completion.c) and delivered to the caller's queue, where
 * cuv_queue_drain runs the callback exactly once. */
#include "internal.h"
#include "completion.h"
#include "queue.h"

CUV_EXTERN int cuv_submit(cuv_queue_t *queue, cuv_op_t *op, cuv_done_fn done, void *arg,
                          const cuv_submit_opts_t *opts) {
  if (!queue || !done) {
    cuv_op_destroy(op);
    return CUV_EINVAL;
  }
  int rc = cuv__queue_enter(queue); /* counted from here: a closing owner waits for it */
  if (rc < 0) {
    cuv_op_destroy(op);
    return rc;
  }
  cuv_submit_opts_t defaults = {0};
  opts = opts ? opts : &defaults;
  cuv__exec_t ex;
  rc = cuv__exec_begin(op, opts->policy, opts->stream, &ex);
  if (rc < 0) {
    cuv__queue_leave(queue);
    return rc;
  }
  cuv__submission_t *sub = ex.sub;
  sub->queue = queue;
  sub->done = done;
  sub->done_arg = arg;
  cuv__queue_accept(queue, sub, opts->flags);
  if (opts->ticket)
    *opts->ticket = sub->ticket;
  /* A failure midway still arms: what was enqueued must finish before its resources go, and
   * the callback then reports the execution's error. */
  sub->status = cuv__op_execute(op, &ex, &sub->output);
  cuv__arm(sub, !(opts->flags & (CUV_SUBMIT_NO_SPIN | CUV_SUBMIT_POLLED)));
  return 0;
}
