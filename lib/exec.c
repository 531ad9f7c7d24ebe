/* Executors. Each one schedules the op (a given stream, or a policy's pick), enqueues the tree
 * with a submission that holds what it touches, and then differs only in how completion is
 * learned: waited for here (sync, sync_on), left to an event (enqueue_on), or armed for a queue
 * (submit, in submit.c). */
#include "internal.h"
#include "exec.h"

/* The stream an op runs on: the given one, else the policy's (the op device's default policy
 * when none is given). Opening that device may create it (no cuv_device_t open yet): *opened then
 * holds the reference that keeps it, its default policy and the stream alive until the
 * submission holds its own (cuv__sub_create). */
static int pick_stream(cuv_op_t *op, cuv_policy_t **policy, cuv_stream_t **stream,
                       cuv_device_t **opened) {
  if (*stream) {
    if (!*policy)
      return cuv_device_policy((*stream)->dev, policy);
    return 0;
  }
  if (!*policy) {
    int rc = cuv__device_get(opened, op->device < 0 ? 0 : op->device);
    if (rc < 0)
      return rc;
    rc = cuv_device_policy(*opened, policy);
    if (rc < 0)
      return rc;
  }
  return cuv_policy_next_stream(*policy, op, stream);
}

int cuv__exec_begin(cuv_op_t *op, cuv_policy_t *policy, cuv_stream_t *stream, cuv__exec_t *ex) {
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
  if (rc == 0 && cuv__stale(stream->dev, stream->epoch))
    rc = CUV_ELOST;
  if (rc == 0)
    rc = cuv__bind(stream->dev);
  if (rc == 0)
    rc = cuv__sub_create(&ex->sub, stream);
  cuv__device_unref(opened); /* the submission holds the device now (or nothing runs) */
  if (rc < 0) {
    cuv_op_free(op);
    return rc;
  }
  ex->stream = stream;
  ex->policy = policy;
  CUV__STAT_ADD(submitted, 1);
  return 0;
}

/* Enqueues the tree; the output lands in ex->sub->output, the status in ex->sub->status. */
static void exec_run(cuv_op_t *op, cuv__exec_t *ex) {
  ex->sub->status = cuv__op_execute(op, ex, &ex->sub->output);
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
  int rc = cuv__exec_begin(op, policy, stream, &ex);
  if (rc < 0)
    return rc;
  exec_run(op, &ex);
  /* Wait also after a failure midway: what was enqueued must finish before its resources go. */
  int wait = cuv__wait_sync(ex.sub);
  CUV__STAT_ADD(completed_sync, 1);
  int status = ex.sub->status < 0 ? ex.sub->status : wait;
  if (cuv_status_is_fault(wait))
    status = wait;
  return exec_deliver(ex.sub, status, out);
}

CUV_EXTERN int cuv_sync(cuv_op_t *op, cuv_output_t *out) { return sync_run(op, NULL, NULL, out); }

CUV_EXTERN int cuv_sync_policy(cuv_op_t *op, cuv_policy_t *policy, cuv_output_t *out) {
  if (!policy) {
    if (out)
      *out = (cuv_output_t){0}; /* cleared on every failure, as by the other executors */
    cuv_op_free(op);
    return CUV_EINVAL;
  }
  return sync_run(op, policy, NULL, out);
}

CUV_EXTERN int cuv_sync_on(cuv_op_t *op, cuv_stream_t *stream, cuv_output_t *out) {
  if (!stream) {
    if (out)
      *out = (cuv_output_t){0};
    cuv_op_free(op);
    return CUV_EINVAL;
  }
  return sync_run(op, NULL, stream, out);
}

CUV_EXTERN int cuv_enqueue_on(cuv_op_t *op, cuv_stream_t *stream, cuv_output_t *out) {
  if (out)
    *out = (cuv_output_t){0};
  if (!stream) {
    cuv_op_free(op);
    return CUV_EINVAL;
  }
  cuv__stream_reap(stream);
  cuv__exec_t ex;
  int rc = cuv__exec_begin(op, NULL, stream, &ex);
  if (rc < 0)
    return rc;
  exec_run(op, &ex);
  int status = ex.sub->status;
  if (status == 0 && out)
    *out = cuv_output_take(&ex.sub->output);
  cuv_output_release(&ex.sub->output);
  int record = cuv__sub_record(ex.sub);
  if (record < 0) {
    /* No event, no proof: wait here rather than free what the GPU may use. */
    int wait = cuv__cu(cuv__drv.cuStreamSynchronize(stream->cu));
    CUV__STAT_ADD(completed_sync, 1);
    cuv__sub_finish(ex.sub, wait);
    return status < 0 ? status : record;
  }
  pthread_mutex_lock(&stream->lock);
  ex.sub->next = stream->detached;
  stream->detached = ex.sub;
  pthread_mutex_unlock(&stream->lock);
  return status;
}

void cuv__stream_reap(cuv_stream_t *stream) {
  pthread_mutex_lock(&stream->lock);
  cuv__submission_t *pending = stream->detached, *keep = NULL, *done = NULL;
  stream->detached = NULL;
  while (pending) {
    cuv__submission_t *sub = pending;
    pending = sub->next;
    sub->status = cuv__cu(cuv__drv.cuEventQuery(sub->done_event));
    /* Done, or faulted; not ready or a transient error (which proves nothing): kept. */
    bool settled = sub->status == 0 || cuv_status_is_fault(sub->status);
    cuv__submission_t **list = settled ? &done : &keep;
    sub->next = *list;
    *list = sub;
  }
  stream->detached = keep;
  pthread_mutex_unlock(&stream->lock);
  while (done) {
    cuv__submission_t *sub = done;
    done = sub->next;
    CUV__STAT_ADD(completed_event, 1);
    cuv__sub_finish(sub, sub->status);
  }
}
