/* The feeder (feeder.h). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "feeder.h"

#define SPIN_NS 200000ull /* after its last job, the thread looks for more this long, then parks */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

cuv_op_t *cuv_node_feed_op(cuv_node_feed_t *job) {
  if (!job->op && job->build) {
    job->op = job->build(job->recipe);
    job->build = NULL;
  }
  return job->op;
}

/* ---- the thread ---- */

/* The jobs pushed so far, oldest first (the stack holds them newest first). */
static cuv_node_feed_t *take_incoming(cuv_node_feeder_t *f) {
  cuv_node_feed_t *job = atomic_exchange_explicit(&f->incoming, NULL, memory_order_acquire);
  cuv_node_feed_t *oldest_first = NULL;
  while (job) {
    cuv_node_feed_t *next = job->next;
    job->next = oldest_first;
    oldest_first = job;
    job = next;
  }
  return oldest_first;
}

static void give_back(cuv_node_feeder_t *f, cuv_node_feed_t *job) {
  cuv_node_feed_t *head = atomic_load_explicit(&f->returned, memory_order_relaxed);
  do
    job->next = head;
  while (!atomic_compare_exchange_weak_explicit(&f->returned, &head, job, memory_order_release,
                                                memory_order_relaxed));
  uv_async_send(&f->refusals);
}

/* Submits jobs in order. The job is the loop's once submitted (its callback may have run and
 * freed it), so its successor is read first. */
static void feed(cuv_node_feeder_t *f, cuv_node_feed_t *job) {
  /* The loop polls for them as for its own (cuv_queue_poll times every submission of its
   * queue): no wake-up per completion. */
  for (cuv_node_feed_t *next; job; job = next) {
    next = job->next;
    /* Counted before the submission: its callback may run on the loop before this returns, and
     * whoever saw the callback must see it counted (tests/uv/node-feeder.c). */
    atomic_fetch_add_explicit(&f->fed, 1, memory_order_relaxed);
    int rc = cuv_uv_submit(f->bridge, cuv_node_feed_op(job), job->done, job->arg, NULL);
    if (rc < 0) {
      job->status = rc;
      give_back(f, job);
    }
    atomic_fetch_add_explicit(&f->submitted, 1, memory_order_release);
  }
}

/* Waits for jobs or the stop. The loop pushes, then reads `parked`; this thread sets `parked`,
 * then reads the stack under the lock the loop signals under: one of them sees the other. */
static void park(cuv_node_feeder_t *f) {
  pthread_mutex_lock(&f->park_lock);
  atomic_store(&f->parked, true);
  while (!atomic_load(&f->incoming) && !atomic_load(&f->stop))
    pthread_cond_wait(&f->park_cond, &f->park_lock);
  atomic_store(&f->parked, false);
  pthread_mutex_unlock(&f->park_lock);
}

/* A test's pause after a look that found nothing (feeder.h); nothing in any other build. */
static void looked_empty(cuv_node_feeder_t *f) {
#ifdef CUV_NODE_FEEDER_TEST_HOOK
  cuv_node_feeder_test_looked(f);
#else
  (void)f;
#endif
}

static void *feeder_main(void *arg) {
  cuv_node_feeder_t *f = arg;
  uint64_t last_job = now_ns();
  for (;;) {
    /* The stop is read before the look: the loop pushes its last jobs and then stops, so a look
     * made after the stop was seen finds them all. Read after the look, a stop could follow
     * jobs pushed since the look came up empty, and the thread would end holding them. */
    bool stopping = atomic_load(&f->stop);
    cuv_node_feed_t *jobs = take_incoming(f);
    if (jobs) {
      feed(f, jobs);
      last_job = now_ns();
      continue;
    }
    looked_empty(f);
    if (stopping)
      return NULL;
    if (now_ns() - last_job < SPIN_NS)
      continue;
    park(f);
    last_job = now_ns();
  }
}

static void wake(cuv_node_feeder_t *f) {
  pthread_mutex_lock(&f->park_lock);
  pthread_cond_signal(&f->park_cond);
  pthread_mutex_unlock(&f->park_lock);
}

/* ---- the loop thread ---- */

static void on_refusals(uv_async_t *handle) {
  cuv_node_feeder_t *f = handle->data;
  cuv_node_feed_t *job = atomic_exchange_explicit(&f->returned, NULL, memory_order_acquire);
  for (cuv_node_feed_t *next; job; job = next) {
    next = job->next;
    f->refused(job, f->refused_arg);
  }
}

static bool enabled(void) {
  const char *text = getenv("CUV_NODE_FEEDER");
  return !text || strcmp(text, "0") != 0;
}

void cuv_node_feeder_open(cuv_node_feeder_t *f, uv_loop_t *loop, cuv_uv_t *bridge,
                          void (*refused)(cuv_node_feed_t *job, void *arg), void *arg) {
  memset(f, 0, sizeof *f);
  f->bridge = bridge;
  f->refused = refused;
  f->refused_arg = arg;
  pthread_mutex_init(&f->park_lock, NULL);
  pthread_cond_init(&f->park_cond, NULL);
  f->enabled = enabled() && uv_async_init(loop, &f->refusals, on_refusals) == 0;
  if (f->enabled) {
    f->refusals.data = f;
    uv_unref((uv_handle_t *)&f->refusals); /* referenced while jobs handed over are unsettled */
    f->open = true;
  }
}

static bool start(cuv_node_feeder_t *f) {
  if (!f->started) {
    if (pthread_create(&f->thread, NULL, feeder_main, f) != 0) {
      f->enabled = false; /* the loop thread submits everything, as without a feeder */
      return false;
    }
    pthread_setname_np(f->thread, "cuv-node-feed");
    f->started = true;
  }
  return true;
}

static bool caught_up(cuv_node_feeder_t *f) {
  return atomic_load_explicit(&f->submitted, memory_order_acquire) == f->pushed;
}

/* Whether the job goes to the feeder: while it is awake (`parked` is written once per sleep, so
 * this look costs no cache miss per call), while it holds jobs (their order), or once enough are
 * in flight. */
static bool wanted(cuv_node_feeder_t *f) {
  if (!f->enabled)
    return false;
  if ((f->started && !atomic_load_explicit(&f->parked, memory_order_relaxed)) || !caught_up(f))
    return true;
  return cuv_uv_pending(f->bridge) >= CUV_NODE_FEED_FROM && start(f);
}

static void push(cuv_node_feeder_t *f, cuv_node_feed_t *job) {
  if (f->outstanding++ == 0)
    uv_ref((uv_handle_t *)&f->refusals); /* until it settles: the bridge may not count it yet */
  f->pushed++;
  cuv_node_feed_t *head = atomic_load_explicit(&f->incoming, memory_order_relaxed);
  do
    job->next = head;
  while (!atomic_compare_exchange_weak_explicit(&f->incoming, &head, job, memory_order_seq_cst,
                                                memory_order_relaxed));
  if (atomic_load(&f->parked)) /* after the push (seq_cst both): park() sees one or the other */
    wake(f);
}

int cuv_node_feeder_submit(cuv_node_feeder_t *f, cuv_node_feed_t *job, bool own,
                           cuv_submit_opts_t *opts) {
  if (!own && wanted(f)) {
    push(f, job);
    return 1;
  }
  cuv_node_feeder_catch_up(f);
  return cuv_uv_submit(f->bridge, cuv_node_feed_op(job), job->done, job->arg, opts);
}

void cuv_node_feeder_catch_up(cuv_node_feeder_t *f) {
  while (!caught_up(f))
    sched_yield(); /* the feeder is submitting what it was given: not for long */
}

void cuv_node_feeder_finished(cuv_node_feeder_t *f) {
  if (--f->outstanding == 0 && f->open)
    uv_unref((uv_handle_t *)&f->refusals);
}

static void on_closed(uv_handle_t *handle) {
  cuv_node_feeder_t *f = handle->data;
  f->closed(f->closed_arg);
}

void cuv_node_feeder_close(cuv_node_feeder_t *f, void (*closed)(void *arg), void *arg) {
  if (f->started) {
    atomic_store(&f->stop, true);
    wake(f);
    pthread_join(f->thread, NULL);
    f->started = false;
  }
  f->enabled = false;
  if (!f->open) {
    closed(arg);
    return;
  }
  on_refusals(&f->refusals); /* what the bridge refused last, which no async callback saw */
  f->open = false;
  f->closed = closed;
  f->closed_arg = arg;
  uv_close((uv_handle_t *)&f->refusals, on_closed);
}

uint64_t cuv_node_feeder_fed(const cuv_node_feeder_t *f) {
  return atomic_load_explicit(&((cuv_node_feeder_t *)f)->fed, memory_order_relaxed);
}
