#ifndef CUV_LIB_QUEUE_H
#define CUV_LIB_QUEUE_H

/* The completion queue (lib/queue.c): where finished submissions wait for their owner's drain.
 * It also counts its submissions in flight and times the ones its owner polls for, so an owner
 * (the libuv bridge, uv/bridge.c) keeps no per-submission state of its own. */

#include "queue_fd.h"
#include "tickets.h"

struct cuv_queue_s {
  pthread_mutex_t lock;
  pthread_cond_t cond;        /* for cuv_queue_wait */
  cuv__submission_t *head;    /* finished, not yet drained (FIFO) */
  cuv__submission_t **tail;
  atomic_uint pending;        /* counted in by cuv__queue_enter, out before the callback runs */
  atomic_bool closed;         /* set under the lock: cuv__queue_enter refuses from then on */
  unsigned waiters;
  /* The submissions cuv_cancel can find, accepted and not yet drained: those whose caller asked
   * for their ticket, by ticket, and the few the index had no memory for, in a list (lock). */
  cuv__tickets_t tickets;
  cuv__submission_t *live;
  cuv__submission_t *cancels; /* cancelled before they finished: called back at the next drain */
  cuv__submission_t **cancels_tail;
  cuv_ticket_t last_ticket; /* lock */
  cuv_notify_fn notify;
  void *notify_arg;
  /* Moving average of polled work's submit-to-drain time: written under the lock, read without
   * it by cuv__queue_accept (relaxed: an estimate). */
  _Atomic uint64_t recent_ns;
  _Atomic uint64_t young_until; /* cuv__now_ns() until which polled work counts as young */
  atomic_bool polled;          /* its owner called cuv_queue_poll: its submissions are timed */
  cuv__queue_fd_t readiness;   /* cuv_queue_fd's descriptor (lock): shows !nothing_to_deliver */
};

/* Counts a refused submission out again; notifies when that leaves nothing pending, so an owner
 * waiting for its work to end looks again. */
void cuv__queue_leave(cuv_queue_t *queue);
/* Counts a submission in as cuv_submit starts (before it reaches the queue), or CUV_ECLOSED.
 * Counted in, then the flag read again, both sequentially consistent as are cuv_queue_close's
 * store and a closing owner's later reads of pending: either this entry sees the close, or the
 * owner sees it counted and waits for it. Without the lock, which was a third of the queue's
 * cost per submission (bench/RESULTS.md, cuv-bench-submit); a queue found closed at the first
 * look is not counted at all, so it notifies nothing (uv/bridge.c, finish). Inline: once per
 * submission. */
static inline int cuv__queue_enter(cuv_queue_t *q) {
  if (atomic_load(&q->closed))
    return CUV_ECLOSED;
  atomic_fetch_add(&q->pending, 1);
  if (!atomic_load(&q->closed))
    return 0;
  cuv__queue_leave(q); /* closed meanwhile: counted out again, as a refusal is */
  return CUV_ECLOSED;
}
/* Accepts an entered submission: stamps it when its owner polls the queue. With `ticketed`
 * (its caller asked for its ticket) it also gets its ticket and joins what cuv_cancel finds,
 * under the lock; without, it takes no lock and no atomic operation (bench/RESULTS.md,
 * cuv-bench-submit: the lock was a third of the queue's cost per submission). */
void cuv__queue_accept(cuv_queue_t *queue, cuv__submission_t *sub, bool ticketed);
/* Appends a finished submission; notifies on the empty-to-non-empty transition, under the lock,
 * so an owner that destroyed the queue (which takes the lock) knows no notify is still running. */
void cuv__queue_push(cuv_queue_t *queue, cuv__submission_t *sub);
/* Whether a drain would deliver something now (finished submissions or due cancellations): what
 * the queue's descriptor shows, read under the lock. For cuv_queue_poll's slices. */
bool cuv__queue_ready(const cuv_queue_t *queue);
/* cuv_queue_drain taking at most `max` finished submissions (0: no limit), oldest first, and
 * every cancellation due; the rest wait for the next drain, with no new notify (the descriptor
 * stays readable). How many callbacks ran. The owner's thread; queue is not NULL. */
int cuv__queue_drain_max(cuv_queue_t *queue, unsigned max);
/* Around each user callback of a submission's tree (then, map, with_context, a custom op's
 * execute, a shared clone's making of or wait for its value), on the thread that runs the tree:
 * begin returns CUV_ECANCELED once the submission was cancelled (the callback must not start;
 * the op fails with it), unless the tree is producing a shared op's value (sub->producing), else
 * 0; end, once the callback returned, then delivers a cancellation that came meanwhile (done
 * runs after every callback that started before it). */
int cuv__queue_call_begin(cuv__submission_t *sub);
void cuv__queue_call_end(cuv__submission_t *sub);

#endif
