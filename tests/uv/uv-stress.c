/* The libuv bridge fed from other threads: the reactor stress test (4 threads, 10,000 tiny
 * submissions, each callback counted exactly once on the loop thread; run it under TSan), and the
 * rules by which work from other threads keeps the loop alive (include/cuv/uv.h): submitted
 * before the first uv_run, or while the loop runs for something else that then goes away. */
#include <pthread.h>

#include "uvt.h"

#define THREADS 4
#define PER_THREAD 2500

typedef struct stress {
  uvt_loop_t *l;
  uvt_call_t *calls; /* THREADS * PER_THREAD */
  unsigned per_thread;
  atomic_int refused;
  /* The loop stays alive until every submitter is done (it cannot know of work to come). */
  uv_async_t submitters;
  uv_mutex_t lock;
  int finished; /* under lock, with the send */
} stress_t;

typedef struct worker {
  stress_t *s;
  unsigned first;
  pthread_t thread;
} worker_t;

static void *submitter(void *arg) {
  worker_t *w = arg;
  stress_t *s = w->s;
  for (unsigned i = 0; i < s->per_thread; i++) {
    unsigned idx = w->first + i;
    /* Mostly host values; every eighth also runs a kernel before its value. */
    cuv_op_t *op = uvt_value((int)idx);
    if (i % 8 == 0)
      op = cuv_seq(uvt_empty_kernel(), op);
    if (cuv_uv_submit(s->l->bridge, op, uvt_done, &s->calls[idx], NULL) != 0)
      atomic_fetch_add(&s->refused, 1);
  }
  if (s->submitters.loop) {
    uv_mutex_lock(&s->lock);
    s->finished++;
    uv_async_send(&s->submitters);
    uv_mutex_unlock(&s->lock);
  }
  return NULL;
}

static void on_submitters(uv_async_t *handle) {
  stress_t *s = handle->data;
  uv_mutex_lock(&s->lock);
  bool all = s->finished == THREADS;
  uv_mutex_unlock(&s->lock);
  if (all)
    uv_close((uv_handle_t *)handle, NULL);
}

static void start_workers(stress_t *s, worker_t *w) {
  for (unsigned t = 0; t < THREADS; t++) {
    w[t] = (worker_t){.s = s, .first = t * s->per_thread};
    assert_int_equal(pthread_create(&w[t].thread, NULL, submitter, &w[t]), 0);
  }
}

static void join_workers(worker_t *w) {
  for (unsigned t = 0; t < THREADS; t++)
    assert_int_equal(pthread_join(w[t].thread, NULL), 0);
}

static void assert_every_call_once(stress_t *s) {
  unsigned n = THREADS * s->per_thread;
  assert_int_equal(atomic_load(&s->refused), 0);
  uvt_assert_all_ok(s->calls, n);
  for (unsigned i = 0; i < n; i++)
    assert_int_equal(s->calls[i].payload, (int)i);
  uvt_release_outputs(s->calls, n);
}

static void test_four_threads_ten_thousand(void **state) {
  uvt_loop_t l;
  uvt_open(&l);
  stress_t s = {.l = &l, .per_thread = PER_THREAD};
  s.calls = calloc(THREADS * PER_THREAD, sizeof *s.calls);
  for (unsigned i = 0; i < THREADS * PER_THREAD; i++)
    s.calls[i].loop = &l;
  assert_int_equal(uv_mutex_init(&s.lock), 0);
  assert_int_equal(uv_async_init(&l.loop, &s.submitters, on_submitters), 0);
  s.submitters.data = &s;
  cuv_stats_t before;
  cuv_stats(&before);

  worker_t w[THREADS];
  start_workers(&s, w);
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0); /* drains while they submit */
  join_workers(w);

  assert_int_equal(cuv_uv_pending(l.bridge), 0);
  assert_every_call_once(&s);
  cuv_stats_t d = uvt_stats_delta(&before);
  print_message("# reactor %llu, hostfn %llu, fallbacks %llu\n",
                (unsigned long long)d.completed_reactor, (unsigned long long)d.completed_hostfn,
                (unsigned long long)d.fallbacks);
  assert_int_equal(d.completed_reactor + d.completed_hostfn, THREADS * PER_THREAD);
  assert_int_equal(d.completed_spin, 0);
  uv_mutex_destroy(&s.lock);
  free(s.calls);
  uvt_close(&l);
}

/* Work other threads submitted before the loop first ran keeps that run alive: the bridge counts
 * as busy until the loop first looked. */
static void test_submitted_before_first_run(void **state) {
  uvt_loop_t l;
  uvt_open(&l);
  stress_t s = {.l = &l, .per_thread = 100};
  s.calls = calloc(THREADS * s.per_thread, sizeof *s.calls);
  for (unsigned i = 0; i < THREADS * s.per_thread; i++)
    s.calls[i].loop = &l;
  worker_t w[THREADS];
  start_workers(&s, w);
  join_workers(w); /* everything submitted before uv_run */
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(cuv_uv_pending(l.bridge), 0);
  assert_every_call_once(&s);
  free(s.calls);
  uvt_close(&l);
}

/* A backlog of thousands of completions reaches the loop in slices (uv/bridge.c: callbacks for
 * about 0.1 ms per look, cuv_queue_poll reading the clock every 16 callbacks, at most two looks
 * that deliver in one iteration), so the loop's timers and I/O run between them: the loop is run
 * one iteration at a time (UV_RUN_ONCE) and each iteration's deliveries are counted from the
 * callbacks' sequence numbers. Each callback takes at least CALLBACK_NS on the clock, so a look
 * runs at most 4 slices of 16 (64 callbacks), an iteration at most 128, however fast or loaded
 * the machine: the count is bounded by the clock the budget reads, no timing is asserted. An
 * undivided drain would deliver the whole backlog in one iteration. */
#define BACKLOG 3000
#define PER_ITERATION_MAX 256
#define CALLBACK_NS 2000u

static uint64_t clock_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void slow_done(int status, cuv_output_t *output, void *arg) {
  uint64_t start = clock_ns();
  while (clock_ns() - start < CALLBACK_NS)
    ;
  uvt_done(status, output, arg);
}

static void test_backlog_in_slices(void **state) {
  (void)state;
  uvt_loop_t l;
  uvt_open(&l);
  uvt_call_t *calls = calloc(BACKLOG, sizeof *calls);
  assert_non_null(calls);
  for (unsigned i = 0; i < BACKLOG; i++) {
    calls[i].loop = &l;
    assert_cuv_ok(cuv_uv_submit(l.bridge, uvt_value((int)i), slow_done, &calls[i], NULL));
  }
  unsigned most = 0, iterations = 0, delivered_all = 0;
  while (delivered_all < BACKLOG) {
    uint64_t seq = uvt_seq();
    uv_run(&l.loop, UV_RUN_ONCE);
    unsigned delivered = 0;
    for (unsigned i = 0; i < BACKLOG; i++)
      delivered += calls[i].seq > seq;
    most = delivered > most ? delivered : most;
    iterations += delivered > 0;
    delivered_all += delivered;
  }
  uvt_assert_all_ok(calls, BACKLOG);
  for (unsigned i = 0; i < BACKLOG; i++)
    assert_int_equal(calls[i].payload, (int)i);
  uvt_release_outputs(calls, BACKLOG);
  print_message("# %u iterations delivered the %u completions, at most %u in one\n", iterations,
                BACKLOG, most);
  assert_true(most <= PER_ITERATION_MAX);
  assert_true(iterations >= BACKLOG / PER_ITERATION_MAX);
  free(calls);
  uvt_close(&l);
}

/* The loop runs only for a timer; another thread submits slow work, and the timer then goes away.
 * The bridge saw the work at the end of the timer's iteration and keeps the loop alive for it. */
typedef struct foreign {
  uvt_loop_t *l;
  uvt_call_t call;
  cuv_buffer_t *buf;
  int rc;
  pthread_t thread;
  uv_timer_t timer;
} foreign_t;

static void *submit_slow(void *arg) {
  foreign_t *f = arg;
  f->rc = cuv_uv_submit(f->l->bridge, uvt_slow_write_then_read(100, 77, f->buf), uvt_done,
                        &f->call, NULL);
  return NULL;
}

static void on_timer(uv_timer_t *t) {
  foreign_t *f = t->data;
  pthread_join(f->thread, NULL); /* the submission happened before this */
  uv_close((uv_handle_t *)t, NULL);
}

static void test_foreign_work_outlives_other_handles(void **state) {
  uvt_loop_t l;
  uvt_open(&l);
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0); /* the bridge has looked: idle now */
  foreign_t f = {.l = &l, .call = {.loop = &l}, .buf = uvt_buffer(sizeof(unsigned))};
  f.timer.data = &f;
  assert_int_equal(uv_timer_init(&l.loop, &f.timer), 0);
  assert_int_equal(uv_timer_start(&f.timer, on_timer, 1, 0), 0);
  assert_int_equal(pthread_create(&f.thread, NULL, submit_slow, &f), 0);
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(f.rc, 0);
  uvt_assert_all_ok(&f.call, 1);
  assert_int_equal(f.call.payload, 77);
  uvt_release_outputs(&f.call, 1);
  cuv_buffer_unref(f.buf);
  uvt_close(&l);
}

/* Submitting from another thread after cuv_uv_close is refused; nothing leaks. */
static void *submit_one_value(void *arg) {
  foreign_t *f = arg;
  f->rc = cuv_uv_submit(f->l->bridge, uvt_value(3), uvt_done, &f->call, NULL);
  return NULL;
}

static void test_foreign_submit_after_close(void **state) {
  uvt_loop_t l;
  uvt_open(&l);
  foreign_t f = {.l = &l, .call = {.loop = &l}};
  assert_cuv_ok(cuv_uv_close(l.bridge, uvt_on_close, &l));
  assert_int_equal(pthread_create(&f.thread, NULL, submit_one_value, &f), 0);
  assert_int_equal(pthread_join(f.thread, NULL), 0);
  assert_int_equal(f.rc, CUV_ECLOSED);
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(f.call.calls, 0);
  assert_int_equal(l.close_calls, 1);
  assert_int_equal(uv_loop_close(&l.loop), 0);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_four_threads_ten_thousand),
      cmocka_unit_test(test_submitted_before_first_run),
      cmocka_unit_test(test_foreign_work_outlives_other_handles),
      cmocka_unit_test(test_foreign_submit_after_close),
      cmocka_unit_test(test_backlog_in_slices),
  };
  return cuvt_run(tests);
}
