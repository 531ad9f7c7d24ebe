/* Work on other streams than the executing one inside one submission: fork branches, and the
 * parts of a tree that belong to another device than the executing stream's. Each part runs on a
 * stream of its own that first waits for what the executing stream enqueued so far (it sees the
 * chain's earlier results), and the executing stream then waits for it, so the submission's
 * completion on its own stream proves the part complete and later ops see its results. Across
 * devices the events are recorded in one context and waited on in another, and each device's
 * calls are made with its own context current (lib/submission.c cuv__sub_order). The engine has
 * ordered the submission in every device's engine it touches before any of this runs
 * (lib/engine.c). */
#include "internal.h"
#include "cross.h"
#include "hazard.h"
#include "policy.h"

static void device_release(void *dev) { cuv__device_unref(dev); }

/* The device is held before the stream that the fork point holds: a stream of a device's
 * default policy does not hold its device, and holds go in reverse order. */
int cuv__cross_stream(cuv__exec_t *ex, int ordinal, cuv_stream_t **stream) {
  if (!(ex->sub->devices & CUV__DEVICE_BIT(ordinal)))
    return CUV_EDEVICE;
  /* A capture runs outside the engines (graph.c): another device's pooled streams may be taking
   * other submissions' work meanwhile, which the capture would swallow. */
  if (cuv__hazard_capturing(ex->sub))
    return CUV_ENOTSUP;
  cuv_device_t *dev;
  int rc = cuv__device_get(&dev, ordinal);
  if (rc < 0)
    return rc;
  rc = cuv__policy_stream_on(ex->policy, dev, stream);
  if (rc == 0)
    rc = cuv__sub_hold(ex->sub, device_release, dev);
  if (rc < 0)
    cuv__device_unref(dev);
  return rc;
}

int cuv__cross_fork(cuv__exec_t *ex, cuv_stream_t *stream) {
  if (stream == ex->stream)
    return 0;
  int rc = cuv__sub_use_stream(ex->sub, stream);
  if (rc == 0)
    rc = cuv__sub_order(ex->sub, ex->stream, stream);
  if (stream->dev != ex->stream->dev) {
    int bound = cuv__bind(ex->stream->dev);
    rc = rc < 0 ? rc : bound;
  }
  return rc;
}

int cuv__cross_run(cuv__exec_t *ex, cuv_stream_t *stream, cuv_op_t *op, cuv_output_t *out) {
  if (stream == ex->stream)
    return cuv__op_execute(op, ex, out);
  bool across = stream->dev != ex->stream->dev;
  int rc = across ? cuv__bind(stream->dev) : 0;
  if (rc < 0) {
    *out = (cuv_output_t){0};
    cuv__op_drop(op);
    return rc;
  }
  cuv__exec_t branch = {ex->sub, stream, ex->policy, false};
  rc = cuv__op_execute(op, &branch, out);
  ex->landing = ex->landing || branch.landing; /* the join orders it before what follows */
  int bound = across ? cuv__bind(ex->stream->dev) : 0;
  if (rc == 0 && bound < 0) {
    cuv_output_release(out);
    rc = bound;
  }
  return rc;
}

/* Without the join, completion on the executing stream proves nothing about this stream's work:
 * it is waited for here, or the submission would release what that work still uses. */
int cuv__cross_join(cuv__exec_t *ex, cuv_stream_t *stream) {
  if (stream == ex->stream)
    return 0;
  int join = cuv__sub_order(ex->sub, stream, ex->stream);
  if (join < 0) {
    bool across = stream->dev != ex->stream->dev;
    int wait = across ? cuv__bind(stream->dev) : 0;
    if (wait == 0)
      wait = cuv__cu(cuv__drv.cuStreamSynchronize(stream->cu));
    if (across)
      cuv__bind(ex->stream->dev);
    if (cuv_status_is_fault(wait))
      join = wait;
  }
  return join;
}

int cuv__run(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out) {
  if (!op || op->error || op->device < 0 || op->device == ex->stream->dev->ordinal)
    return cuv__op_execute(op, ex, out);
  cuv_stream_t *stream;
  int rc = cuv__cross_stream(ex, op->device, &stream);
  if (rc == 0)
    rc = cuv__cross_fork(ex, stream);
  if (rc < 0) {
    /* A failed fork point leaves at most a wait on the stream, which ends when the executing
     * stream gets there. */
    *out = (cuv_output_t){0};
    cuv__op_drop(op);
    return rc;
  }
  rc = cuv__cross_run(ex, stream, op, out);
  int join = cuv__cross_join(ex, stream);
  if (rc == 0 && join < 0)
    cuv_output_release(out);
  return rc < 0 ? rc : join;
}
