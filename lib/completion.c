/* Learning that GPU work finished, by the first of these paths to see it:
 * 1. inline spin on the submitting thread for the spin budget (cuv_config_t.spin_budget_us; plain
 *    loads of the stream's timeline word, so no driver call while spinning);
 * 2. the timeline reactor (reactor.c), which the submission joins when the spin did not see it;
 * 3. a host function (cuLaunchHostFunc, or with host_sync's mode cuLaunchHostFunc_v2: host_task.c)
 *    when the stream's word cannot be written (a driver or device without stream memory
 *    operations), or always with cuv_config_t.host_sync spin or block. The host function only
 *    marks and notifies.
 * Whichever path sees the end first claims the submission; it is delivered to its queue once.
 * The blocking executors use an event instead (spin on it, then block), or with host_sync a host
 * function whose mark they spin on (spin) or sleep on (block). */
#include <time.h>

#include "internal.h"
#include "completion.h"
#include "host_task.h"
#include "queue.h"
#include "reactor.h"

#define GATE_POLL_NS 100000L /* 0.1 ms: gates wait for slow things (NCCL's init) */
#define PROBE_NS 2000000ull /* a waiter asks the driver about faults this often, as the reactor */
/* A waiter that may not block in the driver sleeps between looks as the reactor backs off
 * (lib/reactor.c): up to 1/NAP_SHARE of how long it has waited, between the floor and the
 * ceiling. */
#define NAP_FLOOR_NS 20000ull
#define NAP_CEIL_NS 2000000ull
#define NAP_SHARE 64u

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

/* The sticky fault of a stream of another device that the submission's work waits for
 * (sub->across), else CUDA_SUCCESS. Returns with `current`'s context bound. */
static CUresult across_fault(cuv__submission_t *sub, cuv_device_t *current) {
  CUresult fault = CUDA_SUCCESS;
  for (unsigned i = 0; i < sub->n_across && fault == CUDA_SUCCESS; i++) {
    cuv_stream_t *other = sub->across[i];
    CUresult r = cuv__bind(other->dev) < 0 ? CUDA_SUCCESS : cuv__drv.cuStreamQuery(other->cu);
    fault = cuv_status_is_fault(cuv__cu(r)) ? r : CUDA_SUCCESS;
  }
  if (sub->n_across)
    cuv__bind(current);
  return fault;
}

/* The sticky fault of `stream` (one of the submission's) or of a stream its work waits for, else
 * 0: running, done, or a transient error, which proves nothing. */
static int sub_fault(cuv__submission_t *sub, cuv_stream_t *stream) {
  int status = cuv__cu(cuv__drv.cuStreamQuery(stream->cu));
  return cuv_status_is_fault(status) ? status : cuv__cu(across_fault(sub, stream->dev));
}

/* Spins on the stream's word for the budget. True when the submission was completed here: the
 * word reached its number, or (checked once when the budget ran out) its stream reports a fault,
 * or a stream of another device that its work waits for does (checked then too, and every probe
 * period of a long budget: such a fault is this submission's only sign). The submission is not in
 * its stream's pending list while it spins (it joins it only when this fails), so the reactor
 * never sees it and is not woken for it. */
static bool inline_spin(cuv__submission_t *sub) {
  uint64_t now = cuv__now_ns(), probe_at = now + PROBE_NS;
  uint64_t deadline = now + (uint64_t)cuv__config.spin_budget_us * 1000u;
  int across = 0;
  do {
    if (cuv__reactor_landed(sub->stream, &sub->tl)) {
      cuv__complete(sub, 0, CUV__PATH_SPIN);
      return true;
    }
    now = cuv__now_ns();
    if (now >= probe_at || now >= deadline) {
      across = cuv__cu(across_fault(sub, sub->stream->dev));
      probe_at = now + PROBE_NS;
    }
  } while (across == 0 && now < deadline);
  int status = cuv__cu(cuv__drv.cuStreamQuery(sub->stream->cu));
  if (!cuv_status_is_fault(status))
    status = across;
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
  sub->watch = (cuv__watch_t){.stream = sub->stream,
                              .fn = reactor_fired,
                              .token = sub,
                              .also = sub->across,
                              .n_also = sub->n_across};
  cuv__reactor_watch(&sub->watch); /* before the launch: the function may run at once */
  CUresult r = cuv__launch_host_func(sub->stream->cu, hostfn_done, sub);
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
    sub->tl.also = sub->across;
    sub->tl.n_also = sub->n_across;
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

static void sleep_ns(uint64_t ns) {
  struct timespec t = {0, (long)ns};
  nanosleep(&t, NULL);
}

/* The next sleep between two looks, `waited` ns into a wait that slept `nap` last. */
static uint64_t next_nap(uint64_t nap, uint64_t waited) {
  uint64_t limit = waited / NAP_SHARE;
  limit = limit < NAP_FLOOR_NS ? NAP_FLOOR_NS : limit > NAP_CEIL_NS ? NAP_CEIL_NS : limit;
  return nap ? (nap * 2 > limit ? limit : nap * 2) : 1000;
}

/* Until `event` (else `stream`) is done, as a synchronize call would: its answer, other than
 * CUDA_ERROR_NOT_READY, or the fault of a stream of another device that the submission's work
 * waits for (sub->across). For submissions with such streams, in place of the synchronize: that
 * work may never be done when the other device's context dies (a wait for an event of a dead
 * context never ends: sim/event.c), so it is looked at, not waited for in the driver, and those
 * streams are asked every probe period. `stream`'s context is current again on return. */
static CUresult wait_watching(cuv__submission_t *sub, CUevent event, cuv_stream_t *stream) {
  uint64_t start = cuv__now_ns(), probe_at = start + PROBE_NS, nap = 0;
  for (;;) {
    CUresult r = event ? cuv__drv.cuEventQuery(event) : cuv__drv.cuStreamQuery(stream->cu);
    if (r != CUDA_ERROR_NOT_READY)
      return r;
    uint64_t now = cuv__now_ns();
    if (now >= probe_at) {
      CUresult fault = across_fault(sub, stream->dev);
      if (fault != CUDA_SUCCESS)
        return fault;
      probe_at = now + PROBE_NS;
    }
    nap = next_nap(nap, now - start);
    sleep_ns(nap);
  }
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

/* LeakSanitizer's, present only in sanitized builds: a leak made on purpose is not a finding. */
extern void __lsan_ignore_object(const void *p) __attribute__((weak));

/* Returns 1 when the host function could not be enqueued (the caller uses an event instead). The
 * mark lives on the heap: after a fault it is left to the dead context, which may still run host
 * functions queued before the fault (seen on the GPU), so it is never freed under one. */
static int wait_host_function(cuv__submission_t *sub) {
  host_mark_t *mark = calloc(1, sizeof *mark);
  if (!mark)
    return 1;
  pthread_mutex_init(&mark->lock, NULL);
  pthread_cond_init(&mark->cond, NULL);
  int rc = 1;
  if (cuv__launch_host_func(sub->stream->cu, host_mark_set, mark) == CUDA_SUCCESS) {
    bool spin = cuv__config.host_sync == CUV_HOST_SYNC_SPIN;
    for (rc = 0; rc == 0 && !wait_mark(mark, spin);)
      rc = sub_fault(sub, sub->stream); /* then the mark may never be set */
  }
  if (rc < 0) {
    if (__lsan_ignore_object)
      __lsan_ignore_object(mark);
    return rc;
  }
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
    if (r == CUDA_ERROR_NOT_READY && sub->n_across)
      r = wait_watching(sub, sub->done_event, sub->stream);
    if (r == CUDA_ERROR_NOT_READY)
      r = cuv__drv.cuEventSynchronize(sub->done_event);
    rc = cuv__cu(r);
  }
  /* No event to be had, or it failed to tell (a transient error proves nothing, and what the work
   * holds goes when this returns): the whole stream is the proof. A fault is final. */
  if (rc < 0 && !cuv_status_is_fault(rc))
    rc = cuv__cu(sub->n_across ? wait_watching(sub, NULL, sub->stream)
                               : cuv__drv.cuStreamSynchronize(sub->stream->cu));
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
  if (r == CUDA_ERROR_NOT_READY && sub->n_across)
    r = wait_watching(sub, event, stream);
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

