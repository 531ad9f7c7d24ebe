/* The completion queue: the loop-agnostic delivery point. Completing threads push finished
 * submissions and notify the owner once per empty-to-non-empty transition (sends coalesce, as
 * with uv_async_send); the owner drains the whole queue on its own thread, where the callbacks
 * run and the submissions retire (retirement may call the driver, so it never happens on the
 * reactor or the driver's callback thread). */
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
  q->notify = notify;
  q->notify_arg = notify_arg;
  *out = q;
  return 0;
}

void cuv__queue_accept(cuv_queue_t *q, cuv__submission_t *sub) {
  pthread_mutex_lock(&q->lock);
  sub->ticket = ++q->last_ticket;
  sub->live_prev = NULL;
  sub->live_next = q->live;
  if (q->live)
    q->live->live_prev = sub;
  q->live = sub;
  atomic_fetch_add(&q->pending, 1);
  pthread_mutex_unlock(&q->lock);
}

static void live_unlink(cuv_queue_t *q, cuv__submission_t *sub) {
  if (sub->live_prev)
    sub->live_prev->live_next = sub->live_next;
  else
    q->live = sub->live_next;
  if (sub->live_next)
    sub->live_next->live_prev = sub->live_prev;
}

CUV_EXTERN int cuv_cancel(cuv_queue_t *q, cuv_ticket_t ticket) {
  if (!q)
    return CUV_EINVAL;
  int rc = CUV_ENOENT;
  pthread_mutex_lock(&q->lock);
  for (cuv__submission_t *sub = q->live; sub; sub = sub->live_next) {
    if (sub->ticket == ticket) {
      sub->cancelled = true;
      rc = 0;
      break;
    }
  }
  pthread_mutex_unlock(&q->lock);
  return rc;
}

void cuv__queue_push(cuv_queue_t *q, cuv__submission_t *sub) {
  sub->next = NULL;
  pthread_mutex_lock(&q->lock);
  bool was_empty = q->head == NULL;
  *q->tail = sub;
  q->tail = &sub->next;
  if (was_empty && q->notify)
    q->notify(q, q->notify_arg);
  if (q->waiters)
    pthread_cond_broadcast(&q->cond);
  pthread_mutex_unlock(&q->lock);
}

/* Takes every finished submission; from here on they cannot be cancelled. */
static cuv__submission_t *take_all(cuv_queue_t *q) {
  pthread_mutex_lock(&q->lock);
  cuv__submission_t *list = q->head;
  q->head = NULL;
  q->tail = &q->head;
  for (cuv__submission_t *sub = list; sub; sub = sub->next)
    live_unlink(q, sub);
  pthread_mutex_unlock(&q->lock);
  return list;
}

/* Runs the callback; a cancelled submission reports CUV_ECANCELED without its output. The
 * status that decides retirement stays the real one (a fault still leaks). */
static void deliver(cuv__submission_t *sub) {
  if (sub->cancelled) {
    cuv_output_release(&sub->output);
    sub->done(CUV_ECANCELED, &sub->output, sub->done_arg);
  } else {
    sub->done(sub->status, &sub->output, sub->done_arg);
  }
  cuv_output_release(&sub->output); /* unless the callback took it */
}

CUV_EXTERN int cuv_queue_drain(cuv_queue_t *q) {
  if (!q)
    return CUV_EINVAL;
  int ran = 0;
  cuv__submission_t *list = take_all(q);
  while (list) {
    cuv__submission_t *sub = list;
    list = sub->next;
    deliver(sub);
    cuv__sub_finish(sub, sub->status);
    atomic_fetch_sub(&q->pending, 1);
    ran++;
  }
  return ran;
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
  while (!q->head && rc == 0) {
    if (timeout_ms < 0)
      pthread_cond_wait(&q->cond, &q->lock);
    else if (pthread_cond_timedwait(&q->cond, &q->lock, &deadline) == ETIMEDOUT)
      rc = q->head ? 0 : CUV_EBUSY;
  }
  q->waiters--;
  pthread_mutex_unlock(&q->lock);
  return rc;
}

CUV_EXTERN void cuv_queue_close(cuv_queue_t *q) {
  if (q)
    atomic_store(&q->closed, true);
}

CUV_EXTERN int cuv_queue_destroy(cuv_queue_t *q) {
  if (!q)
    return CUV_EINVAL;
  if (atomic_load(&q->pending) != 0)
    return CUV_EBUSY;
  pthread_cond_destroy(&q->cond);
  pthread_mutex_destroy(&q->lock);
  free(q);
  return 0;
}
