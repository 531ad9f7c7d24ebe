/* Stage times of a submission (cuv_submit_opts_t.trace): every traced submission, through a
 * queue from two threads and through the libuv bridge, arrives at its callback with
 * submitted <= started <= enqueued <= completed <= called, all set, and its data checked against
 * the host's; a refused one has only submitted_ns; a cancelled one has only submitted_ns and
 * called_ns at its callback, and nothing is written into its trace afterwards, when its work
 * ends. The callbacks copy what they see; the test thread asserts. Run once per completion path
 * (meson.build: the default, spin 0, host sync, no submitter threads). */
#include "counted.h"
#include "uvt.h"

#include <pthread.h>

#define N 257     /* elements per buffer */
#define PER 200   /* submissions per thread */
#define THREADS 2

typedef struct traced {
  cuv_trace_t trace;
  cuv_trace_t seen; /* the trace as the callback saw it */
  int status;
  atomic_int calls;
  unsigned got[N];
  unsigned want;
} traced_t;

static void on_traced(int status, cuv_output_t *out, void *arg) {
  traced_t *t = arg;
  t->seen = t->trace;
  t->status = status;
  if (status == 0 && out->data)
    memcpy(t->got, out->data, sizeof t->got);
  atomic_fetch_add(&t->calls, 1);
}

/* Fills a buffer with the job's value and downloads it. */
static cuv_op_t *fill_and_read(cuv_buffer_t *buf, unsigned value) {
  return cuv_seq(cuvt_fill_u32(buf, N, value), cuv_download(buf, 0, N * sizeof(unsigned)));
}

static void assert_stages(const traced_t *t) {
  const cuv_trace_t *s = &t->seen;
  assert_int_equal(atomic_load(&t->calls), 1);
  assert_int_equal(t->status, 0);
  for (int i = 0; i < N; i++)
    assert_int_equal(t->got[i], t->want);
  assert_true(s->submitted_ns > 0);
  assert_true(s->submitted_ns <= s->started_ns);
  assert_true(s->started_ns <= s->enqueued_ns);
  assert_true(s->enqueued_ns <= s->completed_ns);
  assert_true(s->completed_ns <= s->called_ns);
  cuv_config_t c;
  assert_cuv_ok(cuv_config_get(&c));
  if (c.submit_threads == 0)
    assert_true(s->ran_here);
}

/* ---- through a queue, from two threads ---- */

typedef struct worker {
  cuv_queue_t *q;
  traced_t jobs[PER];
  cuv_buffer_t *bufs[PER];
  unsigned base;
} worker_t;

static void *submit_all(void *arg) {
  worker_t *w = arg;
  for (int i = 0; i < PER; i++) {
    traced_t *t = &w->jobs[i];
    t->want = w->base + (unsigned)cuvt_random_u32() % 100000u;
    cuv_submit_opts_t opts = {.trace = &t->trace};
    if (cuv_submit(w->q, fill_and_read(w->bufs[i], t->want), on_traced, t, &opts) != 0)
      t->status = -1; /* asserted on the test thread */
    if (i % 16 == 15)
      cuvt_drain_until(w->q, &w->jobs[i - 15].calls, 1);
  }
  for (int i = 0; i < PER; i++)
    cuvt_drain_until(w->q, &w->jobs[i].calls, 1);
  return NULL;
}

static void test_queue_traces_from_threads(void **state) {
  static worker_t workers[THREADS];
  pthread_t threads[THREADS];
  for (int k = 0; k < THREADS; k++) {
    worker_t *w = &workers[k];
    memset(w, 0, sizeof *w);
    w->base = (unsigned)k * 1000000u;
    assert_cuv_ok(cuv_queue_create(&w->q, NULL, NULL));
    for (int i = 0; i < PER; i++)
      w->bufs[i] = cuvt_buffer(N * sizeof(unsigned));
  }
  for (int k = 0; k < THREADS; k++)
    assert_int_equal(pthread_create(&threads[k], NULL, submit_all, &workers[k]), 0);
  for (int k = 0; k < THREADS; k++)
    assert_int_equal(pthread_join(threads[k], NULL), 0);
  for (int k = 0; k < THREADS; k++) {
    for (int i = 0; i < PER; i++) {
      assert_stages(&workers[k].jobs[i]);
      cuv_buffer_unref(workers[k].bufs[i]);
    }
    assert_cuv_ok(cuv_queue_destroy(workers[k].q));
  }
}

/* ---- refused, and cancelled ---- */

static void test_refused_has_only_submitted(void **state) {
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  traced_t t = {0};
  memset(&t.trace, 0xff, sizeof t.trace); /* cleared by cuv_submit */
  cuv_submit_opts_t opts = {.trace = &t.trace};
  assert_int_equal(cuv_submit(q, cuv_fail(CUV_EINVAL), on_traced, &t, &opts), CUV_EINVAL);
  assert_true(t.trace.submitted_ns > 0 && t.trace.submitted_ns != UINT64_MAX);
  assert_int_equal(t.trace.started_ns, 0);
  assert_int_equal(t.trace.enqueued_ns, 0);
  assert_int_equal(t.trace.completed_ns, 0);
  assert_int_equal(t.trace.called_ns, 0);
  assert_int_equal(atomic_load(&t.calls), 0);
  assert_cuv_ok(cuv_queue_destroy(q));
}

static void test_cancelled_trace_not_written_after_callback(void **state) {
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  traced_t t = {0};
  cuv_ticket_t ticket = 0;
  cuv_submit_opts_t opts = {.trace = &t.trace, .ticket = &ticket};
  assert_cuv_ok(cuv_submit(q, cuvt_sleep(200), on_traced, &t, &opts));
  assert_cuv_ok(cuv_cancel(q, ticket));
  cuvt_drain_until(q, &t.calls, 1);
  assert_int_equal(t.status, CUV_ECANCELED);
  assert_true(t.seen.submitted_ns > 0);
  assert_true(t.seen.called_ns >= t.seen.submitted_ns);
  cuv_trace_t at_callback = t.trace;
  cuvt_drain_until_retired(q); /* the sleep ends, and the submission retires */
  assert_memory_equal(&t.trace, &at_callback, sizeof at_callback);
  assert_int_equal(atomic_load(&t.calls), 1);
  assert_cuv_ok(cuv_queue_destroy(q));
}

/* ---- through the libuv bridge ---- */

static void test_bridge_traces(void **state) {
  enum { JOBS = 64 };
  uvt_loop_t l;
  uvt_open(&l);
  static traced_t jobs[JOBS];
  cuv_buffer_t *bufs[JOBS];
  memset(jobs, 0, sizeof jobs);
  for (int i = 0; i < JOBS; i++) {
    bufs[i] = cuvt_buffer(N * sizeof(unsigned));
    jobs[i].want = (unsigned)cuvt_random_u32();
    cuv_submit_opts_t opts = {.trace = &jobs[i].trace};
    assert_cuv_ok(cuv_uv_submit(l.bridge, fill_and_read(bufs[i], jobs[i].want), on_traced,
                                &jobs[i], &opts));
  }
  uvt_close(&l);
  for (int i = 0; i < JOBS; i++) {
    assert_stages(&jobs[i]);
    cuv_buffer_unref(bufs[i]);
  }
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_queue_traces_from_threads),
      cmocka_unit_test(test_refused_has_only_submitted),
      cmocka_unit_test(test_cancelled_trace_not_written_after_callback),
      cmocka_unit_test(test_bridge_traces),
  };
  return cuvt_run(tests);
}
