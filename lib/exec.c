/* Executors. Each one schedules the op (a given stream, or a policy's pick), enqueues the tree
 * with a submission that holds what it touches, and then differs only in how completion is
 * learned: waited for here (sync, sync_on), left to an event (enqueue_on, in enqueue.c), or armed
 * for a queue (submit, in submit.c). */
#include "internal.h"
#include "completion.h"
#include "exec.h"
#include "policy.h"

/* The stream an op runs on: the given one, else the policy's (the op device's default policy
 * when none is given). The device is the op's own when the op holds it open (op->dev), else it
 * is opened here, which may create it (no cuv_device_t open yet): *opened then holds the
 * reference that keeps it, its default policy and the stream alive until the submission holds
 * its own (cuv__sub_create). */
static int pick_stream(cuv_op_t *op, cuv_policy_t **policy, cuv_stream_t **stream,
                       cuv_device_t **opened) {
  if (*stream) {
    if (!*policy)
      return cuv__device_policy((*stream)->dev, policy);
    return 0;
  }
  if (!*policy) {
    cuv_device_t *dev = op->dev;
    int rc = dev ? 0 : cuv__device_get(opened, op->device < 0 ? 0 : op->device);
    if (rc < 0)
      return rc;
    rc = cuv__device_policy(dev ? dev : *opened, policy);
    if (rc < 0)
      return rc;
  }
  return cuv__policy_next_stream(*policy, op, stream);
}

int cuv__exec_begin(cuv_op_t *op, cuv_policy_t *policy, cuv_stream_t *stream, size_t extra,
                    cuv__exec_t *ex) {
  int rc = 0;
  cuv_device_t *opened = NULL;
  if (!op)
    return CUV_EINVAL;
  if (op->taken)
    return CUV_ECONSUMED; /* a combinator holds it: it stays there */
  if (cuv__exec_locked())
    rc = CUV_EREENTRANT;
  else if (op->error)
    rc = op->error;
  else if ((rc = cuv__driver_init()) == 0)
    rc = pick_stream(op, &policy, &stream, &opened);
  if (rc == 0 && op->device >= 0 && op->device != stream->dev->ordinal)
    rc = CUV_EDEVICE;
  if (rc == 0)
    rc = cuv__sub_create(&ex->sub, stream, extra);
  if (opened)
    cuv__device_unref(opened); /* the submission holds the device now (or nothing runs) */
  if (rc < 0) {
    cuv_op_destroy(op);
    return rc;
  }
  ex->sub->devices |= op->devices;
  ex->stream = stream;
  ex->policy = policy;
  ex->landing = false;
  CUV__STAT_ADD(submitted, 1);
  return 0;
}

void cuv__exec_run(cuv_op_t *op, cuv__exec_t *ex) {
  int rc = cuv__bind(ex->stream->dev);
  if (rc < 0) {
    cuv__op_drop(op);
    ex->sub->status = rc;
    return;
  }
  ex->sub->status = cuv__op_execute(op, ex, &ex->sub->output);
}

/* A blocking executor's job: the op and its open submission. */
typedef struct exec_job {
  cuv__job_t job;
  cuv_op_t *op;
  cuv__exec_t *ex;
} exec_job_t;

static void exec_job_run(cuv__job_t *job, bool queued) {
  (void)queued;
  cuv__exec_run(((exec_job_t *)job)->op, ((exec_job_t *)job)->ex);
}

static void exec_job_describe(cuv__job_t *job, cuv__touches_t *touches) {
  cuv__op_touches(((exec_job_t *)job)->op, touches);
}

void cuv__exec_run_blocking(cuv_op_t *op, cuv__exec_t *ex) {
  exec_job_t j = {.job = {.run = exec_job_run,
                          .describe = exec_job_describe,
                          .stream = ex->stream,
                          .devices = ex->sub->devices},
                  .op = op,
                  .ex = ex};
  int rc = cuv__engine_prepare(&j.job);
  if (rc < 0) {
    cuv__op_drop(op);
    ex->sub->status = rc;
    return;
  }
  cuv__engine_run_blocking(&j.job);
}

/* Hands the output over (or releases it) and finishes the submission. */
static int exec_deliver(cuv__submission_t *sub, int status, cuv_output_t *out) {
  if (status == 0 && out)
    *out = cuv_output_take(&sub->output);
  cuv_output_release(&sub->output);
  cuv__sub_finish(sub, status);
  return status;
}

static int sync_run(cuv_op_t *op, cuv_policy_t *policy, cuv_stream_t *stream, cuv_output_t *out) {
  if (out)
    *out = (cuv_output_t){0};
  cuv__exec_t ex;
  int rc = cuv__exec_begin(op, policy, stream, 0, &ex);
  if (rc < 0)
    return rc;
  cuv__exec_run_blocking(op, &ex);
  /* Wait also after a failure midway: what was enqueued must finish before its resources go. */
  int wait = cuv__wait_sync(ex.sub);
  CUV__STAT_ADD(completed_sync, 1);
  int status = ex.sub->status < 0 ? ex.sub->status : cuv__sub_verdict(ex.sub, wait);
  if (cuv_status_is_fault(wait))
    status = wait;
  return exec_deliver(ex.sub, status, out);
}

CUV_EXTERN int cuv_sync(cuv_op_t *op, cuv_output_t *out) { return sync_run(op, NULL, NULL, out); }

CUV_EXTERN int cuv_sync_policy(cuv_policy_t *policy, cuv_op_t *op, cuv_output_t *out) {
  if (!policy) {
    if (out)
      *out = (cuv_output_t){0}; /* cleared on every failure, as by the other executors */
    cuv_op_destroy(op);
    return CUV_EINVAL;
  }
  return sync_run(op, policy, NULL, out);
}

CUV_EXTERN int cuv_sync_on(cuv_stream_t *stream, cuv_op_t *op, cuv_output_t *out) {
  if (!stream) {
    if (out)
      *out = (cuv_output_t){0};
    cuv_op_destroy(op);
    return CUV_EINVAL;
  }
  return sync_run(op, NULL, stream, out);
}
