/* cuv_enqueue_on: the executor that leaves completion to the caller. The work is enqueued on the
 * caller's stream and its submission waits on the stream's detached list, behind an event, until a
 * later use of the stream (another enqueue, a synchronize, the stream's destruction) finds the
 * event complete and retires it: the reaping. The stream learns of the reaper through its `reap`
 * hook, set here, so stream.c (below) never calls up into this file. */
#include "internal.h"
#include "enqueue.h"
#include "exec.h"

CUV_EXTERN int cuv_enqueue_on(cuv_stream_t *stream, cuv_op_t *op, cuv_output_t *out) {
  if (out)
    *out = (cuv_output_t){0};
  if (!stream) {
    cuv_op_destroy(op);
    return CUV_EINVAL;
  }
  cuv__enqueue_reap(stream);
  cuv__exec_t ex;
  int rc = cuv__exec_begin(op, NULL, stream, 0, &ex);
  if (rc < 0)
    return rc;
  cuv__exec_run_blocking(op, &ex);
  int status = ex.sub->status;
  /* Recorded before the output is handed out: a failed record fails the call, which then leaves
   * no output (fuzz/regressions/api: an output with CUDA_ERROR_INVALID_HANDLE returned). */
  int record = cuv__sub_record(ex.sub);
  if (status == 0 && record == 0 && out)
    *out = cuv_output_take(&ex.sub->output);
  cuv_output_release(&ex.sub->output);
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
  stream->reap = cuv__enqueue_reap;
  pthread_mutex_unlock(&stream->lock);
  return status;
}

void cuv__enqueue_reap(cuv_stream_t *stream) {
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
