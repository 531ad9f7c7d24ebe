/* cuv_submit: the asynchronous executor. The op is scheduled and its submission opened and
 * accepted by the queue on the calling thread (so a refusal is returned at once), then its driver
 * calls are handed to the engine as a job: made by a submitter thread, or here when the engine is
 * idle (engine.c). The job enqueues the tree and arms its completion (completion.c), which is
 * delivered to the caller's queue, where cuv_queue_drain runs the callback exactly once. Errors
 * found while enqueueing reach that callback, as for any failure after acceptance. */
#include "internal.h"
#include "completion.h"
#include "queue.h"

typedef struct submit_job {
  cuv__job_t job;
  cuv_op_t *op;
  cuv__exec_t ex;
  bool may_spin;
} submit_job_t;

/* How long this thread's last enqueueing of its own took (the driver calls of the last job it
 * ran itself, without any spin; at most COST_CAP_NS: a call stalled for milliseconds, or traced,
 * says nothing about the next), and when its last submission without a spin returned. */
#define COST_CAP_NS 50000u
static _Thread_local uint64_t inline_cost_ns, nospin_end_ns;

/* Enqueues and arms. A failure midway still arms: what was enqueued must finish before its
 * resources go, and the callback then reports the execution's error. Only the submitting thread
 * spins: a submitter thread has other jobs to run. */
static void submit_job_run(cuv__job_t *job, bool queued) {
  submit_job_t *s = (submit_job_t *)job;
  cuv_trace_t *trace = s->ex.sub->trace;
  uint64_t start = queued && !trace ? 0 : cuv__now_ns();
  if (trace) {
    trace->started_ns = start;
    trace->ran_here = !queued;
  }
  cuv__exec_run(s->op, &s->ex);
  uint64_t end = queued && !trace ? 0 : cuv__now_ns();
  if (!queued) {
    uint64_t took = end - start;
    inline_cost_ns = took < COST_CAP_NS ? took : COST_CAP_NS;
  }
  if (trace)
    trace->enqueued_ns = end; /* before the arm: from then on the callback may run */
  cuv__arm(s->ex.sub, s->may_spin && !queued);
}

/* A thread that does not spin (a loop), with another submission of its queue in flight, and
 * that spent less time outside cuv since its previous submission returned than its own
 * enqueueing of a job takes, hands the job over: made here, its driver calls would take over
 * half its time. Measured against its own last one, not a fixed time, so a slow thread (a
 * sanitizer's) and a fast one judge alike. A submission alone in its queue runs here whatever
 * the times: its thread waited for the previous one to finish (a latency-bound loop), and a
 * GPU faster than the driver's calls made that wait shorter than an enqueueing (cuv-bench-
 * latency on the GPU: the bridge's p50 went from 1.10x to 1.66x a raw launch and sync). */
static bool busy_without_spin(const submit_job_t *s, unsigned pending, uint64_t now) {
  return !s->may_spin && pending > 1 && now - nospin_end_ns < inline_cost_ns;
}

static void submit_job_describe(cuv__job_t *job, cuv__touches_t *touches) {
  cuv__op_touches(((submit_job_t *)job)->op, touches);
}

/* The job lives in its submission's block (cuv__sub_extra), which it keeps while the engine has
 * it: the submission may retire first, its completion delivered before the engine's last touch. */
static void submit_job_release(cuv__job_t *job) {
  cuv__sub_extra_done(((submit_job_t *)job)->ex.sub);
}

/* Hands the job to the engine, or runs it here when there is none (or it cannot start). A job
 * that may wait for the GPU never runs here while an engine can take it, nor does one whose queue
 * has more than INLINE_PENDING_MAX submissions in flight: its owner (a loop thread) is busy with
 * many, and running jobs itself made it the bottleneck again (bench/RESULTS.md: tcp-infer, one
 * loop, 64 connections: 0.55x the thread pool, 0.76x without). Nor does one of a thread that
 * submits without spinning faster than its own enqueueing could keep up with (busy_without_spin:
 * a loop under load, with few in flight only because it is slow to read its requests). A few in
 * flight, as a batching loop has, still run here: the loops' calls then go in parallel (four
 * batching loops: 3.3x). */
#define INLINE_PENDING_MAX 4u
static void submit_job_start(submit_job_t *s, cuv_queue_t *queue) {
  bool spins = s->may_spin; /* s may be gone once the engine has it */
  unsigned pending = atomic_load(&queue->pending); /* this one included */
  bool may_inline = !s->job.may_wait && pending <= INLINE_PENDING_MAX;
  uint64_t now = cuv__now_ns(); /* the engine's too: one read */
  bool busy = busy_without_spin(s, pending, now);
  cuv__submission_t *sub = s->ex.sub;
  cuv__sub_extra_keep(sub); /* the job's, until its release (or its run here) */
  if (!cuv__engine_enabled() || cuv__engine_submit(&s->job, may_inline, busy, now) != 0) {
    CUV__STAT_ADD(engine_inline, 1);
    submit_job_run(&s->job, false);
    cuv__sub_extra_done(sub);
  }
  if (!spins)
    nospin_end_ns = cuv__now_ns();
}

CUV_EXTERN int cuv_submit(cuv_queue_t *queue, cuv_op_t *op, cuv_done_fn done, void *arg,
                          const cuv_submit_opts_t *opts) {
  if (!queue || !done) {
    cuv_op_destroy(op);
    return CUV_EINVAL;
  }
  if (opts && opts->trace)
    *opts->trace = (cuv_trace_t){.submitted_ns = cuv__now_ns()};
  int rc = cuv__queue_enter(queue); /* counted: a closing owner waits for it */
  if (rc < 0) {
    cuv_op_destroy(op);
    return rc;
  }
  cuv_submit_opts_t defaults = {0};
  opts = opts ? opts : &defaults;
  cuv__exec_t ex;
  rc = cuv__exec_begin(op, opts->policy, opts->stream, sizeof(submit_job_t), &ex);
  if (rc < 0) {
    cuv__queue_leave(queue);
    return rc;
  }
  cuv__submission_t *sub = ex.sub;
  submit_job_t *s = cuv__sub_extra(sub); /* one block: the submission, then its job */
  s->ex = ex;
  /* The job's own fields, one by one: the engine's (its touches, links and followers) are set
   * as it takes the job (engine.c, enter), and clearing the whole job was some 40 instructions
   * of each submission (bench/RESULTS.md, cuv-bench-submit). */
  s->job.run = submit_job_run;
  s->job.describe = submit_job_describe;
  s->job.release = submit_job_release;
  s->job.stream = s->ex.stream;
  s->job.devices = sub->devices;
  s->job.may_wait = (op->host & CUV__OP_WAITS) != 0;
  s->job.stand_in = false;
  if ((rc = cuv__engine_prepare(&s->job)) < 0) {
    cuv__op_drop(op); /* nothing was enqueued: refused like a submission without memory */
    cuv__sub_retire(sub); /* its job too */
    cuv__queue_leave(queue);
    return rc;
  }
  sub->queue = queue;
  sub->done = done;
  sub->done_arg = arg;
  if (opts->trace) {
    sub->trace = &sub->trace_data;
    sub->trace_out = opts->trace;
    sub->trace_data = (cuv_trace_t){.submitted_ns = opts->trace->submitted_ns};
  }
  cuv__queue_accept(queue, sub, opts->ticket != NULL);
  if (opts->ticket)
    *opts->ticket = sub->ticket;
  s->op = op;
  s->may_spin = !(opts->flags & CUV_SUBMIT_NO_SPIN);
  submit_job_start(s, queue);
  return 0;
}
