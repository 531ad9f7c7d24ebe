/* The completion queue: the loop-agnostic delivery point. Completing threads push finished
 * submissions and notify the owner once per empty-to-non-empty transition (sends coalesce, as
 * with uv_async_send); the owner drains the whole queue on its own thread, where the callbacks
 * run and the submissions retire (retirement may call the driver, so it never happens on the
 * reactor or the driver's callback thread). The queue also does an owner's bookkeeping: it
 * counts submissions from the moment cuv_submit starts until their callback starts (so a closing
 * owner can wait for work not yet enqueued), and, once its owner polls it (cuv_queue_poll), times
 * them, sizing how long polling for them pays off. An owner
 * whose loop is not libuv waits on its descriptor (cuv_queue_fd), which the same lock keeps
 * readable exactly while there is something to deliver. */
#include <errno.h>
#include <time.h>

#include "internal.h"
#include "queue.h"

CUV_EXTERN int cuv_queue_create(cuv_queue_t **out, cuv_notify_fn notify, void *notify_arg) {
  if (!out)
    return CUV_EINVAL;
  cuv_queue_t *q = calloc(1, sizeof *q);
  if (!q)
    return CUV_ENOMEM;
  pthread_mutex_init(&q->lock, NULL);
  pthread_cond_init(&q->cond, NULL);
  q->tail = &q->head;
  q->cancels_tail = &q->cancels;
  q->notify = notify;
  q->notify_arg = notify_arg;
  q->readiness = CUV__QUEUE_FD_NONE; /* made at the first cuv_queue_fd: most owners never ask */
  *out = q;
  return 0;
}

void cuv__queue_leave(cuv_queue_t *q) {
  pthread_mutex_lock(&q->lock);
  if (atomic_fetch_sub(&q->pending, 1) == 1 && q->notify)
    q->notify(q, q->notify_arg);
  pthread_mutex_unlock(&q->lock);
}

/* How long polled work counts as young after its submission: the spin budget, or, when the
 * queue's recent polled work took longer but short enough to be caught by polling (1.5 times its
 * moving average, within uv_poll_max_us), that long. Work that ends inside the window reaches its
 * callback without the cross-thread wake of a sleeping owner; longer work is left to the reactor
 * thread rather than polled for in vain. Under the lock. */
static uint64_t poll_window(const cuv_queue_t *q) {
  uint64_t budget = (uint64_t)cuv__config.spin_budget_us * 1000u;
  uint64_t recent = atomic_load_explicit(&q->recent_ns, memory_order_relaxed);
  uint64_t typical = recent + recent / 2;
  return typical > budget && typical <= (uint64_t)cuv__config.uv_poll_max_us * 1000u ? typical
                                                                                      : budget;
}

/* A submission that asked for its ticket: found by cuv_cancel through the index, or, when the
 * index has no memory to grow, through the live list (which is then all cuv_cancel walks).
 * Under the lock. */
static void make_findable(cuv_queue_t *q, cuv__submission_t *sub) {
  sub->ticket = ++q->last_ticket;
  if (cuv__tickets_add(&q->tickets, sub->ticket, sub) == 0) {
    sub->indexed = true;
    return;
  }
  sub->live_prev = NULL;
  sub->live_next = q->live;
  if (q->live)
    q->live->live_prev = sub;
  q->live = sub;
  sub->in_live = true;
}

/* Only a submission that asked for its ticket takes the lock: every other one cuv_cancel never
 * finds (it cannot name it), so it needs no place there. Two concurrent accepts of a polled queue
 * may store young_until in either order: both windows are estimates. */
void cuv__queue_accept(cuv_queue_t *q, cuv__submission_t *sub, bool ticketed) {
  /* A spin budget of 0 turns polling off: nothing is young then. */
  bool timed = cuv__config.spin_budget_us && atomic_load_explicit(&q->polled, memory_order_relaxed);
  uint64_t now = timed ? cuv__now_ns() : 0;
  sub->submitted_ns = now;
  if (now)
    atomic_store_explicit(&q->young_until, now + poll_window(q), memory_order_relaxed);
  if (ticketed) {
    pthread_mutex_lock(&q->lock);
    make_findable(q, sub);
    pthread_mutex_unlock(&q->lock);
  }
}

/* From here on cuv_cancel does not find it. Under the lock. */
static void forget(cuv_queue_t *q, cuv__submission_t *sub) {
  if (sub->indexed) {
    sub->indexed = false;
    cuv__tickets_remove(&q->tickets, sub->ticket);
    return;
  }
  if (!sub->in_live)
    return;
  sub->in_live = false;
  if (sub->live_prev)
    sub->live_prev->live_next = sub->live_next;
  else
    q->live = sub->live_next;
  if (sub->live_next)
    sub->live_next->live_prev = sub->live_prev;
}

/* The submission cuv_cancel names, or NULL. Under the lock. */
static cuv__submission_t *find(const cuv_queue_t *q, cuv_ticket_t ticket) {
  cuv__submission_t *sub = cuv__tickets_find(&q->tickets, ticket);
  for (cuv__submission_t *at = q->live; !sub && at; at = at->live_next)
    if (at->ticket == ticket)
      sub = at;
  return sub;
}

/* Something to deliver appeared: the owner is told (notify, and its descriptor turns readable)
 * and waiters woken. The caller holds the lock and says whether the queue had nothing to deliver
 * before. */
static void announce(cuv_queue_t *q, bool was_empty) {
  cuv__queue_fd_mirror(&q->readiness, true); /* a system call only on was_empty */
  if (was_empty && q->notify)
    q->notify(q, q->notify_arg);
  if (q->waiters)
    pthread_cond_broadcast(&q->cond);
}

static bool nothing_to_deliver(const cuv_queue_t *q) { return !q->head && !q->cancels; }

/* A cancellation of running work, due at the next drain. Under the lock. */
static void cancel_due_locked(cuv_queue_t *q, cuv__submission_t *sub) {
  bool was_empty = nothing_to_deliver(q);
  sub->cancel_next = NULL;
  *q->cancels_tail = sub;
  q->cancels_tail = &sub->cancel_next;
  announce(q, was_empty);
}

/* ---- user callbacks of a cancelled submission ----
 * sub->calls counts the tree's user callbacks running now, with two flags. A cancel sets
 * CANCELLED, and DUE with it when none runs: its done is queued at once. Otherwise the last
 * callback to end sets DUE and queues it, so done never runs beside, or before the end of, a
 * callback that had started. A callback that would start after the cancel is refused (unless the
 * tree is producing a shared op's value, which other submissions wait for): done is the last of
 * the submission's callbacks, and a closure they share may be freed there. Without a cancel a
 * callback costs two uncontended read-modify-writes of its submission's word; a tree without
 * callbacks, nothing. */
#define CALLS_CANCELLED (1u << 31)
#define CALLS_DUE (1u << 30)
#define CALLS_RUNNING (CALLS_DUE - 1u)

int cuv__queue_call_begin(cuv__submission_t *sub) {
  unsigned s = atomic_load_explicit(&sub->calls, memory_order_relaxed);
  do {
    if ((s & CALLS_CANCELLED) && !sub->producing)
      return CUV_ECANCELED;
  } while (!atomic_compare_exchange_weak_explicit(&sub->calls, &s, s + 1, memory_order_acq_rel,
                                                  memory_order_relaxed));
  return 0;
}

void cuv__queue_call_end(cuv__submission_t *sub) {
  unsigned s = atomic_load_explicit(&sub->calls, memory_order_relaxed), n;
  do {
    n = s - 1;
    if (n == CALLS_CANCELLED) /* the last one out of a cancelled submission */
      n |= CALLS_DUE;
  } while (!atomic_compare_exchange_weak_explicit(&sub->calls, &s, n, memory_order_acq_rel,
                                                  memory_order_relaxed));
  if (!(n & ~s & CALLS_DUE))
    return;
  /* Its work cannot have finished: the tree is still being enqueued, and arms after this. */
  cuv_queue_t *q = sub->queue;
  pthread_mutex_lock(&q->lock);
  cancel_due_locked(q, sub);
  pthread_mutex_unlock(&q->lock);
}

/* Marks sub cancelled; true when no callback of it runs, so its done is due now. */
static bool calls_cancel(cuv__submission_t *sub) {
  unsigned s = atomic_load_explicit(&sub->calls, memory_order_relaxed), n;
  do {
    n = s | CALLS_CANCELLED;
    if (!(s & CALLS_RUNNING))
      n |= CALLS_DUE;
  } while (!atomic_compare_exchange_weak_explicit(&sub->calls, &s, n, memory_order_acq_rel,
                                                  memory_order_relaxed));
  return n & CALLS_DUE;
}

/* A submission still running is called back at the next drain (after its running callback
 * returned), and its work retires when it finishes; one that finished already is called back
 * with CUV_ECANCELED where it waits. Either way it is forgotten (forget), so a second cancel
 * finds nothing. */
CUV_EXTERN int cuv_cancel(cuv_queue_t *q, cuv_ticket_t ticket) {
  if (!q)
    return CUV_EINVAL;
  int rc = CUV_ENOENT;
  pthread_mutex_lock(&q->lock);
  cuv__submission_t *sub = find(q, ticket);
  if (sub) {
    sub->cancelled = true;
    forget(q, sub);
    rc = 0;
    if (!sub->in_done && calls_cancel(sub))
      cancel_due_locked(q, sub);
  }
  pthread_mutex_unlock(&q->lock);
  return rc;
}

void cuv__queue_push(cuv_queue_t *q, cuv__submission_t *sub) {
  if (sub->trace)
    sub->trace->completed_ns = cuv__now_ns();
  sub->next = NULL;
  pthread_mutex_lock(&q->lock);
  bool was_empty = nothing_to_deliver(q);
  sub->in_done = true;
  *q->tail = sub;
  q->tail = &sub->next;
  announce(q, was_empty);
  pthread_mutex_unlock(&q->lock);
}

/* Folds a polled submission's submit-to-drain time into the moving average (one clock read per
 * drain, when it has polled work). Under the lock. */
static void time_polled(cuv_queue_t *q, const cuv__submission_t *sub, uint64_t *now) {
  if (!sub->submitted_ns)
    return;
  if (!*now)
    *now = cuv__now_ns();
  uint64_t took = *now - sub->submitted_ns;
  uint64_t recent = atomic_load_explicit(&q->recent_ns, memory_order_relaxed);
  atomic_store_explicit(&q->recent_ns, recent ? (recent * 7 + took) / 8 : took,
                        memory_order_relaxed);
}

/* The finished submissions, oldest first, at most `max` of them (0: all), and (in *cancels) the
 * cancellations to call back first; from here on they cannot be cancelled. */
/* Up to max cancellations (0: all), oldest first; how many. Under the queue's lock. */
static unsigned take_cancels(cuv_queue_t *q, cuv__submission_t **cancels, unsigned max) {
  unsigned n = 0;
  cuv__submission_t **end = &q->cancels;
  for (; *end && (max == 0 || n < max); n++)
    end = &(*end)->cancel_next;
  *cancels = q->cancels;
  q->cancels = *end; /* what is left stays queued, in order */
  *end = NULL;
  if (!q->cancels)
    q->cancels_tail = &q->cancels;
  return n;
}

static cuv__submission_t *take(cuv_queue_t *q, cuv__submission_t **cancels, unsigned max) {
  uint64_t now = 0;
  pthread_mutex_lock(&q->lock);
  unsigned n = take_cancels(q, cancels, max);
  cuv__submission_t *list = q->head, **end = &q->head;
  for (; *end && (max == 0 || n < max); n++) {
    forget(q, *end);
    time_polled(q, *end, &now);
    end = &(*end)->next;
  }
  if (end == &q->head) {
    list = NULL; /* nothing finished */
  } else {
    q->head = *end; /* what is left stays queued, in order */
    *end = NULL;
    if (!q->head)
      q->tail = &q->head;
  }
  /* Cleared only when nothing is left, under the lock that every push takes: a completion pushed
   * after this finds the queue empty and makes it readable again, so none is missed. */
  cuv__queue_fd_mirror(&q->readiness, !nothing_to_deliver(q));
  pthread_mutex_unlock(&q->lock); /* nothing of q read after this: pushes go on meanwhile */
  return list;
}

/* Runs the callback; a cancelled submission reports CUV_ECANCELED without its output. The
 * status that decides retirement stays the real one (a fault still leaks). */
/* A cancellation of running work: its callback now, with no output (the work may still be
 * writing it); the submission retires when it finishes, without a second call. */
static void deliver_cancel(cuv__submission_t *sub) {
  cuv_output_t none = {0};
  sub->callback_ran = true;
  if (sub->trace) /* its work may still be passing stages: none of them is read here */
    sub->trace_out->called_ns = cuv__now_ns();
  sub->done(CUV_ECANCELED, &none, sub->done_arg);
  cuv_output_release(&none);
}

/* The caller's stage times, copied out before the submission goes, unless a cancel called back
 * already (its trace may be gone); NULL then, and when untraced. */
static cuv_trace_t *trace_out(cuv__submission_t *sub) {
  if (!sub->trace || sub->callback_ran)
    return NULL;
  *sub->trace_out = sub->trace_data;
  return sub->trace_out;
}

/* A finished submission: what it holds is released first (the callback may free or reuse
 * whatever the work used), then its callback runs, unless a cancel ran it. */
static void deliver(cuv__submission_t *sub) {
  cuv_done_fn done = sub->done;
  void *arg = sub->done_arg;
  cuv_trace_t *trace = trace_out(sub);
  bool called = sub->callback_ran, cancelled = sub->cancelled;
  int status = cancelled ? CUV_ECANCELED : sub->status;
  cuv_output_t out = sub->output;
  if (cancelled || called)
    cuv_output_release(&out);
  sub->output = (cuv_output_t){0};
  cuv__sub_finish(sub, sub->status);
  if (trace)
    trace->called_ns = cuv__now_ns();
  if (!called)
    done(status, &out, arg);
  if (out.release)
    cuv_output_release(&out); /* unless the callback took it */
}

bool cuv__queue_ready(const cuv_queue_t *q) {
  cuv_queue_t *mq = (cuv_queue_t *)q; /* the lock, not the contents */
  pthread_mutex_lock(&mq->lock);
  bool ready = !nothing_to_deliver(mq);
  pthread_mutex_unlock(&mq->lock);
  return ready;
}

int cuv__queue_drain_max(cuv_queue_t *q, unsigned max) {
  int ran = 0;
  cuv__submission_t *cancels, *list = take(q, &cancels, max);
  for (cuv__submission_t *sub = cancels, *next; sub; sub = next, ran++) {
    next = sub->cancel_next; /* it stays pending: its work has not finished */
    deliver_cancel(sub);
  }
  while (list) {
    cuv__submission_t *sub = list;
    list = sub->next;
    bool called = sub->callback_ran;
    /* Counted out before its callback, which may then destroy the queue once it was the last. */
    atomic_fetch_sub(&q->pending, 1);
    deliver(sub);
    ran += !called;
  }
  return ran;
}

CUV_EXTERN int cuv_queue_drain(cuv_queue_t *q) {
  return q ? cuv__queue_drain_max(q, 0) : CUV_EINVAL;
}

CUV_EXTERN int cuv_queue_fd(cuv_queue_t *q, int *fd) {
  if (!q || !fd)
    return CUV_EINVAL;
  pthread_mutex_lock(&q->lock); /* concurrent first calls make one, showing the queue as it is */
  int rc = cuv__queue_fd_open(&q->readiness, !nothing_to_deliver(q));
  if (rc == 0)
    *fd = q->readiness.fd;
  pthread_mutex_unlock(&q->lock);
  return rc;
}

CUV_EXTERN unsigned cuv_queue_pending(const cuv_queue_t *q) {
  return q ? atomic_load(&((cuv_queue_t *)q)->pending) : 0;
}

static void deadline_after(struct timespec *t, int timeout_ms) {
  clock_gettime(CLOCK_REALTIME, t);
  t->tv_sec += timeout_ms / 1000;
  t->tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (t->tv_nsec >= 1000000000L) {
    t->tv_sec++;
    t->tv_nsec -= 1000000000L;
  }
}

CUV_EXTERN int cuv_queue_wait(cuv_queue_t *q, int timeout_ms) {
  if (!q)
    return CUV_EINVAL;
  struct timespec deadline;
  if (timeout_ms >= 0)
    deadline_after(&deadline, timeout_ms);
  int rc = 0;
  pthread_mutex_lock(&q->lock);
  q->waiters++;
  while (nothing_to_deliver(q) && rc == 0) {
    if (timeout_ms < 0)
      pthread_cond_wait(&q->cond, &q->lock);
    else if (pthread_cond_timedwait(&q->cond, &q->lock, &deadline) == ETIMEDOUT)
      rc = nothing_to_deliver(q) ? CUV_EBUSY : 0;
  }
  q->waiters--;
  pthread_mutex_unlock(&q->lock);
  return rc;
}

CUV_EXTERN void cuv_queue_close(cuv_queue_t *q) {
  if (!q)
    return;
  pthread_mutex_lock(&q->lock);
  atomic_store(&q->closed, true);
  pthread_mutex_unlock(&q->lock);
}

CUV_EXTERN int cuv_queue_destroy(cuv_queue_t *q) {
  if (!q)
    return CUV_EINVAL;
  /* Under the lock: a notify still running (cuv__queue_leave's, or the last push's) ends first. */
  pthread_mutex_lock(&q->lock);
  unsigned pending = atomic_load(&q->pending);
  pthread_mutex_unlock(&q->lock);
  if (pending != 0)
    return CUV_EBUSY;
  cuv__queue_fd_close(&q->readiness); /* nothing pending: nothing will push and set it */
  cuv__tickets_free(&q->tickets);
  pthread_cond_destroy(&q->cond);
  pthread_mutex_destroy(&q->lock);
  free(q);
  return 0;
}
