/* Learning that GPU work finished, by the first of these paths to see it:
 * 1. inline spin on the submitting thread for the spin budget (cuv_config_t.spin_budget_us; plain
 *    loads of the stream's timeline word, so no driver call while spinning);
 * 2. the timeline reactor (reactor.c), which the submission joins when the spin did not see it;
 * 3. a host function (cuLaunchHostFunc) when the stream's word cannot be written (a driver or
 *    device without stream memory operations), or always with cuv_config_t.host_sync spin or
 *    block. The host function only marks and notifies.
 * Whichever path sees the end first claims the submission; it is delivered to its queue once.
 * The blocking executors use an event instead (spin on it, then block), or with host_sync a host
 * function whose mark they spin on (spin) or sleep on (block). */
#include <time.h>

#include "internal.h"
#include "completion.h"
#include "queue.h"
#include "reactor.h"

#define GATE_POLL_NS 100000L /* 0.1 ms: gates wait for slow things (NCCL's init) */

/* The last of the submission's ends delivers it, with the late status known by then. */
static void deliver_at_last(cuv__submission_t *sub) {
  if (!cuv__sub_gate_pass(sub))
    return;
  if (sub->status == 0)
    sub->status = cuv__sub_verdict(sub, 0);
  cuv__queue_push(sub->queue, sub);
}

void cuv__complete_gate_open(cuv__submission_t *sub) { deliver_at_last(sub); }

void cuv__complete(cuv__submission_t *sub, int status, enum cuv__path path) {
  bool unclaimed = false;
  if (!atomic_compare_exchange_strong(&sub->claimed, &unclaimed, true))
    return;
  if (sub->status == 0 && status < 0)
    sub->status = status;
  sub->path = path;
  switch (path) {
  case CUV__PATH_SPIN: CUV__STAT_ADD(completed_spin, 1); break;
  case CUV__PATH_REACTOR: CUV__STAT_ADD(completed_reactor, 1); break;
  case CUV__PATH_HOSTFN: CUV__STAT_ADD(completed_hostfn, 1); break;
  case CUV__PATH_SYNC: CUV__STAT_ADD(completed_sync, 1); break;
  default: break;
  }
  deliver_at_last(sub);
}

/* Spins on the stream's word for the budget. True when the submission was completed here: the
 * word reached its number, or (checked once when the budget ran out) its stream reports a fault.
 * The submission is not in its stream's pending list while it spins (it joins it only when this
 * fails), so the reactor never sees it and is not woken for it. */
static bool inline_spin(cuv__submission_t *sub) {
  uint64_t deadline = cuv__now_ns() + (uint64_t)cuv__config.spin_budget_us * 1000u;
  do {
    if (cuv__reactor_landed(sub->stream, &sub->tl)) {
      cuv__complete(sub, 0, CUV__PATH_SPIN);
      return true;
    }
  } while (cuv__now_ns() < deadline);
  int status = cuv__cu(cuv__drv.cuStreamQuery(sub->stream->cu));
  if (!cuv_status_is_fault(status))
    return false; /* running, just done, or a transient error (which proves nothing) */
  /* A fault: the word will never reach the number, and writes of the stream may still land. */
  cuv__reactor_faulted(sub->stream);
  cuv__complete(sub, status, CUV__PATH_SPIN);
  return true;
}

/* The reactor's firing: the stream's word reached the submission's number, or it faulted. */
static void reactor_fired(void *sub, int status) { cuv__complete(sub, status, CUV__PATH_REACTOR); }

static void CUDA_CB hostfn_done(void *arg) {
  cuv__submission_t *sub = arg;
  cuv__reactor_unwatch(&sub->watch);
  cuv__complete(sub, 0, CUV__PATH_HOSTFN);
}

static void arm_hostfn(cuv__submission_t *sub) {
  sub->watch = (cuv__watch_t){.stream = sub->stream, .fn = reactor_fired, .token = sub};
  cuv__reactor_watch(&sub->watch); /* before the launch: the function may run at once */
  CUresult r = cuv__drv.cuLaunchHostFunc(sub->stream->cu, hostfn_done, sub);
  if (r == CUDA_SUCCESS)
    return;
  cuv__reactor_unwatch(&sub->watch);
  /* Nothing can tell us when the work ends: the last resort is to wait for the whole stream. */
  int status = cuv_status_is_fault(cuv__cu(r))
                   ? cuv__cu(r)
                   : cuv__cu(cuv__drv.cuStreamSynchronize(sub->stream->cu));
  cuv__complete(sub, status, CUV__PATH_SYNC);
}

/* Safe from any number of threads at once, on one stream or several: the timeline numbers the
 * submissions of a stream under its lock (reactor.c). Submissions armed without the spin are fired
 * in their stream's order; one that spins completes when its thread sees its number, possibly
 * ahead of older ones of its stream still waiting for the reactor, and joins the reactor only
 * when the spin did not see it. */
void cuv__arm(cuv__submission_t *sub, bool may_spin) {
  if (cuv__config.host_sync == CUV_HOST_SYNC_OFF) {
    bool spin = may_spin && cuv__config.spin_budget_us;
    sub->tl.fn = reactor_fired;
    sub->tl.token = sub;
    int rc = cuv__reactor_arm(sub->stream, &sub->tl, !spin);
    if (rc == 0) {
      if (spin && !inline_spin(sub))
        cuv__reactor_register(sub->stream, &sub->tl);
      return;
    }
    if (cuv_status_is_fault(rc)) {
      cuv__complete(sub, rc, CUV__PATH_SYNC);
      return;
    }
    CUV__STAT_ADD(fallbacks, 1); /* the word's write failed: no stream memory operations */
  }
  arm_hostfn(sub);
}

/* Spins on the event for up to budget_us; CUDA_ERROR_NOT_READY when the budget ran out. */
static CUresult spin_event(CUevent event, unsigned budget_us) {
  uint64_t deadline = cuv__now_ns() + (uint64_t)budget_us * 1000u;
  CUresult r;
  do
    r = cuv__drv.cuEventQuery(event);
  while (r == CUDA_ERROR_NOT_READY && cuv__now_ns() < deadline);
  return r;
}

/* A blocking wait through a host function (CUV_HOST_SYNC=spin|block): the function only
 * marks (and, for block, signals); the waiter spins on the mark or sleeps on the condition. A
 * dead context never runs host functions, so a waiter also asks the stream every ~2 ms. */
typedef struct host_mark {
  atomic_bool done;
  pthread_mutex_t lock;
  pthread_cond_t cond;
} host_mark_t;

static void CUDA_CB host_mark_set(void *arg) {
  host_mark_t *mark = arg;
  pthread_mutex_lock(&mark->lock);
  atomic_store_explicit(&mark->done, true, memory_order_release);
  pthread_cond_signal(&mark->cond);
  pthread_mutex_unlock(&mark->lock);
}

/* Waits up to ~2 ms for the mark, spinning or sleeping; true when it is set. */
static bool wait_mark(host_mark_t *mark, bool spin) {
  uint64_t deadline = cuv__now_ns() + 2000000u;
  if (spin) {
    while (!atomic_load_explicit(&mark->done, memory_order_acquire) && cuv__now_ns() < deadline)
      ;
    return atomic_load_explicit(&mark->done, memory_order_acquire);
  }
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_nsec += 2000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&mark->lock);
  while (!atomic_load(&mark->done) && pthread_cond_timedwait(&mark->cond, &mark->lock, &until) == 0)
    ;
  pthread_mutex_unlock(&mark->lock);
  return atomic_load_explicit(&mark->done, memory_order_acquire);
}

/* Returns 1 when the host function could not be enqueued (the caller uses an event instead). The
 * mark lives on the heap: after a fault it is left to the dead context, which may still run host
 * functions queued before the fault (seen on the H200), so it is never freed under one. */
static int wait_host_function(cuv__submission_t *sub) {
  host_mark_t *mark = calloc(1, sizeof *mark);
  if (!mark)
    return 1;
  pthread_mutex_init(&mark->lock, NULL);
  pthread_cond_init(&mark->cond, NULL);
  int rc = 1;
  if (cuv__drv.cuLaunchHostFunc(sub->stream->cu, host_mark_set, mark) == CUDA_SUCCESS) {
    bool spin = cuv__config.host_sync == CUV_HOST_SYNC_SPIN;
    for (rc = 0; rc == 0 && !wait_mark(mark, spin);) {
      int status = cuv__cu(cuv__drv.cuStreamQuery(sub->stream->cu));
      if (cuv_status_is_fault(status))
        rc = status; /* the mark may never be set (a transient error proves nothing) */
    }
  }
  if (rc < 0)
    return rc;
  /* The function may still be inside its unlock after setting the mark: take the lock once so it
   * has left before the mark goes. */
  pthread_mutex_lock(&mark->lock);
  pthread_mutex_unlock(&mark->lock);
  pthread_cond_destroy(&mark->cond);
  pthread_mutex_destroy(&mark->lock);
  free(mark);
  return rc;
}

int cuv__wait_sync(cuv__submission_t *sub) {
  if (cuv__config.host_sync != CUV_HOST_SYNC_OFF) {
    int rc = wait_host_function(sub);
    if (rc <= 0)
      return rc;
  }
  int rc = cuv__sub_record(sub);
  if (rc == 0) {
    CUresult r = CUDA_ERROR_NOT_READY;
    if (cuv__config.spin_budget_us)
      r = spin_event(sub->done_event, cuv__config.spin_budget_us);
    if (r == CUDA_ERROR_NOT_READY)
      r = cuv__drv.cuEventSynchronize(sub->done_event);
    rc = cuv__cu(r);
  }
  /* No event to be had, or it failed to tell (a transient error proves nothing, and what the work
   * holds goes when this returns): the whole stream is the proof. A fault is final. */
  if (rc < 0 && !cuv_status_is_fault(rc))
    rc = cuv__cu(cuv__drv.cuStreamSynchronize(sub->stream->cu));
  return rc;
}

int cuv__wait_point(cuv__submission_t *sub, cuv_stream_t *stream) {
  CUevent event;
  int rc = cuv__event_get(stream->dev, &event);
  if (rc < 0)
    return rc;
  CUresult r = cuv__drv.cuEventRecord(event, stream->cu);
  if (r == CUDA_SUCCESS) /* without a spin budget, straight to the blocking wait */
    r = cuv__config.spin_budget_us ? spin_event(event, cuv__config.spin_budget_us)
                                   : CUDA_ERROR_NOT_READY;
  if (r == CUDA_ERROR_NOT_READY)
    r = cuv__drv.cuEventSynchronize(event);
  cuv__event_put(stream->dev, event);
  /* What came before also includes the ends the submission's gates wait for (a communicator's
   * creation: its callback's communicator is ready). */
  struct timespec pause = {0, GATE_POLL_NS};
  while (r == CUDA_SUCCESS && cuv__sub_gated(sub))
    nanosleep(&pause, NULL);
  return cuv__cu(r);
}

CUV_EXTERN int cuv_poll(void) { return (int)cuv__reactor_poll(); }
